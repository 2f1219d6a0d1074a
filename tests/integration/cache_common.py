"""tests/integration/cache_common.py - shared by the test_cache_*.py files: a
cold tier (shardgate A serving --data DIR, verifying SigV4 with its own
credentials; or moto), the caching gateway B in front of it (the harness's
gateway: H.S.proc / H.S.port, so H.check, H.boto3_client, H.raw and
H.finish work unchanged), /metrics parsing for both, and raw signed GETs
that can read part of a body, stop early or count bytes.

Cold-tier GETs are counted on the cold tier itself, independently of B:
shardgate A's own shardgate_requests_total{op="GetObject",...}.
"""

import atexit
import hashlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

MB = H.MB
COLD_ACCESS = "SGCOLDACCESSKEY00001"
COLD_SECRET = "cold/Secret+Key/abcdefghijklmnopqrstuvw"


def wait_port(port, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def clean_env():
    env = dict(os.environ)
    for k in list(env):
        if (k.startswith("SHARDGATE_") and k not in ("SHARDGATE_BIN", "SHARDGATE_SRC")) \
                or k.startswith("AWS_"):
            del env[k]
    return env


def need_clients(moto=False):
    try:
        import boto3  # noqa: F401
    except ImportError as e:
        H.skip_file("needs boto3: %s" % e)
    binp = os.environ.get("SHARDGATE_BIN")
    if not binp or not os.access(binp, os.X_OK):
        print("FAIL SHARDGATE_BIN not set or not executable: %r" % binp, flush=True)
        sys.exit(1)
    if H.EXT_ENDPOINT:
        H.skip_file("the cache tests need shardgate itself (SHARDGATE_TEST_ENDPOINT is set)")


def have_moto():
    try:
        import moto  # noqa: F401
        return True
    except ImportError:
        return False


def init(name):
    H.S.name = name
    H._ensure_tmp()


def both_modes(name, local, cache):
    """Runs a two-mode test file: local() on the directory store (it starts
    and stops the harness's gateway with H.start), then cache() with gateway B
    logging into a file of its own. Every process started here is stopped at
    exit."""
    init(name)
    atexit.register(stop_all)
    local()
    H.S.log_file.close()
    H.S.log_file = None
    cache()


# ---------------------------------------------------------------- processes

class Proc:
    """A server process we started (cold gateway, moto)."""

    def __init__(self, argv, env, log_name, port):
        self.argv, self.env, self.port = argv, env, port
        self.log_path = os.path.join(H.S.tmp, log_name)
        self.log = open(self.log_path, "ab")
        self.proc = None
        self.endpoint = "http://127.0.0.1:%d" % port
        _procs.append(self)

    def start(self, what):
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=self.env, cwd=H.S.tmp, stdin=subprocess.DEVNULL)
        if not wait_port(self.port):
            self.kill()
            H.check("%s starts" % what, False, self.tail())
            H.finish()
        return self

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        p = self.proc
        if p is None:
            return None
        self.proc = None
        if p.poll() is None:
            p.terminate()
            try:
                return p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
                return "killed"
        return p.returncode

    def kill(self):
        p = self.proc
        if p is None:
            return
        self.proc = None
        if p.poll() is None:
            p.kill()
            p.wait(10)

    def tail(self, n=40):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return "\n".join(f.read().decode("utf-8", "replace").splitlines()[-n:])

    def grep(self, word, n=20):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return [l for l in f.read().decode("utf-8", "replace").splitlines()
                    if word in l][-n:]


_procs = []


def stop_all():
    """Stops every process started here (the harness stops gateway B)."""
    for p in _procs:
        try:
            p.stop()
        except Exception:   # noqa
            pass


