/* tests/unit/test_auth_chunked.c - aws-chunked bodies through the body
 * verifier: the published AWS multi-chunk example fed whole, byte by byte
 * and in random splits; tampering, truncation, caps; signed and unsigned
 * trailers with checksums. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "cu.h"
#include "auth.h"
#include "auth_int.h"

int register_tests(void);

#define AK "AKIAIOSFODNN7EXAMPLE"
#define SK "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define T0 ((time_t)1369353600)  /* 20130524T000000Z */
#define AMZDATE "20130524T000000Z"
#define SCOPE "20130524/us-east-1/s3/aws4_request"

static time_t test_clock(void) { return T0; }

static struct conf_user g_users[1] = { { .name = "example", .access_key = AK, .secret_key = SK } };
static struct conf g_conf;
static struct auth *g_auth;

/* ---- a growable byte string ---- */

struct bytes {
    uint8_t *p;
    size_t len, cap;
};

static void b_add(struct bytes *b, const void *d, size_t n)
{
    if (n == 0)
        return;
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        CU_ASSERT_PTR_NOT_NULL_FATAL(b->p);
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
}

static void b_adds(struct bytes *b, const char *s) { b_add(b, s, strlen(s)); }

/* ---- the request side ---- */

struct sreq {
    struct auth_hdr h[16];
    char vals[16][512];
    size_t n;
    struct auth_req r;
    struct auth_ctx *ctx;
};

static void sreq_hdr(struct sreq *s, const char *name, const char *value)
{
    snprintf(s->vals[s->n], sizeof s->vals[0], "%s", value);
    s->h[s->n].name = name;
    s->h[s->n].value = s->vals[s->n];
    s->n++;
    s->r.n_hdrs = s->n;
}

/* The published "Transferring Payload in Multiple Chunks" request. */
static void aws_stream_request(struct sreq *s)
{
    memset(s, 0, sizeof *s);
    s->r.method = "PUT";
    s->r.raw_path = "/examplebucket/chunkObject.txt";
    s->r.raw_query = "";
    s->r.hdrs = s->h;
    sreq_hdr(s, "host", "s3.amazonaws.com");
    sreq_hdr(s, "x-amz-date", AMZDATE);
    sreq_hdr(s, "x-amz-storage-class", "REDUCED_REDUNDANCY");
    sreq_hdr(s, "authorization",
             "AWS4-HMAC-SHA256 Credential=" AK "/" SCOPE ",SignedHeaders=content-encoding;"
             "content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;"
             "x-amz-storage-class,Signature="
             "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9");
    sreq_hdr(s, "x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD");
    sreq_hdr(s, "content-encoding", "aws-chunked");
    sreq_hdr(s, "x-amz-decoded-content-length", "66560");
    sreq_hdr(s, "content-length", "66824");
}

/* A request of ours: signs host and every x-amz-* header (as S3 requires),
 * with an optional x-amz-trailer; content-encoding stays unsigned. */
static void own_request_trailer(struct sreq *s, const char *content_sha,
                                const char *decoded_len, const char *trailer)
{
    memset(s, 0, sizeof *s);
    s->r.method = "PUT";
    s->r.raw_path = "/bucket/obj";
    s->r.raw_query = "";
    s->r.hdrs = s->h;
    sreq_hdr(s, "host", "localhost:9000");
    sreq_hdr(s, "x-amz-date", AMZDATE);
    sreq_hdr(s, "x-amz-content-sha256", content_sha);
    if (decoded_len)
        sreq_hdr(s, "x-amz-decoded-content-length", decoded_len);
    if (trailer)
        sreq_hdr(s, "x-amz-trailer", trailer);
    sreq_hdr(s, "content-encoding", "aws-chunked");
    char sig[65], hdr[400];
    const char *sh = decoded_len ? (trailer ? "host;x-amz-content-sha256;x-amz-date;"
                                              "x-amz-decoded-content-length;x-amz-trailer"
                                            : "host;x-amz-content-sha256;x-amz-date;"
                                              "x-amz-decoded-content-length")
                                 : (trailer ? "host;x-amz-content-sha256;x-amz-date;"
                                              "x-amz-trailer"
                                            : "host;x-amz-content-sha256;x-amz-date");
    CU_ASSERT_EQUAL_FATAL(auth_sign_request(&s->r, false, sh, content_sha, AMZDATE, "us-east-1",
                                            SK, sig), AUTH_OK);
    snprintf(hdr, sizeof hdr, "AWS4-HMAC-SHA256 Credential=" AK "/" SCOPE
             ", SignedHeaders=%s, Signature=%s", sh, sig);
    sreq_hdr(s, "authorization", hdr);
}

