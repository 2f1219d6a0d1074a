/* backend/posix_list.c - ListObjects over the posix store without loading
 * the bucket: a depth-first walk in key order. In each directory the entries
 * are ordered by their key spelling ("d" directory = "d/", ".sg~e" = "" or
 * "/", and a directory "d" holding its own key's object as .sg~o gives "d"
 * too), which makes the walk order equal to the binary order of the keys.
 * A directory of any size costs bounded memory: each scan keeps only the K
 * smallest spellings above a lower bound in a heap, and rescans with a
 * raised bound when the page needs more. */
#include "posix_int.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LIST_MAX_KEYS 1000u

struct lctx {
    struct backend_list_page *page;
    const char *prefix;
    size_t plen;
    const char *delim;          /* NULL when none */
    const char *sa;             /* NULL when none */
    size_t salen;
    char last_cp[POSIX_PATH_MAX];
    size_t last_cp_len;         /* 0: none yet */
    unsigned max;
    bool last_is_prefix;
    bool stop;
    enum backend_status st;
};

struct lent {
    bool is_dir;
    bool self;              /* the object of a directory's own key: its POSIX_SELF */
    char spell[];
};

static int lent_cmp(const void *a, const void *b)
{
    return strcmp(((const struct lent *)a)->spell, ((const struct lent *)b)->spell);
}

static size_t page_count(const struct lctx *c)
{
    return c->page->n_objs + c->page->n_prefixes;
}

/* Room for one more entry? When the page is full, one more entry exists:
 * mark the page truncated and stop the walk. */
static bool page_room(struct lctx *c)
{
    if (page_count(c) < c->max)
        return true;
    c->page->truncated = true;
    c->stop = true;
    return false;
}

static void emit_obj(struct lctx *c, int dirfd, const char *name, const char *key, size_t kl)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return;   /* deleted meanwhile, or a symlink swapped in: not listed */
    struct stat st;
    struct obj_meta m;
    bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
              posix_meta_from_fd(fd, &st, &m) == BACKEND_OK;
    close(fd);
    if (!ok)
        return;
    if (!page_room(c)) {
        obj_meta_clear(&m);
        return;
    }
    struct backend_list_entry *e = &c->page->objs[c->page->n_objs];
    e->key = strndup(key, kl);
    if (!e->key) {
        obj_meta_clear(&m);
        c->st = BACKEND_NOMEM;
        c->stop = true;
        return;
    }
    e->size = m.size;
    e->mtime = m.mtime;
    memcpy(e->etag, m.etag, sizeof e->etag);
    obj_meta_clear(&m);
    c->page->n_objs++;
    c->last_is_prefix = false;
}

/* A common prefix kb[0..cpl): emitted once (the walk meets it in order). */
static void emit_cp(struct lctx *c, const char *kb, size_t cpl)
{
    if (!page_room(c))
        return;
    char *s = strndup(kb, cpl);
    if (!s) {
        c->st = BACKEND_NOMEM;
        c->stop = true;
        return;
    }
    c->page->prefixes[c->page->n_prefixes++] = s;
    memcpy(c->last_cp, kb, cpl);
    c->last_cp_len = cpl;
    c->last_is_prefix = true;
}

static bool is_last_cp(const struct lctx *c, const char *kb, size_t cpl)
{
    return c->last_cp_len == cpl && memcmp(c->last_cp, kb, cpl) == 0;
}

static void list_dir(struct lctx *c, int dirfd, char *kb, size_t kl);

/* The bounds of one scan of a directory (scan_dir). */
struct scan_bounds {
    const char *pr;         /* the rest of the prefix at this level */
    size_t prl;
    const char *lb;         /* lower bound, NULL when none */
    bool lb_incl;
    const char *skip;       /* spellings rolled into the last common prefix */
    size_t kl;              /* length of the key so far */
};

/* Pushes entry `name` (a directory, a file, or a directory's own object)
 * when its spelling is within the bounds. */
static void consider(struct lctx *c, struct posix_heap *h, const struct scan_bounds *sb,
                     const char *name, bool is_dir, bool self)
{
    char sp[POSIX_SEG_MAX + 3];
    int sli = posix_name_to_spelling(name, is_dir, sp, sizeof sp);
    if (sli < 0)
        return;
    size_t sl = (size_t)sli;
    if (sb->kl + sl > POSIX_KEY_MAX + (is_dir ? 1u : 0u))
        return;   /* deeper than any key the API can name */
    if (sb->prl) {
        if (sl >= sb->prl ? memcmp(sp, sb->pr, sb->prl) != 0
                          : !(is_dir && memcmp(sb->pr, sp, sl) == 0))
            return;
    }
    if (sb->lb) {
        int cmp = strcmp(sp, sb->lb);
        if (cmp <= 0 && !(sb->lb_incl && is_dir && strncmp(sb->lb, sp, sl) == 0))
            return;
    }
    if (sb->skip && strncmp(sp, sb->skip, strlen(sb->skip)) == 0)
        return;
    struct lent *e = malloc(sizeof *e + sl + 1);
    if (!e) {
        c->st = BACKEND_NOMEM;
        c->stop = true;
        return;
    }
    e->is_dir = is_dir;
    e->self = self;
    memcpy(e->spell, sp, sl + 1);
    posix_heap_push(h, e);
}

