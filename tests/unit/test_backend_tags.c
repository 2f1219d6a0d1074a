/* tests/unit/test_backend_tags.c - tag sets (backend/tags.c): the Tagging
 * XML and x-amz-tagging query forms both ways, S3's rules (counts, lengths
 * in characters, the character set, aws:, duplicates) as tables; the s3
 * tier's header choices; and the posix store's tags (posix_tagging.c): kept
 * in the one metadata xattr beside the ETag and headers, rewritten without
 * touching the data, carried by copies, bucket tags on the directory. */
#include "backend.h"
#include "posix_int.h"
#include "s3_int.h"

#include <CUnit/CUnit.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

int register_tests(void);

/* ---- helpers ---- */

static void tags_of(struct obj_tags *t, const char *const *kv, size_t n)
{
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < n; i++)
        CU_ASSERT_EQUAL_FATAL(obj_tags_add(t, kv[2 * i], kv[2 * i + 1]), OBJ_TAGS_OK);
}

static bool tags_equal(const struct obj_tags *a, const struct obj_tags *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->v[i].key, b->v[i].key) || strcmp(a->v[i].value, b->v[i].value))
            return false;
    return true;
}

static char *repeat(const char *unit, size_t n)
{
    size_t ul = strlen(unit);
    char *s = malloc(ul * n + 1);
    for (size_t i = 0; i < n; i++)
        memcpy(s + i * ul, unit, ul);
    s[ul * n] = '\0';
    return s;
}

/* ---- the codec ---- */

