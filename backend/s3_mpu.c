/* backend/s3_mpu.c - multipart uploads on the S3 cold tier: create, part
 * copies, Complete (its XML body and the checksums of its result), abort and
 * the two listings. A part's body is a spooled put (s3_write.c); the cold S3
 * holds each upload's state, nothing is kept here. */
#include "s3_int.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- multipart ---- */

static char *upload_query(const char *upload_id, const char *extra)
{
    char *eid = s3_uri_encode(upload_id, false);
    char *q = NULL;
    if (eid && asprintf(&q, "%s%suploadId=%s", extra ? extra : "", extra ? "&" : "", eid) < 0)
        q = NULL;
    free(eid);
    return q;
}

enum backend_status s3_mpu_create_cold(struct s3_store *s, const char *cbucket,
                                       const char *key, const struct obj_meta *meta,
                                       char id[BACKEND_UPLOAD_ID_MAX])
{
    id[0] = '\0';
    struct curl_slist *hl = NULL;
    if (s3_add_meta_headers(&hl, meta, true) != 0) {
        curl_slist_free_all(hl);
        return BACKEND_NOMEM;
    }
    /* Not idempotent: a retry could leave an orphan upload behind. */
    struct s3_call c = { .method = "POST", .bucket = cbucket, .key = key, .query = "uploads=",
                         .hdrs = hl, .body_fd = -1, .idempotent = false };
    enum backend_status st = s3_do(s, &c);
    if (st == BACKEND_OK)
        st = s3_xml_upload_id(c.rbuf, c.rlen, id);
    s3_call_free(&c);
    curl_slist_free_all(hl);
    return st;
}

enum backend_status s3_mpu_create(struct backend *base, const char *bucket,
                                  const char *key, const struct obj_meta *meta,
                                  char upload_id[BACKEND_UPLOAD_ID_MAX])
{
    struct s3_store *s = (struct s3_store *)base;
    enum backend_status st = s3_key_check(key);
    if (st != BACKEND_OK)
        return st;
    return s3_mpu_create_cold(s, s3_cold_bucket(s, bucket), key, meta, upload_id);
}

static int result_checksums(const char *xml, size_t len, struct obj_meta *ck);

enum backend_status s3_mpu_part_copy(struct backend *base, const char *bucket,
                                     const char *key, const char *upload_id,
                                     unsigned part_no, const struct backend_copy_src *src,
                                     struct obj_meta *out)
{
    struct s3_store *s = (struct s3_store *)base;
    memset(out, 0, sizeof *out);
    char extra[32];
    snprintf(extra, sizeof extra, "partNumber=%u", part_no);
    char *q = upload_query(upload_id, extra);
    char *cs = s3_copy_source_header(s3_cold_bucket(s, src->bucket), src->key);
    char range[96];
    snprintf(range, sizeof range, "x-amz-copy-source-range: bytes=%llu-%llu",
             (unsigned long long)src->first, (unsigned long long)src->last);
    struct curl_slist h2 = { range, NULL }, h1 = { cs, src->has_range ? &h2 : NULL };
    enum backend_status st = BACKEND_NOMEM;
    if (!q || !cs)
        goto out;
    uint64_t size = src->last - src->first + 1;
    if (!src->has_range) {
        struct obj_meta sm;
        st = s3_object_head(base, src->bucket, src->key, &sm);
        if (st != BACKEND_OK)
            goto out;
        size = sm.size;
        obj_meta_clear(&sm);
    }
    struct s3_call c = { .method = "PUT", .bucket = s3_cold_bucket(s, bucket), .key = key,
                         .query = q, .hdrs = &h1, .body_fd = -1, .body = "",
                         .idempotent = true, .long_transfer = true,
                         .slow_answer = true };
    st = s3_do(s, &c);
    if (st == BACKEND_OK && s3_xml_etag_result(c.rbuf, c.rlen, out) != BACKEND_OK) {
        if (c.rbuf && s3_xml_error_code(c.rbuf, c.rlen, c.code, sizeof c.code) == 0)
            st = s3_status_from_code(c.code, 500);
        else
            st = BACKEND_IO;
    }
    /* an upload with a checksum algorithm: the tier computed the part's */
    if (st == BACKEND_OK && result_checksums(c.rbuf, c.rlen, out) != 0)
        st = BACKEND_NOMEM;
    s3_call_free(&c);
    out->size = size;
out:
    free(q);
    free(cs);
    return st;
}

