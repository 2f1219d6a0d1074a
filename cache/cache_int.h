/* cache/cache_int.h - internals of the cache tier, shared by its files and
 * used by its unit tests: the header block at the start of every cache data
 * file, revalidation, the engine's state (struct cache, struct fill) with the
 * functions its files share (cache.c's opening comment maps them), and what
 * staging offers prefetch jobs. Only cache/ files include this. */
#ifndef SHARDGATE_CACHE_INT_H
#define SHARDGATE_CACHE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "cache.h"
#include "checksum.h"

/* A cache data file: [header block, padded to 4 KiB][object bytes]. The
 * header holds what a hit needs to answer like the cold tier (size, ETag,
 * Last-Modified, stored headers). Whether the file is complete is not the
 * file's business: only the index's published entries are served. */
#define CACHE_HDR_MAGIC "SGC1"
#define CACHE_HDR_ALIGN 4096u
#define CACHE_HDR_MAX (64u * 1024)
/* A hit on an object this small reads header and body in one pread, sends
 * the body from memory with the response headers, and keeps the buffer in
 * the memory tier (read.c, memtier.c). */
#define CACHE_INLINE_MAX (16u * 1024)

/* Encodes m into buf (cap bytes); *len gets the header's length (the data
 * starts at cache_hdr_data_offset(*len)). 0, or -1 when it does not fit. */
int cache_hdr_encode(const struct obj_meta *m, uint8_t *buf, size_t cap, size_t *len);
/* The length of the header block that starts buf, of which n bytes were read: 8 +
 * its body's length (may be more than n), or 0 when buf does not start with one. */
size_t cache_hdr_length(const uint8_t *buf, size_t n);
/* Decodes a header block; m (cleared by the caller) gets new strings. 0 or -1. */
int cache_hdr_decode(const uint8_t *buf, size_t len, struct obj_meta *m);
uint64_t cache_hdr_data_offset(size_t hdr_len);
/* read.c: keeps a copy of entry id's header block (len bytes) in the header
 * tier, when there is one. Any thread. */
void cache_hdr_keep(struct cache *c, uint64_t id, const uint8_t *hdr, size_t len);

/* Is etag (bare) a plain MD5 - 32 hex digits - that a fill can verify? */
int cache_etag_is_md5(const char *etag);

/* ---- the end of a fill, off its worker (publish.c, fill_worker.c) ---- */

struct fill;

/* fdatasyncs a fill's complete, checked data file, publishes it to the
 * index and retires the fill (or fails it when the sync fails); closes fd.
 * Blocks for the sync. */
void cache_fill_finish(struct cache *c, struct fill *f, int fd);
/* Hands that to a publisher thread: true when one took it (it owns f's
 * retirement and fd from here), false when the queue is full or stopped
 * (the caller finishes the fill itself). */
bool cache_publish_later(struct cache *c, struct fill *f, int fd);
int cache_publisher_start(struct cache *c);   /* 0, or -1: no thread started */
void cache_publisher_stop(struct cache *c);   /* finishes what is queued, joins */

/* ---- what a fill checks the cold tier's bytes against (verify.c) ---- */

#define CACHE_VERIFY_VALUE 96   /* a checksum's base64 or an MD5's hex, with NUL */

struct cache_verify {
    enum cache_check kind;
    struct sg_ck ck;                  /* CACHE_CHECK_CHECKSUM */
    struct evp_md_ctx_st *md5;        /* CACHE_CHECK_MD5 */
    char want[CACHE_VERIFY_VALUE];    /* the cold tier's value */
    char what[16];                    /* "crc64nvme", "md5": for the log */
};

/* Picks the cheapest check the object's metadata offers (a full-object CRC,
 * else an MD5 ETag, else a full-object SHA, else none). 0, or -1 when out
 * of memory. */
int cache_verify_begin(struct cache_verify *v, const struct obj_meta *m);
int cache_verify_update(struct cache_verify *v, const void *buf, size_t n);   /* 0 / -1 */
/* Do the bytes match? `got` receives what they gave (empty for none). */
bool cache_verify_end(struct cache_verify *v, char got[CACHE_VERIFY_VALUE]);
void cache_verify_free(struct cache_verify *v);

/* ---- revalidation of a hit (revalidate.c), embedded in struct cache ---- */

struct cache_reval {
    unsigned timeout_ms;                   /* each check's deadline */
    _Atomic int_fast64_t holdoff_until;    /* CLOCK_MONOTONIC ms: skip checks until */
    _Atomic uint_fast64_t timeouts;        /* checks that timed out */
    _Atomic uint_fast64_t skipped;         /* checks skipped in a hold-off */
};
/* timeout_ms 0: 1000. */
void cache_reval_init(struct cache_reval *rv, unsigned timeout_ms);
/* HEADs bucket/key on the cold tier within the deadline into *meta (caller
 * clears). BACKEND_TIMEOUT when it timed out, or when it was skipped because
 * a check timed out moments ago (*asked false): either way the caller serves
 * the cached copy. Logs the timeout. Any thread. */
