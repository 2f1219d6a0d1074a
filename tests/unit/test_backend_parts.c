/* tests/unit/test_backend_parts.c - the part boundaries the posix store keeps
 * with a multipart object (backend/parts.c): the run-length encoding both
 * ways as tables (uniform parts, a short last part, irregular sizes, the
 * 10000-part limit, what does not fit), the lookup of each part and of one
 * beyond the last, malformed lists refused; the ETag's part count and the
 * digest of a Complete's parts list; and on a posix store, a Complete sent
 * again (posix_mpu_done.c): the same answer for the same parts, NoSuchUpload
 * for others, forgotten after a day. */
#include "backend.h"
#include "posix_int.h"
#include "cu.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

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

/* The multipart ETag of parts "a" and "b", as S3 and Python's hashlib make
 * it: md5(md5("a") || md5("b")) in hex, "-2". The write-back uploader
 * compares it with the client's before it completes a cold upload. */
static void parts_etag_is_s3s(void)
{
    struct backend_part p[3] = { { .part_no = 1, .etag = "0cc175b9c0f1b6a831c399e269772661" },
                                 { .part_no = 2, .etag = "\"92EB5FFEE6AE2FEC3AD71C777531578F\"" },
                                 { .part_no = 3, .etag = "92eb5ffee6ae2fec3ad71c777531578f" } };
    char e[72];
    CU_ASSERT_TRUE(backend_parts_etag(p, 2, e));   /* quotes and case do not matter */
    CU_ASSERT_STRING_EQUAL(e, "96e024ba2074fe77e8e965ba43a704be-2");
    CU_ASSERT_TRUE(backend_parts_etag(p, 3, e));
    CU_ASSERT_STRING_NOT_EQUAL(e, "96e024ba2074fe77e8e965ba43a704be-2");
    CU_ASSERT_EQUAL(backend_etag_parts(e), 3);
    strcpy(p[1].etag, "92eb5ffee6ae2fec3ad71c777531578");   /* 31 hex: not an MD5 */
    CU_ASSERT_FALSE(backend_parts_etag(p, 2, e));
    strcpy(p[1].etag, "kms-opaque-etag-of-32-characters");
    CU_ASSERT_FALSE(backend_parts_etag(p, 2, e));
    CU_ASSERT_FALSE(backend_parts_etag(p, 0, e));
}

/* ---- a Complete sent again, on a posix store in a scratch directory ---- */

static char g_dir[64];
static struct backend *g_store;

static int store_open(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/sgparts.XXXXXX");
    struct backend_posix_conf cf = { .root = mkdtemp(g_dir) };
    if (!cf.root || backend_posix_open(&cf, &g_store) != BACKEND_OK)
        return -1;
    return backend_bucket_create(g_store, "bkt") == BACKEND_OK ? 0 : -1;
}

static int store_close(void)
{
    backend_close(g_store);
    g_store = NULL;
    return cu_rm_tree(g_dir);
}

/* A one-part upload of `data` to key k: its id and the part's ETag. */
static void one_part_upload(const char *k, const char *data, char id[BACKEND_UPLOAD_ID_MAX],
                            struct backend_part *part)
{
    struct obj_meta none = { 0 };
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_store, "bkt", k, &none, id), BACKEND_OK);
    struct backend_put *p;
    CU_ASSERT_EQUAL_FATAL(backend_mpu_part_begin(g_store, "bkt", k, id, 1, &p), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(backend_put_write(p, data, strlen(data)), BACKEND_OK);
    unsigned char md[16];
    EVP_Digest(data, strlen(data), md, NULL, EVP_md5(), NULL);
    struct obj_meta pm = { 0 };
    posix_md5_to_hex(md, pm.etag);
    CU_ASSERT_EQUAL_FATAL(backend_put_commit(p, &pm, NULL), BACKEND_OK);
    memset(part, 0, sizeof *part);
    part->part_no = 1;
    char hex[33];
    posix_md5_to_hex(md, hex);
    snprintf(part->etag, sizeof part->etag, "\"%s\"", hex);   /* as clients send it */
}

