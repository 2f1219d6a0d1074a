#!/bin/sh
# tests/fuzz/run.sh [seconds] - builds the libFuzzer targets with clang into
# build-fuzz (beside the source tree) and runs each for `seconds` (default 15)
# from its seed corpus. Exits non-zero when a target crashes, leaks or times
# out; the reproducer is left in build-fuzz/artifacts/. Exits 77 (skipped)
# when clang or libFuzzer is missing.
set -eu
secs=${1:-15}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${SHARDGATE_FUZZ_BUILD:-$src/build-fuzz}
cc=${CC_FUZZ:-clang}
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "SKIP: $cc not found (apt-get install -y clang libclang-rt-14-dev)"
    exit 77
fi
if ! echo 'int LLVMFuzzerTestOneInput(const char *d, long n){(void)d;(void)n;return 0;}' \
        | "$cc" -x c -fsanitize=fuzzer -o /dev/null - >/dev/null 2>&1; then
    echo "SKIP: $cc cannot link -fsanitize=fuzzer (libclang-rt-*-dev missing?)"
    exit 77
fi
mkdir -p "$build"
if [ ! -f "$build/CMakeCache.txt" ]; then
    CC=$cc cmake -S "$src" -B "$build" -DSHARDGATE_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
fi
cmake --build "$build" -j"$(nproc)" --target fuzz_auth_header fuzz_query fuzz_chunked fuzz_xml \
    >"$build/build.log" 2>&1 || { tail -50 "$build/build.log"; exit 1; }
mkdir -p "$build/artifacts"
rc=0
for t in auth_header query chunked xml; do
    case $t in
        chunked) maxlen=16384 ;;
        xml) maxlen=8192 ;;
        *) maxlen=4096 ;;
    esac
    work="$build/corpus/$t"          # grows; the checked-in seeds stay small
    mkdir -p "$work"
    echo "== fuzz_$t: ${secs}s, -max_len=$maxlen"
    if ! "$build/tests/fuzz/fuzz_$t" -max_total_time="$secs" -max_len="$maxlen" \
            -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix="$build/artifacts/fuzz_$t-" \
            "$work" "$here/corpus/$t" >"$build/fuzz_$t.log" 2>&1; then
        echo "FAIL fuzz_$t (see $build/fuzz_$t.log and $build/artifacts/)"
        tail -40 "$build/fuzz_$t.log"
        rc=1
    else
        grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|cov:" "$build/fuzz_$t.log" \
            | tail -3
    fi
done
exit $rc
