/* cache/objfile.c - the header block of a cache data file: a small
 * length-prefixed encoding of the object's metadata. */
#include <stdlib.h>
#include <string.h>

#include "cache_int.h"

static int put(uint8_t *buf, size_t cap, size_t *pos, const void *p, size_t n)
{
    if (n > cap - *pos)
        return -1;
    memcpy(buf + *pos, p, n);
    *pos += n;
    return 0;
}

static int put_u64(uint8_t *buf, size_t cap, size_t *pos, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    return put(buf, cap, pos, b, 8);
}

static int put_str(uint8_t *buf, size_t cap, size_t *pos, const char *s)
{
    size_t n = strlen(s);
    return put_u64(buf, cap, pos, n) || put(buf, cap, pos, s, n);
}

int cache_hdr_encode(const struct obj_meta *m, uint8_t *buf, size_t cap, size_t *len)
{
    size_t pos = 8;   /* magic + body length, filled last */
    if (cap < 8 || cap > CACHE_HDR_MAX)
        cap = cap < 8 ? cap : CACHE_HDR_MAX;
    if (cap < 8)
        return -1;
    if (put_u64(buf, cap, &pos, m->size) || put_u64(buf, cap, &pos, (uint64_t)m->mtime.tv_sec) ||
        put_u64(buf, cap, &pos, (uint64_t)m->mtime.tv_nsec) || put_str(buf, cap, &pos, m->etag) ||
        put_u64(buf, cap, &pos, m->n_hdrs))
        return -1;
    for (size_t i = 0; i < m->n_hdrs; i++)
        if (put_str(buf, cap, &pos, m->hdrs[i].name) || put_str(buf, cap, &pos, m->hdrs[i].value))
            return -1;
    memcpy(buf, CACHE_HDR_MAGIC, 4);
    uint32_t body = (uint32_t)(pos - 8);
    for (int i = 0; i < 4; i++)
        buf[4 + i] = (uint8_t)(body >> (8 * i));
    *len = pos;
    return 0;
}

static int get_u64(const uint8_t *buf, size_t len, size_t *pos, uint64_t *v)
{
    if (len - *pos < 8)
        return -1;
    *v = 0;
    for (int i = 0; i < 8; i++)
        *v |= (uint64_t)buf[*pos + (size_t)i] << (8 * i);
    *pos += 8;
    return 0;
}

/* A string into a new NUL-terminated buffer (or into fixed storage). */
static int get_str(const uint8_t *buf, size_t len, size_t *pos, char *fixed, size_t fixed_cap,
                   char **out)
{
    uint64_t n;
    if (get_u64(buf, len, pos, &n) || n > len - *pos || memchr(buf + *pos, '\0', n))
        return -1;
    char *s = fixed;
    if (fixed) {
        if (n >= fixed_cap)
            return -1;
    } else if (!(s = malloc(n + 1))) {
        return -1;
    }
    memcpy(s, buf + *pos, n);
    s[n] = '\0';
    *pos += n;
    if (out)
        *out = s;
    return 0;
}

size_t cache_hdr_length(const uint8_t *buf, size_t n)
{
    if (n < 8 || memcmp(buf, CACHE_HDR_MAGIC, 4) != 0)
        return 0;
    uint32_t body = 0;
    for (int i = 0; i < 4; i++)
        body |= (uint32_t)buf[4 + i] << (8 * i);
    return 8 + (size_t)body;
}

int cache_hdr_decode(const uint8_t *buf, size_t len, struct obj_meta *m)
{
    size_t hl = cache_hdr_length(buf, len);
    if (hl == 0 || hl > len)
        return -1;
    len = hl;
    size_t pos = 8;
    uint64_t sec, nsec, n;
    if (get_u64(buf, len, &pos, &m->size) || get_u64(buf, len, &pos, &sec) ||
        get_u64(buf, len, &pos, &nsec) || nsec >= 1000000000u ||
        get_str(buf, len, &pos, m->etag, sizeof m->etag, NULL) || get_u64(buf, len, &pos, &n) ||
        n > 4096)
        return -1;
    m->mtime.tv_sec = (time_t)sec;
    m->mtime.tv_nsec = (long)nsec;
    for (uint64_t i = 0; i < n; i++) {
        char *name, *value;
        if (get_str(buf, len, &pos, NULL, 0, &name))
            return -1;
        if (get_str(buf, len, &pos, NULL, 0, &value)) {
            free(name);
            return -1;
        }
        int rc = obj_meta_add_hdr(m, name, value);
        free(name);
        free(value);
        if (rc)
            return -1;
    }
    return 0;
}

uint64_t cache_hdr_data_offset(size_t hdr_len)
{
    return ((uint64_t)hdr_len + CACHE_HDR_ALIGN - 1) / CACHE_HDR_ALIGN * CACHE_HDR_ALIGN;
}

int cache_etag_is_md5(const char *etag)
{
    size_t i = 0;
    for (; etag[i]; i++) {
        char ch = etag[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F')))
            return 0;
    }
    return i == 32;
}
