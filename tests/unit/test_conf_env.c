/* tests/unit/test_conf_env.c - conf/: SHARDGATE_* variables and command-line
 * flags (each applies to its field or fails naming the variable or flag;
 * later sources override earlier ones) and conf_validate's refusals, each
 * naming its field. Mostly tables: one row per case. */
#include "conf_fixture.h"

/* ---- environment ---- */

struct env_case {
    const char *name;
    const char *vars[6][2];   /* name, value; unused rows are NULL */
    const char *want;         /* NULL: must succeed; otherwise a message fragment */
};

static const struct env_case env_cases[] = {
    { "no_vars_is_a_no_op", { { NULL, NULL } }, NULL },
    { "keys_together_set_root",
      { { "SHARDGATE_ACCESS_KEY", "ENVAK" }, { "SHARDGATE_SECRET_KEY", "ENVSK" } }, NULL },
    { "access_key_alone_is_refused", { { "SHARDGATE_ACCESS_KEY", "ENVAK" } },
      "must be set together (only SHARDGATE_ACCESS_KEY is set)" },
    { "secret_key_alone_is_refused", { { "SHARDGATE_SECRET_KEY", "ENVSK" } },
      "must be set together (only SHARDGATE_SECRET_KEY is set)" },
    { "empty_secret_key_is_refused",
      { { "SHARDGATE_ACCESS_KEY", "ENVAK" }, { "SHARDGATE_SECRET_KEY", "" } },
      "SHARDGATE_SECRET_KEY: must not be empty" },
    { "access_key_with_slash_is_refused",
      { { "SHARDGATE_ACCESS_KEY", "A/B" }, { "SHARDGATE_SECRET_KEY", "s" } },
      "SHARDGATE_ACCESS_KEY: must be non-empty" },
    { "listen_ok", { { "SHARDGATE_LISTEN", "[::1]:8443" } }, NULL },
    { "listen_bad", { { "SHARDGATE_LISTEN", "nowhere" } }, "SHARDGATE_LISTEN: \"nowhere\"" },
    { "data_dir_empty", { { "SHARDGATE_DATA_DIR", "" } }, "SHARDGATE_DATA_DIR: must be a non-empty path" },
    { "region_bad", { { "SHARDGATE_REGION", "us east" } }, "SHARDGATE_REGION: must be 1 to 64" },
    { "log_level_bad", { { "SHARDGATE_LOG_LEVEL", "loud" } }, "SHARDGATE_LOG_LEVEL: must be one of" },
    { "all_ok",
      { { "SHARDGATE_ACCESS_KEY", "ENVAK" }, { "SHARDGATE_SECRET_KEY", "ENVSK" },
        { "SHARDGATE_LISTEN", "[::1]:8443" }, { "SHARDGATE_DATA_DIR", "/d" },
        { "SHARDGATE_REGION", "ap-south-1" }, { "SHARDGATE_LOG_LEVEL", "debug" } },
      NULL },
    { "one_bad_var_among_good_ones",
      { { "SHARDGATE_LISTEN", "[::1]:8443" }, { "SHARDGATE_DATA_DIR", "/d" },
        { "SHARDGATE_LOG_LEVEL", "trace" } },
      "SHARDGATE_LOG_LEVEL" },
    { "cold_url_ok", { { "SHARDGATE_COLD_URL", "http://minio:9000" } }, NULL },
    { "cold_url_https_ipv6", { { "SHARDGATE_COLD_URL", "https://[::1]/" } }, NULL },
    { "cold_url_empty_is_refused", { { "SHARDGATE_COLD_URL", "" } },
      "SHARDGATE_COLD_URL: must be http://HOST[:PORT]" },
    { "cold_url_with_path", { { "SHARDGATE_COLD_URL", "http://minio:9000/data" } },
      "SHARDGATE_COLD_URL: must be http://" },
    { "cache_dir_ok", { { "SHARDGATE_CACHE_DIR", "/nvme/sg" } }, NULL },
    { "cache_dir_empty", { { "SHARDGATE_CACHE_DIR", "" } },
      "SHARDGATE_CACHE_DIR: must be a non-empty path" },
    { "cache_size_bytes", { { "SHARDGATE_CACHE_SIZE", "1073741824" } }, NULL },
    { "cache_size_fraction", { { "SHARDGATE_CACHE_SIZE", "1.5GiB" } }, NULL },
    { "cache_size_decimal_unit", { { "SHARDGATE_CACHE_SIZE", "500MB" } }, NULL },
    { "cache_size_too_small", { { "SHARDGATE_CACHE_SIZE", "1023K" } },
      "SHARDGATE_CACHE_SIZE: must be at least 1 MiB" },
    { "cache_size_junk", { { "SHARDGATE_CACHE_SIZE", "lots" } }, "SHARDGATE_CACHE_SIZE:" },
    { "cache_size_empty", { { "SHARDGATE_CACHE_SIZE", "" } }, "SHARDGATE_CACHE_SIZE:" },
    { "consistency_immutable", { { "SHARDGATE_CONSISTENCY", "immutable" } }, NULL },
    { "consistency_always", { { "SHARDGATE_CONSISTENCY", "always" } }, NULL },
    { "consistency_ttl", { { "SHARDGATE_CONSISTENCY", "ttl:300" } }, NULL },
    { "consistency_ttl_zero", { { "SHARDGATE_CONSISTENCY", "ttl:0" } },
      "SHARDGATE_CONSISTENCY: must be \"immutable\", \"always\" or \"ttl:SECONDS\"" },
    { "consistency_bare_number", { { "SHARDGATE_CONSISTENCY", "60" } }, "SHARDGATE_CONSISTENCY:" },
    { "all_new_ok",
      { { "SHARDGATE_COLD_URL", "https://s3.amazonaws.com" }, { "SHARDGATE_CACHE_DIR", "/c" },
        { "SHARDGATE_CACHE_SIZE", "2T" }, { "SHARDGATE_CONSISTENCY", "ttl:31536000" } },
      NULL },
    { "one_bad_new_var_among_good_ones",
      { { "SHARDGATE_COLD_URL", "https://s3.amazonaws.com" }, { "SHARDGATE_CACHE_DIR", "/c" },
        { "SHARDGATE_CACHE_SIZE", "2X" } },
      "SHARDGATE_CACHE_SIZE" },
};

