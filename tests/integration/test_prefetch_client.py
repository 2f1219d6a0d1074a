"""tests/integration/test_prefetch_client.py - the prefetch hint clients end to
end: `shardgate prefetch` / `shardgate jobs` (clients/cli/), the
Python helper clients/python/shardgate_prefetch.py and the example
clients/python/examples/train_loop.py, against a caching shardgate B
(--cold: shardgate A serving --data, --cache-dir) with 20 small WebDataset tar
shards in the cold tier (plus 20 more for the ordered-window checks).

Staging is proven on the cold tier itself: after a hint, reading the shards
through B costs A no GetObject (A's own /metrics).

Exits 77 (skip) ONLY when B answers 501 or 405 to POST ?prefetch, i.e. the
gateway in SHARDGATE_BIN has no server side for hints yet; it says so loudly.
Run with an ASan build as SHARDGATE_BIN to check the CLI under ASan too."""

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness as H  # noqa: E402

SRC = os.environ.get("SHARDGATE_SRC") or os.path.abspath(os.path.join(HERE, "..", ".."))
CLIENT_DIR = os.path.join(SRC, "clients", "python")
TRAIN_LOOP = os.path.join(CLIENT_DIR, "examples", "train_loop.py")
sys.path.insert(0, CLIENT_DIR)

check, eq = H.check, H.eq
COLD_ACCESS = "SGCOLDACCESSKEY00001"
COLD_SECRET = "cold/Secret+Key/abcdefghijklmnopqrstuvw"
BUCKET = "datasets"
N_SHARDS = 20
SAMPLES = 5                     # samples per shard, two files each
TRAIN = ["train/shard-%06d.tar" % i for i in range(N_SHARDS)]
VAL = ["val/shard-%06d.tar" % i for i in range(N_SHARDS)]
PROGRESS = re.compile(r"^objects (\d+)/(\d+) \(cached (\d+), staged (\d+), failed (\d+)\) "
                      r"bytes \S+ \S+/\S+ \S+")

_cold = {}


def clean_env():
    env = dict(os.environ)
    for k in list(env):
        if (k.startswith("SHARDGATE_") and k not in ("SHARDGATE_BIN", "SHARDGATE_SRC")) \
                or k.startswith("AWS_"):
            del env[k]
    return env


def make_shard(i):
    """A tar of SAMPLES samples (NNNNNN.cls + NNNNNN.bin); returns (bytes, payload bytes)."""
    buf = io.BytesIO()
    payload = 0
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for s in range(SAMPLES):
            base = "%06d" % (i * SAMPLES + s)
            for ext, data in (("cls", str((i + s) % 10).encode()),
                              ("bin", os.urandom(1000 + (i * 37 + s * 11) % 3000))):
                ti = tarfile.TarInfo("%s.%s" % (base, ext))
                ti.size = len(data)
                ti.mtime = 1700000000
                tf.addfile(ti, io.BytesIO(data))
                payload += len(data)
    return buf.getvalue(), payload


def start_cold(data):
    port = H._free_port()
    env = clean_env()
    env.update(SHARDGATE_ACCESS_KEY=COLD_ACCESS, SHARDGATE_SECRET_KEY=COLD_SECRET,
               SHARDGATE_LOG_LEVEL="info")
    log = open(os.path.join(H.S.tmp, "gateway-a.log"), "wb")
    p = subprocess.Popen([os.environ["SHARDGATE_BIN"], "serve", "--listen",
                          "127.0.0.1:%d" % port, "--data", data], stdout=log,
                         stderr=subprocess.STDOUT, env=env, cwd=H.S.tmp, stdin=subprocess.DEVNULL)
    _cold.update(proc=p, port=port, log=log)
    deadline = time.time() + 15
    while time.time() < deadline and p.poll() is None:
        if _port_open(port):
            return port
        time.sleep(0.1)
    check("cold shardgate A starts", False, "exit code %r" % p.poll())
    H.finish()


def _port_open(port):
    import socket
    try:
        socket.create_connection(("127.0.0.1", port), 0.5).close()
        return True
    except OSError:
        return False


def stop_cold():
    p = _cold.pop("proc", None)
    if p is None or p.poll() is not None:
        return
    p.terminate()
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(10)


