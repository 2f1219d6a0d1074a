/* cache/index.c - the in-memory cache index: 64 shards, each with a key table and
 * an id table (chained, power of two), two LRU lists of evictable entries and a
 * max-heap on next use; fills, pins, eviction, the maintenance thread (group
 * fsync, compaction) and the sweep of stray data files.
 *
 * Recency: every use stamps the entry from an index-wide atomic clock and moves it
 * to the head of its shard's list, under that shard's lock only. Eviction merges
 * the shards' list tails by stamp, which gives global LRU order up to the moment
 * each shard was looked at (approximate under concurrent use, exact when quiet).
 * Only evictable entries (READY, unpinned) are in the lists/heap, so a victim is
 * always the head of a structure: no walk past pinned or filling entries.
 *
 * Data files are not stat'ed at open: fstatat of every file costs a random inode
 * read each on a cold disk (see bench/README.md, "Index restart"), seconds for a
 * million entries. The sweep does it in the background instead, and a reader that
 * finds a file missing invalidates the entry. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cidx_int.h"
#include "log.h"

#define HEAP_NONE UINT32_MAX
#define KT_MIN 16

static uint64_t mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static uint64_t key_hash(const char *b, size_t bl, const char *k, size_t kl)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < bl; i++)
        h = (h ^ (unsigned char)b[i]) * 0x100000001b3ULL;
    h = (h ^ 0xffu) * 0x100000001b3ULL; /* separator: ("ab","c") != ("a","bc") */
    for (size_t i = 0; i < kl; i++)
        h = (h ^ (unsigned char)k[i]) * 0x100000001b3ULL;
    return mix64(h);
}

/* The shard is the hash's top bits, the table slot its low bits. */
static unsigned hash_shard(uint64_t h)
{
    return (unsigned)(h >> (64 - CIDX_SHARD_BITS));
}

static unsigned id_shard(uint64_t id)
{
    return (unsigned)(id & (CIDX_NSHARD - 1));
}

static uint64_t id_hash(uint64_t id)
{
    return mix64(id >> CIDX_SHARD_BITS);
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

static void unlink_data(struct cidx *x, uint64_t id)
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

static struct cidx_ent *ent_new(struct cidx *x, const char *b, size_t bl, const char *k,
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
    e->heap_idx = HEAP_NONE;
    e->next_use = CIDX_NEXT_USE_NONE;
    atomic_fetch_add_explicit(&x->mem_entries, malloc_usable_size(e), memory_order_relaxed);
    atomic_fetch_add_explicit(&x->mem_keys, bl + kl, memory_order_relaxed);
    atomic_fetch_add_explicit(&x->n_entries, 1, memory_order_relaxed);
    return e;
}

static void ent_free(struct cidx *x, struct cidx_ent *e)
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
    return key_hash(e->kb, e->blen, e->kb + e->blen, e->klen);
}

/* Grows a chained table to twice its size when it averages 2 per slot: 4-8 bytes
 * per entry per table, chains of 1-2. Rehash on failure is skipped (chains just
 * get longer), never fatal. */
static void kt_grow(struct cidx_shard *s)
{
    uint32_t nsz = (s->kt_mask + 1) * 2;
    struct cidx_ent **nt = calloc(nsz, sizeof *nt);
    if (nt == NULL)
        return;
    for (uint32_t i = 0; i <= s->kt_mask; i++) {
        struct cidx_ent *e = s->kt[i], *nx;
        for (; e != NULL; e = nx) {
            nx = e->knext;
            uint32_t slot = (uint32_t)ent_hash(e) & (nsz - 1);
            e->knext = nt[slot];
            nt[slot] = e;
        }
    }
    free(s->kt);
    s->kt = nt;
    s->kt_mask = nsz - 1;
}

static void it_grow(struct cidx_shard *s)
{
    uint32_t nsz = (s->it_mask + 1) * 2;
    struct cidx_ent **nt = calloc(nsz, sizeof *nt);
    if (nt == NULL)
        return;
    for (uint32_t i = 0; i <= s->it_mask; i++) {
        struct cidx_ent *e = s->it[i], *nx;
        for (; e != NULL; e = nx) {
            nx = e->inext;
            uint32_t slot = (uint32_t)id_hash(e->id) & (nsz - 1);
            e->inext = nt[slot];
            nt[slot] = e;
        }
    }
    free(s->it);
    s->it = nt;
    s->it_mask = nsz - 1;
}

