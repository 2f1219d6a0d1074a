/* gateway/intake.c - request bodies taken in on threads of their own.
 *
 * Why: a PUT or UploadPart body costs ~2 CPU-s per GiB to take in (SHA-256
 * of a signed payload, MD5 for the ETag, the write). Taken in on the
 * libmicrohttpd thread that received it, that work shares a thread - and so
 * a priority - with the readers' hits on the same thread: lowering that
 * thread's priority for the body did nothing for the readers
 * (bench/results/ab-ingest-nice.md). Here the connection's thread only
 * copies the body into one of two buffers; intake threads at nice
 * INTAKE_NICE do the rest. When the CPU is short, the scheduler now gives
 * it to the hits first, as the write-back contract asks (README
 * "Write-back").
 *
 * Per request two buffers: the connection's thread fills one while an
 * intake thread takes in the other. When both are full the connection is
 * suspended, with the bytes it did not take left in libmicrohttpd's buffer
 * (it reads nothing more from the socket meanwhile: TCP holds the client
 * back); the intake thread resumes it when its buffer is done, and
 * libmicrohttpd then hands the bytes over again. At the body's end the
 * connection waits the same way for the last buffer before it answers.
 *
 * The intake threads never see a request's record outside a job: the
 * connection's thread touches the body's state (r->body, r->put,
 * r->body_failed) only while no job of its request is out
 * (gw_intake_quiesce). One job per request at a time keeps the bytes in
 * order. Memory is bounded: at most INTAKE_MAX_BUFS buffers in all; a body
 * that finds none is taken in on its connection's thread, as before. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gw_int.h"
#include "log.h"
#include "md5.h"

enum {
    INTAKE_BUF = 256 * 1024,
    /* 64 MiB in all: 128 bodies at once; more wait their turn inline */
    INTAKE_MAX_BUFS = 256,
    /* buffers kept for the next body (fresh pages cost ~1 ms per MiB to
     * touch on a slow VM); the rest go back to the system */
    INTAKE_KEEP_BUFS = 16,
    /* below this announced length the copy and the hand-over cost more
     * than they move off the connection's thread */
    INTAKE_MIN_BODY = 1024 * 1024,
    /* hits and fills (nice 5) come first; the same as write-back uploads */
    INTAKE_NICE = 10,
    INTAKE_MAX_THREADS = 64,
};

struct gw_intake {
    struct gw_intake_pool *pool;
    struct gw_req *r;
    struct gw_intake *next;      /* in the pool's queue */
    uint8_t *buf[2];
    size_t len[2];
    int fill;                    /* the buffer the connection's thread copies into */
    int job;                     /* the buffer out with an intake thread, or -1 */
    bool waiting;                /* the connection is suspended until the job is done */
    bool failed;                 /* r->body_failed as of the last job: drop the rest */
};

struct gw_intake_pool {
    gw_intake_take_fn *take_in;
    pthread_mutex_t mu;
    pthread_cond_t work;         /* a job is queued, or the pool stops */
    pthread_cond_t done;         /* a job ended */
    struct gw_intake *head, *tail;
    unsigned bufs_out;           /* buffers held by requests */
    uint8_t *spare[INTAKE_KEEP_BUFS];
    unsigned n_spare;
    bool stopping;
    unsigned n_threads;
    pthread_t threads[INTAKE_MAX_THREADS];
};

static void hand_over(struct gw_intake *in);

