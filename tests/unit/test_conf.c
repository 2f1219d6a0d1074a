/* tests/unit/test_conf.c - conf/: defaults, the JSON file (every refusal names
 * its field), SHARDGATE_* variables, flags, the chmod-600 rule for files with
 * secret keys, and the final validation. Mostly tables: one row per case. */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf.h"

int register_tests(void);

/* Records a failed check with the case name, so one table test reports which
 * row broke. */
#define CHECK_CASE(cond, name, ...)                                                   \
    do {                                                                             \
        char chk_msg_[2048];                                                         \
        snprintf(chk_msg_, sizeof chk_msg_, __VA_ARGS__);                            \
        char chk_full_[4096];                                                        \
        snprintf(chk_full_, sizeof chk_full_, "[%s] %s", (name), chk_msg_);          \
        CU_assertImplementation((cond) ? CU_TRUE : CU_FALSE, __LINE__, chk_full_,   \
                                __FILE__, "", CU_FALSE);                             \
    } while (0)

static const char *tmp_dir(void)
{
    const char *d = getenv("TMPDIR");
    return d != NULL && d[0] != '\0' ? d : "/tmp";
}

/* Writes `text` to a new temporary file with `mode`; the name goes to `path`.
 * Returns 0, or -1 (with a CUnit failure) when the file cannot be made. */
static int tmp_write(const char *text, mode_t mode, char *path, size_t pathlen)
{
    snprintf(path, pathlen, "%s/test_conf.XXXXXX", tmp_dir());
    int fd = mkstemp(path);
    if (fd < 0) {
        CU_FAIL("mkstemp");
        return -1;
    }
    size_t len = strlen(text);
    ssize_t w = write(fd, text, len);
    int rc = (w == (ssize_t)len && fchmod(fd, mode) == 0) ? 0 : -1;
    close(fd);
    if (rc != 0) {
        unlink(path);
        CU_FAIL("writing the temporary config");
    }
    return rc;
}

/* Loads `text` as a config file with `mode` into `c`. */
static int load_text(struct conf *c, const char *text, mode_t mode, char *err, size_t errlen)
{
    char path[512];
    if (tmp_write(text, mode, path, sizeof path) != 0)
        return -2;
    int rc = conf_load_file(c, path, err, errlen);
    unlink(path);
    return rc;
}

static void defaults(struct conf *c)
{
    CU_ASSERT_FATAL(conf_init_defaults(c) == 0);
}

/* Drops every user (as a conf with no users at all), through conf_free's
 * own path: free a copy holding only the users. */
static void users_free_for_test(struct conf *c)
{
    struct conf only;
    memset(&only, 0, sizeof only);
    only.users = c->users;
    only.n_users = c->n_users;
    conf_free(&only);
    c->users = NULL;
    c->n_users = 0;
}

