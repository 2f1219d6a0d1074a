/* backend/backend.h - the cold tier behind one interface. Two
 * implementations: `posix`, a directory whose sub-directories are buckets and
 * whose files are objects, and `s3`, any S3 server reached over HTTP(S) with
 * libcurl and SigV4 (backend_s3_open). Calls are synchronous and thread-safe: any thread
 * may call any verb on one handle at once. Names (buckets, keys) are passed
 * decoded (raw UTF-8 bytes); the backend validates them itself. */
#ifndef SHARDGATE_BACKEND_H
#define SHARDGATE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct backend;            /* opaque: one cold tier */
struct backend_obj;        /* opaque: an object open for reading */
struct backend_put;        /* opaque: an object or part being written */

enum backend_status {
    BACKEND_OK = 0,
    BACKEND_NO_BUCKET,         /* NoSuchBucket */
    BACKEND_NO_KEY,            /* NoSuchKey */
    BACKEND_NO_UPLOAD,         /* NoSuchUpload */
    BACKEND_BUCKET_EXISTS,     /* BucketAlreadyOwnedByYou */
    BACKEND_BUCKET_TAKEN,      /* s3: BucketAlreadyExists, another owner's bucket */
    BACKEND_BUCKET_NOT_EMPTY,  /* BucketNotEmpty */
    BACKEND_BAD_BUCKET_NAME,   /* InvalidBucketName */
    BACKEND_BAD_KEY,           /* key the store cannot hold safely: "." or ".."
                                  segment, reserved name, NUL byte, empty */
    BACKEND_KEY_TOO_LONG,      /* > 1024 bytes, or a segment > 255 bytes */
    BACKEND_KEY_CONFLICT,      /* posix: "a/b" is an object and "a/b/c" is asked
                                  for, or the reverse, on a file system without
                                  hard links or RENAME_EXCHANGE (posix_nest.c) */
    BACKEND_BAD_RANGE,         /* copy-source range outside the object */
    BACKEND_INVALID_PART,      /* part missing or its ETag differs */
    BACKEND_INVALID_PART_ORDER,/* parts not in ascending order */
    BACKEND_ENTITY_TOO_SMALL,  /* a part other than the last is < 5 MiB */
    BACKEND_TOO_LARGE,         /* an object or part over S3's size limits */
    BACKEND_NO_SPACE,          /* ENOSPC / EDQUOT */
    BACKEND_DENIED,            /* a path that would leave the store (symlink) */
    BACKEND_IO,                /* any other system error; errno was logged */
    BACKEND_NOMEM,
    BACKEND_UNAVAILABLE,       /* s3: the cold tier cannot be connected to, broke
                                  off, stalled mid-transfer, or answered
                                  5xx/SlowDown after the retries */
    BACKEND_INVALID_REQUEST,   /* s3: the cold tier refused the request as malformed
                                  (InvalidRequest), e.g. a part's checksum algorithm */
    BACKEND_READ_ONLY,         /* posix: the store is read-only (a read-only mount,
                                  no writable state directory, or a directory the
                                  process may not write): a write is refused */
    BACKEND_TIMEOUT,           /* s3: connected, but the answer did not begin within
                                  the call's deadline (a hung or overloaded tier) */
    BACKEND_NO_TAG_SET,        /* the bucket has no tags (NoSuchTagSet) */
    BACKEND_META_TOO_LARGE,    /* posix: an object's metadata and tags (or a bucket's
                                  tags) are more than the file system keeps with one
                                  file (ext4: about 4 KiB of extended attributes) */
    BACKEND_PRECONDITION_FAILED, /* a conditional write's condition did not hold
                                  (PreconditionFailed) */
    BACKEND_COND_CONFLICT,     /* s3: the cold tier refused a conditional write that
                                  raced another write (ConditionalRequestConflict) */
    BACKEND_INVALID_PART_NUMBER, /* ?partNumber=N beyond the object's parts
                                  (InvalidPartNumber, 416) */
    BACKEND_PARTS_UNKNOWN,     /* posix: a multipart object whose part boundaries
                                  were not kept (completed before they were, or
                                  too many irregular parts for the xattr) */
    BACKEND_BAD_DIGEST,        /* write-back: staged bytes that do not match the MD5
                                  the client was given (BadDigest) */
    BACKEND_COLD_ERROR,        /* s3: the cold tier answered an error this enum has
                                  no name for (a 4xx such as InvalidObjectState, or
                                  a 5xx to a call that is not retried): its code,
                                  message and HTTP status are kept for the gateway
                                  to pass on (backend_cold_error_take) */
};

const char *backend_status_name(enum backend_status st);

/* The error a cold tier answered, to be passed to the client as it is. */
struct backend_cold_error {
    int http_status;           /* 400-599 */
    char code[64];             /* S3's code ("InvalidObjectState"); "" when the
                                  answer had no body (HEAD) */
    char message[256];         /* the cold tier's message, "" when it gave none */
};

