/* common/buf.h - a growable byte buffer with a cap fixed when it is made
 * (the canonical request of a signature, a request URL, an answer body):
 * hitting the cap is an error the caller reports, never a realloc loop. */
#ifndef SHARDGATE_COMMON_BUF_H
#define SHARDGATE_COMMON_BUF_H

#include <stdbool.h>
#include <stddef.h>

enum { SG_BUF_OVER = 1, SG_BUF_NOMEM = 2 };

/* The buffer owns p (sg_buf_free frees it). Readers use p and len directly
 * but keep no pointer into p across an append: growing moves it. One owner
 * at a time; no locking. */
struct sg_buf {
    char *p;          /* NULL until something is added, then NUL-terminated */
    size_t len, cap, max;
    int err;          /* sticky: 0, SG_BUF_OVER (len would pass max) or SG_BUF_NOMEM */
};

/* An empty buffer that will hold at most max bytes. Allocates nothing. */
void sg_buf_init(struct sg_buf *b, size_t max);
/* Frees the bytes and empties the buffer (max stays, err is cleared). */
void sg_buf_free(struct sg_buf *b);

/* Append; once err is set, every later append is dropped. Each returns
 * true while err is 0. */
bool sg_buf_add(struct sg_buf *b, const void *d, size_t n);
bool sg_buf_adds(struct sg_buf *b, const char *s);
bool sg_buf_addc(struct sg_buf *b, char c);
/* Appends s[0..n) URI-encoded as AWS signs it (sg_uri_encode of
 * encoding.h): A-Z a-z 0-9 - . _ ~ stay, '/' stays when keep_slash, every
 * other byte becomes %XX (upper case). */
bool sg_buf_add_uri(struct sg_buf *b, const char *s, size_t n, bool keep_slash);

#endif
