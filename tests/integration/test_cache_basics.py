"""tests/integration/test_cache_basics.py - the read-through cache in front of
a real cold tier (shardgate A serving --data DIR, verifying SigV4), then with
moto as the cold tier:
  * the second GET of an object is a hit: same bytes (sha256), hits_total +1,
    and the cold tier's own GetObject count does not move;
  * a HEAD after a GET needs no cold-tier GET;
  * the headers served from the cache equal the cold tier's (ETag,
    Last-Modified, Content-Type, Content-Length, Cache-Control,
    Content-Disposition, x-amz-meta-*), on the miss and on the hit;
  * range GETs on cached objects (206, Content-Range, bytes; 416 past the end)
    are served without the cold tier; a range on a cold object is right;
  * hits (whole or a range) of 128 KiB + 1 to 4 MiB are read into memory and
    sent with their headers, others by sendfile, a HEAD reads no body,
    and cache.read_path "sendfile" copies none (shardgate_cache_hit_sends_total);
  * writes through the caching gateway invalidate: PUT, CopyObject and a
    completed multipart upload onto a cached key are seen at once, DELETE
    makes it 404;
  * an empty object is cached like any other;
  * the index survives a clean restart (same objects/bytes, hits without the
    cold tier, the empty object too), and a cache file truncated while the
    gateway was down is never served as the object.
"""

import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import atexit  # noqa: E402

import cache_common as C  # noqa: E402
import harness as H  # noqa: E402

check, eq = H.check, H.eq
MB = H.MB

COMPARED = ("etag", "last-modified", "content-type", "content-length", "cache-control",
            "content-disposition", "content-language", "content-encoding", "expires")


def obj_headers(h):
    return {k: v for k, v in h.items() if k in COMPARED or k.startswith("x-amz-meta-")}


def cold_head(cold, bucket, key):
    return C.request(cold.port, "HEAD", "/%s/%s" % (bucket, key), access=cold.access,
                     secret=cold.secret)


def published(n, timeout=10):
    """n objects are cached and no fill is still running (on a loaded machine
    an earlier fill can publish late and make up the count)."""
    def done():
        s = C.bstats()
        return s["objects"] >= n and s["fills"] == s["fills_done"] + s["fills_failed"]
    return C.wait_until(done, timeout)


def count_cold(cold, tp):
    """Independent count of the cold tier's work: A's own GetObject count,
    or for moto the bytes that went through the proxy in front of it."""
    if tp is not None:
        return tp.stats()["down"]
    return cold.gets()


