/* tests/unit/test_cache_engine.c - the cache tier's I/O engines and its
 * cache directory's healing:
 *   - both engines behind engine_int.h write tagged pieces at offsets, report
 *     failed writes as results, and fdatasync; the pread/pwrite engine's
 *     writer thread keeps at most `depth` writes and never hangs a wait;
 *   - fills and hits run on the pread/pwrite engine (cache.engine "threads")
 *     exactly as on io_uring: streaming, single flight, publish, hit;
 *   - a cache directory that cannot be used at open does not fail the open:
 *     reads go around the cache, staging reports a cache-side error with the
 *     reason (never one that blames the object), cache_ready says why; once
 *     the directory can be used, caching starts;
 *   - a cache directory deleted under a running cache is recreated, its index
 *     dropped, and fills resume into the new directory. */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "cache.h"
#include "cache_int.h"
#include "engine_int.h"

/* ---- a waiter that blocks the test thread until the cache resumes it ---- */

struct tw {
    struct cache_waiter w;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int suspended, resumed;
};

static void tw_suspend(void *arg)
{
    struct tw *t = arg;
    pthread_mutex_lock(&t->mu);
    t->suspended++;
    pthread_mutex_unlock(&t->mu);
}

static void tw_resume(void *arg)
{
    struct tw *t = arg;
    pthread_mutex_lock(&t->mu);
    t->resumed++;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

static void tw_init(struct tw *t)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->w.suspend = tw_suspend;
    t->w.resume = tw_resume;
    t->w.arg = t;
}

static void tw_wait(struct tw *t)
{
    pthread_mutex_lock(&t->mu);
    while (t->resumed < t->suspended)
        pthread_cond_wait(&t->cv, &t->mu);
    pthread_mutex_unlock(&t->mu);
}

static void tw_destroy(struct tw *t)
{
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
}

/* ---- fixture: a posix store with one bucket and a cache over it ---- */

static char data_dir[64], base_dir[64], cache_dir[128];
static struct backend *cold;
static struct cache *cache;

static void rm_rf(const char *dir)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

static unsigned char *pattern(size_t n, unsigned seed)
{
    unsigned char *p = malloc(n ? n : 1);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (unsigned char)x;
    }
    return p;
}

