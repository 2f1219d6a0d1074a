"""tests/integration/test_s3_wire.py - what S3 puts on the wire (issue 12), the
same in both modes: the directory store (`--data`) and the cache in front of
moto (`--cold`, `--cache-dir`). Real clients: boto3 1.43, Debian's boto3 1.26
(/usr/bin/python3), curl --aws-sigv4, raw signed HTTP where a client cannot
say it.
  * empty user metadata (x-amz-meta-x: "") is kept and comes back empty, in
    cache mode too: B signs its cold-tier requests itself (common/sigv4.c),
    the empty header as "x-amz-meta-x:". moto checks no signature, so a last
    part puts the cache in front of a second shardgate, which verifies
    every one, and reads the empty header back through the cache and
    directly from the back gateway;
  * stored header values come back byte for byte (Content-Encoding
    "deflate, gzip" too; only aws-chunked is taken out of it).
Skips (77) when boto3 or moto is missing."""

import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import cache_common as C  # noqa: E402

check, eq = H.check, H.eq


def curl_head(b, k):
    """HEAD with curl --aws-sigv4: (status line, [raw header lines])."""
    argv = ["curl", "-sS", "-I", "--aws-sigv4", "aws:amz:%s:s3" % H.REGION,
            "--user", "%s:%s" % (H.ACCESS_KEY, H.SECRET_KEY),
            "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",   # curl 7.x sends none
            "%s/%s/%s" % (H.S.endpoint, b, H.quote_key(k))]
    rc, out, er = H.run_cmd(argv, timeout=60)
    lines = out.split("\r\n")
    return (lines[0] if rc == 0 else er), lines[1:]


DEBIAN_META = r"""
import boto3, json, os
from botocore.config import Config
c = boto3.client("s3", endpoint_url=os.environ["EP"], region_name="us-east-1",
                 aws_access_key_id=os.environ["AK"], aws_secret_access_key=os.environ["SK"],
                 config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"))
b = os.environ["B"]
c.put_object(Bucket=b, Key="deb-meta", Body=b"d", Metadata={"e": "", "f": "1"},
             ContentEncoding="deflate, gzip")
h = c.head_object(Bucket=b, Key="deb-meta")
print(json.dumps([boto3.__version__, h["Metadata"], h.get("ContentEncoding")]))
"""


# ---------------------------------------------------------------- the checks

def empty_metadata(m, c, b):
    want = {"x": "", "y": "v"}
    c.put_object(Bucket=b, Key="meta", Body=b"m", Metadata={"x": "", "y": "v"})
    eq("[%s] boto3 1.43: an empty x-amz-meta-x comes back empty on HEAD" % m,
       c.head_object(Bucket=b, Key="meta")["Metadata"], want)
    g = c.get_object(Bucket=b, Key="meta")
    eq("[%s] boto3 1.43: and on GET" % m, (g["Metadata"], g["Body"].read()), (want, b"m"))
    status, lines = curl_head(b, "meta")
    got = [l for l in lines if l.lower().startswith("x-amz-meta-x:")]
    check("[%s] curl -I: an x-amz-meta-x line with an empty value" % m,
          status.startswith("HTTP/1.1 200") and len(got) == 1 and
          got[0].split(":", 1)[1].strip() == "", (status, lines))
    r = H.raw("PUT", "/%s/raw-meta" % b, body=b"r", headers={"x-amz-meta-empty": ""})
    eq("[%s] a raw PUT with an empty x-amz-meta-empty: 200" % m, r.status, 200)
    r = H.raw("HEAD", "/%s/raw-meta" % b)
    eq("[%s] raw HEAD: the header is there, empty" % m,
       r.header("x-amz-meta-empty", None) is not None and r.header("x-amz-meta-empty").strip(),
       "")
    if os.path.exists(H.DEBIAN_PYTHON):
        got, detail = H.debian_boto3(DEBIAN_META, B=b)
        eq("[%s] Debian boto3 1.26: empty metadata and Content-Encoding" % m,
           got and [got[0][:4], got[1], got[2]], ["1.26", {"e": "", "f": "1"}, "deflate, gzip"],
           detail)


