/* backend/posix_mpu.c - multipart uploads of the posix store. An upload is
 * STATE/mpu/<bucket>/<upload-id>/ (STATE: the state directory, by default
 * ROOT/.shardgate) holding "info" (key, initiation time, headers) and one
 * file per part ("p00001", written through a temp name in the same directory
 * and renamed like objects, its MD5 and x-amz-checksum-* header in the
 * metadata xattr). Complete assembles the listed parts into a temp file in
 * the bucket's temp directory and commits it like a put. */
#include "posix_int.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define INFO_NAME "info"
#define INFO_MAX  (4 + 2 + POSIX_KEY_MAX + 12 + POSIX_META_MAX)

struct upload_info {
    char key[POSIX_KEY_MAX + 1];
    struct timespec initiated;
    struct obj_meta meta;     /* hdrs only */
};

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
static int info_read(int ufd, struct upload_info *ui)
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
    struct upload_info ui;
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
static enum backend_status upload_open(struct posix_store *b, const char *bucket, const char *key,
                                       const char *id, int *ufd, struct upload_info *ui)
{
    *ufd = -1;
    int bfd;
    enum backend_status s = posix_bucket_open(b, bucket, &bfd);
    if (s != BACKEND_OK)
        return s;
    close(bfd);
    if (!id || !posix_upload_id_valid(id))
        return BACKEND_NO_UPLOAD;
    char path[128];
    snprintf(path, sizeof path, "%s/%s", bucket, id);
    int fd = b->mpufd < 0 ? -1 : posix_open_beneath(b->mpufd, path, O_DIRECTORY | O_RDONLY, 0);
    if (fd < 0)
        return BACKEND_NO_UPLOAD;
    struct upload_info tmp;
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
                if (unlinkat(dirfd(d), de->d_name, 0) == 0 && sized)
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

static void upload_remove_path(struct posix_store *b, const char *bucket, const char *id)
{
    int pfd = bucket_mpu_dir(b, bucket);
    if (pfd < 0)
        return;
    posix_mpu_upload_remove(pfd, id);
    close(pfd);
}

enum backend_status posix_mpu_create(struct posix_store *b, const char *bucket, const char *key,
                                       const struct obj_meta *meta,
                                       char upload_id[BACKEND_UPLOAD_ID_MAX])
{
    upload_id[0] = '\0';
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

static void part_name(unsigned part_no, char out[16])
{
    snprintf(out, 16, "p%05u", part_no);
}

enum backend_status posix_mpu_part_begin(struct posix_store *b, const char *bucket,
                                           const char *key, const char *upload_id,
                                           unsigned part_no, struct posix_put **out)
{
    *out = NULL;
    if (b->read_only)
        return BACKEND_READ_ONLY;
    if (part_no < 1 || part_no > BACKEND_MAX_PARTS)
        return BACKEND_INVALID_PART;
    int ufd;
    enum backend_status s = upload_open(b, bucket, key, upload_id, &ufd, NULL);
    if (s != BACKEND_OK)
        return s;
    char pn[16];
    part_name(part_no, pn);
    return posix_put_new(b, ufd, -1, pn, true, POSIX_MAX_PUT, out);
}

enum backend_status posix_mpu_part_copy(struct posix_store *b, const char *bucket,
                                          const char *key, const char *upload_id,
                                          unsigned part_no, const char *src_bucket,
                                          const char *src_key, bool has_range,
                                          uint64_t first, uint64_t last,
                                          struct obj_meta *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    int sfd;
    struct stat st;
    enum backend_status s = posix_object_fd(b, src_bucket, src_key, &sfd, &st);
    if (s != BACKEND_OK)
        return s;
    uint64_t size = (uint64_t)st.st_size, off = 0, len = size;
    if (has_range) {
        if (first > last || last >= size) {
            close(sfd);
            return BACKEND_BAD_RANGE;
        }
        off = first;
        len = last - first + 1;
    }
    if (len > POSIX_MAX_PUT) {
        close(sfd);
        return BACKEND_TOO_LARGE;
    }
    struct posix_put *p;
    s = posix_mpu_part_begin(b, bucket, key, upload_id, part_no, &p);
    if (s != BACKEND_OK) {
        close(sfd);
        return s;
    }
    unsigned char md5[16];
    s = posix_copy_into(p, sfd, off, len, md5);
    close(sfd);
    if (s != BACKEND_OK) {
        posix_put_abort(p);
        return s;
    }
    struct obj_meta m = { 0 };
    posix_md5_to_hex(md5, m.etag);
    return posix_put_commit(p, &m, out);
}

/* Opens part `no` and reads its meta. */
static enum backend_status part_open(int ufd, unsigned no, int *fd, struct obj_meta *m)
{
    char pn[16];
    part_name(no, pn);
    *fd = openat(ufd, pn, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (*fd < 0)
        return errno == ENOENT ? BACKEND_INVALID_PART : BACKEND_IO;
    struct stat st;
    enum backend_status s = fstat(*fd, &st) == 0 && S_ISREG(st.st_mode)
                                ? posix_meta_from_fd(*fd, &st, m)
                                : BACKEND_INVALID_PART;
    if (s != BACKEND_OK) {
        close(*fd);
        *fd = -1;
    }
    return s;
}

/* The client's ETag, without the quotes some clients keep. */
static bool part_etag_matches(const char *stored, const char *given)
{
    size_t gl = strlen(given);
    if (gl >= 2 && given[0] == '"' && given[gl - 1] == '"') {
        char tmp[72];
        if (gl - 2 >= sizeof tmp)
            return false;
        memcpy(tmp, given + 1, gl - 2);
        tmp[gl - 2] = '\0';
        return posix_etag_equal(stored, tmp);
    }
    return posix_etag_equal(stored, given);
}

/* The additional checksum a part was stored with (its x-amz-checksum-*
 * header, which UploadPart puts in the part's metadata), or "" for both. */
static void part_checksum(const struct obj_meta *m, char name[32], char value[96])
{
    name[0] = value[0] = '\0';
    for (size_t i = 0; i < m->n_hdrs; i++) {
        const char *n = m->hdrs[i].name;
        if (strncmp(n, "x-amz-checksum-", 15) == 0 && strlen(n) < 32 &&
            strlen(m->hdrs[i].value) < 96) {
            strcpy(name, n);
            strcpy(value, m->hdrs[i].value);
            return;
        }
    }
}

/* A checksum given in Complete must be the one stored with the part; an
 * absent one (empty name) is not checked, as in S3. */
static bool part_checksum_matches(const struct obj_meta *m, const struct backend_part *given)
{
    if (!given->checksum_name[0])
        return true;
    char name[32], value[96];
    part_checksum(m, name, value);
    return strcmp(name, given->checksum_name) == 0 && strcmp(value, given->checksum) == 0;
}

/* Appends len bytes of fd to the put: copy_file_range, else read/write. */
static enum backend_status append_file(struct posix_put *p, int fd, uint64_t len)
{
    loff_t in = 0;
    bool use_cfr = true;
    while (len > 0 && use_cfr) {
        size_t chunk = len > (1u << 30) ? (1u << 30) : (size_t)len;
        ssize_t n = copy_file_range(fd, &in, p->fd, NULL, chunk, 0);
        if (n < 0) {
            int e = errno;
            if (e == EINTR)
                continue;
            if (e == EXDEV || e == EINVAL || e == ENOSYS || e == EOPNOTSUPP) {
                use_cfr = false;
                break;
            }
            return posix_write_errno_status(e);
        }
        if (n == 0)
            return BACKEND_IO;   /* part shrank */
        len -= (uint64_t)n;
        p->size += (uint64_t)n;
    }
    if (len == 0)
        return BACKEND_OK;
    unsigned char *buf = malloc(POSIX_COPY_BUF);
    if (!buf)
        return BACKEND_NOMEM;
    enum backend_status s = BACKEND_OK;
    while (len > 0 && s == BACKEND_OK) {
        size_t want = len < POSIX_COPY_BUF ? (size_t)len : POSIX_COPY_BUF;
        ssize_t n = pread(fd, buf, want, (off_t)in);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            s = BACKEND_IO;
            break;
        }
        s = posix_put_write(p, buf, (size_t)n);
        in += n;
        len -= (uint64_t)n;
    }
    free(buf);
    return s;
}

enum backend_status posix_mpu_complete(struct posix_store *b, const char *bucket, const char *key,
                                         const char *upload_id,
                                         const struct backend_part *parts, size_t n_parts,
                                         const struct obj_meta *meta, struct obj_meta *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (b->read_only)
        return BACKEND_READ_ONLY;
    struct upload_info ui;
    int ufd;
    enum backend_status s = upload_open(b, bucket, key, upload_id, &ufd, &ui);
    if (s != BACKEND_OK)
        return s;
    struct posix_put *p = NULL;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_md5(), NULL) != 1) {
        s = BACKEND_NOMEM;
        goto out;
    }
    if (n_parts == 0 || n_parts > BACKEND_MAX_PARTS) {
        s = BACKEND_INVALID_PART;
        goto out;
    }
    for (size_t i = 1; i < n_parts; i++) {
        if (parts[i].part_no <= parts[i - 1].part_no) {
            s = BACKEND_INVALID_PART_ORDER;
            goto out;
        }
    }
    /* Pass 1 validates everything before a byte is copied, as S3 does. */
    uint64_t total = 0;
    for (size_t i = 0; i < n_parts; i++) {
        if (parts[i].part_no < 1 || parts[i].part_no > BACKEND_MAX_PARTS) {
            s = BACKEND_INVALID_PART;
            goto out;
        }
        int fd;
        struct obj_meta m;
        s = part_open(ufd, parts[i].part_no, &fd, &m);
        if (s != BACKEND_OK)
            goto out;
        close(fd);
        unsigned char md5[16];
        bool ok = part_etag_matches(m.etag, parts[i].etag) &&
                  part_checksum_matches(&m, &parts[i]) && posix_hex_to_md5(m.etag, md5) == 0;
        uint64_t size = m.size;
        obj_meta_clear(&m);
        if (!ok) {
            s = BACKEND_INVALID_PART;
            goto out;
        }
        if (i + 1 < n_parts && size < BACKEND_MIN_PART_SIZE) {
            s = BACKEND_ENTITY_TOO_SMALL;
            goto out;
        }
        total += size;
        EVP_DigestUpdate(ctx, md5, sizeof md5);
    }
    if (total > POSIX_MAX_OBJECT) {
        s = BACKEND_TOO_LARGE;
        goto out;
    }
    s = posix_put_begin(b, bucket, key, &p);
    if (s != BACKEND_OK)
        goto out;
    p->max_size = POSIX_MAX_OBJECT;
    /* Pass 2 copies, re-checking each part on the fd it copies from, so a
     * part replaced meanwhile cannot slip in unnoticed. */
    for (size_t i = 0; i < n_parts; i++) {
        int fd;
        struct obj_meta m;
        s = part_open(ufd, parts[i].part_no, &fd, &m);
        if (s != BACKEND_OK)
            goto out;
        bool ok = part_etag_matches(m.etag, parts[i].etag) &&
                  part_checksum_matches(&m, &parts[i]);
        uint64_t size = m.size;
        obj_meta_clear(&m);
        s = ok ? append_file(p, fd, size) : BACKEND_INVALID_PART;
        close(fd);
        if (s != BACKEND_OK)
            goto out;
    }
    unsigned char fin[16];
    unsigned int fl = 0;
    EVP_DigestFinal_ex(ctx, fin, &fl);
    struct obj_meta nm = { 0 };
    char hex[33];
    posix_md5_to_hex(fin, hex);
    snprintf(nm.etag, sizeof nm.etag, "%s-%zu", hex, n_parts);
    nm.hdrs = meta ? meta->hdrs : ui.meta.hdrs;   /* borrowed */
    nm.n_hdrs = meta ? meta->n_hdrs : ui.meta.n_hdrs;
    s = posix_put_commit(p, &nm, out);
    p = NULL;
    if (s == BACKEND_OK)
        upload_remove_path(b, bucket, upload_id);
out:
    if (p)
        posix_put_abort(p);
    EVP_MD_CTX_free(ctx);
    obj_meta_clear(&ui.meta);
    close(ufd);
    return s;
}

