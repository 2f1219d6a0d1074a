#!/usr/bin/python3
"""bench/dataloader.py - a real PyTorch DataLoader reading WebDataset-style tar
shards through shardgate with boto3, ordered hints one epoch ahead, every
sample's checksum compared.

Needs Debian's PyTorch and boto3 for Debian's Python (PyPI is not used):
    apt-get install -y python3-torch python3-boto3
    /usr/bin/python3 bench/dataloader.py [--workers 4] [--epochs 4] ...

Setup (everything on 127.0.0.1; the modules of tests/integration):
  cold tier = shardgate A serving --data DIR: --shards tar shards of about
              --shard-kib KiB (USTAR members of random bytes, up to ~60 KB each);
  link      = tests/integration/throttle.py at --cold-mbps MB/s from A to B;
  cache     = shardgate B, --cache-size --cache-mib MiB, immutable, watermarks
              100 / 95 (as bench/epochs.py);
  reader    = torch.utils.data.DataLoader(IterableDataset, num_workers=W,
              batch_size=None): worker w of the loader reads shards w, w+W, ...
              of the epoch's order (random.Random(seed + e)), each with its own
              boto3 client, opens each shard with tarfile and yields its
              samples; the main process checks every sample's sha256 and
              consumes at --reader-mbps MB/s (sleeps size/rate per sample).
Variants, alternated per run: LRU (no hints), ordered hints sent one epoch
ahead with clients/python's Prefetcher (epochs 1 and 2 before epoch 1), and
the same hints with "stage_ahead": --stage-ahead (cache/HINTS.md).
Per epoch: cold MiB (B's shardgate_backend_bytes_total), the time the main
process spent waiting in next(loader), wall time, samples checked and wrong.

Writes bench/results/dataloader.md (--out) and prints it.
"""

import argparse
import hashlib
import io
import os
import platform
import random
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))

MiB = 1024 * 1024
BUCKET = "shards"
LRU, AHEAD, EAGER = "LRU (no hints)", "hints one epoch ahead", "hints one epoch ahead + stage_ahead"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", type=int, default=96)
    ap.add_argument("--shard-kib", type=int, default=1024)
    ap.add_argument("--cache-mib", type=int, default=48)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--cold-mbps", type=float, default=40.0)
    ap.add_argument("--reader-mbps", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--stage-ahead", type=int, default=64,
                    help="also run the hinted variant with \"stage_ahead\": N in its hints "
                         "(0: not)")
    ap.add_argument("--bin", default=os.environ.get("SHARDGATE_BIN") or
                    os.path.join(ROOT, "build-epochs", "shardgate"))
    ap.add_argument("--out", default=os.path.join(HERE, "results", "dataloader.md"))
    return ap.parse_args()


def tar_samples(blob):
    """(member name, sha256 hex, size) of every file in a tar blob."""
    out = []
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:") as tf:
        for m in tf:
            if m.isfile():
                data = tf.extractfile(m).read()
                out.append((m.name, hashlib.sha256(data).hexdigest(), len(data)))
    return out


