"""tests/integration/test_cache_seccomp.py - the cache where io_uring is
blocked, as Docker's default seccomp profile (Engine >= 25) and many
Kubernetes runtimes block it. The caching gateway B runs under
seccomp_exec.py (io_uring_setup/enter/register answer EPERM) in front of a
cold shardgate A; then:
  * one log line says which engine runs (pread/pwrite, and why), /metrics
    says shardgate_cache_engine{engine="threads"} 1, and no fill worker
    complains;
  * a GET fills (a miss, one cold GET) and the second GET is a hit: same
    bytes, hits_total +1, the cold tier's GetObject count unchanged;
  * ranges of a cached object are served from the cache (206, right bytes,
    no cold GET); a range of a cold object is right;
  * four concurrent readers of one cold object share one fill (one cold GET);
  * a prefetch job stages every object (staged = total, failed = 0, no
    errors), and reading them afterwards costs no cold GET;
  * with cache.engine "io_uring" forced under the same filter the start is
    refused with a message that says so (the switch is honoured).
On 69019cc the same gateway logged "fill worker cannot start: io_uring
Operation not permitted" eight times, sent every GET to the cold tier and
failed every prefetch object as EntityTooLarge.
Needs Debian's python3-seccomp for /usr/bin/python3 (.ci/deps.sh test)."""

import os
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import atexit  # noqa: E402

import cache_common as C  # noqa: E402
import harness as H  # noqa: E402
import prefetch_common as P  # noqa: E402

check, eq = H.check, H.eq
MB = H.MB
HERE = os.path.dirname(os.path.abspath(__file__))
WRAP = ["/usr/bin/python3", os.path.join(HERE, "seccomp_exec.py")]


