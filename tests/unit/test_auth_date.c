/* tests/unit/test_auth_date.c - the request dates auth/ accepts in Date and
 * x-amz-date (every form botocore, s3cmd and other SDKs send), the ones it
 * refuses, and the 15-minute skew rule applied to each form through
 * auth_verify with the test clock. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "cu.h"
#include "auth.h"
#include "auth_int.h"

int register_tests(void);

#define AK "AKIAIOSFODNN7EXAMPLE"
#define SK "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define T1 ((time_t)1795515300)  /* 2026-11-24T10:15:00Z, a Tuesday */

static time_t g_now = T1;
static time_t test_clock(void) { return g_now; }

static struct conf_user g_users[1] = {
    { .name = "example", .access_key = AK, .secret_key = SK },
};
static struct conf g_conf;
static struct auth *g_auth;

/* ---- the forms ---- */

struct date_case {
    const char *name, *text;
    time_t want;            /* (time_t)-1: refused */
};

#define NO ((time_t)-1)

static const struct date_case forms[] = {
    /* RFC 1123: botocore's HmacV1 (formatdate(usegmt=True)), curl, browsers */
    { "rfc1123_gmt", "Tue, 24 Nov 2026 10:15:00 GMT", T1 },
    /* email.utils.formatdate() without usegmt, Go's RFC1123Z, Java's RFC 822 */
    { "rfc1123_minus_0000", "Tue, 24 Nov 2026 10:15:00 -0000", T1 },
    /* s3cmd's x-amz-date */
    { "rfc1123_plus_0000", "Tue, 24 Nov 2026 10:15:00 +0000", T1 },
    { "rfc1123_utc", "Tue, 24 Nov 2026 10:15:00 UTC", T1 },
    { "rfc1123_ut", "Tue, 24 Nov 2026 10:15:00 UT", T1 },
    { "rfc1123_z", "Tue, 24 Nov 2026 10:15:00 Z", T1 },
    { "rfc1123_offset_east", "Tue, 24 Nov 2026 11:45:00 +0130", T1 },
    { "rfc1123_offset_west", "Tue, 24 Nov 2026 05:15:00 -0500", T1 },
    { "rfc1123_offset_crosses_day", "Wed, 25 Nov 2026 00:15:00 +1400", T1 },
    { "rfc1123_one_digit_day", "Wed, 4 Nov 2026 10:15:00 GMT", T1 - 20 * 86400 },
    { "rfc1123_no_weekday", "24 Nov 2026 10:15:00 GMT", T1 },
    { "rfc1123_lower_case", "tue, 24 nov 2026 10:15:00 gmt", T1 },
    { "rfc1123_full_weekday", "Tuesday, 24 Nov 2026 10:15:00 GMT", T1 },
    { "rfc1123_trailing_space", "Tue, 24 Nov 2026 10:15:00 GMT ", T1 },
    /* RFC 850 (obsolete, still in RFC 7231's list) */
    { "rfc850", "Tuesday, 24-Nov-26 10:15:00 GMT", T1 },
    { "rfc850_four_digit_year", "Tuesday, 24-Nov-2026 10:15:00 GMT", T1 },
    { "rfc850_year_99", "Wednesday, 24-Nov-99 10:15:00 GMT", (time_t)943438500 },
    /* ANSI C asctime() */
    { "asctime", "Tue Nov 24 10:15:00 2026", T1 },
    { "asctime_padded_day", "Wed Nov  4 10:15:00 2026", T1 - 20 * 86400 },
    { "asctime_unpadded_day", "Wed Nov 4 10:15:00 2026", T1 - 20 * 86400 },
    /* ISO 8601 basic: SigV4's x-amz-date */
    { "iso8601_basic", "20261124T101500Z", T1 },
    { "leap_day", "Thu, 29 Feb 2024 23:59:59 GMT", (time_t)1709251199 },
    /* refused */
    { "empty", "", NO },
    { "iso8601_extended", "2026-11-24T10:15:00Z", NO },
    { "iso8601_basic_no_z", "20261124T101500", NO },
    { "no_zone", "Tue, 24 Nov 2026 10:15:00", NO },
    { "named_zone_est", "Tue, 24 Nov 2026 10:15:00 EST", NO },
    { "zone_three_digits", "Tue, 24 Nov 2026 10:15:00 +000", NO },
    { "zone_hours_25", "Tue, 24 Nov 2026 10:15:00 +2500", NO },
    { "zone_minutes_60", "Tue, 24 Nov 2026 10:15:00 +0060", NO },
    { "unknown_weekday", "Tux, 24 Nov 2026 10:15:00 GMT", NO },
    { "unknown_month", "Tue, 24 Nol 2026 10:15:00 GMT", NO },
    { "day_31_november", "Mon, 31 Nov 2026 10:15:00 GMT", NO },
    { "not_leap", "Sun, 29 Feb 2026 10:15:00 GMT", NO },
    { "hour_24", "Tue, 24 Nov 2026 24:00:00 GMT", NO },
    { "no_seconds", "Tue, 24 Nov 2026 10:15 GMT", NO },
    { "three_digit_day", "Tue, 024 Nov 2026 10:15:00 GMT", NO },
    { "three_digit_year", "Tue, 24 Nov 202 10:15:00 GMT", NO },
    { "trailing_junk", "Tue, 24 Nov 2026 10:15:00 GMT x", NO },
    { "before_1970", "Wed, 31 Dec 1969 23:59:59 GMT", NO },
    { "asctime_two_digit_year", "Tue Nov 24 10:15:00 26", NO },
    { "asctime_with_zone", "Tue Nov 24 10:15:00 2026 GMT", NO },
    { "rfc850_without_dashes", "Tuesday, 24 Nov-26 10:15:00 GMT", NO },
    { "weekday_only", "Tue,", NO },
    { "epoch_seconds", "1795515300", NO },
};

