/* tests/fuzz/fuzz_common.h - shared bits of the libFuzzer targets: a fixed
 * credential store and clock, and splitting one input into NUL-separated
 * fields (a field missing from the input is ""). */
#ifndef SHARDGATE_FUZZ_COMMON_H
#define SHARDGATE_FUZZ_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "auth_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_AK "AKIAIOSFODNN7EXAMPLE"
#define FZ_SK "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define FZ_T0 ((time_t)1369353600)   /* 20130524T000000Z, the AWS examples' date */

static inline time_t fz_clock(void) { return FZ_T0; }

static inline struct auth *fz_auth(void)
{
    static struct conf_perm perms[] = { { "*", CONF_PERM_ADMIN } };
    static struct conf_user users[] = {
        { .name = "example", .access_key = FZ_AK, .secret_key = FZ_SK, .perms = perms,
          .n_perms = 1 },
    };
    static struct conf_bucket buckets[] = { { "pub", true } };
    static struct conf c;
    static struct auth *a;
    if (!a) {
        c.region = "us-east-1";
        c.vhost_domain = "s3.amazonaws.com";   /* the SigV2 resource's bucket */
        c.sigv2 = true;
        c.users = users;
        c.n_users = 1;
        c.buckets = buckets;
        c.n_buckets = 1;
        log_set_level(LOG_LVL_ERROR);
        if (auth_open(&c, &a) != 0)
            abort();
        auth_set_clock(a, fz_clock);
    }
    return a;
}

/* Splits data into up to n NUL-terminated fields at '\0' bytes. Returns a
 * malloc'd copy that the fields point into. */
static inline char *fz_fields(const uint8_t *data, size_t size, const char **f, size_t n)
{
    char *buf = malloc(size + 1);
    if (!buf)
        abort();
    memcpy(buf, data, size);
    buf[size] = '\0';
    size_t k = 0;
    char *p = buf, *end = buf + size;
    while (k < n) {
        f[k++] = p;
        char *z = memchr(p, '\0', (size_t)(end - p) + 1);
        if (z == end || z == NULL)
            break;
        p = z + 1;
    }
    while (k < n)
        f[k++] = "";
    return buf;
}

#endif
