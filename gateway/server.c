/* gateway/server.c - the libmicrohttpd side of the gateway: daemon set-up and
 * shutdown, the request record's life (raw URI capture, headers, auth, body
 * streaming), responses and the access log. What each S3 operation does is
 * in the h_*.c files. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <microhttpd.h>

#include "gw_int.h"

struct gw {
    const struct conf *conf;
    struct backend *backend;
    struct auth *auth;
    struct cache *cache;
    struct MHD_Daemon *daemon;
    uint16_t port;
    atomic_uint active;          /* requests between URI and completion */
    atomic_uint_fast64_t next_id;
    uint32_t id_salt;            /* makes ids unique across restarts */
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
    CONN_TIMEOUT_S = 300,        /* idle keep-alive and stalled uploads */
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
    MHD_add_response_header(resp, "x-amz-request-id", r->id);
    MHD_add_response_header(resp, "x-amz-id-2", r->id);
    MHD_add_response_header(resp, "Server", "shardgate");
    if (MHD_queue_response(r->conn, status, resp) != MHD_YES)
        log_msg(LOG_LVL_WARN, "gw", "req=%s cannot queue the response", r->id);
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
        MHD_add_response_header(resp, "Content-Type", content_type);
    r->resp_bytes = len;
    gw_reply(r, status, resp);
}

void gw_reply_xml_buf(struct gw_req *r, unsigned status, struct gw_buf *xml)
{
    size_t len;
    char *body = gw_buf_take(xml, &len);
    gw_reply_body(r, status, "application/xml", body, len);
}

struct MHD_Response *gw_error_response(struct gw_req *r, enum s3_err e, const char *msg,
                                       const char *extra_xml)
{
    const struct s3_error *se = s3_error_get(e);
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
    size_t len;
    char *body = gw_buf_take(&b, &len);
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body,
                                                                MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return NULL;
    }
    MHD_add_response_header(resp, "Content-Type", "application/xml");
    r->resp_bytes = len;
    return resp;
}

void gw_reply_error(struct gw_req *r, enum s3_err e, const char *msg, const char *extra_xml)
{
    gw_reply(r, s3_error_get(e)->http_status, gw_error_response(r, e, msg, extra_xml));
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
    case BACKEND_DENIED:
        msg = "Access Denied: the path crosses a symbolic link or leaves the store.";
        break;
    default:
        break;
    }
    gw_reply_error(r, s3_error_from_backend(st), msg, NULL);
}

/* ---- the request's life ---- */

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)conn;
    struct gw *g = cls;
    struct gw_req *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->gw = g;
    r->conf = g->conf;
    r->backend = g->backend;
    r->authz = g->auth;
    r->cache = g->cache;
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

