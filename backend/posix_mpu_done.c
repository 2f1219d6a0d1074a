/* backend/posix_mpu_done.c - the record of completed multipart uploads. A
 * client that lost Complete's answer sends it again; AWS answers the same
 * ETag for a while instead of NoSuchUpload, and so do we for a day:
 * STATE/mpu/.done/<upload-id> holds the bucket, key, ETag and a digest of
 * the parts list. The reclaim at open and the upload expiry thread remove
 * records older than POSIX_DONE_TTL_S. */
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

#define DONE_DIR "done"
#define DONE_MAGIC "SGD1"
#define DONE_MAX (8 + 65 + 72 + 64 + POSIX_KEY_MAX + 8)

/* "SGD1" NUL digest NUL etag NUL bucket NUL key NUL: keys hold no NUL. */
static size_t done_encode(const char *digest, const char *etag, const char *bucket,
                          const char *key, char *buf, size_t cap)
{
    const char *f[] = { DONE_MAGIC, digest, etag, bucket, key };
    size_t o = 0;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        size_t l = strlen(f[i]) + 1;
        if (l > cap - o)
            return 0;
        memcpy(buf + o, f[i], l);
        o += l;
    }
    return o;
}

static int done_dir(struct posix_store *b, bool create)
{
    if (b->mpufd < 0)
        return -1;
    if (create && mkdirat(b->mpufd, "." DONE_DIR, 0700) != 0 && errno != EEXIST)
        return -1;
    return openat(b->mpufd, "." DONE_DIR, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
}

void posix_mpu_done_record(struct posix_store *b, const char *bucket, const char *key,
                           const char *id, const struct backend_part *parts, size_t n,
                           const char *etag)
{
    char digest[65], buf[DONE_MAX];
    backend_parts_digest(parts, n, digest);
    size_t len = done_encode(digest, etag, bucket, key, buf, sizeof buf);
    int dfd = len ? done_dir(b, true) : -1;
    int fd = dfd >= 0 ? openat(dfd, id, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                               0600)
                      : -1;
    int e = errno;
    bool ok = fd >= 0 && write(fd, buf, len) == (ssize_t)len;
    if (fd >= 0 && !ok)
        e = errno;
    if (fd >= 0)
        close(fd);
    if (dfd >= 0)
        close(dfd);
    /* Not fatal: the object is complete; a repeat then gets NoSuchUpload. */
    if (!ok)
        log_msg(LOG_LVL_WARN, "backend", "bucket=%s upload %s: cannot record its completion "
                "(%s): Complete sent again will answer NoSuchUpload", bucket, id, strerror(e));
}

enum backend_status posix_mpu_done_lookup(struct posix_store *b, const char *bucket,
                                          const char *key, const char *id,
                                          const struct backend_part *parts, size_t n,
                                          struct obj_meta *out)
{
    if (!id || !posix_upload_id_valid(id))
        return BACKEND_NO_UPLOAD;
    int dfd = done_dir(b, false);
    int fd = dfd >= 0 ? openat(dfd, id, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (dfd >= 0)
        close(dfd);
    if (fd < 0)
        return BACKEND_NO_UPLOAD;
    char got[DONE_MAX], want[DONE_MAX], digest[65];
    ssize_t gl = read(fd, got, sizeof got);
    close(fd);
    backend_parts_digest(parts, n, digest);
    /* the ETag is the one field not known here: compare the rest around it */
    const char *etag = gl > 0 && (size_t)gl > sizeof DONE_MAGIC + 65
                           ? got + sizeof DONE_MAGIC + 65 : NULL;
    if (!etag || !memchr(etag, '\0', (size_t)(got + gl - etag)) || strlen(etag) >= 72)
        return BACKEND_NO_UPLOAD;
    size_t wl = done_encode(digest, etag, bucket, key, want, sizeof want);
    if (wl != (size_t)gl || memcmp(want, got, wl) != 0)
        return BACKEND_NO_UPLOAD;
    if (out) {
        memset(out, 0, sizeof *out);
        snprintf(out->etag, sizeof out->etag, "%s", etag);
    }
    log_msg(LOG_LVL_DEBUG, "backend", "bucket=%s key=%s upload %s: completed before, "
            "same parts: answering its ETag again", bucket, key, id);
    return BACKEND_OK;
}

uint64_t posix_mpu_done_expire(struct posix_store *b, time_t now)
{
    int dfd = done_dir(b, false);
    DIR *d = dfd >= 0 ? posix_dir_stream(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return 0;
    }
    uint64_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        struct stat st;
        if (!posix_upload_id_valid(de->d_name) ||
            fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (now - st.st_mtim.tv_sec >= POSIX_DONE_TTL_S &&
            unlinkat(dirfd(d), de->d_name, 0) == 0)
            n++;
    }
    closedir(d);
    close(dfd);
    return n;
}
