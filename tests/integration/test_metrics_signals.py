"""tests/integration/test_metrics_signals.py - metrics labels and signals
(issue 10, finding 16, the front end's part):
- shardgate_requests_total has a label per HTTP status: a prefetch submit
  (202) is code="202", not code="other";
- shardgate_build_info{version} is the version `shardgate --version` prints;
- the connection gauges are there;
- a second SIGTERM or SIGINT during the graceful stop exits at once (status
  128 + signal) instead of waiting out shutdown_grace_s for a request in
  flight; one SIGTERM still drains and exits 0."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import front_common as F  # noqa: E402
import cache_common as C  # noqa: E402

check, eq = H.check, H.eq
BUCKET = "metricsbucket"


def t_metrics():
    g = F.start_gw("metrics", extra=["--cache-dir", H.tmpdir("cache"), "--cache-size", "64MiB"])
    if not check("gateway with a cache starts", g.health() == 200, g.log()[-2000:]):
        return
    os.makedirs(os.path.join(g.data_dir, BUCKET), exist_ok=True)
    with open(os.path.join(g.data_dir, BUCKET, "a"), "wb") as f:
        f.write(b"a" * 1000)
    H.S.host, H.S.port = "127.0.0.1", g.port
    body = json.dumps({"keys": ["a"]}).encode()
    r = H.raw("POST", "/" + BUCKET, query="prefetch", body=body,
              headers={"Content-Type": "application/json"}, payload_hash=H.sha256(body))
    eq("prefetch submit answers 202", r.status, 202)
    st, _ = F.signed_get(g.port, "/%s/no-such-key" % BUCKET)
    eq("GET of a missing key answers 404", st, 404)
    # a request is counted when it completes, just after its answer went out:
    # the client can have both answers before either is counted
    m, end = {}, time.time() + 20
    while time.time() < end:
        m = C.metrics(g.port)
        if C.metric_sum(m, "shardgate_requests_total", op="GetObject", code="404") and \
                C.metric_sum(m, "shardgate_requests_total", op="PrefetchSubmit", code="202"):
            break
        time.sleep(0.1)
    eq('PrefetchSubmit counted as code="202"',
       C.metric_sum(m, "shardgate_requests_total", op="PrefetchSubmit", code="202"), 1.0)
    check('nothing counted as code="other"',
          not C.metric_sum(m, "shardgate_requests_total", code="other"),
          {k: v for k, v in m.items() if k[0] == "shardgate_requests_total"})
    eq('GetObject 404 counted as code="404"',
       C.metric_sum(m, "shardgate_requests_total", op="GetObject", code="404"), 1.0)
    ver = subprocess.run([os.environ["SHARDGATE_BIN"], "--version"], stdout=subprocess.PIPE,
                         timeout=30).stdout.decode().split()[-1]
    eq("shardgate_build_info carries the version", C.metric_sum(m, "shardgate_build_info",
                                                                version=ver), 1.0)
    check("the connection gauges are there",
          C.metric_sum(m, "shardgate_connections") is not None
          and C.metric_sum(m, "shardgate_connections_limit")
          and C.metric_sum(m, "shardgate_connections_per_client_limit"),
          {k: v for k, v in m.items() if "connections" in k[0]})
    eq("gateway exits 0 on SIGTERM", g.stop(), 0)


def in_flight_put(port):
    """A PUT that announced 1 MB and sent 10 bytes: a request the graceful
    stop waits for. It asks for 100-continue, so that once the answer is
    here the gateway has the request in hand."""
    url = "http://127.0.0.1:%d/%s/partial" % (port, BUCKET)
    hdrs = H.sign_headers("PUT", url, payload_hash="UNSIGNED-PAYLOAD")
    head = "PUT /%s/partial HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % (BUCKET, port)
    head += "".join("%s: %s\r\n" % (k, v) for k, v in hdrs.items() if k.lower() != "host")
    head += "Content-Length: 1000000\r\nExpect: 100-continue\r\n\r\n"
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(head.encode())
    got, _ = H.read_head(s)
    check("the in-flight PUT got 100 Continue", got.startswith(b"HTTP/1.1 100"), got[:200])
    s.sendall(b"0123456789")
    return s


def t_second_signal(sig, want_rc):
    name = signal.Signals(sig).name
    # the grace (60 s) is longer than the test waits: only the second signal
    # can end the process in time
    g = F.start_gw("sig-%s" % name, config={"shutdown_grace_s": 60})
    if not check("gateway starts (%s)" % name, g.health() == 200, g.log()[-2000:]):
        return
    os.makedirs(os.path.join(g.data_dir, BUCKET), exist_ok=True)
    s = in_flight_put(g.port)
    try:
        g.proc.send_signal(sig)
        time.sleep(1.0)
        check("after one %s the gateway drains (still running)" % name, g.proc.poll() is None,
              g.log()[-800:])
        g.proc.send_signal(sig)
        rc = g.wait_exit(15)
        eq("a second %s exits at once (within 15 s) with 128 + signal" % name, rc, want_rc)
        check("and says why", "second signal" in g.log(), g.log()[-800:])
    finally:
        s.close()
        g.stop(signal.SIGKILL)


def t_one_signal_drains():
    g = F.start_gw("sig-one", config={"shutdown_grace_s": 60})
    if not check("gateway starts (one SIGTERM)", g.health() == 200, g.log()[-2000:]):
        return
    os.makedirs(os.path.join(g.data_dir, BUCKET), exist_ok=True)
    s = in_flight_put(g.port)
    g.proc.send_signal(signal.SIGTERM)
    time.sleep(1.0)
    check("one SIGTERM waits for the request in flight", g.proc.poll() is None, g.log()[-800:])
    s.close()   # the client goes away: nothing is in flight any more
    eq("then exits 0", g.wait_exit(30), 0)


def main():
    C.need_clients()
    H.tmpdir("x")
    t_metrics()
    t_second_signal(signal.SIGTERM, 128 + signal.SIGTERM)
    t_second_signal(signal.SIGINT, 128 + signal.SIGINT)
    t_one_signal_drains()


H.S.name = "test_metrics_signals"
H.run(main)
