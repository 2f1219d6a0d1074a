/* backend/s3_parts.c - where part N of a cold object lies, for GET/HEAD
 * ?partNumber=N in cache mode: the gateway then reads those bytes as a range
 * (from the cache when it holds the object). AWS answers HEAD ?partNumber=N
 * with the part's Content-Range; a server that sends none (moto) is asked
 * for the sizes of the parts before it. */
#include "s3_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* HEAD ?partNumber=n: *first / *size from its Content-Range when the server
 * sent one (*has_range), else *size from its Content-Length. */
static enum backend_status part_head(struct s3_store *s, const char *bucket, const char *key,
                                     unsigned n, uint64_t total, bool *has_range,
                                     uint64_t *first, uint64_t *size)
{
    char q[32];
    snprintf(q, sizeof q, "partNumber=%u", n);
    struct s3_call c = { .method = "HEAD", .bucket = s3_cold_bucket(s, bucket), .key = key,
                         .query = q, .body_fd = -1, .idempotent = true };
    enum backend_status st = s3_do(s, &c);
    *has_range = false;
    if (st == BACKEND_BAD_RANGE)
        st = BACKEND_INVALID_PART_NUMBER;
    const char *cr = st == BACKEND_OK ? obj_meta_get_hdr(&c.rh, "content-range") : NULL;
    const char *cl = st == BACKEND_OK ? obj_meta_get_hdr(&c.rh, "content-length") : NULL;
    uint64_t a, b, t;
    if (cr && sscanf(cr, "bytes %" SCNu64 "-%" SCNu64 "/%" SCNu64, &a, &b, &t) == 3 &&
        a <= b && b < t && t == total) {
        *has_range = true;
        *first = a;
        *size = b - a + 1;
    } else if (cl) {
        *size = strtoull(cl, NULL, 10);
    } else if (st == BACKEND_OK) {
        st = BACKEND_IO;   /* a HEAD answer without a length */
    }
    s3_call_free(&c);
    return st;
}

enum backend_status s3_object_part(struct backend *base, const char *bucket, const char *key,
                                   unsigned part_no, struct backend_part_range *out)
{
    struct s3_store *s = (struct s3_store *)base;
    memset(out, 0, sizeof *out);
    /* The object's own ETag and size: a part HEAD answers the part's ETag
     * on some servers. */
    struct obj_meta m;
    enum backend_status st = s3_object_head(base, bucket, key, &m);
    if (st != BACKEND_OK)
        return st;
    snprintf(out->etag, sizeof out->etag, "%s", m.etag);
    out->total = m.size;
    obj_meta_clear(&m);
    unsigned p = backend_etag_parts(out->etag);
    if (p == 0) {   /* a single-part object is its own part 1 */
        if (part_no != 1)
            return BACKEND_INVALID_PART_NUMBER;
        out->size = out->total;
        return BACKEND_OK;
    }
    if (part_no > p)
        return BACKEND_INVALID_PART_NUMBER;
    out->parts_count = p;
    bool has_range;
    uint64_t first = 0, size = 0;
    st = part_head(s, bucket, key, part_no, out->total, &has_range, &first, &size);
    if (st != BACKEND_OK)
        return st;
    if (!has_range) {
        first = 0;
        for (unsigned i = 1; i < part_no && st == BACKEND_OK; i++) {
            bool hr;
            uint64_t f, sz = 0;
            st = part_head(s, bucket, key, i, out->total, &hr, &f, &sz);
            first += sz;
        }
        if (st != BACKEND_OK)
            return st;
    }
    if (first > out->total || size > out->total - first)
        return BACKEND_IO;   /* the object changed between the HEADs */
    out->first = first;
    out->size = size;
    return BACKEND_OK;
}
