"""tests/integration/test_prefetch_epochs.py - the headline claim of ordered
prefetch hints, through HTTP with real clients (boto3 reader, signed hint
requests): a dataset twice the size of the cache, read in a new shuffled
order each epoch, costs the cold tier close to the minimum (dataset - cache)
per epoch with hints, against much more with plain LRU.

Setup: cold tier = shardgate A (--data DIR) with 160 shards of 128 KiB
(20 MiB) in bucket "shards"; caching gateway B with --cache-size 10MiB and
"cache": {"high_watermark": 100, "low_watermark": 95} (the cache is its
capacity). 4 epochs, epoch e in the order random.Random(SEED + e).
  (a) no hints: LRU;
  (b) before each epoch an ordered hint with that epoch's order (keys,
      ordered true, epoch e, consumer "rank0").
Cold-tier bytes per epoch = delta of B's shardgate_backend_bytes_total.
Asserts for (b): epochs 2-4 each <= 1.10 x (dataset - cache) = 11 MiB, and
their sum <= 0.8 x the sum of (a)'s epochs 2-4; every body read is right.

(c) the same with the hints sent one epoch ahead (epoch 1's and 2's first,
then epoch e+1's as epoch e begins): the same cold-bytes bound.

(e) two ranks in step, one hint per rank (shards r, r+2, ... of the epoch's
order, consumer rank<r>) sent one epoch ahead: each rank's job counts
exactly its own reads, and the same cold-bytes bound holds.

(f) a data loader of 4 workers (threads, a boto3 client each): worker w
reads shards w, w+4, ... of the epoch's order, each once the reads 4 or
more before it have ended (at most 4 in flight, as a PyTorch DataLoader),
so the reads of one hint arrive interleaved and out of order; one ordered
hint per epoch, sent one epoch ahead. Asserts: epochs 2-4 each <= 1.05 x
(dataset - cache), and the job's position reaches N (it counted all reads).

(d) "reader wait": B's cold tier throttled (throttle.py, 50 MB/s); before
each read the reader waits until staging has settled (shardgate_prefetch_
settled = 1 and no fill runs: its compute, made as long as the stager needs
on any machine, so the counts do not depend on how fast the stager ran);
2 epochs each without hints, with hints sent as each epoch begins, and with
hints one epoch ahead. With hints at the start, epoch 2 is served by hits
(hit fraction >= 0.9), no read starts a miss fill (misses_total delta <= 1),
at most one read joins a staging fill, and, polling the job before each GET,
at most one read finds its shard not yet staged (at the epoch's start the
stager may evict what no hint needs to stage the first shards). With hints
one epoch ahead, every read of epoch 2 but at most one is a hit, none a
miss, and at most one finds its shard not yet staged. Asserts on counters,
never on wall time; what the reader waits in seconds when its compute is
shorter than a fill is bench/epochs.py's to measure.

Note: "attached" = reads - hits - misses. shardgate_cache_hits_total also
counts a read that missed, waited, and found the fill already published when
it resumed (so a miss can count as a hit too; seen as attached = -1), which is
why epoch 2 is also checked from the job's own counters.

The figures go to stdout as a table (lines starting "#")."""

import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import cache_common as C  # noqa: E402
import prefetch_common as P  # noqa: E402

check, eq = H.check, H.eq
MB = H.MB
BUCKET = "shards"
N = 160
SHARD = 128 * 1024
DATASET = N * SHARD                 # 20 MiB
CACHE = 10 * MB
EPOCHS = 4
SEED = 20261122
KEYS = ["train/shard-%06d.tar" % i for i in range(N)]
CACHE_CONF = {"cache": {"high_watermark": 100, "low_watermark": 95}}
THROTTLE_RATE = 50e6


def order_of(epoch):
    o = list(KEYS)
    random.Random(SEED + epoch).shuffle(o)
    return o


def start_b(cold_url, tag):
    cfg = C.Cache(cold_url, C.COLD_ACCESS, C.COLD_SECRET, size="10MiB", config=CACHE_CONF,
                  consistency="immutable", tag=tag)
    C.start_cache(cfg)
    cap = P.stats()["capacity"]
    eq("[%s] cache capacity is 10 MiB" % tag, cap, CACHE)
    return cfg


