/* backend/wb_journal.c - the write-back journal: DIR/journal, an append-only
 * file of CRC32C-protected records (little-endian):
 *   record:  u32 len, u32 crc32c(payload), payload[len]
 *   payload: u8 type, u64 seq, u64 vid, u64 size, i64 mtime_sec, u32 mtime_nsec,
 *            u8 etag_len, u16 bucket_len, u16 key_len, u16 id_len,
 *            etag, bucket, key, upload id
 *   types:   PUT (an acknowledged object: its staged version and what the
 *            client was told), DEL (an acknowledged delete), DONE (seq is in
 *            the cold tier), MPU (an upload opened under vid), MPU_END (vid's
 *            upload aborted; a completed one ends with its PUT), COLD_UPLOAD
 *            (the cold tier's upload id of seq's object, in the id field).
 * Replay at open rebuilds the queue (PUT/DEL without DONE, in seq order) and
 * the open uploads, stopping at the first torn or corrupt record (a crash in
 * the middle of an append: that write was never acknowledged, its fdatasync
 * had not returned), then rewrites the file with only what is live
 * (journal.tmp, fsync, rename, fsync of DIR). */
#include "wb_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc.h"
#include "le.h"
#include "log.h"

enum { REC_PUT = 1, REC_DEL = 2, REC_DONE = 3, REC_MPU = 4, REC_MPU_END = 5,
       REC_COLD_UPLOAD = 6 };

#define FIXED 52   /* payload bytes before the strings */
#define REC_MAX (8 + FIXED + 72 + 255 + 1024 + BACKEND_UPLOAD_ID_MAX)
#define DONE_LEN (8 + FIXED)         /* a DONE record: no strings */
#define RESERVE_STEP (256u << 10)    /* the journal's preallocation grows by this */

struct jrec {
    int type;
    uint64_t seq, vid, size;
    int64_t msec;
    uint32_t mnsec;
    const char *etag, *bucket, *key, *id;   /* into the read buffer */
    size_t etag_len, bucket_len, key_len, id_len;
};

/* Encodes a record into buf (REC_MAX bytes); its length, or 0 when a
 * string is longer than its field. */
static size_t encode(unsigned char *buf, const struct jrec *j)
{
    if (j->etag_len > 72 || j->bucket_len > 255 || j->key_len > 1024 ||
        j->id_len >= BACKEND_UPLOAD_ID_MAX)
        return 0;
    unsigned char *p = buf + 8;
    p[0] = (unsigned char)j->type;
    sg_put_le64(p + 1, j->seq);
    sg_put_le64(p + 9, j->vid);
    sg_put_le64(p + 17, j->size);
    sg_put_le64(p + 25, (uint64_t)j->msec);
    sg_put_le32(p + 33, j->mnsec);
    p[37] = (unsigned char)j->etag_len;
    sg_put_le16(p + 38, (uint16_t)j->bucket_len);
    sg_put_le16(p + 40, (uint16_t)j->key_len);
    sg_put_le16(p + 42, (uint16_t)j->id_len);
    memset(p + 44, 0, FIXED - 44);
    size_t n = FIXED;
    memcpy(p + n, j->etag, j->etag_len);
    n += j->etag_len;
    memcpy(p + n, j->bucket, j->bucket_len);
    n += j->bucket_len;
    memcpy(p + n, j->key, j->key_len);
    n += j->key_len;
    memcpy(p + n, j->id, j->id_len);
    n += j->id_len;
    sg_put_le32(buf, (uint32_t)n);
    sg_put_le32(buf + 4, sg_crc32c(0, p, n));
    return n + 8;
}

/* Decodes the record at buf[0..avail): its length, or 0 when it is torn,
 * corrupt or malformed. */
static size_t decode(const unsigned char *buf, size_t avail, struct jrec *j)
{
    if (avail < 8)
        return 0;
    uint32_t n = sg_get_le32(buf);
    if (n < FIXED || n > REC_MAX - 8 || avail - 8 < n || sg_crc32c(0, buf + 8, n) != sg_get_le32(buf + 4))
        return 0;
    const unsigned char *p = buf + 8;
    j->type = p[0];
    j->seq = sg_get_le64(p + 1);
    j->vid = sg_get_le64(p + 9);
    j->size = sg_get_le64(p + 17);
    j->msec = (int64_t)sg_get_le64(p + 25);
    j->mnsec = sg_get_le32(p + 33);
    j->etag_len = p[37];
    j->bucket_len = sg_get_le16(p + 38);
    j->key_len = sg_get_le16(p + 40);
    j->id_len = sg_get_le16(p + 42);
    if (FIXED + j->etag_len + j->bucket_len + j->key_len + j->id_len != n ||
        j->etag_len >= 72 || j->id_len >= BACKEND_UPLOAD_ID_MAX)
        return 0;
    j->etag = (const char *)p + FIXED;
    j->bucket = j->etag + j->etag_len;
    j->key = j->bucket + j->bucket_len;
    j->id = j->key + j->key_len;
    return n + 8;
}

