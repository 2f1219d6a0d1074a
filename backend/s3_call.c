/* backend/s3_call.c - the request engine of the S3 cold tier: pooled easy
 * handles, the header/body/upload callbacks, one attempt's curl options, and
 * s3_do, which runs a call with its retries (idempotent calls only) within
 * its deadlines. Every verb goes through here; s3_read.c reuses its parts. */
#include "s3_int.h"
#include "log.h"
#include "sigv4.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void *s3_idle_take(struct s3_store *s, struct s3_idle *p)
{
    void *h = NULL;
    pthread_mutex_lock(&s->mu);
    if (p->n)
        h = p->h[--p->n];
    pthread_mutex_unlock(&s->mu);
    return h;
}

bool s3_idle_keep(struct s3_store *s, struct s3_idle *p, void *h)
{
    pthread_mutex_lock(&s->mu);
    bool kept = p->n < S3_POOL_MAX;
    if (kept)
        p->h[p->n++] = h;
    pthread_mutex_unlock(&s->mu);
    return kept;
}

CURL *s3_handle_get(struct s3_store *s)
{
    CURL *h = s3_idle_take(s, &s->easy_idle);
    if (h)
        curl_easy_reset(h);   /* keeps the live connections of the handle */
    else
        h = curl_easy_init();
    return h;
}