STORED = {
    "Content-Type": "text/plain;  charset=UTF-8",
    "Content-Encoding": "deflate, gzip",
    "Content-Disposition": 'attachment;  filename="a b.txt"',
    "Cache-Control": "max-age=60,  public",
    "Content-Language": "en-US, de",
    "Expires": "Thu, 01 Dec 2094 16:00:00 GMT",
    "x-amz-meta-list": "a,  b , c",
}


def header_values(m, c, b):
    r = H.raw("PUT", "/%s/hdrs" % b, body=b"h", headers=STORED)
    eq("[%s] raw PUT with stored headers: 200" % m, r.status, 200)
    for method in ("HEAD", "GET"):
        r = H.raw(method, "/%s/hdrs" % b)
        eq("[%s] %s: every stored header byte for byte" % (m, method),
           {k: r.header(k) for k in STORED}, STORED)
    c.put_object(Bucket=b, Key="enc", Body=b"e", ContentEncoding="deflate, gzip",
                 ContentType="text/csv; header=present")
    h = c.head_object(Bucket=b, Key="enc")
    eq("[%s] boto3 1.43: ContentEncoding 'deflate, gzip' and ContentType kept" % m,
       (h["ContentEncoding"], h["ContentType"]), ("deflate, gzip", "text/csv; header=present"))
    # aws-chunked framing: botocore sends a streamed body with a trailing
    # checksum as aws-chunked (over https; made to here, as boto3_suite does)
    # and adds ",aws-chunked" to the Content-Encoding
    import io
    import botocore.httpchecksum as hc
    real = hc.urlparse
    seen = []

    def fake(url, *a, **kw):
        return real(url, *a, **kw)._replace(scheme="https")

    def sent(request, **kw):
        seen.append(request.headers.get("Content-Encoding"))
    c.meta.events.register("before-send.s3.PutObject", sent)
    hc.urlparse = fake
    try:
        c.put_object(Bucket=b, Key="chunked", Body=io.BytesIO(b"c" * 1000),
                     ContentEncoding="deflate,  gzip", ChecksumAlgorithm="CRC32")
    finally:
        hc.urlparse = real
        c.meta.events.unregister("before-send.s3.PutObject", sent)
    check("[%s] boto3 1.43 sent aws-chunked in Content-Encoding" % m,
          seen and b"aws-chunked" in (seen[-1] if isinstance(seen[-1], bytes)
                                      else str(seen[-1]).encode()), seen)
    h = c.head_object(Bucket=b, Key="chunked")
    eq("[%s] only aws-chunked leaves Content-Encoding: 'deflate,  gzip' kept" % m,
       (h["ContentEncoding"], h["ContentLength"]), ("deflate,  gzip", 1000))


CORS_NO_ORIGIN = ("BadRequest", "Insufficient information. Origin request header needed.")
CORS_DENIED = ("AccessForbidden", "CORSResponse: CORS is not enabled for this bucket.")


def curl_options(path, *headers):
    """An unsigned OPTIONS with curl: (status, S3 error (Code, Message) or None)."""
    argv = ["curl", "-sS", "-X", "OPTIONS", "-o", "-", "-w", "\n%{http_code}"]
    for h in headers:
        argv += ["-H", h]
    rc, out, er = H.run_cmd(argv + [H.S.endpoint + path], timeout=60)
    body, _, code = out.rpartition("\n")
    e = H.parse_error(body.encode())
    return (int(code) if code.isdigit() else (rc, er)), (e and (e["Code"], e["Message"]))