static void put_object(const char *key, const void *p, size_t n)
{
    struct backend_put *bp;
    CU_ASSERT_EQUAL_FATAL(backend_put_begin(cold, "bkt", key, &bp), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(backend_put_write(bp, p, n), BACKEND_OK);
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    unsigned char d[16];
    unsigned dl;
    EVP_Digest(p, n, d, &dl, EVP_md5(), NULL);
    for (int i = 0; i < 16; i++)
        snprintf(m.etag + 2 * i, 3, "%02x", d[i]);
    CU_ASSERT_EQUAL_FATAL(backend_put_commit(bp, &m, NULL), BACKEND_OK);
    obj_meta_clear(&m);
}

/* A cold store and a cache over dir (relative to base_dir: "" = base_dir). */
static void setup(const char *sub)
{
    strcpy(data_dir, "/tmp/sg-ce-data-XXXXXX");
    strcpy(base_dir, "/tmp/sg-ce-cache-XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(data_dir));
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(base_dir));
    snprintf(cache_dir, sizeof cache_dir, "%s%s", base_dir, sub);
    struct backend_posix_conf pc = { .root = data_dir };
    CU_ASSERT_EQUAL_FATAL(backend_posix_open(&pc, &cold), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(backend_bucket_create(cold, "bkt"), BACKEND_OK);
}

static void open_cache(enum cache_engine engine)
{
    struct cache_conf cc = { .dir = cache_dir, .capacity = 64u << 20, .high_pct = 90,
                             .low_pct = 80, .fill_workers = 2, .wait_timeout_ms = 10000,
                             .default_consistency = CACHE_IMMUTABLE, .engine = engine,
                             .dirwatch_ms = 20 };
    CU_ASSERT_EQUAL_FATAL(cache_open(&cc, cold, &cache), 0);
}

static void teardown(void)
{
    cache_close(cache);
    cache = NULL;
    backend_close(cold);
    rm_rf(data_dir);
    rm_rf(base_dir);
}

static enum cache_status open_wait(const char *key, struct obj_meta *m, struct cache_obj **o,
                                   enum backend_status *bst)
{
    struct tw t;
    tw_init(&t);
    enum cache_status st;
    while ((st = cache_obj_open(cache, "bkt", key, &t.w, m, bst, o)) == CACHE_AGAIN)
        tw_wait(&t);
    tw_destroy(&t);
    return st;
}

/* Reads key whole through the cache; true when the bytes are src's. */
static bool read_matches(const char *key, const unsigned char *src, size_t n)
{
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    struct cache_obj *o = NULL;
    enum backend_status bst;
    enum cache_status st = open_wait(key, &m, &o, &bst);
    CU_ASSERT_EQUAL(st, CACHE_OK);
    if (st != CACHE_OK)
        return false;
    unsigned char *buf = malloc(n ? n : 1);
    struct tw t;
    tw_init(&t);
    uint64_t off = 0;
    bool ok = m.size == n;
    while (ok && off < n) {
        size_t got = 0;
        st = cache_obj_read(o, off, buf + off, (size_t)(n - off), &got, &t.w);
        if (st == CACHE_AGAIN) {
            tw_wait(&t);
            continue;
        }
        ok = st == CACHE_OK;
        off += got;
    }
    ok = ok && memcmp(buf, src, n) == 0;
    tw_destroy(&t);
    free(buf);
    cache_obj_close(o);
    obj_meta_clear(&m);
    return ok;
}

static struct cache_stats stats(void)
{
    struct cache_stats s;
    cache_stats_get(cache, &s);
    return s;
}

/* Waits (up to 10 s) until the published objects reach n. */
static bool wait_objects(uint64_t n)
{
    for (int i = 0; i < 1000; i++) {
        if (stats().objects >= n)
            return true;
        usleep(10 * 1000);
    }
    return false;
}

/* Waits (up to 10 s) until cache_ready says want. */
static bool wait_ready(bool want)
{
    char why[320];
    for (int i = 0; i < 1000; i++) {
        if (cache_ready(cache, why, sizeof why) == want)
            return true;
        usleep(10 * 1000);
    }
    return false;
}

/* Waits (up to 10 s) until the directory was taken back n times (and is up:
 * the count moves after the cache says so). */
static bool wait_resets(uint64_t n)
{
    for (int i = 0; i < 1000; i++) {
        if (stats().dir_resets >= n)
            return cache_ready(cache, NULL, 0);
        usleep(10 * 1000);
    }
    return false;
}

/* ---- the engines themselves ---- */

static void engine_round_trip(enum cache_engine kind)
{
    char path[] = "/tmp/sg-ce-file-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    struct cache_eng *e = NULL;
    CU_ASSERT_EQUAL_FATAL(cache_eng_new(kind, 3, &e), 0);
    unsigned char *a = pattern(100000, 1), *b = pattern(50000, 2);
    /* two writes in flight, completions in any order, each tagged */
    CU_ASSERT_EQUAL(cache_eng_write(e, fd, b, 50000, 100000, 7), 0);
    CU_ASSERT_EQUAL(cache_eng_write(e, fd, a, 100000, 0, 3), 0);
    bool seen3 = false, seen7 = false;
    for (int i = 0; i < 2; i++) {
        struct cache_eng_done d;
        CU_ASSERT_EQUAL_FATAL(cache_eng_wait(e, &d), 0);
        seen3 |= d.tag == 3 && d.res == 100000;
        seen7 |= d.tag == 7 && d.res == 50000;
    }
    CU_ASSERT_TRUE(seen3 && seen7);
    unsigned char *back = malloc(150000);
    CU_ASSERT_EQUAL(pread(fd, back, 150000, 0), 150000);
    CU_ASSERT_EQUAL(memcmp(back, a, 100000), 0);
    CU_ASSERT_EQUAL(memcmp(back + 100000, b, 50000), 0);
    /* the hit path's read */
    memset(back, 0, 150000);
    CU_ASSERT_EQUAL(cache_eng_pread(kind, fd, back, 1000, 100000), 1000);
    CU_ASSERT_EQUAL(memcmp(back, b, 1000), 0);
    /* a failed write is a result (the fill logs it and fails), not a hang */
    int ro = open(path, O_RDONLY);
    CU_ASSERT_EQUAL(cache_eng_write(e, ro, a, 4096, 0, 9), 0);
    struct cache_eng_done d;
    CU_ASSERT_EQUAL(cache_eng_wait(e, &d), 0);
    CU_ASSERT_EQUAL(d.tag, 9);
    CU_ASSERT_EQUAL(d.res, -EBADF);
    if (kind == CACHE_ENGINE_THREADS) {
        /* depth bounds what is held (queued, being written, not reaped), and
         * a wait with nothing queued is an error, never a hang */
        for (uint64_t t = 0; t < 3; t++)
            CU_ASSERT_EQUAL(cache_eng_write(e, fd, a, 4096, t * 4096, t), 0);
        CU_ASSERT_EQUAL(cache_eng_write(e, fd, a, 4096, 3 * 4096, 3), -EBUSY);
        for (int i = 0; i < 3; i++) {
            CU_ASSERT_EQUAL(cache_eng_wait(e, &d), 0);
            CU_ASSERT_EQUAL(d.tag, (uint64_t)i);   /* one writer: in order */
            CU_ASSERT_EQUAL(d.res, 4096);
        }
        CU_ASSERT_EQUAL(cache_eng_wait(e, &d), -EINVAL);
    }
    close(ro);
    cache_eng_free(e);
    close(fd);
    unlink(path);
    free(a);
    free(b);
    free(back);
}

static void both_engines_write_at_offsets_report_results_and_sync(void)
{
    engine_round_trip(CACHE_ENGINE_THREADS);
    /* io_uring where it works (on this suite's machines it does; in a
     * container it may not, and the threads engine is what runs there) */
    if (cache_eng_probe_uring() == 0)
        engine_round_trip(CACHE_ENGINE_URING);
    else
        fprintf(stderr, "\n  (io_uring does not work here: only the threads engine ran)\n");
    CU_ASSERT_STRING_EQUAL(cache_eng_name(CACHE_ENGINE_THREADS), "threads");
    CU_ASSERT_STRING_EQUAL(cache_eng_name(CACHE_ENGINE_URING), "io_uring");
}

/* ---- fills and hits on the pread/pwrite engine ---- */

struct reader_arg {
    const char *key;
    const unsigned char *src;
    size_t n;
    bool ok;
};

static void *reader(void *p)
{
    struct reader_arg *a = p;
    a->ok = read_matches(a->key, a->src, a->n);
    return NULL;
}

static void threads_engine_fills_streams_shares_and_hits(void)
{
    setup("");
    open_cache(CACHE_ENGINE_THREADS);
    CU_ASSERT_STRING_EQUAL(stats().engine, "threads");
    size_t n = 5 * 1024 * 1024 + 321;   /* several buffers and a tail */
    unsigned char *src = pattern(n, 5);
    put_object("big", src, n);
    /* four readers of one cold object: one fill, streamed to all */
    pthread_t th[4];
    struct reader_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct reader_arg){ "big", src, n, false };
        pthread_create(&th[i], NULL, reader, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CU_ASSERT_TRUE(args[i].ok);
    }
    CU_ASSERT_TRUE(wait_objects(1));
    struct cache_stats s = stats();
    CU_ASSERT_EQUAL(s.fills_started, 1);
    CU_ASSERT_EQUAL(s.fills_failed, 0);
    CU_ASSERT_EQUAL(s.backend_bytes, n);
    CU_ASSERT_TRUE(read_matches("big", src, n));   /* a hit */
    CU_ASSERT_EQUAL(stats().hits, s.hits + 1);
    CU_ASSERT_EQUAL(stats().backend_bytes, n);
    /* an empty object, and a tiny one (the inline hit path) */
    put_object("empty", "", 0);
    put_object("tiny", "abc", 3);
    CU_ASSERT_TRUE(read_matches("empty", (const unsigned char *)"", 0));
    CU_ASSERT_TRUE(read_matches("tiny", (const unsigned char *)"abc", 3));
    CU_ASSERT_TRUE(wait_objects(3));
    CU_ASSERT_TRUE(read_matches("tiny", (const unsigned char *)"abc", 3));
    free(src);
    teardown();
}

/* ---- the cache directory ---- */

static int count_entries(const char *dir)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "find '%s' -type f | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1)
            n = -1;
        pclose(p);
    }
    return n;
}

