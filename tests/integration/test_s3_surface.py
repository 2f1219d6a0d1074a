"""tests/integration/test_s3_surface.py - S3's answers on bucket names,
re-created buckets, versions and ACLs (issue 12), the same checks in both
modes: the directory store (`--data`) and the cache in front of a cold S3
(`--cold`: a second shardgate, A, verifying SigV4). Real clients: boto3 1.43
(client and resource API), Debian's boto3 1.26 and aws-cli v1 / v2 where
installed (a missing aws-cli is a skipped check, not a skipped file).
  * bucket names: InvalidBucketName (400) for every rule, on CreateBucket and
    on requests naming such a bucket; the longest and odd-but-valid names work;
  * CreateBucket of a bucket you own: 200 in us-east-1 (objects kept), 409
    BucketAlreadyOwnedByYou in eu-west-1 (a gateway and its cold tier started
    with --region eu-west-1);
  * ListObjectVersions of the never-versioned buckets: every object as
    VersionId null / IsLatest, paged by key-marker (boto3's paginator too),
    prefix, delimiter, encoding-type=url; versionId=null on GET/HEAD/DELETE,
    any other versionId 400 InvalidArgument; GetBucketVersioning empty;
    PutBucketVersioning 501; boto3's `bucket.object_versions.delete()`;
  * ACLs as a bucket with BucketOwnerEnforced: private and
    bucket-owner-full-control accepted on PutObject, CopyObject,
    CreateMultipartUpload and CreateBucket, anything else refused (and nothing
    written); Get{Bucket,Object}Acl give the owner's FULL_CONTROL;
    Put{Bucket,Object}Acl accept only that;
  * the access log names the operations and their sub-resources.
Skips (77) when boto3 is missing."""

import atexit
import json
import os
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import cache_common as C  # noqa: E402
import store_common as SC  # noqa: E402

check, eq = H.check, H.eq
AWS2 = "/usr/bin/aws"
NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
STATE = {}


def err(fn, *a, **kw):
    code, status, _ = H.client_error(fn, *a, **kw)
    return (code, status)


def status(r):
    return r["ResponseMetadata"]["HTTPStatusCode"]


# ---------------------------------------------------------------- bucket names

BAD_NAMES = ["ab", "a" * 64, "Abc", "a_b", "-abc", "abc-", ".abc", "abc.", "a..b", "a.-b",
             "a-.b", "192.168.5.4", "xn--abc", "sthree-abc", "amzn-s3-demo-bucket",
             "abc-s3alias", "abc--ol-s3", "abc.mrap", "abc--x-s3"]


def bucket_names(m, c):
    for name in BAD_NAMES:
        eq("[%s] CreateBucket %r -> InvalidBucketName" % (m, name),
           err(c.create_bucket, Bucket=name), ("InvalidBucketName", 400))
    for what, fn in (("ListObjectsV2", lambda: c.list_objects_v2(Bucket="Bad_Name")),
                     ("PutObject", lambda: c.put_object(Bucket="a..b", Key="k", Body=b"x")),
                     ("GetObject", lambda: c.get_object(Bucket="xn--abc", Key="k")),
                     ("DeleteBucket", lambda: c.delete_bucket(Bucket="abc-s3alias")),
                     ("ListObjectVersions", lambda: c.list_object_versions(Bucket="ab")),
                     ("GetBucketAcl", lambda: c.get_bucket_acl(Bucket="192.168.5.4"))):
        eq("[%s] %s naming an invalid bucket -> InvalidBucketName" % (m, what), err(fn),
           ("InvalidBucketName", 400))
    # HEAD has no body: botocore reports the status as the code
    eq("[%s] HeadBucket of an invalid name -> 400" % m, err(c.head_bucket, Bucket="a.-b"),
       ("400", 400))
    for name in ("a" * 63, "1.2.3", "a-b--c.d", "x-s3"):
        ok = err(c.create_bucket, Bucket=name) == (None, None)
        check("[%s] valid name %r: create, put, delete" % (m, name),
              ok and err(c.put_object, Bucket=name, Key="k", Body=b"v") == (None, None)
              and err(c.delete_object, Bucket=name, Key="k") == (None, None)
              and err(c.delete_bucket, Bucket=name) == (None, None))
    names = [b["Name"] for b in c.list_buckets()["Buckets"]]
    check("[%s] no invalid bucket was made" % m, not set(BAD_NAMES) & set(names), names)


