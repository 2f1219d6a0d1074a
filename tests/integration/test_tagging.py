"""tests/integration/test_tagging.py - object and bucket tagging (issue 12) with
real clients, in both modes: the directory store (`--data`) and the cache in
front of moto (`--cold`, `--cache-dir`). The same checks run in each:
  * boto3 1.43: put/get/delete_object_tagging, put_object(Tagging=...),
    copy_object with TaggingDirective COPY and REPLACE (and a metadata
    REPLACE that keeps the tags), create_multipart_upload(Tagging=...),
    TagCount on head_object and get_object, bucket tagging;
  * Debian's boto3 1.26 (/usr/bin/python3) and aws-cli v1 (`aws` on PATH)
    reading and writing tags; aws-cli v2 (/usr/bin/aws) `s3 cp` and `s3 mv`
    of a 9 MiB object inside S3 (it asks GetObjectTagging first, then copies
    the tags with CreateMultipartUpload), bytes and tags checked;
  * errors with their codes and statuses: 11 tags, duplicate keys, a key of
    129 characters, a value of 257, aws: keys, bad XML, a missing key, a bad
    x-amz-tagging header or directive; the tags are unchanged after each;
  * the access log names the sub-resource.
Directory store only: a restart keeps object and bucket tags, and the tags sit
in the object's metadata xattr. Cache only: a tag change through the gateway
is seen by the next read of a cached object (the copy is dropped), and a tag
change made in the cold tier itself by the next revalidating read.
Skips (77) when boto3, moto or aws-cli v2 is missing."""

import atexit
import base64
import hashlib
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import cache_common as C  # noqa: E402

check, eq = H.check, H.eq
AWS2 = "/usr/bin/aws"
BIG = 9 * H.MB
STATE = {}


def tagset(d):
    return [{"Key": k, "Value": v} for k, v in d]


def tags(c, b, k):
    return [(t["Key"], t["Value"]) for t in c.get_object_tagging(Bucket=b, Key=k)["TagSet"]]


def err(fn, *a, **kw):
    code, status, _ = H.client_error(fn, *a, **kw)
    return (code, status)


def raw_put_tagging(path, xml, query="tagging"):
    body = xml.encode()
    md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
    return H.raw("PUT", path, query=query, body=body,
                 headers={"Content-MD5": md5, "Content-Type": "application/xml"})


def wait_cached(n):
    """Cache mode: until B's cache holds n objects (a GET's fill published)."""
    return C.wait_until(lambda: C.bm("shardgate_cache_objects") >= n, timeout=30)


# ---------------------------------------------------------------- the checks

def object_tags(m, c, b):
    c.put_object(Bucket=b, Key="k", Body=b"tagged body", Tagging="a=1&b=x%20y")
    eq("[%s] put_object(Tagging=...) then get_object_tagging" % m, tags(c, b, "k"),
       [("a", "1"), ("b", "x y")])
    eq("[%s] head_object TagCount" % m, c.head_object(Bucket=b, Key="k").get("TagCount"), 2)
    g = c.get_object(Bucket=b, Key="k")
    eq("[%s] get_object TagCount and body" % m, (g.get("TagCount"), g["Body"].read()),
       (2, b"tagged body"))
    if m == "cache":
        check("[cache] the GET's copy is in the cache", wait_cached(1))
    r = c.put_object_tagging(Bucket=b, Key="k", Tagging={"TagSet": tagset(
        [("p:q", "v/w x"), ("é", "ü"), ("e", "")])})
    eq("[%s] put_object_tagging answers 200" % m, r["ResponseMetadata"]["HTTPStatusCode"], 200)
    eq("[%s] tags replaced, in order" % m, tags(c, b, "k"), [("p:q", "v/w x"), ("é", "ü"),
                                                            ("e", "")])
    g = c.get_object(Bucket=b, Key="k")
    eq("[%s] the next GET has the new TagCount (a cached copy is dropped)" % m,
       (g.get("TagCount"), g["Body"].read()), (3, b"tagged body"))
    xml = ("<Tagging xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><TagSet><Tag><Key>r</Key>"
           "<Value>1</Value></Tag></TagSet></Tagging>")
    r = raw_put_tagging("/%s/k" % b, xml)
    eq("[%s] raw PutObjectTagging: 200 and no body" % m, (r.status, r.body), (200, b""))
    r = c.delete_object_tagging(Bucket=b, Key="k")
    eq("[%s] delete_object_tagging answers 204" % m, r["ResponseMetadata"]["HTTPStatusCode"],
       204)
    eq("[%s] no tags after delete" % m, tags(c, b, "k"), [])
    eq("[%s] no TagCount without tags" % m, c.head_object(Bucket=b, Key="k").get("TagCount"),
       None)
    r = H.raw("GET", "/%s/k" % b, query="tagging")
    check("[%s] GetObjectTagging of no tags: an empty TagSet document" % m,
          r.status == 200 and b"<TagSet" in r.body and b"<Tag>" not in r.body, r)


