/* tests/fuzz/fuzz_xml.c - the gateway's XML request bodies
 * (CompleteMultipartUpload, DeleteObjects, CreateBucketConfiguration)
 * through libxml2 with the gateway's parser options. First byte picks the
 * parser; the rest is the document. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gw_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 1u << 20)
        return 0;
    log_set_level(LOG_LVL_ERROR);
    const char *xml = (const char *)data + 1;
    size_t len = size - 1;
    switch (data[0] % 3) {
    case 0: {
        struct gw_xml_parts p;
        memset(&p, 0, sizeof p);
        if (gw_xml_parse_complete(xml, len, &p) == 0) {
            for (size_t i = 0; i < p.n; i++)
                if (strnlen(p.parts[i].etag, sizeof p.parts[i].etag) == sizeof p.parts[i].etag)
                    abort();   /* etag must be terminated */
            free(p.parts);
        }
        break;
    }
    case 1: {
        struct gw_xml_delete d;
        memset(&d, 0, sizeof d);
        if (gw_xml_parse_delete(xml, len, 1000, &d) == 0) {
            if (d.n > 1000)
                abort();
            gw_xml_delete_free(&d);
        }
        break;
    }
    default: {
        char *region = NULL;
        if (gw_xml_parse_create_bucket(xml, len, &region) == 0)
            free(region);
        break;
    }
    }
    return 0;
}
