/* backend/s3.c - the S3 cold tier: every verb of backend.h as S3 requests
 * to any S3 server over libcurl, signed by shardgate's own SigV4
 * (common/sigv4.c, through s3_sign at each attempt).
 * Blocking calls on a pool of reused easy handles (keep-alive connections);
 * retries with full-jitter backoff for idempotent calls; uploads spooled to
 * an unlinked temp file so nothing reaches the cold tier before commit. An
 * open object streams its body from one GET, driven by a curl multi handle
 * from the reading thread. This file holds opening and closing the store,
 * the bucket map, buckets, ListObjects, health and the ops table through
 * which backend.c reaches the tier. Its other files:
 *   s3_int.h     the internals they share (one header for all)
 *   s3_util.c    pure helpers: URLs, status mapping, backoff, ring buffer,
 *                the signed headers of an attempt (s3_sign)
 *   s3_call.c    the request engine: handles, callbacks, attempts,
 *                deadlines and retries (s3_do)
 *   s3_read.c    object HEAD, open (the streaming GET), reads, close
 *   s3_write.c   spooled bodies: put (multipart above a threshold) and
 *                upload parts; copy, delete
 *   s3_mpu.c     multipart uploads: create, part copy, Complete, abort,
 *                listings
 *   s3_xml.c     parsing the XML the cold tier answers with
 *   s3_tagging.c Get/Put/DeleteObjectTagging and ...BucketTagging, passed on */
#include "s3_int.h"
#include "posix_int.h"   /* posix_rollup: a pure helper */
#include "log.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the store ---- */

const char *s3_cold_bucket(const struct s3_store *s, const char *bucket)
{
    for (size_t i = 0; i < s->n_map; i++)
        if (strcmp(s->map[i].gateway, bucket) == 0)
            return s->map[i].cold;
    return bucket;
}

static const char *gateway_bucket(const struct s3_store *s, const char *cold)
{
    for (size_t i = 0; i < s->n_map; i++)
        if (strcmp(s->map[i].cold, cold) == 0)
            return s->map[i].gateway;
    return cold;
}

/* ---- open / close ---- */

