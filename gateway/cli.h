/* gateway/cli.h - client subcommands of the shardgate binary: they talk to a
 * running gateway over HTTP (libcurl, SigV4-signed) instead of serving.
 * Implemented in gateway/cli_prefetch.c; dispatched from gateway/main.c. */
#ifndef SHARDGATE_CLI_H
#define SHARDGATE_CLI_H

/* `shardgate prefetch ...`: sends one prefetch hint (cache/HINTS.md) and,
 * with --wait, polls the job until it is final, printing progress.
 * argv[0] is "prefetch"; borrows argv. Uses getopt (resets optind) and
 * curl_global_init, so call it once, from the main thread, before any other
 * thread exists. Returns the process exit code: 0 hint accepted (or, with
 * --wait, job done), 1 job failed or cancelled, 2 usage error, 3 the gateway
 * answered an error or could not be reached, 130 interrupted while waiting. */
int gw_cli_prefetch(int argc, char **argv);

/* `shardgate jobs ...`: lists a bucket's prefetch jobs, shows one (--job)
 * or cancels one (--cancel). Same calling rules and exit codes as
 * gw_cli_prefetch (1 is not used). */
int gw_cli_jobs(int argc, char **argv);

#endif
