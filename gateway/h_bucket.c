/* gateway/h_bucket.c - bucket operations: CreateBucket, HeadBucket, DeleteBucket, GetBucketLocation,
 * GetBucketVersioning, ListObjects v1/v2 and DeleteObjects. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "encoding.h"
#include "gw_int.h"

enum { XML_CAP = 8 * 1024 * 1024 };   /* a 1000-key page with 1 KiB keys fits */

const char *gw_owner_id(const struct gw_req *r)
{
    const struct conf_user *u = r->auth ? auth_ctx_user(r->auth) : NULL;
    return u && u->name ? u->name : "shardgate";
}

int gw_owner_xml(struct gw_buf *b, const struct gw_req *r)
{
    const char *name = gw_owner_id(r);
    int rc = gw_buf_puts(b, "<Owner>");
    rc |= gw_xml_elem(b, "ID", name);
    rc |= gw_xml_elem(b, "DisplayName", name);
    return rc | gw_buf_puts(b, "</Owner>");
}

void gw_h_bucket_begin(struct gw_req *r)
{
    (void)r;   /* CreateBucket: the optional configuration is read at the end */
}

static void create_bucket(struct gw_req *r)
{
    if (r->xml_in.len) {
        char *region = NULL;
        if (gw_xml_parse_create_bucket(r->xml_in.data, r->xml_in.len, &region) != 0) {
            gw_reply_error(r, S3E_MALFORMED_XML, NULL, NULL);
            return;
        }
        bool ok = !region || !*region || strcmp(region, r->conf->region) == 0;
        free(region);
        if (!ok) {
            gw_reply_error(r, S3E_INVALID_ARGUMENT,
                           "The specified location-constraint is not valid for this "
                           "endpoint: it serves one region.", NULL);
            return;
        }
    }
    enum backend_status st = backend_bucket_create(r->backend, r->bucket);
    /* In us-east-1, S3 answers a CreateBucket of a bucket you own with 200
     * (a no-op); elsewhere with 409 BucketAlreadyOwnedByYou. The cold
     * tier's answer is read by the gateway's region, as the client sees it. */
    if (st == BACKEND_BUCKET_EXISTS && strcmp(r->conf->region, "us-east-1") == 0)
        st = BACKEND_OK;
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        return;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"",
                                                                MHD_RESPMEM_PERSISTENT);
    if (resp) {
        char loc[80];
        snprintf(loc, sizeof loc, "/%s", r->bucket);
        gw_resp_header(r, resp, "Location", loc);
    }
    gw_reply(r, 200, resp);
}

void gw_h_bucket_end(struct gw_req *r)
{
    enum backend_status st;
    struct gw_buf b;
    switch (r->op) {
    case GW_OP_CREATE_BUCKET:
        create_bucket(r);
        return;
    case GW_OP_HEAD_BUCKET: {
        st = backend_bucket_head(r->backend, r->bucket);
        if (st != BACKEND_OK) {
            gw_reply_backend_error(r, st);
            return;
        }
        struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"",
                                                                    MHD_RESPMEM_PERSISTENT);
        if (resp)
            gw_resp_header(r, resp, "x-amz-bucket-region", r->conf->region);
        gw_reply(r, 200, resp);
        return;
    }
    case GW_OP_DELETE_BUCKET:
        st = backend_bucket_delete(r->backend, r->bucket);
        if (st != BACKEND_OK)
            gw_reply_backend_error(r, st);
        else
            gw_reply_body(r, 204, NULL, NULL, 0);
        return;
    case GW_OP_GET_BUCKET_LOCATION:
    case GW_OP_GET_BUCKET_VERSIONING:
        st = backend_bucket_head(r->backend, r->bucket);
        if (st != BACKEND_OK) {
            gw_reply_backend_error(r, st);
            return;
        }
        gw_buf_init(&b, 4096);
        int rc = gw_buf_puts(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        if (r->op == GW_OP_GET_BUCKET_LOCATION) {
            /* S3 spells us-east-1 as an empty constraint. */
            const char *reg = strcmp(r->conf->region, "us-east-1") == 0 ? "" : r->conf->region;
            rc |= gw_buf_puts(&b, "<LocationConstraint xmlns=\"http://s3.amazonaws.com/doc/"
                                  "2006-03-01/\">");
            rc |= gw_xml_escape(&b, reg);
            rc |= gw_buf_puts(&b, "</LocationConstraint>");
        } else {
            rc |= gw_buf_puts(&b, "<VersioningConfiguration xmlns=\"http://s3.amazonaws.com/"
                                  "doc/2006-03-01/\"/>");
        }
        gw_reply_xml_built(r, &b, rc);
        return;
    default:
        gw_reply_error(r, S3E_INTERNAL, NULL, NULL);
        return;
    }
}

/* ---- listings ---- */

