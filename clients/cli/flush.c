/* clients/cli/flush.c - `shardgate flush`: the write-back barrier from a
 * shell or a training script. Without --wait it shows what is pending
 * (GET /BUCKET?writeback); with --wait it asks the gateway to flush
 * (POST /BUCKET?flush, a few seconds at a time, so the progress line moves
 * and Ctrl-C answers at once) until everything acknowledged before the
 * command started is in the cold tier. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_int.h"

#define FLUSH_STEP_S 2   /* each POST waits at most this long in the gateway */

static const char flush_usage[] =
    "usage: shardgate flush [--endpoint URL] [--wait] [--timeout SECONDS] [--json]\n"
    "                       s3://BUCKET[/PREFIX]\n"
    "\n"
    "Shows what a write-back bucket still has to upload to the cold tier or, with\n"
    "--wait, waits until every write acknowledged before the command started (under\n"
    "PREFIX) is there, with a progress line on a terminal.\n"
    "\n"
    "  --endpoint URL     the gateway (default $SHARDGATE_ENDPOINT)\n"
    "  --wait             wait for the upload (the barrier for \"in the cold tier\")\n"
    "  --timeout SECONDS  with --wait: give up after this long (default: no limit)\n"
    "  --region R         signing region (default $AWS_REGION, else us-east-1)\n"
    "  --json             print the gateway's last answer as JSON\n"
    "\n"
    "Credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or SHARDGATE_*).\n"
    "Exit status: 0 nothing pending (with --wait: flushed); 1 writes still pending\n"
    "(without --wait, or at --timeout); 2 usage error; 3 the gateway refused the\n"
    "request or could not be reached; 130 interrupted (the uploads go on).\n";

struct pending {
    double objects, bytes, uploaded_bytes, failures;
    char last_error[256];
    bool flushed;
};

static bool pending_parse(const json_t *doc, struct pending *p)
{
    memset(p, 0, sizeof *p);
    const json_t *pend = json_object_get(doc, "pending");
    const json_t *up = json_object_get(doc, "uploaded");
    if (!json_is_object(pend) || !json_is_object(up))
        return false;
    p->objects = json_number_value(json_object_get(pend, "objects"));
    p->bytes = json_number_value(json_object_get(pend, "bytes"));
    p->uploaded_bytes = json_number_value(json_object_get(up, "bytes"));
    p->failures = json_number_value(json_object_get(doc, "upload_failures"));
    p->flushed = json_is_true(json_object_get(doc, "flushed"));
    const json_t *le = json_object_get(doc, "last_error");
    cli_term_copy(json_is_string(le) ? json_string_value(le) : "", p->last_error,
                  sizeof p->last_error);
    return true;
}

