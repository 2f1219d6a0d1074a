/* gateway/h_acl.c - ACLs as an S3 bucket with ObjectOwnership
 * BucketOwnerEnforced (the default since 2023) answers them: ACLs are
 * disabled, the owner has FULL_CONTROL of everything. GetBucketAcl and
 * GetObjectAcl say so; PutBucketAcl / PutObjectAcl and the ACL headers of a
 * write are accepted when they ask for exactly that and refused with
 * AccessControlListNotSupported otherwise, so a client asking for
 * public-read learns it did not get it. Same in both modes: the cold tier
 * is asked only whether the bucket or object exists. */
#include <string.h>

#include "gw_int.h"

/* The canned ACLs that mean "the owner has full control, nobody else". */
static bool canned_acl_is_owner_only(const char *v)
{
    return strcmp(v, "private") == 0 || strcmp(v, "bucket-owner-full-control") == 0;
}

static bool has_grant_header(const struct gw_req *r)
{
    for (size_t i = 0; i < r->n_hdrs; i++)
        if (strncmp(r->hdrs[i].name, "x-amz-grant-", 12) == 0)
            return true;
    return false;
}

int gw_acl_headers_check(const struct gw_req *r, enum s3_err *err, const char **msg)
{
    switch (r->op) {
    case GW_OP_PUT_OBJECT: case GW_OP_COPY_OBJECT: case GW_OP_CREATE_UPLOAD:
    case GW_OP_CREATE_BUCKET:
        break;
    default:   /* Put*Acl read theirs in gw_h_acl_put; others take none */
        return 0;
    }
    const char *acl = gw_req_header(r, "x-amz-acl");
    if ((!acl || canned_acl_is_owner_only(acl)) && !has_grant_header(r))
        return 0;
    /* AWS answers a CreateBucket with an ACL under BucketOwnerEnforced
     * with its own code; object writes with AccessControlListNotSupported. */
    *err = r->op == GW_OP_CREATE_BUCKET ? S3E_INVALID_BUCKET_ACL : S3E_ACL_NOT_SUPPORTED;
    *msg = NULL;
    return -1;
}

/* Does the bucket, or the object, exist? 0, or -1 after replying. */
static int acl_target_exists(struct gw_req *r)
{
    enum backend_status st;
    if (r->key) {
        struct obj_meta m;
        memset(&m, 0, sizeof m);
        st = backend_object_head(r->backend, r->bucket, r->key, &m);
        obj_meta_clear(&m);
    } else {
        st = backend_bucket_head(r->backend, r->bucket);
    }
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        return -1;
    }
    return 0;
}

void gw_h_acl_get(struct gw_req *r)
{
    if (acl_target_exists(r) != 0)
        return;
    const char *id = gw_owner_id(r);
    struct gw_buf b;
    gw_buf_init(&b, 64 * 1024);
    int rc = gw_xml_begin(&b, "AccessControlPolicy");
    rc |= gw_owner_xml(&b, r);
    rc |= gw_buf_puts(&b, "<AccessControlList><Grant><Grantee xmlns:xsi=\"http://www.w3.org/"
                          "2001/XMLSchema-instance\" xsi:type=\"CanonicalUser\">");
    rc |= gw_xml_elem(&b, "ID", id);
    rc |= gw_xml_elem(&b, "DisplayName", id);
    rc |= gw_buf_puts(&b, "</Grantee><Permission>FULL_CONTROL</Permission></Grant>"
                          "</AccessControlList></AccessControlPolicy>");
    if (!rc) {
        gw_reply_xml_buf(r, 200, &b);
        return;
    }
    gw_buf_free(&b);
    gw_reply_error(r, S3E_INTERNAL, NULL, NULL);
}

void gw_h_acl_put(struct gw_req *r)
{
    if (acl_target_exists(r) != 0)
        return;
    const char *acl = gw_req_header(r, "x-amz-acl");
    bool body = r->xml_in.len > 0;
    if (!acl && !body && !has_grant_header(r)) {
        gw_reply_error(r, S3E_MISSING_SECURITY_HEADER, NULL,
                       "<MissingHeaderName>x-amz-acl</MissingHeaderName>");
        return;
    }
    bool owner_only = !has_grant_header(r) && (!acl || canned_acl_is_owner_only(acl));
    if (owner_only && body) {
        bool doc_owner_only;
        if (gw_xml_parse_acl(r->xml_in.data, r->xml_in.len, gw_owner_id(r),
                             &doc_owner_only) != 0) {
            gw_reply_error(r, S3E_MALFORMED_ACL, NULL, NULL);
            return;
        }
        owner_only = doc_owner_only;
    }
    if (!owner_only) {
        gw_reply_error(r, S3E_ACL_NOT_SUPPORTED, NULL, NULL);
        return;
    }
    gw_reply_body(r, 200, NULL, NULL, 0);   /* nothing to change: it is what holds */
}
