"""tests/integration/test_mpu_checksums_cold.py - the multipart checksum
checks of test_mpu_checksums.py, through an S3 cold tier: shardgate A serves
a directory, shardgate B uses A as its cold tier (`--cold`), and the checks
run against B (the harness's developer mode, SHARDGATE_TEST_ENDPOINT). A
verifies B's SigV4, so part checksums, ListParts, the Complete body and
checksum-mode reads all cross a real S3 hop."""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def wait_health(port):
    deadline = time.time() + 15
    while time.time() < deadline:
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/_shardgate/health" % port, timeout=1)
            return True
        except OSError:
            time.sleep(0.1)
    return False


def main():
    binp = os.environ.get("SHARDGATE_BIN")
    if not binp:
        print("FAIL SHARDGATE_BIN not set")
        return 1
    tmp = tempfile.mkdtemp(prefix="sg-ck-cold-")
    procs = []
    try:
        data = os.path.join(tmp, "a")
        os.mkdir(data)
        pa, pb = H._free_port(), H._free_port()
        env_a = dict(os.environ, SHARDGATE_ACCESS_KEY="coldak", SHARDGATE_SECRET_KEY="cold-secret-key")
        env_b = dict(os.environ, AWS_ACCESS_KEY_ID="coldak", AWS_SECRET_ACCESS_KEY="cold-secret-key",
                     SHARDGATE_ACCESS_KEY=H.ACCESS_KEY, SHARDGATE_SECRET_KEY=H.SECRET_KEY)
        for k in ("SHARDGATE_TEST_ENDPOINT", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
            env_a.pop(k, None)
            env_b.pop(k, None)
        la = open(os.path.join(tmp, "a.log"), "wb")
        lb = open(os.path.join(tmp, "b.log"), "wb")
        procs.append(subprocess.Popen([binp, "serve", "--listen", "127.0.0.1:%d" % pa, "--data", data],
                                      env=env_a, stdout=la, stderr=subprocess.STDOUT))
        procs.append(subprocess.Popen([binp, "serve", "--listen", "127.0.0.1:%d" % pb, "--cold",
                                       "http://127.0.0.1:%d" % pa], env=env_b, stdout=lb,
                                      stderr=subprocess.STDOUT))
        if not (wait_health(pa) and wait_health(pb)):
            print("FAIL the two gateways did not come up")
            return 1
        env_t = dict(os.environ, SHARDGATE_TEST_ENDPOINT="http://127.0.0.1:%d" % pb)
        r = subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                         "test_mpu_checksums.py")],
                           env=env_t, timeout=600)
        rc = r.returncode
        for p in procs:   # both must stop cleanly (and, under ASan, without leaks)
            p.terminate()
        for p in procs:
            code = p.wait(30)
            if code != 0:
                print("FAIL a gateway exited with %r" % code)
                rc = rc or 1
        procs = []
        if rc != 0:
            for name in ("a.log", "b.log"):
                with open(os.path.join(tmp, name), errors="replace") as f:
                    print("---- %s ----\n%s" % (name, f.read()[-3000:]))
        print("test_mpu_checksums_cold: %d passed, %d failed" % (1 if rc == 0 else 0, 0 if rc == 0 else 1))
        return rc
    finally:
        for p in procs:
            p.kill()
            p.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


sys.exit(main())
