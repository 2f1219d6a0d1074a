/* backend/wb_upload.c - the write-back uploader: one thread that sends the
 * queue's records to the cold tier in sequence order, so the cold tier shows
 * writes in the order they were acknowledged (an object is visible at its
 * PUT's or CompleteMultipartUpload's end, after every earlier one ended):
 * one at a time, or small plain PUTs in trains whose PUTs end one after
 * another (below). A record superseded by a later write of its key is skipped. A
 * failure is retried with backoff (0.5 s doubling to 5 s; a flush retries at
 * once) and blocks the
 * records behind it: that is the ordering's price, and the status shows it.
 * A multipart object is sent with its own part boundaries, so the cold tier
 * computes the ETag the client was given, its parts WB_PART_STREAMS at a
 * time; a second thread sends the parts of the multipart objects behind the
 * head meanwhile (look-ahead, below), so only the completes wait in line. */
#include "wb_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "deadline.h"
#include "fs.h"
#include "log.h"
#include "md5.h"

/* ---- sending a staged range ----
 * To a cold S3 the bytes go straight from the staged file (libcurl reads
 * it: backend_put_from_fd), not through a buffer and the S3 tier's spool.
 * Other cold tiers take them through a buffer (wb_stream_into). */

/* What the end of a put waits for (a train's PUT: the one before it in the
 * cold tier): fn(arg) true lets it end, false stops it. */
struct hold {
    bool (*fn)(void *arg);
    void *arg;
};

/* The pacer's argument while a put sends from its staged file; lives until
 * the put's commit. */
struct send_ctx {
    struct wb *w;
    const struct hold *hold;   /* NULL: none */
};

static bool ctx_pace(void *arg, size_t n)
{
    struct send_ctx *c = arg;
    if (!wb_pace(c->w, n))
        return false;
    wb_rate_add(c->w, n);
    return true;
}

static bool ctx_last(void *arg)
{
    struct send_ctx *c = arg;
    return c->hold->fn(c->hold->arg);
}

#define MD5_CHUNK (1u << 20)

/* The MD5 (hex) of bytes [first, first + len) of fd. */
static enum backend_status range_md5(struct wb *w, int fd, uint64_t first, uint64_t len,
                                     char md5_hex[33])
{
    unsigned char *buf = malloc(MD5_CHUNK);
    if (!buf)
        return BACKEND_NOMEM;
    struct sg_md5 m;
    sg_md5_init(&m);
    enum backend_status st = BACKEND_OK;
    for (uint64_t off = first, end = first + len; off < end && st == BACKEND_OK;) {
        if (__atomic_load_n(&w->stopping, __ATOMIC_RELAXED)) {
            st = BACKEND_UNAVAILABLE;   /* shutting down: the journal resumes it */
            break;
        }
        size_t want = end - off < MD5_CHUNK ? (size_t)(end - off) : MD5_CHUNK;
        ssize_t got = pread(fd, buf, want, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            log_msg(LOG_LVL_ERROR, "write-back", "read a staged object: %s",
                    got < 0 ? strerror(errno) : "it ended early");
            st = BACKEND_IO;
            break;
        }
        sg_md5_update(&m, buf, (size_t)got);
        __atomic_fetch_add(&w->upload_hashed, (uint64_t)got, __ATOMIC_RELAXED);
        off += (uint64_t)got;
    }
    uint8_t d[16];
    sg_md5_final(&m, d);
    for (int i = 0; i < 16; i++)
        snprintf(md5_hex + 2 * i, 3, "%02x", d[i]);
    free(buf);
    return st;
}

/* Bytes [first, first + len) of the staged object o into the cold put p,
 * with their MD5 in md5_hex for p's commit (Content-MD5). `known`: md5_hex
 * holds it already (a plain object's ETag, so the cold tier checks the
 * staged bytes against what the client was given), or "" (a part: the
 * complete checks it, upload_parts); else it is computed, in a pass over
 * the range before it is sent. Through a buffer (a cold tier that is not
 * S3) the MD5 is always computed, on the way. When the bytes go from the
 * staged file, the body's last byte waits for ctx->hold (if any) and *held
 * says so; else the caller waits for it before the commit. */
static enum backend_status send_range(struct send_ctx *ctx, struct backend_obj *o,
                                      uint64_t first, uint64_t len, struct backend_put *p,
                                      char md5_hex[33], bool known, bool *held)
{
    struct wb *w = ctx->w;
    int fd = backend_obj_fd(o);
    struct backend_pacer pace = { ctx_pace, ctx->hold ? ctx_last : NULL, ctx };
    *held = false;
    /* Staged with O_DIRECT, the bytes are not in the page cache: the cold
     * put reads them around it too (an O_DIRECT descriptor; the S3 tier
     * reads those in aligned windows), so a checkpoint's upload neither
     * pays for pages it reads once nor pushes the readers' pages out. */
    int dfd = fd >= 0 && w->stage_direct ? sg_reopen_direct(fd) : -1;
    bool from_file = fd >= 0 && backend_put_from_fd(p, dfd >= 0 ? dfd : fd, first, len, &pace);
    if (dfd >= 0)
        close(dfd);   /* the put keeps its own dup */
    if (!from_file)
        return wb_stream_into(o, first, len, p, md5_hex, w);
    *held = ctx->hold != NULL;
    return known ? BACKEND_OK : range_md5(w, fd, first, len, md5_hex);
}

