/* auth/body.c - the body verifier: decodes aws-chunked bodies (chunked.c),
 * hashes the payload as it streams (SHA-256 when signed, MD5 always for the
 * ETag, the x-amz-checksum-* algorithm when asked) and checks everything
 * declared in the headers or trailers at auth_body_finish(). */
#include "auth_int.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "md5.h"
#include "md5sha.h"

enum ck_source { CK_SRC_NONE, CK_SRC_HEADER, CK_SRC_TRAILER, CK_SRC_SDK_ONLY };

struct auth_body {
    const struct auth_ctx *ctx;
    bool chunked;
    bool finished;
    enum auth_status err;          /* sticky after the first failure */
    uint64_t length;
    EVP_MD_CTX *sha256;            /* AUTH_PAYLOAD_SHA256 only; made at the first byte */
    struct sg_md5 md5;             /* the ETag; lanes shared with other bodies (common/md5.h) */
    bool one_pass;                 /* signed, SHA extensions: both in md5sha instead */
    struct sg_md5sha md5sha;       /* common/md5sha.h */
    bool md5_started;              /* from the first byte: a bodiless request has none */
    bool have_md5;
    uint8_t want_md5[16];
    struct sg_ck ck;
    enum ck_source ck_src;
    uint8_t want_ck[32];
    auth_body_out_cb out;          /* valid during one feed */
    void *out_arg;
    struct auth_chunk_dec *dec;    /* chunked only (20 KiB: not for every request) */
};

/* MD5 and SHA-256 of the empty payload, for bodies that never had a byte. */
static const uint8_t EMPTY_MD5[16] = {
    0xd4, 0x1d, 0x8c, 0xd9, 0x8f, 0x00, 0xb2, 0x04,
    0xe9, 0x80, 0x09, 0x98, 0xec, 0xf8, 0x42, 0x7e,
};
static const char EMPTY_SHA256_HEX[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/* The payload digests, made when the first payload byte arrives. A signed
 * payload on a CPU with the SHA extensions is hashed once for both: MD5
 * alone costs nearly as much (bench/results/md5sha.md). */
static int digests_start(struct auth_body *b)
{
    b->md5_started = true;
    if (b->ctx->payload == AUTH_PAYLOAD_SHA256 && sg_md5sha_available()) {
        b->one_pass = true;
        sg_md5sha_init(&b->md5sha);
        return 0;
    }
    sg_md5_init(&b->md5);
    if (b->ctx->payload == AUTH_PAYLOAD_SHA256) {
        b->sha256 = EVP_MD_CTX_new();
        if (!b->sha256 || EVP_DigestInit_ex(b->sha256, EVP_sha256(), NULL) != 1)
            return -1;
    }
    return 0;
}

/* Reads x-amz-checksum-<algo> (at most one), x-amz-trailer and
 * x-amz-sdk-checksum-algorithm, and picks what to compute and check. */
static enum auth_status pick_checksum(struct auth_body *b, const struct auth_req *r,
                                      enum sg_ck_algo *algo)
{
    enum sg_ck_algo hdr = SG_CK_NONE, trl = SG_CK_NONE, sdk = SG_CK_NONE;
    for (size_t i = 0; i < r->n_hdrs; i++) {
        const char *n = r->hdrs[i].name;
        const char *v = r->hdrs[i].value ? r->hdrs[i].value : "";
        if (strncasecmp(n, "x-amz-checksum-", 15) != 0)
            continue;
        /* x-amz-checksum-type / -algorithm describe multipart uploads;
         * x-amz-checksum-mode asks for checksums in a GET's response */
        if (strcasecmp(n + 15, "type") == 0 || strcasecmp(n + 15, "algorithm") == 0 ||
            strcasecmp(n + 15, "mode") == 0)
            continue;
        enum sg_ck_algo a = sg_ck_from_name(n);
        if (a == SG_CK_NONE || hdr != SG_CK_NONE)
            return AUTH_BAD_CHECKSUM_HEADER;     /* unknown, or more than one */
        size_t vl = strlen(v);
        if (vl > 64 ||
            sg_b64_decode(v, vl, b->want_ck, sizeof b->want_ck) != (long)sg_ck_len(a))
            return AUTH_BAD_CHECKSUM_HEADER;
        hdr = a;
    }
    size_t cnt = 0;
    const char *t = auth_req_header(r, "x-amz-trailer", &cnt);
    if (t) {
        while (*t == ' ' || *t == '\t')
            t++;
        char name[40];
        size_t tl = strlen(t);
        while (tl && (t[tl - 1] == ' ' || t[tl - 1] == '\t'))
            tl--;
        if (cnt > 1 || tl >= sizeof name)
            return AUTH_BAD_CHECKSUM_HEADER;
        memcpy(name, t, tl);
        name[tl] = '\0';
        if (strncasecmp(name, "x-amz-checksum-", 15) != 0 ||
            (trl = sg_ck_from_name(name)) == SG_CK_NONE)
            return AUTH_BAD_CHECKSUM_HEADER;
        enum auth_payload p = b->ctx->payload;
        if (p != AUTH_PAYLOAD_STREAMING_TRAILER && p != AUTH_PAYLOAD_STREAMING_UNSIGNED_TRAILER)
            return AUTH_BAD_CHECKSUM_HEADER;     /* a trailer that cannot arrive */
    }
    const char *s = auth_req_header(r, "x-amz-sdk-checksum-algorithm", NULL);
    if (s && (sdk = sg_ck_from_name(s)) == SG_CK_NONE)
        return AUTH_BAD_CHECKSUM_HEADER;
    if (hdr && trl)
        return AUTH_BAD_CHECKSUM_HEADER;
    *algo = hdr ? hdr : trl ? trl : sdk;
    if (sdk && sdk != *algo)
        return AUTH_BAD_CHECKSUM_HEADER;
    b->ck_src = hdr ? CK_SRC_HEADER : trl ? CK_SRC_TRAILER : sdk ? CK_SRC_SDK_ONLY : CK_SRC_NONE;
    return AUTH_OK;
}

static enum auth_status parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (!*s)
        return AUTH_BAD_CHUNK;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
            return AUTH_BAD_CHUNK;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return AUTH_OK;
}

