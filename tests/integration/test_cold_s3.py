"""tests/integration/test_cold_s3.py - shardgate with the S3 cold tier
(backend/s3.c, `shardgate serve --cold URL`) driven by boto3, in two setups:
  1. moto (an independent S3 server; checks no signatures) as the cold tier;
  2. "gateway behind gateway": shardgate A (--data DIR, verifies SigV4) as the
     cold tier of shardgate B, which proves libcurl's SigV4 signing.
In the second setup a cold read must cost A exactly one GetObject and no
HeadObject (counted from A's /metrics, else its access log), ranged reads
through B must return the right bytes, and B's log must hold no sanitizer
report (run with an ASan build as SHARDGATE_BIN to make that count).
Then the cold tier is stopped: B must answer 503 within 2 s.
Skips (77) when moto or boto3 is missing."""

import hashlib
import http.client
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

COLD_ACCESS = "SGCOLDACCESSKEY00001"
COLD_SECRET = "cold/Secret+Key/abcdefghijklmnopqrstuvw"


def wait_port(port, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def spawn(argv, env, log_name):
    log = open(os.path.join(H.S.tmp, log_name), "wb")
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=H.S.tmp,
                         stdin=subprocess.DEVNULL)
    return p, log


def clean_env():
    env = dict(os.environ)
    for k in list(env):
        if (k.startswith("SHARDGATE_") and k not in ("SHARDGATE_BIN", "SHARDGATE_SRC")) \
                or k.startswith("AWS_"):
            del env[k]
    return env


