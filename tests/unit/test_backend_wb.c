/* tests/unit/test_backend_wb.c - the write-back decorator (backend/wb*.c)
 * over a real posix cold tier, with the uploader held (backend_wb_pause)
 * wherever a test looks at pending state, so nothing here depends on
 * timing: a write is readable and listed at once and reaches the cold tier
 * only through the uploader; uploads keep the order of acknowledgement (the
 * cold tier's commit hook checks that every earlier write is visible before
 * each one); overwrites and deletes supersede; a restart resumes from the
 * journal (a torn tail dropped, orphans swept); multipart objects keep their
 * ETag; the DCP rename (copy + delete of a temporary key) never uploads the
 * temporary object; write-through, max_dirty, conditional writes, and a
 * cold tier that fails and comes back. */
#include "backend.h"
#include "backend_int.h"
#include "posix_int.h"
#include "wb_int.h"

#include <CUnit/CUnit.h>
#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cu.h"

static char g_tmp[64], g_cold_dir[128], g_wb_dir[128];
static struct backend *g_cold_raw;   /* the cold tier itself, for looking */
static struct backend *g_wb;
static uint64_t g_compact;            /* compact_bytes of the next open (0: default) */
static unsigned g_through_ms;         /* through_timeout_ms of the next open (0: default) */
static uint64_t g_bandwidth;          /* upload_bandwidth of the next open (0: no cap) */
static unsigned g_mpu_age;            /* mpu_max_age_s of the next open (0: never) */
static unsigned g_hold_ms;            /* train_hold_ms of the next open (0: default) */
static const struct backend_wb_rules *g_rules;   /* ckpt's prefix rules (NULL: all keys) */

/* ---- the cold tier behind a recorder: which keys were uploaded, in what
 * order, and was every earlier acknowledged key visible at each commit ---- */

static struct backend_ops rec_ops;
static const struct backend_ops *real_ops;
static pthread_mutex_t rec_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_uploaded[256][64];      /* keys, in commit order */
static int g_n_uploaded;
static char g_acked[256][64];         /* keys in the order the test wrote them */
static int g_n_acked;
static int g_order_violations;
static bool g_cold_fails;
/* The key of each PUT being uploaded (several at once: a train of small
 * PUTs, backend/wb_upload.c), by its put. */
static struct {
    const struct backend_put *p;
    char key[64];
} g_putting[16];

static void acked(const char *key)
{
    pthread_mutex_lock(&rec_mu);
    snprintf(g_acked[g_n_acked++], sizeof g_acked[0], "%s", key);
    pthread_mutex_unlock(&rec_mu);
}

/* Is the write acked at i superseded by a later write of its key (a
 * "-key" entry is a delete)? Such a write may be skipped. Under rec_mu. */
static bool superseded(int i)
{
    const char *k = g_acked[i][0] == '-' ? g_acked[i] + 1 : g_acked[i];
    for (int j = i + 1; j < g_n_acked; j++) {
        const char *l = g_acked[j][0] == '-' ? g_acked[j] + 1 : g_acked[j];
        if (strcmp(k, l) == 0)
            return true;
    }
    return false;
}

/* The ordering promise: when key becomes visible, every write acknowledged
 * before it is visible too, unless a later write of its key superseded it. */
static void check_order_before(const char *key)
{
    pthread_mutex_lock(&rec_mu);
    int last = -1;
    for (int i = 0; i < g_n_acked; i++)
        if (strcmp(g_acked[i], key) == 0)
            last = i;
    for (int i = 0; i < last; i++) {
        if (g_acked[i][0] == '-' || superseded(i))
            continue;
        struct obj_meta m;
        memset(&m, 0, sizeof m);
        if (real_ops->object_head(g_cold_raw, "ckpt", g_acked[i], &m) != BACKEND_OK)
            g_order_violations++;
        obj_meta_clear(&m);
    }
    pthread_mutex_unlock(&rec_mu);
}

/* The keys of the PUTs begun, in order (under rec_mu). */
static char g_begun[256][64];
static int g_n_begun;

/* The commit of a PUT of this key waits g_slow_commit_ms first (an answer
 * that is slow to come). Under rec_mu. */
static char g_slow_commit_key[64];
static unsigned g_slow_commit_ms;

static enum backend_status rec_put_begin(struct backend *b, const char *bucket, const char *key,
                                         struct backend_put **out)
{
    if (g_cold_fails)
        return BACKEND_UNAVAILABLE;
    enum backend_status st = real_ops->put_begin(b, bucket, key, out);
    if (st != BACKEND_OK)
        return st;
    (*out)->ops = &rec_ops;   /* its commit comes through the recorder */
    pthread_mutex_lock(&rec_mu);
    size_t i = 0;
    while (i < 16 && g_putting[i].p)
        i++;
    CU_ASSERT_FATAL(i < 16);
    g_putting[i].p = *out;
    snprintf(g_putting[i].key, sizeof g_putting[i].key, "%s", key);
    if (g_n_begun < 256)
        snprintf(g_begun[g_n_begun++], sizeof g_begun[0], "%s", key);
    pthread_mutex_unlock(&rec_mu);
    return st;
}

/* PUTs begun on the cold tier, of key. */
static int times_begun(const char *key)
{
    int n = 0;
    pthread_mutex_lock(&rec_mu);
    for (int i = 0; i < g_n_begun; i++)
        n += strcmp(g_begun[i], key) == 0;
    pthread_mutex_unlock(&rec_mu);
    return n;
}

static enum backend_status rec_mpu_create(struct backend *b, const char *bucket,
                                          const char *key, const struct obj_meta *meta,
                                          char id[BACKEND_UPLOAD_ID_MAX])
{
    if (g_cold_fails)
        return BACKEND_UNAVAILABLE;
    return real_ops->mpu_create(b, bucket, key, meta, id);
}

/* Part uploads to the cold tier: counted; from call g_fail_part_from on
 * (0: never) they fail, only that one call when g_fail_part_once. */
static int g_part_calls, g_part_ok, g_fail_part_from;
static bool g_fail_part_once;

/* A gate: parts of g_gate_key wait (at most 20 s) until a part of
 * g_gate_after has begun; g_gate_timeouts counts waits that ran out. */
static char g_gate_key[64], g_gate_after[64];
static int g_after_parts, g_gate_timeouts;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;

static void part_gate(const char *key)
{
    pthread_mutex_lock(&rec_mu);
    if (g_gate_after[0] && strcmp(key, g_gate_after) == 0) {
        g_after_parts++;
        pthread_cond_broadcast(&gate_cv);
    }
    if (g_gate_key[0] && strcmp(key, g_gate_key) == 0) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 20;
        int rc = 0;
        while (!g_after_parts && rc == 0)
            rc = pthread_cond_timedwait(&gate_cv, &rec_mu, &until);
        g_gate_timeouts += !g_after_parts;
    }
    pthread_mutex_unlock(&rec_mu);
}

/* A cold tier whose part ETags are not the parts' MD5s (S3 with SSE-KMS):
 * with g_opaque_etags, each part's ETag is answered reversed, and the
 * complete turns them back before the store checks them. */
static bool g_opaque_etags;
static struct backend_ops part_ops;

static void reverse_etag(char *e)
{
    for (size_t i = 0, j = strlen(e); i + 1 < j; i++, j--) {
        char t = e[i];
        e[i] = e[j - 1];
        e[j - 1] = t;
    }
}

static enum backend_status rec_part_commit(struct backend_put *p, const struct obj_meta *meta,
                                           struct obj_meta *out)
{
    enum backend_status st = real_ops->put_commit(p, meta, out);
    if (st == BACKEND_OK && out && g_opaque_etags)
        reverse_etag(out->etag);
    return st;
}

static enum backend_status rec_mpu_part_begin(struct backend *b, const char *bucket,
                                              const char *key, const char *upload_id,
                                              unsigned part_no, struct backend_put **out)
{
    part_gate(key);
    pthread_mutex_lock(&rec_mu);
    int k = ++g_part_calls;
    bool fail = g_fail_part_from && k >= g_fail_part_from &&
                (!g_fail_part_once || k == g_fail_part_from);
    if (!fail)
        g_part_ok++;
    pthread_mutex_unlock(&rec_mu);
    if (fail)
        return BACKEND_UNAVAILABLE;
    enum backend_status st = real_ops->mpu_part_begin(b, bucket, key, upload_id, part_no, out);
    if (st == BACKEND_OK && g_opaque_etags)
        (*out)->ops = &part_ops;
    return st;
}

/* Object bytes written to the cold tier: counted, each call slowed by
 * g_slow_write_ms (a slow link). */
static int g_writes;
static unsigned g_slow_write_ms;

static enum backend_status rec_put_write(struct backend_put *p, const void *buf, size_t len)
{
    __atomic_fetch_add(&g_writes, 1, __ATOMIC_RELAXED);
    unsigned ms = __atomic_load_n(&g_slow_write_ms, __ATOMIC_RELAXED);
    if (ms)
        usleep(ms * 1000u);
    return real_ops->put_write(p, buf, len);
}

static void uploaded(const char *key)
{
    check_order_before(key);
    pthread_mutex_lock(&rec_mu);
    snprintf(g_uploaded[g_n_uploaded++], sizeof g_uploaded[0], "%s", key);
    pthread_mutex_unlock(&rec_mu);
}

/* The key of put p, forgotten: its commit or abort. */
static void put_key_take(const struct backend_put *p, char key[64])
{
    pthread_mutex_lock(&rec_mu);
    key[0] = '\0';
    for (size_t i = 0; i < 16; i++)
        if (g_putting[i].p == p) {
            memcpy(key, g_putting[i].key, 64);
            g_putting[i].p = NULL;
        }
    pthread_mutex_unlock(&rec_mu);
}

/* The commit of a PUT of this key fails (UNAVAILABLE; "": none). Under rec_mu. */
static char g_fail_commit_key[64];

static enum backend_status rec_put_commit(struct backend_put *p, const struct obj_meta *meta,
                                          struct obj_meta *out)
{
    char key[64];
    put_key_take(p, key);
    pthread_mutex_lock(&rec_mu);
    bool fail = strcmp(key, g_fail_commit_key) == 0;
    unsigned slow = strcmp(key, g_slow_commit_key) == 0 ? g_slow_commit_ms : 0;
    pthread_mutex_unlock(&rec_mu);
    if (slow)
        usleep(slow * 1000u);
    if (fail) {
        real_ops->put_abort(p);
        return BACKEND_UNAVAILABLE;
    }
    uploaded(key);   /* objects only: parts keep the store's own ops */
    return real_ops->put_commit(p, meta, out);
}

static void rec_put_abort(struct backend_put *p)
{
    char key[64];
    put_key_take(p, key);
    real_ops->put_abort(p);
}

