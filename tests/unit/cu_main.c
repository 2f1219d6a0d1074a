/* tests/unit/cu_main.c - the shared main() of every CUnit test executable:
 * each test file defines register_tests(), which adds its suites. */
#include <CUnit/Basic.h>
#include <stdio.h>

int register_tests(void);

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
