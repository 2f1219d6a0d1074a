"""tests/integration/test_body_threads.py - PUT and UploadPart bodies taken in
on the body threads (gateway/intake.c): the connection's thread copies a body
into two buffers, a body thread verifies, digests and writes them, and the
connection waits (suspended) whenever both buffers are full. One body thread
here (`"body_threads": 1`), so bodies queue behind each other:

  * 12 PUTs at once of 3 MiB + a tail (signed payloads, UNSIGNED-PAYLOAD with
    Content-MD5, boto3's aws-chunked bodies with their CRC32 trailer): every
    object reads back byte for byte with the MD5 ETag, and
    shardgate_body_bytes_total{thread="body"} counts them; a 4 KiB PUT is
    taken in on its connection (under 1 MiB);
  * errors found by a body thread are answered like any other: a wrong
    Content-MD5 (400 BadDigest), a payload that is not the signed one (400
    XAmzContentSHA256Mismatch); neither object appears;
  * a body cut off by its client half-way leaves nothing behind, and the
    gateway goes on;
  * 130 bodies at once hold every body buffer there is (128 bodies' worth,
    shardgate_body_buffer_bytes 64 MiB): the last two are taken in on their
    connections, all 130 are right, and the buffers are given back;
  * SIGTERM while 6 bodies stream in: the stop waits for them (every one
    acknowledged, byte for byte after a restart) and exits 0 - no connection
    is left suspended for a body thread when libmicrohttpd stops.
The signed payloads' MD5 and SHA-256 are computed in one pass
(shardgate_md5_bytes_total{how="with_sha256"} counts them). A second gateway
with eight body threads: 16 unsigned bodies at once are hashed in the MD5
lanes (shardgate_md5_bytes_total{how="lanes"} grows), every ETag is the MD5 of
its body, and a wrong Content-MD5 among 8 concurrent unsigned bodies is the
only one refused.
Skips (77) without boto3."""

import base64
import hashlib
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import cache_common as C  # noqa: E402
import store_common as T  # noqa: E402

check, eq = H.check, H.eq
MB = H.MB


def etag(b):
    return '"%s"' % hashlib.md5(b).hexdigest()


def body_bytes(gw, thread):
    return C.metric_sum(C.metrics(gw.port), "shardgate_body_bytes_total", thread=thread) or 0


def put_head(gw, key, body, extra=None, total=None, payload_hash=None):
    """A socket with the head of a PUT signed over `body` (or with the given
    x-amz-content-sha256, e.g. UNSIGNED-PAYLOAD) sent (Content-Length
    `total`, default len(body)); the body is the caller's to send."""
    host = "127.0.0.1:%d" % gw.port
    n = len(body) if total is None else total
    hdrs = H.sign_headers("PUT", "http://%s/bkt/%s" % (host, key),
                          dict({"Content-Length": str(n)}, **(extra or {})), body,
                          payload_hash=payload_hash)
    lines = ["PUT /bkt/%s HTTP/1.1" % key, "Host: %s" % host]
    lines += ["%s: %s" % kv for kv in hdrs.items() if kv[0].lower() != "host"]
    s = socket.create_connection(("127.0.0.1", gw.port), timeout=60)
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    return s


def status_of(sock):
    head, _ = H.read_head(sock)
    try:
        return int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


def response(sock):
    """(head, body) of one response on a raw socket."""
    head, body = H.read_head(sock)
    n = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":", 1)[1])
    while len(body) < n:
        d = sock.recv(65536)
        if not d:
            break
        body += d
    return head, body


def read(c, key):
    try:
        r = c.get_object(Bucket="bkt", Key=key)
        return r["Body"].read(), r["ETag"]
    except Exception:   # noqa - NoSuchKey
        return None, None


