"""tests/integration/harness.py - starts one shardgate on 127.0.0.1 for a test
file, hands out clients (boto3, aws-cli env, raw SigV4-signed HTTP), records
checks and stops the gateway at the end (SIGTERM must give exit code 0).

Developer mode: with SHARDGATE_TEST_ENDPOINT set (e.g. a moto server started
with `python3 -m moto.server -H 127.0.0.1 -p 5555`) no gateway is started and
the checks that only make sense against shardgate (signature rejection, tricks
with the data directory) are reported as skipped.

Importable by /usr/bin/python3 (Debian boto3 1.26) and the pyenv python3
(boto3 1.43): standard library at module level, botocore imported lazily.
"""

import atexit
import fcntl
import hashlib
import http.client
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
import xml.etree.ElementTree as ET

ACCESS_KEY = "SGTESTACCESSKEY00001"
SECRET_KEY = "sgtest/Secret+Key/0123456789abcdefghijklmn"
REGION = "us-east-1"
SKIP = 77

EXT_ENDPOINT = os.environ.get("SHARDGATE_TEST_ENDPOINT", "").rstrip("/")
MB = 1024 * 1024


class State:
    def __init__(self):
        self.name = ""
        self.passed = 0
        self.failed = 0
        self.skipped = 0
        self.failures = []
        self.proc = None
        self.log_path = None
        self.log_file = None
        self.tmp = None
        self.data_dir = None
        self.port = None
        self.endpoint = None
        self.host = "127.0.0.1"
        self.vhost_domain = None
        self.finished = False
        self.lock = threading.Lock()


S = State()


# ---------------------------------------------------------------- checks

def check(name, cond, detail="", moto_deviates=False):
    """Records one check; prints one line. Returns bool(cond).
    moto_deviates: AWS S3 behaves as checked but moto does not; in developer
    mode against an external endpoint a failure is then reported as a skip."""
    ok = bool(cond)
    if not ok and moto_deviates and EXT_ENDPOINT:
        skip(name, "known moto deviation from S3: %s" % (detail,))
        return False
    with S.lock:
        if ok:
            S.passed += 1
            print("PASS %s" % name, flush=True)
        else:
            S.failed += 1
            S.failures.append(name)
            d = str(detail)
            if len(d) > 1500:
                d = d[:1500] + "..."
            print("FAIL %s%s" % (name, (": " + d) if d else ""), flush=True)
    return ok


def skip(name, reason):
    """A check that cannot run in this mode (moto developer mode)."""
    with S.lock:
        S.skipped += 1
    print("SKIP %s (%s)" % (name, reason), flush=True)


def is_shardgate():
    """True when the checks run against a shardgate started by the harness."""
    return not EXT_ENDPOINT


def shardgate_only(name):
    """Returns True when a shardgate-only check may run, else records a skip."""
    if is_shardgate():
        return True
    skip(name, "shardgate-only; SHARDGATE_TEST_ENDPOINT is set")
    return False


def eq(name, got, want, moto_deviates=False):
    return check(name, got == want, "got %r, want %r" % (_short(got), _short(want)),
                 moto_deviates)


def _short(v):
    s = v if not isinstance(v, (bytes, bytearray)) else bytes(v)
    r = repr(s)
    return s if len(r) < 300 else r[:300] + "..."


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(4 * MB)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def md5(data):
    return hashlib.md5(data).hexdigest()


def skip_file(reason):
    """Skips the whole test file (exit 77) - only for a missing client."""
    print("SKIP: %s" % reason, flush=True)
    _stop_gateway(report=False)
    _cleanup()
    S.finished = True
    sys.exit(SKIP)


# ---------------------------------------------------------------- gateway