def start_moto():
    port = H._free_port()
    env = clean_env()
    env.update(AWS_ACCESS_KEY_ID="moto", AWS_SECRET_ACCESS_KEY="moto")
    p, log = spawn([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                   env, "moto.log")
    if not wait_port(port):
        p.kill()
        H.check("moto starts", False)
        H.finish()
    return p, port


def start_gateway_a():
    """Shardgate A: the posix store, verifying SigV4 with the cold credentials."""
    port = H._free_port()
    data = tempfile.mkdtemp(prefix="sg-cold-", dir=H.S.tmp)
    env = clean_env()
    env.update(SHARDGATE_ACCESS_KEY=COLD_ACCESS, SHARDGATE_SECRET_KEY=COLD_SECRET,
               SHARDGATE_LOG_LEVEL="info")
    p, log = spawn([os.environ["SHARDGATE_BIN"], "serve", "--listen", "127.0.0.1:%d" % port,
                    "--data", data], env, "gateway-a.log")
    if not wait_port(port):
        p.kill()
        H.check("shardgate A starts", False)
        H.finish()
    return p, port


def start_gateway_b(cold_url, access, secret, tag):
    """Shardgate B with --cold; becomes the harness's gateway (H.S.proc)."""
    H.S.port = H._free_port()
    H.S.host = "127.0.0.1"
    H.S.endpoint = "http://127.0.0.1:%d" % H.S.port
    H.S.log_path = os.path.join(H.S.tmp, "gateway-b-%s.log" % tag)
    H.S.log_file = open(H.S.log_path, "wb")
    env = clean_env()
    env.update(SHARDGATE_ACCESS_KEY=H.ACCESS_KEY, SHARDGATE_SECRET_KEY=H.SECRET_KEY,
               SHARDGATE_LOG_LEVEL="info", AWS_ACCESS_KEY_ID=access,
               AWS_SECRET_ACCESS_KEY=secret)
    H.S.proc = subprocess.Popen(
        [os.environ["SHARDGATE_BIN"], "serve", "--listen", "127.0.0.1:%d" % H.S.port,
         "--cold", cold_url], stdout=H.S.log_file, stderr=subprocess.STDOUT, env=env,
        cwd=H.S.tmp, stdin=subprocess.DEVNULL)
    deadline = time.time() + 15
    while time.time() < deadline and H.health(1.0) != 200:
        if H.S.proc.poll() is not None:
            break
        time.sleep(0.1)
    if not H.check("[%s] gateway B with --cold answers health" % tag, H.health(1.0) == 200,
                   H.log_tail()):
        H.finish()


def client_error_code(fn, *a, **kw):
    import botocore.exceptions
    try:
        fn(*a, **kw)
        return None, None
    except botocore.exceptions.ClientError as e:
        return (e.response.get("Error", {}).get("Code"),
                e.response.get("ResponseMetadata", {}).get("HTTPStatusCode"))


def suite(tag):
    from boto3.s3.transfer import TransferConfig
    c = H.boto3_client()
    b = "cold-%s" % tag
    c.create_bucket(Bucket=b)
    H.check("[%s] bucket listed" % tag, b in [x["Name"] for x in c.list_buckets()["Buckets"]])
    c.head_bucket(Bucket=b)

    # put/get/head with metadata, tricky keys
    keys = ["plain", "with space", "a+b", "uni-\u00e9\u6f22", "a//b", "q?x=1&y=2", "%41pct",
            "t~!*'()", "dir/sub/leaf"]
    for k in keys:
        data = os.urandom(3000)
        c.put_object(Bucket=b, Key=k, Body=data, ContentType="application/x-test",
                     CacheControl="max-age=5", ContentDisposition="attachment",
                     Metadata={"color": "blue", "n": "1"})
        r = c.get_object(Bucket=b, Key=k)
        got = r["Body"].read()
        H.eq("[%s] get %r bytes" % (tag, k), hashlib.sha256(got).hexdigest(),
             hashlib.sha256(data).hexdigest())
        h = c.head_object(Bucket=b, Key=k)
        H.eq("[%s] head %r size" % (tag, k), h["ContentLength"], len(data))
        H.eq("[%s] head %r etag" % (tag, k), h["ETag"].strip('"'), H.md5(data))
        H.eq("[%s] head %r content-type" % (tag, k), h["ContentType"], "application/x-test")
        H.eq("[%s] head %r cache-control" % (tag, k), h.get("CacheControl"), "max-age=5")
        H.eq("[%s] head %r metadata" % (tag, k), h["Metadata"], {"color": "blue", "n": "1"})

    # ranges on a 20 MiB object (several read windows)
    big = os.urandom(20 * H.MB + 12345)
    c.put_object(Bucket=b, Key="big", Body=big)
    for (lo, hi) in [(0, 0), (5, 99), (8 * H.MB - 10, 8 * H.MB + 10), (len(big) - 100,
                                                                        len(big) - 1),
                     (3 * H.MB, 19 * H.MB)]:
        r = c.get_object(Bucket=b, Key="big", Range="bytes=%d-%d" % (lo, hi))
        H.check("[%s] range %d-%d" % (tag, lo, hi), r["Body"].read() == big[lo:hi + 1])
    r = c.get_object(Bucket=b, Key="big")
    H.eq("[%s] full get of 20 MiB" % tag, hashlib.sha256(r["Body"].read()).hexdigest(),
         hashlib.sha256(big).hexdigest())

    # a spooled object over 64 MiB goes up as a multipart upload
    huge_path = os.path.join(H.S.tmp, "huge.bin")
    huge_sha = H.write_random_file(huge_path, 70 * H.MB)
    with open(huge_path, "rb") as f:
        c.put_object(Bucket=b, Key="huge", Body=f)
    r = c.get_object(Bucket=b, Key="huge")
    hs = hashlib.sha256()
    for chunk in iter(lambda: r["Body"].read(H.MB), b""):
        hs.update(chunk)
    H.eq("[%s] 70 MiB object round trip" % tag, hs.hexdigest(), huge_sha)

    # listing: prefix/delimiter and paging past 1000 keys
    many = ["many/k%05d" % i for i in range(1100)]
    import concurrent.futures as cf
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda k: c.put_object(Bucket=b, Key=k, Body=k.encode()), many))
    seen = []
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=b, Prefix="many/"):
        seen += [o["Key"] for o in page.get("Contents", [])]
    H.eq("[%s] paged listing of 1100 keys" % tag, seen, many)
    r = c.list_objects_v2(Bucket=b, Delimiter="/")
    H.eq("[%s] delimiter prefixes" % tag, [p["Prefix"] for p in r.get("CommonPrefixes", [])],
         ["a/", "dir/", "many/"])
    H.check("[%s] delimiter keys" % tag, "plain" in [o["Key"] for o in r.get("Contents", [])]
            and "with space" in [o["Key"] for o in r.get("Contents", [])], r.get("Contents"))
    pre, ks = [], []
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=b, Delimiter="/",
                                                            PaginationConfig={"PageSize": 2}):
        pre += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        ks += [o["Key"] for o in page.get("Contents", [])]
    H.eq("[%s] delimiter paging by 2: each prefix once" % tag, pre, ["a/", "dir/", "many/"])
    H.eq("[%s] delimiter paging by 2: keys" % tag, ks,
         [o["Key"] for o in r.get("Contents", [])])

    # copy (COPY and REPLACE)
    c.copy_object(Bucket=b, Key="copy1", CopySource={"Bucket": b, "Key": "with space"})
    h = c.head_object(Bucket=b, Key="copy1")
    H.eq("[%s] copy keeps metadata" % tag, h["Metadata"], {"color": "blue", "n": "1"})
    c.copy_object(Bucket=b, Key="copy2", CopySource={"Bucket": b, "Key": "a+b"},
                  MetadataDirective="REPLACE", Metadata={"x": "y"}, ContentType="text/plain")
    h = c.head_object(Bucket=b, Key="copy2")
    H.eq("[%s] copy REPLACE metadata" % tag, (h["Metadata"], h["ContentType"]),
         ({"x": "y"}, "text/plain"))
    H.eq("[%s] copy bytes" % tag, c.get_object(Bucket=b, Key="copy2")["Body"].read(),
         c.get_object(Bucket=b, Key="a+b")["Body"].read())

    # multipart: 3 parts, one of them a part copy
    parts_data = [os.urandom(5 * H.MB), os.urandom(5 * H.MB), None]
    mpu = c.create_multipart_upload(Bucket=b, Key="mpu obj", ContentType="application/x-mpu",
                                    Metadata={"m": "p"})
    uid = mpu["UploadId"]
    ups = c.list_multipart_uploads(Bucket=b)
    H.check("[%s] upload listed" % tag, uid in [u["UploadId"] for u in ups.get("Uploads", [])])
    etags = []
    for i in range(2):
        etags.append(c.upload_part(Bucket=b, Key="mpu obj", UploadId=uid, PartNumber=i + 1,
                                   Body=parts_data[i])["ETag"])
    r = c.upload_part_copy(Bucket=b, Key="mpu obj", UploadId=uid, PartNumber=3,
                           CopySource={"Bucket": b, "Key": "big"},
                           CopySourceRange="bytes=100-1099")
    etags.append(r["CopyPartResult"]["ETag"])
    lp = c.list_parts(Bucket=b, Key="mpu obj", UploadId=uid)
    H.eq("[%s] list parts" % tag, [(p["PartNumber"], p["Size"]) for p in lp["Parts"]],
         [(1, 5 * H.MB), (2, 5 * H.MB), (3, 1000)])
    c.complete_multipart_upload(Bucket=b, Key="mpu obj", UploadId=uid, MultipartUpload={
        "Parts": [{"PartNumber": i + 1, "ETag": e} for i, e in enumerate(etags)]})
    whole = parts_data[0] + parts_data[1] + big[100:1100]
    r = c.get_object(Bucket=b, Key="mpu obj")
    H.check("[%s] multipart object bytes" % tag, r["Body"].read() == whole)
    H.eq("[%s] multipart object metadata" % tag, (r["ContentType"], r["Metadata"]),
         ("application/x-mpu", {"m": "p"}))
    H.check("[%s] multipart ETag -3" % tag, r["ETag"].strip('"').endswith("-3"), r["ETag"])
    uid2 = c.create_multipart_upload(Bucket=b, Key="aborted")["UploadId"]
    c.abort_multipart_upload(Bucket=b, Key="aborted", UploadId=uid2)
    H.eq("[%s] abort, then NoSuchUpload" % tag,
         client_error_code(c.list_parts, Bucket=b, Key="aborted", UploadId=uid2)[0],
         "NoSuchUpload")

    # errors
    H.eq("[%s] NoSuchKey" % tag, client_error_code(c.get_object, Bucket=b, Key="nope"),
         ("NoSuchKey", 404))
    H.eq("[%s] NoSuchBucket" % tag,
         client_error_code(c.get_object, Bucket="no-such-bucket-x", Key="k")[0],
         "NoSuchBucket")
    H.eq("[%s] head missing key 404" % tag,
         client_error_code(c.head_object, Bucket=b, Key="nope")[1], 404)

    # delete
    c.delete_object(Bucket=b, Key="plain")
    H.eq("[%s] deleted key is gone" % tag,
         client_error_code(c.get_object, Bucket=b, Key="plain")[0], "NoSuchKey")
    H.eq("[%s] bucket not empty" % tag, client_error_code(c.delete_bucket, Bucket=b)[0],
         "BucketNotEmpty")


