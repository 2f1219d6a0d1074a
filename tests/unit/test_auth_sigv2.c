/* tests/unit/test_auth_sigv2.c - Signature Version 2 verification: the AWS
 * documentation's examples, requests and presigned URLs made by boto3
 * (gen_auth_vectors.py --sigv2), every signed element tampered with, expiry
 * and clock skew, the malformed forms, the "sigv2": false switch, and the
 * identity and body rules a SigV2 request gets. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "auth.h"
#include "auth_int.h"

int register_tests(void);

#define AK "AKIAIOSFODNN7EXAMPLE"
#define SK "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define T0 ((time_t)1369353600)  /* 20130524T000000Z */
#define DOMAIN "s3.amazonaws.com"

static time_t g_now = T0;
static time_t test_clock(void) { return g_now; }

static struct conf_perm g_perms_example[] = { { "*", CONF_PERM_ADMIN } };
static struct conf_perm g_perms_reader[] = { { "examplebucket", CONF_PERM_READ } };
static struct conf_user g_users[2] = {
    { .name = "example", .access_key = AK, .secret_key = SK, .perms = g_perms_example,
      .n_perms = 1 },
    { .name = "reader", .access_key = "READERKEY", .secret_key = "reader-secret",
      .perms = g_perms_reader, .n_perms = 1 },
};
static struct conf g_conf;
static struct auth *g_auth;

/* ---- a mutable request ---- */

#define TR_MAX_HDRS 16
struct treq {
    char method[16];
    char path[512];
    char query[2048];
    char names[TR_MAX_HDRS][64];
    char values[TR_MAX_HDRS][512];
    struct auth_hdr h[TR_MAX_HDRS];
    size_t n;
};

static void tr_init(struct treq *t, const char *method, const char *path, const char *query)
{
    memset(t, 0, sizeof *t);
    snprintf(t->method, sizeof t->method, "%s", method);
    snprintf(t->path, sizeof t->path, "%s", path);
    snprintf(t->query, sizeof t->query, "%s", query);
}

static void tr_add(struct treq *t, const char *name, const char *value)
{
    CU_ASSERT_FATAL(t->n < TR_MAX_HDRS);
    snprintf(t->names[t->n], sizeof t->names[0], "%s", name);
    snprintf(t->values[t->n], sizeof t->values[0], "%s", value);
    t->n++;
}

static void tr_set(struct treq *t, const char *name, const char *value)
{
    for (size_t i = 0; i < t->n; i++) {
        if (strcmp(t->names[i], name) == 0) {
            snprintf(t->values[i], sizeof t->values[0], "%s", value);
            return;
        }
    }
    tr_add(t, name, value);
}

static void tr_del(struct treq *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++) {
        if (strcmp(t->names[i], name) == 0) {
            memmove(t->names[i], t->names[i + 1], (t->n - i - 1) * sizeof t->names[0]);
            memmove(t->values[i], t->values[i + 1], (t->n - i - 1) * sizeof t->values[0]);
            t->n--;
            return;
        }
    }
}

static const char *tr_get(const struct treq *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->names[i], name) == 0)
            return t->values[i];
    return NULL;
}

static struct auth_req tr_view(struct treq *t)
{
    for (size_t i = 0; i < t->n; i++) {
        t->h[i].name = t->names[i];
        t->h[i].value = t->values[i];
    }
    struct auth_req r = { t->method, t->path, t->query, t->h, t->n };
    return r;
}

/* Verifies t; on AUTH_OK hands back the context when ctx_out is given. */
static enum auth_status tr_verify_ctx(struct treq *t, struct auth_ctx **ctx_out)
{
    struct auth_req r = tr_view(t);
    struct auth_ctx *ctx = NULL;
    enum auth_status st = auth_verify(g_auth, &r, &ctx);
    if (st == AUTH_OK) {
        CU_ASSERT_PTR_NOT_NULL(ctx);
    } else {
        CU_ASSERT_PTR_NULL(ctx);
    }
    if (ctx_out)
        *ctx_out = ctx;
    else
        auth_ctx_free(ctx);
    return st;
}

static enum auth_status tr_verify(struct treq *t)
{
    return tr_verify_ctx(t, NULL);
}

/* Query edits on the raw query string. */
static void q_append(struct treq *t, const char *param)
{
    size_t n = strlen(t->query);
    snprintf(t->query + n, sizeof t->query - n, "%s%s", n ? "&" : "", param);
}

/* Replaces the value of parameter `name` (its first occurrence). */
static void q_set(struct treq *t, const char *name, const char *value)
{
    char out[sizeof t->query];
    size_t nl = strlen(name), o = 0;
    const char *p = t->query;
    bool done = false;
    out[0] = '\0';
    while (*p) {
        size_t len = strcspn(p, "&");
        if (!done && strncmp(p, name, nl) == 0 && p[nl] == '=') {
            o += (size_t)snprintf(out + o, sizeof out - o, "%s%s=%s", o ? "&" : "", name, value);
            done = true;
        } else {
            o += (size_t)snprintf(out + o, sizeof out - o, "%s%.*s", o ? "&" : "", (int)len, p);
        }
        p += len;
        if (*p == '&')
            p++;
    }
    CU_ASSERT_FATAL(done);
    snprintf(t->query, sizeof t->query, "%s", out);
}

/* ---- the AWS documentation's examples ---- */

struct doc_example {
    const char *name;
    const char *vhost_domain;
    time_t now;
    const char *method, *path, *query;
    size_t n_hdrs;
    struct auth_hdr hdrs[12];
};

