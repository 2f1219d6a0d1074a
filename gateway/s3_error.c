/* gateway/s3_error.c - the one place that knows S3 error codes: the table of
 * code / HTTP status / message, and the mappings from every module's status
 * enum. The switches have no default, so -Wswitch flags a new status. */
#include <stdio.h>

#include "gw_int.h"

static const struct s3_error table[] = {
    [S3E_ACCESS_DENIED] = { "AccessDenied", 403, "Access Denied" },
    [S3E_ACL_NOT_SUPPORTED] = { "AccessControlListNotSupported", 400,
        "The bucket does not allow ACLs" },
    [S3E_AUTH_HEADER_MALFORMED] = { "AuthorizationHeaderMalformed", 400,
        "The authorization header is malformed." },
    [S3E_AUTH_QUERY_ERROR] = { "AuthorizationQueryParametersError", 400,
        "Query-string authentication parameters are malformed." },
    [S3E_BAD_DIGEST] = { "BadDigest", 400,
        "The Content-MD5 you specified did not match what we received." },
    [S3E_BAD_REQUEST] = { "BadRequest", 400, "Object tags cannot be greater than 10" },
    [S3E_BUCKET_EXISTS] = { "BucketAlreadyOwnedByYou", 409,
        "Your previous request to create the named bucket succeeded and you already own it." },
    [S3E_BUCKET_TAKEN] = { "BucketAlreadyExists", 409,
        "The requested bucket name is not available. The bucket namespace is shared by all "
        "users of the system. Please select a different name and try again." },
    [S3E_BUCKET_NOT_EMPTY] = { "BucketNotEmpty", 409,
        "The bucket you tried to delete is not empty" },
    [S3E_CORS_NO_ORIGIN] = { "BadRequest", 400,
        "Insufficient information. Origin request header needed." },
    [S3E_CORS_NOT_ENABLED] = { "AccessForbidden", 403,
        "CORSResponse: CORS is not enabled for this bucket." },
    [S3E_COLD_PASSED] = { "InternalError", 500,
        "The cold tier refused the request; the gateway's log has its answer." },
    [S3E_CONDITIONAL_CONFLICT] = { "ConditionalRequestConflict", 409,
        "A conflicting operation occurred. If using PutObject you can retry the request. If "
        "using multipart upload you should initiate another CreateMultipartUpload request and "
        "re-upload each part." },
    [S3E_ENTITY_TOO_LARGE] = { "EntityTooLarge", 400,
        "Your proposed upload exceeds the maximum allowed object size." },
    [S3E_ENTITY_TOO_SMALL] = { "EntityTooSmall", 400,
        "Your proposed upload is smaller than the minimum allowed object size." },
    [S3E_INCOMPLETE_BODY] = { "IncompleteBody", 400,
        "You did not provide the number of bytes specified by the Content-Length HTTP header." },
    [S3E_INTERNAL] = { "InternalError", 500,
        "We encountered an internal error. Please try again." },
    [S3E_INVALID_ACCESS_KEY] = { "InvalidAccessKeyId", 403,
        "The AWS Access Key Id you provided does not exist in our records." },
    [S3E_INVALID_ARGUMENT] = { "InvalidArgument", 400, "Invalid Argument" },
    [S3E_INVALID_BUCKET_ACL] = { "InvalidBucketAclWithObjectOwnership", 400,
        "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting" },
    [S3E_INVALID_BUCKET_NAME] = { "InvalidBucketName", 400,
        "The specified bucket is not valid." },
    [S3E_INVALID_DIGEST] = { "InvalidDigest", 400,
        "The Content-MD5 you specified is not valid." },
    [S3E_INVALID_PART] = { "InvalidPart", 400,
        "One or more of the specified parts could not be found. The part might not have been "
        "uploaded, or the specified entity tag might not have matched the part's entity tag." },
    [S3E_INVALID_PART_ORDER] = { "InvalidPartOrder", 400,
        "The list of parts was not in ascending order. Parts must be ordered by part number." },
    [S3E_INVALID_PART_NUMBER] = { "InvalidPartNumber", 416,
        "The requested partnumber is not satisfiable" },
    [S3E_INVALID_RANGE] = { "InvalidRange", 416, "The requested range is not satisfiable" },
    [S3E_INVALID_REQUEST] = { "InvalidRequest", 400, "Invalid Request" },
    [S3E_INVALID_URI] = { "InvalidURI", 400, "Couldn't parse the specified URI." },
    [S3E_INVALID_TAG] = { "InvalidTag", 400, "The TagKey you have provided is invalid" },
    [S3E_KEY_CONFLICT] = { "KeyConflict", 409,
        "The key conflicts with an existing object: on shardgate's directory store a key "
        "cannot be both an object and the prefix of another key at a '/'." },
    [S3E_KEY_TOO_LONG] = { "KeyTooLongError", 400, "Your key is too long" },
    [S3E_MALFORMED_ACL] = { "MalformedACLError", 400,
        "The XML you provided was not well-formed or did not validate against our "
        "published schema" },
    [S3E_MALFORMED_XML] = { "MalformedXML", 400,
        "The XML you provided was not well-formed or did not validate against our "
        "published schema" },
    [S3E_METADATA_TOO_LARGE] = { "MetadataTooLarge", 400,
        "Your metadata headers exceed the maximum allowed metadata size" },
    [S3E_METHOD_NOT_ALLOWED] = { "MethodNotAllowed", 405,
        "The specified method is not allowed against this resource." },
    [S3E_MISSING_SECURITY_HEADER] = { "MissingSecurityHeader", 400,
        "Your request was missing a required header" },
    [S3E_MISSING_CONTENT_LENGTH] = { "MissingContentLength", 411,
        "You must provide the Content-Length HTTP header." },
    [S3E_NO_SUCH_BUCKET] = { "NoSuchBucket", 404, "The specified bucket does not exist" },
    [S3E_NO_SUCH_KEY] = { "NoSuchKey", 404, "The specified key does not exist." },
    [S3E_NO_SUCH_JOB] = { "NoSuchJob", 404, "The specified prefetch job does not exist." },
    [S3E_NO_SUCH_UPLOAD] = { "NoSuchUpload", 404,
        "The specified upload does not exist. The upload ID may be invalid, or the upload "
        "may have been aborted or completed." },
    [S3E_NO_SUCH_TAG_SET] = { "NoSuchTagSet", 404, "The TagSet does not exist" },
    [S3E_NOT_IMPLEMENTED] = { "NotImplemented", 501,
        "A header or query you provided implies functionality that is not implemented." },
    [S3E_NOT_MODIFIED] = { "NotModified", 304, "Not Modified" },
    [S3E_PRECONDITION_FAILED] = { "PreconditionFailed", 412,
        "At least one of the pre-conditions you specified did not hold" },
    /* S3 has no code of its own for a read-only target; AccessDenied (403) is
     * what it answers for a write it will not allow, and clients do not
     * retry it. The message says why. */
    [S3E_READ_ONLY] = { "AccessDenied", 403,
        "Access Denied: this store is read-only (a read-only directory tree or no writable "
        "state directory); reads and listings work, writes are refused." },
    [S3E_REQUEST_HEADER_TOO_LARGE] = { "RequestHeaderSectionTooLarge", 400,
        "Your request header section exceeds the maximum allowed size." },
    [S3E_REQUEST_TIME_SKEWED] = { "RequestTimeTooSkewed", 403,
        "The difference between the request time and the current time is too large." },
    /* AWS words ServiceUnavailable like SlowDown ("Reduce your request
     * rate"); ours is an outage behind the gateway, not throttling, and
     * s3_error_cold_message names the cold tier where there is one. */
    [S3E_SERVICE_UNAVAILABLE] = { "ServiceUnavailable", 503,
        "The service is unavailable. Please try again later." },
    [S3E_SHA256_MISMATCH] = { "XAmzContentSHA256Mismatch", 400,
        "The provided 'x-amz-content-sha256' header does not match what was computed." },
    [S3E_SIGNATURE_MISMATCH] = { "SignatureDoesNotMatch", 403,
        "The request signature we calculated does not match the signature you provided. "
        "Check your key and signing method." },
    [S3E_SLOW_DOWN] = { "SlowDown", 503, "Please reduce your request rate." },
    [S3E_STORAGE_FULL] = { "InsufficientStorage", 507,
        "The storage behind this gateway is full." },
};
_Static_assert(sizeof table / sizeof table[0] == S3E_COUNT, "one entry per enum s3_err");

