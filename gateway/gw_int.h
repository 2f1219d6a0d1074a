/* gateway/gw_int.h - internals shared by the gateway's files: the request
 * record, its arena, the S3 error table, XML output, and the handlers. Only
 * gateway/ and its unit tests include this. */
#ifndef SHARDGATE_GW_INT_H
#define SHARDGATE_GW_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "gw.h"

struct MHD_Connection;
struct MHD_Response;

/* ---- arena: per-request memory, freed at once when the request ends ---- */

struct gw_arena_block;
struct gw_arena {
    struct gw_arena_block *head;
};
/* Returns zeroed memory or NULL; lives until gw_arena_free(). */
void *gw_arena_alloc(struct gw_arena *a, size_t n);
char *gw_arena_strndup(struct gw_arena *a, const char *s, size_t n);
char *gw_arena_strdup(struct gw_arena *a, const char *s);
char *gw_arena_printf(struct gw_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void gw_arena_free(struct gw_arena *a);

/* ---- growable byte buffer with a hard cap ---- */

struct gw_buf {
    char *data;
    size_t len, cap, limit;   /* limit: appending past it fails */
};
void gw_buf_init(struct gw_buf *b, size_t limit);
/* 0, or -1 when the limit would be passed or memory is short. */
int gw_buf_append(struct gw_buf *b, const void *p, size_t n);
int gw_buf_puts(struct gw_buf *b, const char *s);
int gw_buf_printf(struct gw_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Takes the bytes out (caller frees with free()); the buffer is reset. */
char *gw_buf_take(struct gw_buf *b, size_t *len);
void gw_buf_free(struct gw_buf *b);

/* ---- S3 errors: gateway/s3_error.c is the only place that knows them ---- */

enum s3_err {
    S3E_ACCESS_DENIED,
    S3E_ACL_NOT_SUPPORTED,     /* AccessControlListNotSupported: ACLs are disabled */
    S3E_AUTH_HEADER_MALFORMED,
    S3E_AUTH_QUERY_ERROR,
    S3E_BAD_DIGEST,
    S3E_BAD_REQUEST,           /* S3's BadRequest: too many tags */
    S3E_BUCKET_EXISTS,
    S3E_BUCKET_TAKEN,          /* BucketAlreadyExists: someone else's */
    S3E_BUCKET_NOT_EMPTY,
    S3E_CORS_NO_ORIGIN,        /* OPTIONS without Origin: 400 BadRequest */
    S3E_CORS_NOT_ENABLED,      /* OPTIONS on a bucket without CORS: 403 AccessForbidden */
    S3E_COLD_PASSED,           /* the cold tier's own error, passed on as it is
                                  (gw_req.cold_err); InternalError without it */
    S3E_CONDITIONAL_CONFLICT,  /* ConditionalRequestConflict (409), from a cold tier */
    S3E_ENTITY_TOO_LARGE,
    S3E_ENTITY_TOO_SMALL,
    S3E_INCOMPLETE_BODY,
    S3E_INTERNAL,
    S3E_INVALID_ACCESS_KEY,
    S3E_INVALID_ARGUMENT,
    S3E_INVALID_BUCKET_ACL,    /* InvalidBucketAclWithObjectOwnership */
    S3E_INVALID_BUCKET_NAME,
    S3E_INVALID_DIGEST,
    S3E_INVALID_PART,
    S3E_INVALID_PART_ORDER,
    S3E_INVALID_PART_NUMBER,   /* InvalidPartNumber (416): ?partNumber beyond the parts */
    S3E_INVALID_RANGE,
    S3E_INVALID_REQUEST,
    S3E_INVALID_TAG,
    S3E_INVALID_URI,           /* a key or listing parameter that is not UTF-8 */
    S3E_KEY_CONFLICT,
    S3E_KEY_TOO_LONG,
    S3E_MALFORMED_ACL,
    S3E_MALFORMED_XML,
    S3E_METADATA_TOO_LARGE,
    S3E_METHOD_NOT_ALLOWED,
    S3E_MISSING_SECURITY_HEADER,
    S3E_MISSING_CONTENT_LENGTH,
    S3E_NO_SUCH_BUCKET,
    S3E_NO_SUCH_KEY,
    S3E_NO_SUCH_JOB,
    S3E_NO_SUCH_UPLOAD,
    S3E_NO_SUCH_TAG_SET,
    S3E_NOT_IMPLEMENTED,
    S3E_NOT_MODIFIED,
    S3E_PRECONDITION_FAILED,
    S3E_READ_ONLY,             /* AccessDenied: a write to a read-only store */
    S3E_REQUEST_HEADER_TOO_LARGE,
    S3E_REQUEST_TIME_SKEWED,
    S3E_SERVICE_UNAVAILABLE,
    S3E_SHA256_MISMATCH,
    S3E_SIGNATURE_MISMATCH,
    S3E_SLOW_DOWN,
    S3E_STORAGE_FULL,
    S3E_COUNT
};

struct s3_error {
    const char *code;       /* "NoSuchKey" */
    unsigned http_status;   /* 404 */
    const char *message;    /* S3's default message */
};

struct gw_req;
const struct s3_error *s3_error_get(enum s3_err e);
/* s3_error_get, but S3E_COLD_PASSED is r's cold-tier error when it has one. */
const struct s3_error *s3_error_of(const struct gw_req *r, enum s3_err e);
/* Takes the cold tier's error of this thread's last backend call (after it
 * returned BACKEND_COLD_ERROR) into r->cold_err: true, or false when there is
 * none (the call ran on another thread: a fill). */
bool gw_req_take_cold_error(struct gw_req *r);
enum s3_err s3_error_from_backend(enum backend_status st);
enum s3_err s3_error_from_auth(enum auth_status st);
/* S3's wording for some auth failures, or NULL for the code's default. */
const char *s3_error_auth_message(enum auth_status st);
/* The code a prefetch job reports for a key it could not stage: the cold
 * tier's S3 code (cst CACHE_BACKEND), or a cache-side name when the cache
 * tier failed ("CacheUnavailable" ...), never an object error. */
const char *s3_error_job_code(enum cache_status cst, enum backend_status bst);
/* The message of a cold-tier outage (BACKEND_TIMEOUT, BACKEND_UNAVAILABLE)
 * naming the cold tier and the deadline, written to buf and returned; NULL
 * for any other status (the code's default message applies). */
const char *s3_error_cold_message(struct backend *b, enum backend_status st, char *buf,
                                  size_t len);
/* Where a tag set came from, for the error of a bad one. */
enum gw_tags_from { GW_TAGS_OBJECT_XML, GW_TAGS_BUCKET_XML, GW_TAGS_HEADER };
/* The S3 error (and its message, in *msg) of a tag set refused by
 * obj_tags_from_xml / _from_query / _check. */
enum s3_err s3_error_from_tags(enum obj_tags_status st, enum gw_tags_from from,
                               const char **msg);
/* The message of a reader that waited wait_ms for a fill's bytes. */
const char *s3_error_fill_wait_message(struct backend *b, unsigned wait_ms, char *buf,
                                       size_t len);

/* ---- the request record ---- */

enum gw_op {
    GW_OP_UNKNOWN,
    GW_OP_HEALTH,            /* GET/HEAD /_shardgate/health: liveness, no auth */
    GW_OP_READY,             /* GET/HEAD /_shardgate/ready: readiness, no auth */
    GW_OP_LIST_BUCKETS,
    GW_OP_CREATE_BUCKET,
    GW_OP_HEAD_BUCKET,
    GW_OP_DELETE_BUCKET,
    GW_OP_GET_BUCKET_LOCATION,
    GW_OP_GET_BUCKET_VERSIONING,
    GW_OP_LIST_OBJECTS,
    GW_OP_LIST_OBJECTS_V2,
    GW_OP_LIST_UPLOADS,
    GW_OP_DELETE_OBJECTS,
    GW_OP_GET_OBJECT,
    GW_OP_HEAD_OBJECT,
    GW_OP_PUT_OBJECT,
    GW_OP_COPY_OBJECT,
    GW_OP_DELETE_OBJECT,
    GW_OP_CREATE_UPLOAD,
    GW_OP_UPLOAD_PART,
    GW_OP_UPLOAD_PART_COPY,
    GW_OP_COMPLETE_UPLOAD,
    GW_OP_ABORT_UPLOAD,
    GW_OP_LIST_PARTS,
    GW_OP_GET_OBJECT_TAGGING,
    GW_OP_PUT_OBJECT_TAGGING,
    GW_OP_DELETE_OBJECT_TAGGING,
    GW_OP_GET_BUCKET_TAGGING,
    GW_OP_PUT_BUCKET_TAGGING,
    GW_OP_DELETE_BUCKET_TAGGING,
    GW_OP_GET_BUCKET_ACL,    /* ?acl: answered as a bucket with ACLs disabled */
    GW_OP_PUT_BUCKET_ACL,
    GW_OP_GET_OBJECT_ACL,
    GW_OP_PUT_OBJECT_ACL,
    GW_OP_LIST_OBJECT_VERSIONS,   /* GET ?versions: the current objects, VersionId null */
    GW_OP_NOT_IMPLEMENTED,   /* a known S3 sub-resource we do not serve */
    GW_OP_METRICS,           /* GET/HEAD /metrics (Prometheus) */
    GW_OP_PREFETCH_SUBMIT,   /* POST /bucket?prefetch */
    GW_OP_PREFETCH_GET,      /* GET /bucket?prefetch[&job=ID] */
    GW_OP_PREFETCH_CANCEL,   /* DELETE /bucket?prefetch&job=ID */
    GW_OP_WB_FLUSH,          /* POST /bucket?flush[&prefix=P][&timeout=S] */
    GW_OP_WB_STATUS,         /* GET /bucket?writeback[&prefix=P] */
    GW_OP_CORS_PREFLIGHT,    /* OPTIONS on a bucket or object: no auth, as in S3 */
    GW_OP_COUNT
};

/* How a GET/HEAD used the cache, for the latency histograms. */
enum gw_cache_use { GW_CACHE_NONE, GW_CACHE_HIT, GW_CACHE_MISS };

/* How a GET/HEAD was served, for the access log ("read=..."). */
enum gw_read {
    GW_READ_NONE,     /* not a read, or answered before reading: "-" */
    GW_READ_HIT,      /* a complete cached copy: "hit" */
    GW_READ_FILL,     /* this request started the fill it read from: "fill" */
    GW_READ_JOINED,   /* it read from a fill already running: "miss-joined" */
    GW_READ_PASS,     /* straight from the cold tier: "pass-through" */
};

const char *gw_op_name(enum gw_op op);

/* What the request body is for. */
enum gw_body {
    GW_BODY_NONE,     /* no body expected; any sent is verified and dropped */
    GW_BODY_XML,      /* buffered up to conf->max_xml_body, then parsed */
    GW_BODY_STREAM,   /* streamed into a backend_put */
};

enum gw_req_state {
    GW_REQ_NEW,       /* headers arrived, nothing decided */
    GW_REQ_BODY,      /* receiving the body */
    GW_REQ_WAIT,      /* suspended until the cache has what the handler needs;
                         on resume the handler runs again */
    GW_REQ_DONE,      /* a response is queued */
};

struct gw_query {
    const char *name;   /* decoded */
    const char *value;  /* decoded; "" when the parameter had no '=' */
};

struct gw_req {
    struct gw *gw;
    const struct conf *conf;
    struct backend *backend;
    bool cold_files;             /* the cold tier is a directory store: its objects are
                                    files the gateway can send itself (h_object.c) */
    struct auth *authz;          /* the credential store: permission checks */
    struct cache *cache;         /* NULL: reads go straight to the cold tier */
    struct gw_hit_copy *hit_copy;   /* hits sent from memory (hit_copy.c) */
    struct cache_waiter waiter;  /* GW_REQ_WAIT: this request waits on a fill */
    enum gw_cache_use cache_use;
    struct MHD_Connection *conn;
    struct gw_conn *gconn;       /* the connection's deadlines (conn_guard.c); may be NULL */
    struct gw_arena arena;
    char id[17];                 /* x-amz-request-id */
    struct timespec t0;
    enum gw_req_state state;

    /* the request as parsed */
    const char *method;
    const char *raw_path;        /* as received */
    const char *raw_query;       /* as received, "" when none */
    const char *bucket;          /* decoded; NULL for the service */
    const char *key;             /* decoded; NULL for a bucket request */
    const char *resource;        /* "/bucket/key" for error bodies */
    struct gw_query *query;
    size_t n_query;
    struct auth_hdr *hdrs;       /* lower-case names */
    size_t n_hdrs;
    size_t hdr_bytes;
    enum gw_op op;
    enum gw_body body_kind;

    /* authentication and body */
    struct auth_ctx *auth;
    struct auth_body *body;
    struct backend_put *put;     /* GW_BODY_STREAM */
    struct gw_intake *intake;    /* the body goes through intake threads (intake.c) */
    bool intake_decided;         /* gw_intake_begin was asked */
    struct gw_buf xml_in;        /* GW_BODY_XML */
    uint64_t body_bytes;         /* raw body bytes received */
    bool body_failed;            /* an error is recorded; the rest is dropped */
    enum s3_err body_err;
    const char *body_err_msg;
    const char *body_err_xml;    /* more elements inside its <Error> (arena), or NULL */
    const struct s3_error *cold_err; /* S3E_COLD_PASSED's code and status (arena) */
    struct auth_body_result body_res;

    /* operation state kept between the first and the last call */
    struct obj_meta put_meta;    /* headers to store with a PUT */
    unsigned part_no;
    const char *upload_id;
    struct backend_part_range part_rng;  /* GET/HEAD ?partNumber: found once (h_part.c) */
    bool part_known;

    /* the response, for the access log */
    unsigned status;
    uint64_t resp_bytes;
    enum gw_read read;
    bool close_conn;             /* the framing is ambiguous: answer now, then close */
    bool hdr_failed;             /* a response header could not be added: gw_reply answers 500 */
    struct timespec t_body;      /* when the headers were in: the body's rate clock */
};

/* Header / query lookups (names lower case for headers, exact for query). */
const char *gw_req_header(const struct gw_req *r, const char *name);
const char *gw_req_query(const struct gw_req *r, const char *name);
bool gw_req_has_query(const struct gw_req *r, const char *name);
/* A count parameter (max-keys, max-parts, part-number-marker ...): *out is
 * `def` without it, values over `cap` clamp to cap. false when it is not a
 * non-negative integer. */
bool gw_req_query_uint(const struct gw_req *r, const char *name, unsigned def, unsigned cap,
                       unsigned *out);

/* ---- responses: each queues exactly one response on r->conn ---- */

/* Adds the common headers (request id, server) and queues `resp` with
 * `status`; destroys resp. When gw_resp_header failed for this request
 * (r->hdr_failed), a non-5xx resp is replaced by a 500 InternalError: an
 * answer missing a header it should carry is never sent as if complete. */
void gw_reply(struct gw_req *r, unsigned status, struct MHD_Response *resp);
/* Cache hits of GW_HIT_COPY_MIN to GW_HIT_COPY_MAX bytes read into memory and
 * sent with their headers in one send (hit_copy.c says why). gw_hit_copy_take
 * reads [at, at + len) of fd into a buffer counted against the budget; NULL
 * when over it, out of memory or short of bytes (then the caller sends the
 * file). gw_hit_copy_release gives a buffer back (a libmicrohttpd free
 * callback; any thread). gw_hit_copy_count counts a complete hit's response,
 * copied or sent by sendfile, for /metrics. */
enum { GW_HIT_COPY_MIN = 128 * 1024 + 1, GW_HIT_COPY_MAX = 4 * 1024 * 1024 };
#define GW_HIT_COPY_BUDGET (64ull * 1024 * 1024)
struct gw_hit_copy;
struct gw_hit_copy *gw_hit_copy_new(uint64_t budget);
void gw_hit_copy_free(struct gw_hit_copy *hc);
bool gw_hit_copy_wanted(const struct conf *c, uint64_t len);
void *gw_hit_copy_take(struct gw_hit_copy *hc, int fd, uint64_t at, uint64_t len);
void gw_hit_copy_release(void *buf);
void gw_hit_copy_count(struct gw_hit_copy *hc, bool copied);
void gw_hit_copy_stats(const struct gw_hit_copy *hc, uint64_t *copied, uint64_t *sendfile,
                       uint64_t *held);

/* Adds "name: value" to resp (both copied). An empty value, which
 * libmicrohttpd 0.9.75 refuses (add_response_entry tests content[0]), is
 * sent as one space: "name:  " on the wire, an empty value to every HTTP
 * parser (RFC 9110 5.5: whitespace around a field value is not part of it).
 * 0, or -1 (a value with CR/LF, no memory), logged once here and recorded
 * in r->hdr_failed. Any thread that owns r. */
int gw_resp_header(struct gw_req *r, struct MHD_Response *resp, const char *name,
                   const char *value);
/* The value gw_resp_header hands libmicrohttpd for `value` (pure). */
const char *gw_resp_header_value(const char *value);
/* An S3 XML <Error>; msg NULL uses the table's message. extra_xml (may be
 * NULL) is inserted inside <Error> (already escaped). */
void gw_reply_error(struct gw_req *r, enum s3_err e, const char *msg, const char *extra_xml);
/* The same error as a response not yet queued, for handlers that add
 * headers (416's Content-Range); NULL when out of memory. */
struct MHD_Response *gw_error_response(struct gw_req *r, enum s3_err e, const char *msg,
                                       const char *extra_xml);
/* A body (takes `body`, allocated with malloc; may be NULL for empty). */
void gw_reply_body(struct gw_req *r, unsigned status, const char *content_type, char *body,
                   size_t len);
void gw_reply_xml_buf(struct gw_req *r, unsigned status, struct gw_buf *xml);
/* The XML in `xml` (taken; the buffer is reset) as a response not yet
 * queued, Content-Type set and r->resp_bytes counted, for handlers that add
 * headers; NULL when out of memory. */
struct MHD_Response *gw_xml_response(struct gw_req *r, struct gw_buf *xml);

/* ---- XML output (gateway/xml.c) ---- */

/* Appends s with &, <, >, ", ' and control characters escaped as XML needs. */
int gw_xml_escape(struct gw_buf *b, const char *s);
/* Appends "<tag>escaped</tag>". */
int gw_xml_elem(struct gw_buf *b, const char *tag, const char *value);
/* Starts a document: declaration and "<root xmlns=S3>". */
int gw_xml_begin(struct gw_buf *b, const char *root);
/* A 200 with the XML built in `xml` (taken), or, when building it failed
 * (rc != 0: its cap, memory), an InternalError and the buffer freed. */
void gw_reply_xml_built(struct gw_req *r, struct gw_buf *xml, int rc);
/* Percent-encodes s as S3 does for encoding-type=url (keeps unreserved and '/'). */
int gw_url_encode(struct gw_buf *b, const char *s, bool keep_slash);

/* Parsing XML bodies with libxml2: no network, no entity expansion. */
struct gw_xml_parts {                 /* CompleteMultipartUpload */
    struct backend_part *parts;       /* malloc'd */
    size_t n;
};
/* 0, or -1 when the body is not the expected document (MalformedXML). */
int gw_xml_parse_complete(const char *xml, size_t len, struct gw_xml_parts *out);
struct gw_xml_delete {                /* DeleteObjects */
    char **keys;                      /* malloc'd, each malloc'd */
    size_t n;
    bool quiet;
};
int gw_xml_parse_delete(const char *xml, size_t len, size_t max_keys, struct gw_xml_delete *out);
void gw_xml_delete_free(struct gw_xml_delete *d);
/* CreateBucketConfiguration: *region gets a malloc'd LocationConstraint or NULL. */
int gw_xml_parse_create_bucket(const char *xml, size_t len, char **region);
/* AccessControlPolicy (PutBucketAcl / PutObjectAcl): 0 with *owner_only
 * true when it has grants and each gives FULL_CONTROL to the canonical user
 * `owner`; -1 when it is not such a document (MalformedACLError). */
int gw_xml_parse_acl(const char *xml, size_t len, const char *owner, bool *owner_only);

/* ---- HTTP helpers (gateway/http.c) ---- */

struct gw_range {
    bool present;        /* a usable single range was given */
    uint64_t first, last;/* inclusive, within the object */
};
enum gw_range_result { GW_RANGE_NONE, GW_RANGE_OK, GW_RANGE_UNSATISFIABLE };
/* Parses a Range header against an object of `size` bytes. Anything that is
 * not a single valid byte range is ignored (NONE, the whole object), as HTTP
 * allows; a syntactically valid range that starts past the end is
 * UNSATISFIABLE. */
enum gw_range_result gw_range_parse(const char *hdr, uint64_t size, struct gw_range *out);

/* The Content-Encoding an object keeps from a PUT's value `in`: the
 * aws-chunked token (this request's framing, not the object's) taken out
 * with its comma, everything else byte for byte ("deflate, gzip" stays so).
 * Writes at most cap bytes with the NUL into out; "" when nothing is left.
 * 0, or -1 when it does not fit. Pure. */
int gw_content_encoding_stored(const char *in, char *out, size_t cap);

/* RFC 1123 date for headers; buf >= 30 bytes. */
void gw_http_date(time_t t, char *buf, size_t len);
/* ISO 8601 with milliseconds for XML (2009-10-12T17:50:30.000Z); buf >= 25. */
void gw_iso_date(const struct timespec *ts, char *buf, size_t len);
/* Parses RFC 1123, RFC 850 and asctime dates; -1 when invalid. */
int gw_http_date_parse(const char *s, time_t *out);

/* Evaluates If-Match / If-None-Match / If-Modified-Since / If-Unmodified-Since
 * against an object as S3 does: true, with the error (S3E_NOT_MODIFIED or
 * S3E_PRECONDITION_FAILED) in *err, when the request must stop. `copy`: the
 * x-amz-copy-source-if-* headers of a copy's source instead of the plain
 * ones. */
bool gw_conditions_fail(const struct gw_req *r, bool copy, const char *etag, time_t mtime,
                        enum s3_err *err);

/* The condition of a conditional write (PutObject, CopyObject's destination,
 * CompleteMultipartUpload) from If-None-Match / If-Match, as AWS reads them:
 * If-None-Match only as "*", If-Match one ETag (quotes optional) or "*".
 * 0 with *out filled (kind BACKEND_COND_NONE without either header), or -1
 * with *err: S3E_NOT_IMPLEMENTED for If-None-Match other than "*" or both
 * headers together, as AWS answers them. */
int gw_write_cond(const struct gw_req *r, struct backend_cond *out, enum s3_err *err);

/* Percent-decodes s[0..n) into a new arena string; '+' becomes ' ' when
 * plus_is_space. NULL when a %XX is malformed or the result holds a NUL. */
char *gw_pct_decode(struct gw_arena *a, const char *s, size_t n, bool plus_is_space);

/* ---- request parsing (gateway/request.c) ---- */

/* Splits the raw URI, decodes path and query, finds bucket and key (path or
 * virtual-hosted style), and the operation. Returns 0 or an S3 error. */
int gw_req_parse(struct gw_req *r, const char *raw_uri, enum s3_err *err, const char **msg);

/* What S3 checks of every request before its operation runs, after auth:
 * the bucket name (InvalidBucketName), versionId (only "null" on an
 * unversioned bucket: InvalidArgument) and the ACL headers of a write
 * (gw_acl_headers_check). 0, or -1 with the error in *err and *msg. */
int gw_req_check(const struct gw_req *r, enum s3_err *err, const char **msg);

/* The S3 sub-resource that made this request GW_OP_NOT_IMPLEMENTED ("acl",
 * "website", ...), for the access log; NULL when there is none. */
const char *gw_req_unsupported(const struct gw_req *r);
/* The sub-resource of the request for the access log: "tagging" for the
 * tagging operations, else gw_req_unsupported(r). */
const char *gw_req_subresource(const struct gw_req *r);

/* ---- the front end's connections (listen.c, conn_guard.c, framing.c) ---- */

/* "host:port", or "[host]:port" for an IPv6 address, into buf. */
void gw_listen_name(const char *host, uint16_t port, char *buf, size_t len);
/* Resolves host (an address or a name; IPv4 first when a name has both)
 * and returns a bound, listening, non-blocking socket in *fd_out. -1 with
 * the address and the reason (errno text) logged, e.g. a port in use. */
int gw_listen_open(const char *host, uint16_t port, int *fd_out, bool *ipv6_out);
/* True for 0.0.0.0 and [::]: the gateway then warns that it is reachable
 * from the network. */
struct sockaddr;
bool gw_addr_is_any(const struct sockaddr *sa);
/* Raises the open-file soft limit to the hard limit; returns the limit in
 * force and the one before in *before. Call once, at start. */
uint64_t gw_fd_limit_raise(uint64_t *before);

/* The thread that accepts every connection and gives it to an HTTP thread
 * (one libmicrohttpd daemon each): the one of the CPU it came in on, unless
 * that one holds two more than the least held (see accept.c); it keeps
 * connections.max (limit) and connections.per_client. Owns lfd from
 * the call on, also when it fails. daemons must outlive it. 0, or -1
 * (logged). */
struct MHD_Daemon;
struct gw_accept;
enum gw_refused { GW_REFUSED_LIMIT, GW_REFUSED_PER_CLIENT, GW_REFUSED_COUNT };
int gw_accept_start(int lfd, struct MHD_Daemon *const *daemons, unsigned n, unsigned limit,
                    unsigned per_client, struct gw_accept **out);
/* Daemon i closed a connection from sa (its NOTIFY_CLOSED): any thread. */
void gw_accept_closed(struct gw_accept *a, unsigned i, const struct sockaddr *sa);
/* Stops accepting and closes the listening socket: the kernel refuses new
 * connections from then on; the open ones stay with their daemons. */
void gw_accept_stop(struct gw_accept *a);
/* After every daemon stopped (their closes still count down). */
void gw_accept_free(struct gw_accept *a);
/* For /metrics: the connections each HTTP thread holds (at most max
 * threads; returns how many), and connections closed at a limit. */
unsigned gw_accept_threads(const struct gw_accept *a, unsigned *open, unsigned max);
uint64_t gw_accept_refused(const struct gw_accept *a, enum gw_refused why);

/* The deadlines of the request head (see conn_guard.c). IDLE: the request
 * line must come within idle_timeout_s; HEADER: the headers within
 * header_timeout_s of the request line. */
enum gw_deadline { GW_DEADLINE_IDLE, GW_DEADLINE_HEADER, GW_DEADLINE_COUNT };
struct gw_guard;   /* the thread that enforces them */
struct gw_conn;    /* one connection's deadline */
int gw_guard_start(unsigned idle_timeout_s, unsigned header_timeout_s, struct gw_guard **out);
/* Stops the thread and frees g; every gw_conn must be closed already. */
void gw_guard_stop(struct gw_guard *g);
/* A new connection on descriptor fd, armed with the IDLE deadline; NULL when
 * out of memory (the connection then has no deadline but libmicrohttpd's).
 * These run in the connection's libmicrohttpd thread; gw_conn_close before
 * libmicrohttpd closes fd (its NOTIFY_CLOSED callback). NULL c is a no-op. */
struct gw_conn *gw_conn_open(struct gw_guard *g, int fd);
void gw_conn_close(struct gw_conn *c);
void gw_conn_arm(struct gw_conn *c, enum gw_deadline d);
void gw_conn_disarm(struct gw_conn *c);
void gw_guard_stats(struct gw_guard *g, uint64_t *open, uint64_t *closed_idle,
                    uint64_t *closed_header);

/* For /metrics: the connection counters of the running server. */
enum { GW_STATS_THREADS = 256 };  /* conf's THREADS_MAX */
struct gw_conn_stats {
    uint64_t open, limit, per_client;
    uint64_t closed_idle, closed_header, closed_body_rate;
    /* PUT/UploadPart body bytes taken in on intake threads / on the
     * connection's own thread (small bodies, or no buffer free) */
    uint64_t body_bytes_intake, body_bytes_inline;
    uint64_t body_buffered;       /* bytes of body buffers held now */
    unsigned body_threads;
    /* closed on arrival: connections.max held, connections.per_client */
    uint64_t refused_limit, refused_per_client;
    unsigned http_threads;        /* entries of thread_open */
    unsigned thread_open[GW_STATS_THREADS];   /* connections each HTTP thread holds */
};
void gw_conn_stats_get(const struct gw *g, struct gw_conn_stats *out);

/* RFC 9112 6.1/6.3: NULL when the request's body length is unambiguous;
 * else the message for a 400 after which the connection is closed (both
 * Transfer-Encoding and Content-Length, Content-Lengths that differ or are
 * a list, a Transfer-Encoding other than one "chunked", white space before
 * a header name's colon). hdrs as collected: lower-case names, every line. */
const char *gw_framing_error(const struct auth_hdr *hdrs, size_t n);

/* ---- handlers (gateway/h_*.c) ---- */

/* Called once when the request line and headers are in, after auth. May
 * reply at once (an error); otherwise prepares the body's destination. */
void gw_handle_begin(struct gw_req *r);
/* Called once when the whole body was received and verified. Must reply. */
void gw_handle_end(struct gw_req *r);

/* GET/HEAD ?partNumber=N (h_part.c). gw_part_find checks the parameter as
 * S3 does (an integer 1..10000, not with a Range) and finds the part once
 * per request (a request resumed after a cache wait keeps it): 0 when the
 * request has no partNumber, 1 with r->part_rng set, -1 when it answered
 * with an error. gw_part_headers adds the part's Content-Range and
 * x-amz-mp-parts-count. */
int gw_part_find(struct gw_req *r);
void gw_part_headers(struct gw_req *r, struct MHD_Response *resp);

void gw_h_service(struct gw_req *r);
void gw_h_bucket_begin(struct gw_req *r);
void gw_h_bucket_end(struct gw_req *r);
void gw_h_list_objects(struct gw_req *r, bool v2);
void gw_h_list_uploads(struct gw_req *r);
void gw_h_delete_objects(struct gw_req *r);
void gw_h_object_get(struct gw_req *r, bool head);
void gw_h_object_put_begin(struct gw_req *r);
void gw_h_object_put_end(struct gw_req *r);
void gw_h_object_copy(struct gw_req *r);
void gw_h_object_delete(struct gw_req *r);
void gw_h_mpu_create(struct gw_req *r);
void gw_h_mpu_part_begin(struct gw_req *r);
void gw_h_mpu_part_end(struct gw_req *r);
void gw_h_mpu_part_copy(struct gw_req *r);
void gw_h_mpu_complete(struct gw_req *r);
void gw_h_mpu_abort(struct gw_req *r);
void gw_h_mpu_list_parts(struct gw_req *r);
/* The header of the checksum a Complete body's part element holds
 * ("ChecksumCRC32" -> "x-amz-checksum-crc32"), or NULL for any other
 * element; from h_mpu.c's table of the algorithms. */
const char *gw_checksum_header_of_elem(const char *elem);
/* Get/Put/Delete of object and bucket tags (gateway/h_tagging.c): r->key
 * NULL for the bucket's. */
void gw_h_tagging_get(struct gw_req *r);
void gw_h_tagging_put(struct gw_req *r);
void gw_h_tagging_delete(struct gw_req *r);

/* The x-amz-tagging header of a PutObject, CreateMultipartUpload or
 * CopyObject (REPLACE), parsed and checked as S3 does: 0 with *canon the
 * canonical x-amz-tagging value (arena; "" for no tags) or NULL when the
 * header is absent; -1 with the error in *err and *msg. */
int gw_tagging_header(struct gw_req *r, const char **canon, enum s3_err *err,
                      const char **msg);
/* Adds the x-amz-tagging header's tags to what a put or upload stores
 * (OBJ_TAGGING_HDR). 0, or -1 with the error in *err and *msg. */
int gw_tagging_collect(struct gw_req *r, struct obj_meta *m, enum s3_err *err,
                       const char **msg);

/* ACLs as a bucket with ObjectOwnership BucketOwnerEnforced answers them
 * (gateway/h_acl.c): reading gives the owner's FULL_CONTROL; setting only
 * what changes nothing. */
void gw_h_acl_get(struct gw_req *r);
void gw_h_acl_put(struct gw_req *r);
/* x-amz-acl / x-amz-grant-* on PutObject, CopyObject, CreateMultipartUpload
 * and CreateBucket: "private" and "bucket-owner-full-control" pass, any
 * other ACL is AccessControlListNotSupported (CreateBucket:
 * InvalidBucketAclWithObjectOwnership). 0, or -1 with *err and *msg. */
int gw_acl_headers_check(const struct gw_req *r, enum s3_err *err, const char **msg);
/* <Owner><ID/><DisplayName/></Owner> of the requesting user (the name
 * ListBuckets and the listings give as owner). */
int gw_owner_xml(struct gw_buf *b, const struct gw_req *r);
/* A listing's opaque continuation token for the name s (base64; returns new,
 * free()), and back (NULL when it is no token we made; in r's arena). */
char *gw_token_encode(const char *s);
char *gw_token_decode(struct gw_arena *a, const char *tok);
/* The owner's ID, as gw_owner_xml writes it. */
const char *gw_owner_id(const struct gw_req *r);

/* ListObjectVersions (gateway/h_versions.c) on buckets that are never
 * versioned: the current objects, each its one version "null". */
void gw_h_list_versions(struct gw_req *r);

/* The listing machinery of ListObjects v1/v2 (h_bucket.c), shared with
 * ListObjectVersions: the common parameters and one page of the backend's
 * listing. */
struct gw_listing {
    const char *prefix;        /* "" when absent */
    const char *delim;         /* NULL when absent */
    unsigned max_keys;
    bool url;                  /* encoding-type=url */
    struct backend_list_page page;   /* backend_list_page_free() */
};
/* Reads prefix, delimiter, max-keys and encoding-type. 0, or -1 after
 * replying with the error. */
int gw_list_params(struct gw_req *r, struct gw_listing *l);
/* Lists the page of keys after `start` (NULL: from the first) into l->page.
 * 0, or -1 after replying with the error. */
int gw_list_fetch(struct gw_req *r, struct gw_listing *l, const char *start);
/* Ends a listing begun in b (rc: what writing its head gave): the page's
 * objects as <Contents> (or <Version>, VersionId null, IsLatest true, when
 * version; with <Owner> when owner) and <CommonPrefixes>, the root's end
 * tag (ListBucketResult / ListVersionsResult), then replies; frees the page. */
void gw_list_reply(struct gw_req *r, struct gw_buf *b, struct gw_listing *l, int rc,
                   bool owner, bool version);
/* "<tag>v</tag>", v URL-encoded when url (encoding-type=url). */
int gw_list_elem(struct gw_buf *b, const char *tag, const char *v, bool url);

/* Collects the headers of a PUT / CreateMultipartUpload that S3 stores
 * (Content-Type, x-amz-meta-*, ...) into m. 0, or an S3 error through *err. */
int gw_collect_put_headers(struct gw_req *r, struct obj_meta *m, enum s3_err *err);
/* Adds the checksum the body verifier computed (if any) to m, for what a
 * PutObject / UploadPart stores. 0, or -1 when memory is short. */
int gw_body_checksum_add(const struct gw_req *r, struct obj_meta *m);
/* PutObject / UploadPart stored the body: 200 with its ETag (the body's
 * MD5) and the checksum the body verifier computed, if any. */
void gw_reply_body_stored(struct gw_req *r);
/* A write of r's object succeeded (PutObject, CopyObject, Complete): the
 * cache drops what it held, so the next read sees the write, and warms the
 * new object when cache_on_write is set. */
void gw_cache_written(struct gw_req *r);

/* Records an error found before or while the body arrives: the rest of the
 * body is dropped and the error is the response. The first error wins. */
void gw_req_fail(struct gw_req *r, enum s3_err e, const char *msg);
/* gw_req_fail with elements the <Error> carries besides the usual ones
 * (escaped XML, copied into r's arena; left out when memory is short). */
void gw_req_fail_xml(struct gw_req *r, enum s3_err e, const char *msg, const char *xml);
/* gw_req_fail with the error of a backend status (and the cold tier's
 * message for an outage). */
void gw_req_fail_backend(struct gw_req *r, enum backend_status st);

/* What an operation needs on its bucket (on the service for ListBuckets):
 * false for the health check, which needs nothing. */
bool gw_op_permission(enum gw_op op, enum auth_perm *need);

/* The payload length a PUT announces: x-amz-decoded-content-length for
 * aws-chunked bodies, else Content-Length. -1 when neither is given. */
long long gw_put_announced_length(const struct gw_req *r);

/* PutObject / UploadPart: checks the announced payload size (411 without
 * one, EntityTooLarge over 5 GiB); 0, or -1 after gw_req_fail(). */
int gw_check_put_length(struct gw_req *r);

/* Parses x-amz-copy-source ("/bucket/key" or "bucket/key", URL-encoded,
 * optionally "?versionId=null"). 0, or -1 after replying with the error. */
int gw_parse_copy_source(struct gw_req *r, const char **bucket, const char **key);

/* Liveness and readiness (gateway/h_admin.c), answered without auth. begin:
 * when the headers are in (refuses other methods and any body before it is
 * read); the handler: when the request is complete. */
void gw_h_probe_begin(struct gw_req *r);
void gw_h_probe(struct gw_req *r);
/* Is op one of them? */
bool gw_op_is_probe(enum gw_op op);

/* A CORS preflight (OPTIONS, gateway/h_cors.c), answered when the headers
 * are in, before any auth: no bucket has a CORS configuration here, so it is
 * S3's 400 without Origin and its 403 with one. */
void gw_h_cors_preflight(struct gw_req *r);

/* Metrics (gateway/metrics.c): one call per finished request; the page. */
void gw_metrics_request(enum gw_op op, unsigned status, uint64_t ns, enum gw_cache_use use);
void gw_h_metrics(struct gw_req *r);

/* Prefetch hints (gateway/h_prefetch.c, contract in cache/HINTS.md). */
#define GW_HINT_MAX_BODY (16u * 1024 * 1024)
#define GW_HINT_MAX_OBJECTS 1000000u
void gw_h_prefetch(struct gw_req *r);
/* POST /bucket?flush, GET /bucket?writeback (h_writeback.c) */
void gw_h_writeback(struct gw_req *r);
/* The JSON in b (taken) with `status`; rc != 0 (b could not be built): 500. */
void gw_reply_json(struct gw_req *r, unsigned status, struct gw_buf *b, int rc);
/* Appends s as a JSON string (quotes included). */
int gw_json_str(struct gw_buf *b, const char *s);

/* Suspends / resumes r's connection: the cache waiter callbacks. */
void gw_req_suspend(void *arg);
void gw_req_resume(void *arg);
/* Suspends r's connection and leaves its state alone: a body waiting for
 * an intake thread (gateway/intake.c). */
void gw_req_suspend_intake(struct gw_req *r);

/* Request bodies taken in on threads of their own (gateway/intake.c). */
struct gw_intake_pool;
/* Takes in one piece of r's body (auth, digests, the put); records a
 * failure with gw_req_fail. Runs on an intake thread. */
typedef void gw_intake_take_fn(struct gw_req *r, const uint8_t *buf, size_t len);
/* threads 0: no pool (*out NULL), every body inline. 0, or -1 logged. */
int gw_intake_pool_start(unsigned threads, gw_intake_take_fn *take_in,
                         struct gw_intake_pool **out);
/* Lets every queued job end (resuming its connection), joins the threads;
 * later bodies are taken in inline. Before MHD_stop_daemon. */
void gw_intake_pool_stop(struct gw_intake_pool *p);
void gw_intake_pool_free(struct gw_intake_pool *p);
/* Bytes of body buffers held by requests now (0 without a pool). */
uint64_t gw_intake_pool_buffered(struct gw_intake_pool *p);
/* At r's first body bytes: true when r's body goes through the pool
 * (r->intake set); false (small, no pool, no buffers): take it in inline. */
bool gw_intake_begin(struct gw_intake_pool *p, struct gw_req *r, long long announced);
/* Copies what fits of data[0..n) for the intake threads; returns how many
 * bytes it took. Fewer than n: the connection is suspended, and is resumed
 * to hand over the rest. */
size_t gw_intake_take(struct gw_req *r, const char *data, size_t n);
/* At the body's end: true when every byte is taken in (r's body state is
 * then the connection thread's again); false: suspended until it is. */
bool gw_intake_drained(struct gw_req *r);
/* Waits until no job of r is out (r->body and r->put are then safe to
 * touch). No-op without intake. */
void gw_intake_quiesce(struct gw_req *r);
/* Quiesces and frees r's intake (at the request's end). */
void gw_intake_end(struct gw_req *r);
/* now + the cache's wait timeout, as a waiter deadline. */
struct timespec gw_wait_deadline(const struct gw_req *r);

/* CopyObject / UploadPartCopy: parses x-amz-copy-source, checks read
 * permission on it, HEADs it into *src (caller clears) and evaluates the
 * x-amz-copy-source-if-* conditions. 0, or -1 after replying. */
int gw_copy_source_open(struct gw_req *r, const char **bucket, const char **key,
                        struct obj_meta *src);
/* The body of a CopyObject / UploadPartCopy answer: <root> with the copy's
 * LastModified and ETag from m, and with `checksum` its x-amz-checksum-*
 * (a part copied into an upload with a checksum algorithm). 0, or -1 (b's
 * limit, memory). */
int gw_xml_copy_result(struct gw_buf *b, const char *root, const struct obj_meta *m,
                       bool checksum);
/* <ChecksumCRC32>..</ChecksumCRC32> and the like for each x-amz-checksum-*
 * header of m (h_mpu.c's table of algorithms). */
int gw_xml_checksum_elems(struct gw_buf *b, const struct obj_meta *m);

/* Replies with the error for a backend status, naming the bucket/key. */
void gw_reply_backend_error(struct gw_req *r, enum backend_status st);

#endif
