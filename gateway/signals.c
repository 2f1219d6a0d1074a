/* gateway/signals.c - the signals of `shardgate serve` (README "Signals"):
 * SIGINT or SIGTERM stops gracefully, a second one exits at once; SIGHUP
 * reopens the log file, or is ignored when lines go to stderr. Signals are
 * blocked in every thread and taken with sigwait(), so nothing runs in a
 * signal handler. */
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "gw.h"

static sigset_t handled(void)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGHUP);
    return s;
}

void gw_signals_block(void)
{
    sigset_t s = handled();
    pthread_sigmask(SIG_BLOCK, &s, NULL);
}

static void on_hup(void)
{
    int rc = log_reopen();
    if (rc == 0)
        log_msg(LOG_LVL_INFO, "main", "SIGHUP: log file reopened");
    else if (rc < 0)
        log_msg(LOG_LVL_INFO, "main", "SIGHUP ignored: the log goes to stderr (with log_file "
                "set, SIGHUP reopens it)");
    else
        log_msg(LOG_LVL_ERROR, "main", "SIGHUP: cannot reopen the log file (lines keep going "
                "to the old one): %s", strerror(rc));
}

static int wait_stop_signal(void)
{
    sigset_t s = handled();
    for (;;) {
        int sig = 0;
        if (sigwait(&s, &sig) != 0)
            continue;
        if (sig == SIGHUP) {
            on_hup();
            continue;
        }
        return sig;
    }
}

/* During the graceful stop: a second SIGINT/SIGTERM (an impatient Ctrl-C,
 * an orchestrator's second try) ends the process now. The cache survives
 * this as it survives kill -9. */
static void *second_signal(void *arg)
{
    (void)arg;
    int sig = wait_stop_signal();
    log_msg(LOG_LVL_WARN, "main", "second signal %d (%s): exiting now, without waiting for "
            "requests in flight", sig, strsignal(sig));
    _exit(128 + sig);
}

int gw_signals_wait_stop(void)
{
    int sig = wait_stop_signal();
    pthread_t t;
    if (pthread_create(&t, NULL, second_signal, NULL) == 0)
        pthread_detach(t);
    return sig;
}
