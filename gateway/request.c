/* gateway/request.c - turns the raw request line into the request record:
 * bucket and key (path-style or virtual-hosted), decoded query parameters,
 * and the S3 operation. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "encoding.h"
#include "gw_int.h"
#include "s3name.h"

const char *gw_req_header(const struct gw_req *r, const char *name)
{
    for (size_t i = 0; i < r->n_hdrs; i++)
        if (strcmp(r->hdrs[i].name, name) == 0)
            return r->hdrs[i].value;
    return NULL;
}

const char *gw_req_query(const struct gw_req *r, const char *name)
{
    for (size_t i = 0; i < r->n_query; i++)
        if (strcmp(r->query[i].name, name) == 0)
            return r->query[i].value;
    return NULL;
}

bool gw_req_has_query(const struct gw_req *r, const char *name)
{
    return gw_req_query(r, name) != NULL;
}

bool gw_req_query_uint(const struct gw_req *r, const char *name, unsigned def, unsigned cap,
                       unsigned *out)
{
    const char *v = gw_req_query(r, name);
    *out = def;
    if (!v)
        return true;
    char *end;
    long long n = strtoll(v, &end, 10);
    if (!*v || *end || n < 0)
        return false;
    *out = n > (long long)cap ? cap : (unsigned)n;
    return true;
}

/* What the request path knows about each operation, one row each: its name
 * (access log, metrics), the body it takes (GW_BODY_XML is buffered and
 * parsed, GW_BODY_STREAM goes to a backend_put) and the permission it needs
 * (NEED_NONE: no signature asked, as S3 asks none of a CORS preflight). The
 * bucket's own settings and /metrics need ADMIN (metrics are open when
 * metrics_public); a copy's READ on its source is checked by its handler; a
 * prefetch hint is a read (its JSON body is buffered as XML is). A new
 * operation is one new row; the assert below and test_gw_admin's
 * every_op_is_described keep the table whole. */