static void own_request(struct sreq *s, const char *content_sha, const char *decoded_len)
{
    own_request_trailer(s, content_sha, decoded_len, NULL);
}

static void sreq_verify(struct sreq *s)
{
    CU_ASSERT_EQUAL_FATAL(auth_verify(g_auth, &s->r, &s->ctx), AUTH_OK);
}

static const char *sreq_seed(const struct sreq *s)
{
    const char *a = auth_req_header(&s->r, "authorization", NULL);
    return strstr(a, "Signature=") + 10;
}

/* ---- the body side: an independent encoder ---- */

static void hmac_hex(const uint8_t key[32], const char *msg, char out[65])
{
    uint8_t mac[32];
    CU_ASSERT_EQUAL(sg_sigv4_hmac(key, 32, msg, strlen(msg), mac), 0);
    sg_hex_encode(mac, 32, out);
}

/* Appends one signed chunk and advances prev. */
static void signed_chunk(struct bytes *b, const uint8_t key[32], char prev[65],
                         const uint8_t *d, size_t n)
{
    char dh[65], sts[512], sig[65], line[128];
    sg_sigv4_sha256_hex(d, n, dh);
    snprintf(sts, sizeof sts, "AWS4-HMAC-SHA256-PAYLOAD\n" AMZDATE "\n" SCOPE "\n%s\n%s\n%s",
             prev, AUTH_EMPTY_SHA256, dh);
    hmac_hex(key, sts, sig);
    snprintf(line, sizeof line, "%zx;chunk-signature=%s\r\n", n, sig);
    b_adds(b, line);
    b_add(b, d, n);
    if (n)
        b_adds(b, "\r\n");
    memcpy(prev, sig, 65);
}

/* data in chunks of `csize`, a final chunk; with trailers (lines of
 * "name:value") and a trailer signature when `trailers` is not NULL. */
static void signed_body(struct bytes *b, const char *seed, const uint8_t *d, size_t n,
                        size_t csize, const char *trailers)
{
    uint8_t key[32];
    char prev[65];
    CU_ASSERT_EQUAL(sg_sigv4_signing_key(SK, "20130524", "us-east-1", "s3", key), 0);
    memcpy(prev, seed, 64);
    prev[64] = '\0';
    for (size_t off = 0; off < n; off += csize)
        signed_chunk(b, key, prev, d + off, n - off < csize ? n - off : csize);
    signed_chunk(b, key, prev, NULL, 0);
    if (trailers) {
        char h[65], sts[512], sig[65];
        b_adds(b, trailers);
        /* canonical trailers: "name:value\n" each */
        char canon[1024];
        size_t o = 0;
        for (const char *p = trailers; *p; p++)
            if (*p != '\r')
                canon[o++] = *p;
        sg_sigv4_sha256_hex(canon, o, h);
        snprintf(sts, sizeof sts, "AWS4-HMAC-SHA256-TRAILER\n" AMZDATE "\n" SCOPE "\n%s\n%s",
                 prev, h);
        hmac_hex(key, sts, sig);
        b_adds(b, "x-amz-trailer-signature:");
        b_adds(b, sig);
        b_adds(b, "\r\n");
    }
    b_adds(b, "\r\n");
}

/* What botocore's AwsChunkedWrapper sends for STREAMING-UNSIGNED-PAYLOAD-TRAILER. */
static void unsigned_body(struct bytes *b, const uint8_t *d, size_t n, size_t csize,
                          const char *trailers)
{
    char line[32];
    for (size_t off = 0; off < n; off += csize) {
        size_t c = n - off < csize ? n - off : csize;
        snprintf(line, sizeof line, "%zx\r\n", c);
        b_adds(b, line);
        b_add(b, d + off, c);
        b_adds(b, "\r\n");
    }
    b_adds(b, "0\r\n");
    b_adds(b, trailers);
    b_adds(b, "\r\n");
}

/* ---- feeding ---- */

