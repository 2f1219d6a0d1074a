/* gateway/h_part.c - GET/HEAD ?partNumber=N: one part of a multipart object
 * as S3 answers it (206, Content-Range, x-amz-mp-parts-count, the object's
 * ETag). The backend says where the part lies; h_object.c then serves those
 * bytes as a range, through the cache when there is one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "gw_int.h"

int gw_part_find(struct gw_req *r)
{
    const char *pn = gw_req_query(r, "partNumber");
    if (!pn)
        return 0;
    if (r->part_known)
        return 1;
    char *end;
    unsigned long n = pn[0] >= '0' && pn[0] <= '9' ? strtoul(pn, &end, 10) : 0;
    if (n < 1 || n > BACKEND_MAX_PARTS || *end) {
        gw_reply_error(r, S3E_INVALID_ARGUMENT,
                       "Part number must be an integer between 1 and 10000, inclusive", NULL);
        return -1;
    }
    if (gw_req_header(r, "range")) {
        gw_reply_error(r, S3E_INVALID_REQUEST,
                       "Cannot specify both Range header and partNumber query parameter", NULL);
        return -1;
    }
    enum backend_status st = backend_object_part(r->backend, r->bucket, r->key, (unsigned)n,
                                                 &r->part_rng);
    if (st != BACKEND_OK) {
        gw_reply_backend_error(r, st);
        return -1;
    }
    r->part_known = true;
    return 1;
}

void gw_part_headers(struct gw_req *r, struct MHD_Response *resp)
{
    const struct backend_part_range *p = &r->part_rng;
    char buf[96];
    if (p->size) {
        snprintf(buf, sizeof buf, "bytes %llu-%llu/%llu", (unsigned long long)p->first,
                 (unsigned long long)(p->first + p->size - 1), (unsigned long long)p->total);
        gw_resp_header(r, resp, "Content-Range", buf);
    }
    if (p->parts_count) {
        snprintf(buf, sizeof buf, "%u", p->parts_count);
        gw_resp_header(r, resp, "x-amz-mp-parts-count", buf);
    }
}
