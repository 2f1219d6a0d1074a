/* tests/unit/cu.h - what a unit test file shares with cu_main.c: its
 * register_tests() hands a table of named tests to cu_add_suite; scratch
 * directories go away with cu_rm_tree. */
#ifndef SHARDGATE_TESTS_CU_H
#define SHARDGATE_TESTS_CU_H

#include <CUnit/CUnit.h>
#include <stddef.h>

struct cu_test {
    const char *name;       /* what it proves */
    CU_TestFunc fn;
};

#define CU_N(a) (sizeof(a) / sizeof((a)[0]))

/* Defined by each test file: adds its suites. 0, or -1. */
int register_tests(void);

/* Adds suite `name` (init and clean may be NULL) with tests[0..n). 0, or -1
 * with CUnit's error set. */
int cu_add_suite(const char *name, CU_InitializeFunc init, CU_CleanupFunc clean,
                 const struct cu_test *tests, size_t n);

/* Removes the tree at path (a test's scratch directory), not following
 * links. 0, or -1 when something stayed. */
int cu_rm_tree(const char *path);

#endif
