/* common/fs.c - the file-system helpers of fs.h. */
#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

int sg_mkdir_missing(const char *path)
{
    char buf[PATH_MAX];
    size_t n = strlen(path);
    if (n == 0) {
        errno = ENOENT;
        return -1;
    }
    if (n >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char saved = buf[i];
        buf[i] = '\0';
        struct stat st;
        if (stat(buf, &st) != 0) {
            if (errno != ENOENT || (mkdir(buf, 0755) != 0 && errno != EEXIST))
                return -1;
        } else if (!S_ISDIR(st.st_mode)) {
            errno = ENOTDIR;
            return -1;
        }
        buf[i] = saved;
    }
    return 0;
}

int sg_reopen_direct(int fd)
{
    char path[40];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
}
