/* backend/posix_int.h - internals of the posix store shared by its files
 * (posix*.c and meta.c; posix.c's opening comment maps them) and by its unit
 * tests: the store's structs, the key <-> path mapping, the metadata xattr
 * encoding, the bounded heap used by listings, the "open beneath the root"
 * helpers and the verbs. Nothing outside backend/ and
 * tests/unit/test_backend_*.c includes this. */
#ifndef SHARDGATE_BACKEND_POSIX_INT_H
#define SHARDGATE_BACKEND_POSIX_INT_H

#include "backend.h"
#include "backend_int.h"
#include "checksum.h"
#include "s3name.h"   /* sg_bucket_name_valid: which directories are buckets */

#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#define POSIX_META_XATTR "user.shardgate.meta"
/* The part sizes of an object made by CompleteMultipartUpload (parts.c). */
#define POSIX_PARTS_XATTR "user.shardgate.parts"
/* Cap of that xattr: beside the metadata it must fit what ext4 keeps per
 * file (about 4 KiB in all); a longer list is not kept (logged). */
#define POSIX_PARTS_MAX  2048u
#define POSIX_RESERVED   ".sg~"        /* names starting so are never keys */
#define POSIX_EMPTY_SEG  ".sg~e"       /* stores an empty key segment */
#define POSIX_TMP_PREFIX ".sg~tmp."    /* temp files of writes in progress */
/* In directory D (the key "k" mapped to D, because other keys continue
 * "k/..."): the object whose key is "k" itself (posix_nest.c). */
#define POSIX_SELF       ".sg~o"
/* ROOT/<bucket>/.sg~tmp/ holds the temp files of the bucket's object writes,
 * so that the reclaim at open finds a dead writer's leftovers by looking in
 * one directory per bucket instead of walking the whole tree. */
#define POSIX_TMP_DIR    ".sg~tmp"
#define POSIX_STATE_DIR  ".shardgate"  /* ROOT/.shardgate: never a bucket name */
#define POSIX_KEY_MAX    1024u
#define POSIX_SEG_MAX    255u
/* Worst case of the mapping: 1024 '/' give 1025 empty segments of 5 bytes
 * plus 1024 separators; 8 KiB holds any mapped key. */
#define POSIX_PATH_MAX   8192u
/* Cap of the encoded metadata xattr: Linux's largest xattr value. User
 * metadata is capped at 2 KiB by the gateway (as S3 does), but a tag set
 * (10 tags of up to 128 + 256 characters, percent-encoded) can be several
 * KiB more; what the file system itself keeps is its own limit (ext4: one
 * 4 KiB block for all of a file's xattrs; see posix_tagging.c). */
#define POSIX_META_MAX   65535u
/* Reads of the metadata xattr try this much on the stack first. */
#define POSIX_META_INLINE 4096u
#define POSIX_COPY_BUF   (1024u * 1024u)
#define POSIX_MAX_PUT    (5ull * 1024 * 1024 * 1024)      /* single PUT / part */
#define POSIX_MAX_OBJECT (5ull * 1024 * 1024 * 1024 * 1024) /* 5 TiB */
#define POSIX_UPLOAD_ID_LEN 32u

struct sg_dirlock;
struct posix_expiry;
struct posix_sweeper;

#define POSIX_KEY_LOCKS 64u

/* ---- writes through io_uring (posix_aw.c) ---- */

/* POSIX_AW_OFF: write() (the cold store, where io_uring is blocked);
 * URING: io_uring writes through the page cache; DIRECT: io_uring writes
 * with O_DIRECT where the file system takes it. */
enum posix_aw_mode { POSIX_AW_OFF, POSIX_AW_URING, POSIX_AW_DIRECT };
/* How bytes were written, for posix_aw_stats. */
enum posix_aw_how { POSIX_AW_HOW_DIRECT, POSIX_AW_HOW_URING, POSIX_AW_HOW_WRITE };
struct posix_aw;
/* A writer of fd from file offset off on; NULL when none can be had (mode
 * OFF, io_uring not working, MAX_WRITERS busy, no memory): the caller
 * writes as before. */
