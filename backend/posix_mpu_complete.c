/* backend/posix_mpu_complete.c - CompleteMultipartUpload on the posix store:
 * every listed part is checked (order, ETag, checksum, minimum size) before
 * a byte is copied, then the parts become a put of the object - the upload's
 * slab itself when they lie end to end in it (posix_mpu_slab.c), else
 * assembled by a copy (copy_file_range where the file system can) - and the
 * upload is removed. */
#include "posix_int.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

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

/* A checksum given in Complete must be the one stored with the part; an
 * absent one (empty name) is not checked, as in S3. */
static bool part_checksum_matches(const struct obj_meta *m, const struct backend_part *given)
{
    if (!given->checksum_name[0])
        return true;
    char name[32], value[96];
    posix_mpu_part_checksum(m, name, value);
    return strcmp(name, given->checksum_name) == 0 && strcmp(value, given->checksum) == 0;
}

/* Copies len bytes of src to offset `at` of out: copy_file_range, else
 * pread/pwrite. Asks the kernel to start writing the range back at once, so
 * that the fsync of the assembled object before the answer mostly waits for
 * writes already under way rather than starting them all. */
static enum backend_status copy_part(int out, uint64_t at, const struct posix_part_src *src,
                                     uint64_t len)
{
    int fd = src->fd;
    loff_t in = (loff_t)src->off, o = (loff_t)at;
    uint64_t left = len;
    bool use_cfr = true;
    while (left > 0 && use_cfr) {
        size_t chunk = left > (1u << 30) ? (1u << 30) : (size_t)left;
        ssize_t n = copy_file_range(fd, &in, out, &o, chunk, 0);
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
        left -= (uint64_t)n;
    }
    if (left > 0) {
        unsigned char *buf = malloc(POSIX_COPY_BUF);
        if (!buf)
            return BACKEND_NOMEM;
        enum backend_status s = BACKEND_OK;
        while (left > 0 && s == BACKEND_OK) {
            size_t want = left < POSIX_COPY_BUF ? (size_t)left : POSIX_COPY_BUF;
            ssize_t n = pread(fd, buf, want, in);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                s = BACKEND_IO;
                break;
            }
            for (ssize_t done = 0; done < n && s == BACKEND_OK;) {
                ssize_t w = pwrite(out, buf + done, (size_t)(n - done), o + done);
                if (w < 0 && errno != EINTR)
                    s = posix_write_errno_status(errno);
                else if (w == 0)
                    s = BACKEND_IO;
                else if (w > 0)
                    done += w;
            }
            in += n;
            o += n;
            left -= (uint64_t)n;
        }
        free(buf);
        if (s != BACKEND_OK)
            return s;
    }
    sync_file_range(out, (off64_t)at, (off64_t)len, SYNC_FILE_RANGE_WRITE);
    return BACKEND_OK;
}

/* Pass 2 of a Complete: the parts copied into the put, each to the offset
 * pass 1 gave it, by a few threads at once (the copy is the CPU's work, and
 * the client is waiting on it). Each part is checked again on the fd it is
 * copied from, so a part replaced meanwhile cannot slip in unnoticed. */
struct assembly {
    int ufd;                           /* the upload's directory */
    int out;                           /* the put's temp file */
    const struct backend_part *parts;
    const uint64_t *sizes, *offsets;   /* from pass 1 */
    size_t n_parts;
    atomic_size_t next;                /* the next part to take */
    atomic_int status;                 /* the first failure, else BACKEND_OK */
};

/* Opens part i of a's list, and checks that it is still the part pass 1
 * saw (ETag, checksum, size). */
