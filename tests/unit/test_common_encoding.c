/* tests/unit/test_common_encoding.c - hex, base64 and percent-encoding of
 * common/encoding.h: round trips, both hex cases, strict base64 (RFC 4648
 * vectors; padding required), URI encoding of every byte and back, and what
 * percent-decoding keeps literally (lenient) or refuses (strict). */
#include <CUnit/CUnit.h>
#include <stdint.h>
#include <string.h>

#include "cu.h"
#include "encoding.h"

static void hexval_takes_both_cases_and_nothing_else(void)
{
    static const char *digits = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        CU_ASSERT_EQUAL(sg_hexval(digits[i]), i);
        if (i >= 10)
            CU_ASSERT_EQUAL(sg_hexval(digits[i] - 'a' + 'A'), i);
    }
    static const int no[] = { 'g', 'G', '/', ':', '@', '`', ' ', '\0', 0x80, 0xff, -1 };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        CU_ASSERT_EQUAL(sg_hexval(no[i]), -1);
}

static void hex_round_trips_and_refuses_odd_or_foreign_digits(void)
{
    uint8_t in[256], out[256];
    char hex[513];
    for (int i = 0; i < 256; i++)
        in[i] = (uint8_t)i;
    sg_hex_encode(in, sizeof in, hex);
    CU_ASSERT_EQUAL(strlen(hex), 512);
    CU_ASSERT_NSTRING_EQUAL(hex, "000102", 6);
    CU_ASSERT_STRING_EQUAL(hex + 506, "fdfeff");
    CU_ASSERT_EQUAL(sg_hex_decode(hex, 512, out), 256);
    CU_ASSERT_EQUAL(memcmp(in, out, sizeof in), 0);
    CU_ASSERT_EQUAL(sg_hex_decode("D41D8cd9", 8, out), 4);
    CU_ASSERT_EQUAL(out[0], 0xd4);
    CU_ASSERT_EQUAL(out[3], 0xd9);
    CU_ASSERT_EQUAL(sg_hex_decode("abc", 3, out), -1);
    CU_ASSERT_EQUAL(sg_hex_decode("zz", 2, out), -1);
    CU_ASSERT_EQUAL(sg_hex_decode("", 0, out), 0);
    sg_hex_encode(in, 0, hex);
    CU_ASSERT_STRING_EQUAL(hex, "");
}