/* "Signing and authenticating REST requests (AWS signature version 2)" */
static const struct doc_example doc_examples[] = {
    { "object_get", "s3.us-west-1.amazonaws.com", 1175024202, "GET", "/photos/puppy.jpg", "", 3,
      { { "host", "awsexamplebucket1.s3.us-west-1.amazonaws.com" },
        { "date", "Tue, 27 Mar 2007 19:36:42 +0000" },
        { "authorization", "AWS " AK ":qgk2+6Sv9/oM7G3qLEjTH1a1l1g=" } } },
    { "object_put", "s3.us-west-1.amazonaws.com", 1175030145, "PUT", "/photos/puppy.jpg", "", 5,
      { { "content-type", "image/jpeg" },
        { "content-length", "94328" },
        { "host", "awsexamplebucket1.s3.us-west-1.amazonaws.com" },
        { "date", "Tue, 27 Mar 2007 21:15:45 +0000" },
        { "authorization", "AWS " AK ":iqRzw+ileNPu1fhspnRs8nOjjIA=" } } },
    { "list", "s3.us-west-1.amazonaws.com", 1175024561, "GET", "/",
      "prefix=photos&max-keys=50&marker=puppy", 4,
      { { "user-agent", "Mozilla/5.0" },
        { "host", "awsexamplebucket1.s3.us-west-1.amazonaws.com" },
        { "date", "Tue, 27 Mar 2007 19:42:41 +0000" },
        { "authorization", "AWS " AK ":m0WP8eCtspQl5Ahe6L1SozdX9YA=" } } },
    { "fetch_acl", "s3.us-west-1.amazonaws.com", 1175024686, "GET", "/", "acl", 3,
      { { "host", "awsexamplebucket1.s3.us-west-1.amazonaws.com" },
        { "date", "Tue, 27 Mar 2007 19:44:46 +0000" },
        { "authorization", "AWS " AK ":82ZHiFIjc+WbcwFKGUVEQspPn+0=" } } },
    /* x-amz-date takes the Date line and Date is ignored */
    { "delete_x_amz_date", "s3.us-west-1.amazonaws.com", 1175030426, "DELETE",
      "/awsexamplebucket1/photos/puppy.jpg", "", 5,
      { { "user-agent", "dotnet" },
        { "host", "s3.us-west-1.amazonaws.com" },
        { "date", "Tue, 27 Mar 2007 21:20:27 +0000" },
        { "x-amz-date", "Tue, 27 Mar 2007 21:20:26 +0000" },
        { "authorization", "AWS " AK ":XbyTlbQdu9Xw5o8P4iMwPktxQd8=" } } },
    /* x-amz-* headers: lower case, sorted, repeated ones joined */
    { "upload_amz_headers", NULL, 1175029568, "PUT", "/static.example.com/db-backup.dat.gz", "",
      12,
      { { "user-agent", "curl/7.15.5" },
        { "host", "static.example.com:8080" },
        { "date", "Tue, 27 Mar 2007 21:06:08 +0000" },
        { "x-amz-acl", "public-read" },
        { "content-type", "application/x-download" },
        { "content-md5", "4gJE4saaMU4BqNR0kLY+lw==" },
        { "x-amz-meta-reviewedby", "joe@example.com" },
        { "x-amz-meta-reviewedby", "jane@example.com" },
        { "x-amz-meta-filechecksum", "0x02661779" },
        { "x-amz-meta-checksumalgorithm", "crc32" },
        { "content-disposition", "attachment; filename=database.dat" },
        { "authorization", "AWS " AK ":jtBQa0Aq+DkULFI8qrpwIjGEx0E=" } } },
    { "list_all_buckets", NULL, 1175045399, "GET", "/", "", 3,
      { { "host", "s3.us-west-1.amazonaws.com" },
        { "date", "Wed, 28 Mar 2007 01:29:59 +0000" },
        { "authorization", "AWS " AK ":qGdzdERIC03wnaRNKh6OqZehG9s=" } } },
    /* the path is signed as sent, escapes in the case they were sent */
    { "unicode_keys", NULL, 1175046589, "GET", "/dictionary/fran%C3%A7ais/pr%c3%a9f%c3%a8re", "",
      3,
      { { "host", "s3.us-west-1.amazonaws.com" },
        { "date", "Wed, 28 Mar 2007 01:49:49 +0000" },
        { "authorization", "AWS " AK ":DNEZGsoieTZ92F3bUfSPQcbGmlM=" } } },
    { "query_string_auth", "s3.amazonaws.com", 1175139000, "GET", "/photos/puppy.jpg",
      "AWSAccessKeyId=" AK "&Signature=NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D&Expires=1175139620", 1,
      { { "host", "johnsmith.s3.amazonaws.com" } } },
};

static void aws_doc_examples_verify(void)
{
    for (size_t i = 0; i < sizeof doc_examples / sizeof doc_examples[0]; i++) {
        const struct doc_example *e = &doc_examples[i];
        struct auth_req r = { e->method, e->path, e->query, e->hdrs, e->n_hdrs };
        struct auth_ctx *ctx = NULL;
        g_conf.vhost_domain = (char *)e->vhost_domain;
        g_now = e->now;
        enum auth_status st = auth_verify(g_auth, &r, &ctx);
        if (st != AUTH_OK)
            fprintf(stderr, "\n%s: %s\n", e->name, auth_status_name(st));
        CU_ASSERT_EQUAL(st, AUTH_OK);
        if (ctx)
            CU_ASSERT_PTR_EQUAL(auth_ctx_user(ctx), &g_users[0]);
        auth_ctx_free(ctx);
    }
    g_conf.vhost_domain = DOMAIN;
    g_now = T0;
}

static void aws_doc_upload_string_to_sign(void)
{
    const struct doc_example *e = &doc_examples[5];
    struct auth_req r = { e->method, e->path, e->query, e->hdrs, e->n_hdrs };
    struct auth_v2_sts o = { false, "Tue, 27 Mar 2007 21:06:08 +0000", false, true, NULL };
    struct sg_buf b;
    sg_buf_init(&b, 1 << 16);
    CU_ASSERT_EQUAL(auth_sigv2_string_to_sign(&r, &o, &b), AUTH_OK);
    CU_ASSERT_STRING_EQUAL(b.p, "PUT\n4gJE4saaMU4BqNR0kLY+lw==\napplication/x-download\n"
                                "Tue, 27 Mar 2007 21:06:08 +0000\nx-amz-acl:public-read\n"
                                "x-amz-meta-checksumalgorithm:crc32\n"
                                "x-amz-meta-filechecksum:0x02661779\n"
                                "x-amz-meta-reviewedby:joe@example.com,jane@example.com\n"
                                "/static.example.com/db-backup.dat.gz");
    char sig[29];
    CU_ASSERT_EQUAL(auth_sigv2_sign(SK, b.p, b.len, sig), 0);
    CU_ASSERT_STRING_EQUAL(sig, "jtBQa0Aq+DkULFI8qrpwIjGEx0E=");
    sg_buf_free(&b);
}

/* ---- boto3 vectors ---- */

struct gen_vec {
    const char *name, *method, *path, *query;
    size_t n_hdrs;
    struct auth_hdr hdrs[12];
};

