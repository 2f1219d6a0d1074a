/* conf/conf.c - builds a struct conf from defaults, a JSON file, SHARDGATE_*
 * environment variables and command-line flags, in that order. Every merge
 * step works on a copy and commits only when the whole step is valid, so a bad
 * file or variable never leaves a half-applied configuration behind. */
#include "conf.h"
#include "conf_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KIB 1024u
#define MIB (1024u * 1024u)

/* Bounds on integer options; the reasons sit next to each. */
#define THREADS_MAX 256u              /* libmicrohttpd pool; beyond this is a typo */
#define GRACE_MAX_S 3600u             /* an hour is already longer than any orchestrator waits */
#define XML_BODY_MIN KIB
#define XML_BODY_MAX (64u * MIB)      /* DeleteObjects with 1000 keys fits in well under this */
#define HEADER_MIN KIB
#define HEADER_MAX MIB
#define USERS_MAX 1000u               /* users are scanned linearly for unique keys */
#define LISTEN_MAX 260u               /* a 253-character host name and ":65535" */
#define REGION_MAX 64u
#define PERMS_MAX 1000u               /* per user; looked up linearly per request */
#define BUCKETS_MAX 10000u            /* "buckets" entries; looked up linearly */
#define BUCKET_NAME_MAX 255u          /* S3 allows 63; older us-east-1 buckets 255 */
#define ENV_NAME_MAX 128u
#define CONNECT_TIMEOUT_MAX_MS 600000u   /* ten minutes: beyond that the tier is down */
#define REQUEST_TIMEOUT_MAX_MS 3600000u  /* an hour: a multi-GiB part on a slow link */
#define FIRST_BYTE_MAX_MS 600000u        /* ten minutes: as the connect timeout */
#define REVALIDATE_MAX_MS 60000u         /* a hit waits at most this for its check */
#define RETRIES_MAX 10u                  /* each retry holds a client waiting */
#define CACHE_SIZE_MIN ((uint64_t)MIB)   /* below this the cache holds almost nothing */
#define FILL_WORKERS_MAX 256u            /* same bound as threads, for the same reason */
#define WAIT_MIN_MS 100u                 /* shorter makes readers give up on any fill */
#define WAIT_MAX_MS 600000u              /* ten minutes of a client waiting is enough */
#define TTL_MAX_S 31536000u              /* a year; beyond that say "immutable" */
#define SIZE_FRAC_DIGITS_MAX 6u          /* keeps frac * unit (< 10^6 * 2^40) in 64 bits */
#define HOST_MAX 253u                    /* a DNS name */
#define HOST_LABEL_MAX 63u
#define MPU_MAX_AGE_MAX_S (3650u * 86400)   /* ten years: "never" is 0 */

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes the message to `err` (when there is room for anything) and returns -1. */
static int fail(char *err, size_t errlen, const char *fmt, ...)
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

static void err_clear(char *err, size_t errlen)
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

static void buckets_free(struct conf_bucket *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(b[i].name);
        free(b[i].cold_bucket);
    }
    free(b);
}

const char *conf_perm_level_name(enum conf_perm_level l)
{
    switch (l) {
    case CONF_PERM_NONE: return "none";
    case CONF_PERM_READ: return "read";
    case CONF_PERM_WRITE: return "write";
    case CONF_PERM_ADMIN: return "admin";
    }
    return "?";
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

static void users_free(struct conf_user *users, size_t n)
{
    for (size_t i = 0; i < n; i++)
        user_free(&users[i]);
    free(users);
}

void conf_free(struct conf *c)
{
    if (c == NULL)
        return;
    free(c->listen_addr);
    free(c->data_dir);
    free(c->state_dir);
    free(c->cold_url);
    free(c->cold_ca_path);
    free(c->cold_access_key);
    secret_free(c->cold_secret_key);
    free(c->cold_region);
    free(c->spool_dir);
    free(c->cache_dir);
    free(c->region);
    free(c->vhost_domain);
    free(c->log_file);
    users_free(c->users, c->n_users);
    buckets_free(c->buckets, c->n_buckets);
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

/* Deep copy of `src` into `dst` (uninitialised). Keep in step with struct conf:
 * every pointer field must be duplicated here. Returns 0, or -1 when out of
 * memory with `dst` left empty. */
static int conf_copy(struct conf *dst, const struct conf *src)
{
    bool ok = true;
    *dst = *src;
    dst->listen_addr = dup_opt(src->listen_addr, &ok);
    dst->data_dir = dup_opt(src->data_dir, &ok);
    dst->state_dir = dup_opt(src->state_dir, &ok);
    dst->cold_url = dup_opt(src->cold_url, &ok);
    dst->cold_ca_path = dup_opt(src->cold_ca_path, &ok);
    dst->cold_access_key = dup_opt(src->cold_access_key, &ok);
    dst->cold_secret_key = dup_opt(src->cold_secret_key, &ok);
    dst->cold_region = dup_opt(src->cold_region, &ok);
    dst->spool_dir = dup_opt(src->spool_dir, &ok);
    dst->cache_dir = dup_opt(src->cache_dir, &ok);
    dst->region = dup_opt(src->region, &ok);
    dst->vhost_domain = dup_opt(src->vhost_domain, &ok);
    dst->log_file = dup_opt(src->log_file, &ok);
    dst->users = NULL;
    dst->n_users = 0;
    if (ok && src->n_users > 0) {
        dst->users = calloc(src->n_users, sizeof *dst->users);
        if (dst->users == NULL) {
            ok = false;
        } else {
            dst->n_users = src->n_users;
            for (size_t i = 0; i < src->n_users; i++) {
                const struct conf_user *su = &src->users[i];
                struct conf_user *du = &dst->users[i];
                du->name = dup_opt(su->name, &ok);
                du->access_key = dup_opt(su->access_key, &ok);
                du->secret_key = dup_opt(su->secret_key, &ok);
                if (ok && su->n_perms > 0) {
                    du->perms = calloc(su->n_perms, sizeof *du->perms);
                    if (du->perms == NULL) {
                        ok = false;
                        continue;
                    }
                    du->n_perms = su->n_perms;
                    for (size_t k = 0; k < su->n_perms; k++) {
                        du->perms[k].bucket = dup_opt(su->perms[k].bucket, &ok);
                        du->perms[k].level = su->perms[k].level;
                    }
                }
            }
        }
    }
    dst->buckets = NULL;
    dst->n_buckets = 0;
    if (ok && src->n_buckets > 0) {
        dst->buckets = calloc(src->n_buckets, sizeof *dst->buckets);
        if (dst->buckets == NULL) {
            ok = false;
        } else {
            dst->n_buckets = src->n_buckets;
            /* copy the plain fields, then replace every pointer */
            for (size_t i = 0; i < src->n_buckets; i++) {
                dst->buckets[i] = src->buckets[i];
                dst->buckets[i].name = dup_opt(src->buckets[i].name, &ok);
                dst->buckets[i].cold_bucket = dup_opt(src->buckets[i].cold_bucket, &ok);
            }
        }
    }
    if (!ok) {
        conf_free(dst);
        return -1;
    }
    return 0;
}

/* Replaces `c` by `tmp` (taking it). */
static void conf_commit(struct conf *c, struct conf *tmp)
{
    conf_free(c);
    *c = *tmp;
    memset(tmp, 0, sizeof *tmp);
}

/* Replaces *dst by a copy of `s`. Returns 0, or -1 when out of memory. */
static int replace_str(char **dst, const char *s)
{
    char *d = strdup(s);
    if (d == NULL)
        return -1;
    free(*dst);
    *dst = d;
    return 0;
}

/* Makes `u` admin on every bucket: the root from the defaults or from the
 * environment alone. Returns 0, or -1 when out of memory. */
static int perms_set_root(struct conf_user *u)
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
    c->cache_wait_ms = 30000;
    c->cache_on_write = false;
    c->prefetch_keep_s = 3600;
    c->cache_read_path = CONF_READ_SENDFILE;
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
        if (perms_set_root(&c->users[0]) != 0) {
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

/* ---- value checks shared by the file, the environment and the flags ----
 * `field` is how the user spelled the option ("listen", "SHARDGATE_LISTEN",
 * "--listen") so every message names what to fix. */

#define LISTEN_HELP "must be ADDR:PORT with an IPv4 address (127.0.0.1:9000), a host " \
                    "name (localhost:9000), a bracketed IPv6 address ([::1]:9000) or " \
                    "no address (:9000, every interface), port 1 to 65535"

/* Parses 1..65535 from exactly the decimal digits in [s, end). */
static int port_parse(const char *s, const char *end, uint16_t *out)
{
    size_t n = (size_t)(end - s);
    if (n == 0 || n > 5)
        return -1;
    unsigned v = 0;
    for (const char *p = s; p < end; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10u + (unsigned)(*p - '0');
    }
    if (v < 1 || v > 65535)
        return -1;
    *out = (uint16_t)v;
    return 0;
}

static int host_name_ok(const char *s, const char *end);

/* Sets listen_addr (without brackets) and listen_port. A host name is only
 * checked for its form here and resolved when the gateway binds, so that a
 * configuration can be checked without DNS; ":PORT" means every IPv4
 * interface, as S3 servers' ":9000" does (the gateway warns about it). */
static int set_listen(struct conf *c, const char *field, const char *s, char *err, size_t errlen)
{
    size_t len = strlen(s);
    char host[LISTEN_MAX + 1];
    const char *port;
    unsigned char bin[sizeof(struct in6_addr)];

    if (len == 0 || len > LISTEN_MAX)
        return fail(err, errlen, "%s: " LISTEN_HELP, field);
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (rb == NULL || rb[1] != ':')
            return fail(err, errlen, "%s: \"%s\" " LISTEN_HELP, field, s);
        size_t hl = (size_t)(rb - (s + 1));
        memcpy(host, s + 1, hl);
        host[hl] = '\0';
        port = rb + 2;
        if (inet_pton(AF_INET6, host, bin) != 1)
            return fail(err, errlen, "%s: \"%s\" " LISTEN_HELP, field, s);
    } else {
        const char *colon = strchr(s, ':');
        if (colon == NULL || strchr(colon + 1, ':') != NULL)
            return fail(err, errlen, "%s: \"%s\" " LISTEN_HELP, field, s);
        size_t hl = (size_t)(colon - s);
        memcpy(host, s, hl);
        host[hl] = '\0';
        port = colon + 1;
        if (hl == 0)
            strcpy(host, "0.0.0.0");
        else if (!host_name_ok(s, colon))
            return fail(err, errlen, "%s: \"%s\" " LISTEN_HELP, field, s);
    }
    uint16_t p;
    if (port_parse(port, s + len, &p) != 0)
        return fail(err, errlen, "%s: \"%s\" " LISTEN_HELP, field, s);
    if (replace_str(&c->listen_addr, host) != 0)
        return fail(err, errlen, "%s: out of memory", field);
    c->listen_port = p;
    return 0;
}

static int set_log_level(struct conf *c, const char *field, const char *s, char *err,
                         size_t errlen)
{
    enum log_level lvl;
    if (log_level_parse(s, &lvl) != 0)
        return fail(err, errlen, "%s: must be one of \"error\", \"warn\", \"info\", \"debug\"",
                    field);
    c->log_level = lvl;
    return 0;
}

static int set_log_format(struct conf *c, const char *field, const char *s, char *err,
                          size_t errlen)
{
    enum log_format f;
    if (log_format_parse(s, &f) != 0)
        return fail(err, errlen, "%s: must be \"text\" or \"json\"", field);
    c->log_format = f;
    return 0;
}

/* NULL (a null in the file) goes back to stderr. */
static int set_log_file(struct conf *c, const char *field, const char *s, char *err,
                        size_t errlen)
{
    if (s != NULL && s[0] == '\0')
        return fail(err, errlen, "%s: must be a non-empty path%s", field,
                    strcmp(field, "log_file") == 0 ? " or null" : "");
    if (s == NULL) {
        free(c->log_file);
        c->log_file = NULL;
        return 0;
    }
    if (replace_str(&c->log_file, s) != 0)
        return fail(err, errlen, "%s: out of memory", field);
    return 0;
}

static int set_data_dir(struct conf *c, const char *field, const char *s, char *err,
                        size_t errlen)
{
    if (s[0] == '\0')
        return fail(err, errlen, "%s: must be a non-empty path", field);
    if (replace_str(&c->data_dir, s) != 0)
        return fail(err, errlen, "%s: out of memory", field);
    c->data_dir_from = field;   /* a static string: the table's spelling */
    return 0;
}

/* The region goes into every SigV4 credential scope ("AKID/date/region/s3/..."),
 * so a '/' or a space in it would make every signature unverifiable. */
static int region_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > REGION_MAX)
        return 0;
    for (const char *p = s; *p; p++) {
        char ch = *p;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')
              || ch == '-' || ch == '_'))
            return 0;
    }
    return 1;
}

