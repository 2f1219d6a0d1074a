/* tests/unit/test_cache_prefetch.c - prefetch jobs over a real directory
 * store: an unordered hint stages everything (then reads are hits), missing
 * keys are reported, cancel stops staging, and - the point of hints - with
 * a dataset twice the cache and a new shuffled order every epoch, ordered
 * hints with next-use eviction read about (dataset - cache) from the cold
 * tier per epoch, where LRU re-reads nearly everything. */
#include <CUnit/CUnit.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "cache.h"
#include "log.h"

#define MIB (1024u * 1024u)

static char data_dir[64], cache_dir[64];
static struct backend *cold;
static struct cache *cache;
/* Tell the cache of a read when its body starts, as the gateway does (a
 * GET answered), not when it has been read whole: the loader-worker
 * tests, where several reads are in flight at once. */
static bool note_at_open;

static void noop(void *arg) { (void)arg; }

struct sync_waiter {
    struct cache_waiter w;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending;
};

static void sw_suspend(void *arg)
{
    struct sync_waiter *s = arg;
    pthread_mutex_lock(&s->mu);
    s->pending = 1;
    pthread_mutex_unlock(&s->mu);
}

static void sw_resume(void *arg)
{
    struct sync_waiter *s = arg;
    pthread_mutex_lock(&s->mu);
    s->pending = 0;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void sw_wait(struct sync_waiter *s)
{
    pthread_mutex_lock(&s->mu);
    while (s->pending)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

/* Reads bucket/key whole through the cache, as the gateway does; returns
 * bytes read (the reader tells the cache, like a GET). */
static uint64_t read_object(const char *key)
{
    struct sync_waiter s;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    s.w.suspend = sw_suspend;
    s.w.resume = sw_resume;
    s.w.arg = &s;
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    struct cache_obj *o = NULL;
    enum backend_status bst;
    enum cache_status st;
    while ((st = cache_obj_open(cache, "data", key, &s.w, &m, &bst, &o)) == CACHE_AGAIN)
        sw_wait(&s);
    uint64_t total = 0;
    if (st == CACHE_OK && note_at_open)
        cache_note_read(cache, "data", key);
    if (st == CACHE_OK) {
        char *buf = malloc(MIB);
        for (;;) {
            size_t got = 0;
            st = cache_obj_read(o, total, buf, MIB, &got, &s.w);
            if (st == CACHE_AGAIN) {
                sw_wait(&s);
                continue;
            }
            if (st != CACHE_OK)
                break;
            total += got;
        }
        free(buf);
        cache_obj_close(o);
        if (!note_at_open)
            cache_note_read(cache, "data", key);
    }
    if (st != CACHE_END)
        fprintf(stderr, "read_object(%s): %s after %llu bytes\n", key, cache_status_name(st),
                (unsigned long long)total);
    obj_meta_clear(&m);
    pthread_mutex_destroy(&s.mu);
    pthread_cond_destroy(&s.cv);
    return total;
}

static void put(const char *key, size_t n)
{
    unsigned char *p = malloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 31 + (unsigned char)key[strlen(key) - 1]);
    struct backend_put *bp;
    CU_ASSERT_EQUAL_FATAL(backend_put_begin(cold, "data", key, &bp), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(backend_put_write(bp, p, n), BACKEND_OK);
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    unsigned char d[16];
    unsigned dl;
    EVP_Digest(p, n, d, &dl, EVP_md5(), NULL);
    for (int i = 0; i < 16; i++)
        snprintf(m.etag + 2 * i, 3, "%02x", d[i]);
    CU_ASSERT_EQUAL_FATAL(backend_put_commit(bp, &m, NULL), BACKEND_OK);
    free(p);
}

static void setup(uint64_t capacity, unsigned high, unsigned low, unsigned workers)
{
    strcpy(data_dir, "/tmp/sg-pf-data-XXXXXX");
    strcpy(cache_dir, "/tmp/sg-pf-cache-XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(data_dir));
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(cache_dir));
    struct backend_posix_conf pc = { .root = data_dir };
    CU_ASSERT_EQUAL_FATAL(backend_posix_open(&pc, &cold), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(backend_bucket_create(cold, "data"), BACKEND_OK);
    struct cache_conf cc = { .dir = cache_dir, .capacity = capacity, .high_pct = high,
                             .low_pct = low, .fill_workers = workers, .wait_timeout_ms = 10000,
                             .default_consistency = CACHE_IMMUTABLE };
    CU_ASSERT_EQUAL_FATAL(cache_open(&cc, cold, &cache), 0);
}

static void teardown(void)
{
    cache_close(cache);
    backend_close(cold);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", data_dir, cache_dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

static char **key_list(const char *const *names, size_t n)
{
    char **k = calloc(n, sizeof *k);
    for (size_t i = 0; i < n; i++)
        k[i] = strdup(names[i]);
    return k;
}

static char *shard_name(unsigned i)
{
    char *s = malloc(32);
    snprintf(s, 32, "shard-%04u.tar", i);
    return s;
}

/* Polls until the job is final (10 s at most); returns its info. */
static void wait_job(const char *id, struct cache_job_info *ji)
{
    for (int i = 0; i < 1000; i++) {
        CU_ASSERT_EQUAL_FATAL(cache_job_get(cache, "data", id, ji), 0);
        if (ji->state == CACHE_JOB_DONE || ji->state == CACHE_JOB_FAILED ||
            ji->state == CACHE_JOB_CANCELLED)
            return;
        cache_job_info_clear(ji);
        usleep(10000);
    }
    CU_FAIL("job did not end within 10 s");
}

static void unordered_hint_stages_everything_then_reads_are_hits(void)
{
    setup(64 * MIB, 90, 80, 4);
    enum { N = 20 };
    char **keys = calloc(N, sizeof *keys);
    for (unsigned i = 0; i < N; i++) {
        keys[i] = shard_name(i);
        put(keys[i], 100000 + i);
    }
    struct cache_hint h = { .bucket = "data", .keys = keys, .n_keys = N };
    char id[CACHE_JOB_ID_LEN];
    CU_ASSERT_EQUAL_FATAL(cache_job_submit(cache, &h, id), 0);
    CU_ASSERT_PTR_NULL(h.keys);   /* taken */
    struct cache_job_info ji;
    uint64_t last_done = 0;
    for (;;) {   /* counters only ever grow */
        CU_ASSERT_EQUAL_FATAL(cache_job_get(cache, "data", id, &ji), 0);
        CU_ASSERT_TRUE(ji.bytes_done >= last_done);
        CU_ASSERT_EQUAL(ji.cached + ji.staged + ji.failed + ji.pending, ji.total);
        last_done = ji.bytes_done;
        if (ji.state == CACHE_JOB_DONE)
            break;
        cache_job_info_clear(&ji);
        usleep(5000);
    }
    CU_ASSERT_EQUAL(ji.total, N);
    CU_ASSERT_EQUAL(ji.staged, N);
    CU_ASSERT_EQUAL(ji.failed, 0);
    uint64_t want = 0;
    for (unsigned i = 0; i < N; i++)
        want += 100000 + i;
    CU_ASSERT_EQUAL(ji.bytes_done, want);
    CU_ASSERT_EQUAL(ji.bytes_total, want);
    cache_job_info_clear(&ji);
    struct cache_stats before, after;
    cache_stats_get(cache, &before);
    for (unsigned i = 0; i < N; i++) {
        char *k = shard_name(i);
        CU_ASSERT_EQUAL(read_object(k), 100000 + i);
        free(k);
    }
    cache_stats_get(cache, &after);
    CU_ASSERT_EQUAL(after.hits - before.hits, N);
    CU_ASSERT_EQUAL(after.backend_bytes, before.backend_bytes);   /* zero cold reads */
    teardown();
}

static void missing_keys_are_reported_and_the_rest_staged(void)
{
    setup(64 * MIB, 90, 80, 2);
    put("a.tar", 1000);
    put("c.tar", 1000);
    static const char *const names[] = { "a.tar", "b.tar", "c.tar", "d.tar" };
    struct cache_hint h = { .bucket = "data", .keys = key_list(names, 4), .n_keys = 4 };
    char id[CACHE_JOB_ID_LEN];
    CU_ASSERT_EQUAL_FATAL(cache_job_submit(cache, &h, id), 0);
    struct cache_job_info ji;
    wait_job(id, &ji);
    CU_ASSERT_EQUAL(ji.state, CACHE_JOB_DONE);
    CU_ASSERT_EQUAL(ji.staged, 2);
    CU_ASSERT_EQUAL(ji.failed, 2);
    CU_ASSERT_EQUAL(ji.n_errors, 2);
    for (size_t i = 0; i < ji.n_errors; i++) {
        CU_ASSERT_EQUAL(ji.errors[i].st, BACKEND_NO_KEY);
        CU_ASSERT_TRUE(strcmp(ji.errors[i].key, "b.tar") == 0 ||
                       strcmp(ji.errors[i].key, "d.tar") == 0);
    }
    cache_job_info_clear(&ji);
    teardown();
}

static void cancel_stops_staging(void)
{
    setup(256 * MIB, 90, 80, 2);   /* one background fill at a time */
    enum { N = 30 };
    char **keys = calloc(N, sizeof *keys);
    for (unsigned i = 0; i < N; i++) {
        keys[i] = shard_name(i);
        put(keys[i], 2 * MIB);
    }
    struct cache_hint h = { .bucket = "data", .keys = keys, .n_keys = N };
    char id[CACHE_JOB_ID_LEN];
    CU_ASSERT_EQUAL_FATAL(cache_job_submit(cache, &h, id), 0);
    struct cache_job_info ji;
    CU_ASSERT_EQUAL_FATAL(cache_job_cancel(cache, "data", id, &ji), 0);
    CU_ASSERT_EQUAL(ji.state, CACHE_JOB_CANCELLED);
    cache_job_info_clear(&ji);
    usleep(300000);   /* whatever was in flight ends */
    struct cache_stats s1, s2;
    cache_stats_get(cache, &s1);
    usleep(500000);
    cache_stats_get(cache, &s2);
    CU_ASSERT_EQUAL(s2.fills_started, s1.fills_started);   /* nothing new starts */
    CU_ASSERT_TRUE(s2.fills_started < N);
    CU_ASSERT_EQUAL(cache_job_get(cache, "data", "no-such-job", &ji), -1);
    teardown();
}

static void submit_chain(const char *consumer, int epoch, char id[CACHE_JOB_ID_LEN])
{
    static const char *const names[] = { "a.tar", "b.tar", "c.tar", "d.tar" };
    struct cache_hint h = { .bucket = "data", .keys = key_list(names, 4), .n_keys = 4,
                            .ordered = true, .has_epoch = epoch >= 0,
                            .epoch = epoch >= 0 ? (uint64_t)epoch : 0, .consumer = consumer };
    CU_ASSERT_EQUAL_FATAL(cache_job_submit(cache, &h, id), 0);
}

/* The job's state and reader position. */
static enum cache_job_state job_state(const char *id, uint64_t *position)
{
    struct cache_job_info ji;
    CU_ASSERT_EQUAL_FATAL(cache_job_get(cache, "data", id, &ji), 0);
    enum cache_job_state st = ji.state;
    *position = ji.position;
    cache_job_info_clear(&ji);
    return st;
}

static uint64_t position_of(const char *id)
{
    uint64_t pos;
    job_state(id, &pos);
    return pos;
}

/* A consumer's hint for epoch e+1 queues behind its live hint for epoch e
 * (reads count against e until e is read through); any other new hint of
 * the consumer supersedes its live ones (they stop counting reads and
 * guiding eviction). */
static void next_epoch_hint_queues_behind_the_current_one(void)
{
    setup(64 * MIB, 90, 80, 2);
    static const char *const names[] = { "a.tar", "b.tar", "c.tar", "d.tar" };
    for (int i = 0; i < 4; i++)
        put(names[i], 1000);
    char e5[CACHE_JOB_ID_LEN], e6[CACHE_JOB_ID_LEN], e6b[CACHE_JOB_ID_LEN],
        e8[CACHE_JOB_ID_LEN], other[CACHE_JOB_ID_LEN], none[CACHE_JOB_ID_LEN];
    submit_chain("r0", 5, e5);
    submit_chain("r1", 9, other);        /* another consumer: its own chain */
    submit_chain("r0", 6, e6);
    CU_ASSERT_EQUAL(read_object("a.tar"), 1000);
    CU_ASSERT_EQUAL(read_object("b.tar"), 1000);
    CU_ASSERT_EQUAL(position_of(e5), 2); /* epoch 5 is being read ... */
    CU_ASSERT_EQUAL(position_of(e6), 0); /* ... not epoch 6, though it has the keys */
    CU_ASSERT_EQUAL(position_of(other), 2);
    submit_chain("r0", 6, e6b);          /* epoch 6 again: replaces the first one */
    CU_ASSERT_EQUAL(read_object("c.tar"), 1000);
    CU_ASSERT_EQUAL(read_object("d.tar"), 1000);   /* epoch 5 read through */
    struct cache_job_info ji;
    wait_job(e5, &ji);
    CU_ASSERT_EQUAL(ji.state, CACHE_JOB_DONE);     /* not cancelled by epoch 6's hints */
    CU_ASSERT_EQUAL(ji.position, 4);
    cache_job_info_clear(&ji);
    CU_ASSERT_EQUAL(read_object("a.tar"), 1000);   /* now epoch 6 counts */
    CU_ASSERT_EQUAL(position_of(e6b), 1);
    CU_ASSERT_EQUAL(position_of(e6), 0);           /* superseded */
    submit_chain("r0", 8, e8);           /* not the next epoch: supersedes */
    CU_ASSERT_EQUAL(read_object("b.tar"), 1000);
    CU_ASSERT_EQUAL(position_of(e6b), 1);
    /* b is read, a not yet: the position is the first key not read (a
     * loader's workers read out of order; a may still come) */
    CU_ASSERT_EQUAL(position_of(e8), 0);
    CU_ASSERT_EQUAL(read_object("a.tar"), 1000);
    CU_ASSERT_EQUAL(position_of(e8), 2);
    submit_chain("r0", -1, none);        /* no epoch: supersedes */
    CU_ASSERT_EQUAL(read_object("d.tar"), 1000);
    CU_ASSERT_EQUAL(position_of(e8), 2);
    CU_ASSERT_EQUAL(position_of(none), 0);
    CU_ASSERT_EQUAL(read_object("a.tar"), 1000);
    CU_ASSERT_EQUAL(read_object("b.tar"), 1000);
    CU_ASSERT_EQUAL(position_of(none), 2);
    CU_ASSERT_EQUAL(read_object("c.tar"), 1000);
    CU_ASSERT_EQUAL(position_of(none), 4);
    CU_ASSERT_EQUAL(position_of(other), 4);
    teardown();
}

/* Reads out of order, as a loader's workers make them: a key read early
 * does not pass the ones before it; the next epoch's first read, while a
 * worker still reads this epoch's last key, counts for the next epoch; a
 * key nobody reads is passed once the reader is far beyond it. */
static void out_of_order_reads_keep_their_place(void)
{
    setup(64 * MIB, 90, 80, 2);
    static const char *const names[] = { "a.tar", "b.tar", "c.tar", "d.tar" };
    for (int i = 0; i < 4; i++)
        put(names[i], 1000);
    char e5[CACHE_JOB_ID_LEN], e6[CACHE_JOB_ID_LEN];
    submit_chain("r0", 5, e5);
    submit_chain("r0", 6, e6);
    CU_ASSERT_EQUAL(read_object("b.tar"), 1000);
    CU_ASSERT_EQUAL(position_of(e5), 0);           /* a is still to come */
    CU_ASSERT_EQUAL(read_object("a.tar"), 1000);
    CU_ASSERT_EQUAL(read_object("c.tar"), 1000);
    CU_ASSERT_EQUAL(position_of(e5), 3);
    CU_ASSERT_EQUAL(read_object("a.tar"), 1000);   /* epoch 6 begins ... */
    CU_ASSERT_EQUAL(position_of(e5), 3);
    CU_ASSERT_EQUAL(position_of(e6), 1);
    CU_ASSERT_EQUAL(read_object("d.tar"), 1000);   /* ... as epoch 5 ends */
    CU_ASSERT_EQUAL(position_of(e5), 4);
    CU_ASSERT_EQUAL(position_of(e6), 1);           /* d is epoch 5's */
    teardown();

    enum { MANY = 80, SLACK = 64 };   /* SLACK: prefetch.c's READ_SLACK */
    setup(64 * MIB, 90, 80, 2);
    char **keys = calloc(MANY, sizeof *keys);
    for (unsigned i = 0; i < MANY; i++) {
        keys[i] = shard_name(i);
        put(keys[i], 100);
    }
    struct cache_hint h = { .bucket = "data", .keys = keys, .n_keys = MANY, .ordered = true };
    char id[CACHE_JOB_ID_LEN];
    CU_ASSERT_EQUAL_FATAL(cache_job_submit(cache, &h, id), 0);
    for (unsigned i = 1; i < MANY; i++) {          /* key 0 is never read */
        char *k = shard_name(i);
        CU_ASSERT_EQUAL(read_object(k), 100);
        free(k);
        CU_ASSERT_EQUAL(position_of(id), i <= SLACK ? 0 : i + 1);
    }
    struct cache_job_info ji;
    wait_job(id, &ji);
    CU_ASSERT_EQUAL(ji.state, CACHE_JOB_DONE);
    cache_job_info_clear(&ji);
    teardown();
}

/* Waits until the stager has done all it may do now: it looked since the
 * last event and found nothing to start, and no fill runs. Asked of the
 * stager, not timed: a silence of some length (three ticks, before) can
 * also be a stager that a loaded machine has not run yet. */
static void quiesce(void)
{
    for (int i = 0; i < 24000; i++) {   /* 2 min: only a hang gets there */
        struct cache_stats s;
        cache_stats_get(cache, &s);
        if (cache_prefetch_settled(cache) && s.fills_started == s.fills_done + s.fills_failed)
            return;
        usleep(5000);
    }
    CU_FAIL("staging did not settle");
}

enum hints_mode { NO_HINTS, HINT_AT_START, HINT_AHEAD };

static void submit_epoch(const unsigned *order, unsigned n, int e, unsigned window_objects)
{
    char **keys = calloc(n, sizeof *keys);
    for (unsigned i = 0; i < n; i++)
        keys[i] = shard_name(order[i]);
    struct cache_hint h = { .bucket = "data", .keys = keys, .n_keys = n, .ordered = true,
                            .has_epoch = true, .epoch = (uint64_t)e, .consumer = "rank0",
                            .window_objects = window_objects };
    char id[CACHE_JOB_ID_LEN];
    CU_ASSERT_EQUAL_FATAL(cache_job_submit(cache, &h, id), 0);
}

/* Counts, not bytes, are what these tests prove: small shards keep the
 * sanitizer build's hashing cheap (the suite's slowest unit test under load). */
#define SHARD (64u * 1024u)
#define CACHE_BYTES (80u * SHARD)       /* half the dataset */
#define HALF_SLACK (88u * SHARD)        /* (dataset - cache) + 10 % */
enum { N = 160, FIRST = 8 };

/* Four epochs over 160 shards of 64 KiB (10 MiB) with a cache of half that;
 * cold bytes per epoch in out[], and in first_hits[] how many of each
 * epoch's first FIRST reads were hits. HINT_AT_START sends epoch e's hint
 * as e begins; HINT_AHEAD sends epochs 0 and 1 first, then epoch e+1's as
 * e begins (a loader declaring the next epoch ahead). Before the last
 * FIRST reads of an epoch the reader pauses until staging is idle (its
 * compute: deterministic, where a paced reader would race the stager). */
static void run_epochs(enum hints_mode mode, uint64_t out[4], unsigned first_hits[4])
{
    setup(CACHE_BYTES, 100, 95, 4);
    for (unsigned i = 0; i < N; i++) {
        char *k = shard_name(i);
        put(k, SHARD);
        free(k);
    }
    unsigned orders[4][N];
    for (unsigned i = 0; i < N; i++)
        orders[0][i] = i;
    uint32_t rnd = 12345;
    for (int e = 0; e < 4; e++) {
        if (e > 0)
            memcpy(orders[e], orders[e - 1], sizeof orders[e]);
        for (unsigned i = N - 1; i > 0; i--) {   /* a new shuffle per epoch, like a loader */
            rnd = rnd * 1103515245u + 12345u;
            unsigned j = (rnd >> 8) % (i + 1);
            unsigned t = orders[e][i];
            orders[e][i] = orders[e][j];
            orders[e][j] = t;
        }
    }
    for (int e = 0; e < 4; e++) {
        const unsigned *order = orders[e];
        if (mode == HINT_AT_START)
            submit_epoch(order, N, e, FIRST);
        if (mode == HINT_AHEAD) {
            if (e == 0)
                submit_epoch(order, N, e, FIRST);
            if (e + 1 < 4)   /* a loader knows its last epoch */
                submit_epoch(orders[e + 1], N, e + 1, FIRST);
        }
        struct cache_stats s0, s1, h0, h1;
        cache_stats_get(cache, &s0);
        first_hits[e] = 0;
        for (unsigned i = 0; i < N; i++) {
            if (i == N - FIRST)
                quiesce();
            char *k = shard_name(order[i]);
            cache_stats_get(cache, &h0);
            CU_ASSERT_EQUAL(read_object(k), SHARD);
            cache_stats_get(cache, &h1);
            if (i < FIRST)
                first_hits[e] += (unsigned)(h1.hits - h0.hits);
            free(k);
        }
        quiesce();   /* staging started by the epoch's reads is counted in it */
        cache_stats_get(cache, &s1);
        out[e] = s1.backend_bytes - s0.backend_bytes;
        CU_ASSERT_TRUE(s1.bytes_used <= CACHE_BYTES);
    }
    teardown();
}

/* The first epoch, with lead time: a hint sent at the dataset's set-up,
 * before the reader starts, stages for as long as the reader is away -
 * the whole cache, in the hinted order (not only the window the stager
 * keeps ahead of a running reader) - and the reader's first reads, as
 * many as the cache holds, are all hits. */
static void a_hint_sent_before_the_reader_fills_the_cache(void)
{
    setup(CACHE_BYTES, 100, 95, 4);
    char **keys = calloc(N, sizeof *keys);
    for (unsigned i = 0; i < N; i++) {
        keys[i] = shard_name((i * 7) % N);   /* an order unlike the names' */
        put(keys[i], SHARD);
    }
    struct cache_hint h = { .bucket = "data", .keys = keys, .n_keys = N, .ordered = true,
                            .has_epoch = true, .epoch = 0, .consumer = "rank0" };
    char id[CACHE_JOB_ID_LEN];
    CU_ASSERT_EQUAL_FATAL(cache_job_submit(cache, &h, id), 0);
    quiesce();
    struct cache_stats s0, s1;
    cache_stats_get(cache, &s0);
    printf("\n    staged before the first read: %llu of %u objects, %llu of %u bytes\n",
           (unsigned long long)s0.objects, N, (unsigned long long)s0.bytes_used, CACHE_BYTES);
    /* full: one more object would take it over the high watermark (100 %,
     * of capacity / 100 * 100 bytes) */
    CU_ASSERT_FATAL(s0.objects > 0);
    CU_ASSERT_TRUE(s0.bytes_used + s0.bytes_used / s0.objects > CACHE_BYTES / 100 * 100);
    for (unsigned i = 0; i < s0.objects; i++) {
        char *k = shard_name((i * 7) % N);
        CU_ASSERT_EQUAL(read_object(k), SHARD);
        free(k);
    }
    cache_stats_get(cache, &s1);
    CU_ASSERT_EQUAL(s1.hits - s0.hits, s0.objects);
    teardown();
}

/* Two ranks in step over one dataset, hints one epoch ahead: rank r reads
 * shards r, r+2, ... of each epoch's order, the two alternating read by
 * read (data-parallel training). Both ranks' next uses share one use
 * clock, so eviction and staging serve them alike: cold bytes stay near
 * (dataset - cache) and each rank's first reads of an epoch are hits.
 * Returns cold bytes per epoch; first_hits[e] counts hits among the first
 * FIRST reads of each rank. */
static void run_two_ranks(uint64_t out[4], unsigned first_hits[4])
{
    setup(CACHE_BYTES, 100, 95, 4);
    for (unsigned i = 0; i < N; i++) {
        char *k = shard_name(i);
        put(k, SHARD);
        free(k);
    }
    unsigned orders[4][N];
    uint32_t rnd = 777;
    for (int e = 0; e < 4; e++) {
        for (unsigned i = 0; i < N; i++)
            orders[e][i] = e ? orders[e - 1][i] : i;
        for (unsigned i = N - 1; i > 0; i--) {
            rnd = rnd * 1103515245u + 12345u;
            unsigned j = (rnd >> 8) % (i + 1);
            unsigned t = orders[e][i];
            orders[e][i] = orders[e][j];
            orders[e][j] = t;
        }
    }
    enum { HALF = N / 2 };
    for (int e = 0; e < 4; e++) {
        for (int ahead = e == 0 ? 0 : 1; ahead <= 1 && e + ahead < 4; ahead++)
            for (unsigned r = 0; r < 2; r++) {
                unsigned share[HALF];
                for (unsigned k = 0; k < HALF; k++)
                    share[k] = orders[e + ahead][2 * k + r];
                char **keys = calloc(HALF, sizeof *keys);
                for (unsigned k = 0; k < HALF; k++)
                    keys[k] = shard_name(share[k]);
                char consumer[8];
                snprintf(consumer, sizeof consumer, "rank%u", r);
                struct cache_hint h = { .bucket = "data", .keys = keys, .n_keys = HALF,
                                        .ordered = true, .has_epoch = true,
                                        .epoch = (uint64_t)(e + ahead), .consumer = consumer };
                char id[CACHE_JOB_ID_LEN];
                CU_ASSERT_EQUAL_FATAL(cache_job_submit(cache, &h, id), 0);
            }
        struct cache_stats s0, s1, h0, h1;
        cache_stats_get(cache, &s0);
        first_hits[e] = 0;
        for (unsigned i = 0; i < N; i++) {   /* read i is rank (i % 2)'s read i / 2 */
            if (i == N - 2 * FIRST)
                quiesce();
            char *k = shard_name(orders[e][i]);
            cache_stats_get(cache, &h0);
            CU_ASSERT_EQUAL(read_object(k), SHARD);
            cache_stats_get(cache, &h1);
            if (i < 2 * FIRST)
                first_hits[e] += (unsigned)(h1.hits - h0.hits);
            free(k);
        }
        quiesce();
        cache_stats_get(cache, &s1);
        out[e] = s1.backend_bytes - s0.backend_bytes;
        CU_ASSERT_TRUE(s1.bytes_used <= CACHE_BYTES);
    }
    teardown();
}

static void two_ranks_in_step_are_staged_alike(void)
{
    uint64_t bytes[4];
    unsigned first[4];
    run_two_ranks(bytes, first);
    printf("\n    two ranks, hints one epoch ahead: cold MiB per epoch, hits among each "
           "rank's first %d reads (of %d):\n", FIRST, 2 * FIRST);
    for (int e = 0; e < 4; e++)
        printf("    epoch %d: %6.1f %u\n", e, (double)bytes[e] / MIB, first[e]);
    for (int e = 1; e < 4; e++) {
        CU_ASSERT_TRUE(bytes[e] <= HALF_SLACK);
        CU_ASSERT_EQUAL(first[e], 2 * FIRST);
    }
}

/* Cold reads Belady's rule (evict what is needed furthest ahead, knowing
 * every read) makes for reads seq[from..n) with `cap` objects cached, having
 * served seq[0..from) before: the fewest any cache of that size can make. */
static unsigned belady_misses(const unsigned *seq, unsigned n, unsigned from, unsigned cap)
{
    unsigned cached[N], n_cached = 0, misses = 0;
    for (unsigned t = 0; t < n; t++) {
        bool hit = false;
        for (unsigned c = 0; c < n_cached && !hit; c++)
            hit = cached[c] == seq[t];
        if (hit)
            continue;
        misses += t >= from;
        if (n_cached == cap) {
            unsigned worst = 0, worst_next = 0;
            for (unsigned c = 0; c < n_cached; c++) {
                unsigned next = t + 1;
                while (next < n && seq[next] != cached[c])
                    next++;
                if (next > worst_next) {
                    worst_next = next;
                    worst = c;
                }
            }
            cached[worst] = cached[--n_cached];
        }
        cached[n_cached++] = seq[t];
    }
    return misses;
}

/* A data loader's workers reading one epoch: `threads` of them, thread t
 * reading reads t, t + threads, ... of the order, each read starting only
 * when every read `threads` or more before it has ended (a loader hands
 * the trainer its batches in order and keeps at most one per worker in
 * flight). So reads arrive interleaved, up to `threads` at once, in an
 * order the scheduler picks. */
struct loader {
    const unsigned *order;
    unsigned threads;
    bool settled;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done[N];
    unsigned done_prefix;       /* reads [0, done_prefix) have ended */
};

struct loader_worker {
    struct loader *l;
    unsigned t;
};

static void *loader_worker_main(void *arg)
{
    struct loader_worker *w = arg;
    struct loader *l = w->l;
    for (unsigned i = w->t; i < N; i += l->threads) {
        pthread_mutex_lock(&l->mu);
        while (i >= l->done_prefix + l->threads)
            pthread_cond_wait(&l->cv, &l->mu);
        pthread_mutex_unlock(&l->mu);
        if (l->settled)
            quiesce();
        char *k = shard_name(l->order[i]);
        CU_ASSERT_EQUAL(read_object(k), SHARD);
        free(k);
        pthread_mutex_lock(&l->mu);
        l->done[i] = true;
        while (l->done_prefix < N && l->done[l->done_prefix])
            l->done_prefix++;
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
    }
    return NULL;
}

static void read_epoch_by_loader(const unsigned *order, unsigned threads, bool settled)
{
    struct loader l = { .order = order, .threads = threads, .settled = settled };
    pthread_mutex_init(&l.mu, NULL);
    pthread_cond_init(&l.cv, NULL);
    pthread_t tid[64];
    struct loader_worker w[64];
    CU_ASSERT_FATAL(threads <= 64);
    for (unsigned t = 0; t < threads; t++) {
        w[t] = (struct loader_worker){ .l = &l, .t = t };
        CU_ASSERT_EQUAL_FATAL(pthread_create(&tid[t], NULL, loader_worker_main, &w[t]), 0);
    }
    for (unsigned t = 0; t < threads; t++)
        pthread_join(tid[t], NULL);
    pthread_mutex_destroy(&l.mu);
    pthread_cond_destroy(&l.cv);
}

/* Four shuffled epochs over 160 shards of 64 KiB with a cache of half that,
 * `ranks` ranks in step (rank r reads reads r, r + ranks, ... of each
 * epoch's order), one ordered hint per rank sent one epoch ahead. The
 * reader either lets the stager do all it may before every read (settled:
 * the stager as far ahead as it gets) or reads back to back (it races
 * every fill). With `workers` > 1 each rank reads through a loader of that
 * many workers (read_epoch_by_loader: reads in flight at once and out of
 * order). Returns the cold reads of epochs 1-3 and, in *least, what
 * Belady's rule needs for them with as many objects as the cache held. */
static unsigned paced_stage_ahead;   /* the hints' stage_ahead (0: Belady's moment) */
static unsigned run_paced(unsigned ranks, unsigned workers, bool settled, unsigned *least)
{
    setup(CACHE_BYTES, 100, 95, 4);
    for (unsigned i = 0; i < N; i++) {
        char *k = shard_name(i);
        put(k, SHARD);
        free(k);
    }
    static unsigned orders[4][N];
    uint32_t rnd = 4242;
    for (int e = 0; e < 4; e++) {
        for (unsigned i = 0; i < N; i++)
            orders[e][i] = e ? orders[e - 1][i] : i;
        for (unsigned i = N - 1; i > 0; i--) {
            rnd = rnd * 1103515245u + 12345u;
            unsigned j = (rnd >> 8) % (i + 1);
            unsigned t = orders[e][i];
            orders[e][i] = orders[e][j];
            orders[e][j] = t;
        }
    }
    struct cache_stats s0, s1;
    uint64_t held = 0;
    for (int e = 0; e < 4; e++) {
        /* counted from the end of epoch 0, when its staging has settled:
         * not after the next hint, whose staging may or may not have begun */
        if (e == 1)
            cache_stats_get(cache, &s0);
        for (int ahead = e == 0 ? 0 : 1; ahead <= 1 && e + ahead < 4; ahead++)
            for (unsigned r = 0; r < ranks; r++) {
                unsigned n = 0;
                char **keys = calloc(N, sizeof *keys);
                for (unsigned i = r; i < N; i += ranks)
                    keys[n++] = shard_name(orders[e + ahead][i]);
                char consumer[16];
                snprintf(consumer, sizeof consumer, "rank%u", r);
                struct cache_hint h = { .bucket = "data", .keys = keys, .n_keys = n,
                                        .ordered = true, .has_epoch = true,
                                        .epoch = (uint64_t)(e + ahead), .consumer = consumer,
                                        .stage_ahead = paced_stage_ahead };
                char id[CACHE_JOB_ID_LEN];
                CU_ASSERT_EQUAL_FATAL(cache_job_submit(cache, &h, id), 0);
            }
        note_at_open = workers > 1;
        if (workers > 1)
            read_epoch_by_loader(orders[e], ranks * workers, settled);
        for (unsigned i = 0; i < N && workers <= 1; i++) {
            if (settled)
                quiesce();
            char *k = shard_name(orders[e][i]);
            CU_ASSERT_EQUAL(read_object(k), SHARD);
            free(k);
        }
        note_at_open = false;
        quiesce();
        struct cache_stats now;
        cache_stats_get(cache, &now);
        CU_ASSERT_TRUE(now.bytes_used <= CACHE_BYTES);
        if (e == 0)
            held = now.objects;
    }
    cache_stats_get(cache, &s1);
    teardown();
    *least = belady_misses(&orders[0][0], 4 * N, N, (unsigned)held);
    return (unsigned)((s1.backend_bytes - s0.backend_bytes) / SHARD);
}

/* One configuration of run_paced. */
struct paced_case {
    unsigned ranks, workers;
    bool settled;
};

/* Runs each case (hints carrying paced_stage_ahead): got[c], the cold
 * reads of epochs 1-3, printed beside least[c], Belady's count for them. */
static void run_paced_cases(const char *title, const struct paced_case *cases, size_t n,
                            unsigned *got, unsigned *least)
{
    printf("\n    cold reads in epochs 1-3, %s (Belady's rule needs):\n", title);
    for (size_t c = 0; c < n; c++) {
        const struct paced_case *k = &cases[c];
        got[c] = run_paced(k->ranks, k->workers, k->settled, &least[c]);
        printf("    %u rank(s) x %u worker(s), %-13s %u (%u)\n", k->ranks, k->workers,
               k->settled ? "settled reads" : "back to back", got[c], least[c]);
    }
}

/* The stager stages an object only in place of one Belady's rule would
 * evict for it anyway: with hints one epoch ahead the later epochs cost the
 * fewest cold reads any cache of this size can make, however the reads are
 * timed against the fills and the stager. One rank: at most one more (the
 * next epoch's first objects are staged before the current epoch ends, for
 * the reader's sake). Two ranks: their reads of one step share a place on
 * the use clock, where Belady's count knows which of the two comes first:
 * 2 % more at most (measured: 0-3 of 243). Before, a stager far ahead
 * evicted objects needed sooner than ones the reader was about to pass:
 * 251 where 243 suffice with settled reads, 243-244 back to back, so the
 * count depended on the machine's pace. */
static void hints_ahead_cost_what_belady_costs_however_reads_are_timed(void)
{
    static const struct paced_case cases[] = { { 1, 1, true }, { 1, 1, false },
                                               { 2, 1, true }, { 2, 1, false } };
    enum { n = sizeof cases / sizeof cases[0] };
    unsigned got[n], least[n];
    run_paced_cases("hints one epoch ahead", cases, n, got, least);
    for (size_t c = 0; c < n; c++) {
        CU_ASSERT_TRUE(got[c] >= least[c]);   /* nothing beats Belady: the count is real */
        CU_ASSERT_TRUE(got[c] <= (cases[c].ranks == 1 ? least[c] + 1 : least[c] + least[c] / 50));
    }
}

/* A data loader with N workers per rank: reads of a hint arrive
 * interleaved and out of order by up to N, several in flight at once. The
 * hint's reader is still one reader going in order: nothing a worker is
 * about to read is evicted or fetched twice, and the cold reads stay at
 * Belady's count for the hinted order. */
static void loader_workers_cost_what_belady_costs(void)
{
    static const struct paced_case cases[] = { { 1, 4, false }, { 1, 8, false },
                                               { 1, 4, true }, { 2, 4, false } };
    enum { n = sizeof cases / sizeof cases[0] };
    unsigned got[n], least[n];
    run_paced_cases("loader workers, hints one epoch ahead", cases, n, got, least);
    for (size_t c = 0; c < n; c++)
        CU_ASSERT_TRUE(got[c] <= least[c] + least[c] / 50);
}

/* With "stage_ahead" the stager stages near the readers without waiting
 * for Belady's moment, several fills at once, evicting only objects the
 * queued next epoch needs (for a loader that fetches ahead: the reader's
 * wait is bench/epochs.py's to measure). The cold reads stay at Belady's
 * count, at most 2 over it, however the reads are timed and for four
 * ranks too (measured: 0, once 1, in 18 runs of each case, three at once
 * under sanitizers). Two causes of more, each asserted here: stage_ahead
 * counted in uses of the clock (one read of every rank each), so four
 * ranks asking for 64 staged 256 objects ahead, more than the cache holds
 * (256 cold reads where 243 suffice); and a staging fill that found its
 * room taken by reader fills when its worker got to it evicted an object
 * needed sooner than its own key (fill_worker.c evicts_sooner; 246-248). */
static void stage_ahead_stays_near_belady(void)
{
    static const struct paced_case cases[] = { { 1, 1, true }, { 1, 1, false },
                                               { 1, 4, false }, { 2, 4, false },
                                               { 4, 1, true }, { 4, 4, false } };
    enum { n = sizeof cases / sizeof cases[0] };
    unsigned got[n], least[n];
    paced_stage_ahead = 64;
    run_paced_cases("stage_ahead 64, hints one epoch ahead", cases, n, got, least);
    paced_stage_ahead = 0;
    for (size_t c = 0; c < n; c++) {
        CU_ASSERT_TRUE(got[c] >= least[c]);
        CU_ASSERT_TRUE(got[c] <= least[c] + 2);
    }
}

/* At debug level the stager says what it starts and why, and eviction what
 * goes with its next use: the trace bench/results/loaders/README.md reads.
 * An ordered hint over twice the cache, read in order: the first keys go
 * into free space, later ones in place of what was read, and objects leave. */
static void debug_log_names_stagings_and_evictions(void)
{
    char dir[] = "/tmp/sg-pf-log-XXXXXX", path[64];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/debug.log", dir);
    setup(CACHE_BYTES, 100, 95, 4);
    for (unsigned i = 0; i < N; i++) {
        char *k = shard_name(i);
        put(k, SHARD);
        free(k);
    }
    enum log_level old = log_get_level();
    CU_ASSERT_EQUAL_FATAL(log_open_file(path), 0);
    log_set_level(LOG_LVL_DEBUG);
    unsigned order[N];
    for (unsigned i = 0; i < N; i++)
        order[i] = i;
    submit_epoch(order, N, 0, 0);
    for (unsigned i = 0; i < N; i++) {
        quiesce();
        char *k = shard_name(i);
        CU_ASSERT_EQUAL(read_object(k), SHARD);
        free(k);
    }
    quiesce();
    log_set_level(old);
    log_close_file();
    teardown();
    FILE *f = fopen(path, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[1024];
    unsigned free_space = 0, belady = 0, evicted = 0;
    while (fgets(line, sizeof line, f)) {
        free_space += strstr(line, "DEBUG prefetch: job ") && strstr(line, " stages data/") &&
                      strstr(line, ": free space") != NULL;
        belady += strstr(line, " stages data/") && strstr(line, ": at Belady's moment") != NULL;
        evicted += strstr(line, "DEBUG cache: evicted data/") && strstr(line, "next use ") != NULL;
    }
    fclose(f);
    unlink(path);
    rmdir(dir);
    printf("\n    debug lines: %u staged into free space, %u at Belady's moment, %u evicted\n",
           free_space, belady, evicted);
    CU_ASSERT_TRUE(free_space > 0);
    CU_ASSERT_TRUE(belady > 0);
    CU_ASSERT_TRUE(evicted > 0);
}

static void ordered_hints_read_dataset_minus_cache_per_epoch_lru_does_not(void)
{
    uint64_t lru[4], hinted[4], ahead[4];
    unsigned lru_first[4], hinted_first[4], ahead_first[4];
    run_epochs(NO_HINTS, lru, lru_first);
    run_epochs(HINT_AT_START, hinted, hinted_first);
    run_epochs(HINT_AHEAD, ahead, ahead_first);
    printf("\n    cold MiB per epoch (dataset 10 MiB, cache 5 MiB), hits among the first %d reads:\n",
           FIRST);
    for (int e = 0; e < 4; e++)
        printf("    epoch %d: LRU %6.1f %u   hint at start %6.1f %u   hint ahead %6.1f %u\n", e,
               (double)lru[e] / MIB, lru_first[e], (double)hinted[e] / MIB, hinted_first[e],
               (double)ahead[e] / MIB, ahead_first[e]);
    for (int e = 1; e < 4; e++) {
        /* (dataset - cache) = 80 shards, and 10 % slack */
        CU_ASSERT_TRUE(hinted[e] <= HALF_SLACK);
        CU_ASSERT_TRUE(hinted[e] < lru[e]);
        CU_ASSERT_TRUE(ahead[e] <= HALF_SLACK);
        /* declared an epoch ahead, the start of the next epoch is staged
         * before the reader gets there */
        CU_ASSERT_EQUAL(ahead_first[e], FIRST);
    }
    uint64_t sum_lru = lru[1] + lru[2] + lru[3], sum_hint = hinted[1] + hinted[2] + hinted[3];
    CU_ASSERT_TRUE(sum_hint * 10 < sum_lru * 8);   /* clearly less: at least 20 % */
}

int register_tests(void);
int register_tests(void)
{
    (void)noop;
    CU_pSuite s = CU_add_suite("cache_prefetch", NULL, NULL);
    if (!s)
        return -1;
    CU_add_test(s, "unordered_hint_stages_everything_then_reads_are_hits",
                unordered_hint_stages_everything_then_reads_are_hits);
    CU_add_test(s, "missing_keys_are_reported_and_the_rest_staged",
                missing_keys_are_reported_and_the_rest_staged);
    CU_add_test(s, "cancel_stops_staging", cancel_stops_staging);
    CU_add_test(s, "next_epoch_hint_queues_behind_the_current_one",
                next_epoch_hint_queues_behind_the_current_one);
    CU_add_test(s, "out_of_order_reads_keep_their_place", out_of_order_reads_keep_their_place);
    CU_add_test(s, "a_hint_sent_before_the_reader_fills_the_cache",
                a_hint_sent_before_the_reader_fills_the_cache);
    CU_add_test(s, "ordered_hints_read_dataset_minus_cache_per_epoch_lru_does_not",
                ordered_hints_read_dataset_minus_cache_per_epoch_lru_does_not);
    CU_add_test(s, "two_ranks_in_step_are_staged_alike", two_ranks_in_step_are_staged_alike);
    CU_add_test(s, "hints_ahead_cost_what_belady_costs_however_reads_are_timed",
                hints_ahead_cost_what_belady_costs_however_reads_are_timed);
    CU_add_test(s, "loader_workers_cost_what_belady_costs", loader_workers_cost_what_belady_costs);
    CU_add_test(s, "stage_ahead_stays_near_belady", stage_ahead_stays_near_belady);
    CU_add_test(s, "debug_log_names_stagings_and_evictions",
                debug_log_names_stagings_and_evictions);
    return CU_get_error() == CUE_SUCCESS ? 0 : -1;
}
