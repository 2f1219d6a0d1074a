/* clients/cli/http.c - one blocking HTTP request at a time to the gateway,
 * on a kept-alive libcurl handle, signed by curl's own SigV4 (the payload
 * hash and the session token go in x-amz-* headers, which curl signs).
 * Plus the capped byte buffer the answers are read into. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "cli_int.h"
#include "sigv4.h"   /* sg_sigv4_sha256_hex: the payload hash */

volatile sig_atomic_t cli_interrupted;

/* ---------------------------------------------------------------- the connection */

int cli_conn_open(const char *cmd, const struct cli_target *t, const char *path,
                  struct cli_conn *c)
{
    memset(c, 0, sizeof *c);
    c->t = *t;
    c->connect_timeout_ms = 10000;
    /* expanding a million-object template takes the gateway a moment */
    c->timeout_ms = 300000;
    snprintf(c->sigv4, sizeof c->sigv4, "aws:amz:%s:s3", t->region ? t->region : "us-east-1");

    struct sg_buf b;
    sg_buf_init(&b, 8192);
    size_t el = strlen(t->endpoint);
    while (el > 0 && t->endpoint[el - 1] == '/')
        el--;
    sg_buf_add(&b, t->endpoint, el);
    sg_buf_adds(&b, path);
    if (b.err) {
        sg_buf_free(&b);
        fprintf(stderr, "shardgate %s: the endpoint URL is too long\n", cmd);
        return CLI_EXIT_USAGE;
    }
    c->url = b.p;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "shardgate %s: cannot initialise libcurl\n", cmd);
        free(c->url);
        c->url = NULL;
        return CLI_EXIT_GATEWAY;
    }
    if (!(c->curl = curl_easy_init())) {
        fprintf(stderr, "shardgate %s: cannot initialise libcurl\n", cmd);
        curl_global_cleanup();
        free(c->url);
        c->url = NULL;
        return CLI_EXIT_GATEWAY;
    }
    return CLI_EXIT_OK;
}

int cli_conn_open_bucket(const char *cmd, const struct cli_target *t, const char *bucket,
                         struct cli_conn *c)
{
    struct sg_buf path;
    sg_buf_init(&path, 1024);
    sg_buf_adds(&path, "/");
    sg_buf_add_uri(&path, bucket, strlen(bucket), false);
    int rc;
    if (path.err) {
        fprintf(stderr, "shardgate %s: out of memory\n", cmd);
        rc = CLI_EXIT_GATEWAY;
    } else {
        rc = cli_conn_open(cmd, t, path.p, c);
    }
    sg_buf_free(&path);
    return rc;
}

void cli_conn_close(struct cli_conn *c)
{
    if (c->curl) {
        curl_easy_cleanup(c->curl);
        curl_global_cleanup();
    }
    free(c->url);
    memset(c, 0, sizeof *c);
}

void cli_answer_free(struct cli_answer *a)
{
    sg_buf_free(&a->body);
}

static size_t write_cb(char *d, size_t size, size_t nmemb, void *ud)
{
    struct sg_buf *b = ud;
    size_t n = size * nmemb;
    return sg_buf_add(b, d, n) ? n : 0;
}

static int xfer_cb(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)ud; (void)dt; (void)dn; (void)ut; (void)un;
    return cli_interrupted ? 1 : 0;     /* Ctrl-C ends a hung request too */
}

/* Appends "name: value" to *list; false (list unchanged) when out of memory. */
static bool header_add(struct curl_slist **list, const char *name, const char *value)
{
    struct sg_buf h;
    sg_buf_init(&h, 16384);
    sg_buf_adds(&h, name);
    sg_buf_adds(&h, ": ");
    sg_buf_adds(&h, value);
    struct curl_slist *l = h.err ? NULL : curl_slist_append(*list, h.p);
    sg_buf_free(&h);
    if (!l)
        return false;
    *list = l;
    return true;
}

int cli_request(struct cli_conn *c, const char *method, const char *query, const char *body,
                size_t body_len, struct cli_answer *a)
{
    struct sg_buf url;
    struct curl_slist *hdrs = NULL;
    bool sign = c->t.access != NULL;
    char sha[65];
    int rc = -1;

    sg_buf_free(&a->body);
    sg_buf_init(&a->body, CLI_ANSWER_MAX);
    a->status = 0;
    a->err[0] = '\0';
    sg_buf_init(&url, 16384);
    sg_buf_adds(&url, c->url);
    if (query) {
        sg_buf_adds(&url, "?");
        sg_buf_adds(&url, query);
    }
    bool ok = !url.err;
    /* S3 wants the payload hash with header auth; curl signs every x-amz-*
     * header it is given, so the hash and the session token are covered */
    if (ok && sign) {
        sg_sigv4_sha256_hex(body ? body : "", body ? body_len : 0, sha);
        ok = header_add(&hdrs, "x-amz-content-sha256", sha);
    }
    if (ok && body)
        ok = header_add(&hdrs, "Content-Type", "application/json");
    if (ok && sign && c->t.token)
        ok = header_add(&hdrs, "x-amz-security-token", c->t.token);
    if (!ok) {
        snprintf(a->err, sizeof a->err, "out of memory");
        goto out;
    }

    CURL *e = c->curl;
    curl_easy_reset(e);       /* keeps the live connection */
    curl_easy_setopt(e, CURLOPT_URL, url.p);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
    if (sign) {
        curl_easy_setopt(e, CURLOPT_AWS_SIGV4, c->sigv4);
        curl_easy_setopt(e, CURLOPT_USERNAME, c->t.access);
        curl_easy_setopt(e, CURLOPT_PASSWORD, c->t.secret);
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, a->err);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &a->body);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, xfer_cb);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "shardgate-cli");
    if (c->t.ca)
        curl_easy_setopt(e, CURLOPT_CAINFO, c->t.ca);
    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? body_len : 0));
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    }
    CURLcode cc = curl_easy_perform(e);
    if (cc != CURLE_OK) {
        if (a->body.err)
            snprintf(a->err, sizeof a->err, "the answer is larger than %zu bytes",
                     CLI_ANSWER_MAX);
        else if (cli_interrupted)
            snprintf(a->err, sizeof a->err, "interrupted");
        else if (!a->err[0])
            snprintf(a->err, sizeof a->err, "%s", curl_easy_strerror(cc));
        goto out;
    }
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &a->status);
    if (!a->body.p)
        sg_buf_add(&a->body, "", 0);     /* an empty body is still a string */
    rc = a->body.p ? 0 : -1;
out:
    curl_slist_free_all(hdrs);
    sg_buf_free(&url);
    return rc;
}
