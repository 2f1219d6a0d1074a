"""tests/integration/test_reclaim.py - what dead writers leave behind (issue 10,
finding 7: after 40 kill -9 during PUTs and multipart uploads, 84 temporary
files, 398 MB, stayed under the data directory for good).

  1. kill -9 while PUTs (flat and nested keys) and UploadParts are half
     sent leaves their temporary files; a crashed CreateMultipartUpload (an
     upload directory without its info file) is planted beside them;
  2. the next start removes every one of them before serving, logs how many
     files and bytes, keeps every object and the live upload, and the upload
     can still be completed;
  3. incomplete multipart uploads older than mpu_max_age (from the config
     file; 1 s here instead of the default 7 days) are aborted: at start, and
     by the background sweep while the gateway runs. No long sleep: the age
     is made small, and the deadline (30 s) is only how long the test waits
     for a sweep that runs every second.
"""

import json
import os
import re
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import cache_common as C  # noqa: E402
import store_common as T  # noqa: E402

check, eq = H.check, H.eq
MB = H.MB


def temp_files(root):
    """(count, bytes) of the .sg~tmp.* files anywhere under root."""
    n = size = 0
    for d, dirs, files in os.walk(root):
        for f in files:
            if f.startswith(".sg~tmp."):
                n += 1
                size += os.lstat(os.path.join(d, f)).st_size
    return n, size


def half_put(gw, path, query, total, sent):
    """Starts a signed PUT of `total` bytes and sends only `sent` of them;
    returns the open socket (the caller keeps it until the gateway dies)."""
    host = "127.0.0.1:%d" % gw.port
    target = path + ("?" + query if query else "")
    hdrs = H.sign_headers("PUT", "http://%s%s" % (host, target),
                          {"Content-Length": str(total)}, b"",
                          payload_hash="UNSIGNED-PAYLOAD")
    lines = ["PUT %s HTTP/1.1" % target, "Host: %s" % host]
    lines += ["%s: %s" % kv for kv in hdrs.items() if kv[0].lower() != "host"]
    s = socket.create_connection(("127.0.0.1", gw.port), timeout=30)
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    chunk = os.urandom(MB)
    left = sent
    while left > 0:
        n = min(left, len(chunk))
        s.sendall(chunk[:n])
        left -= n
    return s


