/* cache/prefetch.c - prefetch jobs: a hint names the objects a reader will
 * read (in order, for an ordered hint); a stager thread turns them into
 * background fills - the same fills a reader's miss starts, at a lower
 * priority and at most half the fill workers at once.
 *
 * Ordered hints also tell eviction the future: every cached object a live
 * ordered job will read gets a "next use" (the job's sequence base plus the
 * object's position), objects the reader has passed lose it, and the index
 * then evicts what has no next use first and otherwise what is needed
 * furthest in the future (Belady's rule). The stager stays within the
 * job's window ahead of the reader, and never stages an object when making
 * room for it would evict one that is needed sooner.
 *
 * A hint's reader may be several: a data loader's N workers read every
 * N-th key of the order, so reads arrive interleaved and out of order by up
 * to N. A job therefore marks each key read on its own; its position is the
 * first key not read yet, and only read keys lose their next use - a key an
 * in-flight worker has not reached keeps it, however far another worker got.
 *
 * A consumer's ordered hints form a chain of at most two: a hint for epoch
 * e+1 sent while the hint for epoch e is live is read after it (its next
 * uses come after e's), so a loader can declare the next epoch while it
 * still reads this one. The older hint of a chain is the one being read:
 * reads count against it alone.
 *
 * One mutex (pf->wk.mu) guards every job: jobs are few and each step is short.
 * Lock order: pf->wk.mu, then the cache's locks (cache_stage, the index).
 *
 * Past 800 lines as one file: the jobs, their next uses and the stager are
 * one state under pf->wk.mu that every part reads through struct job; the stager
 * on its own would take struct job and ten of the statics into cache_int.h. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "cache.h"
#include "cache_index.h"
#include "cache_int.h"
#include "hash.h"
#include "log.h"
#include "worker.h"

enum {
    STAGER_TICK_MS = 200,       /* the stager also wakes on every event */
};

enum key_state { K_PENDING, K_INFLIGHT, K_CACHED, K_STAGED, K_FAILED };

struct job {
    struct job *next;
    struct cache_prefetch *pf;
    char id[CACHE_JOB_ID_LEN];
    char *bucket, *consumer;
    bool ordered, has_epoch, pin;
    uint64_t epoch;
    enum cache_job_state state;
    bool retired;               /* no longer guides eviction (read through, or superseded) */

    char **keys;
    uint64_t *sizes;            /* UINT64_MAX: unknown */
    uint8_t *st;                /* enum key_state per key */
    bool *read;                 /* ordered: the reader has read (or passed) key i */
    uint64_t *pinned;           /* pin: the entry id pinned for each key, 0 when none */
    size_t n;
    size_t *map;                /* ordered: open-addressing table key -> index + 1 */
    size_t map_cap;

    size_t cursor;              /* next key to look at */
    uint64_t position;          /* ordered: the first key the reader has not read */
    uint64_t seq_base;          /* next use of key i is seq_base + i */
    uint64_t window_bytes;      /* 0: the default, a share of half the low watermark */
    unsigned window_objects;
    unsigned stage_ahead;       /* 0: stage at Belady's moment only */
    const char *why;            /* why the key at the cursor may be staged now, */
    uint64_t why_victim;        /* in place of what (the debug log's) */
    unsigned inflight;

    uint64_t cached, staged, failed;
    uint64_t bytes_known, bytes_cached, bytes_staged;   /* cached: not by this job */
    size_t sizes_known;
    struct cache_job_error errors[CACHE_JOB_ERRORS];
    size_t n_errors;
    struct timespec created, ended;       /* realtime */
    struct timespec first_stage;          /* monotonic; 0 until staging began */
};

/* One staged key in flight: told by the fill engine when its fill ends. */
struct stage_obs {
    struct cache_stage_obs base;          /* first: the engine passes &base */
    struct job *job;
    uint64_t guess;                       /* its bytes in pf->staging_bytes */
};

struct cache_prefetch {
    struct cache *c;
    struct cidx *idx;
    struct sg_worker wk;        /* the stager; its mu guards the jobs */
    struct job *jobs;           /* newest first */
    /* Ordered jobs in `jobs`, read without mu: with none, a read has no
     * hint to move, and a hit does not take the stager's lock (both HTTP
     * threads met on it once per hit: bench/results/ab-guard-shards.md). */
    atomic_uint ordered_jobs;
    uint64_t next_seq;
    bool started;               /* the stager runs, not yet joined */
    /* Settled (cache_prefetch_settled): every event that can give the
     * stager work (a hint, a read of a hinted key, a staged fill's end)
     * counts in `events`; a round that found nothing to start, with no
     * staged fill in flight and the background budget not in the way, sets
     * settled_at to the events it had seen, plus one. */
    uint64_t events, settled_at;
    bool round_busy;            /* stage_one met a full background budget */
    /* Bytes (sizes, or guesses where unknown) of staging fills started and
     * not ended: a fill reserves its space only when its worker starts it,
     * so without these several keys staged in one round could all be
     * promised the same free room, and a later key's fill could take it
     * from an earlier one's (unit a_hint_sent_before_the_reader_fills_the_
     * cache, under two suites side by side). */
    uint64_t staging_bytes;
};

const char *cache_job_state_name(enum cache_job_state st)
{
    switch (st) {
    case CACHE_JOB_QUEUED: return "queued";
    case CACHE_JOB_RUNNING: return "running";
    case CACHE_JOB_DONE: return "done";
    case CACHE_JOB_FAILED: return "failed";
    case CACHE_JOB_CANCELLED: return "cancelled";
    }
    return "?";
}