static void env_clear(void)
{
    static const char *const vars[] = { "SHARDGATE_ACCESS_KEY", "SHARDGATE_SECRET_KEY",
                                        "SHARDGATE_LISTEN", "SHARDGATE_DATA_DIR",
                                        "SHARDGATE_REGION", "SHARDGATE_LOG_LEVEL",
                                        "SHARDGATE_COLD_URL", "SHARDGATE_CACHE_DIR",
                                        "SHARDGATE_CACHE_SIZE", "SHARDGATE_CONSISTENCY" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

/* True when `c` still holds exactly the defaults (used to prove a failed
 * merge changed nothing). */
static int is_default(const struct conf *c)
{
    return strcmp(c->listen_addr, "127.0.0.1") == 0 && c->listen_port == 9000 && c->threads == 0
           && strcmp(c->data_dir, "var/data") == 0 && strcmp(c->region, "us-east-1") == 0
           && c->vhost_domain == NULL && c->n_users == 1
           && strcmp(c->users[0].name, "root") == 0
           && strcmp(c->users[0].access_key, CONF_DEFAULT_ACCESS_KEY) == 0
           && strcmp(c->users[0].secret_key, CONF_DEFAULT_SECRET_KEY) == 0
           && c->default_credentials && c->max_xml_body == 2u * 1024 * 1024
           && c->max_header_bytes == 16u * 1024 && c->log_level == LOG_LVL_INFO
           && c->shutdown_grace_s == 30 && c->cold_url == NULL && c->cold_ca_path == NULL
           && c->cold_connect_timeout_ms == 1000 && c->cold_request_timeout_ms == 30000
           && c->cold_retries == 2 && strcmp(c->spool_dir, "/tmp") == 0 && c->cache_dir == NULL
           && c->cache_size == 10ull << 30 && c->cache_high_pct == 90 && c->cache_low_pct == 80
           && c->cache_fill_workers == 8 && c->cache_wait_ms == 30000 && !c->cache_on_write
           && c->consistency == CONF_CONSISTENCY_TTL && c->consistency_ttl_s == 60
           && !c->metrics_public && c->sigv2 && c->n_buckets == 0;
}

/* ---- defaults ---- */

static void defaults_match_documented_values(void)
{
    struct conf c;
    defaults(&c);
    CU_ASSERT_STRING_EQUAL(c.listen_addr, "127.0.0.1");
    CU_ASSERT_EQUAL(c.listen_port, 9000);
    CU_ASSERT_EQUAL(c.threads, 0);
    CU_ASSERT_STRING_EQUAL(c.data_dir, "var/data");
    CU_ASSERT_STRING_EQUAL(c.region, "us-east-1");
    CU_ASSERT_PTR_NULL(c.vhost_domain);
    CU_ASSERT_EQUAL_FATAL(c.n_users, 1);
    CU_ASSERT_STRING_EQUAL(c.users[0].name, "root");
    CU_ASSERT_STRING_EQUAL(c.users[0].access_key, CONF_DEFAULT_ACCESS_KEY);
    CU_ASSERT_STRING_EQUAL(c.users[0].secret_key, CONF_DEFAULT_SECRET_KEY);
    CU_ASSERT_TRUE(c.default_credentials);
    CU_ASSERT_EQUAL(c.max_xml_body, 2u * 1024 * 1024);
    CU_ASSERT_EQUAL(c.max_header_bytes, 16u * 1024);
    CU_ASSERT_EQUAL(c.log_level, LOG_LVL_INFO);
    CU_ASSERT_EQUAL(c.shutdown_grace_s, 30);
    CU_ASSERT_PTR_NULL(c.cold_url);
    CU_ASSERT_PTR_NULL(c.cold_ca_path);
    CU_ASSERT_EQUAL(c.cold_connect_timeout_ms, 1000);
    CU_ASSERT_EQUAL(c.cold_request_timeout_ms, 30000);
    CU_ASSERT_EQUAL(c.cold_first_byte_timeout_ms, 5000);
    CU_ASSERT_EQUAL(c.cache_revalidate_ms, 1000);
    CU_ASSERT_EQUAL(c.cold_retries, 2);
    CU_ASSERT_STRING_EQUAL(c.spool_dir, "/tmp");
    CU_ASSERT_PTR_NULL(c.cache_dir);
    CU_ASSERT_EQUAL(c.cache_size, 10ull * 1024 * 1024 * 1024);
    CU_ASSERT_EQUAL(c.cache_high_pct, 90);
    CU_ASSERT_EQUAL(c.cache_low_pct, 80);
    CU_ASSERT_EQUAL(c.cache_fill_workers, 8);
    CU_ASSERT_EQUAL(c.cache_wait_ms, 30000);
    CU_ASSERT_FALSE(c.cache_on_write);
    CU_ASSERT_EQUAL(c.consistency, CONF_CONSISTENCY_TTL);
    CU_ASSERT_EQUAL(c.consistency_ttl_s, 60);
    CU_ASSERT_FALSE(c.metrics_public);
    CU_ASSERT_TRUE(c.sigv2);
    CU_ASSERT_TRUE(is_default(&c));
    conf_free(&c);
}

static void defaults_pass_validation(void)
{
    struct conf c;
    char err[256];
    defaults(&c);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(err, "");
    conf_free(&c);
}

static void conf_free_leaves_struct_empty_and_is_idempotent(void)
{
    struct conf c;
    defaults(&c);
    conf_free(&c);
    CU_ASSERT_PTR_NULL(c.listen_addr);
    CU_ASSERT_PTR_NULL(c.users);
    CU_ASSERT_EQUAL(c.n_users, 0);
    conf_free(&c);   /* must not double free */
    struct conf zero = { 0 };
    conf_free(&zero);
}

/* ---- the JSON file: refusals ---- */

struct bad_case {
    const char *name;
    const char *json;
    const char *want;   /* fragment of the message */
};

#define PERM_R "\"permissions\":{\"*\":\"read\"}"
#define U1 "{\"name\":\"a\",\"access_key\":\"AK1\",\"secret_key\":\"s1\"," PERM_R "}"

static const struct bad_case bad_files[] = {
    { "unknown_top_key_lists_allowed", "{\"lsten\":\"1.2.3.4:9000\"}",
      "unknown key \"lsten\" (allowed: listen, data_dir, cold_url, cold_ca_path, "
      "cold_connect_timeout_ms, cold_request_timeout_ms, cold_first_byte_timeout_ms, "
      "cold_retries, cold_access_key, "
      "cold_secret_key, cold_secret_key_env, cold_region, cold_virtual_hosted, spool_dir, "
      "state_dir, mpu_max_age, cache, region, vhost_domain, threads, log_level, shutdown_grace_s, prefetch_keep_s, max_xml_body, "
      "max_header_bytes, metrics_public, sigv2, users, buckets" },
    { "prefetch_keep_zero", "{\"prefetch_keep_s\": 0}", "prefetch_keep_s: must be an integer" },
    { "top_level_array", "[1,2]", "top level: must be a JSON object" },
    { "duplicate_top_key", "{\"threads\":1,\"threads\":2}", "duplicate" },
    { "listen_not_string", "{\"listen\":9000}", "listen: must be a string" },
    { "listen_no_port", "{\"listen\":\"127.0.0.1\"}", "listen: \"127.0.0.1\" must be ADDR:PORT" },
    { "listen_empty", "{\"listen\":\"\"}", "listen: must be ADDR:PORT" },
    { "listen_bad_hostname", "{\"listen\":\"-bad-.example:9000\"}",
      "listen: \"-bad-.example:9000\"" },
    { "listen_port_zero", "{\"listen\":\"127.0.0.1:0\"}", "port 1 to 65535" },
    { "listen_port_too_big", "{\"listen\":\"127.0.0.1:65536\"}", "listen: \"127.0.0.1:65536\"" },
    { "listen_port_signed", "{\"listen\":\"127.0.0.1:+80\"}", "listen:" },
    { "listen_port_trailing_junk", "{\"listen\":\"127.0.0.1:80x\"}", "listen:" },
    { "listen_ipv4_short", "{\"listen\":\"127.1:80\"}", "listen:" },
    { "listen_ipv6_unbracketed", "{\"listen\":\"::1:9000\"}", "listen: \"::1:9000\"" },
    { "listen_ipv6_no_port", "{\"listen\":\"[::1]\"}", "listen: \"[::1]\"" },
    { "listen_ipv6_bad_addr", "{\"listen\":\"[::g]:80\"}", "listen:" },
    { "listen_ipv4_in_brackets", "{\"listen\":\"[1.2.3.4]:80\"}", "listen:" },
    { "data_dir_empty", "{\"data_dir\":\"\"}", "data_dir: must be a non-empty path" },
    { "data_dir_null", "{\"data_dir\":null}", "data_dir: must be a string" },
    { "string_with_nul_refused_by_parser", "{\"data_dir\":\"a\\u0000b\"}", "invalid JSON at line 1" },
    { "region_empty", "{\"region\":\"\"}", "region: must be 1 to 64" },
    { "region_with_slash", "{\"region\":\"us/east\"}", "region: must be 1 to 64" },
    { "vhost_domain_number", "{\"vhost_domain\":1}", "vhost_domain: must be a non-empty string or null" },
    { "vhost_domain_empty", "{\"vhost_domain\":\"\"}", "vhost_domain: must be a non-empty string or null" },
    { "threads_negative", "{\"threads\":-1}", "threads: must be an integer from 0 to 256" },
    { "threads_too_many", "{\"threads\":257}", "threads: must be an integer from 0 to 256" },
    { "threads_real", "{\"threads\":4.0}", "threads: must be an integer from 0 to 256" },
    { "threads_string", "{\"threads\":\"4\"}", "threads: must be an integer from 0 to 256" },
    { "threads_bool", "{\"threads\":true}", "threads: must be an integer from 0 to 256" },
    { "log_level_unknown", "{\"log_level\":\"verbose\"}",
      "log_level: must be one of \"error\", \"warn\", \"info\", \"debug\"" },
    { "log_level_uppercase", "{\"log_level\":\"INFO\"}", "log_level: must be one of" },
    { "grace_too_long", "{\"shutdown_grace_s\":3601}", "shutdown_grace_s: must be an integer from 0 to 3600" },
    { "xml_body_too_small", "{\"max_xml_body\":1023}", "max_xml_body: must be an integer from 1024 to 67108864" },
    { "xml_body_too_big", "{\"max_xml_body\":67108865}", "max_xml_body: must be an integer from 1024 to 67108864" },
    { "header_bytes_too_small", "{\"max_header_bytes\":1000}", "max_header_bytes: must be an integer from 1024 to 1048576" },
    { "header_bytes_too_big", "{\"max_header_bytes\":1048577}", "max_header_bytes: must be an integer from 1024 to 1048576" },
    { "users_not_array", "{\"users\":{}}", "users: must be an array of 1 to 1000 user objects" },
    { "users_empty", "{\"users\":[]}", "users: must be an array of 1 to 1000 user objects" },
    { "user_not_object", "{\"users\":[" U1 ",\"bob\"]}", "users[1]: must be an object" },
    { "user_unknown_key", "{\"users\":[{\"name\":\"a\",\"access_key\":\"A\",\"secret\":\"s\"}]}",
      "users[0]: unknown key \"secret\" (allowed: name, access_key, secret_key, "
      "secret_key_env, permissions)" },
    { "user_missing_secret", "{\"users\":[" U1 ",{\"name\":\"b\",\"access_key\":\"AK2\"}]}",
      "users[1].secret_key: required string" },
    { "user_missing_name", "{\"users\":[{\"access_key\":\"A\",\"secret_key\":\"s\"}]}",
      "users[0].name: required string" },
    { "user_access_key_number", "{\"users\":[{\"name\":\"a\",\"access_key\":5,\"secret_key\":\"s\"}]}",
      "users[0].access_key: required string" },
    { "user_empty_secret", "{\"users\":[{\"name\":\"a\",\"access_key\":\"A\",\"secret_key\":\"\"}]}",
      "users[0].secret_key: must not be empty" },
    { "user_empty_access_key", "{\"users\":[{\"name\":\"a\",\"access_key\":\"\",\"secret_key\":\"s\"}]}",
      "users[0].access_key: must not be empty" },
    { "user_access_key_with_slash", "{\"users\":[{\"name\":\"a\",\"access_key\":\"A/B\",\"secret_key\":\"s\"}]}",
      "users[0].access_key: must be non-empty, without '/'" },
    { "user_access_key_with_space", "{\"users\":[{\"name\":\"a\",\"access_key\":\"A B\",\"secret_key\":\"s\"}]}",
      "users[0].access_key: must be non-empty" },
    { "user_duplicate_access_key",
      "{\"users\":[" U1 ",{\"name\":\"b\",\"access_key\":\"X\",\"secret_key\":\"s\"," PERM_R "},"
      "{\"name\":\"c\",\"access_key\":\"AK1\",\"secret_key\":\"t\"," PERM_R "}]}",
      "users[2].access_key: same as users[0].access_key (access keys must be unique)" },
    /* permissions, secret_key_env, buckets */
    { "user_without_permissions", "{\"users\":[{\"name\":\"a\",\"access_key\":\"A\",\"secret_key\":\"s\"}]}",
      "users[0].permissions: required" },
    { "permissions_not_object", "{\"users\":[{\"name\":\"a\",\"access_key\":\"A\",\"secret_key\":\"s\",\"permissions\":[\"*\"]}]}",
      "users[0].permissions: must be an object" },
    { "permission_level_unknown", "{\"users\":[{\"name\":\"a\",\"access_key\":\"A\",\"secret_key\":\"s\",\"permissions\":{\"*\":\"full\"}}]}",
      "users[0].permissions.*: must be one of \"none\", \"read\", \"write\", \"admin\"" },
    { "permission_level_uppercase", "{\"users\":[{\"name\":\"a\",\"access_key\":\"A\",\"secret_key\":\"s\",\"permissions\":{\"b1\":\"READ\"}}]}",
      "users[0].permissions.b1: must be one of" },
    { "permission_level_number", "{\"users\":[{\"name\":\"a\",\"access_key\":\"A\",\"secret_key\":\"s\",\"permissions\":{\"b1\":2}}]}",
      "users[0].permissions.b1: must be one of" },
    { "permission_bucket_with_slash", "{\"users\":[{\"name\":\"a\",\"access_key\":\"A\",\"secret_key\":\"s\",\"permissions\":{\"a/b\":\"read\"}}]}",
      "users[0].permissions: key \"a/b\" must be \"*\" or a bucket name" },
    { "permission_bucket_glob", "{\"users\":[{\"name\":\"a\",\"access_key\":\"A\",\"secret_key\":\"s\",\"permissions\":{\"ck*\":\"read\"}}]}",
      "users[0].permissions: key \"ck*\"" },
    { "permission_bucket_empty", "{\"users\":[{\"name\":\"a\",\"access_key\":\"A\",\"secret_key\":\"s\",\"permissions\":{\"\":\"read\"}}]}",
      "users[0].permissions: key \"\"" },
    { "permission_duplicate_bucket", "{\"users\":[{\"name\":\"a\",\"access_key\":\"A\",\"secret_key\":\"s\",\"permissions\":{\"b\":\"read\",\"b\":\"write\"}}]}",
      "duplicate" },
    { "secret_and_secret_env", "{\"users\":[{\"name\":\"a\",\"access_key\":\"A\",\"secret_key\":\"s\",\"secret_key_env\":\"X\"," PERM_R "}]}",
      "users[0]: give secret_key or secret_key_env, not both" },
    { "secret_env_unset", "{\"users\":[{\"name\":\"a\",\"access_key\":\"A\",\"secret_key_env\":\"SG_TEST_UNSET_VAR\"," PERM_R "}]}",
      "users[0].secret_key_env: environment variable SG_TEST_UNSET_VAR is not set" },
    { "secret_env_empty", "{\"users\":[{\"name\":\"a\",\"access_key\":\"A\",\"secret_key_env\":\"SG_TEST_EMPTY_VAR\"," PERM_R "}]}",
      "users[0].secret_key_env: environment variable SG_TEST_EMPTY_VAR is empty" },
    { "secret_env_bad_name", "{\"users\":[{\"name\":\"a\",\"access_key\":\"A\",\"secret_key_env\":\"1X-Y\"," PERM_R "}]}",
      "users[0].secret_key_env: must name an environment variable" },
    { "secret_env_not_string", "{\"users\":[{\"name\":\"a\",\"access_key\":\"A\",\"secret_key_env\":7," PERM_R "}]}",
      "users[0].secret_key_env: must name an environment variable" },
    { "no_secret_at_all", "{\"users\":[{\"name\":\"a\",\"access_key\":\"A\"," PERM_R "}]}",
      "users[0].secret_key: required string" },
    { "buckets_not_object", "{\"buckets\":[\"a\"]}", "buckets: must be an object" },
    { "bucket_not_object", "{\"buckets\":{\"a1\":true}}", "buckets.a1: must be an object like" },
    { "bucket_unknown_key", "{\"buckets\":{\"a1\":{\"public-read\":true}}}",
      "buckets.a1: unknown key \"public-read\" (allowed: public_read, consistency, cold_bucket)" },
    { "bucket_public_read_string", "{\"buckets\":{\"a1\":{\"public_read\":\"yes\"}}}",
      "buckets.a1.public_read: must be true or false" },
    { "bucket_bad_name", "{\"buckets\":{\"../etc\":{\"public_read\":true}}}",
      "buckets: key \"../etc\" must be a bucket name" },
    { "bucket_star_name", "{\"buckets\":{\"*\":{\"public_read\":true}}}",
      "buckets: key \"*\" must be a bucket name" },
    { "bad_value_after_good_ones", "{\"listen\":\"0.0.0.0:80\",\"threads\":8,\"region\":\"\"}",
      "region:" },
    /* the cold tier */
    { "cold_url_number", "{\"cold_url\":80}", "cold_url: must be a string or null" },
    { "cold_url_empty", "{\"cold_url\":\"\"}", "cold_url: must be http://HOST[:PORT]" },
    { "cold_url_no_scheme", "{\"cold_url\":\"s3.example.com\"}", "cold_url: must be http://" },
    { "cold_url_ftp", "{\"cold_url\":\"ftp://s3.example.com\"}", "cold_url: must be http://" },
    { "cold_url_scheme_only", "{\"cold_url\":\"http://\"}", "cold_url: must be http://" },
    { "cold_url_scheme_slash", "{\"cold_url\":\"https:///\"}", "cold_url: must be http://" },
    { "cold_url_path", "{\"cold_url\":\"http://minio:9000/bucket\"}", "no path, query" },
    { "cold_url_two_slashes", "{\"cold_url\":\"http://minio:9000//\"}", "cold_url:" },
    { "cold_url_query", "{\"cold_url\":\"http://minio?x=1\"}", "cold_url:" },
    { "cold_url_userinfo_not_echoed", "{\"cold_url\":\"http://AK:SECRETPW@minio:9000\"}",
      "no path, query or user:password@" },
    { "cold_url_port_zero", "{\"cold_url\":\"http://minio:0\"}", "cold_url:" },
    { "cold_url_port_too_big", "{\"cold_url\":\"http://minio:65536\"}", "cold_url:" },
    { "cold_url_port_empty", "{\"cold_url\":\"http://minio:\"}", "cold_url:" },
    { "cold_url_port_letters", "{\"cold_url\":\"http://minio:http\"}", "cold_url:" },
    { "cold_url_ipv6_unbracketed", "{\"cold_url\":\"http://::1:9000\"}", "cold_url:" },
    { "cold_url_ipv6_bad", "{\"cold_url\":\"http://[::g]:9000\"}", "cold_url:" },
    { "cold_url_ipv6_unclosed", "{\"cold_url\":\"http://[::1:9000\"}", "cold_url:" },
    { "cold_url_bad_ipv4", "{\"cold_url\":\"http://999.1.1.1\"}", "cold_url:" },
    { "cold_url_empty_label", "{\"cold_url\":\"http://a..b\"}", "cold_url:" },
    { "cold_url_trailing_dot", "{\"cold_url\":\"http://minio.\"}", "cold_url:" },
    { "cold_url_label_hyphen", "{\"cold_url\":\"http://-minio\"}", "cold_url:" },
    { "cold_url_space", "{\"cold_url\":\"http://mi nio\"}", "cold_url:" },
    { "cold_url_uppercase_scheme", "{\"cold_url\":\"HTTP://minio\"}", "cold_url:" },
    { "cold_ca_path_empty", "{\"cold_ca_path\":\"\"}", "cold_ca_path: must be a non-empty path" },
    { "cold_ca_path_bool", "{\"cold_ca_path\":true}", "cold_ca_path: must be a string or null" },
    { "cold_connect_timeout_zero", "{\"cold_connect_timeout_ms\":0}",
      "cold_connect_timeout_ms: must be an integer from 1 to 600000" },
    { "cold_connect_timeout_too_long", "{\"cold_connect_timeout_ms\":600001}",
      "cold_connect_timeout_ms: must be an integer from 1 to 600000" },
    { "cold_connect_timeout_string", "{\"cold_connect_timeout_ms\":\"1000\"}",
      "cold_connect_timeout_ms: must be an integer" },
    { "cold_request_timeout_zero", "{\"cold_request_timeout_ms\":0}",
      "cold_request_timeout_ms: must be an integer from 1 to 3600000" },
    { "cold_request_timeout_too_long", "{\"cold_request_timeout_ms\":3600001}",
      "cold_request_timeout_ms: must be an integer from 1 to 3600000" },
    { "cold_first_byte_timeout_zero", "{\"cold_first_byte_timeout_ms\":0}",
      "cold_first_byte_timeout_ms: must be an integer from 1 to 600000" },
    { "cold_first_byte_timeout_too_long", "{\"cold_first_byte_timeout_ms\":600001}",
      "cold_first_byte_timeout_ms: must be an integer from 1 to 600000" },
    { "cold_retries_negative", "{\"cold_retries\":-1}", "cold_retries: must be an integer from 0 to 10" },
    { "cold_retries_too_many", "{\"cold_retries\":11}", "cold_retries: must be an integer from 0 to 10" },
    { "spool_dir_empty", "{\"spool_dir\":\"\"}", "spool_dir: must be a non-empty path" },
    { "spool_dir_null", "{\"spool_dir\":null}", "spool_dir: must be a string" },
    /* the cache tier */
    { "cache_not_object", "{\"cache\":\"/nvme\"}", "cache: must be an object like" },
    { "cache_unknown_key", "{\"cache\":{\"directory\":\"/nvme\"}}",
      "cache: unknown key \"directory\" (allowed: dir, size, high_watermark, low_watermark, "
      "fill_workers, wait_timeout_ms, on_write, consistency, read_path, engine, "
      "revalidate_timeout_ms)" },
    { "cache_engine_bad", "{\"cache\": {\"engine\": \"epoll\"}}",
      "cache.engine: must be \"auto\", \"io_uring\" or \"threads\"" },
    { "cache_revalidate_timeout_zero", "{\"cache\":{\"revalidate_timeout_ms\":0}}",
      "cache.revalidate_timeout_ms: must be an integer from 1 to 60000" },
    { "cache_revalidate_timeout_too_long", "{\"cache\":{\"revalidate_timeout_ms\":60001}}",
      "cache.revalidate_timeout_ms: must be an integer from 1 to 60000" },
    { "cache_read_path_bad", "{\"cache\": {\"read_path\": \"mmap\"}}",
      "cache.read_path: must be \"auto\", \"sendfile\" or \"io_uring\"" },
    { "cache_dir_empty", "{\"cache\":{\"dir\":\"\"}}", "cache.dir: must be a non-empty path" },
    { "cache_dir_number", "{\"cache\":{\"dir\":1}}", "cache.dir: must be a non-empty path, or null" },
    { "cache_size_too_small_int", "{\"cache\":{\"size\":1048575}}", "cache.size: must be at least 1 MiB" },
    { "cache_size_negative", "{\"cache\":{\"size\":-1}}", "cache.size: must be at least 1 MiB" },
    { "cache_size_zero", "{\"cache\":{\"size\":0}}", "cache.size:" },
    { "cache_size_real", "{\"cache\":{\"size\":1.5e9}}", "cache.size:" },
    { "cache_size_bool", "{\"cache\":{\"size\":true}}", "cache.size:" },
    { "cache_size_too_small_str", "{\"cache\":{\"size\":\"1023KiB\"}}", "cache.size: must be at least 1 MiB" },
    { "cache_size_bad_unit", "{\"cache\":{\"size\":\"10GB2\"}}", "cache.size:" },
    { "cache_size_lowercase_unit", "{\"cache\":{\"size\":\"10g\"}}", "cache.size:" },
    { "cache_size_space", "{\"cache\":{\"size\":\"10 G\"}}", "cache.size:" },
    { "cache_size_overflow", "{\"cache\":{\"size\":\"99999999T\"}}", "cache.size:" },
    { "high_watermark_one", "{\"cache\":{\"high_watermark\":1}}",
      "cache.high_watermark: must be an integer from 2 to 100" },
    { "high_watermark_over_100", "{\"cache\":{\"high_watermark\":101}}",
      "cache.high_watermark: must be an integer from 2 to 100" },
    { "low_watermark_zero", "{\"cache\":{\"low_watermark\":0}}",
      "cache.low_watermark: must be an integer from 1 to 99" },
    { "low_watermark_100", "{\"cache\":{\"low_watermark\":100}}",
      "cache.low_watermark: must be an integer from 1 to 99" },
    { "fill_workers_zero", "{\"cache\":{\"fill_workers\":0}}",
      "cache.fill_workers: must be an integer from 1 to 256" },
    { "fill_workers_too_many", "{\"cache\":{\"fill_workers\":257}}",
      "cache.fill_workers: must be an integer from 1 to 256" },
    { "wait_timeout_too_short", "{\"cache\":{\"wait_timeout_ms\":99}}",
      "cache.wait_timeout_ms: must be an integer from 100 to 600000" },
    { "wait_timeout_too_long", "{\"cache\":{\"wait_timeout_ms\":600001}}",
      "cache.wait_timeout_ms: must be an integer from 100 to 600000" },
    { "on_write_string", "{\"cache\":{\"on_write\":\"true\"}}", "cache.on_write: must be true or false" },
    { "consistency_unknown", "{\"cache\":{\"consistency\":\"eventual\"}}",
      "cache.consistency: must be \"immutable\", \"always\" or \"ttl:SECONDS\" with SECONDS "
      "from 1 to 31536000" },
    { "consistency_ttl_zero", "{\"cache\":{\"consistency\":\"ttl:0\"}}", "cache.consistency: must be" },
    { "consistency_ttl_over_a_year", "{\"cache\":{\"consistency\":\"ttl:31536001\"}}",
      "cache.consistency: must be" },
    { "consistency_ttl_empty", "{\"cache\":{\"consistency\":\"ttl:\"}}", "cache.consistency:" },
    { "consistency_ttl_unit", "{\"cache\":{\"consistency\":\"ttl:60s\"}}", "cache.consistency:" },
    { "consistency_ttl_negative", "{\"cache\":{\"consistency\":\"ttl:-5\"}}", "cache.consistency:" },
    { "consistency_uppercase", "{\"cache\":{\"consistency\":\"Immutable\"}}", "cache.consistency:" },
    { "consistency_number", "{\"cache\":{\"consistency\":60}}", "cache.consistency: must be" },
    { "consistency_at_top_level", "{\"consistency\":\"always\"}", "unknown key \"consistency\"" },
    { "cache_bad_after_good", "{\"cache\":{\"dir\":\"/nvme\",\"size\":\"2G\",\"fill_workers\":0}}",
      "cache.fill_workers" },
    { "metrics_public_string", "{\"metrics_public\":\"yes\"}", "metrics_public: must be true or false" },
    { "sigv2_string", "{\"sigv2\":\"no\"}", "sigv2: must be true or false" },
    /* per-bucket consistency and cold_bucket */
    { "bucket_consistency_unknown", "{\"buckets\":{\"a1\":{\"consistency\":\"never\"}}}",
      "buckets.a1.consistency: must be \"immutable\", \"always\" or \"ttl:SECONDS\"" },
    { "bucket_consistency_ttl_zero", "{\"buckets\":{\"a1\":{\"consistency\":\"ttl:0\"}}}",
      "buckets.a1.consistency:" },
    { "bucket_consistency_null", "{\"buckets\":{\"a1\":{\"consistency\":null}}}",
      "buckets.a1.consistency:" },
    { "bucket_cold_bucket_uppercase", "{\"buckets\":{\"a1\":{\"cold_bucket\":\"Data\"}}}",
      "buckets.a1.cold_bucket: must be null or an S3 bucket name" },
    { "bucket_cold_bucket_short", "{\"buckets\":{\"a1\":{\"cold_bucket\":\"ab\"}}}",
      "buckets.a1.cold_bucket:" },
    { "bucket_cold_bucket_long",
      "{\"buckets\":{\"a1\":{\"cold_bucket\":"
      "\"a234567890123456789012345678901234567890123456789012345678901234\"}}}",
      "buckets.a1.cold_bucket:" },
    { "bucket_cold_bucket_underscore", "{\"buckets\":{\"a1\":{\"cold_bucket\":\"my_data\"}}}",
      "buckets.a1.cold_bucket:" },
    { "bucket_cold_bucket_dotdot", "{\"buckets\":{\"a1\":{\"cold_bucket\":\"my..data\"}}}",
      "buckets.a1.cold_bucket:" },
    { "bucket_cold_bucket_ends_with_dash", "{\"buckets\":{\"a1\":{\"cold_bucket\":\"data-\"}}}",
      "buckets.a1.cold_bucket:" },
    { "bucket_cold_bucket_starts_with_dot", "{\"buckets\":{\"a1\":{\"cold_bucket\":\".data\"}}}",
      "buckets.a1.cold_bucket:" },
    { "bucket_cold_bucket_ip", "{\"buckets\":{\"a1\":{\"cold_bucket\":\"192.168.5.4\"}}}",
      "buckets.a1.cold_bucket:" },
    { "bucket_cold_bucket_xn_prefix", "{\"buckets\":{\"a1\":{\"cold_bucket\":\"xn--data\"}}}",
      "buckets.a1.cold_bucket:" },
    { "bucket_cold_bucket_s3alias", "{\"buckets\":{\"a1\":{\"cold_bucket\":\"data-s3alias\"}}}",
      "buckets.a1.cold_bucket:" },
    { "bucket_cold_bucket_number", "{\"buckets\":{\"a1\":{\"cold_bucket\":7}}}",
      "buckets.a1.cold_bucket:" },
    { "bucket_cold_bucket_after_good_bucket",
      "{\"buckets\":{\"a1\":{\"cold_bucket\":\"fine-name\"},\"a2\":{\"cold_bucket\":\"A/B\"}}}",
      "buckets.a2.cold_bucket:" },
};

static void bad_file_fails_naming_field_and_changes_nothing(void)
{
    unsetenv("SG_TEST_UNSET_VAR");
    setenv("SG_TEST_EMPTY_VAR", "", 1);
    for (size_t i = 0; i < sizeof bad_files / sizeof bad_files[0]; i++) {
        const struct bad_case *bc = &bad_files[i];
        struct conf c;
        char err[1024] = "untouched";
        defaults(&c);
        int rc = load_text(&c, bc->json, 0600, err, sizeof err);
        CHECK_CASE(rc == -1, bc->name, "rc %d, want -1", rc);
        CHECK_CASE(strstr(err, bc->want) != NULL, bc->name, "message \"%s\" lacks \"%s\"", err,
                   bc->want);
        CHECK_CASE(is_default(&c), bc->name, "conf changed by a failed load");
        conf_free(&c);
    }
}

/* A user table with 1001 entries is one too many. */
static void users_over_limit_are_refused(void)
{
    size_t n = 1001, cap = n * 120 + 32;
    char *json = malloc(cap);
    CU_ASSERT_PTR_NOT_NULL_FATAL(json);
    size_t off = (size_t)snprintf(json, cap, "{\"users\":[");
    for (size_t i = 0; i < n; i++)
        off += (size_t)snprintf(json + off, cap - off,
                                "%s{\"name\":\"u%zu\",\"access_key\":\"K%zu\",\"secret_key\":\"s\","
                                PERM_R "}",
                                i ? "," : "", i, i);
    snprintf(json + off, cap - off, "]}");
    struct conf c;
    char err[512];
    defaults(&c);
    CU_ASSERT_EQUAL(load_text(&c, json, 0600, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "users: must be an array of 1 to 1000"));
    /* and exactly 1000 is fine */
    char *last = NULL;   /* the last user object (its permissions hold a '{' too) */
    for (char *q = strstr(json, "{\"name\""); q != NULL; q = strstr(q + 1, "{\"name\""))
        last = q;
    last[-1] = ']';
    last[0] = '}';
    last[1] = '\0';
    CU_ASSERT_EQUAL(load_text(&c, json, 0600, err, sizeof err), 0);
    CU_ASSERT_EQUAL(c.n_users, 1000);
    conf_free(&c);
    free(json);
}

static void parse_error_reports_line_and_column(void)
{
    struct conf c;
    char err[512];
    defaults(&c);
    int rc = load_text(&c, "{\n  \"listen\": \"127.0.0.1:9000\",\n  oops\n}\n", 0600, err,
                       sizeof err);
    CU_ASSERT_EQUAL(rc, -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "invalid JSON at line 3, column"));
    CU_ASSERT_TRUE(is_default(&c));
    CU_ASSERT_EQUAL(load_text(&c, "", 0600, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "invalid JSON at line"));
    conf_free(&c);
}

static void error_message_starts_with_file_path(void)
{
    char path[512], err[1024];
    struct conf c;
    defaults(&c);
    if (tmp_write("{\"threads\":999}", 0600, path, sizeof path) != 0)
        return;
    CU_ASSERT_EQUAL(conf_load_file(&c, path, err, sizeof err), -1);
    CU_ASSERT_EQUAL(strncmp(err, path, strlen(path)), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, ": threads: must be an integer from 0 to 256"));
    unlink(path);
    conf_free(&c);
}

