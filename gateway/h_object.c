/* gateway/h_object.c - object operations: GetObject / HeadObject (ranges,
 * conditions, response-* overrides, sendfile from the store), PutObject
 * (streamed; committed only after the body verified), CopyObject and
 * DeleteObject. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <microhttpd.h>

#include "gw_int.h"

#define MAX_SINGLE_PUT (5ull * 1024 * 1024 * 1024)   /* S3: 5 GiB per PUT or part */
enum { MAX_USER_META = 2048 };                        /* S3: 2 KB of x-amz-meta-* */

/* Headers S3 stores with an object and returns on GET / HEAD. */
static const char *const stored_headers[] = {
    "content-type", "content-disposition", "cache-control", "expires",
    "content-language", "x-amz-website-redirect-location",
};

int gw_collect_put_headers(struct gw_req *r, struct obj_meta *m, enum s3_err *err)
{
    size_t meta_bytes = 0;
    for (size_t i = 0; i < r->n_hdrs; i++) {
        const char *n = r->hdrs[i].name, *v = r->hdrs[i].value;
        bool keep = strncmp(n, "x-amz-meta-", 11) == 0;
        if (keep)
            meta_bytes += strlen(n) - 11 + strlen(v);
        for (size_t j = 0; !keep && j < sizeof stored_headers / sizeof stored_headers[0]; j++)
            keep = strcmp(n, stored_headers[j]) == 0;
        if (strcmp(n, "content-encoding") == 0) {
            /* aws-chunked describes this request's framing, not the object. */
            char enc[256];
            size_t o = 0;
            const char *p = v;
            while (*p) {
                while (*p == ' ' || *p == ',')
                    p++;
                const char *s = p;
                while (*p && *p != ',')
                    p++;
                const char *e = p;
                while (e > s && e[-1] == ' ')
                    e--;
                size_t len = (size_t)(e - s);
                if (!len || (len == 11 && strncasecmp(s, "aws-chunked", 11) == 0))
                    continue;
                if (o + len + 2 >= sizeof enc)
                    break;
                if (o)
                    enc[o++] = ',';
                memcpy(enc + o, s, len);
                o += len;
            }
            enc[o] = '\0';
            if (o && obj_meta_add_hdr(m, "content-encoding", enc) != 0)
                goto nomem;
            continue;
        }
        if (keep && obj_meta_add_hdr(m, n, v) != 0)
            goto nomem;
    }
    if (meta_bytes > MAX_USER_META) {
        *err = S3E_METADATA_TOO_LARGE;
        return -1;
    }
    return 0;
nomem:
    *err = S3E_SLOW_DOWN;
    return -1;
}

/* The payload length a PUT announces: x-amz-decoded-content-length for
 * aws-chunked bodies, else Content-Length. -1 when neither is given. */
static long long announced_length(const struct gw_req *r)
{
    const char *v = gw_req_header(r, "x-amz-decoded-content-length");
    if (!v)
        v = gw_req_header(r, "content-length");
    if (!v)
        return -1;
    char *end;
    long long n = strtoll(v, &end, 10);
    return *v && !*end && n >= 0 ? n : -1;
}

int gw_check_put_length(struct gw_req *r)
{
    long long n = announced_length(r);
    if (n < 0 && !gw_req_header(r, "transfer-encoding")) {
        gw_req_fail(r, S3E_MISSING_CONTENT_LENGTH, NULL);
        return -1;
    }
    if (n > (long long)MAX_SINGLE_PUT) {
        gw_req_fail(r, S3E_ENTITY_TOO_LARGE, NULL);
        return -1;
    }
    return 0;
}

void gw_h_object_put_begin(struct gw_req *r)
{
    enum s3_err err;
    if (gw_check_put_length(r) != 0)
        return;
    if (gw_collect_put_headers(r, &r->put_meta, &err) != 0) {
        gw_req_fail(r, err, NULL);
        return;
    }
    enum backend_status st = backend_put_begin(r->backend, r->bucket, r->key, &r->put);
    if (st != BACKEND_OK)
        gw_req_fail(r, s3_error_from_backend(st), NULL);
}