def a_requests(port):
    """A's requests by (op, code): from its GET /metrics, else counted from
    its access log ("access: req=... GET GetObject bucket=... status=200")."""
    url = "http://127.0.0.1:%d/metrics" % port
    hdrs = H.sign_headers("GET", url, access=COLD_ACCESS, secret=COLD_SECRET)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/metrics", headers=hdrs)
        r = conn.getresponse()
        body = r.read().decode("utf-8", "replace")
    finally:
        conn.close()
    out = {}
    if r.status == 200 and "shardgate_requests_total" in body:
        for m in re.finditer(r'^shardgate_requests_total\{op="(\w+)",code="(\w+)"\} (\d+)$',
                             body, re.M):
            out[(m.group(1), m.group(2))] = int(m.group(3))
        return out
    with open(os.path.join(H.S.tmp, "gateway-a.log"), errors="replace") as f:
        for line in f:
            m = re.search(r"access: req=\S+ \S+ (\w+) .*status=(\d+)", line)
            if m:
                out[(m.group(1), m.group(2))] = out.get((m.group(1), m.group(2)), 0) + 1
    return out


def object_reads(a_port):
    """A cold object read through B costs A one GET (no HEAD); ranges are right."""
    c = H.boto3_client()
    b = "cold-sg"
    data = os.urandom(40 * H.MB + 777)
    c.put_object(Bucket=b, Key="forty", Body=data)

    def delta(before):
        after = a_requests(a_port)
        return {k: after.get(k, 0) - before.get(k, 0) for k in set(after) | set(before)
                if k[0] in ("GetObject", "HeadObject") and after.get(k, 0) != before.get(k, 0)}

    # A counts a request when it completes, which can be just after its
    # client (B) has the answer: let the put's own requests land first.
    before = a_requests(a_port)
    for _ in range(50):
        time.sleep(0.1)
        again = a_requests(a_port)
        if again == before:
            break
        before = again
    r = c.get_object(Bucket=b, Key="forty")
    got = r["Body"].read()
    d = delta(before)
    H.eq("[sg] full GET of 40 MiB through B: bytes", hashlib.sha256(got).hexdigest(),
         hashlib.sha256(data).hexdigest())
    H.eq("[sg] full GET of 40 MiB through B: one GetObject, no HeadObject on A", d,
         {("GetObject", "200"): 1})
    n = len(data)
    for (lo, hi) in [(0, 0), (1000, 1999), (4 * H.MB - 3, 4 * H.MB + 3),
                     (8 * H.MB + 1, 8 * H.MB + 100), (20 * H.MB, 33 * H.MB), (n - 10, n - 1)]:
        r = c.get_object(Bucket=b, Key="forty", Range="bytes=%d-%d" % (lo, hi))
        H.check("[sg] 40 MiB range %d-%d through B" % (lo, hi), r["Body"].read() == data[lo:hi + 1])
    r = c.get_object(Bucket=b, Key="forty", Range="bytes=-100")
    H.check("[sg] 40 MiB suffix range through B", r["Body"].read() == data[-100:])
    # a reader that stops early: B closes the object with its GET unfinished
    gets = lambda: sum(v for k, v in a_requests(a_port).items() if k[0] == "GetObject")
    n0 = gets()
    for _ in range(50):   # the range GETs above are counted when they complete on A
        time.sleep(0.1)
        again = gets()
        if again == n0:
            break
        n0 = again
    r = c.get_object(Bucket=b, Key="forty")
    H.check("[sg] first MiB of a full GET", r["Body"].read(H.MB) == data[:H.MB])
    r["Body"].close()
    deadline = time.time() + 10   # A counts the GET when it sees it aborted
    while gets() < n0 + 1 and time.time() < deadline:
        time.sleep(0.05)
    H.eq("[sg] early close: A saw the one GET end", gets(), n0 + 1)
    # A counts a request when it completes, which can be just after its
    # client (B) has the answer: let the put's own requests land first.
    before = a_requests(a_port)
    for _ in range(50):
        time.sleep(0.1)
        again = a_requests(a_port)
        if again == before:
            break
        before = again
    r = c.get_object(Bucket=b, Key="forty")
    H.check("[sg] full GET again after an early close", r["Body"].read() == data)
    H.eq("[sg] full GET again: one GetObject on A", delta(before), {("GetObject", "200"): 1})


