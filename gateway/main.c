/* gateway/main.c - the shardgate command line: `shardgate serve` merges the
 * configuration (defaults < file < environment < flags), opens the store and
 * the credential store, runs the gateway until SIGINT/SIGTERM, and stops it
 * gracefully (a second signal: at once; SIGHUP reopens the log file). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#include "cli.h"
#include "gw.h"

static const char usage[] =
    "usage: shardgate serve [options]\n"
    "       shardgate prefetch --endpoint URL s3://BUCKET/PREFIX-OR-TEMPLATE [options]\n"
    "       shardgate jobs --endpoint URL s3://BUCKET [--job ID | --cancel ID]\n"
    "       shardgate health [--endpoint URL] [--ready]\n"
    "       shardgate flush --endpoint URL s3://BUCKET[/PREFIX] [--wait]\n"
    "       shardgate --help | --version\n"
    "\n"
    "S3-compatible object gateway with an NVMe caching tier.\n"
    "\n"
    "serve options (each overrides the config file and SHARDGATE_* variables):\n"
    "  --config FILE        JSON configuration (see conf/shardgate.example.json)\n"
    "  --listen HOST:PORT   address to listen on (default 127.0.0.1:9000): an IPv4\n"
    "                       address, a host name, [IPv6], or :PORT for every interface\n"
    "  --data DIR           local-directory cold store: sub-directories are buckets,\n"
    "                       files are objects (default var/data, created if missing)\n"
    "  --state-dir DIR      the directory store's uploads and lock (default DIR/.shardgate);\n"
    "                       without a writable one, DIR is served read-only\n"
    "  --cold URL           use the S3 at URL as the cold tier instead of --data;\n"
    "                       credentials from the config (cold_access_key ...) or\n"
    "                       AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN),\n"
    "                       region from cold_region, AWS_REGION, else --region\n"
    "  --cache-dir DIR      keep hot objects in a cache directory (an NVMe file system)\n"
    "  --cache-size BYTES   the cache's capacity, e.g. 200G or 1.5TiB (default 10GiB)\n"
    "  --consistency MODE   immutable | always | ttl:SECONDS (default ttl:60): when a\n"
    "                       cached object is checked against the cold tier again\n"
    "  --region NAME        region in signatures and GetBucketLocation (default us-east-1)\n"
    "  --vhost-domain NAME  also accept virtual-hosted requests for bucket.NAME\n"
    "  --threads N          HTTP worker threads (default: one per core)\n"
    "  --log-level LEVEL    error, warn, info (default) or debug\n"
    "  --log-format FORMAT  text (default) or json (one object per line)\n"
    "  --log-file FILE      append log lines to FILE instead of stderr (SIGHUP reopens it)\n"
    "\n"
    "environment: SHARDGATE_ACCESS_KEY and SHARDGATE_SECRET_KEY set the root\n"
    "credentials; SHARDGATE_LISTEN, SHARDGATE_DATA_DIR, SHARDGATE_COLD_URL,\n"
    "SHARDGATE_CACHE_DIR, SHARDGATE_CACHE_SIZE, SHARDGATE_CONSISTENCY, SHARDGATE_REGION,\n"
    "SHARDGATE_LOG_LEVEL, SHARDGATE_LOG_FORMAT and SHARDGATE_LOG_FILE set the options\n"
    "above. Without credentials the defaults\n"
    "(" CONF_DEFAULT_ACCESS_KEY " / " CONF_DEFAULT_SECRET_KEY ") are used and printed.\n"
    "SHARDGATE_STATE_DIR is --state-dir; SHARDGATE_MPU_MAX_AGE (default 7d) aborts the\n"
    "directory store's incomplete multipart uploads older than that. --data and --cold\n"
    "(from any source) are exclusive.\n"
    "\n"
    "signals: SIGINT/SIGTERM stop after in-flight requests (shutdown_grace_s); a second\n"
    "one exits at once (status 128 + signal). SIGHUP reopens --log-file, else is ignored.\n";

/* conf's choices as the cache's enums: tables indexed by the conf value,
 * each as long as its conf enum (a new conf value fails the assert). */
