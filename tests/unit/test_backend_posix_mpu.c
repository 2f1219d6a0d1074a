/* tests/unit/test_backend_posix_mpu.c - the posix store's multipart uploads:
 * the MD5-of-MD5s ETag, part checksums kept, listed and checked, Complete's
 * errors, UploadPartCopy with a range, ListParts and ListMultipartUploads
 * paging. Each test gets a fresh store (posix_fixture.h). */
#include "posix_fixture.h"

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>

/* ---- multipart ---- */

/* A part as the gateway writes it: its length announced first (the slab
 * takes it when its slot fits, posix_mpu_slab.c). */
static enum backend_status upload_part(const char *key, const char *id, unsigned no,
                                       const unsigned char *data, size_t len, char etag[72])
{
    struct backend_put *p;
    enum backend_status s = backend_mpu_part_begin(g_b, "bkt", key, id, no, &p);
    if (s != BACKEND_OK)
        return s;
    backend_put_set_size(p, len);
    s = backend_put_write(p, data, len);
    struct obj_meta m = { 0 };
    md5_hex(data, len, m.etag);
    struct obj_meta out;
    s = backend_put_commit(p, &m, &out);
    if (s == BACKEND_OK) {
        CU_ASSERT_STRING_EQUAL(out.etag, m.etag);
        CU_ASSERT_EQUAL(out.size, len);
    }
    obj_meta_clear(&out);
    if (etag)
        memcpy(etag, m.etag, 33);
    return s;
}

#define MIB (1024u * 1024u)

static void multipart_happy_path_has_md5_of_md5s_etag(void)
{
    size_t sz[3] = { 5 * MIB, 5 * MIB, 1 };
    unsigned char *data = malloc(10 * MIB + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    for (size_t i = 0; i < 10 * MIB + 1; i++)
        data[i] = (unsigned char)(i * 31 + (i >> 13));
    struct obj_meta hm = { 0 };
    obj_meta_add_hdr(&hm, "content-type", "application/x-tar");
    char id[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "shards/s-000.tar", &hm, id),
                          BACKEND_OK);
    obj_meta_clear(&hm);
    CU_ASSERT(strlen(id) >= 32);
    CU_ASSERT_EQUAL(strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                               "0123456789-_"), strlen(id));
    struct backend_part parts[3] = { { 0 } };   /* no checksums */
    size_t off = 0;
    /* upload out of order, and part 2 twice (the second replaces it) */
    unsigned order[4] = { 3, 2, 1, 2 };
    size_t offs[3] = { 0, 5 * MIB, 10 * MIB };
    (void)off;
    for (int i = 0; i < 4; i++) {
        unsigned no = order[i];
        parts[no - 1].part_no = no;
        CU_ASSERT_EQUAL(upload_part("shards/s-000.tar", id, no, data + offs[no - 1],
                                    sz[no - 1], parts[no - 1].etag), BACKEND_OK);
    }
    /* an extra part not listed in complete is discarded */
    CU_ASSERT_EQUAL(upload_part("shards/s-000.tar", id, 9, data, 10, NULL), BACKEND_OK);
    /* independent expected ETag */
    unsigned char cat[48];
    for (int i = 0; i < 3; i++) {
        unsigned int ml;
        EVP_Digest(data + offs[i], sz[i], cat + 16 * i, &ml, EVP_md5(), NULL);
    }
    char want[72], hex[33];
    md5_hex(cat, sizeof cat, hex);
    snprintf(want, sizeof want, "%s-3", hex);
    /* the gateway may pass upper-case ETags */
    for (char *c = parts[0].etag; *c; c++)
        if (*c >= 'a' && *c <= 'f')
            *c = (char)(*c - 'a' + 'A');
    struct obj_meta out;
    CU_ASSERT_EQUAL_FATAL(backend_mpu_complete(g_b, "bkt", "shards/s-000.tar", id, parts, 3,
                                               &out), BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(out.etag, want);
    CU_ASSERT_EQUAL(out.size, 10 * MIB + 1);
    obj_meta_clear(&out);
    struct obj_meta m;
    struct backend_obj *o;
    CU_ASSERT_EQUAL_FATAL(backend_object_open(g_b, "bkt", "shards/s-000.tar", &m, &o),
                          BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(m.etag, want);
    CU_ASSERT_EQUAL(m.size, 10 * MIB + 1);
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&m, "content-type"), "application/x-tar");
    unsigned char *back = malloc(10 * MIB + 1);
    size_t tot = 0, got;
    while (tot < 10 * MIB + 1 &&
           backend_obj_read(o, tot, back + tot, 10 * MIB + 1 - tot, &got) == BACKEND_OK &&
           got > 0)
        tot += got;
    CU_ASSERT_EQUAL(tot, 10 * MIB + 1);
    CU_ASSERT(memcmp(back, data, 10 * MIB + 1) == 0);
    free(back);
    backend_obj_close(o);
    obj_meta_clear(&m);
    /* the upload is gone */
    CU_ASSERT_EQUAL(backend_mpu_abort(g_b, "bkt", "shards/s-000.tar", id), BACKEND_NO_UPLOAD);
    struct backend_uploads_page up;
    struct backend_uploads_req all = { .max_uploads = 100 };
    CU_ASSERT_EQUAL(backend_mpu_list_uploads(g_b, "bkt", &all, &up), BACKEND_OK);
    CU_ASSERT_EQUAL(up.n_uploads, 0);
    backend_uploads_page_free(&up);
    CU_ASSERT_EQUAL(count_tmp_files(""), 0);
    free(data);
}

