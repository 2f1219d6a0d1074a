"""tests/integration/test_writeback.py - checkpoint absorption: a bucket with
"write": "back" on a caching gateway B in front of a cold shardgate A (a
directory store, reached through throttle.py so the test can slow it down
or cut it off). Real clients (boto3: put_object, upload_file as a
concurrent multipart upload, copy_object + delete_object as PyTorch DCP's
rename), checks on A's own directory:
  * [ack] every write answers while A is cut off (nothing waits for the cold
    tier), and reads, HEADs and listings see it at once (read your writes);
  * [order] with A reachable again at 8 MB/s, a thread watching A's
    directory never sees an object before every object acknowledged earlier
    (DCP's .metadata, written last, never before the shards);
  * [flush] POST ?flush answers 200 when all is uploaded; A then holds every
    object byte for byte with the ETag the client was given (the multipart
    one too), and never the temporary key of the rename; GET ?writeback and
    /metrics say nothing is pending;
  * [restart] writes acknowledged while A is cut off survive kill -9 of B:
    after the restart they are read from B, pending, and reach A by flush;
  * [kill9] 30 loops of kill -9: of B while a writer streams PUTs, of B
    while uploads to a slowed A are under way, and of A itself mid-upload
    (restarted): every object acknowledged before the kill is in A after the
    restart and a flush, byte for byte;
  * [through] x-shardgate-write: through answers only once A has the object;
    with A cut off it answers 503 after write_back.through_timeout_ms and
    the key is not written;
  * [clients] aws-cli v1 and v2 `s3 cp`, Debian's older boto3 and curl
    --aws-sigv4 write with A cut off; after the flush A holds their bytes
    with the ETags B gave;
  * [parts] a multipart object's parts go unhashed; the complete waits
    until the cold tier's part ETags make the client's ETag: a part damaged
    on the way is sent again, a staged copy changed on the disk is refused
    (BAD_DIGEST) and hashed only once;
  * [big] 1 GiB checkpoint files by boto3's upload_file (its defaults) and
    Debian's older boto3, with A cut off: byte for byte in A after the flush;
  * [tags] PutObjectTagging of pending objects answers at once with A cut off,
    GetObjectTagging shows the tags, and A has them after the flush;
  * [prefixes] "write": {"ckpt/": "back"}: only those keys are written
    back, the rest of the bucket through; uploads of both are listed as one;
  * [capacity] pending writes and parts of open uploads count against the
    cache's capacity: fills evict cached objects until all of them fit;
  * [ready] /_shardgate/ready names the writes waiting for the cold tier;
  * [cli] `shardgate flush` shows what is pending (exit 1), gives up at its
    --timeout while A is cut off (exit 1), and waits until it is flushed;
  * [conf] "write": "back" without a cache directory is refused at start,
    with the reason.
"""

import atexit
import hashlib
import json
import os
import random
import subprocess
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
M = "train"   # written back under ckpt/ only
CONFIG = {"buckets": {B: {"write": "back"}, M: {"write": {"ckpt/": "back"}}},
          "write_back": {"through_timeout_ms": 1500}}


def client():
    return H.boto3_client(endpoint=H.S.endpoint)


def flush(timeout=60, prefix=None):
    q = "flush&timeout=%d" % timeout + ("&prefix=%s" % prefix if prefix else "")
    r = H.raw("POST", "/%s" % B, q)
    return r.status, (json.loads(r.body) if r.body else {})


def status():
    r = H.raw("GET", "/%s" % B, "writeback")
    return json.loads(r.body) if r.status == 200 else {"status": r.status}


def cold_file(cold, key, bucket=B):
    p = cold.path(bucket, key)
    try:
        with open(p, "rb") as f:
            return f.read()
    except OSError:
        return None


def cold_etag(cold, key):
    try:
        return cold.client().head_object(Bucket=B, Key=key)["ETag"].strip('"')
    except Exception:   # noqa
        return None


def start_b(cold_port):
    cfg = C.Cache("http://127.0.0.1:%d" % cold_port, C.COLD_ACCESS, C.COLD_SECRET,
                  config=CONFIG, tag="wb")
    C.start_cache(cfg)
    return cfg


def restart_b(cfg):
    C.start_cache(cfg, port=cfg.port)


