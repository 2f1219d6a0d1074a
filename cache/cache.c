/* cache/cache.c - the cache tier's engine: hits from published entries,
 * single-flight fills that stream to every reader as the bytes land, TTL
 * revalidation, and the fill workers.
 *
 * A fill is run by one worker thread from start to end: it opens the object
 * on the cold tier, writes the header block and then the bytes to the data
 * file through its I/O engine (engine_int.h: its own io_uring, where two
 * 1 MiB buffers let one be read from the cold tier while the other is being
 * written; or pwrite where io_uring is blocked), advances `filled` in order
 * as writes complete and resumes the readers waiting for those bytes. Only a
 * complete, verified and fdatasync'ed file is published to the index.
 *
 * Why one worker per fill rather than one tier thread driving every fill
 * from a single event loop: the cold tier's interface is a blocking reader
 * (backend_obj_read), and a worker per fill keeps each fill a straight line
 * of code; concurrency is bounded by the number of workers. The io_uring
 * ring per worker keeps writes asynchronous so reading the next buffer from
 * the cold tier overlaps writing the last one.
 *
 * Locks: c->mu (fill table, queue, stop flag) before f->mu (one fill's
 * state and waiters); the index has its own locks and is never called with
 * f->mu held. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "cache_index.h"
#include "cache_int.h"
#include "dirlock.h"
#include "dirwatch_int.h"
#include "engine_int.h"
#include "log.h"

enum {
    FILL_BUF = 1024 * 1024,      /* bytes per cold-tier read and cache write */
    FILL_BUFS = 2,               /* read one while the other is written */
    FILL_TABLE = 1024,           /* buckets of the fill table (fills in flight are few) */
    REAPER_MS = 100,             /* deadline resolution for waiting readers */
};

enum fill_state { FILL_QUEUED, FILL_RUNNING, FILL_DONE, FILL_FAILED };

struct fill {
    struct fill *table_next;     /* chain in c->table */
    struct fill *queue_next;     /* c->queue or c->bg_queue */
    bool background;             /* a staging fill (no reader asked yet); under c->mu */
    struct cache_stage_obs *observers;   /* prefetch jobs told at the end; under c->mu */
    uint64_t id;                 /* the index entry; names the data file */
    char *bucket, *key;
    unsigned refs;               /* the table, the worker, attached readers; under c->mu */

    pthread_mutex_t mu;          /* everything below */
    enum fill_state state;
    bool meta_known;
    struct obj_meta meta;
    uint64_t data_off;           /* where the object's bytes start in the file */
    uint64_t filled;             /* object bytes written, contiguous from 0 */
    enum cache_status err;       /* FILL_FAILED: why */
    enum backend_status bst;
    char why[CACHE_JOB_MSG_LEN]; /* FILL_FAILED on the cache side: a sentence for jobs */
    struct cache_waiter *waiters;
};

struct cache {
    struct cidx *idx;
    struct backend *cold;
    struct cache_conf cf;        /* strings and bucket table borrowed */
    char *dir;
    struct conf_dirlock *lock;   /* one gateway per cache directory (NULL: no flock) */

    pthread_mutex_t mu;
    pthread_cond_t work;         /* signalled when the queue grows or on stop */
    struct fill *table[FILL_TABLE];
    struct fill *queue_head, *queue_tail;         /* reader misses: first */
    struct fill *bg_head, *bg_tail;               /* staging: when no miss waits */
    unsigned bg_inflight, bg_limit;               /* staging fills queued or running */
    bool stopping;
    struct cache_prefetch *pf;
    pthread_t *workers;
    unsigned n_workers;
    pthread_t reaper;
    bool reaper_started;
    enum cache_engine engine;    /* URING or THREADS: decided once at open */
    struct cache_dirwatch *watch;

    atomic_uint_fast64_t hits, misses, fills_started, fills_done, fills_failed;
    atomic_uint_fast64_t waiters_now, backend_bytes, revalidations, evictions;
    struct cache_reval reval;    /* revalidate.c: deadline, hold-off, counters */
};

struct cache_obj {
    struct cache *c;
    struct fill *f;              /* NULL for a hit */
    int fd;                      /* the data file, read-only */
    uint64_t data_off, size;
    uint64_t id;
    bool pinned;                 /* a hit pins its entry against eviction */
    uint8_t *inline_buf;         /* a small hit: the file's first bytes, body included */
};

const char *cache_status_name(enum cache_status st)
{
    switch (st) {
    case CACHE_OK: return "ok";
    case CACHE_AGAIN: return "again";
    case CACHE_END: return "end";
    case CACHE_BACKEND: return "backend";
    case CACHE_IO: return "cache-io";
    case CACHE_TIMEOUT: return "timeout";
    case CACHE_NOMEM: return "nomem";
    }
    return "?";
}

/* ---- small helpers ---- */

