"""tests/integration/test_listen.py - one owner per port, and the listen
addresses users type (issue 10, findings 3 and 11):
- a second shardgate on a port another shardgate holds is refused with a
  message naming the address and the reason, and every request still goes
  to the first (no SO_REUSEPORT sharing);
- a port held by another program gives the same clear message, not
  libmicrohttpd's "Failed to bind to port 0";
- a restart right after a stop that left connections in TIME_WAIT binds;
- "localhost:PORT" is resolved, "[::1]:PORT" works where the machine has
  IPv6 loopback, a malformed address is refused naming what was given.
  (":PORT" = every interface is checked by the unit tests: tests bind
  127.0.0.1 only.)"""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import front_common as F  # noqa: E402

check, eq = H.check, H.eq


def list_buckets(port):
    st, body = F.signed_get(port, "/")
    return st, body.decode("utf-8", "replace")


def t_second_gateway_refused():
    a = F.start_gw("a")
    if not check("gateway A starts", a.health() == 200, a.log()[-2000:]):
        return
    os.makedirs(os.path.join(a.data_dir, "only-in-a"), exist_ok=True)
    b = F.start_gw("b", port=a.port, wait=False)
    rc = b.wait_exit(20)
    out = b.log()
    check("a second gateway on the same port exits (does not share it)", rc is not None and rc != 0,
          "exit %r; log:\n%s" % (rc, out[-1500:]))
    check("its message names the address", "127.0.0.1:%d" % a.port in out, out[-1500:])
    check("its message gives the reason (errno text)", "Address already in use" in out,
          out[-1500:])
    check("it does not claim to be listening", "listening on http" not in out, out[-1500:])
    # every request still reaches A (with the port shared, the kernel split
    # them between the two: B's data directory has no "only-in-a")
    seen = []
    for _ in range(12):
        st, body = list_buckets(a.port)
        seen.append(st == 200 and "only-in-a" in body)
    eq("12 ListBuckets all answered by the first gateway", seen.count(True), 12)
    b.stop()
    eq("gateway A exits 0 on SIGTERM", a.stop(), 0)


def t_port_held_by_another_program():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    port = s.getsockname()[1]
    try:
        g = F.start_gw("other", port=port, wait=False)
        rc = g.wait_exit(20)
        out = g.log()
        check("a port another program listens on is refused", rc is not None and rc != 0,
              "exit %r" % rc)
        check("the message names the address and the reason",
              "127.0.0.1:%d" % port in out and "Address already in use" in out, out[-1500:])
        check("no libmicrohttpd 'Failed to bind to port 0'", "port 0" not in out, out[-1500:])
        g.stop()
    finally:
        s.close()


def t_restart_after_time_wait():
    g = F.start_gw("tw")
    if not check("gateway for the restart check starts", g.health() == 200, g.log()[-2000:]):
        return
    port = g.port
    # keep-alive connections the server closes when it stops: its side of
    # each ends in TIME_WAIT on the listening port
    conns = []
    for _ in range(4):
        c = socket.create_connection(("127.0.0.1", port), timeout=10)
        c.sendall(b"GET /_shardgate/health HTTP/1.1\r\nHost: x\r\n\r\n")
        c.recv(4096)
        conns.append(c)
    eq("gateway exits 0 on SIGTERM with idle keep-alive connections", g.stop(), 0)
    for c in conns:
        c.close()
    g2 = F.start_gw("tw2", port=port)
    check("a restart on the same port binds at once (TIME_WAIT does not block it)",
          g2.health() == 200, g2.log()[-1500:])
    g2.stop()


def t_listen_forms():
    # ":PORT" (every interface) is not started here: tests bind 127.0.0.1
    # only. tests/unit/test_conf.c checks that ":PORT" means 0.0.0.0 and
    # tests/unit/test_gw_listen.c that such an address draws the warning.
    port = H._free_port()
    g = F.start_gw("localhost", port=port, listen="localhost:%d" % port)
    check("--listen localhost:PORT starts and answers on 127.0.0.1", g.health() == 200,
          g.log()[-1500:])
    check("the resolved address is logged", "localhost:%d (127.0.0.1)" % port in g.log(),
          g.log()[-1500:])
    g.stop()

    ok6 = False
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.bind(("::1", 0))
        s.close()
        ok6 = True
    except OSError:
        pass
    if not ok6:
        H.skip("--listen [::1]:PORT", "this machine has no IPv6 loopback")
    else:
        port = H._free_port()
        g = F.start_gw("v6", port=port, listen="[::1]:%d" % port, wait=False)
        deadline = time.time() + 20
        st = None
        while time.time() < deadline and g.proc.poll() is None and st != 200:
            st = g.health(1.0, host="::1")
            time.sleep(0.05)
        check("--listen [::1]:PORT answers on ::1", st == 200, g.log()[-1500:])
        check("the banner shows the IPv6 address in brackets",
              "http://[::1]:%d" % port in g.log(), g.log()[-1500:])
        g.stop()

    g = F.start_gw("bad", listen="127.1:%d" % H._free_port(), wait=False)
    rc = g.wait_exit(20)
    check("a malformed --listen is refused naming what was given",
          rc not in (None, 0) and "\"127.1:" in g.log(), "exit %r: %s" % (rc, g.log()[-800:]))


def main():
    H.tmpdir("x")
    t_second_gateway_refused()
    t_port_held_by_another_program()
    t_restart_after_time_wait()
    t_listen_forms()


H.S.name = "test_listen"
H.run(main)