struct posix_aw *posix_aw_start(int fd, uint64_t off, enum posix_aw_mode mode);
/* Takes len more bytes (copied: buf is free on return). 0, or the errno of
 * a write that failed (then every later call returns it). */
int posix_aw_write(struct posix_aw *w, const void *buf, size_t len);
/* Writes what it holds and waits for every write; fd without O_DIRECT
 * again. 0 or the errno. Before the commit's fdatasync. */
int posix_aw_finish(struct posix_aw *w);
/* Waits for the writes in flight, then frees w (NULL: nothing). */
void posix_aw_free(struct posix_aw *w);
/* Bytes written by each enum posix_aw_how since start, all writers (and
 * the plain writes of stores that stage, booked by posix_put_write). */
void posix_aw_stats(uint64_t out[3]);
void posix_aw_book(enum posix_aw_how how, uint64_t bytes);

struct posix_store {
    struct backend base;     /* first: ops of the posix store */
    int rootfd;     /* ROOT, O_DIRECTORY; read-only after open */
    int mpufd;      /* STATE/mpu (STATE: the state directory, ROOT/.shardgate by
                       default); -1 when the store is read-only */
    bool read_only; /* every write answers BACKEND_READ_ONLY; set at open only */
    struct sg_dirlock *lock;        /* STATE's lock; NULL when none was taken */
    struct sg_dirlock *tree_lock;   /* ROOT's own, when writable: another gateway
                                       with another STATE must not write (or
                                       reclaim) the same tree; NULL: none */
    struct posix_expiry *expiry;    /* the thread aborting old uploads, or NULL */
    struct posix_sweeper *sweeper;  /* the thread removing finished uploads' parts
                                       (posix_sweep.c), or NULL */
    /* Commit locks, striped by hash of (bucket, key path): every commit and
     * delete of an object holds its key's lock around the rename or unlink,
     * so a conditional write's check and its rename are one step for every
     * writer of this store (posix_cond.c). */
    pthread_mutex_t key_locks[POSIX_KEY_LOCKS];
    enum posix_aw_mode aw_mode;     /* how large puts write (posix_aw.c) */
};

struct posix_put {
    struct backend_put base; /* first */
    struct posix_store *b;
    int bucketfd;            /* objects: the bucket, to prune empty parents */
    char *path;              /* objects: the mapped key path in the bucket */
    char *bucket;            /* objects: the bucket's name (key locks of parents) */
    int dirfd;               /* directory receiving the file */
    int tmpdirfd;            /* directory holding the temp file: the bucket's
                                .sg~tmp/, or dirfd itself (parts; a key whose
                                directory is on another file system) */
    int fd;                  /* the temp file */
    char tmp[32];            /* its name in tmpdirfd */
    char *leaf;              /* final name in dirfd */
    uint64_t size;
    uint64_t max_size;
    unsigned lock_slot;      /* objects: key_locks[] index of (bucket, path) */
    bool is_part;            /* multipart part: no key-conflict checks */
    unsigned part_no;        /* parts: the part's number */
    bool slab_tried;         /* parts: posix_slab_attach ran (first write) */
    int slab_fd;             /* parts written into the upload's slab, else -1 */
    uint64_t slab_off;       /* where the part's bytes go in the slab */
    uint64_t slab_cap;       /* the slab's slot size: at most this many */
    struct posix_aw *aw;     /* its bytes go through io_uring from here on, or NULL */
    bool aw_tried;           /* posix_aw_start was asked */
    bool failed;             /* a write failed: commit refuses */
    enum backend_status fail_st;
};

