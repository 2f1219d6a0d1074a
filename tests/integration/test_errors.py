"""tests/integration/test_errors.py - unhappy paths over raw HTTP: S3 error
bodies, authentication failures, paths that try to leave the data directory
(dot segments, symlinks), oversized headers, malformed XML and a client that disconnects in the middle of a PUT.
Checks that need the data directory or real signature checking are
shardgate-only (skipped against SHARDGATE_TEST_ENDPOINT)."""

import base64
import hashlib
import http.client
import os
import socket
import sys
import time
import urllib.parse
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

check, eq, raw = H.check, H.eq, H.raw
MB = H.MB


def code_of(r):
    e = r.error()
    return e.get("Code") if e else None


def is_s3_4xx(r):
    return 400 <= r.status < 500 and r.error() is not None


def t_error_body(b):
    r = raw("GET", "/%s/no/such/key" % b)
    e = r.error()
    eq("GET missing key -> 404 NoSuchKey", (r.status, code_of(r)), (404, "NoSuchKey"))
    check("error body is <Error> XML with Code/Message/RequestId", e and e.get("Code") and
          e.get("Message") and e.get("RequestId"), r.body[:400], moto_deviates=True)
    check("error body Resource names the object", e and e.get("Resource") in
          ("/%s/no/such/key" % b, "no/such/key"), e, moto_deviates=True)
    rid = r.header("x-amz-request-id")
    check("error RequestId equals the x-amz-request-id header", rid and e and e.get("RequestId") == rid,
          (rid, e), moto_deviates=True)
    eq("error Content-Type is XML", (r.header("content-type") or "").split(";")[0].strip(),
       "application/xml")
    r2 = raw("GET", "/%s/no/such/key" % b)
    check("request ids are unique per request", r2.header("x-amz-request-id") != rid or rid is None,
          (rid, r2.header("x-amz-request-id")), moto_deviates=True)

    nb = "sg-nobucket-%s" % uuid.uuid4().hex[:8]
    r = raw("GET", "/%s/key" % nb)
    eq("GET in missing bucket -> 404 NoSuchBucket", (r.status, code_of(r)), (404, "NoSuchBucket"))
    r = raw("GET", "/%s" % nb)
    eq("list missing bucket -> 404 NoSuchBucket", (r.status, code_of(r)), (404, "NoSuchBucket"))

    # HEAD errors carry no body: a second request on the same connection
    # parses cleanly only if the server sent none.
    hdrs = H.sign_headers("HEAD", "%s/%s/no/such/key" % (H.S.endpoint, b))
    hdrs2 = H.sign_headers("GET", "%s/%s/obj" % (H.S.endpoint, b))
    c = http.client.HTTPConnection(H.S.host, H.S.port, timeout=30)
    try:
        c.request("HEAD", "/%s/no/such/key" % b, headers=hdrs)
        r = c.getresponse()
        r.read()
        eq("HEAD missing key -> 404", r.status, 404)
        check("HEAD 404 has x-amz-request-id", r.getheader("x-amz-request-id"), r.getheaders(),
              moto_deviates=True)
        if r.getheader("connection", "").lower() != "close":
            c.request("GET", "/%s/obj" % b, headers=hdrs2)
            r = c.getresponse()
            eq("HEAD 404 sends no body (next request on the connection is intact)",
               (r.status, r.read()), (200, b"object body"))
    except (OSError, http.client.HTTPException) as ex:
        check("HEAD 404 sends no body (next request on the connection is intact)", False, repr(ex))
    finally:
        c.close()

    r = raw("GET", "/%s/obj" % b, headers={"Range": "bytes=500-600"})
    eq("unsatisfiable range -> 416 InvalidRange", (r.status, code_of(r)), (416, "InvalidRange"))
    eq("416 carries Content-Range bytes */11", r.header("content-range"), "bytes */11",
       moto_deviates=True)
    r = raw("DELETE", "/%s" % b)
    eq("DELETE non-empty bucket -> 409 BucketNotEmpty", (r.status, code_of(r)), (409, "BucketNotEmpty"))

    r = raw("GET", "/%s/obj" % b)
    check("successful GET has x-amz-request-id", r.status == 200 and r.header("x-amz-request-id"),
          r.headers, moto_deviates=True)


