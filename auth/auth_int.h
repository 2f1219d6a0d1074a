/* auth/auth_int.h - internals of auth/ shared by its files and its unit tests:
 * the SigV4 canonical request and signing over an auth_req, the aws-chunked
 * decoder state machine and the payload checksum objects. The primitives
 * under them (the SigV4 steps of sigv4.h, CRCs, hex, base64, the capped
 * buffer) are common/'s.
 * Only the auth/ sources and the test_auth_ unit tests include this header. */
#ifndef SHARDGATE_AUTH_INT_H
#define SHARDGATE_AUTH_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "auth.h"
#include "buf.h"
#include "checksum.h"
#include "crc.h"
#include "encoding.h"
#include "sigv4.h"

#define AUTH_ALGO SG_SIGV4_ALGO
#define AUTH_EMPTY_SHA256 SG_SIGV4_EMPTY_SHA256
#define AUTH_SKEW_MAX_S (15 * 60)     /* S3's allowed clock difference */
#define AUTH_PRESIGN_MAX_S 604800     /* 7 days, S3's X-Amz-Expires limit */
#define AUTH_SCOPE_MAX 160            /* "YYYYMMDD/<region>/s3/aws4_request" */
#define AUTH_REGION_MAX 64
/* Longest raw query string verified. Real S3 requests stay far below this
 * (a presigned URL with a long session token is ~2 KiB); the cap bounds the
 * per-request parse work and allocation before the signature is known good. */
#define AUTH_QUERY_MAX 16384

/* aws-chunked caps: a chunk-size line (size + extensions) and the whole
 * trailer section are buffered, so they are bounded; chunk data streams
 * through and only gets a sanity cap. */
#define AUTH_CHUNK_LINE_MAX 4096
#define AUTH_CHUNK_DATA_MAX (64u << 20)
#define AUTH_TRAILER_MAX 16384

/* The credential store (opaque outside auth/). */
struct auth {
    const struct conf *c;
    time_t (*now)(void);
};

/* ---- SigV4 over an auth_req (sigv4.c; the steps are common/sigv4.c's) ---- */

/* The canonical request as S3 verifies it. `signed_headers` is the
 * ';'-separated list as sent; `presigned` leaves X-Amz-Signature out of the
 * canonical query. Returns AUTH_OK, AUTH_MALFORMED (too large) or AUTH_NOMEM;
 * out must be initialised by the caller and freed by it. */
enum auth_status auth_canonical_request(const struct auth_req *r, const char *signed_headers,
                                        const char *payload_hash, bool presigned,
                                        struct sg_buf *out);

/* Signs r the way a client does (used by tests and usable by anyone who
 * needs to produce a SigV4 signature): canonical request, string to sign,
 * signing key from secret/date/region/"s3", HMAC. amzdate is
 * "YYYYMMDDTHHMMSSZ". Writes 64 hex digits + NUL to sig_hex. */
enum auth_status auth_sign_request(const struct auth_req *r, bool presigned,
                                   const char *signed_headers, const char *payload_hash,
                                   const char *amzdate, const char *region,
                                   const char *secret, char sig_hex[65]);

/* ---- dates (date.c) ---- */

/* Each returns 0 and the UTC time, or -1. Pure functions; any thread.
 * auth_parse_amz_date: ISO 8601 basic, exactly "YYYYMMDDTHHMMSSZ" (what
 * SigV4 signs; the only form of a presigned URL's X-Amz-Date).
 * auth_parse_http_date: the HTTP forms of RFC 7231, any case:
 *   RFC 1123 "Fri, 24 May 2013 00:00:00 GMT", the zone also UTC, UT, Z or
 *            a numeric +HHMM/-HHMM ("-0000" from Python's email.utils,
 *            "+0000" from s3cmd), a one-digit day and no weekday accepted;
 *   RFC 850  "Friday, 24-May-13 00:00:00 GMT" (two-digit years 70-99 are
 *            19xx, 00-69 20xx);
 *   asctime  "Fri May 24 00:00:00 2013" (the day padded with a space).
 * auth_parse_date: either (what the Date and x-amz-date headers may hold). */
