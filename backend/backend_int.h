/* backend/backend_int.h - how a cold-tier implementation plugs into
 * backend.h: one ops table per implementation, and base structs that each
 * implementation embeds as the FIRST member of its handle, object and put
 * structs, so backend.c can dispatch without knowing the implementation.
 * Only backend/ files and tests/unit/test_backend_*.c include this. */
#ifndef SHARDGATE_BACKEND_INT_H
#define SHARDGATE_BACKEND_INT_H

#include "backend.h"

/* One function per verb of backend.h, with the same contract. */
struct backend_ops {
    const char *name;                                   /* "posix", "s3" */
    void (*close)(struct backend *b);
    enum backend_status (*bucket_list)(struct backend *b, backend_bucket_cb cb, void *arg);
    enum backend_status (*bucket_create)(struct backend *b, const char *bucket);
    enum backend_status (*bucket_head)(struct backend *b, const char *bucket);
    enum backend_status (*bucket_delete)(struct backend *b, const char *bucket);
    enum backend_status (*object_head)(struct backend *b, const char *bucket, const char *key,
                                       struct obj_meta *meta);
    enum backend_status (*object_open)(struct backend *b, const char *bucket, const char *key,
                                       struct obj_meta *meta, struct backend_obj **out);
    int (*obj_fd)(const struct backend_obj *o);
    enum backend_status (*obj_read)(struct backend_obj *o, uint64_t off, void *buf, size_t len,
                                    size_t *got);
    void (*obj_close)(struct backend_obj *o);
    enum backend_status (*object_part)(struct backend *b, const char *bucket, const char *key,
                                       unsigned part_no, struct backend_part_range *out);
    enum backend_status (*put_begin)(struct backend *b, const char *bucket, const char *key,
                                     struct backend_put **out);
    enum backend_status (*put_write)(struct backend_put *p, const void *buf, size_t len);
    enum backend_status (*put_commit)(struct backend_put *p, const struct obj_meta *meta,
                                      struct obj_meta *out);
    void (*put_abort)(struct backend_put *p);
    /* optional (NULL: false): backend_put_from_fd */
    bool (*put_from_fd)(struct backend_put *p, int fd, uint64_t off, uint64_t len,
                        const struct backend_pacer *pace);
    enum backend_status (*object_copy)(struct backend *b, const char *src_bucket,
                                       const char *src_key, const char *dst_bucket,
                                       const char *dst_key, const struct obj_meta *meta,
                                       const char *tagging, const struct backend_cond *cond,
                                       struct obj_meta *out);
    enum backend_status (*object_delete)(struct backend *b, const char *bucket, const char *key);
    enum backend_status (*list_objects)(struct backend *b, const char *bucket,
                                        const struct backend_list_req *req,
                                        struct backend_list_page *out);
    enum backend_status (*mpu_create)(struct backend *b, const char *bucket, const char *key,
                                      const struct obj_meta *meta,
                                      char upload_id[BACKEND_UPLOAD_ID_MAX]);
    enum backend_status (*mpu_part_begin)(struct backend *b, const char *bucket,
                                          const char *key, const char *upload_id,
                                          unsigned part_no, struct backend_put **out);
    enum backend_status (*mpu_part_copy)(struct backend *b, const char *bucket, const char *key,
                                         const char *upload_id, unsigned part_no,
                                         const struct backend_copy_src *src,
                                         struct obj_meta *out);
    enum backend_status (*mpu_complete)(struct backend *b, const char *bucket, const char *key,
                                        const char *upload_id, const struct backend_part *parts,
                                        size_t n_parts, const struct obj_meta *meta,
                                        const struct backend_cond *cond, struct obj_meta *out);
    enum backend_status (*mpu_head)(struct backend *b, const char *bucket, const char *key,
                                    const char *upload_id, struct obj_meta *meta);
    enum backend_status (*mpu_abort)(struct backend *b, const char *bucket, const char *key,
                                     const char *upload_id);
    enum backend_status (*mpu_list_parts)(struct backend *b, const char *bucket,
                                          const char *key, const char *upload_id,
                                          unsigned marker, unsigned max_parts,
                                          struct backend_parts_page *out);
    enum backend_status (*mpu_list_uploads)(struct backend *b, const char *bucket,
                                            const struct backend_uploads_req *req,
                                            struct backend_uploads_page *out);
    /* backend_tagging_get / _put; tags NULL: backend_tagging_delete */
    enum backend_status (*tagging_get)(struct backend *b, const char *bucket, const char *key,
                                       struct obj_tags *out);
    enum backend_status (*tagging_put)(struct backend *b, const char *bucket, const char *key,
                                       const struct obj_tags *tags);
    /* Optional (NULL: see backend.c/probe.c for what stands in). */
    enum backend_status (*object_head_timed)(struct backend *b, const char *bucket,
                                             const char *key, unsigned timeout_ms,
                                             struct obj_meta *meta);
    enum backend_status (*probe)(struct backend *b, unsigned timeout_ms, char *why,
                                 size_t len);
    void (*info)(const struct backend *b, struct backend_info *out);
};

/* The base structs. An implementation's struct starts with one of these, e.g.
 *     struct posix_store { struct backend base; int rootfd; int mpufd; };
 * and converts a base pointer back with a cast to its own type (valid: a
 * pointer to a struct's first member converts to a pointer to the struct). */
/* The P of a multipart ETag "<32 hex>-P" (1..10000), 0 for any other
 * ETag (bare, no quotes). parts.c. */
unsigned backend_etag_parts(const char *etag);
/* Counts bytes read with O_DIRECT (backend_stats): an object read, or a
 * request body sent from a file. backend.c. */
void backend_stats_direct(bool body, uint64_t n);
/* A digest (64 hex and NUL) of a Complete's parts list: the part numbers
 * and ETags (quotes dropped, case folded), in order. parts.c. */
void backend_parts_digest(const struct backend_part *parts, size_t n, char out[65]);
/* The ETag S3 gives a multipart object of n parts with these ETags (each the
 * part's MD5, 32 hex, quotes allowed): the MD5 of the MD5s, then "-n", bare.
 * False when a part's ETag is not an MD5. parts.c. */
bool backend_parts_etag(const struct backend_part *parts, size_t n, char out[72]);

struct backend {
    const struct backend_ops *ops;
};
struct backend_obj {
    const struct backend_ops *ops;
};
struct backend_put {
    const struct backend_ops *ops;
    struct backend_cond cond;  /* backend_put_set_cond; read by put_commit */
    bool write_through;        /* backend_put_set_write_through; read by wb.c */
    bool has_size;             /* backend_put_set_size: the body's announced */
    uint64_t size;             /* length (a hint for where a part goes) */
};

/* The calling thread's cold-tier error for backend_cold_error_take: an
 * implementation forgets it when a call starts and keeps it when the call
 * ends in BACKEND_COLD_ERROR (code and message may be NULL). */
void backend_cold_error_forget(void);
void backend_cold_error_keep(long http_status, const char *code, const char *message);

/* Appends len bytes of buf to a put's spool file fd, which holds *size bytes
 * of at most max_size: TOO_LARGE (nothing written) when len would pass
 * max_size, else writes all of it, retrying EINTR and short writes, and adds
 * what it wrote to *size. A write() that fails gives IO with its errno in
 * *err (EIO for a write of nothing), for the caller to map and log. Any
 * thread; the put is the caller's (put_spool.c). */
enum backend_status backend_spool_append(int fd, const void *buf, size_t len, uint64_t *size,
                                         uint64_t max_size, int *err);

#endif