static const enum cache_consistency consistency_of[] = {
    [CONF_CONSISTENCY_IMMUTABLE] = CACHE_IMMUTABLE, [CONF_CONSISTENCY_TTL] = CACHE_TTL,
    [CONF_CONSISTENCY_ALWAYS] = CACHE_ALWAYS,
};
_Static_assert(sizeof consistency_of / sizeof consistency_of[0] == CONF_CONSISTENCY_ALWAYS + 1,
               "a cache consistency per conf consistency");
static const enum cache_engine engine_of[] = {
    [CONF_ENGINE_AUTO] = CACHE_ENGINE_AUTO, [CONF_ENGINE_URING] = CACHE_ENGINE_URING,
    [CONF_ENGINE_THREADS] = CACHE_ENGINE_THREADS,
};
_Static_assert(sizeof engine_of / sizeof engine_of[0] == CONF_ENGINE_THREADS + 1,
               "a cache engine per conf engine");

/* A cold tier that does not answer at start is worth a warning, not a
 * refusal: it may come up later, and cached objects can be served meanwhile. */
static void warn_if_cold_unreachable(struct backend *b, const char *where)
{
    struct backend_info bi;
    backend_info_get(b, &bi);
    /* short: the start waits for it (a hung tier costs the start this) */
    unsigned ms = bi.first_byte_ms && bi.first_byte_ms < 2000 ? bi.first_byte_ms : 2000;
    char why[256];
    if (backend_probe(b, ms, why, sizeof why) != BACKEND_OK)
        log_msg(LOG_LVL_WARN, "main", "the cold tier %s is not reachable (%s); starting "
                "anyway: cached objects are served, the rest fails with 503 until it answers",
                where, why);
}

/* Puts the write-back decorator over the cold tier when a bucket says
 * "write": "back" (conf_validate made sure there is a cache directory: the
 * staging store and journal live in CACHE/writeback). On failure *b is
 * closed and the reason printed. */
/* write_back.stage_io, except that no io_uring is used where cache.engine
 * says it is blocked. */
static enum backend_stage_io stage_io_of(const struct conf *c)
{
    if (c->cache_engine == CONF_ENGINE_THREADS)
        return BACKEND_STAGE_WRITE;
    switch (c->wb_stage_io) {
    case CONF_STAGE_DIRECT:
        return BACKEND_STAGE_DIRECT;
    case CONF_STAGE_URING:
        return BACKEND_STAGE_URING;
    case CONF_STAGE_WRITE:
        break;
    }
    return BACKEND_STAGE_WRITE;
}

