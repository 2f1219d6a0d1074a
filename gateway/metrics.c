/* gateway/metrics.c - GET /metrics in the Prometheus text format: the build,
 * requests by operation and status, request latency of cache hits and
 * misses, connections, and the cache's and the cold tier's counters.
 * Counters are atomics bumped once per request at completion; rendering
 * reads them without locks. */
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_int.h"
#include "md5.h"
#include "md5sha.h"

#ifndef PROJECT_VERSION
#define PROJECT_VERSION "unknown"
#endif

/* Every HTTP status (100..599) is its own label value, so a new answer (the
 * 202 of a prefetch submit) needs no list kept in step; "other" is a
 * request that ended without one (the client went away first). */
enum { CODE_MIN = 100, CODE_MAX = 599, N_CODES = CODE_MAX - CODE_MIN + 1 };

static const double bounds_s[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                   0.25, 0.5, 1, 2.5, 5, 10 };
#define N_BOUNDS (sizeof bounds_s / sizeof bounds_s[0])

struct histogram {
    atomic_uint_fast64_t buckets[N_BOUNDS + 1];
    atomic_uint_fast64_t count, sum_ns;
};

static atomic_uint_fast64_t requests[GW_OP_COUNT][N_CODES + 1];
static struct histogram lat_hit, lat_miss;

static void observe(struct histogram *h, uint64_t ns)
{
    double s = (double)ns / 1e9;
    size_t b = 0;
    while (b < N_BOUNDS && s > bounds_s[b])
        b++;
    atomic_fetch_add(&h->buckets[b], 1);
    atomic_fetch_add(&h->count, 1);
    atomic_fetch_add(&h->sum_ns, ns);
}

void gw_metrics_request(enum gw_op op, unsigned status, uint64_t ns, enum gw_cache_use use)
{
    size_t c = status >= CODE_MIN && status <= CODE_MAX ? status - CODE_MIN : N_CODES;
    atomic_fetch_add(&requests[op][c], 1);
    if (use == GW_CACHE_HIT)
        observe(&lat_hit, ns);
    else if (use == GW_CACHE_MISS)
        observe(&lat_miss, ns);
}

static int render_histogram(struct gw_buf *b, const char *name, const char *help,
                            const uint64_t *per_bucket, uint64_t count, double sum_s,
                            const double *bounds, size_t n, const char *labels)
{
    int rc = gw_buf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (size_t i = 0; i < n; i++) {
        cum += per_bucket[i];
        rc |= gw_buf_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels,
                            *labels ? "," : "", bounds[i], (unsigned long long)cum);
    }
    cum += per_bucket[n];
    rc |= gw_buf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels,
                        *labels ? "," : "", (unsigned long long)cum);
    rc |= gw_buf_printf(b, "%s_sum%s%s%s %.6f\n%s_count%s%s%s %llu\n", name,
                        *labels ? "{" : "", labels, *labels ? "}" : "", sum_s, name,
                        *labels ? "{" : "", labels, *labels ? "}" : "",
                        (unsigned long long)count);
    return rc;
}

static int render_gw_histogram(struct gw_buf *b, const char *name, const char *help,
                               struct histogram *h)
{
    uint64_t per[N_BOUNDS + 1];
    for (size_t i = 0; i <= N_BOUNDS; i++)
        per[i] = atomic_load(&h->buckets[i]);
    return render_histogram(b, name, help, per, atomic_load(&h->count),
                            (double)atomic_load(&h->sum_ns) / 1e9, bounds_s, N_BOUNDS, "");
}

