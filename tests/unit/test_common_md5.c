/* tests/unit/test_common_md5.c - MD5 with concurrent streams in AVX2 lanes
 * (common/md5.h): RFC 1321's test suite; the lane kernel against OpenSSL on
 * eight different streams; any split of any length equal to OpenSSL's
 * one-shot MD5, with the lanes on and off; and twelve threads hashing at
 * once - the engine's whole point - each stream equal to OpenSSL's, with
 * the engine's counters showing the lanes were used. */
#include <CUnit/CUnit.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "cu.h"
#include "common_int.h"
#include "md5.h"

static void openssl_md5(const void *p, size_t n, uint8_t out[16])
{
    unsigned int len = 0;
    EVP_Digest(p, n, out, &len, EVP_md5(), NULL);
}

static void hex(const uint8_t md[16], char out[33])
{
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static void rfc1321_test_suite(void)
{
    static const struct { const char *in, *md5; } v[] = {
        { "", "d41d8cd98f00b204e9800998ecf8427e" },
        { "a", "0cc175b9c0f1b6a831c399e269772661" },
        { "abc", "900150983cd24fb0d6963f7d28e17f72" },
        { "message digest", "f96b697d7cb7938d525a2f31aaf161d0" },
        { "abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b" },
        { "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
          "d174ab98d277d9f5a5611c2c9f419d9f" },
        { "1234567890123456789012345678901234567890"
          "1234567890123456789012345678901234567890",
          "57edf4a22be3c955ac49da2e2107b67a" },
    };
    for (size_t i = 0; i < CU_N(v); i++) {
        struct sg_md5 m;
        uint8_t md[16];
        char h[33];
        sg_md5_init(&m);
        sg_md5_update(&m, v[i].in, strlen(v[i].in));
        sg_md5_final(&m, md);
        hex(md, h);
        CU_ASSERT_STRING_EQUAL(h, v[i].md5);
    }
}

static void fill_random(uint8_t *p, size_t n, unsigned *seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rand_r(seed);
}

/* Eight streams of different bytes (and states carried across calls),
 * through the kernel in three calls, against OpenSSL per stream. */
static void lane_kernel_equals_openssl_on_eight_streams(void)
{
    if (!sg_md5_lanes_available()) {
        CU_FAIL("this CPU has no AVX2: the lane kernel cannot run here");
        return;
    }
    enum { BLOCKS = 37 };
    static uint8_t data[8][BLOCKS * 64];
    unsigned seed = 1;
    fill_random(&data[0][0], sizeof data, &seed);
    struct sg_md5 m[8];
    uint32_t *h[8];
    for (int i = 0; i < 8; i++) {
        sg_md5_init(&m[i]);
        h[i] = m[i].h;
    }
    size_t cuts[] = { 0, 1, 20, BLOCKS };
    for (int c = 0; c < 3; c++) {
        const uint8_t *p[8];
        for (int i = 0; i < 8; i++)
            p[i] = data[i] + cuts[c] * 64;
        sg_md5_lanes8(h, p, cuts[c + 1] - cuts[c]);
    }
    for (int i = 0; i < 8; i++) {
        uint8_t got[16], want[16];
        m[i].length = sizeof data[i];
        sg_md5_final(&m[i], got);
        openssl_md5(data[i], sizeof data[i], want);
        CU_ASSERT_EQUAL(memcmp(got, want, 16), 0);
    }
}

/* One stream, cut at random points, equal to one-shot OpenSSL, with the
 * lanes on and off. */
static void any_split_of_any_length_equals_openssl(void)
{
    enum { MAX = 70000 };
    uint8_t *buf = malloc(MAX);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    unsigned seed = 7;
    fill_random(buf, MAX, &seed);
    for (int lanes = 0; lanes < 2; lanes++) {
        sg_md5_set_lanes(lanes);
        unsigned bad = 0;
        for (int round = 0; round < 400; round++) {
            size_t n = round < 200 ? (size_t)round : (size_t)rand_r(&seed) % MAX;
            size_t off = (size_t)rand_r(&seed) % 8;
            if (n + off > MAX)
                n = MAX - off;
            struct sg_md5 m;
            sg_md5_init(&m);
            for (size_t at = 0; at < n;) {
                size_t c = (size_t)rand_r(&seed) % (rand_r(&seed) % 2 ? 100 : 20000) + 1;
                if (c > n - at)
                    c = n - at;
                sg_md5_update(&m, buf + off + at, c);
                at += c;
            }
            uint8_t got[16], want[16];
            sg_md5_final(&m, got);
            openssl_md5(buf + off, n, want);
            bad += memcmp(got, want, 16) != 0;
        }
        CU_ASSERT_EQUAL(bad, 0);
    }
    sg_md5_set_lanes(true);
    free(buf);
}

enum { THREADS = 12, STREAM = 3 * 1024 * 1024 + 333 };

struct stream_arg {
    const uint8_t *data;
    size_t len;
    unsigned seed;
    uint8_t md[16];
    bool share;
    pthread_barrier_t *start;
};

static void *hash_stream(void *arg)
{
    struct stream_arg *a = arg;
    struct sg_md5 m;
    sg_md5_init(&m);
    sg_md5_share_lanes(a->share);
    pthread_barrier_wait(a->start);
    for (size_t at = 0; at < a->len;) {
        size_t c = (size_t)rand_r(&a->seed) % (128 * 1024) + 1;
        if (c > a->len - at)
            c = a->len - at;
        sg_md5_update(&m, a->data + at, c);
        at += c;
    }
    sg_md5_final(&m, a->md);
    return NULL;
}

/* n threads hash streams of different lengths from `data` at once, in
 * pieces of random sizes; each result is checked against OpenSSL's. */
static void hash_at_once(const uint8_t *data, int n, bool share, unsigned seed)
{
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)n);
    pthread_t t[THREADS];
    struct stream_arg a[THREADS];
    for (int i = 0; i < n; i++) {
        a[i] = (struct stream_arg){
            .data = data + i * 17, .len = STREAM - (size_t)i * 100003 - (size_t)i * 17,
            .seed = seed + (unsigned)i, .share = share, .start = &start,
        };
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, hash_stream, &a[i]), 0);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        uint8_t want[16];
        openssl_md5(a[i].data, a[i].len, want);
        CU_ASSERT_EQUAL(memcmp(a[i].md, want, 16), 0);
    }
    pthread_barrier_destroy(&start);
}

