/* gateway/h_mpu.c - multipart uploads: Create, UploadPart (streamed like a
 * PUT), UploadPartCopy, Complete, Abort, ListParts, ListMultipartUploads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <microhttpd.h>

#include "gw_int.h"

enum { XML_CAP = 8 * 1024 * 1024 };

static int owner_and_initiator(struct gw_buf *b, const struct gw_req *r)
{
    const struct conf_user *u = auth_ctx_user(r->auth);
    const char *name = u && u->name ? u->name : "shardgate";
    int rc = 0;
    static const char *const tags[] = { "Initiator", "Owner" };
    for (int i = 0; i < 2; i++) {
        rc |= gw_buf_printf(b, "<%s>", tags[i]);
        rc |= gw_xml_elem(b, "ID", name);
        rc |= gw_xml_elem(b, "DisplayName", name);
        rc |= gw_buf_printf(b, "</%s>", tags[i]);
    }
    return rc;
}

static void reply_built(struct gw_req *r, struct gw_buf *b, int rc)
{
    if (rc) {
        gw_buf_free(b);
        gw_reply_error(r, S3E_INTERNAL, NULL, NULL);
        return;
    }
    gw_reply_xml_buf(r, 200, b);
}

void gw_h_mpu_create(struct gw_req *r)
{
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    enum s3_err err;
    if (gw_collect_put_headers(r, &m, &err) != 0) {
        obj_meta_clear(&m);
        gw_reply_error(r, err, NULL, NULL);
        return;
    }
    char id[BACKEND_UPLOAD_ID_MAX];
    enum backend_status st = backend_mpu_create(r->backend, r->bucket, r->key, &m, id);
    obj_meta_clear(&m);
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        return;
    }
    struct gw_buf b;
    gw_buf_init(&b, 8192);
    int rc = gw_xml_begin(&b, "InitiateMultipartUploadResult");
    rc |= gw_xml_elem(&b, "Bucket", r->bucket);
    rc |= gw_xml_elem(&b, "Key", r->key);
    rc |= gw_xml_elem(&b, "UploadId", id);
    rc |= gw_buf_puts(&b, "</InitiateMultipartUploadResult>");
    reply_built(r, &b, rc);
}

/* partNumber and uploadId of an UploadPart(Copy); 0 or -1 with *msg set. */
static int part_args(struct gw_req *r, const char **msg)
{
    const char *pn = gw_req_query(r, "partNumber");
    r->upload_id = gw_req_query(r, "uploadId");
    char *end = NULL;
    long n = pn ? strtol(pn, &end, 10) : 0;
    if (!pn || !*pn || *end || n < 1 || n > (long)BACKEND_MAX_PARTS) {
        *msg = "Part number must be an integer between 1 and 10000, inclusive";
        return -1;
    }
    if (!r->upload_id || !*r->upload_id) {
        *msg = "This operation needs an uploadId.";
        return -1;
    }
    r->part_no = (unsigned)n;
    return 0;
}

void gw_h_mpu_part_begin(struct gw_req *r)
{
    const char *msg;
    if (part_args(r, &msg) != 0) {
        gw_req_fail(r, S3E_INVALID_ARGUMENT, msg);
        return;
    }
    if (gw_check_put_length(r) != 0)
        return;
    enum backend_status st = backend_mpu_part_begin(r->backend, r->bucket, r->key, r->upload_id,
                                                    r->part_no, &r->put);
    if (st != BACKEND_OK)
        gw_req_fail(r, s3_error_from_backend(st), NULL);
}

