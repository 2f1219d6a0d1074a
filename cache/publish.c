/* cache/publish.c - the publishers: threads that make finished fills durable
 * and publish them, so a fill worker goes on to its next fill at once.
 *
 * A fill's worker used to fdatasync its data file before it took the next
 * fill. The readers do not wait for that (they read below `filled`, and every
 * byte is there), but new misses did: with 8 misses at once every worker sat
 * in fdatasync while the drive took the bytes, and a 64 MiB miss waited
 * ~450 ms for a worker before its first byte
 * (bench/results/fills-ab-publish.md). Now the worker queues the checked file
 * here; a publisher fdatasyncs it and only then publishes the entry
 * (cache_fill_finish), so a published entry still always has its bytes on the
 * drive. Until then the fill stays in the fill table, complete, and new
 * readers of its key attach to it as to any running fill.
 *
 * As many publishers as fill workers: fdatasync blocks, and several at once
 * let the file system share one journal commit. The queue holds at most one
 * fill per worker; a worker that finds it full finishes its fill itself, which
 * bounds the files waiting for a sync without another wait. */
#include <pthread.h>
#include <stdlib.h>

#include "cache_int.h"

static void *publisher_main(void *arg)
{
    struct cache *c = arg;
    pthread_mutex_lock(&c->pub_mu);
    for (;;) {
        while (!c->pub_head && !c->pub_stop)
            pthread_cond_wait(&c->pub_cv, &c->pub_mu);
        struct fill *f = c->pub_head;
        if (!f)
            break;   /* stopping, and nothing left to finish */
        c->pub_head = f->pub_next;
        if (!c->pub_head)
            c->pub_tail = NULL;
        c->pub_len--;
        pthread_mutex_unlock(&c->pub_mu);
        cache_fill_finish(c, f, f->pub_fd);
        pthread_mutex_lock(&c->pub_mu);
    }
    pthread_mutex_unlock(&c->pub_mu);
    return NULL;
}

bool cache_publish_later(struct cache *c, struct fill *f, int fd)
{
    pthread_mutex_lock(&c->pub_mu);
    bool taken = c->n_publishers > 0 && !c->pub_stop && c->pub_len < c->n_publishers;
    if (taken) {
        f->pub_fd = fd;
        f->pub_next = NULL;
        if (c->pub_tail)
            c->pub_tail->pub_next = f;
        else
            c->pub_head = f;
        c->pub_tail = f;
        c->pub_len++;
        pthread_cond_signal(&c->pub_cv);
    }
    pthread_mutex_unlock(&c->pub_mu);
    return taken;
}

int cache_publisher_start(struct cache *c)
{
    pthread_mutex_init(&c->pub_mu, NULL);
    pthread_cond_init(&c->pub_cv, NULL);
    c->publishers = calloc(c->cf.fill_workers, sizeof *c->publishers);
    for (unsigned i = 0; c->publishers && i < c->cf.fill_workers; i++) {
        if (pthread_create(&c->publishers[i], NULL, publisher_main, c) != 0)
            break;
        c->n_publishers++;
    }
    return c->n_publishers > 0 ? 0 : -1;
}

void cache_publisher_stop(struct cache *c)
{
    pthread_mutex_lock(&c->pub_mu);
    c->pub_stop = true;
    pthread_cond_broadcast(&c->pub_cv);
    pthread_mutex_unlock(&c->pub_mu);
    for (unsigned i = 0; i < c->n_publishers; i++)
        pthread_join(c->publishers[i], NULL);
    c->n_publishers = 0;
    free(c->publishers);
    c->publishers = NULL;
}
