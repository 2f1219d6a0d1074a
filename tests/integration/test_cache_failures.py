"""tests/integration/test_cache_failures.py - the cache when things go wrong
(cold tier: shardgate A behind throttle.py, the caching gateway B in front):
  1. a client reads 1 MiB of a cold 64 MiB object and goes away: the fill
     still finishes, and the next GET is a hit with the full correct bytes
     and no further cold-tier GET;
  2. the cold tier goes away mid-fill (the proxy drops every connection and
     refuses new ones; then again by SIGKILL of the cold shardgate): the
     client's body is short or an error - never a complete-looking body -,
     the fill counts as failed, nothing partial is cached, and once the cold
     tier is back the next GET is a miss that returns the right bytes;
  3. kill -9 of B during 20 concurrent throttled fills, restart on the same
     cache directory: every object is byte-identical to the cold tier's, the
     objects completed before the kill are hits without a cold-tier GET;
  4. cold tier stopped: cached objects still 200, uncached ones 503
     (ServiceUnavailable or SlowDown) within 2 s.
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
BKT = "failures"


def fill_published(objects0, timeout=30):
    return C.wait_until(lambda: C.bstats()["objects"] > objects0, timeout)


def client_goes_away(a, tp):
    sha = a.put_random(BKT, "gone.tar", 64 * MB)
    tp.set_rate(50e6)
    s0 = C.bstats()
    g = C.bget("/%s/gone.tar" % BKT, limit=MB)
    eq("client reads 1 MiB and closes: it got 200 and 1 MiB", (g.status, g.n), (200, MB))
    ok = fill_published(s0["objects"], 20)
    check("after the client left, the fill still finished and was published", ok,
          C.bstats())
    tp.set_rate(None)
    s1, g1 = C.bstats(), a.gets()
    r = C.bget("/%s/gone.tar" % BKT)
    s2, g2 = C.bstats(), a.gets()
    eq("then GET returns the full correct bytes", (r.status, r.sha, r.error), (200, sha, None))
    eq("then GET is a hit", s2["hits"] - s1["hits"], 1)
    eq("then GET: no cold-tier GET", g2, g1)
    eq("client going away: the fill did not fail", s2["fills_failed"] - s0["fills_failed"], 0)


def read_until_cut(key, cut, after_bytes, readers=2):
    """GETs key with `readers` clients (the second joins the same fill); once
    after_bytes went through the proxy, calls cut() while they read on;
    returns their Got results."""
    out = [None] * readers

    def reader(i):
        out[i] = C.bget("/%s/%s" % (BKT, key), chunk=64 * 1024, timeout=40)

    ts = []
    for i in range(readers):
        t = threading.Thread(target=reader, args=(i,))
        t.start()
        ts.append(t)
        time.sleep(0.2)
    # watch B's progress through the throttle's byte count
    C.wait_until(lambda: tp_bytes[0]() >= after_bytes, 30, 0.02)
    cut()
    for t in ts:
        t.join(60)
    return out


tp_bytes = [None]


def cold_dies(a, tp, how):
    key = "dies-%s.tar" % how
    size = 64 * MB
    sha = a.put_random(BKT, key, size)
    tp.set_rate(20e6)                      # ~3.4 s for the whole object
    # the step before ends with a fill that may still publish: count from here
    check("[%s] no fill runs before this step" % how, C.settled(), C.bstats())
    s0 = C.bstats()
    down0 = tp.stats()["down"]
    tp_bytes[0] = lambda: tp.stats()["down"] - down0

    if how == "cut":
        def cut():
            tp.refuse()
    else:
        def cut():
            a.kill()                       # SIGKILL of the cold shardgate

    t0 = time.monotonic()
    gs = read_until_cut(key, cut, 8 * MB)
    dt = time.monotonic() - t0
    check("[%s] both clients got a response" % how, None not in gs, gs)
    for n, g in enumerate(gs):
        if g is None:
            continue
        who = "[%s] client %d:" % (how, n + 1)
        complete_looking = g.error is None and g.status == 200 and g.clen() == g.n
        check("%s cold tier gone mid-fill: never a complete-looking wrong body" % who,
              not complete_looking or g.sha == sha, repr(g))
        check("%s the body is short (fewer bytes than Content-Length) or an error" % who,
              g.error is not None or g.status != 200, repr(g))
        check("%s the response declared its length, so a short body shows" % who,
              g.status != 200 or g.clen() == size or
              g.headers.get("transfer-encoding") == "chunked", g.headers)
    check("[%s] the clients were not left hanging (all answered within 40 s)" % how, dt < 40,
          "%.1f s" % dt)
    failed = C.wait_until(lambda: C.bstats()["fills_failed"] > s0["fills_failed"], 35)
    s1 = C.bstats()
    check("[%s] the fill counts as failed" % how, failed, s1)
    eq("[%s] nothing partial is cached (objects unchanged)" % how,
       s1["objects"], s0["objects"])
    print("# [%s] B's log on the failure: %r" % (how, H.log_grep("dies-%s" % how, 6)),
          flush=True)

    # the cold tier comes back
    if how == "cut":
        tp.restore()
    else:
        a.start("cold shardgate A restarted")
    tp.set_rate(None)
    g0 = a.gets()
    r = C.bget("/%s/%s" % (BKT, key))
    s2 = C.bstats()
    eq("[%s] cold tier back: GET returns the right bytes" % how, (r.status, r.sha, r.error),
       (200, sha, None))
    eq("[%s] cold tier back: that GET is a miss (not served from a partial entry)" % how,
       (s2["misses"] - s1["misses"], s2["hits"] - s1["hits"]), (1, 0))
    check("[%s] cold tier back: the cold tier was asked" % how, a.gets() > g0)


def kill9_during_fills(a, tp, cfg):
    n_done, n_fill = 5, 20
    shas = {}
    for i in range(n_done):
        shas["done-%d" % i] = a.put_random(BKT, "k9/done-%d" % i, 2 * MB)
    for i in range(n_fill):
        shas["fill-%d" % i] = a.put_random(BKT, "k9/fill-%d" % i, 4 * MB)
    tp.set_rate(None)
    s0 = C.bstats()
    for i in range(n_done):
        r = C.bget("/%s/k9/done-%d" % (BKT, i))
        eq("kill -9: pre-read done-%d" % i, r.sha, shas["done-%d" % i])
    check("kill -9: the 5 completed objects are published",
          C.wait_until(lambda: C.bstats()["objects"] >= s0["objects"] + n_done, 10),
          C.bstats())
    time.sleep(0.3)
    tp.set_rate(16e6)                     # 80 MiB of fills take ~5 s
    results = {}

    def reader(i):
        results[i] = C.bget("/%s/k9/fill-%d" % (BKT, i), timeout=30)

    ts = [threading.Thread(target=reader, args=(i,)) for i in range(n_fill)]
    for t in ts:
        t.start()
    # kill once a few fills have completed (their clients are done) and the
    # rest are still running
    C.wait_until(lambda: sum(1 for r in list(results.values())
                             if r.status == 200 and r.error is None) >= 3, 20)
    time.sleep(0.3)
    before = C.bstats()
    t_kill = time.monotonic()
    C.kill9_cache()
    for t in ts:
        t.join(60)
    done_before = sorted(i for i, r in results.items()
                         if r.status == 200 and r.error is None and r.t_end < t_kill - 0.25)
    bad = [(i, r) for i, r in results.items()
           if r.status == 200 and r.error is None and r.sha != shas["fill-%d" % i]]
    eq("kill -9: no client got a complete-looking wrong body", bad, [])
    print("# kill -9 with %d fills started, %d objects published; fills %r completed >250 ms "
          "before the kill" % (before["fills"] - s0["fills"] - n_done,
                              before["objects"] - s0["objects"], done_before), flush=True)
    check("kill -9: some fills had completed and some were still running at the kill "
          "(test precondition)", 0 < len(done_before) < n_fill, done_before)
    tp.set_rate(None)
    C.start_cache(cfg)
    s1 = C.bstats()
    check("kill -9: the restarted gateway knows at least the completed objects",
          s1["objects"] >= n_done + len(done_before), s1)
    check("kill -9: cache_bytes after restart within capacity and consistent",
          s1["bytes"] <= s1["capacity"] and (s1["objects"] == 0) == (s1["bytes"] == 0), s1)
    g0 = a.gets()
    for i in range(n_done):
        r = C.bget("/%s/k9/done-%d" % (BKT, i))
        eq("kill -9: completed done-%d byte-identical after restart" % i, r.sha,
           shas["done-%d" % i])
    s2 = C.bstats()
    eq("kill -9: the completed objects are hits after restart", s2["hits"] - s1["hits"],
       n_done)
    eq("kill -9: the completed objects need no cold-tier GET after restart", a.gets(), g0)
    wrong, not_hit = [], []
    misses = 0
    for i in range(n_fill):
        h0, c0, m0 = C.bstats()["hits"], a.gets(), C.bstats()["misses"]
        r = C.bget("/%s/k9/fill-%d" % (BKT, i))
        s = C.bstats()
        misses += s["misses"] - m0
        if (r.status, r.sha, r.error) != (200, shas["fill-%d" % i], None):
            wrong.append((i, r))
        if i in done_before and (s["hits"] - h0, a.gets() - c0) != (1, 0):
            not_hit.append((i, s["hits"] - h0, a.gets() - c0))
    eq("kill -9: every object that was filling is byte-identical after restart", wrong, [])
    eq("kill -9: fills completed before the kill are hits after restart, no cold GET",
       not_hit, [])
    # the second time around they are all hits (once published: a reader may
    # get its last byte just before its fill is published)
    check("kill -9: the re-read fills are published",
          C.wait_until(lambda: C.bstats()["objects"] >= s1["objects"] + misses, 10),
          "objects %r, want %r" % (C.bstats()["objects"], s1["objects"] + misses))
    s3, g3 = C.bstats(), a.gets()
    wrong = []
    for i in range(n_fill):
        r = C.bget("/%s/k9/fill-%d" % (BKT, i))
        if r.sha != shas["fill-%d" % i]:
            wrong.append(i)
    s4 = C.bstats()
    eq("kill -9: re-read after restart: right bytes, all hits, no cold GET",
       (wrong, s4["hits"] - s3["hits"], a.gets() - g3), ([], n_fill, 0))


def write_during_fill(a, tp):
    """A PUT or DELETE through B while a fill of the old version runs: the old
    fill must never be published over the write."""
    s3 = H.boto3_client()
    for op in ("put", "delete"):
        key = "race-%s.tar" % op
        sha_old = a.put_random(BKT, key, 32 * MB)
        tp.set_rate(10e6)                  # the old fill takes ~3.4 s
        res = []
        t = threading.Thread(target=lambda: res.append(C.bget("/%s/%s" % (BKT, key))))
        t.start()
        C.wait_until(lambda: C.bstats()["waiters"] > 0 or tp.stats()["active"] > 0, 10)
        time.sleep(0.5)
        new = os.urandom(MB + 11)
        if op == "put":
            s3.put_object(Bucket=BKT, Key=key, Body=new)
        else:
            s3.delete_object(Bucket=BKT, Key=key)
        r = C.bget("/%s/%s" % (BKT, key), keep=True)
        if op == "put":
            eq("[%s during a fill] GET right after: the new bytes" % op,
               (r.status, r.sha), (200, H.sha256(new)))
        else:
            eq("[%s during a fill] GET right after: 404" % op, r.status, 404)
        t.join(60)
        check("[%s during a fill] the reader of the old version got old bytes or an error, "
              "never a mix" % op, res and (res[0].sha == sha_old or res[0].error), res)
        tp.set_rate(None)
        time.sleep(0.5)                    # the old fill has ended (published or not)
        r = C.bget("/%s/%s" % (BKT, key), keep=True)
        if op == "put":
            eq("[%s during a fill] after the old fill ended: still the new bytes" % op,
               (r.status, r.sha), (200, H.sha256(new)))
            r = C.bget("/%s/%s" % (BKT, key), keep=True)
            eq("[%s during a fill] and again: the new bytes" % op, (r.status, r.sha),
               (200, H.sha256(new)))
        else:
            eq("[%s during a fill] after the old fill ended: still 404" % op, r.status, 404)


def cold_down(a, tp):
    cached = a.put_random(BKT, "down/cached", 1 * MB)
    a.put_random(BKT, "down/uncached", 1 * MB)
    tp.set_rate(None)
    o0 = C.bstats()["objects"]
    r = C.bget("/%s/down/cached" % BKT)
    eq("cold down: pre-read the cached object", r.sha, cached)
    check("cold down: the cached object is published", fill_published(o0, 5))
    a.stop()
    t0 = time.monotonic()
    r = C.bget("/%s/down/cached" % BKT)
    dt = time.monotonic() - t0
    eq("cold tier stopped: cached object still 200 with its bytes", (r.status, r.sha),
       (200, cached))
    check("cold tier stopped: the cached object answered within 2 s", dt < 2.0,
          "%.2f s" % dt)
    r = C.request(H.S.port, "HEAD", "/%s/down/cached" % BKT)
    eq("cold tier stopped: HEAD of the cached object 200", r.status, 200)
    t0 = time.monotonic()
    r = C.bget("/%s/down/uncached" % BKT, keep=True)
    dt = time.monotonic() - t0
    code = (H.parse_error(r.body or b"") or {}).get("Code")
    check("cold tier stopped: uncached object 503 ServiceUnavailable/SlowDown",
          r.status == 503 and code in ("ServiceUnavailable", "SlowDown"),
          "%r code %r" % (r, code))
    check("cold tier stopped: ... within 2 s", dt < 2.0, "%.2f s" % dt)
    t0 = time.monotonic()
    r = C.request(H.S.port, "HEAD", "/%s/down/uncached" % BKT)
    eq("cold tier stopped: HEAD of an uncached object 503 within 2 s",
       (r.status, time.monotonic() - t0 < 2.0), (503, True))


def main():
    C.need_clients()
    C.init("test_cache_failures")
    atexit.register(C.stop_all)
    a = C.ColdGateway().start()
    tp = throttle.ThrottleProcess("127.0.0.1", a.port).start()
    atexit.register(tp.stop)
    cfg = C.Cache("http://127.0.0.1:%d" % tp.port, a.access, a.secret, size="1GiB",
                  consistency="immutable", tag="fail")
    C.start_cache(cfg)
    a.client().create_bucket(Bucket=BKT)

    client_goes_away(a, tp)
    cold_dies(a, tp, "cut")
    cold_dies(a, tp, "kill")
    kill9_during_fills(a, tp, cfg)
    write_during_fill(a, tp)
    cold_down(a, tp)
    eq("no reader is left waiting (shardgate_fill_waiters 0)", C.bstats()["waiters"], 0)
    C.stop_cache()


H.run(main)