static bool job_final(const struct job *j)
{
    return j->state == CACHE_JOB_DONE || j->state == CACHE_JOB_FAILED ||
           j->state == CACHE_JOB_CANCELLED;
}

static double mono_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---- the key map of an ordered job ---- */

static uint64_t hash_str(const char *s)
{
    return sg_fnv1a(SG_FNV1A_SEED, s, strlen(s));
}

static int map_build(struct job *j)
{
    size_t cap = 16;
    while (cap < j->n * 2)
        cap *= 2;
    j->map = calloc(cap, sizeof *j->map);
    if (!j->map)
        return -1;
    j->map_cap = cap;
    for (size_t i = 0; i < j->n; i++) {
        size_t p = (size_t)hash_str(j->keys[i]) & (cap - 1);
        while (j->map[p]) {
            if (strcmp(j->keys[j->map[p] - 1], j->keys[i]) == 0)
                break;   /* a repeated key: its first place counts */
            p = (p + 1) & (cap - 1);
        }
        if (!j->map[p])
            j->map[p] = i + 1;
    }
    return 0;
}

/* The index of key in j, or SIZE_MAX. */
static size_t map_find(const struct job *j, const char *key)
{
    if (!j->map)
        return SIZE_MAX;
    size_t p = (size_t)hash_str(key) & (j->map_cap - 1);
    while (j->map[p]) {
        if (strcmp(j->keys[j->map[p] - 1], key) == 0)
            return j->map[p] - 1;
        p = (p + 1) & (j->map_cap - 1);
    }
    return SIZE_MAX;
}

/* Whether the reader of ordered job j has still to read key i. */
static bool unread(const struct job *j, size_t i)
{
    return i >= j->position && !j->read[i];
}

