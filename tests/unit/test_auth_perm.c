/* tests/unit/test_auth_perm.c - auth_allowed (the users x buckets x levels
 * matrix, anonymous on private and public-read buckets, service level), the
 * rule that every x-amz-* header must be signed, the query-length cap, and
 * the multipart composite / full-object checksums against values computed
 * independently (Python's zlib and hashlib). */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "auth.h"
#include "auth_int.h"

int register_tests(void);

#define AK "AKIAIOSFODNN7EXAMPLE"
#define SK "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define T0 ((time_t)1369353600)  /* 20130524T000000Z */
#define AMZDATE "20130524T000000Z"

static time_t test_clock(void) { return T0; }

/* ---- the permission matrix ---- */

static struct conf_perm p_root[] = { { "*", CONF_PERM_ADMIN } };
static struct conf_perm p_trainer[] = { { "*", CONF_PERM_READ }, { "ckpt", CONF_PERM_WRITE },
                                        { "private", CONF_PERM_NONE } };
static struct conf_perm p_backup[] = { { "ckpt", CONF_PERM_READ } };
static struct conf_perm p_owner[] = { { "ckpt", CONF_PERM_ADMIN }, { "*", CONF_PERM_WRITE } };

static struct conf_user g_users[] = {
    { .name = "root", .access_key = AK, .secret_key = SK, .perms = p_root, .n_perms = 1 },
    { .name = "trainer", .access_key = "AKTRAINER", .secret_key = "sk-trainer",
      .perms = p_trainer, .n_perms = 3 },
    { .name = "backup", .access_key = "AKBACKUP", .secret_key = "sk-backup",
      .perms = p_backup, .n_perms = 1 },
    { .name = "owner", .access_key = "AKOWNER", .secret_key = "sk-owner",
      .perms = p_owner, .n_perms = 2 },
    { .name = "nobody", .access_key = "AKNOBODY", .secret_key = "sk-nobody" },
};
enum { U_ROOT, U_TRAINER, U_BACKUP, U_OWNER, U_NOBODY, U_ANON };

static struct conf_bucket g_buckets[] = {
    { .name = "datasets", .public_read = true },
    { .name = "ckpt", .public_read = false },
};

static struct conf g_conf;
static struct auth *g_auth;

struct perm_case {
    int user;
    const char *bucket;        /* NULL = service level */
    bool r, w, a;              /* expected for READ, WRITE, ADMIN */
};

static const struct perm_case perm_cases[] = {
    /* root: admin on "*" */
    { U_ROOT, "datasets", true, true, true },
    { U_ROOT, "ckpt", true, true, true },
    { U_ROOT, "private", true, true, true },
    { U_ROOT, NULL, true, true, true },
    /* trainer: read on "*", write on ckpt, none on private (exact beats "*") */
    { U_TRAINER, "datasets", true, false, false },
    { U_TRAINER, "ckpt", true, true, false },
    { U_TRAINER, "private", false, false, false },
    { U_TRAINER, "other", true, false, false },
    { U_TRAINER, NULL, true, false, false },
    /* backup: read on ckpt only */
    { U_BACKUP, "ckpt", true, false, false },
    { U_BACKUP, "datasets", false, false, false },
    { U_BACKUP, "ckp", false, false, false },      /* no prefix matching */
    { U_BACKUP, "ckpt2", false, false, false },
    { U_BACKUP, NULL, true, false, false },        /* may list (its) buckets */
    /* owner: admin on ckpt, write elsewhere; service admin needs admin on "*" */
    { U_OWNER, "ckpt", true, true, true },
    { U_OWNER, "datasets", true, true, false },
    { U_OWNER, NULL, true, true, false },
    /* a user with no permissions can authenticate and do nothing on buckets */
    { U_NOBODY, "datasets", false, false, false },
    { U_NOBODY, "ckpt", false, false, false },
    { U_NOBODY, NULL, true, false, false },
    /* anonymous: reads of public_read buckets only */
    { U_ANON, "datasets", true, false, false },
    { U_ANON, "ckpt", false, false, false },       /* listed, not public */
    { U_ANON, "private", false, false, false },    /* not listed */
    { U_ANON, NULL, false, false, false },
    { U_ANON, "", false, false, false },
};