struct posix_obj {
    struct backend_obj base; /* first */
    int fd;
    int dfd;                 /* the same file opened O_DIRECT, for reads of whole
                                aligned blocks into aligned buffers (a store that
                                writes around the page cache reads around it too:
                                posix_obj_read); POSIX_DFD_LATER until the first
                                such read opens it, POSIX_DFD_NONE: buffered only.
                                __atomic: a stream's reads may come from several
                                threads */
    bool dio_off;            /* an O_DIRECT read was refused: buffered from now on
                                (dfd stays open until the close; __atomic) */
};
#define POSIX_DFD_LATER (-1)
#define POSIX_DFD_NONE (-2)
#define POSIX_DIO_ALIGN 4096u        /* offsets, lengths and buffers of O_DIRECT reads */
#define POSIX_DIO_MIN (64u * 1024)   /* smaller reads stay buffered */

/* ---- pure helpers (meta.c) ---- */

/* Maps key to a path relative to the bucket dir ("dir/" -> "dir/.sg~e").
 * BACKEND_OK, BACKEND_BAD_KEY or BACKEND_KEY_TOO_LONG. `out` must hold
 * POSIX_PATH_MAX bytes. */
enum backend_status posix_key_to_path(const char *key, char *out, size_t outsz);

/* Key spelling of a directory entry: "x" for a file x, "d/" for a directory
 * d, "" (file) or "/" (directory) for ".sg~e". Returns the length, or -1 when
 * the entry is hidden (other reserved names) or does not fit. */
int posix_name_to_spelling(const char *name, bool is_dir, char *out, size_t outsz);
/* The reverse: the entry name of a spelling (drops the '/' of directories). */
void posix_spelling_to_name(const char *spell, char *out, size_t outsz);

/* Length of the common prefix `key` rolls up into under `delim` (searching
 * from prefix_len), or 0 when the key does not roll up. `key_len` bytes. */
size_t posix_rollup(const char *key, size_t key_len, size_t prefix_len, const char *delim);

/* Metadata xattr: "SGM1", u8 etag_len, etag, u16 n_hdrs, then per header
 * u16 name_len, name, u16 value_len, value (little endian). */
enum backend_status posix_meta_encode(const char *etag, const struct obj_hdr *hdrs,
                                      size_t n_hdrs, unsigned char *buf, size_t cap,
                                      size_t *len);
/* Fills m->etag and m->hdrs (appends). 0, or -1 when malformed/no memory. */
int posix_meta_decode(const unsigned char *buf, size_t len, struct obj_meta *m);

/* Stable ETag of a file without our xattr: md5(dev,ino,size,mtime)-1. */
void posix_pseudo_etag(const struct stat *st, char out[72]);
/* 32 hex (any case) -> 16 bytes. 0 or -1. */
int posix_hex_to_md5(const char *hex, unsigned char md5[16]);
void posix_md5_to_hex(const unsigned char md5[16], char out[33]);
/* Case-insensitive compare of two bare ETags. */
bool posix_etag_equal(const char *a, const char *b);

/* A bounded max-heap that keeps the `cap` smallest elements pushed. */
struct posix_heap {
    void **v;
    size_t n, cap;
    int (*cmp)(const void *a, const void *b);
    void (*free_el)(void *el);
};
int posix_heap_init(struct posix_heap *h, size_t cap, int (*cmp)(const void *, const void *),
                    void (*free_el)(void *));
/* Takes el (frees it when it is not among the smallest). */
void posix_heap_push(struct posix_heap *h, void *el);
/* Sorts the kept elements ascending in h->v[0..n). */
void posix_heap_sort(struct posix_heap *h);
/* Frees the elements (not the array). */
void posix_heap_clear(struct posix_heap *h);
void posix_heap_free(struct posix_heap *h);

/* ---- filesystem helpers (posix_fs.c) ---- */

/* Test hook: non-zero makes posix_open_beneath use the component walk as if
 * openat2(2) were missing. */
extern int posix_force_walk;