/* Complete copies the parts by several threads at once, each part to the
 * offset its predecessors give it: nine parts of different sizes (and
 * contents) come back as one object, byte for byte. */
static void many_parts_are_assembled_in_order(void)
{
    enum { N = 9 };
    size_t sz[N], total = 0;
    for (size_t i = 0; i < N; i++) {
        sz[i] = i + 1 < N ? 5 * MIB + i * 4099 : 12345;
        total += sz[i];
    }
    unsigned char *data = malloc(total), *back = malloc(total);
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    CU_ASSERT_PTR_NOT_NULL_FATAL(back);
    for (size_t i = 0; i < total; i++)
        data[i] = (unsigned char)(i * 131 + (i >> 11) + (i >> 20) * 7);
    char id[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "nine", NULL, id), BACKEND_OK);
    struct backend_part parts[N] = { { 0 } };
    size_t off = 0;
    for (size_t i = 0; i < N; i++) {
        parts[i].part_no = (unsigned)(2 * i + 1);   /* numbers need not be consecutive */
        CU_ASSERT_EQUAL(upload_part("nine", id, parts[i].part_no, data + off, sz[i],
                                    parts[i].etag), BACKEND_OK);
        off += sz[i];
    }
    struct obj_meta out;
    CU_ASSERT_EQUAL_FATAL(backend_mpu_complete(g_b, "bkt", "nine", id, parts, N, &out),
                          BACKEND_OK);
    CU_ASSERT_EQUAL(out.size, total);
    obj_meta_clear(&out);
    struct obj_meta m;
    struct backend_obj *o;
    CU_ASSERT_EQUAL_FATAL(backend_object_open(g_b, "bkt", "nine", &m, &o), BACKEND_OK);
    size_t tot = 0, got;
    while (tot < total && backend_obj_read(o, tot, back + tot, total - tot, &got) == BACKEND_OK &&
           got > 0)
        tot += got;
    CU_ASSERT_EQUAL(tot, total);
    CU_ASSERT(memcmp(back, data, total) == 0);
    backend_obj_close(o);
    obj_meta_clear(&m);
    CU_ASSERT_EQUAL(count_tmp_files(""), 0);
    free(back);
    free(data);
}

/* Entries of a directory under the store's root ("." and ".." not
 * counted), -1 when it does not exist. */
static int entries_of(const char *rel)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", g_root, rel);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return n;
}

#define GONE ".shardgate/mpu/.sg~gone"

/* Complete and Abort answer once the upload's directory is renamed into
 * .sg~gone; the sweeper thread unlinks the parts after. What a crash left
 * there is swept when the store opens again. */