def send_hint(tag, e):
    a = P.hint(BUCKET, {"keys": order_of(e), "ordered": True, "epoch": e, "consumer": "rank0"})
    if check("[%s] epoch %d: ordered hint accepted (202)" % (tag, e), a.status == 202
             and (a.json or {}).get("job"), a):
        return a.json["job"]
    return None


def run_epochs(tag, hints, epochs, want_sha, settle=False):
    """Reads `epochs` epochs through B; returns a list of per-epoch dicts.
    hints: False (none), "start" (epoch e's hint as e begins) or "ahead"
    (epoch 1's and 2's hints first, then epoch e+1's as e begins).
    settle: before each read, wait until staging has settled (the reader's
    compute, made long enough for the stager on any machine) and count the
    reads whose shard the job has not staged even so."""
    c = H.boto3_client()
    rows = []
    next_jid = None
    for e in range(1, epochs + 1):
        order = order_of(e)
        s0 = P.stats()
        jid = None
        if hints == "start" or (hints == "ahead" and e == 1):
            jid = send_hint(tag, e)
        elif hints == "ahead":
            jid = next_jid
        if hints == "ahead" and e < epochs:   # a loader knows its last epoch
            next_jid = send_hint(tag, e + 1)
        bad = []
        ahead = 0
        unsettled = []
        t0 = time.time()
        for i, k in enumerate(order):
            if settle:
                if not C.staging_settled():
                    unsettled.append(i)
                if jid:
                    # the stager works through an ordered hint in order: key i is
                    # ready when more than i of the hint's keys are cached/staged
                    o = (P.job(BUCKET, jid).json or {}).get("objects", {})
                    if o.get("cached", 0) + o.get("staged", 0) + o.get("failed", 0) <= i:
                        ahead += 1
            body = c.get_object(Bucket=BUCKET, Key=k)["Body"].read()
            if H.sha256(body) != want_sha[k]:
                bad.append(k)
        dt = time.time() - t0
        s1 = P.stats()
        # what the queued next epoch's hint has staged by now (read after s1,
        # so at least what s1 counts): near the end of an epoch the stager
        # fetches the next epoch's first objects, in place of objects that
        # epoch needs later
        next_staged = 0
        if hints == "ahead" and next_jid and e < epochs:
            next_staged = ((P.job(BUCKET, next_jid).json or {}).get("bytes") or {}).get("done", 0)
        d = P.delta(s0, s1)
        check("[%s] epoch %d: all %d bodies right" % (tag, e, N), not bad, bad[:5])
        if settle:
            check("[%s] epoch %d: staging settled before every read" % (tag, e),
                  not unsettled, unsettled[:5])
        row = {"epoch": e, "cold_bytes": d["backend_bytes"], "cold_gets": d["backend_get"],
               "hits": d["hits"], "misses": d["misses"], "evictions": d["evictions"],
               "seconds": dt, "job": None, "objects": s1["objects"], "bytes": s1["bytes"],
               "next_staged": next_staged}
        row["attached"] = N - row["hits"] - row["misses"]
        row["ahead"] = ahead if (settle and jid) else None
        if jid:
            j = P.job(BUCKET, jid).json or {}
            row["job"] = j
            why = P.counters_ok(j)
            check("[%s] epoch %d: job counters add up" % (tag, e), not why, why)
            eq("[%s] epoch %d: job position == %d after the epoch" % (tag, e, N),
               j.get("position"), N)
            eq("[%s] epoch %d: job epoch/consumer/ordered" % (tag, e),
               (j.get("epoch"), j.get("consumer"), j.get("ordered")), (e, "rank0", True))
        rows.append(row)
    return rows


