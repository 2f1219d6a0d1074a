/* tests/unit/test_gw_surface.c - what S3 checks of every request before its
 * operation (gw_req_check): the bucket name rule, versionId on an
 * unversioned bucket and the ACL headers of writes under BucketOwnerEnforced;
 * and the AccessControlPolicy bodies PutBucketAcl / PutObjectAcl accept. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "cu.h"
#include "gw_int.h"

static void request_checks_table(void)
{
    static const struct {
        const char *method, *uri;
        const char *hdr, *val;     /* one extra header, or NULL */
        int rc;
        enum s3_err err;
    } cases[] = {
        { "GET", "/good-bucket/k", NULL, NULL, 0, 0 },
        { "GET", "/Bad_Bucket/k", NULL, NULL, -1, S3E_INVALID_BUCKET_NAME },
        { "PUT", "/ab", NULL, NULL, -1, S3E_INVALID_BUCKET_NAME },
        { "GET", "/a..b?list-type=2", NULL, NULL, -1, S3E_INVALID_BUCKET_NAME },
        { "HEAD", "/192.168.0.1", NULL, NULL, -1, S3E_INVALID_BUCKET_NAME },
        { "GET", "/", NULL, NULL, 0, 0 },                              /* the service */
        { "GET", "/bkt/k?versionId=null", NULL, NULL, 0, 0 },
        { "DELETE", "/bkt/k?versionId=null", NULL, NULL, 0, 0 },
        { "GET", "/bkt/k?versionId=3HL4kqtJlcpXroDTDmJ", NULL, NULL, -1,
          S3E_INVALID_ARGUMENT },
        { "HEAD", "/bkt/k?versionId=", NULL, NULL, -1, S3E_INVALID_ARGUMENT },
        { "PUT", "/bkt/k", "x-amz-acl", "private", 0, 0 },
        { "PUT", "/bkt/k", "x-amz-acl", "bucket-owner-full-control", 0, 0 },
        { "PUT", "/bkt/k", "x-amz-acl", "public-read", -1, S3E_ACL_NOT_SUPPORTED },
        { "PUT", "/bkt/k", "x-amz-grant-read", "uri=\"http://acs.amazonaws.com/groups/"
                                               "global/AllUsers\"", -1, S3E_ACL_NOT_SUPPORTED },
        { "POST", "/bkt/k?uploads", "x-amz-acl", "authenticated-read", -1,
          S3E_ACL_NOT_SUPPORTED },
        { "PUT", "/bkt", "x-amz-acl", "private", 0, 0 },
        { "PUT", "/bkt", "x-amz-acl", "public-read-write", -1, S3E_INVALID_BUCKET_ACL },
        { "PUT", "/bkt", "x-amz-grant-full-control", "id=\"x\"", -1, S3E_INVALID_BUCKET_ACL },
        { "GET", "/bkt/k", "x-amz-acl", "public-read", 0, 0 },        /* not a write */
    };
    struct conf c;
    memset(&c, 0, sizeof c);
    for (size_t i = 0; i < CU_N(cases); i++) {
        struct gw_req r;
        memset(&r, 0, sizeof r);
        r.conf = &c;
        r.method = cases[i].method;
        struct auth_hdr h[1];
        if (cases[i].hdr)
            h[0] = (struct auth_hdr){ cases[i].hdr, cases[i].val };
        r.hdrs = h;
        r.n_hdrs = cases[i].hdr ? 1 : 0;
        enum s3_err err = S3E_COUNT;
        const char *msg;
        CU_ASSERT_EQUAL_FATAL(gw_req_parse(&r, cases[i].uri, &err, &msg), 0);
        int rc = gw_req_check(&r, &err, &msg);
        if (rc != cases[i].rc || (rc && err != cases[i].err))
            fprintf(stderr, "\ncase %zu %s %s: rc %d err %d\n", i, cases[i].method,
                    cases[i].uri, rc, (int)err);
        CU_ASSERT_EQUAL(rc, cases[i].rc);
        if (rc)
            CU_ASSERT_EQUAL(err, cases[i].err);
        gw_arena_free(&r.arena);
    }
}

static void acl_bodies_owner_full_control_only(void)
{
    static const char head[] =
        "<AccessControlPolicy xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        "<Owner><ID>me</ID></Owner><AccessControlList>";
    static const char owner_full[] =
        "<Grant><Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
        "xsi:type=\"CanonicalUser\"><ID>me</ID></Grantee>"
        "<Permission>FULL_CONTROL</Permission></Grant>";
    static const char public_read[] =
        "<Grant><Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
        "xsi:type=\"Group\"><URI>http://acs.amazonaws.com/groups/global/AllUsers</URI>"
        "</Grantee><Permission>READ</Permission></Grant>";
    static const char owner_read[] =
        "<Grant><Grantee><ID>me</ID></Grantee><Permission>READ</Permission></Grant>";
    static const char tail[] = "</AccessControlList></AccessControlPolicy>";
    static const struct {
        const char *grants;
        int rc;
        bool owner_only;
    } cases[] = {
        { owner_full, 0, true },
        { "", 0, false },                           /* nobody: not the owner's full control */
        { public_read, 0, false },
        { owner_read, 0, false },
        { "<Grant><Permission>READ</Permission></Grant>", -1, false },   /* no grantee */
    };
    char doc[2048];
    for (size_t i = 0; i < CU_N(cases); i++) {
        snprintf(doc, sizeof doc, "%s%s%s", head, cases[i].grants, tail);
        bool owner_only = !cases[i].owner_only;
        CU_ASSERT_EQUAL(gw_xml_parse_acl(doc, strlen(doc), "me", &owner_only), cases[i].rc);
        if (cases[i].rc == 0)
            CU_ASSERT_EQUAL(owner_only, cases[i].owner_only);
    }
    snprintf(doc, sizeof doc, "%s%s%s%s", head, owner_full, public_read, tail);
    bool owner_only = true;
    CU_ASSERT_EQUAL(gw_xml_parse_acl(doc, strlen(doc), "me", &owner_only), 0);
    CU_ASSERT_FALSE(owner_only);   /* the owner's grant plus another */
    CU_ASSERT_EQUAL(gw_xml_parse_acl("<Tagging/>", 10, "me", &owner_only), -1);
    CU_ASSERT_EQUAL(gw_xml_parse_acl("<AccessControlPolicy>", 21, "me", &owner_only), -1);
    CU_ASSERT_EQUAL(gw_xml_parse_acl("<AccessControlPolicy/>", 22, "me", &owner_only), -1);
}

int register_tests(void)
{
    static const struct cu_test tests[] = {
        { "request_checks_table", request_checks_table },
        { "acl_bodies_owner_full_control_only", acl_bodies_owner_full_control_only },
    };
    return cu_add_suite("gw_surface", NULL, NULL, tests, CU_N(tests));
}
