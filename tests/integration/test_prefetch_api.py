"""tests/integration/test_prefetch_api.py - the prefetch hint API
(cache/HINTS.md) end to end over signed HTTP, against a caching shardgate B
whose cold tier is moto behind a throttling proxy (throttle.py, unlimited
except for the cancel check):

  * a template hint over 30 small tar-like shards finishes (state done,
    staged 30, counters consistent at every poll, staged / bytes.done never
    decreasing); reading the 30 shards afterwards costs B no cold-tier GET
    (shardgate_backend_requests_total{op="get"}), counts 30 hits and returns
    exactly moto's bytes;
  * a second hint on the same keys reports them cached and stages nothing;
  * a hint with missing keys stages the rest and lists the missing ones in
    "errors" with code NoSuchKey;
  * a prefix hint stages exactly the keys under the prefix;
  * GET ?prefetch lists the jobs newest first; unknown job -> 404 NoSuchJob;
  * malformed hints -> 400 InvalidArgument with a message naming the problem
    and no fill started;
  * a user without read permission on the bucket -> 403, a reader may hint;
  * DELETE ?prefetch&job=ID on a job staging 40 x 1 MiB through a 4 MB/s
    cold tier stops cold-tier traffic: no new GET after ~1 s, state cancelled.

Exits 77 when moto or boto3 is not importable."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import cache_common as C  # noqa: E402
import prefetch_common as P  # noqa: E402

check, eq = H.check, H.eq
BUCKET = "train-data"
BIG = "big-data"
N = 30
KEYS = ["train/shard-%06d.tar" % i for i in range(N)]
TEMPLATE = "train/shard-{000000..000029}.tar"
EXTRA = ["extra/e%d.tar" % i for i in range(5)]
MISSING = ["extra/missing-%d.tar" % i for i in range(3)]
PFX = ["pfx/p%d.tar" % i for i in range(7)]
DECOY = "pfxnot/x.tar"
NBIG = 40
BIG_KEYS = ["big/b%02d.bin" % i for i in range(NBIG)]

USERS = {
    "reader": ("SGPFREADER00000001", "pf/reader/secret+0001", {"*": "read"}),
    "outsider": ("SGPFOUTSIDER000001", "pf/outsider/secret+01", {"other": "read",
                                                                  BUCKET: "none"}),
}


def config():
    users = [{"name": "root", "access_key": "ROOT-FROM-FILE", "secret_key": "replaced-by-env",
              "permissions": {"*": "admin"}}]
    for name, (ak, sk, perms) in USERS.items():
        users.append({"name": name, "access_key": ak, "secret_key": sk, "permissions": perms})
    return {"users": users}


def sha_from_moto(mc, bucket, key):
    return H.sha256(mc.get_object(Bucket=bucket, Key=key)["Body"].read())


def load_moto(mc):
    sizes = {}
    mc.create_bucket(Bucket=BUCKET)
    mc.create_bucket(Bucket=BIG)
    for i, k in enumerate(KEYS):
        data = P.make_shard(i, 64 * 1024 + (i * 6151) % (192 * 1024))
        mc.put_object(Bucket=BUCKET, Key=k, Body=data)
        sizes[k] = len(data)
    for i, k in enumerate(EXTRA + PFX + [DECOY]):
        data = P.make_shard(100 + i, 70 * 1024)
        mc.put_object(Bucket=BUCKET, Key=k, Body=data)
        sizes[k] = len(data)
    blob = os.urandom(H.MB)
    for k in BIG_KEYS:
        mc.put_object(Bucket=BIG, Key=k, Body=k.encode() + blob[len(k):])
    return sizes


def read_all(c, bucket, keys):
    """{key: sha256} read through B with boto3."""
    return {k: H.sha256(c.get_object(Bucket=bucket, Key=k)["Body"].read()) for k in keys}


def submit(spec, tag, bucket=BUCKET):
    a = P.hint(bucket, spec)
    if not check("%s: POST ?prefetch -> 202 with a job id" % tag,
                 a.status == 202 and isinstance(a.json, dict) and a.json.get("job"), a):
        return None, a
    return a.json["job"], a


def template_hint(c, mc, sizes, ids):
    s0 = P.stats()
    jid, a = submit({"template": TEMPLATE}, "template")
    if not jid:
        H.finish()
    ids.append(jid)
    eq("template: answer objects/state/bucket",
       (a.json.get("objects"), a.json.get("state"), a.json.get("bucket")),
       (N, "queued", BUCKET))
    po = P.Poller(BUCKET, jid, "template")
    j = po.wait(60)
    po.check()
    eq("template: final state done", (j or {}).get("state"), "done")
    o = (j or {}).get("objects", {})
    eq("template: objects total/cached/staged/failed/pending",
       (o.get("total"), o.get("cached"), o.get("staged"), o.get("failed"), o.get("pending")),
       (N, 0, N, 0, 0))
    want_bytes = sum(sizes[k] for k in KEYS)
    eq("template: bytes total == done == the shards' sizes",
       ((j or {}).get("bytes", {}).get("total"), (j or {}).get("bytes", {}).get("done")),
       (want_bytes, want_bytes))
    eq("template: no errors, not ordered, ended set",
       ((j or {}).get("errors"), (j or {}).get("ordered"), bool((j or {}).get("ended"))),
       ([], False, True))
    s1 = P.stats()
    d = P.delta(s0, s1)
    eq("template: one fill and one cold GET per shard", (d["fills"], d["backend_get"]),
       (N, N))

    # read all N: zero cold-tier GETs, N hits, moto's bytes
    got = read_all(c, BUCKET, KEYS)
    s2 = P.stats()
    d = P.delta(s1, s2)
    eq("read after hint: zero backend GETs", d["backend_get"], 0)
    eq("read after hint: hits +N, misses +0", (d["hits"], d["misses"]), (N, 0))
    want = {k: sha_from_moto(mc, BUCKET, k) for k in KEYS}
    bad = [k for k in KEYS if got[k] != want[k]]
    check("read after hint: all %d bodies byte-identical to moto (sha256)" % N, not bad, bad)

    # the same keys again: all cached, nothing staged
    jid2, a = submit({"keys": KEYS, "consumer": "again", "ordered": True, "stage_ahead": 8},
                     "same keys")
    if jid2:
        ids.append(jid2)
        po = P.Poller(BUCKET, jid2, "same keys")
        j = po.wait(30)
        po.check()
        o = (j or {}).get("objects", {})
        eq("same keys: done, cached N, staged 0",
           ((j or {}).get("state"), o.get("cached"), o.get("staged"), o.get("failed")),
           ("done", N, 0, 0))
        eq("same keys: consumer and stage_ahead echoed",
           ((j or {}).get("consumer"), (j or {}).get("stage_ahead")), ("again", 8))
    d = P.delta(s2, P.stats())
    eq("same keys: no fill, no backend GET", (d["fills"], d["backend_get"]), (0, 0))


def missing_keys(ids):
    s0 = P.stats()
    jid, a = submit({"keys": EXTRA[:2] + MISSING + EXTRA[2:]}, "missing keys")
    if not jid:
        return
    ids.append(jid)
    po = P.Poller(BUCKET, jid, "missing keys")
    j = po.wait(30) or {}
    po.check()
    o = j.get("objects", {})
    check("missing keys: final state (done or failed)", j.get("state") in ("done", "failed"),
          j.get("state"))
    eq("missing keys: total/cached/staged/failed/pending",
       (o.get("total"), o.get("cached"), o.get("staged"), o.get("failed"), o.get("pending")),
       (8, 0, 5, 3, 0))
    errs = j.get("errors") or []
    eq("missing keys: errors name exactly the missing keys with NoSuchKey",
       sorted((e.get("key"), e.get("code")) for e in errs),
       sorted((k, "NoSuchKey") for k in MISSING))
    d = P.delta(s0, P.stats())
    eq("missing keys: 5 fills published", d["fills"] - d["fills_failed"], 5)
    c = H.boto3_client()
    s1 = P.stats()
    read_all(c, BUCKET, EXTRA)
    eq("missing keys: the 5 present ones are cached (no backend GET)",
       P.delta(s1, P.stats())["backend_get"], 0)


def prefix_hint(ids):
    jid, a = submit({"prefix": "pfx/"}, "prefix")
    if not jid:
        return
    ids.append(jid)
    eq("prefix: answer counts the keys under the prefix", a.json.get("objects"), len(PFX))
    po = P.Poller(BUCKET, jid, "prefix")
    j = po.wait(30) or {}
    po.check()
    o = j.get("objects", {})
    eq("prefix: done, staged 7", (j.get("state"), o.get("total"), o.get("staged")),
       ("done", 7, 7))
    c = H.boto3_client()
    s1 = P.stats()
    read_all(c, BUCKET, PFX)
    eq("prefix: reading the 7 costs no backend GET", P.delta(s1, P.stats())["backend_get"], 0)
    s2 = P.stats()
    c.get_object(Bucket=BUCKET, Key=DECOY)["Body"].read()
    eq("prefix: a key outside the prefix was not staged (1 backend GET)",
       P.delta(s2, P.stats())["backend_get"], 1)


def listing(ids):
    a = P.jobs(BUCKET)
    ok = check("GET ?prefetch -> 200 {jobs: [...]}", a.status == 200 and isinstance(a.json, dict)
               and isinstance(a.json.get("jobs"), list), a)
    if not ok:
        return
    listed = [j.get("job") for j in a.json["jobs"]]
    ours = [x for x in listed if x in ids]
    eq("GET ?prefetch lists every job, newest first", ours, list(reversed(ids)))
    bad = [j for j in a.json["jobs"] if P.counters_ok(j) or j.get("bucket") != BUCKET]
    check("GET ?prefetch: each listed job consistent and of this bucket", not bad, bad[:2])
    a = P.jobs(BIG)
    eq("GET ?prefetch on another bucket: no job of this one",
       [j.get("job") for j in (a.json or {}).get("jobs", []) if j.get("job") in ids], [])


def malformed():
    s0 = P.stats()
    n0 = len((P.jobs(BUCKET).json or {}).get("jobs", []))
    cases = [
        ("invalid JSON", b'{"keys": ["train/a.tar"', ["json"]),
        ("not an object", b'["train/a.tar"]', ["object"]),
        ("unknown field", {"keys": ["train/a.tar"], "bogus_field": 1}, ["bogus_field"]),
        ("wrong type", {"keys": "train/a.tar"}, ["keys"]),
        ("keys and prefix", {"keys": ["train/a.tar"], "prefix": "train/"}, ["keys", "prefix"]),
        ("none of keys/prefix/template", {"ordered": True}, ["keys"]),
        ("bad template {000..", {"template": "train/shard-{000..tar"}, ["template"]),
        ("template A > B", {"template": "s-{9..1}"}, ["template"]),
        ("window_bytes without ordered", {"keys": ["train/a.tar"], "window_bytes": 1048576},
         ["window_bytes"]),
        ("window_objects with ordered false", {"keys": ["a"], "ordered": False,
                                               "window_objects": 4}, ["window_objects"]),
        ("empty keys", {"keys": []}, ["keys"]),
        ("stage_ahead without ordered", {"keys": ["a"], "stage_ahead": 8}, ["stage_ahead"]),
        ("negative epoch", {"keys": ["a"], "epoch": -1}, ["epoch"]),
        ("key over 1024 bytes", {"keys": ["k" * 1025]}, ["key"]),
        ("empty body", b"", []),
    ]
    for name, spec, words in cases:
        a = P.hint(BUCKET, spec)
        msg = a.message()
        ok = a.status == 400 and a.code() == "InvalidArgument"
        check("malformed (%s): 400 InvalidArgument" % name, ok, a)
        if ok and words:
            check("malformed (%s): message names the problem %r" % (name, words),
                  all(w.lower() in msg.lower() for w in words), msg)
    d = P.delta(s0, P.stats())
    eq("malformed: no fill started, no backend GET", (d["fills"], d["backend_get"]), (0, 0))
    eq("malformed: no job created", len((P.jobs(BUCKET).json or {}).get("jobs", [])), n0)

    a = P.job(BUCKET, "0123456789abcdef")
    eq("unknown job: GET -> 404 NoSuchJob", (a.status, a.code()), (404, "NoSuchJob"))
    a = P.cancel(BUCKET, "0123456789abcdef")
    eq("unknown job: DELETE -> 404 NoSuchJob", (a.status, a.code()), (404, "NoSuchJob"))
    a = P.job(BUCKET, "no-such-job")
    eq("malformed job id: 404 NoSuchJob", (a.status, a.code()), (404, "NoSuchJob"))


def permissions(ids):
    s0 = P.stats()
    ak, sk, _ = USERS["outsider"]
    a = P.hint(BUCKET, {"keys": [DECOY]}, access=ak, secret=sk)
    eq("no read permission: POST ?prefetch -> 403 AccessDenied", (a.status, a.code()),
       (403, "AccessDenied"))
    a = P.jobs(BUCKET, access=ak, secret=sk)
    eq("no read permission: GET ?prefetch -> 403", a.status, 403)
    a = P.job(BUCKET, ids[0], access=ak, secret=sk)
    eq("no read permission: GET ?prefetch&job -> 403", a.status, 403)
    a = P.cancel(BUCKET, ids[0], access=ak, secret=sk)
    eq("no read permission: DELETE ?prefetch&job -> 403", a.status, 403)
    d = P.delta(s0, P.stats())
    eq("no read permission: nothing staged", (d["fills"], d["backend_get"]), (0, 0))
    ak, sk, _ = USERS["reader"]
    a = P.hint(BUCKET, {"keys": KEYS[:3]}, access=ak, secret=sk)
    check("read permission: POST ?prefetch -> 202", a.status == 202, a)
    if a.status == 202 and a.json:
        ids.append(a.json["job"])
        P.Poller(BUCKET, a.json["job"], "reader").wait(20)


def cancel_check(throttle, ids):
    throttle.set_rate(down_rate=4e6)
    s0 = P.stats()
    jid, a = submit({"template": "big/b{00..39}.bin"}, "cancel", bucket=BIG)
    if not jid:
        return
    # wait until it is staging (a few cold GETs done), then cancel
    ok = C.wait_until(lambda: P.stats()["backend_get"] - s0["backend_get"] >= 3, timeout=20)
    check("cancel: the job is staging through the throttled cold tier", ok)
    j_before = P.job(BIG, jid).json or {}
    t0 = time.time()
    a = P.cancel(BIG, jid)
    g0 = P.stats()["backend_get"]
    eq("cancel: DELETE -> 200 with state cancelled",
       (a.status, (a.json or {}).get("state")), (200, "cancelled"))
    time.sleep(max(0.0, 1.2 - (time.time() - t0)))
    g1 = P.stats()["backend_get"]
    time.sleep(3.0)
    s3 = P.stats()
    g2 = s3["backend_get"]
    check("cancel: at most the fills already starting add a GET (<= 4) after DELETE",
          g1 - g0 <= 4, "get count %d at DELETE, %d 1.2 s later" % (g0, g1))
    eq("cancel: cold-tier GET count stops growing within ~1 s", g2, g1)
    # 4 s after DELETE the fills that were running (<= 4 x 1 MiB at 4 MB/s) are over
    b1 = throttle.stats()["down"]
    time.sleep(1.5)
    b2 = throttle.stats()["down"]
    eq("cancel: no cold-tier bytes flow after the running fills end", b2 - b1, 0)
    j = P.job(BIG, jid).json or {}
    o = j.get("objects", {})
    eq("cancel: job stays cancelled", j.get("state"), "cancelled")
    check("cancel: staged far less than the 40 hinted",
          o.get("staged", 99) + o.get("cached", 0) <= NBIG - 20 and not P.counters_ok(j),
          "before cancel %r, now %r" % (j_before.get("objects"), o))
    print("# cancel: before DELETE %r; cold GETs: %d at DELETE, %d at +1.2 s, %d at +4.2 s; "
          "job now %r" % (j_before.get("objects"), g0 - s0["backend_get"],
                          g1 - s0["backend_get"], g2 - s0["backend_get"], o), flush=True)
    total_gets = g2 - s0["backend_get"]
    check("cancel: cold GETs == objects staged + failed (no fill left behind)",
          total_gets == o.get("staged", -1) + o.get("failed", 0),
          "gets %d, job %r" % (total_gets, o))
    a = P.cancel(BIG, jid)
    eq("cancel: DELETE again is idempotent (200, cancelled)",
       (a.status, (a.json or {}).get("state")), (200, "cancelled"))
    a = P.cancel(BUCKET, ids[0])
    eq("cancel: DELETE on a done job leaves it done (200)",
       (a.status, (a.json or {}).get("state")), (200, "done"))
    throttle.set_rate(down_rate=None)
    # the objects cancelled before staging are still readable (read-through)
    c = H.boto3_client()
    body = c.get_object(Bucket=BIG, Key=BIG_KEYS[-1])["Body"].read()
    eq("cancel: an unstaged object still reads through", body[:len(BIG_KEYS[-1])],
       BIG_KEYS[-1].encode())


def main():
    C.need_clients()
    if not C.have_moto():
        H.skip_file("needs moto (python3 -m moto.server)")
    C.init("test_prefetch_api")
    from throttle import ThrottleProcess
    moto = C.Moto().start()
    thr = ThrottleProcess("127.0.0.1", moto.port).start()
    try:
        mc = moto.client()
        sizes = load_moto(mc)
        cfg = C.Cache("http://127.0.0.1:%d" % thr.port, "moto", "moto", size="256MiB",
                      config=config(), tag="pf")
        C.start_cache(cfg)
        c = H.boto3_client()
        ids = []
        template_hint(c, mc, sizes, ids)
        missing_keys(ids)
        prefix_hint(ids)
        malformed()
        permissions(ids)
        listing(ids)
        cancel_check(thr, ids)
        C.stop_cache()
    finally:
        thr.stop()
        C.stop_all()


H.run(main)
