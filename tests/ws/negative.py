#!/usr/bin/python3
"""WebSocket negative suite: malformed and abusive client input against a WebSocket echo target.

    tests/ws/negative.py URL [--max-message N] [--nodeflate-url URL] [--no-reason]
                             [--skip-handshake] [--timers PING,CLOSE] [--close-cmd FMT]
                             [--h2] [--dribble] [CASE-SUBSTRING ...]
    tests/ws/negative.py --ws-echo PATH/TO/ws-echo [CASE-SUBSTRING ...]

URL is a ws:// URL of an echo endpoint (every message sent comes back unchanged), e.g. the
codec's test server `ws-echo` (ws://127.0.0.1:PORT/) or the real server with a Ruby echo app.
--max-message is the endpoint's maximum message size (default 1 MiB, the codec's default).
--nodeflate-url names an endpoint that refuses permessage-deflate even when the client offers
it (ws-echo's /nodeflate); without it, that one case is not run and the summary says so.
--no-reason checks close codes only (for a target that sends other reason texts).
--skip-handshake leaves out the opening-handshake cases.
--timers PING,CLOSE (seconds: the target's ping interval and close timeout, e.g. the server's
-ws-ping-interval 1s -ws-close-timeout 1s) adds the "(timer)" cases: a peer that answers no
ping is disconnected, one that answers stays, one that never answers the server's Close is
disconnected. The last one makes the target close with 4001 by sending the text message
--close-cmd (default "close %d", tests/apps/websocket's /echo; ws-echo's is "close:%d").
--h2 runs the frame cases over HTTP/2 instead (RFC 8441: prior-knowledge h2c, one extended
CONNECT stream per WebSocket; the server's END_STREAM or RST_STREAM takes the place of its TCP
close; needs Debian's python3-h2); the HTTP/1.1 handshake cases are then skipped.
--dribble sends the first 40 bytes of every case's frames one byte per TCP segment (2 ms apart)
and the rest in one write: the reaction must not depend on how the stream is split.
--ws-echo starts the codec's test server (server/tests/proto/ws_echo.c), runs every case against
ws://127.0.0.1:PORT/ with --nodeflate-url .../nodeflate, whole and then with --dribble, and
stops it (ctest ws_negative).

Each case opens a TCP connection, does the opening handshake by hand (raw sockets, no library
that would refuse or repair what we send), sends hand-built frames, and asserts the exact
reaction within a timeout: the HTTP status of a refused handshake, or the server's Close frame
(code and reason text, docs/WEBSOCKET.md "Close codes of a failed connection") followed by the
server closing the TCP connection (RFC 6455 §7.1.1: the server closes first). After every case
a NEW connection must be served: an echo round trip of a text message. Cases are named by the
section of RFC 6455 (or RFC 7692, permessage-deflate) they break.

Prints one line per case and then `N passed, N failed` alone on a line; exits 1 on any failure.
Needs only the standard library for HTTP/1.1 (no python3-websockets: it would refuse to send
these frames); --h2 needs python3-h2.
"""
import base64
import hashlib
import os
import socket
import struct
import sys
import time
import urllib.parse
import zlib

WAIT = 5.0  # seconds a reaction may take
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def parse_args(argv):
    opts = {"max": 1 << 20, "nodeflate": None, "reason": True, "handshake": True, "filters": [],
            "dribble": False, "timers": None, "close_cmd": "close %d", "h2": False}
    url = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--max-message":
            opts["max"] = int(argv[i + 1])
            i += 1
        elif a == "--nodeflate-url":
            opts["nodeflate"] = argv[i + 1]
            i += 1
        elif a == "--ws-echo":
            opts["ws_echo"] = argv[i + 1]
            i += 1
        elif a == "--timers":
            ping, close = argv[i + 1].split(",")
            opts["timers"] = (float(ping), float(close))
            i += 1
        elif a == "--close-cmd":
            opts["close_cmd"] = argv[i + 1]
            i += 1
        elif a == "--h2":
            opts["h2"] = True
        elif a == "--dribble":
            opts["dribble"] = True
        elif a == "--no-reason":
            opts["reason"] = False
        elif a == "--skip-handshake":
            opts["handshake"] = False
        elif url is None and a.startswith("ws://"):
            url = a
        else:
            opts["filters"].append(a)
        i += 1
    if url is None and "ws_echo" not in opts:
        sys.exit("usage: negative.py ws://HOST:PORT/PATH [options] [CASE-SUBSTRING ...]")
    return url, opts


