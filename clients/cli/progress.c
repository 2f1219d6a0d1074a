/* clients/cli/progress.c - the progress line of `prefetch --wait`: built to
 * fit the terminal, the most useful parts first (a line wider than the
 * terminal wraps, and a wrapped line cannot be redrawn with \r), and the
 * size and rate formats the other commands print too. */
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "cli_int.h"

#define BAR_MIN 10       /* narrower than this a bar tells nothing: drop it */
#define BAR_MAX 30

void cli_fmt_bytes(double v, char *out, size_t n)
{
    static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < sizeof unit / sizeof unit[0]) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(out, n, "%.0f B", v);
    else
        snprintf(out, n, "%.1f %s", v, unit[u]);
}

void cli_fmt_rate(double v, char *out, size_t n)
{
    static const char *const unit[] = { "B/s", "kB/s", "MB/s", "GB/s", "TB/s" };
    size_t u = 0;
    while (v >= 1000.0 && u + 1 < sizeof unit / sizeof unit[0]) {
        v /= 1000.0;
        u++;
    }
    snprintf(out, n, v < 10.0 && u > 0 ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

unsigned cli_term_width(int fd)
{
    struct winsize ws;
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    const char *c = getenv("COLUMNS");
    if (c && *c) {
        char *end;
        unsigned long v = strtoul(c, &end, 10);
        if (!*end && v > 0 && v <= 10000)
            return (unsigned)v;
    }
    return 80;
}

/* The parts of a line, each "" when the gateway has no value for it. */
struct parts {
    char counters[160];     /* objects 120/1024 (cached 10, staged 110, failed 0) */
    char brief[96];         /* objects 120/1024, failed 0 */
    char bytes[80];         /* bytes 1.2 GiB/9.8 GiB: staged of to stage */
    char rate[32];          /* 512 MB/s */
    char eta[32];           /* eta 17 s */
};

/* counters + the first `extra` of bytes, rate, eta into out; its length. */
static size_t compose(const struct parts *p, bool brief, int extra, char *out, size_t n)
{
    const char *more[3] = { p->bytes, p->rate, p->eta };
    size_t len = (size_t)snprintf(out, n, "%s", brief ? p->brief : p->counters);
    for (int i = 0; i < extra && len < n; i++)
        if (more[i][0])
            len += (size_t)snprintf(out + len, n - len, " %s", more[i]);
    return len < n ? len : n - 1;
}

void cli_progress_line(const struct cli_job *j, unsigned cols, bool bar, char *out, size_t n)
{
    struct parts p;
    char done[32], total[32];
    bool live = !cli_job_final(j);
    double seen = j->cached + j->staged + j->failed;

    if (n == 0)
        return;
    if ((size_t)cols > n - 1)
        cols = (unsigned)(n - 1);
    snprintf(p.counters, sizeof p.counters,
             "objects %.0f/%.0f (cached %.0f, staged %.0f, failed %.0f)", seen, j->total,
             j->cached, j->staged, j->failed);
    snprintf(p.brief, sizeof p.brief, "objects %.0f/%.0f, failed %.0f", seen, j->total,
             j->failed);
    cli_fmt_bytes(j->bytes_done, done, sizeof done);
    cli_fmt_bytes(cli_job_bytes_to_stage(j), total, sizeof total);
    snprintf(p.bytes, sizeof p.bytes, "bytes %s/%s", done, total);
    p.rate[0] = p.eta[0] = '\0';
    /* a zero rate at the start is no information; a final job has no ETA */
    if (live && j->has_rate && j->rate > 0)
        cli_fmt_rate(j->rate, p.rate, sizeof p.rate);
    if (live && j->has_eta)
        snprintf(p.eta, sizeof p.eta, "eta %.0f s", j->eta);

    /* The first layout that fits wins: the detail of the counters and the
     * bar go before bytes, rate and ETA do. */
    static const struct { bool brief; int extra; bool bar; } layouts[] = {
        { false, 3, true }, { true, 3, true }, { false, 3, false }, { true, 3, false },
        { true, 2, false }, { true, 1, false }, { true, 0, false },
    };
    char line[512];
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        if (layouts[i].bar && !bar)
            continue;
        size_t len = compose(&p, layouts[i].brief, layouts[i].extra, line, sizeof line);
        if (len > cols)
            continue;
        if (layouts[i].bar) {
            /* " [=====>    ]  45%": 8 columns around the bar itself */
            size_t room = cols - len;
            if (room < BAR_MIN + 8)
                continue;
            size_t w = room - 8 < BAR_MAX ? room - 8 : BAR_MAX;
            double frac = j->total > 0 ? seen / j->total : 0.0;
            if (frac > 1.0)
                frac = 1.0;
            size_t fill = (size_t)(frac * (double)w);
            char b[BAR_MAX + 1];
            for (size_t k = 0; k < w; k++)
                b[k] = k < fill ? '=' : (k == fill ? '>' : ' ');
            if (fill >= w)
                b[w - 1] = '=';
            b[w] = '\0';
            snprintf(line + len, sizeof line - len, " [%s] %3d%%", b, (int)(frac * 100.0));
        }
        snprintf(out, n, "%s", line);
        return;
    }
    /* narrower than the shortest layout: its start */
    compose(&p, true, 0, line, sizeof line);
    line[cols] = '\0';
    snprintf(out, n, "%s", line);
}