const struct s3_error *s3_error_get(enum s3_err e)
{
    return &table[e];
}

enum s3_err s3_error_from_backend(enum backend_status st)
{
    switch (st) {
    case BACKEND_OK: return S3E_INTERNAL;  /* not an error: a caller bug */
    case BACKEND_NO_BUCKET: return S3E_NO_SUCH_BUCKET;
    case BACKEND_NO_KEY: return S3E_NO_SUCH_KEY;
    case BACKEND_NO_UPLOAD: return S3E_NO_SUCH_UPLOAD;
    case BACKEND_BUCKET_EXISTS: return S3E_BUCKET_EXISTS;
    case BACKEND_BUCKET_TAKEN: return S3E_BUCKET_TAKEN;
    case BACKEND_BUCKET_NOT_EMPTY: return S3E_BUCKET_NOT_EMPTY;
    case BACKEND_BAD_BUCKET_NAME: return S3E_INVALID_BUCKET_NAME;
    case BACKEND_BAD_KEY: return S3E_INVALID_ARGUMENT;
    case BACKEND_KEY_TOO_LONG: return S3E_KEY_TOO_LONG;
    case BACKEND_KEY_CONFLICT: return S3E_KEY_CONFLICT;
    case BACKEND_BAD_RANGE: return S3E_INVALID_RANGE;
    case BACKEND_INVALID_PART: return S3E_INVALID_PART;
    case BACKEND_INVALID_PART_ORDER: return S3E_INVALID_PART_ORDER;
    case BACKEND_ENTITY_TOO_SMALL: return S3E_ENTITY_TOO_SMALL;
    case BACKEND_TOO_LARGE: return S3E_ENTITY_TOO_LARGE;
    case BACKEND_NO_SPACE: return S3E_STORAGE_FULL;
    case BACKEND_DENIED: return S3E_ACCESS_DENIED;
    case BACKEND_IO: return S3E_INTERNAL;
    case BACKEND_NOMEM: return S3E_SLOW_DOWN;
    case BACKEND_UNAVAILABLE: return S3E_SERVICE_UNAVAILABLE;
    case BACKEND_INVALID_REQUEST: return S3E_INVALID_REQUEST;
    case BACKEND_READ_ONLY: return S3E_READ_ONLY;
    case BACKEND_TIMEOUT: return S3E_SERVICE_UNAVAILABLE;
    case BACKEND_NO_TAG_SET: return S3E_NO_SUCH_TAG_SET;
    case BACKEND_META_TOO_LARGE: return S3E_METADATA_TOO_LARGE;
    case BACKEND_PRECONDITION_FAILED: return S3E_PRECONDITION_FAILED;
    case BACKEND_COND_CONFLICT: return S3E_CONDITIONAL_CONFLICT;
    case BACKEND_INVALID_PART_NUMBER: return S3E_INVALID_PART_NUMBER;
    case BACKEND_PARTS_UNKNOWN: return S3E_NOT_IMPLEMENTED;
    case BACKEND_BAD_DIGEST: return S3E_BAD_DIGEST;
    case BACKEND_COLD_ERROR: return S3E_COLD_PASSED;
    }
    return S3E_INTERNAL;
}