static void missing_file_error_names_path_and_reason(void)
{
    struct conf c;
    char err[512];
    defaults(&c);
    CU_ASSERT_EQUAL(conf_load_file(&c, "/nonexistent/shardgate.json", err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent/shardgate.json: cannot open"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, strerror(ENOENT)));
    conf_free(&c);
}

static void directory_is_refused_as_config(void)
{
    struct conf c;
    char err[512];
    defaults(&c);
    CU_ASSERT_EQUAL(conf_load_file(&c, tmp_dir(), err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "not a regular file"));
    conf_free(&c);
}

/* ---- the JSON file: accepted ---- */

struct good_case {
    const char *name;
    const char *json;
    const char *addr;   /* expected listen_addr, or NULL for the default */
    uint16_t port;      /* expected port, 0 = default */
};

static const struct good_case good_files[] = {
    { "empty_object_keeps_defaults", "{}", NULL, 0 },
    { "ipv4_any", "{\"listen\":\"0.0.0.0:8080\"}", "0.0.0.0", 8080 },
    { "ipv6_loopback_brackets_dropped", "{\"listen\":\"[::1]:9001\"}", "::1", 9001 },
    { "ipv6_any_top_port", "{\"listen\":\"[::]:65535\"}", "::", 65535 },
    { "port_one", "{\"listen\":\"10.0.0.1:1\"}", "10.0.0.1", 1 },
    { "hostname_kept_for_bind", "{\"listen\":\"localhost:9000\"}", "localhost", 9000 },
    { "no_address_is_every_ipv4_interface", "{\"listen\":\":9002\"}", "0.0.0.0", 9002 },
    { "limits_at_lower_bounds",
      "{\"threads\":0,\"shutdown_grace_s\":0,\"max_xml_body\":1024,\"max_header_bytes\":1024}",
      NULL, 0 },
    { "limits_at_upper_bounds",
      "{\"threads\":256,\"shutdown_grace_s\":3600,\"max_xml_body\":67108864,"
      "\"max_header_bytes\":1048576}",
      NULL, 0 },
    { "vhost_null", "{\"vhost_domain\":null}", NULL, 0 },
    { "log_level_debug", "{\"log_level\":\"debug\"}", NULL, 0 },
    { "cold_url_null_keeps_local_tier", "{\"cold_url\":null,\"cold_ca_path\":null}", NULL, 0 },
    { "cold_limits_at_lower_bounds",
      "{\"cold_connect_timeout_ms\":1,\"cold_request_timeout_ms\":1,\"cold_retries\":0}", NULL, 0 },
    { "cold_limits_at_upper_bounds",
      "{\"cold_connect_timeout_ms\":600000,\"cold_request_timeout_ms\":3600000,"
      "\"cold_retries\":10}", NULL, 0 },
    { "cache_empty_object_keeps_defaults", "{\"cache\":{}}", NULL, 0 },
    { "cache_dir_null_is_no_cache", "{\"cache\":{\"dir\":null}}", NULL, 0 },
    { "cache_limits_at_lower_bounds",
      "{\"cache\":{\"size\":1048576,\"high_watermark\":2,\"low_watermark\":1,"
      "\"fill_workers\":1,\"wait_timeout_ms\":100}}", NULL, 0 },
    { "cache_limits_at_upper_bounds",
      "{\"cache\":{\"size\":\"16777215TiB\",\"high_watermark\":100,\"low_watermark\":99,"
      "\"fill_workers\":256,\"wait_timeout_ms\":600000}}", NULL, 0 },
    { "consistency_ttl_bounds",
      "{\"cache\":{\"consistency\":\"ttl:31536000\"},"
      "\"buckets\":{\"b1\":{\"consistency\":\"ttl:1\"}}}", NULL, 0 },
    { "cold_bucket_null_is_same_name", "{\"buckets\":{\"b1\":{\"cold_bucket\":null}}}", NULL, 0 },
    { "cold_bucket_swap_is_no_alias",
      "{\"buckets\":{\"b1\":{\"cold_bucket\":\"b2x\"},\"b2x\":{\"cold_bucket\":\"b1z\"}}}",
      NULL, 0 },
};

static void good_files_load_and_validate(void)
{
    for (size_t i = 0; i < sizeof good_files / sizeof good_files[0]; i++) {
        const struct good_case *gc = &good_files[i];
        struct conf c;
        char err[512] = "";
        defaults(&c);
        int rc = load_text(&c, gc->json, 0600, err, sizeof err);
        CHECK_CASE(rc == 0, gc->name, "rc %d: %s", rc, err);
        CHECK_CASE(strcmp(c.listen_addr, gc->addr ? gc->addr : "127.0.0.1") == 0, gc->name,
                   "listen_addr %s", c.listen_addr);
        CHECK_CASE(c.listen_port == (gc->port ? gc->port : 9000), gc->name, "port %u",
                   (unsigned)c.listen_port);
        CHECK_CASE(c.default_credentials && c.n_users == 1, gc->name,
                   "a file without users must keep the default user");
        rc = conf_validate(&c, err, sizeof err);
        CHECK_CASE(rc == 0, gc->name, "validate: %s", err);
        conf_free(&c);
    }
}

static void file_values_reach_every_field(void)
{
    struct conf c;
    char err[512];
    defaults(&c);
    const char *json = "{\"listen\":\"[::1]:7000\",\"data_dir\":\"/srv/sg\",\"region\":\"eu-west-3\","
                       "\"vhost_domain\":\"s3.example.com\",\"threads\":12,\"log_level\":\"warn\","
                       "\"shutdown_grace_s\":5,\"max_xml_body\":4096,\"max_header_bytes\":8192}";
    CU_ASSERT_EQUAL_FATAL(load_text(&c, json, 0600, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(c.listen_addr, "::1");
    CU_ASSERT_EQUAL(c.listen_port, 7000);
    CU_ASSERT_STRING_EQUAL(c.data_dir, "/srv/sg");
    CU_ASSERT_STRING_EQUAL(c.region, "eu-west-3");
    CU_ASSERT_STRING_EQUAL(c.vhost_domain, "s3.example.com");
    CU_ASSERT_EQUAL(c.threads, 12);
    CU_ASSERT_EQUAL(c.log_level, LOG_LVL_WARN);
    CU_ASSERT_EQUAL(c.shutdown_grace_s, 5);
    CU_ASSERT_EQUAL(c.max_xml_body, 4096);
    CU_ASSERT_EQUAL(c.max_header_bytes, 8192);
    /* a second file merges over the first; null turns vhost addressing off */
    CU_ASSERT_EQUAL_FATAL(load_text(&c, "{\"vhost_domain\":null,\"threads\":1}", 0600, err,
                                    sizeof err), 0);
    CU_ASSERT_PTR_NULL(c.vhost_domain);
    CU_ASSERT_EQUAL(c.threads, 1);
    CU_ASSERT_STRING_EQUAL(c.data_dir, "/srv/sg");
    conf_free(&c);
}

static void cold_and_cache_values_reach_every_field(void)
{
    struct conf c;
    char err[512];
    defaults(&c);
    const char *json =
        "{\"cold_url\":\"https://s3.eu-west-1.amazonaws.com/\",\"cold_ca_path\":\"/etc/ca.pem\","
        "\"cold_connect_timeout_ms\":250,\"cold_request_timeout_ms\":120000,\"cold_retries\":5,"
        "\"cold_first_byte_timeout_ms\":750,"
        "\"spool_dir\":\"/var/spool/sg\",\"metrics_public\":true,\"sigv2\":false,"
        "\"cache\":{\"dir\":\"/nvme/sg\",\"size\":\"1.5GiB\",\"high_watermark\":95,"
        "\"low_watermark\":70,\"fill_workers\":32,\"wait_timeout_ms\":5000,\"on_write\":true,"
        "\"consistency\":\"always\",\"revalidate_timeout_ms\":250}}";
    CU_ASSERT_EQUAL_FATAL(load_text(&c, json, 0600, err, sizeof err), 0);
    CU_ASSERT_EQUAL(c.cold_first_byte_timeout_ms, 750);
    CU_ASSERT_EQUAL(c.cache_revalidate_ms, 250);
    CU_ASSERT_STRING_EQUAL(c.cold_url, "https://s3.eu-west-1.amazonaws.com/");
    CU_ASSERT_STRING_EQUAL(c.cold_ca_path, "/etc/ca.pem");
    CU_ASSERT_EQUAL(c.cold_connect_timeout_ms, 250);
    CU_ASSERT_EQUAL(c.cold_request_timeout_ms, 120000);
    CU_ASSERT_EQUAL(c.cold_retries, 5);
    CU_ASSERT_STRING_EQUAL(c.spool_dir, "/var/spool/sg");
    CU_ASSERT_TRUE(c.metrics_public);
    CU_ASSERT_FALSE(c.sigv2);
    CU_ASSERT_STRING_EQUAL(c.cache_dir, "/nvme/sg");
    CU_ASSERT_EQUAL(c.cache_size, 1610612736u);
    CU_ASSERT_EQUAL(c.cache_high_pct, 95);
    CU_ASSERT_EQUAL(c.cache_low_pct, 70);
    CU_ASSERT_EQUAL(c.cache_fill_workers, 32);
    CU_ASSERT_EQUAL(c.cache_wait_ms, 5000);
    CU_ASSERT_TRUE(c.cache_on_write);
    CU_ASSERT_EQUAL(c.consistency, CONF_CONSISTENCY_ALWAYS);
    CU_ASSERT_EQUAL(c.consistency_ttl_s, 0);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), 0);
    /* a second file: a "cache" object changes only the keys it names, null
     * turns the cache and the S3 tier off, an integer size is bytes */
    CU_ASSERT_EQUAL_FATAL(load_text(&c, "{\"cold_url\":null,\"cold_ca_path\":null,"
                                        "\"cache\":{\"dir\":null,\"size\":2097152,"
                                        "\"consistency\":\"ttl:3600\"}}",
                                    0600, err, sizeof err), 0);
    CU_ASSERT_PTR_NULL(c.cold_url);
    CU_ASSERT_PTR_NULL(c.cold_ca_path);
    CU_ASSERT_PTR_NULL(c.cache_dir);
    CU_ASSERT_EQUAL(c.cache_size, 2097152u);
    CU_ASSERT_EQUAL(c.consistency, CONF_CONSISTENCY_TTL);
    CU_ASSERT_EQUAL(c.consistency_ttl_s, 3600);
    CU_ASSERT_EQUAL(c.cache_high_pct, 95);
    CU_ASSERT_EQUAL(c.cache_fill_workers, 32);
    CU_ASSERT_TRUE(c.cache_on_write);
    CU_ASSERT_EQUAL(c.cold_retries, 5);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), 0);
    /* a bad later file leaves all of it as it was */
    CU_ASSERT_EQUAL(load_text(&c, "{\"cache\":{\"dir\":\"/x\",\"size\":\"1K\"}}", 0600, err,
                              sizeof err), -1);
    CU_ASSERT_PTR_NULL(c.cache_dir);
    CU_ASSERT_EQUAL(c.cache_size, 2097152u);
    conf_free(&c);
}

