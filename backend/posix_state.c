/* backend/posix_state.c - opening and closing the posix store: the root, the
 * state directory (multipart uploads; by default ROOT/.shardgate, or
 * state_dir) and its lock, the read-only mode of a tree we may not write,
 * the start-up reclaim, the warning about directories that cannot be
 * buckets, and the thread that aborts old uploads. */
#include "posix_int.h"
#include "dirlock.h"
#include "fs.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* At most this many names in the warning about skipped directories: a tree
 * of thousands of non-bucket directories gets one readable line. */
#define POSIX_WARN_NAMES 10

/* Why the open failed: into cf->err when the caller gave one (it reports
 * it), else into the log. */
static void open_fail(const struct backend_posix_conf *cf, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void open_fail(const struct backend_posix_conf *cf, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (cf->err && cf->err_len)
        snprintf(cf->err, cf->err_len, "%s", buf);
    else
        log_msg(LOG_LVL_ERROR, "backend", "%s", buf);
}

static int open_root(const char *root)
{
    int fd = open(root, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
    if (fd >= 0 || errno != ENOENT)
        return fd;
    if (sg_mkdir_missing(root) != 0)
        return -1;
    return open(root, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
}

/* Names, in one warning, the directories of ROOT that are not served
 * because their names are not valid S3 bucket names. One readdir of ROOT:
 * bounded by ROOT's entries, not by the objects below them. */
static void warn_skipped_dirs(int rootfd, const char *root)
{
    DIR *d = posix_dir_stream(rootfd);
    if (!d)
        return;
    char names[POSIX_WARN_NAMES * 76 + 1] = "";
    size_t used = 0, n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0 || strcmp(nm, POSIX_STATE_DIR) == 0 ||
            sg_bucket_name_valid(nm))
            continue;
        struct stat st;
        bool is_dir = de->d_type == DT_DIR ||
                      (de->d_type == DT_UNKNOWN &&
                       fstatat(rootfd, nm, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode));
        if (!is_dir)
            continue;
        /* quoted with ' (the log layer escapes '"', control bytes and
         * what is not UTF-8 in every line), cut at 64 bytes */
        if (n++ < POSIX_WARN_NAMES)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s'%.64s%s'",
                                     used ? ", " : "", nm, strlen(nm) > 64 ? "..." : "");
    }
    closedir(d);
    if (n == 0)
        return;
    if (n > POSIX_WARN_NAMES)
        log_msg(LOG_LVL_WARN, "backend", "%s: %zu directories are not valid S3 bucket names "
                "(3-63 characters: a-z, 0-9, '.', '-') and not served: %s and %zu more",
                root, n, names, n - POSIX_WARN_NAMES);
    else
        log_msg(LOG_LVL_WARN, "backend", "%s: %zu %s (3-63 characters: a-z, 0-9, '.', '-') "
                "and not served: %s", root, n,
                n == 1 ? "directory is not a valid S3 bucket name"
                       : "directories are not valid S3 bucket names", names);
}

static bool errno_means_read_only(int e)
{
    return e == EROFS || e == EACCES || e == EPERM;
}

/* What taking a directory lock (lr, with lerr and the message why) means
 * for the open: true to go on (taken, or a file system without locks:
 * warned). BUSY and ERRNO fail the open with why, except, when
 * may_read_only, an ERRNO that means a read-only directory: that sets
 * *read_only and goes on. */
static bool lock_taken(const struct backend_posix_conf *cf, enum sg_dirlock_status lr, int lerr,
                       const char *why, bool may_read_only, bool *read_only)
{
    switch (lr) {
    case SG_DIRLOCK_OK:
        return true;
    case SG_DIRLOCK_UNSUPPORTED:
        log_msg(LOG_LVL_WARN, "backend", "%s", why);
        return true;
    case SG_DIRLOCK_BUSY:
        break;
    case SG_DIRLOCK_ERRNO:
        if (may_read_only && errno_means_read_only(lerr)) {
            *read_only = true;
            return true;
        }
        break;
    }
    open_fail(cf, "%s", why);
    return false;
}

