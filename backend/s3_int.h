/* backend/s3_int.h - internals of the S3 cold tier shared by its files
 * (s3*.c; s3.c's opening comment maps them) and by
 * tests/unit/test_backend_s3*.c: the pure parts (URL building, S3 error
 * mapping, response headers -> obj_meta, XML parsing, backoff, the body ring
 * and read-path choice of an open object), the store's structs, the request
 * engine and the verbs. Nothing outside backend/ and
 * tests/unit/test_backend_*.c includes this. */
#ifndef SHARDGATE_BACKEND_S3_INT_H
#define SHARDGATE_BACKEND_S3_INT_H

#include "backend.h"
#include "backend_int.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Caps of what we accept from the cold tier: a listing page of 1000 keys of
 * 1 KiB each with their XML is well under 8 MiB; errors are small. */
#define S3_XML_MAX      (8u * 1024 * 1024)
#define S3_ERR_BODY_MAX (64u * 1024)
#define S3_HDRS_MAX     (64u * 1024)
/* An open object streams its body from the one GET sent at open into a ring
 * of this size; the transfer pauses while the ring is full, so memory per
 * open object is bounded whatever the object's size. */
#define S3_STREAM_RING  (4u * 1024 * 1024)
/* A read that starts at most this far past the stream's position skips
 * forward in the stream (cheaper than a second request); further away, or
 * behind it, it takes the ranged-GET path below. */
#define S3_STREAM_SKIP_MAX S3_STREAM_RING
/* Read-ahead window of a read off the stream (random access): each miss
 * fetches one ranged GET of this size, pinned by If-Match. */
#define S3_READ_WINDOW  (8u * 1024 * 1024)
/* Spooled objects above this go up as a multipart upload. */
#define S3_MPU_THRESHOLD (64ull * 1024 * 1024)
#define S3_MPU_PART      (16ull * 1024 * 1024)
#define S3_MAX_PUT       (5ull * 1024 * 1024 * 1024)
#define S3_MAX_OBJECT    (5ull * 1024 * 1024 * 1024 * 1024)

/* ---- pure helpers (s3_util.c) ---- */

struct s3_store;   /* below */

/* Percent-encodes as SigV4/S3 want: everything but A-Z a-z 0-9 - . _ ~ (and
 * '/' when keep_slash). Returns new (malloc) or NULL. */
char *s3_uri_encode(const char *s, bool keep_slash);

/* The URL of a request: endpoint "scheme://host[:port][/base]", bucket (NULL
 * for the service), key (NULL for the bucket), query (already canonical:
 * sorted, encoded, "k=v&k2=v2"; NULL or "" for none). Path style gives
 * scheme://host/base/bucket/key, virtual-hosted scheme://bucket.host/base/key.
 * Returns new or NULL. */
char *s3_url_build(const char *endpoint, bool vhost, const char *bucket, const char *key,
                   const char *query);

/* Appends "name=value" (value encoded) to *q (new, or NULL for an empty
 * query), '&'-separated; the caller adds the names in sorted order. 0, or -1
 * when out of memory (*q unchanged). */
int s3_query_add(char **q, const char *name, const char *value);
/* BACKEND_OK, or why S3 would refuse the key (empty, over 1024 bytes). */
enum backend_status s3_key_check(const char *key);
/* Appends the stored headers of m to *hl as request headers (skip_checksums:
 * without the object's x-amz-checksum-<algo> values). An empty value (an
 * empty x-amz-meta-*) goes as curl's "name;" (sent and signed as "name:").
 * 0 or -1. */
int s3_add_meta_headers(struct curl_slist **hl, const struct obj_meta *m, bool skip_checksums);
/* The curl_slist line for one request header (new, NULL when out of
 * memory): "name: value", or "name;" for an empty value, which curl sends as
 * "name:" (a "name:" line would make curl drop the header). Pure. */
char *s3_header_line(const char *name, const char *value);
/* The request headers of one attempt, signed: hl's lines, then "Host:" (the
 * URL's, so that what is signed is what curl sends), "x-amz-date:" (now) and
 * the SigV4 "Authorization:" of s's key over region/s3. It signs method,
 * url's path and query as they stand (curl sends them as is:
 * CURLOPT_PATH_AS_IS), Host, x-amz-date and every header of hl that curl
 * sends: "Name: value", and "name;" (curl's empty header) as "name:";
 * "Name:" lines only stop curl adding its own and are neither. hl must carry
 * x-amz-content-sha256 (s3_call_hdr_list adds it): it is the payload hash.
 * Returns new (curl_slist_free_all) or NULL when out of memory. Pure. */
