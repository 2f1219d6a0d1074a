/* common/worker.c - start and stop of a background thread with its lock, its
 * CLOCK_MONOTONIC condition and a stop flag (worker.h). */
#include "worker.h"

#include <time.h>

int sg_worker_start(struct sg_worker *w, void *(*fn)(void *), void *arg)
{
    w->stop = false;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0)
        return rc;
    pthread_mutex_init(&w->mu, NULL);
    rc = pthread_create(&w->thread, NULL, fn, arg);
    if (rc != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
    }
    return rc;
}

void sg_worker_join(struct sg_worker *w)
{
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
}

void sg_worker_destroy(struct sg_worker *w)
{
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
}

void sg_worker_stop(struct sg_worker *w)
{
    sg_worker_join(w);
    sg_worker_destroy(w);
}
