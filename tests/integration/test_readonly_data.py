"""tests/integration/test_readonly_data.py - serving a dataset tree that cannot
be written, as it is (issue 10, finding 5), and the directory store behind a
cache directory.

The tree is made unwritable for real, never with a chmod that root ignores:
  * [rofs]   a read-only bind mount in a private mount namespace (unshare -m):
             every write fails with EROFS, as on a read-only NFS/Lustre mount;
  * [eacces] the gateway runs as an unprivileged user (nobody, via setpriv)
             over a chmod 555 tree: every write fails with EACCES.
In both: the gateway starts (69019cc stopped with "cannot open the cold tier
...: IO" because it insisted on creating DIR/.shardgate), says once that it
serves the tree read-only, answers reads, ranges, HEAD and listings, and
refuses every write with 403 AccessDenied and a message saying the store is
read-only; the tree is left exactly as it was.
Then:
  * [cache-ro] --data on the read-only mount with --cache-dir: a miss goes to
    the tree, the second GET is a cache hit (counted in /metrics);
  * [cache-rw] --data with --cache-dir on a writable tree: PUT, miss, hit, and
    an overwrite is served new;
  * [state]  state_dir elsewhere (--state-dir, the config file's "state_dir",
    SHARDGATE_STATE_DIR): uploads live there, DIR/.shardgate is never made;
    a state_dir the gateway may not write makes a writable tree read-only.
"""

import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import cache_common as C  # noqa: E402
import store_common as T  # noqa: E402

check, eq = H.check, H.eq
KIB = 1024


def make_tree(root):
    """A small dataset: two buckets, nested keys, a directory that is no bucket."""
    files = {
        ("ds1", "a.bin"): os.urandom(300 * KIB),
        ("ds1", "sub/b.txt"): b"bee\n",
        ("ds1", "deep/x/y/z.txt"): b"zed\n",
        ("ds2", "c.txt"): b"sea\n",
    }
    for (b, k), data in files.items():
        p = os.path.join(root, b, *k.split("/"))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
    os.makedirs(os.path.join(root, "Not_A_Bucket"), exist_ok=True)
    return files


def error_of(fn, *a, **kw):
    """(code, status, message) of a boto3 call expected to fail."""
    from botocore.exceptions import ClientError
    try:
        fn(*a, **kw)
    except ClientError as e:
        return (e.response.get("Error", {}).get("Code"),
                e.response.get("ResponseMetadata", {}).get("HTTPStatusCode"),
                e.response.get("Error", {}).get("Message", ""))
    return (None, None, "succeeded")