static void job_wait_final(const char *id, struct cache_job_info *ji)
{
    for (int i = 0; i < 1000; i++) {
        CU_ASSERT_EQUAL_FATAL(cache_job_get(cache, "bkt", id, ji), 0);
        if (ji->state == CACHE_JOB_DONE || ji->state == CACHE_JOB_FAILED ||
            ji->state == CACHE_JOB_CANCELLED)
            return;
        cache_job_info_clear(ji);
        usleep(10 * 1000);
    }
    CU_FAIL("the job did not end within 10 s");
}

static void unusable_directory_degrades_to_cold_reads_then_heals(void)
{
    /* the cache directory's parent is a regular file: ENOTDIR */
    setup("/blocker/cache");
    char blocker[128];
    snprintf(blocker, sizeof blocker, "%s/blocker", base_dir);
    FILE *f = fopen(blocker, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fclose(f);
    open_cache(CACHE_ENGINE_AUTO);   /* the open does not fail */
    char why[320];
    CU_ASSERT_FALSE(cache_ready(cache, why, sizeof why));
    CU_ASSERT_PTR_NOT_NULL(strstr(why, cache_dir));
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "ENOTDIR"));

    /* a read goes around the cache */
    put_object("k", "hello", 5);
    struct tw t;
    tw_init(&t);
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    struct cache_obj *o = NULL;
    enum backend_status bst;
    CU_ASSERT_EQUAL(cache_obj_open(cache, "bkt", "k", &t.w, &m, &bst, &o), CACHE_IO);
    CU_ASSERT_EQUAL(t.suspended, 0);
    tw_destroy(&t);

    /* staging fails on the cache side, with the reason */
    struct cache_hint h = { .bucket = "bkt", .n_keys = 1 };
    h.keys = calloc(1, sizeof *h.keys);
    h.keys[0] = strdup("k");
    char id[CACHE_JOB_ID_LEN];
    CU_ASSERT_EQUAL_FATAL(cache_job_submit(cache, &h, id), 0);
    struct cache_job_info ji;
    job_wait_final(id, &ji);
    CU_ASSERT_EQUAL(ji.failed, 1);
    CU_ASSERT_EQUAL_FATAL(ji.n_errors, 1);
    CU_ASSERT_EQUAL(ji.errors[0].cst, CACHE_IO);
    CU_ASSERT_NOT_EQUAL(ji.errors[0].st, BACKEND_TOO_LARGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(ji.errors[0].msg, cache_dir));
    cache_job_info_clear(&ji);

    /* the directory becomes usable: the watcher takes it, caching starts */
    CU_ASSERT_EQUAL(unlink(blocker), 0);
    CU_ASSERT_TRUE_FATAL(wait_ready(true));
    CU_ASSERT_TRUE(read_matches("k", (const unsigned char *)"hello", 5));
    CU_ASSERT_TRUE(wait_objects(1));
    uint64_t hits = stats().hits;
    CU_ASSERT_TRUE(read_matches("k", (const unsigned char *)"hello", 5));
    CU_ASSERT_EQUAL(stats().hits, hits + 1);
    teardown();
}

