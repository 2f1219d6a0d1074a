/* backend/meta.c - pure helpers of the posix store: obj_meta ownership, status
 * names, bucket-name and key<->path rules, the metadata xattr encoding, the
 * pseudo-ETag of foreign files and the bounded heap used by listings. No
 * system calls here, so all of it is unit-tested with tables. */
#include "posix_int.h"
#include "encoding.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *backend_status_name(enum backend_status st)
{
    switch (st) {
    case BACKEND_OK: return "OK";
    case BACKEND_NO_BUCKET: return "NO_BUCKET";
    case BACKEND_NO_KEY: return "NO_KEY";
    case BACKEND_NO_UPLOAD: return "NO_UPLOAD";
    case BACKEND_BUCKET_EXISTS: return "BUCKET_EXISTS";
    case BACKEND_BUCKET_TAKEN: return "BUCKET_TAKEN";
    case BACKEND_BUCKET_NOT_EMPTY: return "BUCKET_NOT_EMPTY";
    case BACKEND_BAD_BUCKET_NAME: return "BAD_BUCKET_NAME";
    case BACKEND_BAD_KEY: return "BAD_KEY";
    case BACKEND_KEY_TOO_LONG: return "KEY_TOO_LONG";
    case BACKEND_KEY_CONFLICT: return "KEY_CONFLICT";
    case BACKEND_BAD_RANGE: return "BAD_RANGE";
    case BACKEND_INVALID_PART: return "INVALID_PART";
    case BACKEND_INVALID_PART_ORDER: return "INVALID_PART_ORDER";
    case BACKEND_ENTITY_TOO_SMALL: return "ENTITY_TOO_SMALL";
    case BACKEND_TOO_LARGE: return "TOO_LARGE";
    case BACKEND_NO_SPACE: return "NO_SPACE";
    case BACKEND_DENIED: return "DENIED";
    case BACKEND_IO: return "IO";
    case BACKEND_NOMEM: return "NOMEM";
    case BACKEND_UNAVAILABLE: return "UNAVAILABLE";
    case BACKEND_INVALID_REQUEST: return "INVALID_REQUEST";
    case BACKEND_READ_ONLY: return "READ_ONLY";
    case BACKEND_TIMEOUT: return "TIMEOUT";
    case BACKEND_NO_TAG_SET: return "NO_TAG_SET";
    case BACKEND_META_TOO_LARGE: return "META_TOO_LARGE";
    case BACKEND_PRECONDITION_FAILED: return "PRECONDITION_FAILED";
    case BACKEND_COND_CONFLICT: return "COND_CONFLICT";
    case BACKEND_INVALID_PART_NUMBER: return "INVALID_PART_NUMBER";
    case BACKEND_PARTS_UNKNOWN: return "PARTS_UNKNOWN";
    case BACKEND_BAD_DIGEST: return "BAD_DIGEST";
    case BACKEND_COLD_ERROR: return "COLD_ERROR";
    }
    return "?";
}

/* ---- obj_meta ---- */

/* Frees m's headers (the array too); the caller resets hdrs and n_hdrs. */
static void hdrs_free(struct obj_meta *m)
{
    for (size_t i = 0; i < m->n_hdrs; i++) {
        free(m->hdrs[i].name);
        free(m->hdrs[i].value);
    }
    free(m->hdrs);
}

void obj_meta_clear(struct obj_meta *m)
{
    hdrs_free(m);
    memset(m, 0, sizeof *m);
}

int obj_meta_add_hdr(struct obj_meta *m, const char *name, const char *value)
{
    struct obj_hdr *nh = realloc(m->hdrs, (m->n_hdrs + 1) * sizeof *nh);
    if (!nh)
        return -1;
    m->hdrs = nh;
    char *n = strdup(name);
    char *v = strdup(value);
    if (!n || !v) {
        free(n);
        free(v);
        return -1;
    }
    m->hdrs[m->n_hdrs].name = n;
    m->hdrs[m->n_hdrs].value = v;
    m->n_hdrs++;
    return 0;
}

int obj_meta_copy_hdrs(struct obj_meta *dst, const struct obj_meta *src)
{
    struct obj_meta tmp = { 0 };
    for (size_t i = 0; src && i < src->n_hdrs; i++) {
        if (obj_meta_add_hdr(&tmp, src->hdrs[i].name, src->hdrs[i].value) != 0) {
            obj_meta_clear(&tmp);
            return -1;
        }
    }
    hdrs_free(dst);
    dst->hdrs = tmp.hdrs;
    dst->n_hdrs = tmp.n_hdrs;
    return 0;
}

const char *obj_meta_get_hdr(const struct obj_meta *m, const char *name)
{
    for (size_t i = 0; i < m->n_hdrs; i++)
        if (strcmp(m->hdrs[i].name, name) == 0)
            return m->hdrs[i].value;
    return NULL;
}