/* A full disk must refuse new writes, never the DONE record of an upload:
 * without it a restart takes the uploaded write for pending, finds its
 * staged bytes removed, and reports an acknowledged write lost. So the
 * journal keeps disk space allocated past its
 * end (fallocate KEEP_SIZE: the file's size, which replay reads to, does not
 * change) for the DONE of every pending write, and a record that adds a
 * pending write must first extend that reservation. Where the file system
 * cannot preallocate, appends go unreserved, as before. -1 (errno ENOSPC)
 * when the space is not there. */
static int reserve_locked(struct wb *w, uint64_t upto)
{
    if (!w->jprealloc || upto <= w->jreserved)
        return 0;
    uint64_t len = (upto - w->jreserved + RESERVE_STEP - 1) / RESERVE_STEP * RESERVE_STEP;
    if (fallocate(w->jfd, FALLOC_FL_KEEP_SIZE, (off_t)w->jreserved, (off_t)len) == 0) {
        w->jreserved += len;
        return 0;
    }
    if (errno == EOPNOTSUPP || errno == ENOSYS) {
        log_msg(LOG_LVL_WARN, "write-back", "the journal's file system cannot preallocate: "
                "its appends are not reserved (a full disk may fail an upload's DONE record)");
        w->jprealloc = true;
        return 0;
    }
    return -1;
}

static int append_locked(struct wb *w, const struct jrec *j, uint64_t *end)
{
    unsigned char buf[REC_MAX];
    size_t n = encode(buf, j);
    if (!n)
        return -1;
    if (j->type != REC_DONE) {   /* a DONE uses the space reserved for it */
        uint64_t pending = w->dirty_objects + (j->type == REC_PUT || j->type == REC_DEL);
        if (reserve_locked(w, w->jlen + n + pending * DONE_LEN) != 0) {
            int e = errno;
            log_msg(LOG_LVL_ERROR, "write-back", "journal append: %s", strerror(e));
            errno = e;
            return -1;
        }
    }
    size_t done = 0;
    while (done < n) {
        ssize_t k = pwrite(w->jfd, buf + done, n - done, (off_t)(w->jlen + done));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            int e = k < 0 ? errno : EIO;
            log_msg(LOG_LVL_ERROR, "write-back", "journal append: %s", strerror(e));
            /* what was written stays past jlen: the next record overwrites it */
            errno = e;
            return -1;
        }
        done += (size_t)k;
    }
    __atomic_store_n(&w->jlen, w->jlen + n, __ATOMIC_RELEASE);
    if (end)
        *end = w->jlen;
    return 0;
}

static void jrec_of(struct jrec *j, int type, const struct wb_rec *r)
{
    memset(j, 0, sizeof *j);
    j->type = type;
    j->seq = r->seq;
    j->vid = r->vid;
    j->size = r->size;
    j->msec = r->mtime.tv_sec;
    j->mnsec = (uint32_t)r->mtime.tv_nsec;
    j->etag = r->etag;
    j->etag_len = strlen(r->etag);
    j->bucket = r->bucket;
    j->bucket_len = strlen(r->bucket);
    j->key = r->key;
    j->key_len = strlen(r->key);
    j->id = "";
}

int wb_journal_put_locked(struct wb *w, const struct wb_rec *r, uint64_t *end)
{
    struct jrec j;
    jrec_of(&j, r->kind == WB_PUT ? REC_PUT : REC_DEL, r);
    return append_locked(w, &j, end);
}

int wb_journal_done_locked(struct wb *w, uint64_t seq, uint64_t *end)
{
    struct jrec j;
    memset(&j, 0, sizeof j);
    j.type = REC_DONE;
    j.seq = seq;
    j.etag = j.bucket = j.key = j.id = "";
    return append_locked(w, &j, end);
}

int wb_journal_mpu_locked(struct wb *w, const struct wb_mpu *m, bool open, uint64_t *end)
{
    struct jrec j;
    memset(&j, 0, sizeof j);
    j.type = open ? REC_MPU : REC_MPU_END;
    j.vid = m->vid;
    j.msec = m->initiated.tv_sec;
    j.mnsec = (uint32_t)m->initiated.tv_nsec;
    j.etag = "";
    j.bucket = m->bucket;
    j.bucket_len = strlen(m->bucket);
    j.key = m->key;
    j.key_len = strlen(m->key);
    j.id = m->sid;
    j.id_len = strlen(m->sid);
    return append_locked(w, &j, end);
}