static int wrap_write_back(const struct conf *c, struct backend **b)
{
    size_t n_rules = 0;
    for (size_t i = 0; i < c->n_buckets; i++)
        n_rules += c->buckets[i].n_write_rules;
    const char **names = calloc(c->n_buckets ? c->n_buckets : 1, sizeof *names);
    struct backend_wb_rules *rules = calloc(c->n_buckets ? c->n_buckets : 1, sizeof *rules);
    /* the buckets' prefix rules in the backend's type (the same two fields) */
    struct backend_wb_rule *all = calloc(n_rules ? n_rules : 1, sizeof *all);
    bool oom = !names || !rules || !all;
    size_t n = 0, k = 0;
    for (size_t i = 0; !oom && i < c->n_buckets; i++) {
        const struct conf_bucket *cb = &c->buckets[i];
        if (!cb->write_back)
            continue;
        names[n] = cb->name;
        rules[n++] = (struct backend_wb_rules){ all + k, cb->n_write_rules };
        for (size_t j = 0; j < cb->n_write_rules; j++)
            all[k++] = (struct backend_wb_rule){ cb->write_rules[j].prefix,
                                                 cb->write_rules[j].back };
    }
    if (oom || n == 0) {
        free(names);
        free(rules);
        free(all);
        if (oom) {
            fprintf(stderr, "shardgate: cannot start write-back: out of memory\n");
            backend_close(*b);
            *b = NULL;
            return -1;
        }
        return 0;
    }
    char dir[4096], err[1024] = "";
    snprintf(dir, sizeof dir, "%s/writeback", c->cache_dir);
    struct backend_wb_conf wc = { .dir = dir, .buckets = names, .rules = rules, .n_buckets = n,
                                  .max_dirty = c->wb_max_dirty,
                                  .dirty_wait_ms = c->wb_dirty_wait_ms,
                                  .upload_bandwidth = c->wb_upload_bandwidth,
                                  .through_timeout_ms = c->wb_through_timeout_ms,
                                  .stage_io = stage_io_of(c),
                                  .mpu_max_age_s = c->mpu_max_age_s, .err = err,
                                  .err_len = sizeof err };
    struct backend *w = NULL;
    enum backend_status st = backend_wb_open(&wc, *b, &w);
    free(names);
    free(rules);
    free(all);
    *b = w;
    if (st != BACKEND_OK) {
        fprintf(stderr, "shardgate: cannot start write-back in %s: %s\n", dir,
                err[0] ? err : backend_status_name(st));
        return -1;
    }
    log_msg(LOG_LVL_INFO, "main", "write-back for %zu bucket%s, staged in %s", n,
            n == 1 ? "" : "s", dir);
    return 0;
}

/* What `serve` prints once its socket listens (gw_announce_fn). */
struct banner {
    const struct conf *c;
    const char *cold;        /* the cold tier's URL, or NULL for the data dir */
    struct cache *cache;     /* or NULL */
};

static void print_banner(uint16_t port, void *arg)
{
    const struct banner *bn = arg;
    const struct conf *c = bn->c;
    const struct conf_user *root = &c->users[0];
    bool v6 = strchr(c->listen_addr, ':') != NULL;   /* an IPv6 address goes in brackets */
    printf("shardgate %s listening on http://%s%s%s:%u\n", PROJECT_VERSION, v6 ? "[" : "",
           c->listen_addr, v6 ? "]" : "", port);
    if (bn->cold)
        printf("  cold tier:  %s\n", bn->cold);
    else
        printf("  data dir:   %s\n", c->data_dir);
    if (bn->cache)
        printf("  cache:      %s (%llu bytes)\n", c->cache_dir,
               (unsigned long long)c->cache_size);
    char cache_why[320];
    if (bn->cache && !cache_ready(bn->cache, cache_why, sizeof cache_why))
        printf("              not in use now: %s\n", cache_why);
    printf("  access key: %s\n", root->access_key);
    if (c->default_credentials)
        printf("  secret key: %s   (the built-in default: set SHARDGATE_ACCESS_KEY and "
               "SHARDGATE_SECRET_KEY for anything real)\n", root->secret_key);
    else
        printf("  secret key: (from the configuration)\n");
    printf("  try:        AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s aws --endpoint-url "
           "http://%s%s%s:%u s3 ls\n", root->access_key,
           c->default_credentials ? root->secret_key : "...", v6 ? "[" : "", c->listen_addr,
           v6 ? "]" : "", port);
    fflush(stdout);
    for (size_t i = 0; i < c->n_users; i++)
        if (strstr(c->users[i].secret_key, "REPLACE-ME"))
            log_msg(LOG_LVL_WARN, "main", "user %s still has the example's placeholder key",
                    c->users[i].name);
}

