"""tests/integration/test_sigv2.py - Signature Version 2, what boto3, aws-cli
v1 and s3cmd make by default for presigned URLs, and s3cmd's SigV2 headers:
- default presigned URLs of both boto3 versions (pip's 1.43, Debian's 1.26),
  path-style and virtual-hosted, with response-* overrides, fetched with
  urllib; `s3cmd signurl` and aws-cli v1's `aws s3 presign`;
- header-signed SigV2 (boto3 signature_version 's3' under both pythons, and
  s3cmd with signature_v2 = True: put, get, ls, multipart, del);
- tampered URLs (signature, Expires, key, added sub-resource, access key)
  -> 403 SignatureDoesNotMatch / InvalidAccessKeyId, expired -> 403
  AccessDenied "Request has expired"; the permission rules of SigV4;
- every HTTP date form in a SigV2 header request, and a signed Content-MD5
  that does not match the body (400 BadDigest);
- a second gateway with "sigv2": false answers 403 AccessDenied saying how
  to switch the client to SigV4, and still serves SigV4.
s3cmd or Debian's boto3 missing: those checks are reported as skipped (the
rest still runs); .ci/deps.sh installs both."""

import base64
import hashlib
import hmac
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from email.utils import formatdate

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import auth_common as A  # noqa: E402
import harness as H  # noqa: E402

check, eq = H.check, H.eq
HERE = os.path.dirname(os.path.abspath(__file__))
DEBIAN_PY = "/usr/bin/python3"
S3CMD = shutil.which("s3cmd")


# ---------------------------------------------------------------- gateways

def start_main(name):
    """harness.start(vhost=True) with the multi-user config of auth_common."""
    path = A.write_config()
    os.environ[A.BADMIN_ENV] = A.BADMIN_SECRET
    real = subprocess.Popen
    binp = os.environ.get("SHARDGATE_BIN")

    def popen(argv, *a, **kw):
        if isinstance(argv, list) and argv and argv[0] == binp:
            argv = argv + ["--config", path]
        return real(argv, *a, **kw)

    subprocess.Popen = popen
    try:
        return H.start(name, vhost=True)
    finally:
        subprocess.Popen = real


