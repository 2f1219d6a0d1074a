/* backend/posix.c - the posix store: a root directory whose sub-directories
 * are buckets and whose files are objects. Every lookup is done relative to
 * the root fd with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), so no key
 * and no planted symlink can reach outside the store. This file holds the ops
 * table through which backend.c reaches the store. Its other files:
 *   posix_int.h          the internals they share (one header for all)
 *   meta.c               pure helpers: key <-> path, metadata xattr, heap
 *   posix_fs.c           opening beneath a directory, errno -> status
 *   posix_state.c        open and close: state directory, locks, read-only
 *   posix_reclaim.c      start-up reclaim of temp files, upload expiry
 *   posix_bucket.c       buckets
 *   posix_read.c         object reads: open, metadata, ranges
 *   posix_write.c        object writes: put (temp file, fsync, rename), copy,
 *                        delete
 *   posix_list.c         ListObjects
 *   posix_mpu.c          multipart uploads: the upload directory and its info
 *                        file; create, head, abort, ListMultipartUploads
 *   posix_mpu_part.c     the parts of an upload: writing, copying, listing
 *   posix_mpu_complete.c Complete: checking the parts, assembling the object
 *   posix_sweep.c        removing finished uploads' parts in the background
 *   posix_tagging.c      object and bucket tags; the writer of the metadata xattr
 *   posix_cond.c         the per-key commit locks; conditional-write checks */
#include "posix_int.h"

/* ---- the ops table ----
 * Each adapter converts the base pointers (the first member of the posix
 * structs, so the conversion is exact) and calls the posix verb. Adapters
 * rather than casting posix_* to the ops' types: calling through a function
 * pointer of another type is undefined behaviour. */

static struct posix_store *store_of(struct backend *b)
{
    return (struct posix_store *)b;
}

static struct posix_put *put_of(struct backend_put *p)
{
    return (struct posix_put *)p;
}

static struct posix_obj *obj_of(struct backend_obj *o)
{
    return (struct posix_obj *)o;
}

static void op_close(struct backend *b)
{
    posix_close(store_of(b));
}

static enum backend_status op_bucket_list(struct backend *b, backend_bucket_cb cb, void *arg)
{
    return posix_bucket_list(store_of(b), cb, arg);
}

static enum backend_status op_bucket_create(struct backend *b, const char *bucket)
{
    return posix_bucket_create(store_of(b), bucket);
}

static enum backend_status op_bucket_head(struct backend *b, const char *bucket)
{
    return posix_bucket_head(store_of(b), bucket);
}

static enum backend_status op_bucket_delete(struct backend *b, const char *bucket)
{
    return posix_bucket_delete(store_of(b), bucket);
}

static enum backend_status op_object_head(struct backend *b, const char *bucket,
                                          const char *key, struct obj_meta *meta)
{
    return posix_object_head(store_of(b), bucket, key, meta);
}

static enum backend_status op_object_open(struct backend *b, const char *bucket,
                                          const char *key, struct obj_meta *meta,
                                          struct backend_obj **out)
{
    struct posix_obj *o = NULL;
    enum backend_status s = posix_object_open(store_of(b), bucket, key, meta, &o);
    *out = o ? &o->base : NULL;
    return s;
}

static enum backend_status op_object_part(struct backend *b, const char *bucket,
                                          const char *key, unsigned part_no,
                                          struct backend_part_range *out)
{
    return posix_object_part(store_of(b), bucket, key, part_no, out);
}

static int op_obj_fd(const struct backend_obj *o)
{
    return posix_obj_fd((const struct posix_obj *)o);
}

static enum backend_status op_obj_read(struct backend_obj *o, uint64_t off, void *buf,
                                       size_t len, size_t *got)
{
    return posix_obj_read(obj_of(o), off, buf, len, got);
}

static void op_obj_close(struct backend_obj *o)
{
    posix_obj_close(obj_of(o));
}

static enum backend_status op_put_begin(struct backend *b, const char *bucket, const char *key,
                                        struct backend_put **out)
{
    struct posix_put *p = NULL;
    enum backend_status s = posix_put_begin(store_of(b), bucket, key, &p);
    *out = p ? &p->base : NULL;
    return s;
}

static enum backend_status op_put_write(struct backend_put *p, const void *buf, size_t len)
{
    return posix_put_write(put_of(p), buf, len);
}

static enum backend_status op_put_commit(struct backend_put *p, const struct obj_meta *meta,
                                         struct obj_meta *out)
{
    return posix_put_commit(put_of(p), meta, out);
}

static void op_put_abort(struct backend_put *p)
{
    posix_put_abort(put_of(p));
}

