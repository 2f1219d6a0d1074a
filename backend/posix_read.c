/* backend/posix_read.c - reading the objects of the posix store: opening a
 * key's file beneath its bucket (a regular file only: never a fifo, device or
 * symlink), its metadata from the xattr (a pseudo-ETag for files we did not
 * write), and positional reads. */
#include "posix_int.h"
#include "fs.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

enum backend_status posix_meta_from_fd(int fd, const struct stat *st, struct obj_meta *meta)
{
    memset(meta, 0, sizeof *meta);
    meta->size = (uint64_t)st->st_size;
    meta->mtime = st->st_mtim;
    unsigned char small[POSIX_META_INLINE], *buf = small, *big = NULL;
    ssize_t n = fgetxattr(fd, POSIX_META_XATTR, small, sizeof small);
    if (n < 0 && errno == ERANGE) {   /* a long one (a large tag set) */
        n = posix_xattr_get(fd, POSIX_META_XATTR, &big);
        buf = big;
    }
    if (n < 0) {
        int e = errno;
        if (e != ENODATA && e != ENOTSUP) {
            log_msg(LOG_LVL_ERROR, "backend", "read metadata: %s", strerror(e));
            return BACKEND_IO;
        }
    } else if (posix_meta_decode(buf, (size_t)n, meta) != 0) {
        log_msg(LOG_LVL_WARN, "backend", "malformed metadata xattr (inode %llu): ignored",
                (unsigned long long)st->st_ino);
        obj_meta_clear(meta);
        meta->size = (uint64_t)st->st_size;
        meta->mtime = st->st_mtim;
    }
    free(big);
    if (meta->etag[0] == '\0')
        posix_pseudo_etag(st, meta->etag);
    return BACKEND_OK;
}