enum op_need { NEED_NONE, NEED_READ, NEED_WRITE, NEED_ADMIN };
static const struct op_info {
    const char *name;
    enum gw_body body;
    enum op_need need;
} ops[] = {
    [GW_OP_UNKNOWN]               = { "Unknown", GW_BODY_NONE, NEED_READ },
    [GW_OP_HEALTH]                = { "Health", GW_BODY_NONE, NEED_NONE },
    [GW_OP_READY]                 = { "Ready", GW_BODY_NONE, NEED_NONE },
    [GW_OP_LIST_BUCKETS]          = { "ListBuckets", GW_BODY_NONE, NEED_READ },
    [GW_OP_CREATE_BUCKET]         = { "CreateBucket", GW_BODY_XML, NEED_ADMIN },
    [GW_OP_HEAD_BUCKET]           = { "HeadBucket", GW_BODY_NONE, NEED_READ },
    [GW_OP_DELETE_BUCKET]         = { "DeleteBucket", GW_BODY_NONE, NEED_ADMIN },
    [GW_OP_GET_BUCKET_LOCATION]   = { "GetBucketLocation", GW_BODY_NONE, NEED_READ },
    [GW_OP_GET_BUCKET_VERSIONING] = { "GetBucketVersioning", GW_BODY_NONE, NEED_READ },
    [GW_OP_LIST_OBJECTS]          = { "ListObjects", GW_BODY_NONE, NEED_READ },
    [GW_OP_LIST_OBJECTS_V2]       = { "ListObjectsV2", GW_BODY_NONE, NEED_READ },
    [GW_OP_LIST_UPLOADS]          = { "ListMultipartUploads", GW_BODY_NONE, NEED_READ },
    [GW_OP_DELETE_OBJECTS]        = { "DeleteObjects", GW_BODY_XML, NEED_WRITE },
    [GW_OP_GET_OBJECT]            = { "GetObject", GW_BODY_NONE, NEED_READ },
    [GW_OP_HEAD_OBJECT]           = { "HeadObject", GW_BODY_NONE, NEED_READ },
    [GW_OP_PUT_OBJECT]            = { "PutObject", GW_BODY_STREAM, NEED_WRITE },
    [GW_OP_COPY_OBJECT]           = { "CopyObject", GW_BODY_NONE, NEED_WRITE },
    [GW_OP_DELETE_OBJECT]         = { "DeleteObject", GW_BODY_NONE, NEED_WRITE },
    [GW_OP_CREATE_UPLOAD]         = { "CreateMultipartUpload", GW_BODY_NONE, NEED_WRITE },
    [GW_OP_UPLOAD_PART]           = { "UploadPart", GW_BODY_STREAM, NEED_WRITE },
    [GW_OP_UPLOAD_PART_COPY]      = { "UploadPartCopy", GW_BODY_NONE, NEED_WRITE },
    [GW_OP_COMPLETE_UPLOAD]       = { "CompleteMultipartUpload", GW_BODY_XML, NEED_WRITE },
    [GW_OP_ABORT_UPLOAD]          = { "AbortMultipartUpload", GW_BODY_NONE, NEED_WRITE },
    [GW_OP_LIST_PARTS]            = { "ListParts", GW_BODY_NONE, NEED_READ },
    [GW_OP_GET_OBJECT_TAGGING]    = { "GetObjectTagging", GW_BODY_NONE, NEED_READ },
    [GW_OP_PUT_OBJECT_TAGGING]    = { "PutObjectTagging", GW_BODY_XML, NEED_WRITE },
    [GW_OP_DELETE_OBJECT_TAGGING] = { "DeleteObjectTagging", GW_BODY_NONE, NEED_WRITE },
    [GW_OP_GET_BUCKET_TAGGING]    = { "GetBucketTagging", GW_BODY_NONE, NEED_READ },
    [GW_OP_PUT_BUCKET_TAGGING]    = { "PutBucketTagging", GW_BODY_XML, NEED_ADMIN },
    [GW_OP_DELETE_BUCKET_TAGGING] = { "DeleteBucketTagging", GW_BODY_NONE, NEED_ADMIN },
    [GW_OP_GET_BUCKET_ACL]        = { "GetBucketAcl", GW_BODY_NONE, NEED_READ },
    [GW_OP_PUT_BUCKET_ACL]        = { "PutBucketAcl", GW_BODY_XML, NEED_ADMIN },
    [GW_OP_GET_OBJECT_ACL]        = { "GetObjectAcl", GW_BODY_NONE, NEED_READ },
    [GW_OP_PUT_OBJECT_ACL]        = { "PutObjectAcl", GW_BODY_XML, NEED_WRITE },
    [GW_OP_LIST_OBJECT_VERSIONS]  = { "ListObjectVersions", GW_BODY_NONE, NEED_READ },
    [GW_OP_NOT_IMPLEMENTED]       = { "NotImplemented", GW_BODY_NONE, NEED_READ },
    [GW_OP_METRICS]               = { "Metrics", GW_BODY_NONE, NEED_ADMIN },
    [GW_OP_PREFETCH_SUBMIT]       = { "PrefetchSubmit", GW_BODY_XML, NEED_READ },
    [GW_OP_PREFETCH_GET]          = { "PrefetchGet", GW_BODY_NONE, NEED_READ },
    [GW_OP_PREFETCH_CANCEL]       = { "PrefetchCancel", GW_BODY_NONE, NEED_READ },
    [GW_OP_WB_FLUSH]              = { "WriteBackFlush", GW_BODY_NONE, NEED_WRITE },
    [GW_OP_WB_STATUS]             = { "WriteBackStatus", GW_BODY_NONE, NEED_READ },
    [GW_OP_CORS_PREFLIGHT]        = { "CorsPreflight", GW_BODY_NONE, NEED_NONE },
};
_Static_assert(sizeof ops / sizeof ops[0] == GW_OP_COUNT, "one row per op");

static const struct op_info *op_info(enum gw_op op)
{
    return &ops[(unsigned)op < GW_OP_COUNT ? op : GW_OP_UNKNOWN];
}

const char *gw_op_name(enum gw_op op)
{
    return op_info(op)->name;
}

bool gw_op_permission(enum gw_op op, enum auth_perm *need)
{
    switch (op_info(op)->need) {
    case NEED_NONE: return false;
    case NEED_READ: *need = AUTH_PERM_READ; return true;
    case NEED_WRITE: *need = AUTH_PERM_WRITE; return true;
    case NEED_ADMIN: *need = AUTH_PERM_ADMIN; return true;
    }
    *need = AUTH_PERM_ADMIN;
    return true;
}

