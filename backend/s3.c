/* backend/s3.c - the S3 cold tier: every verb of backend.h as S3 requests
 * to any S3 server over libcurl, signed by libcurl's CURLOPT_AWS_SIGV4.
 * Blocking calls on a pool of reused easy handles (keep-alive connections);
 * retries with full-jitter backoff for idempotent calls; uploads spooled to
 * an unlinked temp file so nothing reaches the cold tier before commit. An
 * open object streams its body from one GET, driven by a curl multi handle
 * from the reading thread. */
#include "backend_int.h"
#include "s3_int.h"
#include "posix_int.h"   /* posix_rollup, posix_hex_to_md5: pure helpers */
#include "log.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define S3_POOL_MAX 64   /* idle easy handles kept (each keeps its connection) */

struct s3_store {
    struct backend base;        /* first */
    char *endpoint;             /* without trailing '/' */
    char *region, *access, *secret, *token;
    char *sigv4;                /* "aws:amz:<region>:s3" */
    char *ca_path;
    char *spool_dir;
    bool vhost;
    long connect_ms, request_ms;
    long first_byte_ms;         /* the answer of a read-side call begins by then */
    unsigned retries;
    struct backend_bucket_map *map;
    size_t n_map;
    pthread_mutex_t mu;         /* guards pool and mpool */
    CURL *pool[S3_POOL_MAX];
    size_t n_pool;
    /* Idle multi handles of open objects' streams. Each keeps the keep-alive
     * connections of its finished transfers (a multi has its own connection
     * cache), so the next object open reuses one instead of a new TCP/TLS
     * handshake. */
    CURLM *mpool[S3_POOL_MAX];
    size_t n_mpool;
};

struct s3_put {
    struct backend_put base;    /* first */
    struct s3_store *s;
    char *bucket, *key;         /* cold names */
    char *upload_id;            /* parts: the upload */
    unsigned part_no;
    int fd;                     /* the spool file (unlinked) */
    uint64_t size, max_size;
    bool failed;
    enum backend_status fail_st;
};

/* One request and what came back. */
struct s3_call {
    const char *method;
    const char *bucket;         /* cold name, NULL for the service */
    const char *key;            /* NULL for a bucket request */
    const char *query;          /* canonical, NULL for none */
    struct curl_slist *hdrs;    /* extra request headers (borrowed) */
    const void *body;           /* in-memory body */
    size_t body_len;
    int body_fd;                /* spooled body when >= 0 */
    uint64_t fd_off, fd_len;
    bool idempotent;
    bool long_transfer;         /* no total timeout: low-speed limit only */
    bool slow_answer;           /* the server may work long before it answers
                                   (uploads, copies, Complete): no first-byte
                                   deadline, only the low-speed limit */
    unsigned deadline_ms;       /* 0: the store's deadlines; else the answer
                                   begins and the call ends within this
                                   (timed HEAD, probe) */
    bool quiet;                 /* failures are logged at debug level (probes) */
    /* set by s3_do for each attempt */
    CURLcode rc;                /* curl's result of the last attempt */
    long attempt_ms;            /* curl's total timeout of the attempt; 0: none */
    uint64_t fb_deadline;       /* now_ms() clock: the answer must begin by then; 0: none */
    bool fb_expired;            /* the attempt was stopped at fb_deadline */
    /* sink: a fixed buffer for a ranged GET; else bytes go to rbuf */
    unsigned char *sink;
    size_t sink_cap, sink_len;
    /* response */
    long status;                /* of the last status line seen */
    char *rbuf;
    size_t rlen, rmax;
    bool overflow;
    struct obj_meta rh;         /* response headers, lower-case names */
    size_t rh_bytes;
    uint64_t fd_pos;            /* upload read position */
    char code[64];              /* S3 error code */
    bool hdrs_done;             /* the blank line after a final (>= 200) status */
};

/* The GET sent by s3_object_open, its body still streaming. Driven by a
 * multi handle from the reading thread only (inside s3_obj_read): no thread
 * of our own, nothing runs while nobody reads. */
struct s3_stream {
    CURLM *multi;               /* from the store's mpool; back there at close */
    CURL *h;                    /* from the store's pool */
    bool attached;              /* h is in multi */
    struct curl_slist *hl;
    char *url;
    struct s3_call c;           /* status, headers, error body */
    struct s3_ring ring;        /* body bytes not yet read, object offsets
                                   [pos, pos + ring.len) */
    uint64_t pos;               /* offset of the next byte handed out */
    uint64_t recvd;             /* body bytes received */
    uint64_t last_ms;           /* when a byte last arrived (or we resumed) */
    bool paused;                /* the write callback paused: ring full */
    bool done;                  /* the transfer ended; rc says how */
    CURLcode rc;
    bool overrun, nomem;        /* why the write callback failed */
    enum backend_status fail;   /* sticky once the stream failed mid-body */
};

struct s3_obj {
    struct backend_obj base;    /* first */
    struct s3_store *s;
    char *bucket, *key;         /* cold names */
    char etag[72];              /* of the GET of open: If-Match on ranged GETs */
    uint64_t size;
    struct s3_stream st;        /* st.multi NULL: no stream (never, or stopped) */
    unsigned char *win;         /* read-ahead window, <= S3_READ_WINDOW */
    uint64_t win_off;
    size_t win_len;
    pthread_mutex_t mu;         /* a reader per object at a time */
};

static const struct backend_ops s3_ops;

/* ---- pure helpers (declared in s3_int.h) ---- */

static bool unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

char *s3_uri_encode(const char *s, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *o = malloc(3 * n + 1), *p = o;
    if (!o)
        return NULL;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (unreserved(*c) || (keep_slash && *c == '/')) {
            *p++ = (char)*c;
        } else {
            *p++ = '%';
            *p++ = hex[*c >> 4];
            *p++ = hex[*c & 15];
        }
    }
    *p = '\0';
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
        { "BucketAlreadyExists", BACKEND_BUCKET_EXISTS },
        { "BucketNotEmpty", BACKEND_BUCKET_NOT_EMPTY },
        { "InvalidBucketName", BACKEND_BAD_BUCKET_NAME },
        { "KeyTooLongError", BACKEND_KEY_TOO_LONG },
        { "InvalidPart", BACKEND_INVALID_PART },
        { "InvalidPartOrder", BACKEND_INVALID_PART_ORDER },
        { "EntityTooSmall", BACKEND_ENTITY_TOO_SMALL },
        { "EntityTooLarge", BACKEND_TOO_LARGE },
        { "InvalidRange", BACKEND_BAD_RANGE },
        { "InvalidArgument", BACKEND_BAD_KEY },  /* the one 400 a key put gets */
        { "InvalidRequest", BACKEND_INVALID_REQUEST },
        { "AccessDenied", BACKEND_DENIED },
        { "SignatureDoesNotMatch", BACKEND_DENIED },
        { "InvalidAccessKeyId", BACKEND_DENIED },
        { "SlowDown", BACKEND_UNAVAILABLE },
        { "ServiceUnavailable", BACKEND_UNAVAILABLE },
        { "InternalError", BACKEND_UNAVAILABLE },
        { "RequestTimeout", BACKEND_UNAVAILABLE },
    };
    if (code && *code)
        for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
            if (strcmp(code, map[i].code) == 0)
                return map[i].st;
    if (http_status >= 200 && http_status < 300)
        return BACKEND_OK;
    if (http_status == 404)
        return BACKEND_NO_KEY;
    if (http_status == 403)
        return BACKEND_DENIED;
    if (http_status == 416)
        return BACKEND_BAD_RANGE;
    if (http_status >= 500)
        return BACKEND_UNAVAILABLE;
    return BACKEND_IO;
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
    return strncmp(name, "x-amz-meta-", 11) == 0 || strncmp(name, "x-amz-checksum-", 15) == 0;
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
        } else if (s3_stored_header(n) && !obj_meta_get_hdr(m, n)) {
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

/* ---- the store ---- */

static const char *cold_bucket(const struct s3_store *s, const char *bucket)
{
    for (size_t i = 0; i < s->n_map; i++)
        if (strcmp(s->map[i].gateway, bucket) == 0)
            return s->map[i].cold;
    return bucket;
}

static const char *gateway_bucket(const struct s3_store *s, const char *cold)
{
    for (size_t i = 0; i < s->n_map; i++)
        if (strcmp(s->map[i].cold, cold) == 0)
            return s->map[i].gateway;
    return cold;
}

static CURL *handle_get(struct s3_store *s)
{
    CURL *h = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->n_pool)
        h = s->pool[--s->n_pool];
    pthread_mutex_unlock(&s->mu);
    if (h)
        curl_easy_reset(h);   /* keeps the live connections of the handle */
    else
        h = curl_easy_init();
    return h;
}

static void handle_put(struct s3_store *s, CURL *h)
{
    pthread_mutex_lock(&s->mu);
    if (s->n_pool < S3_POOL_MAX) {
        s->pool[s->n_pool++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    if (h)
        curl_easy_cleanup(h);
}

static size_t on_header(char *buf, size_t size, size_t n, void *arg)
{
    struct s3_call *c = arg;
    size_t len = size * n;
    if (len >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
        /* A new response (100 Continue, a retry): forget earlier headers. */
        obj_meta_clear(&c->rh);
        c->rh_bytes = 0;
        c->hdrs_done = false;
        const char *sp = memchr(buf, ' ', len);
        c->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        return len;
    }
    if (len <= 2 && (buf[0] == '\r' || buf[0] == '\n')) {
        c->hdrs_done = c->status >= 200;   /* not after a 100 Continue */
        return len;
    }
    c->rh_bytes += len;
    if (c->rh_bytes > S3_HDRS_MAX)
        return 0;
    const char *colon = memchr(buf, ':', len);
    if (!colon)
        return len;
    char name[128];
    size_t nl = (size_t)(colon - buf);
    if (nl == 0 || nl >= sizeof name)
        return len;
    for (size_t i = 0; i < nl; i++)
        name[i] = (char)((buf[i] >= 'A' && buf[i] <= 'Z') ? buf[i] + 32 : buf[i]);
    name[nl] = '\0';
    const char *v = colon + 1, *e = buf + len;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t'))
        e--;
    char *val = strndup(v, (size_t)(e - v));
    if (!val || obj_meta_add_hdr(&c->rh, name, val) != 0) {
        free(val);
        return 0;
    }
    free(val);
    return len;
}

static size_t on_body(char *buf, size_t size, size_t n, void *arg)
{
    struct s3_call *c = arg;
    size_t len = size * n;
    if (c->sink && c->status >= 200 && c->status < 300) {
        if (len > c->sink_cap - c->sink_len)
            return 0;   /* more than the range asked for: abort */
        memcpy(c->sink + c->sink_len, buf, len);
        c->sink_len += len;
        return len;
    }
    if (len > c->rmax - c->rlen) {
        c->overflow = true;
        return 0;
    }
    char *nb = realloc(c->rbuf, c->rlen + len + 1);
    if (!nb)
        return 0;
    c->rbuf = nb;
    memcpy(nb + c->rlen, buf, len);
    c->rlen += len;
    nb[c->rlen] = '\0';
    return len;
}

static size_t on_read(char *buf, size_t size, size_t n, void *arg)
{
    struct s3_call *c = arg;
    if (c->body_fd >= 0) {
        uint64_t left = c->fd_len - c->fd_pos;
        size_t want = size * n < left ? size * n : (size_t)left;
        if (want == 0)
            return 0;
        ssize_t r;
        do
            r = pread(c->body_fd, buf, want, (off_t)(c->fd_off + c->fd_pos));
        while (r < 0 && errno == EINTR);
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            log_msg(LOG_LVL_ERROR, "backend", "s3: read spool: %s", strerror(e));
            return CURL_READFUNC_ABORT;
        }
        c->fd_pos += (uint64_t)r;
        return (size_t)r;
    }
    size_t left = c->body_len - (size_t)c->fd_pos;
    size_t want = size * n < left ? size * n : left;
    memcpy(buf, (const char *)c->body + c->fd_pos, want);
    c->fd_pos += want;
    return want;
}

static void sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[32];
    unsigned int mdl = 0;
    EVP_Digest(data, len, md, &mdl, EVP_sha256(), NULL);
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static bool conn_error(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
        return true;
    default:
        return false;
    }
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Stops an attempt whose answer has not begun by its first-byte deadline.
 * libcurl calls this at least about once a second while a transfer waits
 * (curl_easy_perform polls at most 1 s at a time), so the deadline holds to
 * about a second; a HEAD gets curl's exact total timeout instead. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    struct s3_call *c = arg;
    if (c->fb_deadline && c->status == 0 && now_ms() >= c->fb_deadline) {
        c->fb_expired = true;
        return 1;   /* CURLE_ABORTED_BY_CALLBACK */
    }
    return 0;
}

