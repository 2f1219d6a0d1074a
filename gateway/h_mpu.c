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

/* ---- additional checksums ----
 * An upload may declare an algorithm (x-amz-checksum-algorithm) and a type
 * (x-amz-checksum-type) at Create; both are kept as headers of the upload.
 * Each UploadPart must then carry a checksum of that algorithm (auth/ has
 * verified it against the bytes; the part stores it), and Complete gives the
 * object a checksum made from the parts' ones: COMPOSITE, the checksum of the
 * concatenated part digests with "-N", or FULL_OBJECT, the CRC of the whole
 * object combined from the part CRCs. The gateway computes it (auth/ has the
 * arithmetic; backend/ must not depend on auth/) and hands it to the backend
 * as a header of the final object. */

struct ck_algo {
    const char *name;        /* as S3 spells it in headers: "CRC32" */
    const char *hdr;         /* the value's header: "x-amz-checksum-crc32" */
    const char *elem;        /* the XML element: "ChecksumCRC32" */
    bool composite;          /* S3 allows type COMPOSITE */
    bool full_object;        /* S3 allows type FULL_OBJECT */
};

static const struct ck_algo ck_algos[] = {
    { "CRC32", "x-amz-checksum-crc32", "ChecksumCRC32", true, true },
    { "CRC32C", "x-amz-checksum-crc32c", "ChecksumCRC32C", true, true },
    { "CRC64NVME", "x-amz-checksum-crc64nvme", "ChecksumCRC64NVME", false, true },
    { "SHA1", "x-amz-checksum-sha1", "ChecksumSHA1", true, false },
    { "SHA256", "x-amz-checksum-sha256", "ChecksumSHA256", true, false },
};

static const struct ck_algo *ck_by_name(const char *name)
{
    for (size_t i = 0; name && i < sizeof ck_algos / sizeof ck_algos[0]; i++)
        if (strcasecmp(name, ck_algos[i].name) == 0)
            return &ck_algos[i];
    return NULL;
}

static const struct ck_algo *ck_by_hdr(const char *hdr)
{
    for (size_t i = 0; hdr && i < sizeof ck_algos / sizeof ck_algos[0]; i++)
        if (strcmp(hdr, ck_algos[i].hdr) == 0)
            return &ck_algos[i];
    return NULL;
}

int gw_xml_checksum_elems(struct gw_buf *b, const struct obj_meta *m)
{
    int rc = 0;
    for (size_t i = 0; i < sizeof ck_algos / sizeof ck_algos[0]; i++) {
        const char *v = obj_meta_get_hdr(m, ck_algos[i].hdr);
        if (v && *v)
            rc |= gw_xml_elem(b, ck_algos[i].elem, v);
    }
    return rc;
}

const char *gw_checksum_header_of_elem(const char *elem)
{
    for (size_t i = 0; i < sizeof ck_algos / sizeof ck_algos[0]; i++)
        if (strcmp(elem, ck_algos[i].elem) == 0)
            return ck_algos[i].hdr;
    return NULL;
}

/* The algorithm an upload declared (NULL: none) and whether its type is
 * FULL_OBJECT, from the headers backend_mpu_head returned. */
static const struct ck_algo *upload_algo(const struct obj_meta *um, bool *full)
{
    const char *t = obj_meta_get_hdr(um, "x-amz-checksum-type");
    if (full)
        *full = t && strcmp(t, "FULL_OBJECT") == 0;
    return ck_by_name(obj_meta_get_hdr(um, "x-amz-checksum-algorithm"));
}

/* Checks the x-amz-checksum-algorithm / -type of a Create and adds them,
 * normalized (type defaulted), to the upload's headers. 0, or -1 with the
 * request answered. */