static void finished_uploads_are_swept_in_the_background(void)
{
    unsigned char *data = malloc(5 * MIB + 10);
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    memset(data, 'p', 5 * MIB + 10);
    char done_id[BACKEND_UPLOAD_ID_MAX], gone_id[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "done", NULL, done_id), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "gone", NULL, gone_id), BACKEND_OK);
    struct backend_part parts[2] = { { .part_no = 1 }, { .part_no = 2 } };
    CU_ASSERT_EQUAL(upload_part("done", done_id, 1, data, 5 * MIB, parts[0].etag), BACKEND_OK);
    CU_ASSERT_EQUAL(upload_part("done", done_id, 2, data, 10, parts[1].etag), BACKEND_OK);
    CU_ASSERT_EQUAL(upload_part("gone", gone_id, 1, data, 100, NULL), BACKEND_OK);
    CU_ASSERT_EQUAL(entries_of(".shardgate/mpu/bkt"), 2);
    struct obj_meta out;
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "done", done_id, parts, 2, &out),
                    BACKEND_OK);
    obj_meta_clear(&out);
    CU_ASSERT_EQUAL(backend_mpu_abort(g_b, "bkt", "gone", gone_id), BACKEND_OK);
    /* gone from the bucket's uploads at once */
    CU_ASSERT_EQUAL(entries_of(".shardgate/mpu/bkt"), 0);
    CU_ASSERT_EQUAL(backend_mpu_abort(g_b, "bkt", "done", done_id), BACKEND_NO_UPLOAD);
    CU_ASSERT_EQUAL(backend_mpu_abort(g_b, "bkt", "gone", gone_id), BACKEND_NO_UPLOAD);
    struct posix_store *ps = (struct posix_store *)g_b;
    CU_ASSERT_PTR_NOT_NULL_FATAL(ps->sweeper);
    CU_ASSERT(posix_sweeper_wait_idle(ps->sweeper, 10000));
    CU_ASSERT_EQUAL(entries_of(GONE), 0);
    /* the object is whole */
    struct obj_meta m;
    CU_ASSERT_EQUAL(backend_object_head(g_b, "bkt", "done", &m), BACKEND_OK);
    CU_ASSERT_EQUAL(m.size, 5 * MIB + 10);
    obj_meta_clear(&m);

    /* a crash between the rename and the sweep: found at the next open */
    char dir[256], file[300];
    snprintf(dir, sizeof dir, "%s/" GONE "/bkt~left-by-a-crash", g_root);
    CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0700), 0);
    snprintf(file, sizeof file, "%s/p00001", dir);
    FILE *f = fopen(file, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("part", f);
    fclose(f);
    backend_close(g_b);
    struct backend_posix_conf cf = { .root = g_root };
    CU_ASSERT_EQUAL_FATAL(backend_posix_open(&cf, &g_b), BACKEND_OK);
    ps = (struct posix_store *)g_b;
    CU_ASSERT(posix_sweeper_wait_idle(ps->sweeper, 10000));
    CU_ASSERT_EQUAL(entries_of(GONE), 0);
    free(data);
}

/* The inode of a file under the store's root, 0 when there is none. */
static ino_t inode_of(const char *rel)
{
    char path[sizeof g_root + BACKEND_UPLOAD_ID_MAX + 80];
    snprintf(path, sizeof path, "%s/%s", g_root, rel);
    struct stat st;
    return stat(path, &st) == 0 ? st.st_ino : 0;
}

/* Reads object `key` of bkt whole and compares it with want. */
static void object_is(const char *key, const unsigned char *want, size_t len)
{
    struct obj_meta m;
    struct backend_obj *o;
    CU_ASSERT_EQUAL_FATAL(backend_object_open(g_b, "bkt", key, &m, &o), BACKEND_OK);
    CU_ASSERT_EQUAL(m.size, len);
    unsigned char *back = malloc(len + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(back);
    size_t tot = 0, got;
    while (tot < len && backend_obj_read(o, tot, back + tot, len - tot, &got) == BACKEND_OK &&
           got > 0)
        tot += got;
    CU_ASSERT_EQUAL(tot, len);
    CU_ASSERT(tot == len && memcmp(back, want, len) == 0);
    free(back);
    backend_obj_close(o);
    obj_meta_clear(&m);
}

/* Parts of one size (the last shorter), uploaded in any order with their
 * lengths announced, are written where they lie in the object: Complete
 * makes the upload's slab the object (the same inode: nothing copied), and
 * the ETag, the parts' sizes (ListParts, ?partNumber) and the bytes are as
 * with a copy. */
static void parts_of_one_size_become_the_object_without_a_copy(void)
{
    enum { N = 5 };
    size_t total = 4 * (5 * MIB) + 1000;
    unsigned char *data = malloc(total);
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    for (size_t i = 0; i < total; i++)
        data[i] = (unsigned char)(i * 7 + (i >> 12));
    char id[BACKEND_UPLOAD_ID_MAX], dir[BACKEND_UPLOAD_ID_MAX + 64], slab[sizeof dir + 8];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "ckpt/shard", NULL, id), BACKEND_OK);
    snprintf(dir, sizeof dir, ".shardgate/mpu/bkt/%s", id);
    snprintf(slab, sizeof slab, "%s/slab", dir);
    struct backend_part parts[N] = { { 0 } };
    unsigned order[N] = { 5, 3, 1, 2, 4 };   /* the short last part first: no slot of its size */
    for (size_t k = 0; k < N; k++) {
        unsigned no = order[k];
        size_t off = (no - 1) * (size_t)(5 * MIB), len = no < N ? 5 * MIB : 1000;
        parts[no - 1].part_no = no;
        CU_ASSERT_EQUAL(upload_part("ckpt/shard", id, no, data + off, len,
                                    parts[no - 1].etag), BACKEND_OK);
    }
    ino_t slab_ino = inode_of(slab);
    CU_ASSERT(slab_ino != 0);
    struct backend_parts_page pp;
    CU_ASSERT_EQUAL(backend_mpu_list_parts(g_b, "bkt", "ckpt/shard", id, 0, 100, &pp),
                    BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(pp.n_parts, N);
    for (size_t i = 0; i < N; i++) {
        CU_ASSERT_EQUAL(pp.parts[i].size, i + 1 < N ? 5 * MIB : 1000);
        CU_ASSERT_STRING_EQUAL(pp.parts[i].etag, parts[i].etag);
    }
    backend_parts_page_free(&pp);
    struct obj_meta out;
    CU_ASSERT_EQUAL_FATAL(backend_mpu_complete(g_b, "bkt", "ckpt/shard", id, parts, N, &out),
                          BACKEND_OK);
    CU_ASSERT_EQUAL(out.size, total);
    CU_ASSERT(strlen(out.etag) > 2 && strcmp(out.etag + strlen(out.etag) - 2, "-5") == 0);
    obj_meta_clear(&out);
    CU_ASSERT_EQUAL(inode_of("bkt/ckpt/shard"), slab_ino);   /* not a copy */
    object_is("ckpt/shard", data, total);
    struct backend_part_range pr;
    CU_ASSERT_EQUAL(backend_object_part(g_b, "bkt", "ckpt/shard", 5, &pr), BACKEND_OK);
    CU_ASSERT_EQUAL(pr.first, 4 * (uint64_t)(5 * MIB));
    CU_ASSERT_EQUAL(pr.size, 1000);
    CU_ASSERT_EQUAL(pr.parts_count, N);
    struct posix_store *ps = (struct posix_store *)g_b;
    CU_ASSERT(posix_sweeper_wait_idle(ps->sweeper, 10000));
    CU_ASSERT_EQUAL(entries_of(GONE), 0);
    object_is("ckpt/shard", data, total);   /* the sweep took the upload's name only */
    CU_ASSERT_EQUAL(count_tmp_files(""), 0);
    free(data);
}

