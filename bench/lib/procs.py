"""bench/lib/procs.py - the benchmark's processes: starting and stopping the
servers it compares (nginx, shardgate) and the load clients (wrk, getc),
reading their CPU and memory from /proc, and running two systems' runs in
alternating pairs. bench.py drives the cases with these.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

CLK = os.sysconf("SC_CLK_TCK")

PROCS = []  # (name, Popen) we started


def log(*a):
    print("[bench %s]" % time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def stop_all():
    for name, p in reversed(PROCS):
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.time() + 10
    for name, p in reversed(PROCS):
        try:
            p.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    PROCS.clear()


def free_port(start):
    p = start
    while True:
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
            s.close()
            return p
        except OSError:
            p += 1
        finally:
            s.close()


def wait_port(port, proc, timeout=15):
    t = time.time()
    while time.time() - t < timeout:
        if proc.poll() is not None:
            raise RuntimeError("process exited with %s before listening on %d" % (proc.returncode, port))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("nothing listens on 127.0.0.1:%d after %ds" % (port, timeout))


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    st = f.read()
                if int(st.rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


def proc_sum(pids, name, value):
    """Sum over pids of value(text of /proc/PID/<name>); a process gone counts 0."""
    t = 0
    for pid in pids:
        try:
            with open("/proc/%d/%s" % (pid, name)) as f:
                t += value(f.read())
        except OSError:
            pass
    return t


def cpu_ticks(pids):
    def ticks(text):
        f_ = text.rsplit(")", 1)[1].split()
        return int(f_[11]) + int(f_[12])  # utime, stime (fields 14, 15)
    return proc_sum(pids, "stat", ticks)


def thread_ns(pids, comm=None):
    """{(pid, tid): nanoseconds on a CPU} from /proc/PID/task/TID/schedstat;
    with comm, only the threads whose name starts with it."""
    out = {}
    for pid in pids:
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for tid in tids:
            try:
                if comm:
                    with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                        if not f.read().startswith(comm):
                            continue
                with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                    out[(pid, int(tid))] = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    return out


def cpu_snap(pids):
    """A CPU reading of processes, for cpu_since.

    utime + stime count whole clock ticks (1/CLK_TCK s) and charge each tick
    to whichever thread it interrupts: a sample, not a measure, about 10 ms
    apart. 20 one-MiB fills take about 40 ms of CPU, so their ticks said
    anything from 0.75x to 2.00x nginx's figure from run to run. The
    scheduler's own count (schedstat's first field) is in nanoseconds."""
    return thread_ns(pids), cpu_ticks(pids)


def cpu_since(snap, pids):
    """CPU seconds the processes used since snap. The threads' nanosecond
    counts when every thread of the snapshot is still there; else (a thread
    ended, and took its count with it) or when they fall short of the ticks
    by more than the ticks' own noise (a thread started and ended in
    between), the ticks."""
    ns0, k0 = snap
    ns1, k1 = thread_ns(pids), cpu_ticks(pids)
    ticks_s = (k1 - k0) / CLK
    if not ns1 or any(k not in ns1 for k in ns0):
        return ticks_s
    precise = sum(v - ns0.get(k, 0) for k, v in ns1.items()) / 1e9
    if ticks_s > precise * 1.2 + 5.0 / CLK:
        return ticks_s
    return precise


def read_bytes(pids):
    """Bytes the processes caused to be fetched from storage (/proc/PID/io)."""
    def rb(text):
        return sum(int(line.split()[1]) for line in text.splitlines()
                   if line.startswith("read_bytes:"))
    return proc_sum(pids, "io", rb)


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Server:
    def __init__(self, name, argv, port, log_path, env=None, nginx=False):
        self.name, self.argv, self.port, self.log_path, self.env, self.nginx = name, argv, port, log_path, env, nginx
        self.proc = None

    def start(self):
        lf = open(self.log_path, "ab")
        self.t_spawn = time.time()
        self.proc = subprocess.Popen(self.argv, stdout=lf, stderr=subprocess.STDOUT, env=self.env,
                                     start_new_session=True)
        PROCS.append((self.name, self.proc))
        wait_port(self.port, self.proc)
        return self

    def pids(self):
        if self.nginx:
            return children(self.proc.pid)  # the workers do the work
        return [self.proc.pid]

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        PROCS[:] = [x for x in PROCS if x[1] is not self.proc]


def http_get(port, path, timeout=30):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=timeout) as r:
        return r.status, r.read()


def metrics(port):
    _, body = http_get(port, "/metrics")
    m = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            m[k] = float(v)
    return m


# ---------------------------------------------------------------- configs

NGX_COMMON = """{user}worker_processes {workers};
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
worker_rlimit_nofile 65536;
events {{ worker_connections 8192; }}
http {{
  default_type application/octet-stream;
  sendfile on; tcp_nopush on; tcp_nodelay on;
  keepalive_timeout 300s; keepalive_requests 1000000;
  client_body_temp_path {dir}/cbt; proxy_temp_path {dir}/pt; fastcgi_temp_path {dir}/ft;
  uwsgi_temp_path {dir}/ut; scgi_temp_path {dir}/st;
  {access}
  {body}
}}
"""


def nginx_conf(dir_, body, workers=2, access="access_log off;"):
    os.makedirs(dir_, exist_ok=True)
    user = "user root root;\n" if os.geteuid() == 0 else ""
    txt = NGX_COMMON.format(user=user, workers=workers, dir=dir_, body=body, access=access)
    p = os.path.join(dir_, "nginx.conf")
    with open(p, "w") as f:
        f.write(txt)
    return p


def start_nginx(name, dir_, body, port, workers=2, access="access_log off;"):
    conf = nginx_conf(dir_, body, workers, access)
    return Server(name, ["nginx", "-p", dir_, "-c", conf], port, os.path.join(dir_, "stdout.log"),
                  nginx=True).start()


def start_shardgate(env_, name, port, cold_port, cache_dir, threads=0, extra=None, memory=None,
                    data_dir=None, cache_conf=None):
    """A caching gateway on 127.0.0.1:port in front of the S3 cold tier on
    cold_port, or of the directory store data_dir (--data) when given;
    cache_conf: more keys of its "cache" object (e.g. fill_io)."""
    d = os.path.join(env_["work"], name)
    os.makedirs(d, exist_ok=True)
    os.makedirs(cache_dir, exist_ok=True)
    cfg = {"listen": "127.0.0.1:%d" % port, "log_level": "warn", "metrics_public": True,
           "spool_dir": os.path.join(env_["work"], "spool"),
           "cache": {"dir": cache_dir, "size": "200GiB", "fill_workers": 8},
           "buckets": {"bench": {"public_read": True, "consistency": "immutable"}}}
    if memory is not None:   # cache.memory: small objects also in memory (0: off)
        cfg["cache"]["memory"] = memory
    cfg["cache"].update(cache_conf or {})
    os.makedirs(cfg["spool_dir"], exist_ok=True)
    cp = os.path.join(d, "shardgate.json")
    with open(cp, "w") as f:
        json.dump(cfg, f)
    os.chmod(cp, 0o600)
    argv = [env_["bin"], "serve", "--config", cp]
    argv += ["--data", data_dir] if data_dir else ["--cold", "http://127.0.0.1:%d" % cold_port]
    if threads:
        argv += ["--threads", str(threads)]
    if extra:
        argv += extra
    e = dict(os.environ, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench-secret",
             AWS_REGION="us-east-1")
    return Server(name, argv, port, os.path.join(d, "shardgate.log"), env=e).start()


# ---------------------------------------------------------------- clients

WRK_LUA = r"""
local prefix = os.getenv("WRK_PREFIX")
local n = tonumber(os.getenv("WRK_N"))
local i = 0
setup = function(thread) end
init = function(args) math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16) % 100000); i = math.random(n) - 1 end
request = function()
  i = (i + 1) % n
  return wrk.format("GET", prefix .. string.format("%06d", i))
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRKJSON {"p50":%d,"p90":%d,"p99":%d,"max":%d,"requests":%d,"bytes":%d,"duration_us":%d,"errors":%d,"status_errors":%d}\n',
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    summary.requests, summary.bytes, summary.duration, e.connect + e.read + e.write + e.timeout, e.status))
end
"""


def run_wrk(env_, server, prefix, n, conns, dur):
    lua = os.path.join(env_["work"], "paths.lua")
    if not os.path.exists(lua):
        with open(lua, "w") as f:
            f.write(WRK_LUA)
    threads = min(2, conns)
    e = dict(os.environ, WRK_PREFIX=prefix, WRK_N=str(n))
    c0 = cpu_snap(server.pids())
    out = subprocess.run(["wrk", "-t%d" % threads, "-c%d" % conns, "-d%ds" % dur, "--timeout", "60s",
                          "-s", lua, "http://127.0.0.1:%d" % server.port], env=e,
                         capture_output=True, text=True, timeout=dur + 120)
    cpu = cpu_since(c0, server.pids())
    line = [l for l in out.stdout.splitlines() if l.startswith("WRKJSON ")]
    if not line:
        raise RuntimeError("wrk gave no result: %s %s" % (out.stdout, out.stderr))
    r = json.loads(line[0][8:])
    secs = r["duration_us"] / 1e6
    r["rps"] = r["requests"] / secs
    r["MBps"] = r["bytes"] / secs / 1e6
    r["cpu_us_per_req"] = cpu * 1e6 / max(1, r["requests"])
    r["cpu_util"] = cpu / secs
    r["p50_ms"], r["p99_ms"] = r["p50"] / 1e3, r["p99"] / 1e3
    if r["errors"] or r["status_errors"]:
        raise RuntimeError("wrk against %s saw errors: %s" % (server.name, r))
    return r


def run_getc(env_, port, paths, conc=1, stagger=0, keepalive=True, check=True):
    lst = os.path.join(env_["work"], "getc.list")
    with open(lst, "w") as f:
        f.write("\n".join(paths) + "\n")
    argv = [env_["getc"], "-c", str(conc), "-f", lst]
    if stagger:
        argv += ["-s", str(stagger)]
    if keepalive:
        argv += ["-k"]
    argv += ["127.0.0.1", str(port)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    rows = []
    for line in out.stdout.splitlines():
        t, st, ttfb, ttbody, tot, code, nbytes, path = line.split()
        rows.append(dict(thread=int(t), start=float(st), ttfb=float(ttfb), ttbody=float(ttbody),
                         total=float(tot), status=int(code), bytes=int(nbytes), path=path))
    if check and (out.returncode != 0 or len(rows) != len(paths)):
        raise RuntimeError("getc failed on port %d: rc=%d %s" % (port, out.returncode, out.stderr[-500:]))
    return rows


# ---------------------------------------------------------------- helpers

def rounds(reps, *fns):
    """Run each of fns reps times, rep r starting with fns[r % len(fns)] (so
    no arm always goes first); returns one list of results per fn."""
    out = [[] for _ in fns]
    for r in range(reps):
        for k in range(len(fns)):
            i = (r + k) % len(fns)
            out[i].append(fns[i](r))
    return out


def pairs(reps, fa, fb):
    """Run fa and fb reps times, alternating which goes first; returns (A[], B[])."""
    A, B = [], []
    for r in range(reps):
        if r % 2 == 0:
            A.append(fa(r))
            B.append(fb(r))
        else:
            B.append(fb(r))
            A.append(fa(r))
    return A, B


def drain(items, threads, work):
    """Runs work(item) for every item from `threads` threads, which take the
    items in their order; after the first exception no thread takes another,
    and it is raised here. Returns the seconds from the first start to the
    last end."""
    todo = list(items)
    lock = threading.Lock()
    errs = []

    def worker():
        while True:
            with lock:
                if not todo or errs:
                    return
                item = todo.pop(0)
            try:
                work(item)
            except Exception as e:   # noqa - raised below, in the caller's thread
                errs.append(e)
    ts = [threading.Thread(target=worker) for _ in range(threads)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errs:
        raise errs[0]
    return time.monotonic() - t0
