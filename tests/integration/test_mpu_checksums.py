"""tests/integration/test_mpu_checksums.py - multipart uploads with additional
checksums, as boto3 1.43 sends them by default: ChecksumAlgorithm on
CreateMultipartUpload, x-amz-checksum-<algo> on each UploadPart, Checksum<ALGO>
per part in CompleteMultipartUpload. The object's COMPOSITE checksum is
computed here independently (checksum of the concatenated raw part digests,
base64, "-N") and must be what Complete answers and what HeadObject /
GetObject return with ChecksumMode=ENABLED (a ranged GET returns none).
Also: a part made by UploadPartCopy carries the checksum of the copied
bytes (CRC32 and SHA256), a wrong part checksum in Complete is InvalidPart, a
part without the declared checksum is InvalidRequest, FULL_OBJECT CRC32, and a managed
upload_file / download_file of 40 MiB with boto3's default checksums.
Skips (77) when boto3 is missing or too old to send checksums."""

import base64
import hashlib
import os
import struct
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

try:
    import boto3
except ImportError:
    H.skip_file("boto3 is not installed for %s" % sys.executable)

if tuple(int(x) for x in boto3.__version__.split(".")[:2]) < (1, 36):
    H.skip_file("boto3 %s predates default checksums" % boto3.__version__)

MB = 1024 * 1024


def b64(raw):
    return base64.b64encode(raw).decode()


def crc32_raw(data):
    return struct.pack(">I", zlib.crc32(data) & 0xFFFFFFFF)


def composite(raw_digests, combine):
    return "%s-%d" % (b64(combine(b"".join(raw_digests))), len(raw_digests))


def blobs_for_test():
    return [os.urandom(5 * MB), os.urandom(5 * MB), os.urandom(1024)]


def upload(c, b, key, blobs, algo, **create_kw):
    uid = c.create_multipart_upload(Bucket=b, Key=key, ChecksumAlgorithm=algo,
                                    **create_kw)["UploadId"]
    parts = []
    for i, blob in enumerate(blobs):
        r = c.upload_part(Bucket=b, Key=key, UploadId=uid, PartNumber=i + 1, Body=blob,
                          ChecksumAlgorithm=algo)
        parts.append({"PartNumber": i + 1, "ETag": r["ETag"],
                      "Checksum" + algo: r.get("Checksum" + algo)})
    return uid, parts


def t_crc32_composite(c, b):
    blobs = blobs_for_test()
    key = "ck/crc32"
    cr = c.create_multipart_upload(Bucket=b, Key=key, ChecksumAlgorithm="CRC32")
    uid = cr["UploadId"]
    H.eq("Create answers ChecksumAlgorithm", cr.get("ChecksumAlgorithm"), "CRC32")
    H.eq("Create answers ChecksumType COMPOSITE", cr.get("ChecksumType"), "COMPOSITE")
    parts = []
    for i, blob in enumerate(blobs):
        r = c.upload_part(Bucket=b, Key=key, UploadId=uid, PartNumber=i + 1, Body=blob,
                          ChecksumAlgorithm="CRC32")
        H.eq("UploadPart %d echoes its CRC32" % (i + 1), r.get("ChecksumCRC32"),
             b64(crc32_raw(blob)))
        parts.append({"PartNumber": i + 1, "ETag": r["ETag"], "ChecksumCRC32": r["ChecksumCRC32"]})
    lp = c.list_parts(Bucket=b, Key=key, UploadId=uid)
    H.eq("ListParts returns each part's ChecksumCRC32",
         [p.get("ChecksumCRC32") for p in lp.get("Parts", [])],
         [p["ChecksumCRC32"] for p in parts])
    H.eq("ListParts returns the upload's ChecksumAlgorithm",
         (lp.get("ChecksumAlgorithm"), lp.get("ChecksumType")), ("CRC32", "COMPOSITE"))

    # a wrong part checksum: InvalidPart, and the upload is still there
    bad = [dict(p) for p in parts]
    bad[1]["ChecksumCRC32"] = b64(crc32_raw(b"not the part"))
    code, status, _ = H.client_error(c.complete_multipart_upload, Bucket=b, Key=key,
                                     UploadId=uid, MultipartUpload={"Parts": bad})
    H.eq("Complete with a wrong ChecksumCRC32 is InvalidPart", (code, status),
         ("InvalidPart", 400))

    want = composite([crc32_raw(x) for x in blobs], crc32_raw)
    r = c.complete_multipart_upload(Bucket=b, Key=key, UploadId=uid,
                                    MultipartUpload={"Parts": parts})
    H.eq("Complete answers the composite CRC32 (-3)", r.get("ChecksumCRC32"), want)
    H.eq("Complete answers ChecksumType COMPOSITE", r.get("ChecksumType"), "COMPOSITE")
    h = c.head_object(Bucket=b, Key=key, ChecksumMode="ENABLED")
    H.eq("HeadObject ChecksumMode=ENABLED returns it", h.get("ChecksumCRC32"), want)
    H.eq("HeadObject returns ChecksumType", h.get("ChecksumType"), "COMPOSITE")
    h = c.head_object(Bucket=b, Key=key)
    H.eq("HeadObject without ChecksumMode returns no checksum", h.get("ChecksumCRC32"), None)
    g = c.get_object(Bucket=b, Key=key, ChecksumMode="ENABLED")
    body = g["Body"].read()
    H.eq("GetObject ChecksumMode=ENABLED returns it", g.get("ChecksumCRC32"), want)
    H.check("GetObject bytes", body == b"".join(blobs))
    g = c.get_object(Bucket=b, Key=key, ChecksumMode="ENABLED", Range="bytes=0-99")
    g["Body"].read()
    H.eq("ranged GetObject returns no checksum", g.get("ChecksumCRC32"), None)
    H.check("no upload left", not c.list_multipart_uploads(Bucket=b).get("Uploads"))