/* What must not use the slab: a part number uploaded again goes to a file
 * of its own (the bytes the old record points at stay as they are), and a
 * Complete while a part is still being written into the slab copies. The
 * objects are right either way. */
static void parts_off_the_slab_are_copied(void)
{
    size_t total = 2 * (5 * MIB) + 10;
    unsigned char *data = malloc(total), *again = malloc(5 * MIB);
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    CU_ASSERT_PTR_NOT_NULL_FATAL(again);
    for (size_t i = 0; i < total; i++)
        data[i] = (unsigned char)(i * 13 + (i >> 10));
    memset(again, 'A', 5 * MIB);
    char id[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "redo", NULL, id), BACKEND_OK);
    struct backend_part parts[3] = { { .part_no = 1 }, { .part_no = 2 }, { .part_no = 3 } };
    for (unsigned no = 1; no <= 3; no++)
        CU_ASSERT_EQUAL(upload_part("redo", id, no, data + (no - 1) * (size_t)(5 * MIB),
                                    no < 3 ? 5 * MIB : 10, parts[no - 1].etag), BACKEND_OK);
    /* part 2 again, other bytes: its own file; the first part 2 is not touched */
    char old2[72];
    memcpy(old2, parts[1].etag, sizeof old2);
    CU_ASSERT_EQUAL(upload_part("redo", id, 2, again, 5 * MIB, parts[1].etag), BACKEND_OK);
    CU_ASSERT_STRING_NOT_EQUAL(old2, parts[1].etag);
    struct obj_meta out;
    CU_ASSERT_EQUAL_FATAL(backend_mpu_complete(g_b, "bkt", "redo", id, parts, 3, &out),
                          BACKEND_OK);
    obj_meta_clear(&out);
    memcpy(data + 5 * MIB, again, 5 * MIB);
    object_is("redo", data, total);

    /* a Complete while part 4 is still being written into the slab */
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "busy", NULL, id), BACKEND_OK);
    for (unsigned no = 1; no <= 3; no++)
        CU_ASSERT_EQUAL(upload_part("busy", id, no, data + (no - 1) * (size_t)(5 * MIB),
                                    no < 3 ? 5 * MIB : 10, parts[no - 1].etag), BACKEND_OK);
    struct backend_put *p;
    CU_ASSERT_EQUAL_FATAL(backend_mpu_part_begin(g_b, "bkt", "busy", id, 4, &p), BACKEND_OK);
    backend_put_set_size(p, 5 * MIB);
    CU_ASSERT_EQUAL(backend_put_write(p, again, 4096), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(backend_mpu_complete(g_b, "bkt", "busy", id, parts, 3, &out),
                          BACKEND_OK);
    obj_meta_clear(&out);
    object_is("busy", data, total);
    /* the part goes on into the upload's slab, not into the object */
    CU_ASSERT_EQUAL(backend_put_write(p, again, 5 * MIB - 4096), BACKEND_OK);
    backend_put_abort(p);
    object_is("busy", data, total);
    /* more bytes than announced never reach the next slot */
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "long", NULL, id), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(backend_mpu_part_begin(g_b, "bkt", "long", id, 1, &p), BACKEND_OK);
    backend_put_set_size(p, 5 * MIB);
    CU_ASSERT_EQUAL(backend_put_write(p, again, 5 * MIB), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_put_write(p, again, 1), BACKEND_TOO_LARGE);
    backend_put_abort(p);
    free(again);
    free(data);
}