static enum backend_status rec_mpu_complete(struct backend *b, const char *bucket,
                                            const char *key, const char *upload_id,
                                            const struct backend_part *parts, size_t n,
                                            const struct obj_meta *meta,
                                            const struct backend_cond *cond,
                                            struct obj_meta *out)
{
    uploaded(key);
    if (!g_opaque_etags || n > 64)
        return real_ops->mpu_complete(b, bucket, key, upload_id, parts, n, meta, cond, out);
    struct backend_part real[64];
    memcpy(real, parts, n * sizeof *parts);
    for (size_t i = 0; i < n; i++)
        reverse_etag(real[i].etag);
    return real_ops->mpu_complete(b, bucket, key, upload_id, real, n, meta, cond, out);
}

static int times_uploaded(const char *key)
{
    int n = 0;
    pthread_mutex_lock(&rec_mu);
    for (int i = 0; i < g_n_uploaded; i++)
        n += strcmp(g_uploaded[i], key) == 0;
    pthread_mutex_unlock(&rec_mu);
    return n;
}

/* ---- fixture ---- */

static struct backend *open_wb(uint64_t max_dirty)
{
    struct backend_posix_conf pc = { .root = g_cold_dir };
    struct backend *cold = NULL;
    CU_ASSERT_EQUAL_FATAL(backend_posix_open(&pc, &cold), BACKEND_OK);
    real_ops = cold->ops;
    rec_ops = *real_ops;
    rec_ops.put_begin = rec_put_begin;
    rec_ops.put_commit = rec_put_commit;
    rec_ops.put_abort = rec_put_abort;
    rec_ops.put_write = rec_put_write;
    rec_ops.mpu_create = rec_mpu_create;
    rec_ops.mpu_complete = rec_mpu_complete;
    rec_ops.mpu_part_begin = rec_mpu_part_begin;
    part_ops = *real_ops;
    part_ops.put_commit = rec_part_commit;
    cold->ops = &rec_ops;
    g_cold_raw = cold;
    static const char *const buckets[] = { "ckpt" };
    char err[512] = "";
    struct backend_wb_conf wc = { .dir = g_wb_dir, .buckets = buckets, .n_buckets = 1,
                                  .max_dirty = max_dirty, .dirty_wait_ms = 200,
                                  .compact_bytes = g_compact,
                                  .through_timeout_ms = g_through_ms,
                                  .upload_bandwidth = g_bandwidth,
                                  .mpu_max_age_s = g_mpu_age, .rules = g_rules,
                                  .train_hold_ms = g_hold_ms,
                                  .err = err, .err_len = sizeof err };
    struct backend *w = NULL;
    enum backend_status st = backend_wb_open(&wc, cold, &w);
    if (st != BACKEND_OK)
        fprintf(stderr, "backend_wb_open: %s: %s\n", backend_status_name(st), err);
    CU_ASSERT_EQUAL_FATAL(st, BACKEND_OK);
    return w;
}

static void setup_with(uint64_t max_dirty)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sgwb.XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(g_tmp));
    snprintf(g_cold_dir, sizeof g_cold_dir, "%s/cold", g_tmp);
    snprintf(g_wb_dir, sizeof g_wb_dir, "%s/wb", g_tmp);
    struct backend_posix_conf pc = { .root = g_cold_dir };
    struct backend *cold = NULL;
    CU_ASSERT_EQUAL_FATAL(backend_posix_open(&pc, &cold), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(backend_bucket_create(cold, "ckpt"), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(backend_bucket_create(cold, "plain"), BACKEND_OK);
    backend_close(cold);
    g_n_uploaded = g_n_acked = g_order_violations = 0;
    g_compact = 0;
    g_through_ms = 0;
    g_bandwidth = 0;
    g_mpu_age = 0;
    g_hold_ms = 0;
    g_n_begun = 0;
    g_slow_commit_key[0] = '\0';
    g_slow_commit_ms = 0;
    g_rules = NULL;
    g_writes = 0;
    g_slow_write_ms = 0;
    g_part_calls = g_part_ok = g_fail_part_from = 0;
    g_gate_key[0] = g_gate_after[0] = 0;
    g_after_parts = g_gate_timeouts = 0;
    g_fail_part_once = false;
    g_opaque_etags = false;
    g_cold_fails = false;
    g_wb = open_wb(max_dirty);
}

static void setup(void)
{
    setup_with(0);
}

static void teardown(void)
{
    backend_close(g_wb);
    g_wb = NULL;
    cu_rm_tree(g_tmp);
}

static void md5_of(const void *buf, size_t len, char out[33])
{
    unsigned char md[16];
    unsigned int ml = 0;
    EVP_Digest(buf, len, md, &ml, EVP_md5(), NULL);
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static unsigned char *pattern(size_t n, unsigned seed)
{
    unsigned char *p = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 31u + seed * 7u + (i >> 9));
    return p;
}

static enum backend_status put_ex(struct backend *b, const char *bucket, const char *key,
                                  const void *data, size_t n, bool through,
                                  const struct backend_cond *cond, struct obj_meta *out)
{
    struct backend_put *p = NULL;
    enum backend_status st = backend_put_begin(b, bucket, key, &p);
    if (st != BACKEND_OK)
        return st;
    if (n)
        st = backend_put_write(p, data, n);
    if (st != BACKEND_OK) {
        backend_put_abort(p);
        return st;
    }
    if (through)
        backend_put_set_write_through(p);
    if (cond)
        backend_put_set_cond(p, cond);
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    md5_of(data, n, m.etag);
    obj_meta_add_hdr(&m, "content-type", "application/x-test");
    st = backend_put_commit(p, &m, out);
    obj_meta_clear(&m);
    return st;
}

static enum backend_status put(const char *key, const void *data, size_t n)
{
    enum backend_status st = put_ex(g_wb, "ckpt", key, data, n, false, NULL, NULL);
    if (st == BACKEND_OK)
        acked(key);
    return st;
}

/* Reads a whole object through b; NULL when it cannot be opened. */
static unsigned char *read_all(struct backend *b, const char *bucket, const char *key,
                               size_t *n, struct obj_meta *meta)
{
    struct backend_obj *o = NULL;
    memset(meta, 0, sizeof *meta);
    if (backend_object_open(b, bucket, key, meta, &o) != BACKEND_OK)
        return NULL;
    unsigned char *buf = malloc(meta->size ? meta->size : 1);
    size_t off = 0, got = 1;
    while (off < meta->size && got) {
        if (backend_obj_read(o, off, buf + off, meta->size - off, &got) != BACKEND_OK)
            break;
        off += got;
    }
    backend_obj_close(o);
    *n = off;
    return buf;
}

static bool holds(struct backend *b, const char *key, const void *data, size_t n)
{
    struct obj_meta m;
    size_t got = 0;
    unsigned char *buf = read_all(b, "ckpt", key, &got, &m);
    bool same = buf && got == n && memcmp(buf, data, n) == 0;
    free(buf);
    obj_meta_clear(&m);
    return same;
}

/* Does the cold tier hold key with this ETag? */
static bool cold_etag_is(const char *key, const char *etag)
{
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    bool same = real_ops->object_head(g_cold_raw, "ckpt", key, &m) == BACKEND_OK &&
                strcmp(m.etag, etag) == 0;
    if (!same)
        fprintf(stderr, "cold tier: %s has ETag \"%s\", want \"%s\"\n", key, m.etag, etag);
    obj_meta_clear(&m);
    return same;
}

/* Waits (bounded: 10 s) until an upload has failed; the status then. */
static struct backend_wb_status wait_upload_failure(void)
{
    struct backend_wb_status s;
    for (int i = 0; i < 1000; i++) {
        backend_wb_status(g_wb, "ckpt", NULL, &s);
        if (s.failures)
            break;
        usleep(10000);
    }
    return s;
}

static bool cold_has(const char *key)
{
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    enum backend_status st = real_ops->object_head(g_cold_raw, "ckpt", key, &m);
    obj_meta_clear(&m);
    return st == BACKEND_OK;
}

static bool flush_all(void)
{
    return backend_wb_flush(g_wb, "ckpt", NULL, 20000, NULL, NULL);
}

/* ---- tests ---- */

static void a_write_is_read_at_once_and_reaches_the_cold_tier_by_the_uploader(void)
{
    setup();
    backend_wb_pause(g_wb, true);
    size_t n = 300000;
    unsigned char *src = pattern(n, 1);
    CU_ASSERT_EQUAL(put("shard-0", src, n), BACKEND_OK);
    CU_ASSERT_FALSE(cold_has("shard-0"));
    CU_ASSERT_TRUE(holds(g_wb, "shard-0", src, n));
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    CU_ASSERT_EQUAL(backend_object_head(g_wb, "ckpt", "shard-0", &m), BACKEND_OK);
    char md5[33];
    md5_of(src, n, md5);
    CU_ASSERT_STRING_EQUAL(m.etag, md5);
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&m, "content-type"), "application/x-test");
    obj_meta_clear(&m);
    struct backend_wb_status s;
    CU_ASSERT_TRUE(backend_wb_status(g_wb, "ckpt", NULL, &s));
    CU_ASSERT_EQUAL(s.dirty_objects, 1);
    CU_ASSERT_EQUAL(s.dirty_bytes, n);
    CU_ASSERT_FALSE(backend_wb_flush(g_wb, "ckpt", NULL, 100, NULL, NULL));   /* held */

    backend_wb_pause(g_wb, false);
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_TRUE(holds(g_cold_raw, "shard-0", src, n));
    memset(&m, 0, sizeof m);
    CU_ASSERT_EQUAL(real_ops->object_head(g_cold_raw, "ckpt", "shard-0", &m), BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(m.etag, md5);
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&m, "content-type"), "application/x-test");
    obj_meta_clear(&m);
    backend_wb_status(g_wb, "ckpt", NULL, &s);
    CU_ASSERT_EQUAL(s.dirty_objects, 0);
    CU_ASSERT_EQUAL(s.uploaded_objects, 1);
    CU_ASSERT_EQUAL(s.uploaded_bytes, n);
    /* the staged copy is gone once uploaded; reads now come from the cold tier */
    CU_ASSERT_TRUE(holds(g_wb, "shard-0", src, n));
    free(src);
    teardown();
}

static void other_buckets_pass_through(void)
{
    setup();
    backend_wb_pause(g_wb, true);
    CU_ASSERT_EQUAL(put_ex(g_wb, "plain", "x", "abc", 3, false, NULL, NULL), BACKEND_OK);
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    CU_ASSERT_EQUAL(real_ops->object_head(g_cold_raw, "plain", "x", &m), BACKEND_OK);
    obj_meta_clear(&m);
    CU_ASSERT_FALSE(backend_wb_bucket(g_wb, "plain"));
    CU_ASSERT_TRUE(backend_wb_bucket(g_wb, "ckpt"));
    teardown();
}

