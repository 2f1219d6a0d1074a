/* gateway/server.c - the libmicrohttpd side of the gateway: daemon set-up and
 * shutdown, connection limits and deadlines, the request record's life (raw
 * URI capture, headers, framing, auth, body streaming), responses and the
 * access log. What each S3 operation does is in the h_*.c files. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <microhttpd.h>

#include "deadline.h"
#include "gw_int.h"

struct gw {
    const struct conf *conf;
    struct backend *backend;
    bool cold_files;             /* backend_info's kind is "posix": once, at start */
    struct auth *auth;
    struct cache *cache;
    struct gw_hit_copy *hit_copy;   /* hits sent from memory (hit_copy.c) */
    /* One libmicrohttpd daemon per HTTP thread, each fed its connections
     * by g->accept (accept.c) */
    unsigned n_http;
    struct gw_http *http;
    struct MHD_Daemon **daemons;
    struct gw_accept *accept;
    struct gw_guard *guard;      /* request-head deadlines */
    struct gw_intake_pool *intake;   /* threads that take request bodies in */
    unsigned body_threads;
    atomic_uint_fast64_t body_bytes_intake, body_bytes_inline;
    unsigned conn_limit, per_client;
    atomic_uint_fast64_t closed_body_rate;   /* bodies slower than min_body_rate */
    atomic_uint active;          /* requests between URI and completion */
    atomic_uint_fast64_t next_id;
    uint32_t id_salt;            /* makes ids unique across restarts */
};

/* An HTTP thread's daemon's connection callbacks get this. */
struct gw_http {
    struct gw *g;
    unsigned idx;                /* in g->daemons */
};

enum {
    MAX_HEADERS = 256,           /* S3 has no hard cap; ours bounds the array */
    /* MHD's per-connection pool (headers + read buffer). libmicrohttpd
     * 0.9.75 zeroes the unused pool after every keep-alive request, so its
     * size is paid per request: 128 KiB cost 1.4x in 4 KiB hits/s against
     * 32 KiB, and 128 KiB of RSS per idle connection
     * (bench/results/ab-conn-memory.md). 32 KiB still holds the 16 KiB
     * header limit. */
    CONN_MEMORY = 32 * 1024,
    /* Without a configured connections.max: 32 KiB of pool each, 64 Ki
     * connections are 2 GiB at worst, more than any real client fleet. */
    CONN_DEFAULT_MAX = 65536,
    /* Descriptors kept from the connections' share: cache files, the index,
     * cold-tier sockets, logs (plus four per fill worker). */
    FD_RESERVE = 256,
};

/* ---- responses ---- */

void gw_reply(struct gw_req *r, unsigned status, struct MHD_Response *resp)
{
    if (!resp) {
        log_msg(LOG_LVL_ERROR, "gw", "req=%s cannot create a response", r->id);
        r->state = GW_REQ_DONE;
        r->status = 500;
        return;
    }
    if (r->hdr_failed && status < 500) {   /* logged where it failed */
        MHD_destroy_response(resp);
        gw_reply(r, 500, gw_error_response(r, S3E_INTERNAL, NULL, NULL));
        return;
    }
    gw_resp_header(r, resp, "x-amz-request-id", r->id);
    gw_resp_header(r, resp, "x-amz-id-2", r->id);
    gw_resp_header(r, resp, "Server", "shardgate");
    if (r->close_conn)
        gw_resp_header(r, resp, "Connection", "close");
    if (MHD_queue_response(r->conn, status, resp) != MHD_YES)
        log_msg(LOG_LVL_WARN, "gw", "req=%s cannot queue the response", r->id);
    else   /* a client may pause reading longer than it may stay silent */
        MHD_set_connection_option(r->conn, MHD_CONNECTION_OPTION_TIMEOUT,
                                  r->conf->conn_send_timeout_s);
    MHD_destroy_response(resp);
    r->state = GW_REQ_DONE;
    r->status = status;
}

void gw_reply_body(struct gw_req *r, unsigned status, const char *content_type, char *body,
                   size_t len)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, body ? body : (char *)"",
                                        body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp)
        free(body);
    if (resp && content_type)
        gw_resp_header(r, resp, "Content-Type", content_type);
    r->resp_bytes = len;
    gw_reply(r, status, resp);
}

void gw_reply_xml_buf(struct gw_req *r, unsigned status, struct gw_buf *xml)
{
    size_t len;
    char *body = gw_buf_take(xml, &len);
    gw_reply_body(r, status, "application/xml", body, len);
}

