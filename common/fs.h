/* common/fs.h - small file-system helpers more than one module needs:
 * creating a directory path whose parents may be missing (the cache
 * directory, the store's state directory and data root, a lock's directory),
 * and a second, O_DIRECT descriptor of an open file (write-back staging). */
#ifndef SHARDGATE_COMMON_FS_H
#define SHARDGATE_COMMON_FS_H

/* Creates the missing components of `path` (mode 0755), touching none that
 * exists: on a read-only mount or in a tree we may not write, an existing
 * directory must not turn into EROFS/EACCES, so each component is stat()ed
 * before mkdir. A component that exists and is not a directory is ENOTDIR;
 * "" is ENOENT; a path of PATH_MAX bytes or more is ENAMETOOLONG. 0, or -1
 * with errno. Any thread (a concurrent creator of the same path is fine). */
int sg_mkdir_missing(const char *path);

/* A new read-only O_DIRECT descriptor (close-on-exec) of the file fd is
 * open on, whatever its name is now (through /proc/self/fd), or -1 with
 * errno (no /proc, or a file system without O_DIRECT). */
int sg_reopen_direct(int fd);

#endif
