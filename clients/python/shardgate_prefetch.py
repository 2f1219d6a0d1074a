"""shardgate_prefetch - a small client for shardgate's prefetch hint API
(cache/HINTS.md): tell the gateway which objects a training job is about to
read, so that its NVMe cache stages them ahead of the readers.

    from shardgate_prefetch import Prefetcher
    p = Prefetcher("http://gateway:9000")          # credentials from the environment
    job = p.hint("datasets", template="train/shard-{000000..001023}.tar")
    job = p.wait("datasets", job["job"])           # final job: state done/failed/cancelled

Depends only on botocore (for SigV4) and the standard library; works with
botocore 1.29 (Debian) and newer. Thread-safe: every call opens its own HTTP
connection.
"""

import hashlib
import http.client
import itertools
import json
import os
import re
import time
import urllib.parse
import xml.etree.ElementTree as ET

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

__all__ = ["Prefetcher", "PrefetchError", "expand_template", "FINAL_STATES"]

FINAL_STATES = ("done", "failed", "cancelled")


class PrefetchError(Exception):
    """The gateway answered an S3 error (e.g. 400 InvalidArgument for a bad
    hint, 404 NoSuchJob, 403 AccessDenied). Carries the HTTP status and the
    S3 error Code and Message."""

    def __init__(self, status, code, message, request_id=None, body=b""):
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.body = body
        Exception.__init__(self, "%s %s: %s" % (status, code, message))


def _parse_error(status, body):
    code, message, rid = None, None, None
    try:
        root = ET.fromstring(body)
        for child in root:
            tag = child.tag.split("}")[-1]
            if tag == "Code":
                code = child.text
            elif tag == "Message":
                message = child.text
            elif tag == "RequestId":
                rid = child.text
    except ET.ParseError:
        pass
    if code is None:
        # not an S3 error document (a proxy, an old gateway): keep what it said
        code = "HTTP%d" % status
        message = body[:300].decode("utf-8", "replace") or http.client.responses.get(status, "")
    return PrefetchError(status, code, message or "", rid, body)


_GROUP = re.compile(r"\{([^{}]*)\}")


def expand_template(template):
    """The keys of a WebDataset-style template, in order, as the gateway
    expands them: "a{0..1}b{x,y}" -> a0bx a0by a1bx a1by. A numeric range
    {A..B} is zero-padded to the width of A when A has leading zeros or A and
    B have the same width. Raises ValueError for a malformed template."""
    parts, pos = [], 0
    for m in _GROUP.finditer(template):
        lit = template[pos:m.start()]
        if "{" in lit or "}" in lit:
            raise ValueError("unbalanced or nested braces in %r" % template)
        parts.append([lit])
        inner = m.group(1)
        if not inner:
            raise ValueError("empty brace group in %r" % template)
        rng = re.fullmatch(r"(\d+)\.\.(\d+)", inner)
        if rng:
            a, b = rng.group(1), rng.group(2)
            if int(a) > int(b):
                raise ValueError("range {%s..%s}: start after end" % (a, b))
            width = len(a) if (len(a) > 1 and a[0] == "0") or len(a) == len(b) else 0
            parts.append([str(i).zfill(width) for i in range(int(a), int(b) + 1)])
        else:
            parts.append(inner.split(","))
        pos = m.end()
    tail = template[pos:]
    if "{" in tail or "}" in tail:
        raise ValueError("unbalanced or nested braces in %r" % template)
    parts.append([tail])
    return ["".join(p) for p in itertools.product(*parts)]