/* The element of a Complete body or result holding a checksum, by the
 * header name of its algorithm; NULL when unknown. */
static const char *checksum_elem(const char *hdr)
{
    static const char *const map[][2] = {
        { "x-amz-checksum-crc32", "ChecksumCRC32" },
        { "x-amz-checksum-crc32c", "ChecksumCRC32C" },
        { "x-amz-checksum-crc64nvme", "ChecksumCRC64NVME" },
        { "x-amz-checksum-sha1", "ChecksumSHA1" },
        { "x-amz-checksum-sha256", "ChecksumSHA256" },
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(hdr, map[i][0]) == 0)
            return map[i][1];
    return NULL;
}

/* Copies the text of the first <tag>text</tag> in a flat S3 result into
 * out; 0, or -1 when absent or too long. The results searched are S3's own
 * fixed shapes with base64 or upper-case word values: no nesting, no
 * entities to decode. */
static int result_text(const char *xml, size_t len, const char *tag, char *out, size_t outlen)
{
    char open[48];
    snprintf(open, sizeof open, "<%s>", tag);
    size_t ol = strlen(open);
    const char *p = xml ? memmem(xml, len, open, ol) : NULL;
    if (!p)
        return -1;
    p += ol;
    const char *e = memchr(p, '<', len - (size_t)(p - xml));
    if (!e || (size_t)(e - p) >= outlen)
        return -1;
    memcpy(out, p, (size_t)(e - p));
    out[e - p] = '\0';
    return 0;
}

/* The checksum headers of what the cold tier made, from its
 * CompleteMultipartUploadResult (the object's, with its type) or its
 * CopyPartResult (the part's). 0, or -1 when out of memory. */
static int result_checksums(const char *xml, size_t len, struct obj_meta *ck)
{
    static const char *const hdrs[] = {
        "x-amz-checksum-crc32", "x-amz-checksum-crc32c", "x-amz-checksum-crc64nvme",
        "x-amz-checksum-sha1", "x-amz-checksum-sha256",
    };
    char v[128];
    for (size_t i = 0; i < sizeof hdrs / sizeof hdrs[0]; i++) {
        if (result_text(xml, len, checksum_elem(hdrs[i]), v, sizeof v) == 0 && v[0]) {
            if (obj_meta_add_hdr(ck, hdrs[i], v) != 0)
                return -1;
            if (result_text(xml, len, "ChecksumType", v, sizeof v) == 0 && v[0] &&
                obj_meta_add_hdr(ck, "x-amz-checksum-type", v) != 0)
                return -1;
            break;
        }
    }
    return 0;
}

