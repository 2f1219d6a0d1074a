"""tests/integration/test_boto3_new.py - the boto3 suite (boto3_suite.py)
under the python3 on PATH (boto3 1.43: CRC32 checksums, aws-chunked trailer
uploads)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

try:
    import boto3  # noqa: F401
except ImportError:
    H.skip_file("boto3 is not installed for %s" % sys.executable)

import boto3_suite  # noqa: E402

H.run(lambda: boto3_suite.main("test_boto3_new"))
