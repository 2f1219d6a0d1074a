/* backend/wb.c - the write-back decorator's verbs (see wb_int.h for the
 * design and backend.h for the contract). A verb on a bucket that is not
 * written back goes to the cold tier unchanged; on a write-back bucket a
 * write is staged and journaled (unless the bucket's prefix rules write its
 * key through: then it goes to the cold tier too), and a read looks at the
 * pending writes first. */
#include "wb_int.h"
#include "posix_int.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "deadline.h"
#include "fs.h"
#include "hash.h"
#include "log.h"

/* ---- the pending-key map and the queue (under mu) ---- */

static size_t key_slot(const char *bucket, const char *key)
{
    return (size_t)(sg_fnv1a_pair(bucket, strlen(bucket), key, strlen(key)) % WB_KEY_BUCKETS);
}

static const struct wb_rules *rules_of(const struct wb *w, const char *bucket)
{
    for (size_t i = 0; i < w->n_buckets; i++)
        if (strcmp(w->buckets[i], bucket) == 0)
            return &w->rules[i];
    return NULL;
}

bool wb_bucket_is_wb(const struct wb *w, const char *bucket)
{
    return rules_of(w, bucket) != NULL;
}

bool wb_bucket_is_mixed(const struct wb *w, const char *bucket)
{
    const struct wb_rules *rs = rules_of(w, bucket);
    return rs && rs->n;
}

bool wb_key_is_wb(const struct wb *w, const char *bucket, const char *key)
{
    const struct wb_rules *rs = rules_of(w, bucket);
    if (!rs)
        return false;
    if (!rs->n)
        return true;
    const struct wb_rule *best = NULL;
    for (size_t i = 0; i < rs->n; i++)
        if ((!best || rs->rule[i].len > best->len) &&
            strncmp(key, rs->rule[i].prefix, rs->rule[i].len) == 0)
            best = &rs->rule[i];
    return best && best->back;
}

void wb_vid_name(uint64_t vid, char out[WB_VID_LEN + 1])
{
    snprintf(out, WB_VID_LEN + 1, "%016" PRIx64, vid);
}

void wb_upload_id(const struct wb_mpu *m, char out[BACKEND_UPLOAD_ID_MAX])
{
    char v[WB_VID_LEN + 1];
    wb_vid_name(m->vid, v);
    snprintf(out, BACKEND_UPLOAD_ID_MAX, "%s%.*s", v, BACKEND_UPLOAD_ID_MAX - 1 - WB_VID_LEN,
             m->sid);
}

struct wb_rec *wb_find_locked(struct wb *w, const char *bucket, const char *key)
{
    for (struct wb_rec *r = w->keys[key_slot(bucket, key)]; r; r = r->key_next)
        if (strcmp(r->key, key) == 0 && strcmp(r->bucket, bucket) == 0)
            return r;
    return NULL;
}

/* Makes r its key's latest pending write: readers see it, and the older
 * pending write of the key it replaces is skipped by the uploader. */
static void index_locked(struct wb *w, struct wb_rec *r)
{
    struct wb_rec **pp = &w->keys[key_slot(r->bucket, r->key)];
    for (; *pp; pp = &(*pp)->key_next) {
        if (strcmp((*pp)->key, r->key) == 0 && strcmp((*pp)->bucket, r->bucket) == 0) {
            struct wb_rec *old = *pp;
            old->superseded = true;
            r->key_next = old->key_next;
            old->key_next = NULL;
            *pp = r;
            return;
        }
    }
    r->key_next = NULL;
    *pp = r;
}

void wb_queue_locked(struct wb *w, struct wb_rec *r)
{
    r->next = r->key_next = NULL;
    if (w->tail)
        w->tail->next = r;
    else
        w->head = r;
    w->tail = r;
    w->dirty_objects++;
    if (r->kind == WB_PUT)
        w->dirty_bytes += r->size;
    pthread_cond_broadcast(&w->cv);
}

void wb_enqueue_locked(struct wb *w, struct wb_rec *r)
{
    wb_queue_locked(w, r);
    if (!r->through)
        index_locked(w, r);
}

void wb_index_queue_locked(struct wb *w)
{
    for (struct wb_rec *r = w->head; r; r = r->next)
        index_locked(w, r);
}

void wb_dequeue_locked(struct wb *w, struct wb_rec *r)
{
    struct wb_rec *prev = NULL;
    for (struct wb_rec **pp = &w->head; *pp; prev = *pp, pp = &(*pp)->next) {
        if (*pp == r) {
            *pp = r->next;
            if (w->tail == r)
                w->tail = prev;
            break;
        }
    }
    for (struct wb_rec **kp = &w->keys[key_slot(r->bucket, r->key)]; *kp;
         kp = &(*kp)->key_next) {
        if (*kp == r) {   /* the key's latest: no write of it is pending now */
            *kp = r->key_next;
            break;
        }
    }
    r->next = r->key_next = NULL;
    w->dirty_objects--;
    if (r->kind == WB_PUT)
        w->dirty_bytes -= r->size;
    pthread_cond_broadcast(&w->cv);
}

void wb_rec_free(struct wb_rec *r)
{
    if (!r)
        return;
    free(r->bucket);
    free(r->key);
    free(r->cold_upload);
    free(r);
}

static struct wb_rec *rec_new(enum wb_kind kind, const char *bucket, const char *key)
{
    struct wb_rec *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->kind = kind;
    r->bucket = strdup(bucket);
    r->key = strdup(key);
    if (!r->bucket || !r->key) {
        wb_rec_free(r);
        return NULL;
    }
    clock_gettime(CLOCK_MONOTONIC, &r->acked);
    return r;
}

/* What a reader finds for (bucket, key) among the pending writes. */
enum pending { PENDING_NONE, PENDING_PUT, PENDING_DEL };

static enum pending pending_of(struct wb *w, const char *bucket, const char *key,
                               char vname[WB_VID_LEN + 1])
{
    if (!wb_bucket_is_wb(w, bucket))
        return PENDING_NONE;
    pthread_mutex_lock(&w->mu);
    struct wb_rec *r = wb_find_locked(w, bucket, key);
    enum pending p = !r ? PENDING_NONE : r->kind == WB_PUT ? PENDING_PUT : PENDING_DEL;
    if (r && r->kind == WB_PUT)
        wb_vid_name(r->vid, vname);
    pthread_mutex_unlock(&w->mu);
    return p;
}

/* A write-through request gives r up: taken back now, unless the uploader
 * or the look-ahead is sending it (its end then decides). Under mu. */
static void withdraw_locked(struct wb *w, struct wb_rec *r)
{
    r->withdraw = true;
    if (w->inflight != r && !r->ahead && !r->train)
        wb_retire_locked(w, r, WB_WITHDRAWN);
}

/* A write-through request's wait for its record's fate (under mu): it ends
 * when the record is in the cold tier, or when the uploads have made no
 * progress for through_timeout_ms (the cold tier is down or hangs, or the
 * writes before it cannot be sent): the record is then taken back, unless
 * an upload of it is under way, whose end decides. Frees r. */
