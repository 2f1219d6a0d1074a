/* backend/posix_write.c - writing the objects of the posix store, always
 * atomically: a put makes the key's parent directories, writes a temp file
 * (in the bucket's .sg~tmp/), sets the metadata xattr, fsyncs and, under
 * the key's commit lock with the write's condition checked (posix_cond.c),
 * renames the file into place: the key's name, or its POSIX_SELF when the
 * name is a directory of other keys (posix_nest.c). Copy is a put fed from
 * another object; delete unlinks the file and prunes the parents it leaves
 * empty. */
#include "posix_int.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* ---- writing ---- */

/* What a component that could not be opened as a directory (openat's errno
 * err) is now: a symlink is DENIED, a file is a key conflict (the caller
 * nests the file). Gone, or a directory by now, is a race with a delete or
 * another writer's nest or mkdir: *again tells the caller to look again. */
static enum backend_status not_a_dir_status(int dirfd, const char *name, int err, bool *again)
{
    *again = false;
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        *again = errno == ENOENT;
        return posix_errno_status(err);
    }
    if (S_ISLNK(st.st_mode))
        return BACKEND_DENIED;
    if (!S_ISDIR(st.st_mode))
        return BACKEND_KEY_CONFLICT;
    *again = true;
    return posix_errno_status(err);
}

/* Rounds of mkdir + open per component. A round is lost only to another
 * writer's progress on the same name (a delete that prunes the directory, a
 * put of the name as a file, a nest), so a few settle it; 32 is far more
 * than the 3-thread race of test_backend_posix ever needed. */
#define MKPARENTS_TRIES 32

enum backend_status posix_mkparents(struct posix_store *b, const char *bucket, int bucketfd,
                                    const char *path, int *dirfd, const char **leaf)
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
         * open, or a put make the name a file again: we look again. */
        for (int tries = 0; tries < MKPARENTS_TRIES && nfd < 0; tries++) {
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
                bool again;
                enum backend_status s = not_a_dir_status(cur, comp, e, &again);
                if (again)
                    continue;
                if (s == BACKEND_KEY_CONFLICT) {
                    /* the key path[0..slash) is a file: it moves into a
                     * directory of that name, and we look again */
                    char pre[POSIX_PATH_MAX];
                    memcpy(pre, path, (size_t)(slash - path));
                    pre[slash - path] = '\0';
                    s = posix_nest_file(b, bucketfd, posix_key_lock_slot(bucket, pre), cur, comp);
                    if (s == BACKEND_OK)
                        continue;
                }
                close(cur);
                return s == BACKEND_NO_KEY ? BACKEND_KEY_CONFLICT : s;
            }
        }
        close(cur);
        if (nfd < 0) {
            log_msg(LOG_LVL_ERROR, "backend", "%s/%.*s: still changing under us after %d tries",
                    bucket, (int)(slash - path), path, MKPARENTS_TRIES);
            return BACKEND_IO;
        }
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
    p->slab_fd = -1;
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

