/* tests/unit/test_backend_cond.c - conditional writes on the posix store
 * (posix_cond.c): If-None-Match: * and If-Match on put, copy and Complete as
 * tables, a failed condition changing nothing, and the atomicity of the check
 * with the commit under racing threads: of 8 threads committing the same new
 * key with If-None-Match: *, exactly one wins each round; 4 threads
 * incrementing one counter object with If-Match lose no increment. */
#include "backend.h"
#include "posix_int.h"
#include "s3_int.h"

#include "cu.h"

#include <CUnit/CUnit.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int register_tests(void);

static char g_tmp[64];
static struct backend *g_b;

/* One store for the suite: the tests use keys of their own. */
static int suite_init(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sgcond.XXXXXX");
    if (!mkdtemp(g_tmp))
        return -1;
    char root[128];
    snprintf(root, sizeof root, "%s/data", g_tmp);
    struct backend_posix_conf cf = { .root = root };
    if (backend_posix_open(&cf, &g_b) != BACKEND_OK)
        return -1;
    return backend_bucket_create(g_b, "bkt") == BACKEND_OK ? 0 : -1;
}

static int suite_clean(void)
{
    backend_close(g_b);
    g_b = NULL;
    return cu_rm_tree(g_tmp);
}

static const struct backend_cond absent = { BACKEND_COND_ABSENT, "" };

static struct backend_cond if_match(const char *etag)
{
    struct backend_cond c = { BACKEND_COND_ETAG, "" };
    snprintf(c.etag, sizeof c.etag, "%s", etag);
    return c;
}

/* PUTs data as key with ETag etag (32 hex) under condition c (NULL: none).
 * No CUnit asserts: threads call it. */
static enum backend_status put_cond(const char *key, const char *data, const char *etag,
                                    const struct backend_cond *c)
{
    struct backend_put *p;
    enum backend_status st = backend_put_begin(g_b, "bkt", key, &p);
    if (st != BACKEND_OK)
        return st;
    st = backend_put_write(p, data, strlen(data));
    if (st != BACKEND_OK) {
        backend_put_abort(p);
        return st;
    }
    backend_put_set_cond(p, c);
    struct obj_meta m = { 0 };
    snprintf(m.etag, sizeof m.etag, "%s", etag);
    return backend_put_commit(p, &m, NULL);
}

/* The stored bytes of key (at most cap-1) into buf; "" when missing. */
static void body_of(const char *key, char *buf, size_t cap)
{
    struct obj_meta m;
    struct backend_obj *o;
    buf[0] = '\0';
    if (backend_object_open(g_b, "bkt", key, &m, &o) != BACKEND_OK)
        return;
    size_t got = 0;
    CU_ASSERT_EQUAL(backend_obj_read(o, 0, buf, cap - 1, &got), BACKEND_OK);
    buf[got] = '\0';
    backend_obj_close(o);
    obj_meta_clear(&m);
}

