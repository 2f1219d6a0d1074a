/* tests/unit/test_backend_posix.c - the posix store against backend.h: key
 * mapping, escapes through symlinks, atomic writes, copy, delete, listing
 * order and paging (100,000 keys), multipart uploads and bucket rules. Each
 * test gets a fresh store under a mkdtemp() directory. */
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

static int rm_cb(const char *p, const struct stat *st, int fl, struct FTW *f)
{
    (void)st;
    (void)fl;
    (void)f;
    return remove(p);
}

static void rm_rf(const char *p)
{
    nftw(p, rm_cb, 64, FTW_DEPTH | FTW_PHYS);
}

static int setup(void)
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

static void teardown(void)
{
    backend_close(g_b);
    g_b = NULL;
    posix_force_walk = 0;
    rm_rf(g_tmp);
}

static void md5_hex(const void *buf, size_t len, char out[33])
{
    unsigned char md[16];
    unsigned int ml = 0;
    EVP_Digest(buf, len, md, &ml, EVP_md5(), NULL);
    posix_md5_to_hex(md, out);
}

static enum backend_status put_hdr(const char *bucket, const char *key, const char *data,
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

static enum backend_status put(const char *key, const char *data)
{
    return put_hdr("bkt", key, data, NULL, NULL);
}

/* Reads a whole (small) object into buf; returns its length or -1. */
static long get(const char *bucket, const char *key, char *buf, size_t cap,
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

static void path_of(char *out, size_t cap, const char *rel)
{
    snprintf(out, cap, "%s/%s", g_root, rel);
}

static bool exists(const char *rel)
{
    char p[512];
    struct stat st;
    path_of(p, sizeof p, rel);
    return lstat(p, &st) == 0;
}

static void write_file(const char *rel, const char *data)
{
    char p[512];
    path_of(p, sizeof p, rel);
    FILE *f = fopen(p, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(data, f);
    fclose(f);
}

/* ---- pure mapping ---- */

static void key_mapping_table(void)
{
    static const struct {
        const char *key;
        enum backend_status st;
        const char *path;
    } cases[] = {
        { "a", BACKEND_OK, "a" },
        { "a/b/c.txt", BACKEND_OK, "a/b/c.txt" },
        { "a//b", BACKEND_OK, "a/.sg~e/b" },
        { "dir/", BACKEND_OK, "dir/.sg~e" },
        { "/lead", BACKEND_OK, ".sg~e/lead" },
        { "/", BACKEND_OK, ".sg~e/.sg~e" },
        { "sp ace/%41+b", BACKEND_OK, "sp ace/%41+b" },
        { "\xc3\xa9t\xc3\xa9/\xe6\x97\xa5", BACKEND_OK, "\xc3\xa9t\xc3\xa9/\xe6\x97\xa5" },
        { ".hidden", BACKEND_OK, ".hidden" },
        { "...", BACKEND_OK, "..." },
        { ".sg", BACKEND_OK, ".sg" },
        { "", BACKEND_BAD_KEY, NULL },
        { ".", BACKEND_BAD_KEY, NULL },
        { "..", BACKEND_BAD_KEY, NULL },
        { "../etc/passwd", BACKEND_BAD_KEY, NULL },
        { "a/../../b", BACKEND_BAD_KEY, NULL },
        { "a/./b", BACKEND_BAD_KEY, NULL },
        { "a/..", BACKEND_BAD_KEY, NULL },
        { ".sg~e", BACKEND_BAD_KEY, NULL },
        { "x/.sg~tmp.abc", BACKEND_BAD_KEY, NULL },
        { ".sg~", BACKEND_BAD_KEY, NULL },
    };
    char out[POSIX_PATH_MAX];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        enum backend_status st = posix_key_to_path(cases[i].key, out, sizeof out);
        CU_ASSERT_EQUAL(st, cases[i].st);
        if (st != cases[i].st)
            fprintf(stderr, "\nkey '%s': %s\n", cases[i].key, backend_status_name(st));
        if (st == BACKEND_OK && cases[i].path)
            CU_ASSERT_STRING_EQUAL(out, cases[i].path);
    }
    char big[2048];
    memset(big, 'a', 1025);
    big[1025] = '\0';
    CU_ASSERT_EQUAL(posix_key_to_path(big, out, sizeof out), BACKEND_KEY_TOO_LONG);
    big[1024] = '\0';   /* 1024 bytes but one 1024-byte segment */
    CU_ASSERT_EQUAL(posix_key_to_path(big, out, sizeof out), BACKEND_KEY_TOO_LONG);
    memset(big, 'a', 255);
    big[255] = '/';
    memset(big + 256, 'b', 255);
    big[511] = '\0';
    CU_ASSERT_EQUAL(posix_key_to_path(big, out, sizeof out), BACKEND_OK);
    memset(big, '/', 1024);   /* worst case expansion still fits */
    big[1024] = '\0';
    CU_ASSERT_EQUAL(posix_key_to_path(big, out, sizeof out), BACKEND_OK);
    /* spellings: directories sort as "d/", the empty segment as "" */
    char sp[300];
    CU_ASSERT_EQUAL(posix_name_to_spelling("d", true, sp, sizeof sp), 2);
    CU_ASSERT_STRING_EQUAL(sp, "d/");
    CU_ASSERT_EQUAL(posix_name_to_spelling(".sg~e", false, sp, sizeof sp), 0);
    CU_ASSERT_EQUAL(posix_name_to_spelling(".sg~e", true, sp, sizeof sp), 1);
    CU_ASSERT_STRING_EQUAL(sp, "/");
    CU_ASSERT_EQUAL(posix_name_to_spelling(".sg~tmp.x", false, sp, sizeof sp), -1);
}

static void meta_encoding_round_trips_and_rejects_garbage(void)
{
    struct obj_meta m = { 0 }, d = { 0 };
    obj_meta_add_hdr(&m, "content-type", "text/plain");
    obj_meta_add_hdr(&m, "x-amz-meta-empty", "");
    unsigned char buf[POSIX_META_MAX];
    size_t len;
    CU_ASSERT_EQUAL(posix_meta_encode("0123456789abcdef0123456789abcdef", m.hdrs, m.n_hdrs,
                                      buf, sizeof buf, &len), BACKEND_OK);
    CU_ASSERT_EQUAL(posix_meta_decode(buf, len, &d), 0);
    CU_ASSERT_STRING_EQUAL(d.etag, "0123456789abcdef0123456789abcdef");
    CU_ASSERT_EQUAL(d.n_hdrs, 2);
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&d, "content-type"), "text/plain");
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&d, "x-amz-meta-empty"), "");
    for (size_t cut = 0; cut < len; cut++) {
        struct obj_meta t = { 0 };
        CU_ASSERT_EQUAL(posix_meta_decode(buf, cut, &t), -1);
        obj_meta_clear(&t);
    }
    buf[0] = 'X';
    struct obj_meta t = { 0 };
    CU_ASSERT_EQUAL(posix_meta_decode(buf, len, &t), -1);
    obj_meta_clear(&m);
    obj_meta_clear(&d);
    obj_meta_clear(&t);
}

/* ---- security ---- */

