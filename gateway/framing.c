/* gateway/framing.c - refuses requests whose body length two parsers could
 * read differently (RFC 9112 6.1 and 6.3): Transfer-Encoding together with
 * Content-Length, Content-Length values that disagree, a Transfer-Encoding
 * other than one "chunked". libmicrohttpd 0.9.75 takes the first
 * Content-Length and lets Transfer-Encoding win, so a proxy in front that
 * reads the other one would see a second, smuggled request in the body. */
#include <string.h>
#include <strings.h>

#include "gw_int.h"

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* [*b, *e) is s without optional white space around it. */
static void trim(const char *s, const char **b, const char **e)
{
    *b = s;
    *e = s + strlen(s);
    while (*b < *e && is_ows(**b))
        (*b)++;
    while (*e > *b && is_ows((*e)[-1]))
        (*e)--;
}

/* The decimal digits of a Content-Length without leading zeros ("0" for
 * zero), or false when it is not 1*DIGIT (a list "5, 5", a sign, empty). */
static bool length_digits(const char *v, const char **b, const char **e)
{
    trim(v, b, e);
    if (*b == *e)
        return false;
    for (const char *p = *b; p < *e; p++)
        if (*p < '0' || *p > '9')
            return false;
    while (*e - *b > 1 && **b == '0')
        (*b)++;
    return true;
}

const char *gw_framing_error(const struct auth_hdr *hdrs, size_t n)
{
    const char *cl_b = NULL, *cl_e = NULL, *te = NULL;
    size_t n_te = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = hdrs[i].name;
        if (strpbrk(name, " \t"))
            return "A header field name ends in white space before its colon.";
        if (strcmp(name, "transfer-encoding") == 0) {
            n_te++;
            te = hdrs[i].value;
        } else if (strcmp(name, "content-length") == 0) {
            const char *b, *e;
            if (!length_digits(hdrs[i].value, &b, &e))
                return "Content-Length must be a single decimal number.";
            if (cl_b && (e - b != cl_e - cl_b || memcmp(b, cl_b, (size_t)(e - b)) != 0))
                return "The request has two different Content-Length values.";
            cl_b = b;
            cl_e = e;
        }
    }
    if (n_te && cl_b)
        return "The request has both Transfer-Encoding and Content-Length.";
    if (n_te) {
        const char *b, *e;
        trim(te, &b, &e);
        if (n_te > 1 || e - b != 7 || strncasecmp(b, "chunked", 7) != 0)
            return "Transfer-Encoding must be a single \"chunked\".";
    }
    return NULL;
}
