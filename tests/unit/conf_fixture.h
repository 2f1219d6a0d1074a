/* tests/unit/conf_fixture.h - what the conf/ tests (test_conf*.c) share: a
 * table-row failure with its case name, temporary config files, a clean
 * environment, the check that a conf still holds the defaults, and the
 * registration of named test tables. */
#ifndef SG_CONF_FIXTURE_H
#define SG_CONF_FIXTURE_H

#include <CUnit/CUnit.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf.h"

int register_tests(void);

/* A user with read on every bucket, as a config file spells it. */
#define PERM_R "\"permissions\":{\"*\":\"read\"}"
#define U1 "{\"name\":\"a\",\"access_key\":\"AK1\",\"secret_key\":\"s1\"," PERM_R "}"

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

static inline const char *tmp_dir(void)
{
    const char *d = getenv("TMPDIR");
    return d != NULL && d[0] != '\0' ? d : "/tmp";
}

/* Writes `text` to a new temporary file with `mode`; the name goes to `path`.
 * Returns 0, or -1 (with a CUnit failure) when the file cannot be made. */
static inline int tmp_write(const char *text, mode_t mode, char *path, size_t pathlen)
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
static inline int load_text(struct conf *c, const char *text, mode_t mode, char *err, size_t errlen)
{
    char path[512];
    if (tmp_write(text, mode, path, sizeof path) != 0)
        return -2;
    int rc = conf_load_file(c, path, err, errlen);
    unlink(path);
    return rc;
}

static inline void defaults(struct conf *c)
{
    CU_ASSERT_FATAL(conf_init_defaults(c) == 0);
}

/* Drops every user (as a conf with no users at all), through conf_free's
 * own path: free a copy holding only the users. */
static inline void users_free_for_test(struct conf *c)
{
    struct conf only;
    memset(&only, 0, sizeof only);
    only.users = c->users;
    only.n_users = c->n_users;
    conf_free(&only);
    c->users = NULL;
    c->n_users = 0;
}

static inline void env_clear(void)
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
static inline int is_default(const struct conf *c)
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

struct test_entry {
    const char *name;
    CU_TestFunc fn;
};

#define T(f) { #f, f }

static inline int add_suite(const char *name, const struct test_entry *t, size_t n)
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

#endif