static void uploads_keep_the_order_of_acknowledgement(void)
{
    setup();
    backend_wb_pause(g_wb, true);
    char key[32];
    unsigned char *src = pattern(200000, 2);
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "rank%d/shard-%02d", i % 4, i);
        CU_ASSERT_EQUAL(put(key, src, (size_t)(1000 + 4000 * (i % 7))), BACKEND_OK);
    }
    CU_ASSERT_EQUAL(put(".metadata", "commit", 6), BACKEND_OK);
    backend_wb_pause(g_wb, false);
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_EQUAL(g_n_uploaded, 41);
    CU_ASSERT_EQUAL(g_order_violations, 0);
    for (int i = 0; i < g_n_uploaded && i < g_n_acked; i++)
        CU_ASSERT_STRING_EQUAL(g_uploaded[i], g_acked[i]);
    free(src);
    teardown();
}

/* Small PUTs go up in trains, each ending after the one before it: a PUT
 * whose predecessor failed ends without becoming visible, and so does the
 * rest of its train; all go up, in order, once the failed one does. */
static void a_train_stops_behind_a_put_that_fails(void)
{
    setup();
    backend_wb_pause(g_wb, true);
    char key[32];
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof key, "t%d", i);
        CU_ASSERT_EQUAL(put(key, key, strlen(key)), BACKEND_OK);
    }
    pthread_mutex_lock(&rec_mu);
    snprintf(g_fail_commit_key, sizeof g_fail_commit_key, "t1");
    pthread_mutex_unlock(&rec_mu);
    backend_wb_pause(g_wb, false);
    struct backend_wb_status s = wait_upload_failure();
    CU_ASSERT_TRUE(s.failures >= 1);
    usleep(300000);   /* the rest of a train would have ended by now */
    CU_ASSERT_TRUE(cold_has("t0"));
    for (int i = 1; i < 6; i++) {
        snprintf(key, sizeof key, "t%d", i);
        CU_ASSERT_FALSE(cold_has(key));
    }
    pthread_mutex_lock(&rec_mu);
    g_fail_commit_key[0] = '\0';
    pthread_mutex_unlock(&rec_mu);
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_EQUAL(g_n_uploaded, 6);
    CU_ASSERT_EQUAL(g_order_violations, 0);
    for (int i = 0; i < g_n_uploaded && i < g_n_acked; i++)
        CU_ASSERT_STRING_EQUAL(g_uploaded[i], g_acked[i]);
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof key, "t%d", i);
        CU_ASSERT_TRUE(holds(g_cold_raw, key, key, strlen(key)));
    }
    teardown();
}

/* A PUT in a train waits for the one before it at most train_hold_ms: the
 * head's answer takes longer, so the rest stop without their commit (here,
 * a directory cold tier: the rename) and go again in their turn, in order. */
static void a_train_put_that_waits_too_long_stops_and_goes_again(void)
{
    setup();
    backend_close(g_wb);
    g_hold_ms = 150;
    g_wb = open_wb(0);
    backend_wb_pause(g_wb, true);
    char key[32];
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "h%d", i);
        CU_ASSERT_EQUAL(put(key, key, strlen(key)), BACKEND_OK);
    }
    pthread_mutex_lock(&rec_mu);
    snprintf(g_slow_commit_key, sizeof g_slow_commit_key, "h0");
    g_slow_commit_ms = 1000;
    pthread_mutex_unlock(&rec_mu);
    backend_wb_pause(g_wb, false);
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_EQUAL(g_n_uploaded, 4);
    CU_ASSERT_EQUAL(g_order_violations, 0);
    for (int i = 0; i < g_n_uploaded && i < g_n_acked; i++)
        CU_ASSERT_STRING_EQUAL(g_uploaded[i], g_acked[i]);
    /* h1 rode in h0's train, gave up after 150 ms, and went again */
    CU_ASSERT_TRUE(times_begun("h1") >= 2);
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "h%d", i);
        CU_ASSERT_EQUAL(times_uploaded(key), 1);
        CU_ASSERT_TRUE(holds(g_cold_raw, key, key, strlen(key)));
    }
    teardown();
}

