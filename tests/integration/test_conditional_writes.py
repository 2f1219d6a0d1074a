"""tests/integration/test_conditional_writes.py - conditional writes (issue 12,
AWS 2024) with real clients, in both modes: the directory store (`--data`)
and the cache in front of another shardgate as the cold tier (`--cold`: the
cold tier decides; moto 5.2 checks neither If-Match on Complete nor the
conditions of CopyObject). The same checks run in each:
  * boto3 1.43: put_object, copy_object (the destination) and
    complete_multipart_upload with IfNoneMatch="*" and IfMatch=ETag:
    412 PreconditionFailed when the condition fails (nothing changes, the
    upload stays), 404 NoSuchKey for If-Match on a missing key, 200 when it
    holds; If-Match with or without quotes;
  * If-None-Match other than "*", and both headers at once: 501
    NotImplemented (as AWS answers them);
  * a race: 8 threads PUT the same new key with If-None-Match: * at once,
    6 rounds: exactly one wins each round (the others 412), and the key holds
    the winner's bytes;
  * Debian's boto3 1.26 (no IfNoneMatch parameter: the header added by an
    event handler) and curl --aws-sigv4 send the headers themselves.
Directory store only: a refused write leaves no temp file. Cache only: a
refused conditional write keeps the cached copy (the next read is a hit, no
GET reaches the cold tier), a successful one drops it; a condition is decided
on what the cold tier holds (an object written there behind the cache's back);
a PUT over 64 MiB (a multipart upload to the cold tier) carries its condition
on the Complete, and a refused one leaves no upload behind.
Skips (77) when boto3 is missing or too old to send IfNoneMatch (< 1.35)."""

import os
import shutil
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import cache_common as C  # noqa: E402

check, eq = H.check, H.eq
RACERS, ROUNDS = 8, 6
CURL = shutil.which("curl")


def err(fn, *a, **kw):
    code, status, _ = H.client_error(fn, *a, **kw)
    return (code, status)


def body(c, b, k):
    return c.get_object(Bucket=b, Key=k)["Body"].read()


# ---------------------------------------------------------------- the checks

def puts(m, c, b):
    r = c.put_object(Bucket=b, Key="k", Body=b"first", IfNoneMatch="*")
    eq("[%s] put_object IfNoneMatch=* of a new key: 200" % m,
       r["ResponseMetadata"]["HTTPStatusCode"], 200)
    e1 = r["ETag"]
    eq("[%s] put_object IfNoneMatch=* of an existing key: 412 PreconditionFailed" % m,
       err(c.put_object, Bucket=b, Key="k", Body=b"second", IfNoneMatch="*"),
       ("PreconditionFailed", 412))
    eq("[%s] the refused PUT changed nothing" % m, body(c, b, "k"), b"first")
    r = c.put_object(Bucket=b, Key="k", Body=b"second", IfMatch=e1)
    e2 = r["ETag"]
    eq("[%s] put_object IfMatch=current ETag: 200, replaced" % m, body(c, b, "k"), b"second")
    eq("[%s] put_object IfMatch=an old ETag: 412" % m,
       err(c.put_object, Bucket=b, Key="k", Body=b"third", IfMatch=e1),
       ("PreconditionFailed", 412))
    eq("[%s] put_object IfMatch on a missing key: 404 NoSuchKey" % m,
       err(c.put_object, Bucket=b, Key="missing", Body=b"x", IfMatch=e1), ("NoSuchKey", 404))
    eq("[%s] no object made by the refused If-Match" % m,
       err(c.head_object, Bucket=b, Key="missing"), ("404", 404))
    c.put_object(Bucket=b, Key="k", Body=b"third", IfMatch=e2.strip('"'))
    eq("[%s] If-Match without quotes compares the same" % m, body(c, b, "k"), b"third")
    eq("[%s] If-None-Match with an ETag on PUT: 501 NotImplemented" % m,
       err(c.put_object, Bucket=b, Key="k", Body=b"x", IfNoneMatch=e1),
       ("NotImplemented", 501))
    r = H.raw("PUT", "/%s/k" % b, body=b"x", headers={"If-None-Match": "*", "If-Match": "*"})
    eq("[%s] If-None-Match and If-Match together on PUT: 501 NotImplemented" % m,
       (r.status, (r.error() or {}).get("Code")), (501, "NotImplemented"))
    eq("[%s] the object is unchanged after the refusals" % m, body(c, b, "k"), b"third")


