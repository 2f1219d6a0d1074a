/* backend/wb_list.c - listings of a write-back bucket: the cold tier's page
 * merged with the pending writes (a pending PUT shows with what the client
 * was told, a pending DELETE hides the cold tier's object), and multipart
 * uploads, staged here (with the cold tier's too in a bucket whose prefix
 * rules write some keys through).
 *
 * The pending writes are read before the cold tier's page, so a write
 * uploaded meanwhile shows (from one or both) rather than from neither.
 * Paging stays the cold tier's: the cold page covers keys up to its last
 * entry B (or all keys when it is not truncated); pending keys in that range
 * join it, pending keys past B wait for the page that reaches them. When
 * the merged page holds more than max_keys, it is cut and its last entry
 * becomes the marker (the next page asks the cold tier from there). A cold
 * common prefix whose every object is deleted by pending writes still shows
 * until the deletes are uploaded. */
#include "wb_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct item {
    char *name;
    bool is_prefix;
    uint64_t size;
    struct timespec mtime;
    char etag[72];
};

struct items {
    struct item *v;
    size_t n, cap;
};

static int items_add(struct items *it, const char *name, bool is_prefix)
{
    if (it->n == it->cap) {
        size_t cap = it->cap ? it->cap * 2 : 64;
        struct item *v = realloc(it->v, cap * sizeof *v);
        if (!v)
            return -1;
        it->v = v;
        it->cap = cap;
    }
    struct item *x = &it->v[it->n];
    memset(x, 0, sizeof *x);
    if (!(x->name = strdup(name)))
        return -1;
    x->is_prefix = is_prefix;
    it->n++;
    return 0;
}

static void items_free(struct items *it)
{
    for (size_t i = 0; i < it->n; i++)
        free(it->v[i].name);
    free(it->v);
}

static int item_cmp(const void *a, const void *b)
{
    return strcmp(((const struct item *)a)->name, ((const struct item *)b)->name);
}

/* The common prefix key rolls up into under (prefix, delimiter), or 0. */
static size_t rollup_len(const char *key, const char *prefix, const char *delim)
{
    if (!delim || !*delim)
        return 0;
    size_t plen = strlen(prefix);
    const char *d = strstr(key + plen, delim);
    return d ? (size_t)(d - key) + strlen(delim) : 0;
}

/* Is key within the cold page's range: <= bound, or under bound when bound
 * is a common prefix (bound NULL: the page has no end). */
static bool within(const char *key, const char *bound, bool bound_is_prefix)
{
    if (!bound)
        return true;
    if (strcmp(key, bound) <= 0)
        return true;
    return bound_is_prefix && strncmp(key, bound, strlen(bound)) == 0;
}

/* A pending write as the listing needs it. */
struct pend {
    char *key;
    bool put;
    uint64_t size;
    struct timespec mtime;
    char etag[72];
};

static int pend_cmp(const void *a, const void *b)
{
    return strcmp(((const struct pend *)a)->key, ((const struct pend *)b)->key);
}

/* The latest pending write of every key of bucket under prefix, sorted. */
static int pending_snapshot(struct wb *w, const char *bucket, const char *prefix,
                            struct pend **out, size_t *n_out)
{
    size_t plen = strlen(prefix), n = 0, cap = 0;
    struct pend *v = NULL;
    int rc = 0;
    pthread_mutex_lock(&w->mu);
    for (size_t s = 0; s < WB_KEY_BUCKETS && rc == 0; s++) {
        for (struct wb_rec *r = w->keys[s]; r; r = r->key_next) {
            if (strcmp(r->bucket, bucket) != 0 || strncmp(r->key, prefix, plen) != 0)
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                struct pend *nv = realloc(v, cap * sizeof *nv);
                if (!nv) {
                    rc = -1;
                    break;
                }
                v = nv;
            }
            struct pend *p = &v[n];
            if (!(p->key = strdup(r->key))) {
                rc = -1;
                break;
            }
            p->put = r->kind == WB_PUT;
            p->size = r->size;
            p->mtime = r->mtime;
            memcpy(p->etag, r->etag, sizeof p->etag);
            n++;
        }
    }
    pthread_mutex_unlock(&w->mu);
    if (rc == 0 && n)
        qsort(v, n, sizeof *v, pend_cmp);
    *out = v;
    *n_out = n;
    return rc;
}

static void pend_free(struct pend *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].key);
    free(v);
}

