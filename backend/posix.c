/* backend/posix.c - the posix store: a root directory whose sub-directories
 * are buckets and whose files are objects. Every lookup is done relative to
 * the root fd with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), so no key
 * and no planted symlink can reach outside the store. This file holds
 * buckets, reads, atomic writes, copy and delete; opening (state directory,
 * lock, read-only mode) is in posix_state.c, the start-up reclaim and the
 * expiry of old uploads in posix_reclaim.c, listings in posix_list.c and
 * multipart uploads in posix_mpu.c. */
#include "posix_int.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

int posix_force_walk;
/* Set once openat2 returned ENOSYS; from then on we walk components. */
static atomic_int g_no_openat2;

enum backend_status posix_errno_status(int err)
{
    switch (err) {
    case ENOENT:
    case ENOTDIR:
        return BACKEND_NO_KEY;
    case ELOOP:
    case EXDEV:
        return BACKEND_DENIED;
    case ENOSPC:
    case EDQUOT:
        return BACKEND_NO_SPACE;
    case ENOMEM:
        return BACKEND_NOMEM;
    case ENAMETOOLONG:
        return BACKEND_KEY_TOO_LONG;
    case EROFS:
        return BACKEND_READ_ONLY;
    default:
        return BACKEND_IO;
    }
}

enum backend_status posix_write_errno_status(int err)
{
    switch (err) {
    case ENOSPC:
    case EDQUOT:
        return BACKEND_NO_SPACE;
    case EROFS:
    case EACCES:
    case EPERM:
        return BACKEND_READ_ONLY;
    default:
        return BACKEND_IO;
    }
}

/* The fallback of openat2: one openat(O_NOFOLLOW) per component, checking
 * that each intermediate one is a real directory. */
static int walk_open(int dirfd, const char *path, int flags, mode_t mode)
{
    int cur = dirfd;
    const char *p = path;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len == 0 || len > POSIX_SEG_MAX || (len == 1 && p[0] == '.') ||
            (len == 2 && p[0] == '.' && p[1] == '.')) {
            if (cur != dirfd)
                close(cur);
            errno = EXDEV;
            return -1;
        }
        if (!slash) {
            int fd = openat(cur, p, flags | O_NOFOLLOW | O_CLOEXEC, mode);
            int e = errno;
            struct stat lst;
            /* O_DIRECTORY|O_NOFOLLOW on a symlink says ENOTDIR: say ELOOP
             * like openat2 does, so callers see a symlink. */
            if (fd < 0 && e == ENOTDIR && fstatat(cur, p, &lst, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISLNK(lst.st_mode))
                e = ELOOP;
            if (cur != dirfd)
                close(cur);
            errno = e;
            return fd;
        }
        char comp[POSIX_SEG_MAX + 1];
        memcpy(comp, p, len);
        comp[len] = '\0';
        int nfd = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        struct stat st;
        if (nfd >= 0 && fstat(nfd, &st) != 0) {
            e = errno;
            close(nfd);
            nfd = -1;
        } else if (nfd >= 0 && !S_ISDIR(st.st_mode)) {
            e = S_ISLNK(st.st_mode) ? ELOOP : ENOTDIR;
            close(nfd);
            nfd = -1;
        }
        if (cur != dirfd)
            close(cur);
        if (nfd < 0) {
            errno = e;
            return -1;
        }
        cur = nfd;
        p = slash + 1;
    }
}

int posix_open_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
    if (!posix_force_walk && !atomic_load(&g_no_openat2)) {
        struct open_how how = {
            .flags = (uint64_t)(flags | O_CLOEXEC),
            .mode = (flags & O_CREAT) ? mode : 0,
            .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
        if (fd >= 0 || errno != ENOSYS)
            return (int)fd;
        atomic_store(&g_no_openat2, 1);
        log_msg(LOG_LVL_WARN, "backend", "openat2 unavailable: walking paths component-wise");
    }
    return walk_open(dirfd, path, flags, mode);
}