# Ports for the servers a test starts. A port from bind(0) lies in the
# kernel's ephemeral range, which every outgoing connection draws from too:
# between closing the probe socket and the server's own bind (1-2 s for a
# sanitizer-built gateway on a loaded machine) another test's client
# connection took it ("cannot listen on 127.0.0.1:60301: Address already in
# use", three suites at once). So a port comes from below that range, where
# the kernel never hands one out, and a lock file per port, held for this
# process's life, keeps concurrent tests (ctest -j, suites side by side) from
# choosing the same one.
_PORT_LOCKS = []
_PORT_LOW = 10000
_PORT_BENCH = 28300   # bench.smoke scans up from here (BENCH_PORT_BASE, tests/CMakeLists.txt)


def _port_range():
    lo = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return _PORT_LOW, min(lo, _PORT_BENCH) - 1


def _free_port():
    return free_ports(1)


def free_ports(count):
    """The first of count consecutive free ports, each locked for this
    process's life (a server of several ports: Ceph's monitor, OSD and
    radosgw take 31)."""
    lo, hi = _port_range()
    if hi - lo < 1000:   # an unusual ephemeral range: the old way
        if count != 1:
            raise RuntimeError("no range below the ephemeral ports for %d ports" % count)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        return port
    d = os.path.join(tempfile.gettempdir(), "shardgate-test-ports")
    os.makedirs(d, exist_ok=True)
    rnd = random.SystemRandom()   # concurrent tests start at different places
    for _ in range(2000):
        base = rnd.randint(lo, hi - count + 1)
        fds = []
        for port in range(base, base + count):
            fd = _lock_port(d, port)
            if fd is None:
                break
            fds.append(fd)
        if len(fds) == count:
            _PORT_LOCKS.extend(fds)   # released when this process exits
            return base
        for fd in fds:
            os.close(fd)
    raise RuntimeError("no %d free ports in %d-%d" % (count, lo, hi))


