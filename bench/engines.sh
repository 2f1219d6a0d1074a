#!/usr/bin/env bash
# bench/engines.sh - the cache's two I/O engines side by side: io_uring and
# pread/pwrite on the fill workers (cache.engine "threads", what runs where
# io_uring is blocked, e.g. under Docker's default seccomp profile).
#   fills: a caching gateway with an empty cache reads every object of a set
#          once (getc, 8 connections) from a fast local cold tier (a shardgate
#          on a directory of this machine, files in the page cache): wall
#          time, MiB/s and the caching gateway's CPU per MiB filled; a new
#          gateway and cache directory per run;
#   hits:  gateways with warm caches, wrk: req/s, MB/s, CPU per request, with
#          cache.read_path "io_uring" (every cache read goes through the
#          engine: a ring read, or a pread) and "sendfile" (the default: the
#          engine is not on the hit path).
# The engines alternate run by run; each run checks /metrics (no failed fill,
# hits grow without cold GETs). Usage: bench/engines.sh [rounds] [seconds]
# (default 3 rounds, 4 s per wrk run). BENCH_BIN: a shardgate binary to use
# instead of building one (Release) in build-bench/. See bench/results/engines.md.
set -euo pipefail
rounds="${1:-3}"
secs="${2:-4}"
root="$(cd "$(dirname "$0")/.." && pwd)"
for t in wrk curl cc; do
    command -v "$t" >/dev/null || { echo "engines: $t missing (apt-get install -y wrk curl gcc)" >&2; exit 77; }
done
bin="${BENCH_BIN:-$root/build-bench/shardgate}"
[ -x "$bin" ] || { cmake -S "$root" -B "$root/build-bench" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
                   cmake --build "$root/build-bench" --target shardgate -j"$(nproc)" >/dev/null; }
work="$(mktemp -d /tmp/sg-engines-XXXXXX)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cc -O2 -Wall -Wextra -pthread -o "$work/getc" "$root/bench/clients/getc.c"
hz=$(getconf CLK_TCK)
. "$root/bench/lib/wrk.sh"   # cpu, wrk_case
now() { date +%s.%N; }

