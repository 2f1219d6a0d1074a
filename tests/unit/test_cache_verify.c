/* tests/unit/test_cache_verify.c - what a fill checks the cold tier's bytes
 * against (cache/verify.c): a full-object CRC before an MD5 ETag, an MD5
 * ETag before a SHA, never a composite checksum, and each check fails on
 * bytes that differ. Values are the published check values of "123456789". */
#include <CUnit/CUnit.h>
#include <string.h>

#include "cache_int.h"
#include "cu.h"

static const char DATA[] = "123456789";
static const char MD5[] = "25f9e794323b453885f5181f1b624d0b";
static const char MULTIPART_ETAG[] = "0123456789abcdef0123456789abcdef-3";

/* meta with etag and up to two headers (name NULL: none). */
static void meta_of(struct obj_meta *m, const char *etag, const char *n1, const char *v1,
                    const char *n2, const char *v2)
{
    memset(m, 0, sizeof *m);
    m->size = sizeof DATA - 1;
    strcpy(m->etag, etag);
    obj_meta_add_hdr(m, "content-type", "text/plain");
    if (n1)
        obj_meta_add_hdr(m, n1, v1);
    if (n2)
        obj_meta_add_hdr(m, n2, v2);
}

/* Runs `data` through the check m picks; says which it picked in *what
 * ("" for none) and whether the bytes matched. */
static bool check(const struct obj_meta *m, const char *data, char what[16])
{
    struct cache_verify v;
    CU_ASSERT_EQUAL_FATAL(cache_verify_begin(&v, m), 0);
    strcpy(what, v.kind == CACHE_CHECK_NONE ? "" : v.what);
    /* in two pieces, as a fill hands them over */
    size_t n = strlen(data), cut = n < 4 ? n : 4;
    CU_ASSERT_EQUAL(cache_verify_update(&v, data, cut), 0);
    CU_ASSERT_EQUAL(cache_verify_update(&v, data + cut, n - cut), 0);
    char got[CACHE_VERIFY_VALUE];
    bool ok = cache_verify_end(&v, got);
    cache_verify_free(&v);
    return ok;
}

static void each_full_object_crc_is_checked_instead_of_the_md5(void)
{
    static const struct { const char *hdr, *value, *name; } crcs[] = {
        { "x-amz-checksum-crc32", "y/Q5Jg==", "crc32" },
        { "x-amz-checksum-crc32c", "4waSgw==", "crc32c" },
        { "x-amz-checksum-crc64nvme", "rosUhgp5mIg=", "crc64nvme" },
    };
    for (size_t i = 0; i < CU_N(crcs); i++) {
        struct obj_meta m;
        char what[16];
        meta_of(&m, MD5, crcs[i].hdr, crcs[i].value, "x-amz-checksum-type", "FULL_OBJECT");
        CU_ASSERT_TRUE(check(&m, DATA, what));
        CU_ASSERT_STRING_EQUAL(what, crcs[i].name);
        CU_ASSERT_FALSE(check(&m, "123456780", what));
        obj_meta_clear(&m);
        /* without x-amz-checksum-type (a single-part object, as S3 stored
         * them before 2025) the value is the whole object's too */
        meta_of(&m, MD5, crcs[i].hdr, crcs[i].value, NULL, NULL);
        CU_ASSERT_TRUE(check(&m, DATA, what));
        CU_ASSERT_STRING_EQUAL(what, crcs[i].name);
        obj_meta_clear(&m);
    }
}

static void a_multipart_object_with_a_full_object_crc_is_verified(void)
{
    struct obj_meta m;
    char what[16];
    meta_of(&m, MULTIPART_ETAG, "x-amz-checksum-crc64nvme", "rosUhgp5mIg=",
            "x-amz-checksum-type", "FULL_OBJECT");
    CU_ASSERT_TRUE(check(&m, DATA, what));
    CU_ASSERT_STRING_EQUAL(what, "crc64nvme");
    CU_ASSERT_FALSE(check(&m, "023456789", what));
    obj_meta_clear(&m);
}