int auth_parse_amz_date(const char *s, time_t *out);
int auth_parse_http_date(const char *s, time_t *out);
int auth_parse_date(const char *s, time_t *out);

/* Signing state a verified request leaves for its body. */
struct auth_sigstate {
    uint8_t key[32];             /* the request's signing key */
    char seed[65];               /* the request signature: first "previous" */
    char amzdate[17];
    char scope[AUTH_SCOPE_MAX];
};

/* ---- the aws-chunked decoder ---- */

enum auth_chunk_mode {
    AUTH_CHUNK_SIGNED,             /* chunk-signature on every chunk */
    AUTH_CHUNK_SIGNED_TRAILER,     /* same, then trailers + x-amz-trailer-signature */
    AUTH_CHUNK_UNSIGNED_TRAILER,   /* bare sizes, then trailers */
};

enum auth_chunk_state {
    AUTH_CHS_SIZE,       /* reading "<hex>[;ext]\r\n" */
    AUTH_CHS_DATA,       /* passing chunk data */
    AUTH_CHS_DATA_CR,    /* expecting the CR (or LF) after the data */
    AUTH_CHS_DATA_LF,    /* expecting the LF after that CR */
    AUTH_CHS_TRAILER,    /* after the final chunk: trailer lines up to an empty one */
    AUTH_CHS_DONE,
    AUTH_CHS_ERROR,
};

#define AUTH_TRAILERS_MAX 8

/* Receives decoded bytes; non-zero stops with AUTH_ABORTED. */
typedef int (*auth_chunk_data_cb)(void *arg, const uint8_t *buf, size_t len);

struct auth_chunk_dec {
    enum auth_chunk_mode mode;
    enum auth_chunk_state st;
    enum auth_status err;          /* sticky once st == AUTH_CHS_ERROR */
    const struct auth_sigstate *sig; /* NULL for the unsigned mode */
    char prev_sig[65];
    char chunk_sig[65];            /* claimed signature of the current chunk */
    EVP_MD_CTX *chunk_md;          /* SHA-256 of the current chunk's data */
    uint64_t remaining;            /* data bytes left in the current chunk */
    uint64_t decoded;              /* payload bytes so far */
    uint64_t limit;                /* x-amz-decoded-content-length */
    char line[AUTH_CHUNK_LINE_MAX + 1];
    size_t line_len;
    /* trailer section, kept whole (bounded) for the trailer signature */
    char trailer[AUTH_TRAILER_MAX + 1];
    size_t trailer_len;            /* bytes of complete lines kept */
    size_t trailer_raw;            /* raw bytes of the section so far (capped) */
    size_t n_trailers;
    struct { size_t name_off, name_len, val_off, val_len; } trailers[AUTH_TRAILERS_MAX];
    bool trailer_sig_seen;
};

/* sig (borrowed, must outlive d) is required for the signed modes. limit is
 * the declared decoded length. Returns AUTH_OK or AUTH_NOMEM. */
enum auth_status auth_chunk_init(struct auth_chunk_dec *d, enum auth_chunk_mode mode,
                                 const struct auth_sigstate *sig, uint64_t limit);
/* Feeds raw bytes (any split). Returns AUTH_OK or the first error (sticky). */
enum auth_status auth_chunk_feed(struct auth_chunk_dec *d, const uint8_t *in, size_t len,
                                 auth_chunk_data_cb cb, void *arg);
/* After the last feed: AUTH_OK when the body ended cleanly (a missing last
 * empty line after the trailers is accepted), else AUTH_INCOMPLETE_BODY. */
enum auth_status auth_chunk_finish(struct auth_chunk_dec *d);
/* Looks up a received trailer by lower-case name; returns its value
 * (not NUL-terminated) or NULL. */
const char *auth_chunk_trailer(const struct auth_chunk_dec *d, const char *name,
                               size_t *len);
void auth_chunk_free(struct auth_chunk_dec *d);

/* ---- header lookup shared by verify and body ---- */

/* First header called `name` (lower case), or NULL; *count gets how many
 * there are when count is not NULL. */
const char *auth_req_header(const struct auth_req *r, const char *name, size_t *count);

