#!/usr/bin/env python3
"""bench/writeback.py - checkpoint absorption (issue 13), side by side in one run:
a checkpoint written with boto3's upload_file (--part-mib MiB parts, --threads
threads: boto3's own defaults are 8 MiB and 10) into a write-through bucket and
into a write-back bucket of the same gateway, whose cold tier is a second
shardgate behind throttle.py limited to --cold-mbps MB/s (10^6 bytes/s) from the
gateway to the cold tier; and fio's sequential write of the same size on the
cache's file system (the local disk's rate, the ceiling for write-back).

Per run, alternated (write-through first in odd runs, write-back first in even):
  write-through: seconds until upload_file returns (each part passes through to
                 the cold tier before its answer), gateway CPU seconds;
  write-back:    seconds until upload_file returns (acknowledged: staged and
                 journaled), gateway CPU seconds for that ingestion; then
                 seconds from the last ack until POST ?flush answers 200 (in
                 the cold tier) and the gateway CPU meanwhile: the on_write
                 fill with the upload beside it, then the rest of the upload
                 (they overlap, so only their sum is reported per GiB);
  fio:           sequential write, --size, 8 MiB blocks, O_DIRECT, then fsync.
  readers:       8 wrk connections reading 1 MiB cached objects (hits) for
                 --read-s seconds: alone, during the write-back ingestion of
                 a second checkpoint of --read-size-mib (the cold tier cut
                 off meanwhile, so that nothing uploads), and during its
                 upload (the flush); req/s and p99. A checkpoint of its own:
                 the CPU figures above are the gateway's without readers;
  restore:       the checkpoint read back right after the flush: cache hits
                 and misses (cache.on_write brings each write into the cache;
                 each phase starts once that background fill has ended).
Goals (issue 13): write-back >= 4x faster than write-through to the last
acknowledgement; >= 0.8x fio's rate; <= 0.7 CPU-s per GiB ingested; readers
>= 0.8x of alone during ingestion and during upload; restore all hits.

Writes bench/results/writeback.md (--out) and prints the same Markdown. Needs
boto3 and fio. Uses the test harness's modules (tests/integration).
"""

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.join(ROOT, "bench", "lib"))
import harness as H  # noqa: E402
import cache_common as C  # noqa: E402
import procs  # noqa: E402
from throttle import ThrottleProcess  # noqa: E402

MiB = 1024 * 1024
GiB = 1024 * MiB
WB, WT, HOT = "ckpt-wb", "ckpt-wt", "hot"
N_HOT = 32   # 1 MiB objects the readers hit


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size-mib", type=int, default=4096)
    p.add_argument("--cold-mbps", type=float, default=200)
    p.add_argument("--part-mib", type=int, default=8)
    p.add_argument("--threads", type=int, default=10)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--read-s", type=int, default=5, help="seconds of each reader run")
    p.add_argument("--read-size-mib", type=int, default=1024,
                   help="the checkpoint written and uploaded beside the readers")
    p.add_argument("--upload-cap", default="0",
                   help="write_back.upload_bandwidth, e.g. 100MiB (default 0: none)")
    p.add_argument("--body-threads", type=int, default=0,
                   help="the gateway's body_threads (default 0: its own default)")
    p.add_argument("--stage-io", choices=("direct", "uring", "write"), default=None,
                   help="write_back.stage_io (default: the gateway's own, direct)")
    p.add_argument("--bin", default=os.path.join(ROOT, "build-bench", "shardgate"))
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "writeback.md"))
    return p.parse_args()


@contextlib.contextmanager
def quiet():
    with contextlib.redirect_stdout(sys.stderr):
        yield


