"""tests/integration/store_common.py - shared by the directory-store tests
(test_readonly_data, test_dir_locks, test_reclaim, test_store_startup):
gateways started with any arguments and wrapper (a private mount namespace
with a read-only bind mount, an unprivileged user), each with its own log,
stopped at exit whatever happens; and the probes that tell which of those
wrappers this machine allows.

Each Gw is independent of the harness's gateway (H.S.proc); the harness
still counts the checks and prints the summary.
"""

import atexit
import http.client
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

NOBODY = 65534
_gws = []


def clean_env():
    env = dict(os.environ)
    for k in list(env):
        if (k.startswith("SHARDGATE_") and k not in ("SHARDGATE_BIN", "SHARDGATE_SRC")) \
                or k.startswith("AWS_"):
            del env[k]
    env.update(SHARDGATE_ACCESS_KEY=H.ACCESS_KEY, SHARDGATE_SECRET_KEY=H.SECRET_KEY,
               SHARDGATE_LOG_LEVEL="info")
    return env


def binary():
    b = os.environ.get("SHARDGATE_BIN")
    if not b or not os.access(b, os.X_OK):
        print("FAIL SHARDGATE_BIN not set or not executable: %r" % b, flush=True)
        sys.exit(1)
    return b


def health(port, timeout=1.0):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request("GET", "/_shardgate/health")
        r = c.getresponse()
        r.read()
        c.close()
        return r.status
    except (OSError, http.client.HTTPException):
        return None


# ---------------------------------------------------------------- wrappers

def ro_mount_wrap(path):
    """argv prefix that runs the command in a private mount namespace where
    `path` is bind-mounted read-only over itself (EROFS on every write)."""
    script = ('mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1" '
              '&& shift && exec "$@"')
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", path]


def nobody_wrap():
    """argv prefix that runs the command as nobody (EACCES on a 555 tree),
    or [] when we are not root (then we are unprivileged already)."""
    if os.geteuid() != 0:
        return []
    return ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]


def can_ro_mount():
    """True when a private mount namespace with a read-only bind mount can
    be made here (root, or CAP_SYS_ADMIN; not in every container)."""
    if not shutil.which("unshare") or not shutil.which("mount"):
        return False
    d = H.tmpdir("ro-probe")
    argv = ro_mount_wrap(d) + ["sh", "-c", 'touch "$0/x" 2>/dev/null && exit 1; exit 0', d]
    rc, _, _ = H.run_cmd(argv, timeout=30)
    return rc == 0 and not os.path.exists(os.path.join(d, "x"))


def can_be_unprivileged():
    """True when the gateway can run without write permission on a 555 tree:
    as nobody through setpriv (root), or directly (not root)."""
    return os.geteuid() != 0 or shutil.which("setpriv") is not None


def open_to_all(path):
    """Lets an unprivileged gateway reach `path`: a+rx on it and on every
    directory above it (the harness's tmp dir is 0700)."""
    p = os.path.abspath(path)
    while True:
        st = os.stat(p)
        os.chmod(p, st.st_mode | 0o555)
        if p == os.path.dirname(p) or p in ("/tmp", "/"):
            break
        p = os.path.dirname(p)


def chmod_tree(root, dir_mode, file_mode):
    for d, dirs, files in os.walk(root):
        for f in files:
            os.chmod(os.path.join(d, f), file_mode)
        os.chmod(d, dir_mode)


def tree_snapshot(root):
    """Every path under root with its size (directories: -1): a tree that must
    not change compares equal."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs:
            out[os.path.relpath(os.path.join(d, n), root)] = -1
        for n in files:
            p = os.path.join(d, n)
            out[os.path.relpath(p, root)] = os.lstat(p).st_size
    return out


# ---------------------------------------------------------------- gateways

class Gw:
    """One shardgate serve with its own port and log."""

    def __init__(self, tag, args, wrap=None, env=None, port=None, cwd=None):
        self.tag = tag
        self.port = port or H._free_port()
        self.args = list(args)
        self.wrap = list(wrap or [])
        self.env = clean_env()
        self.env.update(env or {})
        self.cwd = cwd or H.S.tmp
        self.log_path = os.path.join(H.S.tmp, "gw-%s.log" % tag)
        self.proc = None
        self.endpoint = "http://127.0.0.1:%d" % self.port
        _gws.append(self)

    def argv(self):
        return self.wrap + [binary(), "serve", "--listen", "127.0.0.1:%d" % self.port] + self.args

    def start(self, expect_ok=True, timeout=20):
        """Starts it and waits for health 200 (or its exit). Returns True
        when it answers; with expect_ok a failure is a failed check."""
        with open(self.log_path, "ab") as log:
            log.write(("#### start: %s\n" % " ".join(self.argv())).encode())
            log.flush()
            self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT,
                                         env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL)
        deadline = time.time() + timeout
        ok = False
        while time.time() < deadline:
            if self.proc.poll() is not None:
                break
            if health(self.port) == 200:
                ok = True
                break
            time.sleep(0.05)
        if expect_ok:
            H.check("[%s] gateway starts and answers health" % self.tag, ok,
                    "exit code %r; log:\n%s" % (self.proc.poll(), self.tail()))
        return ok

    def wait_exit(self, timeout=20):
        """Exit code of a gateway expected to stop by itself, or None."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=30):
        """SIGTERM; returns the exit code (or "killed")."""
        p = self.proc
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                return p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
                return "killed"
        return p.returncode

    def kill9(self):
        p = self.proc
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait(10)

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def tail(self, n=30):
        return "\n".join(self.log().splitlines()[-n:])

    def grep(self, word):
        return [l for l in self.log().splitlines() if word in l]

    def client(self):
        return H.boto3_client(endpoint=self.endpoint)


def _stop_all():
    for g in _gws:
        try:
            if g.alive():
                g.kill9()
        except Exception:   # noqa - cleanup must go on
            pass


atexit.register(_stop_all)


def init(name):
    """Names the test file for the harness's summary and makes its tmp dir."""
    H.S.name = name
    H._ensure_tmp()
    try:
        import boto3  # noqa: F401
    except ImportError as e:
        H.skip_file("needs boto3: %s" % e)
    binary()