static uint64_t hash_name(const char *bucket, const char *key)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (const char *p = bucket; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
    for (const char *p = key; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

static bool deadline_passed(const struct timespec *d)
{
    if (d->tv_sec == 0 && d->tv_nsec == 0)
        return false;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > d->tv_sec || (now.tv_sec == d->tv_sec && now.tv_nsec >= d->tv_nsec);
}

static const struct cache_bucket_conf *bucket_conf(const struct cache *c, const char *bucket)
{
    for (size_t i = 0; i < c->cf.n_buckets; i++)
        if (strcmp(c->cf.buckets[i].bucket, bucket) == 0)
            return &c->cf.buckets[i];
    return NULL;
}

/* Must a READY entry validated at `at_ms` be checked against the cold tier? */
static bool needs_revalidation(const struct cache *c, const char *bucket, int64_t at_ms)
{
    const struct cache_bucket_conf *bc = bucket_conf(c, bucket);
    enum cache_consistency cons = bc ? bc->consistency : c->cf.default_consistency;
    unsigned ttl = bc ? bc->ttl_s : c->cf.default_ttl_s;
    switch (cons) {
    case CACHE_IMMUTABLE: return false;
    case CACHE_ALWAYS: return true;
    case CACHE_TTL: return cidx_wall_ms() - at_ms >= (int64_t)ttl * 1000;
    }
    return true;
}

/* ---- waiters (all under f->mu) ---- */

static void waiter_add(struct fill *f, struct cache_waiter *w, bool for_meta, uint64_t need)
{
    w->missed |= for_meta;
    w->for_meta = for_meta;
    w->need = need;
    w->expired = false;
    w->queued = true;
    w->next = f->waiters;
    f->waiters = w;
    w->suspend(w->arg);
}

/* Resumes the waiters whose condition now holds (all of them when the fill
 * ended). A resumed waiter is out of the list before resume() runs: the
 * connection may be freed right after. */
static unsigned waiters_wake(struct fill *f)
{
    bool final = f->state == FILL_DONE || f->state == FILL_FAILED;
    struct cache_waiter **pp = &f->waiters;
    unsigned woken = 0;
    while (*pp) {
        struct cache_waiter *w = *pp;
        bool ready = final || (w->for_meta ? f->meta_known : f->filled > w->need);
        if (!ready) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        w->queued = false;
        w->next = NULL;
        if (f->state == FILL_FAILED) {
            w->result = f->err;
            w->bst = f->bst;
        }
        w->resume(w->arg);
        woken++;
    }
    return woken;
}

/* ---- the fill table ---- */

static struct fill *table_find(struct cache *c, const char *bucket, const char *key)
{
    struct fill *f = c->table[hash_name(bucket, key) % FILL_TABLE];
    for (; f; f = f->table_next)
        if (strcmp(f->bucket, bucket) == 0 && strcmp(f->key, key) == 0)
            return f;
    return NULL;
}

static void table_remove(struct cache *c, struct fill *f)
{
    struct fill **pp = &c->table[hash_name(f->bucket, f->key) % FILL_TABLE];
    for (; *pp; pp = &(*pp)->table_next) {
        if (*pp == f) {
            *pp = f->table_next;
            f->table_next = NULL;
            return;
        }
    }
}

static void fill_free(struct fill *f)
{
    pthread_mutex_destroy(&f->mu);
    obj_meta_clear(&f->meta);
    free(f->bucket);
    free(f->key);
    free(f);
}

/* Drops one reference; under c->mu. */
static void fill_unref_locked(struct fill *f)
{
    if (--f->refs == 0)
        fill_free(f);
}

/* A fill's worker is done with it: drop the worker's reference and, if the
 * fill is still the table's entry for its key, the table's. Returns the
 * prefetch observers to tell (after c->mu is released). Under c->mu. */
static struct cache_stage_obs *fill_retire_locked(struct cache *c, struct fill *f)
{
    struct cache_stage_obs *obs = f->observers;
    f->observers = NULL;
    if (f->background) {
        f->background = false;
        c->bg_inflight--;
    }
    if (table_find(c, f->bucket, f->key) == f) {
        table_remove(c, f);
        f->refs--;   /* the table's; the worker's below is never the last before it */
    }
    fill_unref_locked(f);
    return obs;
}

static void observers_tell(struct cache_stage_obs *obs, const struct cache_stage_end *end)
{
    while (obs) {
        struct cache_stage_obs *next = obs->next;
        obs->next = NULL;
        obs->done(obs, end);
        obs = next;
    }
}

/* Retires f from its worker and tells the observers how it ended. */
static void fill_retire(struct cache *c, struct fill *f)
{
    char why[CACHE_JOB_MSG_LEN];
    struct cache_stage_end end = { .why = why };
    pthread_mutex_lock(&f->mu);
    end.ok = f->state == FILL_DONE;
    end.size = f->meta_known ? f->meta.size : 0;
    end.err = f->state == FILL_FAILED ? f->err : CACHE_OK;
    end.bst = f->state == FILL_FAILED ? f->bst : BACKEND_OK;
    memcpy(why, f->why, sizeof why);
    pthread_mutex_unlock(&f->mu);
    pthread_mutex_lock(&c->mu);
    struct cache_stage_obs *obs = fill_retire_locked(c, f);
    pthread_mutex_unlock(&c->mu);
    observers_tell(obs, &end);
}

static void fill_unref(struct cache *c, struct fill *f)
{
    pthread_mutex_lock(&c->mu);
    fill_unref_locked(f);
    pthread_mutex_unlock(&c->mu);
}

/* Creates and queues a fill for a new FILLING index entry; under c->mu. */
static void queue_push(struct fill **head, struct fill **tail, struct fill *f)
{
    f->queue_next = NULL;
    if (*tail)
        (*tail)->queue_next = f;
    else
        *head = f;
    *tail = f;
}

/* Takes f out of a queue; false when it is not in it. */
static bool queue_remove(struct fill **head, struct fill **tail, struct fill *f)
{
    struct fill *prev = NULL;
    for (struct fill *q = *head; q; prev = q, q = q->queue_next) {
        if (q != f)
            continue;
        if (prev)
            prev->queue_next = f->queue_next;
        else
            *head = f->queue_next;
        if (*tail == f)
            *tail = prev;
        f->queue_next = NULL;
        return true;
    }
    return false;
}

/* A reader wants a fill that was queued as staging: it moves to the front
 * queue (a reader's miss goes before staging work). Under c->mu. */
static void fill_promote_locked(struct cache *c, struct fill *f)
{
    if (!f->background)
        return;
    f->background = false;
    c->bg_inflight--;
    if (queue_remove(&c->bg_head, &c->bg_tail, f))
        queue_push(&c->queue_head, &c->queue_tail, f);
    pthread_cond_signal(&c->work);
}

static struct fill *fill_new_locked(struct cache *c, const char *bucket, const char *key,
                                    uint64_t id, bool background)
{
    struct fill *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->bucket = strdup(bucket);
    f->key = strdup(key);
    if (!f->bucket || !f->key) {
        free(f->bucket);
        free(f->key);
        free(f);
        return NULL;
    }
    pthread_mutex_init(&f->mu, NULL);
    f->id = id;
    f->refs = 2;   /* the table and the worker that will run it */
    f->state = FILL_QUEUED;
    f->background = background;
    size_t h = hash_name(bucket, key) % FILL_TABLE;
    f->table_next = c->table[h];
    c->table[h] = f;
    if (background) {
        queue_push(&c->bg_head, &c->bg_tail, f);
        c->bg_inflight++;
    } else {
        queue_push(&c->queue_head, &c->queue_tail, f);
        atomic_fetch_add(&c->misses, 1);
    }
    pthread_cond_signal(&c->work);
    atomic_fetch_add(&c->fills_started, 1);
    return f;
}

/* ---- opening ---- */

static int open_data(struct cache *c, uint64_t id, int flags)
{
    return cidx_data_open(c->idx, id, flags, 0644);
}

/* A hit on an object this small reads header and body in one pread, and
 * the gateway sends the body from memory together with the response
 * headers: one syscall and one wakeup of the client instead of a send of
 * the headers, a sendfile and a dup/close of the descriptor
 * (bench/results/ab-small-hits.md). Data starts at CACHE_HDR_ALIGN. */
enum { INLINE_MAX = 16 * 1024 };

/* Reads and decodes the header block of an open data file: one read of
 * cap bytes into buf (the header is usually well under 1 KiB), and a second
 * only for a longer one. *got is what the first read returned. */
static int read_header(int fd, uint8_t *first, size_t cap, size_t *got, struct obj_meta *m,
                       uint64_t *data_off)
{
    ssize_t n = pread(fd, first, cap, 0);
    if (n < 8 || memcmp(first, CACHE_HDR_MAGIC, 4) != 0)
        return -1;
    *got = (size_t)n;
    uint32_t body = 0;
    for (int i = 0; i < 4; i++)
        body |= (uint32_t)first[4 + i] << (8 * i);
    if (body > CACHE_HDR_MAX - 8)
        return -1;
    size_t need = 8 + (size_t)body;
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
    if (needs_revalidation(c, bucket, info->validated_at)) {
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
    int fd = open_data(c, info->id, O_RDONLY);
    int open_err = fd < 0 ? errno : 0;
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    uint64_t data_off = 0;
    uint8_t small[2048];
    uint8_t *first = small;
    size_t cap = sizeof small, got = 0;
    if (info->size <= INLINE_MAX && !c->cf.read_uring) {
        cap = CACHE_HDR_ALIGN + (size_t)info->size;
        first = malloc(cap);
        if (!first) {
            first = small;
            cap = sizeof small;
        }
    }
    bool bad = fd < 0 || read_header(fd, first, cap, &got, &m, &data_off) != 0 ||
               m.size != info->size;
    bool retagged = !bad && revalidated && cache_reval_tags_differ(&cold, &m);
    obj_meta_clear(&cold);
    if (bad || retagged) {
        if (retagged)
            log_msg(LOG_LVL_INFO, "cache", "%s/%s: its tags changed in the cold tier: the "
                    "cached copy is dropped", bucket, key);
        else
            log_msg(LOG_LVL_WARN, "cache", "entry %s/%s has no usable data file (%s): "
                    "dropped", bucket, key, fd < 0 ? strerror(open_err) : "bad header");
        if (fd >= 0)
            close(fd);
        if (first != small)
            free(first);
        obj_meta_clear(&m);
        cidx_unpin(c->idx, info->id);
        cidx_invalidate(c->idx, bucket, key);
        return CACHE_AGAIN;
    }
    if (first != small && data_off + m.size > got) {
        free(first);    /* a long header: the body was not in the read */
        first = small;
    }
    struct cache_obj *o = calloc(1, sizeof *o);
    if (!o) {
        close(fd);
        if (first != small)
            free(first);
        obj_meta_clear(&m);
        cidx_unpin(c->idx, info->id);
        return CACHE_NOMEM;
    }
    o->c = c;
    o->fd = fd;
    o->inline_buf = first != small ? first : NULL;
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
        struct fill *f = table_find(c, bucket, key);
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
            f = fill_new_locked(c, bucket, key, id, false);
            if (!f) {
                cidx_fill_abort(c->idx, id);
                pthread_mutex_unlock(&c->mu);
                return CACHE_NOMEM;
            }
            w->started_fill = true;
        }
        if (may_fill)
            fill_promote_locked(c, f);
        f->refs++;
        pthread_mutex_unlock(&c->mu);

        pthread_mutex_lock(&f->mu);
        if (f->state == FILL_FAILED) {
            enum cache_status r = f->err;
            *bst = f->bst;
            pthread_mutex_unlock(&f->mu);
            fill_unref(c, f);
            return r;
        }
        if (!f->meta_known) {
            waiter_add(f, w, true, 0);
            atomic_fetch_add(&c->waiters_now, 1);
            pthread_mutex_unlock(&f->mu);
            fill_unref(c, f);
            return CACHE_AGAIN;
        }
        struct cache_obj *o = calloc(1, sizeof *o);
        int fd = o ? open_data(c, f->id, O_RDONLY) : -1;
        if (o && fd < 0 && errno == ENOENT && f->state == FILL_DONE) {
            /* Published, then evicted before its worker let go of the fill
             * (eviction under staging pressure): the object is not cached
             * any more. Drop the finished fill from the table and look
             * again - a new miss - rather than read around the cache. */
            pthread_mutex_unlock(&f->mu);
            free(o);
            pthread_mutex_lock(&c->mu);
            if (table_find(c, bucket, key) == f) {
                table_remove(c, f);
                f->refs--;   /* the table's; ours and the worker's remain */
            }
            fill_unref_locked(f);
            pthread_mutex_unlock(&c->mu);
            continue;
        }
        if (!o || fd < 0 || obj_meta_copy_hdrs(meta, &f->meta) != 0) {
            pthread_mutex_unlock(&f->mu);
            if (fd >= 0)
                close(fd);
            free(o);
            fill_unref(c, f);
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
        pthread_mutex_unlock(&f->mu);
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
    if (f->filled > off) {
        uint64_t avail = f->filled - off;
        pthread_mutex_unlock(&f->mu);
        return read_file(o, off, buf, avail < len ? (size_t)avail : len, got);
    }
    if (f->state == FILL_FAILED) {
        enum cache_status r = f->err;
        pthread_mutex_unlock(&f->mu);
        return r;
    }
    waiter_add(f, w, false, off);
    atomic_fetch_add(&o->c->waiters_now, 1);
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
    void *buf = o->inline_buf;
    if (buf)
        *body = o->inline_buf + o->data_off;
    o->inline_buf = NULL;
    return buf;
}

void cache_obj_close(struct cache_obj *o)
{
    if (!o)
        return;
    free(o->inline_buf);
    if (o->fd >= 0)
        close(o->fd);
    if (o->pinned)
        cidx_unpin(o->c->idx, o->id);
    if (o->f)
        fill_unref(o->c, o->f);
    free(o);
}

void cache_invalidate(struct cache *c, const char *bucket, const char *key)
{
    /* The index dooms a FILLING entry (its publish is refused) and drops a
     * READY one; the fill in the table goes on for the readers attached to
     * it, who asked before the write. The next open starts a fresh fill. */
    pthread_mutex_lock(&c->mu);
    struct fill *f = table_find(c, bucket, key);
    if (f) {
        table_remove(c, f);
        fill_unref_locked(f);   /* the table's reference */
    }
    pthread_mutex_unlock(&c->mu);
    cidx_invalidate(c->idx, bucket, key);
}

/* ---- the fill worker ---- */

/* One write in flight: owned by the engine (the kernel) from submit until
 * reaped. */
struct fill_slot {
    uint64_t off;                /* file offset of the write */
    size_t len, done;            /* bytes to write, bytes written */
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

/* Ends f as failed: err is CACHE_BACKEND with the cold tier's bst, or a
 * cache-side status with why (NULL: none), a sentence for prefetch jobs. */
static void fill_fail(struct cache *c, struct fill *f, enum cache_status err,
                      enum backend_status bst, const char *why)
{
    pthread_mutex_lock(&f->mu);
    f->state = FILL_FAILED;
    f->err = err;
    f->bst = bst;
    snprintf(f->why, sizeof f->why, "%s", why ? why : "");
    unsigned woken = waiters_wake(f);
    pthread_mutex_unlock(&f->mu);
    atomic_fetch_sub(&c->waiters_now, woken);
    atomic_fetch_add(&c->fills_failed, 1);
    cidx_fill_abort(c->idx, f->id);
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
        advance += io->slot[io->head].len;
        io->slot[io->head].complete = false;
        io->head = (io->head + 1) % FILL_BUFS;
        io->count--;
    }
    if (advance) {
        pthread_mutex_lock(&f->mu);
        f->filled += advance;
        unsigned woken = waiters_wake(f);
        pthread_mutex_unlock(&f->mu);
        atomic_fetch_sub(&c->waiters_now, woken);
    }
    return 0;
}

static bool stopping(struct cache *c)
{
    pthread_mutex_lock(&c->mu);
    bool s = c->stopping;
    pthread_mutex_unlock(&c->mu);
    return s;
}

/* Makes room once a reservation takes usage above the high watermark. With
 * LRU, eviction goes down to the low watermark (in batches, so a burst of
 * misses does not evict one object per fill). While ordered hints guide
 * eviction, and for staging fills, it evicts only what is needed: a batch
 * takes victims that are still going to be read, each a miss later (the
 * stager checked only the first victim). */
static void make_room(struct cache *c, bool staging)
{
    uint64_t used, reserved, objects;
    cidx_usage(c->idx, &used, &reserved, &objects);
    uint64_t high = c->cf.capacity / 100 * c->cf.high_pct;
    if (used + reserved <= high)
        return;
    uint64_t freed = 0;
    unsigned count = 0;
    bool exact = staging || cidx_get_policy(c->idx) == CIDX_POLICY_NEXT_USE;
    cidx_evict(c->idx, exact ? high : c->cf.capacity / 100 * c->cf.low_pct, &freed, &count);
    atomic_fetch_add(&c->evictions, count);
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

static void run_fill(struct cache *c, struct fill *f, struct fill_io *io)
{
    struct obj_meta meta;
    memset(&meta, 0, sizeof meta);
    struct backend_obj *bo = NULL;
    int fd = -1;
    EVP_MD_CTX *md5 = NULL;
    uint8_t *hdr = NULL;

    char why[CACHE_JOB_MSG_LEN];
    enum backend_status bs = backend_object_open(c->cold, f->bucket, f->key, &meta, &bo);
    if (bs != BACKEND_OK) {
        fill_fail(c, f, CACHE_BACKEND, bs, NULL);
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
        fill_fail(c, f, CACHE_IO, BACKEND_OK, why);
        goto out;
    }
    pthread_mutex_lock(&c->mu);
    bool staging = f->background;
    pthread_mutex_unlock(&c->mu);
    make_room(c, staging);
    fd = open_data(c, f->id, O_WRONLY | O_CREAT | O_TRUNC);
    int oe = errno;
    size_t hlen = 0;
    hdr = calloc(1, CACHE_HDR_MAX);
    if (fd < 0 || !hdr || cache_hdr_encode(&meta, hdr, CACHE_HDR_MAX, &hlen) != 0) {
        snprintf(why, sizeof why, "cannot create the cache file in %s: %s", c->dir,
                 fd < 0 ? strerror(oe) : hdr ? "metadata too large" : "out of memory");
        log_msg(LOG_LVL_ERROR, "cache", "%s/%s: %s", f->bucket, f->key, why);
        fill_fail(c, f, CACHE_IO, BACKEND_OK, why);
        if (fd < 0)
            cache_dirwatch_report(c->watch, oe);
        goto out;
    }
    uint64_t data_off = cache_hdr_data_offset(hlen);
    /* the header block goes through the engine like every other write, padded
     * to where the data starts: the file's size is then always data_off +
     * object size, which the index's sweep checks (an empty object too) */
    io->head = io->count = 0;
    int rc = write_sync(io, fd, hdr, (size_t)data_off, 0);
    if (rc < 0)
        goto io_fail;
    pthread_mutex_lock(&f->mu);
    f->data_off = data_off;
    f->meta = meta;
    memset(&meta, 0, sizeof meta);   /* the fill owns the strings now */
    f->meta_known = true;
    f->state = FILL_RUNNING;
    unsigned woken = waiters_wake(f);
    uint64_t size = f->meta.size;
    bool verify = cache_etag_is_md5(f->meta.etag);
    char want_md5[72];
    memcpy(want_md5, f->meta.etag, sizeof want_md5);
    pthread_mutex_unlock(&f->mu);
    atomic_fetch_sub(&c->waiters_now, woken);

    md5 = verify ? EVP_MD_CTX_new() : NULL;
    if (verify && (!md5 || !EVP_DigestInit_ex(md5, EVP_md5(), NULL))) {
        fill_fail(c, f, CACHE_NOMEM, BACKEND_OK, "out of memory");
        goto out;
    }
    unsigned next_buf = 0;
    /* The first pieces are small so the first reader's first byte does not
     * wait for a whole megabyte of a slow cold tier (20 ms at 100 MiB/s);
     * they double up to FILL_BUF, which keeps large objects efficient. */
    size_t piece = 64 * 1024;
    for (uint64_t off = 0; off < size;) {
        if (stopping(c)) {
            fill_fail(c, f, CACHE_IO, BACKEND_OK, "the gateway is stopping");
            goto out;
        }
        while (io->count == FILL_BUFS)
            if ((rc = reap_one(c, f, io, fd)) < 0)
                goto io_fail;
        unsigned s = (io->head + io->count) % FILL_BUFS;
        unsigned b = next_buf;
        next_buf = (next_buf + 1) % FILL_BUFS;
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
                fill_fail(c, f, CACHE_BACKEND, bs != BACKEND_OK ? bs : BACKEND_IO, NULL);
                goto out;
            }
            got += n;
        }
        atomic_fetch_add(&c->backend_bytes, got);
        if (md5 && !EVP_DigestUpdate(md5, io->buf[b], got)) {
            fill_fail(c, f, CACHE_NOMEM, BACKEND_OK, "out of memory");
            goto out;
        }
        io->slot[s] = (struct fill_slot){ data_off + off, got, 0, false, b };
        io->count++;
        if ((rc = submit_write(io, fd, s)) < 0)
            goto io_fail;
        off += got;
    }
    while (io->count)
        if ((rc = reap_one(c, f, io, fd)) < 0)
            goto io_fail;
    if (md5) {
        unsigned char d[16];
        unsigned dl = 0;
        char hex[33];
        EVP_DigestFinal_ex(md5, d, &dl);
        for (int i = 0; i < 16; i++)
            snprintf(hex + 2 * i, 3, "%02x", d[i]);
        if (strcasecmp(hex, want_md5) != 0) {
            log_msg(LOG_LVL_ERROR, "cache", "%s/%s: bytes from the cold tier do not match its "
                    "ETag (md5 %s, etag %s): not cached", f->bucket, f->key, hex, want_md5);
            fill_fail(c, f, CACHE_BACKEND, BACKEND_IO, NULL);
            goto out;
        }
    }
    /* durable before published: a published entry always has its bytes */
    if ((rc = cache_eng_datasync(io->eng, fd)) < 0)
        goto io_fail;
    pthread_mutex_lock(&f->mu);
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
    woken = waiters_wake(f);
    pthread_mutex_unlock(&f->mu);
    atomic_fetch_sub(&c->waiters_now, woken);
    atomic_fetch_add(&c->fills_done, 1);
    goto out;

io_fail:
    snprintf(why, sizeof why, "write to the cache file in %s failed: %s", c->dir,
             strerror(-rc));
    log_msg(LOG_LVL_ERROR, "cache", "%s/%s: %s", f->bucket, f->key, why);
    drain(io);
    fill_fail(c, f, CACHE_IO, BACKEND_OK, why);
    if (rc == -ENOSPC || rc == -EDQUOT)
        shrink_on_full_disk(c);
    cache_dirwatch_report(c->watch, -rc);
out:
    drain(io);   /* before the buffers are reused and the file closed */
    if (md5)
        EVP_MD_CTX_free(md5);
    free(hdr);
    if (fd >= 0)
        close(fd);
    if (bo)
        backend_obj_close(bo);
    obj_meta_clear(&meta);
    fill_retire(c, f);
}

static void *worker_main(void *arg)
{
    struct cache *c = arg;
    struct fill_io io;
    memset(&io, 0, sizeof io);
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
    bool ok = rc == 0 && io.buf[0] && io.buf[1];
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
            queue_remove(&c->queue_head, &c->queue_tail, f);
        else
            queue_remove(&c->bg_head, &c->bg_tail, f);
        pthread_mutex_unlock(&c->mu);
        if (ok) {
            run_fill(c, f, &io);
        } else {
            fill_fail(c, f, CACHE_IO, BACKEND_OK, why);
            fill_retire(c, f);
        }
    }
    for (int i = 0; i < FILL_BUFS; i++)
        free(io.buf[i]);
    cache_eng_free(io.eng);
    return NULL;
}

/* Resumes waiters whose deadline passed; their next call answers
 * CACHE_TIMEOUT. A suspended connection never times out by itself. */
static void *reaper_main(void *arg)
{
    struct cache *c = arg;
    for (;;) {
        struct timespec ts = { 0, REAPER_MS * 1000000L };
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&c->mu);
        if (c->stopping) {
            pthread_mutex_unlock(&c->mu);
            return NULL;
        }
        for (size_t i = 0; i < FILL_TABLE; i++) {
            for (struct fill *f = c->table[i]; f; f = f->table_next) {
                pthread_mutex_lock(&f->mu);
                struct cache_waiter **pp = &f->waiters;
                while (*pp) {
                    struct cache_waiter *w = *pp;
                    if (!deadline_passed(&w->deadline)) {
                        pp = &w->next;
                        continue;
                    }
                    *pp = w->next;
                    w->queued = false;
                    w->expired = true;
                    w->resume(w->arg);
                    atomic_fetch_sub(&c->waiters_now, 1);
                }
                pthread_mutex_unlock(&f->mu);
            }
        }
        pthread_mutex_unlock(&c->mu);
    }
}