static enum backend_status wait_through_locked(struct wb *w, struct wb_rec *r)
{
    uint64_t progress = __atomic_load_n(&w->progress, __ATOMIC_RELAXED);
    uint64_t failures = w->failures;
    struct timespec until = sg_deadline(CLOCK_REALTIME, w->through_timeout_ms);
    while (r->fate == WB_PENDING) {
        if (r->withdraw) {   /* in flight when it was given up: wait for the attempt */
            pthread_cond_wait(&w->cv, &w->mu);
            continue;
        }
        int rc = w->stopping ? ETIMEDOUT : pthread_cond_timedwait(&w->cv, &w->mu, &until);
        if (rc != ETIMEDOUT || r->fate != WB_PENDING)
            continue;
        uint64_t now_progress = __atomic_load_n(&w->progress, __ATOMIC_RELAXED);
        bool moving = now_progress != progress || (w->inflight && w->failures == failures);
        if (moving && !w->stopping) {
            progress = now_progress;
            failures = w->failures;
            until = sg_deadline(CLOCK_REALTIME, w->through_timeout_ms);
            continue;
        }
        withdraw_locked(w, r);
    }
    enum wb_fate fate = r->fate;
    wb_rec_free(r);
    return fate == WB_UPLOADED ? BACKEND_OK : fate == WB_LOST ? BACKEND_IO : BACKEND_UNAVAILABLE;
}

/* Records an acknowledged write: journal (durable before return), queue.
 * Takes r. A through record: waits until the cold tier has it, or takes it
 * back (BACKEND_UNAVAILABLE). */
static enum backend_status acknowledge(struct wb *w, struct wb_rec *r, bool through)
{
    pthread_mutex_lock(&w->mu);
    r->seq = w->next_id++;
    r->through = through;
    uint64_t end = 0;
    if (wb_journal_put_locked(w, r, &end) != 0) {
        enum backend_status st = errno == ENOSPC || errno == EDQUOT ? BACKEND_NO_SPACE
                                                                    : BACKEND_IO;
        pthread_mutex_unlock(&w->mu);
        if (r->kind == WB_PUT) {   /* never acknowledged: its staged bytes go */
            char v[WB_VID_LEN + 1];
            wb_vid_name(r->vid, v);
            w->stage->ops->object_delete(w->stage, r->bucket, v);
        }
        wb_rec_free(r);
        return st;
    }
    wb_enqueue_locked(w, r);
    pthread_mutex_unlock(&w->mu);
    enum backend_status st = BACKEND_OK;
    if (wb_journal_sync(w, end) != 0)
        st = BACKEND_IO;   /* queued (it may reach the cold tier), but not acknowledged */
    if (!through)
        return st;
    pthread_mutex_lock(&w->mu);
    if (st != BACKEND_OK && r->fate == WB_PENDING && !r->withdraw)
        withdraw_locked(w, r);
    enum backend_status fate = wait_through_locked(w, r);
    pthread_mutex_unlock(&w->mu);
    return st != BACKEND_OK ? st : fate;
}

/* Waits (bounded) for room under max_dirty for `size` more bytes. */
static bool dirty_room(struct wb *w, uint64_t size)
{
    if (!w->max_dirty)
        return true;
    struct timespec until = sg_deadline(CLOCK_REALTIME, w->dirty_wait_ms);
    pthread_mutex_lock(&w->mu);
    int rc = 0;
    while (w->dirty_bytes && w->dirty_bytes + size > w->max_dirty && rc == 0)
        rc = pthread_cond_timedwait(&w->cv, &w->mu, &until);
    bool ok = !w->dirty_bytes || w->dirty_bytes + size <= w->max_dirty;
    pthread_mutex_unlock(&w->mu);
    return ok;
}

/* ---- conditional writes: the key's current state is the pending write if
 * there is one, else the cold tier's object ---- */

static enum backend_status cond_check(struct wb *w, const char *bucket, const char *key,
                                      const struct backend_cond *c)
{
    if (!c || c->kind == BACKEND_COND_NONE)
        return BACKEND_OK;
    bool exists;
    char etag[72] = "";
    pthread_mutex_lock(&w->mu);
    struct wb_rec *r = wb_find_locked(w, bucket, key);
    if (r) {
        exists = r->kind == WB_PUT;
        snprintf(etag, sizeof etag, "%s", r->etag);
    }
    pthread_mutex_unlock(&w->mu);
    if (!r) {
        struct obj_meta m;
        memset(&m, 0, sizeof m);
        enum backend_status st = backend_object_head(w->cold, bucket, key, &m);
        if (st != BACKEND_OK && st != BACKEND_NO_KEY)
            return st;
        exists = st == BACKEND_OK;
        snprintf(etag, sizeof etag, "%s", m.etag);
        obj_meta_clear(&m);
    }
    if (c->kind == BACKEND_COND_ABSENT)
        return exists ? BACKEND_PRECONDITION_FAILED : BACKEND_OK;
    if (!exists)
        return BACKEND_NO_KEY;
    if (strcmp(c->etag, "*") == 0 || strcasecmp(c->etag, etag) == 0)
        return BACKEND_OK;
    return BACKEND_PRECONDITION_FAILED;
}

/* ---- buckets and probes: the cold tier's ---- */

static void op_close(struct backend *b)
{
    struct wb *w = wb_of(b);
    wb_uploader_stop(w);   /* sets stopping: the expiry thread ends too */
    if (w->expiry_up)
        pthread_join(w->expiry, NULL);
    wb_journal_close(w);
    backend_close(w->stage);
    backend_close(w->cold);
    while (w->head) {
        struct wb_rec *r = w->head;
        w->head = r->next;
        wb_rec_free(r);
    }
    while (w->mpus) {
        struct wb_mpu *m = w->mpus;
        w->mpus = m->next;
        wb_mpu_free(w, m);
    }
    for (size_t i = 0; i < w->n_buckets; i++) {
        free(w->buckets[i]);
        for (size_t j = 0; w->rules && j < w->rules[i].n; j++)
            free(w->rules[i].rule[j].prefix);
        if (w->rules)
            free(w->rules[i].rule);
    }
    free(w->buckets);
    free(w->rules);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->cond_mu);
    pthread_mutex_destroy(&w->sync_mu);
    pthread_mutex_destroy(&w->pace_mu);
    free(w);
}

static enum backend_status op_bucket_list(struct backend *b, backend_bucket_cb cb, void *arg)
{
    return wb_of(b)->cold->ops->bucket_list(wb_of(b)->cold, cb, arg);
}

static enum backend_status op_bucket_create(struct backend *b, const char *bucket)
{
    return wb_of(b)->cold->ops->bucket_create(wb_of(b)->cold, bucket);
}

static enum backend_status op_bucket_head(struct backend *b, const char *bucket)
{
    return wb_of(b)->cold->ops->bucket_head(wb_of(b)->cold, bucket);
}

static enum backend_status op_bucket_delete(struct backend *b, const char *bucket)
{
    struct wb *w = wb_of(b);
    if (wb_bucket_is_wb(w, bucket)) {
        struct backend_wb_status s;
        backend_wb_status(b, bucket, NULL, &s);
        if (s.dirty_objects)
            return BACKEND_BUCKET_NOT_EMPTY;   /* writes to it are still pending */
    }
    return w->cold->ops->bucket_delete(w->cold, bucket);
}

static enum backend_status op_probe(struct backend *b, unsigned timeout_ms, char *why,
                                    size_t len)
{
    return backend_probe(wb_of(b)->cold, timeout_ms, why, len);
}

static void op_info(const struct backend *b, struct backend_info *out)
{
    backend_info_get(((const struct wb *)b)->cold, out);
}

/* ---- reading: a pending write first, else the cold tier ----
 * A pending PUT whose staged file is gone was uploaded meanwhile (its file
 * is removed only after the cold tier has it): the cold tier answers. */

/* One read verb, asked of either store: the staging store under the pending
 * write's version name, or the cold tier under the key. */
typedef enum backend_status (*read_verb)(struct backend *b, const char *bucket,
                                         const char *name, void *arg);

