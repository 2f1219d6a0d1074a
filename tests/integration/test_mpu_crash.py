"""tests/integration/test_mpu_crash.py - kill -9 during multipart uploads into
the directory store (`--data`), whose parts go into the upload's slab
(backend/posix_mpu_slab.c: each part written where it lies in the object, so
CompleteMultipartUpload copies nothing). 30 loops, by loop % 3:

  * parts: 3 boto3 threads upload parts 1..5 (5 MiB, the last 1000 bytes);
    kill -9 after a few are acknowledged. After the restart every
    acknowledged part is listed with its ETag, every listed part's ETag is
    the MD5 of the bytes sent for it; the missing parts are sent (again: a
    part cut off mid-write was claimed in the slab, so it now goes to a file
    of its own), and the object reads back byte for byte;
  * complete: kill -9 a random few milliseconds after CompleteMultipartUpload
    was sent. After the restart either the object is there, byte for byte,
    or the upload is still there and completes now: never a wrong object;
  * again: part 2 sent again with other bytes, cut off (kill -9) half-way.
    After the restart part 2 is the first one (its ETag, and the object made
    with it has its bytes): the second sending never wrote over them.

Then the same upload shape without a kill: the object is the slab itself
(the upload directory's slab and the object are one inode before the sweep
takes the upload's name away), as a reader can check with `stat`; and
aws-cli v1 and v2 `s3 cp` (5 MiB parts, several at once) get objects made
from the slab too.
Skips (77) without boto3."""

import hashlib
import os
import random
import shutil
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import cache_common as C  # noqa: E402
import store_common as T  # noqa: E402

check, eq = H.check, H.eq
MB = H.MB
N_PARTS = 5
LOOPS = 30


def part_sizes():
    return [5 * MB] * (N_PARTS - 1) + [1000]


def md5(b):
    return '"%s"' % hashlib.md5(b).hexdigest()


def upload_parts(c, key, up, datas, numbers, acked, threads=3):
    """Sends parts `numbers` from 3 threads; acked[no] = ETag of each answer."""
    todo = list(numbers)
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                no = todo.pop(0)
            try:
                r = c.upload_part(Bucket="bkt", Key=key, UploadId=up, PartNumber=no,
                                  Body=datas[no - 1])
            except Exception:   # noqa - the kill cuts it off
                return
            with lock:
                acked[no] = r["ETag"]
    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    return ts


def listed(c, key, up):
    return {p["PartNumber"]: p["ETag"]
            for p in c.list_parts(Bucket="bkt", Key=key, UploadId=up).get("Parts", [])}


def complete(c, key, up, etags):
    return c.complete_multipart_upload(
        Bucket="bkt", Key=key, UploadId=up,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": etags[n]} for n in sorted(etags)]})


def quietly(fn, *a):
    try:
        fn(*a)
    except Exception:   # noqa - the kill cuts it off
        pass


def read(c, key):
    try:
        return c.get_object(Bucket="bkt", Key=key)["Body"].read()
    except Exception:   # noqa - NoSuchKey
        return None


def half_part(gw, key, up, no, total, sent):
    """A signed UploadPart of `total` bytes of which only `sent` go out; the
    socket stays open (the gateway dies with it)."""
    host = "127.0.0.1:%d" % gw.port
    target = "/bkt/%s?partNumber=%d&uploadId=%s" % (key, no, up)
    hdrs = H.sign_headers("PUT", "http://%s%s" % (host, target),
                          {"Content-Length": str(total)}, b"", payload_hash="UNSIGNED-PAYLOAD")
    lines = ["PUT %s HTTP/1.1" % target, "Host: %s" % host]
    lines += ["%s: %s" % kv for kv in hdrs.items() if kv[0].lower() != "host"]
    s = socket.create_connection(("127.0.0.1", gw.port), timeout=30)
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + b"Z" * sent)
    return s


def slab_bytes(data, up):
    p = os.path.join(data, ".shardgate", "mpu", "bkt", up, "slab")
    return os.path.getsize(p) if os.path.exists(p) else 0


