"""tests/integration/test_mpu_parts.py - GET/HEAD ?partNumber=N and a repeated
CompleteMultipartUpload (issue 12), as AWS S3 answers them, in both modes: the
directory store (`--data`) and the cache in front of moto (`--cold`,
`--cache-dir`). The same checks run in each:
  * boto3 1.43 get_object / head_object(PartNumber=N) on an object of three
    parts of different sizes: 206, the part's bytes (byte for byte),
    ContentRange "bytes a-b/total", PartsCount 3, the multipart ETag, the
    part's ContentLength; a one-part upload answers PartsCount 1;
  * a PUT object: part 1 is the whole object (206 with a Content-Range over
    everything, no PartsCount), part 2 is 416 InvalidPartNumber;
  * beyond the parts: 416 InvalidPartNumber (GET and HEAD); partNumber 0,
    10001 or "x": 400 InvalidArgument; partNumber with a Range: 400
    InvalidRequest;
  * curl --aws-sigv4 and Debian's boto3 1.26 read a part too;
  * Complete sent again with the same parts: 200, the same ETag, Bucket and
    Key; with another parts list: 404 NoSuchUpload.
Directory store only: a restart keeps the part boundaries (and the record of
the completed upload); an object whose boundaries were not kept answers 501.
Cache only: a part read of a cached object is a hit; after the object is
replaced in the cold tier, a part read gives the new object, not the cached
copy.
Skips (77) when boto3 or moto is missing."""

import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import cache_common as C  # noqa: E402

check, eq = H.check, H.eq
CURL = shutil.which("curl")
SIZES = [5 * H.MB + 1, 5 * H.MB, 1000]     # parts of three sizes: three runs stored
PARTS = {}


def err(fn, *a, **kw):
    code, status, _ = H.client_error(fn, *a, **kw)
    return (code, status)


def upload(c, b, key, sizes):
    """A multipart object of parts of `sizes`: (the parts' bytes, Complete's
    answer, the upload id, the parts list)."""
    up = c.create_multipart_upload(Bucket=b, Key=key)
    datas, parts = [], []
    for i, n in enumerate(sizes):
        d = os.urandom(n)
        r = c.upload_part(Bucket=b, Key=key, UploadId=up["UploadId"], PartNumber=i + 1, Body=d)
        datas.append(d)
        parts.append({"PartNumber": i + 1, "ETag": r["ETag"]})
    done = c.complete_multipart_upload(Bucket=b, Key=key, UploadId=up["UploadId"],
                                       MultipartUpload={"Parts": parts})
    return datas, done, up["UploadId"], parts


def check_parts(m, c, b, key, datas, etag, what=""):
    total = sum(len(d) for d in datas)
    off = 0
    for i, d in enumerate(datas):
        n = i + 1
        cr = "bytes %d-%d/%d" % (off, off + len(d) - 1, total)
        g = c.get_object(Bucket=b, Key=key, PartNumber=n)
        body = g["Body"].read()
        eq("[%s]%s get_object(PartNumber=%d): 206, range, count, ETag, length" % (m, what, n),
           (g["ResponseMetadata"]["HTTPStatusCode"], g.get("ContentRange"), g.get("PartsCount"),
            g["ETag"], g["ContentLength"]), (206, cr, len(datas), etag, len(d)))
        check("[%s]%s part %d's bytes, byte for byte" % (m, what, n), body == d,
              (len(body), len(d)))
        h = c.head_object(Bucket=b, Key=key, PartNumber=n)
        eq("[%s]%s head_object(PartNumber=%d)" % (m, what, n),
           (h["ResponseMetadata"]["HTTPStatusCode"], h.get("ContentRange"), h.get("PartsCount"),
            h["ETag"], h["ContentLength"]), (206, cr, len(datas), etag, len(d)))
        off += len(d)


