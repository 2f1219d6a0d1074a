#!/usr/bin/env python3
"""tests/unit/gen_auth_vectors.py - signs canonicalisation edge cases with
botocore (an independent SigV4 implementation that works against AWS S3) and
prints them as the C table baked into tests/unit/test_auth_sigv4.c.

    python3 tests/unit/gen_auth_vectors.py              # print the table
    python3 tests/unit/gen_auth_vectors.py --update     # rewrite it in place

With --sigv2 it makes the Signature Version 2 table of
tests/unit/test_auth_sigv2.c instead: real boto3 calls (signature_version
's3', the header form) and boto3's default presigned URLs (the query form),
path-style and virtual-hosted, captured before they are sent.

    python3 tests/unit/gen_auth_vectors.py --sigv2 [--update]

Every vector is signed at 2013-05-24T00:00:00Z in us-east-1 with the AWS
example key pair; the test sets its clock to that instant.
"""
import datetime
import os
import sys
from urllib.parse import quote, urlsplit

import botocore
import botocore.auth
from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

AK = "AKIAIOSFODNN7EXAMPLE"
SK = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
REGION = "us-east-1"
WHEN = datetime.datetime(2013, 5, 24, 0, 0, 0)
VHOST = "https://examplebucket.s3.amazonaws.com"
PATHSTYLE = "https://s3.amazonaws.com"
BEGIN = "/* BEGIN GENERATED VECTORS (tests/unit/gen_auth_vectors.py) */"
END = "/* END GENERATED VECTORS */"

botocore.auth.get_current_datetime = lambda: WHEN


def key_path(key):
    """How botocore's S3 serializer puts a key on the wire."""
    return "/" + quote(key, safe="/~")


def q(v):
    return quote(v, safe="-_.~")


def sign(name, method, url, headers=None, body=b"", presign=0):
    req = AWSRequest(method=method, url=url, headers=dict(headers or {}), data=body)
    creds = Credentials(AK, SK)
    if presign:
        S3SigV4QueryAuth(creds, "s3", REGION, expires=presign).add_auth(req)
    else:
        S3SigV4Auth(creds, "s3", REGION).add_auth(req)
    parts = urlsplit(req.url)
    hdrs = [("host", parts.netloc)]
    for k, v in req.headers.items():
        hdrs.append((k.lower(), v if isinstance(v, str) else v.decode()))
    return (name, method, parts.path, parts.query, hdrs)


def vectors():
    v = []
    v.append(sign("key_with_spaces", "GET", VHOST + key_path("my key with  spaces.txt")))
    v.append(sign("key_with_plus", "GET", VHOST + key_path("a+b+c.txt")))
    v.append(sign("key_with_percent", "GET", VHOST + key_path("100%/done%20.txt")))
    v.append(sign("key_unicode", "GET", VHOST + key_path("dir/ünïcödé ☃.txt")))
    v.append(sign("key_double_slash", "GET", VHOST + key_path("dir//file")))
    v.append(sign("key_dot_segments", "GET", VHOST + key_path("a/./b/../c")))
    v.append(sign("key_tilde", "GET", VHOST + key_path("~user/file~1")))
    v.append(sign("key_reserved_chars", "GET", VHOST + key_path("a=b&c?d#e;f:g@h,i$j!k*l'm(n)")))
    v.append(sign("path_style_key", "GET", PATHSTYLE + "/examplebucket" + key_path("x y/z.bin")))
    v.append(sign("query_uploads_subresource", "POST", VHOST + key_path("big.bin") + "?uploads"))
    v.append(sign("query_list_type_2_prefix_slash", "GET",
                  VHOST + "/?list-type=2&prefix=" + q("a/b") + "&delimiter=" + q("/")))
    v.append(sign("query_empty_values", "GET", VHOST + "/?prefix=&delimiter=&max-keys=10"))
    v.append(sign("query_repeated_names", "GET", VHOST + "/?b=2&a=3&a=1&a=2"))
    v.append(sign("query_value_plus_space_unicode", "GET",
                  VHOST + "/?prefix=" + q("a+b c/ü") + "&marker=" + q("x=y&z")))
    v.append(sign("query_part_number_upload_id", "PUT",
                  VHOST + key_path("big.bin") + "?partNumber=2&uploadId=" + q("VXBsb2FkIElE+/="),
                  body=b"part two"))
    v.append(sign("put_with_meta_spaces", "PUT", VHOST + key_path("meta.txt"),
                  headers={"x-amz-meta-note": "  two   spaces\there  ",
                           "Content-Type": "text/plain", "x-amz-storage-class": "STANDARD"},
                  body=b"hello world"))
    v.append(sign("put_unsigned_payload", "PUT", VHOST + key_path("u.txt"),
                  headers={"X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"}, body=b"abc"))
    v.append(sign("presigned_get_key_with_spaces", "GET",
                  VHOST + key_path("my photos/cat 1.jpg")
                  + "?response-content-disposition=" + q('attachment; filename="c 1.jpg"'),
                  presign=3600))
    v.append(sign("presigned_put_content_type", "PUT", VHOST + key_path("up load+.bin"),
                  headers={"Content-Type": "application/octet-stream"}, presign=900))
    v.append(sign("presigned_list_v2", "GET", VHOST + "/?list-type=2&prefix=" + q("a/b"),
                  presign=604800))
    return v


