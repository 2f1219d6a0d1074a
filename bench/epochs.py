#!/usr/bin/env python3
"""bench/epochs.py - epoch staging with ordered prefetch hints, measured as the
wait of a fixed-rate reader (the full version of tests/integration/
test_prefetch_epochs.py, whose modules it imports: harness, cache_common,
prefetch_common, throttle).

Setup (everything on 127.0.0.1):
  cold tier  = shardgate A serving --data DIR with --shards random shards of
               --shard-kib KiB in bucket "shards", behind throttle.py (a
               subprocess) limited to --cold-mbps MB/s (10^6 bytes/s) from A to B;
  cache      = shardgate B, --cold <throttle>, --cache-size --cache-mib MiB,
               --consistency immutable, config {"cache": {"high_watermark": 100,
               "low_watermark": 95}} (as the test), a fresh cache dir per variant;
  reader     = a trainer reading every shard once per epoch (--ranks R: R ranks in
               lockstep, rank r reading shards r, r+R, ... of the epoch's order),
               epoch e (1-based) in the order random.Random(seed + e).shuffle(keys),
               through a data loader of --workers W workers per rank (W threads,
               each with its own keep-alive boto3 client; worker w of a rank
               fetches the rank's shards w, w+W, ..., each only once the trainer
               has taken the shard W before it: at most W shards in flight or
               waiting per rank, as a PyTorch DataLoader keeps). The trainer takes
               step k's shards when every rank has its shard k, then consumes them
               for size / (--reader-mbps / R) seconds (a fixed-rate trainer that
               cannot catch up after a stall). Per step:
                   wait = time from wanting step k's shards to having them all
               so an epoch's wall time is about N*size/rate + its total wait.
               With W = 1 this is the earlier model: the fetch of shard k+1
               overlaps the consumption of shard k.
Variants, alternated run by run, same orders:
  (0) floor: the same trainer and loader reading the cold shardgate A directly,
      unthrottled (no cold link, no cache: the reader's own overhead);
  (a) LRU: no hints;
  (b) hint at start: at the start of each epoch (before its first GET) an
      ordered hint with that epoch's order: {"keys": order, "ordered": true,
      "epoch": e, "consumer": "rank0"};
  (c) hint ahead: epoch 1's and epoch 2's hints before epoch 1, then at the
      start of each epoch e the hint of epoch e+1 (none past the last epoch):
      the next epoch is declared a whole epoch ahead (cache/HINTS.md, chains);
  (d) with --lead S: (c), and epoch 1's hints sent S seconds before epoch 1
      starts (a hint at the dataset's set-up; the wait is not counted).
Per epoch: cold MiB / cold GETs (deltas of B's shardgate_backend_bytes_total and
shardgate_backend_requests_total{op="get"}), hits / misses (B's cache counters),
the reader's total wait, p50 / p99 / max per-shard wait, shards that waited
> 1 ms, the median fetch time, the epoch's wall time; for (b) and (c) the
epoch's job's staged count at the epoch's end.

Writes bench/results/epochs.md (--out) and prints the same Markdown. Needs boto3.
"""

import argparse
import contextlib
import gc
import os
import platform
import random
import signal
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import harness as H  # noqa: E402
import cache_common as C  # noqa: E402
import prefetch_common as P  # noqa: E402
from throttle import ThrottleProcess  # noqa: E402

MiB = 1024 * 1024
BUCKET = "shards"
NEAR_ZERO_FRAC = 0.05   # "near zero": an epoch's total wait <= 5 % of its ideal time
FLOOR, LRU, START, AHEAD, LEAD = ("floor (cold gateway direct, no link, no cache)",
                                  "LRU (no hints)", "hint at epoch start",
                                  "hint one epoch ahead", "hint one epoch ahead + lead")
EAGER = "hint one epoch ahead + stage_ahead"


