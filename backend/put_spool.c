/* backend/put_spool.c - what both cold tiers do with a put's body: append it
 * to a local file under a size cap (posix: the temp file it renames into
 * place; s3: the unlinked spool it uploads at commit). */
#include "backend_int.h"

#include <errno.h>
#include <unistd.h>

enum backend_status backend_spool_append(int fd, const void *buf, size_t len, uint64_t *size,
                                         uint64_t max_size, int *err)
{
    *err = 0;
    if (len > max_size - *size)
        return BACKEND_TOO_LARGE;
    const char *c = buf;
    while (len > 0) {
        ssize_t n = write(fd, c, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            *err = n < 0 ? errno : EIO;
            return BACKEND_IO;
        }
        c += n;
        len -= (size_t)n;
        *size += (uint64_t)n;
    }
    return BACKEND_OK;
}
