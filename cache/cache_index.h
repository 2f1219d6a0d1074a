/* cache/cache_index.h - the cache tier's index: (bucket, key) -> cached object.
 * In memory (64 locked shards, O(1) lookup), persisted as a snapshot plus a
 * CRC32C-protected journal so it survives a clean restart or kill -9, with
 * eviction (LRU, or furthest-next-use when ordered prefetch hints are active).
 * Internal to cache/: the lead's cache/cache.h is the module's public face. */
#ifndef SHARDGATE_CACHE_INDEX_H
#define SHARDGATE_CACHE_INDEX_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

struct cidx; /* opaque */

enum cidx_status {
    CIDX_OK = 0,
    CIDX_MISS,      /* lookup: no entry for the key */
    CIDX_FILLING,   /* lookup: a fill is in flight; info.id/state are set */
    CIDX_EXISTS,    /* begin_fill: an entry exists (FILLING or READY), *id is it */
    CIDX_NOT_FOUND, /* id-based verb: no such entry (evicted, invalidated, aborted) */
    CIDX_STALE,     /* publish: the entry was invalidated during its fill; file unlinked */
    CIDX_BUSY,      /* evict: target not reached, everything left is pinned or filling */
    CIDX_TOOBIG,    /* fill_size: the object is larger than the whole capacity */
    CIDX_INVAL,     /* bad argument or wrong state (e.g. publish of a READY entry) */
    CIDX_NOMEM,
    CIDX_IO         /* a disk call failed; errno was logged where it failed */
};

enum cidx_state { CIDX_STATE_FILLING = 1, CIDX_STATE_READY = 2 };

enum cidx_policy {
    CIDX_POLICY_LRU = 0, /* default: approximate global LRU (per-shard LRU lists merged) */
    CIDX_POLICY_NEXT_USE /* entries without a next use first (LRU among them), then the
                          * one whose next use is furthest in the future */
};

/* "no declared next use" */
#define CIDX_NEXT_USE_NONE UINT64_MAX
#define CIDX_ETAG_MAX 72     /* etag buffer incl. NUL; the etag is bare (no quotes) */
#define CIDX_BUCKET_MAX 255  /* bytes */
#define CIDX_KEY_MAX 4096    /* bytes; S3 allows 1024 */
/* "objects/xx/0123456789abcdef" + NUL */
#define CIDX_NAME_MAX 32

struct cidx_info {
    uint64_t id;                  /* names the data file, see cidx_data_name() */
    uint64_t size;                /* READY: object size; FILLING: reserved size or 0 */
    char etag[CIDX_ETAG_MAX];     /* bare, NUL-terminated; "" while FILLING */
    struct timespec mtime;        /* Last-Modified of the cold object */
    enum cidx_state state;
    int64_t validated_at;         /* last (re)validation against the cold tier: ms since
                                     the epoch (a TTL of 1 s must not mean 0.3 s) */
    uint64_t next_use;            /* CIDX_NEXT_USE_NONE unless declared */
};

enum cidx_sweep_mode {
    CIDX_SWEEP_BACKGROUND = 0, /* default: the maintenance thread sweeps after open */
    CIDX_SWEEP_SYNC,           /* cidx_open sweeps before returning */
    CIDX_SWEEP_NONE            /* never (benchmarks, tests without data files) */
};

struct cidx_opts {
    enum cidx_sweep_mode sweep;
    unsigned fsync_interval_ms;   /* group fsync: at most one per interval (default 50) */
    unsigned fsync_records;       /* ... or sooner after this many records (default 256) */
    uint64_t compact_min_bytes;   /* no compaction below this journal size (default 4 MiB) */
    /* A data file may start with a header block before the object bytes: the sweep
     * accepts file size = object size + h, h a multiple of file_hdr_align
     * (default 4096) and h <= file_hdr_max (default 64 KiB). Any other size drops
     * the entry. */
    uint32_t file_hdr_align;
    uint32_t file_hdr_max;
    /* Open without touching cache_dir (it cannot be used now): an empty index that
     * journals nothing until cidx_reset() attaches it to the directory. */
    bool detached;
};

struct cidx_sweep_stats {
    uint64_t files_seen;      /* data files found under objects/ */
    uint64_t strays_removed;  /* files with no entry (interrupted fills, lost REMOVEs) */
    uint64_t missing_dropped; /* entries whose file was absent */
    uint64_t badsize_dropped; /* entries whose file had another size */
    double ms;
};

