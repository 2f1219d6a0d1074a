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
  reader     = one boto3 client (keep-alive) reading every shard once per epoch,
               epoch e (1-based) in the order random.Random(seed + e).shuffle(keys).
               It consumes at --reader-mbps MB/s: after fetching a shard it sleeps
               until size/rate has passed since it wanted that shard, so it never
               consumes faster than the rate, and it cannot catch up after a stall
               (a fixed-rate trainer). For each shard:
                   wait = max(0, (last byte arrived - wanted) - size / rate)
               so an epoch's wall time is about N*size/rate + its total wait.
Variants, alternated run by run, same orders:
  (a) LRU: no hints;
  (b) hinted: at the start of each epoch (before its first GET) an ordered hint
      with that epoch's order: {"keys": order, "ordered": true, "epoch": e,
      "consumer": "rank0"}.
Per epoch: cold MiB / cold GETs (deltas of B's shardgate_backend_bytes_total and
shardgate_backend_requests_total{op="get"}), hits / misses (B's cache counters),
the reader's total wait, p50 / p99 / max per-shard wait, shards that waited
> 1 ms, the median fetch time, the epoch's wall time; for (b) the job's
staged / cached counts at the epoch's end.

Writes bench/results/epochs.md (--out) and prints the same Markdown. Needs boto3.
"""

import argparse
import contextlib
import os
import platform
import random
import signal
import statistics
import sys
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


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", type=int, default=160)
    ap.add_argument("--shard-kib", type=int, default=256)
    ap.add_argument("--cache-mib", type=int, default=20)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--cold-mbps", type=float, default=40.0,
                    help="cold tier rate, MB/s (10^6 bytes/s)")
    ap.add_argument("--reader-mbps", type=float, default=60.0,
                    help="reader consumption rate, MB/s (10^6 bytes/s)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3,
                    help="repetitions of (LRU, hinted), alternated (default 3)")
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

    def variant(self, name, hints, run):
        tag = "%s-%d" % ("hint" if hints else "lru", run)
        self.start_b(tag)
        try:
            c = H.boto3_client()
            c.list_objects_v2(Bucket=BUCKET, MaxKeys=1)      # connect; not timed
            rows = [self.epoch(c, e, hints, tag) for e in range(1, self.a.epochs + 1)]
        finally:
            with quiet():
                C.stop_cache("[%s] caching gateway exits 0 on SIGTERM" % tag)
        for r in rows:
            r["variant"], r["run"] = name, run
        return rows

    def epoch(self, c, e, hints, tag):
        order = self.order(e)
        s0 = P.stats()
        t0 = time.monotonic()
        jid, hint_ms = None, None
        if hints:
            h0 = time.monotonic()
            ans = P.hint(BUCKET, {"keys": order, "ordered": True, "epoch": e,
                                  "consumer": "rank0"})
            hint_ms = (time.monotonic() - h0) * 1000
            if ans.status != 202 or not (ans.json or {}).get("job"):
                raise RuntimeError("[%s] epoch %d: hint refused: %r" % (tag, e, ans))
            jid = ans.json["job"]
        waits, fetches, bad = [], [], []
        for k in order:
            t_want = time.monotonic()
            body = c.get_object(Bucket=BUCKET, Key=k)["Body"].read()
            t_end = time.monotonic()
            budget = len(body) / self.rate
            fetches.append(t_end - t_want)
            waits.append(max(0.0, (t_end - t_want) - budget))
            if H.sha256(body) != self.want_sha[k]:
                bad.append(k)
            left = t_want + budget - time.monotonic()
            if left > 0:
                time.sleep(left)
        wall = time.monotonic() - t0
        s1 = P.stats()
        if bad:
            raise RuntimeError("[%s] epoch %d: %d wrong bodies, e.g. %s"
                               % (tag, e, len(bad), bad[:3]))
        d = P.delta(s0, s1)
        row = {"epoch": e, "cold_bytes": d["backend_bytes"], "cold_gets": int(d["backend_get"]),
               "hits": int(d["hits"]), "misses": int(d["misses"]),
               "wait": sum(waits), "p50": pct(waits, 50), "p99": pct(waits, 99),
               "max": max(waits), "n_wait": sum(1 for w in waits if w > 0.001),
               "fetch_p50": pct(fetches, 50), "wall": wall,
               "wait_head": sum(waits[:max(1, len(waits) // 10)]), "hint_ms": hint_ms,
               "staged": None, "cached": None}
        if jid:
            j = P.job(BUCKET, jid).json or {}
            o = j.get("objects") or {}
            row["staged"], row["cached"] = o.get("staged"), o.get("cached")
            if j.get("position") != len(order):
                print("# note [%s] epoch %d: job position %r != %d" % (
                    tag, e, j.get("position"), len(order)), file=sys.stderr)
        print("# [%s] epoch %d: cold %.2f MiB, %d GETs, wait %.3f s, p99 %.1f ms, wall %.2f s"
              % (tag, e, row["cold_bytes"] / MiB, row["cold_gets"], row["wait"],
                 row["p99"] * 1000, wall), file=sys.stderr, flush=True)
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


def reading(b, allrows, lru, hint):
    a = b.a
    ideal = a.shards * b.size / b.rate
    floor_mib = (b.dataset - b.cache) / MiB
    later = lambda v: [r for r in allrows if r["variant"] == v and r["epoch"] >= 2]  # noqa
    hl, ll = later(hint), later(lru)
    lines = []
    if not hl:
        return ["(one epoch only: nothing to compare after the first)"]
    h_wait = [r["wait"] for r in hl]
    l_wait = [r["wait"] for r in ll]
    h_cold = [r["cold_bytes"] / MiB for r in hl]
    l_cold = [r["cold_bytes"] / MiB for r in ll]
    first = [r for r in allrows if r["epoch"] == 1]
    near = max(h_wait) <= NEAR_ZERO_FRAC * ideal
    lines.append(
        "- Ideal epoch time at the reader's rate: %d x %d KiB / %.0f MB/s = %.3f s; the cold "
        "tier alone needs %.3f s for the whole dataset and %.3f s for dataset - cache "
        "(%.1f MiB). \"Near zero\" below means an epoch's total wait <= %d %% of the ideal "
        "time (%.0f ms)." % (a.shards, a.shard_kib, a.reader_mbps, ideal,
                             b.dataset / b.cold_rate, (b.dataset - b.cache) / b.cold_rate,
                             floor_mib, NEAR_ZERO_FRAC * 100, NEAR_ZERO_FRAC * ideal * 1000))
    lines.append(
        "- Epoch 1 (empty cache) waits in both variants: %s s (LRU) and %s s (hinted) - the "
        "whole dataset has to come through the %.0f MB/s cold tier, slower than the reader."
        % (spread([r["wait"] for r in first if r["variant"] == lru], "%.3f"),
           spread([r["wait"] for r in first if r["variant"] == hint], "%.3f"), a.cold_mbps))
    lines.append(
        "- Hinted, epochs 2-%d: total wait per epoch %.3f-%.3f s over %d epoch-runs (median "
        "%.3f s), p99 per-shard wait up to %.2f ms; cold MiB per epoch %.1f-%.1f against "
        "dataset - cache = %.1f MiB." % (
            a.epochs, min(h_wait), max(h_wait), len(h_wait), statistics.median(h_wait),
            max(r["p99"] for r in hl) * 1000, min(h_cold), max(h_cold), floor_mib))
    lines.append(
        "- LRU, epochs 2-%d: total wait per epoch %.3f-%.3f s (median %.3f s), cold MiB "
        "per epoch %.1f-%.1f: the reader waits every epoch." % (
            a.epochs, min(l_wait), max(l_wait), statistics.median(l_wait), min(l_cold),
            max(l_cold)))
    if near:
        lines.append(
            "- Verdict: with the ordered hint the reader's wait on the second and later "
            "epochs is near zero (at most %.0f ms per epoch, <= %d %% of %.0f ms), while "
            "LRU waits %.0f-%.0f ms every epoch; the cold tier reads about dataset - cache "
            "per epoch with hints." % (max(h_wait) * 1000, NEAR_ZERO_FRAC * 100,
                                       ideal * 1000, min(l_wait) * 1000,
                                       max(l_wait) * 1000))
    else:
        bad = [r for r in hl if r["wait"] > NEAR_ZERO_FRAC * ideal]
        lines.append(
            "- Verdict: NOT near zero. With the ordered hint, %d of %d later epoch-runs "
            "waited more than %.0f ms (worst %.3f s, run %d epoch %d; LRU median %.3f s). "
            "Only %.0f %% of the hinted later-epoch wait falls in the first 10 %% of an "
            "epoch's reads (where the full cache gives the stager no room yet); the rest is "
            "spread over the epoch: %d of %d reads waited > 1 ms, while the budget per "
            "shard is %.2f ms and the median fetch of these epochs is %.2f ms (min %.2f, max "
            "%.2f per epoch) - hits themselves come close to the budget on the 2-core VM "
            "that also runs both gateways and the Python throttle moving the staging "
            "traffic, and %d reads were neither hit nor miss (attached to a staging fill "
            "still running: the stager only just ahead)."
            % (len(bad), len(hl), NEAR_ZERO_FRAC * ideal * 1000,
               max(r["wait"] for r in bad), max(bad, key=lambda r: r["wait"])["run"],
               max(bad, key=lambda r: r["wait"])["epoch"], statistics.median(l_wait),
               100.0 * sum(r["wait_head"] for r in hl) / max(1e-9, sum(h_wait)),
               sum(r["n_wait"] for r in hl), len(hl) * a.shards, b.size / b.rate * 1000,
               statistics.median(r["fetch_p50"] for r in hl) * 1000,
               min(r["fetch_p50"] for r in hl) * 1000, max(r["fetch_p50"] for r in hl) * 1000,
               sum(a.shards - r["hits"] - r["misses"] for r in hl)))
    return lines


def report(b, allrows, cmd, started, took):
    a = b.a
    lru, hint = "LRU (no hints)", "ordered hint per epoch"
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
        "- Reader: one boto3 client, keep-alive, %.0f MB/s: after fetching a shard it sleeps "
        "until size/rate has passed since it wanted it (it never consumes faster and cannot "
        "catch up after a stall). Per shard, wait = max(0, time from wanting the shard to "
        "its last byte - size/rate). Every body's sha256 is checked." % a.reader_mbps,
        "- Epoch e reads every shard once, in `random.Random(%d + e)` shuffled order (same "
        "orders for both variants); %d epochs; %d runs with the variants alternated."
        % (a.seed, a.epochs, a.runs),
        "- Hinted variant: before the first GET of each epoch, one ordered hint "
        "`{\"keys\": <that epoch's order>, \"ordered\": true, \"epoch\": e, \"consumer\": "
        "\"rank0\"}` (default window: half the low watermark).",
        "- cold MiB / cold GETs: deltas of the caching gateway's "
        "`shardgate_backend_bytes_total` / `shardgate_backend_requests_total{op=\"get\"}`; "
        "hits / misses: `shardgate_cache_hits_total` / `shardgate_cache_misses_total` "
        "(a read that attaches to a running staging fill is neither); staged: the job's "
        "`objects.staged` at the epoch's end.",
        "- Machine: %s, %d cores (the 2-core VM), Python %s; everything on 127.0.0.1 "
        "(loopback); other engineers' work may share the machine." % (
            platform.platform(), os.cpu_count() or 0, platform.python_version()),
        "- Binary: `%s` (Release).%s" % (a.bin, (" " + a.note) if a.note else ""),
        "", "## Summary (median [min-max] over %d runs)" % a.runs, ""]
    out += summary_table(allrows, [lru, hint], a.epochs)
    out += ["", "## Reading", ""]
    out += reading(b, allrows, lru, hint)
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
    if os.path.abspath(a.bin) != os.path.join(ROOT, "build-epochs", "shardgate"):
        cmd += " --bin %s" % a.bin
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    t0 = time.monotonic()
    b = Bench(a)
    allrows = []
    try:
        b.setup()
        for run in range(1, a.runs + 1):
            allrows += b.variant("LRU (no hints)", False, run)
            allrows += b.variant("ordered hint per epoch", True, run)
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
