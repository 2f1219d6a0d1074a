/* gateway/h_cors.c - CORS preflight (OPTIONS on a bucket or an object). S3
 * answers a preflight without a signature; no bucket here has a CORS
 * configuration (PutBucketCors is 501), so every preflight is refused as S3
 * refuses one on such a bucket, the same in both modes. */
#include "gw_int.h"

void gw_h_cors_preflight(struct gw_req *r)
{
    if (!gw_req_header(r, "origin")) {
        gw_req_fail(r, S3E_CORS_NO_ORIGIN, NULL);
        return;
    }
    /* S3's refusal names the method asked for and what it was asked of */
    const char *method = gw_req_header(r, "access-control-request-method");
    struct gw_buf x;
    gw_buf_init(&x, 1024);
    int rc = method ? gw_xml_elem(&x, "Method", method) : 0;
    rc |= gw_xml_elem(&x, "ResourceType", r->key ? "OBJECT" : "BUCKET");
    /* (a method name past 1 KiB: both left out) */
    gw_req_fail_xml(r, S3E_CORS_NOT_ENABLED, NULL, rc ? NULL : x.data);
    gw_buf_free(&x);
}
