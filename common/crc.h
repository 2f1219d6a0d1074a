/* common/crc.h - the CRCs of S3's x-amz-checksum-* headers and of the cache
 * index's journal: CRC-32 (IEEE, as zlib's crc32), CRC-32C (Castagnoli) and
 * CRC-64/NVME. A multi-GiB upload runs through them, so CRC-32 and CRC-32C
 * are ISA-L's (folding with PCLMULQDQ / the crc32 instruction, picked at run
 * time) and CRC-64/NVME, which ISA-L 2.30 lacks, is ours (crc64.c). */
#ifndef SHARDGATE_COMMON_CRC_H
#define SHARDGATE_COMMON_CRC_H

#include <stddef.h>
#include <stdint.h>

/* Each continues a CRC over buf[0..n): pass 0 to start, and the previous
 * result to go on, so crc(crc(0, a), b) == crc(0, a b). The pre- and
 * post-inversions are inside, like zlib's crc32(). Check values of
 * "123456789": 0xCBF43926, 0xE3069283, 0xAE8B14860A799888. Pure, any
 * thread, any length and alignment. */
uint32_t sg_crc32(uint32_t crc, const void *buf, size_t n);
uint32_t sg_crc32c(uint32_t crc, const void *buf, size_t n);
uint64_t sg_crc64nvme(uint64_t crc, const void *buf, size_t n);

#endif