def sanitizer_clean(tag):
    with open(H.S.log_path, errors="replace") as f:
        bad = [ln for ln in f if "AddressSanitizer" in ln or "LeakSanitizer" in ln
               or "runtime error:" in ln]
    H.check("[%s] no sanitizer report in B's log" % tag, not bad, "".join(bad[:5]))


def tier_down(tag, cold_proc):
    import botocore.exceptions
    cold_proc.terminate()
    cold_proc.wait(30)
    c = H.boto3_client()
    t0 = time.time()
    code = None
    try:
        c.get_object(Bucket="cold-%s" % tag, Key="with space")
    except botocore.exceptions.ClientError as e:
        code = e.response["ResponseMetadata"]["HTTPStatusCode"]
    dt = time.time() - t0
    H.eq("[%s] cold tier down: 503" % tag, code, 503)
    H.check("[%s] cold tier down: answered within 2 s" % tag, dt < 2.0, "%.2f s" % dt)


def main():
    try:
        import boto3  # noqa: F401
        import moto  # noqa: F401
    except ImportError as e:
        H.skip_file("needs boto3 and moto: %s" % e)
    if not os.environ.get("SHARDGATE_BIN"):
        H.skip_file("SHARDGATE_BIN not set")
    H.S.name = "test_cold_s3"
    H._ensure_tmp()

    moto_p, moto_port = start_moto()
    start_gateway_b("http://127.0.0.1:%d" % moto_port, "moto", "moto", "moto")
    suite("moto")
    tier_down("moto", moto_p)
    log_path = H.S.log_path
    H._stop_gateway(report=True)
    H.S.log_path = log_path
    sanitizer_clean("moto")

    a, a_port = start_gateway_a()
    start_gateway_b("http://127.0.0.1:%d" % a_port, COLD_ACCESS, COLD_SECRET, "sg")
    suite("sg")
    object_reads(a_port)
    # The posix cold tier refuses what it cannot store (a "." segment).
    H.eq("[sg] key the cold tier refuses: InvalidArgument",
         client_error_code(H.boto3_client().put_object, Bucket="cold-sg", Key="d/./e",
                           Body=b"x")[0], "InvalidArgument")
    tier_down("sg", a)
    log_path = H.S.log_path
    H._stop_gateway(report=True)
    H.S.log_path = log_path
    sanitizer_clean("sg")


H.run(main)
