/* tests/fuzz/fuzz_chunked.c - the body verifier (auth_body_*) and so the
 * aws-chunked decoder, on a fuzzed body fed in fuzzed pieces.
 * Input: [payload form][header flags][decoded length: 2 bytes][split seed] body.
 * The signed forms get a real signing state, so chunk-signature checks run
 * (and fail), the unsigned-trailer form reaches trailers and checksums. */
#include "fuzz_common.h"

static int sink(void *arg, const uint8_t *buf, size_t len)
{
    size_t *total = arg;
    *total += len;
    (void)buf;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const enum auth_payload forms[] = {
        AUTH_PAYLOAD_SHA256, AUTH_PAYLOAD_UNSIGNED, AUTH_PAYLOAD_STREAMING,
        AUTH_PAYLOAD_STREAMING_TRAILER, AUTH_PAYLOAD_STREAMING_UNSIGNED_TRAILER,
    };
    static const char *const trailers[] = { "x-amz-checksum-crc32", "x-amz-checksum-crc32c",
                                            "x-amz-checksum-crc64nvme", "x-amz-checksum-sha1",
                                            "x-amz-checksum-sha256", "x-amz-checksum-bogus" };
    if (size < 5 || size > 262144)
        return 0;
    struct auth_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.payload = forms[data[0] % 5];
    ctx.signed_req = true;
    memcpy(ctx.payload_hash, AUTH_EMPTY_SHA256, 65);
    if (sg_sigv4_signing_key(FZ_SK, "20130524", "us-east-1", "s3", ctx.sig.key) != 0)
        return 0;
    memcpy(ctx.sig.seed, "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9", 65);
    memcpy(ctx.sig.amzdate, "20130524T000000Z", 17);
    snprintf(ctx.sig.scope, sizeof ctx.sig.scope, "20130524/us-east-1/s3/aws4_request");

    uint8_t flags = data[1];
    char declen[24];
    snprintf(declen, sizeof declen, "%u", (unsigned)(data[2] | data[3] << 8));
    unsigned seed = data[4];
    data += 5;
    size -= 5;

    struct auth_hdr h[8];
    size_t n = 0;
    h[n++] = (struct auth_hdr){ "content-encoding", "aws-chunked" };
    if (!(flags & 0x80))
        h[n++] = (struct auth_hdr){ "x-amz-decoded-content-length", declen };
    if (flags & 1)
        h[n++] = (struct auth_hdr){ "x-amz-trailer", trailers[(flags >> 4) % 6] };
    if (flags & 2)
        h[n++] = (struct auth_hdr){ "content-md5", "1B2M2Y8AsgTpgAmY7PhCfg==" };
    if (flags & 4)
        h[n++] = (struct auth_hdr){ "x-amz-checksum-crc32", "AAAAAA==" };
    if (flags & 8)
        h[n++] = (struct auth_hdr){ "x-amz-sdk-checksum-algorithm", "CRC32" };
    struct auth_req r = { "PUT", "/b/k", "", h, n };

    struct auth_body *b = NULL;
    if (auth_body_begin(&ctx, &r, &b) != AUTH_OK)
        return 0;
    size_t off = 0, total = 0;
    enum auth_status st = AUTH_OK;
    while (off < size && st == AUTH_OK) {
        /* piece sizes from the seed: 1..256 bytes, sometimes everything */
        seed = seed * 1103515245u + 12345u;
        size_t piece = (seed >> 16) % 7 == 0 ? size - off : 1 + (seed >> 8) % 256;
        if (piece > size - off)
            piece = size - off;
        st = auth_body_feed(b, data + off, piece, sink, &total);
        off += piece;
    }
    struct auth_body_result res;
    enum auth_status fst = auth_body_finish(b, &res);
    if (fst == AUTH_OK && res.length != total)
        abort();   /* every decoded byte reached the sink, and only those */
    if (st != AUTH_OK && fst == AUTH_OK)
        abort();   /* a failed feed is sticky */
    auth_body_free(b);
    return 0;
}
