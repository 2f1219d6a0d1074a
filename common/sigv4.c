/* common/sigv4.c - the Signature Version 4 steps of sigv4.h, shared by the
 * verifier (auth/sigv4.c) and the cold tier's signer (backend/s3_call.c):
 * canonical URI, query and headers, string to sign, signing key and
 * signature. Each call works on its own buffers; nothing secret is kept. */
#include "sigv4.h"
#include "encoding.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

/* ---- hashes and keys ---- */

void sg_sigv4_sha256_hex(const void *d, size_t n, char out[65])
{
    uint8_t md[32];
    SHA256(d, n, md);
    sg_hex_encode(md, 32, out);
}

int sg_sigv4_hmac(const uint8_t *key, size_t klen, const void *d, size_t n, uint8_t out[32])
{
    unsigned int len = 0;
    if (klen > INT32_MAX)
        return -1;
    if (!HMAC(EVP_sha256(), key, (int)klen, d, n, out, &len) || len != 32)
        return -1;
    return 0;
}

int sg_sigv4_signing_key(const char *secret, const char *date8, const char *region,
                         const char *service, uint8_t out[32])
{
    size_t slen = strlen(secret);
    uint8_t *k0 = OPENSSL_malloc(slen + 4);
    uint8_t k[32], k2[32];
    int rc = -1;
    if (!k0)
        return -1;
    memcpy(k0, "AWS4", 4);
    memcpy(k0 + 4, secret, slen);
    if (sg_sigv4_hmac(k0, slen + 4, date8, strlen(date8), k) == 0 &&
        sg_sigv4_hmac(k, 32, region, strlen(region), k2) == 0 &&
        sg_sigv4_hmac(k2, 32, service, strlen(service), k) == 0 &&
        sg_sigv4_hmac(k, 32, "aws4_request", 12, out) == 0)
        rc = 0;
    OPENSSL_clear_free(k0, slen + 4);
    OPENSSL_cleanse(k, sizeof k);
    OPENSSL_cleanse(k2, sizeof k2);
    return rc;
}

void sg_sigv4_amz_date(time_t t, char out[17])
{
    struct tm tm;
    gmtime_r(&t, &tm);
    int v[6] = { tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                 tm.tm_sec };
    int w[6] = { 4, 2, 2, 2, 2, 2 };
    size_t o = 0;
    for (int i = 0; i < 6; i++) {
        if (i == 3)
            out[o++] = 'T';
        for (int k = w[i] - 1; k >= 0; k--) {
            int x = v[i];
            for (int j = 0; j < k; j++)
                x /= 10;
            out[o++] = (char)('0' + x % 10);
        }
    }
    out[o++] = 'Z';
    out[o] = '\0';
}

/* ---- the canonical URI ---- */

void sg_sigv4_uri_canon(struct sg_buf *b, const char *s, size_t n, bool keep_slash)
{
    char *dec = malloc(n ? n : 1);
    if (!dec) {
        b->err = SG_BUF_NOMEM;
        return;
    }
    size_t dn = sg_pct_decode(s, n, dec, false);
    sg_buf_add_uri(b, dec, dn, keep_slash);
    free(dec);
}

/* ---- the canonical query ---- */

struct qpair {
    size_t name_off, val_off;
    const char *name, *val;
};

static int qpair_cmp(const void *x, const void *y)
{
    const struct qpair *a = x, *b = y;
    int c = strcmp(a->name, b->name);
    return c ? c : strcmp(a->val, b->val);
}

/* Is the percent-decoded name p[0..n) X-Amz-Signature? */
static int is_signature_param(const char *p, size_t n, bool *yes)
{
    char *dn = malloc(n ? n : 1);
    if (!dn)
        return SG_BUF_NOMEM;
    size_t dnl = sg_pct_decode(p, n, dn, false);
    *yes = dnl == strlen("X-Amz-Signature") && memcmp(dn, "X-Amz-Signature", dnl) == 0;
    free(dn);
    return 0;
}

int sg_sigv4_canonical_query(const char *q, bool drop_signature, struct sg_buf *out)
{
    size_t nseg = 1;
    for (const char *p = q; *p; p++)
        nseg += *p == '&';
    struct qpair *pairs = calloc(nseg, sizeof *pairs);
    struct sg_buf tmp;
    int rc = 0;
    size_t np = 0;
    sg_buf_init(&tmp, SG_SIGV4_CANON_MAX);
    if (!pairs)
        return SG_BUF_NOMEM;
    const char *p = q;
    while (*p) {
        const char *end = strchr(p, '&');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 0) {
            const char *eq = memchr(p, '=', len);
            size_t nlen = eq ? (size_t)(eq - p) : len;
            bool skip = false;
            if (drop_signature && (rc = is_signature_param(p, nlen, &skip)) != 0)
                goto out;
            if (!skip) {
                pairs[np].name_off = tmp.len;
                sg_sigv4_uri_canon(&tmp, p, nlen, false);
                sg_buf_add(&tmp, "", 1);   /* NUL separator: len counts it */
                pairs[np].val_off = tmp.len;
                if (eq)
                    sg_sigv4_uri_canon(&tmp, eq + 1, len - nlen - 1, false);
                sg_buf_add(&tmp, "", 1);
                np++;
            }
        }
        if (!end)
            break;
        p = end + 1;
    }
    if (tmp.err) {
        rc = tmp.err;
        goto out;
    }
    for (size_t i = 0; i < np; i++) {
        pairs[i].name = tmp.p + pairs[i].name_off;
        pairs[i].val = tmp.p + pairs[i].val_off;
    }
    qsort(pairs, np, sizeof *pairs, qpair_cmp);
    for (size_t i = 0; i < np; i++) {
        if (i)
            sg_buf_addc(out, '&');
        sg_buf_adds(out, pairs[i].name);
        sg_buf_addc(out, '=');
        sg_buf_adds(out, pairs[i].val);
    }
