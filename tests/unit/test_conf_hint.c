/* tests/unit/test_conf_hint.c - conf/hint.c: prefetch hint bodies (each field,
 * each refusal and the fragment its message must carry) and brace template
 * expansion (padding, lists, products, order, limits). Mostly tables. */
#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hint.h"

int register_tests(void);

#define CHECK_CASE(cond, name, ...)                                                   \
    do {                                                                             \
        char chk_msg_[1024];                                                         \
        snprintf(chk_msg_, sizeof chk_msg_, __VA_ARGS__);                            \
        char chk_full_[1400];                                                        \
        snprintf(chk_full_, sizeof chk_full_, "[%.300s] %.1000s", (name), chk_msg_);  \
        CU_assertImplementation((cond) ? CU_TRUE : CU_FALSE, __LINE__, chk_full_,   \
                                __FILE__, "", CU_FALSE);                             \
    } while (0)

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* 64 bytes, for building strings at and over the byte limits */
#define S64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static const struct conf_hint_limits LIM = { 1000000, 16u * 1024u * 1024u };

static int parse_str(const char *body, const struct conf_hint_limits *lim, struct conf_hint *h,
                     char *err, size_t errlen)
{
    return conf_hint_parse(body, strlen(body), lim, h, err, errlen);
}

/* Joins keys with single spaces into buf (for small expected lists). */
static void keys_join(char **keys, size_t n, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && k < len; i++) {
        int w = snprintf(buf + k, len - k, "%s%s", i ? " " : "", keys[i]);
        if (w < 0)
            break;
        k += (size_t)w;
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- good hints ---- */

struct good_case {
    const char *name;
    const char *body;
    size_t n_keys;          /* 0 = prefix form */
    const char *first, *last;
    const char *prefix;
    bool ordered;
    bool has_epoch;
    uint64_t epoch;
    const char *consumer;
    uint64_t window_bytes;
    unsigned window_objects;
    bool pin;
};

static const struct good_case GOOD[] = {
    { "keys_two", "{\"keys\": [\"train/a.tar\", \"train/b.tar\"]}", 2, "train/a.tar",
      "train/b.tar", NULL, false, false, 0, NULL, 0, 0, false },
    { "keys_one", "{\"keys\": [\"x\"]}", 1, "x", "x", NULL, false, false, 0, NULL, 0, 0, false },
    { "keys_unicode", "{\"keys\": [\"d\\u00e9j\\u00e0/\\u2603.tar\"]}", 1,
      "d\xc3\xa9j\xc3\xa0/\xe2\x98\x83.tar", "d\xc3\xa9j\xc3\xa0/\xe2\x98\x83.tar", NULL, false,
      false, 0, NULL, 0, 0, false },
    { "prefix", "{\"prefix\": \"train/\"}", 0, NULL, NULL, "train/", false, false, 0, NULL, 0, 0,
      false },
    { "prefix_empty_is_whole_bucket", "{\"prefix\": \"\"}", 0, NULL, NULL, "", false, false, 0,
      NULL, 0, 0, false },
    { "template", "{\"template\": \"train/shard-{000000..001023}.tar\"}", 1024,
      "train/shard-000000.tar", "train/shard-001023.tar", NULL, false, false, 0, NULL, 0, 0,
      false },
    { "template_no_group", "{\"template\": \"plain.tar\"}", 1, "plain.tar", "plain.tar", NULL,
      false, false, 0, NULL, 0, 0, false },
    { "ordered_true", "{\"keys\": [\"a\"], \"ordered\": true}", 1, "a", "a", NULL, true, false, 0,
      NULL, 0, 0, false },
    { "ordered_false", "{\"keys\": [\"a\"], \"ordered\": false}", 1, "a", "a", NULL, false, false,
      0, NULL, 0, 0, false },
    { "epoch_zero", "{\"keys\": [\"a\"], \"epoch\": 0}", 1, "a", "a", NULL, false, true, 0, NULL,
      0, 0, false },
    { "epoch_3", "{\"keys\": [\"a\"], \"epoch\": 3}", 1, "a", "a", NULL, false, true, 3, NULL, 0,
      0, false },
    { "epoch_max", "{\"keys\": [\"a\"], \"epoch\": 9223372036854775807}", 1, "a", "a", NULL,
      false, true, 9223372036854775807ull, NULL, 0, 0, false },
    { "consumer", "{\"keys\": [\"a\"], \"consumer\": \"rank0\"}", 1, "a", "a", NULL, false, false,
      0, "rank0", 0, 0, false },
    { "consumer_128_bytes", "{\"keys\": [\"a\"], \"consumer\": \"" S64 S64 "\"}", 1, "a", "a",
      NULL, false, false, 0, S64 S64, 0, 0, false },
    { "window_bytes", "{\"keys\": [\"a\"], \"ordered\": true, \"window_bytes\": 1073741824}", 1,
      "a", "a", NULL, true, false, 0, NULL, 1073741824ull, 0, false },
    { "window_bytes_1", "{\"keys\": [\"a\"], \"ordered\": true, \"window_bytes\": 1}", 1, "a", "a",
      NULL, true, false, 0, NULL, 1, 0, false },
    { "window_objects", "{\"keys\": [\"a\"], \"ordered\": true, \"window_objects\": 64}", 1, "a",
      "a", NULL, true, false, 0, NULL, 0, 64, false },
    { "window_objects_max", "{\"keys\": [\"a\"], \"ordered\": true, \"window_objects\": 1000000}",
      1, "a", "a", NULL, true, false, 0, NULL, 0, 1000000, false },
    { "pin_true", "{\"keys\": [\"a\"], \"pin\": true}", 1, "a", "a", NULL, false, false, 0, NULL,
      0, 0, true },
    { "everything",
      "{\"template\": \"s-{0..9}.tar\", \"ordered\": true, \"epoch\": 7, \"consumer\": \"r1\","
      " \"window_bytes\": 4096, \"window_objects\": 2, \"pin\": true}",
      10, "s-0.tar", "s-9.tar", NULL, true, true, 7, "r1", 4096, 2, true },
    { "whitespace_and_newlines", "\n  {\n \"keys\" :\t[ \"a\" ]\n}\n  ", 1, "a", "a", NULL, false,
      false, 0, NULL, 0, 0, false },
};

static void good_hints_parse_every_field(void)
{
    for (size_t i = 0; i < N_ELEMS(GOOD); i++) {
        const struct good_case *c = &GOOD[i];
        struct conf_hint h;
        char err[512] = "";
        int rc = parse_str(c->body, &LIM, &h, err, sizeof err);
        CHECK_CASE(rc == 0, c->name, "rc %d: %s", rc, err);
        if (rc != 0)
            continue;
        CHECK_CASE(h.n_keys == c->n_keys, c->name, "n_keys %zu, want %zu", h.n_keys, c->n_keys);
        if (c->n_keys > 0 && h.n_keys == c->n_keys) {
            CHECK_CASE(h.keys != NULL && strcmp(h.keys[0], c->first) == 0, c->name, "first %s",
                       h.keys ? h.keys[0] : "(null)");
            CHECK_CASE(h.keys != NULL && strcmp(h.keys[h.n_keys - 1], c->last) == 0, c->name,
                       "last %s", h.keys ? h.keys[h.n_keys - 1] : "(null)");
            CHECK_CASE(h.prefix == NULL, c->name, "prefix set with keys");
        } else if (c->n_keys == 0) {
            CHECK_CASE(h.keys == NULL, c->name, "keys set with prefix");
            CHECK_CASE(h.prefix != NULL && strcmp(h.prefix, c->prefix) == 0, c->name,
                       "prefix %s", h.prefix ? h.prefix : "(null)");
        }
        CHECK_CASE(h.ordered == c->ordered, c->name, "ordered");
        CHECK_CASE(h.has_epoch == c->has_epoch, c->name, "has_epoch");
        CHECK_CASE(h.epoch == c->epoch, c->name, "epoch %llu", (unsigned long long)h.epoch);
        if (c->consumer == NULL)
            CHECK_CASE(h.consumer == NULL, c->name, "consumer set");
        else
            CHECK_CASE(h.consumer != NULL && strcmp(h.consumer, c->consumer) == 0, c->name,
                       "consumer %s", h.consumer ? h.consumer : "(null)");
        CHECK_CASE(h.window_bytes == c->window_bytes, c->name, "window_bytes");
        CHECK_CASE(h.window_objects == c->window_objects, c->name, "window_objects");
        CHECK_CASE(h.pin == c->pin, c->name, "pin");
        conf_hint_free(&h);
        CHECK_CASE(h.keys == NULL && h.prefix == NULL && h.consumer == NULL && h.n_keys == 0,
                   c->name, "conf_hint_free leaves pointers");
    }
}

/* ---- bad hints ---- */

struct bad_case {
    const char *name;
    const char *body;
    const char *fragment;   /* must appear in the message */
};

static const struct bad_case BAD[] = {
    /* not JSON / not an object */
    { "empty_body", "", "invalid JSON at line 1" },
    { "syntax_error_line_col", "{\"keys\": [\"a\"],\n \"pin\": tru}", "line 2, column" },
    { "trailing_garbage", "{\"keys\": [\"a\"]} x", "invalid JSON" },
    { "trailing_comma", "{\"keys\": [\"a\"],}", "invalid JSON" },
    { "not_object_array", "[\"a\"]", "must be a JSON object" },
    { "not_object_string", "\"keys\"", "must be a JSON object" },
    { "not_object_null", "null", "must be a JSON object" },
    { "duplicate_field", "{\"keys\": [\"a\"], \"keys\": [\"b\"]}", "duplicate" },
    { "invalid_utf8", "{\"keys\": [\"\xff\"]}", "invalid JSON" },
    /* unknown fields */
    { "unknown_field", "{\"keys\": [\"a\"], \"order\": true}",
      "unknown field \"order\"; allowed: keys, prefix, template, ordered, epoch, consumer, "
      "window_bytes, window_objects, pin, stage_ahead" },
    { "unknown_field_case", "{\"Keys\": [\"a\"]}", "unknown field \"Keys\"" },
    /* jansson refuses a NUL in a field name itself, even with JSON_ALLOW_NUL */
    { "field_name_with_nul", "{\"keys\\u0000x\": [\"a\"]}", "NUL byte in object key" },
    /* key source */
    { "no_source", "{\"ordered\": true}", "one of keys, prefix or template is required" },
    { "empty_object", "{}", "one of keys, prefix or template is required" },
    { "keys_and_prefix", "{\"keys\": [\"a\"], \"prefix\": \"p\"}", "not keys and prefix" },
    { "keys_and_template", "{\"keys\": [\"a\"], \"template\": \"t\"}", "not keys and template" },
    { "prefix_and_template", "{\"prefix\": \"p\", \"template\": \"t\"}",
      "not prefix and template" },
    { "all_three", "{\"keys\": [\"a\"], \"prefix\": \"p\", \"template\": \"t\"}", "all three" },
    { "null_source_counts", "{\"keys\": [\"a\"], \"prefix\": null}", "not keys and prefix" },
    /* keys */
    { "keys_empty", "{\"keys\": []}", "keys must not be empty" },
    { "keys_not_array", "{\"keys\": \"a\"}", "keys must be an array of strings" },
    { "keys_object", "{\"keys\": {\"a\": 1}}", "keys must be an array of strings" },
    { "key_not_string", "{\"keys\": [\"a\", 3]}", "keys[1] must be a string" },
    { "key_null", "{\"keys\": [null]}", "keys[0] must be a string" },
    { "key_empty", "{\"keys\": [\"a\", \"b\", \"\"]}", "keys[2] must not be empty" },
    { "key_nul", "{\"keys\": [\"a\\u0000b\"]}", "keys[0] contains a NUL character" },
    /* prefix, template types */
    { "prefix_not_string", "{\"prefix\": 1}", "prefix must be a string" },
    { "prefix_nul", "{\"prefix\": \"a\\u0000\"}", "prefix contains a NUL character" },
    { "template_not_string", "{\"template\": [\"a\"]}", "template must be a string" },
    { "template_empty", "{\"template\": \"\"}", "template must not be empty" },
    { "template_nul", "{\"template\": \"a\\u0000{1..2}\"}", "template contains a NUL" },
    { "template_bad", "{\"template\": \"a{1..2\"}", "template: '{' at position 2 is never closed" },
    /* booleans */
    { "ordered_string", "{\"keys\": [\"a\"], \"ordered\": \"true\"}",
      "ordered must be true or false" },
    { "ordered_int", "{\"keys\": [\"a\"], \"ordered\": 1}", "ordered must be true or false" },
    { "ordered_null", "{\"keys\": [\"a\"], \"ordered\": null}", "ordered must be true or false" },
    { "pin_string", "{\"keys\": [\"a\"], \"pin\": \"yes\"}", "pin must be true or false" },
    /* epoch */
    { "epoch_negative", "{\"keys\": [\"a\"], \"epoch\": -1}",
      "epoch must be an integer >= 0, not -1" },
    { "epoch_real", "{\"keys\": [\"a\"], \"epoch\": 3.0}", "epoch must be an integer" },
    { "epoch_string", "{\"keys\": [\"a\"], \"epoch\": \"3\"}", "epoch must be an integer" },
    { "epoch_huge", "{\"keys\": [\"a\"], \"epoch\": 99999999999999999999}", "invalid JSON" },
    /* consumer */
    { "consumer_not_string", "{\"keys\": [\"a\"], \"consumer\": 0}", "consumer must be a string" },
    { "consumer_129_bytes", "{\"keys\": [\"a\"], \"consumer\": \"" S64 S64 "x\"}",
      "consumer is 129 bytes, more than the limit of 128" },
    { "consumer_nul", "{\"keys\": [\"a\"], \"consumer\": \"r\\u0000\"}",
      "consumer contains a NUL character" },
    /* windows */
    { "window_bytes_zero", "{\"keys\": [\"a\"], \"ordered\": true, \"window_bytes\": 0}",
      "window_bytes must be an integer >= 1, not 0" },
    { "window_bytes_negative", "{\"keys\": [\"a\"], \"ordered\": true, \"window_bytes\": -5}",
      "window_bytes must be an integer >= 1" },
    { "window_bytes_real", "{\"keys\": [\"a\"], \"ordered\": true, \"window_bytes\": 1.5}",
      "window_bytes must be an integer" },
    { "window_objects_zero", "{\"keys\": [\"a\"], \"ordered\": true, \"window_objects\": 0}",
      "window_objects must be an integer from 1 to 1000000, not 0" },
    { "window_objects_over", "{\"keys\": [\"a\"], \"ordered\": true, \"window_objects\": 1000001}",
      "window_objects must be an integer from 1 to 1000000, not 1000001" },
    { "window_objects_string", "{\"keys\": [\"a\"], \"ordered\": true, \"window_objects\": \"6\"}",
      "window_objects must be an integer" },
    { "window_bytes_unordered", "{\"keys\": [\"a\"], \"window_bytes\": 10}",
      "window_bytes needs \"ordered\": true" },
    { "window_objects_unordered", "{\"keys\": [\"a\"], \"window_objects\": 10}",
      "window_objects needs \"ordered\": true" },
    { "window_ordered_false", "{\"keys\": [\"a\"], \"ordered\": false, \"window_objects\": 10}",
      "window_objects needs \"ordered\": true" },
    { "stage_ahead_unordered", "{\"keys\": [\"a\"], \"stage_ahead\": 64}",
      "stage_ahead needs \"ordered\": true" },
    { "stage_ahead_zero", "{\"keys\": [\"a\"], \"ordered\": true, \"stage_ahead\": 0}",
      "stage_ahead must be an integer from 1 to 1000000, not 0" },
    { "stage_ahead_string", "{\"keys\": [\"a\"], \"ordered\": true, \"stage_ahead\": \"8\"}",
      "stage_ahead must be an integer" },
};

/* "stage_ahead" lands in the struct; absent, it is 0. */
static void stage_ahead_parses(void)
{
    struct conf_hint h;
    char err[512] = "";
    CU_ASSERT_EQUAL(parse_str("{\"keys\": [\"a\"], \"ordered\": true, \"stage_ahead\": 64}",
                              &LIM, &h, err, sizeof err), 0);
    CU_ASSERT_EQUAL(h.stage_ahead, 64);
    conf_hint_free(&h);
    CU_ASSERT_EQUAL(parse_str("{\"keys\": [\"a\"], \"ordered\": true}", &LIM, &h, err,
                              sizeof err), 0);
    CU_ASSERT_EQUAL(h.stage_ahead, 0);
    conf_hint_free(&h);
}

static void bad_hints_name_the_problem(void)
{
    for (size_t i = 0; i < N_ELEMS(BAD); i++) {
        const struct bad_case *c = &BAD[i];
        struct conf_hint h;
        char err[512] = "";
        int rc = parse_str(c->body, &LIM, &h, err, sizeof err);
        CHECK_CASE(rc == -1, c->name, "rc %d", rc);
        CHECK_CASE(strstr(err, c->fragment) != NULL, c->name, "message \"%s\" lacks \"%s\"", err,
                   c->fragment);
        CHECK_CASE(strchr(err, '\n') == NULL, c->name, "message has a newline: %s", err);
        CHECK_CASE(h.keys == NULL && h.prefix == NULL && h.consumer == NULL && h.n_keys == 0,
                   c->name, "*out not zeroed on error");
        conf_hint_free(&h);   /* harmless on a failed parse */
        if (rc == 0)
            conf_hint_free(&h);
    }
}

/* A key of exactly 1024 bytes passes, 1025 is refused naming the index. */
static void key_length_limit_is_1024_bytes(void)
{
    char body[2200];
    char key[1100];
    struct conf_hint h;
    char err[512];

    memset(key, 'k', sizeof key);
    key[1024] = '\0';
    snprintf(body, sizeof body, "{\"keys\": [\"a\", \"%s\"]}", key);
    CU_ASSERT_EQUAL(parse_str(body, &LIM, &h, err, sizeof err), 0);
    CU_ASSERT_EQUAL(h.n_keys, 2);
    if (h.n_keys == 2)
        CU_ASSERT_EQUAL(strlen(h.keys[1]), 1024);
    conf_hint_free(&h);

    key[1024] = 'k';
    key[1025] = '\0';
    snprintf(body, sizeof body, "{\"keys\": [\"a\", \"%s\"]}", key);
    CU_ASSERT_EQUAL(parse_str(body, &LIM, &h, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "keys[1] is 1025 bytes, more than the limit of 1024"));

    /* and the same for prefix */
    snprintf(body, sizeof body, "{\"prefix\": \"%s\"}", key);
    CU_ASSERT_EQUAL(parse_str(body, &LIM, &h, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "prefix is 1025 bytes"));
}

/* The size cap is applied before jansson looks: an invalid body over the cap
 * gets the size message, not a syntax error. */
static void body_over_max_body_refused_before_parsing(void)
{
    struct conf_hint_limits lim = { 1000, 32 };
    struct conf_hint h;
    char err[512];
    const char *ok = "{\"keys\": [\"abcdefghijklmnop\"]}";   /* 30 bytes */
    const char *garbage = "this is not JSON at all, and it is long";

    CU_ASSERT_EQUAL(parse_str(ok, &lim, &h, err, sizeof err), 0);
    conf_hint_free(&h);
    CU_ASSERT_EQUAL(parse_str(garbage, &lim, &h, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "body is 39 bytes, more than the limit of 32"));
    /* exactly at the cap is fine */
    lim.max_body = strlen(ok);
    CU_ASSERT_EQUAL(parse_str(ok, &lim, &h, err, sizeof err), 0);
    conf_hint_free(&h);
    lim.max_body = strlen(ok) - 1;
    CU_ASSERT_EQUAL(parse_str(ok, &lim, &h, err, sizeof err), -1);
}

/* The body is (body, len): bytes after len are never read. */
static void body_is_not_nul_terminated(void)
{
    const char buf[] = "{\"keys\": [\"a\"]}GARBAGE";
    struct conf_hint h;
    char err[256];

    CU_ASSERT_EQUAL(conf_hint_parse(buf, 15, &LIM, &h, err, sizeof err), 0);
    CU_ASSERT_EQUAL(h.n_keys, 1);
    conf_hint_free(&h);
    /* a body with a raw NUL byte is not JSON */
    const char nul[] = "{\"keys\": [\"a\0\"]}";
    CU_ASSERT_EQUAL(conf_hint_parse(nul, sizeof nul - 1, &LIM, &h, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "invalid JSON"));
}

static void too_many_objects_refused(void)
{
    struct conf_hint_limits lim = { 3, 1u << 20 };
    struct conf_hint h;
    char err[512];

    CU_ASSERT_EQUAL(parse_str("{\"keys\": [\"a\", \"b\", \"c\"]}", &lim, &h, err, sizeof err), 0);
    conf_hint_free(&h);
    CU_ASSERT_EQUAL(parse_str("{\"keys\": [\"a\", \"b\", \"c\", \"d\"]}", &lim, &h, err,
                              sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "keys has 4 entries, more than the limit of 3"));
    CU_ASSERT_EQUAL(parse_str("{\"template\": \"s{1..3}\"}", &lim, &h, err, sizeof err), 0);
    CU_ASSERT_EQUAL(h.n_keys, 3);
    conf_hint_free(&h);
    CU_ASSERT_EQUAL(parse_str("{\"template\": \"s{1..4}\"}", &lim, &h, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "template: expands to 4 keys, more than the limit of 3"));
}

/* The message is cut to errlen and stays NUL-terminated; NULL err is fine. */
static void small_or_missing_err_buffer_is_safe(void)
{
    struct conf_hint h;
    char err[8];

    memset(err, 'x', sizeof err);
    CU_ASSERT_EQUAL(parse_str("{}", &LIM, &h, err, sizeof err), -1);
    CU_ASSERT_EQUAL(strlen(err), sizeof err - 1);
    CU_ASSERT_EQUAL(parse_str("{}", &LIM, &h, NULL, 0), -1);
    CU_ASSERT_EQUAL(parse_str("{\"template\": \"{\"}", &LIM, &h, NULL, 0), -1);
    conf_hint_free(NULL);
}

/* ---- templates ---- */

struct expand_case {
    const char *name;
    const char *tmpl;
    size_t n;
    const char *joined;     /* every key, space-separated; NULL = check first/last */
    const char *first, *last;
};

static const struct expand_case EXPAND[] = {
    { "literal_only", "a/b.tar", 1, "a/b.tar", NULL, NULL },
    { "range_simple", "s{1..3}", 3, "s1 s2 s3", NULL, NULL },
    { "range_single", "s{5..5}", 1, "s5", NULL, NULL },
    { "range_zero", "{0..2}", 3, "0 1 2", NULL, NULL },
    { "pad_leading_zero", "{08..10}", 3, "08 09 10", NULL, NULL },
    { "no_pad_diff_width", "{8..10}", 3, "8 9 10", NULL, NULL },
    { "pad_same_width", "{10..12}", 3, "10 11 12", NULL, NULL },
    { "pad_same_width_zeros", "{000..002}", 3, "000 001 002", NULL, NULL },
    { "pad_leading_zero_wider_b", "{008..1000}", 993, NULL, "008", "1000" },
    { "pad_to_width_of_a", "{00..5}", 6, "00 01 02 03 04 05", NULL, NULL },
    { "zero_alone_no_pad", "{0..10}", 11, NULL, "0", "10" },
    { "b_leading_zero_no_pad", "{1..010}", 10, NULL, "1", "10" },
    { "webdataset_shards", "train/shard-{000000..001023}.tar", 1024, NULL,
      "train/shard-000000.tar", "train/shard-001023.tar" },
    { "list", "{x,y,z}", 3, "x y z", NULL, NULL },
    { "list_keeps_order", "d/{zeta,alpha,mid}.tar", 3, "d/zeta.tar d/alpha.tar d/mid.tar", NULL,
      NULL },
    { "list_item_with_dots", "{a..b,c}", 2, "a..b c", NULL, NULL },
    { "list_item_numeric_range_text", "{1..3,5}", 2, "1..3 5", NULL, NULL },
    { "list_items_with_spaces_and_dots", "k{ a,b.c }", 2, "k a kb.c ", NULL, NULL },
    { "product_leftmost_slowest", "a{0..1}b{x,y}", 4, "a0bx a0by a1bx a1by", NULL, NULL },
    { "product_three", "{a,b}{1..2}{x,y}", 8, "a1x a1y a2x a2y b1x b1y b2x b2y", NULL, NULL },
    { "adjacent_groups", "{0..1}{0..1}", 4, "00 01 10 11", NULL, NULL },
    { "literal_between", "p/{1..2}/q-{a,b}.r", 4, "p/1/q-a.r p/1/q-b.r p/2/q-a.r p/2/q-b.r", NULL,
      NULL },
    { "dots_outside_groups", "a..b,{1..2}", 2, "a..b,1 a..b,2", NULL, NULL },
    { "product_large", "s{0000..0999}-{00..99}", 100000, NULL, "s0000-00", "s0999-99" },
    { "big_bounds", "{18446744073709551614..18446744073709551615}", 2,
      "18446744073709551614 18446744073709551615", NULL, NULL },
};

static void template_expansion_cases(void)
{
    for (size_t i = 0; i < N_ELEMS(EXPAND); i++) {
        const struct expand_case *c = &EXPAND[i];
        char **keys = (char **)&keys;
        size_t n = 99;
        char err[512] = "";
        int rc = conf_hint_expand(c->tmpl, 1000000, &keys, &n, err, sizeof err);
        CHECK_CASE(rc == 0, c->name, "rc %d: %s", rc, err);
        if (rc != 0)
            continue;
        CHECK_CASE(n == c->n, c->name, "n %zu, want %zu", n, c->n);
        if (c->joined != NULL) {
            char buf[256];
            keys_join(keys, n, buf, sizeof buf);
            CHECK_CASE(strcmp(buf, c->joined) == 0, c->name, "got \"%.250s\", want \"%.250s\"",
                       buf, c->joined);
        } else if (n > 0) {
            CHECK_CASE(strcmp(keys[0], c->first) == 0, c->name, "first %s", keys[0]);
            CHECK_CASE(strcmp(keys[n - 1], c->last) == 0, c->name, "last %s", keys[n - 1]);
        }
        conf_hint_keys_free(keys, n);
    }
}

/* Every key of a large product is where the order says, not just the ends. */
static void template_product_order_exhaustive(void)
{
    char **keys;
    size_t n;
    char err[256];
    char want[64];

    CU_ASSERT_EQUAL_FATAL(conf_hint_expand("{0..9}/{a,b,c}/{00..99}", 1000000, &keys, &n, err,
                                           sizeof err), 0);
    CU_ASSERT_EQUAL(n, 3000);
    size_t i = 0, bad = 0;
    for (int d = 0; d <= 9; d++)
        for (int l = 0; l < 3; l++)
            for (int p = 0; p <= 99; p++, i++) {
                snprintf(want, sizeof want, "%d/%c/%02d", d, "abc"[l], p);
                if (i >= n || strcmp(keys[i], want) != 0)
                    bad++;
            }
    CU_ASSERT_EQUAL(bad, 0);
    conf_hint_keys_free(keys, n);
}

struct expand_bad_case {
    const char *name;
    const char *tmpl;
    const char *fragment;
};

static const struct expand_bad_case EXPAND_BAD[] = {
    { "empty", "", "template: must not be empty" },
    { "unclosed", "a{1..2", "'{' at position 2 is never closed" },
    { "unclosed_second", "a{1..2}b{x", "'{' at position 9 is never closed" },
    { "stray_close", "a}b", "'}' at position 2 has no matching '{'" },
    { "stray_close_after_group", "{1..2}}", "'}' at position 7 has no matching '{'" },
    { "nested", "a{x,{1..2}}", "nested '{' at position 5" },
    { "nested_open_open", "{{}}", "nested '{' at position 2" },
    { "empty_group", "a{}b", "empty group {} at position 2" },
    { "empty_list_item_middle", "{a,,b}", "empty item in the list at position 1 (item 2)" },
    { "empty_list_item_end", "x{a,}", "empty item in the list at position 2 (item 2)" },
    { "empty_list_item_start", "x{,a}", "empty item in the list at position 2 (item 1)" },
    { "only_comma", "{,}", "empty item" },
    { "backwards", "s{10..2}", "range {10..2} at position 2 runs backwards (10 > 2)" },
    { "non_numeric_start", "{a..9}", "the start bound \"a\" of the range at position 1 is not a "
      "non-negative decimal number" },
    { "non_numeric_end", "x{1..z}", "the end bound \"z\" of the range at position 2" },
    { "negative", "{-1..3}", "the start bound \"-1\"" },
    { "plus_sign", "{1..+3}", "the end bound \"+3\"" },
    { "three_dots", "{1...3}", "the end bound \".3\"" },
    { "spaces", "{1.. 3}", "the end bound \" 3\"" },
    { "missing_start", "{..3}", "has no start bound" },
    { "missing_end", "{3..}", "has no end bound" },
    { "neither", "a{x}b", "group {x} at position 2 is neither a range {A..B} nor a list {x,y}" },
    { "single_dot", "{1.3}", "is neither" },
    { "bound_overflow", "{0..18446744073709551616}", "the end bound of the range at position 1 "
      "is too large" },
};

static void template_errors_name_the_position(void)
{
    for (size_t i = 0; i < N_ELEMS(EXPAND_BAD); i++) {
        const struct expand_bad_case *c = &EXPAND_BAD[i];
        char **keys = (char **)&keys;
        size_t n = 99;
        char err[512] = "";
        int rc = conf_hint_expand(c->tmpl, 1000000, &keys, &n, err, sizeof err);
        CHECK_CASE(rc == -1, c->name, "rc %d", rc);
        CHECK_CASE(keys == NULL && n == 0, c->name, "outputs not cleared");
        CHECK_CASE(strncmp(err, "template: ", 10) == 0, c->name, "message \"%s\"", err);
        CHECK_CASE(strstr(err, c->fragment) != NULL, c->name, "message \"%s\" lacks \"%s\"", err,
                   c->fragment);
        if (rc == 0)
            conf_hint_keys_free(keys, n);
    }
}

/* A template of 10^12 keys is refused from its group sizes, fast, without
 * allocating; so is one whose product overflows 64 bits. */
static void template_limit_refused_without_expanding(void)
{
    char **keys;
    size_t n;
    char err[512];

    double t0 = now_s();
    CU_ASSERT_EQUAL(conf_hint_expand("s-{000000..999999}-{000000..999999}.tar", 1000000, &keys,
                                     &n, err, sizeof err), -1);
    double dt = now_s() - t0;
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "template: expands to 1000000000000 keys, more than the "
                                       "limit of 1000000"));
    CU_ASSERT(dt < 0.05);

    /* 2^64 keys in one group */
    CU_ASSERT_EQUAL(conf_hint_expand("{0..18446744073709551615}", 1000000, &keys, &n, err,
                                     sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "expands to more than 18446744073709551615 keys"));
    /* a product that wraps 64 bits: (10^10)^2 */
    CU_ASSERT_EQUAL(conf_hint_expand("{0..9999999999}{0..9999999999}", 1000000, &keys, &n, err,
                                     sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "expands to more than 18446744073709551615 keys"));
    /* many small groups: 2^70 */
    char many[512] = "";
    for (int i = 0; i < 70; i++)
        strcat(many, "{a,b}");
    t0 = now_s();
    CU_ASSERT_EQUAL(conf_hint_expand(many, 1000000, &keys, &n, err, sizeof err), -1);
    CU_ASSERT(now_s() - t0 < 0.05);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "more than"));
    /* the same through a parsed hint */
    struct conf_hint h;
    CU_ASSERT_EQUAL(parse_str("{\"template\": \"s-{000000..999999}-{000000..999999}.tar\"}",
                              &LIM, &h, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "1000000000000 keys"));
}