/* Takes (and forgets) the error of the last cold-tier call made on the calling
 * thread, when that call ended in BACKEND_COLD_ERROR: true and *out filled.
 * False when the last call on this thread ended otherwise, or the error was
 * taken already (e.g. the call ran on a fill worker, not on this thread). */
bool backend_cold_error_take(struct backend_cold_error *out);
/* Hands an error taken on another thread (a fill worker's) to the calling
 * thread, for its own backend_cold_error_take. */
void backend_cold_error_put(const struct backend_cold_error *e);

/* One stored response header of an object: Content-Type, Content-Encoding,
 * Content-Disposition, Cache-Control, Expires, Content-Language and every
 * x-amz-meta-*. Names are lower case. */
struct obj_hdr {
    char *name;
    char *value;
};

/* What the store knows about an object. Owns its strings: obj_meta_clear(). */
struct obj_meta {
    uint64_t size;
    struct timespec mtime;   /* Last-Modified */
    char etag[72];           /* bare (no quotes): 32 hex, or 32 hex "-" parts */
    struct obj_hdr *hdrs;
    size_t n_hdrs;
};

void obj_meta_clear(struct obj_meta *m);
/* Deep-copies hdrs of `src` into `dst` (dst's old hdrs are freed). 0 or -1. */
int obj_meta_copy_hdrs(struct obj_meta *dst, const struct obj_meta *src);
/* Appends one header (copies both strings). 0, or -1 when out of memory. */
int obj_meta_add_hdr(struct obj_meta *m, const char *name, const char *value);
/* The value of header `name` (lower case), or NULL. Borrowed. */
const char *obj_meta_get_hdr(const struct obj_meta *m, const char *name);

/* ---- tag sets (backend/tags.c) ----
 * An object's tags travel with its headers: the header OBJ_TAGGING_HDR holds
 * the tag set as an S3 x-amz-tagging value ("k=v&k2=v2", each key and value
 * percent-encoded, obj_tags_to_query), which the posix store keeps with the
 * object's metadata and the s3 tier sends on a put. A cold S3 answers a
 * HEAD/GET with the count only (OBJ_TAGGING_COUNT_HDR). Pure functions. */
#define OBJ_TAGGING_HDR "x-amz-tagging"
#define OBJ_TAGGING_COUNT_HDR "x-amz-tagging-count"
#define OBJ_TAGS_MAX_OBJECT 10u     /* S3's limits on a tag set */
#define OBJ_TAGS_MAX_BUCKET 50u
#define OBJ_TAG_KEY_MAX 128u        /* Unicode characters */
#define OBJ_TAG_VALUE_MAX 256u

struct obj_tag {
    char *key;
    char *value;
};
/* A tag set in the order given. Owns its strings: obj_tags_clear(). */
struct obj_tags {
    struct obj_tag *v;
    size_t n;
};

enum obj_tags_status {
    OBJ_TAGS_OK = 0,
    OBJ_TAGS_MALFORMED,    /* not a Tagging document / not a URL query */
    OBJ_TAGS_TOO_MANY,     /* more tags than the limit */
    OBJ_TAGS_BAD_KEY,      /* empty, over 128 characters, not UTF-8 or a character
                              S3 refuses (it allows letters, digits, white space
                              and _ . : / = + - @) */
    OBJ_TAGS_BAD_VALUE,    /* over 256 characters, or as for a key */
    OBJ_TAGS_SYSTEM_KEY,   /* starts with "aws:" */
    OBJ_TAGS_DUPLICATE,    /* two tags with one key */
    OBJ_TAGS_NOMEM,
};

void obj_tags_clear(struct obj_tags *t);
/* Appends a tag (copies both). OBJ_TAGS_OK or OBJ_TAGS_NOMEM. */
enum obj_tags_status obj_tags_add(struct obj_tags *t, const char *key, const char *value);
/* Parses a <Tagging><TagSet><Tag><Key/><Value/></Tag>...</TagSet></Tagging>
 * document (libxml2, no network, no entities; elements matched by local
 * name) into *out (caller clears). MALFORMED or NOMEM; nothing is checked
 * against S3's limits here (obj_tags_check). */
enum obj_tags_status obj_tags_from_xml(const char *xml, size_t len, struct obj_tags *out);
/* The document S3 answers GetObjectTagging / GetBucketTagging with (and
 * Put*Tagging sends): *xml is new (free()), *len its length. 0 or -1. */
int obj_tags_to_xml(const struct obj_tags *t, char **xml, size_t *len);
/* Parses an x-amz-tagging value (empty parts skipped, "k" alone is a tag
 * with an empty value, '+' is a space) into *out (caller clears).
 * MALFORMED for a bad %-escape, an escaped NUL or an empty key before '='. */