/* ---- open, stop, close ---- */

/* Locks the cache directory for the cache's life, before the index is read:
 * two gateways on one directory would overwrite each other's snapshots. */
/* One gateway per cache directory. Only another holder stops the start: a
 * directory that cannot hold the lock now (missing and not creatable,
 * read-only) is one the cache cannot use either, and the watcher takes the
 * lock when it takes the directory back (cache_dir_claim). */
static int cache_dir_lock(struct cache *c)
{
    char msg[768];
    int e;
    switch (conf_dirlock_take(c->dir, "cache directory", &c->lock, &e, msg, sizeof msg)) {
    case CONF_DIRLOCK_OK:
        return 0;
    case CONF_DIRLOCK_UNSUPPORTED:
    case CONF_DIRLOCK_ERRNO:
        log_msg(LOG_LVL_WARN, "cache", "%s", msg);
        return 0;
    case CONF_DIRLOCK_BUSY:
        break;
    }
    log_msg(LOG_LVL_ERROR, "cache", "%s", msg);
    return -1;
}

/* The watcher is about to (re)attach the index to the directory: the lock
 * file went with a deleted directory, so the lock is taken anew on the
 * directory as it is now. Non-zero (why says it) keeps the directory down. */
static int cache_dir_claim(void *arg, char *why, size_t len)
{
    struct cache *c = arg;
    struct conf_dirlock *old = c->lock;
    c->lock = NULL;
    conf_dirlock_release(old);   /* ours: released before we take the new file's */
    int e;
    switch (conf_dirlock_take(c->dir, "cache directory", &c->lock, &e, why, len)) {
    case CONF_DIRLOCK_OK:
        return 0;
    case CONF_DIRLOCK_UNSUPPORTED:
        log_msg(LOG_LVL_WARN, "cache", "%s", why);
        return 0;
    case CONF_DIRLOCK_BUSY:
    case CONF_DIRLOCK_ERRNO:
        break;
    }
    return -1;
}

