/* gateway/h_prefetch.c - the prefetch hint API over S3 (cache/HINTS.md):
 * POST /bucket?prefetch submits a hint, GET lists jobs or shows one, DELETE
 * cancels one. Bodies and answers are JSON; the hint is parsed by conf/
 * (the one module that speaks jansson), answers are written here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_int.h"
#include "hint.h"

int gw_json_str(struct gw_buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    int rc = gw_buf_append(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p && !rc; p++) {
        if (*p == '"' || *p == '\\') {
            char e[2] = { '\\', (char)*p };
            rc = gw_buf_append(b, e, 2);
        } else if (*p < 0x20) {
            char e[6] = { '\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15] };
            rc = gw_buf_append(b, e, 6);
        } else {
            rc = gw_buf_append(b, p, 1);
        }
    }
    return rc | gw_buf_append(b, "\"", 1);
}

static int job_json(struct gw_buf *b, const struct cache_job_info *ji)
{
    char created[32], ended[32];
    gw_iso_date(&ji->created, created, sizeof created);
    gw_iso_date(&ji->ended, ended, sizeof ended);
    int rc = gw_buf_puts(b, "{\"job\":");
    rc |= gw_json_str(b, ji->id);
    rc |= gw_buf_puts(b, ",\"bucket\":");
    rc |= gw_json_str(b, ji->bucket ? ji->bucket : "");
    rc |= gw_buf_printf(b, ",\"state\":\"%s\",\"ordered\":%s", cache_job_state_name(ji->state),
                        ji->ordered ? "true" : "false");
    if (ji->has_epoch)
        rc |= gw_buf_printf(b, ",\"epoch\":%llu", (unsigned long long)ji->epoch);
    else
        rc |= gw_buf_puts(b, ",\"epoch\":null");
    rc |= gw_buf_puts(b, ",\"consumer\":");
    rc |= ji->consumer ? gw_json_str(b, ji->consumer) : gw_buf_puts(b, "null");
    rc |= gw_buf_printf(b, ",\"objects\":{\"total\":%llu,\"cached\":%llu,\"staged\":%llu,"
                           "\"failed\":%llu,\"pending\":%llu}",
                        (unsigned long long)ji->total, (unsigned long long)ji->cached,
                        (unsigned long long)ji->staged, (unsigned long long)ji->failed,
                        (unsigned long long)ji->pending);
    rc |= gw_buf_printf(b, ",\"bytes\":{\"total\":%llu,\"done\":%llu,\"cached\":%llu}",
                        (unsigned long long)ji->bytes_total, (unsigned long long)ji->bytes_done,
                        (unsigned long long)ji->bytes_cached);
    rc |= gw_buf_printf(b, ",\"rate_bytes_per_s\":%.1f", ji->rate_bytes_s);
    if (ji->eta_s >= 0)
        rc |= gw_buf_printf(b, ",\"eta_s\":%.1f", ji->eta_s);
    else
        rc |= gw_buf_puts(b, ",\"eta_s\":null");
    rc |= gw_buf_printf(b, ",\"position\":%llu", (unsigned long long)ji->position);
    if (ji->stage_ahead)
        rc |= gw_buf_printf(b, ",\"stage_ahead\":%u", ji->stage_ahead);
    rc |= gw_buf_puts(b, ",\"errors\":[");
    for (size_t i = 0; i < ji->n_errors; i++) {
        rc |= gw_buf_puts(b, i ? ",{\"key\":" : "{\"key\":");
        rc |= gw_json_str(b, ji->errors[i].key);
        rc |= gw_buf_puts(b, ",\"code\":");
        rc |= gw_json_str(b, s3_error_job_code(ji->errors[i].cst, ji->errors[i].st));
        if (ji->errors[i].msg[0]) {
            rc |= gw_buf_puts(b, ",\"message\":");
            rc |= gw_json_str(b, ji->errors[i].msg);
        }
        rc |= gw_buf_puts(b, "}");
    }
    rc |= gw_buf_puts(b, "],\"created\":");
    rc |= gw_json_str(b, created);
    rc |= gw_buf_puts(b, ",\"ended\":");
    rc |= ji->ended.tv_sec ? gw_json_str(b, ended) : gw_buf_puts(b, "null");
    return rc | gw_buf_puts(b, "}");
}

void gw_reply_json(struct gw_req *r, unsigned status, struct gw_buf *b, int rc)
{
    if (rc) {
        gw_buf_free(b);
        gw_reply_error(r, S3E_INTERNAL, NULL, NULL);
        return;
    }
    size_t len;
    char *body = gw_buf_take(b, &len);
    gw_reply_body(r, status, "application/json", body, len);
}

/* Every key under prefix, in key order, with sizes; at most max. 0, or an
 * S3 error (listing failed, or too many objects) with *msg. */