/* Endpoints as they are written in practice; stored exactly as given. */
static void cold_url_forms_are_accepted(void)
{
    static const char *const urls[] = {
        "http://127.0.0.1:9000", "http://127.0.0.1:9000/", "https://s3.amazonaws.com",
        "https://s3.eu-west-1.amazonaws.com/", "http://[::1]:9000", "https://[2001:db8::5]/",
        "http://[::ffff:10.0.0.1]:80", "http://minio_1:9000", "http://MinIO.Local:65535",
        "http://10.0.0.1", "http://a", "http://xn--bcher-kva.example:443",
    };
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        struct conf c;
        char err[1024] = "", json[256];
        defaults(&c);
        snprintf(json, sizeof json, "{\"cold_url\":\"%s\"}", urls[i]);
        int rc = load_text(&c, json, 0600, err, sizeof err);
        CHECK_CASE(rc == 0, urls[i], "rc %d: %s", rc, err);
        CHECK_CASE(c.cold_url != NULL && strcmp(c.cold_url, urls[i]) == 0, urls[i], "stored as %s",
                   c.cold_url ? c.cold_url : "(null)");
        CHECK_CASE(conf_validate(&c, err, sizeof err) == 0, urls[i], "validate: %s", err);
        conf_free(&c);
    }
}

