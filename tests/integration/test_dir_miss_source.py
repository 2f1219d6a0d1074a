"""tests/integration/test_dir_miss_source.py - a miss from a directory store
(--data: a local or parallel file system tree) is sent from the source file
itself while its fill goes on into the cache (gateway/h_object.c,
read_from_source); a miss from an S3 cold tier still streams the fill's bytes.

  * [dir] four 8 MiB objects read by four clients at once, four clients on one
    new 24 MiB object at once (one fill, three joiners), and a range GET as the
    first read of a 16 MiB object: every body is right, the readers copied
    nothing from the fills (shardgate_cache_fill_read_bytes_total stays 0),
    each object was filled once and is cached afterwards, and its next GET is
    a hit with the right bytes;
  * [s3] a caching gateway whose cold tier is S3 (a second shardgate over
    the same tree): its miss copies the fill's bytes (the counter grows by the
    object's size), as before.
Not covered: a source replaced between the fill's open and the reader's (a
race this test cannot time); the reader then keeps the fill's bytes.
"""

import os
import re
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import cache_common as C  # noqa: E402
import store_common as T  # noqa: E402

check, eq = H.check, H.eq
MB = H.MB


def fill_reads(port):
    m = C.metrics(port)
    return sum(C.metric_sum(m, "shardgate_cache_fill_read_bytes_total", **{"from": f}) or 0.0
               for f in ("buffer", "file"))


def counters(port):
    m = C.metrics(port)
    return {k: C.metric_sum(m, "shardgate_cache_" + k + "_total") or 0.0
            for k in ("misses", "hits", "fills")}


def get_all(port, paths, headers=None):
    """GETs the paths at once (one thread each); returns [(status, sha256)]."""
    out = [None] * len(paths)

    def one(i):
        r = C.get_stream(port, paths[i], headers=headers, keep=bool(headers), chunk=MB)
        out[i] = (r.status, r.body if headers else r.sha, r.error)
    ts = [threading.Thread(target=one, args=(i,)) for i in range(len(paths))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    return out


def case_dir():
    root = H.tmpdir("dirmiss-data")
    cache = H.tmpdir("dirmiss-cache")
    shas = {}
    for k, size in (("a", 8), ("b", 8), ("c", 8), ("d", 8), ("big", 24), ("r", 16)):
        p = os.path.join(root, "dset", k)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        shas[k] = H.write_random_file(p, size * MB)
    gw = T.Gw("dir", ["--data", root, "--cache-dir", cache, "--cache-size", "256MiB",
                      "--consistency", "immutable"])
    if not gw.start():
        return
    c0, f0 = counters(gw.port), fill_reads(gw.port)
    got = get_all(gw.port, ["/dset/a", "/dset/b", "/dset/c", "/dset/d"])
    eq("[dir] four misses at once: right bytes",
       got, [(200, shas[k], None) for k in ("a", "b", "c", "d")])
    got = get_all(gw.port, ["/dset/big"] * 4)
    eq("[dir] four readers of one new object at once: right bytes",
       got, [(200, shas["big"], None)] * 4)
    with open(os.path.join(root, "dset", "r"), "rb") as f:
        f.seek(5 * MB + 7)
        want = f.read(3 * MB)
    got = get_all(gw.port, ["/dset/r"], headers={"Range": "bytes=%d-%d" % (5 * MB + 7,
                                                                          8 * MB + 6)})
    eq("[dir] a range GET as the first read of an object: the range",
       [(s, b == want, e) for s, b, e in got], [(206, True, None)])
    check("[dir] the six objects are cached",
          C.wait_until(lambda: (C.metric_sum(C.metrics(gw.port), "shardgate_cache_objects")
                                or 0.0) >= 6, timeout=30))
    c1, f1 = counters(gw.port), fill_reads(gw.port)
    eq("[dir] the readers copied no byte from the fills", f1 - f0, 0.0)
    eq("[dir] one fill per object, the joiners included", c1["fills"] - c0["fills"], 6.0)
    got = get_all(gw.port, ["/dset/" + k for k in sorted(shas)])
    eq("[dir] the next GETs: right bytes", got, [(200, shas[k], None) for k in sorted(shas)])
    c2 = counters(gw.port)
    eq("[dir] the next GETs are hits", (c2["hits"] - c1["hits"], c2["misses"] - c1["misses"]),
       (6.0, 0.0))
    # a request's access line is written once its last byte is sent: it can
    # come after the client has the body
    check("[dir] the fifteen GETs are in the access log",
          C.wait_until(lambda: len(gw.grep("op=GetObject")) >= 15, timeout=10),
          len(gw.grep("op=GetObject")))
    reads = {}
    for line in gw.grep(" access: "):
        key = re.search(r" key=(\S+)", line)
        how = re.search(r" read=(\S+)", line)
        if key and how:
            reads.setdefault(key.group(1), []).append(how.group(1))
    eq("[dir] the access log: each first GET a fill, then a hit",
       {k: reads.get(k) for k in ("a", "b", "c", "d", "r")}, {k: ["fill", "hit"] for k in
                                                                ("a", "b", "c", "d", "r")})
    big = reads.get("big", [])
    eq("[dir] the access log: one of the four readers of the new object filled it, the "
       "others joined its fill (or came after it) and the last GET hit",
       (len(big), big.count("fill"), sorted(set(big[:4]) - {"fill"}) in ([], ["miss-joined"],
                                                                      ["hit"],
                                                                      ["hit", "miss-joined"]),
        big[-1:]), (5, 1, True, ["hit"]))
    eq("[dir] gateway exits 0 on SIGTERM", gw.stop(), 0)


def case_s3():
    a = C.ColdGateway().start()
    a.client().create_bucket(Bucket="dset")
    sha = a.put_random("dset", "k", 8 * MB)
    C.start_cache(C.Cache(a.endpoint, a.access, a.secret, size="256MiB",
                          consistency="immutable", tag="s3"))
    f0 = fill_reads(H.S.port)
    got = C.bget("/dset/k", chunk=MB)
    eq("[s3] a miss from an S3 cold tier: right bytes", (got.status, got.sha, got.error),
       (200, sha, None))
    eq("[s3] its reader copied the fill's bytes", fill_reads(H.S.port) - f0, 8.0 * MB)
    C.stop_cache("[s3] caching gateway exits 0 on SIGTERM")


def main():
    C.need_clients()
    C.init("test_dir_miss_source")
    case_dir()
    case_s3()


H.run(main)
