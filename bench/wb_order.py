#!/usr/bin/env python3
"""bench/wb_order.py - what write-back's ordered visibility costs (issue 13).

The write-back uploader makes objects visible in the cold tier in the order
they were acknowledged, so a checkpoint's commit marker, written last, implies
its shards are there. Plain PUTs therefore go in trains, each holding its last
byte until the one before it is answered; multipart objects send their parts
ahead (look-ahead) and only their completes wait in line. This measures the price against uploads without the order.

Set-up: a gateway with a write-back bucket; its cold tier is a second
shardgate behind throttle.py, at --cold-mbps MB/s towards the cold tier and
--latency-ms per answer (one round trip per request, as a remote S3 adds).
Per run, for each workload:
  small:  --objects objects of --size-kib KiB (plain PUTs);
  shards: --shards objects of --shard-mib MiB (boto3 multipart, 8 MiB parts);
three arms through the same link, in rotating order:
  write-back: the objects are PUT into the write-back bucket with the cold
              tier refused (nothing uploads meanwhile), then the cold tier is
              let back and POST ?flush times the upload alone: the ordered
              uploader's time;
  1 at a time: the same objects PUT directly to the cold tier, one client
              thread: the order kept by the client, the floor for an ordered
              sender of whole objects;
  8 at once:  the same, 8 client threads: no order, what the link allows.
The cost of the order is write-back / 8 at once.

Writes the Markdown to --out (bench/results/wb-order.md) and prints it.
"""

import argparse
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import harness as H  # noqa: E402
import cache_common as C  # noqa: E402
from throttle import ThrottleProcess  # noqa: E402
from writeback import bench_init, quiet, run_and_report, spread  # noqa: E402
from procs import drain  # noqa: E402 (bench/lib: on the path once writeback is imported)

MiB = 1024 * 1024
WB, DIRECT = "ckpt-wb", "direct"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--objects", type=int, default=200)
    ap.add_argument("--size-kib", type=int, default=256)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--shard-mib", type=int, default=32)
    ap.add_argument("--cold-mbps", type=float, default=200)
    ap.add_argument("--latency-ms", type=float, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "shardgate"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "wb-order.md"))
    return ap.parse_args()


def put_all(client, bucket, keys, body, threads, multipart):
    """PUTs every key (in order from one thread; any order from several)."""
    from boto3.s3.transfer import TransferConfig
    tc = TransferConfig(multipart_threshold=8 * MiB, multipart_chunksize=8 * MiB,
                        max_concurrency=8)

    def put(k):
        if multipart:
            client.upload_fileobj(_Reader(body), bucket, k, Config=tc)
        else:
            client.put_object(Bucket=bucket, Key=k, Body=body)
    return drain(keys, threads, put)


class _Reader:
    """A file-like view of bytes for upload_fileobj."""

    def __init__(self, b):
        self.b, self.off = b, 0

    def read(self, n=-1):
        end = len(self.b) if n < 0 else min(len(self.b), self.off + n)
        out = self.b[self.off:end]
        self.off = end
        return out


class Bench:
    def __init__(self, a):
        self.a = a
        self.cold = self.thr = None

    def setup(self):
        with quiet():
            self.cold = C.ColdGateway().start()
        cc = self.cold.client()
        for b in (WB, DIRECT):
            cc.create_bucket(Bucket=b)
        self.thr = ThrottleProcess("127.0.0.1", self.cold.port, up_rate=self.a.cold_mbps * 1e6,
                                   latency_ms=self.a.latency_ms).start()
        self.cfg = C.Cache("http://127.0.0.1:%d" % self.thr.port, C.COLD_ACCESS, C.COLD_SECRET,
                           size="8GiB", tag="order",
                           config={"buckets": {WB: {"write": "back"}}})
        with quiet():
            C.start_cache(self.cfg)
        self.direct = H.boto3_client(endpoint="http://127.0.0.1:%d" % self.thr.port,
                                     access=C.COLD_ACCESS, secret=C.COLD_SECRET)
        self.gw = H.boto3_client(endpoint=H.S.endpoint)

    def teardown(self):
        if self.thr:
            self.thr.stop()
        with quiet():
            C.stop_cache("[bench] gateway exits 0 on SIGTERM")
            C.stop_all()

    def write_back(self, keys, body, multipart):
        self.thr.refuse()   # ingestion alone: nothing uploads meanwhile
        put_all(self.gw, WB, keys, body, 8, multipart)
        self.thr.restore()
        t0 = time.monotonic()
        r = H.raw("POST", "/%s" % WB, "flush&timeout=3600", timeout=4000)
        if r.status != 200:
            raise RuntimeError("flush answered %d: %r" % (r.status, r.body[:300]))
        return time.monotonic() - t0

    def run(self, n):
        a = self.a
        out = {}
        for wl, count, size, mp in (("small", a.objects, a.size_kib * 1024, False),
                                    ("shards", a.shards, a.shard_mib * MiB, True)):
            body = os.urandom(size)
            arms = {
                "wb": lambda k: self.write_back(k, body, mp),
                "seq": lambda k: put_all(self.direct, DIRECT, k, body, 1, mp),
                "par": lambda k: put_all(self.direct, DIRECT, k, body, 8, mp),
            }
            names = list(arms)
            got = {}
            for i in range(len(names)):
                name = names[(n + i) % len(names)]
                keys = ["r%d/%s/%s/%05d" % (n, wl, name, j) for j in range(count)]
                got[name] = arms[name](keys)
            out[wl] = got
        return out


def report(a, rows, cmd, started, took):
    L = ["# Write-back: what the ordered upload costs", "",
         "Run %s, %.0f s, `%s`, on %s (%d cores)." % (started, took, cmd, platform.node(),
                                                    os.cpu_count()), "",
         "Cold tier: a shardgate `--data` behind throttle.py, %g MB/s towards it and %g ms "
         "per answer (one round trip per request). Seconds to get the objects into the cold "
         "tier; median [min-max] of %d runs, arms in rotating order." % (
             a.cold_mbps, a.latency_ms, len(rows)), "",
         "| workload | write-back upload (ordered) | direct, 1 at a time | direct, 8 at once | "
         "order's cost: write-back / 8 at once | write-back / 1 at a time |",
         "| --- | --- | --- | --- | --- | --- |"]
    for wl, label in (("small", "%d x %d KiB, plain PUTs" % (a.objects, a.size_kib)),
                      ("shards", "%d x %d MiB, multipart (8 MiB parts)" % (a.shards,
                                                                           a.shard_mib))):
        wb = [r[wl]["wb"] for r in rows]
        seq = [r[wl]["seq"] for r in rows]
        par = [r[wl]["par"] for r in rows]
        L.append("| %s | %s | %s | %s | %s | %s |" % (
            label, spread(wb, "%.2f"), spread(seq, "%.2f"), spread(par, "%.2f"),
            spread([r[wl]["wb"] / r[wl]["par"] for r in rows], "%.2fx"),
            spread([r[wl]["wb"] / r[wl]["seq"] for r in rows], "%.2fx")))
    L += ["", "Rerun: `%s`" % cmd, ""]
    return "\n".join(L)


def main():
    a = parse_args()
    bench_init(a, "bench_wb_order")
    cmd = "python3 bench/wb_order.py --objects %d --size-kib %d --shards %d --shard-mib %d " \
          "--cold-mbps %g --latency-ms %g --runs %d" % (
              a.objects, a.size_kib, a.shards, a.shard_mib, a.cold_mbps, a.latency_ms, a.runs)
    run_and_report(a, Bench(a), report, cmd)

if __name__ == "__main__":
    main()