static int set_region(struct conf *c, const char *field, const char *s, char *err, size_t errlen)
{
    if (!region_ok(s))
        return fail(err, errlen,
                    "%s: must be 1 to %u letters, digits, '-' or '_' (like \"us-east-1\")", field,
                    REGION_MAX);
    if (replace_str(&c->region, s) != 0)
        return fail(err, errlen, "%s: out of memory", field);
    return 0;
}

/* NULL or "" turns virtual-host addressing off. */
static int set_vhost_domain(struct conf *c, const char *field, const char *s, char *err,
                            size_t errlen)
{
    if (s == NULL || s[0] == '\0') {
        free(c->vhost_domain);
        c->vhost_domain = NULL;
        return 0;
    }
    if (replace_str(&c->vhost_domain, s) != 0)
        return fail(err, errlen, "%s: out of memory", field);
    return 0;
}

/* Strict decimal for environment and flag values: digits only, so "-1", " 8"
 * and "8x" are refused instead of being wrapped or truncated by strtoul. */
static int uint_parse(const char *s, unsigned max, unsigned *out)
{
    if (s[0] == '\0' || strlen(s) > 10)
        return -1;
    unsigned long long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10u + (unsigned)(*p - '0');
    }
    if (v > max)
        return -1;
    *out = (unsigned)v;
    return 0;
}

/* Access keys appear in the Authorization header as "Credential=AKID/date/...",
 * so '/', ',', whitespace and control characters cannot be told apart there. */
static int access_key_ok(const char *s)
{
    if (s[0] == '\0')
        return 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p <= ' ' || *p == 0x7f || *p == '/' || *p == ',')
            return 0;
    }
    return 1;
}

/* ---- the cold and cache tiers ---- */

/* One DNS name in [s, end): dot-separated labels of 1 to 63 letters, digits,
 * '-' or '_' (container names often hold '_'), not starting or ending with
 * '-'. All digits and dots must be a real IPv4 address, so "999.1.1.1" is not
 * sent to the resolver as a name. */
static int host_name_ok(const char *s, const char *end)
{
    size_t n = (size_t)(end - s), label = 0;
    bool numeric = true;
    if (n == 0 || n > HOST_MAX)
        return 0;
    for (const char *p = s; p < end; p++) {
        char ch = *p;
        if (ch == '.') {
            if (label == 0 || p[-1] == '-')
                return 0;
            label = 0;
            continue;
        }
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')
              || ch == '-' || ch == '_'))
            return 0;
        if ((label == 0 && ch == '-') || ++label > HOST_LABEL_MAX)
            return 0;
        numeric = numeric && ch >= '0' && ch <= '9';
    }
    if (label == 0 || end[-1] == '-')
        return 0;
    if (numeric) {
        char host[HOST_MAX + 1];
        unsigned char bin[sizeof(struct in_addr)];
        memcpy(host, s, n);
        host[n] = '\0';
        return inet_pton(AF_INET, host, bin) == 1;
    }
    return 1;
}

#define COLD_URL_HELP "must be http://HOST[:PORT] or https://HOST[:PORT], optionally with " \
                      "a trailing '/', where HOST is a DNS name, an IPv4 address or a "      \
                      "bracketed IPv6 address; no path, query or user:password@ "         \
                      "(credentials come from the AWS_* variables)"

/* http(s)://host[:port][/]. The S3 client appends "/bucket/key" itself, so a
 * path would be lost, and user:password@ would put a secret in the config and
 * in log lines. Only what curl and SigV4 agree on gets through. */
static int cold_url_ok(const char *s)
{
    const char *p;
    if (strncmp(s, "http://", 7) == 0)
        p = s + 7;
    else if (strncmp(s, "https://", 8) == 0)
        p = s + 8;
    else
        return 0;
    const char *end = p + strlen(p);
    if (end > p && end[-1] == '/')
        end--;
    const char *hend;
    if (*p == '[') {
        const char *rb = memchr(p, ']', (size_t)(end - p));
        char host[INET6_ADDRSTRLEN];
        unsigned char bin[sizeof(struct in6_addr)];
        if (rb == NULL)
            return 0;
        size_t hl = (size_t)(rb - (p + 1));
        if (hl == 0 || hl >= sizeof host)
            return 0;
        memcpy(host, p + 1, hl);
        host[hl] = '\0';
        if (inet_pton(AF_INET6, host, bin) != 1)
            return 0;
        hend = rb + 1;
    } else {
        hend = p;
        while (hend < end && *hend != ':')
            hend++;
        if (!host_name_ok(p, hend))
            return 0;
    }
    if (hend == end)
        return 1;
    uint16_t port;
    return *hend == ':' && port_parse(hend + 1, end, &port) == 0;
}

