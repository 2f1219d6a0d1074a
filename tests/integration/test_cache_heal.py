"""tests/integration/test_cache_heal.py - a cache that heals, and a start
that says what is wrong with the cache directory instead of stopping. A
caching gateway B in front of a cold shardgate A:
  * [deleted] the cache directory is deleted under the running B: a GET
    still answers with the right bytes, the directory is recreated (one log line,
    shardgate_cache_dir_resets_total 1), and then a GET fills again and the
    next one is a hit (no cold GET) with its file in the new directory;
  * [ro] a read-only cache directory at start (as root: a read-only bind
    mount in a private mount namespace - root ignores chmod; otherwise chmod
    555): B starts, serves every GET from the cold tier with the right
    bytes, logs why (the path and EROFS / EACCES), and a prefetch job's
    objects fail as CacheUnavailable with that reason, never EntityTooLarge;
  * [notdir] a cache directory under a regular file: B starts and its log
    names the path and "Not a directory";
  * [free] --cache-size above the free space of the cache file system: a
    warning at start naming the directory, and B starts.
On 69019cc: [deleted] never recreated the directory (caching stayed off),
[ro] and [notdir] stopped the start, [free] said nothing."""

import os
import shutil
import stat
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import atexit  # noqa: E402

import cache_common as C  # noqa: E402
import harness as H  # noqa: E402
import prefetch_common as P  # noqa: E402

check, eq = H.check, H.eq
MB = H.MB
B = "heal"


def resets():
    return C.bm("shardgate_cache_dir_resets_total")


def files_under(d):
    n = 0
    for _, _, fs in os.walk(d):
        n += len(fs)
    return n


def deleted(cold, objs):
    cfg = C.Cache(cold.endpoint, cold.access, cold.secret, size="64MiB", tag="deleted")
    C.start_cache(cfg)
    r = C.bget("/%s/a" % B)
    eq("[deleted] first GET bytes", (r.status, r.sha), (200, H.sha256(objs["a"])))
    check("[deleted] the fill is published", C.wait_until(lambda: C.bstats()["objects"] >= 1))
    h0 = C.bstats()["hits"]
    r = C.bget("/%s/a" % B)
    eq("[deleted] second GET is a hit", (r.sha, C.bstats()["hits"] - h0),
       (H.sha256(objs["a"]), 1))

    shutil.rmtree(cfg.cache_dir)
    # whatever the cache is doing now (its fill cannot create a file, or the
    # watcher saw the deletion first), the reader gets the object
    r = C.bget("/%s/a" % B)
    eq("[deleted] GET right after the deletion", (r.status, r.sha), (200, H.sha256(objs["a"])))
    check("[deleted] the directory is recreated (shardgate_cache_dir_resets_total 1)",
          C.wait_until(lambda: resets() == 1, 20), "resets %r" % resets())
    check("[deleted] ... and exists again", os.path.isdir(cfg.cache_dir))
    lines = H.log_grep("was deleted: recreated it and dropped the in-memory index")
    eq("[deleted] logged once", len(lines), 1)

    # fills resume into the new directory: each key is a miss once, then a hit
    # (only "a" can be in the new index already: it is the one read since)
    for k in ("a", "c"):
        g0 = cold.gets()
        r = C.bget("/%s/%s" % (B, k))
        eq("[deleted] GET %s after the recreation" % k, (r.status, r.sha),
           (200, H.sha256(objs[k])))
        check("[deleted] %s is published in the new directory" % k,
              C.wait_until(lambda: C.bstats()["objects"] >= (1 if k == "a" else 2), 15))
        g1, h1 = cold.gets(), C.bstats()["hits"]
        r = C.bget("/%s/%s" % (B, k))
        eq("[deleted] the next GET of %s is a hit: right bytes, hits +1, no cold GET" % k,
           (r.sha, C.bstats()["hits"] - h1, cold.gets() - g1),
           (H.sha256(objs[k]), 1, 0))
        check("[deleted] ... %s cost at most one cold GET since the recreation" % k,
              g1 - g0 <= 1, "%r" % (g1 - g0))
    eq("[deleted] the new directory holds the two cached objects' files",
       files_under(os.path.join(cfg.cache_dir, "objects")), 2)
    eq("[deleted] still one recreation", resets(), 1)
    C.stop_cache()


