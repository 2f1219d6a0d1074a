/* backend/posix_aw.c - a put's bytes written through io_uring, O_DIRECT
 * where the file system takes it: the staging writes of write-back.
 *
 * A put's write() into the page cache copies every byte in the body
 * thread's time, and the commit's fdatasync then waits for the whole
 * object to go to the disk at once (bench/results/stage-io.md). Here the
 * bytes are copied into one of a few aligned buffers (registered with the
 * ring); a full buffer is sent to the disk as an O_DIRECT write and the
 * thread goes on receiving into the next, so the disk writes while the
 * body arrives and the commit's fdatasync finds almost nothing left to do.
 * Nothing of the object is left dirty in the page cache to be written back
 * later, beside the readers' hits.
 *
 * O_DIRECT takes writes of whole 4 KiB blocks at block offsets: the bytes
 * before the first block boundary (a part whose slot does not start on
 * one, a put that began with plain writes) and after the last (the tail)
 * are written with pwrite, O_DIRECT off. A file system without O_DIRECT
 * (fcntl's EINVAL) gets the same io_uring writes through its page cache.
 *
 * A writer takes NBUF * BUF_SIZE bytes; at most MAX_WRITERS exist at once
 * (the rest write with write(), as before). Where io_uring does not work
 * (a container's seccomp) the first ring that fails turns it off for the
 * process, with one line in the log. */
#include "posix_int.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define NBUF 4
#define BUF_SIZE ((size_t)256 << 10)
#define BLOCK ((uint64_t)4096)
#define MAX_WRITERS 64

struct aw_buf {
    bool busy;                /* the kernel has it */
    bool direct;              /* sent with O_DIRECT on */
    uint64_t off;             /* where its write goes */
    size_t len;
};

struct posix_aw {
    struct io_uring ring;
    int fd;
    enum posix_aw_mode mode;  /* POSIX_AW_DIRECT until the file system refuses it */
    bool direct_on;           /* O_DIRECT set on fd now */
    bool fixed;               /* the buffers are registered with the ring */
    bool sync;                /* the ring refused a submit: pwrite from then on (an
                                 unsubmitted entry stays in it and must never go) */
    uint64_t off;             /* file offset of the next byte taken */
    uint64_t head_left;       /* bytes to the first block boundary (pwrite) */
    unsigned cur;             /* the buffer being filled */
    size_t fill;              /* bytes in it */
    unsigned inflight;
    int err;                  /* the first write that failed: its errno */
    unsigned char *mem;       /* NBUF * BUF_SIZE, aligned */
    struct aw_buf buf[NBUF];
};

static atomic_int writers;
static atomic_bool uring_off;
static _Atomic uint64_t bytes_of[3];   /* by enum posix_aw_how */

/* io_uring refused (a container's seccomp): no writer starts from now on,
 * and the log says so once. */
static void uring_refused(int err)
{
    if (!atomic_exchange(&uring_off, true))
        log_msg(LOG_LVL_WARN, "backend",
                "io_uring does not work here (%s): staged writes use write()", strerror(err));
}

