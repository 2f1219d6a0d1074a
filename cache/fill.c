/* cache/fill.c - single flight: the table of fills in flight (one per
 * object), the two queues the fill workers take them from (reader misses
 * before staging), a fill's references, the readers waiting for its bytes,
 * and the reaper that resumes readers whose deadline passed.
 *
 * Locks: c->mu (table, queues, references) before f->mu (one fill's state
 * and waiters). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache.h"
#include "cache_index.h"
#include "cache_int.h"
#include "hash.h"

enum {
    REAPER_MS = 100,             /* deadline resolution for waiting readers */
};

/* ---- small helpers ---- */

static uint64_t hash_name(const char *bucket, const char *key)
{
    return sg_fnv1a_pair(bucket, strlen(bucket), key, strlen(key));
}

static bool deadline_passed(const struct timespec *d)
{
    if (d->tv_sec == 0 && d->tv_nsec == 0)
        return false;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > d->tv_sec || (now.tv_sec == d->tv_sec && now.tv_nsec >= d->tv_nsec);
}

/* ---- waiters (all under f->mu) ---- */

void cache_waiter_add(struct cache *c, struct fill *f, struct cache_waiter *w, bool for_meta,
                      uint64_t need)
{
    w->missed |= for_meta;
    w->for_meta = for_meta;
    if (for_meta)
        w->fill_id = f->id;
    w->need = need;
    w->expired = false;
    w->queued = true;
    w->next = f->waiters;
    f->waiters = w;
    atomic_fetch_add(&c->waiters_now, 1);
    w->suspend(w->arg);
}

/* Resumes the waiters whose condition now holds (all of them when the fill
 * ended). A resumed waiter is out of the list before resume() runs: the
 * connection may be freed right after. */
void cache_waiters_wake(struct cache *c, struct fill *f)
{
    bool final = f->state == FILL_DONE || f->state == FILL_FAILED;
    struct cache_waiter **pp = &f->waiters;
    while (*pp) {
        struct cache_waiter *w = *pp;
        bool ready = final || (w->for_meta ? f->meta_known : f->avail > w->need);
        if (!ready) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        w->queued = false;
        w->next = NULL;
        if (f->state == FILL_FAILED) {
            w->result = f->err;
            w->bst = f->bst;
            w->cold = f->cold;
        }
        atomic_fetch_sub(&c->waiters_now, 1);
        w->resume(w->arg);
    }
}

/* ---- the fill table ---- */

struct fill *cache_table_find(struct cache *c, const char *bucket, const char *key)
{
    struct fill *f = c->table[hash_name(bucket, key) % FILL_TABLE];
    for (; f; f = f->table_next)
        if (strcmp(f->bucket, bucket) == 0 && strcmp(f->key, key) == 0)
            return f;
    return NULL;
}

void cache_cold_error_hand(enum backend_status bst, const struct backend_cold_error *cold)
{
    if (bst == BACKEND_COLD_ERROR && cold->http_status)
        backend_cold_error_put(cold);
}

bool cache_fill_failed_recently(const struct cache *c, uint64_t id, enum cache_status *err,
                                enum backend_status *bst)
{
    for (unsigned i = 0; id && i < FAILED_RECENT; i++) {
        if (c->failed[i].id == id) {
            *err = c->failed[i].err;
            *bst = c->failed[i].bst;
            cache_cold_error_hand(*bst, &c->failed[i].cold);
            return true;
        }
    }
    return false;
}

struct fill *cache_table_find_live(struct cache *c, const char *bucket, const char *key)
{
    struct fill *f = cache_table_find(c, bucket, key);
    if (!f)
        return NULL;
    pthread_mutex_lock(&f->mu);
    bool failed = f->state == FILL_FAILED;
    pthread_mutex_unlock(&f->mu);
    if (!failed)
        return f;
    /* Its worker has not retired it yet (retiring takes c->mu too), so the
     * worker's reference outlives the table's. */
    cache_fill_untable_locked(c, f);
    return NULL;
}

void cache_table_remove(struct cache *c, struct fill *f)
{
    struct fill **pp = &c->table[hash_name(f->bucket, f->key) % FILL_TABLE];
    for (; *pp; pp = &(*pp)->table_next) {
        if (*pp == f) {
            *pp = f->table_next;
            f->table_next = NULL;
            return;
        }
    }
}