static bool same_consumer(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Whether a and b are live ordered hints of one consumer's chain. */
static bool same_chain(const struct job *a, const struct job *b)
{
    return a->ordered && b->ordered && !a->retired && !b->retired &&
           strcmp(a->bucket, b->bucket) == 0 && same_consumer(a->consumer, b->consumer);
}

/* The hint of j's chain the reader is in: its oldest live one. Under pf->wk.mu. */
static struct job *chain_head(struct cache_prefetch *pf, struct job *j)
{
    struct job *head = j;
    for (struct job *o = pf->jobs; o; o = o->next)
        if (o != j && same_chain(o, j) && o->seq_base < head->seq_base)
            head = o;
    return head;
}

/* Where the readers of live ordered hints are now on the use clock: the
 * least (seq_base + position) of the chains being read; next_seq when none.
 * A new hint starts there, so hints of several ranks sent at an epoch's
 * start line up key for key. Under pf->wk.mu. */
static uint64_t use_clock_now(struct cache_prefetch *pf)
{
    uint64_t now = UINT64_MAX;
    for (struct job *o = pf->jobs; o; o = o->next)
        if (o->ordered && !o->retired && chain_head(pf, o) == o &&
            o->seq_base + o->position < now)
            now = o->seq_base + o->position;
    return now == UINT64_MAX ? pf->next_seq : now;
}

/* How many consumers' hints are being read (at least 1): chains whose
 * readers share the use clock, one use of it being one read of each.
 * Under pf->wk.mu. */
static uint64_t chains_read(struct cache_prefetch *pf)
{
    uint64_t chains = 0;
    for (struct job *o = pf->jobs; o; o = o->next)
        chains += o->ordered && !o->retired && chain_head(pf, o) == o;
    return chains ? chains : 1;
}

/* ---- next uses ---- */

/* The next use of bucket/key in any live ordered job other than `except`:
 * the earliest position still ahead of its reader, or NONE. Under pf->wk.mu. */
static uint64_t next_use_of(struct cache_prefetch *pf, const char *bucket, const char *key,
                            const struct job *except)
{
    uint64_t best = CIDX_NEXT_USE_NONE;
    for (struct job *j = pf->jobs; j; j = j->next) {
        if (j == except || !j->ordered || j->retired || strcmp(j->bucket, bucket) != 0)
            continue;
        size_t i = map_find(j, key);
        if (i != SIZE_MAX && unread(j, i) && j->seq_base + i < best)
            best = j->seq_base + i;
    }
    return best;
}

/* Declares (or clears) the next use of an entry, published or still
 * filling (a fill gets its next use before it is published). Under pf->wk.mu. */
static void declare(struct cache_prefetch *pf, const char *bucket, const char *key)
{
    struct cidx_info info;
    enum cidx_status st = cidx_lookup(pf->idx, bucket, key, &info);
    if (st == CIDX_OK || st == CIDX_FILLING)
        cidx_set_next_use(pf->idx, info.id, next_use_of(pf, bucket, key, NULL));
}

/* The eviction policy follows the hints: next-use while any live ordered job
 * exists, LRU otherwise. Under pf->wk.mu. */
static void update_policy(struct cache_prefetch *pf)
{
    bool hinted = false;
    for (struct job *j = pf->jobs; j && !hinted; j = j->next)
        hinted = j->ordered && !j->retired;
    cidx_set_policy(pf->idx, hinted ? CIDX_POLICY_NEXT_USE : CIDX_POLICY_LRU);
}

/* The job stops guiding eviction: its pins go, and the entries it declared
 * get their next use from the other live jobs (or none). Under pf->wk.mu. */
static void job_retire(struct cache_prefetch *pf, struct job *j)
{
    if (j->retired)
        return;
    j->retired = true;
    for (size_t i = 0; j->pinned && i < j->n; i++) {
        if (j->pinned[i]) {
            cidx_unpin(pf->idx, j->pinned[i]);
            j->pinned[i] = 0;
        }
    }
    if (j->ordered)
        for (size_t i = j->position; i < j->n; i++)
            declare(pf, j->bucket, j->keys[i]);
    update_policy(pf);
}

static void job_end(struct job *j, enum cache_job_state st)
{
    if (job_final(j))
        return;
    j->state = st;
    clock_gettime(CLOCK_REALTIME, &j->ended);
}

/* ---- counting ---- */

/* Key i could not be staged: end says whether the cold tier refused it
 * (CACHE_BACKEND) or the cache tier failed - never blamed on the object. */
static void add_error(struct job *j, size_t i, const struct cache_stage_end *end)
{
    if (j->n_errors == CACHE_JOB_ERRORS)
        return;
    struct cache_job_error *e = &j->errors[j->n_errors];
    e->key = strdup(j->keys[i]);
    e->cst = end->err;
    e->st = end->bst;
    snprintf(e->msg, sizeof e->msg, "%s",
             end->err != CACHE_BACKEND && end->why ? end->why : "");
    if (e->key)
        j->n_errors++;
}

static void set_size(struct job *j, size_t i, uint64_t size)
{
    if (j->sizes[i] == UINT64_MAX) {
        j->sizes[i] = size;
        j->bytes_known += size;
        j->sizes_known++;
    }
}

/* Key i is in the cache (already, or the reader fetched it first). */
static void mark_cached(struct job *j, size_t i, uint64_t size)
{
    j->st[i] = K_CACHED;
    j->cached++;
    if (size != UINT64_MAX) {
        set_size(j, i, size);
        j->bytes_cached += size;
    }
}

static void check_done(struct job *j)
{
    if (job_final(j) || j->cursor < j->n || j->inflight)
        return;
    job_end(j, j->failed == j->n ? CACHE_JOB_FAILED : CACHE_JOB_DONE);
}

/* The fill engine's report on one staged key. */
static void stage_done(struct cache_stage_obs *base, const struct cache_stage_end *end)
{
    bool ok = end->ok;
    uint64_t size = end->size;
    struct stage_obs *o = (struct stage_obs *)base;
    struct job *j = o->job;
    struct cache_prefetch *pf = j->pf;
    size_t i = base->index;
    pthread_mutex_lock(&pf->wk.mu);
    j->inflight--;
    pf->staging_bytes -= o->guess;
    if (j->st[i] == K_INFLIGHT && end->withdrawn) {
        /* room was taken meanwhile: the key waits for its moment again */
        j->st[i] = K_PENDING;
        if (j->cursor > i)
            j->cursor = i;
    } else if (j->st[i] == K_INFLIGHT) {
        if (ok) {
            j->st[i] = K_STAGED;
            j->staged++;
            set_size(j, i, size);
            j->bytes_staged += size;
        } else {
            j->st[i] = K_FAILED;
            j->failed++;
            add_error(j, i, end);
        }
    }
    check_done(j);
    pf->events++;
    pthread_cond_signal(&pf->wk.cv);
    pthread_mutex_unlock(&pf->wk.mu);
    free(o);
}

/* ---- the stager ---- */

/* How far ahead of its reader job j stages: its window_bytes, or by
 * default half the low watermark shared by the chains being read (four
 * ranks each staging half the cache ahead would stage far more than fits,
 * and evict what the next epoch needs soon: measured with bench/epochs.py
 * --ranks 4, 102-107 MiB per epoch where 80 is the minimum). Under pf->wk.mu. */
static uint64_t window_of(struct cache_prefetch *pf, const struct job *j)
{
    if (j->window_bytes)
        return j->window_bytes;
    uint64_t low = cache_capacity_of(pf->c) / 100 * cache_low_pct_of(pf->c);
    return low / 2 / chains_read(pf);
}

/* The next use of key after the use `after` on the use clock (in any live
 * ordered job), or NONE. Under pf->wk.mu. */
static uint64_t next_use_after(struct cache_prefetch *pf, const char *bucket, const char *key,
                               uint64_t after)
{
    uint64_t best = CIDX_NEXT_USE_NONE;
    for (struct job *j = pf->jobs; j; j = j->next) {
        if (!j->ordered || j->retired || strcmp(j->bucket, bucket) != 0)
            continue;
        size_t i = map_find(j, key);
        if (i != SIZE_MAX && unread(j, i) && j->seq_base + i > after &&
            j->seq_base + i < best)
            best = j->seq_base + i;
    }
    return best;
}

/* Whether staging the object used at `use` now, in place of the cached
 * object whose next use is `victim`, could cost a cold read that waiting
 * saves: true when a key some reader reads before `use` is needed again
 * only after `victim` (or never, as far as the hints say). Once read, such
 * a key is the better victim, and Belady's rule at the moment of `use`
 * would evict it and keep the victim. Staging only what that rule would
 * evict anyway makes the outcome independent of how far ahead the stager
 * happens to be: every epoch costs what the rule costs, however the reads
 * and fills are timed (before: 82-90 cold reads where 81 suffice, varying
 * from run to run, tests/integration/test_prefetch_epochs.py). The keys
 * looked at are those of the hints being read; at most PASSED_SCAN of
 * them, true beyond. Under pf->wk.mu. */
enum { PASSED_SCAN = 4096 };
static bool passed_keys_beat(struct cache_prefetch *pf, uint64_t use, uint64_t victim)
{
    if (victim == CIDX_NEXT_USE_NONE)
        return false;   /* nothing is a better victim than one nobody needs */
    size_t scanned = 0;
    for (struct job *j = pf->jobs; j; j = j->next) {
        /* the hints being read; a queued next epoch's keys read before use
         * have no known use after it (the hints end there), so they tell
         * nothing either way */
        if (!j->ordered || j->retired || chain_head(pf, j) != j)
            continue;
        for (size_t k = j->position; k < j->n && j->seq_base + k < use; k++) {
            if (j->read[k])
                continue;
            if (++scanned > PASSED_SCAN)
                return true;
            if (next_use_after(pf, j->bucket, j->keys[k], use) > victim)
                return true;
        }
    }
    return false;
}

/* Bytes of j's keys from its reader's position up to key i not read yet:
 * how far ahead of the reader staging key i is. Stops counting at `limit`.
 * Under pf->wk.mu. */
static uint64_t bytes_ahead(const struct job *j, size_t i, uint64_t limit)
{
    uint64_t ahead = 0;
    for (size_t k = j->position; k < i && ahead < limit; k++)
        if (!j->read[k] && j->st[k] != K_FAILED && j->sizes[k] != UINT64_MAX)
            ahead += j->sizes[k];
    return ahead;
}

/* Key i's size, or the mean of the sizes known so far (0 when none is). */
static uint64_t size_guess(const struct job *j, size_t i)
{
    return j->sizes[i] != UINT64_MAX ? j->sizes[i]
           : j->sizes_known ? j->bytes_known / j->sizes_known : 0;
}

/* The end of the hints being read on the use clock: a next use at or
 * after it belongs to a queued next epoch. Under pf->wk.mu. */
static uint64_t reading_end(struct cache_prefetch *pf)
{
    uint64_t end = 0;
    for (struct job *o = pf->jobs; o; o = o->next)
        if (o->ordered && !o->retired && chain_head(pf, o) == o && o->seq_base + o->n > end)
            end = o->seq_base + o->n;
    return end;
}

/* Whether key i of j may be staged now in place of the object used next
 * at `victim`, ahead of Belady's moment: the hint asked
 * for it ("stage_ahead": a loader whose workers fetch ahead of the trainer),
 * the key is within that many objects of the readers, and what goes is needed
 * by a queued next epoch only - never by the hints being read (that would
 * be a second cold read in this epoch) - or by nobody, while there are
 * more such objects than staging fills in flight (each fill evicts its own;
 * with one such object only, parallel fills would evict more, and in the
 * last epoch, with no next epoch queued, these are the only victims).
 *
 * Why a hint may want it: Belady's moment for a key is often just after
 * the reader has read the key before it (that key, once read, is the best
 * victim), and a fill takes longer than a read (1 MiB: 26 ms over a 40 MB/s
 * link, read in 17 ms at 60 MB/s). A loader that fetches its next shard
 * while the trainer consumes this one then joins a staging fill that has
 * just begun: 0.5 s of wait per later epoch in bench/epochs.py. Staged
 * early and in parallel, the wait falls to the floor; the price is that
 * the object evicted early may be one Belady's rule would have kept, so the
 * cold reads may exceed Belady's count by a few and depend on the timing
 * (tests/unit/test_cache_prefetch.c bounds them). Without stage_ahead the
 * count stays exact. The objects are counted over all the hints being
 * read: one use of the clock is a read of every rank, so four ranks asking
 * for 64 uses staged 256 objects ahead, more than the cache held (256 cold
 * reads where Belady's rule needs 243; bench/epochs.py: 85 MiB per later
 * epoch where 84 is the goal). Under pf->wk.mu. */
static bool stage_early(struct cache_prefetch *pf, const struct job *j, size_t i, uint64_t victim)
{
    if (!j->stage_ahead)
        return false;
    uint64_t now = use_clock_now(pf), use = j->seq_base + i;
    if (use >= now && (use - now) * chains_read(pf) >= j->stage_ahead)
        return false;
    if (victim != CIDX_NEXT_USE_NONE)
        return victim >= reading_end(pf);
    unsigned limit, inflight = cache_stage_inflight(pf->c, &limit);
    return cidx_unneeded(pf->idx, inflight + 1) > inflight;
}

/* At debug level, a staging fill that starts: the key, its use, where the
 * readers are, and why it starts now (in place of what). Under pf->wk.mu. */
static void log_staging(struct cache_prefetch *pf, const struct job *j, size_t i)
{
    if (log_get_level() < LOG_LVL_DEBUG)
        return;
    char v[24] = "none";
    if (j->why_victim != CIDX_NEXT_USE_NONE)
        snprintf(v, sizeof v, "%" PRIu64, j->why_victim);
    if (j->why)
        log_msg(LOG_LVL_DEBUG, "prefetch", "job %s stages %s/%s (use %" PRIu64 ", readers "
                "at %" PRIu64 ") in place of next use %s: %s", j->id, j->bucket, j->keys[i],
                j->seq_base + i, use_clock_now(pf), v, j->why);
    else
        log_msg(LOG_LVL_DEBUG, "prefetch", "job %s stages %s/%s", j->id, j->bucket, j->keys[i]);
}

/* Notes why key i may be staged now, for log_staging. */
static bool staging_because(struct job *j, uint64_t victim, const char *why)
{
    j->why = why;
    j->why_victim = victim;
    return true;
}

/* May key i of an ordered job be staged now? Within the window, and making
 * room for it evicts nothing needed sooner. A default window (no
 * window_bytes) binds only when staging must evict: free space is filled
 * in the hinted order however far ahead that is, so a hint sent before
 * the reader starts (a dataset's set-up) stages for all its lead time,
 * and what it stages is what the reader needs first. Under pf->wk.mu. */
static bool ordered_may_stage(struct cache_prefetch *pf, struct job *j, size_t i)
{
    if (j->window_objects && i >= j->position + j->window_objects)
        return false;
    uint64_t window = window_of(pf, j);
    if (j->window_bytes && bytes_ahead(j, i, window) >= window)
        return false;
    uint64_t used, reserved, objects;
    cidx_usage(pf->idx, &used, &reserved, &objects);
    uint64_t cap = cache_capacity_of(pf->c);
    uint64_t high = cap / 100 * cache_high_pct_of(pf->c);
    uint64_t guess = size_guess(j, i);
    /* staging_bytes may count a fill that has reserved already: at worst
     * the last key that fits waits for the fills in flight to end */
    if (used + reserved + pf->staging_bytes + guess <= high)
        return staging_because(j, CIDX_NEXT_USE_NONE, "free space");   /* no eviction */
    if (!j->window_bytes && bytes_ahead(j, i, window) >= window)
        return false;
    uint64_t victim;
    if (!cidx_victim_next_use(pf->idx, &victim))
        return false;   /* everything is pinned or filling */
    uint64_t use = j->seq_base + i;
    if (victim <= use)
        return false;
    if (stage_early(pf, j, i, victim))   /* as many at once as the budget allows */
        return staging_because(j, victim, "stage_ahead");
    /* Otherwise one staging fill at a time when it must evict (fills
     * reserve their space only when they start, so several staged in one
     * pass would all count on the same spare victim), at Belady's moment. */
    unsigned limit;
    if (cache_stage_inflight(pf->c, &limit) > 0 || passed_keys_beat(pf, use, victim))
        return false;
    return staging_because(j, victim, "at Belady's moment");
}

/* Moves j's cursor past keys that need nothing; whether the key there may
 * be staged now. Under pf->wk.mu. */
static bool job_ready(struct cache_prefetch *pf, struct job *j)
{
    if (j->state == CACHE_JOB_QUEUED)
        j->state = CACHE_JOB_RUNNING;
    while (j->cursor < j->n && j->st[j->cursor] != K_PENDING)
        j->cursor++;
    check_done(j);
    if (j->cursor >= j->n)
        return false;
    j->why = NULL;
    return !j->ordered || ordered_may_stage(pf, j, j->cursor);
}

/* Stages the key at j's cursor. False when the background budget is
 * exhausted (nothing more starts this round). Under pf->wk.mu. */
static bool stage_one(struct cache_prefetch *pf, struct job *j)
{
    size_t i = j->cursor;
    struct stage_obs *o = calloc(1, sizeof *o);
    if (!o)
        return false;
    o->base.done = stage_done;
    o->base.job = j;
    o->base.index = i;
    o->base.use = j->ordered ? j->seq_base + i : CIDX_NEXT_USE_NONE;
    o->job = j;
    uint64_t size = 0;
    struct cache_stage_end err = { .err = CACHE_IO, .why = "" };
    enum cache_stage_result r = cache_stage(pf->c, j->bucket, j->keys[i], &o->base, &size,
                                            &err);
    if (r == CACHE_STAGE_BUSY) {
        free(o);
        pf->round_busy = true;
        return false;
    }
    if (r != CACHE_STAGE_STARTED)
        free(o);
    if (r == CACHE_STAGE_CACHED) {
        mark_cached(j, i, size);
        if (j->ordered)
            declare(pf, j->bucket, j->keys[i]);
    } else if (r == CACHE_STAGE_STARTED) {
        log_staging(pf, j, i);
        j->st[i] = K_INFLIGHT;
        j->inflight++;
        o->guess = size_guess(j, i);
        pf->staging_bytes += o->guess;
        if (j->first_stage.tv_sec == 0)
            clock_gettime(CLOCK_MONOTONIC, &j->first_stage);
    } else {
        j->st[i] = K_FAILED;
        j->failed++;
        add_error(j, i, &err);
    }
    j->cursor++;
    check_done(j);
    return true;
}

/* Starts staging work, most urgent first: each round, of the keys the jobs
 * may stage now, the one whose use comes first on the use clock (several
 * ranks reading in step are served in step, not one job before the next).
 * Under pf->wk.mu. */
static void stage_round(struct cache_prefetch *pf)
{
    for (;;) {
        struct job *best = NULL;
        for (struct job *j = pf->jobs; j; j = j->next) {
            if (job_final(j) || !job_ready(pf, j))
                continue;
            if (!best || j->seq_base + j->cursor < best->seq_base + best->cursor)
                best = j;
        }
        if (!best || !stage_one(pf, best))
            return;
    }
}

static void job_free(struct job *j)
{
    for (size_t i = 0; i < j->n; i++)
        free(j->keys[i]);
    for (size_t i = 0; i < j->n_errors; i++)
        free(j->errors[i].key);
    free(j->keys);
    free(j->sizes);
    free(j->st);
    free(j->read);
    free(j->pinned);
    free(j->map);
    free(j->bucket);
    free(j->consumer);
    free(j);
}

/* Drops jobs that ended long ago and have nothing in flight. Under pf->wk.mu. */
static void jobs_expire(struct cache_prefetch *pf)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    for (struct job **pp = &pf->jobs; *pp;) {
        struct job *j = *pp;
        if (job_final(j) && j->inflight == 0 &&
            now.tv_sec - j->ended.tv_sec > (time_t)cache_job_keep_s_of(pf->c)) {
            job_retire(pf, j);
            *pp = j->next;
            if (j->ordered)
                atomic_fetch_sub(&pf->ordered_jobs, 1);
            job_free(j);
            continue;
        }
        pp = &j->next;
    }
}