/* A URL may carry a password; a refusal must not repeat it. */
static void cold_url_refusal_never_echoes_the_url(void)
{
    struct conf c;
    char err[1024];
    defaults(&c);
    CU_ASSERT_EQUAL(load_text(&c, "{\"cold_url\":\"http://AK:SECRETPW@minio:9000\"}", 0600, err,
                              sizeof err), -1);
    CU_ASSERT_PTR_NULL(strstr(err, "SECRETPW"));
    CU_ASSERT_EQUAL(conf_set_flag(&c, "cold", "https://u:SECRETPW@h", err, sizeof err), -1);
    CU_ASSERT_PTR_NULL(strstr(err, "SECRETPW"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--cold: must be http://"));
    conf_free(&c);
}

/* ---- conf_size_parse ---- */

struct size_case {
    const char *in;
    int rc;
    uint64_t want;
};

static const struct size_case size_cases[] = {
    { "0", 0, 0 },
    { "1073741824", 0, 1073741824u },
    { "18446744073709551615", 0, UINT64_MAX },
    { "18446744073709551616", -1, 0 },
    { "99999999999999999999999", -1, 0 },
    { "512K", 0, 512u * 1024 },
    { "512M", 0, 512ull << 20 },
    { "10G", 0, 10ull << 30 },
    { "2T", 0, 2ull << 40 },
    { "1KiB", 0, 1024 },
    { "64MiB", 0, 64ull << 20 },
    { "1.5GiB", 0, 1610612736u },
    { "1.5G", 0, 1610612736u },
    { "0.5TiB", 0, 1ull << 39 },
    { "1KB", 0, 1000 },
    { "5MB", 0, 5000000u },
    { "1.5GB", 0, 1500000000u },
    { "3TB", 0, 3000000000000ull },
    { "1.000001M", 0, 1048577u },        /* 1048577.048576, rounded down */
    { "0.1K", 0, 102 },                  /* 102.4 */
    { "007G", 0, 7ull << 30 },
    { "16777215TiB", 0, 16777215ull << 40 },
    { "16777216TiB", -1, 0 },            /* 2^64 */
    { "16777215.999999TiB", 0, (16777215ull << 40) + 1099510528264ull },
    { "18446744073.709552GB", -1, 0 },   /* just past 2^64 */
    { "1.1234567G", -1, 0 },             /* more than 6 decimals */
    { "", -1, 0 },
    { "G", -1, 0 },
    { ".5G", -1, 0 },
    { "1.G", -1, 0 },
    { "1.5", -1, 0 },                    /* a fraction of a byte: the unit is missing */
    { "1..5G", -1, 0 },
    { "-1", -1, 0 },
    { "+1", -1, 0 },
    { " 1G", -1, 0 },
    { "1G ", -1, 0 },
    { "1 G", -1, 0 },
    { "1g", -1, 0 },
    { "1gib", -1, 0 },
    { "1Gi", -1, 0 },
    { "1GIB", -1, 0 },
    { "1B", -1, 0 },
    { "1P", -1, 0 },
    { "1e9", -1, 0 },
    { "0x10", -1, 0 },
    { "1,5G", -1, 0 },
    { "10GG", -1, 0 },
};

static void size_parse_cases(void)
{
    for (size_t i = 0; i < sizeof size_cases / sizeof size_cases[0]; i++) {
        const struct size_case *sc = &size_cases[i];
        uint64_t v = 12345;
        int rc = conf_size_parse(sc->in, &v);
        CHECK_CASE(rc == sc->rc, sc->in, "rc %d, want %d", rc, sc->rc);
        if (sc->rc == 0)
            CHECK_CASE(v == sc->want, sc->in, "got %llu, want %llu", (unsigned long long)v,
                       (unsigned long long)sc->want);
        else
            CHECK_CASE(v == 12345, sc->in, "a refused size changed *out");
    }
    uint64_t v = 7;
    CU_ASSERT_EQUAL(conf_size_parse(NULL, &v), -1);
    CU_ASSERT_EQUAL(v, 7);
}

static void users_in_file_replace_default_user(void)
{
    struct conf c;
    char err[512];
    defaults(&c);
    const char *json = "{\"users\":[" U1 ",{\"name\":\"b\",\"access_key\":\"AK2\","
                       "\"secret_key\":\"s2\"," PERM_R "}]}";
    CU_ASSERT_EQUAL_FATAL(load_text(&c, json, 0600, err, sizeof err), 0);
    CU_ASSERT_FALSE(c.default_credentials);
    CU_ASSERT_EQUAL_FATAL(c.n_users, 2);
    CU_ASSERT_STRING_EQUAL(c.users[0].name, "a");
    CU_ASSERT_STRING_EQUAL(c.users[0].access_key, "AK1");
    CU_ASSERT_STRING_EQUAL(c.users[0].secret_key, "s1");
    CU_ASSERT_STRING_EQUAL(c.users[1].access_key, "AK2");
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), 0);
    conf_free(&c);
}