def variants(a):
    """(name, mode) of the variants run, in the order of a run."""
    v = [(FLOOR, "floor"), (LRU, None), (START, "start"), (AHEAD, "ahead")]
    if a.lead > 0:
        v.append((LEAD, "lead"))
    if a.stage_ahead > 0:
        v.append((EAGER, "eager"))
    return v


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", type=int, default=160)
    ap.add_argument("--shard-kib", type=int, default=1024)
    ap.add_argument("--cache-mib", type=int, default=80)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--cold-mbps", type=float, default=40.0,
                    help="cold tier rate, MB/s (10^6 bytes/s)")
    ap.add_argument("--reader-mbps", type=float, default=60.0,
                    help="reader consumption rate, MB/s (10^6 bytes/s)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ranks", type=int, default=1,
                    help="readers in lockstep (data-parallel ranks): rank r reads shards "
                         "r, r+R, ... of each epoch's order; a step ends when every rank has "
                         "its shard, and each rank consumes --reader-mbps / R")
    ap.add_argument("--workers", type=int, default=1,
                    help="data loader workers per rank (threads with their own client), "
                         "reading every W-th shard of the rank's share")
    ap.add_argument("--lead", type=float, default=0.0,
                    help="also run a variant whose epoch 1 hints go out this many seconds "
                         "before epoch 1 starts")
    ap.add_argument("--stage-ahead", type=int, default=0,
                    help="also run a variant like hint one epoch ahead whose hints carry "
                         "\"stage_ahead\": N (stage within N objects of the readers without "
                         "waiting for Belady's moment; cache/HINTS.md)")
    ap.add_argument("--runs", type=int, default=3,
                    help="repetitions of (LRU, hint at start, hint ahead), alternated "
                    "(default 3)")
    ap.add_argument("--bin", default=os.environ.get("SHARDGATE_BIN") or
                    os.path.join(ROOT, "build-epochs", "shardgate"))
    ap.add_argument("--note", default="", help="a line added to the report's setup")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "epochs.md"),
                    help="Markdown report ('-' for none)")
    return ap.parse_args()


