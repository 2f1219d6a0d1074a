/* tests/unit/test_gw_wire.c - header values as S3 keeps them on the wire:
 * an empty value that libmicrohttpd would refuse, Content-Encoding kept
 * byte for byte but for aws-chunked. */
#include "cu.h"
#include <string.h>

#include <microhttpd.h>

#include "gw_int.h"

static void empty_value_is_sent_as_one_space(void)
{
    CU_ASSERT_STRING_EQUAL(gw_resp_header_value(""), " ");
    CU_ASSERT_STRING_EQUAL(gw_resp_header_value("v"), "v");
    CU_ASSERT_STRING_EQUAL(gw_resp_header_value(" a  b "), " a  b ");
    /* what libmicrohttpd does with each: "" refused, " " kept */
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"",
                                                                MHD_RESPMEM_PERSISTENT);
    CU_ASSERT_PTR_NOT_NULL_FATAL(resp);
    CU_ASSERT_EQUAL(MHD_add_response_header(resp, "x-amz-meta-a", ""), MHD_NO);
    CU_ASSERT_EQUAL(MHD_add_response_header(resp, "x-amz-meta-a", gw_resp_header_value("")),
                    MHD_YES);
    CU_ASSERT_STRING_EQUAL(MHD_get_response_header(resp, "x-amz-meta-a"), " ");
    MHD_destroy_response(resp);
}

static void content_encoding_keeps_all_but_aws_chunked(void)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        { "deflate, gzip", "deflate, gzip" },
        { "deflate,gzip", "deflate,gzip" },
        { "gzip", "gzip" },
        { "aws-chunked", "" },
        { "AWS-Chunked", "" },
        { "aws-chunked,gzip", "gzip" },
        { "aws-chunked, gzip", "gzip" },
        { "gzip, aws-chunked", "gzip" },
        { "gzip ,aws-chunked , br", "gzip , br" },
        { "deflate,  aws-chunked,  gzip", "deflate,  gzip" },
        { "x-aws-chunked", "x-aws-chunked" },
        { "", "" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[64];
        CU_ASSERT_EQUAL(gw_content_encoding_stored(cases[i].in, out, sizeof out), 0);
        CU_ASSERT_STRING_EQUAL(out, cases[i].out);
    }
    char small[4];
    CU_ASSERT_EQUAL(gw_content_encoding_stored("deflate", small, sizeof small), -1);
}

static void cors_preflight_needs_no_signature_and_is_refused_as_s3(void)
{
    enum auth_perm need;
    CU_ASSERT_FALSE(gw_op_permission(GW_OP_CORS_PREFLIGHT, &need));
    const struct s3_error *e = s3_error_get(S3E_CORS_NO_ORIGIN);
    CU_ASSERT_STRING_EQUAL(e->code, "BadRequest");
    CU_ASSERT_EQUAL(e->http_status, 400);
    CU_ASSERT_STRING_EQUAL(e->message, "Insufficient information. Origin request header needed.");
    e = s3_error_get(S3E_CORS_NOT_ENABLED);
    CU_ASSERT_STRING_EQUAL(e->code, "AccessForbidden");
    CU_ASSERT_EQUAL(e->http_status, 403);
}

static void xml_escape_keeps_utf8_and_replaces_other_bytes(void)
{
    struct gw_buf b;
    gw_buf_init(&b, 1024);
    CU_ASSERT_EQUAL(gw_xml_escape(&b, "\xC3\xA9\x07\x1F-\xFF\xC0\xAE\xE2\x82"), 0);
    CU_ASSERT_STRING_EQUAL(b.data, "\xC3\xA9&#x7;&#x1f;-\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
                                   "\xEF\xBF\xBD\xEF\xBF\xBD");
    gw_buf_free(&b);
}

int register_tests(void);
int register_tests(void)
{
    static const struct cu_test tests[] = {
        { "empty_value_is_sent_as_one_space", empty_value_is_sent_as_one_space },
        { "content_encoding_keeps_all_but_aws_chunked",
          content_encoding_keeps_all_but_aws_chunked },
        { "cors_preflight_needs_no_signature_and_is_refused_as_s3",
          cors_preflight_needs_no_signature_and_is_refused_as_s3 },
        { "xml_escape_keeps_utf8_and_replaces_other_bytes",
          xml_escape_keeps_utf8_and_replaces_other_bytes },
    };
    return cu_add_suite("gw_wire", NULL, NULL, tests, CU_N(tests));
}
