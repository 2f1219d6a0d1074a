#!/usr/bin/env bash
# bench/run.sh smoke|quick|full - shardgate vs nginx, side by side, on 127.0.0.1.
#   smoke: start everything, one short case (<= 30 s), print the table; non-zero on failure
#   quick: every case, 3 runs each (< 10 min on the 2-core CI VM before the hits-from-disk
#          case was added, which writes 2 GiB of 1 MiB and 40,000 4 KiB objects once and
#          has not been timed on a quiet machine yet)
#   full:  every case, 5 runs of 10 s, 4 GiB checkpoint, 1M small objects (~45 min)
#   memory: only the memory / restart case with 1M small objects
#   nvme: hits from the disk alone (page cache dropped before each run): shardgate,
#         nginx with aio threads + directio, fio on the same files
#   fills: the cold-miss cases alone, 5 runs: shardgate, a direct GET and nginx
#          proxy_cache filling the same objects (throughput, CPU per object)
#   mixed: 4 KiB hits alone vs while 2 throttled 64 MiB misses stream in, 5 runs
# Builds shardgate (Release) in build-bench/ and bench/clients/getc; needs wrk, nginx,
# curl, python3 (gnuplot-nox for the plots). Results: bench/results/report-MODE.{md,json,png}.
# BENCH_WORK (default /tmp/shardgate-bench-MODE) holds data and caches;
# BENCH_PORT_BASE (default 27300) is where it starts looking for free ports;
# BENCH_BIN=path uses that shardgate binary instead of building one.
#   profile: perf stat (syscalls per request) of shardgate and nginx, perf record of
#            shardgate, on 4 KiB c=64 and 64 MiB c=8 -> bench/results/profile/
set -euo pipefail
mode="${1:-quick}"
case "$mode" in smoke|quick|full|profile|memory|fills|nvme|mixed) ;; *) echo "usage: $0 smoke|quick|full|profile|memory|fills|nvme|mixed" >&2; exit 2 ;; esac
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build="${BENCH_BUILD_DIR:-$root/build-bench}"

for t in wrk nginx curl python3 cc; do
    # 77: skipped, the test suite's convention for a missing client
    command -v "$t" >/dev/null || { echo "bench: $t is missing (apt-get install -y wrk nginx-light curl python3 gcc)" >&2; exit 77; }
done
case "$mode" in quick|full|nvme)   # the hits-from-disk case measures the device with fio
    command -v fio >/dev/null || { echo "bench: fio is missing (apt-get install -y fio)" >&2; exit 77; } ;;
esac
command -v gnuplot >/dev/null || echo "bench: gnuplot missing, no plots (apt-get install -y gnuplot-nox)" >&2

if [ -n "${BENCH_BIN:-}" ]; then
    bin="$BENCH_BIN"   # a binary built elsewhere (an experiment): no build
else
    # the tree is shared: another engineer may be mid-edit; retry the build a few times
    echo "bench: building shardgate (Release) in $build" >&2
    ok=0
    mkdir -p "$build"
    for try in 1 2 3 4; do
        if cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >"$build/bench-build.log" 2>&1 &&
           cmake --build "$build" --target shardgate -j"$(nproc)" >>"$build/bench-build.log" 2>&1; then ok=1; break; fi
        echo "bench: build failed (try $try, see $build/bench-build.log); retrying in 20 s" >&2
        sleep 20
    done
    [ "$ok" = 1 ] || { echo "bench: shardgate does not build:" >&2; tail -n 20 "$build/bench-build.log" >&2; exit 1; }
    bin="$build/shardgate"
fi
[ -x "$bin" ] || bin="$(find "$build" -maxdepth 3 -type f -name shardgate -perm -u+x | head -n1)"
[ -x "$bin" ] || { echo "bench: no shardgate binary in $build" >&2; exit 1; }
mkdir -p "$build"
getc="$build/bench-getc"
cc -O2 -Wall -Wextra -pthread -o "$getc" "$here/clients/getc.c"

ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" || true
exec python3 "$here/lib/bench.py" "$mode" "$bin" "$getc"