struct sink {
    struct bytes got;
    int stop_after;   /* abort on this call (1-based); 0 = never */
    int calls;
};

static int sink_cb(void *arg, const uint8_t *buf, size_t len)
{
    struct sink *s = arg;
    s->calls++;
    if (s->stop_after && s->calls >= s->stop_after)
        return 1;
    b_add(&s->got, buf, len);
    return 0;
}

enum split { SPLIT_WHOLE, SPLIT_BYTES, SPLIT_RANDOM };

/* Runs body through a verifier for s->ctx; returns the first non-OK status
 * (from begin, a feed, or finish) and fills res/sink. */
static enum auth_status run_body(struct sreq *s, const struct bytes *body, enum split how,
                                 unsigned seed, struct auth_body_result *res, struct sink *sink)
{
    struct auth_body *b = NULL;
    enum auth_status st = auth_body_begin(s->ctx, &s->r, &b);
    if (st != AUTH_OK)
        return st;
    srand(seed);
    size_t off = 0;
    while (off < body->len && st == AUTH_OK) {
        size_t n = body->len - off;
        if (how == SPLIT_BYTES)
            n = 1;
        else if (how == SPLIT_RANDOM && n > 1)
            n = 1 + (size_t)rand() % (rand() % 4 == 0 ? 8 : 3000) % n;
        st = auth_body_feed(b, body->p + off, n, sink_cb, sink);
        off += n;
    }
    if (st == AUTH_OK)
        st = auth_body_finish(b, res);
    auth_body_free(b);
    return st;
}

static void md5_hex(const uint8_t *d, size_t n, char out[33])
{
    uint8_t md[16];
    unsigned int l;
    EVP_Digest(d, n, md, &l, EVP_md5(), NULL);
    sg_hex_encode(md, 16, out);
}

/* ---- the published example ---- */

static uint8_t g_a[66560];

static void aws_example_body(struct bytes *b)
{
    static const char *const sigs[] = {
        "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
        "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
        "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
    };
    char line[128];
    memset(b, 0, sizeof *b);
    snprintf(line, sizeof line, "10000;chunk-signature=%s\r\n", sigs[0]);
    b_adds(b, line);
    b_add(b, g_a, 65536);
    b_adds(b, "\r\n");
    snprintf(line, sizeof line, "400;chunk-signature=%s\r\n", sigs[1]);
    b_adds(b, line);
    b_add(b, g_a, 1024);
    b_adds(b, "\r\n");
    snprintf(line, sizeof line, "0;chunk-signature=%s\r\n\r\n", sigs[2]);
    b_adds(b, line);
}

static void aws_streaming_example_seed_signature_verifies(void)
{
    struct sreq s;
    aws_stream_request(&s);
    sreq_verify(&s);
    CU_ASSERT_EQUAL(auth_ctx_payload(s.ctx), AUTH_PAYLOAD_STREAMING);
    auth_ctx_free(s.ctx);
}

static void aws_streaming_example_body_any_split(void)
{
    struct bytes body;
    char want_md5[33];
    aws_example_body(&body);
    CU_ASSERT_EQUAL(body.len, 66824);
    md5_hex(g_a, sizeof g_a, want_md5);
    static const struct { enum split how; unsigned seed; } runs[] = {
        { SPLIT_WHOLE, 0 }, { SPLIT_BYTES, 0 }, { SPLIT_RANDOM, 1 }, { SPLIT_RANDOM, 2 },
        { SPLIT_RANDOM, 3 }, { SPLIT_RANDOM, 4 }, { SPLIT_RANDOM, 5 }, { SPLIT_RANDOM, 6 },
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        struct sreq s;
        struct sink sink = { { 0 }, 0, 0 };
        struct auth_body_result res;
        aws_stream_request(&s);
        sreq_verify(&s);
        CU_ASSERT_EQUAL(run_body(&s, &body, runs[i].how, runs[i].seed, &res, &sink), AUTH_OK);
        CU_ASSERT_EQUAL(res.length, 66560);
        CU_ASSERT_STRING_EQUAL(res.md5_hex, want_md5);
        CU_ASSERT_STRING_EQUAL(res.checksum_name, "");
        CU_ASSERT_EQUAL(sink.got.len, 66560);
        CU_ASSERT(sink.got.p && memcmp(sink.got.p, g_a, 66560) == 0);
        free(sink.got.p);
        auth_ctx_free(s.ctx);
    }
    free(body.p);
}