struct cidx_mem_stats {
    uint64_t entry_bytes; /* malloc_usable_size() sum of entries */
    uint64_t table_bytes; /* hash tables, heaps, shard array */
    uint64_t key_bytes;   /* bucket+key bytes stored inline in entries */
    uint64_t entries;     /* READY + FILLING */
};

/* Writes the data file's name relative to the cache directory
 * ("objects/<2 hex>/<16 hex id>") into out. Pure; any thread. */
void cidx_data_name(uint64_t id, char out[CIDX_NAME_MAX]);
/* Same, as a path under the cache directory of x. Returns 0, -1 if len is short. */
int cidx_data_path(const struct cidx *x, uint64_t id, char *buf, size_t len);
/* Opens entry id's data file (openat in its directory; O_CLOEXEC added). */
int cidx_data_open(const struct cidx *x, uint64_t id, int flags, mode_t mode);

/* Opens (creating dirs as needed) the index under cache_dir: loads the snapshot,
 * replays the journal (a torn or corrupt tail is truncated away), starts the
 * maintenance thread (group fsync, compaction, the background sweep of stray files
 * and of entries whose file is missing or has the wrong size). Data files are not
 * stat'ed at open (see index_open.c: measured too slow for millions of entries on a cold
 * disk); a reader that finds a file missing calls cidx_invalidate().
 * *out is returned new; free with cidx_close(). Call from one thread. */
enum cidx_status cidx_open(const char *cache_dir, uint64_t capacity_bytes, struct cidx **out);
/* Same with options; opts NULL means defaults. */
enum cidx_status cidx_open_ex(const char *cache_dir, uint64_t capacity_bytes,
                              const struct cidx_opts *opts, struct cidx **out);
/* Stops the maintenance thread, writes a snapshot (temp + fsync + rename + dir
 * fsync), frees everything. FILLING entries are dropped (their files are swept at
 * the next open). No other call may run concurrently or follow. */
enum cidx_status cidx_close(struct cidx *x);

/* Puts a running index onto a fresh cache directory: recreates the directory (it
 * was deleted, or it was unusable and is usable now), drops the index files and
 * data files found there (an index that could not journal while the directory was
 * unusable cannot vouch for them; data files move to trash/, see
 * cidx_trash_empty), starts a new journal in it and drops every entry in memory
 * (*dropped gets their number). Callers may go on using the index meanwhile:
 * ids handed out before are simply gone (publish/abort/unpin answer
 * CIDX_NOT_FOUND). Also attaches an index opened detached. CIDX_OK, or CIDX_IO
 * with errno of the failing call (logged with its path). One caller at a time. */
enum cidx_status cidx_reset(struct cidx *x, uint64_t *dropped);
/* Removes what cidx_reset moved to trash/ (may take long: call from a background
 * thread). Returns the number of files removed. */
unsigned long cidx_trash_empty(struct cidx *x);
/* Can an index live in dir now? Creates it if missing (mkdir -p), opens it, and
 * writes, syncs and removes a small probe file. 0, or an errno with why (len bytes)
 * saying what is wrong in one sentence that names the directory, e.g. "cache
 * directory /x is read-only: Read-only file system (EROFS)". Any thread. */
int cidx_dir_probe(const char *dir, char *why, size_t len);
/* The directory the index lives in (borrowed). */
const char *cidx_dir(const struct cidx *x);

/* O(1). READY: copies the info out, marks the entry used, returns CIDX_OK.
 * FILLING (not doomed): returns CIDX_FILLING with out->id/state/size set so the
 * caller can attach to the fill. Otherwise CIDX_MISS. out may be NULL. Any thread;
 * takes only the key's shard lock. */
enum cidx_status cidx_lookup(struct cidx *x, const char *bucket, const char *key,
                             struct cidx_info *out);
/* As cidx_lookup, and on CIDX_OK also pins the entry (atomically: eviction cannot
 * slip between lookup and pin). The caller must cidx_unpin(out->id). */
enum cidx_status cidx_lookup_pin(struct cidx *x, const char *bucket, const char *key,
                                 struct cidx_info *out);

/* Single flight. No entry: creates a FILLING entry (in memory only), *id is its id,
 * returns CIDX_OK; the caller creates the data file and must end with publish or
 * fill_abort. An entry exists: returns CIDX_EXISTS with *id and, if state is not
 * NULL, *state of that entry. Any thread. */