static void symlink_inside_bucket_pointing_outside_is_denied(void)
{
    char tgt[256], lnk[512];
    snprintf(tgt, sizeof tgt, "%s/outside", g_tmp);
    CU_ASSERT_EQUAL_FATAL(mkdir(tgt, 0755), 0);
    char secret[300];
    snprintf(secret, sizeof secret, "%s/secret", tgt);
    FILE *f = fopen(secret, "w");
    fputs("s3cr3t", f);
    fclose(f);
    path_of(lnk, sizeof lnk, "bkt/evil");
    CU_ASSERT_EQUAL_FATAL(symlink(tgt, lnk), 0);
    path_of(lnk, sizeof lnk, "bkt/file-link");
    CU_ASSERT_EQUAL_FATAL(symlink(secret, lnk), 0);
    CU_ASSERT_EQUAL(put("inside", "x"), BACKEND_OK);
    path_of(lnk, sizeof lnk, "bkt/inner-link");
    CU_ASSERT_EQUAL_FATAL(symlink("inside", lnk), 0);

    for (int walk = 0; walk < 2; walk++) {
        posix_force_walk = walk;
        char buf[64];
        struct obj_meta m;
        CU_ASSERT_EQUAL(backend_object_head(g_b, "bkt", "evil/secret", &m), BACKEND_DENIED);
        obj_meta_clear(&m);
        CU_ASSERT_EQUAL(get("bkt", "file-link", buf, sizeof buf, NULL), -1);
        CU_ASSERT_EQUAL(backend_object_head(g_b, "bkt", "file-link", &m), BACKEND_DENIED);
        obj_meta_clear(&m);
        CU_ASSERT_EQUAL(backend_object_head(g_b, "bkt", "inner-link", &m), BACKEND_DENIED);
        obj_meta_clear(&m);
        CU_ASSERT_EQUAL(put("evil/new", "x"), BACKEND_DENIED);
        CU_ASSERT_EQUAL(put("evil/secret", "x"), BACKEND_DENIED);
        CU_ASSERT_EQUAL(backend_object_delete(g_b, "bkt", "evil/secret"), BACKEND_DENIED);
        CU_ASSERT_EQUAL(backend_object_delete(g_b, "bkt", "file-link"), BACKEND_DENIED);
    }
    /* nothing written outside, target intact */
    char p[400];
    snprintf(p, sizeof p, "%s/new", tgt);
    CU_ASSERT_NOT_EQUAL(access(p, F_OK), 0);
    CU_ASSERT_EQUAL(access(secret, F_OK), 0);
    /* listings skip symlinks */
    struct backend_list_req rq = { .prefix = "", .max_keys = 1000 };
    struct backend_list_page pg;
    CU_ASSERT_EQUAL_FATAL(backend_list_objects(g_b, "bkt", &rq, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL(pg.n_objs, 1);
    if (pg.n_objs == 1)
        CU_ASSERT_STRING_EQUAL(pg.objs[0].key, "inside");
    backend_list_page_free(&pg);
}

static void dotdot_and_reserved_keys_are_rejected(void)
{
    CU_ASSERT_EQUAL(put("../escape", "x"), BACKEND_BAD_KEY);
    CU_ASSERT_EQUAL(put("a/../../escape", "x"), BACKEND_BAD_KEY);
    CU_ASSERT_EQUAL(put(".sg~tmp.zzz", "x"), BACKEND_BAD_KEY);
    CU_ASSERT_EQUAL(put("", "x"), BACKEND_BAD_KEY);
    struct obj_meta m;
    CU_ASSERT_EQUAL(backend_object_head(g_b, "bkt", "..", &m), BACKEND_BAD_KEY);
    obj_meta_clear(&m);
    CU_ASSERT_EQUAL(backend_object_delete(g_b, "bkt", "a/.."), BACKEND_BAD_KEY);
    CU_ASSERT_EQUAL(put_hdr("../bkt", "k", "x", NULL, NULL), BACKEND_BAD_BUCKET_NAME);
    CU_ASSERT_EQUAL(put_hdr(".shardgate", "k", "x", NULL, NULL), BACKEND_BAD_BUCKET_NAME);
    CU_ASSERT(!exists("escape"));
    CU_ASSERT(!exists("../escape"));
}

static int collect_bucket(void *arg, const char *name, time_t created)
{
    char *acc = arg;
    CU_ASSERT(created > 0);
    strcat(acc, name);
    strcat(acc, ",");
    return 0;
}

static void bucket_dir_that_is_a_symlink_is_denied_and_not_listed(void)
{
    char tgt[256], lnk[512];
    snprintf(tgt, sizeof tgt, "%s/elsewhere", g_tmp);
    CU_ASSERT_EQUAL_FATAL(mkdir(tgt, 0755), 0);
    path_of(lnk, sizeof lnk, "linked");
    CU_ASSERT_EQUAL_FATAL(symlink(tgt, lnk), 0);
    CU_ASSERT_EQUAL(backend_bucket_head(g_b, "linked"), BACKEND_DENIED);
    CU_ASSERT_EQUAL(put_hdr("linked", "k", "x", NULL, NULL), BACKEND_DENIED);
    struct obj_meta m;
    CU_ASSERT_EQUAL(backend_object_head(g_b, "linked", "k", &m), BACKEND_DENIED);
    obj_meta_clear(&m);
    CU_ASSERT_EQUAL(backend_bucket_create(g_b, "linked"), BACKEND_BUCKET_EXISTS);
    char acc[256] = "";
    CU_ASSERT_EQUAL(backend_bucket_list(g_b, collect_bucket, acc), BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(acc, "bkt,");
}

/* ---- objects ---- */

static void put_commit_then_read_back_with_headers(void)
{
    CU_ASSERT_EQUAL_FATAL(put_hdr("bkt", "photos/2024/cat.jpg", "meow", "content-type",
                                  "image/jpeg"), BACKEND_OK);
    char buf[64];
    struct obj_meta m;
    CU_ASSERT_EQUAL_FATAL(get("bkt", "photos/2024/cat.jpg", buf, sizeof buf, &m), 4);
    CU_ASSERT_STRING_EQUAL(buf, "meow");
    char hex[33];
    md5_hex("meow", 4, hex);
    CU_ASSERT_STRING_EQUAL(m.etag, hex);
    CU_ASSERT_EQUAL(m.size, 4);
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&m, "content-type"), "image/jpeg");
    CU_ASSERT(m.mtime.tv_sec > 0);
    obj_meta_clear(&m);
    struct obj_meta h;
    CU_ASSERT_EQUAL(backend_object_head(g_b, "bkt", "photos/2024/cat.jpg", &h), BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(h.etag, hex);
    obj_meta_clear(&h);
    /* reading past the end gives 0 bytes */
    struct backend_obj *o;
    CU_ASSERT_EQUAL_FATAL(backend_object_open(g_b, "bkt", "photos/2024/cat.jpg", &h, &o),
                          BACKEND_OK);
    size_t got = 9;
    CU_ASSERT_EQUAL(backend_obj_read(o, 100, buf, sizeof buf, &got), BACKEND_OK);
    CU_ASSERT_EQUAL(got, 0);
    CU_ASSERT(backend_obj_fd(o) >= 0);
    backend_obj_close(o);
    obj_meta_clear(&h);
    /* odd keys */
    const char *keys[] = { "a//b", "dir/", "dir/file", "sp ace", "100%+x", "\xe6\x97\xa5",
                           "/", "/lead" };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        CU_ASSERT_EQUAL(put(keys[i], keys[i]), BACKEND_OK);
    }
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        CU_ASSERT_EQUAL(get("bkt", keys[i], buf, sizeof buf, NULL), (long)strlen(keys[i]));
        CU_ASSERT_STRING_EQUAL(buf, keys[i]);
    }
    CU_ASSERT_EQUAL(get("nobucket", "x", buf, sizeof buf, NULL), -1);
    CU_ASSERT_EQUAL(backend_object_head(g_b, "nobucket", "x", &h), BACKEND_NO_BUCKET);
    obj_meta_clear(&h);
    CU_ASSERT_EQUAL(backend_object_head(g_b, "bkt", "missing", &h), BACKEND_NO_KEY);
    obj_meta_clear(&h);
    CU_ASSERT_EQUAL(backend_object_head(g_b, "bkt", "photos", &h), BACKEND_NO_KEY);
    obj_meta_clear(&h);
}

static int count_tmp_files(const char *rel)
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

