"""tests/integration/test_cold_rgw.py - shardgate in front of Ceph's RADOS
Gateway, the distributed S3 engine users run: a one-node Ceph 16 (Debian's
ceph-mon, ceph-osd, radosgw; one monitor, one memstore OSD, no manager) on
loopback, started and stopped by ceph_rgw.sh. Gateway B (a cache directory,
bucket "ckpt" written back) signs every call to RGW with SigV4, which RGW
verifies:
  * [read] objects put into RGW directly read through B byte for byte (a
    miss, then a hit that costs RGW nothing), ranges too, listings pass;
  * [write] through B into a write-through bucket: in RGW at the answer;
  * [wb] into the write-back bucket: PUTs, a 20 MiB boto3 upload_file (8
    MiB parts, concurrent) and DCP's rename (copy + delete of a temporary
    key) are acknowledged, read back from B, and after POST ?flush RGW holds
    every object byte for byte with the ETag B gave (the multipart one
    "md5-of-part-md5s-3", though RGW 16's CompleteMultipartUpload answer
    carries an empty ETag), and never the temporary key;
  * [order] a watcher polling RGW during the upload never sees the commit
    marker before the shards acknowledged before it.
Ceph's binaries come from .ci/deps.sh test; without them this test fails
(it does not skip: the suite promises a run against RGW)."""

import atexit
import hashlib
import os
import random
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cache_common as C  # noqa: E402
import harness as H  # noqa: E402

check, eq = H.check, H.eq
MB = H.MB
HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "ceph_rgw.sh")
ACCESS = "SGCEPHACCESSKEY00001"
SECRET = "sgceph/Secret+Key/0123456789abcdefghijklmn"
WB, PLAIN = "ckpt", "data"


