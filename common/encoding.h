/* common/encoding.h - the text encodings of bytes more than one module
 * writes or reads: hex (digests, ETags, signatures), base64 (Content-MD5,
 * x-amz-checksum-*, continuation tokens) and percent-encoding (URIs,
 * query strings, listings). Each is written once here, for every module:
 * pure functions, any thread. */
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

/* Percent-encodes s[0..n) as AWS signs and S3 lists it (SigV4 URI
 * encoding, encoding-type=url): A-Z a-z 0-9 - . _ ~ stay, '/' stays when
 * keep_slash, every other byte becomes %XX (upper-case hex). out needs
 * 3n+1 bytes; a NUL ends it. Returns the length written, without the NUL.
 * (sg_buf_add_uri in buf.h appends the same to a capped buffer.) */
size_t sg_uri_encode(const char *s, size_t n, bool keep_slash, char *out);

/* Percent-decodes s[0..n) into out (at least n bytes; out == s decodes in
 * place); returns the length written, without a NUL. An invalid or cut
 * escape is kept literally; '+' becomes a space when plus_is_space (query
 * strings, form-style listings), else stays '+' (S3 paths). */
size_t sg_pct_decode(const char *s, size_t n, char *out, bool plus_is_space);

/* The same, strict: returns -1 at the first escape that is cut short or not
 * two hex digits (what a server refuses in a request line), else the length
 * written. Decoded NUL bytes are written like any other: a caller that must
 * not see one looks for it. */
long sg_pct_decode_strict(const char *s, size_t n, char *out, bool plus_is_space);

/* The length (1-4) of the well-formed UTF-8 sequence at s[0..n), or 0 when
 * there is none: a stray or missing continuation byte, an overlong form
 * (C0 AE), a surrogate (ED A0..BF), past U+10FFFF, or cut short. */
size_t sg_utf8_seq(const char *s, size_t n);

/* Is s[0..n) well-formed UTF-8 (what S3 takes as a key or a listing
 * parameter)? NUL bytes count as characters. */
bool sg_utf8_valid(const char *s, size_t n);

#endif
