/* auth/auth.h - request authentication for the S3 surface: AWS Signature
 * Version 4 and Version 2 in the Authorization header and in presigned URLs
 * (SigV2 unless the configuration turns it off), and the body
 * verifier that checks payload hashes, aws-chunked chunk signatures and
 * trailers, Content-MD5 and x-amz-checksum-* while it streams.
 * auth/ never sees libmicrohttpd: the gateway hands it a plain request view. */
#ifndef SHARDGATE_AUTH_H
#define SHARDGATE_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "conf.h"

struct auth;        /* opaque: credential store, region, clock */
struct auth_ctx;    /* opaque: one verified request (identity + signing state) */
struct auth_body;   /* opaque: one request body being verified and decoded */

enum auth_status {
    AUTH_OK = 0,
    AUTH_MALFORMED,            /* AuthorizationHeaderMalformed (400) */
    AUTH_QUERY_MALFORMED,      /* AuthorizationQueryParametersError (400) */
    AUTH_REGION_MISMATCH,      /* AuthorizationHeaderMalformed, wrong region (400) */
    AUTH_UNSUPPORTED,          /* InvalidRequest: not AWS4-HMAC-SHA256 (400) */
    AUTH_MISSING_DATE,         /* AccessDenied: no valid x-amz-date / Date (403) */
    AUTH_UNKNOWN_KEY,          /* InvalidAccessKeyId (403) */
    AUTH_SIGNATURE_MISMATCH,   /* SignatureDoesNotMatch (403) */
    AUTH_EXPIRED,              /* AccessDenied "Request has expired" (403) */
    AUTH_TIME_SKEWED,          /* RequestTimeTooSkewed (403) */
    AUTH_BAD_CONTENT_SHA256,   /* InvalidArgument: bad x-amz-content-sha256 (400) */
    AUTH_MISSING_CONTENT_SHA256, /* InvalidRequest: SigV4 header auth without it (400) */
    AUTH_SHA256_MISMATCH,      /* XAmzContentSHA256Mismatch (400) */
    AUTH_INVALID_DIGEST,       /* InvalidDigest: Content-MD5 not 16 bytes base64 (400) */
    AUTH_BAD_DIGEST,           /* BadDigest: Content-MD5 differs (400) */
    AUTH_BAD_CHECKSUM_HEADER,  /* InvalidRequest: malformed x-amz-checksum-* (400) */
    AUTH_CHECKSUM_MISMATCH,    /* BadDigest: x-amz-checksum-* differs (400) */
    AUTH_CHUNK_SIGNATURE_MISMATCH, /* SignatureDoesNotMatch on a chunk (403) */
    AUTH_BAD_CHUNK,            /* InvalidRequest: malformed aws-chunked body (400) */
    AUTH_INCOMPLETE_BODY,      /* IncompleteBody: fewer bytes than declared (400) */
    AUTH_TOO_LARGE,            /* InvalidRequest: chunk header/trailer over its cap (400) */
    AUTH_ABORTED,              /* the output callback asked to stop */
    AUTH_NOMEM,                /* InternalError (500) */
    /* added with per-bucket permissions; keep new values at the end */
    AUTH_UNSIGNED_HEADER,      /* AccessDenied "There were headers present in the
                                * request which were not signed" (403) */
    AUTH_QUERY_TOO_LONG,       /* InvalidRequest: query string over AUTH_QUERY_MAX (400) */
    /* added with Signature Version 2 */
    AUTH_SIGV2_DISABLED,       /* AccessDenied: SigV2 turned off ("sigv2": false) (403) */
    AUTH_QUERY_INCOMPLETE,     /* AccessDenied: a SigV2 URL without all of Signature,
                                * Expires and AWSAccessKeyId (403) */
};

const char *auth_status_name(enum auth_status st);

/* ---- the credential store ---- */

/* Builds the store from c->users and c->region; borrows `c`, which must
 * outlive the handle. Returns 0 and a new handle, or -1 (out of memory). */
