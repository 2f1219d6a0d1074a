/* cache/engine.c - the two I/O engines of the cache tier (engine_int.h):
 * io_uring, and pread/pwrite on the fill worker's own thread where io_uring
 * is blocked. The fill workers are the fallback's thread pool: a worker
 * writes a buffer with pwrite before it reads the next one from the cold
 * tier, so the cold read and the cache write no longer overlap (measured in
 * bench/results/engines.md); everything else - single flight, streaming to
 * readers as bytes land, publish after verify and fdatasync - is the same
 * code in cache.c for both. */
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_int.h"
#include "log.h"

enum { DONE_MAX = 16 };   /* completions a pwrite context holds (depth is 2-3 in practice) */

struct cache_eng {
    enum cache_engine kind;
    /* io_uring */
    struct io_uring ring;
    bool ring_ok;
    /* threads: writes run at submit; their completions wait here, in order */
    struct cache_eng_done done[DONE_MAX];
    unsigned head, count, depth;
};

const char *cache_eng_name(enum cache_engine kind)
{
    switch (kind) {
    case CACHE_ENGINE_AUTO: return "auto";
    case CACHE_ENGINE_URING: return "io_uring";
    case CACHE_ENGINE_THREADS: return "threads";
    }
    return "?";
}

int cache_eng_probe_uring(void)
{
    struct io_uring ring;
    int rc = io_uring_queue_init(2, &ring, 0);
    if (rc < 0)
        return rc;
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    if (!sqe) {
        io_uring_queue_exit(&ring);
        return -EBUSY;
    }
    io_uring_prep_nop(sqe);
    rc = io_uring_submit(&ring);
    if (rc >= 0) {
        struct io_uring_cqe *cqe;
        while ((rc = io_uring_wait_cqe(&ring, &cqe)) == -EINTR)
            ;
        if (rc == 0) {
            rc = cqe->res < 0 ? cqe->res : 0;
            io_uring_cqe_seen(&ring, cqe);
        }
    }
    io_uring_queue_exit(&ring);
    return rc < 0 ? rc : 0;
}

int cache_eng_choose(enum cache_engine want, bool read_uring, enum cache_engine *out)
{
    if (want == CACHE_ENGINE_THREADS) {
        *out = CACHE_ENGINE_THREADS;
        log_msg(LOG_LVL_INFO, "cache", "cache engine: pread/pwrite (cache.engine \"threads\")");
        return 0;
    }
    int rc = cache_eng_probe_uring();
    if (rc == 0) {
        *out = CACHE_ENGINE_URING;
        log_msg(LOG_LVL_INFO, "cache", "cache engine: io_uring");
        return 0;
    }
    const char *name = strerrorname_np(-rc);
    if (want == CACHE_ENGINE_URING) {
        log_msg(LOG_LVL_ERROR, "cache", "cache.engine is \"io_uring\" but io_uring does not "
                "work here: %s (%s); \"auto\" or \"threads\" use pread/pwrite instead",
                strerror(-rc), name ? name : "?");
        return -1;
    }
    *out = CACHE_ENGINE_THREADS;
    log_msg(LOG_LVL_INFO, "cache", "cache engine: pread/pwrite (io_uring unavailable: %s (%s))",
            strerror(-rc), name ? name : "?");
    if (read_uring)
        log_msg(LOG_LVL_WARN, "cache", "cache.read_path \"io_uring\": hits are read with "
                "pread instead");
    return 0;
}

int cache_eng_new(enum cache_engine kind, unsigned depth, struct cache_eng **out)
{
    *out = NULL;
    if (kind != CACHE_ENGINE_URING && kind != CACHE_ENGINE_THREADS)
        return -EINVAL;
    if (depth == 0 || depth > DONE_MAX)
        return -EINVAL;
    struct cache_eng *e = calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    e->kind = kind;
    e->depth = depth;
    if (kind == CACHE_ENGINE_URING) {
        int rc = io_uring_queue_init(depth, &e->ring, 0);
        if (rc < 0) {
            free(e);
            return rc;
        }
        e->ring_ok = true;
    }
    *out = e;
    return 0;
}

void cache_eng_free(struct cache_eng *e)
{
    if (!e)
        return;
    if (e->ring_ok)
        io_uring_queue_exit(&e->ring);
    free(e);
}

/* pwrite until done or an error; EINTR retried. Bytes written (at least
 * one), or a negative errno when nothing was. */
