/* common/md5sha.c - MD5 and SHA-256 of one stream, one block of each at a
 * time, their steps interleaved (md5sha.h).
 *
 * Per 64-byte block both run 64 steps: SHA-256 as 32 sha256rnds2 (two
 * rounds each) with the message schedule four words at a time
 * (sha256msg1/2), MD5 as RFC 1321's 64 scalar steps. Each group of four
 * SHA-256 rounds is written next to four MD5 steps, so the core runs the
 * two chains side by side. */
#include "md5sha.h"

#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>
#include <string.h>

#include "le.h"

static const uint32_t SHA_K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};
static const uint32_t SHA_INIT[8] = {
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

/* MD5 step i: its constant, the message word it adds, its rotation. */
static const uint32_t MD5_T[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
};
static const uint8_t MD5_W[64] = {
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
    1, 6, 11, 0, 5, 10, 15, 4, 9, 14, 3, 8, 13, 2, 7, 12,
    5, 8, 11, 14, 1, 4, 7, 10, 13, 0, 3, 6, 9, 12, 15, 2,
    0, 7, 14, 5, 12, 3, 10, 1, 8, 15, 6, 13, 4, 11, 2, 9,
};
static const uint8_t MD5_S[64] = {
    7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
    5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
    4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
    6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
};
static const uint32_t MD5_INIT[4] = { 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476 };

/* The group loop below must be unrolled whole, so each step's constants
 * are picked at compile time: gcc and clang spell that differently. */
#if defined(__clang__)
#define UNROLL_ALL _Pragma("unroll")
#else
#define UNROLL_ALL _Pragma("GCC unroll 16")
#endif

static inline uint32_t rotl32(uint32_t x, unsigned s)
{
    return (x << s) | (x >> (32 - s));
}

/* One MD5 step; i is a constant once the loop below is unrolled, so the
 * round function, the word and the rotation are picked at compile time. */
#define MD5_STEP(i)                                                   \
    do {                                                              \
        uint32_t f_;                                                  \
        if ((i) < 16)                                                 \
            f_ = d ^ (b & (c ^ d));                                   \
        else if ((i) < 32)                                            \
            f_ = c ^ (d & (b ^ c));                                   \
        else if ((i) < 48)                                            \
            f_ = b ^ c ^ d;                                           \
        else                                                          \
            f_ = c ^ (b | ~d);                                        \
        uint32_t t_ = a + f_ + MD5_T[i] + w[MD5_W[i]];                \
        a = d;                                                        \
        d = c;                                                        \
        c = b;                                                        \
        b = b + rotl32(t_, MD5_S[i]);                                 \
    } while (0)

/* nblocks blocks of p into both states. The SHA-256 state is kept in the
 * order sha256rnds2 wants: (A,B,E,F) and (C,D,G,H). */
__attribute__((target("sha,sse4.1,ssse3")))
static void blocks(uint32_t md5[4], uint32_t sha[8], const uint8_t *p, size_t nblocks)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i abcd = _mm_loadu_si128((const __m128i *)&sha[0]);
    __m128i efgh = _mm_loadu_si128((const __m128i *)&sha[4]);
    abcd = _mm_shuffle_epi32(abcd, 0xB1);                 /* C D A B, word 0 first */
    efgh = _mm_shuffle_epi32(efgh, 0x1B);                 /* H G F E */
    __m128i abef = _mm_alignr_epi8(abcd, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, abcd, 0xF0);
    uint32_t h0 = md5[0], h1 = md5[1], h2 = md5[2], h3 = md5[3];

    for (; nblocks; nblocks--, p += 64) {
        const __m128i abef0 = abef, cdgh0 = cdgh;
        __m128i m[4];
        uint32_t w[16];
        for (int i = 0; i < 16; i++)
            w[i] = sg_get_le32(p + 4 * i);
        uint32_t a = h0, b = h1, c = h2, d = h3;

UNROLL_ALL
        for (int g = 0; g < 16; g++) {
            /* the schedule: words 4g..4g+3 */
            __m128i x;
            if (g < 4) {
                x = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), bswap);
            } else {
                x = _mm_sha256msg1_epu32(m[g & 3], m[(g + 1) & 3]);
                x = _mm_add_epi32(x, _mm_alignr_epi8(m[(g + 3) & 3], m[(g + 2) & 3], 4));
                x = _mm_sha256msg2_epu32(x, m[(g + 3) & 3]);
            }
            m[g & 3] = x;
            __m128i k = _mm_add_epi32(x, _mm_loadu_si128((const __m128i *)&SHA_K[4 * g]));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, k);       /* rounds 4g, 4g+1 */
            MD5_STEP(4 * g);
            MD5_STEP(4 * g + 1);
            k = _mm_shuffle_epi32(k, 0x0E);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, k);       /* rounds 4g+2, 4g+3 */
            MD5_STEP(4 * g + 2);
            MD5_STEP(4 * g + 3);
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
        h0 += a;
        h1 += b;
        h2 += c;
        h3 += d;
    }

    md5[0] = h0;
    md5[1] = h1;
    md5[2] = h2;
    md5[3] = h3;
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&sha[0], _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)&sha[4], _mm_alignr_epi8(dchg, feba, 8));
}