int auth_open(const struct conf *c, struct auth **out);
void auth_close(struct auth *a);

/* Replaces the clock (tests). NULL restores time(NULL). */
void auth_set_clock(struct auth *a, time_t (*now)(void));

/* ---- verifying a request ---- */

/* One request header. `name` is lower case; `value` as received. */
struct auth_hdr {
    const char *name;
    const char *value;
};

/* What auth needs of a request. Everything is borrowed. */
struct auth_req {
    const char *method;        /* "GET", "PUT", ... */
    const char *raw_path;      /* as received: percent-encoded, no query */
    const char *raw_query;     /* after '?', as received; "" when none */
    const struct auth_hdr *hdrs;
    size_t n_hdrs;
};

/* The bucket a virtual-hosted-style Host header names: host is
 * "<bucket>.<domain>" with an optional ":port", the domain compared without
 * case. Returns the bucket's length (it starts at host[0]), 0 when the
 * request is path-style (domain NULL or "", host NULL, or host not below
 * it). The one reading of Host for the gateway's routing and SigV2's
 * CanonicalizedResource, so the two cannot disagree. Pure, any thread. */
size_t auth_vhost_bucket(const char *host, const char *domain);

/* How the body is protected, from x-amz-content-sha256 (or the presigned
 * URL, which is always UNSIGNED-PAYLOAD unless the header says otherwise). */
enum auth_payload {
    AUTH_PAYLOAD_SHA256,                 /* hex hash of the whole body */
    AUTH_PAYLOAD_UNSIGNED,               /* UNSIGNED-PAYLOAD */
    AUTH_PAYLOAD_STREAMING,              /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD */
    AUTH_PAYLOAD_STREAMING_TRAILER,      /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER */
    AUTH_PAYLOAD_STREAMING_UNSIGNED_TRAILER, /* STREAMING-UNSIGNED-PAYLOAD-TRAILER */
};

/* Verifies the signature of the request line and headers (header or
 * query-string SigV4, or SigV2: "Authorization: AWS AK:sig" or
 * ?AWSAccessKeyId=&Signature=&Expires=). On AUTH_OK *out is a new context,
 * also for an anonymous request (no Authorization header, no X-Amz-Signature,
 * no Signature/AWSAccessKeyId): then auth_ctx_user() is NULL and the caller
 * decides. A SigV2 context has the same user as SigV4 (auth_allowed works
 * alike) and an unsigned payload (Content-MD5 and checksums still checked).
 * Thread-safe. */
enum auth_status auth_verify(struct auth *a, const struct auth_req *r, struct auth_ctx **out);

/* The verified user, or NULL for anonymous. Borrowed from the store. */
const struct conf_user *auth_ctx_user(const struct auth_ctx *ctx);
enum auth_payload auth_ctx_payload(const struct auth_ctx *ctx);
void auth_ctx_free(struct auth_ctx *ctx);

/* ---- permissions ---- */

/* What a request needs; each level implies the ones below it (they match
 * conf's "read" < "write" < "admin"). */
enum auth_perm {
    AUTH_PERM_READ,
    AUTH_PERM_WRITE,
    AUTH_PERM_ADMIN,
};

/* The one place a permission is decided. `ctx` is the verified request
 * (NULL counts as anonymous); `bucket` is the bucket the operation acts on,
 * or NULL for a service-level request.
 *  - anonymous: only AUTH_PERM_READ, only on a bucket configured public_read;
 *    never at service level;
 *  - a user on a bucket: the level of the user's exact entry for that bucket,
 *    else of its "*" entry, else none; allowed when that level >= need;
 *  - a user at service level: READ (e.g. ListBuckets, then filter each bucket
 *    with READ) for any authenticated user; WRITE/ADMIN need that level on "*"
 *    (admin endpoints such as prefetch and operations call
 *    auth_allowed(a, ctx, NULL, AUTH_PERM_ADMIN)).
 * Logs a denial at debug level (user name, bucket, need). Thread-safe. */
