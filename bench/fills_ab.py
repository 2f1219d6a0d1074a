#!/usr/bin/env python3
"""A/B two shardgate binaries on the fill path (cold misses), side by side.

  python3 bench/fills_ab.py BIN_A BIN_B [--reps N] [--cold nginx|shardgate|dir] [--conc N]
                            [--a-cache JSON] [--b-cache JSON] [--out FILE]

One cold tier and the two gateways on 127.0.0.1, each with its own cache
directory. The cold tier is nginx static over warm files, as in
bench/run.sh (its ETags are not MD5s: a fill checks nothing), or with
--cold shardgate a shardgate --data over the same files, an S3 server whose
objects carry what S3's do: an MD5 ETag and the CRC32 boto3 sent with the
PUT (x-amz-checksum-crc32), so a fill checks one of them. With --cold dir
each gateway's cold tier is a directory store of its own (--data, plain
files, as a dataset directory or a parallel file system mount), and the
direct GET is nginx static over A's directory. With --conc N, N clients
read at once (N times the objects per run; MB/s is the aggregate, from the
first request's start to the last one's end). Every run reads
keys neither gateway has seen (hard links of one source file per size), so
every GET is a miss: 20 objects of 1 MiB, then 2 of 64 MiB (--sizes: others), one client,
keep-alive, sequential. Runs alternate A/B (B first on odd runs); a direct
GET from the cold tier runs beside them as the ceiling. Reports per arm the
median [min-max] of MB/s, the time to the first body byte, the gateway's CPU
per object (the scheduler's count for its threads, bench/lib/procs.py cpu_since), and the per-run ratio B/A.
--a-cache / --b-cache add keys to an arm's "cache" config object (one binary,
two settings: --b-cache '{"fill_io": "direct"}'). With --hits N each run then
reads its objects N more times (hits): the first pass and the median of the
others, MB/s and the gateway's CPU per object - what a fill leaves for the
reads after it (a file written with O_DIRECT is read from the drive once).
Used for issue 14's fill-path changes (bench/results/fills-ab-*.md)."""
import argparse
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from procs import cpu_since, cpu_snap, free_port, log, pairs, run_getc, start_nginx, start_shardgate, stop_all  # noqa: E402
from report import MiB, fmt, summary  # noqa: E402
from bench import start_cold_s3  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = (("1 MiB", MiB, 20), ("64 MiB", 64 * MiB, 2))


