/* backend/posix_tagging.c - tags in the posix store, and the one writer of
 * the metadata xattr. An object's tags are the OBJ_TAGGING_HDR header of its
 * metadata (user.shardgate.meta, with its ETag and headers): a put or copy
 * stores them with the rest, and Put/DeleteObjectTagging rewrites that one
 * xattr - a single setxattr, atomic on every Linux file system, then an
 * fsync - so a crash leaves the old metadata or the new, never a mix, and
 * the data is never touched. A bucket's tags are an xattr of its directory
 * (user.shardgate.tags, the x-amz-tagging form), so they go with it.
 *
 * The space is the file system's: ext4 keeps all the xattrs of a file in one
 * 4 KiB block, XFS and btrfs allow more. What does not fit answers
 * BACKEND_META_TOO_LARGE (ext4 says ENOSPC for it, which is told apart
 * from a full disk by the free space). */
#include "posix_int.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#define POSIX_TAGS_XATTR "user.shardgate.tags"

/* The status of a failed fsetxattr (or fremovexattr) on fd. */
static enum backend_status set_errno_status(int fd, int e)
{
    if (e == E2BIG || e == ERANGE)
        return BACKEND_META_TOO_LARGE;
    if (e == ENOSPC) {
        struct statvfs sv;
        if (fstatvfs(fd, &sv) == 0 && (uint64_t)sv.f_bavail * sv.f_frsize >= (1u << 20))
            return BACKEND_META_TOO_LARGE;   /* room on the disk, none in the inode */
        return BACKEND_NO_SPACE;
    }
    enum backend_status s = posix_write_errno_status(e);
    if (s == BACKEND_IO)
        log_msg(LOG_LVL_ERROR, "backend", "set metadata: %s", strerror(e));
    return s;
}

enum backend_status posix_meta_set(int fd, const char *etag, const struct obj_hdr *hdrs,
                                   size_t n_hdrs, bool *stored)
{
    *stored = false;
    unsigned char *buf = malloc(POSIX_META_MAX);
    if (!buf)
        return BACKEND_NOMEM;
    size_t len = 0;
    enum backend_status s = posix_meta_encode(etag, hdrs, n_hdrs, buf, POSIX_META_MAX, &len);
    if (s == BACKEND_OK && fsetxattr(fd, POSIX_META_XATTR, buf, len, 0) == 0) {
        *stored = true;
    } else if (s == BACKEND_OK && errno == ENOTSUP) {
        log_msg(LOG_LVL_WARN, "backend", "no user xattrs on this filesystem: "
                "object stored without metadata");
    } else if (s == BACKEND_OK) {
        s = set_errno_status(fd, errno);
    }
    free(buf);
    return s;
}

ssize_t posix_xattr_get(int fd, const char *name, unsigned char **out)
{
    *out = NULL;
    for (int tries = 0; tries < 4; tries++) {   /* it may grow between the two calls */
        ssize_t n = fgetxattr(fd, name, NULL, 0);
        if (n < 0)
            return -1;
        unsigned char *b = malloc((size_t)n + 1);
        if (!b) {
            errno = ENOMEM;
            return -1;
        }
        ssize_t got = fgetxattr(fd, name, b, (size_t)n + 1);
        if (got >= 0) {
            *out = b;
            return got;
        }
        int e = errno;
        free(b);
        if (e != ERANGE) {
            errno = e;
            return -1;
        }
    }
    errno = ERANGE;
    return -1;
}

/* The metadata of fd as stored: its ETag ("" for a file we did not write,
 * which keeps its pseudo-ETag) and headers. An absent or malformed xattr
 * gives none. */
static enum backend_status meta_stored(int fd, struct obj_meta *m)
{
    memset(m, 0, sizeof *m);
    unsigned char *buf;
    ssize_t n = posix_xattr_get(fd, POSIX_META_XATTR, &buf);
    if (n < 0) {
        int e = errno;
        if (e == ENODATA || e == ENOTSUP)
            return BACKEND_OK;
        log_msg(LOG_LVL_ERROR, "backend", "read metadata: %s", strerror(e));
        return e == ENOMEM ? BACKEND_NOMEM : BACKEND_IO;
    }
    if (posix_meta_decode(buf, (size_t)n, m) != 0)
        obj_meta_clear(m);
    free(buf);
    return BACKEND_OK;
}

/* ---- objects ---- */

static enum backend_status object_tags_get(struct posix_store *b, const char *bucket,
                                           const char *key, struct obj_tags *out)
{
    struct obj_meta m;
    enum backend_status s = posix_object_head(b, bucket, key, &m);
    const char *q = s == BACKEND_OK ? obj_meta_get_hdr(&m, OBJ_TAGGING_HDR) : NULL;
    if (q) {
        /* Stored by us from a checked set: it parses. */
        enum obj_tags_status ts = obj_tags_from_query(q, out);
        s = ts == OBJ_TAGS_NOMEM ? BACKEND_NOMEM : ts != OBJ_TAGS_OK ? BACKEND_IO : s;
    }
    obj_meta_clear(&m);
    return s;
}

/* A copy of m's headers with the tag set replaced by `tagging` (NULL or ""
 * for none) into *out. 0 or -1 (no memory). */