static int list_prefix(struct gw_req *r, const char *prefix, size_t max, char ***keys,
                       uint64_t **sizes, size_t *n, enum s3_err *err, const char **msg)
{
    size_t cap = 0;
    char *after = NULL;
    *keys = NULL;
    *sizes = NULL;
    *n = 0;
    for (;;) {
        struct backend_list_req lr = { prefix, NULL, after, 1000 };
        struct backend_list_page pg;
        memset(&pg, 0, sizeof pg);
        enum backend_status st = backend_list_objects(r->backend, r->bucket, &lr, &pg);
        if (st != BACKEND_OK) {
            *err = s3_error_from_backend(st);
            goto fail;
        }
        if (*n + pg.n_objs > max) {
            backend_list_page_free(&pg);
            *err = S3E_INVALID_ARGUMENT;
            *msg = "The prefix names more objects than a hint may (1000000).";
            goto fail;
        }
        if (*n + pg.n_objs > cap) {
            cap = (*n + pg.n_objs) * 2;
            char **nk = realloc(*keys, cap * sizeof *nk);
            uint64_t *ns = nk ? realloc(*sizes, cap * sizeof *ns) : NULL;
            if (nk)
                *keys = nk;
            if (ns)
                *sizes = ns;
            if (!nk || !ns) {
                backend_list_page_free(&pg);
                *err = S3E_SLOW_DOWN;
                goto fail;
            }
        }
        for (size_t i = 0; i < pg.n_objs; i++) {
            (*keys)[*n] = pg.objs[i].key;   /* taken from the page */
            pg.objs[i].key = NULL;
            (*sizes)[(*n)++] = pg.objs[i].size;
        }
        bool more = pg.truncated && pg.next_marker;
        free(after);
        after = more ? strdup(pg.next_marker) : NULL;
        backend_list_page_free(&pg);
        if (!more)
            break;
        if (!after) {
            *err = S3E_SLOW_DOWN;
            goto fail;
        }
    }
    free(after);
    return 0;
fail:
    free(after);
    for (size_t i = 0; i < *n; i++)
        free((*keys)[i]);
    free(*keys);
    free(*sizes);
    *keys = NULL;
    *sizes = NULL;
    *n = 0;
    return -1;
}