class Prefetcher:
    """A client for one gateway.

    endpoint: "http://host:port" (or https). access_key / secret_key default
    to AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), then
    SHARDGATE_ACCESS_KEY / SHARDGATE_SECRET_KEY, then botocore's credential
    chain (profiles). Every request is SigV4-signed over its JSON body."""

    def __init__(self, endpoint, access_key=None, secret_key=None, region="us-east-1",
                 session_token=None, timeout=60.0):
        u = urllib.parse.urlsplit(endpoint)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("endpoint must be an http:// or https:// URL, not %r" % endpoint)
        self.endpoint = endpoint.rstrip("/")
        self._scheme, self._netloc = u.scheme, u.netloc
        self._host, self._port = u.hostname, u.port
        self.region = region
        self.timeout = timeout
        self._creds = self._credentials(access_key, secret_key, session_token)

    @staticmethod
    def _credentials(access_key, secret_key, token):
        if access_key and secret_key:
            return Credentials(access_key, secret_key, token)
        env = os.environ
        if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
            return Credentials(env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"],
                               token or env.get("AWS_SESSION_TOKEN") or None)
        if env.get("SHARDGATE_ACCESS_KEY") and env.get("SHARDGATE_SECRET_KEY"):
            return Credentials(env["SHARDGATE_ACCESS_KEY"], env["SHARDGATE_SECRET_KEY"])
        import botocore.session
        c = botocore.session.get_session().get_credentials()
        if c is None:
            raise ValueError("no credentials: pass access_key/secret_key or set "
                             "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
        return c

    # ------------------------------------------------------------ transport

    def _request(self, method, bucket, query, body=b""):
        path = "/" + urllib.parse.quote(bucket, safe="")
        url = "%s://%s%s?%s" % (self._scheme, self._netloc, path, query)
        headers = {"X-Amz-Content-SHA256": hashlib.sha256(body).hexdigest()}
        if body:
            headers["Content-Type"] = "application/json"
        req = AWSRequest(method=method, url=url, data=body, headers=headers)
        S3SigV4Auth(self._creds, "s3", self.region).add_auth(req)
        cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=self.timeout)
        try:
            conn.putrequest(method, "%s?%s" % (path, query), skip_host=True,
                            skip_accept_encoding=True)
            conn.putheader("Host", self._netloc)
            for k, v in req.headers.items():
                if k.lower() != "host":
                    conn.putheader(k, v)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body if body else None)
            r = conn.getresponse()
            data = r.read()
        finally:
            conn.close()
        if not 200 <= r.status <= 299:
            raise _parse_error(r.status, data)
        try:
            return json.loads(data.decode("utf-8"))
        except ValueError:
            raise PrefetchError(r.status, "MalformedAnswer",
                                "the gateway's answer is not JSON (a shardgate without "
                                "prefetch hints?): %r" % data[:200], body=data)

    @staticmethod
    def _job_query(job_id):
        return "prefetch&job=" + urllib.parse.quote(str(job_id), safe="")

    # ------------------------------------------------------------ the API

    def hint(self, bucket, keys=None, prefix=None, template=None, ordered=False, epoch=None,
             consumer=None, window_bytes=None, window_objects=None, pin=False,
             stage_ahead=None):
        """Sends one hint: exactly one of keys (an iterable, in reading order),
        prefix ("" = the whole bucket) or template. Returns the gateway's
        answer: {"job": ID, "bucket": ..., "objects": N, "state": "queued"}.
        Raises PrefetchError (400 InvalidArgument with the reason) when the
        gateway refuses the hint; nothing is staged then."""
        given = [n for n, v in (("keys", keys), ("prefix", prefix), ("template", template))
                 if v is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of keys, prefix, template (got %s)"
                             % (", ".join(given) or "none"))
        if keys is not None:
            if isinstance(keys, (str, bytes)):
                raise ValueError("keys must be a list of keys, not one string")
            body = {"keys": list(keys)}
        elif prefix is not None:
            body = {"prefix": prefix}
        else:
            body = {"template": template}
        if ordered:
            body["ordered"] = True
        if epoch is not None:
            body["epoch"] = epoch
        if consumer is not None:
            body["consumer"] = consumer
        if window_bytes is not None:
            body["window_bytes"] = window_bytes
        if window_objects is not None:
            body["window_objects"] = window_objects
        if pin:
            body["pin"] = True
        if stage_ahead is not None:
            body["stage_ahead"] = stage_ahead
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        return self._request("POST", bucket, "prefetch", data)

    def job(self, bucket, job_id):
        """The job's state and counters (see HINTS.md); PrefetchError with code
        NoSuchJob when the gateway does not know it."""
        return self._request("GET", bucket, self._job_query(job_id))

    def jobs(self, bucket):
        """The bucket's jobs, newest first (a list of job dicts)."""
        return self._request("GET", bucket, "prefetch").get("jobs", [])

    def cancel(self, bucket, job_id):
        """Stops staging at once; returns the job. Harmless on a final job."""
        return self._request("DELETE", bucket, self._job_query(job_id))

    def wait(self, bucket, job_id, timeout=None, poll=0.5, progress=None):
        """Polls the job every `poll` seconds until its state is done, failed or
        cancelled and returns the final job dict (check its "state" and
        "objects"["failed"]). progress(job) is called after every poll.
        Raises TimeoutError after `timeout` seconds (None: no limit)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            j = self.job(bucket, job_id)
            if progress is not None:
                progress(j)
            if j.get("state") in FINAL_STATES:
                return j
            if deadline is not None and time.monotonic() + poll > deadline:
                raise TimeoutError("prefetch job %s still %s after %ss"
                                   % (job_id, j.get("state"), timeout))
            time.sleep(poll)
