/* tests/unit/test_conf_perm.c - conf/: users, permissions per bucket, the
 * cold tier's credentials, per-bucket settings and secret_key_env (read at
 * load, never echoed). */
#include "conf_fixture.h"

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

int register_tests(void)
{
    return ADD_SUITE("conf_permissions", perm_tests) != 0 ? -1 : 0;
}