def copies(m, c, b):
    c.put_object(Bucket=b, Key="src", Body=b"source")
    e = c.put_object(Bucket=b, Key="dst", Body=b"old dst")["ETag"]
    src = "%s/src" % b
    eq("[%s] copy_object IfNoneMatch=* onto an existing key: 412" % m,
       err(c.copy_object, Bucket=b, Key="dst", CopySource=src, IfNoneMatch="*"),
       ("PreconditionFailed", 412))
    eq("[%s] copy_object IfMatch=another ETag: 412" % m,
       err(c.copy_object, Bucket=b, Key="dst", CopySource=src, IfMatch='"%s"' % ("0" * 32)),
       ("PreconditionFailed", 412))
    eq("[%s] copy_object IfMatch onto a missing key: 404 NoSuchKey" % m,
       err(c.copy_object, Bucket=b, Key="nodst", CopySource=src, IfMatch=e),
       ("NoSuchKey", 404))
    eq("[%s] the refused copies changed nothing" % m, body(c, b, "dst"), b"old dst")
    c.copy_object(Bucket=b, Key="dst", CopySource=src, IfMatch=e)
    eq("[%s] copy_object IfMatch=the destination's ETag: copied" % m, body(c, b, "dst"),
       b"source")
    c.copy_object(Bucket=b, Key="dst2", CopySource=src, IfNoneMatch="*")
    eq("[%s] copy_object IfNoneMatch=* to a new key: copied" % m, body(c, b, "dst2"), b"source")


def uploads(m, c, b):
    e = c.put_object(Bucket=b, Key="mp", Body=b"old")["ETag"]
    up = c.create_multipart_upload(Bucket=b, Key="mp")["UploadId"]
    p1 = c.upload_part(Bucket=b, Key="mp", UploadId=up, PartNumber=1, Body=b"a" * (5 * H.MB))
    p2 = c.upload_part(Bucket=b, Key="mp", UploadId=up, PartNumber=2, Body=b"tail")
    mpu = {"Parts": [{"PartNumber": 1, "ETag": p1["ETag"]}, {"PartNumber": 2, "ETag": p2["ETag"]}]}
    eq("[%s] complete_multipart_upload IfNoneMatch=* on an existing key: 412" % m,
       err(c.complete_multipart_upload, Bucket=b, Key="mp", UploadId=up, MultipartUpload=mpu,
           IfNoneMatch="*"), ("PreconditionFailed", 412))
    eq("[%s] complete_multipart_upload IfMatch=another ETag: 412" % m,
       err(c.complete_multipart_upload, Bucket=b, Key="mp", UploadId=up, MultipartUpload=mpu,
           IfMatch='"%s"' % ("0" * 32)), ("PreconditionFailed", 412))
    eq("[%s] the object is unchanged and the upload still there" % m,
       (body(c, b, "mp"), len(c.list_parts(Bucket=b, Key="mp", UploadId=up)["Parts"])),
       (b"old", 2))
    r = c.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up, MultipartUpload=mpu,
                                    IfMatch=e)
    got = body(c, b, "mp")
    eq("[%s] complete_multipart_upload IfMatch=current ETag: assembled" % m,
       (r["ETag"].endswith('-2"'), len(got), got[-4:]), (True, 5 * H.MB + 4, b"tail"))
    up = c.create_multipart_upload(Bucket=b, Key="mp-new")["UploadId"]
    p1 = c.upload_part(Bucket=b, Key="mp-new", UploadId=up, PartNumber=1, Body=b"only part")
    one = {"Parts": [{"PartNumber": 1, "ETag": p1["ETag"]}]}
    eq("[%s] complete_multipart_upload IfMatch on a missing key: 404 NoSuchKey" % m,
       err(c.complete_multipart_upload, Bucket=b, Key="mp-new", UploadId=up,
           MultipartUpload=one, IfMatch=e), ("NoSuchKey", 404))
    c.complete_multipart_upload(Bucket=b, Key="mp-new", UploadId=up, MultipartUpload=one,
                                IfNoneMatch="*")
    eq("[%s] complete_multipart_upload IfNoneMatch=* of a new key: made" % m,
       body(c, b, "mp-new"), b"only part")


