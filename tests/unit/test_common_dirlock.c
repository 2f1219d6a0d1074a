/* tests/unit/test_common_dirlock.c - the directory lock (common/dirlock.h): one
 * holder at a time, the holder's pid in the message, a lock that dies with
 * its process (kill -9 included), clear errors, and the lock of a directory
 * itself. A second holder is a forked child where the pid matters. */
#include "cu.h"
#include "dirlock.h"

#include <CUnit/CUnit.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_tmp[64];

static void setup(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sgdl.XXXXXX");
    if (!mkdtemp(g_tmp))
        perror("mkdtemp");
}

static void teardown(void)
{
    cu_rm_tree(g_tmp);
}

static void take_creates_the_directory_and_writes_our_pid(void)
{
    char dir[128], err[512];
    snprintf(dir, sizeof dir, "%s/a/b/cache", g_tmp);
    struct sg_dirlock *l;
    int e;
    CU_ASSERT_EQUAL_FATAL(sg_dirlock_take(dir, "cache directory", &l, &e, err, sizeof err),
                          SG_DIRLOCK_OK);
    CU_ASSERT_EQUAL(sg_dirlock_holder(dir), (long)getpid());
    sg_dirlock_release(l);
    /* the file stays (deleting a lock file races with the next locker) */
    CU_ASSERT_EQUAL(sg_dirlock_holder(dir), (long)getpid());
}

static void second_take_is_busy_and_names_the_holder_until_released(void)
{
    char dir[128], err[512], want[64];
    snprintf(dir, sizeof dir, "%s/d", g_tmp);
    struct sg_dirlock *a, *b;
    int e;
    CU_ASSERT_EQUAL_FATAL(sg_dirlock_take(dir, "state directory", &a, &e, err, sizeof err),
                          SG_DIRLOCK_OK);
    /* a second open file description conflicts even in the same process */
    CU_ASSERT_EQUAL(sg_dirlock_take(dir, "state directory", &b, &e, err, sizeof err),
                    SG_DIRLOCK_BUSY);
    CU_ASSERT_PTR_NULL(b);
    CU_ASSERT_EQUAL(e, EWOULDBLOCK);
    snprintf(want, sizeof want, "(pid %ld,", (long)getpid());
    CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "state directory"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, dir));
    sg_dirlock_release(a);
    CU_ASSERT_EQUAL(sg_dirlock_take(dir, "state directory", &b, &e, err, sizeof err),
                    SG_DIRLOCK_OK);
    sg_dirlock_release(b);
}

/* Forks a child that takes `dir`'s lock (file or directory kind), tells us,
 * and waits to be killed. Returns its pid, or -1. */
static pid_t child_holding(const char *dir, bool of_dir)
{
    int p[2];
    if (pipe(p) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        struct sg_dirlock *l;
        int e;
        char err[256];
        enum sg_dirlock_status st =
            of_dir ? sg_dirlock_take_dir(dir, "x", &l, &e, err, sizeof err)
                   : sg_dirlock_take(dir, "x", &l, &e, err, sizeof err);
        char ok = st == SG_DIRLOCK_OK ? 'y' : 'n';
        if (write(p[1], &ok, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]);
    char ok = 'n';
    if (pid < 0 || read(p[0], &ok, 1) != 1 || ok != 'y') {
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
        }
        pid = -1;
    }
    close(p[0]);
    return pid;
}

static void lock_of_a_process_killed_with_sigkill_is_free_at_once(void)
{
    char dir[128], err[512], want[64];
    snprintf(dir, sizeof dir, "%s/k", g_tmp);
    pid_t child = child_holding(dir, false);
    CU_ASSERT_FATAL(child > 0);
    struct sg_dirlock *l;
    int e;
    CU_ASSERT_EQUAL(sg_dirlock_take(dir, "cache directory", &l, &e, err, sizeof err),
                    SG_DIRLOCK_BUSY);
    snprintf(want, sizeof want, "(pid %ld,", (long)child);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    CU_ASSERT_EQUAL(sg_dirlock_take(dir, "cache directory", &l, &e, err, sizeof err),
                    SG_DIRLOCK_OK);
    CU_ASSERT_EQUAL(sg_dirlock_holder(dir), (long)getpid());
    sg_dirlock_release(l);
}

static void directory_lock_names_the_holder_from_proc_locks(void)
{
    char dir[128], err[512], want[64];
    snprintf(dir, sizeof dir, "%s/tree", g_tmp);
    CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0755), 0);
    pid_t child = child_holding(dir, true);
    CU_ASSERT_FATAL(child > 0);
    struct sg_dirlock *l;
    int e;
    CU_ASSERT_EQUAL(sg_dirlock_take_dir(dir, "data directory", &l, &e, err, sizeof err),
                    SG_DIRLOCK_BUSY);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "data directory"));
    FILE *f = fopen("/proc/locks", "r");
    if (f) {   /* the pid only where /proc shows the locks */
        fclose(f);
        snprintf(want, sizeof want, "(pid %ld)", (long)child);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    CU_ASSERT_EQUAL(sg_dirlock_take_dir(dir, "data directory", &l, &e, err, sizeof err),
                    SG_DIRLOCK_OK);
    sg_dirlock_release(l);
    /* nothing was written into the directory */
    CU_ASSERT_EQUAL(rmdir(dir), 0);
}

static void errors_name_the_path_and_the_errno_text(void)
{
    char file[128], dir[160], err[512];
    snprintf(file, sizeof file, "%s/plain", g_tmp);
    FILE *f = fopen(file, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fclose(f);
    snprintf(dir, sizeof dir, "%s/below", file);
    struct sg_dirlock *l;
    int e;
    CU_ASSERT_EQUAL(sg_dirlock_take(dir, "cache directory", &l, &e, err, sizeof err),
                    SG_DIRLOCK_ERRNO);
    CU_ASSERT_PTR_NULL(l);
    CU_ASSERT_EQUAL(e, ENOTDIR);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, dir));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "Not a directory"));
    CU_ASSERT_EQUAL(sg_dirlock_take_dir(dir, "data directory", &l, &e, err, sizeof err),
                    SG_DIRLOCK_ERRNO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, dir));
    CU_ASSERT_EQUAL(sg_dirlock_holder(dir), 0);
}

int register_tests(void)
{
    CU_pSuite s = CU_add_suite_with_setup_and_teardown("common_dirlock", NULL, NULL, setup,
                                                       teardown);
    if (!s)
        return -1;
#define T(fn) CU_add_test(s, #fn, fn)
    T(take_creates_the_directory_and_writes_our_pid);
    T(second_take_is_busy_and_names_the_holder_until_released);
    T(lock_of_a_process_killed_with_sigkill_is_free_at_once);
    T(directory_lock_names_the_holder_from_proc_locks);
    T(errors_name_the_path_and_the_errno_text);
#undef T
    return CU_get_error() == CUE_SUCCESS ? 0 : -1;
}
