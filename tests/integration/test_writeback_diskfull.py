"""tests/integration/test_writeback_diskfull.py - write-back on a full disk:
gateway B's cache directory (where write-back stages and journals) is a
16 MiB tmpfs, its cold tier A (a cold shardgate behind throttle.py) cut off
so nothing drains:
  * boto3 PUTs of 64 KiB into the write-back bucket succeed until the disk
    is full (a few hundred: more DONE records than the slack of the
    journal's last page could hold), then answer 507 InsufficientStorage (a clear error, not a 500);
  * every acknowledged write reads back from B byte for byte, also after the
    rest of the disk is filled to the last byte and B is killed -9 and
    restarted on it;
  * with A back, a flush uploads everything: A holds each acknowledged
    object byte for byte, and none that was refused;
  * the DONE records of those uploads were journaled on the full disk (the
    journal keeps their space preallocated; a hog thread takes every block
    an upload frees, so no DONE finds a free block): a restart after the
    flush finds nothing pending and sends nothing again;
  * with space back, writes are accepted again.
Needs root to mount a tmpfs: exit 77 otherwise."""

import atexit
import hashlib
import json
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
B = "ckpt"
CONFIG = {"buckets": {B: {"write": "back"}}, "shutdown_grace_s": 5}


def client():
    return H.boto3_client(endpoint=H.S.endpoint)


def status():
    r = H.raw("GET", "/%s" % B, "writeback")
    return json.loads(r.body) if r.status == 200 else {"status": r.status}


def fill(path):
    """Writes zeros into path until the disk refuses; the bytes written."""
    n = 0
    with open(path, "wb", buffering=0) as f:
        chunk = b"\0" * (256 * 1024)
        while True:
            try:
                n += f.write(chunk)
            except OSError:
                break
        small = b"\0" * 512
        while True:
            try:
                n += f.write(small)
            except OSError:
                return n


def main():
    C.need_clients()
    C.init("test_writeback_diskfull")
    mnt = C.small_disk("wbdisk", "16m")
    cold = C.ColdGateway().start()
    cold.client().create_bucket(Bucket=B)
    thr = throttle.ThrottleProcess("127.0.0.1", cold.port).start()
    atexit.register(thr.stop)
    cfg = C.Cache("http://127.0.0.1:%d" % thr.port, C.COLD_ACCESS, C.COLD_SECRET,
                  cache_dir=os.path.join(mnt, "cache"), size="8MiB", config=CONFIG,
                  tag="wbfull")
    os.makedirs(cfg.cache_dir)
    C.start_cache(cfg)
    thr.refuse()

    c = client()
    acked, refused = {}, None
    for i in range(600):   # 37.5 MiB offered to a 16 MiB disk
        k = "full/%03d" % i
        v = os.urandom(64 * 1024)
        try:
            c.put_object(Bucket=B, Key=k, Body=v)
            acked[k] = v
        except Exception as e:   # noqa - the refusal is what this test wants
            refused = (k, getattr(e, "response", {}))
            break
    check("[full] writes are acknowledged until the disk is full (%d of 64 KiB)" % len(acked),
          len(acked) >= 100 and refused is not None, len(acked))
    resp = (refused or (None, {}))[1] or {}
    eq("[full] then a write answers 507 InsufficientStorage",
       (resp.get("ResponseMetadata", {}).get("HTTPStatusCode"),
        resp.get("Error", {}).get("Code")), (507, "InsufficientStorage"))
    check("[full] the gateway stays healthy", H.health() == 200)

    filler = os.path.join(mnt, "filler")
    fill(filler)
    st = os.statvfs(mnt)
    eq("[full] the disk is then filled to the last block", st.f_bavail, 0)
    C.kill9_cache()
    C.start_cache(cfg, port=cfg.port)
    c = client()
    bad = [k for k, v in acked.items() if c.get_object(Bucket=B, Key=k)["Body"].read() != v]
    eq("[full] after kill -9 and a restart on the full disk, every acknowledged write reads "
       "back", bad, [])
    eq("[full] ... and is pending", status().get("pending", {}).get("objects"), len(acked))

    # while the uploads run, a hog takes every block they free, so each
    # upload's DONE record is appended to a disk with no free block
    stop = threading.Event()

    def hog():
        with open(os.path.join(mnt, "hog"), "wb", buffering=0) as f:
            while not stop.is_set():
                try:
                    f.write(b"\0" * 4096)
                except OSError:
                    time.sleep(0.0005)
    h = threading.Thread(target=hog)
    h.start()
    thr.restore()
    r = H.raw("POST", "/%s" % B, "flush&timeout=120", timeout=180)
    stop.set()
    h.join(10)
    eq("[flush] with the cold tier back, a flush on the full disk: 200", r.status, 200,
       r.body[:300])
    bad = []
    for k, v in acked.items():
        p = cold.path(B, k)
        if not os.path.exists(p) or hashlib.sha256(open(p, "rb").read()).digest() != \
                hashlib.sha256(v).digest():
            bad.append(k)
    eq("[flush] the cold tier holds every acknowledged object byte for byte", bad, [])
    check("[flush] ... and not the refused one", not os.path.exists(cold.path(B, refused[0])))

    puts_before = C.metric_sum(cold.metrics(), "shardgate_requests_total", op="PutObject") or 0
    C.stop_cache("[restart] B exits 0 on SIGTERM", timeout=30)
    C.start_cache(cfg, port=cfg.port)
    s = status()
    eq("[restart] after the flush and a restart: nothing pending (the DONE records were "
       "written on the full disk)", (s.get("pending", {}).get("objects"),
                                     s.get("upload_failures")), (0, 0), s)
    check("[restart] ... nothing sent again",
          C.wait_until(lambda: (C.metric_sum(cold.metrics(), "shardgate_requests_total",
                                             op="PutObject") or 0) == puts_before, 2) is not None,
          puts_before)

    os.unlink(filler)
    os.unlink(os.path.join(mnt, "hog"))
    v = os.urandom(MB)
    c.put_object(Bucket=B, Key="after", Body=v)
    eq("[space] with space back, writes are accepted again",
       c.get_object(Bucket=B, Key="after")["Body"].read() == v, True)
    C.stop_cache()
    cold.stop()


if __name__ == "__main__":
    H.run(main)