/* What consistency_parse makes of `s` (the tests' own reading of the spec). */
static int want_consistency(const char *s, enum conf_consistency *mode, unsigned *ttl)
{
    *ttl = 0;
    if (strcmp(s, "immutable") == 0)
        *mode = CONF_CONSISTENCY_IMMUTABLE;
    else if (strcmp(s, "always") == 0)
        *mode = CONF_CONSISTENCY_ALWAYS;
    else if (strncmp(s, "ttl:", 4) == 0) {
        *mode = CONF_CONSISTENCY_TTL;
        *ttl = (unsigned)strtoul(s + 4, NULL, 10);
    } else
        return -1;
    return 0;
}

/* Looks `var` up in the case; NULL when the case does not set it. */
static const char *env_case_get(const struct env_case *ec, const char *var)
{
    for (size_t j = 0; j < 6 && ec->vars[j][0] != NULL; j++)
        if (strcmp(ec->vars[j][0], var) == 0)
            return ec->vars[j][1];
    return NULL;
}

static void env_cases_apply_or_fail_naming_variable(void)
{
    for (size_t i = 0; i < sizeof env_cases / sizeof env_cases[0]; i++) {
        const struct env_case *ec = &env_cases[i];
        struct conf c;
        char err[1024] = "untouched";
        env_clear();
        for (size_t j = 0; j < 6 && ec->vars[j][0] != NULL; j++)
            setenv(ec->vars[j][0], ec->vars[j][1], 1);
        defaults(&c);
        int rc = conf_apply_env(&c, err, sizeof err);
        if (ec->want != NULL) {
            CHECK_CASE(rc == -1, ec->name, "rc %d", rc);
            CHECK_CASE(strstr(err, ec->want) != NULL, ec->name, "message \"%s\" lacks \"%s\"",
                       err, ec->want);
            CHECK_CASE(is_default(&c), ec->name, "a failed env merge changed the conf");
        } else {
            CHECK_CASE(rc == 0, ec->name, "rc %d: %s", rc, err);
            const char *ak = env_case_get(ec, "SHARDGATE_ACCESS_KEY");
            if (ak != NULL) {
                CHECK_CASE(strcmp(c.users[0].access_key, ak) == 0, ec->name, "access key");
                CHECK_CASE(strcmp(c.users[0].secret_key,
                                  env_case_get(ec, "SHARDGATE_SECRET_KEY")) == 0,
                           ec->name, "secret key");
                CHECK_CASE(!c.default_credentials, ec->name, "default_credentials still set");
                CHECK_CASE(strcmp(c.users[0].name, "root") == 0, ec->name, "name kept");
            } else {
                CHECK_CASE(c.default_credentials, ec->name, "default_credentials cleared");
            }
            const char *v = env_case_get(ec, "SHARDGATE_LISTEN");
            if (v != NULL)
                CHECK_CASE(strcmp(c.listen_addr, "::1") == 0 && c.listen_port == 8443,
                           ec->name, "listen %s:%u", c.listen_addr, (unsigned)c.listen_port);
            v = env_case_get(ec, "SHARDGATE_DATA_DIR");
            if (v != NULL)
                CHECK_CASE(strcmp(c.data_dir, v) == 0, ec->name, "data_dir");
            v = env_case_get(ec, "SHARDGATE_REGION");
            if (v != NULL)
                CHECK_CASE(strcmp(c.region, v) == 0, ec->name, "region");
            v = env_case_get(ec, "SHARDGATE_LOG_LEVEL");
            if (v != NULL)
                CHECK_CASE(c.log_level == LOG_LVL_DEBUG, ec->name, "log level");
            v = env_case_get(ec, "SHARDGATE_COLD_URL");
            CHECK_CASE(v != NULL ? c.cold_url != NULL && strcmp(c.cold_url, v) == 0
                                 : c.cold_url == NULL,
                       ec->name, "cold_url");
            v = env_case_get(ec, "SHARDGATE_CACHE_DIR");
            CHECK_CASE(v != NULL ? c.cache_dir != NULL && strcmp(c.cache_dir, v) == 0
                                 : c.cache_dir == NULL,
                       ec->name, "cache_dir");
            v = env_case_get(ec, "SHARDGATE_CACHE_SIZE");
            uint64_t size = 10ull << 30;
            if (v != NULL)
                CHECK_CASE(conf_size_parse(v, &size) == 0, ec->name, "size %s", v);
            CHECK_CASE(c.cache_size == size, ec->name, "cache_size %llu",
                       (unsigned long long)c.cache_size);
            v = env_case_get(ec, "SHARDGATE_CONSISTENCY");
            enum conf_consistency mode = CONF_CONSISTENCY_TTL;
            unsigned ttl = 60;
            if (v != NULL)
                CHECK_CASE(want_consistency(v, &mode, &ttl) == 0, ec->name, "consistency %s", v);
            CHECK_CASE(c.consistency == mode && c.consistency_ttl_s == ttl, ec->name,
                       "consistency %d ttl %u", (int)c.consistency, c.consistency_ttl_s);
            CHECK_CASE(conf_validate(&c, err, sizeof err) == 0, ec->name, "validate: %s", err);
        }
        conf_free(&c);
    }
    env_clear();
}

