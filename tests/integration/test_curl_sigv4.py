"""tests/integration/test_curl_sigv4.py - curl's own SigV4 signer
(--aws-sigv4) for PUT/GET/HEAD/DELETE/list/range, and presigned URLs made by
boto3 used with plain curl: GET, PUT, expired (AccessDenied "Request has
expired") and tampered (SignatureDoesNotMatch). Skips (77) when curl is
missing or has no --aws-sigv4."""

import os
import shutil
import sys
import time
import urllib.parse
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

check, eq = H.check, H.eq

CURL = shutil.which("curl")


def curl(*args, sign=True, secret=None, timeout=120, payload="UNSIGNED-PAYLOAD"):
    """Runs curl; returns (status, headers dict, body bytes, stderr).
    curl 7.x signs no payload hash of its own; S3 requires the
    x-amz-content-sha256 header with header auth, so it is passed (and signed:
    curl signs every x-amz-* header it is given) unless payload is None."""
    d = H.tmpdir("curl")
    hdr, out = os.path.join(d, "h.txt"), os.path.join(d, "b.bin")
    for p in (hdr, out):
        if os.path.exists(p):
            os.unlink(p)
    argv = [CURL, "-s", "-S", "-D", hdr, "-o", out, "-w", "%{http_code}"]
    if sign:
        argv += ["--aws-sigv4", "aws:amz:%s:s3" % H.REGION,
                 "--user", "%s:%s" % (H.ACCESS_KEY, secret or H.SECRET_KEY)]
        if payload:
            argv += ["-H", "x-amz-content-sha256: %s" % payload]
    rc, so, se = H.run_cmd(argv + list(args), timeout=timeout)
    headers = {}
    if os.path.exists(hdr):
        for line in open(hdr, "rb").read().decode("latin-1").splitlines():
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
    body = open(out, "rb").read() if os.path.exists(out) else b""
    try:
        status = int(so.strip() or 0)
    except ValueError:
        status = 0
    if rc != 0:
        print("# curl rc %d: %s" % (rc, se.strip()), flush=True)
    return status, headers, body, se


def err_code(body):
    e = H.parse_error(body)
    return (e or {}).get("Code"), (e or {}).get("Message")


