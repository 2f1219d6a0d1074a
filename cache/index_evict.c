/* cache/index_evict.c - the eviction policy: LRU, or furthest next use while
 * ordered prefetch hints declare next uses; victims picked across the 64 shards
 * from the order of index_order.c; cidx_evict and the next-use declarations.
 *
 * Recency: every use stamps the entry from an index-wide atomic clock and moves it
 * to the head of its shard's list, under that shard's lock only. Eviction merges
 * the shards' list tails by stamp, which gives global LRU order up to the moment
 * each shard was looked at (approximate under concurrent use, exact when quiet).
 * Only evictable entries (READY, unpinned) are in the lists/heap, so a victim is
 * always the head of a structure: no walk past pinned or filling entries. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>

#include "cidx_int.h"
#include "log.h"

enum cidx_status cidx_set_next_use(struct cidx *x, uint64_t id, uint64_t next_use_seq)
{
    struct cidx_shard *s;
    struct cidx_ent *e = cidx_id_lock(x, id, &s);
    if (e != NULL) {
        bool listed = (e->flags & ENT_IN_LIST) != 0;
        cidx_ev_remove(s, e);
        e->next_use = next_use_seq;
        e->stamp = atomic_fetch_add_explicit(&x->clock, 1, memory_order_relaxed) + 1;
        if (listed)
            cidx_ev_insert(s, e);
    }
    pthread_mutex_unlock(&s->mu);
    return e != NULL ? CIDX_OK : CIDX_NOT_FOUND;
}

void cidx_set_policy(struct cidx *x, enum cidx_policy p)
{
    atomic_store(&x->policy, (int)p);
}

enum cidx_policy cidx_get_policy(const struct cidx *x)
{
    return (enum cidx_policy)atomic_load(&((struct cidx *)x)->policy);
}

bool cidx_victim_next_use(struct cidx *x, uint64_t *next_use)
{
    bool any = false;
    uint64_t best = 0;
    for (unsigned i = 0; i < CIDX_NSHARD; i++) {
        struct cidx_shard *s = &x->shards[i];
        pthread_mutex_lock(&s->mu);
        if (s->plain.head) {
            any = true;
            best = CIDX_NEXT_USE_NONE;
        } else if (s->heap_n) {
            any = true;
            if (s->heap[0]->next_use > best)
                best = s->heap[0]->next_use;
        }
        pthread_mutex_unlock(&s->mu);
        if (best == CIDX_NEXT_USE_NONE)
            break;   /* nothing is needed later than "never" */
    }
    *next_use = best;
    return any;
}

unsigned cidx_unneeded(struct cidx *x, unsigned limit)
{
    unsigned n = 0;
    for (unsigned i = 0; i < CIDX_NSHARD && n < limit; i++) {
        struct cidx_shard *s = &x->shards[i];
        pthread_mutex_lock(&s->mu);
        for (const struct cidx_ent *e = s->plain.head; e && n < limit; e = e->next)
            n++;
        pthread_mutex_unlock(&s->mu);
    }
    return n;
}

/* ---- eviction ---- */

/* Victim order key: smaller goes first. */
struct vkey {
    uint64_t cls, val;
    bool valid;
};

static bool vkey_lt(struct vkey a, struct vkey b)
{
    return a.cls < b.cls || (a.cls == b.cls && a.val < b.val);
}

static struct cidx_ent *shard_victim(struct cidx_shard *s, int policy, struct vkey *k)
{
    struct cidx_ent *p = s->plain.tail, *h = s->hinted.tail, *v = NULL;
    k->valid = false;
    if (policy == CIDX_POLICY_NEXT_USE) {
        if (p != NULL) {
            v = p;
            *k = (struct vkey){0, p->stamp, true};
        } else if (s->heap_n > 0) {
            v = s->heap[0];
            *k = (struct vkey){1, UINT64_MAX - v->next_use, true};
        }
    } else {
        v = (p != NULL && (h == NULL || p->stamp <= h->stamp)) ? p : h;
        if (v != NULL)
            *k = (struct vkey){0, v->stamp, true};
    }
    return v;
}

/* At debug level, each eviction and the next use it went with: what an
 * operator reads to see why an object left (bench/epochs.py's traces). */
static void log_evicted(const struct cidx_ent *e)
{
    char nu[24] = "none";
    if (e->next_use != CIDX_NEXT_USE_NONE)
        snprintf(nu, sizeof nu, "%" PRIu64, e->next_use);
    log_msg(LOG_LVL_DEBUG, "cache", "evicted %.*s/%.*s (%" PRIu64 " bytes, next use %s)",
            (int)e->blen, e->kb, (int)e->klen, e->kb + e->blen, e->size, nu);
}

enum cidx_status cidx_evict(struct cidx *x, uint64_t target_used, uint64_t *freed,
                            unsigned *count)
{
    struct vkey cache[CIDX_NSHARD];
    uint64_t fr = 0;
    unsigned cnt = 0;
    enum cidx_status st = CIDX_OK;
    int policy = atomic_load(&x->policy);
    /* Each shard's best candidate, refreshed only for the shard we take from:
     * a shard's candidate only gets younger (touches, removals) or, after a
     * set_next_use, is re-read when its turn comes. */
    for (unsigned si = 0; si < CIDX_NSHARD; si++) {
        pthread_mutex_lock(&x->shards[si].mu);
        shard_victim(&x->shards[si], policy, &cache[si]);
        pthread_mutex_unlock(&x->shards[si].mu);
    }
    enum { BATCH = 64 };
    while (atomic_load(&x->used) + atomic_load(&x->reserved) > target_used) {
        int best = -1, second = -1;
        for (unsigned si = 0; si < CIDX_NSHARD; si++) {
            if (!cache[si].valid)
                continue;
            if (best < 0 || vkey_lt(cache[si], cache[best])) {
                second = best;
                best = (int)si;
            } else if (second < 0 || vkey_lt(cache[si], cache[second])) {
                second = (int)si;
            }
        }
        if (best < 0) {
            st = CIDX_BUSY;
            break;
        }
        struct cidx_shard *s = &x->shards[best];
        struct cidx_ent *victims[BATCH];
        unsigned nv = 0;
        pthread_mutex_lock(&s->mu);
        struct vkey k;
        struct cidx_ent *v = shard_victim(s, policy, &k);
        if (v != NULL && vkey_lt(cache[best], k) && second >= 0 && vkey_lt(cache[second], k)) {
            cache[best] = k; /* got younger meanwhile: choose again */
            pthread_mutex_unlock(&s->mu);
            continue;
        }
        /* Take from this shard while it stays the oldest overall. */
        while (v != NULL && nv < BATCH &&
               atomic_load(&x->used) + atomic_load(&x->reserved) > target_used &&
               (second < 0 || !vkey_lt(cache[second], k))) {
            uint64_t sz = v->size;
            st = cidx_ent_remove_ready_locked(x, s, v);
            victims[nv++] = v;
            fr += sz;
            if (st != CIDX_OK)
                break;
            v = shard_victim(s, policy, &k);
        }
        cache[best] = k;
        if (v == NULL)
            cache[best].valid = false;
        pthread_mutex_unlock(&s->mu);
        for (unsigned i = 0; i < nv; i++) {
            if (log_get_level() >= LOG_LVL_DEBUG)
                log_evicted(victims[i]);
            cidx_unlink_data(x, victims[i]->id);
            cidx_ent_free(x, victims[i]);
        }
        cnt += nv;
        if (st != CIDX_OK)
            break;
    }
    if (freed != NULL)
        *freed = fr;
    if (count != NULL)
        *count = cnt;
    return st;
}