int gw_list_elem(struct gw_buf *b, const char *tag, const char *v, bool url)
{
    if (!url)
        return gw_xml_elem(b, tag, v);
    int rc = gw_buf_printf(b, "<%s>", tag);
    rc |= gw_url_encode(b, v, true);
    return rc | gw_buf_printf(b, "</%s>", tag);
}

char *gw_token_encode(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (out)
        sg_b64_encode(s, n, out);
    return out;
}

char *gw_token_decode(struct gw_arena *a, const char *tok)
{
    size_t n = strlen(tok);
    if (n == 0 || n % 4 || n > 8192)
        return NULL;
    char *out = gw_arena_alloc(a, n);
    if (!out)
        return NULL;
    long len = sg_b64_decode(tok, n, out, n - 1);
    if (len < 0 || memchr(out, '\0', (size_t)len))
        return NULL;
    out[len] = '\0';
    return out;
}

int gw_list_params(struct gw_req *r, struct gw_listing *l)
{
    memset(l, 0, sizeof *l);
    const char *prefix = gw_req_query(r, "prefix");
    const char *enc = gw_req_query(r, "encoding-type");
    l->prefix = prefix ? prefix : "";
    l->delim = gw_req_query(r, "delimiter");
    if (!gw_req_query_uint(r, "max-keys", 1000, 1000, &l->max_keys)) {
        gw_reply_error(r, S3E_INVALID_ARGUMENT, "Provided max-keys not an integer or within "
                       "integer range", NULL);
        return -1;
    }
    if (enc && strcmp(enc, "url") != 0) {
        gw_reply_error(r, S3E_INVALID_ARGUMENT, "Invalid Encoding Method specified in Request",
                       NULL);
        return -1;
    }
    l->url = enc != NULL;
    return 0;
}

/* The page's objects (<Contents>, or <Version> with VersionId null and
 * IsLatest true when version; each with <Owner> when owner), then its
 * <CommonPrefixes>. 0, or -1 when the buffer's cap is reached. */
static int list_entries(struct gw_buf *b, const struct gw_req *r,
                        const struct backend_list_page *page, bool url, bool owner,
                        bool version)
{
    int rc = 0;
    for (size_t i = 0; i < page->n_objs && !rc; i++) {
        const struct backend_list_entry *e = &page->objs[i];
        char date[32];
        gw_iso_date(&e->mtime, date, sizeof date);
        rc |= gw_buf_puts(b, version ? "<Version>" : "<Contents>");
        rc |= gw_list_elem(b, "Key", e->key, url);
        if (version)
            rc |= gw_buf_puts(b, "<VersionId>null</VersionId><IsLatest>true</IsLatest>");
        rc |= gw_xml_elem(b, "LastModified", date);
        rc |= gw_buf_printf(b, "<ETag>&quot;%s&quot;</ETag>", e->etag);
        rc |= gw_buf_printf(b, "<Size>%llu</Size>", (unsigned long long)e->size);
        if (owner)
            rc |= gw_owner_xml(b, r);
        rc |= gw_buf_puts(b, "<StorageClass>STANDARD</StorageClass>");
        rc |= gw_buf_puts(b, version ? "</Version>" : "</Contents>");
    }
    for (size_t i = 0; i < page->n_prefixes && !rc; i++) {
        rc |= gw_buf_puts(b, "<CommonPrefixes>");
        rc |= gw_list_elem(b, "Prefix", page->prefixes[i], url);
        rc |= gw_buf_puts(b, "</CommonPrefixes>");
    }
    return rc;
}

void gw_list_reply(struct gw_req *r, struct gw_buf *b, struct gw_listing *l, int rc,
                   bool owner, bool version)
{
    if (!rc)
        rc |= list_entries(b, r, &l->page, l->url, owner, version);
    rc |= gw_buf_puts(b, version ? "</ListVersionsResult>" : "</ListBucketResult>");
    backend_list_page_free(&l->page);
    if (rc) {
        gw_buf_free(b);
        gw_reply_error(r, S3E_INTERNAL, "The listing page is too large.", NULL);
        return;
    }
    gw_reply_xml_buf(r, 200, b);
}

int gw_list_fetch(struct gw_req *r, struct gw_listing *l, const char *start)
{
    struct backend_list_req lr = { l->prefix, l->delim, start, l->max_keys };
    enum backend_status st = backend_list_objects(r->backend, r->bucket, &lr, &l->page);
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        return -1;
    }
    return 0;
}

