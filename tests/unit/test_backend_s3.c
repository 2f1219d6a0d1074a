/* tests/unit/test_backend_s3.c - the pure parts of the S3 cold tier
 * (backend/s3.c, backend/s3_xml.c): URL building for tricky keys, S3 error
 * mapping, response headers -> obj_meta, XML parsing of listings and
 * errors, backoff, and that a down tier fails fast with UNAVAILABLE. */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "s3_int.h"

int register_tests(void);

static void url_building_table(void)
{
    static const struct {
        const char *ep;
        bool vhost;
        const char *bucket, *key, *query, *want;
    } t[] = {
        { "http://127.0.0.1:9000", false, NULL, NULL, NULL, "http://127.0.0.1:9000/" },
        { "http://127.0.0.1:9000/", false, "b", NULL, "list-type=2",
          "http://127.0.0.1:9000/b?list-type=2" },
        { "http://h:1", false, "b", "a b+c", NULL, "http://h:1/b/a%20b%2Bc" },
        { "http://h:1", false, "b", "a//b/./../c", NULL, "http://h:1/b/a//b/./../c" },
        { "http://h:1", false, "b", "\xc3\xa9?x=1&y#", NULL, "http://h:1/b/%C3%A9%3Fx%3D1%26y%23" },
        { "http://h:1", false, "b", "t~-_.", "uploads=", "http://h:1/b/t~-_.?uploads=" },
        { "https://s3.example.com", true, "bkt", "k/e y", NULL,
          "https://bkt.s3.example.com/k/e%20y" },
        { "https://s3.example.com/base/", true, "bkt", NULL, NULL,
          "https://bkt.s3.example.com/base/" },
        { "http://h/base", false, "b", "k", "partNumber=1&uploadId=x",
          "http://h/base/b/k?partNumber=1&uploadId=x" },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char *u = s3_url_build(t[i].ep, t[i].vhost, t[i].bucket, t[i].key, t[i].query);
        CU_ASSERT_PTR_NOT_NULL_FATAL(u);
        if (strcmp(u, t[i].want) != 0)
            fprintf(stderr, "case %zu: got %s want %s\n", i, u, t[i].want);
        CU_ASSERT_STRING_EQUAL(u, t[i].want);
        free(u);
    }
    CU_ASSERT_PTR_NULL(s3_url_build("no-scheme", false, "b", "k", NULL));
    char *e = s3_uri_encode("a/b c", false);
    CU_ASSERT_STRING_EQUAL(e, "a%2Fb%20c");
    free(e);
}

static void error_codes_map_to_statuses(void)
{
    static const struct {
        const char *code;
        long http;
        enum backend_status st;
        bool retry;
    } t[] = {
        { "NoSuchKey", 404, BACKEND_NO_KEY, false },
        { "NoSuchBucket", 404, BACKEND_NO_BUCKET, false },
        { "NoSuchUpload", 404, BACKEND_NO_UPLOAD, false },
        { "BucketAlreadyOwnedByYou", 409, BACKEND_BUCKET_EXISTS, false },
        { "BucketAlreadyExists", 409, BACKEND_BUCKET_EXISTS, false },
        { "BucketNotEmpty", 409, BACKEND_BUCKET_NOT_EMPTY, false },
        { "InvalidPart", 400, BACKEND_INVALID_PART, false },
        { "InvalidPartOrder", 400, BACKEND_INVALID_PART_ORDER, false },
        { "EntityTooSmall", 400, BACKEND_ENTITY_TOO_SMALL, false },
        { "InvalidRange", 416, BACKEND_BAD_RANGE, false },
        { "AccessDenied", 403, BACKEND_DENIED, false },
        { "SlowDown", 503, BACKEND_UNAVAILABLE, true },
        { "InternalError", 500, BACKEND_UNAVAILABLE, true },
        { "", 502, BACKEND_UNAVAILABLE, true },
        { NULL, 504, BACKEND_UNAVAILABLE, true },
        { NULL, 404, BACKEND_NO_KEY, false },     /* HEAD: no body */
        { NULL, 403, BACKEND_DENIED, false },
        { "Weird", 400, BACKEND_IO, false },
        { NULL, 204, BACKEND_OK, false },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        CU_ASSERT_EQUAL(s3_status_from_code(t[i].code, t[i].http), t[i].st);
        CU_ASSERT_EQUAL(s3_retryable(t[i].code, t[i].http), t[i].retry);
    }
}

