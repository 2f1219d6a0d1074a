"""tests/integration/test_access_log.py - the access log (issue 10, finding
10) and the log file options:
- a key with "%0A" (or quotes, backslashes, control bytes) cannot forge a
  line or a field, in the text and the JSON format;
- each access line carries the client address, the access key id (or -),
  how a read was served (fill / miss-joined / hit / pass-through / -) and,
  for a 501, the sub-resource asked for;
- --log-format json writes one JSON object per line; --log-file with
  SIGHUP follows a rotated file; without a log file SIGHUP is ignored.
The reads run through a caching gateway whose cold tier (a second
shardgate) sits behind a 1 MB/s link, so a second reader reliably joins the
first one's fill."""

import http.client
import json
import os
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import front_common as F  # noqa: E402
import cache_common as C  # noqa: E402
from throttle import Throttle  # noqa: E402

check, eq = H.check, H.eq
BUCKET = "logbucket"
FORGED = "x\nFAKE 2030-01-01T00:00:00.000Z INFO  access: req=0 status=200 \"q\" \\ \x01"
FORGED_PATH = "/%s/x%%0AFAKE%%202030-01-01T00:00:00.000Z%%20INFO%%20%%20access:%%20req=0" \
              "%%20status=200%%20%%22q%%22%%20%%5C%%20%%01" % BUCKET
FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')
ACCESS = re.compile(r"^\S+ INFO  access: (.*)$")


def access_lines(text):
    """[{field: raw value}] of the text-format access lines, in request order."""
    out = []
    for line in text.splitlines():
        m = ACCESS.match(line)
        if m:
            out.append({k: v for k, v in FIELD.findall(m.group(1))})
    return sorted(out, key=lambda l: l.get("req", ""))


def wait_log(read, word, timeout=20):
    """The log text once it holds `word` (or after timeout)."""
    end = time.time() + timeout
    text = read()
    while word not in text and time.time() < end:
        time.sleep(0.1)
        text = read()
    return text