int wb_journal_cold_upload_locked(struct wb *w, const struct wb_rec *r)
{
    struct jrec j;
    memset(&j, 0, sizeof j);
    j.type = REC_COLD_UPLOAD;
    j.seq = r->seq;
    j.etag = j.bucket = j.key = "";
    j.id = r->cold_upload ? r->cold_upload : "";
    j.id_len = strlen(j.id);
    return append_locked(w, &j, NULL);
}

int wb_journal_sync(struct wb *w, uint64_t upto)
{
    pthread_mutex_lock(&w->sync_mu);
    int rc = 0;
    if (w->synced < upto) {
        /* everyone appended so far rides on this sync. Not under mu: the
         * uploader compacts holding mu and then takes sync_mu, so taking mu
         * here, under sync_mu, could deadlock with it */
        uint64_t len = __atomic_load_n(&w->jlen, __ATOMIC_ACQUIRE);
        if (fdatasync(w->jfd) != 0) {
            log_msg(LOG_LVL_ERROR, "write-back", "journal fdatasync: %s", strerror(errno));
            rc = -1;
        } else {
            w->synced = len;
        }
    }
    pthread_mutex_unlock(&w->sync_mu);
    return rc;
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* Applies one replayed record to the in-memory state. */
static int replay_one(struct wb *w, const struct jrec *j)
{
    if (j->seq >= w->next_id)
        w->next_id = j->seq + 1;
    if (j->vid >= w->next_id)
        w->next_id = j->vid + 1;
    switch (j->type) {
    case REC_PUT:
    case REC_DEL: {
        struct wb_rec *r = calloc(1, sizeof *r);
        if (!r)
            return -1;
        r->kind = j->type == REC_PUT ? WB_PUT : WB_DEL;
        r->seq = j->seq;
        r->vid = j->vid;
        r->size = j->size;
        r->mtime.tv_sec = (time_t)j->msec;
        r->mtime.tv_nsec = (long)j->mnsec;
        memcpy(r->etag, j->etag, j->etag_len);
        r->bucket = dup_n(j->bucket, j->bucket_len);
        r->key = dup_n(j->key, j->key_len);
        clock_gettime(CLOCK_MONOTONIC, &r->acked);
        if (!r->bucket || !r->key) {
            wb_rec_free(r);
            return -1;
        }
        if (r->kind == WB_PUT) {   /* a completed upload ends with its object */
            for (struct wb_mpu **pp = &w->mpus; *pp; pp = &(*pp)->next) {
                if ((*pp)->vid == r->vid) {
                    struct wb_mpu *m = *pp;
                    *pp = m->next;
                    wb_mpu_free(w, m);
                    break;
                }
            }
        }
        wb_queue_locked(w, r);
        return 0;
    }
    case REC_DONE:
        for (struct wb_rec *r = w->head; r; r = r->next) {
            if (r->seq == j->seq) {
                wb_dequeue_locked(w, r);
                wb_rec_free(r);
                break;
            }
        }
        return 0;
    case REC_MPU: {
        struct wb_mpu *m = calloc(1, sizeof *m);
        if (!m)
            return -1;
        m->vid = j->vid;
        m->bucket = dup_n(j->bucket, j->bucket_len);
        m->key = dup_n(j->key, j->key_len);
        memcpy(m->sid, j->id, j->id_len);
        m->initiated.tv_sec = (time_t)j->msec;
        m->initiated.tv_nsec = (long)j->mnsec;
        if (!m->bucket || !m->key) {
            wb_mpu_free(w, m);
            return -1;
        }
        m->next = w->mpus;
        w->mpus = m;
        return 0;
    }
    case REC_COLD_UPLOAD:
        for (struct wb_rec *r = w->head; r; r = r->next) {
            if (r->seq == j->seq) {
                free(r->cold_upload);
                r->cold_upload = j->id_len ? dup_n(j->id, j->id_len) : NULL;
                /* begun with the tags of its time: a change after it is in
                 * the staged copy only (the journal does not record tags) */
                if (r->cold_upload)
                    r->tags_gen = 1;
                break;
            }
        }
        return 0;
    case REC_MPU_END:
        for (struct wb_mpu **pp = &w->mpus; *pp; pp = &(*pp)->next) {
            if ((*pp)->vid == j->vid) {
                struct wb_mpu *m = *pp;
                *pp = m->next;
                wb_mpu_free(w, m);
                break;
            }
        }
        return 0;
    default:
        return 0;   /* a record type of a later version: ignored */
    }
}

/* Reads the journal a window at a time (memory bounded by the window, not
 * by the journal: it grows until the queue empties) and replays each whole
 * record; stops at the first torn or corrupt one. */
size_t wb_replay_window = 1u << 20;

static int replay(struct wb *w, int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -1;
    uint64_t len = (uint64_t)st.st_size, file_off = 0, used = 0;
    unsigned char *buf = malloc(wb_replay_window + REC_MAX);
    if (!buf)
        return -1;
    size_t have = 0;   /* bytes in buf not yet decoded */
    int rc = 0;
    for (;;) {
        while (have < wb_replay_window + REC_MAX && file_off < len) {   /* top the window up */
            ssize_t k = pread(fd, buf + have, wb_replay_window + REC_MAX - have, (off_t)file_off);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                break;
            have += (size_t)k;
            file_off += (uint64_t)k;
        }
        size_t off = 0, n;
        struct jrec j;
        while (off < have && (n = decode(buf + off, have - off, &j)) > 0) {
            if (replay_one(w, &j) != 0) {
                rc = -1;
                break;
            }
            off += n;
        }
        used += off;
        /* a window holds more than any record: nothing whole in it means the
         * end of the file, or a torn or corrupt record */
        if (rc != 0 || off == 0)
            break;
        memmove(buf, buf + off, have - off);
        have -= off;
    }
    __atomic_store_n(&w->jlen, used, __ATOMIC_RELEASE);   /* appends overwrite a torn tail */
    if (rc == 0 && used < len)
        log_msg(LOG_LVL_WARN, "write-back", "journal: %llu bytes after the last whole record "
                "dropped (a write that was never acknowledged)",
                (unsigned long long)(len - used));
    free(buf);
    return rc;
}

int wb_journal_compact_locked(struct wb *w)
{
    int fd = openat(w->dirfd, "journal.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        log_msg(LOG_LVL_ERROR, "write-back", "journal.tmp: %s", strerror(errno));
        return -1;
    }
    int old = w->jfd;
    uint64_t old_len = w->jlen, old_reserved = w->jreserved;
    w->jfd = fd;
    w->jreserved = 0;
    __atomic_store_n(&w->jlen, 0, __ATOMIC_RELEASE);
    int rc = 0;
    for (struct wb_mpu *m = w->mpus; m && rc == 0; m = m->next)
        rc = wb_journal_mpu_locked(w, m, true, NULL);
    for (struct wb_rec *r = w->head; r && rc == 0; r = r->next) {
        rc = wb_journal_put_locked(w, r, NULL);
        if (rc == 0 && r->cold_upload)
            rc = wb_journal_cold_upload_locked(w, r);
    }
    if (rc == 0 && fsync(fd) != 0)
        rc = -1;
    if (rc == 0 && renameat(w->dirfd, "journal.tmp", w->dirfd, "journal") != 0)
        rc = -1;
    if (rc == 0 && fsync(w->dirfd) != 0)
        rc = -1;
    if (rc != 0) {
        log_msg(LOG_LVL_ERROR, "write-back", "journal compaction: %s", strerror(errno));
        close(fd);
        unlinkat(w->dirfd, "journal.tmp", 0);
        w->jfd = old;
        w->jreserved = old_reserved;
        __atomic_store_n(&w->jlen, old_len, __ATOMIC_RELEASE);
        return -1;
    }
    if (old >= 0)
        close(old);
    pthread_mutex_lock(&w->sync_mu);
    w->synced = w->jlen;
    pthread_mutex_unlock(&w->sync_mu);
    return 0;
}

int wb_journal_open(struct wb *w, const char *dir, char *err, size_t err_len)
{
    w->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int fd = w->dirfd < 0 ? -1
             : openat(w->dirfd, "journal", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (err && err_len)
            snprintf(err, err_len, "cannot open the write-back journal in %s: %s", dir,
                     strerror(errno));
        return -1;
    }
    pthread_mutex_lock(&w->mu);
    int rc = replay(w, fd);
    wb_index_queue_locked(w);
    w->jfd = fd;
    w->jprealloc = true;
    w->jreserved = w->jlen;   /* what was preallocated before is not known: count none */
    /* rewritten with what is live; on a full disk the replayed file stays
     * (its reservation is tried again at each append) */
    if (rc == 0 && wb_journal_compact_locked(w) != 0)
        log_msg(LOG_LVL_WARN, "write-back", "journal: not compacted at start (kept as it is)");
    if (rc == 0 && reserve_locked(w, w->jlen + w->dirty_objects * DONE_LEN) != 0)
        log_msg(LOG_LVL_WARN, "write-back", "journal: no room to reserve the DONE records of "
                "%llu pending writes: %s", (unsigned long long)w->dirty_objects, strerror(errno));
    pthread_mutex_unlock(&w->mu);
    if (rc != 0 && err && err_len)
        snprintf(err, err_len, "cannot replay the write-back journal in %s", dir);
    return rc;
}

void wb_journal_close(struct wb *w)
{
    if (w->jfd >= 0)
        close(w->jfd);
    if (w->dirfd >= 0)
        close(w->dirfd);
    w->jfd = w->dirfd = -1;
}