enum backend_status cache_reval_head(struct cache_reval *rv, struct backend *cold,
                                     const char *bucket, const char *key,
                                     struct obj_meta *meta, bool *asked);
void cache_reval_stats(struct cache_reval *rv, uint64_t *timeouts, uint64_t *skipped);
/* Do a revalidation's answer (cold) and a cached copy's metadata disagree
 * on the object's tags? PutObjectTagging changes neither ETag nor size, so
 * the tags a GET/HEAD reports - a cold S3's x-amz-tagging-count, a
 * directory store's x-amz-tagging - are compared too. */
bool cache_reval_tags_differ(const struct obj_meta *cold, const struct obj_meta *cached);

/* ---- the engine's state, shared by cache.c, read.c, fill.c, fill_worker.c,
 * stage.c and revalidate.c ---- */

enum {
    FILL_TABLE = 1024,           /* buckets of the fill table (fills in flight are few) */
    FAILED_RECENT = 64,          /* failed fills remembered for their returning readers */
};

enum fill_state { FILL_QUEUED, FILL_RUNNING, FILL_DONE, FILL_FAILED };

/* A fill worker's buffers (fill_worker.c), each 1 MiB: one is read from the
 * cold tier while the others are written. */
#define CACHE_FILL_BUFS 4

/* A piece of a fill in one of its worker's buffers, which the fill's readers
 * copy from (read.c) from the moment it was read from the cold tier - before
 * it is in the file - until the worker takes the buffer back for another
 * piece, after its write completed and once no reader is copying (pins). */
struct fill_window {
    const unsigned char *p;      /* the bytes; len 0: no window */
    uint64_t off;                /* object offset of p[0] */
    size_t len;
    unsigned pins;               /* readers copying from it now */
};

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
    uint64_t avail;              /* object bytes readers may have (>= filled): those
                                    below filled from the file, the rest from win */
    struct fill_window win[CACHE_FILL_BUFS];
    pthread_cond_t win_cv;       /* the worker waits here for a window's pins */
    bool win_waiting;
    bool direct;                 /* written with O_DIRECT: not in the page cache (its
                                    readers read ahead only below `filled`, read.c) */
    enum cache_status err;       /* FILL_FAILED: why */
    enum backend_status bst;
    struct backend_cold_error cold; /* bst == BACKEND_COLD_ERROR: the cold tier's answer,
                                       handed to each reader's thread */
    char why[CACHE_JOB_MSG_LEN]; /* FILL_FAILED on the cache side: a sentence for jobs */
    bool withdrawn;              /* FILL_FAILED: a staging fill given up before its first
                                    byte (fill_worker.c evicts_sooner): stage it later */
    struct cache_waiter *waiters;
    /* waiting for its sync and publish (publish.c); under c->pub_mu */
    struct fill *pub_next;
    int pub_fd;
};

struct cache {
    struct cidx *idx;
    struct backend *cold;
    struct cache_conf cf;        /* strings and bucket table borrowed */
    char *dir;
    struct sg_dirlock *lock;     /* one gateway per cache directory (NULL: no flock) */

    pthread_mutex_t mu;
    pthread_cond_t work;         /* signalled when the queue grows or on stop */
    struct fill *table[FILL_TABLE];
    /* The last fills that failed, for a reader woken by a fill's metadata
     * that comes back after the fill failed (and maybe left the table): it
     * takes that failure rather than start another fill. A ring. */
    struct {
        uint64_t id;
        enum cache_status err;
        enum backend_status bst;
        struct backend_cold_error cold;
    } failed[FAILED_RECENT];
    unsigned failed_next;
    struct fill *queue_head, *queue_tail;         /* reader misses: first */
    struct fill *bg_head, *bg_tail;               /* staging: when no miss waits */
    unsigned bg_inflight, bg_limit;               /* staging fills queued or running */
    bool stopping;
    struct cache_prefetch *pf;
    pthread_t *workers;
    unsigned n_workers;
    pthread_t reaper;
    bool reaper_started;
    /* publish.c: finished fills waiting for their sync, and its threads */
    pthread_mutex_t pub_mu;
    pthread_cond_t pub_cv;
    struct fill *pub_head, *pub_tail;   /* under pub_mu */
    unsigned pub_len;
    bool pub_stop;
    pthread_t *publishers;
    unsigned n_publishers;
    enum cache_engine engine;    /* URING or THREADS: decided once at open */
    struct cache_dirwatch *watch;
    struct cache_mem *mem;       /* small objects in memory (NULL: cache.memory 0) */
    struct cache_mem *hdrs;      /* data files' header blocks (NULL: cache.header_memory 0) */