/* NULL (a null in the file) goes back to the local-directory tier. "" is
 * refused: an unset variable expanded into SHARDGATE_COLD_URL= must not
 * silently send writes to the local disk. The URL is not echoed, as it may
 * hold a password. */
static int set_cold_url(struct conf *c, const char *field, const char *s, char *err,
                        size_t errlen)
{
    if (s == NULL) {
        free(c->cold_url);
        c->cold_url = NULL;
        return 0;
    }
    if (!cold_url_ok(s))
        return fail(err, errlen, "%s: " COLD_URL_HELP, field);
    if (replace_str(&c->cold_url, s) != 0)
        return fail(err, errlen, "%s: out of memory", field);
    return 0;
}

/* Sets an optional path: NULL clears it, "" is refused. */
static int set_opt_path(char **dst, const char *field, const char *s, const char *null_means,
                        char *err, size_t errlen)
{
    if (s == NULL) {
        free(*dst);
        *dst = NULL;
        return 0;
    }
    if (s[0] == '\0')
        return fail(err, errlen, "%s: must be a non-empty path%s", field, null_means);
    if (replace_str(dst, s) != 0)
        return fail(err, errlen, "%s: out of memory", field);
    return 0;
}

static int set_cold_ca_path(struct conf *c, const char *field, const char *s, char *err,
                            size_t errlen)
{
    return set_opt_path(&c->cold_ca_path, field, s, " (null: the system CA store)", err,
                        errlen);
}

static int set_cache_dir(struct conf *c, const char *field, const char *s, char *err,
                         size_t errlen)
{
    return set_opt_path(&c->cache_dir, field, s, " (null in the config file: no cache)", err,
                        errlen);
}

static int set_spool_dir(struct conf *c, const char *field, const char *s, char *err,
                         size_t errlen)
{
    return set_opt_path(&c->spool_dir, field, s, "", err, errlen);
}

static int set_state_dir(struct conf *c, const char *field, const char *s, char *err,
                         size_t errlen)
{
    return set_opt_path(&c->state_dir, field, s,
                        " (null in the config file: data_dir/.shardgate)", err, errlen);
}

#define MPU_MAX_AGE_HELP "must be seconds (0 = never) or a number with a unit s, m, h or d "                          "(\"7d\", \"12h\"), at most 3650 days"

/* "604800", "7d", "12h", "30m", "45s": digits, then at most one unit. */
static int set_mpu_max_age(struct conf *c, const char *field, const char *s, char *err,
                           size_t errlen)
{
    unsigned long long v = 0, mult = 1;
    const char *p = s;
    for (; *p >= '0' && *p <= '9' && v <= MPU_MAX_AGE_MAX_S; p++)
        v = v * 10u + (unsigned long long)(*p - '0');
    if (*p != '\0' && p[1] == '\0')
        mult = *p == 's' ? 1 : *p == 'm' ? 60 : *p == 'h' ? 3600 : *p == 'd' ? 86400 : 0;
    else if (*p != '\0')
        mult = 0;
    if (p == s || mult == 0 || v > MPU_MAX_AGE_MAX_S / mult)
        return fail(err, errlen, "%s: \"%s\" " MPU_MAX_AGE_HELP, field, s);
    c->mpu_max_age_s = (unsigned)(v * mult);
    return 0;
}

int conf_size_parse(const char *s, uint64_t *out)
{
    static const struct {
        const char *unit;
        uint64_t mult;
    } units[] = {
        { "", 1 },
        { "K", 1ull << 10 }, { "M", 1ull << 20 }, { "G", 1ull << 30 }, { "T", 1ull << 40 },
        { "KiB", 1ull << 10 }, { "MiB", 1ull << 20 }, { "GiB", 1ull << 30 },
        { "TiB", 1ull << 40 },
        { "KB", 1000ull }, { "MB", 1000000ull }, { "GB", 1000000000ull },
        { "TB", 1000000000000ull },
    };
    uint64_t whole = 0, frac = 0, frac_div = 1;
    unsigned nfrac = 0;
    const char *p = s;

    if (s == NULL || *p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (whole > (UINT64_MAX - d) / 10u)
            return -1;
        whole = whole * 10u + d;
    }
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return -1;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (++nfrac > SIZE_FRAC_DIGITS_MAX)
                return -1;
            frac = frac * 10u + (unsigned)(*p - '0');
            frac_div *= 10u;
        }
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(p, units[i].unit) != 0)
            continue;
        uint64_t m = units[i].mult;
        if (nfrac > 0 && m == 1)
            return -1;   /* a fraction of a byte: "1.5" is surely a missing unit */
        if (whole > UINT64_MAX / m)
            return -1;
        uint64_t v = whole * m, f = frac * m / frac_div;   /* frac * m < 10^6 * 2^40 */
        if (v > UINT64_MAX - f)
            return -1;
        *out = v + f;
        return 0;
    }
    return -1;
}

#define SIZE_HELP "must be at least 1 MiB: a number of bytes (1073741824) or a string with a " \
                  "unit (\"512M\", \"64MiB\", \"10G\", \"1.5GiB\", \"2T\"; K/M/G/T and "        \
                  "KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB powers of 1000)"

static int set_cache_size(struct conf *c, const char *field, const char *s, char *err,
                          size_t errlen)
{
    uint64_t v;
    if (conf_size_parse(s, &v) != 0 || v < CACHE_SIZE_MIN)
        return fail(err, errlen, "%s: " SIZE_HELP, field);
    c->cache_size = v;
    return 0;
}

static int set_cache_engine(struct conf *c, const char *field, const char *s, char *err,
                            size_t errlen)
{
    if (strcmp(s, "auto") == 0)
        c->cache_engine = CONF_ENGINE_AUTO;
    else if (strcmp(s, "io_uring") == 0)
        c->cache_engine = CONF_ENGINE_URING;
    else if (strcmp(s, "threads") == 0)
        c->cache_engine = CONF_ENGINE_THREADS;
    else
        return fail(err, errlen, "%s: must be \"auto\", \"io_uring\" or \"threads\"", field);
    return 0;
}

#define CONSISTENCY_HELP "must be \"immutable\", \"always\" or \"ttl:SECONDS\" with SECONDS " \
                         "from 1 to %u"

/* "immutable", "always" or "ttl:SECONDS"; *ttl is 0 unless the mode is TTL. */
static int consistency_parse(const char *s, enum conf_consistency *mode, unsigned *ttl)
{
    unsigned v;
    if (strcmp(s, "immutable") == 0) {
        *mode = CONF_CONSISTENCY_IMMUTABLE;
        *ttl = 0;
        return 0;
    }
    if (strcmp(s, "always") == 0) {
        *mode = CONF_CONSISTENCY_ALWAYS;
        *ttl = 0;
        return 0;
    }
    if (strncmp(s, "ttl:", 4) != 0 || uint_parse(s + 4, TTL_MAX_S, &v) != 0 || v < 1)
        return -1;
    *mode = CONF_CONSISTENCY_TTL;
    *ttl = v;
    return 0;
}

/* For conf_validate: a mode and TTL as consistency_parse would leave them. */
static bool consistency_ok(enum conf_consistency mode, unsigned ttl)
{
    switch (mode) {
    case CONF_CONSISTENCY_IMMUTABLE:
    case CONF_CONSISTENCY_ALWAYS:
        return true;
    case CONF_CONSISTENCY_TTL:
        return ttl >= 1 && ttl <= TTL_MAX_S;
    }
    return false;
}

static int set_consistency(struct conf *c, const char *field, const char *s, char *err,
                           size_t errlen)
{
    enum conf_consistency mode;
    unsigned ttl;
    if (consistency_parse(s, &mode, &ttl) != 0)
        return fail(err, errlen, "%s: " CONSISTENCY_HELP, field, TTL_MAX_S);
    c->consistency = mode;
    c->consistency_ttl_s = ttl;
    return 0;
}

#define ACCESS_KEY_HELP "must be non-empty, without '/', ',', spaces or control characters"

/* ---- the JSON file ---- */

/* A string value without embedded NULs, or NULL. The parser already refuses
 * "\u0000" (no JSON_ALLOW_NUL); checked again because a C string would
 * silently end there if that flag were ever added. */
static const char *json_cstr(const json_t *v)
{
    if (!json_is_string(v))
        return NULL;
    const char *s = json_string_value(v);
    if (strlen(s) != json_string_length(v))
        return NULL;
    return s;
}