void gw_h_mpu_part_end(struct gw_req *r)
{
    struct obj_meta m, out;
    memset(&m, 0, sizeof m);
    memset(&out, 0, sizeof out);
    snprintf(m.etag, sizeof m.etag, "%s", r->body_res.md5_hex);
    if (r->body_res.checksum_name[0] &&
        obj_meta_add_hdr(&m, r->body_res.checksum_name, r->body_res.checksum_b64) != 0) {
        gw_reply_error(r, S3E_SLOW_DOWN, NULL, NULL);
        return;
    }
    struct backend_put *p = r->put;
    r->put = NULL;
    enum backend_status st = backend_put_commit(p, &m, &out);
    obj_meta_clear(&m);
    obj_meta_clear(&out);
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        return;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"",
                                                                MHD_RESPMEM_PERSISTENT);
    if (resp) {
        char etag[80];
        snprintf(etag, sizeof etag, "\"%s\"", r->body_res.md5_hex);
        MHD_add_response_header(resp, "ETag", etag);
        if (r->body_res.checksum_name[0])
            MHD_add_response_header(resp, r->body_res.checksum_name, r->body_res.checksum_b64);
    }
    gw_reply(r, 200, resp);
}

void gw_h_mpu_part_copy(struct gw_req *r)
{
    const char *msg, *sb, *sk;
    if (part_args(r, &msg) != 0) {
        gw_reply_error(r, S3E_INVALID_ARGUMENT, msg, NULL);
        return;
    }
    if (gw_parse_copy_source(r, &sb, &sk) != 0)
        return;
    struct obj_meta src, out;
    memset(&src, 0, sizeof src);
    memset(&out, 0, sizeof out);
    enum s3_err err;
    enum backend_status st = backend_object_head(r->backend, sb, sk, &src);
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        goto out;
    }
    if (gw_conditions_fail(r, "x-amz-copy-source-", src.etag, src.mtime.tv_sec, &err)) {
        gw_reply_error(r, err, NULL, NULL);
        goto out;
    }
    const char *range = gw_req_header(r, "x-amz-copy-source-range");
    uint64_t first = 0, last = 0;
    if (range) {
        unsigned long long a, b;
        char tail;
        if (sscanf(range, "bytes=%llu-%llu%c", &a, &b, &tail) != 2 || b < a) {
            gw_reply_error(r, S3E_INVALID_ARGUMENT, "The x-amz-copy-source-range value must be "
                           "of the form bytes=first-last where first and last are the "
                           "zero-based offsets of the first and last bytes to copy", NULL);
            goto out;
        }
        if (b >= src.size) {
            gw_reply_error(r, S3E_INVALID_RANGE, "The requested range is not satisfiable",
                           NULL);
            goto out;
        }
        first = a;
        last = b;
    }
    st = backend_mpu_part_copy(r->backend, r->bucket, r->key, r->upload_id, r->part_no, sb, sk,
                               range != NULL, first, last, &out);
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        goto out;
    }
    struct gw_buf b;
    gw_buf_init(&b, 4096);
    char date[32];
    gw_iso_date(&out.mtime, date, sizeof date);
    int rc = gw_xml_begin(&b, "CopyPartResult");
    rc |= gw_xml_elem(&b, "LastModified", date);
    rc |= gw_buf_printf(&b, "<ETag>&quot;%s&quot;</ETag></CopyPartResult>", out.etag);
    reply_built(r, &b, rc);
out:
    obj_meta_clear(&src);
    obj_meta_clear(&out);
}

