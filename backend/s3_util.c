/* backend/s3_util.c - the pure helpers of the S3 cold tier (s3_int.h, tested
 * by tests/unit/test_backend_s3.c): URIs and queries, S3 code -> status,
 * backoff, headers <-> obj_meta, ISO-8601 times, the byte ring and the read
 * path of an open object. No I/O and no store here. */
#include "s3_int.h"
#include "encoding.h"
#include "sigv4.h"

#include <assert.h>
#include <curl/curl.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- pure helpers (declared in s3_int.h) ---- */

char *s3_uri_encode(const char *s, bool keep_slash)
{
    size_t n = strlen(s);
    char *o = malloc(3 * n + 1);
    if (o)
        sg_uri_encode(s, n, keep_slash, o);
    return o;
}

char *s3_url_build(const char *endpoint, bool vhost, const char *bucket, const char *key,
                   const char *query)
{
    const char *hs = strstr(endpoint, "://");
    if (!hs)
        return NULL;
    hs += 3;
    size_t scheme_len = (size_t)(hs - endpoint);
    const char *he = strchr(hs, '/');
    if (!he)
        he = hs + strlen(hs);
    const char *base = he;                     /* "" or "/base..." */
    size_t base_len = strlen(base);
    while (base_len && base[base_len - 1] == '/')
        base_len--;
    char *ek = key ? s3_uri_encode(key, true) : NULL;
    if (key && !ek)
        return NULL;
    size_t bl = bucket ? strlen(bucket) : 0;
    size_t cap = strlen(endpoint) + bl + (ek ? strlen(ek) : 0) + (query ? strlen(query) : 0) +
                 8;
    char *u = malloc(cap);
    if (!u) {
        free(ek);
        return NULL;
    }
    int n;
    if (bucket && vhost)
        n = snprintf(u, cap, "%.*s%s.%.*s%.*s/%s%s%s", (int)scheme_len, endpoint, bucket,
                     (int)(he - hs), hs, (int)base_len, base, ek ? ek : "",
                     query && *query ? "?" : "", query ? query : "");
    else
        n = snprintf(u, cap, "%.*s%.*s%.*s/%s%s%s%s%s", (int)scheme_len, endpoint,
                     (int)(he - hs), hs, (int)base_len, base, bucket ? bucket : "",
                     bucket && key ? "/" : "", ek ? ek : "", query && *query ? "?" : "",
                     query ? query : "");
    free(ek);
    if (n < 0 || (size_t)n >= cap) {
        free(u);
        return NULL;
    }
    return u;
}