void s3_handle_put(struct s3_store *s, CURL *h)
{
    if (h && !s3_idle_keep(s, &s->easy_idle, h))
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

size_t s3_on_body(char *buf, size_t size, size_t n, void *arg)
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

enum {
    S3_DIO_ALIGN = 4096,           /* offsets, lengths and buffers of O_DIRECT reads */
    S3_DIO_BUF = 1024 * 1024,      /* one O_DIRECT read: curl takes it 64 KiB at a time */
};

/* Up to want bytes of an O_DIRECT body_fd at the upload position, copied
 * from an aligned window read around the page cache (a write-back upload of
 * a staged file: its bytes are not in the page cache, and bringing them in
 * costs more than this one copy; bench/results/stage-read-direct.md). A
 * refused O_DIRECT read turns the descriptor buffered. -1: failed (errno). */
static ssize_t read_window(struct s3_call *c, char *buf, size_t want)
{
    uint64_t pos = c->fd_off + c->fd_pos;
    if (!c->dbuf || pos < c->dbuf_at || pos >= c->dbuf_at + c->dbuf_len) {
        if (!c->dbuf && !(c->dbuf = aligned_alloc(S3_DIO_ALIGN, S3_DIO_BUF)))
            return -1;
        uint64_t at = pos / S3_DIO_ALIGN * S3_DIO_ALIGN;
        uint64_t end = c->fd_off + c->fd_len;
        uint64_t span = (end - at + S3_DIO_ALIGN - 1) / S3_DIO_ALIGN * S3_DIO_ALIGN;
        ssize_t r;
        do
            r = pread(c->body_fd, c->dbuf, span < S3_DIO_BUF ? (size_t)span : S3_DIO_BUF,
                      (off_t)at);
        while (r < 0 && errno == EINTR);
        if (r < 0 && errno == EINVAL) {
            int fl = fcntl(c->body_fd, F_GETFL);
            if (fl >= 0 && fcntl(c->body_fd, F_SETFL, fl & ~O_DIRECT) == 0) {
                c->fd_direct = false;
                c->dbuf_len = 0;
                do
                    r = pread(c->body_fd, buf, want, (off_t)pos);
                while (r < 0 && errno == EINTR);
                return r;
            }
            errno = EINVAL;
        }
        if (r < 0)
            return -1;
        c->dbuf_at = at;
        c->dbuf_len = (size_t)r;
        if (pos >= at + (uint64_t)r)
            return 0;   /* the file ends before the body */
    }
    size_t have = (size_t)(c->dbuf_at + c->dbuf_len - pos);
    size_t n = want < have ? want : have;
    memcpy(buf, c->dbuf + (pos - c->dbuf_at), n);
    backend_stats_direct(true, n);
    return (ssize_t)n;
}

static size_t on_read(char *buf, size_t size, size_t n, void *arg)
{
    struct s3_call *c = arg;
    if (c->body_fd >= 0) {
        uint64_t left = c->fd_len - c->fd_pos;
        size_t want = size * n < left ? size * n : (size_t)left;
        if (want == 0)
            return 0;
        if (c->pace && c->pace->last && want == left) {   /* the body's last byte */
            if (left > 1)
                want = (size_t)left - 1;   /* all but it now */
            else if (!c->pace->last(c->pace->arg))
                return CURL_READFUNC_ABORT;
        }
        if (c->pace && !c->pace->fn(c->pace->arg, want))
            return CURL_READFUNC_ABORT;   /* the owner stops (shutting down) */
        ssize_t r;
        if (c->fd_direct)
            r = read_window(c, buf, want);
        else
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

bool s3_conn_error(CURLcode rc)
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

uint64_t s3_now_ms(void)
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
    if (c->fb_deadline && c->status == 0 && s3_now_ms() >= c->fb_deadline) {
        c->fb_expired = true;
        return 1;   /* CURLE_ABORTED_BY_CALLBACK */
    }
    return 0;
}

/* Did curl end the attempt on h at its total limit (CURLOPT_TIMEOUT_MS, set
 * from the call's deadlines), rather than at its connect limit or for a
 * stalled transfer? Asked of curl's own clock, not of ours: curl 7.88 rounds
 * its elapsed milliseconds (a negative microsecond difference truncates
 * toward zero), so it may stop up to 1 ms before our clock reaches the same
 * deadline; a probe of a hung tier then read as "cannot connect". */
static bool hit_total_limit(const struct s3_store *s, CURL *h, const struct s3_call *c)
{
    if (c->attempt_ms <= 0)
        return false;
    curl_off_t total_us = 0, connect_us = 0;
    if (curl_easy_getinfo(h, CURLINFO_TOTAL_TIME_T, &total_us) != CURLE_OK ||
        total_us + 1000 < (curl_off_t)c->attempt_ms * 1000)
        return false;   /* stopped sooner: the connect limit or a stall */
    /* the connect limit applies only until connected, and only if nearer */
    return c->attempt_ms <= s->connect_ms ||
           (curl_easy_getinfo(h, CURLINFO_CONNECT_TIME_T, &connect_us) == CURLE_OK &&
            connect_us > 0);
}

/* Did the attempt on h get as far as sending its request? (Not: it could
 * not connect.) */
bool s3_request_sent(CURL *h)
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

void s3_call_free(struct s3_call *c)
{
    free(c->rbuf);
    c->rbuf = NULL;
    free(c->dbuf);
    c->dbuf = NULL;
    obj_meta_clear(&c->rh);
    curl_slist_free_all(c->signed_hl);
    c->signed_hl = NULL;
}

/* Sets every option of one attempt of c on h. */
enum backend_status s3_easy_setup(struct s3_store *s, CURL *h, struct s3_call *c,
                                  const char *url, const struct curl_slist *hl)
{
    /* Signed here, by us, at each attempt: a retry gets a fresh x-amz-date.
     * Not by CURLOPT_AWS_SIGV4: libcurl 7.88 signs curl's empty-header form
     * "name;" verbatim, so an empty x-amz-meta-* could not be sent. */
    struct curl_slist *signed_hl = s3_sign(s, c->method, url, hl, time(NULL));
    if (!signed_hl)
        return BACKEND_NOMEM;
    curl_slist_free_all(c->signed_hl);
    c->signed_hl = signed_hl;
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
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->signed_hl);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, c);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, s3_on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
    bool has_body = c->body_fd >= 0 || c->body;
    if (strcmp(c->method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (strcmp(c->method, "PUT") == 0 || (strcmp(c->method, "POST") == 0 && has_body)) {
        /* An upload with a read callback; POST with a body too, so that the
         * method is set by CUSTOMREQUEST and the body is never form data. */
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        if (c->body_fd >= 0) {
            int fl = fcntl(c->body_fd, F_GETFL);
            c->fd_direct = fl >= 0 && (fl & O_DIRECT);
        }
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
    return BACKEND_OK;
}

/* One attempt. Returns the curl result; fills c's response. */
static CURLcode attempt(struct s3_store *s, CURL *h, struct s3_call *c, const char *url,
                        struct curl_slist *hl)
{
    if (s3_easy_setup(s, h, c, url, hl) != BACKEND_OK)
        return CURLE_OUT_OF_MEMORY;
    return curl_easy_perform(h);
}

/* The request headers of c (its own, then those every request carries)
 * into *out (new, curl_slist_free_all). BACKEND_OK or BACKEND_NOMEM. */
enum backend_status s3_call_hdr_list(const struct s3_store *s, const struct s3_call *c,
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
        sg_sigv4_sha256_hex(c->body ? c->body : "", c->body ? c->body_len : 0, hex);
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
void s3_backoff_sleep(unsigned att, uint64_t max_ms)
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

struct s3_deadlines s3_call_deadlines(const struct s3_store *s, const struct s3_call *c)
{
    struct s3_deadlines d = { s3_now_ms(), 0, 0 };
    uint64_t fb = c->slow_answer ? 0 : c->deadline_ms ? c->deadline_ms
                                                     : (uint64_t)s->first_byte_ms;
    uint64_t all = c->deadline_ms ? c->deadline_ms
                   : c->long_transfer ? 0 : (uint64_t)s->request_ms;
    d.fb = fb ? d.t0 + fb : 0;
    d.end = all ? d.t0 + all : 0;
    return d;
}

/* Milliseconds until deadline t (0: none); at least 1 when there is one. */
uint64_t s3_ms_until(uint64_t t)
{
    uint64_t now = s3_now_ms();
    return !t ? 0 : t > now ? t - now : 1;
}

/* The nearer of two such spans (0: none). */
static uint64_t ms_min(uint64_t a, uint64_t b)
{
    return !a ? b : !b ? a : a < b ? a : b;
}

/* Is a deadline past? The first-byte one counts only while the answer has
 * not begun (a transfer that stalls later is not a hung tier's timeout). */
bool s3_deadline_passed(const struct s3_deadlines *d, bool answered)
{
    uint64_t now = s3_now_ms();
    return (d->end && now >= d->end) || (d->fb && !answered && now >= d->fb);
}

/* Runs a call with retries within its deadlines (s3_call_deadlines).
 * BACKEND_OK for a 2xx answer; BACKEND_TIMEOUT when the answer did not begin
 * (or the call did not end) in time; else the mapped error (c->status,
 * c->code say more). */
enum backend_status s3_error_status(struct s3_call *c, long http_status)
{
    if (c->rbuf)
        (void)s3_xml_error_code(c->rbuf, c->rlen, c->code, sizeof c->code);
    enum backend_status st = s3_status_from_code(c->code, http_status);
    bool final_5xx = http_status >= 500 && http_status != 503 &&
                     strcmp(c->code, "SlowDown") != 0 &&
                     (!c->idempotent || http_status == 501);
    if (final_5xx)
        st = BACKEND_COLD_ERROR;
    if (st == BACKEND_COLD_ERROR) {
        char msg[sizeof ((struct backend_cold_error *)0)->message] = "";
        if (c->rbuf)
            s3_xml_error_message(c->rbuf, c->rlen, msg, sizeof msg);
        backend_cold_error_keep(http_status, c->code, msg);
    }
    return st;
}

enum backend_status s3_do(struct s3_store *s, struct s3_call *c)
{
    backend_cold_error_forget();
    char *url = s3_url_build(s->endpoint, s->vhost, c->bucket, c->key, c->query);
    if (!url)
        return BACKEND_NOMEM;
    if (!c->rmax)
        c->rmax = S3_ERR_BODY_MAX;
    struct curl_slist *hl = NULL;
    if (s3_call_hdr_list(s, c, &hl) != BACKEND_OK) {
        free(url);
        return BACKEND_NOMEM;
    }
    CURL *h = s3_handle_get(s);
    if (!h) {
        curl_slist_free_all(hl);
        free(url);
        return BACKEND_NOMEM;
    }
    enum backend_status st = BACKEND_IO;
    struct s3_deadlines d = s3_call_deadlines(s, c);
    bool head = strcmp(c->method, "HEAD") == 0;
    for (unsigned att = 0;; att++) {
        /* curl's own total timeout: the call's end; for a HEAD, whose whole
         * answer is its first bytes, the first-byte deadline too (exact,
         * where the progress callback checks about once a second). */
        c->attempt_ms = (long)(head ? ms_min(s3_ms_until(d.end), s3_ms_until(d.fb))
                                    : s3_ms_until(d.end));
        c->fb_deadline = d.fb;
        c->fb_expired = false;
        CURLcode rc = c->rc = attempt(s, h, c, url, hl);
        bool retry = false;
        int lvl = c->quiet ? LOG_LVL_DEBUG : LOG_LVL_WARN;
        if (rc != CURLE_OK) {
            /* The call's own deadline passed: a timeout, whatever the phase
             * the attempt was in (on a busy machine a hung tier's deadline
             * can pass before curl got to send; a connect that fails sooner
             * is not one). */
            bool timed_out = c->fb_expired ||
                             (rc == CURLE_OPERATION_TIMEDOUT &&
                              (s3_deadline_passed(&d, c->status != 0) ||
                               hit_total_limit(s, h, c)));
            if (c->overflow) {
                log_msg(LOG_LVL_ERROR, "backend", "s3: %s %s: response over %zu bytes",
                        c->method, url, c->rmax);
                st = BACKEND_IO;
            } else if (timed_out) {
                /* No answer in time: a hung (or unreachable) tier. No
                 * retry: the deadline is the call's, not the attempt's. */
                st = BACKEND_TIMEOUT;
                log_msg(lvl, "backend", "s3: %s %s: no answer within %llu ms", c->method, url,
                        (unsigned long long)(s3_now_ms() - d.t0));
            } else if (s3_conn_error(rc)) {
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
                st = s3_error_status(c, code);
                retry = st != BACKEND_COLD_ERROR && s3_retryable(c->code, code);
                if (st == BACKEND_IO || st == BACKEND_UNAVAILABLE || st == BACKEND_DENIED)
                    log_msg(lvl, "backend", "s3: %s %s: HTTP %ld %s", c->method, url, code,
                            c->code);
            }
        }
        if (!retry || !c->idempotent || att >= s->retries)
            break;
        /* A tier that does not even accept connections gets no more than
         * about two connect timeouts of our time in total. */
        if (rc != CURLE_OK && s3_now_ms() - d.t0 >= (uint64_t)s->connect_ms * 2)
            break;
        /* No retry starts past the call's deadlines. */
        if (s3_deadline_passed(&d, false))
            break;
        s3_backoff_sleep(att, ms_min(s3_ms_until(d.end), s3_ms_until(d.fb)));
        if (s3_deadline_passed(&d, false))
            break;
    }
    s3_handle_put(s, h);
    curl_slist_free_all(c->signed_hl);   /* the handle is reset before its next use */
    c->signed_hl = NULL;
    curl_slist_free_all(hl);
    free(url);
    return st;
}
