/* cache/cache_int.h - internals of the cache tier that its unit tests use:
 * the header block at the start of every cache data file. */
#ifndef SHARDGATE_CACHE_INT_H
#define SHARDGATE_CACHE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "cache.h"

/* A cache data file: [header block, padded to 4 KiB][object bytes]. The
 * header holds what a hit needs to answer like the cold tier (size, ETag,
 * Last-Modified, stored headers). Whether the file is complete is not the
 * file's business: only the index's published entries are served. */
#define CACHE_HDR_MAGIC "SGC1"
#define CACHE_HDR_ALIGN 4096u
#define CACHE_HDR_MAX (64u * 1024)

/* Encodes m into buf (cap bytes); *len gets the header's length (the data
 * starts at cache_hdr_data_offset(*len)). 0, or -1 when it does not fit. */
int cache_hdr_encode(const struct obj_meta *m, uint8_t *buf, size_t cap, size_t *len);
/* Decodes a header block; m (cleared by the caller) gets new strings. 0 or -1. */
int cache_hdr_decode(const uint8_t *buf, size_t len, struct obj_meta *m);
uint64_t cache_hdr_data_offset(size_t hdr_len);

/* Is etag (bare) a plain MD5 - 32 hex digits - that a fill can verify? */
int cache_etag_is_md5(const char *etag);

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

/* ---- between the fill engine (cache.c) and prefetch jobs (prefetch.c) ---- */

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
};

/* Told when a staged object's fill ends. Called from a fill worker with no
 * cache lock held; the observer is the job's to free. */
struct cache_stage_obs {
    void (*done)(struct cache_stage_obs *obs, const struct cache_stage_end *end);
    struct cache_stage_obs *next;   /* private to cache.c */
    void *job;
    size_t index;
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
