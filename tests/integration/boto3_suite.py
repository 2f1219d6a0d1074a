"""tests/integration/boto3_suite.py - the S3 API as boto3 uses it, against a
real shardgate: buckets, objects and their headers, ranges, conditional
requests, copies, odd keys, listings, batch delete, multipart and managed
transfers. Run by test_boto3_new.py (pyenv python, boto3 1.43) and by
test_boto3_debian.py (/usr/bin/python3, Debian boto3 1.26).

boto3 1.43 sends PUT/UploadPart bodies as aws-chunked
STREAMING-UNSIGNED-PAYLOAD-TRAILER with a CRC32 trailer, but only over https;
over http it signs the payload and sends x-amz-checksum-crc32 as a header.
So that the gateway sees what boto3 sends in production, the main client is
switched to the trailer form (FORCE_TRAILER); a second client keeps the
plain http behaviour.
"""

import base64
import binascii
import datetime
import hashlib
import os
import socket
import sys
import threading
import time
import urllib.parse
import uuid
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

import boto3  # noqa: E402
import botocore  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

check, eq, client_error = H.check, H.eq, H.client_error
MB = H.MB

# ---------------------------------------------------------------- aws-chunked

FORCE_TRAILER = [False]


def install_trailer_switch():
    """Makes botocore choose the trailer checksum over http while
    FORCE_TRAILER[0] is set (botocore >= 1.36 only). Returns True if installed."""
    try:
        import botocore.httpchecksum as hc
    except ImportError:
        return False
    if not hasattr(hc, "urlparse"):
        return False
    real = hc.urlparse

    def fake(url, *a, **kw):
        u = real(url, *a, **kw)
        if FORCE_TRAILER[0] and u.scheme == "http":
            return u._replace(scheme="https")
        return u
    hc.urlparse = fake
    return True


# ---------------------------------------------------------------- request ids

class RequestIds:
    """Counts every response boto3 receives and remembers those without
    x-amz-request-id (success and error alike)."""

    def __init__(self):
        self.n = 0
        self.missing = []
        self.lock = threading.Lock()

    def hook(self, http_response=None, model=None, **kw):
        if http_response is None:
            return
        with self.lock:
            self.n += 1
            if not http_response.headers.get("x-amz-request-id"):
                self.missing.append("%s->%d" % (model.name if model else "?",
                                                http_response.status_code))

    def attach(self, client):
        client.meta.events.register("after-call.s3", self.hook)
        return client


RIDS = RequestIds()


def new_client(style="path", **kw):
    return RIDS.attach(H.boto3_client(style=style, **kw))


def uniq(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:10])


def crc32_b64(data):
    return base64.b64encode((binascii.crc32(data) & 0xFFFFFFFF).to_bytes(4, "big")).decode()


def err_is(name, res, code, status, moto_deviates=False):
    got_code, got_status, hdrs = res
    ok = check("%s -> %s %d" % (name, code, status), got_code == code and got_status == status,
               "got %r %r" % (got_code, got_status), moto_deviates)
    return ok


def delete_all(c, bucket):
    """Empties a bucket (objects and uploads); ignores errors."""
    try:
        for page in c.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                c.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
        for u in c.list_multipart_uploads(Bucket=bucket).get("Uploads", []):
            c.abort_multipart_upload(Bucket=bucket, Key=u["Key"], UploadId=u["UploadId"])
    except ClientError:
        pass


# ---------------------------------------------------------------- buckets

def t_buckets(c):
    b = uniq("sg-bkt")
    r = c.create_bucket(Bucket=b)
    eq("CreateBucket status", r["ResponseMetadata"]["HTTPStatusCode"], 200)
    names = [x["Name"] for x in c.list_buckets()["Buckets"]]
    check("ListBuckets lists the new bucket", b in names, names)
    err_is("CreateBucket invalid name 'Bad_Name'", client_error(c.create_bucket, Bucket="Bad_Name"),
           "InvalidBucketName", 400, moto_deviates=True)
    err_is("CreateBucket invalid name 'ab'", client_error(c.create_bucket, Bucket="ab"),
           "InvalidBucketName", 400)
    # us-east-1 (the suite's region) answers a re-create of your own bucket
    # with 200; every other region with 409 BucketAlreadyOwnedByYou
    # (test_s3_surface.py checks both).
    eq("CreateBucket twice in us-east-1 -> 200",
       c.create_bucket(Bucket=b)["ResponseMetadata"]["HTTPStatusCode"], 200)
    eq("HeadBucket existing", c.head_bucket(Bucket=b)["ResponseMetadata"]["HTTPStatusCode"], 200)
    err_is("HeadBucket missing", client_error(c.head_bucket, Bucket=uniq("sg-missing")), "404", 404)
    loc = c.get_bucket_location(Bucket=b)
    check("GetBucketLocation is empty (us-east-1)", loc.get("LocationConstraint") in (None, ""),
          loc.get("LocationConstraint"))
    c.put_object(Bucket=b, Key="x", Body=b"x")
    err_is("DeleteBucket not empty", client_error(c.delete_bucket, Bucket=b), "BucketNotEmpty", 409)
    c.delete_object(Bucket=b, Key="x")
    r = c.delete_bucket(Bucket=b)
    eq("DeleteBucket empty -> 204", r["ResponseMetadata"]["HTTPStatusCode"], 204)
    err_is("HeadBucket after delete", client_error(c.head_bucket, Bucket=b), "404", 404)
    err_is("DeleteBucket missing", client_error(c.delete_bucket, Bucket=b), "NoSuchBucket", 404)
    err_is("PutObject into missing bucket",
           client_error(c.put_object, Bucket=b, Key="k", Body=b"1"), "NoSuchBucket", 404)


# ---------------------------------------------------------------- objects

