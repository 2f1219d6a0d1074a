/* common/dirlock.h - one owner per directory: an advisory lock on a file inside
 * a directory (the cache directory, the directory store's state directory),
 * held until released or until the process dies, with the holder's pid
 * written into the file so that a second start can name it. Self-contained
 * (libc only) so that any module can use it. */
#ifndef SHARDGATE_COMMON_DIRLOCK_H
#define SHARDGATE_COMMON_DIRLOCK_H

#include <stddef.h>

/* The lock file's name inside the locked directory. */
#define SG_DIRLOCK_NAME "lock"

struct sg_dirlock;   /* opaque: one held lock */

enum sg_dirlock_status {
    SG_DIRLOCK_OK = 0,
    SG_DIRLOCK_BUSY,        /* another process (or handle) holds it */
    SG_DIRLOCK_ERRNO,       /* the directory or its lock file could not be
                                 created or opened: *errnum says why */
    SG_DIRLOCK_UNSUPPORTED, /* the file system has no flock(2) (some FUSE and
                                 old NFS mounts): *out is a handle holding no
                                 lock; the caller decides whether to go on */
};

/* Locks directory `dir`, creating it (and missing parents, mode 0755) when
 * it does not exist: opens or creates dir/SG_DIRLOCK_NAME, takes an
 * exclusive flock(2) without waiting and writes our pid into the file. The
 * lock belongs to the open file, so it ends when the handle is released or
 * the process dies (kill -9 included); the file itself stays. `what` names
 * the directory in messages ("cache directory"). On every status but OK, err
 * receives one line naming the path and the errno text, or (BUSY) the
 * holder's pid; *errnum receives the errno (EWOULDBLOCK for BUSY). *out is a
 * new handle with OK and UNSUPPORTED, NULL otherwise. Any thread. */
enum sg_dirlock_status sg_dirlock_take(const char *dir, const char *what,
                                       struct sg_dirlock **out, int *errnum, char *err,
                                       size_t errlen);

/* Locks the directory `dir` itself (flock on the directory, opened
 * read-only): writes nothing, so it works on a tree the process may not
 * write. The holder's pid, for the BUSY message, comes from /proc/locks
 * when it shows it. Same statuses and contract as sg_dirlock_take, except
 * that a missing directory is ERRNO (ENOENT), not created. */
enum sg_dirlock_status sg_dirlock_take_dir(const char *dir, const char *what,
                                           struct sg_dirlock **out, int *errnum, char *err,
                                           size_t errlen);

/* Releases the lock and frees the handle (NULL is fine). */
void sg_dirlock_release(struct sg_dirlock *l);

/* The pid written in dir/SG_DIRLOCK_NAME, or 0 when there is none. For
 * messages and tests; says nothing about whether the lock is held. */
long sg_dirlock_holder(const char *dir);

#endif
