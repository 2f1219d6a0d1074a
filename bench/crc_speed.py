#!/usr/bin/env python3
"""bench/crc_speed.py - the CRCs' GB/s before and after common/: builds
bench/crc_speed.c against the CRC code of commit --base (auth/checksum.c and
cache/crc32c.c as they were before common/ existed; -DCRC_SPEED_BASE, -O2 -g
like the RelWithDebInfo build) and takes the "after" program from a CMake
build (--new, default build/bench/crc_speed). Runs the two alternately
--rounds times (each run: --reps repetitions of every function at 4 KiB,
1 MiB and 64 MiB, --total MiB per sample), checks that both compute the same
CRCs over the same bytes, and prints a Markdown table of medians with
[min-max] over all samples, in GB per CPU-second of the measuring thread
(what a loaded machine disturbs least) and in wall-clock GB/s. GB = 1e9 bytes.

Usage: python3 bench/crc_speed.py --base REV [--new BIN] [--rounds 5] [--reps 3]
       [--total 512]
Run it under `nice -n 19` on a shared machine: the ratios of one run are the
result, the absolute numbers move with the load.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
SIZES = {4096: "4 KiB", 1 << 20: "1 MiB", 64 << 20: "64 MiB"}
# the rows of the table: (size, name before, name after, what)
ROWS = [
    ("crc32", "crc32", "CRC-32: slicing-by-8 tables -> ISA-L crc32_gzip_refl"),
    ("crc32c", "crc32c", "CRC-32C (auth): SSE4.2 crc32 loop -> ISA-L crc32_iscsi"),
    ("crc32c-cache-index", "crc32c", "CRC-32C (cache index): its own SSE4.2 loop -> ISA-L"),
    ("crc64nvme", "crc64nvme", "CRC-64/NVME: slicing-by-8 -> PCLMULQDQ folding (ours)"),
    ("crc64nvme", "crc64nvme-table", "CRC-64/NVME: slicing-by-8 -> its table fallback"),
    ("zlib-crc32", "zlib-crc32", "zlib crc32 (reference, not used by shardgate)"),
]


def build_base(rev, out):
    tmp = tempfile.mkdtemp(prefix="crc_speed_base.")
    try:
        tar = subprocess.run(["git", "-C", SRC, "archive", rev, "auth", "conf", "cache",
                              "backend"], check=True, stdout=subprocess.PIPE).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=tar, check=True)
        inc = ["-I" + os.path.join(tmp, d) for d in ("auth", "conf", "cache", "backend")]
        cmd = (["cc", "-std=c11", "-O2", "-g", "-DNDEBUG", "-D_GNU_SOURCE", "-DCRC_SPEED_BASE"]
               + inc + [os.path.join(HERE, "crc_speed.c"),
                        os.path.join(tmp, "auth", "checksum.c"),
                        os.path.join(tmp, "cache", "crc32c.c"),
                        "-o", out, "-lcrypto", "-lz", "-lpthread"])
        subprocess.run(cmd, check=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(binp, reps, total):
    out = subprocess.run([binp, "-r", str(reps), "-t", str(total)], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    rows = []
    for line in out.splitlines():
        size, name, _rep, wall, cpu, crc = line.split()
        rows.append((int(size), name, float(wall), float(cpu), crc))
    return rows


def fmt(xs):
    if not xs:
        return "-"
    return "%.2f [%.2f-%.2f]" % (statistics.median(xs), min(xs), max(xs))


def ratio(a, b):
    if not a or not b:
        return "-"
    return "%.1fx" % (statistics.median(a) / statistics.median(b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="the commit before the change")
    ap.add_argument("--new", default=os.path.join(SRC, "build", "bench", "crc_speed"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--total", type=int, default=512, help="MiB per sample")
    a = ap.parse_args()
    tmpd = tempfile.mkdtemp(prefix="crc_speed.")
    base_bin = os.path.join(tmpd, "crc_speed_base")
    build_base(a.base, base_bin)
    progs = {"before": base_bin, "after": a.new}
    samples = {}      # (which, size, fn) -> ([wall], [cpu])
    crcs = {}         # (which, size, fn) -> crc
    load0 = os.getloadavg()
    loads = []
    t0 = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for r in range(a.rounds):
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        for which in order:
            for size, name, wall, cpu, crc in run(progs[which], a.reps, a.total):
                w, c = samples.setdefault((which, size, name), ([], []))
                w.append(wall)
                c.append(cpu)
                crcs[(which, size, name)] = crc
        loads.append(os.getloadavg()[0])
        print("round %d/%d done, load %.1f" % (r + 1, a.rounds, loads[-1]), file=sys.stderr)
    shutil.rmtree(tmpd, ignore_errors=True)
    ok = True
    for size in SIZES:
        for fn in ("crc32", "crc32c", "crc64nvme", "zlib-crc32"):
            b, f = crcs.get(("before", size, fn)), crcs.get(("after", size, fn))
            if b != f:
                print("MISMATCH %s at %d: before %s after %s" % (fn, size, b, f), file=sys.stderr)
                ok = False
        if crcs.get(("before", size, "crc32c-cache-index")) != crcs.get(("after", size, "crc32c")):
            ok = False
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print("%s, %s, %d CPUs (shared: the lead's CI ran beside it), nice -n 19; load average "
          "%.1f at the start, %.1f-%.1f after the rounds; %d rounds x %d reps, before/after "
          "alternating; %d MiB per sample. Before: %s's code; after: this build."
          % (t0, cpu, os.cpu_count() or 0, load0[0], min(loads), max(loads), a.rounds, a.reps,
             a.total, a.base))
    print()
    print("| size | function (before -> after) | before GB/CPU-s | after GB/CPU-s | speed-up "
          "(CPU) | before GB/s wall | after GB/s wall | speed-up (wall) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for size, label in SIZES.items():
        for bname, aname, what in ROWS:
            bw, bc = samples.get(("before", size, bname), ([], []))
            aw, ac = samples.get(("after", size, aname), ([], []))
            print("| %s | %s | %s | %s | %s | %s | %s | %s |"
                  % (label, what, fmt(bc), fmt(ac), ratio(ac, bc), fmt(bw), fmt(aw),
                     ratio(aw, bw)))
    print()
    print("CRCs equal before and after at every size: %s" % ("yes" if ok else "NO"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