struct MHD_Response *gw_xml_response(struct gw_req *r, struct gw_buf *xml)
{
    size_t len;
    char *body = gw_buf_take(xml, &len);
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body,
                                                                MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return NULL;
    }
    gw_resp_header(r, resp, "Content-Type", "application/xml");
    r->resp_bytes = len;
    return resp;
}

struct MHD_Response *gw_error_response(struct gw_req *r, enum s3_err e, const char *msg,
                                       const char *extra_xml)
{
    const struct s3_error *se = s3_error_of(r, e);
    if (e == S3E_NOT_MODIFIED)   /* 304 carries no body */
        return MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    struct gw_buf b;
    gw_buf_init(&b, 64 * 1024);
    int rc = gw_buf_puts(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error>");
    rc |= gw_xml_elem(&b, "Code", se->code);
    rc |= gw_xml_elem(&b, "Message", msg ? msg : se->message);
    if (r->key)
        rc |= gw_xml_elem(&b, "Key", r->key);
    if (r->bucket)
        rc |= gw_xml_elem(&b, "BucketName", r->bucket);
    if (extra_xml)
        rc |= gw_buf_puts(&b, extra_xml);
    rc |= gw_xml_elem(&b, "Resource", r->resource ? r->resource : "/");
    rc |= gw_xml_elem(&b, "RequestId", r->id);
    rc |= gw_xml_elem(&b, "HostId", r->id);
    rc |= gw_buf_puts(&b, "</Error>");
    if (rc) {
        gw_buf_free(&b);
        return MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    }
    if (se->http_status >= 500)
        log_msg(LOG_LVL_WARN, "gw", "req=%s %s bucket=%s key=%s: %s %s", r->id,
                gw_op_name(r->op), r->bucket ? r->bucket : "-", r->key ? r->key : "-",
                se->code, msg ? msg : "");
    return gw_xml_response(r, &b);
}

void gw_reply_error(struct gw_req *r, enum s3_err e, const char *msg, const char *extra_xml)
{
    gw_reply(r, s3_error_of(r, e)->http_status, gw_error_response(r, e, msg, extra_xml));
}

void gw_reply_backend_error(struct gw_req *r, enum backend_status st)
{
    const char *msg = NULL;
    char buf[512];
    switch (st) {
    case BACKEND_UNAVAILABLE:
    case BACKEND_TIMEOUT:
        msg = s3_error_cold_message(r->backend, st, buf, sizeof buf);
        break;
    case BACKEND_BAD_KEY:
        msg = "The object key cannot be stored: it is empty, contains a NUL byte, a '.' or "
              "'..' path segment, or a segment starting with the reserved '.sg~'.";
        break;
    case BACKEND_KEY_TOO_LONG:
        msg = "Your key is too long: at most 1024 bytes, and at most 255 bytes between two "
              "'/' on shardgate's directory store.";
        break;
    case BACKEND_DENIED: {
        /* The directory store's own refusal; a cold tier's AccessDenied is
         * about the gateway's credentials there. */
        struct backend_info bi;
        backend_info_get(r->backend, &bi);
        msg = bi.location ? "Access Denied: the cold tier refused the gateway's request (its "
                            "credentials for the cold tier, or the tier's policy)."
                          : "Access Denied: the path crosses a symbolic link or leaves the "
                            "store.";
        break;
    }
    case BACKEND_COLD_ERROR:
        /* The cold tier's own code, status and message travel in
         * r->cold_err (s3_error_of reads it for S3E_COLD_PASSED); without
         * it (the call ran on another thread) the table's InternalError. */
        (void)gw_req_take_cold_error(r);
        break;
    case BACKEND_META_TOO_LARGE:
        msg = "The metadata and tags are more than this store's file system keeps with one "
              "file (ext4: about 4 KiB of extended attributes for all of them).";
        break;
    case BACKEND_PARTS_UNKNOWN:
        msg = "The part boundaries of this multipart object were not kept (completed before "
              "shardgate kept them, or too many parts of different sizes): read it with a "
              "Range instead.";
        break;
    default:
        break;
    }
    gw_reply_error(r, s3_error_from_backend(st), msg, NULL);
}

/* ---- the request's life ---- */

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    struct gw *g = cls;
    /* The request line is in: the headers have header_timeout_s from now. */
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct gw_conn *gc = ci ? ci->socket_context : NULL;
    gw_conn_arm(gc, GW_DEADLINE_HEADER);
    struct gw_req *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->gw = g;
    r->gconn = gc;
    r->conf = g->conf;
    r->backend = g->backend;
    r->cold_files = g->cold_files;
    r->authz = g->auth;
    r->cache = g->cache;
    r->hit_copy = g->hit_copy;
    clock_gettime(CLOCK_MONOTONIC, &r->t0);
    uint64_t n = atomic_fetch_add(&g->next_id, 1);
    snprintf(r->id, sizeof r->id, "%08X%08X", g->id_salt, (unsigned)(n & 0xFFFFFFFFu));
    r->raw_path = gw_arena_strdup(&r->arena, uri);   /* the whole URI until parsed */
    atomic_fetch_add(&g->active, 1);
    return r;
}

