#!/usr/bin/env python3
"""bench/hit_contention.py - lock contention on the small-hit path: futex calls
and context switches per 1,000 hits of two shardgate binaries, side by side.

  python3 bench/hit_contention.py BIN_A BIN_B [--reps N] [--dur S] [--conns C] [--threads T]

Each binary serves 2,000 objects of 4 KiB from a directory store, warmed into
its cache (hits from the memory tier); wrk (2 threads, C connections) reads
them for S seconds while `perf stat` counts the gateway's futex syscalls and
context switches. A futex call means a thread found a lock taken (or woke a
waiter): on two HTTP threads it is the cost of a lock both take per hit. The
runs alternate A/B, B first on odd runs. Needs perf, wrk and
build-bench/bench-getc (bench/run.sh builds it). Results:
bench/results/ab-guard-shards.md.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from procs import free_port, run_getc, run_wrk, start_shardgate, stop_all  # noqa: E402
from report import med  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = 2000


def counts(path):
    out = {}
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) >= 2 and p[0].replace(",", "").isdigit():
                out[p[1]] = int(p[0].replace(",", ""))
    return out


def one(env_, binp, tag, a):
    env_["bin"] = binp
    sg = start_shardgate(env_, "sg-" + tag, free_port(29700), None, os.path.join(env_["work"], "cache-" + tag),
                         threads=a.threads, data_dir=os.path.join(env_["work"], "data"))
    try:
        keys = ["/bench/s/%06d" % i for i in range(N)]
        run_getc(env_, sg.port, keys, conc=8)
        run_getc(env_, sg.port, keys, conc=8)
        st = os.path.join(env_["work"], "stat-%s.txt" % tag)
        perf = subprocess.Popen(["perf", "stat", "-e", "context-switches,syscalls:sys_enter_futex", "-o", st,
                                 "-p", str(sg.proc.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        r = run_wrk(env_, sg, "/bench/s/", N, a.conns, a.dur)
        perf.send_signal(2)
        perf.wait()
        c = counts(st)
        k = r["requests"] / 1000.0
        return dict(rps=r["rps"], cpu=r["cpu_us_per_req"], futex=c.get("syscalls:sys_enter_futex", 0) / k,
                    cs=c.get("context-switches", 0) / k)
    finally:
        sg.stop()
        shutil.rmtree(os.path.join(env_["work"], "cache-" + tag), ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_a")
    ap.add_argument("bin_b")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dur", type=int, default=3)
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--threads", type=int, default=0, help="the gateways' --threads (0: one per core)")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="shardgate-contention-")
    env_ = dict(work=work, getc=os.path.join(ROOT, "build-bench", "bench-getc"))
    os.makedirs(os.path.join(work, "data", "bench", "s"))
    for i in range(N):
        with open(os.path.join(work, "data", "bench", "s", "%06d" % i), "wb") as f:
            f.write(os.urandom(4096))
    res = {"A": [], "B": []}
    try:
        for r in range(a.reps):
            for arm in (("B", "A") if r % 2 else ("A", "B")):
                res[arm].append(one(env_, a.bin_a if arm == "A" else a.bin_b, arm, a))
    finally:
        stop_all()
        shutil.rmtree(work, ignore_errors=True)
    print("4 KiB hits from memory, c=%d, --threads %s, %d s per run, medians [min-max] of %d runs\n" % (
        a.conns, a.threads or "default", a.dur, a.reps))
    print("| arm | hits/s | CPU µs/hit | futex calls per 1,000 hits | context switches per 1,000 hits |")
    print("| --- | --- | --- | --- | --- |")
    for arm in ("A", "B"):
        rows = res[arm]

        def cell(k, f):
            v = [x[k] for x in rows]
            return (f + " [" + f + "-" + f + "]") % (med(v), min(v), max(v))
        print("| %s | %s | %s | %s | %s |" % (arm, cell("rps", "%.0f"), cell("cpu", "%.1f"), cell("futex", "%.1f"),
                                           cell("cs", "%.0f")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
