/* cache/read.c - a reader's side of the cache tier: opening an object
 * (a hit from a published entry, revalidated when its bucket asks for it;
 * or joined to the fill in flight, a miss), reading it as the fill's bytes
 * land, and closing it; invalidation after a write.
 *
 * A hit pins its index entry until the reader closes it; a reader of a
 * fill holds a reference to the fill (fill.c) and waits as a cache_waiter
 * for the bytes it asks for. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "cache_index.h"
#include "cache_int.h"
#include "dirwatch_int.h"
#include "engine_int.h"
#include "log.h"

struct cache_obj {
    struct cache *c;
    struct fill *f;              /* NULL for a hit */
    int fd;                      /* the data file, read-only (-1: a hit from memory) */
    uint64_t data_off, size;
    uint64_t id;
    bool pinned;                 /* a hit pins its entry against eviction */
    struct cache_blob *blob;     /* a small hit: the file's first bytes, body included */
    bool direct;                 /* reads a fill written with O_DIRECT (below) */
    uint64_t ahead;              /* object bytes below which reading ahead was asked */
};

/* A fill written with O_DIRECT has none of its bytes in the page cache, so
 * its readers read them from the drive. The kernel's own read-ahead could
 * read blocks beyond `filled` - not yet written, or being written - into the
 * page cache, where only the invalidation that follows a direct write keeps
 * them from being served stale: such a reader's descriptor reads no more
 * than asked (POSIX_FADV_RANDOM), and the reader asks for the next
 * READ_AHEAD bytes itself, never past `filled` (POSIX_FADV_WILLNEED). */
enum { READ_AHEAD = 2 * 1024 * 1024 };

static void read_ahead(struct cache_obj *o, uint64_t off, uint64_t filled)
{
    if (off + READ_AHEAD / 2 < o->ahead)
        return;   /* half a window ahead still asked for */
    uint64_t from = o->ahead > off ? o->ahead : off;
    uint64_t to = off + READ_AHEAD < filled ? off + READ_AHEAD : filled;
    if (to <= from)
        return;
    (void)posix_fadvise(o->fd, (off_t)(o->data_off + from), (off_t)(to - from),
                        POSIX_FADV_WILLNEED);
    o->ahead = to;
}

/* A hit on an object of at most CACHE_INLINE_MAX bytes reads header and
 * body in one pread, and the gateway sends the body from memory together
 * with the response headers: one syscall and one wakeup of the client
 * instead of a send of the headers, a sendfile and a dup/close of the
 * descriptor (bench/results/ab-small-hits.md). Data starts at
 * CACHE_HDR_ALIGN. The buffer stays in the memory tier (memtier.c) for the
 * next hit. */

/* Reads and decodes the header block of an open data file: one read of
 * cap bytes into buf (the header is usually well under 1 KiB), and a second
 * only for a longer one. *got is what the first read returned. */
static int read_header(int fd, uint8_t *first, size_t cap, size_t *got, struct obj_meta *m,
                       uint64_t *data_off)
{
    ssize_t n = pread(fd, first, cap, 0);
    size_t need = n > 0 ? cache_hdr_length(first, (size_t)n) : 0;
    if (need == 0 || need > CACHE_HDR_MAX)
        return -1;
    *got = (size_t)n;
    uint8_t *buf = first;
    if (need > (size_t)n) {
        buf = malloc(need);
        if (!buf || pread(fd, buf, need, 0) != (ssize_t)need) {
            free(buf);
            return -1;
        }
    }
    int rc = cache_hdr_decode(buf, need, m);
    if (buf != first)
        free(buf);
    if (rc != 0)
        return -1;
    *data_off = cache_hdr_data_offset(need);
    return 0;
}

/* The header tier (c->hdrs): a data file's header block kept in memory
 * under its entry's id, put there by the fill that wrote it or by the first
 * hit that read it. A hit that finds it reads only the body from the file:
 * for a 4 KiB object one page instead of two, which is what a hit from the
 * drive costs (bench/results/header-tier.md). Ids are never reused and a
 * published file never changes (memtier.c), so a kept header is always
 * its file's. */
