/* clients/cli/progress.c - the progress line of `prefetch --wait` (a line
 * wider than the terminal wraps, and a wrapped line cannot be redrawn with
 * \r: it is cut), and the size and rate formats the other commands print. */
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "cli_int.h"

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

void cli_progress_line(const struct cli_job *j, unsigned cols, bool bar, char *out, size_t n)
{
    char done[32], total[32], rate[32], prog[400];
    bool live = !cli_job_final(j);
    double seen = j->cached + j->staged + j->failed;

    if (n == 0)
        return;
    cli_fmt_bytes(j->bytes_done, done, sizeof done);
    cli_fmt_bytes(j->bytes_total, total, sizeof total);
    int w = snprintf(prog, sizeof prog, "objects %.0f/%.0f (cached %.0f, staged %.0f, "
                     "failed %.0f) bytes %s/%s", seen, j->total, j->cached, j->staged,
                     j->failed, done, total);
    /* a zero rate at the start is no information; a final job has no ETA */
    if (w > 0 && (size_t)w < sizeof prog && live && j->has_rate && j->rate > 0) {
        cli_fmt_rate(j->rate, rate, sizeof rate);
        w += snprintf(prog + w, sizeof prog - (size_t)w, " %s", rate);
    }
    if (w > 0 && (size_t)w < sizeof prog && live && j->has_eta)
        snprintf(prog + w, sizeof prog - (size_t)w, " eta %.0f s", j->eta);
    if (bar) {
        const int width = 20;
        double frac = j->total > 0 ? seen / j->total : 0.0;
        if (frac > 1.0)
            frac = 1.0;
        int fill = (int)(frac * width);
        char b[32];
        for (int i = 0; i < width; i++)
            b[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
        if (fill >= width)
            b[width - 1] = '=';
        b[width] = '\0';
        snprintf(out, n, "[%s] %3d%% %s", b, (int)(frac * 100.0), prog);
    } else {
        snprintf(out, n, "%s", prog);
    }
    if (strlen(out) > cols)
        out[cols] = '\0';
}