static void backoff_is_full_jitter_and_capped(void)
{
    CU_ASSERT_EQUAL(s3_backoff_ms(0, 50, 1000, 0), 0);
    CU_ASSERT_EQUAL(s3_backoff_ms(0, 50, 1000, 50), 50);
    CU_ASSERT_EQUAL(s3_backoff_ms(0, 50, 1000, 51), 0);
    CU_ASSERT_EQUAL(s3_backoff_ms(2, 50, 1000, 200), 200);
    CU_ASSERT_EQUAL(s3_backoff_ms(2, 50, 1000, 201), 0);
    for (unsigned a = 0; a < 80; a++)
        CU_ASSERT(s3_backoff_ms(a, 50, 1000, UINT64_MAX - a) <= 1000);
}

static void headers_map_to_obj_meta(void)
{
    struct obj_meta resp, m;
    memset(&resp, 0, sizeof resp);
    memset(&m, 0, sizeof m);
    static const char *const h[][2] = {
        { "content-length", "12345" },
        { "etag", "\"0123456789abcdef0123456789abcdef\"" },
        { "last-modified", "Wed, 21 Oct 2015 07:28:00 GMT" },
        { "content-type", "text/plain" },
        { "cache-control", "no-cache" },
        { "content-disposition", "attachment" },
        { "content-encoding", "gzip" },
        { "content-language", "en" },
        { "expires", "Thu, 01 Dec 1994 16:00:00 GMT" },
        { "x-amz-meta-color", "blue" },
        { "x-amz-checksum-crc32", "AAAAAA==" },
        { "x-amz-request-id", "dropped" },
        { "server", "dropped" },
        { "date", "dropped" },
    };
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++)
        CU_ASSERT_EQUAL_FATAL(obj_meta_add_hdr(&resp, h[i][0], h[i][1]), 0);
    CU_ASSERT_EQUAL(s3_meta_from_headers(&resp, &m), 0);
    CU_ASSERT_EQUAL(m.size, 12345);
    CU_ASSERT_STRING_EQUAL(m.etag, "0123456789abcdef0123456789abcdef");
    CU_ASSERT_EQUAL(m.mtime.tv_sec, 1445412480);
    CU_ASSERT_EQUAL(m.n_hdrs, 8);
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&m, "x-amz-meta-color"), "blue");
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&m, "x-amz-checksum-crc32"), "AAAAAA==");
    CU_ASSERT_PTR_NULL(obj_meta_get_hdr(&m, "x-amz-request-id"));
    CU_ASSERT_PTR_NULL(obj_meta_get_hdr(&m, "content-length"));
    obj_meta_clear(&m);
    obj_meta_clear(&resp);
    struct timespec ts;
    CU_ASSERT_EQUAL(s3_parse_iso8601("2015-10-21T07:28:00.250Z", &ts), 0);
    CU_ASSERT_EQUAL(ts.tv_sec, 1445412480);
    CU_ASSERT_EQUAL(ts.tv_nsec, 250000000L);
    CU_ASSERT_EQUAL(s3_parse_iso8601("garbage", &ts), -1);
}

#define X(s) s, sizeof(s) - 1

static void xml_error_code(void)
{
    char code[64];
    CU_ASSERT_EQUAL(s3_xml_error_code(X("<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code>"
                                        "<Message>m</Message></Error>"), code, sizeof code), 0);
    CU_ASSERT_STRING_EQUAL(code, "NoSuchKey");
    CU_ASSERT_EQUAL(s3_xml_error_code(X("<ListBucketResult/>"), code, sizeof code), -1);
    CU_ASSERT_EQUAL(s3_xml_error_code(X("<Error><Code>"), code, sizeof code), -1);
    CU_ASSERT_EQUAL(s3_xml_error_code(NULL, 0, code, sizeof code), -1);
}