/* No job has a staged fill in flight. Under pf->wk.mu. */
static bool none_inflight(const struct cache_prefetch *pf)
{
    for (const struct job *j = pf->jobs; j; j = j->next)
        if (j->inflight)
            return false;
    return true;
}

static void *stager_main(void *arg)
{
    struct cache_prefetch *pf = arg;
    pthread_mutex_lock(&pf->wk.mu);
    while (!pf->wk.stop) {
        uint64_t seen = pf->events;
        pf->round_busy = false;
        stage_round(pf);
        if (!pf->round_busy && none_inflight(pf))
            pf->settled_at = seen + 1;
        jobs_expire(pf);
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        t.tv_nsec += STAGER_TICK_MS * 1000000L;
        if (t.tv_nsec >= 1000000000L) {
            t.tv_sec++;
            t.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&pf->wk.cv, &pf->wk.mu, &t);
    }
    pthread_mutex_unlock(&pf->wk.mu);
    return NULL;
}

/* ---- the public verbs (cache.h) ---- */

static void job_info(const struct job *j, struct cache_job_info *out)
{
    *out = (struct cache_job_info){
        .bucket = strdup(j->bucket),
        .consumer = j->consumer ? strdup(j->consumer) : NULL,
        .state = j->state,
        .ordered = j->ordered, .has_epoch = j->has_epoch, .epoch = j->epoch,
        .total = j->n, .cached = j->cached, .staged = j->staged, .failed = j->failed,
        .pending = j->n - j->cached - j->staged - j->failed,
        /* sizes not known yet, of keys still to come, are estimated from
         * the known ones below (a failed key has no size and adds nothing) */
        .bytes_total = j->bytes_known, .bytes_done = j->bytes_staged,
        .bytes_cached = j->bytes_cached,
        .position = j->position,
        .stage_ahead = j->stage_ahead,
        .created = j->created, .ended = j->ended,
    };
    memcpy(out->id, j->id, sizeof out->id);
    size_t unknown = 0;
    for (size_t i = 0; i < j->n; i++)
        unknown += j->sizes[i] == UINT64_MAX && j->st[i] != K_FAILED;
    if (j->sizes_known && unknown)
        out->bytes_total += j->bytes_known / j->sizes_known * unknown;
    out->eta_s = -1;
    if (!job_final(j) && j->first_stage.tv_sec) {
        double el = mono_now() - ((double)j->first_stage.tv_sec +
                                  (double)j->first_stage.tv_nsec / 1e9);
        if (el > 0.05)
            out->rate_bytes_s = (double)j->bytes_staged / el;
        if (out->rate_bytes_s > 0 && j->sizes_known)
            out->eta_s = (double)(out->bytes_total - out->bytes_done - out->bytes_cached) /
                         out->rate_bytes_s;
    }
    if (job_final(j))
        out->eta_s = 0;
    for (size_t i = 0; i < j->n_errors; i++) {
        out->errors[i] = j->errors[i];
        out->errors[i].key = strdup(j->errors[i].key);
        if (out->errors[i].key)
            out->n_errors++;
    }
}

