/* tests/unit/test_backend_posix_state.c - the posix store's own state: where
 * temp files live, the reclaim of a dead writer's leftovers at open, the
 * expiry of old multipart uploads, the lock of the state directory and of
 * the tree, a state directory elsewhere, the read-only mode, and open errors
 * that name the path and the errno text. Each test gets a fresh directory. */
#include "backend.h"
#include "posix_int.h"

#include <CUnit/CUnit.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int register_tests(void);

static char g_tmp[64];
static char g_root[128];

static int rm_cb(const char *p, const struct stat *st, int fl, struct FTW *f)
{
    (void)st;
    (void)fl;
    (void)f;
    return remove(p);
}

static void setup(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sgbs.XXXXXX");
    if (!mkdtemp(g_tmp))
        perror("mkdtemp");   /* every test of the suite then fails */
    snprintf(g_root, sizeof g_root, "%s/data", g_tmp);
}

static void teardown(void)
{
    nftw(g_tmp, rm_cb, 64, FTW_DEPTH | FTW_PHYS);
}

static struct backend *open_store(const char *state_dir, unsigned max_age, char *err,
                                  size_t errlen, enum backend_status *st)
{
    struct backend_posix_conf cf = { .root = g_root, .state_dir = state_dir,
                                     .mpu_max_age_s = max_age, .err = err, .err_len = errlen };
    struct backend *b = NULL;
    *st = backend_posix_open(&cf, &b);
    return b;
}

static struct backend *open_ok(const char *state_dir)
{
    char err[512] = "";
    enum backend_status st;
    struct backend *b = open_store(state_dir, 0, err, sizeof err, &st);
    if (st != BACKEND_OK)
        fprintf(stderr, "open: %s\n", err);
    CU_ASSERT_EQUAL_FATAL(st, BACKEND_OK);
    return b;
}

static void path_of(char *out, size_t cap, const char *rel)
{
    snprintf(out, cap, "%s/%s", g_root, rel);
}

