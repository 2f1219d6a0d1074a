/* backend/posix_mpu_slab.c - the slab: the parts of an upload written where
 * they will lie in the object, so that CompleteMultipartUpload copies
 * nothing.
 *
 * CompleteMultipartUpload used to copy every part into a new file and fsync
 * it: the second write of every byte, 1.8 s of a 1 GiB write-back
 * checkpoint's wait on ext4, where copy_file_range is a copy and not a
 * reflink (bench/results/writeback.md). Clients upload parts of one size
 * (boto3 and s3torchconnector 8 MiB, aws-cli its chunk size) but the last,
 * so part N of an upload whose first stored part of at least 5 MiB had S
 * bytes belongs at (N-1)*S of the object. UploadPart writes it there, into the upload's
 * "slab" file, when it knows its length beforehand and it fits the slot; its
 * record "pNNNNN" is then an empty file whose xattr says where the bytes
 * are. Complete finds the listed parts end to end in the slab and links the
 * slab in as the object.
 *
 * Anything else - a part of another size, a part number uploaded again, a
 * part whose length is not announced, UploadPartCopy of an unknown length,
 * a Complete that skips part numbers - takes the plain way: the part is its
 * own file, and Complete copies (a slab part is copied from its range).
 *
 * The rules that keep it safe:
 * - a part's slot is claimed once ("cNNNNN", O_EXCL): a second upload of the
 *   same number, or one after a crash mid-write, never overwrites bytes a
 *   record points at;
 * - a part's record is committed only after the slab's fdatasync;
 * - a writer holds a shared flock on the slab while it writes; Complete
 *   takes it exclusively (without waiting: a part still being written sends
 *   it the plain way) and seals the slab before it checks the parts, so no
 *   part is written into the slab once it may be an object;
 * - the slab becomes the object only when it ends where the last part does
 *   (nothing beyond is cut off), by a hard link, so a Complete that fails at
 *   its commit leaves the upload as it was. */
#include "posix_int.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define SLAB_NAME "slab"
/* On the slab: its slot size in bytes, then " sealed" once a Complete took
 * it. */
#define SLAB_XATTR "user.shardgate.slab"
/* On a part's record: "<offset> <length>" of its bytes in the slab. */
#define SLAB_PART_XATTR "user.shardgate.slabpart"

static int tmp_name(char out[32])
{
    size_t pl = strlen(POSIX_TMP_PREFIX);
    memcpy(out, POSIX_TMP_PREFIX, pl);
    if (posix_random_chars(out + pl, 16) != 0)
        return -1;
    out[pl + 16] = '\0';
    return 0;
}

/* The upload's slab, read-write; made with slot size `slot` when there is
 * none yet (with its xattr and fsync'ed before it appears under its name,
 * so a reader never sees a slab without its slot) - but not by a part
 * smaller than S3's minimum for all parts but the last: such a part can
 * only be the last, and its size is not the others' (a 12 MiB file sent in
 * 5 MiB parts by several threads at once: its 2 MiB part may well come
 * first). -1 when there is none and it is not made. */