def put_all(gw, c, datas):
    """PUTs every datas[key] at once, three kinds of body by the key's number;
    the keys that failed."""
    errs = []

    def put(key):
        d = datas[key]
        try:
            kind = int(key[-2:]) % 3
            if kind == 0:      # SigV4 over the payload's SHA-256
                r = C.request(gw.port, "PUT", "/bkt/" + key, body=d)
                ok = r.status == 200
            elif kind == 1:    # a signed payload with Content-MD5
                md5 = base64.b64encode(hashlib.md5(d).digest()).decode()
                s = put_head(gw, key, d, {"Content-MD5": md5})
                s.sendall(d)
                ok = status_of(s) == 200
                s.close()
            else:              # boto3: aws-chunked with a CRC32 trailer
                c.put_object(Bucket="bkt", Key=key, Body=d)
                ok = True
            if not ok:
                errs.append(key)
        except Exception as e:   # noqa
            errs.append("%s: %r" % (key, e))
    ts = [threading.Thread(target=put, args=(k,)) for k in datas]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    return errs


def concurrent_puts(gw, c):
    datas = {"k%02d" % i: os.urandom(3 * MB + 1000 * i) for i in range(12)}
    before = body_bytes(gw, "body")
    one_pass = md5_bytes(gw, "with_sha256")
    errs = put_all(gw, c, datas)
    eq("12 PUTs at once of 3 MiB and more, three kinds of body, through one body thread",
       errs, [])
    wrong = [k for k, d in datas.items() if read(c, k) != (d, etag(d))]
    eq("... each reads back byte for byte, with the MD5 of its bytes as ETag", wrong, [])
    took = body_bytes(gw, "body") - before
    check("... and the body threads took them in (%d bytes counted, %d sent)" %
          (took, sum(map(len, datas.values()))), took >= sum(map(len, datas.values())))
    signed = sum(len(d) for k, d in datas.items() if int(k[-2:]) % 3 != 2)
    one_pass = md5_bytes(gw, "with_sha256") - one_pass
    check("... the signed payloads' MD5 and SHA-256 computed in one pass (%d bytes, %d signed)"
          % (one_pass, signed), one_pass >= signed)
    before = body_bytes(gw, "connection")
    c.put_object(Bucket="bkt", Key="small", Body=b"s" * 4096)
    check("a 4 KiB PUT is taken in on its connection's thread",
          body_bytes(gw, "connection") - before >= 4096)


def md5_bytes(gw, how):
    return C.metric_sum(C.metrics(gw.port), "shardgate_md5_bytes_total", how=how) or 0


