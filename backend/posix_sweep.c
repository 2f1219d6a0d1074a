/* backend/posix_sweep.c - removing a finished upload's parts off the
 * request's path. A completed or aborted upload's directory is renamed into
 * STATE/mpu/.sg~gone/ (one rename and one directory fsync: the upload is
 * gone for every reader at once, and after a crash), and a background
 * thread unlinks its parts. Unlinking the 128 parts of a 1 GiB upload costs
 * ~1.3 s on ext4 (each unlink frees its extents and drops its cached pages),
 * which CompleteMultipartUpload used to spend before its answer
 * (bench/results/writeback.md). Whatever a crash leaves in .sg~gone is
 * swept when the store opens again. ".sg~gone" is no bucket name, so the
 * walks over STATE/mpu never see it. */
#include "posix_int.h"
#include "log.h"
#include "worker.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define GONE_DIR ".sg~gone"

struct posix_sweeper {
    struct posix_store *b;
    struct sg_worker wk;
    bool pending;       /* under wk.mu: something was renamed in since the last sweep */
    bool idle;          /* under wk.mu: no sweep running and none pending */
};

static bool stopping(struct posix_sweeper *s)
{
    pthread_mutex_lock(&s->wk.mu);
    bool stop = s->wk.stop;
    pthread_mutex_unlock(&s->wk.mu);
    return stop;
}

/* Removes the entries of STATE/mpu/.sg~gone (each an upload directory)
 * until there are none or the store closes: a stop waits for one upload's
 * parts at most, the rest is swept after the next open. */
static void sweep(struct posix_sweeper *s)
{
    int gfd = openat(s->b->mpufd, GONE_DIR, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
    if (gfd < 0)
        return;
    DIR *d = fdopendir(gfd);
    if (!d) {
        close(gfd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL && !stopping(s))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            posix_mpu_upload_remove(dirfd(d), de->d_name);
    closedir(d);
}

/* The sweeper is a background chore: at nice 10 it yields the CPU to the
 * requests, as the write-back uploads do (wb_upload.c). */
static void *sweeper_main(void *arg)
{
    struct posix_sweeper *s = arg;
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
    pthread_mutex_lock(&s->wk.mu);
    while (!s->wk.stop) {
        if (!s->pending) {
            s->idle = true;
            pthread_cond_wait(&s->wk.cv, &s->wk.mu);
            continue;
        }
        s->pending = false;
        s->idle = false;
        pthread_mutex_unlock(&s->wk.mu);
        sweep(s);
        pthread_mutex_lock(&s->wk.mu);
    }
    pthread_mutex_unlock(&s->wk.mu);
    return NULL;
}

struct posix_sweeper *posix_sweeper_start(struct posix_store *b)
{
    struct posix_sweeper *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->b = b;
    s->pending = true;   /* what a crash left */
    int r = sg_worker_start(&s->wk, sweeper_main, s);
    if (r != 0) {
        log_msg(LOG_LVL_WARN, "backend", "cannot start the thread that removes finished "
                "uploads' parts (%s): Complete and Abort remove them themselves",
                strerror(r));
        free(s);
        return NULL;
    }
    return s;
}

void posix_sweeper_stop(struct posix_sweeper *s)
{
    if (!s)
        return;
    sg_worker_stop(&s->wk);
    free(s);
}

bool posix_sweeper_wait_idle(struct posix_sweeper *s, unsigned timeout_ms)
{
    if (!s)
        return true;
    for (unsigned waited = 0;; waited += 10) {
        pthread_mutex_lock(&s->wk.mu);
        bool idle = s->idle && !s->pending;
        pthread_mutex_unlock(&s->wk.mu);
        if (idle || waited >= timeout_ms)
            return idle;
        usleep(10 * 1000);
    }
}

void posix_mpu_upload_discard(struct posix_store *b, const char *bucket, const char *id)
{
    int pfd = posix_open_beneath(b->mpufd, bucket, O_DIRECTORY | O_RDONLY, 0);
    if (pfd < 0)
        return;
    /* <bucket>~<id>: unique, as an upload id is unique in its bucket */
    char gone[128];
    snprintf(gone, sizeof gone, GONE_DIR "/%s~%s", bucket, id);
    bool moved = false;
    if (b->sweeper) {
        moved = renameat(pfd, id, b->mpufd, gone) == 0;
        if (!moved && errno == ENOENT &&   /* the first discard since .sg~gone was swept? */
            (mkdirat(b->mpufd, GONE_DIR, 0700) == 0 || errno == EEXIST))
            moved = renameat(pfd, id, b->mpufd, gone) == 0;
    }
    if (moved) {
        fsync(pfd);   /* the upload is gone for good before the answer */
        pthread_mutex_lock(&b->sweeper->wk.mu);
        b->sweeper->pending = true;
        pthread_cond_signal(&b->sweeper->wk.cv);
        pthread_mutex_unlock(&b->sweeper->wk.mu);
    } else {
        posix_mpu_upload_remove(pfd, id);
    }
    close(pfd);
}