static int json_uint(const json_t *v, const char *field, unsigned long long min,
                     unsigned long long max, unsigned long long *out, char *err, size_t errlen)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0
        || (unsigned long long)json_integer_value(v) < min
        || (unsigned long long)json_integer_value(v) > max)
        return fail(err, errlen, "%s: must be an integer from %llu to %llu", field, min, max);
    *out = (unsigned long long)json_integer_value(v);
    return 0;
}

/* Bucket names as they may appear in "permissions" and "buckets": letters,
 * digits, '.', '-', '_', starting with a letter or digit. Looser than S3's
 * rules (the store enforces those); strict enough that "*" or a path can
 * never be mistaken for a bucket. */
static int bucket_name_ok(const char *s)
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

/* The cold tier's own bucket names follow S3's rules for new buckets: 3 to
 * 63 lowercase letters, digits, '.' and '-', a letter or digit at both ends,
 * no "..", not an IPv4 address, none of the reserved prefixes and suffixes.
 * A name S3 would refuse could only fail later, on the first request. */
static int s3_bucket_name_ok(const char *s)
{
    static const char *const bad_prefix[] = { "xn--", "sthree-" };
    static const char *const bad_suffix[] = { "-s3alias", "--ol-s3" };
    size_t n = strlen(s);
    unsigned char bin[sizeof(struct in_addr)];
    if (n < 3 || n > 63)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
        if (!alnum && ((i == 0 || i == n - 1) || (ch != '.' && ch != '-')))
            return 0;
    }
    if (strstr(s, "..") != NULL || inet_pton(AF_INET, s, bin) == 1)
        return 0;
    for (size_t i = 0; i < sizeof bad_prefix / sizeof bad_prefix[0]; i++)
        if (strncmp(s, bad_prefix[i], strlen(bad_prefix[i])) == 0)
            return 0;
    for (size_t i = 0; i < sizeof bad_suffix / sizeof bad_suffix[0]; i++) {
        size_t k = strlen(bad_suffix[i]);
        if (n >= k && strcmp(s + n - k, bad_suffix[i]) == 0)
            return 0;
    }
    return 1;
}

#define S3_BUCKET_NAME_HELP "must be null or an S3 bucket name: 3 to 63 lowercase letters, " \
                            "digits, '.' or '-', starting and ending with a letter or digit, " \
                            "no \"..\", not an IP address, no \"xn--\" or \"sthree-\" " \
                            "prefix, no \"-s3alias\" or \"--ol-s3\" suffix"

#define BUCKET_NAME_HELP "must be \"*\" or a bucket name (letters, digits, '.', '-', '_', " \
                         "starting with a letter or digit)"

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

static int perm_level_parse(const char *s, enum conf_perm_level *out)
{
    static const enum conf_perm_level all[] = { CONF_PERM_NONE, CONF_PERM_READ,
                                                CONF_PERM_WRITE, CONF_PERM_ADMIN };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(s, conf_perm_level_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return -1;
}

/* users[i].permissions: {"*": "read", "ckpt": "write", ...}. Duplicate keys
 * are refused by the parser (JSON_REJECT_DUPLICATES). */
static int perms_from_json(struct conf_user *u, size_t i, const json_t *o, char *err,
                           size_t errlen)
{
    if (!json_is_object(o) || json_object_size(o) > PERMS_MAX)
        return fail(err, errlen, "users[%zu].permissions: must be an object of at most %u "
                    "entries like {\"*\": \"read\", \"ckpt\": \"write\"}", i, PERMS_MAX);
    size_t n = json_object_size(o);
    if (n == 0)
        return 0;   /* a user that can authenticate and do nothing: allowed, if odd */
    u->perms = calloc(n, sizeof *u->perms);
    if (u->perms == NULL)
        return fail(err, errlen, "users[%zu].permissions: out of memory", i);
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)o, key, val) {
        if (strcmp(key, "*") != 0 && !bucket_name_ok(key))
            return fail(err, errlen, "users[%zu].permissions: key \"%.64s\" " BUCKET_NAME_HELP,
                        i, key);
        const char *lv = json_cstr(val);
        enum conf_perm_level level;
        if (lv == NULL || perm_level_parse(lv, &level) != 0)
            return fail(err, errlen, "users[%zu].permissions.%.64s: must be one of \"none\", "
                        "\"read\", \"write\", \"admin\"", i, key);
        struct conf_perm *p = &u->perms[u->n_perms];
        p->bucket = strdup(key);
        if (p->bucket == NULL)
            return fail(err, errlen, "users[%zu].permissions: out of memory", i);
        p->level = level;
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
    const char *s = json_cstr(json_object_get(o, name));
    if (s == NULL)
        return fail(err, errlen, "users[%zu].%s: required string", i, name);
    if (s[0] == '\0')
        return fail(err, errlen, "users[%zu].%s: must not be empty", i, name);
    *dst = strdup(s);
    if (*dst == NULL)
        return fail(err, errlen, "users[%zu].%s: out of memory", i, name);
    return 0;
}

/* Fills `u` from users[i]. On error `u` may hold partial strings; the caller
 * frees. Messages name the field and, for secret_key_env, the variable, never
 * a secret. */
static int user_from_json(struct conf_user *u, size_t i, const json_t *o, char *err,
                          size_t errlen)
{
    if (!json_is_object(o))
        return fail(err, errlen, "users[%zu]: must be an object with name, access_key, "
                    "secret_key (or secret_key_env) and permissions", i);
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)o, key, val) {
        bool known = false;
        for (size_t k = 0; k < N_USER_KEYS; k++)
            known = known || strcmp(key, user_keys[k]) == 0;
        if (!known)
            return fail(err, errlen,
                        "users[%zu]: unknown key \"%.64s\" (allowed: " USER_KEYS_HELP ")", i, key);
        (void)val;
    }
    if (user_str(o, i, "name", &u->name, err, errlen) != 0
        || user_str(o, i, "access_key", &u->access_key, err, errlen) != 0)
        return -1;
    const json_t *sk = json_object_get(o, "secret_key");
    const json_t *ske = json_object_get(o, "secret_key_env");
    if (sk != NULL && ske != NULL)
        return fail(err, errlen, "users[%zu]: give secret_key or secret_key_env, not both", i);
    if (ske != NULL) {
        const char *var = json_cstr(ske);
        if (var == NULL || !env_name_ok(var))
            return fail(err, errlen, "users[%zu].secret_key_env: must name an environment "
                        "variable (letters, digits, '_', not starting with a digit)", i);
        const char *v = getenv(var);
        if (v == NULL)
            return fail(err, errlen, "users[%zu].secret_key_env: environment variable %s is "
                        "not set", i, var);
        if (v[0] == '\0')
            return fail(err, errlen, "users[%zu].secret_key_env: environment variable %s is "
                        "empty", i, var);
        u->secret_key = strdup(v);
        if (u->secret_key == NULL)
            return fail(err, errlen, "users[%zu].secret_key_env: out of memory", i);
    } else if (user_str(o, i, "secret_key", &u->secret_key, err, errlen) != 0) {
        return -1;
    }
    if (!access_key_ok(u->access_key))
        return fail(err, errlen, "users[%zu].access_key: " ACCESS_KEY_HELP, i);
    const json_t *perms = json_object_get(o, "permissions");
    if (perms == NULL)
        return fail(err, errlen, "users[%zu].permissions: required, e.g. {\"*\": \"read\"} "
                    "(levels none < read < write < admin; \"*\" is every bucket)", i);
    return perms_from_json(u, i, perms, err, errlen);
}