static void abort_leaves_nothing_visible(void)
{
    struct backend_put *p;
    CU_ASSERT_EQUAL_FATAL(backend_put_begin(g_b, "bkt", "deep/er/obj", &p), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_put_write(p, "half", 4), BACKEND_OK);
    struct obj_meta m;
    CU_ASSERT_EQUAL(backend_object_head(g_b, "bkt", "deep/er/obj", &m), BACKEND_NO_KEY);
    obj_meta_clear(&m);
    /* invisible in listings while in flight */
    struct backend_list_req rq = { .prefix = "", .max_keys = 1000 };
    struct backend_list_page pg;
    CU_ASSERT_EQUAL(backend_list_objects(g_b, "bkt", &rq, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL(pg.n_objs + pg.n_prefixes, 0);
    backend_list_page_free(&pg);
    rq.delimiter = "/";
    CU_ASSERT_EQUAL(backend_list_objects(g_b, "bkt", &rq, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL(pg.n_objs + pg.n_prefixes, 0);
    backend_list_page_free(&pg);
    backend_put_abort(p);
    CU_ASSERT_EQUAL(count_tmp_files("bkt"), 0);
    CU_ASSERT(!exists("bkt/deep"));
    CU_ASSERT_EQUAL(backend_bucket_delete(g_b, "bkt"), BACKEND_OK);
}

static void overwrite_replaces_data_and_meta(void)
{
    CU_ASSERT_EQUAL(put_hdr("bkt", "k", "first version", "content-type", "a/b"), BACKEND_OK);
    CU_ASSERT_EQUAL(put("k", "v2"), BACKEND_OK);
    char buf[64];
    struct obj_meta m;
    CU_ASSERT_EQUAL(get("bkt", "k", buf, sizeof buf, &m), 2);
    CU_ASSERT_STRING_EQUAL(buf, "v2");
    CU_ASSERT_PTR_NULL(obj_meta_get_hdr(&m, "content-type"));
    obj_meta_clear(&m);
    /* a reader that opened the old version keeps reading it */
    struct backend_obj *o;
    CU_ASSERT_EQUAL_FATAL(backend_object_open(g_b, "bkt", "k", &m, &o), BACKEND_OK);
    CU_ASSERT_EQUAL(put("k", "third!"), BACKEND_OK);
    size_t got;
    CU_ASSERT_EQUAL(backend_obj_read(o, 0, buf, sizeof buf, &got), BACKEND_OK);
    CU_ASSERT_EQUAL(got, 2);
    CU_ASSERT_EQUAL(m.size, 2);
    backend_obj_close(o);
    obj_meta_clear(&m);
    CU_ASSERT_EQUAL(count_tmp_files("bkt"), 0);
}

static void expect(const char *key, const char *want)
{
    char buf[64];
    long n = get("bkt", key, buf, sizeof buf, NULL);
    CU_ASSERT_EQUAL(n, (long)strlen(want));
    if (n >= 0) {
        CU_ASSERT_STRING_EQUAL(buf, want);
    } else {
        fprintf(stderr, "\n%s: not readable\n", key);
    }
}

/* S3 holds "a/b" beside "a/b/c" (and "a/" beside "a//x"): a file cannot also
 * be a directory, so the key's object moves into the directory as its
 * POSIX_SELF (posix_nest.c), in whichever order the keys come. */
static void keys_that_are_also_prefixes_coexist(void)
{
    CU_ASSERT_EQUAL(put("a/b", "file"), BACKEND_OK);
    CU_ASSERT_EQUAL(put("a/b/c", "under a file"), BACKEND_OK);
    CU_ASSERT_EQUAL(put("a/b/c/d", "under two"), BACKEND_OK);
    CU_ASSERT_TRUE(exists("bkt/a/b/" POSIX_SELF));
    CU_ASSERT_TRUE(exists("bkt/a/b/c/" POSIX_SELF));
    expect("a/b", "file");
    expect("a/b/c", "under a file");
    expect("a/b/c/d", "under two");
    struct obj_meta m;
    char want[33];
    md5_hex("file", 4, want);
    CU_ASSERT_EQUAL(backend_object_head(g_b, "bkt", "a/b", &m), BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(m.etag, want);   /* the metadata moved with the file */
    CU_ASSERT_EQUAL(m.size, 4);
    obj_meta_clear(&m);
    CU_ASSERT_EQUAL(put("x/y/z", "deep"), BACKEND_OK);
    CU_ASSERT_EQUAL(put("x/y", "over a dir"), BACKEND_OK);
    CU_ASSERT_EQUAL(put("x", "over two"), BACKEND_OK);
    expect("x/y", "over a dir");
    expect("x", "over two");
    CU_ASSERT_EQUAL(put("x/y", "again"), BACKEND_OK);   /* an overwrite stays nested */
    expect("x/y", "again");
    /* folder markers beside keys below them, and empty segments */
    CU_ASSERT_EQUAL(put("x/y/", "marker"), BACKEND_OK);
    CU_ASSERT_EQUAL(put("m/", "marker first"), BACKEND_OK);
    CU_ASSERT_EQUAL(put("m//x", "empty segment"), BACKEND_OK);
    expect("m/", "marker first");
    expect("m//x", "empty segment");
    /* the directory appeared after put_begin: the commit finds it */
    struct backend_put *p;
    CU_ASSERT_EQUAL_FATAL(backend_put_begin(g_b, "bkt", "late", &p), BACKEND_OK);
    CU_ASSERT_EQUAL(put("late/child", "c"), BACKEND_OK);
    struct obj_meta pm = { 0 };
    CU_ASSERT_EQUAL(backend_put_write(p, "l", 1), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_put_commit(p, &pm, NULL), BACKEND_OK);
    expect("late", "l");
    expect("late/child", "c");
    /* an empty directory left behind holds a key too */
    char d[512];
    path_of(d, sizeof d, "bkt/emptydir");
    CU_ASSERT_EQUAL(mkdir(d, 0755), 0);
    CU_ASSERT_EQUAL(put("emptydir", "now an object"), BACKEND_OK);
    expect("emptydir", "now an object");
    /* a plain directory is no object */
    CU_ASSERT_EQUAL(backend_object_head(g_b, "bkt", "a", &m), BACKEND_NO_KEY);
    CU_ASSERT_EQUAL(backend_object_delete(g_b, "bkt", "a"), BACKEND_NO_KEY);
    /* deletes in any order; directories go when nothing is left in them */
    CU_ASSERT_EQUAL(backend_object_delete(g_b, "bkt", "a/b"), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_object_head(g_b, "bkt", "a/b", &m), BACKEND_NO_KEY);
    expect("a/b/c", "under a file");
    CU_ASSERT_EQUAL(backend_object_delete(g_b, "bkt", "a/b/c/d"), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_object_delete(g_b, "bkt", "a/b/c"), BACKEND_OK);
    CU_ASSERT_FALSE(exists("bkt/a"));
    CU_ASSERT_EQUAL(backend_object_delete(g_b, "bkt", "x/y/z"), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_object_delete(g_b, "bkt", "x/y/"), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_object_delete(g_b, "bkt", "x"), BACKEND_OK);
    expect("x/y", "again");
    CU_ASSERT_EQUAL(backend_object_delete(g_b, "bkt", "x/y"), BACKEND_OK);
    CU_ASSERT_FALSE(exists("bkt/x"));
    CU_ASSERT_EQUAL(count_tmp_files("bkt"), 0);
}

/* Conditions look where the object is, nested or not. */
static void conditions_see_a_nested_object(void)
{
    CU_ASSERT_EQUAL(put("n", "v1"), BACKEND_OK);
    CU_ASSERT_EQUAL(put("n/below", "b"), BACKEND_OK);
    struct backend_cond absent = { .kind = BACKEND_COND_ABSENT };
    struct backend_cond match = { .kind = BACKEND_COND_ETAG };
    md5_hex("v1", 2, match.etag);
    struct backend_put *p;
    struct obj_meta m = { 0 };
    CU_ASSERT_EQUAL_FATAL(backend_put_begin(g_b, "bkt", "n", &p), BACKEND_OK);
    backend_put_set_cond(p, &absent);
    CU_ASSERT_EQUAL(backend_put_commit(p, &m, NULL), BACKEND_PRECONDITION_FAILED);
    CU_ASSERT_EQUAL_FATAL(backend_put_begin(g_b, "bkt", "n", &p), BACKEND_OK);
    backend_put_set_cond(p, &match);
    CU_ASSERT_EQUAL(backend_put_write(p, "v2", 2), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_put_commit(p, &m, NULL), BACKEND_OK);
    expect("n", "v2");
    CU_ASSERT_EQUAL_FATAL(backend_put_begin(g_b, "bkt", "n/new", &p), BACKEND_OK);
    backend_put_set_cond(p, &absent);
    CU_ASSERT_EQUAL(backend_put_write(p, "x", 1), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_put_commit(p, &m, NULL), BACKEND_OK);
    expect("n/new", "x");
}

static void delete_removes_empty_parents(void)
{
    CU_ASSERT_EQUAL(put("p/q/r/s", "1"), BACKEND_OK);
    CU_ASSERT_EQUAL(put("p/keep", "2"), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_object_delete(g_b, "bkt", "p/q/r/s"), BACKEND_OK);
    CU_ASSERT(!exists("bkt/p/q"));
    CU_ASSERT(exists("bkt/p/keep"));
    CU_ASSERT_EQUAL(backend_object_delete(g_b, "bkt", "p/q/r/s"), BACKEND_NO_KEY);
    CU_ASSERT_EQUAL(backend_object_delete(g_b, "bkt", "p"), BACKEND_NO_KEY);
    CU_ASSERT_EQUAL(backend_object_delete(g_b, "bkt", "p/keep"), BACKEND_OK);
    CU_ASSERT(!exists("bkt/p"));
    CU_ASSERT(exists("bkt"));
    CU_ASSERT_EQUAL(put("m/", "marker"), BACKEND_OK);
    CU_ASSERT_EQUAL(put("m/x", "x"), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_object_delete(g_b, "bkt", "m/"), BACKEND_OK);
    CU_ASSERT(exists("bkt/m/x"));
    CU_ASSERT_EQUAL(backend_object_delete(g_b, "bkt", "m/x"), BACKEND_OK);
    CU_ASSERT(!exists("bkt/m"));
    CU_ASSERT_EQUAL(backend_object_delete(g_b, "no", "x"), BACKEND_BAD_BUCKET_NAME);
    CU_ASSERT_EQUAL(backend_object_delete(g_b, "nobkt", "x"), BACKEND_NO_BUCKET);
}

static void copy_keeps_or_replaces_headers_and_allows_same_key(void)
{
    CU_ASSERT_EQUAL_FATAL(put_hdr("bkt", "src", "payload", "content-type", "text/x"),
                          BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(backend_bucket_create(g_b, "other"), BACKEND_OK);
    struct obj_meta out;
    char hex[33], buf[64];
    md5_hex("payload", 7, hex);
    CU_ASSERT_EQUAL(backend_object_copy(g_b, "bkt", "src", "other", "d/copy", NULL, &out),
                    BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(out.etag, hex);
    CU_ASSERT_EQUAL(out.size, 7);
    obj_meta_clear(&out);
    struct obj_meta m;
    CU_ASSERT_EQUAL(get("other", "d/copy", buf, sizeof buf, &m), 7);
    CU_ASSERT_STRING_EQUAL(buf, "payload");
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&m, "content-type"), "text/x");
    obj_meta_clear(&m);
    struct obj_meta rep = { 0 };
    obj_meta_add_hdr(&rep, "content-type", "new/type");
    obj_meta_add_hdr(&rep, "x-amz-meta-k", "v");
    CU_ASSERT_EQUAL(backend_object_copy(g_b, "bkt", "src", "bkt", "src", &rep, &out),
                    BACKEND_OK);
    obj_meta_clear(&out);
    obj_meta_clear(&rep);
    CU_ASSERT_EQUAL(get("bkt", "src", buf, sizeof buf, &m), 7);
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&m, "content-type"), "new/type");
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&m, "x-amz-meta-k"), "v");
    CU_ASSERT_STRING_EQUAL(m.etag, hex);
    obj_meta_clear(&m);
    CU_ASSERT_EQUAL(backend_object_copy(g_b, "bkt", "nope", "bkt", "x", NULL, &out),
                    BACKEND_NO_KEY);
    obj_meta_clear(&out);
    CU_ASSERT_EQUAL(backend_object_copy(g_b, "bkt", "src", "bkt", "src/child", NULL, &out),
                    BACKEND_OK);   /* "src" moves into the directory (posix_nest.c) */
    obj_meta_clear(&out);
    CU_ASSERT_EQUAL(get("bkt", "src", buf, sizeof buf, NULL), 7);
    CU_ASSERT_EQUAL(get("bkt", "src/child", buf, sizeof buf, NULL), 7);
    CU_ASSERT_EQUAL(count_tmp_files(""), 0);
}

/* ---- listing ---- */

/* Lists one page and renders it as "key,key,[prefix],..." */
static void list_str(const char *prefix, const char *delim, const char *after, unsigned max,
                     char *acc, size_t cap, bool *trunc, char *marker)
{
    struct backend_list_req rq = { .prefix = prefix, .delimiter = delim,
                                   .start_after = after, .max_keys = max };
    struct backend_list_page pg;
    acc[0] = '\0';
    CU_ASSERT_EQUAL_FATAL(backend_list_objects(g_b, "bkt", &rq, &pg), BACKEND_OK);
    size_t io = 0, ip = 0;
    /* merge objects and prefixes back into key order */
    while (io < pg.n_objs || ip < pg.n_prefixes) {
        bool take_p = ip < pg.n_prefixes &&
                      (io == pg.n_objs || strcmp(pg.prefixes[ip], pg.objs[io].key) < 0);
        if (take_p) {
            snprintf(acc + strlen(acc), cap - strlen(acc), "[%s],", pg.prefixes[ip++]);
        } else {
            snprintf(acc + strlen(acc), cap - strlen(acc), "%s,", pg.objs[io++].key);
        }
    }
    if (trunc)
        *trunc = pg.truncated;
    if (marker)
        snprintf(marker, 256, "%s", pg.next_marker ? pg.next_marker : "(null)");
    backend_list_page_free(&pg);
}

/* The whole bucket listed one key per page, each page after the last
 * page's marker: the keys joined as list_str joins them. */
static void list_pages_of_one(char *all, size_t cap)
{
    char acc[256], mk[256], after[256] = "";
    bool tr = false;
    all[0] = '\0';
    for (int i = 0; i < 20; i++) {
        list_str("", NULL, after[0] ? after : NULL, 1, acc, sizeof acc, &tr, mk);
        strncat(all, acc, cap - strlen(all) - 1);
        if (!tr)
            break;
        snprintf(after, sizeof after, "%s", mk);
    }
}

static void listing_order_with_tricky_names(void)
{
    /* phase 1 without "a" and "a/"; phase 2 adds them (nested, posix_nest.c):
     * the order "a" < "a.txt" < "a/" < "a/-" < "a//x" ... < "a0" holds */
    const char *keys[] = { "a0", "a//x", "dir/", "a/b", "a.txt", "dir/f", "b/", "/x",
                           "a/b0", "a/-" };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CU_ASSERT_EQUAL(put(keys[i], "v"), BACKEND_OK);
    /* noise that must stay hidden */
    write_file("bkt/.sg~tmp.leftover", "x");
    write_file("bkt/a/.sg~other", "x");
    char d[512];
    path_of(d, sizeof d, "bkt/emptydir");
    mkdir(d, 0755);
    char acc[1024];
    bool tr;
    char mk[256];
    list_str("", NULL, NULL, 1000, acc, sizeof acc, &tr, mk);
    CU_ASSERT_STRING_EQUAL(acc, "/x,a.txt,a/-,a//x,a/b,a/b0,a0,b/,dir/,dir/f,");
    if (strcmp(acc, "/x,a.txt,a/-,a//x,a/b,a/b0,a0,b/,dir/,dir/f,") != 0)
        fprintf(stderr, "\ngot %s\n", acc);
    CU_ASSERT(!tr);
    CU_ASSERT_STRING_EQUAL(mk, "dir/f");
    list_str("a", NULL, NULL, 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "a.txt,a/-,a//x,a/b,a/b0,a0,");
    list_str("a/", NULL, NULL, 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "a/-,a//x,a/b,a/b0,");
    list_str("a/b", NULL, NULL, 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "a/b,a/b0,");
    list_str("a//", NULL, NULL, 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "a//x,");
    list_str("zzz/", NULL, NULL, 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "");
    list_str("", NULL, "a.txt", 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "a/-,a//x,a/b,a/b0,a0,b/,dir/,dir/f,");
    list_str("", NULL, "a/", 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "a/-,a//x,a/b,a/b0,a0,b/,dir/,dir/f,");
    list_str("", NULL, "a//x", 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "a/b,a/b0,a0,b/,dir/,dir/f,");
    list_str("", NULL, "a/a", 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "a/b,a/b0,a0,b/,dir/,dir/f,");
    list_str("", NULL, "dir/", 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "dir/f,");
    list_str("", NULL, "zzz", 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "");
    list_str("a/", NULL, "b", 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "");
    list_str("a/", NULL, "a", 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "a/-,a//x,a/b,a/b0,");
    list_str("", "/", NULL, 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "[/],a.txt,[a/],a0,[b/],[dir/],");
    /* every page of 1 key walks the same order */
    char all[1024];
    list_pages_of_one(all, sizeof all);
    CU_ASSERT_STRING_EQUAL(all, "/x,a.txt,a/-,a//x,a/b,a/b0,a0,b/,dir/,dir/f,");
    /* phase 2: "a" and "a/" as objects too: "a" is a directory of keys, and
     * "a/" (a/.sg~e) one of keys "a//..." */
    CU_ASSERT_EQUAL(put("a", "v"), BACKEND_OK);
    CU_ASSERT_EQUAL(put("a/", "v"), BACKEND_OK);
    const char *want2 = "/x,a,a.txt,a/,a/-,a//x,a/b,a/b0,a0,b/,dir/,dir/f,";
    list_str("", NULL, NULL, 1000, acc, sizeof acc, &tr, NULL);
    CU_ASSERT_STRING_EQUAL(acc, want2);
    if (strcmp(acc, want2) != 0)
        fprintf(stderr, "\ngot %s\n", acc);
    list_str("a", NULL, NULL, 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "a,a.txt,a/,a/-,a//x,a/b,a/b0,a0,");
    list_str("a/", NULL, NULL, 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "a/,a/-,a//x,a/b,a/b0,");
    list_str("a//", NULL, NULL, 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "a//x,");
    list_str("", NULL, "a", 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "a.txt,a/,a/-,a//x,a/b,a/b0,a0,b/,dir/,dir/f,");
    list_str("", NULL, "a/", 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "a/-,a//x,a/b,a/b0,a0,b/,dir/,dir/f,");
    list_str("", "/", NULL, 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "[/],a,a.txt,[a/],a0,[b/],[dir/],");
    list_str("a/", "/", NULL, 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "a/,a/-,[a//],a/b,a/b0,");
    /* pages of 1 key walk the same order */
    list_pages_of_one(all, sizeof all);
    CU_ASSERT_STRING_EQUAL(all, want2);
}

static void delimiter_gives_common_prefixes(void)
{
    const char *keys[] = { "photos/2023/a.jpg", "photos/2024/b.jpg", "photos/top.jpg",
                           "readme", "docs/x", "a-1", "a-2", "a-3/z", "b" };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CU_ASSERT_EQUAL(put(keys[i], "v"), BACKEND_OK);
    char d[512];
    path_of(d, sizeof d, "bkt/emptydir");
    mkdir(d, 0755);
    path_of(d, sizeof d, "bkt/photos/empty");
    mkdir(d, 0755);
    char acc[1024], mk[256];
    bool tr;
    list_str("", "/", NULL, 1000, acc, sizeof acc, &tr, mk);
    CU_ASSERT_STRING_EQUAL(acc, "a-1,a-2,[a-3/],b,[docs/],[photos/],readme,");
    CU_ASSERT_STRING_EQUAL(mk, "readme");
    list_str("photos/", "/", NULL, 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "[photos/2023/],[photos/2024/],photos/top.jpg,");
    list_str("photos", "/", NULL, 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "[photos/],");
    /* any delimiter string */
    list_str("", "-", NULL, 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "[a-],b,docs/x,photos/2023/a.jpg,photos/2024/b.jpg,"
                                "photos/top.jpg,readme,");
    list_str("", "/2", NULL, 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "a-1,a-2,a-3/z,b,docs/x,[photos/2],photos/top.jpg,readme,");
    list_str("", "oto", NULL, 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "a-1,a-2,a-3/z,b,docs/x,[photo],readme,");
    /* prefix pages under a delimiter */
    list_str("", "/", NULL, 2, acc, sizeof acc, &tr, mk);
    CU_ASSERT_STRING_EQUAL(acc, "a-1,a-2,");
    CU_ASSERT(tr);
    list_str("", "/", "a-2", 2, acc, sizeof acc, &tr, mk);
    CU_ASSERT_STRING_EQUAL(acc, "[a-3/],b,");
    CU_ASSERT(tr);
    CU_ASSERT_STRING_EQUAL(mk, "b");
    list_str("", "/", "b", 2, acc, sizeof acc, &tr, mk);
    CU_ASSERT_STRING_EQUAL(acc, "[docs/],[photos/],");
    CU_ASSERT_STRING_EQUAL(mk, "photos/");
    CU_ASSERT(tr);
    list_str("", "/", "photos/", 2, acc, sizeof acc, &tr, mk);
    CU_ASSERT_STRING_EQUAL(acc, "readme,");
    CU_ASSERT(!tr);
}

static void start_after_inside_rolled_up_prefix_skips_it(void)
{
    const char *keys[] = { "a/1", "a/2", "a/3/x", "b/1", "c" };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CU_ASSERT_EQUAL(put(keys[i], "v"), BACKEND_OK);
    char acc[1024];
    list_str("", "/", "a/1", 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "[b/],c,");
    list_str("", "/", "a/", 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "[b/],c,");
    list_str("", "/", "a", 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "[a/],[b/],c,");
    list_str("a/", "/", "a/2", 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "[a/3/],");
    list_str("a/", "/", "a/3/", 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "");
    list_str("", NULL, "a/3", 1000, acc, sizeof acc, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(acc, "a/3/x,b/1,c,");
}

static void max_keys_0_1_and_1000(void)
{
    char key[32];
    for (int i = 0; i < 1005; i++) {
        snprintf(key, sizeof key, "k%04d", i);
        write_file("bkt/placeholder", "");   /* keep a foreign file too */
        char rel[64];
        snprintf(rel, sizeof rel, "bkt/%s", key);
        write_file(rel, "x");
    }
    struct backend_list_req rq = { .prefix = "k", .max_keys = 0 };
    struct backend_list_page pg;
    CU_ASSERT_EQUAL(backend_list_objects(g_b, "bkt", &rq, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL(pg.n_objs + pg.n_prefixes, 0);
    CU_ASSERT(!pg.truncated);
    CU_ASSERT_PTR_NULL(pg.next_marker);
    backend_list_page_free(&pg);
    rq.max_keys = 1;
    CU_ASSERT_EQUAL(backend_list_objects(g_b, "bkt", &rq, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL(pg.n_objs, 1);
    CU_ASSERT(pg.truncated);
    CU_ASSERT_STRING_EQUAL(pg.next_marker, "k0000");
    backend_list_page_free(&pg);
    rq.max_keys = 1000;
    CU_ASSERT_EQUAL(backend_list_objects(g_b, "bkt", &rq, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL(pg.n_objs, 1000);
    CU_ASSERT(pg.truncated);
    CU_ASSERT_STRING_EQUAL(pg.next_marker, "k0999");
    backend_list_page_free(&pg);
    rq.max_keys = 5000;   /* capped at 1000 */
    CU_ASSERT_EQUAL(backend_list_objects(g_b, "bkt", &rq, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL(pg.n_objs, 1000);
    backend_list_page_free(&pg);
    rq.start_after = "k0999";
    CU_ASSERT_EQUAL(backend_list_objects(g_b, "bkt", &rq, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL(pg.n_objs, 5);
    CU_ASSERT(!pg.truncated);
    backend_list_page_free(&pg);
    rq.start_after = "k1004";
    CU_ASSERT_EQUAL(backend_list_objects(g_b, "bkt", &rq, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL(pg.n_objs, 0);
    CU_ASSERT(!pg.truncated);
    backend_list_page_free(&pg);
    CU_ASSERT_EQUAL(backend_list_objects(g_b, "nobkt", &rq, &pg), BACKEND_NO_BUCKET);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Pages through the bucket with start_after = next_marker; checks each key
 * comes exactly once and in strictly increasing order. Returns the count. */
static size_t page_all(const char *prefix, const char *delim, unsigned max, double *secs)
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

static void paging_100k_flat_keys_exactly_once_in_order(void)
{
    char p[512];
    path_of(p, sizeof p, "bkt/flat");
    CU_ASSERT_EQUAL_FATAL(mkdir(p, 0755), 0);
    /* dataset files dropped in directly (no xattr): as fast as the disk */
    size_t n = 100000;
    for (size_t i = 0; i < n; i++) {
        char f[600];
        /* scrambled names, so directory order is not key order */
        snprintf(f, sizeof f, "%s/%07zu-%zx", p, (i * 7919) % n, i);
        int fd = open(f, O_CREAT | O_WRONLY, 0644);
        CU_ASSERT_FATAL(fd >= 0);
        close(fd);
    }
    double secs;
    size_t got = page_all("flat/", NULL, 1000, &secs);
    CU_ASSERT_EQUAL(got, n);
    printf("\n    [100k flat keys: %zu keys in %zu pages of 1000: %.2f s] ", got, n / 1000, secs);
    got = page_all("", "/", 1000, &secs);
    CU_ASSERT_EQUAL(got, 1);   /* one prefix: flat/ */
}

static void paging_deep_tree_exactly_once_in_order(void)
{
    /* 20 x 20 x 25 = 10,000 keys over three levels, plus markers and
     * files at every level */
    size_t n = 0;
    for (int a = 0; a < 20; a++) {
        for (int b = 0; b < 20; b++) {
            char p[512];
            snprintf(p, sizeof p, "%s/bkt/d%02d/e%02d", g_root, a, b);
            char cmd[600];
            snprintf(cmd, sizeof cmd, "%s/bkt/d%02d", g_root, a);
            mkdir(cmd, 0755);
            CU_ASSERT_EQUAL_FATAL(mkdir(p, 0755), 0);
            for (int c = 0; c < 25; c++) {
                char f[600];
                snprintf(f, sizeof f, "%s/f%02d", p, c);
                close(open(f, O_CREAT | O_WRONLY, 0644));
                n++;
            }
        }
        char f[600];
        snprintf(f, sizeof f, "%s/bkt/d%02d.txt", g_root, a);
        close(open(f, O_CREAT | O_WRONLY, 0644));
        snprintf(f, sizeof f, "%s/bkt/d%02d/.sg~e", g_root, a);
        close(open(f, O_CREAT | O_WRONLY, 0644));
        n += 2;
    }
    unsigned sizes[] = { 1, 7, 1000 };
    for (size_t i = 0; i < 3; i++) {
        double secs;
        size_t got = page_all("", NULL, sizes[i], &secs);
        CU_ASSERT_EQUAL(got, n);
        if (sizes[i] == 1000)
            printf("\n    [deep tree: %zu keys in pages of 1000: %.3f s] ", got, secs);
    }
    double secs;
    CU_ASSERT_EQUAL(page_all("", "/", 3, &secs), 40);   /* 20 prefixes + 20 .txt */
    CU_ASSERT_EQUAL(page_all("d03/", "/", 3, &secs), 21);
    CU_ASSERT_EQUAL(page_all("d03/e1", NULL, 10, &secs), 250);
}

/* ---- foreign files ---- */

static void foreign_file_has_stable_pseudo_etag_that_changes_with_file(void)
{
    write_file("bkt/dataset.bin", "raw bytes");
    struct obj_meta m1, m2;
    CU_ASSERT_EQUAL_FATAL(backend_object_head(g_b, "bkt", "dataset.bin", &m1), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(backend_object_head(g_b, "bkt", "dataset.bin", &m2), BACKEND_OK);
    CU_ASSERT_EQUAL(strlen(m1.etag), 34);
    CU_ASSERT_STRING_EQUAL(m1.etag + 32, "-1");
    CU_ASSERT_STRING_EQUAL(m1.etag, m2.etag);
    CU_ASSERT_EQUAL(m1.size, 9);
    CU_ASSERT_EQUAL(m1.n_hdrs, 0);
    obj_meta_clear(&m2);
    char acc[256], buf[32];
    (void)acc;
    CU_ASSERT_EQUAL(get("bkt", "dataset.bin", buf, sizeof buf, NULL), 9);
    struct backend_list_req rq = { .prefix = "", .max_keys = 10 };
    struct backend_list_page pg;
    CU_ASSERT_EQUAL(backend_list_objects(g_b, "bkt", &rq, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(pg.n_objs, 1);
    CU_ASSERT_STRING_EQUAL(pg.objs[0].etag, m1.etag);
    backend_list_page_free(&pg);
    struct timespec ts = { 0, 0 };
    nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
    write_file("bkt/dataset.bin", "raw bytez");
    (void)ts;
    CU_ASSERT_EQUAL_FATAL(backend_object_head(g_b, "bkt", "dataset.bin", &m2), BACKEND_OK);
    CU_ASSERT_STRING_NOT_EQUAL(m1.etag, m2.etag);
    obj_meta_clear(&m1);
    obj_meta_clear(&m2);
    /* a corrupt xattr falls back to the pseudo ETag too */
    char p[512];
    path_of(p, sizeof p, "bkt/dataset.bin");
    CU_ASSERT_EQUAL(setxattr(p, POSIX_META_XATTR, "garbage", 7, 0), 0);
    CU_ASSERT_EQUAL(backend_object_head(g_b, "bkt", "dataset.bin", &m1), BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(m1.etag + 32, "-1");
    obj_meta_clear(&m1);
}

/* ---- buckets ---- */

static void bucket_create_head_list_delete_rules(void)
{
    CU_ASSERT_EQUAL(backend_bucket_create(g_b, "bkt"), BACKEND_BUCKET_EXISTS);
    CU_ASSERT_EQUAL(backend_bucket_create(g_b, "Bad_Name"), BACKEND_BAD_BUCKET_NAME);
    CU_ASSERT_EQUAL(backend_bucket_create(g_b, "zeta"), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_bucket_create(g_b, "alpha"), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_bucket_head(g_b, "alpha"), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_bucket_head(g_b, "nonesuch"), BACKEND_NO_BUCKET);
    write_file("not_a_bucket", "file at root");
    char d[512];
    path_of(d, sizeof d, "UPPER");
    mkdir(d, 0755);
    char acc[256] = "";
    CU_ASSERT_EQUAL(backend_bucket_list(g_b, collect_bucket, acc), BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(acc, "alpha,bkt,zeta,");
    /* objects block deletion */
    CU_ASSERT_EQUAL(put("x/y", "v"), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_bucket_delete(g_b, "bkt"), BACKEND_BUCKET_NOT_EMPTY);
    CU_ASSERT_EQUAL(backend_object_delete(g_b, "bkt", "x/y"), BACKEND_OK);
    /* an upload blocks deletion */
    char id[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "big", NULL, id), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_bucket_delete(g_b, "bkt"), BACKEND_BUCKET_NOT_EMPTY);
    CU_ASSERT_EQUAL(backend_mpu_abort(g_b, "bkt", "big", id), BACKEND_OK);
    /* leftover temp files and empty dirs do not count */
    path_of(d, sizeof d, "bkt/a");
    mkdir(d, 0755);
    path_of(d, sizeof d, "bkt/a/b");
    mkdir(d, 0755);
    write_file("bkt/a/b/.sg~tmp.crash", "partial");
    CU_ASSERT_EQUAL(backend_bucket_delete(g_b, "bkt"), BACKEND_OK);
    CU_ASSERT(!exists("bkt"));
    CU_ASSERT_EQUAL(backend_bucket_head(g_b, "bkt"), BACKEND_NO_BUCKET);
    CU_ASSERT_EQUAL(backend_bucket_delete(g_b, "bkt"), BACKEND_NO_BUCKET);
    /* foreign file keeps a bucket */
    write_file("zeta/data", "d");
    CU_ASSERT_EQUAL(backend_bucket_delete(g_b, "zeta"), BACKEND_BUCKET_NOT_EMPTY);
    CU_ASSERT_EQUAL(backend_bucket_create(g_b, "bkt"), BACKEND_OK);
}

/* ---- multipart ---- */

static enum backend_status upload_part(const char *key, const char *id, unsigned no,
                                       const unsigned char *data, size_t len, char etag[72])
{
    struct backend_put *p;
    enum backend_status s = backend_mpu_part_begin(g_b, "bkt", key, id, no, &p);
    if (s != BACKEND_OK)
        return s;
    s = backend_put_write(p, data, len);
    struct obj_meta m = { 0 };
    md5_hex(data, len, m.etag);
    struct obj_meta out;
    s = backend_put_commit(p, &m, &out);
    if (s == BACKEND_OK) {
        CU_ASSERT_STRING_EQUAL(out.etag, m.etag);
        CU_ASSERT_EQUAL(out.size, len);
    }
    obj_meta_clear(&out);
    if (etag)
        memcpy(etag, m.etag, 33);
    return s;
}

#define MIB (1024u * 1024u)

static void multipart_happy_path_has_md5_of_md5s_etag(void)
{
    size_t sz[3] = { 5 * MIB, 5 * MIB, 1 };
    unsigned char *data = malloc(10 * MIB + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    for (size_t i = 0; i < 10 * MIB + 1; i++)
        data[i] = (unsigned char)(i * 31 + (i >> 13));
    struct obj_meta hm = { 0 };
    obj_meta_add_hdr(&hm, "content-type", "application/x-tar");
    char id[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "shards/s-000.tar", &hm, id),
                          BACKEND_OK);
    obj_meta_clear(&hm);
    CU_ASSERT(strlen(id) >= 32);
    CU_ASSERT_EQUAL(strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                               "0123456789-_"), strlen(id));
    struct backend_part parts[3] = { { 0 } };   /* no checksums */
    size_t off = 0;
    /* upload out of order, and part 2 twice (the second replaces it) */
    unsigned order[4] = { 3, 2, 1, 2 };
    size_t offs[3] = { 0, 5 * MIB, 10 * MIB };
    (void)off;
    for (int i = 0; i < 4; i++) {
        unsigned no = order[i];
        parts[no - 1].part_no = no;
        CU_ASSERT_EQUAL(upload_part("shards/s-000.tar", id, no, data + offs[no - 1],
                                    sz[no - 1], parts[no - 1].etag), BACKEND_OK);
    }
    /* an extra part not listed in complete is discarded */
    CU_ASSERT_EQUAL(upload_part("shards/s-000.tar", id, 9, data, 10, NULL), BACKEND_OK);
    /* independent expected ETag */
    unsigned char cat[48];
    for (int i = 0; i < 3; i++) {
        unsigned int ml;
        EVP_Digest(data + offs[i], sz[i], cat + 16 * i, &ml, EVP_md5(), NULL);
    }
    char want[72], hex[33];
    md5_hex(cat, sizeof cat, hex);
    snprintf(want, sizeof want, "%s-3", hex);
    /* the gateway may pass upper-case ETags */
    for (char *c = parts[0].etag; *c; c++)
        if (*c >= 'a' && *c <= 'f')
            *c = (char)(*c - 'a' + 'A');
    struct obj_meta out;
    CU_ASSERT_EQUAL_FATAL(backend_mpu_complete(g_b, "bkt", "shards/s-000.tar", id, parts, 3,
                                               &out), BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(out.etag, want);
    CU_ASSERT_EQUAL(out.size, 10 * MIB + 1);
    obj_meta_clear(&out);
    struct obj_meta m;
    struct backend_obj *o;
    CU_ASSERT_EQUAL_FATAL(backend_object_open(g_b, "bkt", "shards/s-000.tar", &m, &o),
                          BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(m.etag, want);
    CU_ASSERT_EQUAL(m.size, 10 * MIB + 1);
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&m, "content-type"), "application/x-tar");
    unsigned char *back = malloc(10 * MIB + 1);
    size_t tot = 0, got;
    while (tot < 10 * MIB + 1 &&
           backend_obj_read(o, tot, back + tot, 10 * MIB + 1 - tot, &got) == BACKEND_OK &&
           got > 0)
        tot += got;
    CU_ASSERT_EQUAL(tot, 10 * MIB + 1);
    CU_ASSERT(memcmp(back, data, 10 * MIB + 1) == 0);
    free(back);
    backend_obj_close(o);
    obj_meta_clear(&m);
    /* the upload is gone */
    CU_ASSERT_EQUAL(backend_mpu_abort(g_b, "bkt", "shards/s-000.tar", id), BACKEND_NO_UPLOAD);
    struct backend_uploads_page up;
    struct backend_uploads_req all = { .max_uploads = 100 };
    CU_ASSERT_EQUAL(backend_mpu_list_uploads(g_b, "bkt", &all, &up), BACKEND_OK);
    CU_ASSERT_EQUAL(up.n_uploads, 0);
    backend_uploads_page_free(&up);
    CU_ASSERT_EQUAL(count_tmp_files(""), 0);
    free(data);
}

/* A part with an additional checksum, as the gateway commits it. */
static enum backend_status upload_part_ck(const char *key, const char *id, unsigned no,
                                          const char *data, const char *ck_name,
                                          const char *ck, char etag[72])
{
    struct backend_put *p;
    enum backend_status s = backend_mpu_part_begin(g_b, "bkt", key, id, no, &p);
    if (s != BACKEND_OK)
        return s;
    size_t len = strlen(data);
    backend_put_write(p, data, len);
    struct obj_meta m = { 0 };
    md5_hex((const unsigned char *)data, len, m.etag);
    obj_meta_add_hdr(&m, ck_name, ck);
    s = backend_put_commit(p, &m, NULL);
    memcpy(etag, m.etag, 33);
    obj_meta_clear(&m);
    return s;
}

static void multipart_part_checksums_are_kept_listed_and_checked(void)
{
    struct obj_meta hm = { 0 };
    obj_meta_add_hdr(&hm, "content-type", "text/plain");
    obj_meta_add_hdr(&hm, "x-amz-checksum-algorithm", "CRC32");
    obj_meta_add_hdr(&hm, "x-amz-checksum-type", "COMPOSITE");
    char id[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "ck", &hm, id), BACKEND_OK);
    obj_meta_clear(&hm);
    /* the upload's settings come back from mpu_head */
    struct obj_meta um;
    CU_ASSERT_EQUAL_FATAL(backend_mpu_head(g_b, "bkt", "ck", id, &um), BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&um, "x-amz-checksum-algorithm"), "CRC32");
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&um, "x-amz-checksum-type"), "COMPOSITE");
    obj_meta_clear(&um);
    CU_ASSERT_EQUAL(backend_mpu_head(g_b, "bkt", "other", id, &um), BACKEND_NO_UPLOAD);
    obj_meta_clear(&um);
    CU_ASSERT_EQUAL(backend_mpu_head(g_b, "bkt", "ck", "bogus", &um), BACKEND_NO_UPLOAD);
    obj_meta_clear(&um);

    /* one part: crc32("hello") = 0x3610a686 */
    struct backend_part part = { .part_no = 1 };
    CU_ASSERT_EQUAL_FATAL(upload_part_ck("ck", id, 1, "hello", "x-amz-checksum-crc32",
                                         "NhCmhg==", part.etag), BACKEND_OK);
    struct backend_parts_page pg;
    CU_ASSERT_EQUAL_FATAL(backend_mpu_list_parts(g_b, "bkt", "ck", id, 0, 10, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(pg.n_parts, 1);
    CU_ASSERT_STRING_EQUAL(pg.parts[0].checksum_name, "x-amz-checksum-crc32");
    CU_ASSERT_STRING_EQUAL(pg.parts[0].checksum, "NhCmhg==");
    backend_parts_page_free(&pg);

    /* a checksum given in Complete must be the stored one */
    struct obj_meta out;
    static const struct {
        const char *name, *value;
    } wrong[] = {
        { "x-amz-checksum-crc32", "AAAAAA==" },
        { "x-amz-checksum-sha1", "NhCmhg==" },
    };
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        struct backend_part bad = part;
        snprintf(bad.checksum_name, sizeof bad.checksum_name, "%s", wrong[i].name);
        snprintf(bad.checksum, sizeof bad.checksum, "%s", wrong[i].value);
        CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "ck", id, &bad, 1, &out),
                        BACKEND_INVALID_PART);
        obj_meta_clear(&out);
    }

    /* the given meta replaces the upload's headers on the object */
    struct obj_meta fin = { 0 };
    obj_meta_add_hdr(&fin, "content-type", "text/plain");
    obj_meta_add_hdr(&fin, "x-amz-checksum-crc32", "composite-1");
    obj_meta_add_hdr(&fin, "x-amz-checksum-type", "COMPOSITE");
    struct backend_part good = part;
    strcpy(good.checksum_name, "x-amz-checksum-crc32");
    strcpy(good.checksum, "NhCmhg==");
    CU_ASSERT_EQUAL_FATAL(
        backend_mpu_complete_cond(g_b, "bkt", "ck", id, &good, 1, &fin, NULL, &out), BACKEND_OK);
    obj_meta_clear(&out);
    obj_meta_clear(&fin);
    struct obj_meta m;
    CU_ASSERT_EQUAL_FATAL(backend_object_head(g_b, "bkt", "ck", &m), BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&m, "x-amz-checksum-crc32"), "composite-1");
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&m, "content-type"), "text/plain");
    CU_ASSERT_PTR_NULL(obj_meta_get_hdr(&m, "x-amz-checksum-algorithm"));
    CU_ASSERT_EQUAL(m.size, 5);
    obj_meta_clear(&m);
    backend_object_delete(g_b, "bkt", "ck");
}

static void multipart_complete_errors(void)
{
    unsigned char *big = calloc(1, 5 * MIB);
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    char id[BACKEND_UPLOAD_ID_MAX], other[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "obj", NULL, id), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "obj2", NULL, other), BACKEND_OK);
    struct backend_part p[3] = { { .part_no = 1 }, { .part_no = 2 }, { .part_no = 3 } };
    CU_ASSERT_EQUAL(upload_part("obj", id, 1, big, 5 * MIB, p[0].etag), BACKEND_OK);
    CU_ASSERT_EQUAL(upload_part("obj", id, 2, (const unsigned char *)"small", 5, p[1].etag),
                    BACKEND_OK);
    CU_ASSERT_EQUAL(upload_part("obj", id, 3, (const unsigned char *)"tail", 4, p[2].etag),
                    BACKEND_OK);
    struct obj_meta out;
    /* wrong owner / unknown id */
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "obj2", id, p, 3, &out),
                    BACKEND_NO_UPLOAD);
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "obj", other, p, 3, &out),
                    BACKEND_NO_UPLOAD);
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "obj", "../../../etc", p, 3, &out),
                    BACKEND_NO_UPLOAD);
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "nobkt", "obj", id, p, 3, &out),
                    BACKEND_NO_BUCKET);
    struct backend_put *bp;
    CU_ASSERT_EQUAL(backend_mpu_part_begin(g_b, "bkt", "obj2", id, 1, &bp), BACKEND_NO_UPLOAD);
    /* order */
    struct backend_part rev[2] = { p[1], p[0] };
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "obj", id, rev, 2, &out),
                    BACKEND_INVALID_PART_ORDER);
    struct backend_part dup[2] = { p[0], p[0] };
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "obj", id, dup, 2, &out),
                    BACKEND_INVALID_PART_ORDER);
    /* missing part, wrong etag */
    struct backend_part miss[2] = { p[0], { .part_no = 7 } };
    memcpy(miss[1].etag, p[2].etag, sizeof miss[1].etag);
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "obj", id, miss, 2, &out),
                    BACKEND_INVALID_PART);
    struct backend_part bad[1] = { p[0] };
    bad[0].etag[0] = bad[0].etag[0] == '0' ? '1' : '0';
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "obj", id, bad, 1, &out),
                    BACKEND_INVALID_PART);
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "obj", id, p, 0, &out),
                    BACKEND_INVALID_PART);
    /* too small: part 2 (5 bytes) is not last */
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "obj", id, p, 3, &out),
                    BACKEND_ENTITY_TOO_SMALL);
    /* bad part numbers */
    CU_ASSERT_EQUAL(backend_mpu_part_begin(g_b, "bkt", "obj", id, 0, &bp), BACKEND_INVALID_PART);
    CU_ASSERT_EQUAL(backend_mpu_part_begin(g_b, "bkt", "obj", id, 10001, &bp),
                    BACKEND_INVALID_PART);
    /* nothing became visible; the upload is still usable */
    struct obj_meta m;
    CU_ASSERT_EQUAL(backend_object_head(g_b, "bkt", "obj", &m), BACKEND_NO_KEY);
    obj_meta_clear(&m);
    struct backend_part ok[2] = { p[0], p[2] };
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "obj", id, ok, 2, &out), BACKEND_OK);
    CU_ASSERT_EQUAL(out.size, 5 * MIB + 4);
    CU_ASSERT_STRING_EQUAL(out.etag + 32, "-2");
    obj_meta_clear(&out);
    CU_ASSERT_EQUAL(backend_mpu_abort(g_b, "bkt", "obj2", other), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_mpu_abort(g_b, "bkt", "obj2", other), BACKEND_NO_UPLOAD);
    CU_ASSERT_EQUAL(count_tmp_files(""), 0);
    free(big);
}