static enum backend_status part_again(const struct assembly *a, size_t i,
                                      struct posix_part_src *src)
{
    struct obj_meta m;
    enum backend_status s = posix_mpu_part_open(a->ufd, a->parts[i].part_no, src, &m);
    if (s != BACKEND_OK)
        return s;
    bool ok = part_etag_matches(m.etag, a->parts[i].etag) &&
              part_checksum_matches(&m, &a->parts[i]) && m.size == a->sizes[i];
    obj_meta_clear(&m);
    if (!ok)
        close(src->fd);
    return ok ? BACKEND_OK : BACKEND_INVALID_PART;
}

static enum backend_status assemble_one(struct assembly *a, size_t i)
{
    struct posix_part_src src;
    enum backend_status s = part_again(a, i, &src);
    if (s != BACKEND_OK)
        return s;
    s = copy_part(a->out, a->offsets[i], &src, a->sizes[i]);
    close(src.fd);
    return s;
}

static void *assembler(void *arg)
{
    struct assembly *a = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&a->next, 1);
        if (i >= a->n_parts || atomic_load(&a->status) != BACKEND_OK)
            return NULL;
        enum backend_status s = assemble_one(a, i);
        int ok = BACKEND_OK;
        if (s != BACKEND_OK)
            atomic_compare_exchange_strong(&a->status, &ok, (int)s);
    }
}

/* At most this many threads copy a Complete's parts (and no more than the
 * machine has CPUs): on this 2-core VM two copiers take a 1 GiB write-back
 * Complete from 2.2 to 1.8 s, median of 4 (bench/results/writeback.md). */
#define ASSEMBLERS_MAX 4

static enum backend_status assemble(struct assembly *a)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t n = cpus > 1 ? (size_t)cpus : 1;
    if (n > ASSEMBLERS_MAX)
        n = ASSEMBLERS_MAX;
    if (n > a->n_parts)
        n = a->n_parts;
    pthread_t th[ASSEMBLERS_MAX];
    size_t started = 0;
    while (started + 1 < n && pthread_create(&th[started], NULL, assembler, a) == 0)
        started++;
    assembler(a);   /* this thread is one of them */
    for (size_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    return (enum backend_status)atomic_load(&a->status);
}

/* The way without a copy (posix_mpu_slab.c): when pass 1 found every part
 * in the upload's slab at the offset it has in the object - the last part
 * may be a file of its own (a short last part never sets the slot, and may
 * come before the others): it is copied to its place - the slab is sealed,
 * the parts are checked again (a part may have been sent again since pass
 * 1), and the slab becomes the put's file. false: copy them all. */
static bool adopt_slab(const struct assembly *a, const bool *in_slab, const uint64_t *slab_at,
                       uint64_t total, struct posix_put *p)
{
    size_t last = a->n_parts - 1;
    for (size_t i = 0; i < a->n_parts; i++) {
        if (in_slab[i] ? slab_at[i] != a->offsets[i] : i != last)
            return false;
    }
    uint64_t slot;
    int slab = posix_slab_seal(a->ufd, &slot);
    if (slab < 0)
        return false;
    /* a last part from a file goes exactly into its own slot, which no
     * other part's record points into */
    bool ok = in_slab[last] || (a->sizes[last] <= slot &&
                                a->offsets[last] == (uint64_t)(a->parts[last].part_no - 1) * slot);
    for (size_t i = 0; ok && i < a->n_parts; i++) {
        struct posix_part_src src;
        ok = part_again(a, i, &src) == BACKEND_OK;
        if (!ok)
            break;
        if (src.in_slab)
            ok = src.off == a->offsets[i];
        else   /* the last part's slot holds no part's bytes: its record is this file */
            ok = i == last && copy_part(slab, a->offsets[i], &src, a->sizes[i]) == BACKEND_OK;
        close(src.fd);
    }
    ok = ok && posix_slab_adopt(p, a->ufd, slab, total);
    close(slab);
    return ok;
}

/* Keeps the part sizes with the object (GET ?partNumber=N) as an xattr of
 * the temp file, renamed with it. A list the file system cannot keep
 * (no user xattrs, too many irregular parts) is not an error: the object
 * is complete, only its parts cannot be read one by one. */
