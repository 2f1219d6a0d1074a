/* tests/unit/test_common_fs.c - sg_mkdir_missing (common/fs.h): creates what
 * is missing, keeps what exists, and says ENOTDIR / ENOENT / ENAMETOOLONG. */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cu.h"
#include "fs.h"

static char g_tmp[64];

static int make_tmp(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sgfs.XXXXXX");
    return mkdtemp(g_tmp) ? 0 : -1;
}

static int remove_tmp(void)
{
    return cu_rm_tree(g_tmp);
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static void creates_the_missing_components_and_keeps_existing_ones(void)
{
    char p[256];
    snprintf(p, sizeof p, "%s/a/b/c", g_tmp);
    CU_ASSERT_EQUAL(sg_mkdir_missing(p), 0);
    CU_ASSERT_TRUE(is_dir(p));
    CU_ASSERT_EQUAL(sg_mkdir_missing(p), 0);            /* all there: nothing to do */
    snprintf(p, sizeof p, "%s/a/b/d/", g_tmp);           /* a trailing slash */
    CU_ASSERT_EQUAL(sg_mkdir_missing(p), 0);
    CU_ASSERT_TRUE(is_dir(p));
    CU_ASSERT_EQUAL(sg_mkdir_missing("/"), 0);
}

static void a_file_in_the_way_is_enotdir(void)
{
    char f[256], below[300];
    snprintf(f, sizeof f, "%s/plain", g_tmp);
    FILE *fp = fopen(f, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
    fclose(fp);
    snprintf(below, sizeof below, "%s/x/y", f);
    errno = 0;
    CU_ASSERT_EQUAL(sg_mkdir_missing(below), -1);
    CU_ASSERT_EQUAL(errno, ENOTDIR);
    errno = 0;
    CU_ASSERT_EQUAL(sg_mkdir_missing(f), -1);
    CU_ASSERT_EQUAL(errno, ENOTDIR);
}

static void empty_and_overlong_paths_are_refused(void)
{
    errno = 0;
    CU_ASSERT_EQUAL(sg_mkdir_missing(""), -1);
    CU_ASSERT_EQUAL(errno, ENOENT);
    char *p = malloc(PATH_MAX + 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    memset(p, 'a', PATH_MAX + 1);
    p[0] = '/';
    p[PATH_MAX + 1] = '\0';
    errno = 0;
    CU_ASSERT_EQUAL(sg_mkdir_missing(p), -1);
    CU_ASSERT_EQUAL(errno, ENAMETOOLONG);
    free(p);
}

int register_tests(void)
{
    static const struct cu_test tests[] = {
        { "creates_the_missing_components_and_keeps_existing_ones",
          creates_the_missing_components_and_keeps_existing_ones },
        { "a_file_in_the_way_is_enotdir", a_file_in_the_way_is_enotdir },
        { "empty_and_overlong_paths_are_refused", empty_and_overlong_paths_are_refused },
    };
    return cu_add_suite("common_fs", make_tmp, remove_tmp, tests, CU_N(tests));
}