/* Opens `path` (relative, '/'-separated) beneath dirfd, never following a
 * symlink or leaving dirfd. Returns an fd or -1 with errno (ELOOP/EXDEV for
 * a symlink on the way). */
int posix_open_beneath(int dirfd, const char *path, int flags, mode_t mode);
enum backend_status posix_errno_status(int err);
/* The status of a failed write, creation or rename: NO_SPACE (ENOSPC,
 * EDQUOT), READ_ONLY (EROFS, EACCES, EPERM: the process may not write
 * there), else IO. */
enum backend_status posix_write_errno_status(int err);
/* A directory stream of dirfd from its first entry, on an open file
 * description of its own: closedir() leaves dirfd open, and no other reader
 * of dirfd (ROOT's is shared by every thread) moves its position, as one
 * through a dup would. Returns new (closedir), or NULL with errno. */
DIR *posix_dir_stream(int dirfd);
/* d_type, or an fstatat when the filesystem does not fill it. */
unsigned char posix_entry_type(int dirfd, const struct dirent *de);
/* Early-exit walk: does the tree under dirfd hold at least one object?
 * Returns 1, 0, or -1 on error. Borrows dirfd. */
int posix_dir_has_object(int dirfd);

/* ---- buckets, reads, writes (posix_bucket.c, posix_read.c, posix_write.c) ---- */

/* Opens ROOT/<bucket> (validating the name). */
enum backend_status posix_bucket_open(struct posix_store *b, const char *bucket, int *fd);
/* The first steps of a verb on a key: refuses a verb that writes on a
 * read-only store (READ_ONLY), maps key to its path in the bucket (BAD_KEY,
 * KEY_TOO_LONG), then opens the bucket (*fd, which the caller closes;
 * NO_BUCKET, DENIED, ...). */
enum backend_status posix_key_bucket_open(struct posix_store *b, const char *bucket,
                                          const char *key, bool write,
                                          char path[POSIX_PATH_MAX], int *fd);

/* Encodes etag and hdrs as the metadata xattr and sets it on fd (replacing
 * any older one in one step). BACKEND_OK with *stored false when the file
 * system has no user xattrs (logged; the object then has no metadata);
 * META_TOO_LARGE when it is over POSIX_META_MAX or more than the file system
 * keeps with one file; NO_SPACE, READ_ONLY, IO, NOMEM. */
enum backend_status posix_meta_set(int fd, const char *etag, const struct obj_hdr *hdrs,
                                   size_t n_hdrs, bool *stored);
/* The value of xattr `name` of fd, whatever its size: *out is new (free();
 * one byte longer than the value, for a NUL). Its length, or -1 with errno
 * (ENODATA: none). */
ssize_t posix_xattr_get(int fd, const char *name, unsigned char **out);
/* The headers a copy stores: those of m (the source's, or a REPLACE set)
 * without any tag set, then `tagging` (an x-amz-tagging value; "" for
 * none), or with tagging NULL the source's (src) tag set. New in *out
 * (caller clears). 0 or -1 (no memory). */
int posix_meta_tagged(const struct obj_meta *m, const struct obj_meta *src,
                      const char *tagging, struct obj_meta *out);

/* ---- part boundaries (parts.c) ---- */

/* Encodes the sizes of n parts (run-length, text) into buf: its length, or
 * 0 when n is 0 or over 10000 or it does not fit in cap. */
size_t posix_parts_encode(const uint64_t *sizes, size_t n, char *buf, size_t cap);
/* Finds part_no in an encoded list: 0 with out->first, size, parts_count
 * and total set; 1 when part_no is beyond the parts (parts_count and total
 * set); -1 when buf is malformed. out->etag is not touched. */
int posix_parts_locate(const char *buf, size_t len, unsigned part_no,
                       struct backend_part_range *out);
enum backend_status posix_object_part(struct posix_store *b, const char *bucket,
                                      const char *key, unsigned part_no,
                                      struct backend_part_range *out);

