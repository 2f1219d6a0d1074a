/* common/le.h - little-endian integers in byte buffers: the on-disk record
 * formats (the cache index's journal, the write-back journal) are written
 * byte by byte so that they read the same on any host. Pure, any thread. */
#ifndef SHARDGATE_COMMON_LE_H
#define SHARDGATE_COMMON_LE_H

#include <stdint.h>

static inline void sg_put_le16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static inline void sg_put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline void sg_put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint16_t sg_get_le16(const unsigned char *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t sg_get_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t sg_get_le64(const unsigned char *p)
{
    return (uint64_t)sg_get_le32(p) | (uint64_t)sg_get_le32(p + 4) << 32;
}

#endif
