#!/usr/bin/python3
"""WebSockets over HTTP/2 (RFC 8441) against the real server: python3-h2 (Debian's, so
/usr/bin/python3) speaks the HTTP/2 side, extended CONNECT with :protocol websocket included,
and this file frames the WebSocket bytes itself (RFC 6455 §5: client frames masked). It runs
against tests/apps/websocket (GET /echo is a sticky echo) on a cleartext -h2c listener:

  /usr/bin/python3 tests/ws/h2ws.py HOST PORT [PORT_OF_A_NO_EXTENDED_CONNECT_SERVER]
  /usr/bin/python3 tests/ws/h2ws.py --tls HOST TLS_PORT   (ALPN h2: the cases below that need
                                                          no raw frames)
  /usr/bin/python3 tests/ws/h2ws.py --sticky-close HOST PORT   (prints the /echo worker's
                   "pid N", then "close CODE" when the server closes it)
  /usr/bin/python3 tests/ws/h2ws.py --subscribe HOST PORT ROOM MESSAGE   (joins /room?name=ROOM,
                   prints "ready", waits for MESSAGE: a subscriber for a cross-protocol test)

Cases (each on its own stream of one connection unless it says otherwise):
  settings      the server's SETTINGS carry ENABLE_CONNECT_PROTOCOL = 1 (RFC 8441 §3)
  echo          200 to the CONNECT, text and binary echoed, a 200 KB message (several DATA
                frames, flow control both ways), ping answered with a pong, close 1000 both
                ways, then END_STREAM from the server
  two streams   two WebSockets at once on one connection, each echoes its own
  tags          two WebSockets of /room get a message of either (the app broadcasts it to the
                room's tag) and a POST /broadcast sent on the same connection
  flexible      /flex (route: :flexible) answers "pid N"
  early bytes   a message sent before the 200 is echoed after it; after a refused upgrade
                that had early bytes the next WebSocket of the connection works
  app refuses   :path the app does not upgrade: its 403 goes out as it is
  bad version   sec-websocket-version 8: 426 with sec-websocket-version: 13 (RFC 6455 §4.4)
  no :path      an extended CONNECT without :path: RST_STREAM PROTOCOL_ERROR (RFC 8441 §4)
  on GET        :protocol on a GET: RST_STREAM PROTOCOL_ERROR
  other proto   :protocol other than websocket: 501
  plain CONNECT a CONNECT without :protocol: 501, as before
  reset         the client resets an open WebSocket stream: the next stream is served
  data after close  DATA on the stream after our END_STREAM: the stream is closed, the
                connection survives (RST_STREAM or GOAWAY STREAM_CLOSED, then a new connection
                is served)
  slow reader   we never give window back and send 5 MiB to be echoed: no more than our window
                arrives, and the server closes the WebSocket at its output bound (1008, counted
                in /stats websocket.slow_reader_closes: the caller checks)
  no setting    a connection to a server started with -no-extended-connect (second port, if
                given): no ENABLE_CONNECT_PROTOCOL, and :protocol is a PROTOCOL_ERROR reset

Prints one line per case and "N passed, M failed"; exits 1 on any failure. Loopback only;
every wait has a deadline."""
import os
import socket
import struct
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.settings

DEADLINE = 10.0


def ws_frame(opcode, payload, fin=True):
    """One masked client frame (RFC 6455 §5.2, §5.3)."""
    b0 = (0x80 if fin else 0) | opcode
    n = len(payload)
    if n < 126:
        head = bytes([b0, 0x80 | n])
    elif n < 65536:
        head = bytes([b0, 0x80 | 126]) + struct.pack(">H", n)
    else:
        head = bytes([b0, 0x80 | 127]) + struct.pack(">Q", n)
    key = os.urandom(4)
    masked = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return head + key + masked


def ws_parse(buf):
    """Server frames (unmasked) from buf: a list of (fin, opcode, payload) and the rest."""
    out = []
    while len(buf) >= 2:
        b0, b1 = buf[0], buf[1]
        if b1 & 0x80:
            raise AssertionError("a masked server frame (RFC 6455 §5.1)")
        n, off = b1 & 0x7F, 2
        if n == 126:
            if len(buf) < 4:
                break
            n, off = struct.unpack(">H", buf[2:4])[0], 4
        elif n == 127:
            if len(buf) < 10:
                break
            n, off = struct.unpack(">Q", buf[2:10])[0], 10
        if len(buf) < off + n:
            break
        out.append((bool(b0 & 0x80), b0 & 0x0F, bytes(buf[off:off + n])))
        buf = buf[off + n:]
    return out, buf


