/* auth/composite.c - the checksums S3 reports for a completed multipart
 * upload: COMPOSITE (a checksum of the parts' digests, "-n" suffix) and
 * FULL_OBJECT for the CRCs (the parts' CRCs combined into the whole
 * object's CRC with the zlib GF(2) matrix method, without the data). */
#include "auth_int.h"

#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#define PARTS_MAX 10000u   /* S3's limit on parts per upload */

/* Decodes one part's base64 digest; returns its length or -1. */
static long part_digest(const char *b64, enum sg_ck_algo algo, uint8_t out[32])
{
    if (b64 == NULL)
        return -1;
    size_t n = strlen(b64);
    if (n > 64)
        return -1;
    long got = sg_b64_decode(b64, n, out, 32);
    return got == (long)sg_ck_len(algo) ? got : -1;
}

int auth_checksum_composite(const char *algo, const char *const *part_b64, size_t n,
                            char *out, size_t outlen)
{
    enum sg_ck_algo a = algo ? sg_ck_from_name(algo) : SG_CK_NONE;
    struct sg_ck ck;
    uint8_t d[32];
    char b64[48];
    int rc = -1;

    if (a == SG_CK_NONE || a == SG_CK_CRC64NVME || n == 0 || n > PARTS_MAX || !out)
        return -1;
    if (sg_ck_init(&ck, a) != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        long dl = part_digest(part_b64[i], a, d);
        if (dl < 0)
            goto out;
        sg_ck_update(&ck, d, (size_t)dl);
    }
    size_t len = sg_ck_final(&ck, d);
    if (len == 0)
        goto out;
    sg_b64_encode(d, len, b64);
    int w = snprintf(out, outlen, "%s-%zu", b64, n);
    if (w < 0 || (size_t)w >= outlen)
        goto out;
    rc = 0;
out:
    sg_ck_free(&ck);
    if (rc != 0 && out && outlen)
        out[0] = '\0';
    return rc;
}

/* ---- CRC combination (zlib's crc32_combine, any reflected width <= 64) ---- */

static uint64_t gf2_times(const uint64_t *mat, uint64_t vec)
{
    uint64_t sum = 0;
    for (; vec; vec >>= 1, mat++)
        if (vec & 1)
            sum ^= *mat;
    return sum;
}

static void gf2_square(uint64_t *sq, const uint64_t *mat, int width)
{
    for (int n = 0; n < width; n++)
        sq[n] = gf2_times(mat, mat[n]);
}

/* CRC of A||B from crc(A), crc(B) and |B|, for CRCs whose register starts
 * and ends inverted (the init/xor-out terms cancel, as in zlib). */
static uint64_t crc_combine(uint64_t crc1, uint64_t crc2, uint64_t len2, uint64_t poly,
                            int width)
{
    uint64_t even[64], odd[64];
    if (len2 == 0)
        return crc1;
    odd[0] = poly;                 /* the operator for one zero bit */
    uint64_t row = 1;
    for (int n = 1; n < width; n++) {
        odd[n] = row;
        row <<= 1;
    }
    gf2_square(even, odd, width);  /* two zero bits */
    gf2_square(odd, even, width);  /* four zero bits */
    do {                           /* one zero byte, then doublings */
        gf2_square(even, odd, width);
        if (len2 & 1)
            crc1 = gf2_times(even, crc1);
        len2 >>= 1;
        if (len2 == 0)
            break;
        gf2_square(odd, even, width);
        if (len2 & 1)
            crc1 = gf2_times(odd, crc1);
        len2 >>= 1;
    } while (len2 != 0);
    return crc1 ^ crc2;
}

int auth_checksum_full_object(const char *algo, const char *const *part_b64,
                              const uint64_t *part_len, size_t n, char *out, size_t outlen)
{
    enum sg_ck_algo a = algo ? sg_ck_from_name(algo) : SG_CK_NONE;
    uint64_t poly;
    int width;
    uint8_t d[32];
    char b64[48];

    if (out && outlen)
        out[0] = '\0';
    switch (a) {
    case SG_CK_CRC32: poly = 0xEDB88320u; width = 32; break;
    case SG_CK_CRC32C: poly = 0x82F63B78u; width = 32; break;
    case SG_CK_CRC64NVME: poly = 0x9A6C9329AC4BC9B5ull; width = 64; break;
    case SG_CK_NONE: case SG_CK_SHA1: case SG_CK_SHA256:
    default:
        return -1;
    }
    if (n == 0 || n > PARTS_MAX || !out || !part_len)
        return -1;
    uint64_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        long dl = part_digest(part_b64[i], a, d);
        if (dl < 0)
            return -1;
        uint64_t v = 0;
        for (long k = 0; k < dl; k++)
            v = v << 8 | d[k];
        crc = i == 0 ? v : crc_combine(crc, v, part_len[i], poly, width);
    }
    size_t len = sg_ck_len(a);
    for (size_t k = 0; k < len; k++)
        d[k] = (uint8_t)(crc >> (8 * (len - 1 - k)));
    sg_b64_encode(d, len, b64);
    if (strlen(b64) >= outlen)
        return -1;
    memcpy(out, b64, strlen(b64) + 1);
    return 0;
}
