/* auth/date.c - the request dates S3 accepts: ISO 8601 basic
 * ("20130524T000000Z", SigV4's x-amz-date and X-Amz-Date) and the three
 * HTTP date forms of RFC 7231 that SDKs put in Date or x-amz-date (RFC 1123
 * with GMT or a numeric zone, RFC 850, asctime). Pure functions, no timegm:
 * the calendar arithmetic is done here so the TZ environment never matters. */
#include "auth_int.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

static int digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (no timegm needed). */
static long days_from_civil(int y, int m, int d)
{
    y -= m <= 2;
    long era = (y >= 0 ? y : y - 399) / 400;
    long yoe = y - era * 400;
    long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int make_time(int y, int mo, int d, int h, int mi, int s, time_t *out)
{
    static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 ||
        mi > 59 || s > 60)
        return -1;
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (mo == 2 && d == 29 && !leap)
        return -1;
    *out = (time_t)(days_from_civil(y, mo, d) * 86400L + h * 3600L + mi * 60L + s);
    return 0;
}

int auth_parse_amz_date(const char *s, time_t *out)
{
    int y, mo, d, h, mi, sec;
    if (strlen(s) != 16 || s[8] != 'T' || s[15] != 'Z')
        return -1;
    if (digits(s, 4, &y) || digits(s + 4, 2, &mo) || digits(s + 6, 2, &d) ||
        digits(s + 9, 2, &h) || digits(s + 11, 2, &mi) || digits(s + 13, 2, &sec))
        return -1;
    return make_time(y, mo, d, h, mi, sec, out);
}

/* ---- the HTTP forms ---- */

/* A small cursor over the date text; every step fails cleanly at the end
 * of the string because the string is NUL-terminated. */
struct dscan {
    const char *p;
};

static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Reads a run of letters; returns its length (0 when none). */
static size_t ds_word(struct dscan *d, const char **w)
{
    const char *s = d->p;
    while (is_alpha(*d->p))
        d->p++;
    *w = s;
    return (size_t)(d->p - s);
}

/* Reads min..max digits. */
static bool ds_num(struct dscan *d, int min, int max, int *v, int *n_read)
{
    int n = 0, x = 0;
    while (n < max && is_digit(d->p[n])) {
        x = x * 10 + (d->p[n] - '0');
        n++;
    }
    if (n < min || is_digit(d->p[n]))
        return false;
    d->p += n;
    *v = x;
    if (n_read)
        *n_read = n;
    return true;
}

static bool ds_char(struct dscan *d, char c)
{
    if (*d->p != c)
        return false;
    d->p++;
    return true;
}

/* One or more spaces (asctime pads the day with a second one). */
static bool ds_spaces(struct dscan *d)
{
    if (*d->p != ' ')
        return false;
    while (*d->p == ' ')
        d->p++;
    return true;
}

/* "Mon".."Sun" or "Monday".."Sunday", any case. */
static bool weekday_ok(const char *w, size_t n)
{
    static const char *const names[] = { "Monday", "Tuesday", "Wednesday", "Thursday",
                                         "Friday", "Saturday", "Sunday" };
    for (size_t i = 0; i < 7; i++)
        if ((n == 3 || n == strlen(names[i])) && strncasecmp(w, names[i], n) == 0)
            return true;
    return false;
}

/* "Jan".."Dec", any case; 1..12 or -1. */
static int month_of(const char *w, size_t n)
{
    static const char *const names[] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
    if (n != 3)
        return -1;
    for (int i = 0; i < 12; i++)
        if (strncasecmp(w, names[i], 3) == 0)
            return i + 1;
    return -1;
}

static bool ds_month(struct dscan *d, int *mo)
{
    const char *w;
    size_t n = ds_word(d, &w);
    *mo = month_of(w, n);
    return *mo > 0;
}

/* "HH:MM:SS" */
static bool ds_clock(struct dscan *d, int *h, int *mi, int *s)
{
    return ds_num(d, 2, 2, h, NULL) && ds_char(d, ':') && ds_num(d, 2, 2, mi, NULL) &&
           ds_char(d, ':') && ds_num(d, 2, 2, s, NULL);
}

