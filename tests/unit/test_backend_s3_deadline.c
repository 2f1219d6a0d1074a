/* tests/unit/test_backend_s3_deadline.c - the deadlines of the S3 cold tier
 * (backend/s3.c) against loopback servers that misbehave on purpose: one
 * that accepts connections and reads requests but never answers (a hung or
 * SIGSTOPped tier), one that answers 503 SlowDown slowly forever, one whose
 * body trickles, one that answers everything 403. Proves that a hung tier
 * costs a call its first-byte deadline and no more (no retry multiplies it),
 * that a slow body that flows is not cut, and what backend_probe says.
 * Bounds are generous (a deadline of 0.5 s must end within 3 s); what is
 * counted (requests the server saw) does not depend on timing. */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"

int register_tests(void);

enum srv_mode {
    SRV_MUTE,        /* reads requests, never writes a byte */
    SRV_SLOWDOWN,    /* every request: 300 ms, then 503 SlowDown */
    SRV_TRICKLE,     /* headers at once, then the 30-byte body a byte per 100 ms */
    SRV_FORBIDDEN,   /* every request: 403 at once */
};

static struct srv {
    int lfd, port;
    enum srv_mode mode;
    pthread_t th;
    atomic_bool stop;
    atomic_int requests;      /* complete request heads received */
    atomic_int conns_open;
} S;

static void nap_ms(int ms)
{
    for (int i = 0; i < ms / 10 && !atomic_load(&S.stop); i++) {
        struct timespec ts = { 0, 10000000L };
        nanosleep(&ts, NULL);
    }
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int answer(int fd, const char *req)
{
    bool head = strncmp(req, "HEAD ", 5) == 0;
    char h[512];
    int n;
    switch (S.mode) {
    case SRV_MUTE:
        return 0;
    case SRV_SLOWDOWN: {
        static const char body[] = "<Error><Code>SlowDown</Code><Message>m</Message></Error>";
        nap_ms(300);
        n = snprintf(h, sizeof h, "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                     "Content-Length: %zu\r\n\r\n%s", head ? (size_t)0 : sizeof body - 1,
                     head ? "" : body);
        return send_all(fd, h, (size_t)n);
    }
    case SRV_FORBIDDEN:
        n = snprintf(h, sizeof h, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n");
        return send_all(fd, h, (size_t)n);
    case SRV_TRICKLE:
        n = snprintf(h, sizeof h, "HTTP/1.1 200 OK\r\nETag: \"abc\"\r\nContent-Length: 30\r\n"
                     "Last-Modified: Wed, 21 Oct 2015 07:28:00 GMT\r\n\r\n");
        if (send_all(fd, h, (size_t)n) != 0)
            return -1;
        if (head)
            return 0;
        for (int i = 0; i < 30; i++) {
            char c = (char)('a' + i % 26);
            nap_ms(100);
            if (send_all(fd, &c, 1) != 0)
                return -1;
        }
        return 0;
    }
    return -1;
}

static void *conn_main(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char req[16384];
    size_t have = 0;
    atomic_fetch_add(&S.conns_open, 1);
    while (!atomic_load(&S.stop)) {
        struct pollfd p = { fd, POLLIN, 0 };
        if (poll(&p, 1, 50) <= 0)
            continue;
        ssize_t r = recv(fd, req + have, sizeof req - 1 - have, 0);
        if (r <= 0)
            break;
        have += (size_t)r;
        req[have] = '\0';
        char *end;
        while ((end = strstr(req, "\r\n\r\n")) != NULL) {   /* requests here have no body */
            atomic_fetch_add(&S.requests, 1);
            if (answer(fd, req) != 0)
                goto out;
            size_t used = (size_t)(end + 4 - req);
            memmove(req, req + used, have - used + 1);
            have -= used;
        }
        if (have == sizeof req - 1)
            have = 0;
    }
out:
    close(fd);
    atomic_fetch_sub(&S.conns_open, 1);
    return NULL;
}

static void *srv_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&S.stop)) {
        struct pollfd p = { S.lfd, POLLIN, 0 };
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(S.lfd, NULL, NULL);
        if (fd < 0)
            continue;
        pthread_t t;
        if (pthread_create(&t, NULL, conn_main, (void *)(intptr_t)fd) == 0)
            pthread_detach(t);
        else
            close(fd);
    }
    return NULL;
}