def t_part_copy_checksums(c, b):
    """UploadPartCopy into an upload with a checksum algorithm: the part gets
    the checksum of the copied bytes (CopyPartResult, ListParts), and the
    object's composite checksum counts it like an uploaded part's."""
    src = os.urandom(6 * MB)
    small = os.urandom(3000)
    c.put_object(Bucket=b, Key="ck/src", Body=src)
    c.put_object(Bucket=b, Key="ck/small", Body=small)
    for algo, raw in (("CRC32", crc32_raw), ("SHA256", lambda d: hashlib.sha256(d).digest())):
        key = "ck/copied-" + algo.lower()
        uid = c.create_multipart_upload(Bucket=b, Key=key, ChecksumAlgorithm=algo)["UploadId"]
        r1 = c.upload_part_copy(Bucket=b, Key=key, UploadId=uid, PartNumber=1,
                                CopySource={"Bucket": b, "Key": "ck/src"},
                                CopySourceRange="bytes=0-%d" % (5 * MB - 1))["CopyPartResult"]
        mid = os.urandom(5 * MB)
        r2 = c.upload_part(Bucket=b, Key=key, UploadId=uid, PartNumber=2, Body=mid,
                           ChecksumAlgorithm=algo)
        r3 = c.upload_part_copy(Bucket=b, Key=key, UploadId=uid, PartNumber=3,
                                CopySource={"Bucket": b, "Key": "ck/small"})["CopyPartResult"]
        datas = [src[:5 * MB], mid, small]
        H.eq("[%s] UploadPartCopy answers the copied bytes' Checksum%s (a range, a whole "
             "object)" % (algo, algo),
             (r1.get("Checksum" + algo), r3.get("Checksum" + algo)),
             (b64(raw(datas[0])), b64(raw(datas[2]))))
        lp = c.list_parts(Bucket=b, Key=key, UploadId=uid)
        H.eq("[%s] ListParts has the copied parts' checksums" % algo,
             [p.get("Checksum" + algo) for p in lp.get("Parts", [])],
             [b64(raw(d)) for d in datas])
        parts = [{"PartNumber": 1, "ETag": r1["ETag"]},
                 {"PartNumber": 2, "ETag": r2["ETag"], "Checksum" + algo: r2["Checksum" + algo]},
                 {"PartNumber": 3, "ETag": r3["ETag"], "Checksum" + algo: r3["Checksum" + algo]}]
        want = composite([raw(d) for d in datas], raw)
        r = c.complete_multipart_upload(Bucket=b, Key=key, UploadId=uid,
                                        MultipartUpload={"Parts": parts})
        H.eq("[%s] Complete answers the composite checksum over copied and uploaded parts"
             % algo, r.get("Checksum" + algo), want)
        h = c.head_object(Bucket=b, Key=key, ChecksumMode="ENABLED")
        H.eq("[%s] HeadObject ChecksumMode=ENABLED returns it" % algo,
             h.get("Checksum" + algo), want)


def t_complete_without_part_checksums(c, b):
    blobs = blobs_for_test()
    uid, parts = upload(c, b, "ck/implicit", blobs, "CRC32")
    bare = [{"PartNumber": p["PartNumber"], "ETag": p["ETag"]} for p in parts]
    r = c.complete_multipart_upload(Bucket=b, Key="ck/implicit", UploadId=uid,
                                    MultipartUpload={"Parts": bare})
    H.eq("Complete without part checksums uses the stored ones", r.get("ChecksumCRC32"),
         composite([crc32_raw(x) for x in blobs], crc32_raw))