def t_auth(b):
    if not H.shardgate_only("authentication failures"):
        return
    r = raw("GET", "/%s/obj" % b, secret="not-the-secret")
    eq("wrong secret -> 403 SignatureDoesNotMatch", (r.status, code_of(r)), (403, "SignatureDoesNotMatch"))
    check("wrong secret: body is not the object", b"object body" not in r.body)
    r = raw("GET", "/%s/obj" % b, access="AKIDUNKNOWN000000000")
    eq("unknown access key -> 403 InvalidAccessKeyId", (r.status, code_of(r)), (403, "InvalidAccessKeyId"))
    r = raw("GET", "/%s/obj" % b, sign=False)
    eq("anonymous GET object -> 403 AccessDenied", (r.status, code_of(r)), (403, "AccessDenied"))
    r = raw("GET", "/%s" % b, sign=False)
    eq("anonymous list bucket -> 403 AccessDenied", (r.status, code_of(r)), (403, "AccessDenied"))
    r = raw("PUT", "/%s/anon" % b, body=b"anon", sign=False)
    eq("anonymous PUT -> 403 AccessDenied", (r.status, code_of(r)), (403, "AccessDenied"))
    r = raw("HEAD", "/%s/anon" % b)
    eq("anonymous PUT stored nothing", r.status, 404)
    r = raw("GET", "/", sign=False)
    eq("anonymous ListBuckets -> 403 AccessDenied", (r.status, code_of(r)), (403, "AccessDenied"))
    # a body that does not match the signed x-amz-content-sha256
    hdrs = H.sign_headers("PUT", "%s/%s/shaput" % (H.S.endpoint, b), body=b"signed body")
    r = raw("PUT", "/%s/shaput" % b, body=b"other body!", headers=hdrs, sign=False)
    eq("body differing from x-amz-content-sha256 -> 400 XAmzContentSHA256Mismatch",
       (r.status, code_of(r)), (400, "XAmzContentSHA256Mismatch"))
    eq("mismatched body stored nothing", raw("HEAD", "/%s/shaput" % b).status, 404)