enum auth_status auth_body_begin(const struct auth_ctx *ctx, const struct auth_req *r,
                                 struct auth_body **out)
{
    enum auth_status st = AUTH_OK;
    enum sg_ck_algo algo = SG_CK_NONE;
    uint64_t decoded_len = 0;
    struct auth_body *b = calloc(1, sizeof *b);
    *out = NULL;
    if (!b)
        return AUTH_NOMEM;
    b->ctx = ctx;
    b->chunked = ctx->payload == AUTH_PAYLOAD_STREAMING ||
                 ctx->payload == AUTH_PAYLOAD_STREAMING_TRAILER ||
                 ctx->payload == AUTH_PAYLOAD_STREAMING_UNSIGNED_TRAILER;
    if (b->chunked) {
        size_t cnt = 0;
        const char *dl = auth_req_header(r, "x-amz-decoded-content-length", &cnt);
        if (!dl || cnt != 1 || parse_u64(dl, &decoded_len) != AUTH_OK) {
            st = AUTH_BAD_CHUNK;
            goto out;
        }
    }
    size_t n_md5 = 0;
    const char *md5 = auth_req_header(r, "content-md5", &n_md5);
    if (md5) {
        size_t ml = strlen(md5);
        if (n_md5 > 1 || ml != 24 || sg_b64_decode(md5, ml, b->want_md5, 16) != 16) {
            st = AUTH_INVALID_DIGEST;
            goto out;
        }
        b->have_md5 = true;
    }
    st = pick_checksum(b, r, &algo);
    if (st != AUTH_OK)
        goto out;
    if (sg_ck_init(&b->ck, algo) != 0) {
        st = AUTH_NOMEM;
        goto out;
    }
    if (b->chunked) {
        enum auth_chunk_mode mode =
            ctx->payload == AUTH_PAYLOAD_STREAMING ? AUTH_CHUNK_SIGNED
            : ctx->payload == AUTH_PAYLOAD_STREAMING_TRAILER ? AUTH_CHUNK_SIGNED_TRAILER
                                                             : AUTH_CHUNK_UNSIGNED_TRAILER;
        if (mode != AUTH_CHUNK_UNSIGNED_TRAILER && !ctx->signed_req) {
            st = AUTH_BAD_CONTENT_SHA256;
            goto out;
        }
        b->dec = malloc(sizeof *b->dec);
        if (!b->dec) {
            st = AUTH_NOMEM;
            goto out;
        }
        st = auth_chunk_init(b->dec, mode, &ctx->sig, decoded_len);
        if (st != AUTH_OK) {
            free(b->dec);     /* auth_chunk_init frees what it made */
            b->dec = NULL;
        }
        if (st != AUTH_OK)
            goto out;
    }
out:
    if (st != AUTH_OK) {
        log_msg(LOG_LVL_DEBUG, "auth", "body headers rejected: %s", auth_status_name(st));
        auth_body_free(b);
        return st;
    }
    *out = b;
    return AUTH_OK;
}

/* Every decoded byte passes here, in order. */
static int on_payload(void *arg, const uint8_t *buf, size_t len)
{
    struct auth_body *b = arg;
    if (len == 0)
        return 0;
    if (!b->md5_started && digests_start(b) != 0)
        return -1;
    if (b->one_pass) {
        sg_md5sha_update(&b->md5sha, buf, len);
    } else {
        sg_md5_update(&b->md5, buf, len);
        if (b->sha256)
            EVP_DigestUpdate(b->sha256, buf, len);
    }
    sg_ck_update(&b->ck, buf, len);
    b->length += len;
    return b->out ? b->out(b->out_arg, buf, len) : 0;
}