static void *intake_main(void *arg)
{
    struct gw_intake_pool *p = arg;
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), INTAKE_NICE);
    /* the bodies of concurrent uploads are hashed side by side */
    sg_md5_share_lanes(true);
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->head && !p->stopping)
            pthread_cond_wait(&p->work, &p->mu);
        struct gw_intake *in = p->head;
        if (!in)
            break;   /* stopping, and nothing is left */
        p->head = in->next;
        if (!p->head)
            p->tail = NULL;
        int b = in->job;
        struct gw_req *r = in->r;
        pthread_mutex_unlock(&p->mu);

        if (!r->body_failed)
            p->take_in(r, in->buf[b], in->len[b]);

        pthread_mutex_lock(&p->mu);
        in->len[b] = 0;
        in->job = -1;
        in->failed = r->body_failed;
        /* The other buffer filled up meanwhile: it goes out now, not when
         * the connection's thread next comes (the client may send nothing
         * more until it has an answer: a stalled body's bytes still reach
         * its temp file, all but the last partial buffer). */
        if (in->len[in->fill] == INTAKE_BUF && !in->failed && !p->stopping)
            hand_over(in);
        if (in->waiting) {
            in->waiting = false;
            gw_req_resume(r);
        }
        /* after this the request may be freed (unless a job of it went out
         * again): in is not touched again */
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int gw_intake_pool_start(unsigned threads, gw_intake_take_fn *take_in,
                         struct gw_intake_pool **out)
{
    *out = NULL;
    if (threads == 0)
        return 0;   /* every body is taken in on its connection's thread */
    if (threads > INTAKE_MAX_THREADS)
        threads = INTAKE_MAX_THREADS;
    struct gw_intake_pool *p = calloc(1, sizeof *p);
    if (!p)
        return -1;
    p->take_in = take_in;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    for (; p->n_threads < threads; p->n_threads++) {
        int e = pthread_create(&p->threads[p->n_threads], NULL, intake_main, p);
        if (e) {
            log_msg(LOG_LVL_ERROR, "gw", "cannot start a body intake thread: %s", strerror(e));
            gw_intake_pool_stop(p);
            return -1;
        }
    }
    *out = p;
    return 0;
}

/* Every queued job runs to its end (and resumes its connection: a
 * suspended connection left behind would abort MHD_stop_daemon); bodies
 * that arrive afterwards are taken in inline. */
void gw_intake_pool_stop(struct gw_intake_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    p->n_threads = 0;
}

void gw_intake_pool_free(struct gw_intake_pool *p)
{
    if (!p)
        return;
    gw_intake_pool_stop(p);
    for (unsigned i = 0; i < p->n_spare; i++)
        free(p->spare[i]);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    free(p);
}

/* Under p->mu. */
static uint8_t *buf_get(struct gw_intake_pool *p)
{
    if (p->bufs_out >= INTAKE_MAX_BUFS)
        return NULL;
    uint8_t *b = p->n_spare ? p->spare[--p->n_spare] : malloc(INTAKE_BUF);
    if (b)
        p->bufs_out++;
    return b;
}

static void buf_put(struct gw_intake_pool *p, uint8_t *b)
{
    if (!b)
        return;
    p->bufs_out--;
    if (p->n_spare < INTAKE_KEEP_BUFS)
        p->spare[p->n_spare++] = b;
    else
        free(b);
}

uint64_t gw_intake_pool_buffered(struct gw_intake_pool *p)
{
    if (!p)
        return 0;
    pthread_mutex_lock(&p->mu);
    uint64_t n = (uint64_t)p->bufs_out * INTAKE_BUF;
    pthread_mutex_unlock(&p->mu);
    return n;
}

bool gw_intake_begin(struct gw_intake_pool *p, struct gw_req *r, long long announced)
{
    if (!p || (announced >= 0 && announced < INTAKE_MIN_BODY))
        return false;
    struct gw_intake *in = calloc(1, sizeof *in);
    if (!in)
        return false;
    pthread_mutex_lock(&p->mu);
    if (!p->stopping) {
        in->buf[0] = buf_get(p);
        in->buf[1] = in->buf[0] ? buf_get(p) : NULL;
    }
    if (!in->buf[1]) {
        buf_put(p, in->buf[0]);
        pthread_mutex_unlock(&p->mu);
        free(in);
        return false;
    }
    pthread_mutex_unlock(&p->mu);
    in->pool = p;
    in->r = r;
    in->job = -1;
    r->intake = in;
    return true;
}