    atomic_uint_fast64_t hits, misses, fills_started, fills_done, fills_failed;
    atomic_uint_fast64_t fills_withdrawn;   /* of fills_failed: staging fills given up */
    atomic_uint_fast64_t fill_bytes_direct, fill_bytes_buffered;  /* how fills were written */
    atomic_uint_fast64_t fill_read_window, fill_read_file;  /* fill readers' bytes, by source */
    atomic_bool fill_direct_off; /* O_DIRECT refused at a write: later fills buffered */
    atomic_uint_fast64_t fill_checks[CACHE_CHECKS];
    atomic_uint_fast64_t waiters_now, backend_bytes, revalidations, evictions;
    struct cache_reval reval;    /* revalidate.c: deadline, hold-off, counters */
};

/* memtier.c: small cached objects kept in memory, by entry id. A blob is
 * a reference-counted buffer (header block and body of a data file; in the
 * header tier, c->hdrs, the header block alone); cache_mem_get returns one
 * with a reference taken, or NULL; cache_mem_put takes a reference of its
 * own when it keeps b. Any thread. */
struct cache_mem;
struct cache_blob;
struct cache_blob *cache_blob_new(size_t len);
/* Gives back all but len bytes of a blob nobody else holds yet (may move it). */
struct cache_blob *cache_blob_shrink(struct cache_blob *b, size_t len);
uint8_t *cache_blob_data(struct cache_blob *b);
size_t cache_blob_len(const struct cache_blob *b);
void cache_blob_unref(struct cache_blob *b);
/* NULL for a capacity of 0; unit: the size of a typical buffer (sizes the table) */
struct cache_mem *cache_mem_new(uint64_t capacity, size_t unit);
struct cache_blob *cache_mem_get(struct cache_mem *m, uint64_t id);
void cache_mem_put(struct cache_mem *m, uint64_t id, struct cache_blob *b);
void cache_mem_stats(struct cache_mem *m, uint64_t *hits, uint64_t *bytes, uint64_t *objects);
void cache_mem_free(struct cache_mem *m);

/* revalidate.c: must a READY entry of bucket, validated at at_ms (cidx_wall_ms),
 * be checked against the cold tier before it is served? Any thread. */
bool cache_needs_revalidation(const struct cache *c, const char *bucket, int64_t at_ms);

/* fill.c: single flight. Lock order c->mu, then f->mu. */
/* Queues w on f until f's metadata is known (for_meta) or more than need
 * bytes are filled, counts it in c->waiters_now and suspends it
 * (w->suspend). Under f->mu. */
void cache_waiter_add(struct cache *c, struct fill *f, struct cache_waiter *w, bool for_meta,
                      uint64_t need);
/* Resumes the waiters whose condition holds now (all of them once f ended),
 * each uncounted from c->waiters_now before it resumes (its answer may reach
 * the client at once). Under f->mu. */
void cache_waiters_wake(struct cache *c, struct fill *f);
/* The fill in flight for bucket/key in the table, or NULL. Under c->mu. */
struct fill *cache_table_find(struct cache *c, const char *bucket, const char *key);
/* The same, but a fill that failed is not one: it leaves the table here (its
 * waiters keep their failure) so that the caller starts a fresh fill rather
 * than answer with an old failure. Under c->mu. */
struct fill *cache_table_find_live(struct cache *c, const char *bucket, const char *key);
/* Did fill id fail lately (c->failed)? Then *err, *bst say how (a cold
 * tier's own error handed to this thread). Under c->mu. */
bool cache_fill_failed_recently(const struct cache *c, uint64_t id, enum cache_status *err,
                                enum backend_status *bst);
/* Takes f out of the table; the caller drops the table's reference. Under c->mu. */
void cache_table_remove(struct cache *c, struct fill *f);
/* Takes f out of the table if it still is the table's fill for its key, and
 * drops the table's reference (never the last: the caller holds one). Under
 * c->mu. */
void cache_fill_untable_locked(struct cache *c, struct fill *f);
/* Drops one reference to f; the last frees it. Under c->mu (cache_fill_unref
 * takes it). */
void cache_fill_unref_locked(struct fill *f);
void cache_fill_unref(struct cache *c, struct fill *f);
/* f's worker is done with it (it ended, DONE or FAILED): drops the worker's
 * reference and the table's, and tells the prefetch observers how f ended.
 * No lock held. */
void cache_fill_retire(struct cache *c, struct fill *f);
/* Takes f out of a queue (c->queue_*, c->bg_*); false when it is not in it.
 * Under c->mu. */
