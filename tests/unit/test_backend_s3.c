/* tests/unit/test_backend_s3.c - the pure parts of the S3 cold tier
 * (backend/s3.c, backend/s3_xml.c): URL building for tricky keys, S3 error
 * mapping, response headers -> obj_meta, XML parsing of listings and
 * errors, backoff, and that a down tier fails fast with UNAVAILABLE; then
 * the streaming GET of an open object against a scripted loopback server
 * (one request per sequential read, ranged GETs off the stream, stalls,
 * drops and early closes). */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

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
        { "BucketAlreadyExists", 409, BACKEND_BUCKET_TAKEN, false },
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
        /* a refusal we have no status for is passed to the client as it is */
        { "Weird", 400, BACKEND_COLD_ERROR, false },
        { "InvalidObjectState", 403, BACKEND_COLD_ERROR, false },
        { "NoSuchLifecycleConfiguration", 404, BACKEND_COLD_ERROR, false },
        { NULL, 400, BACKEND_IO, false },         /* HEAD: nothing to pass on */
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

/* An error answer's status: what is passed to the client (the tier's
 * code, status and message), what is retried. */
static void error_answers_pass_on_what_is_not_ours(void)
{
    static const struct {
        long http;
        const char *code;
        bool idempotent;
        enum backend_status st;
    } t[] = {
        { 403, "InvalidObjectState", true, BACKEND_COLD_ERROR },
        { 500, "InternalError", false, BACKEND_COLD_ERROR },  /* outcome unknown */
        { 500, "InternalError", true, BACKEND_UNAVAILABLE },  /* retried, then 503 */
        { 501, "NotImplemented", true, BACKEND_COLD_ERROR },  /* never worth a retry */
        { 503, "SlowDown", false, BACKEND_UNAVAILABLE },
        { 404, "NoSuchKey", true, BACKEND_NO_KEY },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char xml[256];
        snprintf(xml, sizeof xml, "<?xml version=\"1.0\"?><Error><Code>%s</Code>"
                 "<Message>said &lt;%zu&gt;</Message></Error>", t[i].code, i);
        struct s3_call c = { .rbuf = xml, .rlen = strlen(xml), .idempotent = t[i].idempotent };
        backend_cold_error_forget();
        CU_ASSERT_EQUAL(s3_error_status(&c, t[i].http), t[i].st);
        CU_ASSERT_STRING_EQUAL(c.code, t[i].code);
        struct backend_cold_error ce;
        bool kept = backend_cold_error_take(&ce);
        CU_ASSERT_EQUAL(kept, t[i].st == BACKEND_COLD_ERROR);
        if (kept) {
            char want[32];
            snprintf(want, sizeof want, "said <%zu>", i);
            CU_ASSERT_EQUAL(ce.http_status, t[i].http);
            CU_ASSERT_STRING_EQUAL(ce.code, t[i].code);
            CU_ASSERT_STRING_EQUAL(ce.message, want);
            CU_ASSERT_FALSE(backend_cold_error_take(&ce));   /* taken once */
        }
    }
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

/* ---- the streaming GET of an open object, against a scripted server ---- */

static void ring_wraps_and_is_all_or_nothing(void)
{
    struct s3_ring r;
    CU_ASSERT_EQUAL_FATAL(s3_ring_init(&r, 8), 0);
    unsigned char out[16];
    CU_ASSERT_TRUE(s3_ring_put(&r, "abcdef", 6));
    CU_ASSERT_FALSE(s3_ring_put(&r, "xyz", 3));          /* 2 free: nothing taken */
    CU_ASSERT_EQUAL(r.len, 6);
    CU_ASSERT_EQUAL(s3_ring_get(&r, out, 4), 4);
    CU_ASSERT_EQUAL(memcmp(out, "abcd", 4), 0);
    CU_ASSERT_TRUE(s3_ring_put(&r, "ghijkl", 6));         /* wraps */
    CU_ASSERT_EQUAL(r.len, 8);
    CU_ASSERT_EQUAL(s3_ring_get(&r, NULL, 1), 1);         /* dropped */
    CU_ASSERT_EQUAL(s3_ring_get(&r, out, sizeof out), 7);
    CU_ASSERT_EQUAL(memcmp(out, "fghijkl", 7), 0);
    CU_ASSERT_EQUAL(s3_ring_get(&r, out, sizeof out), 0);
    CU_ASSERT_EQUAL(r.head, 0);
    CU_ASSERT_TRUE(s3_ring_put(&r, "12345678", 8));       /* exactly full */
    CU_ASSERT_EQUAL(s3_ring_get(&r, out, 8), 8);
    CU_ASSERT_EQUAL(memcmp(out, "12345678", 8), 0);
    s3_ring_free(&r);
}

static void read_path_table(void)
{
    static const struct {
        bool usable;
        uint64_t pos, off;
        enum s3_read_path want;
    } t[] = {
        { true, 0, 0, S3_READ_STREAM },
        { true, 5, 5, S3_READ_STREAM },
        { true, 5, 4, S3_READ_RANGED },                       /* behind: seek back */
        { true, 0, 1, S3_READ_SKIP },
        { true, 0, S3_STREAM_SKIP_MAX, S3_READ_SKIP },
        { true, 0, S3_STREAM_SKIP_MAX + 1ull, S3_READ_RANGED },
        { true, 100, 100 + S3_STREAM_SKIP_MAX + 1ull, S3_READ_RANGED },
        { false, 0, 0, S3_READ_RANGED },                      /* no stream */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        CU_ASSERT_EQUAL(s3_read_path_pick(t[i].usable, t[i].pos, t[i].off), t[i].want);
}

/* The server: one thread per connection, keep-alive. Objects by path:
 *   /b/obj-N    N pattern bytes, ETag "abc"; honours Range and If-Match
 *   /b/stall    Content-Length 1000000, 1000 bytes, then nothing for 4 s
 *   /b/drop     Content-Length 1000000, 100000 bytes, then the connection closes
 *   /b/late     headers at once, the 10 body bytes after 1.5 s
 *   /b/flaky    503 SlowDown to the first GET, then as obj-5000
 *   /b/missing  404 NoSuchKey;  /nob/k  404 NoSuchBucket */
static struct fake {
    int lfd, port;
    pthread_t th;
    atomic_bool stop;
    atomic_int gets, heads, flaky_seen, aborted;
    atomic_ullong body_sent;      /* of the last object body */
    pthread_mutex_t mu;
    char range[128], ifmatch[128];
} F;

static unsigned char pat(uint64_t i)
{
    return (unsigned char)(i * 7 + i / 4099);
}

static int send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static void nap_ms(int ms)
{
    for (int i = 0; i < ms / 10 && !atomic_load(&F.stop); i++) {
        struct timespec ts = { 0, 10000000L };
        nanosleep(&ts, NULL);
    }
}

static int send_pattern(int fd, uint64_t from, uint64_t n)
{
    unsigned char buf[65536];
    uint64_t sent = 0;
    atomic_store(&F.body_sent, 0);
    while (sent < n) {
        size_t k = n - sent < sizeof buf ? (size_t)(n - sent) : sizeof buf;
        for (size_t i = 0; i < k; i++)
            buf[i] = pat(from + sent + i);
        if (send_all(fd, buf, k) != 0) {
            atomic_fetch_add(&F.aborted, 1);
            return -1;
        }
        sent += k;
        atomic_store(&F.body_sent, sent);
    }
    return 0;
}

static const char *hdr_val(const char *req, const char *name, char *out, size_t cap)
{
    out[0] = '\0';
    size_t nl = strlen(name);
    for (const char *l = strstr(req, "\r\n"); l && l[2]; l = strstr(l + 2, "\r\n"))
        if (strncasecmp(l + 2, name, nl) == 0 && l[2 + nl] == ':') {
            const char *v = l + 3 + nl, *e = strstr(v, "\r\n");
            while (*v == ' ')
                v++;
            snprintf(out, cap, "%.*s", (int)(e - v), v);
            return out;
        }
    return NULL;
}

static int reply_error(int fd, int status, const char *code)
{
    char body[256], head[256];
    int bl = snprintf(body, sizeof body, "<?xml version=\"1.0\"?><Error><Code>%s</Code>"
                      "<Message>m</Message></Error>", code);
    int hl = snprintf(head, sizeof head, "HTTP/1.1 %d X\r\nContent-Type: application/xml\r\n"
                      "Content-Length: %d\r\n\r\n", status, bl);
    return send_all(fd, head, (size_t)hl) || send_all(fd, body, (size_t)bl) ? -1 : 0;
}

/* One request; -1 closes the connection. */
static int serve_one(int fd, const char *req)
{
    char method[8] = "", path[256] = "", v[128];
    if (sscanf(req, "%7s %255s", method, path) != 2)
        return -1;
    bool head = strcmp(method, "HEAD") == 0;
    atomic_fetch_add(head ? &F.heads : &F.gets, 1);
    pthread_mutex_lock(&F.mu);
    snprintf(F.range, sizeof F.range, "%s", hdr_val(req, "range", v, sizeof v) ? v : "");
    snprintf(F.ifmatch, sizeof F.ifmatch, "%s", hdr_val(req, "if-match", v, sizeof v) ? v : "");
    pthread_mutex_unlock(&F.mu);
    char h[512];
    if (strcmp(path, "/b/missing") == 0)
        return reply_error(fd, 404, "NoSuchKey");
    if (strncmp(path, "/nob/", 5) == 0)
        return reply_error(fd, 404, "NoSuchBucket");
    if (strcmp(path, "/b/flaky") == 0 && atomic_fetch_add(&F.flaky_seen, 1) == 0)
        return reply_error(fd, 503, "SlowDown");
    if (strcmp(path, "/b/stall") == 0 || strcmp(path, "/b/drop") == 0 ||
        strcmp(path, "/b/late") == 0) {
        bool late = path[3] == 'l';
        int n = snprintf(h, sizeof h, "HTTP/1.1 200 OK\r\nETag: \"abc\"\r\nContent-Length: %d"
                         "\r\n\r\n", late ? 10 : 1000000);
        if (send_all(fd, h, (size_t)n) != 0)
            return -1;
        if (late) {
            nap_ms(1500);
            return send_pattern(fd, 0, 10);
        }
        if (send_pattern(fd, 0, path[3] == 's' ? 1000 : 100000) != 0)
            return -1;
        if (path[3] == 's')
            nap_ms(4000);
        return -1;
    }
    uint64_t size = 5000;
    if (strncmp(path, "/b/obj-", 7) == 0)
        size = strtoull(path + 7, NULL, 10);
    else if (strcmp(path, "/b/flaky") != 0)
        return reply_error(fd, 404, "NoSuchKey");
    if (hdr_val(req, "if-match", v, sizeof v) && strcmp(v, "\"abc\"") != 0)
        return reply_error(fd, 412, "PreconditionFailed");
    uint64_t first = 0, last = size - 1;
    bool ranged = hdr_val(req, "range", v, sizeof v) &&
                  sscanf(v, "bytes=%" SCNu64 "-%" SCNu64, &first, &last) == 2;
    if (ranged && last >= size)
        last = size - 1;
    int n = ranged ? snprintf(h, sizeof h, "HTTP/1.1 206 Partial\r\nETag: \"abc\"\r\n"
                              "Content-Range: bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64 "\r\n"
                              "Content-Length: %" PRIu64 "\r\n\r\n", first, last, size,
                              last - first + 1)
                   : snprintf(h, sizeof h, "HTTP/1.1 200 OK\r\nETag: \"abc\"\r\n"
                              "Last-Modified: Wed, 21 Oct 2015 07:28:00 GMT\r\n"
                              "Content-Type: text/x-test\r\nx-amz-meta-color: blue\r\n"
                              "Content-Length: %" PRIu64 "\r\n\r\n", size);
    if (send_all(fd, h, (size_t)n) != 0)
        return -1;
    if (head)
        return 0;
    return send_pattern(fd, first, size ? last - first + 1 : 0);
}

static void *fake_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char req[16384];
    size_t have = 0;
    while (!atomic_load(&F.stop)) {
        ssize_t r = recv(fd, req + have, sizeof req - 1 - have, 0);
        if (r <= 0)
            break;
        have += (size_t)r;
        req[have] = '\0';
        char *end = strstr(req, "\r\n\r\n");
        if (!end)
            continue;
        if (serve_one(fd, req) != 0)
            break;
        size_t used = (size_t)(end + 4 - req);
        memmove(req, req + used, have - used);
        have -= used;
    }
    close(fd);
    return NULL;
}

static void *fake_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&F.stop)) {
        struct pollfd p = { F.lfd, POLLIN, 0 };
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(F.lfd, NULL, NULL);
        if (fd < 0)
            continue;
        pthread_t t;
        if (pthread_create(&t, NULL, fake_conn, (void *)(intptr_t)fd) == 0)
            pthread_detach(t);
        else
            close(fd);
    }
    return NULL;
}

