/* clients/cli/job.c - a prefetch job as the client commands see it: the
 * fields of the gateway's job document (cache/HINTS.md) read with jansson
 * into plain values, and its first errors. */
#include <string.h>

#include "cli_int.h"

static void str_field(const json_t *o, const char *name, char *out, size_t n)
{
    cli_term_copy(json_string_value(json_object_get(o, name)), out, n);
}

/* A number member (integer or real); false when absent, null or not a number. */
static bool num_field(const json_t *o, const char *name, double *out)
{
    const json_t *v = json_object_get(o, name);
    if (!json_is_number(v))
        return false;
    *out = json_number_value(v);
    return true;
}

bool cli_job_parse(const json_t *v, struct cli_job *j)
{
    memset(j, 0, sizeof *j);
    if (!json_is_object(v))
        return false;
    str_field(v, "job", j->id, sizeof j->id);
    if (!j->id[0])
        return false;
    str_field(v, "bucket", j->bucket, sizeof j->bucket);
    str_field(v, "state", j->state, sizeof j->state);
    if (!j->state[0])
        strcpy(j->state, "?");
    str_field(v, "consumer", j->consumer, sizeof j->consumer);
    str_field(v, "created", j->created, sizeof j->created);
    str_field(v, "ended", j->ended, sizeof j->ended);
    j->ordered = json_is_true(json_object_get(v, "ordered"));
    j->has_epoch = num_field(v, "epoch", &j->epoch);
    j->has_position = num_field(v, "position", &j->position);
    j->has_rate = num_field(v, "rate_bytes_per_s", &j->rate);
    j->has_eta = num_field(v, "eta_s", &j->eta);
    /* the POST answer's "objects" is a count; a job's is an object */
    if (!num_field(v, "objects", &j->total)) {
        const json_t *o = json_object_get(v, "objects");
        num_field(o, "total", &j->total);
        num_field(o, "cached", &j->cached);
        num_field(o, "staged", &j->staged);
        num_field(o, "failed", &j->failed);
        num_field(o, "pending", &j->pending);
    }
    const json_t *b = json_object_get(v, "bytes");
    num_field(b, "total", &j->bytes_total);
    num_field(b, "done", &j->bytes_done);
    num_field(b, "cached", &j->bytes_cached);
    return true;
}

bool cli_job_final(const struct cli_job *j)
{
    return strcmp(j->state, "done") == 0 || strcmp(j->state, "failed") == 0 ||
           strcmp(j->state, "cancelled") == 0;
}

double cli_job_bytes_to_stage(const struct cli_job *j)
{
    return j->bytes_total > j->bytes_cached ? j->bytes_total - j->bytes_cached : 0.0;
}

size_t cli_job_errors(const json_t *job)
{
    return json_array_size(json_object_get(job, "errors"));
}

void cli_job_errors_print(FILE *f, const json_t *job)
{
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(job, "errors"), i, e) {
        char key[1100], code[128];
        str_field(e, "key", key, sizeof key);
        str_field(e, "code", code, sizeof code);
        fprintf(f, "  %s: %s\n", key[0] ? key : "?", code[0] ? code : "?");
    }
}

bool cli_job_query(struct sg_buf *q, const char *id)
{
    sg_buf_init(q, 4096);
    if (id) {
        sg_buf_adds(q, "job=");
        sg_buf_add_uri(q, id, strlen(id), false);
        sg_buf_adds(q, "&");
    }
    sg_buf_adds(q, "prefetch=");
    return !q->err;
}
