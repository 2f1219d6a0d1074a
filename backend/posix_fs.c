/* backend/posix_fs.c - the file-system footing of the posix store: opening a
 * path beneath a directory without following a symlink or leaving it
 * (openat2, else an O_NOFOLLOW walk), the errno -> status mappings, the type
 * of a directory entry, and the early-exit walk for an object. */
#include "posix_int.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int posix_force_walk;
/* Set once openat2 returned ENOSYS; from then on we walk components. */
static atomic_int g_no_openat2;

enum backend_status posix_errno_status(int err)
{
    switch (err) {
    case ENOENT:
    case ENOTDIR:
        return BACKEND_NO_KEY;
    case ELOOP:
    case EXDEV:
        return BACKEND_DENIED;
    case ENOSPC:
    case EDQUOT:
        return BACKEND_NO_SPACE;
    case ENOMEM:
        return BACKEND_NOMEM;
    case ENAMETOOLONG:
        return BACKEND_KEY_TOO_LONG;
    case EROFS:
        return BACKEND_READ_ONLY;
    default:
        return BACKEND_IO;
    }
}

enum backend_status posix_write_errno_status(int err)
{
    switch (err) {
    case ENOSPC:
    case EDQUOT:
        return BACKEND_NO_SPACE;
    case EROFS:
    case EACCES:
    case EPERM:
        return BACKEND_READ_ONLY;
    default:
        return BACKEND_IO;
    }
}

/* The fallback of openat2: one openat(O_NOFOLLOW) per component, checking
 * that each intermediate one is a real directory. */
static int walk_open(int dirfd, const char *path, int flags, mode_t mode)
{
    int cur = dirfd;
    const char *p = path;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len == 0 || len > POSIX_SEG_MAX || (len == 1 && p[0] == '.') ||
            (len == 2 && p[0] == '.' && p[1] == '.')) {
            if (cur != dirfd)
                close(cur);
            errno = EXDEV;
            return -1;
        }
        if (!slash) {
            int fd = openat(cur, p, flags | O_NOFOLLOW | O_CLOEXEC, mode);
            int e = errno;
            struct stat lst;
            /* O_DIRECTORY|O_NOFOLLOW on a symlink says ENOTDIR: say ELOOP
             * like openat2 does, so callers see a symlink. */
            if (fd < 0 && e == ENOTDIR && fstatat(cur, p, &lst, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISLNK(lst.st_mode))
                e = ELOOP;
            if (cur != dirfd)
                close(cur);
            errno = e;
            return fd;
        }
        char comp[POSIX_SEG_MAX + 1];
        memcpy(comp, p, len);
        comp[len] = '\0';
        int nfd = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        struct stat st;
        if (nfd >= 0 && fstat(nfd, &st) != 0) {
            e = errno;
            close(nfd);
            nfd = -1;
        } else if (nfd >= 0 && !S_ISDIR(st.st_mode)) {
            e = S_ISLNK(st.st_mode) ? ELOOP : ENOTDIR;
            close(nfd);
            nfd = -1;
        }
        if (cur != dirfd)
            close(cur);
        if (nfd < 0) {
            errno = e;
            return -1;
        }
        cur = nfd;
        p = slash + 1;
    }
}

int posix_open_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
    if (!posix_force_walk && !atomic_load(&g_no_openat2)) {
        struct open_how how = {
            .flags = (uint64_t)(flags | O_CLOEXEC),
            .mode = (flags & O_CREAT) ? mode : 0,
            .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
        if (fd >= 0 || errno != ENOSYS)
            return (int)fd;
        atomic_store(&g_no_openat2, 1);
        log_msg(LOG_LVL_WARN, "backend", "openat2 unavailable: walking paths component-wise");
    }
    return walk_open(dirfd, path, flags, mode);
}

DIR *posix_dir_stream(int dirfd)
{
    /* "." opens a new open file description; a dup would share the
     * position with every other reader of dirfd. */
    int fd = openat(dirfd, ".", O_DIRECTORY | O_RDONLY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d && fd >= 0) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return d;
}

/* d_type, or an fstatat when the filesystem does not fill it. */
unsigned char posix_entry_type(int dirfd, const struct dirent *de)
{
    if (de->d_type != DT_UNKNOWN)
        return de->d_type;
    struct stat st;
    if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return DT_UNKNOWN;
    if (S_ISREG(st.st_mode))
        return DT_REG;
    if (S_ISDIR(st.st_mode))
        return DT_DIR;
    if (S_ISLNK(st.st_mode))
        return DT_LNK;
    return DT_UNKNOWN;
}

int posix_dir_has_object(int dirfd)
{
    DIR *d = posix_dir_stream(dirfd);
    if (!d)
        return -1;
    int found = 0;
    struct dirent *de;
    while (!found && (de = readdir(d)) != NULL) {
        const char *n = de->d_name;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
            continue;
        bool visible = strcmp(n, POSIX_EMPTY_SEG) == 0 || strcmp(n, POSIX_SELF) == 0 ||
                       strncmp(n, POSIX_RESERVED, 4) != 0;
        if (!visible)
            continue;
        unsigned char t = posix_entry_type(dirfd, de);
        if (t == DT_REG) {
            found = 1;
        } else if (t == DT_DIR) {
            int sub = openat(dirfd, n, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
            if (sub < 0)
                continue;
            found = posix_dir_has_object(sub);
            close(sub);
        }
    }
    closedir(d);
    return found;
}