/* S3's words for a refused tag set (as AWS answers them). */
enum s3_err s3_error_from_tags(enum obj_tags_status st, enum gw_tags_from from,
                               const char **msg)
{
    static const char header_msg[] = "The header 'x-amz-tagging' shall be encoded as UTF-8 "
                                     "then URLEncoded URL query parameters without tag name "
                                     "duplicates.";
    bool bucket = from == GW_TAGS_BUCKET_XML, header = from == GW_TAGS_HEADER;
    *msg = NULL;
    switch (st) {
    case OBJ_TAGS_OK: return S3E_INTERNAL;   /* not an error: a caller bug */
    case OBJ_TAGS_MALFORMED:
        *msg = header ? header_msg : NULL;
        return header ? S3E_INVALID_ARGUMENT : S3E_MALFORMED_XML;
    case OBJ_TAGS_TOO_MANY:
        *msg = bucket ? "Bucket tag count cannot be greater than 50"
                      : "Object tags cannot be greater than 10";
        return S3E_BAD_REQUEST;
    case OBJ_TAGS_BAD_KEY:
        *msg = "The TagKey you have provided is invalid";
        return S3E_INVALID_TAG;
    case OBJ_TAGS_BAD_VALUE:
        *msg = "The TagValue you have provided is invalid";
        return S3E_INVALID_TAG;
    case OBJ_TAGS_SYSTEM_KEY:
        *msg = bucket ? "System tags cannot be added/updated by requester"
                      : "Your TagKey cannot be prefixed with aws:";
        return S3E_INVALID_TAG;
    case OBJ_TAGS_DUPLICATE:
        *msg = header ? header_msg : "Cannot provide multiple Tags with the same key";
        return header ? S3E_INVALID_ARGUMENT : S3E_INVALID_TAG;
    case OBJ_TAGS_NOMEM: return S3E_SLOW_DOWN;
    }
    return S3E_INTERNAL;
}