static void overwrites_and_deletes_supersede_pending_writes(void)
{
    setup();
    unsigned char *v1 = pattern(5000, 3), *v2 = pattern(7000, 4);
    CU_ASSERT_EQUAL(put_ex(g_wb, "plain", "keep", "k", 1, false, NULL, NULL), BACKEND_OK);
    CU_ASSERT_EQUAL(put("old", "in the cold tier", 16), BACKEND_OK);
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_TRUE(cold_has("old"));

    backend_wb_pause(g_wb, true);
    CU_ASSERT_EQUAL(put("a", v1, 5000), BACKEND_OK);
    CU_ASSERT_EQUAL(put("a", v2, 7000), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_object_delete(g_wb, "ckpt", "old"), BACKEND_OK);
    acked("-old");
    CU_ASSERT_EQUAL(put("c", "cc", 2), BACKEND_OK);
    CU_ASSERT_TRUE(holds(g_wb, "a", v2, 7000));
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    CU_ASSERT_EQUAL(backend_object_head(g_wb, "ckpt", "old", &m), BACKEND_NO_KEY);
    CU_ASSERT_TRUE(cold_has("old"));   /* until the delete is uploaded */

    struct backend_list_req req = { .prefix = "", .max_keys = 1000 };
    struct backend_list_page pg;
    CU_ASSERT_EQUAL_FATAL(backend_list_objects(g_wb, "ckpt", &req, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL(pg.n_objs, 2);
    if (pg.n_objs == 2) {
        CU_ASSERT_STRING_EQUAL(pg.objs[0].key, "a");
        CU_ASSERT_EQUAL(pg.objs[0].size, 7000);
        CU_ASSERT_STRING_EQUAL(pg.objs[1].key, "c");
    }
    backend_list_page_free(&pg);

    backend_wb_pause(g_wb, false);
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_TRUE(holds(g_cold_raw, "a", v2, 7000));
    CU_ASSERT_FALSE(cold_has("old"));
    CU_ASSERT_TRUE(cold_has("c"));
    CU_ASSERT_EQUAL(times_uploaded("a"), 1);   /* v1 was never sent */
    CU_ASSERT_EQUAL(g_order_violations, 0);
    free(v1);
    free(v2);
    teardown();
}

static int journal_append_garbage(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/journal", g_wb_dir);
    int fd = open(path, O_WRONLY | O_APPEND);
    if (fd < 0)
        return -1;
    static const unsigned char torn[] = { 0x40, 0, 0, 0, 1, 2, 3, 4, 1, 9, 9 };
    ssize_t k = write(fd, torn, sizeof torn);
    close(fd);
    return k == (ssize_t)sizeof torn ? 0 : -1;
}

static int stage_orphan(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/data/ckpt/00000000000fffff", g_wb_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    ssize_t k = write(fd, "orphan", 6);
    close(fd);
    return k == 6 ? 0 : -1;
}

static void a_restart_resumes_pending_uploads_from_the_journal(void)
{
    setup();
    backend_wb_pause(g_wb, true);
    size_t n = 123457;
    unsigned char *src = pattern(n, 5);
    CU_ASSERT_EQUAL(put("x", src, n), BACKEND_OK);
    CU_ASSERT_EQUAL(put("y", "why", 3), BACKEND_OK);
    CU_ASSERT_EQUAL(put("x", src, n - 1), BACKEND_OK);   /* the latest x is n - 1 bytes */
    backend_close(g_wb);   /* nothing was uploaded */
    g_wb = NULL;
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "%s/ckpt/x", g_cold_dir);
    CU_ASSERT_NOT_EQUAL(stat(path, &st), 0);   /* not in the cold tier */
    CU_ASSERT_EQUAL(journal_append_garbage(), 0);   /* a torn last append */
    CU_ASSERT_EQUAL(stage_orphan(), 0);             /* staged, never journaled */

    g_wb = open_wb(0);
    CU_ASSERT_TRUE(holds(g_wb, "x", src, n - 1));   /* pending, read from staging */
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_TRUE(holds(g_cold_raw, "x", src, n - 1));
    CU_ASSERT_TRUE(holds(g_cold_raw, "y", "why", 3));
    CU_ASSERT_EQUAL(times_uploaded("x"), 1);
    snprintf(path, sizeof path, "%s/data/ckpt/00000000000fffff", g_wb_dir);
    CU_ASSERT_NOT_EQUAL(stat(path, &st), 0);   /* the orphan was swept */
    /* and a third start finds nothing pending */
    backend_close(g_wb);
    g_wb = open_wb(0);
    struct backend_wb_status s;
    backend_wb_status(g_wb, NULL, NULL, &s);
    CU_ASSERT_EQUAL(s.dirty_objects, 0);
    free(src);
    teardown();
}

static void listings_merge_pending_writes_page_by_page(void)
{
    setup();
    CU_ASSERT_EQUAL(put("d/1", "1", 1), BACKEND_OK);
    CU_ASSERT_EQUAL(put("e", "e", 1), BACKEND_OK);
    CU_ASSERT_EQUAL(put("g", "g", 1), BACKEND_OK);
    CU_ASSERT_EQUAL(put("j", "j", 1), BACKEND_OK);
    CU_ASSERT_TRUE(flush_all());
    backend_wb_pause(g_wb, true);
    CU_ASSERT_EQUAL(put("d/2", "2", 1), BACKEND_OK);
    CU_ASSERT_EQUAL(put("f", "ff", 2), BACKEND_OK);
    CU_ASSERT_EQUAL(put("h", "h", 1), BACKEND_OK);
    CU_ASSERT_EQUAL(put("k/1", "k", 1), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_object_delete(g_wb, "ckpt", "e"), BACKEND_OK);

    /* whole: d/ (a cold and a pending key under it), f, g, h, j, k/ */
    static const char *const want[] = { "d/", "f", "g", "h", "j", "k/" };
    struct backend_list_req req = { .prefix = "", .delimiter = "/", .max_keys = 1000 };
    struct backend_list_page pg;
    CU_ASSERT_EQUAL_FATAL(backend_list_objects(g_wb, "ckpt", &req, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL(pg.n_objs, 4);
    CU_ASSERT_EQUAL(pg.n_prefixes, 2);
    CU_ASSERT_FALSE(pg.truncated);
    backend_list_page_free(&pg);

    /* page by page (1, 2, 3 at a time): the same entries, once each, in order */
    for (unsigned per = 1; per <= 3; per++) {
        char after[64] = "";
        size_t seen = 0;
        bool more = true;
        for (int round = 0; more && round < 20; round++) {
            struct backend_list_req r = { .prefix = "", .delimiter = "/", .start_after = after,
                                          .max_keys = per };
            CU_ASSERT_EQUAL_FATAL(backend_list_objects(g_wb, "ckpt", &r, &pg), BACKEND_OK);
            /* entries of a page in order: objects and prefixes interleaved */
            size_t io = 0, ip = 0;
            while (io < pg.n_objs || ip < pg.n_prefixes) {
                const char *name;
                if (ip >= pg.n_prefixes ||
                    (io < pg.n_objs && strcmp(pg.objs[io].key, pg.prefixes[ip]) < 0))
                    name = pg.objs[io++].key;
                else
                    name = pg.prefixes[ip++];
                CU_ASSERT_TRUE(seen < CU_N(want) && strcmp(name, want[seen]) == 0);
                seen++;
            }
            more = pg.truncated;
            if (more && pg.next_marker)
                snprintf(after, sizeof after, "%s", pg.next_marker);
            backend_list_page_free(&pg);
        }
        CU_ASSERT_EQUAL(seen, CU_N(want));
    }
    backend_wb_pause(g_wb, false);
    CU_ASSERT_TRUE(flush_all());
    teardown();
}

static void multipart_objects_keep_their_etag_in_the_cold_tier(void)
{
    setup();
    backend_wb_pause(g_wb, true);
    size_t p1 = BACKEND_MIN_PART_SIZE, p2 = 1000000;
    unsigned char *src = pattern(p1 + p2, 6);
    struct obj_meta meta;
    memset(&meta, 0, sizeof meta);
    obj_meta_add_hdr(&meta, "x-amz-meta-rank", "3");
    char id[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_wb, "ckpt", "__3_0.distcp", &meta, id),
                          BACKEND_OK);
    obj_meta_clear(&meta);
    struct backend_uploads_req ur = { .max_uploads = 1000 };
    struct backend_uploads_page up;
    CU_ASSERT_EQUAL(backend_mpu_list_uploads(g_wb, "ckpt", &ur, &up), BACKEND_OK);
    CU_ASSERT_EQUAL(up.n_uploads, 1);
    if (up.n_uploads == 1) {
        CU_ASSERT_STRING_EQUAL(up.uploads[0].key, "__3_0.distcp");
        CU_ASSERT_STRING_EQUAL(up.uploads[0].upload_id, id);
    }
    backend_uploads_page_free(&up);
    struct backend_part parts[2];
    memset(parts, 0, sizeof parts);
    size_t off[2] = { 0, p1 }, len[2] = { p1, p2 };
    for (unsigned i = 0; i < 2; i++) {
        struct backend_put *p = NULL;
        CU_ASSERT_EQUAL_FATAL(backend_mpu_part_begin(g_wb, "ckpt", "__3_0.distcp", id, i + 1,
                                                     &p), BACKEND_OK);
        CU_ASSERT_EQUAL(backend_put_write(p, src + off[i], len[i]), BACKEND_OK);
        struct obj_meta pm;
        memset(&pm, 0, sizeof pm);
        md5_of(src + off[i], len[i], pm.etag);
        CU_ASSERT_EQUAL(backend_put_commit(p, &pm, NULL), BACKEND_OK);
        parts[i].part_no = i + 1;
        memcpy(parts[i].etag, pm.etag, sizeof pm.etag);
    }
    /* another key with this id is not this upload */
    struct backend_put *bad = NULL;
    CU_ASSERT_EQUAL(backend_mpu_part_begin(g_wb, "ckpt", "other", id, 1, &bad),
                    BACKEND_NO_UPLOAD);
    struct obj_meta out;
    memset(&out, 0, sizeof out);
    CU_ASSERT_EQUAL_FATAL(backend_mpu_complete(g_wb, "ckpt", "__3_0.distcp", id, parts, 2,
                                               &out), BACKEND_OK);
    acked("__3_0.distcp");
    CU_ASSERT_PTR_NOT_NULL(strstr(out.etag, "-2"));
    CU_ASSERT_TRUE(holds(g_wb, "__3_0.distcp", src, p1 + p2));
    CU_ASSERT_EQUAL(backend_mpu_list_uploads(g_wb, "ckpt", &ur, &up), BACKEND_OK);
    CU_ASSERT_EQUAL(up.n_uploads, 0);
    backend_uploads_page_free(&up);

    backend_wb_pause(g_wb, false);
    CU_ASSERT_TRUE(flush_all());
    struct obj_meta cm;
    memset(&cm, 0, sizeof cm);
    CU_ASSERT_EQUAL(real_ops->object_head(g_cold_raw, "ckpt", "__3_0.distcp", &cm), BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(cm.etag, out.etag);   /* the same parts, the same ETag */
    const char *rank = obj_meta_get_hdr(&cm, "x-amz-meta-rank");
    CU_ASSERT_TRUE(rank && strcmp(rank, "3") == 0);
    obj_meta_clear(&cm);
    CU_ASSERT_TRUE(holds(g_cold_raw, "__3_0.distcp", src, p1 + p2));
    obj_meta_clear(&out);
    free(src);
    teardown();
}

/* Stages a multipart object of 5 parts of 5 MiB and a last one; its bytes
 * (caller frees) and, in etag, its ETag. */
static unsigned char *six_parts(const char *key, size_t *total, char etag[72])
{
    size_t part = BACKEND_MIN_PART_SIZE, last = 777777;
    *total = 5 * part + last;
    unsigned char *src = pattern(*total, 9);
    char id[BACKEND_UPLOAD_ID_MAX];
    struct obj_meta meta;
    memset(&meta, 0, sizeof meta);
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_wb, "ckpt", key, &meta, id), BACKEND_OK);
    struct backend_part parts[6];
    memset(parts, 0, sizeof parts);
    for (unsigned i = 0; i < 6; i++) {
        size_t off = i * part, len = i < 5 ? part : last;
        struct backend_put *p = NULL;
        CU_ASSERT_EQUAL_FATAL(backend_mpu_part_begin(g_wb, "ckpt", key, id, i + 1, &p),
                              BACKEND_OK);
        CU_ASSERT_EQUAL(backend_put_write(p, src + off, len), BACKEND_OK);
        struct obj_meta pm;
        memset(&pm, 0, sizeof pm);
        md5_of(src + off, len, pm.etag);
        CU_ASSERT_EQUAL(backend_put_commit(p, &pm, NULL), BACKEND_OK);
        parts[i].part_no = i + 1;
        memcpy(parts[i].etag, pm.etag, sizeof pm.etag);
    }
    struct obj_meta out;
    memset(&out, 0, sizeof out);
    CU_ASSERT_EQUAL_FATAL(backend_mpu_complete(g_wb, "ckpt", key, id, parts, 6, &out),
                          BACKEND_OK);
    memcpy(etag, out.etag, 72);
    obj_meta_clear(&out);
    acked(key);
    return src;
}

/* A part upload fails once: the retry sends only the parts the cold
 * upload lacks (6 part uploads in all), and the object is whole. */
static void a_failed_part_is_resent_alone(void)
{
    setup();
    backend_wb_pause(g_wb, true);
    size_t total;
    char etag[72];
    unsigned char *src = six_parts("resume.bin", &total, etag);
    g_fail_part_from = 3;
    g_fail_part_once = true;
    backend_wb_pause(g_wb, false);
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_EQUAL(g_part_ok, 6);          /* no part sent twice */
    CU_ASSERT_EQUAL(g_part_calls, 7);       /* and the one refused */
    struct backend_wb_status s;
    backend_wb_status(g_wb, "ckpt", NULL, &s);
    CU_ASSERT_EQUAL(s.failures, 1);
    CU_ASSERT_TRUE(holds(g_cold_raw, "resume.bin", src, total));
    CU_ASSERT_TRUE(cold_etag_is("resume.bin", etag));
    free(src);
    teardown();
}

/* A cold tier whose part ETags are not MD5s (SSE-KMS): the first object's
 * parts, sent unhashed, do not make the client's ETag, so the uploader
 * hashes the staged parts once, sends each again with its Content-MD5 and
 * learns that this tier's ETags say nothing; the object arrives whole. From
 * then on no part is sent twice and the complete has no check pass. (That
 * the parts then carry their MD5 shows only against an S3 tier: this
 * directory tier's puts compute it on the way in any case.) */
static void a_cold_tier_with_opaque_part_etags_is_learned_once(void)
{
    setup();
    g_opaque_etags = true;
    backend_wb_pause(g_wb, true);
    size_t total;
    char etag[72];
    unsigned char *src = six_parts("kms-1.bin", &total, etag);
    backend_wb_pause(g_wb, false);
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_TRUE(holds(g_cold_raw, "kms-1.bin", src, total));
    CU_ASSERT_TRUE(cold_etag_is("kms-1.bin", etag));
    CU_ASSERT_EQUAL(g_part_ok, 12);          /* each part sent, then again with its MD5 */
    struct backend_wb_status s;
    backend_wb_status(g_wb, "ckpt", NULL, &s);
    CU_ASSERT_EQUAL(s.upload_hashed, total);  /* the staged copy hashed once */
    CU_ASSERT_EQUAL(s.failures, 0);
    free(src);

    backend_wb_pause(g_wb, true);
    src = six_parts("kms-2.bin", &total, etag);
    backend_wb_pause(g_wb, false);
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_TRUE(holds(g_cold_raw, "kms-2.bin", src, total));
    CU_ASSERT_TRUE(cold_etag_is("kms-2.bin", etag));
    CU_ASSERT_EQUAL(g_part_ok, 18);          /* six more: none twice, no check pass */
    backend_wb_status(g_wb, "ckpt", NULL, &s);
    CU_ASSERT_EQUAL(s.failures, 0);
    free(src);
    teardown();
}

/* The cold tier fails after 2 parts; the gateway restarts: the restarted
 * uploader finds the cold upload in the journal and sends the other 4. */
static void a_restart_resumes_the_cold_upload(void)
{
    setup();
    backend_wb_pause(g_wb, true);
    size_t total;
    char etag[72];
    unsigned char *src = six_parts("resume.bin", &total, etag);
    g_fail_part_from = 3;   /* every part after the first two fails */
    backend_wb_pause(g_wb, false);
    struct backend_wb_status s = wait_upload_failure();
    CU_ASSERT_TRUE(s.failures >= 1);
    backend_close(g_wb);   /* stops the uploader: no attempt runs now */
    int ok_before = g_part_ok;
    CU_ASSERT_EQUAL(ok_before, 2);
    g_fail_part_from = 0;
    g_wb = open_wb(0);
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_EQUAL(g_part_ok, 6);          /* the 4 missing ones after the restart */
    CU_ASSERT_TRUE(holds(g_cold_raw, "resume.bin", src, total));
    CU_ASSERT_TRUE(cold_etag_is("resume.bin", etag));
    free(src);
    teardown();
}

/* A multipart object of 6 parts goes up 4 parts at a time (WB_PART_STREAMS):
 * the cold tier gets the same bytes, parts and ETag. */
static void a_many_part_object_goes_up_in_parallel_parts(void)
{
    setup();
    backend_wb_pause(g_wb, true);
    size_t part = BACKEND_MIN_PART_SIZE, last = 777777, total = 5 * part + last;
    unsigned char *src = pattern(total, 8);
    char id[BACKEND_UPLOAD_ID_MAX];
    struct obj_meta meta;
    memset(&meta, 0, sizeof meta);
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_wb, "ckpt", "optim.bin", &meta, id), BACKEND_OK);
    struct backend_part parts[6];
    memset(parts, 0, sizeof parts);
    for (unsigned i = 0; i < 6; i++) {
        size_t off = i * part, len = i < 5 ? part : last;
        struct backend_put *p = NULL;
        CU_ASSERT_EQUAL_FATAL(backend_mpu_part_begin(g_wb, "ckpt", "optim.bin", id, i + 1, &p),
                              BACKEND_OK);
        CU_ASSERT_EQUAL(backend_put_write(p, src + off, len), BACKEND_OK);
        struct obj_meta pm;
        memset(&pm, 0, sizeof pm);
        md5_of(src + off, len, pm.etag);
        CU_ASSERT_EQUAL(backend_put_commit(p, &pm, NULL), BACKEND_OK);
        parts[i].part_no = i + 1;
        memcpy(parts[i].etag, pm.etag, sizeof pm.etag);
    }
    struct obj_meta out;
    memset(&out, 0, sizeof out);
    CU_ASSERT_EQUAL_FATAL(backend_mpu_complete(g_wb, "ckpt", "optim.bin", id, parts, 6, &out),
                          BACKEND_OK);
    acked("optim.bin");
    backend_wb_pause(g_wb, false);
    CU_ASSERT_TRUE(flush_all());
    struct obj_meta cm;
    memset(&cm, 0, sizeof cm);
    CU_ASSERT_EQUAL(real_ops->object_head(g_cold_raw, "ckpt", "optim.bin", &cm), BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(cm.etag, out.etag);
    CU_ASSERT_PTR_NOT_NULL(strstr(cm.etag, "-6"));
    obj_meta_clear(&cm);
    struct backend_part_range pr;
    CU_ASSERT_EQUAL(real_ops->object_part(g_cold_raw, "ckpt", "optim.bin", 6, &pr), BACKEND_OK);
    CU_ASSERT_EQUAL(pr.first, 5 * part);
    CU_ASSERT_EQUAL(pr.size, last);
    CU_ASSERT_TRUE(holds(g_cold_raw, "optim.bin", src, total));
    obj_meta_clear(&out);
    free(src);
    teardown();
}

