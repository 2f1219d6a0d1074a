"""tests/integration/test_cache_singleflight.py - one fill per object, whatever
the number of readers, and readers do not wait for the fill to finish:
  1. 32 concurrent GETs (threads, raw SigV4 http.client) of one cold 64 MiB
     object, the cold tier behind a 200 MB/s link so that they overlap:
     exactly ONE GetObject reaches the cold tier (counted by the cold
     shardgate itself), one fill, all 32 bodies correct;
  2. with the cold tier throttled to 50 MB/s, a range GET of bytes 0-1023
     of a cold 256 MiB object answers while the fill is still running (the
     object is not published yet and the throttled transfer still runs);
  3. 8 late joiners, started 300 ms apart on that same object while it
     fills, get their first byte quickly, cause no further cold-tier GET,
     and all read the full correct 256 MiB.
"""

import atexit
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cache_common as C  # noqa: E402
import harness as H  # noqa: E402
import throttle  # noqa: E402

check, eq = H.check, H.eq
MB = H.MB


class Poller(threading.Thread):
    """Samples B's cache counters every 50 ms; notes when the object count grows."""

    def __init__(self, objects0, tp, size):
        threading.Thread.__init__(self, daemon=True)
        self.objects0 = objects0
        self.tp, self.size = tp, size
        self.down0 = tp.stats()["down"]
        self.transfer_done_at = None
        self.published_at = None
        self.stop_ev = threading.Event()
        self.max_waiters = 0

    def run(self):
        while not self.stop_ev.is_set():
            try:
                s = C.bstats()
            except Exception:   # noqa
                s = None
            if s:
                self.max_waiters = max(self.max_waiters, s["waiters"])
                if self.published_at is None and s["objects"] > self.objects0:
                    self.published_at = time.monotonic()
            if self.transfer_done_at is None:
                try:
                    if self.tp.stats()["down"] - self.down0 >= self.size:
                        self.transfer_done_at = time.monotonic()
                except Exception:   # noqa
                    pass
            time.sleep(0.05)

    def stop(self):
        self.stop_ev.set()
        self.join(5)