def put_through_s3(port, path, data, key):
    """PUTs the file as bench/key with boto3 (which adds x-amz-checksum-crc32);
    returns the object's file in the cold tier's directory."""
    import boto3
    from botocore.config import Config
    s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:%d" % port, aws_access_key_id="bench",
                      aws_secret_access_key="bench-secret", region_name="us-east-1",
                      config=Config(s3={"addressing_style": "path"}))
    with open(path, "rb") as f:
        s3.put_object(Bucket="bench", Key=key, Body=f)
    h = s3.head_object(Bucket="bench", Key=key, ChecksumMode="ENABLED")
    log("cold object %s: ETag %s, CRC32 %s" % (key, h["ETag"], h.get("ChecksumCRC32")))
    return os.path.join(data, key)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_a")
    ap.add_argument("bin_b")
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--getc", default=os.path.join(ROOT, "build-bench", "bench-getc"))
    ap.add_argument("--cold", choices=("nginx", "shardgate", "dir"), default="nginx")
    ap.add_argument("--conc", type=int, default=1, help="clients at once")
    ap.add_argument("--out", help="also write the table to this file")
    ap.add_argument("--sizes", help="object sizes in MiB, comma-separated (default 1,64)")
    ap.add_argument("--hits", type=int, default=0,
                    help="after the misses, read the same objects this many more times")
    ap.add_argument("--a-cache", default="{}", help="JSON: more keys of arm A's cache config")
    ap.add_argument("--b-cache", default="{}", help="JSON: more keys of arm B's cache config")
    a = ap.parse_args()
    work = os.environ.get("BENCH_WORK", "/tmp/shardgate-bench-fills-ab")
    shutil.rmtree(work, ignore_errors=True)
    data = os.path.join(work, "data", "bench")
    os.makedirs(data)
    # --cold dir: each gateway locks its data directory, so each has its own
    # (hard links of the same files); the direct GETs read A's
    dirs = {arm: os.path.join(work, "dir-" + arm) for arm in ("A", "B")}

    def data_of(arm):
        if a.cold != "dir":
            return data
        return os.path.join(dirs["B" if arm == "B" else "A"], "bench")
    for arm in dirs:
        os.makedirs(data_of(arm), exist_ok=True)
    base = int(os.environ.get("BENCH_PORT_BASE", "27700"))
    env_ = dict(work=work, getc=a.getc, port_base=base, bin=a.bin_b)
    try:
        if a.cold == "shardgate":
            cold = start_cold_s3(env_, public_bucket="bench")
            cp = cold.port
        else:
            cp = free_port(base)
            cold = start_nginx("nginx-cold", os.path.join(work, "ngx"), """
  server {{ listen 127.0.0.1:{p}; root {root};
    location ~ ^/[^/]+/?$ {{ return 200; }} }}""".format(p=cp, root=os.path.dirname(data_of("A"))), cp)
        gw = {}
        for arm, binp, extra in (("A", a.bin_a, a.a_cache), ("B", a.bin_b, a.b_cache)):
            env_["bin"] = binp
            port = free_port(cp + 1 + len(gw) * 10)
            gw[arm] = start_shardgate(env_, "sg-" + arm, port, cp, os.path.join(work, "cache-" + arm),
                                      data_dir=dirs[arm] if a.cold == "dir" else None,
                                      cache_conf=json.loads(extra))
        rows = []
        sizes = SIZES
        if a.sizes:   # objects per run: 20 of 1 MiB, else about 32 MiB's worth (at least 2)
            sizes = [("%d MiB" % m, m * MiB, 20 if m == 1 else max(2, 32 // m))
                     for m in map(int, a.sizes.split(","))]
        for name, size, count in sizes:
            count *= a.conc
            src = os.path.join(work, "src-%d" % size)
            with open(src, "wb") as f:
                for _ in range(size // MiB):
                    f.write(os.urandom(MiB))
            if a.cold == "shardgate":
                # through S3, so the file has the object's metadata (its
                # xattr), which the hard links below share
                src = put_through_s3(cp, src, data, "src-%d" % size)
            log("fills A/B: %s, %d objects x %d runs" % (name, count, a.reps))

            def keys(arm, r):
                d = os.path.join(data_of(arm), "%d-%s-%d" % (size, arm, r))
                os.makedirs(d, exist_ok=True)
                for i in range(count):
                    os.link(src, os.path.join(d, "%04d" % i))
                paths = ["/bench/%d-%s-%d/%04d" % (size, arm, r, i) for i in range(count)]
                # the cold tier's page cache is warm for every arm (in dir
                # mode every key is a link of src: reading src warms them)
                if a.cold == "dir":
                    with open(src, "rb") as f:
                        while f.read(1 << 20):
                            pass
                else:
                    run_getc(env_, cold.port, paths)
                return paths

            def arm_run(arm):
                def f(r):
                    paths = keys(arm, r)
                    srv = gw.get(arm)
                    c0 = cpu_snap(srv.pids()) if srv else None
                    got = run_getc(env_, srv.port if srv else cold.port, paths, conc=a.conc)
                    cpu = cpu_since(c0, srv.pids()) if srv else 0.0
                    res = dict(MBps=size * count / took(got) / 1e6,
                               body_ms=summary([x["ttbody"] for x in got])["med"],
                               cpu_ms=cpu * 1e3 / count)
                    if srv and a.hits:
                        time.sleep(0.5)   # every fill published: the reads are hits
                        for p in range(a.hits):
                            c0 = cpu_snap(srv.pids())
                            got = run_getc(env_, srv.port, paths, conc=a.conc)
                            cpu = cpu_since(c0, srv.pids())
                            tag = "hit1" if p == 0 else "hits"
                            res.setdefault(tag + "_MBps", []).append(size * count / took(got) / 1e6)
                            res.setdefault(tag + "_cpu_ms", []).append(cpu * 1e3 / count)
                        for k in [k for k in res if k.startswith("hit")]:
                            res[k] = summary(res[k])["med"]
                    return res
                return f

            def took(got):
                if a.conc == 1:
                    return sum(x["total"] for x in got) / 1e3
                return (max(x["start"] + x["total"] for x in got) -
                        min(x["start"] for x in got)) / 1e3
            A, B = pairs(a.reps, arm_run("A"), arm_run("B"))
            D = [arm_run("direct")(r) for r in range(a.reps)]
            rows.append((name, A, B, D))
    finally:
        stop_all()
    L = ["A = `%s` (cache %s), B = `%s` (cache %s); cold tier %s; %d client(s) at once; %d runs "
         "each, alternating; medians [min-max]; ratio = per-run B / A." % (
             a.bin_a, a.a_cache, a.bin_b, a.b_cache, a.cold, a.conc, a.reps), "",
         "| size | arm | MB/s | first body byte ms | CPU ms per object |" +
         (" first hit MB/s | its CPU ms | later hits MB/s | their CPU ms |" if a.hits else ""),
         "| --- | --- | --- | --- | --- |" + (" --- | --- | --- | --- |" if a.hits else "")]
    HK = ("hit1_MBps", "hit1_cpu_ms", "hits_MBps", "hits_cpu_ms")
    for name, A, B, D in rows:
        for arm, runs in (("A", A), ("B", B), ("direct GET", D)):
            L.append("| %s | %s | %s | %s | %s |" % (name, arm, fmt(summary([x["MBps"] for x in runs])),
                     fmt(summary([x["body_ms"] for x in runs])),
                     "-" if arm.startswith("direct") else fmt(summary([x["cpu_ms"] for x in runs]))) +
                     ("".join(" %s |" % ("-" if k not in runs[0] else fmt(summary([x[k] for x in runs])))
                              for k in HK) if a.hits else ""))
        L.append("| %s | **B / A** | **%s** | %s | %s |" % (
            name, fmt(summary([b["MBps"] / x["MBps"] for x, b in zip(A, B)]), 2),
            fmt(summary([b["body_ms"] / x["body_ms"] for x, b in zip(A, B)]), 2),
            fmt(summary([b["cpu_ms"] / x["cpu_ms"] for x, b in zip(A, B) if x["cpu_ms"]]), 2)) +
            ("".join(" %s |" % fmt(summary([b[k] / x[k] for x, b in zip(A, B) if x[k]]), 2)
                     for k in HK) if a.hits else ""))
    txt = "\n".join(L) + "\n"
    print(txt)
    if a.out:
        with open(a.out, "w") as f:
            f.write(txt)


if __name__ == "__main__":
    main()
