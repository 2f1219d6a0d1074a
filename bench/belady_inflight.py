#!/usr/bin/env python3
"""bench/belady_inflight.py - the fewest cold reads per epoch any cache of C
objects can make on bench/epochs.py's read orders when the next K reads must
be held in the cache at once (reads and fills in flight, or objects staged
ahead of the readers): an offline bound to hold the loader results against.

The reads are epochs.py's: epoch e (1-based) reads all --shards keys in
random.Random(seed + e) shuffled order; ranks reading in step interleave
into that same order (rank r takes places r, r + R, ...), so the sequence
does not depend on the number of ranks. Before read t the objects of reads
t .. t+K-1 must be cached; each one that is not is a cold read (counted in
the epoch of its read) and, when the cache is full, evicts the object needed
furthest ahead among those not held (Belady's rule). K = 1 is Belady's rule.

Usage: python3 bench/belady_inflight.py [--cache 79] [--held 1,4,16,32,48,64]
Prints the cold reads of epochs 2 .. last for each K.
"""

import argparse
import bisect
import random


def reads(shards, epochs, seed):
    keys = ["train/shard-%06d.tar" % i for i in range(shards)]
    seq = []
    for e in range(1, epochs + 1):
        o = list(keys)
        random.Random(seed + e).shuffle(o)
        seq += o
    return seq


def cold_reads(seq, per_epoch, cap, held):
    """Cold reads per epoch under Belady's rule with `held` reads held."""
    places = {}
    for t, x in enumerate(seq):
        places.setdefault(x, []).append(t)

    def next_use(x, t):
        p = places[x]
        i = bisect.bisect_left(p, t)
        return p[i] if i < len(p) else len(seq)

    cache, cold = set(), [0] * (len(seq) // per_epoch)
    for t in range(len(seq)):
        window = seq[t:t + held]
        for q, x in enumerate(window if t == 0 else window[-1:]):
            if x in cache:
                continue
            cold[(t + (q if t == 0 else held - 1)) // per_epoch] += 1
            if len(cache) >= cap:
                keep = set(window)
                cache.remove(max((y for y in cache if y not in keep),
                                 key=lambda y: next_use(y, t)))
            cache.add(x)
    return cold


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shards", type=int, default=160)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cache", type=int, default=79,
                    help="objects the cache holds (epochs.py's 80 MiB: 79 of 1 MiB)")
    ap.add_argument("--held", default="1,4,16,32,48,64")
    a = ap.parse_args()
    seq = reads(a.shards, a.epochs, a.seed)
    print("cache of %d objects, %d shards, epochs 2-%d: cold reads per epoch" % (
        a.cache, a.shards, a.epochs))
    for k in (int(x) for x in a.held.split(",")):
        print("  %3d reads held at once: %s" % (
            k, " / ".join(str(n) for n in cold_reads(seq, a.shards, a.cache, k)[1:])))


if __name__ == "__main__":
    main()
