/* cache/cidx_int.h - internals of the cache index shared by its files: index.c
 * (entries, tables, verbs; its opening comment maps the others), index_order.c,
 * index_evict.c, index_open.c, index_apply.c, journal.c (CRC32C, records, snapshot,
 * replay) and index_dir.c. Only cache/ files include this. */
#ifndef SHARDGATE_CIDX_INT_H
#define SHARDGATE_CIDX_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cache_index.h"

/* 64 shards: enough to keep a few dozen HTTP threads off each other's locks, few
 * enough that eviction can afford to look at every shard's candidate. */
#define CIDX_SHARD_BITS 6
#define CIDX_NSHARD (1u << CIDX_SHARD_BITS)
/* id = epoch (22 bits) | sequence (36) | shard (6). The epoch grows at every open,
 * so an id is never reused across restarts and the sweep can tell files of the
 * running process's fills (current epoch) from leftovers. */
#define CIDX_SEQ_BITS 36
#define CIDX_EPOCH_SHIFT (CIDX_SEQ_BITS + CIDX_SHARD_BITS)
#define CIDX_EPOCH_MAX ((1u << 22) - 1)
/* heap_idx of an entry that is not in its shard's next-use heap */
#define CIDX_HEAP_NONE UINT32_MAX

enum {
    ENT_DOOMED = 1,   /* invalidated while FILLING: publish refused */
    ENT_IN_KT = 2,    /* in the shard's key table */
    ENT_IN_LIST = 4,  /* evictable: in an LRU list (and the heap if hinted) */
    ENT_SEEN = 8,     /* sweep found its file */
    ENT_ETAG_BIN = 16 /* etag is 32 lowercase hex (+ "-parts"), stored as 16 bytes */
};

/* One entry: 120 bytes + bucket + key (+ a raw etag when it is not an MD5 form).
 * Field order packs it without holes. */
struct cidx_ent {
    struct cidx_ent *knext;         /* key-table chain */
    struct cidx_ent *inext;         /* id-table chain */
    struct cidx_ent *prev, *next;   /* LRU list; head = most recent */
    uint64_t id;
    uint64_t size;                  /* READY: size; FILLING: reserved bytes */
    uint64_t stamp;                 /* last use, from the index-wide use clock */
    uint64_t next_use;
    int64_t mtime_sec;
    int64_t validated_at;
    uint32_t mtime_nsec;
    uint32_t pins;
    uint32_t heap_idx;              /* position in the shard heap, or UINT32_MAX */
    uint16_t klen;
    uint16_t etag_parts;            /* "-N" suffix of a multipart etag, 0 = none */
    uint8_t blen;
    uint8_t state;                  /* enum cidx_state */
    uint8_t flags;
    uint8_t etag_len;               /* raw etag bytes in kb[] (not ENT_ETAG_BIN) */
    unsigned char etag_bin[16];
    char kb[];                      /* bucket, key, raw etag: no NULs */
};

struct cidx_list {
    struct cidx_ent *head, *tail;
};

struct cidx_shard {
    pthread_mutex_t mu;
    struct cidx_ent **kt;   /* key table, chained, power of two */
    struct cidx_ent **it;   /* id table */
    uint32_t kt_mask, it_mask;
    uint32_t n_key, n_id;
    struct cidx_list plain;  /* evictable, no declared next use */
    struct cidx_list hinted; /* evictable, next use declared */
    struct cidx_ent **heap;  /* hinted entries, max-heap on next_use */
    uint32_t heap_n, heap_cap;
} __attribute__((aligned(64)));

struct cidx_journal {
    pthread_mutex_t mu;      /* guards everything here; maint.cond waits on it */
    int fd;
    uint64_t gen;            /* journal.<gen>; the snapshot of gen g covers journals < g */
    uint64_t off;            /* bytes written */
    uint64_t unsynced;       /* records not yet fdatasync'ed */
    uint64_t last_sync_ms;
    uint64_t snap_bytes;     /* size of the last snapshot, for the 2x compaction rule */
    bool failed;             /* a write failed: stop journaling, refuse publishes */
};

struct cidx {
    char *dir;
    int dirfd, objfd;
    int subfd[256];          /* objects/00 .. objects/ff: a hit opens one name in one */
    uint64_t capacity;
    struct cidx_opts opts;
    uint32_t epoch;
    atomic_int policy;
    _Atomic uint64_t used, reserved, objects;
    _Atomic uint64_t clock;  /* use clock for LRU stamps */
    _Atomic uint64_t seq;    /* id sequence within the epoch */
    _Atomic uint64_t mem_entries, mem_keys, n_entries;
    struct cidx_journal j;
    pthread_mutex_t compact_mu; /* one compaction or fdatasync of the journal at a time;
                                 * the holder may close/replace j.fd */
    /* maintenance thread; waits on j.mu */
    pthread_t maint;
    bool maint_started;
    pthread_cond_t cond;     /* wakes the maintenance thread */
    pthread_cond_t done_cond;/* sweep finished */
    bool stop, sweep_pending, sweep_done, compacting;
    struct cidx_sweep_stats sweep;
    struct cidx_shard shards[CIDX_NSHARD];
};

/* A decoded PUBLISH record (pointers into the record buffer). */
struct cidx_rec {
    uint64_t id, size, stamp;
    int64_t mtime_sec, validated_at;
    uint32_t mtime_nsec;
    const char *etag, *bucket, *key;
    size_t etag_len, blen, klen;
};