enum backend_status s3_status_from_code(const char *code, long http_status)
{
    static const struct {
        const char *code;
        enum backend_status st;
    } map[] = {
        { "NoSuchKey", BACKEND_NO_KEY },
        { "NoSuchBucket", BACKEND_NO_BUCKET },
        { "NoSuchUpload", BACKEND_NO_UPLOAD },
        { "BucketAlreadyOwnedByYou", BACKEND_BUCKET_EXISTS },
        { "BucketAlreadyExists", BACKEND_BUCKET_TAKEN },
        { "BucketNotEmpty", BACKEND_BUCKET_NOT_EMPTY },
        { "InvalidBucketName", BACKEND_BAD_BUCKET_NAME },
        { "KeyTooLongError", BACKEND_KEY_TOO_LONG },
        { "InvalidPart", BACKEND_INVALID_PART },
        { "InvalidPartOrder", BACKEND_INVALID_PART_ORDER },
        { "EntityTooSmall", BACKEND_ENTITY_TOO_SMALL },
        { "EntityTooLarge", BACKEND_TOO_LARGE },
        { "InvalidRange", BACKEND_BAD_RANGE },
        { "InvalidPartNumber", BACKEND_INVALID_PART_NUMBER },
        { "InvalidArgument", BACKEND_BAD_KEY },  /* the one 400 a key put gets */
        { "InvalidRequest", BACKEND_INVALID_REQUEST },
        { "AccessDenied", BACKEND_DENIED },
        { "SignatureDoesNotMatch", BACKEND_DENIED },
        { "InvalidAccessKeyId", BACKEND_DENIED },
        { "SlowDown", BACKEND_UNAVAILABLE },
        { "ServiceUnavailable", BACKEND_UNAVAILABLE },
        { "InternalError", BACKEND_UNAVAILABLE },
        { "RequestTimeout", BACKEND_UNAVAILABLE },
        { "NoSuchTagSet", BACKEND_NO_TAG_SET },
        { "PreconditionFailed", BACKEND_PRECONDITION_FAILED },
        { "ConditionalRequestConflict", BACKEND_COND_CONFLICT },
    };
    if (code && *code) {
        for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
            if (strcmp(code, map[i].code) == 0)
                return map[i].st;
        /* A refusal we have no name for (InvalidObjectState, a missing
         * sub-resource's NoSuchXxx, ...): the client gets it as it is. */
        if (http_status >= 400 && http_status < 500)
            return BACKEND_COLD_ERROR;
    }
    if (http_status >= 200 && http_status < 300)
        return BACKEND_OK;
    if (http_status == 404)
        return BACKEND_NO_KEY;
    if (http_status == 403)
        return BACKEND_DENIED;
    if (http_status == 416)
        return BACKEND_BAD_RANGE;
    if (http_status == 412)
        return BACKEND_PRECONDITION_FAILED;
    if (http_status >= 500)
        return BACKEND_UNAVAILABLE;
    return BACKEND_IO;
}

bool s3_cond_line(const struct backend_cond *c, char line[S3_COND_LINE_MAX])
{
    if (!c || c->kind == BACKEND_COND_NONE)
        return false;
    if (c->kind == BACKEND_COND_ABSENT)
        snprintf(line, S3_COND_LINE_MAX, "If-None-Match: *");
    else if (strcmp(c->etag, "*") == 0)
        snprintf(line, S3_COND_LINE_MAX, "If-Match: *");
    else
        snprintf(line, S3_COND_LINE_MAX, "If-Match: \"%.71s\"", c->etag);
    return true;
}

bool s3_retryable(const char *code, long http_status)
{
    if (code && (strcmp(code, "SlowDown") == 0 || strcmp(code, "InternalError") == 0 ||
                 strcmp(code, "RequestTimeout") == 0 || strcmp(code, "ServiceUnavailable") == 0))
        return true;
    return http_status == 500 || http_status == 502 || http_status == 503 ||
           http_status == 504;
}

uint64_t s3_backoff_ms(unsigned attempt, uint64_t base_ms, uint64_t cap_ms, uint64_t rnd)
{
    uint64_t ceil = base_ms;
    for (unsigned i = 0; i < attempt && ceil < cap_ms; i++)
        ceil *= 2;
    if (ceil > cap_ms)
        ceil = cap_ms;
    return rnd % (ceil + 1);
}

bool s3_stored_header(const char *name)
{
    static const char *const fixed[] = {
        "content-type", "content-encoding", "content-disposition", "cache-control",
        "expires", "content-language",
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (strcmp(name, fixed[i]) == 0)
            return true;
    /* OBJ_TAGGING_HDR: a put's tag set, sent as S3's x-amz-tagging header */
    return strncmp(name, "x-amz-meta-", 11) == 0 || strncmp(name, "x-amz-checksum-", 15) == 0 ||
           strcmp(name, OBJ_TAGGING_HDR) == 0;
}

void s3_etag_bare(const char *in, char out[72])
{
    size_t l = strlen(in);
    if (l >= 2 && in[0] == '"' && in[l - 1] == '"') {
        in++;
        l -= 2;
    }
    if (l > 71)
        l = 71;
    memcpy(out, in, l);
    out[l] = '\0';
}

int s3_parse_iso8601(const char *s, struct timespec *ts)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    int ms = 0, used = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used) != 6)
        return -1;
    const char *p = s + used;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (digits < 3)
                ms = ms * 10 + (*p - '0');
        for (; digits < 3; digits++)
            ms *= 10;
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t t = timegm(&tm);
    if (t == (time_t)-1)
        return -1;
    ts->tv_sec = t;
    ts->tv_nsec = (long)ms * 1000000L;
    return 0;
}

