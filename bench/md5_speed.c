/* bench/md5_speed.c - MD5 of T concurrent streams, lanes on and off
 * (common/md5.h). Each of T threads hashes -m MiB of its own warm buffer in
 * -p KiB pieces, as an intake thread hashes a body; the arms alternate
 * (off, on, off, on, ...) -r times. Prints one line per run:
 *   THREADS ARM REP WALL_GBps CPU_s_per_GiB LANES_MEAN
 * (CPU = the process's user+system time; LANES_MEAN = the mean number of
 * busy lanes per engine step, 0 with the lanes off). OpenSSL's EVP MD5 on
 * one core of this CPU is the "off" arm's floor.
 * Usage: md5_speed [-t THREADS[,THREADS...]] [-m MiB] [-p KiB] [-r REPS] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "md5.h"

static size_t g_mib = 256, g_piece = 256 * 1024;

struct worker {
    pthread_t t;
    uint8_t *buf;
    pthread_barrier_t *start;
    uint8_t md[16];
};

static void *run(void *arg)
{
    struct worker *w = arg;
    struct sg_md5 m;
    sg_md5_init(&m);
    sg_md5_share_lanes(true);
    pthread_barrier_wait(w->start);
    size_t total = g_mib << 20, buflen = 16u << 20;
    for (size_t at = 0; at < total; at += g_piece)
        sg_md5_update(&m, w->buf + at % buflen, g_piece);
    sg_md5_final(&m, w->md);
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void one(int threads, int lanes, int rep)
{
    struct worker w[64];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    sg_md5_set_lanes(lanes);
    struct sg_md5_stats s0, s1;
    sg_md5_stats(&s0);
    for (int i = 0; i < threads; i++) {
        w[i].buf = malloc(16u << 20);
        memset(w[i].buf, i + 1, 16u << 20);
        w[i].start = &start;
        pthread_create(&w[i].t, NULL, run, &w[i]);
    }
    double c0 = cpu();
    double t0 = now();
    pthread_barrier_wait(&start);
    for (int i = 0; i < threads; i++)
        pthread_join(w[i].t, NULL);
    double t1 = now(), c1 = cpu();
    sg_md5_stats(&s1);
    double steps = 0, lanesum = 0;
    for (int n = 1; n <= 8; n++) {
        double d = (double)(s1.steps_by_lanes[n] - s0.steps_by_lanes[n]);
        steps += d;
        lanesum += d * n;
    }
    double bytes = (double)threads * (double)(g_mib << 20);
    printf("%d %s %d %.3f %.3f %.2f\n", threads, lanes ? "lanes" : "openssl", rep,
           bytes / (t1 - t0) / 1e9, (c1 - c0) / (bytes / (1 << 30)),
           steps ? lanesum / steps : 0.0);
    fflush(stdout);
    for (int i = 0; i < threads; i++)
        free(w[i].buf);
    pthread_barrier_destroy(&start);
}

int main(int argc, char **argv)
{
    char tlist[128] = "1,2,4,8";
    int reps = 3, opt;
    while ((opt = getopt(argc, argv, "t:m:p:r:")) != -1) {
        switch (opt) {
        case 't': snprintf(tlist, sizeof tlist, "%s", optarg); break;
        case 'm': g_mib = strtoul(optarg, NULL, 10); break;
        case 'p': g_piece = strtoul(optarg, NULL, 10) * 1024; break;
        case 'r': reps = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: md5_speed [-t T[,T...]] [-m MiB] [-p KiB] [-r REPS]\n");
            return 2;
        }
    }
    if (!sg_md5_lanes_available())
        fprintf(stderr, "md5_speed: no AVX2 on this CPU: both arms are OpenSSL\n");
    printf("threads arm rep wall_GBps cpu_s_per_GiB lanes_mean\n");
    for (char *save = NULL, *t = strtok_r(tlist, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int n = atoi(t);
        if (n < 1 || n > 64)
            continue;
        for (int r = 0; r < reps; r++) {
            one(n, 0, r);
            one(n, 1, r);
        }
    }
    return 0;
}
