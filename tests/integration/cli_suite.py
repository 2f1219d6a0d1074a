"""tests/integration/cli_suite.py - aws-cli against a real shardgate: the
high-level `aws s3` commands (mb/ls/cp/rm/rb/sync/presign, a 200 MiB
multipart copy both ways, recursive listing across page boundaries) and a
few `aws s3api` calls. Run by test_awscli_v1.py (the `aws` on PATH) and
test_awscli_v2.py (/usr/bin/aws). Usage: cli_suite.main(name, aws_path, v2).
"""

import json
import os
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

check, eq = H.check, H.eq
MB = H.MB


class Cli:
    def __init__(self, path, v2):
        self.path = path
        self.v2 = v2
        self.env = H.aws_env(v2=v2)

    def run(self, *args, timeout=300, env=None):
        argv = [self.path, "--endpoint-url", H.S.endpoint] + list(args)
        if self.v2:
            argv += ["--no-cli-pager"] if args and args[0] == "s3api" else []
        t0 = time.time()
        rc, out, err = H.run_cmd(argv, env=env or self.env, timeout=timeout)
        dt = time.time() - t0
        if rc != 0:
            print("# aws %s -> rc %d in %.1fs\n# stderr: %s" % (" ".join(args), rc, dt, err.strip()[-800:]),
                  flush=True)
        return rc, out, err

    def json(self, *args, timeout=120):
        rc, out, err = self.run(*args, "--output", "json", timeout=timeout)
        try:
            return rc, json.loads(out) if out.strip() else {}, err
        except ValueError:
            return rc, None, err


def ls_keys(out):
    """Keys from `aws s3 ls --recursive` lines: date time size key."""
    keys = []
    for line in out.splitlines():
        parts = line.split(None, 3)
        if len(parts) == 4:
            keys.append(parts[3])
    return keys


def make_tree(root, n=50):
    files = {}
    for i in range(n):
        rel = os.path.join("d%d" % (i % 4), "sub%d" % (i % 3), "f%02d.txt" % i) if i % 5 else "top%02d.txt" % i
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        data = os.urandom(100 + i * 37)
        with open(p, "wb") as f:
            f.write(data)
        # an hour old: sync compares mtime with LastModified (whole seconds),
        # so a file written in the same second as its upload looks newer
        old = time.time() - 3600
        os.utime(p, (old, old))
        files[rel.replace(os.sep, "/")] = H.sha256(data)
    return files


def tree_hashes(root):
    out = {}
    for dp, _, fns in os.walk(root):
        for fn in fns:
            p = os.path.join(dp, fn)
            out[os.path.relpath(p, root).replace(os.sep, "/")] = H.sha256_file(p)
    return out


