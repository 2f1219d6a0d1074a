/* auth/sigv4.c - AWS Signature Version 4 as S3 verifies it: the credential
 * store, Authorization-header and presigned-URL parsing, the recomputed
 * signature (by common/sigv4.c's canonical request and signing steps, the
 * ones the cold tier signs with) and the compare. auth_verify() hands
 * Signature Version 2 requests to sigv2.c. Nothing secret is kept in static
 * storage; every call works on its own buffers. */
#include "auth_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

/* Decoded lengths accepted for the X-Amz-* query parameters. */
#define QPARAM_MAX 4096

const char *auth_status_name(enum auth_status st)
{
    switch (st) {
    case AUTH_OK: return "OK";
    case AUTH_MALFORMED: return "MALFORMED";
    case AUTH_QUERY_MALFORMED: return "QUERY_MALFORMED";
    case AUTH_REGION_MISMATCH: return "REGION_MISMATCH";
    case AUTH_UNSUPPORTED: return "UNSUPPORTED";
    case AUTH_MISSING_DATE: return "MISSING_DATE";
    case AUTH_UNKNOWN_KEY: return "UNKNOWN_KEY";
    case AUTH_SIGNATURE_MISMATCH: return "SIGNATURE_MISMATCH";
    case AUTH_EXPIRED: return "EXPIRED";
    case AUTH_TIME_SKEWED: return "TIME_SKEWED";
    case AUTH_BAD_CONTENT_SHA256: return "BAD_CONTENT_SHA256";
    case AUTH_MISSING_CONTENT_SHA256: return "MISSING_CONTENT_SHA256";
    case AUTH_SHA256_MISMATCH: return "SHA256_MISMATCH";
    case AUTH_INVALID_DIGEST: return "INVALID_DIGEST";
    case AUTH_BAD_DIGEST: return "BAD_DIGEST";
    case AUTH_BAD_CHECKSUM_HEADER: return "BAD_CHECKSUM_HEADER";
    case AUTH_CHECKSUM_MISMATCH: return "CHECKSUM_MISMATCH";
    case AUTH_CHUNK_SIGNATURE_MISMATCH: return "CHUNK_SIGNATURE_MISMATCH";
    case AUTH_BAD_CHUNK: return "BAD_CHUNK";
    case AUTH_INCOMPLETE_BODY: return "INCOMPLETE_BODY";
    case AUTH_TOO_LARGE: return "TOO_LARGE";
    case AUTH_ABORTED: return "ABORTED";
    case AUTH_NOMEM: return "NOMEM";
    case AUTH_UNSIGNED_HEADER: return "UNSIGNED_HEADER";
    case AUTH_QUERY_TOO_LONG: return "QUERY_TOO_LONG";
    case AUTH_SIGV2_DISABLED: return "SIGV2_DISABLED";
    case AUTH_QUERY_INCOMPLETE: return "QUERY_INCOMPLETE";
    }
    return "UNKNOWN";
}

/* ---- the store ---- */

int auth_open(const struct conf *c, struct auth **out)
{
    struct auth *a = calloc(1, sizeof *a);
    if (!a)
        return -1;
    a->c = c;
    *out = a;
    return 0;
}

void auth_close(struct auth *a)
{
    free(a);
}

void auth_set_clock(struct auth *a, time_t (*now)(void))
{
    a->now = now;
}

time_t auth_now(const struct auth *a)
{
    return a->now ? a->now() : time(NULL);
}

const struct conf_user *auth_find_user(const struct auth *a, const char *ak)
{
    for (size_t i = 0; i < a->c->n_users; i++)
        if (a->c->users[i].access_key && strcmp(a->c->users[i].access_key, ak) == 0)
            return &a->c->users[i];
    return NULL;
}

/* ---- headers ---- */

const char *auth_req_header(const struct auth_req *r, const char *name, size_t *count)
{
    const char *first = NULL;
    size_t n = 0;
    for (size_t i = 0; i < r->n_hdrs; i++) {
        if (strcasecmp(r->hdrs[i].name, name) == 0) {
            if (!first)
                first = r->hdrs[i].value ? r->hdrs[i].value : "";
            n++;
        }
    }
    if (count)
        *count = n;
    return first;
}