static void permission_matrix(void)
{
    static const char *const names[] = { "root", "trainer", "backup", "owner", "nobody", "anon" };
    for (size_t i = 0; i < sizeof perm_cases / sizeof perm_cases[0]; i++) {
        const struct perm_case *pc = &perm_cases[i];
        struct auth_ctx ctx;
        memset(&ctx, 0, sizeof ctx);
        ctx.user = pc->user == U_ANON ? NULL : &g_users[pc->user];
        ctx.signed_req = pc->user != U_ANON;
        bool want[3] = { pc->r, pc->w, pc->a };
        static const enum auth_perm needs[3] = { AUTH_PERM_READ, AUTH_PERM_WRITE,
                                                 AUTH_PERM_ADMIN };
        for (int k = 0; k < 3; k++) {
            bool got = auth_allowed(g_auth, &ctx, pc->bucket, needs[k]);
            if (got != want[k])
                fprintf(stderr, "\n  %s on %s need %d: got %d\n", names[pc->user],
                        pc->bucket ? pc->bucket : "(service)", k, got);
            CU_ASSERT_EQUAL(got, want[k]);
        }
    }
}

static void null_ctx_is_anonymous(void)
{
    CU_ASSERT_TRUE(auth_allowed(g_auth, NULL, "datasets", AUTH_PERM_READ));
    CU_ASSERT_FALSE(auth_allowed(g_auth, NULL, "datasets", AUTH_PERM_WRITE));
    CU_ASSERT_FALSE(auth_allowed(g_auth, NULL, "ckpt", AUTH_PERM_READ));
    CU_ASSERT_FALSE(auth_allowed(g_auth, NULL, NULL, AUTH_PERM_READ));
}

/* An anonymous request that auth_verify accepted gets exactly the anonymous
 * rights, and a verified user gets theirs (the ctx from the real path). */
static void verified_contexts_carry_the_identity(void)
{
    struct auth_hdr h[1] = { { "host", "localhost" } };
    struct auth_req r = { "GET", "/datasets/k", "", h, 1 };
    struct auth_ctx *ctx = NULL;
    CU_ASSERT_EQUAL_FATAL(auth_verify(g_auth, &r, &ctx), AUTH_OK);
    CU_ASSERT_PTR_NULL(auth_ctx_user(ctx));
    CU_ASSERT_TRUE(auth_allowed(g_auth, ctx, "datasets", AUTH_PERM_READ));
    CU_ASSERT_FALSE(auth_allowed(g_auth, ctx, "datasets", AUTH_PERM_WRITE));
    auth_ctx_free(ctx);
}

/* ---- unsigned x-amz-* headers and the query cap ---- */

struct hreq {
    struct auth_hdr h[12];
    size_t n;
    char authz[512];
    char query[1024];
    struct auth_req r;
};

/* Header-signed GET with the given extra headers, signing `sh`. */
static enum auth_status header_case(const char *const extra[][2], size_t n_extra,
                                    const char *sh)
{
    struct hreq q;
    char sig[65];
    memset(&q, 0, sizeof q);
    q.h[q.n++] = (struct auth_hdr){ "host", "localhost:9000" };
    q.h[q.n++] = (struct auth_hdr){ "x-amz-date", AMZDATE };
    q.h[q.n++] = (struct auth_hdr){ "x-amz-content-sha256", AUTH_EMPTY_SHA256 };
    for (size_t i = 0; i < n_extra; i++)
        q.h[q.n++] = (struct auth_hdr){ extra[i][0], extra[i][1] };
    q.r = (struct auth_req){ "GET", "/b/k", "", q.h, q.n };
    CU_ASSERT_EQUAL(auth_sign_request(&q.r, false, sh, AUTH_EMPTY_SHA256, AMZDATE, "us-east-1",
                                      SK, sig), AUTH_OK);
    snprintf(q.authz, sizeof q.authz, "AWS4-HMAC-SHA256 Credential=" AK
             "/20130524/us-east-1/s3/aws4_request, SignedHeaders=%s, Signature=%s", sh, sig);
    q.h[q.n++] = (struct auth_hdr){ "authorization", q.authz };
    q.r.n_hdrs = q.n;
    struct auth_ctx *ctx = NULL;
    enum auth_status st = auth_verify(g_auth, &q.r, &ctx);
    auth_ctx_free(ctx);
    return st;
}

