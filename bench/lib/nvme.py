"""bench/lib/nvme.py - hits from the disk, not from the page cache (issue 14).

A training cache is larger than RAM, so its hits come from the drive. This
case evicts every cached file from the page cache (posix_fadvise
POSIX_FADV_DONTNEED on each file: no privilege needed) before each run and
then reads a working set that one run does not get through twice, in three
ways side by side:
  - shardgate: hits from its cache directory (every object was filled once);
  - nginx with `aio threads` and `directio` over the same objects as plain
    files (O_DIRECT reads: the page cache is never used);
  - fio: random O_DIRECT reads of the same block size over the same files at
    the same queue depth (io_uring): what the device gives, the ceiling.
Each wrk run also reports how much of what the server sent came from the
disk (the server processes' read_bytes in /proc/PID/io over the bytes
served), so a run that was served from memory after all shows as such."""
import json
import os
import subprocess

from procs import free_port, log, pairs, read_bytes, run_getc, run_wrk, start_nginx
from report import MiB


def make_files(data, tag, size, n):
    """n distinct random files of size bytes under data/n<tag>/, synced (the
    page cache drops clean pages only)."""
    d = os.path.join(data, "n" + tag)
    os.makedirs(d, exist_ok=True)
    for i in range(n):
        p = os.path.join(d, "%06d" % i)
        if os.path.exists(p) and os.path.getsize(p) == size:
            continue
        with open(p, "wb") as f:
            f.write(os.urandom(size))
            f.flush()
            os.fsync(f.fileno())
    return d


def drop_cached(dirs):
    """Evicts every regular file under dirs from the page cache."""
    n = 0
    for top in dirs:
        for root, _, files in os.walk(top):
            for name in files:
                try:
                    fd = os.open(os.path.join(root, name), os.O_RDONLY)
                except OSError:
                    continue
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    n += 1
                finally:
                    os.close(fd)
    return n


def run_fio(dir_, bs, depth, dur):
    # 40,000 files: fio keeps at most 256 open at once (it cannot open them all)
    # and picks a random one for each read, as the random keys of the servers
    out = subprocess.run(["fio", "--name=nvme", "--opendir=%s" % dir_, "--rw=randread", "--bs=%d" % bs,
                          "--openfiles=256", "--file_service_type=random",
                          "--direct=1", "--ioengine=io_uring", "--iodepth=%d" % depth,
                          "--runtime=%d" % dur, "--time_based", "--output-format=json"],
                         capture_output=True, text=True, timeout=dur + 120)
    if out.returncode != 0:
        raise RuntimeError("fio failed: %s" % out.stderr[-500:])
    j = json.loads(out.stdout[out.stdout.index("{"):])
    r = j["jobs"][0]["read"]
    return dict(MBps=r["bw_bytes"] / 1e6, iops=r["iops"],
                p99_ms=r["clat_ns"]["percentile"].get("99.000000", 0) / 1e6)


def case_nvme(env_, mode, res):
    sg = env_["sg"]
    data = env_["data"]
    sets = mode["nvme_sets"]
    dirs = {tag: make_files(data, tag, size, n) for tag, size, n in sets}
    # every object filled into shardgate's cache once
    for tag, size, n in sets:
        log("nvme hits: filling %d objects of %s into the cache" % (n, tag))
        run_getc(env_, sg.port, ["/bench/n%s/%06d" % (tag, i) for i in range(n)], conc=8)
    pn = free_port(env_["port_base"] + 40)
    ngx = start_nginx("nginx-directio", os.path.join(env_["work"], "ngx-directio"), """
  aio threads; directio 4k; directio_alignment 4k; output_buffers 2 1m;
  server {{ listen 127.0.0.1:{p} backlog=4096; root {root}; }}""".format(p=pn, root=os.path.dirname(data)), pn)
    env_["ngx_directio"] = ngx
    evict = [env_["cache"], data]
    rows = []
    try:
        for tag, size, n in sets:
            for c in mode["nvme_conc"]:
                dur = mode["nvme_dur"]
                log("nvme hits %s c=%d (%d s x %d reps, shardgate / nginx directio / fio)" % (tag, c, dur, mode["reps"]))

                def one(srv):
                    def f(r):
                        drop_cached(evict)
                        b0 = read_bytes(srv.pids())
                        w = run_wrk(env_, srv, "/bench/n%s/" % tag, n, c, dur)
                        w["disk_fraction"] = (read_bytes(srv.pids()) - b0) / max(1, w["bytes"])
                        return w
                    return f
                A, B = pairs(mode["reps"], one(sg), one(ngx))
                F = [run_fio(dirs[tag], size, c, dur) for _ in range(mode["reps"])]
                rows.append(dict(size=tag, bytes=size, n=n, c=c, sg=A, ngx=B, fio=F))
    finally:
        ngx.stop()
    res["nvme"] = dict(rows=rows)


def report_nvme(res, A, section, table_head, fmt, summary, cell):
    rows = res["nvme"]["rows"]
    section("Hits from the disk: page cache dropped before each run (posix_fadvise DONTNEED), "
            "random keys over a working set one run does not get through")
    A("nginx: `aio threads; directio 4k` (O_DIRECT reads). fio: randread, O_DIRECT, io_uring, "
      "iodepth = c, over the same files (the device's limit). *disk* = bytes the server read "
      "from storage / bytes it sent (1.0: every byte from the drive).")
    A("")
    table_head("| size | c | objects | shardgate MB/s | nginx directio MB/s | ratio sg/nginx | fio MB/s | sg/fio | "
               "sg p99 ms | nginx p99 ms | fio p99 ms | sg disk | nginx disk | sg CPU µs/req | nginx CPU µs/req |")
    for row in rows:
        a, b, f = row["sg"], row["ngx"], row["fio"]
        A("| %s | %d | %d | %s | %s | **%s** | %s | **%s** | %s | %s | %s | %s | %s | %s | %s |" % (
            row["size"], row["c"], row["n"], cell(a, "MBps"), cell(b, "MBps"),
            fmt(summary([x["MBps"] / y["MBps"] for x, y in zip(a, b)]), 2),
            cell(f, "MBps"), fmt(summary([x["MBps"] / y["MBps"] for x, y in zip(a, f)]), 2),
            cell(a, "p99_ms", 2), cell(b, "p99_ms", 2), cell(f, "p99_ms", 2),
            cell(a, "disk_fraction", 2), cell(b, "disk_fraction", 2),
            cell(a, "cpu_us_per_req", 1), cell(b, "cpu_us_per_req", 1)))
    A("")


def goals_nvme(res, L, fmt, summary, yes):
    for row in res["nvme"]["rows"]:
        r = summary([x["MBps"] / y["MBps"] for x, y in zip(row["sg"], row["ngx"])])
        f = summary([x["MBps"] / y["MBps"] for x, y in zip(row["sg"], row["fio"])])
        L.append("| hit from disk %s c=%d | >= 1.0x nginx directio, >= 0.8x fio | %sx nginx, %sx fio | %s |" % (
            row["size"].replace("m", " MiB").replace("k", " KiB"), row["c"], fmt(r, 2), fmt(f, 2),
            yes(r["med"] >= 1.0 and f["med"] >= 0.8)))


# 2 GiB of 1 MiB objects and 160 MiB of 4 KiB ones: more than one 2 s run
# reads (the disk column says how much came from the drive)
MODE_DEFAULTS = dict(nvme_sets=[("1m", MiB, 2048), ("4k", 4096, 40000)], nvme_conc=[8, 64], nvme_dur=2)
