/* conf/conf_env_flags.c - the SHARDGATE_* environment variables and the
 * command-line flags: which variable or flag sets which option, through the
 * setters of conf_values.c. The environment is merged on a copy and committed
 * whole; a flag is a single setter, which checks before it changes anything. */
#include "conf.h"
#include "conf_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- environment ---- */

/* A variable set to "" counts as set, so "SHARDGATE_SECRET_KEY=" is an error
 * rather than a silent fallback to other credentials. */
static int env_apply_keys(struct conf *c, char *err, size_t errlen)
{
    const char *ak = getenv("SHARDGATE_ACCESS_KEY");
    const char *sk = getenv("SHARDGATE_SECRET_KEY");

    if (ak == NULL && sk == NULL)
        return 0;
    if (ak == NULL || sk == NULL)
        return conf_fail(err, errlen, "SHARDGATE_ACCESS_KEY and SHARDGATE_SECRET_KEY must be set "
                         "together (only %s is set)",
                         ak != NULL ? "SHARDGATE_ACCESS_KEY" : "SHARDGATE_SECRET_KEY");
    if (!conf_access_key_ok(ak))
        return conf_fail(err, errlen, "SHARDGATE_ACCESS_KEY: " ACCESS_KEY_HELP);
    if (sk[0] == '\0')
        return conf_fail(err, errlen, "SHARDGATE_SECRET_KEY: must not be empty");
    if (c->n_users == 0) {
        c->users = calloc(1, sizeof *c->users);
        if (c->users == NULL)
            return conf_fail(err, errlen, "SHARDGATE_ACCESS_KEY: out of memory");
        c->n_users = 1;
        if ((c->users[0].name = strdup("root")) == NULL || conf_perms_set_root(&c->users[0]) != 0)
            return conf_fail(err, errlen, "SHARDGATE_ACCESS_KEY: out of memory");
    }
    if (conf_replace_str(&c->users[0].access_key, ak) != 0
        || conf_replace_str(&c->users[0].secret_key, sk) != 0)
        return conf_fail(err, errlen, "SHARDGATE_ACCESS_KEY: out of memory");
    c->default_credentials = false;
    return 0;
}

static const struct {
    const char *name;
    conf_str_setter set;
} env_vars[] = {
    { "SHARDGATE_LISTEN", conf_set_listen },
    { "SHARDGATE_DATA_DIR", conf_set_data_dir },
    { "SHARDGATE_REGION", conf_set_region },
    { "SHARDGATE_LOG_LEVEL", conf_set_log_level },
    { "SHARDGATE_COLD_URL", conf_set_cold_url },
    { "SHARDGATE_CACHE_DIR", conf_set_cache_dir },
    { "SHARDGATE_CACHE_SIZE", conf_set_cache_size },
    { "SHARDGATE_CONSISTENCY", conf_set_consistency },
    { "SHARDGATE_STATE_DIR", conf_set_state_dir },
    { "SHARDGATE_MPU_MAX_AGE", conf_set_mpu_max_age },
    { "SHARDGATE_CACHE_ENGINE", conf_set_cache_engine },
    { "SHARDGATE_LOG_FORMAT", conf_set_log_format },
    { "SHARDGATE_LOG_FILE", conf_set_log_file },
};

int conf_apply_env(struct conf *c, char *err, size_t errlen)
{
    struct conf tmp;

    conf_err_clear(err, errlen);
    if (conf_copy(&tmp, c) != 0)
        return conf_fail(err, errlen, "environment: out of memory");
    if (env_apply_keys(&tmp, err, errlen) != 0)
        goto bad;
    for (size_t i = 0; i < sizeof env_vars / sizeof env_vars[0]; i++) {
        const char *v = getenv(env_vars[i].name);
        if (v != NULL && env_vars[i].set(&tmp, env_vars[i].name, v, err, errlen) != 0)
            goto bad;
    }
    conf_commit(c, &tmp);
    return 0;
bad:
    conf_free(&tmp);
    return -1;
}

/* ---- flags ---- */


static const struct {
    const char *name;     /* without dashes */
    const char *field;    /* as the user typed it */
    conf_str_setter set;
} flags[] = {
    { "listen", "--listen", conf_set_listen },
    { "data", "--data", conf_set_data_dir },
    { "region", "--region", conf_set_region },
    { "vhost-domain", "--vhost-domain", conf_set_vhost_domain },
    { "threads", "--threads", conf_set_threads },
    { "log-level", "--log-level", conf_set_log_level },
    { "cold", "--cold", conf_set_cold_url },
    { "cache-dir", "--cache-dir", conf_set_cache_dir },
    { "cache-size", "--cache-size", conf_set_cache_size },
    { "consistency", "--consistency", conf_set_consistency },
    { "state-dir", "--state-dir", conf_set_state_dir },
    { "log-format", "--log-format", conf_set_log_format },
    { "log-file", "--log-file", conf_set_log_file },
};

/* Each setter checks its value before touching `c`, so a single flag needs
 * no copy to stay all-or-nothing. */
int conf_set_flag(struct conf *c, const char *flag, const char *value, char *err, size_t errlen)
{
    conf_err_clear(err, errlen);
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        if (strcmp(flag, flags[i].name) != 0)
            continue;
        if (value == NULL)
            return conf_fail(err, errlen, "%s: requires a value", flags[i].field);
        return flags[i].set(c, flags[i].field, value, err, errlen);
    }
    return conf_fail(err, errlen, "unknown flag \"--%.64s\" (allowed: --listen, --data, --region, "
                     "--vhost-domain, --threads, --log-level, --cold, --cache-dir, --cache-size, "
                     "--consistency, --state-dir, --log-format, --log-file)", flag);
}
