/* backend/s3_write.c - writing objects to the S3 cold tier: a put's or an
 * upload part's body is spooled to an unlinked temp file, so nothing reaches
 * the cold tier before commit; commit PUTs it (multipart above
 * S3_MPU_THRESHOLD). Server-side copy and delete. */
#include "s3_int.h"
#include "encoding.h"
#include "log.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- writing ---- */

static enum backend_status spool_open(struct s3_store *s, int *fd)
{
    *fd = open(s->spool_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (*fd >= 0)
        return BACKEND_OK;
    int e = errno;
    if (e == EOPNOTSUPP || e == EISDIR || e == EINVAL) {
        /* No O_TMPFILE on this filesystem: a named file, unlinked at once. */
        char path[4096];
        snprintf(path, sizeof path, "%s/.sg-spool-XXXXXX", s->spool_dir);
        *fd = mkostemp(path, O_CLOEXEC);
        if (*fd >= 0) {
            unlink(path);
            return BACKEND_OK;
        }
        e = errno;
    }
    log_msg(LOG_LVL_ERROR, "backend", "s3: spool file in %s: %s", s->spool_dir, strerror(e));
    return e == ENOSPC || e == EDQUOT ? BACKEND_NO_SPACE : BACKEND_IO;
}

static enum backend_status put_new(struct s3_store *s, const char *bucket, const char *key,
                                   struct s3_put **out)
{
    struct s3_put *p = calloc(1, sizeof *p);
    if (!p)
        return BACKEND_NOMEM;
    p->base.ops = &s3_ops;
    p->s = s;
    p->fd = -1;
    p->bucket = strdup(s3_cold_bucket(s, bucket));
    p->key = strdup(key);
    if (!p->bucket || !p->key) {
        free(p->bucket);
        free(p->key);
        free(p);
        return BACKEND_NOMEM;
    }
    enum backend_status st = spool_open(s, &p->fd);
    if (st != BACKEND_OK) {
        free(p->bucket);
        free(p->key);
        free(p);
        return st;
    }
    *out = p;
    return BACKEND_OK;
}

enum backend_status s3_put_begin(struct backend *base, const char *bucket,
                                 const char *key, struct backend_put **out)
{
    struct s3_store *s = (struct s3_store *)base;
    *out = NULL;
    enum backend_status st = s3_key_check(key);
    if (st == BACKEND_OK)
        st = s3_bucket_head(base, bucket);   /* NoSuchBucket before any byte */
    struct s3_put *p = NULL;
    if (st == BACKEND_OK)
        st = put_new(s, bucket, key, &p);
    if (st != BACKEND_OK)
        return st;
    p->max_size = S3_MAX_OBJECT;
    *out = &p->base;
    return BACKEND_OK;
}

enum backend_status s3_put_write(struct backend_put *base, const void *buf, size_t len)
{
    struct s3_put *p = (struct s3_put *)base;
    if (p->failed)
        return p->fail_st;
    int e;
    enum backend_status st = backend_spool_append(p->fd, buf, len, &p->size, p->max_size, &e);
    if (st == BACKEND_IO) {
        log_msg(LOG_LVL_ERROR, "backend", "s3: write spool: %s", strerror(e));
        st = e == ENOSPC || e == EDQUOT ? BACKEND_NO_SPACE : BACKEND_IO;
    }
    if (st != BACKEND_OK) {
        p->failed = true;
        p->fail_st = st;
    }
    return st;
}

/* The body is a range of the caller's file: the spool gives way to a dup
 * of it, and commit sends from there as it would from the spool. */
bool s3_put_from_fd(struct backend_put *base, int fd, uint64_t off, uint64_t len,
                    const struct backend_pacer *pace)
{
    struct s3_put *p = (struct s3_put *)base;
    if (p->failed || p->size != 0 || len > p->max_size)
        return false;
    int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (d < 0)
        return false;
    close(p->fd);
    p->fd = d;
    p->fd_off = off;
    p->size = len;
    if (pace)
        p->pace = *pace;
    return true;
}

static void put_free(struct s3_put *p)
{
    if (p->fd >= 0)
        close(p->fd);
    free(p->bucket);
    free(p->key);
    free(p->upload_id);
    free(p);
}

enum backend_status s3_mpu_part_begin(struct backend *base, const char *bucket,
                                      const char *key, const char *upload_id,
                                      unsigned part_no, struct backend_put **out)
{
    struct s3_store *s = (struct s3_store *)base;
    *out = NULL;
    if (part_no < 1 || part_no > BACKEND_MAX_PARTS)
        return BACKEND_INVALID_PART;
    struct s3_put *p = NULL;
    enum backend_status st = put_new(s, bucket, key, &p);
    if (st != BACKEND_OK)
        return st;
    p->upload_id = strdup(upload_id);
    if (!p->upload_id) {
        put_free(p);
        return BACKEND_NOMEM;
    }
    p->part_no = part_no;
    p->max_size = S3_MAX_PUT;
    *out = &p->base;
    return BACKEND_OK;
}

/* Content-MD5 from a bare 32-hex ETag; 0, or -1 when it is not one. */
static int content_md5(const char *etag, char out[64])
{
    unsigned char md5[16];
    if (strlen(etag) != 32 || sg_hex_decode(etag, 32, md5) != 16)
        return -1;
    char b64[32];
    sg_b64_encode(md5, 16, b64);
    snprintf(out, 64, "Content-MD5: %s", b64);
    return 0;
}

static enum backend_status upload_part_fd(struct s3_store *s, const char *bucket,
                                          const char *key, const char *upload_id,
                                          unsigned part_no, int fd, uint64_t off, uint64_t len,
                                          const char *md5_etag, const char *checksum_line,
                                          const struct backend_pacer *pace, char etag_out[72])
{
    char *eid = s3_uri_encode(upload_id, false);
    char *q = NULL;
    if (!eid || asprintf(&q, "partNumber=%u&uploadId=%s", part_no, eid) < 0) {
        free(eid);
        return BACKEND_NOMEM;
    }
    free(eid);
    char md5h[64];
    /* The part's checksum goes along: the cold S3 verifies and stores it,
     * and needs it when the upload declared an algorithm. */
    struct curl_slist h2 = { (char *)checksum_line, NULL };
    struct curl_slist h1 = { md5h, checksum_line ? &h2 : NULL };
    bool has_md5 = md5_etag && content_md5(md5_etag, md5h) == 0;
    struct s3_call c = { .method = "PUT", .bucket = bucket, .key = key, .query = q,
                         .hdrs = has_md5 ? &h1 : checksum_line ? &h2 : NULL,
                         .body_fd = fd, .fd_off = off, .fd_len = len,
                         .pace = pace && pace->fn ? pace : NULL, .idempotent = true,
                         .long_transfer = true,
                         .slow_answer = true };
    enum backend_status st = s3_do(s, &c);
    if (st == BACKEND_OK) {
        const char *e = obj_meta_get_hdr(&c.rh, "etag");
        if (e)
            s3_etag_bare(e, etag_out);
        else
            st = BACKEND_IO;
    }
    s3_call_free(&c);
    free(q);
    return st;
}

/* A spooled object over S3_MPU_THRESHOLD: multipart upload of the file. */
static enum backend_status put_multipart(struct s3_put *p, const struct obj_meta *meta)
{
    struct s3_store *s = p->s;
    uint64_t part = S3_MPU_PART;
    while ((p->size + part - 1) / part > BACKEND_MAX_PARTS)
        part *= 2;
    size_t n = (size_t)((p->size + part - 1) / part);
    struct backend_part *parts = calloc(n, sizeof *parts);
    char *id = malloc(BACKEND_UPLOAD_ID_MAX);
    if (!parts || !id) {
        free(parts);
        free(id);
        return BACKEND_NOMEM;
    }
    enum backend_status st = s3_mpu_create_cold(s, p->bucket, p->key, meta, id);
    for (size_t i = 0; st == BACKEND_OK && i < n; i++) {
        uint64_t off = (uint64_t)i * part;
        uint64_t len = p->size - off < part ? p->size - off : part;
        parts[i].part_no = (unsigned)i + 1;
        st = upload_part_fd(s, p->bucket, p->key, id, parts[i].part_no, p->fd, p->fd_off + off,
                            len, NULL, NULL, &p->pace, parts[i].etag);
    }
    if (st == BACKEND_OK) {
        st = s3_mpu_complete_cold(s, p->bucket, p->key, id, parts, n, &p->base.cond, NULL);
        /* A failed condition leaves the cold upload in place, and nobody
         * else knows its id. */
        if (st != BACKEND_OK && p->base.cond.kind != BACKEND_COND_NONE)
            s3_mpu_abort_cold(s, p->bucket, p->key, id);
    } else if (id[0]) {
        s3_mpu_abort_cold(s, p->bucket, p->key, id);
    }
    free(parts);
    free(id);
    return st;
}

enum backend_status s3_put_commit(struct backend_put *base, const struct obj_meta *meta,
                                  struct obj_meta *out)
{
    struct s3_put *p = (struct s3_put *)base;
    struct s3_store *s = p->s;
    enum backend_status st = BACKEND_OK;
    char etag[72] = "";
    if (p->failed) {
        st = p->fail_st;
        goto out;
    }
    if (p->upload_id) {
        /* A part. */
        char *ckline = NULL;
        for (size_t i = 0; meta && i < meta->n_hdrs && !ckline; i++) {
            if (strncmp(meta->hdrs[i].name, "x-amz-checksum-", 15) == 0 &&
                asprintf(&ckline, "%s: %s", meta->hdrs[i].name, meta->hdrs[i].value) < 0) {
                st = BACKEND_NOMEM;
                goto out;
            }
        }
        st = upload_part_fd(s, p->bucket, p->key, p->upload_id, p->part_no, p->fd, p->fd_off,
                            p->size, meta ? meta->etag : NULL, ckline, &p->pace, etag);
        free(ckline);
        if (st == BACKEND_OK && out) {
            memset(out, 0, sizeof *out);
            out->size = p->size;
            clock_gettime(CLOCK_REALTIME, &out->mtime);
            memcpy(out->etag, etag, sizeof etag);
        }
        goto out;
    }
    if (p->size > S3_MPU_THRESHOLD) {
        st = put_multipart(p, meta);
    } else {
        struct curl_slist *hl = NULL;
        char md5h[64];
        if (s3_add_meta_headers(&hl, meta, false) != 0) {
            curl_slist_free_all(hl);
            st = BACKEND_NOMEM;
            goto out;
        }
        if (meta && content_md5(meta->etag, md5h) == 0) {
            struct curl_slist *t = curl_slist_append(hl, md5h);
            if (t)
                hl = t;
        }
        char cl[S3_COND_LINE_MAX];
        bool conditional = s3_cond_line(&p->base.cond, cl);
        if (conditional) {
            struct curl_slist *t = curl_slist_append(hl, cl);
            if (!t) {
                curl_slist_free_all(hl);
                st = BACKEND_NOMEM;
                goto out;
            }
            hl = t;
        }
        struct s3_call c = { .method = "PUT", .bucket = p->bucket, .key = p->key, .hdrs = hl,
                             .body_fd = p->fd, .fd_off = p->fd_off, .fd_len = p->size,
                             .pace = p->pace.fn ? &p->pace : NULL, .idempotent = !conditional,
                             .long_transfer = true,
                             .slow_answer = true };
        st = s3_do(s, &c);
        s3_call_free(&c);
        curl_slist_free_all(hl);
    }
    if (st == BACKEND_OK && out) {
        /* What the cold tier now holds (its ETag and time, our size). */
        struct s3_call c = { .method = "HEAD", .bucket = p->bucket, .key = p->key,
                             .body_fd = -1, .idempotent = true };
        memset(out, 0, sizeof *out);
        if (s3_do(s, &c) == BACKEND_OK) {
            const char *e = obj_meta_get_hdr(&c.rh, "etag");
            const char *lm = obj_meta_get_hdr(&c.rh, "last-modified");
            if (e)
                s3_etag_bare(e, out->etag);
            if (lm)
                out->mtime.tv_sec = curl_getdate(lm, NULL);
        } else if (meta) {
            memcpy(out->etag, meta->etag, sizeof out->etag);
            clock_gettime(CLOCK_REALTIME, &out->mtime);
        }
        out->size = p->size;
        s3_call_free(&c);
    }
out:
    put_free(p);
    return st;
}

void s3_put_abort(struct backend_put *base)
{
    put_free((struct s3_put *)base);
}

enum backend_status s3_object_copy(struct backend *base, const char *src_bucket,
                                   const char *src_key, const char *dst_bucket,
                                   const char *dst_key, const struct obj_meta *meta,
                                   const char *tagging, const struct backend_cond *cond,
                                   struct obj_meta *out)
{
    struct s3_store *s = (struct s3_store *)base;
    struct curl_slist *hl = NULL, *t;
    char cl[S3_COND_LINE_MAX];
    bool conditional = s3_cond_line(cond, cl);
    char *cs = s3_copy_source_header(s3_cold_bucket(s, src_bucket), src_key);
    char *tl = NULL;
    enum backend_status st = BACKEND_NOMEM;
    if (!cs || !(t = curl_slist_append(hl, cs)))
        goto out;
    hl = t;
    if (!(t = curl_slist_append(hl, meta ? "x-amz-metadata-directive: REPLACE"
                                         : "x-amz-metadata-directive: COPY")))
        goto out;
    hl = t;
    if (meta && s3_add_meta_headers(&hl, meta, true) != 0)
        goto out;
    /* The tags, as the client chose them (without a directive the cold
     * tier copies the source's, S3's default). */
    if (tagging) {
        if (asprintf(&tl, "%s: %s", OBJ_TAGGING_HDR, tagging) < 0) {
            tl = NULL;
            goto out;
        }
        if (!(t = curl_slist_append(hl, "x-amz-tagging-directive: REPLACE")))
            goto out;
        hl = t;
        if (*tagging && !(t = curl_slist_append(hl, tl)))   /* none: no header */
            goto out;
        hl = t;
    }
    if (conditional) {
        if (!(t = curl_slist_append(hl, cl)))
            goto out;
        hl = t;
    }
    struct s3_call c = { .method = "PUT", .bucket = s3_cold_bucket(s, dst_bucket), .key = dst_key,
                         .hdrs = hl, .body_fd = -1, .body = "", .idempotent = !conditional,
                         .long_transfer = true,
                         .slow_answer = true };
    st = s3_do(s, &c);
    struct obj_meta r;
    memset(&r, 0, sizeof r);
    /* A copy can fail after its 200: the error is then in the body. */
    if (st == BACKEND_OK && s3_xml_etag_result(c.rbuf, c.rlen, &r) != BACKEND_OK) {
        if (c.rbuf && s3_xml_error_code(c.rbuf, c.rlen, c.code, sizeof c.code) == 0)
            st = s3_status_from_code(c.code, 500);
        else
            st = BACKEND_IO;
    }
    if (st == BACKEND_NO_KEY && !c.code[0])
        st = BACKEND_NO_KEY;
    s3_call_free(&c);
    if (st == BACKEND_OK && out)
        st = s3_object_head(base, dst_bucket, dst_key, out);
out:
    curl_slist_free_all(hl);
    free(cs);
    free(tl);
    return st;
}

enum backend_status s3_object_delete(struct backend *base, const char *bucket,
                                     const char *key)
{
    struct s3_store *s = (struct s3_store *)base;
    struct s3_call c = { .method = "DELETE", .bucket = s3_cold_bucket(s, bucket), .key = key,
                         .body_fd = -1, .idempotent = true };
    enum backend_status st = s3_do(s, &c);
    s3_call_free(&c);
    return st;
}
