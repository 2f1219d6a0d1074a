"""tests/integration/test_awscli_v1.py - cli_suite.py with the `aws` on PATH
(awscli v1). Skips (77) when there is none."""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import cli_suite  # noqa: E402

aws = shutil.which("aws")
if not aws:
    H.skip_file("no aws on PATH")
rc, out, err = H.run_cmd([aws, "--version"], env=H.aws_env(), timeout=60)
if rc != 0 or not (out + err).startswith("aws-cli/1."):
    H.skip_file("the aws on PATH is not awscli v1: %r" % (out + err).strip())
H.run(lambda: cli_suite.main("test_awscli_v1", aws, False))
