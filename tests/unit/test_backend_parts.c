/* tests/unit/test_backend_parts.c - the part boundaries the posix store keeps
 * with a multipart object (backend/parts.c): the run-length encoding both
 * ways as tables (uniform parts, a short last part, irregular sizes, the
 * 10000-part limit, what does not fit), the lookup of each part and of one
 * beyond the last, malformed lists refused; the ETag's part count and the
 * digest of a Complete's parts list. */
#include "backend.h"
#include "posix_int.h"
#include "cu.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024ull * 1024)

static void encodes_as_runs(void)
{
    static const struct {
        uint64_t sizes[6];
        size_t n;
        const char *want;
    } cases[] = {
        { { 8 * MIB }, 1, "SGP1 8388608*1" },
        { { 8 * MIB, 8 * MIB, 8 * MIB, 1000 }, 4, "SGP1 8388608*3,1000*1" },
        { { 5 * MIB + 1, 5 * MIB, 1000 }, 3, "SGP1 5242881*1,5242880*1,1000*1" },
        { { 5 * MIB, 6 * MIB, 5 * MIB, 5 * MIB }, 4, "SGP1 5242880*1,6291456*1,5242880*2" },
        { { 0 }, 1, "SGP1 0*1" },
    };
    for (size_t i = 0; i < CU_N(cases); i++) {
        char buf[256];
        size_t len = posix_parts_encode(cases[i].sizes, cases[i].n, buf, sizeof buf);
        CU_ASSERT_EQUAL(len, strlen(cases[i].want));
        CU_ASSERT_NSTRING_EQUAL(buf, cases[i].want, strlen(cases[i].want));
    }
}

static void refuses_what_does_not_fit(void)
{
    uint64_t sizes[3] = { 1, 2, 3 };
    char buf[16];
    CU_ASSERT_EQUAL(posix_parts_encode(sizes, 0, buf, sizeof buf), 0);
    CU_ASSERT_EQUAL(posix_parts_encode(sizes, 3, buf, 10), 0);   /* "SGP1 1*1,2" */
    CU_ASSERT_EQUAL(posix_parts_encode(sizes, 3, buf, sizeof buf), 0);
    CU_ASSERT_EQUAL(posix_parts_encode(sizes, BACKEND_MAX_PARTS + 1, buf, sizeof buf), 0);
    /* 10000 irregular parts are far over the xattr's cap */
    uint64_t *many = malloc(BACKEND_MAX_PARTS * sizeof *many);
    CU_ASSERT_PTR_NOT_NULL_FATAL(many);
    for (size_t i = 0; i < BACKEND_MAX_PARTS; i++)
        many[i] = 5 * MIB + i;
    char big[POSIX_PARTS_MAX];
    CU_ASSERT_EQUAL(posix_parts_encode(many, BACKEND_MAX_PARTS, big, sizeof big), 0);
    /* 10000 equal parts are one run */
    for (size_t i = 0; i < BACKEND_MAX_PARTS; i++)
        many[i] = 5 * MIB;
    size_t len = posix_parts_encode(many, BACKEND_MAX_PARTS, big, sizeof big);
    CU_ASSERT_EQUAL(len, strlen("SGP1 5242880*10000"));
    struct backend_part_range r;
    CU_ASSERT_EQUAL(posix_parts_locate(big, len, 10000, &r), 0);
    CU_ASSERT_EQUAL(r.first, 9999 * 5 * MIB);
    CU_ASSERT_EQUAL(r.parts_count, 10000);
    free(many);
}

