/* backend/backend.c - the public verbs of backend.h: each dispatches through
 * the ops table of the implementation that created the handle (posix.c,
 * s3.c). No logic lives here. */
#include "backend_int.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

/* ---- the cold tier's own error, per thread (backend_cold_error_take) ---- */

static _Thread_local struct backend_cold_error cold_err;
static _Thread_local bool cold_err_kept;

void backend_cold_error_forget(void)
{
    cold_err_kept = false;
}

void backend_cold_error_keep(long http_status, const char *code, const char *message)
{
    cold_err.http_status = (int)http_status;
    snprintf(cold_err.code, sizeof cold_err.code, "%s", code ? code : "");
    snprintf(cold_err.message, sizeof cold_err.message, "%s", message ? message : "");
    cold_err_kept = true;
}

void backend_cold_error_put(const struct backend_cold_error *e)
{
    cold_err = *e;
    cold_err_kept = true;
}

bool backend_cold_error_take(struct backend_cold_error *out)
{
    if (!cold_err_kept)
        return false;
    *out = cold_err;
    cold_err_kept = false;
    return true;
}

/* ---- statistics: every verb that talks to the cold tier is counted and
 * timed here, once, whatever the implementation ---- */

const double backend_lat_bounds_s[BACKEND_LAT_BUCKETS] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};

static atomic_uint_fast64_t st_calls[BACKEND_OP_COUNT], st_errors, st_timeouts, st_bytes;
static atomic_uint_fast64_t st_direct_obj, st_direct_body;

void backend_stats_direct(bool body, uint64_t n)
{
    atomic_fetch_add(body ? &st_direct_body : &st_direct_obj, n);
}
static atomic_uint_fast64_t st_lat[BACKEND_LAT_BUCKETS + 1], st_lat_count, st_lat_sum_ns;