void cache_hdr_keep(struct cache *c, uint64_t id, const uint8_t *hdr, size_t len)
{
    if (!c->hdrs)
        return;
    struct cache_blob *b = cache_blob_new(len);
    if (!b)
        return;
    memcpy(cache_blob_data(b), hdr, len);
    cache_mem_put(c->hdrs, id, b);
    cache_blob_unref(b);
}

/* A file that ends before its object does (damaged, or truncated while
 * the gateway was down) is found at open's background sweep - and here,
 * for a hit that comes first: served, its body would end short after a
 * full Content-Length, and the client would wait for the rest (seen:
 * test_cache_basics under load, a 60 s client timeout). */
static bool file_too_short(int fd, uint64_t end)
{
    struct stat st;
    return fstat(fd, &st) != 0 || (uint64_t)st.st_size < end;
}

/* A hit whose header block is in the header tier: decoded from memory; a
 * small object's body is read alone (a short read is a short file), and its
 * buffer, header first, goes to the memory tier as a whole read's would.
 * true when the file cannot be served. */
static bool hit_known_header(struct cache *c, int fd, struct cache_blob *hdr,
                             const struct cidx_info *info, bool small_hit, struct obj_meta *m,
                             uint64_t *data_off, struct cache_blob **body)
{
    size_t hlen = cache_blob_len(hdr);
    const uint8_t *h = cache_blob_data(hdr);
    if (cache_hdr_decode(h, hlen, m) != 0 || m->size != info->size)
        return true;
    *data_off = cache_hdr_data_offset(hlen);
    /* (a memory tier's buffer has its header within a block: memtier hits read it so) */
    bool whole = small_hit && hlen <= CACHE_HDR_ALIGN;
    struct cache_blob *b = whole ? cache_blob_new(hlen + (size_t)m->size) : NULL;
    if (!b)   /* a larger object (sent from the file), or no memory for the buffer */
        return file_too_short(fd, *data_off + m->size);
    uint8_t *d = cache_blob_data(b);
    memcpy(d, h, hlen);
    if (pread(fd, d + hlen, (size_t)m->size, (off_t)*data_off) != (ssize_t)m->size) {
        cache_blob_unref(b);
        return true;
    }
    *data_off = hlen;
    cache_mem_put(c->mem, info->id, b);
    *body = b;
    return false;
}

/* A hit whose header block is not in memory: read from the file, and kept
 * in the header tier. A small object's header and body come in one pread,
 * and the buffer is kept in the memory tier without the header block's
 * padding (a 4 KiB object takes 4 KiB and its header, not 8 KiB). true
 * when the file cannot be served. */
static bool hit_read_header(struct cache *c, int fd, const struct cidx_info *info,
                            bool small_hit, struct obj_meta *m, uint64_t *data_off,
                            struct cache_blob **body)
{
    uint8_t small[2048];
    uint8_t *first = small;
    size_t cap = sizeof small, got = 0;
    struct cache_blob *b = NULL;
    if (small_hit) {
        cap = CACHE_HDR_ALIGN + (size_t)info->size;
        b = cache_blob_new(cap);
        if (b)
            first = cache_blob_data(b);
        else
            cap = sizeof small;
    }
    if (read_header(fd, first, cap, &got, m, data_off) != 0 || m->size != info->size ||
        file_too_short(fd, *data_off + m->size)) {
        cache_blob_unref(b);
        return true;
    }
    size_t hlen = cache_hdr_length(first, got);
    if (hlen <= got)   /* a longer header was read again into a buffer of its own */
        cache_hdr_keep(c, info->id, first, hlen);
    if (!b)
        return false;
    if (*data_off + m->size > got) {   /* a long header: the body was not in the read */
        cache_blob_unref(b);
        return false;
    }
    if (c->mem) {
        memmove(first + hlen, first + *data_off, (size_t)m->size);
        *data_off = hlen;
        b = cache_blob_shrink(b, hlen + (size_t)m->size);
        cache_mem_put(c->mem, info->id, b);
    }
    *body = b;
    return false;
}

/* A hit on a READY entry (pinned by the lookup). CACHE_OK, or CACHE_AGAIN
 * meaning "treat as a miss" (the entry was dropped). */