def pct(xs, p):
    """Nearest-rank percentile."""
    s = sorted(xs)
    if not s:
        return 0.0
    k = max(0, min(len(s) - 1, int(-(-p * len(s) // 100)) - 1))
    return s[k]


@contextlib.contextmanager
def quiet():
    """The harness prints PASS/FAIL lines for gateway starts and stops: send them
    to stderr so stdout is the report."""
    with contextlib.redirect_stdout(sys.stderr):
        yield


class Bench:
    def __init__(self, a):
        self.a = a
        self.keys = ["train/shard-%06d.tar" % i for i in range(a.shards)]
        self.size = a.shard_kib * 1024
        self.dataset = a.shards * self.size
        self.cache = a.cache_mib * MiB
        self.cold_rate = a.cold_mbps * 1e6
        self.rate = a.reader_mbps * 1e6
        self.want_sha = {}
        self.cold = None
        self.thr = None

    def order(self, e):
        o = list(self.keys)
        random.Random(self.a.seed + e).shuffle(o)
        return o

    def setup(self):
        with quiet():
            self.cold = C.ColdGateway().start()
        for k in self.keys:
            self.want_sha[k] = self.cold.put_random(BUCKET, k, self.size)
        self.thr = ThrottleProcess("127.0.0.1", self.cold.port,
                                   down_rate=self.cold_rate).start()

    def teardown(self):
        if self.thr:
            self.thr.stop()
            self.thr = None
        with quiet():
            C.stop_cache("[bench] caching gateway exits 0 on SIGTERM")
            C.stop_all()

    def start_b(self, tag):
        cfg = C.Cache("http://127.0.0.1:%d" % self.thr.port, C.COLD_ACCESS, C.COLD_SECRET,
                      size="%dMiB" % self.a.cache_mib,
                      config={"cache": {"high_watermark": 100, "low_watermark": 95}},
                      consistency="immutable", tag=tag)
        with quiet():
            C.start_cache(cfg)
        cap = P.stats()["capacity"]
        if cap != self.cache:
            raise RuntimeError("cache capacity %r != %d" % (cap, self.cache))

    def shares(self, e):
        """Each rank's part of epoch e's order."""
        o, R = self.order(e), self.a.ranks
        return [o[r::R] for r in range(R)]

    def send_hints(self, e, tag):
        """Every rank's ordered hint for epoch e; their job ids. In the
        eager variant each carries stage_ahead."""
        jids = []
        for r, keys in enumerate(self.shares(e)):
            hint = {"keys": keys, "ordered": True, "epoch": e, "consumer": "rank%d" % r}
            if self.eager:
                hint["stage_ahead"] = self.a.stage_ahead
            ans = P.hint(BUCKET, hint)
            if ans.status != 202 or not (ans.json or {}).get("job"):
                raise RuntimeError("[%s] epoch %d rank %d: hint refused: %r" % (tag, e, r, ans))
            jids.append(ans.json["job"])
        return jids

    def variant(self, name, hints, run):
        """hints: "floor", None (LRU), "start", "ahead", "lead" or "eager"."""
        tag = "%s-%d" % (hints or "lru", run)
        floor = hints == "floor"
        if not floor:
            self.start_b(tag)
        self.next_jids = None
        # the lead variant carries stage_ahead too when it is given: a hint at
        # set-up is for the loader that also wants its later epochs unwaited
        self.eager = hints == "eager" or (hints == "lead" and self.a.stage_ahead > 0)
        if hints == "eager":
            hints = "ahead"
        R, W = self.a.ranks, self.a.workers
        try:
            def client():
                return self.cold.client() if floor else H.boto3_client()
            c = [[client() for _ in range(W)] for _ in range(R)]
            for row in c:
                for x in row:
                    x.list_objects_v2(Bucket=BUCKET, MaxKeys=1)  # connect; not timed
            # botocore's models are hundreds of thousands of Python objects: a full
            # collection in the middle of an epoch stalled one read by ~90 ms (the
            # gateway's access log had answered in 0.08 ms). Freeze them out of the
            # collector and collect between epochs, so the waits are the storage's.
            gc.collect()
            gc.freeze()
            rows = []
            for e in range(1, self.a.epochs + 1):
                gc.collect()
                rows.append(self.epoch(c, e, hints, tag))
        finally:
            if not floor:
                with quiet():
                    C.stop_cache("[%s] caching gateway exits 0 on SIGTERM" % tag)
        for r in rows:
            r["variant"], r["run"] = name, run
        return rows

    def fetch(self, client, key):
        """GETs key whole; returns whether its bytes are right, and its size."""
        body = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        return H.sha256(body) == self.want_sha[key], len(body)

    def read_epoch(self, c, shares):
        """The trainer and its loaders read one epoch (see the module's doc);
        returns per-step waits and fetch times, and the keys whose bytes were
        wrong."""
        R, W = self.a.ranks, self.a.workers
        steps = len(shares[0])
        cv = threading.Condition()
        taken = [0] * R                        # shards each rank's trainer has taken
        got = [[None] * len(sh) for sh in shares]   # (arrival, ok, size, fetch s)
        stop = []

        def worker(r, w):
            for k in range(w, len(shares[r]), W):
                with cv:
                    while k >= taken[r] + W and not stop:
                        cv.wait()
                    if stop:
                        return
                t = time.monotonic()
                try:
                    ok, n = self.fetch(c[r][w], shares[r][k])
                except Exception as ex:   # noqa: a failed read is a wrong body
                    print("# read of %s failed: %r" % (shares[r][k], ex), file=sys.stderr)
                    ok, n = False, 0
                now = time.monotonic()
                with cv:
                    got[r][k] = (now, ok, n, now - t)
                    cv.notify_all()

        threads = [threading.Thread(target=worker, args=(r, w), daemon=True)
                   for r in range(R) for w in range(W)]
        for t in threads:
            t.start()
        waits, fetches, bad = [], [], []
        try:
            for k in range(steps):
                ranks = [r for r in range(R) if k < len(shares[r])]
                t_want = time.monotonic()
                with cv:
                    while any(got[r][k] is None for r in ranks):
                        cv.wait()
                    t_end = max(t_want, max(got[r][k][0] for r in ranks))
                    for r in ranks:
                        taken[r] = k + 1
                    cv.notify_all()
                waits.append(t_end - t_want)
                fetches.append(max(got[r][k][3] for r in ranks))
                bad += [shares[r][k] for r in ranks if not got[r][k][1]]
                budget = max(got[r][k][2] for r in ranks) / (self.rate / R)
                time.sleep(budget)
        finally:
            with cv:
                stop.append(True)
                cv.notify_all()
            for t in threads:
                t.join()
        return waits, fetches, bad

    def epoch(self, c, e, hints, tag):
        shares = self.shares(e)
        floor = hints == "floor"
        s0 = None if floor else P.stats()
        jids, hint_ms = None, None
        h0 = time.monotonic()
        if hints == "start" or (hints in ("ahead", "lead") and e == 1):
            jids = self.send_hints(e, tag)
        elif hints in ("ahead", "lead"):
            jids = self.next_jids
        if hints in ("ahead", "lead") and e < self.a.epochs:
            self.next_jids = self.send_hints(e + 1, tag)
        if hints and not floor:
            hint_ms = (time.monotonic() - h0) * 1000
        if hints == "lead" and e == 1:
            time.sleep(self.a.lead)   # the dataset's set-up: its wait is not counted
        t0 = time.monotonic()
        waits, fetches, bad = self.read_epoch(c, shares)
        wall = time.monotonic() - t0
        if bad:
            raise RuntimeError("[%s] epoch %d: %d wrong bodies, e.g. %s"
                               % (tag, e, len(bad), bad[:3]))
        d = P.delta(s0, P.stats()) if not floor else \
            {"backend_bytes": 0, "backend_get": 0, "hits": 0, "misses": 0}
        row = {"epoch": e, "cold_bytes": d["backend_bytes"], "cold_gets": int(d["backend_get"]),
               "hits": int(d["hits"]), "misses": int(d["misses"]),
               "wait": sum(waits), "p50": pct(waits, 50), "p99": pct(waits, 99),
               "max": max(waits), "n_wait": sum(1 for w in waits if w > 0.001),
               "fetch_p50": pct(fetches, 50), "wall": wall,
               "wait_head": sum(waits[:max(1, len(waits) // 10)]), "hint_ms": hint_ms,
               "staged": None, "cached": None}
        if jids:
            row["staged"] = row["cached"] = 0
            for r, jid in enumerate(jids):
                j = P.job(BUCKET, jid).json or {}
                o = j.get("objects") or {}
                row["staged"] += o.get("staged") or 0
                row["cached"] += o.get("cached") or 0
                if j.get("position") != len(shares[r]):
                    print("# note [%s] epoch %d rank %d: job position %r != %d" % (
                        tag, e, r, j.get("position"), len(shares[r])), file=sys.stderr)
        worst = max(range(len(waits)), key=lambda i: waits[i])
        print("# [%s] epoch %d: cold %.2f MiB, %d GETs, wait %.3f s, p99 %.1f ms, max %.1f ms "
              "(step %d, rank 0 read %s), wall %.2f s"
              % (tag, e, row["cold_bytes"] / MiB, row["cold_gets"], row["wait"],
                 row["p99"] * 1000, waits[worst] * 1000, worst, shares[0][worst], wall),
              file=sys.stderr, flush=True)
        return row


# ------------------------------------------------------------------ report

def run_table(rows):
    out = ["| variant | epoch | cold MiB | cold GETs | hits | misses | staged | wait s | "
           "p50 ms | p99 ms | max ms | wait in first 10 % of shards s | shards waiting > 1 ms "
           "| fetch p50 ms | wall s |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
           "| ---: | ---: | ---: |"]
    for r in rows:
        out.append("| %s | %d | %.2f | %d | %d | %d | %s | %.3f | %.2f | %.2f | %.1f | %.3f | "
                   "%d | %.2f | %.2f |" % (
                       r["variant"], r["epoch"], r["cold_bytes"] / MiB, r["cold_gets"],
                       r["hits"], r["misses"],
                       "-" if r["staged"] is None else str(r["staged"]),
                       r["wait"], r["p50"] * 1000, r["p99"] * 1000, r["max"] * 1000,
                       r["wait_head"], r["n_wait"], r["fetch_p50"] * 1000, r["wall"]))
    return out


def spread(vals, fmt):
    m = statistics.median(vals)
    if len(vals) == 1:
        return fmt % m
    return (fmt + " [" + fmt + "-" + fmt + "]") % (m, min(vals), max(vals))


def summary_table(allrows, variants, epochs):
    out = ["| variant | epoch | cold MiB | cold GETs | hits | misses | wait s | "
           "p50 wait ms | p99 wait ms | wall s |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for v in variants:
        for e in range(1, epochs + 1):
            rs = [r for r in allrows if r["variant"] == v and r["epoch"] == e]
            out.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                v, e, spread([r["cold_bytes"] / MiB for r in rs], "%.1f"),
                spread([r["cold_gets"] for r in rs], "%d"),
                spread([r["hits"] for r in rs], "%d"),
                spread([r["misses"] for r in rs], "%d"),
                spread([r["wait"] for r in rs], "%.3f"),
                spread([r["p50"] * 1000 for r in rs], "%.2f"),
                spread([r["p99"] * 1000 for r in rs], "%.1f"),
                spread([r["wall"] for r in rs], "%.2f")))
    return out


def reading(b, allrows):
    a = b.a
    ideal = a.shards * b.size / b.rate
    floor_mib = (b.dataset - b.cache) / MiB
    near_s = NEAR_ZERO_FRAC * ideal
    names = [n for n, _ in variants(a)]
    of = lambda v, e0=1, e1=None: [r for r in allrows if r["variant"] == v and  # noqa
                                   r["epoch"] >= e0 and (e1 is None or r["epoch"] <= e1)]
    if a.epochs < 2:
        return ["(one epoch only: nothing to compare after the first)"]
    lines = [
        "- Ideal epoch time at the reader's rate: %d x %d KiB / %.0f MB/s = %.3f s; the cold "
        "tier alone needs %.3f s for the whole dataset and %.3f s for dataset - cache "
        "(%.1f MiB). \"Near zero\" below means an epoch's total wait <= %d %% of the ideal "
        "time (%.0f ms)." % (a.shards, a.shard_kib, a.reader_mbps, ideal,
                             b.dataset / b.cold_rate, (b.dataset - b.cache) / b.cold_rate,
                             floor_mib, NEAR_ZERO_FRAC * 100, near_s * 1000),
        "- Epoch 1 (empty cache), total wait: %s." % "; ".join(
            "%s %s s" % (v, spread([r["wait"] for r in of(v, 1, 1)], "%.3f")) for v in names)]
    if a.lead > 0:
        pre = min(b.cache, a.lead * b.cold_rate)
        bound = max(ideal, (b.dataset - pre) / b.cold_rate)
        lines.append(
            "- Epoch 1 with a %.1f s lead: wall %s s (total wait %s s), where the cold tier "
            "allows no less than max(ideal, (dataset - what %.1f s at %.0f MB/s stages, at "
            "most the cache) / %.0f MB/s) = %.3f s and the readers' own pace (the floor's "
            "epoch 1) is %s s; without the lead (%s) %s s." % (
                a.lead, spread([r["wall"] for r in of(LEAD, 1, 1)], "%.3f"),
                spread([r["wait"] for r in of(LEAD, 1, 1)], "%.3f"), a.lead,
                a.cold_mbps, a.cold_mbps, bound,
                spread([r["wall"] for r in of(FLOOR, 1, 1)], "%.3f"),
                EAGER if a.stage_ahead > 0 else AHEAD,
                spread([r["wall"] for r in of(EAGER if a.stage_ahead > 0 else AHEAD, 1, 1)],
                       "%.3f")))
    for v in names[1:]:
        rs = of(v, 2)
        w = [r["wait"] for r in rs]
        cold = [r["cold_bytes"] / MiB for r in rs]
        over = [r for r in rs if r["wait"] > near_s]
        lines.append(
            "- %s, epochs 2-%d: total wait per epoch %.3f-%.3f s over %d epoch-runs (median "
            "%.3f s), %d of them over %.0f ms; %.0f %% of the wait in the first 10 %% of an "
            "epoch's steps; steps waiting > 1 ms: %d of %d; p99 per-step wait up to %.2f ms; "
            "cold MiB per epoch %.1f-%.1f (dataset - cache = %.1f MiB)." % (
                v, a.epochs, min(w), max(w), len(w), statistics.median(w), len(over),
                near_s * 1000, 100.0 * sum(r["wait_head"] for r in rs) / max(1e-9, sum(w)),
                sum(r["n_wait"] for r in rs), len(rs) * -(-a.shards // a.ranks),
                max(r["p99"] for r in rs) * 1000, min(cold), max(cold), floor_mib))
    fw = [r["wait"] for r in of(FLOOR, 2)]
    lines.append("- Floor (the same readers straight from the cold gateway, no link, no "
                 "cache), epochs 2-%d: total wait per epoch %.3f-%.3f s (median %.3f s): "
                 "what the reader's own fetches cost." % (a.epochs, min(fw), max(fw),
                                                          statistics.median(fw)))
    for v in [n for n in (AHEAD, LEAD, EAGER) if n in names]:
        rs = of(v, 2)
        worst_cold = max(r["cold_bytes"] for r in rs) / (b.dataset - b.cache)
        worst_wait = max(r["wait"] - statistics.median(
            [f["wait"] for f in of(FLOOR, r["epoch"], r["epoch"])]) for r in rs)
        lines.append(
            "- Goals, %s, epochs 2-%d: cold bytes per epoch at most %.3f x (dataset - cache) "
            "(goal <= 1.05: %s); wait per epoch at most %.3f s above the floor's median for "
            "that epoch (goal <= 0.1 s: %s)." % (
                v, a.epochs, worst_cold, "met" if worst_cold <= 1.05 else "NOT met",
                worst_wait, "met" if worst_wait <= 0.1 else "NOT met"))
    return lines


def git_head():
    """The checkout's commit, and whether C sources differ from it."""
    import subprocess
    try:
        sha = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "*.c", "*.h"],
                               capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + (" (with uncommitted C changes)" if dirty else "")


def report(b, allrows, cmd, started, took):
    a = b.a
    out = ["# Epoch staging: cold bytes and reader wait per epoch, LRU vs ordered hints", "",
           "Generated by `bench/epochs.py` (%s, %.0f s). Reproduce from the repository "
           "root:" % (started, took), "",
           "```sh",
           "cmake -S . -B build-epochs -DCMAKE_BUILD_TYPE=Release && "
           "cmake --build build-epochs --target shardgate -j2",
           cmd, "```", "", "## Setup", ""]
    out += [
        "- Dataset: %d shards x %d KiB = %.1f MiB of random bytes in bucket `%s`, served by "
        "a cold shardgate (`serve --data DIR`)." % (a.shards, a.shard_kib, b.dataset / MiB,
                                                     BUCKET),
        "- Cold link: `tests/integration/throttle.py` as a subprocess between the caching "
        "gateway and the cold shardgate, %.0f MB/s (10^6 B/s) cold -> cache, one token "
        "bucket for all connections." % a.cold_mbps,
        "- Caching shardgate: `--cache-size %dMiB --consistency immutable`, config "
        "`{\"cache\": {\"high_watermark\": 100, \"low_watermark\": 95}}`, a fresh cache "
        "directory per variant and run (Release build)." % a.cache_mib,
        "- Readers: %d rank(s) in lockstep (data-parallel training), %.0f MB/s in all, each "
        "rank reading through a data loader of %d worker(s) (a thread and a keep-alive boto3 "
        "client each): rank r reads shards r, r+%d, ... of the epoch's order, worker w of a "
        "rank fetches the rank's shards w, w+%d, ..., each once the trainer has taken the "
        "shard %d before it (at most %d in flight or waiting per rank, as a PyTorch "
        "DataLoader). A step: the trainer waits until every rank has its next shard, takes "
        "them, and consumes them for shard size / (rate / %d) (it cannot catch up after a "
        "stall). Per step, wait = time from wanting the step's shards to having them all; "
        "the tables' wait columns are per step. Every body's sha256 is checked." % (
            a.ranks, a.reader_mbps, a.workers, a.ranks, a.workers, a.workers, a.workers,
            a.ranks),
        "- Epoch e reads every shard once, in `random.Random(%d + e)` shuffled order (same "
        "orders for every variant); %d epochs; %d runs with the variants alternated."
        % (a.seed, a.epochs, a.runs),
        "- Hinted variants send ordered hints `{\"keys\": <that epoch's order>, \"ordered\": "
        "true, \"epoch\": e, \"consumer\": \"rank0\"}` - with several ranks, one per rank "
        "with its share and `\"consumer\": \"rank<r>\"` (default window: half the low "
        "watermark, shared among the consumers). *Hint at start*: epoch e's hint just before its first GET. *Hint ahead*: "
        "epoch 1's and 2's hints before epoch 1, then epoch e+1's hint as epoch e starts "
        "(none past the last epoch), so the gateway knows the next epoch a whole epoch "
        "early (a chain: cache/HINTS.md).%s *Floor*: the same readers against the cold "
        "shardgate directly, unthrottled: no cold link, no cache - the reader's own cost, "
        "the wait no cache can go below." % (
            (" *Lead*: as *hint ahead*, with epoch 1's and 2's hints sent %.1f s before "
             "epoch 1 starts (a hint at the dataset's set-up; that time is not counted as "
             "wait, its cold bytes are counted in epoch 1)%s." % (
                 a.lead, ", and with `stage_ahead` as below" if a.stage_ahead > 0 else ""))
            if a.lead > 0 else "")
            + ((" *Stage ahead*: as *hint ahead*, each hint with `\"stage_ahead\": %d`: "
                "within %d objects of the readers the gateway stages without waiting for "
                "Belady's moment, in place of objects only the next epoch needs." % (
                    a.stage_ahead, a.stage_ahead)) if a.stage_ahead > 0 else ""),
        "- The reader freezes boto3's objects out of Python's garbage collector and collects "
        "between epochs: a full collection once stalled a read by ~90 ms that the gateway's "
        "access log shows answered in 0.08 ms.",
        "- cold MiB / cold GETs: deltas of the caching gateway's "
        "`shardgate_backend_bytes_total` / `shardgate_backend_requests_total{op=\"get\"}`; "
        "hits / misses: `shardgate_cache_hits_total` / `shardgate_cache_misses_total` "
        "(a read that attaches to a running staging fill is neither); staged: the job's "
        "`objects.staged` at the epoch's end.",
        "- Machine: %s, %d cores (the 2-core VM), Python %s; everything on 127.0.0.1 "
        "(loopback)." % (
            platform.platform(), os.cpu_count() or 0, platform.python_version()),
        "- Binary: `%s` (Release), source at git %s.%s" % (a.bin, git_head(),
                                                             (" " + a.note) if a.note else ""),
        "", "## Summary (median [min-max] over %d runs)" % a.runs, ""]
    out += summary_table(allrows, [n for n, _ in variants(a)], a.epochs)
    out += ["", "## Reading", ""]
    out += reading(b, allrows)
    for run in range(1, a.runs + 1):
        out += ["", "## Run %d" % run, ""]
        out += run_table([r for r in allrows if r["run"] == run])
    out.append("")
    return "\n".join(out)


def main():
    a = parse_args()
    if not os.access(a.bin, os.X_OK):
        sys.exit("no shardgate binary at %s (build it, or pass --bin)" % a.bin)
    os.environ["SHARDGATE_BIN"] = os.path.abspath(a.bin)
    if a.shards * a.shard_kib * 1024 <= a.cache_mib * MiB:
        print("# warning: the dataset fits in the cache", file=sys.stderr)
    C.init("bench_epochs")

    def on_term(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, on_term)

    cmd = "python3 bench/epochs.py --shards %d --shard-kib %d --cache-mib %d --epochs %d " \
          "--cold-mbps %g --reader-mbps %g --seed %d --runs %d" % (
              a.shards, a.shard_kib, a.cache_mib, a.epochs, a.cold_mbps, a.reader_mbps,
              a.seed, a.runs)
    if a.ranks > 1:
        cmd += " --ranks %d" % a.ranks
    if a.workers > 1:
        cmd += " --workers %d" % a.workers
    if a.lead > 0:
        cmd += " --lead %g" % a.lead
    if a.stage_ahead > 0:
        cmd += " --stage-ahead %d" % a.stage_ahead
    if os.path.abspath(a.bin) != os.path.join(ROOT, "build-epochs", "shardgate"):
        cmd += " --bin %s" % a.bin
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    t0 = time.monotonic()
    b = Bench(a)
    allrows = []
    try:
        b.setup()
        for run in range(1, a.runs + 1):
            for name, hints in variants(a):
                allrows += b.variant(name, hints, run)
    finally:
        b.teardown()
        H.S.finished = True
        H._cleanup()
    text = report(b, allrows, cmd, started, time.monotonic() - t0)
    print(text, flush=True)
    if a.out != "-":
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            f.write(text)
        print("# wrote %s" % a.out, file=sys.stderr)


if __name__ == "__main__":
    main()
