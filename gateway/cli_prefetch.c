/* gateway/cli_prefetch.c - the client side of the prefetch hint API
 * (cache/HINTS.md): `shardgate prefetch` sends a hint and can wait for its
 * job, `shardgate jobs` lists, shows and cancels jobs. One blocking libcurl
 * request at a time, signed by curl's own SigV4; JSON is written by hand and
 * read with a small validating scanner (no jansson outside conf/). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "cli.h"
#include "conf.h"

/* The gateway refuses hint bodies over 16 MiB (HINTS.md): refusing them here
 * saves sending them. Answers are small JSON documents; 8 MiB is far more
 * than a bucket's job list with 20 errors per job needs. */
#define CLI_BODY_MAX ((size_t)16 << 20)
#define CLI_ANSWER_MAX ((size_t)8 << 20)
#define CLI_POLL_NS 500000000L          /* --wait polls every 0.5 s */
#define CLI_PLAIN_EVERY_S 2.0           /* a non-terminal gets a line at most every 2 s */
#define CLI_POLL_RETRIES 5              /* transport failures in a row while waiting */
#define JS_DEPTH_MAX 32

enum cli_exit {
    CLI_EXIT_OK = 0,
    CLI_EXIT_JOB_FAILED = 1,
    CLI_EXIT_USAGE = 2,
    CLI_EXIT_GATEWAY = 3,
    CLI_EXIT_INTERRUPTED = 130,
};

static const char prefetch_usage[] =
    "usage: shardgate prefetch --endpoint URL s3://BUCKET/PREFIX-OR-TEMPLATE [options]\n"
    "       shardgate prefetch --endpoint URL s3://BUCKET --keys-file FILE [options]\n"
    "\n"
    "Asks the gateway to stage objects into its cache ahead of the readers. The part\n"
    "after the bucket is a WebDataset-style template when it contains '{'\n"
    "(train/shard-{000000..001023}.tar; quote it so the shell leaves the braces alone),\n"
    "else a key prefix (empty: the whole bucket).\n"
    "\n"
    "  --endpoint URL        the gateway (default $SHARDGATE_ENDPOINT)\n"
    "  --keys-file FILE      the keys to stage, one per line, in reading order ('-': stdin)\n"
    "  --ordered             the reader reads the objects in this order\n"
    "  --epoch N             epoch number (shown in the job listing)\n"
    "  --consumer NAME       who reads them, e.g. rank0 (at most 128 bytes)\n"
    "  --window-bytes SIZE   ordered: stay at most SIZE ahead of the reader (e.g. 8GiB)\n"
    "  --window-objects N    ordered: ... and at most N objects ahead\n"
    "  --pin                 keep staged objects out of eviction while the job is active\n"
    "  --wait                follow the job until it ends, showing progress\n"
    "  --json                print the gateway's JSON answer instead of a summary\n"
    "  --region NAME         signing region (default $AWS_REGION, else us-east-1)\n"
    "\n"
    "Credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (AWS_SESSION_TOKEN), else\n"
    "SHARDGATE_ACCESS_KEY / SHARDGATE_SECRET_KEY.\n"
    "Exit status: 0 accepted (with --wait: job done), 1 job failed or cancelled,\n"
    "2 usage error, 3 the gateway answered an error or could not be reached.\n";

static const char jobs_usage[] =
    "usage: shardgate jobs --endpoint URL s3://BUCKET [--job ID | --cancel ID] [--json]\n"
    "\n"
    "Lists the bucket's prefetch jobs (newest first), shows one job (--job) or\n"
    "cancels one (--cancel). Endpoint, credentials, --region and exit status as for\n"
    "`shardgate prefetch --help`.\n";

/* ---------------------------------------------------------------- buffers */

/* A growable byte buffer with a cap fixed at creation; always NUL-terminated
 * when p != NULL. Hitting the cap (or ENOMEM) sets `over` and drops the data. */
struct cli_buf {
    char *p;
    size_t len, cap, max;
    bool over;
};

static void buf_init(struct cli_buf *b, size_t max)
{
    *b = (struct cli_buf){ .max = max };
}

static void buf_free(struct cli_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static bool buf_add(struct cli_buf *b, const void *d, size_t n)
{
    if (b->over)
        return false;
    if (n > b->max || b->len > b->max - n) {
        b->over = true;
        return false;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->over = true;
            return false;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
    b->p[b->len] = '\0';
    return true;
}

static bool buf_adds(struct cli_buf *b, const char *s)
{
    return buf_add(b, s, strlen(s));
}

__attribute__((format(printf, 2, 3)))
static bool buf_printf(struct cli_buf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        b->over = true;
        return false;
    }
    return buf_add(b, tmp, (size_t)n);
}

/* Appends s[0..n) as a JSON string literal. Bytes >= 0x80 pass through (keys
 * are UTF-8; the gateway refuses invalid JSON with a message). */
static bool buf_json_str(struct cli_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    buf_add(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default: break;
        }
        if (esc) {
            buf_adds(b, esc);
        } else if (c < 0x20 || c == 0x7f) {
            char u[7] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0 };
            buf_add(b, u, 6);
        } else {
            buf_add(b, &s[i], 1);
        }
    }
    return buf_add(b, "\"", 1);
}

/* ---------------------------------------------------------------- JSON reading */

/* A validating skip over one JSON value and lookups on top of it. Every
 * function takes a pointer into a NUL-terminated document and returns NULL
 * when the input is not what it expects, so a hostile or truncated answer
 * can only produce "malformed answer", never a read past the end. */

