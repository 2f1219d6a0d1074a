/* auth/sigv2.c - AWS Signature Version 2 as S3 verifies it: what boto3,
 * aws-cli v1 and s3cmd make by default for presigned URLs
 * (?AWSAccessKeyId=&Signature=&Expires=) and what s3cmd and old SDKs send in
 * "Authorization: AWS <access key>:<signature>". HMAC-SHA1 over S3's string
 * to sign; the identity is the same conf_user as with SigV4. */
#include "auth_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

/* The string to sign holds the resource and the x-amz-* headers; the
 * gateway caps headers at tens of KiB and the query at AUTH_QUERY_MAX. */
#define STS_MAX (1u << 20)
/* base64 of a 20-byte HMAC-SHA1 */
#define SIG_B64_LEN 28
/* Expires is seconds since the epoch; 12 digits reach the year 33658. */
#define EXPIRES_DIGITS_MAX 12

/* The query parameters that are part of the resource a SigV2 signature
 * covers: botocore's HmacV1Auth list (a superset of the S3 documentation's
 * and s3cmd's), the response-* overrides among them. A parameter outside
 * the list is not signed, as on S3 (prefix, max-keys, list-type...), so an
 * operation the gateway routes by query must be here: "prefetch" and "job"
 * are shardgate's own (prefetch hints), so a SigV2 URL for a listing cannot
 * be replayed as a prefetch call, nor one job's status or cancel as
 * another's. */
static const char *const subresources[] = {
    "accelerate", "acl", "analytics", "cors", "defaultObjectAcl", "delete", "inventory", "job",
    "lifecycle", "location", "logging", "metrics", "notification", "object-lock",
    "partNumber", "policy", "prefetch", "replication", "requestPayment", "response-cache-control",
    "response-content-disposition", "response-content-encoding", "response-content-language",
    "response-content-type", "response-expires", "restore", "select", "select-type",
    "storageClass", "tagging", "torrent", "uploadId", "uploads", "versionId", "versioning",
    "versions", "website",
};

static bool is_subresource(const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof subresources / sizeof subresources[0]; i++)
        if (strlen(subresources[i]) == n && memcmp(subresources[i], name, n) == 0)
            return true;
    return false;
}

/* ---- which form ---- */

/* Is parameter `name` in the raw query (name compared after decoding)? */
static bool query_has(const char *q, const char *name)
{
    size_t want = strlen(name);
    for (const char *p = q; *p;) {
        size_t len = strcspn(p, "&");
        size_t nlen = strcspn(p, "=&");
        char nb[64];
        if (nlen < sizeof nb) {
            size_t dn = sg_pct_decode(p, nlen, nb, false);
            if (dn == want && memcmp(nb, name, dn) == 0)
                return true;
        }
        p += len;
        if (*p == '&')
            p++;
    }
    return false;
}

bool auth_sigv2_header(const char *authz)
{
    while (*authz == ' ' || *authz == '\t')
        authz++;
    return strncmp(authz, "AWS", 3) == 0 && (authz[3] == ' ' || authz[3] == '\t');
}

bool auth_sigv2_query(const char *q)
{
    return query_has(q, "AWSAccessKeyId") || query_has(q, "Signature");
}

/* ---- the string to sign ---- */

static void add_trimmed(struct sg_buf *b, const char *v)
{
    size_t n = strlen(v);
    auth_trim_ows(&v, &n);
    sg_buf_add(b, v, n);
}

/* One name=value pair kept for the string to sign; offsets into a buffer
 * that may move while it grows. */
struct v2_item {
    size_t name_off, name_len, val_off, val_len;
    bool has_eq;
    size_t order;           /* arrival order: S3 and botocore sort stably */
    const char *base;       /* set once the buffer is final, for the sort */
};

static int item_cmp(const void *x, const void *y)
{
    const struct v2_item *a = x, *b = y;
    size_t n = a->name_len < b->name_len ? a->name_len : b->name_len;
    int c = memcmp(a->base + a->name_off, b->base + b->name_off, n);
    if (c == 0 && a->name_len != b->name_len)
        c = a->name_len < b->name_len ? -1 : 1;
    if (c == 0)
        c = a->order < b->order ? -1 : a->order > b->order;
    return c;
}

/* Sorts the n items whose names and values sit in tmp, once tmp is final:
 * AUTH_OK, or what tmp's failure means (nothing sorted). */