def t_sha256_composite(c, b):
    blobs = blobs_for_test()
    uid, parts = upload(c, b, "ck/sha256", blobs, "SHA256")
    H.eq("UploadPart SHA256 values", [p["ChecksumSHA256"] for p in parts],
         [b64(hashlib.sha256(x).digest()) for x in blobs])
    r = c.complete_multipart_upload(Bucket=b, Key="ck/sha256", UploadId=uid,
                                    MultipartUpload={"Parts": parts})
    want = composite([hashlib.sha256(x).digest() for x in blobs],
                     lambda d: hashlib.sha256(d).digest())
    H.eq("Complete answers the composite SHA256", r.get("ChecksumSHA256"), want)
    h = c.head_object(Bucket=b, Key="ck/sha256", ChecksumMode="ENABLED")
    H.eq("HeadObject returns the composite SHA256", h.get("ChecksumSHA256"), want)


def t_full_object_crc32(c, b):
    blobs = blobs_for_test()
    uid, parts = upload(c, b, "ck/full", blobs, "CRC32", ChecksumType="FULL_OBJECT")
    r = c.complete_multipart_upload(Bucket=b, Key="ck/full", UploadId=uid,
                                    MultipartUpload={"Parts": parts})
    want = b64(crc32_raw(b"".join(blobs)))
    H.eq("FULL_OBJECT: Complete answers the CRC32 of the whole object",
         (r.get("ChecksumCRC32"), r.get("ChecksumType")), (want, "FULL_OBJECT"))


def t_part_rules(c, b):
    key = "ck/rules"
    uid = c.create_multipart_upload(Bucket=b, Key=key, ChecksumAlgorithm="CRC32")["UploadId"]
    code, status, _ = H.client_error(c.upload_part, Bucket=b, Key=key, UploadId=uid,
                                     PartNumber=1, Body=b"x" * 1024, ChecksumAlgorithm="SHA256")
    H.eq("UploadPart with another algorithm is InvalidRequest", (code, status),
         ("InvalidRequest", 400))
    H.eq("the refused part was not stored",
         c.list_parts(Bucket=b, Key=key, UploadId=uid).get("Parts", []), [])
    c.abort_multipart_upload(Bucket=b, Key=key, UploadId=uid)
    code, status, _ = H.client_error(c.create_multipart_upload, Bucket=b, Key=key,
                                     ChecksumAlgorithm="SHA256", ChecksumType="FULL_OBJECT")
    H.eq("Create SHA256 FULL_OBJECT is InvalidRequest", (code, status), ("InvalidRequest", 400))


def t_part_without_checksum(b):
    # boto3 always adds a checksum; a raw request can leave it out
    key = "ck/nochecksum"
    c = H.boto3_client()
    uid = c.create_multipart_upload(Bucket=b, Key=key, ChecksumAlgorithm="CRC32")["UploadId"]
    r = H.raw("PUT", "/%s/%s" % (b, key), query="partNumber=1&uploadId=%s" % uid,
              body=b"y" * 1024)
    H.eq("UploadPart without the declared checksum is 400 InvalidRequest",
         (r.status, (r.error() or {}).get("Code")), (400, "InvalidRequest"))
    c.abort_multipart_upload(Bucket=b, Key=key, UploadId=uid)


def t_managed_transfer(c, b):
    from boto3.s3.transfer import TransferConfig
    d = H.tmpdir("mpuck")
    up = os.path.join(d, "up.bin")
    down = os.path.join(d, "down.bin")
    H.write_random_file(up, 40 * MB)
    cfg = TransferConfig(multipart_threshold=8 * MB, multipart_chunksize=8 * MB,
                         max_concurrency=4)
    c.upload_file(up, b, "ck/managed", Config=cfg)
    c.download_file(b, "ck/managed", down, Config=cfg)
    H.eq("upload_file / download_file 40 MiB round trip", H.sha256_file(down),
         H.sha256_file(up))
    h = c.head_object(Bucket=b, Key="ck/managed", ChecksumMode="ENABLED")
    vals = [v for k, v in h.items() if k.startswith("Checksum") and k != "ChecksumType"]
    H.check("managed upload: HeadObject returns a -N checksum",
            len(vals) == 1 and str(vals[0]).endswith("-5"), repr(h))


def main():
    H.start("test_mpu_checksums")
    c = H.boto3_client()
    b = "mpu-checksums"
    c.create_bucket(Bucket=b)
    t_crc32_composite(c, b)
    t_complete_without_part_checksums(c, b)
    t_part_copy_checksums(c, b)
    t_sha256_composite(c, b)
    t_full_object_crc32(c, b)
    t_part_rules(c, b)
    if H.shardgate_only("UploadPart without checksum"):
        t_part_without_checksum(b)
    t_managed_transfer(c, b)


H.run(main)