/* One multipart upload's parts, sent by up to WB_PART_STREAMS threads at
 * once (a cold S3 is limited per connection: one stream would leave most of
 * its bandwidth unused). Each thread takes the next part number.
 *
 * A part goes without Content-MD5, straight from the staged file, and its
 * ETag is the one the cold tier answers: the MD5 of what it received. No
 * byte is hashed here, because the complete's check does the work
 * (parts_match): the cold tier's part MD5s make the multipart ETag the
 * client was given only if every part arrived exactly as the client sent
 * it. `verify` (after a mismatch): each part is hashed from the staged file
 * into staged[], and sent again with that Content-MD5 when the cold tier's
 * ETag differs. */
struct part_job {
    struct wb *w;
    const struct wb_rec *r;
    struct backend_obj *o;     /* the staged object: pread, any thread */
    const char *v, *id;
    struct backend_part *parts;
    const bool *have;          /* parts the cold upload has already (resumed) */
    bool verify;
    struct backend_part *staged;   /* verify: the staged parts' MD5s, as part ETags */
    unsigned n;
    pthread_mutex_t mu;
    unsigned next;             /* the next part to send (1-based) */
    unsigned resent;           /* verify: parts sent again */
    enum backend_status st;    /* the first failure */
};

/* Part i of j's upload: sent (or, verifying, hashed and sent again if the
 * cold tier's copy differs). */
static enum backend_status part_send(struct part_job *j, unsigned i)
{
    struct wb *w = j->w;
    struct backend_part_range pr;
    enum backend_status st = w->stage->ops->object_part(w->stage, j->r->bucket, j->v, i, &pr);
    if (st != BACKEND_OK)
        return st;
    struct obj_meta pm;   /* what the put is given: the Content-MD5, when known */
    memset(&pm, 0, sizeof pm);
    if (j->verify) {
        int fd = backend_obj_fd(j->o);
        char *md5 = j->staged[i - 1].etag;
        j->staged[i - 1].part_no = i;
        st = fd < 0 ? BACKEND_IO : range_md5(w, fd, pr.first, pr.size, md5);
        if (st != BACKEND_OK || strcasecmp(md5, j->parts[i - 1].etag) == 0)
            return st;   /* the cold tier has these bytes */
        memcpy(pm.etag, md5, 33);
        __atomic_fetch_add(&j->resent, 1, __ATOMIC_RELAXED);
    }
    struct backend_put *p = NULL;
    st = backend_mpu_part_begin(w->cold, j->r->bucket, j->r->key, j->id, i, &p);
    if (st != BACKEND_OK)
        return st;
    struct send_ctx ctx = { w, NULL };
    bool held;
    /* a cold tier whose ETags are not MD5s cannot be checked at the
     * complete: its parts go with the staged bytes' MD5, as a plain PUT */
    bool hash = !j->verify && __atomic_load_n(&w->cold_etags_opaque, __ATOMIC_RELAXED);
    st = send_range(&ctx, j->o, pr.first, pr.size, p, pm.etag, !hash, &held);
    struct obj_meta got;
    memset(&got, 0, sizeof got);
    if (st == BACKEND_OK)
        st = backend_put_commit(p, &pm, &got);
    else
        backend_put_abort(p);
    if (st == BACKEND_OK) {
        j->parts[i - 1].part_no = i;
        memcpy(j->parts[i - 1].etag, got.etag, sizeof j->parts[i - 1].etag);
        __atomic_fetch_add(&w->progress, 1, __ATOMIC_RELAXED);
    }
    obj_meta_clear(&got);
    return st;
}

static void *part_stream(void *arg)
{
    struct part_job *j = arg;
    wb_upload_thread_priority();
    sg_md5_share_lanes(true);   /* WB_PART_STREAMS threads may hash parts at once */
    for (;;) {
        pthread_mutex_lock(&j->mu);
        while (j->next <= j->n && j->have[j->next - 1])
            j->next++;
        if (j->st == BACKEND_OK && __atomic_load_n(&j->w->stopping, __ATOMIC_RELAXED))
            j->st = BACKEND_UNAVAILABLE;   /* shutting down: the journal resumes it */
        unsigned i = j->st == BACKEND_OK && j->next <= j->n ? j->next++ : 0;
        pthread_mutex_unlock(&j->mu);
        if (!i) {
            sg_md5_share_lanes(false);
            return NULL;
        }
        enum backend_status st = part_send(j, i);
        if (st != BACKEND_OK) {
            pthread_mutex_lock(&j->mu);
            if (j->st == BACKEND_OK)
                j->st = st;
            pthread_mutex_unlock(&j->mu);
        }
    }
}