int cache_open(const struct cache_conf *cf, struct backend *cold, struct cache **out)
{
    struct cache *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    c->cf = *cf;
    if (!c->cf.high_pct || c->cf.high_pct > 100)
        c->cf.high_pct = 90;
    if (!c->cf.low_pct || c->cf.low_pct >= c->cf.high_pct)
        c->cf.low_pct = c->cf.high_pct > 10 ? c->cf.high_pct - 10 : c->cf.high_pct / 2;
    if (!c->cf.fill_workers)
        c->cf.fill_workers = 8;
    if (!c->cf.job_keep_s)
        c->cf.job_keep_s = 3600;
    c->cold = cold;
    cache_reval_init(&c->reval, cf->revalidate_timeout_ms);
    c->dir = strdup(cf->dir);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->work, NULL);
    char why[320];
    bool up = false;
    /* the lock, the engine, then the index: a directory that cannot be used
     * now gives an index not attached to it (up false, and why), not a
     * failure; only another gateway holding it stops the start */
    int rc = c->dir ? cache_dir_lock(c) : -1;
    if (rc == 0)
        rc = cache_eng_choose(cf->engine, cf->read_uring, &c->engine);
    if (rc == 0)
        rc = cache_dir_open_index(c->dir, c->cf.capacity, &c->idx, &up, why, sizeof why);
    if (rc == 0 && cache_dirwatch_start(c->idx, up, why, cf->dirwatch_ms, cache_dir_claim, c,
                                        &c->watch) != 0) {
        log_msg(LOG_LVL_ERROR, "cache", "cannot start the cache directory's watcher");
        cidx_close(c->idx);
        rc = -1;
    }
    if (rc != 0) {   /* logged */
        conf_dirlock_release(c->lock);
        pthread_cond_destroy(&c->work);
        pthread_mutex_destroy(&c->mu);
        free(c->dir);
        free(c);
        return -1;
    }
    c->workers = calloc(c->cf.fill_workers, sizeof *c->workers);
    for (unsigned i = 0; c->workers && i < c->cf.fill_workers; i++) {
        if (pthread_create(&c->workers[i], NULL, worker_main, c) != 0)
            break;
        c->n_workers++;
    }
    c->reaper_started = pthread_create(&c->reaper, NULL, reaper_main, c) == 0;
    /* Staging uses at most half the workers, so reader misses always find one. */
    c->bg_limit = c->n_workers > 1 ? c->n_workers / 2 : 1;
    c->pf = cache_prefetch_new(c);
    if (c->n_workers == 0 || !c->reaper_started || !c->pf) {
        log_msg(LOG_LVL_ERROR, "cache", "cannot start the fill workers");
        cache_stop(c);
        cache_close(c);
        return -1;
    }
    *out = c;
    return 0;
}