void cache_job_info_clear(struct cache_job_info *ji)
{
    free(ji->bucket);
    free(ji->consumer);
    for (size_t i = 0; i < ji->n_errors; i++)
        free(ji->errors[i].key);
    memset(ji, 0, sizeof *ji);
}

int cache_job_submit(struct cache *c, struct cache_hint *h, char id_out[CACHE_JOB_ID_LEN])
{
    struct cache_prefetch *pf = cache_prefetch_of(c);
    struct job *j = malloc(sizeof *j);
    if (!j)
        return -1;
    *j = (struct job){ .pf = pf, .ordered = h->ordered, .has_epoch = h->has_epoch,
                       .epoch = h->epoch, .pin = h->pin, .window_bytes = h->window_bytes,
                       .window_objects = h->window_objects, .stage_ahead = h->stage_ahead };
    j->bucket = strdup(h->bucket);
    j->consumer = h->consumer ? strdup(h->consumer) : NULL;
    j->n = h->n_keys;
    j->sizes = malloc((j->n ? j->n : 1) * sizeof *j->sizes);
    j->st = calloc(j->n ? j->n : 1, 1);
    j->read = calloc(j->n ? j->n : 1, sizeof *j->read);
    j->pinned = h->pin ? calloc(j->n ? j->n : 1, sizeof *j->pinned) : NULL;
    if (!j->bucket || (h->consumer && !j->consumer) || !j->sizes || !j->st || !j->read ||
        (h->pin && !j->pinned)) {
        job_free(j);
        return -1;
    }
    j->keys = h->keys;   /* taken */
    h->keys = NULL;
    h->n_keys = 0;
    for (size_t i = 0; i < j->n; i++)
        j->sizes[i] = UINT64_MAX;
    for (size_t i = 0; h->sizes && i < j->n; i++)
        set_size(j, i, h->sizes[i]);
    free(h->sizes);
    h->sizes = NULL;
    if (j->ordered && map_build(j) != 0) {
        job_free(j);
        return -1;
    }
    uint64_t rnd[2] = { 0, 0 };
    if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd)
        rnd[0] = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)j;
    snprintf(j->id, sizeof j->id, "%016llx", (unsigned long long)rnd[0]);
    clock_gettime(CLOCK_REALTIME, &j->created);
    j->state = CACHE_JOB_QUEUED;

    pthread_mutex_lock(&pf->wk.mu);
    if (pf->wk.stop) {
        pthread_mutex_unlock(&pf->wk.mu);
        job_free(j);
        return -1;
    }
    /* A new ordered hint of a consumer supersedes its live ones - except
     * the one of the epoch just before, when both carry an epoch: the new
     * hint is then read after it (a loader declaring epoch e+1 while it
     * reads epoch e). Superseded hints stop staging and guiding eviction. */
    if (j->ordered)
        for (struct job *o = pf->jobs; o; o = o->next)
            if (o->ordered && !o->retired && strcmp(o->bucket, j->bucket) == 0 &&
                same_consumer(o->consumer, j->consumer) &&
                !(j->has_epoch && o->has_epoch && o->epoch + 1 == j->epoch)) {
                job_end(o, CACHE_JOB_CANCELLED);
                job_retire(pf, o);
            }
    /* Next uses are positions on one use clock: a hint that follows the
     * consumer's live one starts where that one ends, any other where the
     * readers are now. */
    struct job *prev = NULL;
    for (struct job *o = pf->jobs; j->ordered && o; o = o->next)
        if (same_chain(o, j))
            prev = o;
    j->seq_base = prev ? prev->seq_base + prev->n : use_clock_now(pf);
    if (j->seq_base + j->n > pf->next_seq)
        pf->next_seq = j->seq_base + j->n;
    j->next = pf->jobs;
    pf->jobs = j;
    if (j->ordered)
        atomic_fetch_add(&pf->ordered_jobs, 1);
    /* Every object of an ordered hint that is cached already gets its next
     * use now, not when the stager reaches it: otherwise the ones far ahead
     * look unneeded and go first. */
    if (j->ordered)
        for (size_t i = 0; i < j->n; i++)
            declare(pf, j->bucket, j->keys[i]);
    update_policy(pf);
    pf->events++;
    pthread_cond_signal(&pf->wk.cv);
    pthread_mutex_unlock(&pf->wk.mu);
    memcpy(id_out, j->id, CACHE_JOB_ID_LEN);
    log_msg(LOG_LVL_INFO, "prefetch", "job %s: %zu objects of %s%s%s", j->id, j->n, j->bucket,
            j->ordered ? ", ordered" : "", j->pin ? ", pinned" : "");
    return 0;
}

