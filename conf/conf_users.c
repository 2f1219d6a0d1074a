/* conf/conf_users.c - who may do what: the config file's "users" (access
 * keys, secrets or the variables holding them, per-bucket permissions) and its
 * "buckets" object (public_read, consistency, the name in the cold tier), with
 * the bucket-name rules both use. */
#include "conf.h"
#include "conf_int.h"
#include "s3name.h"   /* sg_bucket_name_valid: a cold_bucket follows S3's rule */

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const perm_names[] = {
    [CONF_PERM_NONE] = "none", [CONF_PERM_READ] = "read",
    [CONF_PERM_WRITE] = "write", [CONF_PERM_ADMIN] = "admin",
};
_Static_assert(sizeof perm_names / sizeof perm_names[0] == CONF_PERM_ADMIN + 1,
               "a name per permission level");

const char *conf_perm_level_name(enum conf_perm_level l)
{
    return (unsigned)l < sizeof perm_names / sizeof perm_names[0] ? perm_names[l] : "?";
}

const struct conf_bucket *conf_bucket_find(const struct conf *c, const char *name)
{
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < c->n_buckets; i++)
        if (c->buckets[i].name != NULL && strcmp(c->buckets[i].name, name) == 0)
            return &c->buckets[i];
    return NULL;
}

/* Bucket names as they may appear in "permissions" and "buckets": letters,
 * digits, '.', '-', '_', starting with a letter or digit. Looser than S3's
 * rules (the store enforces those); strict enough that "*" or a path can
 * never be mistaken for a bucket. */
int conf_bucket_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > BUCKET_NAME_MAX)
        return 0;
    if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')
          || (s[0] >= '0' && s[0] <= '9')))
        return 0;
    for (const char *p = s; *p; p++) {
        char ch = *p;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')
              || ch == '-' || ch == '_' || ch == '.'))
            return 0;
    }
    return 1;
}

/* Environment variable names as POSIX shells accept them. */
static int env_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > ENV_NAME_MAX || (s[0] >= '0' && s[0] <= '9'))
        return 0;
    for (const char *p = s; *p; p++) {
        char ch = *p;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')
              || ch == '_'))
            return 0;
    }
    return 1;
}

/* users[i].permissions: {"*": "read", "ckpt": "write", ...}. Duplicate keys
 * are refused by the parser (JSON_REJECT_DUPLICATES). */
static int perms_from_json(struct conf_user *u, size_t i, const json_t *o, char *err,
                           size_t errlen)
{
    if (!json_is_object(o) || json_object_size(o) > PERMS_MAX)
        return conf_fail(err, errlen, "users[%zu].permissions: must be an object of at most %u "
                         "entries like {\"*\": \"read\", \"ckpt\": \"write\"}", i, PERMS_MAX);
    size_t n = json_object_size(o);
    if (n == 0)
        return 0;   /* a user that can authenticate and do nothing: allowed, if odd */
    u->perms = calloc(n, sizeof *u->perms);
    if (u->perms == NULL)
        return conf_fail(err, errlen, "users[%zu].permissions: out of memory", i);
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)o, key, val) {
        if (strcmp(key, "*") != 0 && !conf_bucket_name_ok(key))
            return conf_fail(err, errlen, "users[%zu].permissions: key \"%.64s\" " BUCKET_NAME_HELP,
                             i, key);
        char field[128];   /* users[%zu].permissions.<key cut at 64> */
        snprintf(field, sizeof field, "users[%zu].permissions.%.64s", i, key);
        unsigned level = 0;
        if (conf_choice(field, conf_json_cstr(val), perm_names,
                        sizeof perm_names / sizeof perm_names[0], &level, err, errlen) != 0)
            return -1;
        struct conf_perm *p = &u->perms[u->n_perms];
        p->bucket = strdup(key);
        if (p->bucket == NULL)
            return conf_fail(err, errlen, "users[%zu].permissions: out of memory", i);
        p->level = (enum conf_perm_level)level;
        u->n_perms++;
    }
    return 0;
}