/* Runs j on up to WB_PART_STREAMS threads, this one among them. */
static enum backend_status part_job_run(struct part_job *j)
{
    pthread_mutex_init(&j->mu, NULL);
    j->next = 1;
    j->st = BACKEND_OK;
    pthread_t t[WB_PART_STREAMS];
    unsigned started = 0, want = j->n < WB_PART_STREAMS ? j->n : WB_PART_STREAMS;
    for (; started + 1 < want; started++)   /* this thread is one of them */
        if (pthread_create(&t[started], NULL, part_stream, j) != 0)
            break;
    part_stream(j);
    for (unsigned i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    pthread_mutex_destroy(&j->mu);
    return j->st;
}

/* The parts of the cold upload r->cold_upload whose sizes match the staged
 * parts (the staged object never changes: its name is its version, so a
 * part of the right size is the right part) into have/parts. NO_UPLOAD when
 * the cold tier does not know the upload any more. */
static enum backend_status parts_sent(struct wb *w, const struct wb_rec *r, const char *v,
                                      unsigned n, bool *have, struct backend_part *parts)
{
    unsigned marker = 0;
    for (;;) {
        struct backend_parts_page pg;
        memset(&pg, 0, sizeof pg);
        enum backend_status st = backend_mpu_list_parts(w->cold, r->bucket, r->key,
                                                        r->cold_upload, marker, 1000, &pg);
        if (st != BACKEND_OK)
            return st;
        for (size_t k = 0; k < pg.n_parts; k++) {
            unsigned i = pg.parts[k].part_no;
            struct backend_part_range pr;
            if (i < 1 || i > n ||
                w->stage->ops->object_part(w->stage, r->bucket, v, i, &pr) != BACKEND_OK ||
                pr.size != pg.parts[k].size)
                continue;
            have[i - 1] = true;
            parts[i - 1].part_no = i;
            memcpy(parts[i - 1].etag, pg.parts[k].etag, sizeof parts[i - 1].etag);
        }
        bool more = pg.truncated && pg.next_marker > marker;
        marker = pg.next_marker;
        backend_parts_page_free(&pg);
        if (!more)
            return BACKEND_OK;
    }
}

/* Forgets (and aborts in the cold tier) r's cold upload. */
static void cold_upload_drop(struct wb *w, struct wb_rec *r)
{
    if (!r->cold_upload)
        return;
    backend_mpu_abort(w->cold, r->bucket, r->key, r->cold_upload);
    pthread_mutex_lock(&w->mu);
    free(r->cold_upload);
    r->cold_upload = NULL;
    wb_journal_cold_upload_locked(w, r);
    pthread_mutex_unlock(&w->mu);
}

/* Sends the staged object as a multipart upload with its own parts:
 * BACKEND_PARTS_UNKNOWN when the staging store does not know them (the
 * caller sends it whole). The object becomes visible at the complete, after
 * every part: the order of visibility stays the uploader's. A failed
 * attempt keeps its cold upload (journaled): the next attempt, after a
 * restart too, sends only the parts it lacks. */
static enum backend_status send_parts(struct wb *w, struct wb_rec *r, struct backend_obj *o,
                                      const char *v, const struct obj_meta *meta, unsigned n,
                                      struct backend_part *parts, bool *have)
{
    struct backend_part_range pr;
    enum backend_status st = w->stage->ops->object_part(w->stage, r->bucket, v, 1, &pr);
    if (st != BACKEND_OK)
        return st;
    if (r->cold_upload) {
        st = parts_sent(w, r, v, n, have, parts);
        if (st == BACKEND_NO_UPLOAD) {   /* expired or aborted: start again */
            cold_upload_drop(w, r);
            memset(have, 0, n * sizeof *have);
            st = BACKEND_OK;
        }
        if (st != BACKEND_OK)
            return st;
    }
    if (!r->cold_upload) {
        /* the parts go without checksums (the cold tier computes its own), so
         * the upload must not announce the client's: the cold tier would
         * refuse the parts (InvalidRequest) */
        struct obj_meta um;
        memset(&um, 0, sizeof um);
        for (size_t i = 0; i < meta->n_hdrs && st == BACKEND_OK; i++)
            if (strncmp(meta->hdrs[i].name, "x-amz-checksum-", 15) != 0 &&
                obj_meta_add_hdr(&um, meta->hdrs[i].name, meta->hdrs[i].value) != 0)
                st = BACKEND_NOMEM;
        char id[BACKEND_UPLOAD_ID_MAX];
        if (st == BACKEND_OK)
            st = backend_mpu_create(w->cold, r->bucket, r->key, &um, id);
        obj_meta_clear(&um);
        char *keep = st == BACKEND_OK ? strdup(id) : NULL;
        if (st == BACKEND_OK && !keep) {
            backend_mpu_abort(w->cold, r->bucket, r->key, id);
            st = BACKEND_NOMEM;
        }
        if (st != BACKEND_OK)
            return st;
        pthread_mutex_lock(&w->mu);
        r->cold_upload = keep;
        wb_journal_cold_upload_locked(w, r);
        pthread_mutex_unlock(&w->mu);
    }
    struct part_job j = { .w = w, .r = r, .o = o, .v = v, .id = r->cold_upload,
                          .parts = parts, .have = have, .n = n };
    return part_job_run(&j);
}

/* Whether n part ETags make r's multipart ETag. */
static bool parts_make(const struct wb_rec *r, const struct backend_part *parts, unsigned n)
{
    char e[72];
    return backend_parts_etag(parts, n, e) && strcasecmp(e, r->etag) == 0;
}

/* After the cold tier's part ETags did not make the client's: every staged
 * part is hashed, and sent again with its MD5 where the cold tier's copy
 * differs (a part damaged on the way). BACKEND_BAD_DIGEST when the staged
 * bytes themselves do not make the client's ETag: they changed on the disk
 * after the acknowledgement, so they never become that object in the cold
 * tier (a plain object's upload is refused alike, by its Content-MD5). */
static enum backend_status parts_verify(struct wb *w, struct wb_rec *r, struct backend_obj *o,
                                        const char *v, unsigned n, struct backend_part *parts)
{
    if (r->digest_bad)
        return BACKEND_BAD_DIGEST;   /* hashed once already: they do not heal */
    log_msg(LOG_LVL_WARN, "write-back", "%s/%s: the cold tier's parts do not make the ETag %s "
            "the client was given: hashing the staged parts", r->bucket, r->key, r->etag);
    struct backend_part *staged = calloc(n, sizeof *staged);
    bool *none = calloc(n, sizeof *none);   /* no part skipped */
    if (!staged || !none) {
        free(staged);
        free(none);
        return BACKEND_NOMEM;
    }
    struct part_job j = { .w = w, .r = r, .o = o, .v = v, .id = r->cold_upload,
                          .parts = parts, .have = none, .verify = true, .staged = staged,
                          .n = n };
    enum backend_status st = part_job_run(&j);
    if (st == BACKEND_OK && !parts_make(r, staged, n)) {
        log_msg(LOG_LVL_ERROR, "write-back", "%s/%s: the staged copy does not match the ETag "
                "%s the client was given (changed on the disk after the answer): not "
                "uploaded", r->bucket, r->key, r->etag);
        r->digest_bad = true;
        st = BACKEND_BAD_DIGEST;
    } else if (st == BACKEND_OK && !parts_make(r, parts, n)) {
        /* each part went again with its Content-MD5, which the cold tier
         * checked: its ETags are not the MD5s (SSE-KMS does that) */
        log_msg(LOG_LVL_WARN, "write-back", "the cold tier's part ETags are not their MD5s: "
                "parts are hashed before they are sent from now on");
        __atomic_store_n(&w->cold_etags_opaque, true, __ATOMIC_RELAXED);
    } else if (st == BACKEND_OK) {
        log_msg(LOG_LVL_INFO, "write-back", "%s/%s: %u of %u parts sent again", r->bucket,
                r->key, j.resent, n);
    }
    free(staged);
    free(none);
    return st;
}

/* send_parts, then (when complete) the check that the cold tier has every
 * part as the client sent it, and the complete. */
static enum backend_status upload_parts(struct wb *w, struct wb_rec *r,
                                        struct backend_obj *o, const char *v,
                                        const struct obj_meta *meta, unsigned n, bool complete)
{
    struct backend_part *parts = calloc(n, sizeof *parts);
    bool *have = calloc(n, sizeof *have);
    if (!parts || !have) {
        free(parts);
        free(have);
        return BACKEND_NOMEM;
    }
    enum backend_status st = send_parts(w, r, o, v, meta, n, parts, have);
    if (!complete) {
        free(parts);
        free(have);
        return st;
    }
    if (st == BACKEND_OK && !parts_make(r, parts, n) &&
        !__atomic_load_n(&w->cold_etags_opaque, __ATOMIC_RELAXED))
        st = parts_verify(w, r, o, v, n, parts);
    struct obj_meta done;
    memset(&done, 0, sizeof done);
    if (st == BACKEND_OK)
        st = backend_mpu_complete(w->cold, r->bucket, r->key, r->cold_upload, parts, n, &done);
    /* (Ceph RGW 16 answers the complete with an empty ETag: nothing to compare) */
    if (st == BACKEND_OK && done.etag[0] && strcmp(done.etag, r->etag) != 0)
        log_msg(LOG_LVL_WARN, "write-back", "%s/%s: the cold tier's ETag %s differs from the "
                "%s the client was given", r->bucket, r->key, done.etag, r->etag);
    obj_meta_clear(&done);
    if (st == BACKEND_INVALID_PART || st == BACKEND_INVALID_PART_ORDER ||
        st == BACKEND_ENTITY_TOO_SMALL)
        cold_upload_drop(w, r);   /* the cold tier refused the parts: start again */
    free(parts);
    free(have);
    return st;
}

/* Sends r's staged object: as a multipart upload with its own parts when
 * its ETag says it has parts and the staging store knows them, else whole.
 * Without `complete` (the look-ahead) only the parts go, never the object.
 * `hold` (a train's PUT, never multipart): its end waits for hold->fn. */
static enum backend_status upload_put(struct wb *w, struct wb_rec *r, bool complete,
                                      const struct hold *hold)
{
    char v[WB_VID_LEN + 1];
    wb_vid_name(r->vid, v);
    struct obj_meta meta;
    memset(&meta, 0, sizeof meta);
    struct backend_obj *o = NULL;
    enum backend_status st = w->stage->ops->object_open(w->stage, r->bucket, v, &meta, &o);
    if (st != BACKEND_OK)
        return st;
    unsigned n = backend_etag_parts(r->etag);
    st = n ? upload_parts(w, r, o, v, &meta, n, complete) : BACKEND_PARTS_UNKNOWN;
    if (st == BACKEND_PARTS_UNKNOWN && complete) {
        struct backend_put *p = NULL;
        st = backend_put_begin(w->cold, r->bucket, r->key, &p);
        char md5[33] = "";
        bool known = strlen(r->etag) == 32 && strspn(r->etag, "0123456789abcdef") == 32;
        if (known)
            memcpy(md5, r->etag, sizeof md5);
        struct send_ctx ctx = { w, hold };
        bool held = false;
        if (st == BACKEND_OK) {
            st = send_range(&ctx, o, 0, meta.size, p, md5, known, &held);
            if (st == BACKEND_OK && hold && !held && !hold->fn(hold->arg))
                st = BACKEND_UNAVAILABLE;   /* the one before it did not make it */
            if (st != BACKEND_OK)
                backend_put_abort(p);
        }
        if (st == BACKEND_OK) {
            memcpy(meta.etag, md5, sizeof md5);
            st = backend_put_commit(p, &meta, NULL);
        }
    }
    o->ops->obj_close(o);
    obj_meta_clear(&meta);
    return st;
}

/* After the object: the tags changed on its staged copy (op_tagging_put),
 * put in the cold tier until no change is newer than what was put. Under mu,
 * unlocked around the calls; the caller retires r without letting mu go
 * after an OK, so a change cannot slip in between. */
static enum backend_status push_tags_locked(struct wb *w, struct wb_rec *r)
{
    unsigned pushed = 0;
    enum backend_status st = BACKEND_OK;
    while (st == BACKEND_OK && r->tags_gen != pushed) {
        pushed = r->tags_gen;
        char v[WB_VID_LEN + 1];
        wb_vid_name(r->vid, v);
        pthread_mutex_unlock(&w->mu);
        struct obj_tags tags;
        st = w->stage->ops->tagging_get(w->stage, r->bucket, v, &tags);
        if (st == BACKEND_OK) {
            st = w->cold->ops->tagging_put(w->cold, r->bucket, r->key, &tags);
            obj_tags_clear(&tags);
        }
        pthread_mutex_lock(&w->mu);
    }
    return st;
}

static enum backend_status upload_one(struct wb *w, struct wb_rec *r)
{
    if (r->kind == WB_DEL) {
        enum backend_status st = backend_object_delete(w->cold, r->bucket, r->key);
        return st == BACKEND_NO_KEY ? BACKEND_OK : st;
    }
    return upload_put(w, r, true, NULL);
}

/* ---- trains: plain PUTs sent together, in order ----
 * A plain PUT used to wait for the answer to the one before it: with the
 * cold tier a round trip away, small objects went one round trip each
 * (bench/results/wb-order.md). A train sends up to WB_TRAIN of them at once,
 * the head by the uploader and each other on a thread of its own, every one
 * but the head holding back its body's last byte until the PUT before it is
 * answered: a server makes an object visible only with its last byte, so
 * the order holds. (A cold tier the bytes cannot go to from the staged file
 * - the directory store - holds the commit instead.) A PUT whose
 * predecessor failed, or that waited WB_HOLD_MS, stops without its last
 * byte, nothing visible, and is sent again in its turn. The uploader takes
 * the records out of the queue in order, as ever: a PUT that went up in the
 * train of the one before it is retired when the uploader reaches it. */

struct train;

struct car {
    struct train *t;
    struct wb_rec *r;
    unsigned i;                /* its place; 0: the head */
    int done;                  /* 0: sending; 1: in the cold tier; -1: not */
};

struct train {
    struct wb *w;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct car car[WB_TRAIN];
};

/* A record that may ride in a train (under mu): a plain PUT, small, not
 * skipped, not given up, not in another train. */
static bool train_fits(const struct wb_rec *r)
{
    return r->kind == WB_PUT && !r->superseded && !r->withdraw && !r->ahead && !r->train &&
           r->size <= WB_TRAIN_MAX && backend_etag_parts(r->etag) == 0;
}

static void car_done(struct car *c, enum backend_status st)
{
    pthread_mutex_lock(&c->t->mu);
    c->done = st == BACKEND_OK ? 1 : -1;
    pthread_cond_broadcast(&c->t->cv);
    pthread_mutex_unlock(&c->t->mu);
}

static bool past(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

/* Car c's hold: until the car before it is done, at most train_hold_ms, in
 * slices that notice a close. True when that one made it. */
static bool car_may_end(void *arg)
{
    struct car *c = arg;
    struct train *t = c->t;
    const struct car *prev = &t->car[c->i - 1];
    struct timespec until = sg_deadline(CLOCK_REALTIME, t->w->train_hold_ms);
    pthread_mutex_lock(&t->mu);
    while (prev->done == 0 && !past(&until) &&
           !__atomic_load_n(&t->w->stopping, __ATOMIC_RELAXED)) {
        struct timespec slice = sg_deadline(CLOCK_REALTIME, 100);
        pthread_cond_timedwait(&t->cv, &t->mu, &slice);
    }
    bool ok = prev->done == 1;
    pthread_mutex_unlock(&t->mu);
    return ok;
}

static void *car_main(void *arg)
{
    struct car *c = arg;
    wb_upload_thread_priority();
    struct hold h = { car_may_end, c };
    car_done(c, upload_put(c->t->w, c->r, true, &h));
    return NULL;
}

/* Sends the head rs[0] and the n - 1 records behind it (their r->train
 * set) as a train; the head's status. A record that went up keeps `train`
 * with train_sent (the uploader retires it when it gets there); one that
 * did not is pending as before, or retired if its request gave up. Without
 * mu. */
static enum backend_status train_run(struct wb *w, struct wb_rec *const *rs, unsigned n)
{
    struct train t = { .w = w };
    pthread_mutex_init(&t.mu, NULL);
    pthread_cond_init(&t.cv, NULL);
    pthread_t th[WB_TRAIN];
    bool started[WB_TRAIN] = { false };
    for (unsigned i = 0; i < n; i++)
        t.car[i] = (struct car){ .t = &t, .r = rs[i], .i = i };
    for (unsigned i = 1; i < n; i++) {
        started[i] = pthread_create(&th[i], NULL, car_main, &t.car[i]) == 0;
        if (!started[i])
            car_done(&t.car[i], BACKEND_NOMEM);   /* those behind it stop too */
    }
    enum backend_status st = upload_one(w, rs[0]);
    car_done(&t.car[0], st);
    for (unsigned i = 1; i < n; i++)
        if (started[i])
            pthread_join(th[i], NULL);
    pthread_mutex_lock(&w->mu);
    for (unsigned i = 1; i < n; i++) {
        struct wb_rec *r = rs[i];
        r->train_sent = t.car[i].done == 1;
        if (r->train_sent)
            continue;   /* retired when the uploader gets to it */
        r->train = false;   /* pending as before: sent again in its turn */
        if (r->withdraw)    /* its request gave up meanwhile */
            wb_retire_locked(w, r, WB_WITHDRAWN);
    }
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_cond_destroy(&t.cv);
    pthread_mutex_destroy(&t.mu);
    return st;
}

/* Takes r out of the queue and the journal, and removes its staged file.
 * A through record gets its fate (its request frees it); any other is
 * freed. Under mu; unlocks it around the removal. A withdrawn record's DONE
 * is synced before its request hears of it: a crash after the answer must
 * not bring back a write the client was told failed. */
void wb_retire_locked(struct wb *w, struct wb_rec *r, enum wb_fate fate)
{
    wb_dequeue_locked(w, r);
    uint64_t end = 0;
    wb_journal_done_locked(w, r->seq, &end);
    if (!w->head && w->jlen > w->compact_at)
        wb_journal_compact_locked(w);
    pthread_mutex_unlock(&w->mu);
    if (r->kind == WB_PUT) {
        char v[WB_VID_LEN + 1];
        wb_vid_name(r->vid, v);
        w->stage->ops->object_delete(w->stage, r->bucket, v);
    }
    if (fate == WB_WITHDRAWN && r->through)
        wb_journal_sync(w, end);
    pthread_mutex_lock(&w->mu);
    if (!r->through) {
        wb_rec_free(r);
        return;
    }
    r->fate = fate;
    pthread_cond_broadcast(&w->cv);
}

/* The backoff after a failure: ends early only for a stop or a flush (new
 * writes do not hurry a retry against a cold tier that is down). */
static void backoff_locked(struct wb *w, unsigned ms)
{
    struct timespec until = sg_deadline(CLOCK_REALTIME, ms);
    w->kicked = false;
    int rc = 0;
    while (!w->stopping && !w->kicked && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&w->cv, &w->mu, &until);
}

/* ---- reads come first ----
 * The cap paces every upload stream together on one virtual clock: a chunk
 * of n bytes is due n/cap seconds after the one before it (a stream idle
 * for a while gets no burst: the clock restarts at now). */
bool wb_pace(struct wb *w, size_t n)
{
    if (__atomic_load_n(&w->stopping, __ATOMIC_RELAXED))
        return false;
    if (!w->upload_bps)
        return true;
    struct timespec now, due;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&w->pace_mu);
    due = w->pace_next;
    if (due.tv_sec < now.tv_sec || (due.tv_sec == now.tv_sec && due.tv_nsec < now.tv_nsec))
        due = now;
    uint64_t ns = (uint64_t)n * 1000000000ull / w->upload_bps;
    w->pace_next.tv_sec = due.tv_sec + (time_t)(ns / 1000000000ull);
    w->pace_next.tv_nsec = due.tv_nsec + (long)(ns % 1000000000ull);
    if (w->pace_next.tv_nsec >= 1000000000L) {
        w->pace_next.tv_sec++;
        w->pace_next.tv_nsec -= 1000000000L;
    }
    pthread_mutex_unlock(&w->pace_mu);
    for (;;) {   /* sleep until due, in slices that notice a close */
        if (__atomic_load_n(&w->stopping, __ATOMIC_RELAXED))
            return false;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t left = (int64_t)(due.tv_sec - now.tv_sec) * 1000000000 +
                       (due.tv_nsec - now.tv_nsec);
        if (left <= 0)
            return true;
        struct timespec slice = { 0, (long)(left < 100000000 ? left : 100000000) };
        nanosleep(&slice, NULL);
    }
}

void wb_rate_add(struct wb *w, uint64_t n)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    size_t i = (size_t)now.tv_sec % WB_RATE_SLOTS;
    pthread_mutex_lock(&w->pace_mu);
    if (w->rate_sec[i] != (int64_t)now.tv_sec) {   /* a slot of an older second: reused */
        w->rate_sec[i] = now.tv_sec;
        w->rate_bytes[i] = 0;
    }
    w->rate_bytes[i] += n;
    pthread_mutex_unlock(&w->pace_mu);
}

