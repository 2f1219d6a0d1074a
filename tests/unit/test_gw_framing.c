/* tests/unit/test_gw_framing.c - gw_framing_error: which header sets make a
 * body length two HTTP parsers could read differently (RFC 9112 6.1, 6.3),
 * so that the gateway answers 400 and closes instead of letting the bytes
 * after the body run as a smuggled request. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "gw_int.h"

#define MAX_H 4

struct framing_case {
    const char *name;
    struct auth_hdr h[MAX_H];   /* lower-case names, as the server collects them */
    const char *want;           /* a piece of the message, or NULL when accepted */
};

static const struct framing_case cases[] = {
    { "no_body_headers", { { "host", "x" } }, NULL },
    { "one_length", { { "content-length", "5" } }, NULL },
    { "zero_length", { { "content-length", "0" } }, NULL },
    { "chunked", { { "transfer-encoding", "chunked" } }, NULL },
    { "chunked_any_case_with_ows", { { "transfer-encoding", " Chunked " } }, NULL },
    { "same_length_twice", { { "content-length", "5" }, { "content-length", "5" } }, NULL },
    { "same_length_leading_zero", { { "content-length", "05" }, { "content-length", "5" } },
      NULL },
    { "te_and_cl", { { "transfer-encoding", "chunked" }, { "content-length", "5" } },
      "both Transfer-Encoding and Content-Length" },
    { "cl_and_te", { { "content-length", "0" }, { "transfer-encoding", "chunked" } },
      "both Transfer-Encoding and Content-Length" },
    { "two_lengths", { { "content-length", "5" }, { "content-length", "50" } },
      "two different Content-Length" },
    { "two_lengths_zero_first", { { "content-length", "0" }, { "content-length", "7" } },
      "two different Content-Length" },
    { "length_list", { { "content-length", "5, 5" } }, "single decimal number" },
    { "length_signed", { { "content-length", "+5" } }, "single decimal number" },
    { "length_empty", { { "content-length", "" } }, "single decimal number" },
    { "length_hex", { { "content-length", "0x10" } }, "single decimal number" },
    { "two_te_lines", { { "transfer-encoding", "chunked" }, { "transfer-encoding", "chunked" } },
      "single \"chunked\"" },
    { "te_gzip_chunked", { { "transfer-encoding", "gzip, chunked" } }, "single \"chunked\"" },
    { "te_identity", { { "transfer-encoding", "identity" } }, "single \"chunked\"" },
    { "space_before_colon", { { "transfer-encoding ", "chunked" } }, "white space" },
};

static void framing_table(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct framing_case *c = &cases[i];
        size_t n = 0;
        while (n < MAX_H && c->h[n].name)
            n++;
        const char *got = gw_framing_error(c->h, n);
        bool ok = c->want ? got && strstr(got, c->want) : got == NULL;
        if (!ok)
            fprintf(stderr, "case %s: got %s, want %s\n", c->name, got ? got : "(accepted)",
                    c->want ? c->want : "(accepted)");
        CU_ASSERT_TRUE(ok);
    }
}

int register_tests(void);
int register_tests(void)
{
    CU_pSuite s = CU_add_suite("gw_framing", NULL, NULL);
    if (!s)
        return -1;
    CU_add_test(s, "ambiguous_framing_is_refused_and_plain_framing_accepted", framing_table);
    return 0;
}
