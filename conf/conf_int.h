/* conf/conf_int.h - internals shared by conf/'s own files (conf.c and the
 * option groups split out of it): the bounds on options, the message texts
 * several files write, and the helpers they call. Nothing outside conf/
 * includes this. */
#ifndef SHARDGATE_CONF_INT_H
#define SHARDGATE_CONF_INT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "conf.h"

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
#define CACHE_MEMORY_MAX ((uint64_t)64 << 30)   /* small objects in memory: 64 GiB */
#define FILL_WORKERS_MAX 256u            /* same bound as threads, for the same reason */
#define WAIT_MIN_MS 100u                 /* shorter makes readers give up on any fill */
#define WAIT_MAX_MS 600000u              /* ten minutes of a client waiting is enough */
#define TTL_MAX_S 31536000u              /* a year; beyond that say "immutable" */
#define SIZE_FRAC_DIGITS_MAX 6u          /* keeps frac * unit (< 10^6 * 2^40) in 64 bits */
#define HOST_MAX 253u                    /* a DNS name */
#define HOST_LABEL_MAX 63u
#define MPU_MAX_AGE_MAX_S (3650u * 86400)   /* ten years: "never" is 0 */

/* Message texts that more than one file writes: the value parsers, the file
 * loader and conf_validate say the same thing about the same option. */
#define COLD_URL_HELP "must be http://HOST[:PORT] or https://HOST[:PORT], optionally with " \
                      "a trailing '/', where HOST is a DNS name, an IPv4 address or a "      \
                      "bracketed IPv6 address; no path, query or user:password@ "         \
                      "(credentials come from the AWS_* variables)"
#define MPU_MAX_AGE_HELP "must be seconds (0 = never) or a number with a unit s, m, h or d " \
                         "(\"7d\", \"12h\"), at most 3650 days"
#define SIZE_HELP "must be at least 1 MiB: a number of bytes (1073741824) or a string with a " \
                  "unit (\"512M\", \"64MiB\", \"10G\", \"1.5GiB\", \"2T\"; K/M/G/T and "        \
                  "KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB powers of 1000)"
#define MEMORY_HELP "must be 0 (off) or a size up to 64 GiB: a number of bytes (67108864) " \
                    "or a string with a unit (\"64MiB\", \"1G\")"
#define CONSISTENCY_HELP "must be \"immutable\", \"always\" or \"ttl:SECONDS\" with SECONDS " \
                         "from 1 to %u"
#define ACCESS_KEY_HELP "must be non-empty, without '/', ',', spaces or control characters"
#define S3_BUCKET_NAME_HELP "must be null or an S3 bucket name: 3 to 63 lowercase letters, " \
                            "digits, '.' or '-', starting and ending with a letter or digit, " \
                            "no \"..\", not an IP address, no \"xn--\" or \"sthree-\" " \
                            "prefix, no \"-s3alias\" or \"--ol-s3\" suffix"
#define BUCKET_NAME_HELP "must be \"*\" or a bucket name (letters, digits, '.', '-', '_', " \
                         "starting with a letter or digit)"

/* ---- messages, strings and ownership (conf.c) ---- */

/* Writes the message to `err` (when there is room for anything) and returns -1. */
int conf_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* One of a fixed set of names: 0 with the index of s in names[0..n) in *idx,
 * or -1 with "<field>: must be "a", "b" or "c"" in err (four names or more:
 * "must be one of "a", "b", "c", "d""), so every such setting says its
 * choices the same way. */
int conf_choice(const char *field, const char *s, const char *const *names, size_t n,
                unsigned *idx, char *err, size_t errlen);
/* Empties `err` (when it has room). */
void conf_err_clear(char *err, size_t errlen);
/* Deep copy of `src` into `dst` (uninitialised); 0, or -1 when out of memory
 * with `dst` left empty. */
int conf_copy(struct conf *dst, const struct conf *src);
/* Replaces `c` by `tmp` (taking it). */
void conf_commit(struct conf *c, struct conf *tmp);
/* Replaces *dst by a copy of `s`. Returns 0, or -1 when out of memory. */
int conf_replace_str(char **dst, const char *s);
/* A JSON string value without embedded NULs, or NULL. */
const char *conf_json_cstr(const json_t *v);
/* Makes `u` admin on every bucket. Returns 0, or -1 when out of memory. */
int conf_perms_set_root(struct conf_user *u);
/* Free users[0..n) / b[0..n) and the arrays (secrets wiped first). */
void conf_users_free(struct conf_user *users, size_t n);
void conf_buckets_free(struct conf_bucket *b, size_t n);

