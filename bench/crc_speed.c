/* bench/crc_speed.c - how fast the payload CRCs run, the way an upload uses
 * them: one CRC carried across a body fed in pieces (default 1 GiB in 8 MiB
 * pieces, from one warm 8 MiB buffer: an upload's bytes were just copied
 * there). Prints one line per function and repetition:
 *   NAME REP WALL_GBps CPU_GBps CRC
 * (GB = 1e9 bytes; CPU = this thread's CPU time, which a loaded machine
 * disturbs less than the wall clock). bench/crc_speed.py runs it before and
 * after a change, alternately, and takes the medians.
 * Built against common/crc.h; with -DCRC_SPEED_BASE against the functions
 * as they were before issue 11 (auth/checksum.c, cache/crc32c.c).
 * Usage: crc_speed [-r REPS] [-t TOTAL_MiB] [-p PIECE_MiB] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef CRC_SPEED_HAVE_ZLIB
#include <zlib.h>
#endif

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
#ifdef CRC_SPEED_HAVE_ZLIB
static uint64_t run_zlib(uint64_t c, const void *b, size_t n)
{
    return crc32((uLong)c, b, (uInt)n);   /* pieces stay far below 4 GiB */
}
#endif

static const struct fn fns[] = {
    { "crc32", run_crc32 },
    { "crc32c", run_crc32c },
    { "crc64nvme", run_crc64nvme },
#ifdef CRC_SPEED_BASE
    { "crc32c-cache-index", run_crc32c_index },
#else
    { "crc64nvme-table", run_crc64nvme_table },
#endif
#ifdef CRC_SPEED_HAVE_ZLIB
    { "zlib-crc32", run_zlib },
#endif
};

static double secs(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    unsigned reps = 5;
    size_t total = (size_t)1 << 30, piece = (size_t)8 << 20;
    int o;
    while ((o = getopt(argc, argv, "r:t:p:")) != -1) {
        switch (o) {
        case 'r': reps = (unsigned)strtoul(optarg, NULL, 10); break;
        case 't': total = (size_t)strtoull(optarg, NULL, 10) << 20; break;
        case 'p': piece = (size_t)strtoull(optarg, NULL, 10) << 20; break;
        default:
            fprintf(stderr, "usage: crc_speed [-r REPS] [-t TOTAL_MiB] [-p PIECE_MiB]\n");
            return 2;
        }
    }
    if (reps == 0 || piece == 0 || total < piece) {
        fprintf(stderr, "crc_speed: need -r >= 1 and -t >= -p >= 1\n");
        return 2;
    }
    unsigned char *buf = malloc(piece);
    if (!buf) {
        perror("malloc");
        return 1;
    }
    uint64_t x = 0x9E3779B97F4A7C15ull;   /* xorshift: the same bytes every run */
    for (size_t i = 0; i < piece; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (unsigned char)x;
    }
    for (unsigned r = 0; r < reps; r++) {
        for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
            uint64_t crc = 0;
            double w0 = secs(CLOCK_MONOTONIC), c0 = secs(CLOCK_THREAD_CPUTIME_ID);
            for (size_t done = 0; done < total; done += piece)
                crc = fns[f].run(crc, buf, piece);
            double w = secs(CLOCK_MONOTONIC) - w0, c = secs(CLOCK_THREAD_CPUTIME_ID) - c0;
            printf("%s %u %.3f %.3f %llx\n", fns[f].name, r, (double)total / w / 1e9,
                   (double)total / c / 1e9, (unsigned long long)crc);
            fflush(stdout);
        }
    }
    free(buf);
    return 0;
}
