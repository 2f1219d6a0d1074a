"""tests/integration/test_key_prefixes.py - keys that are also prefixes of
other keys (issue 12): S3 holds "a/b" beside "a/b/c", and a folder marker
"f/" beside "f/x" and "f//y"; the directory store, where a name is a file or
a directory, keeps such a key's object inside the directory of its name
(backend/posix_nest.c). Run in both modes: the directory store (`--data`),
and the cache in front of another shardgate's directory store (`--cold`).
With boto3 1.43 and aws-cli v2, in each mode:
  * PUT in both orders (the key first, or the keys below it first), three
    deep, and over an existing nested key: every object reads back byte for
    byte with its ETag; a directory that holds no object of its own is 404;
  * folder markers beside keys below them, and an empty segment ("g//h");
  * ListObjectsV2 in S3's order (binary order of the keys), with and without
    a delimiter, and page by page (MaxKeys=1) the same order;
  * CopyObject onto and out of a nested key; CompleteMultipartUpload to a
    key that is a prefix; If-None-Match: * refused on a nested key (412);
  * DeleteObject of the prefix key leaves the keys below it; DeleteObjects;
    aws-cli v2 `s3 ls --recursive` lists every key, `s3 rm --recursive`
    removes them all.
Directory store only: keys that are no prefix stay plain files (a dataset
tree is served as it is), the nested object is in DIR/bucket/a/b/.sg~o, and
the bucket directory is empty after the deletes (no directories left)."""

import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import cache_common as C  # noqa: E402

check, eq = H.check, H.eq
AWS2 = "/usr/bin/aws"

# key -> bytes, written in this order (each line: a key, then keys above or
# below it)
WRITES = [
    ("a/b", b"the key first"),
    ("a/b/c", b"below a file"),
    ("a/b/c/d", b"two below"),
    ("x/y/z", b"the deep key first"),
    ("x/y", b"over a directory"),
    ("x", b"over two"),
    ("x/y", b"x/y again, nested"),
    ("f/", b""),
    ("f/x", b"below a marker"),
    ("g//h", b"an empty segment"),
    ("g/", b"marker after"),
    ("plain/file", b"no prefix of anything"),
]


def etag(data):
    return '"%s"' % hashlib.md5(data).hexdigest()


def body(c, b, k):
    return c.get_object(Bucket=b, Key=k)["Body"].read()


def list_all(c, b, **kw):
    keys, tok = [], None
    while True:
        args = dict(Bucket=b, **kw)
        if tok:
            args["ContinuationToken"] = tok
        r = c.list_objects_v2(**args)
        keys += [o["Key"] for o in r.get("Contents", [])]
        if not r.get("IsTruncated"):
            return keys
        tok = r["NextContinuationToken"]


def writes(m, c, b):
    want = {}
    for k, data in WRITES:
        r = c.put_object(Bucket=b, Key=k, Body=data)
        eq("[%s] PUT %r: 200 with its ETag" % (m, k),
           (r["ResponseMetadata"]["HTTPStatusCode"], r["ETag"]), (200, etag(data)))
        want[k] = data
    got = {k: body(c, b, k) for k in want}
    eq("[%s] every key reads back byte for byte" % m, got, want)
    h = c.head_object(Bucket=b, Key="a/b")
    eq("[%s] HEAD of the nested key a/b: its size and ETag" % m,
       (h["ContentLength"], h["ETag"]), (len(want["a/b"]), etag(want["a/b"])))
    code, status, _ = H.client_error(c.head_object, Bucket=b, Key="a/b/c/d/e")
    eq("[%s] a key below the deepest one: 404" % m, status, 404)
    code, status, _ = H.client_error(c.get_object, Bucket=b, Key="a")
    eq("[%s] GET a (a directory of keys, no object of its own): 404 NoSuchKey" % m,
       (code, status), ("NoSuchKey", 404))
    return want


