#!/usr/bin/env python3
"""cache.fill_io A/B on staging fills (prefetch), side by side.

  python3 bench/staging_ab.py [--reps N] [--dur S] [--bin BIN] [--out FILE]

One gateway binary, two settings of cache.fill_io: "buffered" (every fill
through the page cache) and "direct" (the default: fills of 256 KiB or more
with O_DIRECT; staging fills are written the same under "staging"). Each
arm is a gateway over a directory store (--data: a dataset
directory or a parallel file system mount) holding 2,000 objects of 4 KiB
and 64 MiB objects (hard links of one random file), with its own empty
cache directory. Per run and arm:
  * staging alone: a prefetch hint for 24 objects of 64 MiB, the gateway's
    CPU (procs.cpu_since) per GiB staged and the time until all are published;
  * 4 KiB hits (wrk, c = 8, S seconds) alone, then while a hint stages 160
    more objects of 64 MiB (10 GiB): hits/s with staging / alone.
The arms alternate (B first on odd runs). Medians [min-max] over the runs.
Results: bench/results/fills-ab-direct.md."""
import argparse
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from procs import cpu_since, cpu_snap, free_port, log, metrics, run_getc, run_wrk, start_shardgate, stop_all  # noqa: E402
from report import fmt, summary  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = 1 << 20
SMALL, ALONE, BUSY = 2000, 24, 160
ARMS = (("A", "buffered"), ("B", "direct"))


def prefetch(env_, port, first, count):
    keys = os.path.join(env_["work"], "keys.txt")
    with open(keys, "w") as f:
        f.write("".join("big/%06d\n" % i for i in range(first, first + count)))
    e = dict(os.environ, AWS_ACCESS_KEY_ID="shardgate", AWS_SECRET_ACCESS_KEY="shardgate-secret-key")
    subprocess.run([env_["bin"], "prefetch", "--endpoint", "http://127.0.0.1:%d" % port,
                    "s3://bench", "--keys-file", keys], env=e, check=True,
                   stdout=subprocess.DEVNULL, timeout=60)


def fills_done(port):
    return metrics(port)["shardgate_cache_fills_done_total"]


