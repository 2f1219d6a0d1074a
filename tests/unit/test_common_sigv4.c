/* tests/unit/test_common_sigv4.c - the SigV4 signer of common/sigv4.h, the
 * one the verifier (auth/) and the cold tier's requests (backend/) share:
 * the AWS SigV4 test-suite vectors (aws-sig-v4-test-suite, signed with their
 * published signatures), AWS's documented signing key, and an empty header
 * value, which a cold tier must see signed as "name:". */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "cu.h"
#include "sigv4.h"

int register_tests(void);

/* The test suite's credentials, instant and scope. */
#define SUITE_SK "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define SUITE_DATE "20150830T123600Z"
#define SUITE_SCOPE "20150830/us-east-1/service/aws4_request"
#define HOST { "Host", "example.amazonaws.com" }
#define XDATE { "X-Amz-Date", SUITE_DATE }
#define EMPTY SG_SIGV4_EMPTY_SHA256
/* sha256("Param1=value1"), the body of the form-urlencoded vectors */
#define FORM_SHA "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e"
#define UNRESERVED "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
#define STS_TOKEN                                                                          \
    "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicR" \
    "XmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsb" \
    "urEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iP" \
    "PkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA=="

struct vector {
    const char *name;              /* the test suite's */
    const char *method, *path, *query;
    size_t n_hdrs;
    struct sg_sigv4_hdr hdrs[6];
    const char *signed_headers, *payload_hash;
    const char *signature;         /* published */
};

static const struct vector suite[] = {
    { "get-vanilla", "GET", "/", "", 2, { HOST, XDATE }, "host;x-amz-date", EMPTY,
      "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31" },
    { "get-vanilla-query-order-key-case", "GET", "/", "Param2=value2&Param1=value1", 2,
      { HOST, XDATE }, "host;x-amz-date", EMPTY,
      "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500" },
    { "get-vanilla-empty-query-key", "GET", "/", "Param1=value1", 2, { HOST, XDATE },
      "host;x-amz-date", EMPTY,
      "a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb" },
    { "get-vanilla-query-unreserved", "GET", "/", UNRESERVED "=" UNRESERVED, 2,
      { HOST, XDATE }, "host;x-amz-date", EMPTY,
      "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197" },
    { "get-vanilla-utf8-query", "GET", "/", "\xe1\x88\xb4=bar", 2, { HOST, XDATE },
      "host;x-amz-date", EMPTY,
      "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04" },
    { "get-utf8", "GET", "/\xe1\x88\xb4", "", 2, { HOST, XDATE }, "host;x-amz-date", EMPTY,
      "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85" },
    { "get-unreserved", "GET", "/" UNRESERVED, "", 2, { HOST, XDATE }, "host;x-amz-date", EMPTY,
      "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f" },
    { "get-header-key-duplicate", "GET", "/", "", 5,
      { HOST, { "My-Header1", "value2" }, { "My-Header1", "value2" }, { "My-Header1", "value1" },
        XDATE },
      "host;my-header1;x-amz-date", EMPTY,
      "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea" },
    { "get-header-value-order", "GET", "/", "", 6,
      { HOST, { "My-Header1", "value4" }, { "My-Header1", "value1" }, { "My-Header1", "value3" },
        { "My-Header1", "value2" }, XDATE },
      "host;my-header1;x-amz-date", EMPTY,
      "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01" },
    { "get-header-value-trim", "GET", "/", "", 4,
      { HOST, { "My-Header1", " value1" }, { "My-Header2", " \"a   b   c\"" }, XDATE },
      "host;my-header1;my-header2;x-amz-date", EMPTY,
      "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736" },
    { "post-vanilla", "POST", "/", "", 2, { HOST, XDATE }, "host;x-amz-date", EMPTY,
      "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b" },
    { "post-vanilla-query", "POST", "/", "Param1=value1", 2, { HOST, XDATE }, "host;x-amz-date",
      EMPTY, "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11" },
    { "post-header-key-sort", "POST", "/", "", 3, { HOST, { "My-Header1", "value1" }, XDATE },
      "host;my-header1;x-amz-date", EMPTY,
      "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c" },
    { "post-header-value-case", "POST", "/", "", 3, { HOST, { "My-Header1", "VALUE1" }, XDATE },
      "host;my-header1;x-amz-date", EMPTY,
      "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d" },
    { "post-sts-header-before", "POST", "/", "", 3,
      { HOST, XDATE, { "X-Amz-Security-Token", STS_TOKEN } },
      "host;x-amz-date;x-amz-security-token", EMPTY,
      "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead" },
    { "post-x-www-form-urlencoded", "POST", "/", "", 3,
      { { "Content-Type", "application/x-www-form-urlencoded" }, HOST, XDATE },
      "content-type;host;x-amz-date", FORM_SHA,
      "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a" },
    { "post-x-www-form-urlencoded-parameters", "POST", "/", "", 3,
      { { "Content-Type", "application/x-www-form-urlencoded; charset=utf8" }, HOST, XDATE },
      "content-type;host;x-amz-date", FORM_SHA,
      "1a72ec8f64bd914b0e42e42607c7fbce7fb2c7465f63e3092b3b0d39fa77a6fe" },
};