/* A slab the file system will not grow to a part's slot (EFBIG; here
 * RLIMIT_FSIZE, as a small ext4's file size limit would): the part moves to
 * a file of its own, with what it had written, and nothing is lost - part 3
 * crosses the limit half-way, part 4's slot lies wholly beyond it. */
static void a_slab_that_cannot_grow_lets_the_part_go(void)
{
    size_t total = 3 * (5 * MIB) + 1000;
    unsigned char *data = malloc(total);
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    for (size_t i = 0; i < total; i++)
        data[i] = (unsigned char)(i * 17 + (i >> 9));
    char id[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "limit", NULL, id), BACKEND_OK);
    struct rlimit old, lim;
    CU_ASSERT_EQUAL_FATAL(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 12 * MIB;
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    CU_ASSERT_EQUAL_FATAL(setrlimit(RLIMIT_FSIZE, &lim), 0);
    struct backend_part parts[4] = { { .part_no = 1 }, { .part_no = 2 }, { .part_no = 3 },
                                     { .part_no = 4 } };
    enum backend_status st[4];
    for (unsigned no = 1; no <= 4; no++)
        st[no - 1] = upload_part("limit", id, no, data + (no - 1) * (size_t)(5 * MIB),
                                 no < 4 ? 5 * MIB : 1000, parts[no - 1].etag);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, was);
    for (int i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(st[i], BACKEND_OK);
    struct obj_meta out;
    CU_ASSERT_EQUAL_FATAL(backend_mpu_complete(g_b, "bkt", "limit", id, parts, 4, &out),
                          BACKEND_OK);
    obj_meta_clear(&out);
    object_is("limit", data, total);
    free(data);
}

/* A part with an additional checksum, as the gateway commits it. */
static enum backend_status upload_part_ck(const char *key, const char *id, unsigned no,
                                          const char *data, const char *ck_name,
                                          const char *ck, char etag[72])
{
    struct backend_put *p;
    enum backend_status s = backend_mpu_part_begin(g_b, "bkt", key, id, no, &p);
    if (s != BACKEND_OK)
        return s;
    size_t len = strlen(data);
    backend_put_write(p, data, len);
    struct obj_meta m = { 0 };
    md5_hex((const unsigned char *)data, len, m.etag);
    obj_meta_add_hdr(&m, ck_name, ck);
    s = backend_put_commit(p, &m, NULL);
    memcpy(etag, m.etag, 33);
    obj_meta_clear(&m);
    return s;
}

