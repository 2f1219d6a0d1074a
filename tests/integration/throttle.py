"""tests/integration/throttle.py - a small TCP proxy on 127.0.0.1 that forwards
to a target with an optional rate limit and can drop every connection on
command: a stand-in for a slow or failing network between the gateway and
its cold tier.

Two ways to run it, same behaviour:

  * in a thread of the test process:
        t = Throttle("127.0.0.1", cold_port, down_rate=50e6).start()
        ... t.port ...; t.set_rate(down_rate=None); t.cut(); t.stop()
  * as a subprocess (no GIL shared with the test's client threads):
        t = ThrottleProcess("127.0.0.1", cold_port, down_rate=50e6).start()
    same methods; it is driven over its stdin/stdout.
    Command line: python3 throttle.py --target HOST:PORT [--listen-port N]
                  [--down-rate BYTES_PER_S] [--up-rate BYTES_PER_S] [--latency-ms MS]
    prints "PORT <n>", then reads commands, one a line, answering "OK ..." :
      rate DOWN UP   (each a number of bytes/s, or "none" for unlimited)
      cut            close every open connection (both sides)
      refuse         cut, and close new connections at once until "restore"
      restore        accept and forward again
      flip N         damage one byte on the way to the target, once: the byte
                     N bytes on in the first connection to send that many
                     after the command (N well inside a big body: a part
                     damaged in transit, which TCP's checksum would miss)
      stats          "OK down=<bytes> up=<bytes> conns=<total> active=<n>
                      flipped=<n>"
      quit

Rates are shared by all connections of a direction (one token bucket per
direction, like one link), with a burst of one chunk (64 KiB). --latency-ms
holds the first bytes of each answer (the first after the client sent
something) that long: one round trip per request, as a remote S3 adds.
Standard library only.
"""

import argparse
import asyncio
import os
import subprocess
import sys
import threading
import time

CHUNK = 64 * 1024


class _Bucket:
    """A token bucket without locks (used by one event loop)."""

    def __init__(self, rate):
        self.rate = rate
        self.next_free = time.monotonic()

    async def take(self, n):
        rate = self.rate
        if not rate:
            return
        now = time.monotonic()
        # allow a burst of one chunk; otherwise wait for the link to be free
        start = max(self.next_free, now - CHUNK / rate)
        self.next_free = start + n / rate
        delay = self.next_free - now - CHUNK / rate
        if delay > 0:
            await asyncio.sleep(delay)


class _Core:
    """The proxy's state; all methods run on its event loop."""

    def __init__(self, host, port, down_rate, up_rate, latency_s=0.0):
        self.target = (host, port)
        self.latency_s = latency_s
        self.down = _Bucket(down_rate)
        self.up = _Bucket(up_rate)
        self.refusing = False
        self.conns = set()        # (client_writer, target_writer)
        self.bytes_down = 0
        self.bytes_up = 0
        self.conns_total = 0
        self.server = None
        self.flip_n = None        # armed: the byte this far into a connection's
        self.flip_gen = 0         # upstream bytes since arming (generation) is flipped
        self.flipped = 0

    def arm_flip(self, n):
        self.flip_n = n
        self.flip_gen += 1

    def _maybe_flip(self, data, mark):
        """mark = [generation seen, bytes since]: one per upstream pipe."""
        if self.flip_n is None:
            return data
        if mark[0] != self.flip_gen:
            mark[0], mark[1] = self.flip_gen, 0
        at = self.flip_n - mark[1]
        mark[1] += len(data)
        if 0 <= at < len(data):
            data = bytearray(data)
            data[at] ^= 0x40
            self.flip_n = None
            self.flipped += 1
        return bytes(data)

    async def listen(self, port):
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", port)
        return self.server.sockets[0].getsockname()[1]

    async def _pipe(self, reader, writer, bucket, down, turn):
        """turn["asked"]: the client sent bytes that no answer has followed yet."""
        mark = [self.flip_gen, 0]
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                if not down:
                    turn["asked"] = True
                    data = self._maybe_flip(data, mark)
                elif turn["asked"] and self.latency_s:
                    turn["asked"] = False
                    await asyncio.sleep(self.latency_s)
                await bucket.take(len(data))
                writer.write(data)
                if down:
                    self.bytes_down += len(data)
                else:
                    self.bytes_up += len(data)
                await writer.drain()
        except (OSError, asyncio.CancelledError, ConnectionError):
            pass
        finally:
            try:
                if writer.can_write_eof():
                    writer.write_eof()
            except (OSError, RuntimeError):
                pass

    async def _handle(self, creader, cwriter):
        self.conns_total += 1
        if self.refusing:
            _abort(cwriter)
            return
        try:
            treader, twriter = await asyncio.open_connection(*self.target)
        except OSError:
            _abort(cwriter)
            return
        pair = (cwriter, twriter)
        self.conns.add(pair)
        try:
            turn = {"asked": False}
            await asyncio.gather(self._pipe(creader, twriter, self.up, False, turn),
                                 self._pipe(treader, cwriter, self.down, True, turn))
        except asyncio.CancelledError:
            pass                       # the proxy is stopping
        finally:
            self.conns.discard(pair)
            for w in pair:
                try:
                    w.close()
                except (OSError, RuntimeError):
                    pass

    def cut(self):
        n = len(self.conns)
        for pair in list(self.conns):
            for w in pair:
                _abort(w)
        return n

    def stats(self):
        return "down=%d up=%d conns=%d active=%d flipped=%d" % (
            self.bytes_down, self.bytes_up, self.conns_total, len(self.conns), self.flipped)