/* ---- completed uploads (posix_mpu_done.c) ---- */

/* How long a completed upload is remembered: a day, as AWS does for a while. */
#define POSIX_DONE_TTL_S (24 * 3600)
/* Records that upload `id` of (bucket, key) completed with these parts and
 * ETag; a failure is logged, never fatal. */
void posix_mpu_done_record(struct posix_store *b, const char *bucket, const char *key,
                           const char *id, const struct backend_part *parts, size_t n,
                           const char *etag);
/* BACKEND_OK with out->etag (out may be NULL) when upload `id` of (bucket,
 * key) completed with the same parts list; else BACKEND_NO_UPLOAD. */
enum backend_status posix_mpu_done_lookup(struct posix_store *b, const char *bucket,
                                          const char *key, const char *id,
                                          const struct backend_part *parts, size_t n,
                                          struct obj_meta *out);
/* Removes the records older than POSIX_DONE_TTL_S at `now`: how many. */
uint64_t posix_mpu_done_expire(struct posix_store *b, time_t now);

/* Fills meta (size, mtime, etag, hdrs) from an open regular file. */
enum backend_status posix_meta_from_fd(int fd, const struct stat *st, struct obj_meta *meta);
/* Opens an object of a bucket for reading: regular file check included. */
enum backend_status posix_object_fd(struct posix_store *b, const char *bucket, const char *key,
                                    int *fd, struct stat *st);

/* Starts a temp file in tmpdirfd (or in dirfd when tmpdirfd is -1) that
 * commit renames to leaf in dirfd. Takes both descriptors. */
enum backend_status posix_put_new(struct posix_store *b, int dirfd, int tmpdirfd,
                                  const char *leaf, bool is_part, uint64_t max_size,
                                  struct posix_put **out);
/* Opens (creating it) the bucket's temp directory, when it is on the same
 * file system as dirfd (a rename must not cross one); else -1. */
int posix_tmpdir_open(int bucketfd, int dirfd);
/* Opens (creating directories) the parent directory of a mapped key path
 * of bucket; a key file in the way moves into a directory of its name
 * (posix_nest_file). *leaf points into path. KEY_CONFLICT/DENIED/... */
enum backend_status posix_mkparents(struct posix_store *b, const char *bucket, int bucketfd,
                                    const char *path, int *dirfd, const char **leaf);
/* ---- keys that are also prefixes (posix_nest.c) ---- */

/* Where the object `leaf` of dirfd is: the file `leaf`, or, when `leaf` is a
 * directory (keys below it exist), that directory's POSIX_SELF. *tfd is
 * dirfd itself or a new descriptor the caller closes (tfd != dirfd);
 * NO_KEY when the directory vanished while looked at (look again). */
enum backend_status posix_nest_target(int dirfd, const char *leaf, int *tfd,
                                      const char **tleaf);
/* The file `comp` of cur holds the object of key path[0..plen) and a key
 * below it is being written: the file becomes the POSIX_SELF of a new
 * directory `comp`, under the key's commit lock, in one atomic exchange. OK
 * (also when `comp` is no longer a file: look again), KEY_CONFLICT when the
 * file system cannot exchange names, or an I/O status. */
enum backend_status posix_nest_file(struct posix_store *b, int bucketfd, unsigned slot,
                                    int cur, const char *comp);

/* Removes the empty directories above mapped path `path` in the bucket,
 * deepest first, stopping at the first one that is not empty. */
void posix_rmdir_parents(int bucketfd, const char *path);
/* Copies len bytes of src at off into the put, computing their MD5 (and,
 * when ck is not NULL, feeding them to ck). */
enum backend_status posix_copy_into(struct posix_put *p, int srcfd, uint64_t off,
                                    uint64_t len, unsigned char md5[16], struct sg_ck *ck);
/* Random URL-safe characters. 0 or -1. */
int posix_random_chars(char *out, size_t n);