def _lock_port(d, port):
    """A lock on port's file in d and a successful bind, or None: another
    test holds it, or something that is not a test of ours uses it."""
    fd = os.open(os.path.join(d, str(port)), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        os.close(fd)
        return None
    finally:
        s.close()
    return fd


def log_tail(n=60):
    if not S.log_path or not os.path.exists(S.log_path):
        return ""
    if S.log_file:
        S.log_file.flush()
    with open(S.log_path, "rb") as f:
        lines = f.read().decode("utf-8", "replace").splitlines()
    return "\n".join(lines[-n:])


def log_grep(word, n=20):
    """Lines of the gateway log containing `word` (for failure details)."""
    if not S.log_path or not os.path.exists(S.log_path):
        return []
    with open(S.log_path, "rb") as f:
        lines = f.read().decode("utf-8", "replace").splitlines()
    return [l for l in lines if word in l][-n:]


def health(timeout=2.0):
    """Status of GET /_shardgate/health (unauthenticated), or None."""
    try:
        c = http.client.HTTPConnection(S.host, S.port, timeout=timeout)
        c.request("GET", "/_shardgate/health")
        r = c.getresponse()
        r.read()
        c.close()
        return r.status
    except (OSError, http.client.HTTPException):
        return None


def alive():
    """True when the gateway (or the external endpoint) still answers."""
    if is_shardgate():
        if S.proc is None or S.proc.poll() is not None:
            return False
        return health() == 200
    try:
        c = http.client.HTTPConnection(S.host, S.port, timeout=5)
        c.request("GET", "/")
        c.getresponse().read()
        return True
    except (OSError, http.client.HTTPException):
        return False


def start(name, vhost=False):
    """Starts the gateway (or attaches to SHARDGATE_TEST_ENDPOINT). Call once."""
    S.name = name
    _ensure_tmp()
    if EXT_ENDPOINT:
        u = urllib.parse.urlsplit(EXT_ENDPOINT)
        S.endpoint = EXT_ENDPOINT
        S.host = u.hostname
        S.port = u.port or 80
        print("# %s: developer mode against %s (shardgate-only checks skipped)"
              % (name, EXT_ENDPOINT), flush=True)
        return S
    binp = os.environ.get("SHARDGATE_BIN")
    if not binp or not os.access(binp, os.X_OK):
        print("FAIL SHARDGATE_BIN not set or not executable: %r" % binp, flush=True)
        sys.exit(1)
    S.data_dir = tempfile.mkdtemp(prefix="sg-data-", dir=S.tmp)
    S.port = _free_port()
    S.host = "127.0.0.1"
    S.endpoint = "http://127.0.0.1:%d" % S.port
    S.log_path = os.path.join(S.tmp, "gateway.log")
    S.log_file = open(S.log_path, "wb")
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("SHARDGATE_") and k not in ("SHARDGATE_BIN", "SHARDGATE_SRC"):
            del env[k]
    env.update(SHARDGATE_ACCESS_KEY=ACCESS_KEY, SHARDGATE_SECRET_KEY=SECRET_KEY,
               SHARDGATE_LOG_LEVEL="info")
    argv = [binp, "serve", "--listen", "127.0.0.1:%d" % S.port, "--data", S.data_dir]
    if vhost:
        S.vhost_domain = "localhost"
        argv += ["--vhost-domain", "localhost"]
    S.proc = subprocess.Popen(argv, stdout=S.log_file, stderr=subprocess.STDOUT, env=env,
                              cwd=S.tmp, stdin=subprocess.DEVNULL)
    deadline = time.time() + 15
    st = None
    while time.time() < deadline:
        if S.proc.poll() is not None:
            break
        st = health(timeout=1.0)
        if st == 200:
            break
        time.sleep(0.1)
    if st != 200:
        rc = S.proc.poll()
        check("gateway answers /_shardgate/health 200 within 15 s", False,
              "status %r, exit code %r" % (st, rc))
        print("---- gateway log tail ----\n%s\n----" % log_tail(), flush=True)
        if rc is None:
            S.proc.kill()
            S.proc.wait(10)
        S.proc = None
        _summary_exit()
    print("# %s: shardgate pid %d on %s, data %s" % (name, S.proc.pid, S.endpoint, S.data_dir),
          flush=True)
    return S


def _stop_gateway(report=True):
    p = S.proc
    if p is None:
        return
    S.proc = None
    if p.poll() is not None:
        if report:
            check("gateway still running at the end", False, "exited early with %r" % p.returncode)
        return
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(10)
        if report:
            check("gateway exits 0 within 30 s of SIGTERM", False, "killed with SIGKILL")
        return
    if report:
        check("gateway exits 0 within 30 s of SIGTERM", rc == 0, "exit code %r" % rc)


def gateway_pid():
    return S.proc.pid if S.proc else None


def proc_status(field):
    """VmHWM / VmRSS of the gateway in KiB, or None."""
    pid = gateway_pid()
    if not pid:
        return None
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _cleanup():
    if S.log_file:
        S.log_file.close()
        S.log_file = None
    if S.tmp and os.environ.get("SHARDGATE_KEEP_TMP") != "1":
        shutil.rmtree(S.tmp, ignore_errors=True)


def _summary_exit():
    S.finished = True
    _stop_gateway(report=True)
    if S.failed and S.log_path:
        print("---- gateway log tail ----\n%s\n----" % log_tail(), flush=True)
    print("%s: %d passed, %d failed, %d skipped" % (S.name, S.passed, S.failed, S.skipped),
          flush=True)
    if S.failed:
        print("failed checks: %s" % "; ".join(S.failures), flush=True)
    _cleanup()
    if S.passed == 0 and S.failed == 0:
        sys.exit(1)        # a test file that asserted nothing has not passed
    sys.exit(1 if S.failed else 0)


def finish():
    _summary_exit()


def run(main):
    """Runs main(); an uncaught exception is a failed check, not a crash
    that leaves the gateway running."""
    try:
        main()
    except SystemExit:
        raise
    except BaseException as e:   # noqa - report everything, then clean up
        traceback.print_exc()
        check("test body ran to the end", False, "%s: %s" % (type(e).__name__, e))
    finish()


def _atexit():
    if not S.finished:
        _stop_gateway(report=False)
        _cleanup()


# ---------------------------------------------------------------- data dir

def direct_path(bucket, key=""):
    """Path of bucket/key inside the data dir (shardgate-only)."""
    assert S.data_dir
    parts = [p for p in key.split("/")] if key else []
    return os.path.join(S.data_dir, bucket, *parts)


def direct_put(bucket, key, data):
    """Writes an object straight into the posix store (shardgate-only)."""
    p = direct_path(bucket, key)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(data)


def direct_put_many(bucket, keys, data_for=lambda k: k.encode()):
    os.makedirs(direct_path(bucket), exist_ok=True)
    made = set()
    for k in keys:
        p = direct_path(bucket, k)
        d = os.path.dirname(p)
        if d not in made:
            os.makedirs(d, exist_ok=True)
            made.add(d)
        with open(p, "wb") as f:
            f.write(data_for(k))


def _ensure_tmp():
    if S.tmp is None:
        S.tmp = tempfile.mkdtemp(prefix="sg-it-")
        atexit.register(_atexit)


def tmpdir(name):
    _ensure_tmp()
    p = os.path.join(S.tmp, name)
    os.makedirs(p, exist_ok=True)
    return p


def write_random_file(path, size):
    """os.urandom in 1 MiB blocks; returns the sha256."""
    h = hashlib.sha256()
    with open(path, "wb") as f:
        left = size
        while left > 0:
            b = os.urandom(min(MB, left))
            h.update(b)
            f.write(b)
            left -= len(b)
    return h.hexdigest()


# ---------------------------------------------------------------- clients

def boto3_client(style="path", endpoint=None, access=None, secret=None, **cfg):
    import boto3
    from botocore.config import Config
    conf = Config(s3={"addressing_style": style}, signature_version="s3v4",
                  retries={"max_attempts": 1, "mode": "standard"},
                  connect_timeout=10, read_timeout=120, **cfg)
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint or S.endpoint, region_name=REGION,
        aws_access_key_id=access or ACCESS_KEY, aws_secret_access_key=secret or SECRET_KEY,
        config=conf)