/* The environment overrides users[0] from the file and keeps the others. */
static void env_keys_override_first_file_user_only(void)
{
    struct conf c;
    char err[512];
    defaults(&c);
    const char *json = "{\"users\":[" U1 ",{\"name\":\"b\",\"access_key\":\"AK2\","
                       "\"secret_key\":\"s2\"," PERM_R "}]}";
    CU_ASSERT_EQUAL_FATAL(load_text(&c, json, 0600, err, sizeof err), 0);
    env_clear();
    setenv("SHARDGATE_ACCESS_KEY", "NEWAK", 1);
    setenv("SHARDGATE_SECRET_KEY", "NEWSK", 1);
    CU_ASSERT_EQUAL(conf_apply_env(&c, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(c.users[0].name, "a");
    CU_ASSERT_STRING_EQUAL(c.users[0].access_key, "NEWAK");
    CU_ASSERT_STRING_EQUAL(c.users[0].secret_key, "NEWSK");
    CU_ASSERT_STRING_EQUAL(c.users[1].access_key, "AK2");
    /* an env key equal to another user's key is caught by the final check */
    setenv("SHARDGATE_ACCESS_KEY", "AK2", 1);
    CU_ASSERT_EQUAL(conf_apply_env(&c, err, sizeof err), 0);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "users[1].access_key: same as users[0].access_key"));
    env_clear();
    conf_free(&c);
}