static const struct pend *pend_find(const struct pend *v, size_t n, const char *key)
{
    struct pend k = { .key = (char *)key };
    return n ? bsearch(&k, v, n, sizeof *v, pend_cmp) : NULL;
}

enum backend_status wb_list_objects(struct wb *w, const char *bucket,
                                    const struct backend_list_req *req,
                                    struct backend_list_page *out)
{
    memset(out, 0, sizeof *out);
    const char *prefix = req->prefix ? req->prefix : "";
    /* pending writes first, the cold tier's page after: a write uploaded in
     * between is then in the page (or in both, and counted once); the other
     * order could miss it in both */
    struct pend *pv = NULL;
    size_t pn = 0;
    if (pending_snapshot(w, bucket, prefix, &pv, &pn) != 0) {
        pend_free(pv, pn);
        return BACKEND_NOMEM;
    }
    struct backend_list_page cold;
    memset(&cold, 0, sizeof cold);
    enum backend_status st = w->cold->ops->list_objects(w->cold, bucket, req, &cold);
    if (st != BACKEND_OK || req->max_keys == 0) {
        pend_free(pv, pn);
        *out = cold;
        return st;
    }
    const char *delim = req->delimiter && *req->delimiter ? req->delimiter : NULL;
    const char *after = req->start_after ? req->start_after : "";
    size_t after_roll = *after && strncmp(after, prefix, strlen(prefix)) == 0
                        ? rollup_len(after, prefix, delim) : 0;
    const char *bound = cold.truncated ? cold.next_marker : NULL;
    bool bound_is_prefix = false;
    for (size_t i = 0; bound && i < cold.n_prefixes; i++)
        if (strcmp(cold.prefixes[i], bound) == 0)
            bound_is_prefix = true;

    struct items it = { 0 };
    for (size_t i = 0; i < cold.n_objs; i++) {
        if (pend_find(pv, pn, cold.objs[i].key))
            continue;   /* replaced or deleted by a pending write */
        if (items_add(&it, cold.objs[i].key, false) != 0)
            goto nomem;
        struct item *x = &it.v[it.n - 1];
        x->size = cold.objs[i].size;
        x->mtime = cold.objs[i].mtime;
        memcpy(x->etag, cold.objs[i].etag, sizeof x->etag);
    }
    for (size_t i = 0; i < cold.n_prefixes; i++)
        if (items_add(&it, cold.prefixes[i], true) != 0)
            goto nomem;
    for (size_t i = 0; i < pn; i++) {
        const struct pend *p = &pv[i];
        if (!p->put || strcmp(p->key, after) <= 0 ||
            (after_roll && strncmp(p->key, after, after_roll) == 0) ||
            !within(p->key, bound, bound_is_prefix))
            continue;
        size_t roll = rollup_len(p->key, prefix, delim);
        if (roll) {
            char *name = strndup(p->key, roll);
            if (!name)
                goto nomem;
            bool have = false;
            for (size_t k = 0; k < it.n && !have; k++)
                have = it.v[k].is_prefix && strcmp(it.v[k].name, name) == 0;
            int rc = have ? 0 : items_add(&it, name, true);
            free(name);
            if (rc != 0)
                goto nomem;
            continue;
        }
        if (items_add(&it, p->key, false) != 0)
            goto nomem;
        struct item *x = &it.v[it.n - 1];
        x->size = p->size;
        x->mtime = p->mtime;
        memcpy(x->etag, p->etag, sizeof x->etag);
    }
    if (it.n)
        qsort(it.v, it.n, sizeof *it.v, item_cmp);

    size_t keep = it.n > req->max_keys ? req->max_keys : it.n;
    size_t n_objs = 0, n_pre = 0;
    for (size_t i = 0; i < keep; i++)
        it.v[i].is_prefix ? n_pre++ : n_objs++;
    if (it.n > keep) {   /* cut: the next page starts after the last entry kept */
        out->truncated = true;
        out->next_marker = keep ? strdup(it.v[keep - 1].name) : NULL;
    } else {
        out->truncated = cold.truncated;
        out->next_marker = cold.next_marker ? strdup(cold.next_marker) : NULL;
    }
    out->objs = calloc(n_objs ? n_objs : 1, sizeof *out->objs);
    out->prefixes = calloc(n_pre ? n_pre : 1, sizeof *out->prefixes);
    if (!out->objs || !out->prefixes || (out->truncated && keep && !out->next_marker))
        goto nomem;
    for (size_t i = 0; i < keep; i++) {
        struct item *x = &it.v[i];
        if (x->is_prefix) {
            out->prefixes[out->n_prefixes++] = x->name;
        } else {
            struct backend_list_entry *e = &out->objs[out->n_objs++];
            e->key = x->name;
            e->size = x->size;
            e->mtime = x->mtime;
            memcpy(e->etag, x->etag, sizeof e->etag);
        }
        x->name = NULL;   /* now the page's */
    }
    st = BACKEND_OK;
    goto out;
nomem:
    backend_list_page_free(out);
    st = BACKEND_NOMEM;
out:
    items_free(&it);
    pend_free(pv, pn);
    backend_list_page_free(&cold);
    return st;
}

