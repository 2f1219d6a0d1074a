/* gateway/util.c - per-request arena and the capped growable buffer. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_int.h"

struct gw_arena_block {
    struct gw_arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

enum { ARENA_BLOCK = 16 * 1024 };

void *gw_arena_alloc(struct gw_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    struct gw_arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->cap = cap;
        b->used = 0;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

char *gw_arena_strndup(struct gw_arena *a, const char *s, size_t n)
{
    char *p = gw_arena_alloc(a, n + 1);
    if (p)
        memcpy(p, s, n);
    return p;
}

char *gw_arena_strdup(struct gw_arena *a, const char *s)
{
    return gw_arena_strndup(a, s, strlen(s));
}

char *gw_arena_printf(struct gw_arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *p = gw_arena_alloc(a, (size_t)n + 1);
    if (!p)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

void gw_arena_free(struct gw_arena *a)
{
    struct gw_arena_block *b = a->head;
    while (b) {
        struct gw_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
}

void gw_buf_init(struct gw_buf *b, size_t limit)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->limit = limit;
}

int gw_buf_append(struct gw_buf *b, const void *p, size_t n)
{
    if (n > b->limit - b->len)
        return -1;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        if (cap > b->limit + 1)
            cap = b->limit + 1;
        char *d = realloc(b->data, cap);
        if (!d)
            return -1;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int gw_buf_puts(struct gw_buf *b, const char *s)
{
    return gw_buf_append(b, s, strlen(s));
}

int gw_buf_printf(struct gw_buf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    if ((size_t)n < sizeof small)
        return gw_buf_append(b, small, (size_t)n);
    char *big = malloc((size_t)n + 1);
    if (!big)
        return -1;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    int rc = gw_buf_append(b, big, (size_t)n);
    free(big);
    return rc;
}

char *gw_buf_take(struct gw_buf *b, size_t *len)
{
    char *d = b->data;
    *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    return d;
}

void gw_buf_free(struct gw_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