def recreate(m, c, b):
    c.put_object(Bucket=b, Key="keep", Body=b"kept")
    r = c.create_bucket(Bucket=b)
    eq("[%s] CreateBucket of a bucket you own, us-east-1 -> 200" % m, status(r), 200)
    eq("[%s] its objects are kept" % m, c.get_object(Bucket=b, Key="keep")["Body"].read(),
       b"kept")
    v1 = STATE.get("awscli_v1")
    if v1:
        rc, out, er = H.run_cmd([v1, "--endpoint-url", H.S.endpoint, "s3", "mb", "s3://" + b],
                                env=H.aws_env(), timeout=120)
        eq("[%s] aws-cli v1 s3 mb of an existing bucket succeeds" % m, (rc, er[-300:]),
           (0, ""))
    else:
        H.skip("[%s] aws-cli v1 s3 mb of an existing bucket" % m, "no aws-cli v1 on PATH")
    c.delete_object(Bucket=b, Key="keep")


def eu_client(endpoint):
    import boto3
    from botocore.config import Config
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, region_name="eu-west-1", aws_access_key_id=H.ACCESS_KEY,
        aws_secret_access_key=H.SECRET_KEY,
        config=Config(s3={"addressing_style": "path"}, signature_version="s3v4",
                      retries={"max_attempts": 1, "mode": "standard"}))


def recreate_eu(m, endpoint):
    c = eu_client(endpoint)
    cfg = {"LocationConstraint": "eu-west-1"}
    eq("[%s] eu-west-1: CreateBucket" % m,
       status(c.create_bucket(Bucket="eu-bucket", CreateBucketConfiguration=cfg)), 200)
    eq("[%s] eu-west-1: CreateBucket again -> 409 BucketAlreadyOwnedByYou" % m,
       err(c.create_bucket, Bucket="eu-bucket", CreateBucketConfiguration=cfg),
       ("BucketAlreadyOwnedByYou", 409))
    eq("[%s] eu-west-1: the same bucket rules" % m,
       err(c.create_bucket, Bucket="eu..bucket", CreateBucketConfiguration=cfg),
       ("InvalidBucketName", 400))


# ---------------------------------------------------------------- versions

KEYS = ["a/1", "a/2", "b", "c/x/y", "d e", "\u00e9t\u00e9"]


