"""tests/integration/test_cold_spool.py - uploads to an S3 cold tier are
spooled to spool_dir until their body verified (issue 10, leftovers): the
spool file has no name (O_TMPFILE, or unlinked right after it is made), so
nothing is left in spool_dir when the gateway is killed with SIGKILL in the
middle of uploads. While two uploads are half sent, the gateway holds two
deleted files in spool_dir open and the directory lists nothing; after
kill -9 it still lists nothing. (69019cc already behaved so: this guards it.)
"""

import atexit
import http.client
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cache_common as C  # noqa: E402
import harness as H  # noqa: E402

check, eq = H.check, H.eq
MB = H.MB


def spool_fds(pid, spool):
    """Descriptors of pid that point into spool (readlink text)."""
    out = []
    d = "/proc/%d/fd" % pid
    for fd in os.listdir(d):
        try:
            t = os.readlink(os.path.join(d, fd))
        except OSError:
            continue
        if t.startswith(spool + "/"):
            out.append(t)
    return out


def half_put(key, size):
    """Starts a signed PUT of `size` bytes and sends half of it; returns the connection."""
    path = "/spool/%s" % key
    hdrs = H.sign_headers("PUT", "http://127.0.0.1:%d%s" % (H.S.port, path),
                          {"Content-Length": str(size)}, b"", payload_hash="UNSIGNED-PAYLOAD")
    c = http.client.HTTPConnection("127.0.0.1", H.S.port, timeout=30)
    c.putrequest("PUT", path, skip_accept_encoding=True)
    for k, v in hdrs.items():
        if k.lower() != "host":
            c.putheader(k, v)
    c.endheaders()
    c.send(os.urandom(size // 2))
    return c


def main():
    C.need_clients()
    C.init("test_cold_spool")
    atexit.register(C.stop_all)
    a = C.ColdGateway().start()
    a.client().create_bucket(Bucket="spool")
    spool = H.tmpdir("spool")
    cfg = C.Cache(a.endpoint, a.access, a.secret, tag="spool", config={"spool_dir": spool})
    C.start_cache(cfg)
    pid = H.S.proc.pid
    # one complete upload first: the spool works at all
    H.boto3_client().put_object(Bucket="spool", Key="whole", Body=b"w" * 100000)
    eq("a complete upload reached the cold tier",
       a.client().head_object(Bucket="spool", Key="whole")["ContentLength"], 100000)
    eq("after it, spool_dir is empty", os.listdir(spool), [])

    conns = [half_put("half-%d" % i, 8 * MB) for i in range(2)]
    fds = C.wait_until(lambda: (lambda f: f if len(f) >= 2 else None)(spool_fds(pid, spool)),
                       20)
    check("two uploads half sent: the gateway holds two spool files open", fds,
          spool_fds(pid, spool))
    check("... both without a name (deleted)", fds and all(t.endswith("(deleted)") for t in fds),
          fds)
    eq("... and spool_dir lists nothing", os.listdir(spool), [])
    C.kill9_cache()
    for c in conns:
        c.close()
    time.sleep(0.2)
    eq("after kill -9 mid-upload, spool_dir is empty", os.listdir(spool), [])
    check("the half-sent uploads never reached the cold tier",
          not os.path.exists(a.path("spool", "half-0")) and
          not os.path.exists(a.path("spool", "half-1")))
    a.stop()


H.run(main)
