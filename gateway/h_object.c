/* gateway/h_object.c - object operations: GetObject / HeadObject (ranges,
 * conditions, response-* overrides, sendfile from the store), PutObject
 * (streamed; committed only after the body verified), CopyObject and
 * DeleteObject. PutObject and CopyObject take a write condition
 * (If-None-Match: *, If-Match) that the backend checks with the commit. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <microhttpd.h>

#include "encoding.h"
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
            size_t cap = strlen(v) + 1;   /* what is kept is never longer */
            char *enc = malloc(cap);
            int rc = enc ? gw_content_encoding_stored(v, enc, cap) : -1;
            rc = rc == 0 && enc[0] ? obj_meta_add_hdr(m, "content-encoding", enc) : rc;
            free(enc);
            if (rc != 0)
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

long long gw_put_announced_length(const struct gw_req *r)
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
    long long n = gw_put_announced_length(r);
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
    const char *msg = NULL;
    if (gw_collect_put_headers(r, &r->put_meta, &err) != 0 ||
        gw_tagging_collect(r, &r->put_meta, &err, &msg) != 0) {
        gw_req_fail(r, err, msg);
        return;
    }
    struct backend_cond cond;
    if (gw_write_cond(r, &cond, &err) != 0) {
        gw_req_fail(r, err, NULL);
        return;
    }
    /* x-shardgate-write: through makes a write into a write-back bucket
     * answer only once the cold tier has it (and every write before it) */
    const char *wm = gw_req_header(r, "x-shardgate-write");
    if (wm && strcmp(wm, "through") != 0 && strcmp(wm, "back") != 0) {
        gw_req_fail(r, S3E_INVALID_ARGUMENT, "x-shardgate-write must be \"through\" or "
                    "\"back\".");
        return;
    }
    enum backend_status st = backend_put_begin(r->backend, r->bucket, r->key, &r->put);
    if (st != BACKEND_OK) {
        gw_req_fail_backend(r, st);
        return;
    }
    backend_put_set_cond(r->put, &cond);   /* checked by the commit, atomically with it */
    if (wm && strcmp(wm, "through") == 0)
        backend_put_set_write_through(r->put);
}

int gw_body_checksum_add(const struct gw_req *r, struct obj_meta *m)
{
    if (!r->body_res.checksum_name[0])
        return 0;
    return obj_meta_add_hdr(m, r->body_res.checksum_name, r->body_res.checksum_b64);
}

void gw_cache_written(struct gw_req *r)
{
    if (!r->cache)
        return;
    cache_invalidate(r->cache, r->bucket, r->key);
    if (r->conf->cache_on_write)
        cache_warm(r->cache, r->bucket, r->key);
}

void gw_reply_body_stored(struct gw_req *r)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"",
                                                                MHD_RESPMEM_PERSISTENT);
    if (resp) {
        char etag[80];
        snprintf(etag, sizeof etag, "\"%s\"", r->body_res.md5_hex);
        gw_resp_header(r, resp, "ETag", etag);
        if (r->body_res.checksum_name[0])
            gw_resp_header(r, resp, r->body_res.checksum_name, r->body_res.checksum_b64);
    }
    gw_reply(r, 200, resp);
}