def versions(m, c, b):
    for k in KEYS:
        c.put_object(Bucket=b, Key=k, Body=k.encode())
    r = c.list_object_versions(Bucket=b)
    vs = r.get("Versions", [])
    eq("[%s] ListObjectVersions: every object once, in key order" % m,
       [v["Key"] for v in vs], KEYS)
    check("[%s] each VersionId null, IsLatest, with ETag, Size and Owner" % m,
          vs and all(v["VersionId"] == "null" and v["IsLatest"] is True and
                     v["Size"] == len(v["Key"].encode()) and v["ETag"].startswith('"') and
                     v["Owner"]["ID"] for v in vs), vs)
    eq("[%s] no DeleteMarkers, not truncated" % m,
       (r.get("DeleteMarkers"), r["IsTruncated"]), (None, False))
    # paging by hand: key-marker and version-id-marker as S3 hands them out
    got, kw = [], {}
    for _ in range(10):
        p = c.list_object_versions(Bucket=b, MaxKeys=2, **kw)
        got += [v["Key"] for v in p.get("Versions", [])]
        if not p["IsTruncated"]:
            break
        kw = {"KeyMarker": p["NextKeyMarker"], "VersionIdMarker": p["NextVersionIdMarker"]}
    eq("[%s] pages of 2 by NextKeyMarker / NextVersionIdMarker" % m, got, KEYS)
    pg = c.get_paginator("list_object_versions")
    got = [v["Key"] for page in pg.paginate(Bucket=b, PaginationConfig={"PageSize": 4})
           for v in page.get("Versions", [])]
    eq("[%s] boto3's paginator" % m, got, KEYS)
    r = c.list_object_versions(Bucket=b, Delimiter="/")
    eq("[%s] delimiter: versions and common prefixes" % m,
       ([v["Key"] for v in r.get("Versions", [])],
        [p["Prefix"] for p in r.get("CommonPrefixes", [])]), (["b", "d e", "\u00e9t\u00e9"],
                                                               ["a/", "c/"]))
    r = c.list_object_versions(Bucket=b, Delimiter="/", MaxKeys=1, KeyMarker="a/")
    eq("[%s] a key-marker that is a common prefix skips it" % m,
       ([v["Key"] for v in r.get("Versions", [])], r.get("NextKeyMarker")), (["b"], "b"))
    r = c.list_object_versions(Bucket=b, Prefix="a/")
    eq("[%s] prefix" % m, [v["Key"] for v in r.get("Versions", [])], ["a/1", "a/2"])
    # boto3 asks for encoding-type=url itself and decodes what it asked for
    # (every call above); asked for by the caller, the keys come as sent
    r = c.list_object_versions(Bucket=b, Prefix="d", EncodingType="url")
    eq("[%s] EncodingType=url from the caller: keys as S3 encodes them" % m,
       [v["Key"] for v in r["Versions"]], ["d%20e"])
    raw = H.raw("GET", "/" + b, query="versions&encoding-type=url&prefix=%C3%A9")
    eq("[%s] encoding-type=url on the wire" % m,
       (raw.status, b"<Key>%C3%A9t%C3%A9</Key>" in raw.body,
        b"<Prefix>%C3%A9</Prefix>" in raw.body), (200, True, True))
    eq("[%s] a version-id-marker without a key-marker" % m,
       err(c.list_object_versions, Bucket=b, VersionIdMarker="null"), ("InvalidArgument", 400))
    eq("[%s] ListObjectVersions of a missing bucket" % m,
       err(c.list_object_versions, Bucket="no-such-bucket-v"), ("NoSuchBucket", 404))
    # versionId=null is the one version; others do not exist here
    eq("[%s] GetObject VersionId=null" % m,
       c.get_object(Bucket=b, Key="b", VersionId="null")["Body"].read(), b"b")
    eq("[%s] HeadObject VersionId=null" % m,
       c.head_object(Bucket=b, Key="b", VersionId="null")["ContentLength"], 1)
    for op, fn in (("GetObject", c.get_object), ("DeleteObject", c.delete_object),
                   ("GetObjectTagging", c.get_object_tagging)):
        eq("[%s] %s with another VersionId -> InvalidArgument" % (m, op),
           err(fn, Bucket=b, Key="b", VersionId="3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY"),
           ("InvalidArgument", 400))
    eq("[%s] HeadObject with another VersionId -> 400" % m,
       err(c.head_object, Bucket=b, Key="b", VersionId="xyz"), ("400", 400))
    eq("[%s] DeleteObject VersionId=null" % m,
       status(c.delete_object(Bucket=b, Key="b", VersionId="null")), 204)
    eq("[%s] ... deletes the object" % m, err(c.head_object, Bucket=b, Key="b"), ("404", 404))
    r = c.get_bucket_versioning(Bucket=b)
    eq("[%s] GetBucketVersioning: never enabled" % m, (r.get("Status"), r.get("MFADelete")),
       (None, None))
    eq("[%s] PutBucketVersioning -> 501 NotImplemented" % m,
       err(c.put_bucket_versioning, Bucket=b, VersioningConfiguration={"Status": "Enabled"}),
       ("NotImplemented", 501))
    import boto3
    res = boto3.session.Session().resource(
        "s3", endpoint_url=H.S.endpoint, region_name=H.REGION, aws_access_key_id=H.ACCESS_KEY,
        aws_secret_access_key=H.SECRET_KEY)
    rb = res.Bucket(b)
    eq("[%s] resource API: bucket.object_versions.all()" % m,
       sorted((v.object_key, v.id) for v in rb.object_versions.all()),
       sorted((k, "null") for k in KEYS if k != "b"))
    rb.object_versions.delete()      # a cleanup script's way to empty a bucket
    eq("[%s] bucket.object_versions.delete() empties the bucket" % m,
       c.list_objects_v2(Bucket=b).get("KeyCount"), 0)


