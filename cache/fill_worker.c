/* cache/fill_worker.c - the fill worker: one thread runs one fill at a
 * time from start to end, from the cold tier through the I/O engine into
 * the data file, then verifies, syncs and publishes it to the index.
 *
 * A fill is run by one worker thread from start to end: it opens the object
 * on the cold tier, writes the header block and then the bytes to the data
 * file through its I/O engine (engine_int.h: its own io_uring, where four
 * 1 MiB buffers let one be read from the cold tier while the others are
 * being written; or pwrite where io_uring is blocked). Each piece is shown
 * to the readers as soon as it is read (a window: they copy it from the
 * buffer), and `filled` advances in order as writes complete; a reader
 * behind the windows reads the file. Only a
 * complete, verified and fdatasync'ed file is published to the index: the
 * sync and the publish (cache_fill_finish) run on a publisher thread
 * (publish.c) while the worker takes its next fill.
 *
 * Why one worker per fill rather than one tier thread driving every fill
 * from a single event loop: the cold tier's interface is a blocking reader
 * (backend_obj_read), and a worker per fill keeps each fill a straight line
 * of code; concurrency is bounded by the number of workers. The io_uring
 * ring per worker keeps writes asynchronous so reading the next buffer from
 * the cold tier overlaps writing the last one. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cache.h"
#include "cache_index.h"
#include "cache_int.h"
#include "dirwatch_int.h"
#include "engine_int.h"
#include "log.h"

enum {
    FILL_BUF = 1024 * 1024,      /* bytes per cold-tier read and cache write */
    FILL_BUFS = CACHE_FILL_BUFS, /* read one while the others are written, and are
                                    windows for the readers (fill_window) */
    DIO_ALIGN = 4096,            /* offsets, lengths and buffers of O_DIRECT writes */
};

/* ---- the fill worker ---- */

/* One write in flight: owned by the engine (the kernel) from submit until
 * reaped. */
struct fill_slot {
    uint64_t off;                /* file offset of the write */
    size_t len, done;            /* bytes to write, bytes written */
    size_t obj;                  /* of len, the object's (an O_DIRECT write's last
                                    block is padded with zeros, cut off after) */
    bool complete;
    unsigned buf;                /* which of io->buf */
};

struct fill_io {
    struct cache_eng *eng;
    unsigned char *buf[FILL_BUFS];
    struct fill_slot slot[FILL_BUFS];
    unsigned head, count;        /* in-order FIFO of slots not yet fully written */
    unsigned sqes;               /* submitted writes whose completion is not reaped:
                                    the buffers are the engine's until it is 0 */
};

/* Tag of the header block's write (slots are tagged with their index). */
#define HDR_TAG UINT64_MAX

/* Writes len bytes at off and waits (the header block; nothing else is in
 * flight). 0 or a negative errno. */
static int write_sync(struct fill_io *io, int fd, const void *buf, size_t len, uint64_t off)
{
    size_t done = 0;
    while (done < len) {
        int rc = cache_eng_write(io->eng, fd, (const char *)buf + done, len - done,
                                 off + done, HDR_TAG);
        if (rc < 0)
            return rc;
        struct cache_eng_done d;
        if ((rc = cache_eng_wait(io->eng, &d)) < 0)
            return rc;
        if (d.res == -EAGAIN || d.res == -EINTR)
            continue;
        if (d.res <= 0)
            return d.res < 0 ? d.res : -EIO;
        done += (size_t)d.res;
    }
    return 0;
}

static int submit_write(struct fill_io *io, int fd, unsigned s)
{
    int rc = cache_eng_write(io->eng, fd, io->buf[io->slot[s].buf] + io->slot[s].done,
                             io->slot[s].len - io->slot[s].done,
                             io->slot[s].off + io->slot[s].done, s);
    if (rc < 0)
        return rc;
    io->sqes++;
    return 0;
}

/* Waits for every submitted write, whatever happened (before a failed
 * fill's buffers are reused or its file closed). */
