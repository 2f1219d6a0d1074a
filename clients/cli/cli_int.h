/* clients/cli/cli_int.h - what the client commands share: exit codes, the
 * options every command takes (args.c), one HTTP request at a time
 * (http.c), reading the gateway's answers (answer.c), a prefetch job as
 * the commands see it (job.c) and the progress line (progress.c). Only
 * clients/cli/ and its unit tests include this. */
#ifndef SHARDGATE_CLI_INT_H
#define SHARDGATE_CLI_INT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <curl/curl.h>
#include <jansson.h>

#include "buf.h"

enum cli_exit {
    CLI_EXIT_OK = 0,
    CLI_EXIT_FAILED = 1,        /* objects not staged, job failed/cancelled, not healthy */
    CLI_EXIT_USAGE = 2,
    CLI_EXIT_GATEWAY = 3,       /* the gateway refused the request or could not be reached */
    CLI_EXIT_INTERRUPTED = 130,
};

/* The gateway refuses hint bodies over 16 MiB (HINTS.md): refusing them here
 * saves sending them. Answers are small JSON documents; 8 MiB is far more
 * than a bucket's job list with 20 errors per job needs. */
#define CLI_BODY_MAX ((size_t)16 << 20)
#define CLI_ANSWER_MAX ((size_t)8 << 20)

/* Set by SIGINT while `prefetch --wait` polls; ends a request in flight too. */
extern volatile sig_atomic_t cli_interrupted;

/* ---------------------------------------------------------------- options (args.c) */

/* Where to send requests and as whom. Strings are borrowed from argv and
 * the environment; access == NULL means unsigned requests. */
struct cli_target {
    const char *endpoint;          /* http:// or https:// URL */
    const char *region;
    const char *access, *secret, *token;
    const char *ca;                /* AWS_CA_BUNDLE, or NULL */
};

/* Resolves the endpoint (the option, else $SHARDGATE_ENDPOINT, else
 * default_ep when not NULL), the signing region (the option, $AWS_REGION,
 * $AWS_DEFAULT_REGION, us-east-1) and, when want_creds, the credentials
 * (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, else
 * SHARDGATE_ACCESS_KEY / SHARDGATE_SECRET_KEY). Prints why and returns
 * CLI_EXIT_USAGE when something is missing or malformed, else CLI_EXIT_OK. */
int cli_target_resolve(const char *cmd, const char *endpoint_opt, const char *region_opt,
                       const char *default_ep, bool want_creds, struct cli_target *t);

/* Splits s3://bucket[/rest]: the bucket into out (NUL-terminated), *rest
 * points after the first '/' (or at ""). Returns false when it is not such
 * a URL or the bucket does not fit in n bytes. */
bool cli_s3_url_parse(const char *u, char *bucket, size_t n, const char **rest);

/* A decimal integer >= 0 with nothing after it. */
bool cli_u64_parse(const char *s, uint64_t *out);

/* The options the commands share: a command lists those it takes in its
 * getopt_long table (CLI_OPT_* entries, values CLI_O_*), numbers its own
 * from CLI_O_OWN, and hands every value it does not know to cli_common_opt. */
enum { CLI_O_ENDPOINT = 256, CLI_O_REGION, CLI_O_JSON, CLI_O_HELP, CLI_O_OWN };
#define CLI_OPT_ENDPOINT { "endpoint", required_argument, NULL, CLI_O_ENDPOINT }
#define CLI_OPT_REGION { "region", required_argument, NULL, CLI_O_REGION }
#define CLI_OPT_JSON { "json", no_argument, NULL, CLI_O_JSON }
#define CLI_OPT_HELP { "help", no_argument, NULL, CLI_O_HELP }
/* The tail of a table: --help and the terminator; a command that signs its
 * requests ends with CLI_OPT_SIGNED_END (--region and --json too). */
#define CLI_OPT_END CLI_OPT_HELP, { NULL, 0, NULL, 0 }
#define CLI_OPT_SIGNED_END CLI_OPT_REGION, CLI_OPT_JSON, CLI_OPT_END
struct cli_common {
    const char *endpoint, *region;   /* borrowed from argv; NULL: not given */
    bool json;
};

/* Makes getopt_long start again at argv[1] (each command parses its own). */
void cli_getopt_reset(void);
/* Takes option value o (from getopt_long) into *c when it is a shared one
 * and returns -1: parsing goes on. Otherwise the command stops with the
 * code returned: --help/-h print usage to stdout (CLI_EXIT_OK), anything
 * else is an unknown option (usage to stderr, CLI_EXIT_USAGE). */
int cli_common_opt(int o, const char *usage, struct cli_common *c);

/* ---------------------------------------------------------------- HTTP (http.c) */

/* One keep-alive connection to the gateway: requests go to
 * endpoint + path (+ "?" + query). */
struct cli_conn {
    CURL *curl;
    char *url;                 /* endpoint (no trailing '/') + encoded path; owned */
    struct cli_target t;       /* copied; strings borrowed */
    char sigv4[96];
    long connect_timeout_ms, timeout_ms;
};