static int fake_start(void)
{
    memset(&F, 0, sizeof F);
    pthread_mutex_init(&F.mu, NULL);
    F.lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    if (F.lfd < 0 || bind(F.lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(F.lfd, 16) != 0 || getsockname(F.lfd, (struct sockaddr *)&a, &al) != 0)
        return -1;
    F.port = ntohs(a.sin_port);
    return pthread_create(&F.th, NULL, fake_main, NULL) == 0 ? 0 : -1;
}

static int fake_stop(void)
{
    atomic_store(&F.stop, true);
    pthread_join(F.th, NULL);
    close(F.lfd);
    struct timespec ts = { 0, 200000000L };   /* connection threads see stop */
    nanosleep(&ts, NULL);
    return 0;
}

static struct backend *fake_backend(unsigned request_ms)
{
    char ep[64];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", F.port);
    struct backend_s3_conf cf = { .endpoint = ep, .region = "us-east-1", .access_key = "a",
                                  .secret_key = "s", .request_timeout_ms = request_ms };
    struct backend *b = NULL;
    CU_ASSERT_EQUAL(backend_s3_open(&cf, &b), BACKEND_OK);
    atomic_store(&F.gets, 0);
    atomic_store(&F.heads, 0);
    atomic_store(&F.aborted, 0);
    return b;
}

static double secs_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Reads [off, off+len) in reads of at most `step`; checks the pattern. */
static enum backend_status read_check(struct backend_obj *o, uint64_t off, uint64_t len,
                                      size_t step, uint64_t *done)
{
    unsigned char *buf = malloc(step);
    enum backend_status st = BACKEND_OK;
    *done = 0;
    while (*done < len) {
        size_t got = 0;
        size_t want = len - *done < step ? (size_t)(len - *done) : step;
        st = backend_obj_read(o, off + *done, buf, want, &got);
        if (st != BACKEND_OK || got == 0)
            break;
        for (size_t i = 0; i < got; i++)
            if (buf[i] != pat(off + *done + i)) {
                st = BACKEND_IO;
                CU_FAIL("wrong byte");
                break;
            }
        *done += got;
        if (st != BACKEND_OK)
            break;
    }
    free(buf);
    return st;
}

static void open_is_one_get_and_sequential_reads_stream_from_it(void)
{
    struct backend *b = fake_backend(0);
    struct obj_meta m;
    struct backend_obj *o = NULL;
    uint64_t size = 10 * 1024 * 1024 + 123, done = 0;   /* > the ring: pauses */
    char key[32];
    snprintf(key, sizeof key, "obj-%" PRIu64, size);
    CU_ASSERT_EQUAL_FATAL(backend_object_open(b, "b", key, &m, &o), BACKEND_OK);
    CU_ASSERT_EQUAL(m.size, size);
    CU_ASSERT_STRING_EQUAL(m.etag, "abc");
    CU_ASSERT_EQUAL(m.mtime.tv_sec, 1445412480);
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&m, "content-type"), "text/x-test");
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&m, "x-amz-meta-color"), "blue");
    CU_ASSERT_EQUAL(read_check(o, 0, size, 1024 * 1024 - 7, &done), BACKEND_OK);
    CU_ASSERT_EQUAL(done, size);
    size_t got = 1;
    char x;
    CU_ASSERT_EQUAL(backend_obj_read(o, size, &x, 1, &got), BACKEND_OK);
    CU_ASSERT_EQUAL(got, 0);
    CU_ASSERT_EQUAL(atomic_load(&F.gets), 1);
    CU_ASSERT_EQUAL(atomic_load(&F.heads), 0);
    backend_obj_close(o);
    obj_meta_clear(&m);
    /* An empty object: open, end at once. */
    CU_ASSERT_EQUAL_FATAL(backend_object_open(b, "b", "obj-0", &m, &o), BACKEND_OK);
    CU_ASSERT_EQUAL(m.size, 0);
    CU_ASSERT_EQUAL(backend_obj_read(o, 0, &x, 1, &got), BACKEND_OK);
    CU_ASSERT_EQUAL(got, 0);
    backend_obj_close(o);
    obj_meta_clear(&m);
    backend_close(b);
}