class Stream:
    def __init__(self, sid):
        self.sid = sid
        self.status = None
        self.headers = {}
        self.data = b""
        self.ended = False
        self.reset = None
        self.frames = []
        self.no_ack = False  # do not give the server window back (a client that does not read)


TLS = False  # --tls: the listener is -listen-tls (ALPN h2), as browsers use RFC 8441


class Conn:
    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port), timeout=DEADLINE)
        if TLS:
            import ssl
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE  # the server's development certificate
            ctx.set_alpn_protocols(["h2"])
            self.sock = ctx.wrap_socket(self.sock, server_hostname="localhost")
            if self.sock.selected_alpn_protocol() != "h2":
                raise AssertionError("ALPN chose %r" % self.sock.selected_alpn_protocol())
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                                       header_encoding=None))
        self.h2.initiate_connection()
        self.streams = {}
        self.remote_settings = {}
        self.goaway = None
        self.closed = False
        self.flush()

    def flush(self):
        data = self.h2.data_to_send()
        if data:
            self.sock.sendall(data)

    def pump(self, until, timeout=DEADLINE):
        end = time.monotonic() + timeout
        while not until():
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError("timed out")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                raise AssertionError("timed out")
            if not data:
                self.closed = True
                return
            for ev in self.h2.receive_data(data):
                self.on_event(ev)
            self.flush()

    def on_event(self, ev):
        if isinstance(ev, h2.events.RemoteSettingsChanged):
            for k, v in ev.changed_settings.items():
                self.remote_settings[int(k)] = v.new_value
        elif isinstance(ev, h2.events.ResponseReceived):
            st = self.streams[ev.stream_id]
            for k, v in ev.headers:
                if k == b":status":
                    st.status = int(v)
                else:
                    st.headers[k.decode()] = v.decode()
        elif isinstance(ev, h2.events.DataReceived):
            st = self.streams[ev.stream_id]
            st.data += ev.data
            if not st.no_ack:
                self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            frames, st.data = ws_parse(st.data)
            st.frames += frames
        elif isinstance(ev, h2.events.StreamEnded):
            self.streams[ev.stream_id].ended = True
        elif isinstance(ev, h2.events.StreamReset):
            if ev.stream_id in self.streams:
                self.streams[ev.stream_id].reset = ev.error_code
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.goaway = ev.error_code

    def request(self, headers, end_stream=False):
        sid = self.h2.get_next_available_stream_id()
        self.streams[sid] = Stream(sid)
        self.h2.send_headers(sid, headers, end_stream=end_stream)
        self.flush()
        return self.streams[sid]

    def connect_ws(self, path, protocol=b"websocket", extra=(), method=b"CONNECT"):
        hdrs = [(b":method", method), (b":protocol", protocol), (b":scheme", b"http"),
                (b":path", path), (b":authority", b"127.0.0.1"),
                (b"sec-websocket-version", b"13")] + list(extra)
        return self.request(hdrs)

    def send(self, st, data, end=False):
        # h2 splits by the peer's window and frame size; wait for window as needed
        view = memoryview(data)
        while view:
            room = min(self.h2.local_flow_control_window(st.sid), self.h2.max_outbound_frame_size)
            if room <= 0:
                self.pump(lambda: self.h2.local_flow_control_window(st.sid) > 0)
                continue
            self.h2.send_data(st.sid, bytes(view[:room]))
            view = view[room:]
            self.flush()
        if end:
            self.h2.end_stream(st.sid)
            self.flush()

    def frames(self, st, n):
        self.pump(lambda: len(st.frames) >= n or st.reset is not None or st.ended)
        got, st.frames = st.frames[:n], st.frames[n:]
        return got


results = []


def case(name):
    def wrap(fn):
        def run(*args):
            try:
                fn(*args)
                results.append((name, None))
                print("ok   %s" % name, flush=True)
            except Exception as e:  # noqa: BLE001 (a test report)
                results.append((name, e))
                print("FAIL %s: %r" % (name, e), flush=True)
        return run
    return wrap


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def open_echo(c, path=b"/echo"):
    st = c.connect_ws(path)
    c.pump(lambda: st.status is not None or st.reset is not None)
    expect(st.status == 200, "status %r reset %r" % (st.status, st.reset))
    expect(not st.ended, "the stream stays open after the 200")
    return st


@case("settings: ENABLE_CONNECT_PROTOCOL = 1")
def t_settings(host, port):
    c = Conn(host, port)
    c.pump(lambda: 8 in c.remote_settings)
    expect(c.remote_settings[8] == 1, c.remote_settings)