enum obj_tags_status obj_tags_from_query(const char *q, struct obj_tags *out);
/* The canonical x-amz-tagging value of t (new; "" for no tags), or NULL. */
char *obj_tags_to_query(const struct obj_tags *t);
/* The number of tags in an x-amz-tagging value (non-empty '&' parts). */
size_t obj_tags_query_count(const char *q);
/* Checks t against S3's rules in S3's order: the count (max), then each tag
 * in turn. *at (may be NULL) receives the index of the tag at fault. */
enum obj_tags_status obj_tags_check(const struct obj_tags *t, size_t max, size_t *at);

/* ---- opening ---- */

/* How a posix store writes the bodies of large puts (1 MiB or more):
 * write() (the default, and where io_uring is blocked), io_uring through
 * the page cache, or io_uring with O_DIRECT where the file system takes it
 * (backend/posix_aw.c). */
enum backend_stage_io { BACKEND_STAGE_WRITE = 0, BACKEND_STAGE_URING, BACKEND_STAGE_DIRECT };

struct backend_posix_conf {
    const char *root;        /* the data directory; created if missing */
    const char *state_dir;   /* multipart uploads and the lock; NULL: ROOT/.shardgate */
    unsigned mpu_max_age_s;  /* incomplete multipart uploads older than this are
                                aborted (at open, then periodically); 0: never */
    enum backend_stage_io stage_io;
    char *err;               /* optional: receives why the open failed (the path and
                                the errno text), err_len bytes, NUL-terminated */
    size_t err_len;
};

/* Opens the posix store. Returns BACKEND_OK and a new handle in *out.
 * The state directory is locked for the life of the handle: a second store
 * on it fails (the message in cf->err names the holder's pid). When the
 * state directory cannot be written (EROFS, EACCES) or ROOT is on a
 * read-only mount, the store opens read-only: reads and listings work, every
 * write answers BACKEND_READ_ONLY; this is logged once. At open, temporary
 * files left by writers that died are removed (in bounded time: they live
 * in ROOT/<bucket>/.sg~tmp/ and in the state directory, never scattered
 * through the tree) and directories of ROOT that are not valid bucket names
 * are named in a warning. */
enum backend_status backend_posix_open(const struct backend_posix_conf *cf,
                                       struct backend **out);

/* Renames a gateway bucket to a bucket of the cold S3 (buckets not in the
 * map keep their name). Both strings borrowed for the life of the handle. */
struct backend_bucket_map {
    const char *gateway;
    const char *cold;
};

/* The S3 cold tier. Strings are copied by backend_s3_open. NULL/0 fields take
 * the default shown. */
struct backend_s3_conf {
    const char *endpoint;       /* "http://127.0.0.1:9000"; NULL: $AWS_ENDPOINT_URL */
    const char *region;         /* NULL: $AWS_REGION, else us-east-1 */
    const char *access_key;     /* NULL: $AWS_ACCESS_KEY_ID */
    const char *secret_key;     /* NULL: $AWS_SECRET_ACCESS_KEY */
    const char *session_token;  /* NULL: $AWS_SESSION_TOKEN (may stay unset) */
    bool virtual_hosted;        /* bucket.host/key instead of host/bucket/key */
    const char *ca_path;        /* CA file or directory; NULL: system store */
    unsigned connect_timeout_ms;/* 0: 1000 */
    unsigned request_timeout_ms;/* 0: 30000; the whole of a call with a small
                                   answer (HEAD, listing, bucket and multipart
                                   bookkeeping, DELETE), retries included; in a
                                   streamed transfer (object bodies, uploads,
                                   copies) the longest time without a byte */
    unsigned first_byte_timeout_ms; /* 0: 5000; how long a read-side call (HEAD,
                                   the GET of a miss, listings, bucket and
                                   multipart bookkeeping) waits for the answer
                                   to begin, retries included: past it the call
                                   fails with BACKEND_TIMEOUT and no retry
                                   starts. Not for uploads, copies and
                                   CompleteMultipartUpload, where the server
                                   may work long before it answers. */
    unsigned retries;           /* extra attempts of idempotent calls; 0: 2 */
    const struct backend_bucket_map *map;   /* borrowed, copied at open */
    size_t n_map;
    const char *spool_dir;      /* where uploads are spooled (O_TMPFILE); /tmp */
};

/* Opens the S3 cold tier. Does not contact the server (a tier that is down
 * at start makes each call fail with BACKEND_UNAVAILABLE instead; main asks
 * with backend_probe). Returns
 * BACKEND_OK and a new handle, BACKEND_IO for an unusable conf (no endpoint
 * or credentials; logged) or BACKEND_NOMEM. Semantics as for posix with these
 * differences: backend_obj_fd() is -1; names are validated by the cold S3,
 * not here; writes are spooled to spool_dir and sent at commit;
 * BACKEND_UNAVAILABLE and BACKEND_TIMEOUT are possible from every verb. */
enum backend_status backend_s3_open(const struct backend_s3_conf *cf, struct backend **out);

void backend_close(struct backend *b);

