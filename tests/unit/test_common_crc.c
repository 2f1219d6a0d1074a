/* tests/unit/test_common_crc.c - the CRCs of common/crc.h: the published check
 * values, equality with a bit-at-a-time reference for any split and alignment
 * (every split of every length up to 300 at 16 offsets, random ones beyond),
 * the PCLMULQDQ folding of CRC-64/NVME equal to its tables on random lengths,
 * alignments, starting registers and splits, and CRC-32C handed to ISA-L in
 * pieces (it takes an int length). */
#include <CUnit/CUnit.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "common_int.h"
#include "crc.h"

#define CHECK "123456789"

static void check_values_of_123456789(void)
{
    CU_ASSERT_EQUAL(sg_crc32(0, CHECK, 9), 0xCBF43926u);
    CU_ASSERT_EQUAL(sg_crc32c(0, CHECK, 9), 0xE3069283u);
    CU_ASSERT_EQUAL(sg_crc64nvme(0, CHECK, 9), 0xAE8B14860A799888ull);
    CU_ASSERT_EQUAL(~sg_crc64nvme_table(~0ull, CHECK, 9), 0xAE8B14860A799888ull);
    CU_ASSERT_EQUAL(sg_crc32(0, "", 0), 0);
    CU_ASSERT_EQUAL(sg_crc32c(0, "", 0), 0);
    CU_ASSERT_EQUAL(sg_crc64nvme(0, "", 0), 0);
    CU_ASSERT_EQUAL(sg_crc32c(0, NULL, 0), 0);
    CU_ASSERT_EQUAL(sg_crc32(0x1234u, NULL, 0), 0x1234u);
    CU_ASSERT_EQUAL(sg_crc64nvme(0x1234u, NULL, 0), 0x1234u);
}

/* "123456789" 16 times over (144 bytes: one 128-byte stride of the folding
 * and a 16-byte block), by the tables and by the public function. */
static void crc64nvme_check_string_repeated_through_the_folding(void)
{
    char buf[144];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = CHECK[i % 9];
    uint64_t want = ~sg_crc64nvme_table(~0ull, buf, sizeof buf);
    CU_ASSERT_EQUAL(sg_crc64nvme(0, buf, sizeof buf), want);
    if (sg_crc64nvme_have_clmul())
        CU_ASSERT_EQUAL(~sg_crc64nvme_clmul(~0ull, buf, sizeof buf), want);
}

/* bit-at-a-time references */
static uint32_t ref_crc32(uint32_t poly, const uint8_t *p, size_t n)
{
    uint32_t c = ~0u;
    while (n--) {
        c ^= *p++;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ poly : c >> 1;
    }
    return ~c;
}

static uint64_t ref_crc64(const uint8_t *p, size_t n)
{
    uint64_t c = ~0ull;
    while (n--) {
        c ^= *p++;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x9A6C9329AC4BC9B5ull : c >> 1;
    }
    return ~c;
}

static void crcs_match_bitwise_reference_for_any_split_and_alignment(void)
{
    static uint8_t buf[4096 + 16];
    srand(7);
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)rand();
    for (int iter = 0; iter < 200; iter++) {
        size_t off = (size_t)rand() % 16, n = (size_t)rand() % 4096;
        size_t cut = n ? (size_t)rand() % n : 0;
        const uint8_t *p = buf + off;
        CU_ASSERT_EQUAL(sg_crc32(sg_crc32(0, p, cut), p + cut, n - cut),
                        ref_crc32(0xEDB88320u, p, n));
        CU_ASSERT_EQUAL(sg_crc32c(sg_crc32c(0, p, cut), p + cut, n - cut),
                        ref_crc32(0x82F63B78u, p, n));
        CU_ASSERT_EQUAL(sg_crc64nvme(sg_crc64nvme(0, p, cut), p + cut, n - cut),
                        ref_crc64(p, n));
    }
}

/* Every length 0..300 at every offset 0..15 (unaligned starts), cut at
 * every point (both halves of odd and even sizes, the empty ones too): the
 * CRC continued over the two pieces equals the one-shot CRC, and the
 * one-shot CRC equals the bit-at-a-time reference. */