static const char *js_ws(const char *p)
{
    while (p && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

static const char *js_skip_string(const char *p)
{
    if (*p != '"')
        return NULL;
    for (p++; *p && *p != '"'; p++)
        if (*p == '\\' && !*++p)
            return NULL;
    return *p == '"' ? p + 1 : NULL;
}

static const char *js_skip_depth(const char *p, int depth)
{
    p = js_ws(p);
    if (!p || depth > JS_DEPTH_MAX)
        return NULL;
    if (*p == '"')
        return js_skip_string(p);
    if (*p == '{' || *p == '[') {
        bool obj = *p == '{';
        char close = obj ? '}' : ']';
        p = js_ws(p + 1);
        if (*p == close)
            return p + 1;
        for (;;) {
            if (obj) {
                p = js_ws(js_skip_string(p));
                if (!p || *p != ':')
                    return NULL;
                p++;
            }
            p = js_ws(js_skip_depth(p, depth + 1));
            if (!p)
                return NULL;
            if (*p == close)
                return p + 1;
            if (*p != ',')
                return NULL;
            p = js_ws(p + 1);
        }
    }
    /* number, true, false, null */
    const char *s = p;
    while (*p && strchr("+-.0123456789eEtrufalsn", *p))
        p++;
    return p > s ? p : NULL;
}

static const char *js_skip(const char *p)
{
    return js_skip_depth(p, 0);
}

/* Decodes the JSON string at v into out (at most n-1 bytes, always
 * terminated). Control characters become '?': everything decoded here is
 * printed to a terminal. Returns false when v is not a string. */
static bool js_str(const char *v, char *out, size_t n)
{
    size_t o = 0;
    v = js_ws(v);
    if (!v || *v != '"' || n == 0)
        return false;
    for (v++; *v && *v != '"'; v++) {
        char tmp[4];
        size_t tn = 1;
        unsigned char c = (unsigned char)*v;
        if (c == '\\') {
            v++;
            switch (*v) {
            case 'n': case 'r': case 't': case 'b': case 'f': tmp[0] = '?'; break;
            case 'u': {
                unsigned cp = 0;
                for (int i = 1; i <= 4; i++) {
                    char h = v[i];
                    unsigned d = h >= '0' && h <= '9' ? (unsigned)(h - '0')
                               : h >= 'a' && h <= 'f' ? (unsigned)(h - 'a' + 10)
                               : h >= 'A' && h <= 'F' ? (unsigned)(h - 'A' + 10) : 16u;
                    if (d == 16)
                        return false;
                    cp = cp * 16 + d;
                }
                v += 4;
                /* a surrogate pair would need a second escape: show '?' */
                if (cp < 0x20 || cp == 0x7f || (cp >= 0xd800 && cp <= 0xdfff)) {
                    tmp[0] = '?';
                } else if (cp < 0x80) {
                    tmp[0] = (char)cp;
                } else if (cp < 0x800) {
                    tmp[0] = (char)(0xc0 | (cp >> 6));
                    tmp[1] = (char)(0x80 | (cp & 0x3f));
                    tn = 2;
                } else {
                    tmp[0] = (char)(0xe0 | (cp >> 12));
                    tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
                    tmp[2] = (char)(0x80 | (cp & 0x3f));
                    tn = 3;
                }
                break;
            }
            case '\0':
                return false;
            default:
                tmp[0] = *v;     /* \" \\ \/ */
                break;
            }
        } else {
            tmp[0] = c < 0x20 || c == 0x7f ? '?' : (char)c;
        }
        if (o + tn < n) {
            memcpy(out + o, tmp, tn);
            o += tn;
        }
    }
    out[o] = '\0';
    return *v == '"';
}

/* The value of member `name` of the object at obj, or NULL. */
static const char *js_get(const char *obj, const char *name)
{
    const char *p = js_ws(obj);
    if (!p || *p != '{')
        return NULL;
    p = js_ws(p + 1);
    while (p && *p == '"') {
        char key[64];
        bool ok = js_str(p, key, sizeof key);
        p = js_ws(js_skip_string(p));
        if (!ok || !p || *p != ':')
            return NULL;
        p = js_ws(p + 1);
        if (strcmp(key, name) == 0)
            return p;
        p = js_ws(js_skip(p));
        if (!p || *p != ',')
            return NULL;
        p = js_ws(p + 1);
    }
    return NULL;
}

static bool js_num(const char *v, double *out)
{
    v = js_ws(v);
    if (!v || !(*v == '-' || (*v >= '0' && *v <= '9')))
        return false;      /* null, a string, absent */
    char *end;
    double d = strtod(v, &end);
    if (end == v)
        return false;
    *out = d;
    return true;
}

static bool js_true(const char *v)
{
    v = js_ws(v);
    return v && strncmp(v, "true", 4) == 0;
}

/* First element of the array at arr, or NULL (empty, not an array). */
static const char *js_first(const char *arr)
{
    arr = js_ws(arr);
    if (!arr || *arr != '[')
        return NULL;
    arr = js_ws(arr + 1);
    return *arr == ']' ? NULL : arr;
}

static const char *js_next(const char *elem)
{
    const char *p = js_ws(js_skip(elem));
    if (!p || *p != ',')
        return NULL;
    return js_ws(p + 1);
}

/* ---------------------------------------------------------------- the job */

struct cli_job {
    char id[128], bucket[80], state[16], consumer[160], created[40], ended[40];
    bool ordered, has_epoch, has_rate, has_eta, has_position;
    double epoch, position, rate, eta;
    double total, cached, staged, failed, pending;   /* objects */
    double bytes_total, bytes_done;
};

/* Reads a <job> (or the POST answer, whose "objects" is a plain count).
 * Returns false when it is not an object with a "job" id. */
static bool job_parse(const char *v, struct cli_job *j)
{
    memset(j, 0, sizeof *j);
    if (!js_str(js_get(v, "job"), j->id, sizeof j->id) || !j->id[0])
        return false;
    js_str(js_get(v, "bucket"), j->bucket, sizeof j->bucket);
    if (!js_str(js_get(v, "state"), j->state, sizeof j->state))
        strcpy(j->state, "?");
    js_str(js_get(v, "consumer"), j->consumer, sizeof j->consumer);
    js_str(js_get(v, "created"), j->created, sizeof j->created);
    js_str(js_get(v, "ended"), j->ended, sizeof j->ended);
    j->ordered = js_true(js_get(v, "ordered"));
    j->has_epoch = js_num(js_get(v, "epoch"), &j->epoch);
    j->has_position = js_num(js_get(v, "position"), &j->position);
    j->has_rate = js_num(js_get(v, "rate_bytes_per_s"), &j->rate);
    j->has_eta = js_num(js_get(v, "eta_s"), &j->eta);
    const char *o = js_get(v, "objects");
    if (!js_num(o, &j->total)) {
        js_num(js_get(o, "total"), &j->total);
        js_num(js_get(o, "cached"), &j->cached);
        js_num(js_get(o, "staged"), &j->staged);
        js_num(js_get(o, "failed"), &j->failed);
        js_num(js_get(o, "pending"), &j->pending);
    }
    const char *b = js_get(v, "bytes");
    js_num(js_get(b, "total"), &j->bytes_total);
    js_num(js_get(b, "done"), &j->bytes_done);
    return true;
}

static bool job_final(const struct cli_job *j)
{
    return strcmp(j->state, "done") == 0 || strcmp(j->state, "failed") == 0 ||
           strcmp(j->state, "cancelled") == 0;
}

/* 1.2 GiB: sizes in powers of 1024. */
static void fmt_bytes(double v, char *out, size_t n)
{
    static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < sizeof unit / sizeof unit[0]) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(out, n, "%.0f B", v);
    else
        snprintf(out, n, "%.1f %s", v, unit[u]);
}

/* 512 MB/s: rates in powers of 1000, as disks and links are quoted. */
static void fmt_rate(double v, char *out, size_t n)
{
    static const char *const unit[] = { "B/s", "kB/s", "MB/s", "GB/s", "TB/s" };
    size_t u = 0;
    while (v >= 1000.0 && u + 1 < sizeof unit / sizeof unit[0]) {
        v /= 1000.0;
        u++;
    }
    snprintf(out, n, v < 10.0 && u > 0 ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

/* "objects 120/1024 (cached 10, staged 110, failed 0) bytes 1.2 GiB/9.8 GiB
 *  512 MB/s eta 17 s"; rate and eta only while the gateway has a value (a
 *  zero rate at the start is no information). */
static void job_progress_line(const struct cli_job *j, char *out, size_t n)
{
    char done[32], total[32], rate[32];
    fmt_bytes(j->bytes_done, done, sizeof done);
    fmt_bytes(j->bytes_total, total, sizeof total);
    int w = snprintf(out, n, "objects %.0f/%.0f (cached %.0f, staged %.0f, failed %.0f) "
                     "bytes %s/%s", j->cached + j->staged + j->failed, j->total, j->cached,
                     j->staged, j->failed, done, total);
    if (w < 0 || (size_t)w >= n)
        return;
    if (j->has_rate && j->rate > 0 && !job_final(j)) {
        fmt_rate(j->rate, rate, sizeof rate);
        int w2 = snprintf(out + w, n - (size_t)w, " %s", rate);
        if (w2 < 0 || (size_t)w2 >= n - (size_t)w)
            return;
        w += w2;
    }
    if (j->has_eta && !job_final(j))
        snprintf(out + w, n - (size_t)w, " eta %.0f s", j->eta);
}

/* ---------------------------------------------------------------- HTTP */

struct cli_conn {
    CURL *curl;
    char *base;              /* endpoint + "/" + encoded bucket; owned */
    const char *bucket;      /* borrowed from argv */
    char sigv4[96];
    const char *access, *secret, *token, *ca;   /* borrowed from the environment */
};

struct cli_answer {
    long status;
    struct cli_buf body;
    char err[CURL_ERROR_SIZE];
};

static volatile sig_atomic_t cli_interrupted;

static void cli_on_sigint(int sig)
{
    (void)sig;
    cli_interrupted = 1;
}

static size_t cli_write_cb(char *d, size_t size, size_t nmemb, void *ud)
{
    struct cli_buf *b = ud;
    size_t n = size * nmemb;
    return buf_add(b, d, n) ? n : 0;
}

static int cli_xfer_cb(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)ud; (void)dt; (void)dn; (void)ut; (void)un;
    return cli_interrupted ? 1 : 0;     /* Ctrl-C ends a hung request too */
}

/* AWS URI encoding (RFC 3986 unreserved kept): the query must reach curl
 * already canonical, because curl 7.x signs the query string as written. */
static bool buf_uri_enc(struct cli_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~') {
            buf_add(b, s, 1);
        } else {
            char e[3] = { '%', hex[c >> 4], hex[c & 15] };
            buf_add(b, e, 3);
        }
    }
    return !b->over;
}