/* Adds the checksum the body verifier computed to what is stored. */
static int add_checksum(struct gw_req *r, struct obj_meta *m)
{
    if (!r->body_res.checksum_name[0])
        return 0;
    return obj_meta_add_hdr(m, r->body_res.checksum_name, r->body_res.checksum_b64);
}

void gw_h_object_put_end(struct gw_req *r)
{
    snprintf(r->put_meta.etag, sizeof r->put_meta.etag, "%s", r->body_res.md5_hex);
    if (add_checksum(r, &r->put_meta) != 0) {
        gw_reply_error(r, S3E_SLOW_DOWN, NULL, NULL);
        return;
    }
    struct obj_meta out;
    memset(&out, 0, sizeof out);
    struct backend_put *p = r->put;
    r->put = NULL;
    enum backend_status st = backend_put_commit(p, &r->put_meta, &out);
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

/* Adds the headers every object response carries. */
static void object_headers(struct gw_req *r, struct MHD_Response *resp, const struct obj_meta *m,
                           bool with_checksum)
{
    char buf[80];
    snprintf(buf, sizeof buf, "\"%s\"", m->etag);
    MHD_add_response_header(resp, "ETag", buf);
    gw_http_date(m->mtime.tv_sec, buf, sizeof buf);
    MHD_add_response_header(resp, "Last-Modified", buf);
    bool have_type = false;
    for (size_t i = 0; i < m->n_hdrs; i++) {
        const char *n = m->hdrs[i].name;
        if (strncmp(n, "x-amz-checksum-", 15) == 0 && !with_checksum)
            continue;
        /* response-* query parameters override what is stored */
        if (strncmp(n, "content-", 8) == 0 || strcmp(n, "cache-control") == 0 ||
            strcmp(n, "expires") == 0) {
            char q[64];
            snprintf(q, sizeof q, "response-%s", n);
            if (gw_req_query(r, q))
                continue;
        }
        have_type |= strcmp(n, "content-type") == 0;
        MHD_add_response_header(resp, n, m->hdrs[i].value);
    }
    static const char *const overrides[] = {
        "content-type", "content-language", "expires", "cache-control",
        "content-disposition", "content-encoding",
    };
    for (size_t i = 0; i < sizeof overrides / sizeof overrides[0]; i++) {
        char q[64];
        snprintf(q, sizeof q, "response-%s", overrides[i]);
        const char *v = gw_req_query(r, q);
        if (v) {
            MHD_add_response_header(resp, overrides[i], v);
            have_type |= i == 0;
        }
    }
    if (!have_type)
        MHD_add_response_header(resp, "Content-Type", "binary/octet-stream");
    MHD_add_response_header(resp, "Accept-Ranges", "bytes");
}

/* A GET body read through backend_obj_read(), for stores without a file
 * descriptor to sendfile from. */
struct obj_stream {
    struct backend_obj *o;
    uint64_t off, end;   /* the object bytes [off, end) this response sends */
};

static ssize_t obj_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct obj_stream *s = cls;
    uint64_t off = s->off + pos;
    if (off >= s->end)
        return MHD_CONTENT_READER_END_OF_STREAM;
    size_t want = s->end - off < max ? (size_t)(s->end - off) : max;
    size_t got = 0;
    enum backend_status st = backend_obj_read(s->o, off, buf, want, &got);
    if (st != BACKEND_OK || got == 0) {
        /* The client sees a truncated body, never wrong bytes. */
        log_msg(LOG_LVL_WARN, "gw", "object read at %llu failed: %s",
                (unsigned long long)off, backend_status_name(st));
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    return (ssize_t)got;
}

static void obj_stream_free(void *cls)
{
    struct obj_stream *s = cls;
    backend_obj_close(s->o);
    free(s);
}

/* The response body for [off, off+len) of o: sendfile from the store's
 * descriptor when it has one, else a reader. Takes *o (sets it to NULL) in
 * the reader case. NULL when out of memory or descriptors. */
static struct MHD_Response *object_body(struct gw_req *r, struct backend_obj **o, uint64_t off,
                                        uint64_t len)
{
    int fd = backend_obj_fd(*o);
    if (fd >= 0) {
        /* MHD takes the descriptor and sends it with sendfile (page cache,
         * zero copy); for HEAD it sends the headers only. */
        int dfd = dup(fd);
        if (dfd < 0) {
            log_msg(LOG_LVL_ERROR, "gw", "req=%s cannot dup the object's descriptor: %s",
                    r->id, strerror(errno));
            return NULL;
        }
        struct MHD_Response *resp = MHD_create_response_from_fd_at_offset64(len, dfd, off);
        if (!resp)
            close(dfd);
        return resp;
    }
    struct obj_stream *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    s->o = *o;
    s->off = off;
    s->end = off + len;
    struct MHD_Response *resp = MHD_create_response_from_callback(len, 256 * 1024,
                                                                  obj_stream_read, s,
                                                                  obj_stream_free);
    if (!resp) {
        free(s);
        return NULL;
    }
    *o = NULL;
    return resp;
}

void gw_h_object_get(struct gw_req *r, bool head)
{
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    struct backend_obj *o = NULL;
    enum backend_status st = backend_object_open(r->backend, r->bucket, r->key, &m, &o);
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        return;
    }
    enum s3_err err;
    if (gw_conditions_fail(r, "", m.etag, m.mtime.tv_sec, &err)) {
        if (err == S3E_NOT_MODIFIED) {
            struct MHD_Response *resp =
                MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
            if (resp) {
                char buf[80];
                snprintf(buf, sizeof buf, "\"%s\"", m.etag);
                MHD_add_response_header(resp, "ETag", buf);
                gw_http_date(m.mtime.tv_sec, buf, sizeof buf);
                MHD_add_response_header(resp, "Last-Modified", buf);
            }
            gw_reply(r, 304, resp);
        } else {
            gw_reply_error(r, err, NULL, NULL);
        }
        goto out;
    }
    struct gw_range rg;
    const char *range_hdr = gw_req_header(r, "range");
    enum gw_range_result rr = gw_range_parse(range_hdr, m.size, &rg);
    if (rr == GW_RANGE_UNSATISFIABLE) {
        struct gw_buf x;
        gw_buf_init(&x, 4096);
        int rc = gw_xml_elem(&x, "RangeRequested", range_hdr);
        rc |= gw_buf_printf(&x, "<ActualObjectSize>%llu</ActualObjectSize>",
                            (unsigned long long)m.size);
        struct MHD_Response *resp = gw_error_response(r, S3E_INVALID_RANGE, NULL,
                                                      rc ? NULL : x.data);
        gw_buf_free(&x);
        if (resp) {
            char cr[48];
            snprintf(cr, sizeof cr, "bytes */%llu", (unsigned long long)m.size);
            MHD_add_response_header(resp, "Content-Range", cr);
        }
        gw_reply(r, 416, resp);
        goto out;
    }
    uint64_t off = rg.present ? rg.first : 0;
    uint64_t len = rg.present ? rg.last - rg.first + 1 : m.size;

    struct MHD_Response *resp = object_body(r, &o, off, len);
    if (!resp) {
        gw_reply_error(r, S3E_SLOW_DOWN, NULL, NULL);
        goto out;
    }
    object_headers(r, resp, &m,
                   !rg.present && gw_req_header(r, "x-amz-checksum-mode") &&
                       strcasecmp(gw_req_header(r, "x-amz-checksum-mode"), "ENABLED") == 0);
    if (rg.present) {
        char cr[96];
        snprintf(cr, sizeof cr, "bytes %llu-%llu/%llu", (unsigned long long)rg.first,
                 (unsigned long long)rg.last, (unsigned long long)m.size);
        MHD_add_response_header(resp, "Content-Range", cr);
    }
    r->resp_bytes = head ? 0 : len;
    gw_reply(r, rg.present ? 206 : 200, resp);
out:
    if (o)
        backend_obj_close(o);
    obj_meta_clear(&m);
}