static void the_dcp_rename_never_uploads_the_temporary_object(void)
{
    setup();
    backend_wb_pause(g_wb, true);
    CU_ASSERT_EQUAL(put("ckpt-100/.metadata.tmp", "metadata", 8), BACKEND_OK);
    struct obj_meta out;
    memset(&out, 0, sizeof out);
    CU_ASSERT_EQUAL(backend_object_copy(g_wb, "ckpt", "ckpt-100/.metadata.tmp", "ckpt",
                                        "ckpt-100/.metadata", NULL, &out), BACKEND_OK);
    acked("ckpt-100/.metadata");
    CU_ASSERT_EQUAL(backend_object_delete(g_wb, "ckpt", "ckpt-100/.metadata.tmp"), BACKEND_OK);
    acked("-ckpt-100/.metadata.tmp");
    CU_ASSERT_TRUE(holds(g_wb, "ckpt-100/.metadata", "metadata", 8));
    backend_wb_pause(g_wb, false);
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_EQUAL(times_uploaded("ckpt-100/.metadata.tmp"), 0);
    CU_ASSERT_TRUE(holds(g_cold_raw, "ckpt-100/.metadata", "metadata", 8));
    CU_ASSERT_FALSE(cold_has("ckpt-100/.metadata.tmp"));
    obj_meta_clear(&out);
    teardown();
}

static void write_through_answers_once_the_cold_tier_has_it(void)
{
    setup();
    CU_ASSERT_EQUAL(put_ex(g_wb, "ckpt", "now", "through", 7, true, NULL, NULL), BACKEND_OK);
    CU_ASSERT_TRUE(holds(g_cold_raw, "now", "through", 7));
    teardown();
}

/* A write-through PUT is invisible until the cold tier has it, and answers
 * once it has: held behind a paused uploader, readers still see the key's
 * pending older write, listings do not show it; let go, it is uploaded and
 * answers OK. */
struct through_arg {
    const char *key, *data;
    enum backend_status st;
};

static void *through_main(void *arg)
{
    struct through_arg *a = arg;
    a->st = put_ex(g_wb, "ckpt", a->key, a->data, strlen(a->data), true, NULL, NULL);
    return NULL;
}

static bool listed(const char *key)
{
    struct backend_list_req req = { .prefix = "", .max_keys = 1000 };
    struct backend_list_page page;
    memset(&page, 0, sizeof page);
    if (backend_list_objects(g_wb, "ckpt", &req, &page) != BACKEND_OK)
        return false;
    bool found = false;
    for (size_t i = 0; i < page.n_objs; i++)
        found |= strcmp(page.objs[i].key, key) == 0;
    backend_list_page_free(&page);
    return found;
}

static void a_write_through_is_invisible_until_the_cold_tier_has_it(void)
{
    setup();
    backend_close(g_wb);
    g_through_ms = 5000;   /* longer than the pause below: not given up */
    g_wb = open_wb(0);
    backend_wb_pause(g_wb, true);
    CU_ASSERT_EQUAL(put("k", "old", 3), BACKEND_OK);
    struct through_arg a = { "k", "new", BACKEND_IO };
    struct through_arg b = { "fresh", "fresh", BACKEND_IO };
    pthread_t ta, tb;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&ta, NULL, through_main, &a), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&tb, NULL, through_main, &b), 0);
    struct backend_wb_status s;
    for (int i = 0; i < 500; i++) {   /* both staged and queued */
        backend_wb_status(g_wb, "ckpt", NULL, &s);
        if (s.dirty_objects == 3)
            break;
        usleep(10000);
    }
    CU_ASSERT_EQUAL(s.dirty_objects, 3);
    CU_ASSERT_TRUE(holds(g_wb, "k", "old", 3));   /* not "new" before the cold tier has it */
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    CU_ASSERT_EQUAL(backend_object_head(g_wb, "ckpt", "fresh", &m), BACKEND_NO_KEY);
    CU_ASSERT_FALSE(listed("fresh"));
    CU_ASSERT_TRUE(listed("k"));
    backend_wb_pause(g_wb, false);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CU_ASSERT_EQUAL(a.st, BACKEND_OK);
    CU_ASSERT_EQUAL(b.st, BACKEND_OK);
    CU_ASSERT_TRUE(holds(g_cold_raw, "k", "new", 3));
    CU_ASSERT_TRUE(holds(g_cold_raw, "fresh", "fresh", 5));
    CU_ASSERT_TRUE(holds(g_wb, "k", "new", 3));
    CU_ASSERT_EQUAL(times_uploaded("k"), 2);   /* the older write was not replaced */
    teardown();
}

/* With the cold tier refusing, a write-through PUT gives up after
 * through_timeout_ms without upload progress: BACKEND_UNAVAILABLE, and the
 * key stays as it was, also after a restart (the withdrawal is journaled)
 * and in the cold tier once it is back. */
static void a_write_through_the_cold_tier_refuses_is_taken_back(void)
{
    setup();
    backend_close(g_wb);
    g_through_ms = 300;
    g_wb = open_wb(0);
    g_cold_fails = true;
    CU_ASSERT_EQUAL(put("k", "old", 3), BACKEND_OK);
    CU_ASSERT_EQUAL(put_ex(g_wb, "ckpt", "k", "new", 3, true, NULL, NULL),
                    BACKEND_UNAVAILABLE);
    CU_ASSERT_EQUAL(put_ex(g_wb, "ckpt", "gone", "gone", 4, true, NULL, NULL),
                    BACKEND_UNAVAILABLE);
    CU_ASSERT_TRUE(holds(g_wb, "k", "old", 3));
    struct backend_wb_status s;
    backend_wb_status(g_wb, "ckpt", NULL, &s);
    CU_ASSERT_EQUAL(s.dirty_objects, 1);
    CU_ASSERT_EQUAL(s.dirty_bytes, 3);
    backend_close(g_wb);   /* restart: the taken-back writes stay taken back */
    g_wb = open_wb(0);
    CU_ASSERT_TRUE(holds(g_wb, "k", "old", 3));
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    CU_ASSERT_EQUAL(backend_object_head(g_wb, "ckpt", "gone", &m), BACKEND_NO_KEY);
    g_cold_fails = false;
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_TRUE(holds(g_cold_raw, "k", "old", 3));
    CU_ASSERT_FALSE(cold_has("gone"));
    /* no staged bytes left behind (the uploader removes a file just after
     * its record leaves the queue, which is what ends the flush) */
    char path[256];
    snprintf(path, sizeof path, "%s/data/ckpt", g_wb_dir);
    int staged = -1;
    for (int i = 0; i < 500 && staged != 0; i++) {
        if (i)
            usleep(10000);
        DIR *d = opendir(path);
        staged = 0;
        for (struct dirent *e; d && (e = readdir(d));)
            staged += e->d_name[0] != '.';
        if (d)
            closedir(d);
    }
    CU_ASSERT_EQUAL(staged, 0);
    teardown();
}

/* Closing (a gateway's shutdown) stops an upload in flight at its next MiB
 * instead of sending the rest over a slow link; the journal resumes it at
 * the next start. 16 MiB at 400 ms a MiB would take 6.4 s. */
static void closing_stops_an_upload_in_flight_and_the_next_start_resumes_it(void)
{
    setup();
    size_t n = 16u << 20;
    unsigned char *src = pattern(n, 9);
    g_slow_write_ms = 400;
    CU_ASSERT_EQUAL(put("big", src, n), BACKEND_OK);
    for (int i = 0; i < 500 && __atomic_load_n(&g_writes, __ATOMIC_RELAXED) == 0; i++)
        usleep(10000);
    CU_ASSERT_TRUE(__atomic_load_n(&g_writes, __ATOMIC_RELAXED) > 0);   /* under way */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    backend_close(g_wb);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    CU_ASSERT_TRUE(s < 3.0);
    CU_ASSERT_TRUE(__atomic_load_n(&g_writes, __ATOMIC_RELAXED) < 16);
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "%s/ckpt/big", g_cold_dir);
    CU_ASSERT_NOT_EQUAL(stat(path, &st), 0);   /* not in the cold tier, not torn there */
    g_slow_write_ms = 0;
    g_wb = open_wb(0);
    CU_ASSERT_TRUE(holds(g_wb, "big", src, n));
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_TRUE(holds(g_cold_raw, "big", src, n));
    free(src);
    teardown();
}

/* The bandwidth cap holds all upload streams together: a 6-part object
 * (~26 MiB, four parts at a time) and an 8 MiB one under 16 MiB/s take at
 * least (bytes - the first MiB) / cap. Only the lower bound is checked: a
 * loaded machine can only make it slower. */