def t_put_headers(c, b, label):
    data = os.urandom(3000)
    exp = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    key = "hdrs/%s.bin" % label
    r = c.put_object(Bucket=b, Key=key, Body=data, ContentType="application/x-sg-test",
                     ContentEncoding="gzip", ContentDisposition='attachment; filename="a b.bin"',
                     CacheControl="max-age=60, private", Expires=exp, ContentLanguage="de-CH",
                     Metadata={"color": "blue", "Mixed-Case": "Value With Spaces"})
    eq("%s: PutObject ETag is the MD5" % label, r["ETag"], '"%s"' % H.md5(data))
    if "ChecksumCRC32" in r or label == "trailer":
        eq("%s: PutObject returns x-amz-checksum-crc32" % label, r.get("ChecksumCRC32"),
           crc32_b64(data))
    for what, resp in (("HeadObject", c.head_object(Bucket=b, Key=key)),
                       ("GetObject", c.get_object(Bucket=b, Key=key))):
        p = "%s: %s" % (label, what)
        eq(p + " ContentType", resp.get("ContentType"), "application/x-sg-test")
        # boto3 adds ",aws-chunked" to the Content-Encoding of a trailer upload;
        # S3 stores the encoding without it.
        eq(p + " ContentEncoding", resp.get("ContentEncoding"), "gzip")
        eq(p + " ContentDisposition", resp.get("ContentDisposition"), 'attachment; filename="a b.bin"')
        eq(p + " CacheControl", resp.get("CacheControl"), "max-age=60, private")
        eq(p + " ContentLanguage", resp.get("ContentLanguage"), "de-CH")
        got_exp = resp.get("Expires") or resp.get("ExpiresString")
        if isinstance(got_exp, datetime.datetime):
            got_exp = got_exp.astimezone(datetime.timezone.utc)
        check(p + " Expires", got_exp == exp or got_exp == "Wed, 02 Jan 2030 03:04:05 GMT",
              repr(got_exp))
        eq(p + " Metadata (names lower-cased)", resp.get("Metadata"),
           {"color": "blue", "mixed-case": "Value With Spaces"})
        eq(p + " ContentLength", resp.get("ContentLength"), len(data))
        eq(p + " ETag", resp.get("ETag"), '"%s"' % H.md5(data))
        check(p + " LastModified present", isinstance(resp.get("LastModified"), datetime.datetime))
        if what == "GetObject":
            eq(p + " body sha256", H.sha256(resp["Body"].read()), H.sha256(data))


def t_content_md5(c, b):
    data = b"content-md5 body " * 100
    good = base64.b64encode(hashlib.md5(data).digest()).decode()
    r = c.put_object(Bucket=b, Key="md5/good", Body=data, ContentMD5=good)
    eq("PutObject good Content-MD5 ETag", r["ETag"], '"%s"' % H.md5(data))
    bad = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    err_is("PutObject bad Content-MD5", client_error(c.put_object, Bucket=b, Key="md5/bad",
                                                     Body=data, ContentMD5=bad), "BadDigest", 400,
           moto_deviates=True)
    err_is("HeadObject after BadDigest (nothing stored)",
           client_error(c.head_object, Bucket=b, Key="md5/bad"), "404", 404, moto_deviates=True)
    err_is("PutObject malformed Content-MD5",
           client_error(c.put_object, Bucket=b, Key="md5/bad2", Body=data, ContentMD5="notbase64!"),
           "InvalidDigest", 400, moto_deviates=True)


def t_checksums(c, b):
    data = b"checksum body " * 1000
    r = c.put_object(Bucket=b, Key="ck/sha256", Body=data, ChecksumAlgorithm="SHA256")
    want = base64.b64encode(hashlib.sha256(data).digest()).decode()
    eq("PutObject ChecksumAlgorithm=SHA256 echoes x-amz-checksum-sha256", r.get("ChecksumSHA256"),
       want)
    err_is("PutObject wrong x-amz-checksum-crc32",
           client_error(c.put_object, Bucket=b, Key="ck/bad", Body=data, ChecksumCRC32="AAAAAA=="),
           "BadDigest", 400, moto_deviates=True)
    err_is("HeadObject after checksum mismatch (nothing stored)",
           client_error(c.head_object, Bucket=b, Key="ck/bad"), "404", 404, moto_deviates=True)


def t_ranges(c, b):
    data = os.urandom(1000)
    c.put_object(Bucket=b, Key="range", Body=data)
    for rng, lo, hi in (("bytes=0-9", 0, 9), ("bytes=-5", 995, 999), ("bytes=10-", 10, 999),
                        ("bytes=990-5000", 990, 999), ("bytes=999-999", 999, 999)):
        r = c.get_object(Bucket=b, Key="range", Range=rng)
        body = r["Body"].read()
        eq("GetObject %s status 206" % rng, r["ResponseMetadata"]["HTTPStatusCode"], 206)
        eq("GetObject %s ContentRange" % rng, r.get("ContentRange"), "bytes %d-%d/1000" % (lo, hi))
        eq("GetObject %s ContentLength" % rng, r.get("ContentLength"), hi - lo + 1)
        eq("GetObject %s bytes" % rng, H.sha256(body), H.sha256(data[lo:hi + 1]))
    r = c.head_object(Bucket=b, Key="range", Range="bytes=0-9")
    eq("HeadObject bytes=0-9 -> 206 length 10",
       (r["ResponseMetadata"]["HTTPStatusCode"], r["ContentLength"]), (206, 10))
    for rng in ("bytes=1000-", "bytes=5000-6000"):
        code, st, hdrs = client_error(c.get_object, Bucket=b, Key="range", Range=rng)
        err_is("GetObject %s" % rng, (code, st, hdrs), "InvalidRange", 416)
        eq("GetObject %s Content-Range: bytes */1000" % rng, (hdrs or {}).get("content-range"),
           "bytes */1000", moto_deviates=True)
    # S3 ignores a Range it cannot parse and returns the whole object.
    r = c.get_object(Bucket=b, Key="range", Range="bytes=abc")
    eq("GetObject unparsable range -> 200 whole object",
       (r["ResponseMetadata"]["HTTPStatusCode"], H.sha256(r["Body"].read())), (200, H.sha256(data)))
    z = c.put_object(Bucket=b, Key="empty", Body=b"")
    eq("PutObject empty ETag", z["ETag"], '"%s"' % H.md5(b""))
    r = c.get_object(Bucket=b, Key="empty")
    eq("GetObject empty object", (r["ContentLength"], r["Body"].read()), (0, b""))


