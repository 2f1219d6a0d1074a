/* cache/journal.c - persistence of the cache index: a snapshot (index.snap) plus
 * journals (journal.<gen>) of CRC32C-protected records, replay at open (stopping
 * at, and truncating, the first torn or corrupt record), group fsync and atomic
 * compaction.
 *
 * Files under the cache directory, all little-endian:
 *   header (32 bytes): magic[8] "SGIDXSNP" or "SGIDXJNL", u32 version, u32 0,
 *                      u64 gen, u32 crc32c(first 24 bytes), u32 0
 *   record: u32 len, u32 crc32c(len bytes + payload), payload[len]
 *   payload: u8 type, then
 *     PUBLISH: u64 id, u64 size, i64 mtime_sec, u32 mtime_nsec, i64 validated_at,
 *              u64 stamp, u8 etag_len, u8 blen, u16 klen, etag, bucket, key
 *     REMOVE:  u64 id
 *     EPOCH:   u32 epoch (one per open; ids carry it)
 *     END:     u64 count (last record of a snapshot)
 * A snapshot of gen g holds everything journaled in journals < g; load replays the
 * journals >= g in order. Compaction: create journal.<g+1> and switch appends to it,
 * then write index.snap.tmp (gen g+1), fsync, rename over index.snap, fsync the
 * directory, unlink journal.<g>. A crash at any point leaves either the old snapshot
 * with journals g and g+1, or the new one with journal g+1 (g is then ignored):
 * both load to the same index. Replaying a record twice is harmless (PUBLISH of a
 * known id updates it, REMOVE of an unknown id is ignored). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cidx_int.h"
#include "crc.h"
#include "le.h"
#include "log.h"

#define HDR_LEN 32
#define VERSION 1
#define SNAP_NAME "index.snap"
#define SNAP_TMP "index.snap.tmp"

enum { REC_PUBLISH = 1, REC_REMOVE = 2, REC_EPOCH = 3, REC_END = 4 };

static const char MAGIC_SNAP[8] = {'S', 'G', 'I', 'D', 'X', 'S', 'N', 'P'};
static const char MAGIC_JNL[8] = {'S', 'G', 'I', 'D', 'X', 'J', 'N', 'L'};

uint64_t cidx_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Frames payload already at buf+8 of length plen; returns the record length. */
static size_t rec_frame(unsigned char *buf, size_t plen)
{
    sg_put_le32(buf, (uint32_t)plen);
    uint32_t crc = sg_crc32c(0, buf, 4);
    sg_put_le32(buf + 4, sg_crc32c(crc, buf + 8, plen));
    return plen + 8;
}

size_t cidx_rec_publish(unsigned char *buf, const struct cidx_ent *e)
{
    char etag[CIDX_ETAG_MAX];
    size_t el = cidx_ent_etag(e, etag);
    unsigned char *p = buf + 8;
    p[0] = REC_PUBLISH;
    sg_put_le64(p + 1, e->id);
    sg_put_le64(p + 9, e->size);
    sg_put_le64(p + 17, (uint64_t)e->mtime_sec);
    sg_put_le32(p + 25, e->mtime_nsec);
    sg_put_le64(p + 29, (uint64_t)e->validated_at);
    sg_put_le64(p + 37, e->stamp);
    p[45] = (unsigned char)el;
    p[46] = e->blen;
    sg_put_le16(p + 47, e->klen);
    memcpy(p + 49, etag, el);
    memcpy(p + 49 + el, e->kb, (size_t)e->blen + e->klen);
    return rec_frame(buf, 49 + el + e->blen + e->klen);
}

size_t cidx_rec_remove(unsigned char *buf, uint64_t id)
{
    buf[8] = REC_REMOVE;
    sg_put_le64(buf + 9, id);
    return rec_frame(buf, 9);
}

static size_t rec_epoch(unsigned char *buf, uint32_t epoch)
{
    buf[8] = REC_EPOCH;
    sg_put_le32(buf + 9, epoch);
    return rec_frame(buf, 5);
}

