/* tests/unit/test_gw_admin.c - routing of the operator endpoints (health,
 * ready, metrics: GET and HEAD alike, a bucket named "metrics" still
 * reachable) and the S3 error a cold-tier outage gets: 503
 * ServiceUnavailable whose message names the cold tier and its deadline,
 * never SlowDown's "reduce your request rate". */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "gw_int.h"

int register_tests(void);

static void admin_routing_table(void)
{
    static const struct {
        const char *method, *uri, *host;
        enum gw_op op;
        const char *bucket;
    } cases[] = {
        { "GET", "/_shardgate/health", NULL, GW_OP_HEALTH, NULL },
        { "HEAD", "/_shardgate/health", NULL, GW_OP_HEALTH, NULL },
        { "POST", "/_shardgate/health", NULL, GW_OP_HEALTH, NULL },   /* refused there: 405 */
        { "GET", "/_shardgate/ready", NULL, GW_OP_READY, NULL },
        { "HEAD", "/_shardgate/ready", NULL, GW_OP_READY, NULL },
        { "GET", "/metrics", NULL, GW_OP_METRICS, NULL },
        { "HEAD", "/metrics", NULL, GW_OP_METRICS, NULL },
        { "HEAD", "/_shardgate/metrics", NULL, GW_OP_METRICS, NULL },
        /* a bucket named "metrics" stays reachable */
        { "GET", "/metrics?list-type=2", NULL, GW_OP_LIST_OBJECTS_V2, "metrics" },
        { "PUT", "/metrics", NULL, GW_OP_CREATE_BUCKET, "metrics" },
        { "HEAD", "/metrics?x=1", NULL, GW_OP_HEAD_BUCKET, "metrics" },
        { "HEAD", "/metrics", "bkt.s3.local", GW_OP_HEAD_OBJECT, "bkt" },
    };
    struct conf c;
    memset(&c, 0, sizeof c);
    c.vhost_domain = (char *)"s3.local";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gw_req r;
        memset(&r, 0, sizeof r);
        r.conf = &c;
        r.method = cases[i].method;
        struct auth_hdr h[1];
        size_t n = 0;
        if (cases[i].host)
            h[n++] = (struct auth_hdr){ "host", cases[i].host };
        r.hdrs = h;
        r.n_hdrs = n;
        enum s3_err err;
        const char *msg;
        CU_ASSERT_EQUAL_FATAL(gw_req_parse(&r, cases[i].uri, &err, &msg), 0);
        if (r.op != cases[i].op)
            fprintf(stderr, "case %zu %s %s: op %s\n", i, cases[i].method, cases[i].uri,
                    gw_op_name(r.op));
        CU_ASSERT_EQUAL(r.op, cases[i].op);
        if (cases[i].bucket) {
            CU_ASSERT_STRING_EQUAL(r.bucket ? r.bucket : "(null)", cases[i].bucket);
        } else {
            CU_ASSERT_PTR_NULL(r.bucket);
        }
        CU_ASSERT_EQUAL(gw_op_is_probe(r.op), r.op == GW_OP_HEALTH || r.op == GW_OP_READY);
        gw_arena_free(&r.arena);
    }
    enum auth_perm need;
    CU_ASSERT_FALSE(gw_op_permission(GW_OP_READY, &need));   /* no credentials needed */
    CU_ASSERT_STRING_EQUAL(gw_op_name(GW_OP_READY), "Ready");
}

/* gateway/request.c keeps one row per operation: each has a name of its own
 * (logs and metrics tell them apart) and asks the permission S3 would. */
