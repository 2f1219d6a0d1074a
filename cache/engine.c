/* cache/engine.c - the two I/O engines of the cache tier (engine_int.h):
 * io_uring, and pread/pwrite where io_uring is blocked. The fallback's
 * thread pool is one writer thread per fill worker: the worker queues a
 * buffer and reads the next one from the cold tier while the writer
 * pwrite()s it, the overlap io_uring gives (measured without the writer:
 * large fills at about half the io_uring rate, bench/results/engines.md).
 * Everything else - single flight, streaming to readers as bytes land,
 * publish after verify and fdatasync - is the same code in fill_worker.c for
 * both. */
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_int.h"
#include "log.h"
#include "worker.h"

enum { QUEUE_MAX = 16 };   /* writes a pwrite context holds (depth is 2-3 in practice) */

struct eng_write {
    int fd;
    const void *buf;
    size_t len;
    uint64_t off, tag;
};

struct cache_eng {
    enum cache_engine kind;
    unsigned depth;
    /* io_uring */
    struct io_uring ring;
    bool ring_ok;
    /* threads: writes queued for the writer thread (wk: its cv says there is
     * work), then their completions (done_cv), both in order; everything
     * under wk.mu */
    struct sg_worker wk;
    pthread_cond_t done_cv;
    struct eng_write q[QUEUE_MAX];
    unsigned qh, qn;
    bool busy;                   /* the writer is in a pwrite */
    struct cache_eng_done done[QUEUE_MAX];
    unsigned dh, dn;
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

static void *writer_main(void *arg)
{
    struct cache_eng *e = arg;
    pthread_mutex_lock(&e->wk.mu);
    for (;;) {
        while (!e->wk.stop && e->qn == 0)
            pthread_cond_wait(&e->wk.cv, &e->wk.mu);
        if (e->qn == 0)
            break;   /* stopping, and nothing left: every buffer was written */
        struct eng_write w = e->q[e->qh];
        e->qh = (e->qh + 1) % QUEUE_MAX;
        e->qn--;
        e->busy = true;
        pthread_mutex_unlock(&e->wk.mu);
        int res = write_now(w.fd, w.buf, w.len, w.off);
        pthread_mutex_lock(&e->wk.mu);
        e->busy = false;
        e->done[(e->dh + e->dn) % QUEUE_MAX] = (struct cache_eng_done){ w.tag, res };
        e->dn++;
        pthread_cond_signal(&e->done_cv);
    }
    pthread_mutex_unlock(&e->wk.mu);
    return NULL;
}

int cache_eng_new(enum cache_engine kind, unsigned depth, struct cache_eng **out)
{
    *out = NULL;
    if (kind != CACHE_ENGINE_URING && kind != CACHE_ENGINE_THREADS)
        return -EINVAL;
    if (depth == 0 || depth > QUEUE_MAX)
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
    } else {
        pthread_cond_init(&e->done_cv, NULL);
        int rc = sg_worker_start(&e->wk, writer_main, e);
        if (rc != 0) {
            pthread_cond_destroy(&e->done_cv);
            free(e);
            return -rc;
        }
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
    if (e->kind == CACHE_ENGINE_THREADS) {
        sg_worker_stop(&e->wk);
        pthread_cond_destroy(&e->done_cv);
    }
    free(e);
}

int cache_eng_write(struct cache_eng *e, int fd, const void *buf, size_t len, uint64_t off,
                    uint64_t tag)
{
    if (len > INT32_MAX)
        return -EINVAL;
    if (e->kind == CACHE_ENGINE_THREADS) {
        pthread_mutex_lock(&e->wk.mu);
        unsigned held = e->qn + e->dn + (e->busy ? 1u : 0u);
        if (held >= e->depth) {
            pthread_mutex_unlock(&e->wk.mu);
            return -EBUSY;
        }
        e->q[(e->qh + e->qn) % QUEUE_MAX] = (struct eng_write){ fd, buf, len, off, tag };
        e->qn++;
        pthread_cond_signal(&e->wk.cv);
        pthread_mutex_unlock(&e->wk.mu);
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
        pthread_mutex_lock(&e->wk.mu);
        if (e->qn + e->dn == 0 && !e->busy) {
            pthread_mutex_unlock(&e->wk.mu);
            return -EINVAL;   /* nothing queued: a caller bug, never a hang */
        }
        while (e->dn == 0)
            pthread_cond_wait(&e->done_cv, &e->wk.mu);
        *out = e->done[e->dh];
        e->dh = (e->dh + 1) % QUEUE_MAX;
        e->dn--;
        pthread_mutex_unlock(&e->wk.mu);
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
