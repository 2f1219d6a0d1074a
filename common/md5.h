/* common/md5.h - MD5 for ETags, with the blocks of concurrent streams hashed
 * side by side.
 *
 * S3's ETag of a PUT or a part is the MD5 of its body, so every byte taken
 * in is hashed: 1.7 CPU-s per GiB with OpenSSL on this machine's CPU
 * (bench/results/writeback.md). One stream's MD5 is a chain - each block
 * needs the state the one before left - so it cannot be split; but eight
 * streams' blocks fit the eight 32-bit lanes of an AVX2 register. The
 * streams of a checkpoint (ten concurrent 8 MiB parts) are exactly that.
 *
 * When enough threads that share (sg_md5_share_lanes) hash at once,
 * sg_md5_update() hands its whole blocks to one process-wide engine. The
 * first thread to arrive hashes, for every stream waiting at that moment,
 * in the lanes; threads that arrive meanwhile join free lanes at the next
 * step and sleep until their blocks are done. A thread hashes only while
 * its own blocks are not done; then it passes the work on to a thread
 * still waiting. Fewer streams at once are hashed by OpenSSL, each on its
 * own thread, as before.
 *
 * The result is the plain MD5: the tests compare it with OpenSSL's over
 * random splits, lengths and thread mixes (tests/unit/test_common_md5.c). */
#ifndef SHARDGATE_COMMON_MD5_H
#define SHARDGATE_COMMON_MD5_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sg_md5 {
    uint32_t h[4];
    uint64_t length;        /* bytes so far */
    uint8_t tail[64];       /* the bytes of a block not yet whole */
    unsigned n_tail;
};

void sg_md5_init(struct sg_md5 *m);
/* Any thread; several threads each with its own sg_md5 at once is the
 * point. Blocks until buf's whole blocks are hashed. */
void sg_md5_update(struct sg_md5 *m, const void *buf, size_t n);
void sg_md5_final(struct sg_md5 *m, uint8_t out[16]);

/* Whether this thread's streams may be hashed in the lanes (default: no).
 * A thread that shares can sleep while another hashes its blocks with
 * theirs, and can hash others' blocks with its own: for threads that only
 * take in bodies (gateway/intake.c), not for the threads that serve hits. */
void sg_md5_share_lanes(bool on);

/* Whether the lanes are used (AVX2 present and not switched off). Off:
 * every stream is hashed by OpenSSL on its own thread. For benchmarks and
 * tests; set before any thread hashes. */
bool sg_md5_lanes_available(void);
void sg_md5_set_lanes(bool on);

/* The engine's counters since start: its steps by how many lanes were busy
 * (index 1..8), blocks hashed in lanes (two or more busy), and blocks
 * hashed without lanes (alone, by OpenSSL). */
struct sg_md5_stats {
    uint64_t steps_by_lanes[9];
    uint64_t blocks_alone;
    uint64_t blocks_in_lanes;
};
void sg_md5_stats(struct sg_md5_stats *out);

#endif