static void sha256_hex(const char *d, size_t n, char out[65])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (EVP_Digest(d, n, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32) {
        out[0] = '\0';
        return;
    }
    for (unsigned i = 0; i < 32; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[64] = '\0';
}

/* One request on c's handle (kept alive between polls). `query` must be
 * canonical (sorted, encoded, "name=" for a bare name). Returns 0 when an
 * HTTP answer arrived (any status; a->status, a->body), -1 otherwise with
 * the reason in a->err. a->body is reset here; the caller frees it. */
static int cli_request(struct cli_conn *c, const char *method, const char *query,
                       const char *body, size_t body_len, struct cli_answer *a)
{
    struct cli_buf url;
    struct curl_slist *hdrs = NULL, *h;
    char sha[65], line[128];
    int rc = -1;

    buf_free(&a->body);
    buf_init(&a->body, CLI_ANSWER_MAX);
    a->status = 0;
    a->err[0] = '\0';
    buf_init(&url, 8192);
    buf_adds(&url, c->base);
    buf_adds(&url, "?");
    buf_adds(&url, query);
    sha256_hex(body ? body : "", body ? body_len : 0, sha);
    if (url.over || !sha[0]) {
        snprintf(a->err, sizeof a->err, "out of memory");
        goto out;
    }
    /* curl signs every x-amz-* header it is given, so the payload hash and
     * the session token are covered by the signature */
    snprintf(line, sizeof line, "x-amz-content-sha256: %s", sha);
    bool hdr_ok = (h = curl_slist_append(hdrs, line)) != NULL;
    hdrs = h ? h : hdrs;
    if (hdr_ok && body) {
        hdr_ok = (h = curl_slist_append(hdrs, "Content-Type: application/json")) != NULL;
        hdrs = h ? h : hdrs;
    }
    if (hdr_ok && c->token) {
        struct cli_buf t;
        buf_init(&t, 8192);
        buf_adds(&t, "x-amz-security-token: ");
        buf_adds(&t, c->token);
        hdr_ok = !t.over && (h = curl_slist_append(hdrs, t.p)) != NULL;
        hdrs = hdr_ok ? h : hdrs;
        buf_free(&t);
    }
    if (!hdr_ok) {
        snprintf(a->err, sizeof a->err, "out of memory");
        goto out;
    }

    CURL *e = c->curl;
    curl_easy_reset(e);       /* keeps the live connection */
    curl_easy_setopt(e, CURLOPT_URL, url.p);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
    curl_easy_setopt(e, CURLOPT_AWS_SIGV4, c->sigv4);
    curl_easy_setopt(e, CURLOPT_USERNAME, c->access);
    curl_easy_setopt(e, CURLOPT_PASSWORD, c->secret);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    /* expanding a million-object template takes the gateway a moment */
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 300000L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, a->err);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, cli_write_cb);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &a->body);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, cli_xfer_cb);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "shardgate-cli");
    if (c->ca)
        curl_easy_setopt(e, CURLOPT_CAINFO, c->ca);
    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? body_len : 0));
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    }
    CURLcode cc = curl_easy_perform(e);
    if (cc != CURLE_OK) {
        if (a->body.over)
            snprintf(a->err, sizeof a->err, "the answer is larger than %zu bytes",
                     CLI_ANSWER_MAX);
        else if (cli_interrupted)
            snprintf(a->err, sizeof a->err, "interrupted");
        else if (!a->err[0])
            snprintf(a->err, sizeof a->err, "%s", curl_easy_strerror(cc));
        goto out;
    }
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &a->status);
    if (!a->body.p)
        buf_add(&a->body, "", 0);     /* an empty body is still a string */
    rc = a->body.p ? 0 : -1;