static enum backend_status op_object_copy(struct backend *b, const char *src_bucket,
                                          const char *src_key, const char *dst_bucket,
                                          const char *dst_key, const struct obj_meta *meta,
                                          const char *tagging, const struct backend_cond *cond,
                                          struct obj_meta *out)
{
    return posix_object_copy(store_of(b), src_bucket, src_key, dst_bucket, dst_key, meta,
                             tagging, cond, out);
}

static enum backend_status op_object_delete(struct backend *b, const char *bucket,
                                            const char *key)
{
    return posix_object_delete(store_of(b), bucket, key);
}

static enum backend_status op_list_objects(struct backend *b, const char *bucket,
                                           const struct backend_list_req *req,
                                           struct backend_list_page *out)
{
    return posix_list_objects(store_of(b), bucket, req, out);
}

static enum backend_status op_mpu_create(struct backend *b, const char *bucket, const char *key,
                                         const struct obj_meta *meta,
                                         char upload_id[BACKEND_UPLOAD_ID_MAX])
{
    return posix_mpu_create(store_of(b), bucket, key, meta, upload_id);
}

static enum backend_status op_mpu_part_begin(struct backend *b, const char *bucket,
                                             const char *key, const char *upload_id,
                                             unsigned part_no, struct backend_put **out)
{
    struct posix_put *p = NULL;
    enum backend_status s = posix_mpu_part_begin(store_of(b), bucket, key, upload_id, part_no,
                                                 &p);
    *out = p ? &p->base : NULL;
    return s;
}

static enum backend_status op_mpu_part_copy(struct backend *b, const char *bucket,
                                            const char *key, const char *upload_id,
                                            unsigned part_no, const struct backend_copy_src *src,
                                            struct obj_meta *out)
{
    return posix_mpu_part_copy(store_of(b), bucket, key, upload_id, part_no, src, out);
}

static enum backend_status op_mpu_complete(struct backend *b, const char *bucket,
                                           const char *key, const char *upload_id,
                                           const struct backend_part *parts, size_t n_parts,
                                           const struct obj_meta *meta,
                                           const struct backend_cond *cond, struct obj_meta *out)
{
    return posix_mpu_complete(store_of(b), bucket, key, upload_id, parts, n_parts, meta, cond,
                              out);
}

static enum backend_status op_mpu_head(struct backend *b, const char *bucket, const char *key,
                                       const char *upload_id, struct obj_meta *meta)
{
    return posix_mpu_head(store_of(b), bucket, key, upload_id, meta);
}

static enum backend_status op_mpu_abort(struct backend *b, const char *bucket, const char *key,
                                        const char *upload_id)
{
    return posix_mpu_abort(store_of(b), bucket, key, upload_id);
}

static enum backend_status op_mpu_list_parts(struct backend *b, const char *bucket,
                                             const char *key, const char *upload_id,
                                             unsigned marker, unsigned max_parts,
                                             struct backend_parts_page *out)
{
    return posix_mpu_list_parts(store_of(b), bucket, key, upload_id, marker, max_parts, out);
}

static enum backend_status op_mpu_list_uploads(struct backend *b, const char *bucket,
                                               const struct backend_uploads_req *req,
                                               struct backend_uploads_page *out)
{
    return posix_mpu_list_uploads(store_of(b), bucket, req, out);
}

static enum backend_status op_tagging_get(struct backend *b, const char *bucket,
                                          const char *key, struct obj_tags *out)
{
    return posix_tagging_get(store_of(b), bucket, key, out);
}

static enum backend_status op_tagging_put(struct backend *b, const char *bucket,
                                          const char *key, const struct obj_tags *tags)
{
    return posix_tagging_put(store_of(b), bucket, key, tags);
}

const struct backend_ops posix_ops = {
    .name = "posix",
    .close = op_close,
    .bucket_list = op_bucket_list,
    .bucket_create = op_bucket_create,
    .bucket_head = op_bucket_head,
    .bucket_delete = op_bucket_delete,
    .object_head = op_object_head,
    .object_open = op_object_open,
    .object_part = op_object_part,
    .obj_fd = op_obj_fd,
    .obj_read = op_obj_read,
    .obj_close = op_obj_close,
    .put_begin = op_put_begin,
    .put_write = op_put_write,
    .put_commit = op_put_commit,
    .put_abort = op_put_abort,
    .object_copy = op_object_copy,
    .object_delete = op_object_delete,
    .list_objects = op_list_objects,
    .mpu_create = op_mpu_create,
    .mpu_part_begin = op_mpu_part_begin,
    .mpu_part_copy = op_mpu_part_copy,
    .mpu_complete = op_mpu_complete,
    .mpu_head = op_mpu_head,
    .mpu_abort = op_mpu_abort,
    .mpu_list_parts = op_mpu_list_parts,
    .mpu_list_uploads = op_mpu_list_uploads,
    .tagging_get = op_tagging_get,
    .tagging_put = op_tagging_put,
    .probe = posix_probe,
};