def table(title, variants):
    """variants: [(name, rows)]"""
    print("#", flush=True)
    print("# %s" % title)
    print("# dataset %d x %d KiB = %.1f MiB, cache %.1f MiB, minimum per epoch after the "
          "first = %.1f MiB" % (N, SHARD // 1024, DATASET / MB, CACHE / MB,
                                (DATASET - CACHE) / MB))
    print("# %-22s %5s %10s %9s %6s %7s %9s %8s %9s %8s" % (
        "variant", "epoch", "cold MiB", "cold GETs", "hits", "misses", "attached", "cached",
        "cache MiB", "seconds"))
    for name, rows in variants:
        for r in rows:
            print("# %-22s %5d %10.2f %9d %6d %7d %9d %8d %9.2f %8.2f"
                  % (name, r["epoch"], r["cold_bytes"] / MB, r["cold_gets"], r["hits"],
                     r["misses"], r["attached"], r["objects"], r["bytes"] / MB,
                     r["seconds"]))
        later = rows[1:]
        if later:
            print("# %-22s %5s %10.2f   (epochs 2-%d)" % (name, "sum", sum(
                r["cold_bytes"] for r in later) / MB, rows[-1]["epoch"]))
    print("#", flush=True)


def headline(cold, want_sha):
    url = cold.endpoint
    start_b(url, "lru")
    lru = run_epochs("lru", False, EPOCHS, want_sha)
    C.stop_cache("[lru] caching gateway exits 0 on SIGTERM")

    start_b(url, "hint")
    hint = run_epochs("hint", "start", EPOCHS, want_sha)
    C.stop_cache("[hint] caching gateway exits 0 on SIGTERM")

    start_b(url, "ahead")
    ahead = run_epochs("ahead", "ahead", EPOCHS, want_sha)
    C.stop_cache("[ahead] caching gateway exits 0 on SIGTERM")

    table("cold-tier bytes per epoch, 4 shuffled epochs (test_prefetch_epochs.py)",
          [("(a) LRU, no hints", lru), ("(b) ordered hints", hint),
           ("(c) hints 1 epoch ahead", ahead)])

    limit = 1.10 * (DATASET - CACHE)
    for tag, rows in (("hint", hint), ("ahead", ahead)):
        for r in rows:
            if r["epoch"] == 1:
                check("[%s] epoch 1 reads the dataset once, plus what it staged for epoch 2 "
                      "(cold bytes %.2f MiB <= 20 MiB + %.2f MiB)"
                      % (tag, r["cold_bytes"] / MB, r["next_staged"] / MB),
                      r["cold_bytes"] <= DATASET + r["next_staged"], r)
                continue
            check("[%s] epoch %d: cold bytes %.2f MiB <= 1.10 x (dataset - cache) = %.2f MiB"
                  % (tag, r["epoch"], r["cold_bytes"] / MB, limit / MB),
                  r["cold_bytes"] <= limit, r)
    sa = sum(r["cold_bytes"] for r in lru[1:])
    sb = sum(r["cold_bytes"] for r in hint[1:])
    check("[hint] epochs 2-4: %.2f MiB <= 0.8 x LRU's %.2f MiB" % (sb / MB, sa / MB),
          sa > 0 and sb <= 0.8 * sa, "hint %.2f MiB, lru %.2f MiB" % (sb / MB, sa / MB))
    dup = [r for r in hint if r["cold_gets"] * SHARD != r["cold_bytes"]]
    check("[hint] every cold GET was a whole shard (bytes == GETs x shard size)", not dup,
          [(r["epoch"], r["cold_gets"], r["cold_bytes"]) for r in dup])


