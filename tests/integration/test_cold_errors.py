"""tests/integration/test_cold_errors.py - errors from the cold tier keep
their meaning (issue 12): the cache mode passes a cold tier's refusal to the
client with its own code, status and message, and does not turn a server
error of a call it must not repeat into a 503.
  1. moto as the cold tier. An object stored there in GLACIER: GET through
     the gateway (a fill, on a worker thread) is 403 InvalidObjectState with
     moto's message, twice (nothing is cached); CopyObject from it (a call on
     the request's thread) is 403 ObjectNotInActiveTierError; boto3 and curl
     --aws-sigv4 see the same; a STANDARD object beside it is served.
  2. fake_tier answering every request with one error:
     * 500 InternalError: CreateMultipartUpload (POST, not idempotent) is 500
       InternalError with the tier's message, sent to the tier exactly once;
       a GET (idempotent) is retried and ends 503 ServiceUnavailable naming
       the cold tier, as before;
     * 501 NotImplemented: passed as 501 NotImplemented, not retried;
     * 400 with a code we have no name for (InvalidStorageClass) on a PUT
       (the tier answers other calls 200): 400 InvalidStorageClass.
Before this change each of these was 500 InternalError, 403 AccessDenied or
503 ServiceUnavailable ("the cold tier is unavailable")."""

import atexit
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cache_common as C  # noqa: E402
import fake_tier  # noqa: E402
import harness as H  # noqa: E402

check, eq = H.check, H.eq
BKT = "errs"
MOTO_GLACIER_MSG = "The operation is not valid for the object's storage class"


def boto_err(fn, **kw):
    """(HTTP status, code, message) of a boto3 call expected to fail."""
    from botocore.exceptions import ClientError
    try:
        fn(**kw)
    except ClientError as e:
        err = e.response.get("Error", {})
        return (e.response.get("ResponseMetadata", {}).get("HTTPStatusCode"),
                err.get("Code"), err.get("Message"))
    return (None, None, None)


def code_of(r):
    e = r.error() if r is not None and r.body else None
    return (r.status if r is not None else None, (e or {}).get("Code"),
            (e or {}).get("Message"))


def glacier_through_moto():
    moto = C.Moto().start()
    mc = moto.client()
    mc.create_bucket(Bucket=BKT)
    mc.put_object(Bucket=BKT, Key="frozen", Body=b"cold bytes", StorageClass="GLACIER")
    mc.put_object(Bucket=BKT, Key="warm", Body=b"warm bytes")
    C.start_cache(C.Cache(moto.endpoint, moto.access, moto.secret, tag="moto"))
    c = H.boto3_client()
    for i in (1, 2):
        eq("[moto] GET of a GLACIER object, try %d: moto's 403 InvalidObjectState" % i,
           boto_err(c.get_object, Bucket=BKT, Key="frozen"),
           (403, "InvalidObjectState", MOTO_GLACIER_MSG))
    st, code, _ = boto_err(c.copy_object, Bucket=BKT, Key="copy",
                           CopySource={"Bucket": BKT, "Key": "frozen"})
    eq("[moto] CopyObject from a GLACIER object: 403 ObjectNotInActiveTierError",
       (st, code), (403, "ObjectNotInActiveTierError"))
    eq("[moto] the STANDARD object beside it is served",
       c.get_object(Bucket=BKT, Key="warm")["Body"].read(), b"warm bytes")
    # curl --aws-sigv4, a client that is not botocore
    out = subprocess.run(
        ["curl", "-s", "-o", "-", "-w", "\n%{http_code}", "--aws-sigv4", "aws:amz:us-east-1:s3",
         "--user", "%s:%s" % (H.ACCESS_KEY, H.SECRET_KEY),
         "-H", "x-amz-content-sha256: %s" % H.sha256(b""),
         "%s/%s/frozen" % (H.S.endpoint, BKT)], capture_output=True, text=True, timeout=60)
    body, _, status = out.stdout.rpartition("\n")
    check("[moto] curl --aws-sigv4 GET: 403 with <Code>InvalidObjectState</Code>",
          status == "403" and "<Code>InvalidObjectState</Code>" in body, out.stdout[-400:])
    # the fill of "warm" publishes after its last byte reached the client:
    # counted once no fill runs (a loaded run read 0 here, before the publish)
    check("[moto] the fills settle", C.settled(), C.bstats())
    eq("[moto] nothing of the refused object is cached",
       C.metric_sum(C.bm(), "shardgate_cache_objects") or 0.0, 1.0)
    C.stop_cache()
    moto.stop()


def fake_errors():
    tier = fake_tier.FakeTier("error", error=(500, "InternalError", "tier says boom"))
    try:
        C.start_cache(C.Cache(tier.url, "k", "s", tag="fake"))
        posts = tier.count_of("POST")
        r = C.request(H.S.port, "POST", "/%s/ckpt?uploads" % BKT)
        eq("[500] CreateMultipartUpload: the tier's 500 InternalError and message",
           code_of(r), (500, "InternalError", "tier says boom"))
        eq("[500] ... sent to the tier once (not repeated)", tier.count_of("POST") - posts, 1)

        gets = tier.count_of("GET")
        r = C.request(H.S.port, "GET", "/%s/obj" % BKT)
        st, code, msg = code_of(r)
        check("[500] GET (idempotent): retried, then 503 ServiceUnavailable naming the tier",
              (st, code) == (503, "ServiceUnavailable") and tier.url in (msg or ""),
              "%r" % ((st, code, msg),))
        check("[500] ... the GET was sent more than once",
              tier.count_of("GET") - gets >= 2, "%d" % (tier.count_of("GET") - gets))

        tier.set_mode("error", (501, "NotImplemented", "not here"))
        gets = tier.count_of("GET")
        r = C.request(H.S.port, "GET", "/%s/other" % BKT)
        eq("[501] GET: the tier's 501 NotImplemented", code_of(r),
           (501, "NotImplemented", "not here"))
        eq("[501] ... not retried", tier.count_of("GET") - gets, 1)

        # only the PUT itself is refused (the bucket's HEAD before it is 200)
        tier.set_mode("error", (400, "InvalidStorageClass",
                                "The storage class you specified is not valid"),
                      methods={"PUT"})
        r = C.request(H.S.port, "PUT", "/%s/put" % BKT, body=b"x" * 1000)
        eq("[400] PUT: the tier's 400 InvalidStorageClass", code_of(r),
           (400, "InvalidStorageClass", "The storage class you specified is not valid"))
        C.stop_cache()
    finally:
        tier.stop()


def main():
    C.init("cold_errors")
    atexit.register(C.stop_all)
    C.need_clients(moto=True)
    if not C.have_moto():
        H.skip_file("needs moto")
    glacier_through_moto()
    fake_errors()


if __name__ == "__main__":
    H.run(main)