static struct cidx_ent *kt_find(struct cidx_shard *s, uint64_t h, const char *b, size_t bl,
                                const char *k, size_t kl)
{
    for (struct cidx_ent *e = s->kt[h & s->kt_mask]; e != NULL; e = e->knext)
        if (ent_is(e, b, bl, k, kl))
            return e;
    return NULL;
}

static void kt_add(struct cidx_shard *s, struct cidx_ent *e, uint64_t h)
{
    if (s->n_key >= 2 * (s->kt_mask + 1))
        kt_grow(s);
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

static struct cidx_ent *it_find(struct cidx_shard *s, uint64_t id)
{
    for (struct cidx_ent *e = s->it[id_hash(id) & s->it_mask]; e != NULL; e = e->inext)
        if (e->id == id)
            return e;
    return NULL;
}

static void it_add(struct cidx_shard *s, struct cidx_ent *e)
{
    if (s->n_id >= 2 * (s->it_mask + 1))
        it_grow(s);
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
    e->heap_idx = HEAP_NONE;
    s->heap_n--;
    if (i == s->heap_n)
        return;
    heap_set(s, i, s->heap[s->heap_n]);
    heap_up(s, i);
    heap_down(s, s->heap[i]->heap_idx);
}

static bool ent_evictable(const struct cidx_ent *e)
{
    return e->state == CIDX_STATE_READY && e->pins == 0 && !(e->flags & ENT_DOOMED);
}

/* Puts an evictable entry at the head (most recent) of its list. */
static void ev_insert(struct cidx_shard *s, struct cidx_ent *e)
{
    if (e->next_use != CIDX_NEXT_USE_NONE && heap_push(s, e)) {
        list_push_head(&s->hinted, e);
    } else {
        /* No memory for the heap: treat it as without next use (evicted sooner). */
        list_push_head(&s->plain, e);
    }
    e->flags |= ENT_IN_LIST;
}

static void ev_remove(struct cidx_shard *s, struct cidx_ent *e)
{
    if (!(e->flags & ENT_IN_LIST))
        return;
    if (e->heap_idx != HEAP_NONE) {
        heap_del(s, e);
        list_del(&s->hinted, e);
    } else {
        list_del(&s->plain, e);
    }
    e->flags &= (uint8_t)~ENT_IN_LIST;
}

static void ent_touch(struct cidx *x, struct cidx_shard *s, struct cidx_ent *e)
{
    e->stamp = atomic_fetch_add_explicit(&x->clock, 1, memory_order_relaxed) + 1;
    if (e->flags & ENT_IN_LIST) {
        struct cidx_list *l = e->heap_idx != HEAP_NONE ? &s->hinted : &s->plain;
        if (l->head != e) {
            list_del(l, e);
            list_push_head(l, e);
        }
    }
}

/* Takes e out of every structure of s and the counters; the caller frees it and
 * unlinks its file after dropping the lock. */
static void ent_unlink_locked(struct cidx *x, struct cidx_shard *s, struct cidx_ent *e)
{
    ev_remove(s, e);
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
static enum cidx_status ent_remove_ready_locked(struct cidx *x, struct cidx_shard *s,
                                                struct cidx_ent *e)
{
    unsigned char rec[32];
    enum cidx_status st = cidx_jnl_append(x, rec, cidx_rec_remove(rec, e->id));
    ent_unlink_locked(x, s, e);
    return st;
}

/* ---- apply (replay at open; single-threaded) ---- */

void cidx_apply_publish(struct cidx *x, const struct cidx_rec *r)
{
    uint64_t h = key_hash(r->bucket, r->blen, r->key, r->klen);
    unsigned si = hash_shard(h);
    if (id_shard(r->id) != si) {
        log_msg(LOG_LVL_WARN, "cache", "%s: entry %016" PRIx64 " in the wrong shard, dropped",
                x->dir, r->id);
        return;
    }
    struct cidx_shard *s = &x->shards[si];
    struct cidx_ent *old = kt_find(s, h, r->bucket, r->blen, r->key, r->klen);
    if (old == NULL)
        old = it_find(s, r->id);
    if (old != NULL) {
        ent_unlink_locked(x, s, old);
        ent_free(x, old);
    }
    struct cidx_ent *e = ent_new(x, r->bucket, r->blen, r->key, r->klen, r->etag, r->etag_len);
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
    kt_add(s, e, h);
    it_add(s, e);
    ev_insert(s, e);
    atomic_fetch_add_explicit(&x->used, e->size, memory_order_relaxed);
    atomic_fetch_add_explicit(&x->objects, 1, memory_order_relaxed);
}

void cidx_apply_remove(struct cidx *x, uint64_t id)
{
    struct cidx_shard *s = &x->shards[id_shard(id)];
    struct cidx_ent *e = it_find(s, id);
    if (e == NULL)
        return;
    ent_unlink_locked(x, s, e);
    ent_free(x, e);
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
        if (*cap - *len < CIDX_REC_MAX) {
            size_t nc = *cap * 2 > need ? *cap * 2 : need;
            unsigned char *nb = realloc(*buf, nc);
            if (nb == NULL) {
                pthread_mutex_unlock(&s->mu);
                return -1;
            }
            *buf = nb;
            *cap = nc;
        }
        *len += cidx_rec_publish(*buf + *len, e);
        n++;
    }
    for (uint32_t i = 0; i <= s->kt_mask; i++) {
        for (struct cidx_ent *e = s->kt[i]; e != NULL; e = e->knext) {
            if (e->state != CIDX_STATE_READY || (e->flags & ENT_IN_LIST))
                continue;
            if (*cap - *len < CIDX_REC_MAX) {
                size_t nc = *cap * 2 > need ? *cap * 2 : need;
                unsigned char *nb = realloc(*buf, nc);
                if (nb == NULL) {
                    pthread_mutex_unlock(&s->mu);
                    return -1;
                }
                *buf = nb;
                *cap = nc;
            }
            *len += cidx_rec_publish(*buf + *len, e);
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
            ent_unlink_locked(x, s, e);   /* takes it out of it[i] and the counters */
            e->inext = gone;
            gone = e;
            n++;
        }
    }
    pthread_mutex_unlock(&s->mu);
    while (gone != NULL) {
        struct cidx_ent *nx = gone->inext;
        ent_free(x, gone);
        gone = nx;
    }
    return n;
}

/* ---- the maintenance thread and the sweep ---- */

static bool file_size_ok(const struct cidx *x, uint64_t fsize, uint64_t size)
{
    if (fsize < size)
        return false;
    uint64_t h = fsize - size;
    return h <= x->opts.file_hdr_max && h % x->opts.file_hdr_align == 0;
}

static void sweep_run(struct cidx *x)
{
    struct cidx_sweep_stats st = {0};
    uint64_t t0 = cidx_now_ms();
    for (unsigned d = 0; d < 256; d++) {
        char dn[16];
        snprintf(dn, sizeof dn, "%02x", d);
        int dfd = openat(x->objfd, dn, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *dir = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (dir == NULL) {
            if (dfd >= 0)
                close(dfd);
            continue;
        }
        struct dirent *de;
        while ((de = readdir(dir)) != NULL) {
            if (de->d_name[0] == '.')
                continue;
            char *end;
            if (strlen(de->d_name) != 16)
                continue; /* not ours: leave it */
            uint64_t id = strtoull(de->d_name, &end, 16);
            if (*end != '\0')
                continue;
            st.files_seen++;
            /* Files of this run's fills are not strays: their entries are FILLING
             * or about to be published. */
            if (cidx_id_epoch(id) >= x->epoch)
                continue;
            struct stat sb;
            bool have_st = fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0;
            struct cidx_shard *s = &x->shards[id_shard(id)];
            pthread_mutex_lock(&s->mu);
            struct cidx_ent *e = it_find(s, id);
            bool drop = false, stray = e == NULL;
            if (e != NULL) {
                if (have_st && e->state == CIDX_STATE_READY &&
                    !file_size_ok(x, (uint64_t)sb.st_size, e->size)) {
                    /* Dropped even if the REMOVE cannot be journaled: the file goes
                     * too, and the next sweep drops an entry without a file. */
                    (void)ent_remove_ready_locked(x, s, e);
                    drop = true;
                    st.badsize_dropped++;
                } else {
                    e->flags |= ENT_SEEN;
                }
            }
            pthread_mutex_unlock(&s->mu);
            if (drop)
                ent_free(x, e);
            if (drop || stray) {
                if (unlinkat(dfd, de->d_name, 0) == 0 && stray)
                    st.strays_removed++;
            }
        }
        closedir(dir);
    }
    /* Entries of earlier runs whose file was not found: lost to a crash after the
     * unlink and before the REMOVE reached the disk, or removed by hand. */
    for (unsigned si = 0; si < CIDX_NSHARD; si++) {
        struct cidx_shard *s = &x->shards[si];
        pthread_mutex_lock(&s->mu);
        for (uint32_t i = 0; i <= s->kt_mask; i++) {
            struct cidx_ent *e = s->kt[i], *nx;
            for (; e != NULL; e = nx) {
                nx = e->knext;
                if (e->flags & ENT_SEEN) {
                    e->flags &= (uint8_t)~ENT_SEEN;
                    continue;
                }
                if (e->state != CIDX_STATE_READY || cidx_id_epoch(e->id) >= x->epoch)
                    continue;
                ent_remove_ready_locked(x, s, e);
                ent_free(x, e);
                st.missing_dropped++;
            }
        }
        pthread_mutex_unlock(&s->mu);
    }
    st.ms = (double)(cidx_now_ms() - t0);
    if (st.strays_removed || st.missing_dropped || st.badsize_dropped)
        log_msg(LOG_LVL_INFO, "cache",
                "%s: sweep: %" PRIu64 " files, %" PRIu64 " strays removed, %" PRIu64
                " entries without file, %" PRIu64 " with a wrong size",
                x->dir, st.files_seen, st.strays_removed, st.missing_dropped,
                st.badsize_dropped);
    pthread_mutex_lock(&x->j.mu);
    x->sweep = st;
    x->sweep_done = true;
    x->sweep_pending = false;
    pthread_cond_broadcast(&x->done_cond);
    pthread_mutex_unlock(&x->j.mu);
}

static void *maint_main(void *arg)
{
    struct cidx *x = arg;
    pthread_mutex_lock(&x->j.mu);
    while (!x->stop) {
        if (x->sweep_pending) {
            pthread_mutex_unlock(&x->j.mu);
            sweep_run(x);
            pthread_mutex_lock(&x->j.mu);
            continue;
        }
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        uint64_t ns = (uint64_t)dl.tv_nsec + (uint64_t)x->opts.fsync_interval_ms * 1000000u;
        dl.tv_sec += (time_t)(ns / 1000000000u);
        dl.tv_nsec = (long)(ns % 1000000000u);
        if (x->j.unsynced < x->opts.fsync_records)
            pthread_cond_timedwait(&x->cond, &x->j.mu, &dl);
        if (x->stop)
            break;
        bool sync = x->j.unsynced > 0 &&
                    (x->j.unsynced >= x->opts.fsync_records ||
                     cidx_now_ms() - x->j.last_sync_ms >= x->opts.fsync_interval_ms);
        bool compact = x->j.off > 2 * x->j.snap_bytes && x->j.off > x->opts.compact_min_bytes;
        pthread_mutex_unlock(&x->j.mu);
        if (sync)
            cidx_jnl_sync(x);
        if (compact)
            cidx_jnl_compact(x);
        pthread_mutex_lock(&x->j.mu);
    }
    pthread_mutex_unlock(&x->j.mu);
    return NULL;
}

/* ---- open / close ---- */

static void cidx_free(struct cidx *x)
{
    for (unsigned si = 0; si < CIDX_NSHARD; si++) {
        struct cidx_shard *s = &x->shards[si];
        if (s->it != NULL) {
            for (uint32_t i = 0; i <= s->it_mask; i++) {
                struct cidx_ent *e = s->it[i], *nx;
                for (; e != NULL; e = nx) {
                    nx = e->inext;
                    free(e);
                }
            }
        }
        free(s->kt);
        free(s->it);
        free(s->heap);
        pthread_mutex_destroy(&s->mu);
    }
    if (x->j.fd >= 0)
        close(x->j.fd);
    for (unsigned d = 0; d < 256; d++)
        if (x->subfd[d] >= 0)
            close(x->subfd[d]);
    if (x->objfd >= 0)
        close(x->objfd);
    if (x->dirfd >= 0)
        close(x->dirfd);
    pthread_mutex_destroy(&x->j.mu);
    pthread_mutex_destroy(&x->compact_mu);
    pthread_cond_destroy(&x->cond);
    pthread_cond_destroy(&x->done_cond);
    free(x->dir);
    free(x);
}

enum cidx_status cidx_open(const char *cache_dir, uint64_t capacity_bytes, struct cidx **out)
{
    return cidx_open_ex(cache_dir, capacity_bytes, NULL, out);
}

enum cidx_status cidx_open_ex(const char *cache_dir, uint64_t capacity_bytes,
                              const struct cidx_opts *opts, struct cidx **out)
{
    *out = NULL;
    struct cidx *x = aligned_alloc(64, (sizeof *x + 63) / 64 * 64);
    if (x == NULL)
        return CIDX_NOMEM;
    memset(x, 0, sizeof *x);
    x->dirfd = x->objfd = x->j.fd = -1;
    for (unsigned d = 0; d < 256; d++)
        x->subfd[d] = -1;
    pthread_mutex_init(&x->j.mu, NULL);
    pthread_mutex_init(&x->compact_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_cond_init(&x->cond, &ca);
    pthread_cond_init(&x->done_cond, &ca);
    pthread_condattr_destroy(&ca);
    bool tables_ok = true;
    for (unsigned si = 0; si < CIDX_NSHARD; si++) {
        struct cidx_shard *s = &x->shards[si];
        pthread_mutex_init(&s->mu, NULL);
        s->kt = calloc(KT_MIN, sizeof *s->kt);
        s->it = calloc(KT_MIN, sizeof *s->it);
        s->kt_mask = s->it_mask = KT_MIN - 1;
        tables_ok = tables_ok && s->kt != NULL && s->it != NULL;
    }
    x->dir = strdup(cache_dir);
    if (!tables_ok || x->dir == NULL) {
        cidx_free(x);
        return CIDX_NOMEM;
    }
    if (opts != NULL)
        x->opts = *opts;
    if (x->opts.fsync_interval_ms == 0)
        x->opts.fsync_interval_ms = 50;
    if (x->opts.fsync_records == 0)
        x->opts.fsync_records = 256;
    if (x->opts.compact_min_bytes == 0)
        x->opts.compact_min_bytes = 4u << 20;
    if (x->opts.file_hdr_align == 0)
        x->opts.file_hdr_align = 4096;
    if (x->opts.file_hdr_max == 0)
        x->opts.file_hdr_max = 64u << 10;
    x->capacity = capacity_bytes;
    enum cidx_status st = CIDX_OK;
    if (x->opts.detached) {
        /* no directory yet (cidx_reset attaches one): nothing is journaled */
        x->j.failed = true;
        x->epoch = 1;
        x->opts.sweep = CIDX_SWEEP_NONE;
    } else if (cidx_dirfds_open(cache_dir, false, &x->dirfd, &x->objfd, x->subfd) != 0) {
        cidx_free(x);
        return CIDX_IO;
    } else if ((st = cidx_jnl_load(x)) != CIDX_OK) {
        cidx_free(x);
        return st;
    }
    if (x->opts.sweep == CIDX_SWEEP_SYNC)
        sweep_run(x);
    else if (x->opts.sweep == CIDX_SWEEP_BACKGROUND)
        x->sweep_pending = true;
    else
        x->sweep_done = true;
    if (pthread_create(&x->maint, NULL, maint_main, x) != 0) {
        log_msg(LOG_LVL_ERROR, "cache", "%s: cannot start the index thread", cache_dir);
        cidx_free(x);
        return CIDX_NOMEM;
    }
    x->maint_started = true;
    *out = x;
    return CIDX_OK;
}

enum cidx_status cidx_close(struct cidx *x)
{
    if (x == NULL)
        return CIDX_OK;
    pthread_mutex_lock(&x->j.mu);
    x->stop = true;
    pthread_cond_broadcast(&x->cond);
    pthread_mutex_unlock(&x->j.mu);
    if (x->maint_started)
        pthread_join(x->maint, NULL);
    /* Unfinished fills are not persisted: drop them so the snapshot is clean. */
    enum cidx_status st = CIDX_OK;
    if (x->dirfd >= 0) {   /* detached: no directory, nothing to write */
        st = cidx_jnl_compact(x);
        if (st != CIDX_OK)
            cidx_jnl_sync(x);
    }
    cidx_free(x);
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
    uint64_t h = key_hash(bucket, bl, key, kl);
    struct cidx_shard *s = &x->shards[hash_shard(h)];
    enum cidx_status st = CIDX_MISS;
    pthread_mutex_lock(&s->mu);
    struct cidx_ent *e = kt_find(s, h, bucket, bl, key, kl);
    if (e != NULL) {
        if (e->state == CIDX_STATE_READY) {
            ent_touch(x, s, e);
            if (pin) {
                ev_remove(s, e);
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
    uint64_t h = key_hash(bucket, bl, key, kl);
    unsigned si = hash_shard(h);
    struct cidx_shard *s = &x->shards[si];
    pthread_mutex_lock(&s->mu);
    struct cidx_ent *e = kt_find(s, h, bucket, bl, key, kl);
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
    e = ent_new(x, bucket, bl, key, kl, NULL, 0);
    if (e == NULL) {
        pthread_mutex_unlock(&s->mu);
        return CIDX_NOMEM;
    }
    e->id = (uint64_t)x->epoch << CIDX_EPOCH_SHIFT | seq << CIDX_SHARD_BITS | si;
    e->state = CIDX_STATE_FILLING;
    kt_add(s, e, h);
    it_add(s, e);
    *id = e->id;
    if (state != NULL)
        *state = CIDX_STATE_FILLING;
    pthread_mutex_unlock(&s->mu);
    return CIDX_OK;
}

enum cidx_status cidx_fill_size(struct cidx *x, uint64_t id, uint64_t size)
{
    struct cidx_shard *s = &x->shards[id_shard(id)];
    enum cidx_status st = CIDX_OK;
    pthread_mutex_lock(&s->mu);
    struct cidx_ent *e = it_find(s, id);
    if (e == NULL || e->state != CIDX_STATE_FILLING) {
        st = e == NULL ? CIDX_NOT_FOUND : CIDX_INVAL;
    } else if (size > x->capacity) {
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
    struct cidx_shard *s = &x->shards[id_shard(id)];
    pthread_mutex_lock(&s->mu);
    struct cidx_ent *e = it_find(s, id);
    if (e == NULL || e->state != CIDX_STATE_FILLING) {
        pthread_mutex_unlock(&s->mu);
        return e == NULL ? CIDX_NOT_FOUND : CIDX_INVAL;
    }
    if (e->flags & ENT_DOOMED) {
        ent_unlink_locked(x, s, e);
        pthread_mutex_unlock(&s->mu);
        unlink_data(x, id);
        ent_free(x, e);
        return CIDX_STALE;
    }
    /* The etag goes inline: a new allocation when it is not an MD5 form (rare:
     * SSE-KMS and some non-AWS servers). */
    struct cidx_ent *ne = e;
    unsigned char bin[16];
    uint16_t parts;
    bool packed = etag_pack(etag, el, bin, &parts);
    if (!packed) {
        ne = ent_new(x, e->kb, e->blen, e->kb + e->blen, e->klen, etag, el);
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
            ent_free(x, ne);
        else
            e->state = CIDX_STATE_FILLING;
        pthread_mutex_unlock(&s->mu);
        return st;
    }
    if (ne != e) {
        uint64_t h = ent_hash(e);
        kt_del(s, e);
        it_del(s, e);
        kt_add(s, ne, h);
        it_add(s, ne);
        ent_free(x, e);
    }
    atomic_fetch_sub_explicit(&x->reserved, reserved, memory_order_relaxed);
    atomic_fetch_add_explicit(&x->used, size, memory_order_relaxed);
    atomic_fetch_add_explicit(&x->objects, 1, memory_order_relaxed);
    if (ent_evictable(ne))
        ev_insert(s, ne);
    pthread_mutex_unlock(&s->mu);
    return CIDX_OK;
}

enum cidx_status cidx_fill_abort(struct cidx *x, uint64_t id)
{
    struct cidx_shard *s = &x->shards[id_shard(id)];
    pthread_mutex_lock(&s->mu);
    struct cidx_ent *e = it_find(s, id);
    if (e == NULL || e->state != CIDX_STATE_FILLING) {
        pthread_mutex_unlock(&s->mu);
        return e == NULL ? CIDX_NOT_FOUND : CIDX_INVAL;
    }
    ent_unlink_locked(x, s, e);
    pthread_mutex_unlock(&s->mu);
    unlink_data(x, id);
    ent_free(x, e);
    return CIDX_OK;
}

enum cidx_status cidx_invalidate(struct cidx *x, const char *bucket, const char *key)
{
    size_t bl, kl;
    if (key_check(bucket, key, &bl, &kl) != CIDX_OK)
        return CIDX_MISS;
    uint64_t h = key_hash(bucket, bl, key, kl);
    struct cidx_shard *s = &x->shards[hash_shard(h)];
    pthread_mutex_lock(&s->mu);
    struct cidx_ent *e = kt_find(s, h, bucket, bl, key, kl);
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
        st = ent_remove_ready_locked(x, s, e);
        pthread_mutex_unlock(&s->mu);
        ent_free(x, e);
    }
    unlink_data(x, id);
    return st;
}

/* Locks the shard of id and returns its entry (NULL if none); the caller
 * unlocks *sp. */
static struct cidx_ent *id_lock(struct cidx *x, uint64_t id, struct cidx_shard **sp)
{
    struct cidx_shard *s = &x->shards[id_shard(id)];
    pthread_mutex_lock(&s->mu);
    *sp = s;
    return it_find(s, id);
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
    struct cidx_ent *e = id_lock(x, id, &s);
    if (e != NULL)
        e->validated_at = when;
    pthread_mutex_unlock(&s->mu);
    return e != NULL ? CIDX_OK : CIDX_NOT_FOUND;
}

enum cidx_status cidx_pin(struct cidx *x, uint64_t id)
{
    struct cidx_shard *s;
    struct cidx_ent *e = id_lock(x, id, &s);
    if (e != NULL) {
        ev_remove(s, e);
        e->pins++;
    }
    pthread_mutex_unlock(&s->mu);
    return e != NULL ? CIDX_OK : CIDX_NOT_FOUND;
}

enum cidx_status cidx_unpin(struct cidx *x, uint64_t id)
{
    enum cidx_status st = CIDX_OK;
    struct cidx_shard *s;
    struct cidx_ent *e = id_lock(x, id, &s);
    if (e == NULL || e->pins == 0) {
        st = e == NULL ? CIDX_NOT_FOUND : CIDX_INVAL;
    } else if (--e->pins == 0 && ent_evictable(e)) {
        /* Back in the lists as just used: the reader or prefetch just had it. */
        e->stamp = atomic_fetch_add_explicit(&x->clock, 1, memory_order_relaxed) + 1;
        ev_insert(s, e);
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

enum cidx_status cidx_set_next_use(struct cidx *x, uint64_t id, uint64_t next_use_seq)
{
    struct cidx_shard *s;
    struct cidx_ent *e = id_lock(x, id, &s);
    if (e != NULL) {
        bool listed = (e->flags & ENT_IN_LIST) != 0;
        ev_remove(s, e);
        e->next_use = next_use_seq;
        e->stamp = atomic_fetch_add_explicit(&x->clock, 1, memory_order_relaxed) + 1;
        if (listed)
            ev_insert(s, e);
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
            st = ent_remove_ready_locked(x, s, v);
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
            unlink_data(x, victims[i]->id);
            ent_free(x, victims[i]);
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

enum cidx_status cidx_sync(struct cidx *x)
{
    return cidx_jnl_sync(x);
}

enum cidx_status cidx_compact(struct cidx *x)
{
    return cidx_jnl_compact(x);
}

void cidx_sweep_wait(struct cidx *x, struct cidx_sweep_stats *stats)
{
    pthread_mutex_lock(&x->j.mu);
    while (!x->sweep_done)
        pthread_cond_wait(&x->done_cond, &x->j.mu);
    if (stats != NULL)
        *stats = x->sweep;
    pthread_mutex_unlock(&x->j.mu);
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
