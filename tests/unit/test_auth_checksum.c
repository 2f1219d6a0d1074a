/* tests/unit/test_auth_checksum.c - payload checksums and the single-chunk
 * body checks: the five x-amz-checksum-* algorithms over a split check
 * string, x-amz-content-sha256, Content-MD5 and x-amz-checksum-* headers
 * through the body verifier, with a signed payload's MD5 and SHA-256 in one
 * pass (common/md5sha.h) and in two. The CRCs and base64 themselves:
 * tests/unit/test_common_crc.c and test_common_encoding.c. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cu.h"
#include "auth.h"
#include "auth_int.h"
#include "md5sha.h"

int register_tests(void);

#define AK "AKIAIOSFODNN7EXAMPLE"
#define SK "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define T0 ((time_t)1369353600)
#define AMZDATE "20130524T000000Z"
#define CHECK "123456789"

static time_t test_clock(void) { return T0; }
static struct conf_user g_users[1] = { { .name = "example", .access_key = AK, .secret_key = SK } };
static struct conf g_conf;
static struct auth *g_auth;

/* ---- check values ---- */

static void all_five_algorithms_digest_check_string(void)
{
    static const struct { const char *name; const char *b64; } cases[] = {
        { "crc32", "y/Q5Jg==" },
        { "crc32c", "4waSgw==" },
        { "crc64nvme", "rosUhgp5mIg=" },
        { "sha1", "98O8HYCOBHMq32eZZczDTKeuNEE=" },
        { "sha256", "FeKw08M4keuw8e9gnsQZQgwg4yDOlMZfvIwzEkSOsiU=" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sg_ck c;
        uint8_t md[32];
        char b64[64];
        enum sg_ck_algo a = sg_ck_from_name(cases[i].name);
        CU_ASSERT_NOT_EQUAL_FATAL(a, SG_CK_NONE);
        CU_ASSERT_EQUAL_FATAL(sg_ck_init(&c, a), 0);
        sg_ck_update(&c, "1234", 4);
        sg_ck_update(&c, "", 0);
        sg_ck_update(&c, "56789", 5);
        size_t n = sg_ck_final(&c, md);
        CU_ASSERT_EQUAL(n, sg_ck_len(a));
        sg_b64_encode(md, n, b64);
        CU_ASSERT_STRING_EQUAL(b64, cases[i].b64);
        sg_ck_free(&c);
    }
    CU_ASSERT_EQUAL(sg_ck_from_name("x-amz-checksum-CRC32C"), SG_CK_CRC32C);
    CU_ASSERT_EQUAL(sg_ck_from_name("md5"), SG_CK_NONE);
    CU_ASSERT_STRING_EQUAL(sg_ck_header(SG_CK_CRC64NVME), "x-amz-checksum-crc64nvme");
}

/* ---- the body verifier without aws-chunked ---- */

struct body_case {
    const char *name;
    const char *content_sha;          /* NULL = signed as UNSIGNED-PAYLOAD */
    const char *hdrs[4][2];           /* extra headers; x-amz-* ones get signed */
    const char *body;
    enum auth_status want;            /* from begin or finish */
    const char *ck_name, *ck_b64;     /* expected result checksum, if any */
};

#define WELCOME "Welcome to Amazon S3."
#define WELCOME_SHA "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"

static char g_welcome_md5_b64[32];
static char g_welcome_md5_hex[33];

static enum auth_status run_case(const struct body_case *c, struct auth_body_result *res)
{
    struct auth_hdr h[12];
    size_t n = 0;
    const char *ph = c->content_sha ? c->content_sha : "UNSIGNED-PAYLOAD";
    h[n++] = (struct auth_hdr){ "host", "localhost" };
    h[n++] = (struct auth_hdr){ "x-amz-date", AMZDATE };
    h[n++] = (struct auth_hdr){ "x-amz-content-sha256", ph };
    for (int i = 0; i < 4 && c->hdrs[i][0]; i++) {
        const char *v = c->hdrs[i][1];
        if (strcmp(v, "@md5") == 0)
            v = g_welcome_md5_b64;
        h[n++] = (struct auth_hdr){ c->hdrs[i][0], v };
    }
    struct auth_req r = { "PUT", "/b/k", "", h, n };
    char sig[65], authz[600], sh[400] = "host;x-amz-content-sha256;x-amz-date";
    for (size_t i = 3; i < n; i++) {
        if (strncmp(h[i].name, "x-amz-", 6) == 0) {
            strcat(sh, ";");
            strcat(sh, h[i].name);
        }
    }
    CU_ASSERT_EQUAL(auth_sign_request(&r, false, sh, ph, AMZDATE, "us-east-1", SK, sig), AUTH_OK);
    snprintf(authz, sizeof authz, "AWS4-HMAC-SHA256 Credential=" AK
             "/20130524/us-east-1/s3/aws4_request, SignedHeaders=%s, Signature=%s", sh, sig);
    h[n++] = (struct auth_hdr){ "authorization", authz };
    r.n_hdrs = n;
    struct auth_ctx *ctx = NULL;
    enum auth_status st = auth_verify(g_auth, &r, &ctx);
    CU_ASSERT_EQUAL_FATAL(st, AUTH_OK);
    struct auth_body *b = NULL;
    st = auth_body_begin(ctx, &r, &b);
    if (st == AUTH_OK) {
        size_t len = strlen(c->body);
        for (size_t off = 0; off < len && st == AUTH_OK; off += 5)
            st = auth_body_feed(b, (const uint8_t *)c->body + off, len - off < 5 ? len - off : 5,
                                NULL, NULL);
        if (st == AUTH_OK)
            st = auth_body_finish(b, res);
        auth_body_free(b);
    }
    auth_ctx_free(ctx);
    return st;
}

static void single_chunk_body_checks(void)
{
    static const struct body_case cases[] = {
        { "sha256_ok", WELCOME_SHA, { { 0 } }, WELCOME, AUTH_OK, NULL, NULL },
        { "sha256_upper_hex_ok", "44CE7DD67C959E0D3524FFAC1771DFBBA87D2B6B4B4E99E42034A8B803F8B072",
          { { 0 } }, WELCOME, AUTH_OK, NULL, NULL },
        { "sha256_body_changed", WELCOME_SHA, { { 0 } }, "Welcome to Amazon S4.",
          AUTH_SHA256_MISMATCH, NULL, NULL },
        { "sha256_body_truncated", WELCOME_SHA, { { 0 } }, "Welcome", AUTH_SHA256_MISMATCH, NULL,
          NULL },
        { "unsigned_anything_goes", NULL, { { 0 } }, "whatever", AUTH_OK, NULL, NULL },
        { "content_md5_good", NULL, { { "content-md5", "@md5" } }, WELCOME, AUTH_OK, NULL, NULL },
        { "content_md5_bad", NULL, { { "content-md5", "@md5" } }, "Welcome to Amazon S3!",
          AUTH_BAD_DIGEST, NULL, NULL },
        { "content_md5_malformed_length", NULL, { { "content-md5", "AAAA" } }, WELCOME,
          AUTH_INVALID_DIGEST, NULL, NULL },
        { "content_md5_not_base64", NULL, { { "content-md5", "!!!!!!!!!!!!!!!!!!!!!!==" } },
          WELCOME, AUTH_INVALID_DIGEST, NULL, NULL },
        { "content_md5_hex_instead_of_base64", NULL,
          { { "content-md5", "7d8f1926f6e01cfb3c3e04cde55ccbab" } }, WELCOME,
          AUTH_INVALID_DIGEST, NULL, NULL },
        { "crc32_header_ok", NULL, { { "x-amz-checksum-crc32", "y/Q5Jg==" } }, CHECK, AUTH_OK,
          "x-amz-checksum-crc32", "y/Q5Jg==" },
        { "crc32c_header_ok", NULL, { { "x-amz-checksum-crc32c", "4waSgw==" } }, CHECK, AUTH_OK,
          "x-amz-checksum-crc32c", "4waSgw==" },
        { "crc64nvme_header_ok", NULL, { { "x-amz-checksum-crc64nvme", "rosUhgp5mIg=" } }, CHECK,
          AUTH_OK, "x-amz-checksum-crc64nvme", "rosUhgp5mIg=" },
        { "sha1_header_ok", NULL, { { "x-amz-checksum-sha1", "98O8HYCOBHMq32eZZczDTKeuNEE=" } },
          CHECK, AUTH_OK, "x-amz-checksum-sha1", "98O8HYCOBHMq32eZZczDTKeuNEE=" },
        { "sha256_header_ok", NULL,
          { { "x-amz-checksum-sha256", "FeKw08M4keuw8e9gnsQZQgwg4yDOlMZfvIwzEkSOsiU=" } }, CHECK,
          AUTH_OK, "x-amz-checksum-sha256", "FeKw08M4keuw8e9gnsQZQgwg4yDOlMZfvIwzEkSOsiU=" },
        { "crc32_header_mismatch", NULL, { { "x-amz-checksum-crc32", "y/Q5Jw==" } }, CHECK,
          AUTH_CHECKSUM_MISMATCH, NULL, NULL },
        { "crc64nvme_header_mismatch", NULL, { { "x-amz-checksum-crc64nvme", "rosUhgp5mIg=" } },
          "12345678", AUTH_CHECKSUM_MISMATCH, NULL, NULL },
        { "sha256_header_mismatch", NULL,
          { { "x-amz-checksum-sha256", "FeKw08M4keuw8e9gnsQZQgwg4yDOlMZfvIwzEkSOsiU=" } }, "x",
          AUTH_CHECKSUM_MISMATCH, NULL, NULL },
        { "crc32_header_wrong_length", NULL, { { "x-amz-checksum-crc32", "rosUhgp5mIg=" } }, CHECK,
          AUTH_BAD_CHECKSUM_HEADER, NULL, NULL },
        { "crc32_header_not_base64", NULL, { { "x-amz-checksum-crc32", "y/Q5Jg" } }, CHECK,
          AUTH_BAD_CHECKSUM_HEADER, NULL, NULL },
        { "unknown_checksum_algorithm", NULL, { { "x-amz-checksum-md4", "AAAA" } }, CHECK,
          AUTH_BAD_CHECKSUM_HEADER, NULL, NULL },
        { "two_checksum_headers", NULL,
          { { "x-amz-checksum-crc32", "y/Q5Jg==" }, { "x-amz-checksum-crc32c", "4waSgw==" } },
          CHECK, AUTH_BAD_CHECKSUM_HEADER, NULL, NULL },
        { "sdk_algorithm_disagrees", NULL,
          { { "x-amz-checksum-crc32", "y/Q5Jg==" }, { "x-amz-sdk-checksum-algorithm", "SHA1" } },
          CHECK, AUTH_BAD_CHECKSUM_HEADER, NULL, NULL },
        { "sdk_algorithm_agrees", NULL,
          { { "x-amz-checksum-crc32", "y/Q5Jg==" }, { "x-amz-sdk-checksum-algorithm", "CRC32" } },
          CHECK, AUTH_OK, "x-amz-checksum-crc32", "y/Q5Jg==" },
        { "sdk_algorithm_alone_is_computed", NULL, { { "x-amz-sdk-checksum-algorithm", "CRC32C" } },
          CHECK, AUTH_OK, "x-amz-checksum-crc32c", "4waSgw==" },
        { "checksum_type_header_ignored", NULL,
          { { "x-amz-checksum-type", "FULL_OBJECT" }, { "x-amz-checksum-crc32", "y/Q5Jg==" } },
          CHECK, AUTH_OK, "x-amz-checksum-crc32", "y/Q5Jg==" },
        { "trailer_without_streaming", NULL, { { "x-amz-trailer", "x-amz-checksum-crc32" } },
          CHECK, AUTH_BAD_CHECKSUM_HEADER, NULL, NULL },
        { "md5_and_checksum_both_checked", WELCOME_SHA,
          { { "content-md5", "@md5" }, { "x-amz-checksum-crc32", "AAAAAA==" } }, WELCOME,
          AUTH_CHECKSUM_MISMATCH, NULL, NULL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct auth_body_result res;
        memset(&res, 0, sizeof res);
        enum auth_status st = run_case(&cases[i], &res);
        if (st != cases[i].want)
            fprintf(stderr, "\n%s: got %s\n", cases[i].name, auth_status_name(st));
        CU_ASSERT_EQUAL(st, cases[i].want);
        if (st == AUTH_OK) {
            CU_ASSERT_EQUAL(res.length, strlen(cases[i].body));
            CU_ASSERT_STRING_EQUAL(res.checksum_name, cases[i].ck_name ? cases[i].ck_name : "");
            CU_ASSERT_STRING_EQUAL(res.checksum_b64, cases[i].ck_b64 ? cases[i].ck_b64 : "");
        }
    }
}

static void md5_of_payload_is_the_etag(void)
{
    struct body_case c = { "etag", WELCOME_SHA, { { 0 } }, WELCOME, AUTH_OK, NULL, NULL };
    struct auth_body_result res;
    CU_ASSERT_EQUAL_FATAL(run_case(&c, &res), AUTH_OK);
    CU_ASSERT_STRING_EQUAL(res.md5_hex, g_welcome_md5_hex);
    struct body_case e = { "empty", NULL, { { 0 } }, "", AUTH_OK, NULL, NULL };
    CU_ASSERT_EQUAL_FATAL(run_case(&e, &res), AUTH_OK);
    CU_ASSERT_STRING_EQUAL(res.md5_hex, "d41d8cd98f00b204e9800998ecf8427e");
    CU_ASSERT_EQUAL(res.length, 0);
}

/* The body checks again with the one pass switched off: a CPU without the
 * SHA extensions takes this path. */
static void the_same_checks_hashing_in_two_passes(void)
{
    sg_md5sha_set(false);
    single_chunk_body_checks();
    md5_of_payload_is_the_etag();
    sg_md5sha_set(true);
}

/* Signed bodies of several blocks, fed in 5-byte pieces: the ETag and the
 * SHA-256 check agree in one pass and in two, and one changed byte is
 * refused by both. */
static void signed_bodies_of_many_blocks_in_one_pass_and_two(void)
{
    static const size_t sizes[] = { 1, 55, 56, 64, 65, 200, 4099, 100000 };
    unsigned seed = 7;
    for (size_t i = 0; i < CU_N(sizes); i++) {
        size_t n = sizes[i];
        char *body = malloc(n + 1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(body);
        for (size_t j = 0; j < n; j++)
            body[j] = (char)('a' + rand_r(&seed) % 26);
        body[n] = 0;
        uint8_t md[32];
        unsigned int l;
        char sha_hex[65], md5_hex[33];
        EVP_Digest(body, n, md, &l, EVP_sha256(), NULL);
        sg_hex_encode(md, 32, sha_hex);
        EVP_Digest(body, n, md, &l, EVP_md5(), NULL);
        sg_hex_encode(md, 16, md5_hex);
        for (int one = 1; one >= 0; one--) {
            sg_md5sha_set(one);
            struct body_case c = { "signed", sha_hex, { { 0 } }, body, AUTH_OK, NULL, NULL };
            struct auth_body_result res;
            CU_ASSERT_EQUAL(run_case(&c, &res), AUTH_OK);
            CU_ASSERT_STRING_EQUAL(res.md5_hex, md5_hex);
            CU_ASSERT_EQUAL(res.length, n);
            char was = body[n / 2];
            body[n / 2] = was == 'z' ? 'a' : 'z';
            CU_ASSERT_EQUAL(run_case(&c, &res), AUTH_SHA256_MISMATCH);
            body[n / 2] = was;
        }
        sg_md5sha_set(true);
        free(body);
    }
}

static void finish_twice_and_feed_after_finish_fail(void)
{
    struct auth_hdr h[] = { { "host", "h" } };
    struct auth_req r = { "PUT", "/b/k", "", h, 1 };
    struct auth_ctx *ctx = NULL;
    struct auth_body *b = NULL;
    struct auth_body_result res;
    CU_ASSERT_EQUAL_FATAL(auth_verify(g_auth, &r, &ctx), AUTH_OK);   /* anonymous */
    CU_ASSERT_EQUAL_FATAL(auth_body_begin(ctx, &r, &b), AUTH_OK);
    CU_ASSERT_EQUAL(auth_body_feed(b, (const uint8_t *)"x", 1, NULL, NULL), AUTH_OK);
    CU_ASSERT_EQUAL(auth_body_finish(b, &res), AUTH_OK);
    CU_ASSERT_NOT_EQUAL(auth_body_finish(b, &res), AUTH_OK);
    CU_ASSERT_NOT_EQUAL(auth_body_feed(b, (const uint8_t *)"x", 1, NULL, NULL), AUTH_OK);
    auth_body_free(b);
    auth_ctx_free(ctx);
}

static int suite_init(void)
{
    uint8_t md[16];
    /* MD5 of WELCOME via OpenSSL, for Content-MD5 cases */
    unsigned int l;
    EVP_Digest(WELCOME, strlen(WELCOME), md, &l, EVP_md5(), NULL);
    sg_b64_encode(md, 16, g_welcome_md5_b64);
    sg_hex_encode(md, 16, g_welcome_md5_hex);
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
        { "all_five_algorithms_digest_check_string", all_five_algorithms_digest_check_string },
        { "single_chunk_body_checks", single_chunk_body_checks },
        { "md5_of_payload_is_the_etag", md5_of_payload_is_the_etag },
        { "the_same_checks_hashing_in_two_passes", the_same_checks_hashing_in_two_passes },
        { "signed_bodies_of_many_blocks_in_one_pass_and_two",
          signed_bodies_of_many_blocks_in_one_pass_and_two },
        { "finish_twice_and_feed_after_finish_fail", finish_twice_and_feed_after_finish_fail },
    };
    return cu_add_suite("auth_checksum", suite_init, suite_clean, tests, CU_N(tests));
}