def copies_and_uploads(m, c, b):
    c.put_object(Bucket=b, Key="src", Body=b"source", ContentType="text/plain",
                  Tagging="s=1&t=2")
    c.copy_object(Bucket=b, Key="c-copy", CopySource="%s/src" % b)
    eq("[%s] copy_object (COPY by default) takes the source's tags" % m, tags(c, b, "c-copy"),
       [("s", "1"), ("t", "2")])
    c.copy_object(Bucket=b, Key="c-copy2", CopySource="%s/src" % b, TaggingDirective="COPY",
                  Tagging="ignored=1")
    eq("[%s] TaggingDirective COPY ignores Tagging" % m, tags(c, b, "c-copy2"),
       [("s", "1"), ("t", "2")])
    c.copy_object(Bucket=b, Key="c-repl", CopySource="%s/src" % b, TaggingDirective="REPLACE",
                  Tagging="z=9")
    eq("[%s] TaggingDirective REPLACE" % m, tags(c, b, "c-repl"), [("z", "9")])
    c.copy_object(Bucket=b, Key="c-none", CopySource="%s/src" % b, TaggingDirective="REPLACE")
    eq("[%s] TaggingDirective REPLACE without Tagging: no tags" % m, tags(c, b, "c-none"), [])
    c.copy_object(Bucket=b, Key="c-meta", CopySource="%s/src" % b,
                  MetadataDirective="REPLACE", ContentType="image/png")
    h = c.head_object(Bucket=b, Key="c-meta")
    eq("[%s] MetadataDirective REPLACE keeps the tags (COPY)" % m,
       (h["ContentType"], h.get("TagCount"), tags(c, b, "c-meta")),
       ("image/png", 2, [("s", "1"), ("t", "2")]))
    eq("[%s] an unknown tagging directive" % m,
       err(c.copy_object, Bucket=b, Key="c-bad", CopySource="%s/src" % b,
           TaggingDirective="MERGE"), ("InvalidArgument", 400))
    up = c.create_multipart_upload(Bucket=b, Key="mp", Tagging="m=1&n=%C3%A9")
    eq("[%s] no object before Complete" % m, err(c.get_object_tagging, Bucket=b, Key="mp"),
       ("NoSuchKey", 404))
    p1 = c.upload_part(Bucket=b, Key="mp", UploadId=up["UploadId"], PartNumber=1,
                       Body=b"p" * (5 * H.MB))
    p2 = c.upload_part(Bucket=b, Key="mp", UploadId=up["UploadId"], PartNumber=2, Body=b"q")
    c.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up["UploadId"], MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": p1["ETag"]}, {"PartNumber": 2, "ETag": p2["ETag"]}]})
    eq("[%s] create_multipart_upload(Tagging=...): tags applied on Complete" % m,
       (tags(c, b, "mp"), c.head_object(Bucket=b, Key="mp").get("TagCount")),
       ([("m", "1"), ("n", "é")], 2))


