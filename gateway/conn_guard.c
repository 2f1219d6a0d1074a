/* gateway/conn_guard.c - the request-head deadlines libmicrohttpd 0.9.75
 * does not have. Its own timeout only ends *silent* connections; one that
 * trickles a byte a second (slowloris) would hold its slot for ever. Here a
 * connection must complete its request line within idle_timeout_s of
 * connecting or of its previous response, and its headers within
 * header_timeout_s of the request line. One thread watches the deadlines and
 * shuts an expired socket down; libmicrohttpd then reads the end of the
 * stream and closes the connection in its own thread, as after a hang-up. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "gw_int.h"
#include "worker.h"

struct gw_conn {
    struct gw_guard *g;
    struct gw_conn *prev, *next;   /* in g's list `list` while armed */
    int fd;
    int list;                      /* enum gw_deadline while armed, -1 when not */
    uint64_t deadline_ms;
};

struct gw_guard {
    struct sg_worker wk;           /* its mu guards what follows but the atomics */
    uint64_t timeout_ms[GW_DEADLINE_COUNT];
    /* One list per deadline kind. Every entry of a list got the same timeout
     * when it was appended, so each list is in deadline order and the thread
     * only ever looks at the heads: O(expired) per pass. */
    struct gw_conn *head[GW_DEADLINE_COUNT], *tail[GW_DEADLINE_COUNT];
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

static void unlink_locked(struct gw_conn *c)
{
    struct gw_guard *g = c->g;
    if (c->list < 0)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        g->head[c->list] = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        g->tail[c->list] = c->prev;
    c->prev = c->next = NULL;
    c->list = -1;
}

static void append_locked(struct gw_conn *c, enum gw_deadline d, uint64_t now)
{
    struct gw_guard *g = c->g;
    c->list = (int)d;
    c->deadline_ms = now + g->timeout_ms[d];
    c->prev = g->tail[d];
    c->next = NULL;
    if (g->tail[d])
        g->tail[d]->next = c;
    else
        g->head[d] = c;
    g->tail[d] = c;
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
        for (int d = 0; d < GW_DEADLINE_COUNT; d++) {
            struct gw_conn *c;
            while ((c = g->head[d]) != NULL && c->deadline_ms <= now) {
                unlink_locked(c);
                /* The descriptor is still open: libmicrohttpd closes it only
                 * after gw_conn_close(), which needs this lock. */
                shutdown(c->fd, SHUT_RDWR);
                g->unlogged[d]++;
                atomic_fetch_add(&g->closed[d], 1);
            }
            if (c && c->deadline_ms < next)
                next = c->deadline_ms;
            pending += g->unlogged[d];
        }
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
    struct gw_guard *g = calloc(1, sizeof *g);
    if (!g)
        return -1;
    g->timeout_ms[GW_DEADLINE_IDLE] = (uint64_t)idle_timeout_s * 1000u;
    g->timeout_ms[GW_DEADLINE_HEADER] = (uint64_t)header_timeout_s * 1000u;
    int rc = sg_worker_start(&g->wk, guard_main, g);
    if (rc != 0) {
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
    free(g);
}

struct gw_conn *gw_conn_open(struct gw_guard *g, int fd)
{
    struct gw_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->g = g;
    c->fd = fd;
    c->list = -1;
    atomic_fetch_add(&g->open, 1);
    uint64_t now = now_ms();
    pthread_mutex_lock(&g->wk.mu);
    append_locked(c, GW_DEADLINE_IDLE, now);
    pthread_mutex_unlock(&g->wk.mu);
    return c;
}

void gw_conn_close(struct gw_conn *c)
{
    if (!c)
        return;
    struct gw_guard *g = c->g;
    pthread_mutex_lock(&g->wk.mu);
    unlink_locked(c);
    pthread_mutex_unlock(&g->wk.mu);
    atomic_fetch_sub(&g->open, 1);
    free(c);
}

void gw_conn_arm(struct gw_conn *c, enum gw_deadline d)
{
    if (!c)
        return;
    uint64_t now = now_ms();
    pthread_mutex_lock(&c->g->wk.mu);
    unlink_locked(c);
    append_locked(c, d, now);
    pthread_mutex_unlock(&c->g->wk.mu);
}

void gw_conn_disarm(struct gw_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->g->wk.mu);
    unlink_locked(c);
    pthread_mutex_unlock(&c->g->wk.mu);
}

void gw_guard_stats(struct gw_guard *g, uint64_t *open, uint64_t *closed_idle,
                    uint64_t *closed_header)
{
    *open = atomic_load(&g->open);
    *closed_idle = atomic_load(&g->closed[GW_DEADLINE_IDLE]);
    *closed_header = atomic_load(&g->closed[GW_DEADLINE_HEADER]);
}
