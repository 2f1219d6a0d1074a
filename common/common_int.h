/* common/common_int.h - what the common library's files share and its unit
 * tests look at: how sg_crc32c cuts a buffer for ISA-L, and the two
 * CRC-64/NVME implementations behind sg_crc64nvme, and MD5's lane kernel.
 * Only common/, tests/unit/test_common_*.c and bench/crc_speed.c include
 * this. */
#ifndef SHARDGATE_COMMON_INT_H
#define SHARDGATE_COMMON_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ISA-L's crc32_iscsi takes an int length: sg_crc32c hands it pieces of
 * SG_CRC32C_PIECE bytes (any piece size from 1 to INT_MAX gives the same). */
#define SG_CRC32C_PIECE ((size_t)1 << 30)
uint32_t sg_crc32c_pieces(uint32_t crc, const void *buf, size_t n, size_t piece);

/* CRC-64/NVME by slicing-by-8 tables, on the register as it is (no
 * inversions: `crc` is the inverted CRC so far, ~0 at the start). */
uint64_t sg_crc64nvme_table(uint64_t crc, const void *buf, size_t n);

/* The same by PCLMULQDQ folding (crc64.c); only to be called when
 * sg_crc64nvme_have_clmul() says the CPU has the instruction. Falls back to
 * the tables for what is shorter than one 128-byte stride. */
uint64_t sg_crc64nvme_clmul(uint64_t crc, const void *buf, size_t n);
bool sg_crc64nvme_have_clmul(void);

/* MD5's AVX2 kernel (md5.c): lane i continues the state h[i] over nblocks
 * 64-byte blocks from p[i]. Only when sg_md5_lanes_available(). */
void sg_md5_lanes8(uint32_t *const h[8], const uint8_t *const p[8], size_t nblocks);

#endif