def read_only_suite(tag, gw, files, root):
    s3 = gw.client()
    before = T.tree_snapshot(root)
    eq("[%s] the read-only mode is said once at start" % tag, len(gw.grep("READ-ONLY")), 1)
    names = sorted(b["Name"] for b in s3.list_buckets()["Buckets"])
    eq("[%s] ListBuckets shows the tree's buckets" % tag, names, ["ds1", "ds2"])
    for (b, k), data in files.items():
        got = s3.get_object(Bucket=b, Key=k)["Body"].read()
        eq("[%s] GET %s/%s" % (tag, b, k), hashlib.sha256(got).hexdigest(),
           hashlib.sha256(data).hexdigest())
    r = s3.get_object(Bucket="ds1", Key="a.bin", Range="bytes=1000-1999")
    eq("[%s] range GET" % tag, r["Body"].read(), files[("ds1", "a.bin")][1000:2000])
    eq("[%s] HEAD size" % tag, s3.head_object(Bucket="ds1", Key="a.bin")["ContentLength"],
       300 * KIB)
    lst = s3.list_objects_v2(Bucket="ds1")
    eq("[%s] ListObjectsV2" % tag, [o["Key"] for o in lst.get("Contents", [])],
       ["a.bin", "deep/x/y/z.txt", "sub/b.txt"])
    lst = s3.list_objects_v2(Bucket="ds1", Delimiter="/")
    eq("[%s] ListObjectsV2 with a delimiter" % tag,
       ([o["Key"] for o in lst.get("Contents", [])],
        [p["Prefix"] for p in lst.get("CommonPrefixes", [])]),
       (["a.bin"], ["deep/", "sub/"]))
    eq("[%s] ListMultipartUploads is empty" % tag,
       s3.list_multipart_uploads(Bucket="ds1").get("Uploads", []), [])

    writes = [
        ("PutObject", s3.put_object, dict(Bucket="ds1", Key="new.txt", Body=b"x")),
        ("PutObject over an object", s3.put_object, dict(Bucket="ds1", Key="sub/b.txt",
                                                        Body=b"x")),
        ("CopyObject", s3.copy_object, dict(Bucket="ds1", Key="copy.txt",
                                            CopySource={"Bucket": "ds1", "Key": "sub/b.txt"})),
        ("DeleteObject", s3.delete_object, dict(Bucket="ds1", Key="sub/b.txt")),
        ("CreateBucket", s3.create_bucket, dict(Bucket="newbucket")),
        ("DeleteBucket", s3.delete_bucket, dict(Bucket="ds2")),
        ("CreateMultipartUpload", s3.create_multipart_upload, dict(Bucket="ds1", Key="m")),
    ]
    for what, fn, kw in writes:
        code, status, msg = error_of(fn, **kw)
        check("[%s] %s -> 403 AccessDenied saying the store is read-only" % (tag, what),
              code == "AccessDenied" and status == 403 and "read-only" in msg,
              "%r %r %r" % (code, status, msg))
    r = s3.delete_objects(Bucket="ds1", Delete={"Objects": [{"Key": "a.bin"},
                                                            {"Key": "sub/b.txt"}]})
    eq("[%s] DeleteObjects: each key AccessDenied" % tag,
       sorted((e["Key"], e["Code"]) for e in r.get("Errors", [])),
       [("a.bin", "AccessDenied"), ("sub/b.txt", "AccessDenied")])
    eq("[%s] DeleteObjects deleted nothing" % tag, r.get("Deleted", []), [])
    eq("[%s] the tree is unchanged (nothing created, deleted or written)" % tag,
       T.tree_snapshot(root), before)
    check("[%s] no state directory was made in the tree" % tag,
          not os.path.exists(os.path.join(root, ".shardgate")))


def case_rofs():
    root = H.tmpdir("rofs-data")
    files = make_tree(root)
    gw = T.Gw("rofs", ["--data", root], wrap=T.ro_mount_wrap(root))
    if gw.start():
        read_only_suite("rofs", gw, files, root)
        check("[rofs] the reason names the state directory and EROFS",
              any(".shardgate" in l and "Read-only file system" in l
                  for l in gw.grep("READ-ONLY")), gw.grep("READ-ONLY"))
    eq("[rofs] gateway exits 0 on SIGTERM", gw.stop(), 0)


def case_eacces():
    root = H.tmpdir("eacces-data")
    files = make_tree(root)
    T.chmod_tree(root, 0o555, 0o444)
    T.open_to_all(root)
    try:
        gw = T.Gw("eacces", ["--data", root], wrap=T.nobody_wrap())
        if gw.start():
            read_only_suite("eacces", gw, files, root)
            check("[eacces] the reason names the state directory and EACCES",
                  any(".shardgate" in l and "Permission denied" in l
                      for l in gw.grep("READ-ONLY")), gw.grep("READ-ONLY"))
        eq("[eacces] gateway exits 0 on SIGTERM", gw.stop(), 0)
    finally:
        T.chmod_tree(root, 0o755, 0o644)


def published(gw, n):
    """Waits until the cache holds n objects: a fill is published only after
    its last byte went out, and a GET racing that would wait on the fill
    (neither a hit nor a miss)."""
    return C.wait_until(lambda: (C.metric_sum(C.metrics(gw.port), "shardgate_cache_objects")
                                 or 0.0) >= n, timeout=30)