def read_file(p):
    try:
        with open(p, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def find(lines, **want):
    return [l for l in lines if all(l.get(k) == v for k, v in want.items())]


def signed_request(port, method, path, query=""):
    url = "http://127.0.0.1:%d%s%s" % (port, path, ("?" + query) if query else "")
    hdrs = H.sign_headers(method, url)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request(method, path + (("?" + query) if query else ""), headers=hdrs)
    return c, c.getresponse()


def t_text_and_reads():
    cold = C.ColdGateway().start()
    size = 4 * H.MB
    cold.put_random(BUCKET, "big", size)
    cold.put_random(BUCKET, "other", 1000)
    link = Throttle("127.0.0.1", cold.port, down_rate=1e6).start()
    try:
        g = F.start_gw("text", data=False, extra=[
            "--cold", "http://127.0.0.1:%d" % link.port, "--cache-dir", H.tmpdir("cache"),
            "--cache-size", "64MiB", "--consistency", "immutable"],
            env={"AWS_ACCESS_KEY_ID": C.COLD_ACCESS, "AWS_SECRET_ACCESS_KEY": C.COLD_SECRET})
        if not check("caching gateway starts", g.health() == 200, g.log()[-2000:]):
            return
        # a forged line, unauthenticated and signed
        st, _, _ = F.http_get(g.port, FORGED_PATH)
        eq("the forging GET is answered (403, anonymous)", st, 403)

        # fill, then a reader joining it, then a hit
        c1, r1 = signed_request(g.port, "GET", "/%s/big" % BUCKET)
        c2, r2 = signed_request(g.port, "GET", "/%s/big" % BUCKET)
        bodies = {}

        def drain(name, r):
            bodies[name] = r.read()

        ts = [threading.Thread(target=drain, args=("1", r1)),
              threading.Thread(target=drain, args=("2", r2))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        c1.close()
        c2.close()
        eq("both readers got the whole object", (r1.status, r2.status, len(bodies.get("1", b"")),
                                                 len(bodies.get("2", b""))),
           (200, 200, size, size))
        # the third read comes once the copy is published: a hit
        end = time.time() + 30
        while time.time() < end and C.metric_sum(C.metrics(g.port), "shardgate_cache_objects") < 1:
            time.sleep(0.1)
        c3, r3 = signed_request(g.port, "GET", "/%s/big" % BUCKET)
        r3.read()
        c3.close()
        eq("the third read is answered", r3.status, 200)
        # a HEAD of an object not cached asks the cold tier itself
        c4, r4 = signed_request(g.port, "HEAD", "/%s/other" % BUCKET)
        r4.read()
        c4.close()
        eq("HEAD of an uncached object", r4.status, 200)
        # a sub-resource shardgate does not serve
        st, _ = F.signed_get(g.port, "/%s/big" % BUCKET, "website")
        eq("GET ?website is 501", st, 501)
        # an access line is written just after its response went out
        def all_in(text):
            ls = access_lines(text)
            return (len(find(ls, op="GetObject", key="big", status="200")) == 3
                    and find(ls, op="HeadObject") and find(ls, status="501")
                    and [l for l in ls if "FAKE" in l.get("key", "")])
        end = time.time() + 20
        text = g.log()
        while not all_in(text) and time.time() < end:
            time.sleep(0.1)
            text = g.log()
        lines = access_lines(text)
        check("no line starts with the forged text", not re.search(r"^FAKE", text, re.M),
              [l for l in text.splitlines() if "FAKE" in l])
        forged = [l for l in lines if "FAKE" in l.get("key", "")]
        eq("the forging request wrote one access line", len(forged), 1)
        want_key = '"x\\nFAKE 2030-01-01T00:00:00.000Z INFO  access: req=0 status=200 \\"q\\" ' \
                   '\\\\ \\x01"'
        check("the key is quoted with \\n, \\\" , \\\\ and \\x01 escaped",
              forged and all(l["key"] == want_key for l in forged), forged)
        check("no forged field: the status after the key is the real one",
              forged and all(l.get("status") in ("403", "404") for l in forged), forged)
        check("every access line has the client address",
              lines and all(l.get("client") == "127.0.0.1" for l in lines),
              [l for l in lines if l.get("client") != "127.0.0.1"][:3])
        check("anonymous requests log key_id=-",
              any(l.get("key_id") == "-" and l.get("status") == "403" for l in forged), forged)
        gets = find(lines, op="GetObject", key="big", status="200")
        eq("how the three reads were served", [l.get("read") for l in gets],
           ["fill", "miss-joined", "hit"])
        check("signed requests log the access key id",
              gets and all(l.get("key_id") == H.ACCESS_KEY for l in gets), gets)
        eq("a HEAD of an uncached object is a pass-through",
           [l.get("read") for l in find(lines, op="HeadObject", key="other")], ["pass-through"])
        eq("non-reads log read=-", {l.get("read") for l in find(lines, op="Health")}, {"-"})
        nimp = find(lines, status="501")
        eq("the 501 names the sub-resource asked for", [l.get("subresource") for l in nimp],
           ["website"])
        eq("gateway exits 0 on SIGTERM", g.stop(), 0)
    finally:
        link.stop()
        C.stop_all()


def t_json_and_sighup():
    logp = os.path.join(H.tmpdir("logs"), "sg.json")
    g = F.start_gw("json", extra=["--log-format", "json", "--log-file", logp])
    if not check("gateway with --log-format json --log-file starts", g.health() == 200,
                 g.log()[-2000:]):
        return
    os.makedirs(os.path.join(g.data_dir, BUCKET), exist_ok=True)
    with open(os.path.join(g.data_dir, BUCKET, "obj"), "wb") as f:
        f.write(b"hello")
    F.http_get(g.port, FORGED_PATH)
    st, _ = F.signed_get(g.port, "/%s/obj" % BUCKET)
    eq("signed GET", st, 200)
    raw = wait_log(lambda: read_file(logp), '"key":"obj"')
    objs, bad = [], []
    for line in raw.splitlines():
        try:
            objs.append(json.loads(line))
        except ValueError:
            bad.append(line)
    eq("every line of the log file is a JSON object", bad, [])
    check("the start-up messages are in it", any("connections: at most" in o.get("msg", "")
                                                  for o in objs), raw[:1000])
    acc = [o for o in objs if o.get("subsys") == "access"]
    forged = [o for o in acc if "FAKE" in (o.get("key") or "")]
    eq("the forged key comes back exactly from the JSON line", [o.get("key") for o in forged],
       [FORGED])
    got = [o for o in acc if o.get("key") == "obj"]
    check("the JSON access object carries the fields",
          got and got[0].get("client") == "127.0.0.1" and got[0].get("key_id") == H.ACCESS_KEY
          and got[0].get("status") == 200 and got[0].get("read") == "pass-through"
          and got[0].get("method") == "GET" and isinstance(got[0].get("ms"), float), got)
    check("anonymous is null", forged and forged[0].get("key_id") is None, forged)
    check("nothing went to stdout/stderr but the banner", '"subsys"' not in g.log(),
          g.log()[-800:])

    # logrotate: move the file, SIGHUP, the next lines go to a new file. The
    # gateway creates the new file (open) and then switches its descriptor to
    # it (dup2); a line written in between still goes to the old file, so the
    # switch is known done when its own "reopened" line is in the new file,
    # not when the file exists (a GET sent then was logged to the old file
    # under two suites side by side)
    os.rename(logp, logp + ".1")
    g.proc.send_signal(signal.SIGHUP)
    reopened = wait_log(lambda: read_file(logp), "SIGHUP: log file reopened")
    check("SIGHUP reopened the log file by its name, and says so in it",
          "SIGHUP: log file reopened" in reopened, reopened[:800])
    check("the gateway is still running after SIGHUP", g.health() == 200, g.log()[-800:])
    st, _ = F.signed_get(g.port, "/%s/obj" % BUCKET)
    eq("a signed GET after SIGHUP", st, 200)
    new = wait_log(lambda: read_file(logp), '"key":"obj"')
    check("lines after SIGHUP go to the new file", '"key":"obj"' in new, new[:800])
    old = read_file(logp + ".1")
    check("the rotated file keeps the lines before SIGHUP and none after it",
          '"key":"obj"' in old and old.count('"key":"obj"') == 1, old[-800:])
    eq("gateway exits 0 on SIGTERM", g.stop(), 0)

    g = F.start_gw("nofile")
    g.proc.send_signal(signal.SIGHUP)
    text = wait_log(g.log, "SIGHUP ignored")
    check("without a log file SIGHUP is ignored: the gateway keeps running",
          g.proc.poll() is None and g.health() == 200, g.log()[-800:])
    check("and says so", "SIGHUP ignored" in text, text[-800:])
    eq("gateway exits 0 on SIGTERM", g.stop(), 0)


def main():
    C.need_clients()
    H.tmpdir("x")
    t_text_and_reads()
    t_json_and_sighup()


H.S.name = "test_access_log"
H.run(main)
