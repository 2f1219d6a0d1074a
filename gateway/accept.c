/* gateway/accept.c - one thread accepts the connections and gives each to an
 * HTTP thread, keeping the threads' shares even.
 *
 * Why: with libmicrohttpd 0.9.75's thread pool every pool thread watches the
 * listening socket, and the first to wake accepts up to ten connections at
 * once. A burst of connections - wrk's, or a data loader's workers opening
 * theirs at the start of an epoch - could land on one thread and stay there
 * for as long as it was kept alive: eight 1 MiB readers all sat on one of
 * the two HTTP threads in up to a quarter of the runs, which then served
 * 0.86-0.90x the requests of the runs where they were spread
 * (bench/results/ab-accept-spread.md). With more cores and threads, more of
 * them would sit idle.
 *
 * Each HTTP thread is a libmicrohttpd daemon of its own, without a listening
 * socket (MHD_USE_NO_LISTEN_SOCKET); this thread accepts and hands the
 * socket over with MHD_add_connection. Which thread (pick): the one of the
 * CPU the connection's packets came in on (SO_INCOMING_CPU, modulo the
 * threads), as long as it holds at most SPREAD_SLACK connections more than
 * the least held thread; else the least held. Spreading by count alone,
 * round-robin, took a quarter more CPU per 4 KiB hit from a client on this
 * node (0.76x the hits): each client thread's connections were dealt to
 * every HTTP thread, so responses woke client threads on the other core. By CPU,
 * a client thread's connections share a thread, as the old listener's
 * bursts happened to put them, and the slack bounds the skew.
 *
 * The daemons do not share libmicrohttpd's connection counts, so the limits
 * they enforced as one pool are kept here: connections.max in all and
 * connections.per_client from one address. A connection past either is
 * closed at once, without an answer, as libmicrohttpd closed it. A
 * connection counts from its accept until its daemon reports it closed
 * (gw_accept_closed). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "gw_int.h"
#include "log.h"

enum {
    CLIENT_BUCKETS = 4096,       /* of the per-address table (chained) */
    /* out of descriptors: how long to leave the backlog alone (else the
     * listening socket stays ready and the thread spins) */
    FULL_PAUSE_MS = 100,
    LOG_EVERY_S = 10,            /* one line per reason per this, with a count */
    /* how many connections the thread of a connection's CPU may hold over
     * the least held thread and still be given it */
    SPREAD_SLACK = 1,
};

/* Open connections from one client address. */
struct client {
    struct client *next;
    unsigned char addr[16];      /* IPv4: the first 4 bytes */
    unsigned char len;
    unsigned open;
};

/* One line per LOG_EVERY_S for a repeated refusal. */
struct said {
    time_t last;
    unsigned long long since;    /* refusals not logged since */
};

struct gw_accept {
    int lfd;
    int stop_fd;                 /* an eventfd: written by gw_accept_stop */
    pthread_t thread;
    bool running;
    struct MHD_Daemon *const *daemons;
    unsigned n;
    _Atomic unsigned *open;      /* per daemon */
    atomic_uint open_total;
    unsigned next;               /* where the search for the least held starts */
    unsigned limit, per_client;
    atomic_uint_fast64_t refused[GW_REFUSED_COUNT];
    pthread_mutex_t mu;          /* the client table */
    struct client *clients[CLIENT_BUCKETS];
    struct said said[GW_REFUSED_COUNT];   /* the accepting thread's only */
};

