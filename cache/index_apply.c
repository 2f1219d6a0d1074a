/* cache/index_apply.c - the memory side of the index's persistence: records
 * of the snapshot and journals applied at open (replay, single-threaded),
 * each shard's entries serialized for a snapshot (journal.c writes them), and
 * shards emptied when the index is reset onto a new directory (index_dir.c). */
#include <inttypes.h>
#include <stdlib.h>

#include "cidx_int.h"
#include "log.h"

/* ---- apply (replay at open; single-threaded) ---- */

void cidx_apply_publish(struct cidx *x, const struct cidx_rec *r)
{
    uint64_t h = cidx_key_hash(r->bucket, r->blen, r->key, r->klen);
    unsigned si = cidx_hash_shard(h);
    if (cidx_id_shard(r->id) != si) {
        log_msg(LOG_LVL_WARN, "cache", "%s: entry %016" PRIx64 " in the wrong shard, dropped",
                x->dir, r->id);
        return;
    }
    struct cidx_shard *s = &x->shards[si];
    struct cidx_ent *old = cidx_kt_find(s, h, r->bucket, r->blen, r->key, r->klen);
    if (old == NULL)
        old = cidx_it_find(s, r->id);
    if (old != NULL) {
        cidx_ent_unlink_locked(x, s, old);
        cidx_ent_free(x, old);
    }
    struct cidx_ent *e = cidx_ent_new(x, r->bucket, r->blen, r->key, r->klen, r->etag, r->etag_len);
    if (e == NULL) {
        log_msg(LOG_LVL_ERROR, "cache", "%s: out of memory loading the index", x->dir);
        return;
    }
    e->id = r->id;
    e->size = r->size;
    e->mtime_sec = r->mtime_sec;
    e->mtime_nsec = r->mtime_nsec;
    e->validated_at = r->validated_at;
    e->stamp = r->stamp;
    e->state = CIDX_STATE_READY;
    if (r->stamp > atomic_load_explicit(&x->clock, memory_order_relaxed))
        atomic_store_explicit(&x->clock, r->stamp, memory_order_relaxed);
    cidx_kt_add(s, e, h);
    cidx_it_add(s, e);
    cidx_ev_insert(s, e);
    atomic_fetch_add_explicit(&x->used, e->size, memory_order_relaxed);
    atomic_fetch_add_explicit(&x->objects, 1, memory_order_relaxed);
}

void cidx_apply_remove(struct cidx *x, uint64_t id)
{
    struct cidx_shard *s = &x->shards[cidx_id_shard(id)];
    struct cidx_ent *e = cidx_it_find(s, id);
    if (e == NULL)
        return;
    cidx_ent_unlink_locked(x, s, e);
    cidx_ent_free(x, e);
}

/* Appends e's PUBLISH record to *buf, growing it (to at least need bytes) when
 * less than a record's worth is left. 0, or -1 when out of memory. */
static int rec_append(unsigned char **buf, size_t *len, size_t *cap, size_t need,
                      const struct cidx_ent *e)
{
    if (*cap - *len < CIDX_REC_MAX) {
        size_t nc = *cap * 2 > need ? *cap * 2 : need;
        unsigned char *nb = realloc(*buf, nc);
        if (nb == NULL)
            return -1;
        *buf = nb;
        *cap = nc;
    }
    *len += cidx_rec_publish(*buf + *len, e);
    return 0;
}

long cidx_shard_serialize(struct cidx *x, unsigned si, unsigned char **buf, size_t *len,
                          size_t *cap)
{
    struct cidx_shard *s = &x->shards[si];
    long n = 0;
    pthread_mutex_lock(&s->mu);
    /* Oldest first, so a load that pushes each at the head rebuilds the same
     * order: the plain and hinted lists merged by stamp, then the pinned (which
     * are in no list: they are in use right now). */
    struct cidx_ent *a = s->plain.tail, *b = s->hinted.tail;
    size_t need = (size_t)(s->n_key + 1) * 128;
    for (uint32_t pass = 0;; pass++) {
        struct cidx_ent *e;
        if (a != NULL && (b == NULL || a->stamp <= b->stamp)) {
            e = a;
            a = a->prev;
        } else if (b != NULL) {
            e = b;
            b = b->prev;
        } else {
            break;
        }
        (void)pass;
        if (rec_append(buf, len, cap, need, e) != 0) {
            pthread_mutex_unlock(&s->mu);
            return -1;
        }
        n++;
    }
    for (uint32_t i = 0; i <= s->kt_mask; i++) {
        for (struct cidx_ent *e = s->kt[i]; e != NULL; e = e->knext) {
            if (e->state != CIDX_STATE_READY || (e->flags & ENT_IN_LIST))
                continue;
            if (rec_append(buf, len, cap, need, e) != 0) {
                pthread_mutex_unlock(&s->mu);
                return -1;
            }
            n++;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

uint64_t cidx_shard_clear(struct cidx *x, unsigned si)
{
    struct cidx_shard *s = &x->shards[si];
    struct cidx_ent *gone = NULL;
    uint64_t n = 0;
    pthread_mutex_lock(&s->mu);
    for (uint32_t i = 0; i <= s->it_mask; i++) {
        struct cidx_ent *e;
        while ((e = s->it[i]) != NULL) {
            cidx_ent_unlink_locked(x, s, e);   /* takes it out of it[i] and the counters */
            e->inext = gone;
            gone = e;
            n++;
        }
    }
    pthread_mutex_unlock(&s->mu);
    while (gone != NULL) {
        struct cidx_ent *nx = gone->inext;
        cidx_ent_free(x, gone);
        gone = nx;
    }
    return n;
}
