/* auth/checksum.c - the SHA-256 / HMAC wrappers SigV4 needs (the payload
 * checksums of x-amz-checksum-* are common/checksum.c's). */
#include "auth_int.h"

#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

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
