/* common/crc.c - CRC-32 and CRC-32C through ISA-L, which picks its fastest
 * version for the CPU at run time (PCLMULQDQ folding, the SSE4.2 crc32
 * instruction in three streams). Measured against our former slicing-by-8
 * tables, the SSE4.2 loop and zlib's crc32: bench/results/crc.md. */
#include "common_int.h"
#include "crc.h"

#include <isa-l/crc.h>

uint32_t sg_crc32(uint32_t crc, const void *buf, size_t n)
{
    /* crc32_gzip_refl is zlib's crc32: the inversions are inside. Nothing
     * to do for n == 0, whatever buf is (NULL included). */
    if (n == 0)
        return crc;
    return crc32_gzip_refl(crc, buf, n);
}

uint32_t sg_crc32c_pieces(uint32_t crc, const void *buf, size_t n, size_t piece)
{
    const unsigned char *p = buf;
    uint32_t c = ~crc;
    while (n > 0) {
        size_t k = n < piece ? n : piece;
        c = crc32_iscsi((unsigned char *)p, (int)k, c);
        p += k;
        n -= k;
    }
    return ~c;
}

uint32_t sg_crc32c(uint32_t crc, const void *buf, size_t n)
{
    /* crc32_iscsi works on the register as it is (no inversions) and takes
     * an int length: a piece of 1 GiB at a time. It does not write to the
     * buffer, whatever its prototype says. */
    return sg_crc32c_pieces(crc, buf, n, SG_CRC32C_PIECE);
}