def hits_and_misses(gw):
    m = C.metrics(gw.port)
    return (C.metric_sum(m, "shardgate_cache_misses_total") or 0.0,
            C.metric_sum(m, "shardgate_cache_hits_total") or 0.0)


def case_cache_ro():
    """A parallel-file-system dataset (read-only here) cached on local NVMe."""
    root = H.tmpdir("cache-ro-data")
    files = make_tree(root)
    cache = H.tmpdir("cache-ro-cache")
    gw = T.Gw("cache-ro", ["--data", root, "--cache-dir", cache, "--cache-size", "64MiB",
                           "--consistency", "immutable"], wrap=T.ro_mount_wrap(root))
    if gw.start():
        s3 = gw.client()
        want = hashlib.sha256(files[("ds1", "a.bin")]).hexdigest()
        m0, h0 = hits_and_misses(gw)
        got1 = hashlib.sha256(s3.get_object(Bucket="ds1", Key="a.bin")["Body"].read())
        check("[cache-ro] the fill is published", published(gw, 1))
        m1, h1 = hits_and_misses(gw)
        got2 = hashlib.sha256(s3.get_object(Bucket="ds1", Key="a.bin")["Body"].read())
        m2, h2 = hits_and_misses(gw)
        eq("[cache-ro] first GET: right bytes", got1.hexdigest(), want)
        eq("[cache-ro] first GET is a miss", (m1 - m0, h1 - h0), (1.0, 0.0))
        eq("[cache-ro] second GET: right bytes", got2.hexdigest(), want)
        eq("[cache-ro] second GET is a hit", (m2 - m1, h2 - h1), (0.0, 1.0))
        code, status, _ = error_of(s3.put_object, Bucket="ds1", Key="a.bin", Body=b"x")
        eq("[cache-ro] a PUT is refused", (code, status), ("AccessDenied", 403))
        got3 = hashlib.sha256(s3.get_object(Bucket="ds1", Key="a.bin")["Body"].read())
        eq("[cache-ro] the refused PUT changed nothing served", got3.hexdigest(), want)
    eq("[cache-ro] gateway exits 0 on SIGTERM", gw.stop(), 0)


def case_cache_rw():
    root = H.tmpdir("cache-rw-data")
    cache = H.tmpdir("cache-rw-cache")
    gw = T.Gw("cache-rw", ["--data", root, "--cache-dir", cache, "--cache-size", "64MiB"])
    if gw.start():
        s3 = gw.client()
        s3.create_bucket(Bucket="ckpt")
        v1, v2 = os.urandom(200 * KIB), os.urandom(100 * KIB)
        s3.put_object(Bucket="ckpt", Key="k", Body=v1)
        m0, h0 = hits_and_misses(gw)
        g1 = s3.get_object(Bucket="ckpt", Key="k")["Body"].read()
        check("[cache-rw] the fill is published", published(gw, 1))
        m1, h1 = hits_and_misses(gw)
        g2 = s3.get_object(Bucket="ckpt", Key="k")["Body"].read()
        m2, h2 = hits_and_misses(gw)
        check("[cache-rw] miss then hit, right bytes",
              g1 == v1 and g2 == v1 and (m1 - m0, h1 - h0, m2 - m1, h2 - h1) ==
              (1.0, 0.0, 0.0, 1.0), (m0, h0, m1, h1, m2, h2))
        s3.put_object(Bucket="ckpt", Key="k", Body=v2)
        eq("[cache-rw] an overwrite is served new", s3.get_object(Bucket="ckpt", Key="k")
           ["Body"].read(), v2)
        with open(os.path.join(root, "ckpt", "k"), "rb") as f:
            eq("[cache-rw] the tree holds the new bytes", f.read(), v2)
    eq("[cache-rw] gateway exits 0 on SIGTERM", gw.stop(), 0)