static void every_amz_header_must_be_signed_header_auth(void)
{
    static const char *const meta[][2] = { { "x-amz-meta-a", "1" } };
    static const char *const upper[][2] = { { "X-Amz-Meta-A", "1" } };
    static const char *const other[][2] = { { "user-agent", "x" }, { "accept", "*/*" } };
    static const char *const two[][2] = { { "x-amz-meta-a", "1" }, { "x-amz-acl", "private" } };
    /* signed: fine */
    CU_ASSERT_EQUAL(header_case(meta, 1, "host;x-amz-content-sha256;x-amz-date;x-amz-meta-a"),
                    AUTH_OK);
    CU_ASSERT_EQUAL(header_case(upper, 1, "host;x-amz-content-sha256;x-amz-date;x-amz-meta-a"),
                    AUTH_OK);
    /* non-x-amz headers may stay unsigned, as SDKs leave user-agent out */
    CU_ASSERT_EQUAL(header_case(other, 2, "host;x-amz-content-sha256;x-amz-date"), AUTH_OK);
    /* an x-amz-* header outside SignedHeaders */
    CU_ASSERT_EQUAL(header_case(meta, 1, "host;x-amz-content-sha256;x-amz-date"),
                    AUTH_UNSIGNED_HEADER);
    CU_ASSERT_EQUAL(header_case(two, 2, "host;x-amz-content-sha256;x-amz-date;x-amz-meta-a"),
                    AUTH_UNSIGNED_HEADER);
    /* x-amz-date and x-amz-content-sha256 themselves must be signed */
    CU_ASSERT_EQUAL(header_case(NULL, 0, "host;x-amz-date"), AUTH_UNSIGNED_HEADER);
    CU_ASSERT_EQUAL(header_case(NULL, 0, "host;x-amz-content-sha256"), AUTH_UNSIGNED_HEADER);
    /* a prefix of a signed name is not that name */
    static const char *const pre[][2] = { { "x-amz-meta-ab", "1" } };
    CU_ASSERT_EQUAL(header_case(pre, 1, "host;x-amz-content-sha256;x-amz-date;x-amz-meta-a"),
                    AUTH_UNSIGNED_HEADER);
}

static enum auth_status presigned_case(const char *extra_name, const char *extra_val,
                                       const char *sh)
{
    struct hreq q;
    char sig[65];
    memset(&q, 0, sizeof q);
    q.h[q.n++] = (struct auth_hdr){ "host", "localhost:9000" };
    if (extra_name)
        q.h[q.n++] = (struct auth_hdr){ extra_name, extra_val };
    char shq[128];
    snprintf(shq, sizeof shq, "%s", sh);
    for (char *p = shq; *p; p++)
        if (*p == ';')
            *p = '\0';   /* rebuilt below with %3B */
    char enc[160] = "";
    for (const char *s = sh; *s; s++) {
        if (*s == ';')
            strcat(enc, "%3B");
        else
            strncat(enc, s, 1);
    }
    snprintf(q.query, sizeof q.query,
             "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" AK
             "%%2F20130524%%2Fus-east-1%%2Fs3%%2Faws4_request&X-Amz-Date=" AMZDATE
             "&X-Amz-Expires=86400&X-Amz-SignedHeaders=%s", enc);
    q.r = (struct auth_req){ "GET", "/b/k", q.query, q.h, q.n };
    CU_ASSERT_EQUAL(auth_sign_request(&q.r, true, sh, "UNSIGNED-PAYLOAD", AMZDATE, "us-east-1",
                                      SK, sig), AUTH_OK);
    size_t ql = strlen(q.query);
    snprintf(q.query + ql, sizeof q.query - ql, "&X-Amz-Signature=%s", sig);
    struct auth_ctx *ctx = NULL;
    enum auth_status st = auth_verify(g_auth, &q.r, &ctx);
    auth_ctx_free(ctx);
    return st;
}

static void every_amz_header_must_be_signed_presigned(void)
{
    CU_ASSERT_EQUAL(presigned_case(NULL, NULL, "host"), AUTH_OK);
    CU_ASSERT_EQUAL(presigned_case("x-amz-acl", "public-read", "host;x-amz-acl"), AUTH_OK);
    CU_ASSERT_EQUAL(presigned_case("x-amz-acl", "public-read", "host"), AUTH_UNSIGNED_HEADER);
    CU_ASSERT_EQUAL(presigned_case("x-amz-content-sha256", "UNSIGNED-PAYLOAD", "host"),
                    AUTH_UNSIGNED_HEADER);
    CU_ASSERT_EQUAL(presigned_case("content-type", "text/plain", "host"), AUTH_OK);
}

