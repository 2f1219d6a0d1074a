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

/* How long a cached copy may be served without asking the cold tier whether
 * it changed. String forms: "immutable", "always", "ttl:SECONDS". */
enum conf_consistency {
    CONF_CONSISTENCY_IMMUTABLE,  /* objects never change in the cold tier: never revalidate */
    CONF_CONSISTENCY_TTL,        /* revalidate copies older than a number of seconds */
    CONF_CONSISTENCY_ALWAYS,     /* revalidate (HEAD the cold tier) on every read */
};

/* Per-bucket settings: top-level "buckets" object, one object per bucket so
 * later settings fit beside public_read. */
/* One prefix of a bucket's "write" object. */
struct conf_write_rule {
    char *prefix;   /* may be "" (every key no longer prefix matches) */
    bool back;
};

struct conf_bucket {
    char *name;
    bool public_read;  /* anonymous GET/HEAD/list allowed; never anonymous writes */
    bool has_consistency;               /* "consistency" given; else conf.consistency */
    enum conf_consistency consistency;  /* when has_consistency */
    unsigned ttl_s;                     /* with CONF_CONSISTENCY_TTL: 1..31536000; else 0 */
    char *cold_bucket;  /* "cold_bucket": the bucket's name in the S3 cold tier when it
                           differs (a valid S3 bucket name); NULL = same name. Only
                           used with cold_url. */
    bool write_back;    /* "write": "back": writes are acknowledged once durable in the
                           cache directory and uploaded in the background, in order;
                           "through" (the default): acknowledged once in the cold tier.
                           With write rules: true when any rule is "back" */
    struct conf_write_rule *write_rules;   /* "write": {"prefix": "back"|"through", ...}:
                                              a key takes the mode of its longest matching
                                              prefix, "through" when none matches; NULL when
                                              "write" names one mode for the whole bucket */
    size_t n_write_rules;
};

/* How a cache hit's bytes reach the client. */
enum conf_fill_io { CONF_FILL_IO_DIRECT = 0, CONF_FILL_IO_STAGING, CONF_FILL_IO_BUFFERED };

enum conf_read_path {
    CONF_READ_COPY,       /* hits of more than 128 KiB, up to 4 MiB, read into memory
                           * and sent with the headers in one send, others by
                           * sendfile (default) */
    CONF_READ_SENDFILE,   /* always sendfile from the page cache */
    CONF_READ_URING,      /* always read through io_uring into a buffer */
};

/* Which I/O engine the cache tier's fills use (cache/engine_int.h). */
enum conf_cache_engine {
    CONF_ENGINE_AUTO,     /* io_uring when it works, else threads */
    CONF_ENGINE_URING,    /* io_uring or no start */
    CONF_ENGINE_THREADS,  /* pread/pwrite on the fill workers */
};

/* How write-back stages bodies of 1 MiB or more (backend/posix_aw.c). */
enum conf_stage_io {
    CONF_STAGE_DIRECT,
    CONF_STAGE_URING,
    CONF_STAGE_WRITE,
};

struct conf {
    /* listening */
    char *listen_addr;          /* "127.0.0.1": an IPv4 or IPv6 address (no brackets) or a
                                   host name, resolved when the gateway binds; ":PORT"
                                   gives "0.0.0.0" */
    uint16_t listen_port;       /* 9000 */
    unsigned threads;           /* libmicrohttpd pool size; 0 = one per core */
    unsigned body_threads;      /* threads that take PUT/UploadPart bodies in at nice 10
                                   (gateway/intake.c); 0 = one per core */

    /* the cold tier: an S3 endpoint, or (cold_url NULL) the local directory data_dir */
    char *data_dir;             /* "var/data" under the working directory */
    const char *data_dir_from;  /* how data_dir was given ("data_dir", "SHARDGATE_DATA_DIR",
                                   "--data"; static), NULL for the default:
                                   conf_validate refuses it together with cold_url */
    char *state_dir;            /* "state_dir" / --state-dir / SHARDGATE_STATE_DIR: the
                                   directory store's multipart uploads and lock; NULL =
                                   data_dir/.shardgate. Without a writable one the
                                   store serves data_dir read-only */
    unsigned mpu_max_age_s;     /* "mpu_max_age" / SHARDGATE_MPU_MAX_AGE: incomplete
                                   multipart uploads of the directory store older than
                                   this are aborted; 7 days; 0 = never. Seconds, or a
                                   string with a unit: "7d", "12h", "30m", "45s" */
    char *cold_url;                 /* "cold_url" / --cold URL / SHARDGATE_COLD_URL; NULL;
                                       http(s)://host[:port][/] only, stored as given */
    char *cold_ca_path;             /* "cold_ca_path": CA bundle file or dir for TLS to the
                                       cold tier; NULL = system */
    unsigned cold_connect_timeout_ms;  /* "cold_connect_timeout_ms": 1000 (1..600000) */
    unsigned cold_request_timeout_ms;  /* "cold_request_timeout_ms": 30000 (1..3600000): the
                                          whole of a small call, retries included; the
                                          longest silence inside a streamed transfer */
    unsigned cold_first_byte_timeout_ms; /* "cold_first_byte_timeout_ms": 5000 (1..600000):
                                          a read-side call's answer begins within this,
                                          retries included, or it fails with 503 */
    unsigned cold_retries;          /* "cold_retries": 2 (0..10) */
    char *cold_access_key;          /* "cold_access_key"; NULL: $AWS_ACCESS_KEY_ID */
    char *cold_secret_key;          /* "cold_secret_key" or the variable named by
                                       "cold_secret_key_env"; NULL: $AWS_SECRET_ACCESS_KEY */
    char *cold_region;              /* "cold_region"; NULL: $AWS_REGION, else region */
    bool cold_virtual_hosted;       /* "cold_virtual_hosted": bucket.host addressing */
    char *spool_dir;                /* "spool_dir": where uploads to an S3 cold tier are
                                       staged; "/tmp" */