static void composite_checksums_are_not_used(void)
{
    struct obj_meta m;
    char what[16];
    /* S3's form of a composite value: the checksum of the parts' checksums
     * and the part count; the MD5 ETag is checked instead */
    meta_of(&m, MD5, "x-amz-checksum-crc32", "AAAAAA==-2", NULL, NULL);
    CU_ASSERT_TRUE(check(&m, DATA, what));
    CU_ASSERT_STRING_EQUAL(what, "md5");
    CU_ASSERT_FALSE(check(&m, "12345678X", what));
    obj_meta_clear(&m);
    meta_of(&m, MULTIPART_ETAG, "x-amz-checksum-crc32c", "4waSgw==", "x-amz-checksum-type",
            "COMPOSITE");
    CU_ASSERT_TRUE(check(&m, "anything at all", what));
    CU_ASSERT_STRING_EQUAL(what, "");
    obj_meta_clear(&m);
}

static void a_sha_is_checked_only_without_an_md5_etag(void)
{
    static const char sha[] = "FeKw08M4keuw8e9gnsQZQgwg4yDOlMZfvIwzEkSOsiU=";
    struct obj_meta m;
    char what[16];
    meta_of(&m, MD5, "x-amz-checksum-sha256", sha, NULL, NULL);
    CU_ASSERT_TRUE(check(&m, DATA, what));
    CU_ASSERT_STRING_EQUAL(what, "md5");
    obj_meta_clear(&m);
    meta_of(&m, MULTIPART_ETAG, "x-amz-checksum-sha256", sha, NULL, NULL);
    CU_ASSERT_TRUE(check(&m, DATA, what));
    CU_ASSERT_STRING_EQUAL(what, "sha256");
    CU_ASSERT_FALSE(check(&m, "1234567890", what));
    obj_meta_clear(&m);
    /* a CRC beside the SHA wins */
    meta_of(&m, MULTIPART_ETAG, "x-amz-checksum-sha256", sha, "x-amz-checksum-crc32",
            "y/Q5Jg==");
    CU_ASSERT_TRUE(check(&m, DATA, what));
    CU_ASSERT_STRING_EQUAL(what, "crc32");
    obj_meta_clear(&m);
}

static void an_md5_etag_alone_is_checked_and_nothing_else_passes(void)
{
    struct obj_meta m;
    char what[16];
    meta_of(&m, "25F9E794323B453885F5181F1B624D0B", NULL, NULL, NULL, NULL);
    CU_ASSERT_TRUE(check(&m, DATA, what));
    CU_ASSERT_STRING_EQUAL(what, "md5");
    CU_ASSERT_FALSE(check(&m, "", what));
    obj_meta_clear(&m);
    /* a multipart ETag and no checksum: nothing a fill can check */
    meta_of(&m, MULTIPART_ETAG, "x-amz-checksum-algorithm", "CRC32", NULL, NULL);
    CU_ASSERT_TRUE(check(&m, DATA, what));
    CU_ASSERT_STRING_EQUAL(what, "");
    obj_meta_clear(&m);
}

int register_tests(void)
{
    static const struct cu_test tests[] = {
        { "each_full_object_crc_is_checked_instead_of_the_md5",
          each_full_object_crc_is_checked_instead_of_the_md5 },
        { "a_multipart_object_with_a_full_object_crc_is_verified",
          a_multipart_object_with_a_full_object_crc_is_verified },
        { "composite_checksums_are_not_used", composite_checksums_are_not_used },
        { "a_sha_is_checked_only_without_an_md5_etag", a_sha_is_checked_only_without_an_md5_etag },
        { "an_md5_etag_alone_is_checked_and_nothing_else_passes",
          an_md5_etag_alone_is_checked_and_nothing_else_passes },
    };
    return cu_add_suite("cache_verify", NULL, NULL, tests, CU_N(tests));
}