def split_url(url):
    u = urllib.parse.urlsplit(url)
    if u.scheme != "ws" or not u.hostname or not u.port:
        sys.exit("negative.py: want ws://HOST:PORT/PATH, got %r" % url)
    path = u.path or "/"
    if u.query:
        path += "?" + u.query
    return u.hostname, u.port, path


class Failed(Exception):
    pass


# ---- the wire by hand -------------------------------------------------------------------

def frame(b0, payload=b"", masked=True, length=None, key=b"\x37\xfa\x21\x3d"):
    """One client frame: first byte b0 (FIN, RSV1-3, opcode), payload masked with key unless
    masked is False. length (an int, or ("16", n) / ("64", n)) overrides the length field to
    write non-minimal or lying encodings; the payload bytes are still what is given."""
    n = len(payload)
    mbit = 0x80 if masked else 0
    form, value = ("auto", n) if length is None else length if isinstance(length, tuple) else ("auto", length)
    if form == "16" or (form == "auto" and 126 <= value <= 0xFFFF):
        head = bytes([b0, mbit | 126]) + struct.pack(">H", value)
    elif form == "64" or (form == "auto" and value > 0xFFFF):
        head = bytes([b0, mbit | 127]) + struct.pack(">Q", value)
    else:
        head = bytes([b0, mbit | value])
    if not masked:
        return head + payload
    return head + key + bytes(c ^ key[i & 3] for i, c in enumerate(payload))


def close_body(code, reason=b""):
    return struct.pack(">H", code) + reason


class Conn:
    def __init__(self, host, port):
        self.s = socket.create_connection((host, port), timeout=WAIT)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def send(self, data):
        try:
            self.s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may already have failed the connection; its Close is read next

    def send_dribble(self, data, head=40):
        for i in range(min(head, len(data))):
            self.send(data[i:i + 1])
            time.sleep(0.002)
        if len(data) > head:
            self.send(data[head:])

    def fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout()
        self.s.settimeout(left)
        try:
            chunk = self.s.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if chunk:
            self.buf += chunk
        return chunk

    def handshake(self, path, headers, method="GET", version="HTTP/1.1", host_field=True):
        """Sends a request; returns (status, {lower name: value}). Bytes after the head stay in buf."""
        lines = ["%s %s %s" % (method, path, version)]
        if host_field:
            lines.append("Host: 127.0.0.1")
        lines += ["%s: %s" % h for h in headers]
        self.send(("\r\n".join(lines) + "\r\n\r\n").encode())
        deadline = time.monotonic() + WAIT
        while b"\r\n\r\n" not in self.buf:
            if not self.fill(deadline):
                raise Failed("connection closed before a response head (got %r)" % self.buf[:200])
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) < 2 or not parts[1].isdigit():
            raise Failed("bad status line %r" % lines[0])
        fields = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            k = k.strip().lower()
            fields[k] = (fields[k] + ", " if k in fields else "") + v.strip()
        return int(parts[1]), fields

    def next_frame(self, deadline):
        """(b0, payload) of the next server frame, or None at EOF."""
        while True:
            if len(self.buf) >= 2:
                b1 = self.buf[1]
                if b1 & 0x80:
                    raise Failed("server frame is masked (RFC 6455 §5.1)")
                n, hl = b1 & 0x7F, 2
                if n == 126 and len(self.buf) >= 4:
                    n, hl = struct.unpack(">H", self.buf[2:4])[0], 4
                elif n == 127 and len(self.buf) >= 10:
                    n, hl = struct.unpack(">Q", self.buf[2:10])[0], 10
                if (b1 & 0x7F) < 126 or hl > 2:
                    if len(self.buf) >= hl + n:
                        b0, payload = self.buf[0], self.buf[hl:hl + n]
                        self.buf = self.buf[hl + n:]
                        return b0, payload
            if not self.fill(deadline):
                if self.buf:
                    raise Failed("connection closed inside a server frame (%d bytes left)" % len(self.buf))
                return None

    def wait_eof(self, deadline):
        """True when the server closes the TCP connection (bytes before that are dropped)."""
        try:
            while self.fill(deadline):
                self.buf = b""
            return True
        except socket.timeout:
            return False

    def close(self):
        self.s.close()


