/* tests/unit/test_common_hash.c - FNV-1a of common/hash.h: the published
 * 64-bit test vectors, continuing a hash equals hashing at once, and the
 * pair's separator keeps ("ab", "c") and ("a", "bc") apart. */
#include <CUnit/CUnit.h>
#include <string.h>

#include "cu.h"
#include "hash.h"

static void published_vectors(void)
{
    /* FNV-1a 64 of "", "a" and "foobar" (the FNV reference test suite) */
    CU_ASSERT_EQUAL(sg_fnv1a(SG_FNV1A_SEED, "", 0), 0xcbf29ce484222325ULL);
    CU_ASSERT_EQUAL(sg_fnv1a(SG_FNV1A_SEED, "a", 1), 0xaf63dc4c8601ec8cULL);
    CU_ASSERT_EQUAL(sg_fnv1a(SG_FNV1A_SEED, "foobar", 6), 0x85944171f73967e8ULL);
}

static void continuing_equals_hashing_at_once(void)
{
    uint64_t h = sg_fnv1a(SG_FNV1A_SEED, "foo", 3);
    CU_ASSERT_EQUAL(sg_fnv1a(h, "bar", 3), sg_fnv1a(SG_FNV1A_SEED, "foobar", 6));
}

static void the_pair_separator_tells_splits_apart(void)
{
    CU_ASSERT_NOT_EQUAL(sg_fnv1a_pair("ab", 2, "c", 1), sg_fnv1a_pair("a", 1, "bc", 2));
    CU_ASSERT_EQUAL(sg_fnv1a_pair("ab", 2, "c", 1), sg_fnv1a_pair("ab", 2, "c", 1));
    /* the pair is the three parts in a row: a, 0xff, b */
    CU_ASSERT_EQUAL(sg_fnv1a_pair("ab", 2, "c", 1), sg_fnv1a(SG_FNV1A_SEED, "ab\xff" "c", 4));
}

int register_tests(void);
int register_tests(void)
{
    static const struct cu_test tests[] = {
        { "published_vectors", published_vectors },
        { "continuing_equals_hashing_at_once", continuing_equals_hashing_at_once },
        { "the_pair_separator_tells_splits_apart", the_pair_separator_tells_splits_apart },
    };
    return cu_add_suite("common_hash", NULL, NULL, tests, CU_N(tests));
}