static enum backend_status route_read(struct wb *w, const char *bucket, const char *key,
                                      read_verb verb, void *arg)
{
    char v[WB_VID_LEN + 1];
    enum pending p = pending_of(w, bucket, key, v);
    if (p == PENDING_DEL)
        return BACKEND_NO_KEY;
    if (p == PENDING_PUT) {
        enum backend_status st = verb(w->stage, bucket, v, arg);
        if (st != BACKEND_NO_KEY)
            return st;
    }
    return verb(w->cold, bucket, key, arg);
}

static enum backend_status verb_head(struct backend *b, const char *bucket, const char *name,
                                     void *meta)
{
    return b->ops->object_head(b, bucket, name, meta);
}

static enum backend_status op_object_head(struct backend *b, const char *bucket,
                                          const char *key, struct obj_meta *meta)
{
    return route_read(wb_of(b), bucket, key, verb_head, meta);
}

/* The cold tier's own op, not backend_object_head_timed: the gateway counts
 * this call once, at the decorator. */
static enum backend_status op_object_head_timed(struct backend *b, const char *bucket,
                                                const char *key, unsigned timeout_ms,
                                                struct obj_meta *meta)
{
    struct wb *w = wb_of(b);
    char v[WB_VID_LEN + 1];
    if (pending_of(w, bucket, key, v) != PENDING_NONE || !w->cold->ops->object_head_timed)
        return op_object_head(b, bucket, key, meta);
    return w->cold->ops->object_head_timed(w->cold, bucket, key, timeout_ms, meta);
}

struct open_args {
    struct obj_meta *meta;
    struct backend_obj **out;
};

static enum backend_status verb_open(struct backend *b, const char *bucket, const char *name,
                                     void *arg)
{
    struct open_args *a = arg;
    return b->ops->object_open(b, bucket, name, a->meta, a->out);
}

static enum backend_status op_object_open(struct backend *b, const char *bucket,
                                          const char *key, struct obj_meta *meta,
                                          struct backend_obj **out)
{
    struct open_args a = { meta, out };
    return route_read(wb_of(b), bucket, key, verb_open, &a);
}

struct part_args {
    unsigned part_no;
    struct backend_part_range *out;
};

static enum backend_status verb_part(struct backend *b, const char *bucket, const char *name,
                                     void *arg)
{
    struct part_args *a = arg;
    return b->ops->object_part(b, bucket, name, a->part_no, a->out);
}

static enum backend_status op_object_part(struct backend *b, const char *bucket,
                                          const char *key, unsigned part_no,
                                          struct backend_part_range *out)
{
    struct part_args a = { part_no, out };
    return route_read(wb_of(b), bucket, key, verb_part, &a);
}

/* The objects a reader gets are the staging store's or the cold tier's:
 * their own ops serve these. */
static int op_obj_fd(const struct backend_obj *o)
{
    return o->ops->obj_fd(o);
}

static enum backend_status op_obj_read(struct backend_obj *o, uint64_t off, void *buf,
                                       size_t len, size_t *got)
{
    return o->ops->obj_read(o, off, buf, len, got);
}

static void op_obj_close(struct backend_obj *o)
{
    o->ops->obj_close(o);
}

static enum backend_status verb_tagging_get(struct backend *b, const char *bucket,
                                            const char *name, void *out)
{
    return b->ops->tagging_get(b, bucket, name, out);
}

static enum backend_status op_tagging_get(struct backend *b, const char *bucket,
                                          const char *key, struct obj_tags *out)
{
    struct wb *w = wb_of(b);
    if (!key)   /* the bucket's tags */
        return w->cold->ops->tagging_get(w->cold, bucket, NULL, out);
    return route_read(w, bucket, key, verb_tagging_get, out);
}

/* Tags of a pending object change on its staged copy, durably, and at once -
 * a cold tier that is down or slow does not hold them up. The record's
 * tags_gen tells the uploader to put them in the cold tier after the object
 * (an upload may have read the old ones). The change is made under mu so
 * that the record cannot be retired between the two: a rare verb, one small
 * fsync'ed write. A pending delete's key has no object: NoSuchKey, as a
 * reader finds. */
static enum backend_status op_tagging_put(struct backend *b, const char *bucket,
                                          const char *key, const struct obj_tags *tags)
{
    struct wb *w = wb_of(b);
    if (key && wb_bucket_is_wb(w, bucket)) {
        pthread_mutex_lock(&w->mu);
        struct wb_rec *r = wb_find_locked(w, bucket, key);
        if (r && r->kind == WB_DEL) {
            pthread_mutex_unlock(&w->mu);
            return BACKEND_NO_KEY;   /* what a reader finds */
        }
        if (r && !r->through) {
            char v[WB_VID_LEN + 1];
            wb_vid_name(r->vid, v);
            enum backend_status st = w->stage->ops->tagging_put(w->stage, bucket, v, tags);
            if (st == BACKEND_OK)
                r->tags_gen++;
            pthread_mutex_unlock(&w->mu);
            return st;
        }
        pthread_mutex_unlock(&w->mu);
    }
    return w->cold->ops->tagging_put(w->cold, bucket, key, tags);
}

/* ---- writing ---- */

struct wb_put {
    struct backend_put base;   /* first */
    struct wb *w;
    struct backend_put *inner; /* the staging store's */
    char *bucket, *key;
    uint64_t vid;
};

static void wb_put_free(struct wb_put *p)
{
    free(p->bucket);
    free(p->key);
    free(p);
}

static enum backend_status op_put_begin(struct backend *b, const char *bucket, const char *key,
                                        struct backend_put **out)
{
    struct wb *w = wb_of(b);
    *out = NULL;
    if (!wb_key_is_wb(w, bucket, key))
        return w->cold->ops->put_begin(w->cold, bucket, key, out);
    if (!*key || strlen(key) > 1024)
        return !*key ? BACKEND_BAD_KEY : BACKEND_KEY_TOO_LONG;
    struct wb_put *p = calloc(1, sizeof *p);
    if (!p)
        return BACKEND_NOMEM;
    p->base.ops = &wb_ops;
    p->w = w;
    p->bucket = strdup(bucket);
    p->key = strdup(key);
    pthread_mutex_lock(&w->mu);
    p->vid = w->next_id++;
    pthread_mutex_unlock(&w->mu);
    char v[WB_VID_LEN + 1];
    wb_vid_name(p->vid, v);
    enum backend_status st = !p->bucket || !p->key ? BACKEND_NOMEM
                             : w->stage->ops->put_begin(w->stage, bucket, v, &p->inner);
    if (st != BACKEND_OK) {
        wb_put_free(p);
        return st;
    }
    *out = &p->base;
    return BACKEND_OK;
}

static enum backend_status op_put_write(struct backend_put *bp, const void *buf, size_t len)
{
    struct wb_put *p = (struct wb_put *)bp;
    return p->inner->ops->put_write(p->inner, buf, len);
}

static enum backend_status op_put_commit(struct backend_put *bp, const struct obj_meta *meta,
                                         struct obj_meta *out)
{
    struct wb_put *p = (struct wb_put *)bp;
    struct wb *w = p->w;
    struct obj_meta staged;
    memset(&staged, 0, sizeof staged);
    bool cond = p->base.cond.kind != BACKEND_COND_NONE;
    if (cond)
        pthread_mutex_lock(&w->cond_mu);
    enum backend_status st = cond_check(w, p->bucket, p->key, &p->base.cond);
    if (st != BACKEND_OK) {
        p->inner->ops->put_abort(p->inner);
        goto out;
    }
    st = p->inner->ops->put_commit(p->inner, meta, &staged);
    if (st != BACKEND_OK)
        goto out;
    if (!dirty_room(w, staged.size)) {
        char v[WB_VID_LEN + 1];
        wb_vid_name(p->vid, v);
        w->stage->ops->object_delete(w->stage, p->bucket, v);
        st = BACKEND_NOMEM;   /* SlowDown: pending writes are at write_back.max_dirty */
        goto out;
    }
    struct wb_rec *r = rec_new(WB_PUT, p->bucket, p->key);
    if (!r) {
        st = BACKEND_NOMEM;
        goto out;
    }
    r->vid = p->vid;
    r->size = staged.size;
    r->mtime = staged.mtime;
    memcpy(r->etag, staged.etag, sizeof r->etag);
    st = acknowledge(w, r, p->base.write_through);
out:
    if (cond)
        pthread_mutex_unlock(&w->cond_mu);
    if (st == BACKEND_OK && out) {
        out->size = staged.size;
        out->mtime = staged.mtime;
        memcpy(out->etag, staged.etag, sizeof out->etag);
    }
    obj_meta_clear(&staged);
    wb_put_free(p);
    return st;
}