static void write_file(const char *rel, const char *data)
{
    char p[512];
    path_of(p, sizeof p, rel);
    FILE *f = fopen(p, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(data, f);
    fclose(f);
}

static bool exists(const char *rel)
{
    char p[512];
    struct stat st;
    path_of(p, sizeof p, rel);
    return lstat(p, &st) == 0;
}

/* Number of entries named .sg~tmp.* in directory rel (-1: no directory). */
static int count_tmp(const char *rel)
{
    char p[512];
    path_of(p, sizeof p, rel);
    DIR *d = opendir(p);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        n += strncmp(de->d_name, POSIX_TMP_PREFIX, strlen(POSIX_TMP_PREFIX)) == 0;
    closedir(d);
    return n;
}

static enum backend_status put(struct backend *b, const char *key, const char *data)
{
    struct backend_put *p;
    enum backend_status s = backend_put_begin(b, "bkt", key, &p);
    if (s != BACKEND_OK)
        return s;
    s = backend_put_write(p, data, strlen(data));
    if (s != BACKEND_OK) {
        backend_put_abort(p);
        return s;
    }
    return backend_put_commit(p, &(struct obj_meta){ 0 }, NULL);
}

/* ---- temp files ---- */

static void put_temp_file_lives_in_the_bucket_tmp_dir_not_beside_the_object(void)
{
    struct backend *b = open_ok(NULL);
    CU_ASSERT_EQUAL(backend_bucket_create(b, "bkt"), BACKEND_OK);
    struct backend_put *p;
    CU_ASSERT_EQUAL_FATAL(backend_put_begin(b, "bkt", "a/b/obj", &p), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_put_write(p, "xyz", 3), BACKEND_OK);
    CU_ASSERT_EQUAL(count_tmp("bkt/" POSIX_TMP_DIR), 1);
    CU_ASSERT_EQUAL(count_tmp("bkt/a/b"), 0);
    CU_ASSERT_EQUAL(backend_put_commit(p, &(struct obj_meta){ 0 }, NULL), BACKEND_OK);
    CU_ASSERT_EQUAL(count_tmp("bkt/" POSIX_TMP_DIR), 0);
    CU_ASSERT_TRUE(exists("bkt/a/b/obj"));
    /* the temp dir is no key: not listed, and the bucket still deletes */
    struct backend_list_page pg;
    struct backend_list_req rq = { .prefix = "", .max_keys = 1000 };
    CU_ASSERT_EQUAL(backend_list_objects(b, "bkt", &rq, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL(pg.n_objs, 1);
    backend_list_page_free(&pg);
    CU_ASSERT_EQUAL(backend_object_delete(b, "bkt", "a/b/obj"), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_bucket_delete(b, "bkt"), BACKEND_OK);
    CU_ASSERT_FALSE(exists("bkt"));
    backend_close(b);
}

static void aborted_put_leaves_no_temp_file(void)
{
    struct backend *b = open_ok(NULL);
    CU_ASSERT_EQUAL(backend_bucket_create(b, "bkt"), BACKEND_OK);
    struct backend_put *p;
    CU_ASSERT_EQUAL_FATAL(backend_put_begin(b, "bkt", "k", &p), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_put_write(p, "xyz", 3), BACKEND_OK);
    backend_put_abort(p);
    CU_ASSERT_EQUAL(count_tmp("bkt/" POSIX_TMP_DIR), 0);
    CU_ASSERT_FALSE(exists("bkt/k"));
    backend_close(b);
}

/* ---- reclaim at open ---- */

static void reopen_reclaims_temp_files_of_dead_writers_and_keeps_the_rest(void)
{
    struct backend *b = open_ok(NULL);
    CU_ASSERT_EQUAL(backend_bucket_create(b, "bkt"), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_bucket_create(b, "two"), BACKEND_OK);
    CU_ASSERT_EQUAL(put(b, "obj", "data"), BACKEND_OK);
    char up[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(b, "bkt", "big", NULL, up), BACKEND_OK);
    backend_close(b);
    /* what writers killed mid-write leave: */
    char rel[256];
    CU_ASSERT_TRUE(exists("bkt/" POSIX_TMP_DIR));   /* made by the first put, kept */
    write_file("bkt/" POSIX_TMP_DIR "/" POSIX_TMP_PREFIX "AAAA", "12345");      /* a PUT */
    CU_ASSERT_EQUAL(mkdir(strcat(strcpy(rel, g_root), "/two/" POSIX_TMP_DIR), 0755), 0);
    write_file("two/" POSIX_TMP_DIR "/" POSIX_TMP_PREFIX "BBBB", "123");        /* a PUT */
    snprintf(rel, sizeof rel, ".shardgate/mpu/bkt/%.32s/" POSIX_TMP_PREFIX "CCCC", up);
    write_file(rel, "1234567");                                                 /* a part */
    CU_ASSERT_EQUAL(mkdir(strcat(strcpy(rel, g_root), "/.shardgate/mpu/bkt/"
                                                      "DDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDD"), 0755),
                    0);
    write_file(".shardgate/mpu/bkt/DDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDD/" POSIX_TMP_PREFIX "info",
               "12");                                                  /* a crashed create */
    write_file("bkt/" POSIX_TMP_PREFIX "old-layout", "x");   /* not where we look: stays */

    /* the reclaim itself, counted, on a store that is not open elsewhere */
    struct posix_store ps = { .rootfd = open(g_root, O_DIRECTORY | O_RDONLY), .mpufd = -1 };
    char mp[512];
    snprintf(mp, sizeof mp, "%s/.shardgate/mpu", g_root);
    ps.mpufd = open(mp, O_DIRECTORY | O_RDONLY);
    struct posix_reclaim_stats rs;
    posix_reclaim_tmp(&ps, &rs);
    CU_ASSERT_EQUAL(rs.files, 4);
    CU_ASSERT_EQUAL(rs.bytes, 5 + 3 + 7 + 2);
    CU_ASSERT_EQUAL(rs.uploads, 1);
    close(ps.rootfd);
    close(ps.mpufd);

    CU_ASSERT_FALSE(exists("bkt/" POSIX_TMP_DIR));
    CU_ASSERT_FALSE(exists("two/" POSIX_TMP_DIR));
    CU_ASSERT_FALSE(exists(".shardgate/mpu/bkt/DDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDD"));
    snprintf(rel, sizeof rel, ".shardgate/mpu/bkt/%.32s", up);
    CU_ASSERT_EQUAL(count_tmp(rel), 0);
    CU_ASSERT_TRUE(exists("bkt/" POSIX_TMP_PREFIX "old-layout"));

    /* and at open: the live upload and the object stay */
    b = open_ok(NULL);
    struct obj_meta m;
    CU_ASSERT_EQUAL(backend_object_head(b, "bkt", "obj", &m), BACKEND_OK);
    obj_meta_clear(&m);
    CU_ASSERT_EQUAL(backend_mpu_head(b, "bkt", "big", up, &m), BACKEND_OK);
    obj_meta_clear(&m);
    backend_close(b);
}

/* ---- expiry of old uploads ---- */

static void expire_aborts_uploads_older_than_max_age_only(void)
{
    struct backend *b = open_ok(NULL);
    CU_ASSERT_EQUAL(backend_bucket_create(b, "bkt"), BACKEND_OK);
    char up[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(b, "bkt", "k", NULL, up), BACKEND_OK);
    struct backend_put *p;
    CU_ASSERT_EQUAL_FATAL(backend_mpu_part_begin(b, "bkt", "k", up, 1, &p), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_put_write(p, "0123456789", 10), BACKEND_OK);
    CU_ASSERT_EQUAL(backend_put_commit(p, &(struct obj_meta){ .etag = "" }, NULL), BACKEND_OK);
    struct posix_store *ps = (struct posix_store *)b;
    time_t now = time(NULL);
    uint64_t bytes = 0;
    CU_ASSERT_EQUAL(posix_mpu_expire(ps, 3600, now, &bytes), 0);     /* young */
    CU_ASSERT_EQUAL(posix_mpu_expire(ps, 0, now + 7200, &bytes), 0); /* 0: never */
    struct obj_meta m;
    CU_ASSERT_EQUAL(backend_mpu_head(b, "bkt", "k", up, &m), BACKEND_OK);
    obj_meta_clear(&m);
    CU_ASSERT_EQUAL(posix_mpu_expire(ps, 3600, now + 3601, &bytes), 1);   /* old */
    CU_ASSERT_TRUE(bytes >= 10);
    CU_ASSERT_EQUAL(backend_mpu_head(b, "bkt", "k", up, &m), BACKEND_NO_UPLOAD);
    struct backend_uploads_page pg;
    struct backend_uploads_req all = { .prefix = "", .max_uploads = 1000 };
    CU_ASSERT_EQUAL(backend_mpu_list_uploads(b, "bkt", &all, &pg), BACKEND_OK);
    CU_ASSERT_EQUAL(pg.n_uploads, 0);
    backend_uploads_page_free(&pg);
    backend_close(b);
}

static void expiry_thread_aborts_at_open(void)
{
    struct backend *b = open_ok(NULL);
    CU_ASSERT_EQUAL(backend_bucket_create(b, "bkt"), BACKEND_OK);
    char up[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(b, "bkt", "k", NULL, up), BACKEND_OK);
    backend_close(b);
    /* make it two hours old: rewrite the initiation time in its info file */
    char p[1024];
    snprintf(p, sizeof p, "%s/.shardgate/mpu/bkt/%.32s/info", g_root, up);
    int fd = open(p, O_RDWR);
    CU_ASSERT_FATAL(fd >= 0);
    unsigned char hdr[6];
    CU_ASSERT_EQUAL(pread(fd, hdr, 6, 0), 6);
    size_t kl = (size_t)hdr[4] | (size_t)hdr[5] << 8;
    uint64_t t = (uint64_t)(time(NULL) - 7200);
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(t >> (8 * i));
    CU_ASSERT_EQUAL(pwrite(fd, le, 8, (off_t)(6 + kl)), 8);
    close(fd);
    char err[512];
    enum backend_status st;
    b = open_store(NULL, 3600, err, sizeof err, &st);
    CU_ASSERT_EQUAL_FATAL(st, BACKEND_OK);
    /* the first sweep runs at once in the thread: wait for it (bounded) */
    struct obj_meta m = { 0 };
    enum backend_status hs = BACKEND_OK;
    for (int i = 0; i < 1000 && hs == BACKEND_OK; i++) {
        obj_meta_clear(&m);
        hs = backend_mpu_head(b, "bkt", "k", up, &m);
        if (hs == BACKEND_OK)
            nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
    }
    obj_meta_clear(&m);
    CU_ASSERT_EQUAL(hs, BACKEND_NO_UPLOAD);
    backend_close(b);
}

/* ---- locks ---- */

/* What a crash in the middle of nesting a key (posix_nest.c) leaves in
 * .sg~tmp/: before the exchange a directory holding a second link of the
 * object as .sg~o, after it the object's old name as a second link. The
 * reclaim drops both links; the objects stay whole, and their bytes are not
 * counted as reclaimed. */
static void reopen_after_a_crash_mid_nest_keeps_every_object(void)
{
    struct backend *b = open_ok(NULL);
    CU_ASSERT_EQUAL(backend_bucket_create(b, "bkt"), BACKEND_OK);
    CU_ASSERT_EQUAL(put(b, "a/b", "before"), BACKEND_OK);
    CU_ASSERT_EQUAL(put(b, "n", "nested"), BACKEND_OK);
    CU_ASSERT_EQUAL(put(b, "n/below", "x"), BACKEND_OK);   /* n moves to n/.sg~o */
    backend_close(b);
    char from[512], to[512];
    path_of(to, sizeof to, "bkt/" POSIX_TMP_DIR "/" POSIX_TMP_PREFIX "nest1");
    CU_ASSERT_EQUAL(mkdir(to, 0755), 0);
    path_of(from, sizeof from, "bkt/a/b");
    strcat(to, "/" POSIX_SELF);
    CU_ASSERT_EQUAL(link(from, to), 0);                        /* before the exchange */
    path_of(from, sizeof from, "bkt/n/" POSIX_SELF);
    path_of(to, sizeof to, "bkt/" POSIX_TMP_DIR "/" POSIX_TMP_PREFIX "nest2");
    CU_ASSERT_EQUAL(link(from, to), 0);                        /* after it */

    struct posix_store ps = { .rootfd = open(g_root, O_DIRECTORY | O_RDONLY), .mpufd = -1 };
    struct posix_reclaim_stats rs;
    posix_reclaim_tmp(&ps, &rs);
    close(ps.rootfd);
    CU_ASSERT_EQUAL(rs.files, 1);    /* the old name's link; the directory is no file */
    CU_ASSERT_EQUAL(rs.bytes, 0);    /* both links' objects live on */
    CU_ASSERT_FALSE(exists("bkt/" POSIX_TMP_DIR "/" POSIX_TMP_PREFIX "nest1"));
    CU_ASSERT_FALSE(exists("bkt/" POSIX_TMP_DIR "/" POSIX_TMP_PREFIX "nest2"));

    b = open_ok(NULL);
    struct obj_meta m;
    CU_ASSERT_EQUAL(backend_object_head(b, "bkt", "a/b", &m), BACKEND_OK);
    CU_ASSERT_EQUAL(m.size, 6);
    obj_meta_clear(&m);
    CU_ASSERT_EQUAL(backend_object_head(b, "bkt", "n", &m), BACKEND_OK);
    CU_ASSERT_EQUAL(m.size, 6);
    obj_meta_clear(&m);
    backend_close(b);
}

static void second_open_of_a_state_dir_is_refused_naming_the_holder(void)
{
    struct backend *a = open_ok(NULL);
    char err[512] = "", want[64];
    enum backend_status st;
    struct backend *b = open_store(NULL, 0, err, sizeof err, &st);
    CU_ASSERT_EQUAL(st, BACKEND_IO);
    CU_ASSERT_PTR_NULL(b);
    snprintf(want, sizeof want, "(pid %ld,", (long)getpid());
    CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "state directory"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, g_root));
    backend_close(a);
    b = open_ok(NULL);   /* released at close */
    backend_close(b);
}

static void a_tree_with_two_state_dirs_is_still_one_owner(void)
{
    char s1[256], s2[256], err[512] = "";
    snprintf(s1, sizeof s1, "%s/state1", g_tmp);
    snprintf(s2, sizeof s2, "%s/state2", g_tmp);
    struct backend *a = open_ok(s1);
    enum backend_status st;
    struct backend *b = open_store(s2, 0, err, sizeof err, &st);
    CU_ASSERT_EQUAL(st, BACKEND_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "data directory"));
    backend_close(b);
    backend_close(a);
}