out:
    curl_slist_free_all(hdrs);
    buf_free(&url);
    return rc;
}

/* Copies the text of <tag>...</tag> from an S3 error document into out,
 * decoding the five XML entities; control characters become '?'. */
static bool xml_field(const char *doc, const char *tag, char *out, size_t n)
{
    char open[40], close[40];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *s = strstr(doc, open);
    if (!s)
        return false;
    s += strlen(open);
    const char *e = strstr(s, close);
    if (!e)
        return false;
    static const struct { const char *ent; char c; } ents[] = {
        { "&lt;", '<' }, { "&gt;", '>' }, { "&amp;", '&' }, { "&quot;", '"' }, { "&apos;", '\'' },
    };
    size_t o = 0;
    while (s < e && o + 1 < n) {
        char c = *s++;
        if (c == '&') {
            for (size_t i = 0; i < sizeof ents / sizeof ents[0]; i++) {
                size_t l = strlen(ents[i].ent);
                if ((size_t)(e - (s - 1)) >= l && strncmp(s - 1, ents[i].ent, l) == 0) {
                    c = ents[i].c;
                    s += l - 1;
                    break;
                }
            }
        }
        out[o++] = (unsigned char)c < 0x20 ? '?' : c;
    }
    out[o] = '\0';
    return true;
}

/* Prints why a request failed; returns CLI_EXIT_GATEWAY. */
static int report_failure(const char *cmd, const struct cli_answer *a, int transport_rc)
{
    if (transport_rc != 0) {
        fprintf(stderr, "shardgate %s: %s\n", cmd, a->err);
        return CLI_EXIT_GATEWAY;
    }
    char code[128], msg[1024];
    const char *body = a->body.p ? a->body.p : "";
    if (xml_field(body, "Code", code, sizeof code)) {
        if (!xml_field(body, "Message", msg, sizeof msg))
            msg[0] = '\0';
        fprintf(stderr, "shardgate %s: the gateway answered %ld %s: %s\n", cmd, a->status,
                code, msg);
    } else {
        /* not S3 XML (a proxy, an old gateway): show the start of it */
        char snip[201];
        size_t k = 0;
        for (const char *p = body; *p && k < sizeof snip - 1; p++)
            snip[k++] = (unsigned char)*p < 0x20 ? ' ' : *p;
        snip[k] = '\0';
        fprintf(stderr, "shardgate %s: the gateway answered HTTP %ld%s%s\n", cmd, a->status,
                k ? ": " : "", snip);
    }
    return CLI_EXIT_GATEWAY;
}

/* A 2xx answer that is one well-formed JSON document. */
static bool answer_json(const struct cli_answer *a)
{
    if (a->status < 200 || a->status > 299 || !a->body.p)
        return false;
    const char *end = js_ws(js_skip(a->body.p));
    return end && *end == '\0';
}

/* A 2xx answer that is not the JSON the contract promises; returns
 * CLI_EXIT_GATEWAY. An older shardgate answers GET ?prefetch with a listing. */
static int report_malformed(const char *cmd, const struct cli_answer *a)
{
    const char *b = js_ws(a->body.p ? a->body.p : "");
    fprintf(stderr, "shardgate %s: malformed answer from the gateway (HTTP %ld)%s\n", cmd,
            a->status, *b == '<' ? ": XML, not JSON (a shardgate without prefetch hints?)"
                                 : "");
    return CLI_EXIT_GATEWAY;
}

/* ---------------------------------------------------------------- common options */

struct cli_common {
    const char *endpoint, *region, *bucket_url;
    bool json;
};

/* Splits s3://bucket[/rest]: bucket into out (NUL-terminated), *rest points
 * after the first '/' (or at ""). Returns false when it is not such a URL. */
static bool parse_s3_url(const char *u, char *bucket, size_t n, const char **rest)
{
    if (strncmp(u, "s3://", 5) != 0)
        return false;
    u += 5;
    size_t bl = strcspn(u, "/");
    if (bl == 0 || bl >= n)
        return false;
    memcpy(bucket, u, bl);
    bucket[bl] = '\0';
    *rest = u[bl] ? u + bl + 1 : u + bl;
    return true;
}

