/* common/checksum.h - the payload checksums of S3's x-amz-checksum-*
 * headers as streaming objects: CRC-32, CRC-32C, CRC-64/NVME (crc.h) and
 * SHA-1 / SHA-256 (OpenSSL). */
#ifndef SHARDGATE_COMMON_CHECKSUM_H
#define SHARDGATE_COMMON_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

struct evp_md_ctx_st;

enum sg_ck_algo {
    SG_CK_NONE = 0,
    SG_CK_CRC32,
    SG_CK_CRC32C,
    SG_CK_CRC64NVME,
    SG_CK_SHA1,
    SG_CK_SHA256,
};

/* "crc32", "CRC32", "x-amz-checksum-crc32" -> SG_CK_CRC32; unknown ->
 * SG_CK_NONE. */
enum sg_ck_algo sg_ck_from_name(const char *name);
const char *sg_ck_header(enum sg_ck_algo a);   /* "x-amz-checksum-crc32" */
size_t sg_ck_len(enum sg_ck_algo a);           /* digest bytes */

struct sg_ck {
    enum sg_ck_algo algo;
    uint32_t crc32;
    uint64_t crc64;
    struct evp_md_ctx_st *md;      /* SHA1 / SHA256 */
};

/* Returns 0, or -1 when out of memory. */
int sg_ck_init(struct sg_ck *c, enum sg_ck_algo a);
void sg_ck_update(struct sg_ck *c, const void *buf, size_t n);
/* Writes the big-endian digest; returns its length (0 on failure). */
size_t sg_ck_final(struct sg_ck *c, uint8_t out[32]);
void sg_ck_free(struct sg_ck *c);

#endif