static char *dup_or_env(const char *v, const char *env)
{
    if (!v)
        v = getenv(env);
    return v ? strdup(v) : NULL;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void s3_close(struct backend *base)
{
    struct s3_store *s = (struct s3_store *)base;
    for (size_t i = 0; i < s->easy_idle.n; i++)
        curl_easy_cleanup(s->easy_idle.h[i]);
    for (size_t i = 0; i < s->multi_idle.n; i++)
        curl_multi_cleanup(s->multi_idle.h[i]);
    for (size_t i = 0; i < s->n_map; i++) {
        free((char *)s->map[i].gateway);
        free((char *)s->map[i].cold);
    }
    free(s->map);
    free(s->endpoint);
    free(s->region);
    free(s->access);
    if (s->secret)
        memset(s->secret, 0, strlen(s->secret));
    free(s->secret);
    free(s->token);
    free(s->ca_path);
    free(s->spool_dir);
    s3_done_free(s);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

enum backend_status backend_s3_open(const struct backend_s3_conf *cf, struct backend **out)
{
    *out = NULL;
    pthread_once(&curl_once, curl_init_once);
    struct s3_store *s = calloc(1, sizeof *s);
    if (!s)
        return BACKEND_NOMEM;
    s->base.ops = &s3_ops;
    pthread_mutex_init(&s->mu, NULL);
    s->endpoint = dup_or_env(cf->endpoint, "AWS_ENDPOINT_URL");
    s->region = dup_or_env(cf->region, "AWS_REGION");
    if (!s->region)
        s->region = strdup("us-east-1");
    s->access = dup_or_env(cf->access_key, "AWS_ACCESS_KEY_ID");
    s->secret = dup_or_env(cf->secret_key, "AWS_SECRET_ACCESS_KEY");
    s->token = dup_or_env(cf->session_token, "AWS_SESSION_TOKEN");
    s->ca_path = cf->ca_path ? strdup(cf->ca_path) : NULL;
    s->spool_dir = strdup(cf->spool_dir ? cf->spool_dir : "/tmp");
    s->vhost = cf->virtual_hosted;
    s->connect_ms = cf->connect_timeout_ms ? (long)cf->connect_timeout_ms : 1000;
    s->request_ms = cf->request_timeout_ms ? (long)cf->request_timeout_ms : 30000;
    s->first_byte_ms = cf->first_byte_timeout_ms ? (long)cf->first_byte_timeout_ms : 5000;
    s->retries = cf->retries ? cf->retries : 2;
    enum backend_status st = BACKEND_NOMEM;
    if (!s->region || !s->spool_dir)
        goto fail;
    if (!s->endpoint || !strstr(s->endpoint, "://")) {
        log_msg(LOG_LVL_ERROR, "backend", "s3: no endpoint URL (scheme://host[:port])");
        st = BACKEND_IO;
        goto fail;
    }
    size_t el = strlen(s->endpoint);
    while (el && s->endpoint[el - 1] == '/')
        s->endpoint[--el] = '\0';
    if (!s->access || !s->secret) {
        log_msg(LOG_LVL_ERROR, "backend",
                "s3: no credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)");
        st = BACKEND_IO;
        goto fail;
    }
    if (cf->n_map) {
        s->map = calloc(cf->n_map, sizeof *s->map);
        if (!s->map)
            goto fail;
        for (size_t i = 0; i < cf->n_map; i++, s->n_map++) {
            s->map[i].gateway = strdup(cf->map[i].gateway);
            s->map[i].cold = strdup(cf->map[i].cold);
            if (!s->map[i].gateway || !s->map[i].cold) {
                s->n_map++;
                goto fail;
            }
        }
    }
    log_msg(LOG_LVL_INFO, "backend", "s3 cold tier %s (region %s, %s-style; answers begin "
            "within %ld ms, small calls end within %ld ms)", s->endpoint, s->region,
            s->vhost ? "virtual-hosted" : "path", s->first_byte_ms, s->request_ms);
    *out = &s->base;
    return BACKEND_OK;
fail:
    s3_close(&s->base);
    return st;
}

/* ---- buckets ---- */

struct bucket_list_arg {
    struct s3_store *s;
    backend_bucket_cb cb;
    void *arg;
};

static int bucket_list_one(void *arg, const char *name, time_t created)
{
    struct bucket_list_arg *a = arg;
    return a->cb(a->arg, gateway_bucket(a->s, name), created);
}

static enum backend_status s3_bucket_list(struct backend *base, backend_bucket_cb cb, void *arg)
{
    struct s3_store *s = (struct s3_store *)base;
    struct s3_call c = { .method = "GET", .body_fd = -1, .idempotent = true,
                         .rmax = S3_XML_MAX };
    enum backend_status st = s3_do(s, &c);
    if (st == BACKEND_OK) {
        struct bucket_list_arg a = { s, cb, arg };
        st = s3_xml_buckets(c.rbuf, c.rlen, bucket_list_one, &a);
    }
    s3_call_free(&c);
    return st;
}

static enum backend_status s3_bucket_create(struct backend *base, const char *bucket)
{
    struct s3_store *s = (struct s3_store *)base;
    char body[256];
    struct s3_call c = { .method = "PUT", .bucket = s3_cold_bucket(s, bucket), .body_fd = -1,
                         .body = "", .idempotent = false };
    if (strcmp(s->region, "us-east-1") != 0) {
        int n = snprintf(body, sizeof body,
                         "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/"
                         "2006-03-01/\"><LocationConstraint>%s</LocationConstraint>"
                         "</CreateBucketConfiguration>", s->region);
        if (n > 0 && (size_t)n < sizeof body) {
            c.body = body;
            c.body_len = (size_t)n;
        }
    }
    enum backend_status st = s3_do(s, &c);
    s3_call_free(&c);
    return st;
}

/* An idempotent call on the bucket itself (HEAD, DELETE): a 404 is
 * NO_BUCKET; *status gets the HTTP status. */
static enum backend_status bucket_call(struct s3_store *s, const char *method,
                                       const char *bucket, long *status)
{
    struct s3_call c = { .method = method, .bucket = s3_cold_bucket(s, bucket), .body_fd = -1,
                         .idempotent = true };
    enum backend_status st = s3_do(s, &c);
    if (st == BACKEND_NO_KEY)
        st = BACKEND_NO_BUCKET;
    *status = c.status;
    s3_call_free(&c);
    return st;
}

enum backend_status s3_bucket_head(struct backend *base, const char *bucket)
{
    long status;
    enum backend_status st = bucket_call((struct s3_store *)base, "HEAD", bucket, &status);
    if (st == BACKEND_IO && status == 400)
        st = BACKEND_BAD_BUCKET_NAME;   /* a HEAD's 400 has no body to say why;
                                           a bad name is what S3 answers 400 for */
    return st;
}

static enum backend_status s3_bucket_delete(struct backend *base, const char *bucket)
{
    long status;
    return bucket_call((struct s3_store *)base, "DELETE", bucket, &status);
}

/* ---- health ---- */

/* HEAD of the endpoint's root: every S3 server answers it somehow (403,
 * 405, 200 with a bucket listing's headers), and any answer is "there".
 * why does not name the endpoint (readiness shows it to anyone); callers
 * that log it add backend_info's location. */
static enum backend_status s3_probe(struct backend *base, unsigned timeout_ms, char *why,
                                    size_t len)
{
    struct s3_store *s = (struct s3_store *)base;
    struct s3_call c = { .method = "HEAD", .body_fd = -1, .idempotent = false, .quiet = true,
                         .deadline_ms = timeout_ms ? timeout_ms : 1 };
    uint64_t t0 = s3_now_ms();
    enum backend_status st = s3_do(s, &c);
    uint64_t ms = s3_now_ms() - t0;
    if (c.status > 0) {
        snprintf(why, len, "answered HTTP %ld in %llu ms", c.status, (unsigned long long)ms);
        st = BACKEND_OK;
    } else if (st == BACKEND_TIMEOUT) {
        snprintf(why, len, "no answer within %u ms", c.deadline_ms);
    } else {
        st = BACKEND_UNAVAILABLE;   /* no HTTP answer at all */
        snprintf(why, len, "cannot connect: %s", curl_easy_strerror(c.rc));
    }
    s3_call_free(&c);
    return st;
}

static void s3_info(const struct backend *base, struct backend_info *out)
{
    const struct s3_store *s = (const struct s3_store *)base;
    out->location = s->endpoint;
    out->first_byte_ms = (unsigned)s->first_byte_ms;
}

/* ---- listing ---- */

static enum backend_status s3_list_objects(struct backend *base, const char *bucket,
                                           const struct backend_list_req *req,
                                           struct backend_list_page *out)
{
    struct s3_store *s = (struct s3_store *)base;
    memset(out, 0, sizeof *out);
    if (req->max_keys == 0)
        return s3_bucket_head(base, bucket);
    const char *prefix = req->prefix ? req->prefix : "";
    const char *delim = req->delimiter && *req->delimiter ? req->delimiter : NULL;
    /* backend.h: a start_after inside a common prefix skips the whole prefix.
     * S3 would return that prefix again, so start after the prefix followed
     * by U+10FFFF, the largest code point (a key under the prefix that starts
     * with it would be skipped: accepted). */
    char *sa = NULL;
    if (req->start_after && *req->start_after) {
        size_t l = strlen(req->start_after);
        size_t pl = strlen(prefix);
        size_t roll = delim && strncmp(req->start_after, prefix, pl) == 0
                          ? posix_rollup(req->start_after, l, pl, delim)
                          : 0;
        if (roll) {
            if (asprintf(&sa, "%.*s\xf4\x8f\xbf\xbf", (int)roll, req->start_after) < 0)
                sa = NULL;
        } else {
            sa = strdup(req->start_after);
        }
        if (!sa)
            return BACKEND_NOMEM;
    }
    /* Canonical (sorted) query: SigV4 needs it and libcurl 7.88 signs the
     * query as given. */
    char *q = NULL;
    char mk[16];
    snprintf(mk, sizeof mk, "%u", req->max_keys > 1000 ? 1000 : req->max_keys);
    int rc = 0;
    if (delim)
        rc |= s3_query_add(&q, "delimiter", delim);
    rc |= s3_query_add(&q, "encoding-type", "url");
    rc |= s3_query_add(&q, "list-type", "2");
    rc |= s3_query_add(&q, "max-keys", mk);
    rc |= s3_query_add(&q, "prefix", prefix);
    if (sa)
        rc |= s3_query_add(&q, "start-after", sa);
    free(sa);
    if (rc) {
        free(q);
        return BACKEND_NOMEM;
    }
    return s3_get_listing(s, bucket, NULL, q, S3_LISTING_OBJECTS,
                          (union s3_page){ .objects = out });
}

enum backend_status s3_get_listing(struct s3_store *s, const char *bucket, const char *key,
                                   char *q, enum s3_listing kind, union s3_page page)
{
    struct s3_call c = { .method = "GET", .bucket = s3_cold_bucket(s, bucket), .key = key,
                         .query = q, .body_fd = -1, .idempotent = true, .rmax = S3_XML_MAX };
    enum backend_status st = s3_do(s, &c);
    if (st == BACKEND_NO_KEY && !key)
        st = BACKEND_NO_BUCKET;
    if (st == BACKEND_OK) {
        switch (kind) {
        case S3_LISTING_OBJECTS:
            st = s3_xml_list_objects(c.rbuf, c.rlen, page.objects);
            break;
        case S3_LISTING_PARTS:
            st = s3_xml_list_parts(c.rbuf, c.rlen, page.parts);
            break;
        case S3_LISTING_UPLOADS:
            st = s3_xml_list_uploads(c.rbuf, c.rlen, page.uploads);
            break;
        }
    }
    s3_call_free(&c);
    free(q);
    return st;
}

const struct backend_ops s3_ops = {
    .name = "s3",
    .close = s3_close,
    .bucket_list = s3_bucket_list,
    .bucket_create = s3_bucket_create,
    .bucket_head = s3_bucket_head,
    .bucket_delete = s3_bucket_delete,
    .object_head = s3_object_head,
    .object_open = s3_object_open,
    .object_part = s3_object_part,
    .obj_fd = s3_obj_fd,
    .obj_read = s3_obj_read,
    .obj_close = s3_obj_close,
    .put_begin = s3_put_begin,
    .put_write = s3_put_write,
    .put_commit = s3_put_commit,
    .put_abort = s3_put_abort,
    .put_from_fd = s3_put_from_fd,
    .object_copy = s3_object_copy,
    .object_delete = s3_object_delete,
    .list_objects = s3_list_objects,
    .mpu_create = s3_mpu_create,
    .mpu_part_begin = s3_mpu_part_begin,
    .mpu_part_copy = s3_mpu_part_copy,
    .mpu_complete = s3_mpu_complete,
    .mpu_head = s3_mpu_head,
    .mpu_abort = s3_mpu_abort,
    .mpu_list_parts = s3_mpu_list_parts,
    .mpu_list_uploads = s3_mpu_list_uploads,
    .tagging_get = s3_tagging_get,
    .tagging_put = s3_tagging_put,
    .object_head_timed = s3_object_head_timed,
    .probe = s3_probe,
    .info = s3_info,
};