static void fill_free(struct fill *f)
{
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->win_cv);
    obj_meta_clear(&f->meta);
    free(f->bucket);
    free(f->key);
    free(f);
}

void cache_fill_untable_locked(struct cache *c, struct fill *f)
{
    if (cache_table_find(c, f->bucket, f->key) == f) {
        cache_table_remove(c, f);
        f->refs--;   /* the table's: never the last, the caller holds one */
    }
}

/* Drops one reference; under c->mu. */
void cache_fill_unref_locked(struct fill *f)
{
    if (--f->refs == 0)
        fill_free(f);
}

/* A fill's worker is done with it: drop the worker's reference and, if the
 * fill is still the table's entry for its key, the table's. Returns the
 * prefetch observers to tell (after c->mu is released). Under c->mu. */
static struct cache_stage_obs *fill_retire_locked(struct cache *c, struct fill *f)
{
    struct cache_stage_obs *obs = f->observers;
    f->observers = NULL;
    if (f->background) {
        f->background = false;
        c->bg_inflight--;
    }
    cache_fill_untable_locked(c, f);
    cache_fill_unref_locked(f);   /* the worker's */
    return obs;
}

static void observers_tell(struct cache_stage_obs *obs, const struct cache_stage_end *end)
{
    while (obs) {
        struct cache_stage_obs *next = obs->next;
        obs->next = NULL;
        obs->done(obs, end);
        obs = next;
    }
}

/* Retires f from its worker and tells the observers how it ended. */
void cache_fill_retire(struct cache *c, struct fill *f)
{
    char why[CACHE_JOB_MSG_LEN];
    struct cache_stage_end end = { .why = why };
    pthread_mutex_lock(&f->mu);
    end.ok = f->state == FILL_DONE;
    end.size = f->meta_known ? f->meta.size : 0;
    end.err = f->state == FILL_FAILED ? f->err : CACHE_OK;
    end.bst = f->state == FILL_FAILED ? f->bst : BACKEND_OK;
    end.withdrawn = f->state == FILL_FAILED && f->withdrawn;
    memcpy(why, f->why, sizeof why);
    pthread_mutex_unlock(&f->mu);
    pthread_mutex_lock(&c->mu);
    struct cache_stage_obs *obs = fill_retire_locked(c, f);
    pthread_mutex_unlock(&c->mu);
    observers_tell(obs, &end);
}

void cache_fill_unref(struct cache *c, struct fill *f)
{
    pthread_mutex_lock(&c->mu);
    cache_fill_unref_locked(f);
    pthread_mutex_unlock(&c->mu);
}

/* Appends f to a queue; under c->mu. */
static void queue_push(struct fill **head, struct fill **tail, struct fill *f)
{
    f->queue_next = NULL;
    if (*tail)
        (*tail)->queue_next = f;
    else
        *head = f;
    *tail = f;
}

/* Takes f out of a queue; false when it is not in it. */
bool cache_queue_remove(struct fill **head, struct fill **tail, struct fill *f)
{
    struct fill *prev = NULL;
    for (struct fill *q = *head; q; prev = q, q = q->queue_next) {
        if (q != f)
            continue;
        if (prev)
            prev->queue_next = f->queue_next;
        else
            *head = f->queue_next;
        if (*tail == f)
            *tail = prev;
        f->queue_next = NULL;
        return true;
    }
    return false;
}

/* A reader wants a fill that was queued as staging: it moves to the front
 * queue (a reader's miss goes before staging work). Under c->mu. */
void cache_fill_promote_locked(struct cache *c, struct fill *f)
{
    if (!f->background)
        return;
    f->background = false;
    c->bg_inflight--;
    if (cache_queue_remove(&c->bg_head, &c->bg_tail, f))
        queue_push(&c->queue_head, &c->queue_tail, f);
    pthread_cond_signal(&c->work);
}