class ColdGateway(Proc):
    """Shardgate A: the posix store behind the cache, with its own credentials."""

    def __init__(self, data=None, port=None):
        port = port or H._free_port()
        self.data = data or tempfile.mkdtemp(prefix="sg-cold-", dir=H.S.tmp)
        env = clean_env()
        env.update(SHARDGATE_ACCESS_KEY=COLD_ACCESS, SHARDGATE_SECRET_KEY=COLD_SECRET,
                   SHARDGATE_LOG_LEVEL="info")
        argv = [os.environ["SHARDGATE_BIN"], "serve", "--listen", "127.0.0.1:%d" % port,
                "--data", self.data]
        Proc.__init__(self, argv, env, "cold-gateway.log", port)
        self.access, self.secret = COLD_ACCESS, COLD_SECRET

    def start(self, what="cold shardgate A"):
        return Proc.start(self, what)

    def client(self):
        return H.boto3_client(endpoint=self.endpoint, access=COLD_ACCESS, secret=COLD_SECRET)

    def path(self, bucket, key=""):
        return os.path.join(self.data, bucket, *(key.split("/") if key else []))

    def put_file(self, bucket, key, data):
        """Writes an object straight into A's directory store (fast for big ones)."""
        p = self.path(bucket, key)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)

    def put_random(self, bucket, key, size):
        """A random object of `size` bytes in A's directory; returns its sha256."""
        p = self.path(bucket, key)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return H.write_random_file(p, size)

    def metrics(self):
        return metrics(self.port, COLD_ACCESS, COLD_SECRET)

    def gets(self):
        """GetObject requests A answered (every status)."""
        return metric_sum(self.metrics(), "shardgate_requests_total", op="GetObject") or 0.0

    def heads(self):
        return metric_sum(self.metrics(), "shardgate_requests_total", op="HeadObject") or 0.0


class Moto(Proc):
    def __init__(self):
        port = H._free_port()
        env = clean_env()
        env.update(AWS_ACCESS_KEY_ID="moto", AWS_SECRET_ACCESS_KEY="moto")
        argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
        Proc.__init__(self, argv, env, "moto.log", port)
        self.access, self.secret = "moto", "moto"

    def start(self, what="moto"):
        return Proc.start(self, what)

    def client(self):
        return H.boto3_client(endpoint=self.endpoint, access="moto", secret="moto")


# ---------------------------------------------------------------- gateway B

class Cache:
    """Options of the caching gateway B (kept for restarts)."""

    def __init__(self, cold_url, access, secret, cache_dir=None, size="64MiB",
                 consistency=None, config=None, extra=None, tag="b", wrap=None):
        self.cold_url, self.access, self.secret = cold_url, access, secret
        self.cache_dir = cache_dir or tempfile.mkdtemp(prefix="sg-cache-", dir=H.S.tmp)
        self.size, self.consistency = size, consistency
        self.config, self.extra, self.tag = config, extra or [], tag
        self.wrap = wrap or []     # argv prefix: B runs under it (seccomp_exec.py, unshare)
        self.port = None


# SHARDGATE_TEST_CACHE_ENGINE=threads (set by tests/CMakeLists.txt for the
# ".threads" runs) starts every caching gateway B with that cache engine, so
# the cache suites exercise the pread/pwrite engine as well as io_uring.
ENGINE = os.environ.get("SHARDGATE_TEST_CACHE_ENGINE", "")


