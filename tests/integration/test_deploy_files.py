"""tests/integration/test_deploy_files.py - the container files, the systemd
unit and `cmake --install`, checked as far as this machine can without a
Docker engine (the image build itself is not run here):

- .dockerignore: the build context computed with Docker's rules (patterns
  matching a path or one of its parents, `**`, `!` exceptions, last match
  wins) keeps build trees, var/, .git and Python caches out of a used
  checkout, and keeps every file git tracks;
- docker/Dockerfile: the build stage installs exactly .ci/deps.sh's `build`
  list; the runtime stage installs the package of every shared library the
  binary links (readelf + dpkg); a non-root USER that owns the volumes;
  VOLUMEs /data and /cache; one port everywhere (EXPOSE, the listen address,
  the HEALTHCHECK, compose); no built-in key;
- docker/entrypoint.sh: `serve` refuses to start without credentials or with
  the built-in ones (conf/conf.h's), other commands pass through; with
  credentials the image's default command serves, and the Dockerfile's
  HEALTHCHECK command line passes against it - and fails once it is stopped;
- docker/compose.yaml: relative paths resolve against docker/ to what its
  comments say, the port is published on 127.0.0.1, volumes are declared,
  every credential is required (`${VAR:?}`: interpolation without them
  fails naming them) and none is built in; its service command, run through
  the entrypoint with compose's environment, serves a cold shardgate A with
  a cache directory;
- `cmake --install BUILD --prefix DIR`: the binary, the example config and
  the unit, whose ExecStart names the installed binary; the unit is
  hardened (own user, state/cache directories, LimitNOFILE, ...), passes
  `systemd-analyze verify`, and its ExecStart, run in the directories it
  names and under its syscall filter (libseccomp), serves uploads, misses
  and hits.
"""

import atexit
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import cache_common as C  # noqa: E402

check, eq = H.check, H.eq
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.realpath(os.environ.get("SHARDGATE_SRC") or os.path.join(HERE, "..", ".."))
DOCKERFILE = os.path.join(SRC, "docker", "Dockerfile")
ENTRYPOINT = os.path.join(SRC, "docker", "entrypoint.sh")
COMPOSE = os.path.join(SRC, "docker", "compose.yaml")

_procs = []


def read(path):
    with open(path) as f:
        return f.read()


def default_keys():
    h = read(os.path.join(SRC, "conf", "conf.h"))
    ak = re.search(r'#define CONF_DEFAULT_ACCESS_KEY "([^"]+)"', h)
    sk = re.search(r'#define CONF_DEFAULT_SECRET_KEY "([^"]+)"', h)
    return (ak.group(1) if ak else None, sk.group(1) if sk else None)


def spawn(argv, env, cwd, name):
    log = open(os.path.join(H.S.tmp, name + ".log"), "wb")
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL)
    p.log_path = log.name
    _procs.append(p)
    return p


