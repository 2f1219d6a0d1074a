/* bench/md5sha_speed.c - MD5 and SHA-256 of one stream in one pass
 * (common/md5sha.h) against OpenSSL's two passes, the way the gateway
 * hashed a signed body before. One thread hashes -m MiB of a warm 16 MiB
 * buffer in -p KiB pieces; the arms alternate (two passes, one pass, ...)
 * -r times; a third arm, OpenSSL's MD5 alone, is the floor the one pass
 * aims at. Prints one line per run:
 *   ARM REP CPU_s_per_GiB
 * and, first, whether the digests of the arms agree.
 * Usage: md5sha_speed [-m MiB] [-p KiB] [-r REPS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "md5sha.h"

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

enum arm { TWO_PASSES, ONE_PASS, MD5_ALONE };
static const char *const ARM_NAME[] = { "openssl-md5+sha256", "one-pass", "openssl-md5-alone" };

static void run(enum arm a, const uint8_t *buf, size_t buflen, size_t total, size_t piece,
                uint8_t md5[16], uint8_t sha[32])
{
    if (a == ONE_PASS) {
        struct sg_md5sha h;
        sg_md5sha_init(&h);
        for (size_t at = 0; at < total; at += piece)
            sg_md5sha_update(&h, buf + at % buflen, piece);
        sg_md5sha_final(&h, md5, sha);
        return;
    }
    EVP_MD_CTX *m = EVP_MD_CTX_new(), *s = EVP_MD_CTX_new();
    EVP_DigestInit_ex(m, EVP_md5(), NULL);
    EVP_DigestInit_ex(s, EVP_sha256(), NULL);
    for (size_t at = 0; at < total; at += piece) {
        EVP_DigestUpdate(m, buf + at % buflen, piece);
        if (a == TWO_PASSES)
            EVP_DigestUpdate(s, buf + at % buflen, piece);
    }
    EVP_DigestFinal_ex(m, md5, NULL);
    EVP_DigestFinal_ex(s, sha, NULL);
    EVP_MD_CTX_free(m);
    EVP_MD_CTX_free(s);
}

int main(int argc, char **argv)
{
    size_t mib = 1024, piece = 256 << 10, buflen = 16u << 20;
    int reps = 3, c;
    while ((c = getopt(argc, argv, "m:p:r:")) != -1) {
        if (c == 'm')
            mib = strtoul(optarg, NULL, 10);
        else if (c == 'p')
            piece = strtoul(optarg, NULL, 10) << 10;
        else if (c == 'r')
            reps = atoi(optarg);
        else {
            fprintf(stderr, "usage: md5sha_speed [-m MiB] [-p KiB] [-r REPS]\n");
            return 2;
        }
    }
    sg_md5sha_set(true);   /* a clang build has it off by default */
    if (!sg_md5sha_available()) {
        fprintf(stderr, "md5sha_speed: this CPU has no SHA extensions\n");
        return 1;
    }
    if (piece == 0 || buflen % piece) {
        fprintf(stderr, "md5sha_speed: -p must divide 16384\n");
        return 2;
    }
    uint8_t *buf = malloc(buflen);
    if (!buf)
        return 1;
    unsigned seed = 1;
    for (size_t i = 0; i < buflen; i++)
        buf[i] = (uint8_t)rand_r(&seed);
    size_t total = mib << 20;
    double gib = (double)total / (1 << 30);

    uint8_t m1[16], s1[32], m2[16], s2[32];
    run(TWO_PASSES, buf, buflen, buflen, piece, m1, s1);
    run(ONE_PASS, buf, buflen, buflen, piece, m2, s2);
    printf("# digests agree: %s\n", memcmp(m1, m2, 16) || memcmp(s1, s2, 32) ? "NO" : "yes");
    for (int r = 0; r < reps; r++) {
        for (enum arm a = TWO_PASSES; a <= MD5_ALONE; a++) {
            double t0 = cpu_now();
            run(a, buf, buflen, total, piece, m1, s1);
            printf("%s %d %.3f\n", ARM_NAME[a], r + 1, (cpu_now() - t0) / gib);
            fflush(stdout);
        }
    }
    free(buf);
    return 0;
}
