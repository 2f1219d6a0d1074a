/* tests/unit/test_common_s3name.c - S3's bucket naming rule
 * (sg_bucket_name_valid, common/s3name.h), the one rule the gateway, the
 * directory store and conf share: a table of names AWS accepts and refuses. */
#include <CUnit/CUnit.h>
#include <stdbool.h>
#include <stdio.h>

#include "cu.h"
#include "s3name.h"

static void bucket_name_rules_table(void)
{
    static const struct {
        const char *name;
        bool ok;
    } cases[] = {
        { "abc", true }, { "my.bucket-1", true }, { "a1b", true }, { "1.2.3", true },
        { "a-b--c", true }, { "1.2.3.4a", true }, { "xn-abc", true }, { "sthree", true },
        { "amzn-s3-demo", true }, { "abc-s3alia", true }, { "s3alias", true },
        { "a.mrap.b", true }, { "x-s3", true },
        { "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", true },
        /* length, characters, ends */
        { "", false }, { "ab", false }, { "Abc", false }, { "a_b", false }, { "a b", false },
        { "a/b", false }, { ".abc", false }, { "abc.", false }, { "-abc", false },
        { "abc-", false }, { ".shardgate", false }, { "caf\xc3\xa9", false },
        { "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false },
        /* dots and dashes together */
        { "a..b", false }, { "a.-b", false }, { "a-.b", false },
        /* IPv4-formatted */
        { "192.168.1.1", false }, { "999.1.1.1", false }, { "0.0.0.0", false },
        /* reserved prefixes and suffixes */
        { "xn--abc", false }, { "sthree-abc", false }, { "sthree-configurator", false },
        { "amzn-s3-demo-bucket", false }, { "abc-s3alias", false }, { "abc--ol-s3", false },
        { "abc.mrap", false }, { "abc--x-s3", false }, { "abc--table-s3", false },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CU_ASSERT_EQUAL(sg_bucket_name_valid(cases[i].name), cases[i].ok);
        if (sg_bucket_name_valid(cases[i].name) != cases[i].ok)
            fprintf(stderr, "\nbucket '%s': want %s\n", cases[i].name,
                    cases[i].ok ? "valid" : "invalid");
    }
}

int register_tests(void)
{
    static const struct cu_test tests[] = {
        { "bucket_name_rules_table", bucket_name_rules_table },
    };
    return cu_add_suite("common_s3name", NULL, NULL, tests, CU_N(tests));
}