/* ---- multipart uploads (posix_mpu.c) ---- */

/* 1 when the bucket has an unfinished upload, 0 when not, -1 on error. */
int posix_mpu_bucket_busy(struct posix_store *b, const char *bucket);
/* Removes STATE/mpu/<bucket> when it holds nothing. */
void posix_mpu_bucket_forget(struct posix_store *b, const char *bucket);
/* Is `id` the name of an upload directory (POSIX_UPLOAD_ID_LEN URL-safe
 * characters)? */
bool posix_upload_id_valid(const char *id);
/* The initiation time recorded in the info file of the upload directory
 * ufd: 0, or -1 when the info file is missing or malformed. */
int posix_mpu_upload_initiated(int ufd, struct timespec *out);
/* Removes upload directory `id` of parentfd (its files, then itself);
 * returns the bytes its files held. */
uint64_t posix_mpu_upload_remove(int parentfd, const char *id);

/* An upload's info file, decoded. */
struct posix_upload_info {
    char key[POSIX_KEY_MAX + 1];
    struct timespec initiated;
    struct obj_meta meta;     /* hdrs only */
};
/* Opens upload `id` of (bucket, key) and checks it belongs to them: *ufd
 * (the caller closes it) and, when ui is not NULL, its info (the caller
 * clears ui->meta). NO_BUCKET, NO_UPLOAD, ... */
enum backend_status posix_mpu_upload_open(struct posix_store *b, const char *bucket,
                                          const char *key, const char *id, int *ufd,
                                          struct posix_upload_info *ui);

/* ---- the parts of an upload (posix_mpu_part.c) ---- */

/* Where a part's bytes are: its own file (off 0), or a range of the upload's
 * slab (posix_mpu_slab.c). */
struct posix_part_src {
    int fd;
    uint64_t off;
    bool in_slab;
};

/* Opens part `no` of the upload directory ufd and reads its meta, m->size
 * its length (the caller closes src->fd and clears m). INVALID_PART when it
 * is missing. */
enum backend_status posix_mpu_part_open(int ufd, unsigned no, struct posix_part_src *src,
                                        struct obj_meta *m);

/* ---- the slab: parts written where they lie in the object
 * (posix_mpu_slab.c) ---- */

/* At a part's first write: puts it into the upload's slab when its length
 * was announced (backend_put_set_size) and its slot is free; else nothing
 * changes and the part is its own file. */
void posix_slab_attach(struct posix_put *p);
/* Appends to a part in the slab; TOO_LARGE past the slot. A slab the file
 * system cannot grow that far (EFBIG) lets the part go: its bytes so far
 * move to its own file, the rest go there, and p->slab_fd becomes -1. */
enum backend_status posix_slab_write(struct posix_put *p, const void *buf, size_t len);
/* At a slab part's commit, before its record is committed: the slab's
 * bytes made durable, the range kept on the record (p->fd). */
enum backend_status posix_slab_part_commit(struct posix_put *p);
/* For a part record open in src->fd: when its bytes are in the slab,
 * src->fd becomes the slab (the record closed), src->off their offset and
 * *size their length; otherwise unchanged. */
enum backend_status posix_slab_part_locate(int ufd, struct posix_part_src *src, uint64_t *size);
/* Complete: the upload's slab, locked and sealed against further part
 * writes (the caller closes it), and its slot size; -1 when there is none
 * or a part is being written into it. */
int posix_slab_seal(int ufd, uint64_t *slot);
/* Complete: when the sealed slab is `total` bytes long, makes it the put's
 * file (the parts are checked by the caller to lie end to end in it) and
 * true; false leaves the put as it was, for a copy. */
bool posix_slab_adopt(struct posix_put *p, int ufd, int slabfd, uint64_t total);
/* The additional checksum a part was stored with (its x-amz-checksum-*
 * header, which UploadPart puts in the part's metadata), or "" for both. */