static void on_sigint(int sig)
{
    (void)sig;
    cli_interrupted = 1;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* "pending 12 objects 1.2 GiB, uploading 180 MB/s" */
static void describe(const struct pending *p, double rate, char *out, size_t n)
{
    char b[32], r[32];
    cli_fmt_bytes(p->bytes, b, sizeof b);
    cli_fmt_rate(rate, r, sizeof r);
    int k = snprintf(out, n, "pending %.0f object%s %s", p->objects, p->objects == 1 ? "" : "s",
                     b);
    if (k > 0 && (size_t)k < n && rate > 0)
        snprintf(out + k, n - (size_t)k, ", uploading %s", r);
}

/* The canonical query (names sorted): barrier=N&flush=&prefix=P&timeout=S,
 * or prefix=P&writeback= for the status. barrier 0: none yet. */
static bool query_of(struct sg_buf *q, bool flush, const char *prefix, unsigned step_s,
                     uint64_t barrier)
{
    sg_buf_init(q, 8192);
    bool ok = true;
    if (flush && barrier) {
        char bq[48];
        snprintf(bq, sizeof bq, "barrier=%llu&", (unsigned long long)barrier);
        ok = sg_buf_adds(q, bq);
    }
    if (flush)
        ok = ok && sg_buf_adds(q, "flush=");
    if (*prefix) {
        ok = ok && sg_buf_adds(q, flush ? "&prefix=" : "prefix=") &&
             sg_buf_add_uri(q, prefix, strlen(prefix), false);
    }
    if (flush) {
        char t[32];
        snprintf(t, sizeof t, "&timeout=%u", step_s);
        ok = ok && sg_buf_adds(q, t);
    } else {
        ok = ok && sg_buf_adds(q, *prefix ? "&writeback=" : "writeback=");
    }
    return ok && sg_buf_addc(q, '\0');
}

int cli_flush(int argc, char **argv)
{
    enum { O_WAIT = CLI_O_OWN, O_TIMEOUT };
    static const struct option opts[] = {
        CLI_OPT_ENDPOINT,
        { "wait", no_argument, NULL, O_WAIT },
        { "timeout", required_argument, NULL, O_TIMEOUT },
        CLI_OPT_SIGNED_END,
    };
    struct cli_common cm = { 0 };
    bool wait = false;
    uint64_t timeout_s = 0;
    int o, stop;

    cli_getopt_reset();
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (o == O_WAIT) {
            wait = true;
        } else if (o == O_TIMEOUT) {
            if (!cli_u64_parse(optarg, &timeout_s) || timeout_s == 0 || timeout_s > 86400) {
                fprintf(stderr, "shardgate flush: --timeout takes whole seconds from 1 to "
                        "86400, not '%s'\n", optarg);
                return CLI_EXIT_USAGE;
            }
        } else if ((stop = cli_common_opt(o, flush_usage, &cm)) >= 0) {
            return stop;
        }
    }
    if (argc - optind != 1) {
        fprintf(stderr, "shardgate flush: expected one s3://BUCKET[/PREFIX] argument\n%s",
                flush_usage);
        return CLI_EXIT_USAGE;
    }
    char bucket[256];
    const char *prefix;
    if (!cli_s3_url_parse(argv[optind], bucket, sizeof bucket, &prefix)) {
        fprintf(stderr, "shardgate flush: expected s3://BUCKET[/PREFIX], not '%s'\n",
                argv[optind]);
        return CLI_EXIT_USAGE;
    }
    struct cli_target t;
    int rc = cli_target_resolve("flush", cm.endpoint, cm.region, NULL, true, &t);
    if (rc != CLI_EXIT_OK)
        return rc;
    struct cli_conn c;
    if (cli_conn_open_bucket("flush", &t, bucket, &c) != CLI_EXIT_OK)
        return CLI_EXIT_GATEWAY;
    c.timeout_ms = (FLUSH_STEP_S + 30) * 1000L;

    struct sg_buf q = { 0 };
    uint64_t barrier = 0;   /* the first POST's: later ones wait for the same writes */
    struct sigaction sa = { .sa_handler = on_sigint }, old_int;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    bool tty = !cm.json && isatty(STDERR_FILENO);
    double t0 = now_s(), first_uploaded = -1;
    size_t drawn = 0;
    json_t *doc = NULL;
    struct pending p;
    rc = CLI_EXIT_GATEWAY;
    for (;;) {
        sg_buf_free(&q);
        if (!query_of(&q, wait, prefix, FLUSH_STEP_S, barrier)) {
            fprintf(stderr, "shardgate flush: out of memory\n");
            rc = CLI_EXIT_GATEWAY;
            break;
        }
        struct cli_answer a = { 0 };
        int tr = cli_request(&c, wait ? "POST" : "GET", (const char *)q.p, NULL, 0, &a);
        if (tr != 0 || (a.status != 200 && a.status != 202)) {
            if (drawn)
                fputc('\n', stderr);
            rc = cli_interrupted ? CLI_EXIT_INTERRUPTED : cli_report_failure("flush", &a, tr);
            cli_answer_free(&a);
            break;
        }
        json_decref(doc);
        doc = cli_answer_json(&a);
        bool done = a.status == 200;
        cli_answer_free(&a);
        if (!doc || !pending_parse(doc, &p)) {
            rc = CLI_EXIT_GATEWAY;
            fprintf(stderr, "shardgate flush: the gateway's answer is not the write-back "
                    "status (an older shardgate?)\n");
            break;
        }
        if (!wait) {
            rc = p.objects ? CLI_EXIT_FAILED : CLI_EXIT_OK;
            break;
        }
        if (done) {
            rc = CLI_EXIT_OK;
            break;
        }
        const json_t *bj = json_object_get(doc, "barrier");
        if (!barrier && json_is_integer(bj))
            barrier = (uint64_t)json_integer_value(bj);
        double el = now_s() - t0;
        if (first_uploaded < 0)
            first_uploaded = p.uploaded_bytes;
        if (tty) {
            char line[160];
            describe(&p, el > 0 ? (p.uploaded_bytes - first_uploaded) / el : 0, line,
                     sizeof line);
            fprintf(stderr, "\r%-*s", (int)drawn, line);
            drawn = strlen(line);
        }
        if (cli_interrupted) {
            rc = CLI_EXIT_INTERRUPTED;
            break;
        }
        if (timeout_s && el >= (double)timeout_s) {
            rc = CLI_EXIT_FAILED;
            break;
        }
    }
    if (drawn)
        fputc('\n', stderr);
    if (doc && (rc == CLI_EXIT_OK || rc == CLI_EXIT_FAILED || rc == CLI_EXIT_INTERRUPTED)) {
        if (cm.json) {
            char *s = json_dumps(doc, JSON_COMPACT);
            if (s)
                printf("%s\n", s);
            free(s);
        } else {
            char line[160];
            describe(&p, 0, line, sizeof line);
            if (rc == CLI_EXIT_OK && wait)
                printf("flushed: s3://%s/%s is in the cold tier (%.1f s)\n", bucket, prefix,
                       now_s() - t0);
            else
                printf("%s%s%s\n", line, p.last_error[0] ? "; last upload error: " : "",
                       p.last_error);
        }
    }
    sigaction(SIGINT, &old_int, NULL);
    json_decref(doc);
    sg_buf_free(&q);
    cli_conn_close(&c);
    return rc;
}