def aws_env(v2=False):
    """Environment for aws-cli: only our credentials, no user profile."""
    home = tmpdir("awshome")
    cfg = os.path.join(home, "config")
    cred = os.path.join(home, "credentials")
    for p in (cfg, cred):
        if not os.path.exists(p):
            open(p, "w").close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(HOME=home, AWS_CONFIG_FILE=cfg, AWS_SHARED_CREDENTIALS_FILE=cred,
               AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
               AWS_DEFAULT_REGION=REGION, AWS_EC2_METADATA_DISABLED="true",
               AWS_RETRY_MODE="standard", AWS_MAX_ATTEMPTS="1")
    if "PYENV_ROOT" not in env and os.path.isdir("/root/.pyenv"):
        env["PYENV_ROOT"] = "/root/.pyenv"   # the pyenv shim finds its root
    if v2:
        env["AWS_PAGER"] = ""
    return env


class Resp:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers      # lower-case names
        self.body = body

    def header(self, name, default=None):
        return self.headers.get(name.lower(), default)

    def error(self):
        return parse_error(self.body)

    def __repr__(self):
        return "<%d %s>" % (self.status, self.body[:200])


def parse_error(body):
    """{'Code':..,'Message':..,'Resource':..,'RequestId':..} of an S3 error
    body, or None when it is not <Error> XML."""
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return None
    tag = root.tag.split("}")[-1]
    if tag != "Error":
        return None
    out = {}
    for child in root:
        out[child.tag.split("}")[-1]] = child.text or ""
    return out


