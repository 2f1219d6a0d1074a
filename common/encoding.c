/* common/encoding.c - hex, base64 and percent-encoding of encoding.h. */
#include "encoding.h"

#include <string.h>

int sg_hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

void sg_hex_encode(const void *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    const uint8_t *p = in;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = '\0';
}

long sg_hex_decode(const char *hex, size_t n, void *out)
{
    uint8_t *o = out;
    if (n % 2 != 0)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        int h = sg_hexval((unsigned char)hex[2 * i]), l = sg_hexval((unsigned char)hex[2 * i + 1]);
        if (h < 0 || l < 0)
            return -1;
        o[i] = (uint8_t)(h << 4 | l);
    }
    return (long)(n / 2);
}

static const char b64_chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t sg_b64_encode(const void *data, size_t n, char *out)
{
    const uint8_t *in = data;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[o++] = b64_chars[(v >> 18) & 63];
        out[o++] = b64_chars[(v >> 12) & 63];
        out[o++] = i + 1 < n ? b64_chars[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? b64_chars[v & 63] : '=';
    }
    out[o] = '\0';
    return o;
}

static int b64_val(char c)
{
    const char *p = c ? strchr(b64_chars, c) : NULL;
    return p ? (int)(p - b64_chars) : -1;
}

long sg_b64_decode(const char *in, size_t n, void *dst, size_t cap)
{
    uint8_t *out = dst;
    if (n % 4 != 0)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        bool last = i + 4 == n;
        int v[4];
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            char c = in[i + (size_t)k];
            if (c == '=' && last && k >= 2) {
                v[k] = 0;
                pad++;
                continue;
            }
            if (pad)            /* data after '=' */
                return -1;
            v[k] = b64_val(c);
            if (v[k] < 0)
                return -1;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        size_t nb = 3 - (size_t)pad;
        if (o + nb > cap)
            return -1;
        out[o++] = (uint8_t)(w >> 16);
        if (nb > 1)
            out[o++] = (uint8_t)(w >> 8);
        if (nb > 2)
            out[o++] = (uint8_t)w;
    }
    return (long)o;
}

static bool unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

size_t sg_uri_encode(const char *s, size_t n, bool keep_slash, char *out)
{
    static const char digits[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (unreserved(c) || (keep_slash && c == '/')) {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = digits[c >> 4];
            out[o++] = digits[c & 15];
        }
    }
    out[o] = '\0';
    return o;
}

/* Both decoders: strict stops at a bad escape with -1, lenient keeps it. */
static long pct_decode(const char *s, size_t n, char *out, bool plus_is_space, bool strict)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int h = -1, l = -1;
        if (s[i] == '%' && i + 2 < n) {
            h = sg_hexval((unsigned char)s[i + 1]);
            l = sg_hexval((unsigned char)s[i + 2]);
        }
        if (h >= 0 && l >= 0) {
            out[o++] = (char)(h << 4 | l);
            i += 2;
        } else if (s[i] == '%' && strict) {
            return -1;
        } else {
            out[o++] = plus_is_space && s[i] == '+' ? ' ' : s[i];
        }
    }
    return (long)o;
}

size_t sg_pct_decode(const char *s, size_t n, char *out, bool plus_is_space)
{
    return (size_t)pct_decode(s, n, out, plus_is_space, false);
}

long sg_pct_decode_strict(const char *s, size_t n, char *out, bool plus_is_space)
{
    return pct_decode(s, n, out, plus_is_space, true);
}

size_t sg_utf8_seq(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    if (!n)
        return 0;
    if (u[0] < 0x80)
        return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;   /* the second byte's range (RFC 3629, table 3-7) */
    if (u[0] >= 0xC2 && u[0] <= 0xDF)
        len = 2;
    else if (u[0] >= 0xE0 && u[0] <= 0xEF) {
        len = 3;
        if (u[0] == 0xE0)
            lo = 0xA0;        /* no overlong 3-byte forms */
        else if (u[0] == 0xED)
            hi = 0x9F;        /* no surrogates */
    } else if (u[0] >= 0xF0 && u[0] <= 0xF4) {
        len = 4;
        if (u[0] == 0xF0)
            lo = 0x90;        /* no overlong 4-byte forms */
        else if (u[0] == 0xF4)
            hi = 0x8F;        /* nothing past U+10FFFF */
    } else {
        return 0;             /* 80..C1 (stray continuation, overlong C0/C1), F5..FF */
    }
    if (n < len || u[1] < lo || u[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (u[i] < 0x80 || u[i] > 0xBF)
            return 0;
    return len;
}

bool sg_utf8_valid(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t l = sg_utf8_seq(s + i, n - i);
        if (!l)
            return false;
        i += l;
    }
    return true;
}