def _abort(writer):
    """Closes a connection with a reset (SO_LINGER 0), as a dying network would."""
    try:
        tr = writer.transport
        if tr is not None:
            tr.abort()
        else:
            writer.close()
    except (OSError, RuntimeError, AttributeError):
        pass


def _parse_rate(s):
    if s is None:
        return None
    if isinstance(s, (int, float)):
        return float(s) or None
    s = str(s).strip().lower()
    if s in ("", "none", "0", "inf"):
        return None
    mult = 1
    for suf, m in (("gib", 1 << 30), ("mib", 1 << 20), ("kib", 1 << 10), ("g", 1e9),
                   ("m", 1e6), ("k", 1e3)):
        if s.endswith(suf):
            s, mult = s[:-len(suf)], m
            break
    return float(s) * mult


class Throttle:
    """The proxy in a daemon thread with its own event loop."""

    def __init__(self, target_host, target_port, down_rate=None, up_rate=None, listen_port=0):
        self.core = _Core(target_host, target_port, _parse_rate(down_rate), _parse_rate(up_rate))
        self.listen_port = listen_port
        self.port = None
        self.loop = None
        self.thread = None

    def start(self):
        ready = threading.Event()

        def run():
            self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop)
            self.port = self.loop.run_until_complete(self.core.listen(self.listen_port))
            ready.set()
            self.loop.run_forever()
            # stopped: close what is left
            self.core.cut()
            self.core.server.close()
            pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.close()

        self.thread = threading.Thread(target=run, daemon=True, name="throttle")
        self.thread.start()
        if not ready.wait(10):
            raise RuntimeError("throttle did not start")
        return self

    def _call(self, fn, *a):
        done = threading.Event()
        out = []

        def go():
            try:
                out.append(fn(*a))
            finally:
                done.set()
        self.loop.call_soon_threadsafe(go)
        done.wait(10)
        return out[0] if out else None

    def set_rate(self, down_rate=None, up_rate=None):
        def f():
            self.core.down.rate = _parse_rate(down_rate)
            self.core.up.rate = _parse_rate(up_rate)
        self._call(f)

    def cut(self):
        """Drops every open connection; new ones are still accepted."""
        return self._call(self.core.cut)

    def flip(self, n):
        """Damages one byte on the way to the target, once (the "flip" command)."""
        self._call(self.core.arm_flip, n)

    def refuse(self):
        """Drops every open connection and resets new ones until restore()."""
        def f():
            self.core.refusing = True
            return self.core.cut()
        return self._call(f)

    def restore(self):
        def f():
            self.core.refusing = False
        self._call(f)

    def stats(self):
        s = self._call(self.core.stats) or ""
        return dict((k, int(v)) for k, v in (p.split("=") for p in s.split()))

    def stop(self):
        if self.loop and self.thread and self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