def start_cache(cold_port):
    """Shardgate B: --cold A with a cache directory; the harness's gateway."""
    H.S.port = H._free_port()
    H.S.host = "127.0.0.1"
    H.S.endpoint = "http://127.0.0.1:%d" % H.S.port
    H.S.log_path = os.path.join(H.S.tmp, "gateway-b.log")
    H.S.log_file = open(H.S.log_path, "wb")
    cache_dir = tempfile.mkdtemp(prefix="sg-cache-", dir=H.S.tmp)
    env = clean_env()
    env.update(SHARDGATE_ACCESS_KEY=H.ACCESS_KEY, SHARDGATE_SECRET_KEY=H.SECRET_KEY,
               SHARDGATE_LOG_LEVEL="info", AWS_ACCESS_KEY_ID=COLD_ACCESS,
               AWS_SECRET_ACCESS_KEY=COLD_SECRET)
    H.S.proc = subprocess.Popen(
        [os.environ["SHARDGATE_BIN"], "serve", "--listen", "127.0.0.1:%d" % H.S.port,
         "--cold", "http://127.0.0.1:%d" % cold_port, "--cache-dir", cache_dir,
         "--cache-size", "256MiB"], stdout=H.S.log_file, stderr=subprocess.STDOUT, env=env,
        cwd=H.S.tmp, stdin=subprocess.DEVNULL)
    deadline = time.time() + 15
    while time.time() < deadline and H.health(1.0) != 200:
        if H.S.proc.poll() is not None:
            break
        time.sleep(0.1)
    if not check("caching gateway B answers health", H.health(1.0) == 200, H.log_tail(30)):
        H.finish()


def cold_gets():
    """GetObject requests cold shardgate A has answered (its /metrics)."""
    port = _cold["port"]
    url = "http://127.0.0.1:%d/metrics" % port
    import http.client
    hdrs = H.sign_headers("GET", url, access=COLD_ACCESS, secret=COLD_SECRET)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("GET", "/metrics", headers=hdrs)
        r = c.getresponse()
        body = r.read().decode("utf-8", "replace")
    finally:
        c.close()
    n = 0
    for m in re.finditer(r'^shardgate_requests_total\{[^}]*op="GetObject"[^}]*\} (\S+)$', body,
                         re.M):
        n += float(m.group(1))
    return n


def cli_env():
    env = clean_env()
    env.update(AWS_ACCESS_KEY_ID=H.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=H.SECRET_KEY)
    return env


def cli(*args, timeout=120):
    rc, out, err = H.run_cmd([os.environ["SHARDGATE_BIN"]] + list(args), env=cli_env(),
                             timeout=timeout)
    _sanitizer_check("shardgate %s" % " ".join(args[:1]), err)
    return rc, out, err


_san_seen = []


def fmt_bytes(v):
    """Sizes as the CLI prints them (clients/cli/progress.c cli_fmt_bytes)."""
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
    u = 0
    while v >= 1024.0 and u + 1 < len(units):
        v /= 1024.0
        u += 1
    return "%.0f B" % v if u == 0 else "%.1f %s" % (v, units[u])


def _sanitizer_check(what, err):
    if ("AddressSanitizer" in err or "LeakSanitizer" in err or "runtime error:" in err) \
            and what not in _san_seen:
        _san_seen.append(what)
        check("%s: no sanitizer report" % what, False, err[-1500:])


def read_all_through_b(keys):
    c = H.boto3_client()
    ok = True
    for k in keys:
        want = open(os.path.join(_cold["data"], BUCKET, *k.split("/")), "rb").read()
        ok = ok and c.get_object(Bucket=BUCKET, Key=k)["Body"].read() == want
    return ok


def probe():
    """501/405 to POST ?prefetch: no server side in this gateway: skip, loudly."""
    r = H.raw("POST", "/" + BUCKET, "prefetch", headers={"Content-Type": "application/json"},
              body=b'{"keys": []}')
    if r.status in (501, 405):
        print("#" * 78, flush=True)
        print("# SKIP test_prefetch_client: the gateway answers %d to POST /%s?prefetch:\n"
              "# the prefetch hint API (cache/HINTS.md) is not implemented in SHARDGATE_BIN.\n"
              "# NOTHING about the prefetch clients was checked end to end." %
              (r.status, BUCKET), flush=True)
        print("#" * 78, flush=True)
        stop_cold()
        H.skip_file("no prefetch hint API in the gateway (HTTP %d)" % r.status)
    eq("POST ?prefetch with an empty key list -> 400 InvalidArgument",
       (r.status, (r.error() or {}).get("Code")), (400, "InvalidArgument"))


