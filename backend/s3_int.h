/* backend/s3_int.h - internals of the S3 cold tier (s3.c, s3_xml.c) shared
 * with tests/unit/test_backend_s3.c: the pure parts (URL building, S3 error
 * mapping, response headers -> obj_meta, XML parsing, backoff, the body ring
 * and read-path choice of an open object). Nothing
 * outside backend/ and tests/unit/test_backend_*.c includes this. */
#ifndef SHARDGATE_BACKEND_S3_INT_H
#define SHARDGATE_BACKEND_S3_INT_H

#include "backend.h"

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

/* S3 error code (may be NULL or "") and HTTP status -> backend_status. */
enum backend_status s3_status_from_code(const char *code, long http_status);
/* Whether a response is worth retrying (idempotent calls only). */
bool s3_retryable(const char *code, long http_status);

/* Full-jitter backoff: a delay in [0, min(cap, base * 2^attempt)] picked by
 * `rnd` (any random number). */
uint64_t s3_backoff_ms(unsigned attempt, uint64_t base_ms, uint64_t cap_ms, uint64_t rnd);

/* Is a (lower-case) header name one the store keeps with an object? */
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

#endif
