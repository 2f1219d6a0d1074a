"""tests/integration/fake_tier.py - a misbehaving S3 cold tier on 127.0.0.1
for the tests of deadlines and readiness, in a thread of the test process
(standard library only). It counts the request heads it receives and, per
mode (switchable while it runs):
  "mute"    accepts connections and reads requests, never writes a byte
            (a hung tier: what a SIGSTOPped or wedged server looks like);
  "forbid"  answers every request 403 at once (reachable, says no);
  "error"   answers every request (or those of `methods`, the others an
            empty 200) with `error` = (status, code, message): an S3 <Error>
            body (none to a HEAD), then closes the connection (a request
            body is never read);
  "trickle" answers GET of a key ending in "slow" with 200, its headers at
            once and the body SLOW_BODY a byte every `trickle_s`; HEAD of
            it with the headers; everything else like "mute".
Requests are expected to have no body (reads, listings, probes).
"""

import hashlib
import socket
import threading
import time

SLOW_BODY = b"slow-but-flowing-body-0123456789"
SLOW_ETAG = hashlib.md5(SLOW_BODY).hexdigest()


class FakeTier:
    def __init__(self, mode="mute", trickle_s=0.1, error=(500, "InternalError", "boom")):
        self.mode = mode
        self.error = error
        self.methods = None        # "error" mode: every method
        self.trickle_s = trickle_s
        self.lock = threading.Lock()
        self.requests = 0
        self.heads = []          # request lines, in order
        self.stopping = False
        self.conns = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def set_mode(self, mode, error=None, methods=None):
        with self.lock:
            self.mode = mode
            self.methods = methods
            if error:
                self.error = error

    def count_of(self, method):
        """Request heads received so far with this method."""
        with self.lock:
            return sum(1 for h in self.heads if h.startswith(method + " "))

    def count(self):
        with self.lock:
            return self.requests

    def _accept(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _answer(self, c, line):
        with self.lock:
            mode, error, methods = self.mode, self.error, self.methods
        method, _, rest = line.partition(" ")
        path = rest.partition(" ")[0].split("?")[0]
        if mode == "forbid":
            c.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
        elif mode == "error" and methods is not None and method not in methods:
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            raise ConnectionAbortedError("closed after the answer")
        elif mode == "error":
            status, code, message = error
            body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code>"
                    "<Message>%s</Message><RequestId>fake</RequestId></Error>"
                    % (code, message)).encode()
            c.sendall(("HTTP/1.1 %d Error\r\nContent-Type: application/xml\r\n"
                       "Content-Length: %d\r\nConnection: close\r\n\r\n"
                       % (status, 0 if method == "HEAD" else len(body))).encode() +
                      (b"" if method == "HEAD" else body))
            raise ConnectionAbortedError("closed after an error")
        elif mode == "trickle" and path.endswith("slow"):
            c.sendall(("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nETag: \"%s\"\r\n"
                       "Last-Modified: Wed, 21 Oct 2015 07:28:00 GMT\r\n"
                       "Content-Type: application/octet-stream\r\n\r\n"
                       % (len(SLOW_BODY), SLOW_ETAG)).encode())
            if method != "HEAD":
                for i in range(len(SLOW_BODY)):
                    if self.stopping:
                        return
                    time.sleep(self.trickle_s)
                    c.sendall(SLOW_BODY[i:i + 1])
        # "mute" (and anything else in "trickle"): no answer at all

    def _serve(self, c):
        buf = b""
        c.settimeout(0.2)
        try:
            while not self.stopping:
                try:
                    d = c.recv(65536)
                except socket.timeout:
                    continue
                if not d:
                    return
                buf += d
                while b"\r\n\r\n" in buf:
                    head, buf = buf.split(b"\r\n\r\n", 1)
                    line = head.split(b"\r\n", 1)[0].decode("latin-1")
                    with self.lock:
                        self.requests += 1
                        self.heads.append(line)
                    self._answer(c, line)
        except OSError:
            pass
        finally:
            try:
                c.close()
            except OSError:
                pass

    def stop(self):
        self.stopping = True
        try:
            self.sock.close()
        except OSError:
            pass
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.close()
            except OSError:
                pass
        self.thread.join(5)