/* ---- multipart uploads: all of a write-back bucket's are staged ---- */

struct up {
    const struct wb_mpu *m;
    char id[BACKEND_UPLOAD_ID_MAX];
};

static int up_cmp(const void *a, const void *b)
{
    const struct up *x = a, *y = b;
    int c = strcmp(x->m->key, y->m->key);
    if (c)
        return c;
    if (x->m->initiated.tv_sec != y->m->initiated.tv_sec)
        return x->m->initiated.tv_sec < y->m->initiated.tv_sec ? -1 : 1;
    if (x->m->initiated.tv_nsec != y->m->initiated.tv_nsec)
        return x->m->initiated.tv_nsec < y->m->initiated.tv_nsec ? -1 : 1;
    return strcmp(x->id, y->id);
}

enum backend_status wb_list_uploads(struct wb *w, const char *bucket,
                                    const struct backend_uploads_req *req,
                                    struct backend_uploads_page *out)
{
    memset(out, 0, sizeof *out);
    const char *prefix = req->prefix ? req->prefix : "";
    const char *delim = req->delimiter && *req->delimiter ? req->delimiter : NULL;
    const char *km = req->key_marker ? req->key_marker : "";
    const char *im = req->upload_id_marker ? req->upload_id_marker : "";
    unsigned max = req->max_uploads > 1000 ? 1000 : req->max_uploads;
    size_t plen = strlen(prefix);
    enum backend_status st = BACKEND_OK;

    pthread_mutex_lock(&w->mu);   /* the uploads' strings are read under it */
    size_t n = 0;
    for (const struct wb_mpu *m = w->mpus; m; m = m->next)
        n++;
    struct up *v = calloc(n ? n : 1, sizeof *v);
    size_t k = 0;
    for (const struct wb_mpu *m = w->mpus; v && m; m = m->next) {
        if (strcmp(m->bucket, bucket) != 0 || strncmp(m->key, prefix, plen) != 0)
            continue;
        v[k].m = m;
        wb_upload_id(m, v[k].id);
        k++;
    }
    if (!v) {
        st = BACKEND_NOMEM;
        goto out;
    }
    if (k)
        qsort(v, k, sizeof *v, up_cmp);
    /* S3: after key_marker; with upload_id_marker, that key's uploads after
     * the one named are listed too */
    size_t i = 0;
    if (*km) {
        size_t mark = k;
        for (size_t j = 0; j < k && *im; j++)
            if (strcmp(v[j].m->key, km) == 0 && strcmp(v[j].id, im) == 0)
                mark = j;
        while (i < k && (strcmp(v[i].m->key, km) < 0 ||
                         (strcmp(v[i].m->key, km) == 0 && (mark == k || i <= mark))))
            i++;
    }
    size_t n_up = 0;
    out->uploads = calloc(k ? k : 1, sizeof *out->uploads);
    out->prefixes = calloc(k ? k : 1, sizeof *out->prefixes);
    if (!out->uploads || !out->prefixes) {
        st = BACKEND_NOMEM;
        goto out;
    }
    const char *last_key = NULL, *last_id = "";
    size_t taken = 0;
    for (; i < k; i++) {
        size_t roll = rollup_len(v[i].m->key, prefix, delim);
        if (roll && out->n_prefixes &&
            strncmp(out->prefixes[out->n_prefixes - 1], v[i].m->key, roll) == 0 &&
            strlen(out->prefixes[out->n_prefixes - 1]) == roll)
            continue;   /* in the common prefix just listed */
        if (taken == max) {
            out->truncated = true;
            break;
        }
        taken++;
        if (roll) {
            if (!(out->prefixes[out->n_prefixes] = strndup(v[i].m->key, roll))) {
                st = BACKEND_NOMEM;
                goto out;
            }
            last_key = out->prefixes[out->n_prefixes++];
            last_id = "";
            continue;
        }
        struct backend_upload *u = &out->uploads[n_up];
        if (!(u->key = strdup(v[i].m->key))) {
            st = BACKEND_NOMEM;
            goto out;
        }
        snprintf(u->upload_id, sizeof u->upload_id, "%s", v[i].id);
        u->initiated = v[i].m->initiated;
        out->n_uploads = ++n_up;
        last_key = u->key;
        last_id = u->upload_id;
    }
    if (out->truncated && last_key) {
        out->next_key_marker = strdup(last_key);
        snprintf(out->next_upload_id_marker, sizeof out->next_upload_id_marker, "%s", last_id);
    }
out:
    pthread_mutex_unlock(&w->mu);
    free(v);
    if (st != BACKEND_OK)
        backend_uploads_page_free(out);
    return st;
}