enum cidx_status cidx_begin_fill(struct cidx *x, const char *bucket, const char *key,
                                 uint64_t *id, enum cidx_state *state);
/* Reserves size bytes for a FILLING entry (replaces an earlier reservation).
 * CIDX_TOOBIG if size > capacity (the reservation is not made). */
enum cidx_status cidx_fill_size(struct cidx *x, uint64_t id, uint64_t size);
/* FILLING -> READY, journaled (write(2) before returning, so it survives kill -9;
 * fdatasync grouped, see struct cidx_opts). Call only after the data file is
 * complete and fdatasync'ed. etag: bare, < CIDX_ETAG_MAX bytes. CIDX_STALE if the
 * entry was invalidated meanwhile (entry gone, file unlinked). */
enum cidx_status cidx_publish(struct cidx *x, uint64_t id, uint64_t size, const char *etag,
                              struct timespec mtime);
/* Drops a FILLING entry and unlinks its data file. */
enum cidx_status cidx_fill_abort(struct cidx *x, uint64_t id);

/* READY: removes the entry (journaled) and unlinks its file (open readers keep
 * reading). FILLING: dooms it (its publish gets CIDX_STALE; a new begin_fill for
 * the key starts a fresh entry) and unlinks the file. CIDX_MISS if no entry. */
enum cidx_status cidx_invalidate(struct cidx *x, const char *bucket, const char *key);

/* Sets validated_at (TTL revalidation). Not journaled: persisted at compaction and
 * close; after a crash the older value comes back (revalidates earlier, never later). */
enum cidx_status cidx_touch_validated(struct cidx *x, uint64_t id, int64_t when_ms);
/* Milliseconds since the epoch (CLOCK_REALTIME), the unit of validated_at. */
int64_t cidx_wall_ms(void);

/* Pins hold an entry out of eviction (a reader, an active prefetch). Counted. */
enum cidx_status cidx_pin(struct cidx *x, uint64_t id);
enum cidx_status cidx_unpin(struct cidx *x, uint64_t id);

/* Declares the entry's next use (a position in an ordered hint), or
 * CIDX_NEXT_USE_NONE. Counts as a use for LRU. Not persisted. */
enum cidx_status cidx_set_next_use(struct cidx *x, uint64_t id, uint64_t next_use_seq);
void cidx_set_policy(struct cidx *x, enum cidx_policy p);
enum cidx_policy cidx_get_policy(const struct cidx *x);
/* What the next-use policy would evict next: false when nothing is evictable;
 * else *next_use is CIDX_NEXT_USE_NONE when some evictable entry has no declared
 * next use, or the furthest declared next use among them. Lets a stager check
 * that staging an object needed at use N would only evict something needed
 * after N. Takes each shard lock in turn (a snapshot, not atomic). */
bool cidx_victim_next_use(struct cidx *x, uint64_t *next_use);
/* How many evictable entries have no declared next use, counted up to
 * `limit` (walks at most that many). A snapshot, like the above. */
unsigned cidx_unneeded(struct cidx *x, unsigned limit);

/* used: bytes of READY entries; reserved: bytes reserved by fills; objects: READY. */
void cidx_usage(struct cidx *x, uint64_t *used, uint64_t *reserved, uint64_t *objects);
uint64_t cidx_capacity(const struct cidx *x);
/* Evicts READY, unpinned entries by the policy until used+reserved <= target_used;
 * each eviction is journaled, then its file unlinked. *freed and *count (may be NULL)
 * get what was evicted. CIDX_BUSY if the target could not be reached. Any thread
 * (normally the tier thread, above the high watermark, target = low watermark). */
enum cidx_status cidx_evict(struct cidx *x, uint64_t target_used, uint64_t *freed,
                            unsigned *count);

/* fdatasyncs the journal now (the maintenance thread does it within the interval). */
enum cidx_status cidx_sync(struct cidx *x);
/* Writes a snapshot and starts an empty journal now (normally automatic when the
 * journal exceeds 2x the snapshot). */
enum cidx_status cidx_compact(struct cidx *x);
/* Waits for the open-time sweep to finish; stats may be NULL. Returns at once with
 * zeros if the sweep mode is CIDX_SWEEP_NONE. */
void cidx_sweep_wait(struct cidx *x, struct cidx_sweep_stats *stats);
void cidx_mem(struct cidx *x, struct cidx_mem_stats *out);

#endif