# ---------------------------------------------------------------- ACLs

def owner_grant(acl):
    g = acl.get("Grants", [])
    return (acl["Owner"]["ID"],
            [(x["Grantee"].get("Type"), x["Grantee"].get("ID"), x["Permission"]) for x in g])


def acls(m, c, b):
    owner = c.list_buckets()["Owner"]["ID"]
    want = (owner, [("CanonicalUser", owner, "FULL_CONTROL")])
    for acl in ("private", "bucket-owner-full-control"):
        eq("[%s] PutObject ACL=%s accepted" % (m, acl),
           status(c.put_object(Bucket=b, Key="acl-" + acl, Body=b"x", ACL=acl)), 200)
    c.put_object(Bucket=b, Key="obj", Body=b"original")
    for what, kw in (("ACL=public-read", {"ACL": "public-read"}),
                     ("ACL=authenticated-read", {"ACL": "authenticated-read"}),
                     ("GrantRead", {"GrantRead": 'uri="http://acs.amazonaws.com/groups/'
                                                 'global/AllUsers"'}),
                     ("GrantFullControl", {"GrantFullControl": 'id="%s"' % owner})):
        eq("[%s] PutObject %s -> AccessControlListNotSupported" % (m, what),
           err(c.put_object, Bucket=b, Key="obj", Body=b"replaced", **kw),
           ("AccessControlListNotSupported", 400))
    eq("[%s] the object is unchanged after the refusals" % m,
       c.get_object(Bucket=b, Key="obj")["Body"].read(), b"original")
    eq("[%s] CopyObject ACL=public-read -> AccessControlListNotSupported" % m,
       err(c.copy_object, Bucket=b, Key="copy", CopySource="%s/obj" % b, ACL="public-read"),
       ("AccessControlListNotSupported", 400))
    eq("[%s] CopyObject ACL=bucket-owner-full-control" % m,
       status(c.copy_object(Bucket=b, Key="copy", CopySource="%s/obj" % b,
                            ACL="bucket-owner-full-control")), 200)
    eq("[%s] CreateMultipartUpload ACL=public-read-write -> AccessControlListNotSupported" % m,
       err(c.create_multipart_upload, Bucket=b, Key="mp", ACL="public-read-write"),
       ("AccessControlListNotSupported", 400))
    up = c.create_multipart_upload(Bucket=b, Key="mp", ACL="private")
    c.abort_multipart_upload(Bucket=b, Key="mp", UploadId=up["UploadId"])
    check("[%s] CreateMultipartUpload ACL=private" % m, up.get("UploadId"))
    eq("[%s] CreateBucket ACL=public-read -> InvalidBucketAclWithObjectOwnership" % m,
       err(c.create_bucket, Bucket="acl-public", ACL="public-read"),
       ("InvalidBucketAclWithObjectOwnership", 400))
    eq("[%s] ... and no bucket" % m, err(c.head_bucket, Bucket="acl-public"), ("404", 404))
    eq("[%s] CreateBucket ACL=private" % m,
       status(c.create_bucket(Bucket="acl-private", ACL="private")), 200)
    c.delete_bucket(Bucket="acl-private")
    eq("[%s] GetBucketAcl: the owner's FULL_CONTROL" % m,
       owner_grant(c.get_bucket_acl(Bucket=b)), want)
    eq("[%s] GetObjectAcl: the owner's FULL_CONTROL" % m,
       owner_grant(c.get_object_acl(Bucket=b, Key="obj")), want)
    eq("[%s] GetObjectAcl of a missing key" % m,
       err(c.get_object_acl, Bucket=b, Key="missing"), ("NoSuchKey", 404))
    eq("[%s] GetBucketAcl of a missing bucket" % m,
       err(c.get_bucket_acl, Bucket="no-such-bucket-acl"), ("NoSuchBucket", 404))
    owner_policy = {"Owner": {"ID": owner}, "Grants": [
        {"Grantee": {"Type": "CanonicalUser", "ID": owner}, "Permission": "FULL_CONTROL"}]}
    public_policy = {"Owner": {"ID": owner}, "Grants": owner_policy["Grants"] + [
        {"Grantee": {"Type": "Group", "URI": "http://acs.amazonaws.com/groups/global/AllUsers"},
         "Permission": "READ"}]}
    for what, put in (("bucket", lambda **kw: c.put_bucket_acl(Bucket=b, **kw)),
                      ("object", lambda **kw: c.put_object_acl(Bucket=b, Key="obj", **kw))):
        eq("[%s] Put%sAcl ACL=private" % (m, what.title()), status(put(ACL="private")), 200)
        eq("[%s] Put%sAcl with the owner's FULL_CONTROL" % (m, what.title()),
           status(put(AccessControlPolicy=owner_policy)), 200)
        eq("[%s] Put%sAcl ACL=public-read -> AccessControlListNotSupported" % (m, what.title()),
           err(put, ACL="public-read"), ("AccessControlListNotSupported", 400))
        eq("[%s] Put%sAcl granting AllUsers READ -> AccessControlListNotSupported"
           % (m, what.title()), err(put, AccessControlPolicy=public_policy),
           ("AccessControlListNotSupported", 400))
    eq("[%s] the ACL still reads as the owner's FULL_CONTROL" % m,
       owner_grant(c.get_object_acl(Bucket=b, Key="obj")), want)
    r = H.raw("GET", "/%s" % b, query="acl")
    root = ET.fromstring(r.body)
    gt = root.find("%sAccessControlList/%sGrant/%sGrantee" % (NS, NS, NS))
    eq("[%s] the Grantee carries xsi:type=CanonicalUser" % m,
       gt.get("{http://www.w3.org/2001/XMLSchema-instance}type") if gt is not None else None,
       "CanonicalUser")
    aws_cli_acl(m, b)


