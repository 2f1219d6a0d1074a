/* cache/index_open.c - the index's life: open (the directory, the snapshot and
 * journals replayed), the maintenance thread that runs until close (group
 * fsync, compaction, the sweep of data files after open) and close (a last
 * snapshot).
 *
 * Data files are not stat'ed at open: fstatat of every file costs a random inode
 * read each on a cold disk (see bench/README.md, "Index restart"), seconds for a
 * million entries. The sweep does it in the background instead, and a reader that
 * finds a file missing invalidates the entry. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cidx_int.h"
#include "deadline.h"
#include "log.h"

#define KT_MIN 16

/* ---- the maintenance thread and the sweep ---- */

static bool file_size_ok(const struct cidx *x, uint64_t fsize, uint64_t size)
{
    if (fsize < size)
        return false;
    uint64_t h = fsize - size;
    return h <= x->opts.file_hdr_max && h % x->opts.file_hdr_align == 0;
}

static void sweep_run(struct cidx *x)
{
    struct cidx_sweep_stats st = {0};
    uint64_t t0 = cidx_now_ms();
    for (unsigned d = 0; d < 256; d++) {
        char dn[16];
        snprintf(dn, sizeof dn, "%02x", d);
        int dfd = openat(x->objfd, dn, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *dir = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (dir == NULL) {
            if (dfd >= 0)
                close(dfd);
            continue;
        }
        struct dirent *de;
        while ((de = readdir(dir)) != NULL) {
            if (de->d_name[0] == '.')
                continue;
            char *end;
            if (strlen(de->d_name) != 16)
                continue; /* not ours: leave it */
            uint64_t id = strtoull(de->d_name, &end, 16);
            if (*end != '\0')
                continue;
            st.files_seen++;
            /* Files of this run's fills are not strays: their entries are FILLING
             * or about to be published. */
            if (cidx_id_epoch(id) >= x->epoch)
                continue;
            struct stat sb;
            bool have_st = fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0;
            struct cidx_shard *s = &x->shards[cidx_id_shard(id)];
            pthread_mutex_lock(&s->mu);
            struct cidx_ent *e = cidx_it_find(s, id);
            bool drop = false, stray = e == NULL;
            if (e != NULL) {
                if (have_st && e->state == CIDX_STATE_READY &&
                    !file_size_ok(x, (uint64_t)sb.st_size, e->size)) {
                    /* Dropped even if the REMOVE cannot be journaled: the file goes
                     * too, and the next sweep drops an entry without a file. */
                    (void)cidx_ent_remove_ready_locked(x, s, e);
                    drop = true;
                    st.badsize_dropped++;
                } else {
                    e->flags |= ENT_SEEN;
                }
            }
            pthread_mutex_unlock(&s->mu);
            if (drop)
                cidx_ent_free(x, e);
            if (drop || stray) {
                if (unlinkat(dfd, de->d_name, 0) == 0 && stray)
                    st.strays_removed++;
            }
        }
        closedir(dir);
    }
    /* Entries of earlier runs whose file was not found: lost to a crash after the
     * unlink and before the REMOVE reached the disk, or removed by hand. */
    for (unsigned si = 0; si < CIDX_NSHARD; si++) {
        struct cidx_shard *s = &x->shards[si];
        pthread_mutex_lock(&s->mu);
        for (uint32_t i = 0; i <= s->kt_mask; i++) {
            struct cidx_ent *e = s->kt[i], *nx;
            for (; e != NULL; e = nx) {
                nx = e->knext;
                if (e->flags & ENT_SEEN) {
                    e->flags &= (uint8_t)~ENT_SEEN;
                    continue;
                }
                if (e->state != CIDX_STATE_READY || cidx_id_epoch(e->id) >= x->epoch)
                    continue;
                cidx_ent_remove_ready_locked(x, s, e);
                cidx_ent_free(x, e);
                st.missing_dropped++;
            }
        }
        pthread_mutex_unlock(&s->mu);
    }
    st.ms = (double)(cidx_now_ms() - t0);
    if (st.strays_removed || st.missing_dropped || st.badsize_dropped)
        log_msg(LOG_LVL_INFO, "cache",
                "%s: sweep: %" PRIu64 " files, %" PRIu64 " strays removed, %" PRIu64
                " entries without file, %" PRIu64 " with a wrong size",
                x->dir, st.files_seen, st.strays_removed, st.missing_dropped,
                st.badsize_dropped);
    pthread_mutex_lock(&x->j.mu);
    x->sweep = st;
    x->sweep_done = true;
    x->sweep_pending = false;
    pthread_cond_broadcast(&x->done_cond);
    pthread_mutex_unlock(&x->j.mu);
}

static void *maint_main(void *arg)
{
    struct cidx *x = arg;
    pthread_mutex_lock(&x->j.mu);
    while (!x->stop) {
        if (x->sweep_pending) {
            pthread_mutex_unlock(&x->j.mu);
            sweep_run(x);
            pthread_mutex_lock(&x->j.mu);
            continue;
        }
        struct timespec dl = sg_deadline(CLOCK_REALTIME, x->opts.fsync_interval_ms);
        if (x->j.unsynced < x->opts.fsync_records)
            pthread_cond_timedwait(&x->cond, &x->j.mu, &dl);
        if (x->stop)
            break;
        bool sync = x->j.unsynced > 0 &&
                    (x->j.unsynced >= x->opts.fsync_records ||
                     cidx_now_ms() - x->j.last_sync_ms >= x->opts.fsync_interval_ms);
        bool compact = x->j.off > 2 * x->j.snap_bytes && x->j.off > x->opts.compact_min_bytes;
        pthread_mutex_unlock(&x->j.mu);
        if (sync)
            cidx_jnl_sync(x);
        if (compact)
            cidx_jnl_compact(x);
        pthread_mutex_lock(&x->j.mu);
    }
    pthread_mutex_unlock(&x->j.mu);
    return NULL;
}

/* ---- open / close ---- */

static void cidx_free(struct cidx *x)
{
    for (unsigned si = 0; si < CIDX_NSHARD; si++) {
        struct cidx_shard *s = &x->shards[si];
        if (s->it != NULL) {
            for (uint32_t i = 0; i <= s->it_mask; i++) {
                struct cidx_ent *e = s->it[i], *nx;
                for (; e != NULL; e = nx) {
                    nx = e->inext;
                    free(e);
                }
            }
        }
        free(s->kt);
        free(s->it);
        free(s->heap);
        pthread_mutex_destroy(&s->mu);
    }
    if (x->j.fd >= 0)
        close(x->j.fd);
    for (unsigned d = 0; d < 256; d++)
        if (x->subfd[d] >= 0)
            close(x->subfd[d]);
    if (x->objfd >= 0)
        close(x->objfd);
    if (x->dirfd >= 0)
        close(x->dirfd);
    pthread_mutex_destroy(&x->j.mu);
    pthread_mutex_destroy(&x->compact_mu);
    pthread_cond_destroy(&x->cond);
    pthread_cond_destroy(&x->done_cond);
    free(x->dir);
    free(x);
}

enum cidx_status cidx_open(const char *cache_dir, uint64_t capacity_bytes, struct cidx **out)
{
    return cidx_open_ex(cache_dir, capacity_bytes, NULL, out);
}

enum cidx_status cidx_open_ex(const char *cache_dir, uint64_t capacity_bytes,
                              const struct cidx_opts *opts, struct cidx **out)
{
    *out = NULL;
    struct cidx *x = aligned_alloc(64, (sizeof *x + 63) / 64 * 64);
    if (x == NULL)
        return CIDX_NOMEM;
    memset(x, 0, sizeof *x);
    x->dirfd = x->objfd = x->j.fd = -1;
    for (unsigned d = 0; d < 256; d++)
        x->subfd[d] = -1;
    pthread_mutex_init(&x->j.mu, NULL);
    pthread_mutex_init(&x->compact_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_cond_init(&x->cond, &ca);
    pthread_cond_init(&x->done_cond, &ca);
    pthread_condattr_destroy(&ca);
    bool tables_ok = true;
    for (unsigned si = 0; si < CIDX_NSHARD; si++) {
        struct cidx_shard *s = &x->shards[si];
        pthread_mutex_init(&s->mu, NULL);
        s->kt = calloc(KT_MIN, sizeof *s->kt);
        s->it = calloc(KT_MIN, sizeof *s->it);
        s->kt_mask = s->it_mask = KT_MIN - 1;
        tables_ok = tables_ok && s->kt != NULL && s->it != NULL;
    }
    x->dir = strdup(cache_dir);
    if (!tables_ok || x->dir == NULL) {
        cidx_free(x);
        return CIDX_NOMEM;
    }
    if (opts != NULL)
        x->opts = *opts;
    if (x->opts.fsync_interval_ms == 0)
        x->opts.fsync_interval_ms = 50;
    if (x->opts.fsync_records == 0)
        x->opts.fsync_records = 256;
    if (x->opts.compact_min_bytes == 0)
        x->opts.compact_min_bytes = 4u << 20;
    if (x->opts.file_hdr_align == 0)
        x->opts.file_hdr_align = 4096;
    if (x->opts.file_hdr_max == 0)
        x->opts.file_hdr_max = 64u << 10;
    x->capacity = capacity_bytes;
    enum cidx_status st = CIDX_OK;
    if (x->opts.detached) {
        /* no directory yet (cidx_reset attaches one): nothing is journaled */
        x->j.failed = true;
        x->epoch = 1;
        x->opts.sweep = CIDX_SWEEP_NONE;
    } else if (cidx_dirfds_open(cache_dir, false, &x->dirfd, &x->objfd, x->subfd) != 0) {
        cidx_free(x);
        return CIDX_IO;
    } else if ((st = cidx_jnl_load(x)) != CIDX_OK) {
        cidx_free(x);
        return st;
    }
    if (x->opts.sweep == CIDX_SWEEP_SYNC)
        sweep_run(x);
    else if (x->opts.sweep == CIDX_SWEEP_BACKGROUND)
        x->sweep_pending = true;
    else
        x->sweep_done = true;
    if (pthread_create(&x->maint, NULL, maint_main, x) != 0) {
        log_msg(LOG_LVL_ERROR, "cache", "%s: cannot start the index thread", cache_dir);
        cidx_free(x);
        return CIDX_NOMEM;
    }
    x->maint_started = true;
    *out = x;
    return CIDX_OK;
}

enum cidx_status cidx_close(struct cidx *x)
{
    if (x == NULL)
        return CIDX_OK;
    pthread_mutex_lock(&x->j.mu);
    x->stop = true;
    pthread_cond_broadcast(&x->cond);
    pthread_mutex_unlock(&x->j.mu);
    if (x->maint_started)
        pthread_join(x->maint, NULL);
    /* Unfinished fills are not persisted: drop them so the snapshot is clean. */
    enum cidx_status st = CIDX_OK;
    if (x->dirfd >= 0) {   /* detached: no directory, nothing to write */
        st = cidx_jnl_compact(x);
        if (st != CIDX_OK)
            cidx_jnl_sync(x);
    }
    cidx_free(x);
    return st;
}

enum cidx_status cidx_sync(struct cidx *x)
{
    return cidx_jnl_sync(x);
}

enum cidx_status cidx_compact(struct cidx *x)
{
    return cidx_jnl_compact(x);
}

void cidx_sweep_wait(struct cidx *x, struct cidx_sweep_stats *stats)
{
    pthread_mutex_lock(&x->j.mu);
    while (!x->sweep_done)
        pthread_cond_wait(&x->done_cond, &x->j.mu);
    if (stats != NULL)
        *stats = x->sweep;
    pthread_mutex_unlock(&x->j.mu);
}