int posix_random_chars(char *out, size_t n)
{
    static const char abc[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    unsigned char rnd[64];
    while (n > 0) {
        size_t k = n < sizeof rnd ? n : sizeof rnd;
        ssize_t got = getrandom(rnd, k, 0);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        for (ssize_t i = 0; i < got; i++)
            *out++ = abc[rnd[i] & 63];   /* 256 % 64 == 0: uniform */
        n -= (size_t)got;
    }
    return 0;
}

/* ---- buckets ---- */

enum backend_status posix_bucket_open(struct posix_store *b, const char *bucket, int *fd)
{
    *fd = -1;
    if (!posix_bucket_name_valid(bucket))
        return BACKEND_BAD_BUCKET_NAME;
    int r = posix_open_beneath(b->rootfd, bucket, O_DIRECTORY | O_RDONLY, 0);
    if (r < 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR)
            return BACKEND_NO_BUCKET;
        if (e == ELOOP || e == EXDEV)
            return BACKEND_DENIED;
        log_msg(LOG_LVL_ERROR, "backend", "open bucket %s: %s", bucket, strerror(e));
        return posix_errno_status(e);
    }
    *fd = r;
    return BACKEND_OK;
}

/* d_type, or an fstatat when the filesystem does not fill it. */
static unsigned char entry_type(int dirfd, const struct dirent *de)
{
    if (de->d_type != DT_UNKNOWN)
        return de->d_type;
    struct stat st;
    if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return DT_UNKNOWN;
    if (S_ISREG(st.st_mode))
        return DT_REG;
    if (S_ISDIR(st.st_mode))
        return DT_DIR;
    if (S_ISLNK(st.st_mode))
        return DT_LNK;
    return DT_UNKNOWN;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

static time_t bucket_created(int rootfd, const char *name)
{
    struct statx sx;
    if (statx(rootfd, name, AT_SYMLINK_NOFOLLOW, STATX_BTIME | STATX_MTIME, &sx) != 0)
        return 0;
    if (sx.stx_mask & STATX_BTIME)
        return (time_t)sx.stx_btime.tv_sec;
    return (time_t)sx.stx_mtime.tv_sec;
}

/* Buckets are few, but memory stays bounded anyway: keep the 256 smallest
 * names above the last one reported, report them, rescan. */
enum backend_status posix_bucket_list(struct posix_store *b, backend_bucket_cb cb, void *arg)
{
    enum { BATCH = 256 };
    struct posix_heap h;
    if (posix_heap_init(&h, BATCH, str_cmp, free) != 0)
        return BACKEND_NOMEM;
    int dfd = dup(b->rootfd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (d)
        rewinddir(d);   /* a dup shares the offset of a read fd */
    if (!d) {
        int e = errno;
        if (dfd >= 0)
            close(dfd);
        posix_heap_free(&h);
        log_msg(LOG_LVL_ERROR, "backend", "list buckets: %s", strerror(e));
        return BACKEND_IO;
    }
    enum backend_status st = BACKEND_OK;
    char last[64] = "";
    bool stop = false;
    while (!stop) {
        rewinddir(d);
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (!posix_bucket_name_valid(de->d_name) || strcmp(de->d_name, last) <= 0)
                continue;
            if (entry_type(b->rootfd, de) != DT_DIR)
                continue;
            char *n = strdup(de->d_name);
            if (!n) {
                st = BACKEND_NOMEM;
                goto out;
            }
            posix_heap_push(&h, n);
        }
        posix_heap_sort(&h);
        size_t n = h.n;
        for (size_t i = 0; i < n && !stop; i++) {
            const char *name = h.v[i];
            snprintf(last, sizeof last, "%s", name);
            if (cb(arg, name, bucket_created(b->rootfd, name)) != 0)
                stop = true;
        }
        posix_heap_clear(&h);
        if (n < BATCH)
            break;
    }
out:
    closedir(d);
    posix_heap_free(&h);
    return st;
}

enum backend_status posix_bucket_create(struct posix_store *b, const char *bucket)
{
    if (!posix_bucket_name_valid(bucket))
        return BACKEND_BAD_BUCKET_NAME;
    if (b->read_only)
        return BACKEND_READ_ONLY;
    if (mkdirat(b->rootfd, bucket, 0755) != 0) {
        int e = errno;
        if (e == EEXIST)
            return BACKEND_BUCKET_EXISTS;
        log_msg(LOG_LVL_ERROR, "backend", "create bucket %s: %s", bucket, strerror(e));
        return posix_write_errno_status(e);
    }
    fsync(b->rootfd);
    return BACKEND_OK;
}

enum backend_status posix_bucket_head(struct posix_store *b, const char *bucket)
{
    int fd;
    enum backend_status st = posix_bucket_open(b, bucket, &fd);
    if (st == BACKEND_OK)
        close(fd);
    return st;
}

/* Removes what a bucket may hold besides objects: empty directories, our
 * temp files and non-regular entries (symlinks, fifos: never objects).
 * A regular file that is an object makes it BACKEND_BUCKET_NOT_EMPTY. */
static enum backend_status rm_tree(int dirfd)
{
    int dfd = dup(dirfd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (d)
        rewinddir(d);   /* a dup shares the offset of a read fd */
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return BACKEND_IO;
    }
    enum backend_status st = BACKEND_OK;
    struct dirent *de;
    while (st == BACKEND_OK && (de = readdir(d)) != NULL) {
        const char *n = de->d_name;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
            continue;
        unsigned char t = entry_type(dirfd, de);
        if (t == DT_DIR) {
            int sub = openat(dirfd, n, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
            if (sub < 0) {
                st = BACKEND_IO;
                break;
            }
            st = rm_tree(sub);
            close(sub);
            if (st == BACKEND_OK && unlinkat(dirfd, n, AT_REMOVEDIR) != 0)
                st = errno == ENOTEMPTY ? BACKEND_BUCKET_NOT_EMPTY : BACKEND_IO;
        } else if (t == DT_REG && (strcmp(n, POSIX_EMPTY_SEG) == 0 ||
                                   strncmp(n, POSIX_RESERVED, 4) != 0)) {
            st = BACKEND_BUCKET_NOT_EMPTY;
        } else if (unlinkat(dirfd, n, 0) != 0 && errno != ENOENT) {
            st = BACKEND_IO;
        }
    }
    closedir(d);
    return st;
}

enum backend_status posix_bucket_delete(struct posix_store *b, const char *bucket)
{
    if (b->read_only)
        return BACKEND_READ_ONLY;
    int bfd;
    enum backend_status st = posix_bucket_open(b, bucket, &bfd);
    if (st != BACKEND_OK)
        return st;
    int has = posix_dir_has_object(bfd);
    if (has != 0) {
        st = has > 0 ? BACKEND_BUCKET_NOT_EMPTY : BACKEND_IO;
        goto out;
    }
    int busy = posix_mpu_bucket_busy(b, bucket);
    if (busy != 0) {
        st = busy > 0 ? BACKEND_BUCKET_NOT_EMPTY : BACKEND_IO;
        goto out;
    }
    st = rm_tree(bfd);
    if (st != BACKEND_OK)
        goto out;
    if (unlinkat(b->rootfd, bucket, AT_REMOVEDIR) != 0) {
        int e = errno;
        if (e == ENOTEMPTY || e == EEXIST) {
            st = BACKEND_BUCKET_NOT_EMPTY;
        } else {
            log_msg(LOG_LVL_ERROR, "backend", "delete bucket %s: %s", bucket, strerror(e));
            st = posix_write_errno_status(e) == BACKEND_READ_ONLY ? BACKEND_READ_ONLY
                                                                  : BACKEND_IO;
        }
        goto out;
    }
    fsync(b->rootfd);
    posix_mpu_bucket_forget(b, bucket);
out:
    close(bfd);
    return st;
}

/* ---- reading ---- */

struct posix_obj {
    struct backend_obj base; /* first */
    int fd;
};

enum backend_status posix_meta_from_fd(int fd, const struct stat *st, struct obj_meta *meta)
{
    memset(meta, 0, sizeof *meta);
    meta->size = (uint64_t)st->st_size;
    meta->mtime = st->st_mtim;
    unsigned char buf[POSIX_META_MAX];
    ssize_t n = fgetxattr(fd, POSIX_META_XATTR, buf, sizeof buf);
    if (n < 0) {
        int e = errno;
        if (e != ENODATA && e != ENOTSUP && e != ERANGE) {
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
    if (meta->etag[0] == '\0')
        posix_pseudo_etag(st, meta->etag);
    return BACKEND_OK;
}

enum backend_status posix_object_fd(struct posix_store *b, const char *bucket, const char *key,
                                    int *fd, struct stat *st)
{
    *fd = -1;
    char path[POSIX_PATH_MAX];
    enum backend_status s = posix_key_to_path(key, path, sizeof path);
    if (s != BACKEND_OK)
        return s;
    int bfd;
    s = posix_bucket_open(b, bucket, &bfd);
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
    if (fstat(r, st) != 0) {
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

enum backend_status posix_obj_read(struct posix_obj *o, uint64_t off, void *buf,
                                     size_t len, size_t *got)
{
    *got = 0;
    if (off > (uint64_t)INT64_MAX)
        return BACKEND_OK;
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
    free(o);
}

/* ---- writing ---- */

/* fstatat-based diagnosis of a component that could not be opened as a
 * directory: a symlink is DENIED, a file is a key conflict. */
static enum backend_status not_a_dir_status(int dirfd, const char *name, int err)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISLNK(st.st_mode))
            return BACKEND_DENIED;
        if (!S_ISDIR(st.st_mode))
            return BACKEND_KEY_CONFLICT;
    }
    return posix_errno_status(err);
}

enum backend_status posix_mkparents(int bucketfd, const char *path, int *dirfd,
                                    const char **leaf)
{
    *dirfd = -1;
    int cur = dup(bucketfd);
    if (cur < 0)
        return BACKEND_IO;
    const char *p = path;
    const char *slash;
    while ((slash = strchr(p, '/')) != NULL) {
        char comp[POSIX_SEG_MAX + 1];
        size_t len = (size_t)(slash - p);
        memcpy(comp, p, len);
        comp[len] = '\0';
        int nfd = -1;
        /* A concurrent delete may rmdir the directory between our mkdir and
         * open; a few retries settle it. */
        for (int tries = 0; tries < 4 && nfd < 0; tries++) {
            if (mkdirat(cur, comp, 0755) != 0 && errno != EEXIST) {
                int e = errno;
                close(cur);
                if (e == ENOTDIR)
                    return BACKEND_KEY_CONFLICT;
                return posix_write_errno_status(e);
            }
            nfd = openat(cur, comp, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
            if (nfd < 0 && errno != ENOENT) {
                int e = errno;
                enum backend_status s = not_a_dir_status(cur, comp, e);
                close(cur);
                return s == BACKEND_NO_KEY ? BACKEND_KEY_CONFLICT : s;
            }
        }
        close(cur);
        if (nfd < 0)
            return BACKEND_IO;
        cur = nfd;
        p = slash + 1;
    }
    *dirfd = cur;
    *leaf = p;
    return BACKEND_OK;
}

enum backend_status posix_put_new(struct posix_store *b, int dirfd, int tmpdirfd,
                                  const char *leaf, bool is_part, uint64_t max_size,
                                  struct posix_put **out)
{
    *out = NULL;
    struct posix_put *p = calloc(1, sizeof *p);
    char *lf = strdup(leaf);
    if (!p || !lf) {
        free(p);
        free(lf);
        close(dirfd);
        if (tmpdirfd >= 0)
            close(tmpdirfd);
        return BACKEND_NOMEM;
    }
    p->base.ops = &posix_ops;
    p->fd = -1;
    p->b = b;
    p->bucketfd = -1;
    p->dirfd = dirfd;
    p->tmpdirfd = tmpdirfd >= 0 ? tmpdirfd : dirfd;
    p->leaf = lf;
    p->is_part = is_part;
    p->max_size = max_size;
    memcpy(p->tmp, POSIX_TMP_PREFIX, strlen(POSIX_TMP_PREFIX));
    size_t pl = strlen(POSIX_TMP_PREFIX);
    if (posix_random_chars(p->tmp + pl, 16) != 0) {
        p->tmp[0] = '\0';
        posix_put_abort(p);
        return BACKEND_IO;
    }
    p->tmp[pl + 16] = '\0';
    p->fd = openat(p->tmpdirfd, p->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                   0644);
    if (p->fd < 0) {
        int e = errno;
        /* ENOENT: the directory was pruned meanwhile (put_begin retries) */
        enum backend_status s = e == ENOENT ? BACKEND_NO_KEY : posix_write_errno_status(e);
        if (s == BACKEND_IO)
            log_msg(LOG_LVL_ERROR, "backend", "create temp file: %s", strerror(e));
        p->tmp[0] = '\0';
        posix_put_abort(p);
        return s;
    }
    *out = p;
    return BACKEND_OK;
}

/* Is `leaf` in dirfd a directory holding objects (a key conflict)? */
static enum backend_status leaf_check(int dirfd, const char *leaf)
{
    struct stat st;
    if (fstatat(dirfd, leaf, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return BACKEND_OK;
    if (S_ISLNK(st.st_mode))
        return BACKEND_DENIED;
    if (!S_ISDIR(st.st_mode))
        return BACKEND_OK;
    int sub = openat(dirfd, leaf, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
    if (sub < 0)
        return BACKEND_KEY_CONFLICT;
    int has = posix_dir_has_object(sub);
    close(sub);
    return has == 0 ? BACKEND_OK : BACKEND_KEY_CONFLICT;
}

int posix_tmpdir_open(int bucketfd, int dirfd)
{
    if (mkdirat(bucketfd, POSIX_TMP_DIR, 0755) != 0 && errno != EEXIST)
        return -1;
    int fd = openat(bucketfd, POSIX_TMP_DIR, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
    struct stat a, d;
    if (fd >= 0 && (fstat(fd, &a) != 0 || fstat(dirfd, &d) != 0 || a.st_dev != d.st_dev)) {
        close(fd);   /* another file system below the bucket: rename cannot cross it */
        return -1;
    }
    return fd;
}

enum backend_status posix_put_begin(struct posix_store *b, const char *bucket, const char *key,
                                      struct posix_put **out)
{
    *out = NULL;
    if (b->read_only)
        return BACKEND_READ_ONLY;
    char path[POSIX_PATH_MAX];
    enum backend_status s = posix_key_to_path(key, path, sizeof path);
    if (s != BACKEND_OK)
        return s;
    int bfd;
    s = posix_bucket_open(b, bucket, &bfd);
    if (s != BACKEND_OK)
        return s;
    for (int tries = 0; tries < 4; tries++) {
        int dirfd;
        const char *leaf;
        s = posix_mkparents(bfd, path, &dirfd, &leaf);
        if (s != BACKEND_OK)
            break;
        s = leaf_check(dirfd, leaf);
        if (s != BACKEND_OK) {
            close(dirfd);
            break;
        }
        /* The temp file goes to the bucket's .sg~tmp/ (found by the reclaim
         * at open), beside the object only when that cannot be renamed. */
        s = posix_put_new(b, dirfd, posix_tmpdir_open(bfd, dirfd), leaf, false, POSIX_MAX_PUT,
                          out);
        if (s != BACKEND_NO_KEY)   /* ENOENT: the directory was just pruned */
            break;
    }
    if (s == BACKEND_NO_KEY)
        s = BACKEND_IO;
    if (s != BACKEND_OK) {
        close(bfd);
        return s;
    }
    (*out)->bucketfd = bfd;
    (*out)->path = strdup(path);
    if (!(*out)->path) {
        posix_put_abort(*out);
        *out = NULL;
        return BACKEND_NOMEM;
    }
    return BACKEND_OK;
}

enum backend_status posix_put_write(struct posix_put *p, const void *buf, size_t len)
{
    if (p->failed)
        return p->fail_st;
    if (len > p->max_size - p->size) {
        p->failed = true;
        p->fail_st = BACKEND_TOO_LARGE;
        return p->fail_st;
    }
    const char *c = buf;
    while (len > 0) {
        ssize_t n = write(p->fd, c, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            p->failed = true;
            p->fail_st = posix_write_errno_status(e);
            if (p->fail_st == BACKEND_IO)
                log_msg(LOG_LVL_ERROR, "backend", "write: %s", strerror(e));
            return p->fail_st;
        }
        c += n;
        len -= (size_t)n;
        p->size += (uint64_t)n;
    }
    return BACKEND_OK;
}

static enum backend_status io_status(const char *what, int e)
{
    enum backend_status s = posix_write_errno_status(e);
    if (s != BACKEND_IO)
        return s;
    log_msg(LOG_LVL_ERROR, "backend", "%s: %s", what, strerror(e));
    return BACKEND_IO;
}

enum backend_status posix_put_commit(struct posix_put *p, const struct obj_meta *meta,
                                       struct obj_meta *out)
{
    enum backend_status s = BACKEND_OK;
    bool renamed = false, have_xattr = false;
    if (out)
        memset(out, 0, sizeof *out);
    if (p->failed) {
        s = p->fail_st;
        goto done;
    }
    unsigned char buf[POSIX_META_MAX];
    size_t len = 0;
    const char *etag = meta ? meta->etag : "";
    s = posix_meta_encode(etag, meta ? meta->hdrs : NULL, meta ? meta->n_hdrs : 0, buf,
                          sizeof buf, &len);
    if (s != BACKEND_OK)
        goto done;
    if (fsetxattr(p->fd, POSIX_META_XATTR, buf, len, 0) == 0) {
        have_xattr = etag[0] != '\0';
    } else if (errno == ENOTSUP) {
        log_msg(LOG_LVL_WARN, "backend", "no user xattrs on this filesystem: "
                "object stored without metadata");
    } else {
        s = io_status("set metadata", errno);
        goto done;
    }
    if (fsync(p->fd) != 0) {
        s = io_status("fsync", errno);
        goto done;
    }
    if (!p->is_part) {
        s = leaf_check(p->dirfd, p->leaf);
        if (s != BACKEND_OK)
            goto done;
    }
    for (int tries = 0; tries < 2 && !renamed; tries++) {
        if (renameat(p->tmpdirfd, p->tmp, p->dirfd, p->leaf) == 0) {
            renamed = true;
            break;
        }
        int e = errno;
        if (e == EISDIR || e == ENOTEMPTY || e == EEXIST) {
            /* an empty directory holds the name: drop it, else conflict */
            if (tries == 0 && unlinkat(p->dirfd, p->leaf, AT_REMOVEDIR) == 0)
                continue;
            s = BACKEND_KEY_CONFLICT;
        } else if (e == ENOENT) {
            s = p->is_part ? BACKEND_NO_UPLOAD : BACKEND_NO_BUCKET;
        } else {
            s = io_status("rename", e);
        }
        goto done;
    }
    if (fsync(p->dirfd) != 0)
        log_msg(LOG_LVL_WARN, "backend", "fsync directory: %s", strerror(errno));
    if (out) {
        struct stat st;
        if (fstat(p->fd, &st) != 0) {
            s = io_status("fstat", errno);
            goto done;
        }
        out->size = (uint64_t)st.st_size;
        out->mtime = st.st_mtim;
        if (have_xattr)
            snprintf(out->etag, sizeof out->etag, "%s", etag);
        else
            posix_pseudo_etag(&st, out->etag);
        if (meta && obj_meta_copy_hdrs(out, meta) != 0)
            s = BACKEND_NOMEM;   /* the object is stored; only *out is short */
    }
done:
    if (renamed)
        p->tmp[0] = '\0';
    if (s != BACKEND_OK && out)
        obj_meta_clear(out);
    posix_put_abort(p);
    return s;
}

void posix_put_abort(struct posix_put *p)
{
    if (!p)
        return;
    if (p->fd >= 0)
        close(p->fd);
    if (p->tmp[0] && unlinkat(p->tmpdirfd, p->tmp, 0) != 0 && errno != ENOENT)
        log_msg(LOG_LVL_WARN, "backend", "cannot remove temp file %s: %s", p->tmp,
                strerror(errno));
    if (p->tmpdirfd != p->dirfd)
        close(p->tmpdirfd);
    close(p->dirfd);
    if (p->bucketfd >= 0) {
        if (p->tmp[0] && p->path)   /* not committed: prune what put_begin made */
            posix_rmdir_parents(p->bucketfd, p->path);
        close(p->bucketfd);
    }
    free(p->path);
    free(p->leaf);
    free(p);
}

/* ---- copy ---- */

enum backend_status posix_copy_into(struct posix_put *p, int srcfd, uint64_t off,
                                    uint64_t len, unsigned char md5[16])
{
    /* A bounded buffer keeps memory flat whatever the object size; the MD5
     * needs the bytes in user space anyway, so copy_file_range buys little. */
    unsigned char *buf = malloc(POSIX_COPY_BUF);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    enum backend_status s = BACKEND_OK;
    if (!buf || !ctx || EVP_DigestInit_ex(ctx, EVP_md5(), NULL) != 1) {
        s = BACKEND_NOMEM;
        goto out;
    }
    while (len > 0) {
        size_t want = len < POSIX_COPY_BUF ? (size_t)len : POSIX_COPY_BUF;
        ssize_t n = pread(srcfd, buf, want, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            s = io_status("copy read", errno);
            goto out;
        }
        if (n == 0) {
            log_msg(LOG_LVL_ERROR, "backend", "copy: source shrank while copying");
            s = BACKEND_IO;
            goto out;
        }
        EVP_DigestUpdate(ctx, buf, (size_t)n);
        s = posix_put_write(p, buf, (size_t)n);
        if (s != BACKEND_OK)
            goto out;
        off += (uint64_t)n;
        len -= (uint64_t)n;
    }
    unsigned int ml = 0;
    EVP_DigestFinal_ex(ctx, md5, &ml);
out:
    EVP_MD_CTX_free(ctx);
    free(buf);
    return s;
}

enum backend_status posix_object_copy(struct posix_store *b, const char *src_bucket,
                                        const char *src_key, const char *dst_bucket,
                                        const char *dst_key, const struct obj_meta *meta,
                                        struct obj_meta *out)
{
    struct obj_meta smeta = { 0 };
    struct posix_put *p = NULL;
    int sfd;
    struct stat st;
    if (out)
        memset(out, 0, sizeof *out);
    enum backend_status s = posix_object_fd(b, src_bucket, src_key, &sfd, &st);
    if (s != BACKEND_OK)
        return s;
    s = posix_meta_from_fd(sfd, &st, &smeta);
    if (s != BACKEND_OK)
        goto out;
    if ((uint64_t)st.st_size > POSIX_MAX_PUT) {
        s = BACKEND_TOO_LARGE;
        goto out;
    }
    s = posix_put_begin(b, dst_bucket, dst_key, &p);
    if (s != BACKEND_OK)
        goto out;
    unsigned char md5[16];
    s = posix_copy_into(p, sfd, 0, (uint64_t)st.st_size, md5);
    if (s != BACKEND_OK) {
        posix_put_abort(p);
        goto out;
    }
    struct obj_meta nm = { 0 };
    posix_md5_to_hex(md5, nm.etag);
    const struct obj_meta *hsrc = meta ? meta : &smeta;
    nm.hdrs = hsrc->hdrs;
    nm.n_hdrs = hsrc->n_hdrs;
    s = posix_put_commit(p, &nm, out);   /* nm borrows the headers */
out:
    obj_meta_clear(&smeta);
    close(sfd);
    return s;
}

/* ---- delete ---- */

void posix_rmdir_parents(int bucketfd, const char *path)
{
    char buf[POSIX_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    char *slash;
    while ((slash = strrchr(buf, '/')) != NULL) {
        *slash = '\0';                      /* buf: the directory to remove */
        char *up = strrchr(buf, '/');
        int pfd;
        const char *name;
        if (up) {
            *up = '\0';
            pfd = posix_open_beneath(bucketfd, buf, O_DIRECTORY | O_RDONLY, 0);
            *up = '/';
            name = up + 1;
        } else {
            pfd = dup(bucketfd);
            name = buf;
        }
        if (pfd < 0)
            return;
        int r = unlinkat(pfd, name, AT_REMOVEDIR);
        close(pfd);
        if (r != 0)
            return;   /* not empty (or gone): stop here */
    }
}

enum backend_status posix_object_delete(struct posix_store *b, const char *bucket,
                                          const char *key)
{
    if (b->read_only)
        return BACKEND_READ_ONLY;
    char path[POSIX_PATH_MAX];
    enum backend_status s = posix_key_to_path(key, path, sizeof path);
    if (s != BACKEND_OK)
        return s;
    int bfd;
    s = posix_bucket_open(b, bucket, &bfd);
    if (s != BACKEND_OK)
        return s;
    char *slash = strrchr(path, '/');
    int dfd;
    const char *leaf;
    if (slash) {
        *slash = '\0';
        dfd = posix_open_beneath(bfd, path, O_DIRECTORY | O_RDONLY, 0);
        *slash = '/';
        leaf = slash + 1;
    } else {
        dfd = dup(bfd);
        leaf = path;
    }
    if (dfd < 0) {
        s = posix_errno_status(errno);
        goto out;
    }
    struct stat st;
    if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        s = errno == ENOENT ? BACKEND_NO_KEY : io_status("stat", errno);
    } else if (S_ISLNK(st.st_mode)) {
        s = BACKEND_DENIED;
    } else if (!S_ISREG(st.st_mode)) {
        s = BACKEND_NO_KEY;
    } else if (unlinkat(dfd, leaf, 0) != 0) {
        s = errno == ENOENT ? BACKEND_NO_KEY : io_status("unlink", errno);
    } else {
        fsync(dfd);
        posix_rmdir_parents(bfd, path);
    }
    close(dfd);
out:
    close(bfd);
    return s;
}

/* ---- helpers shared with listing and multipart ---- */

int posix_dir_has_object(int dirfd)
{
    int dfd = dup(dirfd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (d)
        rewinddir(d);   /* a dup shares the offset of a read fd */
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return -1;
    }
    int found = 0;
    struct dirent *de;
    while (!found && (de = readdir(d)) != NULL) {
        const char *n = de->d_name;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
            continue;
        bool visible = strcmp(n, POSIX_EMPTY_SEG) == 0 || strncmp(n, POSIX_RESERVED, 4) != 0;
        if (!visible)
            continue;
        unsigned char t = entry_type(dirfd, de);
        if (t == DT_REG) {
            found = 1;
        } else if (t == DT_DIR) {
            int sub = openat(dirfd, n, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
            if (sub < 0)
                continue;
            found = posix_dir_has_object(sub);
            close(sub);
        }
    }
    closedir(d);
    return found;
}

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
                                          struct obj_meta *out)
{
    return posix_object_copy(store_of(b), src_bucket, src_key, dst_bucket, dst_key, meta, out);
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
                                            unsigned part_no, const char *src_bucket,
                                            const char *src_key, bool has_range,
                                            uint64_t first, uint64_t last, struct obj_meta *out)
{
    return posix_mpu_part_copy(store_of(b), bucket, key, upload_id, part_no, src_bucket,
                               src_key, has_range, first, last, out);
}

static enum backend_status op_mpu_complete(struct backend *b, const char *bucket,
                                           const char *key, const char *upload_id,
                                           const struct backend_part *parts, size_t n_parts,
                                           const struct obj_meta *meta, struct obj_meta *out)
{
    return posix_mpu_complete(store_of(b), bucket, key, upload_id, parts, n_parts, meta, out);
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
                                               const char *prefix, const char *delimiter,
                                               const char *key_marker,
                                               const char *upload_id_marker,
                                               unsigned max_uploads,
                                               struct backend_uploads_page *out)
{
    return posix_mpu_list_uploads(store_of(b), bucket, prefix, delimiter, key_marker,
                                  upload_id_marker, max_uploads, out);
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
    .probe = posix_probe,
};
