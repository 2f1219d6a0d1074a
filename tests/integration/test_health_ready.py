"""tests/integration/test_health_ready.py - liveness, readiness and what a
cold-tier outage looks like to a client (issue 10, findings 9 and 11, and
HEAD /metrics of 16):
  1. the directory store: GET/HEAD /_shardgate/health and /_shardgate/ready
     answer 200 without credentials, HEAD without a body; other methods 405
     (a POST with a body does not reach the body verifier, which has nothing
     to verify it with); HEAD /metrics answers like GET;
  2. an S3 cold tier that refuses connections: the start warns, naming the
     URL and the error, and goes on; health stays 200, ready says 503 and
     why (without the URL); a miss is 503 ServiceUnavailable with a message
     naming the cold tier, not SlowDown's "reduce your request rate";
  3. a reachable tier (fake_tier "forbid": 403 to everything counts as
     there): ready 200; a storm of readiness probes costs the cold tier at
     most one probe per 5 s; the tier hangs (mute): ready turns 503 within a
     bounded time and says so; it comes back: ready 200 again; each change
     is logged once.
"""

import atexit
import concurrent.futures as cf
import http.client
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cache_common as C  # noqa: E402
import fake_tier  # noqa: E402
import harness as H  # noqa: E402

check, eq = H.check, H.eq


def plain(method, path, body=None, timeout=30):
    """An unsigned request; returns (status, headers, body, seconds)."""
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", H.S.port, timeout=timeout)
    try:
        c.request(method, path, body=body)
        r = c.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data, time.monotonic() - t0
    except (OSError, http.client.HTTPException) as e:
        return None, {}, repr(e).encode(), time.monotonic() - t0
    finally:
        c.close()


def local_store():
    H.start("test_health_ready")
    st, hd, body, _ = plain("GET", "/_shardgate/health")
    eq("health: GET 200 ok", (st, body), (200, b"ok\n"))
    st, hd, body, _ = plain("HEAD", "/_shardgate/health")
    eq("health: HEAD 200, no body, the length of GET's", (st, body, hd.get("content-length")),
       (200, b"", "3"))
    st, hd, body, _ = plain("GET", "/_shardgate/ready")
    check("ready: GET 200 'ready' on the directory store without a cache",
          st == 200 and body.startswith(b"ready\n") and b"cold tier: ok" in body,
          (st, body))
    st, hd, body, _ = plain("HEAD", "/_shardgate/ready")
    eq("ready: HEAD 200 without a body", (st, body), (200, b""))
    st, _, body, _ = plain("POST", "/_shardgate/health", body=b"x" * 100)
    eq("health: POST with a body is 405", st, 405)
    st, _, body, _ = plain("DELETE", "/_shardgate/ready")
    eq("ready: DELETE is 405", st, 405)
    check("the gateway still answers after those", H.alive())
    # HEAD /metrics: like GET, without the body (was 403: routed as a bucket)
    r = C.request(H.S.port, "GET", "/metrics")
    h = C.request(H.S.port, "HEAD", "/metrics")
    eq("HEAD /metrics 200 like GET", (h.status, r.status), (200, 200))
    check("HEAD /metrics: text/plain, no body",
          h.headers.get("content-type", "").startswith("text/plain") and h.body == b"",
          h.headers)
    st, _, _, _ = plain("HEAD", "/metrics")
    eq("HEAD /metrics without credentials is still refused", st, 403)
    H._stop_gateway(report=True)


def start_b(cold_url, tag):
    if H.S.log_file:                 # each gateway its own log (grep counts)
        H.S.log_file.close()
        H.S.log_file = None
    cfg = C.Cache(cold_url, "cold-access", "cold-secret", size="64MiB", tag=tag)
    C.start_cache(cfg)
    return cfg