/* Finds two users with the same access key; returns 1 and their indexes. */
static int users_find_duplicate(const struct conf_user *users, size_t n, size_t *first,
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

static int users_from_json(struct conf *c, const json_t *v, char *err, size_t errlen)
{
    if (!json_is_array(v) || json_array_size(v) < 1 || json_array_size(v) > USERS_MAX)
        return fail(err, errlen, "users: must be an array of 1 to %u user objects", USERS_MAX);
    size_t n = json_array_size(v);
    struct conf_user *users = calloc(n, sizeof *users);
    if (users == NULL)
        return fail(err, errlen, "users: out of memory");
    for (size_t i = 0; i < n; i++) {
        if (user_from_json(&users[i], i, json_array_get(v, i), err, errlen) != 0) {
            users_free(users, n);
            return -1;
        }
    }
    size_t a, b;
    if (users_find_duplicate(users, n, &a, &b)) {
        users_free(users, n);
        return fail(err, errlen, "users[%zu].access_key: same as users[%zu].access_key "
                    "(access keys must be unique)", b, a);
    }
    users_free(c->users, c->n_users);
    c->users = users;
    c->n_users = n;
    c->default_credentials = false;
    return 0;
}

static const char *const bucket_keys[] = { "public_read", "consistency", "cold_bucket" };
enum { N_BUCKET_KEYS = sizeof bucket_keys / sizeof bucket_keys[0] };
#define BUCKET_KEYS_HELP "public_read, consistency, cold_bucket"

/* buckets: {"<name>": {"public_read": true, "consistency": "immutable",
 * "cold_bucket": "other-name"}, ...}. Unknown keys are refused like
 * everywhere else, so a typo ("public-read") never silently means false. */
static int buckets_from_json(struct conf *c, const json_t *v, char *err, size_t errlen)
{
    if (!json_is_object(v) || json_object_size(v) > BUCKETS_MAX)
        return fail(err, errlen, "buckets: must be an object of at most %u entries like "
                    "{\"datasets\": {\"public_read\": true}}", BUCKETS_MAX);
    size_t n = json_object_size(v);
    /* all n entries are freed on failure: those past `got` are zeroed or hold
     * the strings of the entry being filled */
    struct conf_bucket *bs = n ? calloc(n, sizeof *bs) : NULL;
    size_t got = 0;
    if (n && bs == NULL)
        return fail(err, errlen, "buckets: out of memory");
    const char *name;
    json_t *o;
    json_object_foreach((json_t *)v, name, o) {
        if (!bucket_name_ok(name)) {
            fail(err, errlen, "buckets: key \"%.64s\" must be a bucket name (letters, digits, "
                 "'.', '-', '_', starting with a letter or digit)", name);
            goto bad;
        }
        if (!json_is_object(o)) {
            fail(err, errlen, "buckets.%s: must be an object like {\"public_read\": true}", name);
            goto bad;
        }
        const char *key;
        json_t *val;
        json_object_foreach(o, key, val) {
            bool known = false;
            for (size_t k = 0; k < N_BUCKET_KEYS; k++)
                known = known || strcmp(key, bucket_keys[k]) == 0;
            if (!known) {
                fail(err, errlen, "buckets.%s: unknown key \"%.64s\" (allowed: "
                     BUCKET_KEYS_HELP ")", name, key);
                goto bad;
            }
        }
        struct conf_bucket *b = &bs[got];
        const json_t *pr = json_object_get(o, "public_read");
        if (pr != NULL && !json_is_boolean(pr)) {
            fail(err, errlen, "buckets.%s.public_read: must be true or false", name);
            goto bad;
        }
        b->public_read = pr != NULL && json_is_true(pr);
        const json_t *cs = json_object_get(o, "consistency");
        if (cs != NULL) {
            const char *str = json_cstr(cs);
            if (str == NULL || consistency_parse(str, &b->consistency, &b->ttl_s) != 0) {
                fail(err, errlen, "buckets.%s.consistency: " CONSISTENCY_HELP, name, TTL_MAX_S);
                goto bad;
            }
            b->has_consistency = true;
        }
        const json_t *cb = json_object_get(o, "cold_bucket");
        if (cb != NULL && !json_is_null(cb)) {
            const char *str = json_cstr(cb);
            if (str == NULL || !s3_bucket_name_ok(str)) {
                fail(err, errlen, "buckets.%s.cold_bucket: " S3_BUCKET_NAME_HELP, name);
                goto bad;
            }
            b->cold_bucket = strdup(str);
            if (b->cold_bucket == NULL) {
                fail(err, errlen, "buckets: out of memory");
                goto bad;
            }
        }
        b->name = strdup(name);
        if (b->name == NULL) {
            fail(err, errlen, "buckets: out of memory");
            goto bad;
        }
        got++;
    }
    buckets_free(c->buckets, c->n_buckets);
    c->buckets = bs;
    c->n_buckets = got;
    return 0;
bad:
    buckets_free(bs, n);
    return -1;
}

static const char *const cache_keys[] = { "dir", "size", "high_watermark", "low_watermark",
                                          "fill_workers", "wait_timeout_ms", "on_write",
                                          "consistency", "read_path", "engine",
                                          "revalidate_timeout_ms" };
enum { N_CACHE_KEYS = sizeof cache_keys / sizeof cache_keys[0] };
_Static_assert(N_CACHE_KEYS == 11, "update cache_keys, CACHE_KEYS_HELP, cache_from_json and "
               "the example config");
#define CACHE_KEYS_HELP "dir, size, high_watermark, low_watermark, fill_workers, " \
                        "wait_timeout_ms, on_write, consistency, read_path, engine, " \
                        "revalidate_timeout_ms"

/* cache: {"dir": "/nvme/sg", "size": "100GiB", ...}. Each key given replaces
 * that one setting; the rest keep their values. Whether low_watermark is below
 * high_watermark is checked in conf_validate, once every source has spoken. */
static int cache_from_json(struct conf *c, const json_t *v, char *err, size_t errlen)
{
    const char *key;
    json_t *val;
    unsigned long long n = 0;

    if (!json_is_object(v))
        return fail(err, errlen, "cache: must be an object like {\"dir\": \"/nvme/shardgate\", "
                    "\"size\": \"100GiB\"}");
    json_object_foreach((json_t *)v, key, val) {
        size_t k = 0;
        while (k < N_CACHE_KEYS && strcmp(key, cache_keys[k]) != 0)
            k++;
        if (k == N_CACHE_KEYS)
            return fail(err, errlen, "cache: unknown key \"%.64s\" (allowed: " CACHE_KEYS_HELP
                        ")", key);
        if (strcmp(key, "dir") == 0) {
            const char *s = json_cstr(val);
            if (s == NULL && !json_is_null(val))
                return fail(err, errlen, "cache.dir: must be a non-empty path, or null for "
                            "no cache");
            if (set_cache_dir(c, "cache.dir", s, err, errlen) != 0)
                return -1;
        } else if (strcmp(key, "size") == 0) {
            if (json_is_integer(val)) {
                if (json_integer_value(val) < 0
                    || (uint64_t)json_integer_value(val) < CACHE_SIZE_MIN)
                    return fail(err, errlen, "cache.size: " SIZE_HELP);
                c->cache_size = (uint64_t)json_integer_value(val);
            } else {
                const char *s = json_cstr(val);
                if (s == NULL)
                    return fail(err, errlen, "cache.size: " SIZE_HELP);
                if (set_cache_size(c, "cache.size", s, err, errlen) != 0)
                    return -1;
            }
        } else if (strcmp(key, "high_watermark") == 0) {
            if (json_uint(val, "cache.high_watermark", 2, 100, &n, err, errlen) != 0)
                return -1;
            c->cache_high_pct = (unsigned)n;
        } else if (strcmp(key, "low_watermark") == 0) {
            if (json_uint(val, "cache.low_watermark", 1, 99, &n, err, errlen) != 0)
                return -1;
            c->cache_low_pct = (unsigned)n;
        } else if (strcmp(key, "fill_workers") == 0) {
            if (json_uint(val, "cache.fill_workers", 1, FILL_WORKERS_MAX, &n, err, errlen) != 0)
                return -1;
            c->cache_fill_workers = (unsigned)n;
        } else if (strcmp(key, "wait_timeout_ms") == 0) {
            if (json_uint(val, "cache.wait_timeout_ms", WAIT_MIN_MS, WAIT_MAX_MS, &n, err,
                          errlen) != 0)
                return -1;
            c->cache_wait_ms = (unsigned)n;
        } else if (strcmp(key, "revalidate_timeout_ms") == 0) {
            if (json_uint(val, "cache.revalidate_timeout_ms", 1, REVALIDATE_MAX_MS, &n, err,
                          errlen) != 0)
                return -1;
            c->cache_revalidate_ms = (unsigned)n;
        } else if (strcmp(key, "on_write") == 0) {
            if (!json_is_boolean(val))
                return fail(err, errlen, "cache.on_write: must be true or false");
            c->cache_on_write = json_is_true(val);
        } else if (strcmp(key, "read_path") == 0) {
            const char *s = json_cstr(val);
            if (s && strcmp(s, "auto") == 0)
                c->cache_read_path = CONF_READ_SENDFILE;
            else if (s && strcmp(s, "sendfile") == 0)
                c->cache_read_path = CONF_READ_SENDFILE;
            else if (s && strcmp(s, "io_uring") == 0)
                c->cache_read_path = CONF_READ_URING;
            else
                return fail(err, errlen, "cache.read_path: must be \"auto\", \"sendfile\" or "
                            "\"io_uring\"");
        } else if (strcmp(key, "engine") == 0) {
            const char *s = json_cstr(val);
            if (s == NULL)
                return fail(err, errlen, "cache.engine: must be \"auto\", \"io_uring\" or "
                            "\"threads\"");
            if (set_cache_engine(c, "cache.engine", s, err, errlen) != 0)
                return -1;
        } else { /* "consistency" */
            const char *s = json_cstr(val);
            if (s == NULL)
                return fail(err, errlen, "cache.consistency: " CONSISTENCY_HELP, TTL_MAX_S);
            if (set_consistency(c, "cache.consistency", s, err, errlen) != 0)
                return -1;
        }
    }
    return 0;
}

typedef int (*str_setter)(struct conf *c, const char *field, const char *s, char *err,
                          size_t errlen);

/* One top-level key of the file. String options go through the same setter as
 * their environment variable and flag; the others are handled in key_apply. */
struct file_key {
    const char *name;
    str_setter set;   /* NULL: not a plain string option */
    bool null_ok;     /* with set: null is passed on as NULL (turns the option off) */
};

static const struct file_key file_keys[] = {
    { "listen", set_listen, false },
    { "data_dir", set_data_dir, false },
    { "cold_url", set_cold_url, true },
    { "cold_ca_path", set_cold_ca_path, true },
    { "cold_connect_timeout_ms", NULL, false },
    { "cold_request_timeout_ms", NULL, false },
    { "cold_first_byte_timeout_ms", NULL, false },
    { "cold_retries", NULL, false },
    { "cold_access_key", NULL, false },
    { "cold_secret_key", NULL, false },
    { "cold_secret_key_env", NULL, false },
    { "cold_region", NULL, false },
    { "cold_virtual_hosted", NULL, false },
    { "spool_dir", set_spool_dir, false },
    { "state_dir", set_state_dir, true },
    { "mpu_max_age", NULL, false },
    { "cache", NULL, false },
    { "region", set_region, false },
    { "vhost_domain", NULL, false },
    { "threads", NULL, false },
    { "log_level", set_log_level, false },
    { "shutdown_grace_s", NULL, false },
    { "prefetch_keep_s", NULL, false },
    { "max_xml_body", NULL, false },
    { "max_header_bytes", NULL, false },
    { "metrics_public", NULL, false },
    { "sigv2", NULL, false },
    { "users", NULL, false },
    { "buckets", NULL, false },
    { "connections", NULL, false },
    { "log_format", set_log_format, false },
    { "log_file", set_log_file, true },
};
enum { N_FILE_KEYS = sizeof file_keys / sizeof file_keys[0] };
_Static_assert(N_FILE_KEYS == 32, "update file_keys, FILE_KEYS_HELP, key_apply and the "
               "example config");

#define FILE_KEYS_HELP "listen, data_dir, cold_url, cold_ca_path, cold_connect_timeout_ms, " \
                       "cold_request_timeout_ms, cold_first_byte_timeout_ms, "                 \
                       "cold_retries, cold_access_key, "                                       \
                       "cold_secret_key, cold_secret_key_env, cold_region, "                   \
                       "cold_virtual_hosted, spool_dir, state_dir, mpu_max_age, cache, "       \
                       "region, "                                                              \
                       "vhost_domain, threads, log_level, shutdown_grace_s, prefetch_keep_s, " \
                       "max_xml_body, max_header_bytes, metrics_public, sigv2, users, buckets, " \
                       "connections, log_format, log_file"

static int key_apply(struct conf *c, const struct file_key *k, const json_t *v, char *err,
                     size_t errlen)
{
    unsigned long long n = 0;

    if (k->set != NULL) {
        if (k->null_ok && json_is_null(v))
            return k->set(c, k->name, NULL, err, errlen);
        const char *s = json_cstr(v);
        if (s == NULL)
            return fail(err, errlen, "%s: must be a string%s", k->name,
                        k->null_ok ? " or null" : "");
        return k->set(c, k->name, s, err, errlen);
    }
    if (strcmp(k->name, "vhost_domain") == 0) {
        if (json_is_null(v))
            return set_vhost_domain(c, k->name, NULL, err, errlen);
        const char *s = json_cstr(v);
        if (s == NULL || s[0] == '\0')
            return fail(err, errlen, "vhost_domain: must be a non-empty string or null");
        return set_vhost_domain(c, k->name, s, err, errlen);
    }
    if (strcmp(k->name, "threads") == 0) {
        if (json_uint(v, k->name, 0, THREADS_MAX, &n, err, errlen) != 0)
            return -1;
        c->threads = (unsigned)n;
        return 0;
    }
    if (strcmp(k->name, "shutdown_grace_s") == 0) {
        if (json_uint(v, k->name, 0, GRACE_MAX_S, &n, err, errlen) != 0)
            return -1;
        c->shutdown_grace_s = (unsigned)n;
        return 0;
    }
    if (strcmp(k->name, "prefetch_keep_s") == 0) {
        if (json_uint(v, k->name, 1, 30u * 86400, &n, err, errlen) != 0)
            return -1;
        c->prefetch_keep_s = (unsigned)n;
        return 0;
    }
    if (strcmp(k->name, "max_xml_body") == 0) {
        if (json_uint(v, k->name, XML_BODY_MIN, XML_BODY_MAX, &n, err, errlen) != 0)
            return -1;
        c->max_xml_body = n;
        return 0;
    }
    if (strcmp(k->name, "max_header_bytes") == 0) {
        if (json_uint(v, k->name, HEADER_MIN, HEADER_MAX, &n, err, errlen) != 0)
            return -1;
        c->max_header_bytes = (unsigned)n;
        return 0;
    }
    if (strcmp(k->name, "cold_connect_timeout_ms") == 0) {
        if (json_uint(v, k->name, 1, CONNECT_TIMEOUT_MAX_MS, &n, err, errlen) != 0)
            return -1;
        c->cold_connect_timeout_ms = (unsigned)n;
        return 0;
    }
    if (strcmp(k->name, "cold_request_timeout_ms") == 0) {
        if (json_uint(v, k->name, 1, REQUEST_TIMEOUT_MAX_MS, &n, err, errlen) != 0)
            return -1;
        c->cold_request_timeout_ms = (unsigned)n;
        return 0;
    }
    if (strcmp(k->name, "cold_first_byte_timeout_ms") == 0) {
        if (json_uint(v, k->name, 1, FIRST_BYTE_MAX_MS, &n, err, errlen) != 0)
            return -1;
        c->cold_first_byte_timeout_ms = (unsigned)n;
        return 0;
    }
    if (strcmp(k->name, "cold_retries") == 0) {
        if (json_uint(v, k->name, 0, RETRIES_MAX, &n, err, errlen) != 0)
            return -1;
        c->cold_retries = (unsigned)n;
        return 0;
    }
    if (strcmp(k->name, "cold_virtual_hosted") == 0) {
        if (!json_is_boolean(v))
            return fail(err, errlen, "cold_virtual_hosted: must be true or false");
        c->cold_virtual_hosted = json_is_true(v);
        return 0;
    }
    if (strcmp(k->name, "cold_access_key") == 0 || strcmp(k->name, "cold_secret_key") == 0 ||
        strcmp(k->name, "cold_region") == 0) {
        const char *s = json_cstr(v);
        if (s == NULL || s[0] == '\0')
            return fail(err, errlen, "%s: must be a non-empty string", k->name);
        char **dst = k->name[5] == 'a' ? &c->cold_access_key
                     : k->name[5] == 's' ? &c->cold_secret_key : &c->cold_region;
        if (replace_str(dst, s) != 0)
            return fail(err, errlen, "%s: out of memory", k->name);
        return 0;
    }
    if (strcmp(k->name, "cold_secret_key_env") == 0) {
        const char *name = json_cstr(v);
        const char *val = name && name[0] ? getenv(name) : NULL;
        if (name == NULL || name[0] == '\0')
            return fail(err, errlen, "cold_secret_key_env: must name an environment variable");
        if (val == NULL || val[0] == '\0')
            return fail(err, errlen, "cold_secret_key_env: the variable %s is not set", name);
        if (replace_str(&c->cold_secret_key, val) != 0)
            return fail(err, errlen, "cold_secret_key_env: out of memory");
        return 0;
    }
    if (strcmp(k->name, "mpu_max_age") == 0) {
        if (json_is_string(v))
            return set_mpu_max_age(c, k->name, json_string_value(v), err, errlen);
        if (json_uint(v, k->name, 0, MPU_MAX_AGE_MAX_S, &n, err, errlen) != 0)
            return fail(err, errlen, "mpu_max_age: " MPU_MAX_AGE_HELP);
        c->mpu_max_age_s = (unsigned)n;
        return 0;
    }
    if (strcmp(k->name, "metrics_public") == 0) {
        if (!json_is_boolean(v))
            return fail(err, errlen, "metrics_public: must be true or false");
        c->metrics_public = json_is_true(v);
        return 0;
    }
    if (strcmp(k->name, "sigv2") == 0) {
        if (!json_is_boolean(v))
            return fail(err, errlen, "sigv2: must be true or false");
        c->sigv2 = json_is_true(v);
        return 0;
    }
    if (strcmp(k->name, "cache") == 0)
        return cache_from_json(c, v, err, errlen);
    if (strcmp(k->name, "connections") == 0)
        return conf_connections_from_json(c, v, err, errlen);
    if (strcmp(k->name, "buckets") == 0)
        return buckets_from_json(c, v, err, errlen);
    /* "users" */
    return users_from_json(c, v, err, errlen);
}

static int conf_apply_json(struct conf *c, json_t *root, char *err, size_t errlen)
{
    const char *key;
    json_t *val;

    if (!json_is_object(root))
        return fail(err, errlen, "top level: must be a JSON object");
    json_object_foreach(root, key, val) {
        const struct file_key *k = NULL;
        for (size_t i = 0; i < N_FILE_KEYS && k == NULL; i++) {
            if (strcmp(key, file_keys[i].name) == 0)
                k = &file_keys[i];
        }
        if (k == NULL)
            return fail(err, errlen, "unknown key \"%.64s\" (allowed: " FILE_KEYS_HELP ")", key);
        if (key_apply(c, k, val, err, errlen) != 0)
            return -1;
    }
    return 0;
}

/* True when some user carries "secret_key" in the file itself (or when
 * "users" is not even a well-formed list, to stay on the safe side). A file
 * whose users all take secret_key_env holds no secret and may be readable. */
static bool file_holds_secrets(const json_t *users)
{
    if (users == NULL)
        return false;
    if (!json_is_array(users))
        return true;
    for (size_t i = 0; i < json_array_size(users); i++) {
        const json_t *u = json_array_get(users, i);
        if (!json_is_object(u) || json_object_get(u, "secret_key") != NULL)
            return true;
    }
    return false;
}

int conf_load_file(struct conf *c, const char *path, char *err, size_t errlen)
{
    char msg[512];
    json_error_t jerr;
    struct stat st;
    struct conf tmp;
    json_t *root = NULL;
    int rc = -1;

    err_clear(err, errlen);
    /* O_NONBLOCK so a FIFO given by mistake is refused below instead of
     * blocking start-up; it changes nothing for regular files. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        return fail(err, errlen, "%s: cannot open: %s", path, strerror(e));
    }
    /* fstat the descriptor we read, not the path, so the mode we check is the
     * mode of the file we load. */
    if (fstat(fd, &st) != 0) {
        int e = errno;
        fail(err, errlen, "%s: cannot stat: %s", path, strerror(e));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        fail(err, errlen, "%s: not a regular file", path);
        goto out;
    }
    root = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        fail(err, errlen, "%s: invalid JSON at line %d, column %d: %s", path, jerr.line,
             jerr.column, jerr.text);
        goto out;
    }
    if (json_is_object(root) &&
        (file_holds_secrets(json_object_get(root, "users")) ||
         json_object_get(root, "cold_secret_key") != NULL) &&
        (st.st_mode & 077) != 0) {
        fail(err, errlen, "%s: holds secret keys but its mode %04o lets group or others "
             "access it; run chmod 600 %s", path, (unsigned)(st.st_mode & 07777), path);
        goto out;
    }
    if (conf_copy(&tmp, c) != 0) {
        fail(err, errlen, "%s: out of memory", path);
        goto out;
    }
    if (conf_apply_json(&tmp, root, msg, sizeof msg) != 0) {
        conf_free(&tmp);
        fail(err, errlen, "%s: %s", path, msg);
        goto out;
    }
    conf_commit(c, &tmp);
    rc = 0;
out:
    json_decref(root);
    close(fd);
    return rc;
}

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
        return fail(err, errlen, "SHARDGATE_ACCESS_KEY and SHARDGATE_SECRET_KEY must be set "
                    "together (only %s is set)",
                    ak != NULL ? "SHARDGATE_ACCESS_KEY" : "SHARDGATE_SECRET_KEY");
    if (!access_key_ok(ak))
        return fail(err, errlen, "SHARDGATE_ACCESS_KEY: " ACCESS_KEY_HELP);
    if (sk[0] == '\0')
        return fail(err, errlen, "SHARDGATE_SECRET_KEY: must not be empty");
    if (c->n_users == 0) {
        c->users = calloc(1, sizeof *c->users);
        if (c->users == NULL)
            return fail(err, errlen, "SHARDGATE_ACCESS_KEY: out of memory");
        c->n_users = 1;
        if ((c->users[0].name = strdup("root")) == NULL || perms_set_root(&c->users[0]) != 0)
            return fail(err, errlen, "SHARDGATE_ACCESS_KEY: out of memory");
    }
    if (replace_str(&c->users[0].access_key, ak) != 0
        || replace_str(&c->users[0].secret_key, sk) != 0)
        return fail(err, errlen, "SHARDGATE_ACCESS_KEY: out of memory");
    c->default_credentials = false;
    return 0;
}