/* The source tree: SHARDGATE_SRC when set (as ctest's integration tests do),
 * otherwise derived from this file's absolute path as CMake compiles it. */
static void src_root(char *out, size_t outlen)
{
    const char *env = getenv("SHARDGATE_SRC");
    if (env != NULL && env[0] != '\0') {
        snprintf(out, outlen, "%s", env);
        return;
    }
    snprintf(out, outlen, "%s", __FILE__);
    char *p = strstr(out, "tests/unit/test_conf.c");
    if (p != NULL)
        *p = '\0';
    else
        snprintf(out, outlen, ".");
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    char *buf = calloc(1, 65536);
    if (buf != NULL) {
        size_t n = fread(buf, 1, 65535, f);
        buf[n] = '\0';
    }
    fclose(f);
    return buf;
}

static void example_config_loads_and_names_every_key(void)
{
    static const char *const keys[] = { "\"listen\"", "\"data_dir\"", "\"region\"",
                                        "\"vhost_domain\"", "\"threads\"", "\"log_level\"",
                                        "\"shutdown_grace_s\"", "\"max_xml_body\"",
                                        "\"max_header_bytes\"", "\"users\"", "\"name\"",
                                        "\"access_key\"", "\"secret_key\"",
                                        "\"secret_key_env\"", "\"permissions\"",
                                        "\"buckets\"", "\"public_read\"", "\"cold_url\"",
                                        "\"cold_ca_path\"", "\"cold_connect_timeout_ms\"",
                                        "\"cold_request_timeout_ms\"", "\"cold_retries\"",
                                        "\"cold_first_byte_timeout_ms\"",
                                        "\"revalidate_timeout_ms\"",
                                        "\"spool_dir\"", "\"metrics_public\"", "\"sigv2\"", "\"cache\"",
                                        "\"dir\"", "\"size\"", "\"high_watermark\"",
                                        "\"low_watermark\"", "\"fill_workers\"",
                                        "\"wait_timeout_ms\"", "\"on_write\"",
                                        "\"consistency\"", "\"cold_bucket\"",
                                        "\"state_dir\"", "\"mpu_max_age\"" };
    char root[512], path[1024], err[1024];
    src_root(root, sizeof root);
    snprintf(path, sizeof path, "%s/conf/shardgate.example.json", root);
    char *text = read_all(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CHECK_CASE(strstr(text, keys[i]) != NULL, keys[i], "missing from the example");
    struct conf c;
    defaults(&c);
    /* a copy with mode 0600: the checked-in file's mode depends on the checkout */
    setenv("SHARDGATE_BACKUP_SECRET_KEY", "backup-secret-from-env", 1);
    int rc = load_text(&c, text, 0600, err, sizeof err);
    unsetenv("SHARDGATE_BACKUP_SECRET_KEY");
    CU_ASSERT_EQUAL(rc, 0);
    if (rc != 0)
        fprintf(stderr, "example: %s\n", err);
    CU_ASSERT_FALSE(c.default_credentials);
    CU_ASSERT_TRUE(c.n_users >= 1);
    CU_ASSERT_PTR_NOT_NULL(c.vhost_domain);
    CU_ASSERT_PTR_NOT_NULL(c.cache_dir);
    int immutable = 0, renamed = 0;
    for (size_t i = 0; i < c.n_buckets; i++) {
        immutable += c.buckets[i].has_consistency
                     && c.buckets[i].consistency == CONF_CONSISTENCY_IMMUTABLE;
        renamed += c.buckets[i].cold_bucket != NULL;
    }
    CU_ASSERT_TRUE(immutable >= 1);
    CU_ASSERT_TRUE(renamed >= 1);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), 0);
    conf_free(&c);
    free(text);
}

