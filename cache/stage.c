/* cache/stage.c - staging, for prefetch jobs (prefetch.c): a fill with no
 * reader, queued behind reader misses and limited to half the fill workers,
 * and what the stager reads of the cache (cache_int.h). */
#include <pthread.h>
#include <stdlib.h>

#include "cache.h"
#include "cache_index.h"
#include "cache_int.h"

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
    struct fill *f = cache_table_find_live(c, bucket, key);
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
    f = cache_fill_new_locked(c, bucket, key, id, true);
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
    obs->use = CIDX_NEXT_USE_NONE;   /* no hint: never withdrawn for room */
    uint64_t size;
    if (cache_stage(c, bucket, key, obs, &size, NULL) != CACHE_STAGE_STARTED)
        free(obs);
}
