#!/usr/bin/env python3
"""Writes the committed seed corpora of fuzz/corpus/<name>/ (docs/FUZZING.md).

Deterministic: run it from anywhere (`python3 fuzz/make_corpus.py`) and commit the result.
Seeds are small hand-made inputs plus copies or excerpts of the repository's own files (the
shipped policies and scenarios, a few lines of each replay test log, several golden wire
frames concatenated into pipelined streams). The golden wire corpus itself is not copied: the
replay test and fuzz/run.sh read docs/protocol-corpus/*.bin where it lives.

fuzz/corpus/tls/ is not written here: its ClientHellos are captured from a real OpenSSL client
by the TLS unit test (PP_TLS_SEED_DIR=$PWD/fuzz/corpus/tls build/server/test_server_tls).
Nor is fuzz/corpus/h3/: its datagrams come from a real ngtcp2 client, recorded by
fuzz/gen_h3_corpus.c (cmake --build build --target fuzz-gen-h3 &&
build/fuzz/fuzz-gen-h3 fuzz/corpus/h3).
"""
import glob
import os
import shutil
import struct
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus")


def reset(name):
    d = os.path.join(OUT, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    return d


def write(d, name, data):
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- http1: byte 0 = mode (bit 7 small limits, bits 0-6 chunking), then the stream ----
DEFAULT, SMALL = 0x07, 0x87


def http1():
    d = reset("http1")
    crlf = lambda s: s.replace("\n", "\r\n")
    seeds = {
        # accepted
        "get": (DEFAULT, crlf("GET /hello?x=1&y=2 HTTP/1.1\nHost: example.com:8080\nAccept: */*\n\n")),
        "get-http10": (DEFAULT, crlf("GET / HTTP/1.0\n\n")),
        "get-http10-keepalive": (DEFAULT, crlf("GET / HTTP/1.0\nConnection: keep-alive\n\n")),
        "post-content-length": (DEFAULT, crlf("POST /form HTTP/1.1\nHost: a\nContent-Type: application/x-www-form-urlencoded\nContent-Length: 11\n\n") + "a=1&b=2&c=3"),
        "post-chunked": (DEFAULT, crlf("POST /up HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\n\n5\nhello\n6;ext=1\n world\n0\n\n")),
        "post-chunked-trailer": (DEFAULT, crlf("POST /up HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\n\n3\nabc\n0\nX-Checksum: 1\n\n")),
        "expect-continue": (DEFAULT, crlf("PUT /f HTTP/1.1\nHost: a\nExpect: 100-continue\nContent-Length: 4\n\n") + "data"),
        "pipelined-3": (DEFAULT, crlf("GET /1 HTTP/1.1\nHost: a\n\nPOST /2 HTTP/1.1\nHost: a\nContent-Length: 3\n\nabcGET /3 HTTP/1.1\nHost: a\nConnection: close\n\n")),
        "pipelined-chunked-then-get": (0x03, crlf("POST /a HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\n\n1\nx\n0\n\nGET /b HTTP/1.1\nHost: a\n\n")),
        "absolute-form": (DEFAULT, crlf("GET http://example.com/p/q?z#frag HTTP/1.1\nHost: example.com\n\n")),
        "options-star": (DEFAULT, crlf("OPTIONS * HTTP/1.1\nHost: a\n\n")),
        "ipv6-host": (DEFAULT, crlf("GET / HTTP/1.1\nHost: [::1]:9292\n\n")),
        "repeated-headers-cookie": (DEFAULT, crlf("GET / HTTP/1.1\nHost: a\nCookie: a=1\nX-A: 1\nCookie: b=2\nx-a: 2\nX_Under: dropped\n\n")),
        "head-delete-patch": (0x01, crlf("HEAD / HTTP/1.1\nHost: a\n\nDELETE /x HTTP/1.1\nHost: a\n\nPATCH /y HTTP/1.1\nHost: a\nContent-Length: 0\n\n")),
        "leading-crlf": (DEFAULT, crlf("\n\nGET / HTTP/1.1\nHost: a\n\n")),
        "upgrade": (DEFAULT, crlf("GET /ws HTTP/1.1\nHost: a\nConnection: Upgrade\nUpgrade: websocket\n\n")),
        "lf-only": (DEFAULT, "GET / HTTP/1.1\nHost: a\n\n"),
        "auth-header": (DEFAULT, crlf("GET /stats HTTP/1.1\nHost: a\nAuthorization: Bearer token\n\n")),
        # refused
        "reject-cl-and-te": (DEFAULT, crlf("POST / HTTP/1.1\nHost: a\nContent-Length: 3\nTransfer-Encoding: chunked\n\n0\n\n")),
        "reject-duplicate-cl": (DEFAULT, crlf("POST / HTTP/1.1\nHost: a\nContent-Length: 3\nContent-Length: 3\n\nabc")),
        "reject-bad-cl": (DEFAULT, crlf("POST / HTTP/1.1\nHost: a\nContent-Length: 1x\n\n")),
        "reject-obs-fold": (DEFAULT, crlf("GET / HTTP/1.1\nHost: a\nX-Long: a\n  continued\n\n")),
        "reject-no-host": (DEFAULT, crlf("GET / HTTP/1.1\n\n")),
        "reject-duplicate-host": (DEFAULT, crlf("GET / HTTP/1.1\nHost: a\nHost: b\n\n")),
        "reject-te-gzip": (DEFAULT, crlf("POST / HTTP/1.1\nHost: a\nTransfer-Encoding: gzip, chunked\n\n")),
        "reject-connect": (DEFAULT, crlf("CONNECT example.com:443 HTTP/1.1\nHost: example.com\n\n")),
        "reject-expect": (DEFAULT, crlf("POST / HTTP/1.1\nHost: a\nExpect: something\nContent-Length: 1\n\nx")),
        "reject-http2-version": (DEFAULT, crlf("GET / HTTP/2.0\nHost: a\n\n")),
        "reject-space-before-colon": (DEFAULT, crlf("GET / HTTP/1.1\nHost : a\n\n")),
        "reject-bad-method": (DEFAULT, crlf("G@T / HTTP/1.1\nHost: a\n\n")),
        "reject-bad-chunk-size": (DEFAULT, crlf("POST / HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\n\nzz\n")),
        "reject-431-headers": (SMALL, crlf("GET / HTTP/1.1\nHost: a\n" + "".join("X-%d: v\n" % i for i in range(10)) + "\n")),
        "reject-431-bytes": (SMALL, crlf("GET / HTTP/1.1\nHost: a\nX-Big: " + "b" * 600 + "\n\n")),
        "reject-414-uri": (SMALL, crlf("GET /" + "u" * 200 + " HTTP/1.1\nHost: a\n\n")),
        "reject-413-cl": (SMALL, crlf("POST / HTTP/1.1\nHost: a\nContent-Length: 1000\n\n")),
        "reject-413-chunked": (SMALL, crlf("POST / HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\n\n200\n" + "c" * 512 + "\n0\n\n")),
        "reject-second-of-pipeline": (DEFAULT, crlf("GET /ok HTTP/1.1\nHost: a\n\nGET /bad HTTP/1.1\n\n")),
        "reject-nul-in-header": (DEFAULT, "GET / HTTP/1.1\r\nHost: a\x00b\r\n\r\n"),
        "partial-request": (DEFAULT, crlf("GET /incomplete HTTP/1.1\nHost: a\nX-")),
    }
    for name, (mode, text) in sorted(seeds.items()):
        write(d, name, bytes([mode]) + text.encode("latin-1"))


# ---- wire: streams of several golden frames ----
def wire():
    d = reset("wire")
    pc = os.path.join(ROOT, "docs", "protocol-corpus")
    rd = lambda n: open(os.path.join(pc, n + ".bin"), "rb").read()
    streams = {
        "worker-session": ["hello", "ready", "response-head", "response-body", "response-body-empty", "response-end"],
        "server-session": ["request-get", "request-post", "body", "body-end", "cancel", "request-streams", "body-empty", "body-end"],
        "control-session": ["spawn", "forked", "ready", "retire", "stop", "exited", "exited-signal"],
        "good-then-bad": ["request-get", "response-end", "bad-reserved-first", "hello"],
        "good-then-truncated": ["request-utf8-and-empty-values", "bad-truncated-payload"],
        "good-then-length-mismatch": ["response-head-multi-value", "bad-request-pairs-overrun"],
        "good-then-too-large": ["retire", "bad-length-over-max"],
    }
    for name, parts in sorted(streams.items()):
        write(d, name, b"".join(rd(p) for p in parts))
    write(d, "empty", b"")


# ---- policy: the shipped policies plus hand-made shapes ----
def policy():
    d = reset("policy")
    for p in sorted(glob.glob(os.path.join(ROOT, "scenarios", "policies", "*.yaml"))):
        shutil.copy(p, os.path.join(d, "shipped-" + os.path.basename(p)))
    seeds = {
        "nested-sections.yaml": "tick: 500ms\nthreads:\n  enabled: true\n  min: 2\n  max: 8\n  gvl_wait_max: 2ms\nshed:\n  enabled: yes\n  budget: 1.5s\n",
        "dotted-keys.yaml": "threads.enabled: on\nthreads.max: 32\nshed.budget: 250000us\nmemory_limit: 2GiB\n",
        "units.yaml": "tick: 1m\nspawn_cooldown: 2.5s\nretire_cooldown: 0.5h\ntarget_queue_p95: 1500\xc2\xb5s\ngvl_wait_max_ns: 1\n",
        "canonical.yaml": "tick: 1000000000ns\nmin_workers: 1\nmax_workers: 8\nmax_step: 4\ncores: 0\nmemory_limit: 0\ntarget_queue_p95: 50000000ns\nsevere_factor: 4\nbreach_ticks: 2\ncalm_fraction: 0.20000000000000001\ncalm_utilisation: 0.5\ncalm_ticks: 30\nspawn_cooldown: 3000000000ns\nretire_cooldown: 30000000000ns\ntarget_utilisation: 0.69999999999999996\nthreads.enabled: false\nthreads.min: 1\nthreads.max: 16\nthreads.gvl_wait_max: 5000000ns\nshed.enabled: false\nshed.budget: 10000000000ns\n",
        "flow-style.yaml": "{tick: 2s, max_workers: 4, threads: {enabled: true, max: 4}}\n",
        "set-field.txt": "spawn_cooldown=2s\n",
        "set-tick.txt": "tick=1.25ms\n",
        "set-memory.txt": "memory_limit=1.5GiB\n",
        "set-bool.txt": "threads.enabled=yes\n",
        "empty.yaml": "",
        "null.yaml": "~\n",
        "bad-unknown.yaml": "tick: 1s\nbogus: 3\n",
        "bad-twice.yaml": "tick: 1s\ntick: 2s\n",
        "bad-range.yaml": "min_workers: 9\nmax_workers: 8\n",
        "bad-unit.yaml": "tick: 3 fortnights\n",
        "bad-two-docs.yaml": "tick: 1s\n---\ntick: 2s\n",
        "bad-list.yaml": "- tick\n- 1s\n",
        "anchors.yaml": "tick: &t 2s\nspawn_cooldown: *t\n",
        "big-numbers.yaml": "memory_limit: 8EiB\ncalm_fraction: 1e-300\nmax_workers: 4294967296\n",
    }
    for name, text in sorted(seeds.items()):
        write(d, name, text.encode("utf-8") if isinstance(text, str) else text)


# ---- declog: single lines from the replay test logs, plus edge cases ----
def declog():
    d = reset("declog")
    for path in sorted(glob.glob(os.path.join(ROOT, "replay", "tests", "logs", "*.jsonl"))):
        base = os.path.splitext(os.path.basename(path))[0]
        lines = open(path, "rb").read().splitlines(keepends=True)
        picked = {0: "first", 1: "second"}
        for i, ln in enumerate(lines):
            if b'"action":"none"' not in ln and b'"type":"header"' not in ln:
                picked.setdefault(i, "action%d" % i)
        picked[len(lines) - 1] = "last"
        for i, label in sorted(picked.items())[:8]:
            write(d, "%s-%s.jsonl" % (base, label), lines[i])
        # a header followed by a tick: the target decides that tick under the header's policy
        write(d, "%s-header-and-tick.jsonl" % base, lines[0] + lines[1])
    # policy text, for the header-carrying-any-policy-text property
    for p in sorted(glob.glob(os.path.join(ROOT, "scenarios", "policies", "*.yaml")))[:2]:
        shutil.copy(p, os.path.join(d, "policy-" + os.path.basename(p)))
    write(d, "policy-escapes.yaml", "# tab\there, quote \" and backslash \\ and \u00e9\u2603\ntick: 2s\n")
    write(d, "not-object.jsonl", b"[1,2,3]\n")
    write(d, "empty-object.jsonl", b"{}\n")
    write(d, "truncated.jsonl", b'{"v":1,"tick":0,"time_ns":10')
    write(d, "wrong-version.jsonl", b'{"v":2,"tick":0}\n')


# ---- scenario: the shipped scenarios, a trace, inline policies ----
def scenario():
    d = reset("scenario")
    for p in sorted(glob.glob(os.path.join(ROOT, "scenarios", "*.yaml"))):
        shutil.copy(p, os.path.join(d, "shipped-" + os.path.basename(p)))
    seeds = {
        "inline-policy.yaml": "name: inline\narrivals:\n  process: uniform\n  phases:\n    - {rate: 10, to: 50, duration: 10s}\nrequests:\n  - {path: /a, weight: 2, cpu: {dist: lognormal, mean: 5ms, sd: 2ms}, io: {dist: uniform, min: 1ms, max: 3ms}}\nclient: {timeout: 5s, slo: 100ms}\nmachine: {cores: 2, memory: {worker: 100MB, per_thread: 1MiB}, gvl_timeslice: 50ms, gvl_measured: false, boot: 1s}\nconfigs:\n  - name: auto\n    server: pumaplus\n    autoscale: true\n    workers: 1\n    policy:\n      max_workers: 4\n      threads: {enabled: true, max: 8}\n",
        "trace-process.yaml": "name: t\narrivals: {process: trace, trace: arrivals.txt}\nrequests: [{path: /x}]\nconfigs: [{name: a, server: puma, workers: 1, queue: fifo}]\n",
        "trace.txt": "# seconds\n0.0\n0.0125\n 0.5 \n\n1\n",
        "trace-decreasing.txt": "1.0\n0.5\n",
        "bad-duplicate-config.yaml": "arrivals: {phases: [{rate: 1, duration: 1s}]}\nrequests: [{path: /}]\nconfigs: [{name: a, server: puma}, {name: a, server: puma}]\n",
        "bad-duration-sum.yaml": "duration: 5s\narrivals: {phases: [{rate: 1, duration: 1s}]}\nrequests: [{path: /}]\nconfigs: [{name: a, server: puma}]\n",
        "bad-policy-static.yaml": "arrivals: {phases: [{rate: 1, duration: 1s}]}\nrequests: [{path: /}]\nconfigs: [{name: a, server: puma, policy: p.yaml}]\n",
        "anchors.yaml": "arrivals: {phases: [&p {rate: 1, duration: 1s}, *p]}\nrequests: [&r {path: /}, *r]\nconfigs: [{name: a, server: puma}]\n",
    }
    for name, text in sorted(seeds.items()):
        write(d, name, text)


# ---- h2: bytes 0-1 = split point (big-endian), then the frames after the client preface ----
def h2():
    import struct
    d = reset("h2")

    def frame(ftype, flags, sid, payload=b""):
        return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload

    def lit(fields):  # literal without indexing, new name, no Huffman
        out = b""
        for k, v in fields:
            k, v = k.encode(), v.encode()
            assert len(k) < 127 and len(v) < 127
            out += b"\x00" + bytes([len(k)]) + k + bytes([len(v)]) + v
        return out

    def req(path, method="GET", extra=()):
        return lit([(":method", method), (":scheme", "http"), (":authority", "a"),
                    (":path", path)] + list(extra))

    settings = frame(4, 0, 0)
    ack = frame(4, 1, 0)
    get = frame(1, 0x5, 1, req("/hello"))
    # indexed :method GET, :scheme http, :path /, then a literal :authority (RFC 7541 C.3.1)
    get_indexed = frame(1, 0x5, 1, b"\x82\x86\x84\x41\x0fwww.example.com")
    post = frame(1, 0x4, 3, req("/echo", "POST", [("content-length", "11")])) + \
        frame(0, 0, 3, b"hello ") + frame(0, 1, 3, b"world")
    post_trailers = frame(1, 0x4, 5, req("/echo", "POST")) + frame(0, 0, 5, b"abc") + \
        frame(1, 0x5, 5, lit([("x-trailer", "1")]))
    head = frame(1, 0x5, 7, req("/", "HEAD"))
    block = req("/split", extra=[("x-long", "v" * 100)])
    continuation = frame(1, 0x1, 9, block[:20]) + frame(9, 0x4, 9, block[20:])
    seeds = {
        "get.bin": settings + get,
        "get-indexed.bin": settings + ack + get_indexed,
        "post-body.bin": settings + post,
        "post-trailers.bin": settings + post_trailers,
        "head.bin": settings + head,
        "continuation.bin": settings + continuation,
        "many-streams.bin": settings + b"".join(frame(1, 0x5, i, req("/s%d" % i)) for i in range(1, 40, 2)),
        "ping-settings-window.bin": settings + frame(6, 0, 0, b"12345678") +
            frame(4, 0, 0, struct.pack(">HI", 4, 1) + struct.pack(">HI", 1, 0)) +
            frame(8, 0, 0, struct.pack(">I", 1000)) + get,
        "client-reset.bin": settings + frame(1, 0x4, 1, req("/echo", "POST")) + frame(3, 0, 1, struct.pack(">I", 8)),
        "goaway.bin": settings + get + frame(7, 0, 0, struct.pack(">II", 0, 0)),
        "priority.bin": settings + frame(2, 0, 3, struct.pack(">IB", 1, 15)) +
            frame(1, 0x25, 5, struct.pack(">IB", 3, 200) + req("/p")),
        "padded.bin": settings + frame(1, 0xD, 1, bytes([4]) + req("/pad") + b"\0" * 4) +
            frame(0, 0x9, 1, bytes([2]) + b"x\0\0"),
        # malformed
        "bad-data-stream0.bin": settings + frame(0, 1, 0, b"x"),
        "bad-settings-length.bin": frame(4, 0, 0, b"\0\1\0\0\0"),
        "bad-first-frame.bin": frame(6, 0, 0, b"12345678"),
        "bad-even-stream.bin": settings + frame(1, 0x5, 2, req("/")),
        "bad-uppercase.bin": settings + frame(1, 0x5, 1, req("/", extra=[("X-Up", "1")])),
        "bad-missing-path.bin": settings + frame(1, 0x5, 1, lit([(":method", "GET"), (":scheme", "http")])),
        "bad-content-length.bin": settings + frame(1, 0x4, 1, req("/", "POST", [("content-length", "3")])) +
            frame(0, 1, 1, b"toolong"),
        "bad-hpack-index.bin": settings + frame(1, 0x5, 1, b"\xff\x7f"),
        "bad-window-overflow.bin": settings + frame(8, 0, 0, struct.pack(">I", 0x7fffffff)),
        "bad-continuation-flood.bin": settings + frame(1, 0x1, 1, req("/")) +
            b"".join(frame(9, 0, 1, lit([("a", "b")])) for _ in range(12)),
        "bad-data-after-end.bin": settings + get + frame(0, 1, 1, b"late"),
        "rapid-reset.bin": settings + b"".join(frame(1, 0x5, i, req("/")) + frame(3, 0, i, struct.pack(">I", 8))
                                               for i in range(1, 200, 2)),
        "connect.bin": settings + frame(1, 0x5, 1, lit([(":method", "CONNECT"), (":authority", "a:443")])),
        # RFC 8441: an extended CONNECT tunnel with DATA both before and after, then END_STREAM
        "extended-connect.bin": settings + frame(1, 0x4, 1, lit([
            (":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"),
            (":authority", "a"), (":path", "/chat"), ("sec-websocket-version", "13")])) +
            frame(0, 0, 1, b"\x81\x85abcd" + b"x" * 5) + frame(0, 1, 1, b"\x88\x80abcd"),
        "bad-protocol-on-get.bin": settings + frame(1, 0x5, 1, req("/", extra=[(":protocol", "websocket")])),
        "empty.bin": b"",
    }
    for name, body in sorted(seeds.items()):
        # the split point: about the middle of the stream (preface included)
        split = (24 + len(body)) // 2
        write(d, name, struct.pack(">H", split) + body)
    # A DATA frame that overruns content-length, cut 3 bytes into its payload: the first
    # fuzzing session's only report (a property of nghttp2, not a server bug; fuzz_h2.c on_close).
    head = settings + frame(1, 0x4, 3, req("/echo", "POST", [("content-length", "33")]))
    body = head + frame(0, 0, 3, b"hello " + b"\0" * 64)
    write(d, "data-over-content-length-split.bin", struct.pack(">H", 24 + len(head) + 9 + 3) + body)
    # A connection error, then more bytes in the second feed (refused with PP_H2_EFINISHED).
    head = settings + frame(0, 1, 0, b"x")
    write(d, "error-then-more.bin", struct.pack(">H", 24 + len(head)) + head + get * 3)


# ---- ws: byte 0 = mode (bit 0 deflate, bit 1 no takeover, bit 2 fragmented echo,
# bits 3-7 chunking), then client frames ----
WS_KEY = b"\x37\xfa\x21\x3d"


def ws_frame(b0, payload, masked=True, lenenc=0, claimed=None):
    n = len(payload) if claimed is None else claimed
    mbit = 0x80 if masked else 0
    if lenenc == 64 or (lenenc == 0 and n > 0xFFFF):
        head = bytes([b0, mbit | 127]) + struct.pack(">Q", n)
    elif lenenc == 16 or (lenenc == 0 and n >= 126):
        head = bytes([b0, mbit | 126]) + struct.pack(">H", n)
    else:
        head = bytes([b0, mbit | n])
    if not masked:
        return head + payload
    return head + WS_KEY + bytes(c ^ WS_KEY[i & 3] for i, c in enumerate(payload))


def ws_deflate_msgs(msgs, reset_each=False):
    """Compresses messages as a client does (raw DEFLATE, sync flush, tail removed)."""
    z = zlib.compressobj(6, zlib.DEFLATED, -15)
    out = []
    for m in msgs:
        c = z.compress(m) + z.flush(zlib.Z_SYNC_FLUSH)
        c = c[:-4] if c.endswith(b"\x00\x00\xff\xff") else c
        out.append(c or b"\x00")
        if reset_each:
            z = zlib.compressobj(6, zlib.DEFLATED, -15)
    return out


def ws():
    d = reset("ws")
    F = ws_frame
    seeds = {
        "text": (0x18, F(0x81, b"Hello")),
        "binary": (0x18, F(0x82, bytes(range(256)))),
        "fragments": (0x1C, F(0x01, b"Hel") + F(0x00, b"l") + F(0x80, b"o")),
        "utf8-split": (0x08, F(0x01, "\u03ba\u1f79".encode()[:1]) + F(0x80, "\u03ba\u1f79".encode()[1:])),
        "ping-inside": (0x10, F(0x01, b"ab") + F(0x89, b"p") + F(0x80, b"cd")),
        "pong": (0x00, F(0x8A, b"x")),
        "close": (0x00, F(0x81, b"a") + F(0x88, b"\x03\xe8bye") + F(0x81, b"late")),
        "close-empty": (0x00, F(0x88, b"")),
        "len16": (0x40, F(0x82, b"x" * 300)),
        "len64": (0x40, F(0x82, b"y" * 10, claimed=70000)),
        "unmasked": (0x00, F(0x81, b"Hi", masked=False)),
        "rsv1-no-ext": (0x00, F(0xC1, b"x")),
        "reserved-opcode": (0x00, F(0x83, b"")),
        "nonminimal16": (0x00, F(0x82, b"abc", lenenc=16)),
        "nonminimal64": (0x00, F(0x82, b"abc", lenenc=64)),
        "msb64": (0x00, F(0x82, b"", lenenc=64, claimed=1 << 63)),
        "big-ping": (0x00, F(0x89, b"p" * 126)),
        "frag-ping": (0x00, F(0x09, b"a")),
        "cont-no-start": (0x00, F(0x80, b"x")),
        "interleaved": (0x00, F(0x01, b"a") + F(0x81, b"b")),
        "bad-utf8": (0x00, F(0x81, b"\xed\xa0\x80")),
        "bad-close-code": (0x00, F(0x88, b"\x03\xed")),
        "close-1-byte": (0x00, F(0x88, b"\x03")),
        "too-big": (0x00, F(0x82, b"z" * 4097)),
    }
    hello = ws_deflate_msgs([b"Hello, Hello, Hello", b"Hello, Hello, Hello", b""])
    seeds["deflate"] = (0x19, b"".join(F(0xC1, c) for c in hello))
    r = ws_deflate_msgs([b"compress me " * 8, b"compress me " * 8], reset_each=True)
    seeds["deflate-reset"] = (0x1B, b"".join(F(0xC1, c) for c in r))
    bomb = ws_deflate_msgs([b"\0" * 100000])[0]
    seeds["deflate-bomb"] = (0x01, F(0xC2, bomb))
    seeds["deflate-fragments"] = (0x05, F(0x41, b"\xf2\x48\xcd\xc9") + F(0x80, b"\xc9\x07\x00"))
    for name, (mode, body) in sorted(seeds.items()):
        write(d, name + ".bin", bytes([mode]) + body)


# ---- ws_deflate: an extensions line, then mode and [flags][u16 len][bytes] records ----
def ws_deflate():
    d = reset("ws_deflate")

    def rec(flags, data):
        return bytes([flags]) + struct.pack(">H", len(data)) + data

    lines = [
        b"permessage-deflate",
        b"permessage-deflate; client_max_window_bits",
        b"permessage-deflate; server_no_context_takeover; client_no_context_takeover",
        b"permessage-deflate; server_max_window_bits=10; client_max_window_bits=12",
        b'permessage-deflate; client_max_window_bits="10", x-foo',
        b"permessage-deflate; server_max_window_bits=8, permessage-deflate",
        b"permessage-deflate; foo",
        b"permessage-deflate;;",
    ]
    text = "Grüße, κόσμε, hello hello hello".encode()
    valid = rec(0x01, text) + rec(0x08, text) + rec(0x00, bytes(range(200))) + rec(0x01, b"")
    for i, line in enumerate(lines):
        mode = 0x10 | (i & 1) | ((i % 8) << 1)
        write(d, "line%d.bin" % i, line + b"\n" + bytes([mode]) + valid)
    raw = ws_deflate_msgs([text, text])
    write(d, "raw-takeover.bin", lines[0] + b"\n" + b"\x0e" + rec(0x01, raw[0]) + rec(0x01, raw[1]))
    bomb = ws_deflate_msgs([b"\0" * 60000])[0]
    write(d, "raw-bomb.bin", lines[0] + b"\n" + b"\x0e" + rec(0x00, bomb))
    write(d, "raw-garbage.bin", lines[0] + b"\n" + b"\x0e" + rec(0x00, b"\xff\xff\xff\xff"))
    write(d, "raw-bfinal.bin", lines[0] + b"\n" + b"\x0e" + rec(0x01, b"\xf3\x48\xcd\xc9\xc9\x07\x00"))
    write(d, "raw-empty.bin", lines[0] + b"\n" + b"\x0e" + rec(0x00, b""))
    write(d, "valid-too-big.bin", lines[0] + b"\n" + b"\x10" + rec(0x00, b"q" * 1025))


if __name__ == "__main__":
    http1()
    wire()
    policy()
    declog()
    scenario()
    h2()
    ws()
    ws_deflate()
    total = 0
    for dp, _, files in os.walk(OUT):
        total += sum(os.path.getsize(os.path.join(dp, f)) for f in files)
    print("fuzz/corpus: %d bytes" % total)