def one_run(env_, arm, fill_io, r):
    cache = os.path.join(env_["work"], "cache-" + arm)
    shutil.rmtree(cache, ignore_errors=True)
    sg = start_shardgate(env_, "sg-" + arm, free_port(env_["port_base"] + (0 if arm == "A" else 10)),
                         None, cache, data_dir=env_["data"], cache_conf={"fill_io": fill_io})
    try:
        small = ["/bench/small/%06d" % i for i in range(SMALL)]
        run_getc(env_, sg.port, small, conc=8)
        run_getc(env_, sg.port, small, conc=8)
        # staging alone
        d0, c0, t0 = fills_done(sg.port), cpu_snap(sg.pids()), time.time()
        prefetch(env_, sg.port, 0, ALONE)
        while fills_done(sg.port) < d0 + ALONE:
            if time.time() - t0 > 120:
                raise RuntimeError("staging did not end in 120 s")
            time.sleep(0.02)
        secs, cpu = time.time() - t0, cpu_since(c0, sg.pids())
        gib = ALONE * 64 * MiB / (1 << 30)
        m = metrics(sg.port)
        direct = m['shardgate_cache_fill_bytes_total{how="direct"}']
        # hits alone, then next to staging
        alone = run_wrk(env_, sg, "/bench/small/", SMALL, 8, env_["dur"])
        prefetch(env_, sg.port, ALONE, BUSY)
        time.sleep(0.2)
        d1 = fills_done(sg.port)
        busy = run_wrk(env_, sg, "/bench/small/", SMALL, 8, env_["dur"])
        staged = fills_done(sg.port) - d1
        log("run %d %s (%s): staging %.2f CPU-s/GiB, %.2f s; hits %.0f alone, %.0f with staging "
            "(%d objects staged meanwhile)" % (r, arm, fill_io, cpu / gib, secs, alone["rps"],
                                                busy["rps"], staged))
        return dict(cpu_per_gib=cpu / gib, stage_s=secs, stage_MBps=ALONE * 64 * MiB / secs / 1e6,
                    direct_gib=direct / (1 << 30), alone=alone["rps"], busy=busy["rps"],
                    ratio=busy["rps"] / alone["rps"], busy_p99=busy["p99_ms"],
                    alone_p99=alone["p99_ms"], staged=staged)
    finally:
        sg.stop()
        shutil.rmtree(cache, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--dur", type=int, default=4)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build-bench", "shardgate"))
    ap.add_argument("--getc", default=os.path.join(ROOT, "build-bench", "bench-getc"))
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    work = os.environ.get("BENCH_WORK", "/tmp/shardgate-bench-staging")
    data = os.path.join(work, "data")
    env_ = dict(work=work, bin=a.bin, getc=a.getc, dur=a.dur, data=data,
                port_base=int(os.environ.get("BENCH_PORT_BASE", "27900")))
    os.makedirs(os.path.join(data, "bench", "small"), exist_ok=True)
    os.makedirs(os.path.join(data, "bench", "big"), exist_ok=True)
    for i in range(SMALL):
        p = os.path.join(data, "bench", "small", "%06d" % i)
        if not os.path.exists(p):
            with open(p, "wb") as f:
                f.write(os.urandom(4096))
    src = os.path.join(work, "rand64m")
    if not os.path.exists(src):
        with open(src, "wb") as f:
            for _ in range(64):
                f.write(os.urandom(MiB))
    for i in range(ALONE + BUSY):
        p = os.path.join(data, "bench", "big", "%06d" % i)
        if not os.path.exists(p):
            os.link(src, p)
    res = {arm: [] for arm, _ in ARMS}
    t_start = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load0 = os.getloadavg()[0]
    try:
        for r in range(a.reps):
            order = ARMS if r % 2 == 0 else ARMS[::-1]
            for arm, fill_io in order:
                res[arm].append(one_run(env_, arm, fill_io, r))
    finally:
        stop_all()
    rows = ["cache.fill_io A/B on staging fills (`python3 bench/staging_ab.py --reps %d --dur %d`), "
            "%s, load %.2f at the start, %.2f at the end; binary %s. A = \"buffered\", B = \"direct\" "
            "(staging fills with O_DIRECT). Medians [min-max] of %d runs each, alternating; ratio = "
            "per-run B / A." % (a.reps, a.dur, t_start, load0, os.getloadavg()[0], a.bin, a.reps), "",
            "| arm | staging: CPU-s per GiB | staging: s for 24 x 64 MiB | GiB written O_DIRECT "
            "| 4 KiB hits/s alone | ... while staging | with / alone | p99 ms alone / while staging |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for arm, fill_io in ARMS:
        X = res[arm]
        rows.append("| %s (%s) | %s | %s | %s | %s | %s | %s | %s / %s |" % (
            arm, fill_io, fmt(summary([x["cpu_per_gib"] for x in X]), 2),
            fmt(summary([x["stage_s"] for x in X]), 2), fmt(summary([x["direct_gib"] for x in X]), 1),
            fmt(summary([x["alone"] for x in X]), 0), fmt(summary([x["busy"] for x in X]), 0),
            fmt(summary([x["ratio"] for x in X]), 2), fmt(summary([x["alone_p99"] for x in X]), 2),
            fmt(summary([x["busy_p99"] for x in X]), 2)))
    ra = [b["cpu_per_gib"] / x["cpu_per_gib"] for x, b in zip(res["A"], res["B"])]
    rr = [b["ratio"] / x["ratio"] for x, b in zip(res["A"], res["B"])]
    rows.append("| **B / A** | **%s** | | | | | **%s** | |" % (fmt(summary(ra), 2), fmt(summary(rr), 2)))
    text = "\n".join(rows) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