static void multipart_part_copy_with_range(void)
{
    CU_ASSERT_EQUAL_FATAL(put("src", "0123456789"), BACKEND_OK);
    char id[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "dst", NULL, id), BACKEND_OK);
    struct obj_meta out;
    struct backend_copy_src src = { "bkt", "src", true, 2, 5 };
    CU_ASSERT_EQUAL(backend_mpu_part_copy(g_b, "bkt", "dst", id, 1, &src, &out), BACKEND_OK);
    char hex[33];
    md5_hex("2345", 4, hex);
    CU_ASSERT_STRING_EQUAL(out.etag, hex);
    CU_ASSERT_EQUAL(out.size, 4);
    struct backend_part p = { .part_no = 1 };
    memcpy(p.etag, out.etag, sizeof p.etag);
    obj_meta_clear(&out);
    src = (struct backend_copy_src){ "bkt", "src", true, 5, 10 };   /* past the end */
    CU_ASSERT_EQUAL(backend_mpu_part_copy(g_b, "bkt", "dst", id, 2, &src, &out),
                    BACKEND_BAD_RANGE);
    src = (struct backend_copy_src){ "bkt", "src", true, 6, 5 };    /* first > last */
    CU_ASSERT_EQUAL(backend_mpu_part_copy(g_b, "bkt", "dst", id, 2, &src, &out),
                    BACKEND_BAD_RANGE);
    src = (struct backend_copy_src){ "bkt", "none", false, 0, 0 };
    CU_ASSERT_EQUAL(backend_mpu_part_copy(g_b, "bkt", "dst", id, 2, &src, &out),
                    BACKEND_NO_KEY);
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "dst", id, &p, 1, &out), BACKEND_OK);
    obj_meta_clear(&out);
    char buf[32];
    CU_ASSERT_EQUAL(get("bkt", "dst", buf, sizeof buf, NULL), 4);
    CU_ASSERT_STRING_EQUAL(buf, "2345");
}