static void drain(struct fill_io *io)
{
    while (io->sqes) {
        struct cache_eng_done d;
        if (cache_eng_wait(io->eng, &d) < 0)
            break;   /* the engine is broken: nothing more will complete */
        io->sqes--;
    }
    io->head = io->count = 0;
}

/* Waits for one completion; advances `filled` over the writes completed in
 * order and wakes their readers. 0, or a negative errno. */
static int reap_one(struct cache *c, struct fill *f, struct fill_io *io, int fd)
{
    struct cache_eng_done d;
    int rc = cache_eng_wait(io->eng, &d);
    if (rc < 0)
        return rc;
    unsigned s = (unsigned)d.tag;
    int res = d.res;
    io->sqes--;
    if (res == -EAGAIN || res == -EINTR)
        return submit_write(io, fd, s);
    if (res < 0)
        return res;
    io->slot[s].done += (size_t)res;
    if (io->slot[s].done < io->slot[s].len)   /* short write: the rest */
        return res == 0 ? -EIO : submit_write(io, fd, s);
    io->slot[s].complete = true;
    uint64_t advance = 0;
    while (io->count && io->slot[io->head].complete) {
        advance += io->slot[io->head].obj;
        io->slot[io->head].complete = false;
        io->head = (io->head + 1) % FILL_BUFS;
        io->count--;
    }
    if (advance) {
        pthread_mutex_lock(&f->mu);
        f->filled += advance;
        cache_waiters_wake(c, f);
        pthread_mutex_unlock(&f->mu);
    }
    return 0;
}

/* ---- windows: the readers copy a piece from its buffer (fill_window) ---- */

/* Shows the piece of len bytes at object offset off, just read into p, to
 * f's readers, and wakes those waiting for it. */
static void window_open(struct cache *c, struct fill *f, const unsigned char *p, uint64_t off,
                        size_t len)
{
    pthread_mutex_lock(&f->mu);
    for (unsigned i = 0; i < FILL_BUFS; i++) {
        if (f->win[i].len == 0) {
            f->win[i] = (struct fill_window){ p, off, len, 0 };
            f->avail = off + len;
            break;
        }
    }
    cache_waiters_wake(c, f);
    pthread_mutex_unlock(&f->mu);
}

/* Takes the window over buffer p back (NULL: every window of f), once no
 * reader copies from it: the buffer may take other bytes then. Its piece
 * is in the file by now (a buffer is reused only after its write
 * completed); with every window gone, readers have what is in the file. */
static void window_close(struct fill *f, const unsigned char *p)
{
    pthread_mutex_lock(&f->mu);
    for (unsigned i = 0; i < FILL_BUFS; i++) {
        struct fill_window *w = &f->win[i];
        if (w->len == 0 || (p && w->p != p))
            continue;
        while (w->pins) {
            f->win_waiting = true;
            pthread_cond_wait(&f->win_cv, &f->mu);
        }
        w->len = 0;
    }
    if (!p)
        f->avail = f->filled;
    pthread_mutex_unlock(&f->mu);
}

static bool stopping(struct cache *c)
{
    pthread_mutex_lock(&c->mu);
    bool s = c->stopping;
    pthread_mutex_unlock(&c->mu);
    return s;
}

/* pct percent of the cache's capacity: its high and low watermarks. */
static uint64_t watermark(const struct cache *c, unsigned pct)
{
    return c->cf.capacity / 100 * pct;
}

/* Makes room once a reservation takes usage above the high watermark. With
 * LRU, eviction goes down to the low watermark (in batches, so a burst of
 * misses does not evict one object per fill). While ordered hints guide
 * eviction, and for staging fills, it evicts only what is needed: a batch
 * takes victims that are still going to be read, each a miss later (the
 * stager checked only the first victim). Writes staged for write-back sit
 * in the same directory and cannot be evicted: they count as used, so the
 * cached objects make room for them. */