void gw_h_mpu_complete(struct gw_req *r)
{
    struct gw_xml_parts parts;
    if (gw_xml_parse_complete(r->xml_in.data ? r->xml_in.data : "", r->xml_in.len, &parts)) {
        gw_reply_error(r, S3E_MALFORMED_XML, NULL, NULL);
        return;
    }
    struct obj_meta out;
    memset(&out, 0, sizeof out);
    enum backend_status st = backend_mpu_complete(r->backend, r->bucket, r->key,
                                                  gw_req_query(r, "uploadId"), parts.parts,
                                                  parts.n, &out);
    free(parts.parts);
    if (st != BACKEND_OK) {
        obj_meta_clear(&out);
        gw_reply_backend_error(r, st);
        return;
    }
    if (r->cache) {
        cache_invalidate(r->cache, r->bucket, r->key);
        if (r->conf->cache_on_write)
            cache_warm(r->cache, r->bucket, r->key);
    }
    struct gw_buf b;
    gw_buf_init(&b, 8192);
    int rc = gw_xml_begin(&b, "CompleteMultipartUploadResult");
    const char *host = gw_req_header(r, "host");
    char *loc = gw_arena_printf(&r->arena, "http://%s%s", host ? host : "localhost",
                                r->raw_path);
    rc |= gw_xml_elem(&b, "Location", loc ? loc : "");
    rc |= gw_xml_elem(&b, "Bucket", r->bucket);
    rc |= gw_xml_elem(&b, "Key", r->key);
    rc |= gw_buf_printf(&b, "<ETag>&quot;%s&quot;</ETag>", out.etag);
    rc |= gw_buf_puts(&b, "</CompleteMultipartUploadResult>");
    obj_meta_clear(&out);
    reply_built(r, &b, rc);
}

void gw_h_mpu_abort(struct gw_req *r)
{
    enum backend_status st = backend_mpu_abort(r->backend, r->bucket, r->key,
                                               gw_req_query(r, "uploadId"));
    if (st != BACKEND_OK)
        gw_reply_backend_error(r, st);
    else
        gw_reply_body(r, 204, NULL, NULL, 0);
}

static bool parse_uint(const char *v, unsigned def, unsigned cap, unsigned *out)
{
    *out = def;
    if (!v)
        return true;
    char *end;
    long long n = strtoll(v, &end, 10);
    if (!*v || *end || n < 0)
        return false;
    *out = n > (long long)cap ? cap : (unsigned)n;
    return true;
}

void gw_h_mpu_list_parts(struct gw_req *r)
{
    unsigned marker, max;
    if (!parse_uint(gw_req_query(r, "part-number-marker"), 0, BACKEND_MAX_PARTS, &marker) ||
        !parse_uint(gw_req_query(r, "max-parts"), 1000, 1000, &max)) {
        gw_reply_error(r, S3E_INVALID_ARGUMENT, "max-parts and part-number-marker must be "
                       "non-negative integers", NULL);
        return;
    }
    const char *uid = gw_req_query(r, "uploadId");
    struct backend_parts_page pg;
    memset(&pg, 0, sizeof pg);
    enum backend_status st = backend_mpu_list_parts(r->backend, r->bucket, r->key, uid, marker,
                                                    max, &pg);
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        return;
    }
    struct gw_buf b;
    gw_buf_init(&b, XML_CAP);
    int rc = gw_xml_begin(&b, "ListPartsResult");
    rc |= gw_xml_elem(&b, "Bucket", r->bucket);
    rc |= gw_xml_elem(&b, "Key", r->key);
    rc |= gw_xml_elem(&b, "UploadId", uid);
    rc |= owner_and_initiator(&b, r);
    rc |= gw_buf_puts(&b, "<StorageClass>STANDARD</StorageClass>");
    rc |= gw_buf_printf(&b, "<PartNumberMarker>%u</PartNumberMarker>", marker);
    rc |= gw_buf_printf(&b, "<NextPartNumberMarker>%u</NextPartNumberMarker>", pg.next_marker);
    rc |= gw_buf_printf(&b, "<MaxParts>%u</MaxParts>", max);
    rc |= gw_buf_printf(&b, "<IsTruncated>%s</IsTruncated>", pg.truncated ? "true" : "false");
    for (size_t i = 0; i < pg.n_parts && !rc; i++) {
        char date[32];
        gw_iso_date(&pg.parts[i].mtime, date, sizeof date);
        rc |= gw_buf_printf(&b, "<Part><PartNumber>%u</PartNumber>", pg.parts[i].part_no);
        rc |= gw_xml_elem(&b, "LastModified", date);
        rc |= gw_buf_printf(&b, "<ETag>&quot;%s&quot;</ETag><Size>%llu</Size></Part>",
                            pg.parts[i].etag, (unsigned long long)pg.parts[i].size);
    }
    rc |= gw_buf_puts(&b, "</ListPartsResult>");
    backend_parts_page_free(&pg);
    reply_built(r, &b, rc);
}

