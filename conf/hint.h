/* conf/hint.h - parsing a prefetch hint's JSON body (POST /{bucket}?prefetch,
 * see cache/HINTS.md) into a plain struct, and expanding WebDataset brace
 * templates ("train/shard-{000000..001023}.tar") into keys. Lives in conf/
 * because only conf/ may touch jansson; nothing here logs or keeps state. */
#ifndef SHARDGATE_CONF_HINT_H
#define SHARDGATE_CONF_HINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONF_HINT_KEY_MAX 1024u               /* bytes of one key (S3's own limit) */
#define CONF_HINT_CONSUMER_MAX 128u           /* bytes of "consumer" */
#define CONF_HINT_WINDOW_OBJECTS_MAX 1000000u /* "window_objects" upper bound */

/* A parsed hint. Exactly one of keys (n_keys >= 1) and prefix is set. */
struct conf_hint {
    char **keys;            /* keys, in order (from "keys" or an expanded "template"); NULL with prefix */
    size_t n_keys;
    char *prefix;           /* "prefix" form, else NULL (the gateway lists the bucket);
                               "" is allowed: the whole bucket */
    bool ordered;           /* "ordered": default false */
    bool has_epoch; uint64_t epoch;   /* "epoch": 0..2^63-1 */
    char *consumer;         /* NULL when absent; at most 128 bytes, no NUL */
    uint64_t window_bytes;  /* 0 = not given */
    unsigned window_objects;/* 0 = not given; else 1..1,000,000 */
    bool pin;               /* "pin": default false */
    unsigned stage_ahead;   /* "stage_ahead": 0 = not given; else 1..1,000,000 */
};

/* The gateway's limits on a hint, e.g. {1000000, 16 MiB} (prefetch_max_objects
 * and the body cap of HINTS.md). */
struct conf_hint_limits { size_t max_objects; size_t max_body; };

/* Parses body[0..len) (not NUL-terminated; borrowed) as a prefetch hint under
 * `lim` (borrowed). Refuses, before looking at the JSON, a body over
 * lim->max_body; then invalid JSON (with jansson's line and column), duplicate
 * fields, a body that is not an object, unknown fields (the message lists the
 * allowed ones), a field of the wrong type or out of range, none or more than
 * one of keys/prefix/template, an empty key list or an empty/over-long/NUL key,
 * a bad template (see conf_hint_expand), more than lim->max_objects keys, and
 * window_bytes/window_objects/stage_ahead without "ordered": true.
 * Returns 0 with *out filled (returns new: free with conf_hint_free), or -1
 * with *out zeroed (conf_hint_free on it is harmless) and a one-line message
 * in `err` (always NUL-terminated when errlen > 0) naming the field, array
 * index or template position at fault. Any thread; no shared state. */
int conf_hint_parse(const char *body, size_t len, const struct conf_hint_limits *lim,
                    struct conf_hint *out, char *err, size_t errlen);

/* Frees what conf_hint_parse returned in *h and zeroes it. NULL-safe. */
void conf_hint_free(struct conf_hint *h);

/* Expands the brace template `tmpl` (borrowed, NUL-terminated): literal text
 * and any number of groups, each a numeric range {A..B} (decimal, A <= B;
 * zero-padded to the width of A when A has a leading zero or A and B have the
 * same width) or a list {x,y,z} (non-empty items; a group with a comma is a
 * list, even if an item contains ".."). No nesting; a group that is neither,
 * like "{x}", is refused rather than kept literally. Several groups give the
 * cartesian product, leftmost varying slowest.
 * The number of keys (product of group sizes, overflow-checked) and the
 * longest key are computed before anything is allocated, so a template over
 * `max_objects` keys (or with a key over 1024 bytes, or an empty key) is
 * refused in time linear in its length, whatever it would expand to.
 * Returns 0 with *keys / *n_keys set (returns new: *n_keys >= 1 malloc'd
 * strings in a malloc'd array; free with conf_hint_keys_free), or -1 with
 * *keys = NULL, *n_keys = 0 and a message starting "template: " and naming
 * the 1-based byte position at fault. Any thread. */
int conf_hint_expand(const char *tmpl, size_t max_objects, char ***keys, size_t *n_keys,
                     char *err, size_t errlen);

/* Frees keys[0..n) and the array. NULL-safe. */
void conf_hint_keys_free(char **keys, size_t n);

#endif