/* ---- write-back (backend/wb*.c) ----
 * A decorator over a cold tier. For the buckets it is given, a write
 * (PutObject, CompleteMultipartUpload, CopyObject, DeleteObject) is
 * acknowledged once it is durable on local disk: the bytes in a staging
 * store under `dir` and a journal record, both fsync'ed. Reads, HEADs and
 * listings see pending writes at once; a background uploader sends them to
 * the cold tier one at a time in the order they were acknowledged (so the
 * cold tier never shows an object before one acknowledged earlier in its
 * bucket), retries with backoff while the cold tier fails, and resumes
 * from the journal after a restart. Every other bucket passes through. */
/* Which keys of a write-back bucket are written back: a key takes the mode
 * of its longest matching prefix, and is written through when none matches. */
struct backend_wb_rule {
    const char *prefix;
    bool back;
};
struct backend_wb_rules {
    const struct backend_wb_rule *rule;
    size_t n;                      /* 0: every key of the bucket is written back */
};

struct backend_wb_conf {
    const char *dir;               /* staging directory (created): data/, state/, journal */
    const char *const *buckets;    /* the write-back buckets (borrowed during open) */
    const struct backend_wb_rules *rules;   /* [n_buckets] (borrowed during open); NULL:
                                              every key of every bucket */
    size_t n_buckets;
    uint64_t max_dirty;            /* pending bytes above which a write waits, then
                                      answers BACKEND_NOMEM (SlowDown); 0: no bound */
    unsigned dirty_wait_ms;        /* that wait; 0: 10000 */
    uint64_t compact_bytes;        /* the journal is rewritten when the queue empties
                                      and it is longer than this; 0: 1 MiB */
    uint64_t upload_bandwidth;     /* bytes/s all uploads together may send; 0: no cap */
    unsigned through_timeout_ms;   /* a write-through request (backend_put_set_write_through)
                                      is taken back and answers BACKEND_UNAVAILABLE when
                                      the uploads make no progress for this long; 0: 30000 */
    unsigned mpu_max_age_s;        /* multipart uploads begun longer ago are aborted, at
                                      open and every quarter of it (at most hourly); 0:
                                      kept until completed or aborted */
    enum backend_stage_io stage_io;   /* how the staged bodies are written */
    unsigned train_hold_ms;        /* a train's PUT waits at most this long for the one
                                      before it, then stops and goes again in its turn;
                                      0: WB_HOLD_MS (5000) */
    char *err;                     /* optional: why the open failed */
    size_t err_len;
};

/* Opens the decorator over `cold`, which it takes (closed with it, and on
 * failure). Pending writes found in the journal are queued for upload. */
enum backend_status backend_wb_open(const struct backend_wb_conf *cf, struct backend *cold,
                                    struct backend **out);

/* What is pending for a bucket (NULL: all) under a prefix (NULL: all). */
struct backend_wb_status {
    uint64_t dirty_bytes, dirty_objects;   /* acknowledged, not yet in the cold tier */
    uint64_t staged_part_bytes;            /* parts of uploads not completed (all
                                              buckets: they count in cache.size) */
    double oldest_s;                       /* age of the oldest pending write; 0: none */
    uint64_t uploaded_bytes, uploaded_objects, failures;   /* since open, all buckets */
    uint64_t upload_bps;                   /* bytes per second the uploads sent over the
                                              last 10 s, all buckets */
    uint64_t upload_copied;                /* bytes uploads copied through a buffer
                                              (MD5'd and spooled) instead of sending
                                              them from the staged file: a cold tier
                                              that is not S3 */
    uint64_t upload_hashed;                /* bytes uploads hashed from the staged
                                              files: parts checked again after the
                                              cold tier's did not make their ETag */
    uint64_t staged_direct, staged_uring, staged_write;   /* body bytes staged since
                                              start, by how (enum backend_stage_io): io_uring
                                              O_DIRECT, io_uring through the page cache,
                                              write() (small bodies, heads and tails) */
    char last_error[256];                  /* the last failed upload, "" for none */
};
/* false when b is not a write-back handle. */
bool backend_wb_status(struct backend *b, const char *bucket, const char *prefix,
                       struct backend_wb_status *out);
/* Bytes write-back keeps beside the cache (0 for a handle that is not
 * write-back): acknowledged writes waiting for their upload, and the parts
 * of multipart uploads not completed yet. O(1); any thread. The cache
 * counts them against its capacity: they are never evicted. */
uint64_t backend_wb_disk_bytes(struct backend *b);
/* Is `bucket` written back by b? (false for any other handle) */
bool backend_wb_bucket(struct backend *b, const char *bucket);
/* Waits until every write to `bucket` under `prefix` (NULL: all)
 * acknowledged before the barrier is in the cold tier, at most timeout_ms
 * (0: no limit). *barrier 0 means "now" and receives the barrier taken, so
 * a caller that waits in steps keeps the first one (may be NULL: now).
 * true when done (also for a handle or bucket that is not written back);
 * *left (may be NULL) then tells what is still pending. */
bool backend_wb_flush(struct backend *b, const char *bucket, const char *prefix,
                      unsigned timeout_ms, uint64_t *barrier, struct backend_wb_status *left);