def start_cache(cfg, port=None, expect_ok=True):
    """Starts B as the harness's gateway. A config dict (cfg.config) is written
    to a file and passed with --config; flags are given too."""
    H.S.port = port or H._free_port()
    cfg.port = H.S.port
    H.S.host = "127.0.0.1"
    H.S.endpoint = "http://127.0.0.1:%d" % H.S.port
    if H.S.log_file is None:
        H.S.log_path = os.path.join(H.S.tmp, "gateway-%s.log" % cfg.tag)
        H.S.log_file = open(H.S.log_path, "ab")
    env = clean_env()
    env.update(SHARDGATE_ACCESS_KEY=H.ACCESS_KEY, SHARDGATE_SECRET_KEY=H.SECRET_KEY,
               SHARDGATE_LOG_LEVEL="info", AWS_ACCESS_KEY_ID=cfg.access,
               AWS_SECRET_ACCESS_KEY=cfg.secret)
    if ENGINE:
        env["SHARDGATE_CACHE_ENGINE"] = ENGINE
    argv = cfg.wrap + [os.environ["SHARDGATE_BIN"], "serve", "--listen",
                       "127.0.0.1:%d" % H.S.port, "--cold", cfg.cold_url,
                       "--cache-dir", cfg.cache_dir]
    if cfg.size:
        argv += ["--cache-size", str(cfg.size)]
    if cfg.consistency:
        argv += ["--consistency", cfg.consistency]
    if cfg.config is not None:
        p = os.path.join(H.S.tmp, "config-%s.json" % cfg.tag)
        # no users in it: the root credentials come from the environment
        with open(p, "w") as f:
            json.dump(cfg.config, f, indent=1)
        os.chmod(p, 0o600)
        argv += ["--config", p]
    argv += cfg.extra
    H.S.log_file.write(("#### start: %s\n" % " ".join(argv)).encode())
    H.S.log_file.flush()
    H.S.proc = subprocess.Popen(argv, stdout=H.S.log_file, stderr=subprocess.STDOUT, env=env,
                                cwd=H.S.tmp, stdin=subprocess.DEVNULL)
    deadline = time.time() + 15
    while time.time() < deadline and H.health(1.0) != 200:
        if H.S.proc.poll() is not None:
            break
        time.sleep(0.05)
    ok = H.health(1.0) == 200
    if expect_ok and not H.check("[%s] caching gateway B answers health" % cfg.tag, ok,
                                 H.log_tail(30)):
        H.finish()
    if ok and ENGINE:
        H.eq("[%s] B's cache engine is %s" % (cfg.tag, ENGINE),
             bm("shardgate_cache_engine", engine=ENGINE), 1.0)
    return ok


def kill9_cache():
    p = H.S.proc
    H.S.proc = None
    p.send_signal(signal.SIGKILL)
    p.wait(10)


def stop_cache(name="caching gateway exits 0 on SIGTERM", timeout=30):
    p = H.S.proc
    if p is None:
        return
    H.S.proc = None
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(10)
        rc = "no exit within %d s: killed" % timeout
    H.eq(name, rc, 0)


# ---------------------------------------------------------------- metrics

_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """{(name, frozenset(labels.items())): float}"""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            continue
        labels = frozenset(_LABEL.findall(m.group(3) or ""))
        try:
            out[(m.group(1), labels)] = float(m.group(4))
        except ValueError:
            pass
    return out


def metrics(port, access=None, secret=None):
    r = request(port, "GET", "/metrics", access=access, secret=secret)
    if r.status != 200:
        raise RuntimeError("GET /metrics on port %d: %d %r" % (port, r.status, r.body[:300]))
    return parse_metrics(r.body.decode("utf-8", "replace"))


def metric_sum(m, name, **labels):
    """Sum of every series of `name` whose labels include `labels`; None when
    the metric is absent altogether."""
    tot, found = 0.0, False
    for (n, ls), v in m.items():
        if n != name:
            continue
        d = dict(ls)
        if all(d.get(k) == v2 for k, v2 in labels.items()):
            tot += v
            found = True
    return tot if found else None


def bm(name="", **labels):
    """B's metrics (the harness gateway); bm("x") gives one value (0 if absent)."""
    m = metrics(H.S.port)
    if not name:
        return m
    v = metric_sum(m, name, **labels)
    return v if v is not None else 0.0