def errors(m, c, b):
    c.put_object(Bucket=b, Key="e", Body=b"e", Tagging="keep=1")
    many = tagset([("k%d" % i, "v") for i in range(11)])
    cases = [
        ("11 tags", many, ("BadRequest", 400)),
        ("duplicate keys", tagset([("a", "1"), ("a", "2")]), ("InvalidTag", 400)),
        ("a key of 129 characters", tagset([("x" * 129, "v")]), ("InvalidTag", 400)),
        ("a value of 257 characters", tagset([("k", "v" * 257)]), ("InvalidTag", 400)),
        ("a key with a comma", tagset([("a,b", "v")]), ("InvalidTag", 400)),
        ("an aws: key", tagset([("aws:x", "v")]), ("InvalidTag", 400)),
    ]
    for what, ts, want in cases:
        eq("[%s] PutObjectTagging with %s" % (m, what),
           err(c.put_object_tagging, Bucket=b, Key="e", Tagging={"TagSet": ts}), want)
    eq("[%s] 10 tags, a 128-character key and a 256-character value are fine" % m,
       err(c.put_object_tagging, Bucket=b, Key="e", Tagging={"TagSet": tagset(
           [("x" * 128, "v" * 256)] + [("k%d" % i, "v") for i in range(9)])}), (None, None))
    eq("[%s] 128 Cyrillic characters (256 bytes) make a valid key" % m,
       err(c.put_object_tagging, Bucket=b, Key="e",
           Tagging={"TagSet": tagset([("я" * 128, "ok")])}), (None, None))
    c.put_object_tagging(Bucket=b, Key="e", Tagging={"TagSet": tagset([("keep", "1")])})
    r = raw_put_tagging("/%s/e" % b, "<Tagging><TagSet><Tag><Key></Key><Value>v</Value></Tag>"
                                     "</TagSet></Tagging>")
    eq("[%s] PutObjectTagging with an empty key" % m, (r.status, (r.error() or {}).get("Code")),
       (400, "InvalidTag"))
    for what, xml in (("cut short", "<Tagging><TagSet><Tag><Key>a</Key>"),
                      ("not XML", "tags please"),
                      ("a Tag without Value", "<Tagging><TagSet><Tag><Key>a</Key></Tag>"
                                              "</TagSet></Tagging>")):
        r = raw_put_tagging("/%s/e" % b, xml)
        eq("[%s] PutObjectTagging with XML %s" % (m, what),
           (r.status, (r.error() or {}).get("Code")), (400, "MalformedXML"))
    eq("[%s] the tags are unchanged after the refusals" % m, tags(c, b, "e"), [("keep", "1")])
    missing = [("get", lambda: c.get_object_tagging(Bucket=b, Key="missing")),
               ("put", lambda: c.put_object_tagging(Bucket=b, Key="missing", Tagging={
                   "TagSet": tagset([("a", "1")])}))]
    # moto answers DeleteObjectTagging of a missing key with a 500 (AWS: NoSuchKey),
    # which the cache passes on as 503: checked on the directory store only
    if m == "local":
        missing.append(("delete", lambda: c.delete_object_tagging(Bucket=b, Key="missing")))
    for op, fn in missing:
        eq("[%s] %s tagging of a missing key" % (m, op), err(fn), ("NoSuchKey", 404))
    eq("[%s] put_object with duplicate keys in x-amz-tagging" % m,
       err(c.put_object, Bucket=b, Key="e", Body=b"new", Tagging="a=1&a=2"),
       ("InvalidArgument", 400))
    eq("[%s] put_object with 11 tags in x-amz-tagging" % m,
       err(c.put_object, Bucket=b, Key="e", Body=b"new",
           Tagging="&".join("k%d=v" % i for i in range(11))), ("BadRequest", 400))
    eq("[%s] put_object with a bad %%-escape in x-amz-tagging" % m,
       err(c.put_object, Bucket=b, Key="e", Body=b"new", Tagging="a=%zz"),
       ("InvalidArgument", 400))
    eq("[%s] the object is unchanged after refused PUTs" % m,
       (c.get_object(Bucket=b, Key="e")["Body"].read(), tags(c, b, "e")), (b"e", [("keep", "1")]))


def bucket_tags(m, c, b):
    eq("[%s] GetBucketTagging of an untagged bucket" % m, err(c.get_bucket_tagging, Bucket=b),
       ("NoSuchTagSet", 404))
    r = c.put_bucket_tagging(Bucket=b, Tagging={"TagSet": tagset([("team", "ml"),
                                                                   ("cost", "42")])})
    eq("[%s] put_bucket_tagging answers 204" % m, r["ResponseMetadata"]["HTTPStatusCode"], 204)
    eq("[%s] get_bucket_tagging" % m,
       [(t["Key"], t["Value"]) for t in c.get_bucket_tagging(Bucket=b)["TagSet"]],
       [("team", "ml"), ("cost", "42")])
    eq("[%s] 51 bucket tags" % m, err(c.put_bucket_tagging, Bucket=b, Tagging={
        "TagSet": tagset([("k%d" % i, "v") for i in range(51)])}), ("BadRequest", 400))
    eq("[%s] bucket tagging of a missing bucket" % m,
       err(c.get_bucket_tagging, Bucket="no-such-bucket-tg"), ("NoSuchBucket", 404))


def bucket_tags_delete(m, c, b):
    r = c.delete_bucket_tagging(Bucket=b)
    eq("[%s] delete_bucket_tagging answers 204" % m, r["ResponseMetadata"]["HTTPStatusCode"],
       204)
    eq("[%s] no tag set after delete" % m, err(c.get_bucket_tagging, Bucket=b),
       ("NoSuchTagSet", 404))