def t_escapes(b):
    if not H.shardgate_only("paths that leave the data dir"):
        return
    parent = os.path.dirname(H.S.data_dir.rstrip("/"))
    sentinels = {}
    for name in ("secret", "x"):
        p = os.path.join(parent, name)
        with open(p, "wb") as f:
            f.write(b"SENTINEL " + name.encode())
        sentinels[p] = H.sha256_file(p)
    # also one inside the data dir but outside the bucket
    inroot = os.path.join(H.S.data_dir, "rootfile")
    with open(inroot, "wb") as f:
        f.write(b"SENTINEL rootfile")
    sentinels[inroot] = H.sha256_file(inroot)
    before = set(os.listdir(parent))
    paths = ["/%s/../secret" % b, "/%s/../../secret" % b, "/%s/a/../../x" % b,
             "/%s/a/../../../x" % b, "/%s/%%2e%%2e/x" % b, "/%s/%%2e%%2e/%%2e%%2e/x" % b,
             "/%s/..%%2f..%%2fsecret" % b, "/%s/%%2E%%2E%%2F%%2E%%2E%%2Fsecret" % b,
             "/%s/../rootfile" % b, "/%s/%%2e%%2e/rootfile" % b, "/%s/./../rootfile" % b,
             "/%s/.." % b, "/../secret", "/%2e%2e/secret", "/%s/a/%%2e%%2e%%2f%%2e%%2e%%2f..%%2fx" % b,
             "/%s/%%00../x" % b]
    def authentic(method, p, body=b""):
        """Signed over the raw path; if the gateway canonicalises the path
        (decode, re-encode) and so refuses that, signed over its canonical
        form, so that the request reaches the store and not just auth."""
        r = raw(method, p, body=body)
        if r.status == 403 and code_of(r) == "SignatureDoesNotMatch":
            canon = urllib.parse.quote(urllib.parse.unquote(p), safe="/~")
            r = raw(method, p, body=body, sign_path=canon)
        check("%s %s gets past SigV4 (the store decides)" % (method, p),
              code_of(r) != "SignatureDoesNotMatch", r)
        return r
    for p in paths:
        r = authentic("GET", p)
        leaked = b"SENTINEL" in r.body
        check("GET %s -> 4xx S3 error, no outside content" % p, is_s3_4xx(r) and not leaked,
              "status %d leaked=%s body %r" % (r.status, leaked, r.body[:200]))
        r = authentic("PUT", p, body=b"EVIL " + p.encode())
        check("PUT %s -> 4xx S3 error" % p, is_s3_4xx(r), "status %d body %r" % (r.status, r.body[:200]))
        r = authentic("DELETE", p)
        check("DELETE %s -> not a success on an outside file" % p, r.status != 204 or
              all(os.path.exists(s) for s in sentinels), r.status)
    for p, h in sentinels.items():
        check("sentinel %s unchanged" % os.path.relpath(p, parent),
              os.path.exists(p) and H.sha256_file(p) == h)
    after = set(os.listdir(parent))
    eq("nothing new next to the data dir", sorted(after - before), [])
    evil = []
    for dp, _, fns in os.walk(H.S.data_dir):
        for fn in fns:
            try:
                with open(os.path.join(dp, fn), "rb") as f:
                    if f.read(5) == b"EVIL ":
                        evil.append(os.path.relpath(os.path.join(dp, fn), H.S.data_dir))
            except OSError:
                pass
    eq("no escaping PUT was stored anywhere in the data dir", evil, [])
    os.unlink(inroot)
    check("gateway alive after escape attempts", H.alive())


def t_not_implemented(b):
    """Sub-resources shardgate does not implement answer S3's 501 NotImplemented
    (moto implements them: shardgate only)."""
    if not H.shardgate_only("501 for unimplemented sub-resources"):
        return
    for method, path, query in (("GET", "/%s" % b, "cors"), ("PUT", "/%s" % b, "versioning"),
                                ("GET", "/%s/obj" % b, "website"),
                                ("PUT", "/%s" % b, "versions")):
        r = raw(method, path, query=query)
        e = r.error() or {}
        check("%s %s?%s -> 501 NotImplemented with a message" % (method, path, query),
              r.status == 501 and e.get("Code") == "NotImplemented" and e.get("Message")
              and e.get("RequestId"), (r.status, r.body[:300]))
    eq("the object is unchanged after them", raw("GET", "/%s/obj" % b).body, b"object body")