static int create_checksum_args(struct gw_req *r, struct obj_meta *m,
                                const struct ck_algo **algo, const char **type)
{
    const char *av = gw_req_header(r, "x-amz-checksum-algorithm");
    const char *tv = gw_req_header(r, "x-amz-checksum-type");
    *algo = NULL;
    *type = NULL;
    if (!av && !tv)
        return 0;
    const char *msg = NULL;
    const struct ck_algo *a = ck_by_name(av);
    bool full = tv && strcasecmp(tv, "FULL_OBJECT") == 0;
    if (!av) {
        msg = "The x-amz-checksum-type header can only be used with the "
              "x-amz-checksum-algorithm header.";
    } else if (!a) {
        msg = "Checksum algorithm provided is unsupported. Please try again with any of the "
              "valid types: [CRC32, CRC32C, CRC64NVME, SHA1, SHA256]";
    } else if (tv && !full && strcasecmp(tv, "COMPOSITE") != 0) {
        msg = "Value for x-amz-checksum-type header is invalid.";
    } else {
        if (!tv)
            full = !a->composite;
        if (full && !a->full_object)
            msg = "The FULL_OBJECT checksum type cannot be used with this checksum algorithm.";
        else if (!full && !a->composite)
            msg = "The COMPOSITE checksum type cannot be used with the crc64nvme checksum "
                  "algorithm.";
    }
    if (msg) {
        gw_reply_error(r, S3E_INVALID_REQUEST, msg, NULL);
        return -1;
    }
    *algo = a;
    *type = full ? "FULL_OBJECT" : "COMPOSITE";
    if (obj_meta_add_hdr(m, "x-amz-checksum-algorithm", a->name) != 0 ||
        obj_meta_add_hdr(m, "x-amz-checksum-type", *type) != 0) {
        gw_reply_error(r, S3E_SLOW_DOWN, NULL, NULL);
        return -1;
    }
    return 0;
}