int s3_meta_from_headers(const struct obj_meta *resp, struct obj_meta *m)
{
    for (size_t i = 0; i < resp->n_hdrs; i++) {
        const char *n = resp->hdrs[i].name, *v = resp->hdrs[i].value;
        if (strcmp(n, "content-length") == 0) {
            m->size = strtoull(v, NULL, 10);
        } else if (strcmp(n, "etag") == 0) {
            s3_etag_bare(v, m->etag);
        } else if (strcmp(n, "last-modified") == 0) {
            time_t t = curl_getdate(v, NULL);
            if (t != (time_t)-1) {
                m->mtime.tv_sec = t;
                m->mtime.tv_nsec = 0;
            }
        } else if ((s3_stored_header(n) || strcmp(n, OBJ_TAGGING_COUNT_HDR) == 0) &&
                   !obj_meta_get_hdr(m, n)) {
            /* the count of the object's tags is answered on GET/HEAD */
            if (obj_meta_add_hdr(m, n, v) != 0)
                return -1;
        }
    }
    return 0;
}

int s3_ring_init(struct s3_ring *r, size_t cap)
{
    memset(r, 0, sizeof *r);
    r->buf = malloc(cap ? cap : 1);
    if (!r->buf)
        return -1;
    r->cap = cap;
    return 0;
}

void s3_ring_free(struct s3_ring *r)
{
    free(r->buf);
    memset(r, 0, sizeof *r);
}

bool s3_ring_put(struct s3_ring *r, const void *buf, size_t len)
{
    if (len > r->cap - r->len)
        return false;
    size_t tail = (r->head + r->len) % (r->cap ? r->cap : 1);
    size_t first = r->cap - tail < len ? r->cap - tail : len;
    memcpy(r->buf + tail, buf, first);
    memcpy(r->buf, (const unsigned char *)buf + first, len - first);
    r->len += len;
    return true;
}

size_t s3_ring_get(struct s3_ring *r, void *out, size_t len)
{
    size_t n = len < r->len ? len : r->len;
    size_t first = r->cap - r->head < n ? r->cap - r->head : n;
    if (out) {
        memcpy(out, r->buf + r->head, first);
        memcpy((unsigned char *)out + first, r->buf, n - first);
    }
    r->len -= n;
    r->head = r->len ? (r->head + n) % r->cap : 0;
    return n;
}

enum s3_read_path s3_read_path_pick(bool stream_usable, uint64_t stream_pos, uint64_t off)
{
    if (!stream_usable || off < stream_pos)
        return S3_READ_RANGED;
    if (off == stream_pos)
        return S3_READ_STREAM;
    return off - stream_pos <= S3_STREAM_SKIP_MAX ? S3_READ_SKIP : S3_READ_RANGED;
}

/* Appends "&name=value" (value encoded) to a query being built. */
int s3_query_add(char **q, const char *name, const char *value)
{
    char *ev = s3_uri_encode(value, false);
    char *n = NULL;
    if (!ev || asprintf(&n, "%s%s%s=%s", *q ? *q : "", *q ? "&" : "", name, ev) < 0) {
        free(ev);
        return -1;
    }
    free(ev);
    free(*q);
    *q = n;
    return 0;
}

enum backend_status s3_key_check(const char *key)
{
    size_t l = strlen(key);
    if (l == 0)
        return BACKEND_BAD_KEY;
    return l > 1024 ? BACKEND_KEY_TOO_LONG : BACKEND_OK;
}

char *s3_header_line(const char *name, const char *value)
{
    char *line = NULL;
    int n = value[0] ? asprintf(&line, "%s: %s", name, value) : asprintf(&line, "%s;", name);
    if (n < 0)
        return NULL;
    return line;
}

