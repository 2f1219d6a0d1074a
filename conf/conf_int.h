/* conf/conf_int.h - internals shared by conf/'s own files (conf.c and the
 * option groups split out of it). Nothing outside conf/ includes this. */
#ifndef SHARDGATE_CONF_INT_H
#define SHARDGATE_CONF_INT_H

#include <jansson.h>
#include <stddef.h>

#include "conf.h"

/* ---- messages and ownership (conf/conf.c) ---- */

/* Writes the message to `err` (when there is room for anything) and returns -1. */
int conf_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Empties `err` (when it has room). */
void conf_err_clear(char *err, size_t errlen);
/* Deep copy of `src` into `dst` (uninitialised); 0, or -1 when out of memory
 * with `dst` left empty. */
int conf_copy(struct conf *dst, const struct conf *src);
/* Replaces `c` by `tmp` (taking it). */
void conf_commit(struct conf *c, struct conf *tmp);
/* Replaces *dst by a copy of `s`. Returns 0, or -1 when out of memory. */
int conf_replace_str(char **dst, const char *s);
/* Makes `u` admin on every bucket. Returns 0, or -1 when out of memory. */
int conf_perms_set_root(struct conf_user *u);
/* Free users[0..n) / b[0..n) and the arrays (secrets wiped first). */
void conf_users_free(struct conf_user *users, size_t n);
void conf_buckets_free(struct conf_bucket *b, size_t n);

/* ---- values shared by the file, the environment and the flags ---- */

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

/* ---- users, permissions and buckets ---- */

/* 1 when `s` may name a bucket in "permissions" and "buckets". */
int conf_bucket_name_ok(const char *s);
/* 1 when `s` is a bucket name S3 accepts for a new bucket (cold_bucket). */
int conf_s3_bucket_name_ok(const char *s);
/* Finds two users with the same access key; returns 1 and their indexes. */
int conf_users_find_duplicate(const struct conf_user *users, size_t n, size_t *first,
                              size_t *second);
/* The file's "users" list and "buckets" object: each replaces what c had.
 * 0, or -1 with err set and c unchanged. */
int conf_users_from_json(struct conf *c, const json_t *v, char *err, size_t errlen);
int conf_buckets_from_json(struct conf *c, const json_t *v, char *err, size_t errlen);

/* ---- the JSON file ---- */

/* A string value without embedded NULs, or NULL. */
const char *conf_json_cstr(const json_t *v);

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