/* ---- flags ---- */

struct flag_case {
    const char *name;
    const char *flag;
    const char *value;
    const char *want;   /* NULL: must succeed */
};

static const struct flag_case flag_cases[] = {
    { "listen_ipv4", "listen", "192.168.1.10:80", NULL },
    { "listen_bad", "listen", "192.168.1.10", "--listen: \"192.168.1.10\" must be ADDR:PORT" },
    { "data", "data", "/mnt/cold", NULL },
    { "data_empty", "data", "", "--data: must be a non-empty path" },
    { "region", "region", "eu-central-1", NULL },
    { "region_bad", "region", "eu/central", "--region: must be 1 to 64" },
    { "vhost_domain", "vhost-domain", "s3.test", NULL },
    { "vhost_domain_empty_turns_it_off", "vhost-domain", "", NULL },
    { "threads_max", "threads", "256", NULL },
    { "threads_zero", "threads", "0", NULL },
    { "threads_too_many", "threads", "257", "--threads: must be an integer from 0 to 256" },
    { "threads_negative", "threads", "-1", "--threads: must be an integer from 0 to 256" },
    { "threads_space", "threads", " 4", "--threads: must be an integer from 0 to 256" },
    { "threads_suffix", "threads", "4k", "--threads: must be an integer from 0 to 256" },
    { "threads_empty", "threads", "", "--threads: must be an integer from 0 to 256" },
    { "threads_huge", "threads", "99999999999999999999", "--threads: must be an integer" },
    { "log_level", "log-level", "error", NULL },
    { "log_level_bad", "log-level", "quiet", "--log-level: must be one of" },
    { "missing_value", "listen", NULL, "--listen: requires a value" },
    { "unknown_flag", "port", "80",
      "unknown flag \"--port\" (allowed: --listen, --data, --region, --vhost-domain, "
      "--threads, --log-level, --cold, --cache-dir, --cache-size, --consistency, "
      "--state-dir" },
    { "underscore_spelling_is_unknown", "log_level", "info", "unknown flag \"--log_level\"" },
    { "cold_http", "cold", "http://127.0.0.1:9100", NULL },
    { "cold_https_slash", "cold", "https://storage.example.net/", NULL },
    { "cold_empty", "cold", "", "--cold: must be http://HOST[:PORT] or https://HOST[:PORT]" },
    { "cold_path", "cold", "http://h/p", "--cold: must be http://" },
    { "cold_no_scheme", "cold", "minio:9000", "--cold: must be http://" },
    { "cold_missing_value", "cold", NULL, "--cold: requires a value" },
    { "cache_dir", "cache-dir", "/nvme/sg", NULL },
    { "cache_dir_empty", "cache-dir", "", "--cache-dir: must be a non-empty path" },
    { "cache_size_gib", "cache-size", "64GiB", NULL },
    { "cache_size_exactly_1mib", "cache-size", "1MiB", NULL },
    { "cache_size_1mb_is_too_small", "cache-size", "1MB", "--cache-size: must be at least 1 MiB" },
    { "cache_size_negative", "cache-size", "-10G", "--cache-size: must be at least 1 MiB" },
    { "cache_size_json_like", "cache-size", "\"10G\"", "--cache-size:" },
    { "consistency_immutable", "consistency", "immutable", NULL },
    { "consistency_ttl_max", "consistency", "ttl:31536000", NULL },
    { "consistency_ttl_too_long", "consistency", "ttl:31536001",
      "--consistency: must be \"immutable\", \"always\" or \"ttl:SECONDS\" with SECONDS from 1 "
      "to 31536000" },
    { "consistency_ttl_space", "consistency", "ttl: 60", "--consistency:" },
    { "consistency_empty", "consistency", "", "--consistency:" },
    { "cache_dir_underscore_is_unknown", "cache_dir", "/x", "unknown flag \"--cache_dir\"" },
};

