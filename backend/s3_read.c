/* backend/s3_read.c - reading objects of the S3 cold tier: HEAD, open (one
 * GET streaming the body into a bounded ring, driven by a curl multi handle
 * from the reading thread), reads off that stream or through a window of
 * ranged GETs pinned by If-Match, and close. */
#include "s3_int.h"
#include "log.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The GET sent by s3_object_open, its body still streaming. Driven by a
 * multi handle from the reading thread only (inside s3_obj_read): no thread
 * of our own, nothing runs while nobody reads. */
struct s3_stream {
    CURLM *multi;               /* from the store's multi_idle; back there at close */
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
    bool paused;                /* the write callback paused: the ring holds `want`
                                   or is full */
    size_t want;                /* what the reader asked for: once the ring
                                   holds that much, the transfer pauses */
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
    struct s3_call c = { .method = "HEAD", .bucket = s3_cold_bucket(s, bucket), .key = key,
                         .body_fd = -1, .idempotent = true, .hdrs = &checksum_mode,
                         .deadline_ms = timeout_ms };
    enum backend_status st = s3_do(s, &c);
    if (st == BACKEND_OK && s3_meta_from_headers(&c.rh, meta) != 0)
        st = BACKEND_NOMEM;
    else if (st != BACKEND_OK)
        st = not_found(s, bucket, st, c.code);
    if (st != BACKEND_OK)
        obj_meta_clear(meta);
    s3_call_free(&c);
    return st;
}

enum backend_status s3_object_head(struct backend *base, const char *bucket,
                                   const char *key, struct obj_meta *meta)
{
    return object_head_within((struct s3_store *)base, bucket, key, 0, meta);
}

enum backend_status s3_object_head_timed(struct backend *base, const char *bucket,
                                         const char *key, unsigned timeout_ms,
                                         struct obj_meta *meta)
{
    return object_head_within((struct s3_store *)base, bucket, key, timeout_ms ? timeout_ms : 1,
                              meta);
}

/* ---- the streaming GET of an open object ---- */

static CURLM *multi_get(struct s3_store *s)
{
    CURLM *m = s3_idle_take(s, &s->multi_idle);
    return m ? m : curl_multi_init();
}

static void multi_put(struct s3_store *s, CURLM *m)
{
    if (m && !s3_idle_keep(s, &s->multi_idle, m))
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
        return s3_on_body(buf, size, n, &t->c);
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
    /* Once the ring holds what the reader asked for, the transfer pauses
     * until the next read: curl would otherwise drain a fast cold tier's
     * socket into the ring (up to S3_STREAM_RING) inside one perform, and
     * the bytes already here would reach the cache and its readers only
     * after that (a 64 MiB fill's first byte came ~10 ms late here). */
    if (t->ring.len >= t->want || !s3_ring_put(&t->ring, buf, len)) {
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
    return s3_conn_error(t->rc) ? BACKEND_UNAVAILABLE : BACKEND_IO;
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
            s3_handle_put(s, t->h);
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
    s3_call_free(&t->c);
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
    if (!t->h && !(t->h = s3_handle_get(s)))
        return BACKEND_NOMEM;
    /* long_transfer: the low-speed limit only; signed now, as every attempt */
    if (s3_easy_setup(s, t->h, &t->c, t->url, t->hl) != BACKEND_OK)
        return BACKEND_NOMEM;
    curl_easy_setopt(t->h, CURLOPT_WRITEFUNCTION, on_stream_body);
    curl_easy_setopt(t->h, CURLOPT_WRITEDATA, o);
    /* HTTP/1.1: pausing an HTTP/2 stream in the libcurl we build against
     * (7.88) has had flow-control bugs; S3 speaks 1.1 anyway. */
    curl_easy_setopt(t->h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(t->h, CURLOPT_BUFFERSIZE, 128L * 1024);
    t->ring.head = t->ring.len = 0;
    t->pos = t->recvd = 0;
    t->paused = t->done = t->overrun = t->nomem = false;
    t->want = 1;   /* open returns once the headers and a first chunk are in */
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
static enum backend_status stream_open_attempt(struct s3_obj *o, const struct s3_deadlines *d,
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
        if (s3_deadline_passed(d, answered)) {
            bool sent = s3_request_sent(t->h);
            log_msg(LOG_LVL_WARN, "backend", "s3: GET %s: %s within %llu ms", t->url,
                    sent ? "no answer" : "no connection",
                    (unsigned long long)(s3_now_ms() - d->t0));
            /* A timeout either way (the deadline is what the caller set;
             * a busy machine may pass it before curl sent the request). */
            return BACKEND_TIMEOUT;   /* no retry: past it */
        }
        /* An answer that began and then stalls (curl's low-speed limit
         * should end it first). */
        if (answered && s3_now_ms() - d->t0 >= (uint64_t)(o->s->first_byte_ms + o->s->request_ms)) {
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
        *retry = s3_conn_error(t->rc);
        log_msg(*retry ? LOG_LVL_DEBUG : LOG_LVL_WARN, "backend", "s3: GET %s: %s", t->url,
                curl_easy_strerror(t->rc));
        return st;
    }
    st = s3_error_status(&t->c, code);
    if (st == BACKEND_OK)
        st = BACKEND_IO;
    *retry = st != BACKEND_COLD_ERROR && s3_retryable(t->c.code, code);
    if (st == BACKEND_IO || st == BACKEND_UNAVAILABLE || st == BACKEND_DENIED ||
        st == BACKEND_COLD_ERROR)
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
    t->want = len ? len : 1;
    if (!t->done && !t->paused && (st = stream_step(t, 0)) != BACKEND_OK)
        return stream_failed(o, st);
    uint64_t wait_start = s3_now_ms();
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
        if (s3_now_ms() - wait_start >= (uint64_t)o->s->request_ms) {
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

enum backend_status s3_object_open(struct backend *base, const char *bucket,
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
    o->bucket = strdup(s3_cold_bucket(s, bucket));
    o->key = strdup(key);
    if (!o->bucket || !o->key)
        goto out;
    t->c = (struct s3_call){ .method = "GET", .bucket = o->bucket, .key = o->key,
                             .body_fd = -1, .idempotent = true, .long_transfer = true,
                             .rmax = S3_ERR_BODY_MAX, .hdrs = &checksum_mode };
    t->url = s3_url_build(s->endpoint, s->vhost, o->bucket, o->key, NULL);
    if (!t->url || s3_call_hdr_list(s, &t->c, &t->hl) != BACKEND_OK)
        goto out;
    struct s3_deadlines d = s3_call_deadlines(s, &t->c);
    backend_cold_error_forget();
    for (unsigned att = 0;; att++) {
        bool retry = false;
        st = stream_open_attempt(o, &d, &retry);
        if (st == BACKEND_OK || !retry || att >= s->retries)
            break;
        /* As in s3_do: a tier that does not answer gets about two connect
         * timeouts of our time in total, and no retry starts past the
         * first-byte deadline. */
        if (!(t->c.hdrs_done) && s3_now_ms() - d.t0 >= (uint64_t)s->connect_ms * 2)
            break;
        if (s3_deadline_passed(&d, false))
            break;
        s3_backoff_sleep(att, s3_ms_until(d.fb));
        if (s3_deadline_passed(&d, false))
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

int s3_obj_fd(const struct backend_obj *o)
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
    s3_call_free(&c);
    return st;
}

enum backend_status s3_obj_read(struct backend_obj *base, uint64_t off, void *buf,
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

void s3_obj_close(struct backend_obj *base)
{
    obj_free((struct s3_obj *)base);
}
