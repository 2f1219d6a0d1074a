/* cache/cache.h - the NVMe cache tier: objects read from the cold tier are
 * kept as files in a local cache directory. A miss starts one *fill*: a fill
 * worker reads the object from the cold tier, writes it to its cache file
 * through io_uring, and every reader of that object - the one that missed,
 * later ones, ranges, HEADs - reads from the same fill as the bytes land.
 * The entry is published only when complete and verified.
 *
 * The gateway never blocks on the cache: where data is not there yet, the
 * call returns CACHE_AGAIN after calling the waiter's suspend callback, and
 * calls its resume callback exactly once when the caller should try again. */
#ifndef SHARDGATE_CACHE_H
#define SHARDGATE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "backend.h"

struct cache;        /* opaque: one cache directory and its fill workers */
struct cache_obj;    /* opaque: one reader's handle on a cached or filling object */

enum cache_status {
    CACHE_OK = 0,
    CACHE_AGAIN,       /* not there yet: the waiter was suspended and will be resumed */
    CACHE_END,         /* no more bytes (cache_obj_read) */
    CACHE_BACKEND,     /* the cold tier answered an error: see *bst */
    CACHE_IO,          /* the cache directory failed (EIO, ENOSPC): fall back to the cold tier */
    CACHE_TIMEOUT,     /* a waiter's deadline passed */
    CACHE_NOMEM,
};

const char *cache_status_name(enum cache_status st);

/* How a bucket's cached objects stay consistent with the cold tier. */
enum cache_consistency {
    CACHE_IMMUTABLE,   /* never revalidate (datasets) */
    CACHE_TTL,         /* revalidate after ttl_s seconds */
    CACHE_ALWAYS,      /* revalidate every read */
};

/* Which engine writes fills and reads hits (cache/engine_int.h). */
enum cache_engine {
    CACHE_ENGINE_AUTO = 0,   /* io_uring when it works here, else threads */
    CACHE_ENGINE_URING,      /* io_uring; cache_open fails when it does not work */
    CACHE_ENGINE_THREADS,    /* pread/pwrite on the fill workers (io_uring blocked) */
};

struct cache_bucket_conf {
    const char *bucket;
    enum cache_consistency consistency;
    unsigned ttl_s;
};

/* cache.fill_io: which fills of fill_direct_min bytes or more skip the page
 * cache (O_DIRECT): every one (DIRECT, the default: their readers copy the
 * bytes from the fill's buffers), only staging fills (prefetch: no reader
 * waits for their bytes), or none. */
enum cache_fill_io { CACHE_FILL_IO_DIRECT = 0, CACHE_FILL_IO_STAGING, CACHE_FILL_IO_BUFFERED };

/* The default fill_direct_min. A smaller object is written through the page
 * cache: measured object by object (bench/results/fills-ab-small-buffered.md),
 * a 1 MiB fill costs about as much CPU either way (0.94x with eight at once,
 * 1.13x one at a time: an O_DIRECT write into a new file goes through a
 * kernel worker, six hand-offs for a 1 MiB fill), and what it leaves is
 * better read: the first read after it comes from memory, not the drive
 * (2.5-3.3x faster), and later hits find the pages in large folios, where a
 * file read back after an O_DIRECT write is cached a page at a time (1.12x
 * the 1 MiB hits at 0.78-0.85x their CPU). At 4 MiB it is level; at 16 and
 * 64 MiB the page-cache write costs more than the reads win back. */
#define CACHE_FILL_DIRECT_MIN (4u << 20)

struct cache_conf {
    const char *dir;              /* created if missing */
    uint64_t capacity;            /* bytes of object data */
    unsigned high_pct, low_pct;   /* evict from high to low watermark (90, 80) */
    unsigned fill_workers;        /* concurrent fills (8) */
    unsigned wait_timeout_ms;     /* a reader waits at most this long for bytes (30000) */
    unsigned revalidate_timeout_ms; /* a hit's check against the cold tier (0: 1000) */
    bool read_uring;              /* cache_obj_read reads through io_uring, not pread */
    uint64_t memory;              /* bytes of small objects also kept in memory (0: none) */
    uint64_t header_memory;       /* bytes of data files' header blocks kept in memory, so a
                                     hit reads only its body from the file (0: none) */
    enum cache_engine engine;     /* AUTO (0) by default */
    enum cache_fill_io fill_io;   /* which fills are written with O_DIRECT (DIRECT: all) */
    uint64_t fill_direct_min;     /* ... of those, objects of this size or more (0:
                                     CACHE_FILL_DIRECT_MIN) */
    unsigned dirwatch_ms;         /* how often the cache directory is checked (0: 1000) */
    unsigned job_keep_s;          /* ended prefetch jobs are kept this long (0: 3600) */
    enum cache_consistency default_consistency;
    unsigned default_ttl_s;
    const struct cache_bucket_conf *buckets;  /* per-bucket overrides (borrowed) */
    size_t n_buckets;
};