/* A symbolic link planted at the key's name is never written through. */
static enum backend_status leaf_check(int dirfd, const char *leaf)
{
    struct stat st;
    if (fstatat(dirfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
        return BACKEND_DENIED;
    return BACKEND_OK;
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
    char path[POSIX_PATH_MAX];
    int bfd;
    enum backend_status s = posix_key_bucket_open(b, bucket, key, true, path, &bfd);
    if (s != BACKEND_OK)
        return s;
    for (int tries = 0; tries < 4; tries++) {
        int dirfd;
        const char *leaf;
        s = posix_mkparents(b, bucket, bfd, path, &dirfd, &leaf);
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
    (*out)->lock_slot = posix_key_lock_slot(bucket, path);
    (*out)->path = strdup(path);
    (*out)->bucket = strdup(bucket);
    if (!(*out)->path || !(*out)->bucket) {
        posix_put_abort(*out);
        *out = NULL;
        return BACKEND_NOMEM;
    }
    return BACKEND_OK;
}

/* A put of a store that stages through io_uring gets its writer at the
 * first write that knows the put is large: its length announced, or that
 * much written. Smaller puts keep write(): a ring costs more than it saves
 * there. A part in a slab slot past AW_SLAB_MAX keeps pwrite, whose EFBIG
 * moves it to its own file (posix_slab_write). */
#define AW_MIN ((uint64_t)1 << 20)
#define AW_SLAB_MAX ((uint64_t)1 << 40)

static void aw_try(struct posix_put *p)
{
    if (p->aw_tried || p->b->aw_mode == POSIX_AW_OFF)
        return;
    if (!(p->base.has_size && p->base.size >= AW_MIN) && p->size < AW_MIN)
        return;
    p->aw_tried = true;
    if (p->slab_fd < 0)
        p->aw = posix_aw_start(p->fd, p->size, p->b->aw_mode);
    else if (p->slab_off <= AW_SLAB_MAX - p->slab_cap)
        p->aw = posix_aw_start(p->slab_fd, p->slab_off + p->size, p->b->aw_mode);
}

static enum backend_status aw_write(struct posix_put *p, const void *buf, size_t len)
{
    uint64_t cap = p->slab_fd >= 0 ? p->slab_cap : p->max_size;
    if (len > cap - p->size)
        return BACKEND_TOO_LARGE;
    int e = posix_aw_write(p->aw, buf, len);
    if (e) {
        enum backend_status s = posix_write_errno_status(e);
        if (s == BACKEND_IO)
            log_msg(LOG_LVL_ERROR, "backend", "write: %s", strerror(e));
        return s;
    }
    p->size += len;
    return BACKEND_OK;
}

enum backend_status posix_put_write(struct posix_put *p, const void *buf, size_t len)
{
    if (p->failed)
        return p->fail_st;
    if (p->is_part && !p->slab_tried) {
        p->slab_tried = true;
        posix_slab_attach(p);
    }
    aw_try(p);
    int e = 0;
    bool slab = p->slab_fd >= 0;
    enum backend_status s;
    if (p->aw) {
        s = aw_write(p, buf, len);
    } else {
        s = slab ? posix_slab_write(p, buf, len)
                 : backend_spool_append(p->fd, buf, len, &p->size, p->max_size, &e);
        if (s == BACKEND_OK && p->b->aw_mode != POSIX_AW_OFF)
            posix_aw_book(POSIX_AW_HOW_WRITE, len);
    }
    if (s == BACKEND_IO && !slab && !p->aw) {
        s = posix_write_errno_status(e);
        if (s == BACKEND_IO)
            log_msg(LOG_LVL_ERROR, "backend", "write: %s", strerror(e));
    }
    if (s != BACKEND_OK) {
        p->failed = true;
        p->fail_st = s;
    }
    return s;
}

static enum backend_status io_status(const char *what, int e)
{
    enum backend_status s = posix_write_errno_status(e);
    if (s != BACKEND_IO)
        return s;
    log_msg(LOG_LVL_ERROR, "backend", "%s: %s", what, strerror(e));
    return BACKEND_IO;
}

/* The directory the object goes to was pruned while the temp file was
 * written (the last key beside it was deleted): made again, with the key's
 * commit lock let go meanwhile (making it may nest a parent key, under that
 * key's lock, which may be the same stripe). */
static enum backend_status remake_parents(struct posix_put *p)
{
    struct stat bst;
    if (fstat(p->bucketfd, &bst) == 0 && bst.st_nlink == 0)
        return BACKEND_NO_BUCKET;   /* the bucket itself was deleted */
    posix_key_unlock(p->b, p->lock_slot);
    int dirfd;
    const char *leaf;
    enum backend_status s = posix_mkparents(p->b, p->bucket, p->bucketfd, p->path, &dirfd,
                                            &leaf);
    posix_key_lock(p->b, p->lock_slot);
    if (s == BACKEND_OK) {
        close(p->dirfd);
        p->dirfd = dirfd;
    }
    return s;
}

enum backend_status posix_put_commit(struct posix_put *p, const struct obj_meta *meta,
                                       struct obj_meta *out)
{
    enum backend_status s = BACKEND_OK;
    bool renamed = false, have_xattr = false, locked = false;
    if (out)
        memset(out, 0, sizeof *out);
    if (p->failed) {
        s = p->fail_st;
        goto done;
    }
    if (p->aw) {   /* every byte written before the fdatasync below */
        int e = posix_aw_finish(p->aw);
        posix_aw_free(p->aw);
        p->aw = NULL;
        if (e) {
            s = io_status("write", e);
            goto done;
        }
    }
    if (p->slab_fd >= 0) {
        s = posix_slab_part_commit(p);
        if (s != BACKEND_OK)
            goto done;
    }
    const char *etag = meta ? meta->etag : "";
    bool stored;
    s = posix_meta_set(p->fd, etag, meta ? meta->hdrs : NULL, meta ? meta->n_hdrs : 0, &stored);
    if (s != BACKEND_OK)
        goto done;
    have_xattr = stored && etag[0] != '\0';
    if (fsync(p->fd) != 0) {
        s = io_status("fsync", errno);
        goto done;
    }
    /* An object's condition is checked and its rename done under the key's
     * commit lock, which every commit and delete of the key takes: no other
     * writer of this store can come between the two. */
    if (!p->is_part) {
        posix_key_lock(p->b, p->lock_slot);
        locked = true;
    }
    /* The target is looked up under the lock: keys written below this one
     * meanwhile made its name a directory, or the last of them was deleted
     * and the directory pruned; a look that raced with either looks again. */
    int tfd = -1, tries;
    for (tries = 0; tries < 16 && !renamed; tries++) {
        const char *tleaf = p->leaf;
        tfd = p->dirfd;
        if (!p->is_part) {
            s = posix_nest_target(p->dirfd, p->leaf, &tfd, &tleaf);
            if (s == BACKEND_NO_KEY)
                continue;   /* the directory went while looked at */
            if (s == BACKEND_OK)
                s = posix_cond_check(tfd, tleaf, &p->base.cond);
            if (s != BACKEND_OK) {
                if (tfd != p->dirfd)
                    close(tfd);
                break;
            }
        }
        if (renameat(p->tmpdirfd, p->tmp, tfd, tleaf) == 0) {
            renamed = true;
            break;
        }
        int e = errno;
        if (tfd != p->dirfd) {
            close(tfd);
            tfd = -1;
        }
        if (!p->is_part && (e == EISDIR || e == ENOTEMPTY || e == EEXIST ||
                            (e == ENOENT && tleaf != p->leaf)))
            continue;   /* a directory came, or went, between the look and the rename */
        if (!p->is_part && e == ENOENT && p->tmpdirfd != p->dirfd) {
            s = remake_parents(p);
            if (s != BACKEND_OK)
                break;
            continue;
        }
        if (e == ENOENT)
            s = p->is_part ? BACKEND_NO_UPLOAD : BACKEND_NO_BUCKET;
        else
            s = io_status("rename", e);
        break;
    }
    if (!renamed) {
        if (tries == 16) {
            /* keys below this one kept coming and going: a retry settles it */
            log_msg(LOG_LVL_WARN, "backend", "commit %s: the name kept changing", p->leaf);
            s = BACKEND_UNAVAILABLE;
        }
        goto done;
    }
    if (locked) {
        posix_key_unlock(p->b, p->lock_slot);
        locked = false;
    }
    if (fsync(tfd) != 0)
        log_msg(LOG_LVL_WARN, "backend", "fsync directory: %s", strerror(errno));
    if (tfd != p->dirfd)
        close(tfd);
    if (out) {
        struct stat st;
        if (fstat(p->fd, &st) != 0) {
            s = io_status("fstat", errno);
            goto done;
        }
        out->size = p->slab_fd >= 0 ? p->size : (uint64_t)st.st_size;
        out->mtime = st.st_mtim;
        if (have_xattr)
            snprintf(out->etag, sizeof out->etag, "%s", etag);
        else
            posix_pseudo_etag(&st, out->etag);
        if (meta && obj_meta_copy_hdrs(out, meta) != 0)
            s = BACKEND_NOMEM;   /* the object is stored; only *out is short */
    }
done:
    if (locked)
        posix_key_unlock(p->b, p->lock_slot);
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
    posix_aw_free(p->aw);   /* before its file is closed */
    if (p->fd >= 0)
        close(p->fd);
    if (p->slab_fd >= 0)
        close(p->slab_fd);   /* lets go of its flock */
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
    free(p->bucket);
    free(p->leaf);
    free(p);
}

/* ---- copy ---- */

enum backend_status posix_copy_into(struct posix_put *p, int srcfd, uint64_t off,
                                    uint64_t len, unsigned char md5[16], struct sg_ck *ck)
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
        if (ck)
            sg_ck_update(ck, buf, (size_t)n);
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
                                        const char *tagging, const struct backend_cond *cond,
                                        struct obj_meta *out)
{
    struct obj_meta smeta = { 0 }, nm = { 0 };
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
    /* A condition that fails already fails before the bytes are copied;
     * the commit checks it again, atomically. */
    backend_put_set_cond(&p->base, cond);
    int tfd;
    const char *tleaf;
    s = posix_nest_target(p->dirfd, p->leaf, &tfd, &tleaf);
    if (s == BACKEND_OK) {
        s = posix_cond_check(tfd, tleaf, cond);
        if (tfd != p->dirfd)
            close(tfd);
    } else if (s == BACKEND_NO_KEY) {
        s = BACKEND_OK;   /* the commit looks again */
    }
    if (s != BACKEND_OK) {
        posix_put_abort(p);
        goto out;
    }
    unsigned char md5[16];
    s = posix_copy_into(p, sfd, 0, (uint64_t)st.st_size, md5, NULL);
    if (s != BACKEND_OK) {
        posix_put_abort(p);
        goto out;
    }
    if (posix_meta_tagged(meta ? meta : &smeta, &smeta, tagging, &nm) != 0) {
        posix_put_abort(p);
        s = BACKEND_NOMEM;
        goto out;
    }
    posix_md5_to_hex(md5, nm.etag);
    s = posix_put_commit(p, &nm, out);
out:
    obj_meta_clear(&nm);
    obj_meta_clear(&smeta);
    close(sfd);
    return s;
}

/* ---- delete ---- */

/* Opens the directory holding the last component of mapped path `path`
 * beneath bucketfd (bucketfd itself, dup'd, when path has no '/'); *leaf
 * points at that component in path. An fd, or -1 with errno. */
static int parent_open(int bucketfd, char *path, const char **leaf)
{
    char *slash = strrchr(path, '/');
    int fd;
    if (slash) {
        *slash = '\0';
        fd = posix_open_beneath(bucketfd, path, O_DIRECTORY | O_RDONLY, 0);
        *slash = '/';
        *leaf = slash + 1;
    } else {
        fd = dup(bucketfd);
        *leaf = path;
    }
    return fd;
}

void posix_rmdir_parents(int bucketfd, const char *path)
{
    char buf[POSIX_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    char *slash;
    while ((slash = strrchr(buf, '/')) != NULL) {
        *slash = '\0';                      /* buf: the directory to remove */
        const char *name;
        int pfd = parent_open(bucketfd, buf, &name);
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
    char path[POSIX_PATH_MAX];
    int bfd;
    enum backend_status s = posix_key_bucket_open(b, bucket, key, true, path, &bfd);
    if (s != BACKEND_OK)
        return s;
    const char *leaf;
    int dfd = parent_open(bfd, path, &leaf);
    if (dfd < 0) {
        s = posix_errno_status(errno);
        goto out;
    }
    struct stat st;
    unsigned slot = posix_key_lock_slot(bucket, path);
    posix_key_lock(b, slot);   /* not between a conditional write's check and rename */
    /* keys below this one exist: the object, if any, is the directory's
     * POSIX_SELF, and the directory is pruned from there */
    int tfd;
    const char *tleaf;
    if (posix_nest_target(dfd, leaf, &tfd, &tleaf) == BACKEND_OK && tfd != dfd) {
        close(dfd);
        dfd = tfd;
        leaf = tleaf;
        size_t pl = strlen(path);
        snprintf(path + pl, sizeof path - pl, "/%s", POSIX_SELF);
    }
    if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        s = errno == ENOENT ? BACKEND_NO_KEY : io_status("stat", errno);
    } else if (S_ISLNK(st.st_mode)) {
        s = BACKEND_DENIED;
    } else if (!S_ISREG(st.st_mode)) {
        s = BACKEND_NO_KEY;
    } else if (unlinkat(dfd, leaf, 0) != 0) {
        s = errno == ENOENT ? BACKEND_NO_KEY : io_status("unlink", errno);
    } else {
        posix_key_unlock(b, slot);
        slot = POSIX_KEY_LOCKS;
        fsync(dfd);
        posix_rmdir_parents(bfd, path);
    }
    if (slot < POSIX_KEY_LOCKS)
        posix_key_unlock(b, slot);
    close(dfd);
out:
    close(bfd);
    return s;
}