/* max_objects is inclusive; 0 refuses everything. */
static void template_limit_is_inclusive(void)
{
    char **keys;
    size_t n;
    char err[512];

    CU_ASSERT_EQUAL(conf_hint_expand("{1..4}{a,b}", 8, &keys, &n, err, sizeof err), 0);
    CU_ASSERT_EQUAL(n, 8);
    conf_hint_keys_free(keys, n);
    CU_ASSERT_EQUAL(conf_hint_expand("{1..4}{a,b}", 7, &keys, &n, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "expands to 8 keys, more than the limit of 7"));
    CU_ASSERT_EQUAL(conf_hint_expand("plain", 0, &keys, &n, err, sizeof err), -1);
    CU_ASSERT_EQUAL(conf_hint_expand("plain", 1, &keys, &n, err, sizeof err), 0);
    conf_hint_keys_free(keys, n);
}

/* The default limit itself: exactly 10^6 keys expand, 10^6 + 1 do not. */
static void template_million_keys_expands(void)
{
    char **keys;
    size_t n;
    char err[512];

    CU_ASSERT_EQUAL_FATAL(conf_hint_expand("train/{000000..999999}.tar", 1000000, &keys, &n, err,
                                           sizeof err), 0);
    CU_ASSERT_EQUAL(n, 1000000);
    CU_ASSERT_STRING_EQUAL(keys[0], "train/000000.tar");
    CU_ASSERT_STRING_EQUAL(keys[123456], "train/123456.tar");
    CU_ASSERT_STRING_EQUAL(keys[999999], "train/999999.tar");
    conf_hint_keys_free(keys, n);
    CU_ASSERT_EQUAL(conf_hint_expand("train/{0..1000000}.tar", 1000000, &keys, &n, err,
                                     sizeof err), -1);
}