class Gateway:
    """A second shardgate with its own config: for the "sigv2": false switch.
    A data directory has one owner (its lock), so this one serves a copy of
    bucket `bucket` in a data directory of its own. Stopped with SIGTERM in
    stop(), also on failure."""

    def __init__(self, config, bucket):
        self.port = H._free_port()
        d = H.tmpdir("gw2")
        data = os.path.join(d, "data")
        shutil.copytree(os.path.join(H.S.data_dir, bucket), os.path.join(data, bucket))
        cfg = os.path.join(d, "shardgate.json")
        fd = os.open(cfg, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(config, f)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHARDGATE_")}
        env.update(SHARDGATE_ACCESS_KEY=H.ACCESS_KEY, SHARDGATE_SECRET_KEY=H.SECRET_KEY,
                   SHARDGATE_LOG_LEVEL="info")
        self.log = open(os.path.join(d, "gateway.log"), "wb")
        self.proc = subprocess.Popen(
            [os.environ["SHARDGATE_BIN"], "serve", "--listen", "127.0.0.1:%d" % self.port,
             "--data", data, "--config", cfg],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL,
            cwd=d)
        deadline = time.time() + 15
        self.up = False
        while time.time() < deadline and self.proc.poll() is None:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
                c.request("GET", "/_shardgate/health")
                self.up = c.getresponse().status == 200
                c.close()
            except OSError:
                pass
            if self.up:
                break
            time.sleep(0.1)
        self.endpoint = "http://127.0.0.1:%d" % self.port

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


# ---------------------------------------------------------------- HTTP

def fetch(url, method="GET", headers=None, body=None):
    """One request to a URL. Path-style URLs (host 127.0.0.1) without a body
    go through urllib as a data loader would; a virtual-hosted URL's host
    does not resolve here, so it is sent to 127.0.0.1 with that Host header
    (http.client; also for bodies: urllib would add a Content-Type that a
    presigned PUT did not sign, as curl -T and requests do not).
    Returns (status, headers with lower-case names, body)."""
    u = urllib.parse.urlsplit(url)
    if u.hostname == "127.0.0.1" and body is None:
        req = urllib.request.Request(url, method=method, data=body, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        except urllib.error.HTTPError as e:
            return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()
    c = http.client.HTTPConnection("127.0.0.1", u.port, timeout=60)
    try:
        c.putrequest(method, u.path + ("?" + u.query if u.query else ""), skip_host=True,
                     skip_accept_encoding=True)
        c.putheader("Host", u.netloc)
        for k, v in (headers or {}).items():
            c.putheader(k, v)
        if body is not None:
            c.putheader("Content-Length", str(len(body)))
        c.endheaders(body)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def err(body):
    e = H.parse_error(body) or {}
    return e.get("Code"), e.get("Message")


def get_ok(name, url, want, headers_want=None):
    st, hd, body = fetch(url)
    ok = eq(name + " -> 200", st, 200)
    if ok:
        eq(name + " returns the object's bytes", body == want, True)
    for k, v in (headers_want or {}).items():
        eq("%s answers %s" % (name, k), hd.get(k), v)
    if not ok:
        print("# %s: %s %r" % (name, url, body[:300]), flush=True)
    return ok


def denied(name, url, status, code, msg=None, method="GET"):
    st, hd, body = fetch(url, method=method)
    c, m = err(body)
    eq(name + " -> %d %s" % (status, code), (st, c), (status, code))
    if msg is not None:
        check(name + " says %r" % msg, m and msg in m, m)
    return m


def with_param(url, name, value):
    """url with query parameter `name` replaced by the raw `value`."""
    u = urllib.parse.urlsplit(url)
    parts = []
    for p in u.query.split("&"):
        parts.append("%s=%s" % (name, value) if p.split("=", 1)[0] == name else p)
    return urllib.parse.urlunsplit((u.scheme, u.netloc, u.path, "&".join(parts), ""))


def sigv2_header(method, path, secret, access, date_value=None, amz=None, md5="", ctype="",
                 date_header="Date"):
    """Headers of a request signed with SigV2 by S3's documented rule (what
    old SDKs and s3cmd do), path-style."""
    amz = dict(amz or {})
    date_value = date_value or formatdate(usegmt=True)
    hdrs = dict(amz)
    if date_header == "x-amz-date":
        amz["x-amz-date"] = date_value
        hdrs["x-amz-date"] = date_value
        date_line = ""
    else:
        hdrs["Date"] = date_value
        date_line = date_value
    canon_amz = "".join("%s:%s\n" % (k.lower(), v.strip()) for k, v in sorted(amz.items()))
    sts = "%s\n%s\n%s\n%s\n%s%s" % (method, md5, ctype, date_line, canon_amz, path)
    sig = base64.b64encode(hmac.new(secret.encode(), sts.encode(), hashlib.sha1).digest())
    hdrs["Authorization"] = "AWS %s:%s" % (access, sig.decode())
    if md5:
        hdrs["Content-MD5"] = md5
    if ctype:
        hdrs["Content-Type"] = ctype
    return hdrs


# ---------------------------------------------------------------- clients

def run_boto3_helper(py, spec):
    """Runs sigv2_boto3.py under interpreter `py`; returns its JSON or None."""
    env = dict(os.environ, PYTHONNOUSERSITE="1")
    if py == DEBIAN_PY:
        env.pop("PYTHONPATH", None)
    rc, out, errout = H.run_cmd([py, os.path.join(HERE, "sigv2_boto3.py"), json.dumps(spec)],
                                env=env, timeout=300)
    if rc != 0:
        check("sigv2_boto3.py under %s ran" % py, False, errout[-1500:])
        return None
    return json.loads(out)


def debian_boto3_present():
    if not os.access(DEBIAN_PY, os.X_OK):
        return False
    rc, _, _ = H.run_cmd([DEBIAN_PY, "-c", "import boto3"], timeout=60)
    return rc == 0


def s3cmd_config(signature_v2, endpoint_port, access=None, secret=None, name="s3cfg"):
    path = os.path.join(H.tmpdir("s3cmd"), name)
    with open(path, "w") as f:
        f.write("[default]\naccess_key = %s\nsecret_key = %s\n"
                "host_base = 127.0.0.1:%d\nhost_bucket = 127.0.0.1:%d\n"
                "use_https = False\nsignature_v2 = %s\nbucket_location = us-east-1\n"
                "check_ssl_certificate = False\nguess_mime_type = False\n"
                "multipart_chunk_size_mb = 5\n"
                % (access or H.ACCESS_KEY, secret or H.SECRET_KEY, endpoint_port,
                   endpoint_port, "True" if signature_v2 else "False"))
    return path


def s3cmd(cfg, *args, timeout=300):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["HOME"] = H.tmpdir("s3cmd-home")
    return H.run_cmd([S3CMD, "-c", cfg, "--no-progress"] + list(args), env=env, timeout=timeout)


# ---------------------------------------------------------------- the checks

def boto3_presigned(label, py, b, key, odd_key, objects):
    vhost_ep = "http://localhost:%d" % H.S.port
    spec = {
        "endpoint": H.S.endpoint, "access": H.ACCESS_KEY, "secret": H.SECRET_KEY,
        "presign": {
            "get": {"op": "get_object", "params": {"Bucket": b, "Key": key}},
            "odd": {"op": "get_object", "params": {"Bucket": b, "Key": odd_key}},
            "vhost": {"op": "get_object", "params": {"Bucket": b, "Key": key},
                      "style": "virtual", "endpoint": vhost_ep},
            "overrides": {"op": "get_object", "params": {
                "Bucket": b, "Key": key,
                "ResponseContentDisposition": 'attachment; filename="shard 1.tar"',
                "ResponseContentType": "application/x-tar"}},
            "list": {"op": "list_objects", "params": {"Bucket": b, "Prefix": "shards/"}},
            "head": {"op": "head_object", "params": {"Bucket": b, "Key": key},
                     "method": "HEAD"},
            "reader": {"op": "get_object", "params": {"Bucket": b, "Key": key},
                       "access": A.access_of("reader"), "secret": A.secret_of("reader")},
            "put_by_reader": {"op": "put_object", "params": {"Bucket": b, "Key": "by-reader"},
                              "method": "PUT", "access": A.access_of("reader"),
                              "secret": A.secret_of("reader")},
            "put": {"op": "put_object", "params": {"Bucket": b, "Key": "presigned-put-%s"
                                                    % label.replace(" ", "-")},
                    "method": "PUT"},
            "expired": {"op": "get_object", "params": {"Bucket": b, "Key": key},
                        "expires": -60},
        },
        "header_round_trip": True, "bucket": b, "key": key,
        "reader": [A.access_of("reader"), A.secret_of("reader")],
    }
    res = run_boto3_helper(py, spec)
    if res is None:
        return None
    label = "%s (boto3 %s)" % (label, res["boto3"])
    urls = res["urls"]
    check(label + ": default presigned URL is SigV2",
          "AWSAccessKeyId=" in urls["get"] and "Signature=" in urls["get"]
          and "X-Amz-" not in urls["get"], urls["get"])
    get_ok(label + ": presigned GET", urls["get"], objects[key])
    get_ok(label + ": presigned GET of a key with space, plus, unicode", urls["odd"],
           objects[odd_key])
    check(label + ": virtual-hosted URL names the bucket in the host",
          urllib.parse.urlsplit(urls["vhost"]).hostname == "%s.localhost" % b, urls["vhost"])
    get_ok(label + ": presigned GET, virtual-hosted", urls["vhost"], objects[key])
    get_ok(label + ": presigned GET with response-* overrides", urls["overrides"], objects[key],
           {"content-disposition": 'attachment; filename="shard 1.tar"',
            "content-type": "application/x-tar"})
    st, _, body = fetch(urls["list"])
    check(label + ": presigned ListObjects -> 200 listing the shard",
          st == 200 and key.encode() in body, (st, body[:200]))
    st, hd, _ = fetch(urls["head"], method="HEAD")
    eq(label + ": presigned HEAD -> 200 with the length", (st, hd.get("content-length")),
       (200, str(len(objects[key]))))
    get_ok(label + ": read-only user's presigned GET", urls["reader"], objects[key])
    denied(label + ": read-only user's presigned PUT", urls["put_by_reader"], 403,
           "AccessDenied", method="PUT")
    st, _, body = fetch(urls["put"], method="PUT", body=b"presigned put body")
    eq(label + ": presigned PUT -> 200", st, 200)
    denied(label + ": expired presigned GET", urls["expired"], 403, "AccessDenied",
           "Request has expired")
    for name, ok, detail in res["checks"]:
        check("%s: %s" % (label, name), ok, detail)
    return urls


def tampered(urls, b, key):
    u = urls["get"]
    sig = urllib.parse.unquote(urllib.parse.parse_qs(urllib.parse.urlsplit(u).query)
                               ["Signature"][0])
    flipped = ("B" if sig[0] == "A" else "A") + sig[1:]
    denied("tampered: one signature character", with_param(u, "Signature",
                                                            urllib.parse.quote(flipped, safe="")),
           403, "SignatureDoesNotMatch")
    exp = int(urllib.parse.parse_qs(urllib.parse.urlsplit(u).query)["Expires"][0])
    denied("tampered: Expires one second later", with_param(u, "Expires", str(exp + 1)), 403,
           "SignatureDoesNotMatch")
    denied("tampered: Expires in the past", with_param(u, "Expires", str(int(time.time()) - 5)),
           403, "AccessDenied", "Request has expired")
    other = u.replace("/" + H.quote_key(key), "/" + H.quote_key(key + "x"), 1)
    check("tampered: the key differs", other != u, other)
    denied("tampered: another key", other, 403, "SignatureDoesNotMatch")
    other_bucket = u.replace("/%s/" % b, "/%s-other/" % b, 1)
    denied("tampered: another bucket", other_bucket, 403, "SignatureDoesNotMatch")
    denied("tampered: added sub-resource ?uploadId", u + "&uploadId=x", 403,
           "SignatureDoesNotMatch")
    denied("tampered: added sub-resource ?versionId", u + "&versionId=null", 403,
           "SignatureDoesNotMatch")
    denied("tampered: added response-content-type", u + "&response-content-type=text%2Fhtml",
           403, "SignatureDoesNotMatch")
    denied("tampered: PUT with a GET URL", u, 403, "SignatureDoesNotMatch", method="PUT")
    denied("tampered: unknown AWSAccessKeyId", with_param(u, "AWSAccessKeyId", "NOBODY"), 403,
           "InvalidAccessKeyId")
    denied("tampered: another user's AWSAccessKeyId",
           with_param(u, "AWSAccessKeyId", A.access_of("reader")), 403, "SignatureDoesNotMatch")
    denied("incomplete: no Expires", u.replace("&Expires=", "&Xpires="), 403, "AccessDenied",
           "requires the Signature, Expires and AWSAccessKeyId")


def s3cmd_checks(b, key, objects):
    if not S3CMD:
        H.skip("s3cmd signurl and SigV2 headers", "s3cmd not installed (.ci/deps.sh test)")
        return
    port = H.S.port
    cfg = s3cmd_config(True, port)
    rc, out, errout = s3cmd(cfg, "signurl", "s3://%s/%s" % (b, key), "+3600")
    url = out.strip().splitlines()[-1] if out.strip() else ""
    check("s3cmd signurl made a SigV2 URL", rc == 0 and "AWSAccessKeyId=" in url,
          (rc, out, errout[-500:]))
    if url:
        get_ok("s3cmd signurl GET through urllib", url, objects[key])
    rc, out, errout = s3cmd(cfg, "signurl", "s3://%s/%s" % (b, key), "1000000000")
    url = out.strip().splitlines()[-1] if out.strip() else ""
    if url:
        denied("s3cmd signurl that expired in 2001", url, 403, "AccessDenied",
               "Request has expired")
    # header-signed SigV2 (x-amz-date, numeric zone): put, get, ls, multipart, del
    work = H.tmpdir("s3cmd-work")
    src = os.path.join(work, "up.bin")
    want = H.write_random_file(src, 300 * 1024 + 3)
    rc, out, errout = s3cmd(cfg, "put", src, "s3://%s/s3cmd/up.bin" % b)
    check("s3cmd put (SigV2 headers)", rc == 0, (rc, out, errout[-800:]))
    dst = os.path.join(work, "down.bin")
    rc, out, errout = s3cmd(cfg, "get", "--force", "s3://%s/s3cmd/up.bin" % b, dst)
    check("s3cmd get (SigV2 headers)",
          rc == 0 and os.path.exists(dst) and H.sha256_file(dst) == want,
          (rc, out, errout[-800:]))
    big = os.path.join(work, "big.bin")
    bwant = H.write_random_file(big, 5 * 1024 * 1024 + 17)
    rc, out, errout = s3cmd(cfg, "put", big, "s3://%s/s3cmd/big.bin" % b)
    check("s3cmd multipart put (SigV2: ?uploads, ?partNumber&uploadId)", rc == 0,
          (rc, out, errout[-800:]))
    bdst = os.path.join(work, "big.down")
    rc, out, errout = s3cmd(cfg, "get", "--force", "s3://%s/s3cmd/big.bin" % b, bdst)
    check("s3cmd get of the multipart object",
          rc == 0 and os.path.exists(bdst) and H.sha256_file(bdst) == bwant,
          (rc, errout[-800:]))
    rc, out, errout = s3cmd(cfg, "ls", "s3://%s/s3cmd/" % b)
    check("s3cmd ls (SigV2, bucket listing)",
          rc == 0 and "s3cmd/up.bin" in out and "s3cmd/big.bin" in out, (rc, out, errout[-500:]))
    rc, out, errout = s3cmd(cfg, "ls")
    check("s3cmd ls of the service (SigV2, ListBuckets)", rc == 0 and b in out,
          (rc, out, errout[-500:]))
    rc, out, errout = s3cmd(cfg, "del", "s3://%s/s3cmd/up.bin" % b, "s3://%s/s3cmd/big.bin" % b)
    check("s3cmd del (SigV2 headers)", rc == 0, (rc, out, errout[-500:]))
    code, status, _ = H.client_error(H.boto3_client().head_object, Bucket=b, Key="s3cmd/up.bin")
    eq("s3cmd del removed the object", status, 404)
    # a read-only user with SigV2 headers
    rcfg = s3cmd_config(True, port, A.access_of("reader"), A.secret_of("reader"), "reader")
    rc, out, errout = s3cmd(rcfg, "put", src, "s3://%s/s3cmd/by-reader.bin" % b)
    check("s3cmd put by a read-only user fails (403)", rc != 0 and "403" in (out + errout),
          (rc, out[-300:], errout[-500:]))


def awscli_v1_checks(b, key, objects):
    aws = shutil.which("aws")
    if not aws:
        H.skip("aws s3 presign (v1)", "aws not on PATH")
        return
    env = H.aws_env()
    rc, out, errout = H.run_cmd([aws, "--version"], env=env, timeout=60)
    if "aws-cli/1." not in out + errout:
        H.skip("aws s3 presign (v1)", "aws on PATH is not aws-cli v1: %s" % (out + errout))
        return
    rc, out, errout = H.run_cmd([aws, "--endpoint-url", H.S.endpoint, "s3", "presign",
                                 "s3://%s/%s" % (b, key), "--expires-in", "600"],
                                env=env, timeout=120)
    url = out.strip()
    check("aws-cli v1 s3 presign made a SigV2 URL", rc == 0 and "AWSAccessKeyId=" in url,
          (rc, out, errout[-500:]))
    if url:
        get_ok("aws-cli v1 presigned GET through urllib", url, objects[key])


def date_forms(b, key, objects):
    """SigV2 header requests with each date form SDKs send (path-style)."""
    now = time.time()
    tm = time.gmtime(now)
    forms = {
        "RFC 1123 GMT": formatdate(now, usegmt=True),
        "RFC 1123 -0000": formatdate(now),
        "RFC 1123 +0000": time.strftime("%a, %d %b %Y %H:%M:%S +0000", tm),
        "RFC 850": time.strftime("%A, %d-%b-%y %H:%M:%S GMT", tm),
        "asctime": time.asctime(tm),
        "ISO 8601 basic": time.strftime("%Y%m%dT%H%M%SZ", tm),
    }
    path = "/%s/%s" % (b, H.quote_key(key))
    for name, value in forms.items():
        for hdr in ("Date", "x-amz-date"):
            h = sigv2_header("GET", path, H.SECRET_KEY, H.ACCESS_KEY, value, date_header=hdr)
            r = H.raw("GET", path, headers=h, sign=False)
            eq("SigV2 header GET with %s %s (%r) -> 200" % (hdr, name, value), r.status, 200)
    old = formatdate(now - 16 * 60, usegmt=True)
    h = sigv2_header("GET", path, H.SECRET_KEY, H.ACCESS_KEY, old)
    r = H.raw("GET", path, headers=h, sign=False)
    eq("SigV2 header GET dated 16 minutes ago -> 403 RequestTimeTooSkewed",
       (r.status, (r.error() or {}).get("Code")), (403, "RequestTimeTooSkewed"))
    # a signed Content-MD5 that the body does not match
    body = b"sigv2 body"
    md5 = base64.b64encode(hashlib.md5(b"another body").digest()).decode()
    p = "/%s/sigv2-md5.bin" % b
    h = sigv2_header("PUT", p, H.SECRET_KEY, H.ACCESS_KEY, md5=md5,
                     ctype="application/octet-stream")
    r = H.raw("PUT", p, headers=h, body=body, sign=False)
    eq("SigV2 PUT whose Content-MD5 differs -> 400 BadDigest",
       (r.status, (r.error() or {}).get("Code")), (400, "BadDigest"))
    md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
    h = sigv2_header("PUT", p, H.SECRET_KEY, H.ACCESS_KEY, md5=md5,
                     ctype="application/octet-stream", amz={"x-amz-meta-k": "v"})
    r = H.raw("PUT", p, headers=h, body=body, sign=False)
    eq("SigV2 PUT with the right Content-MD5 and x-amz-meta -> 200", r.status, 200)
    h = sigv2_header("PUT", p, H.SECRET_KEY, H.ACCESS_KEY, md5=md5,
                     ctype="application/octet-stream", amz={"x-amz-meta-k": "v"})
    h["x-amz-meta-k"] = "changed"
    r = H.raw("PUT", p, headers=h, body=body, sign=False)
    eq("SigV2 PUT with an x-amz-meta changed after signing -> 403 SignatureDoesNotMatch",
       (r.status, (r.error() or {}).get("Code")), (403, "SignatureDoesNotMatch"))


def switched_off(b, key, objects, urls):
    g = Gateway({"sigv2": False}, b)
    try:
        if not check("gateway with \"sigv2\": false starts", g.up):
            return
        u = urls["get"].replace(H.S.endpoint, g.endpoint, 1)
        st, _, body = fetch(u)
        c, m = err(body)
        eq("sigv2 off: boto3 default presigned URL -> 403 AccessDenied", (st, c),
           (403, "AccessDenied"))
        check("sigv2 off: the message says SigV2 is off and how to use SigV4",
              m and "Signature Version 2" in m and "signature_version='s3v4'" in m
              and "s3 = signature_version = s3v4" in m, m)
        path = "/%s/%s" % (b, H.quote_key(key))
        h = sigv2_header("GET", path, H.SECRET_KEY, H.ACCESS_KEY)
        st, _, body = fetch(g.endpoint + path, headers=h)
        eq("sigv2 off: SigV2 header request -> 403 AccessDenied", (st, err(body)[0]),
           (403, "AccessDenied"))
        s4 = H.boto3_client(endpoint=g.endpoint)
        u4 = s4.generate_presigned_url("get_object", Params={"Bucket": b, "Key": key})
        st, _, body = fetch(u4)
        check("sigv2 off: a SigV4 presigned URL still works", st == 200 and body == objects[key],
              st)
    finally:
        g.stop()


def main():
    start_main("test_sigv2")
    s3 = H.boto3_client()
    b = "sg-sigv2-%s" % uuid.uuid4().hex[:8]
    s3.create_bucket(Bucket=b)
    key = "shards/shard-000001.tar"
    odd_key = "odd dir/a+b ü (1).txt"
    objects = {key: os.urandom(200 * 1024 + 11), odd_key: b"odd key body"}
    for k, v in objects.items():
        s3.put_object(Bucket=b, Key=k, Body=v)

    urls = boto3_presigned("pip python", sys.executable, b, key, odd_key, objects)
    if debian_boto3_present():
        boto3_presigned("Debian python", DEBIAN_PY, b, key, odd_key, objects)
    else:
        H.skip("Debian boto3 presigned URLs", "%s cannot import boto3" % DEBIAN_PY)
    if urls:
        tampered(urls, b, key)
    awscli_v1_checks(b, key, objects)
    s3cmd_checks(b, key, objects)
    date_forms(b, key, objects)
    if urls:
        switched_off(b, key, objects, urls)


if __name__ == "__main__":
    H.run(main)
