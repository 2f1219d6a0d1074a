/* tests/unit/posix_fixture.h - what the posix store's tests
 * (test_backend_posix*.c) share: a fresh store with bucket "bkt" under a
 * mkdtemp() directory per test (setup/teardown), and small helpers to put,
 * read and look at files below the store's root. */
#ifndef SG_POSIX_FIXTURE_H
#define SG_POSIX_FIXTURE_H

#include "backend.h"
#include "posix_int.h"

#include <CUnit/CUnit.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

int register_tests(void);

static char g_tmp[64];
static char g_root[128];
static struct backend *g_b;

static inline int rm_cb(const char *p, const struct stat *st, int fl, struct FTW *f)
{
    (void)st;
    (void)fl;
    (void)f;
    return remove(p);
}

static inline void rm_rf(const char *p)
{
    nftw(p, rm_cb, 64, FTW_DEPTH | FTW_PHYS);
}

static inline int setup(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sgbt.XXXXXX");
    if (!mkdtemp(g_tmp))
        return -1;
    /* two missing levels: open must create them */
    snprintf(g_root, sizeof g_root, "%s/data/store", g_tmp);
    struct backend_posix_conf cf = { .root = g_root };
    if (backend_posix_open(&cf, &g_b) != BACKEND_OK)
        return -1;
    return backend_bucket_create(g_b, "bkt") == BACKEND_OK ? 0 : -1;
}

static inline void teardown(void)
{
    backend_close(g_b);
    g_b = NULL;
    posix_force_walk = 0;
    rm_rf(g_tmp);
}

static inline void md5_hex(const void *buf, size_t len, char out[33])
{
    unsigned char md[16];
    unsigned int ml = 0;
    EVP_Digest(buf, len, md, &ml, EVP_md5(), NULL);
    posix_md5_to_hex(md, out);
}

static inline enum backend_status put_hdr(const char *bucket, const char *key, const char *data,
                                   const char *hname, const char *hval)
{
    struct backend_put *p;
    enum backend_status s = backend_put_begin(g_b, bucket, key, &p);
    if (s != BACKEND_OK)
        return s;
    size_t len = strlen(data);
    s = backend_put_write(p, data, len);
    if (s != BACKEND_OK) {
        backend_put_abort(p);
        return s;
    }
    struct obj_meta m = { 0 };
    md5_hex(data, len, m.etag);
    if (hname)
        obj_meta_add_hdr(&m, hname, hval);
    struct obj_meta out;
    s = backend_put_commit(p, &m, &out);
    if (s == BACKEND_OK) {
        CU_ASSERT_EQUAL(out.size, len);
        CU_ASSERT_STRING_EQUAL(out.etag, m.etag);
    }
    obj_meta_clear(&m);
    obj_meta_clear(&out);
    return s;
}

static inline enum backend_status put(const char *key, const char *data)
{
    return put_hdr("bkt", key, data, NULL, NULL);
}

/* Reads a whole (small) object into buf; returns its length or -1. */
static inline long get(const char *bucket, const char *key, char *buf, size_t cap,
                struct obj_meta *meta)
{
    struct backend_obj *o;
    struct obj_meta m;
    if (backend_object_open(g_b, bucket, key, &m, &o) != BACKEND_OK)
        return -1;
    size_t tot = 0, got;
    while (tot < cap && backend_obj_read(o, tot, buf + tot, cap - tot, &got) == BACKEND_OK &&
           got > 0)
        tot += got;
    backend_obj_close(o);
    if (tot < cap)
        buf[tot] = '\0';
    if (meta)
        *meta = m;
    else
        obj_meta_clear(&m);
    return (long)tot;
}

static inline void path_of(char *out, size_t cap, const char *rel)
{
    snprintf(out, cap, "%s/%s", g_root, rel);
}

static inline bool exists(const char *rel)
{
    char p[512];
    struct stat st;
    path_of(p, sizeof p, rel);
    return lstat(p, &st) == 0;
}

static inline void write_file(const char *rel, const char *data)
{
    char p[512];
    path_of(p, sizeof p, rel);
    FILE *f = fopen(p, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(data, f);
    fclose(f);
}


/* How many temporary files lie below rel (find | wc -l); -1 if unknown. */
static inline int count_tmp_files(const char *rel)
{
    char p[512];
    path_of(p, sizeof p, rel);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "find '%s' -name '.sg~tmp.*' | wc -l", p);
    FILE *f = popen(cmd, "r");
    int n = -1;
    if (f) {
        if (fscanf(f, "%d", &n) != 1)
            n = -1;
        pclose(f);
    }
    return n;
}

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Pages through the bucket with start_after = next_marker; checks each key
 * comes exactly once and in strictly increasing order. Returns the count. */
static inline size_t page_all(const char *prefix, const char *delim, unsigned max, double *secs)
{
    char after[2048] = "", prev[2048] = "";
    size_t total = 0;
    double t0 = now_s();
    for (;;) {
        struct backend_list_req rq = { .prefix = prefix, .delimiter = delim,
                                       .start_after = after[0] ? after : NULL,
                                       .max_keys = max };
        struct backend_list_page pg;
        CU_ASSERT_EQUAL_FATAL(backend_list_objects(g_b, "bkt", &rq, &pg), BACKEND_OK);
        for (size_t i = 0; i < pg.n_objs; i++) {
            if (strcmp(pg.objs[i].key, prev) <= 0) {
                CU_FAIL("listing out of order or duplicated");
                fprintf(stderr, "\n'%s' after '%s'\n", pg.objs[i].key, prev);
            }
            snprintf(prev, sizeof prev, "%s", pg.objs[i].key);
            total++;
        }
        total += pg.n_prefixes;
        bool tr = pg.truncated;
        if (tr)
            snprintf(after, sizeof after, "%s", pg.next_marker);
        CU_ASSERT(pg.n_objs + pg.n_prefixes <= max);
        backend_list_page_free(&pg);
        if (!tr)
            break;
    }
    *secs = now_s() - t0;
    return total;
}

#endif