class Rgw:
    def __init__(self):
        self.dir = None
        self.port = None

    def start(self):
        """An instance needs PORT..PORT+30: they are locked like every test
        server's port (harness.free_ports), below the kernel's ephemeral
        range, so neither another test's server nor a client connection's
        local port can take one between the script's check and the daemon's
        bind. Another tries only if something else took one anyway."""
        env = dict(os.environ, RGW_ACCESS_KEY=ACCESS, RGW_SECRET_KEY=SECRET,
                   PYTHON=sys.executable)
        out = ""
        for _ in range(3):
            self.dir = H.tmpdir("ceph")
            shutil.rmtree(self.dir)
            self.port = H.free_ports(31)
            p = subprocess.run(["bash", SCRIPT, "start", self.dir, str(self.port)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
            out = p.stdout.decode("utf-8", "replace")
            if p.returncode == 0:
                return True
            self.stop()
            if "in use" not in out:
                break
        # the script's own lines (why it stopped) first, then the daemons' logs
        said = [ln for ln in out.splitlines() if ln.startswith("ceph_rgw.sh:")]
        check("Ceph (mon, memstore OSD, radosgw) starts on 127.0.0.1 (ceph_rgw.sh)", False,
              "\n".join(said) + "\n" + out[-6000:])
        return False

    def stop(self):
        if self.dir:
            subprocess.run(["bash", SCRIPT, "stop", self.dir], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=120)

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.port

    def client(self):
        return H.boto3_client(endpoint=self.endpoint, access=ACCESS, secret=SECRET,
                              request_checksum_calculation="when_required")


def rgw_bytes(rgw_c, bucket, key):
    try:
        return rgw_c.get_object(Bucket=bucket, Key=key)["Body"].read()
    except Exception:   # noqa - absent
        return None


def reads(rgw, rc, b):
    objs = {"r/small": os.urandom(1000), "r/mid": os.urandom(3 * MB + 17),
            "r/big": os.urandom(24 * MB + 5)}
    for k, v in objs.items():
        rc.put_object(Bucket=PLAIN, Key=k, Body=v)
    gets0 = C.bm("shardgate_backend_requests_total", op="get") or 0
    bad = [k for k, v in objs.items() if b.get_object(Bucket=PLAIN, Key=k)["Body"].read() != v]
    eq("[read] objects in RGW read through B byte for byte (misses)", bad, [])
    gets1 = C.bm("shardgate_backend_requests_total", op="get") or 0
    bad = [k for k, v in objs.items() if b.get_object(Bucket=PLAIN, Key=k)["Body"].read() != v]
    eq("[read] ... and again (hits)", bad, [])
    gets2 = C.bm("shardgate_backend_requests_total", op="get") or 0
    check("[read] the misses read RGW, the hits did not", gets1 > gets0 and gets2 == gets1,
          (gets0, gets1, gets2))
    r = b.get_object(Bucket=PLAIN, Key="r/big", Range="bytes=%d-%d" % (20 * MB, 20 * MB + 99))
    eq("[read] a range", r["Body"].read(), objs["r/big"][20 * MB:20 * MB + 100])
    keys = [o["Key"] for o in b.list_objects_v2(Bucket=PLAIN, Prefix="r/")["Contents"]]
    eq("[read] ListObjectsV2 through B", sorted(keys), sorted(objs))
    b.put_object(Bucket=PLAIN, Key="w/through", Body=b"written through")
    eq("[write] a PUT into a write-through bucket is in RGW at its answer",
       rgw_bytes(rc, PLAIN, "w/through"), b"written through")


def write_back(rgw, rc, b):
    shards = {"step-1/__%d_0.distcp" % i: os.urandom(random.randint(1, 2 * MB))
              for i in range(6)}
    etags = {}
    for k, v in shards.items():
        etags[k] = b.put_object(Bucket=WB, Key=k, Body=v)["ETag"].strip('"')
    big = os.path.join(H.S.tmp, "big.bin")
    with open(big, "wb") as f:
        f.write(os.urandom(20 * MB + 333))
    from boto3.s3.transfer import TransferConfig
    b.upload_file(big, WB, "step-1/model.bin",
                  Config=TransferConfig(multipart_threshold=8 * MB, multipart_chunksize=8 * MB,
                                        max_concurrency=4))
    with open(big, "rb") as f:
        shards["step-1/model.bin"] = f.read()
    etags["step-1/model.bin"] = b.head_object(Bucket=WB, Key="step-1/model.bin")["ETag"].strip('"')
    check("[wb] the multipart object's ETag is md5-of-parts-3", etags["step-1/model.bin"]
          .endswith("-3"), etags["step-1/model.bin"])
    # DCP's commit: .metadata written to a temporary key, copied, deleted
    meta = os.urandom(4096)
    b.put_object(Bucket=WB, Key="step-1/.metadata.tmp", Body=meta)
    b.copy_object(Bucket=WB, Key="step-1/.metadata",
                  CopySource={"Bucket": WB, "Key": "step-1/.metadata.tmp"})
    b.delete_object(Bucket=WB, Key="step-1/.metadata.tmp")
    bad = [k for k, v in shards.items() if b.get_object(Bucket=WB, Key=k)["Body"].read() != v]
    eq("[wb] every write reads back from B at once", bad, [])

    seen_early = []
    stop = threading.Event()

    def watch():   # the commit marker must never come before the shards
        c = rgw.client()
        while not stop.is_set():
            try:
                c.head_object(Bucket=WB, Key="step-1/.metadata")
            except Exception:   # noqa - not there yet
                time.sleep(0.005)
                continue
            missing = [k for k in shards if rgw_bytes(c, WB, k) is None]
            if missing:
                seen_early.append(missing)
            return
    w = threading.Thread(target=watch)
    w.start()
    r = H.raw("POST", "/%s" % WB, "flush&timeout=120", timeout=180)
    stop.set()
    w.join(30)
    eq("[wb] POST ?flush: 200 once RGW has everything", r.status, 200, r.body[:300])
    eq("[order] RGW never showed .metadata before the shards", seen_early, [])
    bad = [k for k, v in shards.items() if rgw_bytes(rc, WB, k) != v]
    eq("[wb] RGW holds every object byte for byte", bad, [])
    eq("[wb] ... and .metadata", rgw_bytes(rc, WB, "step-1/.metadata"), meta)
    got = {k: rc.head_object(Bucket=WB, Key=k)["ETag"].strip('"') for k in etags}
    eq("[wb] RGW's ETags are the ones B gave (the multipart one too)", got, etags)
    eq("[wb] ... its parts went unhashed: RGW's part ETags made the multipart one "
       "(shardgate_writeback_upload_hashed_bytes_total)",
       C.bm("shardgate_writeback_upload_hashed_bytes_total"), 0.0)
    eq("[wb] the rename's temporary key never reached RGW",
       rgw_bytes(rc, WB, "step-1/.metadata.tmp"), None)
    # a cold read back through B of what write-back uploaded
    eq("[wb] read back through B after the upload",
       hashlib.sha256(b.get_object(Bucket=WB, Key="step-1/model.bin")["Body"].read()).digest(),
       hashlib.sha256(shards["step-1/model.bin"]).digest())


def main():
    C.need_clients()
    C.init("test_cold_rgw")
    atexit.register(C.stop_all)
    rgw = Rgw()
    atexit.register(rgw.stop)
    if not rgw.start():
        H.finish()
    rc = rgw.client()
    for bkt in (WB, PLAIN):
        rc.create_bucket(Bucket=bkt)
    cfg = C.Cache(rgw.endpoint, ACCESS, SECRET, size="256MiB",
                  config={"buckets": {WB: {"write": "back"}}}, tag="rgw")
    C.start_cache(cfg)
    b = H.boto3_client(endpoint=H.S.endpoint)
    reads(rgw, rc, b)
    write_back(rgw, rc, b)
    C.stop_cache()
    rgw.stop()
    rgw.dir = None


if __name__ == "__main__":
    H.run(main)