static struct job *job_find(struct cache_prefetch *pf, const char *bucket, const char *id)
{
    for (struct job *j = pf->jobs; j; j = j->next)
        if (strcmp(j->id, id) == 0 && strcmp(j->bucket, bucket) == 0)
            return j;
    return NULL;
}

/* Under the lock: finds bucket's job id, cancels it first when asked, and
 * snapshots it into *out (cache_job_get and cache_job_cancel). 0, or -1
 * when there is no such job. */
static int job_snapshot(struct cache *c, const char *bucket, const char *id, bool cancel,
                        struct cache_job_info *out)
{
    struct cache_prefetch *pf = cache_prefetch_of(c);
    pthread_mutex_lock(&pf->wk.mu);
    struct job *j = job_find(pf, bucket, id);
    if (j && cancel) {
        job_end(j, CACHE_JOB_CANCELLED);
        job_retire(pf, j);
    }
    if (j)
        job_info(j, out);
    pthread_mutex_unlock(&pf->wk.mu);
    return j ? 0 : -1;
}

int cache_job_get(struct cache *c, const char *bucket, const char *id,
                  struct cache_job_info *out)
{
    return job_snapshot(c, bucket, id, false, out);
}

int cache_job_list(struct cache *c, const char *bucket, struct cache_job_info **out, size_t *n)
{
    struct cache_prefetch *pf = cache_prefetch_of(c);
    pthread_mutex_lock(&pf->wk.mu);
    size_t cnt = 0;
    for (struct job *j = pf->jobs; j; j = j->next)
        cnt += strcmp(j->bucket, bucket) == 0;
    *out = calloc(cnt ? cnt : 1, sizeof **out);
    *n = 0;
    for (struct job *j = pf->jobs; *out && j; j = j->next)
        if (strcmp(j->bucket, bucket) == 0)
            job_info(j, &(*out)[(*n)++]);
    pthread_mutex_unlock(&pf->wk.mu);
    return *out ? 0 : -1;
}