struct curl_slist *s3_sign(const struct s3_store *s, const char *method, const char *url,
                           const struct curl_slist *hl, time_t now);
/* "x-amz-copy-source: /bucket/key" (new), or NULL when out of memory. */
char *s3_copy_source_header(const char *cbucket, const char *key);

/* S3 error code (may be NULL or "") and HTTP status -> backend_status. A
 * 4xx with a code this table has no status for is BACKEND_COLD_ERROR: the
 * client gets the cold tier's answer as it is. */
enum backend_status s3_status_from_code(const char *code, long http_status);
/* Whether a response is worth retrying (idempotent calls only). */
bool s3_retryable(const char *code, long http_status);

/* Full-jitter backoff: a delay in [0, min(cap, base * 2^attempt)] picked by
 * `rnd` (any random number). */
uint64_t s3_backoff_ms(unsigned attempt, uint64_t base_ms, uint64_t cap_ms, uint64_t rnd);

/* Is a (lower-case) header name one the store keeps with an object (and a
 * put sends)? OBJ_TAGGING_HDR is; OBJ_TAGGING_COUNT_HDR is only read. */
bool s3_stored_header(const char *name);
/* Response headers (lower-case names, as collected in an obj_meta) ->
 * size (content-length), etag (bare), mtime (last-modified) and the stored
 * headers. 0, or -1 when out of memory. */
int s3_meta_from_headers(const struct obj_meta *resp, struct obj_meta *m);
/* "2024-01-02T03:04:05.678Z" -> timespec. 0 or -1. */
int s3_parse_iso8601(const char *s, struct timespec *ts);
/* Copies an ETag without its quotes into out[72]. */
void s3_etag_bare(const char *in, char out[72]);

/* A byte ring of fixed capacity (the body buffer of an open object). */
struct s3_ring {
    unsigned char *buf;         /* cap bytes; owned */
    size_t cap, head, len;      /* head: index of the oldest byte */
};
/* Allocates cap bytes. 0, or -1 when out of memory. */
int s3_ring_init(struct s3_ring *r, size_t cap);
void s3_ring_free(struct s3_ring *r);
/* Appends all of buf, or nothing when it does not fit: the write callback
 * then pauses the transfer and curl hands the same bytes again later. */
bool s3_ring_put(struct s3_ring *r, const void *buf, size_t len);
/* Moves up to len of the oldest bytes to out (out NULL: drops them).
 * Returns how many. */
size_t s3_ring_get(struct s3_ring *r, void *out, size_t len);

/* How a read at `off` of an open object is served. */
enum s3_read_path {
    S3_READ_STREAM,     /* off is the stream's position: from the GET of open */
    S3_READ_SKIP,       /* a little ahead of it: skip forward in the stream */
    S3_READ_RANGED,     /* anywhere else (or no usable stream): ranged GET */
};
enum s3_read_path s3_read_path_pick(bool stream_usable, uint64_t stream_pos, uint64_t off);

/* ---- XML (s3_xml.c) ---- */

/* The <Code> of an <Error> body into code[cap]; 0, or -1 when not an error. */
int s3_xml_error_code(const char *xml, size_t len, char *code, size_t cap);
/* The <Message> of an <Error> body into msg[cap] ("" when it has none). */
void s3_xml_error_message(const char *xml, size_t len, char *msg, size_t cap);
typedef int (*s3_bucket_fn)(void *arg, const char *name, time_t created);
enum backend_status s3_xml_buckets(const char *xml, size_t len, s3_bucket_fn fn, void *arg);
enum backend_status s3_xml_list_objects(const char *xml, size_t len,
                                        struct backend_list_page *out);
enum backend_status s3_xml_list_parts(const char *xml, size_t len,
                                      struct backend_parts_page *out);
enum backend_status s3_xml_list_uploads(const char *xml, size_t len,
                                        struct backend_uploads_page *out);
/* InitiateMultipartUploadResult/UploadId. */
enum backend_status s3_xml_upload_id(const char *xml, size_t len,
                                     char id[BACKEND_UPLOAD_ID_MAX]);
/* CopyObjectResult / CopyPartResult / CompleteMultipartUploadResult: ETag and
 * (when present) LastModified into m. */
enum backend_status s3_xml_etag_result(const char *xml, size_t len, struct obj_meta *m);


/* ---- the store (s3.c) ---- */