uint64_t wb_rate_bps(struct wb *w)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t sum = 0;
    pthread_mutex_lock(&w->pace_mu);
    for (size_t i = 0; i < WB_RATE_SLOTS; i++)
        if (w->rate_sec[i] < (int64_t)now.tv_sec &&
            w->rate_sec[i] >= (int64_t)now.tv_sec - WB_RATE_WINDOW)
            sum += w->rate_bytes[i];
    pthread_mutex_unlock(&w->pace_mu);
    return sum / WB_RATE_WINDOW;
}

void wb_upload_thread_priority(void)
{
    /* nice 10 for this thread (Linux: per thread), and the lowest
     * best-effort I/O priority: never the idle class, under which a disk
     * busy with reads could starve the uploads past max_dirty */
    pid_t tid = (pid_t)syscall(SYS_gettid);
    setpriority(PRIO_PROCESS, (id_t)tid, 10);
    syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, tid,
            (2 /* IOPRIO_CLASS_BE */ << 13) | 7);
}

/* ---- look-ahead: the parts of the multipart objects behind the head ----
 * Parts are not visible in the cold tier until their upload's complete, so
 * the parts of the next WB_LOOKAHEAD records go up while the uploader is
 * busy with the head; the uploader, reaching such a record, finds them in
 * the cold upload (ListParts, as after a restart) and only completes it.
 * Completes stay in order: visibility does not change. One record at a
 * time, its parts WB_PART_STREAMS at once. */

