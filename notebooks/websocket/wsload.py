#!/usr/bin/env python3
"""A WebSocket load client for many connections (asyncio, raw sockets, no library), and the
helpers bench.py uses to measure a server: PSS/RSS and CPU of a process tree, and steal.

One asyncio Protocol per connection: a hand-written handshake and RFC 6455 framing (client
frames masked, server frames parsed in place), so 10,000 connections cost about 10 KiB each
in this process and a received message costs one callback. Two application protocols:

- "cable": Action Cable's JSON protocol (actioncable-v1-json): welcome, then a subscribe
  command for `channel` (BenchChannel in bench.py's app), confirm_subscription; a broadcast
  arrives as {"identifier", "message": {...}}; an echo is a "message" command with
  {"action": "echo", "seq": N} answered by {"message": {"seq": N}}.
- "raw": a plain echo endpoint: every text message comes back; a broadcast is any text
  message that was not sent by this connection (the new front-end path's echo app).

Also usable alone:  wsload.py URL N [cable]  opens N connections, prints the time they took,
holds them until stdin closes.
"""
import asyncio
import base64
import json
import os
import random
import re
import socket
import struct
import sys
import time
import urllib.parse

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class WSConn(asyncio.Protocol):
    """One client connection. `on_text(conn, bytes)` is called per text message (unfragmented
    or reassembled), after the opening and, for cable, the subscription."""

    def __init__(self, client, path, host, origin, subprotocol):
        self.client = client
        self.req = ("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nOrigin: %s\r\n%s\r\n" % (
                        path, host, base64.b64encode(os.urandom(16)).decode(), origin,
                        "Sec-WebSocket-Protocol: %s\r\n" % subprotocol if subprotocol else "")).encode()
        self.buf = bytearray()
        self.upgraded = False
        self.ready = asyncio.get_running_loop().create_future()
        self.closed = False
        self.transport = None
        self.frag = None

    def connection_made(self, transport):
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport.write(self.req)
        self.req = None

    def connection_lost(self, exc):
        self.closed = True
        if not self.ready.done():
            self.ready.set_exception(ConnectionError("closed before ready: %s" % (exc or "EOF")))
        self.client.lost += 1

    def data_received(self, data):
        self.buf += data
        if not self.upgraded:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buf[:end])
            del self.buf[:end + 4]
            if not head.startswith(b"HTTP/1.1 101"):
                self.ready.set_exception(ConnectionError("handshake: %r" % head[:80]))
                self.transport.close()
                return
            self.upgraded = True
            self.client.on_open(self)
        buf = self.buf
        while len(buf) >= 2:
            b0, n = buf[0], buf[1] & 0x7F
            hl = 2
            if n == 126:
                if len(buf) < 4:
                    return
                n, hl = struct.unpack_from(">H", buf, 2)[0], 4
            elif n == 127:
                if len(buf) < 10:
                    return
                n, hl = struct.unpack_from(">Q", buf, 2)[0], 10
            if len(buf) < hl + n:
                return
            payload = bytes(buf[hl:hl + n])
            del buf[:hl + n]
            op = b0 & 0x0F
            if op == 0x9:
                self.send(0xA, payload)
            elif op == 0x8:
                self.closed = True
                self.transport.close()
                return
            elif op in (0x1, 0x2, 0x0):
                if not b0 & 0x80:
                    self.frag = (self.frag or b"") + payload
                    continue
                if op == 0x0:
                    payload, self.frag = (self.frag or b"") + payload, None
                self.client.on_text(self, payload)

    def send(self, op, payload):
        n = len(payload)
        key = os.urandom(4)
        if n < 126:
            head = bytes([0x80 | op, 0x80 | n])
        elif n < 65536:
            head = bytes([0x80 | op, 0xFE]) + struct.pack(">H", n)
        else:
            head = bytes([0x80 | op, 0xFF]) + struct.pack(">Q", n)
        masked = bytes(b ^ key[i & 3] for i, b in enumerate(payload))  # short messages only
        self.transport.write(head + key + masked)


