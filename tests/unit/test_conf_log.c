/* tests/unit/test_conf_log.c - the log layer: a client string cannot start a
 * new line or forge a field in either format (control characters, quotes,
 * backslashes, bytes that are not UTF-8, Unicode line separators), JSON
 * lines parse and give the original string back, long values are cut
 * without breaking the line, and log_reopen() follows a rotated file. */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf_int.h"
#include "log.h"

static char dir[256];
static char path[300];

static int suite_init(void)
{
    snprintf(dir, sizeof dir, "/tmp/test_conf_log.XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(path, sizeof path, "%s/sg.log", dir);
    return 0;
}

static int suite_clean(void)
{
    char p[320];
    log_close_file();
    unlink(path);
    snprintf(p, sizeof p, "%s.1", path);
    unlink(p);
    rmdir(dir);
    return 0;
}

/* Starts a fresh log file in `format`. */
static void fresh(enum log_format f)
{
    log_close_file();
    unlink(path);
    CU_ASSERT_EQUAL_FATAL(log_open_file(path), 0);
    log_set_format(f);
    log_set_level(LOG_LVL_DEBUG);
}

/* The file's text (caller frees) and its number of lines. */
static char *slurp(const char *p, size_t *lines)
{
    FILE *f = fopen(p, "r");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    *lines = 0;
    for (size_t i = 0; i < n; i++)
        *lines += buf[i] == '\n';
    return buf;
}

/* Client strings: each must stay on one line. */
static const char *const hostile[] = {
    "x\nFAKE 2024-01-01T00:00:00.000Z INFO  access: req=0 status=200",
    "cr\rlf\r\n",
    "quote\" key=\"forged",
    "back\\slash\\",
    "ctl\x01\x1b[31m\x7f",
    "nel\xc2\x85line-sep\xe2\x80\xa8para-sep\xe2\x80\xa9",
    "not-utf8\xff\xfe\xc3",
    "caf\xc3\xa9 \xe2\x98\x83",
    "",
    "-",
};
#define N_HOSTILE (sizeof hostile / sizeof hostile[0])

static void text_lines_escape_client_strings(void)
{
    fresh(LOG_FMT_TEXT);
    for (size_t i = 0; i < N_HOSTILE; i++) {
        log_msg(LOG_LVL_INFO, "gw", "key=%s end", hostile[i]);
        struct log_kv kv[] = { LOG_KV_S("key", hostile[i]), LOG_KV_U("status", 200) };
        log_kv(LOG_LVL_INFO, "access", kv, 2);
    }
    size_t lines;
    char *text = slurp(path, &lines);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_EQUAL(lines, 2 * N_HOSTILE);
    CU_ASSERT_PTR_NULL(strstr(text, "\nFAKE"));
    CU_ASSERT_PTR_NULL(strchr(text, '\r'));
    CU_ASSERT_PTR_NULL(strchr(text, '\x1b'));
    CU_ASSERT_PTR_NULL(strstr(text, "\xc2\x85"));
    CU_ASSERT_PTR_NULL(strstr(text, "\xe2\x80\xa8"));
    CU_ASSERT_PTR_NULL(strstr(text, "\xff"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "key=x\\nFAKE"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "key=quote\\\" key=\\\"forged end"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "key=\"quote\\\" key=\\\"forged\" status=200"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "back\\\\slash\\\\"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "ctl\\x01\\x1b[31m\\x7f"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "nel\\u0085line-sep\\u2028para-sep\\u2029"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "not-utf8\\xff\\xfe\\xc3"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "key=\"caf\xc3\xa9 \xe2\x98\x83\""));   /* kept */
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "key=\"\" status=200"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "key=\"-\" status=200"));
    free(text);
}

