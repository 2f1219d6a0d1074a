/* tests/unit/test_common_buf.c - the capped buffer of common/buf.h: exactly
 * max bytes fit, one more is refused and the refusal sticks, growth keeps the
 * bytes and the NUL, and AWS URI encoding. */
#include <CUnit/CUnit.h>
#include <string.h>

#include "cu.h"
#include "buf.h"

static void the_cap_holds_and_the_error_sticks(void)
{
    struct sg_buf b;
    sg_buf_init(&b, 10);
    CU_ASSERT_PTR_NULL(b.p);
    CU_ASSERT_TRUE(sg_buf_adds(&b, "0123456789"));
    CU_ASSERT_EQUAL(b.len, 10);
    CU_ASSERT_EQUAL(b.err, 0);
    CU_ASSERT_FALSE(sg_buf_addc(&b, 'x'));
    CU_ASSERT_EQUAL(b.err, SG_BUF_OVER);
    CU_ASSERT_STRING_EQUAL(b.p, "0123456789");        /* the refused byte is not there */
    sg_buf_free(&b);
    CU_ASSERT_PTR_NULL(b.p);
    CU_ASSERT_EQUAL(b.err, 0);
    CU_ASSERT_EQUAL(b.max, 10);                        /* reusable with its cap */
    CU_ASSERT_TRUE(sg_buf_adds(&b, "abc"));
    CU_ASSERT_FALSE(sg_buf_add(&b, "0123456789", 8));  /* 11 > 10: refused whole */
    CU_ASSERT_FALSE(sg_buf_adds(&b, "d"));             /* sticky: even what would fit */
    CU_ASSERT_STRING_EQUAL(b.p, "abc");
    sg_buf_free(&b);
}

static void growth_keeps_bytes_and_nul(void)
{
    struct sg_buf b;
    sg_buf_init(&b, 1 << 20);
    CU_ASSERT_TRUE(sg_buf_add(&b, "", 0));
    CU_ASSERT_PTR_NOT_NULL_FATAL(b.p);
    CU_ASSERT_STRING_EQUAL(b.p, "");
    for (int i = 0; i < 10000; i++)
        sg_buf_addc(&b, (char)('a' + i % 26));
    CU_ASSERT_EQUAL(b.err, 0);
    CU_ASSERT_EQUAL(b.len, 10000);
    CU_ASSERT_EQUAL(strlen(b.p), 10000);
    CU_ASSERT_EQUAL(b.p[9999], (char)('a' + 9999 % 26));
    CU_ASSERT_TRUE(b.cap > b.len);
    sg_buf_free(&b);
}

static void uri_encoding_as_aws_signs_it(void)
{
    static const struct { const char *in; bool keep_slash; const char *out; } cases[] = {
        { "AZaz09-._~", false, "AZaz09-._~" },
        { "a b/c", true, "a%20b/c" },
        { "a b/c", false, "a%20b%2Fc" },
        { "k\xc3\xa9+%", true, "k%C3%A9%2B%25" },
        { "", false, "" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sg_buf b;
        sg_buf_init(&b, 64);
        CU_ASSERT_TRUE(sg_buf_adds(&b, "/"));
        CU_ASSERT_TRUE(sg_buf_add_uri(&b, cases[i].in, strlen(cases[i].in), cases[i].keep_slash));
        CU_ASSERT_STRING_EQUAL(b.p + 1, cases[i].out);
        sg_buf_free(&b);
    }
    struct sg_buf b;
    sg_buf_init(&b, 5);
    CU_ASSERT_FALSE(sg_buf_add_uri(&b, "ab c", 4, false));   /* "ab%20c" is 6 > 5 */
    CU_ASSERT_EQUAL(b.err, SG_BUF_OVER);
    sg_buf_free(&b);
}

int register_tests(void)
{
    static const struct cu_test tests[] = {
        { "the_cap_holds_and_the_error_sticks", the_cap_holds_and_the_error_sticks },
        { "growth_keeps_bytes_and_nul", growth_keeps_bytes_and_nul },
        { "uri_encoding_as_aws_signs_it", uri_encoding_as_aws_signs_it },
    };
    return cu_add_suite("common_buf", NULL, NULL, tests, CU_N(tests));
}
