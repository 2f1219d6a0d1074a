/* gateway/http.c - HTTP details the S3 handlers share: Range parsing, dates,
 * conditional requests and percent-decoding. Pure functions, unit-tested in
 * tests/unit/test_gw_http.c. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "encoding.h"
#include "gw_int.h"

/* Parses a decimal uint64 at *p, advancing it; false on no digits / overflow. */
static bool parse_u64(const char **p, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    if (!isdigit((unsigned char)*s))
        return false;
    for (; isdigit((unsigned char)*s); s++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *p = s;
    *out = v;
    return true;
}

enum gw_range_result gw_range_parse(const char *hdr, uint64_t size, struct gw_range *out)
{
    out->present = false;
    if (!hdr)
        return GW_RANGE_NONE;
    while (*hdr == ' ')
        hdr++;
    if (strncasecmp(hdr, "bytes=", 6) != 0)
        return GW_RANGE_NONE;
    const char *p = hdr + 6;
    while (*p == ' ')
        p++;
    uint64_t first = 0, last = 0;
    bool suffix = false, open_end = false;
    if (*p == '-') {
        p++;
        if (!parse_u64(&p, &last))
            return GW_RANGE_NONE;
        suffix = true;
    } else {
        if (!parse_u64(&p, &first) || *p != '-')
            return GW_RANGE_NONE;
        p++;
        if (*p == '\0' || *p == ' ')
            open_end = true;
        else if (!parse_u64(&p, &last))
            return GW_RANGE_NONE;
    }
    while (*p == ' ')
        p++;
    if (*p != '\0')   /* several ranges, or junk: S3 serves the whole object */
        return GW_RANGE_NONE;
    if (suffix) {
        if (last == 0)
            return GW_RANGE_UNSATISFIABLE;
        if (size == 0)
            return GW_RANGE_NONE;   /* S3 answers 200 with the empty object */
        out->first = last >= size ? 0 : size - last;
        out->last = size - 1;
    } else {
        if (!open_end && last < first)
            return GW_RANGE_NONE;   /* syntactically invalid: ignored */
        if (first >= size)
            return GW_RANGE_UNSATISFIABLE;
        out->first = first;
        out->last = open_end || last >= size ? size - 1 : last;
    }
    out->present = true;
    return GW_RANGE_OK;
}

void gw_http_date(time_t t, char *buf, size_t len)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

void gw_iso_date(const struct timespec *ts, char *buf, size_t len)
{
    struct tm tm;
    gmtime_r(&ts->tv_sec, &tm);
    snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             ts->tv_nsec / 1000000);
}

int gw_http_date_parse(const char *s, time_t *out)
{
    static const char *const fmts[] = {
        "%a, %d %b %Y %H:%M:%S GMT",   /* RFC 1123 */
        "%A, %d-%b-%y %H:%M:%S GMT",   /* RFC 850 */
        "%a %b %e %H:%M:%S %Y",        /* asctime */
        "%Y-%m-%dT%H:%M:%SZ",          /* ISO 8601, some clients send it */
        "%Y-%m-%dT%H:%M:%S.000Z",
    };
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        struct tm tm;
        memset(&tm, 0, sizeof tm);
        const char *end = strptime(s, fmts[i], &tm);
        if (end && *end == '\0') {
            *out = timegm(&tm);
            return 0;
        }
    }
    return -1;
}

/* Does the If-Match / If-None-Match list `hdr` name `etag` (bare)? */
static bool etag_list_matches(const char *hdr, const char *etag)
{
    size_t elen = strlen(etag);
    const char *p = hdr;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p)
            break;
        if (*p == '*')
            return true;
        if (p[0] == 'W' && p[1] == '/')
            p += 2;
        bool quoted = *p == '"';
        if (quoted)
            p++;
        const char *start = p;
        while (*p && (quoted ? *p != '"' : (*p != ',' && *p != ' ')))
            p++;
        if ((size_t)(p - start) == elen && strncasecmp(start, etag, elen) == 0)
            return true;
        if (quoted && *p == '"')
            p++;
    }
    return false;
}