def main():
    T.init("test_mpu_crash")
    data = H.tmpdir("data")
    gw = T.Gw("g", ["--data", data])
    if not gw.start():
        return
    c = gw.client()
    c.create_bucket(Bucket="bkt")
    bad = []            # (loop, what) of every broken promise
    counts = {"parts acknowledged before a kill": 0, "objects completed by the kill": 0,
              "uploads completed after the restart": 0}
    rnd = random.Random(20261128)
    for loop in range(LOOPS):
        kind = ("parts", "complete", "again")[loop % 3]
        key = "crash/%02d-%s" % (loop, kind)
        datas = [os.urandom(n) for n in part_sizes()]
        whole = b"".join(datas)
        up = c.create_multipart_upload(Bucket="bkt", Key=key)["UploadId"]
        acked = {}
        if kind == "parts":
            ts = upload_parts(c, key, up, datas, range(1, N_PARTS + 1), acked)
            want = 1 + loop % 4
            C.wait_until(lambda: len(acked) >= want, 60, step=0.002)
            gw.kill9()
            for t in ts:
                t.join(30)
            counts["parts acknowledged before a kill"] += len(acked)
        else:
            for t in upload_parts(c, key, up, datas, range(1, N_PARTS + 1), acked):
                t.join(60)
            if len(acked) != N_PARTS:
                bad.append((loop, "not every part was acknowledged before the kill"))
                continue
            if kind == "complete":
                done = threading.Thread(target=quietly, args=(complete, c, key, up, acked))
                done.start()
                time.sleep(rnd.uniform(0, 0.03))
                gw.kill9()
                done.join(30)
            else:
                s = half_part(gw, key, up, 2, 5 * MB, rnd.randint(1, 4) * MB)
                # the bytes sent are in the slab or a temp file before the kill
                time.sleep(0.2)
                gw.kill9()
                s.close()
        if not gw.start():
            bad.append((loop, "no restart"))
            break
        c = gw.client()
        got = read(c, key)
        if got is not None:
            counts["objects completed by the kill"] += 1
            if got != whole:
                bad.append((loop, "the completed object is not what was sent"))
            continue
        try:
            parts = listed(c, key, up)
        except Exception as e:   # noqa
            bad.append((loop, "the upload is gone without its object: %r" % e))
            continue
        for no, etag in acked.items():
            if parts.get(no) != etag:
                bad.append((loop, "acknowledged part %d listed as %r" % (no, parts.get(no))))
        for no, etag in parts.items():
            if etag != md5(datas[no - 1]):
                bad.append((loop, "part %d listed with an ETag of other bytes" % no))
        missing = [n for n in range(1, N_PARTS + 1) if n not in parts]
        more = {}
        for t in upload_parts(c, key, up, datas, missing, more):
            t.join(60)
        parts.update(more)
        try:
            complete(c, key, up, parts)
        except Exception as e:   # noqa
            bad.append((loop, "Complete after the restart: %r" % e))
            continue
        counts["uploads completed after the restart"] += 1
        if read(c, key) != whole:
            bad.append((loop, "the object completed after the restart is not what was sent"))
    eq("[kill9] %d loops of kill -9 during UploadParts, Completes and a part sent again "
       "(%s): every acknowledged part kept, every object byte for byte" %
       (LOOPS, ", ".join("%d %s" % (v, k) for k, v in counts.items())), bad, [])
    check("[kill9] the loops reached both ends: objects completed by the kill and uploads "
          "completed after it", counts["objects completed by the kill"] > 0 and
          counts["uploads completed after the restart"] > 0, counts)

    # without a kill: the slab is the object
    key = "whole/one"
    datas = [os.urandom(n) for n in part_sizes()]
    up = c.create_multipart_upload(Bucket="bkt", Key=key)["UploadId"]
    acked = {}
    for t in upload_parts(c, key, up, datas, range(1, N_PARTS + 1), acked):
        t.join(60)
    slab = os.path.join(data, ".shardgate", "mpu", "bkt", up, "slab")
    eq("[slab] the parts went into the upload's slab, end to end", slab_bytes(data, up),
       sum(part_sizes()))
    ino = os.stat(slab).st_ino if os.path.exists(slab) else None
    complete(c, key, up, acked)
    eq("[slab] Complete made the slab the object: one inode, nothing copied",
       os.stat(os.path.join(data, "bkt", key)).st_ino, ino)
    eq("[slab] ... and it reads back byte for byte", read(c, key), b"".join(datas))

    # aws-cli v1 and v2 `s3 cp` (their own part sizes and checksum trailers, 10
    # parts in flight): the objects come out of the slab too - a slab-made
    # object keeps the slab's xattr, "<slot> sealed"
    src = os.path.join(H.S.tmp, "cli.bin")
    H.write_random_file(src, 12 * MB + 123)   # 5 + 5 + 2 MiB: the short part may come first
    with open(src, "rb") as f:
        want = f.read()
    for name, exe, v2 in (("aws-cli v1", shutil.which("aws"), False),
                          ("aws-cli v2", "/usr/bin/aws", True)):
        if not exe or not os.path.exists(exe):
            H.skip("[slab] %s s3 cp" % name, "%s is not installed" % name)
            continue
        env = H.aws_env(v2=v2)
        with open(env["AWS_CONFIG_FILE"], "w") as f:
            f.write("[default]\ns3 =\n  multipart_threshold = 5MB\n"
                    "  multipart_chunksize = 5MB\n")
        k = "cli/%s" % ("v2" if v2 else "v1")
        rc, out, err = H.run_cmd([exe, "--endpoint-url", gw.endpoint, "s3", "cp", src,
                                  "s3://bkt/%s" % k], env=env, timeout=120)
        eq("[slab] %s s3 cp of 12 MiB in 5 MiB parts" % name, rc, 0, out + err)
        path = os.path.join(data, "bkt", k)
        try:
            mark = os.getxattr(path, "user.shardgate.slab").decode()
        except OSError as e:
            mark = repr(e)
        check("[slab] ... made from the slab, not a copy (xattr %r)" % mark,
              mark == "%d sealed" % (5 * MB))
        eq("[slab] ... and it reads back byte for byte", read(c, k), want)
    eq("g stops with 0", gw.stop(), 0)


if __name__ == "__main__":
    H.run(main)