def bstats():
    """The cache counters of B in one dict with short names."""
    m = metrics(H.S.port)
    names = {"hits": "shardgate_cache_hits_total", "misses": "shardgate_cache_misses_total",
             "bytes": "shardgate_cache_bytes", "capacity": "shardgate_cache_capacity_bytes",
             "objects": "shardgate_cache_objects",
             "evictions": "shardgate_cache_evictions_total",
             "fills": "shardgate_cache_fills_total",
             "fills_failed": "shardgate_cache_fills_failed_total",
             "fills_done": "shardgate_cache_fills_done_total",
             "waiters": "shardgate_fill_waiters",
             "revalidations": "shardgate_cache_revalidations_total",
             "memory_hits": "shardgate_cache_memory_hits_total",
             "backend_bytes": "shardgate_backend_bytes_total"}
    out = {k: (metric_sum(m, v) or 0.0) for k, v in names.items()}
    out["backend_get"] = metric_sum(m, "shardgate_backend_requests_total", op="get") or 0.0
    out["backend_head"] = metric_sum(m, "shardgate_backend_requests_total", op="head") or 0.0
    for check in ("checksum", "md5", "none"):
        out["checked_" + check] = metric_sum(m, "shardgate_cache_fill_checks_total",
                                             check=check) or 0.0
    return out



def settled(timeout=30):
    """Waits until no fill of B runs (every fill started is done or failed):
    a fill publishes after its last byte went to the readers, so counts
    taken before that can still move."""
    def idle():
        s = bstats()
        return s["fills"] == s["fills_done"] + s["fills_failed"]
    return wait_until(idle, timeout)

def staging_settled(timeout=120):
    """Waits until B's stager has done all it may do now (it looked since the
    last hint, hinted read or end of a staged fill and found nothing to start,
    and no staged fill runs) and no fill of B runs, seen in one scrape. Asked
    of the gateway, not timed: what a count-based staging check waits for
    before each read instead of a pause that a loaded machine can outrun."""
    def done():
        m = metrics(H.S.port)
        fills = metric_sum(m, "shardgate_cache_fills_total") or 0.0
        ended = ((metric_sum(m, "shardgate_cache_fills_done_total") or 0.0)
                 + (metric_sum(m, "shardgate_cache_fills_failed_total") or 0.0))
        return metric_sum(m, "shardgate_prefetch_settled") == 1 and fills == ended
    return wait_until(done, timeout, step=0.005)


# ---------------------------------------------------------------- raw requests

def _signed(port, method, path, headers, body, access, secret, payload_hash=None):
    url = "http://127.0.0.1:%d%s" % (port, path)
    return H.sign_headers(method, url, headers or {}, body, access, secret,
                          payload_hash=payload_hash)


def request(port, method, path, headers=None, body=b"", access=None, secret=None,
            timeout=60):
    """One signed request to 127.0.0.1:port; returns H.Resp (body read fully)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        hdrs = _signed(port, method, path, headers, body, access, secret)
        c.request(method, path, body=body or None, headers=hdrs)
        r = c.getresponse()
        data = r.read() if method != "HEAD" else b""
        return H.Resp(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
    finally:
        c.close()


def open_get(port, path, headers=None, access=None, secret=None, timeout=60):
    """Starts a signed GET; returns (conn, response) with the body unread."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    hdrs = _signed(port, "GET", path, headers, b"", access, secret)
    c.request("GET", path, headers=hdrs)
    return c, c.getresponse()


class Got:
    """Result of a streamed GET: status, headers, sha256, byte count, error."""

    def __init__(self):
        self.status = None
        self.headers = {}
        self.n = 0
        self.sha = None
        self.body = None
        self.error = None
        self.t_first = None     # time of the first body byte (time.monotonic)
        self.t_head = None
        self.t_end = None

    def clen(self):
        v = self.headers.get("content-length")
        return int(v) if v is not None else None

    def __repr__(self):
        return "<Got %s n=%d clen=%s err=%s>" % (self.status, self.n, self.clen(), self.error)