def ack_order_flush(cold, thr, cfg):
    c = client()
    thr.refuse()   # A cut off: nothing below may wait for it
    objs, order = {}, []
    t0 = time.time()
    for rank in range(4):
        for n in range(4):
            key = "step-100/__%d_%d.distcp" % (rank, n)
            objs[key] = os.urandom(random.randint(64 * 1024, 512 * 1024))
            c.put_object(Bucket=B, Key=key, Body=objs[key])
            order.append(key)
    # a multipart upload (boto3's upload_file: 5 MiB parts, concurrent)
    big = os.urandom(12 * MB + 12345)
    path = os.path.join(H.S.tmp, "big.bin")
    with open(path, "wb") as f:
        f.write(big)
    from boto3.s3.transfer import TransferConfig
    c.upload_file(path, B, "step-100/optim.bin",
                  Config=TransferConfig(multipart_threshold=5 * MB, multipart_chunksize=5 * MB,
                                        max_concurrency=4))
    objs["step-100/optim.bin"] = big
    order.append("step-100/optim.bin")
    staged = {how: C.bm("shardgate_writeback_staged_bytes_total", how=how)
              for how in ("direct", "uring", "write")}
    check("[stage] the 5 MiB parts were staged through io_uring with O_DIRECT, the small "
          "puts with write() (shardgate_writeback_staged_bytes_total %r)" % staged,
          staged["direct"] >= 12 * MB - 3 * 4096 and staged["uring"] == 0
          and staged["write"] >= sum(len(v) for k, v in objs.items() if k != "step-100/optim.bin"))
    # DCP's commit: .metadata via a temporary key, copy + delete
    meta = json.dumps({"step": 100, "files": sorted(objs)}).encode()
    c.put_object(Bucket=B, Key="step-100/.metadata.tmp", Body=meta)
    c.copy_object(Bucket=B, Key="step-100/.metadata",
                  CopySource={"Bucket": B, "Key": "step-100/.metadata.tmp"})
    c.delete_object(Bucket=B, Key="step-100/.metadata.tmp")
    objs["step-100/.metadata"] = meta
    order.append("step-100/.metadata")
    took = time.time() - t0
    check("[ack] %d writes acknowledged with the cold tier cut off (%.1f s)" % (len(objs), took),
          took < 60)

    ok = all(c.get_object(Bucket=B, Key=k)["Body"].read() == v for k, v in objs.items())
    check("[ack] every object reads back at once from B", ok)
    h = c.head_object(Bucket=B, Key="step-100/optim.bin")
    check("[ack] the multipart object's ETag is S3's (md5 of part md5s, -3)",
          h["ETag"].strip('"').endswith("-3"), h["ETag"])
    big_etag = h["ETag"].strip('"')
    check("[ack] nothing is in the cold tier yet",
          not any(cold_file(cold, k) is not None for k in objs))
    st = status()
    eq("[ack] ?writeback: pending objects (16 + 1 + put/copy/delete of the rename)",
       st.get("pending", {}).get("objects"), len(objs) + 2)
    check("[ack] shardgate_writeback_dirty_bytes counts them",
          C.bm("shardgate_writeback_dirty_bytes") >= sum(len(v) for v in objs.values()))
    r, body = flush(timeout=1)
    eq("[ack] flush with the cold tier cut off: 202 after its timeout", (r, body.get("flushed")),
       (202, False))
    # tags of pending objects change on B at once, and follow them to A
    t0 = time.time()
    for k in ("step-100/optim.bin", "step-100/__0_0.distcp"):
        c.put_object_tagging(Bucket=B, Key=k,
                             Tagging={"TagSet": [{"Key": "state", "Value": "final"}]})
    check("[tags] PutObjectTagging of two pending objects with the cold tier cut off: "
          "answered at once (%.2f s)" % (time.time() - t0), time.time() - t0 < 5)
    eq("[tags] ... and GetObjectTagging shows them",
       c.get_object_tagging(Bucket=B, Key="step-100/optim.bin")["TagSet"],
       [{"Key": "state", "Value": "final"}])

    # [order]: A back, slowly; a watcher polls A's directory meanwhile
    thr.set_rate(down_rate=None, up_rate=8e6)
    thr.restore()
    # a listing merges the pending writes with the cold tier's page, whatever
    # has been uploaded by now
    keys = [o["Key"] for o in c.list_objects_v2(Bucket=B, Prefix="step-100/").get("Contents", [])]
    eq("[ack] the listing during the upload shows every object once, not the renamed "
       "temporary", sorted(keys), sorted(objs))
    violations, snapshots, stop = [], [0], threading.Event()

    def watch():
        while not stop.is_set():
            seen = [k for k in order if os.path.exists(cold.path(B, k))]
            snapshots[0] += 1
            # visible keys must be a prefix of the acknowledgement order
            if seen != order[:len(seen)]:
                violations.append(seen)
            time.sleep(0.002)
    w = threading.Thread(target=watch)
    w.start()
    r, body = flush(timeout=120)
    stop.set()
    w.join()
    eq("[flush] POST ?flush: 200, flushed", (r, body.get("flushed")), (200, True))
    check("[order] the cold tier never showed an object before an earlier one (%d looks)"
          % snapshots[0], not violations and snapshots[0] > 10, violations[:2])
    bad = [k for k, v in objs.items() if cold_file(cold, k) != v]
    eq("[flush] the cold tier holds every object byte for byte", bad, [])
    eq("[flush] the multipart object has the ETag the client was given",
       cold_etag(cold, "step-100/optim.bin"), big_etag)
    check("[flush] the rename's temporary key never reached the cold tier",
          cold_file(cold, "step-100/.metadata.tmp") is None)
    cc = cold.client()
    eq("[tags] the tags put while pending are in the cold tier after the flush",
       [cc.get_object_tagging(Bucket=B, Key=k)["TagSet"]
        for k in ("step-100/optim.bin", "step-100/__0_0.distcp")],
       [[{"Key": "state", "Value": "final"}]] * 2)
    st = status()
    eq("[flush] ?writeback: nothing pending", st.get("pending", {}).get("objects"), 0)
    eq("[flush] shardgate_writeback_dirty_objects 0",
       C.bm("shardgate_writeback_dirty_objects"), 0.0)
    check("[flush] shardgate_writeback_uploaded_bytes_total counts the uploads",
          C.bm("shardgate_writeback_uploaded_bytes_total") >= sum(len(v) for v in objs.values()))
    eq("[flush] every upload was sent from its staged file, none copied through a buffer "
       "(shardgate_writeback_upload_copied_bytes_total)",
       C.bm("shardgate_writeback_upload_copied_bytes_total"), 0.0)
    eq("[flush] ... and no byte hashed again: the cold tier's part ETags made the multipart "
       "ETag (shardgate_writeback_upload_hashed_bytes_total)",
       C.bm("shardgate_writeback_upload_hashed_bytes_total"), 0.0)
    direct = "shardgate_backend_direct_read_bytes_total"
    check("[flush] ... read from the staged files around the page cache, as they were "
          "written (%s: upload %d, object reads %d)" % (direct, C.bm(direct, of="upload"),
                                                       C.bm(direct, of="object")),
          C.bm(direct, of="upload") >= len(objs["step-100/optim.bin"]) and
          C.bm(direct, of="object") > 0)
    time.sleep(1.1)   # the upload's last second is a full one now
    rate = status().get("uploaded", {}).get("bytes_per_s")
    check("[flush] ?writeback tells the upload rate of the last 10 s (bytes_per_s)",
          isinstance(rate, int) and rate > 0, rate)
    thr.set_rate(down_rate=None, up_rate=None)


