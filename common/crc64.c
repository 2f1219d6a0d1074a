/* common/crc64.c - CRC-64/NVME (polynomial 0xAD93D23594C93659, reflected,
 * init and xorout ~0: S3's x-amz-checksum-crc64nvme). ISA-L 2.30 (Debian 12)
 * has no such function, so it is ours: PCLMULQDQ folding where the CPU has
 * it (8 streams of 16 bytes, then one), slicing-by-8 tables otherwise and
 * for the last bytes. tests/unit/test_common_crc.c proves the two equal. */
#include "common_int.h"
#include "crc.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define SG_CRC64_CLMUL 1
#include <immintrin.h>
#endif

#define POLY_NORMAL 0xAD93D23594C93659ull   /* x^64 implied */
#define POLY_REFLECTED 0x9A6C9329AC4BC9B5ull

static uint64_t tab[8][256];
static bool have_clmul;
/* Folding constants: [0] multiplies the low (earlier) 64 bits of a 128-bit
 * lane, [1] the high ones; see sg_crc64nvme_clmul. */
static uint64_t k_fold1024[2], k_fold128[2];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* x^e mod P, normal form (bit i is the coefficient of x^i). */
static uint64_t xpow_mod(unsigned e)
{
    uint64_t r = 1;
    while (e--) {
        uint64_t carry = r >> 63;
        r <<= 1;
        if (carry)
            r ^= POLY_NORMAL;
    }
    return r;
}

static uint64_t reflect64(uint64_t v)
{
    uint64_t r = 0;
    for (int i = 0; i < 64; i++, v >>= 1)
        r = (r << 1) | (v & 1);
    return r;
}

static void init(void)
{
    for (uint64_t i = 0; i < 256; i++) {
        uint64_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ POLY_REFLECTED : c >> 1;
        tab[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            tab[t][i] = (tab[t - 1][i] >> 8) ^ tab[0][tab[t - 1][i] & 0xff];
    /* Folding a 128-bit lane forward by D bits: its earlier half times
     * x^(D+64) and its later half times x^D, both mod P. A carry-less
     * product of two reflected 64-bit values comes out multiplied by x
     * (127 bits in a 128-bit register), hence one power less each. */
    k_fold1024[0] = reflect64(xpow_mod(1024 + 63));
    k_fold1024[1] = reflect64(xpow_mod(1024 - 1));
    k_fold128[0] = reflect64(xpow_mod(128 + 63));
    k_fold128[1] = reflect64(xpow_mod(128 - 1));
#ifdef SG_CRC64_CLMUL
    __builtin_cpu_init();
    have_clmul = __builtin_cpu_supports("pclmul") != 0;
#endif
}

static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

uint64_t sg_crc64nvme_table(uint64_t crc, const void *buf, size_t n)
{
    pthread_once(&once, init);
    const uint8_t *p = buf;
    while (n >= 8) {
        uint64_t v = load_le64(p) ^ crc;
        crc = tab[7][v & 0xff] ^ tab[6][(v >> 8) & 0xff] ^ tab[5][(v >> 16) & 0xff] ^
              tab[4][(v >> 24) & 0xff] ^ tab[3][(v >> 32) & 0xff] ^ tab[2][(v >> 40) & 0xff] ^
              tab[1][(v >> 48) & 0xff] ^ tab[0][v >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ tab[0][(crc ^ *p++) & 0xff];
    return crc;
}

bool sg_crc64nvme_have_clmul(void)
{
    pthread_once(&once, init);
    return have_clmul;
}

#ifdef SG_CRC64_CLMUL
static inline __m128i load16(const uint8_t *p)
{
    return _mm_loadu_si128((const __m128i *)(const void *)p);
}

/* One lane x folded forward by the distance k was made for. */
__attribute__((target("pclmul"))) static inline __m128i fold(__m128i x, __m128i k)
{
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

/* 16 bytes loaded little-endian are the message polynomial of those bytes
 * in the reflected order (byte 0's low bit is the highest power), so a lane
 * is folded and XORed like a polynomial. The register enters XORed into the
 * first 8 bytes; what is left of the lanes at the end is a 16-byte message
 * with the same CRC as everything folded into it, finished by the tables
 * from a zero register, and the tail after it too. */
__attribute__((target("pclmul"))) uint64_t sg_crc64nvme_clmul(uint64_t crc, const void *buf,
                                                              size_t n)
{
    pthread_once(&once, init);
    const uint8_t *p = buf;
    if (n < 128)
        return sg_crc64nvme_table(crc, p, n);
    const __m128i k1024 = _mm_set_epi64x((long long)k_fold1024[1], (long long)k_fold1024[0]);
    const __m128i k128 = _mm_set_epi64x((long long)k_fold128[1], (long long)k_fold128[0]);
    /* eight lanes in named registers: an array would live in memory */
    __m128i x0 = load16(p), x1 = load16(p + 16), x2 = load16(p + 32), x3 = load16(p + 48);
    __m128i x4 = load16(p + 64), x5 = load16(p + 80), x6 = load16(p + 96), x7 = load16(p + 112);
    x0 = _mm_xor_si128(x0, _mm_cvtsi64_si128((long long)crc));
    p += 128;
    n -= 128;
    while (n >= 128) {
        x0 = _mm_xor_si128(fold(x0, k1024), load16(p));
        x1 = _mm_xor_si128(fold(x1, k1024), load16(p + 16));
        x2 = _mm_xor_si128(fold(x2, k1024), load16(p + 32));
        x3 = _mm_xor_si128(fold(x3, k1024), load16(p + 48));
        x4 = _mm_xor_si128(fold(x4, k1024), load16(p + 64));
        x5 = _mm_xor_si128(fold(x5, k1024), load16(p + 80));
        x6 = _mm_xor_si128(fold(x6, k1024), load16(p + 96));
        x7 = _mm_xor_si128(fold(x7, k1024), load16(p + 112));
        p += 128;
        n -= 128;
    }
    __m128i acc = x0;
    acc = _mm_xor_si128(fold(acc, k128), x1);
    acc = _mm_xor_si128(fold(acc, k128), x2);
    acc = _mm_xor_si128(fold(acc, k128), x3);
    acc = _mm_xor_si128(fold(acc, k128), x4);
    acc = _mm_xor_si128(fold(acc, k128), x5);
    acc = _mm_xor_si128(fold(acc, k128), x6);
    acc = _mm_xor_si128(fold(acc, k128), x7);
    while (n >= 16) {
        acc = _mm_xor_si128(fold(acc, k128), load16(p));
        p += 16;
        n -= 16;
    }
    uint8_t last[16];
    _mm_storeu_si128((__m128i *)(void *)last, acc);
    return sg_crc64nvme_table(sg_crc64nvme_table(0, last, 16), p, n);
}
#else
uint64_t sg_crc64nvme_clmul(uint64_t crc, const void *buf, size_t n)
{
    return sg_crc64nvme_table(crc, buf, n);
}
#endif

uint64_t sg_crc64nvme(uint64_t crc, const void *buf, size_t n)
{
    pthread_once(&once, init);
    if (have_clmul)
        return ~sg_crc64nvme_clmul(~crc, buf, n);
    return ~sg_crc64nvme_table(~crc, buf, n);
}
