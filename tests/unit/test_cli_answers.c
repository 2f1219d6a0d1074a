/* tests/unit/test_cli_answers.c - clients/cli/answer.c and job.c: the
 * gateway's answers are read with jansson (jobs, one whole document) and
 * libxml2 (S3 errors), and every string from them is made harmless for a
 * terminal without cutting a UTF-8 sequence. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "cli_int.h"

int register_tests(void);

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

#define check_case(cond, name)                                                          \
    do {                                                                                \
        char chk_msg_[600];                                                             \
        snprintf(chk_msg_, sizeof chk_msg_, "[%.500s]", (name));                        \
        CU_assertImplementation((cond) ? CU_TRUE : CU_FALSE, __LINE__, chk_msg_, __FILE__, "", \
                                CU_FALSE);                                              \
    } while (0)

static void job_document_read_with_jansson(void)
{
    const char *doc =
        "{\"job\": \"j1\", \"bucket\": \"b\", \"state\": \"running\", \"ordered\": true,"
        " \"epoch\": 3, \"consumer\": \"r\\u00e9nk\\n0\\u001b[2J\", \"position\": null,"
        " \"objects\": {\"total\": 26, \"cached\": 1, \"staged\": 9, \"failed\": 16,"
        " \"pending\": 0}, \"bytes\": {\"total\": 1e3, \"done\": 512},"
        " \"rate_bytes_per_s\": 2.5e6, \"eta_s\": null,"
        " \"errors\": [{\"key\": \"a\", \"code\": \"NoSuchKey\"}, {\"key\": \"b\"}]}";
    json_error_t err;
    json_t *v = json_loads(doc, 0, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    struct cli_job j;
    CU_ASSERT_TRUE(cli_job_parse(v, &j));
    CU_ASSERT_STRING_EQUAL(j.id, "j1");
    CU_ASSERT_STRING_EQUAL(j.state, "running");
    /* UTF-8 kept, control characters (an escape sequence too) made visible */
    CU_ASSERT_STRING_EQUAL(j.consumer, "r\xc3\xa9nk?0?[2J");
    CU_ASSERT_TRUE(j.ordered && j.has_epoch && j.epoch == 3);
    CU_ASSERT_FALSE(j.has_position);
    CU_ASSERT_FALSE(j.has_eta);
    CU_ASSERT_TRUE(j.has_rate && j.rate == 2.5e6);
    CU_ASSERT_TRUE(j.total == 26 && j.cached == 1 && j.staged == 9 && j.failed == 16);
    CU_ASSERT_TRUE(j.bytes_total == 1000 && j.bytes_done == 512);
    CU_ASSERT_EQUAL(cli_job_errors(v), 2);
    json_decref(v);

    /* the POST answer: "objects" is a count */
    v = json_loads("{\"job\": \"j2\", \"objects\": 1024, \"state\": \"queued\"}", 0, &err);
    CU_ASSERT_TRUE(cli_job_parse(v, &j) && j.total == 1024);
    json_decref(v);
    /* no id, not an object */
    v = json_loads("{\"state\": \"done\"}", 0, &err);
    CU_ASSERT_FALSE(cli_job_parse(v, &j));
    json_decref(v);
    v = json_loads("[1, 2]", 0, &err);
    CU_ASSERT_FALSE(cli_job_parse(v, &j));
    json_decref(v);
}

static void answer_must_be_one_json_document(void)
{
    static const struct { const char *body; long status; int ok; } cases[] = {
        { "{\"jobs\": []}", 200, 1 },
        { "  {\"jobs\": []}\n", 200, 1 },
        { "{\"jobs\": []} trailing", 200, 0 },
        { "{\"jobs\": [", 200, 0 },
        { "<ListBucketResult/>", 200, 0 },
        { "", 200, 0 },
        { "{\"jobs\": []}", 404, 0 },
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct cli_answer a = { .status = cases[i].status };
        sg_buf_init(&a.body, CLI_ANSWER_MAX);
        sg_buf_adds(&a.body, cases[i].body);
        json_t *v = cli_answer_json(&a);
        check_case((v != NULL) == cases[i].ok, cases[i].body);
        json_decref(v);
        cli_answer_free(&a);
    }
}

static void s3_error_read_with_libxml2(void)
{
    char code[64], msg[256];
    const char *e = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InvalidArgument"
                    "</Code><Message>bad &lt;template&gt; &amp; &#x41;\nmore</Message>"
                    "<RequestId>1</RequestId></Error>";
    CU_ASSERT_TRUE(cli_s3_error_parse(e, strlen(e), code, sizeof code, msg, sizeof msg));
    CU_ASSERT_STRING_EQUAL(code, "InvalidArgument");
    CU_ASSERT_STRING_EQUAL(msg, "bad <template> & A?more");
    /* not an S3 error: other XML, HTML, nothing, truncated */
    static const char *const no[] = {
        "<ListBucketResult><Code>x</Code></ListBucketResult>",
        "<html><body>502 Bad Gateway</body></html>", "", "<Error><Code>Acc",
        "{\"Code\": \"x\"}",
    };
    for (size_t i = 0; i < N_ELEMS(no); i++)
        check_case(!cli_s3_error_parse(no[i], strlen(no[i]), code, sizeof code, msg,
                                       sizeof msg), no[i]);
    /* a long message is cut, never overrun */
    char big[4096];
    int n = snprintf(big, sizeof big, "<Error><Code>C</Code><Message>");
    memset(big + n, 'm', 3000);
    snprintf(big + n + 3000, sizeof big - (size_t)n - 3000, "</Message></Error>");
    CU_ASSERT_TRUE(cli_s3_error_parse(big, strlen(big), code, sizeof code, msg, sizeof msg));
    CU_ASSERT_EQUAL(strlen(msg), sizeof msg - 1);
}

static void term_copy_never_cuts_a_utf8_sequence(void)
{
    char out[6];
    cli_term_copy("abcd\xc3\xa9", out, sizeof out);      /* 'é' does not fit whole */
    CU_ASSERT_STRING_EQUAL(out, "abcd");
    cli_term_copy("ab\xe2\x82\xac" "cd", out, sizeof out); /* '€' fits whole */
    CU_ASSERT_STRING_EQUAL(out, "ab\xe2\x82\xac");
    cli_term_copy(NULL, out, sizeof out);
    CU_ASSERT_STRING_EQUAL(out, "");
}

int register_tests(void)
{
    CU_pSuite s;
    s = CU_add_suite("cli_answers", NULL, NULL);
    if (s == NULL
        || CU_add_test(s, "job_document_read_with_jansson", job_document_read_with_jansson) == NULL
        || CU_add_test(s, "answer_must_be_one_json_document",
                       answer_must_be_one_json_document) == NULL
        || CU_add_test(s, "s3_error_read_with_libxml2", s3_error_read_with_libxml2) == NULL
        || CU_add_test(s, "term_copy_never_cuts_a_utf8_sequence",
                       term_copy_never_cuts_a_utf8_sequence) == NULL)
        return -1;
    return 0;
}