/* The zone of RFC 1123 / RFC 850: "GMT", "UTC", "UT", "Z", or +HHMM / -HHMM
 * ("-0000" and "+0000" are what Python's email.utils and s3cmd send). The
 * offset is returned in seconds east of UTC. */
static bool ds_zone(struct dscan *d, long *off)
{
    if (*d->p == '+' || *d->p == '-') {
        int sign = *d->p == '-' ? -1 : 1, hhmm;
        d->p++;
        if (!ds_num(d, 4, 4, &hhmm, NULL) || hhmm / 100 > 23 || hhmm % 100 > 59)
            return false;
        *off = sign * (hhmm / 100 * 3600L + hhmm % 100 * 60L);
        return true;
    }
    const char *w;
    size_t n = ds_word(d, &w);
    *off = 0;
    return (n == 3 && (strncasecmp(w, "GMT", 3) == 0 || strncasecmp(w, "UTC", 3) == 0)) ||
           (n == 2 && strncasecmp(w, "UT", 2) == 0) || (n == 1 && (*w == 'Z' || *w == 'z'));
}

static bool ds_end(struct dscan *d)
{
    while (*d->p == ' ')
        d->p++;
    return *d->p == '\0';
}

/* RFC 850 years have two digits: 70-99 are 19xx, 00-69 are 20xx (dates
 * before 1970 are refused anyway). */
static int full_year(int y, int n_digits)
{
    if (n_digits != 2)
        return y;
    return y < 70 ? 2000 + y : 1900 + y;
}

/* After "<wkday>, " or at the start: "DD Mon YYYY HH:MM:SS zone" (RFC 1123,
 * also RFC 2822's one-digit day) or "DD-Mon-YY HH:MM:SS zone" (RFC 850). */
static bool parse_day_first(struct dscan *d, time_t *out)
{
    int day, mo, y, yn, h, mi, s;
    long off;
    if (!ds_num(d, 1, 2, &day, NULL))
        return false;
    if (ds_char(d, '-')) {
        if (!ds_month(d, &mo) || !ds_char(d, '-') || !ds_num(d, 2, 4, &y, &yn) || yn == 3)
            return false;
    } else {
        if (!ds_spaces(d) || !ds_month(d, &mo) || !ds_spaces(d) || !ds_num(d, 2, 4, &y, &yn) ||
            yn == 3)
            return false;
    }
    if (!ds_spaces(d) || !ds_clock(d, &h, &mi, &s) || !ds_spaces(d) || !ds_zone(d, &off) ||
        !ds_end(d))
        return false;
    time_t t;
    if (make_time(full_year(y, yn), mo, day, h, mi, s, &t) != 0)
        return false;
    *out = t - off;
    return true;
}

/* After "<wkday> ": asctime's "Mon DD HH:MM:SS YYYY" (day padded with a
 * space or not), always UTC. */
static bool parse_asctime(struct dscan *d, time_t *out)
{
    int mo, day, h, mi, s, y;
    if (!ds_month(d, &mo) || !ds_spaces(d) || !ds_num(d, 1, 2, &day, NULL) || !ds_spaces(d) ||
        !ds_clock(d, &h, &mi, &s) || !ds_spaces(d) || !ds_num(d, 4, 4, &y, NULL) ||
        !ds_end(d))
        return false;
    return make_time(y, mo, day, h, mi, s, out) == 0;
}

int auth_parse_http_date(const char *s, time_t *out)
{
    struct dscan d = { s };
    const char *w;
    time_t t;
    while (*d.p == ' ')
        d.p++;
    if (is_digit(*d.p)) {
        if (!parse_day_first(&d, &t))       /* RFC 2822 without a weekday */
            return -1;
        *out = t;
        return 0;
    }
    size_t n = ds_word(&d, &w);
    if (!weekday_ok(w, n))
        return -1;
    bool ok;
    if (ds_char(&d, ','))
        ok = ds_spaces(&d) && parse_day_first(&d, &t);
    else
        ok = ds_spaces(&d) && parse_asctime(&d, &t);
    if (!ok || t < 0)
        return -1;
    *out = t;
    return 0;
}

int auth_parse_date(const char *s, time_t *out)
{
    if (auth_parse_amz_date(s, out) == 0)
        return 0;
    return auth_parse_http_date(s, out);
}
