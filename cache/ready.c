/* cache/ready.c - readiness of the cache tier for /_shardgate/ready: the
 * cache directory is there and takes new files. A plain access(2) check: it
 * says nothing of free space or of a disk that fails writes. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "cache_int.h"

bool cache_ready(struct cache *c, char *why, size_t len)
{
    const char *dir = cache_dir_of(c);
    if (access(dir, W_OK | X_OK) != 0) {
        int e = errno;
        snprintf(why, len, "the cache directory is not writable: %s", strerror(e));
        return false;
    }
    snprintf(why, len, "the cache directory is writable");
    return true;
}