void gw_h_list_uploads(struct gw_req *r)
{
    unsigned max;
    if (!parse_uint(gw_req_query(r, "max-uploads"), 1000, 1000, &max)) {
        gw_reply_error(r, S3E_INVALID_ARGUMENT, "max-uploads must be a non-negative integer",
                       NULL);
        return;
    }
    const char *prefix = gw_req_query(r, "prefix");
    const char *delim = gw_req_query(r, "delimiter");
    const char *km = gw_req_query(r, "key-marker");
    const char *um = gw_req_query(r, "upload-id-marker");
    const char *enc = gw_req_query(r, "encoding-type");
    bool url = enc && strcmp(enc, "url") == 0;
    struct backend_uploads_page pg;
    memset(&pg, 0, sizeof pg);
    enum backend_status st = backend_mpu_list_uploads(r->backend, r->bucket,
                                                      prefix ? prefix : "", delim, km, um, max,
                                                      &pg);
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        return;
    }
    struct gw_buf b;
    gw_buf_init(&b, XML_CAP);
    int rc = gw_xml_begin(&b, "ListMultipartUploadsResult");
    rc |= gw_xml_elem(&b, "Bucket", r->bucket);
    rc |= gw_xml_elem(&b, "KeyMarker", km ? km : "");
    rc |= gw_xml_elem(&b, "UploadIdMarker", um ? um : "");
    rc |= gw_xml_elem(&b, "NextKeyMarker", pg.next_key_marker ? pg.next_key_marker : "");
    rc |= gw_xml_elem(&b, "NextUploadIdMarker", pg.next_upload_id_marker);
    rc |= gw_xml_elem(&b, "Prefix", prefix ? prefix : "");
    if (delim && *delim)
        rc |= gw_xml_elem(&b, "Delimiter", delim);
    if (url)
        rc |= gw_xml_elem(&b, "EncodingType", "url");
    rc |= gw_buf_printf(&b, "<MaxUploads>%u</MaxUploads>", max);
    rc |= gw_buf_printf(&b, "<IsTruncated>%s</IsTruncated>", pg.truncated ? "true" : "false");
    for (size_t i = 0; i < pg.n_uploads && !rc; i++) {
        char date[32];
        gw_iso_date(&pg.uploads[i].initiated, date, sizeof date);
        rc |= gw_buf_puts(&b, "<Upload>");
        if (url) {
            rc |= gw_buf_puts(&b, "<Key>");
            rc |= gw_url_encode(&b, pg.uploads[i].key, true);
            rc |= gw_buf_puts(&b, "</Key>");
        } else {
            rc |= gw_xml_elem(&b, "Key", pg.uploads[i].key);
        }
        rc |= gw_xml_elem(&b, "UploadId", pg.uploads[i].upload_id);
        rc |= owner_and_initiator(&b, r);
        rc |= gw_buf_puts(&b, "<StorageClass>STANDARD</StorageClass>");
        rc |= gw_xml_elem(&b, "Initiated", date);
        rc |= gw_buf_puts(&b, "</Upload>");
    }
    for (size_t i = 0; i < pg.n_prefixes && !rc; i++) {
        rc |= gw_buf_puts(&b, "<CommonPrefixes>");
        rc |= gw_xml_elem(&b, "Prefix", pg.prefixes[i]);
        rc |= gw_buf_puts(&b, "</CommonPrefixes>");
    }
    rc |= gw_buf_puts(&b, "</ListMultipartUploadsResult>");
    backend_uploads_page_free(&pg);
    reply_built(r, &b, rc);
}
