/* gateway/xml.c - S3 XML: a small escaping writer for responses (every
 * response is a flat, known shape, so a writer over a capped buffer is both
 * simpler and faster than building a DOM), and libxml2 parsers for the
 * request bodies we accept. Parsing never touches the network and never
 * expands entities (no XXE). */
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "encoding.h"
#include "gw_int.h"

#define S3_XMLNS "http://s3.amazonaws.com/doc/2006-03-01/"

int gw_xml_escape(struct gw_buf *b, const char *s)
{
    const char *run = s;
    for (; *s; s++) {
        const char *rep = NULL;
        char num[8];
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&apos;"; break;
        default:
            if (c < 0x20) {   /* control characters: as S3, "&#x7;" */
                snprintf(num, sizeof num, "&#x%x;", c);
                rep = num;
            } else if (c >= 0x80) {
                /* Keys are refused unless UTF-8, but a file put into the
                 * store's tree by hand may name a key that is not: its bytes
                 * become U+FFFD, so the document stays UTF-8 (encoding-type=url
                 * lists the exact bytes). */
                size_t l = sg_utf8_seq(s, strnlen(s, 4));
                if (l) {
                    s += l - 1;
                    continue;
                }
                rep = "\xEF\xBF\xBD";
            }
        }
        if (!rep)
            continue;
        if (gw_buf_append(b, run, (size_t)(s - run)) || gw_buf_puts(b, rep))
            return -1;
        run = s + 1;
    }
    return gw_buf_append(b, run, (size_t)(s - run));
}

int gw_xml_elem(struct gw_buf *b, const char *tag, const char *value)
{
    if (gw_buf_printf(b, "<%s>", tag) || gw_xml_escape(b, value ? value : ""))
        return -1;
    return gw_buf_printf(b, "</%s>", tag);
}

int gw_xml_begin(struct gw_buf *b, const char *root)
{
    return gw_buf_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<%s xmlns=\"%s\">",
                         root, S3_XMLNS);
}

void gw_reply_xml_built(struct gw_req *r, struct gw_buf *xml, int rc)
{
    if (rc) {
        gw_buf_free(xml);
        gw_reply_error(r, S3E_INTERNAL, NULL, NULL);
        return;
    }
    gw_reply_xml_buf(r, 200, xml);
}

int gw_url_encode(struct gw_buf *b, const char *s, bool keep_slash)
{
    /* common/encoding.h's encoder, a slice at a time on the stack */
    char enc[3 * 256 + 1];
    for (size_t n = strlen(s); n > 0;) {
        size_t k = n < 256 ? n : 256;
        if (gw_buf_append(b, enc, sg_uri_encode(s, k, keep_slash, enc)) != 0)
            return -1;
        s += k;
        n -= k;
    }
    return 0;
}

/* ---- parsing ---- */

static xmlDocPtr parse_doc(const char *xml, size_t len)
{
    if (len == 0 || len > (size_t)INT32_MAX)
        return NULL;
    return xmlReadMemory(xml, (int)len, "body.xml", NULL,
                         XML_PARSE_NONET | XML_PARSE_NOBLANKS | XML_PARSE_NOERROR |
                             XML_PARSE_NOWARNING);
}

static bool is_elem(const xmlNode *n, const char *name)
{
    return n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

/* Parses a document whose root element must be `name`: the root, with the
 * document in *doc (xmlFreeDoc it, NULL is fine); NULL when it is not such
 * a document. */
static xmlNode *parse_root(const char *xml, size_t len, const char *name, xmlDocPtr *doc)
{
    *doc = parse_doc(xml, len);
    xmlNode *root = *doc ? xmlDocGetRootElement(*doc) : NULL;
    return root && is_elem(root, name) ? root : NULL;
}

/* The text of an element (malloc'd), or NULL when it holds other elements. */
static char *elem_text(const xmlNode *n)
{
    for (const xmlNode *c = n->children; c; c = c->next)
        if (c->type == XML_ELEMENT_NODE)
            return NULL;
    xmlChar *t = xmlNodeGetContent(n);
    if (!t)
        return strdup("");
    char *s = strdup((const char *)t);
    xmlFree(t);
    return s;
}

/* The text of parent's last `name` child into *text (malloc'd, freed
 * first; left as is when there is none). 0, or -1 when one of them holds
 * other elements (or memory is short): *text is then NULL. */
static int last_child_text(const xmlNode *parent, const char *name, char **text)
{
    for (const xmlNode *c = parent->children; c; c = c->next) {
        if (is_elem(c, name)) {
            free(*text);
            *text = elem_text(c);
            if (!*text)
                return -1;
        }
    }
    return 0;
}

/* Strips one pair of surrounding quotes from an ETag, in place. */
static void unquote(char *s)
{
    size_t n = strlen(s);
    if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
        memmove(s, s + 1, n - 2);
        s[n - 2] = '\0';
    }
}

