/* cache/memtier.c - small cached objects kept in memory as well.
 *
 * A hit on a small object (at most CACHE_INLINE_MAX bytes) reads the data
 * file's header block and body in one pread (read.c). That buffer is kept
 * here, keyed by the index entry's id, so the next hit of the same object
 * is served without touching the file: no openat, pread, fstat and close,
 * about a fifth of the gateway's CPU per 4 KiB hit
 * (bench/results/ab-memtier.md). The tier is bounded (cache.memory bytes)
 * and forgets the least recently used buffer first.
 *
 * Why an entry id is a safe key: ids are never reused (an epoch that grows
 * at every start, a sequence within it), and the bytes of a published id
 * never change. An object written again, invalidated or evicted gets a new
 * id, or none: the index lookup, which every hit still does first, no
 * longer returns the old id, so its buffer is never served again and only
 * waits here until it is the least recently used.
 *
 * Buffers are reference counted: a response being sent holds one, and the
 * tier holds one while the buffer is in it. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cache_int.h"
#include "hash.h"

struct cache_blob {
    atomic_uint refs;
    uint64_t id;                 /* in the tier: its entry's id */
    size_t len;                  /* bytes of data held (header block and body) */
    struct cache_blob *hnext;    /* hash chain */
    struct cache_blob *prev, *next;   /* recency list, most recent first */
    uint8_t data[];
};

struct cache_mem {
    pthread_mutex_t mu;
    uint64_t capacity, bytes, objects;
    struct cache_blob **table;
    size_t mask;                 /* table size - 1 (a power of two) */
    struct cache_blob *head, *tail;
    atomic_uint_fast64_t hits;
};

struct cache_blob *cache_blob_new(size_t len)
{
    struct cache_blob *b = malloc(sizeof *b + len);
    if (!b)
        return NULL;
    atomic_init(&b->refs, 1);
    b->id = 0;
    b->len = len;
    b->hnext = b->prev = b->next = NULL;
    return b;
}

struct cache_blob *cache_blob_shrink(struct cache_blob *b, size_t len)
{
    if (len >= b->len)
        return b;
    struct cache_blob *n = realloc(b, sizeof *b + len);
    if (!n)
        return b;   /* still whole, only larger than needed */
    n->len = len;
    return n;
}

uint8_t *cache_blob_data(struct cache_blob *b)
{
    return b->data;
}

size_t cache_blob_len(const struct cache_blob *b)
{
    return b->len;
}

void cache_blob_unref(struct cache_blob *b)
{
    if (b && atomic_fetch_sub(&b->refs, 1) == 1)
        free(b);
}

void cache_body_release(void *blob)
{
    cache_blob_unref(blob);
}

struct cache_mem *cache_mem_new(uint64_t capacity, size_t unit)
{
    if (capacity == 0)
        return NULL;
    struct cache_mem *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    /* a chain per `unit` bytes of capacity (4 KiB for bodies: at most 2 MiB
     * of table per GiB of tier): short chains for buffers of that size and up */
    size_t n = 1024;
    while (n < capacity / unit && n < ((size_t)1 << 24))
        n <<= 1;
    m->table = calloc(n, sizeof *m->table);
    if (!m->table) {
        free(m);
        return NULL;
    }
    m->mask = n - 1;
    m->capacity = capacity;
    pthread_mutex_init(&m->mu, NULL);
    return m;
}

static size_t slot(const struct cache_mem *m, uint64_t id)
{
    return (size_t)sg_mix64(id) & m->mask;
}

static void list_unlink(struct cache_mem *m, struct cache_blob *b)
{
    if (b->prev)
        b->prev->next = b->next;
    else
        m->head = b->next;
    if (b->next)
        b->next->prev = b->prev;
    else
        m->tail = b->prev;
    b->prev = b->next = NULL;
}

static void list_push(struct cache_mem *m, struct cache_blob *b)
{
    b->prev = NULL;
    b->next = m->head;
    if (m->head)
        m->head->prev = b;
    m->head = b;
    if (!m->tail)
        m->tail = b;
}

/* What a buffer counts against the tier's capacity: its bytes and its
 * bookkeeping (which is a fifth of a header block's charge). */
static uint64_t charge(const struct cache_blob *b)
{
    return sizeof *b + b->len;
}

/* Takes b out of the tier (under mu); the tier's reference is the caller's
 * to drop, after the lock. */
static void tier_remove(struct cache_mem *m, struct cache_blob *b)
{
    struct cache_blob **pp = &m->table[slot(m, b->id)];
    while (*pp != b)
        pp = &(*pp)->hnext;
    *pp = b->hnext;
    b->hnext = NULL;
    list_unlink(m, b);
    m->bytes -= charge(b);
    m->objects--;
}

struct cache_blob *cache_mem_get(struct cache_mem *m, uint64_t id)
{
    if (!m)
        return NULL;
    pthread_mutex_lock(&m->mu);
    struct cache_blob *b = m->table[slot(m, id)];
    while (b && b->id != id)
        b = b->hnext;
    if (b) {
        atomic_fetch_add(&b->refs, 1);
        if (m->head != b) {
            list_unlink(m, b);
            list_push(m, b);
        }
    }
    pthread_mutex_unlock(&m->mu);
    if (b)
        atomic_fetch_add(&m->hits, 1);
    return b;
}

void cache_mem_put(struct cache_mem *m, uint64_t id, struct cache_blob *b)
{
    if (!m || charge(b) > m->capacity)
        return;
    struct cache_blob *gone = NULL;   /* chained through hnext once out of the tier */
    pthread_mutex_lock(&m->mu);
    struct cache_blob *had = m->table[slot(m, id)];
    while (had && had->id != id)
        had = had->hnext;
    if (!had) {   /* another hit of the same object may have put its copy first */
        while (m->bytes + charge(b) > m->capacity && m->tail) {
            struct cache_blob *old = m->tail;
            tier_remove(m, old);
            old->hnext = gone;
            gone = old;
        }
        b->id = id;
        atomic_fetch_add(&b->refs, 1);
        size_t s = slot(m, id);
        b->hnext = m->table[s];
        m->table[s] = b;
        list_push(m, b);
        m->bytes += charge(b);
        m->objects++;
    }
    pthread_mutex_unlock(&m->mu);
    while (gone) {
        struct cache_blob *next = gone->hnext;
        gone->hnext = NULL;
        cache_blob_unref(gone);
        gone = next;
    }
}

void cache_mem_stats(struct cache_mem *m, uint64_t *hits, uint64_t *bytes, uint64_t *objects)
{
    *hits = *bytes = *objects = 0;
    if (!m)
        return;
    *hits = atomic_load(&m->hits);
    pthread_mutex_lock(&m->mu);
    *bytes = m->bytes;
    *objects = m->objects;
    pthread_mutex_unlock(&m->mu);
}

void cache_mem_free(struct cache_mem *m)
{
    if (!m)
        return;
    while (m->tail) {
        struct cache_blob *b = m->tail;
        tier_remove(m, b);
        cache_blob_unref(b);
    }
    free(m->table);
    pthread_mutex_destroy(&m->mu);
    free(m);
}