/* BEGIN GENERATED VECTORS (tests/unit/gen_auth_vectors.py) */
/* boto3 with botocore 1.43.11, signed at 20130524T000000Z, vhost_domain s3.amazonaws.com */
static const struct gen_vec gen_vecs[] = {
    { "get_path_style_odd_key", "GET", "/examplebucket/my%20photos/%C3%BCn%C3%AFc%2B%E2%98%83%20%281%29~%21%2A%27.jpg", "", 4, {
        { "host", "s3.amazonaws.com" },
        { "x-amz-checksum-mode", "ENABLED" },
        { "date", "Fri, 24 May 2013 00:00:00 GMT" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:ICXV5twp91Ifn2/lXArLDawmu7E=" },
    } },
    { "get_virtual_hosted", "GET", "/dir/a%20b.txt", "", 4, {
        { "host", "examplebucket.s3.amazonaws.com" },
        { "x-amz-checksum-mode", "ENABLED" },
        { "date", "Fri, 24 May 2013 00:00:00 GMT" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:Dlm9gOE9dw3MvQhgyYP5aTOjqgA=" },
    } },
    { "get_response_overrides_version", "GET", "/examplebucket/k", "versionId=null&response-content-disposition=attachment%3B%20filename%3D%22x%20y.bin%22&response-content-type=application%2Fx-y&response-cache-control=no-cache", 4, {
        { "host", "s3.amazonaws.com" },
        { "x-amz-checksum-mode", "ENABLED" },
        { "date", "Fri, 24 May 2013 00:00:00 GMT" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:e66XJNntk3W+ENcu+uXRN6lY4sM=" },
    } },
    { "put_meta_type_storage_class", "PUT", "/examplebucket/up/load.bin", "", 9, {
        { "host", "s3.amazonaws.com" },
        { "content-type", "text/plain" },
        { "x-amz-meta-note", "  two  spaces " },
        { "x-amz-meta-b", "2" },
        { "x-amz-storage-class", "STANDARD" },
        { "x-amz-checksum-crc32", "DUoRhQ==" },
        { "x-amz-sdk-checksum-algorithm", "CRC32" },
        { "date", "Fri, 24 May 2013 00:00:00 GMT" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:vrVyUl7g6eHC6ofAxeeJ2rkhC6s=" },
    } },
    { "put_virtual_hosted_content_md5", "PUT", "/m.bin", "", 6, {
        { "host", "examplebucket.s3.amazonaws.com" },
        { "content-md5", "kAFQmDzST7DWlj99KOF/cg==" },
        { "x-amz-checksum-crc32", "NSRBwg==" },
        { "x-amz-sdk-checksum-algorithm", "CRC32" },
        { "date", "Fri, 24 May 2013 00:00:00 GMT" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:gblnNydrmD1OxMPtOVgb7BUsSc8=" },
    } },
    { "copy_object_source_header", "PUT", "/examplebucket/dst", "", 4, {
        { "host", "s3.amazonaws.com" },
        { "x-amz-copy-source", "srcbucket/src%20key" },
        { "date", "Fri, 24 May 2013 00:00:00 GMT" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:dMOAqsXiEkGDbXSdFtcYvS4OAg4=" },
    } },
    { "create_multipart_uploads", "POST", "/examplebucket/big.bin", "uploads", 3, {
        { "host", "s3.amazonaws.com" },
        { "date", "Fri, 24 May 2013 00:00:00 GMT" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:wJn3o3sS9Bd9cMPGp4zlsXnxGxo=" },
    } },
    { "upload_part_number_upload_id", "PUT", "/examplebucket/big.bin", "uploadId=2~abc-DEF_9.x&partNumber=3", 5, {
        { "host", "s3.amazonaws.com" },
        { "x-amz-checksum-crc32", "SQ9wxg==" },
        { "x-amz-sdk-checksum-algorithm", "CRC32" },
        { "date", "Fri, 24 May 2013 00:00:00 GMT" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:J/iUV/w7OuS5rO2VDJd4oP/5hC0=" },
    } },
    { "complete_multipart", "POST", "/big.bin", "uploadId=2~abc", 3, {
        { "host", "examplebucket.s3.amazonaws.com" },
        { "date", "Fri, 24 May 2013 00:00:00 GMT" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:r8k9QnB711j5PLph/4CybSjrDeo=" },
    } },
    { "list_objects_unsigned_params", "GET", "/examplebucket", "prefix=a%2Fb%20c&delimiter=%2F&max-keys=10&encoding-type=url", 3, {
        { "host", "s3.amazonaws.com" },
        { "date", "Fri, 24 May 2013 00:00:00 GMT" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:Ts2zYqkUUf9ZwjrrmHXZiV5kF3E=" },
    } },
    { "list_objects_v2_virtual_hosted_root", "GET", "/", "list-type=2&prefix=p&encoding-type=url", 3, {
        { "host", "examplebucket.s3.amazonaws.com" },
        { "date", "Fri, 24 May 2013 00:00:00 GMT" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:Ts2zYqkUUf9ZwjrrmHXZiV5kF3E=" },
    } },
    { "delete_objects", "POST", "/examplebucket", "delete", 5, {
        { "host", "s3.amazonaws.com" },
        { "x-amz-checksum-crc32", "00/vwA==" },
        { "x-amz-sdk-checksum-algorithm", "CRC32" },
        { "date", "Fri, 24 May 2013 00:00:00 GMT" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:SkyvpVufTSGoAVhnj5In1XUGGR4=" },
    } },
    { "get_bucket_location", "GET", "/examplebucket", "location", 3, {
        { "host", "s3.amazonaws.com" },
        { "date", "Fri, 24 May 2013 00:00:00 GMT" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:HGcQeEl2/c43T24Hw7fodNERhlQ=" },
    } },
    { "get_object_tagging", "GET", "/t", "tagging", 3, {
        { "host", "examplebucket.s3.amazonaws.com" },
        { "date", "Fri, 24 May 2013 00:00:00 GMT" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:BsyLTbUpyh77fGl2Y4bH0mhkTME=" },
    } },
    { "list_buckets", "GET", "/", "", 3, {
        { "host", "s3.amazonaws.com" },
        { "date", "Fri, 24 May 2013 00:00:00 GMT" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:LmMMufbDz0HS5njYUhVCdBuXpdU=" },
    } },
    { "head_object", "HEAD", "/examplebucket/h", "", 3, {
        { "host", "s3.amazonaws.com" },
        { "date", "Fri, 24 May 2013 00:00:00 GMT" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:xUfWStqDvrwMCRvxBp8bdt3ygFw=" },
    } },
    { "presigned_get_default", "GET", "/examplebucket/shards/shard-000001.tar", "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Signature=d2U9mdtvyL8SCqD%2BAJrPR3Yz2WI%3D&Expires=1369357200", 1, {
        { "host", "s3.amazonaws.com" },
    } },
    { "presigned_get_odd_key", "GET", "/examplebucket/a%20b/c%2Bd%20%C3%A9.txt", "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Signature=OJUG6CsgD6SuMs1Qte3kdZk3OzU%3D&Expires=1369357200", 1, {
        { "host", "s3.amazonaws.com" },
    } },
    { "presigned_get_virtual_hosted", "GET", "/k", "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Signature=bvEPbt%2FirSWgRaQ2W%2BtraQG09FA%3D&Expires=1369357200", 1, {
        { "host", "examplebucket.s3.amazonaws.com" },
    } },
    { "presigned_get_response_overrides", "GET", "/examplebucket/k", "response-content-disposition=attachment%3B%20filename%3D%22r%26d.txt%22&response-content-type=text%2Fplain%3B%20charset%3Dutf-8&AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Signature=3ywuPoDr8EXdS15sdKILIouqHc8%3D&Expires=1369357200", 1, {
        { "host", "s3.amazonaws.com" },
    } },
    { "presigned_put_content_type", "PUT", "/examplebucket/up.bin", "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Signature=FAwv%2FYwHIFXh4bo%2FCVMQwbrjzjk%3D&content-type=text%2Fplain&Expires=1369357200", 1, {
        { "host", "s3.amazonaws.com" },
    } },
    { "presigned_get_7_days", "GET", "/examplebucket/k", "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Signature=o0G9JV14unXyg%2FCnz2JMkDP%2FNQY%3D&Expires=1369958400", 1, {
        { "host", "s3.amazonaws.com" },
    } },
    { "presigned_get_session_token", "GET", "/k", "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Signature=daNbowhnY4QA23bVqrzFwmtdjKw%3D&x-amz-security-token=FQoGZXIvYXdzE%2F%2B%3Dtoken&Expires=1369357200", 1, {
        { "host", "examplebucket.s3.amazonaws.com" },
    } },
    { "presigned_list_objects", "GET", "/examplebucket", "prefix=p%2F&encoding-type=url&AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Signature=INGhiFr9NOGYSEx72ZsIaYThC4I%3D&Expires=1369357200", 1, {
        { "host", "s3.amazonaws.com" },
    } },
    { "s3cmd_style_x_amz_date", "GET", "/examplebucket/k", "", 3, {
        { "host", "s3.amazonaws.com" },
        { "x-amz-date", "Fri, 24 May 2013 00:00:00 +0000" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:mGwQJCNuGi/SjKAt4YBB5jYX7zM=" },
    } },
    { "s3cmd_style_bucket_uploads", "GET", "/examplebucket/", "uploads", 3, {
        { "host", "s3.amazonaws.com" },
        { "x-amz-date", "Fri, 24 May 2013 00:00:00 +0000" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:me5DRhDtKJPwXvf2RgsLV6XbHV4=" },
    } },
    { "bucket_path_signed_as_sent", "GET", "/examplebucket", "", 3, {
        { "host", "s3.amazonaws.com" },
        { "date", "Fri, 24 May 2013 00:00:00 GMT" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:WyIjSBlUUvksaIjSQWbDmkO/L7E=" },
    } },
    { "date_rfc850", "GET", "/examplebucket/k", "", 3, {
        { "host", "s3.amazonaws.com" },
        { "date", "Friday, 24-May-13 00:00:00 GMT" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:fTUTVt0ZHbnZin2GCVUi4a5hi90=" },
    } },
    { "date_asctime", "GET", "/examplebucket/k", "", 3, {
        { "host", "s3.amazonaws.com" },
        { "date", "Fri May 24 00:00:00 2013" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:2jwaxyCIWYUVc1W5N7u4rhkqM+I=" },
    } },
    { "repeated_amz_header", "PUT", "/examplebucket/k", "", 6, {
        { "host", "s3.amazonaws.com" },
        { "date", "Fri, 24 May 2013 00:00:00 GMT" },
        { "x-amz-meta-r", "a" },
        { "x-amz-meta-r", " b " },
        { "x-amz-acl", "private" },
        { "authorization", "AWS AKIAIOSFODNN7EXAMPLE:hAVdl26i8lYwPzIAguE+PXuaXfk=" },
    } },
};
/* END GENERATED VECTORS */

#define N_VECS (sizeof gen_vecs / sizeof gen_vecs[0])

static void vec_to_treq(const struct gen_vec *v, struct treq *t)
{
    tr_init(t, v->method, v->path, v->query);
    for (size_t i = 0; i < v->n_hdrs; i++)
        tr_add(t, v->hdrs[i].name, v->hdrs[i].value);
}

static void boto3_vectors_verify_ok(void)
{
    for (size_t i = 0; i < N_VECS; i++) {
        struct treq t;
        struct auth_ctx *ctx = NULL;
        vec_to_treq(&gen_vecs[i], &t);
        enum auth_status st = tr_verify_ctx(&t, &ctx);
        if (st != AUTH_OK)
            fprintf(stderr, "\n%s: %s\n", gen_vecs[i].name, auth_status_name(st));
        CU_ASSERT_EQUAL(st, AUTH_OK);
        if (ctx) {
            CU_ASSERT_PTR_EQUAL(auth_ctx_user(ctx), &g_users[0]);
            CU_ASSERT_EQUAL(auth_ctx_payload(ctx), AUTH_PAYLOAD_UNSIGNED);
        }
        auth_ctx_free(ctx);
    }
}

/* One change to a signed element each; every one must break every vector. */
typedef void (*mutate_fn)(struct treq *t);

static void mut_path_byte(struct treq *t) { strcat(t->path, "x"); }
static void mut_path_other_case(struct treq *t)
{
    char *p = strrchr(t->path, '/');
    for (p = p ? p : t->path; *p; p++)
        if (*p >= 'a' && *p <= 'z') {
            *p = (char)(*p - 'a' + 'A');
            return;
        }
    strcat(t->path, "X");
}
static void mut_method(struct treq *t)
{
    snprintf(t->method, sizeof t->method, "%s", strcmp(t->method, "DELETE") ? "DELETE" : "GET");
}
static void mut_add_subresource(struct treq *t) { q_append(t, "acl"); }
static void mut_add_upload_id(struct treq *t) { q_append(t, "uploadId=x"); }
static void mut_add_response_override(struct treq *t)
{
    q_append(t, "response-content-type=text%2Fhtml");
}
static void mut_add_prefetch(struct treq *t) { q_append(t, "prefetch"); }
static void mut_add_job(struct treq *t) { q_append(t, "job=7"); }
static void mut_add_amz_header(struct treq *t) { tr_add(t, "x-amz-acl", "public-read"); }
static void mut_content_type(struct treq *t) { tr_set(t, "content-type", "text/html"); }
static void mut_content_md5(struct treq *t) { tr_set(t, "content-md5", "XUFAKrxLKna5cZ2REBfFkg=="); }
static void mut_host_bucket(struct treq *t)
{
    /* path-style becomes virtual-hosted for another bucket, and back */
    const char *h = tr_get(t, "host");
    tr_set(t, "host", h && strcmp(h, DOMAIN) == 0 ? "otherbucket." DOMAIN : DOMAIN);
}

static void every_signed_element_changed_gives_signature_mismatch(void)
{
    static const struct { const char *name; mutate_fn fn; } muts[] = {
        { "path_byte", mut_path_byte },
        { "path_letter_case", mut_path_other_case },
        { "method", mut_method },
        { "added_subresource_acl", mut_add_subresource },
        { "added_upload_id", mut_add_upload_id },
        { "added_response_override", mut_add_response_override },
        { "added_prefetch", mut_add_prefetch },
        { "added_prefetch_job", mut_add_job },
        { "added_x_amz_header", mut_add_amz_header },
        { "content_type", mut_content_type },
        { "content_md5", mut_content_md5 },
        { "host_bucket", mut_host_bucket },
    };
    for (size_t i = 0; i < N_VECS; i++) {
        for (size_t m = 0; m < sizeof muts / sizeof muts[0]; m++) {
            struct treq t;
            vec_to_treq(&gen_vecs[i], &t);
            muts[m].fn(&t);
            enum auth_status st = tr_verify(&t);
            if (st != AUTH_SIGNATURE_MISMATCH)
                fprintf(stderr, "\n%s / %s: %s\n", gen_vecs[i].name, muts[m].name,
                        auth_status_name(st));
            CU_ASSERT_EQUAL(st, AUTH_SIGNATURE_MISMATCH);
        }
    }
}

static void unsigned_parts_may_change(void)
{
    /* S3 signs neither these headers nor these parameters with SigV2 */
    for (size_t i = 0; i < N_VECS; i++) {
        struct treq t;
        vec_to_treq(&gen_vecs[i], &t);
        tr_add(&t, "range", "bytes=0-9");
        tr_add(&t, "user-agent", "another");
        q_append(&t, "max-keys=5");
        q_append(&t, "x-id=GetObject");
        CU_ASSERT_EQUAL(tr_verify(&t), AUTH_OK);
    }
}

static void changed_subresource_value_gives_signature_mismatch(void)
{
    struct treq t;
    for (size_t i = 0; i < N_VECS; i++) {
        const struct gen_vec *v = &gen_vecs[i];
        const char *params[] = { "uploadId", "partNumber", "versionId",
                                 "response-content-disposition" };
        for (size_t k = 0; k < sizeof params / sizeof params[0]; k++) {
            char needle[64];
            snprintf(needle, sizeof needle, "%s=", params[k]);
            if (strncmp(v->query, needle, strlen(needle)) != 0 &&
                !strstr(v->query, needle))
                continue;
            vec_to_treq(v, &t);
            q_set(&t, params[k], "2");
            CU_ASSERT_EQUAL(tr_verify(&t), AUTH_SIGNATURE_MISMATCH);
        }
    }
    /* the gateway reads '+' in a query value as a space: a literal '+' may
     * stand for a signed %20, never for a signed %2B */
    const struct gen_vec *v = NULL;
    for (size_t i = 0; i < N_VECS; i++)
        if (strcmp(gen_vecs[i].name, "get_response_overrides_version") == 0)
            v = &gen_vecs[i];
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    vec_to_treq(v, &t);
    char *sp = strstr(t.query, "%20");
    CU_ASSERT_PTR_NOT_NULL_FATAL(sp);
    memmove(sp + 1, sp + 3, strlen(sp + 3) + 1);
    *sp = '+';
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_OK);
    vec_to_treq(v, &t);
    sp = strstr(t.query, "%20");
    sp[1] = '2';
    sp[2] = 'B';
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_SIGNATURE_MISMATCH);
}

static const struct gen_vec *vec_named(const char *name)
{
    for (size_t i = 0; i < N_VECS; i++)
        if (strcmp(gen_vecs[i].name, name) == 0)
            return &gen_vecs[i];
    CU_FAIL_FATAL("no such vector");
    return NULL;
}

static void presigned_tampering(void)
{
    struct treq t;
    const struct gen_vec *v = vec_named("presigned_get_default");
    /* Expires moved later: the signature no longer covers it */
    vec_to_treq(v, &t);
    q_set(&t, "Expires", "1369357201");
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_SIGNATURE_MISMATCH);
    /* Expires moved into the past: expired before anything else */
    vec_to_treq(v, &t);
    q_set(&t, "Expires", "1369353599");
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_EXPIRED);
    /* one signature character */
    vec_to_treq(v, &t);
    char *s = strstr(t.query, "Signature=") + 10;
    *s = *s == 'A' ? 'B' : 'A';
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_SIGNATURE_MISMATCH);
    /* a truncated signature */
    vec_to_treq(v, &t);
    q_set(&t, "Signature", "d2U9mdtvyL8SCqD");
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_SIGNATURE_MISMATCH);
    /* another user's key with this signature */
    vec_to_treq(v, &t);
    q_set(&t, "AWSAccessKeyId", "READERKEY");
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_SIGNATURE_MISMATCH);
    /* an unknown key */
    vec_to_treq(v, &t);
    q_set(&t, "AWSAccessKeyId", "NOBODY");
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_UNKNOWN_KEY);
    /* the signed x-amz-security-token of a presigned URL */
    vec_to_treq(vec_named("presigned_get_session_token"), &t);
    q_set(&t, "x-amz-security-token", "other");
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_SIGNATURE_MISMATCH);
    /* a presigned PUT's content-type: from the header when sent, else from
     * the URL; either must be the signed one */
    v = vec_named("presigned_put_content_type");
    vec_to_treq(v, &t);
    tr_add(&t, "content-type", "text/plain");
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_OK);
    tr_set(&t, "content-type", "application/octet-stream");
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_SIGNATURE_MISMATCH);
}

static void presigned_expiry_boundaries(void)
{
    static const struct { const char *vec; time_t now; enum auth_status want; } cases[] = {
        { "presigned_get_default", T0, AUTH_OK },
        { "presigned_get_default", T0 + 3600, AUTH_OK },
        { "presigned_get_default", T0 + 3601, AUTH_EXPIRED },
        { "presigned_get_default", T0 - 86400, AUTH_OK },   /* no "not yet valid" in SigV2 */
        { "presigned_get_7_days", T0 + 604800, AUTH_OK },
        { "presigned_get_7_days", T0 + 604801, AUTH_EXPIRED },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct treq t;
        vec_to_treq(vec_named(cases[i].vec), &t);
        g_now = cases[i].now;
        CU_ASSERT_EQUAL(tr_verify(&t), cases[i].want);
    }
    g_now = T0;
}

static void header_clock_skew_and_dates(void)
{
    static const struct { const char *vec; time_t now; enum auth_status want; } cases[] = {
        { "get_virtual_hosted", T0 + 900, AUTH_OK },
        { "get_virtual_hosted", T0 + 901, AUTH_TIME_SKEWED },
        { "get_virtual_hosted", T0 - 900, AUTH_OK },
        { "get_virtual_hosted", T0 - 901, AUTH_TIME_SKEWED },
        { "s3cmd_style_x_amz_date", T0 + 901, AUTH_TIME_SKEWED },
        { "s3cmd_style_x_amz_date", T0 - 900, AUTH_OK },
        { "date_rfc850", T0 + 900, AUTH_OK },
        { "date_rfc850", T0 + 901, AUTH_TIME_SKEWED },
        { "date_asctime", T0 - 901, AUTH_TIME_SKEWED },
        { "date_asctime", T0, AUTH_OK },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct treq t;
        vec_to_treq(vec_named(cases[i].vec), &t);
        g_now = cases[i].now;
        enum auth_status st = tr_verify(&t);
        if (st != cases[i].want)
            fprintf(stderr, "\n%s at T0%+ld: %s\n", cases[i].vec, (long)(cases[i].now - T0),
                    auth_status_name(st));
        CU_ASSERT_EQUAL(st, cases[i].want);
    }
    g_now = T0;
    struct treq t;
    /* no date at all */
    vec_to_treq(vec_named("get_virtual_hosted"), &t);
    tr_del(&t, "date");
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_MISSING_DATE);
    tr_add(&t, "date", "yesterday");
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_MISSING_DATE);
    /* an x-amz-date added to a Date-signed request replaces Date as the
     * signed date: another instant breaks the signature; the very value
     * signed as Date is the documentation's form (x-amz-date on the Date
     * line) and changes nothing */
    vec_to_treq(vec_named("get_virtual_hosted"), &t);
    tr_add(&t, "x-amz-date", "Fri, 24 May 2013 00:00:01 GMT");
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_SIGNATURE_MISMATCH);
    tr_set(&t, "x-amz-date", "Fri, 24 May 2013 00:00:00 GMT");
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_OK);
    /* a Date beside s3cmd's x-amz-date is ignored */
    vec_to_treq(vec_named("s3cmd_style_x_amz_date"), &t);
    tr_add(&t, "date", "Sat, 25 May 2013 00:00:00 GMT");
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_OK);
    /* the same instant written another way is another string to sign */
    vec_to_treq(vec_named("get_virtual_hosted"), &t);
    tr_set(&t, "date", "Fri, 24 May 2013 00:00:00 +0000");
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_SIGNATURE_MISMATCH);
}

static void malformed_forms(void)
{
    static const struct { const char *name, *authz, *query; enum auth_status want; } cases[] = {
        { "header_no_colon", "AWS " AK, "", AUTH_MALFORMED },
        { "header_no_key", "AWS :c2lnbmF0dXJl", "", AUTH_MALFORMED },
        { "header_no_signature", "AWS " AK ":", "", AUTH_MALFORMED },
        { "header_nothing", "AWS ", "", AUTH_MALFORMED },
        { "header_unknown_key", "AWS NOBODY:Dlm9gOE9dw3MvQhgyYP5aTOjqgA=", "", AUTH_UNKNOWN_KEY },
        { "header_bad_signature", "AWS " AK ":Dlm9gOE9dw3MvQhgyYP5aTOjqgB=", "",
          AUTH_SIGNATURE_MISMATCH },
        { "header_with_sigv4_query", "AWS " AK ":Dlm9gOE9dw3MvQhgyYP5aTOjqgA=",
          "X-Amz-Signature=00", AUTH_MALFORMED },
        { "header_with_sigv2_query", "AWS " AK ":Dlm9gOE9dw3MvQhgyYP5aTOjqgA=",
          "AWSAccessKeyId=" AK "&Signature=x&Expires=1", AUTH_MALFORMED },
        { "sigv4_header_with_sigv2_query",
          "AWS4-HMAC-SHA256 Credential=x, SignedHeaders=host, Signature=0",
          "Signature=x", AUTH_MALFORMED },
        { "query_no_expires", NULL, "AWSAccessKeyId=" AK "&Signature=x", AUTH_QUERY_INCOMPLETE },
        { "query_no_key", NULL, "Signature=x&Expires=1369357200", AUTH_QUERY_INCOMPLETE },
        { "query_no_signature", NULL, "AWSAccessKeyId=" AK "&Expires=1369357200",
          AUTH_QUERY_INCOMPLETE },
        { "query_two_signatures", NULL,
          "AWSAccessKeyId=" AK "&Signature=x&Signature=y&Expires=1369357200",
          AUTH_QUERY_MALFORMED },
        { "query_expires_not_number", NULL, "AWSAccessKeyId=" AK "&Signature=x&Expires=soon",
          AUTH_QUERY_MALFORMED },
        { "query_expires_negative", NULL, "AWSAccessKeyId=" AK "&Signature=x&Expires=-1",
          AUTH_QUERY_MALFORMED },
        { "query_expires_too_long", NULL,
          "AWSAccessKeyId=" AK "&Signature=x&Expires=9999999999999", AUTH_QUERY_MALFORMED },
        { "query_with_sigv4_query", NULL,
          "AWSAccessKeyId=" AK "&Signature=x&Expires=1&X-Amz-Credential=y",
          AUTH_QUERY_MALFORMED },
        { "query_only_expires_is_anonymous", NULL, "Expires=1", AUTH_OK },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct treq t;
        tr_init(&t, "GET", "/k", cases[i].query);
        tr_add(&t, "host", "examplebucket." DOMAIN);
        tr_add(&t, "date", "Fri, 24 May 2013 00:00:00 GMT");
        if (cases[i].authz)
            tr_add(&t, "authorization", cases[i].authz);
        enum auth_status st = tr_verify(&t);
        if (st != cases[i].want)
            fprintf(stderr, "\n%s: got %s want %s\n", cases[i].name, auth_status_name(st),
                    auth_status_name(cases[i].want));
        CU_ASSERT_EQUAL(st, cases[i].want);
    }
}

static void turned_off_refuses_both_forms(void)
{
    g_conf.sigv2 = false;
    for (size_t i = 0; i < N_VECS; i++) {
        struct treq t;
        vec_to_treq(&gen_vecs[i], &t);
        CU_ASSERT_EQUAL(tr_verify(&t), AUTH_SIGV2_DISABLED);
    }
    /* even a malformed or expired one says why */
    struct treq t;
    tr_init(&t, "GET", "/k", "AWSAccessKeyId=x&Signature=y&Expires=1");
    tr_add(&t, "host", "h");
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_SIGV2_DISABLED);
    /* SigV4 and anonymous requests are unaffected */
    tr_init(&t, "GET", "/examplebucket/k", "");
    tr_add(&t, "host", "h");
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_OK);
    g_conf.sigv2 = true;
    vec_to_treq(&gen_vecs[0], &t);
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_OK);
}

/* Signs t (header form, Date) with the user's secret using the verifier's
 * own string to sign: for the identity tests, whose subject is not the
 * canonicalisation (the vectors above prove that). */
static void sign_header_self(struct treq *t, const char *ak, const char *secret)
{
    struct auth_req r = tr_view(t);
    struct auth_v2_sts o = { false, tr_get(t, "date"), false, true, DOMAIN };
    struct sg_buf b;
    char sig[29], hdr[256];
    sg_buf_init(&b, 1 << 16);
    CU_ASSERT_EQUAL_FATAL(auth_sigv2_string_to_sign(&r, &o, &b), AUTH_OK);
    CU_ASSERT_EQUAL_FATAL(auth_sigv2_sign(secret, b.p, b.len, sig), 0);
    sg_buf_free(&b);
    snprintf(hdr, sizeof hdr, "AWS %s:%s", ak, sig);
    tr_set(t, "authorization", hdr);
}

static void identity_is_the_configured_user(void)
{
    struct treq t;
    struct auth_ctx *ctx = NULL;
    tr_init(&t, "GET", "/examplebucket/k", "");
    tr_add(&t, "host", DOMAIN);
    tr_add(&t, "date", "Fri, 24 May 2013 00:00:00 GMT");
    sign_header_self(&t, "READERKEY", "reader-secret");
    CU_ASSERT_EQUAL_FATAL(tr_verify_ctx(&t, &ctx), AUTH_OK);
    CU_ASSERT_PTR_EQUAL(auth_ctx_user(ctx), &g_users[1]);
    /* the same decisions as for a SigV4 request of that user */
    CU_ASSERT_TRUE(auth_allowed(g_auth, ctx, "examplebucket", AUTH_PERM_READ));
    CU_ASSERT_FALSE(auth_allowed(g_auth, ctx, "examplebucket", AUTH_PERM_WRITE));
    CU_ASSERT_FALSE(auth_allowed(g_auth, ctx, "other", AUTH_PERM_READ));
    CU_ASSERT_FALSE(auth_allowed(g_auth, ctx, NULL, AUTH_PERM_ADMIN));
    auth_ctx_free(ctx);
    /* the reader's key with the example user's secret */
    sign_header_self(&t, "READERKEY", SK);
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_SIGNATURE_MISMATCH);
}