static void deleted_directory_is_recreated_and_fills_resume(void)
{
    setup("/cache");
    open_cache(CACHE_ENGINE_AUTO);
    CU_ASSERT_TRUE(cache_ready(cache, NULL, 0));
    size_t n = 300000;
    unsigned char *src = pattern(n, 9);
    put_object("a", src, n);
    put_object("b", src, n / 2);
    CU_ASSERT_TRUE(read_matches("a", src, n));
    CU_ASSERT_TRUE(read_matches("b", src, n / 2));
    CU_ASSERT_TRUE(wait_objects(2));

    rm_rf(cache_dir);
    /* the watcher notices within its interval (20 ms here), recreates the
     * directory and drops the index: no entry is left to point at a file
     * that is gone */
    CU_ASSERT_TRUE_FATAL(wait_resets(1));
    CU_ASSERT_EQUAL(stats().objects, 0);
    struct stat st;
    CU_ASSERT_EQUAL(stat(cache_dir, &st), 0);
    struct cache_stats s0 = stats();
    CU_ASSERT_TRUE(read_matches("a", src, n));   /* a miss: filled again */
    CU_ASSERT_TRUE(wait_objects(1));
    struct cache_stats s1 = stats();
    CU_ASSERT_EQUAL(s1.fills_started, s0.fills_started + 1);
    CU_ASSERT_EQUAL(s1.fills_failed, s0.fills_failed);
    CU_ASSERT_TRUE(read_matches("a", src, n));   /* and a hit from the new directory */
    CU_ASSERT_EQUAL(stats().hits, s1.hits + 1);
    char objects[160];
    snprintf(objects, sizeof objects, "%s/objects", cache_dir);
    CU_ASSERT_EQUAL(count_entries(objects), 1);
    free(src);
    teardown();
}