static const char *const user_keys[] = { "name", "access_key", "secret_key", "secret_key_env",
                                         "permissions" };
enum { N_USER_KEYS = sizeof user_keys / sizeof user_keys[0] };
#define USER_KEYS_HELP "name, access_key, secret_key, secret_key_env, permissions"

/* Copies a required non-empty string member into *dst. */
static int user_str(const json_t *o, size_t i, const char *name, char **dst, char *err,
                    size_t errlen)
{
    const char *s = conf_json_cstr(json_object_get(o, name));
    if (s == NULL)
        return conf_fail(err, errlen, "users[%zu].%s: required string", i, name);
    if (s[0] == '\0')
        return conf_fail(err, errlen, "users[%zu].%s: must not be empty", i, name);
    *dst = strdup(s);
    if (*dst == NULL)
        return conf_fail(err, errlen, "users[%zu].%s: out of memory", i, name);
    return 0;
}

/* Fills `u` from users[i]. On error `u` may hold partial strings; the caller
 * frees. Messages name the field and, for secret_key_env, the variable, never
 * a secret. */
static int user_from_json(struct conf_user *u, size_t i, const json_t *o, char *err,
                          size_t errlen)
{
    if (!json_is_object(o))
        return conf_fail(err, errlen, "users[%zu]: must be an object with name, access_key, "
                         "secret_key (or secret_key_env) and permissions", i);
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)o, key, val) {
        bool known = false;
        for (size_t k = 0; k < N_USER_KEYS; k++)
            known = known || strcmp(key, user_keys[k]) == 0;
        if (!known)
            return conf_fail(err, errlen,
                             "users[%zu]: unknown key \"%.64s\" (allowed: " USER_KEYS_HELP ")",
                             i, key);
        (void)val;
    }
    if (user_str(o, i, "name", &u->name, err, errlen) != 0
        || user_str(o, i, "access_key", &u->access_key, err, errlen) != 0)
        return -1;
    const json_t *sk = json_object_get(o, "secret_key");
    const json_t *ske = json_object_get(o, "secret_key_env");
    if (sk != NULL && ske != NULL)
        return conf_fail(err, errlen, "users[%zu]: give secret_key or secret_key_env, not both", i);
    if (ske != NULL) {
        const char *var = conf_json_cstr(ske);
        if (var == NULL || !env_name_ok(var))
            return conf_fail(err, errlen, "users[%zu].secret_key_env: must name an environment "
                             "variable (letters, digits, '_', not starting with a digit)", i);
        const char *v = getenv(var);
        if (v == NULL)
            return conf_fail(err, errlen, "users[%zu].secret_key_env: environment variable %s is "
                             "not set", i, var);
        if (v[0] == '\0')
            return conf_fail(err, errlen, "users[%zu].secret_key_env: environment variable %s is "
                             "empty", i, var);
        u->secret_key = strdup(v);
        if (u->secret_key == NULL)
            return conf_fail(err, errlen, "users[%zu].secret_key_env: out of memory", i);
    } else if (user_str(o, i, "secret_key", &u->secret_key, err, errlen) != 0) {
        return -1;
    }
    if (!conf_access_key_ok(u->access_key))
        return conf_fail(err, errlen, "users[%zu].access_key: " ACCESS_KEY_HELP, i);
    const json_t *perms = json_object_get(o, "permissions");
    if (perms == NULL)
        return conf_fail(err, errlen, "users[%zu].permissions: required, e.g. {\"*\": \"read\"} "
                         "(levels none < read < write < admin; \"*\" is every bucket)", i);
    return perms_from_json(u, i, perms, err, errlen);
}