/* one_part_upload, completed. */
static void completed_upload(const char *k, const char *data, char id[BACKEND_UPLOAD_ID_MAX],
                             struct backend_part *part)
{
    one_part_upload(k, data, id, part);
    CU_ASSERT_EQUAL_FATAL(backend_mpu_complete(g_store, "bkt", k, id, part, 1, NULL),
                          BACKEND_OK);
}

static void complete_again_same_parts_same_etag(void)
{
    char id[BACKEND_UPLOAD_ID_MAX];
    struct backend_part part;
    one_part_upload("k", "hello", id, &part);
    struct obj_meta first, again;
    CU_ASSERT_EQUAL_FATAL(backend_mpu_complete(g_store, "bkt", "k", id, &part, 1, &first),
                          BACKEND_OK);
    CU_ASSERT_EQUAL(backend_mpu_complete(g_store, "bkt", "k", id, &part, 1, &again),
                    BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(again.etag, first.etag);
    /* the part list kept with it: one part of 5 bytes, nothing beyond */
    struct backend_part_range r;
    CU_ASSERT_EQUAL(backend_object_part(g_store, "bkt", "k", 1, &r), BACKEND_OK);
    CU_ASSERT(r.parts_count == 1 && r.first == 0 && r.size == 5 && r.total == 5);
    CU_ASSERT_STRING_EQUAL(r.etag, first.etag);
    CU_ASSERT_EQUAL(backend_object_part(g_store, "bkt", "k", 2, &r),
                    BACKEND_INVALID_PART_NUMBER);
    obj_meta_clear(&first);
    obj_meta_clear(&again);
}

static void complete_again_other_parts_or_key_no_upload(void)
{
    char id[BACKEND_UPLOAD_ID_MAX];
    struct backend_part part;
    completed_upload("k2", "world", id, &part);
    CU_ASSERT_EQUAL(backend_mpu_complete(g_store, "bkt", "k3", id, &part, 1, NULL),
                    BACKEND_NO_UPLOAD);
    struct backend_part other = part;
    other.etag[1] = other.etag[1] == '0' ? '1' : '0';
    CU_ASSERT_EQUAL(backend_mpu_complete(g_store, "bkt", "k2", id, &other, 1, NULL),
                    BACKEND_NO_UPLOAD);
    other = part;
    other.part_no = 2;
    CU_ASSERT_EQUAL(backend_mpu_complete(g_store, "bkt", "k2", id, &other, 1, NULL),
                    BACKEND_NO_UPLOAD);
    CU_ASSERT_EQUAL(backend_mpu_complete(g_store, "bkt", "k2", "nosuchupload", &part, 1, NULL),
                    BACKEND_NO_UPLOAD);
}

static void completion_forgotten_after_a_day(void)
{
    char id[BACKEND_UPLOAD_ID_MAX];
    struct backend_part part;
    completed_upload("k4", "later", id, &part);
    struct posix_store *ps = (struct posix_store *)g_store;
    time_t now = time(NULL);
    CU_ASSERT_EQUAL(posix_mpu_done_expire(ps, now + POSIX_DONE_TTL_S - 60), 0);
    CU_ASSERT_EQUAL(backend_mpu_complete(g_store, "bkt", "k4", id, &part, 1, NULL), BACKEND_OK);
    CU_ASSERT(posix_mpu_done_expire(ps, now + POSIX_DONE_TTL_S + 60) >= 1);
    CU_ASSERT_EQUAL(backend_mpu_complete(g_store, "bkt", "k4", id, &part, 1, NULL),
                    BACKEND_NO_UPLOAD);
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
        { "parts_etag_is_s3s", parts_etag_is_s3s },
    };
    static const struct cu_test store_tests[] = {
        { "complete_again_same_parts_same_etag", complete_again_same_parts_same_etag },
        { "complete_again_other_parts_or_key_no_upload",
          complete_again_other_parts_or_key_no_upload },
        { "completion_forgotten_after_a_day", completion_forgotten_after_a_day },
    };
    if (cu_add_suite("backend_parts", NULL, NULL, tests, CU_N(tests)) != 0)
        return -1;
    return cu_add_suite("backend_parts_posix", store_open, store_close, store_tests,
                        CU_N(store_tests));
}
