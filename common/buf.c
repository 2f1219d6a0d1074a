/* common/buf.c - the capped growable buffer of buf.h. */
#include "buf.h"
#include "encoding.h"

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

bool sg_buf_add_uri(struct sg_buf *b, const char *s, size_t n, bool keep_slash)
{
    /* encoded a slice at a time on the stack: no allocation per call */
    char enc[3 * 256 + 1];
    for (size_t i = 0; i < n; i += 256) {
        size_t k = n - i < 256 ? n - i : 256;
        sg_buf_add(b, enc, sg_uri_encode(s + i, k, keep_slash, enc));
    }
    return sg_buf_add(b, "", 0);
}
