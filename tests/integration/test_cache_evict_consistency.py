"""tests/integration/test_cache_evict_consistency.py - eviction and consistency
of the cache (cold tier: shardgate A; caching gateway B with a 64 MiB cache
and per-bucket consistency from its config file):
  * eviction: 48 x 4 MiB objects (3x the cache) read twice: after every GET
    shardgate_cache_bytes is at most the high watermark (90 %),
    evictions_total > 0, every body is right, the cache is actually used;
  * consistency, objects overwritten directly in the cold tier (PUT to A):
      ttl:1      - right away the old bytes, after 1.5 s the new ones;
      always     - the new bytes at once; an unchanged object is revalidated
                   without transferring its bytes again;
      immutable  - the old bytes for good, and no cold-tier request at all;
    the ttl:1 re-read is placed across a wall-clock second boundary (an entry
    must stay fresh for its whole TTL whatever the clock's phase); an object
    larger than the whole cache goes around it; with the cold tier stopped a
    ttl entry past its TTL is still served (failed revalidation logged).
"""

import atexit
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cache_common as C  # noqa: E402
import harness as H  # noqa: E402

check, eq = H.check, H.eq
MB = H.MB
CAP = 64 * MB
HIGH = 90


def eviction(a):
    b = "evict"
    a.client().create_bucket(Bucket=b)
    n, size = 48, 4 * MB
    shas = [a.put_random(b, "set/o%02d" % i, size) for i in range(n)]
    s0 = C.bstats()
    eq("capacity_bytes is the configured 64 MiB", s0["capacity"], CAP)
    limit = CAP * HIGH // 100
    over, wrong, peak = [], [], 0
    for rnd in range(2):
        for i in range(n):
            r = C.bget("/%s/set/o%02d" % (b, i))
            if (r.status, r.sha, r.error) != (200, shas[i], None):
                wrong.append((rnd, i, r))
            s = C.bstats()
            peak = max(peak, s["bytes"])
            if s["bytes"] > limit:
                over.append((rnd, i, int(s["bytes"])))
    s1 = C.bstats()
    eq("48 x 4 MiB read twice through a 64 MiB cache: every body right", wrong, [])
    eq("cache_bytes never above the high watermark (%d %% = %d bytes) after any GET"
       % (HIGH, limit), over[:10], [])
    check("evictions_total > 0", s1["evictions"] > s0["evictions"], s1)
    check("the cache was used: peak cache_bytes above half the capacity", peak > CAP / 2,
          "peak %d" % peak)
    check("cache_objects * 4 MiB == cache_bytes (the gauges agree)",
          s1["objects"] * size == s1["bytes"], s1)
    # the most recent object is still cached (LRU keeps the newest)
    time.sleep(0.5)               # published after its last byte went out
    g0 = a.gets()
    r = C.bget("/%s/set/o%02d" % (b, n - 1))
    eq("the last object read is still a hit", (r.sha, a.gets() - g0), (shas[n - 1], 0))
    # an object larger than the whole cache goes around it
    bigsha = a.put_random(b, "bigger-than-cache", 80 * MB)
    s2 = C.bstats()
    r = C.bget("/%s/bigger-than-cache" % b, chunk=MB)
    s3 = C.bstats()
    eq("an 80 MiB object through the 64 MiB cache: 200 with the right bytes",
       (r.status, r.sha, r.error), (200, bigsha, None))
    check("... and the cache stays within its high watermark",
          s3["bytes"] <= limit, s3)
    with open(a.path(b, "bigger-than-cache"), "rb") as f:
        f.seek(79 * MB)
        want = f.read(100)
    r = C.bget("/%s/bigger-than-cache" % b, headers={"Range": "bytes=%d-%d"
                                                     % (79 * MB, 79 * MB + 99)}, keep=True)
    eq("... a range of it: 206 and the bytes", (r.status, r.body), (206, want))
    check("... the cached entries were not all evicted for it",
          C.bstats()["objects"] > 0, (s2, C.bstats()))
    print("# eviction: peak %d bytes, %d evictions, %d misses, %d hits"
          % (peak, s1["evictions"] - s0["evictions"], s1["misses"] - s0["misses"],
             s1["hits"] - s0["hits"]), flush=True)


def put_cold(a, bucket, key, data):
    a.client().put_object(Bucket=bucket, Key=key, Body=data)


def cold_full_gets(a):
    """GetObject answers from A that carried a body (200/206)."""
    m = a.metrics()
    return sum(C.metric_sum(m, "shardgate_requests_total", op="GetObject", code=c) or 0
               for c in ("200", "206"))