void gw_h_list_objects(struct gw_req *r, bool v2)
{
    const char *marker = gw_req_query(r, v2 ? "start-after" : "marker");
    const char *token = v2 ? gw_req_query(r, "continuation-token") : NULL;
    bool fetch_owner = v2 && gw_req_query(r, "fetch-owner") &&
                       strcmp(gw_req_query(r, "fetch-owner"), "true") == 0;
    struct gw_listing l;
    if (gw_list_params(r, &l) != 0)
        return;
    const char *delim = l.delim;
    bool url = l.url;
    const char *start = marker;
    if (token && *token) {   /* S3 reads an empty token as none, and echoes it */
        start = gw_token_decode(&r->arena, token);
        if (!start) {
            gw_reply_error(r, S3E_INVALID_ARGUMENT,
                           "The continuation token provided is incorrect", NULL);
            return;
        }
    }
    if (gw_list_fetch(r, &l, start) != 0)
        return;
    const struct backend_list_page page = l.page;

    struct gw_buf b;
    gw_buf_init(&b, XML_CAP);
    int rc = gw_xml_begin(&b, "ListBucketResult");
    rc |= gw_xml_elem(&b, "Name", r->bucket);
    /* encoding-type=url encodes what botocore decodes (handlers.py
     * decode_list_object[_v2]): v1 Delimiter, Marker, NextMarker, Key and
     * CommonPrefixes' Prefix, but not its own Prefix; v2 Prefix too, and
     * StartAfter. */
    rc |= gw_list_elem(&b, "Prefix", l.prefix, url && v2);
    if (v2) {
        if (token)
            rc |= gw_xml_elem(&b, "ContinuationToken", token);
        if (marker)
            rc |= gw_list_elem(&b, "StartAfter", marker, url);
        rc |= gw_buf_printf(&b, "<KeyCount>%zu</KeyCount>", page.n_objs + page.n_prefixes);
    } else {
        rc |= gw_list_elem(&b, "Marker", marker ? marker : "", url);
    }
    rc |= gw_buf_printf(&b, "<MaxKeys>%u</MaxKeys>", l.max_keys);
    if (delim && *delim)
        rc |= gw_list_elem(&b, "Delimiter", delim, url);
    if (url)
        rc |= gw_xml_elem(&b, "EncodingType", "url");
    rc |= gw_buf_printf(&b, "<IsTruncated>%s</IsTruncated>", page.truncated ? "true" : "false");
    if (page.truncated && page.next_marker) {
        if (v2) {
            char *t = gw_token_encode(page.next_marker);
            rc |= t ? gw_xml_elem(&b, "NextContinuationToken", t) : -1;
            free(t);
        } else if (delim && *delim) {
            rc |= gw_list_elem(&b, "NextMarker", page.next_marker, url);
        }
    }
    gw_list_reply(r, &b, &l, rc, !v2 || fetch_owner, false);
}

void gw_h_delete_objects(struct gw_req *r)
{
    struct gw_xml_delete d;
    if (gw_xml_parse_delete(r->xml_in.data ? r->xml_in.data : "", r->xml_in.len, 1000, &d)) {
        gw_reply_error(r, S3E_MALFORMED_XML, NULL, NULL);
        return;
    }
    enum backend_status st = backend_bucket_head(r->backend, r->bucket);
    if (st != BACKEND_OK) {
        gw_xml_delete_free(&d);
        gw_reply_backend_error(r, st);
        return;
    }
    struct gw_buf b;
    gw_buf_init(&b, XML_CAP);
    int rc = gw_xml_begin(&b, "DeleteResult");
    enum backend_status down = BACKEND_OK;
    for (size_t i = 0; i < d.n && !rc; i++) {
        /* Once the cold tier timed out or went away, the rest of the keys
         * get that error without asking it again: one deadline per
         * request, not one per key. */
        st = down != BACKEND_OK ? down
                                : backend_object_delete(r->backend, r->bucket, d.keys[i]);
        if (st == BACKEND_TIMEOUT || st == BACKEND_UNAVAILABLE)
            down = st;
        if (r->cache)
            cache_invalidate(r->cache, r->bucket, d.keys[i]);
        if (st == BACKEND_OK || st == BACKEND_NO_KEY) {
            if (!d.quiet) {
                rc |= gw_buf_puts(&b, "<Deleted>");
                rc |= gw_xml_elem(&b, "Key", d.keys[i]);
                rc |= gw_buf_puts(&b, "</Deleted>");
            }
            continue;
        }
        const struct s3_error *se = s3_error_get(s3_error_from_backend(st));
        if (st == BACKEND_COLD_ERROR && gw_req_take_cold_error(r))
            se = r->cold_err;   /* the cold tier's own code for this key */
        char cold_msg[512];
        const char *msg = s3_error_cold_message(r->backend, st, cold_msg, sizeof cold_msg);
        rc |= gw_buf_puts(&b, "<Error>");
        rc |= gw_xml_elem(&b, "Key", d.keys[i]);
        rc |= gw_xml_elem(&b, "Code", se->code);
        rc |= gw_xml_elem(&b, "Message", msg ? msg : se->message);
        rc |= gw_buf_puts(&b, "</Error>");
    }
    rc |= gw_buf_puts(&b, "</DeleteResult>");
    gw_xml_delete_free(&d);
    gw_reply_xml_built(r, &b, rc);
}
