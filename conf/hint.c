/* conf/hint.c - a prefetch hint's JSON body to struct conf_hint, and brace
 * template expansion. Every refusal is one line naming what is wrong, since it
 * becomes the Message of the client's 400 InvalidArgument as it is. */
#include "hint.h"
#include "conf_int.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How much of a client's text (field name, group) goes back in a message:
 * enough to recognise it, not enough to bloat the error document. */
#define ECHO_MAX 64

#define ALLOWED_FIELDS "keys, prefix, template, ordered, epoch, consumer, window_bytes, " \
                       "window_objects, pin, stage_ahead"

static int echo_len(size_t n)
{
    return n > ECHO_MAX ? ECHO_MAX : (int)n;
}

static char *dup_bytes(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d != NULL) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

void conf_hint_keys_free(char **keys, size_t n)
{
    if (keys == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
}

void conf_hint_free(struct conf_hint *h)
{
    if (h == NULL)
        return;
    conf_hint_keys_free(h->keys, h->n_keys);
    free(h->prefix);
    free(h->consumer);
    memset(h, 0, sizeof *h);
}

/* ---- templates ---- */

/* One brace group and the literal text before it. A list's items are
 * items[first_item .. first_item + count) of the shared item table. */
struct tmpl_group {
    size_t lit_off, lit_len;    /* literal text preceding the group */
    bool is_range;
    uint64_t lo;                /* range: first number */
    size_t width;               /* range: zero-pad to this many digits (0 = none) */
    size_t first_item;          /* list */
    uint64_t count;             /* values in the group, >= 1 */
};

struct tmpl_item { size_t off, len; };

/* What a scan of the template found; with groups/items NULL the scan only
 * counts (pass 1), otherwise it also records them (pass 2). */
struct tmpl_scan {
    struct tmpl_group *groups;
    struct tmpl_item *items;
    size_t n_groups, n_items;
    size_t tail_off, tail_len;  /* literal text after the last group */
    uint64_t total;             /* product of counts, valid when !overflow */
    bool overflow;              /* the product does not fit in 64 bits */
    size_t max_key;             /* longest key the template yields */
};

static size_t u64_digits(uint64_t v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* Writes v in decimal, zero-padded to `width`, at dst; returns the length. */
static size_t u64_put(char *dst, uint64_t v, size_t width)
{
    size_t n = u64_digits(v);
    size_t len = n > width ? n : width;
    for (size_t i = len; i > 0; i--) {
        dst[i - 1] = (char)('0' + v % 10);
        v /= 10;
    }
    return len;
}

/* Parses a range bound: one or more decimal digits that fit in 64 bits.
 * `which` and `pos` are for the message. */
static int bound_parse(const char *s, size_t n, const char *which, size_t pos, uint64_t *out,
                       char *err, size_t errlen)
{
    uint64_t v = 0;
    if (n == 0)
        return conf_fail(err, errlen, "template: the range at position %zu has no %s bound "
                    "(want {A..B} with decimal A and B)", pos, which);
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return conf_fail(err, errlen, "template: the %s bound \"%.*s\" of the range at position "
                        "%zu is not a non-negative decimal number", which, echo_len(n), s, pos);
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return conf_fail(err, errlen, "template: the %s bound of the range at position %zu is "
                        "too large", which, pos);
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* Checks one group, the text between '{' (at 1-based position `pos`) and its
 * '}', and adds it to `sc`. */
static int group_scan(const char *g, size_t n, size_t pos, size_t g_off, struct tmpl_scan *sc,
                      struct tmpl_group *out, char *err, size_t errlen)
{
    size_t item_len_max = 0;

    if (n == 0)
        return conf_fail(err, errlen, "template: empty group {} at position %zu", pos);
    out->is_range = false;
    out->lo = 0;
    out->width = 0;
    out->first_item = sc->n_items;
    out->count = 0;
    if (memchr(g, ',', n) != NULL) {
        size_t start = 0;
        for (size_t i = 0; i <= n; i++) {
            if (i < n && g[i] != ',')
                continue;
            if (i == start)
                return conf_fail(err, errlen, "template: empty item in the list at position %zu "
                            "(item %" PRIu64 ")", pos, out->count + 1);
            if (sc->items != NULL)
                sc->items[sc->n_items] = (struct tmpl_item){ g_off + start, i - start };
            sc->n_items++;
            out->count++;
            if (i - start > item_len_max)
                item_len_max = i - start;
            start = i + 1;
        }
    } else {
        const char *dots = NULL;
        for (size_t i = 0; i + 1 < n; i++) {
            if (g[i] == '.' && g[i + 1] == '.') {
                dots = g + i;
                break;
            }
        }
        if (dots == NULL)
            return conf_fail(err, errlen, "template: group {%.*s} at position %zu is neither a "
                        "range {A..B} nor a list {x,y}", echo_len(n), g, pos);
        size_t na = (size_t)(dots - g), nb = n - na - 2;
        const char *b = dots + 2;
        uint64_t lo, hi;
        if (bound_parse(g, na, "start", pos, &lo, err, errlen) != 0
            || bound_parse(b, nb, "end", pos, &hi, err, errlen) != 0)
            return -1;
        if (lo > hi)
            return conf_fail(err, errlen, "template: range {%.*s} at position %zu runs backwards "
                        "(%" PRIu64 " > %" PRIu64 ")", echo_len(n), g, pos, lo, hi);
        out->is_range = true;
        out->lo = lo;
        /* "{08..10}" and "{000..999}" pad; "{8..10}" does not (WebDataset's rule). */
        if ((na > 1 && g[0] == '0') || na == nb)
            out->width = na;
        size_t w = u64_digits(hi);
        item_len_max = w > out->width ? w : out->width;
        if (hi - lo == UINT64_MAX)
            sc->overflow = true;        /* {0..18446744073709551615}: count is 2^64 */
        else
            out->count = hi - lo + 1;
    }
    if (!sc->overflow) {
        if (out->count != 0 && sc->total > UINT64_MAX / out->count)
            sc->overflow = true;
        else
            sc->total *= out->count;
    }
    sc->max_key += item_len_max;
    return 0;
}

/* Walks the template once: syntax, group sizes, their product and the longest
 * key. Records groups and items when sc->groups / sc->items are set. */
static int tmpl_scan(const char *t, size_t len, struct tmpl_scan *sc, char *err, size_t errlen)
{
    size_t lit_off = 0;

    sc->n_groups = sc->n_items = 0;
    sc->total = 1;
    sc->overflow = false;
    sc->max_key = 0;
    for (size_t i = 0; i < len; i++) {
        if (t[i] == '}')
            return conf_fail(err, errlen, "template: '}' at position %zu has no matching '{'",
                        i + 1);
        if (t[i] != '{')
            continue;
        size_t j = i + 1;
        while (j < len && t[j] != '{' && t[j] != '}')
            j++;
        if (j == len)
            return conf_fail(err, errlen, "template: '{' at position %zu is never closed", i + 1);
        if (t[j] == '{')
            return conf_fail(err, errlen, "template: nested '{' at position %zu (groups cannot "
                        "nest)", j + 1);
        struct tmpl_group g;
        if (group_scan(t + i + 1, j - i - 1, i + 1, i + 1, sc, &g, err, errlen) != 0)
            return -1;
        g.lit_off = lit_off;
        g.lit_len = i - lit_off;
        sc->max_key += g.lit_len;
        if (sc->groups != NULL)
            sc->groups[sc->n_groups] = g;
        sc->n_groups++;
        lit_off = j + 1;
        i = j;
    }
    sc->tail_off = lit_off;
    sc->tail_len = len - lit_off;
    sc->max_key += sc->tail_len;
    return 0;
}

int conf_hint_expand(const char *tmpl, size_t max_objects, char ***keys, size_t *n_keys,
                     char *err, size_t errlen)
{
    struct tmpl_scan sc;
    size_t *idx = NULL;
    char **out = NULL;
    size_t n = 0, len = strlen(tmpl);
    char buf[CONF_HINT_KEY_MAX + 1];
    int rc = -1;

    *keys = NULL;
    *n_keys = 0;
    memset(&sc, 0, sizeof sc);
    if (len == 0)
        return conf_fail(err, errlen, "template: must not be empty");
    /* Pass 1 only counts, so a template of 10^12 keys costs nothing but its scan. */
    if (tmpl_scan(tmpl, len, &sc, err, errlen) != 0)
        return -1;
    if (sc.overflow)
        return conf_fail(err, errlen, "template: expands to more than %" PRIu64 " keys, more than "
                    "the limit of %zu", UINT64_MAX, max_objects);
    if (sc.total > max_objects)
        return conf_fail(err, errlen, "template: expands to %" PRIu64 " keys, more than the limit "
                    "of %zu", sc.total, max_objects);
    if (sc.max_key > CONF_HINT_KEY_MAX)
        return conf_fail(err, errlen, "template: yields keys of up to %zu bytes, more than the "
                    "limit of %u", sc.max_key, CONF_HINT_KEY_MAX);

    /* Pass 2 records the groups; n_groups <= max_key (each group yields at
     * least one byte) and n_items <= len, so both allocations are small. */
    sc.groups = calloc(sc.n_groups ? sc.n_groups : 1, sizeof *sc.groups);
    sc.items = calloc(sc.n_items ? sc.n_items : 1, sizeof *sc.items);
    idx = calloc(sc.n_groups ? sc.n_groups : 1, sizeof *idx);
    if (sc.groups == NULL || sc.items == NULL || idx == NULL) {
        conf_fail(err, errlen, "template: out of memory");
        goto out;
    }
    if (tmpl_scan(tmpl, len, &sc, err, errlen) != 0)
        goto out;       /* cannot happen: the same scan passed above */

    size_t total = (size_t)sc.total;
    out = calloc(total, sizeof *out);
    if (out == NULL) {
        conf_fail(err, errlen, "template: out of memory for %zu keys", total);
        goto out;
    }
    for (n = 0; n < total; n++) {
        size_t k = 0;
        for (size_t g = 0; g < sc.n_groups; g++) {
            const struct tmpl_group *gr = &sc.groups[g];
            memcpy(buf + k, tmpl + gr->lit_off, gr->lit_len);
            k += gr->lit_len;
            if (gr->is_range) {
                k += u64_put(buf + k, gr->lo + idx[g], gr->width);
            } else {
                const struct tmpl_item *it = &sc.items[gr->first_item + idx[g]];
                memcpy(buf + k, tmpl + it->off, it->len);
                k += it->len;
            }
        }
        memcpy(buf + k, tmpl + sc.tail_off, sc.tail_len);
        k += sc.tail_len;
        out[n] = dup_bytes(buf, k);
        if (out[n] == NULL) {
            conf_fail(err, errlen, "template: out of memory at key %zu of %zu", n + 1, total);
            goto out;
        }
        /* odometer: the rightmost group varies fastest */
        for (size_t g = sc.n_groups; g > 0; g--) {
            if (++idx[g - 1] < sc.groups[g - 1].count)
                break;
            idx[g - 1] = 0;
        }
    }
    *keys = out;
    *n_keys = total;
    out = NULL;
    rc = 0;
out:
    conf_hint_keys_free(out, n);
    free(idx);
    free(sc.groups);
    free(sc.items);
    return rc;
}

/* ---- the JSON body ---- */

/* The fields as found, before the cross-field rules. */
struct hint_fields {
    json_t *keys, *prefix, *tmpl, *ordered, *epoch, *consumer, *wbytes, *wobjects, *pin;
    json_t *ahead;
};

static bool key_is(const char *k, size_t klen, const char *name)
{
    return klen == strlen(name) && memcmp(k, name, klen) == 0;
}

/* Sorts the body's fields into `f`; refuses unknown ones. */
static int fields_collect(json_t *root, struct hint_fields *f, char *err, size_t errlen)
{
    const char *k;
    size_t klen;
    json_t *v;

    json_object_keylen_foreach(root, k, klen, v) {
        json_t **slot = key_is(k, klen, "keys") ? &f->keys
            : key_is(k, klen, "prefix") ? &f->prefix
            : key_is(k, klen, "template") ? &f->tmpl
            : key_is(k, klen, "ordered") ? &f->ordered
            : key_is(k, klen, "epoch") ? &f->epoch
            : key_is(k, klen, "consumer") ? &f->consumer
            : key_is(k, klen, "window_bytes") ? &f->wbytes
            : key_is(k, klen, "window_objects") ? &f->wobjects
            : key_is(k, klen, "pin") ? &f->pin
            : key_is(k, klen, "stage_ahead") ? &f->ahead
            : NULL;
        if (slot == NULL)
            return conf_fail(err, errlen, "unknown field \"%.*s\"; allowed: " ALLOWED_FIELDS,
                        echo_len(klen), k);
        *slot = v;
    }
    return 0;
}

static int get_bool(json_t *v, const char *name, bool *out, char *err, size_t errlen)
{
    if (v == NULL)
        return 0;
    if (!json_is_boolean(v))
        return conf_fail(err, errlen, "%s must be true or false", name);
    *out = json_is_true(v);
    return 0;
}

/* An integer in [min, max]; a JSON real such as 3.0 is not an integer. */
static int get_uint(json_t *v, const char *name, uint64_t min, uint64_t max, uint64_t *out,
                    char *err, size_t errlen)
{
    if (!json_is_integer(v))
        return conf_fail(err, errlen, "%s must be an integer", name);
    json_int_t i = json_integer_value(v);
    if (i < 0 || (uint64_t)i < min || (uint64_t)i > max) {
        if (max == UINT64_MAX)
            return conf_fail(err, errlen, "%s must be an integer >= %" PRIu64
                        ", not %" JSON_INTEGER_FORMAT, name, min, i);
        return conf_fail(err, errlen, "%s must be an integer from %" PRIu64 " to %" PRIu64
                    ", not %" JSON_INTEGER_FORMAT, name, min, max, i);
    }
    *out = (uint64_t)i;
    return 0;
}

/* A string without NUL bytes of at most `max` bytes (and at least one when
 * !allow_empty). `what` names it in the message ("consumer", "keys[3]"). */
static int get_string(json_t *v, const char *what, size_t max, bool allow_empty,
                      const char **s, size_t *n, char *err, size_t errlen)
{
    if (!json_is_string(v))
        return conf_fail(err, errlen, "%s must be a string", what);
    *s = json_string_value(v);
    *n = json_string_length(v);
    if (memchr(*s, '\0', *n) != NULL)
        return conf_fail(err, errlen, "%s contains a NUL character", what);
    if (*n == 0 && !allow_empty)
        return conf_fail(err, errlen, "%s must not be empty", what);
    if (*n > max)
        return conf_fail(err, errlen, "%s is %zu bytes, more than the limit of %zu", what, *n, max);
    return 0;
}

static int keys_load(json_t *arr, size_t max_objects, struct conf_hint *h, char *err,
                     size_t errlen)
{
    char what[40];

    if (!json_is_array(arr))
        return conf_fail(err, errlen, "keys must be an array of strings");
    size_t n = json_array_size(arr);
    if (n == 0)
        return conf_fail(err, errlen, "keys must not be empty");
    if (n > max_objects)
        return conf_fail(err, errlen, "keys has %zu entries, more than the limit of %zu", n,
                    max_objects);
    h->keys = calloc(n, sizeof *h->keys);
    if (h->keys == NULL)
        return conf_fail(err, errlen, "out of memory for %zu keys", n);
    for (size_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        snprintf(what, sizeof what, "keys[%zu]", i);
        if (get_string(json_array_get(arr, i), what, CONF_HINT_KEY_MAX, false, &s, &len, err,
                       errlen) != 0)
            return -1;
        h->keys[i] = dup_bytes(s, len);
        if (h->keys[i] == NULL)
            return conf_fail(err, errlen, "out of memory for keys[%zu]", i);
        h->n_keys = i + 1;
    }
    return 0;
}

/* Fills `h` from the fields; on failure `h` holds what was done so far, for
 * the caller to free. */
static int hint_build(const struct hint_fields *f, const struct conf_hint_limits *lim,
                      struct conf_hint *h, char *err, size_t errlen)
{
    const char *s;
    size_t n;
    uint64_t u = 0;

    /* exactly one source of keys */
    int sources = (f->keys != NULL) + (f->prefix != NULL) + (f->tmpl != NULL);
    if (sources == 0)
        return conf_fail(err, errlen, "one of keys, prefix or template is required");
    if (sources > 1)
        return conf_fail(err, errlen, "only one of keys, prefix and template may be given, not %s",
                    sources == 3 ? "all three"
                    : f->tmpl == NULL ? "keys and prefix"
                    : f->keys != NULL ? "keys and template" : "prefix and template");

    if (get_bool(f->ordered, "ordered", &h->ordered, err, errlen) != 0
        || get_bool(f->pin, "pin", &h->pin, err, errlen) != 0)
        return -1;
    if (f->epoch != NULL) {
        if (get_uint(f->epoch, "epoch", 0, UINT64_MAX, &h->epoch, err, errlen) != 0)
            return -1;
        h->has_epoch = true;
    }
    if (f->consumer != NULL) {
        if (get_string(f->consumer, "consumer", CONF_HINT_CONSUMER_MAX, true, &s, &n, err,
                       errlen) != 0)
            return -1;
        if ((h->consumer = dup_bytes(s, n)) == NULL)
            return conf_fail(err, errlen, "out of memory");
    }
    if (f->wbytes != NULL
        && get_uint(f->wbytes, "window_bytes", 1, UINT64_MAX, &h->window_bytes, err,
                    errlen) != 0)
        return -1;
    if (f->wobjects != NULL) {
        if (get_uint(f->wobjects, "window_objects", 1, CONF_HINT_WINDOW_OBJECTS_MAX, &u, err,
                     errlen) != 0)
            return -1;
        h->window_objects = (unsigned)u;
    }
    if (f->ahead != NULL) {
        if (get_uint(f->ahead, "stage_ahead", 1, CONF_HINT_WINDOW_OBJECTS_MAX, &u, err,
                     errlen) != 0)
            return -1;
        h->stage_ahead = (unsigned)u;
    }
    /* A window only means something relative to a reading order. */
    if (!h->ordered && (f->wbytes != NULL || f->wobjects != NULL || f->ahead != NULL))
        return conf_fail(err, errlen, "%s needs \"ordered\": true",
                    f->wbytes != NULL ? "window_bytes"
                    : f->wobjects != NULL ? "window_objects" : "stage_ahead");

    /* The key source last: a template is the expensive part. */
    if (f->keys != NULL)
        return keys_load(f->keys, lim->max_objects, h, err, errlen);
    if (f->prefix != NULL) {
        /* "" is allowed: every key of the bucket, still capped by max_objects
         * when the gateway lists it. */
        if (get_string(f->prefix, "prefix", CONF_HINT_KEY_MAX, true, &s, &n, err, errlen) != 0)
            return -1;
        if ((h->prefix = dup_bytes(s, n)) == NULL)
            return conf_fail(err, errlen, "out of memory");
        return 0;
    }
    /* The template may be longer than a key ("{a,b,...}"); the body cap bounds it. */
    if (get_string(f->tmpl, "template", SIZE_MAX, false, &s, &n, err, errlen) != 0)
        return -1;
    return conf_hint_expand(s, lim->max_objects, &h->keys, &h->n_keys, err, errlen);
}

int conf_hint_parse(const char *body, size_t len, const struct conf_hint_limits *lim,
                    struct conf_hint *out, char *err, size_t errlen)
{
    struct hint_fields f;
    struct conf_hint h;
    json_error_t jerr;
    json_t *root = NULL;
    int rc = -1;

    memset(out, 0, sizeof *out);
    memset(&h, 0, sizeof h);
    memset(&f, 0, sizeof f);
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    /* Checked before jansson sees it: parsing is what the cap protects. */
    if (len > lim->max_body)
        return conf_fail(err, errlen, "body is %zu bytes, more than the limit of %zu", len,
                    lim->max_body);
    /* ALLOW_NUL so that a "\u0000" inside a key gets a message naming the
     * key (get_string) instead of jansson's; DECODE_ANY so that "[]" or "3"
     * gets "not a JSON object" rather than a syntax error. */
    root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL,
                      &jerr);
    if (root == NULL)
        return conf_fail(err, errlen, "invalid JSON at line %d, column %d: %s", jerr.line,
                    jerr.column, jerr.text);
    if (!json_is_object(root)) {
        conf_fail(err, errlen, "body must be a JSON object");
        goto out;
    }
    if (fields_collect(root, &f, err, errlen) != 0)
        goto out;
    if (hint_build(&f, lim, &h, err, errlen) != 0) {
        conf_hint_free(&h);
        goto out;
    }
    *out = h;
    rc = 0;
out:
    json_decref(root);
    return rc;
}
