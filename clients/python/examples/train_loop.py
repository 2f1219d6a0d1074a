#!/usr/bin/env python3
"""train_loop.py - a training-loop skeleton that reads WebDataset tar shards
from shardgate and tells the gateway in which order this rank will read them
(ordered prefetch hints), so the NVMe cache stages the next shards while the
current one is being consumed.

Per epoch: shuffle the shard list with random.Random(seed + epoch) and take
this rank's share. The orders come from the seed, so the loop declares each
epoch one epoch ahead: epochs 0 and 1 before epoch 0, then epoch e+1's hint
as epoch e starts (epoch, consumer="rank<R>"); the gateway then stages the
start of the next epoch during this one (cache/HINTS.md, "chains").
--hint-at-start sends each epoch's hint only as it starts. Every shard is
streamed through boto3 get_object()['Body'] with tarfile in stream mode 'r|'
(the way WebDataset's pipe: URLs stream), counting samples (files that share
a basename, WebDataset style) and bytes. Prints one line per epoch:

  epoch=0 rank=0 shards=20 samples=100 bytes=1638400 seconds=0.84 wait_s=0.61 job=p1a2b3c4

wait_s is the time spent waiting for data (get_object + reading the stream);
--compute-ms simulates work per sample, which is what prefetch hides.

  python3 train_loop.py --endpoint http://gateway:9000 --bucket datasets \\
      --template 'train/shard-{000000..001023}.tar' --epochs 2 --seed 1 --rank 0
"""

import argparse
import os
import random
import sys
import tarfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from shardgate_prefetch import Prefetcher, PrefetchError, expand_template  # noqa: E402


class TimedReader:
    """A file object over a StreamingBody that adds up the time spent in read()."""

    def __init__(self, body, clock):
        self.body, self.clock = body, clock

    def read(self, n=-1):
        t = time.monotonic()
        try:
            return self.body.read(n if n is not None and n >= 0 else None)
        finally:
            self.clock[0] += time.monotonic() - t


def sample_name(member_name):
    """WebDataset groups files into samples by the name before the first dot
    of the last path component: 000123.jpg + 000123.cls = one sample."""
    d, _, base = member_name.rpartition("/")
    return d + "/" + base.split(".", 1)[0]


def read_shard(s3, bucket, key, wait, compute_s):
    """Streams one tar shard; returns (samples, bytes of member data)."""
    t = time.monotonic()
    body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    wait[0] += time.monotonic() - t
    samples, nbytes, current = 0, 0, None
    try:
        with tarfile.open(fileobj=TimedReader(body, wait), mode="r|") as tf:
            for m in tf:
                if not m.isfile():
                    continue
                f = tf.extractfile(m)
                data = f.read() if f is not None else b""   # timed by TimedReader
                nbytes += len(data)
                name = sample_name(m.name)
                if name != current:
                    if current is not None and compute_s:
                        time.sleep(compute_s)
                    samples += 1
                    current = name
        if current is not None and compute_s:
            time.sleep(compute_s)
    finally:
        body.close()
    return samples, nbytes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint", required=True, help="the gateway, http://host:port")
    ap.add_argument("--bucket", required=True)
    ap.add_argument("--template", required=True,
                    help="the shards, e.g. 'train/shard-{000000..001023}.tar'")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world-size", type=int, default=1,
                    help="ranks reading the dataset; rank R reads shards R, R+W, ... "
                         "of each epoch's order")
    ap.add_argument("--window-objects", type=int, default=None,
                    help="stay at most this many shards ahead of the reader")
    ap.add_argument("--compute-ms", type=float, default=0.0,
                    help="simulated work per sample, in milliseconds")
    ap.add_argument("--no-hint", action="store_true", help="read without prefetch hints")
    ap.add_argument("--hint-at-start", action="store_true",
                    help="send each epoch's hint as it starts, not one epoch ahead")
    ap.add_argument("--region", default=os.environ.get("AWS_REGION", "us-east-1"))
    a = ap.parse_args()
    if not 0 <= a.rank < a.world_size:
        ap.error("--rank must be in [0, --world-size)")

    import boto3
    from botocore.config import Config
    s3 = boto3.session.Session().client(
        "s3", endpoint_url=a.endpoint, region_name=a.region,
        config=Config(s3={"addressing_style": "path"}, signature_version="s3v4",
                      retries={"max_attempts": 3, "mode": "standard"}))
    pf = Prefetcher(a.endpoint, region=a.region)
    shards = expand_template(a.template)

    def my_shards(epoch):
        order = list(shards)
        random.Random(a.seed + epoch).shuffle(order)
        return order[a.rank::a.world_size]

    def send_hint(epoch):
        """The job id of epoch's ordered hint, or "-" when it was refused."""
        try:
            return pf.hint(a.bucket, keys=my_shards(epoch), ordered=True, epoch=epoch,
                           consumer="rank%d" % a.rank, window_objects=a.window_objects)["job"]
        except PrefetchError as e:
            # training goes on without prefetch; the gateway said why
            print("warning: prefetch hint refused: %s" % e, file=sys.stderr, flush=True)
            return "-"

    next_job = None
    for epoch in range(a.epochs):
        mine = my_shards(epoch)
        job_id = "-"
        t0 = time.monotonic()
        if not a.no_hint:
            ahead = not a.hint_at_start
            job_id = next_job if ahead and next_job else send_hint(epoch)
            if ahead and epoch + 1 < a.epochs:
                next_job = send_hint(epoch + 1)
        wait = [0.0]
        samples = nbytes = 0
        for key in mine:
            s, n = read_shard(s3, a.bucket, key, wait, a.compute_ms / 1000.0)
            samples += s
            nbytes += n
        dt = time.monotonic() - t0
        print("epoch=%d rank=%d shards=%d samples=%d bytes=%d seconds=%.2f wait_s=%.2f job=%s"
              % (epoch, a.rank, len(mine), samples, nbytes, dt, wait[0], job_id), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