static atomic_int g_on = -1;   /* -1: not decided yet */
static atomic_ullong g_bytes;  /* hashed since start, for /metrics */

/* CPUID itself: clang 14's __builtin_cpu_supports() does not know "sha". */
static bool cpu_has_it(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSSE3) || !(c & bit_SSE4_1))
        return false;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
}

/* On by default where the CPU has it, in a gcc build. clang 14 schedules
 * the MD5 steps apart from the SHA-256 rounds instead of between them, and
 * its one pass costs more than OpenSSL's two (2.63 against 2.47 CPU-s per
 * GiB, bench/results/md5sha.md): off unless sg_md5sha_set() says on. */
static bool on_by_default(void)
{
#if defined(__clang__)
    return false;
#else
    return cpu_has_it();
#endif
}

bool sg_md5sha_available(void)
{
    int v = atomic_load_explicit(&g_on, memory_order_relaxed);
    if (v < 0) {
        v = on_by_default();
        atomic_store(&g_on, v);
    }
    return v;
}

void sg_md5sha_set(bool on)
{
    atomic_store(&g_on, on && cpu_has_it());
}

unsigned long long sg_md5sha_bytes(void)
{
    return atomic_load_explicit(&g_bytes, memory_order_relaxed);
}

void sg_md5sha_init(struct sg_md5sha *h)
{
    memcpy(h->md5, MD5_INIT, sizeof h->md5);
    memcpy(h->sha, SHA_INIT, sizeof h->sha);
    h->length = 0;
    h->n_tail = 0;
}

void sg_md5sha_update(struct sg_md5sha *h, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    h->length += n;
    atomic_fetch_add_explicit(&g_bytes, n, memory_order_relaxed);
    if (h->n_tail) {
        size_t c = 64 - h->n_tail;
        if (c > n)
            c = n;
        memcpy(h->tail + h->n_tail, p, c);
        h->n_tail += (unsigned)c;
        p += c;
        n -= c;
        if (h->n_tail < 64)
            return;
        blocks(h->md5, h->sha, h->tail, 1);
        h->n_tail = 0;
    }
    blocks(h->md5, h->sha, p, n / 64);
    p += n / 64 * 64;
    n %= 64;
    memcpy(h->tail, p, n);
    h->n_tail = (unsigned)n;
}

/* The two pads differ only in the length's byte order (MD5 little-endian,
 * SHA-256 big-endian), so the last one or two blocks are run twice, each
 * time for one of the states; the other state is a scratch copy. */
void sg_md5sha_final(struct sg_md5sha *h, uint8_t md5[16], uint8_t sha256[32])
{
    uint8_t last[128] = { 0 };
    size_t n = h->n_tail < 56 ? 64 : 128;
    uint64_t bits = h->length * 8;
    uint32_t scratch_md5[4], scratch_sha[8];

    memcpy(last, h->tail, h->n_tail);
    last[h->n_tail] = 0x80;
    sg_put_le64(last + n - 8, bits);
    memcpy(scratch_sha, h->sha, sizeof scratch_sha);
    blocks(h->md5, scratch_sha, last, n / 64);
    for (int i = 0; i < 8; i++)
        last[n - 1 - i] = (uint8_t)(bits >> (8 * i));
    memcpy(scratch_md5, h->md5, sizeof scratch_md5);
    blocks(scratch_md5, h->sha, last, n / 64);

    for (int i = 0; i < 4; i++)
        sg_put_le32(md5 + 4 * i, h->md5[i]);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++)
            sha256[4 * i + j] = (uint8_t)(h->sha[i] >> (24 - 8 * j));
}