def get_stream(port, path, headers=None, keep=False, limit=None, chunk=256 * 1024,
               timeout=60, access=None, secret=None):
    """GET that streams the body through sha256; stops after `limit` bytes
    when given (then closes the connection). Errors are recorded in .error."""
    g = Got()
    h = hashlib.sha256()
    parts = [] if keep else None
    c = None
    try:
        c, r = open_get(port, path, headers, access, secret, timeout)
        g.t_head = time.monotonic()
        g.status = r.status
        g.headers = {k.lower(): v for k, v in r.getheaders()}
        while True:
            want = chunk if limit is None else min(chunk, limit - g.n)
            if want <= 0:
                break
            b = r.read1(want) if hasattr(r, "read1") else r.read(want)
            if not b:
                break
            if g.t_first is None:
                g.t_first = time.monotonic()
            h.update(b)
            if keep:
                parts.append(b)
            g.n += len(b)
        if limit is None and g.clen() is not None and g.n != g.clen():
            g.error = "short body: %d of %d bytes" % (g.n, g.clen())
    except (OSError, http.client.HTTPException) as e:
        g.error = "%s: %s" % (type(e).__name__, e)
    finally:
        g.t_end = time.monotonic()
        if c is not None:
            try:
                if c.sock is not None:
                    # abort: RST instead of an orderly close, like a client going away
                    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                      b"\x01\x00\x00\x00\x00\x00\x00\x00")
            except OSError:
                pass
            c.close()
    g.sha = h.hexdigest()
    if keep:
        g.body = b"".join(parts)
    return g


def bget(key_path, **kw):
    """get_stream against B (the harness gateway, root credentials)."""
    return get_stream(H.S.port, key_path, **kw)


_MOUNTS = []


def tmpfs_mount(path, size="64m"):
    """Mounts a tmpfs of `size` at path (a small disk to fill). None when
    done, else why not (not root, or mount refused): the caller skips."""
    if os.geteuid() != 0:
        return "not root (euid %d): cannot mount a tmpfs" % os.geteuid()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s" % size, "tmpfs", path],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        return "mount -t tmpfs failed: %s" % r.stdout.decode("utf-8", "replace").strip()
    _MOUNTS.append(path)
    return None


def small_disk(name, size):
    """A tmpfs of `size` at a new temporary directory, unmounted at exit
    (after everything is stopped); skips the test (77) where it cannot be
    mounted. Call after init()."""
    mnt = H.tmpdir(name)
    why = tmpfs_mount(mnt, size)
    if why:
        H.skip_file(why)
    atexit.register(stop_all)
    atexit.register(tmpfs_unmount_all)   # runs first (LIFO) and stops everything itself
    return mnt


def tmpfs_unmount_all():
    """Stops every process (nothing may keep a mount busy), then unmounts
    what tmpfs_mount mounted. For atexit, registered after stop_all."""
    if not _MOUNTS:
        return
    H._stop_gateway(report=False)
    stop_all()
    while _MOUNTS:
        p = _MOUNTS.pop()
        if subprocess.run(["umount", p], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode != 0:
            subprocess.run(["umount", "-l", p], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        # the harness removed its temporary tree while the mount was in it:
        # what is left is the empty mount point and the tree's root
        for d in (p, os.path.dirname(p)):
            try:
                os.rmdir(d)
            except OSError:
                break


def wait_until(fn, timeout=30, step=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            v = fn()
        except Exception:   # noqa - e.g. the gateway is restarting
            v = None
        if v:
            return v
        time.sleep(step)
    return None


def restart_local(mode="local"):
    """Stops the harness's directory-store gateway and starts it again on the
    same directory and port (what a restart must keep), then waits for health."""
    H._stop_gateway(report=True)
    env = clean_env()
    env.update(SHARDGATE_ACCESS_KEY=H.ACCESS_KEY, SHARDGATE_SECRET_KEY=H.SECRET_KEY)
    H.S.proc = subprocess.Popen(
        [os.environ["SHARDGATE_BIN"], "serve", "--listen", "127.0.0.1:%d" % H.S.port,
         "--data", H.S.data_dir], stdout=H.S.log_file, stderr=subprocess.STDOUT, env=env,
        cwd=H.S.tmp, stdin=subprocess.DEVNULL)
    H.check("[%s] restarted gateway answers health" % mode,
            wait_until(lambda: H.health(1.0) == 200, timeout=15))