static const struct {
    const char *name;
    str_setter set;
} env_vars[] = {
    { "SHARDGATE_LISTEN", set_listen },
    { "SHARDGATE_DATA_DIR", set_data_dir },
    { "SHARDGATE_REGION", set_region },
    { "SHARDGATE_LOG_LEVEL", set_log_level },
    { "SHARDGATE_COLD_URL", set_cold_url },
    { "SHARDGATE_CACHE_DIR", set_cache_dir },
    { "SHARDGATE_CACHE_SIZE", set_cache_size },
    { "SHARDGATE_CONSISTENCY", set_consistency },
    { "SHARDGATE_STATE_DIR", set_state_dir },
    { "SHARDGATE_MPU_MAX_AGE", set_mpu_max_age },
    { "SHARDGATE_CACHE_ENGINE", set_cache_engine },
    { "SHARDGATE_LOG_FORMAT", set_log_format },
    { "SHARDGATE_LOG_FILE", set_log_file },
};

int conf_apply_env(struct conf *c, char *err, size_t errlen)
{
    struct conf tmp;

    err_clear(err, errlen);
    if (conf_copy(&tmp, c) != 0)
        return fail(err, errlen, "environment: out of memory");
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

static int set_threads(struct conf *c, const char *field, const char *s, char *err,
                       size_t errlen)
{
    unsigned v;
    if (uint_parse(s, THREADS_MAX, &v) != 0)
        return fail(err, errlen, "%s: must be an integer from 0 to %u", field, THREADS_MAX);
    c->threads = v;
    return 0;
}

static const struct {
    const char *name;     /* without dashes */
    const char *field;    /* as the user typed it */
    str_setter set;
} flags[] = {
    { "listen", "--listen", set_listen },
    { "data", "--data", set_data_dir },
    { "region", "--region", set_region },
    { "vhost-domain", "--vhost-domain", set_vhost_domain },
    { "threads", "--threads", set_threads },
    { "log-level", "--log-level", set_log_level },
    { "cold", "--cold", set_cold_url },
    { "cache-dir", "--cache-dir", set_cache_dir },
    { "cache-size", "--cache-size", set_cache_size },
    { "consistency", "--consistency", set_consistency },
    { "state-dir", "--state-dir", set_state_dir },
    { "log-format", "--log-format", set_log_format },
    { "log-file", "--log-file", set_log_file },
};

/* Each setter checks its value before touching `c`, so a single flag needs
 * no copy to stay all-or-nothing. */
int conf_set_flag(struct conf *c, const char *flag, const char *value, char *err, size_t errlen)
{
    err_clear(err, errlen);
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        if (strcmp(flag, flags[i].name) != 0)
            continue;
        if (value == NULL)
            return fail(err, errlen, "%s: requires a value", flags[i].field);
        return flags[i].set(c, flags[i].field, value, err, errlen);
    }
    return fail(err, errlen, "unknown flag \"--%.64s\" (allowed: --listen, --data, --region, "
                "--vhost-domain, --threads, --log-level, --cold, --cache-dir, --cache-size, "
                "--consistency, --state-dir, --log-format, --log-file)", flag);
}

