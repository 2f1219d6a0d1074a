/* gateway/conn_guard.c - the request-head deadlines libmicrohttpd 0.9.75
 * does not have. Its own timeout only ends *silent* connections; one that
 * trickles a byte a second (slowloris) would hold its slot for ever. Here a
 * connection must complete its request line within idle_timeout_s of
 * connecting or of its previous response, and its headers within
 * header_timeout_s of the request line. One thread watches the deadlines and
 * shuts an expired socket down; libmicrohttpd then reads the end of the
 * stream and closes the connection in its own thread, as after a hang-up.
 *
 * Every request arms and disarms its connection three times. With one lock
 * for all connections, the two HTTP threads met on it: under 4 KiB hits at
 * c=64 it was half of 0.1 futex calls per request
 * (bench/results/ab-guard-shards.md). So the lists are sharded, one shard per
 * HTTP thread (a connection stays on the thread it was given to), and only
 * the watching thread visits them all. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "gw_int.h"
#include "worker.h"

enum { GUARD_SHARDS = 16 };      /* more than the HTTP threads of most gateways */

/* One list per deadline kind. Every entry of a list got the same timeout
 * when it was appended, so each list is in deadline order and the watcher
 * only ever looks at the heads: O(expired) per pass. */
struct guard_shard {
    pthread_mutex_t mu;
    struct gw_conn *head[GW_DEADLINE_COUNT], *tail[GW_DEADLINE_COUNT];
} __attribute__((aligned(64)));   /* no two shards' locks on one cache line */

struct gw_conn {
    struct gw_guard *g;
    struct guard_shard *sh;        /* its lists, for its whole life */
    struct gw_conn *prev, *next;   /* in sh's list `list` while armed */
    int fd;
    int list;                      /* enum gw_deadline while armed, -1 when not */
    uint64_t deadline_ms;
};

struct gw_guard {
    struct guard_shard shard[GUARD_SHARDS];
    atomic_uint next_shard;        /* handed to HTTP threads in turn */
    struct sg_worker wk;           /* its mu guards what follows but the atomics */
    uint64_t timeout_ms[GW_DEADLINE_COUNT];
    uint64_t unlogged[GW_DEADLINE_COUNT];   /* closed since the last log line */
    uint64_t last_log_ms;
    atomic_uint_fast64_t closed[GW_DEADLINE_COUNT];
    atomic_uint_fast64_t open;
};

enum { LOG_EVERY_MS = 10000 };   /* 500 slowloris sockets make one line, not 500 */

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* Under c->sh->mu. */
static void unlink_locked(struct gw_conn *c)
{
    struct guard_shard *sh = c->sh;
    if (c->list < 0)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        sh->head[c->list] = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        sh->tail[c->list] = c->prev;
    c->prev = c->next = NULL;
    c->list = -1;
}

/* Under c->sh->mu. */
static void append_locked(struct gw_conn *c, enum gw_deadline d, uint64_t now)
{
    struct guard_shard *sh = c->sh;
    c->list = (int)d;
    c->deadline_ms = now + c->g->timeout_ms[d];
    c->prev = sh->tail[d];
    c->next = NULL;
    if (sh->tail[d])
        sh->tail[d]->next = c;
    else
        sh->head[d] = c;
    sh->tail[d] = c;
}

/* The calling HTTP thread's shard: each thread gets the next one the first
 * time it opens a connection. */
static struct guard_shard *my_shard(struct gw_guard *g)
{
    static _Thread_local struct gw_guard *owner;
    static _Thread_local unsigned idx;
    if (owner != g) {   /* a thread of another (a test's earlier) guard */
        owner = g;
        idx = atomic_fetch_add(&g->next_shard, 1) % GUARD_SHARDS;
    }
    return &g->shard[idx];
}

static void log_closed(struct gw_guard *g, const uint64_t *n)
{
    if (n[GW_DEADLINE_IDLE])
        log_msg(LOG_LVL_INFO, "gw", "closed %llu connections that sent no request line within "
                "%llu s (connections.idle_timeout_s)", (unsigned long long)n[GW_DEADLINE_IDLE],
                (unsigned long long)(g->timeout_ms[GW_DEADLINE_IDLE] / 1000));
    if (n[GW_DEADLINE_HEADER])
        log_msg(LOG_LVL_INFO, "gw", "closed %llu connections whose headers were not complete "
                "%llu s after the request line (connections.header_timeout_s)",
                (unsigned long long)n[GW_DEADLINE_HEADER],
                (unsigned long long)(g->timeout_ms[GW_DEADLINE_HEADER] / 1000));
}