def race(m, c, b):
    """RACERS clients PUT one new key with If-None-Match: * at once."""
    clients = [H.boto3_client() for _ in range(RACERS)]
    for rnd in range(ROUNDS):
        key = "race/%d" % rnd
        gate = threading.Barrier(RACERS)
        out = [None] * RACERS

        def go(i):
            gate.wait()
            out[i] = err(clients[i].put_object, Bucket=b, Key=key,
                         Body=("writer %d" % i).encode(), IfNoneMatch="*")
        th = [threading.Thread(target=go, args=(i,)) for i in range(RACERS)]
        for t in th:
            t.start()
        for t in th:
            t.join(120)
        winners = [i for i, r in enumerate(out) if r == (None, None)]
        lost = [r for r in out if r == ("PreconditionFailed", 412)]
        ok = len(winners) == 1 and len(lost) == RACERS - 1
        check("[%s] round %d: %d racing If-None-Match PUTs, exactly one wins, the rest 412"
              % (m, rnd, RACERS), ok, out)
        if ok:
            eq("[%s] round %d: the key holds the winner's bytes" % (m, rnd),
               body(c, b, key), ("writer %d" % winners[0]).encode())


DEBIAN_SCRIPT = r"""
import json, os, boto3
from botocore.config import Config
from botocore.exceptions import ClientError
c = boto3.client("s3", endpoint_url=os.environ["EP"], region_name="us-east-1",
                 aws_access_key_id=os.environ["AK"], aws_secret_access_key=os.environ["SK"],
                 config=Config(s3={"addressing_style": "path"}, signature_version="s3v4",
                               retries={"max_attempts": 1}))
def inm(request, **kw):
    request.headers["If-None-Match"] = "*"
c.meta.events.register("before-sign.s3.PutObject", inm)
out = [boto3.__version__]
for body in (b"deb 1", b"deb 2"):
    try:
        c.put_object(Bucket=os.environ["B"], Key="deb", Body=body)
        out.append(200)
    except ClientError as e:
        out.append([e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]])
print(json.dumps(out))
"""


def other_clients(m, c, b):
    if os.path.exists(H.DEBIAN_PYTHON):
        got, detail = H.debian_boto3(DEBIAN_SCRIPT, B=b)
        check("[%s] Debian boto3 1.26 with If-None-Match: * added: 200 then 412" % m,
              got and got[0].startswith("1.26") and got[1:] == [200, ["PreconditionFailed", 412]],
              detail)
        eq("[%s] and the first write stayed" % m, body(c, b, "deb"), b"deb 1")
    else:
        H.skip("[%s] Debian boto3 1.26 conditional PUT" % m, "no /usr/bin/python3")
    rc, out, _ = H.run_cmd([CURL, "--help", "all"], timeout=30) if CURL else (1, "", "")
    if rc != 0 or "--aws-sigv4" not in out:
        H.skip("[%s] curl --aws-sigv4 conditional PUT" % m, "no curl with --aws-sigv4")
        return
    e = c.head_object(Bucket=b, Key="deb")["ETag"]
    url = "%s/%s/curl" % (H.S.endpoint, b)
    base = [CURL, "-s", "-o", "/dev/null", "-w", "%{http_code}", "--aws-sigv4",
            "aws:amz:%s:s3" % H.REGION, "--user", "%s:%s" % (H.ACCESS_KEY, H.SECRET_KEY),
            "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-X", "PUT"]
    codes = []
    for hdr, data in (("If-None-Match: *", "c1"), ("If-None-Match: *", "c2"),
                      ("If-Match: %s" % e, "c3")):
        rc, so, se = H.run_cmd(base + ["-H", hdr, "--data-binary", data, url], timeout=60)
        codes.append(so.strip())
    eq("[%s] curl --aws-sigv4: If-None-Match: * 200 then 412, a stale If-Match 412" % m,
       codes, ["200", "412", "412"])
    eq("[%s] curl's first write stayed" % m, body(c, b, "curl"), b"c1")


def suite(m, b):
    c = H.boto3_client()
    c.create_bucket(Bucket=b)
    for checks in (puts, copies, uploads, race, other_clients):
        checks(m, c, b)
    return c


