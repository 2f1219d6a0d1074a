#!/usr/bin/env bash
# bench/hitpath.sh - the cache's hit paths side by side: sendfile from the
# page cache (cache.read_path "sendfile"), reads through io_uring into a
# buffer that libmicrohttpd then sends ("io_uring"), and "auto" (io_uring
# below 256 KiB, sendfile above, the default). One cold tier (a shardgate on
# a directory), one caching gateway per mode, each with its own warmed
# cache; wrk alternates between them, 3 rounds per case; prints req/s, MB/s
# and server CPU per request. Usage: bench/hitpath.sh [seconds]
set -euo pipefail
secs="${1:-5}"
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${BENCH_BIN:-$root/build-bench/shardgate}"
[ -x "$bin" ] || { cmake -S "$root" -B "$root/build-bench" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
                   cmake --build "$root/build-bench" --target shardgate -j"$(nproc)" >/dev/null; }
command -v wrk >/dev/null || { echo "hitpath: wrk missing (apt-get install -y wrk)" >&2; exit 77; }
work="$(mktemp -d /tmp/sg-hitpath-XXXXXX)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

mkdir -p "$work/data/bench" "$work/c1" "$work/c2" "$work/c3"
for i in $(seq 0 199); do head -c 4096 /dev/urandom > "$work/data/bench/small-$i"; done
for i in $(seq 0 19); do head -c $((1024 * 1024)) /dev/urandom > "$work/data/bench/mid-$i"; done
head -c $((64 * 1024 * 1024)) /dev/urandom > "$work/data/bench/big"
export SHARDGATE_ACCESS_KEY=bench SHARDGATE_SECRET_KEY=bench-secret-key
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench-secret-key
pc=$(port); "$bin" serve --listen 127.0.0.1:$pc --data "$work/data" --log-level warn 2>"$work/cold.log" & pids+=($!)
start_cached() {   # name read_path -> port
    local p; p=$(port)
    cat > "$work/$1.json" <<JSON
{"cold_url": "http://127.0.0.1:$pc", "log_level": "warn", "buckets": {"bench": {"public_read": true, "consistency": "immutable"}},
 "cache": {"dir": "$work/$1", "size": "1GiB", "read_path": "$2"}}
JSON
    chmod 600 "$work/$1.json"
    "$bin" serve --config "$work/$1.json" --listen 127.0.0.1:$p 2>"$work/$1.log" & pids+=($!)
    echo "$p $!"
}
read p1 pid1 < <(start_cached c1 sendfile)
read p2 pid2 < <(start_cached c2 io_uring)
read p3 pid3 < <(start_cached c3 auto)
pids+=("$pid1" "$pid2" "$pid3")   # started in subshells: the trap must know them here
sleep 1
for p in $p1 $p2 $p3; do   # warm the caches (public-read: anonymous GETs)
    for i in $(seq 0 199); do curl -sf -o /dev/null "http://127.0.0.1:$p/bench/small-$i"; done
    for i in $(seq 0 19); do curl -sf -o /dev/null "http://127.0.0.1:$p/bench/mid-$i"; done
    curl -sf -o /dev/null "http://127.0.0.1:$p/bench/big"
done
sleep 1
. "$root/bench/lib/wrk.sh"   # cpu, wrk_case
hz=$(getconf CLK_TCK)
printf "%-8s %-10s %5s %12s %10s %14s\n" case path conns "req/s" "MB/s" "CPU us/req"
for case in small mid big; do
    for conns in 8 64; do
        [ $case != small ] && [ $conns = 64 ] && continue
        for round in 1 2 3; do
            for path in sendfile io_uring auto; do
                case $path in
                    sendfile) p=$p1 pid=$pid1 ;;
                    io_uring) p=$p2 pid=$pid2 ;;
                    auto) p=$p3 pid=$pid3 ;;
                esac
                c0=$(cpu $pid)
                out=$(wrk_case $case $conns $p /bench/big)
                c1=$(cpu $pid)
                rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
                mbs=$(echo "$out" | awk '/Transfer\/sec/ {v=$2; u=substr(v,length(v)-1); n=v+0; if (u=="GB") n*=1024; if (u=="KB") n/=1024; print n}')
                reqs=$(echo "$out" | awk '/requests in/ {print $1}')
                us=$(awk -v a=$c0 -v b=$c1 -v n=$reqs -v hz=$hz 'BEGIN {printf "%.1f", (b-a)/hz*1e6/n}')
                printf "%-8s %-10s %5s %12s %10s %14s\n" $case $path $conns $rps $mbs $us
            done
        done
    done
done
grep -h "cold GET\|ERROR" "$work"/c*.log | head -5 || true
