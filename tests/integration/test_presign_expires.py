"""tests/integration/test_presign_expires.py - the lifetime of a SigV4
presigned URL (X-Amz-Expires) as AWS S3 judges it, with URLs made by boto3
(pip's and Debian's) and fetched with urllib: 604800 seconds (7 days) and
less work; 0 or less -> 403 AccessDenied "Request has expired"; over 7 days
or not a number -> 400 AuthorizationQueryParametersError. (A 1-second URL is
left to tests/unit/test_auth_sigv4.c, whose clock is set: over HTTP it would
race the machine's load.)"""

import json
import os
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

check, eq = H.check, H.eq
DEBIAN_PY = "/usr/bin/python3"

# Makes SigV4 presigned GET URLs for each lifetime in argv[2] with the boto3
# of whatever python runs it; argv[1] = endpoint, access, secret, bucket, key.
MAKE_URLS = r"""
import json, sys
import boto3
from botocore.config import Config
a = json.loads(sys.argv[1])
c = boto3.session.Session().client(
    "s3", endpoint_url=a["endpoint"], region_name="us-east-1",
    aws_access_key_id=a["access"], aws_secret_access_key=a["secret"],
    config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
out = {"boto3": boto3.__version__, "urls": {}}
for e in a["expires"]:
    try:
        out["urls"][str(e)] = c.generate_presigned_url(
            "get_object", Params={"Bucket": a["bucket"], "Key": a["key"]}, ExpiresIn=e)
    except Exception:   # the CRT signer of some botocore refuses a negative lifetime
        out["urls"][str(e)] = None
print(json.dumps(out))
"""


def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def code_msg(body):
    e = H.parse_error(body) or {}
    return e.get("Code"), e.get("Message")


def with_expires(url, value):
    u = urllib.parse.urlsplit(url)
    q = "&".join("X-Amz-Expires=" + value if p.startswith("X-Amz-Expires=") else p
                 for p in u.query.split("&"))
    return urllib.parse.urlunsplit((u.scheme, u.netloc, u.path, q, ""))


def run_for(py, b, key, body):
    args = {"endpoint": H.S.endpoint, "access": H.ACCESS_KEY, "secret": H.SECRET_KEY,
            "bucket": b, "key": key, "expires": [3600, 604800, 0, -1, -604801, 604801]}
    env = dict(os.environ, PYTHONNOUSERSITE="1")
    if py == DEBIAN_PY:
        env.pop("PYTHONPATH", None)
    rc, out, err = H.run_cmd([py, "-c", MAKE_URLS, json.dumps(args)], env=env, timeout=120)
    if not check("%s made presigned URLs" % py, rc == 0, err[-1000:]):
        return
    res = json.loads(out)
    urls = res["urls"]
    label = "boto3 %s" % res["boto3"]
    check(label + ": the URLs are SigV4",
          all("X-Amz-Expires=" in u for u in urls.values() if u is not None), urls)
    for e in ("3600", "604800"):
        st, got = fetch(urls[e])
        eq("%s: X-Amz-Expires=%s -> 200" % (label, e), (st, got == body), (200, True))
    for e in ("0", "-1", "-604801"):
        how = ""
        if urls[e] is None:
            # this boto3 will not make it: the same URL with its lifetime
            # edited (the lifetime is judged before the signature)
            urls[e] = with_expires(urls["3600"], e)
            how = " (edited URL: this boto3 refuses to make it)"
        st, got = fetch(urls[e])
        eq("%s: X-Amz-Expires=%s%s -> 403 AccessDenied \"Request has expired\""
           % (label, e, how), (st,) + code_msg(got), (403, "AccessDenied", "Request has expired"))
    st, got = fetch(urls["604801"] or with_expires(urls["3600"], "604801"))
    eq("%s: X-Amz-Expires=604801 -> 400 AuthorizationQueryParametersError" % label,
       (st, code_msg(got)[0]), (400, "AuthorizationQueryParametersError"))
    for bad in ("abc", "1h", "", "6e2"):
        st, got = fetch(with_expires(urls["3600"], bad))
        eq("%s: X-Amz-Expires=%r -> 400 AuthorizationQueryParametersError" % (label, bad),
           (st, code_msg(got)[0]), (400, "AuthorizationQueryParametersError"))
    # within the limits, the lifetime is signed: a longer one is a forgery
    st, got = fetch(with_expires(urls["3600"], "7200"))
    eq("%s: X-Amz-Expires raised after signing -> 403 SignatureDoesNotMatch" % label,
       (st, code_msg(got)[0]), (403, "SignatureDoesNotMatch"))


def main():
    H.start("test_presign_expires")
    s3 = H.boto3_client()
    b = "sg-expires-%s" % uuid.uuid4().hex[:8]
    key = "shards/shard-000000.tar"
    body = os.urandom(64 * 1024)
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key=key, Body=body)
    run_for(sys.executable, b, key, body)
    probe = subprocess.run([DEBIAN_PY, "-c", "import boto3"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL) if os.access(DEBIAN_PY, os.X_OK) else None
    if probe is not None and probe.returncode == 0:
        run_for(DEBIAN_PY, b, key, body)
    else:
        H.skip("Debian boto3 presigned URLs", "%s cannot import boto3" % DEBIAN_PY)


if __name__ == "__main__":
    H.run(main)