enum backend_status s3_mpu_complete_cold(struct s3_store *s, const char *cbucket,
                                         const char *key, const char *upload_id,
                                         const struct backend_part *parts, size_t n,
                                         const struct backend_cond *cond, struct obj_meta *ck)
{
    /* <Part><PartNumber>10000</PartNumber><ETag>"..."</ETag>
     * <ChecksumCRC64NVME>(95)</ChecksumCRC64NVME></Part> */
    size_t cap = 128 + n * 290;
    char *body = malloc(cap);
    char *q = upload_query(upload_id, NULL);
    enum backend_status st = BACKEND_NOMEM;
    if (!body || !q)
        goto out;
    size_t len = (size_t)snprintf(body, cap, "<CompleteMultipartUpload>");
    for (size_t i = 0; i < n; i++) {
        /* ETags are hex (and '-'): nothing to escape, but be sure. */
        if (strpbrk(parts[i].etag, "<>&\"")) {
            st = BACKEND_INVALID_PART;
            goto out;
        }
        len += (size_t)snprintf(body + len, cap - len,
                                "<Part><PartNumber>%u</PartNumber><ETag>\"%s\"</ETag>",
                                parts[i].part_no, parts[i].etag);
        const char *el = parts[i].checksum_name[0] ? checksum_elem(parts[i].checksum_name)
                                                   : NULL;
        if (parts[i].checksum_name[0] && (!el || strpbrk(parts[i].checksum, "<>&\""))) {
            st = BACKEND_INVALID_PART;
            goto out;
        }
        if (el)
            len += (size_t)snprintf(body + len, cap - len, "<%s>%.95s</%s>", el,
                                    parts[i].checksum, el);
        len += (size_t)snprintf(body + len, cap - len, "</Part>");
    }
    len += (size_t)snprintf(body + len, cap - len, "</CompleteMultipartUpload>");
    char cl[S3_COND_LINE_MAX];
    bool conditional = s3_cond_line(cond, cl);
    struct curl_slist h2 = { cl, NULL };
    struct curl_slist h1 = { "Content-Type: application/xml", conditional ? &h2 : NULL };
    /* Retried: S3 documents CompleteMultipartUpload as safe to retry (a
     * repeat of a completed upload answers with the same result or
     * NoSuchUpload, which we then check against the object). Not with a
     * condition: the repeat would fail it (If-None-Match: * after the
     * first attempt made the object). */
    struct s3_call c = { .method = "POST", .bucket = cbucket, .key = key, .query = q,
                         .hdrs = &h1, .body = body, .body_len = len, .body_fd = -1,
                         .idempotent = !conditional, .long_transfer = true,
                         .slow_answer = true };
    st = s3_do(s, &c);
    /* 200 can still carry an <Error> (S3 sends it while assembling). */
    if (st == BACKEND_OK) {
        struct obj_meta r;
        memset(&r, 0, sizeof r);
        if (s3_xml_etag_result(c.rbuf, c.rlen, &r) != BACKEND_OK) {
            if (c.rbuf && s3_xml_error_code(c.rbuf, c.rlen, c.code, sizeof c.code) == 0)
                st = s3_status_from_code(c.code, 500);
            else
                st = BACKEND_IO;
        }
        obj_meta_clear(&r);
        if (st == BACKEND_OK && ck && result_checksums(c.rbuf, c.rlen, ck) != 0)
            st = BACKEND_NOMEM;
    }
    s3_call_free(&c);
out:
    free(body);
    free(q);
    return st;
}

void s3_mpu_abort_cold(struct s3_store *s, const char *cbucket, const char *key,
                       const char *upload_id)
{
    char *q = upload_query(upload_id, NULL);
    if (!q)
        return;
    struct s3_call c = { .method = "DELETE", .bucket = cbucket, .key = key, .query = q,
                         .body_fd = -1, .idempotent = true };
    (void)s3_do(s, &c);
    s3_call_free(&c);
    free(q);
}

enum backend_status s3_mpu_complete(struct backend *base, const char *bucket,
                                    const char *key, const char *upload_id,
                                    const struct backend_part *parts, size_t n_parts,
                                    const struct obj_meta *meta,
                                    const struct backend_cond *cond, struct obj_meta *out)
{
    (void)meta;   /* the cold S3 computes the object's checksum itself */
    struct s3_store *s = (struct s3_store *)base;
    struct obj_meta ck;
    memset(&ck, 0, sizeof ck);
    /* Sent again after it completed here: AWS's answer, not the tier's. */
    char etag[72];
    switch (s3_done_lookup(s, bucket, key, upload_id, parts, n_parts, etag)) {
    case S3_DONE_SAME:
        if (out) {
            memset(out, 0, sizeof *out);
            memcpy(out->etag, etag, sizeof etag);
        }
        return BACKEND_OK;
    case S3_DONE_OTHER:
        return BACKEND_NO_UPLOAD;
    case S3_DONE_NONE:
        break;
    }
    enum backend_status st = s3_mpu_complete_cold(s, s3_cold_bucket(s, bucket), key, upload_id,
                                                  parts, n_parts, cond, &ck);
    if (st == BACKEND_OK && out)
        st = s3_object_head(base, bucket, key, out);
    if (st == BACKEND_OK && out)
        s3_done_record(s, bucket, key, upload_id, parts, n_parts, out->etag);
    /* A HEAD without x-amz-checksum-mode has no checksum: add the one the
     * Complete answered with. */
    for (size_t i = 0; st == BACKEND_OK && out && i < ck.n_hdrs; i++) {
        if (!obj_meta_get_hdr(out, ck.hdrs[i].name) &&
            obj_meta_add_hdr(out, ck.hdrs[i].name, ck.hdrs[i].value) != 0)
            st = BACKEND_NOMEM;
    }
    obj_meta_clear(&ck);
    return st;
}