/* Did the attempt on h get as far as sending its request? (Not: it could
 * not connect.) */
static bool request_sent(CURL *h)
{
    curl_off_t t = 0;
    return curl_easy_getinfo(h, CURLINFO_PRETRANSFER_TIME_T, &t) == CURLE_OK && t > 0;
}

static void call_reset_response(struct s3_call *c)
{
    free(c->rbuf);
    c->rbuf = NULL;
    c->rlen = 0;
    c->overflow = false;
    obj_meta_clear(&c->rh);
    c->rh_bytes = 0;
    c->sink_len = 0;
    c->fd_pos = 0;
    c->status = 0;
    c->code[0] = '\0';
}

static void call_free(struct s3_call *c)
{
    free(c->rbuf);
    c->rbuf = NULL;
    obj_meta_clear(&c->rh);
}

/* Sets every option of one attempt of c on h. */
static void easy_setup(struct s3_store *s, CURL *h, struct s3_call *c, const char *url,
                       struct curl_slist *hl)
{
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);      /* keys may hold "." / ".." */
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, s->connect_ms);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->attempt_ms);   /* s3_do's; 0: none */
    if (c->fb_deadline) {
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    }
    /* A stalled transfer (no byte for the request timeout) is cut. */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, s->request_ms / 1000 > 0 ? s->request_ms / 1000
                                                                          : 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    if (s->ca_path) {
        size_t l = strlen(s->ca_path);
        if (l && s->ca_path[l - 1] == '/')
            curl_easy_setopt(h, CURLOPT_CAPATH, s->ca_path);
        else
            curl_easy_setopt(h, CURLOPT_CAINFO, s->ca_path);
    }
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, s->sigv4);
    curl_easy_setopt(h, CURLOPT_USERNAME, s->access);
    curl_easy_setopt(h, CURLOPT_PASSWORD, s->secret);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, c);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
    bool has_body = c->body_fd >= 0 || c->body;
    if (strcmp(c->method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (strcmp(c->method, "PUT") == 0 || (strcmp(c->method, "POST") == 0 && has_body)) {
        /* An upload with a read callback; POST with a body too, so that the
         * method is set by CUSTOMREQUEST and the body is never form data. */
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, c);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE,
                         (curl_off_t)(c->body_fd >= 0 ? c->fd_len : c->body_len));
        if (strcmp(c->method, "POST") == 0)
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "POST");
    } else if (strcmp(c->method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
    } else if (strcmp(c->method, "GET") != 0) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, c->method);
    }
    call_reset_response(c);
}

/* One attempt. Returns the curl result; fills c's response. */
static CURLcode attempt(struct s3_store *s, CURL *h, struct s3_call *c, const char *url,
                        struct curl_slist *hl)
{
    easy_setup(s, h, c, url, hl);
    return curl_easy_perform(h);
}

/* The request headers of c (its own, then those every request carries)
 * into *out (new, curl_slist_free_all). BACKEND_OK or BACKEND_NOMEM. */