static void make_room(struct cache *c, bool staging)
{
    uint64_t used, reserved, objects;
    cidx_usage(c->idx, &used, &reserved, &objects);
    uint64_t pinned = backend_wb_disk_bytes(c->cold);
    uint64_t high = watermark(c, c->cf.high_pct);
    if (used + reserved + pinned <= high)
        return;
    uint64_t freed = 0;
    unsigned count = 0;
    bool exact = staging || cidx_get_policy(c->idx) == CIDX_POLICY_NEXT_USE;
    uint64_t target = exact ? high : watermark(c, c->cf.low_pct);
    cidx_evict(c->idx, target > pinned ? target - pinned : 0, &freed, &count);
    atomic_fetch_add(&c->evictions, count);
}

/* Whether making room for staging fill f now would evict an object needed
 * sooner than f's key. The stager checked that when it started the fill,
 * but a staging fill queues behind reader misses, whose fills reserve
 * space meanwhile: the room counted as free may be gone when its worker
 * gets to it. Evicting the object needed furthest ahead then evicts one
 * the readers want before the staged key (seen with four ranks at the end
 * of a cold first epoch: keys of epoch 3, staged into "free space", evicted
 * epoch 2's; bench/results/loaders/README.md). Such a fill is withdrawn
 * before it reads a byte, and the stager stages the key again at its
 * moment. Not when a reader has joined the fill (it is wanted now). */
static bool evicts_sooner(struct cache *c, struct fill *f)
{
    if (cidx_get_policy(c->idx) != CIDX_POLICY_NEXT_USE)
        return false;
    uint64_t use = CIDX_NEXT_USE_NONE;
    pthread_mutex_lock(&c->mu);
    bool readers = f->refs > 2;   /* beyond the table's and the worker's */
    for (const struct cache_stage_obs *o = f->observers; o; o = o->next)
        if (o->use < use)
            use = o->use;
    pthread_mutex_unlock(&c->mu);
    if (readers || use == CIDX_NEXT_USE_NONE)
        return false;
    /* asked before the cold GET (no request is spent on a withdrawn fill):
     * the object's size is not known yet, so a typical cached object's */
    uint64_t used, reserved, objects, victim;
    cidx_usage(c->idx, &used, &reserved, &objects);
    uint64_t high = watermark(c, c->cf.high_pct);
    uint64_t typical = objects ? used / objects : 0;
    if (used + reserved + typical + backend_wb_disk_bytes(c->cold) <= high)
        return false;   /* no eviction needed */
    return cidx_victim_next_use(c->idx, &victim) && victim != CIDX_NEXT_USE_NONE &&
           victim <= use;
}

/* The disk filled up below the configured capacity (another tenant, or a
 * capacity larger than the disk): free a quarter of what is cached so the
 * next fills have room, instead of failing every fill from now on. */
static void shrink_on_full_disk(struct cache *c)
{
    uint64_t used, reserved, objects;
    cidx_usage(c->idx, &used, &reserved, &objects);
    uint64_t freed = 0;
    unsigned count = 0;
    cidx_evict(c->idx, used / 4 * 3, &freed, &count);
    atomic_fetch_add(&c->evictions, count);
    log_msg(LOG_LVL_WARN, "cache", "the cache directory is full at %llu bytes cached: evicted "
            "%u objects (%llu bytes)", (unsigned long long)used, count,
            (unsigned long long)freed);
}

/* Fails f for an error err of its data file ("write to" / "sync of" it):
 * logs it, makes room on a full disk, tells the directory watcher. */
static void fail_on_cache_io(struct cache *c, struct fill *f, const char *what, int err)
{
    char why[CACHE_JOB_MSG_LEN];
    snprintf(why, sizeof why, "%s the cache file in %s failed: %s", what, c->dir, strerror(err));
    log_msg(LOG_LVL_ERROR, "cache", "%s/%s: %s", f->bucket, f->key, why);
    cache_fill_fail(c, f, CACHE_IO, BACKEND_OK, why);
    if (err == ENOSPC || err == EDQUOT)
        shrink_on_full_disk(c);
    cache_dirwatch_report(c->watch, err);
}