enum backend_status posix_object_fd(struct posix_store *b, const char *bucket, const char *key,
                                    int *fd, struct stat *st)
{
    *fd = -1;
    char path[POSIX_PATH_MAX];
    int bfd;
    enum backend_status s = posix_key_bucket_open(b, bucket, key, false, path, &bfd);
    if (s != BACKEND_OK)
        return s;
    /* O_NONBLOCK: a planted fifo must not hang us; it is refused below. */
    int r = posix_open_beneath(bfd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
    int e = errno;
    close(bfd);
    if (r < 0) {
        if (e == ENXIO || e == ENOENT || e == ENOTDIR)
            return BACKEND_NO_KEY;
        if (e != ELOOP && e != EXDEV)
            log_msg(LOG_LVL_ERROR, "backend", "open %s/%s: %s", bucket, key, strerror(e));
        return posix_errno_status(e);
    }
    bool ok = fstat(r, st) == 0;
    if (ok && S_ISDIR(st->st_mode)) {
        /* keys below this one exist: its object, if any, is the POSIX_SELF
         * of the directory (posix_nest.c) */
        int self = openat(r, POSIX_SELF, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW |
                                         O_CLOEXEC);
        e = errno;
        close(r);
        if (self < 0)
            return e == ENOENT ? BACKEND_NO_KEY : posix_errno_status(e);
        r = self;
        ok = fstat(r, st) == 0;
    }
    if (!ok) {
        e = errno;
        close(r);
        log_msg(LOG_LVL_ERROR, "backend", "fstat %s/%s: %s", bucket, key, strerror(e));
        return BACKEND_IO;
    }
    if (!S_ISREG(st->st_mode)) {
        close(r);
        return BACKEND_NO_KEY;
    }
    *fd = r;
    return BACKEND_OK;
}

enum backend_status posix_object_head(struct posix_store *b, const char *bucket,
                                        const char *key, struct obj_meta *meta)
{
    int fd;
    struct stat st;
    memset(meta, 0, sizeof *meta);
    enum backend_status s = posix_object_fd(b, bucket, key, &fd, &st);
    if (s != BACKEND_OK)
        return s;
    s = posix_meta_from_fd(fd, &st, meta);
    close(fd);
    return s;
}

enum backend_status posix_object_open(struct posix_store *b, const char *bucket,
                                        const char *key, struct obj_meta *meta,
                                        struct posix_obj **out)
{
    *out = NULL;
    memset(meta, 0, sizeof *meta);
    struct posix_obj *o = malloc(sizeof *o);
    if (!o)
        return BACKEND_NOMEM;
    o->base.ops = &posix_ops;
    o->dfd = b->aw_mode == POSIX_AW_DIRECT ? POSIX_DFD_LATER : POSIX_DFD_NONE;
    o->dio_off = false;
    struct stat st;
    enum backend_status s = posix_object_fd(b, bucket, key, &o->fd, &st);
    if (s == BACKEND_OK)
        s = posix_meta_from_fd(o->fd, &st, meta);
    if (s != BACKEND_OK) {
        if (o->fd >= 0)
            close(o->fd);
        free(o);
        return s;
    }
    *out = o;
    return BACKEND_OK;
}

int posix_obj_fd(const struct posix_obj *o)
{
    return o->fd;
}

/* o's O_DIRECT descriptor, opened at its first use; -1 when there is none. */
static int direct_fd(struct posix_obj *o)
{
    if (__atomic_load_n(&o->dio_off, __ATOMIC_RELAXED))
        return -1;
    int d = __atomic_load_n(&o->dfd, __ATOMIC_ACQUIRE);
    if (d != POSIX_DFD_LATER)
        return d;
    int fd = sg_reopen_direct(o->fd);
    int want = fd >= 0 ? fd : POSIX_DFD_NONE;
    if (!__atomic_compare_exchange_n(&o->dfd, &d, want, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        if (fd >= 0)
            close(fd);   /* another thread's is there */
        return d;
    }
    return want;
}

/* Reads of whole aligned blocks into an aligned buffer skip the page cache
 * when the store writes around it (write-back staging, stage_io "direct"):
 * its files are not in the page cache, and filling it costs this VM ~2.7
 * CPU-s per GiB in fresh pages, 95% of an on_write fill of a staged
 * checkpoint (bench/results/stage-read-direct.md). The tail under one block
 * is read buffered; a refused O_DIRECT read turns the object's reads
 * buffered. */
static ssize_t read_direct(struct posix_obj *o, uint64_t off, void *buf, size_t len)
{
    if (len < POSIX_DIO_MIN || off % POSIX_DIO_ALIGN || (uintptr_t)buf % POSIX_DIO_ALIGN)
        return -2;
    int d = direct_fd(o);
    if (d < 0)
        return -2;
    for (;;) {
        ssize_t n = pread(d, buf, len / POSIX_DIO_ALIGN * POSIX_DIO_ALIGN, (off_t)off);
        if (n >= 0 || errno != EINTR) {
            if (n < 0 && errno == EINVAL) {
                __atomic_store_n(&o->dio_off, true, __ATOMIC_RELAXED);
                return -2;
            }
            return n;
        }
    }
}

enum backend_status posix_obj_read(struct posix_obj *o, uint64_t off, void *buf,
                                     size_t len, size_t *got)
{
    *got = 0;
    if (off > (uint64_t)INT64_MAX)
        return BACKEND_OK;
    ssize_t dn = read_direct(o, off, buf, len);
    if (dn >= 0) {
        *got = (size_t)dn;
        backend_stats_direct(false, (uint64_t)dn);
        return BACKEND_OK;
    }
    if (dn == -1) {
        log_msg(LOG_LVL_ERROR, "backend", "read: %s", strerror(errno));
        return BACKEND_IO;
    }
    for (;;) {
        ssize_t n = pread(o->fd, buf, len, (off_t)off);
        if (n >= 0) {
            *got = (size_t)n;
            return BACKEND_OK;
        }
        if (errno == EINTR)
            continue;
        int e = errno;
        log_msg(LOG_LVL_ERROR, "backend", "read: %s", strerror(e));
        return BACKEND_IO;
    }
}

void posix_obj_close(struct posix_obj *o)
{
    if (!o)
        return;
    close(o->fd);
    if (o->dfd >= 0)
        close(o->dfd);
    free(o);
}

enum backend_status posix_object_part(struct posix_store *b, const char *bucket,
                                      const char *key, unsigned part_no,
                                      struct backend_part_range *out)
{
    memset(out, 0, sizeof *out);
    struct obj_meta m;
    struct posix_obj *o;
    enum backend_status s = posix_object_open(b, bucket, key, &m, &o);
    if (s != BACKEND_OK)
        return s;
    char list[POSIX_PARTS_MAX];
    ssize_t n = fgetxattr(o->fd, POSIX_PARTS_XATTR, list, sizeof list);
    int e = errno;
    posix_obj_close(o);
    snprintf(out->etag, sizeof out->etag, "%s", m.etag);
    uint64_t size = m.size;
    out->total = size;
    obj_meta_clear(&m);
    if (n >= 0) {
        int rc = posix_parts_locate(list, (size_t)n, part_no, out);
        if (rc >= 0 && out->total == size)
            return rc == 0 ? BACKEND_OK : BACKEND_INVALID_PART_NUMBER;
        log_msg(LOG_LVL_WARN, "backend", "bucket=%s key=%s: malformed part list ignored",
                bucket, key);
        out->total = size;
    } else if (e != ENODATA && e != ENOTSUP && e != ERANGE) {
        log_msg(LOG_LVL_ERROR, "backend", "bucket=%s key=%s: read part list: %s", bucket, key,
                strerror(e));
        return BACKEND_IO;
    }
    /* No list: a single-part object (a PUT, a copy, a file put into the
     * tree, whose pseudo-ETag ends in "-1") is its own part 1. */
    unsigned p = backend_etag_parts(out->etag);
    if (p > 1)
        return part_no <= p ? BACKEND_PARTS_UNKNOWN : BACKEND_INVALID_PART_NUMBER;
    if (part_no != 1)
        return BACKEND_INVALID_PART_NUMBER;
    out->parts_count = 0;
    out->first = 0;
    out->size = out->total;
    return BACKEND_OK;
}
