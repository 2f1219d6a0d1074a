/* tests/unit/cu_main.c - the shared main() of every CUnit test executable:
 * each test file defines register_tests(), which adds its suites (with
 * cu_add_suite, cu.h). */
#include <CUnit/Basic.h>
#include <ftw.h>
#include <stdio.h>

#include "cu.h"

int cu_add_suite(const char *name, CU_InitializeFunc init, CU_CleanupFunc clean,
                 const struct cu_test *tests, size_t n)
{
    CU_pSuite s = CU_add_suite(name, init, clean);
    if (!s)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!CU_add_test(s, tests[i].name, tests[i].fn))
            return -1;
    return 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(p);
}

int cu_rm_tree(const char *path)
{
    return nftw(path, rm_one, 64, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    if (register_tests() != 0) {
        fprintf(stderr, "cannot register tests: %s\n", CU_get_error_msg());
        CU_cleanup_registry();
        return 2;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned run = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    if (run == 0) {
        fprintf(stderr, "no test ran\n");
        return 1;
    }
    return failed ? 1 : 0;
}
