/* backend/posix_mpu.c - multipart uploads of the posix store. An upload is
 * STATE/mpu/<bucket>/<upload-id>/ (STATE: the state directory, by default
 * ROOT/.shardgate) holding "info" (key, initiation time, headers) and one
 * file per part ("p00001", written through a temp name in the same directory
 * and renamed like objects, its MD5 and x-amz-checksum-* header in the
 * metadata xattr). Complete assembles the listed parts into a temp file in
 * the bucket's temp directory and commits it like a put. This file: the
 * upload directory and its info file (create, head, abort, the uploads of a
 * bucket, ListMultipartUploads); the parts are in posix_mpu_part.c and
 * Complete in posix_mpu_complete.c. */
#include "posix_int.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define INFO_NAME "info"
#define INFO_MAX  (4 + 2 + POSIX_KEY_MAX + 12 + POSIX_META_MAX)

bool posix_upload_id_valid(const char *id)
{
    size_t n = strlen(id);
    if (n != POSIX_UPLOAD_ID_LEN)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = id[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
              (ch >= '0' && ch <= '9') || ch == '-' || ch == '_'))
            return false;
    }
    return true;
}

static void put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Reads and decodes the info file of an upload directory. */
static int info_read(int ufd, struct posix_upload_info *ui)
{
    memset(ui, 0, sizeof *ui);
    int fd = openat(ufd, INFO_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    unsigned char *buf = malloc(INFO_MAX + 1);
    ssize_t n = buf ? pread(fd, buf, INFO_MAX + 1, 0) : -1;
    close(fd);
    int r = -1;
    if (n < 4 + 2 + 12 || n > (ssize_t)INFO_MAX || memcmp(buf, "SGU1", 4) != 0)
        goto out;
    size_t len = (size_t)n;
    size_t kl = (size_t)get_le(buf + 4, 2);
    if (kl > POSIX_KEY_MAX || 6 + kl + 12 > len || memchr(buf + 6, '\0', kl))
        goto out;
    memcpy(ui->key, buf + 6, kl);
    ui->key[kl] = '\0';
    ui->initiated.tv_sec = (time_t)get_le(buf + 6 + kl, 8);
    ui->initiated.tv_nsec = (long)get_le(buf + 14 + kl, 4);
    if (posix_meta_decode(buf + 18 + kl, len - 18 - kl, &ui->meta) != 0)
        goto out;
    r = 0;
out:
    free(buf);
    return r;
}

int posix_mpu_upload_initiated(int ufd, struct timespec *out)
{
    struct posix_upload_info ui;
    int r = info_read(ufd, &ui);
    obj_meta_clear(&ui.meta);
    if (r == 0)
        *out = ui.initiated;
    return r;
}

static int bucket_mpu_dir(struct posix_store *b, const char *bucket)
{
    if (b->mpufd < 0) {   /* read-only: no state directory, so no upload */
        errno = ENOENT;
        return -1;
    }
    return posix_open_beneath(b->mpufd, bucket, O_DIRECTORY | O_RDONLY, 0);
}

/* Opens an upload of (bucket, key) and checks it belongs to them. */
enum backend_status posix_mpu_upload_open(struct posix_store *b, const char *bucket,
                                          const char *key, const char *id, int *ufd,
                                          struct posix_upload_info *ui)
{
    *ufd = -1;
    enum backend_status s = posix_bucket_head(b, bucket);
    if (s != BACKEND_OK)
        return s;
    if (!id || !posix_upload_id_valid(id))
        return BACKEND_NO_UPLOAD;
    char path[128];
    snprintf(path, sizeof path, "%s/%s", bucket, id);
    int fd = b->mpufd < 0 ? -1 : posix_open_beneath(b->mpufd, path, O_DIRECTORY | O_RDONLY, 0);
    if (fd < 0)
        return BACKEND_NO_UPLOAD;
    struct posix_upload_info tmp;
    if (info_read(fd, &tmp) != 0 || strcmp(tmp.key, key) != 0) {
        obj_meta_clear(&tmp.meta);
        close(fd);
        return BACKEND_NO_UPLOAD;
    }
    if (ui)
        *ui = tmp;
    else
        obj_meta_clear(&tmp.meta);
    *ufd = fd;
    return BACKEND_OK;
}

uint64_t posix_mpu_upload_remove(int parentfd, const char *id)
{
    uint64_t bytes = 0;
    int fd = openat(parentfd, id, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        DIR *d = fdopendir(fd);
        if (d) {
            struct dirent *de;
            while ((de = readdir(d)) != NULL) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                    continue;
                struct stat st;
                bool sized = fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0;
                /* a slab that became the object (posix_mpu_slab.c) frees nothing */
                if (unlinkat(dirfd(d), de->d_name, 0) == 0 && sized && st.st_nlink == 1)
                    bytes += (uint64_t)st.st_size;
            }
            closedir(d);
        } else {
            close(fd);
        }
    }
    if (unlinkat(parentfd, id, AT_REMOVEDIR) != 0 && errno != ENOENT)
        log_msg(LOG_LVL_WARN, "backend", "cannot remove upload %s: %s", id, strerror(errno));
    fsync(parentfd);
    return bytes;
}