static void submit(struct gw_req *r)
{
    struct conf_hint h;
    char err[512];
    struct conf_hint_limits lim = { GW_HINT_MAX_OBJECTS, GW_HINT_MAX_BODY };
    if (conf_hint_parse(r->xml_in.data ? r->xml_in.data : "", r->xml_in.len, &lim, &h, err,
                        sizeof err) != 0) {
        gw_reply_error(r, S3E_INVALID_ARGUMENT, err, NULL);
        return;
    }
    enum backend_status bst = backend_bucket_head(r->backend, r->bucket);
    if (bst != BACKEND_OK) {
        conf_hint_free(&h);
        gw_reply_backend_error(r, bst);
        return;
    }
    struct cache_hint ch = { .bucket = r->bucket, .keys = h.keys, .n_keys = h.n_keys,
                             .ordered = h.ordered, .has_epoch = h.has_epoch, .epoch = h.epoch,
                             .consumer = h.consumer, .window_bytes = h.window_bytes,
                             .window_objects = h.window_objects, .pin = h.pin,
                             .stage_ahead = h.stage_ahead };
    h.keys = NULL;   /* moves to ch */
    h.n_keys = 0;
    if (h.prefix) {
        enum s3_err e;
        const char *msg = NULL;
        if (list_prefix(r, h.prefix, GW_HINT_MAX_OBJECTS, &ch.keys, &ch.sizes, &ch.n_keys, &e,
                        &msg) != 0) {
            conf_hint_free(&h);
            gw_reply_error(r, e, msg, NULL);
            return;
        }
    }
    size_t n = ch.n_keys;
    char id[CACHE_JOB_ID_LEN];
    int rc = cache_job_submit(r->cache, &ch, id);
    for (size_t i = 0; i < ch.n_keys; i++)   /* left only when the submit failed */
        free(ch.keys[i]);
    free(ch.keys);
    free(ch.sizes);
    conf_hint_free(&h);
    if (rc != 0) {
        gw_reply_error(r, S3E_SLOW_DOWN, "The gateway cannot take a prefetch job now.", NULL);
        return;
    }
    struct gw_buf b;
    gw_buf_init(&b, 4096);
    int jrc = gw_buf_puts(&b, "{\"job\":");
    jrc |= gw_json_str(&b, id);
    jrc |= gw_buf_puts(&b, ",\"bucket\":");
    jrc |= gw_json_str(&b, r->bucket);
    jrc |= gw_buf_printf(&b, ",\"objects\":%zu,\"state\":\"queued\"}", n);
    gw_reply_json(r, 202, &b, jrc);
}

void gw_h_prefetch(struct gw_req *r)
{
    if (!r->cache) {
        gw_reply_error(r, S3E_NOT_IMPLEMENTED, "Prefetch hints need the cache tier: start "
                       "shardgate with --cache-dir.", NULL);
        return;
    }
    if (r->op == GW_OP_PREFETCH_SUBMIT) {
        submit(r);
        return;
    }
    const char *id = gw_req_query(r, "job");
    struct cache_job_info ji;
    struct gw_buf b;
    if (r->op == GW_OP_PREFETCH_CANCEL || id) {
        if (!id || !*id) {
            gw_reply_error(r, S3E_INVALID_ARGUMENT, "Name the job: ?prefetch&job=ID.", NULL);
            return;
        }
        int rc = r->op == GW_OP_PREFETCH_CANCEL ? cache_job_cancel(r->cache, r->bucket, id, &ji)
                                                : cache_job_get(r->cache, r->bucket, id, &ji);
        if (rc != 0) {
            gw_reply_error(r, S3E_NO_SUCH_JOB, NULL, NULL);
            return;
        }
        gw_buf_init(&b, 64 * 1024);
        rc = job_json(&b, &ji);
        cache_job_info_clear(&ji);
        gw_reply_json(r, 200, &b, rc);
        return;
    }
    enum backend_status bst = backend_bucket_head(r->backend, r->bucket);
    if (bst != BACKEND_OK) {
        gw_reply_backend_error(r, bst);
        return;
    }
    struct cache_job_info *list = NULL;
    size_t n = 0;
    if (cache_job_list(r->cache, r->bucket, &list, &n) != 0) {
        gw_reply_error(r, S3E_SLOW_DOWN, NULL, NULL);
        return;
    }
    gw_buf_init(&b, 16 * 1024 * 1024);
    int rc = gw_buf_puts(&b, "{\"jobs\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            rc |= gw_buf_puts(&b, ",");
        rc |= job_json(&b, &list[i]);
        cache_job_info_clear(&list[i]);
    }
    free(list);
    rc |= gw_buf_puts(&b, "]}");
    gw_reply_json(r, 200, &b, rc);
}