def aws_cli_acl(m, b):
    if not os.path.exists(AWS2):
        H.skip("[%s] aws-cli v2 cp --acl public-read refused" % m, "no %s" % AWS2)
        return
    path = os.path.join(H.S.tmp, "acl-%s.txt" % m)
    with open(path, "wb") as f:
        f.write(b"cli")
    env2 = H.aws_env(v2=True)
    base = [AWS2, "--endpoint-url", H.S.endpoint]
    rc, out, er = H.run_cmd(base + ["s3", "cp", path, "s3://%s/cli" % b, "--acl", "public-read"],
                            env=env2, timeout=120)
    check("[%s] aws-cli v2 s3 cp --acl public-read fails with AccessControlListNotSupported"
          % m, rc != 0 and "AccessControlListNotSupported" in er, (rc, er[-400:]))
    rc, out, er = H.run_cmd(base + ["s3", "cp", path, "s3://%s/cli" % b, "--acl",
                                    "bucket-owner-full-control"], env=env2, timeout=120)
    eq("[%s] aws-cli v2 s3 cp --acl bucket-owner-full-control" % m, (rc, er[-300:]), (0, ""))
    rc, out, er = H.run_cmd(base + ["s3api", "get-bucket-acl", "--bucket", b], env=env2,
                            timeout=120)
    check("[%s] aws-cli v2 s3api get-bucket-acl" % m,
          rc == 0 and json.loads(out)["Grants"][0]["Permission"] == "FULL_CONTROL",
          (rc, out[-300:], er[-300:]))
    os.unlink(path)


DEBIAN_SCRIPT = r"""
import json, os, sys, boto3
sys.path.insert(0, os.environ["HERE"])
import harness
c = harness.boto3_client(endpoint=os.environ["EP"])
b = os.environ["B"]
c.put_object(Bucket=b, Key="deb", Body=b"d", ACL="private")
v = c.list_object_versions(Bucket=b)["Versions"]
a = c.get_bucket_acl(Bucket=b)["Grants"]
print(json.dumps([boto3.__version__, [(x["Key"], x["VersionId"]) for x in v],
                  [g["Permission"] for g in a]]))
"""


