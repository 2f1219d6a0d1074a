/* cache/dirwatch_int.h - the watcher of the cache directory (dirwatch.c):
 * knows whether the directory is usable ("up"), says why when it is not,
 * and heals: a directory deleted under the running cache is recreated, one
 * that was read-only or broken is taken back once it is usable - each time
 * the index starts empty (cidx_reset). While the directory is down, the
 * cache sends every read to the cold tier. Only cache/ files include this. */
#ifndef SHARDGATE_DIRWATCH_INT_H
#define SHARDGATE_DIRWATCH_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cidx;
struct cache_dirwatch;

/* Opens the index over dir (a new one in *out; the caller closes it). When
 * dir cannot be used now (missing and not creatable, read-only, broken, the
 * index unreadable), *out is an empty detached index, *up false and why
 * (len bytes) says what is wrong; logged either way. Warns when capacity is
 * above the free space of dir's file system. 0, or -1 when out of memory. */
int cache_dir_open_index(const char *dir, uint64_t capacity, struct cidx **out, bool *up,
                         char *why, size_t len);

/* Called by the watcher before it (re)attaches the index to the directory
 * (recreated, or usable again): the owner takes the directory's lock anew.
 * 0 to go on; non-zero with why (len bytes) filled keeps the directory down. */
typedef int (*cache_dirwatch_claim_cb)(void *arg, char *why, size_t len);

/* Starts the watcher thread of idx's directory, which looks every
 * interval_ms. up: idx is attached to a usable directory; otherwise idx was
 * opened detached and why says what is wrong. claim (may be NULL) is called
 * with arg on the watcher's thread before each re-attach. 0, or -1 (no
 * memory or thread). Borrows idx and arg until cache_dirwatch_stop. */
int cache_dirwatch_start(struct cidx *idx, bool up, const char *why, unsigned interval_ms,
                         cache_dirwatch_claim_cb claim, void *arg,
                         struct cache_dirwatch **out);
/* Stops and joins the thread, frees w (NULL is fine). Before cidx_close. */
void cache_dirwatch_stop(struct cache_dirwatch *w);

/* Is the directory usable? One atomic load: the fill and hit paths ask. */
bool cache_dirwatch_up(const struct cache_dirwatch *w);
/* As cache_dirwatch_up, and when it is not, why (len bytes) says why. */
bool cache_dirwatch_ready(struct cache_dirwatch *w, char *why, size_t len);
/* How often the directory was recreated or taken back (each time after it
 * is up again). */
uint64_t cache_dirwatch_resets(const struct cache_dirwatch *w);
/* A fill met errno err on the directory (creating or writing a data file):
 * for the errors that mean "the directory is gone or broken" (ENOENT,
 * ENOTDIR, EROFS, EACCES, EPERM, EIO) the watcher looks now instead of at
 * its next tick. Any thread. */
void cache_dirwatch_report(struct cache_dirwatch *w, int err);

#endif