static void op_put_abort(struct backend_put *bp)
{
    struct wb_put *p = (struct wb_put *)bp;
    p->inner->ops->put_abort(p->inner);
    wb_put_free(p);
}

void backend_put_set_write_through(struct backend_put *p)
{
    p->write_through = true;
}

static enum backend_status op_object_delete(struct backend *b, const char *bucket,
                                            const char *key)
{
    struct wb *w = wb_of(b);
    if (!wb_key_is_wb(w, bucket, key))
        return w->cold->ops->object_delete(w->cold, bucket, key);
    struct wb_rec *r = rec_new(WB_DEL, bucket, key);
    return r ? acknowledge(w, r, false) : BACKEND_NOMEM;
}

/* ---- copies: inside the staging store when the source is staged there,
 * else streamed (the bytes of one side are local, the other's not) ---- */

#define COPY_CHUNK (1u << 20)

/* Streams bytes [first, first+len) of src into put p, MD5 into md5_hex. */
enum backend_status wb_stream_into(struct backend_obj *src, uint64_t first, uint64_t len,
                                   struct backend_put *p, char md5_hex[33], struct wb *up)
{
    unsigned char *buf = malloc(COPY_CHUNK);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    enum backend_status st = BACKEND_OK;
    if (!buf || !md || !EVP_DigestInit_ex(md, EVP_md5(), NULL)) {
        st = BACKEND_NOMEM;
        goto out;
    }
    uint64_t off = first, end = first + len;
    while (off < end) {
        size_t want = end - off < COPY_CHUNK ? (size_t)(end - off) : COPY_CHUNK, got = 0;
        if (up && !wb_pace(up, want)) {
            st = BACKEND_UNAVAILABLE;   /* shutting down: the journal resumes it */
            goto out;
        }
        st = src->ops->obj_read(src, off, buf, want, &got);
        if (st == BACKEND_OK && got == 0)
            st = BACKEND_IO;   /* the source ended early */
        if (st != BACKEND_OK)
            goto out;
        EVP_DigestUpdate(md, buf, got);
        st = p->ops->put_write(p, buf, got);
        if (st != BACKEND_OK)
            goto out;
        if (up) {
            wb_rate_add(up, got);
            __atomic_fetch_add(&up->upload_copied, got, __ATOMIC_RELAXED);
        }
        off += got;
    }
    unsigned char d[16];
    EVP_DigestFinal_ex(md, d, NULL);
    for (int i = 0; i < 16; i++)
        snprintf(md5_hex + 2 * i, 3, "%02x", d[i]);
out:
    EVP_MD_CTX_free(md);
    free(buf);
    return st;
}

/* The headers a copy gives its destination: the source's, or meta's
 * (REPLACE); tags: the source's, or `tagging` ("" none). New in *dst. */
static int copy_headers(const struct obj_meta *src, const struct obj_meta *meta,
                        const char *tagging, struct obj_meta *dst)
{
    const struct obj_meta *from = meta ? meta : src;
    for (size_t i = 0; i < from->n_hdrs; i++) {
        if (strcmp(from->hdrs[i].name, OBJ_TAGGING_HDR) == 0)
            continue;
        if (obj_meta_add_hdr(dst, from->hdrs[i].name, from->hdrs[i].value) != 0)
            return -1;
    }
    const char *tags = tagging ? tagging : obj_meta_get_hdr(src, OBJ_TAGGING_HDR);
    if (tags && *tags && obj_meta_add_hdr(dst, OBJ_TAGGING_HDR, tags) != 0)
        return -1;
    return 0;
}

static enum backend_status op_object_copy(struct backend *b, const char *src_bucket,
                                          const char *src_key, const char *dst_bucket,
                                          const char *dst_key, const struct obj_meta *meta,
                                          const char *tagging, const struct backend_cond *cond,
                                          struct obj_meta *out)
{
    struct wb *w = wb_of(b);
    char v[WB_VID_LEN + 1];
    bool src_pending = pending_of(w, src_bucket, src_key, v) != PENDING_NONE;
    if (!src_pending && !wb_key_is_wb(w, dst_bucket, dst_key))
        return w->cold->ops->object_copy(w->cold, src_bucket, src_key, dst_bucket, dst_key,
                                         meta, tagging, cond, out);
    /* the destination written through this decorator, the source read
     * through it: pending writes on either side are honoured */
    struct obj_meta sm, dm;
    memset(&sm, 0, sizeof sm);
    memset(&dm, 0, sizeof dm);
    struct backend_obj *src = NULL;
    struct backend_put *p = NULL;
    enum backend_status st = op_object_open(b, src_bucket, src_key, &sm, &src);
    if (st != BACKEND_OK)
        goto out;
    if (copy_headers(&sm, meta, tagging, &dm) != 0) {
        st = BACKEND_NOMEM;
        goto out;
    }
    st = op_put_begin(b, dst_bucket, dst_key, &p);
    if (st != BACKEND_OK)
        goto out;
    if (cond)
        p->cond = *cond;
    st = wb_stream_into(src, 0, sm.size, p, dm.etag, NULL);
    if (st != BACKEND_OK) {
        p->ops->put_abort(p);
        goto out;
    }
    st = p->ops->put_commit(p, &dm, out);
out:
    if (src)
        src->ops->obj_close(src);
    obj_meta_clear(&sm);
    obj_meta_clear(&dm);
    return st;
}

/* ---- multipart uploads into a write-back bucket: staged under a version,
 * the upload id "<vid hex><staging id>" names both ---- */

void wb_mpu_free(struct wb *w, struct wb_mpu *m)
{
    w->staged_bytes -= m->staged;
    free(m->part_bytes);
    free(m->bucket);
    free(m->key);
    free(m);
}

/* Part part_no of m now holds `bytes` staged bytes (a part sent again
 * replaces the one before). Under mu. */
static void mpu_part_locked(struct wb *w, struct wb_mpu *m, unsigned part_no, uint64_t bytes)
{
    if (part_no == 0)
        return;
    if (part_no > m->n_part_slots) {
        unsigned n = part_no < 64 ? 64 : part_no * 2;   /* a client sends them in order */
        if (n > BACKEND_MAX_PARTS)
            n = part_no > BACKEND_MAX_PARTS ? part_no : BACKEND_MAX_PARTS;
        uint64_t *grown = realloc(m->part_bytes, n * sizeof *grown);
        if (!grown) {   /* counted without its slot: a resend is counted twice */
            m->staged += bytes;
            w->staged_bytes += bytes;
            return;
        }
        memset(grown + m->n_part_slots, 0, (n - m->n_part_slots) * sizeof *grown);
        m->part_bytes = grown;
        m->n_part_slots = n;
    }
    uint64_t *slot = &m->part_bytes[part_no - 1];
    m->staged += bytes - *slot;
    w->staged_bytes += bytes - *slot;
    *slot = bytes;
}