def log_of(p):
    with open(p.log_path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def wait_health(port, p, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline and p.poll() is None:
        rc, _, _ = H.run_cmd([os.environ["SHARDGATE_BIN"], "health", "--endpoint",
                              "http://127.0.0.1:%d" % port, "--timeout", "2"], timeout=30)
        if rc == 0:
            return True
        time.sleep(0.1)
    return False


def stop(p, what):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait(10)
    else:
        rc = p.returncode
    eq("%s exits 0 on SIGTERM" % what, rc, 0)
    if p in _procs:
        _procs.remove(p)


def cleanup():
    for p in list(_procs):
        if p.poll() is None:
            p.kill()
            p.wait(10)


def sanitizer_clean(what, text):
    check("%s: no sanitizer report" % what,
          not ("AddressSanitizer" in text or "LeakSanitizer" in text or "runtime error:" in text),
          text[-1500:])


# ---------------------------------------------------------------- .dockerignore

def glob_re(p):
    """Docker's pattern syntax (moby/patternmatcher) as a regular expression."""
    out, i = "^", 0
    while i < len(p):
        c = p[i]
        if p.startswith("**", i):
            if p.startswith("**/", i):
                out, i = out + "(?:.*/)?", i + 3
            else:
                out, i = out + ".*", i + 2
            continue
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "[":
            j = p.index("]", i)
            out, i = out + p[i:j + 1], j + 1
            continue
        elif c == "\\" and i + 1 < len(p):
            out, i = out + re.escape(p[i + 1]), i + 2
            continue
        else:
            out += re.escape(c)
        i += 1
    return re.compile(out + "$")


def dockerignore_rules():
    rules = []
    path = os.path.join(SRC, ".dockerignore")
    if not check(".dockerignore exists at the root of the build context", os.path.exists(path)):
        return rules
    for line in read(path).splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        neg = line.startswith("!")
        if neg:
            line = line[1:].strip()
        line = os.path.normpath(line).lstrip("/")
        rules.append((neg, glob_re(line)))
    return rules


def excluded(rules, rel):
    """Docker's rule: a pattern matching the path or any parent excludes it;
    the last matching pattern decides."""
    parts = rel.split("/")
    out = False
    for neg, rx in rules:
        if any(rx.match("/".join(parts[:k])) for k in range(1, len(parts) + 1)):
            out = not neg
    return out


def context_files(rules, root):
    files = []
    can_prune = not any(neg for neg, _ in rules)
    for dp, dns, fns in os.walk(root):
        rel_dp = os.path.relpath(dp, root)
        rel_dp = "" if rel_dp == "." else rel_dp + "/"
        if can_prune:
            dns[:] = [d for d in dns if not excluded(rules, rel_dp + d)]
        files += [rel_dp + f for f in fns if not excluded(rules, rel_dp + f)]
    return files


def dockerignore_checks():
    rules = dockerignore_rules()
    used = ["build/CMakeCache.txt", "build/shardgate", "build-asan/tests/test_conf",
            "build-test-release/junit.xml", "var/data/bucket/key", ".git/config",
            "clients/python/__pycache__/shardgate_prefetch.cpython-311.pyc",
            "tests/integration/__pycache__/harness.cpython-311.pyc", "bench/x.pyc"]
    kept = [u for u in used if not excluded(rules, u)]
    check(".dockerignore: a used checkout's build trees, var/, .git and caches are out of "
          "the context", not kept, kept)

    rc, out, _ = H.run_cmd(["git", "-C", SRC, "ls-files"], timeout=60)
    tracked = out.split() if rc == 0 else []
    lost = [t for t in tracked if excluded(rules, t)]
    check(".dockerignore: every file git tracks (%d) stays in the context" % len(tracked),
          tracked and not lost, lost[:10])

    files = context_files(rules, SRC)
    bad = [f for f in files if f.split("/")[0].startswith("build") or "CMakeCache.txt" in f
           or f.startswith(".git/") or f.startswith("var/")]
    size = sum(os.path.getsize(os.path.join(SRC, f)) for f in files
               if os.path.isfile(os.path.join(SRC, f)))
    check("the build context of this checkout (%d files, %.1f MiB) holds no build tree and "
          "no CMakeCache.txt" % (len(files), size / 2 ** 20), files and not bad, bad[:10])
    return set(files)


# ---------------------------------------------------------------- Dockerfile

def dockerfile_stages():
    """[(stage name, [(INSTRUCTION, args)])] with continuations joined."""
    text = re.sub(r"\\\n", " ", read(DOCKERFILE))
    stages = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        ins, _, args = line.partition(" ")
        ins = ins.upper()
        if ins == "FROM":
            m = re.search(r"\bAS\s+(\S+)", args, re.I)
            stages.append((m.group(1) if m else "final", []))
        if stages:
            stages[-1][1].append((ins, args.strip()))
    return stages


def apt_packages(instrs):
    pkgs = []
    for ins, args in instrs:
        if ins == "RUN":
            for m in re.finditer(r"apt-get install ([^&]*)", args):
                pkgs += [w for w in m.group(1).split() if not w.startswith("-")]
    return pkgs


def deps_build_list():
    # Comments are dropped first, as bash drops them: a word starting with
    # '#' runs to the end of its line (and may hold a ')' of its own).
    text = read(os.path.join(SRC, ".ci", "deps.sh"))
    text = re.sub(r"(^|\s)#[^\n]*", r"\1", text)
    m = re.search(r"\bwant=\(([^)]*)\)", text)
    return m.group(1).split() if m else []


def last(instrs, name):
    vals = [a for i, a in instrs if i == name]
    return vals[-1] if vals else None


def sanitized():
    rc, out, _ = H.run_cmd(["readelf", "-d", os.environ["SHARDGATE_BIN"]], timeout=60)
    return "libasan" in out


def linked_packages():
    """Debian packages of the shared libraries SHARDGATE_BIN links directly."""
    binp = os.environ["SHARDGATE_BIN"]
    rc, out, _ = H.run_cmd(["readelf", "-d", binp], timeout=60)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    rc2, ldd, _ = H.run_cmd(["ldd", binp], timeout=60)
    paths = dict(re.findall(r"^\s*(\S+) => (\S+)", ldd, re.M))
    pkgs = {}
    for lib in needed:
        if lib.startswith(("libasan", "libubsan")):
            continue            # the sanitizer build's runtime, not a release dependency
        path = paths.get(lib)
        if not path:
            pkgs[lib] = None
            continue
        rc3, owner, _ = H.run_cmd(["dpkg", "-S", os.path.realpath(path)], timeout=60)
        if rc3 != 0:
            rc3, owner, _ = H.run_cmd(["dpkg", "-S", path], timeout=60)
        pkgs[lib] = owner.split(":")[0].strip() if rc3 == 0 else None
    return needed, pkgs


def dockerfile_checks(context):
    stages = dockerfile_stages()
    eq("Dockerfile: a build stage and a runtime stage", [s for s, _ in stages],
       ["build", "final"])
    if len(stages) != 2:
        return None
    build, final = stages[0][1], stages[1][1]
    want = deps_build_list()
    eq("Dockerfile: the build stage installs exactly .ci/deps.sh's build list",
       sorted(apt_packages(build)), sorted(want))

    runtime = apt_packages(final)
    needed, owners = linked_packages()
    missing = {lib: p for lib, p in owners.items() if p is None or (p not in runtime and
                                                                   p != "libc6")}
    check("Dockerfile: the runtime stage installs the package of every library the binary "
          "links (%s)" % ", ".join(sorted(set(p for p in owners.values() if p))),
          needed and not missing, (missing, runtime))

    for ins, args in final:
        if ins == "COPY" and "--from" not in args:
            src = args.split()[0]
            check("Dockerfile: COPY %s is in the build context" % src, src in context)
    check("docker/entrypoint.sh is executable (COPY keeps the mode)",
          os.access(ENTRYPOINT, os.X_OK))

    user = last(final, "USER") or ""
    uid = user.split(":")[0]
    check("Dockerfile: the runtime stage runs as a non-root USER (%s)" % user,
          uid and uid not in ("root", "0"))
    made = " ".join(a for i, a in final if i == "RUN")
    m = re.search(r"useradd [^&]*--uid (\d+) --gid (\d+)", made)
    g = re.search(r"groupadd [^&]*--gid (\d+)", made)
    check("Dockerfile: USER is the uid:gid the image creates, owning /data and /cache",
          m and g and user == "%s:%s" % (m.group(1), m.group(2)) and g.group(1) == m.group(2)
          and re.search(r"chown \S+ /data /cache", made), made[-400:])
    vols = json.loads(last(final, "VOLUME") or "[]")
    check("Dockerfile: VOLUMEs /data and /cache", {"/data", "/cache"} <= set(vols), vols)

    expose = (last(final, "EXPOSE") or "").split("/")[0]
    env = last(final, "ENV") or ""
    listen = re.search(r"SHARDGATE_LISTEN=(\S+)", env)
    hc = last(final, "HEALTHCHECK") or ""
    hcm = re.search(r"CMD (\[.*\])$", hc)
    hc_argv = json.loads(hcm.group(1)) if hcm else []
    check("Dockerfile: HEALTHCHECK runs `shardgate health` in exec form with a timeout",
          hc_argv[:2] == ["/usr/local/bin/shardgate", "health"] and "--timeout=" in hc, hc)
    ep = hc_argv[hc_argv.index("--endpoint") + 1] if "--endpoint" in hc_argv else ""
    check("Dockerfile: one port for EXPOSE, SHARDGATE_LISTEN and the HEALTHCHECK (%s)" % expose,
          expose and listen and listen.group(1).endswith(":" + expose) and
          ep.endswith(":" + expose), (expose, env, ep))
    ak, sk = default_keys()
    check("Dockerfile: no built-in secret key in it", sk and sk not in read(DOCKERFILE))
    return {"cmd": json.loads(last(final, "CMD") or "[]"),
            "entrypoint": json.loads(last(final, "ENTRYPOINT") or "[]"),
            "listen": listen.group(1) if listen else "", "port": expose,
            "healthcheck": hc_argv, "volumes": vols}


# ---------------------------------------------------------------- the entrypoint

def bin_dir():
    """A directory with `shardgate` -> SHARDGATE_BIN, for the entrypoint's PATH."""
    d = H.tmpdir("bin")
    link = os.path.join(d, "shardgate")
    if not os.path.exists(link):
        os.symlink(os.environ["SHARDGATE_BIN"], link)
    return d


def image_env(df, port, extra):
    """The environment a container gets: the Dockerfile's ENV, listening on
    127.0.0.1:port instead of 0.0.0.0 (no traffic off loopback here)."""
    env = C.clean_env()
    env["PATH"] = bin_dir() + ":" + env.get("PATH", "/usr/bin:/bin")
    env["SHARDGATE_LISTEN"] = re.sub(r"^0\.0\.0\.0:\d+$", "127.0.0.1:%d" % port, df["listen"])
    env.update(extra)
    return env


def healthcheck(df, port):
    argv = [os.environ["SHARDGATE_BIN"] if a == "/usr/local/bin/shardgate" else
            a.replace("127.0.0.1:%s" % df["port"], "127.0.0.1:%d" % port)
            for a in df["healthcheck"]]
    return H.run_cmd(argv, timeout=60)


def entrypoint_checks(df):
    eq("Dockerfile: ENTRYPOINT is the entrypoint script",
       df["entrypoint"], ["/usr/local/bin/shardgate-entrypoint"])
    ak, sk = default_keys()
    data = H.tmpdir("image-data")
    cmd = [data if a == "/data" else a for a in df["cmd"]]
    eq("Dockerfile: the default command serves /data", df["cmd"], ["serve", "--data", "/data"])

    port = H._free_port()
    for what, keys in (("no credentials", {}),
                       ("only an access key", {"SHARDGATE_ACCESS_KEY": "AKIDOCKER0000001"}),
                       ("the built-in credentials", {"SHARDGATE_ACCESS_KEY": ak,
                                                     "SHARDGATE_SECRET_KEY": sk}),
                       ("the built-in secret key", {"SHARDGATE_ACCESS_KEY": "AKIDOCKER0000001",
                                                    "SHARDGATE_SECRET_KEY": sk})):
        rc, out, err = H.run_cmd(["sh", ENTRYPOINT] + cmd, env=image_env(df, port, keys),
                                 timeout=30)
        check("entrypoint: serve with %s is refused (exit 2, naming the variables), nothing "
              "listens" % what, rc == 2 and "SHARDGATE_SECRET_KEY" in err and
              not C.wait_port(port, 0.3), (rc, out, err))
    rc, out, err = H.run_cmd(["sh", ENTRYPOINT, "--version"], env=image_env(df, port, {}),
                             timeout=30)
    check("entrypoint: other commands pass through (--version)",
          rc == 0 and out.startswith("shardgate "), (rc, out, err))

    keys = {"SHARDGATE_ACCESS_KEY": "AKIDOCKER0000001",
            "SHARDGATE_SECRET_KEY": "docker/Secret+Key/0123456789abcdef"}
    p = spawn(["sh", ENTRYPOINT] + cmd, image_env(df, port, keys), H.S.tmp, "image-serve")
    ok = wait_health(port, p)
    check("entrypoint: with credentials of its own, the default command serves", ok,
          log_of(p)[-2000:])
    rc, out, err = healthcheck(df, port)
    check("the Dockerfile's HEALTHCHECK command passes against the live gateway (exit 0)",
          rc == 0, (rc, out, err))
    sanitizer_clean("HEALTHCHECK", err)
    stop(p, "the image's gateway")
    rc, out, err = healthcheck(df, port)
    check("... and fails (exit 1) once the gateway is down", rc == 1, (rc, out, err))


# ---------------------------------------------------------------- compose

def cached(cache_dir, size, wait_s=10.0):
    """True when the cache directory holds an object file of at least `size`
    bytes (a cache file is the object's bytes behind a header), within
    wait_s: a fill's readers copy its bytes from its buffers as they arrive,
    so a client can have the whole object a moment before the fill's last
    write has landed in the file (run 134)."""
    def present():
        return any(os.path.getsize(os.path.join(dp, f)) >= size
                   for dp, _, fns in os.walk(os.path.join(cache_dir, "objects")) for f in fns)
    return bool(C.wait_until(present, wait_s))


_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def interpolate(value, env, errors):
    """Compose's interpolation: ${V}, ${V:-d}, ${V-d}, ${V:?e}, ${V?e}, $$."""
    def sub(m):
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, arg = m.group(2), m.group(3)
        v = env.get(name)
        if op in (":-", ":?") and v == "":
            v = None
        if v is not None:
            return v
        if op and op.endswith("?"):
            errors.append("%s: %s" % (name, arg))
            return ""
        return arg if op and op.endswith("-") else ""
    return _VAR.sub(sub, value)


def walk_interpolate(node, env, errors):
    if isinstance(node, dict):
        return {k: walk_interpolate(v, env, errors) for k, v in node.items()}
    if isinstance(node, list):
        return [walk_interpolate(v, env, errors) for v in node]
    if isinstance(node, str):
        return interpolate(node, env, errors)
    return node


def compose_checks(df, cold):
    try:
        import yaml
    except ImportError:
        H.skip("docker/compose.yaml", "PyYAML is not installed (python3-yaml)")
        return
    text = read(COMPOSE)
    doc = yaml.safe_load(text)
    cdir = os.path.dirname(COMPOSE)
    svc = doc.get("services", {}).get("shardgate", {})
    ctx = os.path.realpath(os.path.join(cdir, svc.get("build", {}).get("context", "")))
    eq("compose: the build context resolves (against docker/) to the repository root", ctx, SRC)
    dfp = os.path.realpath(os.path.join(ctx, svc.get("build", {}).get("dockerfile", "")))
    eq("compose: the dockerfile resolves (against the context) to docker/Dockerfile", dfp,
       os.path.realpath(DOCKERFILE))
    check("compose: its comment says paths resolve against docker/ and the context is the "
          "repository root", "against this file's directory, docker/" in text and
          "is the repository root" in text)

    ports = svc.get("ports", [])
    check("compose: the port is published on 127.0.0.1 only, to the image's port %s" %
          df["port"], ports and all(re.match(r"^127\.0\.0\.1:\d+:%s$" % df["port"], str(p))
                                    for p in ports), ports)
    vols = svc.get("volumes", [])
    named = doc.get("volumes") or {}
    targets = []
    for v in vols:
        src, _, dst = str(v).partition(":")
        dst = dst.split(":")[0]
        targets.append(dst)
        if src.startswith((".", "/", "~")):
            real = os.path.realpath(os.path.join(cdir, os.path.expanduser(src)))
            check("compose: bind mount %s resolves to %s, which exists" % (src, real),
                  os.path.exists(real))
        else:
            check("compose: volume %r is declared under volumes:" % src, src in named, named)
        check("compose: %s is one of the image's VOLUMEs" % dst, dst in df["volumes"])

    errors = []
    walk_interpolate(svc, {}, errors)
    need = ["SHARDGATE_ACCESS_KEY", "SHARDGATE_SECRET_KEY", "SHARDGATE_COLD_URL",
            "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]
    got = sorted(set(e.split(":")[0] for e in errors))
    eq("compose: without the credentials and the cold URL, interpolation stops naming each",
       got, sorted(need))
    ak, sk = default_keys()
    check("compose: no built-in key in it (not even as a default)",
          sk not in text and not re.search(r":-\s*%s\b" % re.escape(ak), text))

    env = {"SHARDGATE_ACCESS_KEY": "AKICOMPOSE000001",
           "SHARDGATE_SECRET_KEY": "compose/Secret+Key/0123456789abcdef",
           "SHARDGATE_COLD_URL": cold.endpoint, "AWS_ACCESS_KEY_ID": cold.access,
           "AWS_SECRET_ACCESS_KEY": cold.secret}
    errors = []
    s = walk_interpolate(svc, env, errors)
    check("compose: interpolates with them set", not errors, errors)
    cmd = s.get("command", [])
    cmd = shlex.split(cmd) if isinstance(cmd, str) else cmd
    check("compose: the cache directory is a mounted volume",
          "--cache-dir" in cmd and cmd[cmd.index("--cache-dir") + 1] in targets, cmd)
    cache = H.tmpdir("compose-cache")
    cmd = [cache if a == "/cache" else a for a in cmd]
    port = H._free_port()
    p = spawn(["sh", ENTRYPOINT] + cmd, image_env(df, port, s.get("environment", {})),
              H.S.tmp, "compose-serve")
    ok = wait_health(port, p)
    check("compose's service (entrypoint + command + environment) serves the cold shardgate "
          "through a cache", ok, log_of(p)[-2000:])
    if ok:
        c = H.boto3_client(endpoint="http://127.0.0.1:%d" % port, access=env["SHARDGATE_ACCESS_KEY"],
                           secret=env["SHARDGATE_SECRET_KEY"])
        body = os.urandom(70000)
        cold.put_file("data", "a/b.bin", body)
        got = [c.get_object(Bucket="data", Key="a/b.bin")["Body"].read() for _ in range(2)]
        check("compose's service: an object of the cold tier reads back through it, twice",
              got == [body, body])
        check("... and it is in the cache directory", cached(cache, len(body)))
    stop(p, "compose's gateway")
    sanitizer_clean("compose's gateway", log_of(p))


# ---------------------------------------------------------------- install + systemd

def unit_keys(text):
    sec, out = None, {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            sec = line.strip("[]")
            continue
        k, _, v = line.partition("=")
        out.setdefault((sec, k.strip()), []).append(v.strip())
    return out


def syscall_set(group, seen=None):
    seen = set() if seen is None else seen
    rc, out, _ = H.run_cmd(["systemd-analyze", "syscall-filter", group], timeout=60)
    names = set()
    if rc != 0:
        return None
    for line in out.splitlines()[1:]:
        w = line.strip()
        if not w or w.startswith("#"):
            continue
        if w.startswith("@"):
            if w not in seen:
                seen.add(w)
                sub = syscall_set(w, seen)
                if sub is None:
                    return None
                names |= sub
        else:
            names.add(w)
    return names


SECCOMP_EXEC = r"""
import errno, os, sys, seccomp
names = open(sys.argv[1]).read().split()
f = seccomp.SyscallFilter(seccomp.ERRNO(errno.EPERM))
for n in names:
    try:
        f.add_rule(seccomp.ALLOW, n)
    except (RuntimeError, ValueError, OSError):
        pass          # not a syscall of this architecture
f.load()
os.execv(sys.argv[2], sys.argv[2:])
"""


def install_checks():
    build = os.path.dirname(os.path.realpath(os.environ["SHARDGATE_BIN"]))
    if not check("SHARDGATE_BIN sits in a CMake build tree",
                 os.path.exists(os.path.join(build, "CMakeCache.txt")), build):
        return
    prefix = H.tmpdir("prefix")
    rc, out, err = H.run_cmd(["cmake", "--install", build, "--prefix", prefix], timeout=300)
    binp = os.path.join(prefix, "bin", "shardgate")
    unit_path = os.path.join(prefix, "lib", "systemd", "system", "shardgate.service")
    example = os.path.join(prefix, "share", "doc", "shardgate", "shardgate.example.json")
    check("cmake --install --prefix: the binary, the example config and the unit",
          rc == 0 and os.access(binp, os.X_OK) and os.path.exists(unit_path) and
          os.path.exists(example), (rc, out, err))
    if rc != 0 or not os.path.exists(unit_path):
        return
    rc, out, err = H.run_cmd([binp, "--version"], timeout=30)
    check("the installed binary runs", rc == 0 and out.startswith("shardgate "), (rc, out, err))
    eq("the installed example config is the repository's",
       read(example), read(os.path.join(SRC, "conf", "shardgate.example.json")))

    text = read(unit_path)
    u = unit_keys(text)
    get = lambda k: (u.get(("Service", k)) or [None])[-1]   # noqa: E731
    exec_start = shlex.split(get("ExecStart") or "")
    eq("unit: ExecStart names the installed binary", exec_start[:2], [binp, "serve"])
    check("unit: its own user (DynamicUser=yes or a User= that is not root)",
          get("DynamicUser") == "yes" or (get("User") not in (None, "root", "0")))
    state, cachedir = get("StateDirectory"), get("CacheDirectory")
    check("unit: StateDirectory and CacheDirectory", state and cachedir)
    nofile = get("LimitNOFILE") or "0"
    check("unit: LimitNOFILE of at least 65536", nofile.isdigit() and int(nofile) >= 65536,
          nofile)
    for k, v in (("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"), ("ProtectHome", "yes"),
                 ("PrivateTmp", "yes"), ("PrivateDevices", "yes"), ("CapabilityBoundingSet", "")):
        eq("unit: %s=%s" % (k, v), get(k), v)
    cache_arg = exec_start[exec_start.index("--cache-dir") + 1] \
        if "--cache-dir" in exec_start else None
    eq("unit: the cache is its CacheDirectory", cache_arg, "/var/cache/%s" % cachedir)
    eq("unit: it works in its StateDirectory", get("WorkingDirectory"), "/var/lib/%s" % state)
    check("unit: credentials from an EnvironmentFile, none in the unit",
          get("EnvironmentFile") and "SHARDGATE_SECRET_KEY=" not in
          "\n".join(l for l in text.splitlines() if not l.startswith("#")))

    if H.run_cmd(["sh", "-c", "command -v systemd-analyze"])[0] != 0:
        H.skip("systemd-analyze verify", "systemd-analyze is not installed (systemd)")
    else:
        rc, out, err = H.run_cmd(["systemd-analyze", "verify", unit_path], timeout=60)
        check("systemd-analyze verify: no warning", rc == 0 and not err.strip() and
              not out.strip(), (rc, out, err))

    # The ExecStart as the service runs it: in its state directory, with its
    # cache directory, under its syscall filter.
    root = H.tmpdir("service")
    state_dir = os.path.join(root, "state")
    cache_dir = os.path.join(root, "cache")
    os.makedirs(state_dir, exist_ok=True)
    os.makedirs(cache_dir, exist_ok=True)
    argv = [cache_dir if a == cache_arg else a for a in exec_start]
    port = H._free_port()
    env = C.clean_env()
    env.update(SHARDGATE_ACCESS_KEY="AKIUNIT000000001",
               SHARDGATE_SECRET_KEY="unit/Secret+Key/0123456789abcdef",
               SHARDGATE_LISTEN="127.0.0.1:%d" % port)
    filt = get("SystemCallFilter")
    how = "without a syscall filter"
    if filt:
        names = syscall_set(filt) if filt.startswith("@") else None
        py = "/usr/bin/python3"
        has_seccomp = H.run_cmd([py, "-c", "import seccomp"], timeout=30)[0] == 0
        check("unit: SystemCallErrorNumber=EPERM (a call outside the filter fails, "
              "never kills)", get("SystemCallErrorNumber") == "EPERM")
        if names and has_seccomp:
            check("unit: the syscall filter allows io_uring_setup",
                  "io_uring_setup" in names)
            nf = os.path.join(root, "syscalls.txt")
            with open(nf, "w") as f:
                f.write("\n".join(sorted(names)))
            argv = [py, "-c", SECCOMP_EXEC, nf] + argv
            how = "under its syscall filter (%d calls)" % len(names)
            if sanitized():
                # LeakSanitizer stops the world with ptrace, which the filter
                # rightly refuses; every other test checks this binary for leaks
                env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
        else:
            H.skip("the unit's ExecStart under its syscall filter",
                   "needs systemd-analyze and python3-seccomp")
    p = spawn(argv, env, state_dir, "unit-serve")
    ok = wait_health(port, p)
    check("unit: its ExecStart serves %s" % how, ok, log_of(p)[-2000:])
    if ok:
        c = H.boto3_client(endpoint="http://127.0.0.1:%d" % port, access="AKIUNIT000000001",
                           secret="unit/Secret+Key/0123456789abcdef")
        b = "u-%s" % uuid.uuid4().hex[:8]
        body = os.urandom(300000)
        c.create_bucket(Bucket=b)
        c.put_object(Bucket=b, Key="k/obj.bin", Body=body)
        got = [c.get_object(Bucket=b, Key="k/obj.bin")["Body"].read() for _ in range(3)]
        check("unit's gateway: an upload reads back, three times", got == [body] * 3)
        check("unit's gateway: the data is in var/data of its state directory, as its "
              "comment says", os.path.exists(os.path.join(state_dir, "var", "data", b, "k",
                                                          "obj.bin")))
        check("unit's gateway: the object is in its cache directory (a fill through the "
              "cache engine, under the filter)", cached(cache_dir, len(body)))
        bad = [l for l in log_of(p).splitlines() if "not permitted" in l.lower()]
        check("unit's gateway: nothing refused by the filter in its log", not bad, bad[:5])
    stop(p, "the unit's gateway")


def main():
    C.need_clients()
    C.init("test_deploy_files")
    atexit.register(cleanup)
    atexit.register(C.stop_all)

    context = dockerignore_checks()
    df = dockerfile_checks(context)
    if df:
        entrypoint_checks(df)
        cold = C.ColdGateway().start()
        compose_checks(df, cold)
        cold.stop()
    install_checks()


H.run(main)
