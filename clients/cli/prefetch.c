/* clients/cli/prefetch.c - `shardgate prefetch`: builds one hint (a key
 * list, a prefix or a WebDataset template; cache/HINTS.md) with jansson,
 * sends it, and with --wait follows the job until it ends, drawing a
 * progress line on a terminal or printing one now and then elsewhere. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_int.h"
#include "conf.h"

#define POLL_NS 500000000L          /* --wait polls every 0.5 s */
#define PLAIN_EVERY_S 2.0           /* a non-terminal gets a line at most every 2 s */
#define POLL_RETRIES 5              /* transport failures in a row while waiting */

static const char prefetch_usage[] =
    "usage: shardgate prefetch --endpoint URL s3://BUCKET/PREFIX-OR-TEMPLATE [options]\n"
    "       shardgate prefetch --endpoint URL s3://BUCKET --keys-file FILE [options]\n"
    "\n"
    "Asks the gateway to stage objects into its cache ahead of the readers. The part\n"
    "after the bucket is a WebDataset-style template when it contains '{'\n"
    "(train/shard-{000000..001023}.tar; quote it so the shell leaves the braces alone),\n"
    "else a key prefix (empty: the whole bucket).\n"
    "\n"
    "  --endpoint URL        the gateway (default $SHARDGATE_ENDPOINT)\n"
    "  --keys-file FILE      the keys to stage, one per line, in reading order ('-': stdin)\n"
    "  --ordered             the reader reads the objects in this order\n"
    "  --epoch N             epoch number (shown in the job listing)\n"
    "  --consumer NAME       who reads them, e.g. rank0 (at most 128 bytes)\n"
    "  --window-bytes SIZE   ordered: stay at most SIZE ahead of the reader (e.g. 8GiB)\n"
    "  --window-objects N    ordered: ... and at most N objects ahead\n"
    "  --pin                 keep staged objects out of eviction while the job is active\n"
    "  --wait                follow the job until it ends, showing progress (on a\n"
    "                        terminal one line, as wide as the terminal or $COLUMNS)\n"
    "  --json                print the gateway's JSON answer instead of a summary\n"
    "  --region NAME         signing region (default $AWS_REGION, else us-east-1)\n"
    "\n"
    "Credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (AWS_SESSION_TOKEN), else\n"
    "SHARDGATE_ACCESS_KEY / SHARDGATE_SECRET_KEY.\n"
    "Exit status:\n"
    "  0    the hint was accepted; with --wait: every object is staged or was cached\n"
    "  1    with --wait: some objects could not be staged (listed on stderr),\n"
    "       or the job failed or was cancelled\n"
    "  2    usage error (options, arguments, key file, credentials)\n"
    "  3    the gateway refused the request (its S3 error is shown) or could not be\n"
    "       reached\n"
    "  130  interrupted while waiting (the job goes on in the gateway)\n";