static int write_now(int fd, const void *buf, size_t len, uint64_t off)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pwrite(fd, (const char *)buf + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return done ? (int)done : -errno;
        if (n == 0)
            break;
        done += (size_t)n;
    }
    return (int)done;
}

int cache_eng_write(struct cache_eng *e, int fd, const void *buf, size_t len, uint64_t off,
                    uint64_t tag)
{
    if (len > INT32_MAX)
        return -EINVAL;
    if (e->kind == CACHE_ENGINE_THREADS) {
        if (e->count == e->depth)
            return -EBUSY;
        struct cache_eng_done *d = &e->done[(e->head + e->count) % DONE_MAX];
        d->tag = tag;
        d->res = write_now(fd, buf, len, off);
        e->count++;
        return 0;
    }
    struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);
    if (!sqe)
        return -EBUSY;
    io_uring_prep_write(sqe, fd, buf, (unsigned)len, off);
    io_uring_sqe_set_data64(sqe, tag);
    int rc = io_uring_submit(&e->ring);
    return rc < 0 ? rc : 0;
}

int cache_eng_wait(struct cache_eng *e, struct cache_eng_done *out)
{
    if (e->kind == CACHE_ENGINE_THREADS) {
        if (e->count == 0)
            return -EINVAL;   /* nothing queued: a caller bug, never a hang */
        *out = e->done[e->head];
        e->head = (e->head + 1) % DONE_MAX;
        e->count--;
        return 0;
    }
    struct io_uring_cqe *cqe;
    int rc;
    while ((rc = io_uring_wait_cqe(&e->ring, &cqe)) == -EINTR)
        ;
    if (rc < 0)
        return rc;
    out->tag = io_uring_cqe_get_data64(cqe);
    out->res = cqe->res;
    io_uring_cqe_seen(&e->ring, cqe);
    return 0;
}

int cache_eng_datasync(struct cache_eng *e, int fd)
{
    if (e->kind == CACHE_ENGINE_THREADS) {
        int rc;
        while ((rc = fdatasync(fd)) != 0 && errno == EINTR)
            ;
        return rc == 0 ? 0 : -errno;
    }
    struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);
    if (!sqe)
        return -EBUSY;
    io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
    io_uring_sqe_set_data64(sqe, UINT64_MAX);
    int rc = io_uring_submit(&e->ring);
    if (rc < 0)
        return rc;
    struct cache_eng_done d;
    if ((rc = cache_eng_wait(e, &d)) < 0)
        return rc;
    return d.res < 0 ? d.res : 0;
}

/* ---- reads of hits ---- */

/* With cache.read_path io_uring, every thread that reads cache files gets a
 * small ring of its own (the HTTP threads block on it, as they would on
 * pread); it is freed when the thread ends. */
static pthread_key_t ring_key;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;

static void ring_free(void *p)
{
    io_uring_queue_exit(p);
    free(p);
}

static void ring_key_init(void)
{
    pthread_key_create(&ring_key, ring_free);
}

static ssize_t uring_pread(int fd, void *buf, size_t len, uint64_t off)
{
    pthread_once(&ring_once, ring_key_init);
    struct io_uring *ring = pthread_getspecific(ring_key);
    if (!ring) {
        ring = malloc(sizeof *ring);
        if (!ring || io_uring_queue_init(4, ring, 0) != 0) {
            free(ring);
            errno = ENOMEM;
            return -1;
        }
        pthread_setspecific(ring_key, ring);
    }
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (!sqe) {
        errno = EBUSY;
        return -1;
    }
    io_uring_prep_read(sqe, fd, buf, (unsigned)len, off);
    int rc = io_uring_submit(ring);
    if (rc < 0) {
        errno = -rc;
        return -1;
    }
    struct io_uring_cqe *cqe;
    while ((rc = io_uring_wait_cqe(ring, &cqe)) == -EINTR)
        ;
    if (rc < 0) {
        errno = -rc;
        return -1;
    }
    int res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    if (res < 0) {
        errno = -res;
        return -1;
    }
    return res;
}

ssize_t cache_eng_pread(enum cache_engine kind, int fd, void *buf, size_t len, uint64_t off)
{
    if (kind == CACHE_ENGINE_URING)
        return uring_pread(fd, buf, len > INT32_MAX ? INT32_MAX : len, off);
    return pread(fd, buf, len, (off_t)off);
}
