/* gateway/h_writeback.c - the write-back barrier and status over S3:
 * POST /bucket?flush[&prefix=P][&timeout=S][&barrier=N] answers 200 once
 * every write to the bucket (under P) acknowledged before the call (or
 * before barrier N, which an earlier answer gave) is in the cold tier, or
 * 202 with what is still pending when S seconds (default 30, at most 3600)
 * passed; GET /bucket?writeback[&prefix=P] tells what is pending. Both answer
 * JSON; a bucket that is not written back has nothing pending (flush: 200 at
 * once). */
#include <stdlib.h>
#include <string.h>

#include "gw_int.h"

#define FLUSH_DEFAULT_S 30u
#define FLUSH_MAX_S 3600u

static int status_json(struct gw_buf *b, const char *bucket, bool write_back, bool flushed,
                       bool flushed_done, uint64_t barrier, const struct backend_wb_status *s)
{
    int rc = gw_buf_puts(b, "{\"bucket\":");
    rc |= gw_json_str(b, bucket);
    rc |= gw_buf_printf(b, ",\"write\":\"%s\"", write_back ? "back" : "through");
    if (flushed)
        rc |= gw_buf_printf(b, ",\"flushed\":%s,\"barrier\":%llu",
                            flushed_done ? "true" : "false", (unsigned long long)barrier);
    rc |= gw_buf_printf(b, ",\"pending\":{\"objects\":%llu,\"bytes\":%llu,"
                           "\"oldest_s\":%.3f}",
                        (unsigned long long)s->dirty_objects,
                        (unsigned long long)s->dirty_bytes, s->oldest_s);
    rc |= gw_buf_printf(b, ",\"uploaded\":{\"objects\":%llu,\"bytes\":%llu,"
                           "\"bytes_per_s\":%llu},\"upload_failures\":%llu,\"last_error\":",
                        (unsigned long long)s->uploaded_objects,
                        (unsigned long long)s->uploaded_bytes,
                        (unsigned long long)s->upload_bps,
                        (unsigned long long)s->failures);
    rc |= s->last_error[0] ? gw_json_str(b, s->last_error) : gw_buf_puts(b, "null");
    return rc | gw_buf_puts(b, "}");
}

void gw_h_writeback(struct gw_req *r)
{
    /* a write-back bucket answers from local state, the cold tier up or not */
    bool wb = backend_wb_bucket(r->backend, r->bucket);
    enum backend_status bst = wb ? BACKEND_OK : backend_bucket_head(r->backend, r->bucket);
    if (bst != BACKEND_OK) {
        gw_reply_backend_error(r, bst);
        return;
    }
    const char *prefix = gw_req_query(r, "prefix");
    if (prefix && !*prefix)
        prefix = NULL;
    struct backend_wb_status s;
    memset(&s, 0, sizeof s);
    unsigned status = 200;
    bool done = true;
    uint64_t barrier = 0;
    if (r->op == GW_OP_WB_FLUSH) {
        unsigned timeout_s = FLUSH_DEFAULT_S;
        const char *t = gw_req_query(r, "timeout");
        if (t) {
            char *end;
            unsigned long v = strtoul(t, &end, 10);
            if (!*t || *end || v < 1 || v > FLUSH_MAX_S) {
                gw_reply_error(r, S3E_INVALID_ARGUMENT, "timeout must be a number of seconds "
                               "from 1 to 3600.", NULL);
                return;
            }
            timeout_s = (unsigned)v;
        }
        const char *bq = gw_req_query(r, "barrier");
        if (bq) {
            char *end;
            barrier = strtoull(bq, &end, 10);
            if (!*bq || *end || barrier == 0) {
                gw_reply_error(r, S3E_INVALID_ARGUMENT, "barrier must be the number an "
                               "earlier flush answered.", NULL);
                return;
            }
        }
        done = backend_wb_flush(r->backend, r->bucket, prefix, timeout_s * 1000u, &barrier,
                                &s);
        status = done ? 200 : 202;
    } else {
        backend_wb_status(r->backend, r->bucket, prefix, &s);
    }
    struct gw_buf b;
    gw_buf_init(&b, 64 * 1024);
    int rc = status_json(&b, r->bucket, wb, r->op == GW_OP_WB_FLUSH, done, barrier, &s);
    gw_reply_json(r, status, &b, rc);
}