/* The address bytes a client is counted by; 0 for a family not counted. */
static size_t addr_key(const struct sockaddr *sa, unsigned char key[16])
{
    if (sa->sa_family == AF_INET) {
        memcpy(key, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        return 4;
    }
    if (sa->sa_family == AF_INET6) {
        memcpy(key, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
        return 16;
    }
    return 0;
}

static unsigned bucket_of(const unsigned char *key, size_t len)
{
    uint32_t h = 2166136261u;    /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ key[i]) * 16777619u;
    return h % CLIENT_BUCKETS;
}

static struct client **find(struct gw_accept *a, const unsigned char *key, size_t len)
{
    struct client **p = &a->clients[bucket_of(key, len)];
    while (*p && ((*p)->len != len || memcmp((*p)->addr, key, len) != 0))
        p = &(*p)->next;
    return p;
}

/* Counts one more connection from sa; false when it is at per_client (or
 * out of memory for a new address). */
static bool client_take(struct gw_accept *a, const struct sockaddr *sa)
{
    unsigned char key[16];
    size_t len = addr_key(sa, key);
    if (!len)
        return true;
    pthread_mutex_lock(&a->mu);
    struct client **p = find(a, key, len);
    bool ok = true;
    if (*p) {
        ok = (*p)->open < a->per_client;
        if (ok)
            (*p)->open++;
    } else if ((*p = calloc(1, sizeof **p)) != NULL) {
        memcpy((*p)->addr, key, len);
        (*p)->len = (unsigned char)len;
        (*p)->open = 1;
    } else {
        ok = false;
    }
    pthread_mutex_unlock(&a->mu);
    return ok;
}

static void client_give_back(struct gw_accept *a, const struct sockaddr *sa)
{
    unsigned char key[16];
    size_t len = addr_key(sa, key);
    if (!len)
        return;
    pthread_mutex_lock(&a->mu);
    struct client **p = find(a, key, len);
    if (*p && --(*p)->open == 0) {
        struct client *gone = *p;
        *p = gone->next;
        free(gone);
    }
    pthread_mutex_unlock(&a->mu);
}

/* Counts and logs the refusal, then closes fd: a client that sees its
 * connection closed finds the refusal in the metrics and the log. */
static void refuse(struct gw_accept *a, int fd, enum gw_refused why)
{
    atomic_fetch_add(&a->refused[why], 1);
    struct said *s = &a->said[why];
    time_t now = time(NULL);
    if (s->last && now - s->last < LOG_EVERY_S) {
        s->since++;
        close(fd);
        return;
    }
    char more[64] = "";
    if (s->since)
        snprintf(more, sizeof more, " (and %llu more since the last such line)", s->since);
    if (why == GW_REFUSED_LIMIT)
        log_msg(LOG_LVL_WARN, "http", "connections.max (%u) held: a new connection was "
                "closed%s", a->limit, more);
    else
        log_msg(LOG_LVL_WARN, "http", "connections.per_client (%u) held by one address: a "
                "new connection from it was closed%s", a->per_client, more);
    s->last = now;
    s->since = 0;
    close(fd);
}

/* The daemon with the fewest connections; among equals, the one after the
 * last chosen, so that a burst goes round them all. */
static unsigned least_held(struct gw_accept *a)
{
    unsigned best = a->next % a->n, best_open = atomic_load(&a->open[best]);
    for (unsigned k = 1; k < a->n; k++) {
        unsigned i = (a->next + k) % a->n, o = atomic_load(&a->open[i]);
        if (o < best_open) {
            best = i;
            best_open = o;
        }
    }
    a->next = best + 1;
    return best;
}

/* Where connection fd goes: to the thread of the CPU its packets came in on
 * (SO_INCOMING_CPU, counted modulo the threads), unless that thread holds
 * more than SPREAD_SLACK over the least held one; then to the least held. */
static unsigned pick(struct gw_accept *a, int fd)
{
    int cpu = -1;
    socklen_t len = sizeof cpu;
    if (getsockopt(fd, SOL_SOCKET, SO_INCOMING_CPU, &cpu, &len) != 0 || cpu < 0)
        return least_held(a);
    unsigned want = (unsigned)cpu % a->n, fewest = UINT_MAX;
    for (unsigned i = 0; i < a->n; i++) {
        unsigned o = atomic_load(&a->open[i]);
        if (o < fewest)
            fewest = o;
    }
    return atomic_load(&a->open[want]) <= fewest + SPREAD_SLACK ? want : least_held(a);
}

static void admit(struct gw_accept *a, int fd, const struct sockaddr *sa, socklen_t sl)
{
    if (atomic_load(&a->open_total) >= a->limit) {
        refuse(a, fd, GW_REFUSED_LIMIT);
        return;
    }
    if (!client_take(a, sa)) {
        refuse(a, fd, GW_REFUSED_PER_CLIENT);
        return;
    }
    unsigned i = pick(a, fd);
    atomic_fetch_add(&a->open[i], 1);
    atomic_fetch_add(&a->open_total, 1);
    /* From here libmicrohttpd owns fd: it closes it itself when it fails. */
    if (MHD_add_connection((struct MHD_Daemon *)a->daemons[i], fd, sa, sl) != MHD_YES) {
        atomic_fetch_sub(&a->open[i], 1);
        atomic_fetch_sub(&a->open_total, 1);
        client_give_back(a, sa);
    }
}

static void *accept_main(void *arg)
{
    struct gw_accept *a = arg;
    struct pollfd pf[2] = { { a->lfd, POLLIN, 0 }, { a->stop_fd, POLLIN, 0 } };
    for (;;) {
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            break;
        if (pf[1].revents)
            break;
        for (;;) {   /* everything waiting in the backlog */
            struct sockaddr_storage ss;
            socklen_t sl = sizeof ss;
            int fd = accept4(a->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd >= 0) {
                admit(a, fd, (struct sockaddr *)&ss, sl);
                continue;
            }
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                log_msg(LOG_LVL_WARN, "http", "cannot accept a connection: %s (pausing "
                        "%d ms)", strerror(errno), FULL_PAUSE_MS);
                poll(&pf[1], 1, FULL_PAUSE_MS);
            }
            break;   /* EAGAIN: the backlog is empty */
        }
    }
    return NULL;
}