class Client:
    """N connections of one protocol; keeps the per-connection receive times of broadcasts and
    the round-trip samples of echoes."""

    def __init__(self, url, proto="cable", channel="BenchChannel", origin=None):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port
        self.path = (u.path or "/") + ("?" + u.query if u.query else "")
        self.origin = origin or "http://127.0.0.1:%d" % self.port
        self.proto = proto
        self.identifier = json.dumps({"channel": channel, "room": "bench"})
        self.conns = []
        self.lost = 0
        self.expect = None  # the text of the broadcast being waited for
        self.got = {}  # conn index -> receive time
        self.rtt = []
        self.sent_at = {}

    # -- protocol events --
    def on_open(self, c):
        if self.proto == "raw":
            c.ready.set_result(True)

    def on_text(self, c, payload):
        if self.proto == "cable":
            if not c.ready.done():
                if b'"welcome"' in payload:
                    c.send(0x1, json.dumps({"command": "subscribe", "identifier": self.identifier}).encode())
                elif b'"confirm_subscription"' in payload:
                    c.ready.set_result(True)
                elif b'"reject_subscription"' in payload:
                    c.ready.set_exception(ConnectionError("subscription rejected"))
                return
            if b'"type":"ping"' in payload:
                return
            m = re.search(rb'"seq":(\d+)', payload)
            if m:
                self.echoed(int(m.group(1)))
                return
        elif payload.startswith(b"seq:"):
            self.echoed(int(payload[4:]))
            return
        if self.expect is not None and self.expect in payload:
            self.got.setdefault(id(c), time.monotonic())

    def echoed(self, seq):
        t = self.sent_at.pop(seq, None)
        if t is not None:
            self.rtt.append(time.monotonic() - t)

    # -- actions --
    async def open(self, n, parallel=100, timeout=300):
        """Opens n more connections, at most `parallel` handshakes at once. Returns seconds."""
        loop = asyncio.get_running_loop()
        t0 = time.monotonic()
        sem = asyncio.Semaphore(parallel)

        async def one():
            async with sem:
                _, c = await loop.create_connection(
                    lambda: WSConn(self, self.path, "127.0.0.1:%d" % self.port, self.origin,
                                   "actioncable-v1-json" if self.proto == "cable" else None),
                    self.host, self.port)
                await asyncio.wait_for(c.ready, 120)
                self.conns.append(c)

        await asyncio.wait_for(asyncio.gather(*(one() for _ in range(n))), timeout)
        return time.monotonic() - t0

    async def wait_broadcast(self, text, trigger, timeout=120):
        """Runs trigger() (a coroutine), then waits until every connection has a message
        holding `text`. Returns (seconds from just before the trigger to the last arrival,
        p50 arrival, how many arrived)."""
        self.expect, self.got = text.encode(), {}
        t0 = time.monotonic()
        await trigger()
        deadline = t0 + timeout
        while len(self.got) < len(self.conns) and time.monotonic() < deadline:
            await asyncio.sleep(0.002)
        times = sorted(t - t0 for t in self.got.values())
        self.expect = None
        return (times[-1] if times else None, times[len(times) // 2] if times else None, len(times))

    async def echo_load(self, rate, seconds, conns=None):
        """Sends `rate` echo messages per second in total, spread over the first `conns`
        connections (each paced on its own clock), for `seconds`; then waits up to 5 s for
        the last answers. Returns (sent, answered, sorted round trips in seconds)."""
        use = self.conns[:conns or len(self.conns)]
        per = rate / len(use)
        self.rtt, self.sent_at = [], {}
        seq = [0]
        end = time.monotonic() + seconds

        async def pace(c, phase):
            await asyncio.sleep(phase / per)
            t_next = time.monotonic()
            while t_next < end:
                now = time.monotonic()
                if now < t_next:
                    await asyncio.sleep(t_next - now)
                seq[0] += 1
                s = seq[0]
                self.sent_at[s] = time.monotonic()
                if self.proto == "cable":
                    c.send(0x1, json.dumps({"command": "message", "identifier": self.identifier,
                                            "data": json.dumps({"action": "echo", "seq": s})}).encode())
                else:
                    c.send(0x1, b"seq:%d" % s)
                t_next += 1 / per

        await asyncio.gather(*(pace(c, random.random()) for c in use))
        deadline = time.monotonic() + 5
        while self.sent_at and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return seq[0], len(self.rtt), sorted(self.rtt)

    def close_all(self):
        for c in self.conns:
            if not c.closed:
                c.transport.abort()
        self.conns = []


# ---- measuring the server side ---------------------------------------------------------------

def tree(root):
    """PIDs of root and its descendants."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    st = f.read()
                ppid = int(st[st.rindex(")") + 2:].split()[1])
                kids.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError):
                pass
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return "?"


def memory(pid):
    """(rss_bytes, pss_bytes) of one process (smaps_rollup)."""
    rss = pss = 0
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
    except OSError:
        pass
    return rss, pss


def cpu_seconds(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
        fields = st[st.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return 0.0


def steal_sample():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v), v[7] if len(v) > 7 else 0, v[3] + v[4]


def steal_pct(a, b):
    dt = b[0] - a[0]
    return 100.0 * (b[1] - a[1]) / dt if dt else 0.0


def busy_pct(a, b):
    """The whole machine's busy share (not idle, not iowait) between two steal_sample()s: what
    the server and the client used plus what everything else on the machine did."""
    dt = b[0] - a[0]
    return 100.0 * (dt - (b[2] - a[2])) / dt if dt else 0.0


async def _main():
    url, n = sys.argv[1], int(sys.argv[2])
    proto = sys.argv[3] if len(sys.argv) > 3 else "raw"
    c = Client(url, proto)
    secs = await c.open(n)
    print("opened %d in %.2f s" % (n, secs), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    c.close_all()


if __name__ == "__main__":
    asyncio.run(_main())