DEBIAN_SCRIPT = r"""
import json, os, sys, boto3
from botocore.config import Config
c = boto3.client("s3", endpoint_url=os.environ["EP"], region_name="us-east-1",
                 aws_access_key_id=os.environ["AK"], aws_secret_access_key=os.environ["SK"],
                 config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"))
b = os.environ["B"]
c.put_object(Bucket=b, Key="deb", Body=b"d", Tagging="from=debian")
c.put_object_tagging(Bucket=b, Key="deb", Tagging={"TagSet": [{"Key": "v", "Value": "1.26"}]})
# botocore 1.29 has TagCount on GetObject only (on HeadObject since)
print(json.dumps([boto3.__version__, c.get_object_tagging(Bucket=b, Key="deb")["TagSet"],
                  c.get_object(Bucket=b, Key="deb").get("TagCount")]))
"""


def other_clients(m, c, b):
    if os.path.exists("/usr/bin/python3"):
        env = dict(os.environ, EP=H.S.endpoint, AK=H.ACCESS_KEY, SK=H.SECRET_KEY, B=b)
        rc, out, er = H.run_cmd(["/usr/bin/python3", "-c", DEBIAN_SCRIPT], env=env, timeout=120)
        got = json.loads(out) if rc == 0 and out.strip() else None
        check("[%s] Debian boto3 1.26 puts and reads tags" % m,
              got and got[0].startswith("1.26") and got[1] == [{"Key": "v", "Value": "1.26"}]
              and got[2] == 1, (rc, out, er[-800:]))
    else:
        H.skip("[%s] Debian boto3 1.26 puts and reads tags" % m, "no /usr/bin/python3")
    v1 = STATE.get("awscli_v1")
    if v1:
        rc, out, er = H.run_cmd([v1, "--endpoint-url", H.S.endpoint, "s3api",
                                 "get-object-tagging", "--bucket", b, "--key", "src"],
                                env=H.aws_env(), timeout=120)
        check("[%s] aws-cli v1 s3api get-object-tagging" % m,
              rc == 0 and json.loads(out)["TagSet"] == tagset([("s", "1"), ("t", "2")]),
              (rc, out, er[-800:]))
    else:
        H.skip("[%s] aws-cli v1 s3api get-object-tagging" % m, "no aws-cli v1 on PATH")
    # aws-cli v2: cp and mv of 9 MiB inside S3 ask GetObjectTagging first
    path = os.path.join(H.S.tmp, "big-%s.bin" % m)
    sha = H.write_random_file(path, BIG)
    env2 = H.aws_env(v2=True)
    base = [AWS2, "--endpoint-url", H.S.endpoint, "--no-progress"]
    c.upload_file(path, b, "big", ExtraArgs={"Tagging": "shard=7"})
    rc, out, er = H.run_cmd(base + ["s3", "cp", "s3://%s/big" % b, "s3://%s/big2" % b],
                            env=env2)
    eq("[%s] aws s3 cp s3://b/big s3://b/big2 (9 MiB)" % m, (rc, er[-500:]), (0, ""))
    rc, out, er = H.run_cmd(base + ["s3", "mv", "s3://%s/big2" % b, "s3://%s/big3" % b],
                            env=env2)
    eq("[%s] aws s3 mv s3://b/big2 s3://b/big3" % m, (rc, er[-500:]), (0, ""))
    body = c.get_object(Bucket=b, Key="big3")["Body"].read()
    eq("[%s] the moved copy has the bytes and the tags" % m,
       (len(body), hashlib.sha256(body).hexdigest(), tags(c, b, "big3")),
       (BIG, sha, [("shard", "7")]))
    eq("[%s] mv removed its source" % m, err(c.head_object, Bucket=b, Key="big2"),
       ("404", 404))
    os.unlink(path)


def access_log(m):
    text = "\n".join(H.log_grep("access:", 100000))
    for op in ("GetObjectTagging", "PutObjectTagging", "DeleteObjectTagging",
               "GetBucketTagging", "PutBucketTagging", "DeleteBucketTagging"):
        check("[%s] the access log names %s and its sub-resource" % (m, op),
              any(("op=%s " % op) in l and "subresource=tagging" in l
                  for l in text.splitlines()), H.log_grep("op=%s" % op, 3))


def suite(m, b):
    c = H.boto3_client()
    c.create_bucket(Bucket=b)
    object_tags(m, c, b)
    copies_and_uploads(m, c, b)
    errors(m, c, b)
    bucket_tags(m, c, b)
    other_clients(m, c, b)
    return c


# ---------------------------------------------------------------- the modes

