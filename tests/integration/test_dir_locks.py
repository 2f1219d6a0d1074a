"""tests/integration/test_dir_locks.py - one owner per directory (issue 10,
finding 4: two gateways on one cache directory both started, and a restart
then lost half the index because one snapshot overwrote the other's).

For the cache directory, the directory store's state directory (DIR/.shardgate
and an explicit --state-dir) and the data tree itself:
  * a second gateway on a directory another one holds refuses to start, exits
    non-zero and names the holder's pid;
  * once the first stops (SIGTERM), the second starts;
  * after kill -9 of the holder the lock is free at once (flock dies with the
    process): the next start succeeds without any cleanup.
The lock file keeps the pid of its last holder (it is never deleted: deleting
a lock file races with the next locker).
"""

import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import store_common as T  # noqa: E402

check, eq = H.check, H.eq


def refused_naming(tag, gw, holder_pid, what):
    """gw must fail to start, non-zero, its output naming holder_pid."""
    ok = gw.start(expect_ok=False, timeout=20)
    rc = gw.wait_exit(20)
    check("[%s] the second gateway does not start" % tag, not ok, gw.tail())
    check("[%s] it exits non-zero" % tag, rc not in (None, 0), "exit code %r" % rc)
    text = gw.log()
    check("[%s] its message names the %s and the holder's pid %d" % (tag, what, holder_pid),
          what in text and ("pid %d" % holder_pid) in text, gw.tail(8))


def sequence(tag, make, what, lock_file=None):
    """make(n) -> a Gw on the contested directory (a fresh port each)."""
    a = make("%s-a" % tag)
    if not a.start():
        return
    b = make("%s-b" % tag)
    refused_naming(tag, b, a.pid, what)
    if lock_file:
        try:
            with open(lock_file) as f:
                pid = f.read().strip()
        except OSError as e:
            pid = str(e)
        eq("[%s] the lock file holds the holder's pid" % tag, pid, str(a.pid))
    b.stop()   # (a gateway that should not have started)
    eq("[%s] the first gateway still serves" % tag, T.health(a.port), 200)
    eq("[%s] the first stops with 0" % tag, a.stop(), 0)
    c = make("%s-c" % tag)
    check("[%s] after the first stopped, a second starts" % tag, c.start(expect_ok=False),
          c.tail())
    c.kill9()
    d = make("%s-d" % tag)
    check("[%s] after kill -9 of the holder the lock is free: the next one starts" % tag,
          d.start(expect_ok=False), d.tail())
    e = make("%s-e" % tag)
    refused_naming("%s, after kill -9" % tag, e, d.pid, what)
    eq("[%s] the last one stops with 0" % tag, d.stop(), 0)


def main():
    T.init("test_dir_locks")

    # the cache directory: two gateways over two data trees, one cache
    cache = os.path.join(H.S.tmp, "shared-cache")

    def cache_gw(tag):
        return T.Gw(tag, ["--data", H.tmpdir("data-" + tag), "--cache-dir", cache,
                          "--cache-size", "32MiB"])
    sequence("cache", cache_gw, "cache directory " + cache, os.path.join(cache, "lock"))

    # a cache directory deleted under its gateway is recreated by the cache's
    # watcher: the lock file went with it, so the lock is taken anew and a
    # second gateway on that path is still refused
    healed = os.path.join(H.S.tmp, "healed-cache")

    def healed_gw(tag):
        return T.Gw(tag, ["--data", H.tmpdir("hdata-" + tag), "--cache-dir", healed,
                          "--cache-size", "32MiB"])
    a = healed_gw("healed-a")
    if a.start():
        shutil.rmtree(healed)
        lock = os.path.join(healed, "lock")

        def holder():
            try:
                with open(lock) as f:
                    return f.read().strip()
            except OSError:
                return ""
        # the file is created (open) before it is locked (flock) and its pid
        # written: the pid in it, not its existence, says the lock is held
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and holder() != str(a.pid):
            time.sleep(0.1)
        check("[healed] the recreated cache directory has a lock file again, held by the first",
              holder() == str(a.pid), (holder(), a.tail()))
        refused_naming("healed", healed_gw("healed-b"), a.pid, "cache directory " + healed)
        eq("[healed] the first stops with 0", a.stop(), 0)

    # the data directory with its default state directory DATA/.shardgate
    data = H.tmpdir("shared-data")

    def data_gw(tag):
        return T.Gw(tag, ["--data", data])
    sequence("data", data_gw, "state directory " + os.path.join(data, ".shardgate"),
             os.path.join(data, ".shardgate", "lock"))

    # an explicit --state-dir shared by two trees
    state = os.path.join(H.S.tmp, "shared-state")

    def state_gw(tag):
        return T.Gw(tag, ["--data", H.tmpdir("sdata-" + tag), "--state-dir", state])
    sequence("state-dir", state_gw, "state directory " + state, os.path.join(state, "lock"))

    # one tree, two state directories: the tree itself is locked too (the
    # second's start-up reclaim would remove the first's temp files)
    tree = H.tmpdir("shared-tree")

    def tree_gw(tag):
        return T.Gw(tag, ["--data", tree, "--state-dir", H.tmpdir("tstate-" + tag)])
    sequence("tree", tree_gw, "data directory " + tree)


if __name__ == "__main__":
    H.run(main)
