/* backend/s3_mpu_done.c - completed uploads remembered in front of the cold
 * S3. AWS answers a Complete sent again (a client retrying after a lost
 * answer) with the same ETag for a while; other S3 servers (moto, and
 * others after their own cleanup) answer NoSuchUpload. The last
 * S3_DONE_MAX completions through this gateway are kept in memory for a
 * day and answer a repeat before the cold tier is asked (moto, for one,
 * answers 200 to any parts list and 500 under another key), so a retry gets
 * the same answer as from the directory store whatever the cold tier keeps.
 * Not kept across a restart: the cold tier answers then. */
#include "s3_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct s3_done {
    char *id, *bucket, *key;     /* gateway bucket name */
    char digest[65];             /* backend_parts_digest of the parts list */
    char etag[72];
    time_t at;                   /* CLOCK_MONOTONIC seconds */
};

static time_t mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec;
}

static void done_clear(struct s3_done *d)
{
    free(d->id);
    free(d->bucket);
    free(d->key);
    memset(d, 0, sizeof *d);
}

void s3_done_record(struct s3_store *s, const char *bucket, const char *key, const char *id,
                    const struct backend_part *parts, size_t n, const char *etag)
{
    struct s3_done d = { .id = strdup(id), .bucket = strdup(bucket), .key = strdup(key),
                         .at = mono_s() };
    if (!d.id || !d.bucket || !d.key) {
        done_clear(&d);
        return;   /* out of memory: a repeat then gets the cold tier's answer */
    }
    backend_parts_digest(parts, n, d.digest);
    snprintf(d.etag, sizeof d.etag, "%s", etag);
    pthread_mutex_lock(&s->mu);
    if (!s->done)
        s->done = calloc(S3_DONE_MAX, sizeof *s->done);
    if (s->done) {
        struct s3_done *slot = &s->done[s->done_next];   /* the oldest goes */
        done_clear(slot);
        *slot = d;
        s->done_next = (s->done_next + 1) % S3_DONE_MAX;
    } else {
        done_clear(&d);
    }
    pthread_mutex_unlock(&s->mu);
}

enum s3_done_match s3_done_lookup(struct s3_store *s, const char *bucket, const char *key,
                                  const char *id, const struct backend_part *parts, size_t n,
                                  char etag[72])
{
    char digest[65];
    backend_parts_digest(parts, n, digest);
    time_t now = mono_s();
    enum s3_done_match m = S3_DONE_NONE;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; s->done && i < S3_DONE_MAX && m == S3_DONE_NONE; i++) {
        const struct s3_done *d = &s->done[i];
        if (!d->id || strcmp(d->id, id) != 0 || now - d->at >= S3_DONE_TTL_S)
            continue;
        if (strcmp(d->bucket, bucket) == 0 && strcmp(d->key, key) == 0 &&
            strcmp(d->digest, digest) == 0) {
            memcpy(etag, d->etag, sizeof d->etag);
            m = S3_DONE_SAME;
        } else {
            m = S3_DONE_OTHER;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return m;
}

void s3_done_free(struct s3_store *s)
{
    for (size_t i = 0; s->done && i < S3_DONE_MAX; i++)
        done_clear(&s->done[i]);
    free(s->done);
    s->done = NULL;
}
