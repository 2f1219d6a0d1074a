"""tests/setup/test_fresh_setup.py - the README's serve command works on a
machine that has only the build packages, from a fresh checkout and from a
used one.

A copy of the source tree (the files git would commit: tracked and new, not
ignored - no build trees) is served with `bash .ci/serve --listen
127.0.0.1:PORT` while pkg-config sees every system .pc file except those of
the test-only packages (.ci/deps.sh's `test` list, found with dpkg; CUnit's
cunit.pc at least). The gateway must configure, build, start and answer
`shardgate health`. Then the same again in the now used copy (build/ is
there), and a configure that asks for the test suite (-DSHARDGATE_TESTS=ON,
as .ci/test does) must stop loudly, naming CUnit, instead of dropping the
tests.

Registered once (not in the sanitizer build): it builds its own gateway, so a
second run would prove nothing new. Takes about a minute (one build of the
shardgate target)."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import harness as H  # noqa: E402

check, eq = H.check, H.eq
SRC = os.environ.get("SHARDGATE_SRC") or os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD_DEADLINE = 900          # a loaded 2-core machine; a normal build takes ~30 s

_procs = []


def test_only_packages():
    """The packages .ci/deps.sh installs only for `test`."""
    with open(os.path.join(SRC, ".ci", "deps.sh")) as f:
        text = f.read()
    return [p for m in re.findall(r"want\+=\(([^)]*)\)", text) for p in m.split()]


def hidden_pc_files(pkgs):
    names = {"cunit.pc"}
    for p in pkgs:
        rc, out, _ = H.run_cmd(["dpkg-query", "-L", p], timeout=60)
        if rc == 0:
            names.update(os.path.basename(l) for l in out.split() if l.endswith(".pc"))
    return names


def pc_dir_without(hidden):
    """A directory of links to every .pc file pkg-config would find, less `hidden`."""
    rc, out, _ = H.run_cmd(["pkg-config", "--variable", "pc_path", "pkg-config"], timeout=30)
    dirs = out.strip().split(":") if rc == 0 else []
    dirs += [d for d in os.environ.get("PKG_CONFIG_PATH", "").split(":") if d]
    pc = H.tmpdir("pkgconfig")
    n = 0
    for d in dirs:
        if not os.path.isdir(d):
            continue
        for fn in os.listdir(d):
            if fn.endswith(".pc") and fn not in hidden and not os.path.exists(
                    os.path.join(pc, fn)):
                os.symlink(os.path.join(d, fn), os.path.join(pc, fn))
                n += 1
    return pc, n


def copy_tree(dst):
    """The files a commit of SRC would hold (tracked plus new, not ignored),
    else everything but build trees, var/ and .git."""
    rc, out, _ = H.run_cmd(["git", "-C", SRC, "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], timeout=60)
    if rc == 0 and out:
        n = 0
        for rel in out.split("\0"):
            s = os.path.join(SRC, rel)
            if not rel or not os.path.isfile(s):
                continue          # deleted in the work tree
            d = os.path.join(dst, rel)
            os.makedirs(os.path.dirname(d), exist_ok=True)
            shutil.copy2(s, d)
            n += 1
        return n
    shutil.copytree(SRC, dst, dirs_exist_ok=True, symlinks=True,
                    ignore=shutil.ignore_patterns("build*", "var", ".git", "__pycache__"))
    return -1


def serve(src, env, tag, n):
    """bash .ci/serve in src on a free port; True when it answered health."""
    port = H._free_port()
    log_path = os.path.join(H.S.tmp, "serve-%d.log" % n)
    log = open(log_path, "wb")
    t0 = time.time()
    p = subprocess.Popen(["bash", ".ci/serve", "--listen", "127.0.0.1:%d" % port], cwd=src,
                         env=env, stdout=log, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    _procs.append(p)
    binp = os.path.join(src, "build", "shardgate")
    ok, out = False, ""
    deadline = time.time() + BUILD_DEADLINE
    while time.time() < deadline and p.poll() is None:
        if os.access(binp, os.X_OK):
            rc, out, err = H.run_cmd([binp, "health", "--endpoint",
                                      "http://127.0.0.1:%d" % port, "--timeout", "2"],
                                     timeout=30)
            if rc == 0:
                ok = True
                break
        time.sleep(0.5)
    dt = time.time() - t0
    log.flush()
    with open(log_path, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    check("[%s] bash .ci/serve configures, builds and serves; `shardgate health` "
          "answers 0 (%.0f s)" % (tag, dt), ok, "exit %r; log:\n%s" % (p.poll(), text[-3000:]))
    stop(p)
    return ok, text


def stop(p):
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            rc = p.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            rc = p.wait(10)
        eq("the served gateway exits 0 on SIGTERM", rc, 0)
    if p in _procs:
        _procs.remove(p)


def cleanup():
    for p in list(_procs):
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(10)


def main():
    H.S.name = "test_fresh_setup"
    H._ensure_tmp()
    import atexit
    atexit.register(cleanup)
    for tool in ("cmake", "pkg-config", "git", "make"):
        if not shutil.which(tool):
            check("%s is installed (a build package)" % tool, False)
            return

    pkgs = test_only_packages()
    check(".ci/deps.sh has a test-only package list, with CUnit in it",
          "libcunit1-dev" in pkgs, pkgs)
    hidden = hidden_pc_files(pkgs)
    pc, n = pc_dir_without(hidden)
    check("pkg-config path of %d .pc files, test-only ones hidden (%s)" %
          (n, " ".join(sorted(hidden))), n > 10 and not os.path.exists(os.path.join(pc, "cunit.pc")))
    env = dict(os.environ, PKG_CONFIG_LIBDIR=pc)
    env.pop("PKG_CONFIG_PATH", None)
    for k in list(env):
        if k.startswith("SHARDGATE_") or k.startswith("AWS_"):
            del env[k]
    rc, out, err = H.run_cmd(["pkg-config", "--exists", "cunit"], env=env, timeout=30)
    check("with that path, pkg-config does not find cunit", rc != 0, (rc, out, err))

    src = os.path.join(H.S.tmp, "src")
    n = copy_tree(src)
    check("a copy of the source tree without build trees (%d files)" % n,
          os.path.exists(os.path.join(src, ".ci", "serve")) and
          not os.path.exists(os.path.join(src, "build")))

    ok, _ = serve(src, env, "fresh", 1)
    if not ok:
        return
    rc, out, err = H.run_cmd(["ctest", "--test-dir", os.path.join(src, "build"), "-N"],
                             timeout=60)
    check("the serve build left the test suite out (ctest lists no unit. or integration. "
          "test)", rc == 0 and "unit." not in out and "integration." not in out, out[-1500:])
    serve(src, env, "used: build/ there", 2)

    rc, out, err = H.run_cmd(["cmake", "-S", src, "-B", os.path.join(src, "build-test-release"),
                              "-DSHARDGATE_TESTS=ON"], env=env, timeout=300)
    check("configure with -DSHARDGATE_TESTS=ON (as .ci/test does) and no CUnit: stops, "
          "naming CUnit", rc != 0 and "needs CUnit" in out + err, (rc, (out + err)[-1500:]))
    with open(os.path.join(SRC, ".ci", "test")) as f:
        check(".ci/test configures with -DSHARDGATE_TESTS=ON", "-DSHARDGATE_TESTS=ON" in f.read())


H.run(main)
