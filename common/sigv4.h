/* common/sigv4.h - AWS Signature Version 4, the steps both sides of a
 * signature share: auth/ recomputes a client's signature to verify it,
 * backend/ signs its own requests to a cold S3 tier. The canonical URI,
 * query and headers, the canonical request, the string to sign, the signing
 * key (an HMAC-SHA256 chain, OpenSSL) and the signature. Written once here;
 * pure functions, any thread. */
#ifndef SHARDGATE_COMMON_SIGV4_H
#define SHARDGATE_COMMON_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "buf.h"

#define SG_SIGV4_ALGO "AWS4-HMAC-SHA256"
/* SHA-256 of nothing: the payload hash of a request without a body. */
#define SG_SIGV4_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
/* The canonical request holds the path, query and signed headers, each at
 * most tripled by percent-encoding; the gateway caps headers at tens of KiB
 * and the cold tier's requests are ours, so 1 MiB is never reached by an
 * honest request. */
#define SG_SIGV4_CANON_MAX (1u << 20)

/* One request header as signed: both borrowed; a NULL value is "". */
struct sg_sigv4_hdr {
    const char *name;
    const char *value;
};

/* What a signature covers besides the payload hash. Everything borrowed. */
struct sg_sigv4_req {
    const char *method;          /* "GET", "PUT", ... */
    const char *path;            /* as sent: percent-encoded, no query; NULL or "" = "/" */
    const char *query;           /* as sent, after '?'; NULL or "" = none */
    const struct sg_sigv4_hdr *hdrs;
    size_t n_hdrs;
};

/* ---- hashes and keys ---- */

/* Lower-case hex SHA-256 of d[0..n) into out (64 digits + NUL). */
void sg_sigv4_sha256_hex(const void *d, size_t n, char out[65]);
/* HMAC-SHA256; returns 0, or -1 when OpenSSL fails. */
int sg_sigv4_hmac(const uint8_t *key, size_t klen, const void *d, size_t n, uint8_t out[32]);
/* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4"+secret, date8), region), service),
 * "aws4_request"). Intermediate keys are wiped. Returns 0 or -1. */
int sg_sigv4_signing_key(const char *secret, const char *date8, const char *region,
                         const char *service, uint8_t out[32]);
/* Formats t (UTC) as "YYYYMMDDTHHMMSSZ" into out[17]. */
void sg_sigv4_amz_date(time_t t, char out[17]);

/* ---- canonical forms ---- */

/* Appends s[0..n) percent-decoded once (only valid %XX escapes; anything
 * else is taken literally) then re-encoded with SigV4's strict rule: A-Z a-z
 * 0-9 - . _ ~ stay, '/' stays when keep_slash, every other byte becomes %XX.
 * (S3 signs the path encoded once, never normalised.) Errors stick in b. */
void sg_sigv4_uri_canon(struct sg_buf *b, const char *s, size_t n, bool keep_slash);

/* Appends the canonical query of the raw query q: each name and value
 * canonicalised as above, "name=value" pairs sorted by name then value and
 * joined by '&' (empty segments dropped). drop_signature leaves
 * X-Amz-Signature out (a presigned URL). Returns 0, SG_BUF_NOMEM, or
 * SG_BUF_OVER (past SG_SIGV4_CANON_MAX); appends nothing then. Errors of out
 * itself stick in out. */
int sg_sigv4_canonical_query(const char *q, bool drop_signature, struct sg_buf *out);

/* Appends the canonical headers: for each name of signed_headers (';'
 * separated, written as given: the caller passes them lower case) a line
 * "name:v1,v2\n", the values of every header of r with that name (any case),
 * in r's order, each trimmed with inner white-space runs folded to one
 * space; an empty or missing value gives "name:". Errors stick in out. */
void sg_sigv4_canonical_headers(const struct sg_sigv4_req *r, const char *signed_headers,
                                struct sg_buf *out);

/* Appends the canonical request: method, canonical URI, canonical query,
 * canonical headers, signed_headers and payload_hash, '\n'-separated.
 * Returns 0, SG_BUF_NOMEM or SG_BUF_OVER (out's cap). */
int sg_sigv4_canonical_request(const struct sg_sigv4_req *r, const char *signed_headers,
                               const char *payload_hash, bool drop_signature,
                               struct sg_buf *out);

/* Appends "AWS4-HMAC-SHA256\n<amzdate>\n<scope>\n<hex sha256 of creq>". */
void sg_sigv4_string_to_sign(const char *amzdate, const char *scope, const char *creq,
                             struct sg_buf *out);

/* The signature of r: canonical request -> string to sign -> HMAC with the
 * signing key `key` (sg_sigv4_signing_key of scope's date, region and
 * service). scope is "YYYYMMDD/<region>/<service>/aws4_request". Writes 64
 * hex digits + NUL to sig_hex. Returns 0, SG_BUF_NOMEM (also when OpenSSL
 * fails) or SG_BUF_OVER (the canonical request is too large). */
int sg_sigv4_sign(const struct sg_sigv4_req *r, bool drop_signature, const char *signed_headers,
                  const char *payload_hash, const char *amzdate, const char *scope,
                  const uint8_t key[32], char sig_hex[65]);

#endif