/* journal.c */
#define CIDX_REC_MAX (64 + CIDX_ETAG_MAX + CIDX_BUCKET_MAX + CIDX_KEY_MAX)
size_t cidx_rec_publish(unsigned char *buf, const struct cidx_ent *e);
size_t cidx_rec_remove(unsigned char *buf, uint64_t id);
/* Appends one encoded record (one write). Caller holds the entry's shard lock so
 * records of one entry keep their order. Returns CIDX_OK or CIDX_IO. */
enum cidx_status cidx_jnl_append(struct cidx *x, const unsigned char *rec, size_t len);
/* Loads snapshot + journals into x (single-threaded, before the thread starts),
 * opens the active journal and records the new epoch in it. */
enum cidx_status cidx_jnl_load(struct cidx *x);
/* Journal switch + snapshot + rename + drop of the old journal. */
enum cidx_status cidx_jnl_compact(struct cidx *x);
enum cidx_status cidx_jnl_sync(struct cidx *x);
uint64_t cidx_now_ms(void);

/* index_dir.c: creates (mkdir -p) and opens dir, dir/objects and its 256
 * sub-directories (O_PATH). With wipe, first drops the index files found in dir and
 * moves dir/objects to dir/trash/. 0, or -1 with errno of the failing call, whose
 * path is logged; nothing is left open then. */
int cidx_dirfds_open(const char *dir, bool wipe, int *dirfd, int *objfd, int subfd[256]);

/* journal.c: starts journal <gen + 1> in the (new) directory x->dirfd with this
 * run's EPOCH record and makes it the active one; the old journal is closed. Caller
 * holds compact_mu. */
enum cidx_status cidx_jnl_restart(struct cidx *x);

/* index_apply.c: drops every entry of shard si (READY, FILLING, doomed); returns how
 * many. */
uint64_t cidx_shard_clear(struct cidx *x, unsigned si);

/* index.c, used by journal.c */
/* Writes the entry's bare etag + NUL into out; returns its length. */
size_t cidx_ent_etag(const struct cidx_ent *e, char out[CIDX_ETAG_MAX]);

/* index_apply.c, used by journal.c */
void cidx_apply_publish(struct cidx *x, const struct cidx_rec *r);
void cidx_apply_remove(struct cidx *x, uint64_t id);
/* Appends PUBLISH records of the shard's READY entries, in LRU order, to a
 * malloc'ed buffer (*buf, *len, *cap). Takes the shard lock. Returns count or -1. */
long cidx_shard_serialize(struct cidx *x, unsigned s, unsigned char **buf, size_t *len,
                          size_t *cap);

/* index.c: entries and their tables, used by the index's other files */
/* The hash of bucket/key; its top bits choose the shard (cidx_hash_shard), its low
 * bits the key table's slot. */
uint64_t cidx_key_hash(const char *b, size_t bl, const char *k, size_t kl);
unsigned cidx_hash_shard(uint64_t h);
/* The shard of an id: its low CIDX_SHARD_BITS. */
unsigned cidx_id_shard(uint64_t id);
/* The entry of key (hash h) or of id in shard s, or NULL. Under s->mu. */
struct cidx_ent *cidx_kt_find(struct cidx_shard *s, uint64_t h, const char *b, size_t bl,
                              const char *k, size_t kl);
struct cidx_ent *cidx_it_find(struct cidx_shard *s, uint64_t id);
/* Puts e into the key table (hash h) / the id table of s. Under s->mu. */
void cidx_kt_add(struct cidx_shard *s, struct cidx_ent *e, uint64_t h);
void cidx_it_add(struct cidx_shard *s, struct cidx_ent *e);
/* A new entry for bucket b / key k (etag NULL: none yet), counted in x's memory
 * figures; NULL when out of memory. cidx_ent_free frees and uncounts it. */
struct cidx_ent *cidx_ent_new(struct cidx *x, const char *b, size_t bl, const char *k,
                              size_t kl, const char *etag, size_t el);
void cidx_ent_free(struct cidx *x, struct cidx_ent *e);
/* Takes e out of every structure of s and out of x's counters; the caller frees
 * it (and unlinks its file) after dropping s->mu. */
void cidx_ent_unlink_locked(struct cidx *x, struct cidx_shard *s, struct cidx_ent *e);
/* Journals the REMOVE of a READY entry, then unlinks it as above (the caller
 * unlinks the file after the record: a crash between leaves a stray file, never
 * an entry without its file). CIDX_OK, or the journal's error. Under s->mu. */
enum cidx_status cidx_ent_remove_ready_locked(struct cidx *x, struct cidx_shard *s,
                                              struct cidx_ent *e);
/* Locks the shard of id and returns its entry (NULL if none); the caller unlocks
 * (*sp)->mu. */
struct cidx_ent *cidx_id_lock(struct cidx *x, uint64_t id, struct cidx_shard **sp);
/* Unlinks entry id's data file (a missing one is fine; other errors are logged). */
void cidx_unlink_data(struct cidx *x, uint64_t id);

/* index_order.c: the eviction order, kept by index.c and index_apply.c. All under
 * the entry's shard lock. */
/* READY, unpinned and not doomed: may be in the order. */
bool cidx_ent_evictable(const struct cidx_ent *e);
/* Puts an evictable entry at the head (most recent) of its list (and the heap when
 * it has a next use). */
void cidx_ev_insert(struct cidx_shard *s, struct cidx_ent *e);
/* Takes e out of the order, if it is in it. */
void cidx_ev_remove(struct cidx_shard *s, struct cidx_ent *e);
/* A use of e: a new stamp from x's use clock, and the head of its list. */
void cidx_ent_touch(struct cidx *x, struct cidx_shard *s, struct cidx_ent *e);

static inline uint32_t cidx_id_epoch(uint64_t id)
{
    return (uint32_t)(id >> CIDX_EPOCH_SHIFT);
}

#endif