/* ---- names ---- */

enum backend_status posix_key_to_path(const char *key, char *out, size_t outsz)
{
    size_t klen = strlen(key);
    if (klen == 0)
        return BACKEND_BAD_KEY;
    if (klen > POSIX_KEY_MAX)
        return BACKEND_KEY_TOO_LONG;
    size_t o = 0;
    const char *seg = key;
    for (;;) {
        const char *end = strchr(seg, '/');
        size_t sl = end ? (size_t)(end - seg) : strlen(seg);
        const char *name = seg;
        size_t nl = sl;
        if (sl == 0) {
            name = POSIX_EMPTY_SEG;
            nl = strlen(POSIX_EMPTY_SEG);
        } else if ((sl == 1 && seg[0] == '.') || (sl == 2 && seg[0] == '.' && seg[1] == '.')) {
            return BACKEND_BAD_KEY;
        } else if (sl >= 4 && memcmp(seg, POSIX_RESERVED, 4) == 0) {
            return BACKEND_BAD_KEY;
        } else if (sl > POSIX_SEG_MAX) {
            return BACKEND_KEY_TOO_LONG;
        }
        if (o + nl + 2 > outsz)
            return BACKEND_KEY_TOO_LONG;
        memcpy(out + o, name, nl);
        o += nl;
        if (!end)
            break;
        out[o++] = '/';
        seg = end + 1;
    }
    out[o] = '\0';
    return BACKEND_OK;
}

int posix_name_to_spelling(const char *name, bool is_dir, char *out, size_t outsz)
{
    size_t nl = strlen(name);
    if (strcmp(name, POSIX_EMPTY_SEG) == 0) {
        nl = 0;
    } else if (nl >= 4 && memcmp(name, POSIX_RESERVED, 4) == 0) {
        return -1;
    } else if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        return -1;
    }
    if (nl + 2 > outsz)
        return -1;
    if (nl)
        memcpy(out, name, nl);
    if (is_dir)
        out[nl++] = '/';
    out[nl] = '\0';
    return (int)nl;
}

void posix_spelling_to_name(const char *spell, char *out, size_t outsz)
{
    size_t sl = strlen(spell);
    if (sl && spell[sl - 1] == '/')
        sl--;
    if (sl == 0) {
        snprintf(out, outsz, "%s", POSIX_EMPTY_SEG);
        return;
    }
    snprintf(out, outsz, "%.*s", (int)sl, spell);
}

size_t posix_rollup(const char *key, size_t key_len, size_t prefix_len, const char *delim)
{
    if (!delim || !*delim || key_len <= prefix_len)
        return 0;
    size_t dl = strlen(delim);
    const char *hit = memmem(key + prefix_len, key_len - prefix_len, delim, dl);
    if (!hit)
        return 0;
    return (size_t)(hit - key) + dl;
}

/* ---- metadata xattr ---- */

static void put16(unsigned char *p, size_t v)
{
    p[0] = (unsigned char)(v & 0xff);
    p[1] = (unsigned char)((v >> 8) & 0xff);
}

static size_t get16(const unsigned char *p)
{
    return (size_t)p[0] | ((size_t)p[1] << 8);
}

enum backend_status posix_meta_encode(const char *etag, const struct obj_hdr *hdrs,
                                      size_t n_hdrs, unsigned char *buf, size_t cap,
                                      size_t *len)
{
    size_t el = strlen(etag);
    if (el >= 72 || n_hdrs > 0xffff)
        return BACKEND_TOO_LARGE;
    size_t need = 4 + 1 + el + 2;
    for (size_t i = 0; i < n_hdrs; i++)
        need += 4 + strlen(hdrs[i].name) + strlen(hdrs[i].value);
    if (need > cap)
        return BACKEND_META_TOO_LARGE;
    size_t o = 0;
    memcpy(buf, "SGM1", 4);
    o = 4;
    buf[o++] = (unsigned char)el;
    memcpy(buf + o, etag, el);
    o += el;
    put16(buf + o, n_hdrs);
    o += 2;
    for (size_t i = 0; i < n_hdrs; i++) {
        size_t nl = strlen(hdrs[i].name), vl = strlen(hdrs[i].value);
        put16(buf + o, nl);
        memcpy(buf + o + 2, hdrs[i].name, nl);
        o += 2 + nl;
        put16(buf + o, vl);
        memcpy(buf + o + 2, hdrs[i].value, vl);
        o += 2 + vl;
    }
    *len = o;
    return BACKEND_OK;
}

