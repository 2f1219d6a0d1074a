/* backend/posix_nest.c - keys that are also prefixes of other keys ("a/b"
 * beside "a/b/c", the folder marker "a/" beside "a//x") on the directory
 * store, where a name is either a file or a directory. A key is its file
 * while nothing lies below it (a plain dataset tree stays as it is); once a
 * key below it is written, the file moves into the new directory under the
 * reserved name POSIX_SELF, and an object written to a name that is a
 * directory goes there at once. Readers, listings, conditions and deletes
 * look in both places.
 *
 * The move is one atomic exchange of names (renameat2 RENAME_EXCHANGE): a
 * directory holding a second link of the file as POSIX_SELF is built in the
 * bucket's .sg~tmp/, then swapped with the file, whose old name is dropped.
 * A reader sees the file or the directory, never neither; a crash leaves
 * only an extra link in .sg~tmp/, which the reclaim at open removes. */
#include "posix_int.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum backend_status posix_nest_target(int dirfd, const char *leaf, int *tfd,
                                      const char **tleaf)
{
    *tfd = dirfd;
    *tleaf = leaf;
    struct stat st;
    if (fstatat(dirfd, leaf, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return BACKEND_OK;   /* absent: the plain file */
    if (S_ISLNK(st.st_mode))
        return BACKEND_DENIED;
    if (!S_ISDIR(st.st_mode))
        return BACKEND_OK;
    int fd = openat(dirfd, leaf, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR ? BACKEND_NO_KEY : posix_errno_status(errno);
    *tfd = fd;
    *tleaf = POSIX_SELF;
    return BACKEND_OK;
}

/* A file system without hard links or RENAME_EXCHANGE keeps today's rule: a
 * key cannot also be a prefix there. */
static enum backend_status nest_errno_status(const char *what, int e)
{
    if (e == EINVAL || e == ENOSYS || e == EOPNOTSUPP || e == EPERM || e == EMLINK || e == EXDEV)
        return BACKEND_KEY_CONFLICT;
    enum backend_status s = posix_write_errno_status(e);
    if (s == BACKEND_IO)
        log_msg(LOG_LVL_ERROR, "backend", "%s: %s", what, strerror(e));
    return s;
}

enum backend_status posix_nest_file(struct posix_store *b, int bucketfd, unsigned slot,
                                    int cur, const char *comp)
{
    char name[sizeof POSIX_TMP_PREFIX + 16];
    size_t pl = strlen(POSIX_TMP_PREFIX);
    memcpy(name, POSIX_TMP_PREFIX, pl);
    if (posix_random_chars(name + pl, 16) != 0)
        return BACKEND_IO;
    name[pl + 16] = '\0';
    int tmp = posix_tmpdir_open(bucketfd, cur);
    if (tmp < 0)
        return BACKEND_KEY_CONFLICT;   /* no temp directory on this file system */
    enum backend_status s = BACKEND_OK;
    int sub = -1;
    bool made = false;
    posix_key_lock(b, slot);   /* no commit or delete of the key meanwhile */
    struct stat st;
    if (fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
        goto out;   /* deleted or nested meanwhile: the caller looks again */
    if (mkdirat(tmp, name, 0755) != 0) {
        s = nest_errno_status("mkdir", errno);
        goto out;
    }
    made = true;
    sub = openat(tmp, name, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
    if (sub < 0 || linkat(cur, comp, sub, POSIX_SELF, 0) != 0) {
        s = nest_errno_status("link", errno);
        goto out;
    }
    if (fsync(sub) != 0 || fsync(tmp) != 0) {
        s = nest_errno_status("fsync", errno);
        goto out;
    }
    if (renameat2(tmp, name, cur, comp, RENAME_EXCHANGE) != 0) {
        s = nest_errno_status("exchange", errno);
        goto out;
    }
    /* name in .sg~tmp/ is now the file's old link; the object lives on as
     * comp/POSIX_SELF */
    made = false;
    if (unlinkat(tmp, name, 0) != 0)
        log_msg(LOG_LVL_WARN, "backend", "cannot remove %s: %s", name, strerror(errno));
    if (fsync(cur) != 0)
        log_msg(LOG_LVL_WARN, "backend", "fsync directory: %s", strerror(errno));
out:
    if (made) {
        if (sub >= 0)
            unlinkat(sub, POSIX_SELF, 0);
        unlinkat(tmp, name, AT_REMOVEDIR);
    }
    posix_key_unlock(b, slot);
    if (sub >= 0)
        close(sub);
    close(tmp);
    return s;
}
