#!/bin/bash
# bench/nvme_threads.sh BIN THREADS [DROP] - 4 KiB hits from one gateway over the
# cache directory a `bench/run.sh nvme` left in /tmp/shardgate-bench-nvme (run that
# first), with --threads THREADS: wrk c=8 and c=64, 3 runs of 2 s each; before each
# run every cache file is dropped from the page cache (DROP=1, the default) or not
# (DROP=0: hits from the page cache). Prints one line per run.
set -euo pipefail
bin=$1; threads=$2; drop=${3:-1}
W=/tmp/shardgate-bench-nvme
[ -f "$W/sg/shardgate.json" ] || { echo "run bench/run.sh nvme first" >&2; exit 2; }
port=27399
cfg=$(mktemp); sed "s/\"listen\": \"127.0.0.1:[0-9]*\"/\"listen\": \"127.0.0.1:$port\"/" \
    "$W/sg/shardgate.json" > "$cfg"; chmod 600 "$cfg"
AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench-secret AWS_REGION=us-east-1 \
    "$bin" serve --config "$cfg" --cold http://127.0.0.1:1 --threads "$threads" \
    > "$W/nvme_threads.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$cfg"' EXIT
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
for c in 8 64; do
    for r in 1 2 3; do
        if [ "$drop" = 1 ]; then
            python3 -c '
import os, sys
for root, _, fs in os.walk(sys.argv[1]):
    for f in fs:
        fd = os.open(os.path.join(root, f), os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)' "$W/cache/objects"
        fi
        WRK_PREFIX=/bench/n4k/ WRK_N=40000 wrk -t2 -c$c -d2s -s "$W/paths.lua" \
            "http://127.0.0.1:$port" | sed -n 's/^WRKJSON //p' | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
print("threads=%s c=%s req/s=%.0f p99=%.2f ms" % (sys.argv[1], sys.argv[2],
      r["requests"] / (r["duration_us"] / 1e6), r["p99"] / 1e3))' "$threads" "$c"
    done
done