static void multipart_part_checksums_are_kept_listed_and_checked(void)
{
    struct obj_meta hm = { 0 };
    obj_meta_add_hdr(&hm, "content-type", "text/plain");
    obj_meta_add_hdr(&hm, "x-amz-checksum-algorithm", "CRC32");
    obj_meta_add_hdr(&hm, "x-amz-checksum-type", "COMPOSITE");
    char id[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "ck", &hm, id), BACKEND_OK);
    obj_meta_clear(&hm);
    /* the upload's settings come back from mpu_head */
    struct obj_meta um;
    CU_ASSERT_EQUAL_FATAL(backend_mpu_head(g_b, "bkt", "ck", id, &um), BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&um, "x-amz-checksum-algorithm"), "CRC32");
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&um, "x-amz-checksum-type"), "COMPOSITE");
    obj_meta_clear(&um);
    CU_ASSERT_EQUAL(backend_mpu_head(g_b, "bkt", "other", id, &um), BACKEND_NO_UPLOAD);
    obj_meta_clear(&um);
    CU_ASSERT_EQUAL(backend_mpu_head(g_b, "bkt", "ck", "bogus", &um), BACKEND_NO_UPLOAD);
    obj_meta_clear(&um);

    /* one part: crc32("hello") = 0x3610a686 */
    struct backend_part part = { .part_no = 1 };
    CU_ASSERT_EQUAL_FATAL(upload_part_ck("ck", id, 1, "hello", "x-amz-checksum-crc32",
                                         "NhCmhg==", part.etag), BACKEND_OK);
    struct backend_parts_page pg;
    CU_ASSERT_EQUAL_FATAL(backend_mpu_list_parts(g_b, "bkt", "ck", id, 0, 10, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(pg.n_parts, 1);
    CU_ASSERT_STRING_EQUAL(pg.parts[0].checksum_name, "x-amz-checksum-crc32");
    CU_ASSERT_STRING_EQUAL(pg.parts[0].checksum, "NhCmhg==");
    backend_parts_page_free(&pg);

    /* a checksum given in Complete must be the stored one */
    struct obj_meta out;
    static const struct {
        const char *name, *value;
    } wrong[] = {
        { "x-amz-checksum-crc32", "AAAAAA==" },
        { "x-amz-checksum-sha1", "NhCmhg==" },
    };
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        struct backend_part bad = part;
        snprintf(bad.checksum_name, sizeof bad.checksum_name, "%s", wrong[i].name);
        snprintf(bad.checksum, sizeof bad.checksum, "%s", wrong[i].value);
        CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "ck", id, &bad, 1, &out),
                        BACKEND_INVALID_PART);
        obj_meta_clear(&out);
    }

    /* the given meta replaces the upload's headers on the object */
    struct obj_meta fin = { 0 };
    obj_meta_add_hdr(&fin, "content-type", "text/plain");
    obj_meta_add_hdr(&fin, "x-amz-checksum-crc32", "composite-1");
    obj_meta_add_hdr(&fin, "x-amz-checksum-type", "COMPOSITE");
    struct backend_part good = part;
    strcpy(good.checksum_name, "x-amz-checksum-crc32");
    strcpy(good.checksum, "NhCmhg==");
    CU_ASSERT_EQUAL_FATAL(
        backend_mpu_complete_cond(g_b, "bkt", "ck", id, &good, 1, &fin, NULL, &out), BACKEND_OK);
    obj_meta_clear(&out);
    obj_meta_clear(&fin);
    struct obj_meta m;
    CU_ASSERT_EQUAL_FATAL(backend_object_head(g_b, "bkt", "ck", &m), BACKEND_OK);
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&m, "x-amz-checksum-crc32"), "composite-1");
    CU_ASSERT_STRING_EQUAL(obj_meta_get_hdr(&m, "content-type"), "text/plain");
    CU_ASSERT_PTR_NULL(obj_meta_get_hdr(&m, "x-amz-checksum-algorithm"));
    CU_ASSERT_EQUAL(m.size, 5);
    obj_meta_clear(&m);
    backend_object_delete(g_b, "bkt", "ck");
}

static void multipart_complete_errors(void)
{
    unsigned char *big = calloc(1, 5 * MIB);
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    char id[BACKEND_UPLOAD_ID_MAX], other[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "obj", NULL, id), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "obj2", NULL, other), BACKEND_OK);
    struct backend_part p[3] = { { .part_no = 1 }, { .part_no = 2 }, { .part_no = 3 } };
    CU_ASSERT_EQUAL(upload_part("obj", id, 1, big, 5 * MIB, p[0].etag), BACKEND_OK);
    CU_ASSERT_EQUAL(upload_part("obj", id, 2, (const unsigned char *)"small", 5, p[1].etag),
                    BACKEND_OK);
    CU_ASSERT_EQUAL(upload_part("obj", id, 3, (const unsigned char *)"tail", 4, p[2].etag),
                    BACKEND_OK);
    struct obj_meta out;
    /* wrong owner / unknown id */
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "obj2", id, p, 3, &out),
                    BACKEND_NO_UPLOAD);
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "obj", other, p, 3, &out),
                    BACKEND_NO_UPLOAD);
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "obj", "../../../etc", p, 3, &out),
                    BACKEND_NO_UPLOAD);
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "nobkt", "obj", id, p, 3, &out),
                    BACKEND_NO_BUCKET);
    struct backend_put *bp;
    CU_ASSERT_EQUAL(backend_mpu_part_begin(g_b, "bkt", "obj2", id, 1, &bp), BACKEND_NO_UPLOAD);
    /* order */
    struct backend_part rev[2] = { p[1], p[0] };
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "obj", id, rev, 2, &out),
                    BACKEND_INVALID_PART_ORDER);
    struct backend_part dup[2] = { p[0], p[0] };
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "obj", id, dup, 2, &out),
                    BACKEND_INVALID_PART_ORDER);
    /* missing part, wrong etag */
    struct backend_part miss[2] = { p[0], { .part_no = 7 } };
    memcpy(miss[1].etag, p[2].etag, sizeof miss[1].etag);
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "obj", id, miss, 2, &out),
                    BACKEND_INVALID_PART);
    struct backend_part bad[1] = { p[0] };
    bad[0].etag[0] = bad[0].etag[0] == '0' ? '1' : '0';
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "obj", id, bad, 1, &out),
                    BACKEND_INVALID_PART);
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "obj", id, p, 0, &out),
                    BACKEND_INVALID_PART);
    /* too small: part 2 (5 bytes) is not last */
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "obj", id, p, 3, &out),
                    BACKEND_ENTITY_TOO_SMALL);
    /* bad part numbers */
    CU_ASSERT_EQUAL(backend_mpu_part_begin(g_b, "bkt", "obj", id, 0, &bp), BACKEND_INVALID_PART);
    CU_ASSERT_EQUAL(backend_mpu_part_begin(g_b, "bkt", "obj", id, 10001, &bp),
                    BACKEND_INVALID_PART);
    /* nothing became visible; the upload is still usable */
    struct obj_meta m;
    CU_ASSERT_EQUAL(backend_object_head(g_b, "bkt", "obj", &m), BACKEND_NO_KEY);
    obj_meta_clear(&m);
    struct backend_part ok[2] = { p[0], p[2] };
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "obj", id, ok, 2, &out), BACKEND_OK);
    CU_ASSERT_EQUAL(out.size, 5 * MIB + 4);
    CU_ASSERT_STRING_EQUAL(out.etag + 32, "-2");
    obj_meta_clear(&out);
    CU_ASSERT_EQUAL(backend_mpu_abort(g_b, "bkt", "obj2", other), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_mpu_abort(g_b, "bkt", "obj2", other), BACKEND_NO_UPLOAD);
    CU_ASSERT_EQUAL(count_tmp_files(""), 0);
    free(big);
}