/* Opens the cache directory (the index is loaded, not rebuilt), starts the
 * fill workers. Borrows cold, which must outlive the cache. 0 or -1 (the
 * reason logged: no memory or threads, or cache.engine "io_uring" where
 * io_uring does not work). A cache directory that cannot be used (missing
 * and not creatable, read-only, broken) does not fail the open: the cache
 * serves every read from the cold tier, says why (cache_ready), and starts
 * caching once the directory is usable. One log line names the engine. */
int cache_open(const struct cache_conf *cf, struct backend *cold, struct cache **out);
/* Fails every fill in progress and resumes every waiter (so a server can
 * stop: libmicrohttpd needs every suspended connection resumed), then stops
 * the workers. cache_obj handles stay usable until closed. */
void cache_stop(struct cache *c);
/* Persists the index and frees the cache; every cache_obj must be closed. */
void cache_close(struct cache *c);

/* A suspended reader. The cache calls suspend(arg) before returning
 * CACHE_AGAIN and resume(arg) once, later, from another thread; both under
 * the same lock, so a resume can never overtake its suspend. deadline is
 * CLOCK_MONOTONIC; past it the waiter is resumed and the next call answers
 * CACHE_TIMEOUT. */
struct cache_waiter {
    void (*suspend)(void *arg);
    void (*resume)(void *arg);
    void *arg;
    struct timespec deadline;
    /* in: on an object being filled (or whose fill this open starts), answer
     * CACHE_END at once instead of waiting for the fill: the caller reads
     * the cold tier itself (a directory store: the source file). */
    bool no_wait;
    bool started_fill;            /* out: an open by this waiter started the fill */
    /* private to the cache */
    struct cache_waiter *next;
    uint64_t need;                /* resume once more than this many bytes are in */
    bool queued;
    bool for_meta;                /* waiting for the fill's metadata, not bytes */
    bool expired;                 /* resumed by its deadline */
    bool missed;                  /* it waited on a fill: its retry is not a hit */
    uint64_t fill_id;             /* the fill whose metadata it waited for (0: none) */
    enum cache_status result;     /* a fill's failure, kept for the retry */
    enum backend_status bst;
    struct backend_cold_error cold; /* bst == BACKEND_COLD_ERROR: its answer */
};

/* Opens bucket/key for reading. CACHE_OK: *out is a new handle and *meta
 * (caller clears) holds what the cold tier said of the object. On a miss
 * the fill is started (or joined) and, until its metadata is known, the
 * waiter is suspended (CACHE_AGAIN): call again after resume; with
 * w->no_wait, CACHE_END instead, the fill going on. CACHE_BACKEND
 * with *bst for NoSuchKey and other cold-tier errors. Callable from any
 * thread. `w` must stay valid until resumed. */
enum cache_status cache_obj_open(struct cache *c, const char *bucket, const char *key,
                                 struct cache_waiter *w, struct obj_meta *meta,
                                 enum backend_status *bst, struct cache_obj **out);

/* As cache_obj_open, but never starts a fill: CACHE_END when the object is
 * neither cached nor being filled (a HEAD then asks the cold tier itself
 * rather than fetch the whole object). */
enum cache_status cache_obj_open_existing(struct cache *c, const char *bucket,
                                          const char *key, struct cache_waiter *w,
                                          struct obj_meta *meta, enum backend_status *bst,
                                          struct cache_obj **out);

/* True when the object is complete in the cache: then cache_obj_fd() may be
 * sent with sendfile at cache_obj_data_offset() + the object offset (unless
 * the cache reads through io_uring, cache_reads_uring()). */
