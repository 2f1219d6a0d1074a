/* gateway/h_versions.c - ListObjectVersions (GET /bucket?versions) on
 * buckets that are never versioned, as S3 answers it for an unversioned
 * bucket: every current object as a <Version> with VersionId "null" and
 * IsLatest true, paged by key-marker / max-keys with the ListObjects
 * machinery (h_bucket.c), prefix, delimiter and encoding-type=url alike. */
#include <stdlib.h>
#include <string.h>

#include "gw_int.h"

enum { XML_CAP = 8 * 1024 * 1024 };   /* a 1000-key page with 1 KiB keys fits */

void gw_h_list_versions(struct gw_req *r)
{
    const char *key_marker = gw_req_query(r, "key-marker");
    const char *vid_marker = gw_req_query(r, "version-id-marker");
    struct gw_listing l;
    if (gw_list_params(r, &l) != 0)
        return;
    /* S3's checks of the version-id marker: it needs a key marker, and on
     * an unversioned bucket the only version there is is "null" (after
     * "null" of key K comes the key after K: the marker pair is the key). */
    if (vid_marker && *vid_marker && !(key_marker && *key_marker)) {
        gw_reply_error(r, S3E_INVALID_ARGUMENT,
                       "A version-id marker cannot be specified without a key marker.", NULL);
        return;
    }
    if (vid_marker && *vid_marker && strcmp(vid_marker, "null") != 0) {
        gw_reply_error(r, S3E_INVALID_ARGUMENT, "Invalid version id specified", NULL);
        return;
    }
    if (gw_list_fetch(r, &l, key_marker && *key_marker ? key_marker : NULL) != 0)
        return;
    const struct backend_list_page *page = &l.page;
    /* botocore decodes (encoding-type=url) KeyMarker, NextKeyMarker,
     * Prefix, Delimiter, the Versions' Key and CommonPrefixes' Prefix: the
     * elements encoded here. */
    struct gw_buf b;
    gw_buf_init(&b, XML_CAP);
    int rc = gw_xml_begin(&b, "ListVersionsResult");
    rc |= gw_xml_elem(&b, "Name", r->bucket);
    rc |= gw_list_elem(&b, "Prefix", l.prefix, l.url);
    rc |= gw_list_elem(&b, "KeyMarker", key_marker ? key_marker : "", l.url);
    rc |= gw_xml_elem(&b, "VersionIdMarker", vid_marker ? vid_marker : "");
    rc |= gw_buf_printf(&b, "<MaxKeys>%u</MaxKeys>", l.max_keys);
    if (l.delim && *l.delim)
        rc |= gw_list_elem(&b, "Delimiter", l.delim, l.url);
    if (l.url)
        rc |= gw_xml_elem(&b, "EncodingType", "url");
    rc |= gw_buf_printf(&b, "<IsTruncated>%s</IsTruncated>", page->truncated ? "true" : "false");
    if (page->truncated && page->next_marker) {
        rc |= gw_list_elem(&b, "NextKeyMarker", page->next_marker, l.url);
        /* a page that ends with a common prefix has no version to name */
        bool last_is_key = page->n_objs &&
                           strcmp(page->objs[page->n_objs - 1].key, page->next_marker) == 0;
        if (last_is_key)
            rc |= gw_xml_elem(&b, "NextVersionIdMarker", "null");
    }
    gw_list_reply(r, &b, &l, rc, true, true);
}
