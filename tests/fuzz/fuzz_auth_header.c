/* tests/fuzz/fuzz_auth_header.c - auth_verify with a fuzzed Authorization
 * header, query, x-amz-date, x-amz-content-sha256, path and one extra
 * header: fields separated by NUL bytes in that order. A context that comes
 * back is exercised (user, payload, permission check, body begin). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *f[7];
    if (size > 65536)
        return 0;
    char *buf = fz_fields(data, size, f, 7);
    struct auth_hdr h[8];
    size_t n = 0;
    h[n++] = (struct auth_hdr){ "host", "examplebucket.s3.amazonaws.com" };
    if (f[0][0])
        h[n++] = (struct auth_hdr){ "authorization", f[0] };
    if (f[2][0])
        h[n++] = (struct auth_hdr){ "x-amz-date", f[2] };
    if (f[3][0])
        h[n++] = (struct auth_hdr){ "x-amz-content-sha256", f[3] };
    if (f[5][0] && f[6][0]) {
        /* an arbitrary (lower-cased by the gateway) header name */
        for (char *p = (char *)f[5]; *p; p++)
            if (*p >= 'A' && *p <= 'Z')
                *p = (char)(*p - 'A' + 'a');
        h[n++] = (struct auth_hdr){ f[5], f[6] };
    }
    struct auth_req r = { "GET", f[4][0] ? f[4] : "/test.txt", f[1], h, n };
    struct auth_ctx *ctx = NULL;
    struct auth *a = fz_auth();
    enum auth_status st = auth_verify(a, &r, &ctx);
    if (st == AUTH_OK) {
        (void)auth_ctx_user(ctx);
        (void)auth_ctx_payload(ctx);
        (void)auth_allowed(a, ctx, "pub", AUTH_PERM_READ);
        (void)auth_allowed(a, ctx, NULL, AUTH_PERM_ADMIN);
        struct auth_body *b = NULL;
        if (auth_body_begin(ctx, &r, &b) == AUTH_OK) {
            struct auth_body_result res;
            (void)auth_body_finish(b, &res);
            auth_body_free(b);
        }
        auth_ctx_free(ctx);
    } else if (ctx != NULL) {
        abort();   /* contract: no context on failure */
    }
    (void)auth_status_name(st);
    free(buf);
    return 0;
}