def restart(cold, thr, cfg):
    c = client()
    thr.refuse()
    objs = {"restart/%02d" % i: os.urandom(random.randint(1, 300 * 1024)) for i in range(10)}
    for k, v in objs.items():
        c.put_object(Bucket=B, Key=k, Body=v)
    C.kill9_cache()
    restart_b(cfg)
    c = client()
    ok = all(c.get_object(Bucket=B, Key=k)["Body"].read() == v for k, v in objs.items())
    check("[restart] after kill -9, every acknowledged write reads back from B", ok)
    st = status()
    eq("[restart] ... and is pending", st.get("pending", {}).get("objects"), len(objs))
    check("[restart] ... with the cold tier's failure reported",
          C.wait_until(lambda: status().get("upload_failures", 0) >= 1, 20), status())
    r = H.raw("GET", "/_shardgate/ready", sign=False)
    body = r.body.decode(errors="replace")
    check("[ready] readiness with the cold tier cut off: 503, and the pending writes named",
          r.status == 503 and "write-back: WAITING for the cold tier - 10 writes" in body, body)
    # shardgate flush: the status (exit 1 while writes are pending), a wait
    # that gives up at its --timeout (exit 1), then a wait that ends (exit 0)
    env = dict(os.environ, AWS_ACCESS_KEY_ID=H.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=H.SECRET_KEY)
    cli = [os.environ["SHARDGATE_BIN"], "flush", "--endpoint", H.S.endpoint]
    p = subprocess.run(cli + ["s3://%s/restart/" % B], capture_output=True, text=True,
                       timeout=60, env=env)
    eq("[cli] shardgate flush: exit 1 and the count while writes are pending",
       (p.returncode, p.stdout.startswith("pending 10 objects")), (1, True), p.stdout + p.stderr)
    p = subprocess.run(cli + ["--wait", "--timeout", "3", "s3://%s/restart/" % B],
                       capture_output=True, text=True, timeout=60, env=env)
    eq("[cli] shardgate flush --wait --timeout 3 with the cold tier cut off: exit 1",
       p.returncode, 1, p.stdout + p.stderr)
    thr.restore()
    p = subprocess.run(cli + ["--wait", "--timeout", "120", "s3://%s/restart/" % B],
                       capture_output=True, text=True, timeout=180, env=env)
    eq("[cli] shardgate flush --wait once the cold tier is back: exit 0, flushed",
       (p.returncode, p.stdout.startswith("flushed: s3://%s/restart/" % B)), (0, True),
       p.stdout + p.stderr)
    r, body = flush(timeout=120)
    eq("[restart] flush once the cold tier is back", r, 200)
    bad = [k for k, v in objs.items() if cold_file(cold, k) != v]
    eq("[restart] the cold tier holds every object byte for byte", bad, [])
    def ready_again():   # the gateway keeps its cold-tier probe a few seconds
        r = H.raw("GET", "/_shardgate/ready", sign=False)
        return r.status == 200 and "write-back: ok - nothing pending" in r.body.decode()
    check("[ready] after the flush: 200, nothing pending", C.wait_until(ready_again, 30),
          H.raw("GET", "/_shardgate/ready", sign=False).body)