static void multipart_part_copy_with_range(void)
{
    CU_ASSERT_EQUAL_FATAL(put("src", "0123456789"), BACKEND_OK);
    char id[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "dst", NULL, id), BACKEND_OK);
    struct obj_meta out;
    struct backend_copy_src src = { "bkt", "src", true, 2, 5 };
    CU_ASSERT_EQUAL(backend_mpu_part_copy(g_b, "bkt", "dst", id, 1, &src, &out), BACKEND_OK);
    char hex[33];
    md5_hex("2345", 4, hex);
    CU_ASSERT_STRING_EQUAL(out.etag, hex);
    CU_ASSERT_EQUAL(out.size, 4);
    struct backend_part p = { .part_no = 1 };
    memcpy(p.etag, out.etag, sizeof p.etag);
    obj_meta_clear(&out);
    src = (struct backend_copy_src){ "bkt", "src", true, 5, 10 };   /* past the end */
    CU_ASSERT_EQUAL(backend_mpu_part_copy(g_b, "bkt", "dst", id, 2, &src, &out),
                    BACKEND_BAD_RANGE);
    src = (struct backend_copy_src){ "bkt", "src", true, 6, 5 };    /* first > last */
    CU_ASSERT_EQUAL(backend_mpu_part_copy(g_b, "bkt", "dst", id, 2, &src, &out),
                    BACKEND_BAD_RANGE);
    src = (struct backend_copy_src){ "bkt", "none", false, 0, 0 };
    CU_ASSERT_EQUAL(backend_mpu_part_copy(g_b, "bkt", "dst", id, 2, &src, &out),
                    BACKEND_NO_KEY);
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "dst", id, &p, 1, &out), BACKEND_OK);
    obj_meta_clear(&out);
    char buf[32];
    CU_ASSERT_EQUAL(get("bkt", "dst", buf, sizeof buf, NULL), 4);
    CU_ASSERT_STRING_EQUAL(buf, "2345");
}

static void list_parts_pages_ascending(void)
{
    char id[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "k", NULL, id), BACKEND_OK);
    unsigned nos[] = { 10, 2, 7, 1, 10000, 3 };
    for (size_t i = 0; i < 6; i++)
        CU_ASSERT_EQUAL(upload_part("k", id, nos[i], (const unsigned char *)"abc", 3, NULL),
                        BACKEND_OK);
    unsigned want[] = { 1, 2, 3, 7, 10, 10000 };
    unsigned marker = 0;
    size_t seen = 0;
    for (int page = 0; page < 10; page++) {
        struct backend_parts_page pg;
        CU_ASSERT_EQUAL_FATAL(backend_mpu_list_parts(g_b, "bkt", "k", id, marker, 4, &pg),
                              BACKEND_OK);
        for (size_t i = 0; i < pg.n_parts; i++) {
            CU_ASSERT_EQUAL(pg.parts[i].part_no, want[seen]);
            CU_ASSERT_EQUAL(pg.parts[i].size, 3);
            seen++;
        }
        bool tr = pg.truncated;
        marker = pg.next_marker;
        CU_ASSERT_EQUAL(tr, page == 0);
        backend_parts_page_free(&pg);
        if (!tr)
            break;
    }
    CU_ASSERT_EQUAL(seen, 6);
    struct backend_parts_page pg;
    CU_ASSERT_EQUAL(backend_mpu_list_parts(g_b, "bkt", "other", id, 0, 4, &pg),
                    BACKEND_NO_UPLOAD);
}