/* Sub-resources S3 has and shardgate does not serve: asking for one gets
 * 501 NotImplemented rather than being mistaken for a plain GET or PUT.
 * ("versions" is served for GET only; versionId=null is the one version of
 * an unversioned object, any other is refused in gw_req_check.) */
static const char *const unsupported_subresources[] = {
    "policy", "policyStatus", "cors", "lifecycle", "website", "logging",
    "notification", "replication", "encryption", "object-lock", "retention", "legal-hold",
    "torrent", "restore", "select", "accelerate", "requestPayment", "ownershipControls",
    "publicAccessBlock", "inventory", "metrics", "analytics", "intelligent-tiering",
    "attributes", "versions", "renameObject",
};

static bool has_unsupported(const struct gw_req *r)
{
    for (size_t i = 0; i < sizeof unsupported_subresources / sizeof unsupported_subresources[0];
         i++)
        if (gw_req_has_query(r, unsupported_subresources[i]))
            return true;
    return false;
}

const char *gw_req_unsupported(const struct gw_req *r)
{
    if (r->op != GW_OP_NOT_IMPLEMENTED)
        return NULL;
    for (size_t i = 0; i < sizeof unsupported_subresources / sizeof unsupported_subresources[0];
         i++)
        if (gw_req_has_query(r, unsupported_subresources[i]))
            return unsupported_subresources[i];
    return gw_req_has_query(r, "versioning") ? "versioning" : NULL;   /* PUT ?versioning */
}

const char *gw_req_subresource(const struct gw_req *r)
{
    if (r->op >= GW_OP_GET_OBJECT_TAGGING && r->op <= GW_OP_DELETE_BUCKET_TAGGING)
        return "tagging";   /* the six are declared together in gw_int.h */
    if (r->op >= GW_OP_GET_BUCKET_ACL && r->op <= GW_OP_PUT_OBJECT_ACL)
        return "acl";       /* and these four */
    if (r->op == GW_OP_LIST_OBJECT_VERSIONS)
        return "versions";
    return gw_req_unsupported(r);
}

/* ?acl of an object (key) or a bucket: GET and PUT. */
static enum gw_op acl_op(bool get, bool put, bool key)
{
    if (get)
        return key ? GW_OP_GET_OBJECT_ACL : GW_OP_GET_BUCKET_ACL;
    if (put)
        return key ? GW_OP_PUT_OBJECT_ACL : GW_OP_PUT_BUCKET_ACL;
    return GW_OP_UNKNOWN;
}

/* ?tagging of an object (key) or a bucket: by method. */
static enum gw_op tagging_op(bool get, bool put, bool del, bool key)
{
    if (get)
        return key ? GW_OP_GET_OBJECT_TAGGING : GW_OP_GET_BUCKET_TAGGING;
    if (put)
        return key ? GW_OP_PUT_OBJECT_TAGGING : GW_OP_PUT_BUCKET_TAGGING;
    if (del)
        return key ? GW_OP_DELETE_OBJECT_TAGGING : GW_OP_DELETE_BUCKET_TAGGING;
    return GW_OP_UNKNOWN;
}

/* The sub-resources a bucket and an object both have, in the order they
 * are weighed: ?acl, those shardgate does not implement, ?tagging. true
 * with *op set when the request names one, false otherwise. */
static bool shared_subresource_op(const struct gw_req *r, bool get, bool put, bool del,
                                  bool key, enum gw_op *op)
{
    if (gw_req_has_query(r, "acl"))
        *op = acl_op(get, put, key);
    else if (has_unsupported(r))
        *op = GW_OP_NOT_IMPLEMENTED;
    else if (gw_req_has_query(r, "tagging"))
        *op = tagging_op(get, put, del, key);
    else
        return false;
    return true;
}

static enum gw_op route(const struct gw_req *r)
{
    const char *m = r->method;
    bool get = strcmp(m, "GET") == 0, head = strcmp(m, "HEAD") == 0;
    bool put = strcmp(m, "PUT") == 0, del = strcmp(m, "DELETE") == 0;
    bool post = strcmp(m, "POST") == 0;
    enum gw_op op;