def concurrent_32(a, tp):
    b = "sflight"
    sha = a.put_random(b, "shard-64m.tar", 64 * MB)
    tp.set_rate(200e6)
    n = 32
    barrier = threading.Barrier(n)
    results = [None] * n

    def reader(i):
        barrier.wait(10)
        results[i] = C.bget("/%s/shard-64m.tar" % b, chunk=MB)

    s0, g0, h0 = C.bstats(), a.gets(), a.heads()
    ts = [threading.Thread(target=reader, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    s1, g1 = C.bstats(), a.gets()
    bad = [(i, r) for i, r in enumerate(results)
           if r is None or r.status != 200 or r.sha != sha or r.error]
    eq("32 concurrent GETs of a cold 64 MiB object: all 200 with the right bytes", bad, [])
    eq("32 concurrent GETs: exactly ONE GetObject on the cold tier (its own count)", g1 - g0, 1)
    if g1 - g0 != 1:
        lines = a.grep("GetObject", 1000)
        print("# cold tier GetObject requests (%d), first 3:\n%s" % (len(lines), "\n".join(lines[:3])),
              flush=True)
    eq("32 concurrent GETs: one fill", s1["fills"] - s0["fills"], 1)
    eq("32 concurrent GETs: one backend get counted by the gateway",
       s1["backend_get"] - s0["backend_get"], 1)
    eq("32 concurrent GETs: the cold tier sent the object once (bytes)",
       s1["backend_bytes"] - s0["backend_bytes"], 64 * MB)
    eq("32 concurrent GETs: one miss (only the first reader started a fill)",
       s1["misses"] - s0["misses"], 1)
    print("# 32 readers: %d misses, %d hits; the cold tier saw %d GetObject and %d HeadObject"
          % (s1["misses"] - s0["misses"], s1["hits"] - s0["hits"], g1 - g0, a.heads() - h0),
          flush=True)


def range_and_late_joiners(a, tp):
    b = "sflight"
    key = "shard-256m.tar"
    size = 256 * MB
    path = a.path(b, key)
    sha = a.put_random(b, key, size)
    with open(path, "rb") as f:
        head = f.read(1024)
    tp.set_rate(50e6)

    s0, g0 = C.bstats(), a.gets()
    poll = Poller(s0["objects"], tp, size)
    poll.start()
    t0 = time.monotonic()
    g = C.bget("/%s/%s" % (b, key), headers={"Range": "bytes=0-1023"}, keep=True)
    t1 = time.monotonic()
    s1 = C.bstats()
    st = tp.stats()
    check("range 0-1023 of a cold 256 MiB object: 206 and the bytes",
          g.status == 206 and g.body == head
          and g.headers.get("content-range") == "bytes 0-1023/%d" % size, repr(g))
    check("range 0-1023 answered within 5 s (the fill takes ~5.4 s at 50 MB/s)",
          t1 - t0 < 5.0, "%.2f s" % (t1 - t0))
    eq("range 0-1023: one fill started", s1["fills"] - s0["fills"], 1)
    check("range 0-1023 answered before the fill finished (object not yet published)",
          s1["objects"] == s0["objects"] and poll.published_at is None,
          "objects %r -> %r" % (s0["objects"], s1["objects"]))
    check("range 0-1023 answered while the throttled cold transfer still ran",
          st["active"] >= 1 and st["down"] < size, st)

    # late joiners on the same object while its fill runs
    n = 8
    results = [None] * n
    starts = [None] * n

    def joiner(i):
        starts[i] = time.monotonic()
        results[i] = C.bget("/%s/%s" % (b, key), chunk=MB, timeout=120)

    ts = []
    for i in range(n):
        t = threading.Thread(target=joiner, args=(i,))
        t.start()
        ts.append(t)
        time.sleep(0.3)
    for t in ts:
        t.join(180)
    C.wait_until(lambda: poll.published_at, 15)
    poll.stop()
    g1 = a.gets()
    s2 = C.bstats()
    bad = [(i, r) for i, r in enumerate(results)
           if r is None or r.status != 200 or r.sha != sha or r.error]
    eq("8 late joiners: all 200 with the full correct 256 MiB", bad, [])
    firsts = [round(r.t_first - starts[i], 3) if r and r.t_first else None
              for i, r in enumerate(results)]
    check("8 late joiners: first byte within 2 s each", all(f is not None and f < 2.0
                                                            for f in firsts), firsts)
    done = poll.transfer_done_at
    started_before = [i for i in range(n) if done is None or starts[i] < done]
    early = [i for i in started_before
             if results[i] and results[i].t_first and (done is None or results[i].t_first < done)]
    check("the 8 joiners all started while the cold transfer ran (test precondition)",
          len(started_before) == n, "transfer done at +%.2f s, starts %r"
          % ((done - t0) if done else -1, [round(x - t0, 2) for x in starts]))
    eq("late joiners got their first byte while the cold transfer still ran (streamed "
       "from the fill, not after it)", early, started_before)
    check("the fill was published after the transfer", poll.published_at is not None,
          "objects never grew")
    eq("range + 8 late joiners: exactly ONE GetObject on the cold tier", g1 - g0, 1)
    if g1 - g0 != 1:
        lines = a.grep("GetObject", 1000)
        print("# cold tier GetObject requests (%d), first 3:\n%s" % (len(lines), "\n".join(lines[:3])),
              flush=True)
    eq("range + 8 late joiners: one fill", s2["fills"] - s0["fills"], 1)
    eq("range + 8 late joiners: cold bytes = one object",
       s2["backend_bytes"] - s0["backend_bytes"], size)
    check("readers were seen waiting on the fill (shardgate_fill_waiters > 0)",
          poll.max_waiters > 0, "max %r" % poll.max_waiters)
    # and now it is a hit
    g2 = a.gets()
    r = C.bget("/%s/%s" % (b, key), headers={"Range": "bytes=%d-%d" % (size - 1024, size - 1)})
    check("after the fill a range is a hit without the cold tier",
          r.status == 206 and a.gets() == g2, "%r cold %r->%r" % (r, g2, a.gets()))


def main():
    C.need_clients()
    C.init("test_cache_singleflight")
    atexit.register(C.stop_all)
    a = C.ColdGateway().start()
    tp = throttle.ThrottleProcess("127.0.0.1", a.port).start()
    atexit.register(tp.stop)
    C.start_cache(C.Cache("http://127.0.0.1:%d" % tp.port, a.access, a.secret,
                          size="1GiB", consistency="immutable", tag="sf"))
    a.client().create_bucket(Bucket="sflight")
    concurrent_32(a, tp)
    range_and_late_joiners(a, tp)
    eq("no reader is left waiting (shardgate_fill_waiters 0)", C.bstats()["waiters"], 0)
    C.stop_cache()


H.run(main)