/* Under p->mu: the filled buffer goes out; or, with the pool stopping,
 * it is taken in right here. */
static void hand_over(struct gw_intake *in)
{
    struct gw_intake_pool *p = in->pool;
    int b = in->fill;
    in->fill ^= 1;
    if (p->stopping) {
        pthread_mutex_unlock(&p->mu);
        if (!in->r->body_failed)
            p->take_in(in->r, in->buf[b], in->len[b]);
        pthread_mutex_lock(&p->mu);
        in->len[b] = 0;
        in->failed = in->r->body_failed;
        return;
    }
    in->job = b;
    in->next = NULL;
    if (p->tail)
        p->tail->next = in;
    else
        p->head = in;
    p->tail = in;
    pthread_cond_signal(&p->work);
}

static void suspend(struct gw_intake *in)
{
    in->waiting = true;
    gw_req_suspend_intake(in->r);
}

size_t gw_intake_take(struct gw_req *r, const char *data, size_t n)
{
    struct gw_intake *in = r->intake;
    struct gw_intake_pool *p = in->pool;
    size_t took = 0;
    pthread_mutex_lock(&p->mu);
    if (in->failed)
        took = n;   /* the error goes out at the end; the rest is dropped */
    while (took < n) {
        if (in->len[in->fill] == INTAKE_BUF) {
            if (in->job >= 0) {
                suspend(in);   /* resumed with what is left, once the job is done */
                break;
            }
            hand_over(in);
            continue;
        }
        size_t c = INTAKE_BUF - in->len[in->fill];
        if (c > n - took)
            c = n - took;
        memcpy(in->buf[in->fill] + in->len[in->fill], data + took, c);
        in->len[in->fill] += c;
        took += c;
    }
    /* a buffer filled by the last bytes goes out now, if it can */
    if (in->len[in->fill] == INTAKE_BUF && in->job < 0 && !in->failed)
        hand_over(in);
    pthread_mutex_unlock(&p->mu);
    return took;
}

bool gw_intake_drained(struct gw_req *r)
{
    struct gw_intake *in = r->intake;
    struct gw_intake_pool *p = in->pool;
    bool drained = false;
    pthread_mutex_lock(&p->mu);
    if (in->job < 0 && in->len[in->fill] && !in->failed)
        hand_over(in);
    if (in->job >= 0) {
        suspend(in);
    } else {
        /* Every byte is in: the buffers go back now, before the answer
         * rather than after it has gone (a write-through commit may wait
         * long for the cold tier, and a client that has its answer may
         * count them: test_body_threads saw one body's two still held). */
        drained = true;
        buf_put(p, in->buf[0]);
        buf_put(p, in->buf[1]);
        in->buf[0] = in->buf[1] = NULL;
        in->len[0] = in->len[1] = 0;
    }
    pthread_mutex_unlock(&p->mu);
    return drained;
}

/* Waits, under p->mu, until no job of `in` is out. */
static void wait_idle(struct gw_intake *in)
{
    while (in->job >= 0)
        pthread_cond_wait(&in->pool->done, &in->pool->mu);
}

void gw_intake_quiesce(struct gw_req *r)
{
    struct gw_intake *in = r->intake;
    if (!in)
        return;
    pthread_mutex_lock(&in->pool->mu);
    wait_idle(in);
    pthread_mutex_unlock(&in->pool->mu);
}

void gw_intake_end(struct gw_req *r)
{
    struct gw_intake *in = r->intake;
    if (!in)
        return;
    struct gw_intake_pool *p = in->pool;
    pthread_mutex_lock(&p->mu);
    wait_idle(in);
    buf_put(p, in->buf[0]);
    buf_put(p, in->buf[1]);
    pthread_mutex_unlock(&p->mu);
    free(in);
    r->intake = NULL;
}