static void reads_off_the_stream_take_ranged_gets_pinned_by_etag(void)
{
    struct backend *b = fake_backend(0);
    struct obj_meta m;
    struct backend_obj *o = NULL;
    uint64_t done = 0, size = 20 * 1024 * 1024;
    CU_ASSERT_EQUAL_FATAL(backend_object_open(b, "b", "obj-20971520", &m, &o), BACKEND_OK);
    CU_ASSERT_EQUAL(read_check(o, 0, 100, 100, &done), BACKEND_OK);
    /* a little ahead: skipped in the stream, no new request */
    CU_ASSERT_EQUAL(read_check(o, 1024 * 1024 + 5, 1000, 4096, &done), BACKEND_OK);
    CU_ASSERT_EQUAL(atomic_load(&F.gets), 1);
    /* far ahead: a ranged GET with If-Match */
    CU_ASSERT_EQUAL(read_check(o, 15 * 1024 * 1024, 4096, 4096, &done), BACKEND_OK);
    CU_ASSERT_EQUAL(atomic_load(&F.gets), 2);
    pthread_mutex_lock(&F.mu);
    CU_ASSERT_STRING_EQUAL(F.range, "bytes=15728640-20971519");
    CU_ASSERT_STRING_EQUAL(F.ifmatch, "\"abc\"");
    pthread_mutex_unlock(&F.mu);
    /* behind the stream: ranged too; then the stream goes on where it was */
    CU_ASSERT_EQUAL(read_check(o, 10, 10, 10, &done), BACKEND_OK);
    CU_ASSERT_EQUAL(atomic_load(&F.gets), 3);
    CU_ASSERT_EQUAL(read_check(o, 1024 * 1024 + 1005, size - (1024 * 1024 + 1005), 1 << 20,
                               &done), BACKEND_OK);
    CU_ASSERT_EQUAL(done, size - (1024 * 1024 + 1005));
    CU_ASSERT_EQUAL(atomic_load(&F.heads), 0);
    backend_obj_close(o);
    obj_meta_clear(&m);
    backend_close(b);
}