    /* the cache tier: off when cache_dir is NULL. The file's "cache" object
     * holds these (keys in quotes below). */
    char *cache_dir;                /* "dir" / --cache-dir DIR / SHARDGATE_CACHE_DIR; NULL */
    uint64_t cache_size;            /* "size" / --cache-size / SHARDGATE_CACHE_SIZE: bytes,
                                       10 GiB; at least 1 MiB; see conf_size_parse */
    unsigned cache_high_pct;        /* "high_watermark": 90 percent, 2..100 */
    unsigned cache_low_pct;         /* "low_watermark": 80 percent, 1..high-1 (the
                                       pair is checked in conf_validate) */
    unsigned cache_fill_workers;    /* "fill_workers": 8, 1..256 */
    uint64_t cache_memory;          /* "memory": 64 MiB, 0..64 GiB: small cached objects
                                       (<= 16 KiB) also kept in memory; 0 = off */
    uint64_t cache_header_memory;   /* "header_memory": 32 MiB, 0..64 GiB: cache files'
                                       header blocks kept in memory; 0 = off */
    unsigned cache_wait_ms;         /* "wait_timeout_ms": 30000, 100..600000: how long a
                                       reader waits for bytes of a fill */
    unsigned cache_revalidate_ms;   /* "revalidate_timeout_ms": 1000, 1..60000: a hit's
                                       check against the cold tier gives up after this
                                       and the cached copy is served */
    enum conf_read_path cache_read_path;  /* "read_path": "copy" (default; "auto" too) |
                                       "sendfile" | "io_uring": how cached bytes reach a
                                       client, README */
    enum conf_cache_engine cache_engine;  /* "engine" / SHARDGATE_CACHE_ENGINE: "auto"
                                       (default) | "io_uring" | "threads" */
    enum conf_fill_io cache_fill_io;  /* "fill_io": "direct" (default: fills of 4 MiB
                                       or more with O_DIRECT) | "staging" (only staging
                                       fills) | "buffered" (none) */
    unsigned prefetch_keep_s;       /* "prefetch_keep_s": ended prefetch jobs stay listed this
                                       long (3600; 1 s to 30 days) */
    bool cache_on_write;            /* "on_write": false; true = a write through shardgate
                                       replaces the cached copy instead of only
                                       invalidating it */
    enum conf_consistency consistency;  /* "consistency" / --consistency /
                                           SHARDGATE_CONSISTENCY: ttl:60; buckets
                                           may override it */
    unsigned consistency_ttl_s;     /* with CONF_CONSISTENCY_TTL: 1..31536000; else 0 */

    /* S3 surface */
    char *region;               /* "us-east-1": signed scope and GetBucketLocation */
    char *vhost_domain;         /* "bucket.<domain>" addressing; NULL = path-style only */
    bool sigv2;                 /* "sigv2": true; false = refuse AWS Signature Version 2
                                   (header and presigned) with a 403 that says so */

    /* identities: users[0] is root. Config "users" list; env
     * SHARDGATE_ACCESS_KEY / SHARDGATE_SECRET_KEY override users[0]'s keys
     * (keeping its permissions). The built-in root, and a root created from
     * the environment alone, are admin on "*"; users from the file must say
     * what they may do in "permissions". */
    struct conf_user *users;
    size_t n_users;
    bool default_credentials;   /* true when users[0] is the built-in default */