# ---------------------------------------------------------------- SigV2

SIGV2_FILE = "test_auth_sigv2.c"
SIGV2_DOMAIN = "s3.amazonaws.com"   # the test's vhost_domain
T0 = 1369353600                      # 2013-05-24T00:00:00Z
# what the verifier reads; the rest (User-Agent, invocation ids, Expect,
# Content-Length) is left out so the table does not change between runs
SIGV2_KEEP = ("host", "date", "content-md5", "content-type", "authorization")


class _Captured(Exception):
    pass


def _sigv2_freeze_clock():
    """HmacV1Auth dates with email.utils.formatdate and HmacV1QueryAuth
    expires with time.time(), both looked up in botocore.auth."""
    class _Clock:
        @staticmethod
        def time():
            return float(T0)
    botocore.auth.formatdate = lambda usegmt=False: "Fri, 24 May 2013 00:00:00 GMT"
    botocore.auth.time = _Clock


def _sigv2_client(signature_version, style, token=None):
    import boto3
    from botocore.config import Config
    cfg = Config(signature_version=signature_version, s3={"addressing_style": style},
                 retries={"max_attempts": 1})
    c = boto3.session.Session().client(
        "s3", endpoint_url="http://" + SIGV2_DOMAIN, region_name=REGION,
        aws_access_key_id=AK, aws_secret_access_key=SK, aws_session_token=token, config=cfg)

    def stop(request, **kw):
        c._sg_captured = (request.method, request.url, list(request.headers.items()))
        raise _Captured()
    c.meta.events.register("before-send.s3", stop)
    return c


def _sigv2_vec(name, method, url, headers):
    parts = urlsplit(url)
    hdrs = [("host", parts.netloc)]
    for k, v in headers:
        v = v if isinstance(v, str) else v.decode()
        k = k.lower()
        if k in SIGV2_KEEP or k.startswith("x-amz-"):
            hdrs.append((k, v))
    return (name, method, parts.path, parts.query, hdrs)


def _sigv2_call(name, client, op, **params):
    try:
        getattr(client, op)(**params)
    except _Captured:
        return _sigv2_vec(name, *client._sg_captured)
    raise RuntimeError("%s: the request was not captured" % name)


def _sigv2_presign(name, client, op, expires=3600, method="GET", **params):
    url = client.generate_presigned_url(op, Params=params, ExpiresIn=expires)
    return _sigv2_vec(name, method, url, [])


def _sigv2_handmade(name, method, host, path, query, headers, string_to_sign):
    """A request signed here from S3's documented rules (HMAC-SHA1, base64),
    for forms boto3 does not send: s3cmd's x-amz-date, other date forms."""
    import base64
    import hashlib
    import hmac
    sig = base64.b64encode(hmac.new(SK.encode(), string_to_sign.encode(),
                                    hashlib.sha1).digest()).decode()
    hdrs = [("host", host)] + list(headers) + [("authorization", "AWS %s:%s" % (AK, sig))]
    return (name, method, path, query, hdrs)


