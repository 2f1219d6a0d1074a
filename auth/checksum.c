/* auth/checksum.c - payload checksums (CRC32, CRC32C, CRC64NVME by table,
 * SHA1/SHA256 through OpenSSL), hex and base64, and the SHA-256 / HMAC
 * wrappers SigV4 needs. A multi-GiB upload runs through the CRCs, so they
 * use slicing-by-8 tables and, for CRC32C on x86-64, the SSE4.2 instruction. */
#include "auth_int.h"

#include <pthread.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

/* ---- CRC tables ---- */

static uint32_t crc32_tab[8][256];
static uint32_t crc32c_tab[8][256];
static uint64_t crc64_tab[8][256];
static bool crc32c_have_hw;
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_tables_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t a = i, b = i;
        uint64_t c = i;
        for (int k = 0; k < 8; k++) {
            a = (a & 1) ? (a >> 1) ^ 0xEDB88320u : a >> 1;
            b = (b & 1) ? (b >> 1) ^ 0x82F63B78u : b >> 1;
            c = (c & 1) ? (c >> 1) ^ 0x9A6C9329AC4BC9B5ull : c >> 1;
        }
        crc32_tab[0][i] = a;
        crc32c_tab[0][i] = b;
        crc64_tab[0][i] = c;
    }
    for (int t = 1; t < 8; t++) {
        for (int i = 0; i < 256; i++) {
            uint32_t a = crc32_tab[t - 1][i], b = crc32c_tab[t - 1][i];
            uint64_t c = crc64_tab[t - 1][i];
            crc32_tab[t][i] = (a >> 8) ^ crc32_tab[0][a & 0xff];
            crc32c_tab[t][i] = (b >> 8) ^ crc32c_tab[0][b & 0xff];
            crc64_tab[t][i] = (c >> 8) ^ crc64_tab[0][c & 0xff];
        }
    }
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    crc32c_have_hw = __builtin_cpu_supports("sse4.2") != 0;
#endif
}

static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Slicing-by-8 for a reflected 32-bit CRC; crc is the inverted register. */
static uint32_t crc32_slice8(uint32_t tab[8][256], uint32_t crc, const uint8_t *p, size_t n)
{
    while (n >= 8) {
        uint64_t v = load_le64(p) ^ crc;
        crc = tab[7][v & 0xff] ^ tab[6][(v >> 8) & 0xff] ^ tab[5][(v >> 16) & 0xff] ^
              tab[4][(v >> 24) & 0xff] ^ tab[3][(v >> 32) & 0xff] ^
              tab[2][(v >> 40) & 0xff] ^ tab[1][(v >> 48) & 0xff] ^ tab[0][v >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ tab[0][(crc ^ *p++) & 0xff];
    return crc;
}

uint32_t auth_crc32(uint32_t crc, const void *buf, size_t n)
{
    pthread_once(&crc_once, crc_tables_init);
    return ~crc32_slice8(crc32_tab, ~crc, buf, n);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2")))
static uint32_t crc32c_hw(uint32_t crc, const uint8_t *p, size_t n)
{
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
#endif

uint32_t auth_crc32c(uint32_t crc, const void *buf, size_t n)
{
    pthread_once(&crc_once, crc_tables_init);
#if defined(__x86_64__) && defined(__GNUC__)
    if (crc32c_have_hw)
        return ~crc32c_hw(~crc, buf, n);
#endif
    return ~crc32_slice8(crc32c_tab, ~crc, buf, n);
}

uint64_t auth_crc64nvme(uint64_t crc, const void *buf, size_t n)
{
    pthread_once(&crc_once, crc_tables_init);
    const uint8_t *p = buf;
    crc = ~crc;
    while (n >= 8) {
        uint64_t v = load_le64(p) ^ crc;
        crc = crc64_tab[7][v & 0xff] ^ crc64_tab[6][(v >> 8) & 0xff] ^
              crc64_tab[5][(v >> 16) & 0xff] ^ crc64_tab[4][(v >> 24) & 0xff] ^
              crc64_tab[3][(v >> 32) & 0xff] ^ crc64_tab[2][(v >> 40) & 0xff] ^
              crc64_tab[1][(v >> 48) & 0xff] ^ crc64_tab[0][v >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ crc64_tab[0][(crc ^ *p++) & 0xff];
    return ~crc;
}

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
        c->crc32 = auth_crc32(c->crc32, buf, n);
        break;
    case AUTH_CK_CRC32C:
        c->crc32 = auth_crc32c(c->crc32, buf, n);
        break;
    case AUTH_CK_CRC64NVME:
        c->crc64 = auth_crc64nvme(c->crc64, buf, n);
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

/* ---- hex and base64 ---- */

void auth_hex(const uint8_t *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

static const char b64_chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t auth_b64_encode(const uint8_t *in, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[o++] = b64_chars[(v >> 18) & 63];
        out[o++] = b64_chars[(v >> 12) & 63];
        out[o++] = i + 1 < n ? b64_chars[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? b64_chars[v & 63] : '=';
    }
    out[o] = '\0';
    return o;
}

static int b64_val(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

long auth_b64_decode(const char *in, size_t n, uint8_t *out, size_t cap)
{
    if (n % 4 != 0)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        bool last = i + 4 == n;
        int v[4];
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            char c = in[i + (size_t)k];
            if (c == '=' && last && k >= 2) {
                v[k] = 0;
                pad++;
                continue;
            }
            if (pad)            /* data after '=' */
                return -1;
            v[k] = b64_val(c);
            if (v[k] < 0)
                return -1;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        size_t nb = 3 - (size_t)pad;
        if (o + nb > cap)
            return -1;
        out[o++] = (uint8_t)(w >> 16);
        if (nb > 1)
            out[o++] = (uint8_t)(w >> 8);
        if (nb > 2)
            out[o++] = (uint8_t)w;
    }
    return (long)o;
}

/* ---- SHA-256 and HMAC ---- */

void auth_sha256_hex(const void *d, size_t n, char out[65])
{
    uint8_t md[32];
    SHA256(d, n, md);
    auth_hex(md, 32, out);
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
