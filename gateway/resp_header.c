/* gateway/resp_header.c - every response header goes through gw_resp_header:
 * libmicrohttpd's MHD_add_response_header fails on an empty value (and on
 * CR/LF or no memory); such a failure is logged and turns the answer into a
 * 500 (gw_reply) instead of a reply silently missing a header. */
#include <string.h>

#include <microhttpd.h>

#include "gw_int.h"

const char *gw_resp_header_value(const char *value)
{
    /* libmicrohttpd 0.9.75 has no way to add an empty value (MHD_add_response_entry
     * and the _n variants came later); one space is read back as empty. */
    return value[0] ? value : " ";
}

int gw_resp_header(struct gw_req *r, struct MHD_Response *resp, const char *name,
                   const char *value)
{
    if (MHD_add_response_header(resp, name, gw_resp_header_value(value)) == MHD_YES)
        return 0;
    log_msg(LOG_LVL_ERROR, "gw", "req=%s bucket=%s key=%s cannot add the response header %s "
            "(%zu bytes of value; CR/LF in it, or no memory)", r->id,
            r->bucket ? r->bucket : "-", r->key ? r->key : "-", name, strlen(value));
    r->hdr_failed = true;
    return -1;
}