static bool region_ok(const char *r)
{
    size_t n = strlen(r);
    if (n == 0 || n > 64)
        return false;
    for (; *r; r++)
        if (!((*r >= 'a' && *r <= 'z') || (*r >= 'A' && *r <= 'Z') ||
              (*r >= '0' && *r <= '9') || *r == '-' || *r == '_'))
            return false;
    return true;
}

/* Sets up the connection: credentials, region, base URL. On failure prints
 * the reason and returns CLI_EXIT_USAGE (or CLI_EXIT_GATEWAY for curl). */
static int conn_open(const char *cmd, const struct cli_common *o, const char *bucket,
                     struct cli_conn *c)
{
    memset(c, 0, sizeof *c);
    const char *ep = o->endpoint ? o->endpoint : getenv("SHARDGATE_ENDPOINT");
    if (!ep || !*ep) {
        fprintf(stderr, "shardgate %s: --endpoint URL is required (or SHARDGATE_ENDPOINT)\n",
                cmd);
        return CLI_EXIT_USAGE;
    }
    if (strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0) {
        fprintf(stderr, "shardgate %s: the endpoint must be an http:// or https:// URL, "
                "not '%s'\n", cmd, ep);
        return CLI_EXIT_USAGE;
    }
    const char *region = o->region;
    if (!region)
        region = getenv("AWS_REGION");
    if (!region || !*region)
        region = getenv("AWS_DEFAULT_REGION");
    if (!region || !*region)
        region = "us-east-1";
    if (!region_ok(region)) {
        fprintf(stderr, "shardgate %s: bad region '%s'\n", cmd, region);
        return CLI_EXIT_USAGE;
    }
    c->access = getenv("AWS_ACCESS_KEY_ID");
    c->secret = getenv("AWS_SECRET_ACCESS_KEY");
    c->token = getenv("AWS_SESSION_TOKEN");
    if (!c->access || !*c->access || !c->secret || !*c->secret) {
        c->access = getenv("SHARDGATE_ACCESS_KEY");
        c->secret = getenv("SHARDGATE_SECRET_KEY");
        c->token = NULL;
    }
    if (c->token && !*c->token)
        c->token = NULL;
    if (!c->access || !*c->access || !c->secret || !*c->secret) {
        fprintf(stderr, "shardgate %s: no credentials: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (or SHARDGATE_ACCESS_KEY and SHARDGATE_SECRET_KEY)\n",
                cmd);
        return CLI_EXIT_USAGE;
    }
    c->ca = getenv("AWS_CA_BUNDLE");
    if (c->ca && !*c->ca)
        c->ca = NULL;
    snprintf(c->sigv4, sizeof c->sigv4, "aws:amz:%s:s3", region);
    c->bucket = bucket;

    struct cli_buf b;
    buf_init(&b, 8192);
    size_t el = strlen(ep);
    while (el > 0 && ep[el - 1] == '/')
        el--;
    buf_add(&b, ep, el);
    buf_adds(&b, "/");
    buf_uri_enc(&b, bucket);
    if (b.over) {
        buf_free(&b);
        fprintf(stderr, "shardgate %s: out of memory\n", cmd);
        return CLI_EXIT_GATEWAY;
    }
    c->base = b.p;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(c->curl = curl_easy_init())) {
        fprintf(stderr, "shardgate %s: cannot initialise libcurl\n", cmd);
        free(c->base);
        c->base = NULL;
        return CLI_EXIT_GATEWAY;
    }
    return CLI_EXIT_OK;
}

static void conn_close(struct cli_conn *c)
{
    if (c->curl) {
        curl_easy_cleanup(c->curl);
        curl_global_cleanup();
    }
    free(c->base);
    memset(c, 0, sizeof *c);
}

/* "job=ID&prefetch=" (canonical: sorted, encoded). */
static bool job_query(struct cli_buf *q, const char *id)
{
    buf_init(q, 4096);
    buf_adds(q, "job=");
    buf_uri_enc(q, id);
    buf_adds(q, "&prefetch=");
    return !q->over;
}

static void print_errors(FILE *f, const char *jobdoc)
{
    const char *e = js_first(js_get(jobdoc, "errors"));
    for (int n = 0; e; e = js_next(e), n++) {
        char key[1100], code[128];
        if (!js_str(js_get(e, "key"), key, sizeof key))
            strcpy(key, "?");
        if (!js_str(js_get(e, "code"), code, sizeof code))
            strcpy(code, "?");
        fprintf(f, "  %s: %s\n", key, code);
    }
}

/* ---------------------------------------------------------------- --wait */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static unsigned term_width(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20)
        return ws.ws_col;
    return 80;
}

/* Draws "[=====>    ]  45% <progress line>" over the previous one. */
static void draw_bar(const struct cli_job *j, size_t *prev_len)
{
    char line[512], prog[400];
    const int width = 20;
    job_progress_line(j, prog, sizeof prog);
    double frac = j->total > 0 ? (j->cached + j->staged + j->failed) / j->total : 0.0;
    if (frac > 1.0)
        frac = 1.0;
    int fill = (int)(frac * width);
    char bar[32];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
    if (fill >= width)
        bar[width - 1] = '=';
    bar[width] = '\0';
    snprintf(line, sizeof line, "[%s] %3d%% %s", bar, (int)(frac * 100.0), prog);
    size_t len = strlen(line);
    size_t maxw = term_width() - 1;  /* a wrapped line cannot be redrawn with \r */
    if (len > maxw) {
        line[maxw] = '\0';
        len = maxw;
    }
    printf("\r%s%*s", line, *prev_len > len ? (int)(*prev_len - len) : 0, "");
    fflush(stdout);
    *prev_len = len;
}