def listings(m, c, b, want):
    order = sorted(want, key=lambda k: k.encode())
    eq("[%s] ListObjectsV2: every key, in S3's (binary) order" % m, list_all(c, b), order)
    eq("[%s] ListObjectsV2 page by page (MaxKeys=1): the same order" % m,
       list_all(c, b, MaxKeys=1), order)
    r = c.list_objects_v2(Bucket=b, Prefix="a/", Delimiter="/")
    eq("[%s] Prefix=a/ Delimiter=/: the object a/b and the prefix a/b/" % m,
       ([o["Key"] for o in r.get("Contents", [])],
        [p["Prefix"] for p in r.get("CommonPrefixes", [])]), (["a/b"], ["a/b/"]))
    r = c.list_objects_v2(Bucket=b, Delimiter="/")
    eq("[%s] Delimiter=/ at the top: the object x and the prefixes" % m,
       ([o["Key"] for o in r.get("Contents", [])],
        [p["Prefix"] for p in r.get("CommonPrefixes", [])]),
       (["x"], ["a/", "f/", "g/", "plain/", "x/"]))
    r = c.list_objects_v2(Bucket=b, Prefix="g/", Delimiter="/")
    eq("[%s] Prefix=g/ Delimiter=/: the marker g/ and the prefix g//" % m,
       ([o["Key"] for o in r.get("Contents", [])],
        [p["Prefix"] for p in r.get("CommonPrefixes", [])]), (["g/"], ["g//"]))
    eq("[%s] StartAfter=a/b: what follows it" % m, list_all(c, b, StartAfter="a/b"),
       [k for k in order if k.encode() > b"a/b"])


def copies_uploads_conditions(m, c, b, want):
    c.copy_object(Bucket=b, Key="a/b/c/d/e", CopySource={"Bucket": b, "Key": "x"})
    want["a/b/c/d/e"] = want["x"]
    eq("[%s] CopyObject x -> a/b/c/d/e (a/b/c/d becomes a prefix too)" % m,
       (body(c, b, "a/b/c/d/e"), body(c, b, "a/b/c/d")), (want["x"], want["a/b/c/d"]))
    c.copy_object(Bucket=b, Key="copied", CopySource={"Bucket": b, "Key": "a/b"})
    want["copied"] = want["a/b"]
    eq("[%s] CopyObject out of the nested key a/b" % m, body(c, b, "copied"), want["a/b"])
    part = os.urandom(5 * H.MB)
    u = c.create_multipart_upload(Bucket=b, Key="a/b/c")["UploadId"]
    e1 = c.upload_part(Bucket=b, Key="a/b/c", UploadId=u, PartNumber=1, Body=part)["ETag"]
    e2 = c.upload_part(Bucket=b, Key="a/b/c", UploadId=u, PartNumber=2, Body=b"tail")["ETag"]
    c.complete_multipart_upload(Bucket=b, Key="a/b/c", UploadId=u, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    want["a/b/c"] = part + b"tail"
    eq("[%s] CompleteMultipartUpload to a/b/c (a prefix): the new bytes, keys below kept" % m,
       (body(c, b, "a/b/c") == want["a/b/c"], body(c, b, "a/b/c/d")), (True, want["a/b/c/d"]))
    code, status, _ = H.client_error(c.put_object, Bucket=b, Key="a/b", Body=b"no",
                                     IfNoneMatch="*")
    eq("[%s] PUT If-None-Match: * on the nested key a/b: 412" % m, (code, status),
       ("PreconditionFailed", 412))
    eq("[%s] the refused PUT changed nothing" % m, body(c, b, "a/b"), want["a/b"])


def deletes(m, c, b, want):
    c.delete_object(Bucket=b, Key="a/b")
    del want["a/b"]
    code, status, _ = H.client_error(c.head_object, Bucket=b, Key="a/b")
    eq("[%s] DeleteObject a/b: gone, a/b/c and a/b/c/d kept" % m,
       (status, body(c, b, "a/b/c/d")), (404, want["a/b/c/d"]))
    r = c.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "x"}, {"Key": "x/y/z"}]})
    eq("[%s] DeleteObjects x and x/y/z: both deleted, x/y kept" % m,
       (sorted(d["Key"] for d in r.get("Deleted", [])), r.get("Errors", []), body(c, b, "x/y")),
       (["x", "x/y/z"], [], want["x/y"]))
    del want["x"], want["x/y/z"]
    eq("[%s] the listing after the deletes" % m, list_all(c, b),
       sorted(want, key=lambda k: k.encode()))


