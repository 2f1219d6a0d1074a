#!/usr/bin/env python3
"""shardgate benchmark driver (called by bench/run.sh; stdlib only).

Starts on 127.0.0.1 only: a cold tier (nginx static over the dataset, with a
/bench/slow/ location throttled to 100 MiB/s per connection and WebDAV PUT so
write-through works), shardgate with --cold pointing at it and a cache dir, an
nginx static server over the same files (the hit reference) and an nginx
proxy_cache with proxy_cache_lock in front of the same cold tier (the late
joiner reference). Runs the cases, alternating the systems run by run, and
writes bench/results/report-MODE.{md,json} and plots (report.py). Everything it started
is stopped by pid on exit. The processes (servers, load clients, /proc readings)
are procs.py's; this file holds the modes, the data set, the cases and main.
"""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

# ab.py uses these as B.* too
from procs import (PROCS, Server, children, cpu_since, cpu_snap, drain, free_port, http_get, log, metrics,  # noqa: F401
                   pairs, rounds, rss_kib, run_getc, run_wrk, start_nginx, start_shardgate, stop_all)
from report import MiB, cell, fmt, med, plots, report, summary  # noqa: F401 (ab.py uses B.fmt, B.summary)
from nvme import MODE_DEFAULTS as NVME_DEFAULTS, case_nvme

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
ROOT = os.path.dirname(BENCH)
# BENCH_RESULTS: where the report and plots go (the test suite's smoke run
# writes into its build directory, not into the repository)
RESULTS = os.environ.get("BENCH_RESULTS", os.path.join(BENCH, "results"))

MODES = {
    # smoke: start everything, one short hit case, a table
    "smoke": dict(reps=1, dur=2, sizes=[("4k", 4096, 200)], conc=[8], cold=False, lj=False,
                  mixed=False, bipolar=False, memory=False, threads=False, epoch=False),
    "quick": dict(reps=3, dur=3, sizes=[("4k", 4096, 2000), ("1m", MiB, 16), ("64m", 64 * MiB, 4)],
                  conc=[1, 8, 64], cold=True, cold1m=20, cold64m=2, lj=True, mixed=True,
                  bipolar=True, put_bytes=1 << 30, memory=True, small_n=20000, idle_conns=1000,
                  threads=True, epoch=True, epoch_shards=64, epochs=4, nvme=True),
    # profile: perf stat (syscalls, instructions) and perf record of both servers during hits
    "profile": dict(reps=1, dur=5, sizes=[("4k", 4096, 2000), ("64m", 64 * MiB, 4)], conc=[64, 8],
                    cold=False, lj=False, mixed=False, bipolar=False, memory=False, threads=False, epoch=False),
    # fills: the cold-miss cases (shardgate, a direct GET and nginx proxy_cache
    # on the same objects), with a token hit case; for work on the fill path
    "fills": dict(reps=5, dur=1, sizes=[("4k", 4096, 200)], conc=[8], cold=True, cold1m=20,
                  cold64m=2, lj=False, mixed=False, bipolar=False, memory=False, threads=False,
                  epoch=False),
    # nvme: hits from the disk alone (page cache dropped before each run), vs
    # nginx with aio threads + directio and fio on the same files
    # (with cache.memory 0: every hit reads the cache file, as nginx reads its files;
    # in quick and full the 4 KiB rows' "sg disk" column shows what memory served)
    "nvme": dict(reps=3, dur=1, sizes=[("4k", 4096, 200)], conc=[8], cold=False, lj=False,
                 mixed=False, bipolar=False, memory=False, threads=False, epoch=False, nvme=True,
                 sg_memory=0),
    # mixed: 4 KiB hits alone vs while 2 throttled 64 MiB misses stream in
    # (the hits-next-to-fills case of quick, 5 runs), for work on fill priority
    "mixed": dict(reps=5, dur=3, sizes=[("4k", 4096, 2000)], conc=[8], cold=False, lj=False,
                  mixed=True, bipolar=False, memory=False, threads=False, epoch=False),
    # memory: only the memory / restart case, with 1,000,000 small objects
    "memory": dict(reps=1, dur=1, sizes=[("4k", 4096, 2000)], conc=[8], cold=False, lj=False, mixed=False,
                   bipolar=False, memory=True, small_n=1000000, idle_conns=1000, threads=False, epoch=False),
    "full": dict(reps=5, dur=10, sizes=[("4k", 4096, 2000), ("1m", MiB, 16), ("64m", 64 * MiB, 4)],
                 conc=[1, 8, 64], cold=True, cold1m=50, cold64m=4, lj=True, mixed=True,
                 bipolar=True, put_bytes=4 << 30, memory=True, small_n=1000000, idle_conns=1000,
                 threads=True, epoch=True, epoch_shards=128, epochs=5, nvme=True),
}

# ---------------------------------------------------------------- data

def make_data(work, mode):
    data = os.path.join(work, "data", "bench")
    os.makedirs(data, exist_ok=True)
    rnd = {}
    for tag, size, n in mode["sizes"]:
        d = os.path.join(data, "s" + tag)
        os.makedirs(d, exist_ok=True)
        for i in range(n):
            p = os.path.join(d, "%06d" % i)
            if not os.path.exists(p) or os.path.getsize(p) != size:
                with open(p, "wb") as f:
                    f.write(os.urandom(size))
        rnd[tag] = os.path.join(d, "%06d" % 0)
    # cold objects and everything else are hard links of one random file per
    # size: distinct keys (distinct cache entries), no extra bytes to write
    src64 = os.path.join(work, "rand64m")
    if not os.path.exists(src64):
        with open(src64, "wb") as f:
            for _ in range(64):
                f.write(os.urandom(MiB))
    src1 = os.path.join(work, "rand1m")
    if not os.path.exists(src1):
        with open(src1, "wb") as f:
            f.write(os.urandom(MiB))
    return data, src1, src64