static void every_split_of_lengths_0_to_300_at_any_offset_equals_one_shot(void)
{
    static uint8_t buf[300 + 16];
    srand(3);
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)rand();
    unsigned bad = 0;
    for (size_t off = 0; off < 16; off++) {
        for (size_t n = 0; n <= 300; n++) {
            const uint8_t *p = buf + off;
            uint32_t w32 = sg_crc32(0, p, n), w32c = sg_crc32c(0, p, n);
            uint64_t w64 = sg_crc64nvme(0, p, n);
            bad += w32 != ref_crc32(0xEDB88320u, p, n);
            bad += w32c != ref_crc32(0x82F63B78u, p, n);
            bad += w64 != ref_crc64(p, n);
            for (size_t cut = 0; cut <= n; cut++) {
                bad += sg_crc32(sg_crc32(0, p, cut), p + cut, n - cut) != w32;
                bad += sg_crc32c(sg_crc32c(0, p, cut), p + cut, n - cut) != w32c;
                bad += sg_crc64nvme(sg_crc64nvme(0, p, cut), p + cut, n - cut) != w64;
            }
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
}

static uint64_t rand64(void)
{
    return (uint64_t)rand() << 62 ^ (uint64_t)rand() << 31 ^ (uint64_t)rand();
}

/* Lengths around the strides (0..300: below, at and just past 128 and 16)
 * and up to 64 KiB, offsets 0..63, any starting register, split in up to
 * three calls: the folding and the tables agree everywhere. */
static void crc64nvme_clmul_equals_table_on_random_lengths_alignments_splits(void)
{
    enum { MAX = 65536 + 64 };
    uint8_t *buf = malloc(MAX);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    srand(11);
    for (size_t i = 0; i < MAX; i++)
        buf[i] = (uint8_t)rand();
    bool clmul = sg_crc64nvme_have_clmul();
    if (!clmul)
        fprintf(stderr, "\n  this CPU has no PCLMULQDQ: sg_crc64nvme runs on the tables, "
                "the folding is not exercised here\n");
    unsigned mismatches = 0;
    for (int iter = 0; iter < 3000; iter++) {
        size_t off = (size_t)rand() % 64;
        size_t n = iter % 2 ? (size_t)rand() % 301 : (size_t)rand() % 65537;
        size_t c1 = n ? (size_t)rand() % (n + 1) : 0;
        size_t c2 = c1 + (n - c1 ? (size_t)rand() % (n - c1 + 1) : 0);
        const uint8_t *p = buf + off;
        uint64_t reg = iter % 3 ? rand64() : ~0ull;
        uint64_t want = sg_crc64nvme_table(reg, p, n);
        if (clmul) {
            uint64_t got = sg_crc64nvme_clmul(reg, p, c1);
            got = sg_crc64nvme_clmul(got, p + c1, c2 - c1);
            got = sg_crc64nvme_clmul(got, p + c2, n - c2);
            mismatches += got != want;
            mismatches += sg_crc64nvme_clmul(reg, p, n) != want;
        }
        /* the public function, on the inverted register */
        uint64_t pub = sg_crc64nvme(sg_crc64nvme(~reg, p, c1), p + c1, n - c1);
        mismatches += pub != ~want;
    }
    CU_ASSERT_EQUAL(mismatches, 0);
    free(buf);
}

/* ISA-L's crc32_iscsi takes an int length, so sg_crc32c hands it pieces
 * (of 1 GiB): any piece size gives the CRC of the whole. (A real 2 GiB call
 * costs half a million page faults: tens of seconds on a loaded machine.) */
static void crc32c_in_pieces_of_any_size_equals_one_call(void)
{
    static uint8_t buf[10000];
    srand(5);
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)rand();
    static const size_t pieces[] = { 1, 2, 7, 16, 64, 4095, 4096, 9999, 10000, 10001 };
    uint32_t whole = sg_crc32c(0, buf, sizeof buf);
    CU_ASSERT_EQUAL(whole, ref_crc32(0x82F63B78u, buf, sizeof buf));
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++)
        CU_ASSERT_EQUAL(sg_crc32c_pieces(0, buf, sizeof buf, pieces[i]), whole);
    CU_ASSERT_EQUAL(sg_crc32c_pieces(0x12345678u, buf, 3, 1), sg_crc32c(0x12345678u, buf, 3));
    CU_ASSERT_TRUE(SG_CRC32C_PIECE <= (size_t)INT_MAX);
}

int register_tests(void)
{
    static const struct cu_test tests[] = {
        { "check_values_of_123456789", check_values_of_123456789 },
        { "crc64nvme_check_string_repeated_through_the_folding",
          crc64nvme_check_string_repeated_through_the_folding },
        { "crcs_match_bitwise_reference_for_any_split_and_alignment",
          crcs_match_bitwise_reference_for_any_split_and_alignment },
        { "every_split_of_lengths_0_to_300_at_any_offset_equals_one_shot",
          every_split_of_lengths_0_to_300_at_any_offset_equals_one_shot },
        { "crc64nvme_clmul_equals_table_on_random_lengths_alignments_splits",
          crc64nvme_clmul_equals_table_on_random_lengths_alignments_splits },
        { "crc32c_in_pieces_of_any_size_equals_one_call",
          crc32c_in_pieces_of_any_size_equals_one_call },
    };
    return cu_add_suite("common_crc", NULL, NULL, tests, CU_N(tests));
}
