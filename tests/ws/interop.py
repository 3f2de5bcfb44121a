#!/usr/bin/python3
"""The WebSocket codec (server/proto/ws.h) against an independent client: python3-websockets 10.4.

Runs server/tests/proto/ws_echo.c (path of the binary as argv[1]) and talks to it with the
websockets client (handshake, permessage-deflate as the library offers it, masking,
fragmentation, ping/pong, close) and with raw sockets for what a correct client never sends
(each refusal must come with its exact status or close code, and the next connection must
still be served). Needs Debian's python3-websockets, so it runs under /usr/bin/python3.
Exits non-zero on the first failed check, naming it.
"""
import asyncio
import os
import socket
import struct
import subprocess
import sys
import zlib

import websockets

KEY = b"dGhlIHNhbXBsZSBub25jZQ=="
checks = 0


def check(cond, what):
    global checks
    if not cond:
        print("FAIL: " + what, file=sys.stderr)
        sys.exit(1)
    checks += 1


async def client_cases(port):
    base = "ws://127.0.0.1:%d" % port
    # RFC 7692: the library offers permessage-deflate with client_max_window_bits.
    async with websockets.connect(base + "/") as ws:
        ext = ws.response_headers.get("Sec-WebSocket-Extensions", "")
        check(ext.startswith("permessage-deflate"), "deflate agreed, got %r" % ext)
        await ws.send("Hello, κόσμε")
        check(await ws.recv() == "Hello, κόσμε", "text echo over deflate")
        await ws.send(bytes(range(256)) * 4)
        check(await ws.recv() == bytes(range(256)) * 4, "binary echo over deflate")
        big = ("abcdefgh" * 131071)  # just under 1 MiB
        await ws.send(big)
        check(await ws.recv() == big, "1 MiB - 8 text echo")
        await ws.send(iter(["frag", "ment", "ed"]))  # a fragmented message
        check(await ws.recv() == "fragmented", "fragmented message echo")
        for i in range(50):  # context takeover across many messages
            await ws.send("message %d %s" % (i, "x" * i))
            check(await ws.recv() == "message %d %s" % (i, "x" * i), "message %d" % i)
        pong = await ws.ping(b"client-ping")
        await asyncio.wait_for(pong, 5)
        check(True, "pong to the client's ping")
        await ws.send("ping")  # the server pings; the library answers; the server reports
        check(await ws.recv() == "pong:srv", "the client's pong reaches the server")
        await ws.close(1000, "done")
        check(ws.close_code == 1000, "close 1000 echoed, got %r" % ws.close_code)

    async with websockets.connect(base + "/", compression=None) as ws:
        check("Sec-WebSocket-Extensions" not in ws.response_headers, "no extension when not offered")
        await ws.send(b"\x00" * 70000)
        check(await ws.recv() == b"\x00" * 70000, "64-bit length echo without deflate")
        await ws.send("close:4001")
        try:
            await ws.recv()
            check(False, "expected a close")
        except websockets.ConnectionClosed as e:
            check(e.code == 4001, "server-initiated close 4001, got %r" % e.code)

    async with websockets.connect(base + "/nodeflate") as ws:
        check("Sec-WebSocket-Extensions" not in ws.response_headers, "deflate refused by config")
        await ws.send("plain")
        check(await ws.recv() == "plain", "echo without deflate")

    async with websockets.connect(base + "/reset") as ws:
        ext = ws.response_headers.get("Sec-WebSocket-Extensions", "")
        check("server_no_context_takeover" in ext and "client_no_context_takeover" in ext,
              "no context takeover both ways, got %r" % ext)
        for i in range(20):
            await ws.send("reset %d " % i + "y" * 200)
            check(await ws.recv() == "reset %d " % i + "y" * 200, "no-takeover message %d" % i)

    async with websockets.connect(base + "/small", max_size=None) as ws:
        await ws.send("z" * 1001)
        try:
            await ws.recv()
            check(False, "expected 1009")
        except websockets.ConnectionClosed as e:
            check(e.code == 1009, "message over the limit: 1009, got %r" % e.code)


