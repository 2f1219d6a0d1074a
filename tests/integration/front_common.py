"""tests/integration/front_common.py - shardgate processes for the front-end
tests (listen address, connection limits, framing, logs, signals): each
test starts the gateways it needs with its own flags and config, on
127.0.0.1 and free ports, and every one is stopped at exit, also on failure.
Checks and the summary come from harness.py."""

import atexit
import json
import os
import resource
import signal
import socket
import subprocess
import time

import harness as H

_ALL = []


class Gw:
    """One shardgate serve process."""

    def __init__(self, proc, port, log_path, tag, data_dir):
        self.proc, self.port, self.log_path, self.tag = proc, port, log_path, tag
        self.data_dir = data_dir

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def health(self, timeout=2.0, host="127.0.0.1"):
        try:
            s = socket.create_connection((host, self.port), timeout=timeout)
        except OSError:
            return None
        try:
            s.sendall(b"GET /_shardgate/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                b = s.recv(4096)
                if not b:
                    break
                data += b
            line = data.split(b"\r\n", 1)[0].split()
            return int(line[1]) if len(line) > 1 else None
        except (OSError, ValueError):
            return None
        finally:
            s.close()

    def wait_exit(self, timeout):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Sends sig and waits; returns the exit code (None if it had to be
        killed)."""
        if self.proc.poll() is not None:
            return self.proc.returncode
        self.proc.send_signal(sig)
        rc = self.wait_exit(timeout)
        if rc is None:
            self.proc.kill()
            self.proc.wait(10)
        return rc


def start_gw(tag, port=None, listen=None, config=None, extra=(), env=None, wait=True,
             data_dir=None, nofile=None, data=True):
    """Starts `shardgate serve`; with wait, until /_shardgate/health answers
    (or the process exits). config: a dict written to a file (--config).
    nofile: the soft RLIMIT_NOFILE the gateway starts with. data=False: no
    --data (the extra flags name a --cold tier)."""
    port = port or H._free_port()
    d = data_dir or H.tmpdir("data-%s" % tag)
    log_path = os.path.join(H.S.tmp or H.tmpdir("."), "gw-%s.log" % tag)
    logf = open(log_path, "ab")
    e = {k: v for k, v in os.environ.items() if not k.startswith("SHARDGATE_")}
    e.update(SHARDGATE_ACCESS_KEY=H.ACCESS_KEY, SHARDGATE_SECRET_KEY=H.SECRET_KEY,
             SHARDGATE_LOG_LEVEL="info")
    e.update(env or {})
    argv = [os.environ["SHARDGATE_BIN"], "serve", "--listen", listen or "127.0.0.1:%d" % port]
    if data:
        argv += ["--data", d]
    if config is not None:
        p = os.path.join(H.S.tmp, "config-%s.json" % tag)
        with open(p, "w") as f:
            json.dump(config, f, indent=1)
        os.chmod(p, 0o600)
        argv += ["--config", p]
    argv += list(extra)

    def pre():
        if nofile:
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard))

    proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, env=e, cwd=H.S.tmp,
                            stdin=subprocess.DEVNULL, preexec_fn=pre if nofile else None)
    logf.close()
    g = Gw(proc, port, log_path, tag, d)
    _ALL.append(g)
    if wait:
        deadline = time.time() + 20
        while time.time() < deadline and proc.poll() is None:
            if g.health(1.0) == 200:
                break
            time.sleep(0.05)
    return g


def raise_nofile(want):
    """Raises this process's soft open-file limit to min(want, hard); returns
    the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    new = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if new > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _cleanup():
    for g in _ALL:
        if g.proc.poll() is None:
            g.proc.kill()
            try:
                g.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass


atexit.register(_cleanup)


def http_get(port, path, timeout=10.0, headers=None):
    """One unsigned GET on a new connection: (status, headers dict, body),
    or (None, None, repr(error))."""
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        body = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body
    except (OSError, http.client.HTTPException) as ex:
        return None, None, repr(ex)
    finally:
        c.close()


def signed_get(port, path, query=""):
    """A SigV4-signed GET (path as given) on a new connection: (status, body)."""
    import http.client
    url = "http://127.0.0.1:%d%s%s" % (port, path, ("?" + query) if query else "")
    hdrs = H.sign_headers("GET", url)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("GET", path + (("?" + query) if query else ""), headers=hdrs)
        r = c.getresponse()
        return r.status, r.read()
    except (OSError, http.client.HTTPException) as ex:
        return None, repr(ex).encode()
    finally:
        c.close()