static void list_parts_pages_ascending(void)
{
    char id[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "k", NULL, id), BACKEND_OK);
    unsigned nos[] = { 10, 2, 7, 1, 10000, 3 };
    for (size_t i = 0; i < 6; i++)
        CU_ASSERT_EQUAL(upload_part("k", id, nos[i], (const unsigned char *)"abc", 3, NULL),
                        BACKEND_OK);
    unsigned want[] = { 1, 2, 3, 7, 10, 10000 };
    unsigned marker = 0;
    size_t seen = 0;
    for (int page = 0; page < 10; page++) {
        struct backend_parts_page pg;
        CU_ASSERT_EQUAL_FATAL(backend_mpu_list_parts(g_b, "bkt", "k", id, marker, 4, &pg),
                              BACKEND_OK);
        for (size_t i = 0; i < pg.n_parts; i++) {
            CU_ASSERT_EQUAL(pg.parts[i].part_no, want[seen]);
            CU_ASSERT_EQUAL(pg.parts[i].size, 3);
            seen++;
        }
        bool tr = pg.truncated;
        marker = pg.next_marker;
        CU_ASSERT_EQUAL(tr, page == 0);
        backend_parts_page_free(&pg);
        if (!tr)
            break;
    }
    CU_ASSERT_EQUAL(seen, 6);
    struct backend_parts_page pg;
    CU_ASSERT_EQUAL(backend_mpu_list_parts(g_b, "bkt", "other", id, 0, 4, &pg),
                    BACKEND_NO_UPLOAD);
}