static void every_op_is_described(void)
{
    for (int i = 0; i < GW_OP_COUNT; i++) {
        const char *name = gw_op_name((enum gw_op)i);
        CU_ASSERT_PTR_NOT_NULL_FATAL(name);
        CU_ASSERT_NOT_EQUAL(name[0], '\0');
        for (int j = 0; j < i; j++)
            CU_ASSERT_STRING_NOT_EQUAL(gw_op_name((enum gw_op)j), name);
    }
    static const struct {
        enum gw_op op;
        bool signed_;
        enum auth_perm need;
    } cases[] = {
        { GW_OP_GET_OBJECT, true, AUTH_PERM_READ },
        { GW_OP_PREFETCH_SUBMIT, true, AUTH_PERM_READ },
        { GW_OP_PUT_OBJECT, true, AUTH_PERM_WRITE },
        { GW_OP_DELETE_OBJECTS, true, AUTH_PERM_WRITE },
        { GW_OP_CREATE_BUCKET, true, AUTH_PERM_ADMIN },
        { GW_OP_PUT_BUCKET_ACL, true, AUTH_PERM_ADMIN },
        { GW_OP_METRICS, true, AUTH_PERM_ADMIN },
        { GW_OP_HEALTH, false, AUTH_PERM_READ },
        { GW_OP_CORS_PREFLIGHT, false, AUTH_PERM_READ },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        enum auth_perm need = AUTH_PERM_READ;
        CU_ASSERT_EQUAL(gw_op_permission(cases[i].op, &need), cases[i].signed_);
        if (cases[i].signed_)
            CU_ASSERT_EQUAL(need, cases[i].need);
    }
    CU_ASSERT_STRING_EQUAL(gw_op_name(GW_OP_COMPLETE_UPLOAD), "CompleteMultipartUpload");
}

static void cold_outage_is_service_unavailable_naming_the_tier(void)
{
    struct backend_s3_conf cf = { .endpoint = "http://127.0.0.1:1", .region = "us-east-1",
                                  .access_key = "a", .secret_key = "s" };
    struct backend *b = NULL;
    CU_ASSERT_EQUAL_FATAL(backend_s3_open(&cf, &b), BACKEND_OK);
    static const enum backend_status outages[] = { BACKEND_TIMEOUT, BACKEND_UNAVAILABLE };
    for (size_t i = 0; i < 2; i++) {
        const struct s3_error *se = s3_error_get(s3_error_from_backend(outages[i]));
        CU_ASSERT_STRING_EQUAL(se->code, "ServiceUnavailable");
        CU_ASSERT_EQUAL(se->http_status, 503);
        CU_ASSERT_PTR_NULL(strstr(se->message, "request rate"));
        char buf[512];
        const char *m = s3_error_cold_message(b, outages[i], buf, sizeof buf);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        CU_ASSERT_PTR_NOT_NULL(strstr(m, "The cold tier http://127.0.0.1:1 "));
    }
    char buf[512];
    CU_ASSERT_STRING_EQUAL(s3_error_cold_message(b, BACKEND_TIMEOUT, buf, sizeof buf),
                           "The cold tier http://127.0.0.1:1 did not answer within 5 s.");
    CU_ASSERT_PTR_NULL(s3_error_cold_message(b, BACKEND_NO_KEY, buf, sizeof buf));
    CU_ASSERT_STRING_EQUAL(s3_error_fill_wait_message(b, 30000, buf, sizeof buf),
                           "The cold tier http://127.0.0.1:1 did not deliver the object within "
                           "30 s (cache.wait_timeout_ms).");
    backend_close(b);
    /* SlowDown keeps S3's throttling text: it is what throttling is */
    CU_ASSERT_PTR_NOT_NULL(strstr(s3_error_get(S3E_SLOW_DOWN)->message, "request rate"));
}

int register_tests(void)
{
    CU_pSuite s = CU_add_suite("gw_admin", NULL, NULL);
    if (!s)
        return -1;
    if (!CU_add_test(s, "admin_routing_table", admin_routing_table) ||
        !CU_add_test(s, "every_op_is_described", every_op_is_described) ||
        !CU_add_test(s, "cold_outage_is_service_unavailable_naming_the_tier",
                     cold_outage_is_service_unavailable_naming_the_tier))
        return -1;
    return 0;
}
