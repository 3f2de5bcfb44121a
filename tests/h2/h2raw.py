#!/usr/bin/python3
"""A raw HTTP/2 client for tests: hand-built frames over a blocking socket, so a test can send
exactly the malformed bytes it means (no library in between that would refuse or repair them).

Frames out: frame() and the helpers below build the 9-byte header and the payload by hand.
Header blocks out: hpack_block() writes every field as a literal without indexing and without
Huffman (RFC 7541 section 6.2.2), so names and values go on the wire byte for byte, uppercase
and forbidden characters included. Frames in: Conn.read_frame() parses the server's frames;
its header blocks are decoded with python3-h2's hpack decoder (the server compresses).

Only loopback; every wait has a deadline."""
import socket
import struct
import time

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, \
    CONTINUATION = range(10)
TYPE_NAMES = ["DATA", "HEADERS", "PRIORITY", "RST_STREAM", "SETTINGS", "PUSH_PROMISE", "PING",
              "GOAWAY", "WINDOW_UPDATE", "CONTINUATION"]
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20

ERROR_NAMES = ["NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR",
               "SETTINGS_TIMEOUT", "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL",
               "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY",
               "HTTP_1_1_REQUIRED"]
ERR = {name: i for i, name in enumerate(ERROR_NAMES)}

# SETTINGS identifiers (RFC 9113 section 6.5.2)
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, \
    MAX_HEADER_LIST_SIZE = range(1, 7)


def err_name(code):
    return ERROR_NAMES[code] if code < len(ERROR_NAMES) else "0x%x" % code


def frame(ftype, flags, stream_id, payload=b"", length=None):
    """One frame; length overrides the header's length field (to lie about it)."""
    n = len(payload) if length is None else length
    return struct.pack(">I", n)[1:] + bytes([ftype, flags]) + struct.pack(">I", stream_id) + payload


def settings(*pairs, ack=False):
    return frame(SETTINGS, ACK if ack else 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def window_update(stream_id, increment):
    return frame(WINDOW_UPDATE, 0, stream_id, struct.pack(">I", increment))


def rst_stream(stream_id, code):
    return frame(RST_STREAM, 0, stream_id, struct.pack(">I", code))


def ping(data=b"12345678", ack=False):
    return frame(PING, ACK if ack else 0, 0, data)


def goaway(last_stream_id, code, debug=b""):
    return frame(GOAWAY, 0, 0, struct.pack(">II", last_stream_id, code) + debug)


def priority(stream_id, depends_on, weight=15, exclusive=False):
    return frame(PRIORITY, 0, stream_id,
                 struct.pack(">IB", depends_on | (0x80000000 if exclusive else 0), weight))


def hpack_int(value, prefix_bits, first_byte_flags=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first_byte_flags | value])
    out = [first_byte_flags | limit]
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def hpack_block(fields):
    """Literal header fields without indexing, new names, no Huffman: exact bytes on the wire."""
    out = b""
    for name, value in fields:
        name = name.encode() if isinstance(name, str) else name
        value = value.encode() if isinstance(value, str) else value
        out += b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value
    return out


def request_fields(path="/hello", method="GET", authority="127.0.0.1", scheme="http", extra=()):
    return [(":method", method), (":scheme", scheme), (":authority", authority),
            (":path", path)] + list(extra)


def headers(stream_id, fields, end_stream=True, end_headers=True, raw=None):
    block = hpack_block(fields) if raw is None else raw
    flags = (END_STREAM if end_stream else 0) | (END_HEADERS if end_headers else 0)
    return frame(HEADERS, flags, stream_id, block)


def data(stream_id, payload, end_stream=False):
    return frame(DATA, END_STREAM if end_stream else 0, stream_id, payload)


class Frame:
    def __init__(self, ftype, flags, stream_id, payload):
        self.type, self.flags, self.stream_id, self.payload = ftype, flags, stream_id, payload
        self.fields = None  # decoded header block (HEADERS, after CONTINUATIONs)

    def describe(self):
        name = TYPE_NAMES[self.type] if self.type < len(TYPE_NAMES) else "type %d" % self.type
        extra = ""
        if self.type == RST_STREAM and len(self.payload) == 4:
            extra = " " + err_name(struct.unpack(">I", self.payload)[0])
        elif self.type == GOAWAY and len(self.payload) >= 8:
            last, code = struct.unpack(">II", self.payload[:8])
            extra = " last=%d %s %r" % (last & 0x7FFFFFFF, err_name(code), self.payload[8:60])
        elif self.type == HEADERS and self.fields is not None:
            extra = " " + ",".join("%s=%s" % kv for kv in self.fields if kv[0].startswith(":"))
        return "%s(s%d%s)" % (name, self.stream_id, extra)

    @property
    def error_code(self):
        if self.type == RST_STREAM:
            return struct.unpack(">I", self.payload[:4])[0]
        if self.type == GOAWAY:
            return struct.unpack(">I", self.payload[4:8])[0]
        return None

    @property
    def status(self):
        for k, v in self.fields or []:
            if k == ":status":
                return int(v)
        return None


