/* cache/index.c - the in-memory cache index: 64 shards, each with a key table and
 * an id table (chained, power of two) of entries, and the verbs of an entry's
 * life: lookup, fill, publish, invalidate, pins; the names of data files.
 *
 * The index's other files, sharing struct cidx and its entries (cidx_int.h):
 *   index_order.c  the order evictable entries are kept in (per shard, two LRU
 *                  lists and a max-heap on next use)
 *   index_evict.c  the eviction policy that picks victims from it
 *   index_open.c   open and close, and the maintenance thread in between (group
 *                  fsync, compaction, the sweep of stray data files)
 *   index_apply.c  the memory side of persistence: replayed records applied,
 *                  shards serialized into a snapshot, shards emptied at a reset
 *   journal.c      the snapshot and journals on disk (their CRC: sg_crc32c of common/)
 *   index_dir.c    the index's directory: created, opened, recreated (cidx_reset) */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cidx_int.h"
#include "hash.h"
#include "log.h"

uint64_t cidx_key_hash(const char *b, size_t bl, const char *k, size_t kl)
{
    return sg_mix64(sg_fnv1a_pair(b, bl, k, kl));
}

/* The shard is the hash's top bits, the table slot its low bits. */
unsigned cidx_hash_shard(uint64_t h)
{
    return (unsigned)(h >> (64 - CIDX_SHARD_BITS));
}

unsigned cidx_id_shard(uint64_t id)
{
    return (unsigned)(id & (CIDX_NSHARD - 1));
}

static uint64_t id_hash(uint64_t id)
{
    return sg_mix64(id >> CIDX_SHARD_BITS);
}

void cidx_data_name(uint64_t id, char out[CIDX_NAME_MAX])
{
    /* 256 directories, spread by the sequence bits. */
    snprintf(out, CIDX_NAME_MAX, "objects/%02x/%016" PRIx64,
             (unsigned)((id >> CIDX_SHARD_BITS) & 0xff), id);
}

