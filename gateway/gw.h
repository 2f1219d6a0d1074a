/* gateway/gw.h - the S3 front end: an HTTP server (libmicrohttpd) that parses
 * S3 requests, authenticates them through auth/, and serves them from the
 * cold tier through backend/. */
#ifndef SHARDGATE_GW_H
#define SHARDGATE_GW_H

#include "auth.h"
#include "backend.h"
#include "cache.h"
#include "conf.h"

struct gw;   /* opaque: one running server */

/* Called with the port bound, after the socket listens and before the first
 * request is answered: what it prints is there before a health check can
 * see the gateway up. */
typedef void gw_announce_fn(uint16_t port, void *arg);

/* Starts listening on c->listen_addr:listen_port with a thread pool. Reads
 * go through `cache` when it is not NULL, else straight to the cold tier b.
 * Borrows c, b, a and cache until gw_stop(). announce (may be NULL) is
 * called once, as above. Returns 0 and a new handle, or -1 with the reason
 * logged. */
int gw_start(const struct conf *c, struct backend *b, struct auth *a, struct cache *cache,
             gw_announce_fn *announce, void *announce_arg, struct gw **out);

/* Stops accepting, lets in-flight requests finish for up to grace_s seconds,
 * stops the cache (which resumes every reader waiting on a fill: a
 * suspended connection must be resumed before the server stops), then
 * closes every connection and frees the handle. The caller closes the cache
 * afterwards. */
void gw_stop(struct gw *g, unsigned grace_s);

/* Signals of `shardgate serve` (gateway/signals.c). gw_signals_block():
 * blocks SIGINT, SIGTERM and SIGHUP in the calling thread; call before any
 * thread starts, so that every thread inherits the mask. */
void gw_signals_block(void);
/* Waits for SIGINT or SIGTERM, reopening the log file on each SIGHUP
 * meanwhile (log_reopen; ignored when logging to stderr). Then starts a
 * thread that keeps handling SIGHUP and answers a second SIGINT/SIGTERM
 * with an immediate exit, status 128 + the signal. Returns the signal. */
int gw_signals_wait_stop(void);

#endif