bool cache_reads_uring(const struct cache *c);
bool cache_obj_complete(const struct cache_obj *o);
int cache_obj_fd(const struct cache_obj *o);
uint64_t cache_obj_data_offset(const struct cache_obj *o);

/* A small complete hit was read whole with its header (from the file, or
 * from memory: cache.memory): returns that buffer, which the caller gives
 * back with cache_body_release once sent, and sets *body to the object's
 * first byte (cache_obj_read's offset 0); NULL otherwise, or when taken
 * already. cache_obj_read does not work on a hit once its body is taken. */
void *cache_obj_take_body(struct cache_obj *o, const uint8_t **body);
/* Gives back a buffer from cache_obj_take_body (a libmicrohttpd free
 * callback); any thread. */
void cache_body_release(void *body);

/* Reads up to len bytes at off. CACHE_OK with *got > 0; CACHE_AGAIN when
 * the fill has not reached off yet (w suspended); CACHE_END at the end; an
 * error when the fill failed (the caller ends the response with an error,
 * never with silently truncated data). */
enum cache_status cache_obj_read(struct cache_obj *o, uint64_t off, void *buf, size_t len,
                                 size_t *got, struct cache_waiter *w);

/* Withdraws w if it is queued (the client went away). */
void cache_obj_cancel_wait(struct cache_obj *o, struct cache_waiter *w);
void cache_obj_close(struct cache_obj *o);

/* A write through the gateway changed bucket/key: drop the cached copy (a
 * fill in progress is not published). */
void cache_invalidate(struct cache *c, const char *bucket, const char *key);

/* Brings bucket/key into the cache in the background (a staging fill), for
 * `cache.on_write`: after a write, the next read is a hit. Best effort: does
 * nothing when the staging budget is used up. */
void cache_warm(struct cache *c, const char *bucket, const char *key);

/* What a fill checked the cold tier's bytes against (cache/verify.c). */
enum cache_check {
    CACHE_CHECK_NONE,        /* nothing offered: a multipart ETag, no full-object checksum */
    CACHE_CHECK_CHECKSUM,    /* a full-object x-amz-checksum-* (CRC, else SHA) */
    CACHE_CHECK_MD5,         /* the ETag, the body's MD5 */
    CACHE_CHECKS
};

/* Counters for /metrics. */
struct cache_stats {
    uint64_t hits, misses, fills_started, fills_done, fills_failed, fill_waiters;
    uint64_t fills_withdrawn;   /* of fills_failed: staging fills given up before their first
                                   byte, as room for them would evict an object needed sooner */
    uint64_t evictions, bytes_used, objects, backend_bytes, revalidations;
    uint64_t capacity;
    const char *engine;   /* "io_uring" or "threads": the engine running fills (static) */
    uint64_t dir_resets;  /* the cache directory was recreated or taken back (index dropped) */
    uint64_t revalidation_timeouts;   /* checks that timed out: the copy was served */
    uint64_t revalidations_skipped;   /* checks skipped just after such a timeout */
    uint64_t memory_hits;     /* hits served from the memory tier (no file read) */
    uint64_t memory_bytes, memory_objects;   /* held in the memory tier now */
    uint64_t header_hits;     /* file hits whose header block came from memory */
    uint64_t header_bytes, header_objects;   /* held in the header tier now */
    uint64_t fill_checks[CACHE_CHECKS];      /* fills that began their bytes, by check */
    uint64_t fill_bytes_direct, fill_bytes_buffered;  /* bytes of fills written, by how
                                                        (O_DIRECT, or the page cache) */
    uint64_t fill_read_window, fill_read_file;   /* bytes fills' readers had from the
                                                    fill's buffers, from its file */
};
void cache_stats_get(struct cache *c, struct cache_stats *out);

/* Is the cache directory usable now? true when it is; otherwise false and
 * why (len bytes, NUL-terminated) says what is wrong, e.g. "cache directory
 * /x is read-only: Read-only file system (EROFS)" or "cache directory /x is
 * missing: recreating it". While it is not, reads go to the cold tier.
 * Cheap (no disk access: a watcher thread checks the directory every
 * second); any thread. The readiness endpoint asks it. */
bool cache_ready(struct cache *c, char *why, size_t len);