void posix_mpu_part_checksum(const struct obj_meta *m, char name[32], char value[96]);

/* ---- opening, start-up reclaim and upload expiry (posix_state.c,
 * posix_reclaim.c) ---- */

/* What the reclaim at open removed. */
struct posix_reclaim_stats {
    uint64_t files;     /* temp files of interrupted writes */
    uint64_t bytes;     /* bytes they held */
    uint64_t uploads;   /* upload directories a crashed create left without info */
};
/* Removes the temp files of writers that died: ROOT/<bucket>/.sg~tmp/ of
 * each bucket directory, and every upload directory of STATE/mpu (its
 * .sg~tmp.* files; the whole directory when it has no info file). Bounded
 * by the number of buckets, uploads and temp files, never by the number of
 * objects. Only while no writer runs: at open, before the store is shared. */
void posix_reclaim_tmp(struct posix_store *b, struct posix_reclaim_stats *st);
/* Aborts the uploads initiated more than max_age_s seconds before `now`
 * (CLOCK_REALTIME seconds); returns how many, *bytes what they held. */
uint64_t posix_mpu_expire(struct posix_store *b, unsigned max_age_s, time_t now,
                          uint64_t *bytes);
/* Starts the thread that runs posix_mpu_expire at once and then every
 * max_age_s / 4 seconds (1 s to 1 h); NULL when it cannot start (logged). */
struct posix_expiry *posix_expiry_start(struct posix_store *b, unsigned max_age_s);
/* Stops and joins the thread (NULL is fine). */
void posix_expiry_stop(struct posix_expiry *e);

/* ---- removing finished uploads (posix_sweep.c) ---- */

/* Starts the thread that unlinks the parts of completed and aborted
 * uploads, beginning with what a crash left; NULL when it cannot start
 * (logged: discards then remove the parts themselves). */
struct posix_sweeper *posix_sweeper_start(struct posix_store *b);
/* Stops and joins it (NULL is fine); what it did not reach stays in
 * STATE/mpu/.sg~gone for the next open. */
void posix_sweeper_stop(struct posix_sweeper *s);
/* True once nothing is left to sweep, false after timeout_ms (tests). */
bool posix_sweeper_wait_idle(struct posix_sweeper *s, unsigned timeout_ms);
/* The upload (bucket, id) is gone when this returns, durably: renamed into
 * STATE/mpu/.sg~gone for the sweeper, or removed here without one. */
void posix_mpu_upload_discard(struct posix_store *b, const char *bucket, const char *id);

/* ---- the verbs (posix_state.c, posix_bucket.c, posix_read.c, posix_write.c,
 * posix_list.c, posix_mpu*.c) ----
 * Same contracts as their backend_* counterparts in backend.h; posix.c's ops
 * table reaches them through small adapters that convert the base pointers. */
void posix_close(struct posix_store *b);
enum backend_status posix_bucket_list(struct posix_store *b, backend_bucket_cb cb, void *arg);
enum backend_status posix_bucket_create(struct posix_store *b, const char *bucket);
enum backend_status posix_bucket_head(struct posix_store *b, const char *bucket);
enum backend_status posix_bucket_delete(struct posix_store *b, const char *bucket);
enum backend_status posix_object_head(struct posix_store *b, const char *bucket,
                                      const char *key, struct obj_meta *meta);
enum backend_status posix_object_open(struct posix_store *b, const char *bucket,
                                      const char *key, struct obj_meta *meta,
                                      struct posix_obj **out);
int posix_obj_fd(const struct posix_obj *o);
enum backend_status posix_obj_read(struct posix_obj *o, uint64_t off, void *buf,
                                   size_t len, size_t *got);
void posix_obj_close(struct posix_obj *o);
enum backend_status posix_put_begin(struct posix_store *b, const char *bucket, const char *key,
                                    struct posix_put **out);
