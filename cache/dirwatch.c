/* cache/dirwatch.c - the cache directory (dirwatch_int.h): the index is
 * opened over it at start - or, when it cannot be used, detached - and a
 * watcher thread looks after it. Every
 * interval (and at once when a fill reports a directory error) it checks
 * the directory it put the index in: still there, the same directory (not
 * deleted, not replaced), writable. A missing one is recreated at once; a
 * read-only or broken one is probed every interval until it works again.
 * Each time the directory comes back the index starts empty (cidx_reset):
 * while it was unusable, invalidations could not be journaled, so nothing
 * found there is trusted.
 *
 * Why a thread that looks rather than inotify: inotify does not see a
 * remount read-only or a failing disk, and a stat plus an access() per
 * second cost nothing; a fill that fails on the directory wakes the thread
 * at once, so a deletion is healed on the first miss after it. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "cache_index.h"
#include "dirwatch_int.h"
#include "log.h"
#include "worker.h"

enum { WHY_LEN = 320 };

struct cache_dirwatch {
    struct cidx *idx;
    const char *dir;              /* the index's (borrowed) */
    unsigned interval_ms;
    cache_dirwatch_claim_cb claim;   /* may be NULL */
    void *claim_arg;
    atomic_bool up;
    atomic_uint_fast64_t resets;

    struct sg_worker wk;          /* its mu guards everything below */
    char why[WHY_LEN];            /* "" while up */
    bool reported;
    dev_t dev;                    /* the directory the index is in, while up */
    ino_t ino;
};

bool cache_dirwatch_up(const struct cache_dirwatch *w)
{
    return atomic_load_explicit(&w->up, memory_order_acquire);
}

uint64_t cache_dirwatch_resets(const struct cache_dirwatch *w)
{
    return atomic_load(&((struct cache_dirwatch *)w)->resets);
}

bool cache_dirwatch_ready(struct cache_dirwatch *w, char *why, size_t len)
{
    pthread_mutex_lock(&w->wk.mu);
    bool up = atomic_load(&w->up);
    if (len)
        snprintf(why, len, "%s", up ? "" : w->why);
    pthread_mutex_unlock(&w->wk.mu);
    return up;
}

void cache_dirwatch_report(struct cache_dirwatch *w, int err)
{
    if (err != ENOENT && err != ENOTDIR && err != EROFS && err != EACCES && err != EPERM &&
        err != EIO)
        return;
    pthread_mutex_lock(&w->wk.mu);
    w->reported = true;
    pthread_cond_signal(&w->wk.cv);
    pthread_mutex_unlock(&w->wk.mu);
}

/* The directory is unusable: reads go to the cold tier. Logged when the
 * reason is new (not every tick of a directory that stays read-only),
 * unless quiet. */
static void go_down(struct cache_dirwatch *w, const char *why, bool quiet)
{
    pthread_mutex_lock(&w->wk.mu);
    bool changed = atomic_load(&w->up) || strcmp(w->why, why) != 0;
    snprintf(w->why, sizeof w->why, "%s", why);
    atomic_store_explicit(&w->up, false, memory_order_release);
    pthread_mutex_unlock(&w->wk.mu);
    if (changed && !quiet)
        log_msg(LOG_LVL_WARN, "cache", "%s: reads go to the cold tier until it is usable",
                why);
}

/* Where the directory is now (0), or the errno of stat. */
static int dir_id(const char *dir, dev_t *dev, ino_t *ino)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return errno;
    if (!S_ISDIR(st.st_mode))
        return ENOTDIR;
    *dev = st.st_dev;
    *ino = st.st_ino;
    return 0;
}

/* Puts the index onto the directory (a usable one: just probed). */
static void attach(struct cache_dirwatch *w, bool vanished)
{
    uint64_t dropped = 0;
    char lockwhy[WHY_LEN];
    if (w->claim && w->claim(w->claim_arg, lockwhy, sizeof lockwhy) != 0) {
        go_down(w, lockwhy, false);
        return;
    }
    if (cidx_reset(w->idx, &dropped) != CIDX_OK) {
        char why[WHY_LEN];
        snprintf(why, sizeof why, "cache directory %s: cannot set the index up in it: %s",
                 w->dir, strerror(errno));
        go_down(w, why, false);
        return;
    }
    dev_t dev = 0;
    ino_t ino = 0;
    dir_id(w->dir, &dev, &ino);
    pthread_mutex_lock(&w->wk.mu);
    w->dev = dev;
    w->ino = ino;
    w->why[0] = '\0';
    atomic_store_explicit(&w->up, true, memory_order_release);
    pthread_mutex_unlock(&w->wk.mu);
    atomic_fetch_add(&w->resets, 1);
    if (vanished)
        log_msg(LOG_LVL_WARN, "cache", "cache directory %s was deleted: recreated it and "
                "dropped the in-memory index (%" PRIu64 " entries); caching resumes",
                w->dir, dropped);
    else
        log_msg(LOG_LVL_WARN, "cache", "cache directory %s is usable now: caching starts "
                "with an empty index", w->dir);
    unsigned long n = cidx_trash_empty(w->idx);
    if (n)
        log_msg(LOG_LVL_INFO, "cache", "%s: removed %lu files of the dropped index", w->dir,
                n);
}