# ---- data: three sets, and the cold tier
mkdir -p "$work/data/bench"
for i in $(seq 0 7); do head -c $((64 << 20)) /dev/urandom > "$work/data/bench/big-$i"; done
for i in $(seq 0 255); do head -c $((1 << 20)) /dev/urandom > "$work/data/bench/mid-$i"; done
for i in $(seq 0 1999); do head -c 4096 /dev/urandom > "$work/data/bench/small-$i"; done
seq 0 7 | sed 's|^|/bench/big-|' > "$work/list.big"
seq 0 255 | sed 's|^|/bench/mid-|' > "$work/list.mid"
seq 0 1999 | sed 's|^|/bench/small-|' > "$work/list.small"
cat "$work"/data/bench/* > /dev/null   # the cold tier reads from the page cache
export SHARDGATE_ACCESS_KEY=bench SHARDGATE_SECRET_KEY=bench-secret-key
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench-secret-key
pc=$(port)
"$bin" serve --listen 127.0.0.1:$pc --data "$work/data" --log-level warn >"$work/cold.log" 2>&1 &
pids+=($!)

# start_gw NAME ENGINE READ_PATH: a caching gateway with an empty cache ->
# GW_PORT, GW_PID (public-read bucket and /metrics, immutable: no revalidation)
start_gw() {
    local dir="$work/cache-$1"
    rm -rf "$dir"
    GW_PORT=$(port)
    cat > "$work/$1.json" <<JSON
{"cold_url": "http://127.0.0.1:$pc", "log_level": "info", "metrics_public": true,
 "buckets": {"bench": {"public_read": true, "consistency": "immutable"}},
 "cache": {"dir": "$dir", "size": "4GiB", "engine": "$2", "read_path": "$3"}}
JSON
    chmod 600 "$work/$1.json"
    "$bin" serve --config "$work/$1.json" --listen 127.0.0.1:$GW_PORT >"$work/$1.log" 2>&1 &
    GW_PID=$!
    pids+=($GW_PID)
    for _ in $(seq 1 100); do
        curl -sf -o /dev/null "http://127.0.0.1:$GW_PORT/_shardgate/health" && break
        sleep 0.1
    done
    local want="io_uring"
    [ "$2" = threads ] && want="pread/pwrite"
    grep -q "cache engine: $want" "$work/$1.log" ||
        { echo "engines: $1 does not run the $2 engine:" >&2; cat "$work/$1.log" >&2; exit 1; }
}
stop_gw() { kill "$1"; wait "$1" 2>/dev/null || true; }
metric() { curl -sf "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m {print $2}'; }

echo "# fills: every object of a set read once through an empty cache (getc -c 8)"
printf "%-6s %-9s %5s %8s %8s %10s %10s %12s %12s\n" set engine round objects "wall s" "MiB/s" \
       "objects/s" "CPU ms/MiB" "CPU us/obj"
for round in $(seq 1 "$rounds"); do
    for set in big mid small; do
        n=$(wc -l < "$work/list.$set")
        mib=$(sed "s|^/bench/|$work/data/bench/|" "$work/list.$set" | xargs stat -c %s |
              awk '{s += $1} END {print s / 1048576}')
        for engine in io_uring threads; do
            start_gw "fill-$engine" "$engine" sendfile
            c0=$(cpu $GW_PID); t0=$(now)
            "$work/getc" -c 8 -k -f "$work/list.$set" 127.0.0.1 "$GW_PORT" > "$work/getc.out" ||
                { echo "engines: a GET failed" >&2; exit 1; }
            t1=$(now); c1=$(cpu $GW_PID)
            sleep 0.5   # the last fills publish after their fdatasync
            fills=$(metric $GW_PORT shardgate_cache_fills_total)
            failed=$(metric $GW_PORT shardgate_cache_fills_failed_total)
            [ "$fills" = "$n" ] && [ "$failed" = 0 ] ||
                { echo "engines: $engine $set: fills $fills (want $n), failed $failed" >&2; exit 1; }
            awk -v set=$set -v e=$engine -v r=$round -v n=$n -v mib="$mib" -v t0=$t0 -v t1=$t1 \
                -v c0=$c0 -v c1=$c1 -v hz=$hz 'BEGIN {
                    w = t1 - t0; cpu_ms = (c1 - c0) / hz * 1000
                    printf "%-6s %-9s %5s %8d %8.2f %10.1f %10.1f %12.2f %12.0f\n",
                    set, e, r, n, w, mib / w, n / w, cpu_ms / mib, cpu_ms * 1000 / n }'
            stop_gw $GW_PID
        done
    done
done

echo
echo "# hits: warm caches, wrk -t2 -c8 (small also -c64), ${secs} s per run"
declare -A HP HPID
for engine in io_uring threads; do
    for rp in io_uring sendfile; do
        start_gw "hit-$engine-$rp" "$engine" "$rp"
        HP[$engine-$rp]=$GW_PORT; HPID[$engine-$rp]=$GW_PID
        { head -n 200 "$work/list.small"; head -n 20 "$work/list.mid"; head -n 1 "$work/list.big"; } > "$work/warm.list"
        "$work/getc" -c 4 -k -f "$work/warm.list" 127.0.0.1 "$GW_PORT" > /dev/null
    done
done
sleep 1
printf "%-6s %-9s %-10s %5s %12s %10s %12s\n" case engine read_path conns "req/s" "MB/s" "CPU us/req"
for case in small mid big; do
    for conns in 8 64; do
        [ $case != small ] && [ $conns = 64 ] && continue
        for round in $(seq 1 "$rounds"); do
            for rp in io_uring sendfile; do
                for engine in io_uring threads; do
                    p=${HP[$engine-$rp]}; pid=${HPID[$engine-$rp]}
                    g0=$(metric $p shardgate_cache_fills_total); h0=$(metric $p shardgate_cache_hits_total)
                    c0=$(cpu $pid)
                    out=$(wrk_case $case $conns $p /bench/big-0)
                    c1=$(cpu $pid)
                    g1=$(metric $p shardgate_cache_fills_total); h1=$(metric $p shardgate_cache_hits_total)
                    [ "$g0" = "$g1" ] && [ "$h1" -gt "$h0" ] ||
                        { echo "engines: hits run on $engine-$rp filled ($g0 -> $g1) or did not hit" >&2; exit 1; }
                    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
                    mbs=$(echo "$out" | awk '/Transfer\/sec/ {v=$2; u=substr(v,length(v)-1); n=v+0; if (u=="GB") n*=1024; if (u=="KB") n/=1024; print n}')
                    reqs=$(echo "$out" | awk '/requests in/ {print $1}')
                    us=$(awk -v a=$c0 -v b=$c1 -v n=$reqs -v hz=$hz 'BEGIN {printf "%.1f", (b-a)/hz*1e6/n}')
                    printf "%-6s %-9s %-10s %5s %12s %10s %12s\n" $case $engine $rp $conns $rps $mbs $us
                done
            done
        done
    done
done
