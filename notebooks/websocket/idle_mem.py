#!/usr/bin/env python3
"""The C front end's memory per idle WebSocket (not a test: it measures, it asserts nothing).

    python3 notebooks/websocket/idle_mem.py [--conns 2000] [--rounds 3] [--path /room?name=bench]
        [--bins LABEL=PATH,...] [--echo BYTES] [--json FILE]

--bins compares server binaries (default: this tree's build/server/puma-plus-server, labelled
"this"); each needs its ../gem/ext-lib beside it, as bench.py does. Per round, for each binary,
two fresh servers in turn (the order of all of them reversed every round): tests/apps/websocket on
PumaPlus::WebSocket, one worker of 3 threads (bench.py's `pumaplus-ws`). Each gets a warm-up
of 10 connections (opened, then closed), then its front end's RSS and PSS are read
(/proc/PID/smaps_rollup of the puma-plus-server process only), --conns WebSockets are opened
to --path and left idle in two halves, each followed by 3 s (the hub's 1 s timer trims idle
codecs) and a memory reading. The difference over all of them divided by --conns is the cost
of one idle connection as bench.py counts it; the second half's difference divided by its
connections is the marginal cost, without the server's pools (up to 64 read buffers of 16 KiB,
output chunks, queued events) that fill during the first half. One server's
clients offer nothing ("plain"), the other's offer `permessage-deflate;
client_max_window_bits` as browsers do ("deflate"; every 101 must agree to it, or the round
fails). The idle connections send no message, so zlib's streams are never created (they are
made on first use). The machine's steal over each round comes from /proc/stat.

--echo BYTES (use with --path /echo): each connection, once open, sends one text message of
BYTES bytes and waits for its echo before it idles. With deflate the message is compressed
(RSV1, raw DEFLATE with the sync-flush tail removed, as browsers send every message), so the
server inflates it, and the echo (at least 64 bytes) is compressed by the server: this shows
what the zlib streams that context takeover keeps cost once a message went each way.

Memory the kernel holds for the sockets is not in the process's RSS and is not counted.
"""
import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import wsload  # noqa: E402

DEFLATE_OFFER = b"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"


class Conn(wsload.WSConn):
    """wsload's connection, optionally offering permessage-deflate and checking the answer."""

    def __init__(self, client, path, host, origin, deflate):
        super().__init__(client, path, host, origin, None)
        self.deflate = deflate
        if deflate:
            self.req = self.req[:-2] + DEFLATE_OFFER + b"\r\n"

    def send_message(self, text):
        """One text message: compressed (RSV1) when deflate was agreed, with a fresh context
        (the client side keeps none: it may, and it makes no difference to the server)."""
        if self.deflate:
            z = zlib.compressobj(wbits=-15)
            body = z.compress(text) + z.flush(zlib.Z_SYNC_FLUSH)
            self.send_rsv1(body[:-4])
        else:
            self.send(0x1, text)

    def send_rsv1(self, payload):
        n = len(payload)
        key = os.urandom(4)
        head = bytes([0xC1, 0x80 | n]) if n < 126 else bytes([0xC1, 0xFE]) + n.to_bytes(2, "big")
        self.transport.write(head + key + bytes(b ^ key[i & 3] for i, b in enumerate(payload)))

    def data_received(self, data):
        if not self.upgraded and self.deflate:
            head = bytes(self.buf + data)
            end = head.find(b"\r\n\r\n")
            if end >= 0 and b"permessage-deflate" not in head[:end].lower():
                self.ready.set_exception(ConnectionError("deflate not agreed: %r" % head[:end]))
                self.transport.close()
                return
        super().data_received(data)


class EchoClient(wsload.Client):
    """wsload's client; a connection's first message from the server resolves its `echoed`."""

    def on_text(self, c, payload):
        f = getattr(c, "echoed", None)
        if f is not None and not f.done():
            f.set_result(payload)