static void xml_round_trip_keeps_order_and_escapes(void)
{
    static const char *const kv[] = { "z", "last<&>", "a b", "", "ключ", "знач:/=+-@_." };
    struct obj_tags t, back;
    tags_of(&t, kv, 3);
    char *xml;
    size_t len;
    CU_ASSERT_EQUAL_FATAL(obj_tags_to_xml(&t, &xml, &len), 0);
    CU_ASSERT_EQUAL(len, strlen(xml));
    CU_ASSERT_PTR_NOT_NULL(strstr(xml, "<Tagging xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                                       "<TagSet><Tag><Key>z</Key><Value>last&lt;&amp;&gt;"));
    CU_ASSERT_EQUAL(obj_tags_from_xml(xml, len, &back), OBJ_TAGS_OK);
    CU_ASSERT(tags_equal(&t, &back));
    free(xml);
    obj_tags_clear(&back);
    obj_tags_clear(&t);
    /* no tags: an empty TagSet both ways */
    CU_ASSERT_EQUAL_FATAL(obj_tags_to_xml(&t, &xml, &len), 0);
    CU_ASSERT_EQUAL(obj_tags_from_xml(xml, len, &back), OBJ_TAGS_OK);
    CU_ASSERT_EQUAL(back.n, 0);
    free(xml);
}

static void xml_documents_table(void)
{
    static const struct {
        const char *xml;
        enum obj_tags_status st;
        size_t n;
    } cases[] = {
        { "<Tagging><TagSet><Tag><Key>k</Key><Value>v</Value></Tag></TagSet></Tagging>",
          OBJ_TAGS_OK, 1 },
        { "<?xml version=\"1.0\"?><Tagging xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
          "<TagSet><Tag><Value>2</Value><Key>b</Key></Tag><Tag><Key>a</Key><Value/></Tag>"
          "</TagSet></Tagging>", OBJ_TAGS_OK, 2 },
        { "<Tagging><TagSet/></Tagging>", OBJ_TAGS_OK, 0 },
        { "", OBJ_TAGS_MALFORMED, 0 },
        { "not xml", OBJ_TAGS_MALFORMED, 0 },
        { "<Tagging><TagSet><Tag><Key>k</Key>", OBJ_TAGS_MALFORMED, 0 },     /* cut short */
        { "<Tagging/>", OBJ_TAGS_MALFORMED, 0 },                              /* no TagSet */
        { "<Other><TagSet/></Other>", OBJ_TAGS_MALFORMED, 0 },
        { "<Tagging><TagSet><Tag><Key>k</Key></Tag></TagSet></Tagging>", OBJ_TAGS_MALFORMED, 0 },
        { "<Tagging><TagSet><Tag><Value>v</Value></Tag></TagSet></Tagging>",
          OBJ_TAGS_MALFORMED, 0 },
        { "<Tagging><TagSet><Foo/></TagSet></Tagging>", OBJ_TAGS_MALFORMED, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct obj_tags t;
        enum obj_tags_status st = obj_tags_from_xml(cases[i].xml, strlen(cases[i].xml), &t);
        if (st != cases[i].st || t.n != cases[i].n)
            fprintf(stderr, "\ncase %zu: status %d n %zu\n", i, st, t.n);
        CU_ASSERT_EQUAL(st, cases[i].st);
        CU_ASSERT_EQUAL(t.n, cases[i].n);
        obj_tags_clear(&t);
    }
}

static void query_form_table(void)
{
    static const struct {
        const char *q;
        enum obj_tags_status st;
        const char *kv[6];
        size_t n;
    } cases[] = {
        { "a=1&b=x%20y", OBJ_TAGS_OK, { "a", "1", "b", "x y" }, 2 },
        { "a", OBJ_TAGS_OK, { "a", "" }, 1 },                  /* no '=': empty value */
        { "a=", OBJ_TAGS_OK, { "a", "" }, 1 },
        { "&&a=1&", OBJ_TAGS_OK, { "a", "1" }, 1 },             /* empty parts skipped */
        { "a+b=c+d%2B", OBJ_TAGS_OK, { "a b", "c d+" }, 1 },    /* '+' is a space */
        { "k=v%3D1%262", OBJ_TAGS_OK, { "k", "v=1&2" }, 1 },
        { "%D0%BA=%E2%82%AC", OBJ_TAGS_OK, { "к", "€" }, 1 },
        { "", OBJ_TAGS_OK, { NULL }, 0 },
        { "=v", OBJ_TAGS_MALFORMED, { NULL }, 0 },               /* an empty key */
        { "a=1&=2", OBJ_TAGS_MALFORMED, { NULL }, 0 },
        { "a=%zz", OBJ_TAGS_MALFORMED, { NULL }, 0 },
        { "a=%2", OBJ_TAGS_MALFORMED, { NULL }, 0 },
        { "a%=1", OBJ_TAGS_MALFORMED, { NULL }, 0 },
        { "a=%00", OBJ_TAGS_MALFORMED, { NULL }, 0 },            /* no NUL */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct obj_tags t, want;
        enum obj_tags_status st = obj_tags_from_query(cases[i].q, &t);
        tags_of(&want, cases[i].kv, cases[i].n);
        if (st != cases[i].st || !tags_equal(&t, &want))
            fprintf(stderr, "\ncase %zu (%s): status %d n %zu\n", i, cases[i].q, st, t.n);
        CU_ASSERT_EQUAL(st, cases[i].st);
        CU_ASSERT(tags_equal(&t, &want));
        obj_tags_clear(&t);
        obj_tags_clear(&want);
    }
}

static void query_canonical_form_and_count(void)
{
    static const char *const kv[] = { "a b", "x/y", "k", "v=1&2", "é", "" };
    struct obj_tags t, back;
    tags_of(&t, kv, 3);
    char *q = obj_tags_to_query(&t);
    CU_ASSERT_STRING_EQUAL(q, "a%20b=x%2Fy&k=v%3D1%262&%C3%A9=");
    CU_ASSERT_EQUAL(obj_tags_from_query(q, &back), OBJ_TAGS_OK);
    CU_ASSERT(tags_equal(&t, &back));
    CU_ASSERT_EQUAL(obj_tags_query_count(q), 3);
    free(q);
    obj_tags_clear(&back);
    obj_tags_clear(&t);
    q = obj_tags_to_query(&t);
    CU_ASSERT_STRING_EQUAL(q, "");
    free(q);
    CU_ASSERT_EQUAL(obj_tags_query_count(""), 0);
    CU_ASSERT_EQUAL(obj_tags_query_count("&a&&b=&"), 2);
    CU_ASSERT_EQUAL(obj_tags_query_count(NULL), 0);
}

static void s3_rules_table(void)
{
    char *k128 = repeat("x", 128), *k129 = repeat("x", 129);
    char *v256 = repeat("v", 256), *v257 = repeat("v", 257);
    char *cyr128 = repeat("я", 128), *cyr129 = repeat("я", 129);   /* 2 bytes each */
    const struct {
        const char *key, *value;
        enum obj_tags_status st;
    } cases[] = {
        { "k", "v", OBJ_TAGS_OK },
        { k128, "", OBJ_TAGS_OK },
        { k129, "v", OBJ_TAGS_BAD_KEY },
        { "k", v256, OBJ_TAGS_OK },
        { "k", v257, OBJ_TAGS_BAD_VALUE },
        { cyr128, "v", OBJ_TAGS_OK },         /* characters, not bytes */
        { cyr129, "v", OBJ_TAGS_BAD_KEY },
        { "", "v", OBJ_TAGS_BAD_KEY },
        { "a b_c.d:e/f=g+h-i@j", "a b_c.d:e/f=g+h-i@j", OBJ_TAGS_OK },
        { "Größe", "日本語 ١٢٣", OBJ_TAGS_OK },
        { "a,b", "v", OBJ_TAGS_BAD_KEY },
        { "k", "(x)", OBJ_TAGS_BAD_VALUE },
        { "k", "a\tb", OBJ_TAGS_BAD_VALUE },
        { "k", "50 €", OBJ_TAGS_BAD_VALUE },
        { "k", "\xf0\x9f\x98\x80", OBJ_TAGS_BAD_VALUE },    /* an emoji */
        { "\xff", "v", OBJ_TAGS_BAD_KEY },                   /* not UTF-8 */
        { "\xc0\xae", "v", OBJ_TAGS_BAD_KEY },               /* overlong '.' */
        { "\xed\xa0\x80", "v", OBJ_TAGS_BAD_KEY },           /* a surrogate */
        { "aws:x", "v", OBJ_TAGS_SYSTEM_KEY },
        { "awsx", "v", OBJ_TAGS_OK },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct obj_tags t;
        const char *kv[] = { cases[i].key, cases[i].value };
        tags_of(&t, kv, 1);
        enum obj_tags_status st = obj_tags_check(&t, OBJ_TAGS_MAX_OBJECT, NULL);
        if (st != cases[i].st)
            fprintf(stderr, "\ncase %zu: status %d\n", i, st);
        CU_ASSERT_EQUAL(st, cases[i].st);
        obj_tags_clear(&t);
    }
    free(k128);
    free(k129);
    free(v256);
    free(v257);
    free(cyr128);
    free(cyr129);
}

static void s3_rules_count_first_then_tags_in_order(void)
{
    struct obj_tags t = { 0 };
    char k[16];
    for (int i = 0; i < 10; i++) {
        snprintf(k, sizeof k, "k%d", i);
        obj_tags_add(&t, k, "v");
    }
    size_t at = 99;
    CU_ASSERT_EQUAL(obj_tags_check(&t, OBJ_TAGS_MAX_OBJECT, &at), OBJ_TAGS_OK);
    obj_tags_add(&t, "bad,key", "v");   /* the 11th: the count is checked first */
    CU_ASSERT_EQUAL(obj_tags_check(&t, OBJ_TAGS_MAX_OBJECT, &at), OBJ_TAGS_TOO_MANY);
    CU_ASSERT_EQUAL(obj_tags_check(&t, OBJ_TAGS_MAX_BUCKET, &at), OBJ_TAGS_BAD_KEY);
    CU_ASSERT_EQUAL(at, 10);
    obj_tags_clear(&t);
    static const char *const dup[] = { "a", "1", "b", "2", "a", "3" };
    tags_of(&t, dup, 3);
    CU_ASSERT_EQUAL(obj_tags_check(&t, OBJ_TAGS_MAX_OBJECT, &at), OBJ_TAGS_DUPLICATE);
    CU_ASSERT_EQUAL(at, 2);
    obj_tags_clear(&t);
    for (int i = 0; i < 51; i++) {
        snprintf(k, sizeof k, "k%d", i);
        obj_tags_add(&t, k, "v");
    }
    CU_ASSERT_EQUAL(obj_tags_check(&t, OBJ_TAGS_MAX_BUCKET, NULL), OBJ_TAGS_TOO_MANY);
    obj_tags_clear(&t);
}

static void s3_tier_sends_tags_and_reads_the_count(void)
{
    CU_ASSERT(s3_stored_header(OBJ_TAGGING_HDR));          /* a put sends x-amz-tagging */
    CU_ASSERT(!s3_stored_header(OBJ_TAGGING_COUNT_HDR));   /* ... never the count */
    struct obj_meta resp = { 0 }, m = { 0 };
    obj_meta_add_hdr(&resp, "etag", "\"0123456789abcdef0123456789abcdef\"");
    obj_meta_add_hdr(&resp, "x-amz-tagging-count", "3");
    obj_meta_add_hdr(&resp, "x-amz-request-id", "r");
    CU_ASSERT_EQUAL(s3_meta_from_headers(&resp, &m), 0);
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&m, OBJ_TAGGING_COUNT_HDR), "3");
    CU_ASSERT_PTR_NULL(obj_meta_get_hdr(&m, "x-amz-request-id"));
    struct curl_slist *hl = NULL;
    obj_meta_add_hdr(&m, OBJ_TAGGING_HDR, "a=1");
    CU_ASSERT_EQUAL(s3_add_meta_headers(&hl, &m, false), 0);
    bool tagging = false, count = false;
    for (struct curl_slist *e = hl; e; e = e->next) {
        tagging |= strcmp(e->data, "x-amz-tagging: a=1") == 0;
        count |= strncmp(e->data, "x-amz-tagging-count", 19) == 0;
    }
    CU_ASSERT(tagging);
    CU_ASSERT(!count);
    curl_slist_free_all(hl);
    obj_meta_clear(&resp);
    obj_meta_clear(&m);
    CU_ASSERT_EQUAL(s3_status_from_code("NoSuchTagSet", 404), BACKEND_NO_TAG_SET);
}

/* ---- the posix store ---- */

static char g_tmp[64];
static char g_root[128];
static struct backend *g_b;

static void setup(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sgtag.XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(g_tmp));
    snprintf(g_root, sizeof g_root, "%s/data", g_tmp);
    struct backend_posix_conf cf = { .root = g_root };
    CU_ASSERT_EQUAL_FATAL(backend_posix_open(&cf, &g_b), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(backend_bucket_create(g_b, "bkt"), BACKEND_OK);
}

static void teardown(void)
{
    backend_close(g_b);
    g_b = NULL;
    char cmd[128];   /* g_tmp is ours, from mkdtemp: no quoting needed */
    snprintf(cmd, sizeof cmd, "rm -rf -- %s", g_tmp);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

/* PUTs key with its data, a Content-Type and the tag set q (NULL: none). */
static void put_obj(const char *key, const char *data, const char *q)
{
    struct backend_put *p;
    CU_ASSERT_EQUAL_FATAL(backend_put_begin(g_b, "bkt", key, &p), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(backend_put_write(p, data, strlen(data)), BACKEND_OK);
    struct obj_meta m = { 0 };
    snprintf(m.etag, sizeof m.etag, "0123456789abcdef0123456789abcdef");
    obj_meta_add_hdr(&m, "content-type", "text/plain");
    if (q)
        obj_meta_add_hdr(&m, OBJ_TAGGING_HDR, q);
    CU_ASSERT_EQUAL(backend_put_commit(p, &m, NULL), BACKEND_OK);
    obj_meta_clear(&m);
}

/* The x-amz-tagging value stored with key ("" when none). */
static void stored_tags(const char *key, char *out, size_t cap)
{
    struct obj_meta m;
    CU_ASSERT_EQUAL_FATAL(backend_object_head(g_b, "bkt", key, &m), BACKEND_OK);
    const char *q = obj_meta_get_hdr(&m, OBJ_TAGGING_HDR);
    snprintf(out, cap, "%s", q ? q : "");
    obj_meta_clear(&m);
}

static void object_tags_put_get_delete(void)
{
    put_obj("k", "data", "a=1");
    struct obj_tags t, got;
    CU_ASSERT_EQUAL(backend_tagging_get(g_b, "bkt", "k", &got), BACKEND_OK);
    CU_ASSERT_EQUAL(got.n, 1);
    obj_tags_clear(&got);
    static const char *const kv[] = { "p q", "v/w", "x", "" };
    tags_of(&t, kv, 2);
    CU_ASSERT_EQUAL(backend_tagging_put(g_b, "bkt", "k", &t), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_tagging_get(g_b, "bkt", "k", &got), BACKEND_OK);
    CU_ASSERT(tags_equal(&t, &got));
    obj_tags_clear(&got);
    /* the rest of the metadata and the data are untouched */
    struct obj_meta m;
    CU_ASSERT_EQUAL(backend_object_head(g_b, "bkt", "k", &m), BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(m.etag, "0123456789abcdef0123456789abcdef");
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&m, "content-type"), "text/plain");
    CU_ASSERT_EQUAL(m.size, 4);
    obj_meta_clear(&m);
    CU_ASSERT_EQUAL(backend_tagging_delete(g_b, "bkt", "k"), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_tagging_get(g_b, "bkt", "k", &got), BACKEND_OK);
    CU_ASSERT_EQUAL(got.n, 0);
    CU_ASSERT_EQUAL(backend_tagging_delete(g_b, "bkt", "k"), BACKEND_OK);   /* none: fine */
    CU_ASSERT_EQUAL(backend_tagging_get(g_b, "bkt", "nope", &got), BACKEND_NO_KEY);
    CU_ASSERT_EQUAL(backend_tagging_put(g_b, "bkt", "nope", &t), BACKEND_NO_KEY);
    CU_ASSERT_EQUAL(backend_tagging_delete(g_b, "bkt", "nope"), BACKEND_NO_KEY);
    CU_ASSERT_EQUAL(backend_tagging_get(g_b, "nobkt", "k", &got), BACKEND_NO_BUCKET);
    obj_tags_clear(&t);
}

static void tags_of_a_foreign_file_keep_its_pseudo_etag(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/bkt/foreign", g_root);
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("written by someone else", f);
    fclose(f);
    struct obj_meta before, after;
    CU_ASSERT_EQUAL_FATAL(backend_object_head(g_b, "bkt", "foreign", &before), BACKEND_OK);
    static const char *const kv[] = { "k", "v" };
    struct obj_tags t;
    tags_of(&t, kv, 1);
    CU_ASSERT_EQUAL(backend_tagging_put(g_b, "bkt", "foreign", &t), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(backend_object_head(g_b, "bkt", "foreign", &after), BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(after.etag, before.etag);   /* still derived from the file */
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&after, OBJ_TAGGING_HDR), "k=v");
    obj_meta_clear(&after);
    /* changed by other means: the ETag follows the file, the tags stay */
    f = fopen(path, "a");
    fputs(" and more", f);
    fclose(f);
    CU_ASSERT_EQUAL_FATAL(backend_object_head(g_b, "bkt", "foreign", &after), BACKEND_OK);
    CU_ASSERT_STRING_NOT_EQUAL(after.etag, before.etag);
    obj_meta_clear(&after);
    obj_meta_clear(&before);
    obj_tags_clear(&t);
}

static void copies_take_or_replace_the_tags(void)
{
    char q[256];
    put_obj("src", "source", "a=1&b=2");
    CU_ASSERT_EQUAL(backend_object_copy(g_b, "bkt", "src", "bkt", "c1", NULL, NULL), BACKEND_OK);
    stored_tags("c1", q, sizeof q);
    CU_ASSERT_STRING_EQUAL(q, "a=1&b=2");
    CU_ASSERT_EQUAL(backend_object_copy_tags(g_b, "bkt", "src", "bkt", "c2", NULL, "z=9", NULL),
                    BACKEND_OK);
    stored_tags("c2", q, sizeof q);
    CU_ASSERT_STRING_EQUAL(q, "z=9");
    CU_ASSERT_EQUAL(backend_object_copy_tags(g_b, "bkt", "src", "bkt", "c3", NULL, "", NULL),
                    BACKEND_OK);
    stored_tags("c3", q, sizeof q);
    CU_ASSERT_STRING_EQUAL(q, "");
    /* new headers (REPLACE), the source's tags (COPY) */
    struct obj_meta rep = { 0 }, m;
    obj_meta_add_hdr(&rep, "content-type", "image/png");
    CU_ASSERT_EQUAL(backend_object_copy_tags(g_b, "bkt", "src", "bkt", "src", &rep, NULL, NULL),
                    BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(backend_object_head(g_b, "bkt", "src", &m), BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&m, "content-type"), "image/png");
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&m, OBJ_TAGGING_HDR), "a=1&b=2");
    obj_meta_clear(&m);
    obj_meta_clear(&rep);
}

