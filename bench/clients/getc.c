/* getc: a small HTTP/1.1 GET load client for the cases wrk cannot do.
 *
 *   getc [-c N] [-s STAGGER_MS] [-k] HOST PORT PATH...
 *   getc [-c N] [-k] -f LISTFILE HOST PORT
 *
 * N client threads take paths from the list in order (a shared cursor) and
 * GET each one; with -s each thread i starts i*STAGGER_MS after thread 0 (the
 * late joiners of one cold object: give the same path N times). -k keeps one
 * connection per thread (default: a new connection per request, like a cold
 * reader). Bodies are read into a 1 MiB buffer and dropped (no copy out), so
 * the client costs little CPU per byte.
 *
 * One line per request on stdout:
 *   thread start_ms ttfb_ms ttfbody_ms total_ms status bytes path
 * start_ms: when the request was sent, relative to the first thread's start;
 * ttfb: request sent -> first response byte; ttfbody: -> first body byte;
 * total: -> last body byte. Exit status 1 if any request failed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *host;
static int port;
static char **paths;
static size_t npaths;
static atomic_size_t cursor;
static int stagger_ms, keepalive;
static double t0;
static atomic_int failures;
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    inet_pton(AF_INET, host, &sa.sin_addr);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One GET on fd; returns 0 and fills the figures, -1 on a broken exchange. */
static int get_one(int fd, const char *path, char *buf, size_t cap, double *ttfb, double *ttbody,
                   double *total, int *status, long long *bytes)
{
    char req[2048];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s:%d\r\n%s\r\n", path, host, port,
                     keepalive ? "" : "Connection: close\r\n");
    double ts = now_ms();
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
        return -1;
    size_t have = 0;
    char *eoh = NULL;
    *ttfb = -1;
    while (!eoh) {
        ssize_t r = recv(fd, buf + have, cap - have - 1, 0);
        if (r <= 0)
            return -1;
        if (*ttfb < 0)
            *ttfb = now_ms() - ts;
        have += (size_t)r;
        buf[have] = 0;
        eoh = strstr(buf, "\r\n\r\n");
        if (!eoh && have > 65536)
            return -1;
    }
    *status = atoi(buf + 9);
    long long clen = -1;
    for (char *p = buf; p < eoh; p = strstr(p, "\r\n") + 2) {
        if (strncasecmp(p, "content-length:", 15) == 0)
            clen = atoll(p + 15);
    }
    if (clen < 0)
        return -1; /* not used by the servers under test */
    long long got = (long long)(have - (size_t)(eoh + 4 - buf));
    *ttbody = got > 0 || clen == 0 ? now_ms() - ts : -1;
    while (got < clen) {
        ssize_t r = recv(fd, buf, cap, 0);
        if (r <= 0)
            return -1;
        if (*ttbody < 0)
            *ttbody = now_ms() - ts;
        got += r;
    }
    *total = now_ms() - ts;
    *bytes = got;
    return 0;
}

static void *worker(void *arg)
{
    long id = (long)arg;
    size_t cap = 1 << 20;
    char *buf = malloc(cap);
    if (stagger_ms > 0) {
        double start = t0 + (double)id * stagger_ms;
        while (now_ms() < start)
            usleep(200);
    }
    int fd = -1;
    for (;;) {
        size_t i = atomic_fetch_add(&cursor, 1);
        if (i >= npaths)
            break;
        double ttfb = -1, ttbody = -1, total = -1;
        int status = 0;
        long long bytes = 0;
        double start = now_ms() - t0;
        int rc = -1;
        for (int attempt = 0; attempt < 2 && rc != 0; attempt++) {
            if (fd < 0)
                fd = dial();
            if (fd < 0)
                break;
            rc = get_one(fd, paths[i], buf, cap, &ttfb, &ttbody, &total, &status, &bytes);
            if (rc != 0 || !keepalive) {
                close(fd);
                fd = -1;
            }
            if (rc != 0 && !keepalive)
                break; /* a fresh connection failed: do not retry */
        }
        if (rc != 0 || status != 200)
            atomic_fetch_add(&failures, 1);
        pthread_mutex_lock(&out_mu);
        printf("%ld %.3f %.3f %.3f %.3f %d %lld %s\n", id, start, ttfb, ttbody, total,
               rc ? 0 : status, bytes, paths[i]);
        pthread_mutex_unlock(&out_mu);
    }
    if (fd >= 0)
        close(fd);
    free(buf);
    return NULL;
}

int main(int argc, char **argv)
{
    int c = 1, opt;
    const char *list = NULL;
    while ((opt = getopt(argc, argv, "c:s:kf:")) != -1) {
        switch (opt) {
        case 'c': c = atoi(optarg); break;
        case 's': stagger_ms = atoi(optarg); break;
        case 'k': keepalive = 1; break;
        case 'f': list = optarg; break;
        default:
            fprintf(stderr, "usage: getc [-c N] [-s STAGGER_MS] [-k] [-f LIST] HOST PORT [PATH...]\n");
            return 2;
        }
    }
    if (argc - optind < 2)
        return 2;
    host = argv[optind];
    port = atoi(argv[optind + 1]);
    if (list) {
        FILE *f = fopen(list, "r");
        if (!f) {
            perror(list);
            return 2;
        }
        size_t cap = 1024;
        paths = malloc(cap * sizeof *paths);
        char line[2048];
        while (fgets(line, sizeof line, f)) {
            line[strcspn(line, "\r\n")] = 0;
            if (!line[0])
                continue;
            if (npaths == cap)
                paths = realloc(paths, (cap *= 2) * sizeof *paths);
            paths[npaths++] = strdup(line);
        }
        fclose(f);
    } else {
        paths = argv + optind + 2;
        npaths = (size_t)(argc - optind - 2);
    }
    if (c < 1)
        c = 1;
    pthread_t *th = calloc((size_t)c, sizeof *th);
    t0 = now_ms();
    for (long i = 0; i < c; i++)
        pthread_create(&th[i], NULL, worker, (void *)i);
    for (int i = 0; i < c; i++)
        pthread_join(th[i], NULL);
    fflush(stdout);
    return atomic_load(&failures) ? 1 : 0;
}