/* A record behind the head worth sending ahead: multipart, pending, not
 * being sent, not sent ahead already. Under mu. */
static struct wb_rec *lookahead_pick_locked(struct wb *w)
{
    unsigned seen = 0;
    for (struct wb_rec *r = w->head ? w->head->next : NULL; r && seen < WB_LOOKAHEAD;
         r = r->next, seen++)
        if (r->kind == WB_PUT && !r->superseded && !r->withdraw && !r->ahead_done &&
            backend_etag_parts(r->etag) > 0)
            return r;
    return NULL;
}

static void *lookahead_main(void *arg)
{
    struct wb *w = arg;
    wb_upload_thread_priority();
    pthread_mutex_lock(&w->mu);
    while (!w->stopping) {
        struct wb_rec *r = w->paused ? NULL : lookahead_pick_locked(w);
        if (!r) {
            pthread_cond_wait(&w->cv, &w->mu);
            continue;
        }
        r->ahead = true;   /* neither uploaded, retired nor withdrawn under us */
        pthread_mutex_unlock(&w->mu);
        enum backend_status st = upload_put(w, r, false, NULL);
        if (st != BACKEND_OK)   /* the uploader tries again in its turn */
            log_msg(LOG_LVL_INFO, "write-back", "parts of %s/%s sent ahead: %s", r->bucket,
                    r->key, backend_status_name(st));
        pthread_mutex_lock(&w->mu);
        r->ahead_done = true;
        if (r->withdraw) {   /* its request gave up meanwhile (the uploader waits) */
            pthread_mutex_unlock(&w->mu);
            cold_upload_drop(w, r);
            pthread_mutex_lock(&w->mu);
            r->ahead = false;
            wb_retire_locked(w, r, WB_WITHDRAWN);
        } else {
            r->ahead = false;
        }
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* The head failed (under mu): the records behind it that went up in its
 * train wait for it no longer. They are pending as any record, sent again
 * in their turn (the same bytes once more); one whose write-through request
 * gave up meanwhile is retired as uploaded, as it is in the cold tier. */
static void train_drop_locked(struct wb *w)
{
    struct wb_rec *q = w->head ? w->head->next : NULL;
    while (q && q->train) {
        struct wb_rec *next = q->next;
        q->train = q->train_sent = false;
        if (q->withdraw)
            wb_retire_locked(w, q, WB_UPLOADED);
        q = next;
    }
}

static void *uploader_main(void *arg)
{
    struct wb *w = arg;
    wb_upload_thread_priority();
    unsigned backoff_ms = 0;
    pthread_mutex_lock(&w->mu);
    while (!w->stopping) {
        if (w->paused || !w->head) {
            pthread_cond_wait(&w->cv, &w->mu);
            continue;
        }
        struct wb_rec *r = w->head;   /* only this thread takes records out */
        if (r->ahead) {   /* its parts are going up ahead: wait for them */
            pthread_cond_wait(&w->cv, &w->mu);
            continue;
        }
        w->inflight = r;
        if (r->train) {   /* it went up in the train of the one before it */
            r->train = r->train_sent = false;
            enum backend_status st = r->tags_gen ? push_tags_locked(w, r) : BACKEND_OK;
            if (st == BACKEND_OK) {
                w->inflight = NULL;
                w->uploaded_objects++;
                w->uploaded_bytes += r->size;
                __atomic_fetch_add(&w->progress, 1, __ATOMIC_RELAXED);
                backoff_ms = 0;
                wb_retire_locked(w, r, WB_UPLOADED);
                continue;
            }   /* its tags did not go: the object is sent again, then they */
        }
        if (r->superseded) {
            if (r->cold_upload) {   /* a failed attempt's upload: not needed now */
                pthread_mutex_unlock(&w->mu);
                cold_upload_drop(w, r);
                pthread_mutex_lock(&w->mu);
            }
            w->inflight = NULL;
            wb_retire_locked(w, r, WB_WITHDRAWN);
            continue;
        }
        struct wb_rec *cars[WB_TRAIN] = { r };
        unsigned n = 1;
        if (train_fits(r))
            for (struct wb_rec *q = r->next; q && n < WB_TRAIN && train_fits(q); q = q->next) {
                q->train = true;
                cars[n++] = q;
            }
        pthread_mutex_unlock(&w->mu);
        enum backend_status st = n > 1 ? train_run(w, cars, n) : upload_one(w, r);
        pthread_mutex_lock(&w->mu);
        if (st == BACKEND_OK && r->kind == WB_PUT && r->tags_gen)
            st = push_tags_locked(w, r);
        w->inflight = NULL;
        if (st == BACKEND_OK) {
            w->uploaded_objects++;
            if (r->kind == WB_PUT)
                w->uploaded_bytes += r->size;
            __atomic_fetch_add(&w->progress, 1, __ATOMIC_RELAXED);
            backoff_ms = 0;
            wb_retire_locked(w, r, WB_UPLOADED);
            continue;
        }
        if (r->withdraw) {   /* its request gave up during this attempt */
            if (r->cold_upload) {
                pthread_mutex_unlock(&w->mu);
                cold_upload_drop(w, r);
                pthread_mutex_lock(&w->mu);
            }
            wb_retire_locked(w, r, WB_WITHDRAWN);
            continue;
        }
        if (w->stopping)
            break;   /* the attempt was cut short: the journal resumes it */
        if (r->kind == WB_PUT && st == BACKEND_NO_KEY) {
            /* its staged bytes are gone (the disk lost them): nothing can
             * bring them back, and the writes behind it must not wait */
            log_msg(LOG_LVL_ERROR, "write-back", "%s/%s: the staged copy of an acknowledged "
                    "write is missing: it cannot be uploaded", r->bucket, r->key);
            w->failures++;
            if (r->cold_upload) {
                pthread_mutex_unlock(&w->mu);
                cold_upload_drop(w, r);
                pthread_mutex_lock(&w->mu);
            }
            wb_retire_locked(w, r, WB_LOST);
            continue;
        }
        w->failures++;
        /* the cold tier's own words, when it answered this thread an error */
        char why[192] = "";
        struct backend_cold_error ce;
        if (st == BACKEND_COLD_ERROR && backend_cold_error_take(&ce))
            snprintf(why, sizeof why, " (%d %.63s: %.100s)", ce.http_status, ce.code,
                     ce.message);
        snprintf(w->last_error, sizeof w->last_error, "%s/%s: %s%s", r->bucket, r->key,
                 backend_status_name(st), why);
        backoff_ms = backoff_ms ? (backoff_ms >= 2500 ? 5000 : backoff_ms * 2) : 500;
        log_msg(LOG_LVL_WARN, "write-back", "upload of %s/%s failed (%s%s): retrying in %u ms",
                r->bucket, r->key, backend_status_name(st), why, backoff_ms);
        train_drop_locked(w);
        backoff_locked(w, backoff_ms);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int wb_uploader_start(struct wb *w)
{
    if (pthread_create(&w->uploader, NULL, uploader_main, w) != 0)
        return -1;
    w->uploader_up = true;
    if (pthread_create(&w->lookahead, NULL, lookahead_main, w) == 0)
        w->lookahead_up = true;   /* without it uploads only go one at a time */
    return 0;
}

void wb_uploader_stop(struct wb *w)
{
    if (!w->uploader_up)
        return;
    pthread_mutex_lock(&w->mu);
    __atomic_store_n(&w->stopping, true, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->uploader, NULL);
    w->uploader_up = false;
    if (w->lookahead_up)
        pthread_join(w->lookahead, NULL);
    w->lookahead_up = false;
}

static bool pending_upto_locked(struct wb *w, const char *bucket, const char *prefix,
                                uint64_t barrier)
{
    size_t plen = prefix ? strlen(prefix) : 0;
    for (struct wb_rec *r = w->head; r && r->seq <= barrier; r = r->next)
        if (strcmp(r->bucket, bucket) == 0 && (!plen || strncmp(r->key, prefix, plen) == 0))
            return true;
    return false;
}

bool wb_wait_uploaded(struct wb *w, const char *bucket, const char *prefix, uint64_t barrier,
                      unsigned timeout_ms)
{
    struct timespec until = sg_deadline(CLOCK_REALTIME, timeout_ms);
    pthread_mutex_lock(&w->mu);
    bool pending;
    int rc = 0;
    while ((pending = pending_upto_locked(w, bucket, prefix, barrier)) && !w->stopping &&
           rc != ETIMEDOUT)
        rc = timeout_ms ? pthread_cond_timedwait(&w->cv, &w->mu, &until)
                        : pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    return !pending;
}