def t_symlinks(b):
    if not H.shardgate_only("symlinks planted in a bucket"):
        return
    parent = os.path.dirname(H.S.data_dir.rstrip("/"))
    outf = os.path.join(parent, "outside.txt")
    outd = os.path.join(parent, "outdir")
    os.makedirs(outd, exist_ok=True)
    with open(outf, "wb") as f:
        f.write(b"OUTSIDE FILE")
    inner = os.path.join(outd, "inner.txt")
    with open(inner, "wb") as f:
        f.write(b"OUTSIDE DIR FILE")
    bdir = H.direct_path(b)
    os.symlink(outf, os.path.join(bdir, "link.txt"))
    os.symlink(outd, os.path.join(bdir, "linkdir"))
    os.symlink("../..", os.path.join(bdir, "uplink"))
    for key in ("link.txt", "linkdir/inner.txt", "uplink/outside.txt"):
        for m in ("GET", "HEAD"):
            r = raw(m, "/%s/%s" % (b, key))
            check("%s symlinked %s -> 403 AccessDenied or 404, never outside content" % (m, key),
                  r.status in (403, 404) and b"OUTSIDE" not in r.body and
                  (m == "HEAD" or code_of(r) in ("AccessDenied", "NoSuchKey")),
                  "status %d body %r" % (r.status, r.body[:200]))
    r = raw("GET", "/%s/link.txt" % b, headers={"Range": "bytes=0-3"})
    check("ranged GET through symlink never serves outside bytes", b"OUTS" not in r.body, r)
    r = raw("PUT", "/%s/linkdir/new.txt" % b, body=b"EVIL via linkdir")
    check("PUT through a symlinked dir -> 4xx", 400 <= r.status < 500, r)
    check("PUT through a symlinked dir wrote nothing outside",
          not os.path.exists(os.path.join(outd, "new.txt")))
    r = raw("PUT", "/%s/link.txt" % b, body=b"EVIL via link")
    eq("PUT onto a symlinked file left the outside file unchanged", open(outf, "rb").read(),
       b"OUTSIDE FILE")
    print("# PUT onto symlinked file: status %d" % r.status, flush=True)
    r = raw("DELETE", "/%s/linkdir/inner.txt" % b)
    check("DELETE through a symlinked dir leaves the outside file", os.path.exists(inner), r)
    r = raw("PUT", "/%s/uplink/outside.txt" % b, body=b"EVIL via uplink")
    eq("PUT through '../..' symlink left the outside file unchanged", open(outf, "rb").read(),
       b"OUTSIDE FILE")
    r = raw("GET", "/%s" % b, query="list-type=2")
    check("listing never shows keys under symlinked dirs", r.status == 200 and
          b"inner.txt" not in r.body and b"outside.txt" not in r.body, r.body[:500])
    for n in ("link.txt", "linkdir", "uplink"):
        p = os.path.join(bdir, n)
        if os.path.islink(p) or os.path.isfile(p):
            os.unlink(p)
    check("gateway alive after symlink tricks", H.alive())


def t_oversized_header(b):
    r = raw("GET", "/%s/obj" % b, headers={"X-Big": "a" * (20 * 1024)})
    check("20 KiB header -> 4xx", 400 <= r.status < 500, r.status, moto_deviates=True)
    check("gateway alive after oversized header", H.alive())
    # many headers adding up past the cap
    r = raw("GET", "/%s/obj" % b, headers={"X-Many-%03d" % i: "v" * 200 for i in range(100)})
    check("100 headers of 200 bytes -> 4xx", 400 <= r.status < 500, r.status, moto_deviates=True)
    check("gateway alive after many headers", H.alive())


def t_malformed_xml(b):
    for label, body in (("unclosed", b"<Delete><Object><Key>obj</Key></Object>"),
                        ("not xml", b"this is not xml at all"),
                        ("wrong root", b"<Nope><Object><Key>obj</Key></Object></Nope>")):
        md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
        r = raw("POST", "/%s" % b, query="delete=", body=body,
                headers={"Content-MD5": md5, "Content-Type": "application/xml"})
        eq("DeleteObjects %s XML -> 400 MalformedXML" % label, (r.status, code_of(r)),
           (400, "MalformedXML"), moto_deviates=True)
    eq("object survived malformed DeleteObjects", raw("GET", "/%s/obj" % b).body, b"object body")
    body = b"<CompleteMultipartUpload><Part><PartNumber>1"
    r = raw("POST", "/%s/obj" % b, query="uploadId=nonexistent", body=body)
    check("CompleteMultipartUpload malformed XML -> 400 MalformedXML or 404 NoSuchUpload",
          (r.status, code_of(r)) in ((400, "MalformedXML"), (404, "NoSuchUpload")), r,
          moto_deviates=True)


def _partial_put(b, key, total, send):
    """PUT with Content-Length `total`, send `send` bytes, then close."""
    url = "%s/%s/%s" % (H.S.endpoint, b, key)
    hdrs = H.sign_headers("PUT", url, payload_hash="UNSIGNED-PAYLOAD")
    s = socket.create_connection((H.S.host, H.S.port), timeout=30)
    try:
        lines = ["PUT /%s/%s HTTP/1.1" % (b, key), "Host: %s:%d" % (H.S.host, H.S.port),
                 "Content-Length: %d" % total]
        lines += ["%s: %s" % (k, v) for k, v in hdrs.items() if k.lower() != "host"]
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        chunk = b"N" * MB
        left = send
        while left > 0:
            n = min(left, len(chunk))
            s.sendall(chunk[:n])
            left -= n
        time.sleep(0.2)
    finally:
        s.close()