static void missing_key_and_bucket_come_from_the_error_body(void)
{
    struct backend *b = fake_backend(0);
    struct obj_meta m;
    struct backend_obj *o = NULL;
    CU_ASSERT_EQUAL(backend_object_open(b, "b", "missing", &m, &o), BACKEND_NO_KEY);
    CU_ASSERT_PTR_NULL(o);
    CU_ASSERT_EQUAL(backend_object_open(b, "nob", "k", &m, &o), BACKEND_NO_BUCKET);
    CU_ASSERT_PTR_NULL(o);
    CU_ASSERT_EQUAL(atomic_load(&F.gets), 2);
    CU_ASSERT_EQUAL(atomic_load(&F.heads), 0);
    /* A 503 is retried (nothing was handed out yet). */
    CU_ASSERT_EQUAL_FATAL(backend_object_open(b, "b", "flaky", &m, &o), BACKEND_OK);
    CU_ASSERT_EQUAL(m.size, 5000);
    uint64_t done = 0;
    CU_ASSERT_EQUAL(read_check(o, 0, 5000, 5000, &done), BACKEND_OK);
    CU_ASSERT_EQUAL(atomic_load(&F.gets), 4);
    backend_obj_close(o);
    obj_meta_clear(&m);
    backend_close(b);
}

