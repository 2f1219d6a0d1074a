/* common/dirlock.c - the directory lock of dirlock.h: flock(2) on DIR/lock.
 * flock rather than a POSIX record lock: a record lock is dropped when ANY
 * descriptor of the file is closed by the process, and belongs to the process
 * rather than the open file, so a second open in one process would not
 * conflict. flock (like an OFD lock) belongs to the open file description. */
#include "dirlock.h"
#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

struct sg_dirlock {
    int fd;
};

static long pid_parse(const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || v <= 0 || (*end != '\n' && *end != '\0'))
        return 0;
    return v;
}

static long pid_read_fd(int fd)
{
    char buf[32];
    ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
    if (got <= 0)
        return 0;
    buf[got] = '\0';
    return pid_parse(buf);
}

/* The pid holding a flock on fd's file, from /proc/locks ("1: FLOCK
 * ADVISORY WRITE 1234 fe:00:247066 0 EOF"), or 0. */
static long pid_from_proc_locks(int fd)
{
    struct stat st;
    FILE *f = fstat(fd, &st) == 0 ? fopen("/proc/locks", "re") : NULL;
    if (!f)
        return 0;
    char line[256];
    long found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char kind[16];
        long pid;
        unsigned maj, min;
        unsigned long long ino;
        if (sscanf(line, "%*d: %15s %*s %*s %ld %x:%x:%llu", kind, &pid, &maj, &min, &ino) == 5 &&
            strcmp(kind, "FLOCK") == 0 && maj == major(st.st_dev) && min == minor(st.st_dev) &&
            ino == (unsigned long long)st.st_ino && pid > 0 && pid != (long)getpid())
            found = pid;
    }
    fclose(f);
    return found;
}

long sg_dirlock_holder(const char *dir)
{
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, SG_DIRLOCK_NAME) >= sizeof path)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return 0;
    long pid = pid_read_fd(fd);
    close(fd);
    return pid;
}

static void msg(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void msg(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* What a take returns until it knows better. */
static void no_lock_yet(struct sg_dirlock **out, int *errnum, char *err, size_t errlen)
{
    *out = NULL;
    *errnum = 0;
    if (err && errlen)
        err[0] = '\0';
}

/* A handle that owns fd; NULL when out of memory (fd closed, *errnum and
 * err say so). */
static struct sg_dirlock *handle_new(int fd, const char *dir, const char *what, int *errnum,
                                     char *err, size_t errlen)
{
    struct sg_dirlock *l = malloc(sizeof *l);
    if (!l) {
        close(fd);
        *errnum = ENOMEM;
        msg(err, errlen, "%s %s: %s", what, dir, strerror(ENOMEM));
        return NULL;
    }
    l->fd = fd;
    return l;
}

enum sg_dirlock_status sg_dirlock_take(const char *dir, const char *what,
                                       struct sg_dirlock **out, int *errnum, char *err,
                                       size_t errlen)
{
    no_lock_yet(out, errnum, err, errlen);
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, SG_DIRLOCK_NAME) >= sizeof path) {
        *errnum = ENAMETOOLONG;
        msg(err, errlen, "%s %s: %s", what, dir, strerror(ENAMETOOLONG));
        return SG_DIRLOCK_ERRNO;
    }
    if (sg_mkdir_missing(dir) != 0) {
        *errnum = errno;
        msg(err, errlen, "cannot create the %s %s: %s", what, dir, strerror(*errnum));
        return SG_DIRLOCK_ERRNO;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        *errnum = errno;
        msg(err, errlen, "cannot open %s: %s", path, strerror(*errnum));
        return SG_DIRLOCK_ERRNO;
    }
    struct sg_dirlock *l = handle_new(fd, dir, what, errnum, err, errlen);
    if (!l)
        return SG_DIRLOCK_ERRNO;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        *errnum = e;
        if (e == EWOULDBLOCK) {
            /* The holder writes its pid just after locking: give a holder
             * caught in between a moment (200 ms at most) to do so. */
            long pid = pid_read_fd(fd);
            for (int i = 0; i < 20 && pid == 0; i++) {
                nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
                pid = pid_read_fd(fd);
            }
            if (pid == 0)
                pid = pid_from_proc_locks(fd);
            if (pid > 0)
                msg(err, errlen, "the %s %s is in use by another shardgate (pid %ld, "
                    "lock file %s): one directory serves one gateway", what, dir, pid, path);
            else
                msg(err, errlen, "the %s %s is in use by another shardgate (pid unknown, "
                    "lock file %s): one directory serves one gateway", what, dir, path);
            sg_dirlock_release(l);
            return SG_DIRLOCK_BUSY;
        }
        if (e == ENOLCK || e == EOPNOTSUPP || e == ENOSYS || e == EINVAL) {
            msg(err, errlen, "cannot lock %s (%s): the file system has no flock, so a "
                "second gateway on the %s %s would not be refused", path, strerror(e), what,
                dir);
            *out = l;
            return SG_DIRLOCK_UNSUPPORTED;
        }
        msg(err, errlen, "cannot lock %s: %s", path, strerror(e));
        sg_dirlock_release(l);
        return SG_DIRLOCK_ERRNO;
    }
    /* The pid is for messages only: a failed write does not lose the lock. */
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
        /* nothing to undo: the lock is held, the pid just is not shown */
    }
    *out = l;
    return SG_DIRLOCK_OK;
}

enum sg_dirlock_status sg_dirlock_take_dir(const char *dir, const char *what,
                                           struct sg_dirlock **out, int *errnum, char *err,
                                           size_t errlen)
{
    no_lock_yet(out, errnum, err, errlen);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        *errnum = errno;
        msg(err, errlen, "cannot open the %s %s: %s", what, dir, strerror(*errnum));
        return SG_DIRLOCK_ERRNO;
    }
    struct sg_dirlock *l = handle_new(fd, dir, what, errnum, err, errlen);
    if (!l)
        return SG_DIRLOCK_ERRNO;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
        *out = l;
        return SG_DIRLOCK_OK;
    }
    int e = errno;
    *errnum = e;
    if (e == EWOULDBLOCK) {
        long pid = pid_from_proc_locks(fd);
        if (pid > 0)
            msg(err, errlen, "the %s %s is in use by another shardgate (pid %ld): one "
                "directory serves one gateway", what, dir, pid);
        else
            msg(err, errlen, "the %s %s is in use by another shardgate: one directory "
                "serves one gateway", what, dir);
        sg_dirlock_release(l);
        return SG_DIRLOCK_BUSY;
    }
    /* e.g. NFS, where flock needs a descriptor open for writing */
    msg(err, errlen, "cannot lock the %s %s (%s): a second gateway on it would not be "
        "refused", what, dir, strerror(e));
    *out = l;
    return SG_DIRLOCK_UNSUPPORTED;
}

void sg_dirlock_release(struct sg_dirlock *l)
{
    if (!l)
        return;
    close(l->fd);   /* drops the flock; the file stays for the next holder */
    free(l);
}