static void the_bandwidth_cap_paces_every_upload_stream_together(void)
{
    setup();
    backend_close(g_wb);
    g_bandwidth = 16u << 20;
    g_wb = open_wb(0);
    backend_wb_pause(g_wb, true);
    size_t total;
    char etag[72];
    unsigned char *big = six_parts("capped-mpu", &total, etag);
    unsigned char *src = pattern(8u << 20, 3);
    CU_ASSERT_EQUAL(put("capped", src, 8u << 20), BACKEND_OK);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    backend_wb_pause(g_wb, false);
    CU_ASSERT_TRUE(flush_all());
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    double floor_s = (double)(total + (8u << 20) - (1u << 20)) / (double)(16u << 20);
    CU_ASSERT_TRUE(s >= floor_s);
    if (s < floor_s)
        fprintf(stderr, "capped uploads took %.3f s, the cap allows no less than %.3f s\n",
                s, floor_s);
    CU_ASSERT_TRUE(holds(g_cold_raw, "capped-mpu", big, total));
    CU_ASSERT_TRUE(holds(g_cold_raw, "capped", src, 8u << 20));
    free(big);
    free(src);
    teardown();
}

/* Look-ahead: the parts of a multipart object behind the head go up while
 * the head's are still going (the head's parts are held until a part of
 * the second object has begun: without look-ahead they would wait out the
 * gate's 20 s), and the completes stay in order (the commit hook checks
 * every earlier object is there first). */
static void parts_of_the_next_objects_go_up_ahead_and_completes_stay_in_order(void)
{
    setup();
    backend_wb_pause(g_wb, true);
    size_t t1, t2, t3;
    char e1[72], e2[72], e3[72];
    unsigned char *a = six_parts("ahead/1", &t1, e1);
    CU_ASSERT_EQUAL(put("ahead/plain", "between", 7), BACKEND_OK);
    unsigned char *b = six_parts("ahead/2", &t2, e2);
    unsigned char *c = six_parts("ahead/3", &t3, e3);
    snprintf(g_gate_key, sizeof g_gate_key, "ahead/1");
    snprintf(g_gate_after, sizeof g_gate_after, "ahead/2");
    backend_wb_pause(g_wb, false);
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_EQUAL(g_gate_timeouts, 0);   /* ahead/2's parts went while ahead/1's waited */
    CU_ASSERT_EQUAL(g_order_violations, 0);
    CU_ASSERT_TRUE(holds(g_cold_raw, "ahead/1", a, t1));
    CU_ASSERT_TRUE(holds(g_cold_raw, "ahead/2", b, t2));
    CU_ASSERT_TRUE(holds(g_cold_raw, "ahead/3", c, t3));
    CU_ASSERT_TRUE(holds(g_cold_raw, "ahead/plain", "between", 7));
    CU_ASSERT_EQUAL(g_part_ok, 18);   /* each part once: the uploader found them there */
    CU_ASSERT_TRUE(cold_etag_is("ahead/2", e2));
    free(a);
    free(b);
    free(c);
    teardown();
}

static void max_dirty_refuses_with_slow_down_and_loses_nothing(void)
{
    setup_with(1000000);
    backend_wb_pause(g_wb, true);
    unsigned char *src = pattern(800000, 7);
    CU_ASSERT_EQUAL(put("one", src, 800000), BACKEND_OK);
    CU_ASSERT_EQUAL(put_ex(g_wb, "ckpt", "two", src, 800000, false, NULL, NULL), BACKEND_NOMEM);
    CU_ASSERT_EQUAL(put("small", src, 1000), BACKEND_OK);   /* room for this one */
    struct obj_meta m;
    memset(&m, 0, sizeof m);
    CU_ASSERT_EQUAL(backend_object_head(g_wb, "ckpt", "two", &m), BACKEND_NO_KEY);
    backend_wb_pause(g_wb, false);
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_EQUAL(put("two", src, 800000), BACKEND_OK);
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_TRUE(holds(g_cold_raw, "one", src, 800000));
    CU_ASSERT_TRUE(holds(g_cold_raw, "two", src, 800000));
    free(src);
    teardown();
}

/* Writes part part_no of upload id from buf (announcing its length first
 * when `announce`, as the gateway does for a Content-Length). */
static void write_part(const char *key, const char *id, unsigned part_no, const void *buf,
                       size_t len, bool announce, struct backend_part *out)
{
    struct backend_put *p = NULL;
    CU_ASSERT_EQUAL_FATAL(backend_mpu_part_begin(g_wb, "ckpt", key, id, part_no, &p),
                          BACKEND_OK);
    if (announce)
        backend_put_set_size(p, len);
    CU_ASSERT_EQUAL(backend_put_write(p, buf, len), BACKEND_OK);
    struct obj_meta pm;
    memset(&pm, 0, sizeof pm);
    md5_of(buf, len, pm.etag);
    CU_ASSERT_EQUAL(backend_put_commit(p, &pm, NULL), BACKEND_OK);
    if (out) {
        out->part_no = part_no;
        memcpy(out->etag, pm.etag, sizeof pm.etag);
    }
}

static uint64_t staged_part_bytes(void)
{
    struct backend_wb_status s;
    backend_wb_status(g_wb, NULL, NULL, &s);
    return s.staged_part_bytes;
}

/* The parts of an upload not completed yet lie in the cache directory as
 * pending writes do: they count in what the cache makes room for, a part
 * sent again replaces its count, and a restart counts them again. */
static void parts_of_open_uploads_count_on_the_disk_until_completed_or_aborted(void)
{
    setup();
    backend_wb_pause(g_wb, true);
    size_t p1 = BACKEND_MIN_PART_SIZE;
    unsigned char *src = pattern(p1 + 2000, 12);
    CU_ASSERT_EQUAL(put("src", src + p1, 2000), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_wb_disk_bytes(g_wb), 2000);
    CU_ASSERT_EQUAL(staged_part_bytes(), 0);

    struct obj_meta meta;
    memset(&meta, 0, sizeof meta);
    char a[BACKEND_UPLOAD_ID_MAX], b[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_wb, "ckpt", "a", &meta, a), BACKEND_OK);
    struct backend_part parts[2];
    memset(parts, 0, sizeof parts);
    write_part("a", a, 1, src, p1, false, &parts[0]);
    CU_ASSERT_EQUAL(staged_part_bytes(), p1);
    write_part("a", a, 1, src, p1, true, &parts[0]);   /* sent again: replaces */
    CU_ASSERT_EQUAL(staged_part_bytes(), p1);
    struct backend_copy_src cs = { .bucket = "ckpt", .key = "src" };
    struct obj_meta cm;
    memset(&cm, 0, sizeof cm);
    CU_ASSERT_EQUAL(backend_mpu_part_copy(g_wb, "ckpt", "a", a, 2, &cs, &cm), BACKEND_OK);
    parts[1].part_no = 2;
    memcpy(parts[1].etag, cm.etag, sizeof cm.etag);
    obj_meta_clear(&cm);
    CU_ASSERT_EQUAL(staged_part_bytes(), p1 + 2000);
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_wb, "ckpt", "b", &meta, b), BACKEND_OK);
    write_part("b", b, 3, src, 1000, false, NULL);
    CU_ASSERT_EQUAL(staged_part_bytes(), p1 + 3000);
    CU_ASSERT_EQUAL(backend_wb_disk_bytes(g_wb), 2000 + p1 + 3000);

    backend_close(g_wb);   /* both uploads stay open across the restart */
    g_cold_fails = true;   /* and src stays pending: the uploader starts unpaused */
    g_wb = open_wb(0);
    backend_wb_pause(g_wb, true);
    CU_ASSERT_EQUAL(staged_part_bytes(), p1 + 3000);
    CU_ASSERT_EQUAL(backend_wb_disk_bytes(g_wb), 2000 + p1 + 3000);
    write_part("b", b, 3, src, 400, false, NULL);   /* replaces a part counted at the start */
    CU_ASSERT_EQUAL(staged_part_bytes(), p1 + 2400);

    CU_ASSERT_EQUAL(backend_mpu_abort(g_wb, "ckpt", "b", b), BACKEND_OK);
    CU_ASSERT_EQUAL(staged_part_bytes(), p1 + 2000);
    struct obj_meta out;
    memset(&out, 0, sizeof out);
    CU_ASSERT_EQUAL_FATAL(backend_mpu_complete(g_wb, "ckpt", "a", a, parts, 2, &out),
                          BACKEND_OK);
    acked("a");
    obj_meta_clear(&out);
    /* the parts are a pending object now: counted once, as dirty */
    CU_ASSERT_EQUAL(staged_part_bytes(), 0);
    CU_ASSERT_EQUAL(backend_wb_disk_bytes(g_wb), 2000 + p1 + 2000);
    CU_ASSERT_TRUE(holds(g_wb, "a", src, p1 + 2000));
    g_cold_fails = false;
    backend_wb_pause(g_wb, false);
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_EQUAL(backend_wb_disk_bytes(g_wb), 0);
    CU_ASSERT_TRUE(holds(g_cold_raw, "a", src, p1 + 2000));
    free(src);
    teardown();
}

/* Entries of dir besides . and .. (-1: cannot be read). */
static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static size_t open_uploads(void)
{
    struct backend_uploads_req ur = { .max_uploads = 1000 };
    struct backend_uploads_page up;
    memset(&up, 0, sizeof up);
    CU_ASSERT_EQUAL(backend_mpu_list_uploads(g_wb, "ckpt", &ur, &up), BACKEND_OK);
    size_t n = up.n_uploads;
    backend_uploads_page_free(&up);
    return n;
}

/* An upload left open longer than mpu_max_age is aborted, as the
 * directory store's are: its parts stop holding the cache's space, and it
 * stays gone after a restart. */
static void an_abandoned_upload_expires_and_frees_its_parts(void)
{
    setup();
    backend_close(g_wb);
    g_mpu_age = 4;   /* swept every second */
    g_wb = open_wb(0);
    struct obj_meta meta;
    memset(&meta, 0, sizeof meta);
    char id[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_wb, "ckpt", "left", &meta, id), BACKEND_OK);
    unsigned char *src = pattern(1000, 13);
    write_part("left", id, 1, src, 1000, false, NULL);
    CU_ASSERT_EQUAL(staged_part_bytes(), 1000);   /* young: kept */
    CU_ASSERT_EQUAL(open_uploads(), 1);
    /* its bytes are counted until its parts are gone, after it left the list */
    for (int i = 0; i < 1500 && (open_uploads() || staged_part_bytes()); i++)   /* <= 15 s */
        usleep(10000);
    CU_ASSERT_EQUAL(open_uploads(), 0);
    CU_ASSERT_EQUAL(staged_part_bytes(), 0);
    CU_ASSERT_EQUAL(backend_wb_disk_bytes(g_wb), 0);
    struct backend_put *p = NULL;
    CU_ASSERT_EQUAL(backend_mpu_part_begin(g_wb, "ckpt", "left", id, 2, &p), BACKEND_NO_UPLOAD);
    backend_put_abort(p);   /* (NULL unless that failed) */
    char dir[512];   /* its parts left the staging store (their unlink is in the background) */
    snprintf(dir, sizeof dir, "%s/state/mpu/ckpt", g_wb_dir);
    CU_ASSERT_EQUAL(dir_entries(dir), 0);
    backend_close(g_wb);
    g_mpu_age = 0;
    g_wb = open_wb(0);   /* the journal says it ended */
    CU_ASSERT_EQUAL(open_uploads(), 0);
    free(src);
    teardown();
}