struct hdr_collect {
    struct gw_req *r;
    size_t cap;
    bool overflow;
};

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value)
{
    (void)kind;
    struct hdr_collect *hc = cls;
    struct gw_req *r = hc->r;
    if (r->n_hdrs == hc->cap) {
        hc->overflow = true;
        return MHD_NO;
    }
    size_t klen = strlen(key);
    char *name = gw_arena_strndup(&r->arena, key, klen);
    if (!name) {
        hc->overflow = true;
        return MHD_NO;
    }
    for (char *p = name; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    r->hdrs[r->n_hdrs].name = name;
    r->hdrs[r->n_hdrs].value = value ? value : "";
    r->n_hdrs++;
    r->hdr_bytes += klen + (value ? strlen(value) : 0) + 4;
    return MHD_YES;
}

/* Does the request announce a body? (Content-Length > 0 or chunked.) */
static bool has_body(const struct gw_req *r)
{
    const char *cl = gw_req_header(r, "content-length");
    const char *te = gw_req_header(r, "transfer-encoding");
    return (cl && strcmp(cl, "0") != 0) || te;
}

void gw_req_fail(struct gw_req *r, enum s3_err e, const char *msg)
{
    if (r->body_failed)
        return;
    r->body_failed = true;
    r->body_err = e;
    r->body_err_msg = msg;
}

void gw_req_fail_xml(struct gw_req *r, enum s3_err e, const char *msg, const char *xml)
{
    if (r->body_failed)
        return;
    gw_req_fail(r, e, msg);
    r->body_err_xml = xml ? gw_arena_strdup(&r->arena, xml) : NULL;
}

static int body_out(void *arg, const uint8_t *buf, size_t len)
{
    struct gw_req *r = arg;
    switch (r->body_kind) {
    case GW_BODY_STREAM: {
        enum backend_status st = backend_put_write(r->put, buf, len);
        if (st != BACKEND_OK) {
            gw_req_fail_backend(r, st);
            return -1;
        }
        return 0;
    }
    case GW_BODY_XML:
        if (gw_buf_append(&r->xml_in, buf, len) != 0) {
            gw_req_fail(r, S3E_INVALID_REQUEST, "The request body is larger than allowed.");
            return -1;
        }
        return 0;
    case GW_BODY_NONE:
        return 0;
    }
    return 0;
}

/* One piece of a body: verified, digested and handed to its put, on the
 * connection's thread or on an intake thread (gateway/intake.c). */
static void take_in(struct gw_req *r, const uint8_t *buf, size_t len)
{
    enum auth_status as = auth_body_feed(r->body, buf, len, body_out, r);
    if (as != AUTH_OK && as != AUTH_ABORTED)
        gw_req_fail(r, s3_error_from_auth(as), s3_error_auth_message(as));
}

/* First call: the request line and headers are in. */
static void start(struct gw_req *r, struct MHD_Connection *conn, const char *method)
{
    struct gw *g = r->gw;
    const char *raw_uri = r->raw_path;
    enum s3_err err;
    const char *msg;

    r->conn = conn;
    r->method = gw_arena_strdup(&r->arena, method);
    r->raw_path = NULL;
    r->hdrs = gw_arena_alloc(&r->arena, MAX_HEADERS * sizeof *r->hdrs);
    if (!r->method || !r->hdrs) {
        gw_req_fail(r, S3E_SLOW_DOWN, NULL);
        return;
    }
    struct hdr_collect hc = { r, MAX_HEADERS, false };
    MHD_get_connection_values(conn, MHD_HEADER_KIND, collect_header, &hc);
    if (hc.overflow || r->hdr_bytes > g->conf->max_header_bytes) {
        r->close_conn = true;   /* the framing headers may be among those not read */
        gw_req_fail(r, S3E_REQUEST_HEADER_TOO_LARGE, NULL);
        return;
    }
    /* Before anything else, and before a body byte is read: a body whose
     * length two parsers read differently is a smuggled request. */
    const char *ferr = gw_framing_error(r->hdrs, r->n_hdrs);
    if (ferr) {
        log_msg(LOG_LVL_INFO, "gw", "req=%s ambiguous framing: %s", r->id, ferr);
        r->close_conn = true;
        gw_req_fail(r, S3E_INVALID_REQUEST, ferr);
        return;
    }
    if (gw_req_parse(r, raw_uri, &err, &msg) != 0) {
        gw_req_fail(r, err, msg);
        return;
    }
    if (gw_op_is_probe(r->op)) {
        gw_h_probe_begin(r);   /* no auth: nothing to verify, no body */
        return;
    }
    if (r->op == GW_OP_CORS_PREFLIGHT) {
        gw_h_cors_preflight(r);
        return;
    }

    struct auth_req ar = { r->method, r->raw_path, r->raw_query, r->hdrs, r->n_hdrs };
    enum auth_status as = auth_verify(g->auth, &ar, &r->auth);
    if (as != AUTH_OK) {
        log_msg(LOG_LVL_INFO, "auth", "req=%s %s %s denied: %s", r->id, r->method,
                r->resource, auth_status_name(as));
        gw_req_fail(r, s3_error_from_auth(as), s3_error_auth_message(as));
        return;
    }
    /* Permission is decided in auth/ alone, before any store is touched, so
     * that a denied request learns nothing (not even BucketNotEmpty). */
    enum auth_perm need;
    bool service = r->op == GW_OP_LIST_BUCKETS || r->op == GW_OP_METRICS;
    bool open = r->op == GW_OP_METRICS && g->conf->metrics_public;
    if (!open && gw_op_permission(r->op, &need) &&
        !auth_allowed(g->auth, r->auth, service ? NULL : r->bucket, need)) {
        gw_req_fail(r, S3E_ACCESS_DENIED, NULL);
        return;
    }
    if (gw_req_check(r, &err, &msg) != 0) {
        gw_req_fail(r, err, msg);
        return;
    }
    as = auth_body_begin(r->auth, &ar, &r->body);
    if (as != AUTH_OK) {
        gw_req_fail(r, s3_error_from_auth(as), s3_error_auth_message(as));
        return;
    }
    if (r->op == GW_OP_UNKNOWN) {
        gw_req_fail(r, S3E_METHOD_NOT_ALLOWED, NULL);
        return;
    }
    if (r->op == GW_OP_NOT_IMPLEMENTED) {
        gw_req_fail(r, S3E_NOT_IMPLEMENTED, NULL);
        return;
    }
    if (r->body_kind == GW_BODY_XML)
        gw_buf_init(&r->xml_in, r->op == GW_OP_PREFETCH_SUBMIT ? GW_HINT_MAX_BODY
                                                               : g->conf->max_xml_body);
    gw_handle_begin(r);
}

/* Last call: the whole body was received. */
static void finish(struct gw_req *r)
{
    if (!r->body_failed && gw_op_is_probe(r->op)) {
        gw_h_probe(r);
        return;
    }
    if (!r->body_failed) {
        enum auth_status as = auth_body_finish(r->body, &r->body_res);
        if (as != AUTH_OK) {
            log_msg(LOG_LVL_INFO, "auth", "req=%s %s %s body rejected: %s", r->id, r->method,
                    r->resource, auth_status_name(as));
            gw_req_fail(r, s3_error_from_auth(as), s3_error_auth_message(as));
        }
    }
    if (r->body_failed) {
        if (r->put) {
            backend_put_abort(r->put);
            r->put = NULL;
        }
        gw_reply_error(r, r->body_err, r->body_err_msg, r->body_err_xml);
        return;
    }
    gw_handle_end(r);
}

/* A body trickled in to hold a slot: after header_timeout_s of grace, the
 * body must have averaged conn_min_body_rate bytes/s. Checked as bytes
 * arrive; a body that stops altogether meets libmicrohttpd's idle timeout. */
static bool body_too_slow(struct gw_req *r)
{
    unsigned rate = r->conf->conn_min_body_rate;
    if (!rate)
        return false;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double el = (double)(now.tv_sec - r->t_body.tv_sec) +
                (double)(now.tv_nsec - r->t_body.tv_nsec) / 1e9;
    double grace = (double)r->conf->conn_header_timeout_s;
    if (el <= grace || (double)r->body_bytes >= (el - grace) * rate)
        return false;
    gw_intake_quiesce(r);   /* the put below is the connection thread's again */
    log_msg(LOG_LVL_INFO, "gw", "req=%s body too slow: %llu bytes in %.0f s (at least %u "
            "bytes/s after %u s, connections.min_body_rate): closing the connection", r->id,
            (unsigned long long)r->body_bytes, el, rate, r->conf->conn_header_timeout_s);
    atomic_fetch_add(&r->gw->closed_body_rate, 1);
    if (r->put) {
        backend_put_abort(r->put);
        r->put = NULL;
    }
    r->state = GW_REQ_DONE;   /* no response: the access line says aborted */
    return true;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version,
                                 const char *upload_data, size_t *upload_data_size,
                                 void **con_cls)
{
    (void)cls;
    (void)url;
    (void)version;
    struct gw_req *r = *con_cls;
    if (!r)
        return MHD_NO;   /* out of memory in on_uri: drop the connection */

    switch (r->state) {
    case GW_REQ_NEW:
        /* The head is complete: no head deadline until the next request. */
        gw_conn_disarm(r->gconn);
        clock_gettime(CLOCK_MONOTONIC, &r->t_body);
        start(r, conn, method);
        if (r->state == GW_REQ_DONE)
            return MHD_YES;
        r->state = GW_REQ_BODY;
        /* An error known before a body arrives is answered now, so the client
         * does not send gigabytes for nothing (MHD then closes the
         * connection). Without a body we answer on the next call: a response
         * queued on the first call loses keep-alive. Ambiguous framing is
         * answered now whatever the body: its bytes must never be read as
         * a next request. */
        if (r->body_failed && (has_body(r) || r->close_conn))
            gw_reply_error(r, r->body_err, r->body_err_msg, r->body_err_xml);
        return MHD_YES;
    case GW_REQ_BODY:
        if (*upload_data_size) {
            size_t n = *upload_data_size;
            if (!r->intake_decided) {
                r->intake_decided = true;
                if (r->body_kind == GW_BODY_STREAM && r->put && !r->body_failed)
                    gw_intake_begin(r->gw->intake, r, gw_put_announced_length(r));
            }
            if (r->intake) {
                if (body_too_slow(r))
                    return MHD_NO;
                /* What is not taken stays with libmicrohttpd, the
                 * connection suspended until an intake thread has room. */
                size_t took = gw_intake_take(r, upload_data, n);
                *upload_data_size = n - took;
                r->body_bytes += took;
                atomic_fetch_add(&r->gw->body_bytes_intake, took);
                return MHD_YES;
            }
            *upload_data_size = 0;
            r->body_bytes += n;
            if (r->body_kind == GW_BODY_STREAM)
                atomic_fetch_add(&r->gw->body_bytes_inline, n);
            if (body_too_slow(r))
                return MHD_NO;   /* closes the connection */
            if (r->body_failed)
                return MHD_YES;   /* drop the rest; the error goes out at the end */
            take_in(r, (const uint8_t *)upload_data, n);
            return MHD_YES;
        }
        if (r->intake && !gw_intake_drained(r))
            return MHD_YES;   /* resumed, and called again, once every byte is in */
        finish(r);
        return MHD_YES;
    case GW_REQ_WAIT:
        /* resumed: what the handler waited for is there (or failed) */
        *upload_data_size = 0;
        r->state = GW_REQ_BODY;
        gw_handle_end(r);
        return MHD_YES;
    case GW_REQ_DONE:
        *upload_data_size = 0;
        return MHD_YES;
    }
    return MHD_NO;
}

void gw_req_suspend(void *arg)
{
    struct gw_req *r = arg;
    r->state = GW_REQ_WAIT;
    r->cache_use = GW_CACHE_MISS;   /* it waited for a fill */
    MHD_suspend_connection(r->conn);
}

void gw_req_suspend_intake(struct gw_req *r)
{
    MHD_suspend_connection(r->conn);
}

void gw_req_resume(void *arg)
{
    struct gw_req *r = arg;
    MHD_resume_connection(r->conn);
}

struct timespec gw_wait_deadline(const struct gw_req *r)
{
    return sg_deadline(CLOCK_MONOTONIC, r->conf->cache_wait_ms ? r->conf->cache_wait_ms : 30000);
}

static const char *read_name(enum gw_read rd)
{
    switch (rd) {
    case GW_READ_NONE: return NULL;
    case GW_READ_HIT: return "hit";
    case GW_READ_FILL: return "fill";
    case GW_READ_JOINED: return "miss-joined";
    case GW_READ_PASS: return "pass-through";
    }
    return NULL;
}

/* One access line per request. Everything a client sent (method, bucket,
 * key) goes through log_kv, which escapes it: a key cannot forge a line. */
static void access_log(const struct gw_req *r, struct MHD_Connection *conn, double ms,
                       bool aborted)
{
    char client[INET6_ADDRSTRLEN] = "";
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, client,
                  sizeof client);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
                  client, sizeof client);
    const struct conf_user *u = r->auth ? auth_ctx_user(r->auth) : NULL;
    struct log_kv kv[16];
    size_t n = 0;
    kv[n++] = LOG_KV_S("req", r->id);
    kv[n++] = LOG_KV_S("client", client[0] ? client : NULL);
    kv[n++] = LOG_KV_S("key_id", u ? u->access_key : NULL);
    kv[n++] = LOG_KV_S("method", r->method);
    kv[n++] = LOG_KV_S("op", gw_op_name(r->op));
    kv[n++] = LOG_KV_S("bucket", r->bucket);
    kv[n++] = LOG_KV_S("key", r->key);
    kv[n++] = LOG_KV_U("status", r->status);
    kv[n++] = LOG_KV_U("bytes", r->resp_bytes);
    kv[n++] = LOG_KV_U("in", r->body_bytes);
    kv[n++] = LOG_KV_MS("ms", ms);
    kv[n++] = LOG_KV_S("read", read_name(r->read));
    if (gw_req_subresource(r))
        kv[n++] = LOG_KV_S("subresource", gw_req_subresource(r));
    if (aborted)
        kv[n++] = LOG_KV_U("aborted", 1);
    log_kv(LOG_LVL_INFO, "access", kv, n);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct gw *g = cls;
    struct gw_req *r = *con_cls;
    if (!r)
        return;
    *con_cls = NULL;
    /* Between requests the connection has idle_timeout_s to send the next
     * request line (MHD calls this before it closes a connection, so gconn
     * is still there). */
    gw_conn_arm(r->gconn, GW_DEADLINE_IDLE);
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, g->conf->conn_idle_timeout_s);
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - r->t0.tv_sec) * 1e3 +
                (double)(t1.tv_nsec - r->t0.tv_nsec) / 1e6;
    if (r->method)
        gw_metrics_request(r->op, r->status,
                           (uint64_t)(t1.tv_sec - r->t0.tv_sec) * 1000000000u +
                               (uint64_t)(t1.tv_nsec - r->t0.tv_nsec),
                           r->cache_use);
    if (r->method && log_get_level() >= LOG_LVL_INFO)   /* else its line is dropped */
        access_log(r, conn, ms, toe != MHD_REQUEST_TERMINATED_COMPLETED_OK);
    gw_intake_end(r);   /* first: an intake thread may still hold the body */
    if (r->put)
        backend_put_abort(r->put);
    auth_body_free(r->body);
    auth_ctx_free(r->auth);
    gw_buf_free(&r->xml_in);
    obj_meta_clear(&r->put_meta);
    gw_arena_free(&r->arena);
    free(r);
    atomic_fetch_sub(&g->active, 1);
}