# ---------------------------------------------------------------- the modes

def local_store():
    H.start("test_conditional_writes")
    b = "cond-local"
    suite("local", b)
    tmp = os.path.join(H.direct_path(b), ".sg~tmp")
    eq("[local] the refused writes left no temp file",
       sorted(os.listdir(tmp)) if os.path.isdir(tmp) else [], [])
    H._stop_gateway(report=True)


def cache_over_shardgate():
    cold = C.ColdGateway().start()
    b = "cond-cache"
    conf = {"buckets": {b: {"consistency": "immutable"}}}
    C.start_cache(C.Cache(cold.endpoint, cold.access, cold.secret, size="256MiB",
                          config=conf, tag="cond"))
    c = suite("cache", b)
    # the cached copy: kept by a refused conditional write, dropped by a good one
    e = c.put_object(Bucket=b, Key="hot", Body=b"hot v1")["ETag"]
    eq("[cache] a read through the cache", body(c, b, "hot"), b"hot v1")

    def hit():
        body(c, b, "hot")
        return any("bucket=%s " % b in l and "read=hit" in l for l in H.log_grep("key=hot"))
    check("[cache] a later read is a hit", C.wait_until(hit, timeout=30, step=0.2))
    gets = cold.gets()
    eq("[cache] a refused If-None-Match PUT of a cached key: 412",
       err(c.put_object, Bucket=b, Key="hot", Body=b"hot v2", IfNoneMatch="*"),
       ("PreconditionFailed", 412))
    eq("[cache] a refused If-Match PUT of a cached key: 412",
       err(c.put_object, Bucket=b, Key="hot", Body=b"hot v2", IfMatch='"%s"' % ("0" * 32)),
       ("PreconditionFailed", 412))
    eq("[cache] the next read has the old bytes from the cache (no GET to the cold tier)",
       (body(c, b, "hot"), cold.gets() - gets), (b"hot v1", 0))
    c.put_object(Bucket=b, Key="hot", Body=b"hot v2", IfMatch=e)
    eq("[cache] after a successful If-Match PUT the next read has the new bytes",
       body(c, b, "hot"), b"hot v2")
    # the cold tier decides: an object written there behind the cache's back
    ac = cold.client()
    ea = ac.put_object(Bucket=b, Key="behind", Body=b"made in A")["ETag"]
    eq("[cache] If-None-Match: * on a key only the cold tier holds: 412",
       err(c.put_object, Bucket=b, Key="behind", Body=b"x", IfNoneMatch="*"),
       ("PreconditionFailed", 412))
    c.put_object(Bucket=b, Key="behind", Body=b"replaced", IfMatch=ea)
    eq("[cache] If-Match with the cold tier's ETag: replaced there",
       body(ac, b, "behind"), b"replaced")
    # over 64 MiB the cache sends a PUT to the cold tier as a multipart
    # upload: the condition goes on its Complete, and a refused one is aborted
    big = os.urandom(65 * H.MB)
    eq("[cache] a 65 MiB If-None-Match PUT of an existing key: 412",
       err(c.put_object, Bucket=b, Key="behind", Body=big, IfNoneMatch="*"),
       ("PreconditionFailed", 412))
    eq("[cache] no upload left in the cold tier by the refused Complete",
       ac.list_multipart_uploads(Bucket=b).get("Uploads", []), [])
    eb = ac.head_object(Bucket=b, Key="behind")["ETag"]
    c.put_object(Bucket=b, Key="behind", Body=big, IfMatch=eb)
    h = ac.head_object(Bucket=b, Key="behind")
    eq("[cache] a 65 MiB If-Match PUT: stored in the cold tier as a multipart object",
       (h["ContentLength"], h["ETag"].endswith('-5"')), (len(big), True))
    C.stop_cache()


def main():
    C.need_clients()
    import boto3
    ops = boto3.session.Session().client("s3", region_name=H.REGION).meta.service_model
    if "IfNoneMatch" not in ops.operation_model("PutObject").input_shape.members:
        H.skip_file("boto3 %s cannot send IfNoneMatch (needs 1.35 or later)" % boto3.__version__)
    C.both_modes("test_conditional_writes", local_store, cache_over_shardgate)


H.run(main)
