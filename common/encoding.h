/* common/encoding.h - the text encodings of bytes more than one module
 * writes or reads: hex (digests, ETags, signatures), base64 (Content-MD5,
 * x-amz-checksum-*) and percent-decoding (URIs, query strings, listings).
 * Percent-encoding appends to a buffer: sg_buf_add_uri in buf.h. */
#ifndef SHARDGATE_COMMON_ENCODING_H
#define SHARDGATE_COMMON_ENCODING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 0..15 for a hex digit (either case), else -1. */
int sg_hexval(int c);

/* Writes 2n lower-case hex digits of in[0..n) and a NUL to out. */
void sg_hex_encode(const void *in, size_t n, char *out);

/* Decodes the n hex digits (either case) of hex into n/2 bytes at out.
 * Returns n/2, or -1 when n is odd or a character is not a hex digit. */
long sg_hex_decode(const char *hex, size_t n, void *out);

/* Standard base64 with padding; out needs 4*((n+2)/3)+1 bytes. Returns the
 * length written (without the NUL). */
size_t sg_b64_encode(const void *in, size_t n, char *out);

/* Strict base64 (padding required, no whitespace). Returns the decoded
 * length, or -1 when malformed or longer than cap. */
long sg_b64_decode(const char *in, size_t n, void *out, size_t cap);

/* Percent-decodes s[0..n) into out (at least n bytes; out == s decodes in
 * place); returns the length written, without a NUL. An invalid or cut
 * escape is kept literally; '+' becomes a space when plus_is_space (query
 * strings, form-style listings), else stays '+' (S3 paths). */
size_t sg_pct_decode(const char *s, size_t n, char *out, bool plus_is_space);

#endif