def put_unsigned_all(gw, datas):
    """PUTs every datas[key] at once with UNSIGNED-PAYLOAD (half of them with
    Content-MD5): bodies whose MD5 is the only digest, the lanes' kind (a
    signed payload is hashed with its SHA-256 in one pass instead). The keys
    that failed."""
    errs = []

    def put(i, key):
        d = datas[key]
        extra = {"Content-MD5": base64.b64encode(hashlib.md5(d).digest()).decode()} \
            if i % 2 else {}
        try:
            s = put_head(gw, key, d, extra, payload_hash="UNSIGNED-PAYLOAD")
            s.sendall(d)
            if status_of(s) != 200:
                errs.append(key)
            s.close()
        except Exception as e:   # noqa
            errs.append("%s: %r" % (key, e))
    ts = [threading.Thread(target=put, args=(i, k)) for i, k in enumerate(datas)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    return errs


def md5_lanes(data):
    """Eight body threads: 16 unsigned bodies at once are hashed side by side
    in the MD5 lanes (common/md5.c) - and every ETag is still the MD5 of its
    body, a wrong Content-MD5 among them still a BadDigest."""
    cfg = os.path.join(H.S.tmp, "body-threads-8.json")
    with open(cfg, "w") as f:
        json.dump({"body_threads": 8}, f)
    gw = T.Gw("lanes", ["--data", data, "--config", cfg])
    if not gw.start():
        return
    c = gw.client()
    c.create_bucket(Bucket="bkt")
    # Whether four bodies meet in the hashing at one moment is up to the
    # scheduler: rounds until they did (one is the rule), at most five.
    rounds, wrong, errs = 0, [], []
    while rounds < 5 and md5_bytes(gw, "lanes") == 0:
        rounds += 1
        datas = {"r%dk%02d" % (rounds, i): os.urandom(4 * MB + 777 * i) for i in range(16)}
        errs += put_unsigned_all(gw, datas)
        wrong += [k for k, d in datas.items() if read(c, k) != (d, etag(d))]
    lanes, alone = md5_bytes(gw, "lanes"), md5_bytes(gw, "alone")
    check("16 unsigned bodies at once on 8 body threads were hashed in the MD5 lanes "
          "(%d bytes in lanes, %d alone, %d round(s))" % (lanes, alone, rounds), lanes > 0)
    eq("... every PUT acknowledged", errs, [])
    eq("... each reads back byte for byte, with the MD5 of its bytes as ETag", wrong, [])
    d = os.urandom(3 * MB)
    good = base64.b64encode(hashlib.md5(d).digest()).decode()
    bad = base64.b64encode(hashlib.md5(d + b"x").digest()).decode()
    socks = [put_head(gw, "md5-%d" % i, d, {"Content-MD5": bad if i == 3 else good},
                      payload_hash="UNSIGNED-PAYLOAD") for i in range(8)]
    for s in socks:
        s.sendall(d)
    codes = [status_of(s) for s in socks]
    for s in socks:
        s.close()
    eq("8 bodies at once, one with a wrong Content-MD5: only that one is refused (400)",
       codes, [200, 200, 200, 400, 200, 200, 200, 200])
    eq("... and it is not stored", read(c, "md5-3"), (None, None))
    eq("lanes stops with 0", gw.stop(), 0)


def errors(gw, c):
    d = os.urandom(3 * MB)
    wrong_md5 = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    s = put_head(gw, "bad-md5", d, {"Content-MD5": wrong_md5})
    s.sendall(d)
    head, rest = response(s)
    s.close()
    check("a 3 MiB body with a wrong Content-MD5: 400 BadDigest",
          head.startswith(b"HTTP/1.1 400") and b"BadDigest" in head + rest, head + rest)
    # signed over other bytes than the ones sent: the last byte flipped (a
    # fixed replacement byte equals the random one once in 256 runs, and the
    # "bad" body is then the signed one: CI run 141)
    host = "127.0.0.1:%d" % gw.port
    hdrs = H.sign_headers("PUT", "http://%s/bkt/bad-sha" % host,
                          {"Content-Length": str(len(d))}, d[:-1] + bytes([d[-1] ^ 0xFF]))
    lines = ["PUT /bkt/bad-sha HTTP/1.1", "Host: %s" % host]
    lines += ["%s: %s" % kv for kv in hdrs.items() if kv[0].lower() != "host"]
    s = socket.create_connection(("127.0.0.1", gw.port), timeout=60)
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + d)
    head, rest = response(s)
    s.close()
    check("a 3 MiB body that is not the signed payload: 400 XAmzContentSHA256Mismatch",
          head.startswith(b"HTTP/1.1 400") and b"XAmzContentSHA256Mismatch" in head + rest,
          head + rest)
    eq("neither object appears", [read(c, k)[0] for k in ("bad-md5", "bad-sha")],
       [None, None])


def cut_off(gw, c, data):
    whole = os.urandom(8 * MB)
    s = put_head(gw, "cut", whole)
    s.sendall(whole[:3 * MB])
    time.sleep(0.3)
    s.close()
    d = os.urandom(2 * MB)
    c.put_object(Bucket="bkt", Key="after-cut", Body=d)
    eq("a body cut off half-way: the gateway goes on", read(c, "after-cut")[0], d)
    eq("... and the cut-off object does not appear", read(c, "cut")[0], None)
    tmp = os.path.join(data, "bkt", ".sg~tmp")
    left = C.wait_until(lambda: not os.path.isdir(tmp) or not os.listdir(tmp), 10)
    check("... nor any temp file of it", left, os.listdir(tmp) if os.path.isdir(tmp) else [])