static void xml_list_objects_v2(void)
{
    struct backend_list_page p;
    CU_ASSERT_EQUAL_FATAL(s3_xml_list_objects(X(
        "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        "<Name>b</Name><EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>"
        "<Contents><Key>a%20b+c%2Bd</Key><LastModified>2015-10-21T07:28:00.000Z</LastModified>"
        "<ETag>&quot;0123456789abcdef0123456789abcdef&quot;</ETag><Size>42</Size></Contents>"
        "<Contents><Key>k%C3%A9</Key><Size>0</Size><ETag>\"e-2\"</ETag></Contents>"
        "<CommonPrefixes><Prefix>z%2F</Prefix></CommonPrefixes>"
        "</ListBucketResult>"), &p), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(p.n_objs, 2);
    CU_ASSERT_STRING_EQUAL(p.objs[0].key, "a b c+d");
    CU_ASSERT_EQUAL(p.objs[0].size, 42);
    CU_ASSERT_EQUAL(p.objs[0].mtime.tv_sec, 1445412480);
    CU_ASSERT_STRING_EQUAL(p.objs[0].etag, "0123456789abcdef0123456789abcdef");
    CU_ASSERT_STRING_EQUAL(p.objs[1].key, "k\xc3\xa9");
    CU_ASSERT_STRING_EQUAL(p.objs[1].etag, "e-2");
    CU_ASSERT_EQUAL_FATAL(p.n_prefixes, 1);
    CU_ASSERT_STRING_EQUAL(p.prefixes[0], "z/");
    CU_ASSERT_TRUE(p.truncated);
    CU_ASSERT_STRING_EQUAL(p.next_marker, "z/");
    backend_list_page_free(&p);
    /* Without EncodingType keys are taken as they are. */
    CU_ASSERT_EQUAL_FATAL(s3_xml_list_objects(X(
        "<ListBucketResult><Contents><Key>a%20b</Key></Contents></ListBucketResult>"), &p),
        BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(p.objs[0].key, "a%20b");
    CU_ASSERT_FALSE(p.truncated);
    backend_list_page_free(&p);
    CU_ASSERT_EQUAL(s3_xml_list_objects(X("<Error><Code>x</Code></Error>"), &p), BACKEND_IO);
    CU_ASSERT_EQUAL(s3_xml_list_objects(X("not xml"), &p), BACKEND_IO);
}

static void xml_list_parts_and_uploads(void)
{
    struct backend_parts_page pp;
    /* moto's root is ListPartsResponse: accepted like ListPartsResult. */
    CU_ASSERT_EQUAL_FATAL(s3_xml_list_parts(X(
        "<ListPartsResponse><IsTruncated>true</IsTruncated>"
        "<NextPartNumberMarker>2</NextPartNumberMarker>"
        "<Part><PartNumber>1</PartNumber><ETag>\"aa\"</ETag><Size>5242880</Size>"
        "<LastModified>2015-10-21T07:28:00Z</LastModified></Part>"
        "<Part><PartNumber>2</PartNumber><ETag>\"bb\"</ETag><Size>7</Size></Part>"
        "</ListPartsResponse>"), &pp), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(pp.n_parts, 2);
    CU_ASSERT_EQUAL(pp.parts[0].part_no, 1);
    CU_ASSERT_EQUAL(pp.parts[0].size, 5242880);
    CU_ASSERT_STRING_EQUAL(pp.parts[1].etag, "bb");
    CU_ASSERT_TRUE(pp.truncated);
    CU_ASSERT_EQUAL(pp.next_marker, 2);
    backend_parts_page_free(&pp);

    struct backend_uploads_page up;
    CU_ASSERT_EQUAL_FATAL(s3_xml_list_uploads(X(
        "<ListMultipartUploadsResult><IsTruncated>true</IsTruncated>"
        "<NextKeyMarker>k2</NextKeyMarker><NextUploadIdMarker>id2</NextUploadIdMarker>"
        "<Upload><Key>k1</Key><UploadId>id1</UploadId>"
        "<Initiated>2015-10-21T07:28:00Z</Initiated></Upload>"
        "<Upload><Key>k2</Key><UploadId>id2</UploadId></Upload>"
        "<CommonPrefixes><Prefix>p/</Prefix></CommonPrefixes>"
        "</ListMultipartUploadsResult>"), &up), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(up.n_uploads, 2);
    CU_ASSERT_STRING_EQUAL(up.uploads[0].key, "k1");
    CU_ASSERT_STRING_EQUAL(up.uploads[0].upload_id, "id1");
    CU_ASSERT_EQUAL(up.uploads[0].initiated.tv_sec, 1445412480);
    CU_ASSERT_EQUAL_FATAL(up.n_prefixes, 1);
    CU_ASSERT_STRING_EQUAL(up.prefixes[0], "p/");
    CU_ASSERT_STRING_EQUAL(up.next_key_marker, "k2");
    CU_ASSERT_STRING_EQUAL(up.next_upload_id_marker, "id2");
    backend_uploads_page_free(&up);

    char id[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL(s3_xml_upload_id(X("<InitiateMultipartUploadResult><UploadId>abc.D-_e"
                                       "</UploadId></InitiateMultipartUploadResult>"), id),
                    BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(id, "abc.D-_e");
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    CU_ASSERT_EQUAL(s3_xml_etag_result(X("<CopyObjectResult><LastModified>2015-10-21T07:28:00Z"
                                         "</LastModified><ETag>\"ff\"</ETag></CopyObjectResult>"),
                                       &m), BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(m.etag, "ff");
    CU_ASSERT_EQUAL(m.mtime.tv_sec, 1445412480);
    /* A 200 that carries an error (CompleteMultipartUpload, CopyObject). */
    CU_ASSERT_EQUAL(s3_xml_etag_result(X("<Error><Code>InternalError</Code></Error>"), &m),
                    BACKEND_IO);
}

static void down_tier_fails_fast_with_unavailable(void)
{
    /* Port 1 on loopback: connection refused. */
    struct backend_s3_conf cf = { .endpoint = "http://127.0.0.1:1", .region = "us-east-1",
                                  .access_key = "a", .secret_key = "s" };
    struct backend *b = NULL;
    CU_ASSERT_EQUAL_FATAL(backend_s3_open(&cf, &b), BACKEND_OK);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CU_ASSERT_EQUAL(backend_bucket_head(b, "bucket"), BACKEND_UNAVAILABLE);
    struct obj_meta m;
    CU_ASSERT_EQUAL(backend_object_head(b, "bucket", "k", &m), BACKEND_UNAVAILABLE);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    CU_ASSERT(dt < 4.0);
    backend_close(b);
    /* No endpoint, no credentials: refused at open. */
    struct backend_s3_conf bad = { .endpoint = "nothing", .access_key = "a", .secret_key = "s" };
    CU_ASSERT_EQUAL(backend_s3_open(&bad, &b), BACKEND_IO);
}

int register_tests(void)
{
    CU_pSuite s = CU_add_suite("backend_s3_pure", NULL, NULL);
    if (!s)
        return -1;
#define T(fn) CU_add_test(s, #fn, fn)
    if (!T(url_building_table) || !T(error_codes_map_to_statuses) ||
        !T(backoff_is_full_jitter_and_capped) || !T(headers_map_to_obj_meta) ||
        !T(xml_error_code) || !T(xml_list_objects_v2) || !T(xml_list_parts_and_uploads) ||
        !T(down_tier_fails_fast_with_unavailable))
        return -1;
#undef T
    return 0;
}
