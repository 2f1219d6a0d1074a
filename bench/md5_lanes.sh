#!/bin/bash
# bench/md5_lanes.sh BIN_A BIN_B [ROUNDS] - the gateway's CPU per GiB taken in
# when the clients are cheap: N curl PUTs at once (UNSIGNED-PAYLOAD, so the
# body costs the gateway its MD5 and its write, no SHA-256), body_threads 8,
# a local-directory cold tier, for two builds alternately (A B A B ...).
# Prints per run: arm, wall s, GB/s, gateway CPU-s per GiB, and the bytes
# hashed in lanes / alone (shardgate_md5_bytes_total; builds without the
# lanes have no such metric). Results: bench/results/md5-lanes.md.
# Env: N (parallel PUTs, default 8), MIB (size of each, default 256).
set -euo pipefail
A=${1:?usage: md5_lanes.sh BIN_A BIN_B [ROUNDS]}; B=${2:?}; ROUNDS=${3:-3}
N=${N:-8}; MIB=${MIB:-256}
W=$(mktemp -d /tmp/md5lanes.XXXXXX)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
GW=
cleanup() { [ -n "$GW" ] && kill "$GW" 2>/dev/null; wait 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
head -c $((MIB << 20)) /dev/urandom > "$W/src"
want=$(md5sum "$W/src" | cut -d' ' -f1)
cat > "$W/conf.json" <<JSON
{"body_threads": 8, "metrics_public": true,
 "users": [{"name": "b", "access_key": "AKIDBENCH", "secret_key": "benchsecret",
            "permissions": {"*": "admin"}}]}
JSON
chmod 600 "$W/conf.json"
clk=$(getconf CLK_TCK)
echo "arm round wall_s GBps cpu_s_per_GiB md5_lanes_MiB md5_alone_MiB"
for r in $(seq 1 "$ROUNDS"); do
  for arm in A B; do
    bin=$A; [ $arm = B ] && bin=$B
    rm -rf "$W/data"; mkdir -p "$W/data/bench"
    "$bin" serve --config "$W/conf.json" --listen 127.0.0.1:$PORT --data "$W/data" \
      --log-level warn > "$W/gw.log" 2>&1 &
    GW=$!
    for _ in $(seq 50); do curl -sf http://127.0.0.1:$PORT/metrics >/dev/null && break; sleep 0.1; done
    c0=$(awk '{print $14+$15}' /proc/$GW/stat)
    t0=$(date +%s.%N)
    for i in $(seq 1 "$N"); do
      curl -sf -o /dev/null --aws-sigv4 "aws:amz:us-east-1:s3" --user AKIDBENCH:benchsecret \
        -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -T "$W/src" \
        http://127.0.0.1:$PORT/bench/obj$i &
    done
    wait $(jobs -p | grep -v "^$GW$")
    t1=$(date +%s.%N)
    c1=$(awk '{print $14+$15}' /proc/$GW/stat)
    m=$(curl -s http://127.0.0.1:$PORT/metrics)
    lanes=$(echo "$m" | awk '/^shardgate_md5_bytes_total\{how="lanes"\}/ {print $2/1048576}')
    alone=$(echo "$m" | awk '/^shardgate_md5_bytes_total\{how="alone"\}/ {print $2/1048576}')
    for i in $(seq 1 "$N"); do   # every ETag is the body's MD5
      etag=$(curl -sfI --aws-sigv4 "aws:amz:us-east-1:s3" --user AKIDBENCH:benchsecret \
             -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
             http://127.0.0.1:$PORT/bench/obj$i | tr -d '\r"' | awk -F': ' 'tolower($1)=="etag" {print $2}')
      [ "$etag" = "$want" ] || { echo "$arm: obj$i ETag '$etag', want $want" >&2; exit 1; }
    done
    kill $GW; wait $GW 2>/dev/null || true; GW=
    python3 -c "
gib = $N * $MIB / 1024; wall = $t1 - $t0; cpu = ($c1 - $c0) / $clk
print('$arm $r %.2f %.2f %.2f ${lanes:--} ${alone:--}' % (wall, gib * 1.073741824 / wall, cpu / gib))"
  done
done
