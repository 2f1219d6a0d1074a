/* tests/unit/test_backend_posix_list.c - the posix store's listings: S3's
 * order with tricky names, delimiters and common prefixes, StartAfter,
 * max-keys, and paging 100,000 flat keys and a deep tree exactly once in
 * order. Each test gets a fresh store (posix_fixture.h). */
#include "posix_fixture.h"

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

int register_tests(void)
{
    CU_pSuite s = CU_add_suite_with_setup_and_teardown("backend_posix_list", NULL, NULL,
                                                       (CU_SetUpFunc)setup, teardown);
    if (!s)
        return -1;
#define T(fn) CU_add_test(s, #fn, fn)
    T(listing_order_with_tricky_names);
    T(delimiter_gives_common_prefixes);
    T(start_after_inside_rolled_up_prefix_skips_it);
    T(max_keys_0_1_and_1000);
    T(paging_100k_flat_keys_exactly_once_in_order);
    T(paging_deep_tree_exactly_once_in_order);
#undef T
    return CU_get_error() == CUE_SUCCESS ? 0 : -1;
}
