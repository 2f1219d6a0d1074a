"""tests/integration/test_framing.py - request smuggling (issue 10, finding
14). A request whose body length two HTTP parsers would read differently
gets 400 and the connection is closed (RFC 9112 6.1 and 6.3): no byte
after its headers is ever run as a second request. Raw sockets: each case
sends one request with a second, smuggled request after it, reads until
the server closes, and counts the responses."""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import front_common as F  # noqa: E402

check, eq = H.check, H.eq

# asks to close after it, so that a server that runs it ends the test at once
SMUGGLED = b"GET /_shardgate/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def read_all(s, deadline_s=15.0):
    """Bytes until the server closes (EOF or reset), or the deadline;
    returns (data, closed)."""
    s.settimeout(0.5)
    data = b""
    end = time.time() + deadline_s
    while time.time() < end:
        try:
            b = s.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return data, True
        if not b:
            return data, True
        data += b
    return data, False


def parse_responses(data):
    """[(status, headers)] of the HTTP responses in data, in order."""
    out = []
    while data.startswith(b"HTTP/1."):
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            break
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        hdrs = {}
        for l in lines[1:]:
            k, _, v = l.partition(b":")
            hdrs[k.strip().lower().decode()] = v.strip().decode()
        n = int(hdrs.get("content-length", "0"))
        out.append((status, hdrs))
        data = rest[n:]
    return out


def send_raw(port, method, path, headers, body, sign=True, payload=None):
    """Sends one request with exactly these header lines (duplicates kept)
    and body in one write; returns (responses, closed). Signed over
    `payload` (the decoded body), or UNSIGNED-PAYLOAD when None."""
    lines = [("Host", "127.0.0.1:%d" % port)]
    if sign:
        signed = H.sign_headers(method, "http://127.0.0.1:%d%s" % (port, path), body=payload or b"",
                                payload_hash=None if payload is not None else "UNSIGNED-PAYLOAD")
        lines += [(k, v) for k, v in signed.items() if k.lower() != "host"]
    lines += headers
    req = ("%s %s HTTP/1.1\r\n" % (method, path)).encode()
    req += b"".join(("%s: %s\r\n" % kv).encode() for kv in lines) + b"\r\n" + body
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(req)
        data, closed = read_all(s)
    finally:
        s.close()
    return parse_responses(data), closed


def expect_refused(port, name, headers, body, sign=True):
    resps, closed = send_raw(port, "PUT", "/framing/obj-%d" % int(time.time() * 1e6), headers, body,
                             sign)
    statuses = [st for st, _ in resps]
    eq("%s: one response, 400" % name, statuses, [400])
    check("%s: the 400 says Connection: close" % name,
          resps and resps[0][1].get("connection", "").lower() == "close", resps)
    check("%s: the server closes the connection (the smuggled request is never run)" % name,
          closed, resps)


def main():
    g = F.start_gw("framing")
    if not check("gateway starts", g.health() == 200, g.log()[-2000:]):
        return
    os.makedirs(os.path.join(g.data_dir, "framing"), exist_ok=True)
    port = g.port

    # the chunked body ends at "0\r\n\r\n": what follows would be a request
    chunked = b"0\r\n\r\n" + SMUGGLED
    expect_refused(port, "Transfer-Encoding and Content-Length",
                   [("Transfer-Encoding", "chunked"), ("Content-Length", "5")], chunked)
    expect_refused(port, "Content-Length before Transfer-Encoding",
                   [("Content-Length", str(len(chunked))), ("Transfer-Encoding", "chunked")],
                   chunked)
    expect_refused(port, "the same, unauthenticated",
                   [("Transfer-Encoding", "chunked"), ("Content-Length", "5")], chunked,
                   sign=False)
    # two lengths: 5 bytes by the first, the rest by the second
    expect_refused(port, "two different Content-Length values",
                   [("Content-Length", "5"), ("Content-Length", str(5 + len(SMUGGLED)))],
                   b"hello" + SMUGGLED)
    expect_refused(port, "a Content-Length list",
                   [("Content-Length", "5, 5")], b"hello" + SMUGGLED)
    expect_refused(port, "two Transfer-Encoding lines",
                   [("Transfer-Encoding", "chunked"), ("Transfer-Encoding", "identity")],
                   chunked)
    expect_refused(port, "a Transfer-Encoding other than chunked",
                   [("Transfer-Encoding", "gzip, chunked")], chunked)

    # unambiguous framing keeps working, keep-alive included
    resps, _ = send_raw(port, "PUT", "/framing/same-length-twice",
                        [("Content-Length", "5"), ("Content-Length", "5")],
                        b"hello" + SMUGGLED, payload=b"hello")
    eq("the same Content-Length twice is one length: PUT and the next request answered",
       [st for st, _ in resps], [200, 200])
    resps, _ = send_raw(port, "PUT", "/framing/plain", [("Content-Length", "5")], b"hello" + SMUGGLED,
                        payload=b"hello")
    eq("a plain PUT and a pipelined request on one connection are both answered",
       [st for st, _ in resps], [200, 200])
    resps, _ = send_raw(port, "PUT", "/framing/chunked", [("Transfer-Encoding", "chunked")],
                        b"5\r\nhello\r\n0\r\n\r\n" + SMUGGLED, payload=b"hello")
    eq("a chunked PUT and a pipelined request are both answered",
       [st for st, _ in resps], [200, 200])
    check("gateway still answers", g.health() == 200)
    check("the refusals are logged", "ambiguous framing" in g.log(), g.log()[-1500:])
    eq("gateway exits 0 on SIGTERM", g.stop(), 0)


H.S.name = "test_framing"
H.run(main)