def have_seccomp():
    r = subprocess.run(["/usr/bin/python3", "-c", "import seccomp"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return r.returncode == 0, r.stdout.decode("utf-8", "replace").strip()


def main():
    C.need_clients()
    C.init("test_cache_seccomp")
    ok, why = have_seccomp() if os.path.exists("/usr/bin/python3") else (False, "no python3")
    if not ok:
        H.skip_file("needs python3-seccomp for /usr/bin/python3 (.ci/deps.sh test): %s" % why)
    atexit.register(C.stop_all)

    cold = C.ColdGateway().start()
    b = "noiouring"
    cc = cold.client()
    cc.create_bucket(Bucket=b)
    obj = os.urandom(3 * MB + 777)
    big = os.urandom(6 * MB + 5)
    other = os.urandom(2 * MB + 3)
    cc.put_object(Bucket=b, Key="obj", Body=obj)
    cc.put_object(Bucket=b, Key="big", Body=big)
    cc.put_object(Bucket=b, Key="other", Body=other)
    shards = {"train/shard-%03d.tar" % i: os.urandom(256 * 1024 + i) for i in range(8)}
    for k, v in shards.items():
        cc.put_object(Bucket=b, Key=k, Body=v)

    wb = "wbnoiouring"
    cc.create_bucket(Bucket=wb)

    # the default engine setting ("auto"): what a user runs in a container
    cfg = C.Cache(cold.endpoint, cold.access, cold.secret, size="64MiB", wrap=WRAP,
                  tag="seccomp", config={"buckets": {wb: {"write": "back"}}})
    C.start_cache(cfg)

    # --- which engine runs, said once
    lines = H.log_grep("cache engine:")
    eq("one log line names the engine", len(lines), 1)
    check("the engine is pread/pwrite because io_uring is refused",
          lines and "cache engine: pread/pwrite (io_uring unavailable: Operation not "
          "permitted (EPERM))" in lines[0], lines)
    eq("no fill worker failed to start", H.log_grep("fill worker cannot start"), [])
    eq("/metrics: shardgate_cache_engine{engine=\"threads\"} 1",
       C.bm("shardgate_cache_engine", engine="threads"), 1.0)
    eq("/metrics: no io_uring engine series",
       C.metric_sum(C.bm(), "shardgate_cache_engine", engine="io_uring"), None)

    # --- a fill, then a hit
    s0, g0 = C.bstats(), cold.gets()
    r1 = C.bget("/%s/obj" % b)
    eq("first GET 200", r1.status, 200)
    eq("first GET bytes", r1.sha, H.sha256(obj))
    check("the fill is published", C.wait_until(lambda: C.bstats()["objects"] >= 1, 15))
    s1, g1 = C.bstats(), cold.gets()
    eq("first GET is a miss", s1["misses"] - s0["misses"], 1)
    eq("first GET: one cold GET", g1 - g0, 1)
    eq("no fill failed", s1["fills_failed"], 0)
    r2 = C.bget("/%s/obj" % b)
    s2, g2 = C.bstats(), cold.gets()
    eq("second GET bytes", r2.sha, H.sha256(obj))
    eq("second GET is a hit", s2["hits"] - s1["hits"], 1)
    eq("second GET: no cold GET", g2 - g1, 0)

    # --- ranges: of the cached object (from the cache), of a cold one
    r = C.request(H.S.port, "GET", "/%s/obj" % b, headers={"Range": "bytes=1000-1999999"})
    eq("range of a cached object: 206", r.status, 206)
    eq("range of a cached object: bytes", H.sha256(r.body), H.sha256(obj[1000:2000000]))
    eq("range of a cached object: Content-Range", r.header("content-range"),
       "bytes 1000-1999999/%d" % len(obj))
    r = C.request(H.S.port, "GET", "/%s/obj" % b, headers={"Range": "bytes=-100"})
    eq("suffix range of a cached object: bytes", r.body, obj[-100:])
    eq("ranges of a cached object: no cold GET", cold.gets() - g2, 0)
    r = C.request(H.S.port, "GET", "/%s/other" % b, headers={"Range": "bytes=1048570-1048600"})
    eq("range of a cold object: 206", r.status, 206)
    eq("range of a cold object: bytes", r.body, other[1048570:1048601])

    # --- single flight on the fallback engine
    check("the cold range's fill is published",
          C.wait_until(lambda: C.bstats()["objects"] >= 2, 15))
    g3 = cold.gets()
    got = [None] * 4

    def reader(i):
        got[i] = C.bget("/%s/big" % b)
    ts = [threading.Thread(target=reader, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    eq("four concurrent readers: all 200 with the right bytes",
       [(g.status, g.sha) for g in got], [(200, H.sha256(big))] * 4)
    eq("four concurrent readers: one cold GET", cold.gets() - g3, 1)

    # --- a prefetch job stages everything
    a = P.hint(b, {"keys": sorted(shards)})
    eq("prefetch hint accepted (202)", a.status, 202)
    jid = (a.json or {}).get("job", "")
    pol = P.Poller(b, jid, "prefetch under seccomp")
    j = pol.wait(timeout=60) or {}
    pol.check()
    eq("prefetch job done", j.get("state"), "done")
    o = j.get("objects") or {}
    eq("prefetch job: every object staged, none failed",
       (o.get("total"), o.get("staged"), o.get("failed")), (8, 8, 0))
    eq("prefetch job: no errors (none of them EntityTooLarge)", j.get("errors"), [])
    g4, h4 = cold.gets(), C.bstats()["hits"]
    for k, v in sorted(shards.items()):
        r = C.bget("/%s/%s" % (b, k))
        if not eq("staged %s read back" % k, (r.status, r.sha), (200, H.sha256(v))):
            break
    eq("reading the staged objects: all hits", C.bstats()["hits"] - h4, 8)
    eq("reading the staged objects: no cold GET", cold.gets() - g4, 0)

    # --- write-back stages its bodies with write() (io_uring is refused)
    ckpt = os.urandom(3 * MB + 11)
    bc = H.boto3_client(endpoint=H.S.endpoint)
    bc.put_object(Bucket=wb, Key="ckpt.bin", Body=ckpt)
    eq("write-back PUT of 3 MiB under the filter reads back",
       bc.get_object(Bucket=wb, Key="ckpt.bin")["Body"].read() == ckpt, True)
    staged = {how: C.bm("shardgate_writeback_staged_bytes_total", how=how)
              for how in ("direct", "uring", "write")}
    eq("... staged with write(), no io_uring (shardgate_writeback_staged_bytes_total)",
       staged, {"direct": 0.0, "uring": 0.0, "write": float(len(ckpt))})
    eq("... one log line says the staged writes use write()",
       len(H.log_grep("staged writes use write()")), 1)
    r = H.raw("POST", "/%s" % wb, "flush&timeout=30")
    eq("... flushed to the cold tier", r.status, 200)
    eq("... byte for byte", cc.get_object(Bucket=wb, Key="ckpt.bin")["Body"].read() == ckpt,
       True)
    C.stop_cache()

    # --- io_uring forced where it does not work: refused, with the reason
    forced = C.Cache(cold.endpoint, cold.access, cold.secret, size="64MiB", wrap=WRAP,
                     config={"cache": {"engine": "io_uring"}}, tag="forced")
    started = C.start_cache(forced, expect_ok=False)
    check("cache.engine io_uring under the filter: the start is refused", not started)
    p = H.S.proc
    if p is not None:
        try:
            rc = p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait(10)
        H.S.proc = None
        check("... and the process exits non-zero", rc not in (0, None), rc)
    check("... the log says io_uring is forced and does not work",
          H.log_grep('cache.engine is \\"io_uring\\" but io_uring does not work here: '
                     'Operation not permitted (EPERM)'), H.log_tail(10))
    cold.stop()


if __name__ == "__main__":
    H.run(main)