def kill9_loops(cold, thr, cfg, loops=30):
    """Loop i kills, by i % 3: B during ingestion (a writer streaming PUTs),
    B while uploads to A (slowed to 2 MB/s) are under way, or A itself
    mid-upload (then restarted). Kills come on counts (acknowledged writes,
    objects in A), not on time."""
    lost = []
    acked_total = 0
    how = ("ingestion", "upload", "cold tier")
    for loop in range(loops):
        kind = how[loop % 3]
        acked = {}
        if kind == "ingestion":
            stop = threading.Event()

            def writer():
                c = client()
                i = 0
                while not stop.is_set():
                    k = "kill9/%d/%03d" % (loop, i)
                    v = os.urandom(random.randint(1, 2 * MB))
                    try:
                        c.put_object(Bucket=B, Key=k, Body=v)
                        acked[k] = hashlib.sha256(v).hexdigest()
                    except Exception:   # noqa - the kill interrupts one PUT
                        return
                    i += 1
            w = threading.Thread(target=writer)
            w.start()
            C.wait_until(lambda: len(acked) >= 3 + loop % 7, 60, step=0.005)
            C.kill9_cache()
            stop.set()
            w.join(30)
            restart_b(cfg)
        else:
            thr.set_rate(down_rate=None, up_rate=2e6)
            c = client()
            keys = ["kill9/%d/%03d" % (loop, i) for i in range(6)]
            for k in keys:
                v = os.urandom(random.randint(512 * 1024, 1024 * 1024))
                c.put_object(Bucket=B, Key=k, Body=v)
                acked[k] = hashlib.sha256(v).hexdigest()
            landed = C.wait_until(lambda: cold_file(cold, keys[0]) is not None, 60, step=0.01)
            check("[kill9] loop %d: uploads under way before the kill" % loop,
                  landed and cold_file(cold, keys[-1]) is None)
            if kind == "upload":
                C.kill9_cache()
                thr.set_rate(down_rate=None, up_rate=None)
                restart_b(cfg)
            else:
                cold.kill()
                thr.set_rate(down_rate=None, up_rate=None)
                cold.start()
        r, _ = flush(timeout=120)
        check("[kill9] loop %d (%s): flush after the restart" % (loop, kind), r == 200)
        for k, sha in list(acked.items()):
            data = cold_file(cold, k)
            if data is None or hashlib.sha256(data).hexdigest() != sha:
                lost.append(k)
        acked_total += len(acked)
    eq("[kill9] %d loops (kill -9 of B during ingestion and during uploads, of A mid-upload), "
       "%d acknowledged writes: none lost or damaged in the cold tier"
       % (loops, acked_total), lost, [])


def staged_file_of(cfg, body):
    """The staged copy of a pending object: the file under
    CACHE/writeback/data/ with exactly these bytes."""
    root = os.path.join(cfg.cache_dir, "writeback", "data")
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            if os.path.getsize(p) == len(body):
                with open(p, "rb") as fh:
                    if fh.read() == body:
                        return p
    return None


def staged_bytes_checked(cold, thr, cfg):
    """A staged copy that changed on the disk after the acknowledgement
    never reaches the cold tier: the upload sends the ETag the client was
    given as Content-MD5, and the cold tier refuses other bytes."""
    c = client()
    key = "corrupt/a.bin"
    body = os.urandom(300 * 1024)
    thr.refuse()
    # a signed PUT without a flexible checksum (boto3 >= 1.36 would add a
    # CRC32, which the cold tier checks too): the MD5 is all there is
    r = H.raw("PUT", "/%s/%s" % (B, key), body=body)
    eq("[digest] PUT without a checksum header: 200", r.status, 200)
    path = staged_file_of(cfg, body)
    check("[digest] the pending object's staged copy is found", path is not None)
    if path is None:
        thr.restore()
        return
    with open(path, "r+b") as fh:   # one byte flipped, as a failing disk might
        fh.seek(150 * 1024)
        b = fh.read(1)
        fh.seek(150 * 1024)
        fh.write(bytes([b[0] ^ 0x40]))
    f0 = status().get("upload_failures", 0)
    thr.restore()
    r, _ = flush(timeout=3)
    st = status()
    eq("[digest] flush does not finish: the upload fails", r, 202)
    check("[digest] ... as the cold tier refuses the bytes (BadDigest): %r"
          % st.get("last_error"),
          st.get("upload_failures", 0) > f0 and "BadDigest" in (st.get("last_error") or ""))
    check("[digest] ... and the cold tier has no such object", cold_file(cold, key) is None)
    c.delete_object(Bucket=B, Key=key)   # the delete supersedes the put
    r, _ = flush(timeout=30)
    eq("[digest] a delete of the key lets the queue go on: flushed", r, 200)
    check("[digest] ... and the cold tier never had the object", cold_file(cold, key) is None)