/* Does directory `name` of dirfd hold the object of its own key? */
static bool has_self(int dirfd, const char *name)
{
    char rel[POSIX_SEG_MAX + sizeof POSIX_SELF + 1];
    struct stat st;
    snprintf(rel, sizeof rel, "%s/%s", name, POSIX_SELF);
    return fstatat(dirfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

/* Scans dirfd once: the K smallest visible entries within the bounds. */
static void scan_dir(struct lctx *c, DIR *d, int dirfd, struct posix_heap *h,
                     const struct scan_bounds *sb)
{
    struct dirent *de;
    rewinddir(d);
    while ((de = readdir(d)) != NULL && !c->stop) {
        const char *name = de->d_name;
        if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0')))
            continue;
        unsigned char t = posix_entry_type(dirfd, de);
        if (t != DT_REG && t != DT_DIR)
            continue;   /* symlinks and devices are never objects */
        consider(c, h, sb, name, t == DT_DIR, false);
        if (t == DT_DIR && has_self(dirfd, name))
            consider(c, h, sb, name, false, true);
    }
}

static void visit(struct lctx *c, int dirfd, char *kb, size_t kl, const struct lent *e,
                  char *skip, bool *dir_done)
{
    size_t sl = strlen(e->spell);
    memcpy(kb + kl, e->spell, sl + 1);
    size_t fl = kl + sl;
    char name[POSIX_SEG_MAX + 2];
    posix_spelling_to_name(e->spell, name, sizeof name);
    size_t cpl = fl >= c->plen ? posix_rollup(kb, fl, c->plen, c->delim) : 0;
    if (cpl) {
        if (cpl <= kl) {   /* the whole directory is one prefix */
            if (!is_last_cp(c, kb, cpl))
                emit_cp(c, kb, cpl);
            *dir_done = true;
            return;
        }
        if (!is_last_cp(c, kb, cpl)) {
            if (e->is_dir) {
                int sub = openat(dirfd, name, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
                if (sub < 0)
                    return;
                int has = posix_dir_has_object(sub);
                close(sub);
                if (has <= 0)
                    return;   /* empty directories are not prefixes */
            }
            emit_cp(c, kb, cpl);
            if (c->stop)
                return;
        }
        /* everything else spelled under this prefix rolls into it too */
        memcpy(skip, kb + kl, cpl - kl);
        skip[cpl - kl] = '\0';
        return;
    }
    if (e->self) {
        int sub = openat(dirfd, name, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
        if (sub >= 0) {
            emit_obj(c, sub, POSIX_SELF, kb, fl);
            close(sub);
        }
        return;
    }
    if (!e->is_dir) {
        emit_obj(c, dirfd, name, kb, fl);
        return;
    }
    int sub = openat(dirfd, name, O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
    if (sub < 0)
        return;
    list_dir(c, sub, kb, fl);
    close(sub);
    kb[kl] = '\0';
}

/* Lists directory dirfd whose keys start with kb[0..kl). */
static void list_dir(struct lctx *c, int dirfd, char *kb, size_t kl)
{
    const char *pr = "";
    size_t prl = 0;
    if (kl < c->plen) {
        pr = c->prefix + kl;
        prl = c->plen - kl;
    }
    /* Lower bound of this level: the rest of start_after when it points
     * inside this directory (directories it runs through stay in), then
     * the last spelling visited. */
    char *lb = NULL;
    bool lb_incl = false;
    char *lbbuf = malloc(POSIX_PATH_MAX);
    char *skip = malloc(POSIX_PATH_MAX);
    DIR *d = posix_dir_stream(dirfd);
    struct posix_heap h = { 0 };
    size_t k = c->max - page_count(c) + 1;
    if (!lbbuf || !skip || !d || posix_heap_init(&h, k, lent_cmp, free) != 0) {
        c->st = d ? BACKEND_NOMEM : BACKEND_IO;
        c->stop = true;
        goto out;
    }
    skip[0] = '\0';
    if (c->sa && c->salen >= kl && memcmp(c->sa, kb, kl) == 0) {
        memcpy(lbbuf, c->sa + kl, c->salen - kl + 1);
        lb = lbbuf;
        lb_incl = true;
    }
    for (;;) {
        struct scan_bounds sb = { pr, prl, lb, lb_incl, skip[0] ? skip : NULL, kl };
        scan_dir(c, d, dirfd, &h, &sb);
        if (c->stop || h.n == 0)
            break;
        posix_heap_sort(&h);
        size_t n = h.n;
        bool dir_done = false;
        for (size_t i = 0; i < n && !c->stop && !dir_done; i++) {
            const struct lent *e = h.v[i];
            if (skip[0] && strncmp(e->spell, skip, strlen(skip)) == 0)
                continue;
            visit(c, dirfd, kb, kl, e, skip, &dir_done);
            snprintf(lbbuf, POSIX_PATH_MAX, "%s", e->spell);
            lb = lbbuf;
            lb_incl = false;
        }
        kb[kl] = '\0';
        posix_heap_clear(&h);
        if (c->stop || dir_done || n < k)
            break;
    }
out:
    posix_heap_free(&h);
    if (d)
        closedir(d);
    free(lbbuf);
    free(skip);
}

void backend_list_page_free(struct backend_list_page *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_objs; i++)
        free(p->objs[i].key);
    for (size_t i = 0; i < p->n_prefixes; i++)
        free(p->prefixes[i]);
    free(p->objs);
    free(p->prefixes);
    free(p->next_marker);
    memset(p, 0, sizeof *p);
}

enum backend_status posix_list_objects(struct posix_store *b, const char *bucket,
                                         const struct backend_list_req *req,
                                         struct backend_list_page *out)
{
    memset(out, 0, sizeof *out);
    int bfd;
    enum backend_status st = posix_bucket_open(b, bucket, &bfd);
    if (st != BACKEND_OK)
        return st;
    unsigned max = req->max_keys > LIST_MAX_KEYS ? LIST_MAX_KEYS : req->max_keys;
    const char *prefix = req->prefix ? req->prefix : "";
    struct lctx *c = calloc(1, sizeof *c);
    char *kb = malloc(POSIX_PATH_MAX + POSIX_SEG_MAX + 4);
    out->objs = calloc(max ? max : 1, sizeof *out->objs);
    out->prefixes = calloc(max ? max : 1, sizeof *out->prefixes);
    int start = -1;
    if (!c || !kb || !out->objs || !out->prefixes) {
        st = BACKEND_NOMEM;
        goto out;
    }
    size_t plen = strlen(prefix);
    if (max == 0 || plen > POSIX_KEY_MAX)
        goto out;
    c->page = out;
    c->prefix = prefix;
    c->plen = plen;
    c->delim = req->delimiter && *req->delimiter ? req->delimiter : NULL;
    c->sa = req->start_after && *req->start_after ? req->start_after : NULL;
    c->salen = c->sa ? strlen(c->sa) : 0;
    c->max = max;

    /* Start in the deepest directory the prefix names ("a/b/c" -> "a/b/"):
     * nothing outside it can match. */
    const char *ls = strrchr(prefix, '/');
    size_t kl = 0;
    if (ls) {
        kl = (size_t)(ls - prefix) + 1;
        char dir[POSIX_KEY_MAX + 1];
        char path[POSIX_PATH_MAX];
        memcpy(dir, prefix, kl - 1);
        dir[kl - 1] = '\0';
        if (kl == 1)
            snprintf(path, sizeof path, "%s", POSIX_EMPTY_SEG);
        else if (posix_key_to_path(dir, path, sizeof path) != BACKEND_OK)
            goto out;   /* no stored key can have such a prefix */
        start = posix_open_beneath(bfd, path, O_DIRECTORY | O_RDONLY, 0);
        if (start < 0)
            goto out;
    } else {
        start = dup(bfd);
        if (start < 0) {
            st = BACKEND_IO;
            goto out;
        }
    }
    memcpy(kb, prefix, kl);
    kb[kl] = '\0';
    if (c->sa && !(c->salen >= kl && memcmp(c->sa, kb, kl) == 0) && strcmp(c->sa, kb) > 0)
        goto out;   /* start_after is past everything under the start dir */
    if (c->delim && c->sa) {
        size_t cpl = posix_rollup(c->sa, c->salen, plen, c->delim);
        if (cpl && cpl < sizeof c->last_cp) {
            memcpy(c->last_cp, c->sa, cpl);
            c->last_cp_len = cpl;
        }
    }
    list_dir(c, start, kb, kl);
    st = c->st;
    if (st == BACKEND_OK && page_count(c) > 0) {
        if (c->last_is_prefix)
            out->next_marker = strdup(out->prefixes[out->n_prefixes - 1]);
        else
            out->next_marker = strdup(out->objs[out->n_objs - 1].key);
        if (!out->next_marker)
            st = BACKEND_NOMEM;
    }
out:
    if (start >= 0)
        close(start);
    close(bfd);
    free(kb);
    free(c);
    if (st != BACKEND_OK)
        backend_list_page_free(out);
    return st;
}
