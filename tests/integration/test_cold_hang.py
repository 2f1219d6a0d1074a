"""tests/integration/test_cold_hang.py - a cold tier that accepts connections
and never answers (issue 10, finding 12): a hit never waits long for it, a
miss and a listing fail with 503 within their deadline, a slow transfer that
flows is not cut.
  1. SIGSTOP of the cold shardgate A behind gateway B (default deadlines,
     consistency "always": every hit is due for revalidation): hits are
     served from the cache with the right bytes, each within 10 s (the check
     gives up after cache.revalidate_timeout_ms, 1 s), counted as
     revalidation timeouts or skipped checks; a hit is served while a miss
     waits; the miss and a listing are 503 ServiceUnavailable naming the
     cold tier within 12 s (first-byte deadline 5 s); after SIGCONT a miss
     is served again.
  2. fake_tier in "trickle" mode (accepts and reads, never answers; a key
     ending in "slow" has its 32-byte body trickled over ~3 s), gateway B
     with cold_first_byte_timeout_ms 1000 and revalidate_timeout_ms 300:
     GET / HEAD of a miss, ListObjectsV2 and ListBuckets are 503 within
     10 s; the slow object arrives whole; cached, and the tier then mute,
     its hits are served.
69019cc waited 30 s for each of those (60 s for a listing).
"""

import atexit
import http.client
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cache_common as C  # noqa: E402
import fake_tier  # noqa: E402
import harness as H  # noqa: E402

check, eq = H.check, H.eq
MB = H.MB
BKT = "hang"


def timed(method, path, timeout=25):
    """A signed request to B that never raises: (Resp or None, seconds, error)."""
    t0 = time.monotonic()
    try:
        r = C.request(H.S.port, method, path, timeout=timeout)
        return r, time.monotonic() - t0, None
    except (OSError, http.client.HTTPException) as e:
        return None, time.monotonic() - t0, "%s: %s" % (type(e).__name__, e)


def is_outage(r, url, within):
    """503 ServiceUnavailable whose message names the cold tier and the deadline."""
    if r is None or r.status != 503:
        return False
    if not r.body:          # HEAD: no body to read
        return True
    e = r.error() or {}
    return (e.get("Code") == "ServiceUnavailable" and ("The cold tier %s" % url) in
            e.get("Message", "") and ("did not answer within %s" % within) in e.get("Message", ""))


def reval_counts():
    m = C.bm()
    return (C.metric_sum(m, "shardgate_revalidation_timeouts_total") or 0.0,
            C.metric_sum(m, "shardgate_revalidations_skipped_total") or 0.0)


def all_stopped(pid):
    """Every thread of pid is in state T (stopped)."""
    states = []
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        except OSError:
            pass
    return bool(states) and all(st == "T" for st in states)