static uint64_t wide_steps(const struct sg_md5_stats *s)
{
    uint64_t wide = 0;
    for (int n = 2; n <= 8; n++)
        wide += s->steps_by_lanes[n];
    return wide;
}

/* STREAM random bytes (caller frees), with the lanes on. */
static uint8_t *random_streams(unsigned seed)
{
    uint8_t *data = malloc(STREAM);
    if (data)
        fill_random(data, STREAM, &seed);
    sg_md5_set_lanes(true);
    return data;
}

/* Twelve threads at once, streams of different lengths (lanes come and go
 * as streams end), pieces of random sizes: each equal to OpenSSL's, and the
 * lanes were used (more than one busy at a time). */
static void twelve_threads_at_once_each_equal_to_openssl(void)
{
    uint8_t *data = random_streams(3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    struct sg_md5_stats before, after;
    sg_md5_stats(&before);
    for (int round = 0; round < 3; round++)
        hash_at_once(data, THREADS, true, (unsigned)(round * THREADS));
    sg_md5_stats(&after);
    if (sg_md5_lanes_available()) {
        CU_ASSERT(after.blocks_in_lanes > before.blocks_in_lanes);
        CU_ASSERT(wide_steps(&after) > wide_steps(&before));
    } else {
        CU_FAIL("this CPU has no AVX2: only the one-stream path ran");
    }
    free(data);
}

/* Below JOIN_AT threads at once, and for threads that do not share (the
 * hit-serving threads), nothing goes to the lanes: each stream is hashed
 * on its own thread, side by side. */
static void few_streams_and_threads_that_do_not_share_hash_alone(void)
{
    uint8_t *data = random_streams(5);
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    struct sg_md5_stats before, after;
    sg_md5_stats(&before);
    hash_at_once(data, 3, true, 100);
    hash_at_once(data, THREADS, false, 200);
    sg_md5_stats(&after);
    CU_ASSERT_EQUAL(wide_steps(&after), wide_steps(&before));
    CU_ASSERT_EQUAL(after.blocks_in_lanes, before.blocks_in_lanes);
    CU_ASSERT(after.blocks_alone > before.blocks_alone);
    free(data);
}

int register_tests(void)
{
    static const struct cu_test tests[] = {
        { "rfc1321_test_suite", rfc1321_test_suite },
        { "lane_kernel_equals_openssl_on_eight_streams", lane_kernel_equals_openssl_on_eight_streams },
        { "any_split_of_any_length_equals_openssl", any_split_of_any_length_equals_openssl },
        { "twelve_threads_at_once_each_equal_to_openssl", twelve_threads_at_once_each_equal_to_openssl },
        { "few_streams_and_threads_that_do_not_share_hash_alone",
          few_streams_and_threads_that_do_not_share_hash_alone },
    };
    return cu_add_suite("common_md5", NULL, NULL, tests, CU_N(tests));
}