static void aws_streaming_example_chunk_signatures_match_encoder(void)
{
    /* our independent encoder reproduces the published chunk signatures */
    struct bytes mine = { 0 }, pub;
    signed_body(&mine, "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9", g_a,
                sizeof g_a, 65536, NULL);
    aws_example_body(&pub);
    CU_ASSERT_EQUAL(mine.len, pub.len);
    CU_ASSERT(mine.len == pub.len && memcmp(mine.p, pub.p, pub.len) == 0);
    free(mine.p);
    free(pub.p);
}

/* Mutations of the example body and the status each must produce. */
static void flip_data_byte_chunk2(struct bytes *b) { b->p[88 + 65538 + 86 + 500] ^= 1; }
static void flip_data_byte_chunk1(struct bytes *b) { b->p[88 + 10] = 'b'; }
static void flip_chunk_sig(struct bytes *b) { b->p[22 + 5] = b->p[22 + 5] == '0' ? '1' : '0'; }
static void flip_final_sig(struct bytes *b) { b->p[66738 + 18 + 3] ^= 1; }
static void swap_size_hex(struct bytes *b) { b->p[0] = 'g'; }
static void drop_sig_ext(struct bytes *b) { memcpy(b->p + 5, ";chunk-signaturX", 16); }
static void break_data_crlf(struct bytes *b) { b->p[88 + 65536] = 'x'; }
static void trailing_garbage(struct bytes *b) { b_adds(b, "x"); }
static void trunc_in_header(struct bytes *b) { b->len = 10; }
static void trunc_in_data(struct bytes *b) { b->len = 5000; }
static void trunc_before_final(struct bytes *b) { b->len = 66738; }
static void trunc_in_final_line(struct bytes *b) { b->len = 66738 + 40; }
static void trunc_final_crlf(struct bytes *b) { b->len = 66824 - 2; }   /* liberal: OK */
static void trunc_final_lf(struct bytes *b) { b->len = 66824 - 1; }

static void aws_streaming_example_mutations(void)
{
    static const struct {
        const char *name;
        void (*mutate)(struct bytes *);
        enum auth_status want;
    } cases[] = {
        { "data_byte_chunk1", flip_data_byte_chunk1, AUTH_CHUNK_SIGNATURE_MISMATCH },
        { "data_byte_chunk2", flip_data_byte_chunk2, AUTH_CHUNK_SIGNATURE_MISMATCH },
        { "chunk_signature", flip_chunk_sig, AUTH_CHUNK_SIGNATURE_MISMATCH },
        { "final_chunk_signature", flip_final_sig, AUTH_CHUNK_SIGNATURE_MISMATCH },
        { "non_hex_size", swap_size_hex, AUTH_BAD_CHUNK },
        { "no_chunk_signature", drop_sig_ext, AUTH_BAD_CHUNK },
        { "data_not_followed_by_crlf", break_data_crlf, AUTH_BAD_CHUNK },
        { "bytes_after_end", trailing_garbage, AUTH_BAD_CHUNK },
        { "truncated_in_size_line", trunc_in_header, AUTH_INCOMPLETE_BODY },
        { "truncated_in_data", trunc_in_data, AUTH_INCOMPLETE_BODY },
        { "truncated_before_final_chunk", trunc_before_final, AUTH_INCOMPLETE_BODY },
        { "truncated_in_final_line", trunc_in_final_line, AUTH_INCOMPLETE_BODY },
        { "missing_last_crlf_accepted", trunc_final_crlf, AUTH_OK },
        { "missing_last_lf_accepted", trunc_final_lf, AUTH_OK },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int how = SPLIT_WHOLE; how <= SPLIT_RANDOM; how++) {
            struct bytes body;
            struct sreq s;
            struct sink sink = { { 0 }, 0, 0 };
            struct auth_body_result res;
            aws_example_body(&body);
            cases[i].mutate(&body);
            aws_stream_request(&s);
            sreq_verify(&s);
            enum auth_status st = run_body(&s, &body, (enum split)how, 7, &res, &sink);
            if (st != cases[i].want)
                fprintf(stderr, "\n%s/%d: got %s\n", cases[i].name, how, auth_status_name(st));
            CU_ASSERT_EQUAL(st, cases[i].want);
            free(sink.got.p);
            free(body.p);
            auth_ctx_free(s.ctx);
        }
    }
}

