/* common/buf.c - the capped growable buffer of buf.h. */
#include "buf.h"

#include <stdlib.h>
#include <string.h>

void sg_buf_init(struct sg_buf *b, size_t max)
{
    *b = (struct sg_buf){ .max = max };
}

void sg_buf_free(struct sg_buf *b)
{
    free(b->p);
    *b = (struct sg_buf){ .max = b->max };
}

bool sg_buf_add(struct sg_buf *b, const void *d, size_t n)
{
    if (b->err)
        return false;
    if (n > b->max || b->len > b->max - n) {
        b->err = SG_BUF_OVER;
        return false;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->err = SG_BUF_NOMEM;
            return false;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, d, n);
    b->len += n;
    b->p[b->len] = '\0';
    return true;
}

bool sg_buf_adds(struct sg_buf *b, const char *s)
{
    return sg_buf_add(b, s, strlen(s));
}

bool sg_buf_addc(struct sg_buf *b, char c)
{
    return sg_buf_add(b, &c, 1);
}

static bool unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

bool sg_buf_add_uri(struct sg_buf *b, const char *s, size_t n, bool keep_slash)
{
    static const char digits[] = "0123456789ABCDEF";
    size_t start = 0;       /* a run of bytes that stay is added at once */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (unreserved(c) || (keep_slash && c == '/'))
            continue;
        sg_buf_add(b, s + start, i - start);
        char esc[3] = { '%', digits[c >> 4], digits[c & 15] };
        sg_buf_add(b, esc, 3);
        start = i + 1;
    }
    return sg_buf_add(b, s + start, n - start);
}
