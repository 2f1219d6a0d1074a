#!/usr/bin/env python3
"""bench/onwrite_fill.py - what cache.on_write costs after a write-back checkpoint
(issue 13: reads come first).

  python3 bench/onwrite_fill.py [--bin build-bench/shardgate] [--size-mib 1024] [--perf]

One gateway on 127.0.0.1 with a write-back bucket over a directory-store cold
tier, cache.on_write on and uploads capped at 1 MiB/s (so the upload stays
out of the way); one file of --size-mib written with boto3's upload_file (8
MiB parts, 10 threads). Then, from the last acknowledgement until the cache
holds the whole object: the seconds and the gateway's CPU of that fill (it
reads the staged copy and writes the cache file), and with --perf where that
CPU went (perf record, top symbols). Everything it starts it stops; its
files are under /tmp/shardgate-onwrite-fill.

Read the CPU figure with the VM in mind: on this VM a page the kernel takes
fresh costs ~1 ms per MiB to touch, unless memory was freed just before
(bench/results/fills-ab-direct.md). Run it on an idle machine, and alternate
binaries."""
import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.request

from boto3.s3.transfer import TransferConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench", "lib"))
import wbgw  # noqa: E402

MiB = 1 << 20


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        p = f.read().rsplit(")", 1)[1].split()
    return (int(p[11]) + int(p[12])) / os.sysconf("SC_CLK_TCK")


def cached_bytes(port):
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port).read().decode()
    for line in body.splitlines():
        if line.startswith("shardgate_cache_bytes "):
            return float(line.split()[1])
    return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build-bench", "shardgate"))
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--perf", action="store_true")
    a = ap.parse_args()
    work = "/tmp/shardgate-onwrite-fill"
    gw, port = wbgw.start(a.bin, work, 27990, {"metrics_public": True,
                                              "write_back": {"upload_bandwidth": "1MiB"}})
    perf = None
    try:
        src = work + "/checkpoint"
        wbgw.checkpoint(src, a.size_mib)
        s3 = wbgw.client(port)
        s3.upload_file(src, "ckpt", "checkpoint",
                       Config=TransferConfig(multipart_chunksize=8 * MiB, max_concurrency=10))
        c0, t0 = cpu_s(gw.pid), time.time()
        if a.perf:
            perf = subprocess.Popen(["perf", "record", "-F", "999", "-g", "-o", work + "/perf.data",
                                     "-p", str(gw.pid)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while cached_bytes(port) < a.size_mib * MiB and time.time() - t0 < 120:
            time.sleep(0.05)
        c1, t1 = cpu_s(gw.pid), time.time()
        if perf:
            perf.send_signal(signal.SIGINT)
            perf.wait()
            perf = None
        print("on_write fill of %d MiB after the last ack: %.2f s, gateway CPU %.2f s "
              "(%.2f CPU-s per GiB)" % (a.size_mib, t1 - t0, c1 - c0,
                                        (c1 - c0) / (a.size_mib / 1024)))
        if a.perf:
            out = subprocess.run(["perf", "report", "-i", work + "/perf.data", "--no-children",
                                  "--sort", "dso,sym", "--stdio", "-g", "none"],
                                 capture_output=True, text=True).stdout
            top = [l for l in out.splitlines() if "%" in l and not l.startswith("#")][:12]
            print("\n".join(top))
    finally:
        if perf:
            perf.kill()
        gw.send_signal(signal.SIGTERM)
        gw.wait()


if __name__ == "__main__":
    main()
