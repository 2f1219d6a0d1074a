#!/bin/bash
# bench/stage_io_ab.sh [ROUNDS] [SIZE_MIB] - write_back.stage_io A/B: the
# checkpoint benchmark (bench/writeback.py, one run each) with the staged
# bodies written by write(), by io_uring with O_DIRECT and by io_uring
# through the page cache, alternated ROUNDS times. One report per run in
# $OUT (default /tmp/stage-io-ab), then the rows that differ, side by side.
# Results: bench/results/stage-io.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}; SIZE=${2:-1024}; OUT=${OUT:-/tmp/stage-io-ab}
mkdir -p "$OUT"
for r in $(seq 1 "$ROUNDS"); do
  for m in write direct uring; do
    python3 bench/writeback.py --size-mib "$SIZE" --runs 1 --read-s 4 \
      --read-size-mib $((SIZE / 2)) --stage-io "$m" --out "$OUT/$m-$r.md" > "$OUT/$m-$r.log" 2>&1
  done
done
for f in "$OUT"/*-*.md; do
  echo "== $(basename "$f" .md)"
  grep -E "to the last ack|CPU-s per GiB|readers during|write-back / fio" "$f" |
    sed 's/ \[[^]]*\]//g'
done