def consistency(a):
    cc = a.client()
    for bkt in ("c-ttl", "c-always", "c-immut"):
        cc.create_bucket(Bucket=bkt)

    # --- ttl:1
    # The first read happens late in a wall-clock second and the re-read
    # just after the next second starts (~0.3 s later): an entry must stay
    # fresh for its whole TTL whatever the phase of the clock (a TTL kept in
    # whole seconds of time() would expire it after 0.3 s).
    v1, v2 = os.urandom(3 * MB), os.urandom(2 * MB + 5)
    put_cold(a, "c-ttl", "k", v1)
    while not 0.70 <= time.time() % 1.0 < 0.75:
        time.sleep(0.005)
    t_cached = time.monotonic()
    r = C.bget("/c-ttl/k")
    eq("[ttl:1] first GET: v1", r.sha, H.sha256(v1))
    put_cold(a, "c-ttl", "k", v2)
    time.sleep(0.2)                       # its fill is published
    while not 0.02 <= time.time() % 1.0 < 0.5:
        time.sleep(0.005)
    r = C.bget("/c-ttl/k")
    age = time.monotonic() - t_cached
    if age < 0.9:
        eq("[ttl:1] overwritten in the cold tier, GET %.2f s after caching (across a "
           "second boundary): still v1" % age, (r.sha, r.clen()), (H.sha256(v1), len(v1)))
    else:
        H.skip("[ttl:1] GET right away returns v1", "the machine was too slow (%.2f s)" % age)
    time.sleep(1.5)
    r = C.bget("/c-ttl/k")
    eq("[ttl:1] after 1.5 s: v2 with its length", (r.sha, r.clen(), r.error),
       (H.sha256(v2), len(v2), None))
    h = C.request(H.S.port, "HEAD", "/c-ttl/k")
    eq("[ttl:1] HEAD after the revalidation: v2's length", h.headers.get("content-length"),
       str(len(v2)))
    r = C.bget("/c-ttl/k")
    eq("[ttl:1] and again: v2", r.sha, H.sha256(v2))
    # unchanged after the TTL: revalidated without transferring the bytes again
    time.sleep(1.5)
    s0, f0, bb0 = C.bstats(), cold_full_gets(a), C.bstats()["backend_bytes"]
    r = C.bget("/c-ttl/k")
    s1 = C.bstats()
    eq("[ttl:1] unchanged object after the TTL: v2", r.sha, H.sha256(v2))
    check("[ttl:1] unchanged object after the TTL: revalidated (revalidations_total +1)",
          s1["revalidations"] > s0["revalidations"], s1)
    eq("[ttl:1] unchanged object after the TTL: no object bytes from the cold tier",
       (s1["backend_bytes"] - bb0, cold_full_gets(a) - f0), (0, 0))

    # --- always
    w1, w2 = os.urandom(MB + 1), os.urandom(MB + 2)
    put_cold(a, "c-always", "k", w1)
    r = C.bget("/c-always/k")
    eq("[always] first GET: v1", r.sha, H.sha256(w1))
    put_cold(a, "c-always", "k", w2)
    r = C.bget("/c-always/k")
    eq("[always] overwritten in the cold tier: the new bytes at once", (r.sha, r.clen()),
       (H.sha256(w2), len(w2)))
    h = C.request(H.S.port, "HEAD", "/c-always/k")
    eq("[always] HEAD: the new ETag", h.headers.get("etag"),
       C.request(a.port, "HEAD", "/c-always/k", access=a.access,
                 secret=a.secret).headers.get("etag"))
    r = C.bget("/c-always/k")     # cached again
    time.sleep(0.5)               # published after its last byte went out
    s0, f0 = C.bstats(), cold_full_gets(a)
    r = C.bget("/c-always/k")
    s1 = C.bstats()
    eq("[always] unchanged: right bytes", r.sha, H.sha256(w2))
    check("[always] unchanged: revalidated on this read", s1["revalidations"] > s0["revalidations"],
          s1)
    eq("[always] unchanged: no object bytes from the cold tier",
       (s1["backend_bytes"] - s0["backend_bytes"], cold_full_gets(a) - f0), (0, 0))
    cc.delete_object(Bucket="c-always", Key="k")
    r = C.bget("/c-always/k")
    eq("[always] deleted in the cold tier: 404 at once", r.status, 404)

    # --- immutable
    i1, i2 = os.urandom(MB + 3), os.urandom(MB + 4)
    put_cold(a, "c-immut", "k", i1)
    r = C.bget("/c-immut/k")
    eq("[immutable] first GET: v1", r.sha, H.sha256(i1))
    put_cold(a, "c-immut", "k", i2)
    g0, h0 = a.gets(), a.heads()
    r = C.bget("/c-immut/k")
    eq("[immutable] overwritten in the cold tier: still v1", r.sha, H.sha256(i1))
    time.sleep(1.5)
    r = C.bget("/c-immut/k")
    eq("[immutable] 1.5 s later: still v1", r.sha, H.sha256(i1))
    h = C.request(H.S.port, "HEAD", "/c-immut/k")
    eq("[immutable] HEAD: still v1's length", h.headers.get("content-length"), str(len(i1)))
    eq("[immutable] no cold-tier GET or HEAD at all", (a.gets() - g0, a.heads() - h0), (0, 0))

    # --- the cold tier goes down: a ttl entry past its TTL is still served
    # (the revalidation fails; availability over freshness, logged)
    a.stop()
    time.sleep(1.2)
    t0 = time.monotonic()
    r = C.bget("/c-ttl/k")
    dt = time.monotonic() - t0
    eq("[ttl:1] cold tier down, TTL passed: the cached copy is served (200, v2)",
       (r.status, r.sha, r.error), (200, H.sha256(v2), None))
    check("[ttl:1] cold tier down: answered within 2 s", dt < 2.0, "%.2f s" % dt)
    check("[ttl:1] cold tier down: the failed revalidation is logged",
          H.log_grep("revalidation of c-ttl/k failed"), H.log_tail(5))
    r = C.bget("/c-immut/k")
    eq("[immutable] cold tier down: still served", (r.status, r.sha), (200, H.sha256(i1)))


def main():
    C.need_clients()
    C.init("test_cache_evict_consistency")
    atexit.register(C.stop_all)
    a = C.ColdGateway().start()
    conf = {"buckets": {"c-ttl": {"consistency": "ttl:1"},
                        "c-always": {"consistency": "always"},
                        "c-immut": {"consistency": "immutable"}},
            "cache": {"high_watermark": HIGH, "low_watermark": 80}}
    C.start_cache(C.Cache(a.endpoint, a.access, a.secret, size="64MiB", config=conf,
                          tag="ec"))
    eviction(a)
    consistency(a)
    C.stop_cache()


H.run(main)