struct cli_answer {
    long status;
    struct sg_buf body;
    char err[CURL_ERROR_SIZE];
};

/* Opens c for path (already encoded, starting with '/'), e.g. "/bucket"
 * or "/_shardgate/health". Timeouts: 10 s to connect, 300 s per request
 * (change them in c afterwards). Prints why and returns CLI_EXIT_GATEWAY
 * when libcurl cannot start; else CLI_EXIT_OK. */
int cli_conn_open(const char *cmd, const struct cli_target *t, const char *path,
                  struct cli_conn *c);
/* cli_conn_open for "/BUCKET" (encoded here); CLI_EXIT_GATEWAY, after
 * saying so, when out of memory. */
int cli_conn_open_bucket(const char *cmd, const struct cli_target *t, const char *bucket,
                         struct cli_conn *c);
void cli_conn_close(struct cli_conn *c);

/* One request on c (the connection is kept between calls). `query` must be
 * canonical (sorted, encoded, "name=" for a bare name) or NULL: curl 7.x
 * signs the query exactly as written. A body is sent as application/json.
 * Returns 0 when an HTTP answer arrived (any status: a->status, a->body),
 * -1 otherwise with the reason in a->err. a->body is reset here; free it
 * with cli_answer_free. */
int cli_request(struct cli_conn *c, const char *method, const char *query, const char *body,
                size_t body_len, struct cli_answer *a);
void cli_answer_free(struct cli_answer *a);

/* ---------------------------------------------------------------- answers (answer.c) */

/* The 2xx answer's body as one JSON object or array (jansson), or NULL when
 * it is anything else. Returns a new reference. */
json_t *cli_answer_json(const struct cli_answer *a);

/* Reads an S3 <Error> document (libxml2): its Code and Message, control
 * characters shown as '?'. Returns false when body is not one. */
bool cli_s3_error_parse(const char *body, size_t len, char *code, size_t code_n, char *msg,
                        size_t msg_n);

/* Prints why a request failed (transport_rc from cli_request, else the
 * gateway's S3 error or the start of its answer) as "shardgate CMD: ...";
 * returns CLI_EXIT_GATEWAY. */
int cli_report_failure(const char *cmd, const struct cli_answer *a, int transport_rc);

/* For a 2xx answer that is not the JSON the contract promises; returns
 * CLI_EXIT_GATEWAY. An older shardgate answers GET ?prefetch with a listing. */
int cli_report_malformed(const char *cmd, const struct cli_answer *a);

/* Copies a string for a terminal: control characters become '?', at most
 * n-1 bytes, never cutting a UTF-8 sequence. s may be NULL (gives ""). */
void cli_term_copy(const char *s, char *out, size_t n);

/* ---------------------------------------------------------------- jobs (job.c) */

struct cli_job {
    char id[128], bucket[80], state[16], consumer[160], created[40], ended[40];
    bool ordered, has_epoch, has_rate, has_eta, has_position;
    double epoch, position, rate, eta;
    double total, cached, staged, failed, pending;   /* objects */
    double bytes_total, bytes_done, bytes_cached;   /* done: staged by the job */
};

/* Reads a job object (or the POST answer, whose "objects" is a plain count).
 * Returns false when v is not an object with a "job" id. */
bool cli_job_parse(const json_t *v, struct cli_job *j);
bool cli_job_final(const struct cli_job *j);
/* The bytes the job has to stage: its total less what was cached without it
 * (the figure bytes_done, the staged bytes, grows towards). */
double cli_job_bytes_to_stage(const struct cli_job *j);
/* The number of entries in the job's "errors" array. */
size_t cli_job_errors(const json_t *job);
/* Prints "  key: code" for each entry of the job's "errors" array. */
void cli_job_errors_print(FILE *f, const json_t *job);
/* Initialises q with the canonical query for a bucket's jobs ("prefetch=")
 * or one job ("job=ID&prefetch=": sorted, encoded). False when out of
 * memory; free q with sg_buf_free either way. */
bool cli_job_query(struct sg_buf *q, const char *id);

/* ---------------------------------------------------------------- progress (progress.c) */

/* 1.2 GiB: sizes in powers of 1024. */
void cli_fmt_bytes(double v, char *out, size_t n);
/* 512 MB/s: rates in powers of 1000, as disks and links are quoted. */
void cli_fmt_rate(double v, char *out, size_t n);

/* The width of the terminal on fd: TIOCGWINSZ, else $COLUMNS, else 80. */
unsigned cli_term_width(int fd);

/* One progress line of at most `cols` characters (and n-1 bytes), the most
 * useful first: the object counters, then bytes, rate and ETA (while the
 * gateway has them), then - with `bar` and only when there is room - a bar
 * and the percentage. Narrower lines drop the cached/staged detail, then
 * ETA, rate and bytes. */
void cli_progress_line(const struct cli_job *j, unsigned cols, bool bar, char *out, size_t n);

#endif
