/* conf/log.h - the one logging API of shardgate.
 * Lines go to stderr (or a log file) as "time level subsys: message", or as
 * one JSON object per line. Thread-safe: each line is formatted into a local
 * buffer and written with one write(2). Every line is escaped here, once:
 * nothing a client sends (a key with "%0A" in it) can start a new line. */
#ifndef SHARDGATE_LOG_H
#define SHARDGATE_LOG_H

#include <stddef.h>

enum log_level { LOG_LVL_ERROR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

/* LOG_FMT_TEXT: "2024-05-01T12:00:00.123Z INFO  gw: message" - control
 * characters, '"' and '\' in the message are escaped (\n, \", \\, \xHH).
 * LOG_FMT_JSON: {"time":"...","level":"info","subsys":"gw","msg":"..."},
 * log_kv() lines carry their fields as members instead of "msg". */
enum log_format { LOG_FMT_TEXT, LOG_FMT_JSON };

/* Lines above `lvl` are dropped. Call before starting threads. */
void log_set_level(enum log_level lvl);
enum log_level log_get_level(void);

/* Call before starting threads. */
void log_set_format(enum log_format f);

/* Appends lines to `path` (created with mode 0640) instead of stderr.
 * Returns 0, or the errno of the failed open. Call before starting threads. */
int log_open_file(const char *path);
/* Opens the log file again by its name (after logrotate moved it): the
 * SIGHUP action. Returns 0 when reopened, -1 when lines go to stderr
 * (nothing to reopen), or the errno of the failed open (lines keep going to
 * the old file). Any thread; lines written meanwhile go to one file or the
 * other, none is lost or torn. */
int log_reopen(void);
/* Releases the log file (lines go to stderr again). For tests. */
void log_close_file(void);

/* Formats one line. Never pass secrets, signatures or Authorization headers. */
void log_msg(enum log_level lvl, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* One field of a structured line (the access log). */
enum log_kv_type { LOG_KV_STR, LOG_KV_UINT, LOG_KV_MS };
struct log_kv {
    const char *name;        /* a plain word, written as it is */
    enum log_kv_type type;
    const char *str;         /* LOG_KV_STR: any bytes (client input included);
                                NULL is written "-" (JSON: null) */
    unsigned long long uint; /* LOG_KV_UINT */
    double ms;               /* LOG_KV_MS: milliseconds, three decimals */
};
#define LOG_KV_S(n, v) ((struct log_kv){ .name = (n), .type = LOG_KV_STR, .str = (v) })
#define LOG_KV_U(n, v) ((struct log_kv){ .name = (n), .type = LOG_KV_UINT, .uint = (v) })
#define LOG_KV_MS(n, v) ((struct log_kv){ .name = (n), .type = LOG_KV_MS, .ms = (v) })

/* Formats one line of fields: text "name=value ..." (a string value is
 * quoted when it is empty, is "-", or holds a space, '=', '"' or anything
 * escaped), JSON one member per field. A long string value is cut at 4 KiB
 * and ends in "...". */
void log_kv(enum log_level lvl, const char *subsys, const struct log_kv *kv, size_t n);

#endif