def buffers_run_out(gw, c):
    """130 bodies of 2 MiB + 1 at once, each held open with its last MiB
    unsent: the first 128 hold two buffers each, all there are."""
    n, size = 130, 2 * MB + 1
    datas = [os.urandom(size) for _ in range(n)]
    before = body_bytes(gw, "connection")
    socks = []
    for i, d in enumerate(datas):
        s = put_head(gw, "many/%03d" % i, d)
        s.sendall(d[:MB])
        socks.append(s)
    # every body's first MiB is in (so no body ends and frees its buffers
    # before the last two have begun) before the rest goes
    m = C.wait_until(lambda: (lambda m: m if C.metric_sum(m, "shardgate_body_buffer_bytes")
                              == 256 * 256 * 1024 and C.metric_sum(
                                  m, "shardgate_body_bytes_total", thread="connection")
                              - before >= 2 * MB else None)(C.metrics(gw.port)), 60)
    check("130 bodies begun: all 64 MiB of body buffers held, two bodies on their "
          "connections", m is not None)
    for s, d in zip(socks, datas):
        s.sendall(d[MB:])
    codes = [status_of(s) for s in socks]
    for s in socks:
        s.close()
    eq("130 bodies at once: every one answered 200", sorted(set(codes)), [200])
    eq("... the two past the last body buffer were taken in on their connections, "
       "the other 128 on the body thread", body_bytes(gw, "connection") - before, 2 * size)
    eq("... and when they are done no buffer is held",
       C.metric_sum(C.metrics(gw.port), "shardgate_body_buffer_bytes"), 0.0)
    wrong = [i for i, d in enumerate(datas) if read(c, "many/%03d" % i)[0] != d]
    eq("... and every one reads back byte for byte", wrong, [])


def stop_while_bodies_stream(gw, data):
    c = gw.client()
    datas = {"stop/%d" % i: os.urandom(24 * MB) for i in range(6)}
    acked, errs = [], []

    def put(key):
        try:
            c.put_object(Bucket="bkt", Key=key, Body=datas[key])
            acked.append(key)
        except Exception as e:   # noqa - refused once the stop began
            errs.append(repr(e))
    ts = [threading.Thread(target=put, args=(k,)) for k in datas]
    for t in ts:
        t.start()
    # the six are connected and streaming (the seventh connection: /metrics)
    C.wait_until(lambda: C.metric_sum(C.metrics(gw.port), "shardgate_connections") >= 7, 10,
                 step=0.01)
    time.sleep(0.2)
    eq("SIGTERM while 6 bodies of 24 MiB stream in: the gateway exits 0", gw.stop(60), 0)
    for t in ts:
        t.join(60)
    check("... after acknowledging at least one of them (%d)" % len(acked), len(acked) >= 1,
          errs)
    if not gw.start():
        return
    c = gw.client()
    wrong = [k for k in acked if read(c, k)[0] != datas[k]]
    eq("... and every acknowledged one reads back byte for byte after a restart", wrong, [])


def main():
    T.init("test_body_threads")
    data = H.tmpdir("data")
    cfg = os.path.join(H.S.tmp, "body-threads.json")
    with open(cfg, "w") as f:
        # 130 connections from one address: more than a quarter of the
        # connections a low open-file limit would give
        json.dump({"body_threads": 1, "shutdown_grace_s": 60,
                   "connections": {"max": 400, "per_client": 400}}, f)
    gw = T.Gw("g", ["--data", data, "--config", cfg])
    if not gw.start():
        return
    eq("shardgate_body_threads is the configured 1",
       C.metric_sum(C.metrics(gw.port), "shardgate_body_threads"), 1.0)
    c = gw.client()
    c.create_bucket(Bucket="bkt")
    concurrent_puts(gw, c)
    errors(gw, c)
    cut_off(gw, c, data)
    buffers_run_out(gw, c)
    stop_while_bodies_stream(gw, data)
    eq("g stops with 0", gw.stop(), 0)
    md5_lanes(H.tmpdir("data-lanes"))


if __name__ == "__main__":
    H.run(main)
