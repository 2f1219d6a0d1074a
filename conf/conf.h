/* conf/conf.h - shardgate's configuration: defaults, a JSON file (jansson),
 * environment variables and command-line flags, merged in that order, then
 * validated. Only conf/ touches jansson; every other module gets plain structs. */
#ifndef SHARDGATE_CONF_H
#define SHARDGATE_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

/* Default root credentials, printed at start when none are configured. */
#define CONF_DEFAULT_ACCESS_KEY "shardgate"
#define CONF_DEFAULT_SECRET_KEY "shardgate-secret-key"

/* What a user may do on a bucket; each level implies the ones below it.
 * NONE exists so that an exact bucket entry can take away what "*" grants. */
enum conf_perm_level {
    CONF_PERM_NONE = 0,
    CONF_PERM_READ,    /* GET/HEAD objects, list */
    CONF_PERM_WRITE,   /* + PUT/DELETE objects, multipart uploads */
    CONF_PERM_ADMIN,   /* + bucket create/delete; admin on "*" = operator endpoints */
};

/* One entry of a user's "permissions" object. */
struct conf_perm {
    char *bucket;                  /* a bucket name, or "*" for every bucket */
    enum conf_perm_level level;
};

/* One user: an access key pair and per-bucket permissions. The decision
 * itself (exact bucket name over "*") is made in auth/ (auth_allowed). */
struct conf_user {
    char *name;        /* for logs; never secret */
    char *access_key;
    char *secret_key;  /* from "secret_key", or read from "secret_key_env" at load */
    struct conf_perm *perms;
    size_t n_perms;
};

/* Per-bucket settings: top-level "buckets" object, one object per bucket so
 * later settings (e.g. consistency) fit beside public_read. */
struct conf_bucket {
    char *name;
    bool public_read;  /* anonymous GET/HEAD/list allowed; never anonymous writes */
};

struct conf {
    /* listening */
    char *listen_addr;          /* "127.0.0.1" */
    uint16_t listen_port;       /* 9000 */
    unsigned threads;           /* libmicrohttpd pool size; 0 = one per core */

    /* the cold tier: the local-directory store */
    char *data_dir;             /* "var/data" under the working directory */

    /* S3 surface */
    char *region;               /* "us-east-1": signed scope and GetBucketLocation */
    char *vhost_domain;         /* "bucket.<domain>" addressing; NULL = path-style only */

    /* identities: users[0] is root. Config "users" list; env
     * SHARDGATE_ACCESS_KEY / SHARDGATE_SECRET_KEY override users[0]'s keys
     * (keeping its permissions). The built-in root, and a root created from
     * the environment alone, are admin on "*"; users from the file must say
     * what they may do in "permissions". */
    struct conf_user *users;
    size_t n_users;
    bool default_credentials;   /* true when users[0] is the built-in default */

    /* per-bucket settings; buckets not listed have every setting at its default */
    struct conf_bucket *buckets;
    size_t n_buckets;

    /* limits (each overflow is an S3 4xx) */
    uint64_t max_xml_body;      /* bytes of an XML request body: 2 MiB */
    unsigned max_header_bytes;  /* request line + headers: 16 KiB */

    /* operation */
    enum log_level log_level;   /* info */
    unsigned shutdown_grace_s;  /* in-flight requests get this long on SIGTERM: 30 */
};

/* "none", "read", "write", "admin". */
const char *conf_perm_level_name(enum conf_perm_level l);

/* The settings of bucket `name`, or NULL when it has no entry. Borrowed. */
const struct conf_bucket *conf_bucket_find(const struct conf *c, const char *name);

/* Fills `c` with the built-in defaults. Returns 0, or -1 when out of memory. */
int conf_init_defaults(struct conf *c);

/* Merges the JSON file at `path` into `c`. Unknown keys and bad values fail:
 * returns 0 on success, -1 with a message naming the field and what is
 * allowed written to `err` (always NUL-terminated). */
int conf_load_file(struct conf *c, const char *path, char *err, size_t errlen);

/* Merges SHARDGATE_* environment variables (ACCESS_KEY, SECRET_KEY, LISTEN,
 * DATA_DIR, REGION, LOG_LEVEL). Same error contract as conf_load_file. */
int conf_apply_env(struct conf *c, char *err, size_t errlen);

/* Sets one option from a command-line flag name without dashes ("listen",
 * "data", "region", "vhost-domain", "threads", "log-level"). Same error
 * contract. */
int conf_set_flag(struct conf *c, const char *flag, const char *value, char *err, size_t errlen);

/* Final checks after merging (ports, non-empty keys, unique access keys...). */
int conf_validate(const struct conf *c, char *err, size_t errlen);

/* Frees everything `c` owns; `c` itself is the caller's. */
void conf_free(struct conf *c);

#endif
