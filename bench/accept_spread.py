#!/usr/bin/env python3
"""How a burst of connections is spread over a gateway's HTTP threads, and
what it costs: two shardgate binaries side by side (issue 14).

  python3 bench/accept_spread.py BIN_A BIN_B [--size 1m|4k] [--conc 8] [--reps 5] [--dur 4]

Each gateway serves the same objects from its own directory store (--data,
hits after two warm-up reads of each); wrk opens --conc keep-alive
connections at once, as a loader's workers do at the start of an epoch, and
reads for --dur seconds. Runs alternate A/B (B first on odd runs). Per run:
req/s, the gateway's CPU per request, and the share of its HTTP threads' CPU
taken by the busiest one (the scheduler's nanoseconds per thread; 0.50 with
two threads evenly loaded, 1.00 when one thread holds every connection).
Used for gateway/accept.c (bench/results/ab-accept-spread.md)."""
import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from procs import free_port, http_get, log, run_wrk, start_shardgate, stop_all, thread_ns  # noqa: E402
from report import fmt, summary  # noqa: E402

SIZES = {"4k": 4096, "1m": 1 << 20}
N_OBJECTS = 64


def one_run(env_, sg, conc, dur):
    t0 = thread_ns([sg.proc.pid], comm="MHD-")   # the HTTP threads
    w = run_wrk(env_, sg, "/bench/s/", N_OBJECTS, conc, dur)
    t1 = thread_ns([sg.proc.pid], comm="MHD-")
    used = [t1[t] - t0.get(t, 0) for t in t1]
    w["busiest"] = max(used) / max(1, sum(used))
    return w


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_a")
    ap.add_argument("bin_b")
    ap.add_argument("--size", choices=sorted(SIZES), default="1m")
    ap.add_argument("--conc", type=int, default=8)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dur", type=int, default=4)
    a = ap.parse_args()
    work = "/tmp/shardgate-bench-spread"
    shutil.rmtree(work, ignore_errors=True)
    env_ = dict(work=work)
    try:
        sv = {}
        for name, binp in (("A", a.bin_a), ("B", a.bin_b)):
            d = os.path.join(work, "data-" + name, "bench", "s")
            os.makedirs(d)
            for i in range(N_OBJECTS):
                with open(os.path.join(d, "%06d" % i), "wb") as f:
                    f.write(os.urandom(SIZES[a.size]))
            env_["bin"] = binp
            sv[name] = start_shardgate(env_, "sg-" + name, free_port(27700 + 10 * len(sv)), None,
                                       os.path.join(work, "cache-" + name),
                                       data_dir=os.path.join(work, "data-" + name))
            for _ in range(2):
                for i in range(N_OBJECTS):
                    http_get(sv[name].port, "/bench/s/%06d" % i)
        res = {"A": [], "B": []}
        for r in range(a.reps):
            for name in (("A", "B") if r % 2 == 0 else ("B", "A")):
                w = one_run(env_, sv[name], a.conc, a.dur)
                res[name].append(w)
                log("run %d %s: %.0f req/s, busiest HTTP thread %.2f of their CPU" %
                    (r, name, w["rps"], w["busiest"]))
        print("%s hits, %d connections opened at once, %d runs of %d s per arm:\n" %
              (a.size, a.conc, a.reps, a.dur))
        print("| arm | req/s | CPU µs/req | p99 ms | per run: req/s (busiest thread's share) |")
        print("| --- | --- | --- | --- | --- |")
        for name in ("A", "B"):
            rs = res[name]
            print("| %s | %s | %s | %s | %s |" % (
                name, fmt(summary([x["rps"] for x in rs])),
                fmt(summary([x["cpu_us_per_req"] for x in rs])),
                fmt(summary([x["p99_ms"] for x in rs]), 3),
                ", ".join("%.0f (%.2f)" % (x["rps"], x["busiest"]) for x in rs)))
        ratios = [y["rps"] / x["rps"] for x, y in zip(res["A"], res["B"])]
        print("\nB/A req/s per run pair: %s" % fmt(summary(ratios), 2))
    finally:
        stop_all()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