def raw_connect(port, headers, path="/"):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    req = "GET %s HTTP/1.1\r\nHost: x\r\n" % path + "".join("%s: %s\r\n" % h for h in headers) + "\r\n"
    s.sendall(req.encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return s, head.decode(), rest


GOOD = [("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Key", KEY.decode()),
        ("Sec-WebSocket-Version", "13")]


def frame(b0, payload, masked=True):
    key = b"\x11\x22\x33\x44"
    n = len(payload)
    mbit = 0x80 if masked else 0
    if n < 126:
        head = bytes([b0, mbit | n])
    elif n <= 0xFFFF:
        head = bytes([b0, mbit | 126]) + struct.pack(">H", n)
    else:
        head = bytes([b0, mbit | 127]) + struct.pack(">Q", n)
    if not masked:
        return head + payload
    return head + key + bytes(c ^ key[i & 3] for i, c in enumerate(payload))


def read_close(s, rest):
    data = rest
    s.settimeout(5)
    while True:
        # skip to the first Close frame (0x88)
        while len(data) >= 2:
            n = data[1] & 0x7F
            hl = 2 + (2 if n == 126 else 8 if n == 127 else 0)
            if n == 126 and len(data) >= 4:
                n = struct.unpack(">H", data[2:4])[0]
            if len(data) < hl + n:
                break
            if data[0] == 0x88:
                body = data[hl:hl + n]
                return struct.unpack(">H", body[:2])[0] if len(body) >= 2 else 1005
            data = data[hl + n:]
        chunk = s.recv(65536)
        if not chunk:
            return None
        data += chunk


def raw_cases(port):
    s, head, _ = raw_connect(port, GOOD)
    check(head.startswith("HTTP/1.1 101") and "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in head,
          "RFC 6455 §1.3 accept value, got %r" % head)
    s.close()
    s, head, _ = raw_connect(port, GOOD[:3] + [("Sec-WebSocket-Version", "8")])
    check(head.startswith("HTTP/1.1 426") and "Sec-WebSocket-Version: 13" in head, "§4.4 426, got %r" % head)
    s.close()
    s, head, _ = raw_connect(port, GOOD[:2] + [("Sec-WebSocket-Key", "short"), GOOD[3]])
    check(head.startswith("HTTP/1.1 400"), "§4.2.1 bad key 400, got %r" % head)
    s.close()
    s, head, _ = raw_connect(port, [("Upgrade", "websocket"), ("Connection", "keep-alive")] + GOOD[2:])
    check(head.startswith("HTTP/1.1 400"), "§4.2.1 Connection without upgrade 400, got %r" % head)
    s.close()
    cases = [
        ("§5.1 unmasked frame", frame(0x81, b"hi", masked=False), 1002, "/"),
        ("§5.2 RSV2", frame(0xA1, b"hi"), 1002, "/"),
        ("§5.2 reserved opcode", frame(0x83, b""), 1002, "/"),
        ("§5.5 ping over 125", frame(0x89, b"p" * 126), 1002, "/"),
        ("§5.5 fragmented ping", frame(0x09, b"p"), 1002, "/"),
        ("§5.4 continuation without start", frame(0x80, b"x"), 1002, "/"),
        ("§5.4 interleaved data frames", frame(0x01, b"a") + frame(0x81, b"b"), 1002, "/"),
        ("§8.1 invalid UTF-8", frame(0x81, b"\xed\xa0\x80"), 1007, "/"),
        ("§8.1 invalid UTF-8 across fragments", frame(0x01, b"\xf0\x90") + frame(0x80, b"\x80\x28"), 1007, "/"),
        ("§7.4 close code 1005", frame(0x88, b"\x03\xed"), 1002, "/"),
        ("§5.5.1 close reason not UTF-8", frame(0x88, b"\x03\xe8\xff"), 1007, "/"),
        ("§10.4 message over the limit", frame(0x82, b"q" * 1001), 1009, "/small"),
    ]
    # RFC 7692 §8.1: a deflate bomb (16 MiB of zeros in about 16 KiB) against the 1 MiB limit.
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    bomb = z.compress(b"\0" * (16 << 20)) + z.flush(zlib.Z_SYNC_FLUSH)
    ext = [("Sec-WebSocket-Extensions", "permessage-deflate")]
    cases.append(("RFC 7692 §8.1 deflate bomb", frame(0xC2, bomb[:-4]), 1009, "/"))
    cases.append(("RFC 7692 §6 RSV1 without deflate agreed", frame(0xC1, b"x"), 1002, "/nodeflate"))
    for name, data, code, path in cases:
        s, head, rest = raw_connect(port, GOOD + (ext if "7692" in name else []), path)
        check(head.startswith("HTTP/1.1 101"), name + ": handshake")
        s.sendall(data)
        got = read_close(s, rest)
        check(got == code, "%s: close %r, want %d" % (name, got, code))
        s.close()
    # and the next connection is still served
    s, head, rest = raw_connect(port, GOOD)
    s.sendall(frame(0x81, b"still here"))
    s.settimeout(5)
    data = rest
    while len(data) < 12:
        data += s.recv(4096)
    check(data[:12] == b"\x81\x0astill here", "served after the refusals, got %r" % data[:12])
    s.close()


def main():
    srv = subprocess.Popen([sys.argv[1]], stdout=subprocess.PIPE, text=True)
    try:
        line = srv.stdout.readline()
        check(line.startswith("port "), "ws-echo started, got %r" % line)
        port = int(line.split()[1])
        asyncio.run(client_cases(port))
        raw_cases(port)
    finally:
        srv.terminate()
        srv.wait(5)
    print("ws_interop: %d checks passed (websockets %s)" % (checks, websockets.__version__))


if __name__ == "__main__":
    main()
