/* tests/unit/test_conf.c - conf/: defaults, the JSON file (every refusal names
 * its field, every value reaches its field), sizes, the example config, the
 * chmod-600 rule for files with secret keys and the error buffer. Mostly
 * tables: one row per case. The environment, flags and conf_validate are in
 * test_conf_env.c, users and permissions in test_conf_perm.c. */
#include "conf_fixture.h"
#include "conf_int.h"

/* ---- defaults ---- */

static void defaults_match_documented_values(void)
{
    struct conf c;
    defaults(&c);
    CU_ASSERT_STRING_EQUAL(c.listen_addr, "127.0.0.1");
    CU_ASSERT_EQUAL(c.listen_port, 9000);
    CU_ASSERT_EQUAL(c.threads, 0);
    CU_ASSERT_EQUAL(c.body_threads, 0);
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
    CU_ASSERT_EQUAL(c.cache_memory, 64u << 20);
    CU_ASSERT_EQUAL(c.cache_header_memory, 32u << 20);
    CU_ASSERT_EQUAL(c.cold_retries, 2);
    CU_ASSERT_STRING_EQUAL(c.spool_dir, "/tmp");
    CU_ASSERT_PTR_NULL(c.cache_dir);
    CU_ASSERT_EQUAL(c.cache_size, 10ull * 1024 * 1024 * 1024);
    CU_ASSERT_EQUAL(c.cache_high_pct, 90);
    CU_ASSERT_EQUAL(c.cache_low_pct, 80);
    CU_ASSERT_EQUAL(c.cache_fill_workers, 8);
    CU_ASSERT_EQUAL(c.cache_wait_ms, 30000);
    CU_ASSERT_FALSE(c.cache_on_write);
    CU_ASSERT_EQUAL(c.cache_fill_io, CONF_FILL_IO_DIRECT);
    CU_ASSERT_EQUAL(c.cache_read_path, CONF_READ_COPY);
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

static const struct bad_case bad_files[] = {
    { "unknown_top_key_lists_allowed", "{\"lsten\":\"1.2.3.4:9000\"}",
      "unknown key \"lsten\" (allowed: listen, data_dir, cold_url, cold_ca_path, "
      "cold_connect_timeout_ms, cold_request_timeout_ms, cold_first_byte_timeout_ms, "
      "cold_retries, cold_access_key, "
      "cold_secret_key, cold_secret_key_env, cold_region, cold_virtual_hosted, spool_dir, "
      "state_dir, mpu_max_age, cache, region, vhost_domain, threads, body_threads, log_level, "
      "shutdown_grace_s, prefetch_keep_s, max_xml_body, "
      "max_header_bytes, metrics_public, sigv2, users, buckets" },
    { "prefetch_keep_zero", "{\"prefetch_keep_s\": 0}", "prefetch_keep_s: must be an integer" },
    { "body_threads_too_many", "{\"body_threads\": 100000}",
      "body_threads: must be an integer from 0 to 256" },
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
      "buckets.a1: unknown key \"public-read\" (allowed: public_read, consistency, cold_bucket, write)" },
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
      "revalidate_timeout_ms, memory, fill_io, header_memory)" },
    { "cache_memory_bad", "{\"cache\":{\"memory\":\"lots\"}}",
      "cache.memory: must be 0 (off) or a size up to 64 GiB" },
    { "cache_memory_too_big", "{\"cache\":{\"memory\":\"65GiB\"}}",
      "cache.memory: must be 0 (off) or a size up to 64 GiB" },
    { "cache_memory_negative", "{\"cache\":{\"memory\":-1}}",
      "cache.memory: must be 0 (off) or a size up to 64 GiB" },
    { "cache_header_memory_bad", "{\"cache\":{\"header_memory\":true}}",
      "cache.header_memory: must be 0 (off) or a size up to 64 GiB" },
    { "cache_header_memory_too_big", "{\"cache\":{\"header_memory\":\"1TiB\"}}",
      "cache.header_memory: must be 0 (off) or a size up to 64 GiB" },
    { "cache_engine_bad", "{\"cache\": {\"engine\": \"epoll\"}}",
      "cache.engine: must be \"auto\", \"io_uring\" or \"threads\"" },
    { "cache_revalidate_timeout_zero", "{\"cache\":{\"revalidate_timeout_ms\":0}}",
      "cache.revalidate_timeout_ms: must be an integer from 1 to 60000" },
    { "cache_revalidate_timeout_too_long", "{\"cache\":{\"revalidate_timeout_ms\":60001}}",
      "cache.revalidate_timeout_ms: must be an integer from 1 to 60000" },
    { "cache_fill_io_bad", "{\"cache\": {\"fill_io\": \"mmap\"}}",
      "cache.fill_io: must be \"direct\", \"staging\" or \"buffered\"" },
    { "cache_read_path_bad", "{\"cache\": {\"read_path\": \"mmap\"}}",
      "cache.read_path: must be \"copy\", \"sendfile\" or \"io_uring\" (\"auto\" is \"copy\")" },
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
    { "bucket_write_unknown", "{\"buckets\":{\"a1\":{\"write\":\"later\"}}}",
      "buckets.a1.write: must be \"through\"" },
    { "bucket_write_no_prefixes", "{\"buckets\":{\"a1\":{\"write\":{}}}}",
      "buckets.a1.write: an object of 1 to 64 key prefixes" },
    { "bucket_write_prefix_mode", "{\"buckets\":{\"a1\":{\"write\":{\"ck/\":\"later\"}}}}",
      "buckets.a1.write.\"ck/\": must be \"back\" or \"through\"" },
    { "write_back_unknown_key", "{\"write_back\":{\"max_dirt\":1}}",
      "write_back: unknown key \"max_dirt\"" },
    { "write_back_bad_size", "{\"write_back\":{\"max_dirty\":\"lots\"}}",
      "write_back.max_dirty: must be a size" },
    { "write_back_bad_stage_io", "{\"write_back\":{\"stage_io\":\"mmap\"}}",
      "write_back.stage_io: must be \"direct\", \"uring\" or \"write\"" },
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

