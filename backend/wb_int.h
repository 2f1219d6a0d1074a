/* backend/wb_int.h - the write-back decorator's insides (wb.c: the verbs,
 * wb_list.c: listings that merge pending writes, wb_journal.c: the durable
 * record of acknowledged writes, wb_upload.c: the ordered uploader).
 *
 * A write to a write-back bucket goes to a staging posix store under the
 * cache directory, under a name of its own (a version id, 16 hex digits),
 * never under its key: an overwrite stages a new file beside the one being
 * uploaded, and a crash between staging and the journal leaves an orphan
 * that start-up removes, never an acknowledged object replaced by an
 * unacknowledged one. The journal record (sequence number, key, version,
 * ETag, size), fdatasync'ed before the answer, is what makes the write
 * acknowledged; the uploader sends records to the cold tier one at a time in
 * sequence order, so the cold tier never shows an object before every object
 * acknowledged earlier. */
#ifndef SHARDGATE_BACKEND_WB_INT_H
#define SHARDGATE_BACKEND_WB_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "backend_int.h"

#define WB_KEY_BUCKETS 4096u   /* hash chains of the pending-key map */
#define WB_RATE_SLOTS 16       /* seconds of upload history kept ... */
#define WB_RATE_WINDOW 10      /* ... of which the rate averages the last full ones */
#define WB_VID_LEN 16          /* a staged object's name: the version id in hex */
#define WB_PART_STREAMS 4u     /* parts of one multipart object uploaded at once */
#define WB_LOOKAHEAD 8u        /* records behind the head whose parts may go ahead */
#define WB_TRAIN 8u            /* plain PUTs sent at once, in order (wb_upload.c) */
#define WB_TRAIN_MAX ((uint64_t)8 << 20)   /* ... each of at most this size */
#define WB_HOLD_MS 5000u       /* how long a train's PUT holds its last byte for the
                                  one before it, before it gives up (and is sent
                                  again in its turn): backend_wb_conf.train_hold_ms */

enum wb_kind { WB_PUT = 1, WB_DEL = 2 };

/* One acknowledged write, pending until the cold tier has it. */
struct wb_rec {
    uint64_t seq;              /* journal order: the order of acknowledgement */
    uint64_t vid;              /* WB_PUT: the staged object's name; 0 for WB_DEL */
    enum wb_kind kind;
    char *bucket, *key;
    uint64_t size;
    struct timespec mtime;     /* Last-Modified the client was told */
    char etag[72];
    struct timespec acked;     /* CLOCK_MONOTONIC, for the oldest pending age */
    bool superseded;           /* a later record of the same key exists: skipped */
    bool digest_bad;           /* the uploader's: its staged parts were hashed and do
                                  not make its ETag (changed on the disk) */
    bool through;              /* x-shardgate-write: through: its request waits for
                                  its fate (and frees it); readers and listings do not
                                  see it until the cold tier has it, and it supersedes
                                  nothing, so taking it back leaves the key as it was */
    bool withdraw;             /* its request gave up: take it back unless it is in
                                  the cold tier already */
    enum wb_fate { WB_PENDING, WB_UPLOADED, WB_WITHDRAWN, WB_LOST } fate;   /* through */
    bool ahead;                /* the look-ahead is sending its parts: the uploader
                                  waits, a giving-up request leaves it to the
                                  look-ahead */
    bool ahead_done;           /* the look-ahead has been at it (once is enough) */
    bool train;                /* sent in the train of the record before it: neither
                                  retired nor withdrawn until the uploader reaches it */
    bool train_sent;           /* ... and it is in the cold tier */
    char *cold_upload;         /* the cold tier's multipart upload of this record,
                                  kept (and journaled) across failed attempts and
                                  restarts so parts sent are not sent again; NULL */
    unsigned tags_gen;         /* WB_PUT: tag changes made on the staged object (or
                                  possibly made: a cold upload resumed after a
                                  restart was begun with the tags of its time); not
                                  0: the uploader puts the staged tags in the cold
                                  tier after the object, until no change is newer */
    struct wb_rec *next;       /* the upload queue, in seq order */
    struct wb_rec *key_next;   /* chain of the pending-key map (latest per key) */
};

/* A multipart upload into a write-back bucket, staged under its version. */
struct wb_mpu {
    uint64_t vid;
    char *bucket, *key;
    char sid[BACKEND_UPLOAD_ID_MAX];   /* the staging store's upload id */
    struct timespec initiated;         /* wall clock */
    uint64_t *part_bytes;   /* the staged bytes of part n at [n - 1] (a part sent
                               again replaces its count); NULL until a part */
    unsigned n_part_slots;
    uint64_t staged;        /* bytes of its parts: counted in wb's staged_bytes */
    struct wb_mpu *next;
};