static void chunk_signature_failure_reported_by_completing_feed(void)
{
    struct bytes body;
    struct sreq s;
    struct auth_body *b = NULL;
    aws_example_body(&body);
    flip_data_byte_chunk1(&body);
    aws_stream_request(&s);
    sreq_verify(&s);
    CU_ASSERT_EQUAL_FATAL(auth_body_begin(s.ctx, &s.r, &b), AUTH_OK);
    /* everything but the last data byte of chunk 1: no verdict yet */
    CU_ASSERT_EQUAL(auth_body_feed(b, body.p, 88 + 65535, NULL, NULL), AUTH_OK);
    CU_ASSERT_EQUAL(auth_body_feed(b, body.p + 88 + 65535, 1, NULL, NULL),
                    AUTH_CHUNK_SIGNATURE_MISMATCH);
    /* sticky */
    CU_ASSERT_EQUAL(auth_body_feed(b, body.p + 88 + 65536, 2, NULL, NULL),
                    AUTH_CHUNK_SIGNATURE_MISMATCH);
    struct auth_body_result res;
    CU_ASSERT_EQUAL(auth_body_finish(b, &res), AUTH_CHUNK_SIGNATURE_MISMATCH);
    auth_body_free(b);
    auth_ctx_free(s.ctx);
    free(body.p);
}

/* ---- declared length, caps ---- */