/* Appends "name: value" of the stored headers of meta; skip_checksums drops
 * x-amz-checksum-<algo> values (they describe the whole object, not what a
 * multipart create carries) but keeps a create's x-amz-checksum-algorithm and
 * x-amz-checksum-type, which the cold S3 then enforces. 0 or -1. */
int s3_add_meta_headers(struct curl_slist **hl, const struct obj_meta *m,
                        bool skip_checksums)
{
    bool has_ct = false;
    for (size_t i = 0; m && i < m->n_hdrs; i++) {
        const char *n = m->hdrs[i].name;
        bool upload_setting = strcmp(n, "x-amz-checksum-algorithm") == 0 ||
                              strcmp(n, "x-amz-checksum-type") == 0;
        if (!s3_stored_header(n) || (upload_setting && !skip_checksums))
            continue;
        if (skip_checksums && !upload_setting && strncmp(n, "x-amz-checksum-", 15) == 0)
            continue;
        has_ct |= strcmp(n, "content-type") == 0;
        char *line = s3_header_line(n, m->hdrs[i].value);
        if (!line)
            return -1;
        struct curl_slist *t = curl_slist_append(*hl, line);
        free(line);
        if (!t)
            return -1;
        *hl = t;
    }
    if (!has_ct) {
        /* Keep curl from adding a Content-Type of its own. */
        struct curl_slist *t = curl_slist_append(*hl, "Content-Type:");
        if (!t)
            return -1;
        *hl = t;
    }
    return 0;
}

/* x-amz-copy-source: /bucket/key, the key URI-encoded. */
char *s3_copy_source_header(const char *cbucket, const char *key)
{
    char *ek = s3_uri_encode(key, true);
    char *h = NULL;
    if (ek && asprintf(&h, "x-amz-copy-source: /%s/%s", cbucket, ek) < 0)
        h = NULL;
    free(ek);
    return h;
}

/* ---- signing (SigV4, common/sigv4.c) ---- */

/* Splits a request header line as curl reads it: "Name: value" is sent;
 * "Name:" with nothing after only stops curl sending a header of its own, so
 * it is not sent and not signed; "name;" is curl's form of an empty header,
 * sent as "name:". True for a line that is sent, with the name's length and
 * the value (leading blanks skipped; "" for the empty form). */
static bool header_split(const char *line, size_t *name_len, const char **value)
{
    const char *sep = strchr(line, ':');
    if (!sep) {
        sep = strchr(line, ';');
        if (!sep || sep[1 + strspn(sep + 1, " \t")])
            return false;             /* no separator, or not the empty form */
    }
    const char *v = sep + 1 + strspn(sep + 1, " \t");
    if (sep == line || (*sep == ':' && !*v))
        return false;
    *name_len = (size_t)(sep - line);
    *value = v;
    return true;
}

/* Appends a copy of line to *l; false (l unchanged) when out of memory or
 * line is NULL. */
static bool slist_add(struct curl_slist **l, const char *line)
{
    struct curl_slist *t = line ? curl_slist_append(*l, line) : NULL;
    if (t)
        *l = t;
    return t != NULL;
}

