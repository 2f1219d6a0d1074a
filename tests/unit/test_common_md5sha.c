/* tests/unit/test_common_md5sha.c - MD5 and SHA-256 in one pass
 * (common/md5sha.h): the standard test vectors of both; any split of any
 * length equal to OpenSSL's two one-shot digests; and the switch that
 * turns the one pass off. On a CPU without the SHA extensions the digest
 * tests fail, saying so: the machines this suite runs on have them, and a
 * test that skips would count as passed. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "cu.h"
#include "common_int.h"
#include "md5sha.h"

static void hex(const uint8_t *md, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static bool have_sha_ni(void)
{
    sg_md5sha_set(true);   /* a clang build has it off by default */
    if (sg_md5sha_available())
        return true;
    fprintf(stderr, "\nthis CPU has no SHA extensions: common/md5sha.c cannot be tested here\n");
    CU_FAIL("no SHA extensions");
    return false;
}

static void one_pass(const void *p, size_t n, size_t split, char md5_hex[33], char sha_hex[65])
{
    struct sg_md5sha h;
    uint8_t md5[16], sha[32];
    sg_md5sha_init(&h);
    const uint8_t *b = p;
    for (size_t off = 0; off < n;) {
        size_t c = split && n - off > split ? split : n - off;
        sg_md5sha_update(&h, b + off, c);
        off += c;
    }
    sg_md5sha_final(&h, md5, sha);
    hex(md5, 16, md5_hex);
    hex(sha, 32, sha_hex);
}

static void openssl_both(const void *p, size_t n, char md5_hex[33], char sha_hex[65])
{
    uint8_t md[32];
    unsigned int len = 0;
    EVP_Digest(p, n, md, &len, EVP_md5(), NULL);
    hex(md, 16, md5_hex);
    EVP_Digest(p, n, md, &len, EVP_sha256(), NULL);
    hex(md, 32, sha_hex);
}

static void standard_vectors_of_both(void)
{
    if (!have_sha_ni())
        return;
    static const struct { const char *in, *md5, *sha256; } v[] = {
        { "", "d41d8cd98f00b204e9800998ecf8427e",
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
        { "abc", "900150983cd24fb0d6963f7d28e17f72",
          "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
        { "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
          "8215ef0796a20bcaaae116d3876c664a",
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
        { "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
          "57edf4a22be3c955ac49da2e2107b67a",
          "f371bc4a311f2b009eef952dd83ca80e2b60026c8e935592d0f9c308453c813e" },
    };
    char m[33], s[65];
    for (size_t i = 0; i < CU_N(v); i++) {
        one_pass(v[i].in, strlen(v[i].in), 0, m, s);
        CU_ASSERT_STRING_EQUAL(m, v[i].md5);
        CU_ASSERT_STRING_EQUAL(s, v[i].sha256);
    }
    /* a million 'a', in pieces of 999 */
    size_t n = 1000000;
    char *a = malloc(n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    memset(a, 'a', n);
    one_pass(a, n, 999, m, s);
    CU_ASSERT_STRING_EQUAL(m, "7707d6ae4e027c70eea2a935c2296f21");
    CU_ASSERT_STRING_EQUAL(s, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(a);
}

/* Lengths around every block and pad boundary (55, 56, 63, 64, 119, 120,
 * ...) and a few large ones, each fed whole and in random pieces. */
static void any_split_of_any_length_equals_openssl(void)
{
    if (!have_sha_ni())
        return;
    size_t max = (1 << 20) + 77;
    uint8_t *data = malloc(max);
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    unsigned seed = 29;
    for (size_t i = 0; i < max; i++)
        data[i] = (uint8_t)rand_r(&seed);
    static const size_t big[] = { 4096, 65535, 65536, 65537, (1 << 20) + 77 };
    int failed = 0;
    for (size_t t = 0; t < 300 + CU_N(big); t++) {
        size_t n = t < 300 ? t : big[t - 300];
        char want_m[33], want_s[65], m[33], s[65];
        openssl_both(data, n, want_m, want_s);
        size_t splits[] = { 0, 1, 7, 64, 65, 1 + (size_t)rand_r(&seed) % 5000 };
        for (size_t k = 0; k < CU_N(splits); k++) {
            one_pass(data, n, splits[k], m, s);
            if (strcmp(m, want_m) != 0 || strcmp(s, want_s) != 0) {
                if (failed++ < 5)
                    fprintf(stderr, "\nlength %zu split %zu: %s %s\n", n, splits[k], m, s);
            }
        }
    }
    CU_ASSERT_EQUAL(failed, 0);
    free(data);
}

static void switched_off_it_says_not_available(void)
{
    if (!have_sha_ni())
        return;
    sg_md5sha_set(false);
    CU_ASSERT_FALSE(sg_md5sha_available());
    sg_md5sha_set(true);
    CU_ASSERT_TRUE(sg_md5sha_available());
}

int register_tests(void)
{
    static const struct cu_test tests[] = {
        { "standard_vectors_of_both", standard_vectors_of_both },
        { "any_split_of_any_length_equals_openssl", any_split_of_any_length_equals_openssl },
        { "switched_off_it_says_not_available", switched_off_it_says_not_available },
    };
    return cu_add_suite("common_md5sha", NULL, NULL, tests, CU_N(tests));
}