/* ---- the chmod-600 rule ---- */

static void secret_file_open_to_group_or_others_is_refused(void)
{
    static const mode_t modes[] = { 0644, 0640, 0604, 0620, 0602, 0660, 0666 };
    const char *json = "{\"users\":[" U1 "]}";
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        char name[16], err[1024] = "";
        struct conf c;
        snprintf(name, sizeof name, "mode %04o", (unsigned)modes[i]);
        defaults(&c);
        int rc = load_text(&c, json, modes[i], err, sizeof err);
        CHECK_CASE(rc == -1, name, "rc %d", rc);
        CHECK_CASE(strstr(err, "chmod 600") != NULL, name, "message \"%s\"", err);
        CHECK_CASE(is_default(&c), name, "conf changed");
        conf_free(&c);
    }
}

static void secret_file_owner_only_is_accepted(void)
{
    static const mode_t modes[] = { 0600, 0400 };
    const char *json = "{\"users\":[" U1 "]}";
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        struct conf c;
        char err[512];
        defaults(&c);
        CU_ASSERT_EQUAL(load_text(&c, json, modes[i], err, sizeof err), 0);
        conf_free(&c);
    }
}

static void file_without_users_may_be_world_readable(void)
{
    struct conf c;
    char err[512];
    defaults(&c);
    CU_ASSERT_EQUAL(load_text(&c, "{\"threads\":4}", 0644, err, sizeof err), 0);
    CU_ASSERT_EQUAL(c.threads, 4);
    conf_free(&c);
}

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

/* ---- the error buffer ---- */

static void error_buffer_truncates_and_stays_terminated(void)
{
    struct conf c;
    char err[8];
    memset(err, 'x', sizeof err);
    defaults(&c);
    CU_ASSERT_EQUAL(conf_set_flag(&c, "threads", "999", err, sizeof err), -1);
    CU_ASSERT_EQUAL(err[sizeof err - 1], '\0');
    CU_ASSERT_EQUAL(strncmp(err, "--threa", 7), 0);
    /* a NULL buffer of length 0 is allowed */
    CU_ASSERT_EQUAL(conf_set_flag(&c, "threads", "999", NULL, 0), -1);
    /* success clears an old message */
    char big[64] = "stale";
    CU_ASSERT_EQUAL(conf_set_flag(&c, "threads", "2", big, sizeof big), 0);
    CU_ASSERT_STRING_EQUAL(big, "");
    conf_free(&c);
}

/* Secrets never appear in messages, even when the secret is what is wrong. */
static void messages_never_echo_secret_keys(void)
{
    struct conf c;
    char err[1024];
    defaults(&c);
    const char *json = "{\"users\":[{\"name\":\"a\",\"access_key\":\"AK\","
                       "\"secret_key\":\"TOPSECRET\",\"extra\":1}]}";
    CU_ASSERT_EQUAL(load_text(&c, json, 0600, err, sizeof err), -1);
    CU_ASSERT_PTR_NULL(strstr(err, "TOPSECRET"));
    CU_ASSERT_EQUAL(load_text(&c, json, 0644, err, sizeof err), -1);
    CU_ASSERT_PTR_NULL(strstr(err, "TOPSECRET"));
    conf_free(&c);
}

/* ---- permissions, secret_key_env, buckets ---- */

static const struct conf_perm *perm_of(const struct conf_user *u, const char *bucket)
{
    for (size_t i = 0; i < u->n_perms; i++)
        if (strcmp(u->perms[i].bucket, bucket) == 0)
            return &u->perms[i];
    return NULL;
}

static void default_root_is_admin_on_every_bucket(void)
{
    struct conf c;
    defaults(&c);
    CU_ASSERT_EQUAL_FATAL(c.users[0].n_perms, 1);
    CU_ASSERT_STRING_EQUAL(c.users[0].perms[0].bucket, "*");
    CU_ASSERT_EQUAL(c.users[0].perms[0].level, CONF_PERM_ADMIN);
    CU_ASSERT_EQUAL(c.n_buckets, 0);
    conf_free(&c);
}

/* A root made from the environment alone (no users at all before) is admin. */
static void env_root_without_users_is_admin(void)
{
    struct conf c;
    char err[512];
    defaults(&c);
    conf_free(&c);
    CU_ASSERT_FATAL(conf_init_defaults(&c) == 0);
    users_free_for_test(&c);
    env_clear();
    setenv("SHARDGATE_ACCESS_KEY", "ENVAK", 1);
    setenv("SHARDGATE_SECRET_KEY", "ENVSK", 1);
    CU_ASSERT_EQUAL(conf_apply_env(&c, err, sizeof err), 0);
    env_clear();
    CU_ASSERT_EQUAL_FATAL(c.n_users, 1);
    const struct conf_perm *p = perm_of(&c.users[0], "*");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->level, CONF_PERM_ADMIN);
    conf_free(&c);
}

/* The cold tier's own credentials: from the file or a named variable,
 * both halves or neither, and a file holding the secret must be private. */
static void cold_credentials_load_and_are_checked(void)
{
    struct conf c;
    char err[1024];
    defaults(&c);
    const char *good = "{\"cold_url\": \"http://127.0.0.1:9000\", \"cold_access_key\": \"AK\", "
                       "\"cold_secret_key\": \"cold-s3cr3t\", \"cold_region\": \"eu-west-1\", "
                       "\"cold_virtual_hosted\": true}";
    CU_ASSERT_EQUAL_FATAL(load_text(&c, good, 0600, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(c.cold_access_key, "AK");
    CU_ASSERT_STRING_EQUAL(c.cold_secret_key, "cold-s3cr3t");
    CU_ASSERT_STRING_EQUAL(c.cold_region, "eu-west-1");
    CU_ASSERT_TRUE(c.cold_virtual_hosted);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), 0);
    conf_free(&c);

    defaults(&c);
    CU_ASSERT_EQUAL(load_text(&c, good, 0644, err, sizeof err), -1);   /* secret, readable */
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "chmod 600"));
    CU_ASSERT_PTR_NULL(strstr(err, "cold-s3cr3t"));
    conf_free(&c);

    defaults(&c);
    CU_ASSERT_EQUAL(load_text(&c, "{\"cold_access_key\": \"AK\"}", 0600, err, sizeof err), 0);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "go together"));
    conf_free(&c);

    defaults(&c);
    unsetenv("SG_TEST_COLD_SECRET");
    CU_ASSERT_EQUAL(load_text(&c, "{\"cold_secret_key_env\": \"SG_TEST_COLD_SECRET\"}", 0644,
                              err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "SG_TEST_COLD_SECRET is not set"));
    conf_free(&c);

    defaults(&c);
    setenv("SG_TEST_COLD_SECRET", "from-env", 1);
    CU_ASSERT_EQUAL(load_text(&c, "{\"cold_access_key\": \"AK\", \"cold_secret_key_env\": "
                              "\"SG_TEST_COLD_SECRET\"}", 0644, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(c.cold_secret_key, "from-env");
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), 0);
    unsetenv("SG_TEST_COLD_SECRET");
    conf_free(&c);
}

static void permissions_and_buckets_load(void)
{
    struct conf c;
    char err[512];
    defaults(&c);
    const char *json =
        "{\"users\":["
        "{\"name\":\"r\",\"access_key\":\"AK1\",\"secret_key\":\"s1\",\"permissions\":{\"*\":\"admin\"}},"
        "{\"name\":\"t\",\"access_key\":\"AK2\",\"secret_key\":\"s2\","
        "\"permissions\":{\"*\":\"read\",\"ckpt\":\"write\",\"private\":\"none\"}},"
        "{\"name\":\"n\",\"access_key\":\"AK3\",\"secret_key\":\"s3\",\"permissions\":{}}],"
        "\"buckets\":{\"datasets\":{\"public_read\":true},\"ckpt\":{\"public_read\":false},"
        "\"plain\":{}}}";
    CU_ASSERT_EQUAL_FATAL(load_text(&c, json, 0600, err, sizeof err), 0);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(c.n_users, 3);
    CU_ASSERT_EQUAL(c.users[1].n_perms, 3);
    const struct conf_perm *p = perm_of(&c.users[1], "ckpt");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->level, CONF_PERM_WRITE);
    p = perm_of(&c.users[1], "private");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->level, CONF_PERM_NONE);
    p = perm_of(&c.users[1], "*");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->level, CONF_PERM_READ);
    CU_ASSERT_EQUAL(c.users[2].n_perms, 0);
    CU_ASSERT_EQUAL(c.n_buckets, 3);
    const struct conf_bucket *b = conf_bucket_find(&c, "datasets");
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_TRUE(b->public_read);
    b = conf_bucket_find(&c, "ckpt");
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_FALSE(b->public_read);
    b = conf_bucket_find(&c, "plain");
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_FALSE(b->public_read);
    CU_ASSERT_PTR_NULL(conf_bucket_find(&c, "other"));
    CU_ASSERT_PTR_NULL(conf_bucket_find(&c, NULL));
    /* a later merge (environment) copies the whole conf: permissions and
     * buckets survive it, and the env keys keep users[0]'s permissions */
    env_clear();
    setenv("SHARDGATE_ACCESS_KEY", "ENVAK", 1);
    setenv("SHARDGATE_SECRET_KEY", "ENVSK", 1);
    CU_ASSERT_EQUAL(conf_apply_env(&c, err, sizeof err), 0);
    env_clear();
    CU_ASSERT_STRING_EQUAL(c.users[0].access_key, "ENVAK");
    p = perm_of(&c.users[0], "*");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->level, CONF_PERM_ADMIN);
    CU_ASSERT_EQUAL(c.users[1].n_perms, 3);
    CU_ASSERT_EQUAL(c.n_buckets, 3);
    CU_ASSERT_PTR_NOT_NULL(conf_bucket_find(&c, "datasets"));
    conf_free(&c);
}

