/* conf/conf_values.c - the option values the file, the environment and the
 * flags share: listen addresses, paths, the cold tier's URL, sizes, durations,
 * consistency and the enums. Each setter checks its value before it touches
 * the struct conf, and its message names the option as the user spelled it. */
#include "conf.h"
#include "conf_int.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

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
static int set_opt_path(char **dst, const char *field, const char *s, const char *null_means,
                        char *err, size_t errlen);

/* Sets listen_addr (without brackets) and listen_port. A host name is only
 * checked for its form here and resolved when the gateway binds, so that a
 * configuration can be checked without DNS; ":PORT" means every IPv4
 * interface, as S3 servers' ":9000" does (the gateway warns about it). */
int conf_set_listen(struct conf *c, const char *field, const char *s, char *err, size_t errlen)
{
    size_t len = strlen(s);
    char host[LISTEN_MAX + 1];
    const char *port;
    unsigned char bin[sizeof(struct in6_addr)];

    if (len == 0 || len > LISTEN_MAX)
        return conf_fail(err, errlen, "%s: " LISTEN_HELP, field);
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (rb == NULL || rb[1] != ':')
            return conf_fail(err, errlen, "%s: \"%s\" " LISTEN_HELP, field, s);
        size_t hl = (size_t)(rb - (s + 1));
        memcpy(host, s + 1, hl);
        host[hl] = '\0';
        port = rb + 2;
        if (inet_pton(AF_INET6, host, bin) != 1)
            return conf_fail(err, errlen, "%s: \"%s\" " LISTEN_HELP, field, s);
    } else {
        const char *colon = strchr(s, ':');
        if (colon == NULL || strchr(colon + 1, ':') != NULL)
            return conf_fail(err, errlen, "%s: \"%s\" " LISTEN_HELP, field, s);
        size_t hl = (size_t)(colon - s);
        memcpy(host, s, hl);
        host[hl] = '\0';
        port = colon + 1;
        if (hl == 0)
            strcpy(host, "0.0.0.0");
        else if (!host_name_ok(s, colon))
            return conf_fail(err, errlen, "%s: \"%s\" " LISTEN_HELP, field, s);
    }
    uint16_t p;
    if (port_parse(port, s + len, &p) != 0)
        return conf_fail(err, errlen, "%s: \"%s\" " LISTEN_HELP, field, s);
    if (conf_replace_str(&c->listen_addr, host) != 0)
        return conf_fail(err, errlen, "%s: out of memory", field);
    c->listen_port = p;
    return 0;
}

int conf_choice(const char *field, const char *s, const char *const *names, size_t n,
                unsigned *idx, char *err, size_t errlen)
{
    for (size_t i = 0; s && i < n; i++) {
        if (strcmp(s, names[i]) == 0) {
            *idx = (unsigned)i;
            return 0;
        }
    }
    char list[256] = "";
    size_t len = 0;
    for (size_t i = 0; i < n && len < sizeof list; i++) {
        const char *sep = i == 0 ? "" : (n < 4 && i == n - 1) ? " or " : ", ";
        int w = snprintf(list + len, sizeof list - len, "%s\"%s\"", sep, names[i]);
        len += w > 0 ? (size_t)w : 0;
    }
    return conf_fail(err, errlen, "%s: must be %s%s", field, n < 4 ? "" : "one of ", list);
}

int conf_set_log_level(struct conf *c, const char *field, const char *s, char *err,
                       size_t errlen)
{
    static const char *const names[] = {
        [LOG_LVL_ERROR] = "error", [LOG_LVL_WARN] = "warn",
        [LOG_LVL_INFO] = "info", [LOG_LVL_DEBUG] = "debug",
    };
    _Static_assert(sizeof names / sizeof names[0] == LOG_LVL_DEBUG + 1, "a name per level");
    unsigned i = 0;   /* set by conf_choice on success; gcc -O2 cannot tell */
    if (conf_choice(field, s, names, sizeof names / sizeof names[0], &i, err, errlen) != 0)
        return -1;
    c->log_level = (enum log_level)i;
    return 0;
}

int conf_set_log_format(struct conf *c, const char *field, const char *s, char *err,
                        size_t errlen)
{
    static const char *const names[] = { [LOG_FMT_TEXT] = "text", [LOG_FMT_JSON] = "json" };
    _Static_assert(sizeof names / sizeof names[0] == LOG_FMT_JSON + 1, "a name per format");
    unsigned i = 0;   /* set by conf_choice on success; gcc -O2 cannot tell */
    if (conf_choice(field, s, names, sizeof names / sizeof names[0], &i, err, errlen) != 0)
        return -1;
    c->log_format = (enum log_format)i;
    return 0;
}

int conf_set_log_file(struct conf *c, const char *field, const char *s, char *err,
                      size_t errlen)
{
    return set_opt_path(&c->log_file, field, s,
                        strcmp(field, "log_file") == 0 ? " or null" : "", err, errlen);
}