def t_conditional(c, b):
    data = b"conditional"
    etag = c.put_object(Bucket=b, Key="cond", Body=data)["ETag"]
    lm = c.head_object(Bucket=b, Key="cond")["LastModified"]
    day = datetime.timedelta(days=1)

    def ok(**kw):
        try:
            return c.get_object(Bucket=b, Key="cond", **kw)["ResponseMetadata"]["HTTPStatusCode"]
        except ClientError as e:
            return e.response["ResponseMetadata"]["HTTPStatusCode"]
    eq("If-Match current ETag -> 200", ok(IfMatch=etag), 200)
    err_is("If-Match other ETag", client_error(c.get_object, Bucket=b, Key="cond", IfMatch='"0000"'),
           "PreconditionFailed", 412)
    err_is("If-None-Match current ETag", client_error(c.get_object, Bucket=b, Key="cond",
                                                      IfNoneMatch=etag), "304", 304)
    eq("If-None-Match other ETag -> 200", ok(IfNoneMatch='"0000"'), 200)
    err_is("If-Modified-Since LastModified", client_error(c.get_object, Bucket=b, Key="cond",
                                                          IfModifiedSince=lm), "304", 304)
    eq("If-Modified-Since a day before -> 200", ok(IfModifiedSince=lm - day), 200)
    err_is("If-Unmodified-Since a day before",
           client_error(c.get_object, Bucket=b, Key="cond", IfUnmodifiedSince=lm - day),
           "PreconditionFailed", 412)
    eq("If-Unmodified-Since LastModified -> 200", ok(IfUnmodifiedSince=lm), 200)
    # S3's precedence rules (GetObject reference):
    eq("If-Match true + If-Unmodified-Since false -> 200",
       ok(IfMatch=etag, IfUnmodifiedSince=lm - day), 200, moto_deviates=True)
    err_is("If-None-Match false + If-Modified-Since true",
           client_error(c.get_object, Bucket=b, Key="cond", IfNoneMatch=etag,
                        IfModifiedSince=lm - day), "304", 304)
    err_is("If-Match false + If-Modified-Since false -> 412",
           client_error(c.get_object, Bucket=b, Key="cond", IfMatch='"0000"', IfModifiedSince=lm),
           "PreconditionFailed", 412)
    err_is("HeadObject If-None-Match current", client_error(c.head_object, Bucket=b, Key="cond",
                                                            IfNoneMatch=etag), "304", 304)
    err_is("HeadObject If-Match other", client_error(c.head_object, Bucket=b, Key="cond",
                                                     IfMatch='"0000"'), "412", 412)
    r = c.get_object(Bucket=b, Key="cond", IfMatch=etag, Range="bytes=0-3")
    eq("If-Match + Range -> 206 'cond'", (r["ResponseMetadata"]["HTTPStatusCode"],
                                          r["Body"].read()), (206, b"cond"))


def t_overrides(c, b):
    c.put_object(Bucket=b, Key="ovr", Body=b"override", ContentType="text/plain")
    r = c.get_object(Bucket=b, Key="ovr", ResponseContentType="application/x-ovr",
                     ResponseContentLanguage="fr", ResponseCacheControl="no-cache",
                     ResponseContentDisposition="inline", ResponseContentEncoding="identity",
                     ResponseExpires=datetime.datetime(2031, 5, 6, 7, 8, 9,
                                                       tzinfo=datetime.timezone.utc))
    h = r["ResponseMetadata"]["HTTPHeaders"]
    m = True   # moto ignores the response-* overrides
    eq("response-content-type", h.get("content-type"), "application/x-ovr", m)
    eq("response-content-language", h.get("content-language"), "fr", m)
    eq("response-cache-control", h.get("cache-control"), "no-cache", m)
    eq("response-content-disposition", h.get("content-disposition"), "inline", m)
    eq("response-content-encoding", h.get("content-encoding"), "identity", m)
    eq("response-expires", h.get("expires"), "Tue, 06 May 2031 07:08:09 GMT", m)
    eq("overrides keep the body", r["Body"].read(), b"override")
    eq("overrides are not stored", c.head_object(Bucket=b, Key="ovr")["ContentType"], "text/plain")


def t_delete(c, b):
    c.put_object(Bucket=b, Key="del", Body=b"1")
    eq("DeleteObject existing -> 204",
       c.delete_object(Bucket=b, Key="del")["ResponseMetadata"]["HTTPStatusCode"], 204)
    err_is("GetObject deleted", client_error(c.get_object, Bucket=b, Key="del"), "NoSuchKey", 404)
    eq("DeleteObject missing -> 204",
       c.delete_object(Bucket=b, Key="del")["ResponseMetadata"]["HTTPStatusCode"], 204)
    err_is("DeleteObject in missing bucket",
           client_error(c.delete_object, Bucket=uniq("sg-missing"), Key="k"), "NoSuchBucket", 404)