def read_only(cold, objs):
    d = H.tmpdir("ro-cache")
    wrap = []
    if os.geteuid() == 0:
        # root writes through any mode bits: a read-only bind mount, in a mount
        # namespace of B's own (nothing to clean up, nobody else sees it)
        wrap = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                'mount --bind -o ro "$0" "$0" && exec "$@"', d]
        want = "cache directory %s is read-only: Read-only file system (EROFS)" % d
    else:
        os.chmod(d, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP |
                 stat.S_IROTH | stat.S_IXOTH)
        want = "cache directory %s is not writable: Permission denied (EACCES)" % d
    cfg = C.Cache(cold.endpoint, cold.access, cold.secret, cache_dir=d, size="64MiB",
                  tag="ro", wrap=wrap)
    C.start_cache(cfg)
    check("[ro] the log says why the cache is not used (path and errno)",
          H.log_grep(want + ": every read goes to the cold tier"), H.log_tail(15))
    check("[ro] the start banner says it too",
          H.log_grep("not in use now: " + want), H.log_tail(15))
    for k in ("a", "b"):
        g0 = cold.gets()
        for i in range(2):
            r = C.bget("/%s/%s" % (B, k))
            eq("[ro] GET %s #%d from the cold tier: right bytes" % (k, i + 1),
               (r.status, r.sha), (200, H.sha256(objs[k])))
        eq("[ro] both GETs of %s went to the cold tier" % k, cold.gets() - g0, 2)
    s = C.bstats()
    eq("[ro] nothing cached, no fill tried", (s["objects"], s["fills"], s["hits"]), (0, 0, 0))
    r = C.request(H.S.port, "GET", "/%s/a" % B, headers={"Range": "bytes=10-19"})
    eq("[ro] a range from the cold tier", (r.status, r.body), (206, objs["a"][10:20]))

    a = P.hint(B, {"keys": ["a", "b"]})
    eq("[ro] prefetch hint accepted (202)", a.status, 202)
    j = P.Poller(B, (a.json or {}).get("job", ""), "[ro] prefetch").wait(timeout=30) or {}
    o = j.get("objects") or {}
    eq("[ro] prefetch: both objects failed", (o.get("failed"), o.get("staged")), (2, 0))
    errs = j.get("errors") or []
    eq("[ro] prefetch errors are cache-side: CacheUnavailable (not EntityTooLarge)",
       sorted(e.get("code") for e in errs), ["CacheUnavailable", "CacheUnavailable"])
    check("[ro] ... with the reason as the message",
          errs and all(e.get("message") == want for e in errs), errs)
    C.stop_cache()


def not_a_dir(cold, objs):
    base = H.tmpdir("notdir")
    with open(os.path.join(base, "file"), "w") as f:
        f.write("x")
    d = os.path.join(base, "file", "cache")
    cfg = C.Cache(cold.endpoint, cold.access, cold.secret, cache_dir=d, size="64MiB",
                  tag="notdir")
    C.start_cache(cfg)
    check("[notdir] the log names the path and the errno",
          H.log_grep("cache directory %s cannot be created: Not a directory (ENOTDIR)" % d),
          H.log_tail(10))
    r = C.bget("/%s/a" % B)
    eq("[notdir] GET from the cold tier", (r.status, r.sha), (200, H.sha256(objs["a"])))
    C.stop_cache()


def free_space(cold, objs):
    cfg = C.Cache(cold.endpoint, cold.access, cold.secret, size="4096TiB", tag="free")
    C.start_cache(cfg)
    lines = H.log_grep("cache size 4503599627370496 bytes is above the free space of the "
                       "file system of %s" % cfg.cache_dir)
    eq("[free] one warning: the cache size is above the free space", len(lines), 1)
    r = C.bget("/%s/a" % B)
    eq("[free] and the gateway works", (r.status, r.sha), (200, H.sha256(objs["a"])))
    C.stop_cache()


def main():
    C.need_clients()
    C.init("test_cache_heal")
    atexit.register(C.stop_all)
    cold = C.ColdGateway().start()
    cold.client().create_bucket(Bucket=B)
    objs = {"a": os.urandom(2 * MB + 11), "b": os.urandom(300 * 1024), "c": os.urandom(MB)}
    for k, v in objs.items():
        cold.put_file(B, k, v)
    free_space(cold, objs)
    deleted(cold, objs)
    read_only(cold, objs)
    not_a_dir(cold, objs)
    cold.stop()


if __name__ == "__main__":
    H.run(main)