enum backend_status posix_put_write(struct posix_put *p, const void *buf, size_t len);
enum backend_status posix_put_commit(struct posix_put *p, const struct obj_meta *meta,
                                     struct obj_meta *out);
void posix_put_abort(struct posix_put *p);
enum backend_status posix_object_copy(struct posix_store *b, const char *src_bucket,
                                      const char *src_key, const char *dst_bucket,
                                      const char *dst_key, const struct obj_meta *meta,
                                      const char *tagging, const struct backend_cond *cond,
                                      struct obj_meta *out);
enum backend_status posix_object_delete(struct posix_store *b, const char *bucket,
                                        const char *key);
enum backend_status posix_list_objects(struct posix_store *b, const char *bucket,
                                       const struct backend_list_req *req,
                                       struct backend_list_page *out);
enum backend_status posix_mpu_create(struct posix_store *b, const char *bucket, const char *key,
                                     const struct obj_meta *meta,
                                     char upload_id[BACKEND_UPLOAD_ID_MAX]);
enum backend_status posix_mpu_part_begin(struct posix_store *b, const char *bucket,
                                         const char *key, const char *upload_id,
                                         unsigned part_no, struct posix_put **out);
enum backend_status posix_mpu_part_copy(struct posix_store *b, const char *bucket,
                                        const char *key, const char *upload_id,
                                        unsigned part_no, const struct backend_copy_src *src,
                                        struct obj_meta *out);
enum backend_status posix_mpu_complete(struct posix_store *b, const char *bucket,
                                       const char *key, const char *upload_id,
                                       const struct backend_part *parts, size_t n_parts,
                                       const struct obj_meta *meta,
                                       const struct backend_cond *cond, struct obj_meta *out);
enum backend_status posix_mpu_head(struct posix_store *b, const char *bucket, const char *key,
                                   const char *upload_id, struct obj_meta *meta);
enum backend_status posix_mpu_abort(struct posix_store *b, const char *bucket, const char *key,
                                    const char *upload_id);
enum backend_status posix_mpu_list_parts(struct posix_store *b, const char *bucket,
                                         const char *key, const char *upload_id,
                                         unsigned marker, unsigned max_parts,
                                         struct backend_parts_page *out);
enum backend_status posix_mpu_list_uploads(struct posix_store *b, const char *bucket,
                                           const struct backend_uploads_req *req,
                                           struct backend_uploads_page *out);
/* backend_tagging_get / _put (tags NULL: delete) (posix_tagging.c). */
enum backend_status posix_tagging_get(struct posix_store *b, const char *bucket,
                                      const char *key, struct obj_tags *out);
enum backend_status posix_tagging_put(struct posix_store *b, const char *bucket,
                                      const char *key, const struct obj_tags *tags);
/* backend_probe of the store (posix_probe.c): the root is there and readable. */
enum backend_status posix_probe(struct backend *base, unsigned timeout_ms, char *why,
                                size_t len);
/* ---- commit locks and write conditions (posix_cond.c) ---- */

/* Initialises / destroys b->key_locks (open / close). */
void posix_key_locks_init(struct posix_store *b);
void posix_key_locks_destroy(struct posix_store *b);
/* The key_locks[] slot of the object at mapped path `path` of `bucket`. */
unsigned posix_key_lock_slot(const char *bucket, const char *path);
void posix_key_lock(struct posix_store *b, unsigned slot);
void posix_key_unlock(struct posix_store *b, unsigned slot);
/* Does `c` hold for the object `leaf` of dirfd as it is now? BACKEND_OK,
 * BACKEND_PRECONDITION_FAILED, BACKEND_NO_KEY (If-Match, no object), or
 * BACKEND_IO. Only a regular file is an object. Atomic with a rename only
 * under the key's lock. */
enum backend_status posix_cond_check(int dirfd, const char *leaf, const struct backend_cond *c);

/* The posix ops table (posix.c): every object of the store points at it. */
extern const struct backend_ops posix_ops;

#endif
