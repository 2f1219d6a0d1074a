/* tests/unit/test_gw_http.c - the gateway's pure parts: Range parsing,
 * conditional requests, dates, percent-decoding, request routing, and XML
 * escaping and body parsing. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_int.h"

/* ---- Range ---- */

static void range_table(void)
{
    static const struct {
        const char *hdr;
        uint64_t size;
        enum gw_range_result res;
        uint64_t first, last;
    } cases[] = {
        { "bytes=0-9", 100, GW_RANGE_OK, 0, 9 },
        { "bytes=10-", 100, GW_RANGE_OK, 10, 99 },
        { "bytes=-5", 100, GW_RANGE_OK, 95, 99 },
        { "bytes=-500", 100, GW_RANGE_OK, 0, 99 },          /* suffix longer than object */
        { "bytes=90-200", 100, GW_RANGE_OK, 90, 99 },       /* end clamps */
        { "bytes=99-99", 100, GW_RANGE_OK, 99, 99 },
        { "bytes=100-", 100, GW_RANGE_UNSATISFIABLE, 0, 0 },/* start past end */
        { "bytes=100-200", 100, GW_RANGE_UNSATISFIABLE, 0, 0 },
        { "bytes=-0", 100, GW_RANGE_UNSATISFIABLE, 0, 0 },
        { "bytes=0-", 0, GW_RANGE_UNSATISFIABLE, 0, 0 },    /* empty object */
        { "bytes=9-0", 100, GW_RANGE_NONE, 0, 0 },          /* last < first: ignored */
        { "bytes=0-1,5-6", 100, GW_RANGE_NONE, 0, 0 },      /* multi-range: whole object */
        { "items=0-1", 100, GW_RANGE_NONE, 0, 0 },
        { "bytes=a-b", 100, GW_RANGE_NONE, 0, 0 },
        { "bytes=99999999999999999999-", 100, GW_RANGE_NONE, 0, 0 }, /* overflow */
        { NULL, 100, GW_RANGE_NONE, 0, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gw_range rg;
        enum gw_range_result res = gw_range_parse(cases[i].hdr, cases[i].size, &rg);
        CU_ASSERT_EQUAL(res, cases[i].res);
        if (res == GW_RANGE_OK && cases[i].res == GW_RANGE_OK) {
            CU_ASSERT_TRUE(rg.present);
            CU_ASSERT_EQUAL(rg.first, cases[i].first);
            CU_ASSERT_EQUAL(rg.last, cases[i].last);
        }
    }
}

/* ---- dates ---- */

static void http_dates_round_trip(void)
{
    char buf[64];
    gw_http_date(784111777, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "Sun, 06 Nov 1994 08:49:37 GMT");
    time_t t;
    CU_ASSERT_EQUAL(gw_http_date_parse("Sun, 06 Nov 1994 08:49:37 GMT", &t), 0);
    CU_ASSERT_EQUAL(t, 784111777);
    CU_ASSERT_EQUAL(gw_http_date_parse("Sunday, 06-Nov-94 08:49:37 GMT", &t), 0);
    CU_ASSERT_EQUAL(t, 784111777);
    CU_ASSERT_EQUAL(gw_http_date_parse("Sun Nov  6 08:49:37 1994", &t), 0);
    CU_ASSERT_EQUAL(t, 784111777);
    CU_ASSERT_EQUAL(gw_http_date_parse("yesterday", &t), -1);
    struct timespec ts = { 784111777, 123456789 };
    gw_iso_date(&ts, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "1994-11-06T08:49:37.123Z");
}

/* ---- conditions ---- */

static struct gw_req *req_with_headers(const struct auth_hdr *h, size_t n)
{
    static struct gw_req r;
    memset(&r, 0, sizeof r);
    r.hdrs = (struct auth_hdr *)h;
    r.n_hdrs = n;
    return &r;
}

static void conditions_table(void)
{
    const char *etag = "0123456789abcdef0123456789abcdef";
    const time_t mtime = 784111777;   /* Sun, 06 Nov 1994 08:49:37 GMT */
    static const struct {
        const char *name, *value, *name2, *value2;
        bool fails;
        enum s3_err err;
    } cases[] = {
        { "if-match", "\"0123456789abcdef0123456789abcdef\"", NULL, NULL, false, 0 },
        { "if-match", "\"other\"", NULL, NULL, true, S3E_PRECONDITION_FAILED },
        { "if-match", "*", NULL, NULL, false, 0 },
        { "if-match", "\"x\", \"0123456789abcdef0123456789abcdef\"", NULL, NULL, false, 0 },
        { "if-none-match", "\"0123456789abcdef0123456789abcdef\"", NULL, NULL, true,
          S3E_NOT_MODIFIED },
        { "if-none-match", "\"other\"", NULL, NULL, false, 0 },
        { "if-modified-since", "Sun, 06 Nov 1994 08:49:37 GMT", NULL, NULL, true,
          S3E_NOT_MODIFIED },
        { "if-modified-since", "Sat, 05 Nov 1994 08:49:37 GMT", NULL, NULL, false, 0 },
        { "if-unmodified-since", "Sat, 05 Nov 1994 08:49:37 GMT", NULL, NULL, true,
          S3E_PRECONDITION_FAILED },
        { "if-unmodified-since", "Mon, 07 Nov 1994 08:49:37 GMT", NULL, NULL, false, 0 },
        /* S3: If-Match true wins over a failing If-Unmodified-Since */
        { "if-match", "\"0123456789abcdef0123456789abcdef\"", "if-unmodified-since",
          "Sat, 05 Nov 1994 08:49:37 GMT", false, 0 },
        /* S3: If-None-Match false (it matches) with If-Modified-Since true: 304 */
        { "if-none-match", "\"0123456789abcdef0123456789abcdef\"", "if-modified-since",
          "Sat, 05 Nov 1994 08:49:37 GMT", true, S3E_NOT_MODIFIED },
        /* If-None-Match true (no match) makes If-Modified-Since irrelevant */
        { "if-none-match", "\"other\"", "if-modified-since", "Mon, 07 Nov 1994 08:49:37 GMT",
          false, 0 },
        /* an unparsable date is ignored, as HTTP says */
        { "if-modified-since", "garbage", NULL, NULL, false, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct auth_hdr h[2] = { { cases[i].name, cases[i].value },
                                 { cases[i].name2, cases[i].value2 } };
        struct gw_req *r = req_with_headers(h, cases[i].name2 ? 2 : 1);
        enum s3_err err = S3E_COUNT;
        bool fails = gw_conditions_fail(r, false, etag, mtime, &err);
        CU_ASSERT_EQUAL(fails, cases[i].fails);
        if (fails && cases[i].fails)
            CU_ASSERT_EQUAL(err, cases[i].err);
    }
}

static void copy_source_conditions_give_412_not_304(void)
{
    struct auth_hdr h[1] = { { "x-amz-copy-source-if-none-match",
                               "\"0123456789abcdef0123456789abcdef\"" } };
    struct gw_req *r = req_with_headers(h, 1);
    enum s3_err err;
    CU_ASSERT_TRUE(gw_conditions_fail(r, true,
                                      "0123456789abcdef0123456789abcdef", 0, &err));
    CU_ASSERT_EQUAL(err, S3E_PRECONDITION_FAILED);
}

/* A conditional write's headers, as AWS reads them. */
static void write_conditions_table(void)
{
    static const char e32[] = "0123456789abcdef0123456789abcdef";
    static const struct {
        const char *name, *value, *name2, *value2;
        int rc;
        enum backend_cond_kind kind;
        const char *etag;
    } cases[] = {
        { NULL, NULL, NULL, NULL, 0, BACKEND_COND_NONE, "" },
        { "if-none-match", "*", NULL, NULL, 0, BACKEND_COND_ABSENT, "" },
        { "if-none-match", " * ", NULL, NULL, 0, BACKEND_COND_ABSENT, "" },
        /* AWS: If-None-Match on a write takes only "*" */
        { "if-none-match", "\"0123456789abcdef0123456789abcdef\"", NULL, NULL, -1, 0, "" },
        { "if-none-match", "*, \"x\"", NULL, NULL, -1, 0, "" },
        { "if-match", "\"0123456789abcdef0123456789abcdef\"", NULL, NULL, 0, BACKEND_COND_ETAG,
          e32 },
        { "if-match", "0123456789abcdef0123456789abcdef", NULL, NULL, 0, BACKEND_COND_ETAG,
          e32 },
        { "if-match", "\"0123456789abcdef0123456789abcdef-12\"", NULL, NULL, 0,
          BACKEND_COND_ETAG, "0123456789abcdef0123456789abcdef-12" },
        { "if-match", "*", NULL, NULL, 0, BACKEND_COND_ETAG, "*" },
        /* longer than any ETag, or a list: matches none (still 404 when missing) */
        { "if-match", "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
          "0123456789\"", NULL, NULL, 0, BACKEND_COND_ETAG, "" },
        { "if-match", "\"a\", \"b\"", NULL, NULL, 0, BACKEND_COND_ETAG, "" },
        /* AWS: both at once is NotImplemented */
        { "if-match", "*", "if-none-match", "*", -1, 0, "" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct auth_hdr h[2] = { { cases[i].name, cases[i].value },
                                 { cases[i].name2, cases[i].value2 } };
        struct gw_req *r = req_with_headers(h, cases[i].name2 ? 2 : cases[i].name ? 1 : 0);
        struct backend_cond c;
        enum s3_err err = S3E_COUNT;
        int rc = gw_write_cond(r, &c, &err);
        CU_ASSERT_EQUAL(rc, cases[i].rc);
        if (rc != 0) {
            CU_ASSERT_EQUAL(err, S3E_NOT_IMPLEMENTED);
            continue;
        }
        CU_ASSERT_EQUAL(c.kind, cases[i].kind);
        CU_ASSERT_STRING_EQUAL(c.etag, cases[i].etag);
    }
    CU_ASSERT_STRING_EQUAL(s3_error_get(s3_error_from_backend(BACKEND_PRECONDITION_FAILED))->code,
                           "PreconditionFailed");
    CU_ASSERT_EQUAL(s3_error_get(s3_error_from_backend(BACKEND_COND_CONFLICT))->http_status, 409);
    CU_ASSERT_STRING_EQUAL(s3_error_get(s3_error_from_backend(BACKEND_COND_CONFLICT))->code,
                           "ConditionalRequestConflict");
    CU_ASSERT_EQUAL(s3_error_get(S3E_NOT_IMPLEMENTED)->http_status, 501);
}

/* ---- percent-decoding and routing ---- */

static void pct_decode_table(void)
{
    struct gw_arena a = { 0 };
    CU_ASSERT_STRING_EQUAL(gw_pct_decode(&a, "a%20b", 5, false), "a b");
    CU_ASSERT_STRING_EQUAL(gw_pct_decode(&a, "a+b", 3, false), "a+b");
    CU_ASSERT_STRING_EQUAL(gw_pct_decode(&a, "a+b", 3, true), "a b");
    CU_ASSERT_STRING_EQUAL(gw_pct_decode(&a, "%E2%82%AC", 9, false), "\xE2\x82\xAC");
    CU_ASSERT_STRING_EQUAL(gw_pct_decode(&a, "%2f", 3, false), "/");
    CU_ASSERT_PTR_NULL(gw_pct_decode(&a, "%2", 2, false));
    CU_ASSERT_PTR_NULL(gw_pct_decode(&a, "%zz", 3, false));
    CU_ASSERT_PTR_NULL(gw_pct_decode(&a, "a%00b", 5, false));   /* no NUL in names */
    gw_arena_free(&a);
}

static void routing_table(void)
{
    static const struct {
        const char *method, *uri, *host, *copy_src;
        enum gw_op op;
        const char *bucket, *key;
    } cases[] = {
        { "GET", "/", NULL, NULL, GW_OP_LIST_BUCKETS, NULL, NULL },
        { "GET", "/b", NULL, NULL, GW_OP_LIST_OBJECTS, "b", NULL },
        { "GET", "/b/", NULL, NULL, GW_OP_LIST_OBJECTS, "b", NULL },
        { "GET", "/b?list-type=2&prefix=a%2Fb", NULL, NULL, GW_OP_LIST_OBJECTS_V2, "b", NULL },
        { "GET", "/b?location", NULL, NULL, GW_OP_GET_BUCKET_LOCATION, "b", NULL },
        { "GET", "/b?uploads", NULL, NULL, GW_OP_LIST_UPLOADS, "b", NULL },
        { "GET", "/b?acl", NULL, NULL, GW_OP_GET_BUCKET_ACL, "b", NULL },
        { "PUT", "/b?acl", NULL, NULL, GW_OP_PUT_BUCKET_ACL, "b", NULL },
        { "DELETE", "/b?acl", NULL, NULL, GW_OP_UNKNOWN, "b", NULL },
        { "GET", "/b?versions&prefix=a", NULL, NULL, GW_OP_LIST_OBJECT_VERSIONS, "b", NULL },
        { "PUT", "/b?versions", NULL, NULL, GW_OP_NOT_IMPLEMENTED, "b", NULL },
        { "GET", "/b?cors", NULL, NULL, GW_OP_NOT_IMPLEMENTED, "b", NULL },
        { "PUT", "/b", NULL, NULL, GW_OP_CREATE_BUCKET, "b", NULL },
        { "HEAD", "/b", NULL, NULL, GW_OP_HEAD_BUCKET, "b", NULL },
        { "DELETE", "/b", NULL, NULL, GW_OP_DELETE_BUCKET, "b", NULL },
        { "POST", "/b?delete", NULL, NULL, GW_OP_DELETE_OBJECTS, "b", NULL },
        { "GET", "/b/k%20x", NULL, NULL, GW_OP_GET_OBJECT, "b", "k x" },
        { "GET", "/b//a//c/", NULL, NULL, GW_OP_GET_OBJECT, "b", "/a//c/" },
        { "GET", "/b/a+b", NULL, NULL, GW_OP_GET_OBJECT, "b", "a+b" },   /* + is literal in paths */
        { "HEAD", "/b/k", NULL, NULL, GW_OP_HEAD_OBJECT, "b", "k" },
        { "PUT", "/b/k", NULL, NULL, GW_OP_PUT_OBJECT, "b", "k" },
        { "PUT", "/b/k", NULL, "/s/t", GW_OP_COPY_OBJECT, "b", "k" },
        { "PUT", "/b/k?partNumber=1&uploadId=x", NULL, NULL, GW_OP_UPLOAD_PART, "b", "k" },
        { "PUT", "/b/k?partNumber=1&uploadId=x", NULL, "/s/t", GW_OP_UPLOAD_PART_COPY, "b", "k" },
        { "POST", "/b/k?uploads", NULL, NULL, GW_OP_CREATE_UPLOAD, "b", "k" },
        { "POST", "/b/k?uploadId=x", NULL, NULL, GW_OP_COMPLETE_UPLOAD, "b", "k" },
        { "DELETE", "/b/k?uploadId=x", NULL, NULL, GW_OP_ABORT_UPLOAD, "b", "k" },
        { "GET", "/b/k?uploadId=x", NULL, NULL, GW_OP_LIST_PARTS, "b", "k" },
        { "DELETE", "/b/k", NULL, NULL, GW_OP_DELETE_OBJECT, "b", "k" },
        { "GET", "/b/k?tagging", NULL, NULL, GW_OP_GET_OBJECT_TAGGING, "b", "k" },
        { "PUT", "/b/k?tagging", NULL, NULL, GW_OP_PUT_OBJECT_TAGGING, "b", "k" },
        { "DELETE", "/b/k?tagging", NULL, NULL, GW_OP_DELETE_OBJECT_TAGGING, "b", "k" },
        { "GET", "/b?tagging", NULL, NULL, GW_OP_GET_BUCKET_TAGGING, "b", NULL },
        { "PUT", "/b?tagging", NULL, NULL, GW_OP_PUT_BUCKET_TAGGING, "b", NULL },
        { "DELETE", "/b?tagging", NULL, NULL, GW_OP_DELETE_BUCKET_TAGGING, "b", NULL },
        { "POST", "/b/k?tagging", NULL, NULL, GW_OP_UNKNOWN, "b", "k" },
        { "GET", "/b/k?website", NULL, NULL, GW_OP_NOT_IMPLEMENTED, "b", "k" },
        { "GET", "/b/k?acl", NULL, NULL, GW_OP_GET_OBJECT_ACL, "b", "k" },
        { "PUT", "/b/k?acl", NULL, NULL, GW_OP_PUT_OBJECT_ACL, "b", "k" },
        { "GET", "/b/k?versionId=null", NULL, NULL, GW_OP_GET_OBJECT, "b", "k" },
        { "DELETE", "/b/k?versionId=null", NULL, NULL, GW_OP_DELETE_OBJECT, "b", "k" },
        { "PATCH", "/b/k", NULL, NULL, GW_OP_UNKNOWN, "b", "k" },
        { "OPTIONS", "/b/k", NULL, NULL, GW_OP_CORS_PREFLIGHT, "b", "k" },
        { "OPTIONS", "/b?tagging", NULL, NULL, GW_OP_CORS_PREFLIGHT, "b", NULL },
        { "GET", "/k/x", "bkt.s3.local:9000", NULL, GW_OP_GET_OBJECT, "bkt", "k/x" },
        { "GET", "/", "bkt.s3.local", NULL, GW_OP_LIST_OBJECTS, "bkt", NULL },
        { "GET", "/b/k", "s3.local:9000", NULL, GW_OP_GET_OBJECT, "b", "k" },
        { "GET", "/_shardgate/health", NULL, NULL, GW_OP_HEALTH, NULL, NULL },
    };
    struct conf c;
    memset(&c, 0, sizeof c);
    c.vhost_domain = (char *)"s3.local";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gw_req r;
        memset(&r, 0, sizeof r);
        r.conf = &c;
        r.method = cases[i].method;
        struct auth_hdr h[2];
        size_t n = 0;
        if (cases[i].host)
            h[n++] = (struct auth_hdr){ "host", cases[i].host };
        if (cases[i].copy_src)
            h[n++] = (struct auth_hdr){ "x-amz-copy-source", cases[i].copy_src };
        r.hdrs = h;
        r.n_hdrs = n;
        enum s3_err err;
        const char *msg;
        CU_ASSERT_EQUAL_FATAL(gw_req_parse(&r, cases[i].uri, &err, &msg), 0);
        if (r.op != cases[i].op)
            fprintf(stderr, "case %zu %s %s: op %s\n", i, cases[i].method, cases[i].uri,
                    gw_op_name(r.op));
        CU_ASSERT_EQUAL(r.op, cases[i].op);
        if (cases[i].bucket) {
            CU_ASSERT_STRING_EQUAL(r.bucket ? r.bucket : "(null)", cases[i].bucket);
        } else {
            CU_ASSERT_PTR_NULL(r.bucket);
        }
        if (cases[i].key) {
            CU_ASSERT_STRING_EQUAL(r.key ? r.key : "(null)", cases[i].key);
        } else {
            CU_ASSERT_PTR_NULL(r.key);
        }
        gw_arena_free(&r.arena);
    }
}

static void key_over_1024_bytes_is_key_too_long(void)
{
    char uri[1100] = "/b/";
    memset(uri + 3, 'k', 1025);
    uri[3 + 1025] = '\0';
    struct conf c;
    memset(&c, 0, sizeof c);
    struct gw_req r;
    memset(&r, 0, sizeof r);
    r.conf = &c;
    r.method = "GET";
    enum s3_err err;
    const char *msg;
    CU_ASSERT_EQUAL(gw_req_parse(&r, uri, &err, &msg), -1);
    CU_ASSERT_EQUAL(err, S3E_KEY_TOO_LONG);
    gw_arena_free(&r.arena);
}

/* ---- XML ---- */

static void xml_escape_covers_markup_and_controls(void)
{
    struct gw_buf b;
    gw_buf_init(&b, 1024);
    CU_ASSERT_EQUAL(gw_xml_escape(&b, "a<b>&\"c'\x01"), 0);
    CU_ASSERT_STRING_EQUAL(b.data, "a&lt;b&gt;&amp;&quot;c&apos;&#x1;");
    gw_buf_free(&b);
}

static void buf_limit_is_enforced(void)
{
    struct gw_buf b;
    gw_buf_init(&b, 8);
    CU_ASSERT_EQUAL(gw_buf_puts(&b, "12345678"), 0);
    CU_ASSERT_EQUAL(gw_buf_puts(&b, "9"), -1);
    CU_ASSERT_EQUAL(b.len, 8);
    gw_buf_free(&b);
}

static void url_encode_matches_s3(void)
{
    struct gw_buf b;
    gw_buf_init(&b, 1024);
    CU_ASSERT_EQUAL(gw_url_encode(&b, "a b/c+d~\xE2\x82\xAC", true), 0);
    CU_ASSERT_STRING_EQUAL(b.data, "a%20b/c%2Bd~%E2%82%AC");
    gw_buf_free(&b);
}

static void complete_body_parses_parts_and_strips_quotes(void)
{
    const char *xml = "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                      "<Part><ETag>\"aaa\"</ETag><PartNumber>1</PartNumber></Part>"
                      "<Part><PartNumber>2</PartNumber><ETag>bbb</ETag>"
                      "<ChecksumCRC32>x</ChecksumCRC32></Part></CompleteMultipartUpload>";
    struct gw_xml_parts p;
    CU_ASSERT_EQUAL_FATAL(gw_xml_parse_complete(xml, strlen(xml), &p), 0);
    CU_ASSERT_EQUAL(p.n, 2);
    CU_ASSERT_EQUAL(p.parts[0].part_no, 1);
    CU_ASSERT_STRING_EQUAL(p.parts[0].etag, "aaa");
    CU_ASSERT_EQUAL(p.parts[1].part_no, 2);
    CU_ASSERT_STRING_EQUAL(p.parts[1].etag, "bbb");
    free(p.parts);
}

static void complete_body_reads_part_checksums(void)
{
    static const struct {
        const char *elem, *hdr, *value;
    } cases[] = {
        { "ChecksumCRC32", "x-amz-checksum-crc32", "Mvu1Ug==" },
        { "ChecksumCRC32C", "x-amz-checksum-crc32c", "yZRlqg==" },
        { "ChecksumCRC64NVME", "x-amz-checksum-crc64nvme", "AAAAAAAAAAA=" },
        { "ChecksumSHA1", "x-amz-checksum-sha1", "qZk+NkcGgWq6PiVxeFDCbJzQ2J0=" },
        { "ChecksumSHA256", "x-amz-checksum-sha256",
          "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char xml[512];
        snprintf(xml, sizeof xml, "<CompleteMultipartUpload>"
                 "<Part><PartNumber>1</PartNumber><ETag>\"aaa\"</ETag><%s>%s</%s></Part>"
                 "<Part><PartNumber>2</PartNumber><ETag>bbb</ETag></Part>"
                 "</CompleteMultipartUpload>", cases[i].elem, cases[i].value, cases[i].elem);
        struct gw_xml_parts p;
        CU_ASSERT_EQUAL_FATAL(gw_xml_parse_complete(xml, strlen(xml), &p), 0);
        CU_ASSERT_EQUAL(p.n, 2);
        CU_ASSERT_STRING_EQUAL(p.parts[0].checksum_name, cases[i].hdr);
        CU_ASSERT_STRING_EQUAL(p.parts[0].checksum, cases[i].value);
        CU_ASSERT_STRING_EQUAL(p.parts[1].checksum_name, "");   /* optional */
        CU_ASSERT_STRING_EQUAL(p.parts[1].checksum, "");
        free(p.parts);
    }
}

static void bad_part_checksums_are_malformed(void)
{
    char big[300];
    memset(big, 'A', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    char too_long[512];
    snprintf(too_long, sizeof too_long, "<CompleteMultipartUpload><Part><PartNumber>1"
             "</PartNumber><ETag>a</ETag><ChecksumCRC32>%s</ChecksumCRC32></Part>"
             "</CompleteMultipartUpload>", big);
    const char *const bad[] = {
        /* two checksums for one part */
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>a</ETag>"
        "<ChecksumCRC32>Mvu1Ug==</ChecksumCRC32><ChecksumSHA1>qZk=</ChecksumSHA1></Part>"
        "</CompleteMultipartUpload>",
        /* empty value */
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>a</ETag>"
        "<ChecksumCRC32></ChecksumCRC32></Part></CompleteMultipartUpload>",
        /* a value holding elements */
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>a</ETag>"
        "<ChecksumCRC32><x/></ChecksumCRC32></Part></CompleteMultipartUpload>",
        too_long,
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct gw_xml_parts p;
        CU_ASSERT_EQUAL(gw_xml_parse_complete(bad[i], strlen(bad[i]), &p), -1);
        CU_ASSERT_PTR_NULL(p.parts);
    }
    /* an unknown checksum-like element is ignored, as S3 ignores it */
    const char *odd = "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>a</ETag>"
                      "<ChecksumMD5>x</ChecksumMD5></Part></CompleteMultipartUpload>";
    struct gw_xml_parts p;
    CU_ASSERT_EQUAL_FATAL(gw_xml_parse_complete(odd, strlen(odd), &p), 0);
    CU_ASSERT_STRING_EQUAL(p.parts[0].checksum_name, "");
    free(p.parts);
}

static void malformed_bodies_are_refused(void)
{
    static const char *const bad_complete[] = {
        "", "<x/>", "<CompleteMultipartUpload/>",
        "<CompleteMultipartUpload><Part><PartNumber>0</PartNumber><ETag>a</ETag></Part>"
        "</CompleteMultipartUpload>",
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part></CompleteMultipartUpload>",
        "<CompleteMultipartUpload><Part>",
        /* an external entity is never fetched nor expanded */
        "<!DOCTYPE r [<!ENTITY e SYSTEM \"file:///etc/passwd\">]><CompleteMultipartUpload><Part>"
        "<PartNumber>1</PartNumber><ETag>&e;</ETag></Part></CompleteMultipartUpload>",
    };
    for (size_t i = 0; i < sizeof bad_complete / sizeof bad_complete[0]; i++) {
        struct gw_xml_parts p;
        int rc = gw_xml_parse_complete(bad_complete[i], strlen(bad_complete[i]), &p);
        if (rc == 0) {   /* the entity case may parse, but must not contain the file */
            CU_ASSERT_PTR_NULL(strstr(p.parts[0].etag, "root"));
            free(p.parts);
        }
        if (i < 6)
            CU_ASSERT_EQUAL(rc, -1);
    }
    struct gw_xml_delete d;
    const char *many_prefix = "<Delete>";
    char *big = malloc(64 * 1002 + 32);
    strcpy(big, many_prefix);
    for (int i = 0; i < 1001; i++)
        strcat(big, "<Object><Key>k</Key></Object>");
    strcat(big, "</Delete>");
    CU_ASSERT_EQUAL(gw_xml_parse_delete(big, strlen(big), 1000, &d), -1);
    free(big);
}

static void delete_body_reads_keys_and_quiet(void)
{
    const char *xml = "<Delete><Quiet>true</Quiet><Object><Key>a &amp; b</Key></Object>"
                      "<Object><Key>c/d</Key><VersionId>x</VersionId></Object></Delete>";
    struct gw_xml_delete d;
    CU_ASSERT_EQUAL_FATAL(gw_xml_parse_delete(xml, strlen(xml), 1000, &d), 0);
    CU_ASSERT_TRUE(d.quiet);
    CU_ASSERT_EQUAL(d.n, 2);
    CU_ASSERT_STRING_EQUAL(d.keys[0], "a & b");
    CU_ASSERT_STRING_EQUAL(d.keys[1], "c/d");
    gw_xml_delete_free(&d);
}

static void error_table_maps_every_backend_status(void)
{
    CU_ASSERT_STRING_EQUAL(s3_error_get(s3_error_from_backend(BACKEND_NO_KEY))->code, "NoSuchKey");
    CU_ASSERT_EQUAL(s3_error_get(s3_error_from_backend(BACKEND_NO_KEY))->http_status, 404);
    CU_ASSERT_STRING_EQUAL(s3_error_get(s3_error_from_backend(BACKEND_BUCKET_NOT_EMPTY))->code,
                           "BucketNotEmpty");
    CU_ASSERT_EQUAL(s3_error_get(s3_error_from_backend(BACKEND_BUCKET_NOT_EMPTY))->http_status,
                    409);
    CU_ASSERT_EQUAL(s3_error_get(s3_error_from_auth(AUTH_SIGNATURE_MISMATCH))->http_status, 403);
    CU_ASSERT_STRING_EQUAL(s3_error_get(s3_error_from_auth(AUTH_UNKNOWN_KEY))->code,
                           "InvalidAccessKeyId");
    for (int e = 0; e < S3E_COUNT; e++) {
        const struct s3_error *se = s3_error_get((enum s3_err)e);
        CU_ASSERT_PTR_NOT_NULL(se->code);
        CU_ASSERT_TRUE(se->http_status >= 300 && se->http_status < 600);
    }
}

int register_tests(void);
int register_tests(void)
{
    CU_pSuite s = CU_add_suite("gw_http", NULL, NULL);
    if (!s)
        return -1;
    CU_add_test(s, "range_table", range_table);
    CU_add_test(s, "http_dates_round_trip", http_dates_round_trip);
    CU_add_test(s, "conditions_table", conditions_table);
    CU_add_test(s, "copy_source_conditions_give_412_not_304",
                copy_source_conditions_give_412_not_304);
    CU_add_test(s, "write_conditions_table", write_conditions_table);
    CU_add_test(s, "pct_decode_table", pct_decode_table);
    CU_add_test(s, "routing_table", routing_table);
    CU_add_test(s, "key_over_1024_bytes_is_key_too_long", key_over_1024_bytes_is_key_too_long);
    CU_add_test(s, "xml_escape_covers_markup_and_controls", xml_escape_covers_markup_and_controls);
    CU_add_test(s, "buf_limit_is_enforced", buf_limit_is_enforced);
    CU_add_test(s, "url_encode_matches_s3", url_encode_matches_s3);
    CU_add_test(s, "complete_body_parses_parts_and_strips_quotes",
                complete_body_parses_parts_and_strips_quotes);
    CU_add_test(s, "complete_body_reads_part_checksums", complete_body_reads_part_checksums);
    CU_add_test(s, "bad_part_checksums_are_malformed", bad_part_checksums_are_malformed);
    CU_add_test(s, "malformed_bodies_are_refused", malformed_bodies_are_refused);
    CU_add_test(s, "delete_body_reads_keys_and_quiet", delete_body_reads_keys_and_quiet);
    CU_add_test(s, "error_table_maps_every_backend_status",
                error_table_maps_every_backend_status);
    return CU_get_error() == CUE_SUCCESS ? 0 : -1;
}