def cold_refuses():
    # a port nobody listens on (bound, then closed)
    port = H._free_port()
    url = "http://127.0.0.1:%d" % port
    start_b(url, "refused")
    warn = [l for l in H.log_grep("is not reachable") if url in l]
    check("start: warns that the cold tier (named) is not reachable, and why",
          warn and "cannot connect" in warn[0], H.log_tail(15))
    eq("refused: health 200 (the process answers)", plain("GET", "/_shardgate/health")[0], 200)
    st, _, body, dt = plain("GET", "/_shardgate/ready")
    check("refused: ready 503 'not ready', the cold tier NOT OK: cannot connect",
          st == 503 and body.startswith(b"not ready\n") and
          b"cold tier: NOT OK - cannot connect" in body, (st, body))
    check("refused: ready's body does not show the cold tier's address", url.encode() not in body,
          body)
    check("refused: ready answered within 10 s", dt < 10, "%.1f s" % dt)
    r = C.request(H.S.port, "GET", "/bkt/key")
    err = r.error() or {}
    eq("refused: a miss is 503 ServiceUnavailable", (r.status, err.get("Code")),
       (503, "ServiceUnavailable"))
    msg = err.get("Message", "")
    check("refused: the message names the cold tier", ("The cold tier %s" % url) in msg, msg)
    check("refused: ... and does not read as throttling", "request rate" not in msg, msg)
    r = C.request(H.S.port, "GET", "/bkt?list-type=2")
    check("refused: a listing is 503 naming the cold tier",
          r.status == 503 and url in (r.error() or {}).get("Message", ""), r)
    r = C.request(H.S.port, "HEAD", "/bkt/key")
    eq("refused: HEAD of a miss 503", r.status, 503)
    C.stop_cache()


def wait_ready(want, timeout=30):
    """Polls /ready until its status is `want`; returns (status, body, longest answer)."""
    deadline = time.monotonic() + timeout
    longest, st, body = 0.0, None, b""
    while time.monotonic() < deadline:
        st, _, body, dt = plain("GET", "/_shardgate/ready")
        longest = max(longest, dt)
        if st == want:
            break
        time.sleep(0.2)
    return st, body, longest


def cold_flaps():
    tier = fake_tier.FakeTier("forbid")
    atexit.register(tier.stop)
    start_b(tier.url, "flaps")
    check("reachable: no start-up warning", not H.log_grep("is not reachable"),
          H.log_grep("is not reachable"))
    st, _, body, _ = plain("GET", "/_shardgate/ready")
    check("reachable (403 to everything): ready 200, cold tier ok",
          st == 200 and body.startswith(b"ready\n") and b"cold tier: ok - answered HTTP 403"
          in body and b"cache: ok" in body, (st, body))
    # a storm: 40 sequential and 40 concurrent probes
    n0, t0 = tier.count(), time.monotonic()
    sts = [plain("GET", "/_shardgate/ready")[0] for _ in range(40)]
    with cf.ThreadPoolExecutor(8) as ex:
        sts += list(ex.map(lambda _: plain("GET", "/_shardgate/ready")[0], range(40)))
    n1, elapsed = tier.count(), time.monotonic() - t0
    eq("storm: 80 probes all 200", sts.count(200), 80)
    check("storm: the cold tier saw at most one probe per 5 s",
          n1 - n0 <= 1 + int(elapsed / 5.0), "%d probes in %.1f s" % (n1 - n0, elapsed))
    # the tier hangs
    tier.set_mode("mute")
    st, body, longest = wait_ready(503)
    check("hung: ready turns 503, the cold tier did not answer",
          st == 503 and b"cold tier: NOT OK - no answer within" in body, (st, body))
    check("hung: each ready answered within 10 s", longest < 10, "%.1f s" % longest)
    eq("hung: health still 200", plain("GET", "/_shardgate/health")[0], 200)
    tier.set_mode("forbid")
    st, body, longest = wait_ready(200)
    eq("back: ready 200 again", st, 200)
    eq("readiness changes logged once each",
       (len(H.log_grep("readiness: NOT ready")), len(H.log_grep("readiness: ready"))), (1, 2))
    C.stop_cache()
    tier.stop()


def main():
    C.need_clients()
    atexit.register(C.stop_all)
    local_store()
    cold_refuses()
    cold_flaps()


H.run(main)
