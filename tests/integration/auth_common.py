"""tests/integration/auth_common.py - shared by the test_auth_* files: start
shardgate with a multi-user config file (mode 600, passed with --config)
without touching harness.py, and sign aws-chunked bodies the way SigV4
streaming clients do (chunk signatures chained from the seed signature)."""

import hashlib
import hmac
import json
import os
import subprocess

import harness as H

USERS = {
    # name: (access key, secret, permissions)
    "reader": ("SGREADER0000000001", "reader/secret+key/0001", {"*": "read"}),
    "writer": ("SGWRITER0000000001", "writer/secret+key/0001", {"ckpt": "write", "data": "read"}),
    "badmin": ("SGBADMIN0000000001", None, {"ckpt": "admin", "*": "read", "private": "none"}),
}
BADMIN_ENV = "SG_TEST_BADMIN_SECRET"
BADMIN_SECRET = "badmin/secret+from+env/0001"


def write_config():
    """Writes the config (root + three users, one with secret_key_env; bucket
    'public' public_read) and returns its path."""
    users = [{"name": "root", "access_key": "ROOT-FROM-FILE", "secret_key": "replaced-by-env",
              "permissions": {"*": "admin"}}]
    for name, (ak, sk, perms) in USERS.items():
        u = {"name": name, "access_key": ak, "permissions": perms}
        if sk is None:
            u["secret_key_env"] = BADMIN_ENV
        else:
            u["secret_key"] = sk
        users.append(u)
    cfg = {"users": users, "buckets": {"public": {"public_read": True}}}
    path = os.path.join(H.tmpdir("conf"), "shardgate.json")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(cfg, f)
    return path


def secret_of(name):
    if name == "root":
        return H.SECRET_KEY
    ak, sk, _ = USERS[name]
    return BADMIN_SECRET if sk is None else sk


def access_of(name):
    return H.ACCESS_KEY if name == "root" else USERS[name][0]


def start_with_config(name):
    """harness.start() with `--config <file>` appended to the gateway's argv
    (harness.py has no hook for it; Popen is wrapped for this one call)."""
    if H.EXT_ENDPOINT:
        return H.start(name)
    path = write_config()
    os.environ[BADMIN_ENV] = BADMIN_SECRET
    real = subprocess.Popen
    binp = os.environ.get("SHARDGATE_BIN")

    def popen(argv, *a, **kw):
        if isinstance(argv, list) and argv and argv[0] == binp:
            argv = argv + ["--config", path]
        return real(argv, *a, **kw)

    subprocess.Popen = popen
    try:
        return H.start(name)
    finally:
        subprocess.Popen = real


# ---------------------------------------------------------------- aws-chunked

def _hmac(key, msg):
    return hmac.new(key, msg.encode() if isinstance(msg, str) else msg, hashlib.sha256).digest()


def signing_key(secret, date8, region="us-east-1"):
    k = _hmac(("AWS4" + secret).encode(), date8)
    k = _hmac(k, region)
    k = _hmac(k, "s3")
    return _hmac(k, "aws4_request")


EMPTY = hashlib.sha256(b"").hexdigest()


def chunked_body(seed, amzdate, secret, data, chunk=64 * 1024, trailer=None, signed=True,
                 tamper_chunk=None, tamper_trailer=False):
    """Encodes `data` as aws-chunked. signed: chunk signatures chained from
    `seed` (STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]); else bare sizes
    (STREAMING-UNSIGNED-PAYLOAD-TRAILER). trailer: (name, value) or None.
    tamper_chunk: index of a chunk whose data is altered after signing.
    tamper_trailer: alter the trailer value after signing it."""
    scope = "%s/us-east-1/s3/aws4_request" % amzdate[:8]
    key = signing_key(secret, amzdate[:8])
    prev = seed
    out = []
    pieces = [data[i:i + chunk] for i in range(0, len(data), chunk)] + [b""]
    for i, p in enumerate(pieces):
        if signed:
            sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amzdate, scope, prev, EMPTY,
                             hashlib.sha256(p).hexdigest()])
            sig = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
            prev = sig
            if tamper_chunk == i and p:
                p = bytes([p[0] ^ 1]) + p[1:]
            out.append(b"%x;chunk-signature=%s\r\n" % (len(p), sig.encode()))
        else:
            if tamper_chunk == i and p:
                p = bytes([p[0] ^ 1]) + p[1:]
            out.append(b"%x\r\n" % len(p))
        if p:
            out.append(p + b"\r\n")
    if trailer is not None:
        name, value = trailer
        line = "%s:%s" % (name, value)
        sent = line
        if tamper_trailer:
            v = value[:-3] + ("A" if value[-3] != "A" else "B") + value[-2:]
            sent = "%s:%s" % (name, v)
        out.append(sent.encode() + b"\r\n")
        if signed:
            sts = "\n".join(["AWS4-HMAC-SHA256-TRAILER", amzdate, scope, prev,
                             hashlib.sha256((line + "\n").encode()).hexdigest()])
            tsig = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
            out.append(b"x-amz-trailer-signature:" + tsig.encode() + b"\r\n")
        out.append(b"\r\n")
    else:
        out.append(b"\r\n")
    return b"".join(out)