static void flag_cases_apply_or_fail_naming_flag(void)
{
    for (size_t i = 0; i < sizeof flag_cases / sizeof flag_cases[0]; i++) {
        const struct flag_case *fc = &flag_cases[i];
        struct conf c;
        char err[1024] = "untouched";
        defaults(&c);
        if (strcmp(fc->flag, "vhost-domain") == 0 && fc->value && fc->value[0] == '\0')
            CU_ASSERT_EQUAL(conf_set_flag(&c, "vhost-domain", "x.test", err, sizeof err), 0);
        int rc = conf_set_flag(&c, fc->flag, fc->value, err, sizeof err);
        if (fc->want != NULL) {
            CHECK_CASE(rc == -1, fc->name, "rc %d", rc);
            CHECK_CASE(strstr(err, fc->want) != NULL, fc->name, "message \"%s\" lacks \"%s\"",
                       err, fc->want);
            CHECK_CASE(is_default(&c), fc->name, "a refused flag changed the conf");
        } else {
            CHECK_CASE(rc == 0, fc->name, "rc %d: %s", rc, err);
            CHECK_CASE(conf_validate(&c, err, sizeof err) == 0, fc->name, "validate: %s", err);
        }
        conf_free(&c);
    }
}

static void flags_set_the_matching_fields(void)
{
    struct conf c;
    char err[512];
    defaults(&c);
    CU_ASSERT_EQUAL(conf_set_flag(&c, "listen", "[fe80::1]:81", err, sizeof err), 0);
    CU_ASSERT_EQUAL(conf_set_flag(&c, "data", "/mnt/cold", err, sizeof err), 0);
    CU_ASSERT_EQUAL(conf_set_flag(&c, "region", "eu-central-1", err, sizeof err), 0);
    CU_ASSERT_EQUAL(conf_set_flag(&c, "vhost-domain", "s3.test", err, sizeof err), 0);
    CU_ASSERT_EQUAL(conf_set_flag(&c, "threads", "16", err, sizeof err), 0);
    CU_ASSERT_EQUAL(conf_set_flag(&c, "log-level", "warn", err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(c.listen_addr, "fe80::1");
    CU_ASSERT_EQUAL(c.listen_port, 81);
    CU_ASSERT_STRING_EQUAL(c.data_dir, "/mnt/cold");
    CU_ASSERT_STRING_EQUAL(c.region, "eu-central-1");
    CU_ASSERT_STRING_EQUAL(c.vhost_domain, "s3.test");
    CU_ASSERT_EQUAL(c.threads, 16);
    CU_ASSERT_EQUAL(c.log_level, LOG_LVL_WARN);
    CU_ASSERT_EQUAL(conf_set_flag(&c, "vhost-domain", "", err, sizeof err), 0);
    CU_ASSERT_PTR_NULL(c.vhost_domain);
    conf_free(&c);
}

/* Flags override what the file and the environment said. */
static void new_flags_override_file_and_env(void)
{
    struct conf c;
    char err[512];
    defaults(&c);
    CU_ASSERT_EQUAL_FATAL(load_text(&c, "{\"cold_url\":\"http://file:1\",\"cache\":{"
                                        "\"dir\":\"/file\",\"size\":\"2G\","
                                        "\"consistency\":\"always\"}}",
                                    0600, err, sizeof err), 0);
    env_clear();
    setenv("SHARDGATE_COLD_URL", "http://env:2", 1);
    setenv("SHARDGATE_CACHE_DIR", "/env", 1);
    setenv("SHARDGATE_CACHE_SIZE", "3G", 1);
    setenv("SHARDGATE_CONSISTENCY", "immutable", 1);
    CU_ASSERT_EQUAL(conf_apply_env(&c, err, sizeof err), 0);
    env_clear();
    CU_ASSERT_STRING_EQUAL(c.cold_url, "http://env:2");
    CU_ASSERT_STRING_EQUAL(c.cache_dir, "/env");
    CU_ASSERT_EQUAL(c.cache_size, 3ull << 30);
    CU_ASSERT_EQUAL(c.consistency, CONF_CONSISTENCY_IMMUTABLE);
    CU_ASSERT_EQUAL(conf_set_flag(&c, "cold", "https://[fe80::2]:8443", err, sizeof err), 0);
    CU_ASSERT_EQUAL(conf_set_flag(&c, "cache-dir", "/flag", err, sizeof err), 0);
    CU_ASSERT_EQUAL(conf_set_flag(&c, "cache-size", "1.5GiB", err, sizeof err), 0);
    CU_ASSERT_EQUAL(conf_set_flag(&c, "consistency", "ttl:5", err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(c.cold_url, "https://[fe80::2]:8443");
    CU_ASSERT_STRING_EQUAL(c.cache_dir, "/flag");
    CU_ASSERT_EQUAL(c.cache_size, 1610612736u);
    CU_ASSERT_EQUAL(c.consistency, CONF_CONSISTENCY_TTL);
    CU_ASSERT_EQUAL(c.consistency_ttl_s, 5);
    /* a refused flag leaves the previous value */
    CU_ASSERT_EQUAL(conf_set_flag(&c, "cache-size", "1.5", err, sizeof err), -1);
    CU_ASSERT_EQUAL(c.cache_size, 1610612736u);
    CU_ASSERT_EQUAL(conf_set_flag(&c, "consistency", "ttl:0", err, sizeof err), -1);
    CU_ASSERT_EQUAL(c.consistency_ttl_s, 5);
    CU_ASSERT_EQUAL(conf_set_flag(&c, "cold", "", err, sizeof err), -1);
    CU_ASSERT_STRING_EQUAL(c.cold_url, "https://[fe80::2]:8443");
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), 0);
    conf_free(&c);
}

/* ---- conf_validate ---- */

struct validate_case {
    const char *name;
    void (*mutate)(struct conf *c);
    const char *want;
};

static void mut_port_zero(struct conf *c) { c->listen_port = 0; }
static void mut_data_dir_empty(struct conf *c) { c->data_dir[0] = '\0'; }
static void mut_region_empty(struct conf *c) { c->region[0] = '\0'; }
static void mut_no_users(struct conf *c) { c->n_users = 0; }
static void mut_empty_secret(struct conf *c) { c->users[0].secret_key[0] = '\0'; }
static void mut_threads_high(struct conf *c) { c->threads = 1000; }
static void mut_duplicate_keys(struct conf *c)
{
    struct conf_user *u = realloc(c->users, 2 * sizeof *u);
    CU_ASSERT_PTR_NOT_NULL_FATAL(u);
    c->users = u;
    u[1].name = strdup("two");
    u[1].access_key = strdup(CONF_DEFAULT_ACCESS_KEY);
    u[1].secret_key = strdup("other");
    u[1].perms = NULL;
    u[1].n_perms = 0;
    c->n_users = 2;
}

static void mut_low_equals_high(struct conf *c) { c->cache_low_pct = c->cache_high_pct = 90; }
static void mut_low_above_high(struct conf *c) { c->cache_high_pct = 50; }
static void mut_low_zero(struct conf *c) { c->cache_low_pct = 0; }
static void mut_high_one(struct conf *c) { c->cache_high_pct = 1; c->cache_low_pct = 1; }
static void mut_high_over_100(struct conf *c) { c->cache_high_pct = 101; }
static void mut_cache_small(struct conf *c) { c->cache_size = 1024 * 1024 - 1; }
static void mut_fill_workers_zero(struct conf *c) { c->cache_fill_workers = 0; }
static void mut_fill_workers_high(struct conf *c) { c->cache_fill_workers = 257; }
static void mut_wait_short(struct conf *c) { c->cache_wait_ms = 99; }
static void mut_wait_long(struct conf *c) { c->cache_wait_ms = 600001; }
static void mut_ttl_zero(struct conf *c) { c->consistency_ttl_s = 0; }
static void mut_ttl_long(struct conf *c) { c->consistency_ttl_s = 31536001; }
static void mut_consistency_bogus(struct conf *c) { c->consistency = (enum conf_consistency)7; }
static void mut_spool_empty(struct conf *c) { c->spool_dir[0] = '\0'; }
static void mut_connect_zero(struct conf *c) { c->cold_connect_timeout_ms = 0; }
static void mut_request_long(struct conf *c) { c->cold_request_timeout_ms = 3600001; }
static void mut_retries_high(struct conf *c) { c->cold_retries = 11; }
static void mut_cold_url_bad(struct conf *c) { c->cold_url = strdup("ftp://x"); }
static void mut_cache_dir_empty(struct conf *c) { c->cache_dir = strdup(""); }
static void mut_ca_path_empty(struct conf *c) { c->cold_ca_path = strdup(""); }

/* Appends a bucket entry; `cold` may be NULL. */
static struct conf_bucket *add_bucket(struct conf *c, const char *name, const char *cold)
{
    struct conf_bucket *bs = realloc(c->buckets, (c->n_buckets + 1) * sizeof *bs);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bs);
    c->buckets = bs;
    struct conf_bucket *b = &bs[c->n_buckets++];
    memset(b, 0, sizeof *b);
    b->name = strdup(name);
    b->cold_bucket = cold != NULL ? strdup(cold) : NULL;
    return b;
}

static void mut_bucket_ttl_zero(struct conf *c)
{
    struct conf_bucket *b = add_bucket(c, "b1", NULL);
    b->has_consistency = true;
    b->consistency = CONF_CONSISTENCY_TTL;
    b->ttl_s = 0;
}
static void mut_bucket_cold_bad(struct conf *c) { add_bucket(c, "b1", "Bad_Name"); }
static void mut_bucket_cold_alias_of_name(struct conf *c)
{
    add_bucket(c, "data", NULL);
    add_bucket(c, "data2", "data");
}
static void mut_bucket_cold_alias_of_cold(struct conf *c)
{
    add_bucket(c, "one", "shared");
    add_bucket(c, "two", "shared");
}

static const struct validate_case validate_cases[] = {
    { "port_zero", mut_port_zero, "listen: port must be from 1 to 65535" },
    { "data_dir_empty", mut_data_dir_empty, "data_dir: must not be empty" },
    { "region_empty", mut_region_empty, "region: must not be empty" },
    { "no_users", mut_no_users, "users: at least one user is required" },
    { "empty_secret", mut_empty_secret, "users[0].secret_key: must not be empty" },
    { "threads_out_of_range", mut_threads_high, "threads: must be an integer from 0 to 256" },
    { "duplicate_access_keys", mut_duplicate_keys,
      "users[1].access_key: same as users[0].access_key" },
    { "low_watermark_equals_high", mut_low_equals_high,
      "cache.low_watermark: must be an integer from 1 to 89, below cache.high_watermark (90)" },
    { "low_watermark_above_high", mut_low_above_high,
      "cache.low_watermark: must be an integer from 1 to 49, below cache.high_watermark (50)" },
    { "low_watermark_zero", mut_low_zero, "cache.low_watermark: must be an integer from 1 to 89" },
    { "high_watermark_one", mut_high_one, "cache.high_watermark: must be an integer from 2 to 100" },
    { "high_watermark_over_100", mut_high_over_100, "cache.high_watermark:" },
    { "cache_size_below_1mib", mut_cache_small, "cache.size: must be at least 1 MiB" },
    { "fill_workers_zero", mut_fill_workers_zero, "cache.fill_workers: must be an integer from 1 to 256" },
    { "fill_workers_high", mut_fill_workers_high, "cache.fill_workers:" },
    { "wait_short", mut_wait_short, "cache.wait_timeout_ms: must be an integer from 100 to 600000" },
    { "wait_long", mut_wait_long, "cache.wait_timeout_ms:" },
    { "ttl_zero", mut_ttl_zero, "consistency: must be \"immutable\", \"always\" or \"ttl:SECONDS\"" },
    { "ttl_long", mut_ttl_long, "consistency: must be" },
    { "consistency_bogus", mut_consistency_bogus, "consistency: must be" },
    { "spool_dir_empty", mut_spool_empty, "spool_dir: must not be empty" },
    { "connect_timeout_zero", mut_connect_zero, "cold_connect_timeout_ms: must be an integer from 1 to 600000" },
    { "request_timeout_long", mut_request_long, "cold_request_timeout_ms: must be an integer from 1 to 3600000" },
    { "retries_high", mut_retries_high, "cold_retries: must be an integer from 0 to 10" },
    { "cold_url_bad", mut_cold_url_bad, "cold_url: must be http://" },
    { "cache_dir_empty", mut_cache_dir_empty, "cache.dir: must be a non-empty path or null" },
    { "ca_path_empty", mut_ca_path_empty, "cold_ca_path: must be a non-empty path or null" },
    { "bucket_ttl_zero", mut_bucket_ttl_zero, "buckets.b1.consistency: must be" },
    { "bucket_cold_bad", mut_bucket_cold_bad, "buckets.b1.cold_bucket: must be null or an S3 bucket name" },
    { "bucket_cold_alias_of_name", mut_bucket_cold_alias_of_name,
      "buckets.data2.cold_bucket: \"data\" is already the cold bucket of buckets.data" },
    { "bucket_cold_alias_of_cold", mut_bucket_cold_alias_of_cold,
      "buckets.one.cold_bucket: \"shared\" is already the cold bucket of buckets.two" },
};

static void validate_cases_fail_naming_field(void)
{
    for (size_t i = 0; i < sizeof validate_cases / sizeof validate_cases[0]; i++) {
        const struct validate_case *vc = &validate_cases[i];
        struct conf c;
        char err[512] = "";
        defaults(&c);
        size_t n = c.n_users;
        vc->mutate(&c);
        int rc = conf_validate(&c, err, sizeof err);
        CHECK_CASE(rc == -1, vc->name, "rc %d", rc);
        CHECK_CASE(strstr(err, vc->want) != NULL, vc->name, "message \"%s\" lacks \"%s\"", err,
                   vc->want);
        if (c.n_users == 0)
            c.n_users = n;   /* so conf_free releases the user it still owns */
        conf_free(&c);
    }
}

/* low_watermark < high_watermark is checked once every source has spoken,
 * so the file may name them in either order or in separate files. */
static void watermarks_are_checked_together_at_validate(void)
{
    struct conf c;
    char err[512];
    defaults(&c);
    CU_ASSERT_EQUAL_FATAL(load_text(&c, "{\"cache\":{\"high_watermark\":70}}", 0600, err,
                                    sizeof err), 0);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cache.low_watermark: must be an integer from 1 to 69, "
                                      "below cache.high_watermark (70)"));
    CU_ASSERT_EQUAL_FATAL(load_text(&c, "{\"cache\":{\"low_watermark\":60}}", 0600, err,
                                    sizeof err), 0);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(load_text(&c, "{\"cache\":{\"low_watermark\":98,"
                                        "\"high_watermark\":99}}", 0600, err, sizeof err), 0);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), 0);
    CU_ASSERT_EQUAL(c.cache_low_pct, 98);
    CU_ASSERT_EQUAL(c.cache_high_pct, 99);
    CU_ASSERT_EQUAL_FATAL(load_text(&c, "{\"cache\":{\"low_watermark\":99,"
                                        "\"high_watermark\":99}}", 0600, err, sizeof err), 0);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cache.low_watermark"));
    conf_free(&c);
}

static void mut_perm_bad_bucket(struct conf *c)
{
    free(c->users[0].perms[0].bucket);
    c->users[0].perms[0].bucket = strdup("a/b");
}

static void validate_refuses_bad_permission_bucket(void)
{
    struct conf c;
    char err[512];
    defaults(&c);
    mut_perm_bad_bucket(&c);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "users[0].permissions"));
    conf_free(&c);
}

static const struct test_entry env_tests[] = {
    T(env_cases_apply_or_fail_naming_variable),
    T(env_keys_override_first_file_user_only),
};

static const struct test_entry flag_tests[] = {
    T(flag_cases_apply_or_fail_naming_flag),
    T(flags_set_the_matching_fields),
    T(new_flags_override_file_and_env),
};

static const struct test_entry validate_tests[] = {
    T(validate_cases_fail_naming_field),
    T(validate_refuses_bad_permission_bucket),
    T(watermarks_are_checked_together_at_validate),
};

int register_tests(void)
{
    if (ADD_SUITE("conf_env", env_tests) != 0 || ADD_SUITE("conf_flags", flag_tests) != 0
        || ADD_SUITE("conf_validate", validate_tests) != 0)
        return -1;
    return 0;
}
