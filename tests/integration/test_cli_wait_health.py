"""tests/integration/test_cli_wait_health.py - the client commands' answers to
a user (clients/cli/):

- `shardgate prefetch --wait` exits 1 when some objects could not be staged
  (a key list with missing keys, against a real caching gateway B in front of
  a cold shardgate A) and 0 when all were, naming the failed keys;
- its progress line on a terminal fits the terminal: a pseudo-terminal of
  80 and 40 columns (TIOCGWINSZ), and one without a size where $COLUMNS
  says 40. No redrawn line is wider than the terminal minus one; at 80
  columns the line carries bytes, rate and ETA. The job is served by a stub
  gateway on 127.0.0.1 so that its counters, rate and ETA are fixed (a real
  job of small shards ends before a rate is known);
- `shardgate health [--ready]` exits 0 on a 200, 1 on any other answer, no
  answer within --timeout (a stub that accepts and never answers) or no
  connection;
- the S3 error of a refused request is read as XML (entities decoded).
"""

import atexit
import fcntl
import http.server
import json
import os
import pty
import re
import select
import socket
import struct
import subprocess
import sys
import termios
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import cache_common as C  # noqa: E402

check, eq = H.check, H.eq
BUCKET = "datasets"
SHARDS = ["train/shard-%06d.tar" % i for i in range(6)]


def cli_env(**extra):
    env = C.clean_env()
    env.update(AWS_ACCESS_KEY_ID=H.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=H.SECRET_KEY)
    env.pop("COLUMNS", None)
    env.update(extra)
    return env


def sanitizer_clean(what, err):
    check("%s: no sanitizer report" % what,
          not ("AddressSanitizer" in err or "LeakSanitizer" in err or "runtime error:" in err),
          err[-1500:])


def cli(*args, env=None, timeout=120):
    rc, out, err = H.run_cmd([os.environ["SHARDGATE_BIN"]] + list(args), env=env or cli_env(),
                             timeout=timeout)
    sanitizer_clean("shardgate %s" % args[0], err)
    return rc, out, err


# ---------------------------------------------------------------- a stub gateway

class Stub:
    """An HTTP server on 127.0.0.1 answering what the test scripts: a hint is
    accepted as job "stub1" of a million objects, which reports `running`
    (with a rate and an ETA) for RUNNING polls, then `done`. Paths under
    /_shardgate/ answer from self.paths; /hang/... never answers."""

    RUNNING = 4

    def __init__(self):
        self.polls = 0
        self.hint = None
        self.paths = {}
        self.lock = threading.Lock()
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def answer(self, status, body, ctype="application/json"):
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                if self.path.startswith("/refuse"):
                    self.answer(400, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>"
                                "InvalidArgument</Code><Message>template &lt;a{}&gt; &amp; "
                                "more</Message></Error>", "application/xml")
                    return
                stub.hint = json.loads(body)
                self.answer(202, json.dumps({"job": "stub1", "bucket": BUCKET,
                                             "objects": 1000000, "state": "queued"}))

            def do_GET(self):
                if self.path in stub.paths:
                    status, body = stub.paths[self.path]
                    self.answer(status, body, "text/plain")
                    return
                with stub.lock:
                    stub.polls += 1
                    n = stub.polls
                running = n <= Stub.RUNNING
                done = 1000000 if not running else 100000 * n
                job = {"job": "stub1", "bucket": BUCKET, "state": "running" if running else "done",
                       "ordered": False,
                       "objects": {"total": 1000000, "cached": 20000, "staged": done - 20000,
                                   "failed": 0, "pending": 1000000 - done},
                       "bytes": {"total": 10 * 2 ** 40, "done": done * 10 * 2 ** 20},
                       "rate_bytes_per_s": 512e6 if running else None,
                       "eta_s": 12345 if running else None, "errors": []}
                self.answer(200, json.dumps(job))

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.srv.daemon_threads = True
        self.port = self.srv.server_address[1]
        self.endpoint = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    def reset(self):
        with self.lock:
            self.polls = 0
            self.hint = None

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