void gw_h_mpu_create(struct gw_req *r)
{
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    enum s3_err err;
    const char *msg = NULL;
    if (gw_collect_put_headers(r, &m, &err) != 0 || gw_tagging_collect(r, &m, &err, &msg) != 0) {
        obj_meta_clear(&m);
        gw_reply_error(r, err, msg, NULL);
        return;
    }
    const struct ck_algo *algo;
    const char *type;
    if (create_checksum_args(r, &m, &algo, &type) != 0) {
        obj_meta_clear(&m);
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
    if (rc || !algo) {
        gw_reply_xml_built(r, &b, rc);
        return;
    }
    struct MHD_Response *resp = gw_xml_response(r, &b);
    if (resp) {
        gw_resp_header(r, resp, "x-amz-checksum-algorithm", algo->name);
        gw_resp_header(r, resp, "x-amz-checksum-type", type);
    }
    gw_reply(r, 200, resp);
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
    if (st != BACKEND_OK) {
        gw_req_fail(r, s3_error_from_backend(st), NULL);
        return;
    }
    long long n = gw_put_announced_length(r);
    if (n >= 0)   /* where the store keeps the part (backend/posix_mpu_slab.c) */
        backend_put_set_size(r->put, (uint64_t)n);
}

/* A part of an upload that declared an algorithm must carry a checksum of
 * it. 0, or -1 with the request answered (the caller drops the part). */
static int part_checksum_allowed(struct gw_req *r)
{
    struct obj_meta um;
    enum backend_status st = backend_mpu_head(r->backend, r->bucket, r->key, r->upload_id,
                                              &um);
    if (st != BACKEND_OK) {
        obj_meta_clear(&um);
        gw_reply_backend_error(r, st);
        return -1;
    }
    const struct ck_algo *a = upload_algo(&um, NULL);
    obj_meta_clear(&um);
    if (!a || strcmp(r->body_res.checksum_name, a->hdr) == 0)
        return 0;
    const struct ck_algo *got = ck_by_hdr(r->body_res.checksum_name);
    char *msg = got ? gw_arena_printf(&r->arena, "Checksum Type mismatch occurred, expected "
                                      "checksum Type: %s, actual checksum Type: %s",
                                      a->name, got->name)
                    : gw_arena_printf(&r->arena, "The upload was created using the %s checksum "
                                      "algorithm. The part must include a %s header.",
                                      a->name, a->hdr);
    log_msg(LOG_LVL_DEBUG, "gw", "req=%s %s/%s part %u: %s", r->id, r->bucket, r->key,
            r->part_no, msg ? msg : "checksum algorithm mismatch");
    gw_reply_error(r, S3E_INVALID_REQUEST, msg, NULL);
    return -1;
}

void gw_h_mpu_part_end(struct gw_req *r)
{
    struct obj_meta m, out;
    memset(&m, 0, sizeof m);
    memset(&out, 0, sizeof out);
    if (part_checksum_allowed(r) != 0) {
        backend_put_abort(r->put);
        r->put = NULL;
        return;
    }
    snprintf(m.etag, sizeof m.etag, "%s", r->body_res.md5_hex);
    if (gw_body_checksum_add(r, &m) != 0) {
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
    gw_reply_body_stored(r);
}

void gw_h_mpu_part_copy(struct gw_req *r)
{
    const char *msg, *sb, *sk;
    if (part_args(r, &msg) != 0) {
        gw_reply_error(r, S3E_INVALID_ARGUMENT, msg, NULL);
        return;
    }
    struct obj_meta src, out;
    memset(&src, 0, sizeof src);
    memset(&out, 0, sizeof out);
    enum backend_status st;
    if (gw_copy_source_open(r, &sb, &sk, &src) != 0)
        goto out;
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
    struct backend_copy_src from = { .bucket = sb, .key = sk, .has_range = range != NULL,
                                     .first = first, .last = last };
    st = backend_mpu_part_copy(r->backend, r->bucket, r->key, r->upload_id, r->part_no, &from,
                               &out);
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        goto out;
    }
    struct gw_buf b;
    gw_buf_init(&b, 4096);
    gw_reply_xml_built(r, &b, gw_xml_copy_result(&b, "CopyPartResult", &out, true));
out:
    obj_meta_clear(&src);
    obj_meta_clear(&out);
}

/* Every stored part of an upload, indexed by part number: (*by_no)[no] is
 * 1 + the index into *all, or 0. Caller frees both. */
static enum backend_status stored_parts(struct gw_req *r, const char *uid,
                                        struct backend_parts_page *all, unsigned **by_no)
{
    memset(all, 0, sizeof *all);
    *by_no = calloc(BACKEND_MAX_PARTS + 1, sizeof **by_no);
    if (!*by_no)
        return BACKEND_NOMEM;
    unsigned marker = 0;
    for (;;) {
        struct backend_parts_page pg;
        enum backend_status st = backend_mpu_list_parts(r->backend, r->bucket, r->key, uid,
                                                        marker, 1000, &pg);
        if (st != BACKEND_OK)
            return st;
        struct backend_part *np = pg.n_parts ? realloc(all->parts, (all->n_parts + pg.n_parts) *
                                                                       sizeof *np)
                                             : all->parts;
        if (!np) {
            backend_parts_page_free(&pg);
            return BACKEND_NOMEM;
        }
        all->parts = np;
        for (size_t i = 0; i < pg.n_parts; i++) {
            unsigned no = pg.parts[i].part_no;
            if (no < 1 || no > BACKEND_MAX_PARTS)
                continue;
            all->parts[all->n_parts] = pg.parts[i];
            (*by_no)[no] = (unsigned)++all->n_parts;
        }
        bool more = pg.truncated && pg.next_marker > marker;
        marker = pg.next_marker;
        backend_parts_page_free(&pg);
        if (!more)
            return BACKEND_OK;
    }
}

/* The object checksum of an upload that declared algorithm `a`, from the
 * stored part checksums; also fills the checksum of each part the Complete
 * listed without one, so the backend checks every part against what went
 * into the sum (a part replaced meanwhile then fails the Complete). Sets
 * value to "" when a part has no checksum of the algorithm (a part made by
 * UploadPartCopy on a cold tier that computes none, as moto): the object
 * then gets none.
 * 0, or -1 with the request answered. */
static int object_checksum(struct gw_req *r, const char *uid, const struct ck_algo *a,
                           bool full, struct gw_xml_parts *parts, char *value, size_t vlen)
{
    value[0] = '\0';
    struct backend_parts_page all;
    unsigned *by_no = NULL;
    const char **vals = calloc(parts->n, sizeof *vals);
    uint64_t *lens = calloc(parts->n, sizeof *lens);
    int rc = -1;
    enum backend_status st = vals && lens ? stored_parts(r, uid, &all, &by_no) : BACKEND_NOMEM;
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        goto out;
    }
    bool complete = true;
    for (size_t i = 0; i < parts->n; i++) {
        struct backend_part *p = &parts->parts[i];
        const struct backend_part *sp = by_no[p->part_no] ? &all.parts[by_no[p->part_no] - 1]
                                                          : NULL;
        if (p->checksum_name[0] && (strcmp(p->checksum_name, a->hdr) != 0 || !sp ||
                                    strcmp(sp->checksum_name, p->checksum_name) != 0 ||
                                    strcmp(sp->checksum, p->checksum) != 0)) {
            char *msg = gw_arena_printf(&r->arena, "One or more of the specified parts could "
                                        "not be found. The part may not have been uploaded, or "
                                        "the specified checksum may not match the part's "
                                        "checksum (part %u).", p->part_no);
            gw_reply_error(r, S3E_INVALID_PART, msg, NULL);
            goto out;
        }
        if (!sp || strcmp(sp->checksum_name, a->hdr) != 0) {
            complete = false;   /* missing parts: the backend answers InvalidPart */
            continue;
        }
        if (!p->checksum_name[0]) {
            memcpy(p->checksum_name, sp->checksum_name, sizeof p->checksum_name);
            memcpy(p->checksum, sp->checksum, sizeof p->checksum);
        }
        vals[i] = p->checksum;
        lens[i] = sp->size;
    }
    rc = 0;
    if (!complete) {
        log_msg(LOG_LVL_INFO, "gw", "req=%s %s/%s: a part has no %s checksum; the object gets "
                "none", r->id, r->bucket, r->key, a->name);
    } else if ((full ? auth_checksum_full_object(a->hdr, vals, lens, parts->n, value, vlen)
                     : auth_checksum_composite(a->hdr, vals, parts->n, value, vlen)) != 0) {
        log_msg(LOG_LVL_WARN, "gw", "req=%s %s/%s: cannot combine the %s part checksums",
                r->id, r->bucket, r->key, a->name);
        value[0] = '\0';
    }
out:
    free(vals);
    free(lens);
    free(by_no);
    backend_parts_page_free(&all);
    return rc;
}