def sigv2_vectors():
    _sigv2_freeze_clock()
    path = _sigv2_client("s3", "path")
    vhost = _sigv2_client("s3", "virtual")
    v = [
        _sigv2_call("get_path_style_odd_key", path, "get_object", Bucket="examplebucket",
                    Key="my photos/\u00fcn\u00efc+\u2603 (1)~!*'.jpg"),
        _sigv2_call("get_virtual_hosted", vhost, "get_object", Bucket="examplebucket",
                    Key="dir/a b.txt"),
        _sigv2_call("get_response_overrides_version", path, "get_object",
                    Bucket="examplebucket", Key="k", VersionId="null",
                    ResponseContentDisposition='attachment; filename="x y.bin"',
                    ResponseContentType="application/x-y", ResponseCacheControl="no-cache"),
        _sigv2_call("put_meta_type_storage_class", path, "put_object", Bucket="examplebucket",
                    Key="up/load.bin", Body=b"hello world", ContentType="text/plain",
                    Metadata={"Note": "  two  spaces ", "b": "2"}, StorageClass="STANDARD"),
        _sigv2_call("put_virtual_hosted_content_md5", vhost, "put_object",
                    Bucket="examplebucket", Key="m.bin", Body=b"abc",
                    ContentMD5="kAFQmDzST7DWlj99KOF/cg=="),
        _sigv2_call("copy_object_source_header", path, "copy_object", Bucket="examplebucket",
                    Key="dst", CopySource="srcbucket/src key"),
        _sigv2_call("create_multipart_uploads", path, "create_multipart_upload",
                    Bucket="examplebucket", Key="big.bin"),
        _sigv2_call("upload_part_number_upload_id", path, "upload_part",
                    Bucket="examplebucket", Key="big.bin", UploadId="2~abc-DEF_9.x",
                    PartNumber=3, Body=b"part"),
        _sigv2_call("complete_multipart", vhost, "complete_multipart_upload",
                    Bucket="examplebucket", Key="big.bin", UploadId="2~abc",
                    MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": '"e"'}]}),
        _sigv2_call("list_objects_unsigned_params", path, "list_objects",
                    Bucket="examplebucket", Prefix="a/b c", Delimiter="/", MaxKeys=10),
        _sigv2_call("list_objects_v2_virtual_hosted_root", vhost, "list_objects_v2",
                    Bucket="examplebucket", Prefix="p"),
        _sigv2_call("delete_objects", path, "delete_objects", Bucket="examplebucket",
                    Delete={"Objects": [{"Key": "x"}, {"Key": "y z"}]}),
        _sigv2_call("get_bucket_location", path, "get_bucket_location", Bucket="examplebucket"),
        _sigv2_call("get_object_tagging", vhost, "get_object_tagging", Bucket="examplebucket",
                    Key="t"),
        _sigv2_call("list_buckets", path, "list_buckets"),
        _sigv2_call("head_object", path, "head_object", Bucket="examplebucket", Key="h"),
    ]
    dflt_path = _sigv2_client(None, "path")
    dflt_vhost = _sigv2_client(None, "virtual")
    token = _sigv2_client(None, "virtual", token="FQoGZXIvYXdzE/+=token")
    v += [
        _sigv2_presign("presigned_get_default", dflt_path, "get_object",
                       Bucket="examplebucket", Key="shards/shard-000001.tar"),
        _sigv2_presign("presigned_get_odd_key", dflt_path, "get_object",
                       Bucket="examplebucket", Key="a b/c+d \u00e9.txt"),
        _sigv2_presign("presigned_get_virtual_hosted", dflt_vhost, "get_object",
                       Bucket="examplebucket", Key="k"),
        _sigv2_presign("presigned_get_response_overrides", dflt_path, "get_object",
                       Bucket="examplebucket", Key="k",
                       ResponseContentDisposition='attachment; filename="r&d.txt"',
                       ResponseContentType="text/plain; charset=utf-8"),
        _sigv2_presign("presigned_put_content_type", dflt_path, "put_object", method="PUT",
                       Bucket="examplebucket", Key="up.bin", ContentType="text/plain"),
        _sigv2_presign("presigned_get_7_days", dflt_path, "get_object", expires=604800,
                       Bucket="examplebucket", Key="k"),
        _sigv2_presign("presigned_get_session_token", token, "get_object",
                       Bucket="examplebucket", Key="k"),
        _sigv2_presign("presigned_list_objects", dflt_path, "list_objects",
                       Bucket="examplebucket", Prefix="p/"),
    ]
    xd = "Fri, 24 May 2013 00:00:00 +0000"
    v += [
        # s3cmd: x-amz-date (numeric zone), no Date, bucket requests as "/<bucket>/"
        _sigv2_handmade("s3cmd_style_x_amz_date", "GET", SIGV2_DOMAIN, "/examplebucket/k", "",
                        [("x-amz-date", xd)],
                        "GET\n\n\n\nx-amz-date:%s\n/examplebucket/k" % xd),
        _sigv2_handmade("s3cmd_style_bucket_uploads", "GET", SIGV2_DOMAIN, "/examplebucket/",
                        "uploads", [("x-amz-date", xd)],
                        "GET\n\n\n\nx-amz-date:%s\n/examplebucket/?uploads" % xd),
        # "/<bucket>" signed as sent (no slash added)
        _sigv2_handmade("bucket_path_signed_as_sent", "GET", SIGV2_DOMAIN, "/examplebucket", "",
                        [("date", "Fri, 24 May 2013 00:00:00 GMT")],
                        "GET\n\n\nFri, 24 May 2013 00:00:00 GMT\n/examplebucket"),
        # the Date header in RFC 850 and asctime form, signed verbatim
        _sigv2_handmade("date_rfc850", "GET", SIGV2_DOMAIN, "/examplebucket/k", "",
                        [("date", "Friday, 24-May-13 00:00:00 GMT")],
                        "GET\n\n\nFriday, 24-May-13 00:00:00 GMT\n/examplebucket/k"),
        _sigv2_handmade("date_asctime", "GET", SIGV2_DOMAIN, "/examplebucket/k", "",
                        [("date", "Fri May 24 00:00:00 2013")],
                        "GET\n\n\nFri May 24 00:00:00 2013\n/examplebucket/k"),
        # x-amz-* values of one name joined with ',', names folded to lower case
        _sigv2_handmade("repeated_amz_header", "PUT", SIGV2_DOMAIN, "/examplebucket/k", "",
                        [("date", "Fri, 24 May 2013 00:00:00 GMT"),
                         ("x-amz-meta-r", "a"), ("x-amz-meta-r", " b "),
                         ("x-amz-acl", "private")],
                        "PUT\n\n\nFri, 24 May 2013 00:00:00 GMT\nx-amz-acl:private\n"
                        "x-amz-meta-r:a,b\n/examplebucket/k"),
    ]
    return v


def c_str(s):
    out = '"'
    for b in s.encode():
        c = chr(b)
        if c in '"\\':
            out += "\\" + c
        elif 32 <= b < 127 and c != "?":     # '?' avoids trigraph warnings
            out += c
        else:
            out += '\\%03o' % b
    return out + '"'


def table(sigv2=False):
    if sigv2:
        head = "/* boto3 with botocore %s, signed at 20130524T000000Z, vhost_domain %s */" % (
            botocore.__version__, SIGV2_DOMAIN)
    else:
        head = "/* botocore %s, %s, signed at 20130524T000000Z */" % (botocore.__version__, REGION)
    lines = [BEGIN, head, "static const struct gen_vec gen_vecs[] = {"]
    for name, method, path, query, hdrs in (sigv2_vectors() if sigv2 else vectors()):
        lines.append("    { %s, %s, %s, %s, %d, {" % (c_str(name), c_str(method), c_str(path),
                                                      c_str(query), len(hdrs)))
        for k, val in hdrs:
            lines.append("        { %s, %s }," % (c_str(k), c_str(val)))
        lines.append("    } },")
    lines.append("};")
    lines.append(END)
    return "\n".join(lines)


def main():
    sigv2 = "--sigv2" in sys.argv
    t = table(sigv2)
    if "--update" not in sys.argv:
        print(t)
        return
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        SIGV2_FILE if sigv2 else "test_auth_sigv4.c")
    src = open(path, encoding="utf-8").read()
    a, b = src.index(BEGIN), src.index(END) + len(END)
    open(path, "w", encoding="utf-8").write(src[:a] + t + src[b:])


if __name__ == "__main__":
    main()