class Closed(Exception):
    pass


class Conn:
    """One client connection. Records every frame read in self.frames."""

    def __init__(self, host, port, preface=True, client_settings=b"", ack_settings=True, timeout=5):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""  # received bytes; self.pos of them already parsed
        self.pos = 0
        self.frames = []
        self.decoder = hpack.Decoder()
        self.decoder.max_allowed_table_size = 65536
        self.ack_settings = ack_settings
        self.eof = False
        self._hdr_pending = None
        if preface:
            self.send(PREFACE + settings() if client_settings == b"" else PREFACE + client_settings)

    def send(self, data_bytes):
        try:
            self.sock.sendall(data_bytes)
        except (BrokenPipeError, ConnectionResetError):
            self.eof = True

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def _fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        self.sock.settimeout(left)
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            raise TimeoutError
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            self.eof = True
            raise Closed
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0

    def read_frame(self, deadline):
        """The next frame, or raises Closed (EOF) / TimeoutError."""
        while len(self.buf) - self.pos < 9:
            self._fill(deadline)
        p = self.pos
        n = struct.unpack(">I", b"\0" + self.buf[p:p + 3])[0]
        while len(self.buf) - self.pos < 9 + n:
            self._fill(deadline)
        p = self.pos
        ftype, flags = self.buf[p + 3], self.buf[p + 4]
        sid = struct.unpack(">I", self.buf[p + 5:p + 9])[0] & 0x7FFFFFFF
        payload = self.buf[p + 9:p + 9 + n]
        self.pos = p + 9 + n
        f = Frame(ftype, flags, sid, payload)
        if ftype == SETTINGS and not flags & ACK and self.ack_settings:
            self.send(settings(ack=True))
        if ftype in (HEADERS, CONTINUATION):
            block = payload
            if ftype == HEADERS:
                if flags & PADDED:
                    pad = block[0]
                    block = block[1:len(block) - pad]
                if flags & PRIORITY_FLAG:
                    block = block[5:]
                self._hdr_pending = (f, block)
            else:
                first, prev = self._hdr_pending
                self._hdr_pending = (first, prev + block)
            if flags & END_HEADERS:
                first, block = self._hdr_pending
                self._hdr_pending = None
                first.fields = [(k.decode() if isinstance(k, bytes) else k,
                                 v.decode() if isinstance(v, bytes) else v)
                                for k, v in self.decoder.decode(block, raw=True)]
                if ftype == CONTINUATION:
                    f = first
            elif ftype == HEADERS:
                return self.read_frame(deadline)
            else:
                return self.read_frame(deadline)
        self.frames.append(f)
        return f

    def wait(self, pred, timeout=5):
        """Reads frames until pred(frame) is true: returns that frame, or None at EOF/timeout."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                f = self.read_frame(deadline)
            except (Closed, TimeoutError):
                return None
            if pred(f):
                return f

    def wait_eof(self, timeout=5):
        """True when the server closes the connection within timeout (frames are read and kept)."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            try:
                self.read_frame(deadline)
            except Closed:
                return True
            except TimeoutError:
                return False
        return True

    def seen(self):
        return " ".join(f.describe() for f in self.frames[-12:]) or "nothing"

    def body_of(self, stream_id):
        return b"".join(f.payload for f in self.frames if f.type == DATA and f.stream_id == stream_id)


def get(host, port, path="/hello", timeout=10):
    """One GET over a fresh prior-knowledge connection: (status, body) or (None, what was seen)."""
    try:
        c = Conn(host, port)
    except OSError as e:
        return None, "connect: %s" % e
    try:
        c.send(headers(1, request_fields(path)))
        end = c.wait(lambda f: f.stream_id == 1 and (f.type in (DATA, HEADERS) and f.flags & END_STREAM
                                                        or f.type == RST_STREAM) or f.type == GOAWAY,
                     timeout)
        if end is None or end.type in (RST_STREAM, GOAWAY):
            return None, c.seen()
        st = next((f.status for f in c.frames if f.type == HEADERS and f.stream_id == 1 and f.status), None)
        return st, c.body_of(1)
    finally:
        c.close()