static void run_own_signed(const char *decoded_len, const struct bytes *body, enum auth_status want,
                           const char *name)
{
    struct sreq s;
    struct sink sink = { { 0 }, 0, 0 };
    struct auth_body_result res;
    own_request(&s, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", decoded_len);
    sreq_verify(&s);
    enum auth_status st = run_body(&s, body, SPLIT_WHOLE, 0, &res, &sink);
    if (st != want)
        fprintf(stderr, "\n%s: got %s\n", name, auth_status_name(st));
    CU_ASSERT_EQUAL(st, want);
    free(sink.got.p);
    auth_ctx_free(s.ctx);
}

/* The 1000-byte body signed in the chain of a request declaring `decoded_len`
 * (that header is signed, so each declaration has its own seed). */
static void run_own_resigned(const char *decoded_len, enum auth_status want, const char *name)
{
    struct sreq s;
    struct sink sink = { { 0 }, 0, 0 };
    struct auth_body_result res;
    struct bytes body = { 0 };
    own_request(&s, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", decoded_len);
    sreq_verify(&s);
    signed_body(&body, sreq_seed(&s), g_a, 1000, 300, NULL);
    enum auth_status st = run_body(&s, &body, SPLIT_WHOLE, 0, &res, &sink);
    if (st != want)
        fprintf(stderr, "\n%s: got %s\n", name, auth_status_name(st));
    CU_ASSERT_EQUAL(st, want);
    free(sink.got.p);
    free(body.p);
    auth_ctx_free(s.ctx);
}

static void decoded_length_must_match_exactly(void)
{
    struct sreq s;
    own_request(&s, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "1000");
    struct bytes body = { 0 };
    signed_body(&body, sreq_seed(&s), g_a, 1000, 300, NULL);
    run_own_signed("1000", &body, AUTH_OK, "exact");
    run_own_resigned("1001", AUTH_INCOMPLETE_BODY, "declared_more");
    run_own_resigned("999", AUTH_BAD_CHUNK, "declared_less");
    run_own_signed(NULL, &body, AUTH_BAD_CHUNK, "not_declared");
    run_own_signed("1e3", &body, AUTH_BAD_CHUNK, "not_a_number");
    run_own_signed("99999999999999999999999", &body, AUTH_BAD_CHUNK, "overflow");
    auth_ctx_free(s.ctx);
    free(body.p);
}

static void oversize_chunk_line_and_size_are_too_large(void)
{
    struct bytes body = { 0 };
    /* an extension running past the 4 KiB line cap */
    b_adds(&body, "10;x=");
    for (int i = 0; i < 5000; i++)
        b_adds(&body, "y");
    run_own_signed("16", &body, AUTH_TOO_LARGE, "long_line");
    free(body.p);
    memset(&body, 0, sizeof body);
    b_adds(&body, "4000001;chunk-signature="
                  "0000000000000000000000000000000000000000000000000000000000000000\r\n");
    run_own_signed("99999999999", &body, AUTH_TOO_LARGE, "chunk_over_64MiB");
    free(body.p);
    memset(&body, 0, sizeof body);
    b_adds(&body, "fffffffffffffffffffffffff;chunk-signature="
                  "0000000000000000000000000000000000000000000000000000000000000000\r\n");
    run_own_signed("99999999999", &body, AUTH_TOO_LARGE, "size_overflow");
    free(body.p);
}

static void callback_can_abort(void)
{
    struct bytes body;
    struct sreq s;
    struct sink sink = { { 0 }, 2, 0 };
    struct auth_body_result res;
    aws_example_body(&body);
    aws_stream_request(&s);
    sreq_verify(&s);
    CU_ASSERT_EQUAL(run_body(&s, &body, SPLIT_RANDOM, 3, &res, &sink), AUTH_ABORTED);
    free(sink.got.p);
    free(body.p);
    auth_ctx_free(s.ctx);
}

/* ---- trailers ---- */

static uint8_t g_text[3000];

static void crc32_b64(const uint8_t *d, size_t n, char out[16])
{
    uint32_t c = sg_crc32(0, d, n);
    uint8_t be[4] = { (uint8_t)(c >> 24), (uint8_t)(c >> 16), (uint8_t)(c >> 8), (uint8_t)c };
    sg_b64_encode(be, 4, out);
}

struct trailer_case {
    const char *name;
    const char *trailer_hdr;        /* x-amz-trailer, or NULL */
    int wrong_crc;                  /* 1 = wrong value, 2 = malformed, 3 = none sent */
    const char *tail;               /* replaces the final "\r\n" when set */
    const char *ext;                /* chunk extension on the first size line */
    enum auth_status want;
};

static void unsigned_trailer_cases(void)
{
    static const struct trailer_case cases[] = {
        { "crc32_ok", "x-amz-checksum-crc32", 0, NULL, NULL, AUTH_OK },
        { "crc32_wrong", "x-amz-checksum-crc32", 1, NULL, NULL, AUTH_CHECKSUM_MISMATCH },
        { "crc32_malformed", "x-amz-checksum-crc32", 2, NULL, NULL, AUTH_BAD_CHECKSUM_HEADER },
        { "crc32_announced_not_sent", "x-amz-checksum-crc32", 3, NULL, NULL, AUTH_BAD_CHUNK },
        { "crc32_not_announced", NULL, 0, NULL, NULL, AUTH_BAD_CHECKSUM_HEADER },
        { "no_trailer_at_all", NULL, 3, NULL, NULL, AUTH_OK },
        { "missing_final_crlf", "x-amz-checksum-crc32", 0, "", NULL, AUTH_OK },
        { "bare_lf_endings_tail", "x-amz-checksum-crc32", 0, "\n", NULL, AUTH_OK },
        { "chunk_extension_ignored", "x-amz-checksum-crc32", 0, NULL, ";foo=bar", AUTH_OK },
        { "bytes_after_end", "x-amz-checksum-crc32", 0, "\r\nX", NULL, AUTH_BAD_CHUNK },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int how = SPLIT_WHOLE; how <= SPLIT_RANDOM; how++) {
            const struct trailer_case *c = &cases[i];
            char b64[16], trailer[128];
            struct sreq s;
            struct bytes body = { 0 };
            struct sink sink = { { 0 }, 0, 0 };
            struct auth_body_result res;
            own_request_trailer(&s, "STREAMING-UNSIGNED-PAYLOAD-TRAILER", "3000",
                                c->trailer_hdr);
            sreq_verify(&s);
            crc32_b64(g_text, sizeof g_text, b64);
            if (c->wrong_crc == 1)
                b64[0] = b64[0] == 'A' ? 'B' : 'A';
            snprintf(trailer, sizeof trailer, "x-amz-checksum-crc32:%s\r\n",
                     c->wrong_crc == 2 ? "AAAA" : b64);
            if (c->wrong_crc == 3)
                trailer[0] = '\0';
            unsigned_body(&body, g_text, sizeof g_text, 1024, trailer);
            if (c->ext) {
                struct bytes b2 = { 0 };
                b_add(&b2, body.p, 3);            /* "400" */
                b_adds(&b2, c->ext);
                b_add(&b2, body.p + 3, body.len - 3);
                free(body.p);
                body = b2;
            }
            if (c->tail) {
                body.len -= 2;
                b_adds(&body, c->tail);
            }
            enum auth_status st = run_body(&s, &body, (enum split)how, 11, &res, &sink);
            if (st != c->want)
                fprintf(stderr, "\n%s/%d: got %s\n", c->name, how, auth_status_name(st));
            CU_ASSERT_EQUAL(st, c->want);
            if (st == AUTH_OK && c->trailer_hdr) {
                CU_ASSERT_STRING_EQUAL(res.checksum_name, "x-amz-checksum-crc32");
                CU_ASSERT_STRING_EQUAL(res.checksum_b64, b64);
                CU_ASSERT_EQUAL(res.length, 3000);
                CU_ASSERT(sink.got.len == 3000 && memcmp(sink.got.p, g_text, 3000) == 0);
            }
            free(sink.got.p);
            free(body.p);
            auth_ctx_free(s.ctx);
        }
    }
}

static void signed_trailer_cases(void)
{
    static const struct { const char *name; int mode; enum auth_status want; } cases[] = {
        { "ok", 0, AUTH_OK },
        { "trailer_value_tampered", 1, AUTH_CHUNK_SIGNATURE_MISMATCH },
        { "trailer_signature_missing", 2, AUTH_BAD_CHUNK },
        { "trailer_signature_flipped", 3, AUTH_CHUNK_SIGNATURE_MISMATCH },
        { "data_tampered", 4, AUTH_CHUNK_SIGNATURE_MISMATCH },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int how = SPLIT_WHOLE; how <= SPLIT_RANDOM; how++) {
            char b64[16], trailer[128];
            struct sreq s;
            struct bytes body = { 0 };
            struct sink sink = { { 0 }, 0, 0 };
            struct auth_body_result res;
            own_request_trailer(&s, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER", "3000",
                                "x-amz-checksum-crc32");
            sreq_verify(&s);
            crc32_b64(g_text, sizeof g_text, b64);
            snprintf(trailer, sizeof trailer, "x-amz-checksum-crc32:%s\r\n", b64);
            signed_body(&body, sreq_seed(&s), g_text, sizeof g_text, 1000, trailer);
            char *t = memmem(body.p, body.len, "x-amz-checksum-crc32:", 21);
            char *ts = memmem(body.p, body.len, "x-amz-trailer-signature:", 24);
            CU_ASSERT_FATAL(t && ts);
            switch (cases[i].mode) {
            case 1: t[21] = t[21] == 'A' ? 'B' : 'A'; break;
            case 2: memmove(ts, ts + 24 + 64 + 2, (size_t)(body.p + body.len - (uint8_t *)ts) - 90);
                    body.len -= 90; break;
            case 3: ts[30] = ts[30] == '0' ? '1' : '0'; break;
            case 4: body.p[100] ^= 1; break;
            default: break;
            }
            enum auth_status st = run_body(&s, &body, (enum split)how, 5, &res, &sink);
            if (st != cases[i].want)
                fprintf(stderr, "\n%s/%d: got %s\n", cases[i].name, how, auth_status_name(st));
            CU_ASSERT_EQUAL(st, cases[i].want);
            if (st == AUTH_OK) {
                CU_ASSERT_STRING_EQUAL(res.checksum_b64, b64);
            }
            free(sink.got.p);
            free(body.p);
            auth_ctx_free(s.ctx);
        }
    }
}

