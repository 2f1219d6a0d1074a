/* backend/tags.c - tag sets of objects and buckets (backend.h, "tag sets"):
 * the Tagging XML document both ways (libxml2), the x-amz-tagging query
 * form both ways, and S3's rules for keys and values. One codec for the
 * gateway (client bodies and headers, answers) and the s3 tier (the cold
 * tier's answers, the bodies sent to it). Pure functions, tested by
 * tests/unit/test_backend_tags.c. */
#include "backend.h"
#include "encoding.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlwriter.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define S3_XMLNS "http://s3.amazonaws.com/doc/2006-03-01/"

void obj_tags_clear(struct obj_tags *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].key);   /* one allocation holds key and value */
    free(t->v);
    t->v = NULL;
    t->n = 0;
}

enum obj_tags_status obj_tags_add(struct obj_tags *t, const char *key, const char *value)
{
    size_t kl = strlen(key), vl = strlen(value);
    struct obj_tag *nv = realloc(t->v, (t->n + 1) * sizeof *nv);
    if (!nv)
        return OBJ_TAGS_NOMEM;
    t->v = nv;
    char *kv = malloc(kl + vl + 2);
    if (!kv)
        return OBJ_TAGS_NOMEM;
    memcpy(kv, key, kl + 1);
    memcpy(kv + kl + 1, value, vl + 1);
    t->v[t->n].key = kv;
    t->v[t->n].value = kv + kl + 1;
    t->n++;
    return OBJ_TAGS_OK;
}

/* ---- the XML document ---- */

