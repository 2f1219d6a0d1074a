/* tests/unit/test_cache_memtier.c - the memory tier of small objects
 * (cache/memtier.c) on its own: a small tier is one exact recency list; a
 * large one is split into shards that together stay within the capacity and
 * keep the most recently used buffers; a buffer a shard cannot hold is not
 * kept; and hits and puts from several threads at once never hand out a
 * wrong or freed buffer (run under ASan/UBSan and TSan builds). */
#include <CUnit/CUnit.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "cache_int.h"
#include "cu.h"

enum { KIB = 1024, MIB = 1024 * 1024, BODY = 4096 };

/* A buffer of len bytes that says which id it is for. */
static struct cache_blob *blob_for(uint64_t id, size_t len)
{
    struct cache_blob *b = cache_blob_new(len);
    if (b) {
        memset(cache_blob_data(b), (int)(id & 0xff), len);
        memcpy(cache_blob_data(b), &id, sizeof id);
    }
    return b;
}

static bool holds(struct cache_mem *m, uint64_t id)
{
    struct cache_blob *b = cache_mem_get(m, id);
    if (!b)
        return false;
    uint64_t got;
    memcpy(&got, cache_blob_data(b), sizeof got);
    CU_ASSERT_EQUAL(got, id);
    cache_blob_unref(b);
    return true;
}

static void put_new(struct cache_mem *m, uint64_t id, size_t len)
{
    struct cache_blob *b = blob_for(id, len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    cache_mem_put(m, id, b);
    cache_blob_unref(b);   /* the tier holds its own reference */
}

static void a_small_tier_forgets_the_least_recently_used_first(void)
{
    struct cache_mem *m = cache_mem_new(64 * KIB, BODY);   /* one list: under 2 MiB */
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    for (uint64_t id = 1; id <= 40; id++) {
        put_new(m, id, BODY);
        CU_ASSERT_TRUE(holds(m, 1));   /* id 1 stays the most recently used */
    }
    uint64_t hits, bytes, objects;
    cache_mem_stats(m, &hits, &bytes, &objects);
    CU_ASSERT(bytes <= 64 * KIB);
    CU_ASSERT(objects >= 13 && objects < 40);
    CU_ASSERT_TRUE(holds(m, 1));
    CU_ASSERT_TRUE(holds(m, 40));
    CU_ASSERT_FALSE(holds(m, 2));   /* the oldest not used again went first */
    CU_ASSERT_FALSE(holds(m, 20));
    cache_mem_free(m);
}

static void a_large_tier_stays_within_its_capacity_and_keeps_the_recent(void)
{
    const uint64_t cap = 16 * MIB;   /* 16 shards of 1 MiB */
    struct cache_mem *m = cache_mem_new(cap, BODY);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    const uint64_t n = 3 * cap / BODY;   /* three times what fits */
    for (uint64_t id = 1; id <= n; id++)
        put_new(m, id, BODY);
    uint64_t hits, bytes, objects;
    cache_mem_stats(m, &hits, &bytes, &objects);
    CU_ASSERT(bytes <= cap);
    /* each shard fills to within one buffer of its share */
    CU_ASSERT(bytes > cap - 16 * (BODY + 64));
    CU_ASSERT(objects > cap / (BODY + 64) - 16);
    unsigned recent = 0, old = 0;
    for (uint64_t id = n - 99; id <= n; id++)
        recent += holds(m, id);
    for (uint64_t id = 1; id <= 100; id++)
        old += holds(m, id);
    CU_ASSERT_EQUAL(recent, 100);   /* ~6 per shard, far below a shard's share */
    CU_ASSERT_EQUAL(old, 0);
    cache_mem_stats(m, &hits, &bytes, &objects);
    CU_ASSERT_EQUAL(hits, 100);
    cache_mem_free(m);
}

static void a_buffer_larger_than_a_shard_is_not_kept(void)
{
    struct cache_mem *sharded = cache_mem_new(16 * MIB, BODY);
    struct cache_mem *whole = cache_mem_new(MIB + MIB / 2, BODY);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sharded);
    CU_ASSERT_PTR_NOT_NULL_FATAL(whole);
    put_new(sharded, 7, MIB + MIB / 4);
    put_new(whole, 7, MIB + MIB / 4);
    CU_ASSERT_FALSE(holds(sharded, 7));
    CU_ASSERT_TRUE(holds(whole, 7));
    cache_mem_free(sharded);
    cache_mem_free(whole);
}

struct racer {
    struct cache_mem *m;
    unsigned seed;
    uint64_t hits, wrong;
};

static void *race(void *arg)
{
    struct racer *r = arg;
    for (int i = 0; i < 20000; i++) {
        r->seed = r->seed * 1103515245u + 12345u;
        uint64_t id = 1 + (r->seed >> 8) % 1500;   /* more than the 4 MiB tier holds */
        struct cache_blob *b = cache_mem_get(r->m, id);
        if (!b) {
            b = blob_for(id, BODY);
            if (!b)
                continue;
            cache_mem_put(r->m, id, b);
        } else {
            r->hits++;
        }
        uint64_t got;
        memcpy(&got, cache_blob_data(b), sizeof got);
        const uint8_t *d = cache_blob_data(b);
        if (got != id || d[BODY - 1] != (uint8_t)(id & 0xff))
            r->wrong++;
        cache_blob_unref(b);
    }
    return NULL;
}

static void threads_hit_and_put_at_once_without_a_wrong_buffer(void)
{
    struct cache_mem *m = cache_mem_new(4 * MIB, BODY);   /* 4 shards */
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    enum { T = 4 };
    struct racer r[T];
    pthread_t th[T];
    for (unsigned i = 0; i < T; i++) {
        r[i] = (struct racer){ m, 17u * (i + 1), 0, 0 };
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, race, &r[i]), 0);
    }
    uint64_t want_hits = 0;
    for (unsigned i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        CU_ASSERT_EQUAL(r[i].wrong, 0);
        want_hits += r[i].hits;
    }
    uint64_t hits, bytes, objects;
    cache_mem_stats(m, &hits, &bytes, &objects);
    CU_ASSERT_EQUAL(hits, want_hits);
    CU_ASSERT(want_hits > 0);
    CU_ASSERT(bytes <= 4 * MIB);
    cache_mem_free(m);
}

int register_tests(void)
{
    static const struct cu_test tests[] = {
        { "a_small_tier_forgets_the_least_recently_used_first",
          a_small_tier_forgets_the_least_recently_used_first },
        { "a_large_tier_stays_within_its_capacity_and_keeps_the_recent",
          a_large_tier_stays_within_its_capacity_and_keeps_the_recent },
        { "a_buffer_larger_than_a_shard_is_not_kept", a_buffer_larger_than_a_shard_is_not_kept },
        { "threads_hit_and_put_at_once_without_a_wrong_buffer",
          threads_hit_and_put_at_once_without_a_wrong_buffer },
    };
    return cu_add_suite("cache_memtier", NULL, NULL, tests, CU_N(tests));
}