int gw_xml_parse_complete(const char *xml, size_t len, struct gw_xml_parts *out)
{
    out->parts = NULL;
    out->n = 0;
    xmlDocPtr doc;
    xmlNode *root = parse_root(xml, len, "CompleteMultipartUpload", &doc);
    int rc = -1;
    size_t cap = 0;
    if (!root)
        goto out;
    for (xmlNode *p = root->children; p; p = p->next) {
        if (p->type != XML_ELEMENT_NODE)
            continue;
        if (!is_elem(p, "Part"))
            continue;   /* S3 ignores unknown elements */
        if (out->n == BACKEND_MAX_PARTS)
            goto out;
        if (out->n == cap) {
            cap = cap ? cap * 2 : 16;
            struct backend_part *np = realloc(out->parts, cap * sizeof *np);
            if (!np)
                goto out;
            out->parts = np;
        }
        struct backend_part *bp = &out->parts[out->n];
        memset(bp, 0, sizeof *bp);
        bool have_no = false, have_etag = false, bad_ck = false;
        for (xmlNode *f = p->children; f; f = f->next) {
            if (f->type != XML_ELEMENT_NODE)
                continue;
            char *t = elem_text(f);
            if (!t)
                goto out;
            const char *ck = gw_checksum_header_of_elem((const char *)f->name);
            if (ck) {
                /* One checksum per part, at most a SHA-256 in base64 (44)
                 * plus slack; anything else is not a value S3 returned. */
                bad_ck |= bp->checksum_name[0] != '\0' || !*t || strlen(t) >= sizeof bp->checksum;
                if (!bad_ck) {
                    strcpy(bp->checksum_name, ck);
                    strcpy(bp->checksum, t);
                }
            }
            if (is_elem(f, "PartNumber")) {
                char *end;
                unsigned long v = strtoul(t, &end, 10);
                have_no = *t && !*end && v >= 1 && v <= BACKEND_MAX_PARTS;
                bp->part_no = (unsigned)v;
            } else if (is_elem(f, "ETag")) {
                unquote(t);
                have_etag = strlen(t) < sizeof bp->etag;
                if (have_etag)
                    strcpy(bp->etag, t);
            }
            free(t);
        }
        if (!have_no || !have_etag || bad_ck)
            goto out;
        out->n++;
    }
    rc = out->n ? 0 : -1;
out:
    xmlFreeDoc(doc);
    if (rc) {
        free(out->parts);
        out->parts = NULL;
        out->n = 0;
    }
    return rc;
}

void gw_xml_delete_free(struct gw_xml_delete *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->keys[i]);
    free(d->keys);
    d->keys = NULL;
    d->n = 0;
}

int gw_xml_parse_delete(const char *xml, size_t len, size_t max_keys, struct gw_xml_delete *out)
{
    memset(out, 0, sizeof *out);
    xmlDocPtr doc;
    xmlNode *root = parse_root(xml, len, "Delete", &doc);
    int rc = -1;
    if (!root)
        goto out;
    size_t cap = 0;
    for (xmlNode *c = root->children; c; c = c->next) {
        if (c->type != XML_ELEMENT_NODE)
            continue;
        if (is_elem(c, "Quiet")) {
            char *t = elem_text(c);
            if (!t)
                goto out;
            out->quiet = strcmp(t, "true") == 0;
            free(t);
        } else if (is_elem(c, "Object")) {
            char *key = NULL;
            if (last_child_text(c, "Key", &key) != 0 || !key)
                goto out;
            if (out->n == max_keys) {
                free(key);
                goto out;
            }
            if (out->n == cap) {
                cap = cap ? cap * 2 : 64;
                char **nk = realloc(out->keys, cap * sizeof *nk);
                if (!nk) {
                    free(key);
                    goto out;
                }
                out->keys = nk;
            }
            out->keys[out->n++] = key;
        }
    }
    rc = out->n ? 0 : -1;
out:
    xmlFreeDoc(doc);
    if (rc)
        gw_xml_delete_free(out);
    return rc;
}

int gw_xml_parse_create_bucket(const char *xml, size_t len, char **region)
{
    *region = NULL;
    xmlDocPtr doc;
    xmlNode *root = parse_root(xml, len, "CreateBucketConfiguration", &doc);
    int rc = -1;
    if (!root)
        goto out;
    if (last_child_text(root, "LocationConstraint", region) != 0)
        goto out;
    rc = 0;
out:
    xmlFreeDoc(doc);
    if (rc) {
        free(*region);
        *region = NULL;
    }
    return rc;
}

/* One <Grant>: true when it gives FULL_CONTROL to the canonical user `owner`;
 * *bad when it lacks its Grantee or Permission. */
static bool grant_is_owner_full(const xmlNode *g, const char *owner, bool *bad)
{
    bool owner_grantee = false, full = false, have_grantee = false, have_perm = false;
    for (const xmlNode *f = g->children; f; f = f->next) {
        if (is_elem(f, "Grantee")) {
            have_grantee = true;
            for (const xmlNode *id = f->children; id; id = id->next) {
                if (!is_elem(id, "ID"))
                    continue;
                char *t = elem_text(id);
                owner_grantee = t && strcmp(t, owner) == 0;
                free(t);
            }
        } else if (is_elem(f, "Permission")) {
            have_perm = true;
            char *t = elem_text(f);
            full = t && strcmp(t, "FULL_CONTROL") == 0;
            free(t);
        }
    }
    *bad = !have_grantee || !have_perm;
    return owner_grantee && full;
}

int gw_xml_parse_acl(const char *xml, size_t len, const char *owner, bool *owner_only)
{
    *owner_only = false;
    xmlDocPtr doc;
    xmlNode *root = parse_root(xml, len, "AccessControlPolicy", &doc);
    int rc = -1;
    if (!root)
        goto out;
    size_t grants = 0, owners = 0;
    bool have_list = false;
    for (xmlNode *c = root->children; c; c = c->next) {
        if (!is_elem(c, "AccessControlList"))
            continue;
        have_list = true;
        for (xmlNode *g = c->children; g; g = g->next) {
            if (!is_elem(g, "Grant"))
                continue;
            bool bad;
            grants++;
            owners += grant_is_owner_full(g, owner, &bad);
            if (bad)
                goto out;
        }
    }
    if (!have_list)
        goto out;
    *owner_only = grants > 0 && owners == grants;
    rc = 0;
out:
    xmlFreeDoc(doc);
    return rc;
}