bool cache_prefetch_settled(struct cache *c)
{
    struct cache_prefetch *pf = cache_prefetch_of(c);
    pthread_mutex_lock(&pf->wk.mu);
    bool settled = pf->settled_at == pf->events + 1;
    pthread_mutex_unlock(&pf->wk.mu);
    return settled;
}

int cache_job_cancel(struct cache *c, const char *bucket, const char *id,
                     struct cache_job_info *out)
{
    int rc = job_snapshot(c, bucket, id, true, out);
    if (rc == 0)
        log_msg(LOG_LVL_INFO, "prefetch", "job %s cancelled", id);
    return rc;
}

/* Keys a reader has left this far behind count as passed: a loader that
 * skips a key (a read that failed, a shard it drops) must not hold the
 * job's position, and with it the staging window, there for the rest of
 * the epoch. Far more than a loader has in flight (workers x prefetch). */
enum { READ_SLACK = 64 };

/* The reader of j is done with key k. Under pf->wk.mu. */
static void mark_read(struct cache_prefetch *pf, struct job *j, size_t k)
{
    j->read[k] = true;
    if (j->st[k] == K_PENDING)   /* read before it was staged: the reader fetched it */
        mark_cached(j, k, j->sizes[k]);
    if (j->pinned && j->pinned[k]) {
        cidx_unpin(pf->idx, j->pinned[k]);
        j->pinned[k] = 0;
    }
}