/* Each connection gets its deadline record when it is accepted and drops it
 * before libmicrohttpd closes its descriptor; its close is counted where it
 * was accepted. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct gw_http *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = ci ? gw_conn_open(h->g->guard, ci->connect_fd) : NULL;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        gw_conn_close(*socket_context);
        *socket_context = NULL;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        gw_accept_closed(h->g->accept, h->idx, ci ? ci->client_addr : NULL);
    }
}

/* libmicrohttpd's own messages, through our log (escaped, JSON when asked).
 * Under a flood it says the same thing per connection: a message repeated
 * within 10 s is counted, not logged. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static const char *last_fmt;
    static time_t last_t;
    static unsigned long long repeated;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&mu);
    if (fmt == last_fmt && now.tv_sec - last_t < 10) {
        repeated++;
        pthread_mutex_unlock(&mu);
        return;
    }
    unsigned long long rep = repeated;
    repeated = 0;
    last_fmt = fmt;
    last_t = now.tv_sec;
    pthread_mutex_unlock(&mu);
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    if (rep)
        log_msg(LOG_LVL_WARN, "http", "(the previous message %llu more times)", rep);
    log_msg(LOG_LVL_WARN, "http", "%s", msg);
}

void gw_conn_stats_get(const struct gw *g, struct gw_conn_stats *out)
{
    memset(out, 0, sizeof *out);
    out->limit = g->conn_limit;
    out->per_client = g->per_client;
    out->closed_body_rate = atomic_load(&g->closed_body_rate);
    out->body_bytes_intake = atomic_load(&g->body_bytes_intake);
    out->body_bytes_inline = atomic_load(&g->body_bytes_inline);
    out->body_threads = g->body_threads;
    out->body_buffered = gw_intake_pool_buffered(g->intake);
    if (g->guard)
        gw_guard_stats(g->guard, &out->open, &out->closed_idle, &out->closed_header);
    out->refused_limit = gw_accept_refused(g->accept, GW_REFUSED_LIMIT);
    out->refused_per_client = gw_accept_refused(g->accept, GW_REFUSED_PER_CLIENT);
    out->http_threads = gw_accept_threads(g->accept, out->thread_open, GW_STATS_THREADS);
}

/* ---- start and stop ---- */

