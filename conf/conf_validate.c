/* conf/conf_validate.c - the final checks, once every source has spoken: the
 * ranges once more (a struct conf may be built by hand), what no single key
 * can check alone (the watermark pair, cold_url against data_dir and
 * state_dir, the cold key pair) and uniqueness across users and buckets. */
#include "conf.h"
#include "conf_int.h"
#include "s3name.h"

#include <string.h>

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

    conf_err_clear(err, errlen);
    if (c->listen_addr == NULL || c->listen_addr[0] == '\0')
        return conf_fail(err, errlen, "listen: address is missing");
    if (c->listen_port == 0)
        return conf_fail(err, errlen, "listen: port must be from 1 to 65535");
    if (c->data_dir == NULL || c->data_dir[0] == '\0')
        return conf_fail(err, errlen, "data_dir: must not be empty");
    if (c->region == NULL || c->region[0] == '\0')
        return conf_fail(err, errlen, "region: must not be empty");
    if (c->cold_url != NULL && !conf_cold_url_ok(c->cold_url))
        return conf_fail(err, errlen, "cold_url: " COLD_URL_HELP);
    if (c->cold_url != NULL && c->data_dir_from != NULL)
        return conf_fail(err, errlen, "%s and cold_url (--cold, SHARDGATE_COLD_URL) are exclusive: "
                         "the cold tier is either a local directory (--data, SHARDGATE_DATA_DIR, "
                         "\"data_dir\" in the config file) or an S3 endpoint; give only one",
                         c->data_dir_from);
    if (c->cold_url != NULL && c->state_dir != NULL)
        return conf_fail(err, errlen, "state_dir (--state-dir, SHARDGATE_STATE_DIR) belongs to the "
                         "local directory store: it has no use with cold_url (--cold)");
    if (c->state_dir != NULL && c->state_dir[0] == '\0')
        return conf_fail(err, errlen, "state_dir: must be a non-empty path or null");
    if (c->mpu_max_age_s > MPU_MAX_AGE_MAX_S)
        return conf_fail(err, errlen, "mpu_max_age: " MPU_MAX_AGE_HELP);
    if ((c->cold_access_key == NULL) != (c->cold_secret_key == NULL))
        return conf_fail(err, errlen, "cold_access_key and cold_secret_key (or "
                         "cold_secret_key_env) go together: give both, or neither to use "
                         "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY");
    if (c->cold_ca_path != NULL && c->cold_ca_path[0] == '\0')
        return conf_fail(err, errlen, "cold_ca_path: must be a non-empty path or null");
    if (c->cold_connect_timeout_ms < 1 || c->cold_connect_timeout_ms > CONNECT_TIMEOUT_MAX_MS)
        return conf_fail(err, errlen, "cold_connect_timeout_ms: must be an integer from 1 to %u",
                         CONNECT_TIMEOUT_MAX_MS);
    if (c->cold_request_timeout_ms < 1 || c->cold_request_timeout_ms > REQUEST_TIMEOUT_MAX_MS)
        return conf_fail(err, errlen, "cold_request_timeout_ms: must be an integer from 1 to %u",
                         REQUEST_TIMEOUT_MAX_MS);
    if (c->cold_first_byte_timeout_ms < 1 || c->cold_first_byte_timeout_ms > FIRST_BYTE_MAX_MS)
        return conf_fail(err, errlen, "cold_first_byte_timeout_ms: must be an integer from 1 to %u",
                         FIRST_BYTE_MAX_MS);
    if (c->cache_revalidate_ms < 1 || c->cache_revalidate_ms > REVALIDATE_MAX_MS)
        return conf_fail(err, errlen, "cache.revalidate_timeout_ms: must be an integer from 1 "
                         "to %u", REVALIDATE_MAX_MS);
    if (c->cold_retries > RETRIES_MAX)
        return conf_fail(err, errlen, "cold_retries: must be an integer from 0 to %u", RETRIES_MAX);
    if (c->spool_dir == NULL || c->spool_dir[0] == '\0')
        return conf_fail(err, errlen, "spool_dir: must not be empty");
    if (c->cache_dir != NULL && c->cache_dir[0] == '\0')
        return conf_fail(err, errlen, "cache.dir: must be a non-empty path or null");
    for (size_t i = 0; i < c->n_buckets; i++)
        if (c->buckets[i].write_back && c->cache_dir == NULL)
            return conf_fail(err, errlen, "buckets.%s.write: \"back\" stages writes in the "
                             "cache directory: set cache.dir (--cache-dir)", c->buckets[i].name);
    if (c->cache_size < CACHE_SIZE_MIN)
        return conf_fail(err, errlen, "cache.size: " SIZE_HELP);
    if (c->cache_high_pct < 2 || c->cache_high_pct > 100)
        return conf_fail(err, errlen, "cache.high_watermark: must be an integer from 2 to 100");
    if (c->cache_low_pct < 1 || c->cache_low_pct >= c->cache_high_pct)
        return conf_fail(err, errlen, "cache.low_watermark: must be an integer from 1 to %u, below "
                         "cache.high_watermark (%u)", c->cache_high_pct - 1, c->cache_high_pct);
    if (c->cache_fill_workers < 1 || c->cache_fill_workers > FILL_WORKERS_MAX)
        return conf_fail(err, errlen, "cache.fill_workers: must be an integer from 1 to %u",
                         FILL_WORKERS_MAX);
    if (c->cache_wait_ms < WAIT_MIN_MS || c->cache_wait_ms > WAIT_MAX_MS)
        return conf_fail(err, errlen, "cache.wait_timeout_ms: must be an integer from %u to %u",
                         WAIT_MIN_MS, WAIT_MAX_MS);
    if (!conf_consistency_ok(c->consistency, c->consistency_ttl_s))
        return conf_fail(err, errlen, "consistency: " CONSISTENCY_HELP, TTL_MAX_S);
    if (c->threads > THREADS_MAX)
        return conf_fail(err, errlen, "threads: must be an integer from 0 to %u", THREADS_MAX);
    if (c->body_threads > THREADS_MAX)
        return conf_fail(err, errlen, "body_threads: must be an integer from 0 to %u",
                         THREADS_MAX);
    if (c->shutdown_grace_s > GRACE_MAX_S)
        return conf_fail(err, errlen, "shutdown_grace_s: must be an integer from 0 to %u",
                         GRACE_MAX_S);
    if (c->max_xml_body < XML_BODY_MIN || c->max_xml_body > XML_BODY_MAX)
        return conf_fail(err, errlen, "max_xml_body: must be an integer from %u to %u",
                         XML_BODY_MIN, XML_BODY_MAX);
    if (c->max_header_bytes < HEADER_MIN || c->max_header_bytes > HEADER_MAX)
        return conf_fail(err, errlen, "max_header_bytes: must be an integer from %u to %u",
                         HEADER_MIN, HEADER_MAX);
    if (conf_connections_validate(c, err, errlen) != 0)
        return -1;
    if (c->users == NULL || c->n_users == 0)
        return conf_fail(err, errlen, "users: at least one user is required");
    for (size_t i = 0; i < c->n_users; i++) {
        const struct conf_user *u = &c->users[i];
        if (u->name == NULL || u->name[0] == '\0')
            return conf_fail(err, errlen, "users[%zu].name: must not be empty", i);
        if (u->access_key == NULL || u->access_key[0] == '\0')
            return conf_fail(err, errlen, "users[%zu].access_key: must not be empty", i);
        if (u->secret_key == NULL || u->secret_key[0] == '\0')
            return conf_fail(err, errlen, "users[%zu].secret_key: must not be empty", i);
        for (size_t k = 0; k < u->n_perms; k++) {
            const struct conf_perm *p = &u->perms[k];
            if (p->bucket == NULL
                || (strcmp(p->bucket, "*") != 0 && !conf_bucket_name_ok(p->bucket)))
                return conf_fail(err, errlen, "users[%zu].permissions: key " BUCKET_NAME_HELP, i);
            if (p->level > CONF_PERM_ADMIN)
                return conf_fail(err, errlen, "users[%zu].permissions.%s: bad level", i, p->bucket);
        }
    }
    for (size_t i = 0; i < c->n_buckets; i++) {
        const struct conf_bucket *bk = &c->buckets[i];
        if (bk->name == NULL || !conf_bucket_name_ok(bk->name))
            return conf_fail(err, errlen, "buckets: entry %zu has no valid bucket name", i);
        if (bk->has_consistency && !conf_consistency_ok(bk->consistency, bk->ttl_s))
            return conf_fail(err, errlen, "buckets.%s.consistency: " CONSISTENCY_HELP, bk->name,
                             TTL_MAX_S);
        if (bk->cold_bucket != NULL && !sg_bucket_name_valid(bk->cold_bucket))
            return conf_fail(err, errlen, "buckets.%s.cold_bucket: " S3_BUCKET_NAME_HELP, bk->name);
    }
    if (buckets_find_cold_alias(c->buckets, c->n_buckets, &a, &b))
        return conf_fail(err, errlen, "buckets.%s.cold_bucket: \"%s\" is already the cold "
                         "bucket of buckets.%s (two names for one bucket would each cache their "
                         "own copy)",
                         c->buckets[a].name, c->buckets[a].cold_bucket, c->buckets[b].name);
    if (conf_users_find_duplicate(c->users, c->n_users, &a, &b))
        return conf_fail(err, errlen, "users[%zu].access_key: same as users[%zu].access_key "
                         "(access keys must be unique)", b, a);
    return 0;
}