static struct sg_sigv4_req req_of(const struct vector *v)
{
    return (struct sg_sigv4_req){ v->method, v->path, v->query, v->hdrs, v->n_hdrs };
}

static void suite_vectors_sign_to_published_signatures(void)
{
    uint8_t key[32];
    CU_ASSERT_EQUAL_FATAL(sg_sigv4_signing_key(SUITE_SK, "20150830", "us-east-1", "service", key),
                          0);
    for (size_t i = 0; i < CU_N(suite); i++) {
        const struct vector *v = &suite[i];
        struct sg_sigv4_req r = req_of(v);
        char sig[65] = "";
        CU_ASSERT_EQUAL(sg_sigv4_sign(&r, false, v->signed_headers, v->payload_hash, SUITE_DATE,
                                      SUITE_SCOPE, key, sig),
                        0);
        if (strcmp(sig, v->signature) != 0)
            fprintf(stderr, "\n%s: got %s\n", v->name, sig);
        CU_ASSERT_STRING_EQUAL(sig, v->signature);
    }
}

/* get-header-value-trim's published canonical request and string to sign. */
static void header_value_trim_canonical_request_and_string_to_sign(void)
{
    struct sg_sigv4_req r = req_of(&suite[9]);
    struct sg_buf c, s;
    sg_buf_init(&c, SG_SIGV4_CANON_MAX);
    sg_buf_init(&s, SG_SIGV4_CANON_MAX);
    CU_ASSERT_STRING_EQUAL(suite[9].name, "get-header-value-trim");
    CU_ASSERT_EQUAL(sg_sigv4_canonical_request(&r, suite[9].signed_headers, EMPTY, false, &c), 0);
    CU_ASSERT_STRING_EQUAL(c.p, "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\n"
                                "my-header2:\"a b c\"\nx-amz-date:" SUITE_DATE "\n\n"
                                "host;my-header1;my-header2;x-amz-date\n" EMPTY);
    sg_sigv4_string_to_sign(SUITE_DATE, SUITE_SCOPE, c.p, &s);
    CU_ASSERT_STRING_EQUAL(s.p, "AWS4-HMAC-SHA256\n" SUITE_DATE "\n" SUITE_SCOPE "\n"
                                "a726db9b0df21c14f559d0a978e563112acb1b9e05476f0a6a1c7d68f28605c7");
    sg_buf_free(&c);
    sg_buf_free(&s);
}

/* AWS's "derive a signing key" example (20120215, us-east-1, iam). */
static void signing_key_matches_the_documented_example(void)
{
    uint8_t key[32];
    char hex[65];
    CU_ASSERT_EQUAL_FATAL(sg_sigv4_signing_key(SUITE_SK, "20120215", "us-east-1", "iam", key), 0);
    sg_sigv4_sha256_hex("", 0, hex);
    CU_ASSERT_STRING_EQUAL(hex, EMPTY);
    static const char want[] = "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d";
    char got[65];
    for (size_t i = 0; i < 32; i++)
        snprintf(got + 2 * i, 3, "%02x", key[i]);
    CU_ASSERT_STRING_EQUAL(got, want);
}

/* An empty user-metadata header (what the cold tier gets for
 * `x-amz-meta-x: ""`) is signed as "x-amz-meta-x:" with nothing after the
 * colon; the signature is botocore 1.43's for the same request. */