static void *guard_main(void *arg)
{
    struct gw_guard *g = arg;
    pthread_mutex_lock(&g->wk.mu);
    while (!g->wk.stop) {
        uint64_t now = now_ms(), next = now + 1000, pending = 0;
        for (int i = 0; i < GUARD_SHARDS; i++) {
            struct guard_shard *sh = &g->shard[i];
            pthread_mutex_lock(&sh->mu);
            for (int d = 0; d < GW_DEADLINE_COUNT; d++) {
                struct gw_conn *c;
                while ((c = sh->head[d]) != NULL && c->deadline_ms <= now) {
                    unlink_locked(c);
                    /* The descriptor is still open: libmicrohttpd closes it
                     * only after gw_conn_close(), which needs this lock. */
                    shutdown(c->fd, SHUT_RDWR);
                    g->unlogged[d]++;
                    atomic_fetch_add(&g->closed[d], 1);
                }
                if (c && c->deadline_ms < next)
                    next = c->deadline_ms;
            }
            pthread_mutex_unlock(&sh->mu);
        }
        for (int d = 0; d < GW_DEADLINE_COUNT; d++)
            pending += g->unlogged[d];
        if (pending && now - g->last_log_ms >= LOG_EVERY_MS) {
            uint64_t n[GW_DEADLINE_COUNT];
            for (int d = 0; d < GW_DEADLINE_COUNT; d++) {
                n[d] = g->unlogged[d];
                g->unlogged[d] = 0;
            }
            g->last_log_ms = now;
            pthread_mutex_unlock(&g->wk.mu);
            log_closed(g, n);
            pthread_mutex_lock(&g->wk.mu);
            continue;
        }
        if (pending && g->last_log_ms + LOG_EVERY_MS < next)
            next = g->last_log_ms + LOG_EVERY_MS;
        struct timespec ts = { (time_t)(next / 1000), (long)(next % 1000) * 1000000L };
        pthread_cond_timedwait(&g->wk.cv, &g->wk.mu, &ts);
    }
    uint64_t n[GW_DEADLINE_COUNT];
    for (int d = 0; d < GW_DEADLINE_COUNT; d++)
        n[d] = g->unlogged[d];
    pthread_mutex_unlock(&g->wk.mu);
    log_closed(g, n);
    return NULL;
}

int gw_guard_start(unsigned idle_timeout_s, unsigned header_timeout_s, struct gw_guard **out)
{
    struct gw_guard *g;   /* calloc would not align its shards */
    if (posix_memalign((void **)&g, _Alignof(struct gw_guard), sizeof *g) != 0)
        return -1;
    memset(g, 0, sizeof *g);
    g->timeout_ms[GW_DEADLINE_IDLE] = (uint64_t)idle_timeout_s * 1000u;
    g->timeout_ms[GW_DEADLINE_HEADER] = (uint64_t)header_timeout_s * 1000u;
    for (int i = 0; i < GUARD_SHARDS; i++)
        pthread_mutex_init(&g->shard[i].mu, NULL);
    int rc = sg_worker_start(&g->wk, guard_main, g);
    if (rc != 0) {
        for (int i = 0; i < GUARD_SHARDS; i++)
            pthread_mutex_destroy(&g->shard[i].mu);
        log_msg(LOG_LVL_ERROR, "gw", "cannot start the connection deadline thread: %s",
                strerror(rc));
        free(g);
        return -1;
    }
    *out = g;
    return 0;
}

void gw_guard_stop(struct gw_guard *g)
{
    if (!g)
        return;
    sg_worker_stop(&g->wk);
    for (int i = 0; i < GUARD_SHARDS; i++)
        pthread_mutex_destroy(&g->shard[i].mu);
    free(g);
}

struct gw_conn *gw_conn_open(struct gw_guard *g, int fd)
{
    struct gw_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->g = g;
    c->sh = my_shard(g);
    c->fd = fd;
    c->list = -1;
    atomic_fetch_add(&g->open, 1);
    uint64_t now = now_ms();
    pthread_mutex_lock(&c->sh->mu);
    append_locked(c, GW_DEADLINE_IDLE, now);
    pthread_mutex_unlock(&c->sh->mu);
    return c;
}

void gw_conn_close(struct gw_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->sh->mu);
    unlink_locked(c);
    pthread_mutex_unlock(&c->sh->mu);
    atomic_fetch_sub(&c->g->open, 1);
    free(c);
}

void gw_conn_arm(struct gw_conn *c, enum gw_deadline d)
{
    if (!c)
        return;
    uint64_t now = now_ms();
    pthread_mutex_lock(&c->sh->mu);
    unlink_locked(c);
    append_locked(c, d, now);
    pthread_mutex_unlock(&c->sh->mu);
}

void gw_conn_disarm(struct gw_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->sh->mu);
    unlink_locked(c);
    pthread_mutex_unlock(&c->sh->mu);
}

void gw_guard_stats(struct gw_guard *g, uint64_t *open, uint64_t *closed_idle,
                    uint64_t *closed_header)
{
    *open = atomic_load(&g->open);
    *closed_idle = atomic_load(&g->closed[GW_DEADLINE_IDLE]);
    *closed_header = atomic_load(&g->closed[GW_DEADLINE_HEADER]);
}