static struct wb_mpu *mpu_find_locked(struct wb *w, const char *bucket, const char *key,
                                      const char *upload_id)
{
    if (strlen(upload_id) <= WB_VID_LEN)
        return NULL;
    char hex[WB_VID_LEN + 1];
    memcpy(hex, upload_id, WB_VID_LEN);
    hex[WB_VID_LEN] = 0;
    char *end;
    uint64_t vid = strtoull(hex, &end, 16);
    if (*end)
        return NULL;
    for (struct wb_mpu *m = w->mpus; m; m = m->next)
        if (m->vid == vid && strcmp(m->bucket, bucket) == 0 && strcmp(m->key, key) == 0 &&
            strcmp(m->sid, upload_id + WB_VID_LEN) == 0)
            return m;
    return NULL;
}

/* The staging names of an upload: its version and staging id. */
static bool mpu_names(struct wb *w, const char *bucket, const char *key, const char *upload_id,
                      char v[WB_VID_LEN + 1], char sid[BACKEND_UPLOAD_ID_MAX])
{
    pthread_mutex_lock(&w->mu);
    struct wb_mpu *m = mpu_find_locked(w, bucket, key, upload_id);
    if (m) {
        wb_vid_name(m->vid, v);
        snprintf(sid, BACKEND_UPLOAD_ID_MAX, "%s", m->sid);
    }
    pthread_mutex_unlock(&w->mu);
    return m != NULL;
}

static enum backend_status op_mpu_create(struct backend *b, const char *bucket, const char *key,
                                         const struct obj_meta *meta,
                                         char upload_id[BACKEND_UPLOAD_ID_MAX])
{
    struct wb *w = wb_of(b);
    if (!wb_key_is_wb(w, bucket, key))
        return w->cold->ops->mpu_create(w->cold, bucket, key, meta, upload_id);
    if (!*key || strlen(key) > 1024)
        return !*key ? BACKEND_BAD_KEY : BACKEND_KEY_TOO_LONG;
    struct wb_mpu *m = calloc(1, sizeof *m);
    if (!m)
        return BACKEND_NOMEM;
    m->bucket = strdup(bucket);
    m->key = strdup(key);
    clock_gettime(CLOCK_REALTIME, &m->initiated);
    pthread_mutex_lock(&w->mu);
    m->vid = w->next_id++;
    pthread_mutex_unlock(&w->mu);
    char v[WB_VID_LEN + 1];
    wb_vid_name(m->vid, v);
    enum backend_status st = !m->bucket || !m->key ? BACKEND_NOMEM
                             : w->stage->ops->mpu_create(w->stage, bucket, v, meta, m->sid);
    if (st == BACKEND_OK && strlen(m->sid) + WB_VID_LEN >= BACKEND_UPLOAD_ID_MAX)
        st = BACKEND_IO;
    uint64_t end = 0;
    if (st == BACKEND_OK) {
        pthread_mutex_lock(&w->mu);
        if (wb_journal_mpu_locked(w, m, true, &end) != 0) {
            st = errno == ENOSPC || errno == EDQUOT ? BACKEND_NO_SPACE : BACKEND_IO;
        } else {
            m->next = w->mpus;
            w->mpus = m;
        }
        pthread_mutex_unlock(&w->mu);
        if (st != BACKEND_OK)
            w->stage->ops->mpu_abort(w->stage, bucket, v, m->sid);
    }
    if (st == BACKEND_OK && wb_journal_sync(w, end) != 0)
        st = BACKEND_IO;   /* listed, but a restart may not know it: refuse it */
    if (st != BACKEND_OK) {
        pthread_mutex_lock(&w->mu);
        for (struct wb_mpu **pp = &w->mpus; *pp; pp = &(*pp)->next)
            if (*pp == m) {
                *pp = m->next;
                break;
            }
        wb_mpu_free(w, m);
        pthread_mutex_unlock(&w->mu);
        return st;
    }
    wb_upload_id(m, upload_id);
    return BACKEND_OK;
}

/* A part of a staged upload. Its bytes lie in the cache directory from its
 * commit on, long before the upload is completed (a checkpoint's shards
 * are sent for minutes): counted in staged_bytes, the cache makes room for
 * them as for pending writes. */
struct wb_part {
    struct backend_put base;   /* first */
    struct wb *w;
    struct backend_put *inner; /* the staging store's */
    uint64_t vid;              /* the upload's */
    unsigned part_no;
    uint64_t bytes;            /* written so far */
    bool started;
};

static enum backend_status part_write(struct backend_put *bp, const void *buf, size_t len)
{
    struct wb_part *p = (struct wb_part *)bp;
    if (!p->started) {
        /* the body's announced length was set on this wrapper: the staging
         * store places a part by it (its multipart slab) */
        p->started = true;
        if (p->base.has_size)
            backend_put_set_size(p->inner, p->base.size);
    }
    enum backend_status st = p->inner->ops->put_write(p->inner, buf, len);
    if (st == BACKEND_OK)
        p->bytes += len;
    return st;
}

static enum backend_status part_commit(struct backend_put *bp, const struct obj_meta *meta,
                                       struct obj_meta *out)
{
    struct wb_part *p = (struct wb_part *)bp;
    struct wb *w = p->w;
    enum backend_status st = p->inner->ops->put_commit(p->inner, meta, out);
    if (st == BACKEND_OK) {
        pthread_mutex_lock(&w->mu);
        for (struct wb_mpu *m = w->mpus; m; m = m->next)   /* gone: completed or aborted */
            if (m->vid == p->vid) {
                mpu_part_locked(w, m, p->part_no, p->bytes);
                break;
            }
        pthread_mutex_unlock(&w->mu);
    }
    free(p);
    return st;
}

static void part_abort(struct backend_put *bp)
{
    struct wb_part *p = (struct wb_part *)bp;
    p->inner->ops->put_abort(p->inner);
    free(p);
}

static const struct backend_ops wb_part_ops = {
    .put_write = part_write,
    .put_commit = part_commit,
    .put_abort = part_abort,
};

static enum backend_status op_mpu_part_begin(struct backend *b, const char *bucket,
                                             const char *key, const char *upload_id,
                                             unsigned part_no, struct backend_put **out)
{
    struct wb *w = wb_of(b);
    if (!wb_key_is_wb(w, bucket, key))
        return w->cold->ops->mpu_part_begin(w->cold, bucket, key, upload_id, part_no, out);
    char v[WB_VID_LEN + 1], sid[BACKEND_UPLOAD_ID_MAX];
    if (!mpu_names(w, bucket, key, upload_id, v, sid))
        return BACKEND_NO_UPLOAD;
    struct wb_part *p = calloc(1, sizeof *p);
    if (!p)
        return BACKEND_NOMEM;
    enum backend_status st = w->stage->ops->mpu_part_begin(w->stage, bucket, v, sid, part_no,
                                                           &p->inner);
    if (st != BACKEND_OK) {
        free(p);
        return st;
    }
    p->base.ops = &wb_part_ops;
    p->w = w;
    p->vid = strtoull(v, NULL, 16);
    p->part_no = part_no;
    *out = &p->base;
    return BACKEND_OK;
}