void cache_stop(struct cache *c)
{
    pthread_mutex_lock(&c->mu);
    if (c->stopping) {
        pthread_mutex_unlock(&c->mu);
        return;
    }
    c->stopping = true;
    pthread_cond_broadcast(&c->work);
    /* fills that never started: nobody else will end them */
    if (c->bg_head) {
        if (c->queue_tail)
            c->queue_tail->queue_next = c->bg_head;
        else
            c->queue_head = c->bg_head;
        c->bg_head = c->bg_tail = NULL;
    }
    struct fill *q = c->queue_head;
    c->queue_head = c->queue_tail = NULL;
    struct cache_prefetch *pf = c->pf;
    pthread_mutex_unlock(&c->mu);
    if (pf)
        cache_prefetch_stop(pf);   /* no new staging from here on */
    while (q) {
        struct fill *next = q->queue_next;
        fill_fail(c, q, CACHE_IO, BACKEND_OK, "the gateway is stopping");
        fill_retire(c, q);
        q = next;
    }
    for (unsigned i = 0; i < c->n_workers; i++)
        pthread_join(c->workers[i], NULL);
    c->n_workers = 0;
    if (c->reaper_started)
        pthread_join(c->reaper, NULL);
    c->reaper_started = false;
}

void cache_close(struct cache *c)
{
    if (!c)
        return;
    cache_stop(c);
    cache_dirwatch_stop(c->watch);   /* no reset of the index from here on */
    if (c->pf)
        cache_prefetch_free(c->pf);
    cidx_close(c->idx);
    conf_dirlock_release(c->lock);   /* after the index is persisted */
    free(c->workers);
    pthread_cond_destroy(&c->work);
    pthread_mutex_destroy(&c->mu);
    free(c->dir);
    free(c);
}