static size_t rec_end(unsigned char *buf, uint64_t count)
{
    buf[8] = REC_END;
    sg_put_le64(buf + 9, count);
    return rec_frame(buf, 9);
}

static void hdr_make(unsigned char *h, const char magic[8], uint64_t gen)
{
    memset(h, 0, HDR_LEN);
    memcpy(h, magic, 8);
    sg_put_le32(h + 8, VERSION);
    sg_put_le64(h + 16, gen);
    sg_put_le32(h + 24, sg_crc32c(0, h, 24));
}

/* 0 if h is a valid header of that kind (gen to *gen), -1 otherwise. */
static int hdr_check(const unsigned char *h, size_t len, const char magic[8], uint64_t *gen)
{
    if (len < HDR_LEN || memcmp(h, magic, 8) != 0)
        return -1;
    if (sg_get_le32(h + 24) != sg_crc32c(0, h, 24))
        return -1;
    if (sg_get_le32(h + 8) != VERSION) {
        log_msg(LOG_LVL_ERROR, "cache", "index file version %" PRIu32 " not supported",
                sg_get_le32(h + 8));
        return -1;
    }
    *gen = sg_get_le64(h + 16);
    return 0;
}

static int write_full(int fd, const void *buf, size_t len, uint64_t off)
{
    const unsigned char *p = buf;
    while (len > 0) {
        ssize_t w = pwrite(fd, p, len, (off_t)off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

struct replay {
    struct cidx *x;
    uint32_t max_epoch;
    uint64_t records;
    bool end_seen;
};

/* Applies the records in buf[0..len). Returns the offset of the first record that
 * is torn or corrupt (len when all are good). */
static size_t replay_buf(struct replay *rp, const unsigned char *buf, size_t len)
{
    size_t off = 0;
    while (off < len) {
        if (len - off < 8)
            return off;
        uint32_t plen = sg_get_le32(buf + off);
        if (plen == 0 || plen > CIDX_REC_MAX || plen > len - off - 8)
            return off;
        uint32_t crc = sg_crc32c(sg_crc32c(0, buf + off, 4), buf + off + 8, plen);
        if (crc != sg_get_le32(buf + off + 4))
            return off;
        const unsigned char *p = buf + off + 8;
        switch (p[0]) {
        case REC_PUBLISH: {
            if (plen < 49)
                return off;
            struct cidx_rec r = {
                .id = sg_get_le64(p + 1),
                .size = sg_get_le64(p + 9),
                .mtime_sec = (int64_t)sg_get_le64(p + 17),
                .mtime_nsec = sg_get_le32(p + 25),
                .validated_at = (int64_t)sg_get_le64(p + 29),
                .stamp = sg_get_le64(p + 37),
                .etag_len = p[45],
                .blen = p[46],
                .klen = sg_get_le16(p + 47),
            };
            if (49 + r.etag_len + r.blen + r.klen != plen || r.etag_len >= CIDX_ETAG_MAX ||
                r.blen == 0 || r.klen == 0 || r.klen > CIDX_KEY_MAX)
                return off;
            r.etag = (const char *)p + 49;
            r.bucket = r.etag + r.etag_len;
            r.key = r.bucket + r.blen;
            if (cidx_id_epoch(r.id) > rp->max_epoch)
                rp->max_epoch = cidx_id_epoch(r.id);
            cidx_apply_publish(rp->x, &r);
            break;
        }
        case REC_REMOVE:
            if (plen != 9)
                return off;
            cidx_apply_remove(rp->x, sg_get_le64(p + 1));
            break;
        case REC_EPOCH:
            if (plen != 5)
                return off;
            if (sg_get_le32(p + 1) > rp->max_epoch)
                rp->max_epoch = sg_get_le32(p + 1);
            break;
        case REC_END:
            if (plen != 9)
                return off;
            rp->end_seen = true;
            return off + 8 + plen; /* nothing after END counts */
        default:
            return off;
        }
        rp->records++;
        off += 8 + plen;
    }
    return off;
}

/* Maps a whole file read-only; *len 0 and NULL for an empty file. */
static int map_file(int fd, const unsigned char **map, size_t *len)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -1;
    *len = (size_t)st.st_size;
    *map = NULL;
    if (*len == 0)
        return 0;
    void *m = mmap(NULL, *len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (m == MAP_FAILED)
        return -1;
    madvise(m, *len, MADV_SEQUENTIAL);
    *map = m;
    return 0;
}

/* Loads index.snap; *gen is its gen (0 if absent). */
static enum cidx_status load_snapshot(struct cidx *x, struct replay *rp, uint64_t *gen)
{
    *gen = 0;
    int fd = openat(x->dirfd, SNAP_NAME, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return CIDX_OK;
        log_msg(LOG_LVL_ERROR, "cache", "open %s/%s: %s", x->dir, SNAP_NAME, strerror(errno));
        return CIDX_IO;
    }
    const unsigned char *m;
    size_t len;
    if (map_file(fd, &m, &len) != 0) {
        log_msg(LOG_LVL_ERROR, "cache", "read %s/%s: %s", x->dir, SNAP_NAME, strerror(errno));
        close(fd);
        return CIDX_IO;
    }
    close(fd);
    if (hdr_check(m, len, MAGIC_SNAP, gen) != 0) {
        /* Written to a temp name and renamed, so this is damage, not a torn write:
         * start empty; the journals may still hold recent entries and the sweep
         * removes the orphaned files. */
        log_msg(LOG_LVL_ERROR, "cache", "%s/%s: bad header, ignoring the snapshot", x->dir,
                SNAP_NAME);
        *gen = 0;
    } else {
        size_t end = replay_buf(rp, m + HDR_LEN, len - HDR_LEN);
        if (!rp->end_seen)
            log_msg(LOG_LVL_ERROR, "cache",
                    "%s/%s: corrupt record at offset %zu, entries after it are lost", x->dir,
                    SNAP_NAME, end + HDR_LEN);
    }
    x->j.snap_bytes = len;
    if (m != NULL)
        munmap((void *)m, len);
    return CIDX_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Gens of the journal.<16 hex> files, sorted; also removes a stale SNAP_TMP. */
static int list_journals(struct cidx *x, uint64_t **gens, size_t *n)
{
    int fd = openat(x->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    size_t cap = 8;
    *n = 0;
    *gens = malloc(cap * sizeof **gens);
    struct dirent *de;
    while (*gens != NULL && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, SNAP_TMP) == 0) {
            unlinkat(x->dirfd, SNAP_TMP, 0);
            continue;
        }
        char *end;
        if (strncmp(de->d_name, "journal.", 8) != 0 || strlen(de->d_name) != 24)
            continue;
        uint64_t g = strtoull(de->d_name + 8, &end, 16);
        if (*end != '\0')
            continue;
        if (*n == cap) {
            cap *= 2;
            uint64_t *ng = realloc(*gens, cap * sizeof *ng);
            if (ng == NULL) {
                free(*gens);
                *gens = NULL;
                break;
            }
            *gens = ng;
        }
        (*gens)[(*n)++] = g;
    }
    closedir(d);
    if (*gens == NULL)
        return -1;
    qsort(*gens, *n, sizeof **gens, cmp_u64);
    return 0;
}

static void jnl_name(char *buf, size_t len, uint64_t gen)
{
    snprintf(buf, len, "journal.%016" PRIx64, gen);
}

/* Creates journal.<gen> with its header, durable (file and directory). */
static int jnl_create(struct cidx *x, uint64_t gen)
{
    char name[32];
    jnl_name(name, sizeof name, gen);
    int fd = openat(x->dirfd, name, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) {
        log_msg(LOG_LVL_ERROR, "cache", "create %s/%s: %s", x->dir, name, strerror(errno));
        return -1;
    }
    unsigned char h[HDR_LEN];
    hdr_make(h, MAGIC_JNL, gen);
    if (write_full(fd, h, HDR_LEN, 0) != 0 || fdatasync(fd) != 0 || fsync(x->dirfd) != 0) {
        log_msg(LOG_LVL_ERROR, "cache", "write %s/%s: %s", x->dir, name, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Replays journal.<gen>. Returns its fd (opened for writing) positioned by *end,
 * and *torn true when a bad record was found (the file is truncated there). */
static int jnl_replay(struct cidx *x, struct replay *rp, uint64_t gen, uint64_t *end, bool *torn)
{
    char name[32];
    jnl_name(name, sizeof name, gen);
    *torn = false;
    int fd = openat(x->dirfd, name, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        log_msg(LOG_LVL_ERROR, "cache", "open %s/%s: %s", x->dir, name, strerror(errno));
        return -1;
    }
    const unsigned char *m;
    size_t len;
    if (map_file(fd, &m, &len) != 0) {
        log_msg(LOG_LVL_ERROR, "cache", "read %s/%s: %s", x->dir, name, strerror(errno));
        close(fd);
        return -1;
    }
    uint64_t hgen;
    if (hdr_check(m, len, MAGIC_JNL, &hgen) != 0 || hgen != gen) {
        /* Torn at creation (header written, fsync not reached): nothing in it. */
        log_msg(LOG_LVL_WARN, "cache", "%s/%s: bad header, starting it empty", x->dir, name);
        unsigned char h[HDR_LEN];
        hdr_make(h, MAGIC_JNL, gen);
        if (m != NULL)
            munmap((void *)m, len);
        if (ftruncate(fd, 0) != 0 || write_full(fd, h, HDR_LEN, 0) != 0 || fdatasync(fd) != 0) {
            log_msg(LOG_LVL_ERROR, "cache", "rewrite %s/%s: %s", x->dir, name, strerror(errno));
            close(fd);
            return -1;
        }
        *torn = len > 0;
        *end = HDR_LEN;
        return fd;
    }
    size_t good = HDR_LEN + replay_buf(rp, m + HDR_LEN, len - HDR_LEN);
    munmap((void *)m, len);
    if (good < len) {
        log_msg(LOG_LVL_WARN, "cache",
                "%s/%s: torn or corrupt record at offset %zu of %zu, truncating there",
                x->dir, name, good, len);
        if (ftruncate(fd, (off_t)good) != 0 || fdatasync(fd) != 0) {
            log_msg(LOG_LVL_ERROR, "cache", "truncate %s/%s: %s", x->dir, name,
                    strerror(errno));
            close(fd);
            return -1;
        }
        *torn = true;
    }
    *end = good;
    return fd;
}

enum cidx_status cidx_jnl_load(struct cidx *x)
{
    struct replay rp = {.x = x};
    uint64_t snap_gen;
    enum cidx_status st = load_snapshot(x, &rp, &snap_gen);
    if (st != CIDX_OK)
        return st;
    uint64_t *gens;
    size_t n;
    if (list_journals(x, &gens, &n) != 0) {
        log_msg(LOG_LVL_ERROR, "cache", "list %s: %s", x->dir, strerror(errno));
        return CIDX_IO;
    }
    int fd = -1;
    uint64_t gen = snap_gen, end = HDR_LEN;
    bool stopped = false;
    char name[32];
    for (size_t i = 0; i < n; i++) {
        jnl_name(name, sizeof name, gens[i]);
        if (gens[i] < snap_gen || stopped) {
            /* < snap_gen: covered by the snapshot. After a torn record: a later
             * journal cannot be applied past a gap. */
            if (stopped)
                log_msg(LOG_LVL_WARN, "cache", "%s/%s: after a torn journal, dropped", x->dir,
                        name);
            unlinkat(x->dirfd, name, 0);
            continue;
        }
        if (fd >= 0)
            close(fd);
        bool torn;
        fd = jnl_replay(x, &rp, gens[i], &end, &torn);
        if (fd < 0) {
            free(gens);
            return CIDX_IO;
        }
        gen = gens[i];
        stopped = torn;
    }
    free(gens);
    if (fd < 0) {
        fd = jnl_create(x, gen);
        if (fd < 0)
            return CIDX_IO;
        end = HDR_LEN;
    }
    x->j.fd = fd;
    x->j.gen = gen;
    x->j.off = end;
    if (rp.max_epoch >= CIDX_EPOCH_MAX) {
        log_msg(LOG_LVL_ERROR, "cache", "%s: index epoch space exhausted", x->dir);
        return CIDX_IO;
    }
    x->epoch = rp.max_epoch + 1;
    /* The new epoch is durable before any id of it is handed out, so no id (and no
     * data file name) is ever used twice. */
    unsigned char rec[16];
    size_t rl = rec_epoch(rec, x->epoch);
    if (write_full(fd, rec, rl, x->j.off) != 0 || fdatasync(fd) != 0) {
        log_msg(LOG_LVL_ERROR, "cache", "write %s journal: %s", x->dir, strerror(errno));
        return CIDX_IO;
    }
    x->j.off += rl;
    x->j.last_sync_ms = cidx_now_ms();
    return CIDX_OK;
}

enum cidx_status cidx_jnl_append(struct cidx *x, const unsigned char *rec, size_t len)
{
    enum cidx_status st = CIDX_OK;
    pthread_mutex_lock(&x->j.mu);
    if (x->j.failed) {
        st = CIDX_IO;
    } else if (write_full(x->j.fd, rec, len, x->j.off) != 0) {
        int e = errno;
        log_msg(LOG_LVL_ERROR, "cache", "append to %s journal: %s", x->dir, strerror(e));
        /* Cut a partial record off so later appends stay readable; if even that
         * fails, stop journaling (replay would stop at the tear anyway). */
        if (ftruncate(x->j.fd, (off_t)x->j.off) != 0)
            x->j.failed = true;
        st = CIDX_IO;
    } else {
        x->j.off += len;
        x->j.unsynced++;
        if (x->j.unsynced >= x->opts.fsync_records ||
            (x->j.off > 2 * x->j.snap_bytes && x->j.off > x->opts.compact_min_bytes))
            pthread_cond_signal(&x->cond);
    }
    pthread_mutex_unlock(&x->j.mu);
    return st;
}

enum cidx_status cidx_jnl_sync(struct cidx *x)
{
    enum cidx_status st = CIDX_OK;
    pthread_mutex_lock(&x->compact_mu);
    pthread_mutex_lock(&x->j.mu);
    int fd = x->j.fd;
    uint64_t n = x->j.unsynced;
    pthread_mutex_unlock(&x->j.mu);
    if (n > 0) {
        /* Outside j.mu: appends go on while the disk flushes; compact_mu keeps
         * the fd open. */
        if (fdatasync(fd) != 0) {
            log_msg(LOG_LVL_ERROR, "cache", "fdatasync %s journal: %s", x->dir, strerror(errno));
            st = CIDX_IO;
        } else {
            pthread_mutex_lock(&x->j.mu);
            x->j.unsynced -= n;
            pthread_mutex_unlock(&x->j.mu);
        }
    }
    pthread_mutex_lock(&x->j.mu);
    x->j.last_sync_ms = cidx_now_ms();
    pthread_mutex_unlock(&x->j.mu);
    pthread_mutex_unlock(&x->compact_mu);
    return st;
}

enum cidx_status cidx_jnl_compact(struct cidx *x)
{
    enum cidx_status st = CIDX_IO;
    unsigned char *buf = NULL;
    size_t blen = 0, bcap = 0;
    int sfd = -1;
    pthread_mutex_lock(&x->compact_mu);
    uint64_t newgen = x->j.gen + 1;
    int nfd = jnl_create(x, newgen);
    if (nfd < 0)
        goto out;
    pthread_mutex_lock(&x->j.mu);
    int ofd = x->j.fd;
    uint64_t ogen = x->j.gen;
    x->j.fd = nfd;
    x->j.gen = newgen;
    x->j.off = HDR_LEN;
    x->j.unsynced = 0;
    pthread_mutex_unlock(&x->j.mu);
    /* The old journal must be durable until the new snapshot is: a crash before the
     * rename replays it. */
    if (fdatasync(ofd) != 0)
        log_msg(LOG_LVL_ERROR, "cache", "fdatasync %s old journal: %s", x->dir, strerror(errno));
    close(ofd);

    sfd = openat(x->dirfd, SNAP_TMP, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (sfd < 0) {
        log_msg(LOG_LVL_ERROR, "cache", "create %s/%s: %s", x->dir, SNAP_TMP, strerror(errno));
        goto out;
    }
    unsigned char h[HDR_LEN];
    hdr_make(h, MAGIC_SNAP, newgen);
    uint64_t off = 0, count = 0;
    if (write_full(sfd, h, HDR_LEN, off) != 0)
        goto werr;
    off += HDR_LEN;
    for (unsigned s = 0; s < CIDX_NSHARD; s++) {
        blen = 0;
        long c = cidx_shard_serialize(x, s, &buf, &blen, &bcap);
        if (c < 0) {
            log_msg(LOG_LVL_ERROR, "cache", "snapshot of %s: out of memory", x->dir);
            goto out;
        }
        count += (uint64_t)c;
        if (blen > 0 && write_full(sfd, buf, blen, off) != 0)
            goto werr;
        off += blen;
    }
    unsigned char tail[32];
    size_t tl = rec_epoch(tail, x->epoch);
    tl += rec_end(tail + tl, count);
    if (write_full(sfd, tail, tl, off) != 0 || fdatasync(sfd) != 0)
        goto werr;
    off += tl;
    close(sfd);
    sfd = -1;
    if (renameat(x->dirfd, SNAP_TMP, x->dirfd, SNAP_NAME) != 0 || fsync(x->dirfd) != 0) {
        log_msg(LOG_LVL_ERROR, "cache", "rename %s/%s: %s", x->dir, SNAP_TMP, strerror(errno));
        goto out;
    }
    char name[32];
    jnl_name(name, sizeof name, ogen);
    unlinkat(x->dirfd, name, 0);
    pthread_mutex_lock(&x->j.mu);
    x->j.snap_bytes = off;
    pthread_mutex_unlock(&x->j.mu);
    log_msg(LOG_LVL_DEBUG, "cache", "%s: snapshot gen %" PRIu64 ", %" PRIu64 " entries, %" PRIu64
            " bytes", x->dir, newgen, count, off);
    st = CIDX_OK;
    goto out;
werr:
    log_msg(LOG_LVL_ERROR, "cache", "write %s/%s: %s", x->dir, SNAP_TMP, strerror(errno));
out:
    if (sfd >= 0)
        close(sfd);
    free(buf);
    pthread_mutex_unlock(&x->compact_mu);
    return st;
}

enum cidx_status cidx_jnl_restart(struct cidx *x)
{
    uint64_t gen = x->j.gen + 1;   /* changes only under compact_mu, which we hold */
    int fd = jnl_create(x, gen);
    if (fd < 0)
        return CIDX_IO;
    /* The epoch goes on: ids of this run stay unique, and the next open starts a
     * later one. */
    unsigned char rec[16];
    size_t rl = rec_epoch(rec, x->epoch);
    if (write_full(fd, rec, rl, HDR_LEN) != 0 || fdatasync(fd) != 0) {
        int e = errno;
        log_msg(LOG_LVL_ERROR, "cache", "write %s journal: %s", x->dir, strerror(e));
        close(fd);
        errno = e;
        return CIDX_IO;
    }
    pthread_mutex_lock(&x->j.mu);
    int ofd = x->j.fd;
    x->j.fd = fd;
    x->j.gen = gen;
    x->j.off = HDR_LEN + rl;
    x->j.unsynced = 0;
    x->j.snap_bytes = 0;
    x->j.failed = false;
    x->j.last_sync_ms = cidx_now_ms();
    pthread_mutex_unlock(&x->j.mu);
    if (ofd >= 0)
        close(ofd);
    return CIDX_OK;
}
