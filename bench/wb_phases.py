#!/usr/bin/env python3
"""bench/wb_phases.py - where a write-back checkpoint's time goes (issue 13).

  python3 bench/wb_phases.py [--bin build-bench/shardgate] [--size-mib 1024] [--strace | --perf]

One gateway on 127.0.0.1 with a write-back bucket over a directory-store cold
tier (--data), cache.on_write on; one file of --size-mib written with boto3's
upload_file (8 MiB parts, 10 threads). Prints the seconds to the last
acknowledgement, how many of them CompleteMultipartUpload took (boto3's own
before/after-call events), the gateway's CPU per GiB ingested, and with
--strace the time the gateway spent in copy_file_range, fsync and unlinkat
(strace -T, whose per-thread timeline is in /tmp/shardgate-wb-phases/strace.txt:
it slows the run, read the shares, not the total); with --perf, where the
gateway's CPU went (perf record of the ingestion, shares by library, in
CPU-s per GiB), next to what `openssl speed` gives for MD5 (the ETag) and
SHA-256 (the signed payload) on this CPU: the floor of hashing every byte
twice. Everything it starts it stops; its files are under
/tmp/shardgate-wb-phases."""
import argparse
import os
import re
import signal
import subprocess
import sys
import time
from collections import defaultdict

from boto3.s3.transfer import TransferConfig

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import wbgw  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = 1 << 20


def cpu_s(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def perf_shares(data, cpu_per_gib):
    """Prints the profile's shares by library, in CPU-s per GiB too, and the
    hashing floor from openssl speed."""
    out = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso",
                          "--stdio"], capture_output=True, text=True).stdout
    print("  where the gateway's CPU went (perf, by library):")
    for line in out.splitlines():
        m = re.match(r"\s+([\d.]+)%\s+(\S+)", line)
        if m and float(m.group(1)) >= 0.5:
            share = float(m.group(1)) / 100
            print("    %5.1f%%  %.2f CPU-s/GiB  %s" % (100 * share, share * cpu_per_gib, m.group(2)))
    sp = subprocess.run(["openssl", "speed", "-seconds", "2", "-bytes", "65536", "md5", "sha256"],
                        capture_output=True, text=True).stdout
    rates = {}
    for line in sp.splitlines():
        m = re.match(r"(md5|sha256)\s+([\d.]+)k$", line.strip())
        if m:
            rates[m.group(1)] = float(m.group(2)) * 1000
    if len(rates) == 2:
        print("  openssl speed, 64 KiB blocks: MD5 %.0f MB/s, SHA-256 %.0f MB/s: hashing each "
              "byte with both costs %.2f CPU-s/GiB" % (
                  rates["md5"] / 1e6, rates["sha256"] / 1e6,
                  (1 << 30) / rates["md5"] + (1 << 30) / rates["sha256"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build-bench", "shardgate"))
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--strace", action="store_true")
    ap.add_argument("--perf", action="store_true")
    a = ap.parse_args()
    work = "/tmp/shardgate-wb-phases"
    gw, port = wbgw.start(a.bin, work, 27950)
    tracer = None
    try:
        src = work + "/checkpoint"
        wbgw.checkpoint(src, a.size_mib)
        s3 = wbgw.client(port)
        t = {}
        s3.meta.events.register("before-call.s3.CompleteMultipartUpload",
                                lambda **k: t.__setitem__("c0", time.time()))
        s3.meta.events.register("after-call.s3.CompleteMultipartUpload",
                                lambda **k: t.__setitem__("c1", time.time()))
        if a.strace:
            tracer = subprocess.Popen(["strace", "-f", "-qq", "-T", "-o", work + "/strace.txt",
                                       "-tt", "-e", "trace=copy_file_range,fsync,fdatasync,sync_file_range,unlinkat", "-p", str(gw.pid)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
        if a.perf:
            tracer = subprocess.Popen(["perf", "record", "-F", "499", "-g", "-o", work + "/perf.data",
                                       "-p", str(gw.pid)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
        c0, t0 = cpu_s(gw.pid), time.time()
        s3.upload_file(src, "ckpt", "checkpoint",
                       Config=TransferConfig(multipart_chunksize=8 * MiB, max_concurrency=10))
        t1, c1 = time.time(), cpu_s(gw.pid)
        print("%d MiB into a write-back bucket: last ack after %.2f s (%.0f MB/s); "
              "CompleteMultipartUpload %.2f s of it; gateway CPU %.2f CPU-s per GiB" % (
                  a.size_mib, t1 - t0, a.size_mib * MiB / (t1 - t0) / 1e6, t["c1"] - t["c0"],
                  (c1 - c0) / (a.size_mib / 1024)))
        if tracer and a.perf:
            tracer.send_signal(signal.SIGINT)
            tracer.wait()
            tracer = None
            perf_shares(work + "/perf.data", (c1 - c0) / (a.size_mib / 1024))
        if tracer:
            tracer.send_signal(signal.SIGINT)
            tracer.wait()
            tracer = None
            secs, calls = defaultdict(float), defaultdict(int)
            for line in open(work + "/strace.txt"):
                # a call another thread interrupted ends on its "<... NAME resumed>" line
                m = re.search(r"(?:<\.\.\. (\w+) resumed>|(\w+)\().*<([\d.]+)>$", line.strip())
                if m:
                    name = m.group(1) or m.group(2)
                    secs[name] += float(m.group(3))
                    calls[name] += 1
            for name in sorted(secs):
                print("  %s: %d calls, %.2f s" % (name, calls[name], secs[name]))
    finally:
        if tracer:
            tracer.kill()
        gw.send_signal(signal.SIGTERM)
        gw.wait()


if __name__ == "__main__":
    main()