# ---------------------------------------------------------------- the checks

def cli_checks(sizes):
    ep = H.S.endpoint
    rc, out, err = cli("prefetch")
    eq("CLI: prefetch without arguments -> exit 2", rc, 2)
    rc, out, err = cli("prefetch", "--endpoint", ep, "s3://%s/train/" % BUCKET, "--bogus")
    eq("CLI: unknown option -> exit 2", rc, 2)
    env = cli_env()
    del env["AWS_ACCESS_KEY_ID"]
    rc, out, err = H.run_cmd([os.environ["SHARDGATE_BIN"], "prefetch", "--endpoint", ep,
                              "s3://%s/train/" % BUCKET], env=env)
    check("CLI: no credentials -> exit 2 naming the variables",
          rc == 2 and "AWS_ACCESS_KEY_ID" in err, (rc, err))

    g0 = cold_gets()
    for bad in ("train/shard-{000000..000019.tar", "train/shard-{5..1}.tar",
                "train/shard-{}.tar", "train/{a{b}}.tar"):
        rc, out, err = cli("prefetch", "--endpoint", ep, "s3://%s/%s" % (BUCKET, bad))
        check("CLI: malformed template %r -> exit 3 with InvalidArgument and its message" % bad,
              rc == 3 and "InvalidArgument" in err and ": " in err.split("InvalidArgument", 1)[1],
              (rc, out, err))
    rc, out, err = cli("prefetch", "--endpoint", ep, "s3://%s/train/x.tar" % BUCKET,
                       "--window-objects", "4")
    check("CLI: --window-objects without --ordered -> exit 3 InvalidArgument",
          rc == 3 and "InvalidArgument" in err, (rc, out, err))
    rc, out, err = cli("jobs", "--endpoint", ep, "s3://%s" % BUCKET)
    check("CLI: refused hints leave no job", rc == 0 and "no prefetch jobs" in out,
          (rc, out, err))
    time.sleep(0.3)
    eq("refused hints staged nothing (no GetObject on the cold tier)", cold_gets() - g0, 0)

    # an unordered template hint, waited for: half of the shards
    rc, out, err = cli("prefetch", "--endpoint", ep,
                       "s3://%s/train/shard-{000000..000009}.tar" % BUCKET, "--wait",
                       "--epoch", "0", "--consumer", "cli")
    lines = out.splitlines()
    m = re.match(r"^job (\S+) (queued|running|done): 10 objects in %s$" % BUCKET,
                 lines[0] if lines else "")
    check("CLI --wait: exit 0", rc == 0, (rc, out, err))
    check("CLI --wait: first line names the job and its 10 objects", m, out)
    prog = [PROGRESS.match(l) for l in lines]
    prog = [p for p in prog if p]
    check("CLI --wait: plain progress lines (stdout is not a terminal)", prog and
          "\r" not in out, out)
    if prog:
        last = [int(x) for x in prog[-1].groups()]
        eq("CLI --wait: last progress line: 10/10, cached+staged 10, failed 0",
           (last[0], last[1], last[2] + last[3], last[4]), (10, 10, 10, 0))
    jid = m.group(1) if m else None
    check("CLI --wait: summary line says done",
          lines and re.match(r"^job %s done: 10 objects \(cached \d+, staged \d+, failed 0\), "
                             r"\S+ \S+ staged in [\d.]+ s$" % re.escape(jid or "?"), lines[-1]),
          out)
    g0 = cold_gets()
    check("shards hinted by the CLI read back right through B", read_all_through_b(TRAIN[:10]))
    eq("shards hinted by the CLI are staged: reading them costs the cold tier no GetObject",
       cold_gets() - g0, 0)

    rc, out, err = cli("jobs", "--endpoint", ep, "s3://%s" % BUCKET)
    check("CLI jobs: table with the job, done, epoch and consumer",
          rc == 0 and out.startswith("JOB") and jid and
          re.search(r"^%s\s+done\s+10\s" % re.escape(jid), out, re.M) and "cli" in out,
          (rc, out, err))
    rc, out, err = cli("jobs", "--endpoint", ep, "s3://%s" % BUCKET, "--job", jid or "x")
    check("CLI jobs --job: detail says done, 10 objects, epoch 0",
          rc == 0 and re.search(r"^state\s+done$", out, re.M) and
          re.search(r"^objects\s+10 ", out, re.M) and re.search(r"^epoch\s+0$", out, re.M),
          (rc, out, err))
    rc, out, err = cli("jobs", "--endpoint", ep, "s3://%s" % BUCKET, "--json")
    try:
        doc = json.loads(out)
    except ValueError:
        doc = None
    check("CLI jobs --json: the gateway's JSON with the job",
          rc == 0 and doc and [j.get("job") for j in doc.get("jobs", [])] == [jid],
          (rc, out, err))
    rc, out, err = cli("jobs", "--endpoint", ep, "s3://%s" % BUCKET, "--job", "nosuchjob0")
    check("CLI jobs --job unknown -> exit 3 NoSuchJob", rc == 3 and "NoSuchJob" in err,
          (rc, out, err))
    rc, out, err = cli("jobs", "--endpoint", ep, "s3://%s" % BUCKET, "--cancel", jid or "x")
    check("CLI jobs --cancel on a final job -> exit 0 (idempotent)",
          rc == 0 and jid and jid in out, (rc, out, err))

    return jid