/* Holds (true) or lets go (false) the uploader: for tests that look at
 * pending state. */
void backend_wb_pause(struct backend *b, bool paused);
/* Makes a write into a write-back bucket answer only once it is in the cold
 * tier (the x-shardgate-write: through header). No effect on other puts. */
void backend_put_set_write_through(struct backend_put *p);

/* ---- health (backend/probe.c) ---- */

/* Is the cold tier there? s3: one HEAD of the endpoint's root, never
 * retried, that counts any HTTP answer (even 403) as reachable; posix: the
 * root directory still exists and can be read. BACKEND_OK, or
 * BACKEND_UNAVAILABLE (cannot connect, the directory is gone) /
 * BACKEND_TIMEOUT (no answer within timeout_ms) with the reason in why
 * (always NUL-terminated; may name the endpoint or directory). Blocks up to
 * timeout_ms; any thread. posix: a local stat, not bounded (a hung NFS
 * mount is out of scope). */
enum backend_status backend_probe(struct backend *b, unsigned timeout_ms, char *why,
                                  size_t len);

/* What a message about the cold tier can say of it. */
struct backend_info {
    const char *kind;             /* "s3", "posix" */
    const char *location;         /* the endpoint URL (s3), NULL (posix); borrowed */
    unsigned first_byte_ms;       /* first_byte_timeout_ms (s3); 0: none */
};
void backend_info_get(const struct backend *b, struct backend_info *out);

/* ---- buckets ---- */

/* Called once per bucket in name order; return non-zero to stop. */
typedef int (*backend_bucket_cb)(void *arg, const char *name, time_t created);

enum backend_status backend_bucket_list(struct backend *b, backend_bucket_cb cb, void *arg);
enum backend_status backend_bucket_create(struct backend *b, const char *bucket);
enum backend_status backend_bucket_head(struct backend *b, const char *bucket);
/* Fails with BACKEND_BUCKET_NOT_EMPTY while it holds an object or an
 * unfinished multipart upload. */
enum backend_status backend_bucket_delete(struct backend *b, const char *bucket);

/* ---- reading objects ---- */

/* Fills *meta (caller clears it) without opening the data. */
enum backend_status backend_object_head(struct backend *b, const char *bucket,
                                        const char *key, struct obj_meta *meta);

/* As backend_object_head, but the call (retries included) gives up after
 * timeout_ms with BACKEND_TIMEOUT: for a check that has something to fall
 * back on (the cache's revalidation). posix: backend_object_head. */
enum backend_status backend_object_head_timed(struct backend *b, const char *bucket,
                                              const char *key, unsigned timeout_ms,
                                              struct obj_meta *meta);

/* Opens an object for reading and fills *meta from the same open file, so
 * meta and bytes always agree even if the key is replaced meanwhile. */
enum backend_status backend_object_open(struct backend *b, const char *bucket,
                                        const char *key, struct obj_meta *meta,
                                        struct backend_obj **out);
/* The open file descriptor (for sendfile), or -1 when the backend has none.
 * Borrowed: stays owned by the object. */
int backend_obj_fd(const struct backend_obj *o);
/* Reads up to len bytes at off; *got = 0 means end of object. */
enum backend_status backend_obj_read(struct backend_obj *o, uint64_t off, void *buf,
                                     size_t len, size_t *got);
void backend_obj_close(struct backend_obj *o);

/* Where part `part_no` of an object lies (GET/HEAD ?partNumber=N). */
struct backend_part_range {
    char etag[72];           /* the object's ETag (multipart: "<hex>-P") */
    uint64_t total;          /* the object's size */
    unsigned parts_count;    /* P; 0: not a multipart object, whose part 1 is
                                the whole object (S3 then sends no
                                x-amz-mp-parts-count) */
    uint64_t first;          /* the part's first byte in the object */
    uint64_t size;           /* the part's length */
};
/* Finds part `part_no` (1..10000) of an object without reading its bytes:
 * posix from the boundaries kept at CompleteMultipartUpload (parts.c), s3
 * from the cold tier's HEAD ?partNumber=N (Content-Range, or the sizes of
 * the parts before it when the server sends none). The caller reads the
 * bytes as a range and checks the ETag it gets against out->etag.
 * BACKEND_INVALID_PART_NUMBER beyond the parts, BACKEND_PARTS_UNKNOWN,
 * BACKEND_NO_KEY, ... */
enum backend_status backend_object_part(struct backend *b, const char *bucket, const char *key,
                                        unsigned part_no, struct backend_part_range *out);

/* ---- writing objects ---- */

/* Starts writing `key`: nothing is visible until commit. Checks that the
 * bucket exists and that the key can be stored, before any byte arrives. */
enum backend_status backend_put_begin(struct backend *b, const char *bucket, const char *key,
                                      struct backend_put **out);