    if (!r->bucket)
        return get ? GW_OP_LIST_BUCKETS : GW_OP_UNKNOWN;
    if (strcmp(m, "OPTIONS") == 0)
        return GW_OP_CORS_PREFLIGHT;
    if (!r->key) {
        if (gw_req_has_query(r, "prefetch")) {
            if (post)
                return GW_OP_PREFETCH_SUBMIT;
            if (get)
                return GW_OP_PREFETCH_GET;
            if (del)
                return GW_OP_PREFETCH_CANCEL;
            return GW_OP_UNKNOWN;
        }
        if (post && gw_req_has_query(r, "flush"))
            return GW_OP_WB_FLUSH;
        if (get && gw_req_has_query(r, "writeback"))
            return GW_OP_WB_STATUS;
        if (get && gw_req_has_query(r, "location"))
            return GW_OP_GET_BUCKET_LOCATION;
        if (get && gw_req_has_query(r, "versioning"))
            return GW_OP_GET_BUCKET_VERSIONING;
        if (get && gw_req_has_query(r, "versions"))
            return GW_OP_LIST_OBJECT_VERSIONS;
        if (shared_subresource_op(r, get, put, del, false, &op))
            return op;
        if (get && gw_req_has_query(r, "uploads"))
            return GW_OP_LIST_UPLOADS;
        if (get) {
            const char *lt = gw_req_query(r, "list-type");
            return lt && strcmp(lt, "2") == 0 ? GW_OP_LIST_OBJECTS_V2 : GW_OP_LIST_OBJECTS;
        }
        if (head)
            return GW_OP_HEAD_BUCKET;
        if (put)
            return gw_req_has_query(r, "versioning") ? GW_OP_NOT_IMPLEMENTED
                                                     : GW_OP_CREATE_BUCKET;
        if (del)
            return GW_OP_DELETE_BUCKET;
        if (post && gw_req_has_query(r, "delete"))
            return GW_OP_DELETE_OBJECTS;
        return GW_OP_UNKNOWN;
    }
    if (shared_subresource_op(r, get, put, del, true, &op))
        return op;
    bool upload = gw_req_has_query(r, "uploadId");
    if (get)
        return upload ? GW_OP_LIST_PARTS : GW_OP_GET_OBJECT;
    if (head)
        return GW_OP_HEAD_OBJECT;
    if (put) {
        bool copy = gw_req_header(r, "x-amz-copy-source") != NULL;
        if (upload || gw_req_has_query(r, "partNumber"))
            return copy ? GW_OP_UPLOAD_PART_COPY : GW_OP_UPLOAD_PART;
        return copy ? GW_OP_COPY_OBJECT : GW_OP_PUT_OBJECT;
    }
    if (del)
        return upload ? GW_OP_ABORT_UPLOAD : GW_OP_DELETE_OBJECT;
    if (post) {
        if (gw_req_has_query(r, "uploads"))
            return GW_OP_CREATE_UPLOAD;
        if (upload)
            return GW_OP_COMPLETE_UPLOAD;
    }
    return GW_OP_UNKNOWN;
}

static int parse_query(struct gw_req *r, const char *q)
{
    size_t n = 1;
    for (const char *p = q; *p; p++)
        n += *p == '&';
    r->query = gw_arena_alloc(&r->arena, n * sizeof *r->query);
    if (!r->query)
        return -1;
    r->n_query = 0;
    while (*q) {
        const char *amp = strchr(q, '&');
        size_t len = amp ? (size_t)(amp - q) : strlen(q);
        if (len) {
            const char *eq = memchr(q, '=', len);
            size_t nlen = eq ? (size_t)(eq - q) : len;
            struct gw_query *qp = &r->query[r->n_query];
            qp->name = gw_pct_decode(&r->arena, q, nlen, true);
            qp->value = eq ? gw_pct_decode(&r->arena, eq + 1, len - nlen - 1, true) : "";
            if (!qp->name || !qp->value)
                return -1;
            r->n_query++;
        }
        q += len + (amp ? 1 : 0);
    }
    return 0;
}

