#!/usr/bin/env python3
"""tests/unit/gen_auth_vectors.py - signs canonicalisation edge cases with
botocore (an independent SigV4 implementation that works against AWS S3) and
prints them as the C table baked into tests/unit/test_auth_sigv4.c.

    python3 tests/unit/gen_auth_vectors.py              # print the table
    python3 tests/unit/gen_auth_vectors.py --update     # rewrite it in place

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


def table():
    lines = [BEGIN,
             "/* botocore %s, %s, signed at 20130524T000000Z */" % (botocore.__version__, REGION),
             "static const struct gen_vec gen_vecs[] = {"]
    for name, method, path, query, hdrs in vectors():
        lines.append("    { %s, %s, %s, %s, %d, {" % (c_str(name), c_str(method), c_str(path),
                                                      c_str(query), len(hdrs)))
        for k, val in hdrs:
            lines.append("        { %s, %s }," % (c_str(k), c_str(val)))
        lines.append("    } },")
    lines.append("};")
    lines.append(END)
    return "\n".join(lines)


def main():
    t = table()
    if "--update" not in sys.argv:
        print(t)
        return
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_auth_sigv4.c")
    src = open(path, encoding="utf-8").read()
    a, b = src.index(BEGIN), src.index(END) + len(END)
    open(path, "w", encoding="utf-8").write(src[:a] + t + src[b:])


if __name__ == "__main__":
    main()
