#!/bin/sh
# docker/entrypoint.sh - the image's entry point. `serve` listens on every
# interface of the container, so it refuses to start with the built-in
# credentials (anyone who reaches the port would be admin): set
# SHARDGATE_ACCESS_KEY and SHARDGATE_SECRET_KEY. Every other command
# (health, prefetch, jobs, --help, --version) runs as given.
set -eu
if [ "${1:-}" = serve ]; then
    if [ -z "${SHARDGATE_ACCESS_KEY:-}" ] || [ -z "${SHARDGATE_SECRET_KEY:-}" ]; then
        echo "shardgate-entrypoint: refusing to serve on ${SHARDGATE_LISTEN:-0.0.0.0:9000}" \
             "without credentials of your own: set SHARDGATE_ACCESS_KEY and" \
             "SHARDGATE_SECRET_KEY (docker run -e ..., or compose's environment)" >&2
        exit 2
    fi
    # the built-in pair, printed by `shardgate --help` and in the README
    if [ "$SHARDGATE_ACCESS_KEY" = shardgate ] || [ "$SHARDGATE_SECRET_KEY" = shardgate-secret-key ]; then
        echo "shardgate-entrypoint: refusing to serve with the built-in credentials" \
             "(shardgate / shardgate-secret-key): choose your own SHARDGATE_ACCESS_KEY and" \
             "SHARDGATE_SECRET_KEY" >&2
        exit 2
    fi
fi
exec shardgate "$@"