int gw_req_check(const struct gw_req *r, enum s3_err *err, const char **msg)
{
    *msg = NULL;
    /* one rule for both modes: a cold S3 would check its own names, but
     * after a rename (cold_bucket) or with laxer rules than AWS's */
    if (r->bucket && !sg_bucket_name_valid(r->bucket)) {
        *err = S3E_INVALID_BUCKET_NAME;
        return -1;
    }
    /* Buckets are never versioned: an object's one version is "null". */
    const char *vid = r->key ? gw_req_query(r, "versionId") : NULL;
    if (vid && strcmp(vid, "null") != 0) {
        *err = S3E_INVALID_ARGUMENT;
        *msg = "Invalid version id specified";
        return -1;
    }
    return gw_acl_headers_check(r, err, msg);
}

/* The bucket named by a virtual-hosted Host header, or NULL. */
static const char *vhost_bucket(struct gw_req *r)
{
    const char *host = gw_req_header(r, "host");
    size_t n = auth_vhost_bucket(host, r->conf->vhost_domain);
    return n ? gw_arena_strndup(&r->arena, host, n) : NULL;
}

int gw_req_parse(struct gw_req *r, const char *raw_uri, enum s3_err *err, const char **msg)
{
    *msg = NULL;
    const char *qm = strchr(raw_uri, '?');
    size_t plen = qm ? (size_t)(qm - raw_uri) : strlen(raw_uri);
    r->raw_path = gw_arena_strndup(&r->arena, raw_uri, plen);
    r->raw_query = gw_arena_strdup(&r->arena, qm ? qm + 1 : "");
    if (!r->raw_path || !r->raw_query) {
        *err = S3E_SLOW_DOWN;
        return -1;
    }
    if (r->raw_path[0] != '/') {
        *err = S3E_INVALID_REQUEST;
        *msg = "The request target must be an absolute path.";
        return -1;
    }
    if (parse_query(r, r->raw_query) != 0) {
        *err = S3E_INVALID_ARGUMENT;
        *msg = "The query string has a malformed percent-encoding.";
        return -1;
    }
    const char *path = gw_pct_decode(&r->arena, r->raw_path, plen, false);
    if (!path) {
        *err = S3E_INVALID_ARGUMENT;
        *msg = "The path has a malformed percent-encoding or a NUL byte.";
        return -1;
    }
    /* S3 keys and listing parameters are UTF-8; anything else would be
     * stored, then listed as XML no parser takes. Refused before the
     * resource is set, so the error does not echo the bytes either. */
    bool utf8 = sg_utf8_valid(path, strlen(path));
    for (size_t i = 0; utf8 && i < r->n_query; i++)
        utf8 = sg_utf8_valid(r->query[i].value, strlen(r->query[i].value));
    if (!utf8) {
        *err = S3E_INVALID_URI;
        return -1;
    }

    /* Liveness and readiness: any method routes here (and all but GET and
     * HEAD are refused there); "_shardgate" is no valid bucket name. */
    if (strcmp(path, "/_shardgate/health") == 0 || strcmp(path, "/_shardgate/ready") == 0) {
        r->op = strcmp(path, "/_shardgate/health") == 0 ? GW_OP_HEALTH : GW_OP_READY;
        r->resource = path;
        return 0;
    }
    /* "/metrics" is the Prometheus endpoint (GET, and HEAD answered alike
     * without the body); a bucket named "metrics" is still reachable with
     * any query (e.g. ?list-type=2) or virtual-hosted. */
    bool get_or_head = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
    if (get_or_head &&
        (strcmp(path, "/_shardgate/metrics") == 0 ||
         (strcmp(path, "/metrics") == 0 && !*r->raw_query && !vhost_bucket(r)))) {
        r->op = GW_OP_METRICS;
        r->resource = path;
        return 0;
    }

    const char *vb = vhost_bucket(r);
    const char *key;
    if (vb) {
        r->bucket = vb;
        key = path + 1;
    } else {
        const char *b = path + 1;
        const char *slash = strchr(b, '/');
        if (slash) {
            r->bucket = gw_arena_strndup(&r->arena, b, (size_t)(slash - b));
            key = slash + 1;
        } else {
            r->bucket = *b ? b : NULL;
            key = "";
        }
        if (r->bucket && !*r->bucket)
            r->bucket = NULL;   /* "//key": no bucket */
    }
    r->key = r->bucket && *key ? key : NULL;
    r->resource = path;
    if (r->key && strlen(r->key) > 1024) {
        *err = S3E_KEY_TOO_LONG;
        return -1;
    }
    r->op = route(r);
    r->body_kind = op_info(r->op)->body;
    return 0;
}