static void on_sigint(int sig)
{
    (void)sig;
    cli_interrupted = 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Redraws the progress line over the previous one (padding out what is left
 * of a longer previous line). */
static void draw(const struct cli_job *j, size_t *prev_len)
{
    char line[512];
    /* the last column stays free: a line that fills it wraps on some terminals */
    size_t cols = cli_term_width(STDOUT_FILENO) - 1;
    cli_progress_line(j, (unsigned)cols, true, line, sizeof line);
    size_t len = strlen(line);
    size_t pad = *prev_len < cols ? *prev_len : cols;
    printf("\r%s%*s", line, pad > len ? (int)(pad - len) : 0, "");
    fflush(stdout);
    *prev_len = len;
}

/* The end of a job: summary, the objects that failed; the exit code. */
static int job_end(const struct cli_job *j, const json_t *doc, bool json, double t0)
{
    if (!json) {
        char b[32];
        cli_fmt_bytes(j->bytes_done, b, sizeof b);
        printf("job %s %s: %.0f objects (cached %.0f, staged %.0f, failed %.0f), %s staged in "
               "%.1f s\n",
               j->id, j->state, j->total, j->cached, j->staged, j->failed, b, now_s() - t0);
        fflush(stdout);
    }
    if (j->failed > 0 || strcmp(j->state, "failed") == 0) {
        if (cli_job_errors(doc))
            fprintf(stderr, "objects that could not be staged (first 20):\n");
        cli_job_errors_print(stderr, doc);
    }
    if (strcmp(j->state, "done") != 0)
        return CLI_EXIT_FAILED;
    if (j->failed > 0) {
        fprintf(stderr, "shardgate prefetch: %.0f of %.0f objects could not be staged\n",
                j->failed, j->total);
        return CLI_EXIT_FAILED;
    }
    return CLI_EXIT_OK;
}

/* Polls the job until it is final; returns the exit code. */
static int wait_job(struct cli_conn *c, const char *bucket, const char *id, bool json)
{
    struct sg_buf q;
    struct cli_answer a = { 0 };
    bool tty = isatty(STDOUT_FILENO) && !json;
    size_t prev_len = 0;
    double t0 = now_s(), last_print = -1e9;
    char last[512] = "";
    int fails = 0, rc = CLI_EXIT_GATEWAY;
    struct sigaction sa = { .sa_handler = on_sigint }, old_int;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);

    if (!cli_job_query(&q, id)) {
        fprintf(stderr, "shardgate prefetch: out of memory\n");
        goto out;
    }
    for (;;) {
        int tr = cli_request(c, "GET", q.p, NULL, 0, &a);
        if (cli_interrupted)
            break;
        json_t *doc = tr == 0 ? cli_answer_json(&a) : NULL;
        struct cli_job j;
        if (tr != 0 && ++fails < POLL_RETRIES) {
            /* a gateway restart or a dropped connection: try again shortly */
        } else if (!doc || !cli_job_parse(doc, &j)) {
            if (tty && prev_len)
                putchar('\n');
            fflush(stdout);
            if (tr != 0 || a.status < 200 || a.status > 299)
                cli_report_failure("prefetch", &a, tr);
            else if (!doc)
                cli_report_malformed("prefetch", &a);
            else
                fprintf(stderr, "shardgate prefetch: malformed job in the gateway's answer\n");
            json_decref(doc);
            goto out;
        } else {
            fails = 0;
            bool fin = cli_job_final(&j);
            if (json) {
                if (fin)
                    printf("%s\n", a.body.p);
            } else if (tty) {
                draw(&j, &prev_len);
            } else {
                char line[512];
                cli_progress_line(&j, cli_term_width(STDOUT_FILENO), false, line, sizeof line);
                double t = now_s();
                if (fin || (strcmp(line, last) != 0 && t - last_print >= PLAIN_EVERY_S)) {
                    printf("%s\n", line);
                    fflush(stdout);
                    snprintf(last, sizeof last, "%s", line);
                    last_print = t;
                }
            }
            if (fin) {
                if (tty)
                    putchar('\n');
                rc = job_end(&j, doc, json, t0);
                json_decref(doc);
                goto out;
            }
        }
        json_decref(doc);
        struct timespec ts = { 0, POLL_NS };
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !cli_interrupted)
            ;
        if (cli_interrupted)
            break;
    }
    /* interrupted: the job goes on in the gateway */
    if (tty && prev_len)
        putchar('\n');
    fflush(stdout);
    fprintf(stderr, "shardgate prefetch: stopped waiting; job %s continues in the gateway "
            "(cancel it with: shardgate jobs --endpoint ... s3://%s --cancel %s)\n",
            id, bucket, id);
    rc = CLI_EXIT_INTERRUPTED;
out:
    sigaction(SIGINT, &old_int, NULL);
    sg_buf_free(&q);
    cli_answer_free(&a);
    return rc;
}

/* Reads the keys (one per line, empty lines skipped) into a JSON array.
 * Returns 0, or an exit code after printing why. */
static int keys_read(const char *path, json_t **out)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) {
        int err = errno;
        fprintf(stderr, "shardgate prefetch: cannot open %s: %s\n", path, strerror(err));
        return CLI_EXIT_USAGE;
    }
    json_t *keys = json_array();
    char *line = NULL;
    size_t cap = 0, lineno = 0, est = 0;
    ssize_t n;
    int rc = keys ? 0 : CLI_EXIT_GATEWAY;
    errno = 0;
    while (rc == 0 && (n = getline(&line, &cap, f)) >= 0) {
        size_t l = (size_t)n;
        lineno++;
        while (l > 0 && (line[l - 1] == '\n' || line[l - 1] == '\r'))
            l--;
        if (l == 0)
            continue;
        /* the body's size from below (quotes and a comma per key): stop
         * reading a file that cannot fit in one hint */
        est += l + 3;
        if (est > CLI_BODY_MAX) {
            fprintf(stderr, "shardgate prefetch: the key list in %s is too large: a hint "
                    "body is at most %zu MiB (split it into several hints)\n", path,
                    CLI_BODY_MAX >> 20);
            rc = CLI_EXIT_USAGE;
            break;
        }
        json_t *k = json_stringn(line, l);
        if (!k) {
            fprintf(stderr, "shardgate prefetch: line %zu of %s is not valid UTF-8 (S3 keys "
                    "are UTF-8)\n", lineno, path);
            rc = CLI_EXIT_USAGE;
        } else if (json_array_append_new(keys, k) != 0) {
            fprintf(stderr, "shardgate prefetch: out of memory\n");
            rc = CLI_EXIT_GATEWAY;
        }
    }
    if (rc == 0 && ferror(f)) {
        int err = errno;
        fprintf(stderr, "shardgate prefetch: cannot read %s: %s\n", path, strerror(err));
        rc = CLI_EXIT_USAGE;
    }
    free(line);
    if (f != stdin)
        fclose(f);
    if (rc != 0)
        json_decref(keys);
    else
        *out = keys;
    return rc;
}

