/* backend/posix_bucket.c - the buckets of the posix store: the directories
 * directly under ROOT. Opening one by name, listing them in name order with
 * bounded memory, creating one, and deleting one (only when neither an
 * object nor an unfinished upload is left in it). */
#include "posix_int.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum backend_status posix_bucket_open(struct posix_store *b, const char *bucket, int *fd)
{
    *fd = -1;
    if (!sg_bucket_name_valid(bucket))
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

enum backend_status posix_key_bucket_open(struct posix_store *b, const char *bucket,
                                          const char *key, bool write,
                                          char path[POSIX_PATH_MAX], int *fd)
{
    *fd = -1;
    if (write && b->read_only)
        return BACKEND_READ_ONLY;
    enum backend_status s = posix_key_to_path(key, path, POSIX_PATH_MAX);
    if (s != BACKEND_OK)
        return s;
    return posix_bucket_open(b, bucket, fd);
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
    DIR *d = posix_dir_stream(b->rootfd);
    if (!d) {
        int e = errno;
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
            if (!sg_bucket_name_valid(de->d_name) || strcmp(de->d_name, last) <= 0)
                continue;
            if (posix_entry_type(b->rootfd, de) != DT_DIR)
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
    if (!sg_bucket_name_valid(bucket))
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
    DIR *d = posix_dir_stream(dirfd);
    if (!d)
        return BACKEND_IO;
    enum backend_status st = BACKEND_OK;
    struct dirent *de;
    while (st == BACKEND_OK && (de = readdir(d)) != NULL) {
        const char *n = de->d_name;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
            continue;
        unsigned char t = posix_entry_type(dirfd, de);
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