static int collect(void *arg, const uint8_t *buf, size_t len)
{
    (void)buf;
    *(size_t *)arg += len;
    return 0;
}

static void body_is_unsigned_but_content_md5_is_checked(void)
{
    struct treq t;
    struct auth_ctx *ctx = NULL;
    struct auth_body *b = NULL;
    struct auth_body_result res;
    size_t got = 0;
    /* boto3 1.26's PUT signs Content-MD5 of "hello" */
    tr_init(&t, "PUT", "/examplebucket/k", "");
    tr_add(&t, "host", DOMAIN);
    tr_add(&t, "date", "Fri, 24 May 2013 00:00:00 GMT");
    tr_add(&t, "content-md5", "XUFAKrxLKna5cZ2REBfFkg==");
    sign_header_self(&t, AK, SK);
    CU_ASSERT_EQUAL_FATAL(tr_verify_ctx(&t, &ctx), AUTH_OK);
    CU_ASSERT_EQUAL(auth_ctx_payload(ctx), AUTH_PAYLOAD_UNSIGNED);
    struct auth_req r = tr_view(&t);
    CU_ASSERT_EQUAL_FATAL(auth_body_begin(ctx, &r, &b), AUTH_OK);
    CU_ASSERT_EQUAL(auth_body_feed(b, (const uint8_t *)"hello", 5, collect, &got), AUTH_OK);
    CU_ASSERT_EQUAL(auth_body_finish(b, &res), AUTH_OK);
    CU_ASSERT_EQUAL(got, 5);
    auth_body_free(b);
    b = NULL;
    CU_ASSERT_EQUAL_FATAL(auth_body_begin(ctx, &r, &b), AUTH_OK);
    CU_ASSERT_EQUAL(auth_body_feed(b, (const uint8_t *)"hellO", 5, collect, &got), AUTH_OK);
    CU_ASSERT_EQUAL(auth_body_finish(b, &res), AUTH_BAD_DIGEST);
    auth_body_free(b);
    auth_ctx_free(ctx);
    /* a signed SigV4 streaming body cannot be checked without a SigV4 key */
    tr_del(&t, "content-md5");
    tr_add(&t, "x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD");
    sign_header_self(&t, AK, SK);
    CU_ASSERT_EQUAL(tr_verify(&t), AUTH_BAD_CONTENT_SHA256);
    /* a declared SHA-256 is checked like an anonymous one */
    tr_set(&t, "x-amz-content-sha256", AUTH_EMPTY_SHA256);
    sign_header_self(&t, AK, SK);
    ctx = NULL;
    CU_ASSERT_EQUAL_FATAL(tr_verify_ctx(&t, &ctx), AUTH_OK);
    CU_ASSERT_EQUAL(auth_ctx_payload(ctx), AUTH_PAYLOAD_SHA256);
    r = tr_view(&t);
    CU_ASSERT_EQUAL_FATAL(auth_body_begin(ctx, &r, &b), AUTH_OK);
    CU_ASSERT_EQUAL(auth_body_feed(b, (const uint8_t *)"x", 1, collect, &got), AUTH_OK);
    CU_ASSERT_EQUAL(auth_body_finish(b, &res), AUTH_SHA256_MISMATCH);
    auth_body_free(b);
    auth_ctx_free(ctx);
}