static enum cache_status open_hit(struct cache *c, const char *bucket, const char *key,
                                  const struct cidx_info *info, bool count_hit,
                                  struct obj_meta *meta, enum backend_status *bst,
                                  struct cache_obj **out)
{
    struct obj_meta cold;   /* kept when revalidated: its tags are compared below */
    memset(&cold, 0, sizeof cold);
    bool revalidated = false;
    if (cache_needs_revalidation(c, bucket, info->validated_at)) {
        bool asked;
        enum backend_status st = cache_reval_head(&c->reval, c->cold, bucket, key, &cold,
                                                  &asked);
        if (asked)
            atomic_fetch_add(&c->revalidations, 1);
        bool same = st == BACKEND_OK && strcmp(cold.etag, info->etag) == 0 &&
                    cold.size == info->size;
        revalidated = st == BACKEND_OK && same;
        if (!revalidated)
            obj_meta_clear(&cold);
        if (st == BACKEND_OK && same) {
            cidx_touch_validated(c->idx, info->id, cidx_wall_ms());
        } else if (st == BACKEND_OK || st == BACKEND_NO_KEY || st == BACKEND_NO_BUCKET) {
            /* changed or gone in the cold tier: the cached copy is stale */
            cidx_unpin(c->idx, info->id);
            cidx_invalidate(c->idx, bucket, key);
            if (st != BACKEND_OK) {
                *bst = st;
                return CACHE_BACKEND;
            }
            return CACHE_AGAIN;
        } else if (st != BACKEND_TIMEOUT) {   /* a timeout was logged by revalidate.c */
            /* The cold tier cannot answer: serving the copy we have beats
             * failing the read (availability over freshness, logged). */
            log_msg(LOG_LVL_WARN, "cache", "revalidation of %s/%s failed (%s): serving the "
                    "cached copy", bucket, key, backend_status_name(st));
        }
    }
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    uint64_t data_off = 0;
    bool small_hit = info->size <= CACHE_INLINE_MAX && !c->cf.read_uring;
    /* a small object read before: header and body from memory, no file */
    struct cache_blob *blob = small_hit ? cache_mem_get(c->mem, info->id) : NULL;
    int fd = -1, open_err = 0;
    bool bad;
    if (blob) {
        /* the header, then the body right after it (see below) */
        const uint8_t *d = cache_blob_data(blob);
        size_t need = cache_hdr_length(d, CACHE_HDR_ALIGN);
        bad = need == 0 || need > CACHE_HDR_ALIGN || cache_hdr_decode(d, need, &m) != 0 ||
              m.size != info->size;
        data_off = need;
    } else {
        fd = cache_open_data(c, info->id, O_RDONLY);
        open_err = fd < 0 ? errno : 0;
        struct cache_blob *hdr = fd >= 0 ? cache_mem_get(c->hdrs, info->id) : NULL;
        if (hdr) {
            bad = hit_known_header(c, fd, hdr, info, small_hit, &m, &data_off, &blob);
            cache_blob_unref(hdr);
        } else {
            bad = fd < 0 || hit_read_header(c, fd, info, small_hit, &m, &data_off, &blob);
        }
    }
    bool retagged = !bad && revalidated && cache_reval_tags_differ(&cold, &m);
    obj_meta_clear(&cold);
    if (bad || retagged) {
        if (retagged)
            log_msg(LOG_LVL_INFO, "cache", "%s/%s: its tags changed in the cold tier: the "
                    "cached copy is dropped", bucket, key);
        else
            log_msg(LOG_LVL_WARN, "cache", "entry %s/%s has no usable data file (%s): "
                    "dropped", bucket, key, fd < 0 && !blob ? strerror(open_err) :
                    "bad header or short file");
        if (fd >= 0)
            close(fd);
        cache_blob_unref(blob);
        obj_meta_clear(&m);
        cidx_unpin(c->idx, info->id);
        cidx_invalidate(c->idx, bucket, key);
        return CACHE_AGAIN;
    }
    struct cache_obj *o = calloc(1, sizeof *o);
    if (!o) {
        if (fd >= 0)
            close(fd);
        cache_blob_unref(blob);
        obj_meta_clear(&m);
        cidx_unpin(c->idx, info->id);
        return CACHE_NOMEM;
    }
    o->c = c;
    o->fd = fd;
    o->blob = blob;
    o->data_off = data_off;
    o->size = m.size;
    o->id = info->id;
    o->pinned = true;
    *meta = m;
    *out = o;
    if (count_hit)
        atomic_fetch_add(&c->hits, 1);
    return CACHE_OK;
}