def debian_boto3(m, b):
    if not os.path.exists("/usr/bin/python3"):
        H.skip("[%s] Debian boto3 1.26 versions and ACL" % m, "no /usr/bin/python3")
        return
    c = H.boto3_client()
    c.create_bucket(Bucket=b)
    env = dict(os.environ, EP=H.S.endpoint, B=b, HERE=os.path.dirname(os.path.abspath(__file__)))
    rc, out, er = H.run_cmd(["/usr/bin/python3", "-c", DEBIAN_SCRIPT], env=env, timeout=120)
    got = json.loads(out) if rc == 0 and out.strip() else None
    check("[%s] Debian boto3 1.26: put with ACL=private, list_object_versions, get_bucket_acl"
          % m, got and got[0].startswith("1.26") and got[1] == [["deb", "null"]]
          and got[2] == ["FULL_CONTROL"], (rc, out, er[-800:]))


def access_log(m):
    lines = H.log_grep("access:", 100000)
    for op, sub in (("ListObjectVersions", "versions"), ("GetBucketAcl", "acl"),
                    ("PutObjectAcl", "acl")):
        check("[%s] the access log names %s and its sub-resource" % (m, op),
              any(("op=%s " % op) in l and ("subresource=%s" % sub) in l for l in lines),
              H.log_grep("op=%s" % op, 3))


def suite(m):
    c = H.boto3_client()
    bucket_names(m, c)
    c.create_bucket(Bucket="surface")
    recreate(m, c, "surface")
    versions(m, c, "surface")
    acls(m, c, "surface")
    debian_boto3(m, "surface-deb")
    access_log(m)


# ---------------------------------------------------------------- the modes

def local_store():
    H.start("test_s3_surface")
    # a directory whose name S3 refuses is not a bucket
    os.makedirs(os.path.join(H.S.data_dir, "sthree-data"))
    suite("local")
    names = [x["Name"] for x in H.boto3_client().list_buckets()["Buckets"]]
    check("[local] a directory with a reserved prefix is not listed", "sthree-data" not in names,
          names)
    H._stop_gateway(report=True)
    d = tempfile.mkdtemp(prefix="sg-eu-", dir=H.S.tmp)
    g = SC.Gw("eu-local", ["--data", d, "--region", "eu-west-1"])
    if g.start():
        recreate_eu("local", g.endpoint)
    eq("[local] eu-west-1 gateway exits 0", g.stop(), 0)


def cache_mode():
    a = C.ColdGateway().start()
    C.start_cache(C.Cache(a.endpoint, a.access, a.secret, tag="surface"))
    suite("cache")
    eq("[cache] the cold tier holds the same buckets",
       sorted(x["Name"] for x in a.client().list_buckets()["Buckets"]),
       sorted(x["Name"] for x in H.boto3_client().list_buckets()["Buckets"]))
    C.stop_cache()
    # a cold tier and a gateway in eu-west-1: the cold tier's 409 passes
    ad = tempfile.mkdtemp(prefix="sg-eu-cold-", dir=H.S.tmp)
    cold = SC.Gw("eu-cold", ["--data", ad, "--region", "eu-west-1"])
    cache_dir = tempfile.mkdtemp(prefix="sg-eu-cache-", dir=H.S.tmp)
    if cold.start():
        b = SC.Gw("eu-cache", ["--cold", cold.endpoint, "--cache-dir", cache_dir,
                               "--region", "eu-west-1"],
                  env={"AWS_ACCESS_KEY_ID": H.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": H.SECRET_KEY,
                       "AWS_REGION": "eu-west-1"})
        if b.start():
            recreate_eu("cache", b.endpoint)
        eq("[cache] eu-west-1 gateway exits 0", b.stop(), 0)
    eq("[cache] eu-west-1 cold tier exits 0", cold.stop(), 0)


def main():
    C.need_clients()
    C.init("test_s3_surface")
    STATE["awscli_v1"] = H.awscli_v1()
    atexit.register(C.stop_all)
    local_store()
    H.S.log_file.close()        # the cache mode's gateway logs into a file of its own
    H.S.log_file = None
    cache_mode()


H.run(main)