static enum backend_status op_mpu_part_copy(struct backend *b, const char *bucket,
                                            const char *key, const char *upload_id,
                                            unsigned part_no, const struct backend_copy_src *src,
                                            struct obj_meta *out)
{
    struct wb *w = wb_of(b);
    char sv[WB_VID_LEN + 1];
    bool src_pending = pending_of(w, src->bucket, src->key, sv) != PENDING_NONE;
    if (!wb_key_is_wb(w, bucket, key) && !src_pending)
        return w->cold->ops->mpu_part_copy(w->cold, bucket, key, upload_id, part_no, src, out);
    struct backend_put *p = NULL;
    struct backend_obj *o = NULL;
    struct obj_meta sm;
    memset(&sm, 0, sizeof sm);
    enum backend_status st = op_mpu_part_begin(b, bucket, key, upload_id, part_no, &p);
    if (st != BACKEND_OK)
        return st;
    st = op_object_open(b, src->bucket, src->key, &sm, &o);
    if (st == BACKEND_OK && src->has_range && (src->first > src->last || src->last >= sm.size))
        st = BACKEND_BAD_RANGE;
    struct obj_meta pm;
    memset(&pm, 0, sizeof pm);
    if (st == BACKEND_OK) {
        uint64_t first = src->has_range ? src->first : 0;
        uint64_t len = src->has_range ? src->last - src->first + 1 : sm.size;
        st = wb_stream_into(o, first, len, p, pm.etag, NULL);
    }
    if (o)
        o->ops->obj_close(o);
    obj_meta_clear(&sm);
    if (st != BACKEND_OK) {
        p->ops->put_abort(p);
        return st;
    }
    return p->ops->put_commit(p, &pm, out);
}

static enum backend_status op_mpu_complete(struct backend *b, const char *bucket,
                                           const char *key, const char *upload_id,
                                           const struct backend_part *parts, size_t n_parts,
                                           const struct obj_meta *meta,
                                           const struct backend_cond *cond,
                                           struct obj_meta *out)
{
    struct wb *w = wb_of(b);
    if (!wb_key_is_wb(w, bucket, key))
        return w->cold->ops->mpu_complete(w->cold, bucket, key, upload_id, parts, n_parts,
                                          meta, cond, out);
    char v[WB_VID_LEN + 1], sid[BACKEND_UPLOAD_ID_MAX];
    if (!mpu_names(w, bucket, key, upload_id, v, sid))
        return BACKEND_NO_UPLOAD;
    bool conditional = cond && cond->kind != BACKEND_COND_NONE;
    if (conditional)
        pthread_mutex_lock(&w->cond_mu);
    struct obj_meta staged;
    memset(&staged, 0, sizeof staged);
    enum backend_status st = cond_check(w, bucket, key, cond);
    if (st == BACKEND_OK)
        st = w->stage->ops->mpu_complete(w->stage, bucket, v, sid, parts, n_parts, meta, NULL,
                                         &staged);
    struct wb_rec *r = NULL;
    if (st == BACKEND_OK && !(r = rec_new(WB_PUT, bucket, key)))
        st = BACKEND_NOMEM;
    if (st == BACKEND_OK) {
        /* the upload ends here: its record is the object's */
        pthread_mutex_lock(&w->mu);
        struct wb_mpu *m = mpu_find_locked(w, bucket, key, upload_id);
        for (struct wb_mpu **pp = &w->mpus; m && *pp; pp = &(*pp)->next) {
            if (*pp == m) {
                *pp = m->next;
                break;
            }
        }
        if (m) {
            r->vid = m->vid;
            wb_mpu_free(w, m);   /* its parts are the object's: dirty once acknowledged */
        } else {
            r->vid = strtoull(v, NULL, 16);   /* completed twice at once: same version */
        }
        pthread_mutex_unlock(&w->mu);
        r->size = staged.size;
        r->mtime = staged.mtime;
        memcpy(r->etag, staged.etag, sizeof r->etag);
        st = acknowledge(w, r, false);
    }
    if (conditional)
        pthread_mutex_unlock(&w->cond_mu);
    if (st == BACKEND_OK && out) {
        out->size = staged.size;
        out->mtime = staged.mtime;
        memcpy(out->etag, staged.etag, sizeof out->etag);
        for (size_t i = 0; i < staged.n_hdrs; i++)
            if (strncmp(staged.hdrs[i].name, "x-amz-checksum-", 15) == 0)
                obj_meta_add_hdr(out, staged.hdrs[i].name, staged.hdrs[i].value);
    }
    obj_meta_clear(&staged);
    return st;
}

static enum backend_status op_mpu_head(struct backend *b, const char *bucket, const char *key,
                                       const char *upload_id, struct obj_meta *meta)
{
    struct wb *w = wb_of(b);
    if (!wb_key_is_wb(w, bucket, key))
        return w->cold->ops->mpu_head(w->cold, bucket, key, upload_id, meta);
    char v[WB_VID_LEN + 1], sid[BACKEND_UPLOAD_ID_MAX];
    if (!mpu_names(w, bucket, key, upload_id, v, sid))
        return BACKEND_NO_UPLOAD;
    return w->stage->ops->mpu_head(w->stage, bucket, v, sid, meta);
}

static enum backend_status op_mpu_abort(struct backend *b, const char *bucket, const char *key,
                                        const char *upload_id)
{
    struct wb *w = wb_of(b);
    if (!wb_key_is_wb(w, bucket, key))
        return w->cold->ops->mpu_abort(w->cold, bucket, key, upload_id);
    char v[WB_VID_LEN + 1], sid[BACKEND_UPLOAD_ID_MAX];
    if (!mpu_names(w, bucket, key, upload_id, v, sid))
        return BACKEND_NO_UPLOAD;
    enum backend_status st = w->stage->ops->mpu_abort(w->stage, bucket, v, sid);
    if (st != BACKEND_OK && st != BACKEND_NO_UPLOAD)
        return st;
    pthread_mutex_lock(&w->mu);
    struct wb_mpu *m = mpu_find_locked(w, bucket, key, upload_id);
    if (m) {
        wb_journal_mpu_locked(w, m, false, NULL);   /* best effort: start-up checks */
        for (struct wb_mpu **pp = &w->mpus; *pp; pp = &(*pp)->next)
            if (*pp == m) {
                *pp = m->next;
                break;
            }
        wb_mpu_free(w, m);
    }
    pthread_mutex_unlock(&w->mu);
    return BACKEND_OK;
}

static enum backend_status op_mpu_list_parts(struct backend *b, const char *bucket,
                                             const char *key, const char *upload_id,
                                             unsigned marker, unsigned max_parts,
                                             struct backend_parts_page *out)
{
    struct wb *w = wb_of(b);
    if (!wb_key_is_wb(w, bucket, key))
        return w->cold->ops->mpu_list_parts(w->cold, bucket, key, upload_id, marker,
                                            max_parts, out);
    char v[WB_VID_LEN + 1], sid[BACKEND_UPLOAD_ID_MAX];
    if (!mpu_names(w, bucket, key, upload_id, v, sid))
        return BACKEND_NO_UPLOAD;
    return w->stage->ops->mpu_list_parts(w->stage, bucket, v, sid, marker, max_parts, out);
}

static enum backend_status op_mpu_list_uploads(struct backend *b, const char *bucket,
                                               const struct backend_uploads_req *req,
                                               struct backend_uploads_page *out)
{
    struct wb *w = wb_of(b);
    if (!wb_bucket_is_wb(w, bucket))
        return w->cold->ops->mpu_list_uploads(w->cold, bucket, req, out);
    if (wb_bucket_is_mixed(w, bucket))
        return wb_list_uploads_mixed(w, bucket, req, out);
    return wb_list_uploads(w, bucket, req, out);
}

static enum backend_status op_list_objects(struct backend *b, const char *bucket,
                                           const struct backend_list_req *req,
                                           struct backend_list_page *out)
{
    struct wb *w = wb_of(b);
    if (!wb_bucket_is_wb(w, bucket))
        return w->cold->ops->list_objects(w->cold, bucket, req, out);
    return wb_list_objects(w, bucket, req, out);
}