@case("echo: text, binary, 200 KB, ping, close 1000, END_STREAM")
def t_echo(host, port):
    c = Conn(host, port)
    st = open_echo(c)
    expect("sec-websocket-accept" not in st.headers, "no accept value on h2 (RFC 8441 §5)")
    c.send(st, ws_frame(1, b"hello over h2"))
    (fin, op, p), = c.frames(st, 1)
    expect((fin, op, p) == (True, 1, b"hello over h2"), (fin, op, p))
    c.send(st, ws_frame(2, bytes(range(256))))
    (fin, op, p), = c.frames(st, 1)
    expect(op == 2 and p == bytes(range(256)), (op, len(p)))
    big = os.urandom(200 * 1024)
    c.send(st, ws_frame(2, big))
    got = b""
    while True:
        (fin, op, p), = c.frames(st, 1)
        got += p
        if fin:
            break
    expect(got == big, "200 KB echo: %d bytes back" % len(got))
    c.send(st, ws_frame(9, b"ping!"))
    (fin, op, p), = c.frames(st, 1)
    expect(op == 10 and p == b"ping!", (op, p))
    c.send(st, ws_frame(1, b"count"))
    (fin, op, p), = c.frames(st, 1)
    expect(p == b"count 4", p)  # sticky state: the same worker saw all four messages
    c.send(st, ws_frame(8, struct.pack(">H", 1000) + b"bye"))
    (fin, op, p), = c.frames(st, 1)
    expect(op == 8 and struct.unpack(">H", p[:2])[0] == 1000, (op, p))
    c.pump(lambda: st.ended or st.reset is not None)
    expect(st.ended, "END_STREAM after the close handshake (reset %r)" % st.reset)


@case("two WebSockets on one connection")
def t_two(host, port):
    c = Conn(host, port)
    a = open_echo(c)
    b = open_echo(c)
    c.send(a, ws_frame(1, b"to a"))
    c.send(b, ws_frame(1, b"to b"))
    (_, _, pa), = c.frames(a, 1)
    (_, _, pb), = c.frames(b, 1)
    expect((pa, pb) == (b"to a", b"to b"), (pa, pb))


@case("bytes before the 200: kept, fed at the accept, echoed")
def t_early(host, port):
    c = Conn(host, port)
    st = c.connect_ws(b"/echo")
    c.send(st, ws_frame(1, b"sent early"))  # before the server's 200
    c.pump(lambda: st.status is not None or st.reset is not None)
    expect(st.status == 200, "status %r reset %r" % (st.status, st.reset))
    (_, op, p), = c.frames(st, 1)
    expect((op, p) == (1, b"sent early"), (op, p))


@case("app refuses after bytes were sent early: 403, the next WebSocket on it works")
def t_early_refused(host, port):
    c = Conn(host, port)
    st = c.connect_ws(b"/nope")
    c.send(st, ws_frame(2, os.urandom(60000)))
    c.pump(lambda: st.ended or st.reset is not None)
    expect(st.status == 403, st.status)
    st2 = open_echo(c)
    c.send(st2, ws_frame(2, os.urandom(60000)))
    (_, op, p), = c.frames(st2, 1)
    expect(op == 2 and len(p) == 60000, (op, len(p)))


@case("tags: two WebSockets in one room get a message of either, and a POST's broadcast")
def t_room(host, port):
    c = Conn(host, port)
    a = open_echo(c, b"/room?name=h2room")
    b = open_echo(c, b"/room?name=h2room")
    c.send(a, ws_frame(1, b"from a"))
    (_, _, pa), = c.frames(a, 1)
    (_, _, pb), = c.frames(b, 1)
    expect((pa, pb) == (b"from a", b"from a"), (pa, pb))
    post = c.request([(b":method", b"POST"), (b":scheme", b"http"),
                      (b":path", b"/broadcast?room=h2room"), (b":authority", b"127.0.0.1"),
                      (b"content-length", b"9")])
    c.send(post, b"from post", end=True)
    (_, _, pa), = c.frames(a, 1)
    (_, _, pb), = c.frames(b, 1)
    expect((pa, pb) == (b"from post", b"from post"), (pa, pb))


@case("flexible routing: /flex answers from a worker")
def t_flex(host, port):
    c = Conn(host, port)
    st = open_echo(c, b"/flex")
    c.send(st, ws_frame(1, b"pid"))
    (_, _, p), = c.frames(st, 1)
    expect(p.startswith(b"pid "), p)


@case("app refuses: its 403 as it is")
def t_refused(host, port):
    c = Conn(host, port)
    st = c.connect_ws(b"/nope")
    c.pump(lambda: st.ended or st.reset is not None)
    expect(st.status == 403, st.status)