static int name_cmp(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

struct curl_slist *s3_sign(const struct s3_store *s, const char *method, const char *url,
                           const struct curl_slist *hl, time_t now)
{
    /* what curl sends: Host (ours, below), the path as is (PATH_AS_IS), the query */
    const char *hs = strstr(url, "://");
    if (!hs)
        return NULL;
    hs += 3;
    size_t alen = strcspn(hs, "/?");
    const char *pq = hs + alen;
    for (const char *at; (at = memchr(hs, '@', alen)) != NULL; hs = at + 1)
        alen -= (size_t)(at + 1 - hs);   /* user info is not part of Host */
    size_t plen = strcspn(pq, "?");
    size_t n = 2;
    for (const struct curl_slist *e = hl; e; e = e->next)
        n++;
    struct sg_sigv4_hdr *h = calloc(n, sizeof *h);
    char **names = calloc(n, sizeof *names);       /* lower-cased, owned */
    const char **sorted = calloc(n, sizeof *sorted);
    char *host = strndup(hs, alen), *path = strndup(pq, plen);
    struct sg_buf sh, line;
    sg_buf_init(&sh, SG_SIGV4_CANON_MAX);
    sg_buf_init(&line, SG_SIGV4_CANON_MAX);
    struct curl_slist *out = NULL;
    uint8_t key[32];
    bool have_key = false, signed_ok = false;
    if (!h || !names || !sorted || !host || !path)
        goto out;
    char date[17], date8[9], scope[160], sig[65];
    sg_sigv4_amz_date(now, date);
    memcpy(date8, date, 8);
    date8[8] = '\0';
    snprintf(scope, sizeof scope, "%s/%s/s3/aws4_request", date8, s->region);
    h[0] = (struct sg_sigv4_hdr){ "host", host };
    h[1] = (struct sg_sigv4_hdr){ "x-amz-date", date };
    size_t nh = 2;
    const char *payload = NULL;
    for (const struct curl_slist *e = hl; e; e = e->next) {
        size_t nl;
        const char *v;
        if (!header_split(e->data, &nl, &v))
            continue;
        if (!(names[nh] = strndup(e->data, nl)))
            goto out;
        for (char *c = names[nh]; *c; c++)
            *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
        if (strcmp(names[nh], "x-amz-content-sha256") == 0)
            payload = v;
        h[nh] = (struct sg_sigv4_hdr){ names[nh], v };
        nh++;
    }
    assert(payload);   /* s3_call_hdr_list adds it to every request */
    /* SignedHeaders: every name sent, sorted, once */
    for (size_t i = 0; i < nh; i++)
        sorted[i] = h[i].name;
    qsort(sorted, nh, sizeof *sorted, name_cmp);
    for (size_t i = 0; i < nh; i++) {
        if (i && strcmp(sorted[i], sorted[i - 1]) == 0)
            continue;
        if (sh.len)
            sg_buf_addc(&sh, ';');
        sg_buf_adds(&sh, sorted[i]);
    }
    if (sh.err || sg_sigv4_signing_key(s->secret, date8, s->region, "s3", key) != 0)
        goto out;
    have_key = true;
    struct sg_sigv4_req r = { method, path, pq[plen] == '?' ? pq + plen + 1 : "", h, nh };
    if (sg_sigv4_sign(&r, false, sh.p, payload ? payload : "UNSIGNED-PAYLOAD", date, scope, key,
                      sig) != 0)
        goto out;
    for (const struct curl_slist *e = hl; e; e = e->next)
        if (!slist_add(&out, e->data))
            goto out;
    sg_buf_adds(&line, "Host: ");
    sg_buf_adds(&line, host);
    if (!slist_add(&out, line.err ? NULL : line.p))
        goto out;
    sg_buf_free(&line);
    sg_buf_adds(&line, "x-amz-date: ");
    sg_buf_adds(&line, date);
    if (!slist_add(&out, line.err ? NULL : line.p))
        goto out;
    sg_buf_free(&line);
    sg_buf_adds(&line, "Authorization: " SG_SIGV4_ALGO " Credential=");
    sg_buf_adds(&line, s->access);
    sg_buf_addc(&line, '/');
    sg_buf_adds(&line, scope);
    sg_buf_adds(&line, ", SignedHeaders=");
    sg_buf_adds(&line, sh.p);
    sg_buf_adds(&line, ", Signature=");
    sg_buf_adds(&line, sig);
    if (!slist_add(&out, line.err ? NULL : line.p))
        goto out;
    signed_ok = true;
out:
    if (!signed_ok) {
        curl_slist_free_all(out);
        out = NULL;
    }
    if (have_key)
        OPENSSL_cleanse(key, sizeof key);
    for (size_t i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
    free(sorted);
    free(h);
    free(host);
    free(path);
    sg_buf_free(&sh);
    sg_buf_free(&line);
    return out;
}
