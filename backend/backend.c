/* backend/backend.c - the public verbs of backend.h: each dispatches through
 * the ops table of the implementation that created the handle (posix.c,
 * s3.c). No logic lives here. */
#include "backend_int.h"

#include <stddef.h>

void backend_close(struct backend *b)
{
    if (b)
        b->ops->close(b);
}

enum backend_status backend_bucket_list(struct backend *b, backend_bucket_cb cb, void *arg)
{
    return b->ops->bucket_list(b, cb, arg);
}

enum backend_status backend_bucket_create(struct backend *b, const char *bucket)
{
    return b->ops->bucket_create(b, bucket);
}

enum backend_status backend_bucket_head(struct backend *b, const char *bucket)
{
    return b->ops->bucket_head(b, bucket);
}

enum backend_status backend_bucket_delete(struct backend *b, const char *bucket)
{
    return b->ops->bucket_delete(b, bucket);
}

enum backend_status backend_object_head(struct backend *b, const char *bucket,
                                        const char *key, struct obj_meta *meta)
{
    return b->ops->object_head(b, bucket, key, meta);
}

enum backend_status backend_object_open(struct backend *b, const char *bucket,
                                        const char *key, struct obj_meta *meta,
                                        struct backend_obj **out)
{
    return b->ops->object_open(b, bucket, key, meta, out);
}

int backend_obj_fd(const struct backend_obj *o)
{
    return o->ops->obj_fd(o);
}

enum backend_status backend_obj_read(struct backend_obj *o, uint64_t off, void *buf,
                                     size_t len, size_t *got)
{
    return o->ops->obj_read(o, off, buf, len, got);
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
    return p->ops->put_commit(p, meta, out);
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
    return b->ops->object_copy(b, src_bucket, src_key, dst_bucket, dst_key, meta, out);
}

enum backend_status backend_object_delete(struct backend *b, const char *bucket,
                                          const char *key)
{
    return b->ops->object_delete(b, bucket, key);
}

enum backend_status backend_list_objects(struct backend *b, const char *bucket,
                                         const struct backend_list_req *req,
                                         struct backend_list_page *out)
{
    return b->ops->list_objects(b, bucket, req, out);
}

enum backend_status backend_mpu_create(struct backend *b, const char *bucket, const char *key,
                                       const struct obj_meta *meta,
                                       char upload_id[BACKEND_UPLOAD_ID_MAX])
{
    return b->ops->mpu_create(b, bucket, key, meta, upload_id);
}

enum backend_status backend_mpu_part_begin(struct backend *b, const char *bucket,
                                           const char *key, const char *upload_id,
                                           unsigned part_no, struct backend_put **out)
{
    return b->ops->mpu_part_begin(b, bucket, key, upload_id, part_no, out);
}

enum backend_status backend_mpu_part_copy(struct backend *b, const char *bucket,
                                          const char *key, const char *upload_id,
                                          unsigned part_no, const char *src_bucket,
                                          const char *src_key, bool has_range,
                                          uint64_t first, uint64_t last,
                                          struct obj_meta *out)
{
    return b->ops->mpu_part_copy(b, bucket, key, upload_id, part_no, src_bucket, src_key,
                                 has_range, first, last, out);
}

enum backend_status backend_mpu_complete(struct backend *b, const char *bucket, const char *key,
                                         const char *upload_id,
                                         const struct backend_part *parts, size_t n_parts,
                                         struct obj_meta *out)
{
    return b->ops->mpu_complete(b, bucket, key, upload_id, parts, n_parts, out);
}

enum backend_status backend_mpu_abort(struct backend *b, const char *bucket, const char *key,
                                      const char *upload_id)
{
    return b->ops->mpu_abort(b, bucket, key, upload_id);
}

enum backend_status backend_mpu_list_parts(struct backend *b, const char *bucket,
                                           const char *key, const char *upload_id,
                                           unsigned marker, unsigned max_parts,
                                           struct backend_parts_page *out)
{
    return b->ops->mpu_list_parts(b, bucket, key, upload_id, marker, max_parts, out);
}

enum backend_status backend_mpu_list_uploads(struct backend *b, const char *bucket,
                                             const char *prefix, const char *delimiter,
                                             const char *key_marker,
                                             const char *upload_id_marker,
                                             unsigned max_uploads,
                                             struct backend_uploads_page *out)
{
    return b->ops->mpu_list_uploads(b, bucket, prefix, delimiter, key_marker, upload_id_marker,
                                    max_uploads, out);
}