/* O_DIRECT was refused (a file system without it): later fills go
 * through the page cache; said once. */
static void direct_refused(struct cache *c, const char *what, int err)
{
    if (!atomic_exchange(&c->fill_direct_off, true))
        log_msg(LOG_LVL_WARN, "cache", "%s of a cache file with O_DIRECT in %s failed (%s): "
                "fills write through the page cache from now on", what, c->dir, strerror(err));
}

/* Creates f's data file for an object of size bytes: O_DIRECT (*direct)
 * where cache.fill_io asks for it for this fill (staging: no reader waits
 * for its bytes yet), the object is of fill_direct_min bytes or more and
 * the file system takes it. O_DIRECT takes the bytes from the fill's
 * buffers to the drive without a copy into the page cache: half of a
 * large staging fill's CPU, and misses as fast or faster, their readers
 * copying from the buffers (bench/results/fills-ab-direct.md). Smaller
 * objects are better left in the page cache (CACHE_FILL_DIRECT_MIN). */
static int create_data_file(struct cache *c, struct fill *f, uint64_t size, bool staging,
                            bool *direct)
{
    bool wanted = c->cf.fill_io == CACHE_FILL_IO_DIRECT ||
                  (c->cf.fill_io == CACHE_FILL_IO_STAGING && staging);
    *direct = wanted && size >= c->cf.fill_direct_min && !atomic_load(&c->fill_direct_off);
    if (*direct) {
        int fd = cache_open_data(c, f->id, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT);
        if (fd >= 0 || errno != EINVAL)
            return fd;
        direct_refused(c, "an open", EINVAL);
        *direct = false;
    }
    return cache_open_data(c, f->id, O_WRONLY | O_CREAT | O_TRUNC);
}