def t_copy(c, b):
    data = os.urandom(4096)
    src = c.put_object(Bucket=b, Key="cp/src", Body=data, ContentType="image/x-src",
                       Metadata={"a": "1"})
    etag = src["ETag"]
    r = c.copy_object(Bucket=b, Key="cp/dst1", CopySource={"Bucket": b, "Key": "cp/src"})
    eq("CopyObject COPY ETag", r["CopyObjectResult"]["ETag"], '"%s"' % H.md5(data))
    h = c.head_object(Bucket=b, Key="cp/dst1")
    eq("CopyObject COPY keeps metadata", (h["ContentType"], h["Metadata"]), ("image/x-src", {"a": "1"}))
    eq("CopyObject COPY bytes", H.sha256(c.get_object(Bucket=b, Key="cp/dst1")["Body"].read()),
       H.sha256(data))
    c.copy_object(Bucket=b, Key="cp/dst2", CopySource={"Bucket": b, "Key": "cp/src"},
                  MetadataDirective="REPLACE", ContentType="text/x-new", Metadata={"b": "2"})
    h = c.head_object(Bucket=b, Key="cp/dst2")
    eq("CopyObject REPLACE sets new metadata", (h["ContentType"], h["Metadata"]),
       ("text/x-new", {"b": "2"}))
    r = c.copy_object(Bucket=b, Key="cp/dst3", CopySource="%s/cp/src" % b, CopySourceIfMatch=etag)
    eq("CopySourceIfMatch current ETag copies", r["CopyObjectResult"]["ETag"], etag)
    err_is("CopySourceIfMatch other ETag",
           client_error(c.copy_object, Bucket=b, Key="cp/dst4", CopySource="%s/cp/src" % b,
                        CopySourceIfMatch='"0000"'), "PreconditionFailed", 412, moto_deviates=True)
    err_is("CopySourceIfNoneMatch current ETag",
           client_error(c.copy_object, Bucket=b, Key="cp/dst4", CopySource="%s/cp/src" % b,
                        CopySourceIfNoneMatch=etag), "PreconditionFailed", 412)
    err_is("CopyObject destination not created by failed precondition",
           client_error(c.head_object, Bucket=b, Key="cp/dst4"), "404", 404, moto_deviates=True)
    err_is("CopyObject onto itself without REPLACE",
           client_error(c.copy_object, Bucket=b, Key="cp/src", CopySource="%s/cp/src" % b),
           "InvalidRequest", 400)
    c.copy_object(Bucket=b, Key="cp/src", CopySource="%s/cp/src" % b, MetadataDirective="REPLACE",
                  ContentType="text/x-self", Metadata={"c": "3"})
    h = c.head_object(Bucket=b, Key="cp/src")
    eq("CopyObject onto itself with REPLACE changes metadata, keeps bytes",
       (h["ContentType"], h["Metadata"], h["ContentLength"], h["ETag"]),
       ("text/x-self", {"c": "3"}, len(data), etag))
    err_is("CopyObject missing source",
           client_error(c.copy_object, Bucket=b, Key="cp/x", CopySource="%s/cp/none" % b),
           "NoSuchKey", 404)


def odd_key_1024():
    seg = "k" * 200 + "/"
    k = seg * 5
    return k + "z" * (1024 - len(k))


def t_odd_keys(c, b):
    keys = ["with space.txt", "plus+sign", "percent%20literal%", "unicodé/日本語/ключ",
            "double//slash", "trailing/", "q?mark&amp=1#hash", "tilde~star*(paren)",
            "semi;colon,comma:@$!'", odd_key_1024()]
    for k in keys:
        data = ("data of %s" % k).encode() if not k.endswith("/") else b""
        label = k if len(k) < 60 else "1024-byte key"
        try:
            r = c.put_object(Bucket=b, Key=k, Body=data)
        except ClientError as e:
            check("PutObject key %r" % label, False, e.response.get("Error"))
            continue
        eq("PutObject key %r ETag" % label, r["ETag"], '"%s"' % H.md5(data))
        eq("HeadObject key %r" % label, c.head_object(Bucket=b, Key=k)["ContentLength"], len(data))
        eq("GetObject key %r bytes" % label,
           H.sha256(c.get_object(Bucket=b, Key=k)["Body"].read()), H.sha256(data))
        lst = c.list_objects_v2(Bucket=b, Prefix=k).get("Contents", [])
        eq("ListObjectsV2 shows key %r exactly" % label, [o["Key"] for o in lst], [k])
        c.delete_object(Bucket=b, Key=k)
        err_is("key %r gone after delete" % label, client_error(c.head_object, Bucket=b, Key=k),
               "404", 404)
    err_is("PutObject 1025-byte key",
           client_error(c.put_object, Bucket=b, Key=odd_key_1024() + "z", Body=b"x"),
           "KeyTooLongError", 400, moto_deviates=True)