static void every_form_parses_to_its_instant(void)
{
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        time_t t = 12345;
        int rc = auth_parse_date(forms[i].text, &t);
        bool ok = forms[i].want == NO ? rc == -1 && t == 12345 : rc == 0 && t == forms[i].want;
        if (!ok)
            fprintf(stderr, "\n%s: rc %d t %ld\n", forms[i].name, rc, (long)t);
        CU_ASSERT(ok);
    }
}

static void http_parser_refuses_iso_and_amz_parser_only_iso(void)
{
    time_t t;
    CU_ASSERT_EQUAL(auth_parse_http_date("20261124T101500Z", &t), -1);
    CU_ASSERT_EQUAL(auth_parse_amz_date("Tue, 24 Nov 2026 10:15:00 GMT", &t), -1);
    CU_ASSERT_EQUAL(auth_parse_amz_date("20261124T101500Z", &t), 0);
    CU_ASSERT_EQUAL(t, T1);
}

/* ---- through auth_verify ---- */

/* A SigV4 GET whose date comes in `header` ("date" or "x-amz-date") in the
 * form `text`, signed for the instant T1 (the string to sign always carries
 * it in ISO 8601 basic). */
static enum auth_status verify_with(const char *header, const char *text, time_t now)
{
    struct auth_hdr h[4] = {
        { "host", "examplebucket.s3.amazonaws.com" },
        { header, text },
        { "x-amz-content-sha256", AUTH_EMPTY_SHA256 },
        { "authorization", NULL },
    };
    bool is_date = strcmp(header, "date") == 0;
    const char *sh = is_date ? "date;host;x-amz-content-sha256"
                             : "host;x-amz-content-sha256;x-amz-date";
    struct auth_req r = { "GET", "/k", "", h, 3 };
    char sig[65], authz[512];
    if (auth_sign_request(&r, false, sh, AUTH_EMPTY_SHA256, "20261124T101500Z", "us-east-1", SK,
                          sig) != AUTH_OK)
        return AUTH_NOMEM;
    snprintf(authz, sizeof authz,
             "AWS4-HMAC-SHA256 Credential=" AK "/20261124/us-east-1/s3/aws4_request, "
             "SignedHeaders=%s, Signature=%s",
             sh, sig);
    h[3].value = authz;
    r.n_hdrs = 4;
    g_now = now;
    struct auth_ctx *ctx = NULL;
    enum auth_status st = auth_verify(g_auth, &r, &ctx);
    auth_ctx_free(ctx);
    g_now = T1;
    return st;
}

static void every_accepted_form_verifies_within_15_minutes_only(void)
{
    static const char *const headers[] = { "date", "x-amz-date" };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        if (forms[i].want != T1)
            continue;
        for (size_t h = 0; h < 2; h++) {
            static const struct { long delta; enum auth_status want; } skews[] = {
                { 0, AUTH_OK },         { 900, AUTH_OK },          { -900, AUTH_OK },
                { 901, AUTH_TIME_SKEWED }, { -901, AUTH_TIME_SKEWED },
                { 86400, AUTH_TIME_SKEWED },
            };
            for (size_t k = 0; k < sizeof skews / sizeof skews[0]; k++) {
                enum auth_status st = verify_with(headers[h], forms[i].text, T1 + skews[k].delta);
                if (st != skews[k].want)
                    fprintf(stderr, "\n%s in %s at %+ld: %s\n", forms[i].name, headers[h],
                            skews[k].delta, auth_status_name(st));
                CU_ASSERT_EQUAL(st, skews[k].want);
            }
        }
    }
}

static void refused_forms_give_missing_date(void)
{
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        if (forms[i].want != NO || !forms[i].text[0])
            continue;
        CU_ASSERT_EQUAL(verify_with("date", forms[i].text, T1), AUTH_MISSING_DATE);
        CU_ASSERT_EQUAL(verify_with("x-amz-date", forms[i].text, T1), AUTH_MISSING_DATE);
    }
}

static int suite_init(void)
{
    g_conf.users = g_users;
    g_conf.n_users = 1;
    g_conf.region = "us-east-1";
    if (auth_open(&g_conf, &g_auth) != 0)
        return -1;
    auth_set_clock(g_auth, test_clock);
    return 0;
}

static int suite_clean(void)
{
    auth_close(g_auth);
    return 0;
}

int register_tests(void)
{
    static const struct cu_test tests[] = {
        { "every_form_parses_to_its_instant", every_form_parses_to_its_instant },
        { "http_parser_refuses_iso_and_amz_parser_only_iso",
          http_parser_refuses_iso_and_amz_parser_only_iso },
        { "every_accepted_form_verifies_within_15_minutes_only",
          every_accepted_form_verifies_within_15_minutes_only },
        { "refused_forms_give_missing_date", refused_forms_give_missing_date },
    };
    return cu_add_suite("auth_date", suite_init, suite_clean, tests, CU_N(tests));
}
