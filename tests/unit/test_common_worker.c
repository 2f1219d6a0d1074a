/* tests/unit/test_common_worker.c - sg_worker (common/worker.h): the thread
 * runs, sees stop only when sg_worker_stop (or _join) sets it, and is joined
 * by it; after sg_worker_join the lock stays usable until sg_worker_destroy;
 * its condition waits on CLOCK_MONOTONIC deadlines. */
#include <CUnit/CUnit.h>
#include <stdbool.h>
#include <time.h>

#include "cu.h"
#include "worker.h"

struct probe {
    struct sg_worker wk;
    bool started;       /* under wk.mu */
    bool saw_stop;      /* written by the thread before it returns */
};

/* Waits on wk.cv with a monotonic deadline far off, as the workers do, until
 * stop; reports that it runs first. */
static void *probe_main(void *arg)
{
    struct probe *p = arg;
    pthread_mutex_lock(&p->wk.mu);
    p->started = true;
    pthread_cond_broadcast(&p->wk.cv);
    while (!p->wk.stop) {
        struct timespec dl;
        clock_gettime(CLOCK_MONOTONIC, &dl);
        dl.tv_sec += 3600;
        pthread_cond_timedwait(&p->wk.cv, &p->wk.mu, &dl);
    }
    p->saw_stop = true;
    pthread_mutex_unlock(&p->wk.mu);
    return NULL;
}

static void stop_wakes_the_thread_and_joins_it(void)
{
    struct probe p = { 0 };
    CU_ASSERT_EQUAL_FATAL(sg_worker_start(&p.wk, probe_main, &p), 0);
    pthread_mutex_lock(&p.wk.mu);
    while (!p.started)
        pthread_cond_wait(&p.wk.cv, &p.wk.mu);
    CU_ASSERT_FALSE(p.wk.stop);
    pthread_mutex_unlock(&p.wk.mu);
    sg_worker_stop(&p.wk);      /* returns only once the thread has returned */
    CU_ASSERT_TRUE(p.saw_stop);
    CU_ASSERT_TRUE(p.wk.stop);
}

static void a_worker_can_be_started_again_after_stop(void)
{
    struct probe p = { 0 };
    for (int round = 0; round < 3; round++) {
        p.started = p.saw_stop = false;
        CU_ASSERT_EQUAL_FATAL(sg_worker_start(&p.wk, probe_main, &p), 0);
        CU_ASSERT_FALSE(p.wk.stop);
        sg_worker_stop(&p.wk);
        CU_ASSERT_TRUE(p.saw_stop);
    }
}

static void join_leaves_the_lock_usable_until_destroy(void)
{
    struct probe p = { 0 };
    CU_ASSERT_EQUAL_FATAL(sg_worker_start(&p.wk, probe_main, &p), 0);
    sg_worker_join(&p.wk);
    CU_ASSERT_TRUE(p.saw_stop);
    /* as the prefetch stager's owner does: its state is still read under mu */
    CU_ASSERT_EQUAL(pthread_mutex_lock(&p.wk.mu), 0);
    CU_ASSERT_TRUE(p.wk.stop);
    CU_ASSERT_EQUAL(pthread_mutex_unlock(&p.wk.mu), 0);
    sg_worker_destroy(&p.wk);
}

int register_tests(void)
{
    static const struct cu_test tests[] = {
        { "stop_wakes_the_thread_and_joins_it", stop_wakes_the_thread_and_joins_it },
        { "a_worker_can_be_started_again_after_stop", a_worker_can_be_started_again_after_stop },
        { "join_leaves_the_lock_usable_until_destroy", join_leaves_the_lock_usable_until_destroy },
    };
    return cu_add_suite("common_worker", NULL, NULL, tests, CU_N(tests));
}