def mpu_put(c, key, body, part=5 * MB):
    """A multipart upload of body in parts of `part` bytes: the ETag B gave."""
    up = c.create_multipart_upload(Bucket=B, Key=key)["UploadId"]
    parts = []
    for i, off in enumerate(range(0, len(body), part), 1):
        r = c.upload_part(Bucket=B, Key=key, UploadId=up, PartNumber=i,
                          Body=body[off:off + part])
        parts.append({"PartNumber": i, "ETag": r["ETag"]})
    r = c.complete_multipart_upload(Bucket=B, Key=key, UploadId=up,
                                    MultipartUpload={"Parts": parts})
    return r["ETag"].strip('"')


def parts_checked(cold, thr, cfg):
    """A multipart object's parts go to an S3 cold tier unhashed, with no
    Content-MD5: the complete is sent only once the cold tier's part ETags
    make the ETag the client was given.
      * a part damaged on the way (throttle.py flips one byte) is found:
        the staged parts are hashed and the one that differs sent again, so
        the cold tier ends with the client's bytes and ETag;
      * a staged copy that changed on the disk never becomes the object in
        the cold tier (BAD_DIGEST in ?writeback), is hashed once, not at
        every retry, and a delete of its key lets the queue go on."""
    c = client()
    hashed = "shardgate_writeback_upload_hashed_bytes_total"
    key = "parts/transit.bin"
    body = os.urandom(13 * MB)   # parts of 5 MiB + 1 (unaligned in the staged file) and the rest
    thr.refuse()
    etag = mpu_put(c, key, body, part=5 * MB + 1)
    h0, f0 = C.bm(hashed), thr.stats()["flipped"]
    thr.flip(2 * MB)   # inside the first part body sent once the tier is back
    thr.restore()
    r, _ = flush(timeout=60)
    eq("[parts] flush after a part was damaged on the way: 200", r, 200)
    eq("[parts] ... the proxy damaged one byte", thr.stats()["flipped"] - f0, 1)
    eq("[parts] ... the cold tier holds the client's bytes", cold_file(cold, key) == body, True)
    eq("[parts] ... with the ETag the client was given", cold_etag(cold, key), etag)
    eq("[parts] ... found by hashing the staged parts, once", C.bm(hashed) - h0, len(body))

    key = "parts/disk.bin"
    body = os.urandom(11 * MB)
    thr.refuse()
    mpu_put(c, key, body)
    path = staged_file_of(cfg, body)
    check("[parts] the pending multipart object's staged copy is found", path is not None)
    if path is None:
        thr.restore()
        return
    with open(path, "r+b") as fh:   # one byte of part 2 flipped, as a failing disk might
        fh.seek(7 * MB)
        b = fh.read(1)
        fh.seek(7 * MB)
        fh.write(bytes([b[0] ^ 0x40]))
    f0, h0 = status().get("upload_failures", 0), C.bm(hashed)
    thr.restore()
    r, _ = flush(timeout=3)
    st = status()
    eq("[parts] a staged copy changed on the disk: flush does not finish", r, 202)
    check("[parts] ... the upload fails with BAD_DIGEST: %r" % st.get("last_error"),
          st.get("upload_failures", 0) > f0 and "BAD_DIGEST" in (st.get("last_error") or ""))
    check("[parts] ... and the cold tier has no such object", cold_file(cold, key) is None)
    h1, f1 = C.bm(hashed), st.get("upload_failures", 0)
    eq("[parts] ... its staged parts were hashed once", h1 - h0, len(body))
    r, _ = flush(timeout=2)   # a flush retries at once
    check("[parts] ... a retry fails again", status().get("upload_failures", 0) > f1)
    eq("[parts] ... without hashing them again", C.bm(hashed), h1)
    c.delete_object(Bucket=B, Key=key)   # the delete supersedes the put
    r, _ = flush(timeout=30)
    eq("[parts] a delete of the key lets the queue go on: flushed", r, 200)
    check("[parts] ... and the cold tier never had the object", cold_file(cold, key) is None)