static int body_out(void *arg, const uint8_t *buf, size_t len)
{
    struct gw_req *r = arg;
    switch (r->body_kind) {
    case GW_BODY_STREAM: {
        enum backend_status st = backend_put_write(r->put, buf, len);
        if (st != BACKEND_OK) {
            gw_req_fail(r, s3_error_from_backend(st), NULL);
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
        gw_req_fail(r, S3E_REQUEST_HEADER_TOO_LARGE, NULL);
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
        gw_reply_error(r, r->body_err, r->body_err_msg, NULL);
        return;
    }
    gw_handle_end(r);
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
        start(r, conn, method);
        if (r->state == GW_REQ_DONE)
            return MHD_YES;
        r->state = GW_REQ_BODY;
        /* An error known before a body arrives is answered now, so the client
         * does not send gigabytes for nothing (MHD then closes the
         * connection). Without a body we answer on the next call: a response
         * queued on the first call loses keep-alive. */
        if (r->body_failed && has_body(r))
            gw_reply_error(r, r->body_err, r->body_err_msg, NULL);
        return MHD_YES;
    case GW_REQ_BODY:
        if (*upload_data_size) {
            size_t n = *upload_data_size;
            *upload_data_size = 0;
            r->body_bytes += n;
            if (r->body_failed)
                return MHD_YES;   /* drop the rest; the error goes out at the end */
            enum auth_status as = auth_body_feed(r->body, (const uint8_t *)upload_data, n,
                                                 body_out, r);
            if (as != AUTH_OK && as != AUTH_ABORTED)
                gw_req_fail(r, s3_error_from_auth(as), s3_error_auth_message(as));
            return MHD_YES;
        }
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

void gw_req_resume(void *arg)
{
    struct gw_req *r = arg;
    MHD_resume_connection(r->conn);
}

struct timespec gw_wait_deadline(const struct gw_req *r)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    unsigned ms = r->conf->cache_wait_ms ? r->conf->cache_wait_ms : 30000;
    t.tv_sec += ms / 1000;
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    struct gw *g = cls;
    struct gw_req *r = *con_cls;
    if (!r)
        return;
    *con_cls = NULL;
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - r->t0.tv_sec) * 1e3 +
                (double)(t1.tv_nsec - r->t0.tv_nsec) / 1e6;
    if (r->method)
        gw_metrics_request(r->op, r->status,
                           (uint64_t)(t1.tv_sec - r->t0.tv_sec) * 1000000000u +
                               (uint64_t)(t1.tv_nsec - r->t0.tv_nsec),
                           r->cache_use);
    if (r->method)
        log_msg(LOG_LVL_INFO, "access", "req=%s %s %s bucket=%s key=%s status=%u bytes=%llu "
                "in=%llu ms=%.3f%s", r->id, r->method, gw_op_name(r->op),
                r->bucket ? r->bucket : "-", r->key ? r->key : "-", r->status,
                (unsigned long long)r->resp_bytes, (unsigned long long)r->body_bytes, ms,
                toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " aborted");
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

/* ---- start and stop ---- */

int gw_start(const struct conf *c, struct backend *b, struct auth *a, struct cache *cache,
             struct gw **out)
{
    struct gw *g = calloc(1, sizeof *g);
    if (!g)
        return -1;
    g->conf = c;
    g->backend = b;
    g->auth = a;
    g->cache = cache;
    if (getrandom(&g->id_salt, sizeof g->id_salt, 0) != sizeof g->id_salt)
        g->id_salt = (uint32_t)getpid();

    struct sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_port = htons(c->listen_port);
    if (inet_pton(AF_INET, c->listen_addr, &sin.sin_addr) != 1) {
        log_msg(LOG_LVL_ERROR, "gw", "listen address %s is not an IPv4 address",
                c->listen_addr);
        free(g);
        return -1;
    }
    unsigned threads = c->threads;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned)n : 1;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
                     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    g->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_access, g,
        MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)&sin,
        MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, g,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, g,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONN_TIMEOUT_S,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, 1,
        MHD_OPTION_END);
    if (!g->daemon) {
        log_msg(LOG_LVL_ERROR, "gw", "cannot listen on %s:%u (address in use?)",
                c->listen_addr, c->listen_port);
        free(g);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(g->daemon, MHD_DAEMON_INFO_BIND_PORT);
    g->port = di ? di->port : c->listen_port;
    *out = g;
    return 0;
}

uint16_t gw_port(const struct gw *g)
{
    return g->port;
}

void gw_stop(struct gw *g, unsigned grace_s)
{
    MHD_socket ls = MHD_quiesce_daemon(g->daemon);
    if (ls != MHD_INVALID_SOCKET)
        close(ls);
    /* In-flight requests finish; idle keep-alive connections are closed by
     * MHD_stop_daemon below. */
    for (unsigned waited_ms = 0; atomic_load(&g->active) > 0 && waited_ms < grace_s * 1000;
         waited_ms += 20)
        usleep(20 * 1000);
    unsigned left = atomic_load(&g->active);
    if (left)
        log_msg(LOG_LVL_WARN, "gw", "%u requests still running after %u s; closing them",
                left, grace_s);
    if (g->cache)
        cache_stop(g->cache);
    MHD_stop_daemon(g->daemon);
    free(g);
}