/* One libmicrohttpd daemon per HTTP thread, none with a listening socket:
 * gw_accept hands each its connections (accept.c says why). Their
 * connection limit is the gateway's, which gw_accept keeps over them all;
 * connections.per_client too. 0, or -1 with the daemons started so far
 * stopped. */
static int start_daemons(struct gw *g, unsigned n)
{
    const struct conf *c = g->conf;
    g->http = calloc(n, sizeof *g->http);
    g->daemons = calloc(n, sizeof *g->daemons);
    if (!g->http || !g->daemons)
        return -1;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
                     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET;
    for (g->n_http = 0; g->n_http < n; g->n_http++) {
        struct gw_http *h = &g->http[g->n_http];
        *h = (struct gw_http){ g, g->n_http };
        g->daemons[g->n_http] = MHD_start_daemon(
            flags, 0, NULL, NULL, on_access, g,
            MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, g,   /* first, so it sees every message */
            MHD_OPTION_URI_LOG_CALLBACK, on_uri, g,
            MHD_OPTION_NOTIFY_COMPLETED, on_completed, g,
            MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY,
            MHD_OPTION_CONNECTION_TIMEOUT, c->conn_idle_timeout_s,
            MHD_OPTION_CONNECTION_LIMIT, g->conn_limit,
            MHD_OPTION_END);
        if (!g->daemons[g->n_http])
            return -1;
    }
    return 0;
}