/* ---- values shared by the file, the environment and the flags (conf_values.c) ---- */

/* Sets one option from a string. `field` is how the user spelled the option
 * ("listen", "SHARDGATE_LISTEN", "--listen"; static: data_dir_from keeps it)
 * so every message names what to fix. Each checks the value before touching
 * `c`. Setters documented as taking NULL accept it (a null in the file). */
typedef int (*conf_str_setter)(struct conf *c, const char *field, const char *s, char *err,
                               size_t errlen);
int conf_set_listen(struct conf *c, const char *field, const char *s, char *err, size_t errlen);
int conf_set_log_level(struct conf *c, const char *field, const char *s, char *err,
                       size_t errlen);
int conf_set_log_format(struct conf *c, const char *field, const char *s, char *err,
                        size_t errlen);
int conf_set_log_file(struct conf *c, const char *field, const char *s, char *err,
                      size_t errlen);   /* NULL: stderr */
int conf_set_data_dir(struct conf *c, const char *field, const char *s, char *err,
                      size_t errlen);
int conf_set_region(struct conf *c, const char *field, const char *s, char *err, size_t errlen);
int conf_set_vhost_domain(struct conf *c, const char *field, const char *s, char *err,
                          size_t errlen);   /* NULL or "": off */
int conf_set_cold_url(struct conf *c, const char *field, const char *s, char *err,
                      size_t errlen);       /* NULL: the local directory */
int conf_set_cold_ca_path(struct conf *c, const char *field, const char *s, char *err,
                          size_t errlen);   /* NULL: the system CA store */
int conf_set_cache_dir(struct conf *c, const char *field, const char *s, char *err,
                       size_t errlen);      /* NULL: no cache */
int conf_set_spool_dir(struct conf *c, const char *field, const char *s, char *err,
                       size_t errlen);
int conf_set_state_dir(struct conf *c, const char *field, const char *s, char *err,
                       size_t errlen);      /* NULL: data_dir/.shardgate */
int conf_set_mpu_max_age(struct conf *c, const char *field, const char *s, char *err,
                         size_t errlen);
int conf_set_cache_size(struct conf *c, const char *field, const char *s, char *err,
                        size_t errlen);
int conf_set_cache_engine(struct conf *c, const char *field, const char *s, char *err,
                          size_t errlen);
int conf_set_consistency(struct conf *c, const char *field, const char *s, char *err,
                         size_t errlen);
int conf_set_threads(struct conf *c, const char *field, const char *s, char *err,
                     size_t errlen);

/* 1 when `s` may be an access key (no '/', ',', whitespace, control). */
int conf_access_key_ok(const char *s);
/* 1 when `s` is http(s)://host[:port][/]. */
int conf_cold_url_ok(const char *s);
/* "immutable", "always" or "ttl:SECONDS"; *ttl is 0 unless the mode is TTL.
 * 0, or -1 leaving the outputs undefined. */
int conf_consistency_parse(const char *s, enum conf_consistency *mode, unsigned *ttl);
/* A mode and TTL as conf_consistency_parse would leave them. */
bool conf_consistency_ok(enum conf_consistency mode, unsigned ttl);

/* ---- users, permissions and buckets (conf_users.c) ---- */

/* 1 when `s` may name a bucket in "permissions" and "buckets". */
int conf_bucket_name_ok(const char *s);
/* Finds two users with the same access key; returns 1 and their indexes. */
int conf_users_find_duplicate(const struct conf_user *users, size_t n, size_t *first,
                              size_t *second);
/* The file's "users" list and "buckets" object: each replaces what c had.
 * 0, or -1 with err set and c unchanged. */
int conf_users_from_json(struct conf *c, const json_t *v, char *err, size_t errlen);
int conf_buckets_from_json(struct conf *c, const json_t *v, char *err, size_t errlen);

/* ---- the "connections" object (conf/connections.c) ---- */

/* Sets the built-in connection limits and timeouts. */
void conf_connections_defaults(struct conf *c);
/* Merges {"max": N, "per_client": N, "idle_timeout_s": N, ...} into c. Each
 * key given replaces that setting; unknown keys and bad values fail with a
 * message naming "connections.KEY" in err. 0 or -1. */
int conf_connections_from_json(struct conf *c, const json_t *v, char *err, size_t errlen);
/* The final range checks of the connection settings; 0 or -1 (err set). */
int conf_connections_validate(const struct conf *c, char *err, size_t errlen);

#endif