int conf_set_data_dir(struct conf *c, const char *field, const char *s, char *err,
                      size_t errlen)
{
    if (s[0] == '\0')
        return conf_fail(err, errlen, "%s: must be a non-empty path", field);
    if (conf_replace_str(&c->data_dir, s) != 0)
        return conf_fail(err, errlen, "%s: out of memory", field);
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

int conf_set_region(struct conf *c, const char *field, const char *s, char *err, size_t errlen)
{
    if (!region_ok(s))
        return conf_fail(err, errlen,
                         "%s: must be 1 to %u letters, digits, '-' or '_' (like \"us-east-1\")",
                         field, REGION_MAX);
    if (conf_replace_str(&c->region, s) != 0)
        return conf_fail(err, errlen, "%s: out of memory", field);
    return 0;
}

/* NULL or "" turns virtual-host addressing off. */
int conf_set_vhost_domain(struct conf *c, const char *field, const char *s, char *err,
                          size_t errlen)
{
    if (s == NULL || s[0] == '\0') {
        free(c->vhost_domain);
        c->vhost_domain = NULL;
        return 0;
    }
    if (conf_replace_str(&c->vhost_domain, s) != 0)
        return conf_fail(err, errlen, "%s: out of memory", field);
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
int conf_access_key_ok(const char *s)
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

/* http(s)://host[:port][/]. The S3 client appends "/bucket/key" itself, so a
 * path would be lost, and user:password@ would put a secret in the config and
 * in log lines. Only what curl and SigV4 agree on gets through. */
int conf_cold_url_ok(const char *s)
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
int conf_set_cold_url(struct conf *c, const char *field, const char *s, char *err,
                      size_t errlen)
{
    if (s == NULL) {
        free(c->cold_url);
        c->cold_url = NULL;
        return 0;
    }
    if (!conf_cold_url_ok(s))
        return conf_fail(err, errlen, "%s: " COLD_URL_HELP, field);
    if (conf_replace_str(&c->cold_url, s) != 0)
        return conf_fail(err, errlen, "%s: out of memory", field);
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
        return conf_fail(err, errlen, "%s: must be a non-empty path%s", field, null_means);
    if (conf_replace_str(dst, s) != 0)
        return conf_fail(err, errlen, "%s: out of memory", field);
    return 0;
}

int conf_set_cold_ca_path(struct conf *c, const char *field, const char *s, char *err,
                          size_t errlen)
{
    return set_opt_path(&c->cold_ca_path, field, s, " (null: the system CA store)", err,
                        errlen);
}

int conf_set_cache_dir(struct conf *c, const char *field, const char *s, char *err,
                       size_t errlen)
{
    return set_opt_path(&c->cache_dir, field, s, " (null in the config file: no cache)", err,
                        errlen);
}

int conf_set_spool_dir(struct conf *c, const char *field, const char *s, char *err,
                       size_t errlen)
{
    return set_opt_path(&c->spool_dir, field, s, "", err, errlen);
}

int conf_set_state_dir(struct conf *c, const char *field, const char *s, char *err,
                       size_t errlen)
{
    return set_opt_path(&c->state_dir, field, s,
                        " (null in the config file: data_dir/.shardgate)", err, errlen);
}

/* "604800", "7d", "12h", "30m", "45s": digits, then at most one unit. */
int conf_set_mpu_max_age(struct conf *c, const char *field, const char *s, char *err,
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
        return conf_fail(err, errlen, "%s: \"%s\" " MPU_MAX_AGE_HELP, field, s);
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

int conf_set_cache_size(struct conf *c, const char *field, const char *s, char *err,
                        size_t errlen)
{
    uint64_t v;
    if (conf_size_parse(s, &v) != 0 || v < CACHE_SIZE_MIN)
        return conf_fail(err, errlen, "%s: " SIZE_HELP, field);
    c->cache_size = v;
    return 0;
}

int conf_set_cache_engine(struct conf *c, const char *field, const char *s, char *err,
                          size_t errlen)
{
    static const char *const names[] = {
        [CONF_ENGINE_AUTO] = "auto", [CONF_ENGINE_URING] = "io_uring",
        [CONF_ENGINE_THREADS] = "threads",
    };
    _Static_assert(sizeof names / sizeof names[0] == CONF_ENGINE_THREADS + 1, "a name per engine");
    unsigned i = 0;   /* set by conf_choice on success; gcc -O2 cannot tell */
    if (conf_choice(field, s, names, sizeof names / sizeof names[0], &i, err, errlen) != 0)
        return -1;
    c->cache_engine = (enum conf_cache_engine)i;
    return 0;
}

/* "immutable", "always" or "ttl:SECONDS"; *ttl is 0 unless the mode is TTL. */
int conf_consistency_parse(const char *s, enum conf_consistency *mode, unsigned *ttl)
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

/* For conf_validate: a mode and TTL as conf_consistency_parse would leave them. */
bool conf_consistency_ok(enum conf_consistency mode, unsigned ttl)
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

int conf_set_consistency(struct conf *c, const char *field, const char *s, char *err,
                         size_t errlen)
{
    enum conf_consistency mode;
    unsigned ttl;
    if (conf_consistency_parse(s, &mode, &ttl) != 0)
        return conf_fail(err, errlen, "%s: " CONSISTENCY_HELP, field, TTL_MAX_S);
    c->consistency = mode;
    c->consistency_ttl_s = ttl;
    return 0;
}

int conf_set_threads(struct conf *c, const char *field, const char *s, char *err,
                     size_t errlen)
{
    unsigned v;
    if (uint_parse(s, THREADS_MAX, &v) != 0)
        return conf_fail(err, errlen, "%s: must be an integer from 0 to %u", field, THREADS_MAX);
    c->threads = v;
    return 0;
}
