/* backend/s3_xml.c - parsing of the S3 XML the cold tier answers with
 * (errors, bucket and object listings, multipart results) with libxml2.
 * Pure functions on a memory buffer: tested by tests/unit/test_backend_s3.c. */
#include "s3_int.h"
#include "encoding.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static xmlDocPtr xml_parse(const char *xml, size_t len)
{
    if (!xml || len == 0 || len > INT_MAX)
        return NULL;
    /* NONET: never fetch anything; no entity substitution (the default). */
    return xmlReadMemory(xml, (int)len, "s3.xml", NULL,
                         XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
}

/* Element children are matched by local name: AWS puts them in its
 * namespace, some servers in none. */
static bool is_el(const xmlNode *n, const char *name)
{
    return n && n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

static xmlNode *child(const xmlNode *n, const char *name)
{
    for (xmlNode *c = n ? n->children : NULL; c; c = c->next)
        if (is_el(c, name))
            return c;
    return NULL;
}

/* The text of element `n` (new, "" when empty) or NULL when out of memory. */
static char *text_of(const xmlNode *n)
{
    xmlChar *t = xmlNodeGetContent(n);
    char *r = strdup(t ? (const char *)t : "");
    xmlFree(t);
    return r;
}

/* Copies the text of child `name` into out[cap]; false when missing. */
static bool child_text(const xmlNode *n, const char *name, char *out, size_t cap)
{
    xmlNode *c = child(n, name);
    if (!c)
        return false;
    xmlChar *t = xmlNodeGetContent(c);
    const char *s = t ? (const char *)t : "";
    size_t l = strlen(s);
    bool fits = l < cap;
    if (fits)
        memcpy(out, s, l + 1);
    xmlFree(t);
    return fits;
}

/* In place: %XX -> byte, '+' -> ' '. AWS writes a space as '+' under
 * encoding-type=url; servers that write %20 also encode a literal '+' as
 * %2B, so '+' is a space for all of them. */
static void url_decode(char *s)
{
    s[sg_pct_decode(s, strlen(s), s, true)] = '\0';
}

static uint64_t child_u64(const xmlNode *n, const char *name)
{
    char b[32];
    if (!child_text(n, name, b, sizeof b))
        return 0;
    return strtoull(b, NULL, 10);
}

static bool child_true(const xmlNode *n, const char *name)
{
    char b[16];
    return child_text(n, name, b, sizeof b) && strcmp(b, "true") == 0;
}

static void child_time(const xmlNode *n, const char *name, struct timespec *ts)
{
    char b[64];
    ts->tv_sec = 0;
    ts->tv_nsec = 0;
    if (child_text(n, name, b, sizeof b))
        (void)s3_parse_iso8601(b, ts);
}

static void child_etag(const xmlNode *n, const char *name, char out[72])
{
    char b[160];
    out[0] = '\0';
    if (child_text(n, name, b, sizeof b))
        s3_etag_bare(b, out);
}

/* The root element when it is `name`. "FooResult" also matches
 * "FooResponse": moto answers ListParts with <ListPartsResponse>. */
static xmlNode *root_named(xmlDocPtr d, const char *name)
{
    xmlNode *r = d ? xmlDocGetRootElement(d) : NULL;
    if (is_el(r, name))
        return r;
    size_t l = strlen(name);
    if (r && r->type == XML_ELEMENT_NODE && l > 6 && strcmp(name + l - 6, "Result") == 0) {
        const char *rn = (const char *)r->name;
        if (strncmp(rn, name, l - 6) == 0 && strcmp(rn + l - 6, "Response") == 0)
            return r;
    }
    return NULL;
}

/* Reads the root element r of an answer into `out` (a page, or a walk);
 * the document is freed when it returns, so nothing may point into it. */
typedef enum backend_status (*root_cb)(const xmlNode *r, void *out);

/* Parses an answer whose root must be `name` (as root_named) and hands the
 * root to fn: BACKEND_IO when the answer does not parse or has another
 * root, else what fn returns. The one place the listings' document is
 * freed, whichever way fn ends. */
static enum backend_status with_root(const char *xml, size_t len, const char *name, root_cb fn,
                                     void *out)
{
    xmlDocPtr d = xml_parse(xml, len);
    xmlNode *r = root_named(d, name);
    enum backend_status st = r ? fn(r, out) : BACKEND_IO;
    xmlFreeDoc(d);
    return st;
}

/* How many element children of r are named `name`: the size of a page. */
static size_t count_children(const xmlNode *r, const char *name)
{
    size_t n = 0;
    for (const xmlNode *c = r->children; c; c = c->next)
        n += is_el(c, name);
    return n;
}

/* The text of <Error>'s child `name` into out[cap]; 0, or -1. */
static int error_child(const char *xml, size_t len, const char *name, char *out, size_t cap)
{
    xmlDocPtr d = xml_parse(xml, len);
    xmlNode *r = root_named(d, "Error");
    int rc = r && child_text(r, name, out, cap) ? 0 : -1;
    xmlFreeDoc(d);
    return rc;
}

int s3_xml_error_code(const char *xml, size_t len, char *code, size_t cap)
{
    return error_child(xml, len, "Code", code, cap);
}

void s3_xml_error_message(const char *xml, size_t len, char *msg, size_t cap)
{
    char m[2048];                  /* a longer message is cut, not dropped */
    if (error_child(xml, len, "Message", m, sizeof m) != 0)
        m[0] = '\0';
    snprintf(msg, cap, "%s", m);
}

struct bucket_walk {
    s3_bucket_fn fn;
    void *arg;
};

static enum backend_status buckets_walk(const xmlNode *r, void *out)
{
    const struct bucket_walk *w = out;
    for (xmlNode *c = child(r, "Buckets") ? child(r, "Buckets")->children : NULL; c;
         c = c->next) {
        if (!is_el(c, "Bucket"))
            continue;
        char name[256];
        struct timespec ts;
        if (!child_text(c, "Name", name, sizeof name))
            continue;
        child_time(c, "CreationDate", &ts);
        if (w->fn(w->arg, name, ts.tv_sec) != 0)
            break;
    }
    return BACKEND_OK;
}

enum backend_status s3_xml_buckets(const char *xml, size_t len, s3_bucket_fn fn, void *arg)
{
    struct bucket_walk w = { fn, arg };
    return with_root(xml, len, "ListAllMyBucketsResult", buckets_walk, &w);
}

/* Appends the <Prefix> of each CommonPrefixes child of r. */
static int add_prefixes(const xmlNode *r, char ***v, size_t *n)
{
    for (xmlNode *c = r->children; c; c = c->next) {
        if (!is_el(c, "CommonPrefixes"))
            continue;
        xmlNode *p = child(c, "Prefix");
        if (!p)
            continue;
        char **nv = realloc(*v, (*n + 1) * sizeof **v);
        if (!nv)
            return -1;
        *v = nv;
        if (!(nv[*n] = text_of(p)))
            return -1;
        (*n)++;
    }
    return 0;
}

static enum backend_status objects_page(const xmlNode *r, void *page)
{
    struct backend_list_page *out = page;
    enum backend_status st = BACKEND_NOMEM;
    char et[8];
    bool enc = child_text(r, "EncodingType", et, sizeof et) && strcmp(et, "url") == 0;
    size_t n = count_children(r, "Contents");
    if (n) {
        out->objs = calloc(n, sizeof *out->objs);
        if (!out->objs)
            goto out;
    }
    for (xmlNode *c = r->children; c; c = c->next) {
        if (!is_el(c, "Contents"))
            continue;
        struct backend_list_entry *e = &out->objs[out->n_objs];
        xmlNode *k = child(c, "Key");
        if (!k)
            continue;
        if (!(e->key = text_of(k)))
            goto out;
        if (enc)
            url_decode(e->key);
        e->size = child_u64(c, "Size");
        child_time(c, "LastModified", &e->mtime);
        child_etag(c, "ETag", e->etag);
        out->n_objs++;
    }
    if (add_prefixes(r, &out->prefixes, &out->n_prefixes) != 0)
        goto out;
    for (size_t i = 0; enc && i < out->n_prefixes; i++)
        url_decode(out->prefixes[i]);
    out->truncated = child_true(r, "IsTruncated");
    /* The last key or prefix of the page, whichever sorts later: S3 merges
     * both in key order. */
    const char *last = NULL;
    if (out->n_objs)
        last = out->objs[out->n_objs - 1].key;
    if (out->n_prefixes) {
        const char *p = out->prefixes[out->n_prefixes - 1];
        if (!last || strcmp(p, last) > 0)
            last = p;
    }
    if (last && !(out->next_marker = strdup(last)))
        goto out;
    st = BACKEND_OK;
out:
    if (st != BACKEND_OK)
        backend_list_page_free(out);
    return st;
}

enum backend_status s3_xml_list_objects(const char *xml, size_t len,
                                        struct backend_list_page *out)
{
    memset(out, 0, sizeof *out);
    return with_root(xml, len, "ListBucketResult", objects_page, out);
}

static enum backend_status parts_page(const xmlNode *r, void *page)
{
    struct backend_parts_page *out = page;
    size_t n = count_children(r, "Part");
    if (n && !(out->parts = calloc(n, sizeof *out->parts)))
        return BACKEND_NOMEM;
    for (xmlNode *c = r->children; c; c = c->next) {
        if (!is_el(c, "Part"))
            continue;
        struct backend_part *p = &out->parts[out->n_parts++];
        p->part_no = (unsigned)child_u64(c, "PartNumber");
        p->size = child_u64(c, "Size");
        child_etag(c, "ETag", p->etag);
        child_time(c, "LastModified", &p->mtime);
        /* a part's checksum, named as the header that carries it */
        static const char *const ck[][2] = {
            { "ChecksumCRC32", "x-amz-checksum-crc32" },
            { "ChecksumCRC32C", "x-amz-checksum-crc32c" },
            { "ChecksumCRC64NVME", "x-amz-checksum-crc64nvme" },
            { "ChecksumSHA1", "x-amz-checksum-sha1" },
            { "ChecksumSHA256", "x-amz-checksum-sha256" },
        };
        for (size_t k = 0; k < sizeof ck / sizeof ck[0] && !p->checksum[0]; k++)
            if (child_text(c, ck[k][0], p->checksum, sizeof p->checksum) && p->checksum[0])
                snprintf(p->checksum_name, sizeof p->checksum_name, "%s", ck[k][1]);
    }
    out->truncated = child_true(r, "IsTruncated");
    out->next_marker = (unsigned)child_u64(r, "NextPartNumberMarker");
    if (out->n_parts && out->next_marker == 0)
        out->next_marker = out->parts[out->n_parts - 1].part_no;
    return BACKEND_OK;
}

enum backend_status s3_xml_list_parts(const char *xml, size_t len,
                                      struct backend_parts_page *out)
{
    memset(out, 0, sizeof *out);
    return with_root(xml, len, "ListPartsResult", parts_page, out);
}

static enum backend_status uploads_page(const xmlNode *r, void *page)
{
    struct backend_uploads_page *out = page;
    enum backend_status st = BACKEND_NOMEM;
    size_t n = count_children(r, "Upload");
    if (n && !(out->uploads = calloc(n, sizeof *out->uploads)))
        goto out;
    for (xmlNode *c = r->children; c; c = c->next) {
        if (!is_el(c, "Upload"))
            continue;
        struct backend_upload *u = &out->uploads[out->n_uploads];
        xmlNode *k = child(c, "Key");
        if (!k || !child_text(c, "UploadId", u->upload_id, sizeof u->upload_id))
            continue;
        if (!(u->key = text_of(k)))
            goto out;
        child_time(c, "Initiated", &u->initiated);
        out->n_uploads++;
    }
    if (add_prefixes(r, &out->prefixes, &out->n_prefixes) != 0)
        goto out;
    out->truncated = child_true(r, "IsTruncated");
    xmlNode *nk = child(r, "NextKeyMarker");
    if (nk && out->truncated && !(out->next_key_marker = text_of(nk)))
        goto out;
    if (out->truncated)
        (void)child_text(r, "NextUploadIdMarker", out->next_upload_id_marker,
                         sizeof out->next_upload_id_marker);
    st = BACKEND_OK;
out:
    if (st != BACKEND_OK)
        backend_uploads_page_free(out);
    return st;
}

enum backend_status s3_xml_list_uploads(const char *xml, size_t len,
                                        struct backend_uploads_page *out)
{
    memset(out, 0, sizeof *out);
    return with_root(xml, len, "ListMultipartUploadsResult", uploads_page, out);
}

enum backend_status s3_xml_upload_id(const char *xml, size_t len,
                                     char id[BACKEND_UPLOAD_ID_MAX])
{
    xmlDocPtr d = xml_parse(xml, len);
    xmlNode *r = root_named(d, "InitiateMultipartUploadResult");
    bool ok = r && child_text(r, "UploadId", id, BACKEND_UPLOAD_ID_MAX) && id[0];
    xmlFreeDoc(d);
    return ok ? BACKEND_OK : BACKEND_IO;
}

enum backend_status s3_xml_etag_result(const char *xml, size_t len, struct obj_meta *m)
{
    xmlDocPtr d = xml_parse(xml, len);
    xmlNode *r = d ? xmlDocGetRootElement(d) : NULL;
    if (!r || is_el(r, "Error") || !child(r, "ETag")) {
        xmlFreeDoc(d);
        return BACKEND_IO;
    }
    child_etag(r, "ETag", m->etag);
    if (child(r, "LastModified"))
        child_time(r, "LastModified", &m->mtime);
    xmlFreeDoc(d);
    return BACKEND_OK;
}