def capped(cold, thr):
    """write_back.upload_bandwidth paces the uploads that libcurl sends
    straight from the staged files: 8 MiB at 4 MiB/s take about 2 s."""
    C.stop_cache()
    cfg = C.Cache("http://127.0.0.1:%d" % thr.port, C.COLD_ACCESS, C.COLD_SECRET,
                  config=dict(CONFIG, write_back={"upload_bandwidth": "4MiB"}), tag="wbcap")
    C.start_cache(cfg)
    body = os.urandom(8 * MB)
    client().put_object(Bucket=B, Key="capped/8mib.bin", Body=body)
    t0 = time.time()
    r, _ = flush(timeout=60)
    took = time.time() - t0
    eq("[cap] flush of 8 MiB with upload_bandwidth 4MiB: 200", r, 200)
    check("[cap] ... paced: %.2f s (8 MiB at 4 MiB/s: 2 s)" % took, 1.6 <= took < 30)
    eq("[cap] ... byte for byte in the cold tier", cold_file(cold, "capped/8mib.bin") == body,
       True)
    eq("[cap] ... sent from the staged file", C.bm("shardgate_writeback_upload_copied_bytes_total"),
       0.0)
    C.stop_cache()


def through(cold):
    r = H.raw("PUT", "/%s/through/one" % B, headers={"x-shardgate-write": "through"},
              body=b"now in the cold tier")
    eq("[through] PUT with x-shardgate-write: through", r.status, 200)
    eq("[through] ... answered once the cold tier has it", cold_file(cold, "through/one"),
       b"now in the cold tier")
    r = H.raw("PUT", "/%s/through/two" % B, headers={"x-shardgate-write": "sometimes"},
              body=b"x")
    eq("[through] another value is 400 InvalidArgument", (r.status, (r.error() or {}).get("Code")),
       (400, "InvalidArgument"))


DEBIAN_UPLOAD = r"""
import sys, boto3
from botocore.config import Config
from boto3.s3.transfer import TransferConfig
ep, ak, sk, path, key = sys.argv[1:6]
c = boto3.client("s3", endpoint_url=ep, aws_access_key_id=ak, aws_secret_access_key=sk,
                 region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))
c.upload_file(path, "ckpt", key, Config=TransferConfig(multipart_threshold=8 << 20,
              multipart_chunksize=8 << 20, max_concurrency=4))
print(boto3.__version__)
"""


def debian_upload(src, key, timeout):
    """DEBIAN_UPLOAD by Debian's /usr/bin/python3 (its python3-boto3, which
    .ci/deps.sh installs): (rc, boto3 version, stderr)."""
    env = dict(os.environ, PYTHONNOUSERSITE="1")
    env.pop("PYTHONPATH", None)
    rc, out, err = H.run_cmd(["/usr/bin/python3", "-c", DEBIAN_UPLOAD, H.S.endpoint,
                              H.ACCESS_KEY, H.SECRET_KEY, src, key], env=env, timeout=timeout)
    return rc, out.strip(), err


def clients(cold, thr):
    """The real clients write into the write-back bucket with the cold tier
    cut off: aws-cli v1 and v2 `s3 cp` (multipart), Debian's older boto3
    upload_file, curl --aws-sigv4; after the flush A holds each file byte for
    byte with the ETag B answered."""
    src = os.path.join(H.S.tmp, "clients.bin")
    data = os.urandom(20 * MB + 12345)
    with open(src, "wb") as f:
        f.write(data)
    thr.refuse()
    wrote = {}
    for name, argv, env in (("aws-cli v1", ["aws"], H.aws_env()),
                            ("aws-cli v2", ["/usr/bin/aws"], H.aws_env(v2=True))):
        key = "clients/%s" % name.replace(" ", "-")
        rc, out, err = H.run_cmd(argv + ["--endpoint-url", H.S.endpoint, "s3", "cp", src,
                                         "s3://%s/%s" % (B, key)], env=env, timeout=120)
        eq("[clients] %s s3 cp (multipart) with the cold tier cut off" % name, rc, 0, err[-500:])
        wrote[key] = data
    rc, version, err = debian_upload(src, "clients/boto3-debian", 120)
    eq("[clients] Debian's boto3 %s upload_file" % version, rc, 0, err[-500:])
    wrote["clients/boto3-debian"] = data
    rc, out, err = H.run_cmd(["curl", "-sS", "-f", "--aws-sigv4", "aws:amz:us-east-1:s3",
                              "--user", "%s:%s" % (H.ACCESS_KEY, H.SECRET_KEY),
                              "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-T", src,
                              "%s/%s/clients/curl" % (H.S.endpoint, B)], timeout=120)
    eq("[clients] curl --aws-sigv4 PUT", rc, 0, err[-500:])
    wrote["clients/curl"] = data
    c = client()
    etags = {k: c.head_object(Bucket=B, Key=k)["ETag"].strip('"') for k in wrote}
    thr.restore()
    r, _ = flush(timeout=120)
    eq("[clients] flush", r, 200)
    bad = [k for k, v in wrote.items() if cold_file(cold, k) != v]
    eq("[clients] A holds every client's file byte for byte", bad, [])
    eq("[clients] ... with the ETags B answered", {k: cold_etag(cold, k) for k in wrote}, etags)