static void keep_part_sizes(struct posix_put *p, const uint64_t *sizes, size_t n,
                            const char *bucket, const char *key)
{
    char list[POSIX_PARTS_MAX];
    size_t len = posix_parts_encode(sizes, n, list, sizeof list);
    if (len && fsetxattr(p->fd, POSIX_PARTS_XATTR, list, len, 0) == 0)
        return;
    int e = len ? errno : E2BIG;
    log_msg(LOG_LVL_WARN, "backend",
            "bucket=%s key=%s: the boundaries of its %zu parts are not kept (%s): "
            "GET ?partNumber will answer 501", bucket, key, n, strerror(e));
}

enum backend_status posix_mpu_complete(struct posix_store *b, const char *bucket, const char *key,
                                         const char *upload_id,
                                         const struct backend_part *parts, size_t n_parts,
                                         const struct obj_meta *meta,
                                         const struct backend_cond *cond, struct obj_meta *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (b->read_only)
        return BACKEND_READ_ONLY;
    struct posix_upload_info ui;
    int ufd;
    enum backend_status s = posix_mpu_upload_open(b, bucket, key, upload_id, &ufd, &ui);
    if (s == BACKEND_NO_UPLOAD)   /* sent again after it completed? */
        return posix_mpu_done_lookup(b, bucket, key, upload_id, parts, n_parts, out);
    if (s != BACKEND_OK)
        return s;
    struct posix_put *p = NULL;
    uint64_t *sizes = NULL, *offsets = NULL, *slab_at = NULL;
    bool *in_slab = NULL;
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
    sizes = malloc(3 * n_parts * sizeof *sizes);   /* sizes, offsets, where in the slab */
    in_slab = malloc(n_parts * sizeof *in_slab);
    if (!sizes || !in_slab) {
        s = BACKEND_NOMEM;
        goto out;
    }
    offsets = sizes + n_parts;
    slab_at = offsets + n_parts;
    /* Pass 1 validates everything before a byte is copied, as S3 does. */
    uint64_t total = 0;
    for (size_t i = 0; i < n_parts; i++) {
        if (parts[i].part_no < 1 || parts[i].part_no > BACKEND_MAX_PARTS) {
            s = BACKEND_INVALID_PART;
            goto out;
        }
        struct posix_part_src src;
        struct obj_meta m;
        s = posix_mpu_part_open(ufd, parts[i].part_no, &src, &m);
        if (s != BACKEND_OK)
            goto out;
        close(src.fd);
        in_slab[i] = src.in_slab;
        slab_at[i] = src.off;
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
        sizes[i] = size;
        offsets[i] = total;
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
    /* A condition that fails already fails before the parts are copied;
     * the commit checks it again, atomically. The upload stays. */
    backend_put_set_cond(&p->base, cond);
    s = posix_cond_check(p->dirfd, p->leaf, cond);
    if (s != BACKEND_OK)
        goto out;
    struct assembly asm_ = { .ufd = ufd, .out = p->fd, .parts = parts, .sizes = sizes,
                             .offsets = offsets, .n_parts = n_parts };
    atomic_init(&asm_.next, 0);
    atomic_init(&asm_.status, BACKEND_OK);
    if (!adopt_slab(&asm_, in_slab, slab_at, total, p)) {
        s = assemble(&asm_);
        if (s != BACKEND_OK)
            goto out;
    }
    p->size = total;
    keep_part_sizes(p, sizes, n_parts, bucket, key);
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
    if (s == BACKEND_OK) {
        posix_mpu_done_record(b, bucket, key, upload_id, parts, n_parts, nm.etag);
        posix_mpu_upload_discard(b, bucket, upload_id);
    }
out:
    if (p)
        posix_put_abort(p);
    EVP_MD_CTX_free(ctx);
    free(sizes);
    free(in_slab);
    obj_meta_clear(&ui.meta);
    close(ufd);
    return s;
}