/* ---- final checks ---- */

/* The name a listed bucket has in the cold tier. */
static const char *bucket_cold_name(const struct conf_bucket *b)
{
    return b->cold_bucket != NULL ? b->cold_bucket : b->name;
}

/* Finds a listed bucket `*with` whose cold_bucket is also the cold name of
 * another listed bucket `*other`; returns 1 and their indexes. Buckets not
 * listed cannot be checked: they are only known at request time. Scans only
 * from entries with a cold_bucket, so a long list of plain buckets stays
 * linear. */
static int buckets_find_cold_alias(const struct conf_bucket *bs, size_t n, size_t *with,
                                   size_t *other)
{
    for (size_t i = 0; i < n; i++) {
        if (bs[i].cold_bucket == NULL)
            continue;
        for (size_t j = 0; j < n; j++) {
            if (j != i && bs[j].name != NULL
                && strcmp(bs[i].cold_bucket, bucket_cold_name(&bs[j])) == 0) {
                *with = i;
                *other = j;
                return 1;
            }
        }
    }
    return 0;
}

int conf_validate(const struct conf *c, char *err, size_t errlen)
{
    size_t a, b;

    err_clear(err, errlen);
    if (c->listen_addr == NULL || c->listen_addr[0] == '\0')
        return fail(err, errlen, "listen: address is missing");
    if (c->listen_port == 0)
        return fail(err, errlen, "listen: port must be from 1 to 65535");
    if (c->data_dir == NULL || c->data_dir[0] == '\0')
        return fail(err, errlen, "data_dir: must not be empty");
    if (c->region == NULL || c->region[0] == '\0')
        return fail(err, errlen, "region: must not be empty");
    if (c->cold_url != NULL && !cold_url_ok(c->cold_url))
        return fail(err, errlen, "cold_url: " COLD_URL_HELP);
    if (c->cold_url != NULL && c->data_dir_from != NULL)
        return fail(err, errlen, "%s and cold_url (--cold, SHARDGATE_COLD_URL) are exclusive: "
                    "the cold tier is either a local directory (--data, SHARDGATE_DATA_DIR, "
                    "\"data_dir\" in the config file) or an S3 endpoint; give only one",
                    c->data_dir_from);
    if (c->cold_url != NULL && c->state_dir != NULL)
        return fail(err, errlen, "state_dir (--state-dir, SHARDGATE_STATE_DIR) belongs to the "
                    "local directory store: it has no use with cold_url (--cold)");
    if (c->state_dir != NULL && c->state_dir[0] == '\0')
        return fail(err, errlen, "state_dir: must be a non-empty path or null");
    if (c->mpu_max_age_s > MPU_MAX_AGE_MAX_S)
        return fail(err, errlen, "mpu_max_age: " MPU_MAX_AGE_HELP);
    if ((c->cold_access_key == NULL) != (c->cold_secret_key == NULL))
        return fail(err, errlen, "cold_access_key and cold_secret_key (or cold_secret_key_env) "
                    "go together: give both, or neither to use AWS_ACCESS_KEY_ID / "
                    "AWS_SECRET_ACCESS_KEY");
    if (c->cold_ca_path != NULL && c->cold_ca_path[0] == '\0')
        return fail(err, errlen, "cold_ca_path: must be a non-empty path or null");
    if (c->cold_connect_timeout_ms < 1 || c->cold_connect_timeout_ms > CONNECT_TIMEOUT_MAX_MS)
        return fail(err, errlen, "cold_connect_timeout_ms: must be an integer from 1 to %u",
                    CONNECT_TIMEOUT_MAX_MS);
    if (c->cold_request_timeout_ms < 1 || c->cold_request_timeout_ms > REQUEST_TIMEOUT_MAX_MS)
        return fail(err, errlen, "cold_request_timeout_ms: must be an integer from 1 to %u",
                    REQUEST_TIMEOUT_MAX_MS);
    if (c->cold_first_byte_timeout_ms < 1 || c->cold_first_byte_timeout_ms > FIRST_BYTE_MAX_MS)
        return fail(err, errlen, "cold_first_byte_timeout_ms: must be an integer from 1 to %u",
                    FIRST_BYTE_MAX_MS);
    if (c->cache_revalidate_ms < 1 || c->cache_revalidate_ms > REVALIDATE_MAX_MS)
        return fail(err, errlen, "cache.revalidate_timeout_ms: must be an integer from 1 to %u",
                    REVALIDATE_MAX_MS);
    if (c->cold_retries > RETRIES_MAX)
        return fail(err, errlen, "cold_retries: must be an integer from 0 to %u", RETRIES_MAX);
    if (c->spool_dir == NULL || c->spool_dir[0] == '\0')
        return fail(err, errlen, "spool_dir: must not be empty");
    if (c->cache_dir != NULL && c->cache_dir[0] == '\0')
        return fail(err, errlen, "cache.dir: must be a non-empty path or null");
    if (c->cache_size < CACHE_SIZE_MIN)
        return fail(err, errlen, "cache.size: " SIZE_HELP);
    if (c->cache_high_pct < 2 || c->cache_high_pct > 100)
        return fail(err, errlen, "cache.high_watermark: must be an integer from 2 to 100");
    if (c->cache_low_pct < 1 || c->cache_low_pct >= c->cache_high_pct)
        return fail(err, errlen, "cache.low_watermark: must be an integer from 1 to %u, below "
                    "cache.high_watermark (%u)", c->cache_high_pct - 1, c->cache_high_pct);
    if (c->cache_fill_workers < 1 || c->cache_fill_workers > FILL_WORKERS_MAX)
        return fail(err, errlen, "cache.fill_workers: must be an integer from 1 to %u",
                    FILL_WORKERS_MAX);
    if (c->cache_wait_ms < WAIT_MIN_MS || c->cache_wait_ms > WAIT_MAX_MS)
        return fail(err, errlen, "cache.wait_timeout_ms: must be an integer from %u to %u",
                    WAIT_MIN_MS, WAIT_MAX_MS);
    if (!consistency_ok(c->consistency, c->consistency_ttl_s))
        return fail(err, errlen, "consistency: " CONSISTENCY_HELP, TTL_MAX_S);
    if (c->threads > THREADS_MAX)
        return fail(err, errlen, "threads: must be an integer from 0 to %u", THREADS_MAX);
    if (c->shutdown_grace_s > GRACE_MAX_S)
        return fail(err, errlen, "shutdown_grace_s: must be an integer from 0 to %u",
                    GRACE_MAX_S);
    if (c->max_xml_body < XML_BODY_MIN || c->max_xml_body > XML_BODY_MAX)
        return fail(err, errlen, "max_xml_body: must be an integer from %u to %u",
                    XML_BODY_MIN, XML_BODY_MAX);
    if (c->max_header_bytes < HEADER_MIN || c->max_header_bytes > HEADER_MAX)
        return fail(err, errlen, "max_header_bytes: must be an integer from %u to %u",
                    HEADER_MIN, HEADER_MAX);
    if (conf_connections_validate(c, err, errlen) != 0)
        return -1;
    if (c->users == NULL || c->n_users == 0)
        return fail(err, errlen, "users: at least one user is required");
    for (size_t i = 0; i < c->n_users; i++) {
        const struct conf_user *u = &c->users[i];
        if (u->name == NULL || u->name[0] == '\0')
            return fail(err, errlen, "users[%zu].name: must not be empty", i);
        if (u->access_key == NULL || u->access_key[0] == '\0')
            return fail(err, errlen, "users[%zu].access_key: must not be empty", i);
        if (u->secret_key == NULL || u->secret_key[0] == '\0')
            return fail(err, errlen, "users[%zu].secret_key: must not be empty", i);
        for (size_t k = 0; k < u->n_perms; k++) {
            const struct conf_perm *p = &u->perms[k];
            if (p->bucket == NULL || (strcmp(p->bucket, "*") != 0 && !bucket_name_ok(p->bucket)))
                return fail(err, errlen, "users[%zu].permissions: key " BUCKET_NAME_HELP, i);
            if (p->level > CONF_PERM_ADMIN)
                return fail(err, errlen, "users[%zu].permissions.%s: bad level", i, p->bucket);
        }
    }
    for (size_t i = 0; i < c->n_buckets; i++) {
        const struct conf_bucket *bk = &c->buckets[i];
        if (bk->name == NULL || !bucket_name_ok(bk->name))
            return fail(err, errlen, "buckets: entry %zu has no valid bucket name", i);
        if (bk->has_consistency && !consistency_ok(bk->consistency, bk->ttl_s))
            return fail(err, errlen, "buckets.%s.consistency: " CONSISTENCY_HELP, bk->name,
                        TTL_MAX_S);
        if (bk->cold_bucket != NULL && !s3_bucket_name_ok(bk->cold_bucket))
            return fail(err, errlen, "buckets.%s.cold_bucket: " S3_BUCKET_NAME_HELP, bk->name);
    }
    if (buckets_find_cold_alias(c->buckets, c->n_buckets, &a, &b))
        return fail(err, errlen, "buckets.%s.cold_bucket: \"%s\" is already the cold bucket of "
                    "buckets.%s (two names for one bucket would each cache their own copy)",
                    c->buckets[a].name, c->buckets[a].cold_bucket, c->buckets[b].name);
    if (users_find_duplicate(c->users, c->n_users, &a, &b))
        return fail(err, errlen, "users[%zu].access_key: same as users[%zu].access_key "
                    "(access keys must be unique)", b, a);
    return 0;
}