def part_reads(m, c, b):
    datas, done, _, _ = upload(c, b, "mp", SIZES)
    PARTS["mp"] = (datas, done["ETag"])
    check("[%s] the multipart ETag ends in -3" % m, done["ETag"].endswith('-3"'), done)
    check_parts(m, c, b, "mp", datas, done["ETag"])
    eq("[%s] GET partNumber beyond the parts: 416 InvalidPartNumber" % m,
       err(c.get_object, Bucket=b, Key="mp", PartNumber=4), ("InvalidPartNumber", 416))
    eq("[%s] HEAD partNumber beyond the parts: 416" % m,
       err(c.head_object, Bucket=b, Key="mp", PartNumber=4)[1], 416)
    g = c.get_object(Bucket=b, Key="mp")
    eq("[%s] a plain GET is still the whole object, 200, no PartsCount" % m,
       (g["ResponseMetadata"]["HTTPStatusCode"], g.get("PartsCount"), g["Body"].read()),
       (200, None, b"".join(datas)))

    one, d1, _, _ = upload(c, b, "mp1", [4321])
    check_parts(m, c, b, "mp1", one, d1["ETag"], " one-part upload:")

    body = os.urandom(70001)
    put = c.put_object(Bucket=b, Key="plain", Body=body)
    g = c.get_object(Bucket=b, Key="plain", PartNumber=1)
    eq("[%s] PUT object, part 1: 206 over the whole object, no PartsCount" % m,
       (g["ResponseMetadata"]["HTTPStatusCode"], g.get("ContentRange"), g.get("PartsCount"),
        g["ETag"], g["Body"].read() == body), (206, "bytes 0-70000/70001", None, put["ETag"],
                                               True))
    h = c.head_object(Bucket=b, Key="plain", PartNumber=1)
    eq("[%s] PUT object, HEAD part 1" % m, (h["ResponseMetadata"]["HTTPStatusCode"],
                                            h.get("ContentRange"), h["ContentLength"]),
       (206, "bytes 0-70000/70001", 70001))
    eq("[%s] PUT object, part 2: 416 InvalidPartNumber" % m,
       err(c.get_object, Bucket=b, Key="plain", PartNumber=2), ("InvalidPartNumber", 416))
    eq("[%s] a missing key with partNumber: 404 NoSuchKey" % m,
       err(c.get_object, Bucket=b, Key="nope", PartNumber=1), ("NoSuchKey", 404))


def bad_requests(m, b):
    for q in ("partNumber=0", "partNumber=10001", "partNumber=x", "partNumber=",
              "partNumber=-1"):
        r = H.raw("GET", "/%s/mp" % b, query=q)
        eq("[%s] GET ?%s: 400 InvalidArgument" % (m, q),
           (r.status, (r.error() or {}).get("Code")), (400, "InvalidArgument"))
    r = H.raw("GET", "/%s/mp" % b, query="partNumber=1", headers={"Range": "bytes=0-9"})
    eq("[%s] partNumber with a Range: 400 InvalidRequest" % m,
       (r.status, (r.error() or {}).get("Code")), (400, "InvalidRequest"))
    r = H.raw("HEAD", "/%s/mp" % b, query="partNumber=9")
    eq("[%s] raw HEAD beyond the parts: 416, no body" % m, (r.status, r.body), (416, b""))


def other_clients(m, b):
    datas, etag = PARTS["mp"]
    if CURL:
        out = os.path.join(H.tmpdir("curl"), "part2")
        rc, so, se = H.run_cmd([CURL, "-s", "-S", "-o", out, "-D", "-", "-w", "%{http_code}",
                                "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                                "--aws-sigv4", "aws:amz:%s:s3" % H.REGION, "--user",
                                "%s:%s" % (H.ACCESS_KEY, H.SECRET_KEY),
                                "%s/%s/mp?partNumber=2" % (H.S.endpoint, b)], timeout=60)
        low = so.lower()
        check("[%s] curl --aws-sigv4 ?partNumber=2: 206 with the part's bytes" % m,
              rc == 0 and so.endswith("206") and open(out, "rb").read() == datas[1] and
              "x-amz-mp-parts-count: 3" in low and
              ("content-range: bytes %d-%d/" % (len(datas[0]), len(datas[0]) + len(datas[1]) - 1))
              in low, (rc, so[:600], se[-300:]))
    else:
        H.skip("[%s] curl ?partNumber" % m, "curl not found")
    if os.path.exists(H.DEBIAN_PYTHON):
        got, detail = H.debian_boto3(
            "import boto3, json, os, hashlib\n"
            "c = boto3.client('s3', endpoint_url=os.environ['EP'],"
            " aws_access_key_id=os.environ['AK'], aws_secret_access_key=os.environ['SK'],"
            " region_name='us-east-1')\n"
            "g = c.get_object(Bucket=os.environ['B'], Key='mp', PartNumber=3)\n"
            "print(json.dumps([boto3.__version__, g['PartsCount'], g['ContentRange'],"
            " hashlib.sha256(g['Body'].read()).hexdigest()]))\n", B=b)
        total = sum(len(d) for d in datas)
        eq("[%s] Debian's boto3 get_object(PartNumber=3)" % m, got and got[1:],
           [3, "bytes %d-%d/%d" % (total - len(datas[2]), total - 1, total),
            H.sha256(datas[2])], detail)
    else:
        H.skip("[%s] Debian's boto3" % m, "no %s" % H.DEBIAN_PYTHON)


