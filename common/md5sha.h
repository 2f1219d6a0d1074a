/* common/md5sha.h - MD5 and SHA-256 of one byte stream in one pass.
 *
 * A body whose payload is signed (x-amz-content-sha256 is its SHA-256, as
 * boto3 and aws-cli send over plain HTTP) is hashed twice: SHA-256 for the
 * signature, MD5 for the ETag. Both are chains, and each leaves most of the
 * core idle: MD5 waits on its scalar adds and rotates, SHA-256 with the
 * SHA extensions on the vector unit's sha256rnds2. Interleaved step by step
 * over the same 64-byte block they overlap, and the pair costs little more
 * than MD5 alone: 1.82 against 2.47 CPU-s per GiB for OpenSSL's two passes
 * on this machine (bench/results/md5sha.md).
 *
 * The results are the plain MD5 and SHA-256: the tests compare them with
 * OpenSSL's over the standard vectors and random splits and lengths
 * (tests/unit/test_common_md5sha.c). Without the SHA extensions
 * sg_md5sha_available() is false and callers hash as before. */
#ifndef SHARDGATE_COMMON_MD5SHA_H
#define SHARDGATE_COMMON_MD5SHA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sg_md5sha {
    uint32_t md5[4];
    uint32_t sha[8];
    uint64_t length;        /* bytes so far */
    uint8_t tail[64];       /* the bytes of a block not yet whole */
    unsigned n_tail;
};

/* The CPU has the SHA extensions (and SSE4.1), and the one-pass hash is on:
 * by default in a gcc build, not in a clang build (md5sha.c says why). */
bool sg_md5sha_available(void);
/* For benchmarks and tests: on where the CPU has it, or off. */
void sg_md5sha_set(bool on);

/* Only where sg_md5sha_available() said yes. */
void sg_md5sha_init(struct sg_md5sha *h);
void sg_md5sha_update(struct sg_md5sha *h, const void *buf, size_t n);
void sg_md5sha_final(struct sg_md5sha *h, uint8_t md5[16], uint8_t sha256[32]);

/* Bytes hashed by sg_md5sha_update() since start (/metrics). */
unsigned long long sg_md5sha_bytes(void);

#endif