struct wb {
    struct backend base;       /* first: ops of the decorator */
    struct backend *cold;      /* owned */
    struct backend *stage;     /* owned: posix store at DIR/data, DIR/state */
    char **buckets;            /* write-back buckets */
    struct wb_rules {          /* [n_buckets]: which keys (backend_wb_rules) */
        struct wb_rule {
            char *prefix;
            size_t len;
            bool back;
        } *rule;
        size_t n;              /* 0: all */
    } *rules;
    size_t n_buckets;
    uint64_t max_dirty;
    unsigned dirty_wait_ms;

    pthread_mutex_t mu;        /* everything below */
    pthread_cond_t cv;         /* queue changes, uploads done, pause, stop */
    uint64_t next_id;          /* seqs and vids come from one counter */
    struct wb_rec *head, *tail;            /* upload queue */
    struct wb_rec *keys[WB_KEY_BUCKETS];   /* latest pending record per key */
    struct wb_mpu *mpus;                   /* open multipart uploads */
    unsigned mpu_max_age_s;    /* older ones are aborted (0: never) */
    pthread_t expiry;          /* ... by this thread */
    bool expiry_up;
    unsigned train_hold_ms;        /* WB_HOLD_MS unless the conf says otherwise (tests) */
    unsigned through_timeout_ms;   /* a write-through request gives up after the
                                      uploads make no progress for this long */
    struct wb_rec *inflight;   /* the record the uploader is sending: not freed,
                                  not withdrawn under it */
    uint64_t progress;         /* uploads and parts ended well (__atomic: the
                                  part streams add to it without mu) */
    uint64_t upload_bps;       /* upload bandwidth cap, bytes/s; 0: none */
    pthread_mutex_t pace_mu;   /* pace_next and the rate below: */
    struct timespec pace_next; /* CLOCK_MONOTONIC: when the cap lets the next
                                  chunk of any upload stream go */
    uint64_t rate_bytes[WB_RATE_SLOTS];   /* bytes the upload streams sent in ... */
    int64_t rate_sec[WB_RATE_SLOTS];      /* ... this second of CLOCK_MONOTONIC */
    uint64_t dirty_bytes, dirty_objects;
    uint64_t staged_bytes;     /* parts of open uploads: on the disk, not yet
                                  anybody's object, so not dirty either */
    uint64_t uploaded_bytes, uploaded_objects, failures;
    uint64_t upload_copied;    /* bytes uploads read through a buffer (a cold tier
                                  that does not send from the staged file; __atomic) */
    uint64_t upload_hashed;    /* bytes uploads hashed from the staged files (parts
                                  checked after a mismatch; __atomic) */
    bool stage_direct;         /* staged bodies are written with O_DIRECT: uploads read
                                  them with O_DIRECT too (send_range) */
    bool cold_etags_opaque;    /* the cold tier's part ETags proved not to be MD5s:
                                  parts are hashed before they go (__atomic) */
    char last_error[256];
    bool paused;
    bool stopping;             /* written under mu, read without it by the
                                  streams that copy bytes (__atomic) */
    bool kicked;               /* a flush asks for a retry now */
    pthread_t uploader;
    bool uploader_up;
    pthread_t lookahead;       /* sends parts of the records behind the head */
    bool lookahead_up;
    pthread_mutex_t cond_mu;   /* conditional writes: check and commit as one */

    /* the journal (wb_journal.c) */
    int jfd;
    int dirfd;                 /* DIR, for renames of the journal */
    uint64_t jlen;             /* bytes written: changed under mu (in a compaction
                                  under sync_mu too), read by wb_journal_sync under
                                  sync_mu alone: __atomic loads and stores */
    uint64_t compact_at;       /* journal bytes: rewritten when the queue empties */
    uint64_t jreserved;        /* journal bytes preallocated (under mu) */
    bool jprealloc;            /* the file system can preallocate (fallocate) */
    pthread_mutex_t sync_mu;   /* one fdatasync at a time */
    uint64_t synced;           /* jlen covered by the last fdatasync (under sync_mu) */
};

static inline struct wb *wb_of(struct backend *b)
{
    return (struct wb *)b;
}

extern const struct backend_ops wb_ops;

/* wb.c */
/* Does `bucket` have keys written back (pending writes may be there)? */
bool wb_bucket_is_wb(const struct wb *w, const char *bucket);
/* Is `key` of `bucket` written back (its writes staged and uploaded)? */
bool wb_key_is_wb(const struct wb *w, const char *bucket, const char *key);
/* Are some keys of this write-back bucket written through (its uploads
 * then live in both tiers)? */
bool wb_bucket_is_mixed(const struct wb *w, const char *bucket);
void wb_vid_name(uint64_t vid, char out[WB_VID_LEN + 1]);
/* The upload id a client gets: the version's name, then the staging id. */
void wb_upload_id(const struct wb_mpu *m, char out[BACKEND_UPLOAD_ID_MAX]);
/* Frees m, taking its parts' bytes off w->staged_bytes. Under mu (or
 * before the threads start). */