def two_ranks(cold, want_sha):
    """(e) Two data-parallel ranks reading in step, one ordered hint per rank
    (its share: shards r, r+2, ... of the epoch's order; consumer rank<r>),
    sent one epoch ahead. Reading the epoch's order front to back is the
    two ranks alternating read by read. Same cold-bytes bound as (b)."""
    start_b(cold.endpoint, "ranks")
    c = H.boto3_client()
    jobs = {}

    def send(e):
        o = order_of(e)
        for r in (0, 1):
            a = P.hint(BUCKET, {"keys": o[r::2], "ordered": True, "epoch": e,
                                "consumer": "rank%d" % r})
            if check("[ranks] epoch %d rank %d: hint accepted (202)" % (e, r),
                     a.status == 202 and (a.json or {}).get("job"), a):
                jobs[(e, r)] = a.json["job"]

    rows = []
    for e in range(1, EPOCHS + 1):
        if e == 1:
            send(1)
        if e < EPOCHS:
            send(e + 1)
        s0 = P.stats()
        t0 = time.time()
        bad = [k for k in order_of(e)
               if H.sha256(c.get_object(Bucket=BUCKET, Key=k)["Body"].read()) != want_sha[k]]
        dt = time.time() - t0
        check("[ranks] epoch %d: all %d bodies right" % (e, N), not bad, bad[:5])
        s1 = P.stats()
        d = P.delta(s0, s1)
        rows.append({"epoch": e, "cold_bytes": d["backend_bytes"], "cold_gets": d["backend_get"],
                     "hits": d["hits"], "misses": d["misses"],
                     "attached": N - d["hits"] - d["misses"], "objects": s1["objects"],
                     "bytes": s1["bytes"], "seconds": dt})
        for r in (0, 1):
            j = P.job(BUCKET, jobs.get((e, r), "-")).json or {}
            eq("[ranks] epoch %d rank %d: the job counted exactly its rank's %d reads"
               % (e, r, N // 2), (j.get("position"), j.get("consumer")), (N // 2, "rank%d" % r))
    C.stop_cache("[ranks] caching gateway exits 0 on SIGTERM")
    table("two ranks in step, one hint per rank, sent one epoch ahead", [("(e) two ranks", rows)])
    limit = 1.10 * (DATASET - CACHE)
    for r in rows[1:]:
        check("[ranks] epoch %d: cold bytes %.2f MiB <= 1.10 x (dataset - cache) = %.2f MiB"
              % (r["epoch"], r["cold_bytes"] / MB, limit / MB), r["cold_bytes"] <= limit, r)


def loader_read(clients, keys, want_sha):
    """(f) Reads keys through len(clients) loader workers: worker w reads
    keys w, w+W, ..., each once every read W or more before it has ended.
    Returns the keys whose bodies were wrong."""
    W = len(clients)
    cv = threading.Condition()
    done = [False] * len(keys)
    state = {"prefix": 0}
    bad = []

    def worker(w):
        for i in range(w, len(keys), W):
            with cv:
                while i >= state["prefix"] + W:
                    cv.wait()
            try:
                body = clients[w].get_object(Bucket=BUCKET, Key=keys[i])["Body"].read()
                ok = H.sha256(body) == want_sha[keys[i]]
            except Exception as ex:   # noqa: reported as a wrong body
                ok = False
                print("# loader read of %s failed: %r" % (keys[i], ex), flush=True)
            with cv:
                if not ok:
                    bad.append(keys[i])
                done[i] = True
                while state["prefix"] < len(keys) and done[state["prefix"]]:
                    state["prefix"] += 1
                cv.notify_all()

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(W)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return bad


def loader_workers(cold, want_sha):
    """(f) One rank reading through a loader of 4 workers, hints one epoch
    ahead: out-of-order reads count as one reader in order."""
    start_b(cold.endpoint, "workers")
    clients = [H.boto3_client() for _ in range(4)]
    jobs = {}

    def send(e):
        jid = send_hint("workers", e)
        if jid:
            jobs[e] = jid

    rows = []
    for e in range(1, EPOCHS + 1):
        if e == 1:
            send(1)
        if e < EPOCHS:
            send(e + 1)
        s0 = P.stats()
        t0 = time.time()
        bad = loader_read(clients, order_of(e), want_sha)
        dt = time.time() - t0
        check("[workers] epoch %d: all %d bodies right" % (e, N), not bad, bad[:5])
        s1 = P.stats()
        d = P.delta(s0, s1)
        rows.append({"epoch": e, "cold_bytes": d["backend_bytes"], "cold_gets": d["backend_get"],
                     "hits": d["hits"], "misses": d["misses"],
                     "attached": N - d["hits"] - d["misses"], "objects": s1["objects"],
                     "bytes": s1["bytes"], "seconds": dt})
        j = P.job(BUCKET, jobs.get(e, "-")).json or {}
        eq("[workers] epoch %d: the job counted all %d reads (position)" % (e, N),
           j.get("position"), N)
        why = P.counters_ok(j)
        check("[workers] epoch %d: job counters add up" % e, not why, why)
    C.stop_cache("[workers] caching gateway exits 0 on SIGTERM")
    table("a loader of 4 workers, hints sent one epoch ahead", [("(f) 4 workers", rows)])
    limit = 1.05 * (DATASET - CACHE)
    for r in rows[1:]:
        check("[workers] epoch %d: cold bytes %.2f MiB <= 1.05 x (dataset - cache) = %.2f MiB"
              % (r["epoch"], r["cold_bytes"] / MB, limit / MB), r["cold_bytes"] <= limit, r)


def reader_wait(cold, want_sha):
    from throttle import ThrottleProcess
    thr = ThrottleProcess("127.0.0.1", cold.port, down_rate=THROTTLE_RATE).start()
    try:
        url = "http://127.0.0.1:%d" % thr.port
        start_b(url, "wait-lru")
        lru = run_epochs("wait-lru", False, 2, want_sha, settle=True)
        C.stop_cache("[wait-lru] caching gateway exits 0 on SIGTERM")
        start_b(url, "wait-hint")
        hint = run_epochs("wait-hint", "start", 2, want_sha, settle=True)
        C.stop_cache("[wait-hint] caching gateway exits 0 on SIGTERM")
        start_b(url, "wait-ahead")
        ahead = run_epochs("wait-ahead", "ahead", 2, want_sha, settle=True)
        C.stop_cache("[wait-ahead] caching gateway exits 0 on SIGTERM")
    finally:
        thr.stop()
    table("reader wait: cold tier throttled to %d MB/s, the reader waits before each read "
          "until staging has settled; 'attached' = reads that joined a fill already running "
          "(neither hit nor miss)" % (THROTTLE_RATE / 1e6),
          [("(a) LRU, no hints", lru), ("(b) ordered hints", hint),
           ("(c) hints 1 epoch ahead", ahead)])
    print("# reader wait, hints 1 epoch ahead: reads that found their shard not yet staged: "
          "epoch 1 %d, epoch 2 %d" % (ahead[0]["ahead"], ahead[1]["ahead"]), flush=True)
    e2 = hint[1]
    frac = e2["hits"] / float(N)
    lfrac = lru[1]["hits"] / float(N)
    print("# reader wait, epoch 2 hit fraction: hints %.3f, LRU %.3f" % (frac, lfrac),
          flush=True)
    check("[wait-hint] epoch 2: hit fraction %.3f >= 0.9" % frac, frac >= 0.9, e2)
    check("[wait-hint] epoch 2: no read starts a miss (misses %d <= 1)" % e2["misses"],
          e2["misses"] <= 1, e2)
    # Settled before each read, the stager has staged each shard before its
    # read comes, even at the epoch's start (it may evict what no hint needs)
    check("[wait-hint] epoch 2: at most one read joins a staging fill (attached %d <= 1)"
          % e2["attached"], e2["attached"] <= 1, e2)
    print("# reader wait, hints: reads that found their shard not yet staged (job polled "
          "before each GET): epoch 1 %d, epoch 2 %d" % (hint[0]["ahead"], e2["ahead"]),
          flush=True)
    check("[wait-hint] epoch 2: the reader is never ahead of the stager (%r reads <= 1)"
          % e2["ahead"], e2["ahead"] is not None and e2["ahead"] <= 1, e2)
    check("[wait-hint] epoch 2 beats LRU on hits (%d vs %d)" % (e2["hits"], lru[1]["hits"]),
          e2["hits"] > lru[1]["hits"], (e2, lru[1]))
    # Declared one epoch ahead, epoch 2's start is staged during epoch 1
    # (in place of objects epoch 2 needs later): even its first reads hit.
    a2 = ahead[1]
    check("[wait-ahead] epoch 2: every read a hit but at most one (hits %d >= %d), no miss"
          % (a2["hits"], N - 1), a2["hits"] >= N - 1 and a2["misses"] == 0, a2)
    check("[wait-ahead] epoch 2: the reader is never ahead of the stager (%r reads <= 1)"
          % a2["ahead"], a2["ahead"] is not None and a2["ahead"] <= 1, a2)


def main():
    C.need_clients()
    C.init("test_prefetch_epochs")
    cold = C.ColdGateway().start()
    try:
        want_sha = {}
        for k in KEYS:
            want_sha[k] = cold.put_random(BUCKET, k, SHARD)
        headline(cold, want_sha)
        two_ranks(cold, want_sha)
        loader_workers(cold, want_sha)
        reader_wait(cold, want_sha)
    finally:
        C.stop_all()


H.run(main)