def aws_cli(m, b, want):
    env = H.aws_env(v2=True)
    base = [AWS2, "--endpoint-url", H.S.endpoint]
    rc, out, er = H.run_cmd(base + ["s3", "ls", "s3://%s/" % b, "--recursive"], env=env,
                            timeout=120)
    listed = [l.split(None, 3)[3] for l in out.splitlines() if len(l.split(None, 3)) == 4]
    eq("[%s] aws-cli v2 s3 ls --recursive: every key" % m, (rc, listed),
       (0, sorted(want, key=lambda k: k.encode())))
    rc, out, er = H.run_cmd(base + ["s3api", "get-object", "--bucket", b, "--key", "a/b/c/d",
                                    os.path.join(H.S.tmp, "prefix-get-%s" % m)], env=env,
                            timeout=120)
    with open(os.path.join(H.S.tmp, "prefix-get-%s" % m), "rb") as f:
        got = f.read()
    eq("[%s] aws-cli v2 s3api get-object a/b/c/d" % m, (rc, json.loads(out or "{}").get("ETag"),
                                                        got),
       (0, etag(want["a/b/c/d"]), want["a/b/c/d"]))
    rc, out, er = H.run_cmd(base + ["s3", "rm", "s3://%s/" % b, "--recursive"], env=env,
                            timeout=120)
    eq("[%s] aws-cli v2 s3 rm --recursive: exit 0" % m, (rc, er[-300:]), (0, ""))
    eq("[%s] nothing left in the bucket" % m, list_all(H.boto3_client(), b), [])


def suite(m, b):
    c = H.boto3_client()
    c.create_bucket(Bucket=b)
    want = writes(m, c, b)
    listings(m, c, b, want)
    copies_uploads_conditions(m, c, b, want)
    deletes(m, c, b, want)
    aws_cli(m, b, want)
    return c


def on_disk(path):
    """The bucket directory's tree: relative path -> 'dir' or 'file'."""
    tree = {}
    for dp, dns, fns in os.walk(path):
        for n in dns:
            tree[os.path.relpath(os.path.join(dp, n), path)] = "dir"
        for n in fns:
            tree[os.path.relpath(os.path.join(dp, n), path)] = "file"
    return tree


def local_store():
    H.start("test_key_prefixes")
    b = "prefixes-local"
    c = H.boto3_client()
    c.create_bucket(Bucket=b)
    for k, data in WRITES:
        c.put_object(Bucket=b, Key=k, Body=data)
    tree = on_disk(H.direct_path(b))
    eq("[local] on disk: a key that is no prefix is a plain file, a nested one its "
       "directory's .sg~o",
       (tree.get("plain/file"), tree.get("a/b"), tree.get("a/b/.sg~o"), tree.get("x/y/z")),
       ("file", "dir", "file", "file"))
    for k, _ in WRITES:
        c.delete_object(Bucket=b, Key=k)
    eq("[local] after deleting every key the bucket directory holds no key directory",
       sorted(p for p in on_disk(H.direct_path(b)) if not p.startswith(".sg~tmp")), [])
    suite("local", "prefixes-local2")
    H._stop_gateway(report=True)


def cache_over_shardgate():
    cold = C.ColdGateway().start()
    b = "prefixes-cache"
    C.start_cache(C.Cache(cold.endpoint, cold.access, cold.secret, size="64MiB", tag="prefix"))
    suite("cache", b)
    C.stop_cache()


def main():
    C.need_clients()
    if not os.path.exists(AWS2):
        H.skip_file("no aws-cli v2 at %s (.ci/deps.sh installs Debian's awscli)" % AWS2)
    C.both_modes("test_key_prefixes", local_store, cache_over_shardgate)


H.run(main)