static enum auth_status items_sort(struct v2_item *items, size_t n, const struct sg_buf *tmp)
{
    if (tmp->err)
        return tmp->err == SG_BUF_NOMEM ? AUTH_NOMEM : AUTH_MALFORMED;
    for (size_t i = 0; i < n; i++)
        items[i].base = tmp->p;
    qsort(items, n, sizeof *items, item_cmp);
    return AUTH_OK;
}

/* Appends a query component to tmp decoded as the gateway decodes it
 * (percent escapes, '+' is a space), so the signature covers what the
 * request will be taken to mean; returns its offset. */
static size_t keep_decoded(struct sg_buf *tmp, const char *s, size_t n, bool lower)
{
    size_t off = tmp->len;
    char *d = malloc(n ? n : 1);
    if (!d) {
        tmp->err = SG_BUF_NOMEM;
        return off;
    }
    size_t dn = sg_pct_decode(s, n, d, true);
    if (lower)
        for (size_t i = 0; i < dn; i++)
            if (d[i] >= 'A' && d[i] <= 'Z')
                d[i] = (char)(d[i] - 'A' + 'a');
    sg_buf_add(tmp, d, dn);
    free(d);
    return off;
}

/* One name[=value] of the raw query, still encoded. */
struct qseg {
    const char *name, *val;
    size_t nlen, vlen;
    bool has_eq;
};

static size_t query_split(const char *q, struct qseg *segs, size_t cap)
{
    size_t n = 0;
    for (const char *p = q; *p && n < cap;) {
        size_t len = strcspn(p, "&");
        if (len > 0) {
            const char *eq = memchr(p, '=', len);
            segs[n].name = p;
            segs[n].nlen = eq ? (size_t)(eq - p) : len;
            segs[n].has_eq = eq != NULL;
            segs[n].val = eq ? eq + 1 : p + len;
            segs[n].vlen = eq ? len - segs[n].nlen - 1 : 0;
            n++;
        }
        p += len;
        if (*p == '&')
            p++;
    }
    return n;
}

/* The presigned URL's value of a lower-case parameter name (any case on the
 * wire), decoded into tmp; returns false when absent. */
static bool query_value(const struct qseg *segs, size_t n, const char *name,
                        struct sg_buf *tmp, size_t *off, size_t *len)
{
    size_t want = strlen(name);
    for (size_t i = 0; i < n; i++) {
        char nb[32];
        if (segs[i].nlen >= sizeof nb)
            continue;
        size_t dn = sg_pct_decode(segs[i].name, segs[i].nlen, nb, true);
        if (dn == want && strncasecmp(nb, name, dn) == 0) {
            *off = keep_decoded(tmp, segs[i].val, segs[i].vlen, false);
            *len = tmp->len - *off;
            return true;
        }
    }
    return false;
}

size_t auth_vhost_bucket(const char *host, const char *domain)
{
    if (!domain || !*domain || !host)
        return 0;
    size_t hlen = strlen(host);
    const char *colon = strrchr(host, ':');
    if (colon && !strchr(host, ']'))
        hlen = (size_t)(colon - host);
    size_t dlen = strlen(domain);
    if (hlen <= dlen + 1 || host[hlen - dlen - 1] != '.' ||
        strncasecmp(host + hlen - dlen, domain, dlen) != 0)
        return 0;
    return hlen - dlen - 1;
}

/* The request's virtual-hosted bucket (*b, its length returned), 0 when
 * path-style. */
static size_t vhost_bucket(const struct auth_req *r, const char *domain, const char **b)
{
    *b = auth_req_header(r, "host", NULL);
    return auth_vhost_bucket(*b, domain);
}

/* One standard header line: the header's value, else (presigned) the
 * query parameter of that name, else "". */
static void standard_line(struct sg_buf *out, const struct auth_req *r, const char *name,
                          bool presigned, const struct qseg *segs, size_t nseg,
                          struct sg_buf *tmp)
{
    const char *h = auth_req_header(r, name, NULL);
    size_t off, len;
    if (h) {
        add_trimmed(out, h);
    } else if (presigned && query_value(segs, nseg, name, tmp, &off, &len) && !tmp->err) {
        const char *v = tmp->p + off;
        auth_trim_ows(&v, &len);
        sg_buf_add(out, v, len);
    }
    sg_buf_addc(out, '\n');
}