class H2Tunnel(Conn):
    """A WebSocket over one HTTP/2 stream (RFC 8441): prior-knowledge h2c, extended CONNECT with
    :protocol websocket, then the WebSocket bytes in DATA frames both ways (python3-h2 for the
    HTTP/2 side; Debian's, so /usr/bin/python3). The server's END_STREAM (or RST_STREAM) plays
    the part the TCP close plays on HTTP/1.1 (RFC 8441 §5)."""

    def __init__(self, host, port, path, deflate):
        import h2.config
        import h2.connection
        import h2.events
        import h2.exceptions
        self.ev, self.exc = h2.events, h2.exceptions
        self.s = socket.create_connection((host, port), timeout=WAIT)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
        self.h2.initiate_connection()
        self.buf = b""
        self.done = False
        self.status = None
        self.fields = {}
        self.settings = {}
        self.flush()
        deadline = time.monotonic() + WAIT
        while 8 not in self.settings:  # SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 8441 §3)
            self.read(deadline)
        if self.settings[8] != 1:
            raise Failed("the server's SETTINGS_ENABLE_CONNECT_PROTOCOL is %r" % self.settings[8])
        self.sid = self.h2.get_next_available_stream_id()
        headers = [(b":method", b"CONNECT"), (b":protocol", b"websocket"), (b":scheme", b"http"),
                   (b":path", path.encode()), (b":authority", ("%s:%d" % (host, port)).encode()),
                   (b"sec-websocket-version", b"13")]
        if deflate:
            headers.append((b"sec-websocket-extensions", b"permessage-deflate"))
        self.h2.send_headers(self.sid, headers)
        self.flush()
        while self.status is None and not self.done:
            self.read(deadline)

    def flush(self):
        data = self.h2.data_to_send()
        if data:
            self.s.sendall(data)

    def read(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout()
        self.s.settimeout(left)
        try:
            data = self.s.recv(65536)
        except ConnectionResetError:
            data = b""
        if not data:
            self.done = True
            return
        for e in self.h2.receive_data(data):
            if isinstance(e, self.ev.ConnectionTerminated):
                self.done = True
            elif isinstance(e, self.ev.RemoteSettingsChanged):
                for k, v in e.changed_settings.items():
                    self.settings[int(k)] = v.new_value
            elif getattr(e, "stream_id", None) != getattr(self, "sid", -1):
                continue
            elif isinstance(e, self.ev.ResponseReceived):
                for k, v in e.headers:
                    if k == b":status":
                        self.status = int(v)
                    else:
                        self.fields[k.decode()] = v.decode()
            elif isinstance(e, self.ev.DataReceived):
                self.buf += e.data
                try:
                    self.h2.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                except self.exc.StreamClosedError:
                    pass
            elif isinstance(e, (self.ev.StreamEnded, self.ev.StreamReset)):
                self.done = True
        self.flush()

    def fill(self, deadline):
        n0 = len(self.buf)
        while len(self.buf) == n0 and not self.done:
            self.read(deadline)
        return self.buf[n0:]

    def send(self, data):
        view = memoryview(data)
        while view and not self.done:
            try:
                room = min(self.h2.local_flow_control_window(self.sid), self.h2.max_outbound_frame_size)
                if room <= 0:
                    self.read(time.monotonic() + WAIT)
                    continue
                self.h2.send_data(self.sid, bytes(view[:room]))
            except (self.exc.StreamClosedError, self.exc.ProtocolError):
                return
            view = view[room:]
            try:
                self.flush()
            except (BrokenPipeError, ConnectionResetError):
                return


TRANSPORT = ["h1"]  # or "h2": --h2 runs the frame cases over RFC 8441 tunnels


def accept_value(key):
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


def new_key():
    return base64.b64encode(os.urandom(16)).decode()


def upgrade_fields(key=None, extensions=None):
    key = key or new_key()
    f = [("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Key", key),
         ("Sec-WebSocket-Version", "13")]
    if extensions:
        f.append(("Sec-WebSocket-Extensions", extensions))
    return f


def open_ws(target, deflate=False, url=None):
    host, port, path = split_url(url) if url else target
    if TRANSPORT[0] == "h2":
        c = H2Tunnel(host, port, path, deflate)
        if c.status != 200:
            raise Failed("extended CONNECT: status %r, want 200" % c.status)
        agreed = c.fields.get("sec-websocket-extensions", "").startswith("permessage-deflate")
        if deflate and not agreed and url is None:
            raise Failed("permessage-deflate offered and not agreed (%r)" % c.fields.get("sec-websocket-extensions"))
        return c
    c = Conn(host, port)
    key = new_key()
    status, fields = c.handshake(path, upgrade_fields(key, "permessage-deflate" if deflate else None))
    if status != 101:
        raise Failed("handshake: status %d, want 101" % status)
    if fields.get("sec-websocket-accept") != accept_value(key):
        raise Failed("handshake: Sec-WebSocket-Accept %r, want %r" %
                     (fields.get("sec-websocket-accept"), accept_value(key)))
    agreed = fields.get("sec-websocket-extensions", "").startswith("permessage-deflate")
    if deflate and not agreed and url is None:
        raise Failed("permessage-deflate offered and not agreed (%r)" % fields.get("sec-websocket-extensions"))
    return c


# ---- reactions ----------------------------------------------------------------------------

def expect_close(c, code, reason, check_reason):
    """Reads server frames up to a Close; asserts its code (and reason), then that the server
    closes the TCP connection."""
    deadline = time.monotonic() + WAIT
    seen = []
    while True:
        try:
            f = c.next_frame(deadline)
        except socket.timeout:
            raise Failed("no Close within %.0f s (frames seen: %s)" % (WAIT, seen or "none"))
        if f is None:
            raise Failed("TCP closed without a Close frame (frames seen: %s)" % (seen or "none"))
        b0, payload = f
        if b0 & 0x0F != 0x8:
            seen.append("op %x len %d" % (b0 & 0x0F, len(payload)))
            continue
        if b0 != 0x88:
            raise Failed("Close frame first byte %#x, want 0x88" % b0)
        if len(payload) < 2:
            raise Failed("Close without a code (body %r), want %d" % (payload, code))
        got = struct.unpack(">H", payload[:2])[0]
        got_reason = payload[2:].decode("utf-8", "replace")
        if got != code:
            raise Failed("close code %d (%r), want %d" % (got, got_reason, code))
        if check_reason and reason is not None and got_reason != reason:
            raise Failed("close %d reason %r, want %r" % (got, got_reason, reason))
        break
    if not c.wait_eof(time.monotonic() + WAIT):
        raise Failed("Close %d sent but the server did not close the TCP connection" % code)
    return None


def echo_round_trip(target, text=b"still served"):
    c = open_ws(target)
    try:
        c.send(frame(0x81, text))
        deadline = time.monotonic() + WAIT
        while True:
            f = c.next_frame(deadline)
            if f is None:
                raise Failed("next connection: closed before the echo")
            if f[0] & 0x0F in (0x9, 0xA):
                continue
            if f != (0x81, text):
                raise Failed("next connection: echo %r, want %r" % (f, (0x81, text)))
            break
        c.send(frame(0x88, close_body(1000)))
        f = c.next_frame(time.monotonic() + WAIT)
        if f is None or f[0] != 0x88 or f[1][:2] != b"\x03\xe8":
            raise Failed("next connection: close 1000 not echoed (got %r)" % (f,))
    finally:
        c.close()


# ---- the cases ----------------------------------------------------------------------------

CASES = []  # (name, kind, fn): kind "frame" or "handshake"


def frames_case(name, data, code, reason, deflate=False, url_opt=None):
    """A case that sends `data` (bytes, or a function of the options returning bytes) after a
    good handshake and wants a Close with code and reason."""
    def run(target, opts):
        url = opts[url_opt] if url_opt else None
        c = open_ws(target, deflate=deflate or bool(url_opt), url=url)
        try:
            payload = data(opts) if callable(data) else data
            if opts["dribble"]:
                c.send_dribble(payload)
            else:
                c.send(payload)
            return expect_close(c, code, reason, opts["reason"])
        finally:
            c.close()
    CASES.append((name, "frame", run, url_opt))


def handshake_case(name, status, headers=None, method="GET", version="HTTP/1.1", must_have=None):
    def run(target, opts):
        host, port, path = target
        c = Conn(host, port)
        try:
            got, fields = c.handshake(path, headers(new_key()) if callable(headers) else headers,
                                      method=method, version=version)
            if got != status:
                raise Failed("status %d, want %d" % (got, status))
            for k, v in (must_have or {}).items():
                if fields.get(k) != v:
                    raise Failed("%s: %r, want %r" % (k, fields.get(k), v))
            if "sec-websocket-accept" in fields:
                raise Failed("refused handshake carries Sec-WebSocket-Accept")
        finally:
            c.close()
    CASES.append((name, "handshake", run, None))


P = "RFC 6455 "
D = "RFC 7692 "

# §5.1: a client masks every frame.
frames_case(P + "§5.1 unmasked text frame", frame(0x81, b"hi", masked=False), 1002, "unmasked client frame")
frames_case(P + "§5.1 unmasked binary frame, empty", frame(0x82, b"", masked=False), 1002, "unmasked client frame")
frames_case(P + "§5.1 unmasked ping", frame(0x89, b"p", masked=False), 1002, "unmasked client frame")
frames_case(P + "§5.1 unmasked close", frame(0x88, close_body(1000), masked=False), 1002, "unmasked client frame")
frames_case(P + "§5.1 unmasked frame after a good one",
            frame(0x01, b"ab") + frame(0x80, b"cd", masked=False), 1002, "unmasked client frame")

# §5.2: reserved bits and opcodes.
frames_case(P + "§5.2 RSV1 on text without an extension", frame(0xC1, b"x"), 1002, "RSV1 set without an extension")
frames_case(P + "§5.2 RSV2 on text", frame(0xA1, b"x"), 1002, "RSV2 or RSV3 set")
frames_case(P + "§5.2 RSV3 on binary", frame(0x92, b"x"), 1002, "RSV2 or RSV3 set")
frames_case(P + "§5.2 RSV2+RSV3 on ping", frame(0xB9, b""), 1002, "RSV2 or RSV3 set")
frames_case(P + "§5.2 reserved opcode 0x3", frame(0x83, b""), 1002, "reserved opcode")
frames_case(P + "§5.2 reserved opcode 0x7", frame(0x87, b"data"), 1002, "reserved opcode")
frames_case(P + "§5.2 reserved opcode 0xB", frame(0x8B, b""), 1002, "reserved opcode")
frames_case(P + "§5.2 reserved opcode 0xF without FIN", frame(0x0F, b"x"), 1002, "reserved opcode")

# §5.2: the payload length in the fewest bytes, and the 64-bit form's MSB clear.
frames_case(P + "§5.2 16-bit length 125", frame(0x82, b"a" * 125, length=("16", 125)), 1002,
            "16-bit length under 126")
frames_case(P + "§5.2 16-bit length 0", frame(0x82, b"", length=("16", 0)), 1002, "16-bit length under 126")
frames_case(P + "§5.2 64-bit length 200", frame(0x82, b"a" * 200, length=("64", 200)), 1002,
            "64-bit length under 65536")
frames_case(P + "§5.2 64-bit length 65535", frame(0x82, b"", length=("64", 65535)), 1002,
            "64-bit length under 65536")
frames_case(P + "§5.2 64-bit length with its MSB set", frame(0x82, b"", length=("64", 1 << 63)), 1002,
            "64-bit length with its MSB set")
frames_case(P + "§5.2 64-bit length all ones", frame(0x82, b"", length=("64", (1 << 64) - 1)), 1002,
            "64-bit length with its MSB set")

# §5.4: fragmentation.
frames_case(P + "§5.4 continuation without start", frame(0x80, b"x"), 1002, "continuation without start")
frames_case(P + "§5.4 continuation after a complete message",
            frame(0x81, b"done") + frame(0x80, b"more"), 1002, "continuation without start")
frames_case(P + "§5.4 text inside a fragmented text", frame(0x01, b"a") + frame(0x81, b"b"), 1002,
            "new message inside a fragmented one")
frames_case(P + "§5.4 binary inside a fragmented text", frame(0x01, b"a") + frame(0x02, b"b"), 1002,
            "new message inside a fragmented one")
frames_case(P + "§5.4 text inside a fragmented binary after a ping",
            frame(0x02, b"a") + frame(0x89, b"p") + frame(0x81, b"b"), 1002,
            "new message inside a fragmented one")

# §5.5: control frames are at most 125 bytes and never fragmented.
frames_case(P + "§5.5 ping of 126 bytes", frame(0x89, b"p" * 126), 1002, "control frame over 125")
frames_case(P + "§5.5 close of 126 bytes", frame(0x88, close_body(1000, b"r" * 124)), 1002,
            "control frame over 125")
frames_case(P + "§5.5 pong with a 64-bit length", frame(0x8A, b"", length=("64", 70000)), 1002,
            "control frame over 125")
frames_case(P + "§5.5 fragmented ping", frame(0x09, b"p"), 1002, "fragmented control frame")
frames_case(P + "§5.5 fragmented close", frame(0x08, close_body(1000)), 1002, "fragmented control frame")
frames_case(P + "§5.5 fragmented pong inside a fragmented text",
            frame(0x01, b"a") + frame(0x0A, b""), 1002, "fragmented control frame")

# §5.5.1 / §7.4: Close bodies.
frames_case(P + "§5.5.1 close body of one byte", frame(0x88, b"\x03"), 1002, "close body of one byte")
for bad in (0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535):
    frames_case(P + "§7.4 close code %d" % bad, frame(0x88, close_body(bad)), 1002, "invalid close code")
frames_case(P + "§5.5.1 close reason not UTF-8", frame(0x88, close_body(1000, b"ok\xff")), 1007,
            "close reason is not UTF-8")
frames_case(P + "§5.5.1 close reason with a cut sequence", frame(0x88, close_body(1001, b"bye \xe2\x82")), 1007,
            "close reason is not UTF-8")

# §8.1: text is UTF-8 (checked as the bytes arrive, across fragments).
frames_case(P + "§8.1 text with a surrogate", frame(0x81, b"\xed\xa0\x80"), 1007, "text is not UTF-8")
frames_case(P + "§8.1 text with an overlong NUL", frame(0x81, b"a\xc0\x80"), 1007, "text is not UTF-8")
frames_case(P + "§8.1 text with byte 0xFF", frame(0x81, b"\xff"), 1007, "text is not UTF-8")
frames_case(P + "§8.1 text above U+10FFFF", frame(0x81, b"\xf4\x90\x80\x80"), 1007, "text is not UTF-8")
frames_case(P + "§8.1 text ending inside a sequence", frame(0x81, b"euro \xe2\x82"), 1007, "text is not UTF-8")
frames_case(P + "§8.1 bad UTF-8 split across fragments",
            frame(0x01, b"\xf0\x90") + frame(0x80, b"\x80\x28"), 1007, "text is not UTF-8")
frames_case(P + "§8.1 fragmented text ending inside a sequence",
            frame(0x01, b"ok \xf0") + frame(0x00, b"\x9f") + frame(0x80, b"\x98"), 1007, "text is not UTF-8")
frames_case(P + "§8.1 bad UTF-8 fails before FIN", frame(0x01, b"\xc3\x28"), 1007, "text is not UTF-8")

# §10.4: the maximum message size (checked at the frame header: no payload is sent).
frames_case(P + "§10.4 frame longer than the message limit",
            lambda o: frame(0x82, b"", length=o["max"] + 1), 1009, "message too big")
frames_case(P + "§10.4 fragments adding up past the message limit",
            lambda o: frame(0x02, b"f" * (o["max"] // 2 + 1)) + frame(0x80, b"", length=o["max"] // 2 + 1),
            1009, "message too big")
frames_case(P + "§10.4 64-bit length of 2^62", frame(0x82, b"", length=("64", 1 << 62)), 1009, "message too big")


# RFC 7692 (permessage-deflate, offered by the client and agreed).
def deflate_raw(data, level=6):
    z = zlib.compressobj(level, zlib.DEFLATED, -15)
    out = z.compress(data) + z.flush(zlib.Z_SYNC_FLUSH)
    assert out.endswith(b"\x00\x00\xff\xff")
    return out[:-4]


def bomb(o):
    """16x the message limit (at least 16 MiB) of zeros: about 1/1000 of that compressed."""
    return frame(0xC2, deflate_raw(b"\0" * max(16 << 20, 16 * o["max"]), 9))


frames_case(D + "§8.1 deflate bomb", bomb, 1009, "message too big", deflate=True)
frames_case(D + "§8.1 deflate bomb split into fragments",
            lambda o: (lambda b: frame(0x42, b[:len(b) // 2]) + frame(0x80, b[len(b) // 2:]))(
                deflate_raw(b"\0" * max(16 << 20, 16 * o["max"]), 9)),
            1009, "message too big", deflate=True)
frames_case(D + "§8.1 compressed frame longer than the compressed limit",
            lambda o: frame(0xC2, b"", length=o["max"] + o["max"] // 8 + 1025), 1009,
            "compressed message too big", deflate=True)
frames_case(D + "§7.2.2 compressed data that is not DEFLATE", frame(0xC1, b"\xff\xff\xff\xff\xff\xff"), 1007,
            "invalid compressed data", deflate=True)
frames_case(D + "§7.2.3.6 empty compressed payload", frame(0xC1, b""), 1007, "invalid compressed data",
            deflate=True)
frames_case(D + "§6.1 RSV1 on a ping", frame(0xC9, b"p"), 1002, "RSV1 on a control frame", deflate=True)
frames_case(D + "§6.1 RSV1 on a close", frame(0xC8, close_body(1000)), 1002, "RSV1 on a control frame",
            deflate=True)
frames_case(D + "§6.1 RSV1 on a continuation",
            lambda o: frame(0x41, deflate_raw(b"hello ")) + frame(0xC0, deflate_raw(b"world")), 1002,
            "RSV1 on a continuation frame", deflate=True)
frames_case(D + "§8.1 compressed text that inflates to bad UTF-8", frame(0xC1, deflate_raw(b"caf\xe9!")), 1007,
            "text is not UTF-8", deflate=True)
frames_case(D + "§5 RSV1 when the offer was declined", frame(0xC1, deflate_raw(b"hi")), 1002,
            "RSV1 set without an extension", url_opt="nodeflate")

# The opening handshake (RFC 6455 §4.1, §4.2.1, §4.4; §9.1 for the extension grammar).
handshake_case(P + "§4.2.1 no Sec-WebSocket-Key", 400,
               [("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Version", "13")])
handshake_case(P + "§4.2.1 Sec-WebSocket-Key not 16 bytes", 400,
               lambda k: upgrade_fields(key=base64.b64encode(b"fifteen bytes!!").decode()))
handshake_case(P + "§4.2.1 Sec-WebSocket-Key not base64", 400,
               lambda k: upgrade_fields(key="!!!!!!!!!!!!!!!!!!!!!!=="))
handshake_case(P + "§4.2.1 two Sec-WebSocket-Key fields", 400,
               lambda k: upgrade_fields(k) + [("Sec-WebSocket-Key", new_key())])
handshake_case(P + "§4.4 version 8: 426 naming 13", 426,
               lambda k: upgrade_fields(k)[:3] + [("Sec-WebSocket-Version", "8")],
               must_have={"sec-websocket-version": "13"})
handshake_case(P + "§4.4 no Sec-WebSocket-Version: 426 naming 13", 426,
               lambda k: upgrade_fields(k)[:3], must_have={"sec-websocket-version": "13"})
handshake_case(P + "§4.2.1 two Sec-WebSocket-Version fields", 400,
               lambda k: upgrade_fields(k) + [("Sec-WebSocket-Version", "13")])
handshake_case(P + "§4.1 method POST", 400, lambda k: upgrade_fields(k) + [("Content-Length", "0")],
               method="POST")
handshake_case(P + "§4.1 HTTP/1.0", 400, lambda k: upgrade_fields(k), version="HTTP/1.0")
handshake_case(P + "§4.2.1 Connection without upgrade", 400,
               lambda k: [("Upgrade", "websocket"), ("Connection", "keep-alive")] + upgrade_fields(k)[2:])
handshake_case(P + "§9.1 malformed Sec-WebSocket-Extensions", 400,
               lambda k: upgrade_fields(k, extensions="permessage-deflate; =15"))


# Timers (RFC 6455 §5.5.2, §5.5.3, §7.1.1): the target's keep-alive pings and close timeout.
# Its timer may tick coarsely (the server's runs once a second), so each wait allows a tick
# and a margin on top of the configured time.

def timer_case(name):
    def deco(fn):
        CASES.append((name, "timer", fn, None))
        return fn
    return deco


def next_data_frame(c, deadline, want_op):
    """The next frame with opcode want_op, or Failed (frames of other kinds are skipped)."""
    while True:
        try:
            f = c.next_frame(deadline)
        except socket.timeout:
            raise Failed("no frame of opcode %#x in time" % want_op)
        if f is None:
            raise Failed("connection closed while waiting for opcode %#x" % want_op)
        if f[0] & 0x0F == want_op:
            return f


@timer_case(P + "§5.5.2 (timer) a peer that answers no ping is disconnected")
def _(target, opts):
    ping_s, _close = opts["timers"]
    c = open_ws(target)
    try:
        t0 = time.monotonic()
        next_data_frame(c, t0 + 2 * ping_s + 3, 0x9)
        t_ping = time.monotonic()
        if not c.wait_eof(t_ping + 2 * ping_s + 3):
            raise Failed("still connected %.1f s after an unanswered ping" % (time.monotonic() - t_ping))
    finally:
        c.close()


@timer_case(P + "§5.5.3 (timer) a peer that answers pings stays connected")
def _(target, opts):
    ping_s, _close = opts["timers"]
    c = open_ws(target)
    try:
        end = time.monotonic() + 3 * ping_s + 2
        pings = 0
        while time.monotonic() < end:
            try:
                f = c.next_frame(end)
            except socket.timeout:
                break
            if f is None:
                raise Failed("disconnected after %d answered pings" % pings)
            if f[0] == 0x89:
                pings += 1
                c.send(frame(0x8A, f[1]))
        if pings < 2:
            raise Failed("%d pings in %.0f s of silence, want 2 or more" % (pings, 3 * ping_s + 2))
        c.send(frame(0x81, b"alive"))
        f = next_data_frame(c, time.monotonic() + WAIT, 0x1)
        if f != (0x81, b"alive"):
            raise Failed("echo after the pings: %r" % (f,))
    finally:
        c.close()


@timer_case(P + "§7.1.1 (timer) a peer that never answers the server's Close is disconnected")
def _(target, opts):
    _ping, close_s = opts["timers"]
    c = open_ws(target)
    try:
        c.send(frame(0x81, (opts["close_cmd"] % 4001).encode()))
        f = next_data_frame(c, time.monotonic() + WAIT, 0x8)
        if f[1][:2] != struct.pack(">H", 4001):
            raise Failed("server Close %r, want code 4001" % f[1][:20])
        t_close = time.monotonic()
        if not c.wait_eof(t_close + close_s + 3):
            raise Failed("still connected %.1f s after the server's unanswered Close" % (time.monotonic() - t_close))
        if time.monotonic() - t_close < close_s * 0.5:
            raise Failed("disconnected %.2f s after the Close, before the close timeout (%.1f s)" %
                         (time.monotonic() - t_close, close_s))
    finally:
        c.close()


def main():
    url, opts = parse_args(sys.argv[1:])
    if "ws_echo" in opts:
        import subprocess
        srv = subprocess.Popen([opts["ws_echo"]], stdout=subprocess.PIPE, text=True)
        try:
            line = srv.stdout.readline()
            if not line.startswith("port "):
                sys.exit("negative.py: ws-echo did not print its port (got %r)" % line)
            base = "ws://127.0.0.1:%d" % int(line.split()[1])
            opts["nodeflate"] = base + "/nodeflate"
            rc = run(split_url(base + "/"), opts)
            if rc == 0 and not opts["dribble"]:
                print("-- again with --dribble")
                rc = run(split_url(base + "/"), dict(opts, dribble=True))
        finally:
            srv.terminate()
            srv.wait(5)
    else:
        rc = run(split_url(url), opts)
    sys.exit(rc)


def run(target, opts):
    TRANSPORT[0] = "h2" if opts["h2"] else "h1"
    passed = failed = skipped = 0
    for name, kind, fn, url_opt in CASES:
        if opts["filters"] and not any(f in name for f in opts["filters"]):
            continue
        if kind == "timer" and not opts["timers"]:
            continue  # only with --timers: not counted as skipped
        if kind == "handshake" and opts["h2"]:
            print("SKIP " + name + " (HTTP/1.1 only)")
            skipped += 1
            continue
        if (kind == "handshake" and not opts["handshake"]) or (url_opt and not opts[url_opt]):
            print("SKIP " + name + (" (no --%s-url)" % url_opt if url_opt else " (--skip-handshake)"))
            skipped += 1
            continue
        t0 = time.monotonic()
        try:
            fn(target, opts)
            echo_round_trip(target)
        except (Failed, OSError, socket.timeout) as e:
            failed += 1
            print("FAIL %s: %s" % (name, e if str(e) else type(e).__name__))
            continue
        passed += 1
        print("ok   %s (%.0f ms)" % (name, (time.monotonic() - t0) * 1000))
    if skipped:
        print("%d skipped" % skipped)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    main()
