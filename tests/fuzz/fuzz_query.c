/* tests/fuzz/fuzz_query.c - the query-string side of SigV4 and SigV2:
 * presigned parameter parsing in auth_verify, the canonical query (decode,
 * re-encode, sort), the URI canonicaliser and SigV2's string to sign
 * (sub-resources, x-amz-* parameters), on a fuzzed raw query and path. The
 * first byte picks the method; then path NUL query. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const methods[] = { "GET", "PUT", "HEAD", "DELETE", "POST" };
    const char *f[2];
    if (size < 1 || size > 65536)
        return 0;
    const char *method = methods[data[0] % 5];
    char *buf = fz_fields(data + 1, size - 1, f, 2);
    struct auth_hdr h[1] = { { "host", "examplebucket.s3.amazonaws.com" } };
    struct auth_req r = { method, f[0], f[1], h, 1 };
    struct auth_ctx *ctx = NULL;
    if (auth_verify(fz_auth(), &r, &ctx) == AUTH_OK)
        auth_ctx_free(ctx);

    struct sg_buf b;
    sg_buf_init(&b, 1u << 20);
    (void)auth_canonical_request(&r, "host", "UNSIGNED-PAYLOAD", true, &b);
    sg_buf_free(&b);
    sg_buf_init(&b, 1u << 20);
    sg_sigv4_uri_canon(&b, f[1], strlen(f[1]), false);
    sg_sigv4_uri_canon(&b, f[0], strlen(f[0]), true);
    sg_buf_free(&b);
    struct auth_v2_sts o = { (data[0] & 0x40) != 0, "1369357200", false,
                             (data[0] & 0x20) != 0, "s3.amazonaws.com" };
    sg_buf_init(&b, 1u << 20);
    (void)auth_sigv2_string_to_sign(&r, &o, &b);
    sg_buf_free(&b);
    char sig[65];
    (void)auth_sign_request(&r, data[0] & 0x80, "host", "UNSIGNED-PAYLOAD", "20130524T000000Z",
                            "us-east-1", FZ_SK, sig);
    free(buf);
    return 0;
}