    /* write-back (the file's "write_back" object; buckets opt in with "write") */
    uint64_t wb_max_dirty;      /* "max_dirty": pending bytes before writes wait, then
                                   get 503 SlowDown; 0 = no bound (the default) */
    unsigned wb_dirty_wait_ms;  /* "dirty_wait_ms": that wait; 10000 */
    uint64_t wb_upload_bandwidth; /* "upload_bandwidth": bytes per second all uploads
                                     together may send ("200MiB" or a number); 0 = no
                                     cap (the default) */
    enum conf_stage_io wb_stage_io; /* "stage_io": how staged bodies of 1 MiB or more are
                                       written: "direct" (io_uring, O_DIRECT where the file
                                       system takes it; the default), "uring" (io_uring
                                       through the page cache) or "write" (write()); always
                                       write() with cache.engine "threads" */
    unsigned wb_through_timeout_ms; /* "through_timeout_ms": a write-through request into a
                                       write-back bucket answers 503 (and is taken back)
                                       after the uploads make no progress for this long;
                                       30000 */

    /* per-bucket settings; buckets not listed have every setting at its default */
    struct conf_bucket *buckets;
    size_t n_buckets;

    /* limits (each overflow is an S3 4xx) */
    uint64_t max_xml_body;      /* bytes of an XML request body: 2 MiB */
    unsigned max_header_bytes;  /* request line + headers: 16 KiB */

    /* connections (the file's "connections" object; README "Connection limits").
     * Deadlines end connections that hold a slot without sending a request. */
    unsigned conn_max;            /* "max": connections at once; 0 = from the open-file
                                     limit (raised to its hard limit at start) */
    unsigned conn_per_client;     /* "per_client": from one client address; 0 = a
                                     quarter of the connection limit */
    unsigned conn_idle_timeout_s; /* "idle_timeout_s": 30; a connection silent this long
                                     (between requests, or a stalled upload) is
                                     closed, and a request line must be in by then */
    unsigned conn_header_timeout_s; /* "header_timeout_s": 20; the headers must be in
                                     this long after the request line */
    unsigned conn_send_timeout_s; /* "send_timeout_s": 120; a response the client stops
                                     reading is given up after this long */
    unsigned conn_min_body_rate;  /* "min_body_rate": bytes/s a body must average after
                                     its first header_timeout_s; 1024; 0 = off */

    /* operation */
    enum log_level log_level;   /* info */
    enum log_format log_format; /* "log_format" / --log-format / SHARDGATE_LOG_FORMAT:
                                   "text" (default) or "json" */
    char *log_file;             /* "log_file" / --log-file / SHARDGATE_LOG_FILE: append
                                   lines here (SIGHUP reopens it); NULL = stderr */
    unsigned shutdown_grace_s;  /* in-flight requests get this long on SIGTERM: 30 */
    bool metrics_public;        /* "metrics_public": false; true = GET /metrics without
                                   the admin permission */
};

/* "none", "read", "write", "admin". */
const char *conf_perm_level_name(enum conf_perm_level l);

/* The settings of bucket `name`, or NULL when it has no entry. Borrowed. */
const struct conf_bucket *conf_bucket_find(const struct conf *c, const char *name);

/* Parses a size in bytes: decimal digits with an optional unit, no spaces:
 * "1073741824", "512M", "64MiB", "10G", "1.5GiB", "2T". K/M/G/T and
 * KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB powers of 1000 (case as
 * written). A fraction (at most 6 digits) needs a unit and is rounded down
 * to whole bytes. Returns 0 with *out set, or -1 (syntax, overflow of 64
 * bits) leaving *out alone. No minimum: callers check their own. */
int conf_size_parse(const char *s, uint64_t *out);

/* Fills `c` with the built-in defaults. Returns 0, or -1 when out of memory. */
int conf_init_defaults(struct conf *c);

/* Merges the JSON file at `path` into `c`. Unknown keys and bad values fail:
 * returns 0 on success, -1 with a message naming the field and what is
 * allowed written to `err` (always NUL-terminated). */
int conf_load_file(struct conf *c, const char *path, char *err, size_t errlen);

/* Merges SHARDGATE_* environment variables (ACCESS_KEY, SECRET_KEY, LISTEN,
 * DATA_DIR, REGION, LOG_LEVEL, COLD_URL, CACHE_DIR, CACHE_SIZE, CONSISTENCY,
 * STATE_DIR, MPU_MAX_AGE, LOG_FORMAT, LOG_FILE).
 * A variable set to "" is an error, not "unset". Same error contract as
 * conf_load_file. */
int conf_apply_env(struct conf *c, char *err, size_t errlen);

/* Sets one option from a command-line flag name without dashes ("listen",
 * "data", "region", "vhost-domain", "threads", "log-level", "cold",
 * "cache-dir", "cache-size", "consistency", "state-dir", "log-format", "log-file").
 * Only --vhost-domain takes ""
 * (to turn it off); the others refuse it. Same error contract. */
int conf_set_flag(struct conf *c, const char *flag, const char *value, char *err, size_t errlen);

/* Final checks after merging (ports, non-empty keys, unique access keys,
 * cache watermarks low < high, one cold bucket per listed bucket...). */
int conf_validate(const struct conf *c, char *err, size_t errlen);

/* Frees everything `c` owns; `c` itself is the caller's. */
void conf_free(struct conf *c);

#endif
