/* tests/unit/test_cli_progress.c - clients/cli/progress.c: the progress line
 * of `prefetch --wait` fits the width it is given (counters first, then
 * bytes, rate and ETA, the bar last and only with room), and the terminal
 * width comes from $COLUMNS off a terminal. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_int.h"

int register_tests(void);

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

#define check_case(cond, name, line, cols)                                              \
    do {                                                                                \
        char chk_msg_[1200];                                                            \
        snprintf(chk_msg_, sizeof chk_msg_, "[%s, %u columns] '%s'", (name), (unsigned)(cols), \
                 (line));                                                               \
        CU_assertImplementation((cond) ? CU_TRUE : CU_FALSE, __LINE__, chk_msg_, __FILE__, "", \
                                CU_FALSE);                                              \
    } while (0)

/* A running job of a million shards: every part at its widest. */
static struct cli_job big_job(void)
{
    struct cli_job j = { .id = "3905aec0ad34a25b", .state = "running", .has_rate = true,
                         .has_eta = true, .rate = 512e6, .eta = 12345, .total = 1000000,
                         .cached = 120000, .staged = 380000, .failed = 17,
                         .bytes_total = 12.1 * 1099511627776.0,
                         .bytes_cached = 2.3 * 1099511627776.0,
                         .bytes_done = 1.2 * 1099511627776.0 };
    return j;
}

static struct cli_job small_done_job(void)
{
    struct cli_job j = { .id = "x", .state = "done", .total = 20, .staged = 20,
                         .bytes_total = 107827, .bytes_done = 107827 };
    return j;
}

static void line_never_wider_than_the_columns(void)
{
    struct cli_job jobs[] = { big_job(), small_done_job() };
    const char *names[] = { "a million running", "20 done" };
    for (size_t k = 0; k < N_ELEMS(jobs); k++)
        for (unsigned cols = 1; cols <= 200; cols++)
            for (int bar = 0; bar <= 1; bar++) {
                char line[512];
                cli_progress_line(&jobs[k], cols, bar, line, sizeof line);
                check_case(strlen(line) <= cols, names[k], line, cols);
                /* whatever the width: the counters come first */
                check_case(strncmp(line, "objects", cols < 7 ? cols : 7) == 0, names[k], line,
                           cols);
                /* the bar only last, with its percentage */
                const char *b = strchr(line, '[');
                check_case(!b || (bar && line[strlen(line) - 1] == '%'), names[k], line, cols);
            }
}

static void at_80_columns_bytes_rate_and_eta_show(void)
{
    struct cli_job j = big_job();
    char line[512];
    cli_progress_line(&j, 79, true, line, sizeof line);
    check_case(strncmp(line, "objects 500017/1000000", 22) == 0, "counters", line, 79);
    check_case(strstr(line, "failed 17") != NULL, "failures", line, 79);
    /* staged of what is left to stage: the 2.3 TiB cached without the job
     * are not in the bytes' progress (issue 15) */
    check_case(strstr(line, "bytes 1.2 TiB/9.8 TiB") != NULL, "bytes", line, 79);
    check_case(strstr(line, "512 MB/s") != NULL, "rate", line, 79);
    check_case(strstr(line, "eta 12345 s") != NULL, "eta", line, 79);
}

static void wide_terminal_gets_the_detail_and_the_bar(void)
{
    struct cli_job j = big_job();
    char line[512];
    cli_progress_line(&j, 160, true, line, sizeof line);
    check_case(strstr(line, "(cached 120000, staged 380000, failed 17)") != NULL, "detail",
               line, 160);
    check_case(strstr(line, "]  50%") != NULL && strstr(line, " [=") != NULL, "bar", line, 160);
    /* off a terminal there is no bar, however wide */
    cli_progress_line(&j, 160, false, line, sizeof line);
    check_case(strchr(line, '[') == NULL && strstr(line, "eta 12345 s") != NULL, "plain", line,
               160);
}

static void narrow_terminal_keeps_the_counters(void)
{
    struct cli_job j = big_job();
    char line[512];
    cli_progress_line(&j, 39, true, line, sizeof line);
    check_case(strcmp(line, "objects 500017/1000000, failed 17") == 0, "40", line, 39);
    j = small_done_job();
    cli_progress_line(&j, 39, true, line, sizeof line);
    check_case(strcmp(line, "objects 20/20, failed 0") == 0 ||
               strncmp(line, "objects 20/20, failed 0 [", 25) == 0, "40 done", line, 39);
}

static void final_job_shows_no_rate_or_eta(void)
{
    struct cli_job j = big_job();
    strcpy(j.state, "done");
    char line[512];
    cli_progress_line(&j, 200, false, line, sizeof line);
    check_case(strstr(line, "MB/s") == NULL && strstr(line, "eta") == NULL, "done", line, 200);
}

static void width_from_columns_off_a_terminal(void)
{
    char *old = getenv("COLUMNS") ? strdup(getenv("COLUMNS")) : NULL;
    FILE *f = tmpfile();             /* not a terminal: no TIOCGWINSZ */
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    int fd = fileno(f);
    setenv("COLUMNS", "40", 1);
    CU_ASSERT_EQUAL(cli_term_width(fd), 40);
    setenv("COLUMNS", "junk", 1);
    CU_ASSERT_EQUAL(cli_term_width(fd), 80);
    unsetenv("COLUMNS");
    CU_ASSERT_EQUAL(cli_term_width(fd), 80);
    if (old)
        setenv("COLUMNS", old, 1);
    free(old);
    fclose(f);
}

int register_tests(void)
{
    CU_pSuite s = CU_add_suite("cli_progress", NULL, NULL);
    if (s == NULL
        || CU_add_test(s, "line_never_wider_than_the_columns",
                       line_never_wider_than_the_columns) == NULL
        || CU_add_test(s, "at_80_columns_bytes_rate_and_eta_show",
                       at_80_columns_bytes_rate_and_eta_show) == NULL
        || CU_add_test(s, "wide_terminal_gets_the_detail_and_the_bar",
                       wide_terminal_gets_the_detail_and_the_bar) == NULL
        || CU_add_test(s, "narrow_terminal_keeps_the_counters",
                       narrow_terminal_keeps_the_counters) == NULL
        || CU_add_test(s, "final_job_shows_no_rate_or_eta", final_job_shows_no_rate_or_eta) == NULL
        || CU_add_test(s, "width_from_columns_off_a_terminal",
                       width_from_columns_off_a_terminal) == NULL)
        return -1;
    return 0;
}

