/* tests/unit/test_conf_connections.c - the front end's options: the
 * "connections" object (limits and deadlines, with defaults well below the
 * 300 s idle timeout that let idle sockets pile up), log_format and log_file
 * from the file, the environment and the flags. */
#include <CUnit/CUnit.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"

static int load_text(struct conf *c, const char *text, char *err, size_t errlen)
{
    char path[] = "/tmp/test_conf_connections.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -2;
    size_t n = strlen(text);
    int rc = write(fd, text, n) == (ssize_t)n ? 0 : -2;
    close(fd);
    if (rc == 0)
        rc = conf_load_file(c, path, err, errlen);
    unlink(path);
    return rc;
}

static void defaults_bound_every_connection(void)
{
    struct conf c;
    CU_ASSERT_EQUAL_FATAL(conf_init_defaults(&c), 0);
    CU_ASSERT_EQUAL(c.conn_max, 0);          /* from the open-file limit */
    CU_ASSERT_EQUAL(c.conn_per_client, 0);   /* a quarter of it */
    CU_ASSERT_TRUE(c.conn_idle_timeout_s >= 5 && c.conn_idle_timeout_s <= 60);
    CU_ASSERT_TRUE(c.conn_header_timeout_s >= 5 && c.conn_header_timeout_s <= 60);
    CU_ASSERT_TRUE(c.conn_send_timeout_s >= c.conn_idle_timeout_s);
    CU_ASSERT_TRUE(c.conn_min_body_rate > 0);
    CU_ASSERT_EQUAL(c.log_format, LOG_FMT_TEXT);
    CU_ASSERT_PTR_NULL(c.log_file);
    char err[512];
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), 0);
    conf_free(&c);
}

static void file_sets_each_key(void)
{
    struct conf c;
    char err[512];
    CU_ASSERT_EQUAL_FATAL(conf_init_defaults(&c), 0);
    int rc = load_text(&c, "{\"connections\": {\"max\": 5000, \"per_client\": 100, "
                           "\"idle_timeout_s\": 7, \"header_timeout_s\": 3, "
                           "\"send_timeout_s\": 11, "
                           "\"min_body_rate\": 0}, \"log_format\": \"json\", "
                           "\"log_file\": \"/var/log/sg.log\"}", err, sizeof err);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc)
        fprintf(stderr, "%s\n", err);
    CU_ASSERT_EQUAL(c.conn_max, 5000);
    CU_ASSERT_EQUAL(c.conn_per_client, 100);
    CU_ASSERT_EQUAL(c.conn_idle_timeout_s, 7);
    CU_ASSERT_EQUAL(c.conn_header_timeout_s, 3);
    CU_ASSERT_EQUAL(c.conn_send_timeout_s, 11);
    CU_ASSERT_EQUAL(c.conn_min_body_rate, 0);
    CU_ASSERT_EQUAL(c.log_format, LOG_FMT_JSON);
    CU_ASSERT_STRING_EQUAL(c.log_file, "/var/log/sg.log");
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), 0);
    /* a later file's null goes back to stderr; only the keys given change */
    rc = load_text(&c, "{\"log_file\": null, \"connections\": {\"idle_timeout_s\": 9}}", err,
                   sizeof err);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NULL(c.log_file);
    CU_ASSERT_EQUAL(c.conn_idle_timeout_s, 9);
    CU_ASSERT_EQUAL(c.conn_header_timeout_s, 3);
    conf_free(&c);
}

static const struct {
    const char *name, *json, *want;
} bad[] = {
    { "not_object", "{\"connections\": 5}", "connections: must be an object" },
    { "unknown_key", "{\"connections\": {\"maxx\": 1}}",
      "connections: unknown key \"maxx\" (allowed: max, per_client, idle_timeout_s" },
    { "idle_zero", "{\"connections\": {\"idle_timeout_s\": 0}}",
      "connections.idle_timeout_s: must be an integer from 1 to 3600" },
    { "header_too_long", "{\"connections\": {\"header_timeout_s\": 3601}}",
      "connections.header_timeout_s: must be an integer from 1 to 3600" },
    { "max_negative", "{\"connections\": {\"max\": -1}}", "connections.max: must be an integer" },
    { "max_string", "{\"connections\": {\"max\": \"10\"}}", "connections.max: must be an integer" },
    { "log_format_bad", "{\"log_format\": \"xml\"}", "log_format: must be \"text\" or \"json\"" },
    { "log_file_empty", "{\"log_file\": \"\"}", "log_file: must be a non-empty path or null" },
};

static void bad_values_name_the_field(void)
{
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct conf c;
        char err[512] = "";
        CU_ASSERT_EQUAL_FATAL(conf_init_defaults(&c), 0);
        int rc = load_text(&c, bad[i].json, err, sizeof err);
        bool ok = rc == -1 && strstr(err, bad[i].want) != NULL;
        if (!ok)
            fprintf(stderr, "case %s: rc %d, message \"%s\" lacks \"%s\"\n", bad[i].name, rc, err,
                    bad[i].want);
        CU_ASSERT_TRUE(ok);
        CU_ASSERT_EQUAL(c.conn_idle_timeout_s, 30);   /* nothing half-applied */
        conf_free(&c);
    }
}

static void per_client_above_max_is_refused(void)
{
    struct conf c;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(conf_init_defaults(&c), 0);
    CU_ASSERT_EQUAL(load_text(&c, "{\"connections\": {\"max\": 10, \"per_client\": 11}}", err,
                              sizeof err), 0);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "connections.per_client: 11 is above connections.max"));
    conf_free(&c);
}

static void env_and_flags_set_the_log_options(void)
{
    struct conf c;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(conf_init_defaults(&c), 0);
    setenv("SHARDGATE_LOG_FORMAT", "json", 1);
    setenv("SHARDGATE_LOG_FILE", "/tmp/from-env.log", 1);
    CU_ASSERT_EQUAL(conf_apply_env(&c, err, sizeof err), 0);
    CU_ASSERT_EQUAL(c.log_format, LOG_FMT_JSON);
    CU_ASSERT_STRING_EQUAL(c.log_file, "/tmp/from-env.log");
    setenv("SHARDGATE_LOG_FORMAT", "yaml", 1);
    CU_ASSERT_EQUAL(conf_apply_env(&c, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "SHARDGATE_LOG_FORMAT: must be \"text\" or \"json\""));
    unsetenv("SHARDGATE_LOG_FORMAT");
    unsetenv("SHARDGATE_LOG_FILE");
    CU_ASSERT_EQUAL(conf_set_flag(&c, "log-format", "text", err, sizeof err), 0);
    CU_ASSERT_EQUAL(c.log_format, LOG_FMT_TEXT);
    CU_ASSERT_EQUAL(conf_set_flag(&c, "log-file", "/tmp/flag.log", err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(c.log_file, "/tmp/flag.log");
    CU_ASSERT_EQUAL(conf_set_flag(&c, "log-file", "", err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--log-file: must be a non-empty path"));
    conf_free(&c);
}

int register_tests(void);
int register_tests(void)
{
    CU_pSuite s = CU_add_suite("conf_connections", NULL, NULL);
    if (!s)
        return -1;
    CU_add_test(s, "defaults_bound_every_connection", defaults_bound_every_connection);
    CU_add_test(s, "file_sets_each_key", file_sets_each_key);
    CU_add_test(s, "bad_values_name_the_field", bad_values_name_the_field);
    CU_add_test(s, "per_client_above_max_is_refused", per_client_above_max_is_refused);
    CU_add_test(s, "env_and_flags_set_the_log_options", env_and_flags_set_the_log_options);
    return 0;
}