static void empty_header_value_is_signed_as_name_colon(void)
{
    static const struct sg_sigv4_hdr h[] = {
        { "host", "example.amazonaws.com" }, { "x-amz-content-sha256", EMPTY },
        { "x-amz-date", SUITE_DATE },        { "x-amz-meta-x", "" },
        { "x-amz-meta-y", "  two  words " },
    };
    static const char sh[] = "host;x-amz-content-sha256;x-amz-date;x-amz-meta-x;x-amz-meta-y";
    struct sg_sigv4_req r = { "PUT", "/examplebucket/a%20key", "", h, CU_N(h) };
    struct sg_buf c;
    sg_buf_init(&c, SG_SIGV4_CANON_MAX);
    CU_ASSERT_EQUAL(sg_sigv4_canonical_request(&r, sh, EMPTY, false, &c), 0);
    CU_ASSERT_STRING_EQUAL(c.p, "PUT\n/examplebucket/a%20key\n\nhost:example.amazonaws.com\n"
                                "x-amz-content-sha256:" EMPTY "\nx-amz-date:" SUITE_DATE "\n"
                                "x-amz-meta-x:\nx-amz-meta-y:two words\n\n"
                                "host;x-amz-content-sha256;x-amz-date;x-amz-meta-x;x-amz-meta-y\n"
                                EMPTY);
    sg_buf_free(&c);

    uint8_t key[32];
    char sig[65] = "";
    CU_ASSERT_EQUAL_FATAL(sg_sigv4_signing_key(SUITE_SK, "20150830", "us-east-1", "s3", key), 0);
    CU_ASSERT_EQUAL(sg_sigv4_sign(&r, false, sh, EMPTY, SUITE_DATE,
                                  "20150830/us-east-1/s3/aws4_request", key, sig),
                    0);
    CU_ASSERT_STRING_EQUAL(sig, "cf945f175d30512b8f7ffeb61472b8f506a19bfbc32ac8f9bb2923570ec4469b");
    /* a NULL value is the same empty value */
    struct sg_sigv4_hdr hn[CU_N(h)];
    memcpy(hn, h, sizeof h);
    hn[3].value = NULL;
    struct sg_sigv4_req rn = { "PUT", "/examplebucket/a%20key", NULL, hn, CU_N(hn) };
    char sig2[65] = "";
    CU_ASSERT_EQUAL(sg_sigv4_sign(&rn, false, sh, EMPTY, SUITE_DATE,
                                  "20150830/us-east-1/s3/aws4_request", key, sig2),
                    0);
    CU_ASSERT_STRING_EQUAL(sig2, sig);
}

/* A presigned URL's own X-Amz-Signature is left out of its canonical query
 * (encoded or not); everything else is sorted and encoded. */
static void canonical_query_drops_only_the_signature_when_asked(void)
{
    struct sg_buf b;
    sg_buf_init(&b, 4096);
    CU_ASSERT_EQUAL(sg_sigv4_canonical_query("b=2&X-Amz-Signature=ab&a=1", true, &b), 0);
    CU_ASSERT_STRING_EQUAL(b.p, "a=1&b=2");
    sg_buf_free(&b);
    CU_ASSERT_EQUAL(sg_sigv4_canonical_query("b=2&X-Amz-%53ignature=ab&a=1", true, &b), 0);
    CU_ASSERT_STRING_EQUAL(b.p, "a=1&b=2");        /* the name is compared decoded */
    sg_buf_free(&b);
    CU_ASSERT_EQUAL(sg_sigv4_canonical_query("b=2&X-Amz-Signature=ab&a=1", false, &b), 0);
    CU_ASSERT_STRING_EQUAL(b.p, "X-Amz-Signature=ab&a=1&b=2");
    sg_buf_free(&b);
    /* what the cold tier sends: a bare sub-resource, a '/' in a value */
    CU_ASSERT_EQUAL(sg_sigv4_canonical_query("uploads&prefix=a/b", false, &b), 0);
    CU_ASSERT_STRING_EQUAL(b.p, "prefix=a%2Fb&uploads=");
    sg_buf_free(&b);
}

static void amz_date_formats_utc(void)
{
    char d[17];
    sg_sigv4_amz_date((time_t)1440938160, d);   /* 2015-08-30 12:36:00 UTC */
    CU_ASSERT_STRING_EQUAL(d, SUITE_DATE);
    sg_sigv4_amz_date((time_t)0, d);
    CU_ASSERT_STRING_EQUAL(d, "19700101T000000Z");
}

int register_tests(void)
{
    static const struct cu_test tests[] = {
        { "suite_vectors_sign_to_published_signatures",
          suite_vectors_sign_to_published_signatures },
        { "header_value_trim_canonical_request_and_string_to_sign",
          header_value_trim_canonical_request_and_string_to_sign },
        { "signing_key_matches_the_documented_example",
          signing_key_matches_the_documented_example },
        { "empty_header_value_is_signed_as_name_colon",
          empty_header_value_is_signed_as_name_colon },
        { "canonical_query_drops_only_the_signature_when_asked",
          canonical_query_drops_only_the_signature_when_asked },
        { "amz_date_formats_utc", amz_date_formats_utc },
    };
    return cu_add_suite("common_sigv4", NULL, NULL, tests, CU_N(tests));
}
