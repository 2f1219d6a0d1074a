"""tests/integration/prefetch_common.py - shared by the test_prefetch_*.py
files: the prefetch hint API (cache/HINTS.md) over raw SigV4-signed HTTP
(botocore's S3SigV4Auth with an X-Amz-Content-SHA256 of the body, so the
query may be written `?prefetch`), job polling that checks the counters'
invariants at every poll, and tar-like shard bodies.

Builds on cache_common.py (cold tiers, the caching gateway B as the
harness's gateway, /metrics parsing), which it does not change."""

import io
import json
import os
import sys
import tarfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import cache_common as C  # noqa: E402

FINAL = ("done", "failed", "cancelled")


class Answer:
    """A hint API answer: HTTP status, parsed JSON (or None), S3 error dict (or None)."""

    def __init__(self, resp):
        self.resp = resp
        self.status = resp.status
        self.json = None
        self.err = None
        try:
            self.json = json.loads(resp.body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            self.err = H.parse_error(resp.body)

    def code(self):
        return (self.err or {}).get("Code")

    def message(self):
        return (self.err or {}).get("Message") or ""

    def __repr__(self):
        return "<%d %s>" % (self.status, self.resp.body[:600])


def _req(method, bucket, query, body=b"", access=None, secret=None, timeout=60):
    hdrs = {}
    if body:
        hdrs["Content-Type"] = "application/json"
    r = H.raw(method, "/" + bucket, query=query, body=body, headers=hdrs, access=access,
              secret=secret, payload_hash=H.sha256(body), timeout=timeout)
    return Answer(r)


def hint(bucket, spec, access=None, secret=None):
    """POST /bucket?prefetch. spec: a dict (sent as JSON) or raw bytes/str."""
    if isinstance(spec, (dict, list)):
        body = json.dumps(spec).encode()
    elif isinstance(spec, str):
        body = spec.encode()
    else:
        body = spec
    return _req("POST", bucket, "prefetch", body, access, secret)


def job(bucket, jid, access=None, secret=None):
    return _req("GET", bucket, "prefetch&job=" + jid, access=access, secret=secret)


def jobs(bucket, access=None, secret=None):
    return _req("GET", bucket, "prefetch", access=access, secret=secret)


def cancel(bucket, jid, access=None, secret=None):
    return _req("DELETE", bucket, "prefetch&job=" + jid, access=access, secret=secret)


def counters_ok(j):
    """'' when total == cached + staged + failed + pending, else why not."""
    o = j.get("objects") or {}
    try:
        s = o["cached"] + o["staged"] + o["failed"] + o["pending"]
    except (KeyError, TypeError) as e:
        return "objects lacks %s: %r" % (e, o)
    if s != o.get("total"):
        return "total %r != cached+staged+failed+pending %r: %r" % (o.get("total"), s, o)
    return ""


class Poller:
    """Polls one job until it is final (or a timeout), checking at each poll
    that the counters add up and that staged / bytes.done never decrease."""

    def __init__(self, bucket, jid, tag):
        self.bucket, self.jid, self.tag = bucket, jid, tag
        self.polls = []
        self.problems = []

    def poll(self):
        a = job(self.bucket, self.jid)
        if a.status != 200 or not isinstance(a.json, dict):
            self.problems.append("poll %d: %r" % (len(self.polls), a))
            return None
        j = a.json
        why = counters_ok(j)
        if why:
            self.problems.append("poll %d: %s" % (len(self.polls), why))
        if self.polls:
            p = self.polls[-1]
            for path in (("objects", "staged"), ("bytes", "done"), ("objects", "cached"),
                         ("objects", "failed")):
                a0 = (p.get(path[0]) or {}).get(path[1], 0)
                a1 = (j.get(path[0]) or {}).get(path[1], 0)
                if a1 < a0:
                    self.problems.append("poll %d: %s.%s went down %r -> %r"
                                         % (len(self.polls), path[0], path[1], a0, a1))
            if p.get("state") in FINAL and j.get("state") != p.get("state"):
                self.problems.append("poll %d: final state %r changed to %r"
                                     % (len(self.polls), p.get("state"), j.get("state")))
        self.polls.append(j)
        return j

    def wait(self, timeout=60, step=0.02):
        deadline = time.time() + timeout
        j = None
        while time.time() < deadline:
            j = self.poll()
            if j and j.get("state") in FINAL:
                return j
            time.sleep(step)
        return j

    def check(self):
        H.check("%s: counters add up and staged/bytes.done never decrease over %d polls"
                % (self.tag, len(self.polls)), not self.problems and self.polls,
                "; ".join(self.problems[:10]) or "no successful poll")


def make_shard(i, size):
    """A tar-like blob of about `size` bytes (USTAR members, random payload)."""
    buf = io.BytesIO()
    left = max(size - 2048, 512)
    n = 0
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        while left > 1024:
            part = min(left - 512, 60000)
            data = os.urandom(part)
            ti = tarfile.TarInfo("%06d.%d.bin" % (i, n))
            ti.size = len(data)
            ti.mtime = 1700000000
            tf.addfile(ti, io.BytesIO(data))
            left -= part + 512 + (-part % 512)
            n += 1
    return buf.getvalue()


def stats():
    """The caching gateway's cache counters (cache_common.bstats)."""
    return C.bstats()


def delta(a, b):
    return {k: b[k] - a.get(k, 0) for k in b}