def t_listing(c):
    b = uniq("sg-list")
    c.create_bucket(Bucket=b)
    keys = ["a-x", "a/1", "a/2", "a/b/3", "a0", "b", "c/x", "c/y", "d", "Z", "0", "~", "é", "z",
            "日本"]
    for k in keys:
        c.put_object(Bucket=b, Key=k, Body=k.encode())
    order = sorted(keys, key=lambda k: k.encode("utf-8"))
    got = [o["Key"] for o in c.list_objects_v2(Bucket=b)["Contents"]]
    eq("ListObjectsV2 UTF-8 binary key order ('a-x' < 'a/1' < 'a0')", got, order)
    got = [o["Key"] for o in c.list_objects(Bucket=b)["Contents"]]
    eq("ListObjects (v1) UTF-8 binary key order", got, order)
    r = c.list_objects_v2(Bucket=b)
    eq("ListObjectsV2 KeyCount", r.get("KeyCount"), len(keys))
    o = [x for x in r["Contents"] if x["Key"] == "a/1"][0]
    eq("ListObjectsV2 entry Size/ETag", (o["Size"], o["ETag"]), (3, '"%s"' % H.md5(b"a/1")))

    r = c.list_objects_v2(Bucket=b, Prefix="a/", Delimiter="/")
    eq("Prefix a/ Delimiter / Contents", [x["Key"] for x in r.get("Contents", [])], ["a/1", "a/2"])
    eq("Prefix a/ Delimiter / CommonPrefixes", [x["Prefix"] for x in r.get("CommonPrefixes", [])],
       ["a/b/"])
    r = c.list_objects_v2(Bucket=b, Delimiter="/")
    eq("Delimiter / at root CommonPrefixes", [x["Prefix"] for x in r.get("CommonPrefixes", [])],
       ["a/", "c/"])
    eq("Delimiter / at root Contents", [x["Key"] for x in r.get("Contents", [])],
       [k for k in order if "/" not in k])
    eq("Delimiter / KeyCount counts prefixes", r.get("KeyCount"),
       len([k for k in order if "/" not in k]) + 2)
    r = c.list_objects_v2(Bucket=b, Prefix="a", Delimiter="/")
    eq("Prefix 'a' Delimiter / (partial segment)",
       ([x["Key"] for x in r.get("Contents", [])], [x["Prefix"] for x in r.get("CommonPrefixes", [])]),
       (["a-x", "a0"], ["a/"]))
    r = c.list_objects_v2(Bucket=b, Delimiter="-")
    eq("Delimiter '-' (not '/')", [x["Prefix"] for x in r.get("CommonPrefixes", [])], ["a-"])
    r = c.list_objects_v2(Bucket=b, Prefix="nothing/")
    eq("Prefix matching nothing", (r.get("KeyCount"), r.get("Contents"), r["IsTruncated"]),
       (0, None, False))

    # paging v2 with MaxKeys=2 / ContinuationToken
    seen, token, pages = [], None, 0
    while True:
        kw = {"ContinuationToken": token} if token else {}
        r = c.list_objects_v2(Bucket=b, MaxKeys=2, **kw)
        pages += 1
        seen += [x["Key"] for x in r.get("Contents", [])]
        if pages == 1:
            check("MaxKeys=2 first page truncated with NextContinuationToken",
                  r["IsTruncated"] and r.get("NextContinuationToken") and len(r["Contents"]) == 2, r)
        if not r["IsTruncated"]:
            break
        token = r["NextContinuationToken"]
        if pages > 50:
            break
    eq("ContinuationToken paging (MaxKeys=2) lists every key once in order", seen, order)
    # paging v2 with a delimiter: prefixes and keys share MaxKeys
    seen, token = [], None
    for _ in range(50):
        kw = {"ContinuationToken": token} if token else {}
        r = c.list_objects_v2(Bucket=b, MaxKeys=3, Delimiter="/", **kw)
        seen += [x["Key"] for x in r.get("Contents", [])] + \
                [x["Prefix"] for x in r.get("CommonPrefixes", [])]
        check("MaxKeys=3 Delimiter page holds <= 3 entries",
              len(r.get("Contents", [])) + len(r.get("CommonPrefixes", [])) <= 3, r)
        if not r["IsTruncated"]:
            break
        token = r["NextContinuationToken"]
    want = sorted([k for k in keys if "/" not in k] + ["a/", "c/"], key=lambda k: k.encode())
    eq("paging with Delimiter: keys + prefixes once each", sorted(seen, key=lambda k: k.encode()), want)
    eq("paging with Delimiter: no duplicates", len(seen), len(want))

    r = c.list_objects_v2(Bucket=b, StartAfter="b")
    eq("StartAfter=b", [x["Key"] for x in r["Contents"]], [k for k in order if k.encode() > b"b"])
    r = c.list_objects_v2(Bucket=b, StartAfter="a/", Delimiter="/")
    eq("StartAfter inside a common prefix", [x["Prefix"] for x in r.get("CommonPrefixes", [])],
       ["c/"])
    r = c.list_objects(Bucket=b, Marker="b")
    eq("ListObjects Marker=b", [x["Key"] for x in r["Contents"]],
       [k for k in order if k.encode() > b"b"])
    # v1 paging with MaxKeys and Delimiter: NextMarker is returned
    seen, marker = [], ""
    for _ in range(50):
        r = c.list_objects(Bucket=b, MaxKeys=2, Delimiter="/", Marker=marker)
        seen += [x["Key"] for x in r.get("Contents", [])] + \
                [x["Prefix"] for x in r.get("CommonPrefixes", [])]
        if not r["IsTruncated"]:
            break
        check("ListObjects v1 truncated page with Delimiter has NextMarker", r.get("NextMarker"), r)
        marker = r.get("NextMarker") or seen[-1]
    # As in ceph's s3-tests (validated against AWS): a Marker that is a common
    # prefix skips everything under it. moto repeats the prefix instead.
    eq("ListObjects v1 Marker paging with Delimiter", sorted(seen, key=lambda k: k.encode()), want,
       moto_deviates=True)
    eq("ListObjects v1 Marker paging: no duplicates", len(seen), len(want), moto_deviates=True)
    r = c.list_objects(Bucket=b, MaxKeys=0)
    eq("MaxKeys=0 -> no keys", r.get("Contents"), None)

    # EncodingType=url: botocore decodes only when it chose the encoding itself
    c.put_object(Bucket=b, Key="enc/sp ace+plus%é", Body=b"e")
    r = c.list_objects_v2(Bucket=b, Prefix="enc/", EncodingType="url")
    k = [x["Key"] for x in r.get("Contents", [])]
    check("EncodingType=url returns encoded keys",
          len(k) == 1 and k[0] != "enc/sp ace+plus%é" and
          urllib.parse.unquote_plus(k[0]) == "enc/sp ace+plus%é", k)
    eq("EncodingType=url EncodingType echoed", r.get("EncodingType"), "url")
    r = c.list_objects(Bucket=b, Prefix="enc/", EncodingType="url")
    k = [x["Key"] for x in r.get("Contents", [])]
    check("ListObjects v1 EncodingType=url returns encoded keys",
          len(k) == 1 and urllib.parse.unquote_plus(k[0]) == "enc/sp ace+plus%é" and "%" in k[0], k)
    err_is("ListObjectsV2 missing bucket", client_error(c.list_objects_v2, Bucket=uniq("sg-missing")),
           "NoSuchBucket", 404)
    delete_all(c, b)
    c.delete_bucket(Bucket=b)