/* Polls the job until it is final; returns the exit code. */
static int wait_job(struct cli_conn *c, const char *id, bool json)
{
    struct cli_buf q;
    struct cli_answer a = { 0 };
    bool tty = isatty(STDOUT_FILENO) && !json;
    size_t prev_len = 0;
    double t0 = now_s(), last_print = -1e9;
    char last[400] = "";
    int fails = 0, rc = CLI_EXIT_GATEWAY;
    struct sigaction sa = { .sa_handler = cli_on_sigint }, old_int;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);

    if (!job_query(&q, id)) {
        fprintf(stderr, "shardgate prefetch: out of memory\n");
        goto out;
    }
    for (;;) {
        int tr = cli_request(c, "GET", q.p, NULL, 0, &a);
        if (cli_interrupted)
            break;
        if (tr != 0 && ++fails < CLI_POLL_RETRIES) {
            /* a gateway restart or a dropped connection: try again shortly */
        } else if (tr != 0 || !answer_json(&a)) {
            if (tty && prev_len)
                putchar('\n');
            if (tr == 0 && a.status >= 200 && a.status <= 299)
                report_malformed("prefetch", &a);
            else
                report_failure("prefetch", &a, tr);
            goto out;
        } else {
            struct cli_job j;
            fails = 0;
            if (!job_parse(a.body.p, &j)) {
                if (tty && prev_len)
                    putchar('\n');
                fprintf(stderr, "shardgate prefetch: malformed job in the gateway's answer\n");
                goto out;
            }
            bool fin = job_final(&j);
            if (json) {
                if (fin)
                    printf("%s\n", a.body.p);
            } else if (tty) {
                draw_bar(&j, &prev_len);
            } else {
                char line[400];
                job_progress_line(&j, line, sizeof line);
                double t = now_s();
                if (fin || (strcmp(line, last) != 0 && t - last_print >= CLI_PLAIN_EVERY_S)) {
                    printf("%s\n", line);
                    fflush(stdout);
                    snprintf(last, sizeof last, "%s", line);
                    last_print = t;
                }
            }
            if (fin) {
                if (tty)
                    putchar('\n');
                if (!json) {
                    char b[32];
                    fmt_bytes(j.bytes_done, b, sizeof b);
                    printf("job %s %s: %.0f objects (cached %.0f, staged %.0f, failed %.0f), "
                           "%s in %.1f s\n", j.id, j.state, j.total, j.cached, j.staged,
                           j.failed, b, now_s() - t0);
                }
                if (j.failed > 0 || strcmp(j.state, "failed") == 0) {
                    if (js_first(js_get(a.body.p, "errors")))
                        fprintf(stderr, "objects that could not be staged (first 20):\n");
                    print_errors(stderr, a.body.p);
                }
                rc = strcmp(j.state, "done") == 0 ? CLI_EXIT_OK : CLI_EXIT_JOB_FAILED;
                goto out;
            }
        }
        struct timespec ts = { 0, CLI_POLL_NS };
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !cli_interrupted)
            ;
        if (cli_interrupted)
            break;
    }
    /* interrupted: the job goes on in the gateway */
    if (tty && prev_len)
        putchar('\n');
    fflush(stdout);
    fprintf(stderr, "shardgate prefetch: stopped waiting; job %s continues in the gateway "
            "(cancel it with: shardgate jobs --endpoint ... s3://%s --cancel %s)\n",
            id, c->bucket, id);
    rc = CLI_EXIT_INTERRUPTED;
out:
    sigaction(SIGINT, &old_int, NULL);
    buf_free(&q);
    buf_free(&a.body);
    return rc;
}

/* ---------------------------------------------------------------- prefetch */

static bool parse_u64(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

/* Appends "keys": [...] from the file (one key per line, empty lines
 * skipped). Returns 0, or an exit code after printing why. */
static int add_keys_file(struct cli_buf *body, const char *path)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) {
        int err = errno;
        fprintf(stderr, "shardgate prefetch: cannot open %s: %s\n", path, strerror(err));
        return CLI_EXIT_USAGE;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    size_t count = 0;
    int rc = 0;
    buf_adds(body, "\"keys\":[");
    errno = 0;
    while ((n = getline(&line, &cap, f)) >= 0) {
        size_t l = (size_t)n;
        while (l > 0 && (line[l - 1] == '\n' || line[l - 1] == '\r'))
            l--;
        if (l == 0)
            continue;
        if (count++)
            buf_add(body, ",", 1);
        if (!buf_json_str(body, line, l))
            break;
    }
    if (ferror(f)) {
        int err = errno;
        fprintf(stderr, "shardgate prefetch: cannot read %s: %s\n", path, strerror(err));
        rc = CLI_EXIT_USAGE;
    } else if (body->over) {
        fprintf(stderr, "shardgate prefetch: the key list in %s is too large: a hint body "
                "is at most %zu MiB (split it into several hints)\n", path, CLI_BODY_MAX >> 20);
        rc = CLI_EXIT_USAGE;
    }
    buf_add(body, "]", 1);
    free(line);
    if (f != stdin)
        fclose(f);
    return rc;
}