def mpu_in_state_dir(tag, gw, root, state):
    s3 = gw.client()
    s3.create_bucket(Bucket="bkt")
    up = s3.create_multipart_upload(Bucket="bkt", Key="big")["UploadId"]
    s3.upload_part(Bucket="bkt", Key="big", UploadId=up, PartNumber=1, Body=b"p" * 1000)
    check("[%s] the upload lives in the state directory" % tag,
          os.path.isdir(os.path.join(state, "mpu", "bkt", up)),
          os.listdir(state))
    parts = s3.list_parts(Bucket="bkt", Key="big", UploadId=up)["Parts"]
    s3.complete_multipart_upload(Bucket="bkt", Key="big", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": parts[0]["ETag"]}]})
    eq("[%s] the completed object is in the tree" % tag,
       open(os.path.join(root, "bkt", "big"), "rb").read(), b"p" * 1000)
    check("[%s] no DIR/.shardgate" % tag, not os.path.exists(os.path.join(root, ".shardgate")))
    with open(os.path.join(state, "lock")) as f:
        eq("[%s] the state directory's lock names the gateway" % tag, f.read().strip(),
           str(gw.pid))


def case_state_dir():
    # --state-dir
    root, state = H.tmpdir("st-flag-data"), os.path.join(H.S.tmp, "st-flag-state", "deep")
    gw = T.Gw("state-flag", ["--data", root, "--state-dir", state])
    if gw.start():
        mpu_in_state_dir("state-flag", gw, root, state)
    eq("[state-flag] exits 0", gw.stop(), 0)
    # the config file's "state_dir"
    root, state = H.tmpdir("st-file-data"), H.tmpdir("st-file-state")
    cfg = os.path.join(H.S.tmp, "st.json")
    with open(cfg, "w") as f:
        json.dump({"state_dir": state}, f)
    gw = T.Gw("state-file", ["--data", root, "--config", cfg])
    if gw.start():
        mpu_in_state_dir("state-file", gw, root, state)
    eq("[state-file] exits 0", gw.stop(), 0)
    # SHARDGATE_STATE_DIR
    root, state = H.tmpdir("st-env-data"), H.tmpdir("st-env-state")
    gw = T.Gw("state-env", ["--data", root], env={"SHARDGATE_STATE_DIR": state})
    if gw.start():
        mpu_in_state_dir("state-env", gw, root, state)
    eq("[state-env] exits 0", gw.stop(), 0)


def case_state_dir_not_writable():
    """A writable tree with a state directory on a read-only mount: read-only."""
    root = H.tmpdir("st-ro-data")
    state_parent = H.tmpdir("st-ro-state")
    make_tree(root)
    gw = T.Gw("state-ro", ["--data", root, "--state-dir", os.path.join(state_parent, "st")],
              wrap=T.ro_mount_wrap(state_parent))
    if gw.start():
        s3 = gw.client()
        eq("[state-ro] the read-only mode is said once", len(gw.grep("READ-ONLY")), 1)
        eq("[state-ro] reads work", s3.get_object(Bucket="ds2", Key="c.txt")["Body"].read(),
           b"sea\n")
        code, status, msg = error_of(s3.put_object, Bucket="ds1", Key="n", Body=b"x")
        check("[state-ro] writes are refused as read-only",
              (code, status) == ("AccessDenied", 403) and "read-only" in msg,
              (code, status, msg))
    eq("[state-ro] exits 0", gw.stop(), 0)


def main():
    T.init("test_readonly_data")
    have_ro, have_unpriv = T.can_ro_mount(), T.can_be_unprivileged()
    print("# read-only bind mount: %s; unprivileged user: %s" % (have_ro, have_unpriv),
          flush=True)
    if not have_ro and not have_unpriv:
        H.skip_file("neither a private mount namespace (unshare, mount) nor an unprivileged "
                    "user (setpriv) is available: no way to make a tree read-only")
    if have_ro:
        case_rofs()
    else:
        H.skip("[rofs]", "no private mount namespace here")
    if have_unpriv:
        case_eacces()
    else:
        H.skip("[eacces]", "no setpriv")
    if have_ro:
        case_cache_ro()
        case_state_dir_not_writable()
    case_cache_rw()
    case_state_dir()


if __name__ == "__main__":
    H.run(main)