def run_on_pty(argv, env, cols, timeout=60):
    """Runs argv with stdout on a pseudo-terminal of `cols` columns (0: no
    size set). Returns (rc, what the terminal received, stderr)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
    p = subprocess.Popen(argv, stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         env=env)
    os.close(slave)
    chunks = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                data = os.read(master, 65536)
            except OSError:       # EIO: the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        elif p.poll() is not None:
            # drain what is left
            try:
                while select.select([master], [], [], 0.1)[0]:
                    data = os.read(master, 65536)
                    if not data:
                        break
                    chunks.append(data)
            except OSError:
                pass
            break
    if p.poll() is None:
        p.kill()
    rc = p.wait(10)
    err = p.stderr.read().decode("utf-8", "replace")
    p.stderr.close()
    os.close(master)
    return rc, b"".join(chunks).decode("utf-8", "replace"), err


def drawn_lines(out):
    """The progress lines as drawn: each piece after a \\r up to the next \\r
    or line end (trailing padding spaces kept: they are columns too)."""
    out = out.replace("\r\n", "\n")
    return [seg for line in out.split("\n") for seg in line.split("\r")[1:]]


def width_checks(stub):
    argv = [os.environ["SHARDGATE_BIN"], "prefetch", "--endpoint", stub.endpoint,
            "s3://%s/train/shard-{000000..999999}.tar" % BUCKET, "--wait"]
    for cols, env_cols, tag in ((80, None, "80 columns"), (40, None, "40 columns"),
                                (0, "40", "no terminal size, COLUMNS=40")):
        stub.reset()
        env = cli_env(**({"COLUMNS": env_cols} if env_cols else {}))
        rc, out, err = run_on_pty(argv, env, cols)
        sanitizer_clean("prefetch --wait on a terminal (%s)" % tag, err)
        width = cols or int(env_cols)
        eq("[%s] the hint sent is the template, as JSON" % tag, stub.hint,
           {"template": "train/shard-{000000..999999}.tar"})
        lines = drawn_lines(out)
        wide = [l for l in lines if len(l) > width - 1]
        check("[%s] the job is followed to its end: exit 0, %d redrawn lines" % (tag, len(lines)),
              rc == 0 and len(lines) >= Stub.RUNNING, (rc, out[-600:], err[-600:]))
        check("[%s] no redrawn line is wider than %d columns" % (tag, width - 1),
              lines and not wide, wide[:3] or out[-400:])
        check("[%s] every line starts with the counters" % tag,
              lines and all(l.startswith("objects ") for l in lines), lines[:3])
        running = [l for l in lines if "/1000000" in l and not l.startswith("objects 1000000/")]
        if cols == 80:
            check("[80 columns] while running, the line has bytes, rate and ETA",
                  running and all(re.search(r"bytes \S+ \S+/10\.0 TiB", l) and "512 MB/s" in l
                                  and "eta 12345 s" in l for l in running), running[:2])
        else:
            check("[%s] while running, the narrow line keeps the counters and failures" % tag,
                  running and all(re.match(r"^objects \d+/1000000, failed 0 *$", l)
                                  for l in running), running[:2])


def health_checks(stub):
    stub.paths["/_shardgate/health"] = (200, "ok\n")
    stub.paths["/_shardgate/ready"] = (503, "not ready: cold tier http://cold:9000 "
                                            "unreachable\n")
    rc, out, err = cli("health", "--endpoint", stub.endpoint)
    check("health: 200 -> exit 0, prints the answer", rc == 0 and out.strip() == "ok",
          (rc, out, err))
    rc, out, err = cli("health", "--endpoint", stub.endpoint + "/", "--ready")
    check("health --ready: 503 -> exit 1, shows the status and the reason",
          rc == 1 and "503" in err and "cold tier http://cold:9000 unreachable" in err,
          (rc, out, err))
    rc, out, err = cli("health", "--bogus")
    eq("health: unknown option -> exit 2", rc, 2)
    rc, out, err = cli("health", "--endpoint", "ftp://127.0.0.1:1")
    eq("health: not an http URL -> exit 2", rc, 2)

    # no connection: a port nobody listens on
    dead = H._free_port()
    rc, out, err = cli("health", "--endpoint", "http://127.0.0.1:%d" % dead)
    check("health: nothing listening -> exit 1 naming the URL",
          rc == 1 and "127.0.0.1:%d/_shardgate/health" % dead in err, (rc, out, err))

    # a server that accepts the connection and never answers
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)
    try:
        t0 = time.time()
        rc, out, err = cli("health", "--endpoint", "http://127.0.0.1:%d" % ls.getsockname()[1],
                           "--timeout", "1", timeout=60)
        dt = time.time() - t0
        check("health --timeout 1 against a hung server: exit 1 within 10 s",
              rc == 1 and dt < 10, (rc, dt, out, err))
    finally:
        ls.close()


def error_checks(stub):
    rc, out, err = cli("prefetch", "--endpoint", stub.endpoint + "/refuse",
                       "s3://%s/a{}.tar" % BUCKET)
    check("a refused hint: exit 3 with the S3 error's code and its decoded message",
          rc == 3 and "400 InvalidArgument: template <a{}> & more" in err, (rc, out, err))


# ---------------------------------------------------------------- a real gateway

def exit_code_checks(a):
    ep = H.S.endpoint
    kf = os.path.join(H.S.tmp, "keys.txt")
    missing = ["train/missing-1.tar", "train/missing-2.tar"]
    with open(kf, "w") as f:
        f.write("\n".join(SHARDS[:3] + missing) + "\n")
    rc, out, err = cli("prefetch", "--endpoint", ep, "s3://%s" % BUCKET, "--keys-file", kf,
                       "--wait")
    check("prefetch --wait with 2 of 5 keys missing: exit 1", rc == 1, (rc, out, err))
    check("... the summary counts 2 failed", re.search(
        r"^job \S+ (done|failed): 5 objects \(cached \d+, staged \d+, failed 2\)", out, re.M), out)
    check("... stderr names each missing key with NoSuchKey and the count",
          all(re.search(r"^  %s: NoSuchKey$" % re.escape(k), err, re.M) for k in missing)
          and "2 of 5 objects could not be staged" in err, err)

    with open(kf, "w") as f:
        f.write("\n".join(SHARDS) + "\n")
    rc, out, err = cli("prefetch", "--endpoint", ep, "s3://%s" % BUCKET, "--keys-file", kf,
                       "--wait")
    check("prefetch --wait with every key present: exit 0, failed 0",
          rc == 0 and re.search(r"^job \S+ done: 6 objects \(cached 3, staged 3, failed 0\)",
                                out, re.M), (rc, out, err))

    rc, out, err = cli("health", "--endpoint", ep)
    check("health against the real gateway: exit 0", rc == 0 and out.strip(), (rc, out, err))


def main():
    C.need_clients()
    C.init("test_cli_wait_health")
    atexit.register(C.stop_all)
    stub = Stub()
    atexit.register(stub.stop)

    width_checks(stub)
    health_checks(stub)
    error_checks(stub)

    a = C.ColdGateway().start()
    for i, k in enumerate(SHARDS):
        a.put_file(BUCKET, k, os.urandom(1000 + 100 * i))
    C.start_cache(C.Cache(a.endpoint, a.access, a.secret, consistency="immutable", tag="b"))
    exit_code_checks(a)
    C.stop_cache()
    a.stop()


H.run(main)
