/* tests/unit/test_cache_revalidate.c - the check of a cached copy against a
 * hung cold tier (cache/revalidate.c): the HEAD gives up after the
 * revalidation deadline, not the cold tier's first-byte deadline, and for a
 * while after a timeout checks are skipped without asking the tier (the
 * caller serves the cached copy either way). The tier is a loopback socket
 * that accepts connections and never answers. */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cache_int.h"

int register_tests(void);

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void timed_out_check_serves_the_copy_and_holds_off(void)
{
    /* listen, never accept: the kernel completes the handshakes and the
     * requests sit unread, as with a SIGSTOPped server */
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    CU_ASSERT_FATAL(lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 &&
                    listen(lfd, 16) == 0 && getsockname(lfd, (struct sockaddr *)&a, &al) == 0);
    char ep[64];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", ntohs(a.sin_port));
    /* a first-byte deadline far longer than the revalidation's */
    struct backend_s3_conf cf = { .endpoint = ep, .region = "us-east-1", .access_key = "a",
                                  .secret_key = "s", .first_byte_timeout_ms = 60000 };
    struct backend *b = NULL;
    CU_ASSERT_EQUAL_FATAL(backend_s3_open(&cf, &b), BACKEND_OK);

    struct cache_reval rv;
    cache_reval_init(&rv, 300);
    struct obj_meta m;
    bool asked = false;
    double t0 = now_s();
    CU_ASSERT_EQUAL(cache_reval_head(&rv, b, "bkt", "k", &m, &asked), BACKEND_TIMEOUT);
    double dt = now_s() - t0;
    CU_ASSERT_TRUE(asked);
    CU_ASSERT(dt >= 0.25 && dt < 3.0);
    obj_meta_clear(&m);
    /* right after: skipped, the tier is not asked (the hold-off is 5 s) */
    t0 = now_s();
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(cache_reval_head(&rv, b, "bkt", "k", &m, &asked), BACKEND_TIMEOUT);
        CU_ASSERT_FALSE(asked);
        obj_meta_clear(&m);
    }
    CU_ASSERT(now_s() - t0 < 1.0);
    uint64_t timeouts = 0, skipped = 0;
    cache_reval_stats(&rv, &timeouts, &skipped);
    CU_ASSERT_EQUAL(timeouts, 1);
    CU_ASSERT_EQUAL(skipped, 3);
    backend_close(b);
    close(lfd);
}

/* PutObjectTagging changes neither ETag nor size: the check also compares
 * the tags a GET reports (a cold S3's count, a directory store's set). */
static void a_tag_change_is_a_change(void)
{
    static const struct {
        const char *cold_count, *cached_count, *cold_set, *cached_set;
        bool differ;
    } cases[] = {
        { NULL, NULL, NULL, NULL, false },
        { "2", "2", NULL, NULL, false },
        { "3", "2", NULL, NULL, true },
        { "1", NULL, NULL, NULL, true },     /* tagged since */
        { NULL, "1", NULL, NULL, true },     /* untagged since */
        { NULL, NULL, "a=1", "a=1", false },
        { NULL, NULL, "a=2", "a=1", true },
        { NULL, NULL, NULL, "a=1", true },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct obj_meta cold = { 0 }, cached = { 0 };
        if (cases[i].cold_count)
            obj_meta_add_hdr(&cold, OBJ_TAGGING_COUNT_HDR, cases[i].cold_count);
        if (cases[i].cached_count)
            obj_meta_add_hdr(&cached, OBJ_TAGGING_COUNT_HDR, cases[i].cached_count);
        if (cases[i].cold_set)
            obj_meta_add_hdr(&cold, OBJ_TAGGING_HDR, cases[i].cold_set);
        if (cases[i].cached_set)
            obj_meta_add_hdr(&cached, OBJ_TAGGING_HDR, cases[i].cached_set);
        obj_meta_add_hdr(&cold, "content-type", "a/b");   /* other headers do not count */
        CU_ASSERT_EQUAL(cache_reval_tags_differ(&cold, &cached), cases[i].differ);
        obj_meta_clear(&cold);
        obj_meta_clear(&cached);
    }
}

int register_tests(void)
{
    CU_pSuite s = CU_add_suite("cache_revalidate", NULL, NULL);
    if (!s)
        return -1;
    if (!CU_add_test(s, "timed_out_check_serves_the_copy_and_holds_off",
                     timed_out_check_serves_the_copy_and_holds_off))
        return -1;
    if (!CU_add_test(s, "a_tag_change_is_a_change", a_tag_change_is_a_change))
        return -1;
    return 0;
}