static void open_returns_at_the_headers(void)
{
    struct backend *b = fake_backend(0);
    struct obj_meta m;
    struct backend_obj *o = NULL;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CU_ASSERT_EQUAL_FATAL(backend_object_open(b, "b", "late", &m, &o), BACKEND_OK);
    CU_ASSERT(secs_since(&t0) < 1.0);
    CU_ASSERT_EQUAL(m.size, 10);
    uint64_t done = 0;
    CU_ASSERT_EQUAL(read_check(o, 0, 10, 10, &done), BACKEND_OK);
    CU_ASSERT(secs_since(&t0) >= 1.4);
    backend_obj_close(o);
    obj_meta_clear(&m);
    backend_close(b);
}

static void stalled_body_fails_the_read_with_unavailable(void)
{
    struct backend *b = fake_backend(1000);
    struct obj_meta m;
    struct backend_obj *o = NULL;
    CU_ASSERT_EQUAL_FATAL(backend_object_open(b, "b", "stall", &m, &o), BACKEND_OK);
    uint64_t done = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CU_ASSERT_EQUAL(read_check(o, 0, m.size, 65536, &done), BACKEND_UNAVAILABLE);
    CU_ASSERT_EQUAL(done, 1000);
    double dt = secs_since(&t0);
    CU_ASSERT(dt >= 0.9 && dt < 3.0);
    /* no silent resume: the same read fails again, at once */
    char x[10];
    size_t got = 0;
    CU_ASSERT_EQUAL(backend_obj_read(o, 1000, x, sizeof x, &got), BACKEND_UNAVAILABLE);
    CU_ASSERT_EQUAL(atomic_load(&F.gets), 1);
    backend_obj_close(o);
    obj_meta_clear(&m);
    backend_close(b);
}