/* What the user asked for, from the options. */
struct hint_opts {
    const char *keys_file, *source, *consumer;   /* source: prefix or template */
    bool ordered, pin, has_epoch, has_wb, has_wo;
    uint64_t epoch, wbytes, wobj;
};

/* The hint's JSON body (cache/HINTS.md) as a new string; NULL after
 * printing why, with *rc set. */
static char *hint_body(const struct hint_opts *h, size_t *len, int *rc)
{
    json_t *hint = json_object();
    json_t *src = NULL;
    char *s = NULL;
    *rc = CLI_EXIT_GATEWAY;
    if (!hint)
        goto nomem;
    if (h->keys_file) {
        *rc = keys_read(h->keys_file, &src);
        if (*rc != 0)
            goto out;
    } else if (!(src = json_string(h->source))) {
        fprintf(stderr, "shardgate prefetch: the prefix or template is not valid UTF-8\n");
        *rc = CLI_EXIT_USAGE;
        goto out;
    }
    const char *what = h->keys_file ? "keys" : strchr(h->source, '{') ? "template" : "prefix";
    int bad = json_object_set_new(hint, what, src);
    if (h->ordered)
        bad |= json_object_set_new(hint, "ordered", json_true());
    if (h->has_epoch)
        bad |= json_object_set_new(hint, "epoch", json_integer((json_int_t)h->epoch));
    if (h->consumer) {
        json_t *c = json_string(h->consumer);
        if (!c) {
            fprintf(stderr, "shardgate prefetch: --consumer is not valid UTF-8\n");
            *rc = CLI_EXIT_USAGE;
            goto out;
        }
        bad |= json_object_set_new(hint, "consumer", c);
    }
    if (h->has_wb)
        bad |= json_object_set_new(hint, "window_bytes", json_integer((json_int_t)h->wbytes));
    if (h->has_wo)
        bad |= json_object_set_new(hint, "window_objects", json_integer((json_int_t)h->wobj));
    if (h->pin)
        bad |= json_object_set_new(hint, "pin", json_true());
    if (bad || !(s = json_dumps(hint, JSON_COMPACT)))
        goto nomem;
    *len = strlen(s);
    if (*len > CLI_BODY_MAX) {
        fprintf(stderr, "shardgate prefetch: the hint is larger than %zu MiB\n",
                CLI_BODY_MAX >> 20);
        free(s);
        s = NULL;
        *rc = CLI_EXIT_USAGE;
        goto out;
    }
    *rc = CLI_EXIT_OK;
    goto out;
nomem:
    fprintf(stderr, "shardgate prefetch: out of memory\n");
out:
    json_decref(hint);
    return s;
}

/* A window (--window-bytes, --window-objects) is at least 1; at most 2^53
 * keeps the hint's JSON number exact for readers that hold numbers as
 * doubles. */
static bool window_ok(uint64_t v)
{
    return v != 0 && v <= ((uint64_t)1 << 53);
}

/* An option's value the command does not take: says what it takes. */
static int bad_value(const char *opt, const char *takes, const char *val)
{
    fprintf(stderr, "shardgate prefetch: %s takes %s, not '%s'\n", opt, takes, val);
    return CLI_EXIT_USAGE;
}