@case("sec-websocket-version 8: 426 with sec-websocket-version: 13")
def t_version(host, port):
    c = Conn(host, port)
    hdrs = [(b":method", b"CONNECT"), (b":protocol", b"websocket"), (b":scheme", b"http"),
            (b":path", b"/echo"), (b":authority", b"127.0.0.1"), (b"sec-websocket-version", b"8")]
    st = c.request(hdrs)
    c.pump(lambda: st.ended or st.reset is not None)
    expect(st.status == 426 and st.headers.get("sec-websocket-version") == "13",
           (st.status, st.headers))


def raw_request(host, port, headers):
    """A request python3-h2 itself would refuse to send (it validates pseudo-headers): HPACK by
    its encoder, the HEADERS frame by hand; returns (status, rst_code, goaway_code)."""
    import hpack
    s = socket.create_connection((host, port), timeout=DEADLINE)
    block = hpack.Encoder().encode(headers)
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00" +
              struct.pack(">I", len(block))[1:] + bytes([1, 0x4]) + struct.pack(">I", 1) + block)
    buf, status, rst, goaway = b"", None, None, None
    dec = hpack.Decoder()
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end and status is None and rst is None and goaway is None:
        try:
            d = s.recv(65536)
        except socket.timeout:
            break
        if not d:
            break
        buf += d
        while len(buf) >= 9:
            n = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + n:
                break
            t, fl, sid, p = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF, buf[9:9 + n]
            buf = buf[9 + n:]
            if t == 4 and not fl & 1:
                s.sendall(b"\x00\x00\x00\x04\x01\x00\x00\x00\x00")
            elif t == 1 and sid == 1:
                status = int(dict(dec.decode(p)).get(":status"))
            elif t == 3 and sid == 1:
                rst = int.from_bytes(p[:4], "big")
            elif t == 7:
                goaway = int.from_bytes(p[4:8], "big")
    s.close()
    return status, rst, goaway


@case("extended CONNECT without :path: RST_STREAM PROTOCOL_ERROR")
def t_no_path(host, port):
    r = raw_request(host, port, [(":method", "CONNECT"), (":protocol", "websocket"),
                                 (":scheme", "http"), (":authority", "127.0.0.1"),
                                 ("sec-websocket-version", "13")])
    expect(r == (None, 1, None), r)


@case(":protocol on a GET: RST_STREAM PROTOCOL_ERROR")
def t_on_get(host, port):
    r = raw_request(host, port, [(":method", "GET"), (":protocol", "websocket"),
                                 (":scheme", "http"), (":path", "/echo"),
                                 (":authority", "127.0.0.1")])
    expect(r == (None, 1, None), r)


@case(":protocol other than websocket: 501")
def t_other(host, port):
    c = Conn(host, port)
    st = c.connect_ws(b"/echo", protocol=b"webtransport")
    c.pump(lambda: st.ended or st.reset is not None)
    expect(st.status == 501, st.status)


@case("plain CONNECT: 501")
def t_plain(host, port):
    r = raw_request(host, port, [(":method", "CONNECT"), (":authority", "127.0.0.1:9")])
    expect(r[0] == 501, r)


@case("client resets a WebSocket stream; the next one is served")
def t_reset(host, port):
    c = Conn(host, port)
    st = open_echo(c)
    c.h2.reset_stream(st.sid, 8)  # CANCEL
    c.flush()
    st2 = open_echo(c)
    c.send(st2, ws_frame(1, b"after reset"))
    (_, _, p), = c.frames(st2, 1)
    expect(p == b"after reset", p)


@case("client END_STREAM without a Close: the server ends the stream too")
def t_fin(host, port):
    c = Conn(host, port)
    st = open_echo(c)
    c.send(st, b"", end=True)
    c.pump(lambda: st.ended or st.reset is not None)
    expect(st.ended or st.reset == 0, (st.ended, st.reset))