const struct backend_ops wb_ops = {
    .name = "write-back",
    .close = op_close,
    .bucket_list = op_bucket_list,
    .bucket_create = op_bucket_create,
    .bucket_head = op_bucket_head,
    .bucket_delete = op_bucket_delete,
    .object_head = op_object_head,
    .object_open = op_object_open,
    .object_part = op_object_part,
    .obj_fd = op_obj_fd,
    .obj_read = op_obj_read,
    .obj_close = op_obj_close,
    .put_begin = op_put_begin,
    .put_write = op_put_write,
    .put_commit = op_put_commit,
    .put_abort = op_put_abort,
    .object_copy = op_object_copy,
    .object_delete = op_object_delete,
    .list_objects = op_list_objects,
    .mpu_create = op_mpu_create,
    .mpu_part_begin = op_mpu_part_begin,
    .mpu_part_copy = op_mpu_part_copy,
    .mpu_complete = op_mpu_complete,
    .mpu_head = op_mpu_head,
    .mpu_abort = op_mpu_abort,
    .mpu_list_parts = op_mpu_list_parts,
    .mpu_list_uploads = op_mpu_list_uploads,
    .tagging_get = op_tagging_get,
    .tagging_put = op_tagging_put,
    .object_head_timed = op_object_head_timed,
    .probe = op_probe,
    .info = op_info,
};

/* ---- open, status, flush ---- */

__attribute__((format(printf, 2, 3)))
static void set_err(const struct backend_wb_conf *cf, const char *fmt, ...)
{
    if (!cf->err || !cf->err_len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cf->err, cf->err_len, fmt, ap);
    va_end(ap);
}

/* Removes staged objects and uploads no journal record refers to: writes
 * that died between staging and their record (never acknowledged). */
static void sweep_orphans(struct wb *w, const char *bucket)
{
    char after[WB_VID_LEN + 1] = "";
    unsigned removed = 0;
    for (;;) {
        struct backend_list_req req = { .prefix = "", .start_after = after, .max_keys = 1000 };
        struct backend_list_page pg;
        memset(&pg, 0, sizeof pg);
        if (w->stage->ops->list_objects(w->stage, bucket, &req, &pg) != BACKEND_OK)
            break;
        for (size_t i = 0; i < pg.n_objs; i++) {
            char *end;
            uint64_t vid = strtoull(pg.objs[i].key, &end, 16);
            bool live = false;
            for (struct wb_rec *r = w->head; r && !*end; r = r->next)
                if (r->kind == WB_PUT && r->vid == vid && strcmp(r->bucket, bucket) == 0)
                    live = true;
            if (!live && w->stage->ops->object_delete(w->stage, bucket, pg.objs[i].key) ==
                             BACKEND_OK)
                removed++;
            if (!*end && vid >= w->next_id)
                w->next_id = vid + 1;
        }
        bool more = pg.truncated && pg.n_objs;
        if (more)
            snprintf(after, sizeof after, "%s", pg.objs[pg.n_objs - 1].key);
        backend_list_page_free(&pg);
        if (!more)
            break;
    }
    if (removed)
        log_msg(LOG_LVL_INFO, "write-back", "%s: removed %u staged objects of writes that were "
                "never acknowledged", bucket, removed);
}

/* Aborts the staged uploads begun mpu_max_age_s or longer before `now`, as
 * the directory store does with its own (S3's AbortIncompleteMultipartUpload
 * rule): an abandoned checkpoint upload does not hold the cache's space for
 * ever. Its staged parts go first, then its journal record, as in an abort:
 * a crash between the two leaves a record whose upload the next sweep finds
 * gone. Returns how many. */
static unsigned expire_uploads(struct wb *w, time_t now)
{
    unsigned n = 0;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        struct wb_mpu *m = NULL;
        for (struct wb_mpu **pp = &w->mpus; *pp; pp = &(*pp)->next)
            if (now - (*pp)->initiated.tv_sec >= (time_t)w->mpu_max_age_s) {
                m = *pp;
                *pp = m->next;   /* no part or complete finds it from here on */
                break;
            }
        pthread_mutex_unlock(&w->mu);
        if (!m)
            return n;
        char v[WB_VID_LEN + 1];
        wb_vid_name(m->vid, v);
        enum backend_status st = w->stage->ops->mpu_abort(w->stage, m->bucket, v, m->sid);
        pthread_mutex_lock(&w->mu);
        if (st != BACKEND_OK && st != BACKEND_NO_UPLOAD) {   /* the next sweep tries again */
            log_msg(LOG_LVL_WARN, "write-back", "%s/%s: the expired upload's staged parts "
                    "could not be removed (%s)", m->bucket, m->key, backend_status_name(st));
            m->next = w->mpus;
            w->mpus = m;
            pthread_mutex_unlock(&w->mu);
            return n;
        }
        wb_journal_mpu_locked(w, m, false, NULL);   /* best effort, as an abort's */
        wb_mpu_free(w, m);
        pthread_mutex_unlock(&w->mu);
        n++;
    }
}

static void log_expired(struct wb *w, unsigned n)
{
    if (n)
        log_msg(LOG_LVL_INFO, "write-back", "aborted %u multipart upload%s begun more than "
                "%u s ago (mpu_max_age)", n, n == 1 ? "" : "s", w->mpu_max_age_s);
}