/* Stops the daemons (closing their connections) and frees what
 * start_daemons made. */
static void stop_daemons(struct gw *g)
{
    for (unsigned i = 0; i < g->n_http; i++)
        MHD_stop_daemon(g->daemons[i]);
    g->n_http = 0;
    free(g->daemons);
    free(g->http);
    g->daemons = NULL;
    g->http = NULL;
}

int gw_start(const struct conf *c, struct backend *b, struct auth *a, struct cache *cache,
             gw_announce_fn *announce, void *announce_arg, struct gw **out)
{
    struct gw *g = calloc(1, sizeof *g);
    if (!g)
        return -1;
    g->conf = c;
    g->backend = b;
    struct backend_info bi;
    backend_info_get(b, &bi);
    g->cold_files = strcmp(bi.kind, "posix") == 0;
    g->auth = a;
    g->cache = cache;
    if (getrandom(&g->id_salt, sizeof g->id_salt, 0) != sizeof g->id_salt)
        g->id_salt = (uint32_t)getpid();

    /* Descriptors first: libmicrohttpd's default connection limit (1020,
     * from FD_SETSIZE) is what locked everyone out at 1,020 idle sockets. */
    uint64_t nofile_before, nofile = gw_fd_limit_raise(&nofile_before);
    uint64_t reserve = FD_RESERVE + 4u * (uint64_t)c->cache_fill_workers;
    /* A connection can hold two descriptors: its socket and the object or
     * cache file it is sending. */
    uint64_t room = nofile > reserve + 32 ? (nofile - reserve) / 2 : 16;
    uint64_t limit = c->conn_max ? c->conn_max : room < CONN_DEFAULT_MAX ? room
                                                                          : CONN_DEFAULT_MAX;
    if (c->conn_max && c->conn_max > room)
        log_msg(LOG_LVL_WARN, "gw", "connections.max %u needs about %llu descriptors; the "
                "open-file limit is %llu: a flood may run out of descriptors", c->conn_max,
                (unsigned long long)(2u * (uint64_t)c->conn_max + reserve),
                (unsigned long long)nofile);
    g->conn_limit = (unsigned)limit;
    g->per_client = c->conn_per_client ? c->conn_per_client
                                       : (g->conn_limit / 4 ? g->conn_limit / 4 : 1);
    int lfd;
    bool ipv6;
    if (gw_listen_open(c->listen_addr, c->listen_port, &lfd, &ipv6) != 0) {
        free(g);
        return -1;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1)
        cores = 1;
    g->body_threads = c->body_threads ? c->body_threads : (unsigned)cores;
    if (gw_intake_pool_start(g->body_threads, take_in, &g->intake) != 0) {
        close(lfd);
        free(g);
        return -1;
    }
    if (gw_guard_start(c->conn_idle_timeout_s, c->conn_header_timeout_s, &g->guard) != 0) {
        gw_intake_pool_free(g->intake);
        close(lfd);
        free(g);
        return -1;
    }
    (void)ipv6;   /* the daemons take accepted sockets of either family */
    unsigned threads = c->threads ? c->threads : (unsigned)cores;
    /* Logged before the daemons start: once they answer, the line is there. */
    char nofile_txt[80];
    if (nofile_before < nofile)
        snprintf(nofile_txt, sizeof nofile_txt, "%llu, raised from %llu",
                 (unsigned long long)nofile, (unsigned long long)nofile_before);
    else
        snprintf(nofile_txt, sizeof nofile_txt, "%llu", (unsigned long long)nofile);
    log_msg(LOG_LVL_INFO, "gw", "connections: at most %u at once, %u per client address "
            "(open-file limit %s); request line within %u s of connecting or of the last "
            "response, headers within %u s of it, bodies at least %u bytes/s, responses may "
            "stall %u s", g->conn_limit, g->per_client, nofile_txt, c->conn_idle_timeout_s,
            c->conn_header_timeout_s, c->conn_min_body_rate, c->conn_send_timeout_s);
    /* The banner goes out before anything is answered; should the server
     * then fail to start, the error follows it and the gateway exits. */
    if (announce) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        uint16_t port = c->listen_port;
        if (getsockname(lfd, (struct sockaddr *)&ss, &sl) == 0)
            port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                  : ((struct sockaddr_in *)&ss)->sin_port);
        announce(port, announce_arg);
    }
    g->hit_copy = gw_hit_copy_new(GW_HIT_COPY_BUDGET);   /* NULL: every hit by sendfile */
    int rc = start_daemons(g, threads);
    if (rc != 0)
        close(lfd);
    else   /* owns lfd from here, also when it fails */
        rc = gw_accept_start(lfd, g->daemons, threads, g->conn_limit, g->per_client,
                             &g->accept);
    if (rc != 0) {
        char name[300];
        gw_listen_name(c->listen_addr, c->listen_port, name, sizeof name);
        log_msg(LOG_LVL_ERROR, "gw", "cannot start the HTTP server on %s", name);
        stop_daemons(g);
        gw_guard_stop(g->guard);
        gw_intake_pool_free(g->intake);
        gw_hit_copy_free(g->hit_copy);
        free(g);
        return -1;
    }

    *out = g;
    return 0;
}

void gw_stop(struct gw *g, unsigned grace_s)
{
    /* New connections are refused from here; the open ones are served. */
    gw_accept_stop(g->accept);
    /* In-flight requests finish; idle keep-alive connections are closed
     * when the daemons stop below. */
    for (unsigned waited_ms = 0; atomic_load(&g->active) > 0 && waited_ms < grace_s * 1000;
         waited_ms += 20)
        usleep(20 * 1000);
    unsigned left = atomic_load(&g->active);
    if (left)
        log_msg(LOG_LVL_WARN, "gw", "%u requests still running after %u s; closing them",
                left, grace_s);
    if (g->cache)
        cache_stop(g->cache);
    /* every body job ends and resumes its connection: none may be left
     * suspended when the daemons stop */
    gw_intake_pool_stop(g->intake);
    stop_daemons(g);
    gw_accept_free(g->accept);   /* after every connection's close was counted */
    gw_guard_stop(g->guard);   /* after every connection's gw_conn_close */
    gw_intake_pool_free(g->intake);   /* after every request's gw_intake_end */
    gw_hit_copy_free(g->hit_copy);   /* after every response's buffer went back */
    free(g);
}