/* Finds two users with the same access key; returns 1 and their indexes. */
int conf_users_find_duplicate(const struct conf_user *users, size_t n, size_t *first,
                              size_t *second)
{
    for (size_t j = 1; j < n; j++) {
        for (size_t i = 0; i < j; i++) {
            if (users[i].access_key != NULL && users[j].access_key != NULL
                && strcmp(users[i].access_key, users[j].access_key) == 0) {
                *first = i;
                *second = j;
                return 1;
            }
        }
    }
    return 0;
}

int conf_users_from_json(struct conf *c, const json_t *v, char *err, size_t errlen)
{
    if (!json_is_array(v) || json_array_size(v) < 1 || json_array_size(v) > USERS_MAX)
        return conf_fail(err, errlen, "users: must be an array of 1 to %u user objects", USERS_MAX);
    size_t n = json_array_size(v);
    struct conf_user *users = calloc(n, sizeof *users);
    if (users == NULL)
        return conf_fail(err, errlen, "users: out of memory");
    for (size_t i = 0; i < n; i++) {
        if (user_from_json(&users[i], i, json_array_get(v, i), err, errlen) != 0) {
            conf_users_free(users, n);
            return -1;
        }
    }
    size_t a, b;
    if (conf_users_find_duplicate(users, n, &a, &b)) {
        conf_users_free(users, n);
        return conf_fail(err, errlen, "users[%zu].access_key: same as users[%zu].access_key "
                         "(access keys must be unique)", b, a);
    }
    conf_users_free(c->users, c->n_users);
    c->users = users;
    c->n_users = n;
    c->default_credentials = false;
    return 0;
}

static const char *const bucket_keys[] = { "public_read", "consistency", "cold_bucket",
                                           "write" };
enum { N_BUCKET_KEYS = sizeof bucket_keys / sizeof bucket_keys[0] };
#define BUCKET_KEYS_HELP "public_read, consistency, cold_bucket, write"

#define WRITE_RULES_MAX 64u

/* buckets.<name>.write as an object: {"checkpoints/": "back", "logs/": "through"}.
 * b->write_back says whether any prefix is written back. */
static int write_rules_from_json(struct conf_bucket *b, const char *name, const json_t *o,
                                 char *err, size_t errlen)
{
    size_t n = json_object_size(o);
    if (n == 0 || n > WRITE_RULES_MAX)
        return conf_fail(err, errlen, "buckets.%s.write: an object of 1 to %u key prefixes "
                         "and their modes, like {\"checkpoints/\": \"back\"}", name,
                         WRITE_RULES_MAX);
    b->write_rules = calloc(n, sizeof *b->write_rules);
    if (b->write_rules == NULL)
        return conf_fail(err, errlen, "buckets: out of memory");
    const char *prefix;
    json_t *val;
    json_object_foreach((json_t *)o, prefix, val) {
        const char *mode = conf_json_cstr(val);
        if (mode == NULL || (strcmp(mode, "back") != 0 && strcmp(mode, "through") != 0))
            return conf_fail(err, errlen, "buckets.%s.write.\"%.64s\": must be \"back\" or "
                             "\"through\"", name, prefix);
        if (strlen(prefix) > 1024)
            return conf_fail(err, errlen, "buckets.%s.write: a key prefix is at most 1024 "
                             "bytes, as a key", name);
        struct conf_write_rule *r = &b->write_rules[b->n_write_rules];
        if ((r->prefix = strdup(prefix)) == NULL)
            return conf_fail(err, errlen, "buckets: out of memory");
        r->back = strcmp(mode, "back") == 0;
        b->n_write_rules++;
        b->write_back |= r->back;
    }
    return 0;
}

/* buckets: {"<name>": {"public_read": true, "consistency": "immutable",
 * "cold_bucket": "other-name"}, ...}. Unknown keys are refused like
 * everywhere else, so a typo ("public-read") never silently means false. */