out:
    sg_buf_free(&tmp);
    free(pairs);
    return rc;
}

/* ---- the canonical headers ---- */

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* Appends a header value trimmed, inner whitespace runs collapsed to one
 * space (what SigV4 clients sign). */
static void add_header_value(struct sg_buf *b, const char *v)
{
    bool pending_space = false, any = false;
    for (; *v; v++) {
        if (is_ws(*v)) {
            pending_space = any;
            continue;
        }
        if (pending_space)
            sg_buf_addc(b, ' ');
        pending_space = false;
        any = true;
        sg_buf_addc(b, *v);
    }
}

void sg_sigv4_canonical_headers(const struct sg_sigv4_req *r, const char *signed_headers,
                                struct sg_buf *out)
{
    const char *s = signed_headers;
    while (*s) {
        const char *end = strchr(s, ';');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        sg_buf_add(out, s, len);
        sg_buf_addc(out, ':');
        bool first = true;
        for (size_t i = 0; i < r->n_hdrs; i++) {
            const char *hn = r->hdrs[i].name;
            if (strlen(hn) != len || strncasecmp(hn, s, len) != 0)
                continue;
            if (!first)
                sg_buf_addc(out, ',');
            first = false;
            add_header_value(out, r->hdrs[i].value ? r->hdrs[i].value : "");
        }
        sg_buf_addc(out, '\n');
        if (!end)
            break;
        s = end + 1;
    }
}

/* ---- the canonical request, the string to sign, the signature ---- */

int sg_sigv4_canonical_request(const struct sg_sigv4_req *r, const char *signed_headers,
                               const char *payload_hash, bool drop_signature,
                               struct sg_buf *out)
{
    sg_buf_adds(out, r->method);
    sg_buf_addc(out, '\n');
    const char *path = r->path && *r->path ? r->path : "/";
    sg_sigv4_uri_canon(out, path, strlen(path), true);
    sg_buf_addc(out, '\n');
    int rc = sg_sigv4_canonical_query(r->query ? r->query : "", drop_signature, out);
    if (rc != 0)
        return rc;
    sg_buf_addc(out, '\n');
    sg_sigv4_canonical_headers(r, signed_headers, out);
    sg_buf_addc(out, '\n');
    sg_buf_adds(out, signed_headers);
    sg_buf_addc(out, '\n');
    sg_buf_adds(out, payload_hash);
    return out->err;
}

void sg_sigv4_string_to_sign(const char *amzdate, const char *scope, const char *creq,
                             struct sg_buf *out)
{
    char h[65];
    sg_sigv4_sha256_hex(creq, strlen(creq), h);
    sg_buf_adds(out, SG_SIGV4_ALGO "\n");
    sg_buf_adds(out, amzdate);
    sg_buf_addc(out, '\n');
    sg_buf_adds(out, scope);
    sg_buf_addc(out, '\n');
    sg_buf_adds(out, h);
}

int sg_sigv4_sign(const struct sg_sigv4_req *r, bool drop_signature, const char *signed_headers,
                  const char *payload_hash, const char *amzdate, const char *scope,
                  const uint8_t key[32], char sig_hex[65])
{
    struct sg_buf creq, sts;
    uint8_t mac[32];
    sg_buf_init(&creq, SG_SIGV4_CANON_MAX);
    sg_buf_init(&sts, SG_SIGV4_CANON_MAX);
    int rc = sg_sigv4_canonical_request(r, signed_headers, payload_hash, drop_signature, &creq);
    if (rc != 0)
        goto out;
    sg_sigv4_string_to_sign(amzdate, scope, creq.p, &sts);
    if (sts.err || sg_sigv4_hmac(key, 32, sts.p, sts.len, mac) != 0) {
        rc = SG_BUF_NOMEM;
        goto out;
    }
    sg_hex_encode(mac, 32, sig_hex);
    OPENSSL_cleanse(mac, sizeof mac);
out:
    sg_buf_free(&creq);
    sg_buf_free(&sts);
    return rc;
}