#define S3_POOL_MAX 64   /* idle handles kept of each kind (each keeps its connections) */

/* A stack of idle curl handles of one kind (easy or multi), guarded by the
 * store's mu: what a call gives back is taken by the next instead of a new
 * handle and a new connection. */
struct s3_idle {
    void *h[S3_POOL_MAX];
    size_t n;
};

struct s3_store {
    struct backend base;        /* first */
    char *endpoint;             /* without trailing '/' */
    char *region, *access, *secret, *token;   /* signs as <region>/s3 (s3_sign) */
    char *ca_path;
    char *spool_dir;
    bool vhost;
    long connect_ms, request_ms;
    long first_byte_ms;         /* the answer of a read-side call begins by then */
    unsigned retries;
    struct backend_bucket_map *map;
    size_t n_map;
    pthread_mutex_t mu;         /* guards easy_idle and multi_idle */
    struct s3_idle easy_idle;   /* CURL *: idle easy handles, their connections kept */
    /* Idle multi handles (CURLM *) of open objects' streams. Each keeps the
     * keep-alive connections of its finished transfers (a multi has its own
     * connection cache), so the next object open reuses one instead of a new
     * TCP/TLS handshake. */
    struct s3_idle multi_idle;
    struct s3_done *done;       /* completed uploads (s3_mpu_done.c), guarded by mu */
    size_t done_next;
};

struct s3_put {
    struct backend_put base;    /* first */
    struct s3_store *s;
    char *bucket, *key;         /* cold names */
    char *upload_id;            /* parts: the upload */
    unsigned part_no;
    int fd;                     /* the spool file (unlinked), or the dup of the file
                                   s3_put_from_fd was given */
    uint64_t fd_off;            /* where the body starts in fd (s3_put_from_fd) */
    struct backend_pacer pace;  /* s3_put_from_fd's, or none (fn NULL) */
    uint64_t size, max_size;
    bool failed;
    enum backend_status fail_st;
};

/* The one ops table of the tier (s3.c): every handle, object and put
 * carries it. */
extern const struct backend_ops s3_ops;
/* The cold tier's name of a gateway bucket (the bucket map; the name itself
 * when unmapped). Borrowed from s or bucket. */
const char *s3_cold_bucket(const struct s3_store *s, const char *bucket);
/* Which page a listing GET fills, so which parser of s3_xml.c reads it. */
enum s3_listing { S3_LISTING_OBJECTS, S3_LISTING_PARTS, S3_LISTING_UPLOADS };
union s3_page {
    struct backend_list_page *objects;
    struct backend_parts_page *parts;
    struct backend_uploads_page *uploads;
};
/* GETs a listing of the cold tier (a bucket's, or an upload's parts when key
 * is given) with query q (takes it) and parses the answer into the member of
 * page that `kind` names. Without a key, a missing bucket is
 * BACKEND_NO_BUCKET. Any thread. */
enum backend_status s3_get_listing(struct s3_store *s, const char *bucket, const char *key,
                                   char *q, enum s3_listing kind, union s3_page page);

/* ---- the request engine (s3_call.c) ---- */

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
    const struct backend_pacer *pace;   /* paces the reads of body_fd, or NULL */
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
    uint64_t fb_deadline;       /* s3_now_ms() clock: the answer must begin by then; 0: none */
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
    bool fd_direct;             /* body_fd is O_DIRECT: read through dbuf */
    unsigned char *dbuf;        /* aligned window of body_fd's bytes (S3_DIO_BUF) ... */
    uint64_t dbuf_at;           /* ... from this file offset ... */
    size_t dbuf_len;            /* ... this many */
    struct curl_slist *signed_hl; /* the attempt's signed headers (s3_easy_setup), owned */
    char code[64];              /* S3 error code */
    bool hdrs_done;             /* the blank line after a final (>= 200) status */
};

/* The deadlines of one call, on the s3_now_ms() clock (0: none). The answer of
 * a read-side call must begin by fb, retries included: a hung tier costs a
 * miss or a listing cold_first_byte_timeout_ms, not the retries times the
 * request timeout. A call with a small answer ends by end, retries included. */
struct s3_deadlines {
    uint64_t t0, fb, end;
};

/* Runs c (its deadlines, its retries when idempotent). BACKEND_OK for a 2xx;
 * BACKEND_TIMEOUT when the answer did not begin (or end) in time; else the
 * mapped error, c->status and c->code say more. Any thread; the caller frees
 * c with s3_call_free. */