enum backend_status backend_put_write(struct backend_put *p, const void *buf, size_t len);
/* Makes the object visible atomically (fsync, then rename over any old one),
 * with the headers of `meta` and the ETag meta->etag (the caller computed the
 * MD5 while streaming); meta->size and mtime are ignored. On return *out (if
 * not NULL) holds the stored object's size, mtime and etag. Frees `p`
 * whatever the result; on failure nothing became visible. */
enum backend_status backend_put_commit(struct backend_put *p, const struct obj_meta *meta,
                                       struct obj_meta *out);
/* Drops what was written. Frees `p`. */
void backend_put_abort(struct backend_put *p);

/* Pacing of a transfer: fn(arg, n) runs before each piece of n bytes is
 * sent, may sleep, and returns false to stop it (the put then fails).
 * With `last` set, the body's last byte is held back until last(arg)
 * returns: true sends it, false stops the transfer (the object never
 * becomes visible: a server waits for the whole body). */
struct backend_pacer {
    bool (*fn)(void *arg, size_t n);
    bool (*last)(void *arg);
    void *arg;
};
/* Instead of backend_put_write calls: the put's body is bytes [off,
 * off + len) of fd, read when it is committed (by then still open and
 * unchanged: the backend keeps a dup of it), each piece paced by `pace`
 * (NULL: none). False when the backend takes bodies only by put_write (the
 * directory store, write-back) or some were written already: nothing
 * changed, write the body. */
bool backend_put_from_fd(struct backend_put *p, int fd, uint64_t off, uint64_t len,
                         const struct backend_pacer *pace);

/* ---- conditional writes (AWS, 2024) ----
 * A condition on the object a write replaces, checked atomically with the
 * commit: posix under the key's commit lock (every commit and delete of
 * that key takes it), s3 sent to the cold tier as If-None-Match / If-Match,
 * which decides. A failed condition changes nothing. */
enum backend_cond_kind {
    BACKEND_COND_NONE = 0,
    BACKEND_COND_ABSENT,       /* If-None-Match: *  the key must not exist, else
                                  BACKEND_PRECONDITION_FAILED */
    BACKEND_COND_ETAG,         /* If-Match: the key must exist (else BACKEND_NO_KEY)
                                  with ETag `etag` (else BACKEND_PRECONDITION_FAILED) */
};
struct backend_cond {
    enum backend_cond_kind kind;
    char etag[72];             /* BACKEND_COND_ETAG: bare (no quotes), compared
                                  case-insensitively; "*": any ETag; "": none
                                  matches */
};

/* Puts `c` (copied; NULL: none) on the commit of object put `p`. Parts
 * ignore it. Call between backend_put_begin and backend_put_commit. */
void backend_put_set_cond(struct backend_put *p, const struct backend_cond *c);

/* Tells put `p` the length its body announced (Content-Length, or
 * x-amz-decoded-content-length), before the first write. Only a hint, for
 * where to keep the bytes: the put still stores what is written, and the
 * caller checks the body against its announced length. */
void backend_put_set_size(struct backend_put *p, uint64_t size);

/* Copies src to dst (the same key is allowed: it replaces the metadata).
 * With `meta` NULL the source's headers are kept (COPY directive); otherwise
 * they are replaced by meta->hdrs (REPLACE). The new ETag is the MD5 of the
 * bytes. *out receives the new object's meta. Atomic like a put. */
enum backend_status backend_object_copy(struct backend *b, const char *src_bucket,
                                        const char *src_key, const char *dst_bucket,
                                        const char *dst_key, const struct obj_meta *meta,
                                        struct obj_meta *out);

/* backend_object_copy with the destination's tags chosen apart from its
 * headers, as S3's x-amz-tagging-directive: `tagging` NULL keeps the
 * source's tags (COPY), else that x-amz-tagging value ("" for none)
 * replaces them (REPLACE). meta->hdrs hold no OBJ_TAGGING_HDR. */
enum backend_status backend_object_copy_tags(struct backend *b, const char *src_bucket,
                                             const char *src_key, const char *dst_bucket,
                                             const char *dst_key, const struct obj_meta *meta,
                                             const char *tagging, struct obj_meta *out);

/* backend_object_copy_tags whose commit holds only when `cond` (may be
 * NULL) does on the destination. */
enum backend_status backend_object_copy_cond(struct backend *b, const char *src_bucket,
                                             const char *src_key, const char *dst_bucket,
                                             const char *dst_key, const struct obj_meta *meta,
                                             const char *tagging,
                                             const struct backend_cond *cond,
                                             struct obj_meta *out);

/* Deletes an object; BACKEND_NO_KEY when it was not there. Empty parent
 * directories the store created are removed. */
enum backend_status backend_object_delete(struct backend *b, const char *bucket,
                                          const char *key);

/* ---- tags of objects and buckets (posix_tagging.c, s3_tagging.c) ----
 * `key` NULL names the bucket itself. */

/* The tag set of an object (empty when it has none) or of a bucket
 * (BACKEND_NO_TAG_SET when it has none) into *out (caller clears).
 * BACKEND_NO_KEY / BACKEND_NO_BUCKET when the object / bucket is missing. */