def cors_preflight(m, c, b):
    for what, path in (("object", "/%s/meta" % b), ("bucket", "/%s" % b),
                       ("missing object", "/%s/no-such-key" % b)):
        eq("[%s] curl OPTIONS on the %s without Origin: 400 BadRequest" % (m, what),
           curl_options(path), (400, CORS_NO_ORIGIN))
        eq("[%s] curl OPTIONS on the %s with Origin: 403 AccessForbidden" % (m, what),
           curl_options(path, "Origin: https://example.com",
                        "Access-Control-Request-Method: GET"), (403, CORS_DENIED))
    r = H.raw("OPTIONS", "/%s/meta" % b, headers={"Origin": "https://example.com",
                                                   "Access-Control-Request-Method": "PUT"})
    eq("[%s] a signed OPTIONS answers the same 403" % m, (r.status, r.error()["Code"]),
       (403, "AccessForbidden"))
    # S3's refusal names the method and whether a bucket or an object was asked
    for path, sign, method, want in (("/%s/meta" % b, True, "PUT", ("PUT", "OBJECT")),
                                     ("/%s/no-such-key" % b, False, "GET", ("GET", "OBJECT")),
                                     ("/%s" % b, False, "DELETE", ("DELETE", "BUCKET")),
                                     ("/%s" % b, False, None, (None, "BUCKET"))):
        hdrs = {"Origin": "https://example.com"}
        if method:
            hdrs["Access-Control-Request-Method"] = method
        e = H.raw("OPTIONS", path, headers=hdrs, sign=sign).error() or {}
        eq("[%s] the 403 on %s (%s) carries Method and ResourceType" % (m, path, method),
           (e.get("Method"), e.get("ResourceType")), want)
    e = H.raw("OPTIONS", "/%s/meta" % b, sign=False).error() or {}
    eq("[%s] the 400 without Origin has no Method or ResourceType" % m,
       (e.get("Code"), e.get("Method"), e.get("ResourceType")), ("BadRequest", None, None))
    check("[%s] the access log names CorsPreflight" % m,
          any("op=CorsPreflight " in l and "status=403" in l
              for l in H.log_grep("access:", 100000)), H.log_grep("OPTIONS", 3))


BAD_KEYS = ("%FF%FE", "a%C0%AE", "%ED%A0%80x", "ok%E2%82")


