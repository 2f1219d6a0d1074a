/* backend/posix_probe.c - the directory store's answer to backend_probe: is
 * its root still there and readable? A local stat, not bounded in time (a
 * hung NFS mount hangs it too: out of scope, README "Health"). */
#include "posix_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum backend_status posix_probe(struct backend *base, unsigned timeout_ms, char *why,
                                size_t len)
{
    (void)timeout_ms;
    const struct posix_store *b = (const struct posix_store *)base;
    struct stat st;
    /* rootfd stays open after the directory is removed: a removed root
     * shows as a directory with no links. */
    if (fstat(b->rootfd, &st) != 0) {
        int e = errno;
        snprintf(why, len, "the data directory cannot be read: %s", strerror(e));
        return BACKEND_UNAVAILABLE;
    }
    if (st.st_nlink == 0) {
        snprintf(why, len, "the data directory was removed");
        return BACKEND_UNAVAILABLE;
    }
    if (faccessat(b->rootfd, ".", R_OK | X_OK, AT_EACCESS) != 0) {
        int e = errno;
        snprintf(why, len, "the data directory cannot be read: %s", strerror(e));
        return BACKEND_UNAVAILABLE;
    }
    snprintf(why, len, "the data directory is readable");
    return BACKEND_OK;
}