def main():
    T.init("test_reclaim")
    data = H.tmpdir("data")
    cfg = os.path.join(H.S.tmp, "age.json")
    with open(cfg, "w") as f:
        json.dump({"mpu_max_age": 1}, f)

    # ---- 1. leftovers of writers killed mid-write
    g1 = T.Gw("g1", ["--data", data])
    if not g1.start():
        return
    s3 = g1.client()
    s3.create_bucket(Bucket="bkt")
    s3.put_object(Bucket="bkt", Key="keep/me.txt", Body=b"kept")
    up = s3.create_multipart_upload(Bucket="bkt", Key="big.bin")["UploadId"]
    part1 = os.urandom(5 * MB)
    e1 = s3.upload_part(Bucket="bkt", Key="big.bin", UploadId=up, PartNumber=1,
                        Body=part1)["ETag"]
    socks = [half_put(g1, "/bkt/flat.bin", "", 8 * MB, 2 * MB),
             half_put(g1, "/bkt/a/b/nested.bin", "", 8 * MB, 2 * MB),
             half_put(g1, "/bkt/keep/me.txt", "", 8 * MB, 2 * MB),
             half_put(g1, "/bkt/big.bin", "partNumber=2&uploadId=%s" % up, 8 * MB, 2 * MB),
             half_put(g1, "/bkt/big.bin", "partNumber=3&uploadId=%s" % up, 8 * MB, 2 * MB)]
    # the bytes sent are in the temp files before the kill: wait for them
    landed = C.wait_until(lambda: temp_files(data) == (5, 10 * MB), timeout=30)
    check("five half-written temp files (2 MiB each) before the kill", landed,
          temp_files(data))
    g1.kill9()
    for s in socks:
        s.close()
    # a create that died between its mkdir and its info file
    crashed = os.path.join(data, ".shardgate", "mpu", "bkt", "C" * 32)
    os.makedirs(crashed)
    with open(os.path.join(crashed, ".sg~tmp.info"), "wb") as f:
        f.write(b"SGU1-half")
    n_before, b_before = temp_files(data)
    eq("temp files left by the dead writers", (n_before, b_before), (6, 10 * MB + 9))

    # ---- 2. the next start reclaims them
    g2 = T.Gw("g2", ["--data", data])
    if g2.start():
        eq("after the restart no temp file is left anywhere in the tree", temp_files(data),
           (0, 0))
        lines = g2.grep("start-up reclaim")
        check("the reclaim is logged with the count and the bytes",
              len(lines) == 1 and ("removed %d temporary files (%d bytes)" % (n_before, b_before))
              in lines[0] and "1 unfinished upload directories" in lines[0], lines)
        check("the crashed create's directory is gone", not os.path.exists(crashed))
        s3 = g2.client()
        eq("objects are intact", s3.get_object(Bucket="bkt", Key="keep/me.txt")["Body"].read(),
           b"kept")
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket="bkt").get("Contents", [])]
        eq("no half-written object became visible", keys, ["keep/me.txt"])
        ups = [u["UploadId"] for u in s3.list_multipart_uploads(Bucket="bkt").get("Uploads", [])]
        eq("the live upload stays (younger than the default 7 days)", ups, [up])
        parts = s3.list_parts(Bucket="bkt", Key="big.bin", UploadId=up).get("Parts", [])
        eq("its complete part stays, the half-sent ones do not exist",
           [p["PartNumber"] for p in parts], [1])
        s3.complete_multipart_upload(Bucket="bkt", Key="big.bin", UploadId=up, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": e1}]})
        eq("the upload still completes", s3.get_object(Bucket="bkt", Key="big.bin")["Body"]
           .read() == part1, True)
        old = s3.create_multipart_upload(Bucket="bkt", Key="old.bin")["UploadId"]
        s3.upload_part(Bucket="bkt", Key="old.bin", UploadId=old, PartNumber=1, Body=b"x" * 100)
        t_old = time.time()
    eq("g2 stops with 0", g2.stop(), 0)

    # ---- 3. mpu_max_age: at start, then in the background
    while time.time() < t_old + 2.5:      # the upload is older than 1 s (by 1.5 s)
        time.sleep(0.1)
    g3 = T.Gw("g3", ["--data", data, "--config", cfg])
    if g3.start():
        s3 = g3.client()

        def uploads():
            return [u["UploadId"] for u in
                    s3.list_multipart_uploads(Bucket="bkt").get("Uploads", [])]
        gone = C.wait_until(lambda: uploads() == [], timeout=30)
        check("an upload older than mpu_max_age is aborted at start", gone, uploads())
        check("its directory is gone",
              not os.path.exists(os.path.join(data, ".shardgate", "mpu", "bkt", old)))
        # (no part upload after the create: on a loaded machine the sweep may
        # already have aborted it, which is the behaviour under test)
        fresh = s3.create_multipart_upload(Bucket="bkt", Key="fresh.bin")["UploadId"]
        gone = C.wait_until(lambda: fresh not in uploads(), timeout=30)
        check("while running, the background sweep aborts one that grew too old", gone)
        def logged():
            return sum(int(m.group(1)) for m in
                       (re.search(r"aborted (\d+) incomplete multipart uploads", l)
                        for l in g3.grep("incomplete multipart uploads")) if m)
        # the sweep logs after it removed the uploads: a listing can see the
        # upload gone a moment before the line is written
        C.wait_until(lambda: logged() >= 2, timeout=30)
        eq("both aborts are logged", logged(), 2)
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket="bkt").get("Contents", [])]
        eq("objects are untouched by the sweep", keys, ["big.bin", "keep/me.txt"])
    eq("g3 stops with 0", g3.stop(), 0)


if __name__ == "__main__":
    H.run(main)