#define E1 "11111111111111111111111111111111"
#define E2 "22222222222222222222222222222222"
#define EA "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static void put_conditions_table(void)
{
    CU_ASSERT_EQUAL_FATAL(put_cond("k", "one", E1, NULL), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(put_cond("a", "A", EA, NULL), BACKEND_OK);
    struct backend_cond star = if_match("*"), none = if_match(""), wrong = if_match(E2),
                        right = if_match(E1), upper = if_match("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    static char body[64];
    const struct {
        const char *key;
        const struct backend_cond *c;
        enum backend_status want;
        const char *body_after;   /* what the key holds afterwards */
    } cases[] = {
        { "k", &absent, BACKEND_PRECONDITION_FAILED, "one" },
        { "new", &absent, BACKEND_OK, "x" },
        { "k", &wrong, BACKEND_PRECONDITION_FAILED, "one" },
        { "k", &none, BACKEND_PRECONDITION_FAILED, "one" },
        { "missing", &right, BACKEND_NO_KEY, "" },
        { "missing", &star, BACKEND_NO_KEY, "" },
        { "k", &star, BACKEND_OK, "x" },
        { "a", &upper, BACKEND_OK, "x" },          /* ETags compare case-insensitively */
        { "dir/deep/k", &absent, BACKEND_OK, "x" },
        { "dir/deep/k", &absent, BACKEND_PRECONDITION_FAILED, "x" },
    };
    for (size_t i = 0; i < CU_N(cases); i++) {
        enum backend_status st = put_cond(cases[i].key, "x", E2, cases[i].c);
        if (st != cases[i].want)
            fprintf(stderr, "case %zu: %s, want %s\n", i, backend_status_name(st),
                    backend_status_name(cases[i].want));
        CU_ASSERT_EQUAL(st, cases[i].want);
        body_of(cases[i].key, body, sizeof body);
        CU_ASSERT_STRING_EQUAL(body, cases[i].body_after);
    }
    /* the stored E1 is gone (k now holds E2): If-Match E1 fails, E2 holds */
    CU_ASSERT_EQUAL(put_cond("k", "y", E1, &right), BACKEND_PRECONDITION_FAILED);
    struct backend_cond now = if_match(E2);
    CU_ASSERT_EQUAL(put_cond("k", "y", E1, &now), BACKEND_OK);
    body_of("k", body, sizeof body);
    CU_ASSERT_STRING_EQUAL(body, "y");
    /* a failed condition leaves no parent directory and no temp file behind */
    CU_ASSERT_EQUAL(put_cond("nodir/x", "z", E1, &right), BACKEND_NO_KEY);
    char p[160];
    snprintf(p, sizeof p, "%s/data/bkt/nodir", g_tmp);
    CU_ASSERT_NOT_EQUAL(access(p, F_OK), 0);
}

static void copy_conditions_on_the_destination(void)
{
    CU_ASSERT_EQUAL_FATAL(put_cond("src", "source", E1, NULL), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(put_cond("dst", "old", E2, NULL), BACKEND_OK);
    struct backend_cond wrong = if_match(E1), right = if_match(E2);
    char body[64];
    CU_ASSERT_EQUAL(backend_object_copy_cond(g_b, "bkt", "src", "bkt", "dst", NULL, NULL,
                                             &absent, NULL), BACKEND_PRECONDITION_FAILED);
    CU_ASSERT_EQUAL(backend_object_copy_cond(g_b, "bkt", "src", "bkt", "dst", NULL, NULL,
                                             &wrong, NULL), BACKEND_PRECONDITION_FAILED);
    CU_ASSERT_EQUAL(backend_object_copy_cond(g_b, "bkt", "src", "bkt", "nodst", NULL, NULL,
                                             &right, NULL), BACKEND_NO_KEY);
    body_of("dst", body, sizeof body);
    CU_ASSERT_STRING_EQUAL(body, "old");
    CU_ASSERT_EQUAL(backend_object_copy_cond(g_b, "bkt", "src", "bkt", "dst", NULL, NULL,
                                             &right, NULL), BACKEND_OK);
    body_of("dst", body, sizeof body);
    CU_ASSERT_STRING_EQUAL(body, "source");
    CU_ASSERT_EQUAL(backend_object_copy_cond(g_b, "bkt", "src", "bkt", "fresh", NULL, NULL,
                                             &absent, NULL), BACKEND_OK);
    body_of("fresh", body, sizeof body);
    CU_ASSERT_STRING_EQUAL(body, "source");
}

/* An upload of `key` with one part "part"; its id into id. */
static void one_part_upload(const char *key, char id[BACKEND_UPLOAD_ID_MAX],
                            struct backend_part *part)
{
    struct obj_meta m = { 0 };
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", key, &m, id), BACKEND_OK);
    struct backend_put *p;
    CU_ASSERT_EQUAL_FATAL(backend_mpu_part_begin(g_b, "bkt", key, id, 1, &p), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_put_write(p, "part", 4), BACKEND_OK);
    snprintf(m.etag, sizeof m.etag, "%s", E1);
    CU_ASSERT_EQUAL_FATAL(backend_put_commit(p, &m, NULL), BACKEND_OK);
    memset(part, 0, sizeof *part);
    part->part_no = 1;
    snprintf(part->etag, sizeof part->etag, "%s", E1);
}

static void complete_conditions_keep_the_upload_when_they_fail(void)
{
    CU_ASSERT_EQUAL_FATAL(put_cond("mp", "old", E2, NULL), BACKEND_OK);
    char id[BACKEND_UPLOAD_ID_MAX];
    struct backend_part part;
    one_part_upload("mp", id, &part);
    struct backend_cond wrong = if_match(E1), right = if_match(E2);
    char body[64];
    CU_ASSERT_EQUAL(backend_mpu_complete_cond(g_b, "bkt", "mp", id, &part, 1, NULL, &absent,
                                              NULL), BACKEND_PRECONDITION_FAILED);
    CU_ASSERT_EQUAL(backend_mpu_complete_cond(g_b, "bkt", "mp", id, &part, 1, NULL, &wrong,
                                              NULL), BACKEND_PRECONDITION_FAILED);
    body_of("mp", body, sizeof body);
    CU_ASSERT_STRING_EQUAL(body, "old");
    struct obj_meta um;
    CU_ASSERT_EQUAL(backend_mpu_head(g_b, "bkt", "mp", id, &um), BACKEND_OK);   /* still there */
    obj_meta_clear(&um);
    CU_ASSERT_EQUAL(backend_mpu_complete_cond(g_b, "bkt", "mp", id, &part, 1, NULL, &right,
                                              NULL), BACKEND_OK);
    body_of("mp", body, sizeof body);
    CU_ASSERT_STRING_EQUAL(body, "part");
    /* If-Match on a key with no object: NoSuchKey; If-None-Match: * there: made */
    one_part_upload("mp2", id, &part);
    CU_ASSERT_EQUAL(backend_mpu_complete_cond(g_b, "bkt", "mp2", id, &part, 1, NULL, &right,
                                              NULL), BACKEND_NO_KEY);
    CU_ASSERT_EQUAL(backend_mpu_complete_cond(g_b, "bkt", "mp2", id, &part, 1, NULL, &absent,
                                              NULL), BACKEND_OK);
}

/* ---- races: threads released together at the commit ---- */

enum { RACERS = 8, ROUNDS = 10, CAS_THREADS = 4, CAS_EACH = 25 };

struct racer {
    pthread_barrier_t *start;
    const char *key;
    int id;
    enum backend_status st;
};

static void *race_put(void *arg)
{
    struct racer *r = arg;
    struct backend_put *p;
    r->st = backend_put_begin(g_b, "bkt", r->key, &p);
    char data[16];
    snprintf(data, sizeof data, "writer %d", r->id);
    if (r->st == BACKEND_OK)
        r->st = backend_put_write(p, data, strlen(data));
    pthread_barrier_wait(r->start);   /* every writer has its temp file: go */
    if (r->st != BACKEND_OK)
        return NULL;
    backend_put_set_cond(p, &absent);
    struct obj_meta m = { 0 };
    snprintf(m.etag, sizeof m.etag, "%032d", r->id);
    r->st = backend_put_commit(p, &m, NULL);
    return NULL;
}

static void racing_if_none_match_puts_have_one_winner(void)
{
    pthread_barrier_t start;
    for (int round = 0; round < ROUNDS; round++) {
        char key[32];
        snprintf(key, sizeof key, "race/%d", round);
        pthread_barrier_init(&start, NULL, RACERS);
        struct racer rs[RACERS];
        pthread_t th[RACERS];
        for (int i = 0; i < RACERS; i++) {
            rs[i] = (struct racer){ &start, key, i, BACKEND_IO };
            CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, race_put, &rs[i]), 0);
        }
        int wins = 0, refused = 0, winner = -1;
        for (int i = 0; i < RACERS; i++) {
            pthread_join(th[i], NULL);
            if (rs[i].st == BACKEND_OK) {
                wins++;
                winner = i;
            }
            refused += rs[i].st == BACKEND_PRECONDITION_FAILED;
        }
        pthread_barrier_destroy(&start);
        CU_ASSERT_EQUAL(wins, 1);
        CU_ASSERT_EQUAL(refused, RACERS - 1);
        char body[32], want[32];
        body_of(key, body, sizeof body);
        snprintf(want, sizeof want, "writer %d", winner);
        CU_ASSERT_STRING_EQUAL(body, want);   /* the winner's bytes, nobody else's */
    }
}

/* Compare-and-swap: read the counter and its ETag, write counter+1 with
 * If-Match on that ETag, retry on 412. A lost update would show as a final
 * count below the number of successful writes. CUnit is not thread-safe:
 * the threads count, the test thread asserts. */
struct cas {
    int ok;        /* successful increments */
    int errors;    /* answers other than OK and PRECONDITION_FAILED */
};

/* One compare-and-swap attempt on "counter": its status. */
static enum backend_status cas_once(void)
{
    struct obj_meta m;
    struct backend_obj *o;
    enum backend_status st = backend_object_open(g_b, "bkt", "counter", &m, &o);
    if (st != BACKEND_OK)
        return st;
    char buf[32];
    size_t got = 0;
    st = backend_obj_read(o, 0, buf, sizeof buf - 1, &got);
    backend_obj_close(o);
    buf[got] = '\0';
    struct backend_cond c = if_match(m.etag);
    obj_meta_clear(&m);
    if (st != BACKEND_OK)
        return st;
    int next = atoi(buf) + 1;
    char data[32], etag[40];
    snprintf(data, sizeof data, "%d", next);
    snprintf(etag, sizeof etag, "%032d", next);   /* one ETag per value */
    return put_cond("counter", data, etag, &c);
}

static void *cas_increments(void *arg)
{
    struct cas *c = arg;
    while (c->ok < CAS_EACH && c->errors == 0) {
        enum backend_status st = cas_once();
        c->ok += st == BACKEND_OK;
        c->errors += st != BACKEND_OK && st != BACKEND_PRECONDITION_FAILED;
    }
    return NULL;
}

static void racing_if_match_updates_lose_nothing(void)
{
    char zero[40];
    snprintf(zero, sizeof zero, "%032d", 0);
    CU_ASSERT_EQUAL_FATAL(put_cond("counter", "0", zero, NULL), BACKEND_OK);
    pthread_t th[CAS_THREADS];
    struct cas cs[CAS_THREADS];
    memset(cs, 0, sizeof cs);
    for (int i = 0; i < CAS_THREADS; i++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, cas_increments, &cs[i]), 0);
    for (int i = 0; i < CAS_THREADS; i++) {
        pthread_join(th[i], NULL);
        CU_ASSERT_EQUAL(cs[i].errors, 0);
        CU_ASSERT_EQUAL(cs[i].ok, CAS_EACH);
    }
    char body[32];
    body_of("counter", body, sizeof body);
    CU_ASSERT_EQUAL(atoi(body), CAS_THREADS * CAS_EACH);
}

