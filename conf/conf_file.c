/* conf/conf_file.c - the JSON config file: opening it with care (a regular
 * file, private when it holds secrets), its top-level and "cache" keys and
 * what each key's value goes through. "users" and "buckets" are read in
 * conf_users.c, "connections" in connections.c. */
#include "conf.h"
#include "conf_int.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int json_uint(const json_t *v, const char *field, unsigned long long min,
                     unsigned long long max, unsigned long long *out, char *err, size_t errlen)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0
        || (unsigned long long)json_integer_value(v) < min
        || (unsigned long long)json_integer_value(v) > max)
        return conf_fail(err, errlen, "%s: must be an integer from %llu to %llu", field, min, max);
    *out = (unsigned long long)json_integer_value(v);
    return 0;
}

/* A memory budget: 0 (off) or bytes up to CACHE_MEMORY_MAX, as a number or
 * a size string. */
static int json_memory(const json_t *val, const char *name, uint64_t *out, char *err,
                       size_t errlen)
{
    uint64_t bytes = 0;
    const char *s = conf_json_cstr(val);
    if (json_is_integer(val) && json_integer_value(val) >= 0)
        bytes = (uint64_t)json_integer_value(val);
    else if (s == NULL || conf_size_parse(s, &bytes) != 0)
        return conf_fail(err, errlen, "%s: " MEMORY_HELP, name);
    if (bytes > CACHE_MEMORY_MAX)
        return conf_fail(err, errlen, "%s: " MEMORY_HELP, name);
    *out = bytes;
    return 0;
}

static const char *const cache_keys[] = { "dir", "size", "high_watermark", "low_watermark",
                                          "fill_workers", "wait_timeout_ms", "on_write",
                                          "consistency", "read_path", "engine",
                                          "revalidate_timeout_ms", "memory", "fill_io",
                                          "header_memory" };
enum { N_CACHE_KEYS = sizeof cache_keys / sizeof cache_keys[0] };
_Static_assert(N_CACHE_KEYS == 14, "update cache_keys, CACHE_KEYS_HELP, cache_from_json and "
               "the example config");
#define CACHE_KEYS_HELP "dir, size, high_watermark, low_watermark, fill_workers, " \
                        "wait_timeout_ms, on_write, consistency, read_path, engine, " \
                        "revalidate_timeout_ms, memory, fill_io, header_memory"

/* cache: {"dir": "/nvme/sg", "size": "100GiB", ...}. Each key given replaces
 * that one setting; the rest keep their values. Whether low_watermark is below
 * high_watermark is checked in conf_validate, once every source has spoken. */
