/* tests/unit/test_conf_store.c - the directory store's settings: data_dir and
 * cold_url are exclusive whatever sets them (69019cc dropped --data silently
 * when --cold was given), state_dir from the file, the environment and the
 * flag, and mpu_max_age's syntax. */
#include "conf.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int register_tests(void);

static int load_json(struct conf *c, const char *json, char *err, size_t errlen)
{
    char path[] = "/tmp/sgcs.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -2;
    size_t n = strlen(json);
    int rc = write(fd, json, n) == (ssize_t)n ? 0 : -2;
    close(fd);
    if (rc == 0)
        rc = conf_load_file(c, path, err, errlen);
    unlink(path);
    return rc;
}

static void env_clear(void)
{
    unsetenv("SHARDGATE_DATA_DIR");
    unsetenv("SHARDGATE_COLD_URL");
    unsetenv("SHARDGATE_STATE_DIR");
    unsetenv("SHARDGATE_MPU_MAX_AGE");
}

static void defaults_state_dir_null_mpu_age_7_days_data_dir_implicit(void)
{
    struct conf c;
    CU_ASSERT_EQUAL_FATAL(conf_init_defaults(&c), 0);
    CU_ASSERT_PTR_NULL(c.state_dir);
    CU_ASSERT_EQUAL(c.mpu_max_age_s, 7u * 86400);
    CU_ASSERT_PTR_NULL(c.data_dir_from);
    char err[512];
    CU_ASSERT_EQUAL(conf_set_flag(&c, "cold", "http://127.0.0.1:9", err, sizeof err), 0);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), 0);   /* the default is no choice */
    conf_free(&c);
}

/* data_dir set by each source, cold_url by each source: always refused,
 * the message naming how data_dir was given. */
