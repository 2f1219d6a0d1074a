/* cache/engine_int.h - the cache tier's I/O engines, behind one small
 * interface so the fill logic in fill_worker.c is written once: write at an offset
 * (completions reaped later, possibly out of order) and the reads
 * of hits. Two engines: io_uring (a ring per fill worker: a write is in
 * flight while the worker reads the next buffer from the cold tier), and
 * pread/pwrite where io_uring is blocked (a container's default seccomp
 * profile): a writer thread per fill worker does the pwrites, so the same
 * overlap holds. Only cache/ files include this. */
#ifndef SHARDGATE_ENGINE_INT_H
#define SHARDGATE_ENGINE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cache.h"

/* Does io_uring work in this process? Sets up a ring and submits and reaps
 * a NOP (a seccomp filter may allow io_uring_setup and still refuse
 * io_uring_enter). 0, or the negative errno of the call that failed. Any
 * thread; cache_open calls it once. */
int cache_eng_probe_uring(void);

/* Which engine runs: want, or for CACHE_ENGINE_AUTO io_uring when it works
 * here and threads otherwise; *out is URING or THREADS. Logs one line that
 * names the engine (and why io_uring is not used). -1 when io_uring is
 * wanted and does not work (logged). read_uring: cache.read_path asks for
 * io_uring reads (a warning when they will be preads). */
int cache_eng_choose(enum cache_engine want, bool read_uring, enum cache_engine *out);

/* "io_uring" or "threads" (the metric label and the config value). */
const char *cache_eng_name(enum cache_engine kind);

struct cache_eng;   /* one fill worker's I/O context; used by that worker only */

/* A completed write. res: bytes written (maybe fewer than asked: write the
 * rest again), or a negative errno (-EAGAIN/-EINTR: try it again). */
struct cache_eng_done {
    uint64_t tag;
    int res;
};

/* A context for kind (CACHE_ENGINE_URING: a ring; CACHE_ENGINE_THREADS: a
 * writer thread) with room for `depth` writes in flight. 0, or a negative
 * errno (*out NULL). */
int cache_eng_new(enum cache_engine kind, unsigned depth, struct cache_eng **out);
/* Call only when every submitted write was reaped (cache_eng_wait). */
void cache_eng_free(struct cache_eng *e);

/* Queues a write of len bytes of buf at off of fd, tagged with tag. The
 * buffer belongs to the engine (the kernel, with io_uring) until the write's
 * completion is reaped. 0, or a negative errno (nothing was queued). */
int cache_eng_write(struct cache_eng *e, int fd, const void *buf, size_t len, uint64_t off,
                    uint64_t tag);
/* Waits for one completion of a queued write. 0 with *out filled, or a
 * negative errno: the engine broke and nothing more will complete. */
int cache_eng_wait(struct cache_eng *e, struct cache_eng_done *out);

/* Reads up to len bytes at off of fd for a hit: through a small ring owned
 * by the calling thread (kind CACHE_ENGINE_URING; freed when the thread
 * ends), or with pread. As pread: bytes read, or -1 with errno set. */
ssize_t cache_eng_pread(enum cache_engine kind, int fd, void *buf, size_t len, uint64_t off);

#endif