static void query_over_cap_is_refused_before_parsing(void)
{
    size_t n = AUTH_QUERY_MAX + 1;
    char *q = malloc(n + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    memset(q, 'a', n);
    q[n] = '\0';
    struct auth_hdr h[1] = { { "host", "localhost" } };
    struct auth_req r = { "GET", "/datasets/k", q, h, 1 };
    struct auth_ctx *ctx = NULL;
    CU_ASSERT_EQUAL(auth_verify(g_auth, &r, &ctx), AUTH_QUERY_TOO_LONG);
    CU_ASSERT_PTR_NULL(ctx);
    q[n - 1] = '\0';   /* exactly at the cap: anonymous and fine */
    CU_ASSERT_EQUAL(auth_verify(g_auth, &r, &ctx), AUTH_OK);
    auth_ctx_free(ctx);
    /* many '&' segments at the cap: bounded work, no crash */
    for (size_t i = 0; i < n - 1; i++)
        q[i] = (i % 2) ? '&' : 'X';
    ctx = NULL;
    enum auth_status st = auth_verify(g_auth, &r, &ctx);
    CU_ASSERT_EQUAL(st, AUTH_OK);
    auth_ctx_free(ctx);
    free(q);
    CU_ASSERT_STRING_EQUAL(auth_status_name(AUTH_QUERY_TOO_LONG), "QUERY_TOO_LONG");
    CU_ASSERT_STRING_EQUAL(auth_status_name(AUTH_UNSIGNED_HEADER), "UNSIGNED_HEADER");
}

/* ---- multipart checksums ---- */

/* Parts "part-one", "part-two-data", 1000 x '3'; the expected values were
 * computed with Python (zlib.crc32, hashlib) as S3 documents them. */
static const char *const crc32_parts[] = { "eX7LbQ==", "YbS6zw==", "hGPhzw==" };
static const char *const sha256_parts[] = { "MGAqt574P31B31Ylr0HeTPjgh4ZImul6PVF9KDEBshs=",
                                            "lavh8bvLrLAuXRjG1X3vE9t81DNI91dCvPjw+7H+5Ms=",
                                            "2Q5NsZP56e4hyMhe+S8rnvZm0uPBKH8frWVuMnWEf3U=" };
static const char *const sha1_parts[] = { "xHPPM0HEpM4mt9oxP9WXO6tc380=",
                                          "A5p4QTLHhgI3zjq4qiIL9vVXmFE=",
                                          "ta9IygOiuoHJhYkFCWSrbiYPz7k=" };

static void composite_matches_python(void)
{
    char out[64];
    CU_ASSERT_EQUAL(auth_checksum_composite("crc32", crc32_parts, 3, out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "P2paTA==-3");
    CU_ASSERT_EQUAL(auth_checksum_composite("x-amz-checksum-sha256", sha256_parts, 3, out,
                                            sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "MAtfbzxoHt5U79lyn8Ia0HqTTFd+1HORV83J/2P1UrY=-3");
    CU_ASSERT_EQUAL(auth_checksum_composite("SHA1", sha1_parts, 3, out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "R/eSfEMH8CzijXX+fe3AeB3i54E=-3");
}

static void composite_refuses_bad_input(void)
{
    char out[64], tiny[8];
    static const char *const bad_b64[] = { "eX7LbQ==", "not base64!" };
    static const char *const wrong_len[] = { "eX7LbQ==", "xHPPM0HEpM4mt9oxP9WXO6tc380=" };
    CU_ASSERT_EQUAL(auth_checksum_composite("md5", crc32_parts, 3, out, sizeof out), -1);
    CU_ASSERT_EQUAL(auth_checksum_composite("crc64nvme", crc32_parts, 3, out, sizeof out), -1);
    CU_ASSERT_EQUAL(auth_checksum_composite(NULL, crc32_parts, 3, out, sizeof out), -1);
    CU_ASSERT_EQUAL(auth_checksum_composite("crc32", crc32_parts, 0, out, sizeof out), -1);
    CU_ASSERT_EQUAL(auth_checksum_composite("crc32", crc32_parts, 10001, out, sizeof out), -1);
    CU_ASSERT_EQUAL(auth_checksum_composite("crc32", bad_b64, 2, out, sizeof out), -1);
    CU_ASSERT_EQUAL(auth_checksum_composite("crc32", wrong_len, 2, out, sizeof out), -1);
    CU_ASSERT_EQUAL(auth_checksum_composite("crc32", crc32_parts, 3, tiny, sizeof tiny), -1);
    CU_ASSERT_STRING_EQUAL(tiny, "");
}

static void b64_of_be(uint64_t v, size_t len, char *out)
{
    uint8_t d[8];
    for (size_t k = 0; k < len; k++)
        d[k] = (uint8_t)(v >> (8 * (len - 1 - k)));
    sg_b64_encode(d, len, out);
}

/* FULL_OBJECT: combining the parts' CRCs equals the CRC of the whole data,
 * for every CRC, odd part sizes and an empty part. */
static void full_object_crc_equals_crc_of_concatenation(void)
{
    static const size_t sizes[] = { 8, 13, 1000, 0, 65537, 1 };
    enum { NP = sizeof sizes / sizeof sizes[0] };
    size_t total = 0;
    for (size_t i = 0; i < NP; i++)
        total += sizes[i];
    uint8_t *data = malloc(total);
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    for (size_t i = 0; i < total; i++)
        data[i] = (uint8_t)(i * 131u + 7u);
    static const char *const algos[] = { "crc32", "crc32c", "crc64nvme" };
    for (int a = 0; a < 3; a++) {
        char b64s[NP][16], whole[16], out[64];
        const char *ptrs[NP];
        uint64_t lens[NP];
        size_t off = 0;
        for (size_t i = 0; i < NP; i++) {
            uint64_t v = a == 0   ? sg_crc32(0, data + off, sizes[i])
                         : a == 1 ? sg_crc32c(0, data + off, sizes[i])
                                  : sg_crc64nvme(0, data + off, sizes[i]);
            b64_of_be(v, a == 2 ? 8 : 4, b64s[i]);
            ptrs[i] = b64s[i];
            lens[i] = sizes[i];
            off += sizes[i];
        }
        uint64_t w = a == 0   ? sg_crc32(0, data, total)
                     : a == 1 ? sg_crc32c(0, data, total)
                              : sg_crc64nvme(0, data, total);
        b64_of_be(w, a == 2 ? 8 : 4, whole);
        CU_ASSERT_EQUAL(auth_checksum_full_object(algos[a], ptrs, lens, NP, out, sizeof out), 0);
        CU_ASSERT_STRING_EQUAL(out, whole);
    }
    free(data);
}

static void full_object_matches_python_and_refuses_sha(void)
{
    static const uint64_t lens[] = { 8, 13, 1000 };
    char out[64];
    CU_ASSERT_EQUAL(auth_checksum_full_object("crc32", crc32_parts, lens, 3, out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "X/aDkA==");
    CU_ASSERT_EQUAL(auth_checksum_full_object("sha256", sha256_parts, lens, 3, out, sizeof out),
                    -1);
    CU_ASSERT_EQUAL(auth_checksum_full_object("crc32", crc32_parts, NULL, 3, out, sizeof out), -1);
    CU_ASSERT_EQUAL(auth_checksum_full_object("crc32", crc32_parts, lens, 3, out, 4), -1);
}

static int suite_init(void)
{
    memset(&g_conf, 0, sizeof g_conf);
    g_conf.region = "us-east-1";
    g_conf.users = g_users;
    g_conf.n_users = sizeof g_users / sizeof g_users[0];
    g_conf.buckets = g_buckets;
    g_conf.n_buckets = sizeof g_buckets / sizeof g_buckets[0];
    if (auth_open(&g_conf, &g_auth) != 0)
        return -1;
    auth_set_clock(g_auth, test_clock);
    return 0;
}

static int suite_clean(void)
{
    auth_close(g_auth);
    return 0;
}

int register_tests(void)
{
    static const struct cu_test tests[] = {
        { "permission_matrix", permission_matrix },
        { "null_ctx_is_anonymous", null_ctx_is_anonymous },
        { "verified_contexts_carry_the_identity", verified_contexts_carry_the_identity },
        { "every_amz_header_must_be_signed_header_auth",
          every_amz_header_must_be_signed_header_auth },
        { "every_amz_header_must_be_signed_presigned", every_amz_header_must_be_signed_presigned },
        { "query_over_cap_is_refused_before_parsing", query_over_cap_is_refused_before_parsing },
        { "composite_matches_python", composite_matches_python },
        { "composite_refuses_bad_input", composite_refuses_bad_input },
        { "full_object_crc_equals_crc_of_concatenation",
          full_object_crc_equals_crc_of_concatenation },
        { "full_object_matches_python_and_refuses_sha", full_object_matches_python_and_refuses_sha },
    };
    return cu_add_suite("auth_perm", suite_init, suite_clean, tests, CU_N(tests));
}
