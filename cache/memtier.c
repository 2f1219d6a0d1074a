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
 * tier holds one while the buffer is in it.
 *
 * Every small hit looks here, from both HTTP threads: with one lock they
 * met on it, a futex call every 40 hits (bench/results/ab-guard-shards.md).
 * A tier of a MiB or more per shard is split into up to 16 shards by id, each
 * with its own lock, table, recency list and share of the capacity: the
 * least recently used buffer of the shard goes first. A smaller tier stays
 * whole, one exact recency list. */
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

enum {
    MEM_SHARDS_MAX = 16,
    MEM_SHARD_MIN = 1024 * 1024,   /* capacity below which a tier is not split */
};

struct mem_shard {
    pthread_mutex_t mu;
    uint64_t capacity, bytes, objects;
    struct cache_blob **table;
    size_t mask;                 /* table size - 1 (a power of two) */
    struct cache_blob *head, *tail;
} __attribute__((aligned(64)));   /* no two shards' locks on one cache line */

struct cache_mem {
    unsigned nshards;            /* a power of two */
    struct mem_shard *shard;
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
    m->nshards = 1;
    while (m->nshards < MEM_SHARDS_MAX && capacity / (m->nshards * 2) >= MEM_SHARD_MIN)
        m->nshards *= 2;
    if (posix_memalign((void **)&m->shard, _Alignof(struct mem_shard),
                       m->nshards * sizeof *m->shard) != 0) {
        free(m);
        return NULL;
    }
    memset(m->shard, 0, m->nshards * sizeof *m->shard);
    /* a chain per `unit` bytes of capacity (4 KiB for bodies: at most 2 MiB
     * of table per GiB of tier): short chains for buffers of that size and up */
    uint64_t share = capacity / m->nshards;
    size_t n = 1024;
    while (n < share / unit && n < ((size_t)1 << 24))
        n <<= 1;
    for (unsigned i = 0; i < m->nshards; i++) {
        struct mem_shard *sh = &m->shard[i];
        sh->table = calloc(n, sizeof *sh->table);
        if (!sh->table) {
            m->nshards = i;
            cache_mem_free(m);
            return NULL;
        }
        sh->mask = n - 1;
        sh->capacity = share;
        pthread_mutex_init(&sh->mu, NULL);
    }
    return m;
}

/* An id's shard and its chain in the shard's table: the hash's high bits
 * pick the shard, its low bits the chain. */
static struct mem_shard *shard_of(const struct cache_mem *m, uint64_t id)
{
    return &m->shard[(sg_mix64(id) >> 48) & (m->nshards - 1)];
}

static size_t slot(const struct mem_shard *sh, uint64_t id)
{
    return (size_t)sg_mix64(id) & sh->mask;
}

static void list_unlink(struct mem_shard *sh, struct cache_blob *b)
{
    if (b->prev)
        b->prev->next = b->next;
    else
        sh->head = b->next;
    if (b->next)
        b->next->prev = b->prev;
    else
        sh->tail = b->prev;
    b->prev = b->next = NULL;
}

static void list_push(struct mem_shard *sh, struct cache_blob *b)
{
    b->prev = NULL;
    b->next = sh->head;
    if (sh->head)
        sh->head->prev = b;
    sh->head = b;
    if (!sh->tail)
        sh->tail = b;
}

/* What a buffer counts against the tier's capacity: its bytes and its
 * bookkeeping (which is a fifth of a header block's charge). */
static uint64_t charge(const struct cache_blob *b)
{
    return sizeof *b + b->len;
}

/* Takes b out of the tier (under sh->mu); the tier's reference is the
 * caller's to drop, after the lock. */
static void tier_remove(struct mem_shard *sh, struct cache_blob *b)
{
    struct cache_blob **pp = &sh->table[slot(sh, b->id)];
    while (*pp != b)
        pp = &(*pp)->hnext;
    *pp = b->hnext;
    b->hnext = NULL;
    list_unlink(sh, b);
    sh->bytes -= charge(b);
    sh->objects--;
}

struct cache_blob *cache_mem_get(struct cache_mem *m, uint64_t id)
{
    if (!m)
        return NULL;
    struct mem_shard *sh = shard_of(m, id);
    pthread_mutex_lock(&sh->mu);
    struct cache_blob *b = sh->table[slot(sh, id)];
    while (b && b->id != id)
        b = b->hnext;
    if (b) {
        atomic_fetch_add(&b->refs, 1);
        if (sh->head != b) {
            list_unlink(sh, b);
            list_push(sh, b);
        }
    }
    pthread_mutex_unlock(&sh->mu);
    if (b)
        atomic_fetch_add(&m->hits, 1);
    return b;
}

void cache_mem_put(struct cache_mem *m, uint64_t id, struct cache_blob *b)
{
    if (!m)
        return;
    struct mem_shard *sh = shard_of(m, id);
    if (charge(b) > sh->capacity)
        return;
    struct cache_blob *gone = NULL;   /* chained through hnext once out of the tier */
    pthread_mutex_lock(&sh->mu);
    struct cache_blob *had = sh->table[slot(sh, id)];
    while (had && had->id != id)
        had = had->hnext;
    if (!had) {   /* another hit of the same object may have put its copy first */
        while (sh->bytes + charge(b) > sh->capacity && sh->tail) {
            struct cache_blob *old = sh->tail;
            tier_remove(sh, old);
            old->hnext = gone;
            gone = old;
        }
        b->id = id;
        atomic_fetch_add(&b->refs, 1);
        size_t s = slot(sh, id);
        b->hnext = sh->table[s];
        sh->table[s] = b;
        list_push(sh, b);
        sh->bytes += charge(b);
        sh->objects++;
    }
    pthread_mutex_unlock(&sh->mu);
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
    for (unsigned i = 0; i < m->nshards; i++) {
        struct mem_shard *sh = &m->shard[i];
        pthread_mutex_lock(&sh->mu);
        *bytes += sh->bytes;
        *objects += sh->objects;
        pthread_mutex_unlock(&sh->mu);
    }
}

void cache_mem_free(struct cache_mem *m)
{
    if (!m)
        return;
    for (unsigned i = 0; i < m->nshards; i++) {
        struct mem_shard *sh = &m->shard[i];
        while (sh->tail) {
            struct cache_blob *b = sh->tail;
            tier_remove(sh, b);
            cache_blob_unref(b);
        }
        free(sh->table);
        pthread_mutex_destroy(&sh->mu);
    }
    free(m->shard);
    free(m);
}