static void dropped_connection_fails_the_read_never_short(void)
{
    struct backend *b = fake_backend(0);
    struct obj_meta m;
    struct backend_obj *o = NULL;
    CU_ASSERT_EQUAL_FATAL(backend_object_open(b, "b", "drop", &m, &o), BACKEND_OK);
    uint64_t done = 0;
    enum backend_status st = read_check(o, 0, m.size, 65536, &done);
    CU_ASSERT(st == BACKEND_UNAVAILABLE || st == BACKEND_IO);
    CU_ASSERT_EQUAL(done, 100000);
    backend_obj_close(o);
    obj_meta_clear(&m);
    backend_close(b);
}

static void close_before_the_end_stops_the_transfer(void)
{
    struct backend *b = fake_backend(0);
    struct obj_meta m;
    struct backend_obj *o = NULL;
    uint64_t size = 256ull * 1024 * 1024, done = 0;
    CU_ASSERT_EQUAL_FATAL(backend_object_open(b, "b", "obj-268435456", &m, &o), BACKEND_OK);
    CU_ASSERT_EQUAL(read_check(o, 0, 1024 * 1024, 1024 * 1024, &done), BACKEND_OK);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    backend_obj_close(o);
    CU_ASSERT(secs_since(&t0) < 0.5);
    /* The server sees the connection go: its send fails. */
    for (int i = 0; i < 200 && atomic_load(&F.aborted) == 0; i++)
        nap_ms(10);
    CU_ASSERT_EQUAL(atomic_load(&F.aborted), 1);
    /* what it got out: the ring and the socket buffers, not the object */
    CU_ASSERT(atomic_load(&F.body_sent) < size / 4);
    obj_meta_clear(&m);
    backend_close(b);
}

/* An empty value must reach curl as "name;" (a "name:" line is dropped). */
static void empty_header_is_curls_semicolon_form(void)
{
    char *l = s3_header_line("x-amz-meta-a", "");
    CU_ASSERT_STRING_EQUAL(l, "x-amz-meta-a;");
    free(l);
    l = s3_header_line("content-encoding", "deflate, gzip");
    CU_ASSERT_STRING_EQUAL(l, "content-encoding: deflate, gzip");
    free(l);
}

/* The line of list l that starts with prefix, or NULL. */
static const char *slist_find(const struct curl_slist *l, const char *prefix)
{
    for (; l; l = l->next)
        if (strncmp(l->data, prefix, strlen(prefix)) == 0)
            return l->data;
    return NULL;
}

/* An attempt's headers are signed as botocore 1.43 signs the same request
 * (S3SigV4Auth, UNSIGNED-PAYLOAD, a session token): the empty header as
 * "name:", the "Name:" lines that only stop curl's own headers left out,
 * Host as the URL gives it, path-style and virtual-hosted. A later attempt
 * signs again at its own time. */
