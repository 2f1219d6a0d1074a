/* common/fs.h - small file-system helpers more than one module needs:
 * creating a directory path whose parents may be missing (the cache
 * directory, the store's state directory and data root, a lock's directory). */
#ifndef SHARDGATE_COMMON_FS_H
#define SHARDGATE_COMMON_FS_H

/* Creates the missing components of `path` (mode 0755), touching none that
 * exists: on a read-only mount or in a tree we may not write, an existing
 * directory must not turn into EROFS/EACCES, so each component is stat()ed
 * before mkdir. A component that exists and is not a directory is ENOTDIR;
 * "" is ENOENT; a path of PATH_MAX bytes or more is ENAMETOOLONG. 0, or -1
 * with errno. Any thread (a concurrent creator of the same path is fine). */
int sg_mkdir_missing(const char *path);

#endif