enum backend_status s3_mpu_head(struct backend *base, const char *bucket,
                                const char *key, const char *upload_id,
                                struct obj_meta *meta)
{
    /* No call: the cold S3 holds the upload's settings and enforces them
     * on each UploadPart and the Complete; an unknown upload shows there. */
    (void)base;
    (void)bucket;
    (void)key;
    (void)upload_id;
    memset(meta, 0, sizeof *meta);
    return BACKEND_OK;
}

enum backend_status s3_mpu_abort(struct backend *base, const char *bucket,
                                 const char *key, const char *upload_id)
{
    struct s3_store *s = (struct s3_store *)base;
    char *q = upload_query(upload_id, NULL);
    if (!q)
        return BACKEND_NOMEM;
    struct s3_call c = { .method = "DELETE", .bucket = s3_cold_bucket(s, bucket), .key = key,
                         .query = q, .body_fd = -1, .idempotent = true };
    enum backend_status st = s3_do(s, &c);
    s3_call_free(&c);
    free(q);
    return st;
}

enum backend_status s3_mpu_list_parts(struct backend *base, const char *bucket,
                                      const char *key, const char *upload_id,
                                      unsigned marker, unsigned max_parts,
                                      struct backend_parts_page *out)
{
    struct s3_store *s = (struct s3_store *)base;
    memset(out, 0, sizeof *out);
    char extra[64];
    snprintf(extra, sizeof extra, "max-parts=%u&part-number-marker=%u",
             max_parts ? max_parts : 1000, marker);
    char *q = upload_query(upload_id, extra);
    if (!q)
        return BACKEND_NOMEM;
    return s3_get_listing(s, bucket, key, q, S3_LISTING_PARTS,
                          (union s3_page){ .parts = out });
}

enum backend_status s3_mpu_list_uploads(struct backend *base, const char *bucket,
                                        const struct backend_uploads_req *req,
                                        struct backend_uploads_page *out)
{
    struct s3_store *s = (struct s3_store *)base;
    memset(out, 0, sizeof *out);
    char *q = NULL;
    char mu[16];
    snprintf(mu, sizeof mu, "%u", req->max_uploads ? req->max_uploads : 1000);
    bool resume = req->key_marker && *req->key_marker;
    int rc = 0;
    if (req->delimiter && *req->delimiter)
        rc |= s3_query_add(&q, "delimiter", req->delimiter);
    if (resume)
        rc |= s3_query_add(&q, "key-marker", req->key_marker);
    rc |= s3_query_add(&q, "max-uploads", mu);
    rc |= s3_query_add(&q, "prefix", req->prefix ? req->prefix : "");
    if (resume && req->upload_id_marker && *req->upload_id_marker)
        rc |= s3_query_add(&q, "upload-id-marker", req->upload_id_marker);
    rc |= s3_query_add(&q, "uploads", "");
    if (rc) {
        free(q);
        return BACKEND_NOMEM;
    }
    return s3_get_listing(s, bucket, NULL, q, S3_LISTING_UPLOADS,
                          (union s3_page){ .uploads = out });
}