/* Expanded keys may be 1024 bytes, not 1025; checked before expanding. */
static void template_key_length_limit(void)
{
    char tmpl[1200];
    char **keys;
    size_t n;
    char err[512];

    /* 1020 literal bytes + a 4-digit range = 1024 */
    memset(tmpl, 'k', 1020);
    strcpy(tmpl + 1020, "{0000..0003}");
    CU_ASSERT_EQUAL(conf_hint_expand(tmpl, 1000, &keys, &n, err, sizeof err), 0);
    CU_ASSERT_EQUAL(n, 4);
    if (n == 4)
        CU_ASSERT_EQUAL(strlen(keys[3]), 1024);
    conf_hint_keys_free(keys, n);
    /* a wider end bound makes the longest key 1025 */
    strcpy(tmpl + 1020, "{1..10000}");
    CU_ASSERT_EQUAL(conf_hint_expand(tmpl, 100000, &keys, &n, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "yields keys of up to 1025 bytes, more than the limit of "
                                       "1024"));
    /* only one list item too long is enough */
    memset(tmpl, 'k', 1020);
    strcpy(tmpl + 1020, "{a,bbbbb}");
    CU_ASSERT_EQUAL(conf_hint_expand(tmpl, 1000, &keys, &n, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "up to 1025 bytes"));
    /* many one-key groups count too */
    char many[7000] = "";
    for (int i = 0; i < 1025; i++)
        strcat(many, "{1..1}");
    CU_ASSERT_EQUAL(conf_hint_expand(many, 1000, &keys, &n, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "up to 1025 bytes"));
}