void gw_h_object_put_end(struct gw_req *r)
{
    snprintf(r->put_meta.etag, sizeof r->put_meta.etag, "%s", r->body_res.md5_hex);
    if (gw_body_checksum_add(r, &r->put_meta) != 0) {
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
    gw_cache_written(r);
    gw_reply_body_stored(r);
}

/* The stored headers a GET's response-* query parameters replace. */
static const struct {
    const char *header, *query;
} OVERRIDES[] = {
    { "content-type", "response-content-type" },
    { "content-language", "response-content-language" },
    { "expires", "response-expires" },
    { "cache-control", "response-cache-control" },
    { "content-disposition", "response-content-disposition" },
    { "content-encoding", "response-content-encoding" },
};
enum { N_OVERRIDES = sizeof OVERRIDES / sizeof OVERRIDES[0] };

/* Whether stored header `name` is replaced by a response-* parameter. */
static bool overridden(const struct gw_req *r, const char *name)
{
    if (!r->n_query)
        return false;
    for (size_t i = 0; i < N_OVERRIDES; i++)
        if (strcmp(name, OVERRIDES[i].header) == 0)
            return gw_req_query(r, OVERRIDES[i].query) != NULL;
    return false;
}

/* Adds the headers every object response carries. */
static void object_headers(struct gw_req *r, struct MHD_Response *resp, const struct obj_meta *m,
                           bool with_checksum)
{
    char buf[80];
    snprintf(buf, sizeof buf, "\"%s\"", m->etag);
    gw_resp_header(r, resp, "ETag", buf);
    gw_http_date(m->mtime.tv_sec, buf, sizeof buf);
    gw_resp_header(r, resp, "Last-Modified", buf);
    bool have_type = false;
    for (size_t i = 0; i < m->n_hdrs; i++) {
        const char *n = m->hdrs[i].name;
        if (strncmp(n, "x-amz-checksum-", 15) == 0 && !with_checksum)
            continue;
        if (strcmp(n, OBJ_TAGGING_HDR) == 0) {   /* the tags: S3 answers their count */
            size_t tags = obj_tags_query_count(m->hdrs[i].value);
            snprintf(buf, sizeof buf, "%zu", tags);
            if (tags)
                gw_resp_header(r, resp, OBJ_TAGGING_COUNT_HDR, buf);
            continue;
        }
        /* response-* query parameters override what is stored */
        if (overridden(r, n))
            continue;
        have_type |= strcmp(n, "content-type") == 0;
        gw_resp_header(r, resp, n, m->hdrs[i].value);
    }
    for (size_t i = 0; i < N_OVERRIDES && r->n_query; i++) {
        const char *v = gw_req_query(r, OVERRIDES[i].query);
        if (v) {
            gw_resp_header(r, resp, OVERRIDES[i].header, v);
            have_type |= i == 0;
        }
    }
    if (!have_type)
        gw_resp_header(r, resp, "Content-Type", "binary/octet-stream");
    gw_resp_header(r, resp, "Accept-Ranges", "bytes");
}

/* Where a GET's bytes come from: the cache (a complete file, or a fill in
 * progress), or the cold tier directly (no cache, or the cache failed). */
struct body_src {
    struct cache_obj *co;
    struct backend_obj *bo;
};

/* A GET body produced by a content-reader callback: bytes of a fill still
 * in progress (the connection is suspended while they are not there yet),
 * or of a cold-tier object without a file descriptor. If the cache
 * directory fails under a fill (EIO, ENOSPC), the rest is read from the cold
 * tier, provided the object there is still the same version. */
struct body_stream {
    struct MHD_Connection *conn;
    struct cache_obj *co;
    struct cache_waiter w;
    struct backend_obj *bo;
    struct backend *cold;
    char *bucket, *key;
    char etag[72];
    uint64_t off, end;           /* the object bytes [off, end) this response sends */
    unsigned wait_ms;
};

static void stream_suspend(void *arg)
{
    struct body_stream *s = arg;
    MHD_suspend_connection(s->conn);
}

static void stream_resume(void *arg)
{
    struct body_stream *s = arg;
    MHD_resume_connection(s->conn);
}

/* Switches a stream from a failed cache to the cold tier. 0 or -1. */
static int stream_go_direct(struct body_stream *s)
{
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    enum backend_status st = backend_object_open(s->cold, s->bucket, s->key, &m, &s->bo);
    bool same = st == BACKEND_OK && strcmp(m.etag, s->etag) == 0;
    obj_meta_clear(&m);
    if (!same) {
        log_msg(LOG_LVL_WARN, "gw", "%s/%s: the cache failed mid-read and the cold tier %s",
                s->bucket, s->key, st == BACKEND_OK ? "has another version now" :
                backend_status_name(st));
        if (s->bo)
            backend_obj_close(s->bo);
        s->bo = NULL;
        return -1;
    }
    log_msg(LOG_LVL_WARN, "gw", "%s/%s: the cache failed mid-read; reading the rest from the "
            "cold tier", s->bucket, s->key);
    return 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct body_stream *s = cls;
    uint64_t off = s->off + pos;
    if (off >= s->end)
        return MHD_CONTENT_READER_END_OF_STREAM;
    size_t want = s->end - off < max ? (size_t)(s->end - off) : max;
    size_t got = 0;
    if (s->co) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        t.tv_sec += s->wait_ms / 1000 + 1;
        s->w.deadline = t;
        enum cache_status cs = cache_obj_read(s->co, off, buf, want, &got, &s->w);
        switch (cs) {
        case CACHE_OK:
            return (ssize_t)got;
        case CACHE_AGAIN:
            return 0;   /* suspended by the waiter; resumed when bytes land */
        case CACHE_IO:
            cache_obj_close(s->co);
            s->co = NULL;
            if (stream_go_direct(s) != 0)
                return MHD_CONTENT_READER_END_WITH_ERROR;
            break;
        case CACHE_END: case CACHE_BACKEND: case CACHE_TIMEOUT: case CACHE_NOMEM:
            /* the client sees a truncated body with an error, never wrong bytes */
            log_msg(LOG_LVL_WARN, "gw", "%s/%s: read at %llu ended: %s", s->bucket, s->key,
                    (unsigned long long)off, cache_status_name(cs));
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
    enum backend_status st = backend_obj_read(s->bo, off, buf, want, &got);
    if (st != BACKEND_OK || got == 0) {
        log_msg(LOG_LVL_WARN, "gw", "%s/%s: cold read at %llu failed: %s", s->bucket, s->key,
                (unsigned long long)off, backend_status_name(st));
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    return (ssize_t)got;
}

static void stream_free(void *cls)
{
    struct body_stream *s = cls;
    if (s->co) {
        cache_obj_cancel_wait(s->co, &s->w);
        cache_obj_close(s->co);
    }
    if (s->bo)
        backend_obj_close(s->bo);
    free(s->bucket);
    free(s->key);
    free(s);
}

/* Does a complete cache hit go out from its file (by sendfile, or read into
 * memory: hit_copy.c) rather than through a reader callback on io_uring reads
 * (cache.read_path "io_uring")? bench/hitpath.sh measured the two side by side
 * (bench/results/hitpath.md): sendfile needs about half the server CPU of an
 * io_uring read and copy into libmicrohttpd's buffer at 64 MiB, less at
 * 1 MiB, and is level at 4 KiB; the io_uring path stays selectable. */
static bool hit_from_file(const struct gw_req *r)
{
    return r->conf->cache_read_path != CONF_READ_URING;
}

/* HEAD answered from metadata alone: the response has the object's size
 * (Content-Length) but libmicrohttpd never asks a HEAD response for bytes. */
static ssize_t no_body(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)cls;
    (void)pos;
    (void)buf;
    (void)max;
    return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* The response body for [off, off+len) of the object: from memory for a
 * small hit (the memory tier's, or read whole: hit_copy.c), sendfile from a
 * file when there is a complete one (a larger cache hit, or the directory
 * store), otherwise a content reader; for a HEAD (head) nothing is read.
 * Takes what it uses from *src (sets it to NULL). NULL when out of memory or
 * descriptors. */
static struct MHD_Response *object_body(struct gw_req *r, struct body_src *src,
                                        const struct obj_meta *m, uint64_t off, uint64_t len,
                                        bool head)
{
    if (!src->co && !src->bo)
        return MHD_create_response_from_callback(len, 4096, no_body, NULL, NULL);
    if (src->co && cache_obj_complete(src->co)) {
        /* a small hit read whole with its header: the body goes out from
         * memory with the response headers, in one send */
        const uint8_t *body = NULL;
        void *whole = cache_obj_take_body(src->co, &body);
        if (whole) {
            struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback_cls(
                len, (void *)(body + off), cache_body_release, whole);
            if (!resp)
                cache_body_release(whole);
            return resp;
        }
    }
    bool hit = src->co && cache_obj_complete(src->co) && hit_from_file(r);
    if (hit && !head && gw_hit_copy_wanted(r->conf, len)) {
        /* headers and body in one send (hit_copy.c) */
        void *buf = gw_hit_copy_take(r->hit_copy, cache_obj_fd(src->co),
                                     cache_obj_data_offset(src->co) + off, len);
        struct MHD_Response *resp =
            buf ? MHD_create_response_from_buffer_with_free_callback_cls(
                      len, buf, gw_hit_copy_release, buf)
                : NULL;
        if (buf && !resp)
            gw_hit_copy_release(buf);
        if (resp) {
            gw_hit_copy_count(r->hit_copy, true);
            return resp;
        }
    }
    int fd = -1;
    uint64_t base = 0;
    if (hit) {
        fd = cache_obj_fd(src->co);
        base = cache_obj_data_offset(src->co);
        if (!head)
            gw_hit_copy_count(r->hit_copy, false);
    } else if (src->bo) {
        fd = backend_obj_fd(src->bo);
    }
    if (fd >= 0) {
        /* MHD takes the descriptor and sends it with sendfile (page cache,
         * zero copy); for HEAD it sends the headers only. */
        int dfd = dup(fd);
        if (dfd < 0) {
            log_msg(LOG_LVL_ERROR, "gw", "req=%s cannot dup the object's descriptor: %s",
                    r->id, strerror(errno));
            return NULL;
        }
        struct MHD_Response *resp = MHD_create_response_from_fd_at_offset64(len, dfd,
                                                                            base + off);
        if (!resp)
            close(dfd);
        return resp;
    }
    struct body_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->conn = r->conn;
    s->co = src->co;
    s->bo = src->bo;
    s->cold = r->backend;
    s->bucket = strdup(r->bucket);
    s->key = strdup(r->key);
    snprintf(s->etag, sizeof s->etag, "%s", m->etag);
    s->off = off;
    s->end = off + len;
    s->wait_ms = r->conf->cache_wait_ms;
    s->w.suspend = stream_suspend;
    s->w.resume = stream_resume;
    s->w.arg = s;
    struct MHD_Response *resp =
        s->bucket && s->key ? MHD_create_response_from_callback(len, 256 * 1024, stream_read,
                                                                s, stream_free)
                            : NULL;
    if (!resp) {
        free(s->bucket);
        free(s->key);
        free(s);
        return NULL;
    }
    src->co = NULL;
    src->bo = NULL;
    return resp;
}

/* Opens the object through the cache. Returns true when the request goes
 * on with *src and *m filled; false when it was answered or suspended (then
 * this handler runs again on resume), or with *bypass set when the cache
 * cannot serve it and the cold tier should. */
static bool open_through_cache(struct gw_req *r, struct body_src *src, struct obj_meta *m,
                               bool *bypass)
{
    *bypass = false;
    r->waiter.suspend = gw_req_suspend;
    r->waiter.resume = gw_req_resume;
    r->waiter.arg = r;
    r->waiter.deadline = gw_wait_deadline(r);
    bool head = strcmp(r->method, "HEAD") == 0;
    /* A GET that misses on a directory store starts (or joins) the fill, and
     * sends the source file itself by sendfile instead of waiting for the
     * fill and copying its bytes as they land: zero copies on its way out,
     * no hand-off. The fill's reads and this one run side by side and share
     * the source's page cache, so the source is read from its storage once
     * (unless its pages are reclaimed in between); the next GET is a hit
     * (bench/results/fills-ab-dir-source.md). */
    r->waiter.no_wait = !head && r->cold_files;
    enum backend_status bst;
    /* A HEAD uses what is cached or filling, and never fetches a whole
     * object just to answer with its headers. */
    enum cache_status cs =
        head
            ? cache_obj_open_existing(r->cache, r->bucket, r->key, &r->waiter, m, &bst,
                                      &src->co)
            : cache_obj_open(r->cache, r->bucket, r->key, &r->waiter, m, &bst, &src->co);
    switch (cs) {
    case CACHE_OK:
        return true;
    case CACHE_AGAIN:
        return false;
    case CACHE_BACKEND:
        gw_reply_backend_error(r, bst);
        return false;
    case CACHE_END:
        if (r->waiter.no_wait) {   /* a fill is on: this GET is its miss, or joined it */
            r->cache_use = GW_CACHE_MISS;
            r->read = r->waiter.started_fill ? GW_READ_FILL : GW_READ_JOINED;
        }
        *bypass = true;
        return false;
    case CACHE_IO:
        *bypass = true;
        return false;
    case CACHE_TIMEOUT: {
        /* The fill did not get the object's first bytes while this reader
         * waited: an outage behind us, not throttling. */
        char msg[512];
        gw_reply_error(r, S3E_SERVICE_UNAVAILABLE,
                       s3_error_fill_wait_message(r->backend, r->conf->cache_wait_ms, msg,
                                                  sizeof msg), NULL);
        return false;
    }
    case CACHE_NOMEM:
        gw_reply_error(r, S3E_SLOW_DOWN, NULL, NULL);
        return false;
    }
    return false;
}

void gw_h_object_get(struct gw_req *r, bool head)
{
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    struct body_src src = { NULL, NULL };
    bool bypass = true;
    int part = gw_part_find(r);
    if (part < 0)
        return;
    if (r->cache && !open_through_cache(r, &src, &m, &bypass) && !bypass)
        goto out;
    if (part && src.co && (strcmp(m.etag, r->part_rng.etag) != 0 ||
                           m.size != r->part_rng.total)) {
        /* The cache holds another version than the one whose part was found
         * (an immutable bucket's object replaced in the cold tier): the
         * part comes from the cold tier. */
        cache_obj_close(src.co);
        src.co = NULL;
        obj_meta_clear(&m);
        bypass = true;
    }
    if (src.co && r->cache_use != GW_CACHE_MISS)
        r->cache_use = cache_obj_complete(src.co) ? GW_CACHE_HIT : GW_CACHE_MISS;
    if (src.co)   /* for the access log */
        r->read = r->waiter.started_fill ? GW_READ_FILL
                  : r->cache_use == GW_CACHE_HIT ? GW_READ_HIT : GW_READ_JOINED;
    else if (bypass && r->read == GW_READ_NONE)
        r->read = GW_READ_PASS;
    if (bypass && head) {
        /* headers only: a cold HEAD, not a GET whose body is dropped */
        enum backend_status st = backend_object_head(r->backend, r->bucket, r->key, &m);
        if (st != BACKEND_OK) {
            gw_reply_backend_error(r, st);
            goto out;
        }
    } else if (bypass) {
        enum backend_status st = backend_object_open(r->backend, r->bucket, r->key, &m,
                                                     &src.bo);
        if (st != BACKEND_OK) {
            gw_reply_backend_error(r, st);
            goto out;
        }
    }
    enum s3_err err;
    if (gw_conditions_fail(r, false, m.etag, m.mtime.tv_sec, &err)) {
        if (err == S3E_NOT_MODIFIED) {
            struct MHD_Response *resp =
                MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
            if (resp) {
                char buf[80];
                snprintf(buf, sizeof buf, "\"%s\"", m.etag);
                gw_resp_header(r, resp, "ETag", buf);
                gw_http_date(m.mtime.tv_sec, buf, sizeof buf);
                gw_resp_header(r, resp, "Last-Modified", buf);
            }
            gw_reply(r, 304, resp);
        } else {
            gw_reply_error(r, err, NULL, NULL);
        }
        goto out;
    }
    if (part && (strcmp(m.etag, r->part_rng.etag) != 0 || m.size != r->part_rng.total)) {
        /* replaced between finding the part and opening the object */
        gw_reply_error(r, S3E_SLOW_DOWN, "The object changed while its part was being "
                       "looked up; please retry.", NULL);
        goto out;
    }
    struct gw_range rg;
    const char *range_hdr = part ? NULL : gw_req_header(r, "range");
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
            gw_resp_header(r, resp, "Content-Range", cr);
        }
        gw_reply(r, 416, resp);
        goto out;
    }
    uint64_t off = part ? r->part_rng.first : rg.present ? rg.first : 0;
    uint64_t len = part ? r->part_rng.size : rg.present ? rg.last - rg.first + 1 : m.size;

    struct MHD_Response *resp = object_body(r, &src, &m, off, len, head);
    if (!resp) {
        gw_reply_error(r, S3E_SLOW_DOWN, NULL, NULL);
        goto out;
    }
    object_headers(r, resp, &m,
                   !rg.present && !part && gw_req_header(r, "x-amz-checksum-mode") &&
                       strcasecmp(gw_req_header(r, "x-amz-checksum-mode"), "ENABLED") == 0);
    if (rg.present) {
        char cr[96];
        snprintf(cr, sizeof cr, "bytes %llu-%llu/%llu", (unsigned long long)rg.first,
                 (unsigned long long)rg.last, (unsigned long long)m.size);
        gw_resp_header(r, resp, "Content-Range", cr);
    }
    if (part)
        gw_part_headers(r, resp);
    r->resp_bytes = head ? 0 : len;
    gw_reply(r, rg.present || (part && len) ? 206 : 200, resp);
    if (r->cache && !head)   /* ordered prefetch jobs follow the reader */
        cache_note_read(r->cache, r->bucket, r->key);
out:
    if (src.co)
        cache_obj_close(src.co);
    if (src.bo)
        backend_obj_close(src.bo);
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
    if (!dec || !sg_utf8_valid(dec, strlen(dec))) {
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

int gw_copy_source_open(struct gw_req *r, const char **bucket, const char **key,
                        struct obj_meta *src)
{
    if (gw_parse_copy_source(r, bucket, key) != 0)
        return -1;
    enum backend_status st = backend_object_head(r->backend, *bucket, *key, src);
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        return -1;
    }
    enum s3_err err;
    if (gw_conditions_fail(r, true, src->etag, src->mtime.tv_sec, &err)) {
        gw_reply_error(r, err, NULL, NULL);
        return -1;
    }
    return 0;
}

int gw_xml_copy_result(struct gw_buf *b, const char *root, const struct obj_meta *m,
                       bool checksum)
{
    char date[32];
    gw_iso_date(&m->mtime, date, sizeof date);
    int rc = gw_xml_begin(b, root);
    rc |= gw_xml_elem(b, "LastModified", date);
    rc |= gw_buf_printf(b, "<ETag>&quot;%s&quot;</ETag>", m->etag);
    if (checksum)
        rc |= gw_xml_checksum_elems(b, m);
    return rc | gw_buf_printf(b, "</%s>", root);
}

void gw_h_object_copy(struct gw_req *r)
{
    const char *sb, *sk;
    struct obj_meta src, repl, out;
    memset(&src, 0, sizeof src);
    memset(&repl, 0, sizeof repl);
    memset(&out, 0, sizeof out);
    enum s3_err err;
    enum backend_status st;
    struct backend_cond cond;   /* on the destination (AWS, 2024) */
    if (gw_write_cond(r, &cond, &err) != 0) {
        gw_reply_error(r, err, NULL, NULL);
        goto out;
    }
    if (gw_copy_source_open(r, &sb, &sk, &src) != 0)
        goto out;
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
    /* The tags: the source's (COPY, the default) or x-amz-tagging's. */
    const char *tdir = gw_req_header(r, "x-amz-tagging-directive");
    bool treplace = tdir && strcasecmp(tdir, "REPLACE") == 0;
    const char *tagging = NULL, *msg = NULL;
    if (tdir && !treplace && strcasecmp(tdir, "COPY") != 0) {
        gw_reply_error(r, S3E_INVALID_ARGUMENT, "Unknown tagging directive.", NULL);
        goto out;
    }
    if (treplace && gw_tagging_header(r, &tagging, &err, &msg) != 0) {
        gw_reply_error(r, err, msg, NULL);
        goto out;
    }
    st = backend_object_copy_cond(r->backend, sb, sk, r->bucket, r->key,
                                  replace ? &repl : NULL, treplace && !tagging ? "" : tagging,
                                  &cond, &out);
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        goto out;
    }
    gw_cache_written(r);
    struct gw_buf b;
    gw_buf_init(&b, 4096);
    gw_reply_xml_built(r, &b, gw_xml_copy_result(&b, "CopyObjectResult", &out, false));
out:
    obj_meta_clear(&src);
    obj_meta_clear(&repl);
    obj_meta_clear(&out);
}

void gw_h_object_delete(struct gw_req *r)
{
    enum backend_status st = backend_object_delete(r->backend, r->bucket, r->key);
    if (r->cache)
        cache_invalidate(r->cache, r->bucket, r->key);
    if (st == BACKEND_OK || st == BACKEND_NO_KEY)
        gw_reply_body(r, 204, NULL, NULL, 0);
    else
        gw_reply_backend_error(r, st);
}
