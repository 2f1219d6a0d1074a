"""tests/integration/test_lifecycle.py - the gateway's life: SIGTERM lets an
in-flight download finish, refuses new connections and exits 0; kill -9
during an upload leaves the old object intact (never a partial one) and the
restarted gateway serves it."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

check, eq = H.check, H.eq
MB = 1024 * 1024


def restart_same_dir():
    """Starts a new gateway on the same port and data directory."""
    env = dict(os.environ)
    env.update(SHARDGATE_ACCESS_KEY=H.ACCESS_KEY, SHARDGATE_SECRET_KEY=H.SECRET_KEY)
    argv = [os.environ["SHARDGATE_BIN"], "serve", "--listen", "127.0.0.1:%d" % H.S.port,
            "--data", H.S.data_dir]
    H.S.proc = subprocess.Popen(argv, stdout=H.S.log_file, stderr=subprocess.STDOUT, env=env,
                                cwd=H.S.tmp, stdin=subprocess.DEVNULL)
    deadline = time.time() + 15
    while time.time() < deadline and H.health(timeout=1.0) != 200:
        time.sleep(0.1)
    check("restarted gateway answers health", H.health() == 200)


def request_head(method, url_path, extra=None, payload_hash=None):
    """The request line and SigV4-signed headers, as bytes."""
    host = "%s:%d" % (H.S.host, H.S.port)
    hdrs = H.sign_headers(method, "http://%s%s" % (host, url_path), headers=extra or {},
                          payload_hash=payload_hash)
    lines = ["%s %s HTTP/1.1" % (method, url_path), "Host: %s" % host]
    lines += ["%s: %s" % kv for kv in hdrs.items() if kv[0].lower() != "host"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def slow_download(url_path, size, result):
    """GETs url_path over a raw socket, reading slowly; stores (status, n)."""
    s = socket.create_connection((H.S.host, H.S.port), timeout=60)
    s.sendall(request_head("GET", url_path))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    head, body = H.read_head(s)
    status = int(head.split(b" ")[1]) if head else 0
    got = len(body)
    while got < size:
        chunk = s.recv(256 * 1024)
        if not chunk:
            break
        got += len(chunk)
        time.sleep(0.01)          # ~25 MB/s: the download is still running at SIGTERM
    s.close()
    result.append((status, got))


def main():
    H.start("test_lifecycle")
    if not H.is_shardgate():
        H.skip_file("needs shardgate itself")
    s3 = H.boto3_client()
    s3.create_bucket(Bucket="life")

    # kill -9 during an upload: the old object stays, nothing partial shows.
    old = os.urandom(3 * MB)
    s3.put_object(Bucket="life", Key="ckpt.bin", Body=old)
    size = 64 * MB
    sock = socket.create_connection((H.S.host, H.S.port), timeout=30)
    sock.sendall(request_head("PUT", "/life/ckpt.bin", {"Content-Length": str(size)},
                              payload_hash="UNSIGNED-PAYLOAD"))
    sock.sendall(os.urandom(20 * MB))           # a third of the body, then the crash
    time.sleep(0.3)
    H.S.proc.send_signal(signal.SIGKILL)
    H.S.proc.wait(10)
    sock.close()
    restart_same_dir()
    got = s3.get_object(Bucket="life", Key="ckpt.bin")["Body"].read()
    eq("after kill -9 mid-upload the old object is intact", H.sha256(got), H.sha256(old))
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="life").get("Contents", [])]
    eq("after kill -9 the listing shows only the old object", keys, ["ckpt.bin"])

    # SIGTERM with a download in flight: it completes, then exit 0.
    big = os.urandom(48 * MB)
    s3.put_object(Bucket="life", Key="big.bin", Body=big)
    result = []
    t = threading.Thread(target=slow_download, args=("/life/big.bin", len(big), result))
    t.start()
    time.sleep(0.5)
    proc = H.S.proc
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    refused = False
    try:
        socket.create_connection((H.S.host, H.S.port), timeout=2).close()
    except OSError:
        refused = True
    check("after SIGTERM new connections are refused", refused)
    t.join(120)
    check("in-flight download finished after SIGTERM",
          bool(result) and result[0] == (200, len(big)), repr(result))
    try:
        rc = proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = "timeout"
    eq("gateway exits 0 after draining", rc, 0)
    H.S.proc = None


H.run(main)