async def open_conns(port, path, n, deflate, parallel=100, echo=0):
    client = EchoClient("ws://127.0.0.1:%d%s" % (port, path), "raw")
    loop = asyncio.get_running_loop()
    sem = asyncio.Semaphore(parallel)

    async def one():
        async with sem:
            _, c = await loop.create_connection(
                lambda: Conn(client, client.path, "127.0.0.1:%d" % port, client.origin, deflate),
                "127.0.0.1", port)
            await asyncio.wait_for(c.ready, 60)
            if echo:
                c.echoed = loop.create_future()
                c.send_message((b"x%d " % len(client.conns)).ljust(echo, b"m"))
                await asyncio.wait_for(c.echoed, 60)
            client.conns.append(c)

    t0 = time.monotonic()
    await asyncio.wait_for(asyncio.gather(*(one() for _ in range(n))), 300)
    return client, time.monotonic() - t0


def frontend_memory(srv):
    for p in srv.pids():
        if wsload.comm(p).startswith("puma-plus-serv"):
            return wsload.memory(p)
    raise SystemExit("no puma-plus-server process under pid %d" % srv.proc.pid)


async def one(label, binary, kind, args, tmp, rnd):
    bench.SERVER_BIN = binary
    srv = bench.Server("pumaplus-ws", None, os.path.join(tmp, "%s-%s-%d.log" % (label, kind, rnd)))
    try:
        deflate = kind == "deflate"
        warm, _ = await open_conns(srv.port, args.path, 10, deflate)
        warm.close_all()
        await asyncio.sleep(2)
        s0 = wsload.steal_sample()
        rss0, pss0 = frontend_memory(srv)
        half = args.conns // 2
        first, secs1 = await open_conns(srv.port, args.path, half, deflate, echo=args.echo)
        await asyncio.sleep(3)
        rss_h, pss_h = frontend_memory(srv)
        second, secs2 = await open_conns(srv.port, args.path, args.conns - half, deflate,
                                         echo=args.echo)
        await asyncio.sleep(3)
        rss1, pss1 = frontend_memory(srv)
        s1 = wsload.steal_sample()
        lost = first.lost + second.lost
        first.close_all()
        second.close_all()
        return {"bin": label, "kind": kind, "echo": args.echo, "path": args.path, "round": rnd, "conns": args.conns, "open_s": round(secs1 + secs2, 2),
                "rss_per_conn": round((rss1 - rss0) / args.conns),
                "pss_per_conn": round((pss1 - pss0) / args.conns),
                "rss_marginal": round((rss1 - rss_h) / (args.conns - half)),
                "rss_before": rss0, "rss_half": rss_h, "rss_after": rss1, "lost": lost,
                "steal_pct": round(wsload.steal_pct(s0, s1), 2),
                "busy_pct": round(wsload.busy_pct(s0, s1), 1)}
    finally:
        srv.stop()


def span(rs, key):
    return "%d..%d" % (min(r[key] for r in rs), max(r[key] for r in rs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--conns", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--path", default="/room?name=bench")
    ap.add_argument("--bins", default="this=" + bench.SERVER_BIN)
    ap.add_argument("--echo", type=int, default=0)
    ap.add_argument("--json")
    args = ap.parse_args()
    bins = [b.split("=", 1) for b in args.bins.split(",")]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < args.conns + 100:
        raise SystemExit("ulimit -n hard limit %d is below --conns + 100" % hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    results = []
    with tempfile.TemporaryDirectory(prefix="pp-idle-mem-") as tmp:
        runs = [(label, path, kind) for label, path in bins for kind in ("plain", "deflate")]
        for rnd in range(args.rounds):
            for label, path, kind in (runs if rnd % 2 == 0 else runs[::-1]):
                r = asyncio.run(one(label, path, kind, args, tmp, rnd))
                print(json.dumps(r), flush=True)
                results.append(r)
    for (label, _), kind in [(b, k) for b in bins for k in ("plain", "deflate")]:
        rs = [r for r in results if r["kind"] == kind and r["bin"] == label]
        print("%-8s %-8s RSS B/conn median %d (%s), PSS median %d, second half's RSS B/conn median "
              "%d (%s), steal median %.2f%%" % (
                  label, kind, statistics.median(r["rss_per_conn"] for r in rs), span(rs, "rss_per_conn"),
                  statistics.median(r["pss_per_conn"] for r in rs),
                  statistics.median(r["rss_marginal"] for r in rs), span(rs, "rss_marginal"),
                  statistics.median(r["steal_pct"] for r in rs)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
