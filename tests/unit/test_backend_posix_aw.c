/* tests/unit/test_backend_posix_aw.c - staged writes through io_uring
 * (backend/posix_aw.c): every byte where it belongs whatever the start
 * offset and the split of the writes (O_DIRECT blocks in the middle, pwrite
 * for the unaligned head and tail), nothing beside the range touched (parts
 * in a slab have neighbours), and a store that stages this way (write-back's)
 * giving the same objects and parts as before. Runs on /tmp's file system;
 * where it has no O_DIRECT the writes go through the page cache and the
 * tests that count direct bytes say so and fail: this suite runs on ext4. */
#include "posix_fixture.h"

#include "cu.h"

#include <sys/random.h>

#define MIB (1024u * 1024u)

static void fill_random(unsigned char *b, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t k = getrandom(b + done, n - done, 0);
        if (k > 0)
            done += (size_t)k;
    }
}

static int scratch_file(char path[96])
{
    snprintf(path, 96, "%s/aw.bin", g_tmp);
    return open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

/* Writes data[0..len) at off through a writer of `mode`, in pieces of the
 * sizes in split[] (cycled), into a file whose other bytes are 0xAA. True
 * when the file then holds the data there and 0xAA around it. */
static bool write_and_check(enum posix_aw_mode mode, uint64_t off, const unsigned char *data,
                            size_t len, const size_t *split, size_t n_split)
{
    char path[96];
    int fd = scratch_file(path);
    CU_ASSERT_FATAL(fd >= 0);
    size_t around = 3 * 4096 + 17;
    size_t total = (size_t)off + len + around;
    unsigned char *want = malloc(total), *got = malloc(total);
    CU_ASSERT_FATAL(want && got);
    memset(want, 0xAA, total);
    CU_ASSERT_FATAL(pwrite(fd, want, total, 0) == (ssize_t)total);
    memcpy(want + off, data, len);

    struct posix_aw *w = posix_aw_start(fd, off, mode);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    size_t done = 0;
    for (size_t i = 0; done < len; i++) {
        size_t n = split[i % n_split];
        if (n > len - done)
            n = len - done;
        CU_ASSERT_EQUAL(posix_aw_write(w, data + done, n), 0);
        done += n;
    }
    CU_ASSERT_EQUAL(posix_aw_finish(w), 0);
    posix_aw_free(w);
    CU_ASSERT_EQUAL(fcntl(fd, F_GETFL) & O_DIRECT, 0);   /* the fd as it was */
    bool ok = pread(fd, got, total, 0) == (ssize_t)total && memcmp(got, want, total) == 0;
    close(fd);
    unlink(path);
    free(want);
    free(got);
    return ok;
}

static void direct_writes_land_byte_exact_from_any_offset_and_split(void)
{
    size_t len = 5 * MIB + 4097;
    unsigned char *data = malloc(len);
    CU_ASSERT_FATAL(data != NULL);
    fill_random(data, len);
    static const uint64_t offs[] = { 0, 1, 4095, 4096, 12345, 8 * MIB };
    static const size_t splits[][4] = {
        { 1 * MIB, 1 * MIB, 1 * MIB, 1 * MIB },   /* what MHD and the body threads hand */
        { 1, 4095, 65536, 300001 },               /* odd sizes across every boundary */
        { 256 * 1024, 256 * 1024, 256 * 1024, 256 * 1024 },   /* exactly a buffer */
    };
    static const size_t lens[] = { 1, 4096, 4097, 256 * 1024, 5 * MIB + 4097 };
    uint64_t before[3], after[3];
    posix_aw_stats(before);
    for (size_t o = 0; o < CU_N(offs); o++)
        for (size_t s = 0; s < CU_N(splits); s++)
            for (size_t l = 0; l < CU_N(lens); l++)
                CU_ASSERT(write_and_check(POSIX_AW_DIRECT, offs[o], data, lens[l], splits[s], 4));
    posix_aw_stats(after);
    CU_ASSERT(after[POSIX_AW_HOW_DIRECT] > before[POSIX_AW_HOW_DIRECT]);   /* O_DIRECT ran */
    CU_ASSERT(after[POSIX_AW_HOW_WRITE] > before[POSIX_AW_HOW_WRITE]);     /* heads, tails */
    CU_ASSERT_EQUAL(after[POSIX_AW_HOW_URING], before[POSIX_AW_HOW_URING]);
    free(data);
}

static void uring_writes_go_through_the_page_cache(void)
{
    size_t len = 3 * MIB + 5;
    unsigned char *data = malloc(len);
    CU_ASSERT_FATAL(data != NULL);
    fill_random(data, len);
    static const size_t split[] = { 100000, 1 * MIB, 7, 65536 };
    uint64_t before[3], after[3];
    posix_aw_stats(before);
    CU_ASSERT(write_and_check(POSIX_AW_URING, 0, data, len, split, 4));
    CU_ASSERT(write_and_check(POSIX_AW_URING, 777, data, len, split, 4));
    posix_aw_stats(after);
    CU_ASSERT_EQUAL(after[POSIX_AW_HOW_URING] - before[POSIX_AW_HOW_URING], 2 * (uint64_t)len);
    CU_ASSERT_EQUAL(after[POSIX_AW_HOW_DIRECT], before[POSIX_AW_HOW_DIRECT]);
    CU_ASSERT_EQUAL(posix_aw_start(0, 0, POSIX_AW_OFF), NULL);
    free(data);
}

/* A writer freed with writes in flight (a put aborted mid-body) waits for
 * them before its buffers go: nothing is written into freed memory (ASan),
 * and the file holds a prefix of what was given. */
static void a_writer_freed_mid_body_lets_its_writes_finish(void)
{
    char path[96];
    int fd = scratch_file(path);
    CU_ASSERT_FATAL(fd >= 0);
    size_t len = 4 * MIB;
    unsigned char *data = malloc(len);
    CU_ASSERT_FATAL(data != NULL);
    fill_random(data, len);
    struct posix_aw *w = posix_aw_start(fd, 0, POSIX_AW_DIRECT);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT_EQUAL(posix_aw_write(w, data, len), 0);
    posix_aw_free(w);   /* no finish */
    struct stat st;
    CU_ASSERT_EQUAL(fstat(fd, &st), 0);
    CU_ASSERT(st.st_size <= (off_t)len);
    unsigned char *got = malloc(len);
    CU_ASSERT_FATAL(got != NULL);
    ssize_t n = pread(fd, got, len, 0);
    CU_ASSERT(n == st.st_size && memcmp(got, data, (size_t)n) == 0);
    close(fd);
    free(got);
    free(data);
}

/* A write the kernel refuses shows at the next write or at finish, with its
 * errno: here a file opened read-only. */
static void a_failed_write_is_reported(void)
{
    char path[96];
    int fd = scratch_file(path);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    CU_ASSERT_FATAL(fd >= 0);
    size_t len = 2 * MIB;
    unsigned char *data = calloc(1, len);
    CU_ASSERT_FATAL(data != NULL);
    struct posix_aw *w = posix_aw_start(fd, 0, POSIX_AW_DIRECT);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    int e = posix_aw_write(w, data, len);
    int f = posix_aw_finish(w);
    CU_ASSERT(e == EBADF || f == EBADF);
    CU_ASSERT_EQUAL(f, EBADF);
    posix_aw_free(w);
    close(fd);
    free(data);
}

/* ---- a store that stages through io_uring ---- */

static int setup_direct(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sgbt.XXXXXX");
    if (!mkdtemp(g_tmp))
        return -1;
    snprintf(g_root, sizeof g_root, "%s/data/store", g_tmp);
    struct backend_posix_conf cf = { .root = g_root, .stage_io = BACKEND_STAGE_DIRECT };
    if (backend_posix_open(&cf, &g_b) != BACKEND_OK)
        return -1;
    return backend_bucket_create(g_b, "bkt") == BACKEND_OK ? 0 : -1;
}

static bool object_is(const char *key, const unsigned char *data, size_t len)
{
    struct backend_obj *o;
    struct obj_meta m;
    if (backend_object_open(g_b, "bkt", key, &m, &o) != BACKEND_OK)
        return false;
    obj_meta_clear(&m);
    unsigned char *got = malloc(len + 1);
    size_t n = 0, k = 0;
    bool ok = got != NULL;
    while (ok && n < len + 1) {
        ok = backend_obj_read(o, n, got + n, len + 1 - n, &k) == BACKEND_OK;
        if (k == 0)
            break;
        n += k;
    }
    ok = ok && n == len && memcmp(got, data, len) == 0;
    backend_obj_close(o);
    free(got);
    return ok;
}

/* Puts of every size class (under 1 MiB: write(); announced or not) and a
 * multipart upload whose slot size is not a block multiple, so that parts
 * share blocks with their neighbours in the slab: every object whole, the
 * ETags those of the bytes, and the bytes went through O_DIRECT. */
static void a_staging_store_writes_objects_and_parts_whole(void)
{
    size_t big = 3 * 5 * MIB + 3 - 1000;
    unsigned char *data = malloc(big);
    CU_ASSERT_FATAL(data != NULL);
    fill_random(data, big);
    uint64_t before[3], after[3];
    posix_aw_stats(before);
    static const size_t sizes[] = { 10, 1 * MIB - 1, 1 * MIB, 3 * MIB + 5 };
    for (size_t i = 0; i < CU_N(sizes); i++)
        for (int announce = 0; announce < 2; announce++) {
            char key[32];
            snprintf(key, sizeof key, "o%zu-%d", i, announce);
            struct backend_put *p;
            CU_ASSERT_EQUAL_FATAL(backend_put_begin(g_b, "bkt", key, &p), BACKEND_OK);
            if (announce)
                backend_put_set_size(p, sizes[i]);
            for (size_t done = 0; done < sizes[i];) {
                size_t n = sizes[i] - done < 300000 ? sizes[i] - done : 300000;
                CU_ASSERT_EQUAL(backend_put_write(p, data + done, n), BACKEND_OK);
                done += n;
            }
            struct obj_meta m = { 0 }, out;
            md5_hex(data, sizes[i], m.etag);
            CU_ASSERT_EQUAL(backend_put_commit(p, &m, &out), BACKEND_OK);
            CU_ASSERT_EQUAL(out.size, sizes[i]);
            obj_meta_clear(&out);
            CU_ASSERT(object_is(key, data, sizes[i]));
        }

    /* three parts in the slab (slot: the first part's 5 MiB + 1), uploaded
     * 1, 3, 2: part 2's last block is part 3's first, already written */
    char id[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(g_b, "bkt", "mp", NULL, id), BACKEND_OK);
    size_t part = 5 * MIB + 1;
    struct backend_part parts[3] = { { 0 } };
    static const unsigned order[] = { 1, 3, 2 };
    for (size_t i = 0; i < CU_N(order); i++) {
        unsigned no = order[i];
        size_t off = (size_t)(no - 1) * part, n = no == 3 ? big - 2 * part : part;
        struct backend_put *p;
        CU_ASSERT_EQUAL_FATAL(backend_mpu_part_begin(g_b, "bkt", "mp", id, no, &p), BACKEND_OK);
        backend_put_set_size(p, n);
        CU_ASSERT_EQUAL(backend_put_write(p, data + off, n), BACKEND_OK);
        CU_ASSERT(((struct posix_put *)p)->slab_fd >= 0);   /* in the slab */
        struct obj_meta m = { 0 }, out;
        md5_hex(data + off, n, m.etag);
        CU_ASSERT_EQUAL(backend_put_commit(p, &m, &out), BACKEND_OK);
        obj_meta_clear(&out);
        parts[no - 1].part_no = no;
        snprintf(parts[no - 1].etag, sizeof parts[no - 1].etag, "%s", m.etag);
    }
    struct obj_meta done;
    CU_ASSERT_EQUAL(backend_mpu_complete(g_b, "bkt", "mp", id, parts, 3, &done), BACKEND_OK);
    obj_meta_clear(&done);
    CU_ASSERT(object_is("mp", data, big));
    posix_aw_stats(after);
    CU_ASSERT(after[POSIX_AW_HOW_DIRECT] - before[POSIX_AW_HOW_DIRECT] >= 8 * MIB);
    free(data);
}

/* A staging store (stage_io direct) reads whole aligned blocks into aligned
 * buffers with O_DIRECT, as the fills of pending writes do, and the rest
 * buffered: every way of reading gives the object's bytes, the tail past the
 * last whole block and the end of the object included. */
static void a_staging_store_reads_around_the_page_cache(void)
{
    size_t len = 3 * MIB + 4096 + 777;   /* a tail under one block */
    unsigned char *data = malloc(len);
    CU_ASSERT_FATAL(data != NULL);
    fill_random(data, len);
    struct backend_put *p;
    CU_ASSERT_EQUAL_FATAL(backend_put_begin(g_b, "bkt", "rd", &p), BACKEND_OK);
    backend_put_set_size(p, len);
    CU_ASSERT_EQUAL(backend_put_write(p, data, len), BACKEND_OK);
    struct obj_meta m = { 0 }, out;
    md5_hex(data, len, m.etag);
    CU_ASSERT_EQUAL_FATAL(backend_put_commit(p, &m, &out), BACKEND_OK);
    obj_meta_clear(&out);

    unsigned char *buf = aligned_alloc(4096, 2 * MIB);
    CU_ASSERT_FATAL(buf != NULL);
    struct backend_obj *o;
    CU_ASSERT_EQUAL_FATAL(backend_object_open(g_b, "bkt", "rd", &m, &o), BACKEND_OK);
    obj_meta_clear(&m);
    struct posix_obj *po = (struct posix_obj *)o;
    size_t k = 0;
    /* small and unaligned reads stay buffered */
    CU_ASSERT_EQUAL(backend_obj_read(o, 100, buf, 4096, &k), BACKEND_OK);
    CU_ASSERT(k == 4096 && memcmp(buf, data + 100, k) == 0);
    CU_ASSERT_EQUAL(backend_obj_read(o, 4096, buf + 1, MIB, &k), BACKEND_OK);
    CU_ASSERT(k == MIB && memcmp(buf + 1, data + 4096, k) == 0);
    CU_ASSERT_EQUAL(po->dfd, POSIX_DFD_LATER);
    /* a fill's reads: pieces doubling from 64 KiB, each completed by the
     * caller's loop, into the aligned buffer */
    size_t piece = 64 * 1024, reads = 0;
    for (size_t off = 0; off < len;) {
        size_t want = len - off < piece ? len - off : piece, got = 0;
        while (got < want) {
            CU_ASSERT_EQUAL_FATAL(backend_obj_read(o, off + got, buf + got, want - got, &k),
                                  BACKEND_OK);
            CU_ASSERT_FATAL(k > 0);
            got += k;
            reads++;
        }
        CU_ASSERT(memcmp(buf, data + off, want) == 0);
        off += want;
        if (piece < MIB)
            piece *= 2;
    }
    CU_ASSERT(po->dfd >= 0);          /* the aligned pieces went O_DIRECT */
    CU_ASSERT(reads > 7);             /* the tail's block was a read of its own */
    /* reads reaching past the end: the bytes there are (O_DIRECT gives the
     * partial block at the end too), then none */
    CU_ASSERT_EQUAL(backend_obj_read(o, 3 * MIB, buf, MIB, &k), BACKEND_OK);
    CU_ASSERT(k == 4096 + 777 && memcmp(buf, data + 3 * MIB, k) == 0);
    CU_ASSERT_EQUAL(backend_obj_read(o, 3 * MIB + 4096, buf, 777, &k), BACKEND_OK);
    CU_ASSERT(k == 777 && memcmp(buf, data + 3 * MIB + 4096, k) == 0);
    CU_ASSERT_EQUAL(backend_obj_read(o, 4 * MIB, buf, MIB, &k), BACKEND_OK);
    CU_ASSERT_EQUAL(k, 0);
    backend_obj_close(o);
    free(buf);
    free(data);
}

int register_tests(void)
{
    static const struct cu_test writer[] = {
        { "direct_writes_land_byte_exact_from_any_offset_and_split",
          direct_writes_land_byte_exact_from_any_offset_and_split },
        { "uring_writes_go_through_the_page_cache", uring_writes_go_through_the_page_cache },
        { "a_writer_freed_mid_body_lets_its_writes_finish",
          a_writer_freed_mid_body_lets_its_writes_finish },
        { "a_failed_write_is_reported", a_failed_write_is_reported },
    };
    static const struct cu_test store[] = {
        { "a_staging_store_reads_around_the_page_cache",
          a_staging_store_reads_around_the_page_cache },
        { "a_staging_store_writes_objects_and_parts_whole",
          a_staging_store_writes_objects_and_parts_whole },
    };
    CU_pSuite s = CU_add_suite_with_setup_and_teardown("posix_aw", NULL, NULL,
                                                       (CU_SetUpFunc)setup, teardown);
    for (size_t i = 0; s && i < CU_N(writer); i++)
        CU_add_test(s, writer[i].name, writer[i].fn);
    CU_pSuite t = CU_add_suite_with_setup_and_teardown("posix_aw_store", NULL, NULL,
                                                       (CU_SetUpFunc)setup_direct, teardown);
    for (size_t i = 0; t && i < CU_N(store); i++)
        CU_add_test(t, store[i].name, store[i].fn);
    return CU_get_error() == CUE_SUCCESS ? 0 : -1;
}