int gw_parse_copy_source(struct gw_req *r, const char **bucket, const char **key)
{
    const char *src = gw_req_header(r, "x-amz-copy-source");
    if (!src) {
        gw_reply_error(r, S3E_INVALID_ARGUMENT, "Copy Source must mention the source bucket "
                       "and key: sourcebucket/sourcekey", NULL);
        return -1;
    }
    const char *q = strchr(src, '?');
    size_t n = q ? (size_t)(q - src) : strlen(src);
    if (q && strncmp(q, "?versionId=", 11) == 0 && strcmp(q + 11, "null") != 0) {
        gw_reply_error(r, S3E_NOT_IMPLEMENTED, "shardgate stores no object versions.", NULL);
        return -1;
    }
    char *dec = gw_pct_decode(&r->arena, src, n, false);
    if (!dec) {
        gw_reply_error(r, S3E_INVALID_ARGUMENT, "Invalid copy source encoding", NULL);
        return -1;
    }
    if (*dec == '/')
        dec++;
    char *slash = strchr(dec, '/');
    if (!slash || slash == dec || !slash[1]) {
        gw_reply_error(r, S3E_INVALID_ARGUMENT, "Copy Source must mention the source bucket "
                       "and key: sourcebucket/sourcekey", NULL);
        return -1;
    }
    *slash = '\0';
    *bucket = dec;
    *key = slash + 1;
    if (!auth_allowed(r->authz, r->auth, dec, AUTH_PERM_READ)) {
        gw_reply_error(r, S3E_ACCESS_DENIED, NULL, NULL);
        return -1;
    }
    return 0;
}