bool gw_conditions_fail(const struct gw_req *r, bool copy, const char *etag, time_t mtime,
                        enum s3_err *err)
{
    /* the names a GET's conditions and a copy source's go by */
    static const char *const names[2][4] = {
        { "if-match", "if-unmodified-since", "if-none-match", "if-modified-since" },
        { "x-amz-copy-source-if-match", "x-amz-copy-source-if-unmodified-since",
          "x-amz-copy-source-if-none-match", "x-amz-copy-source-if-modified-since" },
    };
    time_t t;
    const char *im = gw_req_header(r, names[copy][0]);
    const char *ius = gw_req_header(r, names[copy][1]);
    const char *inm = gw_req_header(r, names[copy][2]);
    const char *ims = gw_req_header(r, names[copy][3]);

    /* If-Match wins over If-Unmodified-Since: when it holds, the date is not
     * looked at (S3 and RFC 7232 agree). */
    if (im) {
        if (!etag_list_matches(im, etag)) {
            *err = S3E_PRECONDITION_FAILED;
            return true;
        }
    } else if (ius && gw_http_date_parse(ius, &t) == 0 && mtime > t) {
        *err = S3E_PRECONDITION_FAILED;
        return true;
    }
    /* Likewise If-None-Match wins over If-Modified-Since. A copy source
     * condition fails with 412, a GET's with 304. */
    if (inm) {
        if (etag_list_matches(inm, etag)) {
            *err = copy ? S3E_PRECONDITION_FAILED : S3E_NOT_MODIFIED;
            return true;
        }
    } else if (ims && gw_http_date_parse(ims, &t) == 0 && mtime <= t) {
        *err = copy ? S3E_PRECONDITION_FAILED : S3E_NOT_MODIFIED;
        return true;
    }
    return false;
}

/* s without the blanks around it into buf (cap bytes); false when longer. */
static bool trimmed(const char *s, char *buf, size_t cap)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (n >= cap)
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return true;
}

int gw_write_cond(const struct gw_req *r, struct backend_cond *out, enum s3_err *err)
{
    memset(out, 0, sizeof *out);
    const char *im = gw_req_header(r, "if-match");
    const char *inm = gw_req_header(r, "if-none-match");
    char v[80];
    if (im && inm) {
        *err = S3E_NOT_IMPLEMENTED;
        return -1;
    }
    if (inm) {
        if (!trimmed(inm, v, sizeof v) || strcmp(v, "*") != 0) {
            *err = S3E_NOT_IMPLEMENTED;
            return -1;
        }
        out->kind = BACKEND_COND_ABSENT;
        return 0;
    }
    if (!im)
        return 0;
    out->kind = BACKEND_COND_ETAG;
    /* S3 compares the value without its quotes; one too long for any ETag
     * matches none (an empty etag), yet still answers NoSuchKey for a
     * missing key. */
    if (!trimmed(im, v, sizeof v))
        return 0;
    size_t n = strlen(v);
    const char *e = v;
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
        v[n - 1] = '\0';
        e = v + 1;
    }
    size_t el = strlen(e);
    if (el < sizeof out->etag && !strchr(e, '"'))
        memcpy(out->etag, e, el + 1);
    return 0;
}

char *gw_pct_decode(struct gw_arena *a, const char *s, size_t n, bool plus_is_space)
{
    char *out = gw_arena_alloc(a, n + 1);
    if (!out)
        return NULL;
    long len = sg_pct_decode_strict(s, n, out, plus_is_space);
    if (len < 0 || memchr(out, '\0', (size_t)len))
        return NULL;
    out[len] = '\0';
    return out;
}

int gw_content_encoding_stored(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    const char *p = in;
    for (;;) {   /* one comma-separated segment per turn, kept with its spaces */
        const char *s = p, *e = strchr(p, ',');
        if (!e)
            e = p + strlen(p);
        const char *ts = s, *te = e;
        while (ts < te && (*ts == ' ' || *ts == '\t'))
            ts++;
        while (te > ts && (te[-1] == ' ' || te[-1] == '\t'))
            te--;
        bool drop = te - ts == 11 && strncasecmp(ts, "aws-chunked", 11) == 0;
        if (!drop && te > ts) {
            if (!o)
                s = ts;   /* the value starts at its first token */
            size_t len = (size_t)(e - s) + (o ? 1 : 0);
            if (o + len >= cap)
                return -1;
            if (o)
                out[o++] = ',';
            memcpy(out + o, s, (size_t)(e - s));
            o += (size_t)(e - s);
        }
        if (!*e)
            break;
        p = e + 1;
    }
    while (o && (out[o - 1] == ' ' || out[o - 1] == '\t'))
        o--;
    if (cap)
        out[o] = '\0';
    return cap ? 0 : -1;
}