static enum cache_status obj_open(struct cache *c, const char *bucket, const char *key,
                                  struct cache_waiter *w, struct obj_meta *meta,
                                  enum backend_status *bst, struct cache_obj **out,
                                  bool may_fill);

enum cache_status cache_obj_open(struct cache *c, const char *bucket, const char *key,
                                 struct cache_waiter *w, struct obj_meta *meta,
                                 enum backend_status *bst, struct cache_obj **out)
{
    return obj_open(c, bucket, key, w, meta, bst, out, true);
}

enum cache_status cache_obj_open_existing(struct cache *c, const char *bucket,
                                          const char *key, struct cache_waiter *w,
                                          struct obj_meta *meta, enum backend_status *bst,
                                          struct cache_obj **out)
{
    return obj_open(c, bucket, key, w, meta, bst, out, false);
}

static enum cache_status obj_open(struct cache *c, const char *bucket, const char *key,
                                  struct cache_waiter *w, struct obj_meta *meta,
                                  enum backend_status *bst, struct cache_obj **out,
                                  bool may_fill)
{
    *out = NULL;
    *bst = BACKEND_OK;
    if (w->expired) {
        w->expired = false;
        return CACHE_TIMEOUT;
    }
    if (w->result != CACHE_OK) {   /* the fill this waiter waited for failed */
        enum cache_status r = w->result;
        *bst = w->bst;
        cache_cold_error_hand(w->bst, &w->cold);
        w->result = CACHE_OK;
        return r;
    }
    if (!cache_dirwatch_up(c->watch))
        return CACHE_IO;   /* the cache directory is unusable: read around the cache */
    for (int attempt = 0; attempt < 4; attempt++) {
        struct cidx_info info;
        enum cidx_status is = cidx_lookup_pin(c->idx, bucket, key, &info);
        if (is == CIDX_OK) {
            /* a reader that waited on the fill that published this entry
             * was counted as a miss already */
            enum cache_status st = open_hit(c, bucket, key, &info, !w->missed, meta, bst, out);
            if (st != CACHE_AGAIN)
                return st;
            continue;   /* dropped: miss */
        }

        pthread_mutex_lock(&c->mu);
        if (c->stopping) {
            pthread_mutex_unlock(&c->mu);
            return CACHE_IO;
        }
        /* A reader woken by its fill's metadata takes that fill's failure
         * if it failed since (one fill, one failure: never a loop of new
         * fills); any other passes a failed fill by and starts a new one
         * (the cold tier may be back). */
        enum cache_status ferr;
        if (cache_fill_failed_recently(c, w->fill_id, &ferr, bst)) {
            w->fill_id = 0;
            pthread_mutex_unlock(&c->mu);
            return ferr;
        }
        w->fill_id = 0;
        struct fill *f = cache_table_find_live(c, bucket, key);
        if (!f && !may_fill) {
            pthread_mutex_unlock(&c->mu);
            return CACHE_END;
        }
        if (!f) {
            uint64_t id;
            enum cidx_state state;
            is = cidx_begin_fill(c->idx, bucket, key, &id, &state);
            if (is == CIDX_EXISTS && state == CIDX_STATE_READY) {
                pthread_mutex_unlock(&c->mu);
                continue;   /* published meanwhile: a hit after all */
            }
            if (is != CIDX_OK) {
                /* a FILLING entry without a fill (cannot happen while the
                 * table is right), or no memory: read around the cache */
                pthread_mutex_unlock(&c->mu);
                return CACHE_IO;
            }
            f = cache_fill_new_locked(c, bucket, key, id, false);
            if (!f) {
                cidx_fill_abort(c->idx, id);
                pthread_mutex_unlock(&c->mu);
                return CACHE_NOMEM;
            }
            w->started_fill = true;
        }
        if (may_fill)
            cache_fill_promote_locked(c, f);
        f->refs++;
        pthread_mutex_unlock(&c->mu);

        pthread_mutex_lock(&f->mu);
        if (f->state == FILL_FAILED) {
            enum cache_status r = f->err;
            *bst = f->bst;
            cache_cold_error_hand(f->bst, &f->cold);
            pthread_mutex_unlock(&f->mu);
            cache_fill_unref(c, f);
            return r;
        }
        if (w->no_wait && may_fill) {   /* the fill goes on; the caller reads the source */
            pthread_mutex_unlock(&f->mu);
            cache_fill_unref(c, f);
            return CACHE_END;
        }
        if (!f->meta_known) {
            cache_waiter_add(c, f, w, true, 0);
            pthread_mutex_unlock(&f->mu);
            cache_fill_unref(c, f);
            return CACHE_AGAIN;
        }
        struct cache_obj *o = calloc(1, sizeof *o);
        int fd = o ? cache_open_data(c, f->id, O_RDONLY) : -1;
        if (o && fd < 0 && errno == ENOENT && f->state == FILL_DONE) {
            /* Published, then evicted before its worker let go of the fill
             * (eviction under staging pressure): the object is not cached
             * any more. Drop the finished fill from the table and look
             * again - a new miss - rather than read around the cache. */
            pthread_mutex_unlock(&f->mu);
            free(o);
            pthread_mutex_lock(&c->mu);
            cache_fill_untable_locked(c, f);
            cache_fill_unref_locked(f);   /* ours; the worker's remains */
            pthread_mutex_unlock(&c->mu);
            continue;
        }
        if (!o || fd < 0 || obj_meta_copy_hdrs(meta, &f->meta) != 0) {
            pthread_mutex_unlock(&f->mu);
            if (fd >= 0)
                close(fd);
            free(o);
            cache_fill_unref(c, f);
            return fd < 0 && o ? CACHE_IO : CACHE_NOMEM;
        }
        meta->size = f->meta.size;
        meta->mtime = f->meta.mtime;
        memcpy(meta->etag, f->meta.etag, sizeof meta->etag);
        o->c = c;
        o->f = f;   /* keeps our reference */
        o->fd = fd;
        o->data_off = f->data_off;
        o->size = f->meta.size;
        o->id = f->id;
        o->direct = f->direct;
        pthread_mutex_unlock(&f->mu);
        if (o->direct)
            (void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
        *out = o;
        return CACHE_OK;
    }
    return CACHE_IO;   /* entries keep vanishing under us: read around the cache */
}

bool cache_obj_complete(const struct cache_obj *o)
{
    if (!o->f)
        return true;
    pthread_mutex_lock(&o->f->mu);
    bool done = o->f->state == FILL_DONE;
    pthread_mutex_unlock(&o->f->mu);
    return done;
}

int cache_obj_fd(const struct cache_obj *o)
{
    return o->fd;
}

uint64_t cache_obj_data_offset(const struct cache_obj *o)
{
    return o->data_off;
}

bool cache_reads_uring(const struct cache *c)
{
    return c->cf.read_uring;
}

static enum cache_status read_file(struct cache_obj *o, uint64_t off, void *buf, size_t len,
                                   size_t *got)
{
    if (o->blob) {   /* a small hit holds the whole object */
        memcpy(buf, cache_blob_data(o->blob) + o->data_off + off, len);
        *got = len;
        return CACHE_OK;
    }
    if (o->fd < 0)
        return CACHE_IO;   /* a hit from memory whose buffer was taken */
    /* cache.read_path io_uring reads through the engine's ring; the threads
     * engine (no io_uring here) reads with pread whatever the setting */
    enum cache_engine k = o->c->cf.read_uring ? o->c->engine : CACHE_ENGINE_THREADS;
    ssize_t n;
    do
        n = cache_eng_pread(k, o->fd, buf, len, o->data_off + off);
    while (n < 0 && (errno == EINTR || errno == EAGAIN));
    if (n <= 0) {
        log_msg(LOG_LVL_ERROR, "cache", "read of cache file %016llx at %llu: %s",
                (unsigned long long)o->id, (unsigned long long)off,
                n < 0 ? strerror(errno) : "unexpected end of file");
        return CACHE_IO;
    }
    *got = (size_t)n;
    return CACHE_OK;
}

/* Copies what window w of fill f holds from off (at most len bytes) and lets
 * it go. Called under f->mu, which it releases; the pin keeps the worker
 * from reusing the buffer while the copy runs without the lock. */
static enum cache_status read_window(struct cache_obj *o, struct fill *f, struct fill_window *w,
                                     uint64_t off, void *buf, size_t len, size_t *got)
{
    size_t n = w->len - (size_t)(off - w->off);
    if (n > len)
        n = len;
    const unsigned char *src = w->p + (off - w->off);
    w->pins++;
    pthread_mutex_unlock(&f->mu);
    memcpy(buf, src, n);
    pthread_mutex_lock(&f->mu);
    if (--w->pins == 0 && f->win_waiting) {
        f->win_waiting = false;
        pthread_cond_broadcast(&f->win_cv);
    }
    pthread_mutex_unlock(&f->mu);
    atomic_fetch_add(&o->c->fill_read_window, n);
    *got = n;
    return CACHE_OK;
}

enum cache_status cache_obj_read(struct cache_obj *o, uint64_t off, void *buf, size_t len,
                                 size_t *got, struct cache_waiter *w)
{
    *got = 0;
    if (off >= o->size || len == 0)
        return CACHE_END;
    if (o->size - off < len)
        len = (size_t)(o->size - off);
    if (!o->f)
        return read_file(o, off, buf, len, got);
    if (w->expired) {
        w->expired = false;
        return CACHE_TIMEOUT;
    }
    struct fill *f = o->f;
    pthread_mutex_lock(&f->mu);
    if (f->avail > off) {
        for (unsigned i = 0; i < CACHE_FILL_BUFS; i++)
            if (f->win[i].len && off >= f->win[i].off && off - f->win[i].off < f->win[i].len)
                return read_window(o, f, &f->win[i], off, buf, len, got);
        uint64_t filled = f->filled;
        pthread_mutex_unlock(&f->mu);
        if (filled <= off) {   /* cannot be: bytes past filled are in a window */
            log_msg(LOG_LVL_ERROR, "cache", "cache file %016llx: offset %llu is neither "
                    "written nor in a buffer", (unsigned long long)o->id,
                    (unsigned long long)off);
            return CACHE_IO;
        }
        if (o->direct)
            read_ahead(o, off, filled);
        uint64_t avail = filled - off;
        enum cache_status st = read_file(o, off, buf, avail < len ? (size_t)avail : len, got);
        if (st == CACHE_OK)
            atomic_fetch_add(&o->c->fill_read_file, *got);
        return st;
    }
    if (f->state == FILL_FAILED) {
        enum cache_status r = f->err;
        pthread_mutex_unlock(&f->mu);
        return r;
    }
    cache_waiter_add(o->c, f, w, false, off);
    pthread_mutex_unlock(&f->mu);
    return CACHE_AGAIN;
}

void cache_obj_cancel_wait(struct cache_obj *o, struct cache_waiter *w)
{
    if (!o || !o->f || !w->queued)
        return;
    pthread_mutex_lock(&o->f->mu);
    for (struct cache_waiter **pp = &o->f->waiters; *pp; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            w->queued = false;
            atomic_fetch_sub(&o->c->waiters_now, 1);
            break;
        }
    }
    pthread_mutex_unlock(&o->f->mu);
}

void *cache_obj_take_body(struct cache_obj *o, const uint8_t **body)
{
    struct cache_blob *b = o->blob;
    if (b)
        *body = cache_blob_data(b) + o->data_off;
    o->blob = NULL;
    return b;
}

void cache_obj_close(struct cache_obj *o)
{
    if (!o)
        return;
    cache_blob_unref(o->blob);
    if (o->fd >= 0)
        close(o->fd);
    if (o->pinned)
        cidx_unpin(o->c->idx, o->id);
    if (o->f)
        cache_fill_unref(o->c, o->f);
    free(o);
}

void cache_invalidate(struct cache *c, const char *bucket, const char *key)
{
    /* The index dooms a FILLING entry (its publish is refused) and drops a
     * READY one; the fill in the table goes on for the readers attached to
     * it, who asked before the write. The next open starts a fresh fill. */
    pthread_mutex_lock(&c->mu);
    struct fill *f = cache_table_find(c, bucket, key);
    if (f) {
        cache_table_remove(c, f);
        cache_fill_unref_locked(f);   /* the table's reference */
    }
    pthread_mutex_unlock(&c->mu);
    cidx_invalidate(c->idx, bucket, key);
}
