/* clients/cli/jobs.c - `shardgate jobs`: a bucket's prefetch jobs as a
 * table, one job in detail (--job), or cancelling one (--cancel). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_int.h"

static const char jobs_usage[] =
    "usage: shardgate jobs --endpoint URL s3://BUCKET [--job ID | --cancel ID] [--json]\n"
    "\n"
    "Lists the bucket's prefetch jobs (newest first), shows one job (--job) or\n"
    "cancels one (--cancel). Endpoint, credentials and --region as for\n"
    "`shardgate prefetch --help`.\n"
    "Exit status: 0 done, 2 usage error, 3 the gateway refused the request (its S3\n"
    "error is shown, e.g. NoSuchJob) or could not be reached.\n";

static void print_job_detail(const json_t *doc)
{
    struct cli_job j;
    char b1[32], b2[32], b3[32], b4[32], r[32];
    cli_job_parse(doc, &j);
    printf("job        %s\n", j.id);
    printf("bucket     %s\n", j.bucket);
    printf("state      %s\n", j.state);
    if (j.ordered && j.has_position)
        printf("ordered    yes (the reader is at object %.0f)\n", j.position);
    else
        printf("ordered    %s\n", j.ordered ? "yes" : "no");
    if (j.has_epoch)
        printf("epoch      %.0f\n", j.epoch);
    if (j.consumer[0])
        printf("consumer   %s\n", j.consumer);
    printf("objects    %.0f (cached %.0f, staged %.0f, failed %.0f, pending %.0f)\n", j.total,
           j.cached, j.staged, j.failed, j.pending);
    cli_fmt_bytes(j.bytes_done, b1, sizeof b1);
    cli_fmt_bytes(cli_job_bytes_to_stage(&j), b2, sizeof b2);
    cli_fmt_bytes(j.bytes_cached, b3, sizeof b3);
    cli_fmt_bytes(j.bytes_total, b4, sizeof b4);
    printf("bytes      %s staged of %s to stage, %s cached already (%s known so far)\n", b1, b2,
           b3, b4);
    if (j.has_rate) {
        cli_fmt_rate(j.rate, r, sizeof r);
        if (j.has_eta)
            printf("rate       %s, eta %.0f s\n", r, j.eta);
        else
            printf("rate       %s\n", r);
    }
    printf("created    %s\n", j.created[0] ? j.created : "-");
    printf("ended      %s\n", j.ended[0] ? j.ended : "-");
    if (cli_job_errors(doc)) {
        printf("errors (first 20):\n");
        cli_job_errors_print(stdout, doc);
    }
}

static void print_job_table(const json_t *doc, const char *bucket)
{
    const json_t *jobs = json_object_get(doc, "jobs");
    const json_t *e;
    size_t i;
    if (json_array_size(jobs) == 0) {
        printf("no prefetch jobs in %s\n", bucket);
        return;
    }
    int idw = 3;
    json_array_foreach(jobs, i, e) {
        struct cli_job j;
        if (cli_job_parse(e, &j) && (int)strlen(j.id) > idw)
            idw = (int)strlen(j.id);
    }
    printf("%-*s  %-9s %9s %8s %8s %7s  %-21s %5s  %-24s  %s\n", idw, "JOB", "STATE",
           "OBJECTS", "CACHED", "STAGED", "FAILED", "BYTES", "EPOCH", "CREATED", "CONSUMER");
    json_array_foreach(jobs, i, e) {
        struct cli_job j;
        char b1[32], b2[32], bytes[72], ep[24];
        if (!cli_job_parse(e, &j))
            continue;
        cli_fmt_bytes(j.bytes_done, b1, sizeof b1);
        cli_fmt_bytes(cli_job_bytes_to_stage(&j), b2, sizeof b2);
        snprintf(bytes, sizeof bytes, "%s/%s", b1, b2);
        if (j.has_epoch)
            snprintf(ep, sizeof ep, "%.0f", j.epoch);
        else
            strcpy(ep, "-");
        printf("%-*s  %-9s %9.0f %8.0f %8.0f %7.0f  %-21s %5s  %-24s  %s\n", idw, j.id,
               j.state, j.total, j.cached, j.staged, j.failed, bytes, ep,
               j.created[0] ? j.created : "-", j.consumer[0] ? j.consumer : "-");
    }
}

int cli_jobs(int argc, char **argv)
{
    enum { O_JOB = CLI_O_OWN, O_CANCEL };
    static const struct option opts[] = {
        CLI_OPT_ENDPOINT,
        { "job", required_argument, NULL, O_JOB },
        { "cancel", required_argument, NULL, O_CANCEL },
        CLI_OPT_SIGNED_END,
    };
    struct cli_common cm = { 0 };
    const char *job = NULL, *cancel = NULL;
    int o, stop;

    cli_getopt_reset();
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (o == O_JOB)
            job = optarg;
        else if (o == O_CANCEL)
            cancel = optarg;
        else if ((stop = cli_common_opt(o, jobs_usage, &cm)) >= 0)
            return stop;
    }
    if (argc - optind != 1) {
        fprintf(stderr, "shardgate jobs: expected one s3://BUCKET argument\n%s", jobs_usage);
        return CLI_EXIT_USAGE;
    }
    if (job && cancel) {
        fprintf(stderr, "shardgate jobs: give --job or --cancel, not both\n");
        return CLI_EXIT_USAGE;
    }
    if ((job && !*job) || (cancel && !*cancel)) {
        fprintf(stderr, "shardgate jobs: empty job id\n");
        return CLI_EXIT_USAGE;
    }
    const char *url = argv[optind];
    char bucket[256];
    const char *rest;
    if (!cli_s3_url_parse(url, bucket, sizeof bucket, &rest) || *rest) {
        fprintf(stderr, "shardgate jobs: expected s3://BUCKET, not '%s'\n", url);
        return CLI_EXIT_USAGE;
    }
    struct cli_target t;
    int rc = cli_target_resolve("jobs", cm.endpoint, cm.region, NULL, true, &t);
    if (rc != CLI_EXIT_OK)
        return rc;

    struct sg_buf q;
    const char *id = job ? job : cancel;
    struct cli_conn c;
    if (!cli_job_query(&q, id)) {
        fprintf(stderr, "shardgate jobs: out of memory\n");
        rc = CLI_EXIT_GATEWAY;
    } else {
        rc = cli_conn_open_bucket("jobs", &t, bucket, &c);
    }
    if (rc != CLI_EXIT_OK) {
        sg_buf_free(&q);
        return rc;
    }
    struct cli_answer a = { 0 };
    int tr = cli_request(&c, cancel ? "DELETE" : "GET", q.p, NULL, 0, &a);
    json_t *doc = tr == 0 ? cli_answer_json(&a) : NULL;
    if (tr != 0 || a.status < 200 || a.status > 299)
        rc = cli_report_failure("jobs", &a, tr);
    else if (!doc)
        rc = cli_report_malformed("jobs", &a);
    else if (cm.json)
        printf("%s\n", a.body.p);
    else if (id)
        print_job_detail(doc);
    else
        print_job_table(doc, bucket);
    json_decref(doc);
    sg_buf_free(&q);
    cli_answer_free(&a);
    cli_conn_close(&c);
    return rc;
}
