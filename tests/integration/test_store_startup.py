"""tests/integration/test_store_startup.py - no silent surprises when the
directory store starts (issue 10, finding 11, the store's part):
  * directories of --data that are not valid bucket names are skipped with
    one warning naming them (at most 10 names, then a count; names with
    control bytes cannot break the log line); files, the state directory
    and valid buckets are not mentioned;
  * --data (or SHARDGATE_DATA_DIR, or the config's data_dir) together with
    --cold is refused with a message naming both, instead of dropping the
    data directory silently; --state-dir with --cold likewise; --cold alone
    still starts;
  * start-up errors of the store name the failing path and the errno text
    (69019cc: "cannot open the cold tier var/data: IO").
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import store_common as T  # noqa: E402

check, eq = H.check, H.eq


def warned_lines(gw):
    return [l for l in gw.log().splitlines() if "not valid S3 bucket name" in l]


def case_few_bad_names():
    data = H.tmpdir("few")
    for d in ("good-bucket", "Upper_Case", "ab", "bad\nname", "lost+found"):
        os.makedirs(os.path.join(data, d))
    with open(os.path.join(data, "README_not_a_dir"), "w") as f:
        f.write("x")
    gw = T.Gw("few", ["--data", data])
    if gw.start():
        lines = warned_lines(gw)
        eq("[few] one warning line", len(lines), 1)
        line = lines[0] if lines else ""
        check("[few] it counts and names each skipped directory",
              "4 directories" in line and all("'%s'" % n in line for n in
                                              ("Upper_Case", "ab", "bad\\nname", "lost+found")),
              line)
        check("[few] it names no valid bucket, file or state directory",
              "good-bucket" not in line and "README" not in line and ".shardgate" not in line,
              line)
        check("[few] a name with a newline does not break the log line",
              not any(l.startswith("name") for l in gw.log().splitlines()))
        names = [b["Name"] for b in gw.client().list_buckets()["Buckets"]]
        eq("[few] only the valid bucket is served", names, ["good-bucket"])
    eq("[few] exits 0", gw.stop(), 0)


def case_many_bad_names():
    data = H.tmpdir("many")
    for i in range(25):
        os.makedirs(os.path.join(data, "Dir_%02d" % i))
    gw = T.Gw("many", ["--data", data])
    if gw.start():
        lines = warned_lines(gw)
        eq("[many] one warning line", len(lines), 1)
        line = lines[0] if lines else ""
        check("[many] bounded: 10 names and a count of the rest",
              "25 directories" in line and "and 15 more" in line and line.count("'Dir_") == 10,
              line)
    eq("[many] exits 0", gw.stop(), 0)


def case_clean_tree_no_warning():
    data = H.tmpdir("clean")
    os.makedirs(os.path.join(data, "fine-bucket"))
    gw = T.Gw("clean", ["--data", data])
    if gw.start():
        eq("[clean] no warning when every directory is a bucket", warned_lines(gw), [])
    eq("[clean] exits 0", gw.stop(), 0)


def refused(tag, args, env, want):
    gw = T.Gw(tag, args, env=env)
    ok = gw.start(expect_ok=False, timeout=15)
    rc = gw.wait_exit(15)
    check("[%s] refused at start (exit 2)" % tag, not ok and rc == 2, "rc %r\n%s" % (rc,
                                                                              gw.tail(5)))
    text = gw.log()
    check("[%s] the message says what to fix" % tag, all(w in text for w in want), gw.tail(5))


def case_data_with_cold():
    cold = "http://127.0.0.1:%d" % H._free_port()
    refused("data+cold flags", ["--data", H.tmpdir("dc1"), "--cold", cold], {},
            ["--data and cold_url", "exclusive"])
    refused("data env+cold flag", ["--cold", cold], {"SHARDGATE_DATA_DIR": H.tmpdir("dc2")},
            ["SHARDGATE_DATA_DIR and cold_url", "exclusive"])
    cfg = os.path.join(H.S.tmp, "dc.json")
    with open(cfg, "w") as f:
        json.dump({"data_dir": H.tmpdir("dc3")}, f)
    refused("data file+cold flag", ["--config", cfg, "--cold", cold], {},
            ["data_dir and cold_url", "exclusive"])
    refused("state-dir+cold", ["--state-dir", H.tmpdir("dc4"), "--cold", cold], {},
            ["state_dir", "--cold"])
    gw = T.Gw("cold alone", ["--cold", cold],
              env={"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"})
    gw.start()
    eq("[cold alone] exits 0", gw.stop(), 0)


def case_errors_name_path_and_errno():
    blocker = os.path.join(H.S.tmp, "a-file")
    with open(blocker, "w") as f:
        f.write("x")
    gw = T.Gw("data under a file", ["--data", os.path.join(blocker, "data")])
    ok = gw.start(expect_ok=False, timeout=15)
    rc = gw.wait_exit(15)
    check("[data under a file] refused, non-zero", not ok and rc not in (None, 0), rc)
    check("[data under a file] the message names the path and the errno text",
          ("%s/data" % blocker) in gw.log() and "Not a directory" in gw.log(), gw.tail(5))
    gw = T.Gw("state under a file", ["--data", H.tmpdir("sf"),
                                     "--state-dir", os.path.join(blocker, "state")])
    ok = gw.start(expect_ok=False, timeout=15)
    rc = gw.wait_exit(15)
    check("[state under a file] refused, non-zero", not ok and rc not in (None, 0), rc)
    check("[state under a file] the message names the path and the errno text",
          ("%s/state" % blocker) in gw.log() and "Not a directory" in gw.log(), gw.tail(5))


def main():
    T.init("test_store_startup")
    case_few_bad_names()
    case_many_bad_names()
    case_clean_tree_no_warning()
    case_data_with_cold()
    case_errors_name_path_and_errno()


if __name__ == "__main__":
    H.run(main)
