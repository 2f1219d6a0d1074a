/* conf/conf.c - what a struct conf owns (the built-in defaults, freeing, and the
 * deep copy each merge step works on and commits only when the whole step is
 * valid, so a bad source never leaves a half-applied configuration behind), and
 * the small helpers every conf/ file calls: messages, strings, JSON strings. */
#include "conf.h"
#include "conf_int.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Writes the message to `err` (when there is room for anything) and returns -1. */
int conf_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
        if (n < 0)
            err[0] = '\0';
    }
    return -1;
}

void conf_err_clear(char *err, size_t errlen)
{
    if (err != NULL && errlen > 0)
        err[0] = '\0';
}

static void perms_free(struct conf_perm *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(p[i].bucket);
    free(p);
}

/* The secret is wiped before it is freed so it does not linger in the heap. */
static void secret_free(char *s)
{
    if (s == NULL)
        return;
    volatile char *v = s;
    while (*v)
        *v++ = '\0';
    free(s);
}

static void user_free(struct conf_user *u)
{
    free(u->name);
    free(u->access_key);
    secret_free(u->secret_key);
    perms_free(u->perms, u->n_perms);
    u->name = u->access_key = u->secret_key = NULL;
    u->perms = NULL;
    u->n_perms = 0;
}

void conf_buckets_free(struct conf_bucket *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(b[i].name);
        free(b[i].cold_bucket);
        for (size_t j = 0; j < b[i].n_write_rules; j++)
            free(b[i].write_rules[j].prefix);
        free(b[i].write_rules);
    }
    free(b);
}

void conf_users_free(struct conf_user *users, size_t n)
{
    for (size_t i = 0; i < n; i++)
        user_free(&users[i]);
    free(users);
}

/* The string fields of struct conf, which conf_copy duplicates and conf_free
 * frees (a secret wiped first): a new string field is added here, once. */
static const struct {
    size_t at;     /* offsetof a `char *` field */
    bool secret;
} conf_strs[] = {
#define STR(f) { offsetof(struct conf, f), false }
    STR(listen_addr), STR(data_dir), STR(state_dir), STR(cold_url), STR(cold_ca_path),
    STR(cold_access_key), { offsetof(struct conf, cold_secret_key), true }, STR(cold_region),
    STR(spool_dir), STR(cache_dir), STR(region), STR(vhost_domain), STR(log_file),
#undef STR
};
enum { N_CONF_STRS = sizeof conf_strs / sizeof conf_strs[0] };

static char **conf_str(struct conf *c, size_t i)
{
    return (char **)((char *)c + conf_strs[i].at);
}

void conf_free(struct conf *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < N_CONF_STRS; i++) {
        if (conf_strs[i].secret)
            secret_free(*conf_str(c, i));
        else
            free(*conf_str(c, i));
    }
    conf_users_free(c->users, c->n_users);
    conf_buckets_free(c->buckets, c->n_buckets);
    memset(c, 0, sizeof *c);
}

/* strdup that keeps NULL as NULL; *ok goes false when memory runs out. */
static char *dup_opt(const char *s, bool *ok)
{
    if (s == NULL)
        return NULL;
    char *d = strdup(s);
    if (d == NULL)
        *ok = false;
    return d;
}

/* A zeroed array of n elements for a copy, as dup_opt for strings: NULL when
 * n is 0 or *ok is already false; *ok goes false when memory runs out.
 * *n_out is n once the array exists, else 0. */
static void *alloc_opt(size_t n, size_t size, size_t *n_out, bool *ok)
{
    *n_out = 0;
    if (!*ok || n == 0)
        return NULL;
    void *p = calloc(n, size);
    if (p == NULL)
        *ok = false;
    else
        *n_out = n;
    return p;
}

/* Deep copy of `src` into `dst` (uninitialised). Keep in step with struct conf:
 * every pointer field must be duplicated here (strings: conf_strs). Returns 0, or -1 when out of
 * memory with `dst` left empty. */
int conf_copy(struct conf *dst, const struct conf *src)
{
    bool ok = true;
    *dst = *src;
    for (size_t i = 0; i < N_CONF_STRS; i++) {
        char **d = conf_str(dst, i);   /* still src's string: replaced by a copy */
        *d = dup_opt(*d, &ok);
    }
    dst->users = alloc_opt(src->n_users, sizeof *dst->users, &dst->n_users, &ok);
    for (size_t i = 0; i < dst->n_users; i++) {
        const struct conf_user *su = &src->users[i];
        struct conf_user *du = &dst->users[i];
        du->name = dup_opt(su->name, &ok);
        du->access_key = dup_opt(su->access_key, &ok);
        du->secret_key = dup_opt(su->secret_key, &ok);
        du->perms = alloc_opt(su->n_perms, sizeof *du->perms, &du->n_perms, &ok);
        for (size_t k = 0; k < du->n_perms; k++) {
            du->perms[k].bucket = dup_opt(su->perms[k].bucket, &ok);
            du->perms[k].level = su->perms[k].level;
        }
    }
    dst->buckets = alloc_opt(src->n_buckets, sizeof *dst->buckets, &dst->n_buckets, &ok);
    /* copy the plain fields, then replace every pointer */
    for (size_t i = 0; i < dst->n_buckets; i++) {
        dst->buckets[i] = src->buckets[i];
        dst->buckets[i].name = dup_opt(src->buckets[i].name, &ok);
        dst->buckets[i].cold_bucket = dup_opt(src->buckets[i].cold_bucket, &ok);
        const struct conf_bucket *sb = &src->buckets[i];
        struct conf_bucket *db = &dst->buckets[i];
        db->write_rules = alloc_opt(sb->n_write_rules, sizeof *db->write_rules,
                                    &db->n_write_rules, &ok);
        for (size_t k = 0; k < db->n_write_rules; k++) {
            db->write_rules[k].prefix = dup_opt(sb->write_rules[k].prefix, &ok);
            db->write_rules[k].back = sb->write_rules[k].back;
        }
    }
    if (!ok) {
        conf_free(dst);
        return -1;
    }
    return 0;
}