static void run_fill(struct cache *c, struct fill *f, struct fill_io *io)
{
    struct obj_meta meta;
    memset(&meta, 0, sizeof meta);
    struct backend_obj *bo = NULL;
    int fd = -1;
    struct cache_verify verify;
    memset(&verify, 0, sizeof verify);
    uint8_t *hdr = NULL;
    bool direct = false;

    char why[CACHE_JOB_MSG_LEN];
    pthread_mutex_lock(&c->mu);
    bool staging = f->background;
    pthread_mutex_unlock(&c->mu);
    if (staging && evicts_sooner(c, f)) {
        pthread_mutex_lock(&f->mu);
        f->withdrawn = true;
        pthread_mutex_unlock(&f->mu);
        atomic_fetch_add(&c->fills_withdrawn, 1);
        cache_fill_fail(c, f, CACHE_IO, BACKEND_OK, "withdrawn: room for it would evict an "
                        "object needed sooner");
        goto out;
    }
    enum backend_status bs = backend_object_open(c->cold, f->bucket, f->key, &meta, &bo);
    if (bs != BACKEND_OK) {
        cache_fill_fail(c, f, CACHE_BACKEND, bs, NULL);
        goto out;
    }
    enum cidx_status is = cidx_fill_size(c->idx, f->id, meta.size);
    if (is != CIDX_OK) {
        /* larger than the whole cache, or dropped by a reset of the index:
         * the readers go around the cache */
        if (is == CIDX_TOOBIG)
            snprintf(why, sizeof why, "the object (%llu bytes) is larger than the whole "
                     "cache (%llu bytes)", (unsigned long long)meta.size,
                     (unsigned long long)c->cf.capacity);
        else
            snprintf(why, sizeof why, "the cache index was reset while the fill waited");
        cache_fill_fail(c, f, CACHE_IO, BACKEND_OK, why);
        goto out;
    }
    pthread_mutex_lock(&c->mu);
    staging = f->background;
    pthread_mutex_unlock(&c->mu);
    make_room(c, staging);
    fd = create_data_file(c, f, meta.size, staging, &direct);
    int oe = errno;
    size_t hlen = 0;
    if (posix_memalign((void **)&hdr, DIO_ALIGN, CACHE_HDR_MAX) == 0)
        memset(hdr, 0, CACHE_HDR_MAX);
    else
        hdr = NULL;
    if (fd < 0 || !hdr || cache_hdr_encode(&meta, hdr, CACHE_HDR_MAX, &hlen) != 0) {
        snprintf(why, sizeof why, "cannot create the cache file in %s: %s", c->dir,
                 fd < 0 ? strerror(oe) : hdr ? "metadata too large" : "out of memory");
        log_msg(LOG_LVL_ERROR, "cache", "%s/%s: %s", f->bucket, f->key, why);
        cache_fill_fail(c, f, CACHE_IO, BACKEND_OK, why);
        if (fd < 0)
            cache_dirwatch_report(c->watch, oe);
        goto out;
    }
    uint64_t data_off = cache_hdr_data_offset(hlen);
    /* The readers waiting for the headers go on as soon as the file exists
     * and the metadata is known: they read only bytes below `filled`, and
     * the header block is for the index (restart, sweep), so its write
     * need not delay their first byte (about 0.6 ms here: a buffered
     * io_uring write to a new file is handed to a kernel worker). */
    pthread_mutex_lock(&f->mu);
    f->data_off = data_off;
    f->meta = meta;
    memset(&meta, 0, sizeof meta);   /* the fill owns the strings now */
    f->meta_known = true;
    f->direct = direct;
    f->state = FILL_RUNNING;
    cache_waiters_wake(c, f);
    uint64_t size = f->meta.size;
    int vrc = cache_verify_begin(&verify, &f->meta);
    pthread_mutex_unlock(&f->mu);
    /* the header block goes through the engine like every other write, padded
     * to where the data starts: the file's size is then always data_off +
     * object size, which the index's sweep checks (an empty object too) */
    io->head = io->count = 0;
    int rc = write_sync(io, fd, hdr, (size_t)data_off, 0);
    if (rc < 0)
        goto io_fail;
    cache_hdr_keep(c, f->id, hdr, hlen);   /* its hits then read only the body */

    if (vrc != 0) {
        cache_fill_fail(c, f, CACHE_NOMEM, BACKEND_OK, "out of memory");
        goto out;
    }
    atomic_fetch_add(&c->fill_checks[verify.kind], 1);
    unsigned next_buf = 0;
    /* The first pieces are small so the first reader's first byte does not
     * wait for a whole megabyte of a slow cold tier (20 ms at 100 MiB/s);
     * they double up to FILL_BUF, which keeps large objects efficient. */
    size_t piece = 64 * 1024;
    for (uint64_t off = 0; off < size;) {
        if (stopping(c)) {
            cache_fill_fail(c, f, CACHE_IO, BACKEND_OK, "the gateway is stopping");
            goto out;
        }
        while (io->count == FILL_BUFS)
            if ((rc = reap_one(c, f, io, fd)) < 0)
                goto io_fail;
        unsigned s = (io->head + io->count) % FILL_BUFS;
        unsigned b = next_buf;
        next_buf = (next_buf + 1) % FILL_BUFS;
        window_close(f, io->buf[b]);   /* its last piece is in the file */
        size_t want = size - off < piece ? (size_t)(size - off) : piece;
        if (piece < FILL_BUF)
            piece *= 2;
        size_t got = 0;
        while (got < want) {
            size_t n = 0;
            bs = backend_obj_read(bo, off + got, io->buf[b] + got, want - got, &n);
            if (bs != BACKEND_OK || n == 0) {
                log_msg(LOG_LVL_WARN, "cache", "cold read of %s/%s failed at %llu: %s",
                        f->bucket, f->key, (unsigned long long)(off + got),
                        bs != BACKEND_OK ? backend_status_name(bs) : "object shorter than "
                        "its size");
                drain(io);
                cache_fill_fail(c, f, CACHE_BACKEND, bs != BACKEND_OK ? bs : BACKEND_IO, NULL);
                goto out;
            }
            got += n;
        }
        atomic_fetch_add(&c->backend_bytes, got);
        if (cache_verify_update(&verify, io->buf[b], got) != 0) {
            cache_fill_fail(c, f, CACHE_NOMEM, BACKEND_OK, "out of memory");
            goto out;
        }
        /* the readers have the piece now, while it is being written (before
         * the padding below, which is past the object's bytes) */
        window_open(c, f, io->buf[b], off, got);
        size_t len = got;
        if (direct && len % DIO_ALIGN) {   /* the last piece: zeros to the block's end */
            len = (got + DIO_ALIGN - 1) / DIO_ALIGN * DIO_ALIGN;
            memset(io->buf[b] + got, 0, len - got);
        }
        io->slot[s] = (struct fill_slot){ data_off + off, len, 0, got, false, b };
        io->count++;
        if ((rc = submit_write(io, fd, s)) < 0)
            goto io_fail;
        off += got;
    }
    while (io->count)
        if ((rc = reap_one(c, f, io, fd)) < 0)
            goto io_fail;
    /* the padding of the last block goes (the file's size is always
     * data_off + size: the index's sweep checks it); the publisher's
     * fdatasync makes the size durable with the bytes */
    if (direct && size % DIO_ALIGN && ftruncate(fd, (off_t)(data_off + size)) != 0) {
        rc = -errno;
        goto io_fail;
    }
    atomic_fetch_add(direct ? &c->fill_bytes_direct : &c->fill_bytes_buffered, size);
    char got_sum[CACHE_VERIFY_VALUE];
    if (!cache_verify_end(&verify, got_sum)) {
        log_msg(LOG_LVL_ERROR, "cache", "%s/%s: bytes from the cold tier do not match its "
                "%s (%s %s, the cold tier says %s): not cached", f->bucket, f->key,
                verify.kind == CACHE_CHECK_MD5 ? "ETag" : "checksum", verify.what, got_sum,
                verify.want);
        cache_fill_fail(c, f, CACHE_BACKEND, BACKEND_IO, NULL);
        goto out;
    }
    /* Durable before published, off this worker: it goes on to the next
     * fill while the data file is synced (publish.c). Its readers read the
     * file from here on: the buffers are the next fill's. */
    window_close(f, NULL);
    if (!cache_publish_later(c, f, fd))
        cache_fill_finish(c, f, fd);
    fd = -1;
    f = NULL;
    goto out;

io_fail:
    drain(io);
    if (direct && rc == -EINVAL) {   /* O_DIRECT opened, then refused: not the directory's fault */
        direct_refused(c, "a write", EINVAL);
        cache_fill_fail(c, f, CACHE_IO, BACKEND_OK, "O_DIRECT write refused");
        goto out;
    }
    fail_on_cache_io(c, f, "write to", -rc);
out:
    if (f)
        window_close(f, NULL);
    drain(io);   /* before the buffers are reused and the file closed */
    cache_verify_free(&verify);
    free(hdr);
    if (fd >= 0)
        close(fd);
    if (bo)
        backend_obj_close(bo);
    obj_meta_clear(&meta);
    if (f)
        cache_fill_retire(c, f);
}