static void check(struct cache_dirwatch *w, bool reported)
{
    char why[WHY_LEN];
    if (!cache_dirwatch_up(w)) {
        if (cidx_dir_probe(w->dir, why, sizeof why) != 0)
            go_down(w, why, false);
        else
            attach(w, false);
        return;
    }
    dev_t dev = 0;
    ino_t ino = 0;
    int e = dir_id(w->dir, &dev, &ino);
    pthread_mutex_lock(&w->wk.mu);
    bool moved = e == ENOENT || e == ENOTDIR || (e == 0 && (dev != w->dev || ino != w->ino));
    pthread_mutex_unlock(&w->wk.mu);
    if (moved) {
        /* said once, by attach(), when it is back */
        snprintf(why, sizeof why, "cache directory %s is missing: recreating it", w->dir);
        go_down(w, why, true);
        if (cidx_dir_probe(w->dir, why, sizeof why) != 0)
            go_down(w, why, false);
        else
            attach(w, true);
        return;
    }
    /* access() costs nothing and sees a read-only remount or a chmod; when it
     * complains, or a fill met an error, a real write decides (a passing fault
     * is no reason to drop the index) */
    if (e == 0 && access(w->dir, W_OK) == 0 && !reported)
        return;
    if (cidx_dir_probe(w->dir, why, sizeof why) != 0)
        go_down(w, why, false);
}

static void *watch_main(void *arg)
{
    struct cache_dirwatch *w = arg;
    if (cache_dirwatch_up(w)) {
        unsigned long n = cidx_trash_empty(w->idx);   /* left by an earlier run */
        if (n)
            log_msg(LOG_LVL_INFO, "cache", "%s: removed %lu files of a dropped index", w->dir,
                    n);
    }
    pthread_mutex_lock(&w->wk.mu);
    while (!w->wk.stop) {
        if (!w->reported) {
            struct timespec dl;
            clock_gettime(CLOCK_MONOTONIC, &dl);
            uint64_t ns = (uint64_t)dl.tv_nsec + (uint64_t)w->interval_ms * 1000000u;
            dl.tv_sec += (time_t)(ns / 1000000000u);
            dl.tv_nsec = (long)(ns % 1000000000u);
            pthread_cond_timedwait(&w->wk.cv, &w->wk.mu, &dl);
        }
        if (w->wk.stop)
            break;
        bool reported = w->reported;
        w->reported = false;
        pthread_mutex_unlock(&w->wk.mu);
        check(w, reported);
        pthread_mutex_lock(&w->wk.mu);
    }
    pthread_mutex_unlock(&w->wk.mu);
    return NULL;
}

/* A cache larger than the free space of its file system fills the disk
 * before it reaches its watermarks: fills then fail with ENOSPC and evict in
 * a hurry. Said once at start; the start goes on. */
static void warn_free_space(const char *dir, uint64_t capacity, struct cidx *idx)
{
    struct statvfs vs;
    if (statvfs(dir, &vs) != 0)
        return;
    uint64_t used = 0, reserved = 0, objects = 0;
    cidx_usage(idx, &used, &reserved, &objects);
    uint64_t avail = (uint64_t)vs.f_bavail * vs.f_frsize;
    if (capacity <= avail + used)   /* what is cached counts: it is in the capacity */
        return;
    log_msg(LOG_LVL_WARN, "cache", "cache size %" PRIu64 " bytes is above the free space of "
            "the file system of %s (%" PRIu64 " bytes free, %" PRIu64 " cached): fills will "
            "fail with ENOSPC and evict early when the disk fills up", capacity, dir, avail,
            used);
}

int cache_dir_open_index(const char *dir, uint64_t capacity, struct cidx **out, bool *up,
                         char *why, size_t len)
{
    *up = false;
    if (cidx_dir_probe(dir, why, len) == 0) {
        if (cidx_open(dir, capacity, out) == CIDX_OK) {
            *up = true;
            warn_free_space(dir, capacity, *out);
            return 0;
        }
        snprintf(why, len, "cache directory %s: cannot load the index in it (the error above "
                 "says why)", dir);
    }
    log_msg(LOG_LVL_WARN, "cache", "%s: every read goes to the cold tier until it is usable",
            why);
    struct cidx_opts o = { .detached = true };
    if (cidx_open_ex(dir, capacity, &o, out) != CIDX_OK) {
        log_msg(LOG_LVL_ERROR, "cache", "cannot set up the cache index for %s: out of memory",
                dir);
        return -1;
    }
    return 0;
}

int cache_dirwatch_start(struct cidx *idx, bool up, const char *why, unsigned interval_ms,
                         cache_dirwatch_claim_cb claim, void *arg,
                         struct cache_dirwatch **out)
{
    *out = NULL;
    struct cache_dirwatch *w = calloc(1, sizeof *w);
    if (!w)
        return -1;
    w->idx = idx;
    w->dir = cidx_dir(idx);
    w->interval_ms = interval_ms ? interval_ms : 1000;
    w->claim = claim;
    w->claim_arg = arg;
    atomic_init(&w->up, up);
    snprintf(w->why, sizeof w->why, "%s", up ? "" : why);
    if (up)
        dir_id(w->dir, &w->dev, &w->ino);
    if (sg_worker_start(&w->wk, watch_main, w) != 0) {
        free(w);
        return -1;
    }
    *out = w;
    return 0;
}

void cache_dirwatch_stop(struct cache_dirwatch *w)
{
    if (!w)
        return;
    sg_worker_stop(&w->wk);
    free(w);
}