enum backend_status posix_mpu_create(struct posix_store *b, const char *bucket, const char *key,
                                       const struct obj_meta *meta,
                                       char upload_id[BACKEND_UPLOAD_ID_MAX])
{
    upload_id[0] = '\0';
    char path[POSIX_PATH_MAX];
    int bfd;
    enum backend_status s = posix_key_bucket_open(b, bucket, key, true, path, &bfd);
    if (s != BACKEND_OK)
        return s;
    close(bfd);

    unsigned char *buf = malloc(INFO_MAX);
    if (!buf)
        return BACKEND_NOMEM;
    size_t kl = strlen(key), ml = 0;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    memcpy(buf, "SGU1", 4);
    put_le(buf + 4, kl, 2);
    memcpy(buf + 6, key, kl);
    put_le(buf + 6 + kl, (uint64_t)now.tv_sec, 8);
    put_le(buf + 14 + kl, (uint64_t)now.tv_nsec, 4);
    s = posix_meta_encode("", meta ? meta->hdrs : NULL, meta ? meta->n_hdrs : 0,
                          buf + 18 + kl, INFO_MAX - 18 - kl, &ml);
    if (s != BACKEND_OK) {
        free(buf);
        return s;
    }
    size_t len = 18 + kl + ml;

    int pfd = -1, ufd = -1, fd = -1;
    char id[POSIX_UPLOAD_ID_LEN + 1];
    char tmp[32] = POSIX_TMP_PREFIX "info";
    for (int tries = 0; tries < 8 && ufd < 0; tries++) {
        if (pfd < 0) {
            if (mkdirat(b->mpufd, bucket, 0755) != 0 && errno != EEXIST) {
                s = posix_write_errno_status(errno);
                goto out;
            }
            pfd = bucket_mpu_dir(b, bucket);
            if (pfd < 0)
                continue;
        }
        if (posix_random_chars(id, POSIX_UPLOAD_ID_LEN) != 0) {
            s = BACKEND_IO;
            goto out;
        }
        id[POSIX_UPLOAD_ID_LEN] = '\0';
        if (mkdirat(pfd, id, 0755) != 0) {
            if (errno == ENOENT) {   /* bucket dir pruned meanwhile */
                close(pfd);
                pfd = -1;
            } else if (errno != EEXIST) {
                s = posix_write_errno_status(errno);
                goto out;
            }
            continue;
        }
        ufd = openat(pfd, id, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
    }
    if (ufd < 0) {
        s = BACKEND_IO;
        goto out;
    }
    fd = openat(ufd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 || write(fd, buf, len) != (ssize_t)len || fsync(fd) != 0 ||
        renameat(ufd, tmp, ufd, INFO_NAME) != 0) {
        int e = errno;
        s = posix_write_errno_status(e);
        log_msg(LOG_LVL_ERROR, "backend", "create upload for %s/%s: %s", bucket, key,
                strerror(e));
        posix_mpu_upload_remove(pfd, id);
        goto out;
    }
    fsync(ufd);
    fsync(pfd);
    memcpy(upload_id, id, POSIX_UPLOAD_ID_LEN + 1);
out:
    if (fd >= 0)
        close(fd);
    if (ufd >= 0)
        close(ufd);
    if (pfd >= 0)
        close(pfd);
    free(buf);
    return s;
}

enum backend_status posix_mpu_head(struct posix_store *b, const char *bucket, const char *key,
                                   const char *upload_id, struct obj_meta *meta)
{
    memset(meta, 0, sizeof *meta);
    struct posix_upload_info ui;
    int ufd;
    enum backend_status s = posix_mpu_upload_open(b, bucket, key, upload_id, &ufd, &ui);
    if (s != BACKEND_OK)
        return s;
    close(ufd);
    *meta = ui.meta;   /* takes the headers */
    return BACKEND_OK;
}

enum backend_status posix_mpu_abort(struct posix_store *b, const char *bucket, const char *key,
                                      const char *upload_id)
{
    if (b->read_only)
        return BACKEND_READ_ONLY;
    int ufd;
    enum backend_status s = posix_mpu_upload_open(b, bucket, key, upload_id, &ufd, NULL);
    if (s != BACKEND_OK)
        return s;
    close(ufd);
    posix_mpu_upload_discard(b, bucket, upload_id);
    return BACKEND_OK;
}

/* ---- list uploads ---- */

struct uent {
    struct timespec init;
    char id[POSIX_UPLOAD_ID_LEN + 1];
    char key[];
};

static int ts_cmp(struct timespec a, struct timespec b)
{
    if (a.tv_sec != b.tv_sec)
        return a.tv_sec < b.tv_sec ? -1 : 1;
    if (a.tv_nsec != b.tv_nsec)
        return a.tv_nsec < b.tv_nsec ? -1 : 1;
    return 0;
}

static int uent_cmp(const void *va, const void *vb)
{
    const struct uent *a = va, *b = vb;
    int c = strcmp(a->key, b->key);
    if (c)
        return c;
    c = ts_cmp(a->init, b->init);
    if (c)
        return c;
    return strcmp(a->id, b->id);
}

void backend_uploads_page_free(struct backend_uploads_page *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_uploads; i++)
        free(p->uploads[i].key);
    for (size_t i = 0; i < p->n_prefixes; i++)
        free(p->prefixes[i]);
    free(p->uploads);
    free(p->prefixes);
    free(p->next_key_marker);
    memset(p, 0, sizeof *p);
}

