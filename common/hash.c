/* common/hash.c - FNV-1a (see hash.h). */
#include "hash.h"

#define FNV1A_PRIME 0x100000001b3ULL

uint64_t sg_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * FNV1A_PRIME;
    return h;
}

uint64_t sg_fnv1a_pair(const char *a, size_t al, const char *b, size_t bl)
{
    uint64_t h = sg_fnv1a(SG_FNV1A_SEED, a, al);
    h = (h ^ 0xffu) * FNV1A_PRIME;
    return sg_fnv1a(h, b, bl);
}