static void deleted_directory_seen_first_by_a_fill_is_healed_at_once(void)
{
    setup("/cache");
    struct cache_conf cc = { .dir = cache_dir, .capacity = 64u << 20, .high_pct = 90,
                             .low_pct = 80, .fill_workers = 2, .wait_timeout_ms = 10000,
                             .default_consistency = CACHE_IMMUTABLE,
                             .engine = CACHE_ENGINE_THREADS,
                             .dirwatch_ms = 3600u * 1000 };   /* no tick: only reports */
    CU_ASSERT_EQUAL_FATAL(cache_open(&cc, cold, &cache), 0);
    unsigned char *src = pattern(70000, 3);
    put_object("x", src, 70000);
    rm_rf(cache_dir);
    /* the fill cannot create its file: the reader is served around the
     * cache, and the failure wakes the watcher, which recreates the
     * directory without waiting for its (hour-long) tick */
    struct tw t;
    tw_init(&t);
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    struct cache_obj *o = NULL;
    enum backend_status bst;
    enum cache_status st;
    while ((st = cache_obj_open(cache, "bkt", "x", &t.w, &m, &bst, &o)) == CACHE_AGAIN)
        tw_wait(&t);
    CU_ASSERT_EQUAL(st, CACHE_IO);
    tw_destroy(&t);
    CU_ASSERT_TRUE_FATAL(wait_resets(1));
    struct stat sb;
    CU_ASSERT_EQUAL(stat(cache_dir, &sb), 0);
    CU_ASSERT_TRUE(read_matches("x", src, 70000));
    CU_ASSERT_TRUE(wait_objects(1));
    free(src);
    teardown();
}

int register_tests(void);
int register_tests(void)
{
    CU_pSuite s = CU_add_suite("cache_engine", NULL, NULL);
    if (!s)
        return -1;
    CU_add_test(s, "both_engines_write_at_offsets_report_results_and_sync",
                both_engines_write_at_offsets_report_results_and_sync);
    CU_add_test(s, "threads_engine_fills_streams_shares_and_hits",
                threads_engine_fills_streams_shares_and_hits);
    CU_add_test(s, "unusable_directory_degrades_to_cold_reads_then_heals",
                unusable_directory_degrades_to_cold_reads_then_heals);
    CU_add_test(s, "deleted_directory_is_recreated_and_fills_resume",
                deleted_directory_is_recreated_and_fills_resume);
    CU_add_test(s, "deleted_directory_seen_first_by_a_fill_is_healed_at_once",
                deleted_directory_seen_first_by_a_fill_is_healed_at_once);
    return CU_get_error() == CUE_SUCCESS ? 0 : -1;
}