/* Names of one page of ckpt's uploads (keys, and prefixes as "P:name"). */
static void uploads_page(const char *delim, const char *key_marker, const char *id_marker,
                         unsigned max, char *names, size_t cap, char *next_key,
                         char *next_id, bool *truncated)
{
    struct backend_uploads_req ur = { .delimiter = delim, .key_marker = key_marker,
                                      .upload_id_marker = id_marker, .max_uploads = max };
    struct backend_uploads_page up;
    memset(&up, 0, sizeof up);
    CU_ASSERT_EQUAL_FATAL(backend_mpu_list_uploads(g_wb, "ckpt", &ur, &up), BACKEND_OK);
    names[0] = '\0';
    size_t u = 0, p = 0;
    while (u < up.n_uploads || p < up.n_prefixes) {   /* in S3's order, both kinds */
        bool pre = p < up.n_prefixes &&
                   (u == up.n_uploads || strcmp(up.prefixes[p], up.uploads[u].key) < 0);
        size_t len = strlen(names);
        snprintf(names + len, cap - len, "%s%s%s", len ? " " : "", pre ? "P:" : "",
                 pre ? up.prefixes[p++] : up.uploads[u++].key);
    }
    *truncated = up.truncated;
    snprintf(next_key, 256, "%s", up.next_key_marker ? up.next_key_marker : "");
    snprintf(next_id, BACKEND_UPLOAD_ID_MAX, "%s", up.next_upload_id_marker);
    backend_uploads_page_free(&up);
}

/* The tag set of key in b as "k=v&..." (canonical), or "(error)". */
static char *tags_of(struct backend *b, const char *key)
{
    struct obj_tags t;
    memset(&t, 0, sizeof t);
    if (b->ops->tagging_get(b, "ckpt", key, &t) != BACKEND_OK)
        return strdup("(error)");
    char *q = obj_tags_to_query(&t);
    obj_tags_clear(&t);
    return q;
}

static enum backend_status tag(const char *key, const char *k, const char *v)
{
    struct obj_tags t;
    memset(&t, 0, sizeof t);
    if (k)
        obj_tags_add(&t, k, v);
    enum backend_status st = g_wb->ops->tagging_put(g_wb, "ckpt", key, &t);
    obj_tags_clear(&t);
    return st;
}

#define CU_ASSERT_TAGS(b, key, want)                                 \
    do {                                                            \
        char *got_ = tags_of((b), (key));                           \
        CU_ASSERT_STRING_EQUAL(got_, (want));                       \
        free(got_);                                                 \
    } while (0)

/* Tags put on a pending object change its staged copy at once - the cold
 * tier being down or slow does not hold them up - and reach the cold tier
 * after the object: for a plain PUT, for a multipart object whose cold
 * upload began with the old tags, and for one resumed after a restart. A
 * pending delete's key answers NoSuchKey, as a reader finds it. */
static void tags_of_pending_objects_change_at_once_and_follow_the_object(void)
{
    setup();
    backend_wb_pause(g_wb, true);
    size_t n = 5000;
    unsigned char *src = pattern(n, 9);
    CU_ASSERT_EQUAL(put("tagged", src, n), BACKEND_OK);
    CU_ASSERT_EQUAL(tag("tagged", "stage", "one"), BACKEND_OK);
    CU_ASSERT_EQUAL(tag("tagged", "stage", "two"), BACKEND_OK);
    CU_ASSERT_FALSE(cold_has("tagged"));
    CU_ASSERT_TAGS(g_wb, "tagged", "stage=two");
    CU_ASSERT_EQUAL(put("gone", src, n), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_object_delete(g_wb, "ckpt", "gone"), BACKEND_OK);
    CU_ASSERT_EQUAL(tag("gone", "k", "v"), BACKEND_NO_KEY);

    /* a multipart object whose cold upload was begun, then failed half-way:
     * retagged meanwhile, then resumed by a new start */
    size_t total;
    char etag[72];
    unsigned char *big = six_parts("big.bin", &total, etag);
    g_fail_part_from = 3;
    backend_wb_pause(g_wb, false);
    struct backend_wb_status st = wait_upload_failure();
    CU_ASSERT_TRUE(st.failures >= 1);
    CU_ASSERT_EQUAL(tag("big.bin", "epoch", "7"), BACKEND_OK);
    CU_ASSERT_TAGS(g_wb, "big.bin", "epoch=7");
    backend_close(g_wb);
    g_fail_part_from = 0;
    g_wb = open_wb(0);
    CU_ASSERT_TAGS(g_wb, "big.bin", "epoch=7");   /* durable on the staged copy */
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_TRUE(holds(g_cold_raw, "tagged", src, n));
    CU_ASSERT_TAGS(g_cold_raw, "tagged", "stage=two");
    CU_ASSERT_TRUE(holds(g_cold_raw, "big.bin", big, total));
    CU_ASSERT_TAGS(g_cold_raw, "big.bin", "epoch=7");
    CU_ASSERT_FALSE(cold_has("gone"));
    /* once uploaded, tags go to the cold tier; removing them too */
    CU_ASSERT_EQUAL(tag("tagged", NULL, NULL), BACKEND_OK);
    CU_ASSERT_TAGS(g_cold_raw, "tagged", "");
    free(big);
    free(src);
    teardown();
}

/* "write": {"step/": "back", "step/logs/": "through"}: a key takes the mode
 * of its longest matching prefix, and the rest of the bucket is written
 * through - straight to the cold tier, whose uploads are listed together
 * with the staged ones. */
static void prefix_rules_choose_the_mode_of_each_key(void)
{
    static const struct backend_wb_rule rule[] = { { "step/", true },
                                                   { "step/logs/", false } };
    static const struct backend_wb_rules rules = { rule, 2 };
    setup();
    backend_close(g_wb);
    g_rules = &rules;
    g_wb = open_wb(0);
    backend_wb_pause(g_wb, true);
    CU_ASSERT_EQUAL(put("step/a", "back", 4), BACKEND_OK);
    CU_ASSERT_FALSE(cold_has("step/a"));   /* pending */
    CU_ASSERT_EQUAL(put_ex(g_wb, "ckpt", "step/logs/x", "thru", 4, false, NULL, NULL),
                    BACKEND_OK);
    CU_ASSERT_TRUE(cold_has("step/logs/x"));   /* through: in the cold tier when answered */
    CU_ASSERT_EQUAL(put_ex(g_wb, "ckpt", "stepping", "thru", 4, false, NULL, NULL),
                    BACKEND_OK);
    CU_ASSERT_TRUE(cold_has("stepping"));
    CU_ASSERT_EQUAL(backend_object_delete(g_wb, "ckpt", "stepping"), BACKEND_OK);
    CU_ASSERT_FALSE(cold_has("stepping"));
    struct backend_wb_status st;
    backend_wb_status(g_wb, "ckpt", NULL, &st);
    CU_ASSERT_EQUAL(st.dirty_objects, 1);   /* step/a alone */
    CU_ASSERT_TRUE(holds(g_wb, "step/a", "back", 4));
    CU_ASSERT_TRUE(holds(g_wb, "step/logs/x", "thru", 4));

    /* uploads of both kinds, one listing */
    struct obj_meta meta;
    memset(&meta, 0, sizeof meta);
    char id_c[BACKEND_UPLOAD_ID_MAX], id_s[BACKEND_UPLOAD_ID_MAX], id_l[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_wb, "ckpt", "cold-mpu", &meta, id_c), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_wb, "ckpt", "step/b", &meta, id_s), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_wb, "ckpt", "step/logs/y", &meta, id_l),
                          BACKEND_OK);
    struct backend_uploads_req ur = { .max_uploads = 1000 };
    struct backend_uploads_page cold_up;
    memset(&cold_up, 0, sizeof cold_up);
    CU_ASSERT_EQUAL(real_ops->mpu_list_uploads(g_cold_raw, "ckpt", &ur, &cold_up), BACKEND_OK);
    CU_ASSERT_EQUAL(cold_up.n_uploads, 2);   /* cold-mpu and step/logs/y: not staged */
    backend_uploads_page_free(&cold_up);
    char names[512], nk[256], ni[BACKEND_UPLOAD_ID_MAX];
    bool trunc;
    uploads_page(NULL, NULL, NULL, 1000, names, sizeof names, nk, ni, &trunc);
    CU_ASSERT_STRING_EQUAL(names, "cold-mpu step/b step/logs/y");
    CU_ASSERT_FALSE(trunc);
    uploads_page("/", NULL, NULL, 1000, names, sizeof names, nk, ni, &trunc);
    CU_ASSERT_STRING_EQUAL(names, "cold-mpu P:step/");   /* the prefix once, from both */
    /* page by page: one at a time, from the marker each page gives */
    char all[1024] = "";
    char key_marker[256] = "", id_marker[BACKEND_UPLOAD_ID_MAX] = "";
    int pages = 0;
    do {
        uploads_page(NULL, key_marker, id_marker, 1, names, sizeof names, nk, ni, &trunc);
        size_t len = strlen(all);
        snprintf(all + len, sizeof all - len, "%s%s", len ? " " : "", names);
        snprintf(key_marker, sizeof key_marker, "%s", nk);
        snprintf(id_marker, sizeof id_marker, "%s", ni);
    } while (trunc && ++pages < 10);
    CU_ASSERT_STRING_EQUAL(all, "cold-mpu step/b step/logs/y");

    /* parts and completes go where the upload lives */
    unsigned char *src = pattern(1000, 14);
    struct backend_part part;
    memset(&part, 0, sizeof part);
    write_part("cold-mpu", id_c, 1, src, 1000, false, &part);
    CU_ASSERT_EQUAL(staged_part_bytes(), 0);
    CU_ASSERT_EQUAL(backend_mpu_complete(g_wb, "ckpt", "cold-mpu", id_c, &part, 1, NULL),
                    BACKEND_OK);
    CU_ASSERT_TRUE(holds(g_cold_raw, "cold-mpu", src, 1000));
    write_part("step/b", id_s, 1, src, 1000, false, &part);
    CU_ASSERT_EQUAL(staged_part_bytes(), 1000);
    CU_ASSERT_EQUAL(backend_mpu_complete(g_wb, "ckpt", "step/b", id_s, &part, 1, NULL),
                    BACKEND_OK);
    acked("step/b");
    CU_ASSERT_FALSE(cold_has("step/b"));
    CU_ASSERT_EQUAL(backend_mpu_abort(g_wb, "ckpt", "step/logs/y", id_l), BACKEND_OK);
    CU_ASSERT_EQUAL(open_uploads(), 0);
    backend_wb_pause(g_wb, false);
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_TRUE(holds(g_cold_raw, "step/a", "back", 4));
    CU_ASSERT_TRUE(holds(g_cold_raw, "step/b", src, 1000));
    free(src);
    teardown();
}