static void bucket_tags_on_the_directory(void)
{
    struct obj_tags t, got;
    CU_ASSERT_EQUAL(backend_tagging_get(g_b, "bkt", NULL, &got), BACKEND_NO_TAG_SET);
    static const char *const kv[] = { "team", "ml", "cost centre", "42" };
    tags_of(&t, kv, 2);
    CU_ASSERT_EQUAL(backend_tagging_put(g_b, "bkt", NULL, &t), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_tagging_get(g_b, "bkt", NULL, &got), BACKEND_OK);
    CU_ASSERT(tags_equal(&t, &got));
    obj_tags_clear(&got);
    CU_ASSERT_EQUAL(backend_tagging_delete(g_b, "bkt", NULL), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_tagging_get(g_b, "bkt", NULL, &got), BACKEND_NO_TAG_SET);
    CU_ASSERT_EQUAL(backend_tagging_delete(g_b, "bkt", NULL), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_tagging_get(g_b, "nobkt", NULL, &got), BACKEND_NO_BUCKET);
    CU_ASSERT_EQUAL(backend_tagging_put(g_b, "nobkt", NULL, &t), BACKEND_NO_BUCKET);
    /* a bucket deleted and made again has no tags */
    CU_ASSERT_EQUAL(backend_tagging_put(g_b, "bkt", NULL, &t), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_bucket_delete(g_b, "bkt"), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_bucket_create(g_b, "bkt"), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_tagging_get(g_b, "bkt", NULL, &got), BACKEND_NO_TAG_SET);
    obj_tags_clear(&t);
}