static int pwrite_all(int fd, const unsigned char *b, size_t len, uint64_t off)
{
    while (len > 0) {
        ssize_t n = pwrite(fd, b, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? errno : EIO;
        b += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

static int set_direct(struct posix_aw *w, bool on)
{
    if (w->direct_on == on)
        return 0;
    int fl = fcntl(w->fd, F_GETFL);
    if (fl < 0 || fcntl(w->fd, F_SETFL, on ? fl | O_DIRECT : fl & ~O_DIRECT) != 0)
        return errno;
    w->direct_on = on;
    return 0;
}

/* len bytes at off by pwrite, O_DIRECT off: the unaligned head and tail,
 * and what the ring could not write. 0 or the errno. */
static int write_plain(struct posix_aw *w, const unsigned char *b, size_t len, uint64_t off)
{
    int e = set_direct(w, false);
    return e ? e : pwrite_all(w->fd, b, len, off);
}

struct posix_aw *posix_aw_start(int fd, uint64_t off, enum posix_aw_mode mode)
{
    if (mode == POSIX_AW_OFF || atomic_load_explicit(&uring_off, memory_order_relaxed))
        return NULL;
    if (atomic_fetch_add(&writers, 1) >= MAX_WRITERS) {
        atomic_fetch_sub(&writers, 1);
        return NULL;
    }
    struct posix_aw *w = calloc(1, sizeof *w);
    void *mem = NULL;
    if (!w || posix_memalign(&mem, BLOCK, NBUF * BUF_SIZE) != 0) {
        free(w);
        atomic_fetch_sub(&writers, 1);
        return NULL;
    }
    w->mem = mem;
    int rc = io_uring_queue_init(NBUF, &w->ring, 0);
    if (rc < 0) {
        uring_refused(-rc);
        free(w->mem);
        free(w);
        atomic_fetch_sub(&writers, 1);
        return NULL;
    }
    struct iovec iov[NBUF];
    for (unsigned i = 0; i < NBUF; i++)
        iov[i] = (struct iovec){ .iov_base = w->mem + i * BUF_SIZE, .iov_len = BUF_SIZE };
    w->fixed = io_uring_register_buffers(&w->ring, iov, NBUF) == 0;
    w->fd = fd;
    w->mode = mode;
    w->off = off;
    w->head_left = mode == POSIX_AW_DIRECT && off % BLOCK ? BLOCK - off % BLOCK : 0;
    return w;
}

/* A direct write the file system refused (EINVAL: no O_DIRECT for this
 * file after all): buffer i written again through the page cache, and the
 * writer goes on without O_DIRECT. Runs with nothing else in flight. */
static int redo_buffered(struct posix_aw *w, unsigned i)
{
    int e = write_plain(w, w->mem + i * BUF_SIZE, w->buf[i].len, w->buf[i].off);
    if (e == 0)
        w->mode = POSIX_AW_URING;
    return e;
}

/* Waits for one write to finish and books it. */
static void reap_one(struct posix_aw *w)
{
    struct io_uring_cqe *cqe;
    int rc;
    do
        rc = io_uring_wait_cqe(&w->ring, &cqe);
    while (rc == -EINTR);
    if (rc < 0) {   /* the ring itself failed: nothing more can be known */
        if (!w->err)
            w->err = -rc;
        for (unsigned i = 0; i < NBUF; i++)
            w->buf[i].busy = false;
        w->inflight = 0;
        return;
    }
    unsigned i = (unsigned)cqe->user_data;
    int res = cqe->res;
    io_uring_cqe_seen(&w->ring, cqe);
    w->buf[i].busy = false;
    w->inflight--;
    size_t len = w->buf[i].len;
    int e = 0;
    enum posix_aw_how how = w->buf[i].direct ? POSIX_AW_HOW_DIRECT : POSIX_AW_HOW_URING;
    if (res == -EINVAL && w->direct_on) {
        while (w->inflight > 0)   /* the others too, before O_DIRECT goes off */
            reap_one(w);
        e = redo_buffered(w, i);
        how = POSIX_AW_HOW_URING;
    } else if (res < 0) {
        e = -res;
    } else if ((size_t)res < len) {   /* short (a full disk on the way): the rest */
        while (w->inflight > 0)
            reap_one(w);
        e = write_plain(w, w->mem + i * BUF_SIZE + res, len - (size_t)res,
                        w->buf[i].off + (uint64_t)res);
    }
    if (e && !w->err)
        w->err = e;
    if (!e)
        atomic_fetch_add_explicit(&bytes_of[how], len, memory_order_relaxed);
}

/* Buffer cur's first len bytes written synchronously (the ring refused,
 * or was refused before). */
static void write_sync(struct posix_aw *w, size_t len)
{
    int e = write_plain(w, w->mem + w->cur * BUF_SIZE, len, w->off);
    if (e && !w->err)
        w->err = e;
    if (!e)
        atomic_fetch_add_explicit(&bytes_of[POSIX_AW_HOW_WRITE], len, memory_order_relaxed);
    w->off += len;
}

static void submit(struct posix_aw *w, size_t len)
{
    unsigned i = w->cur;
    if (w->sync) {
        write_sync(w, len);
    } else {
        if (w->mode == POSIX_AW_DIRECT && !w->direct_on && set_direct(w, true) != 0)
            w->mode = POSIX_AW_URING;   /* no O_DIRECT on this file system */
        struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);   /* NBUF entries: never NULL */
        unsigned char *b = w->mem + i * BUF_SIZE;
        if (w->fixed)
            io_uring_prep_write_fixed(sqe, w->fd, b, (unsigned)len, w->off, (int)i);
        else
            io_uring_prep_write(sqe, w->fd, b, (unsigned)len, w->off);
        sqe->user_data = i;
        int rc;
        do
            rc = io_uring_submit(&w->ring);
        while (rc == -EINTR);
        if (rc >= 0) {
            w->buf[i] = (struct aw_buf){ .busy = true, .direct = w->direct_on,
                                      .off = w->off, .len = len };
            w->off += len;
            w->inflight++;
        } else {   /* io_uring_enter refused: this writer and every later one write */
            uring_refused(-rc);
            while (w->inflight > 0)
                reap_one(w);
            w->sync = true;
            w->mode = POSIX_AW_URING;
            write_sync(w, len);
        }
    }
    w->cur = (i + 1) % NBUF;
    w->fill = 0;
}

int posix_aw_write(struct posix_aw *w, const void *buf, size_t len)
{
    const unsigned char *b = buf;
    if (w->head_left > 0 && len > 0) {   /* up to the first block boundary */
        size_t n = len < w->head_left ? len : (size_t)w->head_left;
        int e = pwrite_all(w->fd, b, n, w->off);
        if (e) {
            w->err = e;
            return e;
        }
        atomic_fetch_add_explicit(&bytes_of[POSIX_AW_HOW_WRITE], n, memory_order_relaxed);
        w->off += n;
        w->head_left -= n;
        b += n;
        len -= n;
    }
    while (len > 0 && !w->err) {
        while (w->buf[w->cur].busy)
            reap_one(w);
        size_t n = BUF_SIZE - w->fill;
        if (n > len)
            n = len;
        memcpy(w->mem + w->cur * BUF_SIZE + w->fill, b, n);
        w->fill += n;
        b += n;
        len -= n;
        if (w->fill == BUF_SIZE)
            submit(w, BUF_SIZE);
    }
    /* a completion already there is booked now: an error shows early */
    struct io_uring_cqe *cqe;
    while (w->inflight > 0 && io_uring_peek_cqe(&w->ring, &cqe) == 0)
        reap_one(w);
    return w->err;
}

int posix_aw_finish(struct posix_aw *w)
{
    if (!w->err && w->fill > 0) {
        size_t tail = w->mode == POSIX_AW_DIRECT ? w->fill % BLOCK : 0;
        size_t whole = w->fill - tail;
        unsigned i = w->cur;
        if (whole > 0)
            submit(w, whole);   /* the tail stays behind it in buffer i */
        while (w->inflight > 0)
            reap_one(w);
        if (tail > 0 && !w->err) {
            int e = write_plain(w, w->mem + i * BUF_SIZE + whole, tail, w->off);
            if (e)
                w->err = e;
            else {
                atomic_fetch_add_explicit(&bytes_of[POSIX_AW_HOW_WRITE], tail,
                                          memory_order_relaxed);
                w->off += tail;
            }
        }
        w->fill = 0;
    }
    while (w->inflight > 0)
        reap_one(w);
    int e = set_direct(w, false);
    return w->err ? w->err : e;
}

void posix_aw_free(struct posix_aw *w)
{
    if (!w)
        return;
    while (w->inflight > 0)   /* the kernel lets go of the buffers first */
        reap_one(w);
    set_direct(w, false);
    io_uring_queue_exit(&w->ring);
    free(w->mem);
    free(w);
    atomic_fetch_sub(&writers, 1);
}

void posix_aw_book(enum posix_aw_how how, uint64_t bytes)
{
    atomic_fetch_add_explicit(&bytes_of[how], bytes, memory_order_relaxed);
}

void posix_aw_stats(uint64_t out[3])
{
    for (int i = 0; i < 3; i++)
        out[i] = atomic_load_explicit(&bytes_of[i], memory_order_relaxed);
}