void gw_h_mpu_complete(struct gw_req *r)
{
    struct gw_xml_parts parts;
    if (gw_xml_parse_complete(r->xml_in.data ? r->xml_in.data : "", r->xml_in.len, &parts)) {
        gw_reply_error(r, S3E_MALFORMED_XML, NULL, NULL);
        return;
    }
    const char *uid = gw_req_query(r, "uploadId");
    struct backend_cond cond;   /* If-None-Match: * / If-Match, checked with the commit */
    enum s3_err err;
    if (gw_write_cond(r, &cond, &err) != 0) {
        gw_reply_error(r, err, NULL, NULL);
        return;
    }
    struct obj_meta um, fin, out;
    memset(&fin, 0, sizeof fin);
    memset(&out, 0, sizeof out);
    enum backend_status st = backend_mpu_head(r->backend, r->bucket, r->key, uid, &um);
    if (st == BACKEND_NO_UPLOAD) {
        /* Completed before? Complete sent again with the same parts answers
         * the same ETag, as AWS does; the backend keeps that record. */
        obj_meta_clear(&um);
        st = BACKEND_OK;
    }
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        goto out;
    }
    bool full = false;
    const struct ck_algo *a = upload_algo(&um, &full);
    char value[128] = "";
    if (a) {
        if (object_checksum(r, uid, a, full, &parts, value, sizeof value) != 0)
            goto out;
        /* The object keeps the upload's headers but the algorithm (a
         * setting of the upload), and gains its checksum and type. */
        for (size_t i = 0; i < um.n_hdrs; i++) {
            const char *n = um.hdrs[i].name;
            if (strncmp(n, "x-amz-checksum-", 15) != 0 &&
                obj_meta_add_hdr(&fin, n, um.hdrs[i].value) != 0)
                goto nomem;
        }
        if (value[0] && (obj_meta_add_hdr(&fin, a->hdr, value) != 0 ||
                         obj_meta_add_hdr(&fin, "x-amz-checksum-type",
                                          full ? "FULL_OBJECT" : "COMPOSITE") != 0))
            goto nomem;
    }
    st = backend_mpu_complete_cond(r->backend, r->bucket, r->key, uid, parts.parts, parts.n,
                                   a ? &fin : NULL, &cond, &out);
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        goto out;
    }
    gw_cache_written(r);
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
    /* The object's checksum: ours, or what a cold S3 computed. */
    for (size_t i = 0; i < sizeof ck_algos / sizeof ck_algos[0] && !rc; i++) {
        const char *v = obj_meta_get_hdr(&out, ck_algos[i].hdr);
        if (a && value[0] && a == &ck_algos[i])
            v = value;
        if (!v)
            continue;
        const char *t = obj_meta_get_hdr(&out, "x-amz-checksum-type");
        if (a && value[0])
            t = full ? "FULL_OBJECT" : "COMPOSITE";
        rc |= gw_xml_elem(&b, ck_algos[i].elem, v);
        if (t)
            rc |= gw_xml_elem(&b, "ChecksumType", t);
        break;
    }
    rc |= gw_buf_puts(&b, "</CompleteMultipartUploadResult>");
    gw_reply_xml_built(r, &b, rc);
    goto out;