/* A length-checked field: copies it NUL-terminated into a new string. */
static char *take_str(const unsigned char *buf, size_t len, size_t *o)
{
    if (len - *o < 2)
        return NULL;
    size_t l = get16(buf + *o);
    *o += 2;
    if (len - *o < l || memchr(buf + *o, '\0', l))
        return NULL;
    char *s = malloc(l + 1);
    if (!s)
        return NULL;
    memcpy(s, buf + *o, l);
    s[l] = '\0';
    *o += l;
    return s;
}

int posix_meta_decode(const unsigned char *buf, size_t len, struct obj_meta *m)
{
    if (len < 7 || memcmp(buf, "SGM1", 4) != 0)
        return -1;
    size_t o = 4;
    size_t el = buf[o++];
    if (el >= sizeof m->etag || len - o < el + 2 || memchr(buf + o, '\0', el))
        return -1;
    char etag[72];
    memcpy(etag, buf + o, el);
    etag[el] = '\0';
    o += el;
    size_t n = get16(buf + o);
    o += 2;
    struct obj_meta tmp = { 0 };
    for (size_t i = 0; i < n; i++) {
        char *name = take_str(buf, len, &o);
        char *value = name ? take_str(buf, len, &o) : NULL;
        if (!value || obj_meta_add_hdr(&tmp, name, value) != 0) {
            free(name);
            free(value);
            obj_meta_clear(&tmp);
            return -1;
        }
        free(name);
        free(value);
    }
    if (o != len) {
        obj_meta_clear(&tmp);
        return -1;
    }
    memcpy(m->etag, etag, el + 1);
    hdrs_free(m);
    m->hdrs = tmp.hdrs;
    m->n_hdrs = tmp.n_hdrs;
    return 0;
}

/* ---- ETags ---- */

void posix_md5_to_hex(const unsigned char md5[16], char out[33])
{
    sg_hex_encode(md5, 16, out);
}

int posix_hex_to_md5(const char *hex, unsigned char md5[16])
{
    return strlen(hex) == 32 && sg_hex_decode(hex, 32, md5) == 16 ? 0 : -1;
}

bool posix_etag_equal(const char *a, const char *b)
{
    return strcasecmp(a, b) == 0;
}

void posix_pseudo_etag(const struct stat *st, char out[72])
{
    char in[128];
    int n = snprintf(in, sizeof in, "sg-pseudo:%llu:%llu:%llu:%lld.%09ld",
                     (unsigned long long)st->st_dev, (unsigned long long)st->st_ino,
                     (unsigned long long)st->st_size, (long long)st->st_mtim.tv_sec,
                     (long)st->st_mtim.tv_nsec);
    unsigned char md[16];
    unsigned int mdl = 0;
    EVP_Digest(in, (size_t)n, md, &mdl, EVP_md5(), NULL);
    posix_md5_to_hex(md, out);
    memcpy(out + 32, "-1", 3);
}

/* ---- bounded heap ---- */

int posix_heap_init(struct posix_heap *h, size_t cap, int (*cmp)(const void *, const void *),
                    void (*free_el)(void *))
{
    h->v = calloc(cap ? cap : 1, sizeof *h->v);
    h->n = 0;
    h->cap = cap;
    h->cmp = cmp;
    h->free_el = free_el;
    return h->v ? 0 : -1;
}

static void heap_swap(struct posix_heap *h, size_t i, size_t j)
{
    void *t = h->v[i];
    h->v[i] = h->v[j];
    h->v[j] = t;
}

static void heap_down(struct posix_heap *h, size_t i, size_t n)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && h->cmp(h->v[l], h->v[m]) > 0)
            m = l;
        if (r < n && h->cmp(h->v[r], h->v[m]) > 0)
            m = r;
        if (m == i)
            return;
        heap_swap(h, i, m);
        i = m;
    }
}

void posix_heap_push(struct posix_heap *h, void *el)
{
    if (h->cap == 0) {
        h->free_el(el);
        return;
    }
    if (h->n < h->cap) {
        size_t i = h->n++;
        h->v[i] = el;
        while (i > 0) {
            size_t p = (i - 1) / 2;
            if (h->cmp(h->v[i], h->v[p]) <= 0)
                break;
            heap_swap(h, i, p);
            i = p;
        }
        return;
    }
    if (h->cmp(el, h->v[0]) >= 0) {
        h->free_el(el);
        return;
    }
    h->free_el(h->v[0]);
    h->v[0] = el;
    heap_down(h, 0, h->n);
}

void posix_heap_sort(struct posix_heap *h)
{
    for (size_t n = h->n; n > 1; n--) {
        heap_swap(h, 0, n - 1);
        heap_down(h, 0, n - 1);
    }
}

void posix_heap_clear(struct posix_heap *h)
{
    for (size_t i = 0; i < h->n; i++)
        h->free_el(h->v[i]);
    h->n = 0;
}

void posix_heap_free(struct posix_heap *h)
{
    posix_heap_clear(h);
    free(h->v);
    h->v = NULL;
}
