/* backend/probe.c - health of the cold tier for readiness and the start-up
 * check: backend_probe and backend_info dispatch to the implementation
 * (s3.c, posix_probe.c); an implementation without them is assumed there. */
#include "backend_int.h"

#include <stdio.h>

enum backend_status backend_probe(struct backend *b, unsigned timeout_ms, char *why,
                                  size_t len)
{
    if (len)
        why[0] = '\0';
    if (!b->ops->probe) {
        snprintf(why, len, "no check for a %s cold tier", b->ops->name);
        return BACKEND_OK;
    }
    return b->ops->probe(b, timeout_ms, why, len);
}

void backend_info_get(const struct backend *b, struct backend_info *out)
{
    *out = (struct backend_info){ .kind = b->ops->name };
    if (b->ops->info)
        b->ops->info(b, out);
}