/* ---- the state directory ---- */

static void state_dir_elsewhere_holds_uploads_and_the_lock(void)
{
    char s[256], p[512];
    snprintf(s, sizeof s, "%s/var/lib/sg-state", g_tmp);   /* missing parents: made */
    struct backend *b = open_ok(s);
    CU_ASSERT_EQUAL(backend_bucket_create(b, "bkt"), BACKEND_OK);
    char up[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(backend_mpu_create(b, "bkt", "k", NULL, up), BACKEND_OK);
    snprintf(p, sizeof p, "%s/mpu/bkt/%.32s/info", s, up);
    CU_ASSERT_EQUAL(access(p, F_OK), 0);
    snprintf(p, sizeof p, "%s/lock", s);
    CU_ASSERT_EQUAL(access(p, F_OK), 0);
    CU_ASSERT_FALSE(exists(".shardgate"));
    backend_close(b);
}

static void unwritable_state_dir_opens_read_only(void)
{
    /* /sys refuses mkdir even to root (EPERM, or EROFS in a container): a
     * state directory that cannot be made, without any privilege trick */
    struct stat st0;
    if (stat("/sys/kernel", &st0) != 0) {
        fprintf(stderr, "(no /sys/kernel here: nothing to check)\n");
        return;
    }
    CU_ASSERT_EQUAL_FATAL(mkdir(g_root, 0755), 0);
    char p[512];
    snprintf(p, sizeof p, "%s/dsx", g_root);
    CU_ASSERT_EQUAL_FATAL(mkdir(p, 0755), 0);
    write_file("dsx/file", "bytes");
    struct backend *b = open_ok("/sys/shardgate-unit-test-state");
    CU_ASSERT_TRUE(((struct posix_store *)b)->read_only);
    struct obj_meta m;
    CU_ASSERT_EQUAL(backend_object_head(b, "dsx", "file", &m), BACKEND_OK);
    CU_ASSERT_EQUAL(m.size, 5);
    obj_meta_clear(&m);
    struct backend_uploads_page up;
    struct backend_uploads_req all = { .prefix = "", .max_uploads = 10 };
    CU_ASSERT_EQUAL(backend_mpu_list_uploads(b, "dsx", &all, &up), BACKEND_OK);
    CU_ASSERT_EQUAL(up.n_uploads, 0);
    backend_uploads_page_free(&up);
    struct backend_put *pp = NULL;
    char id[BACKEND_UPLOAD_ID_MAX];
    CU_ASSERT_EQUAL(backend_put_begin(b, "dsx", "new", &pp), BACKEND_READ_ONLY);
    CU_ASSERT_PTR_NULL(pp);
    CU_ASSERT_EQUAL(backend_object_delete(b, "dsx", "file"), BACKEND_READ_ONLY);
    CU_ASSERT_EQUAL(backend_bucket_create(b, "other"), BACKEND_READ_ONLY);
    CU_ASSERT_EQUAL(backend_bucket_delete(b, "dsx"), BACKEND_READ_ONLY);
    CU_ASSERT_EQUAL(backend_object_copy(b, "dsx", "file", "dsx", "copy", NULL, &m),
                    BACKEND_READ_ONLY);
    CU_ASSERT_EQUAL(backend_mpu_create(b, "dsx", "k", NULL, id), BACKEND_READ_ONLY);
    CU_ASSERT_EQUAL(backend_mpu_abort(b, "dsx", "k", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
                    BACKEND_READ_ONLY);
    CU_ASSERT_TRUE(exists("dsx/file"));
    CU_ASSERT_FALSE(exists(".shardgate"));
    backend_close(b);
}

static void write_errno_status_table(void)
{
    static const struct {
        int err;
        enum backend_status want;
    } cases[] = {
        { ENOSPC, BACKEND_NO_SPACE }, { EDQUOT, BACKEND_NO_SPACE },
        { EROFS, BACKEND_READ_ONLY }, { EACCES, BACKEND_READ_ONLY },
        { EPERM, BACKEND_READ_ONLY }, { EIO, BACKEND_IO }, { ENOENT, BACKEND_IO },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CU_ASSERT_EQUAL(posix_write_errno_status(cases[i].err), cases[i].want);
    CU_ASSERT_EQUAL(posix_errno_status(EROFS), BACKEND_READ_ONLY);
    CU_ASSERT_STRING_EQUAL(backend_status_name(BACKEND_READ_ONLY), "READ_ONLY");
}

/* ---- open errors ---- */

static void open_errors_name_the_path_and_the_errno_text(void)
{
    char file[100], err[512] = "";
    snprintf(file, sizeof file, "%s/plain-file", g_tmp);
    FILE *f = fopen(file, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fclose(f);
    snprintf(g_root, sizeof g_root, "%s/data", file);   /* below a file */
    enum backend_status st;
    struct backend *b = open_store(NULL, 0, err, sizeof err, &st);
    CU_ASSERT_NOT_EQUAL(st, BACKEND_OK);
    CU_ASSERT_PTR_NULL(b);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, g_root));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "Not a directory"));

    snprintf(g_root, sizeof g_root, "%s/data", g_tmp);
    char state[512];
    snprintf(state, sizeof state, "%s/state", file);
    err[0] = '\0';
    b = open_store(state, 0, err, sizeof err, &st);
    CU_ASSERT_NOT_EQUAL(st, BACKEND_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, state));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "Not a directory"));
}