/* Ten tags of 128 + 256 characters that each encode to three bytes: about
 * 11 KiB of metadata. ext4 keeps 4 KiB of xattrs per file, XFS and btrfs
 * more: either the set is kept whole, or refused with META_TOO_LARGE and
 * the tags before are intact - never half. */
static void tags_past_the_file_system_limit_are_refused_whole(void)
{
    put_obj("big", "data", "old=1");
    struct obj_tags t = { 0 };
    char *key = repeat(":", 126), *val = repeat("/", 256);
    for (int i = 0; i < 10; i++) {
        char k[160];
        snprintf(k, sizeof k, "%02d%s", i, key);
        obj_tags_add(&t, k, val);
    }
    CU_ASSERT_EQUAL(obj_tags_check(&t, OBJ_TAGS_MAX_OBJECT, NULL), OBJ_TAGS_OK);
    enum backend_status st = backend_tagging_put(g_b, "bkt", "big", &t);
    CU_ASSERT(st == BACKEND_OK || st == BACKEND_META_TOO_LARGE);
    struct obj_tags got;
    CU_ASSERT_EQUAL(backend_tagging_get(g_b, "bkt", "big", &got), BACKEND_OK);
    if (st == BACKEND_OK) {
        CU_ASSERT(tags_equal(&t, &got));
    } else {
        CU_ASSERT_EQUAL(got.n, 1);
        CU_ASSERT_STRING_EQUAL(got.v[0].key, "old");
    }
    obj_tags_clear(&got);
    /* and so does a PUT carrying such a set: the old object stays */
    char *q = obj_tags_to_query(&t);
    struct backend_put *p;
    CU_ASSERT_EQUAL_FATAL(backend_put_begin(g_b, "bkt", "big", &p), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_put_write(p, "new!", 4), BACKEND_OK);
    struct obj_meta m = { 0 };
    obj_meta_add_hdr(&m, OBJ_TAGGING_HDR, q);
    enum backend_status pst = backend_put_commit(p, &m, NULL);
    CU_ASSERT_EQUAL(pst, st);
    struct obj_meta h;
    CU_ASSERT_EQUAL(backend_object_head(g_b, "bkt", "big", &h), BACKEND_OK);
    CU_ASSERT_EQUAL(h.size, 4);   /* "data" or "new!" */
    obj_meta_clear(&h);
    obj_meta_clear(&m);
    free(q);
    free(key);
    free(val);
    obj_tags_clear(&t);
}