void cache_stats_get(struct cache *c, struct cache_stats *out)
{
    memset(out, 0, sizeof *out);
    out->hits = atomic_load(&c->hits);
    out->misses = atomic_load(&c->misses);
    out->fills_started = atomic_load(&c->fills_started);
    out->fills_done = atomic_load(&c->fills_done);
    out->fills_failed = atomic_load(&c->fills_failed);
    out->fill_waiters = atomic_load(&c->waiters_now);
    out->evictions = atomic_load(&c->evictions);
    out->backend_bytes = atomic_load(&c->backend_bytes);
    out->revalidations = atomic_load(&c->revalidations);
    cache_reval_stats(&c->reval, &out->revalidation_timeouts, &out->revalidations_skipped);
    uint64_t reserved;
    cidx_usage(c->idx, &out->bytes_used, &reserved, &out->objects);
    out->capacity = c->cf.capacity;
    out->engine = cache_eng_name(c->engine);
    out->dir_resets = cache_dirwatch_resets(c->watch);
}

bool cache_ready(struct cache *c, char *why, size_t len)
{
    return cache_dirwatch_ready(c->watch, why, len);
}

/* ---- staging, for prefetch jobs ---- */

/* Fills *err (when asked for) with why staging could not start. */
static enum cache_stage_result stage_error(struct cache_stage_end *err, enum cache_status st,
                                           const char *why)
{
    if (err)
        *err = (struct cache_stage_end){ .err = st, .bst = BACKEND_OK, .why = why };
    return CACHE_STAGE_ERROR;
}

