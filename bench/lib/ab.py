#!/usr/bin/env python3
"""A/B two shardgate binaries (or two flag sets) on the hit path, side by side.

  python3 bench/lib/ab.py BIN_A BIN_B [GETC] [--a-args "..."] [--b-args "..."] [--reps N] [--dur S]

Starts the cold tier (nginx static) and both gateways on 127.0.0.1 with their
own cache dirs, warms both, then alternates wrk runs A/B on 4 KiB c=8, c=64,
1 MiB c=8 and c=64 and 64 MiB c=8, and measures RSS with 1,000 idle keep-alive
connections. Prints a Markdown table (medians, [min-max], per-pair ratio B/A).
Used to measure a product-code change or a flag (e.g. --threads) before
proposing it; the binaries are built elsewhere (not in the shared tree).
"""
import argparse
import os
import shlex
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as B  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_a")
    ap.add_argument("bin_b")
    ap.add_argument("getc", nargs="?", default=os.path.join(B.ROOT, "build-bench", "bench-getc"))
    ap.add_argument("--a-args", default="")
    ap.add_argument("--b-args", default="")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dur", type=int, default=3)
    a = ap.parse_args()
    work = os.environ.get("BENCH_WORK", "/tmp/shardgate-bench-ab")
    for d in ("cache-a", "cache-b"):
        shutil.rmtree(os.path.join(work, d), ignore_errors=True)
    mode = dict(sizes=[("4k", 4096, 2000), ("1m", B.MiB, 16), ("64m", 64 * B.MiB, 4)])
    env_ = dict(work=work, getc=a.getc, port_base=int(os.environ.get("BENCH_PORT_BASE", "27500")))
    try:
        data, _, _ = B.make_data(work, mode)
        env_["data"] = data
        cp = B.free_port(env_["port_base"])
        env_["cold"] = B.start_nginx("nginx-cold", os.path.join(work, "ngx-cold"), """
  server {{ listen 127.0.0.1:{p}; root {root}; location ~ ^/[^/]+/?$ {{ return 200; }} }}""".format(
            p=cp, root=os.path.join(work, "data")), cp)
        sv = {}
        for name, binp, extra in (("a", a.bin_a, a.a_args), ("b", a.bin_b, a.b_args)):
            env_["bin"] = binp
            sv[name] = B.start_shardgate(env_, "sg-" + name, B.free_port(cp + 1 + (name == "b") * 10), cp,
                                         os.path.join(work, "cache-" + name), extra=shlex.split(extra))
        warm = ["/bench/s%s/%06d" % (t, i) for t, _, n in mode["sizes"] for i in range(n)]
        for s in sv.values():
            B.run_getc(env_, s.port, warm, conc=8)
            B.run_getc(env_, s.port, warm, conc=8)
        print("| case | A req/s | B req/s | B/A | A MB/s | B MB/s | A p99 ms | B p99 ms | A CPU µs/req | B CPU µs/req |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for tag, n, c in (("4k", 2000, 8), ("4k", 2000, 64), ("1m", 16, 8), ("1m", 16, 64),
                          ("64m", 4, 8)):
            dur = a.dur * (2 if tag == "64m" else 1)
            A_, B_ = B.pairs(a.reps, lambda r: B.run_wrk(env_, sv["a"], "/bench/s%s/" % tag, n, c, dur),
                             lambda r: B.run_wrk(env_, sv["b"], "/bench/s%s/" % tag, n, c, dur))
            g = lambda rs, k: B.summary([x[k] for x in rs])  # noqa: E731
            print("| %s c=%d | %s | %s | **%s** | %s | %s | %s | %s | %s | %s |" % (
                tag, c, B.fmt(g(A_, "rps")), B.fmt(g(B_, "rps")),
                B.fmt(B.summary([y["rps"] / x["rps"] for x, y in zip(A_, B_)]), 2),
                B.fmt(g(A_, "MBps")), B.fmt(g(B_, "MBps")), B.fmt(g(A_, "p99_ms"), 3), B.fmt(g(B_, "p99_ms"), 3),
                B.fmt(g(A_, "cpu_us_per_req")), B.fmt(g(B_, "cpu_us_per_req"))), flush=True)
        for name, s in sv.items():
            r0 = B.rss_kib(s.proc.pid)
            socks, ok = B.open_idle(s.port, 1000, "/bench/s4k/000000")
            time.sleep(0.5)
            r1 = B.rss_kib(s.proc.pid)
            for x in socks:
                x.close()
            print("\n%s: RSS %.1f MiB idle, %.1f MiB with %d idle keep-alive connections (%.1f KiB each)" % (
                name.upper(), r0 / 1024, r1 / 1024, ok, (r1 - r0) / max(1, ok)))
    finally:
        B.stop_all()


if __name__ == "__main__":
    main()
