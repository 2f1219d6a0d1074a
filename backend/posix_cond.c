/* backend/posix_cond.c - conditional writes on the posix store (If-None-Match: *,
 * If-Match): the striped per-key commit locks that every commit and delete of
 * an object holds around its rename or unlink, and the check of a condition
 * against the object as it is under that lock. */
#include "posix_int.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void posix_key_locks_init(struct posix_store *b)
{
    for (unsigned i = 0; i < POSIX_KEY_LOCKS; i++)
        pthread_mutex_init(&b->key_locks[i], NULL);
}

void posix_key_locks_destroy(struct posix_store *b)
{
    for (unsigned i = 0; i < POSIX_KEY_LOCKS; i++)
        pthread_mutex_destroy(&b->key_locks[i]);
}

/* FNV-1a over bucket, a separator and the path. Two keys sharing a slot only
 * wait for each other's rename (microseconds); striping keeps the table a
 * fixed size whatever the number of keys, where a table of locks per key
 * would need reference counting and a lock of its own. */
unsigned posix_key_lock_slot(const char *bucket, const char *path)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *c = (const unsigned char *)bucket; *c; c++)
        h = (h ^ *c) * 16777619u;
    h = (h ^ '/') * 16777619u;
    for (const unsigned char *c = (const unsigned char *)path; *c; c++)
        h = (h ^ *c) * 16777619u;
    return h % POSIX_KEY_LOCKS;
}

void posix_key_lock(struct posix_store *b, unsigned slot)
{
    pthread_mutex_lock(&b->key_locks[slot]);
}

void posix_key_unlock(struct posix_store *b, unsigned slot)
{
    pthread_mutex_unlock(&b->key_locks[slot]);
}

enum backend_status posix_cond_check(int dirfd, const char *leaf, const struct backend_cond *c)
{
    if (!c || c->kind == BACKEND_COND_NONE)
        return BACKEND_OK;
    struct stat st;
    bool exists = fstatat(dirfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
    if (c->kind == BACKEND_COND_ABSENT)
        return exists ? BACKEND_PRECONDITION_FAILED : BACKEND_OK;
    if (!exists)
        return BACKEND_NO_KEY;
    if (strcmp(c->etag, "*") == 0)
        return BACKEND_OK;
    if (!c->etag[0])
        return BACKEND_PRECONDITION_FAILED;
    int fd = openat(dirfd, leaf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return BACKEND_NO_KEY;
        log_msg(LOG_LVL_ERROR, "backend", "open for If-Match: %s", strerror(e));
        return BACKEND_IO;
    }
    struct obj_meta m;
    enum backend_status s = fstat(fd, &st) == 0 ? posix_meta_from_fd(fd, &st, &m) : BACKEND_IO;
    close(fd);
    if (s != BACKEND_OK)
        return s;
    bool same = posix_etag_equal(m.etag, c->etag);
    obj_meta_clear(&m);
    return same ? BACKEND_OK : BACKEND_PRECONDITION_FAILED;
}
