/* bench/crc_speed.c - how fast the payload and journal CRCs run at the sizes
 * they meet: a 4 KiB piece (a small object, an index record batch), 1 MiB (an
 * aws-chunked chunk) and 64 MiB (a part of a multi-GiB upload, larger than
 * the caches). For each size one warm buffer of that size is run through
 * each function again and again, the CRC carried across the calls, until
 * -t MiB (default 512) were processed. Prints one line per size, function
 * and repetition:
 *   SIZE NAME REP WALL_GBps CPU_GBps CRC
 * (GB = 1e9 bytes; CPU = this thread's CPU time, which a loaded machine
 * disturbs less than the wall clock). bench/crc_speed.py runs the program
 * built from an older commit ("before") and this build ("after")
 * alternately and takes the medians.
 * Built against common/crc.h; with -DCRC_SPEED_BASE against the functions
 * as they were before common/ existed (auth/checksum.c, cache/crc32c.c).
 * Usage: crc_speed [-r REPS] [-t TOTAL_MiB] [-s SIZE_KiB[,SIZE_KiB...]] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#ifdef CRC_SPEED_BASE
uint32_t auth_crc32(uint32_t crc, const void *buf, size_t n);
uint32_t auth_crc32c(uint32_t crc, const void *buf, size_t n);
uint64_t auth_crc64nvme(uint64_t crc, const void *buf, size_t n);
uint32_t cidx_crc32c(uint32_t crc, const void *buf, size_t len);
#define sg_crc32 auth_crc32
#define sg_crc32c auth_crc32c
#define sg_crc64nvme auth_crc64nvme
#else
#include "common_int.h"
#include "crc.h"
#endif

struct fn {
    const char *name;
    uint64_t (*run)(uint64_t crc, const void *buf, size_t n);
};

static uint64_t run_crc32(uint64_t c, const void *b, size_t n)
{
    return sg_crc32((uint32_t)c, b, n);
}
static uint64_t run_crc32c(uint64_t c, const void *b, size_t n)
{
    return sg_crc32c((uint32_t)c, b, n);
}
static uint64_t run_crc64nvme(uint64_t c, const void *b, size_t n)
{
    return sg_crc64nvme(c, b, n);
}
#ifdef CRC_SPEED_BASE
/* the cache index's own copy (the same SSE4.2 loop as auth's) */
static uint64_t run_crc32c_index(uint64_t c, const void *b, size_t n)
{
    return cidx_crc32c((uint32_t)c, b, n);
}
#else
/* the fallback where the CPU has no PCLMULQDQ (the register as it is) */
static uint64_t run_crc64nvme_table(uint64_t c, const void *b, size_t n)
{
    return ~sg_crc64nvme_table(~c, b, n);
}
#endif
/* zlib's crc32, the library the issue proposed for CRC-32: the reference
 * row that shows why CRC-32 is ISA-L's (bench/results/crc.md) */
static uint64_t run_zlib(uint64_t c, const void *b, size_t n)
{
    return crc32((uLong)c, b, (uInt)n);   /* sizes stay far below 4 GiB */
}

static const struct fn fns[] = {
    { "crc32", run_crc32 },
    { "crc32c", run_crc32c },
    { "crc64nvme", run_crc64nvme },
#ifdef CRC_SPEED_BASE
    { "crc32c-cache-index", run_crc32c_index },
#else
    { "crc64nvme-table", run_crc64nvme_table },
#endif
    { "zlib-crc32", run_zlib },
};

static double secs(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The same bytes in every run and every build (xorshift64). */
static void fill(unsigned char *buf, size_t n)
{
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (unsigned char)x;
    }
}

static int parse_sizes(char *arg, size_t *sizes, size_t cap)
{
    size_t n = 0;
    for (char *tok = strtok(arg, ","); tok; tok = strtok(NULL, ",")) {
        unsigned long long kib = strtoull(tok, NULL, 10);
        if (kib == 0 || n == cap)
            return -1;
        sizes[n++] = (size_t)kib << 10;
    }
    return (int)n;
}

int main(int argc, char **argv)
{
    unsigned reps = 3;
    size_t total = (size_t)512 << 20;
    size_t sizes[8] = { (size_t)4 << 10, (size_t)1 << 20, (size_t)64 << 20 };
    int nsizes = 3;
    int o;
    while ((o = getopt(argc, argv, "r:t:s:")) != -1) {
        switch (o) {
        case 'r': reps = (unsigned)strtoul(optarg, NULL, 10); break;
        case 't': total = (size_t)strtoull(optarg, NULL, 10) << 20; break;
        case 's': nsizes = parse_sizes(optarg, sizes, 8); break;
        default:
            fprintf(stderr, "usage: crc_speed [-r REPS] [-t TOTAL_MiB] "
                    "[-s SIZE_KiB[,SIZE_KiB...]]\n");
            return 2;
        }
    }
    if (reps == 0 || total == 0 || nsizes <= 0) {
        fprintf(stderr, "crc_speed: need -r >= 1, -t >= 1 and 1 to 8 sizes of >= 1 KiB\n");
        return 2;
    }
    for (int s = 0; s < nsizes; s++) {
        size_t size = sizes[s];
        size_t calls = total > size ? total / size : 1;
        unsigned char *buf = malloc(size);
        if (!buf) {
            perror("malloc");
            return 1;
        }
        fill(buf, size);
        for (unsigned r = 0; r < reps; r++) {
            for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
                uint64_t crc = fns[f].run(0, buf, size);   /* warm: pages, tables */
                crc = 0;
                double w0 = secs(CLOCK_MONOTONIC), c0 = secs(CLOCK_THREAD_CPUTIME_ID);
                for (size_t i = 0; i < calls; i++)
                    crc = fns[f].run(crc, buf, size);
                double w = secs(CLOCK_MONOTONIC) - w0, c = secs(CLOCK_THREAD_CPUTIME_ID) - c0;
                double bytes = (double)calls * (double)size;
                printf("%zu %s %u %.3f %.3f %llx\n", size, fns[f].name, r, bytes / w / 1e9,
                       bytes / c / 1e9, (unsigned long long)crc);
                fflush(stdout);
            }
        }
        free(buf);
    }
    return 0;
}