static void locates_each_part_and_one_beyond(void)
{
    const uint64_t sizes[] = { 8 * MIB, 8 * MIB, 5 * MIB + 7, 5 * MIB + 7, 12 };
    char buf[256];
    size_t len = posix_parts_encode(sizes, CU_N(sizes), buf, sizeof buf);
    CU_ASSERT_FATAL(len > 0);
    uint64_t off = 0, total = 0;
    for (size_t i = 0; i < CU_N(sizes); i++)
        total += sizes[i];
    for (size_t i = 0; i < CU_N(sizes); i++) {
        struct backend_part_range r;
        memset(&r, 0, sizeof r);
        CU_ASSERT_EQUAL(posix_parts_locate(buf, len, (unsigned)i + 1, &r), 0);
        CU_ASSERT_EQUAL(r.first, off);
        CU_ASSERT_EQUAL(r.size, sizes[i]);
        CU_ASSERT_EQUAL(r.parts_count, CU_N(sizes));
        CU_ASSERT_EQUAL(r.total, total);
        off += sizes[i];
    }
    struct backend_part_range r;
    CU_ASSERT_EQUAL(posix_parts_locate(buf, len, (unsigned)CU_N(sizes) + 1, &r), 1);
    CU_ASSERT_EQUAL(r.parts_count, CU_N(sizes));
    CU_ASSERT_EQUAL(r.total, total);
    CU_ASSERT_EQUAL(posix_parts_locate(buf, len, 10000, &r), 1);
}

static void malformed_lists_are_refused(void)
{
    static const char *const bad[] = {
        "", "SGP1", "SGP1 ", "SGP2 1*1", "SGP1 1", "SGP1 1*", "SGP1 *1", "SGP1 1*0",
        "SGP1 1*1,", "SGP1 1*1,,2*1", "SGP1 1*1;2*1", "SGP1 -1*1", "SGP1 1*10001",
        "SGP1 5000*5000,5000*5001", "SGP1 99999999999999999999*1",
        "SGP1 18446744073709551615*2", "SGP1 1*1 ",
    };
    for (size_t i = 0; i < CU_N(bad); i++) {
        struct backend_part_range r;
        CU_ASSERT_EQUAL(posix_parts_locate(bad[i], strlen(bad[i]), 1, &r), -1);
    }
}

static void etag_gives_the_part_count(void)
{
    static const struct {
        const char *etag;
        unsigned want;
    } cases[] = {
        { "0123456789abcdef0123456789abcdef", 0 },
        { "0123456789abcdef0123456789abcdef-1", 1 },
        { "0123456789abcdef0123456789abcdef-3", 3 },
        { "0123456789abcdef0123456789abcdef-10000", 10000 },
        { "0123456789abcdef0123456789abcdef-10001", 0 },
        { "0123456789abcdef0123456789abcdef-0", 0 },
        { "0123456789abcdef0123456789abcdef-", 0 },
        { "0123456789abcdef0123456789abcdef-3x", 0 },
        { "", 0 },
    };
    for (size_t i = 0; i < CU_N(cases); i++)
        CU_ASSERT_EQUAL(backend_etag_parts(cases[i].etag), cases[i].want);
}

static void digest_ignores_quotes_and_case_only(void)
{
    struct backend_part a[2] = { { .part_no = 1, .etag = "\"ABCdef\"" },
                                 { .part_no = 2, .etag = "0123" } };
    struct backend_part b[2] = { { .part_no = 1, .etag = "abcdef" },
                                 { .part_no = 2, .etag = "\"0123\"" } };
    char da[65], db[65];
    backend_parts_digest(a, 2, da);
    backend_parts_digest(b, 2, db);
    CU_ASSERT_EQUAL(strlen(da), 64);
    CU_ASSERT_STRING_EQUAL(da, db);
    backend_parts_digest(a, 1, db);          /* fewer parts */
    CU_ASSERT_STRING_NOT_EQUAL(da, db);
    b[1].part_no = 3;                        /* another number */
    backend_parts_digest(b, 2, db);
    CU_ASSERT_STRING_NOT_EQUAL(da, db);
    b[1].part_no = 2;
    strcpy(b[1].etag, "0124");               /* another ETag */
    backend_parts_digest(b, 2, db);
    CU_ASSERT_STRING_NOT_EQUAL(da, db);
}

int register_tests(void)
{
    static const struct cu_test tests[] = {
        { "encodes_as_runs", encodes_as_runs },
        { "refuses_what_does_not_fit", refuses_what_does_not_fit },
        { "locates_each_part_and_one_beyond", locates_each_part_and_one_beyond },
        { "malformed_lists_are_refused", malformed_lists_are_refused },
        { "etag_gives_the_part_count", etag_gives_the_part_count },
        { "digest_ignores_quotes_and_case_only", digest_ignores_quotes_and_case_only },
    };
    return cu_add_suite("backend_parts", NULL, NULL, tests, CU_N(tests));
}