/* The reader of j read key i: it is marked read, keys READ_SLACK behind it
 * are passed, and the position moves to the first key not read. Under
 * pf->wk.mu. */
static void job_advance(struct cache_prefetch *pf, struct job *j, size_t i)
{
    mark_read(pf, j, i);
    for (size_t k = j->position; k + READ_SLACK < i; k++)
        if (!j->read[k]) {
            mark_read(pf, j, k);
            declare(pf, j->bucket, j->keys[k]);
        }
    while (j->position < j->n && j->read[j->position])
        j->position++;
    if (j->position >= j->n) {
        check_done(j);
        job_retire(pf, j);
    }
}

void cache_note_read(struct cache *c, const char *bucket, const char *key)
{
    struct cache_prefetch *pf = cache_prefetch_of(c);
    if (atomic_load(&pf->ordered_jobs) == 0)
        return;
    pthread_mutex_lock(&pf->wk.mu);
    /* A read carries no consumer, only its key: it belongs to the hints
     * that expected it soonest, counted from each one's position. A read
     * belongs to the hint of its chain being read, not to the next epoch's
     * (which holds the same keys); and when ranks cross an epoch boundary a
     * step apart, the last reads of one rank's epoch must not move another
     * rank's next epoch, where the same key waits further ahead (measured:
     * that jump cleared the next uses of keys the other rank was about to
     * read, and they were evicted; tests/unit/test_cache_prefetch.c, two
     * ranks). Only a key no hint being read still expects goes to a next
     * epoch's hint, and only near its start: a loader's first worker
     * begins the next epoch while another still reads this one's last key. */
    enum { MAX_MATCH = 64 };
    struct job *match[MAX_MATCH];
    size_t at[MAX_MATCH], n = 0, best = SIZE_MAX;
    for (int next_epoch = 0; next_epoch < 2 && n == 0; next_epoch++)
        for (struct job *j = pf->jobs; j; j = j->next) {
            if (!j->ordered || j->retired || strcmp(j->bucket, bucket) != 0 ||
                (chain_head(pf, j) == j) == (bool)next_epoch)
                continue;
            size_t i = map_find(j, key);
            if (i == SIZE_MAX || !unread(j, i))
                continue;
            size_t d = i - j->position;
            if (next_epoch && d >= READ_SLACK)
                continue;
            if (d < best) {
                best = d;
                n = 0;
            }
            if (d == best && n < MAX_MATCH) {
                match[n] = j;
                at[n++] = i;
            }
        }
    for (size_t k = 0; k < n; k++)
        job_advance(pf, match[k], at[k]);
    if (n) {
        declare(pf, bucket, key);   /* its next use moves on, or goes */
        pf->events++;
        pthread_cond_signal(&pf->wk.cv);
    }
    pthread_mutex_unlock(&pf->wk.mu);
}

/* ---- with the fill engine ---- */

void cache_prefetch_on_ready(struct cache_prefetch *pf, const char *bucket, const char *key,
                             uint64_t id)
{
    pthread_mutex_lock(&pf->wk.mu);
    uint64_t nu = next_use_of(pf, bucket, key, NULL);
    if (nu != CIDX_NEXT_USE_NONE)
        cidx_set_next_use(pf->idx, id, nu);
    for (struct job *j = pf->jobs; j; j = j->next) {
        if (!j->pin || j->retired || strcmp(j->bucket, bucket) != 0)
            continue;
        size_t i = j->map ? map_find(j, key) : SIZE_MAX;
        if (i == SIZE_MAX)   /* unordered pinned jobs: a linear look is fine for pins */
            for (size_t k = 0; k < j->n && i == SIZE_MAX; k++)
                if (strcmp(j->keys[k], key) == 0)
                    i = k;
        if (i != SIZE_MAX && !j->pinned[i] && cidx_pin(pf->idx, id) == CIDX_OK)
            j->pinned[i] = id;
    }
    pthread_mutex_unlock(&pf->wk.mu);
}

struct cache_prefetch *cache_prefetch_new(struct cache *c)
{
    struct cache_prefetch *pf = calloc(1, sizeof *pf);
    if (!pf)
        return NULL;
    pf->c = c;
    pf->idx = cache_index_of(c);
    pf->next_seq = 1;
    if (sg_worker_start(&pf->wk, stager_main, pf) != 0) {
        free(pf);
        return NULL;
    }
    pf->started = true;
    return pf;
}

void cache_prefetch_stop(struct cache_prefetch *pf)
{
    if (pf->started)
        sg_worker_join(&pf->wk);   /* sets wk.stop: no new staging */
    pf->started = false;
}

void cache_prefetch_free(struct cache_prefetch *pf)
{
    cache_prefetch_stop(pf);
    /* the fill workers are joined: no observer can call in any more */
    while (pf->jobs) {
        struct job *j = pf->jobs;
        pf->jobs = j->next;
        job_free(j);
    }
    sg_worker_destroy(&pf->wk);
    free(pf);
}