int gw_cli_prefetch(int argc, char **argv)
{
    enum { O_ENDPOINT = 256, O_KEYS, O_ORDERED, O_EPOCH, O_CONSUMER, O_WBYTES, O_WOBJ, O_PIN,
           O_WAIT, O_REGION, O_JSON, O_HELP };
    static const struct option opts[] = {
        { "endpoint", required_argument, NULL, O_ENDPOINT },
        { "keys-file", required_argument, NULL, O_KEYS },
        { "ordered", no_argument, NULL, O_ORDERED },
        { "epoch", required_argument, NULL, O_EPOCH },
        { "consumer", required_argument, NULL, O_CONSUMER },
        { "window-bytes", required_argument, NULL, O_WBYTES },
        { "window-objects", required_argument, NULL, O_WOBJ },
        { "pin", no_argument, NULL, O_PIN },
        { "wait", no_argument, NULL, O_WAIT },
        { "region", required_argument, NULL, O_REGION },
        { "json", no_argument, NULL, O_JSON },
        { "help", no_argument, NULL, O_HELP },
        { NULL, 0, NULL, 0 },
    };
    struct cli_common co = { 0 };
    const char *keys_file = NULL, *consumer = NULL;
    bool ordered = false, pin = false, wait = false;
    bool has_epoch = false, has_wb = false, has_wo = false;
    uint64_t epoch = 0, wbytes = 0, wobj = 0;
    int o;

    optind = 1;
    opterr = 1;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case O_ENDPOINT: co.endpoint = optarg; break;
        case O_KEYS: keys_file = optarg; break;
        case O_ORDERED: ordered = true; break;
        case O_CONSUMER: consumer = optarg; break;
        case O_PIN: pin = true; break;
        case O_WAIT: wait = true; break;
        case O_REGION: co.region = optarg; break;
        case O_JSON: co.json = true; break;
        case O_EPOCH:
            if (!parse_u64(optarg, &epoch) || epoch > (uint64_t)INT64_MAX) {
                fprintf(stderr, "shardgate prefetch: --epoch takes an integer >= 0, not '%s'\n",
                        optarg);
                return CLI_EXIT_USAGE;
            }
            has_epoch = true;
            break;
        case O_WBYTES:
            if (conf_size_parse(optarg, &wbytes) != 0 || wbytes == 0 ||
                wbytes > ((uint64_t)1 << 53)) {
                fprintf(stderr, "shardgate prefetch: --window-bytes takes a size such as "
                        "1073741824, 512MiB or 8GiB, not '%s'\n", optarg);
                return CLI_EXIT_USAGE;
            }
            has_wb = true;
            break;
        case O_WOBJ:
            if (!parse_u64(optarg, &wobj) || wobj == 0 || wobj > ((uint64_t)1 << 53)) {
                fprintf(stderr, "shardgate prefetch: --window-objects takes an integer >= 1, "
                        "not '%s'\n", optarg);
                return CLI_EXIT_USAGE;
            }
            has_wo = true;
            break;
        case 'h':
        case O_HELP:
            fputs(prefetch_usage, stdout);
            return CLI_EXIT_OK;
        default:
            fputs(prefetch_usage, stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "shardgate prefetch: missing s3://BUCKET/... argument\n%s",
                prefetch_usage);
        return CLI_EXIT_USAGE;
    }
    if (argc - optind > 1) {
        fprintf(stderr, "shardgate prefetch: one s3:// argument expected, got %d%s\n",
                argc - optind, strncmp(argv[optind + 1], "s3://", 5) == 0
                ? " (quote a template: the shell expands {a..b} itself)" : "");
        return CLI_EXIT_USAGE;
    }
    co.bucket_url = argv[optind];
    char bucket[256];
    const char *rest;
    if (!parse_s3_url(co.bucket_url, bucket, sizeof bucket, &rest)) {
        fprintf(stderr, "shardgate prefetch: expected s3://BUCKET/PREFIX-OR-TEMPLATE, "
                "not '%s'\n", co.bucket_url);
        return CLI_EXIT_USAGE;
    }
    if (keys_file && *rest) {
        fprintf(stderr, "shardgate prefetch: give either --keys-file or a prefix/template "
                "after the bucket, not both\n");
        return CLI_EXIT_USAGE;
    }

    struct cli_buf body;
    buf_init(&body, CLI_BODY_MAX);
    buf_adds(&body, "{");
    if (keys_file) {
        int krc = add_keys_file(&body, keys_file);
        if (krc) {
            buf_free(&body);
            return krc;
        }
    } else {
        buf_adds(&body, strchr(rest, '{') ? "\"template\":" : "\"prefix\":");
        buf_json_str(&body, rest, strlen(rest));
    }
    if (ordered)
        buf_adds(&body, ",\"ordered\":true");
    if (has_epoch)
        buf_printf(&body, ",\"epoch\":%" PRIu64, epoch);
    if (consumer) {
        buf_adds(&body, ",\"consumer\":");
        buf_json_str(&body, consumer, strlen(consumer));
    }
    if (has_wb)
        buf_printf(&body, ",\"window_bytes\":%" PRIu64, wbytes);
    if (has_wo)
        buf_printf(&body, ",\"window_objects\":%" PRIu64, wobj);
    if (pin)
        buf_adds(&body, ",\"pin\":true");
    buf_adds(&body, "}");
    if (body.over) {
        fprintf(stderr, "shardgate prefetch: the hint is larger than %zu MiB\n",
                CLI_BODY_MAX >> 20);
        buf_free(&body);
        return CLI_EXIT_USAGE;
    }

    struct cli_conn c;
    int rc = conn_open("prefetch", &co, bucket, &c);
    if (rc != CLI_EXIT_OK) {
        buf_free(&body);
        return rc;
    }
    struct cli_answer a = { 0 };
    int tr = cli_request(&c, "POST", "prefetch=", body.p, body.len, &a);
    struct cli_job j;
    if (tr != 0 || a.status < 200 || a.status > 299) {
        rc = report_failure("prefetch", &a, tr);
    } else if (!answer_json(&a) || !job_parse(a.body.p, &j)) {
        rc = report_malformed("prefetch", &a);
    } else {
        if (co.json && !wait)
            printf("%s\n", a.body.p);
        else if (!co.json)
            printf("job %s %s: %.0f objects in %s\n", j.id, j.state, j.total,
                   j.bucket[0] ? j.bucket : bucket);
        fflush(stdout);
        rc = wait ? wait_job(&c, j.id, co.json) : CLI_EXIT_OK;
    }
    buf_free(&a.body);
    buf_free(&body);
    conn_close(&c);
    return rc;
}

/* ---------------------------------------------------------------- jobs */