static int serve(int argc, char **argv)
{
    static const struct option opts[] = {
        { "config", required_argument, NULL, 'c' },
        { "listen", required_argument, NULL, 'l' },
        { "data", required_argument, NULL, 'd' },
        { "region", required_argument, NULL, 'r' },
        { "vhost-domain", required_argument, NULL, 'v' },
        { "threads", required_argument, NULL, 't' },
        { "log-level", required_argument, NULL, 'L' },
        { "cold", required_argument, NULL, 'C' },
        { "cache-dir", required_argument, NULL, 'D' },
        { "cache-size", required_argument, NULL, 'S' },
        { "consistency", required_argument, NULL, 'K' },
        { "state-dir", required_argument, NULL, 'T' },
        { "log-format", required_argument, NULL, 'F' },
        { "log-file", required_argument, NULL, 'G' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct conf c;
    char err[512];
    int rc = 1;
    /* freed at out: declared before the first goto */
    struct backend_bucket_map *map = NULL;
    size_t n_map = 0;
    struct cache_bucket_conf *cbc = NULL;
    struct cache *cache = NULL;
    if (conf_init_defaults(&c) != 0) {
        fprintf(stderr, "shardgate: out of memory\n");
        return 1;
    }

    /* First pass: the config file, so that flags override it. */
    const char *config = NULL;
    int o;
    opterr = 1;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (o == 'c')
            config = optarg;
        else if (o == 'h') {
            fputs(usage, stdout);
            conf_free(&c);
            return 0;
        } else if (o == '?') {
            fputs(usage, stderr);
            conf_free(&c);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "shardgate serve: unexpected argument '%s'\n%s", argv[optind], usage);
        conf_free(&c);
        return 2;
    }
    if (config && conf_load_file(&c, config, err, sizeof err) != 0)
        goto bad;
    if (conf_apply_env(&c, err, sizeof err) != 0)
        goto bad;
    optind = 1;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        const char *flag = NULL;
        for (const struct option *p = opts; p->name; p++)
            if (p->val == o && o != 'c')
                flag = p->name;
        if (flag && strcmp(flag, "help") != 0 && conf_set_flag(&c, flag, optarg, err, sizeof err))
            goto bad;
    }
    if (conf_validate(&c, err, sizeof err) != 0)
        goto bad;
    log_set_level(c.log_level);
    log_set_format(c.log_format);
    if (c.log_file) {
        int e = log_open_file(c.log_file);
        if (e) {
            fprintf(stderr, "shardgate: cannot open the log file %s: %s\n", c.log_file,
                    strerror(e));
            goto out;
        }
    }

    /* Signals are taken by sigwait(): block them before any thread starts
     * (the store's upload expiry, the cache's workers and watcher, the
     * server's pool) so that every thread inherits the mask; a thread
     * started earlier would take a SIGTERM with the default action. */
    gw_signals_block();
    signal(SIGPIPE, SIG_IGN);

    const char *cold = c.cold_url;
    struct backend *b = NULL;
    enum backend_status bs;
    char perr[1024] = "";
    if (cold) {
        map = calloc(c.n_buckets ? c.n_buckets : 1, sizeof *map);
        for (size_t i = 0; map && i < c.n_buckets; i++)
            if (c.buckets[i].cold_bucket)
                map[n_map++] = (struct backend_bucket_map){ c.buckets[i].name,
                                                            c.buckets[i].cold_bucket };
        struct backend_s3_conf sc = {
            .endpoint = cold,
            .region = c.cold_region ? c.cold_region : getenv("AWS_REGION") ? NULL : c.region,
            .access_key = c.cold_access_key,
            .secret_key = c.cold_secret_key,
            .virtual_hosted = c.cold_virtual_hosted,
            .ca_path = c.cold_ca_path,
            .connect_timeout_ms = c.cold_connect_timeout_ms,
            .request_timeout_ms = c.cold_request_timeout_ms,
            .first_byte_timeout_ms = c.cold_first_byte_timeout_ms,
            .retries = c.cold_retries,
            .map = map,
            .n_map = n_map,
            .spool_dir = c.spool_dir,
        };
        bs = map ? backend_s3_open(&sc, &b) : BACKEND_NOMEM;
    } else {
        struct backend_posix_conf pc = { .root = c.data_dir, .state_dir = c.state_dir,
                                         .mpu_max_age_s = c.mpu_max_age_s, .err = perr,
                                         .err_len = sizeof perr };
        bs = backend_posix_open(&pc, &b);
    }
    if (bs != BACKEND_OK) {
        if (!cold && perr[0])
            fprintf(stderr, "shardgate: %s\n", perr);
        else
            fprintf(stderr, "shardgate: cannot open the cold tier %s: %s\n",
                    cold ? cold : c.data_dir, backend_status_name(bs));
        goto out;
    }
    warn_if_cold_unreachable(b, cold ? cold : c.data_dir);
    if (wrap_write_back(&c, &b) != 0)
        goto out;
    struct auth *a = NULL;
    if (auth_open(&c, &a) != 0) {
        fprintf(stderr, "shardgate: cannot set up authentication\n");
        backend_close(b);
        goto out;
    }

    if (c.cache_dir) {
        cbc = calloc(c.n_buckets ? c.n_buckets : 1, sizeof *cbc);
        size_t n_cbc = 0;
        for (size_t i = 0; cbc && i < c.n_buckets; i++)
            if (c.buckets[i].has_consistency)
                cbc[n_cbc++] = (struct cache_bucket_conf){
                    c.buckets[i].name, consistency_of[c.buckets[i].consistency],
                    c.buckets[i].ttl_s };
        struct cache_conf cc = {
            .dir = c.cache_dir,
            .capacity = c.cache_size,
            .high_pct = c.cache_high_pct,
            .low_pct = c.cache_low_pct,
            .fill_workers = c.cache_fill_workers,
            .wait_timeout_ms = c.cache_wait_ms,
            .revalidate_timeout_ms = c.cache_revalidate_ms,
            .memory = c.cache_memory,
            .header_memory = c.cache_header_memory,
            .read_uring = c.cache_read_path == CONF_READ_URING,
            .engine = engine_of[c.cache_engine],
            .fill_io = (enum cache_fill_io)c.cache_fill_io,
            .job_keep_s = c.prefetch_keep_s,
            .default_consistency = consistency_of[c.consistency],
            .default_ttl_s = c.consistency_ttl_s,
            .buckets = cbc,
            .n_buckets = n_cbc,
        };
        if (!cbc || cache_open(&cc, b, &cache) != 0) {
            fprintf(stderr, "shardgate: cannot start the cache tier on %s (the error above "
                    "says why)\n", c.cache_dir);
            auth_close(a);
            backend_close(b);
            goto out;
        }
    }

    struct gw *g = NULL;
    struct banner bn = { &c, cold, cache };
    if (gw_start(&c, b, a, cache, print_banner, &bn, &g) != 0) {
        if (cache)
            cache_close(cache);
        auth_close(a);
        backend_close(b);
        goto out;
    }
    int sig = gw_signals_wait_stop();
    log_msg(LOG_LVL_INFO, "main", "signal %d: stopping (in-flight requests get %u s; a second "
            "signal exits at once)", sig, c.shutdown_grace_s);
    gw_stop(g, c.shutdown_grace_s);
    if (cache)
        cache_close(cache);
    auth_close(a);
    backend_close(b);
    log_msg(LOG_LVL_INFO, "main", "stopped");
    rc = 0;
    goto out;
bad:
    fprintf(stderr, "shardgate: %s\n", err);
    rc = 2;
out:
    free(map);
    free(cbc);
    conf_free(&c);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "serve") == 0)
        return serve(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "prefetch") == 0)
        return cli_prefetch(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "jobs") == 0)
        return cli_jobs(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "health") == 0)
        return cli_health(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "flush") == 0)
        return cli_flush(argc - 1, argv + 1);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
                      strcmp(argv[1], "help") == 0)) {
        fputs(usage, stdout);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
        printf("shardgate %s\n", PROJECT_VERSION);
        return 0;
    }
    fputs(usage, stderr);
    return 2;
}