static void attempt_headers_signed_as_botocore_signs_them(void)
{
    struct s3_store st = { .region = "eu-west-3", .access = "AKIDEXAMPLE",
                           .secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" };
    char l0[] = "x-amz-meta-x;", l1[] = "Content-Type: text/plain",
         l2[] = "x-amz-meta-y: two  words", l3[] = "x-amz-content-sha256: UNSIGNED-PAYLOAD",
         l4[] = "Expect:", l5[] = "x-amz-security-token: tok/en=";
    struct curl_slist hl[] = { { l0, &hl[1] }, { l1, &hl[2] }, { l2, &hl[3] },
                               { l3, &hl[4] }, { l4, &hl[5] }, { l5, NULL } };
    static const struct { const char *url, *host, *sig; } cases[] = {
        { "http://127.0.0.1:9000/bkt/a%20key%2B/x~.y?partNumber=2&uploadId=a%2Fb",
          "Host: 127.0.0.1:9000",
          "c33edeea045a38ca9cb8b4999e0faeb93416672f140645580594bf9f5a8ea8d8" },
        { "http://bkt.s3.local/a%20key", "Host: bkt.s3.local",
          "3e74c080a74f9f7b95861cac7a039114f8c69e817aed046a9265ba4d9c4789c0" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct curl_slist *out = s3_sign(&st, "PUT", cases[i].url, hl, (time_t)1440938160);
        CU_ASSERT_PTR_NOT_NULL_FATAL(out);
        char want[512];
        snprintf(want, sizeof want,
                 "Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/eu-west-3/s3/"
                 "aws4_request, SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;"
                 "x-amz-meta-x;x-amz-meta-y;x-amz-security-token, Signature=%s",
                 cases[i].sig);
        const char *authz = slist_find(out, "Authorization:");
        CU_ASSERT_STRING_EQUAL(authz ? authz : "", want);
        CU_ASSERT_PTR_NOT_NULL(slist_find(out, cases[i].host));
        CU_ASSERT_PTR_NOT_NULL(slist_find(out, "x-amz-date: 20150830T123600Z"));
        for (size_t k = 0; k < sizeof hl / sizeof hl[0]; k++)   /* hl's lines, as they were */
            CU_ASSERT_PTR_NOT_NULL(slist_find(out, hl[k].data));
        curl_slist_free_all(out);
    }
    struct curl_slist *later = s3_sign(&st, "PUT", cases[0].url, hl, (time_t)1440938161);
    CU_ASSERT_PTR_NOT_NULL_FATAL(later);
    CU_ASSERT_PTR_NOT_NULL(slist_find(later, "x-amz-date: 20150830T123601Z"));
    CU_ASSERT_PTR_NULL(strstr(slist_find(later, "Authorization:"), cases[0].sig));
    curl_slist_free_all(later);
}

int register_tests(void)
{
    CU_pSuite s = CU_add_suite("backend_s3_pure", NULL, NULL);
    if (!s)
        return -1;
#define T(fn) CU_add_test(s, #fn, fn)
    if (!T(url_building_table) || !T(attempt_headers_signed_as_botocore_signs_them) || !T(error_codes_map_to_statuses) ||
        !T(backoff_is_full_jitter_and_capped) || !T(headers_map_to_obj_meta) ||
        !T(xml_error_code) || !T(error_answers_pass_on_what_is_not_ours) || !T(xml_list_objects_v2) || !T(xml_list_parts_and_uploads) ||
        !T(down_tier_fails_fast_with_unavailable) || !T(ring_wraps_and_is_all_or_nothing) ||
        !T(read_path_table) || !T(empty_header_is_curls_semicolon_form))
        return -1;
    s = CU_add_suite("backend_s3_stream", fake_start, fake_stop);
    if (!s)
        return -1;
    if (!T(open_is_one_get_and_sequential_reads_stream_from_it) ||
        !T(reads_off_the_stream_take_ranged_gets_pinned_by_etag) ||
        !T(missing_key_and_bucket_come_from_the_error_body) ||
        !T(open_returns_at_the_headers) || !T(stalled_body_fails_the_read_with_unavailable) ||
        !T(dropped_connection_fails_the_read_never_short) ||
        !T(close_before_the_end_stops_the_transfer))
        return -1;
#undef T
    return 0;
}