void wb_mpu_free(struct wb *w, struct wb_mpu *m);
/* The latest pending record of (bucket, key), or NULL. Under mu. */
struct wb_rec *wb_find_locked(struct wb *w, const char *bucket, const char *key);
/* Queues an acknowledged record (journaled already) and makes it the key's
 * latest (a through record: only queues it). Takes r. Under mu. */
void wb_enqueue_locked(struct wb *w, struct wb_rec *r);
/* Replay: wb_queue_locked queues a record without looking at its key (a
 * later DONE may take it out again: a write-through request that gave up);
 * wb_index_queue_locked then indexes the survivors in order, so only they
 * supersede. Under mu. */
void wb_queue_locked(struct wb *w, struct wb_rec *r);
void wb_index_queue_locked(struct wb *w);
/* Takes r out of the queue and, when it is its key's latest, out of the map
 * (the caller frees it). Under mu. */
void wb_dequeue_locked(struct wb *w, struct wb_rec *r);
void wb_rec_free(struct wb_rec *r);
/* Takes r out of the queue and the journal and removes its staged bytes;
 * a through record's request learns `fate` (and frees r), any other record
 * is freed. Under mu, unlocked inside. */
void wb_retire_locked(struct wb *w, struct wb_rec *r, enum wb_fate fate);

/* Streams bytes [first, first+len) of src into put p; the bytes' MD5 (hex)
 * into md5_hex. With up (an upload to the cold tier; NULL for a copy) each
 * chunk waits for the bandwidth cap, and the copy stops with
 * BACKEND_UNAVAILABLE when the decorator is closing. */
enum backend_status wb_stream_into(struct backend_obj *src, uint64_t first, uint64_t len,
                                   struct backend_put *p, char md5_hex[33], struct wb *up);

/* wb_list.c */
enum backend_status wb_list_objects(struct wb *w, const char *bucket,
                                    const struct backend_list_req *req,
                                    struct backend_list_page *out);
enum backend_status wb_list_uploads(struct wb *w, const char *bucket,
                                    const struct backend_uploads_req *req,
                                    struct backend_uploads_page *out);
/* The uploads of a bucket with keys of both modes: those staged here and
 * the cold tier's, merged in S3's order (a key lives in one of the two). */
enum backend_status wb_list_uploads_mixed(struct wb *w, const char *bucket,
                                          const struct backend_uploads_req *req,
                                          struct backend_uploads_page *out);

/* wb_journal.c. Replay reads the journal this many bytes at a time (1 MiB;
 * tests make it small to cut records at window ends). */
extern size_t wb_replay_window;
/* Records are appended under mu; wb_journal_sync (not under
 * mu) makes everything appended up to `upto` durable, one fdatasync for
 * every writer waiting at once. */
int wb_journal_open(struct wb *w, const char *dir, char *err, size_t err_len);
void wb_journal_close(struct wb *w);
int wb_journal_put_locked(struct wb *w, const struct wb_rec *r, uint64_t *end);
int wb_journal_done_locked(struct wb *w, uint64_t seq, uint64_t *end);
int wb_journal_mpu_locked(struct wb *w, const struct wb_mpu *m, bool open, uint64_t *end);
/* Records the cold tier's upload id of record r (r->cold_upload). Not
 * synced: lost, the upload is started again (the old one is an orphan the
 * cold tier's lifecycle rule removes). */
int wb_journal_cold_upload_locked(struct wb *w, const struct wb_rec *r);
int wb_journal_sync(struct wb *w, uint64_t upto);
/* Rewrites the journal with only what is still live (the queue and the open
 * uploads): called at open and when the queue empties. Under mu. */
int wb_journal_compact_locked(struct wb *w);

/* wb_upload.c */
/* Waits until the bandwidth cap lets n more bytes go (at once without a
 * cap); false when the decorator is closing. Any upload thread. */
/* Counts n bytes an upload stream sent; the upload rate: bytes per second
 * over the last WB_RATE_WINDOW full seconds. Any thread. */
void wb_rate_add(struct wb *w, uint64_t n);
uint64_t wb_rate_bps(struct wb *w);
bool wb_pace(struct wb *w, size_t n);
/* Lowers the calling upload thread's CPU and I/O priority below the
 * request threads': reads and ingestion come first. */
void wb_upload_thread_priority(void);
int wb_uploader_start(struct wb *w);
void wb_uploader_stop(struct wb *w);
/* Waits until every record of bucket (under prefix, NULL: all) with seq <=
 * barrier is uploaded, or timeout_ms passed (0: no limit). true when done. */
bool wb_wait_uploaded(struct wb *w, const char *bucket, const char *prefix,
                      uint64_t barrier, unsigned timeout_ms);

#endif