int register_tests(void)
{
    CU_pSuite pure = CU_add_suite("backend_posix_state_pure", NULL, NULL);
    CU_pSuite s = CU_add_suite_with_setup_and_teardown("backend_posix_state", NULL, NULL,
                                                       setup, teardown);
    if (!pure || !s)
        return -1;
    CU_add_test(pure, "write_errno_status_table", write_errno_status_table);
#define T(fn) CU_add_test(s, #fn, fn)
    T(put_temp_file_lives_in_the_bucket_tmp_dir_not_beside_the_object);
    T(aborted_put_leaves_no_temp_file);
    T(reopen_reclaims_temp_files_of_dead_writers_and_keeps_the_rest);
    T(reopen_after_a_crash_mid_nest_keeps_every_object);
    T(expire_aborts_uploads_older_than_max_age_only);
    T(expiry_thread_aborts_at_open);
    T(second_open_of_a_state_dir_is_refused_naming_the_holder);
    T(a_tree_with_two_state_dirs_is_still_one_owner);
    T(state_dir_elsewhere_holds_uploads_and_the_lock);
    T(unwritable_state_dir_opens_read_only);
    T(open_errors_name_the_path_and_the_errno_text);
#undef T
    return CU_get_error() == CUE_SUCCESS ? 0 : -1;
}