class ThrottleProcess:
    """The proxy as a subprocess (`python3 throttle.py`), driven over stdin."""

    def __init__(self, target_host, target_port, down_rate=None, up_rate=None, listen_port=0,
                 log=None, latency_ms=0):
        self.argv = [sys.executable, os.path.abspath(__file__), "--target",
                     "%s:%d" % (target_host, target_port), "--listen-port", str(listen_port)]
        if latency_ms:
            self.argv += ["--latency-ms", str(latency_ms)]
        if down_rate:
            self.argv += ["--down-rate", str(down_rate)]
        if up_rate:
            self.argv += ["--up-rate", str(up_rate)]
        self.log = log
        self.proc = None
        self.port = None
        self.lock = threading.Lock()

    def start(self):
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log or subprocess.DEVNULL, text=True, bufsize=1)
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError("throttle subprocess did not start: %r" % line)
        self.port = int(line.split()[1])
        return self

    def _cmd(self, cmd):
        with self.lock:
            self.proc.stdin.write(cmd + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline().strip()
        if not line.startswith("OK"):
            raise RuntimeError("throttle %r: %r" % (cmd, line))
        return line[2:].strip()

    def set_rate(self, down_rate=None, up_rate=None):
        self._cmd("rate %s %s" % (down_rate or "none", up_rate or "none"))

    def cut(self):
        return int(self._cmd("cut") or 0)

    def refuse(self):
        return int(self._cmd("refuse") or 0)

    def flip(self, n):
        self._cmd("flip %d" % n)

    def restore(self):
        self._cmd("restore")

    def stats(self):
        s = self._cmd("stats")
        return dict((k, int(v)) for k, v in (p.split("=") for p in s.split()))

    def stop(self):
        p = self.proc
        if p is None:
            return
        self.proc = None
        if p.poll() is None:
            try:
                p.stdin.write("quit\n")
                p.stdin.flush()
                p.wait(5)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                p.kill()
                p.wait(5)
        for f in (p.stdin, p.stdout):
            try:
                f.close()
            except OSError:
                pass


async def _serve_stdin(core):
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        parts = line.split()
        if not parts:
            continue
        cmd = parts[0]
        out = "OK"
        if cmd == "rate":
            core.down.rate = _parse_rate(parts[1] if len(parts) > 1 else None)
            core.up.rate = _parse_rate(parts[2] if len(parts) > 2 else None)
        elif cmd == "cut":
            out = "OK %d" % core.cut()
        elif cmd == "refuse":
            core.refusing = True
            out = "OK %d" % core.cut()
        elif cmd == "restore":
            core.refusing = False
        elif cmd == "flip" and len(parts) == 2 and parts[1].isdigit():
            core.arm_flip(int(parts[1]))
        elif cmd == "stats":
            out = "OK " + core.stats()
        elif cmd == "quit":
            print("OK", flush=True)
            return
        else:
            out = "ERR unknown command %r" % cmd
        print(out, flush=True)


async def _main_async(args):
    host, _, port = args.target.rpartition(":")
    core = _Core(host or "127.0.0.1", int(port), _parse_rate(args.down_rate),
                 _parse_rate(args.up_rate), args.latency_ms / 1e3)
    lport = await core.listen(args.listen_port)
    print("PORT %d" % lport, flush=True)
    await _serve_stdin(core)
    core.cut()
    core.server.close()


def main():
    ap = argparse.ArgumentParser(description="rate-limiting TCP proxy for tests")
    ap.add_argument("--target", required=True, help="HOST:PORT to forward to")
    ap.add_argument("--listen-port", type=int, default=0)
    ap.add_argument("--down-rate", help="bytes/s target->client (e.g. 50M); default unlimited")
    ap.add_argument("--up-rate", help="bytes/s client->target; default unlimited")
    ap.add_argument("--latency-ms", type=float, default=0.0,
                    help="delay of each answer's first bytes (a round trip); default 0")
    args = ap.parse_args()
    try:
        asyncio.run(_main_async(args))
    except KeyboardInterrupt:
        pass
    os._exit(0)   # the stdin reader thread may still block


if __name__ == "__main__":
    main()