static void list_uploads_pages_by_key_then_time(void)
{
    const char *keys[] = { "b", "a", "b", "dir/x", "dir/y", "c" };
    char ids[6][BACKEND_UPLOAD_ID_MAX];
    for (int i = 0; i < 6; i++) {
        CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", keys[i], NULL, ids[i]),
                              BACKEND_OK);
        nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
    }
    /* expected order: a, b(0), b(2), c, dir/x, dir/y */
    const char *wk[] = { "a", "b", "b", "c", "dir/x", "dir/y" };
    const char *wid[] = { ids[1], ids[0], ids[2], ids[5], ids[3], ids[4] };
    char km[256] = "", im[BACKEND_UPLOAD_ID_MAX] = "";
    size_t seen = 0;
    for (int page = 0; page < 10; page++) {
        struct backend_uploads_page pg;
        struct backend_uploads_req q = { .prefix = "", .key_marker = km[0] ? km : NULL,
                                         .upload_id_marker = im[0] ? im : NULL,
                                         .max_uploads = 2 };
        CU_ASSERT_EQUAL_FATAL(backend_mpu_list_uploads(g_b, "bkt", &q, &pg), BACKEND_OK);
        for (size_t i = 0; i < pg.n_uploads && seen < 6; i++, seen++) {
            CU_ASSERT_STRING_EQUAL(pg.uploads[i].key, wk[seen]);
            CU_ASSERT_STRING_EQUAL(pg.uploads[i].upload_id, wid[seen]);
        }
        bool tr = pg.truncated;
        if (tr) {
            snprintf(km, sizeof km, "%s", pg.next_key_marker);
            snprintf(im, sizeof im, "%s", pg.next_upload_id_marker);
        }
        backend_uploads_page_free(&pg);
        if (!tr)
            break;
    }
    CU_ASSERT_EQUAL(seen, 6);
    struct backend_uploads_page pg;
    struct backend_uploads_req q = { .prefix = "", .delimiter = "/", .max_uploads = 100 };
    CU_ASSERT_EQUAL(backend_mpu_list_uploads(g_b, "bkt", &q, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL(pg.n_uploads, 4);
    CU_ASSERT_EQUAL_FATAL(pg.n_prefixes, 1);
    CU_ASSERT_STRING_EQUAL(pg.prefixes[0], "dir/");
    backend_uploads_page_free(&pg);
    /* key marker alone: strictly after that key */
    q = (struct backend_uploads_req){ .prefix = "", .key_marker = "b", .max_uploads = 100 };
    CU_ASSERT_EQUAL(backend_mpu_list_uploads(g_b, "bkt", &q, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(pg.n_uploads, 3);
    CU_ASSERT_STRING_EQUAL(pg.uploads[0].key, "c");
    backend_uploads_page_free(&pg);
    q = (struct backend_uploads_req){ .prefix = "dir/", .max_uploads = 100 };
    CU_ASSERT_EQUAL(backend_mpu_list_uploads(g_b, "bkt", &q, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL(pg.n_uploads, 2);
    backend_uploads_page_free(&pg);
}

/* ---- threads ---- */

static void *hammer(void *arg)
{
    long id = (long)arg;
    char key[64], buf[64];
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "t%ld/d%d/obj", id, i % 5);
        CU_ASSERT_EQUAL(put(key, "data"), BACKEND_OK);
        CU_ASSERT_EQUAL(put("shared/key", key), BACKEND_OK);
        long n = get("bkt", "shared/key", buf, sizeof buf, NULL);
        CU_ASSERT(n > 0 && strncmp(buf, "t", 1) == 0);   /* never torn */
        if (i % 2)
            CU_ASSERT_EQUAL(backend_object_delete(g_b, "bkt", key), BACKEND_OK);
        struct backend_list_req rq = { .prefix = "", .max_keys = 7 };
        struct backend_list_page pg;
        CU_ASSERT_EQUAL(backend_list_objects(g_b, "bkt", &rq, &pg), BACKEND_OK);
        backend_list_page_free(&pg);
    }
    return NULL;
}

/* One thread writes and deletes "r", another "r/x", a third reads "r":
 * the name "r" turns from file to directory and back under them. No call
 * fails for it, and what is read is always a whole version of "r". */
static atomic_int nest_bad;

static void *nest_writer(void *arg)
{
    const char *key = arg;
    for (int i = 0; i < 300; i++) {
        enum backend_status s = put(key, key);
        if (s != BACKEND_OK) {
            fprintf(stderr, "\nput %s: %s\n", key, backend_status_name(s));
            atomic_fetch_add(&nest_bad, 1);
        }
        s = backend_object_delete(g_b, "bkt", key);
        if (s != BACKEND_OK && s != BACKEND_NO_KEY) {
            fprintf(stderr, "\ndelete %s: %s\n", key, backend_status_name(s));
            atomic_fetch_add(&nest_bad, 1);
        }
    }
    return NULL;
}

static void *nest_reader(void *arg)
{
    (void)arg;
    for (int i = 0; i < 600; i++) {
        char buf[8];
        struct backend_obj *o;
        struct obj_meta m;
        enum backend_status s = backend_object_open(g_b, "bkt", "r", &m, &o);
        if (s == BACKEND_OK) {
            size_t got = 0;
            enum backend_status rs = backend_obj_read(o, 0, buf, sizeof buf, &got);
            if (rs != BACKEND_OK || got != 1 || buf[0] != 'r') {
                fprintf(stderr, "\nread r: %s, %zu bytes: %.*s\n", backend_status_name(rs), got,
                        (int)got, buf);
                atomic_fetch_add(&nest_bad, 1);
            }
            backend_obj_close(o);
            obj_meta_clear(&m);
        } else if (s != BACKEND_NO_KEY) {
            fprintf(stderr, "\nopen r: %s\n", backend_status_name(s));
            atomic_fetch_add(&nest_bad, 1);
        }
    }
    return NULL;
}

static void a_key_and_keys_below_it_written_at_once(void)
{
    pthread_t th[3];
    atomic_store(&nest_bad, 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th[0], NULL, nest_writer, "r"), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th[1], NULL, nest_writer, "r/x"), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th[2], NULL, nest_reader, NULL), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    CU_ASSERT_EQUAL(atomic_load(&nest_bad), 0);
    CU_ASSERT_FALSE(exists("bkt/r"));   /* everything deleted, every directory pruned */
    CU_ASSERT_EQUAL(count_tmp_files("bkt"), 0);
    CU_ASSERT_EQUAL(put("r", "r"), BACKEND_OK);
    CU_ASSERT_EQUAL(put("r/x", "r/x"), BACKEND_OK);
    expect("r", "r");
    expect("r/x", "r/x");
}

static void concurrent_puts_deletes_and_lists_on_one_handle(void)
{
    pthread_t th[4];
    for (long i = 0; i < 4; i++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, hammer, (void *)i), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    CU_ASSERT_EQUAL(count_tmp_files(""), 0);
    double secs;
    size_t n = page_all("", NULL, 3, &secs);
    CU_ASSERT_EQUAL(n, 4 * 2 + 1);   /* last writes: i=96 (d1), 98 (d3) kept */
}

/* ListBuckets reads ROOT, and ROOT's descriptor is shared by every thread:
 * each listing needs a directory stream of its own, else one listing's
 * rewind or reads move another's position and it misses buckets. */
enum { LIST_BUCKETS = 24, LIST_ROUNDS = 400 };
static atomic_int g_short_lists;

static int count_bucket(void *arg, const char *name, time_t created)
{
    (void)name;
    (void)created;
    (*(int *)arg)++;
    return 0;
}

static void *list_buckets_loop(void *arg)
{
    (void)arg;
    for (int i = 0; i < LIST_ROUNDS; i++) {
        int n = 0;
        if (backend_bucket_list(g_b, count_bucket, &n) != BACKEND_OK || n != LIST_BUCKETS + 1)
            atomic_fetch_add(&g_short_lists, 1);
    }
    return NULL;
}

static void concurrent_bucket_lists_each_see_every_bucket(void)
{
    char name[16];
    for (int i = 0; i < LIST_BUCKETS; i++) {
        snprintf(name, sizeof name, "list%02d", i);
        CU_ASSERT_EQUAL_FATAL(backend_bucket_create(g_b, name), BACKEND_OK);
    }
    atomic_store(&g_short_lists, 0);
    pthread_t th[4];
    for (long i = 0; i < 4; i++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, list_buckets_loop, NULL), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    CU_ASSERT_EQUAL(atomic_load(&g_short_lists), 0);
}

int register_tests(void)
{
    CU_pSuite pure = CU_add_suite("backend_posix_pure", NULL, NULL);
    CU_pSuite s = CU_add_suite_with_setup_and_teardown("backend_posix", NULL, NULL,
                                                       (CU_SetUpFunc)setup, teardown);
    if (!pure || !s)
        return -1;
    CU_add_test(pure, "key_mapping_table", key_mapping_table);
    CU_add_test(pure, "meta_encoding_round_trips_and_rejects_garbage",
                meta_encoding_round_trips_and_rejects_garbage);
#define T(fn) CU_add_test(s, #fn, fn)
    T(symlink_inside_bucket_pointing_outside_is_denied);
    T(dotdot_and_reserved_keys_are_rejected);
    T(bucket_dir_that_is_a_symlink_is_denied_and_not_listed);
    T(put_commit_then_read_back_with_headers);
    T(abort_leaves_nothing_visible);
    T(overwrite_replaces_data_and_meta);
    T(keys_that_are_also_prefixes_coexist);
    T(conditions_see_a_nested_object);
    T(a_key_and_keys_below_it_written_at_once);
    T(delete_removes_empty_parents);
    T(copy_keeps_or_replaces_headers_and_allows_same_key);
    T(listing_order_with_tricky_names);
    T(delimiter_gives_common_prefixes);
    T(start_after_inside_rolled_up_prefix_skips_it);
    T(max_keys_0_1_and_1000);
    T(paging_100k_flat_keys_exactly_once_in_order);
    T(paging_deep_tree_exactly_once_in_order);
    T(foreign_file_has_stable_pseudo_etag_that_changes_with_file);
    T(bucket_create_head_list_delete_rules);
    T(multipart_happy_path_has_md5_of_md5s_etag);
    T(multipart_part_checksums_are_kept_listed_and_checked);
    T(multipart_complete_errors);
    T(multipart_part_copy_with_range);
    T(list_parts_pages_ascending);
    T(list_uploads_pages_by_key_then_time);
    T(concurrent_puts_deletes_and_lists_on_one_handle);
    T(concurrent_bucket_lists_each_see_every_bucket);
#undef T
    return CU_get_error() == CUE_SUCCESS ? 0 : -1;
}