def big(cold, thr):
    """1 GiB checkpoint files with the cold tier cut off: boto3's
    upload_file with its defaults (8 MiB parts, 10 threads) and Debian's older
    boto3; after the flush A holds both byte for byte with the ETags B gave.
    Then both are deleted, to give the disk back."""
    size = 1024 * MB
    src = os.path.join(H.S.tmp, "big.bin")
    st = os.statvfs(H.S.tmp)
    if st.f_bavail * st.f_frsize < 6 * size:
        check("[big] enough disk for two 1 GiB checkpoints (6 GiB)", False,
              "%d MiB free" % (st.f_bavail * st.f_frsize // MB))
        return
    want = H.write_random_file(src, size)
    thr.refuse()
    c = client()
    t0 = time.time()
    c.upload_file(src, B, "big/boto3-new.bin")
    took = time.time() - t0
    eq("[big] boto3 %s upload_file of 1 GiB with the cold tier cut off (%.1f s): B has it"
       % (boto3_version(), took), c.head_object(Bucket=B, Key="big/boto3-new.bin")
       ["ContentLength"], size)
    keys = ["big/boto3-new.bin", "big/boto3-debian.bin"]
    rc, version, err = debian_upload(src, keys[1], 600)
    eq("[big] Debian's boto3 %s upload_file of 1 GiB" % version, rc, 0, err[-500:])
    etags = {k: c.head_object(Bucket=B, Key=k)["ETag"].strip('"') for k in keys}
    check("[big] ... multipart ETags: %r" % etags,
          all(backend_parts(e) > 1 for e in etags.values()))
    thr.restore()
    r, _ = flush(timeout=600)
    eq("[big] flush", r, 200)
    eq("[big] A holds each 1 GiB file byte for byte",
       {k: H.sha256_file(cold.path(B, k)) for k in keys}, {k: want for k in keys})
    eq("[big] ... with the ETags B answered", {k: cold_etag(cold, k) for k in keys}, etags)
    for k in keys:
        c.delete_object(Bucket=B, Key=k)
    os.unlink(src)
    r, _ = flush(timeout=60)
    eq("[big] the deletes reach A too", [k for k in keys if os.path.exists(cold.path(B, k))],
       [])


def boto3_version():
    import boto3
    return boto3.__version__


def backend_parts(etag):
    """The N of a multipart ETag "<md5>-N", else 0."""
    head, _, n = etag.rpartition("-")
    return int(n) if head and n.isdigit() else 0


def capacity(cold, thr):
    """Pending writes and the parts of uploads not completed count against
    the cache's capacity (64 MiB, high watermark 90%): with 48 MiB cached,
    16 MiB pending (uploads slowed to a crawl, reads not) and an 8 MiB part
    of an open upload, the next fills evict until the three fit."""
    R = "hot"
    cold.client().create_bucket(Bucket=R)
    for i in range(14):
        cold.put_random(R, "%02d" % i, 4 * MB)
    c = client()
    for i in range(12):
        c.get_object(Bucket=R, Key="%02d" % i)["Body"].read()
    # a fill is published (and counted) after its fdatasync, on the publisher
    # thread, after the reader has its bytes: under load the last ones come
    # later (CI run 111 read 40 MiB)
    deadline = time.time() + 15
    while C.bm("shardgate_cache_bytes") < 48 * MB and time.time() < deadline:
        time.sleep(0.05)
    check("[capacity] 48 MiB cached", C.bm("shardgate_cache_bytes") >= 44 * MB,
          C.bm("shardgate_cache_bytes"))
    thr.set_rate(down_rate=None, up_rate=1e5)   # uploads crawl, fills do not
    for i in range(2):
        c.put_object(Bucket=B, Key="capacity/%d" % i, Body=os.urandom(8 * MB))
    staged0 = C.bm("shardgate_writeback_staged_part_bytes")
    up = c.create_multipart_upload(Bucket=B, Key="capacity/open")["UploadId"]
    c.upload_part(Bucket=B, Key="capacity/open", UploadId=up, PartNumber=1,
                  Body=os.urandom(8 * MB))
    for i in (12, 13):   # misses: room is made for them
        c.get_object(Bucket=R, Key="%02d" % i)["Body"].read()
    cached, pending = C.bm("shardgate_cache_bytes"), C.bm("shardgate_writeback_dirty_bytes")
    staged = C.bm("shardgate_writeback_staged_part_bytes")
    check("[capacity] 16 MiB pending", pending >= 16 * MB, pending)
    eq("[capacity] the open upload's part is counted as staged", staged - staged0, 8 * MB)
    check("[capacity] cached + pending + staged parts within the high watermark (57.6 MiB)",
          cached + pending + staged <= 0.9 * 64 * MB, (cached, pending, staged))
    c.abort_multipart_upload(Bucket=B, Key="capacity/open", UploadId=up)
    eq("[capacity] aborted: its part is no longer counted",
       C.bm("shardgate_writeback_staged_part_bytes"), staged0)
    thr.set_rate(down_rate=None, up_rate=None)
    r, _ = flush(timeout=120)
    eq("[capacity] flush", r, 200)


def through_cut_off(thr):
    thr.refuse()
    t0 = time.time()
    r = H.raw("PUT", "/%s/through/cut" % B, headers={"x-shardgate-write": "through"},
              body=b"never written")
    took = time.time() - t0
    thr.restore()
    eq("[through] with the cold tier cut off: 503 ServiceUnavailable",
       (r.status, (r.error() or {}).get("Code")), (503, "ServiceUnavailable"))
    check("[through] ... after write_back.through_timeout_ms (1.5 s) without progress",
          took >= 1.5, took)
    r = H.raw("HEAD", "/%s/through/cut" % B)
    eq("[through] ... and the key is not written", r.status, 404)


def prefixes(cold, thr):
    """Bucket train says "write": {"ckpt/": "back"}: with A cut off, a key under
    ckpt/ is acknowledged and uploaded later, a key elsewhere is written
    through (refused while A is cut off, in A when answered); the uploads
    of both kinds are listed together."""
    c = client()
    body = os.urandom(300000)
    thr.refuse()
    c.put_object(Bucket=M, Key="ckpt/step-1/shard", Body=body)   # raises unless 200
    r = H.raw("PUT", "/%s/data/part-0" % M, body=b"through")
    thr.restore()
    eq("[prefixes] ckpt/ is acknowledged with A cut off; data/ is written through, "
       "and refused (503)", r.status, 503)
    check("[prefixes] ... ckpt/ is pending, not in A yet",
          cold_file(cold, "ckpt/step-1/shard", M) is None, "in A already")
    r = H.raw("PUT", "/%s/data/part-0" % M, body=b"through")
    eq("[prefixes] data/ with A back: 200", r.status, 200)
    eq("[prefixes] ... and in A when answered", cold_file(cold, "data/part-0", M), b"through")
    ups = [c.create_multipart_upload(Bucket=M, Key=k)["UploadId"]
           for k in ("data/u", "ckpt/u")]
    listed = c.list_multipart_uploads(Bucket=M).get("Uploads", [])
    eq("[prefixes] the uploads of both modes in one listing",
       [(u["Key"], u["UploadId"]) for u in listed], [("ckpt/u", ups[1]), ("data/u", ups[0])])
    for k, u in (("data/u", ups[0]), ("ckpt/u", ups[1])):
        c.abort_multipart_upload(Bucket=M, Key=k, UploadId=u)
    r = H.raw("POST", "/%s" % M, "flush&timeout=60")
    eq("[prefixes] flush of train", r.status, 200)
    eq("[prefixes] ... ckpt/ is in A byte for byte", cold_file(cold, "ckpt/step-1/shard", M),
       body)


def conf_refused():
    p = os.path.join(H.S.tmp, "wb-nocache.json")
    with open(p, "w") as f:
        json.dump(CONFIG, f)
    os.chmod(p, 0o600)
    env = C.clean_env()
    r = subprocess.run([os.environ["SHARDGATE_BIN"], "serve", "--listen", "127.0.0.1:1",
                        "--data", os.path.join(H.S.tmp, "d"), "--config", p],
                       capture_output=True, text=True, timeout=30, env=env)
    check("[conf] write-back without a cache directory is refused",
          r.returncode != 0 and "buckets.ckpt.write" in r.stderr and "cache" in r.stderr,
          r.stderr[-300:])


def main():
    C.need_clients()
    C.init("test_writeback")
    atexit.register(C.stop_all)
    cold = C.ColdGateway().start()
    cold.client().create_bucket(Bucket=B)
    cold.client().create_bucket(Bucket=M)
    thr = throttle.ThrottleProcess("127.0.0.1", cold.port).start()
    atexit.register(thr.stop)
    cfg = start_b(thr.port)
    conf_refused()
    ack_order_flush(cold, thr, cfg)
    staged_bytes_checked(cold, thr, cfg)
    parts_checked(cold, thr, cfg)
    through(cold)
    through_cut_off(thr)
    prefixes(cold, thr)
    clients(cold, thr)
    big(cold, thr)
    capacity(cold, thr)
    restart(cold, thr, cfg)
    kill9_loops(cold, thr, cfg)
    capped(cold, thr)
    cold.stop()


if __name__ == "__main__":
    H.run(main)