void cache_fill_finish(struct cache *c, struct fill *f, int fd)
{
    int rc;
    while ((rc = fdatasync(fd)) != 0 && errno == EINTR)
        ;
    if (rc != 0) {
        fail_on_cache_io(c, f, "sync of", errno);
        close(fd);
        cache_fill_retire(c, f);
        return;
    }
    close(fd);
    pthread_mutex_lock(&f->mu);
    uint64_t size = f->meta.size;
    struct timespec mtime = f->meta.mtime;
    char etag[72];
    memcpy(etag, f->meta.etag, sizeof etag);
    pthread_mutex_unlock(&f->mu);
    /* The next use (and pins) go on the entry while it still fills: once
     * published without them it would be the first victim of any other
     * fill's eviction, and could go unread in that moment. */
    if (c->pf)
        cache_prefetch_on_ready(c->pf, f->bucket, f->key, f->id);
    enum cidx_status ps = cidx_publish(c->idx, f->id, size, etag, mtime);
    if (ps == CIDX_NOT_FOUND) {
        /* the index was reset under the fill (its directory was recreated):
         * the file is nobody's, the readers have had their bytes */
        char path[4096];
        if (cidx_data_path(c->idx, f->id, path, sizeof path) == 0)
            unlink(path);
    } else if (ps != CIDX_OK && ps != CIDX_STALE) {
        log_msg(LOG_LVL_WARN, "cache", "%s/%s: publish failed (%d)", f->bucket, f->key, ps);
    }
    pthread_mutex_lock(&f->mu);
    f->state = FILL_DONE;
    atomic_fetch_add(&c->fills_done, 1);   /* counted before anyone hears of it */
    cache_waiters_wake(c, f);
    pthread_mutex_unlock(&f->mu);
    cache_fill_retire(c, f);
}

