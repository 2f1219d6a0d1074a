/* conf/conf_int.h - internals shared by conf/'s own files (conf.c and the
 * option groups split out of it). Nothing outside conf/ includes this. */
#ifndef SHARDGATE_CONF_INT_H
#define SHARDGATE_CONF_INT_H

#include <jansson.h>
#include <stddef.h>

#include "conf.h"

/* ---- the "connections" object (conf/connections.c) ---- */

/* Sets the built-in connection limits and timeouts. */
void conf_connections_defaults(struct conf *c);
/* Merges {"max": N, "per_client": N, "idle_timeout_s": N, ...} into c. Each
 * key given replaces that setting; unknown keys and bad values fail with a
 * message naming "connections.KEY" in err. 0 or -1. */
int conf_connections_from_json(struct conf *c, const json_t *v, char *err, size_t errlen);
/* The final range checks of the connection settings; 0 or -1 (err set). */
int conf_connections_validate(const struct conf *c, char *err, size_t errlen);

#endif