/* Creates and queues a fill for a new FILLING index entry; under c->mu. */
struct fill *cache_fill_new_locked(struct cache *c, const char *bucket, const char *key,
                                   uint64_t id, bool background)
{
    struct fill *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->bucket = strdup(bucket);
    f->key = strdup(key);
    if (!f->bucket || !f->key) {
        free(f->bucket);
        free(f->key);
        free(f);
        return NULL;
    }
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->win_cv, NULL);
    f->id = id;
    f->refs = 2;   /* the table and the worker that will run it */
    f->state = FILL_QUEUED;
    f->background = background;
    size_t h = hash_name(bucket, key) % FILL_TABLE;
    f->table_next = c->table[h];
    c->table[h] = f;
    if (background) {
        queue_push(&c->bg_head, &c->bg_tail, f);
        c->bg_inflight++;
    } else {
        queue_push(&c->queue_head, &c->queue_tail, f);
        atomic_fetch_add(&c->misses, 1);
    }
    pthread_cond_signal(&c->work);
    atomic_fetch_add(&c->fills_started, 1);
    return f;
}

/* ---- a fill's data file, and a failed fill ---- */

int cache_open_data(struct cache *c, uint64_t id, int flags)
{
    return cidx_data_open(c->idx, id, flags, 0644);
}

/* Ends f as failed: err is CACHE_BACKEND with the cold tier's bst, or a
 * cache-side status with why (NULL: none), a sentence for prefetch jobs. */
void cache_fill_fail(struct cache *c, struct fill *f, enum cache_status err,
                     enum backend_status bst, const char *why)
{
    /* Under c->mu the index entry goes and the fill turns FAILED together:
     * a reader that finds no entry and then this fill sees it failed and
     * starts a fresh fill (cache_table_find_live), and no new fill can begin
     * while the failed one's FILLING entry is still in the index. Under
     * f->mu too: the abort unlinks the fill's file, and a reader that found
     * this fill live opens that file under f->mu only (read.c obj_open);
     * it must see the file or FAILED, never a running fill without its file
     * (it answered CACHE_IO: run 37, unit readers_after_a_failed_fill_...). */
    /* The cold tier's own answer was kept on this (the worker's) thread:
     * the fill keeps it for its readers' threads (http_status 0: none). */
    struct backend_cold_error cold = { 0 };
    if (bst == BACKEND_COLD_ERROR && !backend_cold_error_take(&cold))
        cold.http_status = 0;
    pthread_mutex_lock(&c->mu);
    pthread_mutex_lock(&f->mu);
    cidx_fill_abort(c->idx, f->id);
    f->state = FILL_FAILED;
    f->err = err;
    f->bst = bst;
    f->cold = cold;
    snprintf(f->why, sizeof f->why, "%s", why ? why : "");
    unsigned slot = c->failed_next++ % FAILED_RECENT;
    c->failed[slot].id = f->id;
    c->failed[slot].err = err;
    c->failed[slot].bst = bst;
    c->failed[slot].cold = cold;
    atomic_fetch_add(&c->fills_failed, 1);   /* counted before anyone hears of it */
    cache_waiters_wake(c, f);
    pthread_mutex_unlock(&f->mu);
    pthread_mutex_unlock(&c->mu);
}

/* ---- deadlines of waiting readers ---- */

/* Resumes waiters whose deadline passed; their next call answers
 * CACHE_TIMEOUT. A suspended connection never times out by itself. */
void *cache_reaper_main(void *arg)
{
    struct cache *c = arg;
    for (;;) {
        struct timespec ts = { 0, REAPER_MS * 1000000L };
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&c->mu);
        if (c->stopping) {
            pthread_mutex_unlock(&c->mu);
            return NULL;
        }
        for (size_t i = 0; i < FILL_TABLE; i++) {
            for (struct fill *f = c->table[i]; f; f = f->table_next) {
                pthread_mutex_lock(&f->mu);
                struct cache_waiter **pp = &f->waiters;
                while (*pp) {
                    struct cache_waiter *w = *pp;
                    if (!deadline_passed(&w->deadline)) {
                        pp = &w->next;
                        continue;
                    }
                    *pp = w->next;
                    w->queued = false;
                    w->expired = true;
                    atomic_fetch_sub(&c->waiters_now, 1);
                    w->resume(w->arg);
                }
                pthread_mutex_unlock(&f->mu);
            }
        }
        pthread_mutex_unlock(&c->mu);
    }
}