int conf_buckets_from_json(struct conf *c, const json_t *v, char *err, size_t errlen)
{
    if (!json_is_object(v) || json_object_size(v) > BUCKETS_MAX)
        return conf_fail(err, errlen, "buckets: must be an object of at most %u entries like "
                         "{\"datasets\": {\"public_read\": true}}", BUCKETS_MAX);
    size_t n = json_object_size(v);
    /* all n entries are freed on failure: those past `got` are zeroed or hold
     * the strings of the entry being filled */
    struct conf_bucket *bs = n ? calloc(n, sizeof *bs) : NULL;
    size_t got = 0;
    if (n && bs == NULL)
        return conf_fail(err, errlen, "buckets: out of memory");
    const char *name;
    json_t *o;
    json_object_foreach((json_t *)v, name, o) {
        if (!conf_bucket_name_ok(name)) {
            conf_fail(err, errlen, "buckets: key \"%.64s\" must be a bucket name (letters, digits, "
                      "'.', '-', '_', starting with a letter or digit)", name);
            goto bad;
        }
        if (!json_is_object(o)) {
            conf_fail(err, errlen, "buckets.%s: must be an object like {\"public_read\": true}",
                      name);
            goto bad;
        }
        const char *key;
        json_t *val;
        json_object_foreach(o, key, val) {
            bool known = false;
            for (size_t k = 0; k < N_BUCKET_KEYS; k++)
                known = known || strcmp(key, bucket_keys[k]) == 0;
            if (!known) {
                conf_fail(err, errlen, "buckets.%s: unknown key \"%.64s\" (allowed: "
                          BUCKET_KEYS_HELP ")", name, key);
                goto bad;
            }
        }
        struct conf_bucket *b = &bs[got];
        const json_t *pr = json_object_get(o, "public_read");
        if (pr != NULL && !json_is_boolean(pr)) {
            conf_fail(err, errlen, "buckets.%s.public_read: must be true or false", name);
            goto bad;
        }
        b->public_read = pr != NULL && json_is_true(pr);
        const json_t *cs = json_object_get(o, "consistency");
        if (cs != NULL) {
            const char *str = conf_json_cstr(cs);
            if (str == NULL || conf_consistency_parse(str, &b->consistency, &b->ttl_s) != 0) {
                conf_fail(err, errlen, "buckets.%s.consistency: " CONSISTENCY_HELP, name,
                          TTL_MAX_S);
                goto bad;
            }
            b->has_consistency = true;
        }
        const json_t *cb = json_object_get(o, "cold_bucket");
        if (cb != NULL && !json_is_null(cb)) {
            const char *str = conf_json_cstr(cb);
            if (str == NULL || !sg_bucket_name_valid(str)) {
                conf_fail(err, errlen, "buckets.%s.cold_bucket: " S3_BUCKET_NAME_HELP, name);
                goto bad;
            }
            b->cold_bucket = strdup(str);
            if (b->cold_bucket == NULL) {
                conf_fail(err, errlen, "buckets: out of memory");
                goto bad;
            }
        }
        const json_t *wr = json_object_get(o, "write");
        if (wr != NULL && json_is_object(wr)) {
            if (write_rules_from_json(b, name, wr, err, errlen) != 0)
                goto bad;
        } else if (wr != NULL) {
            const char *str = conf_json_cstr(wr);
            if (str == NULL || (strcmp(str, "back") != 0 && strcmp(str, "through") != 0)) {
                conf_fail(err, errlen, "buckets.%s.write: must be \"through\" (acknowledged "
                          "once in the cold tier, the default), \"back\" (acknowledged "
                          "once durable in the cache directory, uploaded in order) or an "
                          "object of key prefixes and modes like {\"checkpoints/\": "
                          "\"back\"}", name);
                goto bad;
            }
            b->write_back = strcmp(str, "back") == 0;
        }
        b->name = strdup(name);
        if (b->name == NULL) {
            conf_fail(err, errlen, "buckets: out of memory");
            goto bad;
        }
        got++;
    }
    conf_buckets_free(c->buckets, c->n_buckets);
    c->buckets = bs;
    c->n_buckets = got;
    return 0;
bad:
    conf_buckets_free(bs, n);
    return -1;
}
