"""tests/integration/sigv2_boto3.py - run by test_sigv2.py under each boto3
(Debian's /usr/bin/python3 and the pyenv python3): makes boto3's default
presigned URLs (no signature_version configured: Signature Version 2) and
drives S3 calls signed with SigV2 headers (signature_version 's3'). Reads one
JSON spec from argv[1], prints one JSON object:
  {"boto3": version, "urls": {name: url}, "checks": [[name, ok, detail]...]}
Standard library and boto3 only; no harness import (another interpreter)."""

import hashlib
import json
import os
import sys

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError


def client(spec, signature_version, style="path", endpoint=None, access=None, secret=None):
    cfg = Config(s3={"addressing_style": style}, retries={"max_attempts": 1},
                 connect_timeout=10, read_timeout=60,
                 **({"signature_version": signature_version} if signature_version else {}))
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint or spec["endpoint"], region_name="us-east-1",
        aws_access_key_id=access or spec["access"],
        aws_secret_access_key=secret or spec["secret"], config=cfg)


def error_code(fn, **kw):
    try:
        fn(**kw)
    except ClientError as e:
        return e.response.get("Error", {}).get("Code"), e.response.get(
            "ResponseMetadata", {}).get("HTTPStatusCode")
    return None, 200


class _Stop(Exception):
    pass


def fixed_hmacv1(spec):
    """Does this botocore sign a bucket sub-resource right with HmacV1? Some
    (Debian's 1.29) sign GetBucketLocation over "/b?location?location" and
    every operation whose model path carries a query the same way
    (boto/boto3#4433). Asked of botocore itself: the string it signs for a
    GetBucketLocation that is stopped before it is sent."""
    import botocore.auth
    seen = []
    orig = botocore.auth.HmacV1Auth.sign_string

    def spy(self, string_to_sign):
        seen.append(string_to_sign)
        return orig(self, string_to_sign)

    def stop(**kw):
        raise _Stop()

    c = client(spec, "s3")
    c.meta.events.register("before-send.s3", stop)
    botocore.auth.HmacV1Auth.sign_string = spy
    try:
        c.get_bucket_location(Bucket="probe")
    except _Stop:
        pass
    finally:
        botocore.auth.HmacV1Auth.sign_string = orig
    return bool(seen) and "?location?location" not in seen[-1]


