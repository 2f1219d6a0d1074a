/* auth/chunked.c - the aws-chunked decoder: a byte-driven state machine
 * (input may be split anywhere) that passes chunk data through as it
 * arrives, checks each chunk signature when the chunk completes, and reads
 * and verifies the trailer section. Only chunk-size lines and trailers are
 * buffered, each under a cap. */
#include "auth_int.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

enum auth_status auth_chunk_init(struct auth_chunk_dec *d, enum auth_chunk_mode mode,
                                 const struct auth_sigstate *sig, uint64_t limit)
{
    memset(d, 0, sizeof *d);
    d->mode = mode;
    d->st = AUTH_CHS_SIZE;
    d->limit = limit;
    if (mode != AUTH_CHUNK_UNSIGNED_TRAILER) {
        if (!sig)
            return AUTH_BAD_CHUNK;
        d->sig = sig;
        memcpy(d->prev_sig, sig->seed, sizeof d->prev_sig);
        d->chunk_md = EVP_MD_CTX_new();
        if (!d->chunk_md)
            return AUTH_NOMEM;
    }
    return AUTH_OK;
}

void auth_chunk_free(struct auth_chunk_dec *d)
{
    EVP_MD_CTX_free(d->chunk_md);
    d->chunk_md = NULL;
}

static enum auth_status fail(struct auth_chunk_dec *d, enum auth_status st)
{
    d->st = AUTH_CHS_ERROR;
    d->err = st;
    return st;
}

/* HMACs "<kind>\n<amzdate>\n<scope>\n<prev>\n<extra>\n<hash_hex>" with the
 * request's signing key (extra is NULL for the trailer form) and compares
 * with `claimed` in constant time. */
static enum auth_status check_sig(struct auth_chunk_dec *d, const char *kind, bool empty_line,
                                  const char *hash_hex, const char *claimed)
{
    char sts[64 + 17 + AUTH_SCOPE_MAX + 65 + 65 + 65 + 8];
    uint8_t mac[32];
    char hex[65];
    size_t n = 0;
    const char *parts[6] = { kind, d->sig->amzdate, d->sig->scope, d->prev_sig,
                             empty_line ? AUTH_EMPTY_SHA256 : NULL, hash_hex };
    for (int i = 0; i < 6; i++) {
        if (!parts[i])
            continue;
        size_t l = strlen(parts[i]);
        if (n)
            sts[n++] = '\n';
        memcpy(sts + n, parts[i], l);
        n += l;
    }
    if (sg_sigv4_hmac(d->sig->key, 32, sts, n, mac) != 0)
        return fail(d, AUTH_NOMEM);
    sg_hex_encode(mac, 32, hex);
    if (CRYPTO_memcmp(hex, claimed, 64) != 0)
        return fail(d, AUTH_CHUNK_SIGNATURE_MISMATCH);
    memcpy(d->prev_sig, claimed, 64);
    d->prev_sig[64] = '\0';
    return AUTH_OK;
}

static enum auth_status check_chunk_sig(struct auth_chunk_dec *d)
{
    uint8_t md[32];
    unsigned int mdlen = 0;
    char hex[65];
    if (EVP_DigestFinal_ex(d->chunk_md, md, &mdlen) != 1)
        return fail(d, AUTH_NOMEM);
    sg_hex_encode(md, 32, hex);
    return check_sig(d, "AWS4-HMAC-SHA256-PAYLOAD", true, hex, d->chunk_sig);
}