static int cache_from_json(struct conf *c, const json_t *v, char *err, size_t errlen)
{
    const char *key;
    json_t *val;
    unsigned long long n = 0;

    if (!json_is_object(v))
        return conf_fail(err, errlen, "cache: must be an object like {\"dir\": "
                         "\"/nvme/shardgate\", \"size\": \"100GiB\"}");
    json_object_foreach((json_t *)v, key, val) {
        size_t k = 0;
        while (k < N_CACHE_KEYS && strcmp(key, cache_keys[k]) != 0)
            k++;
        if (k == N_CACHE_KEYS)
            return conf_fail(err, errlen, "cache: unknown key \"%.64s\" (allowed: " CACHE_KEYS_HELP
                             ")", key);
        if (strcmp(key, "dir") == 0) {
            const char *s = conf_json_cstr(val);
            if (s == NULL && !json_is_null(val))
                return conf_fail(err, errlen, "cache.dir: must be a non-empty path, or null for "
                                 "no cache");
            if (conf_set_cache_dir(c, "cache.dir", s, err, errlen) != 0)
                return -1;
        } else if (strcmp(key, "size") == 0) {
            if (json_is_integer(val)) {
                if (json_integer_value(val) < 0
                    || (uint64_t)json_integer_value(val) < CACHE_SIZE_MIN)
                    return conf_fail(err, errlen, "cache.size: " SIZE_HELP);
                c->cache_size = (uint64_t)json_integer_value(val);
            } else {
                const char *s = conf_json_cstr(val);
                if (s == NULL)
                    return conf_fail(err, errlen, "cache.size: " SIZE_HELP);
                if (conf_set_cache_size(c, "cache.size", s, err, errlen) != 0)
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
        } else if (strcmp(key, "memory") == 0) {
            if (json_memory(val, "cache.memory", &c->cache_memory, err, errlen) != 0)
                return -1;
        } else if (strcmp(key, "header_memory") == 0) {
            if (json_memory(val, "cache.header_memory", &c->cache_header_memory, err,
                            errlen) != 0)
                return -1;
        } else if (strcmp(key, "on_write") == 0) {
            if (!json_is_boolean(val))
                return conf_fail(err, errlen, "cache.on_write: must be true or false");
            c->cache_on_write = json_is_true(val);
        } else if (strcmp(key, "read_path") == 0) {
            const char *s = conf_json_cstr(val);
            if (s && (strcmp(s, "copy") == 0 || strcmp(s, "auto") == 0))
                c->cache_read_path = CONF_READ_COPY;
            else if (s && strcmp(s, "sendfile") == 0)
                c->cache_read_path = CONF_READ_SENDFILE;
            else if (s && strcmp(s, "io_uring") == 0)
                c->cache_read_path = CONF_READ_URING;
            else
                return conf_fail(err, errlen, "cache.read_path: must be \"copy\", \"sendfile\" or "
                                 "\"io_uring\" (\"auto\" is \"copy\")");
        } else if (strcmp(key, "fill_io") == 0) {
            const char *s = conf_json_cstr(val);
            if (s && strcmp(s, "direct") == 0)
                c->cache_fill_io = CONF_FILL_IO_DIRECT;
            else if (s && strcmp(s, "staging") == 0)
                c->cache_fill_io = CONF_FILL_IO_STAGING;
            else if (s && strcmp(s, "buffered") == 0)
                c->cache_fill_io = CONF_FILL_IO_BUFFERED;
            else
                return conf_fail(err, errlen, "cache.fill_io: must be \"direct\", \"staging\" "
                                 "or \"buffered\"");
        } else if (strcmp(key, "engine") == 0) {
            const char *s = conf_json_cstr(val);
            if (s == NULL)
                return conf_fail(err, errlen, "cache.engine: must be \"auto\", \"io_uring\" or "
                                 "\"threads\"");
            if (conf_set_cache_engine(c, "cache.engine", s, err, errlen) != 0)
                return -1;
        } else { /* "consistency" */
            const char *s = conf_json_cstr(val);
            if (s == NULL)
                return conf_fail(err, errlen, "cache.consistency: " CONSISTENCY_HELP, TTL_MAX_S);
            if (conf_set_consistency(c, "cache.consistency", s, err, errlen) != 0)
                return -1;
        }
    }
    return 0;
}

/* One top-level key of the file. String options go through the same setter as
 * their environment variable and flag; the others are handled in key_apply. */
struct file_key {
    const char *name;
    conf_str_setter set;   /* NULL: not a plain string option */
    bool null_ok;     /* with set: null is passed on as NULL (turns the option off) */
    /* Without set: FK_UINT, an `unsigned` field of struct conf at offset `at`
     * that takes an integer from min to max; FK_BOOL, a `bool` field at `at`
     * that takes true or false; FK_OTHER, handled by name in key_apply. */
    enum { FK_OTHER, FK_UINT, FK_BOOL } kind;
    size_t at;
    unsigned long long min, max;
};
#define STR_KEY(n, setter, nullok) { .name = (n), .set = (setter), .null_ok = (nullok) }
#define UINT_KEY(n, field, lo, hi)                                                        \
    { .name = (n), .kind = FK_UINT, .at = offsetof(struct conf, field), .min = (lo),   \
      .max = (hi) }
#define BOOL_KEY(n, field) { .name = (n), .kind = FK_BOOL, .at = offsetof(struct conf, field) }
#define OTHER_KEY(n) { .name = (n) }

static const struct file_key file_keys[] = {
    STR_KEY("listen", conf_set_listen, false),
    STR_KEY("data_dir", conf_set_data_dir, false),
    STR_KEY("cold_url", conf_set_cold_url, true),
    STR_KEY("cold_ca_path", conf_set_cold_ca_path, true),
    UINT_KEY("cold_connect_timeout_ms", cold_connect_timeout_ms, 1, CONNECT_TIMEOUT_MAX_MS),
    UINT_KEY("cold_request_timeout_ms", cold_request_timeout_ms, 1, REQUEST_TIMEOUT_MAX_MS),
    UINT_KEY("cold_first_byte_timeout_ms", cold_first_byte_timeout_ms, 1, FIRST_BYTE_MAX_MS),
    UINT_KEY("cold_retries", cold_retries, 0, RETRIES_MAX),
    OTHER_KEY("cold_access_key"),
    OTHER_KEY("cold_secret_key"),
    OTHER_KEY("cold_secret_key_env"),
    OTHER_KEY("cold_region"),
    BOOL_KEY("cold_virtual_hosted", cold_virtual_hosted),
    STR_KEY("spool_dir", conf_set_spool_dir, false),
    STR_KEY("state_dir", conf_set_state_dir, true),
    OTHER_KEY("mpu_max_age"),
    OTHER_KEY("cache"),
    STR_KEY("region", conf_set_region, false),
    OTHER_KEY("vhost_domain"),
    UINT_KEY("threads", threads, 0, THREADS_MAX),
    UINT_KEY("body_threads", body_threads, 0, THREADS_MAX),
    STR_KEY("log_level", conf_set_log_level, false),
    UINT_KEY("shutdown_grace_s", shutdown_grace_s, 0, GRACE_MAX_S),
    UINT_KEY("prefetch_keep_s", prefetch_keep_s, 1, 30u * 86400),
    OTHER_KEY("max_xml_body"),
    UINT_KEY("max_header_bytes", max_header_bytes, HEADER_MIN, HEADER_MAX),
    BOOL_KEY("metrics_public", metrics_public),
    BOOL_KEY("sigv2", sigv2),
    OTHER_KEY("users"),
    OTHER_KEY("buckets"),
    OTHER_KEY("connections"),
    OTHER_KEY("write_back"),
    STR_KEY("log_format", conf_set_log_format, false),
    STR_KEY("log_file", conf_set_log_file, true),
};
enum { N_FILE_KEYS = sizeof file_keys / sizeof file_keys[0] };
_Static_assert(N_FILE_KEYS == 34, "update file_keys, FILE_KEYS_HELP, key_apply and the "
               "example config");

#define FILE_KEYS_HELP "listen, data_dir, cold_url, cold_ca_path, cold_connect_timeout_ms, " \
                       "cold_request_timeout_ms, cold_first_byte_timeout_ms, "                 \
                       "cold_retries, cold_access_key, "                                       \
                       "cold_secret_key, cold_secret_key_env, cold_region, "                   \
                       "cold_virtual_hosted, spool_dir, state_dir, mpu_max_age, cache, "       \
                       "region, "                                                              \
                       "vhost_domain, threads, body_threads, log_level, shutdown_grace_s, "     \
                       "prefetch_keep_s, max_xml_body, max_header_bytes, metrics_public, "     \
                       "sigv2, users, buckets, connections, write_back, log_format, log_file"

/* A byte count: a size string ("8GiB", see conf_size_parse) or a number. */
static int json_bytes(const json_t *v, uint64_t *out)
{
    const char *str = conf_json_cstr(v);
    if (str)
        return conf_size_parse(str, out);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* write_back: {"max_dirty": "8GiB", "dirty_wait_ms": 10000,
 * "upload_bandwidth": "200MiB", "stage_io": "direct", "through_timeout_ms":
 * 30000}: how much acknowledged data may wait for its upload, how long a
 * write waits for room before it gets 503 SlowDown, the uploads' bandwidth
 * cap (bytes per second), how staged bodies are written, and how long a
 * write-through request waits without upload progress. The buckets say "write": "back". */
static int write_back_from_json(struct conf *c, const json_t *v, char *err, size_t errlen)
{
    const char *key;
    json_t *val;
    unsigned long long n = 0;
    if (!json_is_object(v))
        return conf_fail(err, errlen, "write_back: must be an object like {\"max_dirty\": "
                         "\"8GiB\"}");
    json_object_foreach((json_t *)v, key, val) {
        if (strcmp(key, "max_dirty") == 0) {
            if (json_bytes(val, &c->wb_max_dirty) != 0)
                return conf_fail(err, errlen, "write_back.max_dirty: must be a size like "
                                 "\"8GiB\" or a number of bytes (0: no bound)");
        } else if (strcmp(key, "dirty_wait_ms") == 0) {
            if (json_uint(val, "write_back.dirty_wait_ms", 1, 600000, &n, err, errlen) != 0)
                return -1;
            c->wb_dirty_wait_ms = (unsigned)n;
        } else if (strcmp(key, "upload_bandwidth") == 0) {
            if (json_bytes(val, &c->wb_upload_bandwidth) != 0)
                return conf_fail(err, errlen, "write_back.upload_bandwidth: must be bytes per "
                                 "second, a size like \"200MiB\" or a number (0: no cap)");
        } else if (strcmp(key, "stage_io") == 0) {
            static const char *const names[] = { [CONF_STAGE_DIRECT] = "direct",
                                                  [CONF_STAGE_URING] = "uring",
                                                  [CONF_STAGE_WRITE] = "write" };
            const char *s = json_string_value(val);
            size_t i = 0;
            while (s && i < sizeof names / sizeof names[0] && strcmp(s, names[i]) != 0)
                i++;
            if (!s || i == sizeof names / sizeof names[0])
                return conf_fail(err, errlen, "write_back.stage_io: must be \"direct\", "
                                 "\"uring\" or \"write\"");
            c->wb_stage_io = (enum conf_stage_io)i;
        } else if (strcmp(key, "through_timeout_ms") == 0) {
            if (json_uint(val, "write_back.through_timeout_ms", 1, 3600000, &n, err,
                          errlen) != 0)
                return -1;
            c->wb_through_timeout_ms = (unsigned)n;
        } else {
            return conf_fail(err, errlen, "write_back: unknown key \"%.64s\" (allowed: "
                             "max_dirty, dirty_wait_ms, upload_bandwidth, stage_io, through_timeout_ms)",
                             key);
        }
    }
    return 0;
}

static int key_apply(struct conf *c, const struct file_key *k, const json_t *v, char *err,
                     size_t errlen)
{
    unsigned long long n = 0;

    if (k->set != NULL) {
        if (k->null_ok && json_is_null(v))
            return k->set(c, k->name, NULL, err, errlen);
        const char *s = conf_json_cstr(v);
        if (s == NULL)
            return conf_fail(err, errlen, "%s: must be a string%s", k->name,
                             k->null_ok ? " or null" : "");
        return k->set(c, k->name, s, err, errlen);
    }
    if (k->kind == FK_UINT) {
        if (json_uint(v, k->name, k->min, k->max, &n, err, errlen) != 0)
            return -1;
        *(unsigned *)((char *)c + k->at) = (unsigned)n;
        return 0;
    }
    if (k->kind == FK_BOOL) {
        if (!json_is_boolean(v))
            return conf_fail(err, errlen, "%s: must be true or false", k->name);
        *(bool *)((char *)c + k->at) = json_is_true(v);
        return 0;
    }
    if (strcmp(k->name, "vhost_domain") == 0) {
        if (json_is_null(v))
            return conf_set_vhost_domain(c, k->name, NULL, err, errlen);
        const char *s = conf_json_cstr(v);
        if (s == NULL || s[0] == '\0')
            return conf_fail(err, errlen, "vhost_domain: must be a non-empty string or null");
        return conf_set_vhost_domain(c, k->name, s, err, errlen);
    }
    if (strcmp(k->name, "max_xml_body") == 0) {
        if (json_uint(v, k->name, XML_BODY_MIN, XML_BODY_MAX, &n, err, errlen) != 0)
            return -1;
        c->max_xml_body = n;
        return 0;
    }
    if (strcmp(k->name, "cold_access_key") == 0 || strcmp(k->name, "cold_secret_key") == 0 ||
        strcmp(k->name, "cold_region") == 0) {
        const char *s = conf_json_cstr(v);
        if (s == NULL || s[0] == '\0')
            return conf_fail(err, errlen, "%s: must be a non-empty string", k->name);
        char **dst = k->name[5] == 'a' ? &c->cold_access_key
                     : k->name[5] == 's' ? &c->cold_secret_key : &c->cold_region;
        if (conf_replace_str(dst, s) != 0)
            return conf_fail(err, errlen, "%s: out of memory", k->name);
        return 0;
    }
    if (strcmp(k->name, "cold_secret_key_env") == 0) {
        const char *name = conf_json_cstr(v);
        const char *val = name && name[0] ? getenv(name) : NULL;
        if (name == NULL || name[0] == '\0')
            return conf_fail(err, errlen, "cold_secret_key_env: must name an environment variable");
        if (val == NULL || val[0] == '\0')
            return conf_fail(err, errlen, "cold_secret_key_env: the variable %s is not set", name);
        if (conf_replace_str(&c->cold_secret_key, val) != 0)
            return conf_fail(err, errlen, "cold_secret_key_env: out of memory");
        return 0;
    }
    if (strcmp(k->name, "mpu_max_age") == 0) {
        if (json_is_string(v))
            return conf_set_mpu_max_age(c, k->name, json_string_value(v), err, errlen);
        if (json_uint(v, k->name, 0, MPU_MAX_AGE_MAX_S, &n, err, errlen) != 0)
            return conf_fail(err, errlen, "mpu_max_age: " MPU_MAX_AGE_HELP);
        c->mpu_max_age_s = (unsigned)n;
        return 0;
    }
    if (strcmp(k->name, "cache") == 0)
        return cache_from_json(c, v, err, errlen);
    if (strcmp(k->name, "connections") == 0)
        return conf_connections_from_json(c, v, err, errlen);
    if (strcmp(k->name, "write_back") == 0)
        return write_back_from_json(c, v, err, errlen);
    if (strcmp(k->name, "buckets") == 0)
        return conf_buckets_from_json(c, v, err, errlen);
    /* "users" */
    return conf_users_from_json(c, v, err, errlen);
}

static int conf_apply_json(struct conf *c, json_t *root, char *err, size_t errlen)
{
    const char *key;
    json_t *val;

    if (!json_is_object(root))
        return conf_fail(err, errlen, "top level: must be a JSON object");
    json_object_foreach(root, key, val) {
        const struct file_key *k = NULL;
        for (size_t i = 0; i < N_FILE_KEYS && k == NULL; i++) {
            if (strcmp(key, file_keys[i].name) == 0)
                k = &file_keys[i];
        }
        if (k == NULL)
            return conf_fail(err, errlen, "unknown key \"%.64s\" (allowed: " FILE_KEYS_HELP ")",
                             key);
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

    conf_err_clear(err, errlen);
    /* O_NONBLOCK so a FIFO given by mistake is refused below instead of
     * blocking start-up; it changes nothing for regular files. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        return conf_fail(err, errlen, "%s: cannot open: %s", path, strerror(e));
    }
    /* fstat the descriptor we read, not the path, so the mode we check is the
     * mode of the file we load. */
    if (fstat(fd, &st) != 0) {
        int e = errno;
        conf_fail(err, errlen, "%s: cannot stat: %s", path, strerror(e));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        conf_fail(err, errlen, "%s: not a regular file", path);
        goto out;
    }
    root = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        conf_fail(err, errlen, "%s: invalid JSON at line %d, column %d: %s", path, jerr.line,
                  jerr.column, jerr.text);
        goto out;
    }
    if (json_is_object(root) &&
        (file_holds_secrets(json_object_get(root, "users")) ||
         json_object_get(root, "cold_secret_key") != NULL) &&
        (st.st_mode & 077) != 0) {
        conf_fail(err, errlen, "%s: holds secret keys but its mode %04o lets group or others "
                  "access it; run chmod 600 %s", path, (unsigned)(st.st_mode & 07777), path);
        goto out;
    }
    if (conf_copy(&tmp, c) != 0) {
        conf_fail(err, errlen, "%s: out of memory", path);
        goto out;
    }
    if (conf_apply_json(&tmp, root, msg, sizeof msg) != 0) {
        conf_free(&tmp);
        conf_fail(err, errlen, "%s: %s", path, msg);
        goto out;
    }
    conf_commit(c, &tmp);
    rc = 0;
out:
    json_decref(root);
    close(fd);
    return rc;
}