enum auth_status auth_sigv2_string_to_sign(const struct auth_req *r,
                                           const struct auth_v2_sts *o, struct sg_buf *out)
{
    bool presigned = o->presigned;
    const char *q = r->raw_query ? r->raw_query : "";
    size_t cap = 1;
    for (const char *p = q; *p; p++)
        cap += *p == '&';
    struct qseg *segs = calloc(cap, sizeof *segs);
    struct v2_item *items = calloc(cap + r->n_hdrs + 1, sizeof *items);
    struct sg_buf tmp;
    enum auth_status st = AUTH_OK;
    sg_buf_init(&tmp, STS_MAX);
    if (!segs || !items) {
        st = AUTH_NOMEM;
        goto out;
    }
    size_t nseg = query_split(q, segs, cap);

    sg_buf_adds(out, r->method);
    sg_buf_addc(out, '\n');
    standard_line(out, r, "content-md5", presigned, segs, nseg, &tmp);
    standard_line(out, r, "content-type", presigned, segs, nseg, &tmp);
    sg_buf_adds(out, o->date_line);
    sg_buf_addc(out, '\n');

    /* CanonicalizedAmzHeaders: every x-amz-* header (a presigned URL
     * carries them as query parameters too), names in lower case, sorted,
     * the values of one name trimmed and joined with ',' */
    size_t ni = 0;
    for (size_t i = 0; i < r->n_hdrs; i++) {
        const char *n = r->hdrs[i].name;
        if (strncasecmp(n, "x-amz-", 6) != 0 || (o->omit_amz_date && strcasecmp(n, "x-amz-date") == 0))
            continue;
        const char *v = r->hdrs[i].value ? r->hdrs[i].value : "";
        size_t vl = strlen(v);
        auth_trim_ows(&v, &vl);
        struct v2_item *it = &items[ni];
        it->name_off = tmp.len;
        for (const char *c = n; *c; c++)
            sg_buf_addc(&tmp, (*c >= 'A' && *c <= 'Z') ? (char)(*c - 'A' + 'a') : *c);
        it->name_len = tmp.len - it->name_off;
        it->val_off = tmp.len;
        sg_buf_add(&tmp, v, vl);
        it->val_len = vl;
        it->order = ni++;
    }
    for (size_t i = 0; presigned && i < nseg; i++) {
        struct v2_item *it = &items[ni];
        it->name_off = keep_decoded(&tmp, segs[i].name, segs[i].nlen, true);
        it->name_len = tmp.len - it->name_off;
        if (tmp.err || it->name_len < 6 || memcmp(tmp.p + it->name_off, "x-amz-", 6) != 0)
            continue;
        it->val_off = keep_decoded(&tmp, segs[i].val, segs[i].vlen, false);
        it->val_len = tmp.len - it->val_off;
        const char *v = tmp.p + it->val_off;
        size_t vl = it->val_len;
        auth_trim_ows(&v, &vl);
        it->val_off = (size_t)(v - tmp.p);
        it->val_len = vl;
        it->order = ni++;
    }
    st = items_sort(items, ni, &tmp);
    if (st != AUTH_OK)
        goto out;
    for (size_t i = 0; i < ni; i++) {
        bool same = i > 0 && items[i].name_len == items[i - 1].name_len &&
                    memcmp(tmp.p + items[i].name_off, tmp.p + items[i - 1].name_off,
                           items[i].name_len) == 0;
        if (same) {
            sg_buf_addc(out, ',');
        } else {
            if (i > 0)
                sg_buf_addc(out, '\n');
            sg_buf_add(out, tmp.p + items[i].name_off, items[i].name_len);
            sg_buf_addc(out, ':');
        }
        sg_buf_add(out, tmp.p + items[i].val_off, items[i].val_len);
    }
    if (ni > 0)
        sg_buf_addc(out, '\n');

    /* CanonicalizedResource: "/<bucket>" for a virtual-hosted request, the
     * path as received ("/<bucket>/" for a path-style bucket request sent
     * as "/<bucket>" when bucket_slash), then the sub-resources, decoded,
     * sorted by name */
    const char *bucket = NULL;
    size_t blen = vhost_bucket(r, o->vhost_domain, &bucket);
    if (blen) {
        sg_buf_addc(out, '/');
        sg_buf_add(out, bucket, blen);
    }
    const char *path = r->raw_path && *r->raw_path ? r->raw_path : "/";
    sg_buf_adds(out, path);
    if (!blen && o->bucket_slash && path[1] && !strchr(path + 1, '/'))
        sg_buf_addc(out, '/');
    size_t ns = 0;
    tmp.len = 0;
    for (size_t i = 0; i < nseg; i++) {
        struct v2_item *it = &items[ns];
        it->name_off = keep_decoded(&tmp, segs[i].name, segs[i].nlen, false);
        it->name_len = tmp.len - it->name_off;
        if (tmp.err || !is_subresource(tmp.p + it->name_off, it->name_len))
            continue;
        it->val_off = keep_decoded(&tmp, segs[i].val, segs[i].vlen, false);
        it->val_len = tmp.len - it->val_off;
        it->has_eq = segs[i].has_eq;
        it->order = ns++;
    }
    st = items_sort(items, ns, &tmp);
    if (st != AUTH_OK)
        goto out;
    for (size_t i = 0; i < ns; i++) {
        sg_buf_addc(out, i == 0 ? '?' : '&');
        sg_buf_add(out, tmp.p + items[i].name_off, items[i].name_len);
        if (items[i].has_eq) {
            sg_buf_addc(out, '=');
            sg_buf_add(out, tmp.p + items[i].val_off, items[i].val_len);
        }
    }
    if (out->err)
        st = out->err == SG_BUF_NOMEM ? AUTH_NOMEM : AUTH_MALFORMED;
out:
    sg_buf_free(&tmp);
    free(items);
    free(segs);
    return st;
}