static void text_fields_quote_only_when_needed(void)
{
    fresh(LOG_FMT_TEXT);
    struct log_kv kv[] = { LOG_KV_S("req", "ABC"), LOG_KV_S("key", "dir/file.tar"),
                           LOG_KV_S("none", NULL), LOG_KV_S("eq", "a=b"),
                           LOG_KV_U("n", 42), LOG_KV_MS("ms", 1.5) };
    log_kv(LOG_LVL_INFO, "access", kv, sizeof kv / sizeof kv[0]);
    size_t lines;
    char *text = slurp(path, &lines);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, " INFO  access: req=ABC key=dir/file.tar none=- "
                                        "eq=\"a=b\" n=42 ms=1.500\n"));
    free(text);
}

/* Each line is one JSON object; for valid UTF-8 the decoded string is the
 * original, byte for byte. */
static void json_lines_parse_and_round_trip(void)
{
    fresh(LOG_FMT_JSON);
    for (size_t i = 0; i < N_HOSTILE; i++) {
        log_msg(LOG_LVL_WARN, "gw", "%s", hostile[i]);
        struct log_kv kv[] = { LOG_KV_S("key", hostile[i]), LOG_KV_S("none", NULL),
                               LOG_KV_U("status", 404), LOG_KV_MS("ms", 0.25) };
        log_kv(LOG_LVL_INFO, "access", kv, 4);
    }
    size_t lines;
    char *text = slurp(path, &lines);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_EQUAL(lines, 2 * N_HOSTILE);
    char *save = NULL;
    size_t i = 0;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save), i++) {
        json_error_t e;
        json_t *o = json_loads(l, 0, &e);
        CU_ASSERT_PTR_NOT_NULL(o);
        if (!o) {
            fprintf(stderr, "line %zu does not parse: %s\n%s\n", i, e.text, l);
            continue;
        }
        const char *orig = hostile[i / 2];
        bool utf8 = strstr(orig, "not-utf8") == NULL;
        CU_ASSERT_TRUE(json_is_string(json_object_get(o, "time")));
        if (i % 2 == 0) {
            CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o, "level")), "warn");
            CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o, "subsys")), "gw");
            if (utf8) {
                CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o, "msg")), orig);
            }
        } else {
            CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o, "subsys")), "access");
            CU_ASSERT_TRUE(json_is_null(json_object_get(o, "none")));
            CU_ASSERT_EQUAL(json_integer_value(json_object_get(o, "status")), 404);
            CU_ASSERT_TRUE(json_is_number(json_object_get(o, "ms")));
            if (utf8) {
                CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o, "key")), orig);
            } else {
                CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o, "key")),
                                       "not-utf8\\xff\\xfe\\xc3");
            }
        }
        json_decref(o);
    }
    CU_ASSERT_EQUAL(i, 2 * N_HOSTILE);
    free(text);
}

/* Fields far longer than a line: cut, still one line, still JSON. */
static void long_values_are_cut_and_lines_stay_whole(void)
{
    size_t big = 20000;
    char *v = malloc(big + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    memset(v, '\n', big);   /* escapes to twice its size */
    v[big] = '\0';
    for (int f = 0; f < 2; f++) {
        fresh(f ? LOG_FMT_JSON : LOG_FMT_TEXT);
        struct log_kv kv[] = { LOG_KV_S("a", v), LOG_KV_S("b", v), LOG_KV_S("c", v),
                               LOG_KV_S("d", v), LOG_KV_S("e", v), LOG_KV_U("n", 7) };
        log_kv(LOG_LVL_INFO, "access", kv, sizeof kv / sizeof kv[0]);
        log_msg(LOG_LVL_INFO, "gw", "%s", v);
        size_t lines;
        char *text = slurp(path, &lines);
        CU_ASSERT_PTR_NOT_NULL_FATAL(text);
        CU_ASSERT_EQUAL(lines, 2);
        CU_ASSERT_PTR_NOT_NULL(strstr(text, "..."));
        if (f) {
            char *save = NULL;
            for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                json_error_t e;
                json_t *o = json_loads(l, 0, &e);
                CU_ASSERT_PTR_NOT_NULL(o);
                if (!o)
                    fprintf(stderr, "cut line does not parse: %s\n", e.text);
                json_decref(o);
            }
        }
        free(text);
    }
    free(v);
}