static void *expiry_main(void *arg)
{
    struct wb *w = arg;
    unsigned period_s = w->mpu_max_age_s / 4;
    period_s = period_s < 1 ? 1 : period_s > 3600 ? 3600 : period_s;
    pthread_mutex_lock(&w->mu);
    while (!w->stopping) {
        struct timespec until = sg_deadline(CLOCK_REALTIME, period_s * 1000u);
        int rc = 0;
        while (!w->stopping && rc != ETIMEDOUT)   /* cv is broadcast for uploads too */
            rc = pthread_cond_timedwait(&w->cv, &w->mu, &until);
        if (w->stopping)
            break;
        pthread_mutex_unlock(&w->mu);
        log_expired(w, expire_uploads(w, time(NULL)));
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* The parts uploads open before the start have staged, counted again from
 * the staging store (the journal does not record parts). */
static void count_staged_parts(struct wb *w)
{
    for (struct wb_mpu *m = w->mpus; m; m = m->next) {
        char v[WB_VID_LEN + 1];
        wb_vid_name(m->vid, v);
        unsigned marker = 0;
        for (;;) {
            struct backend_parts_page pg;
            memset(&pg, 0, sizeof pg);
            if (w->stage->ops->mpu_list_parts(w->stage, m->bucket, v, m->sid, marker, 1000,
                                              &pg) != BACKEND_OK)
                break;
            for (size_t i = 0; i < pg.n_parts; i++)
                mpu_part_locked(w, m, pg.parts[i].part_no, pg.parts[i].size);
            bool more = pg.truncated && pg.n_parts;
            marker = pg.next_marker;
            backend_parts_page_free(&pg);
            if (!more)
                break;
        }
    }
}

enum backend_status backend_wb_open(const struct backend_wb_conf *cf, struct backend *cold,
                                    struct backend **out)
{
    *out = NULL;
    struct wb *w = calloc(1, sizeof *w);
    if (!w) {
        backend_close(cold);
        return BACKEND_NOMEM;
    }
    w->base.ops = &wb_ops;
    w->cold = cold;
    w->jfd = w->dirfd = -1;
    w->next_id = 1;
    w->max_dirty = cf->max_dirty;
    w->dirty_wait_ms = cf->dirty_wait_ms ? cf->dirty_wait_ms : 10000;
    w->through_timeout_ms = cf->through_timeout_ms ? cf->through_timeout_ms : 30000;
    w->train_hold_ms = cf->train_hold_ms ? cf->train_hold_ms : WB_HOLD_MS;
    w->upload_bps = cf->upload_bandwidth;
    w->compact_at = cf->compact_bytes ? cf->compact_bytes : 1u << 20;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    pthread_mutex_init(&w->cond_mu, NULL);
    pthread_mutex_init(&w->sync_mu, NULL);
    pthread_mutex_init(&w->pace_mu, NULL);
    w->buckets = calloc(cf->n_buckets ? cf->n_buckets : 1, sizeof *w->buckets);
    w->rules = calloc(cf->n_buckets ? cf->n_buckets : 1, sizeof *w->rules);
    bool copied = w->buckets && w->rules;
    for (size_t i = 0; copied && i < cf->n_buckets; i++) {
        if (!(w->buckets[w->n_buckets] = strdup(cf->buckets[i]))) {
            copied = false;
            break;
        }
        struct wb_rules *rs = &w->rules[w->n_buckets++];
        size_t n = cf->rules ? cf->rules[i].n : 0;
        if (n && !(rs->rule = calloc(n, sizeof *rs->rule)))
            copied = false;
        for (size_t j = 0; copied && j < n; j++) {
            const struct backend_wb_rule *r = &cf->rules[i].rule[j];
            struct wb_rule *to = &rs->rule[rs->n++];
            to->prefix = strdup(r->prefix);
            to->len = strlen(r->prefix);
            to->back = r->back;
            copied = to->prefix != NULL;
        }
    }
    if (!copied) {
        op_close(&w->base);
        return BACKEND_NOMEM;
    }
    char data[4096], state[4096];
    snprintf(data, sizeof data, "%s/data", cf->dir);
    snprintf(state, sizeof state, "%s/state", cf->dir);
    if (sg_mkdir_missing(cf->dir) != 0) {
        set_err(cf, "cannot create the write-back directory %s: %s", cf->dir, strerror(errno));
        op_close(&w->base);
        return BACKEND_IO;
    }
    struct backend_posix_conf pc = { .root = data, .state_dir = state, .mpu_max_age_s = 0,
                                     .stage_io = cf->stage_io,
                                     .err = cf->err, .err_len = cf->err_len };
    enum backend_status st = backend_posix_open(&pc, &w->stage);
    if (st != BACKEND_OK) {
        op_close(&w->base);
        return st;
    }
    w->stage_direct = cf->stage_io == BACKEND_STAGE_DIRECT;
    for (size_t i = 0; i < w->n_buckets; i++) {
        st = w->stage->ops->bucket_create(w->stage, w->buckets[i]);
        if (st != BACKEND_OK && st != BACKEND_BUCKET_EXISTS) {
            set_err(cf, "cannot stage writes of bucket %s in %s", w->buckets[i], data);
            op_close(&w->base);
            return st;
        }
    }
    if (wb_journal_open(w, cf->dir, cf->err, cf->err_len) != 0) {
        op_close(&w->base);
        return BACKEND_IO;
    }
    for (size_t i = 0; i < w->n_buckets; i++)
        sweep_orphans(w, w->buckets[i]);
    w->mpu_max_age_s = cf->mpu_max_age_s;
    if (w->mpu_max_age_s)
        log_expired(w, expire_uploads(w, time(NULL)));
    count_staged_parts(w);
    /* told before the threads start: they change these counters */
    if (w->dirty_objects)
        log_msg(LOG_LVL_INFO, "write-back", "%" PRIu64 " writes (%" PRIu64 " bytes) pending "
                "from before the start: uploading", w->dirty_objects, w->dirty_bytes);
    if (w->staged_bytes)
        log_msg(LOG_LVL_INFO, "write-back", "multipart uploads open from before the start "
                "hold %" PRIu64 " bytes of parts", w->staged_bytes);
    if (wb_uploader_start(w) != 0) {
        set_err(cf, "cannot start the write-back uploader");
        op_close(&w->base);
        return BACKEND_NOMEM;
    }
    if (w->mpu_max_age_s) {
        if (pthread_create(&w->expiry, NULL, expiry_main, w) == 0)
            w->expiry_up = true;
        else
            log_msg(LOG_LVL_WARN, "write-back", "cannot start the upload expiry thread: "
                    "multipart uploads are aborted at start only");
    }
    *out = &w->base;
    return BACKEND_OK;
}

static bool is_wb(const struct backend *b)
{
    return b && b->ops == &wb_ops;
}

bool backend_wb_bucket(struct backend *b, const char *bucket)
{
    return is_wb(b) && wb_bucket_is_wb(wb_of(b), bucket);
}

bool backend_wb_status(struct backend *b, const char *bucket, const char *prefix,
                       struct backend_wb_status *out)
{
    memset(out, 0, sizeof *out);
    if (!is_wb(b))
        return false;
    struct wb *w = wb_of(b);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    size_t plen = prefix ? strlen(prefix) : 0;
    out->upload_bps = wb_rate_bps(w);
    uint64_t by[3];
    posix_aw_stats(by);
    out->staged_direct = by[POSIX_AW_HOW_DIRECT];
    out->staged_uring = by[POSIX_AW_HOW_URING];
    out->staged_write = by[POSIX_AW_HOW_WRITE];
    pthread_mutex_lock(&w->mu);
    for (struct wb_rec *r = w->head; r; r = r->next) {
        if ((bucket && strcmp(r->bucket, bucket) != 0) ||
            (plen && strncmp(r->key, prefix, plen) != 0))
            continue;
        if (!out->dirty_objects)
            out->oldest_s = (double)(now.tv_sec - r->acked.tv_sec) +
                            (double)(now.tv_nsec - r->acked.tv_nsec) / 1e9;
        out->dirty_objects++;
        if (r->kind == WB_PUT)
            out->dirty_bytes += r->size;
    }
    out->staged_part_bytes = w->staged_bytes;
    out->uploaded_bytes = w->uploaded_bytes;
    out->upload_copied = __atomic_load_n(&w->upload_copied, __ATOMIC_RELAXED);
    out->upload_hashed = __atomic_load_n(&w->upload_hashed, __ATOMIC_RELAXED);
    out->uploaded_objects = w->uploaded_objects;
    out->failures = w->failures;
    snprintf(out->last_error, sizeof out->last_error, "%s", w->last_error);
    pthread_mutex_unlock(&w->mu);
    return true;
}

uint64_t backend_wb_disk_bytes(struct backend *b)
{
    if (!is_wb(b))
        return 0;
    struct wb *w = wb_of(b);
    pthread_mutex_lock(&w->mu);
    uint64_t n = w->dirty_bytes + w->staged_bytes;
    pthread_mutex_unlock(&w->mu);
    return n;
}

bool backend_wb_flush(struct backend *b, const char *bucket, const char *prefix,
                      unsigned timeout_ms, uint64_t *barrier_io, struct backend_wb_status *left)
{
    bool done = true;
    if (is_wb(b) && wb_bucket_is_wb(wb_of(b), bucket)) {
        struct wb *w = wb_of(b);
        pthread_mutex_lock(&w->mu);
        /* everything acknowledged before now, or before the barrier given */
        uint64_t barrier = barrier_io && *barrier_io ? *barrier_io : w->next_id - 1;
        if (barrier_io)
            *barrier_io = barrier;
        w->kicked = true;                    /* a retry waiting out its backoff goes now */
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        done = wb_wait_uploaded(w, bucket, prefix, barrier, timeout_ms ? timeout_ms : 0);
    }
    if (left)
        backend_wb_status(b, bucket, prefix, left);
    return done;
}

void backend_wb_pause(struct backend *b, bool paused)
{
    if (!is_wb(b))
        return;
    struct wb *w = wb_of(b);
    pthread_mutex_lock(&w->mu);
    w->paused = paused;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}
