/* conf/log.c - format-checked logging to stderr, one write(2) per line so lines
 * from different threads never interleave. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum log_level g_level = LOG_LVL_INFO;

void log_set_level(enum log_level lvl) { g_level = lvl; }
enum log_level log_get_level(void) { return g_level; }

int log_level_parse(const char *s, enum log_level *out)
{
    static const char *const names[] = { "error", "warn", "info", "debug" };
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -1;
}

void log_msg(enum log_level lvl, const char *subsys, const char *fmt, ...)
{
    static const char *const tags[] = { "ERROR", "WARN", "INFO", "DEBUG" };
    if (lvl > g_level)
        return;
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s: ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, tags[lvl], subsys);
    if (n < 0)
        return;
    size_t used = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + used, sizeof line - used, fmt, ap);
    va_end(ap);
    if (m > 0)
        used += (size_t)m < sizeof line - used ? (size_t)m : sizeof line - used - 1;
    if (used >= sizeof line - 1)
        used = sizeof line - 2;   /* truncated: keep room for the newline */
    line[used++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, used);
    (void)w;
}