static void read_only_store_refuses_tag_writes(void)
{
    put_obj("ro", "data", NULL);
    struct posix_store *ps = (struct posix_store *)g_b;
    ps->read_only = true;
    static const char *const kv[] = { "k", "v" };
    struct obj_tags t, got;
    tags_of(&t, kv, 1);
    CU_ASSERT_EQUAL(backend_tagging_put(g_b, "bkt", "ro", &t), BACKEND_READ_ONLY);
    CU_ASSERT_EQUAL(backend_tagging_delete(g_b, "bkt", "ro"), BACKEND_READ_ONLY);
    CU_ASSERT_EQUAL(backend_tagging_put(g_b, "bkt", NULL, &t), BACKEND_READ_ONLY);
    CU_ASSERT_EQUAL(backend_tagging_get(g_b, "bkt", "ro", &got), BACKEND_OK);   /* reads work */
    obj_tags_clear(&got);
    ps->read_only = false;
    obj_tags_clear(&t);
}

#define TEST(f) { #f, f }
static const struct {
    const char *name;
    CU_TestFunc fn;
} codec_tests[] = {
    TEST(xml_round_trip_keeps_order_and_escapes),
    TEST(xml_documents_table),
    TEST(query_form_table),
    TEST(query_canonical_form_and_count),
    TEST(s3_rules_table),
    TEST(s3_rules_count_first_then_tags_in_order),
    TEST(s3_tier_sends_tags_and_reads_the_count),
}, posix_tests[] = {
    TEST(object_tags_put_get_delete),
    TEST(tags_of_a_foreign_file_keep_its_pseudo_etag),
    TEST(copies_take_or_replace_the_tags),
    TEST(bucket_tags_on_the_directory),
    TEST(tags_past_the_file_system_limit_are_refused_whole),
    TEST(read_only_store_refuses_tag_writes),
};

int register_tests(void)
{
    CU_pSuite pure = CU_add_suite("backend_tags_codec", NULL, NULL);
    CU_pSuite s = CU_add_suite_with_setup_and_teardown("backend_tags_posix", NULL, NULL,
                                                        setup, teardown);
    bool ok = pure && s;
    for (size_t i = 0; ok && i < sizeof codec_tests / sizeof codec_tests[0]; i++)
        ok = CU_add_test(pure, codec_tests[i].name, codec_tests[i].fn) != NULL;
    for (size_t i = 0; ok && i < sizeof posix_tests / sizeof posix_tests[0]; i++)
        ok = CU_add_test(s, posix_tests[i].name, posix_tests[i].fn) != NULL;
    return ok ? 0 : -1;
}