def curl_signed(method, path):
    """A SigV4 request by curl: (status, S3 error code or None)."""
    argv = ["curl", "-sS", "-X", method, "-o", "-", "-w", "\n%{http_code}",
            "--aws-sigv4", "aws:amz:%s:s3" % H.REGION,
            "--user", "%s:%s" % (H.ACCESS_KEY, H.SECRET_KEY),
            "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]
    if method == "PUT":
        argv += ["--data-binary", "x"]
    rc, out, er = H.run_cmd(argv + [H.S.endpoint + path], timeout=60)
    body, _, code = out.rpartition("\n")
    e = H.parse_error(body.encode())
    return (int(code) if code.isdigit() else (rc, er)), (e and e["Code"])


def not_utf8(m, c, b):
    for k in BAD_KEYS:
        r = H.raw("PUT", "/%s/%s" % (b, k), body=b"x")
        eq("[%s] raw PUT of key %s: 400 InvalidURI" % (m, k), (r.status, r.error()["Code"]),
           (400, "InvalidURI"))
        check("[%s] its error body is UTF-8 XML" % m, H.parse_error(r.body) is not None, r.body)
        eq("[%s] curl GET of key %s: 400 InvalidURI" % (m, k),
           curl_signed("GET", "/%s/%s" % (b, k)), (400, "InvalidURI"))
    eq("[%s] curl PUT of key %%FF%%FE: 400 InvalidURI" % m,
       curl_signed("PUT", "/%s/%%FF%%FE" % b), (400, "InvalidURI"))
    r = H.raw("GET", "/%s" % b, query="list-type=2&prefix=%FF")
    eq("[%s] ListObjectsV2 with prefix=%%FF: 400 InvalidURI" % m, (r.status, r.error()["Code"]),
       (400, "InvalidURI"))
    r = H.raw("PUT", "/%s/copy-dst" % b, headers={"x-amz-copy-source": "/%s/%%C0%%AE" % b})
    eq("[%s] CopyObject from a non-UTF-8 source key: 400" % m, r.status, 400)
    keys = [o["Key"] for o in c.list_objects_v2(Bucket=b).get("Contents", [])]
    check("[%s] nothing was stored" % m, all("\ufffd" not in k and not k.startswith("a.")
                                             for k in keys) and "copy-dst" not in keys, keys)
    # keys with control characters and non-ASCII letters are S3 keys
    odd = ["ctl\x07bell", "tab\tkey", "\u00e9t\u00e9/\u00fc"]
    if m == "local":
        odd.append("cr\rlf\n")   # moto (werkzeug) answers 404 to a key with CR/LF itself
    for k in odd:
        c.put_object(Bucket=b, Key=k, Body=b"o")
    got = [o["Key"] for o in c.list_objects_v2(Bucket=b, Prefix="")["Contents"]]
    check("[%s] boto3 1.43 lists the odd keys (it asks for url encoding)" % m,
          all(k in got for k in odd), got)
    got = [o["Key"] for o in c.list_objects(Bucket=b)["Contents"]]
    check("[%s] and ListObjects v1 too" % m, all(k in got for k in odd), got)
    r = H.raw("GET", "/%s" % b, query="list-type=2&prefix=ctl")
    check("[%s] a raw listing writes the bell as S3 does: &#x7;" % m,
          r.status == 200 and b"<Key>ctl&#x7;bell</Key>" in r.body, r.body)
    r = H.raw("GET", "/%s" % b, query="list-type=2&prefix=%C3%A9")
    ok = True
    try:
        import xml.etree.ElementTree as ET
        ET.fromstring(r.body)
    except ET.ParseError as e:
        ok = e
    check("[%s] a raw listing of UTF-8 keys is well-formed XML" % m,
          ok is True and "\u00e9t\u00e9/\u00fc".encode() in r.body, (ok, r.body))


DEBIAN_LIST = r"""
import boto3, json, os
from botocore.config import Config
c = boto3.client("s3", endpoint_url=os.environ["EP"], region_name="us-east-1",
                 aws_access_key_id=os.environ["AK"], aws_secret_access_key=os.environ["SK"],
                 config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"))
b = os.environ["B"]
r1 = c.list_objects(Bucket=b, Prefix="d ir/", Delimiter="/", Marker="d ir/a b", MaxKeys=1)
r2 = c.list_objects_v2(Bucket=b, Prefix="d ir/", Delimiter="/", StartAfter="d ir/a b")
print(json.dumps([boto3.__version__,
                  [r1.get(k) for k in ("Prefix", "Delimiter", "Marker", "NextMarker")],
                  [o["Key"] for o in r1.get("Contents", [])],
                  [r2.get(k) for k in ("Prefix", "Delimiter", "StartAfter")],
                  [o["Key"] for o in r2.get("Contents", [])],
                  [p["Prefix"] for p in r2.get("CommonPrefixes", [])]]))
"""


def listings(m, c, b):
    for k in ("d ir/a b", "d ir/c+d%e", "d ir/\u00e9/x", "d ir/z z"):
        c.put_object(Bucket=b, Key=k, Body=b"l")
    plain = H.raw("GET", "/%s" % b, query="list-type=2&prefix=d%20ir%2F")
    r = H.raw("GET", "/%s" % b, query="list-type=2&prefix=d%20ir%2F&continuation-token=")
    check("[%s] ListObjectsV2 with continuation-token=: 200, echoed empty" % m,
          r.status == 200 and b"<ContinuationToken></ContinuationToken>" in r.body, r)
    keys = lambda body: re.findall(rb"<Key>([^<]*)</Key>", body)  # noqa: E731
    eq("[%s] and the same first page as without it" % m, keys(r.body), keys(plain.body))
    g = c.list_objects_v2(Bucket=b, Prefix="d ir/", ContinuationToken="")
    eq("[%s] boto3 1.43 list_objects_v2(ContinuationToken=''): keys, echoed ''" % m,
       ([o["Key"] for o in g.get("Contents", [])], g.get("ContinuationToken")),
       (["d ir/a b", "d ir/c+d%e", "d ir/z z", "d ir/\u00e9/x"], ""))
    pages = list(c.get_paginator("list_objects_v2").paginate(Bucket=b, Prefix="d ir/",
                                                             PaginationConfig={"PageSize": 1}))
    eq("[%s] boto3 paging one key a page still works" % m,
       [o["Key"] for p in pages for o in p.get("Contents", [])],
       ["d ir/a b", "d ir/c+d%e", "d ir/z z", "d ir/\u00e9/x"])
    # v1, encoding-type=url: Prefix stays as sent, the rest is encoded
    r = H.raw("GET", "/%s" % b, query="prefix=d%20ir%2F&delimiter=%2F&marker=d%20ir%2Fa%20b"
              "&max-keys=1&encoding-type=url")
    check("[%s] raw v1 url listing: Prefix as sent; Marker, NextMarker, Delimiter, Key encoded"
          % m, r.status == 200 and b"<Prefix>d ir/</Prefix>" in r.body and
          b"<Marker>d%20ir/a%20b</Marker>" in r.body and b"<Delimiter>/</Delimiter>" in r.body
          and b"<Key>d%20ir/c%2Bd%25e</Key>" in r.body and
          b"<NextMarker>d%20ir/c%2Bd%25e</NextMarker>" in r.body, r.body)
    r = H.raw("GET", "/%s" % b, query="list-type=2&prefix=d%20ir%2F&delimiter=%2F"
              "&start-after=d%20ir%2Fa%20b&encoding-type=url")
    check("[%s] raw v2 url listing: Prefix, StartAfter, Key, CommonPrefixes encoded" % m,
          r.status == 200 and b"<Prefix>d%20ir/</Prefix>" in r.body and
          b"<StartAfter>d%20ir/a%20b</StartAfter>" in r.body and
          b"<Prefix>d%20ir/%C3%A9/</Prefix>" in r.body, r.body)
    r1 = c.list_objects(Bucket=b, Prefix="d ir/", Delimiter="/", Marker="d ir/a b", MaxKeys=1)
    eq("[%s] boto3 1.43 list_objects reads back Prefix, Delimiter, Marker, NextMarker, Key"
       % m, ([r1.get(k) for k in ("Prefix", "Delimiter", "Marker", "NextMarker")],
             [o["Key"] for o in r1.get("Contents", [])]),
       (["d ir/", "/", "d ir/a b", "d ir/c+d%e"], ["d ir/c+d%e"]))
    r2 = c.list_objects_v2(Bucket=b, Prefix="d ir/", Delimiter="/", StartAfter="d ir/a b")
    eq("[%s] boto3 1.43 list_objects_v2 reads back Prefix, StartAfter, CommonPrefixes" % m,
       ([r2.get(k) for k in ("Prefix", "Delimiter", "StartAfter")],
        [o["Key"] for o in r2.get("Contents", [])],
        [p["Prefix"] for p in r2.get("CommonPrefixes", [])]),
       (["d ir/", "/", "d ir/a b"], ["d ir/c+d%e", "d ir/z z"], ["d ir/\u00e9/"]))
    if os.path.exists(H.DEBIAN_PYTHON):
        got, detail = H.debian_boto3(DEBIAN_LIST, B=b)
        eq("[%s] Debian boto3 1.26 reads back the v1 and v2 values" % m,
           got and [got[0][:4]] + got[1:],
           ["1.26", ["d ir/", "/", "d ir/a b", "d ir/c+d%e"], ["d ir/c+d%e"],
            ["d ir/", "/", "d ir/a b"], ["d ir/c+d%e", "d ir/z z"], ["d ir/\u00e9/"]], detail)


def list_buckets(m, c):
    names = ["lb-a1", "lb-a2", "lb-a3", "lb-b1"]
    for n in names:
        c.create_bucket(Bucket=n)
    p1 = c.list_buckets(MaxBuckets=2, Prefix="lb-")
    eq("[%s] boto3 1.43 list_buckets(MaxBuckets=2, Prefix='lb-'): a page, a token, Prefix" % m,
       ([x["Name"] for x in p1["Buckets"]], bool(p1.get("ContinuationToken")), p1.get("Prefix")),
       (["lb-a1", "lb-a2"], True, "lb-"))
    p2 = c.list_buckets(MaxBuckets=2, Prefix="lb-", ContinuationToken=p1["ContinuationToken"])
    eq("[%s] the next page, and no token after the last" % m,
       ([x["Name"] for x in p2["Buckets"]], p2.get("ContinuationToken")),
       (["lb-a3", "lb-b1"], None))
    pages = list(c.get_paginator("list_buckets").paginate(
        Prefix="lb-a", PaginationConfig={"PageSize": 1}))
    eq("[%s] boto3's paginator, one bucket a page" % m,
       [[x["Name"] for x in p["Buckets"]] for p in pages], [["lb-a1"], ["lb-a2"], ["lb-a3"]])
    eq("[%s] BucketRegion on each bucket" % m,
       {x.get("BucketRegion") for x in p1["Buckets"]}, {H.REGION})
    every = [x["Name"] for x in c.list_buckets()["Buckets"]]
    check("[%s] without parameters: every bucket, no token" % m,
          all(n in every for n in names) and "ContinuationToken" not in c.list_buckets(), every)
    r = H.raw("GET", "/", query="max-buckets=1&prefix=lb-b")
    check("[%s] raw: <Prefix>lb-b</Prefix>, one bucket, no ContinuationToken" % m,
          r.status == 200 and b"<Prefix>lb-b</Prefix>" in r.body and
          b"<Name>lb-b1</Name>" in r.body and b"ContinuationToken" not in r.body, r.body)
    for q in ("max-buckets=0", "max-buckets=10001", "max-buckets=x", "continuation-token=%21%21"):
        r = H.raw("GET", "/", query=q)
        eq("[%s] ListBuckets %s: 400 InvalidArgument" % (m, q), (r.status, r.error()["Code"]),
           (400, "InvalidArgument"))
    eq("[%s] bucket-region of another region lists none" % m,
       c.list_buckets(BucketRegion="eu-west-1").get("Buckets"), [])


def suite(m, b):
    c = H.boto3_client()
    c.create_bucket(Bucket=b)
    for behaviour in (empty_metadata, header_values, cors_preflight, not_utf8, listings):
        behaviour(m, c, b)
    list_buckets(m, c)


# ---------------------------------------------------------------- the modes

def local_store():
    H.start("test_s3_wire")
    suite("local", "wire-local")
    meta = os.getxattr(H.direct_path("wire-local", "meta"), "user.shardgate.meta")
    check("[local] the empty value is in the object's metadata xattr", b"x-amz-meta-x" in meta,
          meta)
    # a file put into the tree by hand under a name that is not UTF-8
    with open(os.path.join(H.direct_path("wire-local").encode(), b"raw\xff\xfename"), "wb") as f:
        f.write(b"r")
    r = H.raw("GET", "/wire-local", query="list-type=2&prefix=raw")
    ok = True
    try:
        import xml.etree.ElementTree as ET
        ET.fromstring(r.body)
    except ET.ParseError as e:
        ok = e
    check("[local] a raw listing of a non-UTF-8 file name is well-formed (U+FFFD)",
          ok is True and "raw\ufffd\ufffdname".encode() in r.body, (ok, r.body))
    r = H.raw("GET", "/wire-local", query="list-type=2&prefix=raw&encoding-type=url")
    check("[local] encoding-type=url gives its exact bytes",
          r.status == 200 and b"<Key>raw%FF%FEname</Key>" in r.body, r.body)
    H._stop_gateway(report=True)


def cache_over_moto():
    moto = C.Moto().start()
    C.start_cache(C.Cache(moto.endpoint, moto.access, moto.secret, size="64MiB", tag="wire"))
    suite("cache", "wire-cache")
    h = moto.client().head_object(Bucket="wire-cache", Key="hdrs")
    eq("[cache] the cold tier holds the headers as sent",
       (h["ContentEncoding"], h["ContentType"], h["Metadata"]),
       ("deflate, gzip", STORED["Content-Type"], {"list": "a,  b , c"}))
    C.stop_cache()


def empty_header_value(r):
    """The value of x-amz-meta-empty in a response, stripped (None: no header)."""
    v = r.header("x-amz-meta-empty", None)
    return v if v is None else v.strip()


def cache_over_shardgate():
    """B in front of shardgate A, which verifies B's SigV4 (moto checks none):
    the empty header reaches A signed, on a put and a multipart upload."""
    m = "cache/shardgate"
    H.S.log_file.close()
    H.S.log_file = None
    a = C.ColdGateway().start()
    C.start_cache(C.Cache(a.endpoint, a.access, a.secret, tag="wire-sg"))
    b, want = "wire-sg", {"x": "", "y": "v"}
    c, ca = H.boto3_client(), a.client()
    c.create_bucket(Bucket=b)
    c.put_object(Bucket=b, Key="meta", Body=b"m", Metadata=want)
    r = H.raw("PUT", "/%s/raw-meta" % b, body=b"r", headers={"x-amz-meta-empty": ""})
    eq("[%s] a raw PUT with an empty x-amz-meta-empty: 200" % m, r.status, 200)
    u = c.create_multipart_upload(Bucket=b, Key="mpu-meta", Metadata={"x": ""})["UploadId"]
    e = c.upload_part(Bucket=b, Key="mpu-meta", UploadId=u, PartNumber=1, Body=b"p")["ETag"]
    c.complete_multipart_upload(Bucket=b, Key="mpu-meta", UploadId=u,
                                MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]})
    for where, cl in (("through the cache", c), ("on the back gateway", ca)):
        eq("[%s] boto3 HEAD %s: the empty x-amz-meta-x" % (m, where),
           cl.head_object(Bucket=b, Key="meta")["Metadata"], want)
        eq("[%s] boto3 HEAD %s: the multipart object's too" % (m, where),
           cl.head_object(Bucket=b, Key="mpu-meta")["Metadata"], {"x": ""})
    r = H.raw("HEAD", "/%s/raw-meta" % b)
    eq("[%s] raw HEAD through the cache: x-amz-meta-empty, empty" % m,
       (r.status, empty_header_value(r)), (200, ""))
    r = C.request(a.port, "HEAD", "/%s/raw-meta" % b, access=a.access, secret=a.secret)
    eq("[%s] raw HEAD on the back gateway: x-amz-meta-empty, empty" % m,
       (r.status, empty_header_value(r)), (200, ""))
    seen = a.grep("access:", 100000)
    check("[%s] the back gateway answered B and refused none of its requests" % m,
          any(" status=200" in l for l in seen) and not any(" status=403" in l for l in seen),
          [l for l in seen if " status=403" in l][:5] or seen[-5:])
    C.stop_cache()
    eq("[%s] the back gateway exits 0" % m, a.stop(), 0)


def main():
    C.need_clients()
    if not C.have_moto():
        H.skip_file("needs moto (python3 -m moto.server) for the cold tier")
    C.both_modes("test_s3_wire", local_store, cache_over_moto)
    cache_over_shardgate()


H.run(main)