def link(src, dst):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if not os.path.exists(dst):
        os.link(src, dst)


# ---------------------------------------------------------------- cases

def case_hits(env_, mode, res):
    sg, ngx = env_["sg"], env_["ngx_static"]
    m0 = metrics(sg.port)
    rows = []
    for tag, size, n in mode["sizes"]:
        for c in mode["conc"]:
            dur = mode["dur"] * (2 if size >= 64 * MiB and c >= 8 else 1)
            log("hits %s c=%d (%d s x %d reps x 2 systems)" % (tag, c, dur, mode["reps"]))
            A, B = pairs(mode["reps"],
                         lambda r: run_wrk(env_, sg, "/bench/s%s/" % tag, n, c, dur),
                         lambda r: run_wrk(env_, ngx, "/bench/s%s/" % tag, n, c, dur))
            rows.append(dict(size=tag, bytes=size, c=c, sg=A, ngx=B))
    m1 = metrics(sg.port)
    hits = m1["shardgate_cache_hits_total"] - m0["shardgate_cache_hits_total"]
    bget = m1['shardgate_backend_requests_total{op="get"}'] - m0['shardgate_backend_requests_total{op="get"}']
    res["hits"] = dict(rows=rows, hits_delta=hits, backend_get_delta=bget)
    if bget != 0 or hits <= 0:
        raise RuntimeError("hit case was not all hits: hits +%d, backend gets +%d" % (hits, bget))


# The cold-miss rows: tag, object size, objects per run, clients at once, and
# the cold tier: "nginx" (static over warm files, the gateway's --cold) or
# "dir" (the same files as the gateway's own --data directory store, the
# direct reference being nginx static over that directory).
COLD_ROWS = (("1m", MiB, "cold1m", 1, "nginx"), ("64m", 64 * MiB, "cold64m", 1, "nginx"),
             ("slow/64m", 64 * MiB, 1, 1, "nginx"),
             ("8x1m", MiB, 64, 8, "nginx"), ("8x64m", 64 * MiB, 8, 8, "nginx"),
             ("dir/1m", MiB, "cold1m", 1, "dir"), ("dir/64m", 64 * MiB, "cold64m", 1, "dir"))


def cold_rows(mode):
    for tag, size, count, conc, tier in COLD_ROWS:
        if conc > 1 and not mode.get("cold_conc", True):
            continue
        yield tag, size, mode[count] if isinstance(count, str) else count, conc, tier