int cli_prefetch(int argc, char **argv)
{
    enum { O_KEYS = CLI_O_OWN, O_ORDERED, O_EPOCH, O_CONSUMER, O_WBYTES, O_WOBJ, O_PIN,
           O_WAIT };
    static const struct option opts[] = {
        CLI_OPT_ENDPOINT,
        { "keys-file", required_argument, NULL, O_KEYS },
        { "ordered", no_argument, NULL, O_ORDERED },
        { "epoch", required_argument, NULL, O_EPOCH },
        { "consumer", required_argument, NULL, O_CONSUMER },
        { "window-bytes", required_argument, NULL, O_WBYTES },
        { "window-objects", required_argument, NULL, O_WOBJ },
        { "pin", no_argument, NULL, O_PIN },
        { "wait", no_argument, NULL, O_WAIT },
        CLI_OPT_SIGNED_END,
    };
    struct hint_opts h = { 0 };
    struct cli_common cm = { 0 };
    bool wait = false;
    int o, stop;

    cli_getopt_reset();
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case O_KEYS: h.keys_file = optarg; break;
        case O_ORDERED: h.ordered = true; break;
        case O_CONSUMER: h.consumer = optarg; break;
        case O_PIN: h.pin = true; break;
        case O_WAIT: wait = true; break;
        case O_EPOCH:
            if (!cli_u64_parse(optarg, &h.epoch) || h.epoch > (uint64_t)INT64_MAX)
                return bad_value("--epoch", "an integer >= 0", optarg);
            h.has_epoch = true;
            break;
        case O_WBYTES:
            if (conf_size_parse(optarg, &h.wbytes) != 0 || !window_ok(h.wbytes))
                return bad_value("--window-bytes",
                                 "a size such as 1073741824, 512MiB or 8GiB", optarg);
            h.has_wb = true;
            break;
        case O_WOBJ:
            if (!cli_u64_parse(optarg, &h.wobj) || !window_ok(h.wobj))
                return bad_value("--window-objects", "an integer >= 1", optarg);
            h.has_wo = true;
            break;
        default:
            if ((stop = cli_common_opt(o, prefetch_usage, &cm)) >= 0)
                return stop;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "shardgate prefetch: missing s3://BUCKET/... argument\n%s",
                prefetch_usage);
        return CLI_EXIT_USAGE;
    }
    if (argc - optind > 1) {
        fprintf(stderr, "shardgate prefetch: one s3:// argument expected, got %d%s\n",
                argc - optind, strncmp(argv[optind + 1], "s3://", 5) == 0
                ? " (quote a template: the shell expands {a..b} itself)" : "");
        return CLI_EXIT_USAGE;
    }
    const char *url = argv[optind];
    char bucket[256];
    if (!cli_s3_url_parse(url, bucket, sizeof bucket, &h.source)) {
        fprintf(stderr, "shardgate prefetch: expected s3://BUCKET/PREFIX-OR-TEMPLATE, "
                "not '%s'\n", url);
        return CLI_EXIT_USAGE;
    }
    if (h.keys_file && *h.source) {
        fprintf(stderr, "shardgate prefetch: give either --keys-file or a prefix/template "
                "after the bucket, not both\n");
        return CLI_EXIT_USAGE;
    }
    struct cli_target t;
    int rc = cli_target_resolve("prefetch", cm.endpoint, cm.region, NULL, true, &t);
    if (rc != CLI_EXIT_OK)
        return rc;
    size_t body_len = 0;
    char *body = hint_body(&h, &body_len, &rc);
    if (!body)
        return rc;

    struct cli_conn c;
    rc = cli_conn_open_bucket("prefetch", &t, bucket, &c);
    if (rc != CLI_EXIT_OK) {
        free(body);
        return rc;
    }
    struct cli_answer a = { 0 };
    int tr = cli_request(&c, "POST", "prefetch=", body, body_len, &a);
    json_t *doc = tr == 0 ? cli_answer_json(&a) : NULL;
    struct cli_job j;
    if (tr != 0 || a.status < 200 || a.status > 299) {
        rc = cli_report_failure("prefetch", &a, tr);
    } else if (!doc || !cli_job_parse(doc, &j)) {
        rc = cli_report_malformed("prefetch", &a);
    } else {
        if (cm.json && !wait)
            printf("%s\n", a.body.p);
        else if (!cm.json)
            printf("job %s %s: %.0f objects in %s\n", j.id, j.state, j.total,
                   j.bucket[0] ? j.bucket : bucket);
        fflush(stdout);
        rc = wait ? wait_job(&c, bucket, j.id, cm.json) : CLI_EXIT_OK;
    }
    json_decref(doc);
    cli_answer_free(&a);
    free(body);
    cli_conn_close(&c);
    return rc;
}
