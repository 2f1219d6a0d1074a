/* tests/unit/test_gw_hit_copy.c - hits read into memory (gateway/hit_copy.c):
 * which hits are copied, the bytes at the right offset, the budget that
 * bounds the buffers held at once, and a short file refused. */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gw_int.h"

int register_tests(void);

enum { MiB = 1024 * 1024 };

static void which_hits_are_copied(void)
{
    struct conf c;
    memset(&c, 0, sizeof c);
    c.cache_read_path = CONF_READ_COPY;
    CU_ASSERT_FALSE(gw_hit_copy_wanted(&c, 16384));   /* the memory tier's */
    CU_ASSERT_FALSE(gw_hit_copy_wanted(&c, 16385));
    CU_ASSERT_FALSE(gw_hit_copy_wanted(&c, 128 * 1024));   /* one sendfile piece */
    CU_ASSERT_TRUE(gw_hit_copy_wanted(&c, 128 * 1024 + 1));
    CU_ASSERT_TRUE(gw_hit_copy_wanted(&c, 1 * MiB));
    CU_ASSERT_TRUE(gw_hit_copy_wanted(&c, 4 * MiB));
    CU_ASSERT_FALSE(gw_hit_copy_wanted(&c, 4 * MiB + 1));
    c.cache_read_path = CONF_READ_SENDFILE;
    CU_ASSERT_FALSE(gw_hit_copy_wanted(&c, 1 * MiB));
    c.cache_read_path = CONF_READ_URING;
    CU_ASSERT_FALSE(gw_hit_copy_wanted(&c, 1 * MiB));
}

static int temp_file(const unsigned char *data, size_t len)
{
    char path[] = "/tmp/sg-hit-copy-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    unlink(path);
    if (pwrite(fd, data, len, 0) != (ssize_t)len) {
        close(fd);
        return -1;
    }
    return fd;
}

static void bytes_budget_and_short_files(void)
{
    size_t size = 5 * MiB + 7;
    unsigned char *data = malloc(size);
    CU_ASSERT_FATAL(data != NULL);
    for (size_t i = 0; i < size; i++)
        data[i] = (unsigned char)(i * 2654435761u >> 11);
    int fd = temp_file(data, size);
    CU_ASSERT_FATAL(fd >= 0);
    struct gw_hit_copy *hc = gw_hit_copy_new(3 * MiB);
    CU_ASSERT_FATAL(hc != NULL);
    uint64_t copied, sent, held;

    /* the bytes at the offset asked (a body after the cache file's header) */
    unsigned char *a = gw_hit_copy_take(hc, fd, 4096 + 3, 2 * MiB);
    CU_ASSERT_FATAL(a != NULL);
    CU_ASSERT(memcmp(a, data + 4096 + 3, 2 * MiB) == 0);
    gw_hit_copy_stats(hc, &copied, &sent, &held);
    CU_ASSERT_EQUAL(held, 2 * MiB);
    /* over the budget while it is held: refused, and nothing more counted */
    CU_ASSERT_PTR_NULL(gw_hit_copy_take(hc, fd, 0, 2 * MiB));
    gw_hit_copy_stats(hc, &copied, &sent, &held);
    CU_ASSERT_EQUAL(held, 2 * MiB);
    /* what fits beside it is given */
    unsigned char *b = gw_hit_copy_take(hc, fd, size - MiB, MiB);
    CU_ASSERT_FATAL(b != NULL);
    CU_ASSERT(memcmp(b, data + size - MiB, MiB) == 0);
    gw_hit_copy_release(a);
    gw_hit_copy_release(b);
    gw_hit_copy_stats(hc, &copied, &sent, &held);
    CU_ASSERT_EQUAL(held, 0);
    /* released, the budget is whole again */
    a = gw_hit_copy_take(hc, fd, 0, 3 * MiB);
    CU_ASSERT_FATAL(a != NULL);
    CU_ASSERT(memcmp(a, data, 3 * MiB) == 0);
    gw_hit_copy_release(a);
    /* a file shorter than the bytes asked: refused (the caller sends the
     * file, which fails the same way), and the budget given back */
    CU_ASSERT_PTR_NULL(gw_hit_copy_take(hc, fd, size - 100, 200));
    gw_hit_copy_stats(hc, &copied, &sent, &held);
    CU_ASSERT_EQUAL(held, 0);
    /* the counters /metrics shows */
    gw_hit_copy_count(hc, true);
    gw_hit_copy_count(hc, true);
    gw_hit_copy_count(hc, false);
    gw_hit_copy_stats(hc, &copied, &sent, &held);
    CU_ASSERT_EQUAL(copied, 2);
    CU_ASSERT_EQUAL(sent, 1);
    /* no state (it could not be made): nothing is copied */
    CU_ASSERT_PTR_NULL(gw_hit_copy_take(NULL, fd, 0, MiB));
    gw_hit_copy_free(hc);
    close(fd);
    free(data);
}

int register_tests(void)
{
    CU_pSuite s = CU_add_suite("gw_hit_copy", NULL, NULL);
    if (!s)
        return -1;
    CU_add_test(s, "which hits are copied", which_hits_are_copied);
    CU_add_test(s, "bytes, budget and short files", bytes_budget_and_short_files);
    return 0;
}