static void data_dir_and_cold_url_are_exclusive_from_every_source(void)
{
    static const struct {
        const char *name;
        const char *json;        /* NULL: none */
        const char *env_data;    /* NULL: unset */
        const char *flag_data;   /* NULL: none */
        const char *env_cold;
        const char *flag_cold;
        const char *want;        /* NULL: valid */
    } cases[] = {
        { "flags", NULL, NULL, "/d", NULL, "http://c:9", "--data and cold_url" },
        { "env_data_flag_cold", NULL, "/d", NULL, NULL, "http://c:9",
          "SHARDGATE_DATA_DIR and cold_url" },
        { "file_data_env_cold", "{\"data_dir\":\"/d\"}", NULL, NULL, "http://c:9", NULL,
          "data_dir and cold_url" },
        { "file_both", "{\"data_dir\":\"/d\",\"cold_url\":\"http://c:9\"}", NULL, NULL, NULL,
          NULL, "data_dir and cold_url" },
        { "file_cold_flag_data", "{\"cold_url\":\"http://c:9\"}", NULL, "/d", NULL, NULL,
          "--data and cold_url" },
        { "file_cold_null_then_data", "{\"cold_url\":null}", NULL, "/d", NULL, NULL, NULL },
        { "data_alone", NULL, NULL, "/d", NULL, NULL, NULL },
        { "cold_alone", NULL, NULL, NULL, NULL, "http://c:9", NULL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct conf c;
        char err[512] = "";
        env_clear();
        CU_ASSERT_EQUAL_FATAL(conf_init_defaults(&c), 0);
        int rc = 0;
        if (cases[i].json)
            rc |= load_json(&c, cases[i].json, err, sizeof err);
        if (cases[i].env_data)
            setenv("SHARDGATE_DATA_DIR", cases[i].env_data, 1);
        if (cases[i].env_cold)
            setenv("SHARDGATE_COLD_URL", cases[i].env_cold, 1);
        rc |= conf_apply_env(&c, err, sizeof err);
        if (cases[i].flag_data)
            rc |= conf_set_flag(&c, "data", cases[i].flag_data, err, sizeof err);
        if (cases[i].flag_cold)
            rc |= conf_set_flag(&c, "cold", cases[i].flag_cold, err, sizeof err);
        if (rc != 0)
            fprintf(stderr, "%s: setup: %s\n", cases[i].name, err);
        CU_ASSERT_EQUAL(rc, 0);
        rc = conf_validate(&c, err, sizeof err);
        if (cases[i].want) {
            if (rc == 0 || !strstr(err, cases[i].want) || !strstr(err, "exclusive"))
                fprintf(stderr, "%s: rc %d, message \"%s\"\n", cases[i].name, rc, err);
            CU_ASSERT_EQUAL(rc, -1);
            CU_ASSERT_PTR_NOT_NULL(strstr(err, cases[i].want));
        } else {
            if (rc != 0)
                fprintf(stderr, "%s: %s\n", cases[i].name, err);
            CU_ASSERT_EQUAL(rc, 0);
        }
        conf_free(&c);
    }
    env_clear();
}

static void state_dir_from_file_env_and_flag(void)
{
    struct conf c;
    char err[512] = "";
    env_clear();
    CU_ASSERT_EQUAL_FATAL(conf_init_defaults(&c), 0);
    CU_ASSERT_EQUAL(load_json(&c, "{\"state_dir\":\"/f\"}", err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(c.state_dir, "/f");
    setenv("SHARDGATE_STATE_DIR", "/e", 1);
    CU_ASSERT_EQUAL(conf_apply_env(&c, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(c.state_dir, "/e");
    CU_ASSERT_EQUAL(conf_set_flag(&c, "state-dir", "/g", err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(c.state_dir, "/g");
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), 0);
    CU_ASSERT_EQUAL(conf_set_flag(&c, "state-dir", "", err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--state-dir: must be a non-empty path"));
    CU_ASSERT_STRING_EQUAL(c.state_dir, "/g");
    CU_ASSERT_EQUAL(load_json(&c, "{\"state_dir\":null}", err, sizeof err), 0);
    CU_ASSERT_PTR_NULL(c.state_dir);
    CU_ASSERT_EQUAL(conf_set_flag(&c, "state-dir", "/g", err, sizeof err), 0);
    CU_ASSERT_EQUAL(conf_set_flag(&c, "cold", "http://c:9", err, sizeof err), 0);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "state_dir"));
    conf_free(&c);
    env_clear();
}

static void mpu_max_age_syntax_table(void)
{
    static const struct {
        const char *json;   /* the value as written in the file */
        int ok;
        unsigned want;
    } cases[] = {
        { "604800", 1, 604800 }, { "0", 1, 0 }, { "\"7d\"", 1, 604800 },
        { "\"12h\"", 1, 43200 }, { "\"30m\"", 1, 1800 }, { "\"45s\"", 1, 45 },
        { "\"3650d\"", 1, 3650u * 86400 }, { "\"90\"", 1, 90 },
        { "\"3651d\"", 0, 0 }, { "\"7w\"", 0, 0 }, { "\"d\"", 0, 0 }, { "\"\"", 0, 0 },
        { "\"-1\"", 0, 0 }, { "-1", 0, 0 }, { "\"1.5d\"", 0, 0 }, { "\"7 d\"", 0, 0 },
        { "\"7dd\"", 0, 0 }, { "true", 0, 0 }, { "315360001", 0, 0 },
        { "\"99999999999999999999s\"", 0, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct conf c;
        char json[128], err[512] = "";
        CU_ASSERT_EQUAL_FATAL(conf_init_defaults(&c), 0);
        snprintf(json, sizeof json, "{\"mpu_max_age\":%s}", cases[i].json);
        int rc = load_json(&c, json, err, sizeof err);
        if (cases[i].ok) {
            if (rc != 0 || c.mpu_max_age_s != cases[i].want)
                fprintf(stderr, "%s: rc %d, %u: %s\n", cases[i].json, rc, c.mpu_max_age_s, err);
            CU_ASSERT_EQUAL(rc, 0);
            CU_ASSERT_EQUAL(c.mpu_max_age_s, cases[i].want);
        } else {
            if (rc == 0 || !strstr(err, "mpu_max_age:"))
                fprintf(stderr, "%s: rc %d: %s\n", cases[i].json, rc, err);
            CU_ASSERT_EQUAL(rc, -1);
            CU_ASSERT_PTR_NOT_NULL(strstr(err, "mpu_max_age:"));
            CU_ASSERT_EQUAL(c.mpu_max_age_s, 7u * 86400);   /* unchanged */
        }
        conf_free(&c);
    }
    struct conf c;
    char err[512];
    CU_ASSERT_EQUAL_FATAL(conf_init_defaults(&c), 0);
    setenv("SHARDGATE_MPU_MAX_AGE", "36h", 1);
    CU_ASSERT_EQUAL(conf_apply_env(&c, err, sizeof err), 0);
    CU_ASSERT_EQUAL(c.mpu_max_age_s, 36u * 3600);
    setenv("SHARDGATE_MPU_MAX_AGE", "soon", 1);
    CU_ASSERT_EQUAL(conf_apply_env(&c, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "SHARDGATE_MPU_MAX_AGE: \"soon\""));
    unsetenv("SHARDGATE_MPU_MAX_AGE");
    conf_free(&c);
}

int register_tests(void)
{
    CU_pSuite s = CU_add_suite("conf_store", NULL, NULL);
    if (!s)
        return -1;
#define T(fn) CU_add_test(s, #fn, fn)
    T(defaults_state_dir_null_mpu_age_7_days_data_dir_implicit);
    T(data_dir_and_cold_url_are_exclusive_from_every_source);
    T(state_dir_from_file_env_and_flag);
    T(mpu_max_age_syntax_table);
#undef T
    return CU_get_error() == CUE_SUCCESS ? 0 : -1;
}