/* "5 s", "1.5 s", "250 ms". */
static void span(unsigned ms, char *buf, size_t len)
{
    if (ms < 1000)
        snprintf(buf, len, "%u ms", ms);
    else
        snprintf(buf, len, "%g s", (double)ms / 1000.0);
}

const char *s3_error_cold_message(struct backend *b, enum backend_status st, char *buf,
                                  size_t len)
{
    struct backend_info bi;
    backend_info_get(b, &bi);
    char where[300], t[32];
    if (bi.location)
        snprintf(where, sizeof where, "The cold tier %s", bi.location);
    else
        snprintf(where, sizeof where, "The cold tier");
    switch (st) {
    case BACKEND_TIMEOUT:
        span(bi.first_byte_ms, t, sizeof t);
        if (bi.first_byte_ms)
            snprintf(buf, len, "%s did not answer within %s.", where, t);
        else
            snprintf(buf, len, "%s did not answer in time.", where);
        return buf;
    case BACKEND_UNAVAILABLE:
        snprintf(buf, len, "%s is unavailable: cannot connect, the transfer broke off, or it "
                 "failed with server errors.", where);
        return buf;
    case BACKEND_OK: case BACKEND_NO_BUCKET: case BACKEND_NO_KEY: case BACKEND_NO_UPLOAD:
    case BACKEND_BUCKET_EXISTS: case BACKEND_BUCKET_TAKEN: case BACKEND_BUCKET_NOT_EMPTY:
    case BACKEND_BAD_BUCKET_NAME:
    case BACKEND_BAD_KEY: case BACKEND_KEY_TOO_LONG: case BACKEND_KEY_CONFLICT:
    case BACKEND_BAD_RANGE: case BACKEND_INVALID_PART: case BACKEND_INVALID_PART_ORDER:
    case BACKEND_ENTITY_TOO_SMALL: case BACKEND_TOO_LARGE: case BACKEND_NO_SPACE:
    case BACKEND_DENIED: case BACKEND_IO: case BACKEND_NOMEM: case BACKEND_INVALID_REQUEST:
    case BACKEND_READ_ONLY: case BACKEND_NO_TAG_SET: case BACKEND_META_TOO_LARGE:
    case BACKEND_PRECONDITION_FAILED: case BACKEND_COND_CONFLICT: case BACKEND_COLD_ERROR:
    case BACKEND_INVALID_PART_NUMBER: case BACKEND_PARTS_UNKNOWN: case BACKEND_BAD_DIGEST:
        return NULL;
    }
    return NULL;
}

