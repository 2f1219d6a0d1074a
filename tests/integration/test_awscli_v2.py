"""tests/integration/test_awscli_v2.py - cli_suite.py with /usr/bin/aws
(Debian's awscli, v2). Skips (77) when it is missing."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import cli_suite  # noqa: E402

AWS = "/usr/bin/aws"
if not os.access(AWS, os.X_OK):
    H.skip_file("%s not found" % AWS)
rc, out, err = H.run_cmd([AWS, "--version"], env=H.aws_env(v2=True), timeout=60)
if rc != 0 or not (out + err).startswith("aws-cli/2."):
    H.skip_file("%s is not awscli v2: %r" % (AWS, (out + err).strip()))
H.run(lambda: cli_suite.main("test_awscli_v2", AWS, True))
