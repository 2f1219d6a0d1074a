/* gateway/h_admin.c - the endpoints an orchestrator polls, without
 * credentials: liveness (/_shardgate/health: the process answers) and
 * readiness (/_shardgate/ready: the cache directory takes files and the cold
 * tier answers within a short deadline; 503 with the reasons when not).
 * GET and HEAD only; HEAD answers like GET without the body. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gw_int.h"

enum {
    /* The cold tier's probe result is reused this long: a storm of
     * readiness probes costs the cold tier one request per period. */
    PROBE_KEEP_MS = 5000,
    /* A probe waits at most this for the cold tier (or its first-byte
     * deadline when shorter): orchestrators time a probe out after a few
     * seconds (Kubernetes: 1 s by default; most probes reuse a result). */
    PROBE_MAX_MS = 2000,
    READY_BODY_MAX = 1024,
};

bool gw_op_is_probe(enum gw_op op)
{
    return op == GW_OP_HEALTH || op == GW_OP_READY;
}

void gw_h_probe_begin(struct gw_req *r)
{
    /* Nothing is authenticated here, so nothing but a bare GET or HEAD is
     * taken: the error goes out before any body is read. */
    if (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0)
        gw_req_fail(r, S3E_METHOD_NOT_ALLOWED, NULL);
    else if (gw_req_header(r, "transfer-encoding") ||
             (gw_req_header(r, "content-length") &&
              strcmp(gw_req_header(r, "content-length"), "0") != 0))
        gw_req_fail(r, S3E_INVALID_REQUEST, "This endpoint takes no request body.");
}

static uint64_t mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* The last probe of the cold tier, shared by every request (one gateway per
 * process). One probe runs at a time; while it runs, others use the last
 * result, or wait for this one when there is none yet. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t done;
    bool probing;
    uint64_t at_ms;                 /* when the last probe ended; 0: never */
    enum backend_status st;
    char why[256];
    int ready;                      /* last readiness answered: -1 none, 0, 1 */
} cold_probe = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0, BACKEND_OK,
                 "", -1 };

static enum backend_status probe_cold(struct backend *b, char *why, size_t len)
{
    pthread_mutex_lock(&cold_probe.mu);
    bool fresh = cold_probe.at_ms && mono_ms() - cold_probe.at_ms < PROBE_KEEP_MS;
    if (!fresh && !cold_probe.probing) {
        cold_probe.probing = true;
        pthread_mutex_unlock(&cold_probe.mu);
        struct backend_info bi;
        backend_info_get(b, &bi);
        unsigned ms = bi.first_byte_ms && bi.first_byte_ms < PROBE_MAX_MS ? bi.first_byte_ms
                                                                          : PROBE_MAX_MS;
        char w[sizeof cold_probe.why];
        enum backend_status st = backend_probe(b, ms, w, sizeof w);
        pthread_mutex_lock(&cold_probe.mu);
        cold_probe.st = st;
        snprintf(cold_probe.why, sizeof cold_probe.why, "%s", w);
        cold_probe.at_ms = mono_ms();
        cold_probe.probing = false;
        pthread_cond_broadcast(&cold_probe.done);
    }
    while (cold_probe.probing && !cold_probe.at_ms)
        pthread_cond_wait(&cold_probe.done, &cold_probe.mu);
    enum backend_status st = cold_probe.st;
    snprintf(why, len, "%s", cold_probe.why);
    pthread_mutex_unlock(&cold_probe.mu);
    return st;
}

/* Logs a change of readiness, once (the body says why to the prober). */
static void note_readiness(struct gw_req *r, bool ready, const char *cache_why,
                           const char *cold_why)
{
    pthread_mutex_lock(&cold_probe.mu);
    bool changed = cold_probe.ready != (int)ready;
    cold_probe.ready = ready;
    pthread_mutex_unlock(&cold_probe.mu);
    if (!changed)
        return;
    struct backend_info bi;
    backend_info_get(r->backend, &bi);
    log_msg(ready ? LOG_LVL_INFO : LOG_LVL_WARN, "gw", "readiness: %s (cache: %s; cold tier "
            "%s: %s)", ready ? "ready" : "NOT ready", cache_why,
            bi.location ? bi.location : bi.kind, cold_why);
}

static void ready(struct gw_req *r)
{
    char cache_why[256] = "no cache directory", cold_why[256];
    bool cache_ok = !r->cache || cache_ready(r->cache, cache_why, sizeof cache_why);
    bool cold_ok = probe_cold(r->backend, cold_why, sizeof cold_why) == BACKEND_OK;
    bool ok = cache_ok && cold_ok;
    note_readiness(r, ok, cache_why, cold_why);
    /* One line each, "ok" or "NOT OK" first for a grep. Neither reason
     * names the cold tier's endpoint (anyone may ask); the log does. */
    /* write-back: what waits for the cold tier (it does not change readiness:
     * writes are still absorbed and reads served; the cold tier's line says
     * whether the uploads can go on) */
    char wb_line[400] = "";
    struct backend_wb_status ws;
    if (backend_wb_status(r->backend, NULL, NULL, &ws)) {
        if (!ws.dirty_objects)
            snprintf(wb_line, sizeof wb_line, "write-back: ok - nothing pending\n");
        else
            snprintf(wb_line, sizeof wb_line, "write-back: %s - %llu writes (%llu bytes) "
                     "pending, the oldest %.0f s%s%.200s\n",
                     cold_ok ? "uploading" : "WAITING for the cold tier",
                     (unsigned long long)ws.dirty_objects, (unsigned long long)ws.dirty_bytes,
                     ws.oldest_s, ws.last_error[0] ? "; last upload error: " : "",
                     ws.last_error);
    }
    char *body = malloc(READY_BODY_MAX);
    int n = body ? snprintf(body, READY_BODY_MAX, "%s\ncache: %s - %s\ncold tier: %s - %s\n%s",
                            ok ? "ready" : "not ready", cache_ok ? "ok" : "NOT OK", cache_why,
                            cold_ok ? "ok" : "NOT OK", cold_why, wb_line)
                 : -1;
    if (n < 0) {
        free(body);
        gw_reply_error(r, S3E_INTERNAL, NULL, NULL);
        return;
    }
    size_t len = (size_t)n < READY_BODY_MAX ? (size_t)n : READY_BODY_MAX - 1;
    gw_reply_body(r, ok ? 200 : 503, "text/plain", body, len);
}

void gw_h_probe(struct gw_req *r)
{
    if (r->op == GW_OP_READY) {
        ready(r);
    } else {
        char *body = strdup("ok\n");
        gw_reply_body(r, 200, "text/plain", body, body ? 3 : 0);
    }
    if (strcmp(r->method, "HEAD") == 0)
        r->resp_bytes = 0;   /* libmicrohttpd sends the headers only */
}