void gw_h_metrics(struct gw_req *r)
{
    struct gw_buf b;
    gw_buf_init(&b, 1024 * 1024);
    int rc = gw_buf_puts(&b, "# HELP shardgate_build_info The running shardgate's version.\n"
                             "# TYPE shardgate_build_info gauge\n"
                             "shardgate_build_info{version=\"" PROJECT_VERSION "\"} 1\n");
    rc |= gw_buf_puts(&b, "# HELP shardgate_requests_total S3 requests by operation and "
                          "HTTP status.\n# TYPE shardgate_requests_total counter\n");
    for (int op = 0; op < GW_OP_COUNT; op++) {
        for (size_t c = 0; c <= N_CODES; c++) {
            uint64_t v = atomic_load(&requests[op][c]);
            if (!v)
                continue;
            char code[8];
            if (c < N_CODES)
                snprintf(code, sizeof code, "%u", (unsigned)(c + CODE_MIN));
            else
                snprintf(code, sizeof code, "other");
            rc |= gw_buf_printf(&b, "shardgate_requests_total{op=\"%s\",code=\"%s\"} %llu\n",
                                gw_op_name((enum gw_op)op), code, (unsigned long long)v);
        }
    }
    rc |= render_gw_histogram(&b, "shardgate_hit_duration_seconds",
                              "GET/HEAD requests served from a complete cache file.", &lat_hit);
    rc |= render_gw_histogram(&b, "shardgate_miss_duration_seconds",
                              "GET/HEAD requests that read from a fill.", &lat_miss);

    struct gw_conn_stats ks;
    gw_conn_stats_get(r->gw, &ks);
    rc |= gw_buf_printf(&b, "# HELP shardgate_connections Open client connections.\n"
                            "# TYPE shardgate_connections gauge\nshardgate_connections %llu\n"
                            "# HELP shardgate_connections_limit Connections held at once "
                            "(connections.max).\n# TYPE shardgate_connections_limit gauge\n"
                            "shardgate_connections_limit %llu\n"
                            "# HELP shardgate_connections_per_client_limit Connections from "
                            "one client address (connections.per_client).\n"
                            "# TYPE shardgate_connections_per_client_limit gauge\n"
                            "shardgate_connections_per_client_limit %llu\n"
                            "# HELP shardgate_connections_closed_total Connections closed for "
                            "holding a slot without sending a request.\n"
                            "# TYPE shardgate_connections_closed_total counter\n"
                            "shardgate_connections_closed_total{reason=\"idle_timeout\"} %llu\n"
                            "shardgate_connections_closed_total{reason=\"header_timeout\"} %llu\n"
                            "shardgate_connections_closed_total{reason=\"slow_body\"} %llu\n",
                        (unsigned long long)ks.open, (unsigned long long)ks.limit,
                        (unsigned long long)ks.per_client, (unsigned long long)ks.closed_idle,
                        (unsigned long long)ks.closed_header,
                        (unsigned long long)ks.closed_body_rate);
    rc |= gw_buf_printf(&b, "# HELP shardgate_connections_refused_total Connections closed on "
                            "arrival, unanswered: connections.max held, or "
                            "connections.per_client from their address.\n"
                            "# TYPE shardgate_connections_refused_total counter\n"
                            "shardgate_connections_refused_total{reason=\"limit\"} %llu\n"
                            "shardgate_connections_refused_total{reason=\"per_client\"} %llu\n"
                            "# HELP shardgate_http_thread_connections Open connections each "
                            "HTTP thread holds (a new one goes to the thread of the CPU it "
                            "came in on, unless that one holds two more than the least held)."
                            "\n# TYPE shardgate_http_thread_connections gauge\n",
                        (unsigned long long)ks.refused_limit,
                        (unsigned long long)ks.refused_per_client);
    for (unsigned i = 0; i < ks.http_threads; i++)
        rc |= gw_buf_printf(&b, "shardgate_http_thread_connections{thread=\"%u\"} %u\n", i,
                            ks.thread_open[i]);
    rc |= gw_buf_printf(&b, "# HELP shardgate_body_threads Threads that take PUT and "
                            "UploadPart bodies in (body_threads).\n"
                            "# TYPE shardgate_body_threads gauge\nshardgate_body_threads %u\n"
                            "# HELP shardgate_body_bytes_total PUT and UploadPart body bytes "
                            "received, by the thread that took them in: a body thread, or the "
                            "connection's own (bodies under 1 MiB, or all body buffers in use).\n"
                            "# TYPE shardgate_body_bytes_total counter\n"
                            "shardgate_body_bytes_total{thread=\"body\"} %llu\n"
                            "shardgate_body_bytes_total{thread=\"connection\"} %llu\n"
                            "# HELP shardgate_body_buffer_bytes Memory held now by bodies "
                            "on their way to a body thread (at most 64 MiB).\n"
                            "# TYPE shardgate_body_buffer_bytes gauge\n"
                            "shardgate_body_buffer_bytes %llu\n",
                        ks.body_threads, (unsigned long long)ks.body_bytes_intake,
                        (unsigned long long)ks.body_bytes_inline,
                        (unsigned long long)ks.body_buffered);
    struct sg_md5_stats ms;
    sg_md5_stats(&ms);
    rc |= gw_buf_printf(&b, "# HELP shardgate_md5_bytes_total Body bytes hashed for ETags: in "
                            "AVX2 lanes beside other bodies' (when 4 or more bodies were "
                            "hashed at once), alone, or with the SHA-256 of a signed payload "
                            "in one pass.\n"
                            "# TYPE shardgate_md5_bytes_total counter\n"
                            "shardgate_md5_bytes_total{how=\"lanes\"} %llu\n"
                            "shardgate_md5_bytes_total{how=\"alone\"} %llu\n"
                            "shardgate_md5_bytes_total{how=\"with_sha256\"} %llu\n",
                        (unsigned long long)ms.blocks_in_lanes * 64,
                        (unsigned long long)ms.blocks_alone * 64, sg_md5sha_bytes());

    struct cache_stats cs;
    memset(&cs, 0, sizeof cs);
    if (r->cache)
        cache_stats_get(r->cache, &cs);
    static const struct { const char *name, *type, *help; size_t off; } cache_metrics[] = {
        { "shardgate_cache_hits_total", "counter", "Reads served by a published cache entry.",
          offsetof(struct cache_stats, hits) },
        { "shardgate_cache_misses_total", "counter", "Reads that started a fill.",
          offsetof(struct cache_stats, misses) },
        { "shardgate_cache_bytes", "gauge", "Bytes of cached object data.",
          offsetof(struct cache_stats, bytes_used) },
        { "shardgate_cache_capacity_bytes", "gauge", "The cache's capacity.",
          offsetof(struct cache_stats, capacity) },
        { "shardgate_cache_objects", "gauge", "Published cache entries.",
          offsetof(struct cache_stats, objects) },
        { "shardgate_cache_evictions_total", "counter", "Entries evicted for space.",
          offsetof(struct cache_stats, evictions) },
        { "shardgate_cache_fills_total", "counter", "Fills started.",
          offsetof(struct cache_stats, fills_started) },
        { "shardgate_cache_fills_failed_total", "counter",
          "Fills that failed, with staging fills withdrawn (fills_withdrawn).",
          offsetof(struct cache_stats, fills_failed) },
        { "shardgate_cache_fills_withdrawn_total", "counter",
          "Staging fills given up before their first byte: room for them would have evicted "
          "an object needed sooner; staged again later.",
          offsetof(struct cache_stats, fills_withdrawn) },
        { "shardgate_cache_fills_done_total", "counter", "Fills that were published.",
          offsetof(struct cache_stats, fills_done) },
        { "shardgate_cache_revalidations_total", "counter",
          "Cached entries checked against the cold tier.",
          offsetof(struct cache_stats, revalidations) },
        { "shardgate_fill_waiters", "gauge", "Readers waiting for bytes of a fill.",
          offsetof(struct cache_stats, fill_waiters) },
        { "shardgate_cache_dir_resets_total", "counter", "Times the cache directory was "
          "recreated or taken back after it was unusable (the index starts empty).",
          offsetof(struct cache_stats, dir_resets) },
        { "shardgate_revalidation_timeouts_total", "counter",
          "Revalidations the cold tier did not answer within cache.revalidate_timeout_ms; "
          "the cached copy was served.", offsetof(struct cache_stats, revalidation_timeouts) },
        { "shardgate_revalidations_skipped_total", "counter",
          "Revalidations skipped for 5 s after one timed out; the cached copy was served.",
          offsetof(struct cache_stats, revalidations_skipped) },
        { "shardgate_cache_memory_hits_total", "counter",
          "Hits of small objects served from memory (cache.memory), without a file read; "
          "also counted in shardgate_cache_hits_total.",
          offsetof(struct cache_stats, memory_hits) },
        { "shardgate_cache_memory_bytes", "gauge",
          "Bytes of small objects kept in memory (cache.memory).",
          offsetof(struct cache_stats, memory_bytes) },
        { "shardgate_cache_header_hits_total", "counter",
          "Hits read from a cache file that had its header block in memory "
          "(cache.header_memory) and read only the body.",
          offsetof(struct cache_stats, header_hits) },
        { "shardgate_cache_header_memory_bytes", "gauge",
          "Bytes of cache files' header blocks kept in memory (cache.header_memory).",
          offsetof(struct cache_stats, header_bytes) },
    };
    for (size_t i = 0; i < sizeof cache_metrics / sizeof cache_metrics[0]; i++) {
        uint64_t v;
        memcpy(&v, (const char *)&cs + cache_metrics[i].off, sizeof v);
        rc |= gw_buf_printf(&b, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", cache_metrics[i].name,
                            cache_metrics[i].help, cache_metrics[i].name,
                            cache_metrics[i].type, cache_metrics[i].name,
                            (unsigned long long)v);
    }
    if (r->cache)
        rc |= gw_buf_printf(&b, "# HELP shardgate_cache_fill_checks_total Fills by what their "
                                "bytes were checked against before publishing: checksum (the "
                                "cold tier's full-object CRC, else SHA), md5 (the ETag), none "
                                "(a multipart ETag without a full-object checksum).\n"
                                "# TYPE shardgate_cache_fill_checks_total counter\n"
                                "shardgate_cache_fill_checks_total{check=\"checksum\"} %llu\n"
                                "shardgate_cache_fill_checks_total{check=\"md5\"} %llu\n"
                                "shardgate_cache_fill_checks_total{check=\"none\"} %llu\n",
                            (unsigned long long)cs.fill_checks[CACHE_CHECK_CHECKSUM],
                            (unsigned long long)cs.fill_checks[CACHE_CHECK_MD5],
                            (unsigned long long)cs.fill_checks[CACHE_CHECK_NONE]);
    if (r->cache)
        rc |= gw_buf_printf(&b, "# HELP shardgate_cache_fill_bytes_total Bytes of fills written "
                                "to the cache, by how: direct (O_DIRECT, cache.fill_io), "
                                "buffered (the page cache: small objects, or fill_io "
                                "\"buffered\").\n"
                                "# TYPE shardgate_cache_fill_bytes_total counter\n"
                                "shardgate_cache_fill_bytes_total{how=\"direct\"} %llu\n"
                                "shardgate_cache_fill_bytes_total{how=\"buffered\"} %llu\n",
                            (unsigned long long)cs.fill_bytes_direct,
                            (unsigned long long)cs.fill_bytes_buffered);
    if (r->cache) {
        uint64_t copied, sent, held;
        gw_hit_copy_stats(r->hit_copy, &copied, &sent, &held);
        rc |= gw_buf_printf(&b, "# HELP shardgate_cache_hit_sends_total GETs of complete cache "
                                "hits sent from the cache file (not the memory tier), by how: "
                                "copy (128 KiB to 4 MiB, read into memory and sent with the "
                                "headers in one send), sendfile.\n"
                                "# TYPE shardgate_cache_hit_sends_total counter\n"
                                "shardgate_cache_hit_sends_total{how=\"copy\"} %llu\n"
                                "shardgate_cache_hit_sends_total{how=\"sendfile\"} %llu\n"
                                "# HELP shardgate_cache_hit_copy_bytes Bytes of hits read into "
                                "memory and not yet sent (at most 64 MiB).\n"
                                "# TYPE shardgate_cache_hit_copy_bytes gauge\n"
                                "shardgate_cache_hit_copy_bytes %llu\n",
                            (unsigned long long)copied, (unsigned long long)sent,
                            (unsigned long long)held);
    }
    if (r->cache)
        rc |= gw_buf_printf(&b, "# HELP shardgate_cache_fill_read_bytes_total Bytes the readers "
                                "of fills in progress had, by where from: buffer (the fill's "
                                "own, as the bytes arrived), file (the cache file, for a "
                                "reader behind them).\n"
                                "# TYPE shardgate_cache_fill_read_bytes_total counter\n"
                                "shardgate_cache_fill_read_bytes_total{from=\"buffer\"} %llu\n"
                                "shardgate_cache_fill_read_bytes_total{from=\"file\"} %llu\n",
                            (unsigned long long)cs.fill_read_window,
                            (unsigned long long)cs.fill_read_file);
    if (r->cache)
        rc |= gw_buf_printf(&b, "# HELP shardgate_cache_engine The engine of cache fills: "
                                "io_uring, or threads (pread/pwrite, io_uring blocked).\n"
                                "# TYPE shardgate_cache_engine gauge\n"
                                "shardgate_cache_engine{engine=\"%s\"} 1\n", cs.engine);
    if (r->cache)
        rc |= gw_buf_printf(&b, "# HELP shardgate_prefetch_settled 1 when staging has done "
                                "all it may now: since the last hint, hinted read or end of "
                                "a staged fill the stager found nothing to start, and no "
                                "staged fill runs.\n# TYPE shardgate_prefetch_settled gauge\n"
                                "shardgate_prefetch_settled %d\n",
                            cache_prefetch_settled(r->cache) ? 1 : 0);
    struct backend_wb_status ws;
    if (backend_wb_status(r->backend, NULL, NULL, &ws)) {
        rc |= gw_buf_printf(&b, "# HELP shardgate_writeback_dirty_bytes Bytes of acknowledged "
                                "writes not yet in the cold tier.\n"
                                "# TYPE shardgate_writeback_dirty_bytes gauge\n"
                                "shardgate_writeback_dirty_bytes %llu\n"
                                "# HELP shardgate_writeback_dirty_objects Acknowledged writes "
                                "(objects and deletes) not yet in the cold tier.\n"
                                "# TYPE shardgate_writeback_dirty_objects gauge\n"
                                "shardgate_writeback_dirty_objects %llu\n"
                                "# HELP shardgate_writeback_oldest_dirty_seconds Age of the "
                                "oldest pending write.\n"
                                "# TYPE shardgate_writeback_oldest_dirty_seconds gauge\n"
                                "shardgate_writeback_oldest_dirty_seconds %.3f\n"
                                "# HELP shardgate_writeback_staged_part_bytes Bytes of parts "
                                "of multipart uploads not completed yet (they count in the "
                                "cache's capacity).\n"
                                "# TYPE shardgate_writeback_staged_part_bytes gauge\n"
                                "shardgate_writeback_staged_part_bytes %llu\n"
                                "# HELP shardgate_writeback_uploaded_bytes_total Bytes the "
                                "uploader sent to the cold tier.\n"
                                "# TYPE shardgate_writeback_uploaded_bytes_total counter\n"
                                "shardgate_writeback_uploaded_bytes_total %llu\n"
                                "# HELP shardgate_writeback_upload_failures_total Uploads that "
                                "failed (each is retried).\n"
                                "# TYPE shardgate_writeback_upload_failures_total counter\n"
                                "shardgate_writeback_upload_failures_total %llu\n",
                            (unsigned long long)ws.dirty_bytes,
                            (unsigned long long)ws.dirty_objects, ws.oldest_s,
                            (unsigned long long)ws.staged_part_bytes,
                            (unsigned long long)ws.uploaded_bytes,
                            (unsigned long long)ws.failures);
        rc |= gw_buf_printf(&b, "# HELP shardgate_writeback_upload_copied_bytes_total Bytes "
                                "the uploads read through a buffer (hashed and spooled) "
                                "instead of sending them from the staged file, as they do to "
                                "an S3 cold tier.\n"
                                "# TYPE shardgate_writeback_upload_copied_bytes_total counter\n"
                                "shardgate_writeback_upload_copied_bytes_total %llu\n",
                            (unsigned long long)ws.upload_copied);
        rc |= gw_buf_printf(&b, "# HELP shardgate_writeback_upload_hashed_bytes_total Bytes "
                                "the uploads hashed from the staged files: the parts of a "
                                "multipart object go unhashed, and are hashed only when the "
                                "cold tier's part ETags do not make the ETag the client was "
                                "given.\n"
                                "# TYPE shardgate_writeback_upload_hashed_bytes_total counter\n"
                                "shardgate_writeback_upload_hashed_bytes_total %llu\n",
                            (unsigned long long)ws.upload_hashed);
        rc |= gw_buf_printf(&b, "# HELP shardgate_writeback_staged_bytes_total Body bytes "
                                "written to the staging directory, by how: io_uring with "
                                "O_DIRECT, io_uring through the page cache, write() (bodies "
                                "under 1 MiB, unaligned heads and tails).\n"
                                "# TYPE shardgate_writeback_staged_bytes_total counter\n"
                                "shardgate_writeback_staged_bytes_total{how=\"direct\"} %llu\n"
                                "shardgate_writeback_staged_bytes_total{how=\"uring\"} %llu\n"
                                "shardgate_writeback_staged_bytes_total{how=\"write\"} %llu\n",
                            (unsigned long long)ws.staged_direct,
                            (unsigned long long)ws.staged_uring,
                            (unsigned long long)ws.staged_write);
    }

    struct backend_stats bs;
    backend_stats_get(&bs);
    rc |= gw_buf_puts(&b, "# HELP shardgate_backend_requests_total Calls to the cold tier.\n"
                          "# TYPE shardgate_backend_requests_total counter\n");
    for (int op = 0; op < BACKEND_OP_COUNT; op++)
        rc |= gw_buf_printf(&b, "shardgate_backend_requests_total{op=\"%s\"} %llu\n",
                            backend_op_name((enum backend_op)op),
                            (unsigned long long)bs.calls[op]);
    rc |= gw_buf_printf(&b, "# HELP shardgate_backend_errors_total Cold-tier calls that "
                            "failed.\n# TYPE shardgate_backend_errors_total counter\n"
                            "shardgate_backend_errors_total %llu\n",
                        (unsigned long long)bs.errors);
    rc |= gw_buf_printf(&b, "# HELP shardgate_backend_timeouts_total Cold-tier calls whose "
                            "answer did not begin (or end) within their deadline.\n"
                            "# TYPE shardgate_backend_timeouts_total counter\n"
                            "shardgate_backend_timeouts_total %llu\n",
                        (unsigned long long)bs.timeouts);
    rc |= gw_buf_printf(&b, "# HELP shardgate_backend_bytes_total Object bytes read from the "
                            "cold tier.\n# TYPE shardgate_backend_bytes_total counter\n"
                            "shardgate_backend_bytes_total %llu\n",
                        (unsigned long long)bs.bytes_read);
    rc |= gw_buf_printf(&b, "# HELP shardgate_backend_direct_read_bytes_total Bytes read around "
                            "the page cache (O_DIRECT): object reads of the write-back "
                            "staging, and bodies of uploads sent from it.\n"
                            "# TYPE shardgate_backend_direct_read_bytes_total counter\n"
                            "shardgate_backend_direct_read_bytes_total{of=\"object\"} %llu\n"
                            "shardgate_backend_direct_read_bytes_total{of=\"upload\"} %llu\n",
                        (unsigned long long)bs.direct_object_read,
                        (unsigned long long)bs.direct_body_read);
    rc |= render_histogram(&b, "shardgate_backend_duration_seconds",
                           "Latency of cold-tier calls.", bs.lat_buckets, bs.lat_count,
                           bs.lat_sum_s, backend_lat_bounds_s, BACKEND_LAT_BUCKETS, "");
    if (rc) {
        gw_buf_free(&b);
        gw_reply_error(r, S3E_INTERNAL, NULL, NULL);
        return;
    }
    size_t len;
    char *body = gw_buf_take(&b, &len);
    gw_reply_body(r, 200, "text/plain; version=0.0.4", body, len);
}
