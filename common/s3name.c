/* common/s3name.c - S3's bucket naming rules (see s3name.h), as AWS lists
 * them for general purpose buckets, plus the legacy rule against a '-'
 * next to a '.', which AWS still enforces on CreateBucket. */
#include "s3name.h"

#include <string.h>

static bool has_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

static bool has_suffix(const char *s, size_t n, const char *suf)
{
    size_t k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

bool sg_bucket_name_valid(const char *name)
{
    static const char *const bad_prefix[] = { "xn--", "sthree-", "amzn-s3-demo-" };
    static const char *const bad_suffix[] = { "-s3alias", "--ol-s3", ".mrap", "--x-s3",
                                              "--table-s3" };
    size_t n = strlen(name);
    if (n < 3 || n > 63)
        return false;
    unsigned dots = 0;
    bool digits_only = true;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && ((i == 0 || i == n - 1) || (c != '.' && c != '-')))
            return false;
        if (c == '.')
            dots++;
        else if (c < '0' || c > '9')
            digits_only = false;
    }
    if (strstr(name, "..") || strstr(name, ".-") || strstr(name, "-."))
        return false;
    /* formatted like an IPv4 address: four dot-separated runs of digits
     * (whatever their values: 999.1.1.1 looks like one too) */
    if (digits_only && dots == 3)
        return false;
    for (size_t i = 0; i < sizeof bad_prefix / sizeof bad_prefix[0]; i++)
        if (has_prefix(name, bad_prefix[i]))
            return false;
    for (size_t i = 0; i < sizeof bad_suffix / sizeof bad_suffix[0]; i++)
        if (has_suffix(name, n, bad_suffix[i]))
            return false;
    return true;
}