const struct s3_error *s3_error_of(const struct gw_req *r, enum s3_err e)
{
    return e == S3E_COLD_PASSED && r->cold_err ? r->cold_err : &table[e];
}

bool gw_req_take_cold_error(struct gw_req *r)
{
    struct backend_cold_error ce;
    if (!backend_cold_error_take(&ce))
        return false;
    struct s3_error *se = gw_arena_alloc(&r->arena, sizeof *se);
    if (!se)
        return false;
    /* A HEAD's error has no body to name it: the status's usual code. */
    const char *code = ce.code[0] ? ce.code
                       : ce.http_status == 404 ? "NotFound"
                       : ce.http_status == 403 ? "Forbidden"
                       : ce.http_status < 500 ? "BadRequest" : "InternalError";
    se->code = gw_arena_strdup(&r->arena, code);
    se->message = gw_arena_strdup(&r->arena, ce.message[0] ? ce.message
                                             : "The cold tier refused the request.");
    se->http_status = (unsigned)ce.http_status;
    if (!se->code || !se->message)
        return false;
    r->cold_err = se;
    return true;
}

void gw_req_fail_backend(struct gw_req *r, enum backend_status st)
{
    if (st == BACKEND_COLD_ERROR && gw_req_take_cold_error(r)) {
        gw_req_fail(r, S3E_COLD_PASSED, NULL);
        return;
    }
    char buf[512];
    const char *msg = s3_error_cold_message(r->backend, st, buf, sizeof buf);
    /* the message must live as long as the request: the arena's copy */
    gw_req_fail(r, s3_error_from_backend(st), msg ? gw_arena_strdup(&r->arena, msg) : NULL);
}

const char *s3_error_fill_wait_message(struct backend *b, unsigned wait_ms, char *buf,
                                       size_t len)
{
    struct backend_info bi;
    backend_info_get(b, &bi);
    char t[32];
    span(wait_ms, t, sizeof t);
    snprintf(buf, len, "The cold tier%s%s did not deliver the object within %s "
             "(cache.wait_timeout_ms).", bi.location ? " " : "", bi.location ? bi.location : "",
             t);
    return buf;
}

enum s3_err s3_error_from_auth(enum auth_status st)
{
    switch (st) {
    case AUTH_OK: return S3E_INTERNAL;     /* not an error: a caller bug */
    case AUTH_MALFORMED: return S3E_AUTH_HEADER_MALFORMED;
    case AUTH_QUERY_MALFORMED: return S3E_AUTH_QUERY_ERROR;
    case AUTH_REGION_MISMATCH: return S3E_AUTH_HEADER_MALFORMED;
    case AUTH_UNSUPPORTED: return S3E_INVALID_REQUEST;
    case AUTH_MISSING_DATE: return S3E_ACCESS_DENIED;
    case AUTH_UNKNOWN_KEY: return S3E_INVALID_ACCESS_KEY;
    case AUTH_SIGNATURE_MISMATCH: return S3E_SIGNATURE_MISMATCH;
    case AUTH_EXPIRED: return S3E_ACCESS_DENIED;
    case AUTH_TIME_SKEWED: return S3E_REQUEST_TIME_SKEWED;
    case AUTH_BAD_CONTENT_SHA256: return S3E_INVALID_ARGUMENT;
    case AUTH_MISSING_CONTENT_SHA256: return S3E_INVALID_REQUEST;
    case AUTH_SHA256_MISMATCH: return S3E_SHA256_MISMATCH;
    case AUTH_INVALID_DIGEST: return S3E_INVALID_DIGEST;
    case AUTH_BAD_DIGEST: return S3E_BAD_DIGEST;
    case AUTH_BAD_CHECKSUM_HEADER: return S3E_INVALID_REQUEST;
    case AUTH_CHECKSUM_MISMATCH: return S3E_BAD_DIGEST;
    case AUTH_CHUNK_SIGNATURE_MISMATCH: return S3E_SIGNATURE_MISMATCH;
    case AUTH_BAD_CHUNK: return S3E_INVALID_REQUEST;
    case AUTH_INCOMPLETE_BODY: return S3E_INCOMPLETE_BODY;
    case AUTH_TOO_LARGE: return S3E_INVALID_REQUEST;
    case AUTH_ABORTED: return S3E_INTERNAL;
    case AUTH_NOMEM: return S3E_SLOW_DOWN;
    case AUTH_UNSIGNED_HEADER: return S3E_ACCESS_DENIED;
    case AUTH_QUERY_TOO_LONG: return S3E_INVALID_REQUEST;
    case AUTH_SIGV2_DISABLED: return S3E_ACCESS_DENIED;
    case AUTH_QUERY_INCOMPLETE: return S3E_ACCESS_DENIED;
    }
    return S3E_INTERNAL;
}