def cli_prefix_checks():
    """Prefix hints (run last: they stage every shard)."""
    ep = H.S.endpoint
    rc, out, err = cli("prefetch", "--endpoint", ep, "s3://%s/train/" % BUCKET)
    check("CLI: prefix hint without --wait -> exit 0, 20 objects",
          rc == 0 and re.match(r"^job \S+ \w+: 20 objects in %s$" % BUCKET, out.strip()),
          (rc, out, err))
    rc, out, err = cli("prefetch", "--endpoint", ep + "/", "s3://%s" % BUCKET, "--json")
    try:
        doc = json.loads(out)
    except ValueError:
        doc = {}
    check("CLI: whole-bucket hint (empty prefix) -> 40 objects, --json answer",
          rc == 0 and doc.get("objects") == 2 * N_SHARDS, (rc, out, err))


def helper_checks(cli_job, sizes):
    from shardgate_prefetch import Prefetcher, PrefetchError
    p = Prefetcher(H.S.endpoint, H.ACCESS_KEY, H.SECRET_KEY, region=H.REGION)
    j = p.hint(BUCKET, template="train/shard-{000000..000019}.tar")
    check("helper: hint -> job id, 20 objects", j.get("job") and j.get("objects") == 20, j)
    seen = []
    f = p.wait(BUCKET, j["job"], timeout=60, progress=seen.append)
    o = f.get("objects", {})
    eq("helper: wait -> done", f.get("state"), "done")
    eq("helper: 10 were cached by the CLI's hint, 10 staged now, none failed",
       (o.get("total"), o.get("cached"), o.get("staged"), o.get("failed"), o.get("pending")),
       (20, 10, 10, 0, 0))
    eq("helper: bytes.total is the shards' size", f.get("bytes", {}).get("total"),
       sum(sizes[k] for k in TRAIN))
    # issue 15: bytes.done is what this job staged; the shards the CLI's hint
    # had cached are counted apart, not into done
    eq("helper: bytes.done is the 10 staged shards' size, bytes.cached the 10 cached ones'",
       (f.get("bytes", {}).get("done"), f.get("bytes", {}).get("cached")),
       (sum(sizes[k] for k in TRAIN[10:]), sum(sizes[k] for k in TRAIN[:10])))
    rc, out, err = cli("jobs", "--endpoint", H.S.endpoint, "s3://%s" % BUCKET, "--job", j["job"])
    want = r"^bytes\s+(\S+ \S+) staged of (\S+ \S+) to stage, (\S+ \S+) cached already "
    m = re.search(want, out, re.M)
    eq("CLI jobs --job: bytes staged of to stage, the cached ones apart",
       m and m.groups(), (fmt_bytes(sum(sizes[k] for k in TRAIN[10:])),
                          fmt_bytes(sum(sizes[k] for k in TRAIN[10:])),
                          fmt_bytes(sum(sizes[k] for k in TRAIN[:10]))))
    check("helper: progress callback saw the job", seen and seen[-1]["job"] == j["job"], seen)
    g0 = cold_gets()
    check("all 20 shards read back right through B", read_all_through_b(TRAIN))
    eq("all 20 shards staged: reading them costs the cold tier no GetObject",
       cold_gets() - g0, 0)

    js = p.jobs(BUCKET)
    ids = [x.get("job") for x in js]
    check("helper: jobs() lists the new job first and the CLI's job",
          ids and ids[0] == j["job"] and cli_job in ids, ids)
    eq("helper: job() returns the job", p.job(BUCKET, j["job"]).get("job"), j["job"])
    eq("helper: cancel() on a final job returns it", p.cancel(BUCKET, j["job"]).get("job"),
       j["job"])
    for what, fn, code, status in (
            ("unknown job", lambda: p.job(BUCKET, "nosuchjob0"), "NoSuchJob", 404),
            ("bad template", lambda: p.hint(BUCKET, template="a{}.tar"), "InvalidArgument", 400),
            ("empty key list", lambda: p.hint(BUCKET, keys=[]), "InvalidArgument", 400),
            ("window without ordered", lambda: p.hint(BUCKET, prefix="train/",
                                                      window_objects=3), "InvalidArgument", 400)):
        try:
            fn()
            check("helper: %s raises PrefetchError %s" % (what, code), False, "no exception")
        except PrefetchError as e:
            check("helper: %s raises PrefetchError %d %s with a message" % (what, status, code),
                  (e.status, e.code) == (status, code) and e.message, (e.status, e.code,
                                                                        e.message))
    try:
        p.hint(BUCKET, keys=["a"], prefix="b")
        check("helper: two sources -> ValueError", False)
    except ValueError:
        check("helper: two sources -> ValueError", True)

    j = p.hint(BUCKET, keys=["train/missing.tar", TRAIN[0]], ordered=True, epoch=7,
               consumer="rank9")
    f = p.wait(BUCKET, j["job"], timeout=60)
    check("helper: a missing key is reported failed with NoSuchKey",
          f.get("objects", {}).get("failed") == 1 and
          {"key": "train/missing.tar", "code": "NoSuchKey"} in f.get("errors", []), f)
    eq("helper: ordered/epoch/consumer echoed", (f.get("ordered"), f.get("epoch"),
                                                 f.get("consumer")), (True, 7, "rank9"))