static void key_lock_slots_are_stable_and_spread(void)
{
    CU_ASSERT_EQUAL(posix_key_lock_slot("b", "k"), posix_key_lock_slot("b", "k"));
    CU_ASSERT(posix_key_lock_slot("b", "k") < POSIX_KEY_LOCKS);
    bool seen[POSIX_KEY_LOCKS] = { false };
    unsigned distinct = 0;
    for (int i = 0; i < 1000; i++) {
        char k[16];
        snprintf(k, sizeof k, "shard-%04d", i);
        unsigned s = posix_key_lock_slot("bkt", k);
        distinct += !seen[s];
        seen[s] = true;
    }
    CU_ASSERT(distinct > POSIX_KEY_LOCKS / 2);
}

static void s3_tier_sends_the_condition_header(void)
{
    char line[S3_COND_LINE_MAX];
    CU_ASSERT_FALSE(s3_cond_line(NULL, line));
    struct backend_cond none = { BACKEND_COND_NONE, "" }, m = if_match(E1), star = if_match("*");
    CU_ASSERT_FALSE(s3_cond_line(&none, line));
    CU_ASSERT_TRUE(s3_cond_line(&absent, line));
    CU_ASSERT_STRING_EQUAL(line, "If-None-Match: *");
    CU_ASSERT_TRUE(s3_cond_line(&m, line));
    CU_ASSERT_STRING_EQUAL(line, "If-Match: \"" E1 "\"");
    CU_ASSERT_TRUE(s3_cond_line(&star, line));
    CU_ASSERT_STRING_EQUAL(line, "If-Match: *");
    CU_ASSERT_EQUAL(s3_status_from_code("PreconditionFailed", 412), BACKEND_PRECONDITION_FAILED);
    CU_ASSERT_EQUAL(s3_status_from_code("", 412), BACKEND_PRECONDITION_FAILED);
    CU_ASSERT_EQUAL(s3_status_from_code("ConditionalRequestConflict", 409),
                    BACKEND_COND_CONFLICT);
}

#define TEST(f) { #f, f }
static const struct cu_test pure_tests[] = {
    TEST(key_lock_slots_are_stable_and_spread),
    TEST(s3_tier_sends_the_condition_header),
}, posix_tests[] = {
    TEST(put_conditions_table),
    TEST(copy_conditions_on_the_destination),
    TEST(complete_conditions_keep_the_upload_when_they_fail),
    TEST(racing_if_none_match_puts_have_one_winner),
    TEST(racing_if_match_updates_lose_nothing),
};

int register_tests(void)
{
    if (cu_add_suite("backend_cond_pure", NULL, NULL, pure_tests, CU_N(pure_tests)) != 0)
        return -1;
    return cu_add_suite("backend_cond_posix", suite_init, suite_clean, posix_tests,
                        CU_N(posix_tests));
}