int cidx_data_path(const struct cidx *x, uint64_t id, char *buf, size_t len)
{
    char name[CIDX_NAME_MAX];
    cidx_data_name(id, name);
    int n = snprintf(buf, len, "%s/%s", x->dir, name);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

int cidx_data_open(const struct cidx *x, uint64_t id, int flags, mode_t mode)
{
    /* the 16 hex digits of cidx_data_name's last component, without
     * snprintf, opened in its directory: no path walk (hits do this) */
    static const char hex[] = "0123456789abcdef";
    char name[17];
    for (int i = 15; i >= 0; i--)
        name[15 - i] = hex[(id >> (4 * i)) & 0xf];
    name[16] = '\0';
    return openat(x->subfd[(id >> CIDX_SHARD_BITS) & 0xff], name, flags | O_CLOEXEC, mode);
}

void cidx_unlink_data(struct cidx *x, uint64_t id)
{
    char name[CIDX_NAME_MAX];
    cidx_data_name(id, name);
    if (unlinkat(x->dirfd, name, 0) != 0 && errno != ENOENT)
        log_msg(LOG_LVL_WARN, "cache", "unlink %s/%s: %s", x->dir, name, strerror(errno));
}

/* ---- etag: 32 lowercase hex (+ "-N") is stored as 16 bytes (+ N) ---- */

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static bool etag_pack(const char *etag, size_t len, unsigned char bin[16], uint16_t *parts)
{
    if (len < 32)
        return false;
    for (int i = 0; i < 16; i++) {
        int hi = hexval(etag[2 * i]), lo = hexval(etag[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        bin[i] = (unsigned char)(hi << 4 | lo);
    }
    *parts = 0;
    if (len == 32)
        return true;
    if (etag[32] != '-' || len > 38 || len == 33 || etag[33] == '0')
        return false;
    unsigned v = 0;
    for (size_t i = 33; i < len; i++) {
        if (etag[i] < '0' || etag[i] > '9')
            return false;
        v = v * 10 + (unsigned)(etag[i] - '0');
    }
    if (v == 0 || v > UINT16_MAX)
        return false;
    *parts = (uint16_t)v;
    return true;
}

size_t cidx_ent_etag(const struct cidx_ent *e, char out[CIDX_ETAG_MAX])
{
    if (e->flags & ENT_ETAG_BIN) {
        static const char hx[] = "0123456789abcdef";
        for (int i = 0; i < 16; i++) {
            out[2 * i] = hx[e->etag_bin[i] >> 4];
            out[2 * i + 1] = hx[e->etag_bin[i] & 15];
        }
        out[32] = '\0';
        if (e->etag_parts == 0)
            return 32;
        int n = snprintf(out + 32, CIDX_ETAG_MAX - 32, "-%u", (unsigned)e->etag_parts);
        return 32 + (size_t)n;
    }
    memcpy(out, e->kb + e->blen + e->klen, e->etag_len);
    out[e->etag_len] = '\0';
    return e->etag_len;
}

/* ---- entries and tables ---- */

struct cidx_ent *cidx_ent_new(struct cidx *x, const char *b, size_t bl, const char *k,
                              size_t kl, const char *etag, size_t el)
{
    unsigned char bin[16];
    uint16_t parts = 0;
    bool packed = etag != NULL && etag_pack(etag, el, bin, &parts);
    size_t raw = (etag != NULL && !packed) ? el : 0;
    struct cidx_ent *e = malloc(sizeof *e + bl + kl + raw);
    if (e == NULL)
        return NULL;
    memset(e, 0, sizeof *e);
    e->blen = (uint8_t)bl;
    e->klen = (uint16_t)kl;
    memcpy(e->kb, b, bl);
    memcpy(e->kb + bl, k, kl);
    if (packed) {
        e->flags |= ENT_ETAG_BIN;
        memcpy(e->etag_bin, bin, 16);
        e->etag_parts = parts;
    } else if (raw > 0) {
        memcpy(e->kb + bl + kl, etag, raw);
        e->etag_len = (uint8_t)raw;
    }
    e->heap_idx = CIDX_HEAP_NONE;
    e->next_use = CIDX_NEXT_USE_NONE;
    atomic_fetch_add_explicit(&x->mem_entries, malloc_usable_size(e), memory_order_relaxed);
    atomic_fetch_add_explicit(&x->mem_keys, bl + kl, memory_order_relaxed);
    atomic_fetch_add_explicit(&x->n_entries, 1, memory_order_relaxed);
    return e;
}

void cidx_ent_free(struct cidx *x, struct cidx_ent *e)
{
    atomic_fetch_sub_explicit(&x->mem_entries, malloc_usable_size(e), memory_order_relaxed);
    atomic_fetch_sub_explicit(&x->mem_keys, (uint64_t)e->blen + e->klen, memory_order_relaxed);
    atomic_fetch_sub_explicit(&x->n_entries, 1, memory_order_relaxed);
    free(e);
}

static bool ent_is(const struct cidx_ent *e, const char *b, size_t bl, const char *k, size_t kl)
{
    return e->blen == bl && e->klen == kl && memcmp(e->kb, b, bl) == 0 &&
           memcmp(e->kb + bl, k, kl) == 0;
}

static uint64_t ent_hash(const struct cidx_ent *e)
{
    return cidx_key_hash(e->kb, e->blen, e->kb + e->blen, e->klen);
}

/* The chain link of e in the id table (by_id) or the key table, and the
 * hash that places it there. */
static struct cidx_ent **ent_link(struct cidx_ent *e, bool by_id)
{
    return by_id ? &e->inext : &e->knext;
}

static uint32_t ent_slot_hash(const struct cidx_ent *e, bool by_id)
{
    return (uint32_t)(by_id ? id_hash(e->id) : ent_hash(e));
}

/* Grows a chained table (the key table or the id table) to twice its size
 * when it averages 2 per slot: 4-8 bytes per entry per table, chains of 1-2.
 * Rehash on failure is skipped (chains just get longer), never fatal. */
static void table_grow(struct cidx_ent ***tab, uint32_t *mask, bool by_id)
{
    uint32_t nsz = (*mask + 1) * 2;
    struct cidx_ent **nt = calloc(nsz, sizeof *nt);
    if (nt == NULL)
        return;
    for (uint32_t i = 0; i <= *mask; i++) {
        struct cidx_ent *e = (*tab)[i], *nx;
        for (; e != NULL; e = nx) {
            nx = *ent_link(e, by_id);
            uint32_t slot = ent_slot_hash(e, by_id) & (nsz - 1);
            *ent_link(e, by_id) = nt[slot];
            nt[slot] = e;
        }
    }
    free(*tab);
    *tab = nt;
    *mask = nsz - 1;
}

struct cidx_ent *cidx_kt_find(struct cidx_shard *s, uint64_t h, const char *b, size_t bl,
                              const char *k, size_t kl)
{
    for (struct cidx_ent *e = s->kt[h & s->kt_mask]; e != NULL; e = e->knext)
        if (ent_is(e, b, bl, k, kl))
            return e;
    return NULL;
}

void cidx_kt_add(struct cidx_shard *s, struct cidx_ent *e, uint64_t h)
{
    if (s->n_key >= 2 * (s->kt_mask + 1))
        table_grow(&s->kt, &s->kt_mask, false);
    struct cidx_ent **slot = &s->kt[h & s->kt_mask];
    e->knext = *slot;
    *slot = e;
    e->flags |= ENT_IN_KT;
    s->n_key++;
}

static void kt_del(struct cidx_shard *s, struct cidx_ent *e)
{
    if (!(e->flags & ENT_IN_KT))
        return;
    struct cidx_ent **pp = &s->kt[ent_hash(e) & s->kt_mask];
    while (*pp != e)
        pp = &(*pp)->knext;
    *pp = e->knext;
    e->flags &= (uint8_t)~ENT_IN_KT;
    s->n_key--;
}

struct cidx_ent *cidx_it_find(struct cidx_shard *s, uint64_t id)
{
    for (struct cidx_ent *e = s->it[id_hash(id) & s->it_mask]; e != NULL; e = e->inext)
        if (e->id == id)
            return e;
    return NULL;
}

void cidx_it_add(struct cidx_shard *s, struct cidx_ent *e)
{
    if (s->n_id >= 2 * (s->it_mask + 1))
        table_grow(&s->it, &s->it_mask, true);
    struct cidx_ent **slot = &s->it[id_hash(e->id) & s->it_mask];
    e->inext = *slot;
    *slot = e;
    s->n_id++;
}

static void it_del(struct cidx_shard *s, struct cidx_ent *e)
{
    struct cidx_ent **pp = &s->it[id_hash(e->id) & s->it_mask];
    while (*pp != e)
        pp = &(*pp)->inext;
    *pp = e->inext;
    s->n_id--;
}

/* Takes e out of every structure of s and the counters; the caller frees it and
 * unlinks its file after dropping the lock. */
void cidx_ent_unlink_locked(struct cidx *x, struct cidx_shard *s, struct cidx_ent *e)
{
    cidx_ev_remove(s, e);
    kt_del(s, e);
    it_del(s, e);
    if (e->state == CIDX_STATE_READY) {
        atomic_fetch_sub_explicit(&x->used, e->size, memory_order_relaxed);
        atomic_fetch_sub_explicit(&x->objects, 1, memory_order_relaxed);
    } else {
        atomic_fetch_sub_explicit(&x->reserved, e->size, memory_order_relaxed);
    }
}

/* Journals the removal of a READY entry and unlinks it from memory. The REMOVE
 * record is written before the file is unlinked (by the caller): a crash between
 * leaves a stray file, which the sweep removes, never an entry without its file. */
enum cidx_status cidx_ent_remove_ready_locked(struct cidx *x, struct cidx_shard *s,
                                              struct cidx_ent *e)
{
    unsigned char rec[32];
    enum cidx_status st = cidx_jnl_append(x, rec, cidx_rec_remove(rec, e->id));
    cidx_ent_unlink_locked(x, s, e);
    return st;
}

/* ---- verbs ---- */

static enum cidx_status key_check(const char *bucket, const char *key, size_t *bl, size_t *kl)
{
    if (bucket == NULL || key == NULL)
        return CIDX_INVAL;
    *bl = strlen(bucket);
    *kl = strlen(key);
    if (*bl == 0 || *bl > CIDX_BUCKET_MAX || *kl == 0 || *kl > CIDX_KEY_MAX)
        return CIDX_INVAL;
    return CIDX_OK;
}

static void info_fill(const struct cidx_ent *e, struct cidx_info *out)
{
    out->id = e->id;
    out->size = e->size;
    out->state = (enum cidx_state)e->state;
    out->next_use = e->next_use;
    if (e->state == CIDX_STATE_READY) {
        cidx_ent_etag(e, out->etag);
        out->mtime.tv_sec = (time_t)e->mtime_sec;
        out->mtime.tv_nsec = (long)e->mtime_nsec;
        out->validated_at = e->validated_at;
    } else {
        out->etag[0] = '\0';
        out->mtime.tv_sec = 0;
        out->mtime.tv_nsec = 0;
        out->validated_at = 0;
    }
}

static enum cidx_status lookup(struct cidx *x, const char *bucket, const char *key,
                               struct cidx_info *out, bool pin)
{
    size_t bl, kl;
    if (key_check(bucket, key, &bl, &kl) != CIDX_OK)
        return CIDX_MISS;
    uint64_t h = cidx_key_hash(bucket, bl, key, kl);
    struct cidx_shard *s = &x->shards[cidx_hash_shard(h)];
    enum cidx_status st = CIDX_MISS;
    pthread_mutex_lock(&s->mu);
    struct cidx_ent *e = cidx_kt_find(s, h, bucket, bl, key, kl);
    if (e != NULL) {
        if (e->state == CIDX_STATE_READY) {
            cidx_ent_touch(x, s, e);
            if (pin) {
                cidx_ev_remove(s, e);
                e->pins++;
            }
            st = CIDX_OK;
        } else {
            st = CIDX_FILLING;
        }
        if (out != NULL)
            info_fill(e, out);
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

enum cidx_status cidx_lookup(struct cidx *x, const char *bucket, const char *key,
                             struct cidx_info *out)
{
    return lookup(x, bucket, key, out, false);
}

enum cidx_status cidx_lookup_pin(struct cidx *x, const char *bucket, const char *key,
                                 struct cidx_info *out)
{
    return lookup(x, bucket, key, out, true);
}

enum cidx_status cidx_begin_fill(struct cidx *x, const char *bucket, const char *key,
                                 uint64_t *id, enum cidx_state *state)
{
    size_t bl, kl;
    if (key_check(bucket, key, &bl, &kl) != CIDX_OK)
        return CIDX_INVAL;
    uint64_t h = cidx_key_hash(bucket, bl, key, kl);
    unsigned si = cidx_hash_shard(h);
    struct cidx_shard *s = &x->shards[si];
    pthread_mutex_lock(&s->mu);
    struct cidx_ent *e = cidx_kt_find(s, h, bucket, bl, key, kl);
    if (e != NULL) {
        *id = e->id;
        if (state != NULL)
            *state = (enum cidx_state)e->state;
        pthread_mutex_unlock(&s->mu);
        return CIDX_EXISTS;
    }
    uint64_t seq = atomic_fetch_add_explicit(&x->seq, 1, memory_order_relaxed);
    if (seq >= (UINT64_C(1) << CIDX_SEQ_BITS)) {
        pthread_mutex_unlock(&s->mu);
        log_msg(LOG_LVL_ERROR, "cache", "%s: id space of this run exhausted", x->dir);
        return CIDX_NOMEM;
    }
    e = cidx_ent_new(x, bucket, bl, key, kl, NULL, 0);
    if (e == NULL) {
        pthread_mutex_unlock(&s->mu);
        return CIDX_NOMEM;
    }
    e->id = (uint64_t)x->epoch << CIDX_EPOCH_SHIFT | seq << CIDX_SHARD_BITS | si;
    e->state = CIDX_STATE_FILLING;
    cidx_kt_add(s, e, h);
    cidx_it_add(s, e);
    *id = e->id;
    if (state != NULL)
        *state = CIDX_STATE_FILLING;
    pthread_mutex_unlock(&s->mu);
    return CIDX_OK;
}

/* Locks the shard of fill `id` and finds its entry. CIDX_OK leaves the shard
 * locked with *sp and *ep set; CIDX_NOT_FOUND (no entry) and CIDX_INVAL (the
 * entry is not filling) leave it unlocked. */
static enum cidx_status fill_lock(struct cidx *x, uint64_t id, struct cidx_shard **sp,
                                  struct cidx_ent **ep)
{
    struct cidx_shard *s = &x->shards[cidx_id_shard(id)];
    pthread_mutex_lock(&s->mu);
    struct cidx_ent *e = cidx_it_find(s, id);
    if (e == NULL || e->state != CIDX_STATE_FILLING) {
        pthread_mutex_unlock(&s->mu);
        return e == NULL ? CIDX_NOT_FOUND : CIDX_INVAL;
    }
    *sp = s;
    *ep = e;
    return CIDX_OK;
}

enum cidx_status cidx_fill_size(struct cidx *x, uint64_t id, uint64_t size)
{
    struct cidx_shard *s;
    struct cidx_ent *e;
    enum cidx_status st = fill_lock(x, id, &s, &e);
    if (st != CIDX_OK)
        return st;
    if (size > x->capacity) {
        st = CIDX_TOOBIG;
    } else {
        atomic_fetch_sub_explicit(&x->reserved, e->size, memory_order_relaxed);
        atomic_fetch_add_explicit(&x->reserved, size, memory_order_relaxed);
        e->size = size;
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

enum cidx_status cidx_publish(struct cidx *x, uint64_t id, uint64_t size, const char *etag,
                              struct timespec mtime)
{
    size_t el = etag != NULL ? strlen(etag) : 0;
    if (etag == NULL || el >= CIDX_ETAG_MAX)
        return CIDX_INVAL;
    struct cidx_shard *s;
    struct cidx_ent *e;
    enum cidx_status fst = fill_lock(x, id, &s, &e);
    if (fst != CIDX_OK)
        return fst;
    if (e->flags & ENT_DOOMED) {
        cidx_ent_unlink_locked(x, s, e);
        pthread_mutex_unlock(&s->mu);
        cidx_unlink_data(x, id);
        cidx_ent_free(x, e);
        return CIDX_STALE;
    }
    /* The etag goes inline: a new allocation when it is not an MD5 form (rare:
     * SSE-KMS and some non-AWS servers). */
    struct cidx_ent *ne = e;
    unsigned char bin[16];
    uint16_t parts;
    bool packed = etag_pack(etag, el, bin, &parts);
    if (!packed) {
        ne = cidx_ent_new(x, e->kb, e->blen, e->kb + e->blen, e->klen, etag, el);
        if (ne == NULL) {
            pthread_mutex_unlock(&s->mu);
            return CIDX_NOMEM;
        }
    } else {
        e->flags |= ENT_ETAG_BIN;
        memcpy(e->etag_bin, bin, 16);
        e->etag_parts = parts;
    }
    uint64_t reserved = e->size;
    ne->id = e->id;
    ne->size = size;
    ne->mtime_sec = (int64_t)mtime.tv_sec;
    ne->mtime_nsec = (uint32_t)mtime.tv_nsec;
    ne->validated_at = cidx_wall_ms();
    ne->stamp = atomic_fetch_add_explicit(&x->clock, 1, memory_order_relaxed) + 1;
    ne->state = CIDX_STATE_READY;
    ne->pins = e->pins;
    ne->next_use = e->next_use;
    unsigned char rec[CIDX_REC_MAX + 8];
    enum cidx_status st = cidx_jnl_append(x, rec, cidx_rec_publish(rec, ne));
    if (st != CIDX_OK) {
        if (ne != e)
            cidx_ent_free(x, ne);
        else
            e->state = CIDX_STATE_FILLING;
        pthread_mutex_unlock(&s->mu);
        return st;
    }
    if (ne != e) {
        uint64_t h = ent_hash(e);
        kt_del(s, e);
        it_del(s, e);
        cidx_kt_add(s, ne, h);
        cidx_it_add(s, ne);
        cidx_ent_free(x, e);
    }
    atomic_fetch_sub_explicit(&x->reserved, reserved, memory_order_relaxed);
    atomic_fetch_add_explicit(&x->used, size, memory_order_relaxed);
    atomic_fetch_add_explicit(&x->objects, 1, memory_order_relaxed);
    if (cidx_ent_evictable(ne))
        cidx_ev_insert(s, ne);
    pthread_mutex_unlock(&s->mu);
    return CIDX_OK;
}

enum cidx_status cidx_fill_abort(struct cidx *x, uint64_t id)
{
    struct cidx_shard *s;
    struct cidx_ent *e;
    enum cidx_status st = fill_lock(x, id, &s, &e);
    if (st != CIDX_OK)
        return st;
    cidx_ent_unlink_locked(x, s, e);
    pthread_mutex_unlock(&s->mu);
    cidx_unlink_data(x, id);
    cidx_ent_free(x, e);
    return CIDX_OK;
}

enum cidx_status cidx_invalidate(struct cidx *x, const char *bucket, const char *key)
{
    size_t bl, kl;
    if (key_check(bucket, key, &bl, &kl) != CIDX_OK)
        return CIDX_MISS;
    uint64_t h = cidx_key_hash(bucket, bl, key, kl);
    struct cidx_shard *s = &x->shards[cidx_hash_shard(h)];
    pthread_mutex_lock(&s->mu);
    struct cidx_ent *e = cidx_kt_find(s, h, bucket, bl, key, kl);
    if (e == NULL) {
        pthread_mutex_unlock(&s->mu);
        return CIDX_MISS;
    }
    uint64_t id = e->id;
    enum cidx_status st = CIDX_OK;
    if (e->state == CIDX_STATE_FILLING) {
        /* Stays in the id table so publish/abort find it; leaves the key table so
         * a new fill of the fresh object can start at once. */
        e->flags |= ENT_DOOMED;
        kt_del(s, e);
        pthread_mutex_unlock(&s->mu);
    } else {
        /* Removed from memory even if the journal write fails: serving a stale
         * object is worse than finding the entry again after a restart (the sweep
         * then drops it: its file is gone). */
        st = cidx_ent_remove_ready_locked(x, s, e);
        pthread_mutex_unlock(&s->mu);
        cidx_ent_free(x, e);
    }
    cidx_unlink_data(x, id);
    return st;
}

/* Locks the shard of id and returns its entry (NULL if none); the caller
 * unlocks *sp. */
struct cidx_ent *cidx_id_lock(struct cidx *x, uint64_t id, struct cidx_shard **sp)
{
    struct cidx_shard *s = &x->shards[cidx_id_shard(id)];
    pthread_mutex_lock(&s->mu);
    *sp = s;
    return cidx_it_find(s, id);
}

int64_t cidx_wall_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

enum cidx_status cidx_touch_validated(struct cidx *x, uint64_t id, int64_t when)
{
    struct cidx_shard *s;
    struct cidx_ent *e = cidx_id_lock(x, id, &s);
    if (e != NULL)
        e->validated_at = when;
    pthread_mutex_unlock(&s->mu);
    return e != NULL ? CIDX_OK : CIDX_NOT_FOUND;
}

enum cidx_status cidx_pin(struct cidx *x, uint64_t id)
{
    struct cidx_shard *s;
    struct cidx_ent *e = cidx_id_lock(x, id, &s);
    if (e != NULL) {
        cidx_ev_remove(s, e);
        e->pins++;
    }
    pthread_mutex_unlock(&s->mu);
    return e != NULL ? CIDX_OK : CIDX_NOT_FOUND;
}

enum cidx_status cidx_unpin(struct cidx *x, uint64_t id)
{
    enum cidx_status st = CIDX_OK;
    struct cidx_shard *s;
    struct cidx_ent *e = cidx_id_lock(x, id, &s);
    if (e == NULL || e->pins == 0) {
        st = e == NULL ? CIDX_NOT_FOUND : CIDX_INVAL;
    } else if (--e->pins == 0 && cidx_ent_evictable(e)) {
        /* Back in the lists as just used: the reader or prefetch just had it. */
        e->stamp = atomic_fetch_add_explicit(&x->clock, 1, memory_order_relaxed) + 1;
        cidx_ev_insert(s, e);
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

void cidx_usage(struct cidx *x, uint64_t *used, uint64_t *reserved, uint64_t *objects)
{
    if (used != NULL)
        *used = atomic_load(&x->used);
    if (reserved != NULL)
        *reserved = atomic_load(&x->reserved);
    if (objects != NULL)
        *objects = atomic_load(&x->objects);
}

uint64_t cidx_capacity(const struct cidx *x)
{
    return x->capacity;
}

void cidx_mem(struct cidx *x, struct cidx_mem_stats *out)
{
    uint64_t tb = sizeof *x;
    for (unsigned si = 0; si < CIDX_NSHARD; si++) {
        struct cidx_shard *s = &x->shards[si];
        pthread_mutex_lock(&s->mu);
        tb += ((uint64_t)s->kt_mask + 1 + s->it_mask + 1) * sizeof(void *) +
              (uint64_t)s->heap_cap * sizeof(void *);
        pthread_mutex_unlock(&s->mu);
    }
    out->table_bytes = tb;
    out->entry_bytes = atomic_load(&x->mem_entries);
    out->key_bytes = atomic_load(&x->mem_keys);
    out->entries = atomic_load(&x->n_entries);
}