/* ---- prefetch jobs (cache/prefetch.c) ---- */

/* A prefetch hint as the gateway parsed it. cache_job_submit takes keys (and
 * the strings in it) and sizes; everything else is copied. */
struct cache_hint {
    const char *bucket;
    char **keys;              /* in reading order */
    size_t n_keys;
    uint64_t *sizes;          /* sizes from a listing, or NULL when unknown */
    bool ordered;
    bool has_epoch;
    uint64_t epoch;
    const char *consumer;     /* NULL: none */
    uint64_t window_bytes;    /* ordered: 0 = the default (half the low watermark, shared
                                 among the consumers being read) */
    unsigned window_objects;  /* ordered: 0 = no object limit */
    bool pin;
    unsigned stage_ahead;     /* ordered: within this many objects of the readers, stage
                                 without waiting for Belady's moment; 0 = exact */
};

#define CACHE_JOB_ID_LEN 17   /* 16 hex + NUL */
#define CACHE_JOB_ERRORS 20   /* errors kept per job */

enum cache_job_state { CACHE_JOB_QUEUED, CACHE_JOB_RUNNING, CACHE_JOB_DONE, CACHE_JOB_FAILED,
                       CACHE_JOB_CANCELLED };
const char *cache_job_state_name(enum cache_job_state st);

#define CACHE_JOB_MSG_LEN 160

struct cache_job_error {
    char *key;
    enum cache_status cst;    /* CACHE_BACKEND: the cold tier answered st; else the cache
                                 tier could not stage the key (CACHE_IO, CACHE_NOMEM...) */
    enum backend_status st;
    char msg[CACHE_JOB_MSG_LEN];   /* a cache-side failure's reason; "" otherwise */
};

/* A snapshot of a job; free with cache_job_info_clear(). */
struct cache_job_info {
    char id[CACHE_JOB_ID_LEN];
    char *bucket;
    char *consumer;           /* NULL: none */
    enum cache_job_state state;
    bool ordered, has_epoch;
    uint64_t epoch;
    uint64_t total, cached, staged, failed, pending;
    /* total: sizes known so far (the rest estimated); done: staged by this
     * job; cached: in the cache without it (before the hint, or the reader
     * fetched it first) */
    uint64_t bytes_total, bytes_done, bytes_cached;
    double rate_bytes_s;      /* recent staging rate, 0 when idle */
    double eta_s;             /* < 0 when unknown */
    uint64_t position;        /* ordered: the first hinted object not read yet */
    unsigned stage_ahead;     /* as hinted, 0 when not */
    struct cache_job_error errors[CACHE_JOB_ERRORS];
    size_t n_errors;
    struct timespec created, ended;   /* CLOCK_REALTIME; ended 0 while active */
};
void cache_job_info_clear(struct cache_job_info *ji);

/* Starts a job. 0 and its id in id_out, or -1 (out of memory / stopping). */
int cache_job_submit(struct cache *c, struct cache_hint *h, char id_out[CACHE_JOB_ID_LEN]);
/* 0 with *out filled, -1 when bucket has no job id. */
int cache_job_get(struct cache *c, const char *bucket, const char *id,
                  struct cache_job_info *out);
/* The bucket's jobs, newest first: *out is a malloc'd array of *n infos
 * (clear each, free the array). 0 or -1 (no memory). */
int cache_job_list(struct cache *c, const char *bucket, struct cache_job_info **out, size_t *n);
/* Has staging settled: since the last hint, read of a hinted key or end of
 * a staged fill, has the stager looked and found nothing it may start, with
 * no staged fill in flight? A moment's truth (a read may change it at once);
 * what waits for "the stager has done all it may now" asks this instead of
 * timing the stager's silence. Any thread. */
bool cache_prefetch_settled(struct cache *c);
/* Cancels: no new staging starts (fills running finish). 0 with the job's
 * state in *out, -1 when there is no such job. */
int cache_job_cancel(struct cache *c, const char *bucket, const char *id,
                     struct cache_job_info *out);
/* A reader read bucket/key: marks it read in the ordered jobs that hinted
 * it (reads may come out of order, by a loader's workers), and retires
 * what they will not need again from their plans. */
void cache_note_read(struct cache *c, const char *bucket, const char *key);

#endif