static void trailer_section_over_cap_is_too_large(void)
{
    struct sreq s;
    struct bytes body = { 0 };
    struct sink sink = { { 0 }, 0, 0 };
    struct auth_body_result res;
    own_request(&s, "STREAMING-UNSIGNED-PAYLOAD-TRAILER", "10");
    sreq_verify(&s);
    b_adds(&body, "a\r\n0123456789\r\n0\r\n");
    for (int i = 0; i < 400; i++)
        b_adds(&body, "x-pad-header-with-a-long-name:aaaaaaaaaaaaaaaaaaaa\r\n");
    b_adds(&body, "\r\n");
    CU_ASSERT_EQUAL(run_body(&s, &body, SPLIT_RANDOM, 9, &res, &sink), AUTH_TOO_LARGE);
    free(body.p);
    free(sink.got.p);
    auth_ctx_free(s.ctx);
}

static void trailer_without_announcement_on_plain_streaming_is_bad_chunk(void)
{
    struct sreq s;
    struct bytes body = { 0 };
    struct sink sink = { { 0 }, 0, 0 };
    struct auth_body_result res;
    own_request(&s, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "10");
    sreq_verify(&s);
    signed_body(&body, sreq_seed(&s), g_text, 10, 10, NULL);
    body.len -= 2;
    b_adds(&body, "x-amz-checksum-crc32:AAAAAA==\r\n\r\n");
    CU_ASSERT_EQUAL(run_body(&s, &body, SPLIT_WHOLE, 0, &res, &sink), AUTH_BAD_CHUNK);
    free(body.p);
    free(sink.got.p);
    auth_ctx_free(s.ctx);
    /* x-amz-trailer with a payload that cannot carry trailers */
    own_request_trailer(&s, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "10", "x-amz-checksum-crc32");
    sreq_verify(&s);
    struct auth_body *b = NULL;
    CU_ASSERT_EQUAL(auth_body_begin(s.ctx, &s.r, &b), AUTH_BAD_CHECKSUM_HEADER);
    CU_ASSERT_PTR_NULL(b);
    auth_ctx_free(s.ctx);
}