/* The status's upload rate: the bytes the uploads sent over the last 10
 * full seconds, per second. */
static void the_status_tells_the_upload_rate(void)
{
    setup();
    backend_wb_pause(g_wb, true);
    unsigned char *src = pattern(1000000, 15);
    CU_ASSERT_EQUAL(put("rate-1", src, 600000), BACKEND_OK);
    CU_ASSERT_EQUAL(put("rate-2", src, 400000), BACKEND_OK);
    struct backend_wb_status s;
    backend_wb_status(g_wb, NULL, NULL, &s);
    CU_ASSERT_EQUAL(s.upload_bps, 0);   /* nothing sent yet */
    backend_wb_pause(g_wb, false);
    CU_ASSERT_TRUE(flush_all());
    usleep(1100000);   /* the seconds they were sent in are full ones now */
    backend_wb_status(g_wb, NULL, NULL, &s);
    CU_ASSERT_EQUAL(s.upload_bps, 1000000 / 10);
    free(src);
    teardown();
}

static void conditional_writes_see_pending_and_cold_objects(void)
{
    setup();
    CU_ASSERT_EQUAL(put("cold", "c", 1), BACKEND_OK);
    CU_ASSERT_TRUE(flush_all());
    backend_wb_pause(g_wb, true);
    CU_ASSERT_EQUAL(put("pend", "p", 1), BACKEND_OK);
    struct backend_cond absent = { .kind = BACKEND_COND_ABSENT };
    CU_ASSERT_EQUAL(put_ex(g_wb, "ckpt", "pend", "2", 1, false, &absent, NULL),
                    BACKEND_PRECONDITION_FAILED);
    CU_ASSERT_EQUAL(put_ex(g_wb, "ckpt", "cold", "2", 1, false, &absent, NULL),
                    BACKEND_PRECONDITION_FAILED);
    CU_ASSERT_EQUAL(put_ex(g_wb, "ckpt", "new", "2", 1, false, &absent, NULL), BACKEND_OK);
    struct backend_cond match = { .kind = BACKEND_COND_ETAG };
    md5_of("p", 1, match.etag);
    CU_ASSERT_EQUAL(put_ex(g_wb, "ckpt", "pend", "3", 1, false, &match, NULL), BACKEND_OK);
    CU_ASSERT_EQUAL(put_ex(g_wb, "ckpt", "pend", "4", 1, false, &match, NULL),
                    BACKEND_PRECONDITION_FAILED);   /* its ETag is now md5("3") */
    CU_ASSERT_TRUE(holds(g_wb, "pend", "3", 1));
    backend_wb_pause(g_wb, false);
    CU_ASSERT_TRUE(flush_all());
    teardown();
}

static void a_failing_cold_tier_is_retried_and_nothing_is_lost(void)
{
    setup();
    g_cold_fails = true;
    CU_ASSERT_EQUAL(put("r", "retry", 5), BACKEND_OK);
    struct backend_wb_status s = wait_upload_failure();   /* the first attempt fails at once */
    CU_ASSERT_TRUE(s.failures >= 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(s.last_error, "ckpt/r"));
    CU_ASSERT_EQUAL(s.dirty_objects, 1);
    CU_ASSERT_TRUE(holds(g_wb, "r", "retry", 5));   /* still readable meanwhile */
    g_cold_fails = false;
    CU_ASSERT_TRUE(flush_all());
    CU_ASSERT_TRUE(holds(g_cold_raw, "r", "retry", 5));
    teardown();
}

/* Replay reads the journal a window at a time: with a window of 97 bytes
 * (a record is ~105) records are cut at the ends of the reads, and all 50
 * pending writes still come back, in order, and reach the cold tier. */
static void the_journal_replays_window_by_window(void)
{
    setup();
    backend_wb_pause(g_wb, true);
    char key[32];
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof key, "replay/%02d", i);
        CU_ASSERT_EQUAL(put(key, key, strlen(key)), BACKEND_OK);
    }
    backend_close(g_wb);
    size_t saved = wb_replay_window;
    wb_replay_window = 97;
    g_wb = open_wb(0);
    wb_replay_window = saved;
    struct backend_wb_status s;
    backend_wb_status(g_wb, "ckpt", NULL, &s);
    CU_ASSERT_EQUAL(s.dirty_objects + s.uploaded_objects, 50);   /* the uploader runs */
    CU_ASSERT_TRUE(flush_all());
    int missing = 0;
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof key, "replay/%02d", i);
        missing += !holds(g_cold_raw, key, key, strlen(key));
    }
    CU_ASSERT_EQUAL(missing, 0);
    CU_ASSERT_EQUAL(g_order_violations, 0);
    teardown();
}

/* Writers that wait for their journal fdatasync while the uploader empties
 * the queue and compacts the journal: a writer took sync_mu then mu, the
 * compaction mu then sync_mu (a deadlock once the journal passed its
 * compaction size). Many small writes from 4 threads, compaction at 1 KiB:
 * they all end, everything reaches the cold tier, the journal stays short. */
#define WRITERS 4
#define PER_WRITER 60

static void *writer_main(void *arg)
{
    long id = (long)arg;
    char key[32];
    for (int i = 0; i < PER_WRITER; i++) {
        snprintf(key, sizeof key, "w%ld/%03d", id, i);
        if (put_ex(g_wb, "ckpt", key, key, strlen(key), false, NULL, NULL) != BACKEND_OK)
            return (void *)1;
    }
    return NULL;
}

static void concurrent_writers_and_journal_compaction_never_deadlock(void)
{
    setup();
    backend_close(g_wb);
    g_compact = 1024;
    g_wb = open_wb(0);
    pthread_t t[WRITERS];
    for (long i = 0; i < WRITERS; i++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, writer_main, (void *)i), 0);
    int failed = 0;
    for (int i = 0; i < WRITERS; i++) {
        void *rv = NULL;
        pthread_join(t[i], &rv);
        failed += rv != NULL;
    }
    CU_ASSERT_EQUAL(failed, 0);
    CU_ASSERT_TRUE(backend_wb_flush(g_wb, "ckpt", NULL, 120000, NULL, NULL));
    char key[32];
    int missing = 0;
    for (long id = 0; id < WRITERS; id++)
        for (int i = 0; i < PER_WRITER; i++) {
            snprintf(key, sizeof key, "w%ld/%03d", id, i);
            missing += !holds(g_cold_raw, key, key, strlen(key));
        }
    CU_ASSERT_EQUAL(missing, 0);
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "%s/journal", g_wb_dir);
    CU_ASSERT_EQUAL(stat(path, &st), 0);
    CU_ASSERT_TRUE(st.st_size < 8192);   /* 240 writes: ~50 KiB uncompacted */
    teardown();
}

static const struct cu_test tests[] = {
    { "a_write_is_read_at_once_and_reaches_the_cold_tier_by_the_uploader",
      a_write_is_read_at_once_and_reaches_the_cold_tier_by_the_uploader },
    { "other_buckets_pass_through", other_buckets_pass_through },
    { "uploads_keep_the_order_of_acknowledgement", uploads_keep_the_order_of_acknowledgement },
    { "a_train_stops_behind_a_put_that_fails", a_train_stops_behind_a_put_that_fails },
    { "a_train_put_that_waits_too_long_stops_and_goes_again",
      a_train_put_that_waits_too_long_stops_and_goes_again },
    { "overwrites_and_deletes_supersede_pending_writes",
      overwrites_and_deletes_supersede_pending_writes },
    { "a_restart_resumes_pending_uploads_from_the_journal",
      a_restart_resumes_pending_uploads_from_the_journal },
    { "listings_merge_pending_writes_page_by_page", listings_merge_pending_writes_page_by_page },
    { "multipart_objects_keep_their_etag_in_the_cold_tier",
      multipart_objects_keep_their_etag_in_the_cold_tier },
    { "a_failed_part_is_resent_alone", a_failed_part_is_resent_alone },
    { "a_cold_tier_with_opaque_part_etags_is_learned_once",
      a_cold_tier_with_opaque_part_etags_is_learned_once },
    { "a_restart_resumes_the_cold_upload", a_restart_resumes_the_cold_upload },
    { "a_many_part_object_goes_up_in_parallel_parts",
      a_many_part_object_goes_up_in_parallel_parts },
    { "the_dcp_rename_never_uploads_the_temporary_object",
      the_dcp_rename_never_uploads_the_temporary_object },
    { "write_through_answers_once_the_cold_tier_has_it",
      write_through_answers_once_the_cold_tier_has_it },
    { "a_write_through_is_invisible_until_the_cold_tier_has_it",
      a_write_through_is_invisible_until_the_cold_tier_has_it },
    { "a_write_through_the_cold_tier_refuses_is_taken_back",
      a_write_through_the_cold_tier_refuses_is_taken_back },
    { "closing_stops_an_upload_in_flight_and_the_next_start_resumes_it",
      closing_stops_an_upload_in_flight_and_the_next_start_resumes_it },
    { "the_bandwidth_cap_paces_every_upload_stream_together",
      the_bandwidth_cap_paces_every_upload_stream_together },
    { "parts_of_the_next_objects_go_up_ahead_and_completes_stay_in_order",
      parts_of_the_next_objects_go_up_ahead_and_completes_stay_in_order },
    { "max_dirty_refuses_with_slow_down_and_loses_nothing",
      max_dirty_refuses_with_slow_down_and_loses_nothing },
    { "parts_of_open_uploads_count_on_the_disk_until_completed_or_aborted",
      parts_of_open_uploads_count_on_the_disk_until_completed_or_aborted },
    { "an_abandoned_upload_expires_and_frees_its_parts",
      an_abandoned_upload_expires_and_frees_its_parts },
    { "prefix_rules_choose_the_mode_of_each_key", prefix_rules_choose_the_mode_of_each_key },
    { "tags_of_pending_objects_change_at_once_and_follow_the_object",
      tags_of_pending_objects_change_at_once_and_follow_the_object },
    { "the_status_tells_the_upload_rate", the_status_tells_the_upload_rate },
    { "conditional_writes_see_pending_and_cold_objects",
      conditional_writes_see_pending_and_cold_objects },
    { "a_failing_cold_tier_is_retried_and_nothing_is_lost",
      a_failing_cold_tier_is_retried_and_nothing_is_lost },
    { "the_journal_replays_window_by_window", the_journal_replays_window_by_window },
    { "concurrent_writers_and_journal_compaction_never_deadlock",
      concurrent_writers_and_journal_compaction_never_deadlock },
};

int register_tests(void)
{
    return cu_add_suite("backend_wb", NULL, NULL, tests, CU_N(tests));
}
