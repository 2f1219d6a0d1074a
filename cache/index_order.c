/* cache/index_order.c - the order evictable entries are kept in: per shard, an
 * LRU list of entries without a declared next use, one of those with one, and a
 * max-heap on next use. Kept on every use, pin and publish (index.c, index_apply.c);
 * read by the eviction policy (index_evict.c). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "cidx_int.h"

/* ---- eviction structures: lists (LRU) and the next-use heap ---- */

static void list_push_head(struct cidx_list *l, struct cidx_ent *e)
{
    e->prev = NULL;
    e->next = l->head;
    if (l->head != NULL)
        l->head->prev = e;
    else
        l->tail = e;
    l->head = e;
}

static void list_del(struct cidx_list *l, struct cidx_ent *e)
{
    if (e->prev != NULL)
        e->prev->next = e->next;
    else
        l->head = e->next;
    if (e->next != NULL)
        e->next->prev = e->prev;
    else
        l->tail = e->prev;
    e->prev = e->next = NULL;
}

static void heap_set(struct cidx_shard *s, uint32_t i, struct cidx_ent *e)
{
    s->heap[i] = e;
    e->heap_idx = i;
}

static void heap_up(struct cidx_shard *s, uint32_t i)
{
    struct cidx_ent *e = s->heap[i];
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (s->heap[p]->next_use >= e->next_use)
            break;
        heap_set(s, i, s->heap[p]);
        i = p;
    }
    heap_set(s, i, e);
}

static void heap_down(struct cidx_shard *s, uint32_t i)
{
    struct cidx_ent *e = s->heap[i];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= s->heap_n)
            break;
        if (c + 1 < s->heap_n && s->heap[c + 1]->next_use > s->heap[c]->next_use)
            c++;
        if (s->heap[c]->next_use <= e->next_use)
            break;
        heap_set(s, i, s->heap[c]);
        i = c;
    }
    heap_set(s, i, e);
}

static bool heap_push(struct cidx_shard *s, struct cidx_ent *e)
{
    if (s->heap_n == s->heap_cap) {
        uint32_t nc = s->heap_cap ? s->heap_cap * 2 : 64;
        struct cidx_ent **nh = realloc(s->heap, nc * sizeof *nh);
        if (nh == NULL)
            return false;
        s->heap = nh;
        s->heap_cap = nc;
    }
    heap_set(s, s->heap_n++, e);
    heap_up(s, s->heap_n - 1);
    return true;
}

static void heap_del(struct cidx_shard *s, struct cidx_ent *e)
{
    uint32_t i = e->heap_idx;
    e->heap_idx = CIDX_HEAP_NONE;
    s->heap_n--;
    if (i == s->heap_n)
        return;
    heap_set(s, i, s->heap[s->heap_n]);
    heap_up(s, i);
    heap_down(s, s->heap[i]->heap_idx);
}

bool cidx_ent_evictable(const struct cidx_ent *e)
{
    return e->state == CIDX_STATE_READY && e->pins == 0 && !(e->flags & ENT_DOOMED);
}

/* Puts an evictable entry at the head (most recent) of its list. */
void cidx_ev_insert(struct cidx_shard *s, struct cidx_ent *e)
{
    if (e->next_use != CIDX_NEXT_USE_NONE && heap_push(s, e)) {
        list_push_head(&s->hinted, e);
    } else {
        /* No memory for the heap: treat it as without next use (evicted sooner). */
        list_push_head(&s->plain, e);
    }
    e->flags |= ENT_IN_LIST;
}

void cidx_ev_remove(struct cidx_shard *s, struct cidx_ent *e)
{
    if (!(e->flags & ENT_IN_LIST))
        return;
    if (e->heap_idx != CIDX_HEAP_NONE) {
        heap_del(s, e);
        list_del(&s->hinted, e);
    } else {
        list_del(&s->plain, e);
    }
    e->flags &= (uint8_t)~ENT_IN_LIST;
}

void cidx_ent_touch(struct cidx *x, struct cidx_shard *s, struct cidx_ent *e)
{
    e->stamp = atomic_fetch_add_explicit(&x->clock, 1, memory_order_relaxed) + 1;
    if (e->flags & ENT_IN_LIST) {
        struct cidx_list *l = e->heap_idx != CIDX_HEAP_NONE ? &s->hinted : &s->plain;
        if (l->head != e) {
            list_del(l, e);
            list_push_head(l, e);
        }
    }
}