def sign_headers(method, url, headers=None, body=b"", access=None, secret=None,
                 payload_hash=None):
    """Signs like an SDK (S3 SigV4, path taken as-is) and returns the header
    dict to send. `url` is what the signer sees: scheme://host[:port]/raw/path?q."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    req = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
    signer = S3SigV4Auth(Credentials(access or ACCESS_KEY, secret or SECRET_KEY), "s3", REGION)
    if payload_hash is not None:
        # botocore replaces any x-amz-content-sha256 with its own payload()
        # (over http: the body's SHA-256), so the given one goes in there
        signer.payload = lambda request: payload_hash
    signer.add_auth(req)
    return dict(req.headers.items())


def raw(method, path, query="", headers=None, body=b"", sign=True, access=None, secret=None,
        host_header=None, timeout=60, payload_hash=None, sign_path=None):
    """One HTTP request with the raw path exactly as given (no normalisation),
    optionally signed (over sign_path instead of path when given). Returns Resp."""
    host_header = host_header or ("%s:%d" % (S.host, S.port))
    target = path + (("?" + query) if query else "")
    hdrs = dict(headers or {})
    if sign:
        st = (sign_path or path) + (("?" + query) if query else "")
        hdrs = sign_headers(method, "http://%s%s" % (host_header, st), hdrs, body,
                            access, secret, payload_hash)
    c = http.client.HTTPConnection(S.host, S.port, timeout=timeout)
    try:
        c.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        c.putheader("Host", host_header)
        for k, v in hdrs.items():
            if k.lower() == "host":
                continue
            c.putheader(k, v)
        if body or method in ("PUT", "POST"):
            if not any(k.lower() in ("content-length", "transfer-encoding") for k in hdrs):
                c.putheader("Content-Length", str(len(body)))
        c.endheaders(body if body else None)
        r = c.getresponse()
        data = r.read()
        return Resp(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
    finally:
        c.close()


def read_head(sock):
    """Reads a raw socket to the end of an HTTP response head. Returns (head,
    the body bytes that came with it); head is what arrived if the peer closed
    first (b"" when nothing did)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = sock.recv(65536)
        if not d:
            break
        buf += d
    head, _, body = buf.partition(b"\r\n\r\n")
    return head, body


def quote_key(key):
    return urllib.parse.quote(key, safe="/~")


def client_error(fn, *a, **kw):
    """Runs a boto3 call expected to fail: returns (code, http_status, headers)
    or (None, None, None) when it succeeded."""
    from botocore.exceptions import ClientError
    try:
        fn(*a, **kw)
    except ClientError as e:
        md = e.response.get("ResponseMetadata", {})
        return (e.response.get("Error", {}).get("Code"), md.get("HTTPStatusCode"),
                md.get("HTTPHeaders", {}))
    return (None, None, None)


DEBIAN_PYTHON = "/usr/bin/python3"


def debian_boto3(script, **env):
    """Runs `script` with Debian's python3 (its boto3 1.26) against this
    gateway: EP, AK and SK in its environment, and the keyword arguments.
    The script prints one JSON document. Returns (parsed or None, detail)."""
    e = dict(os.environ, EP=S.endpoint, AK=ACCESS_KEY, SK=SECRET_KEY, **env)
    rc, out, er = run_cmd([DEBIAN_PYTHON, "-c", script], env=e, timeout=120)
    import json
    got = json.loads(out) if rc == 0 and out.strip() else None
    return got, (rc, out, er[-800:])


def run_cmd(argv, env=None, timeout=300, input=None):
    """subprocess.run with a timeout; returns (rc, stdout, stderr) as text."""
    try:
        p = subprocess.run(argv, env=env, timeout=timeout, input=input,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except subprocess.TimeoutExpired as e:
        return (-999, (e.stdout or b"").decode("utf-8", "replace"),
                "TIMEOUT after %ss: %s" % (timeout, (e.stderr or b"").decode("utf-8", "replace")))
    return (p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"))


def awscli_v1():
    """The path of aws-cli v1 (`aws` on PATH answering aws-cli/1.x), or None."""
    import shutil
    v1 = shutil.which("aws")
    if not v1:
        return None
    rc, out, er = run_cmd([v1, "--version"], env=aws_env(), timeout=60)
    return v1 if rc == 0 and (out + er).startswith("aws-cli/1.") else None