int auth_sigv2_sign(const char *secret, const char *sts, size_t n, char out[29])
{
    uint8_t mac[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    size_t klen = strlen(secret);
    if (klen > INT32_MAX || !HMAC(EVP_sha1(), secret, (int)klen, (const uint8_t *)sts, n, mac,
                                  &len) || len != 20)
        return -1;
    sg_b64_encode(mac, 20, out);
    OPENSSL_cleanse(mac, sizeof mac);
    return 0;
}

/* ---- verification ---- */

/* "AWS <access key>:<signature>": the access key is everything before the
 * last ':' (a base64 signature has none). Returns new strings. */
static enum auth_status parse_header(const char *authz, char **ak, char **sig)
{
    const char *v = authz;
    while (*v == ' ' || *v == '\t')
        v++;
    v += 3;                                      /* "AWS", checked by auth_sigv2_header */
    while (*v == ' ' || *v == '\t')
        v++;
    size_t n = strlen(v);
    auth_trim_ows(&v, &n);
    const char *colon = NULL;
    for (size_t i = 0; i < n; i++)
        if (v[i] == ':')
            colon = v + i;
    if (!colon || colon == v || colon == v + n - 1 || n > 4096)
        return AUTH_MALFORMED;
    size_t akl = (size_t)(colon - v);
    *ak = strndup(v, akl);
    *sig = strndup(colon + 1, n - akl - 1);
    if (!*ak || !*sig)
        return AUTH_NOMEM;
    return AUTH_OK;
}

/* The query form's three parameters: each exactly once. */
static enum auth_status parse_query(const char *q, char **ak, char **sig, char **expires)
{
    int n1 = auth_query_param(q, "AWSAccessKeyId", ak);
    int n2 = auth_query_param(q, "Signature", sig);
    int n3 = auth_query_param(q, "Expires", expires);
    if (n1 < 0 || n2 < 0 || n3 < 0)
        return AUTH_NOMEM;
    if (n1 > 1 || n2 > 1 || n3 > 1)
        return AUTH_QUERY_MALFORMED;
    if (n1 == 0 || n2 == 0 || n3 == 0)
        return AUTH_QUERY_INCOMPLETE;
    size_t el = strlen(*expires);
    if (el == 0 || el > EXPIRES_DIGITS_MAX || strspn(*expires, "0123456789") != el)
        return AUTH_QUERY_MALFORMED;
    return AUTH_OK;
}

/* Signs one candidate string to sign and compares in constant time. */
static enum auth_status try_sign(const struct auth_req *r, struct auth_v2_sts o,
                                 const struct conf_user *user, const char *sig)
{
    struct sg_buf sts, dl;
    char mine[SIG_B64_LEN + 1];
    enum auth_status st;
    sg_buf_init(&sts, STS_MAX);
    sg_buf_init(&dl, 256);
    add_trimmed(&dl, o.date_line);               /* like every standard header */
    o.date_line = dl.p ? dl.p : "";
    st = dl.err ? AUTH_MALFORMED : auth_sigv2_string_to_sign(r, &o, &sts);
    if (st == AUTH_OK && auth_sigv2_sign(user->secret_key, sts.p, sts.len, mine) != 0)
        st = AUTH_NOMEM;
    if (st == AUTH_OK &&
        (strlen(sig) != SIG_B64_LEN || CRYPTO_memcmp(mine, sig, SIG_B64_LEN) != 0))
        st = AUTH_SIGNATURE_MISMATCH;
    OPENSSL_cleanse(mine, sizeof mine);
    sg_buf_free(&dl);
    sg_buf_free(&sts);
    return st;
}

enum auth_status auth_sigv2_verify(const struct auth *a, const struct auth_req *r,
                                   enum auth_v2_form form, struct auth_ctx *ctx)
{
    const char *q = r->raw_query ? r->raw_query : "";
    char *ak = NULL, *sig = NULL, *expires = NULL;
    const char *date_line = "", *xd = NULL;
    const struct conf_user *user;
    enum auth_status st;
    time_t now = auth_now(a);

    if (!a->c->sigv2) {
        log_msg(LOG_LVL_DEBUG, "auth", "Signature Version 2 refused (\"sigv2\": false)");
        return AUTH_SIGV2_DISABLED;
    }
    if (form == AUTH_V2_HEADER) {
        st = parse_header(auth_req_header(r, "authorization", NULL), &ak, &sig);
        if (st != AUTH_OK)
            goto out;
        xd = auth_req_header(r, "x-amz-date", NULL);
        const char *d = xd ? xd : auth_req_header(r, "date", NULL);
        time_t t;
        if (!d || auth_parse_date(d, &t) != 0) {
            st = AUTH_MISSING_DATE;
            goto out;
        }
        date_line = xd ? "" : d;
        if (t - now > AUTH_SKEW_MAX_S || now - t > AUTH_SKEW_MAX_S) {
            st = AUTH_TIME_SKEWED;
            goto out;
        }
    } else {
        st = parse_query(q, &ak, &sig, &expires);
        if (st != AUTH_OK)
            goto out;
        date_line = expires;
    }
    user = auth_find_user(a, ak);
    if (!user) {
        log_msg(LOG_LVL_DEBUG, "auth", "unknown access key");
        st = AUTH_UNKNOWN_KEY;
        goto out;
    }
    if (expires && (long long)now > strtoll(expires, NULL, 10)) {
        st = AUTH_EXPIRED;
        goto out;
    }
    /* Clients differ where S3's documentation is loose; each alternative
     * below signs the same request and the same instant, so accepting it
     * widens nothing:
     *  - with x-amz-date, an empty Date line and x-amz-date among the
     *    x-amz-* headers (the rule; s3cmd signs so), or the x-amz-date value
     *    on the Date line (the documentation's DELETE example);
     *  - a path-style bucket request sent as "/<bucket>": botocore signs
     *    "/<bucket>/" (as the documentation's resource), others the path. */
    const char *path = r->raw_path ? r->raw_path : "";
    bool bucket_root = path[0] == '/' && path[1] && !strchr(path + 1, '/');
    struct auth_v2_sts o = { form == AUTH_V2_QUERY, date_line, false, true,
                             a->c->vhost_domain };
    st = try_sign(r, o, user, sig);
    if (st == AUTH_SIGNATURE_MISMATCH && bucket_root) {
        o.bucket_slash = false;
        st = try_sign(r, o, user, sig);
        o.bucket_slash = true;
    }
    if (st == AUTH_SIGNATURE_MISMATCH && xd) {
        o.date_line = xd;
        o.omit_amz_date = true;
        st = try_sign(r, o, user, sig);
    }
    if (st == AUTH_SIGNATURE_MISMATCH)
        log_msg(LOG_LVL_DEBUG, "auth", "SigV2 signature mismatch for user %s",
                user->name ? user->name : "?");
    if (st != AUTH_OK)
        goto out;
    /* no SigV4 signing key: the body is unsigned (Content-MD5, a SHA-256 in
     * x-amz-content-sha256 and x-amz-checksum-* are still checked) */
    st = auth_ctx_unsigned(r, ctx);
    if (st != AUTH_OK)
        goto out;
    ctx->user = user;
out:
    free(ak);
    free(sig);
    free(expires);
    return st;
}