def local_store():
    H.start("test_tagging")
    b = "tag-local"
    c = suite("local", b)
    meta = os.getxattr(H.direct_path(b, "src"), "user.shardgate.meta")
    check("[local] the tags are in the object's metadata xattr", b"x-amz-tagging" in meta
          and b"s=1&t=2" in meta and b"text/plain" in meta, meta)
    # a tag set past what ext4 keeps with one file: refused whole, or kept whole
    huge = tagset([("%02d" % i + ":" * 126, "/" * 256) for i in range(10)])
    code = err(c.put_object_tagging, Bucket=b, Key="src", Tagging={"TagSet": huge})
    check("[local] 11 KiB of tags: kept, or 400 MetadataTooLarge with the old tags intact",
          (code == (None, None) and len(tags(c, b, "src")) == 10) or
          (code == ("MetadataTooLarge", 400) and tags(c, b, "src") == [("s", "1"), ("t", "2")]),
          (code, tags(c, b, "src")))
    c.put_object_tagging(Bucket=b, Key="src", Tagging={"TagSet": tagset([("s", "1")])})
    # restart on the same directory: the tags are still there
    C.restart_local()
    c = H.boto3_client()
    eq("[local] a restart keeps object tags", (tags(c, b, "src"), tags(c, b, "big3"),
                                               c.head_object(Bucket=b, Key="mp")["TagCount"]),
       ([("s", "1")], [("shard", "7")], 2))
    eq("[local] a restart keeps bucket tags",
       [(t["Key"], t["Value"]) for t in c.get_bucket_tagging(Bucket=b)["TagSet"]],
       [("team", "ml"), ("cost", "42")])
    bucket_tags_delete("local", c, b)
    access_log("local")
    H._stop_gateway(report=True)


def cache_over_moto():
    moto = C.Moto().start()
    conf = {"buckets": {"tag-cache": {"consistency": "immutable"},
                        "tag-reval": {"consistency": "always"}}}
    C.start_cache(C.Cache(moto.endpoint, moto.access, moto.secret, size="256MiB",
                          config=conf, tag="tagging"))
    b = "tag-cache"
    c = suite("cache", b)
    bucket_tags_delete("cache", c, b)
    # the tags live in the cold tier
    mc = moto.client()
    eq("[cache] the cold tier holds the tags", tags(mc, b, "big3"), [("shard", "7")])
    # a tag change made in the cold tier itself: a revalidating read sees it
    r = "tag-reval"
    c.create_bucket(Bucket=r)
    c.put_object(Bucket=r, Key="obj", Body=b"x" * 1000, Tagging="a=1")
    eq("[cache] a read through the cache", c.get_object(Bucket=r, Key="obj").get("TagCount"), 1)

    def hit():
        c.get_object(Bucket=r, Key="obj")["Body"].read()
        return any("bucket=%s " % r in l and "read=hit" in l for l in H.log_grep("key=obj"))
    check("[cache] a later read is a hit (checked against the cold tier)",
          C.wait_until(hit, timeout=30, step=0.2))
    mc.put_object_tagging(Bucket=r, Key="obj", Tagging={"TagSet": tagset([("a", "1"),
                                                                          ("b", "2")])})
    g = c.get_object(Bucket=r, Key="obj")
    eq("[cache] consistency always: the next read has the cold tier's new TagCount",
       (g.get("TagCount"), g["Body"].read()), (2, b"x" * 1000))
    eq("[cache] and HEAD too", c.head_object(Bucket=r, Key="obj").get("TagCount"), 2)
    check("[cache] the revalidation said why it dropped the copy",
          H.log_grep("tag-reval/obj: its tags changed in the cold tier"), H.log_tail(10))
    access_log("cache")
    C.stop_cache()


def main():
    C.need_clients()
    if not C.have_moto():
        H.skip_file("needs moto (python3 -m moto.server) for the cold tier")
    rc, out, er = H.run_cmd([AWS2, "--version"], env=H.aws_env(v2=True), timeout=60) \
        if os.path.exists(AWS2) else (1, "", "")
    if rc != 0 or not (out + er).startswith("aws-cli/2."):
        H.skip_file("needs aws-cli v2 at %s (Debian package awscli)" % AWS2)
    v1 = shutil.which("aws")
    if v1:
        rc, out, er = H.run_cmd([v1, "--version"], env=H.aws_env(), timeout=60)
        if rc == 0 and (out + er).startswith("aws-cli/1."):
            STATE["awscli_v1"] = v1
    C.init("test_tagging")
    atexit.register(C.stop_all)
    local_store()
    # the cache mode's gateway logs into a file of its own
    H.S.log_file.close()
    H.S.log_file = None
    cache_over_moto()


H.run(main)