def main(name, aws_path, v2):
    H.start(name)
    cli = Cli(aws_path, v2)
    rc, out, err = H.run_cmd([aws_path, "--version"], env=cli.env, timeout=60)
    print("# %s: %s" % (aws_path, (out + err).strip()), flush=True)
    b = "sg-cli-%s" % uuid.uuid4().hex[:10]
    s3b = "s3://%s" % b
    work = H.tmpdir("cli")

    rc, out, err = cli.run("s3", "mb", s3b)
    check("s3 mb", rc == 0 and ("make_bucket: %s" % b) in out, out + err)
    rc, out, err = cli.run("s3", "ls")
    check("s3 ls lists the bucket", rc == 0 and b in out.split(), out + err)

    small = os.path.join(work, "small.bin")
    want = H.write_random_file(small, 123457)
    rc, out, err = cli.run("s3", "cp", small, s3b + "/dir/small.bin")
    check("s3 cp up (small)", rc == 0 and "upload:" in out, out + err)
    rc, out, err = cli.run("s3", "ls", s3b + "/dir/")
    check("s3 ls shows the object with its size",
          rc == 0 and any(l.split()[-2:] == ["123457", "small.bin"] for l in out.splitlines()),
          out + err)
    rc, out, err = cli.run("s3", "ls", s3b)
    check("s3 ls bucket root shows PRE dir/", rc == 0 and "PRE dir/" in out, out + err)
    back = os.path.join(work, "small.back")
    rc, out, err = cli.run("s3", "cp", s3b + "/dir/small.bin", back)
    check("s3 cp down (small) sha256", rc == 0 and os.path.exists(back) and H.sha256_file(back) == want,
          out + err)

    # s3api
    rc, j, err = cli.json("s3api", "head-object", "--bucket", b, "--key", "dir/small.bin")
    check("s3api head-object ContentLength/ETag",
          rc == 0 and j and j.get("ContentLength") == 123457 and
          j.get("ETag") == '"%s"' % H.md5(open(small, "rb").read()), (j, err))
    part = os.path.join(work, "range.out")
    rc, j, err = cli.json("s3api", "get-object", "--bucket", b, "--key", "dir/small.bin",
                          "--range", "bytes=100-199", part)
    with open(small, "rb") as f:
        f.seek(100)
        chunk = f.read(100)
    check("s3api get-object --range bytes",
          rc == 0 and os.path.exists(part) and open(part, "rb").read() == chunk, err)
    check("s3api get-object --range ContentRange",
          rc == 0 and j and j.get("ContentRange") == "bytes 100-199/123457", (j, err))
    rc, j, err = cli.json("s3api", "head-object", "--bucket", b, "--key", "dir/none")
    check("s3api head-object missing key fails with 404",
          rc != 0 and ("404" in err or "Not Found" in err), err)

    # presign + curl
    # awscli v1 presigns with SigV2 unless told otherwise (shardgate takes that
    # too: test_sigv2); this checks SigV4 presigning, so v1 gets the one-line
    # config that selects it (v2 defaults to SigV4).
    penv = cli.env
    if not v2:
        cfg = os.path.join(work, "config-s3v4")
        with open(cfg, "w") as f:
            f.write("[default]\ns3 =\n    signature_version = s3v4\n")
        penv = dict(cli.env, AWS_CONFIG_FILE=cfg)
    rc, out, err = cli.run("s3", "presign", s3b + "/dir/small.bin", "--expires-in", "300", env=penv)
    url = out.strip()
    check("s3 presign gives a URL", rc == 0 and url.startswith(H.S.endpoint) and
          "X-Amz-Signature=" in url, out + err)
    if url:
        dl = os.path.join(work, "presigned.out")
        crc, cout, cerr = H.run_cmd(["curl", "-s", "-S", "-o", dl, "-w", "%{http_code}", url], timeout=60)
        check("curl GET of the presigned URL: 200 and same bytes",
              crc == 0 and cout.strip() == "200" and os.path.exists(dl) and H.sha256_file(dl) == want,
              (crc, cout, cerr))

    # sync both ways
    src = os.path.join(work, "tree")
    files = make_tree(src, 50)
    rc, out, err = cli.run("s3", "sync", "--no-progress", src, s3b + "/tree", timeout=300)
    n_up = out.count("upload:")
    check("s3 sync up uploads 50 files", rc == 0 and n_up == 50, "rc %d, %d uploads; %s" % (rc, n_up, err))
    rc, out, err = cli.run("s3", "sync", "--no-progress", src, s3b + "/tree", timeout=300)
    check("second s3 sync up uploads nothing", rc == 0 and "upload:" not in out,
          "rc %d, %d uploads; %s" % (rc, out.count("upload:"), (out + err)[-500:]))
    dst = os.path.join(work, "tree.back")
    rc, out, err = cli.run("s3", "sync", "--no-progress", s3b + "/tree", dst, timeout=300)
    check("s3 sync down downloads 50 files", rc == 0 and out.count("download:") == 50,
          "rc %d, %d downloads; %s" % (rc, out.count("download:"), (out + err)[-500:]))
    eq("s3 sync down: tree equal by sha256", tree_hashes(dst), files)
    rc, out, err = cli.run("s3", "sync", "--no-progress", s3b + "/tree", dst, timeout=300)
    check("second s3 sync down downloads nothing", rc == 0 and "download:" not in out,
          "rc %d, %d downloads; %s" % (rc, out.count("download:"), (out + err)[-500:]))
    rc, out, err = cli.run("s3", "ls", "--recursive", s3b + "/tree/")
    eq("s3 ls --recursive tree keys", sorted(ls_keys(out)), sorted("tree/" + k for k in files))

    # recursive listing across page boundaries (1000 keys a page)
    lb = "sg-cli-many-%s" % uuid.uuid4().hex[:8]
    keys = ["many/%03d/obj-%05d" % (i // 10, i) for i in range(2500)]
    rc, out, err = cli.run("s3", "mb", "s3://" + lb)
    check("s3 mb listing bucket", rc == 0, out + err)
    t0 = time.time()
    if H.is_shardgate():
        H.direct_put_many(lb, keys)
    else:
        c = H.boto3_client()
        with ThreadPoolExecutor(16) as ex:
            list(ex.map(lambda k: c.put_object(Bucket=lb, Key=k, Body=k.encode()), keys))
    print("# created %d keys in %.1fs" % (len(keys), time.time() - t0), flush=True)
    rc, out, err = cli.run("s3", "ls", "--recursive", "s3://%s/" % lb, timeout=300)
    got = ls_keys(out)
    check("s3 ls --recursive over 2500 keys: every key exactly once",
          rc == 0 and len(got) == len(keys) and set(got) == set(keys),
          "rc %d, %d lines, %d unique; %s" % (rc, len(got), len(set(got)), err[-300:]))
    check("s3 ls --recursive order is key order", got == sorted(keys), "")
    rc, j, err = cli.json("s3api", "list-objects-v2", "--bucket", lb, "--max-items", "3")
    k1 = [o["Key"] for o in (j or {}).get("Contents", [])]
    eq("s3api list-objects-v2 --max-items 3", k1, sorted(keys)[:3])
    tok = (j or {}).get("NextToken")
    check("s3api list-objects-v2 --max-items gives NextToken", tok, j)
    if tok:
        rc, j, err = cli.json("s3api", "list-objects-v2", "--bucket", lb, "--max-items", "3",
                              "--starting-token", tok)
        eq("s3api list-objects-v2 --starting-token continues", [o["Key"] for o in (j or {}).get("Contents", [])],
           sorted(keys)[3:6])
    rc, j, err = cli.json("s3api", "list-objects-v2", "--bucket", lb, "--max-items", "1500",
                          "--page-size", "400")
    eq("s3api list-objects-v2 --max-items 1500 --page-size 400",
       [o["Key"] for o in (j or {}).get("Contents", [])], sorted(keys)[:1500])

    # 200 MiB multipart copy up and down
    big = os.path.join(work, "big.bin")
    wantbig = H.write_random_file(big, 200 * MB)
    t0 = time.time()
    rc, out, err = cli.run("s3", "cp", "--no-progress", big, s3b + "/big.bin", timeout=600)
    t1 = time.time()
    check("s3 cp up 200 MiB", rc == 0, err)
    rc, j, err = cli.json("s3api", "head-object", "--bucket", b, "--key", "big.bin")
    check("200 MiB object: size and multipart ETag",
          rc == 0 and j and j.get("ContentLength") == 200 * MB and "-" in j.get("ETag", ""), (j, err))
    bigback = os.path.join(work, "big.back")
    rc, out, err = cli.run("s3", "cp", "--no-progress", s3b + "/big.bin", bigback, timeout=600)
    t2 = time.time()
    check("s3 cp down 200 MiB sha256", rc == 0 and os.path.exists(bigback) and
          H.sha256_file(bigback) == wantbig, err)
    print("# 200 MiB: up %.1fs, down %.1fs" % (t1 - t0, t2 - t1), flush=True)
    for p in (big, bigback):
        if os.path.exists(p):
            os.unlink(p)

    # rm / rb
    rc, out, err = cli.run("s3", "rb", s3b)
    check("s3 rb non-empty bucket fails", rc != 0, out + err)
    rc, out, err = cli.run("s3", "rm", s3b + "/dir/small.bin")
    check("s3 rm", rc == 0 and "delete:" in out, out + err)
    rc, j, err = cli.json("s3api", "head-object", "--bucket", b, "--key", "dir/small.bin")
    check("object gone after s3 rm", rc != 0, j)
    rc, out, err = cli.run("s3", "rm", "--recursive", s3b, timeout=300)
    check("s3 rm --recursive", rc == 0, err)
    rc, out, err = cli.run("s3", "rb", s3b)
    check("s3 rb empty bucket", rc == 0 and "remove_bucket" in out, out + err)
    rc, out, err = cli.run("s3", "ls")
    check("bucket gone from s3 ls", rc == 0 and b not in out.split(), out + err)
    rc, out, err = cli.run("s3", "rb", "--force", "s3://" + lb, timeout=300)
    check("s3 rb --force listing bucket", rc == 0, err)