/* One side of a merged uploads listing: its page and how far it is taken. */
struct up_side {
    struct backend_uploads_page pg;
    size_t u, p;   /* next upload, next common prefix */
};

/* The side's next entry's name (a key or a common prefix), NULL when done;
 * *is_prefix tells which. */
static const char *up_head(const struct up_side *s, bool *is_prefix)
{
    const char *k = s->u < s->pg.n_uploads ? s->pg.uploads[s->u].key : NULL;
    const char *p = s->p < s->pg.n_prefixes ? s->pg.prefixes[s->p] : NULL;
    *is_prefix = p && (!k || strcmp(p, k) < 0);
    return *is_prefix ? p : k;
}

enum backend_status wb_list_uploads_mixed(struct wb *w, const char *bucket,
                                          const struct backend_uploads_req *req,
                                          struct backend_uploads_page *out)
{
    memset(out, 0, sizeof *out);
    struct up_side side[2];   /* 0: staged here, 1: the cold tier's */
    memset(side, 0, sizeof side);
    enum backend_status st = wb_list_uploads(w, bucket, req, &side[0].pg);
    if (st == BACKEND_OK)
        st = w->cold->ops->mpu_list_uploads(w->cold, bucket, req, &side[1].pg);
    size_t nu = side[0].pg.n_uploads + side[1].pg.n_uploads;
    size_t np = side[0].pg.n_prefixes + side[1].pg.n_prefixes;
    if (st == BACKEND_OK && (!(out->uploads = calloc(nu ? nu : 1, sizeof *out->uploads)) ||
                             !(out->prefixes = calloc(np ? np : 1, sizeof *out->prefixes))))
        st = BACKEND_NOMEM;
    unsigned max = req->max_uploads > 1000 ? 1000 : req->max_uploads;
    const char *last_name = NULL, *last_id = "";
    size_t taken = 0;
    while (st == BACKEND_OK) {
        bool pre[2];
        const char *h[2] = { up_head(&side[0], &pre[0]), up_head(&side[1], &pre[1]) };
        if (!h[0] && !h[1])
            break;
        /* a side cut short may have entries before the other's next one:
         * the page ends where either truncated side ran out */
        if ((!h[0] && side[0].pg.truncated) || (!h[1] && side[1].pg.truncated) ||
            taken == max) {
            out->truncated = true;
            break;
        }
        int from = !h[0] ? 1 : !h[1] ? 0 : strcmp(h[1], h[0]) < 0 ? 1 : 0;
        struct up_side *s = &side[from];
        taken++;
        if (pre[from]) {   /* a common prefix: once, whichever side has it */
            struct up_side *o = &side[!from];
            if (h[!from] && pre[!from] && strcmp(h[!from], h[from]) == 0)
                o->p++;
            last_name = out->prefixes[out->n_prefixes++] = s->pg.prefixes[s->p];
            s->pg.prefixes[s->p++] = NULL;   /* moved */
            last_id = "";
        } else {
            struct backend_upload *u = &out->uploads[out->n_uploads++];
            *u = s->pg.uploads[s->u];
            s->pg.uploads[s->u++].key = NULL;   /* moved */
            last_name = u->key;
            last_id = u->upload_id;
        }
    }
    if (st == BACKEND_OK && out->truncated && last_name &&
        !(out->next_key_marker = strdup(last_name)))
        st = BACKEND_NOMEM;
    if (st == BACKEND_OK && out->truncated && last_name)
        snprintf(out->next_upload_id_marker, sizeof out->next_upload_id_marker, "%s", last_id);
    backend_uploads_page_free(&side[0].pg);
    backend_uploads_page_free(&side[1].pg);
    if (st != BACKEND_OK)
        backend_uploads_page_free(out);
    return st;
}
