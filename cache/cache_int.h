/* cache/cache_int.h - internals of the cache tier that its unit tests use:
 * the header block at the start of every cache data file. */
#ifndef SHARDGATE_CACHE_INT_H
#define SHARDGATE_CACHE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

/* A cache data file: [header block, padded to 4 KiB][object bytes]. The
 * header holds what a hit needs to answer like the cold tier (size, ETag,
 * Last-Modified, stored headers). Whether the file is complete is not the
 * file's business: only the index's published entries are served. */
#define CACHE_HDR_MAGIC "SGC1"
#define CACHE_HDR_ALIGN 4096u
#define CACHE_HDR_MAX (64u * 1024)

/* Encodes m into buf (cap bytes); *len gets the header's length (the data
 * starts at cache_hdr_data_offset(*len)). 0, or -1 when it does not fit. */
int cache_hdr_encode(const struct obj_meta *m, uint8_t *buf, size_t cap, size_t *len);
/* Decodes a header block; m (cleared by the caller) gets new strings. 0 or -1. */
int cache_hdr_decode(const uint8_t *buf, size_t len, struct obj_meta *m);
uint64_t cache_hdr_data_offset(size_t hdr_len);

/* Is etag (bare) a plain MD5 - 32 hex digits - that a fill can verify? */
int cache_etag_is_md5(const char *etag);

#endif