def cpu_s(pid):
    """utime + stime of a process, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fio_seq(directory, size_mib):
    """fio's sequential O_DIRECT write rate on directory's file system, bytes/s."""
    path = os.path.join(directory, "fio.seq")
    out = subprocess.run(["fio", "--name=seq", "--rw=write", "--bs=8M", "--direct=1",
                          "--size=%dM" % size_mib, "--filename=%s" % path, "--end_fsync=1",
                          "--ioengine=psync", "--output-format=json"],
                         capture_output=True, text=True, check=True).stdout
    os.unlink(path)
    job = json.loads(out)["jobs"][0]
    return job["write"]["bw_bytes"]


class Bench:
    def __init__(self, a):
        self.a = a
        self.size = a.size_mib * MiB
        self.cold = self.thr = self.cfg = None
        self.src = None

    def setup(self):
        with quiet():
            self.cold = C.ColdGateway().start()
        cc = self.cold.client()
        for b in (WB, WT, HOT):
            cc.create_bucket(Bucket=b)
        for i in range(N_HOT):
            self.cold.put_random(HOT, "%06d" % i, MiB)
        self.thr = ThrottleProcess("127.0.0.1", self.cold.port,
                                   up_rate=self.a.cold_mbps * 1e6).start()
        cap = self.a.upload_cap
        wb = {"upload_bandwidth": int(cap) if cap.isdigit() else cap}
        if self.a.stage_io:
            wb["stage_io"] = self.a.stage_io
        self.cfg = C.Cache("http://127.0.0.1:%d" % self.thr.port, C.COLD_ACCESS, C.COLD_SECRET,
                           size="%dMiB" % (2 * self.a.size_mib + 1024), tag="wb",
                           config={"buckets": {WB: {"write": "back"},
                                               HOT: {"public_read": True}},
                                   "cache": {"on_write": True}, "write_back": wb,
                                   "body_threads": self.a.body_threads})
        with quiet():
            C.start_cache(self.cfg)
        for _ in range(2):   # cached, then hit once
            for i in range(N_HOT):
                H.raw("GET", "/%s/%06d" % (HOT, i), sign=False)
        self.src = os.path.join(H.S.tmp, "checkpoint.bin")
        H.write_random_file(self.src, self.size)
        self.src_read = os.path.join(H.S.tmp, "checkpoint-read.bin")
        H.write_random_file(self.src_read, self.a.read_size_mib * MiB)

    def settle(self):
        """Waits until no fill runs (cache.on_write brings each write into the
        cache in the background) and returns the gateway CPU seconds spent
        meanwhile, so that a measured phase never pays for an earlier one."""
        pid = H.S.proc.pid
        c0 = cpu_s(pid)

        def idle():
            m = C.bm()
            started = C.metric_sum(m, "shardgate_cache_fills_total") or 0
            ended = (C.metric_sum(m, "shardgate_cache_fills_done_total") or 0) + \
                (C.metric_sum(m, "shardgate_cache_fills_failed_total") or 0)
            return started == ended
        while not idle():
            time.sleep(0.2)
        return cpu_s(pid) - c0

    def readers(self):
        """8 wrk connections on the cached 1 MiB objects for --read-s s."""
        class Srv:
            port, name = H.S.port, "shardgate"

            def pids(self_):
                return [H.S.proc.pid]
        env_ = {"work": H.S.tmp}
        r = procs.run_wrk(env_, Srv(), "/%s/" % HOT, N_HOT, 8, self.a.read_s)
        return {"rps": r["rps"], "p99_ms": r["p99_ms"]}

    def beside(self, fn):
        """Runs fn in a thread; the readers start 0.5 s in. (fn's result, readers')"""
        out = {}
        t = threading.Thread(target=lambda: out.update(v=fn()))
        t.start()
        time.sleep(0.5)
        rd = self.readers()
        alive = t.is_alive()
        t.join()
        rd["throughout"] = alive   # fn still ran when the readers stopped
        return out["v"], rd

    def restore(self, key):
        """Reads key back through the gateway: (cache hits, misses) it cost."""
        m0 = C.bm()
        c = H.boto3_client(endpoint=H.S.endpoint)
        c.download_file(WB, key, os.path.join(H.S.tmp, "restored.bin"))
        m1 = C.bm()
        os.unlink(os.path.join(H.S.tmp, "restored.bin"))
        d = {n: (C.metric_sum(m1, n) or 0) - (C.metric_sum(m0, n) or 0)
             for n in ("shardgate_cache_hits_total", "shardgate_cache_misses_total")}
        return d["shardgate_cache_hits_total"], d["shardgate_cache_misses_total"]

    def teardown(self):
        if self.thr:
            self.thr.stop()
        with quiet():
            C.stop_cache("[bench] gateway exits 0 on SIGTERM")
            C.stop_all()

    def upload(self, bucket, key, src=None):
        from boto3.s3.transfer import TransferConfig
        c = H.boto3_client(endpoint=H.S.endpoint)
        tc = TransferConfig(multipart_threshold=self.a.part_mib * MiB,
                            multipart_chunksize=self.a.part_mib * MiB,
                            max_concurrency=self.a.threads)
        pid = H.S.proc.pid
        c0, t0 = cpu_s(pid), time.monotonic()
        c.upload_file(src or self.src, bucket, key, Config=tc)
        return time.monotonic() - t0, cpu_s(pid) - c0

    def flush(self):
        pid = H.S.proc.pid
        c0, t0 = cpu_s(pid), time.monotonic()
        r = H.raw("POST", "/%s" % WB, "flush&timeout=3600", timeout=4000)
        if r.status != 200:
            raise RuntimeError("flush answered %d: %r" % (r.status, r.body[:300]))
        return time.monotonic() - t0, cpu_s(pid) - c0

    def run(self, n):
        rows = {}
        order = ("wt", "wb") if n % 2 else ("wb", "wt")
        key = "step-%d/model.bin" % n
        for v in order:
            if v == "wt":
                self.settle()
                rows["wt_s"], rows["wt_cpu"] = self.upload(WT, key)
                rows["wt_fill_cpu"] = self.settle()
            else:
                self.settle()
                rows["wb_s"], rows["wb_cpu"] = self.upload(WB, key)
                t = time.time()
                rows["wb_fill_cpu"] = self.settle()
                rows["wb_fill_s"] = time.time() - t
                # the upload runs during the fill too: only the two together
                # tell what the time after the last ack costs
                rows["flush_s"], rows["flush_cpu"] = self.flush()
                rows["restore_hits"], rows["restore_misses"] = self.restore(key)
                rows["read_alone"] = self.readers()
                self.thr.refuse()   # ingestion alone: nothing uploads meanwhile
                _, rows["read_ingest"] = self.beside(
                    lambda: self.upload(WB, "read-%d/model.bin" % n, self.src_read))
                self.thr.restore()
                _, rows["read_upload"] = self.beside(self.flush)
        rows["fio_bps"] = fio_seq(self.cfg.cache_dir, self.a.size_mib)
        return rows


def med(xs):
    return statistics.median(xs)


def spread(xs, fmt):
    return "%s [%s-%s]" % (fmt % med(xs), fmt % min(xs), fmt % max(xs))


def report(a, rows, cmd, started, took):
    gib = a.size_mib / 1024
    L = ["# Write-back: checkpoint absorption", "",
         "Run %s, %.0f s, `%s`, on %s (%d cores)." % (started, took, cmd, platform.node(),
                                                    os.cpu_count()), "",
         "A %d MiB checkpoint written with boto3 upload_file (%d MiB parts, %d threads) into a "
         "write-through and a write-back bucket of one gateway; cold tier: a shardgate "
         "behind throttle.py at %g MB/s; fio: sequential O_DIRECT write of the same size on "
         "the cache's file system. Median [min-max] of %d runs." % (
             a.size_mib, a.part_mib, a.threads, a.cold_mbps, len(rows)), "",
         "| measure | value | goal |", "| --- | --- | --- |"]
    wt = [r["wt_s"] for r in rows]
    wb = [r["wb_s"] for r in rows]
    ratio = [r["wt_s"] / r["wb_s"] for r in rows]
    rate = [a.size_mib * MiB / r["wb_s"] / 1e6 for r in rows]
    fio = [r["fio_bps"] / 1e6 for r in rows]
    vs_fio = [(a.size_mib * MiB / r["wb_s"]) / r["fio_bps"] for r in rows]
    L.append("| write-through: s to the last ack | %s | |" % spread(wt, "%.1f"))
    L.append("| write-back: s to the last ack | %s | |" % spread(wb, "%.1f"))
    L.append("| write-through / write-back | %s | >= 4x |" % spread(ratio, "%.2fx"))
    L.append("| write-back ingest MB/s | %s | |" % spread(rate, "%.0f"))
    L.append("| fio sequential write MB/s | %s | |" % spread(fio, "%.0f"))
    L.append("| write-back / fio | %s | >= 0.8x |" % spread(vs_fio, "%.2fx"))
    L.append("| write-back: s from the last ack until flushed (in the cold tier) | %s | |" % spread(
        [r["wb_fill_s"] + r["flush_s"] for r in rows], "%.1f"))
    L.append("| CPU-s per GiB ingested (write-back) | %s | <= 0.7 |" % spread(
        [r["wb_cpu"] / gib for r in rows], "%.2f"))
    L.append("| CPU-s per GiB from the last ack until flushed (write-back: the on_write fill "
             "and the upload beside it) | %s | |" % spread(
                 [(r["wb_fill_cpu"] + r["flush_cpu"]) / gib for r in rows], "%.2f"))
    L.append("| CPU-s per GiB (write-through) | %s | |" % spread(
        [r["wt_cpu"] / gib for r in rows], "%.2f"))
    L.append("| CPU-s per GiB until the on_write fill after the write ended (write-back, "
             "the upload beside it / write-through) | %s / %s | |" % (
                 spread([r["wb_fill_cpu"] / gib for r in rows], "%.2f"),
                 spread([r["wt_fill_cpu"] / gib for r in rows], "%.2f")))
    for ph, name in (("read_ingest", "during ingestion"), ("read_upload", "during upload")):
        L.append("| readers %s / alone, req/s | %s | >= 0.8x |" % (name, spread(
            [r[ph]["rps"] / r["read_alone"]["rps"] for r in rows], "%.2fx")))
        L.append("| readers %s: p99 ms (alone) | %s (%s) | |" % (name, spread(
            [r[ph]["p99_ms"] for r in rows], "%.1f"), spread(
            [r["read_alone"]["p99_ms"] for r in rows], "%.1f")))
        if not all(r[ph]["throughout"] for r in rows):
            L.append("| (the %s ended before the readers did in some runs) | | |" % name)
    L.append("| readers alone, req/s | %s | |" % spread(
        [r["read_alone"]["rps"] for r in rows], "%.0f"))
    L.append("| restore right after the flush: cache hits / misses | %s / %s | all hits |" % (
        spread([r["restore_hits"] for r in rows], "%d"),
        spread([r["restore_misses"] for r in rows], "%d")))
    L += ["", "Rerun: `%s`" % cmd, ""]
    return "\n".join(L)


def bench_init(a, tag):
    """What a write-back benchmark does first: the gateway binary (--bin) for
    the harness, the harness's state under `tag`, and SIGTERM as an exit, so
    that everything started is stopped."""
    if not os.access(a.bin, os.X_OK):
        sys.exit("no shardgate binary at %s (build it, or pass --bin)" % a.bin)
    os.environ["SHARDGATE_BIN"] = os.path.abspath(a.bin)
    C.init(tag)
    signal.signal(signal.SIGTERM, lambda s, f: (_ for _ in ()).throw(SystemExit(128 + s)))


def main():
    a = parse_args()
    if not shutil.which("fio"):
        sys.exit("fio is missing (apt-get install -y fio)")
    bench_init(a, "bench_writeback")
    cmd = "python3 bench/writeback.py --size-mib %d --cold-mbps %g --part-mib %d " \
          "--threads %d --runs %d --read-s %d --read-size-mib %d --upload-cap %s" % (
              a.size_mib, a.cold_mbps, a.part_mib, a.threads, a.runs, a.read_s,
              a.read_size_mib, a.upload_cap)
    if a.stage_io:
        cmd += " --stage-io " + a.stage_io
    run_and_report(a, Bench(a), report, cmd)


def run_and_report(a, b, report_fn, cmd):
    """Sets b up, runs it a.runs times, tears it down whatever happens, and
    prints report_fn(a, rows, cmd, started, seconds) (also to a.out unless
    "-"). Shared with bench/wb_order.py."""
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    t0 = time.monotonic()
    rows = []
    try:
        b.setup()
        for n in range(1, a.runs + 1):
            rows.append(b.run(n))
            print("# run %d: %r" % (n, rows[-1]), file=sys.stderr, flush=True)
    finally:
        b.teardown()
        H.S.finished = True
        H._cleanup()
    text = report_fn(a, rows, cmd, started, time.monotonic() - t0)
    print(text, flush=True)
    if a.out != "-":
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            f.write(text)
        print("# wrote %s" % a.out, file=sys.stderr)


if __name__ == "__main__":
    main()
