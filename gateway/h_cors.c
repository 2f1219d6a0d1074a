/* gateway/h_cors.c - CORS preflight (OPTIONS on a bucket or an object). S3
 * answers a preflight without a signature; no bucket here has a CORS
 * configuration (PutBucketCors is 501), so every preflight is refused as S3
 * refuses one on such a bucket, the same in both modes. */
#include "gw_int.h"

void gw_h_cors_preflight(struct gw_req *r)
{
    if (!gw_req_header(r, "origin"))
        gw_req_fail(r, S3E_CORS_NO_ORIGIN, NULL);
    else
        gw_req_fail(r, S3E_CORS_NOT_ENABLED, NULL);
}
