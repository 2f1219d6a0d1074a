"""tests/integration/test_cache_tinydisk.py - the cache directory runs out of
space: the caching gateway's --cache-dir is a 64 MiB tmpfs while
--cache-size says 1 GiB, so fills hit ENOSPC. 200 MiB of distinct objects
(16 x 8 MiB, read 4 at a time, and one 72 MiB object larger than the whole
disk) are read through it twice: every request still succeeds with the right
bytes (the gateway falls back to the cold tier), the gateway stays up, and
its log tells of the cache failure. cache.wait_timeout_ms is 5 s so that a
fill that hangs after a failed write shows up as a short body in seconds. Needs root to mount a tmpfs: exit 77
otherwise. The tmpfs is unmounted at the end."""

import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cache_common as C  # noqa: E402
import harness as H  # noqa: E402

check, eq = H.check, H.eq
MB = H.MB


def main():
    C.need_clients()
    C.init("test_cache_tinydisk")
    mnt = C.small_disk("tinydisk", "64m")
    a = C.ColdGateway().start()
    b = "tiny"
    a.client().create_bucket(Bucket=b)
    shas = {}
    for i in range(16):
        shas["s%02d" % i] = a.put_random(b, "s%02d" % i, 8 * MB)
    shas["huge"] = a.put_random(b, "huge", 72 * MB)
    # short waits so that a stuck fill shows in seconds, not minutes
    conf = {"cache": {"wait_timeout_ms": 5000}, "shutdown_grace_s": 5}
    C.start_cache(C.Cache(a.endpoint, a.access, a.secret, cache_dir=mnt, size="1GiB",
                          consistency="immutable", config=conf, tag="tiny"))

    for rnd in range(2):
        results = {}
        keys = sorted(k for k in shas if k != "huge")
        lock = threading.Lock()

        def worker():
            while True:
                with lock:
                    if not keys:
                        return
                    k = keys.pop(0)
                results[k] = C.bget("/%s/%s" % (b, k), chunk=MB, timeout=60)

        ts = [threading.Thread(target=worker) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        results["huge"] = C.bget("/%s/huge" % b, chunk=MB, timeout=60)
        wrong = [(k, r) for k, r in sorted(results.items())
                 if (r.status, r.sha, r.error) != (200, shas[k], None)]
        eq("[round %d] 200 MiB through a 64 MiB cache disk: every GET 200 with the right "
           "bytes" % (rnd + 1), wrong, [])
        check("[round %d] gateway still healthy" % (rnd + 1), H.health() == 200)
        r = C.bget("/%s/huge" % b, headers={"Range": "bytes=%d-%d" % (70 * MB, 70 * MB + 9)},
                   keep=True)
        with open(a.path(b, "huge"), "rb") as f:
            f.seek(70 * MB)
            want = f.read(10)
        eq("[round %d] a range of the object larger than the disk" % (rnd + 1),
           (r.status, r.body), (206, want))
    s = C.bstats()
    print("# tinydisk: %r" % s, flush=True)
    st = os.statvfs(mnt)
    print("# tmpfs: %d of %d bytes free" % (st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize),
          flush=True)
    files = []
    for root, _, names in os.walk(mnt):
        for nm in names:
            try:
                files.append((os.path.getsize(os.path.join(root, nm)),
                              os.path.relpath(os.path.join(root, nm), mnt)))
            except OSError:
                pass
    files.sort(reverse=True)
    print("# tmpfs holds %d files, %d bytes; largest: %r"
          % (len(files), sum(f[0] for f in files), files[:10]), flush=True)
    fails = [l for l in H.log_grep("cache") if ("WARN" in l or "ERROR" in l)]
    nospc = [l for l in fails if "space" in l.lower() or "ENOSPC" in l or "IO" in l]
    check("the gateway log shows the cache failure (no space)", nospc,
          "cache WARN/ERROR lines: %r" % fails[-10:])
    print("# log: %s" % "\n# log: ".join(nospc[-5:]), flush=True)
    check("cache_bytes never claims more than the 64 MiB disk holds", s["bytes"] <= 64 * MB, s)
    C.stop_cache("caching gateway exits 0 within 15 s of SIGTERM (grace 5 s)", timeout=15)


H.run(main)