void gw_h_object_copy(struct gw_req *r)
{
    const char *sb, *sk;
    if (gw_parse_copy_source(r, &sb, &sk) != 0)
        return;
    struct obj_meta src, repl, out;
    memset(&src, 0, sizeof src);
    memset(&repl, 0, sizeof repl);
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
    if (src.size > MAX_SINGLE_PUT) {
        gw_reply_error(r, S3E_INVALID_REQUEST, "The specified copy source is larger than the "
                       "maximum allowable size for a copy source: 5368709120", NULL);
        goto out;
    }
    const char *dir = gw_req_header(r, "x-amz-metadata-directive");
    bool replace = dir && strcasecmp(dir, "REPLACE") == 0;
    if (dir && !replace && strcasecmp(dir, "COPY") != 0) {
        gw_reply_error(r, S3E_INVALID_ARGUMENT, "Unknown metadata directive.", NULL);
        goto out;
    }
    if (!replace && strcmp(sb, r->bucket) == 0 && strcmp(sk, r->key) == 0) {
        gw_reply_error(r, S3E_INVALID_REQUEST, "This copy request is illegal because it is "
                       "trying to copy an object to itself without changing the object's "
                       "metadata, storage class, website redirect location or encryption "
                       "attributes.", NULL);
        goto out;
    }
    if (replace && gw_collect_put_headers(r, &repl, &err) != 0) {
        gw_reply_error(r, err, NULL, NULL);
        goto out;
    }
    st = backend_object_copy(r->backend, sb, sk, r->bucket, r->key, replace ? &repl : NULL,
                             &out);
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        goto out;
    }
    struct gw_buf b;
    gw_buf_init(&b, 4096);
    char date[32];
    gw_iso_date(&out.mtime, date, sizeof date);
    int rc = gw_xml_begin(&b, "CopyObjectResult");
    rc |= gw_xml_elem(&b, "LastModified", date);
    rc |= gw_buf_printf(&b, "<ETag>&quot;%s&quot;</ETag></CopyObjectResult>", out.etag);
    if (rc) {
        gw_buf_free(&b);
        gw_reply_error(r, S3E_INTERNAL, NULL, NULL);
    } else {
        gw_reply_xml_buf(r, 200, &b);
    }
out:
    obj_meta_clear(&src);
    obj_meta_clear(&repl);
    obj_meta_clear(&out);
}

void gw_h_object_delete(struct gw_req *r)
{
    enum backend_status st = backend_object_delete(r->backend, r->bucket, r->key);
    if (st == BACKEND_OK || st == BACKEND_NO_KEY)
        gw_reply_body(r, 204, NULL, NULL, 0);
    else
        gw_reply_backend_error(r, st);
}
