/* conf/log.c - format-checked logging to stderr or a log file, one write(2)
 * per line so lines from different threads never interleave. Every line is
 * escaped here (text or JSON), so no call site has to remember that a key
 * or a method came from a client. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum {
    LINE_BYTES = 16 * 1024,   /* a 1024-byte key escaped six-fold still fits */
    MSG_BYTES = 4096,         /* a free-form message before escaping */
    STR_OUT_MAX = 4096,       /* one field's escaped bytes before "..." */
    TAIL = 32,                /* kept free for what closes a cut line */
};

static enum log_level g_level = LOG_LVL_INFO;
static enum log_format g_format = LOG_FMT_TEXT;
static atomic_int g_fd = STDERR_FILENO;
static char *g_path;   /* the log file; NULL: stderr */

void log_set_level(enum log_level lvl) { g_level = lvl; }
enum log_level log_get_level(void) { return g_level; }
void log_set_format(enum log_format f) { g_format = f; }

static int open_log(const char *path)
{
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
}

int log_open_file(const char *path)
{
    char *p = strdup(path);
    if (p == NULL)
        return ENOMEM;
    int fd = open_log(path);
    if (fd < 0) {
        int e = errno;
        free(p);
        return e;
    }
    log_close_file();
    g_path = p;
    atomic_store(&g_fd, fd);
    return 0;
}

int log_reopen(void)
{
    if (g_path == NULL)
        return -1;
    int nfd = open_log(g_path);
    if (nfd < 0)
        return errno;
    /* dup2 swaps the file under the descriptor every writer uses, in one
     * step: a concurrent write goes to the old file or the new one. */
    int rc = dup2(nfd, atomic_load(&g_fd)) < 0 ? errno : 0;
    close(nfd);
    return rc;
}

void log_close_file(void)
{
    if (g_path == NULL)
        return;
    close(atomic_exchange(&g_fd, STDERR_FILENO));
    free(g_path);
    g_path = NULL;
}

/* ---- one line ---- */

struct line {
    char b[LINE_BYTES];
    size_t len;
    bool cut;   /* content stopped at LINE_BYTES - TAIL */
};

/* Appends a piece whole or not at all (an escape is never split). */
static void put(struct line *l, const char *s, size_t n)
{
    if (l->cut || n > LINE_BYTES - TAIL - l->len) {
        l->cut = true;
        return;
    }
    memcpy(l->b + l->len, s, n);
    l->len += n;
}

static void puts_(struct line *l, const char *s)
{
    put(l, s, strlen(s));
}

/* The closing bytes always fit: TAIL is kept for them. */
static void put_tail(struct line *l, const char *s)
{
    size_t n = strlen(s);
    if (n > LINE_BYTES - l->len)
        n = LINE_BYTES - l->len;
    memcpy(l->b + l->len, s, n);
    l->len += n;
}

/* Length of the valid UTF-8 sequence at p (code point in *cp), or 0. */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end, unsigned *cp)
{
    unsigned c = p[0], v, min;
    size_t n;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2, v = c & 0x1fu, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3, v = c & 0x0fu, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4, v = c & 0x07u, min = 0x10000;
    } else {
        return 0;
    }
    if ((size_t)(end - p) < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0u) != 0x80u)
            return 0;
        v = (v << 6) | (p[i] & 0x3fu);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return n;
}

/* Appends s[0..n) escaped: '"', '\', control characters (C0, DEL, C1) and
 * the Unicode line separators always; bytes that are not UTF-8 as \xHH
 * (in JSON as the text "\xHH", since JSON strings are UTF-8). Valid UTF-8
 * is kept as it is. At most max_out bytes, then "...". */
static void put_escaped(struct line *l, const char *s, size_t n, bool json, size_t max_out)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    size_t start = l->len;
    char e[16];
    while (p < end && !l->cut) {
        if (l->len - start >= max_out) {
            puts_(l, "...");
            return;
        }
        unsigned c = *p, cp;
        size_t len;
        if (c == '"' || c == '\\') {
            e[0] = '\\', e[1] = (char)c;
            put(l, e, 2);
            p++;
        } else if (c == '\n' || c == '\r' || c == '\t') {
            puts_(l, c == '\n' ? "\\n" : c == '\r' ? "\\r" : "\\t");
            p++;
        } else if (c < 0x20 || c == 0x7f) {
            snprintf(e, sizeof e, json ? "\\u%04x" : "\\x%02x", c);
            puts_(l, e);
            p++;
        } else if (c < 0x80) {
            put(l, (const char *)p, 1);
            p++;
        } else if ((len = utf8_seq(p, end, &cp)) == 0) {
            snprintf(e, sizeof e, json ? "\\\\x%02x" : "\\x%02x", c);
            puts_(l, e);
            p++;
        } else if (cp <= 0x9f || cp == 0x2028 || cp == 0x2029) {
            snprintf(e, sizeof e, "\\u%04x", cp);
            puts_(l, e);
            p += len;
        } else {
            put(l, (const char *)p, len);
            p += len;
        }
    }
}

