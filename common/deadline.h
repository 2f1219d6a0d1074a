/* common/deadline.h - an absolute time `ms` milliseconds from now on clock
 * `clk`, for pthread_cond_timedwait (CLOCK_REALTIME for a default condition
 * variable, CLOCK_MONOTONIC for one whose attribute says so). Any thread. */
#ifndef SHARDGATE_COMMON_DEADLINE_H
#define SHARDGATE_COMMON_DEADLINE_H

#include <time.h>

static inline struct timespec sg_deadline(clockid_t clk, unsigned ms)
{
    struct timespec t;
    clock_gettime(clk, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

#endif