@case("DATA after the stream closed: stream error, the connection still serves")
def t_data_after_close(host, port):
    c = Conn(host, port)
    st = open_echo(c)
    c.send(st, ws_frame(8, struct.pack(">H", 1000)), end=True)
    c.pump(lambda: st.ended or st.reset is not None)
    # raw DATA on the closed stream (python3-h2 would refuse to send it)
    c.sock.sendall(struct.pack(">I", 6)[1:] + bytes([0, 0]) + struct.pack(">I", st.sid) +
                   ws_frame(1, b""))
    try:
        st2 = open_echo(c)
        c.send(st2, ws_frame(1, b"still here"))
        (_, _, p), = c.frames(st2, 1)
        expect(p == b"still here", p)
    except (AssertionError, h2.exceptions.ProtocolError, OSError):
        # RFC 9113 §5.1: DATA on a closed stream may be a connection error (STREAM_CLOSED)
        expect(c.goaway == 5 or c.closed, "no GOAWAY STREAM_CLOSED: %r" % c.goaway)
        c2 = Conn(host, port)
        st3 = open_echo(c2)
        c2.send(st3, ws_frame(1, b"new connection"))
        (_, _, p), = c2.frames(st3, 1)
        expect(p == b"new connection", p)


@case("slow reader: our window stays closed, 5 MiB echoed: the server stops at its bound")
def t_slow_reader(host, port):
    c = Conn(host, port)
    st = open_echo(c)
    st.no_ack = True
    msg = os.urandom(64 * 1024)
    for _ in range(80):  # 5 MiB, more than the codec's 4 MiB output bound
        c.send(st, ws_frame(2, msg))
    # what reached us is bounded by our windows (65535 by default), whatever the server holds
    c.pump(lambda: st.reset is not None or st.ended or len(st.data) + sum(
        len(p) for _, _, p in st.frames) >= 60000, timeout=5)
    got = len(st.data) + sum(len(p) for _, _, p in st.frames)
    expect(got <= 65535, "%d bytes came past a 65535-byte window" % got)
    c.h2.reset_stream(st.sid, 8)
    c.flush()


@case("-no-extended-connect: no setting, :protocol is a PROTOCOL_ERROR reset")
def t_no_setting(host, port):
    c = Conn(host, port)
    c.pump(lambda: 4 in c.remote_settings)  # INITIAL_WINDOW_SIZE always comes
    expect(c.remote_settings.get(8, 0) == 0, c.remote_settings)
    r = raw_request(host, port, [(":method", "CONNECT"), (":protocol", "websocket"),
                                 (":scheme", "http"), (":path", "/echo"),
                                 (":authority", "127.0.0.1"), ("sec-websocket-version", "13")])
    expect(r == (None, 1, None), r)


def subscribe(host, port, room, expect_msg):
    """Joins ROOM and waits for one message: the cross-protocol broadcast test's subscriber.
    Prints "ready" once the 200 came, then "got" and exits 0, or exits 1."""
    c = Conn(host, port)
    st = open_echo(c, b"/room?name=" + room.encode())
    print("ready", flush=True)
    (_, _, p), = c.frames(st, 1)
    if p != expect_msg.encode():
        print("unexpected %r" % p, flush=True)
        sys.exit(1)
    print("got", flush=True)
    sys.exit(0)


def sticky_close(host, port):
    """Opens /echo (sticky), prints "pid N" (its worker), then waits for the server's Close and
    prints "close CODE": the caller kills that worker (the server closes with 1012)."""
    c = Conn(host, port)
    st = open_echo(c)
    c.send(st, ws_frame(1, b"pid"))
    (_, _, p), = c.frames(st, 1)
    print(p.decode(), flush=True)
    end = time.monotonic() + 20
    while time.monotonic() < end:
        (_, op, p), = c.frames(st, 1)
        if op == 8:
            print("close %d" % struct.unpack(">H", p[:2])[0], flush=True)
            sys.exit(0)
    sys.exit(1)


def main():
    global TLS
    if sys.argv[1] == "--sticky-close":
        sticky_close(sys.argv[2], int(sys.argv[3]))
    if sys.argv[1] == "--subscribe":
        subscribe(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
    if "--tls" in sys.argv:  # over TLS: the cases that do not need raw frames
        sys.argv.remove("--tls")
        TLS = True
        host, port = sys.argv[1], int(sys.argv[2])
        for t in (t_settings, t_echo, t_two, t_refused, t_version, t_other, t_reset, t_fin):
            t(host, port)
        failed = sum(1 for _, e in results if e)
        print("%d passed, %d failed" % (len(results) - failed, failed))
        sys.exit(1 if failed else 0)
    host, port = sys.argv[1], int(sys.argv[2])
    for t in (t_settings, t_echo, t_two, t_room, t_flex, t_early, t_early_refused, t_refused,
              t_version,
              t_no_path, t_on_get, t_other,
              t_plain, t_reset, t_fin, t_data_after_close, t_slow_reader):
        t(host, port)
    if len(sys.argv) > 3:
        t_no_setting(host, int(sys.argv[3]))
    failed = sum(1 for _, e in results if e)
    print("%d passed, %d failed" % (len(results) - failed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