nomem:
    gw_reply_error(r, S3E_SLOW_DOWN, NULL, NULL);
out:
    free(parts.parts);
    obj_meta_clear(&um);
    obj_meta_clear(&fin);
    obj_meta_clear(&out);
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

void gw_h_mpu_list_parts(struct gw_req *r)
{
    unsigned marker, max;
    if (!gw_req_query_uint(r, "part-number-marker", 0, BACKEND_MAX_PARTS, &marker) ||
        !gw_req_query_uint(r, "max-parts", 1000, 1000, &max)) {
        gw_reply_error(r, S3E_INVALID_ARGUMENT, "max-parts and part-number-marker must be "
                       "non-negative integers", NULL);
        return;
    }
    const char *uid = gw_req_query(r, "uploadId");
    struct backend_parts_page pg;
    memset(&pg, 0, sizeof pg);
    struct obj_meta um;
    enum backend_status st = backend_mpu_head(r->backend, r->bucket, r->key, uid, &um);
    if (st == BACKEND_OK)
        st = backend_mpu_list_parts(r->backend, r->bucket, r->key, uid, marker, max, &pg);
    bool full = false;
    const struct ck_algo *a = upload_algo(&um, &full);
    obj_meta_clear(&um);
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        return;
    }
    if (!a && pg.n_parts && pg.parts[0].checksum_name[0]) {
        /* A store that keeps no upload settings (an S3 cold tier holds
         * them itself): the parts' checksums name the algorithm, and the
         * type is S3's default for it. */
        a = ck_by_hdr(pg.parts[0].checksum_name);
        full = a && strcmp(pg.parts[0].checksum_name, "x-amz-checksum-crc64nvme") == 0;
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
    if (a) {
        rc |= gw_xml_elem(&b, "ChecksumAlgorithm", a->name);
        rc |= gw_xml_elem(&b, "ChecksumType", full ? "FULL_OBJECT" : "COMPOSITE");
    }
    for (size_t i = 0; i < pg.n_parts && !rc; i++) {
        char date[32];
        gw_iso_date(&pg.parts[i].mtime, date, sizeof date);
        rc |= gw_buf_printf(&b, "<Part><PartNumber>%u</PartNumber>", pg.parts[i].part_no);
        rc |= gw_xml_elem(&b, "LastModified", date);
        rc |= gw_buf_printf(&b, "<ETag>&quot;%s&quot;</ETag><Size>%llu</Size>",
                            pg.parts[i].etag, (unsigned long long)pg.parts[i].size);
        const struct ck_algo *pa = ck_by_hdr(pg.parts[i].checksum_name);
        if (pa)
            rc |= gw_xml_elem(&b, pa->elem, pg.parts[i].checksum);
        rc |= gw_buf_puts(&b, "</Part>");
    }
    rc |= gw_buf_puts(&b, "</ListPartsResult>");
    backend_parts_page_free(&pg);
    gw_reply_xml_built(r, &b, rc);
}

void gw_h_list_uploads(struct gw_req *r)
{
    unsigned max;
    if (!gw_req_query_uint(r, "max-uploads", 1000, 1000, &max)) {
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
    struct backend_uploads_req q = { .prefix = prefix ? prefix : "", .delimiter = delim,
                                     .key_marker = km, .upload_id_marker = um,
                                     .max_uploads = max };
    enum backend_status st = backend_mpu_list_uploads(r->backend, r->bucket, &q, &pg);
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
    gw_reply_xml_built(r, &b, rc);
}
