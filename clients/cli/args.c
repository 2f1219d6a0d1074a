/* clients/cli/args.c - what every client command reads the same way: the
 * gateway's endpoint, the signing region and the credentials (options, then
 * the environment), s3://bucket/rest arguments and plain integers. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_int.h"

bool cli_s3_url_parse(const char *u, char *bucket, size_t n, const char **rest)
{
    if (strncmp(u, "s3://", 5) != 0)
        return false;
    u += 5;
    size_t bl = strcspn(u, "/");
    if (bl == 0 || bl >= n)
        return false;
    memcpy(bucket, u, bl);
    bucket[bl] = '\0';
    *rest = u[bl] ? u + bl + 1 : u + bl;
    return true;
}

void cli_getopt_reset(void)
{
    optind = 1;
    opterr = 1;
}

int cli_common_opt(int o, const char *usage, struct cli_common *c)
{
    switch (o) {
    case CLI_O_ENDPOINT: c->endpoint = optarg; return -1;
    case CLI_O_REGION: c->region = optarg; return -1;
    case CLI_O_JSON: c->json = true; return -1;
    case 'h':
    case CLI_O_HELP:
        fputs(usage, stdout);
        return CLI_EXIT_OK;
    default:
        fputs(usage, stderr);
        return CLI_EXIT_USAGE;
    }
}

bool cli_u64_parse(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

/* The region goes into curl's "aws:amz:REGION:s3": keep it to what regions
 * are made of, so it cannot change the meaning of that string. */
static bool region_ok(const char *r)
{
    size_t n = strlen(r);
    if (n == 0 || n > 64)
        return false;
    for (; *r; r++)
        if (!((*r >= 'a' && *r <= 'z') || (*r >= 'A' && *r <= 'Z') ||
              (*r >= '0' && *r <= '9') || *r == '-' || *r == '_'))
            return false;
    return true;
}

static const char *env_nonempty(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

int cli_target_resolve(const char *cmd, const char *endpoint_opt, const char *region_opt,
                       const char *default_ep, bool want_creds, struct cli_target *t)
{
    memset(t, 0, sizeof *t);
    const char *ep = endpoint_opt ? endpoint_opt : env_nonempty("SHARDGATE_ENDPOINT");
    if (!ep)
        ep = default_ep;
    if (!ep || !*ep) {
        fprintf(stderr, "shardgate %s: --endpoint URL is required (or SHARDGATE_ENDPOINT)\n",
                cmd);
        return CLI_EXIT_USAGE;
    }
    if (strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0) {
        fprintf(stderr, "shardgate %s: the endpoint must be an http:// or https:// URL, "
                "not '%s'\n", cmd, ep);
        return CLI_EXIT_USAGE;
    }
    t->endpoint = ep;
    const char *region = region_opt;
    if (!region)
        region = env_nonempty("AWS_REGION");
    if (!region)
        region = env_nonempty("AWS_DEFAULT_REGION");
    if (!region)
        region = "us-east-1";
    if (!region_ok(region)) {
        fprintf(stderr, "shardgate %s: bad region '%s'\n", cmd, region);
        return CLI_EXIT_USAGE;
    }
    t->region = region;
    t->ca = env_nonempty("AWS_CA_BUNDLE");
    if (!want_creds)
        return CLI_EXIT_OK;

    t->access = env_nonempty("AWS_ACCESS_KEY_ID");
    t->secret = env_nonempty("AWS_SECRET_ACCESS_KEY");
    t->token = env_nonempty("AWS_SESSION_TOKEN");
    if (!t->access || !t->secret) {
        t->access = env_nonempty("SHARDGATE_ACCESS_KEY");
        t->secret = env_nonempty("SHARDGATE_SECRET_KEY");
        t->token = NULL;
    }
    if (!t->access || !t->secret) {
        fprintf(stderr, "shardgate %s: no credentials: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (or SHARDGATE_ACCESS_KEY and SHARDGATE_SECRET_KEY)\n",
                cmd);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}