enum backend_status s3_do(struct s3_store *s, struct s3_call *c);
/* The status of an error answer (HTTP `http_status`, its body in c->rbuf),
 * c->code filled in. A refusal we have no status for, or a server error this
 * call does not retry (it is not idempotent, or 501 NotImplemented), is
 * BACKEND_COLD_ERROR, kept for the client (backend_cold_error_keep): a 500 to
 * a CompleteMultipartUpload says "the outcome is unknown", not "the tier is
 * down", and must reach the client as it is. */
enum backend_status s3_error_status(struct s3_call *c, long http_status);
/* Frees what a call's response holds (c itself is the caller's). */
void s3_call_free(struct s3_call *c);
/* An easy handle from the store's pool (reset, its connections kept), or a
 * new one; NULL when out of memory. s3_handle_put gives it back. */
CURL *s3_handle_get(struct s3_store *s);
void s3_handle_put(struct s3_store *s, CURL *h);
/* The most recently idled handle of p, or NULL when p is empty. */
void *s3_idle_take(struct s3_store *s, struct s3_idle *p);
/* Keeps h in p: true, or false when p is full (the caller frees h). */
bool s3_idle_keep(struct s3_store *s, struct s3_idle *p, void *h);
/* Every curl option of one attempt of c on h, its headers hl signed now
 * (s3_sign, kept in c->signed_hl until the next attempt or s3_call_free);
 * resets c's response. BACKEND_OK, or BACKEND_NOMEM. */
enum backend_status s3_easy_setup(struct s3_store *s, CURL *h, struct s3_call *c,
                                  const char *url, const struct curl_slist *hl);
/* The write callback of a call (arg: the s3_call): a sink or c->rbuf. */
size_t s3_on_body(char *buf, size_t size, size_t n, void *arg);
/* c's request headers plus those every request carries, into *out (new,
 * curl_slist_free_all). BACKEND_OK or BACKEND_NOMEM. */
enum backend_status s3_call_hdr_list(const struct s3_store *s, const struct s3_call *c,
                                     struct curl_slist **out);
/* Is rc a failure to reach or hear the tier (worth a retry)? */
bool s3_conn_error(CURLcode rc);
/* Did the attempt on h send its request (rather than fail to connect)? */
bool s3_request_sent(CURL *h);
/* The monotonic clock of the deadlines, in ms. */
uint64_t s3_now_ms(void);
/* c's deadlines from now. */
struct s3_deadlines s3_call_deadlines(const struct s3_store *s, const struct s3_call *c);
/* ms until deadline t: 0 when there is none, at least 1 when there is. */
uint64_t s3_ms_until(uint64_t t);
/* Is a deadline of d past? fb only counts while not answered. */
bool s3_deadline_passed(const struct s3_deadlines *d, bool answered);
/* Sleeps the backoff before retry att+1, at most max_ms (0: no limit). */
void s3_backoff_sleep(unsigned att, uint64_t max_ms);

/* The request header of a write condition, "If-None-Match: *" or
 * "If-Match: \"etag\"" (s3_util.c), into line; false when c is NULL or
 * none. A conditional write is never retried: a retry of one that took
 * effect would fail its own condition. */
#define S3_COND_LINE_MAX 96
bool s3_cond_line(const struct backend_cond *c, char line[S3_COND_LINE_MAX]);

/* ---- multipart on cold names (s3_mpu.c), also for a big put (s3_write.c) ---- */

enum backend_status s3_mpu_create_cold(struct s3_store *s, const char *cbucket, const char *key,
                                       const struct obj_meta *meta,
                                       char id[BACKEND_UPLOAD_ID_MAX]);
/* ck (may be NULL): gets the checksum headers of the assembled object.
 * cond (may be NULL) is sent as If-None-Match / If-Match (no retry then). */
enum backend_status s3_mpu_complete_cold(struct s3_store *s, const char *cbucket,
                                         const char *key, const char *upload_id,
                                         const struct backend_part *parts, size_t n,
                                         const struct backend_cond *cond, struct obj_meta *ck);
void s3_mpu_abort_cold(struct s3_store *s, const char *cbucket, const char *key,
                       const char *upload_id);

/* ---- completed uploads (s3_mpu_done.c) ---- */

#define S3_DONE_MAX 1024u           /* completions remembered, the oldest dropped */
#define S3_DONE_TTL_S (24 * 3600)   /* and for at most a day */
struct s3_done;
/* Remembers that upload `id` of (bucket, key) completed with these parts
 * and ETag. Any thread. */