static const char *const level_tags[] = { "ERROR", "WARN", "INFO", "DEBUG" };
static const char *const level_names[] = { "error", "warn", "info", "debug" };

static void begin(struct line *l, enum log_level lvl, const char *subsys)
{
    struct timespec ts;
    struct tm tm;
    char t[64];
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(t, sizeof t, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             ts.tv_nsec / 1000000);
    l->len = 0;
    l->cut = false;
    if (g_format == LOG_FMT_JSON) {
        puts_(l, "{\"time\":\"");
        puts_(l, t);
        puts_(l, "\",\"level\":\"");
        puts_(l, level_names[lvl]);
        puts_(l, "\",\"subsys\":\"");
        put_escaped(l, subsys, strlen(subsys), true, STR_OUT_MAX);
        puts_(l, "\"");
    } else {
        char pre[128];
        snprintf(pre, sizeof pre, "%s %-5s ", t, level_tags[lvl]);
        puts_(l, pre);
        put_escaped(l, subsys, strlen(subsys), false, STR_OUT_MAX);
        puts_(l, ": ");
    }
}

static void emit(struct line *l)
{
    ssize_t w = write(atomic_load(&g_fd), l->b, l->len);
    (void)w;
}

void log_msg(enum log_level lvl, const char *subsys, const char *fmt, ...)
{
    if (lvl > g_level)
        return;
    char msg[MSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t mlen = m < 0 ? 0 : (size_t)m < sizeof msg ? (size_t)m : sizeof msg - 1;
    struct line l;
    begin(&l, lvl, subsys);
    bool json = g_format == LOG_FMT_JSON;
    if (json)
        puts_(&l, ",\"msg\":\"");
    put_escaped(&l, msg, mlen, json, LINE_BYTES);
    if ((size_t)m >= sizeof msg || l.cut)
        put_tail(&l, "...");
    put_tail(&l, json ? "\"}\n" : "\n");
    emit(&l);
}

/* Text values are quoted when a reader could not tell where they end, or
 * could mistake them for "-" (no value). */
static bool needs_quotes(const char *s)
{
    if (s[0] == '\0' || strcmp(s, "-") == 0)
        return true;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p <= ' ' || *p == '"' || *p == '=' || *p == '\\' || *p >= 0x7f)
            return true;
    return false;
}

void log_kv(enum log_level lvl, const char *subsys, const struct log_kv *kv, size_t n)
{
    if (lvl > g_level)
        return;
    struct line l;
    char piece[160];
    bool json = g_format == LOG_FMT_JSON;
    /* What makes the line whole again if it is cut now: pieces are put
     * whole or not at all, so at most a value is open. */
    const char *closer = "";
    begin(&l, lvl, subsys);
    for (size_t i = 0; i < n && !l.cut; i++) {
        const struct log_kv *f = &kv[i];
        snprintf(piece, sizeof piece, json ? ",\"%s\":" : i ? " %s=" : "%s=", f->name);
        puts_(&l, piece);
        if (l.cut)
            break;
        closer = json ? "null" : "";
        switch (f->type) {
        case LOG_KV_STR:
            if (f->str == NULL) {
                puts_(&l, json ? "null" : "-");
            } else {
                bool q = json || needs_quotes(f->str);
                if (q) {
                    puts_(&l, "\"");
                    if (!l.cut)
                        closer = "\"";
                }
                put_escaped(&l, f->str, strlen(f->str), json, STR_OUT_MAX);
                if (q)
                    puts_(&l, "\"");
            }
            break;
        case LOG_KV_UINT:
            snprintf(piece, sizeof piece, "%llu", f->uint);
            puts_(&l, piece);
            break;
        case LOG_KV_MS:
            snprintf(piece, sizeof piece, "%.3f", f->ms);
            puts_(&l, piece);
            break;
        }
        if (!l.cut)
            closer = "";
    }
    if (l.cut) {
        put_tail(&l, closer);
        put_tail(&l, json ? ",\"cut\":true}\n" : " ...\n");
    } else {
        put_tail(&l, json ? "}\n" : "\n");
    }
    emit(&l);
}