static bool is_hex64(const char *s, size_t n)
{
    if (n != 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

/* "<hex>[;name[=value]]...". The signed modes need chunk-signature=<64 hex>;
 * other extensions are ignored. */
static enum auth_status size_line(struct auth_chunk_dec *d)
{
    const char *s = d->line;
    size_t n = d->line_len;
    uint64_t size = 0;
    size_t i = 0;
    bool have_sig = false;

    if (n && s[n - 1] == '\r')
        n--;
    auth_trim_ows(&s, &n);
    for (; i < n; i++) {
        int v = sg_hexval((unsigned char)s[i]);
        if (v < 0)
            break;
        size = size * 16 + (uint64_t)v;
        if (size > AUTH_CHUNK_DATA_MAX)      /* also stops any overflow */
            return fail(d, AUTH_TOO_LARGE);
    }
    if (i == 0)
        return fail(d, AUTH_BAD_CHUNK);
    const char *ext = s + i;
    size_t en = n - i;
    auth_trim_ows(&ext, &en);
    if (en && *ext != ';')
        return fail(d, AUTH_BAD_CHUNK);
    while (en) {
        ext++;                                   /* the ';' */
        en--;
        const char *semi = memchr(ext, ';', en);
        size_t pl = semi ? (size_t)(semi - ext) : en;
        const char *p = ext;
        size_t pn = pl;
        auth_trim_ows(&p, &pn);
        if (pn > 16 && strncmp(p, "chunk-signature=", 16) == 0) {
            const char *v = p + 16;
            size_t vn = pn - 16;
            auth_trim_ows(&v, &vn);
            if (have_sig || !is_hex64(v, vn))
                return fail(d, AUTH_BAD_CHUNK);
            memcpy(d->chunk_sig, v, 64);
            d->chunk_sig[64] = '\0';
            have_sig = true;
        }
        ext += pl;
        en -= pl;
    }
    if (d->mode != AUTH_CHUNK_UNSIGNED_TRAILER && !have_sig)
        return fail(d, AUTH_BAD_CHUNK);
    if (size > d->limit - d->decoded)
        return fail(d, AUTH_BAD_CHUNK);          /* more than declared */
    if (d->chunk_md && EVP_DigestInit_ex(d->chunk_md, EVP_sha256(), NULL) != 1)
        return fail(d, AUTH_NOMEM);
    if (size == 0) {
        if (d->chunk_md) {
            enum auth_status st = check_chunk_sig(d);
            if (st != AUTH_OK)
                return st;
        }
        d->st = AUTH_CHS_TRAILER;
        return AUTH_OK;
    }
    d->remaining = size;
    d->st = AUTH_CHS_DATA;
    return AUTH_OK;
}

static enum auth_status trailer_sig(struct auth_chunk_dec *d, const char *v, size_t vn)
{
    char hex[65];
    if (!is_hex64(v, vn))
        return fail(d, AUTH_BAD_CHUNK);
    char claimed[65];
    memcpy(claimed, v, 64);
    claimed[64] = '\0';
    sg_sigv4_sha256_hex(d->trailer, d->trailer_len, hex);
    enum auth_status st = check_sig(d, "AWS4-HMAC-SHA256-TRAILER", false, hex, claimed);
    if (st == AUTH_OK)
        d->trailer_sig_seen = true;
    return st;
}

/* One trailer line (without its LF), or the empty line that ends them. */
static enum auth_status trailer_line(struct auth_chunk_dec *d)
{
    const char *s = d->line;
    size_t n = d->line_len;
    if (n && s[n - 1] == '\r')
        n--;
    if (n == 0) {
        if (d->mode == AUTH_CHUNK_SIGNED_TRAILER && !d->trailer_sig_seen)
            return fail(d, AUTH_BAD_CHUNK);
        d->st = AUTH_CHS_DONE;
        return AUTH_OK;
    }
    if (d->mode == AUTH_CHUNK_SIGNED || d->trailer_sig_seen)
        return fail(d, AUTH_BAD_CHUNK);          /* no trailers / after the signature */
    const char *colon = memchr(s, ':', n);
    if (!colon)
        return fail(d, AUTH_BAD_CHUNK);
    const char *name = s, *val = colon + 1;
    size_t nn = (size_t)(colon - s), vn = n - nn - 1;
    auth_trim_ows(&name, &nn);
    auth_trim_ows(&val, &vn);
    if (nn == 0)
        return fail(d, AUTH_BAD_CHUNK);
    if (nn == 23 && strncasecmp(name, "x-amz-trailer-signature", 23) == 0) {
        if (d->mode != AUTH_CHUNK_SIGNED_TRAILER)
            return fail(d, AUTH_BAD_CHUNK);
        return trailer_sig(d, val, vn);
    }
    if (d->n_trailers == AUTH_TRAILERS_MAX)
        return fail(d, AUTH_TOO_LARGE);
    if (d->trailer_len + nn + vn + 2 > AUTH_TRAILER_MAX)
        return fail(d, AUTH_TOO_LARGE);
    /* kept as "name:value\n", which is also what the trailer signature hashes */
    size_t o = d->trailer_len;
    d->trailers[d->n_trailers].name_off = o;
    d->trailers[d->n_trailers].name_len = nn;
    for (size_t i = 0; i < nn; i++)
        d->trailer[o++] = (char)tolower((unsigned char)name[i]);
    d->trailer[o++] = ':';
    d->trailers[d->n_trailers].val_off = o;
    d->trailers[d->n_trailers].val_len = vn;
    memcpy(d->trailer + o, val, vn);
    o += vn;
    d->trailer[o++] = '\n';
    d->trailer_len = o;
    d->n_trailers++;
    return AUTH_OK;
}

enum auth_status auth_chunk_feed(struct auth_chunk_dec *d, const uint8_t *in, size_t len,
                                 auth_chunk_data_cb cb, void *arg)
{
    size_t i = 0;
    enum auth_status st;
    while (i < len) {
        switch (d->st) {
        case AUTH_CHS_ERROR:
            return d->err;
        case AUTH_CHS_DONE:
            return fail(d, AUTH_BAD_CHUNK);      /* bytes after the end */
        case AUTH_CHS_SIZE:
        case AUTH_CHS_TRAILER: {
            const uint8_t *lf = memchr(in + i, '\n', len - i);
            size_t take = lf ? (size_t)(lf - (in + i)) : len - i;
            size_t cap = AUTH_CHUNK_LINE_MAX;
            if (d->st == AUTH_CHS_TRAILER) {
                /* the whole raw trailer section counts against its cap */
                if (d->trailer_raw + take + (lf ? 1 : 0) > AUTH_TRAILER_MAX)
                    return fail(d, AUTH_TOO_LARGE);
                d->trailer_raw += take + (lf ? 1 : 0);
            }
            if (d->line_len + take > cap)
                return fail(d, AUTH_TOO_LARGE);
            memcpy(d->line + d->line_len, in + i, take);
            d->line_len += take;
            i += take;
            if (!lf)
                break;
            i++;                                 /* the LF */
            st = d->st == AUTH_CHS_SIZE ? size_line(d) : trailer_line(d);
            d->line_len = 0;
            if (st != AUTH_OK)
                return st;
            break;
        }
        case AUTH_CHS_DATA: {
            size_t take = len - i;
            if (take > d->remaining)
                take = (size_t)d->remaining;
            if (d->chunk_md && EVP_DigestUpdate(d->chunk_md, in + i, take) != 1)
                return fail(d, AUTH_NOMEM);
            d->decoded += take;
            d->remaining -= take;
            if (cb && cb(arg, in + i, take) != 0)
                return fail(d, AUTH_ABORTED);
            i += take;
            if (d->remaining == 0) {
                d->st = AUTH_CHS_DATA_CR;
                if (d->chunk_md && (st = check_chunk_sig(d)) != AUTH_OK)
                    return st;
            }
            break;
        }
        case AUTH_CHS_DATA_CR:
            if (in[i] == '\r')
                d->st = AUTH_CHS_DATA_LF;
            else if (in[i] == '\n')
                d->st = AUTH_CHS_SIZE;           /* a bare LF is unambiguous */
            else
                return fail(d, AUTH_BAD_CHUNK);
            i++;
            break;
        case AUTH_CHS_DATA_LF:
            if (in[i] != '\n')
                return fail(d, AUTH_BAD_CHUNK);
            d->st = AUTH_CHS_SIZE;
            i++;
            break;
        }
    }
    return d->st == AUTH_CHS_ERROR ? d->err : AUTH_OK;
}

enum auth_status auth_chunk_finish(struct auth_chunk_dec *d)
{
    switch (d->st) {
    case AUTH_CHS_ERROR:
        return d->err;
    case AUTH_CHS_DONE:
        break;
    case AUTH_CHS_TRAILER: {
        /* Some clients end after the last trailer line without the empty
         * line, or even without the last line's CRLF: the section is over
         * either way, so accept it. */
        enum auth_status st = AUTH_OK;
        if (d->line_len > 0) {
            st = trailer_line(d);
            d->line_len = 0;
            if (st != AUTH_OK)
                return st;
        }
        st = trailer_line(d);                    /* the missing empty line */
        if (st != AUTH_OK)
            return st;
        break;
    }
    case AUTH_CHS_SIZE:
    case AUTH_CHS_DATA:
    case AUTH_CHS_DATA_CR:
    case AUTH_CHS_DATA_LF:
        return fail(d, AUTH_INCOMPLETE_BODY);
    }
    if (d->decoded != d->limit)
        return fail(d, AUTH_INCOMPLETE_BODY);
    return AUTH_OK;
}

const char *auth_chunk_trailer(const struct auth_chunk_dec *d, const char *name, size_t *len)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i < d->n_trailers; i++) {
        if (d->trailers[i].name_len == nl &&
            memcmp(d->trailer + d->trailers[i].name_off, name, nl) == 0) {
            *len = d->trailers[i].val_len;
            return d->trailer + d->trailers[i].val_off;
        }
    }
    return NULL;
}