enum backend_status backend_tagging_get(struct backend *b, const char *bucket,
                                        const char *key, struct obj_tags *out);
/* Replaces the whole tag set (checked by the caller; an empty set removes
 * the tags). posix: the object's metadata is rewritten at once (one
 * xattr, then fsync), never the data; s3: PutObjectTagging /
 * PutBucketTagging on the cold tier. */
enum backend_status backend_tagging_put(struct backend *b, const char *bucket,
                                        const char *key, const struct obj_tags *tags);
/* Removes the tags (none is not an error). */
enum backend_status backend_tagging_delete(struct backend *b, const char *bucket,
                                           const char *key);

/* ---- listing ---- */

struct backend_list_req {
    const char *prefix;       /* "" for all */
    const char *delimiter;    /* NULL or "" for none */
    const char *start_after;  /* keys > this; NULL for the start. When it
                                 rolls up into a common prefix under
                                 `delimiter`, everything in that prefix is
                                 skipped too (it was returned as the prefix). */
    unsigned max_keys;        /* 0..1000; 0 gives an empty, untruncated page */
};

struct backend_list_entry {
    char *key;
    uint64_t size;
    struct timespec mtime;
    char etag[72];
};

/* One page in UTF-8 binary key order. Objects and common prefixes together
 * number at most max_keys. */
struct backend_list_page {
    struct backend_list_entry *objs;
    size_t n_objs;
    char **prefixes;          /* common prefixes, in order */
    size_t n_prefixes;
    bool truncated;           /* more keys follow */
    char *next_marker;        /* last key or prefix in this page (NULL if none) */
};

/* Lists without loading the whole bucket: memory is bounded by the page and
 * one directory level, not by the bucket's size. */
enum backend_status backend_list_objects(struct backend *b, const char *bucket,
                                         const struct backend_list_req *req,
                                         struct backend_list_page *out);
void backend_list_page_free(struct backend_list_page *p);

/* ---- multipart uploads ---- */

#define BACKEND_MAX_PARTS 10000u
#define BACKEND_MIN_PART_SIZE (5u * 1024 * 1024)
/* Room for an upload id with its NUL. 1024 (was 64): the ids of a cold S3
 * are the server's own (AWS: ~100-200 characters, undocumented maximum) and
 * pass through unchanged; posix ids are 32 characters. */
#define BACKEND_UPLOAD_ID_MAX 1024

/* Creates an upload; meta->hdrs are stored and given to the final object.
 * upload_id receives a NUL-terminated id of at most BACKEND_UPLOAD_ID_MAX-1
 * URL-safe characters. */
enum backend_status backend_mpu_create(struct backend *b, const char *bucket, const char *key,
                                       const struct obj_meta *meta,
                                       char upload_id[BACKEND_UPLOAD_ID_MAX]);

/* Starts writing part `part_no` (1..10000) of an upload; then
 * backend_put_write / backend_put_commit / backend_put_abort as for an object
 * (commit takes meta->etag, the part's MD5; a part replaces an older part of
 * the same number). */
enum backend_status backend_mpu_part_begin(struct backend *b, const char *bucket,
                                           const char *key, const char *upload_id,
                                           unsigned part_no, struct backend_put **out);

/* What an UploadPartCopy reads: bytes [first, last] of bucket/key, or the
 * whole object when has_range is false. A struct, so the source's bucket
 * and key cannot be swapped with the upload's. */
struct backend_copy_src {
    const char *bucket;
    const char *key;
    bool has_range;
    uint64_t first, last;
};
/* UploadPartCopy: the bytes src names become part `part_no`. *out gets the
 * part's etag, size and mtime. */
enum backend_status backend_mpu_part_copy(struct backend *b, const char *bucket,
                                          const char *key, const char *upload_id,
                                          unsigned part_no, const struct backend_copy_src *src,
                                          struct obj_meta *out);

struct backend_part {
    unsigned part_no;
    char etag[72];            /* bare */
    uint64_t size;            /* filled by list_parts */
    struct timespec mtime;    /* filled by list_parts */
    /* The part's additional checksum: the header name of its algorithm
     * ("x-amz-checksum-crc32", lower case) and its base64 value, both ""
     * when none. list_parts fills them from what UploadPart stored;
     * given to complete, a non-empty pair must equal the stored one. */
    char checksum_name[32];
    char checksum[96];
};

/* Validates as S3 does (ascending part numbers, each part present with that
 * ETag, all but the last >= 5 MiB), assembles the object atomically with ETag
 * md5(concat of part md5s)-N, removes the upload. *out gets the object's meta. */
enum backend_status backend_mpu_complete(struct backend *b, const char *bucket, const char *key,
                                         const char *upload_id,
                                         const struct backend_part *parts, size_t n_parts,
                                         struct obj_meta *out);
