/* clients/cli/cli.h - the client commands of the shardgate binary: the client
 * side of the prefetch hint API (cache/HINTS.md) and a health probe. They
 * talk to a running gateway over HTTP (libcurl; SigV4-signed by curl where
 * the gateway wants a signature) instead of serving. Shipped in the same
 * binary as the server so a training node or a container needs one program;
 * gateway/main.c only dispatches to them.
 *
 * Every command borrows argv (argv[0] is the command's name), uses getopt
 * (resets optind) and curl_global_init, so call it once, from the main
 * thread, before any other thread exists. Each returns the process's exit
 * code (see enum cli_exit in cli_int.h and each command's --help). */
#ifndef SHARDGATE_CLI_H
#define SHARDGATE_CLI_H

/* `shardgate prefetch ...`: sends one prefetch hint and, with --wait, polls
 * its job until it is final, showing progress. Exit codes: 0 hint accepted
 * (with --wait: every object staged or already cached), 1 with --wait: some
 * objects could not be staged, or the job failed or was cancelled, 2 usage
 * error, 3 the gateway refused the request or could not be reached, 130
 * interrupted while waiting (the job goes on in the gateway). */
int cli_prefetch(int argc, char **argv);

/* `shardgate jobs ...`: lists a bucket's prefetch jobs, shows one (--job)
 * or cancels one (--cancel). Exit codes as cli_prefetch (1 is not used). */
int cli_jobs(int argc, char **argv);

/* `shardgate health [--endpoint URL] [--ready]`: GETs /_shardgate/health
 * (or /_shardgate/ready) with a short deadline. Exit codes: 0 the gateway
 * answered 200, 1 anything else (another status, no answer in time, no
 * connection), 2 usage error: what a container HEALTHCHECK expects. */
int cli_health(int argc, char **argv);

/* `shardgate flush s3://BUCKET[/PREFIX] [--wait]`: what a write-back bucket
 * has pending, or (--wait) waits until every write acknowledged before the
 * command started is in the cold tier. Exit codes: 0 nothing pending /
 * flushed, 1 still pending (at --timeout), 2 usage, 3 gateway, 130 Ctrl-C. */
int cli_flush(int argc, char **argv);

#endif