static void list_uploads_pages_by_key_then_time(void)
{
    const char *keys[] = { "b", "a", "b", "dir/x", "dir/y", "c" };
    char ids[6][BACKEND_UPLOAD_ID_MAX];
    for (int i = 0; i < 6; i++) {
        CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", keys[i], NULL, ids[i]),
                              BACKEND_OK);
        nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
    }
    /* expected order: a, b(0), b(2), c, dir/x, dir/y */
    const char *wk[] = { "a", "b", "b", "c", "dir/x", "dir/y" };
    const char *wid[] = { ids[1], ids[0], ids[2], ids[5], ids[3], ids[4] };
    char km[256] = "", im[BACKEND_UPLOAD_ID_MAX] = "";
    size_t seen = 0;
    for (int page = 0; page < 10; page++) {
        struct backend_uploads_page pg;
        struct backend_uploads_req q = { .prefix = "", .key_marker = km[0] ? km : NULL,
                                         .upload_id_marker = im[0] ? im : NULL,
                                         .max_uploads = 2 };
        CU_ASSERT_EQUAL_FATAL(backend_mpu_list_uploads(g_b, "bkt", &q, &pg), BACKEND_OK);
        for (size_t i = 0; i < pg.n_uploads && seen < 6; i++, seen++) {
            CU_ASSERT_STRING_EQUAL(pg.uploads[i].key, wk[seen]);
            CU_ASSERT_STRING_EQUAL(pg.uploads[i].upload_id, wid[seen]);
        }
        bool tr = pg.truncated;
        if (tr) {
            snprintf(km, sizeof km, "%s", pg.next_key_marker);
            snprintf(im, sizeof im, "%s", pg.next_upload_id_marker);
        }
        backend_uploads_page_free(&pg);
        if (!tr)
            break;
    }
    CU_ASSERT_EQUAL(seen, 6);
    struct backend_uploads_page pg;
    struct backend_uploads_req q = { .prefix = "", .delimiter = "/", .max_uploads = 100 };
    CU_ASSERT_EQUAL(backend_mpu_list_uploads(g_b, "bkt", &q, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL(pg.n_uploads, 4);
    CU_ASSERT_EQUAL_FATAL(pg.n_prefixes, 1);
    CU_ASSERT_STRING_EQUAL(pg.prefixes[0], "dir/");
    backend_uploads_page_free(&pg);
    /* key marker alone: strictly after that key */
    q = (struct backend_uploads_req){ .prefix = "", .key_marker = "b", .max_uploads = 100 };
    CU_ASSERT_EQUAL(backend_mpu_list_uploads(g_b, "bkt", &q, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL_FATAL(pg.n_uploads, 3);
    CU_ASSERT_STRING_EQUAL(pg.uploads[0].key, "c");
    backend_uploads_page_free(&pg);
    q = (struct backend_uploads_req){ .prefix = "dir/", .max_uploads = 100 };
    CU_ASSERT_EQUAL(backend_mpu_list_uploads(g_b, "bkt", &q, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL(pg.n_uploads, 2);
    backend_uploads_page_free(&pg);
}

int register_tests(void)
{
    CU_pSuite s = CU_add_suite_with_setup_and_teardown("backend_posix_mpu", NULL, NULL,
                                                       (CU_SetUpFunc)setup, teardown);
    if (!s)
        return -1;
#define T(fn) CU_add_test(s, #fn, fn)
    T(multipart_happy_path_has_md5_of_md5s_etag);
    T(many_parts_are_assembled_in_order);
    T(finished_uploads_are_swept_in_the_background);
    T(parts_of_one_size_become_the_object_without_a_copy);
    T(parts_off_the_slab_are_copied);
    T(a_slab_that_cannot_grow_lets_the_part_go);
    T(multipart_part_checksums_are_kept_listed_and_checked);
    T(multipart_complete_errors);
    T(multipart_part_copy_with_range);
    T(list_parts_pages_ascending);
    T(list_uploads_pages_by_key_then_time);
#undef T
    return CU_get_error() == CUE_SUCCESS ? 0 : -1;
}