static int with_tagging(const struct obj_meta *m, const char *tagging, struct obj_meta *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < m->n_hdrs; i++)
        if (strcmp(m->hdrs[i].name, OBJ_TAGGING_HDR) != 0 &&
            obj_meta_add_hdr(out, m->hdrs[i].name, m->hdrs[i].value) != 0)
            goto nomem;
    if (tagging && *tagging && obj_meta_add_hdr(out, OBJ_TAGGING_HDR, tagging) != 0)
        goto nomem;
    return 0;
nomem:
    obj_meta_clear(out);
    return -1;
}

int posix_meta_tagged(const struct obj_meta *m, const struct obj_meta *src,
                      const char *tagging, struct obj_meta *out)
{
    return with_tagging(m, tagging ? tagging : obj_meta_get_hdr(src, OBJ_TAGGING_HDR), out);
}

static enum backend_status object_tags_put(struct posix_store *b, const char *bucket,
                                           const char *key, const struct obj_tags *tags)
{
    int fd;
    struct stat st;
    enum backend_status s = posix_object_fd(b, bucket, key, &fd, &st);
    if (s != BACKEND_OK)
        return s;
    char *q = tags && tags->n ? obj_tags_to_query(tags) : NULL;
    struct obj_meta old, nm;
    memset(&nm, 0, sizeof nm);
    s = tags && tags->n && !q ? BACKEND_NOMEM : meta_stored(fd, &old);
    if (s != BACKEND_OK)
        goto out;
    if (!q && !obj_meta_get_hdr(&old, OBJ_TAGGING_HDR))
        goto out_old;   /* no tags before or after: nothing to write */
    bool stored;
    if (with_tagging(&old, q, &nm) != 0) {
        s = BACKEND_NOMEM;
    } else {
        /* The file we opened may have been replaced by a put meanwhile:
         * the tags then went to the version that was current when we
         * looked, as if this call had come first. */
        s = posix_meta_set(fd, old.etag, nm.hdrs, nm.n_hdrs, &stored);
        if (s == BACKEND_OK && !stored) {
            log_msg(LOG_LVL_ERROR, "backend", "%s/%s: no user xattrs on this filesystem: "
                    "its tags cannot be kept", bucket, key);
            s = BACKEND_IO;
        }
        if (s == BACKEND_OK && fsync(fd) != 0) {
            log_msg(LOG_LVL_ERROR, "backend", "fsync %s/%s: %s", bucket, key, strerror(errno));
            s = BACKEND_IO;
        }
    }
    obj_meta_clear(&nm);
out_old:
    obj_meta_clear(&old);
out:
    free(q);
    close(fd);
    return s;
}

/* ---- buckets ---- */

static enum backend_status bucket_tags_get(struct posix_store *b, const char *bucket,
                                           struct obj_tags *out)
{
    int fd;
    enum backend_status s = posix_bucket_open(b, bucket, &fd);
    if (s != BACKEND_OK)
        return s;
    unsigned char *buf;
    ssize_t n = posix_xattr_get(fd, POSIX_TAGS_XATTR, &buf);
    int e = errno;
    close(fd);
    if (n < 0)
        return e == ENODATA || e == ENOTSUP ? BACKEND_NO_TAG_SET
               : e == ENOMEM                 ? BACKEND_NOMEM
                                             : BACKEND_IO;
    buf[n] = '\0';
    enum obj_tags_status ts = obj_tags_from_query((const char *)buf, out);
    free(buf);
    if (ts == OBJ_TAGS_OK && out->n == 0)
        return BACKEND_NO_TAG_SET;
    return ts == OBJ_TAGS_OK ? BACKEND_OK : ts == OBJ_TAGS_NOMEM ? BACKEND_NOMEM : BACKEND_IO;
}

static enum backend_status bucket_tags_put(struct posix_store *b, const char *bucket,
                                           const struct obj_tags *tags)
{
    int fd;
    enum backend_status s = posix_bucket_open(b, bucket, &fd);
    if (s != BACKEND_OK)
        return s;
    if (!tags || tags->n == 0) {
        if (fremovexattr(fd, POSIX_TAGS_XATTR) != 0 && errno != ENODATA && errno != ENOTSUP)
            s = set_errno_status(fd, errno);
    } else {
        char *q = obj_tags_to_query(tags);
        if (!q) {
            s = BACKEND_NOMEM;
        } else if (fsetxattr(fd, POSIX_TAGS_XATTR, q, strlen(q), 0) != 0) {
            int e = errno;
            if (e == ENOTSUP)
                log_msg(LOG_LVL_ERROR, "backend", "bucket %s: no user xattrs on this "
                        "filesystem: its tags cannot be kept", bucket);
            s = e == ENOTSUP ? BACKEND_IO : set_errno_status(fd, e);
        }
        free(q);
    }
    if (s == BACKEND_OK && fsync(fd) != 0)
        log_msg(LOG_LVL_WARN, "backend", "fsync bucket %s: %s", bucket, strerror(errno));
    close(fd);
    return s;
}

/* ---- the verbs ---- */

enum backend_status posix_tagging_get(struct posix_store *b, const char *bucket,
                                      const char *key, struct obj_tags *out)
{
    memset(out, 0, sizeof *out);
    return key ? object_tags_get(b, bucket, key, out) : bucket_tags_get(b, bucket, out);
}

enum backend_status posix_tagging_put(struct posix_store *b, const char *bucket,
                                      const char *key, const struct obj_tags *tags)
{
    if (b->read_only)
        return BACKEND_READ_ONLY;
    return key ? object_tags_put(b, bucket, key, tags) : bucket_tags_put(b, bucket, tags);
}
