#!/usr/bin/env python3
"""Cache hits on the wire: what the kernel's TCP does per response, shardgate
against nginx (issue 14, the 1 MiB hit rows).

  python3 bench/hits_wire.py BIN [BIN ...] [--size 1m|4k|...|64m] [--conc 64] [--reps 3] [--dur 4]

Servers over the same files (hard links), each read by wrk for --dur seconds
per run, in turns (the order reversed on odd runs):

- nginx as in the quick run (sendfile on, tcp_nopush on: the socket corked
  while the headers and the file go out, so the headers ride in the body's
  first segment);
- the same nginx with tcp_nopush off: its headers are pushed in a segment of
  their own before the file, which is what libmicrohttpd 0.9.75 does for a
  file response ("Push the header as the client may react on header alone",
  MHD_send_hdr_and_body_ in mhd_send.c);
- the same nginx with sendfile off: it reads the file into its buffers and
  writes them (a copy), the headers in the first write;
- each shardgate BIN (A, B, ... when more than one) over a directory store of
  its own, every GET a hit after two warm-up reads of each object.

Per run: req/s; the machine's busy cores and the part of them in softirq
(/proc/stat: on loopback the receiving side's TCP work, and what an ACK
sends, run there); the server's own CPU (the scheduler's nanoseconds); and
per response, from the kernel's counters (nstat, both directions, the
client's included): segments, data segments, pure ACKs, tail loss probes,
retransmitted segments and zero-window advertisements. Machine-wide: run it
on a quiet machine. Used in bench/results/hits-wire.md."""
import argparse
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from procs import (free_port, http_get, log, run_wrk, start_nginx, start_shardgate,  # noqa: E402
                   stop_all, thread_ns)
from report import fmt, summary  # noqa: E402

SIZES = {"4k": 4096, "64k": 64 << 10, "128k": 128 << 10, "192k": 192 << 10, "256k": 256 << 10, "1m": 1 << 20, "4m": 4 << 20,
         "16m": 16 << 20, "64m": 64 << 20}
COUNTERS = (("segments", "TcpOutSegs"), ("data segments", "TcpExtTCPOrigDataSent"),
            ("pure ACKs", "TcpExtTCPPureAcks"), ("ACKs on the fast path", "TcpExtTCPHPAcks"),
            ("tail loss probes", "TcpExtTCPLossProbes"), ("retransmitted", "TcpRetransSegs"),
            ("zero windows", "TcpExtTCPToZeroWindowAdv"))


def nstat():
    """The kernel's TCP counters since the last call (nstat keeps the history)."""
    out = subprocess.run(["nstat", "-z"], capture_output=True, text=True, check=True).stdout
    vals = {}
    for line in out.splitlines()[1:]:
        f = line.split()
        if len(f) >= 2 and f[1].isdigit():
            vals[f[0]] = int(f[1])
    return vals


def cpu_stat():
    """(all, idle + iowait, irq + softirq) jiffies of the machine."""
    v = list(map(int, open("/proc/stat").readline().split()[1:]))
    return sum(v), v[3] + v[4], v[5] + v[6]


def one_run(env_, srv, n, conc, dur):
    cores = os.cpu_count()
    nstat()
    s0 = cpu_stat()
    t0 = thread_ns(srv.pids())
    w = run_wrk(env_, srv, "/bench/s/", n, conc, dur)
    t1 = thread_ns(srv.pids())
    s1 = cpu_stat()
    ns = nstat()
    tot = max(1, s1[0] - s0[0])
    secs = w["duration_us"] / 1e6
    req = max(1, w["requests"])
    r = dict(rps=w["rps"], p99=w["p99_ms"],
             busy=cores * (1 - (s1[1] - s0[1]) / tot), softirq=cores * (s1[2] - s0[2]) / tot,
             server=sum(t1[t] - t0.get(t, 0) for t in t1) / 1e9 / secs)
    for label, key in COUNTERS:
        r[label] = ns.get(key, 0) / req
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bins", nargs="+")
    ap.add_argument("--size", choices=sorted(SIZES), default="1m")
    ap.add_argument("--conc", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dur", type=int, default=4)
    a = ap.parse_args()
    if not shutil.which("nstat"):
        sys.exit("hits_wire.py needs nstat (iproute2)")
    work = "/tmp/shardgate-bench-wire"
    shutil.rmtree(work, ignore_errors=True)
    n = 2000 if SIZES[a.size] <= 64 << 10 else 64 if SIZES[a.size] <= 4 << 20 else 8
    src = os.path.join(work, "data", "bench", "s")
    os.makedirs(src)
    for i in range(n):
        with open(os.path.join(src, "%06d" % i), "wb") as f:
            f.write(os.urandom(SIZES[a.size]))
    env_ = dict(work=work)
    try:
        servers = []
        for name, extra in (("nginx", ""), ("nginx, headers pushed alone", "tcp_nopush off;"),
                            ("nginx, sendfile off", "sendfile off;")):
            port = free_port(27800 + 10 * len(servers))
            servers.append((name, start_nginx("ngx%d" % len(servers), os.path.join(work, "ngx%d" % len(servers)),
                                              "\n  server {{ listen 127.0.0.1:{p}; root {r}; {x} }}".format(
                                                  p=port, r=os.path.join(work, "data"), x=extra), port)))
        for k, binp in enumerate(a.bins):
            tag = "" if len(a.bins) == 1 else " " + "ABCDEFGH"[k]
            sgdata = os.path.join(work, "data-sg%d" % k, "bench", "s")
            os.makedirs(sgdata)
            for i in range(n):
                os.link(os.path.join(src, "%06d" % i), os.path.join(sgdata, "%06d" % i))
            env_["bin"] = binp
            sg = start_shardgate(env_, "sg%d" % k, free_port(27830 + 10 * k), None,
                                 os.path.join(work, "cache%d" % k),
                                 data_dir=os.path.join(work, "data-sg%d" % k))
            for _ in range(2):
                for i in range(n):
                    http_get(sg.port, "/bench/s/%06d" % i)
            servers.append(("shardgate" + tag, sg))
        res = {name: [] for name, _ in servers}
        for rep in range(a.reps):
            for name, srv in (servers if rep % 2 == 0 else servers[::-1]):
                res[name].append(one_run(env_, srv, n, a.conc, a.dur))
                r = res[name][-1]
                log("%s run %d: %.0f req/s, server %.2f cores, softirq %.2f, %.2f tail loss probes "
                    "per response" % (name, rep, r["rps"], r["server"], r["softirq"], r["tail loss probes"]))
        cols = [("req/s", "rps", 0), ("p99 ms", "p99", 2), ("busy cores", "busy", 2),
                ("of which softirq", "softirq", 2), ("server CPU cores", "server", 2)]
        cols += [(label + " / response", label, 2) for label, _ in COUNTERS]
        print("%s hits, c=%d, %d runs of %d s each (median [min-max])\n" % (a.size, a.conc, a.reps, a.dur))
        print("| | " + " | ".join(name for name, _ in servers) + " |")
        print("| --- |" + " --- |" * len(servers))
        for label, key, nd in cols:
            print("| %s | %s |" % (label, " | ".join(fmt(summary([r[key] for r in res[name]]), nd)
                                                    for name, _ in servers)))
        base = res["nginx"]
        print("\nreq/s against nginx: " + ", ".join(
            "%s %s" % (name, fmt(summary([x["rps"] / y["rps"] for x, y in zip(res[name], base)]), 2))
            for name, _ in servers[1:]))
    finally:
        stop_all()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
