/* gateway/h_service.c - ListBuckets, with the 2024 paging parameters
 * (max-buckets, continuation-token, prefix, bucket-region). Both backends
 * report every bucket in name order; the page is cut here, so the local
 * store and the cache over a cold S3 answer alike. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_int.h"

enum {
    XML_CAP = 8 * 1024 * 1024,
    MAX_BUCKETS = 10000,          /* S3's limit of max-buckets */
};

struct bucket_walk {
    struct gw_req *r;
    struct gw_buf *b;
    const char *prefix;           /* only names that start with it ("" all) */
    const char *after;            /* only names after it (NULL: from the first) */
    unsigned long max, n;
    char last[256];               /* the last name listed: the next page starts after it */
    bool more;                    /* a bucket past max-buckets exists */
    int rc;
};

static int add_bucket(void *arg, const char *name, time_t created)
{
    struct bucket_walk *w = arg;
    if (strncmp(name, w->prefix, strlen(w->prefix)) != 0 ||
        (w->after && strcmp(name, w->after) <= 0))
        return 0;
    if (!auth_allowed(w->r->authz, w->r->auth, name, AUTH_PERM_READ))
        return 0;   /* list only the buckets this user may read */
    if (w->n == w->max) {
        w->more = true;
        return 1;   /* the page is full and there is more: stop */
    }
    char date[32];
    struct timespec ts = { created, 0 };
    gw_iso_date(&ts, date, sizeof date);
    w->rc |= gw_buf_puts(w->b, "<Bucket>");
    w->rc |= gw_xml_elem(w->b, "Name", name);
    w->rc |= gw_xml_elem(w->b, "CreationDate", date);
    w->rc |= gw_xml_elem(w->b, "BucketRegion", w->r->conf->region);
    w->rc |= gw_buf_puts(w->b, "</Bucket>");
    snprintf(w->last, sizeof w->last, "%s", name);
    w->n++;
    return w->rc;
}

/* Reads max-buckets, continuation-token and prefix into w; 0, or -1 after
 * replying with S3's error. */
static int service_params(struct gw_req *r, struct bucket_walk *w)
{
    const char *mb = gw_req_query(r, "max-buckets");
    w->max = MAX_BUCKETS;
    if (mb) {
        char *end;
        unsigned long v = strtoul(mb, &end, 10);
        if (!*mb || *end || mb[0] == '-' || v < 1 || v > MAX_BUCKETS) {
            gw_reply_error(r, S3E_INVALID_ARGUMENT, "Argument max-buckets must be an integer "
                           "between 1 and 10000.", NULL);
            return -1;
        }
        w->max = v;
    }
    const char *tok = gw_req_query(r, "continuation-token");
    if (tok && *tok) {
        w->after = gw_token_decode(&r->arena, tok);
        if (!w->after) {
            gw_reply_error(r, S3E_INVALID_ARGUMENT,
                           "The continuation token provided is incorrect", NULL);
            return -1;
        }
    }
    w->prefix = gw_req_query(r, "prefix") ? gw_req_query(r, "prefix") : "";
    return 0;
}

void gw_h_service(struct gw_req *r)
{
    struct gw_buf b;
    struct bucket_walk w;
    memset(&w, 0, sizeof w);
    w.r = r;
    w.b = &b;
    if (service_params(r, &w) != 0)
        return;
    gw_buf_init(&b, XML_CAP);
    w.rc |= gw_xml_begin(&b, "ListAllMyBucketsResult");
    w.rc |= gw_owner_xml(&b, r);
    w.rc |= gw_buf_puts(&b, "<Buckets>");
    /* every bucket is in this one region: another bucket-region lists none */
    const char *region = gw_req_query(r, "bucket-region");
    enum backend_status st = BACKEND_OK;
    if (!region || strcmp(region, r->conf->region) == 0)
        st = backend_bucket_list(r->backend, add_bucket, &w);
    w.rc |= gw_buf_puts(&b, "</Buckets>");
    if (w.more) {
        char *t = gw_token_encode(w.last);
        w.rc |= t ? gw_xml_elem(&b, "ContinuationToken", t) : -1;
        free(t);
    }
    if (gw_req_query(r, "prefix"))
        w.rc |= gw_xml_elem(&b, "Prefix", w.prefix);
    w.rc |= gw_buf_puts(&b, "</ListAllMyBucketsResult>");
    if (st != BACKEND_OK || w.rc) {
        gw_buf_free(&b);
        if (st != BACKEND_OK)
            gw_reply_backend_error(r, st);
        else
            gw_reply_error(r, S3E_INTERNAL, "The bucket list is too large.", NULL);
        return;
    }
    gw_reply_xml_buf(r, 200, &b);
}