def main():
    if not CURL:
        H.skip_file("curl not found")
    rc, out, err = H.run_cmd([CURL, "--help", "all"], timeout=30)
    if "--aws-sigv4" not in out:
        H.skip_file("curl has no --aws-sigv4")
    H.start("test_curl_sigv4")
    ep = H.S.endpoint
    b = "sg-curl-%s" % uuid.uuid4().hex[:10]
    work = H.tmpdir("work")
    src = os.path.join(work, "up.bin")
    want = H.write_random_file(src, 300 * 1024 + 7)
    data = open(src, "rb").read()

    st, h, body, _ = curl("-X", "PUT", "%s/%s" % (ep, b))
    eq("curl PUT bucket", st, 200)
    st, h, body, _ = curl("-T", src, "%s/%s/dir/obj.bin" % (ep, b), payload=want)
    eq("curl -T PUT object (x-amz-content-sha256 = file's sha256)", st, 200)
    eq("curl PUT ETag is the MD5", h.get("etag"), '"%s"' % H.md5(data))
    check("curl PUT response has x-amz-request-id", h.get("x-amz-request-id"), h, moto_deviates=True)
    st, h, body, _ = curl("%s/%s/dir/obj.bin" % (ep, b))
    eq("curl GET status", st, 200)
    eq("curl GET bytes", H.sha256(body), want)
    st, h, body, _ = curl("-I", "%s/%s/dir/obj.bin" % (ep, b))
    eq("curl HEAD status/length/etag", (st, h.get("content-length"), h.get("etag")),
       (200, str(len(data)), '"%s"' % H.md5(data)))
    st, h, body, _ = curl("-H", "Range: bytes=100-199", "%s/%s/dir/obj.bin" % (ep, b))
    eq("curl ranged GET 206 + Content-Range", (st, h.get("content-range")),
       (206, "bytes 100-199/%d" % len(data)))
    eq("curl ranged GET bytes", body, data[100:200])
    st, h, body, _ = curl("%s/%s?list-type=2&prefix=dir%%2F" % (ep, b))
    check("curl ListObjectsV2 lists the key", st == 200 and b"<Key>dir/obj.bin</Key>" in body,
          (st, body[:300]))
    st, h, body, _ = curl("%s/%s" % (ep, b))
    check("curl ListObjects (v1) lists the key", st == 200 and b"<Key>dir/obj.bin</Key>" in body,
          (st, body[:300]))
    st, h, body, _ = curl("%s/" % ep)
    check("curl ListBuckets lists the bucket", st == 200 and ("<Name>%s</Name>" % b).encode() in body,
          (st, body[:300]))
    st, h, body, _ = curl("-T", src, "%s/%s/dir/unsigned.bin" % (ep, b))
    eq("curl -T PUT object with UNSIGNED-PAYLOAD", st, 200)
    st, h, body, _ = curl("%s/%s/dir/unsigned.bin" % (ep, b))
    eq("curl GET of the UNSIGNED-PAYLOAD upload", (st, H.sha256(body)), (200, want))
    curl("-X", "DELETE", "%s/%s/dir/unsigned.bin" % (ep, b))
    if H.shardgate_only("curl PUT with a wrong x-amz-content-sha256 -> 400"):
        st, h, body, _ = curl("-T", src, "%s/%s/dir/badsha.bin" % (ep, b), payload="0" * 64)
        eq("curl PUT with a wrong x-amz-content-sha256 -> 400 XAmzContentSHA256Mismatch",
           (st, err_code(body)[0]), (400, "XAmzContentSHA256Mismatch"))
        st, h, body, _ = curl("-I", "%s/%s/dir/badsha.bin" % (ep, b))
        eq("nothing stored after the sha256 mismatch", st, 404)
    if H.shardgate_only("curl without x-amz-content-sha256 -> 400 (S3 requires it)"):
        st, h, body, _ = curl("%s/%s/dir/obj.bin" % (ep, b), payload=None)
        eq("curl without x-amz-content-sha256 -> 400 InvalidRequest, S3's message",
           (st,) + tuple(err_code(body)[:2]),
           (400, "InvalidRequest", "Missing required header for this request: x-amz-content-sha256"))
    if H.shardgate_only("curl with a wrong secret -> 403 SignatureDoesNotMatch"):
        st, h, body, _ = curl("%s/%s/dir/obj.bin" % (ep, b), secret="wrong-secret")
        eq("curl with a wrong secret -> 403 SignatureDoesNotMatch", (st, err_code(body)[0]),
           (403, "SignatureDoesNotMatch"))

    # presigned URLs from boto3, used by plain curl
    c = H.boto3_client()
    url = c.generate_presigned_url("get_object", Params={"Bucket": b, "Key": "dir/obj.bin"},
                                   ExpiresIn=300)
    st, h, body, _ = curl(url, sign=False)
    eq("presigned GET via plain curl", (st, H.sha256(body)), (200, want))
    purl = c.generate_presigned_url("put_object", Params={"Bucket": b, "Key": "pre/put.bin"},
                                    ExpiresIn=300)
    up2 = os.path.join(work, "up2.bin")
    want2 = H.write_random_file(up2, 70000)
    st, h, body, _ = curl("-T", up2, purl, sign=False)
    eq("presigned PUT via plain curl", st, 200)
    got = c.get_object(Bucket=b, Key="pre/put.bin")["Body"].read()
    eq("presigned PUT stored the same bytes", H.sha256(got), want2)
    hurl = c.generate_presigned_url("head_object", Params={"Bucket": b, "Key": "dir/obj.bin"},
                                    ExpiresIn=300)
    st, h, body, _ = curl("-I", hurl, sign=False)
    eq("presigned HEAD via plain curl", (st, h.get("content-length")), (200, str(len(data))))

    if H.shardgate_only("expired and tampered presigned URLs"):
        eurl = c.generate_presigned_url("get_object", Params={"Bucket": b, "Key": "dir/obj.bin"},
                                        ExpiresIn=1)
        time.sleep(2.2)
        st, h, body, _ = curl(eurl, sign=False)
        eq("expired presigned URL -> 403 AccessDenied 'Request has expired'",
           (st,) + err_code(body), (403, "AccessDenied", "Request has expired"))
        check("expired presigned URL body is not the object", H.sha256(body) != want)

        u = urllib.parse.urlsplit(url)
        q = urllib.parse.parse_qsl(u.query, keep_blank_values=True)
        q2 = [(k, ("301" if k == "X-Amz-Expires" else v)) for k, v in q]
        t1 = urllib.parse.urlunsplit(u._replace(query=urllib.parse.urlencode(q2)))
        st, h, body, _ = curl(t1, sign=False)
        eq("presigned URL with X-Amz-Expires changed -> 403 SignatureDoesNotMatch",
           (st, err_code(body)[0]), (403, "SignatureDoesNotMatch"))
        c.put_object(Bucket=b, Key="dir/other.bin", Body=b"other")
        t2 = urllib.parse.urlunsplit(u._replace(path=u.path.replace("obj.bin", "other.bin")))
        st, h, body, _ = curl(t2, sign=False)
        eq("presigned URL with the path changed -> 403 SignatureDoesNotMatch",
           (st, err_code(body)[0]), (403, "SignatureDoesNotMatch"))
        check("tampered URL never serves the other object", body != b"other")
        q3 = q + [("x-id", "GetObject"), ("response-content-type", "text/evil")]
        t3 = urllib.parse.urlunsplit(u._replace(query=urllib.parse.urlencode(q3)))
        st, h, body, _ = curl(t3, sign=False)
        eq("presigned URL with an added unsigned query parameter -> 403 SignatureDoesNotMatch",
           (st, err_code(body)[0]), (403, "SignatureDoesNotMatch"))
        st, h, body, _ = curl("-X", "DELETE", url, sign=False)
        eq("presigned GET URL used for DELETE -> 403 SignatureDoesNotMatch",
           (st, err_code(body)[0]), (403, "SignatureDoesNotMatch"))

    st, h, body, _ = curl("-X", "DELETE", "%s/%s/dir/obj.bin" % (ep, b))
    eq("curl DELETE -> 204", st, 204)
    st, h, body, _ = curl("%s/%s/dir/obj.bin" % (ep, b))
    eq("curl GET after DELETE -> 404 NoSuchKey", (st, err_code(body)[0]), (404, "NoSuchKey"))
    for k in ("pre/put.bin", "dir/other.bin"):
        c.delete_object(Bucket=b, Key=k)
    st, h, body, _ = curl("-X", "DELETE", "%s/%s" % (ep, b))
    eq("curl DELETE bucket -> 204", st, 204)


H.run(main)