enum auth_status auth_body_feed(struct auth_body *b, const uint8_t *in, size_t len,
                                auth_body_out_cb out, void *arg)
{
    enum auth_status st;
    if (b->err != AUTH_OK)
        return b->err;
    if (b->finished)
        return b->err = AUTH_BAD_CHUNK;
    b->out = out;
    b->out_arg = arg;
    if (b->chunked)
        st = auth_chunk_feed(b->dec, in, len, on_payload, b);
    else
        st = on_payload(b, in, len) ? AUTH_ABORTED : AUTH_OK;
    b->out = NULL;
    b->out_arg = NULL;
    if (st != AUTH_OK) {
        log_msg(LOG_LVL_DEBUG, "auth", "body rejected: %s", auth_status_name(st));
        b->err = st;
    }
    return st;
}

/* The checksum the client sent in a trailer, checked against x-amz-trailer:
 * an unannounced checksum trailer is refused rather than silently ignored. */
static enum auth_status trailer_checksum(struct auth_body *b)
{
    for (size_t i = 0; i < b->dec->n_trailers; i++) {
        const char *n = b->dec->trailer + b->dec->trailers[i].name_off;
        size_t nl = b->dec->trailers[i].name_len;
        if (nl < 15 || strncmp(n, "x-amz-checksum-", 15) != 0)
            continue;
        const char *want = sg_ck_header(b->ck.algo);
        if (b->ck_src != CK_SRC_TRAILER || strlen(want) != nl || memcmp(n, want, nl) != 0)
            return AUTH_BAD_CHECKSUM_HEADER;
    }
    if (b->ck_src != CK_SRC_TRAILER)
        return AUTH_OK;
    size_t vl = 0;
    const char *v = auth_chunk_trailer(b->dec, sg_ck_header(b->ck.algo), &vl);
    if (!v)
        return AUTH_BAD_CHUNK;                   /* announced, never sent */
    if (vl > 64 ||
        sg_b64_decode(v, vl, b->want_ck, sizeof b->want_ck) != (long)sg_ck_len(b->ck.algo))
        return AUTH_BAD_CHECKSUM_HEADER;
    return AUTH_OK;
}

static enum auth_status body_finish(struct auth_body *b, struct auth_body_result *res)
{
    enum auth_status st;
    uint8_t md[32];
    unsigned int mdlen = 0;

    if (b->chunked) {
        if ((st = auth_chunk_finish(b->dec)) != AUTH_OK)
            return st;
        if ((st = trailer_checksum(b)) != AUTH_OK)
            return st;
    }
    uint8_t md5[16], sha256[32];
    bool have_sha256 = false;            /* false: no byte came, or not signed */
    if (!b->md5_started) {
        memcpy(md5, EMPTY_MD5, sizeof EMPTY_MD5);
    } else if (b->one_pass) {
        sg_md5sha_final(&b->md5sha, md5, sha256);
        have_sha256 = true;
    } else {
        sg_md5_final(&b->md5, md5);
        if (b->sha256) {
            if (EVP_DigestFinal_ex(b->sha256, sha256, &mdlen) != 1)
                return AUTH_NOMEM;
            have_sha256 = true;
        }
    }
    if (b->ctx->payload == AUTH_PAYLOAD_SHA256) {
        char hex[65];
        if (have_sha256)
            sg_hex_encode(sha256, 32, hex);
        else
            memcpy(hex, EMPTY_SHA256_HEX, sizeof hex);
        if (CRYPTO_memcmp(hex, b->ctx->payload_hash, 64) != 0)
            return AUTH_SHA256_MISMATCH;
    }
    if (b->have_md5 && CRYPTO_memcmp(md5, b->want_md5, 16) != 0)
        return AUTH_BAD_DIGEST;
    memset(res, 0, sizeof *res);
    sg_hex_encode(md5, 16, res->md5_hex);
    res->length = b->length;
    if (b->ck.algo != SG_CK_NONE) {
        size_t n = sg_ck_final(&b->ck, md);
        if (n == 0)
            return AUTH_NOMEM;
        if (b->ck_src != CK_SRC_SDK_ONLY && CRYPTO_memcmp(md, b->want_ck, n) != 0)
            return AUTH_CHECKSUM_MISMATCH;
        snprintf(res->checksum_name, sizeof res->checksum_name, "%s",
                 sg_ck_header(b->ck.algo));
        sg_b64_encode(md, n, res->checksum_b64);
    }
    return AUTH_OK;
}

enum auth_status auth_body_finish(struct auth_body *b, struct auth_body_result *res)
{
    if (b->err != AUTH_OK)
        return b->err;
    if (b->finished)
        return b->err = AUTH_BAD_CHUNK;
    b->finished = true;
    enum auth_status st = body_finish(b, res);
    if (st != AUTH_OK) {
        log_msg(LOG_LVL_DEBUG, "auth", "body rejected at end: %s", auth_status_name(st));
        b->err = st;
    }
    return st;
}

void auth_body_free(struct auth_body *b)
{
    if (!b)
        return;
    EVP_MD_CTX_free(b->sha256);
    sg_ck_free(&b->ck);
    if (b->dec) {
        auth_chunk_free(b->dec);
        OPENSSL_cleanse(b->dec, sizeof *b->dec);   /* chunk signatures */
        free(b->dec);
    }
    free(b);
}