def window_and_cancel(sizes):
    """An ordered hint with a 2-object window and no reader stays 2 ahead;
    cancelling it ends a waiting CLI with exit 1."""
    from shardgate_prefetch import Prefetcher
    p = Prefetcher(H.S.endpoint, H.ACCESS_KEY, H.SECRET_KEY)
    kf = os.path.join(H.S.tmp, "val-keys.txt")
    with open(kf, "w") as f:
        f.write("\n".join(VAL) + "\n")
    argv = [os.environ["SHARDGATE_BIN"], "prefetch", "--endpoint", H.S.endpoint,
            "s3://%s" % BUCKET, "--keys-file", kf, "--ordered", "--window-objects", "2",
            "--epoch", "3", "--consumer", "rank0", "--wait"]
    proc = subprocess.Popen(argv, env=cli_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    jid, job = None, None
    deadline = time.time() + 20
    while time.time() < deadline and not jid:
        for x in p.jobs(BUCKET):
            if x.get("consumer") == "rank0" and x.get("epoch") == 3:
                jid = x["job"]
        time.sleep(0.1)
    check("ordered --keys-file hint from the CLI is listed", jid)
    if jid:
        time.sleep(1.5)
        job = p.job(BUCKET, jid)
        o = job.get("objects", {})
        check("ordered hint with window_objects 2 and no reader: running, at most 2 staged",
              job.get("state") in ("queued", "running") and
              o.get("cached", 0) + o.get("staged", 0) <= 2 and o.get("total") == N_SHARDS, job)
        c = p.cancel(BUCKET, jid)
        eq("cancel -> state cancelled", c.get("state"), "cancelled")
    try:
        out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    _sanitizer_check("shardgate prefetch --wait (cancelled)", err)
    check("CLI --wait on a job cancelled elsewhere -> exit 1, says cancelled",
          proc.returncode == 1 and re.search(r"^job %s cancelled: 20 objects" %
                                             re.escape(jid or "?"), out, re.M),
          (proc.returncode, out, err))
    rc, out, err = cli("jobs", "--endpoint", H.S.endpoint, "s3://%s" % BUCKET, "--job",
                       jid or "x")
    check("CLI jobs --job on the cancelled job: ordered, epoch 3, consumer rank0",
          rc == 0 and re.search(r"^state\s+cancelled$", out, re.M) and
          re.search(r"^ordered\s+yes", out, re.M) and re.search(r"^consumer\s+rank0$", out,
                                                                re.M), (rc, out, err))


def tty_bar():
    script = shutil.which("script")
    if not script:
        H.skip("CLI --wait progress bar on a terminal", "no script(1)")
        return
    cmd = "%s prefetch --endpoint %s 's3://%s/train/shard-{000000..000019}.tar' --wait" % (
        os.environ["SHARDGATE_BIN"], H.S.endpoint, BUCKET)
    env = cli_env()
    env["COLUMNS"] = "80"       # script(1) without a terminal gives its pty no size
    rc, out, err = H.run_cmd([script, "-q", "-e", "-c", cmd, "/dev/null"], env=env,
                             timeout=120)
    check("CLI --wait on a terminal: a line redrawn with \\r, counters first, the bar last "
          "ending at 100%, exit 0",
          rc == 0 and re.search(r"\robjects 20/20\b[^\r\n]*\] 100%", out),
          (rc, out[-800:], err))


def train_loop_checks(payloads):
    want_bytes = sum(payloads[k] for k in TRAIN)
    rc, out, err = H.run_cmd([sys.executable, TRAIN_LOOP, "--endpoint", H.S.endpoint,
                              "--bucket", BUCKET, "--template",
                              "train/shard-{000000..000019}.tar", "--epochs", "2", "--seed",
                              "11", "--rank", "0"], env=cli_env(), timeout=300)
    check("train_loop.py: 2 epochs, exit 0, no refused hint",
          rc == 0 and "refused" not in err, (rc, out, err))
    ep = {}
    for m in re.finditer(r"^epoch=(\d+) rank=0 shards=(\d+) samples=(\d+) bytes=(\d+) "
                         r"seconds=[\d.]+ wait_s=[\d.]+ job=(\S+)$", out, re.M):
        ep[int(m.group(1))] = (int(m.group(2)), int(m.group(3)), int(m.group(4)), m.group(5))
    eq("train_loop.py: per-epoch shards/samples/bytes",
       [ep.get(e, (None,) * 4)[:3] for e in (0, 1)],
       [(N_SHARDS, N_SHARDS * SAMPLES, want_bytes)] * 2)
    jobs = [ep.get(e, (0, 0, 0, "-"))[3] for e in (0, 1)]
    check("train_loop.py: one hint per epoch", "-" not in jobs and jobs[0] != jobs[1], jobs)
    from shardgate_prefetch import Prefetcher
    p = Prefetcher(H.S.endpoint, H.ACCESS_KEY, H.SECRET_KEY)
    got = []
    for jid in jobs:
        if jid != "-":
            j = p.job(BUCKET, jid)
            got.append((j.get("ordered"), j.get("epoch"), j.get("consumer"),
                        j.get("objects", {}).get("total"), j.get("state"), j.get("position")))
    # epoch 1's hint is sent while epoch 0 is read (one epoch ahead): it
    # queues behind epoch 0's instead of cancelling it, and each job counts
    # its own epoch's reads
    eq("train_loop.py hints: ordered, epoch 0/1, consumer rank0, 20 objects, both done "
       "with the reader at the end", got,
       [(True, 0, "rank0", N_SHARDS, "done", N_SHARDS),
        (True, 1, "rank0", N_SHARDS, "done", N_SHARDS)])


BOTO3_HINT = os.path.join(CLIENT_DIR, "examples", "boto3_hint.py")


def boto3_example_checks(py=sys.executable, tag="boto3_hint.py"):
    """The README's plain-boto3 example: a hint, a malformed hint, a bad key."""
    tmpl = '{"template": "train/shard-{000000..000019}.tar", "consumer": "b3"}'
    rc, out, err = H.run_cmd([py, BOTO3_HINT, H.S.endpoint, BUCKET, tmpl], env=cli_env(),
                             timeout=120)
    m = re.match(r"^202 (\{.*\})$", out.strip())
    ans = json.loads(m.group(1)) if m else {}
    check("%s: 202 with a job id and 20 objects, exit 0" % tag,
          rc == 0 and ans.get("objects") == N_SHARDS and len(ans.get("job", "")) == 16,
          (rc, out, err))
    if ans.get("job"):
        from shardgate_prefetch import Prefetcher
        p = Prefetcher(H.S.endpoint, H.ACCESS_KEY, H.SECRET_KEY)
        final = p.wait(BUCKET, ans["job"], timeout=60)
        eq("%s: the job ends done with its 20 objects" % tag,
           (final.get("state"), final.get("objects", {}).get("total"), final.get("consumer")),
           ("done", N_SHARDS, "b3"))
    rc, out, err = H.run_cmd([py, BOTO3_HINT, H.S.endpoint, BUCKET, '{"keyz": ["a"]}'],
                             env=cli_env(), timeout=120)
    check("%s: a malformed hint -> 400 InvalidArgument naming the field, exit 1" % tag,
          rc == 1 and out.startswith("400 ") and "<Code>InvalidArgument</Code>" in out
          and "keyz" in out, (rc, out, err))
    env = cli_env()
    env["AWS_SECRET_ACCESS_KEY"] = "not-the-secret"
    rc, out, err = H.run_cmd([py, BOTO3_HINT, H.S.endpoint, BUCKET, tmpl], env=env,
                             timeout=120)
    check("%s: a wrong secret -> 403 SignatureDoesNotMatch" % tag,
          rc == 1 and out.startswith("403 ") and "SignatureDoesNotMatch" in out,
          (rc, out, err))


def debian_python(payloads):
    """The helper and the example with Debian's python3 (botocore 1.29)."""
    py = "/usr/bin/python3"
    if not os.access(py, os.X_OK) or H.run_cmd([py, "-c", "import boto3, botocore"])[0] != 0:
        H.skip("helper with Debian's python3", "no /usr/bin/python3 with boto3")
        return
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from shardgate_prefetch import Prefetcher\n"
            "p = Prefetcher(%r, %r, %r)\n"
            "j = p.hint(%r, prefix='train/', consumer='debian')\n"
            "f = p.wait(%r, j['job'], timeout=60)\n"
            "print(f['state'], f['objects']['total'], f['objects']['failed'])\n"
            % (CLIENT_DIR, H.S.endpoint, H.ACCESS_KEY, H.SECRET_KEY, BUCKET, BUCKET))
    rc, out, err = H.run_cmd([py, "-c", code], env=clean_env(), timeout=120)
    eq("Debian python3: helper hint + wait", (rc, out.strip()), (0, "done 20 0"))
    rc, out, err = H.run_cmd([py, TRAIN_LOOP, "--endpoint", H.S.endpoint, "--bucket", BUCKET,
                              "--template", "train/shard-{000000..000019}.tar", "--epochs", "1",
                              "--seed", "3", "--rank", "1", "--world-size", "2"],
                             env=cli_env(), timeout=300)
    m = re.search(r"^epoch=0 rank=1 shards=10 samples=50 bytes=(\d+) ", out, re.M)
    check("Debian python3: train_loop.py rank 1 of 2 reads 10 shards, 50 samples",
          rc == 0 and m and "refused" not in err, (rc, out, err))
    boto3_example_checks(py, "Debian python3: boto3_hint.py")


