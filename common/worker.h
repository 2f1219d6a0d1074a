/* common/worker.h - a background thread that sleeps on a condition until it
 * has work or is told to stop: the store's upload expiry, the cache's
 * directory watcher and thread-pool writer, and the gateway's connection
 * deadlines each embed one, so starting and stopping such a thread is
 * written once. */
#ifndef SHARDGATE_COMMON_WORKER_H
#define SHARDGATE_COMMON_WORKER_H

#include <pthread.h>
#include <stdbool.h>

/* Open on purpose: the owner locks mu around its own state too and waits on
 * cv (pthread_cond_timedwait with CLOCK_MONOTONIC deadlines). */
struct sg_worker {
    pthread_mutex_t mu;
    pthread_cond_t cv;    /* CLOCK_MONOTONIC */
    pthread_t thread;
    bool stop;            /* under mu: set by sg_worker_stop */
};

/* Initialises w (mu, cv, stop false) and starts fn(arg) in w->thread.
 * 0, or the pthread error number, with w destroyed again (nothing to stop).
 * The owner logs the failure: it knows what the thread is for. */
int sg_worker_start(struct sg_worker *w, void *(*fn)(void *), void *arg);

/* Sets stop under mu, wakes the thread and joins it; mu and cv stay usable
 * (an owner whose other threads still look at its state under mu after the
 * thread ended) until sg_worker_destroy. Called once, for a started worker,
 * by any thread but the worker's own. */
void sg_worker_join(struct sg_worker *w);

/* Destroys mu and cv of a joined worker. */
void sg_worker_destroy(struct sg_worker *w);

/* sg_worker_join, then sg_worker_destroy. */
void sg_worker_stop(struct sg_worker *w);

#endif