static bool named(const xmlNode *n, const char *name)
{
    return n && n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

static const xmlNode *first_named(const xmlNode *parent, const char *name)
{
    for (const xmlNode *c = parent->children; c; c = c->next)
        if (named(c, name))
            return c;
    return NULL;
}

/* One <Tag>: its Key and Value (both required) appended to out. */
static enum obj_tags_status tag_from_xml(const xmlNode *tag, struct obj_tags *out)
{
    const xmlNode *k = first_named(tag, "Key"), *v = first_named(tag, "Value");
    if (!k || !v)
        return OBJ_TAGS_MALFORMED;
    xmlChar *kt = xmlNodeGetContent(k), *vt = xmlNodeGetContent(v);
    enum obj_tags_status st = OBJ_TAGS_NOMEM;
    if (kt && vt)
        st = obj_tags_add(out, (const char *)kt, (const char *)vt);
    xmlFree(kt);
    xmlFree(vt);
    return st;
}

enum obj_tags_status obj_tags_from_xml(const char *xml, size_t len, struct obj_tags *out)
{
    memset(out, 0, sizeof *out);
    if (!xml || len == 0 || len > INT_MAX)
        return OBJ_TAGS_MALFORMED;
    /* NONET: nothing is fetched; entities are not substituted (the default). */
    xmlDocPtr doc = xmlReadMemory(xml, (int)len, "tagging.xml", NULL,
                                  XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    if (!doc)
        return OBJ_TAGS_MALFORMED;
    const xmlNode *root = xmlDocGetRootElement(doc);
    const xmlNode *set = named(root, "Tagging") ? first_named(root, "TagSet") : NULL;
    enum obj_tags_status st = set ? OBJ_TAGS_OK : OBJ_TAGS_MALFORMED;
    for (const xmlNode *c = set ? set->children : NULL; c && st == OBJ_TAGS_OK; c = c->next) {
        if (c->type == XML_ELEMENT_NODE)
            st = named(c, "Tag") ? tag_from_xml(c, out) : OBJ_TAGS_MALFORMED;
    }
    xmlFreeDoc(doc);
    if (st != OBJ_TAGS_OK)
        obj_tags_clear(out);
    return st;
}

int obj_tags_to_xml(const struct obj_tags *t, char **xml, size_t *len)
{
    *xml = NULL;
    *len = 0;
    xmlBufferPtr buf = xmlBufferCreate();
    xmlTextWriterPtr w = buf ? xmlNewTextWriterMemory(buf, 0) : NULL;
    int rc = w ? 0 : -1;
    rc |= xmlTextWriterStartDocument(w, "1.0", "UTF-8", NULL) < 0;
    rc |= xmlTextWriterStartElement(w, BAD_CAST "Tagging") < 0;
    rc |= xmlTextWriterWriteAttribute(w, BAD_CAST "xmlns", BAD_CAST S3_XMLNS) < 0;
    rc |= xmlTextWriterStartElement(w, BAD_CAST "TagSet") < 0;
    for (size_t i = 0; i < t->n && !rc; i++) {
        rc |= xmlTextWriterStartElement(w, BAD_CAST "Tag") < 0;
        rc |= xmlTextWriterWriteElement(w, BAD_CAST "Key", BAD_CAST t->v[i].key) < 0;
        rc |= xmlTextWriterWriteElement(w, BAD_CAST "Value", BAD_CAST t->v[i].value) < 0;
        rc |= xmlTextWriterEndElement(w) < 0;
    }
    rc |= xmlTextWriterEndDocument(w) < 0;   /* closes TagSet and Tagging */
    if (w)
        xmlFreeTextWriter(w);   /* flushes into buf */
    if (!rc) {
        size_t n = (size_t)xmlBufferLength(buf);
        *xml = malloc(n + 1);
        if (*xml) {
            memcpy(*xml, xmlBufferContent(buf), n);
            (*xml)[n] = '\0';
            *len = n;
        }
    }
    if (buf)
        xmlBufferFree(buf);
    return *xml ? 0 : -1;
}

/* ---- the x-amz-tagging query form ---- */

/* s[0..n) as a new decoded string ('+' is a space); NULL (*bad set) when a
 * '%' is not followed by two hex digits or escapes a NUL, NULL alone when
 * out of memory. */
static char *query_part(const char *s, size_t n, bool *bad)
{
    char *d = malloc(n + 1);
    if (!d)
        return NULL;
    long l = sg_pct_decode_strict(s, n, d, true);
    if (l < 0 || memchr(d, '\0', (size_t)l)) {
        free(d);
        *bad = true;
        return NULL;
    }
    d[l] = '\0';
    return d;
}

enum obj_tags_status obj_tags_from_query(const char *q, struct obj_tags *out)
{
    memset(out, 0, sizeof *out);
    enum obj_tags_status st = OBJ_TAGS_OK;
    while (*q && st == OBJ_TAGS_OK) {
        size_t n = strcspn(q, "&");
        const char *eq = memchr(q, '=', n);
        size_t kn = eq ? (size_t)(eq - q) : n;
        if (n > 0) {
            bool bad = eq && kn == 0;
            char *k = bad ? NULL : query_part(q, kn, &bad);
            char *v = k ? query_part(eq ? eq + 1 : "", eq ? n - kn - 1 : 0, &bad) : NULL;
            st = bad ? OBJ_TAGS_MALFORMED : !v ? OBJ_TAGS_NOMEM : obj_tags_add(out, k, v);
            free(k);
            free(v);
        }
        q += n + (q[n] == '&');
    }
    if (st != OBJ_TAGS_OK)
        obj_tags_clear(out);
    return st;
}

char *obj_tags_to_query(const struct obj_tags *t)
{
    size_t cap = 1;
    for (size_t i = 0; i < t->n; i++)
        cap += 3 * (strlen(t->v[i].key) + strlen(t->v[i].value)) + 2;
    char *q = malloc(cap), *p = q;
    if (!q)
        return NULL;
    *p = '\0';
    for (size_t i = 0; i < t->n; i++) {
        if (i)
            *p++ = '&';
        p += sg_uri_encode(t->v[i].key, strlen(t->v[i].key), false, p);
        *p++ = '=';
        p += sg_uri_encode(t->v[i].value, strlen(t->v[i].value), false, p);
    }
    return q;
}

size_t obj_tags_query_count(const char *q)
{
    size_t n = 0;
    while (q && *q) {
        size_t len = strcspn(q, "&");
        n += len > 0;
        q += len + (q[len] == '&');
    }
    return n;
}

/* ---- S3's rules ---- */

/* Non-ASCII code points that are neither letters, digits nor white space
 * (S3 allows \p{L}\p{Z}\p{N} besides a few ASCII signs): C1 controls,
 * Latin-1 signs, combining marks, general punctuation, currency, arrows
 * and mathematical, technical and box-drawing signs, dingbats, CJK and
 * full-width punctuation, private use, emoji. An approximation: other
 * blocks are taken as letters, so a rare sign elsewhere is accepted where
 * S3 would refuse it (README, "Differences from AWS S3"). */
static const uint32_t not_lzn[][2] = {
    { 0x80, 0x9f },     { 0xa1, 0xa9 },     { 0xab, 0xb1 },     { 0xb4, 0xb4 },
    { 0xb6, 0xb8 },     { 0xbb, 0xbb },     { 0xbf, 0xbf },     { 0xd7, 0xd7 },
    { 0xf7, 0xf7 },     { 0x300, 0x36f },   { 0x2010, 0x2027 }, { 0x2030, 0x205e },
    { 0x2060, 0x206f }, { 0x20a0, 0x20ff }, { 0x2190, 0x245f }, { 0x2500, 0x2775 },
    { 0x2794, 0x2bff }, { 0x3001, 0x3004 }, { 0x3008, 0x3020 }, { 0xe000, 0xf8ff },
    { 0xfe10, 0xfe6f }, { 0xff01, 0xff0f }, { 0xff1a, 0xff20 }, { 0xff3b, 0xff40 },
    { 0xff5b, 0xff65 }, { 0xfff0, 0xffff }, { 0x1f000, 0x1faff }, { 0xe0000, 0xe007f },
};

/* Decodes one UTF-8 sequence at s (strict: no overlong forms, surrogates or
 * values past U+10FFFF); its length, or 0 when invalid. */
static size_t utf8_next(const unsigned char *s, uint32_t *cp)
{
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    size_t len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
    static const uint32_t min[5] = { 0, 0, 0x80, 0x800, 0x10000 };
    if (len == 0 || s[0] > 0xf4)
        return 0;
    uint32_t v = s[0] & (0x7fu >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3fu);
    }
    if (v < min[len] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}

static bool char_allowed(uint32_t c)
{
    if (c < 0x80)
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c && strchr(" _.:/=+-@", (int)c));
    for (size_t i = 0; i < sizeof not_lzn / sizeof not_lzn[0]; i++)
        if (c >= not_lzn[i][0] && c <= not_lzn[i][1])
            return false;
    return true;
}

/* Valid UTF-8 of allowed characters only, between min and max characters. */
static bool text_ok(const char *s, size_t min, size_t max)
{
    size_t chars = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        uint32_t c;
        size_t l = utf8_next(p, &c);
        if (!l || !char_allowed(c) || ++chars > max)
            return false;
        p += l;
    }
    return chars >= min;
}

enum obj_tags_status obj_tags_check(const struct obj_tags *t, size_t max, size_t *at)
{
    if (at)
        *at = 0;
    if (t->n > max)
        return OBJ_TAGS_TOO_MANY;
    for (size_t i = 0; i < t->n; i++) {
        if (at)
            *at = i;
        if (!text_ok(t->v[i].key, 1, OBJ_TAG_KEY_MAX))
            return OBJ_TAGS_BAD_KEY;
        if (!text_ok(t->v[i].value, 0, OBJ_TAG_VALUE_MAX))
            return OBJ_TAGS_BAD_VALUE;
        if (strncmp(t->v[i].key, "aws:", 4) == 0)
            return OBJ_TAGS_SYSTEM_KEY;
        for (size_t j = 0; j < i; j++)
            if (strcmp(t->v[j].key, t->v[i].key) == 0)
                return OBJ_TAGS_DUPLICATE;
    }
    return OBJ_TAGS_OK;
}