static void srv_start(enum srv_mode mode)
{
    memset(&S, 0, sizeof S);
    S.mode = mode;
    S.lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    CU_ASSERT_FATAL(S.lfd >= 0 && bind(S.lfd, (struct sockaddr *)&a, sizeof a) == 0 &&
                    listen(S.lfd, 64) == 0 &&
                    getsockname(S.lfd, (struct sockaddr *)&a, &al) == 0);
    S.port = ntohs(a.sin_port);
    CU_ASSERT_FATAL(pthread_create(&S.th, NULL, srv_main, NULL) == 0);
}

static void srv_stop(void)
{
    atomic_store(&S.stop, true);
    pthread_join(S.th, NULL);
    close(S.lfd);
    for (int i = 0; i < 300 && atomic_load(&S.conns_open) > 0; i++) {
        struct timespec ts = { 0, 10000000L };
        nanosleep(&ts, NULL);
    }
}

static struct backend *open_at(int port, unsigned first_byte_ms, unsigned retries)
{
    char ep[64];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", port);
    struct backend_s3_conf cf = { .endpoint = ep, .region = "us-east-1", .access_key = "a",
                                  .secret_key = "s", .first_byte_timeout_ms = first_byte_ms,
                                  .retries = retries };
    struct backend *b = NULL;
    CU_ASSERT_EQUAL(backend_s3_open(&cf, &b), BACKEND_OK);
    return b;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void status_has_a_name(void)
{
    CU_ASSERT_STRING_EQUAL(backend_status_name(BACKEND_TIMEOUT), "TIMEOUT");
}

/* Each read-side verb against a tier that never answers: BACKEND_TIMEOUT
 * after its 0.5 s first-byte deadline, one request each (no retry). */
static void hung_tier_costs_each_call_its_first_byte_deadline(void)
{
    srv_start(SRV_MUTE);
    struct backend *b = open_at(S.port, 500, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    struct obj_meta m;
    struct backend_obj *o = NULL;
    struct backend_list_req lr = { "", NULL, NULL, 1000 };
    struct backend_list_page page;
    for (int i = 0; i < 4; i++) {
        int before = atomic_load(&S.requests);
        double t0 = now_s();
        enum backend_status st;
        switch (i) {
        case 0: st = backend_object_head(b, "bkt", "k", &m); break;
        case 1: st = backend_object_open(b, "bkt", "k", &m, &o); break;
        case 2: st = backend_list_objects(b, "bkt", &lr, &page); break;
        default: st = backend_bucket_head(b, "bkt"); break;
        }
        double dt = now_s() - t0;
        if (st != BACKEND_TIMEOUT || dt < 0.4 || dt >= 3.0)
            fprintf(stderr, "call %d: %s after %.2f s\n", i, backend_status_name(st), dt);
        CU_ASSERT_EQUAL(st, BACKEND_TIMEOUT);
        CU_ASSERT(dt >= 0.4 && dt < 3.0);
        CU_ASSERT_EQUAL(atomic_load(&S.requests) - before, 1);
    }
    CU_ASSERT_PTR_NULL(o);
    struct backend_stats bs;
    backend_stats_get(&bs);
    CU_ASSERT(bs.timeouts >= 4);
    backend_close(b);
    srv_stop();
}

/* The cache's revalidation: a HEAD within its own deadline, shorter than
 * the store's first-byte deadline. */
static void timed_head_keeps_its_own_deadline(void)
{
    srv_start(SRV_MUTE);
    struct backend *b = open_at(S.port, 20000, 2);
    struct obj_meta m;
    double t0 = now_s();
    CU_ASSERT_EQUAL(backend_object_head_timed(b, "bkt", "k", 300, &m), BACKEND_TIMEOUT);
    double dt = now_s() - t0;
    CU_ASSERT(dt >= 0.25 && dt < 3.0);
    CU_ASSERT_EQUAL(atomic_load(&S.requests), 1);
    backend_close(b);
    srv_stop();
}

/* 503 SlowDown after 300 ms, forever, with 10 retries allowed: the retries
 * stop at the 1 s first-byte deadline (about 3 attempts), not after 11. */
static void retries_stop_at_the_first_byte_deadline(void)
{
    srv_start(SRV_SLOWDOWN);
    struct backend *b = open_at(S.port, 1000, 10);
    struct backend_list_req lr = { "", NULL, NULL, 1000 };
    struct backend_list_page page;
    double t0 = now_s();
    enum backend_status st = backend_list_objects(b, "bkt", &lr, &page);
    double dt = now_s() - t0;
    CU_ASSERT_EQUAL(st, BACKEND_UNAVAILABLE);
    CU_ASSERT(dt < 3.0);
    int n = atomic_load(&S.requests);
    if (n < 1 || n > 4)
        fprintf(stderr, "slowdown: %d requests in %.2f s\n", n, dt);
    CU_ASSERT(n >= 1 && n <= 4);
    backend_close(b);
    srv_stop();
}

/* Headers at once, then 30 bytes over about 3 s: with a 0.5 s first-byte
 * deadline the transfer flows to its end. */
static void slow_flowing_body_is_not_cut(void)
{
    srv_start(SRV_TRICKLE);
    struct backend *b = open_at(S.port, 500, 2);
    struct obj_meta m;
    struct backend_obj *o = NULL;
    CU_ASSERT_EQUAL_FATAL(backend_object_open(b, "bkt", "k", &m, &o), BACKEND_OK);
    CU_ASSERT_EQUAL(m.size, 30);
    char buf[64];
    uint64_t off = 0;
    double t0 = now_s();
    while (off < 30) {
        size_t got = 0;
        enum backend_status st = backend_obj_read(o, off, buf + off, sizeof buf - off, &got);
        CU_ASSERT_EQUAL(st, BACKEND_OK);
        if (st != BACKEND_OK || got == 0)
            break;
        off += got;
    }
    CU_ASSERT_EQUAL(off, 30);
    CU_ASSERT(now_s() - t0 >= 2.0);   /* it really trickled past the deadline */
    for (uint64_t i = 0; i < off; i++)
        CU_ASSERT_EQUAL(buf[i], (char)('a' + i % 26));
    backend_obj_close(o);
    obj_meta_clear(&m);
    backend_close(b);
    srv_stop();
}

static void probe_counts_any_answer_and_says_why_not(void)
{
    char why[256];
    /* any HTTP answer, 403 included, is "there" */
    srv_start(SRV_FORBIDDEN);
    struct backend *b = open_at(S.port, 5000, 2);
    CU_ASSERT_EQUAL(backend_probe(b, 1000, why, sizeof why), BACKEND_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "HTTP 403"));
    CU_ASSERT_EQUAL(atomic_load(&S.requests), 1);
    backend_close(b);
    srv_stop();
    /* a hung tier: TIMEOUT within the probe's deadline, one request */
    srv_start(SRV_MUTE);
    b = open_at(S.port, 5000, 2);
    double t0 = now_s();
    CU_ASSERT_EQUAL(backend_probe(b, 300, why, sizeof why), BACKEND_TIMEOUT);
    CU_ASSERT(now_s() - t0 < 3.0);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "no answer within 300 ms"));
    CU_ASSERT_EQUAL(atomic_load(&S.requests), 1);
    struct backend_info bi;
    backend_info_get(b, &bi);
    CU_ASSERT_STRING_EQUAL(bi.kind, "s3");
    CU_ASSERT_PTR_NOT_NULL(bi.location && strstr(bi.location, "http://127.0.0.1:"));
    CU_ASSERT_EQUAL(bi.first_byte_ms, 5000);
    int port = S.port;
    backend_close(b);
    srv_stop();
    /* nobody listens any more: UNAVAILABLE, cannot connect, fast */
    b = open_at(port, 5000, 2);
    t0 = now_s();
    CU_ASSERT_EQUAL(backend_probe(b, 1000, why, sizeof why), BACKEND_UNAVAILABLE);
    CU_ASSERT(now_s() - t0 < 3.0);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "cannot connect"));
    backend_close(b);
}

int register_tests(void)
{
    CU_pSuite s = CU_add_suite("backend_s3_deadline", NULL, NULL);
    if (!s)
        return -1;
#define T(fn) CU_add_test(s, #fn, fn)
    if (!T(status_has_a_name) || !T(hung_tier_costs_each_call_its_first_byte_deadline) ||
        !T(timed_head_keeps_its_own_deadline) || !T(retries_stop_at_the_first_byte_deadline) ||
        !T(slow_flowing_body_is_not_cut) || !T(probe_counts_any_answer_and_says_why_not))
        return -1;
#undef T
    return 0;
}