const char *s3_error_auth_message(enum auth_status st)
{
    switch (st) {
    case AUTH_EXPIRED: return "Request has expired";
    case AUTH_MISSING_DATE:
        return "AWS authentication requires a valid Date or x-amz-date header";
    case AUTH_UNSUPPORTED:
        return "The authorization mechanism you have provided is not supported. "
               "Please use AWS4-HMAC-SHA256.";
    case AUTH_REGION_MISMATCH:
        return "The authorization header is malformed; the region is wrong.";
    case AUTH_CHECKSUM_MISMATCH:
        return "The checksum you specified did not match the calculated checksum.";
    case AUTH_BAD_CHECKSUM_HEADER: return "Value for x-amz-checksum header is invalid.";
    case AUTH_BAD_CONTENT_SHA256: return "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, "
                                         "STREAMING-* or a valid sha256 value.";
    case AUTH_MISSING_CONTENT_SHA256:
        return "Missing required header for this request: x-amz-content-sha256";   /* S3's words */
    case AUTH_BAD_CHUNK: return "The aws-chunked body is malformed.";
    case AUTH_TOO_LARGE: return "An aws-chunked chunk header or trailer is too large.";
    case AUTH_UNSIGNED_HEADER:
        return "There were headers present in the request which were not signed";
    case AUTH_QUERY_TOO_LONG: return "The query string is longer than allowed.";
    case AUTH_SIGV2_DISABLED:
        return "Signature Version 2 is turned off on this server (\"sigv2\": false). "
               "Sign with Signature Version 4: boto3 "
               "Config(signature_version='s3v4'); aws-cli: "
               "aws configure set default.s3.signature_version s3v4 "
               "(in ~/.aws/config: s3 = signature_version = s3v4); s3cmd: signature_v2 = False.";
    case AUTH_QUERY_INCOMPLETE:
        return "Query-string authentication requires the Signature, Expires and "
               "AWSAccessKeyId parameters";
    case AUTH_OK: case AUTH_MALFORMED: case AUTH_QUERY_MALFORMED: case AUTH_UNKNOWN_KEY:
    case AUTH_SIGNATURE_MISMATCH: case AUTH_TIME_SKEWED: case AUTH_SHA256_MISMATCH:
    case AUTH_INVALID_DIGEST: case AUTH_BAD_DIGEST: case AUTH_CHUNK_SIGNATURE_MISMATCH:
    case AUTH_INCOMPLETE_BODY: case AUTH_ABORTED: case AUTH_NOMEM:
        return NULL;
    }
    return NULL;
}

const char *s3_error_job_code(enum cache_status cst, enum backend_status bst)
{
    switch (cst) {
    case CACHE_BACKEND: return s3_error_get(s3_error_from_backend(bst))->code;
    case CACHE_IO: return "CacheUnavailable";
    case CACHE_NOMEM: return "SlowDown";
    case CACHE_TIMEOUT: return "RequestTimeout";
    case CACHE_OK: case CACHE_AGAIN: case CACHE_END: return "InternalError";
    }
    return "InternalError";
}