static void print_job_detail(const char *doc)
{
    struct cli_job j;
    char b1[32], b2[32], r[32];
    job_parse(doc, &j);
    printf("job        %s\n", j.id);
    printf("bucket     %s\n", j.bucket);
    printf("state      %s\n", j.state);
    if (j.ordered && j.has_position)
        printf("ordered    yes (the reader is at object %.0f)\n", j.position);
    else
        printf("ordered    %s\n", j.ordered ? "yes" : "no");
    if (j.has_epoch)
        printf("epoch      %.0f\n", j.epoch);
    if (j.consumer[0])
        printf("consumer   %s\n", j.consumer);
    printf("objects    %.0f (cached %.0f, staged %.0f, failed %.0f, pending %.0f)\n", j.total,
           j.cached, j.staged, j.failed, j.pending);
    fmt_bytes(j.bytes_done, b1, sizeof b1);
    fmt_bytes(j.bytes_total, b2, sizeof b2);
    printf("bytes      %s of %s known so far\n", b1, b2);
    if (j.has_rate) {
        fmt_rate(j.rate, r, sizeof r);
        if (j.has_eta)
            printf("rate       %s, eta %.0f s\n", r, j.eta);
        else
            printf("rate       %s\n", r);
    }
    printf("created    %s\n", j.created[0] ? j.created : "-");
    printf("ended      %s\n", j.ended[0] ? j.ended : "-");
    if (js_first(js_get(doc, "errors"))) {
        printf("errors (first 20):\n");
        print_errors(stdout, doc);
    }
}

static void print_job_table(const char *doc, const char *bucket)
{
    const char *first = js_first(js_get(doc, "jobs"));
    if (!first) {
        printf("no prefetch jobs in %s\n", bucket);
        return;
    }
    int idw = 3;
    for (const char *e = first; e; e = js_next(e)) {
        struct cli_job j;
        if (job_parse(e, &j) && (int)strlen(j.id) > idw)
            idw = (int)strlen(j.id);
    }
    printf("%-*s  %-9s %9s %8s %8s %7s  %-21s %5s  %-24s  %s\n", idw, "JOB", "STATE",
           "OBJECTS", "CACHED", "STAGED", "FAILED", "BYTES", "EPOCH", "CREATED", "CONSUMER");
    for (const char *e = first; e; e = js_next(e)) {
        struct cli_job j;
        char b1[32], b2[32], bytes[72], ep[24];
        if (!job_parse(e, &j))
            continue;
        fmt_bytes(j.bytes_done, b1, sizeof b1);
        fmt_bytes(j.bytes_total, b2, sizeof b2);
        snprintf(bytes, sizeof bytes, "%s/%s", b1, b2);
        if (j.has_epoch)
            snprintf(ep, sizeof ep, "%.0f", j.epoch);
        else
            strcpy(ep, "-");
        printf("%-*s  %-9s %9.0f %8.0f %8.0f %7.0f  %-21s %5s  %-24s  %s\n", idw, j.id,
               j.state, j.total, j.cached, j.staged, j.failed, bytes, ep,
               j.created[0] ? j.created : "-", j.consumer[0] ? j.consumer : "-");
    }
}

int gw_cli_jobs(int argc, char **argv)
{
    enum { O_ENDPOINT = 256, O_JOB, O_CANCEL, O_REGION, O_JSON, O_HELP };
    static const struct option opts[] = {
        { "endpoint", required_argument, NULL, O_ENDPOINT },
        { "job", required_argument, NULL, O_JOB },
        { "cancel", required_argument, NULL, O_CANCEL },
        { "region", required_argument, NULL, O_REGION },
        { "json", no_argument, NULL, O_JSON },
        { "help", no_argument, NULL, O_HELP },
        { NULL, 0, NULL, 0 },
    };
    struct cli_common co = { 0 };
    const char *job = NULL, *cancel = NULL;
    int o;

    optind = 1;
    opterr = 1;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case O_ENDPOINT: co.endpoint = optarg; break;
        case O_JOB: job = optarg; break;
        case O_CANCEL: cancel = optarg; break;
        case O_REGION: co.region = optarg; break;
        case O_JSON: co.json = true; break;
        case 'h':
        case O_HELP:
            fputs(jobs_usage, stdout);
            return CLI_EXIT_OK;
        default:
            fputs(jobs_usage, stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (argc - optind != 1) {
        fprintf(stderr, "shardgate jobs: expected one s3://BUCKET argument\n%s", jobs_usage);
        return CLI_EXIT_USAGE;
    }
    if (job && cancel) {
        fprintf(stderr, "shardgate jobs: give --job or --cancel, not both\n");
        return CLI_EXIT_USAGE;
    }
    if ((job && !*job) || (cancel && !*cancel)) {
        fprintf(stderr, "shardgate jobs: empty job id\n");
        return CLI_EXIT_USAGE;
    }
    co.bucket_url = argv[optind];
    char bucket[256];
    const char *rest;
    if (!parse_s3_url(co.bucket_url, bucket, sizeof bucket, &rest) || *rest) {
        fprintf(stderr, "shardgate jobs: expected s3://BUCKET, not '%s'\n", co.bucket_url);
        return CLI_EXIT_USAGE;
    }

    struct cli_conn c;
    int rc = conn_open("jobs", &co, bucket, &c);
    if (rc != CLI_EXIT_OK)
        return rc;
    struct cli_buf q;
    struct cli_answer a = { 0 };
    const char *id = job ? job : cancel;
    bool qok;
    if (id) {
        qok = job_query(&q, id);
    } else {
        buf_init(&q, 64);
        qok = buf_adds(&q, "prefetch=");
    }
    if (!qok) {
        fprintf(stderr, "shardgate jobs: out of memory\n");
        rc = CLI_EXIT_GATEWAY;
        goto out;
    }
    int tr = cli_request(&c, cancel ? "DELETE" : "GET", q.p, NULL, 0, &a);
    if (tr != 0 || a.status < 200 || a.status > 299) {
        rc = report_failure("jobs", &a, tr);
    } else if (!answer_json(&a)) {
        rc = report_malformed("jobs", &a);
    } else if (co.json) {
        printf("%s\n", a.body.p);
    } else if (id) {
        print_job_detail(a.body.p);
    } else {
        print_job_table(a.body.p, bucket);
    }
out:
    buf_free(&q);
    buf_free(&a.body);
    conn_close(&c);
    return rc;
}
