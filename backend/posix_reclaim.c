/* backend/posix_reclaim.c - what dead writers leave behind. At open, the
 * temp files of interrupted writes are removed: they can only be in
 * ROOT/<bucket>/.sg~tmp/ and in the upload directories of STATE/mpu, so the
 * scan costs one directory per bucket and per upload, whatever the size of
 * the dataset tree. While the store is open, a thread aborts the multipart
 * uploads older than mpu_max_age, like S3's lifecycle rule
 * AbortIncompleteMultipartUpload; both also drop the records of uploads
 * completed more than a day ago (posix_mpu_done.c). */
#include "posix_int.h"
#include "log.h"
#include "worker.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static bool is_tmp_name(const char *name)
{
    return strncmp(name, POSIX_TMP_PREFIX, strlen(POSIX_TMP_PREFIX)) == 0;
}

/* A directory .sg~tmp.* is a nest (posix_nest.c) a crash interrupted
 * before its exchange: its POSIX_SELF is a second link of an object still
 * at its key. Removed with the link. */
static void rm_nest_dir(int dirfd, const char *name)
{
    int sub = openat(dirfd, name, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
    if (sub >= 0) {
        unlinkat(sub, POSIX_SELF, 0);
        close(sub);
    }
    if (unlinkat(dirfd, name, AT_REMOVEDIR) != 0)
        log_msg(LOG_LVL_WARN, "backend", "cannot remove %s: %s", name, strerror(errno));
}

/* Unlinks the temp files (regular files named .sg~tmp.*) of dirfd. A file
 * with a second link is a nest's leftover, whose object lives on: its
 * bytes are not reclaimed. */
static void rm_tmp_files(int dirfd, struct posix_reclaim_stats *st)
{
    DIR *d = posix_dir_stream(dirfd);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        struct stat s;
        if (!is_tmp_name(de->d_name) || fstatat(dirfd, de->d_name, &s, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (S_ISDIR(s.st_mode))
            rm_nest_dir(dirfd, de->d_name);
        if (!S_ISREG(s.st_mode))
            continue;
        if (unlinkat(dirfd, de->d_name, 0) == 0) {
            st->files++;
            if (s.st_nlink == 1)
                st->bytes += (uint64_t)s.st_size;
        } else {
            log_msg(LOG_LVL_WARN, "backend", "cannot remove temp file %s: %s", de->d_name,
                    strerror(errno));
        }
    }
    closedir(d);
}

/* Called by each_subdir for one subdirectory `name` of dirfd, open (fd) for
 * the call. */
typedef void (*subdir_fn)(void *arg, int dirfd, const char *name, int fd);

/* Calls fn for each subdirectory of dirfd whose name `valid` accepts (bucket
 * directories of ROOT and STATE/mpu, upload directories of a bucket's).
 * 0, or -1 when dirfd cannot be read. */
static int each_subdir(int dirfd, bool (*valid)(const char *), subdir_fn fn, void *arg)
{
    DIR *d = posix_dir_stream(dirfd);
    if (!d)
        return -1;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!valid(de->d_name))
            continue;
        int fd = openat(dirfd, de->d_name, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        fn(arg, dirfd, de->d_name, fd);
        close(fd);
    }
    closedir(d);
    return 0;
}

/* ROOT/<bucket>/.sg~tmp/ of one bucket directory. */
static void reclaim_bucket(void *arg, int rootfd, const char *name, int bfd)
{
    struct posix_reclaim_stats *st = arg;
    (void)rootfd;
    (void)name;
    int tfd = openat(bfd, POSIX_TMP_DIR, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
    if (tfd >= 0) {
        rm_tmp_files(tfd, st);
        close(tfd);
        unlinkat(bfd, POSIX_TMP_DIR, AT_REMOVEDIR);   /* made again by the next put */
    }
}

/* Called by each_upload for one upload directory: ufd is
 * STATE/mpu/<bucket>/<id> (open for the call), pfd STATE/mpu/<bucket>. */
typedef void (*upload_fn)(void *arg, int pfd, const char *bucket, const char *id, int ufd);

struct upload_walk {
    bool prune;
    upload_fn fn;
    void *arg;
    const char *bucket;   /* the one being walked */
};

static void one_upload(void *arg, int pfd, const char *id, int ufd)
{
    const struct upload_walk *w = arg;
    w->fn(w->arg, pfd, w->bucket, id, ufd);
}

/* The upload directories of STATE/mpu/<bucket> (pfd); with prune, the
 * bucket's directory is removed after when it is left empty. */
static void bucket_uploads(void *arg, int mpufd, const char *bucket, int pfd)
{
    struct upload_walk *w = arg;
    w->bucket = bucket;
    if (each_subdir(pfd, posix_upload_id_valid, one_upload, w) == 0 && w->prune)
        unlinkat(mpufd, bucket, AT_REMOVEDIR);   /* only when empty */
}

/* Calls fn for every upload directory of STATE/mpu, bucket by bucket; with
 * prune, each bucket's directory is removed after when it is left empty. */
static void each_upload(struct posix_store *b, bool prune, upload_fn fn, void *arg)
{
    struct upload_walk w = { .prune = prune, .fn = fn, .arg = arg };
    (void)each_subdir(b->mpufd, sg_bucket_name_valid, bucket_uploads, &w);
}

/* An upload directory at open: the temp files of parts (and of a create's
 * info file) go; a directory without a readable info file is what a crashed
 * create left, and goes whole. */
static void reclaim_upload(void *arg, int pfd, const char *bucket, const char *id, int ufd)
{
    struct posix_reclaim_stats *st = arg;
    (void)bucket;
    struct timespec t;
    if (posix_mpu_upload_initiated(ufd, &t) == 0) {
        rm_tmp_files(ufd, st);
    } else {
        /* its temp files count as files too: they are what it held */
        struct posix_reclaim_stats sub = { 0 };
        rm_tmp_files(ufd, &sub);
        st->files += sub.files;
        st->bytes += sub.bytes + posix_mpu_upload_remove(pfd, id);
        st->uploads++;
    }
}

void posix_reclaim_tmp(struct posix_store *b, struct posix_reclaim_stats *st)
{
    memset(st, 0, sizeof *st);
    if (b->read_only)
        return;
    (void)each_subdir(b->rootfd, sg_bucket_name_valid, reclaim_bucket, st);
    each_upload(b, true, reclaim_upload, st);
    posix_mpu_done_expire(b, time(NULL));
}

/* ---- expiry of incomplete multipart uploads ---- */

struct expire_ctx {
    unsigned max_age_s;
    time_t now;
    uint64_t n, bytes;
};

static void expire_upload(void *arg, int pfd, const char *bucket, const char *id, int ufd)
{
    struct expire_ctx *x = arg;
    struct timespec t = { 0 };
    /* No info file: a create in progress, or a crashed one that the
     * reclaim at the next open removes. */
    bool old = posix_mpu_upload_initiated(ufd, &t) == 0 &&
               x->now - t.tv_sec >= (time_t)x->max_age_s;
    if (!old)
        return;
    log_msg(LOG_LVL_DEBUG, "backend", "aborting upload %s of bucket %s: initiated "
            "%lld s ago", id, bucket, (long long)(x->now - t.tv_sec));
    x->bytes += posix_mpu_upload_remove(pfd, id);
    x->n++;
}

uint64_t posix_mpu_expire(struct posix_store *b, unsigned max_age_s, time_t now,
                          uint64_t *bytes)
{
    *bytes = 0;
    if (b->mpufd < 0 || max_age_s == 0)
        return 0;
    struct expire_ctx x = { .max_age_s = max_age_s, .now = now };
    each_upload(b, false, expire_upload, &x);
    posix_mpu_done_expire(b, now);
    *bytes = x.bytes;
    return x.n;
}

struct posix_expiry {
    struct posix_store *b;
    unsigned max_age_s;
    unsigned period_s;
    struct sg_worker wk;
};

static void *expiry_main(void *arg)
{
    struct posix_expiry *e = arg;
    pthread_mutex_lock(&e->wk.mu);
    while (!e->wk.stop) {
        pthread_mutex_unlock(&e->wk.mu);
        uint64_t bytes;
        uint64_t n = posix_mpu_expire(e->b, e->max_age_s, time(NULL), &bytes);
        if (n > 0)
            log_msg(LOG_LVL_INFO, "backend", "aborted %llu incomplete multipart uploads "
                    "(%llu bytes) initiated more than mpu_max_age = %u s ago",
                    (unsigned long long)n, (unsigned long long)bytes, e->max_age_s);
        pthread_mutex_lock(&e->wk.mu);
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += e->period_s;
        int rc = 0;
        while (!e->wk.stop && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&e->wk.cv, &e->wk.mu, &until);
    }
    pthread_mutex_unlock(&e->wk.mu);
    return NULL;
}

struct posix_expiry *posix_expiry_start(struct posix_store *b, unsigned max_age_s)
{
    struct posix_expiry *e = calloc(1, sizeof *e);
    if (!e) {
        log_msg(LOG_LVL_ERROR, "backend", "cannot start the upload expiry: out of memory");
        return NULL;
    }
    e->b = b;
    e->max_age_s = max_age_s;
    /* A quarter of the age: an upload is aborted at most 25 % late. Not
     * under a second (no busy loop) nor over an hour. */
    unsigned p = max_age_s / 4;
    e->period_s = p < 1 ? 1 : p > 3600 ? 3600 : p;
    int r = sg_worker_start(&e->wk, expiry_main, e);
    if (r != 0) {
        log_msg(LOG_LVL_ERROR, "backend", "cannot start the upload expiry thread: %s",
                strerror(r));
        free(e);
        return NULL;
    }
    return e;
}

void posix_expiry_stop(struct posix_expiry *e)
{
    if (!e)
        return;
    sg_worker_stop(&e->wk);
    free(e);
}