enum backend_status backend_posix_open(const struct backend_posix_conf *cf,
                                       struct backend **out)
{
    *out = NULL;
    if (!cf || !cf->root || !*cf->root)
        return BACKEND_IO;
    if (cf->err && cf->err_len)
        cf->err[0] = '\0';
    struct posix_store *b = calloc(1, sizeof *b);
    char *state = NULL;
    enum backend_status st = BACKEND_IO;
    int statefd = -1;
    if (!b)
        return BACKEND_NOMEM;
    b->base.ops = &posix_ops;
    static const enum posix_aw_mode aw_of[] = {
        [BACKEND_STAGE_WRITE] = POSIX_AW_OFF,
        [BACKEND_STAGE_URING] = POSIX_AW_URING,
        [BACKEND_STAGE_DIRECT] = POSIX_AW_DIRECT,
    };
    b->aw_mode = (unsigned)cf->stage_io <= BACKEND_STAGE_DIRECT ? aw_of[cf->stage_io]
                                                                : POSIX_AW_OFF;
    posix_key_locks_init(b);
    b->rootfd = b->mpufd = -1;
    b->rootfd = open_root(cf->root);
    if (b->rootfd < 0) {
        int e = errno;
        open_fail(cf, "cannot open the data directory %s: %s", cf->root, strerror(e));
        st = posix_write_errno_status(e) == BACKEND_NO_SPACE ? BACKEND_NO_SPACE : BACKEND_IO;
        goto fail;
    }
    if (cf->state_dir && *cf->state_dir)
        state = strdup(cf->state_dir);
    else if (asprintf(&state, "%s/%s", cf->root, POSIX_STATE_DIR) < 0)
        state = NULL;
    if (!state) {
        st = BACKEND_NOMEM;
        goto fail;
    }

    /* The lock file is also the probe of a writable state directory: no
     * lock can be created where nothing can be written. */
    char why[768] = "";
    int lerr = 0;
    enum sg_dirlock_status lr =
        sg_dirlock_take(state, "state directory", &b->lock, &lerr, why, sizeof why);
    if (!lock_taken(cf, lr, lerr, why, true, &b->read_only))
        goto fail;
    struct statvfs vfs;
    bool ro_mount = fstatvfs(b->rootfd, &vfs) == 0 && (vfs.f_flag & ST_RDONLY);
    if (!b->read_only) {
        statefd = open(state, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
        if (statefd >= 0 && (mkdirat(statefd, "mpu", 0755) == 0 || errno == EEXIST))
            b->mpufd = openat(statefd, "mpu", O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
        if (b->mpufd < 0) {
            int e = errno;
            if (!errno_means_read_only(e)) {
                open_fail(cf, "cannot open %s/mpu: %s", state, strerror(e));
                goto fail;
            }
            b->read_only = true;
            snprintf(why, sizeof why, "cannot create %s/mpu: %s", state, strerror(e));
        }
    }
    if (b->read_only) {
        log_msg(LOG_LVL_WARN, "backend", "serving %s READ-ONLY: no writable state directory "
                "(%s). Reads and listings work; writes answer 403 AccessDenied. To allow "
                "writes, give a writable state_dir (--state-dir) on a writable tree.",
                cf->root, why);
    } else if (ro_mount) {
        b->read_only = true;
        log_msg(LOG_LVL_WARN, "backend", "serving %s READ-ONLY: it is on a read-only mount. "
                "Reads and listings work; writes answer 403 AccessDenied.", cf->root);
    } else if (faccessat(b->rootfd, ".", W_OK, AT_EACCESS) != 0 && errno == EACCES) {
        log_msg(LOG_LVL_WARN, "backend", "%s is not writable by this process: creating and "
                "deleting buckets will answer 403 AccessDenied", cf->root);
    }
    if (b->read_only && b->mpufd >= 0) {
        close(b->mpufd);
        b->mpufd = -1;
    }
    if (!b->read_only) {
        /* A writer also owns the tree: the reclaim below removes temp
         * files, which must not be those of a live gateway whose state
         * directory is another. Read-only gateways share a tree freely. */
        lr = sg_dirlock_take_dir(cf->root, "data directory", &b->tree_lock, &lerr, why,
                                 sizeof why);
        if (!lock_taken(cf, lr, lerr, why, false, &b->read_only))
            goto fail;
    }

    warn_skipped_dirs(b->rootfd, cf->root);
    if (!b->read_only) {
        struct posix_reclaim_stats rs = { 0 };
        posix_reclaim_tmp(b, &rs);
        log_msg(LOG_LVL_INFO, "backend", "start-up reclaim in %s: removed %llu temporary "
                "files (%llu bytes) of interrupted writes and %llu unfinished upload "
                "directories", cf->root, (unsigned long long)rs.files,
                (unsigned long long)rs.bytes, (unsigned long long)rs.uploads);
        if (cf->mpu_max_age_s > 0)
            b->expiry = posix_expiry_start(b, cf->mpu_max_age_s);
        b->sweeper = posix_sweeper_start(b);
    }
    if (statefd >= 0)
        close(statefd);
    free(state);
    *out = &b->base;
    return BACKEND_OK;
fail:
    if (statefd >= 0)
        close(statefd);
    free(state);
    posix_close(b);
    return st;
}

void posix_close(struct posix_store *b)
{
    if (!b)
        return;
    posix_expiry_stop(b->expiry);   /* first: they use mpufd */
    posix_sweeper_stop(b->sweeper);
    if (b->rootfd >= 0)
        close(b->rootfd);
    if (b->mpufd >= 0)
        close(b->mpufd);
    sg_dirlock_release(b->tree_lock);
    sg_dirlock_release(b->lock);
    posix_key_locks_destroy(b);
    free(b);
}
