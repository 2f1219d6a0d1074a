/* backend/s3_tagging.c - tags through the S3 cold tier: Get/Put/Delete
 * ObjectTagging and ...BucketTagging are passed on as ?tagging calls, so the
 * cold tier keeps the tags and enforces its own rules too. The tags of a
 * put, a copy and a multipart create travel as headers (s3_add_meta_headers,
 * s3_object_copy), and the count a HEAD/GET answers with is kept by
 * s3_meta_from_headers. */
#include "s3_int.h"
#include "encoding.h"
#include "log.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The cold tier's 404 without a code on a bucket call means no bucket. */
static enum backend_status bucket_404(enum backend_status st, const struct s3_call *c,
                                      const char *key)
{
    return !key && st == BACKEND_NO_KEY && !c->code[0] ? BACKEND_NO_BUCKET : st;
}

enum backend_status s3_tagging_get(struct backend *base, const char *bucket, const char *key,
                                   struct obj_tags *out)
{
    struct s3_store *s = (struct s3_store *)base;
    memset(out, 0, sizeof *out);
    enum backend_status st = key ? s3_key_check(key) : BACKEND_OK;
    if (st != BACKEND_OK)
        return st;
    struct s3_call c = { .method = "GET", .bucket = s3_cold_bucket(s, bucket), .key = key,
                         .query = "tagging=", .body_fd = -1, .idempotent = true };
    st = bucket_404(s3_do(s, &c), &c, key);
    if (st == BACKEND_OK) {
        enum obj_tags_status ts = obj_tags_from_xml(c.rbuf, c.rlen, out);
        if (ts == OBJ_TAGS_NOMEM) {
            st = BACKEND_NOMEM;
        } else if (ts != OBJ_TAGS_OK) {
            log_msg(LOG_LVL_ERROR, "backend", "s3: %s/%s: the cold tier's tag set is not a "
                    "Tagging document", bucket, key ? key : "");
            st = BACKEND_IO;
        }
    }
    s3_call_free(&c);
    return st;
}

enum backend_status s3_tagging_put(struct backend *base, const char *bucket, const char *key,
                                   const struct obj_tags *tags)
{
    struct s3_store *s = (struct s3_store *)base;
    enum backend_status st = key ? s3_key_check(key) : BACKEND_OK;
    if (st != BACKEND_OK)
        return st;
    char *xml = NULL;
    size_t len = 0;
    if (tags && obj_tags_to_xml(tags, &xml, &len) != 0)
        return BACKEND_NOMEM;
    /* S3 wants Content-MD5 (or a checksum) on Put...Tagging. */
    unsigned char md[16];
    unsigned int ml = 0;
    char b64[32], md5h[64];
    EVP_Digest(xml ? xml : "", len, md, &ml, EVP_md5(), NULL);
    sg_b64_encode(md, sizeof md, b64);
    snprintf(md5h, sizeof md5h, "Content-MD5: %s", b64);
    struct curl_slist h2 = { "Content-Type: application/xml", NULL };
    struct curl_slist h1 = { md5h, &h2 };
    struct s3_call c = { .method = tags ? "PUT" : "DELETE", .bucket = s3_cold_bucket(s, bucket),
                         .key = key, .query = "tagging=", .hdrs = tags ? &h1 : NULL,
                         .body = xml ? xml : "", .body_len = len, .body_fd = -1,
                         .idempotent = true };
    st = bucket_404(s3_do(s, &c), &c, key);
    s3_call_free(&c);
    free(xml);
    return st;
}
