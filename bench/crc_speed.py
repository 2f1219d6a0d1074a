#!/usr/bin/env python3
"""bench/crc_speed.py - the payload CRCs' GB/s before and after a change:
builds bench/crc_speed.c against the functions of commit --base (auth/checksum.c
and cache/crc32c.c of the tree before common/ existed, with -DCRC_SPEED_BASE)
and takes the "after" program from the CMake build (--new, default
build/bench/crc_speed, RelWithDebInfo: -O2 like the base build here), runs the two
alternately --rounds times (each run: --reps repetitions of 1 GiB in 8 MiB
pieces, every function), checks that both compute the same CRCs over the same
bytes, and prints a Markdown table of medians with [min-max] over all samples:
wall-clock GB/s and GB per CPU-second of the measuring thread (the latter
moves less on a loaded machine). GB = 1e9 bytes.

Usage: python3 bench/crc_speed.py --base REV [--new BIN] [--rounds 5] [--reps 3]
"""

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)


def build_base(rev, out):
    tmp = tempfile.mkdtemp(prefix="crc_speed_base.")
    try:
        tar = subprocess.run(["git", "-C", SRC, "archive", rev, "auth", "conf", "cache"],
                             check=True, stdout=subprocess.PIPE).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=tar, check=True)
        cmd = ["cc", "-std=c11", "-O2", "-g", "-DNDEBUG", "-D_GNU_SOURCE", "-DCRC_SPEED_BASE",
               "-I" + os.path.join(tmp, "auth"), "-I" + os.path.join(tmp, "conf"),
               "-I" + os.path.join(tmp, "cache"), os.path.join(HERE, "crc_speed.c"),
               os.path.join(tmp, "auth", "checksum.c"), os.path.join(tmp, "cache", "crc32c.c"),
               "-o", out, "-lcrypto", "-lpthread"]
        if os.path.exists("/usr/include/zlib.h"):
            cmd[1:1] = ["-DCRC_SPEED_HAVE_ZLIB"]
            cmd.append("-lz")
        subprocess.run(cmd, check=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(binp, reps):
    out = subprocess.run([binp, "-r", str(reps)], check=True, stdout=subprocess.PIPE,
                         text=True).stdout
    rows = []
    for line in out.splitlines():
        name, _rep, wall, cpu, crc = line.split()
        rows.append((name, float(wall), float(cpu), crc))
    return rows


def fmt(xs):
    if not xs:
        return "-"
    return "%.2f [%.2f-%.2f]" % (statistics.median(xs), min(xs), max(xs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="the commit before the change")
    ap.add_argument("--new", default=os.path.join(SRC, "build", "bench", "crc_speed"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    base_bin = os.path.join(tempfile.mkdtemp(prefix="crc_speed."), "crc_speed_base")
    build_base(a.base, base_bin)
    progs = {"before": base_bin, "after": a.new}
    samples = {}      # (which, fn) -> ([wall], [cpu])
    crcs = {}         # (which, fn) -> crc
    load0 = os.getloadavg()
    t0 = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for r in range(a.rounds):
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        for which in order:
            for name, wall, cpu, crc in run(progs[which], a.reps):
                w, c = samples.setdefault((which, name), ([], []))
                w.append(wall)
                c.append(cpu)
                crcs[(which, name)] = crc
        print("round %d/%d done, load %.1f" % (r + 1, a.rounds, os.getloadavg()[0]),
              file=sys.stderr)
    load1 = os.getloadavg()
    ok = True
    for fn in ("crc32", "crc32c", "crc64nvme"):
        if crcs.get(("before", fn)) != crcs.get(("after", fn)):
            print("MISMATCH %s: before %s after %s" % (fn, crcs.get(("before", fn)),
                                                       crcs.get(("after", fn))), file=sys.stderr)
            ok = False
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print("%s, %s, %d CPUs; load average %.1f at the start, %.1f at the end; "
          "%d rounds x %d reps, before/after alternating; 1 GiB in 8 MiB pieces per sample."
          % (t0, cpu, os.cpu_count() or 0, load0[0], load1[0], a.rounds, a.reps))
    print()
    print("| function | before GB/s wall | after GB/s wall | speed-up (wall) "
          "| before GB/CPU-s | after GB/CPU-s | speed-up (CPU) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    names = []
    for (_, n) in samples:
        if n not in names:
            names.append(n)
    for n in names:
        bw, bc = samples.get(("before", n), ([], []))
        aw, ac = samples.get(("after", n), ([], []))
        sw = "%.1fx" % (statistics.median(aw) / statistics.median(bw)) if aw and bw else "-"
        sc = "%.1fx" % (statistics.median(ac) / statistics.median(bc)) if ac and bc else "-"
        print("| %s | %s | %s | %s | %s | %s | %s |" % (n, fmt(bw), fmt(aw), sw, fmt(bc),
                                                       fmt(ac), sc))
    print()
    print("CRCs of the 1 GiB equal before and after: %s" % ("yes" if ok else "NO"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
