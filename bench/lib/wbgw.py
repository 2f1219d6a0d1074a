"""bench/lib/wbgw.py - one gateway with a write-back bucket "ckpt" over a
directory-store cold tier, and a checkpoint file for it: the setup that
bench/wb_phases.py and bench/onwrite_fill.py share."""
import json
import os
import shutil
import subprocess

from procs import free_port, wait_port

MiB = 1 << 20
ACCESS, SECRET = "bench", "bench-secret"


def start(binp, work, port_from, config=None):
    """A fresh WORK (data/ckpt, cache, spool) and the gateway on a free port
    from port_from, cache.on_write on; `config` is merged into the top
    level. Returns (process, port); the caller stops it (SIGTERM)."""
    shutil.rmtree(work, ignore_errors=True)
    for d in ("data/ckpt", "cache", "spool"):
        os.makedirs(os.path.join(work, d))
    port = free_port(port_from)
    cfg = {"listen": "127.0.0.1:%d" % port, "log_level": "warn", "spool_dir": work + "/spool",
           "cache": {"dir": work + "/cache", "size": "64GiB", "on_write": True},
           "buckets": {"ckpt": {"write": "back"}}}
    cfg.update(config or {})
    with open(work + "/cfg.json", "w") as f:
        json.dump(cfg, f)
    os.chmod(work + "/cfg.json", 0o600)
    env = dict(os.environ, SHARDGATE_ACCESS_KEY=ACCESS, SHARDGATE_SECRET_KEY=SECRET)
    gw = subprocess.Popen([binp, "serve", "--config", work + "/cfg.json", "--data", work + "/data"],
                          env=env, stdout=open(work + "/gateway.log", "w"),
                          stderr=subprocess.STDOUT)
    wait_port(port, gw)
    return gw, port


def checkpoint(path, size_mib):
    """A file of size_mib MiB of random bytes."""
    with open(path, "wb") as f:
        for _ in range(size_mib):
            f.write(os.urandom(MiB))


def client(port):
    import boto3
    from botocore.config import Config
    return boto3.client("s3", endpoint_url="http://127.0.0.1:%d" % port, aws_access_key_id=ACCESS,
                        aws_secret_access_key=SECRET, region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"}))
