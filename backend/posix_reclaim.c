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

/* Unlinks the temp files (regular files named .sg~tmp.*) of dirfd. */
static void rm_tmp_files(int dirfd, struct posix_reclaim_stats *st)
{
    DIR *d = posix_dir_stream(dirfd);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        struct stat s;
        if (!is_tmp_name(de->d_name) ||
            fstatat(dirfd, de->d_name, &s, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(s.st_mode))
            continue;
        if (unlinkat(dirfd, de->d_name, 0) == 0) {
            st->files++;
            st->bytes += (uint64_t)s.st_size;
        } else {
            log_msg(LOG_LVL_WARN, "backend", "cannot remove temp file %s: %s", de->d_name,
                    strerror(errno));
        }
    }
    closedir(d);
}

/* ROOT/<bucket>/.sg~tmp/ of every bucket directory. */
static void reclaim_buckets(struct posix_store *b, struct posix_reclaim_stats *st)
{
    DIR *d = posix_dir_stream(b->rootfd);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!sg_bucket_name_valid(de->d_name))
            continue;
        int bfd = openat(b->rootfd, de->d_name, O_DIRECTORY | O_NOFOLLOW | O_RDONLY |
                                                    O_CLOEXEC);
        if (bfd < 0)
            continue;
        int tfd = openat(bfd, POSIX_TMP_DIR, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
        if (tfd >= 0) {
            rm_tmp_files(tfd, st);
            close(tfd);
            unlinkat(bfd, POSIX_TMP_DIR, AT_REMOVEDIR);   /* made again by the next put */
        }
        close(bfd);
    }
    closedir(d);
}

/* Called by each_upload for one upload directory: ufd is
 * STATE/mpu/<bucket>/<id> (open for the call), pfd STATE/mpu/<bucket>. */
typedef void (*upload_fn)(void *arg, int pfd, const char *bucket, const char *id, int ufd);

/* Calls fn for every upload directory of STATE/mpu, bucket by bucket; with
 * prune, each bucket's directory is removed after when it is left empty. */
static void each_upload(struct posix_store *b, bool prune, upload_fn fn, void *arg)
{
    DIR *d = posix_dir_stream(b->mpufd);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!sg_bucket_name_valid(de->d_name))
            continue;
        int pfd = openat(b->mpufd, de->d_name, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
        DIR *pd = pfd >= 0 ? posix_dir_stream(pfd) : NULL;
        if (!pd) {
            if (pfd >= 0)
                close(pfd);
            continue;
        }
        struct dirent *ue;
        while ((ue = readdir(pd)) != NULL) {
            if (!posix_upload_id_valid(ue->d_name))
                continue;
            int ufd = openat(pfd, ue->d_name, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
            if (ufd < 0)
                continue;
            fn(arg, pfd, de->d_name, ue->d_name, ufd);
            close(ufd);
        }
        closedir(pd);
        if (prune)
            unlinkat(b->mpufd, de->d_name, AT_REMOVEDIR);   /* only when empty */
        close(pfd);
    }
    closedir(d);
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
    reclaim_buckets(b, st);
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
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;    /* CLOCK_MONOTONIC */
    bool stop;
};

static void *expiry_main(void *arg)
{
    struct posix_expiry *e = arg;
    pthread_mutex_lock(&e->mu);
    while (!e->stop) {
        pthread_mutex_unlock(&e->mu);
        uint64_t bytes;
        uint64_t n = posix_mpu_expire(e->b, e->max_age_s, time(NULL), &bytes);
        if (n > 0)
            log_msg(LOG_LVL_INFO, "backend", "aborted %llu incomplete multipart uploads "
                    "(%llu bytes) initiated more than mpu_max_age = %u s ago",
                    (unsigned long long)n, (unsigned long long)bytes, e->max_age_s);
        pthread_mutex_lock(&e->mu);
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += e->period_s;
        int rc = 0;
        while (!e->stop && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&e->cond, &e->mu, &until);
    }
    pthread_mutex_unlock(&e->mu);
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
    pthread_mutex_init(&e->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cond, &ca);
    pthread_condattr_destroy(&ca);
    int r = pthread_create(&e->thread, NULL, expiry_main, e);
    if (r != 0) {
        log_msg(LOG_LVL_ERROR, "backend", "cannot start the upload expiry thread: %s",
                strerror(r));
        pthread_cond_destroy(&e->cond);
        pthread_mutex_destroy(&e->mu);
        free(e);
        return NULL;
    }
    return e;
}

void posix_expiry_stop(struct posix_expiry *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->mu);
    e->stop = true;
    pthread_cond_signal(&e->cond);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
    pthread_cond_destroy(&e->cond);
    pthread_mutex_destroy(&e->mu);
    free(e);
}
