/* cache/revalidate.c - revalidation of a hit: whether its bucket's
 * consistency (ttl:N / always) asks for a check, and the check of the cached
 * copy against the cold tier before it is served: one HEAD with a short
 * deadline of its own (cache.revalidate_timeout_ms, 1 s), so a hung cold
 * tier costs a hit at most that, then the cached copy is served.
 *
 * Why a short synchronous check rather than serving at once and checking in
 * the background: `always` and `ttl` promise that a read after a change in
 * the cold tier sees the change; a background check would serve one stale
 * read per change (stale-while-revalidate), a weaker contract. A HEAD to a
 * healthy tier takes milliseconds, so only a sick tier costs the wait.
 *
 * The check compares the ETag and size, and then the tags (their count),
 * which S3 changes without a new ETag: a copy whose tags changed in the
 * cold tier is dropped and read again, as a changed object is.
 *
 * After a check timed out, checks are skipped for REVAL_HOLDOFF_MS and the
 * cached copies served as they are: the check runs on the HTTP thread that
 * serves the hit, and with a handful of such threads a storm of hits each
 * waiting out the deadline would stall every other request on them too. */
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "cache_index.h"
#include "cache_int.h"
#include "log.h"

enum { REVAL_HOLDOFF_MS = 5000 };

static int64_t mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

void cache_reval_init(struct cache_reval *rv, unsigned timeout_ms)
{
    memset(rv, 0, sizeof *rv);
    rv->timeout_ms = timeout_ms ? timeout_ms : 1000;
    atomic_init(&rv->holdoff_until, 0);
    atomic_init(&rv->timeouts, 0);
    atomic_init(&rv->skipped, 0);
}

enum backend_status cache_reval_head(struct cache_reval *rv, struct backend *cold,
                                     const char *bucket, const char *key,
                                     struct obj_meta *meta, bool *asked)
{
    memset(meta, 0, sizeof *meta);
    *asked = false;
    if (mono_ms() < atomic_load(&rv->holdoff_until)) {
        atomic_fetch_add(&rv->skipped, 1);
        log_msg(LOG_LVL_DEBUG, "cache", "revalidation of %s/%s skipped (a check timed out "
                "less than %d s ago): serving the cached copy", bucket, key,
                REVAL_HOLDOFF_MS / 1000);
        return BACKEND_TIMEOUT;
    }
    *asked = true;
    enum backend_status st = backend_object_head_timed(cold, bucket, key, rv->timeout_ms, meta);
    if (st == BACKEND_TIMEOUT) {
        atomic_fetch_add(&rv->timeouts, 1);
        atomic_store(&rv->holdoff_until, mono_ms() + REVAL_HOLDOFF_MS);
        log_msg(LOG_LVL_WARN, "cache", "revalidation of %s/%s timed out after %u ms: serving "
                "the cached copy; checks pause for %d s", bucket, key, rv->timeout_ms,
                REVAL_HOLDOFF_MS / 1000);
    }
    return st;
}

void cache_reval_stats(struct cache_reval *rv, uint64_t *timeouts, uint64_t *skipped)
{
    *timeouts = atomic_load(&rv->timeouts);
    *skipped = atomic_load(&rv->skipped);
}

static bool same_hdr(const struct obj_meta *a, const struct obj_meta *b, const char *name)
{
    const char *x = obj_meta_get_hdr(a, name), *y = obj_meta_get_hdr(b, name);
    return x == y || (x && y && strcmp(x, y) == 0);
}

bool cache_reval_tags_differ(const struct obj_meta *cold, const struct obj_meta *cached)
{
    return !same_hdr(cold, cached, OBJ_TAGGING_COUNT_HDR) ||
           !same_hdr(cold, cached, OBJ_TAGGING_HDR);
}

/* ---- whether a hit is checked: its bucket's consistency (cache.buckets) ---- */

static const struct cache_bucket_conf *bucket_conf(const struct cache *c, const char *bucket)
{
    for (size_t i = 0; i < c->cf.n_buckets; i++)
        if (strcmp(c->cf.buckets[i].bucket, bucket) == 0)
            return &c->cf.buckets[i];
    return NULL;
}

/* Must a READY entry validated at `at_ms` be checked against the cold tier? */
bool cache_needs_revalidation(const struct cache *c, const char *bucket, int64_t at_ms)
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
