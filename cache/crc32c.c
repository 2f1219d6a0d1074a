/* cache/crc32c.c - CRC32C (Castagnoli) for the index's journal and snapshot.
 * Our own copy: modules do not depend on each other (auth/ has one too).
 * SSE4.2 crc32 instruction where the CPU has it, slicing-by-8 tables otherwise. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cidx_int.h"

#define POLY 0x82f63b78u /* reflected Castagnoli */

static uint32_t tab[8][256];
static pthread_once_t tab_once = PTHREAD_ONCE_INIT;
static int have_hw;

static void tab_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            tab[t][i] = (tab[t - 1][i] >> 8) ^ tab[0][tab[t - 1][i] & 0xff];
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    have_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_sw(uint32_t c, const unsigned char *p, size_t n)
{
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
        w = __builtin_bswap64(w);
#endif
        w ^= c;
        c = tab[7][w & 0xff] ^ tab[6][(w >> 8) & 0xff] ^ tab[5][(w >> 16) & 0xff] ^
            tab[4][(w >> 24) & 0xff] ^ tab[3][(w >> 32) & 0xff] ^ tab[2][(w >> 40) & 0xff] ^
            tab[1][(w >> 48) & 0xff] ^ tab[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ tab[0][(c ^ *p++) & 0xff];
    return c;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const unsigned char *p,
                                                         size_t n)
{
    uint64_t c64 = c;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c64 = __builtin_ia32_crc32di(c64, w);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n--)
        c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}
#endif

uint32_t cidx_crc32c(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&tab_once, tab_init);
    uint32_t c = ~crc;
#if defined(__x86_64__) && defined(__GNUC__)
    if (have_hw)
        return ~crc_hw(c, buf, len);
#endif
    return ~crc_sw(c, buf, len);
}