static enum backend_status call_hdr_list(const struct s3_store *s, const struct s3_call *c,
                                         struct curl_slist **out)
{
    *out = NULL;
    /* Headers every request carries. x-amz-content-sha256: the hash of an
     * in-memory body; UNSIGNED-PAYLOAD for a spooled one (which Content-MD5
     * protects where we have it). */
    char sha[65 + 32];
    if (c->body_fd >= 0) {
        snprintf(sha, sizeof sha, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    } else {
        char hex[65];
        sha256_hex(c->body ? c->body : "", c->body ? c->body_len : 0, hex);
        snprintf(sha, sizeof sha, "x-amz-content-sha256: %s", hex);
    }
    struct curl_slist *hl = NULL, *t;
    bool ok = true;
    for (struct curl_slist *e = c->hdrs; e && ok; e = e->next)
        ok = (t = curl_slist_append(hl, e->data)) != NULL && (hl = t);
    ok = ok && (t = curl_slist_append(hl, sha)) && (hl = t);
    ok = ok && (t = curl_slist_append(hl, "Expect:")) && (hl = t);
    if (s->token) {
        char *th = NULL;
        ok = ok && asprintf(&th, "x-amz-security-token: %s", s->token) > 0;
        ok = ok && (t = curl_slist_append(hl, th)) && (hl = t);
        free(th);
    }
    if (!ok) {
        curl_slist_free_all(hl);
        return BACKEND_NOMEM;
    }
    *out = hl;
    return BACKEND_OK;
}

/* Sleeps the backoff before retry number att+1, at most max_ms (0: no
 * limit) so that a retry never starts past its call's deadline. */
static void backoff_sleep(unsigned att, uint64_t max_ms)
{
    uint64_t r = 0;
    (void)RAND_bytes((unsigned char *)&r, sizeof r);
    uint64_t ms = s3_backoff_ms(att, 50, 1000, r);
    if (max_ms && ms > max_ms)
        ms = max_ms;
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* The deadlines of one call, on the now_ms() clock (0: none). The answer of
 * a read-side call must begin by fb, retries included: a hung tier costs a
 * miss or a listing cold_first_byte_timeout_ms, not the retries times the
 * request timeout. A call with a small answer ends by end, retries included. */
struct call_deadlines {
    uint64_t t0, fb, end;
};

static struct call_deadlines call_deadlines(const struct s3_store *s, const struct s3_call *c)
{
    struct call_deadlines d = { now_ms(), 0, 0 };
    uint64_t fb = c->slow_answer ? 0 : c->deadline_ms ? c->deadline_ms
                                                     : (uint64_t)s->first_byte_ms;
    uint64_t all = c->deadline_ms ? c->deadline_ms
                   : c->long_transfer ? 0 : (uint64_t)s->request_ms;
    d.fb = fb ? d.t0 + fb : 0;
    d.end = all ? d.t0 + all : 0;
    return d;
}

/* Milliseconds until deadline t (0: none); at least 1 when there is one. */
static uint64_t ms_until(uint64_t t)
{
    uint64_t now = now_ms();
    return !t ? 0 : t > now ? t - now : 1;
}

/* The nearer of two such spans (0: none). */
static uint64_t ms_min(uint64_t a, uint64_t b)
{
    return !a ? b : !b ? a : a < b ? a : b;
}

/* Is a deadline past? The first-byte one counts only while the answer has
 * not begun (a transfer that stalls later is not a hung tier's timeout). */
static bool deadline_passed(const struct call_deadlines *d, bool answered)
{
    uint64_t now = now_ms();
    return (d->end && now >= d->end) || (d->fb && !answered && now >= d->fb);
}

/* Runs a call with retries within its deadlines (call_deadlines).
 * BACKEND_OK for a 2xx answer; BACKEND_TIMEOUT when the answer did not begin
 * (or the call did not end) in time; else the mapped error (c->status,
 * c->code say more). */
static enum backend_status s3_do(struct s3_store *s, struct s3_call *c)
{
    char *url = s3_url_build(s->endpoint, s->vhost, c->bucket, c->key, c->query);
    if (!url)
        return BACKEND_NOMEM;
    if (!c->rmax)
        c->rmax = S3_ERR_BODY_MAX;
    struct curl_slist *hl = NULL;
    if (call_hdr_list(s, c, &hl) != BACKEND_OK) {
        free(url);
        return BACKEND_NOMEM;
    }
    CURL *h = handle_get(s);
    if (!h) {
        curl_slist_free_all(hl);
        free(url);
        return BACKEND_NOMEM;
    }
    enum backend_status st = BACKEND_IO;
    struct call_deadlines d = call_deadlines(s, c);
    bool head = strcmp(c->method, "HEAD") == 0;
    for (unsigned att = 0;; att++) {
        /* curl's own total timeout: the call's end; for a HEAD, whose whole
         * answer is its first bytes, the first-byte deadline too (exact,
         * where the progress callback checks about once a second). */
        c->attempt_ms = (long)(head ? ms_min(ms_until(d.end), ms_until(d.fb))
                                    : ms_until(d.end));
        c->fb_deadline = d.fb;
        c->fb_expired = false;
        CURLcode rc = c->rc = attempt(s, h, c, url, hl);
        bool retry = false;
        int lvl = c->quiet ? LOG_LVL_DEBUG : LOG_LVL_WARN;
        if (rc != CURLE_OK) {
            bool timed_out = c->fb_expired ||
                             (rc == CURLE_OPERATION_TIMEDOUT &&
                              deadline_passed(&d, c->status != 0) && request_sent(h));
            if (c->overflow) {
                log_msg(LOG_LVL_ERROR, "backend", "s3: %s %s: response over %zu bytes",
                        c->method, url, c->rmax);
                st = BACKEND_IO;
            } else if (timed_out) {
                /* Connected and asked, no answer in time: a hung tier. No
                 * retry: the deadline is the call's, not the attempt's. */
                st = BACKEND_TIMEOUT;
                log_msg(lvl, "backend", "s3: %s %s: no answer within %llu ms", c->method, url,
                        (unsigned long long)(now_ms() - d.t0));
            } else if (conn_error(rc)) {
                st = BACKEND_UNAVAILABLE;
                retry = true;
            } else {
                st = rc == CURLE_OUT_OF_MEMORY ? BACKEND_NOMEM : BACKEND_IO;
            }
            if (!timed_out && (rc != CURLE_WRITE_ERROR || !c->sink))
                log_msg(att < s->retries && retry && c->idempotent ? LOG_LVL_DEBUG : lvl,
                        "backend", "s3: %s %s: %s", c->method, url, curl_easy_strerror(rc));
        } else {
            long code = 0;
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
            c->status = code;
            if (code >= 200 && code < 300) {
                st = BACKEND_OK;
            } else {
                if (c->rbuf)
                    (void)s3_xml_error_code(c->rbuf, c->rlen, c->code, sizeof c->code);
                st = s3_status_from_code(c->code, code);
                retry = s3_retryable(c->code, code);
                if (st == BACKEND_IO || st == BACKEND_UNAVAILABLE || st == BACKEND_DENIED)
                    log_msg(lvl, "backend", "s3: %s %s: HTTP %ld %s", c->method, url, code,
                            c->code);
            }
        }
        if (!retry || !c->idempotent || att >= s->retries)
            break;
        /* A tier that does not even accept connections gets no more than
         * about two connect timeouts of our time in total. */
        if (rc != CURLE_OK && now_ms() - d.t0 >= (uint64_t)s->connect_ms * 2)
            break;
        /* No retry starts past the call's deadlines. */
        if (deadline_passed(&d, false))
            break;
        backoff_sleep(att, ms_min(ms_until(d.end), ms_until(d.fb)));
        if (deadline_passed(&d, false))
            break;
    }
    handle_put(s, h);
    curl_slist_free_all(hl);
    free(url);
    return st;
}

/* GETs a listing of the cold tier (a bucket's, or an upload's parts when
 * key is given) into c->rbuf for the caller to parse; the caller frees c.
 * Without a key, a missing bucket answers NoSuchBucket. */
static enum backend_status get_listing(struct s3_store *s, struct s3_call *c,
                                       const char *bucket, const char *key, const char *q)
{
    *c = (struct s3_call){ .method = "GET", .bucket = cold_bucket(s, bucket), .key = key,
                           .query = q, .body_fd = -1, .idempotent = true,
                           .rmax = S3_XML_MAX };
    enum backend_status st = s3_do(s, c);
    return st == BACKEND_NO_KEY && !key ? BACKEND_NO_BUCKET : st;
}

/* ---- open / close ---- */

static char *dup_or_env(const char *v, const char *env)
{
    if (!v)
        v = getenv(env);
    return v ? strdup(v) : NULL;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void s3_close(struct backend *base)
{
    struct s3_store *s = (struct s3_store *)base;
    for (size_t i = 0; i < s->n_pool; i++)
        curl_easy_cleanup(s->pool[i]);
    for (size_t i = 0; i < s->n_mpool; i++)
        curl_multi_cleanup(s->mpool[i]);
    for (size_t i = 0; i < s->n_map; i++) {
        free((char *)s->map[i].gateway);
        free((char *)s->map[i].cold);
    }
    free(s->map);
    free(s->endpoint);
    free(s->region);
    free(s->access);
    if (s->secret)
        memset(s->secret, 0, strlen(s->secret));
    free(s->secret);
    free(s->token);
    free(s->sigv4);
    free(s->ca_path);
    free(s->spool_dir);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

enum backend_status backend_s3_open(const struct backend_s3_conf *cf, struct backend **out)
{
    *out = NULL;
    pthread_once(&curl_once, curl_init_once);
    struct s3_store *s = calloc(1, sizeof *s);
    if (!s)
        return BACKEND_NOMEM;
    s->base.ops = &s3_ops;
    pthread_mutex_init(&s->mu, NULL);
    s->endpoint = dup_or_env(cf->endpoint, "AWS_ENDPOINT_URL");
    s->region = dup_or_env(cf->region, "AWS_REGION");
    if (!s->region)
        s->region = strdup("us-east-1");
    s->access = dup_or_env(cf->access_key, "AWS_ACCESS_KEY_ID");
    s->secret = dup_or_env(cf->secret_key, "AWS_SECRET_ACCESS_KEY");
    s->token = dup_or_env(cf->session_token, "AWS_SESSION_TOKEN");
    s->ca_path = cf->ca_path ? strdup(cf->ca_path) : NULL;
    s->spool_dir = strdup(cf->spool_dir ? cf->spool_dir : "/tmp");
    s->vhost = cf->virtual_hosted;
    s->connect_ms = cf->connect_timeout_ms ? (long)cf->connect_timeout_ms : 1000;
    s->request_ms = cf->request_timeout_ms ? (long)cf->request_timeout_ms : 30000;
    s->first_byte_ms = cf->first_byte_timeout_ms ? (long)cf->first_byte_timeout_ms : 5000;
    s->retries = cf->retries ? cf->retries : 2;
    enum backend_status st = BACKEND_NOMEM;
    if (!s->region || !s->spool_dir)
        goto fail;
    if (!s->endpoint || !strstr(s->endpoint, "://")) {
        log_msg(LOG_LVL_ERROR, "backend", "s3: no endpoint URL (scheme://host[:port])");
        st = BACKEND_IO;
        goto fail;
    }
    size_t el = strlen(s->endpoint);
    while (el && s->endpoint[el - 1] == '/')
        s->endpoint[--el] = '\0';
    if (!s->access || !s->secret) {
        log_msg(LOG_LVL_ERROR, "backend",
                "s3: no credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)");
        st = BACKEND_IO;
        goto fail;
    }
    if (asprintf(&s->sigv4, "aws:amz:%s:s3", s->region) < 0) {
        s->sigv4 = NULL;
        goto fail;
    }
    if (cf->n_map) {
        s->map = calloc(cf->n_map, sizeof *s->map);
        if (!s->map)
            goto fail;
        for (size_t i = 0; i < cf->n_map; i++, s->n_map++) {
            s->map[i].gateway = strdup(cf->map[i].gateway);
            s->map[i].cold = strdup(cf->map[i].cold);
            if (!s->map[i].gateway || !s->map[i].cold) {
                s->n_map++;
                goto fail;
            }
        }
    }
    log_msg(LOG_LVL_INFO, "backend", "s3 cold tier %s (region %s, %s-style; answers begin "
            "within %ld ms, small calls end within %ld ms)", s->endpoint, s->region,
            s->vhost ? "virtual-hosted" : "path", s->first_byte_ms, s->request_ms);
    *out = &s->base;
    return BACKEND_OK;
fail:
    s3_close(&s->base);
    return st;
}

/* ---- buckets ---- */

struct bucket_list_arg {
    struct s3_store *s;
    backend_bucket_cb cb;
    void *arg;
};

static int bucket_list_one(void *arg, const char *name, time_t created)
{
    struct bucket_list_arg *a = arg;
    return a->cb(a->arg, gateway_bucket(a->s, name), created);
}

static enum backend_status s3_bucket_list(struct backend *base, backend_bucket_cb cb, void *arg)
{
    struct s3_store *s = (struct s3_store *)base;
    struct s3_call c = { .method = "GET", .body_fd = -1, .idempotent = true,
                         .rmax = S3_XML_MAX };
    enum backend_status st = s3_do(s, &c);
    if (st == BACKEND_OK) {
        struct bucket_list_arg a = { s, cb, arg };
        st = s3_xml_buckets(c.rbuf, c.rlen, bucket_list_one, &a);
    }
    call_free(&c);
    return st;
}

static enum backend_status s3_bucket_create(struct backend *base, const char *bucket)
{
    struct s3_store *s = (struct s3_store *)base;
    char body[256];
    struct s3_call c = { .method = "PUT", .bucket = cold_bucket(s, bucket), .body_fd = -1,
                         .body = "", .idempotent = false };
    if (strcmp(s->region, "us-east-1") != 0) {
        int n = snprintf(body, sizeof body,
                         "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/"
                         "2006-03-01/\"><LocationConstraint>%s</LocationConstraint>"
                         "</CreateBucketConfiguration>", s->region);
        if (n > 0 && (size_t)n < sizeof body) {
            c.body = body;
            c.body_len = (size_t)n;
        }
    }
    enum backend_status st = s3_do(s, &c);
    call_free(&c);
    return st;
}

static enum backend_status s3_bucket_head(struct backend *base, const char *bucket)
{
    struct s3_store *s = (struct s3_store *)base;
    struct s3_call c = { .method = "HEAD", .bucket = cold_bucket(s, bucket), .body_fd = -1,
                         .idempotent = true };
    enum backend_status st = s3_do(s, &c);
    if (st == BACKEND_NO_KEY)
        st = BACKEND_NO_BUCKET;
    else if (st == BACKEND_IO && c.status == 400)
        st = BACKEND_BAD_BUCKET_NAME;   /* a HEAD's 400 has no body to say why;
                                           a bad name is what S3 answers 400 for */
    call_free(&c);
    return st;
}

static enum backend_status s3_bucket_delete(struct backend *base, const char *bucket)
{
    struct s3_store *s = (struct s3_store *)base;
    struct s3_call c = { .method = "DELETE", .bucket = cold_bucket(s, bucket), .body_fd = -1,
                         .idempotent = true };
    enum backend_status st = s3_do(s, &c);
    if (st == BACKEND_NO_KEY)
        st = BACKEND_NO_BUCKET;
    call_free(&c);
    return st;
}

/* ---- reading ---- */

/* A 404 without a body (HEAD) does not say whether the bucket is missing. */
static enum backend_status not_found(struct s3_store *s, const char *bucket,
                                     enum backend_status st, const char *code)
{
    if (st != BACKEND_NO_KEY || (code && *code))
        return st;
    return s3_bucket_head(&s->base, bucket) == BACKEND_NO_BUCKET ? BACKEND_NO_BUCKET
                                                                 : BACKEND_NO_KEY;
}

/* Asked on every object HEAD and opening GET: the cold tier then returns the
 * object's checksums, which the gateway stores (the cache) and returns to a
 * client that asks with x-amz-checksum-mode itself. */
static char checksum_mode_line[] = "x-amz-checksum-mode: ENABLED";
static struct curl_slist checksum_mode = { checksum_mode_line, NULL };

/* An object HEAD within timeout_ms (0: the store's deadlines). */
static enum backend_status object_head_within(struct s3_store *s, const char *bucket,
                                              const char *key, unsigned timeout_ms,
                                              struct obj_meta *meta)
{
    memset(meta, 0, sizeof *meta);
    struct s3_call c = { .method = "HEAD", .bucket = cold_bucket(s, bucket), .key = key,
                         .body_fd = -1, .idempotent = true, .hdrs = &checksum_mode,
                         .deadline_ms = timeout_ms };
    enum backend_status st = s3_do(s, &c);
    if (st == BACKEND_OK && s3_meta_from_headers(&c.rh, meta) != 0)
        st = BACKEND_NOMEM;
    else if (st != BACKEND_OK)
        st = not_found(s, bucket, st, c.code);
    if (st != BACKEND_OK)
        obj_meta_clear(meta);
    call_free(&c);
    return st;
}

static enum backend_status s3_object_head(struct backend *base, const char *bucket,
                                          const char *key, struct obj_meta *meta)
{
    return object_head_within((struct s3_store *)base, bucket, key, 0, meta);
}

static enum backend_status s3_object_head_timed(struct backend *base, const char *bucket,
                                                const char *key, unsigned timeout_ms,
                                                struct obj_meta *meta)
{
    return object_head_within((struct s3_store *)base, bucket, key, timeout_ms ? timeout_ms : 1,
                              meta);
}

/* ---- health ---- */

/* HEAD of the endpoint's root: every S3 server answers it somehow (403,
 * 405, 200 with a bucket listing's headers), and any answer is "there".
 * why does not name the endpoint (readiness shows it to anyone); callers
 * that log it add backend_info's location. */
static enum backend_status s3_probe(struct backend *base, unsigned timeout_ms, char *why,
                                    size_t len)
{
    struct s3_store *s = (struct s3_store *)base;
    struct s3_call c = { .method = "HEAD", .body_fd = -1, .idempotent = false, .quiet = true,
                         .deadline_ms = timeout_ms ? timeout_ms : 1 };
    uint64_t t0 = now_ms();
    enum backend_status st = s3_do(s, &c);
    uint64_t ms = now_ms() - t0;
    if (c.status > 0) {
        snprintf(why, len, "answered HTTP %ld in %llu ms", c.status, (unsigned long long)ms);
        st = BACKEND_OK;
    } else if (st == BACKEND_TIMEOUT) {
        snprintf(why, len, "no answer within %u ms", c.deadline_ms);
    } else {
        st = BACKEND_UNAVAILABLE;   /* no HTTP answer at all */
        snprintf(why, len, "cannot connect: %s", curl_easy_strerror(c.rc));
    }
    call_free(&c);
    return st;
}

static void s3_info(const struct backend *base, struct backend_info *out)
{
    const struct s3_store *s = (const struct s3_store *)base;
    out->location = s->endpoint;
    out->first_byte_ms = (unsigned)s->first_byte_ms;
}

/* ---- the streaming GET of an open object ---- */

static CURLM *multi_get(struct s3_store *s)
{
    CURLM *m = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->n_mpool)
        m = s->mpool[--s->n_mpool];
    pthread_mutex_unlock(&s->mu);
    return m ? m : curl_multi_init();
}

static void multi_put(struct s3_store *s, CURLM *m)
{
    pthread_mutex_lock(&s->mu);
    if (s->n_mpool < S3_POOL_MAX) {
        s->mpool[s->n_mpool++] = m;
        m = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    if (m)
        curl_multi_cleanup(m);
}

/* Content-Length of the stream's response; false when it has none. */
static bool stream_length(const struct s3_stream *t, uint64_t *len)
{
    const char *v = obj_meta_get_hdr(&t->c.rh, "content-length");
    if (!v || *v < '0' || *v > '9')
        return false;
    char *e = NULL;
    errno = 0;
    unsigned long long n = strtoull(v, &e, 10);
    if (errno || *e)
        return false;
    *len = n;
    return true;
}

/* The write callback of the stream: body bytes go to the ring, and the
 * transfer pauses while the ring is full (curl hands the same bytes again
 * after curl_easy_pause(CONT)). An error body goes to c.rbuf. */
static size_t on_stream_body(char *buf, size_t size, size_t n, void *arg)
{
    struct s3_obj *o = arg;
    struct s3_stream *t = &o->st;
    size_t len = size * n;
    if (t->c.status < 200 || t->c.status >= 300)
        return on_body(buf, size, n, &t->c);
    if (!t->ring.buf) {
        /* First body bytes: the headers are all in, open has not seen them
         * yet. Without a Content-Length we cannot tell a short body. */
        if (!stream_length(t, &o->size)) {
            t->overrun = true;
            return 0;
        }
        size_t cap = o->size < S3_STREAM_RING ? (size_t)o->size : S3_STREAM_RING;
        if (s3_ring_init(&t->ring, cap) != 0) {
            t->nomem = true;
            return 0;
        }
    }
    if (len > o->size - t->recvd || len > t->ring.cap) {
        t->overrun = true;   /* more than Content-Length said */
        return 0;
    }
    if (!s3_ring_put(&t->ring, buf, len)) {
        t->paused = true;
        return CURL_WRITEFUNC_PAUSE;
    }
    t->recvd += len;
    return len;
}

/* Lets curl move the transfer: waits up to wait_ms for its sockets (0: no
 * wait), then performs. Sets t->done and t->rc when the transfer ended. */
static enum backend_status stream_step(struct s3_stream *t, int wait_ms)
{
    CURLMcode mc = CURLM_OK;
    int running = 0;
    if (wait_ms > 0)
        mc = curl_multi_poll(t->multi, NULL, 0, wait_ms, NULL);
    if (mc == CURLM_OK)
        mc = curl_multi_perform(t->multi, &running);
    if (mc != CURLM_OK) {
        log_msg(LOG_LVL_ERROR, "backend", "s3: curl multi: %s", curl_multi_strerror(mc));
        return mc == CURLM_OUT_OF_MEMORY ? BACKEND_NOMEM : BACKEND_IO;
    }
    CURLMsg *m;
    int left = 0;
    while ((m = curl_multi_info_read(t->multi, &left)) != NULL)
        if (m->msg == CURLMSG_DONE && m->easy_handle == t->h) {
            t->done = true;
            t->rc = m->data.result;
        }
    return BACKEND_OK;
}

/* Why a transfer that ended with t->rc failed. */
static enum backend_status stream_rc_status(const struct s3_stream *t)
{
    if (t->nomem || t->rc == CURLE_OUT_OF_MEMORY)
        return BACKEND_NOMEM;
    if (t->overrun)
        return BACKEND_IO;
    return conn_error(t->rc) ? BACKEND_UNAVAILABLE : BACKEND_IO;
}

/* Ends the stream. An unfinished transfer is aborted: curl closes its
 * connection, so no more of the body is read. The handles go back to the
 * store's pools (the easy handle of an aborted transfer is dropped rather
 * than reused). Safe on a stream that never started. */
static void stream_stop(struct s3_store *s, struct s3_stream *t)
{
    if (t->attached)
        curl_multi_remove_handle(t->multi, t->h);
    t->attached = false;
    if (t->h) {
        if (t->done)
            handle_put(s, t->h);
        else
            curl_easy_cleanup(t->h);
    }
    t->h = NULL;
    if (t->multi)
        multi_put(s, t->multi);
    t->multi = NULL;
    curl_slist_free_all(t->hl);
    t->hl = NULL;
    free(t->url);
    t->url = NULL;
    call_free(&t->c);
    s3_ring_free(&t->ring);
}

/* (Re)starts the GET of the stream (t->url, t->hl, t->c set up). */
static enum backend_status stream_start(struct s3_obj *o)
{
    struct s3_store *s = o->s;
    struct s3_stream *t = &o->st;
    if (t->attached)
        curl_multi_remove_handle(t->multi, t->h);   /* the attempt before */
    t->attached = false;
    if (!t->multi && !(t->multi = multi_get(s)))
        return BACKEND_NOMEM;
    if (!t->h && !(t->h = handle_get(s)))
        return BACKEND_NOMEM;
    easy_setup(s, t->h, &t->c, t->url, t->hl);   /* long_transfer: low-speed limit only */
    curl_easy_setopt(t->h, CURLOPT_WRITEFUNCTION, on_stream_body);
    curl_easy_setopt(t->h, CURLOPT_WRITEDATA, o);
    /* HTTP/1.1: pausing an HTTP/2 stream in the libcurl we build against
     * (7.88) has had flow-control bugs; S3 speaks 1.1 anyway. */
    curl_easy_setopt(t->h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(t->h, CURLOPT_BUFFERSIZE, 128L * 1024);
    t->ring.head = t->ring.len = 0;
    t->pos = t->recvd = 0;
    t->paused = t->done = t->overrun = t->nomem = false;
    t->rc = CURLE_OK;
    t->fail = BACKEND_OK;
    CURLMcode mc = curl_multi_add_handle(t->multi, t->h);
    if (mc != CURLM_OK) {
        log_msg(LOG_LVL_ERROR, "backend", "s3: curl multi: %s", curl_multi_strerror(mc));
        return mc == CURLM_OUT_OF_MEMORY ? BACKEND_NOMEM : BACKEND_IO;
    }
    t->attached = true;
    return BACKEND_OK;
}

/* One attempt of the GET of open: returns once the headers of a 2xx answer
 * are in (body bytes may or may not have arrived), or with the mapped error
 * once an error answer is complete. *retry: worth another attempt. */
static enum backend_status stream_open_attempt(struct s3_obj *o, const struct call_deadlines *d,
                                               bool *retry)
{
    struct s3_stream *t = &o->st;
    *retry = false;
    enum backend_status st = stream_start(o);
    if (st != BACKEND_OK)
        return st;
    /* No total timeout on the transfer (a big body may take long, and a
     * slow one that flows is not cut), so the answer itself gets one: the
     * call's first-byte deadline, retries included. */
    while (!t->done && !(t->c.hdrs_done && t->c.status >= 200 && t->c.status < 300)) {
        bool answered = t->c.status != 0;
        if (deadline_passed(d, answered)) {
            bool sent = request_sent(t->h);
            log_msg(LOG_LVL_WARN, "backend", "s3: GET %s: %s within %llu ms", t->url,
                    sent ? "no answer" : "no connection", (unsigned long long)(now_ms() - d->t0));
            return sent ? BACKEND_TIMEOUT : BACKEND_UNAVAILABLE;   /* no retry: past it */
        }
        /* An answer that began and then stalls (curl's low-speed limit
         * should end it first). */
        if (answered && now_ms() - d->t0 >= (uint64_t)(o->s->first_byte_ms + o->s->request_ms)) {
            log_msg(LOG_LVL_WARN, "backend", "s3: GET %s: the answer stalled", t->url);
            *retry = true;
            return BACKEND_UNAVAILABLE;
        }
        if ((st = stream_step(t, 100)) != BACKEND_OK)
            return st;
    }
    long code = t->c.hdrs_done ? t->c.status : 0;
    if (code >= 200 && code < 300)
        return BACKEND_OK;
    if (code == 0) {
        /* No answer: refused, reset, timed out. */
        st = t->rc == CURLE_OK ? BACKEND_IO : stream_rc_status(t);
        *retry = conn_error(t->rc);
        log_msg(*retry ? LOG_LVL_DEBUG : LOG_LVL_WARN, "backend", "s3: GET %s: %s", t->url,
                curl_easy_strerror(t->rc));
        return st;
    }
    if (t->c.rbuf)
        (void)s3_xml_error_code(t->c.rbuf, t->c.rlen, t->c.code, sizeof t->c.code);
    st = s3_status_from_code(t->c.code, code);
    if (st == BACKEND_OK)
        st = BACKEND_IO;
    *retry = s3_retryable(t->c.code, code);
    if (st == BACKEND_IO || st == BACKEND_UNAVAILABLE || st == BACKEND_DENIED)
        log_msg(LOG_LVL_WARN, "backend", "s3: GET %s: HTTP %ld %s", t->url, code, t->c.code);
    return st;
}

/* A failure mid-body: remembered (every later read of the stream gets it;
 * no silent resume) and the transfer is dropped. */
static enum backend_status stream_failed(struct s3_obj *o, enum backend_status st)
{
    stream_stop(o->s, &o->st);
    o->st.fail = st;
    return st;
}

static void stream_resume(struct s3_stream *t)
{
    t->paused = false;
    /* May call on_stream_body at once with the held bytes (and pause
     * again when they still do not fit). */
    CURLcode rc = curl_easy_pause(t->h, CURLPAUSE_CONT);
    if (rc != CURLE_OK && !t->done) {
        t->done = true;
        t->rc = rc;
    }
}

/* Hands out up to len bytes at the stream's position (buf NULL: drops
 * them). Returns what is buffered without waiting for more; waits only when
 * nothing is, for at most the request timeout without a byte. */
static enum backend_status stream_take(struct s3_obj *o, void *buf, size_t len, size_t *got)
{
    struct s3_stream *t = &o->st;
    enum backend_status st;
    *got = 0;
    if (t->fail != BACKEND_OK)
        return t->fail;
    if (!t->done && !t->paused && (st = stream_step(t, 0)) != BACKEND_OK)
        return stream_failed(o, st);
    uint64_t wait_start = now_ms();
    while (t->ring.len == 0) {
        if (t->done) {
            st = t->rc == CURLE_OK ? BACKEND_IO : stream_rc_status(t);
            log_msg(LOG_LVL_WARN, "backend", "s3: GET %s/%s broke at %llu of %llu: %s",
                    o->bucket, o->key, (unsigned long long)t->pos,
                    (unsigned long long)o->size,
                    t->overrun ? "more bytes than Content-Length"
                    : t->rc == CURLE_OK ? "body shorter than Content-Length"
                                        : curl_easy_strerror(t->rc));
            return stream_failed(o, st);
        }
        if (t->paused) {
            stream_resume(t);   /* a held chunk larger than the free space */
            continue;
        }
        /* curl's low-speed limit should end a stalled transfer first; this
         * bounds the wait whatever curl does. */
        if (now_ms() - wait_start >= (uint64_t)o->s->request_ms) {
            log_msg(LOG_LVL_WARN, "backend", "s3: GET %s/%s stalled at %llu of %llu: no byte "
                    "for %ld ms", o->bucket, o->key, (unsigned long long)t->pos,
                    (unsigned long long)o->size, o->s->request_ms);
            return stream_failed(o, BACKEND_UNAVAILABLE);
        }
        if ((st = stream_step(t, 1000)) != BACKEND_OK)
            return stream_failed(o, st);
    }
    size_t n = s3_ring_get(&t->ring, buf, len);
    t->pos += n;
    *got = n;
    /* Resume once half the ring is free, not at every read: fewer
     * pause/resume round trips through curl. */
    if (t->paused && !t->done && t->ring.cap - t->ring.len >= t->ring.cap / 2)
        stream_resume(t);
    return BACKEND_OK;
}

/* ---- open / read / close ---- */

static void obj_free(struct s3_obj *o)
{
    stream_stop(o->s, &o->st);
    free(o->bucket);
    free(o->key);
    free(o->win);
    pthread_mutex_destroy(&o->mu);
    free(o);
}

static enum backend_status s3_object_open(struct backend *base, const char *bucket,
                                          const char *key, struct obj_meta *meta,
                                          struct backend_obj **out)
{
    struct s3_store *s = (struct s3_store *)base;
    *out = NULL;
    memset(meta, 0, sizeof *meta);
    /* One GET whose headers give the meta and whose body is read as it
     * streams: meta and bytes come from the same response, and a cold
     * fetch costs the cold tier one request. Reads elsewhere than the
     * stream's position use ranged GETs pinned to its ETag (If-Match). */
    struct s3_obj *o = calloc(1, sizeof *o);
    if (!o)
        return BACKEND_NOMEM;
    o->base.ops = &s3_ops;
    o->s = s;
    pthread_mutex_init(&o->mu, NULL);
    enum backend_status st = BACKEND_NOMEM;
    struct s3_stream *t = &o->st;
    o->bucket = strdup(cold_bucket(s, bucket));
    o->key = strdup(key);
    if (!o->bucket || !o->key)
        goto out;
    t->c = (struct s3_call){ .method = "GET", .bucket = o->bucket, .key = o->key,
                             .body_fd = -1, .idempotent = true, .long_transfer = true,
                             .rmax = S3_ERR_BODY_MAX, .hdrs = &checksum_mode };
    t->url = s3_url_build(s->endpoint, s->vhost, o->bucket, o->key, NULL);
    if (!t->url || call_hdr_list(s, &t->c, &t->hl) != BACKEND_OK)
        goto out;
    struct call_deadlines d = call_deadlines(s, &t->c);
    for (unsigned att = 0;; att++) {
        bool retry = false;
        st = stream_open_attempt(o, &d, &retry);
        if (st == BACKEND_OK || !retry || att >= s->retries)
            break;
        /* As in s3_do: a tier that does not answer gets about two connect
         * timeouts of our time in total, and no retry starts past the
         * first-byte deadline. */
        if (!(t->c.hdrs_done) && now_ms() - d.t0 >= (uint64_t)s->connect_ms * 2)
            break;
        if (deadline_passed(&d, false))
            break;
        backoff_sleep(att, ms_until(d.fb));
        if (deadline_passed(&d, false))
            break;
    }
    if (st != BACKEND_OK) {
        st = not_found(s, bucket, st, t->c.code);
        goto out;
    }
    if (!stream_length(t, &o->size)) {
        /* A server that streams without Content-Length: we could not tell
         * a short body. Fall back to HEAD + ranged GETs. */
        log_msg(LOG_LVL_WARN, "backend", "s3: GET %s: no Content-Length; reading by ranges",
                t->url);
        stream_stop(s, t);
        st = s3_object_head(base, bucket, key, meta);
        if (st != BACKEND_OK)
            goto out;
    } else if (s3_meta_from_headers(&t->c.rh, meta) != 0) {
        goto out;
    }
    memcpy(o->etag, meta->etag, sizeof o->etag);
    o->size = meta->size;
    *out = &o->base;
    return BACKEND_OK;
out:
    obj_meta_clear(meta);
    obj_free(o);
    return st;
}

static int s3_obj_fd(const struct backend_obj *o)
{
    (void)o;
    return -1;
}

/* Fetches the window starting at off. */
static enum backend_status window_fill(struct s3_obj *o, uint64_t off)
{
    uint64_t want = o->size - off;
    if (want > S3_READ_WINDOW)
        want = S3_READ_WINDOW;
    if (!o->win) {
        size_t cap = o->size < S3_READ_WINDOW ? (size_t)o->size : S3_READ_WINDOW;
        if (!(o->win = malloc(cap ? cap : 1)))
            return BACKEND_NOMEM;
    }
    char range[80], ifm[100];
    snprintf(range, sizeof range, "Range: bytes=%llu-%llu", (unsigned long long)off,
             (unsigned long long)(off + want - 1));
    snprintf(ifm, sizeof ifm, "If-Match: \"%s\"", o->etag);
    struct curl_slist h2 = { ifm, NULL }, h1 = { range, o->etag[0] ? &h2 : NULL };
    struct s3_call c = { .method = "GET", .bucket = o->bucket, .key = o->key, .hdrs = &h1,
                         .body_fd = -1, .idempotent = true, .long_transfer = true,
                         .sink = o->win, .sink_cap = (size_t)want };
    o->win_len = 0;
    enum backend_status st = s3_do(o->s, &c);
    if (st == BACKEND_OK && c.sink_len != want) {
        log_msg(LOG_LVL_ERROR, "backend", "s3: GET %s/%s at %llu: %zu bytes, expected %llu",
                o->bucket, o->key, (unsigned long long)off, c.sink_len,
                (unsigned long long)want);
        st = BACKEND_IO;
    } else if (st == BACKEND_OK && c.status == 200 && off != 0) {
        st = BACKEND_IO;   /* the server ignored Range */
    } else if (c.status == 412) {
        log_msg(LOG_LVL_WARN, "backend", "s3: %s/%s changed while open (ETag %s)", o->bucket,
                o->key, o->etag);
        st = BACKEND_IO;
    }
    if (st == BACKEND_OK) {
        o->win_off = off;
        o->win_len = c.sink_len;
    }
    call_free(&c);
    return st;
}

static enum backend_status s3_obj_read(struct backend_obj *base, uint64_t off, void *buf,
                                       size_t len, size_t *got)
{
    struct s3_obj *o = (struct s3_obj *)base;
    *got = 0;
    if (off >= o->size || len == 0)
        return BACKEND_OK;
    pthread_mutex_lock(&o->mu);
    enum backend_status st = BACKEND_OK;
    if (!(off >= o->win_off && off < o->win_off + o->win_len)) {
        /* A stream that failed stays "usable": its reads get the failure. */
        bool stream = o->st.multi || o->st.fail != BACKEND_OK;
        switch (s3_read_path_pick(stream, o->st.pos, off)) {
        case S3_READ_SKIP:
            while (st == BACKEND_OK && o->st.pos < off) {
                size_t n = 0;
                st = stream_take(o, NULL, (size_t)(off - o->st.pos), &n);
            }
            if (st != BACKEND_OK)
                goto out;
            /* fall through */
        case S3_READ_STREAM:
            st = stream_take(o, buf, len, got);
            goto out;
        case S3_READ_RANGED:
            st = window_fill(o, off);
            break;
        }
    }
    if (st == BACKEND_OK) {
        size_t at = (size_t)(off - o->win_off);
        size_t n = o->win_len - at;
        if (n > len)
            n = len;
        memcpy(buf, o->win + at, n);
        *got = n;
    }
out:
    pthread_mutex_unlock(&o->mu);
    return st;
}

static void s3_obj_close(struct backend_obj *base)
{
    obj_free((struct s3_obj *)base);
}

/* ---- writing ---- */

static enum backend_status spool_open(struct s3_store *s, int *fd)
{
    *fd = open(s->spool_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (*fd >= 0)
        return BACKEND_OK;
    int e = errno;
    if (e == EOPNOTSUPP || e == EISDIR || e == EINVAL) {
        /* No O_TMPFILE on this filesystem: a named file, unlinked at once. */
        char path[4096];
        snprintf(path, sizeof path, "%s/.sg-spool-XXXXXX", s->spool_dir);
        *fd = mkostemp(path, O_CLOEXEC);
        if (*fd >= 0) {
            unlink(path);
            return BACKEND_OK;
        }
        e = errno;
    }
    log_msg(LOG_LVL_ERROR, "backend", "s3: spool file in %s: %s", s->spool_dir, strerror(e));
    return e == ENOSPC || e == EDQUOT ? BACKEND_NO_SPACE : BACKEND_IO;
}

static enum backend_status put_new(struct s3_store *s, const char *bucket, const char *key,
                                   struct s3_put **out)
{
    struct s3_put *p = calloc(1, sizeof *p);
    if (!p)
        return BACKEND_NOMEM;
    p->base.ops = &s3_ops;
    p->s = s;
    p->fd = -1;
    p->bucket = strdup(cold_bucket(s, bucket));
    p->key = strdup(key);
    if (!p->bucket || !p->key) {
        free(p->bucket);
        free(p->key);
        free(p);
        return BACKEND_NOMEM;
    }
    enum backend_status st = spool_open(s, &p->fd);
    if (st != BACKEND_OK) {
        free(p->bucket);
        free(p->key);
        free(p);
        return st;
    }
    *out = p;
    return BACKEND_OK;
}

static enum backend_status key_check(const char *key)
{
    size_t l = strlen(key);
    if (l == 0)
        return BACKEND_BAD_KEY;
    return l > 1024 ? BACKEND_KEY_TOO_LONG : BACKEND_OK;
}

static enum backend_status s3_put_begin(struct backend *base, const char *bucket,
                                        const char *key, struct backend_put **out)
{
    struct s3_store *s = (struct s3_store *)base;
    *out = NULL;
    enum backend_status st = key_check(key);
    if (st == BACKEND_OK)
        st = s3_bucket_head(base, bucket);   /* NoSuchBucket before any byte */
    struct s3_put *p = NULL;
    if (st == BACKEND_OK)
        st = put_new(s, bucket, key, &p);
    if (st != BACKEND_OK)
        return st;
    p->max_size = S3_MAX_OBJECT;
    *out = &p->base;
    return BACKEND_OK;
}

static enum backend_status s3_put_write(struct backend_put *base, const void *buf, size_t len)
{
    struct s3_put *p = (struct s3_put *)base;
    if (p->failed)
        return p->fail_st;
    if (len > p->max_size - p->size) {
        p->failed = true;
        p->fail_st = BACKEND_TOO_LARGE;
        return p->fail_st;
    }
    const char *b = buf;
    while (len) {
        ssize_t n = write(p->fd, b, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            log_msg(LOG_LVL_ERROR, "backend", "s3: write spool: %s", strerror(e));
            p->failed = true;
            p->fail_st = e == ENOSPC || e == EDQUOT ? BACKEND_NO_SPACE : BACKEND_IO;
            return p->fail_st;
        }
        b += n;
        len -= (size_t)n;
        p->size += (uint64_t)n;
    }
    return BACKEND_OK;
}

static void put_free(struct s3_put *p)
{
    if (p->fd >= 0)
        close(p->fd);
    free(p->bucket);
    free(p->key);
    free(p->upload_id);
    free(p);
}

/* Appends "name: value" of the stored headers of meta; skip_checksums drops
 * x-amz-checksum-<algo> values (they describe the whole object, not what a
 * multipart create carries) but keeps a create's x-amz-checksum-algorithm and
 * x-amz-checksum-type, which the cold S3 then enforces. 0 or -1. */
static int add_meta_headers(struct curl_slist **hl, const struct obj_meta *m,
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
        char *line = NULL;
        if (asprintf(&line, "%s: %s", n, m->hdrs[i].value) < 0)
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

/* Content-MD5 from a bare 32-hex ETag; 0, or -1 when it is not one. */
static int content_md5(const char *etag, char out[64])
{
    unsigned char md5[16];
    if (strlen(etag) != 32 || posix_hex_to_md5(etag, md5) != 0)
        return -1;
    unsigned char b64[32];
    EVP_EncodeBlock(b64, md5, 16);
    snprintf(out, 64, "Content-MD5: %s", (const char *)b64);
    return 0;
}

static enum backend_status upload_part_fd(struct s3_store *s, const char *bucket,
                                          const char *key, const char *upload_id,
                                          unsigned part_no, int fd, uint64_t off, uint64_t len,
                                          const char *md5_etag, const char *checksum_line,
                                          char etag_out[72])
{
    char *eid = s3_uri_encode(upload_id, false);
    char *q = NULL;
    if (!eid || asprintf(&q, "partNumber=%u&uploadId=%s", part_no, eid) < 0) {
        free(eid);
        return BACKEND_NOMEM;
    }
    free(eid);
    char md5h[64];
    /* The part's checksum goes along: the cold S3 verifies and stores it,
     * and needs it when the upload declared an algorithm. */
    struct curl_slist h2 = { (char *)checksum_line, NULL };
    struct curl_slist h1 = { md5h, checksum_line ? &h2 : NULL };
    bool has_md5 = md5_etag && content_md5(md5_etag, md5h) == 0;
    struct s3_call c = { .method = "PUT", .bucket = bucket, .key = key, .query = q,
                         .hdrs = has_md5 ? &h1 : checksum_line ? &h2 : NULL,
                         .body_fd = fd, .fd_off = off,
                         .fd_len = len, .idempotent = true, .long_transfer = true,
                         .slow_answer = true };
    enum backend_status st = s3_do(s, &c);
    if (st == BACKEND_OK) {
        const char *e = obj_meta_get_hdr(&c.rh, "etag");
        if (e)
            s3_etag_bare(e, etag_out);
        else
            st = BACKEND_IO;
    }
    call_free(&c);
    free(q);
    return st;
}

static enum backend_status mpu_create_cold(struct s3_store *s, const char *cbucket,
                                           const char *key, const struct obj_meta *meta,
                                           char id[BACKEND_UPLOAD_ID_MAX]);
static enum backend_status mpu_complete_cold(struct s3_store *s, const char *cbucket,
                                             const char *key, const char *upload_id,
                                             const struct backend_part *parts, size_t n,
                                             struct obj_meta *ck);
static void mpu_abort_cold(struct s3_store *s, const char *cbucket, const char *key,
                           const char *upload_id);

/* A spooled object over S3_MPU_THRESHOLD: multipart upload of the file. */
static enum backend_status put_multipart(struct s3_put *p, const struct obj_meta *meta)
{
    struct s3_store *s = p->s;
    uint64_t part = S3_MPU_PART;
    while ((p->size + part - 1) / part > BACKEND_MAX_PARTS)
        part *= 2;
    size_t n = (size_t)((p->size + part - 1) / part);
    struct backend_part *parts = calloc(n, sizeof *parts);
    char *id = malloc(BACKEND_UPLOAD_ID_MAX);
    if (!parts || !id) {
        free(parts);
        free(id);
        return BACKEND_NOMEM;
    }
    enum backend_status st = mpu_create_cold(s, p->bucket, p->key, meta, id);
    for (size_t i = 0; st == BACKEND_OK && i < n; i++) {
        uint64_t off = (uint64_t)i * part;
        uint64_t len = p->size - off < part ? p->size - off : part;
        parts[i].part_no = (unsigned)i + 1;
        st = upload_part_fd(s, p->bucket, p->key, id, parts[i].part_no, p->fd, off, len, NULL,
                            NULL, parts[i].etag);
    }
    if (st == BACKEND_OK)
        st = mpu_complete_cold(s, p->bucket, p->key, id, parts, n, NULL);
    else if (id[0])
        mpu_abort_cold(s, p->bucket, p->key, id);
    free(parts);
    free(id);
    return st;
}

static enum backend_status s3_put_commit(struct backend_put *base, const struct obj_meta *meta,
                                         struct obj_meta *out)
{
    struct s3_put *p = (struct s3_put *)base;
    struct s3_store *s = p->s;
    enum backend_status st = BACKEND_OK;
    char etag[72] = "";
    if (p->failed) {
        st = p->fail_st;
        goto out;
    }
    if (p->upload_id) {
        /* A part. */
        char *ckline = NULL;
        for (size_t i = 0; meta && i < meta->n_hdrs && !ckline; i++) {
            if (strncmp(meta->hdrs[i].name, "x-amz-checksum-", 15) == 0 &&
                asprintf(&ckline, "%s: %s", meta->hdrs[i].name, meta->hdrs[i].value) < 0) {
                st = BACKEND_NOMEM;
                goto out;
            }
        }
        st = upload_part_fd(s, p->bucket, p->key, p->upload_id, p->part_no, p->fd, 0, p->size,
                            meta ? meta->etag : NULL, ckline, etag);
        free(ckline);
        if (st == BACKEND_OK && out) {
            memset(out, 0, sizeof *out);
            out->size = p->size;
            clock_gettime(CLOCK_REALTIME, &out->mtime);
            memcpy(out->etag, etag, sizeof etag);
        }
        goto out;
    }
    if (p->size > S3_MPU_THRESHOLD) {
        st = put_multipart(p, meta);
    } else {
        struct curl_slist *hl = NULL;
        char md5h[64];
        if (add_meta_headers(&hl, meta, false) != 0) {
            curl_slist_free_all(hl);
            st = BACKEND_NOMEM;
            goto out;
        }
        if (meta && content_md5(meta->etag, md5h) == 0) {
            struct curl_slist *t = curl_slist_append(hl, md5h);
            if (t)
                hl = t;
        }
        struct s3_call c = { .method = "PUT", .bucket = p->bucket, .key = p->key, .hdrs = hl,
                             .body_fd = p->fd, .fd_len = p->size, .idempotent = true,
                             .long_transfer = true,
                             .slow_answer = true };
        st = s3_do(s, &c);
        call_free(&c);
        curl_slist_free_all(hl);
    }
    if (st == BACKEND_OK && out) {
        /* What the cold tier now holds (its ETag and time, our size). */
        struct s3_call c = { .method = "HEAD", .bucket = p->bucket, .key = p->key,
                             .body_fd = -1, .idempotent = true };
        memset(out, 0, sizeof *out);
        if (s3_do(s, &c) == BACKEND_OK) {
            const char *e = obj_meta_get_hdr(&c.rh, "etag");
            const char *lm = obj_meta_get_hdr(&c.rh, "last-modified");
            if (e)
                s3_etag_bare(e, out->etag);
            if (lm)
                out->mtime.tv_sec = curl_getdate(lm, NULL);
        } else if (meta) {
            memcpy(out->etag, meta->etag, sizeof out->etag);
            clock_gettime(CLOCK_REALTIME, &out->mtime);
        }
        out->size = p->size;
        call_free(&c);
    }
out:
    put_free(p);
    return st;
}

static void s3_put_abort(struct backend_put *base)
{
    put_free((struct s3_put *)base);
}

/* x-amz-copy-source: /bucket/key, the key URI-encoded. */
static char *copy_source_header(const char *cbucket, const char *key)
{
    char *ek = s3_uri_encode(key, true);
    char *h = NULL;
    if (ek && asprintf(&h, "x-amz-copy-source: /%s/%s", cbucket, ek) < 0)
        h = NULL;
    free(ek);
    return h;
}

static enum backend_status s3_object_copy(struct backend *base, const char *src_bucket,
                                          const char *src_key, const char *dst_bucket,
                                          const char *dst_key, const struct obj_meta *meta,
                                          struct obj_meta *out)
{
    struct s3_store *s = (struct s3_store *)base;
    struct curl_slist *hl = NULL, *t;
    char *cs = copy_source_header(cold_bucket(s, src_bucket), src_key);
    enum backend_status st = BACKEND_NOMEM;
    if (!cs || !(t = curl_slist_append(hl, cs)))
        goto out;
    hl = t;
    if (!(t = curl_slist_append(hl, meta ? "x-amz-metadata-directive: REPLACE"
                                         : "x-amz-metadata-directive: COPY")))
        goto out;
    hl = t;
    if (meta && add_meta_headers(&hl, meta, true) != 0)
        goto out;
    struct s3_call c = { .method = "PUT", .bucket = cold_bucket(s, dst_bucket), .key = dst_key,
                         .hdrs = hl, .body_fd = -1, .body = "", .idempotent = true,
                         .long_transfer = true,
                         .slow_answer = true };
    st = s3_do(s, &c);
    struct obj_meta r;
    memset(&r, 0, sizeof r);
    /* A copy can fail after its 200: the error is then in the body. */
    if (st == BACKEND_OK && s3_xml_etag_result(c.rbuf, c.rlen, &r) != BACKEND_OK) {
        if (c.rbuf && s3_xml_error_code(c.rbuf, c.rlen, c.code, sizeof c.code) == 0)
            st = s3_status_from_code(c.code, 500);
        else
            st = BACKEND_IO;
    }
    if (st == BACKEND_NO_KEY && !c.code[0])
        st = BACKEND_NO_KEY;
    call_free(&c);
    if (st == BACKEND_OK && out)
        st = s3_object_head(base, dst_bucket, dst_key, out);
out:
    curl_slist_free_all(hl);
    free(cs);
    return st;
}

static enum backend_status s3_object_delete(struct backend *base, const char *bucket,
                                            const char *key)
{
    struct s3_store *s = (struct s3_store *)base;
    struct s3_call c = { .method = "DELETE", .bucket = cold_bucket(s, bucket), .key = key,
                         .body_fd = -1, .idempotent = true };
    enum backend_status st = s3_do(s, &c);
    call_free(&c);
    return st;
}

/* ---- listing ---- */

/* Appends "&name=value" (value encoded) to a query being built. */
static int q_add(char **q, const char *name, const char *value)
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

static enum backend_status s3_list_objects(struct backend *base, const char *bucket,
                                           const struct backend_list_req *req,
                                           struct backend_list_page *out)
{
    struct s3_store *s = (struct s3_store *)base;
    memset(out, 0, sizeof *out);
    if (req->max_keys == 0)
        return s3_bucket_head(base, bucket);
    const char *prefix = req->prefix ? req->prefix : "";
    const char *delim = req->delimiter && *req->delimiter ? req->delimiter : NULL;
    /* backend.h: a start_after inside a common prefix skips the whole prefix.
     * S3 would return that prefix again, so start after the prefix followed
     * by U+10FFFF, the largest code point (a key under the prefix that starts
     * with it would be skipped: accepted). */
    char *sa = NULL;
    if (req->start_after && *req->start_after) {
        size_t l = strlen(req->start_after);
        size_t pl = strlen(prefix);
        size_t roll = delim && strncmp(req->start_after, prefix, pl) == 0
                          ? posix_rollup(req->start_after, l, pl, delim)
                          : 0;
        if (roll) {
            if (asprintf(&sa, "%.*s\xf4\x8f\xbf\xbf", (int)roll, req->start_after) < 0)
                sa = NULL;
        } else {
            sa = strdup(req->start_after);
        }
        if (!sa)
            return BACKEND_NOMEM;
    }
    /* Canonical (sorted) query: SigV4 needs it and libcurl 7.88 signs the
     * query as given. */
    char *q = NULL;
    char mk[16];
    snprintf(mk, sizeof mk, "%u", req->max_keys > 1000 ? 1000 : req->max_keys);
    int rc = 0;
    if (delim)
        rc |= q_add(&q, "delimiter", delim);
    rc |= q_add(&q, "encoding-type", "url");
    rc |= q_add(&q, "list-type", "2");
    rc |= q_add(&q, "max-keys", mk);
    rc |= q_add(&q, "prefix", prefix);
    if (sa)
        rc |= q_add(&q, "start-after", sa);
    free(sa);
    if (rc) {
        free(q);
        return BACKEND_NOMEM;
    }
    struct s3_call c;
    enum backend_status st = get_listing(s, &c, bucket, NULL, q);
    if (st == BACKEND_OK)
        st = s3_xml_list_objects(c.rbuf, c.rlen, out);
    call_free(&c);
    free(q);
    return st;
}

/* ---- multipart ---- */

static char *upload_query(const char *upload_id, const char *extra)
{
    char *eid = s3_uri_encode(upload_id, false);
    char *q = NULL;
    if (eid && asprintf(&q, "%s%suploadId=%s", extra ? extra : "", extra ? "&" : "", eid) < 0)
        q = NULL;
    free(eid);
    return q;
}

static enum backend_status mpu_create_cold(struct s3_store *s, const char *cbucket,
                                           const char *key, const struct obj_meta *meta,
                                           char id[BACKEND_UPLOAD_ID_MAX])
{
    id[0] = '\0';
    struct curl_slist *hl = NULL;
    if (add_meta_headers(&hl, meta, true) != 0) {
        curl_slist_free_all(hl);
        return BACKEND_NOMEM;
    }
    /* Not idempotent: a retry could leave an orphan upload behind. */
    struct s3_call c = { .method = "POST", .bucket = cbucket, .key = key, .query = "uploads=",
                         .hdrs = hl, .body_fd = -1, .idempotent = false };
    enum backend_status st = s3_do(s, &c);
    if (st == BACKEND_OK)
        st = s3_xml_upload_id(c.rbuf, c.rlen, id);
    call_free(&c);
    curl_slist_free_all(hl);
    return st;
}

static enum backend_status s3_mpu_create(struct backend *base, const char *bucket,
                                         const char *key, const struct obj_meta *meta,
                                         char upload_id[BACKEND_UPLOAD_ID_MAX])
{
    struct s3_store *s = (struct s3_store *)base;
    enum backend_status st = key_check(key);
    if (st != BACKEND_OK)
        return st;
    return mpu_create_cold(s, cold_bucket(s, bucket), key, meta, upload_id);
}

static enum backend_status s3_mpu_part_begin(struct backend *base, const char *bucket,
                                             const char *key, const char *upload_id,
                                             unsigned part_no, struct backend_put **out)
{
    struct s3_store *s = (struct s3_store *)base;
    *out = NULL;
    if (part_no < 1 || part_no > BACKEND_MAX_PARTS)
        return BACKEND_INVALID_PART;
    struct s3_put *p = NULL;
    enum backend_status st = put_new(s, bucket, key, &p);
    if (st != BACKEND_OK)
        return st;
    p->upload_id = strdup(upload_id);
    if (!p->upload_id) {
        put_free(p);
        return BACKEND_NOMEM;
    }
    p->part_no = part_no;
    p->max_size = S3_MAX_PUT;
    *out = &p->base;
    return BACKEND_OK;
}

static enum backend_status s3_mpu_part_copy(struct backend *base, const char *bucket,
                                            const char *key, const char *upload_id,
                                            unsigned part_no, const char *src_bucket,
                                            const char *src_key, bool has_range,
                                            uint64_t first, uint64_t last, struct obj_meta *out)
{
    struct s3_store *s = (struct s3_store *)base;
    memset(out, 0, sizeof *out);
    char extra[32];
    snprintf(extra, sizeof extra, "partNumber=%u", part_no);
    char *q = upload_query(upload_id, extra);
    char *cs = copy_source_header(cold_bucket(s, src_bucket), src_key);
    char range[96];
    snprintf(range, sizeof range, "x-amz-copy-source-range: bytes=%llu-%llu",
             (unsigned long long)first, (unsigned long long)last);
    struct curl_slist h2 = { range, NULL }, h1 = { cs, has_range ? &h2 : NULL };
    enum backend_status st = BACKEND_NOMEM;
    if (!q || !cs)
        goto out;
    uint64_t size = last - first + 1;
    if (!has_range) {
        struct obj_meta sm;
        st = s3_object_head(base, src_bucket, src_key, &sm);
        if (st != BACKEND_OK)
            goto out;
        size = sm.size;
        obj_meta_clear(&sm);
    }
    struct s3_call c = { .method = "PUT", .bucket = cold_bucket(s, bucket), .key = key,
                         .query = q, .hdrs = &h1, .body_fd = -1, .body = "",
                         .idempotent = true, .long_transfer = true,
                         .slow_answer = true };
    st = s3_do(s, &c);
    if (st == BACKEND_OK && s3_xml_etag_result(c.rbuf, c.rlen, out) != BACKEND_OK) {
        if (c.rbuf && s3_xml_error_code(c.rbuf, c.rlen, c.code, sizeof c.code) == 0)
            st = s3_status_from_code(c.code, 500);
        else
            st = BACKEND_IO;
    }
    call_free(&c);
    out->size = size;
out:
    free(q);
    free(cs);
    return st;
}

/* The element of a Complete body or result holding a checksum, by the
 * header name of its algorithm; NULL when unknown. */
static const char *checksum_elem(const char *hdr)
{
    static const char *const map[][2] = {
        { "x-amz-checksum-crc32", "ChecksumCRC32" },
        { "x-amz-checksum-crc32c", "ChecksumCRC32C" },
        { "x-amz-checksum-crc64nvme", "ChecksumCRC64NVME" },
        { "x-amz-checksum-sha1", "ChecksumSHA1" },
        { "x-amz-checksum-sha256", "ChecksumSHA256" },
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(hdr, map[i][0]) == 0)
            return map[i][1];
    return NULL;
}

/* Copies the text of the first <tag>text</tag> in a flat S3 result into
 * out; 0, or -1 when absent or too long. The results searched are S3's own
 * fixed shapes with base64 or upper-case word values: no nesting, no
 * entities to decode. */
static int result_text(const char *xml, size_t len, const char *tag, char *out, size_t outlen)
{
    char open[48];
    snprintf(open, sizeof open, "<%s>", tag);
    size_t ol = strlen(open);
    const char *p = xml ? memmem(xml, len, open, ol) : NULL;
    if (!p)
        return -1;
    p += ol;
    const char *e = memchr(p, '<', len - (size_t)(p - xml));
    if (!e || (size_t)(e - p) >= outlen)
        return -1;
    memcpy(out, p, (size_t)(e - p));
    out[e - p] = '\0';
    return 0;
}

/* The checksum headers of the object a cold Complete assembled, from its
 * CompleteMultipartUploadResult. 0, or -1 when out of memory. */
static int complete_checksums(const char *xml, size_t len, struct obj_meta *ck)
{
    static const char *const hdrs[] = {
        "x-amz-checksum-crc32", "x-amz-checksum-crc32c", "x-amz-checksum-crc64nvme",
        "x-amz-checksum-sha1", "x-amz-checksum-sha256",
    };
    char v[128];
    for (size_t i = 0; i < sizeof hdrs / sizeof hdrs[0]; i++) {
        if (result_text(xml, len, checksum_elem(hdrs[i]), v, sizeof v) == 0 && v[0]) {
            if (obj_meta_add_hdr(ck, hdrs[i], v) != 0)
                return -1;
            if (result_text(xml, len, "ChecksumType", v, sizeof v) == 0 && v[0] &&
                obj_meta_add_hdr(ck, "x-amz-checksum-type", v) != 0)
                return -1;
            break;
        }
    }
    return 0;
}

static enum backend_status mpu_complete_cold(struct s3_store *s, const char *cbucket,
                                             const char *key, const char *upload_id,
                                             const struct backend_part *parts, size_t n,
                                             struct obj_meta *ck)
{
    /* <Part><PartNumber>10000</PartNumber><ETag>"..."</ETag>
     * <ChecksumCRC64NVME>(95)</ChecksumCRC64NVME></Part> */
    size_t cap = 128 + n * 290;
    char *body = malloc(cap);
    char *q = upload_query(upload_id, NULL);
    enum backend_status st = BACKEND_NOMEM;
    if (!body || !q)
        goto out;
    size_t len = (size_t)snprintf(body, cap, "<CompleteMultipartUpload>");
    for (size_t i = 0; i < n; i++) {
        /* ETags are hex (and '-'): nothing to escape, but be sure. */
        if (strpbrk(parts[i].etag, "<>&\"")) {
            st = BACKEND_INVALID_PART;
            goto out;
        }
        len += (size_t)snprintf(body + len, cap - len,
                                "<Part><PartNumber>%u</PartNumber><ETag>\"%s\"</ETag>",
                                parts[i].part_no, parts[i].etag);
        const char *el = parts[i].checksum_name[0] ? checksum_elem(parts[i].checksum_name)
                                                   : NULL;
        if (parts[i].checksum_name[0] && (!el || strpbrk(parts[i].checksum, "<>&\""))) {
            st = BACKEND_INVALID_PART;
            goto out;
        }
        if (el)
            len += (size_t)snprintf(body + len, cap - len, "<%s>%.95s</%s>", el,
                                    parts[i].checksum, el);
        len += (size_t)snprintf(body + len, cap - len, "</Part>");
    }
    len += (size_t)snprintf(body + len, cap - len, "</CompleteMultipartUpload>");
    struct curl_slist h1 = { "Content-Type: application/xml", NULL };
    /* Retried: S3 documents CompleteMultipartUpload as safe to retry (a
     * repeat of a completed upload answers with the same result or
     * NoSuchUpload, which we then check against the object). */
    struct s3_call c = { .method = "POST", .bucket = cbucket, .key = key, .query = q,
                         .hdrs = &h1, .body = body, .body_len = len, .body_fd = -1,
                         .idempotent = true, .long_transfer = true,
                         .slow_answer = true };
    st = s3_do(s, &c);
    /* 200 can still carry an <Error> (S3 sends it while assembling). */
    if (st == BACKEND_OK) {
        struct obj_meta r;
        memset(&r, 0, sizeof r);
        if (s3_xml_etag_result(c.rbuf, c.rlen, &r) != BACKEND_OK) {
            if (c.rbuf && s3_xml_error_code(c.rbuf, c.rlen, c.code, sizeof c.code) == 0)
                st = s3_status_from_code(c.code, 500);
            else
                st = BACKEND_IO;
        }
        obj_meta_clear(&r);
        if (st == BACKEND_OK && ck && complete_checksums(c.rbuf, c.rlen, ck) != 0)
            st = BACKEND_NOMEM;
    }
    call_free(&c);
out:
    free(body);
    free(q);
    return st;
}

static void mpu_abort_cold(struct s3_store *s, const char *cbucket, const char *key,
                           const char *upload_id)
{
    char *q = upload_query(upload_id, NULL);
    if (!q)
        return;
    struct s3_call c = { .method = "DELETE", .bucket = cbucket, .key = key, .query = q,
                         .body_fd = -1, .idempotent = true };
    (void)s3_do(s, &c);
    call_free(&c);
    free(q);
}

static enum backend_status s3_mpu_complete(struct backend *base, const char *bucket,
                                           const char *key, const char *upload_id,
                                           const struct backend_part *parts, size_t n_parts,
                                           const struct obj_meta *meta, struct obj_meta *out)
{
    (void)meta;   /* the cold S3 computes the object's checksum itself */
    struct s3_store *s = (struct s3_store *)base;
    struct obj_meta ck;
    memset(&ck, 0, sizeof ck);
    enum backend_status st = mpu_complete_cold(s, cold_bucket(s, bucket), key, upload_id,
                                               parts, n_parts, &ck);
    if (st == BACKEND_OK && out)
        st = s3_object_head(base, bucket, key, out);
    /* A HEAD without x-amz-checksum-mode has no checksum: add the one the
     * Complete answered with. */
    for (size_t i = 0; st == BACKEND_OK && out && i < ck.n_hdrs; i++) {
        if (!obj_meta_get_hdr(out, ck.hdrs[i].name) &&
            obj_meta_add_hdr(out, ck.hdrs[i].name, ck.hdrs[i].value) != 0)
            st = BACKEND_NOMEM;
    }
    obj_meta_clear(&ck);
    return st;
}

static enum backend_status s3_mpu_head(struct backend *base, const char *bucket,
                                       const char *key, const char *upload_id,
                                       struct obj_meta *meta)
{
    /* No call: the cold S3 holds the upload's settings and enforces them
     * on each UploadPart and the Complete; an unknown upload shows there. */
    (void)base;
    (void)bucket;
    (void)key;
    (void)upload_id;
    memset(meta, 0, sizeof *meta);
    return BACKEND_OK;
}

static enum backend_status s3_mpu_abort(struct backend *base, const char *bucket,
                                        const char *key, const char *upload_id)
{
    struct s3_store *s = (struct s3_store *)base;
    char *q = upload_query(upload_id, NULL);
    if (!q)
        return BACKEND_NOMEM;
    struct s3_call c = { .method = "DELETE", .bucket = cold_bucket(s, bucket), .key = key,
                         .query = q, .body_fd = -1, .idempotent = true };
    enum backend_status st = s3_do(s, &c);
    call_free(&c);
    free(q);
    return st;
}

static enum backend_status s3_mpu_list_parts(struct backend *base, const char *bucket,
                                             const char *key, const char *upload_id,
                                             unsigned marker, unsigned max_parts,
                                             struct backend_parts_page *out)
{
    struct s3_store *s = (struct s3_store *)base;
    memset(out, 0, sizeof *out);
    char extra[64];
    snprintf(extra, sizeof extra, "max-parts=%u&part-number-marker=%u",
             max_parts ? max_parts : 1000, marker);
    char *q = upload_query(upload_id, extra);
    if (!q)
        return BACKEND_NOMEM;
    struct s3_call c;
    enum backend_status st = get_listing(s, &c, bucket, key, q);
    if (st == BACKEND_OK)
        st = s3_xml_list_parts(c.rbuf, c.rlen, out);
    call_free(&c);
    free(q);
    return st;
}

static enum backend_status s3_mpu_list_uploads(struct backend *base, const char *bucket,
                                               const char *prefix, const char *delimiter,
                                               const char *key_marker,
                                               const char *upload_id_marker,
                                               unsigned max_uploads,
                                               struct backend_uploads_page *out)
{
    struct s3_store *s = (struct s3_store *)base;
    memset(out, 0, sizeof *out);
    char *q = NULL;
    char mu[16];
    snprintf(mu, sizeof mu, "%u", max_uploads ? max_uploads : 1000);
    int rc = 0;
    if (delimiter && *delimiter)
        rc |= q_add(&q, "delimiter", delimiter);
    if (key_marker && *key_marker)
        rc |= q_add(&q, "key-marker", key_marker);
    rc |= q_add(&q, "max-uploads", mu);
    rc |= q_add(&q, "prefix", prefix ? prefix : "");
    if (key_marker && *key_marker && upload_id_marker && *upload_id_marker)
        rc |= q_add(&q, "upload-id-marker", upload_id_marker);
    rc |= q_add(&q, "uploads", "");
    if (rc) {
        free(q);
        return BACKEND_NOMEM;
    }
    struct s3_call c;
    enum backend_status st = get_listing(s, &c, bucket, NULL, q);
    if (st == BACKEND_OK)
        st = s3_xml_list_uploads(c.rbuf, c.rlen, out);
    call_free(&c);
    free(q);
    return st;
}

static const struct backend_ops s3_ops = {
    .name = "s3",
    .close = s3_close,
    .bucket_list = s3_bucket_list,
    .bucket_create = s3_bucket_create,
    .bucket_head = s3_bucket_head,
    .bucket_delete = s3_bucket_delete,
    .object_head = s3_object_head,
    .object_open = s3_object_open,
    .obj_fd = s3_obj_fd,
    .obj_read = s3_obj_read,
    .obj_close = s3_obj_close,
    .put_begin = s3_put_begin,
    .put_write = s3_put_write,
    .put_commit = s3_put_commit,
    .put_abort = s3_put_abort,
    .object_copy = s3_object_copy,
    .object_delete = s3_object_delete,
    .list_objects = s3_list_objects,
    .mpu_create = s3_mpu_create,
    .mpu_part_begin = s3_mpu_part_begin,
    .mpu_part_copy = s3_mpu_part_copy,
    .mpu_complete = s3_mpu_complete,
    .mpu_head = s3_mpu_head,
    .mpu_abort = s3_mpu_abort,
    .mpu_list_parts = s3_mpu_list_parts,
    .mpu_list_uploads = s3_mpu_list_uploads,
    .object_head_timed = s3_object_head_timed,
    .probe = s3_probe,
    .info = s3_info,
};
