/* cache/verify.c - what a fill checks the cold tier's bytes against before
 * it publishes them.
 *
 * The cheapest proof the cold tier offers wins:
 *   1. a full-object CRC (x-amz-checksum-crc32 / -crc32c / -crc64nvme; S3
 *      gives one for every object written since 2025, our s3 backend asks
 *      with x-amz-checksum-mode: ENABLED): tens of GB per CPU-second;
 *   2. an ETag that is the body's MD5 (a single-part object): ~0.6 GB per
 *      CPU-second here (`openssl speed md5`), the most expensive step of a
 *      fill from a fast cold tier;
 *   3. a full-object SHA-1 / SHA-256 (OpenSSL; only where no MD5 ETag is);
 *   4. nothing (a multipart object with no full-object checksum).
 * A composite checksum (a multipart object's checksum of its parts'
 * checksums: "value-N", or x-amz-checksum-type COMPOSITE) says nothing a
 * single pass over the bytes can check, so it is not used. */
#include "cache_int.h"
#include "encoding.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

static bool is_crc(enum sg_ck_algo a)
{
    return a == SG_CK_CRC32 || a == SG_CK_CRC32C || a == SG_CK_CRC64NVME;
}

/* The object's full-object checksum (algorithm and base64 value), or
 * SG_CK_NONE. With several, a CRC before a SHA. */
static enum sg_ck_algo full_object_checksum(const struct obj_meta *m, const char **value)
{
    const char *type = obj_meta_get_hdr(m, "x-amz-checksum-type");
    if (type && strcasecmp(type, "FULL_OBJECT") != 0)
        return SG_CK_NONE;
    enum sg_ck_algo best = SG_CK_NONE;
    for (size_t i = 0; i < m->n_hdrs; i++) {
        const struct obj_hdr *h = &m->hdrs[i];
        enum sg_ck_algo a = sg_ck_from_name(h->name);
        if (a == SG_CK_NONE || strncmp(h->name, "x-amz-checksum-", 15) != 0 ||
            strchr(h->value, '-'))
            continue;
        if (best == SG_CK_NONE || (is_crc(a) && !is_crc(best))) {
            best = a;
            *value = h->value;
        }
    }
    return best;
}

int cache_verify_begin(struct cache_verify *v, const struct obj_meta *m)
{
    memset(v, 0, sizeof *v);
    const char *value = NULL;
    enum sg_ck_algo a = full_object_checksum(m, &value);
    bool md5 = cache_etag_is_md5(m->etag);
    if (a != SG_CK_NONE && (is_crc(a) || !md5) && strlen(value) < sizeof v->want) {
        if (sg_ck_init(&v->ck, a) != 0)
            return -1;
        v->kind = CACHE_CHECK_CHECKSUM;
        snprintf(v->want, sizeof v->want, "%s", value);
        snprintf(v->what, sizeof v->what, "%s", sg_ck_header(a) + 15);
        return 0;
    }
    if (md5) {
        v->md5 = EVP_MD_CTX_new();
        if (!v->md5 || !EVP_DigestInit_ex(v->md5, EVP_md5(), NULL)) {
            EVP_MD_CTX_free(v->md5);
            v->md5 = NULL;
            return -1;
        }
        v->kind = CACHE_CHECK_MD5;
        snprintf(v->want, sizeof v->want, "%s", m->etag);
        snprintf(v->what, sizeof v->what, "md5");
    }
    return 0;
}

int cache_verify_update(struct cache_verify *v, const void *buf, size_t n)
{
    if (v->kind == CACHE_CHECK_CHECKSUM)
        sg_ck_update(&v->ck, buf, n);
    else if (v->kind == CACHE_CHECK_MD5 && !EVP_DigestUpdate(v->md5, buf, n))
        return -1;
    return 0;
}

bool cache_verify_end(struct cache_verify *v, char got[CACHE_VERIFY_VALUE])
{
    uint8_t d[32];
    got[0] = '\0';
    switch (v->kind) {
    case CACHE_CHECK_NONE:
    case CACHE_CHECKS:
        return true;
    case CACHE_CHECK_CHECKSUM: {
        size_t n = sg_ck_final(&v->ck, d);
        if (n == 0)
            return false;
        sg_b64_encode(d, n, got);
        return strcmp(got, v->want) == 0;
    }
    case CACHE_CHECK_MD5: {
        unsigned n = 0;
        if (!EVP_DigestFinal_ex(v->md5, d, &n) || n != 16)
            return false;
        for (unsigned i = 0; i < n; i++)
            snprintf(got + 2 * i, 3, "%02x", d[i]);
        return strcasecmp(got, v->want) == 0;
    }
    }
    return false;
}

void cache_verify_free(struct cache_verify *v)
{
    sg_ck_free(&v->ck);
    EVP_MD_CTX_free(v->md5);
    v->md5 = NULL;
    v->kind = CACHE_CHECK_NONE;
}
