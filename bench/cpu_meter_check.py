#!/usr/bin/env python3
"""bench/cpu_meter_check.py - how the benchmarks' two CPU meters read a
process that uses a known amount of CPU in short bursts, as a server does per
request: 20 bursts of 2 ms of CPU each (40 ms), five times.

bench/lib/procs.py cpu_since reads the scheduler's nanosecond count of every
thread (/proc/PID/task/TID/schedstat); utime + stime (/proc/PID/stat) count
whole clock ticks charged to whichever thread a tick interrupts. Usage:
python3 bench/cpu_meter_check.py (about 2 s). Results: bench/results/cpu-meter.md.
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from procs import CLK, cpu_since, cpu_snap, cpu_ticks  # noqa: E402

BURN = r'''
import sys, time
for line in sys.stdin:
    t = time.process_time()
    while time.process_time() - t < 0.002:
        pass
    print("ok", flush=True)
'''


def main():
    p = subprocess.Popen([sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    worst = 0.0
    try:
        print("| trial | schedstat (cpu_since) ms | utime+stime ms | true ms |")
        print("| --- | --- | --- | --- |")
        for trial in range(5):
            snap, k0 = cpu_snap([p.pid]), cpu_ticks([p.pid])
            for _ in range(20):
                p.stdin.write("x\n")
                p.stdin.flush()
                p.stdout.readline()
                time.sleep(0.003)
            ns_ms = cpu_since(snap, [p.pid]) * 1e3
            tk_ms = (cpu_ticks([p.pid]) - k0) / CLK * 1e3
            worst = max(worst, abs(ns_ms - 40.0))
            print("| %d | %.1f | %.0f | >= 40 |" % (trial + 1, ns_ms, tk_ms))
    finally:
        p.kill()
        p.wait()
    # the bursts are 40 ms of CPU plus the loop's reads and prints
    print("cpu_since off by at most %.1f ms" % worst)
    return 0 if worst < 4.0 else 1


if __name__ == "__main__":
    sys.exit(main())
