/* clients/cli/health.c - `shardgate health`: asks a gateway whether it is
 * alive (/_shardgate/health) or ready to serve (/_shardgate/ready) and
 * answers with the exit code, so a container image without curl can run it
 * as its HEALTHCHECK and a script can wait for a gateway to come up. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_int.h"

/* The gateway's own default listen address (conf/): a probe run next to it
 * needs no option. */
#define HEALTH_DEFAULT_ENDPOINT "http://127.0.0.1:9000"
#define HEALTH_TIMEOUT_MS 5000L

static const char health_usage[] =
    "usage: shardgate health [--endpoint URL] [--ready] [--timeout SECONDS]\n"
    "\n"
    "Asks a running gateway whether it is alive (GET /_shardgate/health) or, with\n"
    "--ready, ready to serve (GET /_shardgate/ready: cache directory writable, cold\n"
    "tier reachable). Prints the gateway's answer. No credentials needed.\n"
    "\n"
    "  --endpoint URL     the gateway (default $SHARDGATE_ENDPOINT, else\n"
    "                     " HEALTH_DEFAULT_ENDPOINT ")\n"
    "  --ready            ask for readiness instead of liveness\n"
    "  --timeout SECONDS  give up after this long (default 5)\n"
    "\n"
    "Exit status: 0 the gateway answered 200; 1 anything else (another status, no\n"
    "answer within the timeout, no connection); 2 usage error. A container's\n"
    "HEALTHCHECK reads 0 as healthy and 1 as unhealthy.\n";

int cli_health(int argc, char **argv)
{
    enum { O_READY = CLI_O_OWN, O_TIMEOUT };
    static const struct option opts[] = {
        CLI_OPT_ENDPOINT,
        { "ready", no_argument, NULL, O_READY },
        { "timeout", required_argument, NULL, O_TIMEOUT },
        CLI_OPT_END,
    };
    struct cli_common cm = { 0 };
    bool ready = false;
    uint64_t timeout_s = 0;
    int o, stop;

    cli_getopt_reset();
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case O_READY: ready = true; break;
        case O_TIMEOUT:
            if (!cli_u64_parse(optarg, &timeout_s) || timeout_s == 0 || timeout_s > 3600) {
                fprintf(stderr, "shardgate health: --timeout takes whole seconds from 1 to "
                        "3600, not '%s'\n", optarg);
                return CLI_EXIT_USAGE;
            }
            break;
        default:
            if ((stop = cli_common_opt(o, health_usage, &cm)) >= 0)
                return stop;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "shardgate health: unexpected argument '%s'\n%s", argv[optind],
                health_usage);
        return CLI_EXIT_USAGE;
    }
    struct cli_target t;
    int rc = cli_target_resolve("health", cm.endpoint, NULL, HEALTH_DEFAULT_ENDPOINT, false, &t);
    if (rc != CLI_EXIT_OK)
        return rc;
    struct cli_conn c;
    const char *path = ready ? "/_shardgate/ready" : "/_shardgate/health";
    if (cli_conn_open("health", &t, path, &c) != CLI_EXIT_OK)
        return CLI_EXIT_FAILED;
    c.timeout_ms = timeout_s ? (long)timeout_s * 1000L : HEALTH_TIMEOUT_MS;
    c.connect_timeout_ms = c.timeout_ms;

    struct cli_answer a = { 0 };
    int tr = cli_request(&c, "GET", NULL, NULL, 0, &a);
    /* the answer on one line: its line breaks as spaces, without the last */
    char text[512];
    size_t l = 0;
    for (const char *p = a.body.p ? a.body.p : ""; *p && l + 1 < sizeof text; p++)
        text[l++] = *p == '\n' || *p == '\r' || *p == '\t' ? ' ' : *p;
    while (l > 0 && text[l - 1] == ' ')
        l--;
    text[l] = '\0';
    char shown[512];
    cli_term_copy(text, shown, sizeof shown);
    if (tr != 0) {
        fprintf(stderr, "shardgate health: %s: %s\n", c.url, a.err);
        rc = CLI_EXIT_FAILED;
    } else if (a.status != 200) {
        fprintf(stderr, "shardgate health: %s answered HTTP %ld%s%s\n", c.url, a.status,
                l ? ": " : "", shown);
        rc = CLI_EXIT_FAILED;
    } else {
        printf("%s\n", l ? shown : "ok");
        rc = CLI_EXIT_OK;
    }
    cli_answer_free(&a);
    cli_conn_close(&c);
    return rc;
}