def repeat_complete(m, c, b):
    datas, done, uid, parts = upload(c, b, "again", [5 * H.MB, 10])
    r = c.complete_multipart_upload(Bucket=b, Key="again", UploadId=uid,
                                    MultipartUpload={"Parts": parts})
    eq("[%s] Complete again, same parts: 200, same ETag, Bucket, Key" % m,
       (r["ResponseMetadata"]["HTTPStatusCode"], r["ETag"], r["Bucket"], r["Key"]),
       (200, done["ETag"], b, "again"))
    eq("[%s] Complete again with another parts list: 404 NoSuchUpload" % m,
       err(c.complete_multipart_upload, Bucket=b, Key="again", UploadId=uid,
           MultipartUpload={"Parts": parts[:1]}), ("NoSuchUpload", 404))
    eq("[%s] Complete again under another key: 404 NoSuchUpload" % m,
       err(c.complete_multipart_upload, Bucket=b, Key="other", UploadId=uid,
           MultipartUpload={"Parts": parts}), ("NoSuchUpload", 404))
    eq("[%s] the object is unchanged" % m, c.get_object(Bucket=b, Key="again")["Body"].read(),
       b"".join(datas))
    PARTS["again"] = (uid, parts, done["ETag"])


def suite(m, b):
    """Every check of both modes on a new bucket b; the client it used."""
    c = H.boto3_client()
    c.create_bucket(Bucket=b)
    part_reads(m, c, b)
    bad_requests(m, b)
    other_clients(m, b)
    repeat_complete(m, c, b)
    return c


# ---------------------------------------------------------------- the modes

def local_store():
    b = "parts-local"
    H.start("test_mpu_parts")
    suite("local", b)
    x = os.getxattr(H.direct_path(b, "mp"), "user.shardgate.parts")
    eq("[local] the part sizes are kept run-length in an xattr", x,
       b"SGP1 5242881*1,5242880*1,1000*1")
    C.restart_local()
    c = H.boto3_client()
    datas, etag = PARTS["mp"]
    check_parts("local", c, b, "mp", datas, etag, " after a restart:")
    uid, parts, etag = PARTS["again"]
    r = c.complete_multipart_upload(Bucket=b, Key="again", UploadId=uid,
                                    MultipartUpload={"Parts": parts})
    eq("[local] after a restart, Complete again still answers the same ETag",
       (r["ResponseMetadata"]["HTTPStatusCode"], r["ETag"]), (200, etag))
    # a multipart object whose boundaries were not kept (completed by an older
    # shardgate): its parts cannot be told apart
    os.removexattr(H.direct_path(b, "mp"), "user.shardgate.parts")
    code, status, _ = H.client_error(c.get_object, Bucket=b, Key="mp", PartNumber=1)
    eq("[local] part boundaries not kept: 501 NotImplemented", (code, status),
       ("NotImplemented", 501))
    r = H.raw("GET", "/%s/mp" % b, query="partNumber=1")
    check("[local] and the message says why", b"boundaries of this multipart object were not "
          b"kept" in r.body, r)
    eq("[local] part boundaries not kept, beyond the ETag's count: 416",
       err(c.get_object, Bucket=b, Key="mp", PartNumber=4), ("InvalidPartNumber", 416))
    H._stop_gateway(report=True)


def cache_over_moto():
    moto = C.Moto().start()
    conf = {"buckets": {"parts-cache": {"consistency": "immutable"}}}
    C.start_cache(C.Cache(moto.endpoint, moto.access, moto.secret, size="256MiB",
                          config=conf, tag="parts"))
    b = "parts-cache"
    c = suite("cache", b)
    datas, etag = PARTS["mp"]
    c.get_object(Bucket=b, Key="mp")["Body"].read()

    def hit():
        g = c.get_object(Bucket=b, Key="mp", PartNumber=2)
        ok = g["Body"].read() == datas[1]
        return ok and any("read=hit" in l for l in H.log_grep("key=mp ")[-1:])
    check("[cache] a part of a cached object is read from the cache",
          C.wait_until(hit, timeout=30, step=0.2), H.log_grep("key=mp ")[-3:])
    # replaced in the cold tier behind the immutable bucket's cached copy: the
    # part is the cold tier's object, not a slice of the stale copy
    new = os.urandom(1000)
    moto.client().put_object(Bucket=b, Key="mp", Body=new)
    g = c.get_object(Bucket=b, Key="mp", PartNumber=1)
    eq("[cache] after a replace in the cold tier, part 1 is the new object",
       (g["ResponseMetadata"]["HTTPStatusCode"], g.get("ContentRange"), g.get("PartsCount"),
        g["Body"].read() == new), (206, "bytes 0-999/1000", None, True))
    C.stop_cache()


def main():
    C.need_clients()
    if not C.have_moto():
        H.skip_file("needs moto (python3 -m moto.server) for the cold tier")
    C.both_modes("test_mpu_parts", local_store, cache_over_moto)


H.run(main)