const char *backend_op_name(enum backend_op op)
{
    static const char *const names[BACKEND_OP_COUNT] = {
        "head", "get", "put", "copy", "delete", "list", "bucket", "multipart", "tagging",
    };
    return op < BACKEND_OP_COUNT ? names[op] : "?";
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static enum backend_status counted(enum backend_op op, uint64_t t0, enum backend_status st)
{
    uint64_t ns = now_ns() - t0;
    double s = (double)ns / 1e9;
    size_t b = 0;
    while (b < BACKEND_LAT_BUCKETS && s > backend_lat_bounds_s[b])
        b++;
    atomic_fetch_add(&st_calls[op], 1);
    atomic_fetch_add(&st_lat[b], 1);
    atomic_fetch_add(&st_lat_count, 1);
    atomic_fetch_add(&st_lat_sum_ns, ns);
    if (st != BACKEND_OK)
        atomic_fetch_add(&st_errors, 1);
    if (st == BACKEND_TIMEOUT)
        atomic_fetch_add(&st_timeouts, 1);
    return st;
}

void backend_stats_get(struct backend_stats *out)
{
    for (int i = 0; i < BACKEND_OP_COUNT; i++)
        out->calls[i] = atomic_load(&st_calls[i]);
    out->errors = atomic_load(&st_errors);
    out->timeouts = atomic_load(&st_timeouts);
    out->bytes_read = atomic_load(&st_bytes);
    out->direct_object_read = atomic_load(&st_direct_obj);
    out->direct_body_read = atomic_load(&st_direct_body);
    for (int i = 0; i <= BACKEND_LAT_BUCKETS; i++)
        out->lat_buckets[i] = atomic_load(&st_lat[i]);
    out->lat_count = atomic_load(&st_lat_count);
    out->lat_sum_s = (double)atomic_load(&st_lat_sum_ns) / 1e9;
}

#define COUNT(op, call)                     \
    do {                                    \
        uint64_t t0_ = now_ns();            \
        return counted((op), t0_, (call));  \
    } while (0)

void backend_close(struct backend *b)
{
    if (b)
        b->ops->close(b);
}

enum backend_status backend_bucket_list(struct backend *b, backend_bucket_cb cb, void *arg)
{
    COUNT(BACKEND_OP_BUCKET, b->ops->bucket_list(b, cb, arg));
}

enum backend_status backend_bucket_create(struct backend *b, const char *bucket)
{
    COUNT(BACKEND_OP_BUCKET, b->ops->bucket_create(b, bucket));
}

enum backend_status backend_bucket_head(struct backend *b, const char *bucket)
{
    COUNT(BACKEND_OP_BUCKET, b->ops->bucket_head(b, bucket));
}

enum backend_status backend_bucket_delete(struct backend *b, const char *bucket)
{
    COUNT(BACKEND_OP_BUCKET, b->ops->bucket_delete(b, bucket));
}

enum backend_status backend_object_head(struct backend *b, const char *bucket,
                                        const char *key, struct obj_meta *meta)
{
    COUNT(BACKEND_OP_HEAD, b->ops->object_head(b, bucket, key, meta));
}

enum backend_status backend_object_head_timed(struct backend *b, const char *bucket,
                                              const char *key, unsigned timeout_ms,
                                              struct obj_meta *meta)
{
    /* An implementation without a deadline of its own (posix: a local
     * stat) answers as a plain HEAD. */
    if (!b->ops->object_head_timed)
        COUNT(BACKEND_OP_HEAD, b->ops->object_head(b, bucket, key, meta));
    COUNT(BACKEND_OP_HEAD, b->ops->object_head_timed(b, bucket, key, timeout_ms, meta));
}

enum backend_status backend_object_part(struct backend *b, const char *bucket, const char *key,
                                        unsigned part_no, struct backend_part_range *out)
{
    COUNT(BACKEND_OP_HEAD, b->ops->object_part(b, bucket, key, part_no, out));
}

enum backend_status backend_object_open(struct backend *b, const char *bucket,
                                        const char *key, struct obj_meta *meta,
                                        struct backend_obj **out)
{
    COUNT(BACKEND_OP_GET, b->ops->object_open(b, bucket, key, meta, out));
}

int backend_obj_fd(const struct backend_obj *o)
{
    return o->ops->obj_fd(o);
}

enum backend_status backend_obj_read(struct backend_obj *o, uint64_t off, void *buf,
                                     size_t len, size_t *got)
{
    enum backend_status st = o->ops->obj_read(o, off, buf, len, got);
    if (st == BACKEND_OK)
        atomic_fetch_add(&st_bytes, *got);
    return st;
}

void backend_obj_close(struct backend_obj *o)
{
    if (o)
        o->ops->obj_close(o);
}

enum backend_status backend_put_begin(struct backend *b, const char *bucket, const char *key,
                                      struct backend_put **out)
{
    return b->ops->put_begin(b, bucket, key, out);
}

enum backend_status backend_put_write(struct backend_put *p, const void *buf, size_t len)
{
    return p->ops->put_write(p, buf, len);
}

enum backend_status backend_put_commit(struct backend_put *p, const struct obj_meta *meta,
                                       struct obj_meta *out)
{
    COUNT(BACKEND_OP_PUT, p->ops->put_commit(p, meta, out));
}

void backend_put_set_cond(struct backend_put *p, const struct backend_cond *c)
{
    if (c)
        p->cond = *c;
    else
        p->cond.kind = BACKEND_COND_NONE;
}

void backend_put_set_size(struct backend_put *p, uint64_t size)
{
    p->has_size = true;
    p->size = size;
}

bool backend_put_from_fd(struct backend_put *p, int fd, uint64_t off, uint64_t len,
                         const struct backend_pacer *pace)
{
    return p->ops->put_from_fd && p->ops->put_from_fd(p, fd, off, len, pace);
}

void backend_put_abort(struct backend_put *p)
{
    if (p)
        p->ops->put_abort(p);
}

enum backend_status backend_object_copy(struct backend *b, const char *src_bucket,
                                        const char *src_key, const char *dst_bucket,
                                        const char *dst_key, const struct obj_meta *meta,
                                        struct obj_meta *out)
{
    COUNT(BACKEND_OP_COPY, b->ops->object_copy(b, src_bucket, src_key, dst_bucket, dst_key, meta,
                                               NULL, NULL, out));
}

enum backend_status backend_object_copy_tags(struct backend *b, const char *src_bucket,
                                             const char *src_key, const char *dst_bucket,
                                             const char *dst_key, const struct obj_meta *meta,
                                             const char *tagging, struct obj_meta *out)
{
    COUNT(BACKEND_OP_COPY, b->ops->object_copy(b, src_bucket, src_key, dst_bucket, dst_key, meta,
                                               tagging, NULL, out));
}

enum backend_status backend_object_copy_cond(struct backend *b, const char *src_bucket,
                                             const char *src_key, const char *dst_bucket,
                                             const char *dst_key, const struct obj_meta *meta,
                                             const char *tagging,
                                             const struct backend_cond *cond,
                                             struct obj_meta *out)
{
    COUNT(BACKEND_OP_COPY, b->ops->object_copy(b, src_bucket, src_key, dst_bucket, dst_key, meta,
                                               tagging, cond, out));
}

enum backend_status backend_tagging_get(struct backend *b, const char *bucket,
                                        const char *key, struct obj_tags *out)
{
    COUNT(BACKEND_OP_TAGGING, b->ops->tagging_get(b, bucket, key, out));
}

enum backend_status backend_tagging_put(struct backend *b, const char *bucket,
                                        const char *key, const struct obj_tags *tags)
{
    static const struct obj_tags none = { NULL, 0 };
    COUNT(BACKEND_OP_TAGGING, b->ops->tagging_put(b, bucket, key, tags ? tags : &none));
}

enum backend_status backend_tagging_delete(struct backend *b, const char *bucket,
                                           const char *key)
{
    COUNT(BACKEND_OP_TAGGING, b->ops->tagging_put(b, bucket, key, NULL));
}

enum backend_status backend_object_delete(struct backend *b, const char *bucket,
                                          const char *key)
{
    COUNT(BACKEND_OP_DELETE, b->ops->object_delete(b, bucket, key));
}

enum backend_status backend_list_objects(struct backend *b, const char *bucket,
                                         const struct backend_list_req *req,
                                         struct backend_list_page *out)
{
    COUNT(BACKEND_OP_LIST, b->ops->list_objects(b, bucket, req, out));
}

enum backend_status backend_mpu_create(struct backend *b, const char *bucket, const char *key,
                                       const struct obj_meta *meta,
                                       char upload_id[BACKEND_UPLOAD_ID_MAX])
{
    COUNT(BACKEND_OP_MULTIPART, b->ops->mpu_create(b, bucket, key, meta, upload_id));
}

enum backend_status backend_mpu_part_begin(struct backend *b, const char *bucket,
                                           const char *key, const char *upload_id,
                                           unsigned part_no, struct backend_put **out)
{
    COUNT(BACKEND_OP_MULTIPART, b->ops->mpu_part_begin(b, bucket, key, upload_id, part_no, out));
}

enum backend_status backend_mpu_part_copy(struct backend *b, const char *bucket,
                                          const char *key, const char *upload_id,
                                          unsigned part_no, const struct backend_copy_src *src,
                                          struct obj_meta *out)
{
    COUNT(BACKEND_OP_MULTIPART,
          b->ops->mpu_part_copy(b, bucket, key, upload_id, part_no, src, out));
}

enum backend_status backend_mpu_complete(struct backend *b, const char *bucket, const char *key,
                                         const char *upload_id,
                                         const struct backend_part *parts, size_t n_parts,
                                         struct obj_meta *out)
{
    return backend_mpu_complete_cond(b, bucket, key, upload_id, parts, n_parts, NULL, NULL, out);
}

enum backend_status backend_mpu_complete_cond(struct backend *b, const char *bucket,
                                              const char *key, const char *upload_id,
                                              const struct backend_part *parts, size_t n_parts,
                                              const struct obj_meta *meta,
                                              const struct backend_cond *cond,
                                              struct obj_meta *out)
{
    COUNT(BACKEND_OP_MULTIPART, b->ops->mpu_complete(b, bucket, key, upload_id, parts, n_parts,
                                                     meta, cond, out));
}

enum backend_status backend_mpu_head(struct backend *b, const char *bucket, const char *key,
                                     const char *upload_id, struct obj_meta *meta)
{
    COUNT(BACKEND_OP_MULTIPART, b->ops->mpu_head(b, bucket, key, upload_id, meta));
}

enum backend_status backend_mpu_abort(struct backend *b, const char *bucket, const char *key,
                                      const char *upload_id)
{
    COUNT(BACKEND_OP_MULTIPART, b->ops->mpu_abort(b, bucket, key, upload_id));
}

enum backend_status backend_mpu_list_parts(struct backend *b, const char *bucket,
                                           const char *key, const char *upload_id,
                                           unsigned marker, unsigned max_parts,
                                           struct backend_parts_page *out)
{
    COUNT(BACKEND_OP_MULTIPART, b->ops->mpu_list_parts(b, bucket, key, upload_id, marker, max_parts, out));
}

enum backend_status backend_mpu_list_uploads(struct backend *b, const char *bucket,
                                             const struct backend_uploads_req *req,
                                             struct backend_uploads_page *out)
{
    COUNT(BACKEND_OP_MULTIPART, b->ops->mpu_list_uploads(b, bucket, req, out));
}