static void bucket_consistency_and_cold_bucket_load(void)
{
    struct conf c;
    char err[512];
    defaults(&c);
    const char *json =
        "{\"cold_url\":\"http://minio:9000\","
        "\"buckets\":{\"datasets\":{\"public_read\":true,\"consistency\":\"immutable\"},"
        "\"ckpt\":{\"consistency\":\"always\",\"cold_bucket\":\"prod-ckpt.v2\"},"
        "\"logs\":{\"consistency\":\"ttl:5\"},\"plain\":{}}}";
    CU_ASSERT_EQUAL_FATAL(load_text(&c, json, 0600, err, sizeof err), 0);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), 0);
    /* twice: the second time after a merge step has deep-copied the buckets */
    for (int pass = 0; pass < 2; pass++) {
        const struct conf_bucket *b = conf_bucket_find(&c, "datasets");
        CU_ASSERT_PTR_NOT_NULL_FATAL(b);
        CU_ASSERT_TRUE(b->public_read);
        CU_ASSERT_TRUE(b->has_consistency);
        CU_ASSERT_EQUAL(b->consistency, CONF_CONSISTENCY_IMMUTABLE);
        CU_ASSERT_EQUAL(b->ttl_s, 0);
        CU_ASSERT_PTR_NULL(b->cold_bucket);
        b = conf_bucket_find(&c, "ckpt");
        CU_ASSERT_PTR_NOT_NULL_FATAL(b);
        CU_ASSERT_EQUAL(b->consistency, CONF_CONSISTENCY_ALWAYS);
        CU_ASSERT_PTR_NOT_NULL_FATAL(b->cold_bucket);
        CU_ASSERT_STRING_EQUAL(b->cold_bucket, "prod-ckpt.v2");
        b = conf_bucket_find(&c, "logs");
        CU_ASSERT_PTR_NOT_NULL_FATAL(b);
        CU_ASSERT_EQUAL(b->consistency, CONF_CONSISTENCY_TTL);
        CU_ASSERT_EQUAL(b->ttl_s, 5);
        b = conf_bucket_find(&c, "plain");
        CU_ASSERT_PTR_NOT_NULL_FATAL(b);
        CU_ASSERT_FALSE(b->has_consistency);
        CU_ASSERT_PTR_NULL(b->cold_bucket);
        env_clear();
        setenv("SHARDGATE_CONSISTENCY", "immutable", 1);
        CU_ASSERT_EQUAL(conf_apply_env(&c, err, sizeof err), 0);
        env_clear();
    }
    /* a failed merge keeps the buckets (and frees its own copy) */
    setenv("SHARDGATE_CACHE_SIZE", "tiny", 1);
    CU_ASSERT_EQUAL(conf_apply_env(&c, err, sizeof err), -1);
    env_clear();
    CU_ASSERT_EQUAL(c.n_buckets, 4);
    /* a later "buckets" replaces the whole table */
    CU_ASSERT_EQUAL_FATAL(load_text(&c, "{\"buckets\":{\"only\":{\"cold_bucket\":\"other\"}}}",
                                    0600, err, sizeof err), 0);
    CU_ASSERT_EQUAL(c.n_buckets, 1);
    CU_ASSERT_PTR_NULL(conf_bucket_find(&c, "ckpt"));
    conf_free(&c);
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

static void level_names_round_trip(void)
{
    CU_ASSERT_STRING_EQUAL(conf_perm_level_name(CONF_PERM_NONE), "none");
    CU_ASSERT_STRING_EQUAL(conf_perm_level_name(CONF_PERM_READ), "read");
    CU_ASSERT_STRING_EQUAL(conf_perm_level_name(CONF_PERM_WRITE), "write");
    CU_ASSERT_STRING_EQUAL(conf_perm_level_name(CONF_PERM_ADMIN), "admin");
    CU_ASSERT_TRUE(CONF_PERM_NONE < CONF_PERM_READ && CONF_PERM_READ < CONF_PERM_WRITE
                   && CONF_PERM_WRITE < CONF_PERM_ADMIN);
}

static void secret_key_env_is_read_at_load_and_never_echoed(void)
{
    struct conf c;
    char err[1024];
    defaults(&c);
    setenv("SG_TEST_SECRET_B", "ENV-TOPSECRET", 1);
    const char *json = "{\"users\":[" U1 ",{\"name\":\"b\",\"access_key\":\"AK2\","
                       "\"secret_key_env\":\"SG_TEST_SECRET_B\"," PERM_R "}]}";
    CU_ASSERT_EQUAL_FATAL(load_text(&c, json, 0600, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(c.users[1].secret_key, "ENV-TOPSECRET");
    /* read at load: changing the variable later changes nothing */
    setenv("SG_TEST_SECRET_B", "changed", 1);
    CU_ASSERT_STRING_EQUAL(c.users[1].secret_key, "ENV-TOPSECRET");
    /* a later failure in the same user must not echo the value */
    setenv("SG_TEST_SECRET_B", "ENV-TOPSECRET", 1);
    const char *bad = "{\"users\":[{\"name\":\"b\",\"access_key\":\"A/K\","
                      "\"secret_key_env\":\"SG_TEST_SECRET_B\"," PERM_R "}]}";
    CU_ASSERT_EQUAL(load_text(&c, bad, 0600, err, sizeof err), -1);
    CU_ASSERT_PTR_NULL(strstr(err, "ENV-TOPSECRET"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "users[0].access_key"));
    unsetenv("SG_TEST_SECRET_B");
    conf_free(&c);
}

/* Only files that carry a secret_key themselves must be 0600. */
static void file_with_env_secrets_only_may_be_readable(void)
{
    struct conf c;
    char err[1024];
    defaults(&c);
    setenv("SG_TEST_SECRET_C", "sek", 1);
    const char *env_only = "{\"users\":[{\"name\":\"c\",\"access_key\":\"AKC\","
                           "\"secret_key_env\":\"SG_TEST_SECRET_C\"," PERM_R "}]}";
    CU_ASSERT_EQUAL(load_text(&c, env_only, 0644, err, sizeof err), 0);
    const char *mixed = "{\"users\":[" U1 ",{\"name\":\"c\",\"access_key\":\"AKC\","
                        "\"secret_key_env\":\"SG_TEST_SECRET_C\"," PERM_R "}]}";
    CU_ASSERT_EQUAL(load_text(&c, mixed, 0644, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "chmod 600"));
    unsetenv("SG_TEST_SECRET_C");
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

struct test_entry {
    const char *name;
    CU_TestFunc fn;
};

#define T(f) { #f, f }

static const struct test_entry defaults_tests[] = {
    T(defaults_match_documented_values),
    T(defaults_pass_validation),
    T(conf_free_leaves_struct_empty_and_is_idempotent),
};

static const struct test_entry file_tests[] = {
    T(bad_file_fails_naming_field_and_changes_nothing),
    T(users_over_limit_are_refused),
    T(parse_error_reports_line_and_column),
    T(error_message_starts_with_file_path),
    T(missing_file_error_names_path_and_reason),
    T(directory_is_refused_as_config),
    T(good_files_load_and_validate),
    T(file_values_reach_every_field),
    T(cold_and_cache_values_reach_every_field),
    T(cold_url_forms_are_accepted),
    T(cold_url_refusal_never_echoes_the_url),
    T(size_parse_cases),
    T(users_in_file_replace_default_user),
    T(example_config_loads_and_names_every_key),
    T(secret_file_open_to_group_or_others_is_refused),
    T(secret_file_owner_only_is_accepted),
    T(file_without_users_may_be_world_readable),
    T(messages_never_echo_secret_keys),
};

static const struct test_entry env_tests[] = {
    T(env_cases_apply_or_fail_naming_variable),
    T(env_keys_override_first_file_user_only),
};

static const struct test_entry flag_tests[] = {
    T(flag_cases_apply_or_fail_naming_flag),
    T(flags_set_the_matching_fields),
    T(new_flags_override_file_and_env),
    T(error_buffer_truncates_and_stays_terminated),
};

static const struct test_entry validate_tests[] = {
    T(validate_cases_fail_naming_field),
    T(validate_refuses_bad_permission_bucket),
    T(watermarks_are_checked_together_at_validate),
};

static const struct test_entry perm_tests[] = {
    T(default_root_is_admin_on_every_bucket),
    T(env_root_without_users_is_admin),
    T(permissions_and_buckets_load),
    T(cold_credentials_load_and_are_checked),
    T(bucket_consistency_and_cold_bucket_load),
    T(level_names_round_trip),
    T(secret_key_env_is_read_at_load_and_never_echoed),
    T(file_with_env_secrets_only_may_be_readable),
};

static int add_suite(const char *name, const struct test_entry *t, size_t n)
{
    CU_pSuite s = CU_add_suite(name, NULL, NULL);
    if (s == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (CU_add_test(s, t[i].name, t[i].fn) == NULL)
            return -1;
    return 0;
}

#define ADD_SUITE(name, arr) add_suite(name, arr, sizeof arr / sizeof arr[0])

int register_tests(void)
{
    if (ADD_SUITE("conf_defaults", defaults_tests) != 0 || ADD_SUITE("conf_file", file_tests) != 0
        || ADD_SUITE("conf_env", env_tests) != 0 || ADD_SUITE("conf_flags", flag_tests) != 0
        || ADD_SUITE("conf_validate", validate_tests) != 0
        || ADD_SUITE("conf_permissions", perm_tests) != 0)
        return -1;
    return 0;
}