/* "write": "back" stages writes in the cache directory: without one the
 * configuration is refused, naming the bucket; with one it loads. */
static void write_back_needs_a_cache_dir(void)
{
    struct conf c;
    char err[512] = "";
    defaults(&c);
    CU_ASSERT_EQUAL_FATAL(load_text(&c, "{\"buckets\":{\"ck\":{\"write\":\"back\"}}}", 0600,
                                    err, sizeof err), 0);
    CU_ASSERT_TRUE(c.n_buckets == 1 && c.buckets[0].write_back);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "buckets.ck.write: \"back\" stages writes in the cache "
                                       "directory"));
    conf_free(&c);
    defaults(&c);
    CU_ASSERT_EQUAL_FATAL(load_text(&c, "{\"cache\":{\"dir\":\"/tmp/c\"},\"buckets\":{\"ck\":"
                                    "{\"write\":\"back\"}},\"write_back\":{\"max_dirty\":"
                                    "\"2GiB\",\"dirty_wait_ms\":50,\"through_timeout_ms\":"
                                    "1500,\"upload_bandwidth\":\"100MiB\",\"stage_io\":"
                                    "\"uring\"}}", 0600, err, sizeof err), 0);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), 0);
    CU_ASSERT_EQUAL(c.wb_max_dirty, 2ull << 30);
    CU_ASSERT_EQUAL(c.wb_dirty_wait_ms, 50);
    CU_ASSERT_EQUAL(c.wb_through_timeout_ms, 1500);
    CU_ASSERT_EQUAL(c.wb_upload_bandwidth, 100ull << 20);
    CU_ASSERT_EQUAL(c.wb_stage_io, CONF_STAGE_URING);
    conf_free(&c);
    /* by key prefix: the bucket is written back when any prefix is */
    defaults(&c);
    CU_ASSERT_EQUAL_FATAL(load_text(&c, "{\"cache\":{\"dir\":\"/tmp/c\"},\"buckets\":{\"ml\":"
                                    "{\"write\":{\"ckpt/\":\"back\",\"ckpt/logs/\":\"through\"}},"
                                    "\"logs\":{\"write\":{\"\":\"through\"}}}}", 0600, err,
                                    sizeof err), 0);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(c.n_buckets, 2);
    const struct conf_bucket *ml = strcmp(c.buckets[0].name, "ml") == 0 ? &c.buckets[0]
                                                                       : &c.buckets[1];
    const struct conf_bucket *logs = ml == &c.buckets[0] ? &c.buckets[1] : &c.buckets[0];
    CU_ASSERT_TRUE(ml->write_back);
    CU_ASSERT_EQUAL_FATAL(ml->n_write_rules, 2);
    for (size_t i = 0; i < 2; i++)
        CU_ASSERT_EQUAL(ml->write_rules[i].back,
                        strcmp(ml->write_rules[i].prefix, "ckpt/") == 0);
    CU_ASSERT_FALSE(logs->write_back);   /* no prefix written back */
    struct conf copy;   /* a deep copy: the rules outlive the original (ASan) */
    CU_ASSERT_EQUAL_FATAL(conf_copy(&copy, &c), 0);
    size_t at = (size_t)(ml - c.buckets);
    conf_free(&c);
    CU_ASSERT_EQUAL_FATAL(copy.buckets[at].n_write_rules, 2);
    CU_ASSERT_TRUE(strcmp(copy.buckets[at].write_rules[0].prefix, "ckpt/") == 0 ||
                   strcmp(copy.buckets[at].write_rules[1].prefix, "ckpt/") == 0);
    conf_free(&copy);
}

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
        "\"fill_io\":\"buffered\",\"read_path\":\"sendfile\","
        "\"consistency\":\"always\",\"revalidate_timeout_ms\":250,\"memory\":\"8MiB\","
        "\"header_memory\":0}}";
    CU_ASSERT_EQUAL_FATAL(load_text(&c, json, 0600, err, sizeof err), 0);
    CU_ASSERT_EQUAL(c.cache_memory, 8u << 20);
    CU_ASSERT_EQUAL(c.cache_header_memory, 0);
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
    CU_ASSERT_EQUAL(c.cache_fill_io, CONF_FILL_IO_BUFFERED);
    CU_ASSERT_EQUAL(c.cache_read_path, CONF_READ_SENDFILE);
    CU_ASSERT_EQUAL(c.consistency, CONF_CONSISTENCY_ALWAYS);
    CU_ASSERT_EQUAL(c.consistency_ttl_s, 0);
    CU_ASSERT_EQUAL(conf_validate(&c, err, sizeof err), 0);
    /* a second file: a "cache" object changes only the keys it names, null
     * turns the cache and the S3 tier off, an integer size is bytes */
    CU_ASSERT_EQUAL_FATAL(load_text(&c, "{\"cold_url\":null,\"cold_ca_path\":null,"
                                        "\"cache\":{\"dir\":null,\"size\":2097152,"
                                        "\"consistency\":\"ttl:3600\",\"read_path\":\"auto\"}}",
                                    0600, err, sizeof err), 0);
    CU_ASSERT_PTR_NULL(c.cold_url);
    CU_ASSERT_PTR_NULL(c.cold_ca_path);
    CU_ASSERT_PTR_NULL(c.cache_dir);
    CU_ASSERT_EQUAL(c.cache_size, 2097152u);
    CU_ASSERT_EQUAL(c.consistency, CONF_CONSISTENCY_TTL);
    CU_ASSERT_EQUAL(c.consistency_ttl_s, 3600);
    CU_ASSERT_EQUAL(c.cache_read_path, CONF_READ_COPY);   /* "auto" is the default */
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
                                        "\"revalidate_timeout_ms\"", "\"memory\"",
                                        "\"spool_dir\"", "\"metrics_public\"", "\"sigv2\"", "\"cache\"",
                                        "\"dir\"", "\"size\"", "\"high_watermark\"",
                                        "\"low_watermark\"", "\"fill_workers\"",
                                        "\"wait_timeout_ms\"", "\"on_write\"",
                                        "\"consistency\"", "\"cold_bucket\"",
                                        "\"state_dir\"", "\"mpu_max_age\"", "\"write\"",
                                        "\"write_back\"", "\"max_dirty\"",
                                        "\"dirty_wait_ms\"", "\"through_timeout_ms\"",
                                        "\"stage_io\"" };
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
    int immutable = 0, renamed = 0, write_back = 0;
    for (size_t i = 0; i < c.n_buckets; i++) {
        immutable += c.buckets[i].has_consistency
                     && c.buckets[i].consistency == CONF_CONSISTENCY_IMMUTABLE;
        renamed += c.buckets[i].cold_bucket != NULL;
        write_back += c.buckets[i].write_back;
    }
    CU_ASSERT_EQUAL(write_back, 1);
    CU_ASSERT_EQUAL(c.wb_max_dirty, 64ull << 30);
    CU_ASSERT_EQUAL(c.wb_dirty_wait_ms, 10000);
    CU_ASSERT_EQUAL(c.wb_through_timeout_ms, 30000);
    CU_ASSERT_EQUAL(c.wb_stage_io, CONF_STAGE_DIRECT);
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
    T(write_back_needs_a_cache_dir),
    T(secret_file_open_to_group_or_others_is_refused),
    T(secret_file_owner_only_is_accepted),
    T(file_without_users_may_be_world_readable),
    T(messages_never_echo_secret_keys),
    T(error_buffer_truncates_and_stays_terminated),
};

int register_tests(void)
{
    if (ADD_SUITE("conf_defaults", defaults_tests) != 0 || ADD_SUITE("conf_file", file_tests) != 0)
        return -1;
    return 0;
}