void auth_trim_ows(const char **s, size_t *n)
{
    while (*n && (**s == ' ' || **s == '\t')) {
        (*s)++;
        (*n)--;
    }
    while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
        (*n)--;
}

static bool name_is(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* ---- the canonical request and the signature (common/sigv4.c) ---- */

/* The common signer's status as auth's. */
static enum auth_status sigv4_status(int rc)
{
    return rc == 0 ? AUTH_OK : rc == SG_BUF_NOMEM ? AUTH_NOMEM : AUTH_MALFORMED;
}

/* r as the common signer takes it: v borrows r's strings, *hdrs (new, the
 * caller frees) holds the header pairs. false when out of memory. */
static bool sigv4_view(const struct auth_req *r, struct sg_sigv4_req *v,
                       struct sg_sigv4_hdr **hdrs)
{
    *hdrs = calloc(r->n_hdrs ? r->n_hdrs : 1, sizeof **hdrs);
    if (!*hdrs)
        return false;
    for (size_t i = 0; i < r->n_hdrs; i++)
        (*hdrs)[i] = (struct sg_sigv4_hdr){ r->hdrs[i].name, r->hdrs[i].value };
    *v = (struct sg_sigv4_req){ r->method, r->raw_path, r->raw_query, *hdrs, r->n_hdrs };
    return true;
}

enum auth_status auth_canonical_request(const struct auth_req *r, const char *signed_headers,
                                        const char *payload_hash, bool presigned,
                                        struct sg_buf *out)
{
    struct sg_sigv4_req v;
    struct sg_sigv4_hdr *h;
    if (!sigv4_view(r, &v, &h))
        return AUTH_NOMEM;
    int rc = sg_sigv4_canonical_request(&v, signed_headers, payload_hash, presigned, out);
    free(h);
    return sigv4_status(rc);
}

/* Signs with a derived key: canonical request -> string to sign -> HMAC. */
static enum auth_status sign_with_key(const struct auth_req *r, bool presigned,
                                      const char *signed_headers, const char *payload_hash,
                                      const char *amzdate, const char *scope,
                                      const uint8_t key[32], char sig_hex[65])
{
    struct sg_sigv4_req v;
    struct sg_sigv4_hdr *h;
    if (!sigv4_view(r, &v, &h))
        return AUTH_NOMEM;
    int rc = sg_sigv4_sign(&v, presigned, signed_headers, payload_hash, amzdate, scope, key,
                           sig_hex);
    free(h);
    return sigv4_status(rc);
}

enum auth_status auth_sign_request(const struct auth_req *r, bool presigned,
                                   const char *signed_headers, const char *payload_hash,
                                   const char *amzdate, const char *region,
                                   const char *secret, char sig_hex[65])
{
    char date8[9], scope[AUTH_SCOPE_MAX];
    uint8_t key[32];
    if (strlen(amzdate) != 16 || strlen(region) > AUTH_REGION_MAX)
        return AUTH_MALFORMED;
    memcpy(date8, amzdate, 8);
    date8[8] = '\0';
    snprintf(scope, sizeof scope, "%s/%s/s3/aws4_request", date8, region);
    if (sg_sigv4_signing_key(secret, date8, region, "s3", key) != 0)
        return AUTH_NOMEM;
    enum auth_status st =
        sign_with_key(r, presigned, signed_headers, payload_hash, amzdate, scope, key, sig_hex);
    OPENSSL_cleanse(key, sizeof key);
    return st;
}

/* ---- verification ---- */

/* What the two forms have in common once parsed. */
struct sigv4_parts {
    bool presigned;
    char *credential;          /* "AK/date/region/service/aws4_request" */
    char *signed_headers;
    char *signature;
    char amzdate[17];
    time_t date;
    long expires;              /* presigned only */
    const char *payload_hash;
};

static enum auth_status payload_kind(const char *h, enum auth_payload *kind)
{
    static const struct { const char *v; enum auth_payload k; } forms[] = {
        { "UNSIGNED-PAYLOAD", AUTH_PAYLOAD_UNSIGNED },
        { "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", AUTH_PAYLOAD_STREAMING },
        { "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER", AUTH_PAYLOAD_STREAMING_TRAILER },
        { "STREAMING-UNSIGNED-PAYLOAD-TRAILER", AUTH_PAYLOAD_STREAMING_UNSIGNED_TRAILER },
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        if (strcmp(h, forms[i].v) == 0) {
            *kind = forms[i].k;
            return AUTH_OK;
        }
    }
    if (strlen(h) != 64)
        return AUTH_BAD_CONTENT_SHA256;
    for (size_t i = 0; i < 64; i++)
        if (sg_hexval((unsigned char)h[i]) < 0)
            return AUTH_BAD_CONTENT_SHA256;
    *kind = AUTH_PAYLOAD_SHA256;
    return AUTH_OK;
}

/* Finds query parameter `name` (exact, after decoding) and decodes its
 * value into a new string. Returns how many times it occurs; *val is the
 * first value (NULL if absent, or on allocation failure with -1 returned). */
int auth_query_param(const char *q, const char *name, char **val)
{
    int n = 0;
    *val = NULL;
    const char *p = q;
    while (p && *p) {
        const char *end = strchr(p, '&');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        size_t nlen = eq ? (size_t)(eq - p) : len;
        char nb[64];
        if (nlen < sizeof nb) {
            size_t dn = sg_pct_decode(p, nlen, nb, false);
            if (name_is(nb, dn, name)) {
                if (n++ == 0) {
                    size_t vlen = eq ? len - nlen - 1 : 0;
                    *val = malloc(vlen + 1);
                    if (!*val)
                        return -1;
                    (*val)[sg_pct_decode(eq ? eq + 1 : "", vlen, *val, false)] = '\0';
                }
            }
        }
        p = end ? end + 1 : NULL;
    }
    return n;
}

static void parts_free(struct sigv4_parts *pt)
{
    free(pt->credential);
    free(pt->signed_headers);
    free(pt->signature);
}

static char *dup_range(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Authorization: AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=... */
static enum auth_status parse_auth_header(const char *v, struct sigv4_parts *pt)
{
    while (*v == ' ')
        v++;
    size_t alen = strcspn(v, " ");
    if (alen != strlen(AUTH_ALGO) || memcmp(v, AUTH_ALGO, alen) != 0)
        return AUTH_UNSUPPORTED;
    const char *p = v + alen;
    while (*p) {
        while (*p == ' ' || *p == '\t')
            p++;
        size_t len = strcspn(p, ",");
        size_t tl = len;
        while (tl > 0 && (p[tl - 1] == ' ' || p[tl - 1] == '\t'))
            tl--;
        char **slot = NULL;
        size_t klen = 0;
        if (tl > 11 && memcmp(p, "Credential=", 11) == 0) {
            slot = &pt->credential;
            klen = 11;
        } else if (tl > 14 && memcmp(p, "SignedHeaders=", 14) == 0) {
            slot = &pt->signed_headers;
            klen = 14;
        } else if (tl > 10 && memcmp(p, "Signature=", 10) == 0) {
            slot = &pt->signature;
            klen = 10;
        } else if (tl > 0) {
            return AUTH_MALFORMED;
        }
        if (slot) {
            if (*slot)
                return AUTH_MALFORMED;           /* duplicate component */
            *slot = dup_range(p + klen, tl - klen);
            if (!*slot)
                return AUTH_NOMEM;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    if (!pt->credential || !pt->signed_headers || !pt->signature)
        return AUTH_MALFORMED;
    return AUTH_OK;
}

/* x-amz-date, else Date, in any form SDKs send (date.c); the string to
 * sign uses the instant in ISO 8601 basic whatever form carried it. */
static enum auth_status header_date(const struct auth_req *r, struct sigv4_parts *pt)
{
    const char *xd = auth_req_header(r, "x-amz-date", NULL);
    const char *d = xd ? xd : auth_req_header(r, "date", NULL);
    if (!d || auth_parse_date(d, &pt->date) != 0)
        return AUTH_MISSING_DATE;
    sg_sigv4_amz_date(pt->date, pt->amzdate);
    return AUTH_OK;
}

static enum auth_status parse_query_auth(const struct auth_req *r, struct sigv4_parts *pt)
{
    const char *q = r->raw_query ? r->raw_query : "";
    char *algo = NULL, *date = NULL, *expires = NULL;
    enum auth_status st = AUTH_QUERY_MALFORMED;
    int n1 = auth_query_param(q, "X-Amz-Algorithm", &algo);
    int n2 = auth_query_param(q, "X-Amz-Credential", &pt->credential);
    int n3 = auth_query_param(q, "X-Amz-Date", &date);
    int n4 = auth_query_param(q, "X-Amz-Expires", &expires);
    int n5 = auth_query_param(q, "X-Amz-SignedHeaders", &pt->signed_headers);
    int n6 = auth_query_param(q, "X-Amz-Signature", &pt->signature);
    if (n1 < 0 || n2 < 0 || n3 < 0 || n4 < 0 || n5 < 0 || n6 < 0) {
        st = AUTH_NOMEM;
        goto out;
    }
    if (n1 != 1 || n2 != 1 || n3 != 1 || n4 != 1 || n5 != 1 || n6 != 1)
        goto out;                                /* missing or repeated */
    if (strcmp(algo, AUTH_ALGO) != 0) {
        st = AUTH_UNSUPPORTED;
        goto out;
    }
    if (strlen(pt->credential) > QPARAM_MAX || strlen(pt->signed_headers) > QPARAM_MAX)
        goto out;
    if (auth_parse_amz_date(date, &pt->date) != 0)
        goto out;
    memcpy(pt->amzdate, date, 17);
    /* S3: a lifetime of zero or less is a URL that has expired (403
     * AccessDenied), over 7 days or not a number is malformed (400) */
    const char *ed = expires[0] == '-' ? expires + 1 : expires;
    size_t el = strlen(ed);
    if (el == 0 || strspn(ed, "0123456789") != el)
        goto out;
    if (ed != expires || strspn(ed, "0") == el) {
        st = AUTH_EXPIRED;
        goto out;
    }
    if (el > 6 || (pt->expires = strtol(ed, NULL, 10)) > AUTH_PRESIGN_MAX_S)
        goto out;
    st = AUTH_OK;
out:
    free(algo);
    free(date);
    free(expires);
    return st;
}

/* Splits "AK/YYYYMMDD/region/service/aws4_request" from the right (the
 * access key is whatever is left). */
static enum auth_status check_scope(const struct auth *a, struct sigv4_parts *pt,
                                    enum auth_status bad, const char **ak, char *scope)
{
    char *parts[4];
    char *c = pt->credential;
    for (int i = 3; i >= 0; i--) {
        char *slash = strrchr(c, '/');
        if (!slash)
            return bad;
        *slash = '\0';
        parts[i] = slash + 1;
    }
    *ak = c;
    if (!**ak || strlen(parts[0]) != 8 || strspn(parts[0], "0123456789") != 8)
        return bad;
    if (memcmp(parts[0], pt->amzdate, 8) != 0)
        return bad;                              /* scope date != request date */
    if (strcmp(parts[2], "s3") != 0 || strcmp(parts[3], "aws4_request") != 0)
        return bad;
    if (strcmp(parts[1], a->c->region) != 0) {
        log_msg(LOG_LVL_DEBUG, "auth", "credential scope region differs from %s",
                a->c->region);
        return AUTH_REGION_MISMATCH;
    }
    if (strlen(parts[1]) > AUTH_REGION_MAX)
        return bad;
    snprintf(scope, AUTH_SCOPE_MAX, "%s/%s/s3/aws4_request", parts[0], parts[1]);
    return AUTH_OK;
}

static bool signed_headers_ok(const char *sh)
{
    bool host = false;
    const char *s = sh;
    if (!*sh)
        return false;
    for (;;) {
        size_t len = strcspn(s, ";");
        if (len == 0)
            return false;
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)s[i] <= ' ' || s[i] == ':')
                return false;
        if (len == 4 && strncasecmp(s, "host", 4) == 0)
            host = true;
        if (!s[len])
            break;
        s += len + 1;
    }
    return host;
}

/* True when `name` (length n) is one of the ';'-separated SignedHeaders. */
static bool header_is_signed(const char *sh, const char *name, size_t n)
{
    const char *s = sh;
    for (;;) {
        size_t len = strcspn(s, ";");
        if (len == n && strncasecmp(s, name, n) == 0)
            return true;
        if (!s[len])
            return false;
        s += len + 1;
    }
}

/* S3 refuses a request carrying an x-amz-* header that the signature does
 * not cover (e.g. x-amz-acl or x-amz-copy-source added after signing): the
 * signature would otherwise vouch for a request it never saw. Checked for
 * header and presigned authentication alike; botocore, aws-cli and curl
 * --aws-sigv4 sign every x-amz-* header they send. */
static bool amz_headers_signed(const struct auth_req *r, const char *sh)
{
    for (size_t i = 0; i < r->n_hdrs; i++) {
        const char *n = r->hdrs[i].name;
        if (strncasecmp(n, "x-amz-", 6) != 0)
            continue;
        if (!header_is_signed(sh, n, strlen(n))) {
            log_msg(LOG_LVL_DEBUG, "auth", "header %.64s is not signed", n);
            return false;
        }
    }
    return true;
}

enum auth_status auth_ctx_unsigned(const struct auth_req *r, struct auth_ctx *ctx)
{
    const char *h = auth_req_header(r, "x-amz-content-sha256", NULL);
    ctx->payload = AUTH_PAYLOAD_UNSIGNED;
    if (!h)
        return AUTH_OK;
    enum auth_status st = payload_kind(h, &ctx->payload);
    if (st != AUTH_OK)
        return st;
    /* without a signature there is no key to check chunk signatures with */
    if (ctx->payload == AUTH_PAYLOAD_STREAMING || ctx->payload == AUTH_PAYLOAD_STREAMING_TRAILER)
        return AUTH_BAD_CONTENT_SHA256;
    if (ctx->payload == AUTH_PAYLOAD_SHA256)
        for (int i = 0; i < 64; i++)
            ctx->payload_hash[i] = (char)tolower((unsigned char)h[i]);
    return AUTH_OK;
}

enum auth_status auth_verify(struct auth *a, const struct auth_req *r, struct auth_ctx **out)
{
    struct sigv4_parts pt;
    struct auth_ctx *ctx = calloc(1, sizeof *ctx);
    const char *q = r->raw_query ? r->raw_query : "";
    const char *ak = NULL;
    size_t n_authz = 0;
    char *qsig = NULL, *qcred = NULL;
    enum auth_status st;

    memset(&pt, 0, sizeof pt);
    *out = NULL;
    if (!ctx)
        return AUTH_NOMEM;
    if (strlen(q) > AUTH_QUERY_MAX) {
        st = AUTH_QUERY_TOO_LONG;
        goto out;
    }
    const char *authz = auth_req_header(r, "authorization", &n_authz);
    int ns = auth_query_param(q, "X-Amz-Signature", &qsig);
    int nc = auth_query_param(q, "X-Amz-Credential", &qcred);
    free(qsig);
    free(qcred);
    if (ns < 0 || nc < 0) {
        st = AUTH_NOMEM;
        goto out;
    }
    bool query_auth = ns > 0 || nc > 0;
    bool v2_query = auth_sigv2_query(q);
    if (!authz && !query_auth && !v2_query) {
        st = auth_ctx_unsigned(r, ctx);
        goto out;
    }
    if (authz && (query_auth || v2_query)) {
        log_msg(LOG_LVL_DEBUG, "auth", "both header and query authentication");
        st = AUTH_MALFORMED;
        goto out;
    }
    if (n_authz > 1) {
        st = AUTH_MALFORMED;
        goto out;
    }
    if (query_auth && v2_query) {
        log_msg(LOG_LVL_DEBUG, "auth", "both SigV4 and SigV2 query parameters");
        st = AUTH_QUERY_MALFORMED;
        goto out;
    }
    if (v2_query || (authz && auth_sigv2_header(authz))) {
        st = auth_sigv2_verify(a, r, v2_query ? AUTH_V2_QUERY : AUTH_V2_HEADER, ctx);
        goto out;
    }

    enum auth_status bad = authz ? AUTH_MALFORMED : AUTH_QUERY_MALFORMED;
    if (authz) {
        st = parse_auth_header(authz, &pt);
        if (st == AUTH_OK)
            st = header_date(r, &pt);
        if (st != AUTH_OK)
            goto out;
        size_t n_ph = 0;
        pt.payload_hash = auth_req_header(r, "x-amz-content-sha256", &n_ph);
        if (!pt.payload_hash || n_ph > 1) {      /* S3 requires exactly one with SigV4 */
            st = pt.payload_hash ? AUTH_BAD_CONTENT_SHA256 : AUTH_MISSING_CONTENT_SHA256;
            goto out;
        }
    } else {
        pt.presigned = true;
        st = parse_query_auth(r, &pt);
        if (st != AUTH_OK)
            goto out;
        pt.payload_hash = auth_req_header(r, "x-amz-content-sha256", NULL);
        if (!pt.payload_hash) {
            char *qh = NULL;
            int nh = auth_query_param(q, "X-Amz-Content-Sha256", &qh);
            if (nh < 0) {
                st = AUTH_NOMEM;
                goto out;
            }
            /* kept for the lifetime of pt: freed through signature slot below */
            if (nh > 0) {
                snprintf(ctx->payload_hash, sizeof ctx->payload_hash, "%s",
                         strlen(qh) <= 64 ? qh : "");
                pt.payload_hash = strlen(qh) <= 64 ? ctx->payload_hash : "";
            } else {
                pt.payload_hash = "UNSIGNED-PAYLOAD";
            }
            free(qh);
        }
    }

    st = check_scope(a, &pt, bad, &ak, ctx->sig.scope);
    if (st != AUTH_OK)
        goto out;
    if (!signed_headers_ok(pt.signed_headers)) {
        st = bad;
        goto out;
    }
    ctx->user = auth_find_user(a, ak);
    if (!ctx->user) {
        log_msg(LOG_LVL_DEBUG, "auth", "unknown access key");
        st = AUTH_UNKNOWN_KEY;
        goto out;
    }
    st = payload_kind(pt.payload_hash, &ctx->payload);
    if (st != AUTH_OK)
        goto out;

    time_t now = auth_now(a);
    if (pt.presigned) {
        if (pt.date - now > AUTH_SKEW_MAX_S) {
            st = AUTH_TIME_SKEWED;
            goto out;
        }
        if (now > pt.date + pt.expires) {
            st = AUTH_EXPIRED;
            goto out;
        }
    } else if (pt.date - now > AUTH_SKEW_MAX_S || now - pt.date > AUTH_SKEW_MAX_S) {
        st = AUTH_TIME_SKEWED;
        goto out;
    }

    /* the signing key comes from the scope's date and region, which are
     * checked above to be the request's */
    char date8[9];
    memcpy(date8, pt.amzdate, 8);
    date8[8] = '\0';
    if (sg_sigv4_signing_key(ctx->user->secret_key, date8, a->c->region, "s3", ctx->sig.key) !=
        0) {
        st = AUTH_NOMEM;
        goto out;
    }
    memcpy(ctx->sig.amzdate, pt.amzdate, 17);
    char mine[65];
    st = sign_with_key(r, pt.presigned, pt.signed_headers, pt.payload_hash, pt.amzdate,
                       ctx->sig.scope, ctx->sig.key, mine);
    if (st != AUTH_OK)
        goto out;
    if (strlen(pt.signature) != 64 || CRYPTO_memcmp(mine, pt.signature, 64) != 0) {
        log_msg(LOG_LVL_DEBUG, "auth", "signature mismatch for user %s",
                ctx->user->name ? ctx->user->name : "?");
        OPENSSL_cleanse(mine, sizeof mine);
        st = AUTH_SIGNATURE_MISMATCH;
        goto out;
    }
    OPENSSL_cleanse(mine, sizeof mine);
    if (!amz_headers_signed(r, pt.signed_headers)) {
        st = AUTH_UNSIGNED_HEADER;
        goto out;
    }
    memcpy(ctx->sig.seed, pt.signature, 65);
    ctx->signed_req = true;
    if (ctx->payload == AUTH_PAYLOAD_SHA256)
        for (int i = 0; i < 64; i++)
            ctx->payload_hash[i] = (char)tolower((unsigned char)pt.payload_hash[i]);
    ctx->payload_hash[64] = '\0';
    st = AUTH_OK;
out:
    parts_free(&pt);
    if (st != AUTH_OK) {
        auth_ctx_free(ctx);
        return st;
    }
    *out = ctx;
    return AUTH_OK;
}

const struct conf_user *auth_ctx_user(const struct auth_ctx *ctx)
{
    return ctx->user;
}

enum auth_payload auth_ctx_payload(const struct auth_ctx *ctx)
{
    return ctx->payload;
}

void auth_ctx_free(struct auth_ctx *ctx)
{
    if (!ctx)
        return;
    OPENSSL_cleanse(ctx, sizeof *ctx);
    free(ctx);
}