def t_big_listing(c):
    b = uniq("sg-many")
    c.create_bucket(Bucket=b)
    keys = ["p/%04d/k%d" % (i // 7, i) for i in range(2600)]
    t0 = time.time()
    if H.is_shardgate():
        H.direct_put_many(b, keys)
    else:
        with ThreadPoolExecutor(16) as ex:
            list(ex.map(lambda k: c.put_object(Bucket=b, Key=k, Body=k.encode()), keys))
    print("# created %d keys in %.1fs" % (len(keys), time.time() - t0), flush=True)
    want = sorted(keys, key=lambda k: k.encode())
    got, pages = [], 0
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=b):
        pages += 1
        got += [o["Key"] for o in page.get("Contents", [])]
    check("paginator v2 over 2600 keys: every key once, in order", got == want,
          "got %d keys (%d unique), want %d; first diff at %s"
          % (len(got), len(set(got)), len(want), _first_diff(got, want)))
    check("paginator v2 used >= 3 pages", pages >= 3, pages)
    got = []
    for page in c.get_paginator("list_objects").paginate(Bucket=b, PaginationConfig={"PageSize": 700}):
        got += [o["Key"] for o in page.get("Contents", [])]
    check("paginator v1 (PageSize 700) over 2600 keys: every key once, in order", got == want,
          "got %d keys, first diff at %s" % (len(got), _first_diff(got, want)))
    got = []
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=b, Prefix="p/", Delimiter="/",
                                                            PaginationConfig={"PageSize": 100}):
        got += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
    wantp = sorted(set("p/%04d/" % (i // 7) for i in range(2600)))
    check("paginator with Delimiter: %d common prefixes once each" % len(wantp), got == wantp,
          "got %d, first diff at %s" % (len(got), _first_diff(got, wantp)))
    delete_all(c, b)    # DeleteObjects in batches of 1000
    c.delete_bucket(Bucket=b)


def _first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return "index %d: %r vs %r" % (i, x, y)
    return "length %d vs %d" % (len(a), len(b))


def t_delete_objects(c, b):
    keys = ["mdel/%d" % i for i in range(10)]
    for k in keys:
        c.put_object(Bucket=b, Key=k, Body=b"x")
    r = c.delete_objects(Bucket=b, Delete={"Objects": [{"Key": k} for k in keys[:5]] +
                                           [{"Key": "mdel/missing"}], "Quiet": False})
    eq("DeleteObjects verbose: Deleted lists every key (also the missing one)",
       sorted(d["Key"] for d in r.get("Deleted", [])), sorted(keys[:5] + ["mdel/missing"]))
    eq("DeleteObjects verbose: no Errors", r.get("Errors"), None)
    r = c.delete_objects(Bucket=b, Delete={"Objects": [{"Key": k} for k in keys[5:]], "Quiet": True})
    eq("DeleteObjects quiet: no Deleted, no Errors", (r.get("Deleted"), r.get("Errors")), (None, None),
       moto_deviates=True)
    left = c.list_objects_v2(Bucket=b, Prefix="mdel/").get("Contents")
    eq("DeleteObjects removed all keys", left, None)


def _complete(c, b, key, uid, parts):
    return c.complete_multipart_upload(Bucket=b, Key=key, UploadId=uid,
                                       MultipartUpload={"Parts": parts})


def t_multipart(c, b):
    key = "mpu/obj"
    sizes = [5 * MB, 5 * MB, 1024]
    blobs = [os.urandom(s) for s in sizes]
    up = c.create_multipart_upload(Bucket=b, Key=key, ContentType="application/x-mpu",
                                   Metadata={"m": "1"})
    uid = up["UploadId"]
    check("CreateMultipartUpload gives an UploadId", uid, up)
    parts = []
    for i, blob in enumerate(blobs, 1):
        r = c.upload_part(Bucket=b, Key=key, UploadId=uid, PartNumber=i, Body=blob)
        eq("UploadPart %d ETag is the part MD5" % i, r["ETag"], '"%s"' % H.md5(blob))
        parts.append({"PartNumber": i, "ETag": r["ETag"]})
    lp = c.list_parts(Bucket=b, Key=key, UploadId=uid)
    eq("ListParts numbers/sizes/etags",
       [(p["PartNumber"], p["Size"], p["ETag"]) for p in lp.get("Parts", [])],
       [(i + 1, sizes[i], '"%s"' % H.md5(blobs[i])) for i in range(3)])
    lp2 = c.list_parts(Bucket=b, Key=key, UploadId=uid, MaxParts=2)
    eq("ListParts MaxParts=2 truncated, NextPartNumberMarker 2",
       (len(lp2.get("Parts", [])), lp2.get("IsTruncated"), lp2.get("NextPartNumberMarker")),
       (2, True, 2))
    lp3 = c.list_parts(Bucket=b, Key=key, UploadId=uid, PartNumberMarker=2)
    eq("ListParts PartNumberMarker=2", [p["PartNumber"] for p in lp3.get("Parts", [])], [3])
    ups = c.list_multipart_uploads(Bucket=b).get("Uploads", [])
    check("ListMultipartUploads shows the upload",
          any(u["UploadId"] == uid and u["Key"] == key for u in ups), ups)
    err_is("object invisible before Complete", client_error(c.head_object, Bucket=b, Key=key),
           "404", 404)
    r = _complete(c, b, key, uid, parts)
    want = hashlib.md5(b"".join(hashlib.md5(x).digest() for x in blobs)).hexdigest() + "-3"
    eq("CompleteMultipartUpload ETag md5-of-md5s-3", r["ETag"], '"%s"' % want)
    h = c.head_object(Bucket=b, Key=key)
    eq("multipart object HeadObject", (h["ContentLength"], h["ETag"], h["ContentType"], h["Metadata"]),
       (sum(sizes), '"%s"' % want, "application/x-mpu", {"m": "1"}))
    body = c.get_object(Bucket=b, Key=key)["Body"].read()
    eq("multipart object bytes", H.sha256(body), H.sha256(b"".join(blobs)))
    r = c.get_object(Bucket=b, Key=key, Range="bytes=%d-%d" % (5 * MB - 10, 5 * MB + 9))
    eq("range across a part boundary", H.sha256(r["Body"].read()),
       H.sha256(b"".join(blobs)[5 * MB - 10:5 * MB + 10]))
    ups = c.list_multipart_uploads(Bucket=b).get("Uploads", [])
    check("completed upload no longer listed", not any(u["UploadId"] == uid for u in ups), ups)

    # completion errors
    k2 = "mpu/err"
    u2 = c.create_multipart_upload(Bucket=b, Key=k2)["UploadId"]
    e1 = c.upload_part(Bucket=b, Key=k2, UploadId=u2, PartNumber=1, Body=blobs[0])["ETag"]
    # both parts >= 5 MiB so that the order is the only fault
    e2 = c.upload_part(Bucket=b, Key=k2, UploadId=u2, PartNumber=2, Body=blobs[1])["ETag"]
    err_is("Complete parts out of order", client_error(
        _complete, c, b, k2, u2, [{"PartNumber": 2, "ETag": e2}, {"PartNumber": 1, "ETag": e1}]),
        "InvalidPartOrder", 400, moto_deviates=True)
    err_is("Complete with wrong part ETag", client_error(
        _complete, c, b, k2, u2, [{"PartNumber": 1, "ETag": e1},
                                  {"PartNumber": 2, "ETag": '"%s"' % ("0" * 32)}]),
        "InvalidPart", 400, moto_deviates=True)
    err_is("Complete with a part never uploaded", client_error(
        _complete, c, b, k2, u2, [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 3, "ETag": e2}]),
        "InvalidPart", 400, moto_deviates=True)
    err_is("Complete bogus UploadId", client_error(
        _complete, c, b, k2, "bogus-upload-id", [{"PartNumber": 1, "ETag": e1}]), "NoSuchUpload", 404,
        moto_deviates=True)
    err_is("UploadPart bogus UploadId", client_error(
        c.upload_part, Bucket=b, Key=k2, UploadId="bogus-upload-id", PartNumber=1, Body=b"x"),
        "NoSuchUpload", 404, moto_deviates=True)
    err_is("UploadPart PartNumber 10001", client_error(
        c.upload_part, Bucket=b, Key=k2, UploadId=u2, PartNumber=10001, Body=b"x"),
        "InvalidArgument", 400, moto_deviates=True)
    c.delete_object(Bucket=b, Key=k2)   # moto completes the bad lists above
    u2 = c.create_multipart_upload(Bucket=b, Key=k2)["UploadId"]
    c.upload_part(Bucket=b, Key=k2, UploadId=u2, PartNumber=1, Body=b"abort me")
    r = c.abort_multipart_upload(Bucket=b, Key=k2, UploadId=u2)
    eq("AbortMultipartUpload -> 204", r["ResponseMetadata"]["HTTPStatusCode"], 204)
    err_is("ListParts after abort", client_error(c.list_parts, Bucket=b, Key=k2, UploadId=u2),
           "NoSuchUpload", 404)
    err_is("no object after abort", client_error(c.head_object, Bucket=b, Key=k2), "404", 404)

    k3 = "mpu/small"
    u3 = c.create_multipart_upload(Bucket=b, Key=k3)["UploadId"]
    s1 = c.upload_part(Bucket=b, Key=k3, UploadId=u3, PartNumber=1, Body=b"a" * 1024)["ETag"]
    s2 = c.upload_part(Bucket=b, Key=k3, UploadId=u3, PartNumber=2, Body=b"b" * 1024)["ETag"]
    err_is("Complete with a small non-last part", client_error(
        _complete, c, b, k3, u3, [{"PartNumber": 1, "ETag": s1}, {"PartNumber": 2, "ETag": s2}]),
        "EntityTooSmall", 400)
    c.abort_multipart_upload(Bucket=b, Key=k3, UploadId=u3)

    # a single small part is fine (it is the last one)
    k4 = "mpu/one"
    u4 = c.create_multipart_upload(Bucket=b, Key=k4)["UploadId"]
    p1 = c.upload_part(Bucket=b, Key=k4, UploadId=u4, PartNumber=1, Body=b"only")["ETag"]
    r = _complete(c, b, k4, u4, [{"PartNumber": 1, "ETag": p1}])
    eq("one-part upload ETag -1", r["ETag"],
       '"%s-1"' % hashlib.md5(hashlib.md5(b"only").digest()).hexdigest())

    # UploadPartCopy with CopySourceRange
    src = os.urandom(6 * MB)
    c.put_object(Bucket=b, Key="mpu/copysrc", Body=src)
    k5 = "mpu/copied"
    u5 = c.create_multipart_upload(Bucket=b, Key=k5)["UploadId"]
    cps = []
    for n, (lo, hi) in enumerate(((0, 5 * MB - 1), (5 * MB, 6 * MB - 1)), 1):
        r = c.upload_part_copy(Bucket=b, Key=k5, UploadId=u5, PartNumber=n,
                               CopySource={"Bucket": b, "Key": "mpu/copysrc"},
                               CopySourceRange="bytes=%d-%d" % (lo, hi))
        eq("UploadPartCopy part %d ETag is MD5 of the range" % n, r["CopyPartResult"]["ETag"],
           '"%s"' % H.md5(src[lo:hi + 1]))
        cps.append({"PartNumber": n, "ETag": r["CopyPartResult"]["ETag"]})
    err_is("UploadPartCopy range past the end", client_error(
        c.upload_part_copy, Bucket=b, Key=k5, UploadId=u5, PartNumber=3,
        CopySource={"Bucket": b, "Key": "mpu/copysrc"}, CopySourceRange="bytes=0-%d" % (7 * MB)),
        "InvalidRange", 416, moto_deviates=True)
    _complete(c, b, k5, u5, cps)
    eq("UploadPartCopy result bytes",
       H.sha256(c.get_object(Bucket=b, Key=k5)["Body"].read()), H.sha256(src))


def t_managed_transfer(c, b):
    from boto3.s3.transfer import TransferConfig
    d = H.tmpdir("xfer")
    up, down = os.path.join(d, "up.bin"), os.path.join(d, "down.bin")
    want = H.write_random_file(up, 40 * MB)
    cfg = TransferConfig(multipart_threshold=8 * MB, multipart_chunksize=8 * MB, max_concurrency=4)
    c.upload_file(up, b, "xfer/40m", Config=cfg)
    h = c.head_object(Bucket=b, Key="xfer/40m")
    eq("upload_file 40 MiB: multipart ETag (-5) and size", (h["ETag"].endswith('-5"'),
                                                             h["ContentLength"]), (True, 40 * MB))
    c.download_file(b, "xfer/40m", down, Config=cfg)
    eq("download_file 40 MiB sha256", H.sha256_file(down), want)
    os.unlink(up)
    os.unlink(down)


# ---------------------------------------------------------------- vhost

def t_vhost(b):
    host = "%s.localhost" % b
    port = H.S.port
    try:
        socket.getaddrinfo(host, port)
        resolves = True
    except socket.gaierror:
        resolves = False
    data = b"virtual hosted " * 10
    if resolves:
        v = new_client(style="virtual", endpoint="http://localhost:%d" % port)
        v.put_object(Bucket=b, Key="vh/one", Body=data)
        eq("vhost boto3 GetObject", v.get_object(Bucket=b, Key="vh/one")["Body"].read(), data)
        eq("vhost boto3 list", [o["Key"] for o in v.list_objects_v2(Bucket=b, Prefix="vh/")["Contents"]],
           ["vh/one"])
        v.delete_object(Bucket=b, Key="vh/one")
        return
    print("# %s does not resolve: virtual-hosted requests signed by hand" % host, flush=True)
    hh = "%s:%d" % (host, port)
    r = H.raw("PUT", "/vh/one", body=data, host_header=hh)
    eq("vhost PUT /vh/one status", r.status, 200)
    check("vhost response has x-amz-request-id", r.header("x-amz-request-id"), r.headers,
          moto_deviates=True)
    r = H.raw("GET", "/vh/one", host_header=hh)
    eq("vhost GET bytes", (r.status, r.body), (200, data))
    r = H.raw("HEAD", "/vh/one", host_header=hh)
    eq("vhost HEAD", (r.status, r.header("content-length"), r.header("etag")),
       (200, str(len(data)), '"%s"' % H.md5(data)))
    r = H.raw("GET", "/", query="list-type=2&prefix=vh%2F", host_header=hh)
    check("vhost ListObjectsV2 lists the key", r.status == 200 and b"<Key>vh/one</Key>" in r.body,
          r)
    r = H.raw("GET", "/%s/vh/one" % b, host_header="127.0.0.1:%d" % port)
    eq("path-style GET of the same object next to vhost", (r.status, r.body), (200, data))
    r = H.raw("DELETE", "/vh/one", host_header=hh)
    eq("vhost DELETE", r.status, 204)
    r = H.raw("GET", "/vh/one", host_header=hh)
    eq("vhost GET after DELETE -> 404", r.status, 404)


# ---------------------------------------------------------------- main

def main(name):
    H.start(name, vhost=True)
    newbotocore = install_trailer_switch()
    print("# boto3 %s botocore %s on python %s; aws-chunked trailer forced: %s"
          % (boto3.__version__, botocore.__version__, sys.version.split()[0], newbotocore),
          flush=True)
    c = new_client()
    FORCE_TRAILER[0] = newbotocore
    t_buckets(c)
    b = uniq("sg-main")
    c.create_bucket(Bucket=b)
    if newbotocore:
        t_put_headers(c, b, "trailer")
        FORCE_TRAILER[0] = False
        t_put_headers(c, b, "plain")
        t_checksums(c, b)
        FORCE_TRAILER[0] = True
    else:
        t_put_headers(c, b, "plain")
    t_content_md5(c, b)
    t_ranges(c, b)
    t_conditional(c, b)
    t_overrides(c, b)
    t_delete(c, b)
    t_copy(c, b)
    t_odd_keys(c, b)
    t_listing(c)
    t_big_listing(c)
    t_delete_objects(c, b)
    t_multipart(c, b)
    t_managed_transfer(c, b)
    t_vhost(b)
    check("every boto3 response carried x-amz-request-id (%d responses)" % RIDS.n,
          RIDS.n > 0 and not RIDS.missing, "missing on %d: %s" % (len(RIDS.missing),
                                                                   RIDS.missing[:10]),
          moto_deviates=True)
    delete_all(c, b)
    c.delete_bucket(Bucket=b)


if __name__ == "__main__":
    H.run(lambda: main(os.environ.get("SG_SUITE_NAME", "boto3_suite")))