static void random_chunk_layouts_round_trip(void)
{
    /* random data, random chunk sizes (including 1), random splits */
    static uint8_t data[20000];
    srand(42);
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)rand();
    for (unsigned iter = 0; iter < 30; iter++) {
        size_t n = (size_t)rand() % sizeof data, csize = 1 + (size_t)rand() % 4096;
        char dl[32];
        struct sreq s;
        struct bytes body = { 0 };
        struct sink sink = { { 0 }, 0, 0 };
        struct auth_body_result res;
        snprintf(dl, sizeof dl, "%zu", n);
        own_request(&s, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", dl);
        sreq_verify(&s);
        signed_body(&body, sreq_seed(&s), data, n, csize, NULL);
        CU_ASSERT_EQUAL(run_body(&s, &body, SPLIT_RANDOM, iter, &res, &sink), AUTH_OK);
        CU_ASSERT_EQUAL(res.length, n);
        CU_ASSERT(sink.got.len == n && (n == 0 || memcmp(sink.got.p, data, n) == 0));
        free(sink.got.p);
        free(body.p);
        auth_ctx_free(s.ctx);
    }
}

static int suite_init(void)
{
    memset(g_a, 'a', sizeof g_a);
    for (size_t i = 0; i < sizeof g_text; i++)
        g_text[i] = (uint8_t)("The quick brown fox jumps over the lazy dog. "[i % 45]);
    g_conf.users = g_users;
    g_conf.n_users = 1;
    g_conf.region = "us-east-1";
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

int register_tests(void)
{
    static const struct cu_test tests[] = {
        { "aws_streaming_example_seed_signature_verifies",
          aws_streaming_example_seed_signature_verifies },
        { "aws_streaming_example_chunk_signatures_match_encoder",
          aws_streaming_example_chunk_signatures_match_encoder },
        { "aws_streaming_example_body_any_split", aws_streaming_example_body_any_split },
        { "aws_streaming_example_mutations", aws_streaming_example_mutations },
        { "chunk_signature_failure_reported_by_completing_feed",
          chunk_signature_failure_reported_by_completing_feed },
        { "decoded_length_must_match_exactly", decoded_length_must_match_exactly },
        { "oversize_chunk_line_and_size_are_too_large", oversize_chunk_line_and_size_are_too_large },
        { "callback_can_abort", callback_can_abort },
        { "unsigned_trailer_cases", unsigned_trailer_cases },
        { "signed_trailer_cases", signed_trailer_cases },
        { "trailer_section_over_cap_is_too_large", trailer_section_over_cap_is_too_large },
        { "trailer_without_announcement_on_plain_streaming_is_bad_chunk",
          trailer_without_announcement_on_plain_streaming_is_bad_chunk },
        { "random_chunk_layouts_round_trip", random_chunk_layouts_round_trip },
    };
    return cu_add_suite("auth_chunked", suite_init, suite_clean, tests, CU_N(tests));
}
