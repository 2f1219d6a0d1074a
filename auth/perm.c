/* auth/perm.c - per-bucket permissions: the single decision point for
 * "may this identity do this to that bucket", from the users' "permissions"
 * and the buckets' public_read setting in the configuration. */
#include "auth_int.h"

#include <string.h>

/* The user's level on `bucket`: its exact entry, else its "*" entry, else none. */
static enum conf_perm_level user_level(const struct conf_user *u, const char *bucket)
{
    enum conf_perm_level star = CONF_PERM_NONE;
    for (size_t i = 0; i < u->n_perms; i++) {
        const struct conf_perm *p = &u->perms[i];
        if (p->bucket == NULL)
            continue;
        if (bucket != NULL && strcmp(p->bucket, bucket) == 0)
            return p->level;
        if (strcmp(p->bucket, "*") == 0)
            star = p->level;
    }
    return star;
}

static enum conf_perm_level need_level(enum auth_perm need)
{
    switch (need) {
    case AUTH_PERM_READ: return CONF_PERM_READ;
    case AUTH_PERM_WRITE: return CONF_PERM_WRITE;
    case AUTH_PERM_ADMIN: return CONF_PERM_ADMIN;
    }
    return CONF_PERM_ADMIN;   /* an out-of-range value asks for the most */
}

bool auth_allowed(const struct auth *a, const struct auth_ctx *ctx, const char *bucket,
                  enum auth_perm need)
{
    const struct conf_user *u = ctx ? ctx->user : NULL;
    enum conf_perm_level want = need_level(need);
    bool ok;

    if (u == NULL) {
        /* anonymous: reads of public buckets only, never the service */
        const struct conf_bucket *b = conf_bucket_find(a->c, bucket);
        ok = bucket != NULL && want == CONF_PERM_READ && b != NULL && b->public_read;
    } else if (bucket == NULL) {
        ok = want == CONF_PERM_READ || user_level(u, NULL) >= want;
    } else {
        ok = user_level(u, bucket) >= want;
    }
    if (!ok)
        log_msg(LOG_LVL_DEBUG, "auth", "denied: user %s needs %s on %s",
                u && u->name ? u->name : "(anonymous)", conf_perm_level_name(want),
                bucket ? bucket : "(service)");
    return ok;
}