def t_disconnect(b):
    old = os.urandom(100000)
    eq("PUT older object", raw("PUT", "/%s/dis/old" % b, body=old).status, 200)
    _partial_put(b, "dis/old", 10 * MB, 5 * MB)
    _partial_put(b, "dis/new", 10 * MB, 5 * MB)
    deadline = time.time() + 10
    st = None
    while time.time() < deadline:
        st = raw("HEAD", "/%s/dis/new" % b).status
        if st == 404:
            break
        time.sleep(0.5)
    eq("half-sent PUT of a new key -> HEAD 404", st, 404)
    time.sleep(1)
    r = raw("GET", "/%s/dis/old" % b)
    eq("half-sent PUT over an older object leaves it unchanged", (r.status, H.sha256(r.body)),
       (200, H.sha256(old)))
    r = raw("GET", "/%s" % b, query="list-type=2&prefix=dis%2F")
    check("no partial upload shows in the listing", r.status == 200 and
          r.body.count(b"<Key>") == 1 and b"<Key>dis/old</Key>" in r.body, r.body[:600])
    check("gateway alive after client disconnects", H.alive())
    if H.is_shardgate():
        # the store keeps nothing of the aborted uploads: each temp file goes
        # when the gateway sees its client gone, which a starved gateway may
        # see late, so wait for it (the wait is not what is tested)
        def leftovers():
            found = []
            for dp, dns, fns in os.walk(H.S.data_dir):
                for fn in fns:
                    p = os.path.join(dp, fn)
                    try:
                        if os.path.getsize(p) >= 4 * MB and open(p, "rb").read(4) == b"NNNN":
                            found.append(os.path.relpath(p, H.S.data_dir))
                    except FileNotFoundError:   # removed while we looked
                        pass
            return found
        deadline = time.time() + 30
        while leftovers() and time.time() < deadline:
            time.sleep(0.2)
        eq("no partial upload data left in the data dir", leftovers(), [])


def t_date_header(b):
    """Every response, an error's too, carries exactly one Date: RFC 1123, now."""
    import email.utils
    import re
    form = re.compile(r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|"
                      r"Aug|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT$")
    for method, path, want in (("GET", "/%s/obj" % b, 200), ("HEAD", "/%s/obj" % b, 200),
                               ("GET", "/%s/no/such/key" % b, 404)):
        hdrs = H.sign_headers(method, "%s%s" % (H.S.endpoint, path))
        c = http.client.HTTPConnection(H.S.host, H.S.port, timeout=30)
        c.request(method, path, headers={k: v for k, v in hdrs.items() if k.lower() != "host"})
        resp = c.getresponse()
        resp.read()
        dates = [v for k, v in resp.getheaders() if k.lower() == "date"]
        c.close()
        now = time.time()
        ok = resp.status == want and len(dates) == 1 and form.match(dates[0]) is not None
        if ok:
            ok = abs(email.utils.parsedate_to_datetime(dates[0]).timestamp() - now) <= 5
        check("%s %s -> %d with one Date header, RFC 1123, now" % (method, path, want), ok,
              (resp.status, dates))


def main():
    H.start("test_errors")
    b = "sg-err-%s" % uuid.uuid4().hex[:10]
    eq("create bucket", raw("PUT", "/%s" % b).status, 200)
    eq("PUT obj", raw("PUT", "/%s/obj" % b, body=b"object body").status, 200)
    t_error_body(b)
    t_date_header(b)
    t_auth(b)
    t_escapes(b)
    t_not_implemented(b)
    t_symlinks(b)
    t_oversized_header(b)
    t_malformed_xml(b)
    t_disconnect(b)
    check("gateway alive at the end", H.alive())


H.run(main)
