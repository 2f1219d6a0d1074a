/* common/checksum.c - the payload checksums S3 names x-amz-checksum-*: the
 * CRCs of crc.h, SHA1/SHA256 through OpenSSL. Used where bytes are verified
 * on the way in (auth/body.c) and where a store copies bytes it must
 * checksum itself (a part made by UploadPartCopy, backend/). */
#include "checksum.h"
#include "crc.h"

#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

static const struct {
    enum sg_ck_algo algo;
    const char *name;       /* as in x-amz-sdk-checksum-algorithm, lower case */
    const char *header;
    size_t len;
} ck_algos[] = {
    { SG_CK_CRC32, "crc32", "x-amz-checksum-crc32", 4 },
    { SG_CK_CRC32C, "crc32c", "x-amz-checksum-crc32c", 4 },
    { SG_CK_CRC64NVME, "crc64nvme", "x-amz-checksum-crc64nvme", 8 },
    { SG_CK_SHA1, "sha1", "x-amz-checksum-sha1", 20 },
    { SG_CK_SHA256, "sha256", "x-amz-checksum-sha256", 32 },
};
#define N_CK_ALGOS (sizeof ck_algos / sizeof ck_algos[0])

enum sg_ck_algo sg_ck_from_name(const char *name)
{
    if (strncasecmp(name, "x-amz-checksum-", 15) == 0)
        name += 15;
    for (size_t i = 0; i < N_CK_ALGOS; i++)
        if (strcasecmp(name, ck_algos[i].name) == 0)
            return ck_algos[i].algo;
    return SG_CK_NONE;
}

const char *sg_ck_header(enum sg_ck_algo a)
{
    for (size_t i = 0; i < N_CK_ALGOS; i++)
        if (ck_algos[i].algo == a)
            return ck_algos[i].header;
    return "";
}

size_t sg_ck_len(enum sg_ck_algo a)
{
    for (size_t i = 0; i < N_CK_ALGOS; i++)
        if (ck_algos[i].algo == a)
            return ck_algos[i].len;
    return 0;
}

int sg_ck_init(struct sg_ck *c, enum sg_ck_algo a)
{
    memset(c, 0, sizeof *c);
    c->algo = a;
    if (a == SG_CK_SHA1 || a == SG_CK_SHA256) {
        c->md = EVP_MD_CTX_new();
        if (!c->md || EVP_DigestInit_ex(c->md, a == SG_CK_SHA1 ? EVP_sha1() : EVP_sha256(),
                                        NULL) != 1) {
            EVP_MD_CTX_free(c->md);
            c->md = NULL;
            return -1;
        }
    }
    return 0;
}

void sg_ck_update(struct sg_ck *c, const void *buf, size_t n)
{
    switch (c->algo) {
    case SG_CK_NONE:
        break;
    case SG_CK_CRC32:
        c->crc32 = sg_crc32(c->crc32, buf, n);
        break;
    case SG_CK_CRC32C:
        c->crc32 = sg_crc32c(c->crc32, buf, n);
        break;
    case SG_CK_CRC64NVME:
        c->crc64 = sg_crc64nvme(c->crc64, buf, n);
        break;
    case SG_CK_SHA1:
    case SG_CK_SHA256:
        EVP_DigestUpdate(c->md, buf, n);
        break;
    }
}

size_t sg_ck_final(struct sg_ck *c, uint8_t out[32])
{
    unsigned int mdlen = 0;
    switch (c->algo) {
    case SG_CK_NONE:
        return 0;
    case SG_CK_CRC32:
    case SG_CK_CRC32C:
        for (int i = 0; i < 4; i++)
            out[i] = (uint8_t)(c->crc32 >> (24 - 8 * i));
        return 4;
    case SG_CK_CRC64NVME:
        for (int i = 0; i < 8; i++)
            out[i] = (uint8_t)(c->crc64 >> (56 - 8 * i));
        return 8;
    case SG_CK_SHA1:
    case SG_CK_SHA256:
        if (EVP_DigestFinal_ex(c->md, out, &mdlen) != 1)
            return 0;
        return mdlen;
    }
    return 0;
}

void sg_ck_free(struct sg_ck *c)
{
    EVP_MD_CTX_free(c->md);
    c->md = NULL;
}
