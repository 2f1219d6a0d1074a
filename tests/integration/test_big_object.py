"""tests/integration/test_big_object.py - a 2 GiB object up and down through
boto3's managed transfer (multipart, 64 MiB parts), compared by sha256,
while the gateway's peak RSS (VmHWM) must stay under 200 MiB: the gateway
streams, it does not buffer objects or parts. Shardgate-only; takes a few
minutes. SHARDGATE_SKIP_BIG=1 skips it (exit 77)."""

import os
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

MB = H.MB
SIZE = int(os.environ.get("SHARDGATE_BIG_SIZE", str(2048 * MB)))
RSS_LIMIT_KB = 200 * 1024


class RssSampler(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.peak_rss = 0

    def run(self):
        while not self.stop.is_set():
            v = H.proc_status("VmRSS")
            if v:
                self.peak_rss = max(self.peak_rss, v)
            self.stop.wait(0.2)


def main():
    if os.environ.get("SHARDGATE_SKIP_BIG") == "1":
        H.skip_file("SHARDGATE_SKIP_BIG=1")
    if not H.is_shardgate():
        H.skip_file("shardgate-only (measures the gateway's RSS); SHARDGATE_TEST_ENDPOINT is set")
    try:
        import boto3  # noqa: F401
        from boto3.s3.transfer import TransferConfig
    except ImportError:
        H.skip_file("boto3 is not installed for %s" % sys.executable)
    H.start("test_big_object")
    d = H.tmpdir("big")
    st = os.statvfs(d)
    if st.f_bavail * st.f_frsize < 3 * SIZE + 1024 * MB:
        H.check("enough disk for the big-object test (3x %d MiB)" % (SIZE // MB), False,
                "%d MiB free in %s" % (st.f_bavail * st.f_frsize // MB, d))
        return
    up, down = os.path.join(d, "up.bin"), os.path.join(d, "down.bin")
    t0 = time.time()
    want = H.write_random_file(up, SIZE)
    print("# wrote %d MiB in %.1fs" % (SIZE // MB, time.time() - t0), flush=True)
    c = H.boto3_client()
    b = "sg-big-%s" % uuid.uuid4().hex[:8]
    c.create_bucket(Bucket=b)
    cfg = TransferConfig(multipart_threshold=64 * MB, multipart_chunksize=64 * MB,
                         max_concurrency=4)
    base = H.proc_status("VmHWM")
    sampler = RssSampler()
    sampler.start()
    try:
        t0 = time.time()
        c.upload_file(up, b, "big.bin", Config=cfg)
        t1 = time.time()
        hwm_up = H.proc_status("VmHWM")
        h = c.head_object(Bucket=b, Key="big.bin")
        parts = SIZE // (64 * MB) + (1 if SIZE % (64 * MB) else 0)
        H.eq("2 GiB object: size", h["ContentLength"], SIZE)
        H.check("2 GiB object: multipart ETag with %d parts" % parts,
                h["ETag"].endswith('-%d"' % parts), h["ETag"])
        os.unlink(up)
        t2 = time.time()
        c.download_file(b, "big.bin", down, Config=cfg)
        t3 = time.time()
        H.eq("2 GiB download sha256", H.sha256_file(down), want)
        os.unlink(down)
    finally:
        sampler.stop.set()
        sampler.join(5)
    hwm = H.proc_status("VmHWM")
    print("# upload %.1fs (%.0f MiB/s), download %.1fs (%.0f MiB/s)"
          % (t1 - t0, SIZE / MB / max(t1 - t0, 0.001), t3 - t2, SIZE / MB / max(t3 - t2, 0.001)),
          flush=True)
    print("# gateway VmHWM: start %s KiB, after upload %s KiB, end %s KiB; sampled peak VmRSS %d KiB"
          % (base, hwm_up, hwm, sampler.peak_rss), flush=True)
    H.check("gateway peak RSS (VmHWM) stays under 200 MiB", hwm is not None and hwm < RSS_LIMIT_KB,
            "VmHWM %s KiB" % hwm)
    c.delete_object(Bucket=b, Key="big.bin")
    c.delete_bucket(Bucket=b)


H.run(main)