def main():
    try:
        import boto3  # noqa: F401
        import botocore  # noqa: F401
    except ImportError as e:
        H.skip_file("needs boto3: %s" % e)
    if not os.environ.get("SHARDGATE_BIN"):
        H.skip_file("SHARDGATE_BIN not set")
    if H.EXT_ENDPOINT:
        H.skip_file("needs shardgate itself (SHARDGATE_TEST_ENDPOINT is set)")
    H.S.name = "test_prefetch_client"
    H._ensure_tmp()
    import atexit
    atexit.register(stop_cold)     # runs before the harness removes the data dir

    data = tempfile.mkdtemp(prefix="sg-cold-", dir=H.S.tmp)
    _cold["data"] = data
    sizes, payloads = {}, {}
    for i, k in enumerate(TRAIN + VAL):
        blob, payload = make_shard(i)
        path = os.path.join(data, BUCKET, *k.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(blob)
        sizes[k], payloads[k] = len(blob), payload
    cold_port = start_cold(data)
    start_cache(cold_port)
    probe()

    cli_job = cli_checks(sizes)
    helper_checks(cli_job, sizes)
    window_and_cancel(sizes)
    cli_prefix_checks()
    tty_bar()
    train_loop_checks(payloads)
    boto3_example_checks()
    debian_python(payloads)

    with open(H.S.log_path, errors="replace") as f:
        bad = [ln for ln in f if "AddressSanitizer" in ln or "LeakSanitizer" in ln
               or "runtime error:" in ln]
    check("no sanitizer report in B's log", not bad, "".join(bad[:5]))
    stop_cold()


H.run(main)