static void reopen_follows_a_rotated_file(void)
{
    char rotated[320];
    snprintf(rotated, sizeof rotated, "%s.1", path);
    fresh(LOG_FMT_TEXT);
    log_msg(LOG_LVL_INFO, "t", "before");
    CU_ASSERT_EQUAL(rename(path, rotated), 0);
    log_msg(LOG_LVL_INFO, "t", "between");   /* still the old file */
    CU_ASSERT_EQUAL(log_reopen(), 0);
    log_msg(LOG_LVL_INFO, "t", "after");
    size_t n1, n2;
    char *old = slurp(rotated, &n1), *cur = slurp(path, &n2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(old);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cur);
    CU_ASSERT_EQUAL(n1, 2);
    CU_ASSERT_EQUAL(n2, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(old, "before"));
    CU_ASSERT_PTR_NOT_NULL(strstr(old, "between"));
    CU_ASSERT_PTR_NOT_NULL(strstr(cur, "after"));
    free(old);
    free(cur);
    unlink(rotated);
    log_close_file();
    CU_ASSERT_EQUAL(log_reopen(), -1);   /* stderr: nothing to reopen */
}

/* conf_choice: the index of a name, exact case; a refusal lists the choices
 * as every setting of a fixed set does (two or three: "a" or "b"; four or
 * more: one of ...). */
static void choices_match_exactly_and_refusals_list_them(void)
{
    static const char *const two[] = { "text", "json" };
    static const char *const three[] = { "auto", "io_uring", "threads" };
    static const char *const four[] = { "error", "warn", "info", "debug" };
    static const struct {
        const char *const *names;
        size_t n;
        const char *s;
        int idx;              /* -1: refused */
        const char *msg;
    } cases[] = {
        { two, 2, "json", 1, NULL },
        { two, 2, "text", 0, NULL },
        { two, 2, "JSON", -1, "f: must be \"text\" or \"json\"" },
        { two, 2, "", -1, "f: must be \"text\" or \"json\"" },
        { two, 2, NULL, -1, "f: must be \"text\" or \"json\"" },
        { three, 3, "threads", 2, NULL },
        { three, 3, "uring", -1, "f: must be \"auto\", \"io_uring\" or \"threads\"" },
        { four, 4, "debug", 3, NULL },
        { four, 4, "loud", -1, "f: must be one of \"error\", \"warn\", \"info\", \"debug\"" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[256] = "";
        unsigned idx = 99;
        int rc = conf_choice("f", cases[i].s, cases[i].names, cases[i].n, &idx, err, sizeof err);
        if (cases[i].idx >= 0) {
            CU_ASSERT_EQUAL(rc, 0);
            CU_ASSERT_EQUAL(idx, (unsigned)cases[i].idx);
        } else {
            CU_ASSERT_EQUAL(rc, -1);
            CU_ASSERT_STRING_EQUAL(err, cases[i].msg);
        }
    }
}

int register_tests(void);
int register_tests(void)
{
    CU_pSuite s = CU_add_suite("conf_log", suite_init, suite_clean);
    if (!s)
        return -1;
    CU_add_test(s, "text_lines_escape_client_strings", text_lines_escape_client_strings);
    CU_add_test(s, "text_fields_quote_only_when_needed", text_fields_quote_only_when_needed);
    CU_add_test(s, "json_lines_parse_and_round_trip", json_lines_parse_and_round_trip);
    CU_add_test(s, "long_values_are_cut_and_lines_stay_whole",
                long_values_are_cut_and_lines_stay_whole);
    CU_add_test(s, "reopen_follows_a_rotated_file", reopen_follows_a_rotated_file);
    CU_add_test(s, "choices_match_exactly_and_refusals_list_them",
                choices_match_exactly_and_refusals_list_them);
    return 0;
}
