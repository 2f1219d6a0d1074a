/* cache/cache.c - the cache tier's face: open, stop and close (the
 * configuration's defaults, the directory lock, the I/O engine, the index,
 * the fill workers and the prefetch stager), readiness and the counters.
 *
 * The engine's other files, all sharing struct cache and struct fill
 * (cache_int.h):
 *   read.c         a reader's side: a hit from a published entry, or a read
 *                  that joins the fill in flight and waits for its bytes
 *   revalidate.c   whether a hit must be checked against the cold tier, and
 *                  the check
 *   fill.c         single flight: the table of fills in flight, their
 *                  queues (misses before staging), waiting readers and
 *                  their deadlines
 *   fill_worker.c  the worker thread that runs one fill, from the cold tier
 *                  through the I/O engine (engine.c) to publish
 *   stage.c        fills with no reader, for prefetch jobs (prefetch.c)
 *   dirwatch.c     the cache directory; objfile.c a data file's header
 * The index (cache_index.h) is index.c and the files its comment names.
 *
 * Locks: c->mu (fill table, queue, stop flag) before f->mu (one fill's
 * state and waiters); the index has its own locks and is never called with
 * f->mu held. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "cache_index.h"
#include "cache_int.h"
#include "dirlock.h"
#include "dirwatch_int.h"
#include "engine_int.h"
#include "log.h"

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

/* ---- open, stop, close ---- */

/* Locks the cache directory for the cache's life, before the index is read:
 * two gateways on one directory would overwrite each other's snapshots. One
 * gateway per cache directory. Only another holder stops the start: a
 * directory that cannot hold the lock now (missing and not creatable,
 * read-only) is one the cache cannot use either, and the watcher takes the
 * lock when it takes the directory back (cache_dir_claim). */
static int cache_dir_lock(struct cache *c)
{
    char msg[768];
    int e;
    switch (sg_dirlock_take(c->dir, "cache directory", &c->lock, &e, msg, sizeof msg)) {
    case SG_DIRLOCK_OK:
        return 0;
    case SG_DIRLOCK_UNSUPPORTED:
    case SG_DIRLOCK_ERRNO:
        log_msg(LOG_LVL_WARN, "cache", "%s", msg);
        return 0;
    case SG_DIRLOCK_BUSY:
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
    struct sg_dirlock *old = c->lock;
    c->lock = NULL;
    sg_dirlock_release(old);   /* ours: released before we take the new file's */
    int e;
    switch (sg_dirlock_take(c->dir, "cache directory", &c->lock, &e, why, len)) {
    case SG_DIRLOCK_OK:
        return 0;
    case SG_DIRLOCK_UNSUPPORTED:
        log_msg(LOG_LVL_WARN, "cache", "%s", why);
        return 0;
    case SG_DIRLOCK_BUSY:
    case SG_DIRLOCK_ERRNO:
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
    if (!c->cf.fill_direct_min)
        c->cf.fill_direct_min = CACHE_FILL_DIRECT_MIN;
    c->cold = cold;
    c->mem = cache_mem_new(cf->memory, 4096);   /* NULL when off, or without memory: no tier */
    c->hdrs = cache_mem_new(cf->header_memory, 256);   /* a header block is ~200 bytes */
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
        sg_dirlock_release(c->lock);
        cache_mem_free(c->mem);
        cache_mem_free(c->hdrs);
        pthread_cond_destroy(&c->work);
        pthread_mutex_destroy(&c->mu);
        free(c->dir);
        free(c);
        return -1;
    }
    c->workers = calloc(c->cf.fill_workers, sizeof *c->workers);
    for (unsigned i = 0; c->workers && i < c->cf.fill_workers; i++) {
        if (pthread_create(&c->workers[i], NULL, cache_worker_main, c) != 0)
            break;
        c->n_workers++;
    }
    c->reaper_started = pthread_create(&c->reaper, NULL, cache_reaper_main, c) == 0;
    if (cache_publisher_start(c) != 0)   /* the workers then finish their own fills */
        log_msg(LOG_LVL_WARN, "cache", "no publisher thread: fill workers sync their files");
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
        cache_fill_fail(c, q, CACHE_IO, BACKEND_OK, "the gateway is stopping");
        cache_fill_retire(c, q);
        q = next;
    }
    for (unsigned i = 0; i < c->n_workers; i++)
        pthread_join(c->workers[i], NULL);
    c->n_workers = 0;
    cache_publisher_stop(c);   /* after the workers: it finishes what they queued */
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
    sg_dirlock_release(c->lock);   /* after the index is persisted */
    free(c->workers);
    cache_mem_free(c->mem);
    cache_mem_free(c->hdrs);
    pthread_cond_destroy(&c->pub_cv);
    pthread_mutex_destroy(&c->pub_mu);
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
    out->fills_withdrawn = atomic_load(&c->fills_withdrawn);
    out->fill_bytes_direct = atomic_load(&c->fill_bytes_direct);
    out->fill_bytes_buffered = atomic_load(&c->fill_bytes_buffered);
    out->fill_read_window = atomic_load(&c->fill_read_window);
    out->fill_read_file = atomic_load(&c->fill_read_file);
    for (int i = 0; i < CACHE_CHECKS; i++)
        out->fill_checks[i] = atomic_load(&c->fill_checks[i]);
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
    cache_mem_stats(c->mem, &out->memory_hits, &out->memory_bytes, &out->memory_objects);
    cache_mem_stats(c->hdrs, &out->header_hits, &out->header_bytes, &out->header_objects);
}

bool cache_ready(struct cache *c, char *why, size_t len)
{
    return cache_dirwatch_ready(c->watch, why, len);
}
