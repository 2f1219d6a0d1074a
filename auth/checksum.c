/* auth/checksum.c - payload checksums as S3 names them (x-amz-checksum-*:
 * the CRCs of common/crc.h, SHA1/SHA256 through OpenSSL) and the SHA-256 /
 * HMAC wrappers SigV4 needs. */
#include "auth_int.h"

#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

/* ---- checksum objects ---- */

static const struct {
    enum auth_ck_algo algo;
    const char *name;       /* as in x-amz-sdk-checksum-algorithm, lower case */
    const char *header;
    size_t len;
} ck_algos[] = {
    { AUTH_CK_CRC32, "crc32", "x-amz-checksum-crc32", 4 },
    { AUTH_CK_CRC32C, "crc32c", "x-amz-checksum-crc32c", 4 },
    { AUTH_CK_CRC64NVME, "crc64nvme", "x-amz-checksum-crc64nvme", 8 },
    { AUTH_CK_SHA1, "sha1", "x-amz-checksum-sha1", 20 },
    { AUTH_CK_SHA256, "sha256", "x-amz-checksum-sha256", 32 },
};
#define N_CK_ALGOS (sizeof ck_algos / sizeof ck_algos[0])

enum auth_ck_algo auth_ck_from_name(const char *name)
{
    if (strncasecmp(name, "x-amz-checksum-", 15) == 0)
        name += 15;
    for (size_t i = 0; i < N_CK_ALGOS; i++)
        if (strcasecmp(name, ck_algos[i].name) == 0)
            return ck_algos[i].algo;
    return AUTH_CK_NONE;
}

const char *auth_ck_header(enum auth_ck_algo a)
{
    for (size_t i = 0; i < N_CK_ALGOS; i++)
        if (ck_algos[i].algo == a)
            return ck_algos[i].header;
    return "";
}

size_t auth_ck_len(enum auth_ck_algo a)
{
    for (size_t i = 0; i < N_CK_ALGOS; i++)
        if (ck_algos[i].algo == a)
            return ck_algos[i].len;
    return 0;
}

int auth_ck_init(struct auth_ck *c, enum auth_ck_algo a)
{
    memset(c, 0, sizeof *c);
    c->algo = a;
    if (a == AUTH_CK_SHA1 || a == AUTH_CK_SHA256) {
        c->md = EVP_MD_CTX_new();
        if (!c->md || EVP_DigestInit_ex(c->md, a == AUTH_CK_SHA1 ? EVP_sha1() : EVP_sha256(),
                                        NULL) != 1) {
            EVP_MD_CTX_free(c->md);
            c->md = NULL;
            return -1;
        }
    }
    return 0;
}

void auth_ck_update(struct auth_ck *c, const void *buf, size_t n)
{
    switch (c->algo) {
    case AUTH_CK_NONE:
        break;
    case AUTH_CK_CRC32:
        c->crc32 = sg_crc32(c->crc32, buf, n);
        break;
    case AUTH_CK_CRC32C:
        c->crc32 = sg_crc32c(c->crc32, buf, n);
        break;
    case AUTH_CK_CRC64NVME:
        c->crc64 = sg_crc64nvme(c->crc64, buf, n);
        break;
    case AUTH_CK_SHA1:
    case AUTH_CK_SHA256:
        EVP_DigestUpdate(c->md, buf, n);
        break;
    }
}

size_t auth_ck_final(struct auth_ck *c, uint8_t out[32])
{
    unsigned int mdlen = 0;
    switch (c->algo) {
    case AUTH_CK_NONE:
        return 0;
    case AUTH_CK_CRC32:
    case AUTH_CK_CRC32C:
        for (int i = 0; i < 4; i++)
            out[i] = (uint8_t)(c->crc32 >> (24 - 8 * i));
        return 4;
    case AUTH_CK_CRC64NVME:
        for (int i = 0; i < 8; i++)
            out[i] = (uint8_t)(c->crc64 >> (56 - 8 * i));
        return 8;
    case AUTH_CK_SHA1:
    case AUTH_CK_SHA256:
        if (EVP_DigestFinal_ex(c->md, out, &mdlen) != 1)
            return 0;
        return mdlen;
    }
    return 0;
}

void auth_ck_free(struct auth_ck *c)
{
    EVP_MD_CTX_free(c->md);
    c->md = NULL;
}

/* ---- SHA-256 and HMAC ---- */

void auth_sha256_hex(const void *d, size_t n, char out[65])
{
    uint8_t md[32];
    SHA256(d, n, md);
    sg_hex_encode(md, 32, out);
}

int auth_hmac_sha256(const uint8_t *key, size_t klen, const void *d, size_t n,
                     uint8_t out[32])
{
    unsigned int len = 0;
    if (klen > INT32_MAX)
        return -1;
    if (!HMAC(EVP_sha256(), key, (int)klen, d, n, out, &len) || len != 32)
        return -1;
    return 0;
}

int auth_signing_key(const char *secret, const char *date8, const char *region,
                     const char *service, uint8_t out[32])
{
    size_t slen = strlen(secret);
    uint8_t *k0 = OPENSSL_malloc(slen + 4);
    uint8_t k[32], k2[32];
    int rc = -1;
    if (!k0)
        return -1;
    memcpy(k0, "AWS4", 4);
    memcpy(k0 + 4, secret, slen);
    if (auth_hmac_sha256(k0, slen + 4, date8, strlen(date8), k) == 0 &&
        auth_hmac_sha256(k, 32, region, strlen(region), k2) == 0 &&
        auth_hmac_sha256(k2, 32, service, strlen(service), k) == 0 &&
        auth_hmac_sha256(k, 32, "aws4_request", 12, out) == 0)
        rc = 0;
    OPENSSL_clear_free(k0, slen + 4);
    OPENSSL_cleanse(k, sizeof k);
    OPENSSL_cleanse(k2, sizeof k2);
    return rc;
}