def sigstop_of_a():
    a = C.ColdGateway().start()
    a.client().create_bucket(Bucket=BKT)
    shas = {k: a.put_random(BKT, k, 256 * 1024 + i) for i, k in enumerate(["h0", "h1", "h2"])}
    a.put_random(BKT, "cold", 1000)
    cfg = C.Cache(a.endpoint, a.access, a.secret, consistency="always", tag="sigstop")
    C.start_cache(cfg)
    o0 = C.bstats()["objects"]
    for k, sha in shas.items():
        eq("[stop] fill %s" % k, C.bget("/%s/%s" % (BKT, k)).sha, sha)
    check("[stop] the three objects are published",
          C.wait_until(lambda: C.bstats()["objects"] >= o0 + 3, 10), C.bstats())

    pid = a.proc.pid
    os.kill(pid, signal.SIGSTOP)
    # The stop takes effect once a thread of A runs to take the signal: on a
    # loaded machine another of its threads may answer meanwhile. Go on once
    # every thread is stopped.
    check("[stop] every thread of A stopped", C.wait_until(lambda: all_stopped(pid), 10),
          "A's threads still running")
    resumed = []

    def cont():
        if not resumed:
            resumed.append(True)
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
    atexit.register(cont)          # runs before stop_all (registered earlier)

    t00, (to0, sk0) = time.monotonic(), reval_counts()
    slow, wrong = [], []
    for i in range(5):
        k = "h%d" % (i % 3)
        g = C.bget("/%s/%s" % (BKT, k), timeout=20)
        dt = g.t_end - g.t_head if g.t_head else None
        if (g.status, g.sha, g.error) != (200, shas[k], None):
            wrong.append((k, g))
        if g.t_head is None or g.t_end - t00 > 0 and dt is None:
            slow.append((k, g))
    total = time.monotonic() - t00
    eq("[stop] 5 hits during the hang: 200 with the cached bytes", wrong, [])
    check("[stop] ... answered within 10 s each (50 s in all at most)", not slow and
          total < 50, "%.1f s in all, %r" % (total, slow))
    to1, sk1 = reval_counts()
    check("[stop] at least one revalidation timed out (counted)", to1 - to0 >= 1,
          (to1 - to0, sk1 - sk0))
    check("[stop] every one of the 5 hits was a timed-out or skipped check",
          (to1 - to0) + (sk1 - sk0) == 5, (to1 - to0, sk1 - sk0, H.log_grep("revalidation")))
    check("[stop] the timeout is logged", H.log_grep("timed out after 1000 ms"), H.log_tail(10))

    # a miss waits for the cold tier while hits go on
    miss = []
    t_miss = threading.Thread(target=lambda: miss.append(timed("GET", "/%s/cold" % BKT)))
    t_miss.start()
    time.sleep(0.5)
    t0 = time.monotonic()
    g = C.bget("/%s/h0" % BKT, timeout=20)
    dt = time.monotonic() - t0
    eq("[stop] a hit while a miss waits: the cached bytes", (g.status, g.sha), (200, shas["h0"]))
    check("[stop] ... within 10 s", dt < 10, "%.1f s" % dt)
    t_miss.join(40)
    r, dt, err = miss[0] if miss else (None, None, "no result")
    check("[stop] the miss: 503 ServiceUnavailable naming the cold tier, 'within 5 s'",
          is_outage(r, a.endpoint, "5 s"), (r, err))
    check("[stop] ... within 12 s", dt is not None and dt < 12, dt)
    r, dt, err = timed("GET", "/%s?list-type=2" % BKT)
    check("[stop] ListObjectsV2: 503 naming the cold tier", is_outage(r, a.endpoint, "5 s"),
          (r, err))
    check("[stop] ... within 12 s", dt < 12, "%.1f s" % dt)
    m = C.bm()
    check("[stop] cold-tier timeouts counted (shardgate_backend_timeouts_total >= 2)",
          (C.metric_sum(m, "shardgate_backend_timeouts_total") or 0) >= 2,
          C.metric_sum(m, "shardgate_backend_timeouts_total"))

    cont()
    g = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        g = C.bget("/%s/cold" % BKT, timeout=20)
        if g.status == 200:
            break
        time.sleep(0.5)
    eq("[stop] after SIGCONT the miss is served", (g.status, g.n, g.error), (200, 1000, None))
    C.stop_cache()
    a.stop()


def hung_fake():
    tier = fake_tier.FakeTier("trickle", trickle_s=0.1)
    atexit.register(tier.stop)
    cfg = C.Cache(tier.url, "k", "s", consistency="always", tag="mute",
                  config={"cold_first_byte_timeout_ms": 1000,
                          "cache": {"revalidate_timeout_ms": 300}})
    if H.S.log_file:
        H.S.log_file.close()
        H.S.log_file = None
    C.start_cache(cfg)
    for what, method, path in [("GET of a miss", "GET", "/bkt/k1"),
                               ("HEAD of a miss", "HEAD", "/bkt/k2"),
                               ("ListObjectsV2", "GET", "/bkt?list-type=2&prefix=p"),
                               ("ListBuckets", "GET", "/")]:
        r, dt, err = timed(method, path)
        check("[mute] %s: 503 naming the cold tier, 'within 1 s'" % what,
              is_outage(r, tier.url, "1 s"), (r, err))
        check("[mute] %s: within 10 s" % what, dt < 10, "%.1f s" % dt)
    t0 = time.monotonic()
    g = C.bget("/bkt/slow", keep=True, timeout=30)
    dt = time.monotonic() - t0
    eq("[mute] a body trickling for ~3 s past the 1 s deadline arrives whole",
       (g.status, g.body, g.error), (200, fake_tier.SLOW_BODY, None))
    check("[mute] ... it did trickle (>= 2 s)", dt >= 2.0, "%.1f s" % dt)
    check("[mute] the slow object is published",
          C.wait_until(lambda: C.bstats()["objects"] >= 1, 10), C.bstats())
    tier.set_mode("mute")
    to0, sk0 = reval_counts()
    t0 = time.monotonic()
    g = C.bget("/bkt/slow", keep=True, timeout=20)
    dt = time.monotonic() - t0
    eq("[mute] tier mute: the cached object is served", (g.status, g.body),
       (200, fake_tier.SLOW_BODY))
    check("[mute] ... within 10 s (revalidation deadline 300 ms)", dt < 10, "%.1f s" % dt)
    to1, sk1 = reval_counts()
    eq("[mute] ... its revalidation timed out (counted once)", (to1 - to0, sk1 - sk0), (1, 0))
    check("[mute] cold-tier timeouts counted (>= 4)",
          (C.bm("shardgate_backend_timeouts_total")) >= 4, C.bm("shardgate_backend_timeouts_total"))
    C.stop_cache()
    tier.stop()


def main():
    C.need_clients()
    C.init("test_cold_hang")
    atexit.register(C.stop_all)
    sigstop_of_a()
    hung_fake()


H.run(main)