enum cache_stage_result cache_stage(struct cache *c, const char *bucket, const char *key,
                                    struct cache_stage_obs *obs, uint64_t *size,
                                    struct cache_stage_end *err)
{
    static _Thread_local char why[CACHE_JOB_MSG_LEN];
    if (!cache_ready(c, why, sizeof why))
        return stage_error(err, CACHE_IO, why);
    struct cidx_info info;
    if (cidx_lookup(c->idx, bucket, key, &info) == CIDX_OK) {
        *size = info.size;
        return CACHE_STAGE_CACHED;
    }
    pthread_mutex_lock(&c->mu);
    if (c->stopping) {
        pthread_mutex_unlock(&c->mu);
        return stage_error(err, CACHE_IO, "the gateway is stopping");
    }
    struct fill *f = table_find(c, bucket, key);
    if (f) {
        obs->next = f->observers;
        f->observers = obs;
        pthread_mutex_unlock(&c->mu);
        return CACHE_STAGE_STARTED;
    }
    if (c->bg_inflight >= c->bg_limit) {
        pthread_mutex_unlock(&c->mu);
        return CACHE_STAGE_BUSY;
    }
    uint64_t id;
    enum cidx_state state;
    enum cidx_status is = cidx_begin_fill(c->idx, bucket, key, &id, &state);
    if (is == CIDX_EXISTS && state == CIDX_STATE_READY) {
        pthread_mutex_unlock(&c->mu);
        if (cidx_lookup(c->idx, bucket, key, &info) == CIDX_OK) {
            *size = info.size;
            return CACHE_STAGE_CACHED;
        }
        return CACHE_STAGE_BUSY;   /* evicted meanwhile: the next round stages it */
    }
    if (is != CIDX_OK) {
        pthread_mutex_unlock(&c->mu);
        return stage_error(err, is == CIDX_NOMEM ? CACHE_NOMEM : CACHE_IO,
                           is == CIDX_NOMEM ? "out of memory"
                                            : "the cache index refused the key");
    }
    f = fill_new_locked(c, bucket, key, id, true);
    if (!f) {
        cidx_fill_abort(c->idx, id);
        pthread_mutex_unlock(&c->mu);
        return stage_error(err, CACHE_NOMEM, "out of memory");
    }
    obs->next = NULL;
    f->observers = obs;
    pthread_mutex_unlock(&c->mu);
    return CACHE_STAGE_STARTED;
}