bool cache_queue_remove(struct fill **head, struct fill **tail, struct fill *f);
/* A reader wants f, queued as staging: it moves to the reader queue. Under c->mu. */
void cache_fill_promote_locked(struct cache *c, struct fill *f);
/* A new fill of the FILLING index entry id: in the table and queued
 * (background: behind the reader misses), with two references (the table's
 * and its worker's). NULL when out of memory. Under c->mu. */
struct fill *cache_fill_new_locked(struct cache *c, const char *bucket, const char *key,
                                   uint64_t id, bool background);
/* Opens index entry id's data file (cidx_data_open); -1 with errno. */
int cache_open_data(struct cache *c, uint64_t id, int flags);
/* A failed fill's BACKEND_COLD_ERROR answer, handed to the calling (a
 * reader's) thread for the gateway (backend_cold_error_take). */
void cache_cold_error_hand(enum backend_status bst, const struct backend_cold_error *cold);
/* Ends f as failed - err is CACHE_BACKEND with the cold tier's bst, or a
 * cache-side status with why (NULL: none), a sentence for prefetch jobs -,
 * resumes its waiters and drops its index entry. No lock held. */
void cache_fill_fail(struct cache *c, struct fill *f, enum cache_status err,
                     enum backend_status bst, const char *why);
/* The reaper thread (arg: the cache): resumes waiters whose deadline passed,
 * until c->stopping. */
void *cache_reaper_main(void *arg);

/* fill_worker.c: a fill worker thread (arg: the cache): runs the queued
 * fills, reader misses first, until c->stopping. */
void *cache_worker_main(void *arg);

/* ---- between the fill engine (stage.c) and prefetch jobs (prefetch.c) ---- */

struct cache;
struct cidx;
struct cache_prefetch;

/* How a staged object's fill ended, or why staging could not start it. */
struct cache_stage_end {
    bool ok;
    uint64_t size;               /* ok: the object's size */
    enum cache_status err;       /* !ok: CACHE_BACKEND (bst: what the cold tier answered), or
                                    a cache-side failure (CACHE_IO, CACHE_NOMEM...) */
    enum backend_status bst;
    const char *why;             /* !ok: a sentence on a cache-side failure, or ""; valid
                                    during the call */
    bool withdrawn;              /* !ok: not a failure - making room would have evicted an
                                    object needed sooner than the observers' use: try later */
};

/* Told when a staged object's fill ends. Called from a fill worker with no
 * cache lock held; the observer is the job's to free. */
struct cache_stage_obs {
    void (*done)(struct cache_stage_obs *obs, const struct cache_stage_end *end);
    struct cache_stage_obs *next;   /* private to the engine (fill.c, stage.c) */
    void *job;
    size_t index;
    uint64_t use;                   /* the key's next use on the use clock, or
                                       CIDX_NEXT_USE_NONE (unordered jobs) */
};

enum cache_stage_result {
    CACHE_STAGE_CACHED,    /* already published: *size set, obs not used */
    CACHE_STAGE_STARTED,   /* a fill started or was joined: obs->done will be called */
    CACHE_STAGE_BUSY,      /* the background fill limit is reached: try later */
    CACHE_STAGE_ERROR,     /* cannot stage (stopping, no memory, index refused) */
};

/* Stages bucket/key with no reader: a background fill (reader misses always
 * go first), or joins the fill in progress. CACHE_STAGE_ERROR fills *err
 * (may be NULL) with the reason. Any thread. */
enum cache_stage_result cache_stage(struct cache *c, const char *bucket, const char *key,
                                    struct cache_stage_obs *obs, uint64_t *size,
                                    struct cache_stage_end *err);
/* Background fills queued or running now, and the limit. */
unsigned cache_stage_inflight(struct cache *c, unsigned *limit);
struct cidx *cache_index_of(struct cache *c);
struct cache_prefetch *cache_prefetch_of(struct cache *c);
uint64_t cache_capacity_of(const struct cache *c);
unsigned cache_low_pct_of(const struct cache *c);
unsigned cache_high_pct_of(const struct cache *c);
unsigned cache_job_keep_s_of(const struct cache *c);
const char *cache_dir_of(const struct cache *c);

/* prefetch.c: created and ended by cache_open / cache_stop / cache_close. */
struct cache_prefetch *cache_prefetch_new(struct cache *c);
void cache_prefetch_stop(struct cache_prefetch *pf);
void cache_prefetch_free(struct cache_prefetch *pf);
/* A fill of bucket/key is about to be published as index entry id (still
 * FILLING): declares its next use if an ordered job will read it, and pins
 * it for pinned jobs. From the fill's worker, no lock held. */
void cache_prefetch_on_ready(struct cache_prefetch *pf, const char *bucket, const char *key,
                             uint64_t id);

#endif