/* ---- shared by the SigV4 and SigV2 verifiers (sigv4.c) ---- */

/* The store's clock: the test clock when set, else time(NULL). */
time_t auth_now(const struct auth *a);
/* The user with access key `ak`, or NULL. Borrowed from the store. */
const struct conf_user *auth_find_user(const struct auth *a, const char *ak);
/* Moves *s past leading and shortens *n by trailing spaces and tabs (a
 * header value's or a chunk extension's optional white space). */
void auth_trim_ows(const char **s, size_t *n);
/* Finds query parameter `name` (exact, after decoding; names under 64
 * bytes) in the raw query q and decodes its first value into a new string
 * (*val, the caller frees). Returns how many times it occurs (0: *val is
 * NULL), or -1 when out of memory. */
int auth_query_param(const char *q, const char *name, char **val);

/* The payload of a request without a SigV4 signing key (anonymous or
 * SigV2): unsigned unless x-amz-content-sha256 names a SHA-256 (then checked
 * by the body verifier) or STREAMING-UNSIGNED-PAYLOAD-TRAILER; the signed
 * streaming forms need a SigV4 key and give AUTH_BAD_CONTENT_SHA256. */
enum auth_status auth_ctx_unsigned(const struct auth_req *r, struct auth_ctx *ctx);

/* ---- Signature Version 2 (sigv2.c) ---- */

/* The two forms of SigV2: the Authorization header "AWS <access
 * key>:<signature>", or the query parameters AWSAccessKeyId, Signature and
 * Expires (a presigned URL). */
enum auth_v2_form {
    AUTH_V2_HEADER,
    AUTH_V2_QUERY,
};

/* Is authz (an Authorization header) the SigV2 form? */
bool auth_sigv2_header(const char *authz);
/* Does the raw query carry SigV2 parameters (AWSAccessKeyId or Signature)? */
bool auth_sigv2_query(const char *q);

/* Verifies a SigV2 request of the given form and fills
 * ctx (user, payload) on AUTH_OK. Refuses with AUTH_SIGV2_DISABLED when
 * the configuration turned SigV2 off. Thread-safe. */
enum auth_status auth_sigv2_verify(const struct auth *a, const struct auth_req *r,
                                   enum auth_v2_form form, struct auth_ctx *ctx);

/* What varies in a SigV2 string to sign besides the request. */
struct auth_v2_sts {
    bool presigned;          /* the query form: x-amz-* query parameters count as
                                headers, Content-MD5/-Type may be parameters */
    const char *date_line;   /* the Date header, "" when x-amz-date is sent, or a
                                presigned URL's Expires */
    bool omit_amz_date;      /* leave x-amz-date out of the x-amz-* headers */
    bool bucket_slash;       /* a path-style "/<bucket>" is signed "/<bucket>/" */
    const char *vhost_domain; /* Host "<bucket>.<vhost_domain>" names the bucket;
                                 NULL or "" = path-style only */
};

/* S3's SigV2 string to sign for r: method, Content-MD5, Content-Type, the
 * date line, the canonicalized x-amz-* headers and the canonicalized
 * resource (the raw path, "/<bucket>" first when virtual-hosted, then the
 * sub-resources S3 signs, decoded and sorted). Appends to out (initialised
 * by the caller). Returns AUTH_OK, AUTH_MALFORMED (over the cap) or
 * AUTH_NOMEM. */
enum auth_status auth_sigv2_string_to_sign(const struct auth_req *r,
                                           const struct auth_v2_sts *o, struct sg_buf *out);

/* base64(HMAC-SHA1(secret, sts)) into out[29] (28 characters + NUL).
 * Returns 0, or -1 when OpenSSL fails. */
int auth_sigv2_sign(const char *secret, const char *sts, size_t n, char out[29]);

/* What auth_verify leaves in a context. */
struct auth_ctx {
    const struct conf_user *user;
    enum auth_payload payload;
    char payload_hash[65];         /* lower case, AUTH_PAYLOAD_SHA256 only */
    bool signed_req;               /* false for anonymous */
    struct auth_sigstate sig;
};

#endif