bool auth_allowed(const struct auth *a, const struct auth_ctx *ctx, const char *bucket,
                  enum auth_perm need);

/* ---- multipart checksums ---- */

/* The checksum S3 reports for a completed multipart upload of type
 * COMPOSITE: base64(checksum(digest_1 || ... || digest_n)) + "-<n>", where
 * digest_i is part i's raw digest (the base64 value its UploadPart returned,
 * given here in part order as `part_b64`). `algo` is "crc32", "crc32c",
 * "sha1" or "sha256" (any case, also "x-amz-checksum-crc32"); CRC64NVME has
 * no composite form in S3. Writes a NUL-terminated string to out.
 * Returns 0, or -1 for an unknown algorithm, a part value that is not the
 * algorithm's digest in base64, n == 0 or n > 10000, or outlen too small
 * (64 bytes always suffice). Pure function; any thread. */
int auth_checksum_composite(const char *algo, const char *const *part_b64, size_t n,
                            char *out, size_t outlen);

/* The checksum of a multipart upload of type FULL_OBJECT for the CRC
 * algorithms ("crc32", "crc32c", "crc64nvme"): the CRC of the whole object,
 * combined from each part's CRC (part_b64) and length (part_len) without
 * reading the data. Same result as hashing the concatenated parts. Writes
 * the base64 value (no "-n" suffix) to out. Returns 0 or -1 as above
 * (SHA algorithms have no full-object form). */
int auth_checksum_full_object(const char *algo, const char *const *part_b64,
                              const uint64_t *part_len, size_t n, char *out, size_t outlen);

/* ---- verifying a body while it streams ---- */

/* Starts verifying the body of the request verified in `ctx`. Reads from
 * r's headers: Content-Encoding (aws-chunked), x-amz-decoded-content-length,
 * Content-MD5, x-amz-checksum-<algo>, x-amz-trailer, x-amz-sdk-checksum-algorithm.
 * Fails early (AUTH_INVALID_DIGEST, AUTH_BAD_CHECKSUM_HEADER, AUTH_BAD_CHUNK)
 * when those headers are malformed. `ctx` must outlive the verifier. */
enum auth_status auth_body_begin(const struct auth_ctx *ctx, const struct auth_req *r,
                                 struct auth_body **out);

/* Receives decoded payload bytes; return 0 to go on, non-zero to stop. */
typedef int (*auth_body_out_cb)(void *arg, const uint8_t *buf, size_t len);

/* Feeds raw body bytes as they arrive (any split). Decoded payload bytes are
 * passed to `out` in order as they are decoded, before the checks that need
 * the whole body (or the whole chunk) have run: the caller must keep them
 * invisible (e.g. in a temporary file) until auth_body_finish() says AUTH_OK.
 * Memory is bounded: chunk headers and trailers have caps, payload is
 * streamed and never buffered. A chunk signature that fails is reported by
 * the feed that completes that chunk. */
enum auth_status auth_body_feed(struct auth_body *b, const uint8_t *in, size_t len,
                                auth_body_out_cb out, void *arg);

struct auth_body_result {
    uint64_t length;            /* decoded payload bytes */
    char md5_hex[33];           /* MD5 of the payload: the ETag of a single PUT */
    char checksum_name[32];     /* e.g. "x-amz-checksum-crc32", or "" */
    char checksum_b64[96];      /* its value (base64) as S3 returns it */
};

/* Ends the body: checks the declared lengths, the final chunk and trailers,
 * the payload SHA-256, Content-MD5 and the checksum. AUTH_OK means every
 * declared check passed and *res is filled. Call once, after the last feed. */
enum auth_status auth_body_finish(struct auth_body *b, struct auth_body_result *res);
void auth_body_free(struct auth_body *b);

#endif
