/* cache/index_dir.c - the cache index's directory: created and opened at
 * open, and again under a running index when the directory has to be
 * recreated (it was deleted, or it was unusable and is usable again): the
 * index is then reset onto it - every entry dropped, a new journal - while
 * readers and fills go on (cidx_reset). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cidx_int.h"
#include "fs.h"
#include "log.h"

#define TRASH "trash"

/* Drops the index files in the directory, then moves objects/ into trash/
 * (a rename: instant whatever it holds). A crash between the two leaves an
 * empty index over old files: the next open's sweep removes them as strays. */
static int wipe(int dirfd, const char *dir)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        log_msg(LOG_LVL_ERROR, "cache", "list %s: %s", dir, strerror(e));
        errno = e;
        return -1;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, "journal.", 8) != 0 && strcmp(de->d_name, "index.snap") != 0 &&
            strcmp(de->d_name, "index.snap.tmp") != 0)
            continue;
        if (unlinkat(dirfd, de->d_name, 0) != 0 && errno != ENOENT) {
            int e = errno;
            log_msg(LOG_LVL_ERROR, "cache", "unlink %s/%s: %s", dir, de->d_name, strerror(e));
            closedir(d);
            errno = e;
            return -1;
        }
    }
    closedir(d);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char to[64];
    snprintf(to, sizeof to, TRASH "/objects.%" PRIx64,
             (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
    if ((mkdirat(dirfd, TRASH, 0755) != 0 && errno != EEXIST) ||
        (renameat(dirfd, "objects", dirfd, to) != 0 && errno != ENOENT)) {
        int e = errno;
        log_msg(LOG_LVL_ERROR, "cache", "move %s/objects to %s/%s: %s", dir, dir, to,
                strerror(e));
        errno = e;
        return -1;
    }
    fsync(dirfd);
    return 0;
}

int cidx_dirfds_open(const char *dir, bool do_wipe, int *dirfd, int *objfd, int subfd[256])
{
    *dirfd = *objfd = -1;
    for (unsigned d = 0; d < 256; d++)
        subfd[d] = -1;
    const char *what = "create";
    char sub[32] = "";
    int e = 0;
    if (sg_mkdir_missing(dir) != 0)
        goto fail;
    what = "open";
    if ((*dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        goto fail;
    if (do_wipe && wipe(*dirfd, dir) != 0) {
        e = errno;   /* logged with its path */
        goto out;
    }
    what = "create";
    snprintf(sub, sizeof sub, "/objects");
    if ((mkdirat(*dirfd, "objects", 0755) != 0 && errno != EEXIST) ||
        (*objfd = openat(*dirfd, "objects", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        goto fail;
    for (unsigned d = 0; d < 256; d++) {
        char dn[8];
        snprintf(dn, sizeof dn, "%02x", d);
        snprintf(sub, sizeof sub, "/objects/%s", dn);
        if ((mkdirat(*objfd, dn, 0755) != 0 && errno != EEXIST) ||
            (subfd[d] = openat(*objfd, dn, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
            goto fail;
    }
    return 0;
fail:
    e = errno;
    log_msg(LOG_LVL_ERROR, "cache", "cannot %s the cache directory %s%s: %s", what, dir, sub,
            strerror(e));
out:
    for (unsigned d = 0; d < 256; d++)
        if (subfd[d] >= 0)
            close(subfd[d]);
    if (*objfd >= 0)
        close(*objfd);
    if (*dirfd >= 0)
        close(*dirfd);
    *dirfd = *objfd = -1;
    for (unsigned d = 0; d < 256; d++)
        subfd[d] = -1;
    errno = e;
    return -1;
}

/* Puts fd in place of *slot. An open slot is replaced atomically (dup3), so
 * a thread opening a data file through it at that moment gets the old
 * directory or the new one, never a closed or reused descriptor. */
static void install(int *slot, int fd)
{
    if (*slot < 0) {
        *slot = fd;   /* detached: nobody reads it before the cache says "up" */
        return;
    }
    if (dup3(fd, *slot, O_CLOEXEC) < 0)
        log_msg(LOG_LVL_ERROR, "cache", "dup3: %s", strerror(errno));
    close(fd);
}

enum cidx_status cidx_reset(struct cidx *x, uint64_t *dropped)
{
    *dropped = 0;
    int dirfd, objfd, subfd[256];
    /* compact_mu: no compaction or journal sync runs against the old directory
     * while we swap it (they would write a snapshot there, or into the new one). */
    pthread_mutex_lock(&x->compact_mu);
    if (cidx_dirfds_open(x->dir, true, &dirfd, &objfd, subfd) != 0) {
        int e = errno;
        pthread_mutex_unlock(&x->compact_mu);
        errno = e;
        return CIDX_IO;
    }
    install(&x->dirfd, dirfd);
    install(&x->objfd, objfd);
    for (unsigned d = 0; d < 256; d++)
        install(&x->subfd[d], subfd[d]);
    enum cidx_status st = cidx_jnl_restart(x);
    int e = errno;
    /* Dropped after the switch: an entry published meanwhile into the old
     * directory is gone too (its file is not in the new one). One published into
     * the new one between the switch and its shard's turn leaves a stray file,
     * which the next open's sweep removes. */
    for (unsigned s = 0; s < CIDX_NSHARD; s++)
        *dropped += cidx_shard_clear(x, s);
    pthread_mutex_unlock(&x->compact_mu);
    errno = e;
    return st;
}

/* Removes name (a file or a tree) under dfd; returns the files removed. The
 * trash is at most trash/objects.N/xx/file: depth bounds the recursion. */
static unsigned long rm_tree(int dfd, const char *name, int depth)
{
    unsigned long n = 0;
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        if (unlinkat(dfd, name, 0) == 0)
            return 1;
        return 0;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (unlinkat(fd, de->d_name, 0) == 0)
            n++;
        else if (errno == EISDIR && depth < 4)
            n += rm_tree(fd, de->d_name, depth + 1);
    }
    closedir(d);
    unlinkat(dfd, name, AT_REMOVEDIR);
    return n;
}

unsigned long cidx_trash_empty(struct cidx *x)
{
    int dfd = open(x->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return 0;
    unsigned long n = 0;
    struct stat st;
    if (fstatat(dfd, TRASH, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
        n = rm_tree(dfd, TRASH, 0);
    close(dfd);
    return n;
}

const char *cidx_dir(const struct cidx *x)
{
    return x->dir;
}

/* "Read-only file system (EROFS)" for an errno. */
static void err_text(int e, char *buf, size_t len)
{
    const char *name = strerrorname_np(e);
    snprintf(buf, len, "%s (%s)", strerror(e), name ? name : "?");
}

int cidx_dir_probe(const char *dir, char *why, size_t len)
{
    char et[96];
    int fd = -1, pfd = -1, e = 0;
    const char *what;
    if (sg_mkdir_missing(dir) != 0) {
        e = errno;
        what = e == EROFS ? "cannot be created: its file system is read-only"
                          : "cannot be created";
        goto fail;
    }
    if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        e = errno;
        what = e == ENOTDIR ? "is not a directory" : "cannot be opened";
        goto fail;
    }
    /* access() says EROFS / EACCES without writing anything; the probe file
     * then proves a write and a sync go through (EIO, a full disk). */
    if (faccessat(fd, ".", W_OK, AT_EACCESS) != 0) {
        e = errno;
        goto denied;
    }
    static const char probe[] = ".probe";
    char buf[512];
    memset(buf, 0x5a, sizeof buf);
    if ((pfd = openat(fd, probe, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644)) < 0) {
        e = errno;
        goto denied;
    }
    errno = 0;
    if (write(pfd, buf, sizeof buf) != (ssize_t)sizeof buf || fdatasync(pfd) != 0) {
        e = errno ? errno : EIO;
        what = "cannot be written (a probe file failed)";
        unlinkat(fd, probe, 0);
        goto fail;
    }
    close(pfd);
    pfd = -1;
    if (unlinkat(fd, probe, 0) != 0) {
        e = errno;
        goto denied;
    }
    close(fd);
    if (len)
        why[0] = '\0';
    return 0;
denied:
    what = e == EROFS ? "is read-only" : e == EACCES || e == EPERM ? "is not writable"
                                                                  : "cannot be written";
fail:
    err_text(e, et, sizeof et);
    snprintf(why, len, "cache directory %s %s: %s", dir, what, et);
    if (pfd >= 0)
        close(pfd);
    if (fd >= 0)
        close(fd);
    return e ? e : EIO;
}
