/* gateway/h_tagging.c - object and bucket tags: Get/Put/DeleteObjectTagging
 * and ...BucketTagging (`?tagging`), and the x-amz-tagging header of
 * PutObject, CreateMultipartUpload and CopyObject. The gateway checks every
 * tag set against S3's rules (backend/tags.c) whatever the store, so both
 * modes answer a bad one alike; the store keeps the tags (posix) or passes
 * them to the cold tier (s3). A cached copy carries the tag count it was
 * read with: a tag change through the gateway drops it, like a write. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_int.h"

int gw_tagging_header(struct gw_req *r, const char **canon, enum s3_err *err,
                      const char **msg)
{
    *canon = NULL;
    const char *h = gw_req_header(r, "x-amz-tagging");
    if (!h)
        return 0;
    struct obj_tags t;
    enum obj_tags_status ts = obj_tags_from_query(h, &t);
    if (ts == OBJ_TAGS_OK)
        ts = obj_tags_check(&t, OBJ_TAGS_MAX_OBJECT, NULL);
    char *q = ts == OBJ_TAGS_OK ? obj_tags_to_query(&t) : NULL;
    obj_tags_clear(&t);
    if (ts == OBJ_TAGS_OK && q)
        *canon = gw_arena_strdup(&r->arena, q);
    free(q);
    if (ts != OBJ_TAGS_OK) {
        *err = s3_error_from_tags(ts, GW_TAGS_HEADER, msg);
        return -1;
    }
    if (!*canon) {
        *err = S3E_SLOW_DOWN;
        *msg = NULL;
        return -1;
    }
    return 0;
}

int gw_tagging_collect(struct gw_req *r, struct obj_meta *m, enum s3_err *err,
                       const char **msg)
{
    const char *canon;
    if (gw_tagging_header(r, &canon, err, msg) != 0)
        return -1;
    if (canon && *canon && obj_meta_add_hdr(m, OBJ_TAGGING_HDR, canon) != 0) {
        *err = S3E_SLOW_DOWN;
        *msg = NULL;
        return -1;
    }
    return 0;
}

/* The object's cached copy carries the old tag count: drop it. */
static void tags_changed(struct gw_req *r)
{
    if (r->cache && r->key)
        cache_invalidate(r->cache, r->bucket, r->key);
}

void gw_h_tagging_get(struct gw_req *r)
{
    struct obj_tags t;
    enum backend_status st = backend_tagging_get(r->backend, r->bucket, r->key, &t);
    char *xml = NULL;
    size_t len = 0;
    if (st == BACKEND_OK && obj_tags_to_xml(&t, &xml, &len) != 0)
        st = BACKEND_NOMEM;
    obj_tags_clear(&t);
    if (st != BACKEND_OK)
        gw_reply_backend_error(r, st);
    else
        gw_reply_body(r, 200, "application/xml", xml, len);
}

void gw_h_tagging_put(struct gw_req *r)
{
    bool bucket = !r->key;
    struct obj_tags t;
    enum obj_tags_status ts =
        obj_tags_from_xml(r->xml_in.data ? r->xml_in.data : "", r->xml_in.len, &t);
    if (ts == OBJ_TAGS_OK)
        ts = obj_tags_check(&t, bucket ? OBJ_TAGS_MAX_BUCKET : OBJ_TAGS_MAX_OBJECT, NULL);
    if (ts != OBJ_TAGS_OK) {
        const char *msg;
        enum s3_err e = s3_error_from_tags(ts, bucket ? GW_TAGS_BUCKET_XML : GW_TAGS_OBJECT_XML,
                                           &msg);
        obj_tags_clear(&t);
        gw_reply_error(r, e, msg, NULL);
        return;
    }
    enum backend_status st = backend_tagging_put(r->backend, r->bucket, r->key, &t);
    obj_tags_clear(&t);
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        return;
    }
    tags_changed(r);
    /* S3: 200 for an object, 204 for a bucket, neither with a body */
    gw_reply_body(r, bucket ? 204 : 200, NULL, NULL, 0);
}

void gw_h_tagging_delete(struct gw_req *r)
{
    enum backend_status st = backend_tagging_delete(r->backend, r->bucket, r->key);
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        return;
    }
    tags_changed(r);
    gw_reply_body(r, 204, NULL, NULL, 0);
}