static int slab_open(int ufd, uint64_t slot)
{
    int fd = openat(ufd, SLAB_NAME, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0 || errno != ENOENT || slot < BACKEND_MIN_PART_SIZE)
        return fd;
    char tmp[32], v[24];
    if (tmp_name(tmp) != 0)
        return -1;
    fd = openat(ufd, tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return -1;
    int n = snprintf(v, sizeof v, "%" PRIu64, slot);
    if (fsetxattr(fd, SLAB_XATTR, v, (size_t)n, 0) == 0 && fsync(fd) == 0 &&
        renameat2(ufd, tmp, ufd, SLAB_NAME, RENAME_NOREPLACE) == 0)
        return fd;
    int e = errno;
    close(fd);
    unlinkat(ufd, tmp, 0);
    if (e == EEXIST)   /* another part made it first */
        return openat(ufd, SLAB_NAME, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    return -1;
}

/* The slab's slot size, and whether a Complete sealed it. -1 if unreadable. */
static int slab_state(int fd, uint64_t *slot, bool *sealed)
{
    char v[48];
    ssize_t n = fgetxattr(fd, SLAB_XATTR, v, sizeof v - 1);
    if (n <= 0)
        return -1;
    v[n] = '\0';
    char rest[16] = "";
    int got = sscanf(v, "%" SCNu64 " %15s", slot, rest);
    if (got < 1 || *slot == 0)
        return -1;
    *sealed = strcmp(rest, "sealed") == 0;
    return 0;
}

void posix_slab_attach(struct posix_put *p)
{
    uint64_t want = p->base.size;
    if (!p->is_part || !p->base.has_size || want == 0 || p->part_no == 0)
        return;
    int fd = slab_open(p->dirfd, want);
    if (fd < 0)
        return;
    uint64_t slot;
    bool sealed;
    if (flock(fd, LOCK_SH | LOCK_NB) != 0 || slab_state(fd, &slot, &sealed) != 0 || sealed ||
        want > slot || (uint64_t)(p->part_no - 1) * slot > POSIX_MAX_OBJECT - slot) {
        close(fd);   /* (past the largest object: that part could never lie in place) */
        return;
    }
    char claim[16];
    snprintf(claim, sizeof claim, "c%05u", p->part_no);
    int c = openat(p->dirfd, claim, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (c < 0) {   /* written before (or being written): its own file this time */
        close(fd);
        return;
    }
    close(c);
    p->slab_fd = fd;
    p->slab_off = (uint64_t)(p->part_no - 1) * slot;
    p->slab_cap = slot;
}

/* The slab cannot grow to this part's slot (EFBIG: past what the file
 * system, or RLIMIT_FSIZE, allows in one file, for a part numbered far
 * beyond the object's end): the part moves to its own file, p->fd, with
 * what it wrote so far, and goes on there. Its slot stays claimed. */
static enum backend_status leave_slab(struct posix_put *p)
{
    loff_t in = (loff_t)p->slab_off, out = 0;
    uint64_t left = p->size;
    while (left > 0) {
        ssize_t n = copy_file_range(p->slab_fd, &in, p->fd, &out, (size_t)left, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            log_msg(LOG_LVL_ERROR, "backend", "move a part out of the slab: %s",
                    n < 0 ? strerror(errno) : "short copy");
            return n < 0 ? posix_write_errno_status(errno) : BACKEND_IO;
        }
        left -= (uint64_t)n;
    }
    if (lseek(p->fd, (off_t)p->size, SEEK_SET) < 0)   /* copy_file_range kept it at 0 */
        return posix_write_errno_status(errno);
    close(p->slab_fd);
    p->slab_fd = -1;
    return BACKEND_OK;
}

enum backend_status posix_slab_write(struct posix_put *p, const void *buf, size_t len)
{
    if (len > p->slab_cap - p->size)
        return BACKEND_TOO_LARGE;   /* more than announced: it would reach the next slot */
    const unsigned char *b = buf;
    while (len > 0) {
        ssize_t n = pwrite(p->slab_fd, b, len, (off_t)(p->slab_off + p->size));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EFBIG) {
            enum backend_status s = leave_slab(p);
            int e = 0;
            if (s == BACKEND_OK)
                s = backend_spool_append(p->fd, b, len, &p->size, p->max_size, &e);
            if (s == BACKEND_IO && e)
                s = posix_write_errno_status(e);
            return s;
        }
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            enum backend_status s = posix_write_errno_status(e);
            if (s == BACKEND_IO)
                log_msg(LOG_LVL_ERROR, "backend", "write part into the slab: %s", strerror(e));
            return s;
        }
        b += n;
        len -= (size_t)n;
        p->size += (uint64_t)n;
    }
    return BACKEND_OK;
}

enum backend_status posix_slab_part_commit(struct posix_put *p)
{
    if (fdatasync(p->slab_fd) != 0) {
        int e = errno;
        log_msg(LOG_LVL_ERROR, "backend", "fdatasync slab: %s", strerror(e));
        return posix_write_errno_status(e);
    }
    char v[48];
    int n = snprintf(v, sizeof v, "%" PRIu64 " %" PRIu64, p->slab_off, p->size);
    if (fsetxattr(p->fd, SLAB_PART_XATTR, v, (size_t)n, 0) != 0) {
        int e = errno;
        log_msg(LOG_LVL_ERROR, "backend", "part record: %s", strerror(e));
        return posix_write_errno_status(e);
    }
    return BACKEND_OK;
}

enum backend_status posix_slab_part_locate(int ufd, struct posix_part_src *src, uint64_t *size)
{
    char v[48];
    ssize_t n = fgetxattr(src->fd, SLAB_PART_XATTR, v, sizeof v - 1);
    if (n < 0)
        return errno == ENODATA || errno == ENOTSUP ? BACKEND_OK : BACKEND_IO;
    v[n] = '\0';
    uint64_t off, len;
    if (sscanf(v, "%" SCNu64 " %" SCNu64, &off, &len) != 2)
        return BACKEND_IO;
    int fd = openat(ufd, SLAB_NAME, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || off + len > (uint64_t)st.st_size) {
        if (fd >= 0)
            close(fd);
        return BACKEND_IO;   /* a record without its bytes */
    }
    close(src->fd);
    src->fd = fd;
    src->off = off;
    src->in_slab = true;
    *size = len;
    return BACKEND_OK;
}

int posix_slab_seal(int ufd, uint64_t *slot_out)
{
    int fd = openat(ufd, SLAB_NAME, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    uint64_t slot;
    bool sealed;
    char v[48];
    if (flock(fd, LOCK_EX | LOCK_NB) != 0 || slab_state(fd, &slot, &sealed) != 0) {
        close(fd);
        return -1;
    }
    int n = snprintf(v, sizeof v, "%" PRIu64 " sealed", slot);
    if (!sealed && fsetxattr(fd, SLAB_XATTR, v, (size_t)n, 0) != 0) {
        close(fd);
        return -1;
    }
    *slot_out = slot;
    return fd;
}

bool posix_slab_adopt(struct posix_put *p, int ufd, int slabfd, uint64_t total)
{
    struct stat st;
    char tmp[32];
    if (fstat(slabfd, &st) != 0 || (uint64_t)st.st_size != total || tmp_name(tmp) != 0)
        return false;
    /* A second name for the slab beside the put's temp file, then over it:
     * the put commits the slab as it would have committed the copy. */
    if (linkat(ufd, SLAB_NAME, p->tmpdirfd, tmp, 0) != 0)
        return false;   /* e.g. EXDEV: the state directory is on another file system */
    int fd = openat(p->tmpdirfd, tmp, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    struct stat lst;
    if (fd < 0 || fstat(fd, &lst) != 0 || lst.st_ino != st.st_ino || lst.st_dev != st.st_dev ||
        renameat(p->tmpdirfd, tmp, p->tmpdirfd, p->tmp) != 0) {
        if (fd >= 0)
            close(fd);
        unlinkat(p->tmpdirfd, tmp, 0);
        return false;
    }
    close(p->fd);
    p->fd = fd;
    p->size = total;
    return true;
}