def suite(tag, cold, tp):
    b = "cache-basics-%s" % tag
    cc = cold.client()
    cc.create_bucket(Bucket=b)
    s3 = H.boto3_client()
    data = os.urandom(3 * MB + 777)
    cc.put_object(Bucket=b, Key="obj", Body=data, ContentType="application/x-shard",
                  CacheControl="max-age=7", ContentDisposition="attachment; filename=x.tar",
                  Metadata={"color": "blue", "epoch": "3"})
    want = H.sha256(data)
    cold_h = obj_headers(cold_head(cold, b, "obj").headers)

    # --- miss, then hit
    s0, c0 = C.bstats(), count_cold(cold, tp)
    g1 = C.bget("/%s/obj" % b)
    # the fill is published after its last byte went out: wait for that
    check("[%s] the fill is published" % tag, published(s0["objects"] + 1))
    s1, c1 = C.bstats(), count_cold(cold, tp)
    eq("[%s] first GET 200" % tag, g1.status, 200)
    eq("[%s] first GET bytes" % tag, g1.sha, want)
    eq("[%s] first GET is a miss" % tag, s1["misses"] - s0["misses"], 1)
    check("[%s] first GET went to the cold tier" % tag, c1 > c0, "%r -> %r" % (c0, c1))
    eq("[%s] miss headers equal the cold tier's" % tag, obj_headers(g1.headers), cold_h)
    # boto3 sends x-amz-checksum-crc32 with a PUT and the cold tier keeps it:
    # the fill checks its bytes against that CRC, not the MD5 ETag
    eq("[%s] the fill checked the cold tier's CRC (fill checks by checksum, md5)" % tag,
       (s1["checked_checksum"] - s0["checked_checksum"], s1["checked_md5"] - s0["checked_md5"]),
       (1, 0))
    g2 = C.bget("/%s/obj" % b)
    s2, c2 = C.bstats(), count_cold(cold, tp)
    eq("[%s] second GET bytes (sha256)" % tag, g2.sha, want)
    eq("[%s] second GET is a hit (hits_total +1)" % tag, s2["hits"] - s1["hits"], 1)
    eq("[%s] second GET: no cold-tier GET" % tag, c2, c1)
    eq("[%s] hit headers equal the cold tier's" % tag, obj_headers(g2.headers), cold_h)
    eq("[%s] one object cached, its size in cache_bytes" % tag,
       (s2["objects"], s2["bytes"]), (1, len(data)))
    # the same through boto3 (a real SDK)
    r = s3.get_object(Bucket=b, Key="obj")
    eq("[%s] boto3 GET from the cache: bytes" % tag, H.sha256(r["Body"].read()), want)
    eq("[%s] boto3 GET from the cache: metadata" % tag,
       (r["ContentType"], r["Metadata"], r["CacheControl"]),
       ("application/x-shard", {"color": "blue", "epoch": "3"}, "max-age=7"))

    # an object stored without a checksum: the MD5 ETag is checked
    plain = os.urandom(MB + 5)
    eq("[%s] PUT without a checksum to the cold tier" % tag,
       C.request(cold.port, "PUT", "/%s/plain" % b, body=plain, access=cold.access,
                 secret=cold.secret).status, 200)
    p0 = C.bstats()
    g = C.bget("/%s/plain" % b)
    check("[%s] object without a checksum: miss 200, published" % tag,
          g.status == 200 and g.sha == H.sha256(plain) and published(p0["objects"] + 1),
          g.status)
    p1 = C.bstats()
    eq("[%s] ... and the fill checked its MD5 ETag (fill checks by checksum, md5)" % tag,
       (p1["checked_checksum"] - p0["checked_checksum"], p1["checked_md5"] - p0["checked_md5"]),
       (0, 1))

    # --- HEAD after GET: no cold GET
    c3 = count_cold(cold, tp)
    heads0 = cold.heads() if tp is None else None
    h = C.request(H.S.port, "HEAD", "/%s/obj" % b)
    eq("[%s] HEAD after GET: 200" % tag, h.status, 200)
    eq("[%s] HEAD headers equal the cold tier's" % tag, obj_headers(h.headers), cold_h)
    eq("[%s] HEAD after GET: no cold-tier GET" % tag, count_cold(cold, tp), c3)
    if tp is None:
        eq("[%s] HEAD after GET: no cold-tier HEAD either" % tag, cold.heads(), heads0)

    # --- ranges on the cached object
    n = len(data)
    c4, h4 = count_cold(cold, tp), C.bstats()["hits"]
    ranges = [("bytes=0-0", 0, 0), ("bytes=100-199", 100, 199), ("bytes=-100", n - 100, n - 1),
              ("bytes=%d-" % (n - 5000), n - 5000, n - 1),
              ("bytes=%d-%d" % (MB - 3, 2 * MB + 3), MB - 3, 2 * MB + 3),
              ("bytes=%d-%d" % (n - 10, n + 1000), n - 10, n - 1)]
    for spec, lo, hi in ranges:
        g = C.bget("/%s/obj" % b, headers={"Range": spec}, keep=True)
        check("[%s] cached range %s: 206, Content-Range, bytes" % (tag, spec),
              g.status == 206 and g.body == data[lo:hi + 1]
              and g.headers.get("content-range") == "bytes %d-%d/%d" % (lo, hi, n)
              and g.clen() == hi - lo + 1,
              "status %r content-range %r len %r" % (g.status, g.headers.get("content-range"),
                                                     g.n))
    g = C.bget("/%s/obj" % b, headers={"Range": "bytes=%d-" % n}, keep=True)
    eq("[%s] cached range past the end: 416" % tag, g.status, 416)
    eq("[%s] ranges on a cached object: no cold-tier GET" % tag, count_cold(cold, tp), c4)
    check("[%s] ranges on a cached object count as hits" % tag,
          C.bstats()["hits"] - h4 >= len(ranges), "hits +%d" % (C.bstats()["hits"] - h4))

    # --- small objects: a hit up to 16 KiB is read whole with its header and
    # sent from memory with the response headers, and kept in the memory tier
    # (cache.memory, 64 MiB by default): the hits after it read no file. One
    # byte more goes by sendfile.
    for size in (0, 1, 4096, 16384, 16385):
        small = os.urandom(size)
        key = "small-%d" % size
        cc.put_object(Bucket=b, Key=key, Body=small, ContentType="application/x-small")
        before = C.bstats()["objects"]
        g = C.bget("/%s/%s" % (b, key), keep=True)
        check("[%s] small %d B: miss 200, published" % (tag, size),
              g.status == 200 and g.body == small and published(before + 1), g.status)
        h0 = C.bstats()["hits"]
        g = C.bget("/%s/%s" % (b, key), keep=True)
        check("[%s] small %d B: hit 200, bytes, Content-Length, Content-Type" % (tag, size),
              g.status == 200 and g.body == small and g.clen() == size
              and g.headers.get("content-type") == "application/x-small"
              and C.bstats()["hits"] == h0 + 1, (g.status, g.n, g.headers))
        m0 = C.bstats()["memory_hits"]
        g = C.bget("/%s/%s" % (b, key), keep=True)
        from_memory = C.bstats()["memory_hits"] - m0
        check("[%s] small %d B: the next hit %s, same bytes" % (
                  tag, size, "from memory" if size <= 16384 else "from the file"),
              g.status == 200 and g.body == small
              and from_memory == (1 if size <= 16384 else 0), (g.status, from_memory))
        if size < 2:
            continue
        for lo, hi in ((0, 0), (1, size - 1), (size // 2, size - 1), (size - 1, size - 1)):
            g = C.bget("/%s/%s" % (b, key), headers={"Range": "bytes=%d-%d" % (lo, hi)},
                       keep=True)
            check("[%s] small %d B: hit range %d-%d byte-exact" % (tag, size, lo, hi),
                  g.status == 206 and g.body == small[lo:hi + 1]
                  and g.headers.get("content-range") == "bytes %d-%d/%d" % (lo, hi, size),
                  (g.status, g.n, g.headers.get("content-range")))

    # --- hits of 128 KiB + 1 to 4 MiB (whole or a range) are read into memory
    # and sent with their headers in one send (gateway/hit_copy.c); smaller
    # and larger ones go by sendfile; a HEAD reads no body
    def sends():
        m = C.metrics(H.S.port)
        return tuple(C.metric_sum(m, "shardgate_cache_hit_sends_total", how=how) or 0.0
                     for how in ("copy", "sendfile"))

    for size, how in ((128 * 1024, "sendfile"), (128 * 1024 + 1, "copy"), (MB, "copy"),
                      (4 * MB, "copy"), (4 * MB + 1, "sendfile")):
        data = os.urandom(size)
        key = "sent-%d" % size
        cc.put_object(Bucket=b, Key=key, Body=data)
        before = C.bstats()["objects"]
        g = C.bget("/%s/%s" % (b, key))
        check("[%s] %d B: miss, published" % (tag, size),
              g.status == 200 and g.sha == H.sha256(data) and published(before + 1), repr(g))
        want = (1.0, 0.0) if how == "copy" else (0.0, 1.0)
        s0 = sends()
        g = C.bget("/%s/%s" % (b, key), keep=True)
        d = tuple(x - y for x, y in zip(sends(), s0))
        check("[%s] %d B: hit by %s, byte-exact" % (tag, size, how),
              g.status == 200 and g.body == data and g.clen() == size and d == want,
              (g.status, g.n, d))
        # a range is copied by its own length: 200,000 bytes of the larger
        # objects, but the last two thirds of a 128 KiB object go by sendfile
        lo = size // 3
        hi = min(size - 1, lo + 199999)
        how = "copy" if hi - lo + 1 > 128 * 1024 else "sendfile"
        want = (1.0, 0.0) if how == "copy" else (0.0, 1.0)
        s0 = sends()
        g = C.bget("/%s/%s" % (b, key), headers={"Range": "bytes=%d-%d" % (lo, hi)},
                   keep=True)
        d = tuple(x - y for x, y in zip(sends(), s0))
        check("[%s] %d B: a %d-byte range by %s, byte-exact" % (tag, size, hi - lo + 1, how),
              g.status == 206 and g.body == data[lo:hi + 1] and d == want
              and g.headers.get("content-range") == "bytes %d-%d/%d" % (lo, hi, size),
              (g.status, g.n, d))
        s0 = sends()
        h = cc.head_object(Bucket=b, Key=key)
        check("[%s] %d B: HEAD sends nothing" % (tag, size),
              h["ContentLength"] == size and sends() == s0, (h["ContentLength"], sends(), s0))

    # --- a range on a cold object, then the whole object
    d2 = os.urandom(5 * MB + 3)
    cc.put_object(Bucket=b, Key="cold-range", Body=d2)
    g = C.bget("/%s/cold-range" % b, headers={"Range": "bytes=%d-%d" % (4 * MB, 4 * MB + 99)},
               keep=True)
    check("[%s] range on a cold object: 206 and the bytes" % tag,
          g.status == 206 and g.body == d2[4 * MB:4 * MB + 100], repr(g))
    g = C.bget("/%s/cold-range" % b)
    eq("[%s] whole object after a cold range: bytes" % tag, g.sha, H.sha256(d2))
    published(2)
    c5 = count_cold(cold, tp)
    g = C.bget("/%s/cold-range" % b, headers={"Range": "bytes=5-9"}, keep=True)
    check("[%s] then a range is a hit" % tag, g.body == d2[5:10] and count_cold(cold, tp) == c5,
          "%r cold %r -> %r" % (g, c5, count_cold(cold, tp)))

    # --- empty object
    cc.put_object(Bucket=b, Key="empty", Body=b"")
    o0 = C.bstats()["objects"]
    g1 = C.bget("/%s/empty" % b)
    check("[%s] empty object: the fill is published" % tag, published(o0 + 1))
    e0 = (C.bstats()["hits"], count_cold(cold, tp))
    g2 = C.bget("/%s/empty" % b)
    e1 = (C.bstats()["hits"], count_cold(cold, tp))
    check("[%s] empty object: 200, 0 bytes, twice" % tag,
          (g1.status, g1.n, g2.status, g2.n, g2.clen()) == (200, 0, 200, 0, 0),
          "%r %r" % (g1, g2))
    eq("[%s] empty object: second GET is a hit without the cold tier" % tag,
       (e1[0] - e0[0], e1[1]), (1, e0[1]))

    # --- missing key: 404 through the cache
    g = C.bget("/%s/nope" % b, keep=True)
    eq("[%s] missing key: 404 NoSuchKey" % tag,
       (g.status, (H.parse_error(g.body) or {}).get("Code")), (404, "NoSuchKey"))

    # --- writes through the caching gateway invalidate
    new = os.urandom(2 * MB + 1)
    s3.put_object(Bucket=b, Key="obj", Body=new, ContentType="text/x-new")
    g = C.bget("/%s/obj" % b)
    eq("[%s] PUT through the cache, then GET: the new bytes" % tag, g.sha, H.sha256(new))
    eq("[%s] PUT through the cache, then GET: the new Content-Type" % tag,
       g.headers.get("content-type"), "text/x-new")
    h = C.request(H.S.port, "HEAD", "/%s/obj" % b)
    eq("[%s] PUT through the cache, then HEAD: the new length and ETag" % tag,
       (h.headers.get("content-length"), h.headers.get("etag")),
       (str(len(new)), cold_head(cold, b, "obj").headers.get("etag")))
    g = C.bget("/%s/obj" % b)          # cached again (the new bytes)
    eq("[%s] re-cached after the PUT: new bytes" % tag, g.sha, H.sha256(new))

    s3.copy_object(Bucket=b, Key="obj", CopySource={"Bucket": b, "Key": "cold-range"})
    g = C.bget("/%s/obj" % b)
    eq("[%s] CopyObject onto a cached key, then GET: the copied bytes" % tag,
       g.sha, H.sha256(d2))

    p1, p2 = os.urandom(5 * MB), os.urandom(1000)
    uid = s3.create_multipart_upload(Bucket=b, Key="obj")["UploadId"]
    e1 = s3.upload_part(Bucket=b, Key="obj", UploadId=uid, PartNumber=1, Body=p1)["ETag"]
    e2 = s3.upload_part(Bucket=b, Key="obj", UploadId=uid, PartNumber=2, Body=p2)["ETag"]
    s3.complete_multipart_upload(Bucket=b, Key="obj", UploadId=uid, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    g = C.bget("/%s/obj" % b)
    eq("[%s] multipart upload onto a cached key, then GET: the new bytes" % tag,
       g.sha, H.sha256(p1 + p2))

    s3.delete_object(Bucket=b, Key="obj")
    g = C.bget("/%s/obj" % b, keep=True)
    eq("[%s] DELETE through the cache, then GET: 404 NoSuchKey" % tag,
       (g.status, (H.parse_error(g.body) or {}).get("Code")), (404, "NoSuchKey"))
    h = C.request(H.S.port, "HEAD", "/%s/obj" % b)
    eq("[%s] DELETE through the cache, then HEAD: 404" % tag, h.status, 404)
    s = C.bstats()
    check("[%s] cache_bytes within capacity" % tag, s["bytes"] <= s["capacity"], s)


def restarts(a, cfg):
    """The index survives a clean restart; a damaged (truncated) cache file is
    never served as the object."""
    b = "cache-basics-sg"
    d2 = a.client().get_object(Bucket=b, Key="cold-range")["Body"].read()
    s0 = C.bstats()
    C.stop_cache("[sg] clean stop before the restart: exit 0")
    C.start_cache(cfg)
    s1 = C.bstats()
    eq("[restart] after a clean restart the same objects and bytes are cached",
       (s1["objects"], s1["bytes"]), (s0["objects"], s0["bytes"]))
    g0 = a.gets()
    g = C.bget("/%s/cold-range" % b)
    eq("[restart] a cached object is a hit after a clean restart, no cold GET",
       (g.sha, C.bstats()["hits"] - s1["hits"], a.gets() - g0), (H.sha256(d2), 1, 0))
    h0, g0, m0, hd0 = C.bstats()["hits"], a.gets(), C.bstats()["misses"], a.heads()
    g = C.bget("/%s/empty" % b)
    eq("[restart] the cached empty object is a hit after a clean restart (hits, misses, "
       "cold GETs, cold HEADs)", (g.status, g.n, C.bstats()["hits"] - h0,
                                  C.bstats()["misses"] - m0, a.gets() - g0, a.heads() - hd0),
       (200, 0, 1, 0, 0, 0))
    C.stop_cache("[sg] clean stop before damaging a cache file: exit 0")
    files = []
    for root, _, names in os.walk(os.path.join(cfg.cache_dir, "objects")):
        for nm in names:
            p = os.path.join(root, nm)
            files.append((os.path.getsize(p), p))
    files.sort()
    if not files or files[-1][0] < len(d2):
        check("[restart] found the cache file of the 5 MiB object", False, files[-3:])
        C.start_cache(cfg)
        return
    big = files[-1][1]
    os.truncate(big, files[-1][0] - MB)       # external damage: the file lost its tail
    C.start_cache(cfg)
    g = C.bget("/%s/cold-range" % b)
    eq("[restart] a truncated cache file is not served: full right bytes",
       (g.status, g.sha, g.error), (200, H.sha256(d2), None))
    g = C.bget("/%s/cold-range" % b)
    eq("[restart] and again (re-filled)", (g.status, g.sha, g.error), (200, H.sha256(d2), None))

    # cache.read_path "sendfile": no hit is read into memory
    d1 = a.client().get_object(Bucket=b, Key="sent-%d" % MB)["Body"].read()
    C.stop_cache("[sg] clean stop before read_path sendfile: exit 0")
    plain = copy.copy(cfg)
    plain.config = dict(cfg.config or {}, cache={"read_path": "sendfile"})
    C.start_cache(plain)
    m0 = C.metrics(H.S.port)
    g = C.bget("/%s/sent-%d" % (b, MB), keep=True)
    m1 = C.metrics(H.S.port)
    d = tuple((C.metric_sum(m1, "shardgate_cache_hit_sends_total", how=how) or 0.0)
              - (C.metric_sum(m0, "shardgate_cache_hit_sends_total", how=how) or 0.0)
              for how in ("copy", "sendfile"))
    eq("[restart] read_path sendfile: a 1 MiB hit by sendfile, byte-exact",
       (g.status, g.body == d1, d), (200, True, (0.0, 1.0)))
    C.stop_cache("[sg] clean stop after read_path sendfile: exit 0")
    C.start_cache(cfg)


def main():
    C.need_clients()
    C.init("test_cache_basics")
    atexit.register(C.stop_all)

    a = C.ColdGateway().start()
    cfg = C.Cache(a.endpoint, a.access, a.secret, consistency="immutable", tag="sg")
    C.start_cache(cfg)
    suite("sg", a, None)
    restarts(a, cfg)
    C.stop_cache("[sg] caching gateway exits 0 on SIGTERM")
    a.stop()

    if not C.have_moto():
        H.skip("[moto] the same with moto as the cold tier", "moto is not importable")
        return
    import throttle
    m = C.Moto().start()
    tp = throttle.Throttle("127.0.0.1", m.port).start()   # unthrottled: counts bytes
    try:
        C.start_cache(C.Cache("http://127.0.0.1:%d" % tp.port, m.access, m.secret,
                              consistency="immutable", tag="moto"))
        suite("moto", m, tp)
        C.stop_cache("[moto] caching gateway exits 0 on SIGTERM")
    finally:
        tp.stop()
        m.stop()


H.run(main)
