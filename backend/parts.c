/* backend/parts.c - the part boundaries of a multipart object as the posix
 * store keeps them (an xattr written at CompleteMultipartUpload), and the
 * lookup of one part's bytes for GET/HEAD ?partNumber=N. Pure functions:
 * unit-tested in tests/unit/test_backend_parts.c. */
#include "posix_int.h"

#include <ctype.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "encoding.h"

/* "SGP1 " then runs "size*count" joined by ','. Clients upload parts of one
 * size and a shorter last part, so 10000 parts are usually two runs: the
 * list fits beside the metadata in the few KiB ext4 keeps per file. */
#define PARTS_MAGIC "SGP1 "

size_t posix_parts_encode(const uint64_t *sizes, size_t n, char *buf, size_t cap)
{
    if (n == 0 || n > BACKEND_MAX_PARTS || cap < sizeof PARTS_MAGIC)
        return 0;
    size_t o = sizeof PARTS_MAGIC - 1;
    memcpy(buf, PARTS_MAGIC, o);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && sizes[j] == sizes[i])
            j++;
        int w = snprintf(buf + o, cap - o, "%s%" PRIu64 "*%zu", i ? "," : "", sizes[i], j - i);
        if (w < 0 || (size_t)w >= cap - o)
            return 0;
        o += (size_t)w;
        i = j;
    }
    return o;
}

/* One decimal number of at most 20 digits at *p (advanced); -1 if none. */
static int take_num(const char **p, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    const char *s = *p;
    while (s < end && *s >= '0' && *s <= '9') {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
        s++;
    }
    if (s == *p)
        return -1;
    *p = s;
    *out = v;
    return 0;
}

int posix_parts_locate(const char *buf, size_t len, unsigned part_no,
                       struct backend_part_range *out)
{
    size_t ml = sizeof PARTS_MAGIC - 1;
    if (len < ml || memcmp(buf, PARTS_MAGIC, ml) != 0)
        return -1;
    const char *p = buf + ml, *end = buf + len;
    uint64_t off = 0, count = 0;
    bool found = false;
    while (p < end) {
        uint64_t size, n;
        if (take_num(&p, end, &size) != 0 || p == end || *p++ != '*' ||
            take_num(&p, end, &n) != 0 || n == 0 || n > BACKEND_MAX_PARTS - count)
            return -1;
        if (p < end && *p++ != ',')
            return -1;
        if (p == end && buf[len - 1] == ',')
            return -1;
        if (!found && part_no > count && part_no <= count + n) {
            uint64_t before = part_no - count - 1;
            if (size && before > (UINT64_MAX - off) / size)
                return -1;
            out->first = off + before * size;
            out->size = size;
            found = true;
        }
        if (size && n > (UINT64_MAX - off) / size)
            return -1;
        off += n * size;
        count += n;
    }
    if (count == 0)
        return -1;
    out->parts_count = (unsigned)count;
    out->total = off;
    return found ? 0 : 1;
}

unsigned backend_etag_parts(const char *etag)
{
    const char *dash = strrchr(etag, '-');
    if (!dash || dash[1] < '1' || dash[1] > '9')
        return 0;
    char *end;
    unsigned long n = strtoul(dash + 1, &end, 10);
    return *end || n > BACKEND_MAX_PARTS ? 0 : (unsigned)n;
}

void backend_parts_digest(const struct backend_part *parts, size_t n, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int ml = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1) {
        for (size_t i = 0; i < n; i++) {
            char line[96];
            const char *e = parts[i].etag;
            size_t el = strlen(e);
            if (el >= 2 && e[0] == '"' && e[el - 1] == '"') {
                e++;
                el -= 2;
            }
            int w = snprintf(line, sizeof line, "%u ", parts[i].part_no);
            size_t o = (size_t)w;
            for (size_t j = 0; j < el && o + 2 < sizeof line; j++)
                line[o++] = (char)tolower((unsigned char)e[j]);
            line[o++] = '\n';
            EVP_DigestUpdate(ctx, line, o);
        }
        EVP_DigestFinal_ex(ctx, md, &ml);
    }
    EVP_MD_CTX_free(ctx);
    static const char hex[] = "0123456789abcdef";
    memset(out, '0', 64);
    for (unsigned i = 0; i < ml && i < 32; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[64] = '\0';
}

bool backend_parts_etag(const struct backend_part *parts, size_t n, char out[72])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok = ctx && n > 0 && EVP_DigestInit_ex(ctx, EVP_md5(), NULL) == 1;
    for (size_t i = 0; ok && i < n; i++) {
        const char *e = parts[i].etag;
        size_t el = strlen(e);
        if (el == 34 && e[0] == '"' && e[33] == '"') {
            e++;
            el = 32;
        }
        unsigned char md5[16];
        ok = el == 32 && sg_hex_decode(e, 32, md5) == 16 &&
             EVP_DigestUpdate(ctx, md5, sizeof md5) == 1;
    }
    unsigned char fin[16];
    ok = ok && EVP_DigestFinal_ex(ctx, fin, NULL) == 1;
    EVP_MD_CTX_free(ctx);
    if (!ok)
        return false;
    sg_hex_encode(fin, sizeof fin, out);
    snprintf(out + 32, 40, "-%zu", n);
    return true;
}
