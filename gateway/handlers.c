/* gateway/handlers.c - dispatch from an operation to its handler, at the two
 * moments a handler acts: when the headers are in (begin) and when the whole
 * body is in and verified (end). */
#include "gw_int.h"

void gw_handle_begin(struct gw_req *r)
{
    switch (r->op) {
    case GW_OP_PUT_OBJECT:
        gw_h_object_put_begin(r);
        return;
    case GW_OP_UPLOAD_PART:
        gw_h_mpu_part_begin(r);
        return;
    case GW_OP_CREATE_BUCKET:
        gw_h_bucket_begin(r);
        return;
    case GW_OP_DELETE_OBJECTS:
        if (!gw_req_header(r, "content-md5") && !gw_req_header(r, "x-amz-sdk-checksum-algorithm")
            && !gw_req_header(r, "x-amz-checksum-crc32") &&
            !gw_req_header(r, "x-amz-checksum-crc32c") &&
            !gw_req_header(r, "x-amz-checksum-crc64nvme") &&
            !gw_req_header(r, "x-amz-checksum-sha1") &&
            !gw_req_header(r, "x-amz-checksum-sha256") && !gw_req_header(r, "x-amz-trailer"))
            gw_req_fail(r, S3E_INVALID_REQUEST,
                        "Missing required header for this request: Content-MD5");
        return;
    default:   /* every other operation acts when its body is in */
        return;
    }
}

void gw_handle_end(struct gw_req *r)
{
    switch (r->op) {
    case GW_OP_LIST_BUCKETS: gw_h_service(r); return;
    case GW_OP_CREATE_BUCKET:
    case GW_OP_HEAD_BUCKET:
    case GW_OP_DELETE_BUCKET:
    case GW_OP_GET_BUCKET_LOCATION:
    case GW_OP_GET_BUCKET_VERSIONING: gw_h_bucket_end(r); return;
    case GW_OP_LIST_OBJECTS: gw_h_list_objects(r, false); return;
    case GW_OP_LIST_OBJECTS_V2: gw_h_list_objects(r, true); return;
    case GW_OP_LIST_UPLOADS: gw_h_list_uploads(r); return;
    case GW_OP_DELETE_OBJECTS: gw_h_delete_objects(r); return;
    case GW_OP_GET_OBJECT: gw_h_object_get(r, false); return;
    case GW_OP_HEAD_OBJECT: gw_h_object_get(r, true); return;
    case GW_OP_PUT_OBJECT: gw_h_object_put_end(r); return;
    case GW_OP_COPY_OBJECT: gw_h_object_copy(r); return;
    case GW_OP_DELETE_OBJECT: gw_h_object_delete(r); return;
    case GW_OP_CREATE_UPLOAD: gw_h_mpu_create(r); return;
    case GW_OP_UPLOAD_PART: gw_h_mpu_part_end(r); return;
    case GW_OP_UPLOAD_PART_COPY: gw_h_mpu_part_copy(r); return;
    case GW_OP_COMPLETE_UPLOAD: gw_h_mpu_complete(r); return;
    case GW_OP_ABORT_UPLOAD: gw_h_mpu_abort(r); return;
    case GW_OP_LIST_PARTS: gw_h_mpu_list_parts(r); return;
    case GW_OP_GET_OBJECT_TAGGING:
    case GW_OP_GET_BUCKET_TAGGING: gw_h_tagging_get(r); return;
    case GW_OP_PUT_OBJECT_TAGGING:
    case GW_OP_PUT_BUCKET_TAGGING: gw_h_tagging_put(r); return;
    case GW_OP_DELETE_OBJECT_TAGGING:
    case GW_OP_DELETE_BUCKET_TAGGING: gw_h_tagging_delete(r); return;
    case GW_OP_GET_BUCKET_ACL:
    case GW_OP_GET_OBJECT_ACL: gw_h_acl_get(r); return;
    case GW_OP_PUT_BUCKET_ACL:
    case GW_OP_PUT_OBJECT_ACL: gw_h_acl_put(r); return;
    case GW_OP_LIST_OBJECT_VERSIONS: gw_h_list_versions(r); return;
    case GW_OP_METRICS: gw_h_metrics(r); return;
    case GW_OP_PREFETCH_SUBMIT:
    case GW_OP_PREFETCH_GET:
    case GW_OP_PREFETCH_CANCEL: gw_h_prefetch(r); return;
    case GW_OP_WB_FLUSH:
    case GW_OP_WB_STATUS: gw_h_writeback(r); return;
    case GW_OP_HEALTH:
    case GW_OP_READY:
    case GW_OP_UNKNOWN:
    case GW_OP_NOT_IMPLEMENTED:
    case GW_OP_CORS_PREFLIGHT:
    case GW_OP_COUNT:
        gw_reply_error(r, S3E_INTERNAL, NULL, NULL);   /* answered in server.c */
        return;
    }
}