void s3_done_record(struct s3_store *s, const char *bucket, const char *key, const char *id,
                    const struct backend_part *parts, size_t n, const char *etag);
enum s3_done_match {
    S3_DONE_NONE,    /* no record of upload `id`: the cold tier answers */
    S3_DONE_SAME,    /* it completed here with the same key and parts: etag set */
    S3_DONE_OTHER,   /* it completed here with another key or parts list */
};
enum s3_done_match s3_done_lookup(struct s3_store *s, const char *bucket, const char *key,
                                  const char *id, const struct backend_part *parts, size_t n,
                                  char etag[72]);
/* At close. */
void s3_done_free(struct s3_store *s);

/* ---- the verbs (s3.c, s3_read.c, s3_write.c, s3_mpu.c) ----
 * Same contracts as their backend_* counterparts in backend.h; s3.c's ops
 * table holds them. */
enum backend_status s3_bucket_head(struct backend *base, const char *bucket);
enum backend_status s3_object_head(struct backend *base, const char *bucket, const char *key,
                                   struct obj_meta *meta);
enum backend_status s3_object_head_timed(struct backend *base, const char *bucket,
                                         const char *key, unsigned timeout_ms,
                                         struct obj_meta *meta);
enum backend_status s3_object_open(struct backend *base, const char *bucket, const char *key,
                                   struct obj_meta *meta, struct backend_obj **out);
enum backend_status s3_object_part(struct backend *base, const char *bucket, const char *key,
                                   unsigned part_no, struct backend_part_range *out);
int s3_obj_fd(const struct backend_obj *o);
enum backend_status s3_obj_read(struct backend_obj *base, uint64_t off, void *buf, size_t len,
                                size_t *got);
void s3_obj_close(struct backend_obj *base);
enum backend_status s3_put_begin(struct backend *base, const char *bucket, const char *key,
                                 struct backend_put **out);
enum backend_status s3_put_write(struct backend_put *base, const void *buf, size_t len);
enum backend_status s3_put_commit(struct backend_put *base, const struct obj_meta *meta,
                                  struct obj_meta *out);
void s3_put_abort(struct backend_put *base);
bool s3_put_from_fd(struct backend_put *base, int fd, uint64_t off, uint64_t len,
                    const struct backend_pacer *pace);
enum backend_status s3_object_copy(struct backend *base, const char *src_bucket,
                                   const char *src_key, const char *dst_bucket,
                                   const char *dst_key, const struct obj_meta *meta,
                                   const char *tagging, const struct backend_cond *cond,
                                   struct obj_meta *out);
enum backend_status s3_object_delete(struct backend *base, const char *bucket, const char *key);
enum backend_status s3_mpu_create(struct backend *base, const char *bucket, const char *key,
                                  const struct obj_meta *meta,
                                  char upload_id[BACKEND_UPLOAD_ID_MAX]);
enum backend_status s3_mpu_part_begin(struct backend *base, const char *bucket, const char *key,
                                      const char *upload_id, unsigned part_no,
                                      struct backend_put **out);
enum backend_status s3_mpu_part_copy(struct backend *base, const char *bucket, const char *key,
                                     const char *upload_id, unsigned part_no,
                                     const struct backend_copy_src *src, struct obj_meta *out);
enum backend_status s3_mpu_complete(struct backend *base, const char *bucket, const char *key,
                                    const char *upload_id, const struct backend_part *parts,
                                    size_t n_parts, const struct obj_meta *meta,
                                    const struct backend_cond *cond, struct obj_meta *out);
enum backend_status s3_mpu_head(struct backend *base, const char *bucket, const char *key,
                                const char *upload_id, struct obj_meta *meta);
enum backend_status s3_mpu_abort(struct backend *base, const char *bucket, const char *key,
                                 const char *upload_id);
enum backend_status s3_mpu_list_parts(struct backend *base, const char *bucket, const char *key,
                                      const char *upload_id, unsigned marker,
                                      unsigned max_parts, struct backend_parts_page *out);
enum backend_status s3_tagging_get(struct backend *base, const char *bucket, const char *key,
                                   struct obj_tags *out);
enum backend_status s3_tagging_put(struct backend *base, const char *bucket, const char *key,
                                   const struct obj_tags *tags);
enum backend_status s3_mpu_list_uploads(struct backend *base, const char *bucket,
                                        const struct backend_uploads_req *req,
                                        struct backend_uploads_page *out);

#endif