/* As backend_mpu_complete, and a part whose checksum_name/checksum are set
 * must have been stored with that checksum (else BACKEND_INVALID_PART).
 * With `meta` not NULL, meta->hdrs (borrowed) replace the upload's stored
 * headers on the final object: the caller adds the object's checksum
 * (x-amz-checksum-<algo>, x-amz-checksum-type) computed from the parts.
 * s3: `meta` is ignored; the cold S3 computes the checksum from the part
 * checksums sent in the Complete body, and *out->hdrs receives the
 * x-amz-checksum-<algo> / x-amz-checksum-type it answered with, if any.
 * The commit holds only when `cond` (may be NULL) does. A failed condition
 * leaves the upload in place (posix; the cold S3 decides for itself). */
enum backend_status backend_mpu_complete_cond(struct backend *b, const char *bucket,
                                              const char *key, const char *upload_id,
                                              const struct backend_part *parts, size_t n_parts,
                                              const struct obj_meta *meta,
                                              const struct backend_cond *cond,
                                              struct obj_meta *out);
/* The headers an upload was created with (meta->hdrs, as given to
 * backend_mpu_create; caller clears *meta), after checking that the upload
 * exists for (bucket, key): BACKEND_NO_UPLOAD otherwise. s3: BACKEND_OK
 * without a call and without headers; the cold S3 keeps the upload's
 * settings (x-amz-checksum-algorithm, -type) and enforces them itself. */
enum backend_status backend_mpu_head(struct backend *b, const char *bucket, const char *key,
                                     const char *upload_id, struct obj_meta *meta);
enum backend_status backend_mpu_abort(struct backend *b, const char *bucket, const char *key,
                                      const char *upload_id);

struct backend_parts_page {
    struct backend_part *parts;
    size_t n_parts;
    bool truncated;
    unsigned next_marker;     /* last part number in the page */
};
/* Parts with number > marker, at most max_parts, ascending. */
enum backend_status backend_mpu_list_parts(struct backend *b, const char *bucket,
                                           const char *key, const char *upload_id,
                                           unsigned marker, unsigned max_parts,
                                           struct backend_parts_page *out);
void backend_parts_page_free(struct backend_parts_page *p);

struct backend_upload {
    char *key;
    char upload_id[BACKEND_UPLOAD_ID_MAX];
    struct timespec initiated;
};
struct backend_uploads_page {
    struct backend_upload *uploads;
    size_t n_uploads;
    char **prefixes;          /* with a delimiter, as in object listings */
    size_t n_prefixes;
    bool truncated;
    char *next_key_marker;
    char next_upload_id_marker[BACKEND_UPLOAD_ID_MAX];
};
/* What a ListMultipartUploads asks for, as backend_list_req for objects:
 * four strings side by side are easy to pass in the wrong order. */
struct backend_uploads_req {
    const char *prefix;           /* NULL or "" for all */
    const char *delimiter;        /* NULL or "" for none */
    const char *key_marker;       /* NULL or "" for the start */
    const char *upload_id_marker; /* with key_marker: resume after this upload */
    unsigned max_uploads;         /* at most 1000; more counts as 1000 */
};
/* Uploads of a bucket ordered by (key, initiation time), after
 * (key_marker, upload_id_marker) as S3 defines them. */
enum backend_status backend_mpu_list_uploads(struct backend *b, const char *bucket,
                                             const struct backend_uploads_req *req,
                                             struct backend_uploads_page *out);
void backend_uploads_page_free(struct backend_uploads_page *p);

/* ---- statistics (process-wide, for /metrics) ---- */

enum backend_op {
    BACKEND_OP_HEAD, BACKEND_OP_GET, BACKEND_OP_PUT, BACKEND_OP_COPY, BACKEND_OP_DELETE,
    BACKEND_OP_LIST, BACKEND_OP_BUCKET, BACKEND_OP_MULTIPART, BACKEND_OP_TAGGING,
    BACKEND_OP_COUNT
};
#define BACKEND_LAT_BUCKETS 14   /* upper bounds in backend_lat_bounds_s, then +Inf */

struct backend_stats {
    uint64_t calls[BACKEND_OP_COUNT];
    uint64_t errors;                          /* calls that did not answer BACKEND_OK */
    uint64_t timeouts;                        /* of them: BACKEND_TIMEOUT */
    uint64_t bytes_read;                      /* object bytes read from the cold tier */
    uint64_t direct_object_read;              /* of object reads, around the page cache
                                                 (O_DIRECT: write-back staging) */
    uint64_t direct_body_read;                /* request bodies read around the page
                                                 cache (write-back uploads) */
    uint64_t lat_buckets[BACKEND_LAT_BUCKETS + 1];  /* cumulative counts are computed by
                                                       the reader; these are per bucket */
    uint64_t lat_count;
    double lat_sum_s;
};
extern const double backend_lat_bounds_s[BACKEND_LAT_BUCKETS];
const char *backend_op_name(enum backend_op op);
void backend_stats_get(struct backend_stats *out);

#endif