def header_round_trip(spec, checks):
    """Every call below is signed "Authorization: AWS key:signature"."""
    def check(name, ok, detail=""):
        checks.append([name, bool(ok), str(detail)[:500]])

    c = client(spec, "s3")
    b, k = spec["bucket"], "sigv2-header/obj ü+1.bin"
    data = os.urandom(300 * 1024 + 5)
    r = c.put_object(Bucket=b, Key=k, Body=data, ContentType="application/x-test",
                     Metadata={"note": "sigv2"})
    check("PUT (header SigV2) ETag is the MD5", r["ETag"] == '"%s"' % hashlib.md5(data).hexdigest(),
          r["ETag"])
    g = c.get_object(Bucket=b, Key=k)
    got = g["Body"].read()
    check("GET (header SigV2) returns the bytes", got == data, len(got))
    check("GET keeps Content-Type and metadata",
          g["ContentType"] == "application/x-test" and g["Metadata"].get("note") == "sigv2",
          (g["ContentType"], g["Metadata"]))
    rg = c.get_object(Bucket=b, Key=k, Range="bytes=10-19")["Body"].read()
    check("ranged GET (header SigV2)", rg == data[10:20], rg)
    h = c.head_object(Bucket=b, Key=k)
    check("HEAD (header SigV2)", h["ContentLength"] == len(data), h["ContentLength"])
    lst1 = c.list_objects(Bucket=b, Prefix="sigv2-header/", Delimiter="/")
    check("ListObjects v1 (header SigV2, bucket path)",
          [o["Key"] for o in lst1.get("Contents", [])] == [k], lst1.get("Contents"))
    c.copy_object(Bucket=b, Key=k + ".copy", CopySource={"Bucket": b, "Key": k})
    got = c.get_object(Bucket=b, Key=k + ".copy")["Body"].read()
    check("CopyObject (x-amz-copy-source signed)", got == data, len(got))
    if not fixed_hmacv1(spec):
        # this botocore signs the operations whose model path carries a query
        # wrongly ("/b?location?location", "/b/k?uploads?uploads",
        # "/b?list-type=2": boto/boto3#4433): S3 refuses them, and so do we
        code, status = error_code(c.get_bucket_location, Bucket=b)
        check("GetBucketLocation signed \"/b?location?location\" by this botocore "
              "(boto3#4433) -> 403 SignatureDoesNotMatch as on S3",
              (code, status) == ("SignatureDoesNotMatch", 403), (code, status))
        c.delete_object(Bucket=b, Key=k + ".copy")
    else:
        lst = c.list_objects_v2(Bucket=b, Prefix="sigv2-header/")
        check("ListObjectsV2 (header SigV2)",
              sorted(o["Key"] for o in lst.get("Contents", [])) == [k, k + ".copy"],
              lst.get("Contents"))
        loc = c.get_bucket_location(Bucket=b)
        check("GetBucketLocation (?location signed)", "LocationConstraint" in loc, loc)
        # multipart: ?uploads, ?partNumber&uploadId, ?uploadId (sub-resources signed)
        mp = c.create_multipart_upload(Bucket=b, Key=k + ".mp")
        p1 = os.urandom(5 * 1024 * 1024)
        p2 = os.urandom(1000)
        e1 = c.upload_part(Bucket=b, Key=k + ".mp", UploadId=mp["UploadId"], PartNumber=1,
                           Body=p1)["ETag"]
        e2 = c.upload_part(Bucket=b, Key=k + ".mp", UploadId=mp["UploadId"], PartNumber=2,
                           Body=p2)["ETag"]
        parts = c.list_parts(Bucket=b, Key=k + ".mp", UploadId=mp["UploadId"])
        check("ListParts (header SigV2)", len(parts.get("Parts", [])) == 2, parts.get("Parts"))
        c.complete_multipart_upload(
            Bucket=b, Key=k + ".mp", UploadId=mp["UploadId"],
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1},
                                       {"PartNumber": 2, "ETag": e2}]})
        got = c.get_object(Bucket=b, Key=k + ".mp")["Body"].read()
        check("multipart upload (header SigV2) round trip", got == p1 + p2, len(got))
        d = c.delete_objects(Bucket=b, Delete={"Objects": [{"Key": k + ".copy"},
                                                           {"Key": k + ".mp"}]})
        check("DeleteObjects (?delete signed)", len(d.get("Deleted", [])) == 2, d)
    code, status = error_code(c.get_object, Bucket=b, Key="sigv2-header/missing")
    check("missing key (header SigV2) -> 404 NoSuchKey", (code, status) == ("NoSuchKey", 404),
          (code, status))
    c.delete_object(Bucket=b, Key=k)
    code, status = error_code(c.head_object, Bucket=b, Key=k)
    check("DELETE (header SigV2) removed it", status == 404, (code, status))
    # the same identity as SigV4: a read-only user reads but cannot write
    if spec.get("reader"):
        rc = client(spec, "s3", access=spec["reader"][0], secret=spec["reader"][1])
        got = rc.get_object(Bucket=b, Key=spec["key"])["Body"].read()
        check("read-only user GET (header SigV2) allowed", len(got) > 0, len(got))
        code, status = error_code(rc.put_object, Bucket=b, Key="sigv2-header/denied", Body=b"x")
        check("read-only user PUT (header SigV2) -> 403 AccessDenied",
              (code, status) == ("AccessDenied", 403), (code, status))
        bad = client(spec, "s3", access=spec["reader"][0], secret="not-the-secret")
        code, status = error_code(bad.get_object, Bucket=b, Key=spec["key"])
        check("wrong secret (header SigV2) -> 403 SignatureDoesNotMatch",
              (code, status) == ("SignatureDoesNotMatch", 403), (code, status))


def main():
    spec = json.loads(sys.argv[1])
    out = {"boto3": boto3.__version__, "urls": {}, "checks": []}
    for name, p in spec.get("presign", {}).items():
        c = client(spec, None, p.get("style", "path"), endpoint=p.get("endpoint"),
                   access=p.get("access"), secret=p.get("secret"))
        out["urls"][name] = c.generate_presigned_url(
            p["op"], Params=p["params"], ExpiresIn=p.get("expires", 3600),
            HttpMethod=p.get("method"))
    if spec.get("header_round_trip"):
        try:
            header_round_trip(spec, out["checks"])
        except Exception as e:   # noqa - reported as a failed check
            out["checks"].append(["header round trip ran to the end", False,
                                  "%s: %s" % (type(e).__name__, e)])
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
