/* conf/log.h - the one logging API of shardgate.
 * Lines go to stderr as "time level subsys: message". Thread-safe: each line is
 * formatted into a local buffer and written with one write(2). */
#ifndef SHARDGATE_LOG_H
#define SHARDGATE_LOG_H

enum log_level { LOG_LVL_ERROR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

/* Lines above `lvl` are dropped. Call before starting threads. */
void log_set_level(enum log_level lvl);
enum log_level log_get_level(void);
/* Parses "error", "warn", "info", "debug"; returns 0 on success, -1 otherwise. */
int log_level_parse(const char *s, enum log_level *out);

/* Formats one line. Never pass secrets, signatures or Authorization headers. */
void log_msg(enum log_level lvl, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