def make_dataset(order, endpoint, access, secret):
    """An IterableDataset over one epoch's shard order: worker w of W reads
    shards w, w+W, ... (WebDataset's split by worker), yielding (shard,
    member, sha256, size) per sample."""
    import torch.utils.data as tud

    class Shards(tud.IterableDataset):
        def __iter__(self):
            import boto3
            from botocore.config import Config
            info = tud.get_worker_info()
            w, n = (info.id, info.num_workers) if info else (0, 1)
            s3 = boto3.session.Session().client(
                "s3", endpoint_url=endpoint, region_name="us-east-1",
                aws_access_key_id=access, aws_secret_access_key=secret,
                config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
            for key in order[w::n]:
                blob = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
                for name, sha, size in tar_samples(blob):
                    yield key, name, sha, size

    return Shards()


class Bench:
    def __init__(self, a):
        import harness as H
        import cache_common as C
        import prefetch_common as P
        from throttle import ThrottleProcess
        self.H, self.C, self.P, self.TP = H, C, P, ThrottleProcess
        self.a = a
        self.keys = ["train/shard-%06d.tar" % i for i in range(a.shards)]
        self.want = {}          # (shard, member) -> sha256
        self.dataset_bytes = 0

    def order(self, e):
        o = list(self.keys)
        random.Random(self.a.seed + e).shuffle(o)
        return o

    def setup(self):
        H, C, P = self.H, self.C, self.P
        self.cold = C.ColdGateway().start()
        for i, k in enumerate(self.keys):
            blob = P.make_shard(i, self.a.shard_kib * 1024)
            self.cold.put_file(BUCKET, k, blob)
            self.dataset_bytes += len(blob)
            for name, sha, _ in tar_samples(blob):
                self.want[(k, name)] = sha
        self.thr = self.TP("127.0.0.1", self.cold.port,
                           down_rate=self.a.cold_mbps * 1e6).start()

    def teardown(self):
        self.thr.stop()
        self.C.stop_all()

    def variant(self, hints, run):
        H, C, P = self.H, self.C, self.P
        import torch.utils.data as tud
        from shardgate_prefetch import Prefetcher
        eager = hints == "eager"
        label = EAGER if eager else AHEAD if hints else LRU
        tag = "%s-%d" % ("eager" if eager else "ahead" if hints else "lru", run)
        more = {"stage_ahead": self.a.stage_ahead} if eager else {}
        C.start_cache(C.Cache("http://127.0.0.1:%d" % self.thr.port, C.COLD_ACCESS,
                              C.COLD_SECRET, size="%dMiB" % self.a.cache_mib,
                              config={"cache": {"high_watermark": 100, "low_watermark": 95}},
                              consistency="immutable", tag=tag))
        pf = Prefetcher(H.S.endpoint, H.ACCESS_KEY, H.SECRET_KEY, region=H.REGION)
        rate = self.a.reader_mbps * 1e6
        rows = []
        try:
            for e in range(1, self.a.epochs + 1):
                if hints and e == 1:
                    pf.hint(BUCKET, keys=self.order(1), ordered=True, epoch=1, consumer="rank0",
                            **more)
                if hints and e < self.a.epochs:
                    pf.hint(BUCKET, keys=self.order(e + 1), ordered=True, epoch=e + 1,
                            consumer="rank0", **more)
                s0 = P.stats()
                loader = tud.DataLoader(make_dataset(self.order(e), H.S.endpoint,
                                                     H.ACCESS_KEY, H.SECRET_KEY),
                                        batch_size=None, num_workers=self.a.workers,
                                        prefetch_factor=2)
                t0 = time.monotonic()
                wait, n, bad = 0.0, 0, 0
                it = iter(loader)
                while True:
                    t = time.monotonic()
                    try:
                        key, name, sha, size = next(it)
                    except StopIteration:
                        break
                    wait += time.monotonic() - t
                    n += 1
                    bad += self.want.get((key, name)) != sha
                    time.sleep(size / rate)
                wall = time.monotonic() - t0
                d = P.delta(s0, P.stats())
                rows.append({"variant": label,
                             "run": run, "epoch": e, "cold": d["backend_bytes"], "wait": wait,
                             "wall": wall, "samples": n, "bad": bad})
                print("# [%s] epoch %d: cold %.1f MiB, wait %.3f s, wall %.2f s, %d samples, "
                      "%d wrong" % (tag, e, d["backend_bytes"] / MiB, wait, wall, n, bad),
                      file=sys.stderr, flush=True)
        finally:
            C.stop_cache("[%s] caching gateway exits 0 on SIGTERM" % tag)
        return rows


def report(b, rows, cmd, took):
    import torch
    a = b.a
    floor = (b.dataset_bytes - a.cache_mib * MiB) / MiB
    total = len(b.want)
    out = ["# A real PyTorch DataLoader through shardgate: cold bytes, reader wait, checksums",
           "", "Generated by `bench/dataloader.py` (%s, %.0f s). Reproduce from the repository "
           "root:" % (time.strftime("%Y-%m-%d %H:%M %Z"), took), "", "```sh",
           "apt-get install -y python3-torch python3-boto3",
           "cmake -S . -B build-epochs -DCMAKE_BUILD_TYPE=Release && "
           "cmake --build build-epochs --target shardgate -j2", cmd, "```", "", "## Setup", "",
           "- %d tar shards, %.1f MiB in all (%d samples), cold tier a `serve --data` "
           "shardgate behind `throttle.py` at %.0f MB/s; caching shardgate with a %d MiB cache "
           "(dataset - cache = %.1f MiB)." % (a.shards, b.dataset_bytes / MiB, total,
                                              a.cold_mbps, a.cache_mib, floor),
           "- `torch.utils.data.DataLoader(IterableDataset, num_workers=%d, batch_size=None, "
           "prefetch_factor=2)`, PyTorch %s (Debian), Python %s: worker w reads shards w, "
           "w+%d, ... of the epoch's shuffled order with its own boto3 client and yields "
           "their samples; the main process checks each sample's sha256 and consumes at %.0f "
           "MB/s." % (a.workers, torch.__version__, platform.python_version(), a.workers,
                      a.reader_mbps),
           "- Hints: ordered, one per epoch, sent one epoch ahead with `clients/python` "
           "(`Prefetcher.hint`); %s%d runs, the variants alternated." % (
               ("in the third variant with `\"stage_ahead\": %d`; " % a.stage_ahead)
               if a.stage_ahead else "", a.runs), "",
           "## Per epoch", "",
           "| variant | run | epoch | cold MiB | wait s | wall s | samples | wrong |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        out.append("| %s | %d | %d | %.1f | %.3f | %.2f | %d | %d |" % (
            r["variant"], r["run"], r["epoch"], r["cold"] / MiB, r["wait"], r["wall"],
            r["samples"], r["bad"]))
    out += ["", "## Reading", ""]
    for v in (LRU, AHEAD, EAGER):
        later = [r for r in rows if r["variant"] == v and r["epoch"] > 1]
        if later:
            out.append("- %s, epochs 2-%d: cold MiB per epoch %.1f-%.1f (%.2f-%.2f x dataset "
                       "- cache), wait per epoch %.3f-%.3f s." % (
                           v, a.epochs, min(r["cold"] for r in later) / MiB,
                           max(r["cold"] for r in later) / MiB,
                           min(r["cold"] for r in later) / MiB / floor,
                           max(r["cold"] for r in later) / MiB / floor,
                           min(r["wait"] for r in later), max(r["wait"] for r in later)))
    wrong = sum(r["bad"] for r in rows)
    short = [r for r in rows if r["samples"] != total]
    out.append("- Checksums: %d samples checked, %d wrong; %s." % (
        sum(r["samples"] for r in rows), wrong,
        "every epoch delivered every sample" if not short else
        "%d epochs short of samples" % len(short)))
    out.append("")
    return "\n".join(out), wrong == 0 and not short