def durable_writes(dirpath, count, size, conc, data):
    """The disk's own limit for a fill that must be durable before it is
    published: `count` files of `size` bytes written by `conc` threads at once
    into `dirpath` (the cache's file system), each written, fdatasync'ed and
    closed, as a fill's file is. Aggregate MB/s from the first start to the
    last end; the files are removed afterwards, outside the timing."""
    os.makedirs(dirpath, exist_ok=True)

    def write(i):
        fd = os.open(os.path.join(dirpath, "%06d" % i), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view, off = memoryview(data), 0
            while off < size:
                off += os.write(fd, view[off:size])
            os.fdatasync(fd)
        finally:
            os.close(fd)
    t = drain(range(count), conc, write)
    for i in range(count):
        os.unlink(os.path.join(dirpath, "%06d" % i))
    return dict(MBps=count * size / t / 1e6)


def case_cold(env_, mode, res):
    sg, cold = env_["sg"], env_["cold"]
    out = []
    for tag, size, count, conc, tier in cold_rows(mode):
        src = env_["src1"] if size == MiB else env_["src64"]
        sub = "c" + tag.replace("/", "")
        for r in range(mode["reps"]):
            for i in range(count):
                link(src, os.path.join(env_["data"], sub, "r%d" % r, "%06d" % i))
        if tag.startswith("slow/"):  # the cold tier's /bench/slow/ is 100 MiB/s
            for r in range(mode["reps"]):
                for i in range(count):
                    link(src, os.path.join(env_["data"], "slow", "c64m", "r%d" % r, "%06d" % i))
        log("cold miss %s: %d objects x %d reps, %d at once, alternating direct / through shardgate" % (
            tag, count, mode["reps"], conc))
        if tier == "dir" and "sg_dir" not in env_:
            # a second gateway whose cold tier is the dataset directory itself
            env_["sg_dir"] = start_shardgate(env_, "sg-dir", free_port(env_["port_base"] + 90), None,
                                             os.path.join(env_["work"], "cache-dir"),
                                             memory=mode.get("sg_memory"),
                                             data_dir=os.path.dirname(env_["data"]))

        def one(port, srv):
            def f(r):
                paths = [("/bench/slow/c64m/r%d/%06d" if tag.startswith("slow/") else "/bench/" + sub + "/r%d/%06d")
                         % (r, i) for i in range(count)]
                c0 = cpu_snap(srv.pids())
                rows = run_getc(env_, port, paths, conc=conc)
                cpu = cpu_since(c0, srv.pids())
                if conc == 1:
                    t = sum(x["total"] for x in rows) / 1e3
                else:   # the clients overlap: from the first start to the last end
                    t = (max(x["start"] + x["total"] for x in rows) - min(x["start"] for x in rows)) / 1e3
                return dict(MBps=sum(x["bytes"] for x in rows) / t / 1e6,
                            ttfb_ms=med([x["ttfb"] for x in rows]),
                            ttbody_ms=med([x["ttbody"] for x in rows]),
                            cpu_ms_per_obj=cpu * 1e3 / count)
            return f
        # nginx proxy_cache fills the same objects (its own cache: they are
        # misses for it too): the reference for CPU per MiB filled
        # (for the directory store there is no proxy_cache equivalent)
        px = env_.get("ngx_proxy") if tier == "nginx" else None
        gw, direct = (sg, cold) if tier == "nginx" else (env_["sg_dir"], env_["ngx_static"])
        m0 = metrics(gw.port)
        arms = {"sg": one(gw.port, gw), "direct": one(direct.port, direct)}
        if px:
            arms["proxy"] = one(px.port, px)
        if conc > 1:
            # several fills at once end where the disk ends: what it makes
            # durable at the same concurrency, in the same rounds
            with open(src, "rb") as f:
                blob = f.read()
            arms["disk"] = lambda r: durable_writes(os.path.join(env_["work"], "durable-ref"),
                                                    count, size, conc, blob)
        got = dict(zip(arms, rounds(mode["reps"], *arms.values())))
        m1 = metrics(gw.port)
        out.append(dict(size=tag, count=count, conc=conc, sg=got["sg"], direct=got["direct"],
                        proxy=got.get("proxy"), disk=got.get("disk"),
                        misses=m1["shardgate_cache_misses_total"] - m0["shardgate_cache_misses_total"]))
    if "sg_dir" in env_:
        # it holds the data directory's lock, which the S3 cold tier of the
        # bipolar and epoch cases takes next
        env_.pop("sg_dir").stop()
    res["cold"] = out


def backend_gets_in_log(path, needle):
    try:
        with open(path) as f:
            return sum(1 for l in f if needle in l and '"GET ' in l)
    except OSError:
        return -1


def case_late_joiner(env_, mode, res):
    sg, px, cold = env_["sg"], env_["ngx_proxy"], env_["cold"]
    clients, stagger = 8, 50
    for r in range(mode["reps"]):
        link(env_["src64"], os.path.join(env_["data"], "slow", "lj", "%06d" % r))
    log("late joiner: %d clients %d ms apart on one cold 64 MiB object, cold tier 100 MiB/s" % (clients, stagger))

    def one(port, name):
        def f(r):
            path = "/bench/slow/lj/%06d" % r
            m0 = metrics(sg.port) if name == "sg" else None
            rows = run_getc(env_, port, [path] * clients, conc=clients, stagger=stagger, keepalive=False)
            gets = backend_gets_in_log(env_["cold_log"], path + " HTTP")
            d = dict(ttfb_ms=[x["ttfb"] for x in sorted(rows, key=lambda x: x["start"])],
                     ttbody_ms=[x["ttbody"] for x in sorted(rows, key=lambda x: x["start"])],
                     total_ms=[x["total"] for x in sorted(rows, key=lambda x: x["start"])],
                     backend_gets=gets)
            d["ttfb_max_ms"] = max(d["ttbody_ms"])
            d["ttfb_joiners_med_ms"] = med(d["ttbody_ms"][1:])
            d["last_done_ms"] = max(x["start"] + x["total"] for x in rows) - min(x["start"] for x in rows)
            if m0 is not None:
                m1 = metrics(sg.port)
                d["sg_backend_gets"] = m1['shardgate_backend_requests_total{op="get"}'] - m0['shardgate_backend_requests_total{op="get"}']
            return d
        return f
    # the cold tier's access log counts the GETs each system made: distinct
    # keys per system so both counts are clean
    A, B = [], []
    for r in range(mode["reps"]):
        link(env_["src64"], os.path.join(env_["data"], "slow", "ljn", "%06d" % r))
    fa = one(sg.port, "sg")

    def fb(r):
        path = "/bench/slow/ljn/%06d" % r
        rows = run_getc(env_, px.port, [path] * clients, conc=clients, stagger=stagger, keepalive=False)
        rows.sort(key=lambda x: x["start"])
        d = dict(ttfb_ms=[x["ttfb"] for x in rows], ttbody_ms=[x["ttbody"] for x in rows],
                 total_ms=[x["total"] for x in rows],
                 backend_gets=backend_gets_in_log(env_["cold_log"], path + " HTTP"))
        d["ttfb_max_ms"] = max(d["ttbody_ms"])
        d["ttfb_joiners_med_ms"] = med(d["ttbody_ms"][1:])
        d["last_done_ms"] = max(x["start"] + x["total"] for x in rows) - min(x["start"] for x in rows)
        return d
    A, B = pairs(mode["reps"], fa, fb)
    res["late_joiner"] = dict(clients=clients, stagger_ms=stagger, sg=A, ngx=B)


def case_mixed(env_, mode, res):
    """4 KiB hits c=8 alone, and while 2 streams of throttled 64 MiB misses fill."""
    sg = env_["sg"]
    dur = mode["dur"]
    nbg = 2 * (int(dur / 0.6) + 3)
    counter = [0]

    def alone(r):
        return run_wrk(env_, sg, "/bench/s4k/", 2000, 8, dur)

    def with_cold(r):
        paths = []
        for i in range(nbg):
            k = counter[0]
            counter[0] += 1
            link(env_["src64"], os.path.join(env_["data"], "slow", "bg", "%06d" % k))
            paths.append("/bench/slow/bg/%06d" % k)
        lst = os.path.join(env_["work"], "bg.list")
        with open(lst, "w") as f:
            f.write("\n".join(paths) + "\n")
        m0 = metrics(sg.port)
        bg = subprocess.Popen([env_["getc"], "-c", "2", "-k", "-f", lst, "127.0.0.1", str(sg.port)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        PROCS.append(("getc-bg", bg))
        time.sleep(0.3)
        t0 = time.time()
        w = run_wrk(env_, sg, "/bench/s4k/", 2000, 8, dur)
        t1 = time.time()
        m1 = metrics(sg.port)
        still = bg.poll() is None
        bg.terminate()
        bg.wait()
        PROCS[:] = [x for x in PROCS if x[1] is not bg]
        w["bg_MBps"] = (m1["shardgate_backend_bytes_total"] - m0["shardgate_backend_bytes_total"]) / (t1 - t0 + 0.3) / 1e6
        w["bg_misses"] = m1["shardgate_cache_misses_total"] - m0["shardgate_cache_misses_total"]
        w["bg_ran_throughout"] = still
        return w
    log("hits with cold traffic: 4 KiB hits c=8 alone vs with 2 throttled 64 MiB miss streams")
    A, B = pairs(mode["reps"], with_cold, alone)
    res["mixed"] = dict(with_cold=A, alone=B)


def start_cold_s3(env_, public_bucket=None):
    """A shardgate --data over the dataset directory: an S3-complete cold tier
    (shardgate writes big PUTs through as multipart uploads, which nginx's
    WebDAV cannot take). public_bucket: a bucket anyone may read (a client
    that does not sign, as bench-getc)."""
    port = free_port(env_["port_base"] + 80)
    d = os.path.join(env_["work"], "cold-s3")
    os.makedirs(d, exist_ok=True)
    cp = os.path.join(d, "cold.json")
    with open(cp, "w") as f:
        cfg = {"listen": "127.0.0.1:%d" % port, "log_level": "warn",
               "spool_dir": os.path.join(env_["work"], "spool")}
        if public_bucket:
            cfg["buckets"] = {public_bucket: {"public_read": True}}
        json.dump(cfg, f)
    os.chmod(cp, 0o600)
    e = dict(os.environ, SHARDGATE_ACCESS_KEY="bench", SHARDGATE_SECRET_KEY="bench-secret")
    return Server("cold-s3", [env_["bin"], "serve", "--config", cp, "--data", os.path.join(env_["work"], "data")],
                  port, os.path.join(d, "shardgate.log"), env=e).start()


def case_bipolar(env_, mode, res):
    """8 readers on 1 MiB hits, alone and while a checkpoint PUT streams in.
    Its own pair: a shardgate --data as the S3 cold tier, and a gateway on it."""
    cold = start_cold_s3(env_)
    cache = os.path.join(env_["work"], "cache-bp")
    shutil.rmtree(cache, ignore_errors=True)
    sg = start_shardgate(env_, "sg-bp", free_port(cold.port + 1), cold.port, cache)
    warm = ["/bench/s1m/%06d" % i for i in range(16)]
    run_getc(env_, sg.port, warm, conc=4)
    run_getc(env_, sg.port, warm, conc=4)
    dur = mode["dur"]
    src = os.path.join(env_["work"], "ckpt.bin")
    if not os.path.exists(src) or os.path.getsize(src) != mode["put_bytes"]:
        with open(src, "wb") as f, open(env_["src64"], "rb") as g:
            blk = g.read()
            for _ in range(mode["put_bytes"] // len(blk)):
                f.write(blk)
    seq = [0]

    def alone(r):
        return run_wrk(env_, sg, "/bench/s1m/", 16, 8, dur)

    def during(r):
        stop = threading.Event()
        stats = dict(puts=0, bytes=0, secs=0.0, fails=0)

        def loop():
            while not stop.is_set():
                seq[0] += 1
                t = time.time()
                p = subprocess.Popen(
                    ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--aws-sigv4", "aws:amz:us-east-1:s3",
                     "--user", "shardgate:shardgate-secret-key", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                     "-T", src, "http://127.0.0.1:%d/bench/ckpt/c%06d" % (sg.port, seq[0])],
                    stdout=subprocess.PIPE, text=True)
                PROCS.append(("curl-put", p))
                p.wait()  # the PUT in flight when the readers stop is let finish
                code = p.stdout.read()
                stats["puts"] += code == "200"
                stats["fails"] += code != "200"
                stats["bytes"] += mode["put_bytes"] if code == "200" else 0
                stats["secs"] += time.time() - t
                PROCS[:] = [x for x in PROCS if x[1] is not p]
        th = threading.Thread(target=loop)
        th.start()
        time.sleep(0.5)
        w = run_wrk(env_, sg, "/bench/s1m/", 16, 8, dur)
        stop.set()
        th.join()
        w["puts_done"], w["put_fails"] = stats["puts"], stats["fails"]
        w["put_MBps"] = stats["bytes"] / stats["secs"] / 1e6 if stats["secs"] and stats["bytes"] else float("nan")
        return w
    log("bipolar: 8 readers of 1 MiB hits alone vs during %d MiB PUTs" % (mode["put_bytes"] // MiB))
    A, B = pairs(mode["reps"], during, alone)
    t = time.time()
    code = subprocess.run(
        ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--aws-sigv4", "aws:amz:us-east-1:s3",
         "--user", "shardgate:shardgate-secret-key", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
         "-T", src, "http://127.0.0.1:%d/bench/ckpt/alone" % sg.port], capture_output=True, text=True).stdout
    put_alone = mode["put_bytes"] / (time.time() - t) / 1e6 if code == "200" else float("nan")
    sg.stop()
    cold.stop()
    shutil.rmtree(os.path.join(env_["data"], "ckpt"), ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    res["bipolar"] = dict(put_bytes=mode["put_bytes"], during=A, alone=B, put_alone_MBps=put_alone)


def open_idle(port, n, path):
    """Opens n keep-alive connections that each read one GET of path in full
    and then stay open, idle. Returns the sockets and how many got a 200."""
    socks, ok = [], 0
    req = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % path).encode()
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        socks.append(s)
        s.sendall(req)
    for s in socks:
        r = http.client.HTTPResponse(s)   # reads through its own file; s stays open
        try:
            r.begin()
            r.read()
        except (http.client.HTTPException, OSError):
            continue
        ok += r.status == 200
    return socks, ok


def case_memory(env_, mode, res):
    """RSS idle, with idle keep-alive connections, per cached small object; then
    the end-to-end restart with those objects cached until the first hit."""
    work = env_["work"]
    n = mode["small_n"]
    src = os.path.join(work, "rand1k")
    with open(src, "wb") as f:
        f.write(os.urandom(1024))
    log("memory: linking %d 1 KiB cold objects" % n)
    keys = []
    for i in range(n):
        if i % 60000 == 0 and i:  # ext4 allows 65,000 links per inode
            src = os.path.join(work, "rand1k-%d" % (i // 60000))
            if not os.path.exists(src):
                with open(src, "wb") as f:
                    f.write(os.urandom(1024))
        k = "tiny/%04d/%07d" % (i // 1000, i)
        link(src, os.path.join(env_["data"], k))
        keys.append("/bench/" + k)
    port = free_port(env_["port_base"] + 40)
    cache = os.path.join(work, "cache-mem")
    shutil.rmtree(cache, ignore_errors=True)
    sg = start_shardgate(env_, "sg-mem", port, env_["cold"].port, cache)
    time.sleep(0.5)
    out = dict(objects=n, rss_start_kib=rss_kib(sg.proc.pid))
    http_get(port, "/bench/s4k/000000")
    http_get(port, "/bench/s4k/000000")
    out["rss_idle_kib"] = rss_kib(sg.proc.pid)
    socks, ok = open_idle(port, mode["idle_conns"], "/bench/s4k/000000")
    time.sleep(0.5)
    out["idle_conns"] = mode["idle_conns"]
    out["idle_conns_ok"] = ok
    out["rss_idle_conns_kib"] = rss_kib(sg.proc.pid)
    try:
        st, _ = http_get(port, "/bench/s4k/000001", timeout=5)
        out["new_conn_while_idle"] = st
    except Exception as e:  # noqa: BLE001
        out["new_conn_while_idle"] = "failed: %s" % e
    for s in socks:
        s.close()
    time.sleep(1.0)
    out["rss_after_close_kib"] = rss_kib(sg.proc.pid)
    rss0 = rss_kib(sg.proc.pid)
    log("memory: filling %d small objects through shardgate (c=8)" % n)
    t = time.time()
    rows = run_getc(env_, port, keys, conc=8, keepalive=True, check=False)
    out["fill_secs"] = time.time() - t
    out["fill_failed"] = sum(1 for x in rows if x["status"] != 200)
    time.sleep(1.0)
    m = metrics(port)
    out["cache_objects"] = m.get("shardgate_cache_objects", -1)
    out["rss_filled_kib"] = rss_kib(sg.proc.pid)
    out["bytes_per_object"] = (out["rss_filled_kib"] - rss0) * 1024 / max(1, n)
    # restart until the first hit
    sg.stop()
    log("restart: %d cached objects, SIGTERM, start, poll for the first hit" % out["cache_objects"])
    t0 = time.time()
    sg2 = Server("sg-mem2", sg.argv, port, sg.log_path, env=sg.env)
    sg2.proc = subprocess.Popen(sg.argv, stdout=open(sg.log_path, "ab"), stderr=subprocess.STDOUT, env=sg.env,
                                start_new_session=True)
    PROCS.append((sg2.name, sg2.proc))
    first_listen = None
    hit = None
    probe = keys[n // 2]
    while time.time() - t0 < 60:
        try:
            st, _ = http_get(port, probe, timeout=5)
            first_listen = first_listen or time.time() - t0
            if st == 200:
                hit = time.time() - t0
                break
        except Exception:  # noqa: BLE001
            if sg2.proc.poll() is not None:
                raise RuntimeError("shardgate did not restart")
            time.sleep(0.005)
    m = metrics(port)
    out["restart_first_hit_s"] = hit
    out["restart_was_hit"] = m["shardgate_cache_hits_total"] >= 1 and m['shardgate_backend_requests_total{op="get"}'] == 0
    out["restart_cache_objects"] = m.get("shardgate_cache_objects", -1)
    out["rss_after_restart_kib"] = rss_kib(sg2.proc.pid)
    sg2.stop()
    res["memory"] = out


def case_threads(env_, mode, res):
    """--threads N before/after, on the hit cases MHD's pool matters most for."""
    out = []
    base = env_["sg"]
    for threads in (1, 2, 4):
        port = free_port(env_["port_base"] + 60)
        sg = base
        if threads != 2:
            # its own cache directory, warmed like the base one: a directory has
            # one owner, so a second gateway on env_["cache"] would be refused
            sg = start_shardgate(env_, "sg-t%d" % threads, port, env_["cold"].port,
                                 "%s-t%d" % (env_["cache"], threads), threads=threads)
            run_getc(env_, sg.port, ["/bench/s%s/%06d" % (tag, i) for tag, _, n in mode["sizes"]
                                     for i in range(n)], conc=8)
        for tag, n, c in (("4k", 2000, 64), ("64m", 4, 8)):
            dur = mode["dur"] * (2 if tag == "64m" else 1)
            log("threads=%d %s c=%d" % (threads, tag, c))
            rs = [run_wrk(env_, sg, "/bench/s%s/" % tag, n, c, dur) for _ in range(max(1, mode["reps"] - 1))]
            out.append(dict(threads=threads, size=tag, c=c, runs=rs))
        if sg is not base:
            sg.stop()
    res["threads"] = out


def sg_signed(method, port, path, body=None):
    argv = ["curl", "-s", "-w", "\n%{http_code}", "-X", method, "--aws-sigv4", "aws:amz:us-east-1:s3",
            "--user", "shardgate:shardgate-secret-key", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]
    if body is not None:
        argv += ["-H", "Content-Type: application/json", "--data-binary", body]
    # curl 7.88 signs the query exactly as written: spell it ?prefetch=
    p = subprocess.run(argv + ["http://127.0.0.1:%d%s" % (port, path)], capture_output=True, text=True)
    out, _, code = p.stdout.rpartition("\n")
    return code, out


def case_epoch(env_, mode, res):
    """Epochs over a dataset twice the cache, each in a new shuffled order, from a
    100 MiB/s cold tier: LRU without hints vs an ordered prefetch hint per epoch."""
    import random
    sg = env_["sg"]
    code, _ = sg_signed("POST", sg.port, "/bench?prefetch=", json.dumps({"keys": ["s4k/000000"]}))
    if code != "202":
        res["epoch"] = dict(skipped=True, why="POST /bench?prefetch= answered %s: prefetch hints are not in "
                            "this build" % code)
        return
    n, size, epochs = mode.get("epoch_shards", 64), 4 * MiB, mode.get("epochs", 4)
    cache_bytes = n * size // 2
    src = os.path.join(env_["work"], "rand4m")
    if not os.path.exists(src):
        with open(src, "wb") as f:
            f.write(os.urandom(size))
    keys = ["slow/ep/shard-%06d" % i for i in range(n)]
    for k in keys:
        link(src, os.path.join(env_["data"], k))
    orders = []
    for e in range(epochs):
        o = list(keys)
        random.Random(1000 + e).shuffle(o)
        orders.append(o)
    out = {}
    for variant in (("lru", "hints") if mode["reps"] % 2 else ("hints", "lru")):
        cache = os.path.join(env_["work"], "cache-epoch-" + variant)
        shutil.rmtree(cache, ignore_errors=True)
        g = start_shardgate(env_, "sg-epoch-" + variant, free_port(env_["port_base"] + 100), env_["cold"].port,
                            cache, extra=["--cache-size", str(cache_bytes)])
        rows = []
        for e in range(epochs):
            log("epoch %s %d: %d shards of 4 MiB, cache %d MiB, cold tier 100 MiB/s" %
                (variant, e, n, cache_bytes // MiB))
            m0 = metrics(g.port)
            t0 = time.time()
            job = None
            if variant == "hints":
                code, body = sg_signed("POST", g.port, "/bench?prefetch=", json.dumps(
                    {"keys": orders[e], "ordered": True, "epoch": e, "consumer": "rank0"}))
                if code != "202":
                    raise RuntimeError("prefetch hint answered %s %s" % (code, body))
                job = json.loads(body)["job"]
            gr = run_getc(env_, g.port, ["/bench/" + k for k in orders[e]], conc=1)
            secs = time.time() - t0
            m1 = metrics(g.port)
            d = lambda k: m1.get(k, 0) - m0.get(k, 0)  # noqa: E731
            row = dict(epoch=e, secs=secs, MBps=n * size / secs / 1e6,
                       cold_MiB=d("shardgate_backend_bytes_total") / MiB,
                       hits=d("shardgate_cache_hits_total"), misses=d("shardgate_cache_misses_total"),
                       ttfb_p50_ms=med([x["ttbody"] for x in gr]),
                       ttfb_max_ms=max(x["ttbody"] for x in gr))
            if job:
                code, body = sg_signed("GET", g.port, "/bench?job=%s&prefetch=" % job)
                try:
                    row["job_objects"] = json.loads(body).get("objects")
                except ValueError:
                    row["job_objects"] = body[:200]
            rows.append(row)
        g.stop()
        shutil.rmtree(cache, ignore_errors=True)
        out[variant] = rows
    res["epoch"] = dict(skipped=False, shards=n, shard_bytes=size, cache_bytes=cache_bytes, epochs=epochs, **out)


PERF_EVENTS = ("task-clock,context-switches,instructions,syscalls:sys_enter_sendfile64,"
               "syscalls:sys_enter_epoll_wait,syscalls:sys_enter_accept4,syscalls:sys_enter_recvfrom,"
               "syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_writev,"
               "syscalls:sys_enter_sendmsg,syscalls:sys_enter_sendto,syscalls:sys_enter_openat,"
               "syscalls:sys_enter_close,syscalls:sys_enter_statx,syscalls:sys_enter_newfstatat,syscalls:sys_enter_epoll_ctl,"
               "syscalls:sys_enter_futex,syscalls:sys_enter_setsockopt,syscalls:sys_enter_lseek,"
               "syscalls:sys_enter_pread64,syscalls:sys_enter_mmap,syscalls:sys_enter_munmap,syscalls:sys_enter_madvise,"
               "syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_getrandom,syscalls:sys_enter_shutdown")


def case_profile(env_, mode):
    """perf stat of both servers per request, perf record of shardgate (hits),
    then perf record of a 1 GiB PUT through a gateway to an S3 cold tier."""
    outdir = os.path.join(RESULTS, "profile")
    os.makedirs(outdir, exist_ok=True)
    for (tag, size, n), c in zip(mode["sizes"], mode["conc"]):
        for srv in (env_["sg"], env_["ngx_static"]):
            name = "sg" if srv is env_["sg"] else "nginx"
            pid_list = ",".join(str(p) for p in srv.pids())
            so = os.path.join(outdir, "stat-%s-%s-c%d.txt" % (name, tag, c))
            perf = subprocess.Popen(["perf", "stat", "-e", PERF_EVENTS, "-p", pid_list, "-o", so],
                                    stderr=subprocess.DEVNULL)
            PROCS.append(("perf", perf))
            time.sleep(0.3)
            w = run_wrk(env_, srv, "/bench/s%s/" % tag, n, c, mode["dur"])
            perf.send_signal(signal.SIGINT)
            perf.wait()
            PROCS[:] = [x for x in PROCS if x[1] is not perf]
            with open(so, "a") as f:
                f.write("\n# wrk: %d requests, %.0f req/s, %.0f MB/s, p99 %.3f ms, server CPU %.1f us/req\n" % (
                    w["requests"], w["rps"], w["MBps"], w["p99_ms"], w["cpu_us_per_req"]))
            log("profile %s %s c=%d: %.0f req/s, %.0f MB/s, %.1f us/req -> %s" % (
                name, tag, c, w["rps"], w["MBps"], w["cpu_us_per_req"], so))
        # perf record of shardgate alone
        data = os.path.join(env_["work"], "perf-%s.data" % tag)
        perf = subprocess.Popen(["perf", "record", "--call-graph", "dwarf,16384", "-F", "499", "-o", data, "-p",
                                 str(env_["sg"].proc.pid)], stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        PROCS.append(("perf", perf))
        time.sleep(0.3)
        run_wrk(env_, env_["sg"], "/bench/s%s/" % tag, n, c, 3)
        perf.send_signal(signal.SIGINT)
        perf.wait()
        PROCS[:] = [x for x in PROCS if x[1] is not perf]
        for kind, args in (("self", ["--no-children"]), ("children", ["--children"])):
            rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--percent-limit", "1.5",
                                  "-g", "caller,0.5,callee,function,percent", "--max-stack", "24"] + args,
                                 capture_output=True, text=True)
            with open(os.path.join(outdir, "report-sg-%s-c%d-%s.txt" % (tag, c, kind)), "w") as f:
                f.write(rep.stdout)
    # the write path: one 1 GiB PUT through a gateway to an S3-complete cold tier (shardgate --data)
    cold = start_cold_s3(env_)
    cache = os.path.join(env_["work"], "cache-put")
    shutil.rmtree(cache, ignore_errors=True)
    gw = start_shardgate(env_, "sg-put", free_port(cold.port + 1), cold.port, cache)
    src = os.path.join(env_["work"], "put.bin")
    with open(src, "wb") as f, open(env_["src64"], "rb") as g:
        blk = g.read()
        for _ in range(16):
            f.write(blk)
    perfs = []
    for name, srv in (("gw", gw), ("cold", cold)):
        data = os.path.join(env_["work"], "perf-put-%s.data" % name)
        pr = subprocess.Popen(["perf", "record", "--call-graph", "dwarf,16384", "-F", "199", "-o", data, "-p",
                               str(srv.proc.pid)], stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        PROCS.append(("perf", pr))
        perfs.append((name, srv, pr, data))
    time.sleep(0.3)
    c0 = {n: cpu_snap(sv.pids()) for n, sv, _, _ in perfs}
    t = time.time()
    code = subprocess.run(
        ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--aws-sigv4", "aws:amz:us-east-1:s3",
         "--user", "shardgate:shardgate-secret-key", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
         "-T", src, "http://127.0.0.1:%d/bench/ckpt/profile" % gw.port], capture_output=True, text=True).stdout
    secs = time.time() - t
    cpu = {n: cpu_since(c0[n], sv.pids()) for n, sv, _, _ in perfs}
    for name, srv, pr, data in perfs:
        pr.send_signal(signal.SIGINT)
        pr.wait()
        PROCS[:] = [x for x in PROCS if x[1] is not pr]
        rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--percent-limit", "1.5",
                              "-g", "caller,0.5,callee,function,percent", "--max-stack", "24"],
                             capture_output=True, text=True)
        with open(os.path.join(outdir, "report-put-1g-%s-self.txt" % name), "w") as f:
            f.write("# 1 GiB PUT, HTTP %s, %.2f s (%.0f MB/s); %s CPU %.2f s\n" % (
                code, secs, (1 << 30) / secs / 1e6, name, cpu[name]))
            f.write(rep.stdout)
    log("profile PUT 1 GiB: HTTP %s in %.2f s; gateway CPU %.2f s, cold-tier shardgate CPU %.2f s" % (
        code, secs, cpu["gw"], cpu["cold"]))
    gw.stop()
    cold.stop()
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(os.path.join(env_["data"], "ckpt"), ignore_errors=True)
    os.unlink(src)
    return 0


# ---------------------------------------------------------------- main

def rereport(mode_name):
    """Rewrite report-MODE.md and the plots from report-MODE.json (no run)."""
    with open(os.path.join(RESULTS, "report-%s.json" % mode_name)) as f:
        res = json.load(f)
    env_ = dict(res.get("env") or {})
    for k, v in (("bin", "?"), ("commit", "?"), ("dirty", False), ("machine", "?")):
        env_.setdefault(k, v)
    plots(mode_name, res, RESULTS, log)
    md = report(mode_name, MODES[mode_name], res, env_) + "\nWall time of the run: %.0f s.\n" % res.get("elapsed_s", 0)
    with open(os.path.join(RESULTS, "report-%s.md" % mode_name), "w") as f:
        f.write(md)
    return 0


def main():
    if sys.argv[1] == "--report":
        return rereport(sys.argv[2])
    mode_name = sys.argv[1] if len(sys.argv) > 1 else "quick"
    mode = dict(NVME_DEFAULTS, **MODES[mode_name])
    binp = sys.argv[2]
    getc = sys.argv[3]
    work = os.environ.get("BENCH_WORK", "/tmp/shardgate-bench-%s" % mode_name)
    for d in ("cache", "cache-t1", "cache-t4", "cache-mem", "cache-dir", "ngx-proxy/cache", "spool"):
        shutil.rmtree(os.path.join(work, d), ignore_errors=True)
    for d in ("ckpt", "slow", "tiny", "c1m", "c64m", "c8x1m", "c8x64m", "cdir1m", "cdir64m"):  # per-run objects (cold again)
        shutil.rmtree(os.path.join(work, "data", "bench", d), ignore_errors=True)
    os.makedirs(work, exist_ok=True)
    os.makedirs(RESULTS, exist_ok=True)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True).stdout.strip())
    env_ = dict(work=work, bin=binp, getc=getc, commit=commit or "?", dirty=dirty,
                machine="%d cores, %s" % (os.cpu_count(), os.uname().release),
                port_base=int(os.environ.get("BENCH_PORT_BASE", "27300")))
    res = {}
    t_start = time.time()
    env_["load0"] = open("/proc/loadavg").read().split()[0]
    try:
        log("data in %s" % work)
        data, src1, src64 = make_data(work, mode)
        env_.update(data=data, src1=src1, src64=src64)
        pb = env_["port_base"]
        # cold tier
        cp = free_port(pb)
        cold_dir = os.path.join(work, "ngx-cold")
        env_["cold_log"] = os.path.join(cold_dir, "access.log")
        if os.path.exists(env_["cold_log"]):
            os.unlink(env_["cold_log"])
        env_["cold"] = start_nginx("nginx-cold", cold_dir, """
  client_max_body_size 0;
  server {{
    listen 127.0.0.1:{p};
    root {root};
    location ~ ^/[^/]+/?$ {{ return 200; }}
    location /bench/slow/ {{ limit_rate 100m; sendfile_max_chunk 256k; }}
    location / {{ dav_methods PUT DELETE; create_full_put_path on; }}
  }}""".format(p=cp, root=os.path.join(work, "data")), cp,
            access="access_log %s;" % env_["cold_log"])
        # shardgate in front of it
        env_["cache"] = os.path.join(work, "cache")
        env_["sg"] = start_shardgate(env_, "sg", free_port(cp + 1), cp, env_["cache"],
                                     memory=mode.get("sg_memory"))
        # nginx static over the same files
        sp = free_port(env_["sg"].port + 1)
        env_["ngx_static"] = start_nginx("nginx-static", os.path.join(work, "ngx-static"), """
  open_file_cache max=10000 inactive=60s; open_file_cache_valid 60s;
  server {{ listen 127.0.0.1:{p} backlog=4096; root {root}; }}""".format(p=sp, root=os.path.join(work, "data")), sp)
        if mode["lj"] or mode["cold"]:
            pp = free_port(sp + 1)
            pdir = os.path.join(work, "ngx-proxy")
            os.makedirs(os.path.join(pdir, "cache"), exist_ok=True)
            env_["ngx_proxy"] = start_nginx("nginx-proxy-cache", pdir, """
  proxy_cache_path {d}/cache levels=1:2 keys_zone=bench:64m max_size=100g inactive=1d use_temp_path=off;
  upstream cold {{ server 127.0.0.1:{cp}; keepalive 32; }}
  server {{
    listen 127.0.0.1:{p};
    location / {{
      proxy_pass http://cold; proxy_http_version 1.1; proxy_set_header Connection "";
      proxy_cache bench; proxy_cache_valid 200 1d;
      proxy_cache_lock on; proxy_cache_lock_timeout 60s; proxy_cache_lock_age 60s;
    }}
  }}""".format(d=pdir, cp=cp, p=pp), pp)
        log("up: cold %d, shardgate %d, nginx static %d%s" % (cp, env_["sg"].port, sp,
            ", nginx proxy_cache %d" % env_["ngx_proxy"].port if "ngx_proxy" in env_ else ""))
        # warm shardgate's cache (every hot object once) and both page caches
        warm = ["/bench/s%s/%06d" % (tag, i) for tag, _, n in mode["sizes"] for i in range(n)]
        run_getc(env_, env_["sg"].port, warm, conc=8)
        run_getc(env_, env_["sg"].port, warm, conc=8)
        run_getc(env_, env_["ngx_static"].port, warm, conc=8)
        if mode_name == "profile":
            return case_profile(env_, mode)
        if mode_name == "memory":
            case_memory(env_, mode, res)
            return finish(mode_name, mode, res, env_, t_start, hits_needed=False)
        case_hits(env_, mode, res)
        # the optional cases, in this order, each where the mode asks for it
        for flag, case in (("cold", case_cold), ("nvme", case_nvme), ("lj", case_late_joiner),
                           ("mixed", case_mixed), ("bipolar", case_bipolar),
                           ("epoch", case_epoch), ("threads", case_threads),
                           ("memory", case_memory)):
            if mode.get(flag):
                case(env_, mode, res)
    except Exception as e:  # noqa: BLE001 - keep what was measured, then fail
        import traceback
        traceback.print_exc()
        stop_all()
        res["failed"] = repr(e)
        finish(mode_name, mode, res, env_, t_start)
        return 1
    finally:
        stop_all()
    return finish(mode_name, mode, res, env_, t_start)


def finish(mode_name, mode, res, env_, t_start, hits_needed=True):
    res["elapsed_s"] = time.time() - t_start
    env_["load1"] = open("/proc/loadavg").read().split()[0]
    res["loadavg"] = [env_["load0"], env_["load1"]]
    res["env"] = {k: env_.get(k) for k in ("bin", "commit", "dirty", "machine", "load0", "load1")}
    res["env"]["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with open(os.path.join(RESULTS, "report-%s.json" % mode_name), "w") as f:
        json.dump(res, f, indent=1, default=str)
    made = plots(mode_name, res, RESULTS, log)
    md = report(mode_name, mode, res, env_)
    md += "\nWall time of the run: %.0f s.\n" % res["elapsed_s"]
    with open(os.path.join(RESULTS, "report-%s.md" % mode_name), "w") as f:
        f.write(md)
    print(md)
    if res.get("failed"):
        print("bench: FAILED: %s" % res["failed"], file=sys.stderr)
        return 1
    if hits_needed and not res.get("hits", {}).get("rows"):
        print("bench: empty table", file=sys.stderr)
        return 1
    log("report: %s; plots: %s" % (os.path.join(RESULTS, "report-%s.md" % mode_name), ", ".join(made) or "none"))
    return 0


if __name__ == "__main__":
    def _term(signum, frame):
        stop_all()
        sys.exit(128 + signum)
    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)
    sys.exit(main())