unsigned cache_stage_inflight(struct cache *c, unsigned *limit)
{
    pthread_mutex_lock(&c->mu);
    unsigned n = c->bg_inflight;
    *limit = c->bg_limit;
    pthread_mutex_unlock(&c->mu);
    return n;
}

struct cidx *cache_index_of(struct cache *c)
{
    return c->idx;
}

struct cache_prefetch *cache_prefetch_of(struct cache *c)
{
    return c->pf;
}

uint64_t cache_capacity_of(const struct cache *c)
{
    return c->cf.capacity;
}

unsigned cache_low_pct_of(const struct cache *c)
{
    return c->cf.low_pct;
}

unsigned cache_high_pct_of(const struct cache *c)
{
    return c->cf.high_pct;
}

unsigned cache_job_keep_s_of(const struct cache *c)
{
    return c->cf.job_keep_s;
}

const char *cache_dir_of(const struct cache *c)
{
    return c->dir;
}

static void warm_done(struct cache_stage_obs *obs, const struct cache_stage_end *end)
{
    (void)end;
    free(obs);
}

void cache_warm(struct cache *c, const char *bucket, const char *key)
{
    struct cache_stage_obs *obs = calloc(1, sizeof *obs);
    if (!obs)
        return;
    obs->done = warm_done;
    uint64_t size;
    if (cache_stage(c, bucket, key, obs, &size, NULL) != CACHE_STAGE_STARTED)
        free(obs);
}