static void base64_encodes_rfc4648_vectors(void)
{
    static const struct { const char *in, *out; } cases[] = {
        { "", "" }, { "f", "Zg==" }, { "fo", "Zm8=" }, { "foo", "Zm9v" },
        { "foob", "Zm9vYg==" }, { "fooba", "Zm9vYmE=" }, { "foobar", "Zm9vYmFy" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char b64[16];
        uint8_t back[8];
        size_t n = strlen(cases[i].in);
        CU_ASSERT_EQUAL(sg_b64_encode(cases[i].in, n, b64), strlen(cases[i].out));
        CU_ASSERT_STRING_EQUAL(b64, cases[i].out);
        CU_ASSERT_EQUAL(sg_b64_decode(b64, strlen(b64), back, sizeof back), (long)n);
        CU_ASSERT_EQUAL(memcmp(back, cases[i].in, n), 0);
    }
}

static void base64_is_strict(void)
{
    static const struct { const char *in; long want; } cases[] = {
        { "", 0 }, { "Zg==", 1 }, { "Zm8=", 2 }, { "Zm9v", 3 },
        { "Zg=", -1 }, { "Zg", -1 }, { "Z===", -1 }, { "Zg=a", -1 }, { "Zm9v====", -1 },
        { "Zm 9", -1 }, { "Zm9-", -1 }, { "=Zm9", -1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t out[8];
        CU_ASSERT_EQUAL(sg_b64_decode(cases[i].in, strlen(cases[i].in), out, sizeof out),
                        cases[i].want);
    }
    uint8_t small[2];
    CU_ASSERT_EQUAL(sg_b64_decode("Zm9v", 4, small, sizeof small), -1);
}

static void pct_decode_keeps_bad_escapes_and_reads_plus_as_asked(void)
{
    static const struct { const char *in; bool plus; const char *out; } cases[] = {
        { "a%20b", false, "a b" }, { "%41%62", false, "Ab" }, { "%2f%2F", false, "//" },
        { "a+b", false, "a+b" }, { "a+b", true, "a b" }, { "%2B+", true, "+ " },
        { "%", false, "%" }, { "%4", false, "%4" }, { "x%4", false, "x%4" },
        { "%zz", false, "%zz" }, { "%%41", false, "%A" }, { "", false, "" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[16];
        size_t n = sg_pct_decode(cases[i].in, strlen(cases[i].in), out, cases[i].plus);
        out[n] = '\0';
        CU_ASSERT_STRING_EQUAL(out, cases[i].out);
    }
    char in_place[] = "k%C3%A9y+1";
    in_place[sg_pct_decode(in_place, strlen(in_place), in_place, true)] = '\0';
    CU_ASSERT_STRING_EQUAL(in_place, "k\xc3\xa9y 1");
    char nul[4];
    CU_ASSERT_EQUAL(sg_pct_decode("%00", 3, nul, false), 1);   /* the caller decides */
    CU_ASSERT_EQUAL(nul[0], '\0');
}

static bool unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

/* Every byte value, at every position of a slice: encoding keeps exactly
 * the unreserved bytes (and '/' when asked), writes %XX upper case for the
 * rest, and decoding (lenient and strict) gives the bytes back. */
static void uri_encode_round_trips_every_byte(void)
{
    char in[512], enc[3 * 512 + 1], dec[3 * 512];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (char)(i * 7 + 3);                  /* each byte value twice */
    for (int keep = 0; keep < 2; keep++) {
        size_t n = sg_uri_encode(in, sizeof in, keep, enc);
        CU_ASSERT_EQUAL(strlen(enc), n);
        size_t want = 0;
        for (size_t i = 0; i < sizeof in; i++) {
            unsigned char c = (unsigned char)in[i];
            want += unreserved(c) || (keep && c == '/') ? 1 : 3;
        }
        CU_ASSERT_EQUAL(n, want);
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)enc[i];
            if (c == '%') {
                CU_ASSERT_TRUE(i + 2 < n && strchr("0123456789ABCDEF", enc[i + 1]) &&
                               strchr("0123456789ABCDEF", enc[i + 2]));
                i += 2;
            } else {
                CU_ASSERT_TRUE(unreserved(c) || (keep && c == '/'));
            }
        }
        CU_ASSERT_EQUAL(sg_pct_decode(enc, n, dec, false), sizeof in);
        CU_ASSERT_EQUAL(memcmp(dec, in, sizeof in), 0);
        CU_ASSERT_EQUAL(sg_pct_decode_strict(enc, n, dec, true), (long)sizeof in);
        CU_ASSERT_EQUAL(memcmp(dec, in, sizeof in), 0);
    }
    CU_ASSERT_EQUAL(sg_uri_encode("", 0, false, enc), 0);
    CU_ASSERT_STRING_EQUAL(enc, "");
    CU_ASSERT_EQUAL(sg_uri_encode("a b/c+d~\xE2\x82\xAC", 11, true, enc), 21);
    CU_ASSERT_STRING_EQUAL(enc, "a%20b/c%2Bd~%E2%82%AC");
}

static void pct_decode_strict_refuses_cut_or_foreign_escapes(void)
{
    static const struct { const char *in; bool plus; const char *out; } cases[] = {
        { "a%20b", false, "a b" }, { "%2f%2F", false, "//" }, { "a+b", false, "a+b" },
        { "a+b", true, "a b" }, { "%2B+", true, "+ " }, { "", false, "" },
        { "%", false, NULL }, { "%4", false, NULL }, { "x%4", false, NULL },
        { "%zz", false, NULL }, { "%%41", false, NULL }, { "a%g0", true, NULL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[16];
        long n = sg_pct_decode_strict(cases[i].in, strlen(cases[i].in), out, cases[i].plus);
        if (!cases[i].out) {
            CU_ASSERT_EQUAL(n, -1);
            continue;
        }
        CU_ASSERT_FATAL(n >= 0);
        out[n] = '\0';
        CU_ASSERT_STRING_EQUAL(out, cases[i].out);
    }
    char nul[4];
    CU_ASSERT_EQUAL(sg_pct_decode_strict("%00", 3, nul, false), 1);   /* the caller decides */
    CU_ASSERT_EQUAL(nul[0], '\0');
}

static void utf8_refuses_overlongs_surrogates_and_stray_bytes(void)
{
    static const struct {
        const char *s;
        bool ok;
    } cases[] = {
        { "plain/key.txt", true },
        { "\xC3\xA9t\xC3\xA9", true },                  /* été */
        { "\xE2\x82\xAC", true },                        /* U+20AC */
        { "\xF0\x9F\x98\x80", true },                    /* U+1F600 */
        { "\xEF\xBF\xBD", true },                        /* U+FFFD */
        { "\xF4\x8F\xBF\xBF", true },                    /* U+10FFFF */
        { "\xFF\xFE", false },
        { "\xC0\xAE", false },                           /* overlong '.' */
        { "\xC1\xBF", false },
        { "\xE0\x80\xAE", false },                       /* overlong, 3 bytes */
        { "\xF0\x80\x80\xAE", false },                   /* overlong, 4 bytes */
        { "\xED\xA0\x80", false },                       /* U+D800, a surrogate */
        { "\xED\xBF\xBF", false },                       /* U+DFFF */
        { "\xF4\x90\x80\x80", false },                   /* past U+10FFFF */
        { "\xF5\x80\x80\x80", false },
        { "\x80", false },                               /* stray continuation */
        { "a\xC3", false },                              /* cut short */
        { "\xE2\x82", false },
        { "\xE2\x28\xA1", false },                       /* bad continuation */
    };
    for (size_t i = 0; i < CU_N(cases); i++) {
        bool ok = sg_utf8_valid(cases[i].s, strlen(cases[i].s));
        if (ok != cases[i].ok)
            fprintf(stderr, "utf8 case %zu\n", i);
        CU_ASSERT_EQUAL(ok, cases[i].ok);
    }
    CU_ASSERT_EQUAL(sg_utf8_seq("\xE2\x82\xAC", 3), 3);
    CU_ASSERT_EQUAL(sg_utf8_seq("\xE2\x82\xAC", 2), 0);
    CU_ASSERT_EQUAL(sg_utf8_seq("", 0), 0);
}

int register_tests(void)
{
    static const struct cu_test tests[] = {
        { "hexval_takes_both_cases_and_nothing_else", hexval_takes_both_cases_and_nothing_else },
        { "hex_round_trips_and_refuses_odd_or_foreign_digits",
          hex_round_trips_and_refuses_odd_or_foreign_digits },
        { "base64_encodes_rfc4648_vectors", base64_encodes_rfc4648_vectors },
        { "base64_is_strict", base64_is_strict },
        { "pct_decode_keeps_bad_escapes_and_reads_plus_as_asked",
          pct_decode_keeps_bad_escapes_and_reads_plus_as_asked },
        { "uri_encode_round_trips_every_byte", uri_encode_round_trips_every_byte },
        { "pct_decode_strict_refuses_cut_or_foreign_escapes",
          pct_decode_strict_refuses_cut_or_foreign_escapes },
        { "utf8_refuses_overlongs_surrogates_and_stray_bytes",
          utf8_refuses_overlongs_surrogates_and_stray_bytes },
    };
    return cu_add_suite("common_encoding", NULL, NULL, tests, CU_N(tests));
}