/* The group echoed in a message is capped; the message stays one short line. */
static void template_long_group_echo_is_capped(void)
{
    char tmpl[3000];
    char **keys;
    size_t n;
    char err[4096];

    tmpl[0] = '{';
    memset(tmpl + 1, 'z', 2000);
    strcpy(tmpl + 2001, "}");
    CU_ASSERT_EQUAL(conf_hint_expand(tmpl, 10, &keys, &n, err, sizeof err), -1);
    CU_ASSERT(strlen(err) < 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "is neither"));
}

int register_tests(void)
{
    CU_pSuite s = CU_add_suite("conf_hint_parse", NULL, NULL);
    if (s == NULL
        || CU_add_test(s, "good_hints_parse_every_field", good_hints_parse_every_field) == NULL
        || CU_add_test(s, "bad_hints_name_the_problem", bad_hints_name_the_problem) == NULL
        || CU_add_test(s, "stage_ahead_parses", stage_ahead_parses) == NULL
        || CU_add_test(s, "key_length_limit_is_1024_bytes", key_length_limit_is_1024_bytes) == NULL
        || CU_add_test(s, "body_over_max_body_refused_before_parsing",
                       body_over_max_body_refused_before_parsing) == NULL
        || CU_add_test(s, "body_is_not_nul_terminated", body_is_not_nul_terminated) == NULL
        || CU_add_test(s, "too_many_objects_refused", too_many_objects_refused) == NULL
        || CU_add_test(s, "small_or_missing_err_buffer_is_safe",
                       small_or_missing_err_buffer_is_safe) == NULL)
        return -1;
    s = CU_add_suite("conf_hint_expand", NULL, NULL);
    if (s == NULL
        || CU_add_test(s, "template_expansion_cases", template_expansion_cases) == NULL
        || CU_add_test(s, "template_product_order_exhaustive",
                       template_product_order_exhaustive) == NULL
        || CU_add_test(s, "template_errors_name_the_position",
                       template_errors_name_the_position) == NULL
        || CU_add_test(s, "template_limit_refused_without_expanding",
                       template_limit_refused_without_expanding) == NULL
        || CU_add_test(s, "template_limit_is_inclusive", template_limit_is_inclusive) == NULL
        || CU_add_test(s, "template_million_keys_expands", template_million_keys_expands) == NULL
        || CU_add_test(s, "template_key_length_limit", template_key_length_limit) == NULL
        || CU_add_test(s, "template_long_group_echo_is_capped",
                       template_long_group_echo_is_capped) == NULL)
        return -1;
    return 0;
}