int posix_mpu_bucket_busy(struct posix_store *b, const char *bucket)
{
    int pfd = bucket_mpu_dir(b, bucket);
    if (pfd < 0)
        return errno == ENOENT ? 0 : -1;
    DIR *d = fdopendir(pfd);
    if (!d) {
        close(pfd);
        return -1;
    }
    int busy = 0;
    struct dirent *de;
    while (!busy && (de = readdir(d)) != NULL) {
        if (!posix_upload_id_valid(de->d_name))
            continue;
        struct stat st;
        char path[300];
        snprintf(path, sizeof path, "%s/" INFO_NAME, de->d_name);
        if (fstatat(dirfd(d), path, &st, AT_SYMLINK_NOFOLLOW) == 0)
            busy = 1;
    }
    closedir(d);
    return busy;
}

void posix_mpu_bucket_forget(struct posix_store *b, const char *bucket)
{
    int pfd = bucket_mpu_dir(b, bucket);
    if (pfd < 0)
        return;
    DIR *d = fdopendir(pfd);
    if (!d) {
        close(pfd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (posix_upload_id_valid(de->d_name))
            posix_mpu_upload_remove(dirfd(d), de->d_name);   /* left by a crashed create */
    }
    closedir(d);
    unlinkat(b->mpufd, bucket, AT_REMOVEDIR);
}

enum backend_status posix_mpu_list_uploads(struct posix_store *b, const char *bucket,
                                             const struct backend_uploads_req *req,
                                             struct backend_uploads_page *out)
{
    memset(out, 0, sizeof *out);
    enum backend_status s = posix_bucket_head(b, bucket);
    if (s != BACKEND_OK)
        return s;
    unsigned max_uploads = req->max_uploads > 1000 ? 1000 : req->max_uploads;
    const char *prefix = req->prefix ? req->prefix : "";
    const char *delim = req->delimiter && *req->delimiter ? req->delimiter : NULL;
    const char *key_marker = req->key_marker, *upload_id_marker = req->upload_id_marker;
    size_t plen = strlen(prefix);
    out->uploads = calloc(max_uploads ? max_uploads : 1, sizeof *out->uploads);
    out->prefixes = calloc(max_uploads ? max_uploads : 1, sizeof *out->prefixes);
    char *last_cp = malloc(POSIX_KEY_MAX + 1);
    char *skip = malloc(POSIX_KEY_MAX + 1);
    struct uent *lb = malloc(sizeof *lb + POSIX_KEY_MAX + 1);
    struct posix_heap h = { 0 };
    DIR *d = NULL;
    size_t k = (size_t)max_uploads + 1;
    bool last_is_prefix = false;
    if (!out->uploads || !out->prefixes || !last_cp || !skip || !lb ||
        posix_heap_init(&h, k, uent_cmp, free) != 0) {
        s = BACKEND_NOMEM;
        goto out;
    }
    last_cp[0] = skip[0] = '\0';
    bool have_lb = false;
    if (key_marker && *key_marker && strlen(key_marker) <= POSIX_KEY_MAX) {
        /* (key_marker, +inf): all of key_marker's uploads are behind us,
         * unless upload_id_marker names one of them to resume after. */
        snprintf(lb->key, POSIX_KEY_MAX + 1, "%s", key_marker);
        lb->init.tv_sec = INT64_MAX;
        lb->init.tv_nsec = 0;
        lb->id[0] = '\0';
        have_lb = true;
        int pfd0 = -1, ufd = -1;
        if (upload_id_marker && posix_upload_id_valid(upload_id_marker) &&
            (pfd0 = bucket_mpu_dir(b, bucket)) >= 0 &&
            (ufd = openat(pfd0, upload_id_marker, O_DIRECTORY | O_NOFOLLOW | O_RDONLY |
                                                      O_CLOEXEC)) >= 0) {
            struct posix_upload_info ui;
            if (info_read(ufd, &ui) == 0 && strcmp(ui.key, key_marker) == 0) {
                lb->init = ui.initiated;
                memcpy(lb->id, upload_id_marker, POSIX_UPLOAD_ID_LEN + 1);
            }
            obj_meta_clear(&ui.meta);
        }
        if (ufd >= 0)
            close(ufd);
        if (pfd0 >= 0)
            close(pfd0);
        size_t cpl = posix_rollup(key_marker, strlen(key_marker), plen, delim);
        if (cpl && strncmp(key_marker, prefix, plen) == 0) {
            memcpy(last_cp, key_marker, cpl);
            last_cp[cpl] = '\0';
            memcpy(skip, last_cp, cpl + 1);
        }
    }
    if (max_uploads == 0)
        goto out;
    int pfd = bucket_mpu_dir(b, bucket);
    if (pfd < 0)
        goto out;   /* no upload ever */
    d = fdopendir(pfd);
    if (!d) {
        close(pfd);
        s = BACKEND_IO;
        goto out;
    }
    bool stop = false;
    while (!stop) {
        rewinddir(d);
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (!posix_upload_id_valid(de->d_name))
                continue;
            int ufd = openat(dirfd(d), de->d_name, O_DIRECTORY | O_NOFOLLOW | O_RDONLY |
                                                       O_CLOEXEC);
            if (ufd < 0)
                continue;
            struct posix_upload_info ui;
            int r = info_read(ufd, &ui);
            close(ufd);
            obj_meta_clear(&ui.meta);
            if (r != 0 || strncmp(ui.key, prefix, plen) != 0)
                continue;
            if (skip[0] && strncmp(ui.key, skip, strlen(skip)) == 0)
                continue;
            size_t kl = strlen(ui.key);
            struct uent *e = malloc(sizeof *e + kl + 1);
            if (!e) {
                s = BACKEND_NOMEM;
                goto out;
            }
            e->init = ui.initiated;
            memcpy(e->id, de->d_name, POSIX_UPLOAD_ID_LEN + 1);
            memcpy(e->key, ui.key, kl + 1);
            if (have_lb && uent_cmp(e, lb) <= 0) {
                free(e);
                continue;
            }
            posix_heap_push(&h, e);
        }
        posix_heap_sort(&h);
        size_t n = h.n;
        for (size_t i = 0; i < n && !stop; i++) {
            const struct uent *e = h.v[i];
            size_t kl = strlen(e->key);
            if (skip[0] && strncmp(e->key, skip, strlen(skip)) == 0)
                continue;
            size_t cpl = posix_rollup(e->key, kl, plen, delim);
            if (out->n_uploads + out->n_prefixes == max_uploads) {
                out->truncated = true;
                stop = true;
                break;
            }
            if (cpl) {
                char *cp = strndup(e->key, cpl);
                if (!cp) {
                    s = BACKEND_NOMEM;
                    goto out;
                }
                out->prefixes[out->n_prefixes++] = cp;
                memcpy(skip, cp, cpl + 1);
                last_is_prefix = true;
            } else {
                struct backend_upload *u = &out->uploads[out->n_uploads];
                u->key = strdup(e->key);
                if (!u->key) {
                    s = BACKEND_NOMEM;
                    goto out;
                }
                memcpy(u->upload_id, e->id, POSIX_UPLOAD_ID_LEN + 1);
                u->initiated = e->init;
                out->n_uploads++;
                last_is_prefix = false;
            }
            memcpy(lb, e, sizeof *e + kl + 1);
            have_lb = true;
        }
        posix_heap_clear(&h);
        if (n < k)
            break;
    }
    if (out->n_uploads + out->n_prefixes > 0) {
        if (last_is_prefix) {
            out->next_key_marker = strdup(out->prefixes[out->n_prefixes - 1]);
        } else {
            const struct backend_upload *u = &out->uploads[out->n_uploads - 1];
            out->next_key_marker = strdup(u->key);
            memcpy(out->next_upload_id_marker, u->upload_id, sizeof u->upload_id);
        }
        if (!out->next_key_marker)
            s = BACKEND_NOMEM;
    }
out:
    if (d)
        closedir(d);
    posix_heap_free(&h);
    free(lb);
    free(last_cp);
    free(skip);
    if (s != BACKEND_OK)
        backend_uploads_page_free(out);
    return s;
}
