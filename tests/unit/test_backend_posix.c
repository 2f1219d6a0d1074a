/* tests/unit/test_backend_posix.c - the posix store against backend.h: key
 * mapping, escapes through symlinks, atomic writes, keys that are also
 * prefixes, copy, delete, foreign files, bucket rules and threads. Listings
 * are in test_backend_posix_list.c, multipart uploads in
 * test_backend_posix_mpu.c. Each test gets a fresh store (posix_fixture.h). */
#include "posix_fixture.h"

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
    T(foreign_file_has_stable_pseudo_etag_that_changes_with_file);
    T(bucket_create_head_list_delete_rules);
    T(concurrent_puts_deletes_and_lists_on_one_handle);
    T(concurrent_bucket_lists_each_see_every_bucket);
#undef T
    return CU_get_error() == CUE_SUCCESS ? 0 : -1;
}