def main():
    a = parse_args()
    try:
        import torch  # noqa: F401
        import boto3  # noqa: F401
    except ImportError as ex:
        sys.exit("needs Debian's python3-torch and python3-boto3 under /usr/bin/python3: %s"
                 % ex)
    if not os.access(a.bin, os.X_OK):
        sys.exit("no shardgate binary at %s (build it, or pass --bin)" % a.bin)
    os.environ["SHARDGATE_BIN"] = os.path.abspath(a.bin)
    b = Bench(a)
    b.C.init("bench_dataloader")
    cmd = ("/usr/bin/python3 bench/dataloader.py --shards %d --shard-kib %d --cache-mib %d "
           "--epochs %d --workers %d --cold-mbps %g --reader-mbps %g --seed %d --runs %d "
           "--stage-ahead %d" % (
               a.shards, a.shard_kib, a.cache_mib, a.epochs, a.workers, a.cold_mbps,
               a.reader_mbps, a.seed, a.runs, a.stage_ahead))
    t0 = time.monotonic()
    rows = []
    try:
        b.setup()
        for run in range(1, a.runs + 1):
            for hints in (False, True, "eager") if a.stage_ahead else (False, True):
                rows += b.variant(hints, run)
    finally:
        b.teardown()
        b.H.S.finished = True
        b.H._cleanup()
    text, ok = report(b, rows, cmd, time.monotonic() - t0)
    print(text, flush=True)
    if a.out != "-":
        with open(a.out, "w") as f:
            f.write(text)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