static void string_to_sign_resource_rules(void)
{
    static const struct {
        const char *name, *host, *path, *query;
        bool presigned, bucket_slash;
        const char *want;     /* after "GET\n\n\n\n" */
    } cases[] = {
        { "path_style_key", DOMAIN, "/b/k%20x", "", false, true, "/b/k%20x" },
        { "path_style_bucket_slash", DOMAIN, "/b", "", false, true, "/b/" },
        { "path_style_bucket_as_sent", DOMAIN, "/b", "", false, false, "/b" },
        { "service", DOMAIN, "/", "", false, true, "/" },
        { "virtual_hosted_root", "b." DOMAIN, "/", "", false, true, "/b/" },
        { "virtual_hosted_port", "b." DOMAIN ":9000", "/k", "", false, true, "/b/k" },
        { "virtual_hosted_case", "B.S3.AMAZONAWS.COM", "/k", "", false, true, "/B/k" },
        { "other_host_is_path_style", "example.com", "/b/k", "", false, true, "/b/k" },
        { "subresources_sorted", DOMAIN, "/b/k", "uploadId=u&partNumber=2&x=1", false, true,
          "/b/k?partNumber=2&uploadId=u" },
        { "subresource_without_value", DOMAIN, "/b", "uploads&prefix=a", false, true,
          "/b/?uploads" },
        { "subresource_empty_value", DOMAIN, "/b", "versionId=", false, true, "/b/?versionId=" },
        { "value_decoded_plus_is_space", DOMAIN, "/b/k",
          "response-content-disposition=a%3Bb+c%2Bd", false, true,
          "/b/k?response-content-disposition=a;b c+d" },
        { "encoded_name_decoded", DOMAIN, "/b", "%61cl", false, true, "/b/?acl" },
        { "repeated_kept_in_order", DOMAIN, "/b", "acl=2&acl=1", false, true, "/b/?acl=2&acl=1" },
        { "auth_params_not_resource", DOMAIN, "/b/k",
          "AWSAccessKeyId=a&Signature=s&Expires=1", true, true, "/b/k" },
        { "presigned_amz_params_are_headers", DOMAIN, "/b/k",
          "x-amz-security-token=t%2B&X-Amz-Meta-A=1&Expires=1", true, true,
          "x-amz-meta-a:1\nx-amz-security-token:t+\n/b/k" },
        { "amz_params_ignored_in_header_form", DOMAIN, "/b/k", "x-amz-security-token=t", false,
          true, "/b/k" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct auth_hdr h = { "host", cases[i].host };
        struct auth_req r = { "GET", cases[i].path, cases[i].query, &h, 1 };
        struct auth_v2_sts o = { cases[i].presigned, "", false, cases[i].bucket_slash,
                                 DOMAIN };
        struct sg_buf b;
        char want[512];
        sg_buf_init(&b, 1 << 16);
        snprintf(want, sizeof want, "GET\n\n\n\n%s", cases[i].want);
        CU_ASSERT_EQUAL(auth_sigv2_string_to_sign(&r, &o, &b), AUTH_OK);
        if (!b.p || strcmp(b.p, want) != 0)
            fprintf(stderr, "\n%s: got [%s]\n", cases[i].name, b.p ? b.p : "(null)");
        CU_ASSERT_STRING_EQUAL(b.p ? b.p : "", want);
        sg_buf_free(&b);
    }
}

static void status_names_of_new_statuses(void)
{
    CU_ASSERT_STRING_EQUAL(auth_status_name(AUTH_SIGV2_DISABLED), "SIGV2_DISABLED");
    CU_ASSERT_STRING_EQUAL(auth_status_name(AUTH_QUERY_INCOMPLETE), "QUERY_INCOMPLETE");
}

static int suite_init(void)
{
    g_conf.users = g_users;
    g_conf.n_users = 2;
    g_conf.region = "us-east-1";
    g_conf.vhost_domain = DOMAIN;
    g_conf.sigv2 = true;
    if (auth_open(&g_conf, &g_auth) != 0)
        return -1;
    auth_set_clock(g_auth, test_clock);
    return 0;
}

static int suite_clean(void)
{
    auth_close(g_auth);
    return 0;
}

/* The Host reading the gateway routes by and SigV2 signs by. */
static void vhost_bucket_is_the_host_below_the_domain(void)
{
    static const struct { const char *host, *domain; size_t want; } cases[] = {
        { "b.s3.amazonaws.com", DOMAIN, 1 },
        { "my.bucket.S3.Amazonaws.COM:9000", DOMAIN, 9 },
        { "s3.amazonaws.com", DOMAIN, 0 },
        { ".s3.amazonaws.com", DOMAIN, 0 },
        { "xs3.amazonaws.com", DOMAIN, 0 },
        { "b.s3.amazonaws.com.evil", DOMAIN, 0 },
        { "127.0.0.1:9000", DOMAIN, 0 },
        { "[::1]:9000", "1]", 0 },
        { "b.s3.amazonaws.com", "", 0 },
        { "b.s3.amazonaws.com", NULL, 0 },
        { NULL, DOMAIN, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CU_ASSERT_EQUAL(auth_vhost_bucket(cases[i].host, cases[i].domain), cases[i].want);
}

int register_tests(void)
{
    static const struct cu_test tests[] = {
        { "aws_doc_examples_verify", aws_doc_examples_verify },
        { "vhost_bucket_is_the_host_below_the_domain",
          vhost_bucket_is_the_host_below_the_domain },
        { "aws_doc_upload_string_to_sign", aws_doc_upload_string_to_sign },
        { "boto3_vectors_verify_ok", boto3_vectors_verify_ok },
        { "every_signed_element_changed_gives_signature_mismatch",
          every_signed_element_changed_gives_signature_mismatch },
        { "unsigned_parts_may_change", unsigned_parts_may_change },
        { "changed_subresource_value_gives_signature_mismatch",
          changed_subresource_value_gives_signature_mismatch },
        { "presigned_tampering", presigned_tampering },
        { "presigned_expiry_boundaries", presigned_expiry_boundaries },
        { "header_clock_skew_and_dates", header_clock_skew_and_dates },
        { "malformed_forms", malformed_forms },
        { "turned_off_refuses_both_forms", turned_off_refuses_both_forms },
        { "identity_is_the_configured_user", identity_is_the_configured_user },
        { "body_is_unsigned_but_content_md5_is_checked",
          body_is_unsigned_but_content_md5_is_checked },
        { "string_to_sign_resource_rules", string_to_sign_resource_rules },
        { "status_names_of_new_statuses", status_names_of_new_statuses },
    };
    return cu_add_suite("auth_sigv2", suite_init, suite_clean, tests, CU_N(tests));
}