int gw_accept_start(int lfd, struct MHD_Daemon *const *daemons, unsigned n, unsigned limit,
                    unsigned per_client, struct gw_accept **out)
{
    *out = NULL;
    struct gw_accept *a = calloc(1, sizeof *a);
    if (!a || n == 0 || !(a->open = calloc(n, sizeof *a->open))) {
        log_msg(LOG_LVL_ERROR, "http", "cannot start accepting connections: out of memory");
        free(a);
        close(lfd);
        return -1;
    }
    a->lfd = lfd;
    a->daemons = daemons;
    a->n = n;
    a->limit = limit;
    a->per_client = per_client;
    pthread_mutex_init(&a->mu, NULL);
    if ((a->stop_fd = eventfd(0, EFD_CLOEXEC)) < 0 ||
        pthread_create(&a->thread, NULL, accept_main, a) != 0) {
        log_msg(LOG_LVL_ERROR, "http", "cannot start the thread that accepts connections: %s",
                strerror(errno));
        if (a->stop_fd >= 0)
            close(a->stop_fd);
        close(lfd);
        pthread_mutex_destroy(&a->mu);
        free((void *)a->open);
        free(a);
        return -1;
    }
    a->running = true;
    *out = a;
    return 0;
}

void gw_accept_stop(struct gw_accept *a)
{
    if (!a || !a->running)
        return;
    uint64_t one = 1;
    while (write(a->stop_fd, &one, sizeof one) < 0 && errno == EINTR)
        ;
    pthread_join(a->thread, NULL);
    a->running = false;
    close(a->lfd);   /* new connections are refused by the kernel from here */
    a->lfd = -1;
}

void gw_accept_closed(struct gw_accept *a, unsigned i, const struct sockaddr *sa)
{
    if (!a || i >= a->n)
        return;
    atomic_fetch_sub(&a->open[i], 1);
    atomic_fetch_sub(&a->open_total, 1);
    if (sa)
        client_give_back(a, sa);
}

void gw_accept_free(struct gw_accept *a)
{
    if (!a)
        return;
    gw_accept_stop(a);
    close(a->stop_fd);
    for (unsigned b = 0; b < CLIENT_BUCKETS; b++)
        while (a->clients[b]) {
            struct client *c = a->clients[b];
            a->clients[b] = c->next;
            free(c);
        }
    pthread_mutex_destroy(&a->mu);
    free((void *)a->open);
    free(a);
}

unsigned gw_accept_threads(const struct gw_accept *a, unsigned *open, unsigned max)
{
    if (!a)
        return 0;
    unsigned n = a->n < max ? a->n : max;
    for (unsigned i = 0; i < n; i++)
        open[i] = atomic_load(&a->open[i]);
    return n;
}

uint64_t gw_accept_refused(const struct gw_accept *a, enum gw_refused why)
{
    return a ? atomic_load(&a->refused[why]) : 0;
}