/* Replaces `c` by `tmp` (taking it). */
void conf_commit(struct conf *c, struct conf *tmp)
{
    conf_free(c);
    *c = *tmp;
    memset(tmp, 0, sizeof *tmp);
}

/* Replaces *dst by a copy of `s`. Returns 0, or -1 when out of memory. */
int conf_replace_str(char **dst, const char *s)
{
    char *d = strdup(s);
    if (d == NULL)
        return -1;
    free(*dst);
    *dst = d;
    return 0;
}

/* A string value without embedded NULs, or NULL. The parser already refuses
 * "\u0000" (no JSON_ALLOW_NUL); checked again because a C string would
 * silently end there if that flag were ever added. */
const char *conf_json_cstr(const json_t *v)
{
    if (!json_is_string(v))
        return NULL;
    const char *s = json_string_value(v);
    if (strlen(s) != json_string_length(v))
        return NULL;
    return s;
}

/* Makes `u` admin on every bucket: the root from the defaults or from the
 * environment alone. Returns 0, or -1 when out of memory. */
int conf_perms_set_root(struct conf_user *u)
{
    struct conf_perm *p = calloc(1, sizeof *p);
    if (p == NULL || (p->bucket = strdup("*")) == NULL) {
        free(p);
        return -1;
    }
    p->level = CONF_PERM_ADMIN;
    perms_free(u->perms, u->n_perms);
    u->perms = p;
    u->n_perms = 1;
    return 0;
}

int conf_init_defaults(struct conf *c)
{
    memset(c, 0, sizeof *c);
    c->listen_addr = strdup("127.0.0.1");
    c->listen_port = 9000;
    c->threads = 0;
    c->data_dir = strdup("var/data");
    c->mpu_max_age_s = 7u * 86400;
    c->cold_url = NULL;
    c->cold_ca_path = NULL;
    c->cold_connect_timeout_ms = 1000;
    c->cold_request_timeout_ms = 30000;
    c->cold_first_byte_timeout_ms = 5000;
    c->cache_revalidate_ms = 1000;
    c->cold_retries = 2;
    c->spool_dir = strdup("/tmp");
    c->cache_dir = NULL;
    c->cache_size = 10u * (uint64_t)1024 * MIB;
    c->cache_high_pct = 90;
    c->cache_low_pct = 80;
    c->cache_fill_workers = 8;
    c->cache_memory = 64 * MIB;
    c->cache_header_memory = 32 * MIB;
    c->cache_wait_ms = 30000;
    c->wb_dirty_wait_ms = 10000;
    c->wb_through_timeout_ms = 30000;
    c->cache_on_write = false;
    c->prefetch_keep_s = 3600;
    c->cache_read_path = CONF_READ_COPY;
    c->cache_fill_io = CONF_FILL_IO_DIRECT;
    c->cache_engine = CONF_ENGINE_AUTO;
    c->consistency = CONF_CONSISTENCY_TTL;
    c->consistency_ttl_s = 60;
    c->region = strdup("us-east-1");
    c->vhost_domain = NULL;
    c->users = calloc(1, sizeof *c->users);
    if (c->users != NULL) {
        c->n_users = 1;
        c->users[0].name = strdup("root");
        c->users[0].access_key = strdup(CONF_DEFAULT_ACCESS_KEY);
        c->users[0].secret_key = strdup(CONF_DEFAULT_SECRET_KEY);
        if (conf_perms_set_root(&c->users[0]) != 0) {
            conf_free(c);
            return -1;
        }
    }
    c->default_credentials = true;
    c->max_xml_body = 2u * MIB;
    c->max_header_bytes = 16u * KIB;
    c->log_level = LOG_LVL_INFO;
    c->shutdown_grace_s = 30;
    c->metrics_public = false;
    c->sigv2 = true;
    c->log_format = LOG_FMT_TEXT;
    c->log_file = NULL;
    conf_connections_defaults(c);
    if (c->listen_addr == NULL || c->data_dir == NULL || c->spool_dir == NULL
        || c->region == NULL || c->users == NULL
        || c->users[0].name == NULL || c->users[0].access_key == NULL
        || c->users[0].secret_key == NULL) {
        conf_free(c);
        return -1;
    }
    return 0;
}
