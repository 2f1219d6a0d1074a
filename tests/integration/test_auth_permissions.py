"""tests/integration/test_auth_permissions.py - per-bucket permissions end to
end: each configured user x bucket x operation gives the expected allow/deny
(users from a --config file, one secret from secret_key_env), and anonymous
requests are allowed only to read public_read buckets.

Permissions (auth_common.USERS): root admin on "*"; reader read on "*";
writer write on ckpt, read on data; badmin admin on ckpt, read on "*", none
on private. Bucket "public" is public_read. Operation -> level expected of
the gateway: reads (ListObjects, HeadBucket, GetObject, HeadObject) READ;
PutObject, DeleteObject WRITE; Get...Tagging READ, Put/DeleteObjectTagging
WRITE; ListObjectVersions, GetBucketAcl, GetObjectAcl READ; PutObjectAcl
WRITE; CreateBucket, DeleteBucket, Put/DeleteBucketTagging, PutBucketAcl
ADMIN on that bucket; ListBuckets any user, showing only buckets the user may read."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import auth_common as A  # noqa: E402

BUCKETS = ["public", "ckpt", "data", "private"]
LEVEL = {
    # user: {bucket: level}; 0 none, 1 read, 2 write, 3 admin
    "root": {b: 3 for b in BUCKETS + ["newb"]},
    "reader": {b: 1 for b in BUCKETS + ["newb"]},
    "writer": {"ckpt": 2, "data": 1},
    "badmin": {"ckpt": 3, "public": 1, "data": 1, "private": 0, "newb": 1},
}


def client(user):
    return H.boto3_client(access=A.access_of(user), secret=A.secret_of(user))


def allowed(fn):
    """True when the call succeeded, False on AccessDenied; anything else is
    returned as the error code string."""
    code, status, _ = H.client_error(fn)
    if code is None:
        return True
    if code == "AccessDenied" and status == 403:
        return False
    return "%s/%s" % (code, status)


def main():
    A.start_with_config("test_auth_permissions")
    root = client("root")
    for b in BUCKETS:
        root.create_bucket(Bucket=b)
        root.put_object(Bucket=b, Key="obj", Body=b"content of " + b.encode())

    for user in ("root", "reader", "writer", "badmin"):
        c = client(user)
        lv = LEVEL[user]
        for b in BUCKETS:
            want = lv.get(b, 0)
            ops = [
                ("ListObjectsV2", 1, lambda: c.list_objects_v2(Bucket=b)),
                ("HeadBucket", 1, lambda: c.head_bucket(Bucket=b)),
                ("GetObject", 1, lambda: c.get_object(Bucket=b, Key="obj")["Body"].read()),
                ("HeadObject", 1, lambda: c.head_object(Bucket=b, Key="obj")),
                ("PutObject", 2, lambda: c.put_object(Bucket=b, Key="w-" + user, Body=b"x")),
                ("DeleteObject", 2, lambda: c.delete_object(Bucket=b, Key="w-" + user)),
                ("GetObjectTagging", 1, lambda: c.get_object_tagging(Bucket=b, Key="obj")),
                ("PutObjectTagging", 2, lambda: c.put_object_tagging(
                    Bucket=b, Key="obj", Tagging={"TagSet": [{"Key": "by", "Value": user}]})),
                ("DeleteObjectTagging", 2,
                 lambda: c.delete_object_tagging(Bucket=b, Key="obj")),
                ("GetBucketTagging", 1, lambda: c.get_bucket_tagging(Bucket=b)),
                ("PutBucketTagging", 3, lambda: c.put_bucket_tagging(
                    Bucket=b, Tagging={"TagSet": [{"Key": "by", "Value": user}]})),
                ("DeleteBucketTagging", 3, lambda: c.delete_bucket_tagging(Bucket=b)),
                ("ListObjectVersions", 1, lambda: c.list_object_versions(Bucket=b)),
                ("GetBucketAcl", 1, lambda: c.get_bucket_acl(Bucket=b)),
                ("PutBucketAcl", 3, lambda: c.put_bucket_acl(Bucket=b, ACL="private")),
                ("GetObjectAcl", 1, lambda: c.get_object_acl(Bucket=b, Key="obj")),
                ("PutObjectAcl", 2, lambda: c.put_object_acl(Bucket=b, Key="obj",
                                                             ACL="private")),
            ]
            for op, need, fn in ops:
                got = allowed(fn)
                # HEAD answers 403 without a body: botocore gives code "403"
                if got == "403/403":
                    got = False
                # an untagged bucket: allowed, and answered NoSuchTagSet
                if got == "NoSuchTagSet/404":
                    got = True
                H.eq("%s %s on %s" % (user, op, b), got, want >= need)
        # bucket admin: create and delete a bucket of its own name space
        want = lv.get("newb", 0) >= 3
        got = allowed(lambda: c.create_bucket(Bucket="newb"))
        H.eq("%s CreateBucket newb" % user, got, want)
        if got is True:
            H.eq("%s DeleteBucket newb" % user, allowed(lambda: c.delete_bucket(Bucket="newb")),
                 True)
        # ListBuckets: everyone authenticated; shows the readable buckets
        code, status, _ = H.client_error(c.list_buckets)
        H.eq("%s ListBuckets allowed" % user, code, None)
        if code is None:
            names = sorted(x["Name"] for x in c.list_buckets()["Buckets"])
            H.eq("%s ListBuckets shows only readable buckets" % user, names,
                 sorted(b for b in BUCKETS if lv.get(b, 0) >= 1))
    # DeleteBucket on ckpt: writer (write) denied, badmin (admin) allowed
    # once it is empty; re-created by root afterwards
    w = client("writer")
    H.eq("writer DeleteBucket ckpt denied", allowed(lambda: w.delete_bucket(Bucket="ckpt")), False)

    # ---- anonymous ----
    r = H.raw("GET", "/public/obj", sign=False)
    H.eq("anonymous GET on public_read bucket", r.status, 200)
    H.eq("anonymous GET body", r.body, b"content of public")
    H.eq("anonymous HEAD on public_read bucket", H.raw("HEAD", "/public/obj", sign=False).status,
         200)
    H.eq("anonymous ListObjects on public_read bucket",
         H.raw("GET", "/public", query="list-type=2", sign=False).status, 200)
    for method, path, body in (("PUT", "/public/anon", b"x"), ("DELETE", "/public/obj", b""),
                               ("PUT", "/anonbucket", b"")):
        r = H.raw(method, path, body=body, sign=False)
        H.check("anonymous %s %s denied" % (method, path),
                r.status == 403 and (r.error() or {}).get("Code") == "AccessDenied",
                "got %d %r" % (r.status, r.body[:200]))
    H.eq("public object intact after anonymous DELETE",
         H.raw("GET", "/public/obj").body, b"content of public")
    for b in ("ckpt", "private", "data"):
        r = H.raw("GET", "/%s/obj" % b, sign=False)
        H.check("anonymous GET on private bucket %s denied" % b,
                r.status == 403 and (r.error() or {}).get("Code") == "AccessDenied",
                "got %d" % r.status)
    r = H.raw("GET", "/", sign=False)
    H.check("anonymous ListBuckets denied", r.status == 403, "got %d" % r.status)
    # a wrong secret is not anonymous
    bad = H.boto3_client(access=A.access_of("reader"), secret="wrong")
    code, status, _ = H.client_error(lambda: bad.get_object(Bucket="public", Key="obj"))
    H.eq("wrong secret on a public bucket is SignatureDoesNotMatch", (code, status),
         ("SignatureDoesNotMatch", 403))


if __name__ == "__main__":
    H.run(main)
