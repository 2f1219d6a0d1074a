/* conf/connections.c - the "connections" object of the config file: how
 * many connections the gateway holds and how long a connection may keep a
 * slot without sending its request (README "Connection limits"). */
#include <string.h>

#include "conf_int.h"

#define CONN_MAX 1000000u        /* a million sockets is already past any fd limit */
#define TIMEOUT_MAX_S 3600u      /* an hour of silence is no longer a client */
#define MIN_BODY_RATE_MAX (1024u * 1024u * 1024u)

static const struct {
    const char *name;
    size_t off;
    unsigned min, max;
} keys[] = {
    { "max", offsetof(struct conf, conn_max), 0, CONN_MAX },
    { "per_client", offsetof(struct conf, conn_per_client), 0, CONN_MAX },
    { "idle_timeout_s", offsetof(struct conf, conn_idle_timeout_s), 1, TIMEOUT_MAX_S },
    { "header_timeout_s", offsetof(struct conf, conn_header_timeout_s), 1, TIMEOUT_MAX_S },
    { "send_timeout_s", offsetof(struct conf, conn_send_timeout_s), 1, TIMEOUT_MAX_S },
    { "min_body_rate", offsetof(struct conf, conn_min_body_rate), 0, MIN_BODY_RATE_MAX },
};
enum { N_KEYS = sizeof keys / sizeof keys[0] };
#define KEYS_HELP "max, per_client, idle_timeout_s, header_timeout_s, send_timeout_s, " \
                  "min_body_rate"

static unsigned *field(struct conf *c, size_t k)
{
    return (unsigned *)(void *)((char *)c + keys[k].off);
}

static unsigned field_get(const struct conf *c, size_t k)
{
    unsigned v;
    memcpy(&v, (const char *)c + keys[k].off, sizeof v);
    return v;
}

void conf_connections_defaults(struct conf *c)
{
    c->conn_max = 0;                /* from the open-file limit */
    c->conn_per_client = 0;         /* a quarter of that */
    /* nginx keeps idle connections 75 s and Apache 5 s; S3 SDKs reconnect
     * without a word, so 30 s frees slots well before anyone notices. */
    c->conn_idle_timeout_s = 30;
    /* A real client sends its headers in one packet; 20 s is what Apache's
     * mod_reqtimeout gives a header at first. */
    c->conn_header_timeout_s = 20;
    /* A reader that pauses (a data loader busy with the last shard) stops
     * taking bytes for a while; nginx waits 60 s, we allow twice that. */
    c->conn_send_timeout_s = 120;
    /* Apache's MinRate is 500 bytes/s; a body slower than 1 KiB/s ties up a
     * slot for a day per 100 MB. */
    c->conn_min_body_rate = 1024;
}

int conf_connections_from_json(struct conf *c, const json_t *v, char *err, size_t errlen)
{
    const char *key;
    json_t *val;

    if (!json_is_object(v))
        return conf_fail(err, errlen, "connections: must be an object like {\"max\": 0, "
                         "\"per_client\": 0, \"idle_timeout_s\": 30, \"header_timeout_s\": 20}");
    json_object_foreach((json_t *)v, key, val) {
        size_t k = 0;
        while (k < N_KEYS && strcmp(key, keys[k].name) != 0)
            k++;
        if (k == N_KEYS)
            return conf_fail(err, errlen, "connections: unknown key \"%.64s\" (allowed: " KEYS_HELP
                             ")", key);
        if (!json_is_integer(val) || json_integer_value(val) < (json_int_t)keys[k].min
            || json_integer_value(val) > (json_int_t)keys[k].max)
            return conf_fail(err, errlen, "connections.%s: must be an integer from %u to %u",
                             keys[k].name, keys[k].min, keys[k].max);
        *field(c, k) = (unsigned)json_integer_value(val);
    }
    return 0;
}

int conf_connections_validate(const struct conf *c, char *err, size_t errlen)
{
    for (size_t k = 0; k < N_KEYS; k++) {
        unsigned v = field_get(c, k);
        if (v < keys[k].min || v > keys[k].max)
            return conf_fail(err, errlen, "connections.%s: must be an integer from %u to %u",
                             keys[k].name, keys[k].min, keys[k].max);
    }
    if (c->conn_max != 0 && c->conn_per_client > c->conn_max)
        return conf_fail(err, errlen, "connections.per_client: %u is above connections.max (%u)",
                         c->conn_per_client, c->conn_max);
    return 0;
}
