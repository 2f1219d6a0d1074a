"""tests/integration/test_boto3_debian.py - the boto3 suite (boto3_suite.py)
again under /usr/bin/python3 with Debian's python3-boto3 (an older boto3:
no default checksums, plain signed payloads). Skips (77) when that
interpreter or its boto3 is missing."""
import os
import subprocess
import sys

PY = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))

if not os.access(PY, os.X_OK):
    print("SKIP: %s not found" % PY)
    sys.exit(77)
try:
    probe = subprocess.run([PY, "-c", "import boto3; print(boto3.__version__)"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
except subprocess.TimeoutExpired:
    print("FAIL %s -c 'import boto3' timed out" % PY)
    sys.exit(1)
if probe.returncode != 0:
    print("SKIP: %s cannot import boto3: %s" % (PY, probe.stderr.decode(errors="replace").strip()))
    sys.exit(77)

env = dict(os.environ, SG_SUITE_NAME="test_boto3_debian", PYTHONNOUSERSITE="1")
# Keep the pyenv site-packages out of the Debian interpreter.
env.pop("PYTHONPATH", None)
try:
    rc = subprocess.run([PY, os.path.join(HERE, "boto3_suite.py")], env=env, timeout=840).returncode
except subprocess.TimeoutExpired:
    print("FAIL boto3 suite under %s timed out" % PY)
    sys.exit(1)
sys.exit(rc)