enum backend_status posix_mpu_head(struct posix_store *b, const char *bucket, const char *key,
                                   const char *upload_id, struct obj_meta *meta)
{
    memset(meta, 0, sizeof *meta);
    struct upload_info ui;
    int ufd;
    enum backend_status s = upload_open(b, bucket, key, upload_id, &ufd, &ui);
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
    enum backend_status s = upload_open(b, bucket, key, upload_id, &ufd, NULL);
    if (s != BACKEND_OK)
        return s;
    close(ufd);
    upload_remove_path(b, bucket, upload_id);
    return BACKEND_OK;
}

/* ---- list parts ---- */

void backend_parts_page_free(struct backend_parts_page *p)
{
    if (!p)
        return;
    free(p->parts);
    memset(p, 0, sizeof *p);
}

enum backend_status posix_mpu_list_parts(struct posix_store *b, const char *bucket,
                                           const char *key, const char *upload_id,
                                           unsigned marker, unsigned max_parts,
                                           struct backend_parts_page *out)
{
    memset(out, 0, sizeof *out);
    int ufd;
    enum backend_status s = upload_open(b, bucket, key, upload_id, &ufd, NULL);
    if (s != BACKEND_OK)
        return s;
    if (max_parts > 1000)
        max_parts = 1000;
    /* Part numbers are 1..10000: a bitmap of what exists costs 1.25 KiB. */
    unsigned char seen[BACKEND_MAX_PARTS / 8 + 1] = { 0 };
    int dfd = dup(ufd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (d)
        rewinddir(d);   /* a dup shares the offset of a read fd */
    out->parts = calloc(max_parts ? max_parts : 1, sizeof *out->parts);
    if (!d || !out->parts) {
        if (!d && dfd >= 0)
            close(dfd);
        s = d ? BACKEND_NOMEM : BACKEND_IO;
        goto out;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        unsigned no;
        char extra;
        if (de->d_name[0] != 'p' || strlen(de->d_name) != 6 ||
            sscanf(de->d_name, "p%5u%c", &no, &extra) != 1)
            continue;
        if (no >= 1 && no <= BACKEND_MAX_PARTS && no > marker)
            seen[no / 8] |= (unsigned char)(1u << (no % 8));
    }
    for (unsigned no = marker + 1; no <= BACKEND_MAX_PARTS; no++) {
        if (!(seen[no / 8] & (1u << (no % 8))))
            continue;
        int fd;
        struct obj_meta m;
        if (part_open(ufd, no, &fd, &m) != BACKEND_OK)
            continue;   /* replaced or gone meanwhile */
        close(fd);
        if (out->n_parts == max_parts) {
            obj_meta_clear(&m);
            out->truncated = max_parts > 0;
            break;
        }
        struct backend_part *bp = &out->parts[out->n_parts++];
        bp->part_no = no;
        memcpy(bp->etag, m.etag, sizeof bp->etag);
        bp->size = m.size;
        bp->mtime = m.mtime;
        part_checksum(&m, bp->checksum_name, bp->checksum);
        out->next_marker = no;
        obj_meta_clear(&m);
    }
out:
    if (d)
        closedir(d);
    close(ufd);
    if (s != BACKEND_OK)
        backend_parts_page_free(out);
    return s;
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
                                             const char *prefix, const char *delimiter,
                                             const char *key_marker,
                                             const char *upload_id_marker,
                                             unsigned max_uploads,
                                             struct backend_uploads_page *out)
{
    memset(out, 0, sizeof *out);
    int bfd;
    enum backend_status s = posix_bucket_open(b, bucket, &bfd);
    if (s != BACKEND_OK)
        return s;
    close(bfd);
    if (max_uploads > 1000)
        max_uploads = 1000;
    prefix = prefix ? prefix : "";
    const char *delim = delimiter && *delimiter ? delimiter : NULL;
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
            struct upload_info ui;
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
            struct upload_info ui;
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