/* Fill workers run at nice FILL_NICE (Linux: per thread): when the CPU is
 * short, hits of cached objects - a cheap path that serves most reads -
 * come before the copying of fills, which only slow down (the readers of a
 * fill are served by the gateway's own threads, at normal priority, as the
 * bytes land). Measured: bench/results/ab-fill-nice.md. */
enum { FILL_NICE = 5 };

void *cache_worker_main(void *arg)
{
    struct cache *c = arg;
    struct fill_io io;
    memset(&io, 0, sizeof io);
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), FILL_NICE);
    /* FILL_BUFS writes, and the fdatasync after them */
    int rc = cache_eng_new(c->engine, FILL_BUFS + 1, &io.eng);
    if (rc < 0 && c->engine == CACHE_ENGINE_URING) {
        /* the probe's ring worked and this one does not (RLIMIT_MEMLOCK on
         * older kernels): this worker fills with pwrite rather than not at all */
        static atomic_flag said = ATOMIC_FLAG_INIT;
        if (!atomic_flag_test_and_set(&said))
            log_msg(LOG_LVL_WARN, "cache", "a fill worker cannot set up its io_uring (%s): "
                    "it uses pread/pwrite", strerror(-rc));
        rc = cache_eng_new(CACHE_ENGINE_THREADS, FILL_BUFS + 1, &io.eng);
    }
    for (int i = 0; i < FILL_BUFS; i++)
        if (posix_memalign((void **)&io.buf[i], 4096, FILL_BUF) != 0)
            io.buf[i] = NULL;
    bool ok = rc == 0;
    for (int i = 0; i < FILL_BUFS; i++)
        ok = ok && io.buf[i];
    char why[CACHE_JOB_MSG_LEN];
    snprintf(why, sizeof why, "the fill worker could not start: %s",
             rc < 0 ? strerror(-rc) : "buffers: out of memory");
    if (!ok)
        log_msg(LOG_LVL_ERROR, "cache", "%s", why);
    for (;;) {
        pthread_mutex_lock(&c->mu);
        while (!c->stopping && !c->queue_head && !c->bg_head)
            pthread_cond_wait(&c->work, &c->mu);
        if (c->stopping) {
            pthread_mutex_unlock(&c->mu);
            break;
        }
        struct fill *f = c->queue_head ? c->queue_head : c->bg_head;
        if (f == c->queue_head)
            cache_queue_remove(&c->queue_head, &c->queue_tail, f);
        else
            cache_queue_remove(&c->bg_head, &c->bg_tail, f);
        pthread_mutex_unlock(&c->mu);
        if (ok) {
            run_fill(c, f, &io);
        } else {
            cache_fill_fail(c, f, CACHE_IO, BACKEND_OK, why);
            cache_fill_retire(c, f);
        }
    }
    for (int i = 0; i < FILL_BUFS; i++)
        free(io.buf[i]);
    cache_eng_free(io.eng);
    return NULL;
}
