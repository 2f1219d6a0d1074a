/* bench/index_restart.c - how long the cache index takes to come back: builds an
 * index of N entries (default 1,000,000), closes it cleanly, reopens and times
 * open + the first successful lookup; then the same after the writer process was
 * SIGKILLed before close (journal replay, no snapshot). Optionally (-f N) times
 * the fstatat of N real data files, the cost a stat-at-open design would pay.
 * Usage: index_restart [-n entries] [-f files] [-d dir] */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache_index.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static const struct cidx_opts no_sweep = {.sweep = CIDX_SWEEP_NONE};

/* Publishes n READY entries of 1 MiB (train/shard-NNNNNNN.tar in bucket
 * "datasets"); returns 0 or -1. */
static int publish_n(struct cidx *x, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        char k[64], e[40];
        snprintf(k, sizeof k, "train/shard-%07u.tar", i);
        snprintf(e, sizeof e, "%08x%08x%08x%08x", i, i * 7u, i * 13u, ~i);
        uint64_t id;
        if (cidx_begin_fill(x, "datasets", k, &id, NULL) != CIDX_OK ||
            cidx_publish(x, id, 1u << 20, e, (struct timespec){1700000000, 0}) != CIDX_OK)
            return -1;
    }
    return 0;
}

/* Fills dir with n READY entries; returns 0 or -1. */
static int build(const char *dir, unsigned n, double *ms)
{
    struct cidx *x;
    if (cidx_open_ex(dir, UINT64_C(1) << 50, &no_sweep, &x) != CIDX_OK)
        return -1;
    double t0 = now_ms();
    if (publish_n(x, n) != 0)
        return -1;
    *ms = now_ms() - t0;
    return cidx_close(x) == CIDX_OK ? 0 : -1;
}

/* Opens dir, times open and the first hit. */
static int reopen(const char *dir, unsigned n, double *open_ms, double *first_ms, long *rss_kb)
{
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    double t0 = now_ms();
    struct cidx *x;
    if (cidx_open_ex(dir, UINT64_C(1) << 50, &no_sweep, &x) != CIDX_OK)
        return -1;
    *open_ms = now_ms() - t0;
    char k[64];
    snprintf(k, sizeof k, "train/shard-%07u.tar", n - 1);
    struct cidx_info inf;
    if (cidx_lookup(x, "datasets", k, &inf) != CIDX_OK)
        return -1;
    *first_ms = now_ms() - t0;
    getrusage(RUSAGE_SELF, &ru1);
    *rss_kb = ru1.ru_maxrss - ru0.ru_maxrss;
    uint64_t objs;
    cidx_usage(x, NULL, NULL, &objs);
    cidx_close(x);
    return objs == n ? 0 : -1;
}

/* Forked writer that publishes n entries and is SIGKILLed before close. */
static int build_killed(const char *dir, unsigned n)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        struct cidx *x;
        if (cidx_open_ex(dir, UINT64_C(1) << 50, &no_sweep, &x) != CIDX_OK)
            _exit(3);
        if (publish_n(x, n) != 0)
            _exit(4);
        raise(SIGKILL);
        _exit(5);
    }
    int ws;
    waitpid(pid, &ws, 0);
    return WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL ? 0 : -1;
}

static void rm_rf(const char *d)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    if (system(cmd) != 0)
        fprintf(stderr, "rm -rf %s failed\n", d);
}

static long dir_bytes(const char *d, const char *name)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", d, name);
    struct stat sb;
    return stat(p, &sb) == 0 ? (long)sb.st_size : -1;
}

/* Creates nf empty files (as the cache would name them), then times fstatat of all. */
static void stat_cost(const char *base, unsigned nf)
{
    char d[1200];
    snprintf(d, sizeof d, "%s/statbench", base);
    struct cidx *x;
    if (cidx_open_ex(d, 1, &no_sweep, &x) != CIDX_OK)
        return;
    char p[600];
    for (unsigned i = 0; i < nf; i++) {
        cidx_data_path(x, (uint64_t)i << 6, p, sizeof p);
        int fd = open(p, O_CREAT | O_WRONLY, 0644);
        if (fd >= 0)
            close(fd);
    }
    double t0 = now_ms();
    struct stat sb;
    unsigned ok = 0;
    for (unsigned i = 0; i < nf; i++) {
        cidx_data_path(x, (uint64_t)i << 6, p, sizeof p);
        ok += stat(p, &sb) == 0;
    }
    double warm = now_ms() - t0;
    printf("| fstatat of %u data files, warm dentry/inode cache | %.0f ms (%.2f us/file) |\n", ok,
           warm, warm * 1000.0 / nf);
    printf("| (cold cache: drop caches as root and rerun; each inode is a random read) | |\n");
    cidx_close(x);
}

int main(int argc, char **argv)
{
    unsigned n = 1000000, nf = 0;
    const char *base = NULL;
    int o;
    while ((o = getopt(argc, argv, "n:f:d:")) != -1) {
        if (o == 'n')
            n = (unsigned)strtoul(optarg, NULL, 10);
        else if (o == 'f')
            nf = (unsigned)strtoul(optarg, NULL, 10);
        else if (o == 'd')
            base = optarg;
        else {
            fprintf(stderr, "usage: %s [-n entries] [-f files] [-d dir]\n", argv[0]);
            return 2;
        }
    }
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/idxbench.XXXXXX", base ? base : "/tmp");
    if (mkdtemp(tmpl) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    char d1[600], d2[600];
    snprintf(d1, sizeof d1, "%s/clean", tmpl);
    snprintf(d2, sizeof d2, "%s/killed", tmpl);
    double build_ms, open_ms, first_ms;
    long rss;
    printf("| case (%u entries) | figure |\n| --- | --- |\n", n);
    if (build(d1, n, &build_ms) != 0 || reopen(d1, n, &open_ms, &first_ms, &rss) != 0) {
        fprintf(stderr, "clean case failed\n");
        return 1;
    }
    printf("| build: begin_fill + publish (journal append each) | %.0f ms (%.2f us/entry) |\n",
           build_ms, build_ms * 1000.0 / n);
    printf("| snapshot size | %.1f MB |\n", (double)dir_bytes(d1, "index.snap") / 1e6);
    printf("| clean restart: open (snapshot load) | %.0f ms |\n", open_ms);
    printf("| clean restart: to first successful lookup | %.0f ms |\n", first_ms);
    if (build_killed(d2, n) != 0 || reopen(d2, n, &open_ms, &first_ms, &rss) != 0) {
        fprintf(stderr, "killed case failed\n");
        return 1;
    }
    printf("| after SIGKILL of the writer: open (journal replay) | %.0f ms |\n", open_ms);
    printf("| after SIGKILL of the writer: to first successful lookup | %.0f ms |\n", first_ms);
    if (nf > 0)
        stat_cost(tmpl, nf);
    rm_rf(tmpl);
    return 0;
}
