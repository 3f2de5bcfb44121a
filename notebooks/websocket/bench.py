#!/usr/bin/env python3
"""WebSocket benchmarks (issue 25; not tests): idle connections' memory, broadcast fan-out and
message round trips, against Action Cable on puma 8 (the reference) and on puma-plus's full
hijack path, with the same Rails 7.2 app; and on the front-end-owned path: the same app with
PumaPlus::ActionCable (pumaplus-cable), and tests/apps/websocket/config.ru on
PumaPlus::WebSocket without Rails (pumaplus-ws: the room and echo endpoints).

    python3 notebooks/websocket/bench.py [--servers puma8,pumaplus-hijack,pumaplus-cable,pumaplus-ws]
        [--rounds 3]
        [--conns 10000] [--broadcasts 5] [--rtt-rate 5000] [--rtt-low-rate 500] [--rtt-secs 10]
        [--rtt-conns 50]
        [--json FILE]

Per round and server (servers interleaved within a round): a fresh server; a warm-up (10
connections, one broadcast, some echoes); PSS and RSS of the server's process tree (front end
and Ruby apart); --conns connections opened and subscribed (Action Cable's subscribe to
BenchChannel, which streams "room:bench"); 3 s to settle; memory again: the difference per
connection. Then --broadcasts broadcasts (POST /broadcasts room=bench, the app's Action Cable
broadcast), each timed from just before the POST until the last subscriber has it, with the
server tree's CPU seconds over that interval. Then all are closed and --rtt-conns fresh
connections send echo messages for --rtt-secs at a total rate (BenchChannel#echo,
`perform`), each timed until its answer; first at --rtt-low-rate (0: not run), a rate the
references keep up with, then at --rtt-rate. The hypervisor's steal (/proc/stat) is recorded over
each phase. The load client is wsload.py (one asyncio process on the same 2-core machine: its
CPU competes with the server's, which the README says).

Needs the RubyGems column (scripts/install-gems.sh: puma 8.0.2, rails 7.2) and the Rails app
of scripts/gen-rails-app.sh 7.2 (build/apps/rails-7.2, generated if missing), a built
puma-plus-server (build/server/) and a hard `ulimit -n` above --conns + 100 (raised to the hard
limit here). Stops everything it started by PID (process groups).
"""
import asyncio
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wsload  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
GEM_HOME = os.path.join(ROOT, "build/gems")
RUBYGEMS_GEMFILE = os.path.join(ROOT, "tests/apps/gemfiles/rubygems/Gemfile")
SERVER_BIN = os.environ.get("PP_SERVER_BIN", os.path.join(ROOT, "build/server/puma-plus-server"))

BENCH_CHANNEL = """\
# The benchmark's channel (notebooks/websocket/bench.py): streams one room and echoes.
class BenchChannel < ApplicationCable::Channel
  def subscribed
    stream_from "room:#{params[:room]}"
  end

  def echo(data)
    transmit({ "seq" => data["seq"] })
  end
end
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def clean_env():
    env = {k: v for k, v in os.environ.items() if k not in (
        "GEM_HOME", "GEM_PATH", "BUNDLE_GEMFILE", "BUNDLE_FROZEN", "BUNDLE_APP_CONFIG",
        "BUNDLE_USER_HOME", "RUBYOPT", "BUNDLE_BIN_PATH", "RUBYLIB")}
    env.update({"GEM_HOME": GEM_HOME, "BUNDLE_APP_CONFIG": os.path.join(GEM_HOME, ".bundle-config"),
                "BUNDLE_USER_HOME": os.path.join(GEM_HOME, ".bundle-home"),
                "RAILS_ENV": "production", "SECRET_KEY_BASE": "pp-bench-" + "k" * 64,
                "RAILS_LOG_LEVEL": "warn", "RAILS_MAX_THREADS": "3"})
    return env


def prepare_app(tmp):
    src = os.path.join(ROOT, "build/apps/rails-7.2")
    if not os.path.isdir(src):
        subprocess.run(["bash", os.path.join(ROOT, "scripts/gen-rails-app.sh"), "7.2"], check=True)
    app = os.path.join(tmp, "app")
    shutil.copytree(src, app, symlinks=True)
    with open(os.path.join(app, "app/channels/bench_channel.rb"), "w") as f:
        f.write(BENCH_CHANNEL)
    return app


class Server:
    """One server under test in its own process group."""

    def __init__(self, kind, app, log):
        self.kind = kind
        self.port = free_port()
        env = clean_env()
        if kind == "puma8":
            # puma 8.0.2 from the pinned set, single mode, 3 threads (puma-plus's app has 3).
            env.update({"BUNDLE_GEMFILE": RUBYGEMS_GEMFILE, "BUNDLE_FROZEN": "true"})
            argv = ["bundle", "exec", "puma", "-e", "production", "-t", "3:3",
                    "-b", "tcp://127.0.0.1:%d" % self.port, "config.ru"]
        elif kind in ("pumaplus-hijack", "pumaplus-cable"):
            # pumaplus-hijack: the /cable handshake is fully hijacked into the one worker (the
            # path before issue 25). pumaplus-cable: the same app with PumaPlus::ActionCable
            # (PUMA_PLUS_ACTION_CABLE=frontend): the front end owns the WebSockets, Action
            # Cable's channels get tagged messages.
            if kind == "pumaplus-cable":
                env["PUMA_PLUS_ACTION_CABLE"] = "frontend"
            env.update({"BUNDLE_GEMFILE": os.path.join(app, "Gemfile"), "PUMA_PLUS_SERVER": SERVER_BIN,
                        "WEB_CONCURRENCY": "1", "PORT": str(self.port), "PP_CONTROL_PORT": str(free_port())})
            native = os.path.join(os.path.dirname(SERVER_BIN), "../gem/ext-lib")
            if os.path.isdir(native):
                env["RUBYLIB"] = os.path.abspath(native)
            argv = ["bundle", "exec", "puma-plus"]
        elif kind == "pumaplus-ws":
            # the front end owns the WebSockets (issue 25): tests/apps/websocket/config.ru on
            # PumaPlus::WebSocket, one worker of 3 threads, no Rails.
            app = os.path.join(ROOT, "tests/apps/websocket")
            native = os.path.join(os.path.dirname(SERVER_BIN), "../gem/ext-lib")
            env = {k: v for k, v in env.items() if not k.startswith(("BUNDLE", "GEM_"))}
            if os.path.isdir(native):
                env["RUBYLIB"] = os.path.abspath(native)
            argv = [SERVER_BIN, "-app", os.path.join(app, "config.ru"), "-workers", "1", "-threads", "3",
                    "-listen", "127.0.0.1:%d" % self.port, "-control", "127.0.0.1:%d" % free_port(),
                    "-gem-dir", os.path.join(ROOT, "gem"), "-quiet"]
        else:
            raise SystemExit("unknown server %r" % kind)
        self.log = open(log, "w")
        self.proc = subprocess.Popen(argv, cwd=app, env=env, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 90
        while True:
            if self.proc.poll() is not None:
                raise SystemExit("%s exited during boot; log %s" % (kind, log))
            try:
                if http_get(self.port, self.ready_path()).startswith(b"HTTP/1.1 200"):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise SystemExit("%s not serving within 90 s; log %s" % (kind, log))
            time.sleep(0.2)

    def ready_path(self):
        return "/pid" if self.kind == "pumaplus-ws" else "/"

    # What the load client talks to: (protocol, idle/broadcast URL, echo URL, broadcast POST).
    def endpoints(self):
        base = "ws://127.0.0.1:%d" % self.port
        if self.kind == "pumaplus-ws":
            return "raw", base + "/room?name=bench", base + "/echo", "/broadcast?room=bench"
        return "cable", base + "/cable", base + "/cable", "/broadcasts"

    def pids(self):
        return wsload.tree(self.proc.pid)

    def memory(self):
        """{"frontend": (rss, pss), "ruby": (rss, pss)}: the C front end apart from the rest."""
        out = {"frontend": [0, 0], "ruby": [0, 0]}
        for p in self.pids():
            c = wsload.comm(p)
            if c in ("bundle",) and p == self.proc.pid and self.kind == "puma8":
                pass  # `bundle exec` execs puma: this is the server itself
            side = "frontend" if c.startswith("puma-plus-serv") else "ruby"
            rss, pss = wsload.memory(p)
            out[side][0] += rss
            out[side][1] += pss
        return out

    def cpu(self):
        return sum(wsload.cpu_seconds(p) for p in self.pids())

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.log.close()


def http_get(port, path):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" % path).encode())
    data = s.recv(4096)
    s.close()
    return data


async def http_post_broadcast(port, text, path="/broadcasts"):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    # Rails' BroadcastsController takes a form; tests/apps/websocket sends the body as it is.
    body = "room=bench&text=" + text if path == "/broadcasts" else text
    w.write(("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
             "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n%s" %
             (path, len(body), body)).encode())
    await w.drain()
    head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 60)
    w.close()
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError("POST /broadcasts: %r" % head[:100])


async def one_server(kind, app, args, tmp, rnd):
    res = {"server": kind, "round": rnd}
    srv = Server(kind, app, os.path.join(tmp, "%s-%d.log" % (kind, rnd)))
    proto, url, echo_url, bpath = srv.endpoints()

    def post(text):
        return lambda: http_post_broadcast(srv.port, text, bpath)
    try:
        # warm-up: load Action Cable's code paths once
        warm = wsload.Client(url, proto)
        await warm.open(10)
        await warm.wait_broadcast("warmup", post("warmup"), 30)
        warm.close_all()
        warm = wsload.Client(echo_url, proto)
        await warm.open(10)
        await warm.echo_load(50, 1)
        warm.close_all()
        await asyncio.sleep(2)

        m0 = srv.memory()
        s0 = wsload.steal_sample()
        c = wsload.Client(url, proto)
        res["open_seconds"] = await c.open(args["conns"], timeout=900)
        await asyncio.sleep(3)
        m1 = srv.memory()
        res.update({"open_" + k: v for k, v in phase(s0).items()})
        n = len(c.conns)
        res["conns"] = n
        for side in ("frontend", "ruby"):
            res[side + "_rss_per_conn"] = (m1[side][0] - m0[side][0]) / n
            res[side + "_pss_per_conn"] = (m1[side][1] - m0[side][1]) / n
            res[side + "_pss_before"] = m0[side][1]
            res[side + "_pss_after"] = m1[side][1]

        res["broadcasts"] = []
        for i in range(args["broadcasts"]):
            await asyncio.sleep(1)
            text = "b%d-%d" % (rnd, i)
            s0, cpu0, ccpu0 = wsload.steal_sample(), srv.cpu(), client_cpu()
            last, p50, got = await c.wait_broadcast(text, post(text), 120)
            res["broadcasts"].append({"last_s": last, "p50_s": p50, "received": got, "cpu_s": srv.cpu() - cpu0,
                                      "client_cpu_s": client_cpu() - ccpu0,
                                      **phase(s0)})
        res["lost"] = c.lost
        c.close_all()
        res["quiet_after_close_s"] = await quiet(srv)

        e = wsload.Client(echo_url, proto)
        await e.open(args["rtt_conns"])
        # the low rate first: a saturating run leaves a backlog behind it
        for key, rate in (("rtt_low", args["rtt_low_rate"]), ("rtt", args["rtt_rate"])):
            if not rate:
                continue
            await asyncio.sleep(2)
            s0, cpu0, ccpu0 = wsload.steal_sample(), srv.cpu(), client_cpu()
            sent, answered, rtt = await e.echo_load(rate, args["rtt_secs"])
            res[key] = {"sent": sent, "answered": answered, "rate": sent / args["rtt_secs"],
                        "p50_ms": 1000 * rtt[len(rtt) // 2] if rtt else None,
                        "p99_ms": 1000 * rtt[int(len(rtt) * 0.99)] if rtt else None,
                        "cpu_s": srv.cpu() - cpu0, "client_cpu_s": client_cpu() - ccpu0,
                        **phase(s0)}
        e.close_all()
    finally:
        srv.stop()
    return res


async def quiet(srv, limit=120):
    """Waits until the server tree uses under 5% of a core over a second (it has finished with
    the closed connections: Action Cable unsubscribes each in Ruby), at least 3 s, at most
    `limit`. Returns the seconds waited."""
    t0 = time.monotonic()
    await asyncio.sleep(2)
    while time.monotonic() - t0 < limit:
        c0 = srv.cpu()
        await asyncio.sleep(1)
        if srv.cpu() - c0 < 0.05:
            break
    return time.monotonic() - t0


def phase(s0):
    s1 = wsload.steal_sample()
    return {"steal_pct": wsload.steal_pct(s0, s1), "machine_busy_pct": wsload.busy_pct(s0, s1)}


def client_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summary(results, servers):
    lines = []
    for kind in servers:
        rs = [r for r in results if r["server"] == kind]
        bc = [b for r in rs for b in r["broadcasts"]]
        lines.append("%s: %d round(s)" % (kind, len(rs)))
        lines.append("  idle %d conns: front end %.0f B/conn PSS (%.0f RSS), Ruby %.0f B/conn PSS (%.0f RSS); "
                     "opened in %.1f s" % (
                         med([r["conns"] for r in rs]), med([r["frontend_pss_per_conn"] for r in rs]),
                         med([r["frontend_rss_per_conn"] for r in rs]), med([r["ruby_pss_per_conn"] for r in rs]),
                         med([r["ruby_rss_per_conn"] for r in rs]), med([r["open_seconds"] for r in rs])))
        lines.append("  broadcast: last %.1f ms, p50 %.1f ms, server CPU %.0f ms, client CPU %s ms (median of %d; "
                     "min last %.1f, max %.1f); all received in %d of %d; steal median %.1f%%, machine busy %s%%" % (
                         1000 * med([b["last_s"] for b in bc]), 1000 * med([b["p50_s"] for b in bc]),
                         1000 * med([b["cpu_s"] for b in bc]),
                         "%.0f" % (1000 * med([b.get("client_cpu_s") for b in bc])) if bc and "client_cpu_s" in bc[0]
                         else "?", len(bc),
                         1000 * min(b["last_s"] for b in bc), 1000 * max(b["last_s"] for b in bc),
                         sum(1 for b, r in ((b, r) for r in rs for b in r["broadcasts"]) if b["received"] == r["conns"]),
                         len(bc), med([b["steal_pct"] for b in bc]),
                         "%.0f" % med([b.get("machine_busy_pct") for b in bc]) if "machine_busy_pct" in bc[0] else "?"))
        for key in ("rtt", "rtt_low"):
            rr = [r[key] for r in rs if key in r]
            if not rr:
                continue
            lines.append("  echo at %.0f msg/s: p50 %.2f ms, p99 %.2f ms, answered %d of %d, server CPU %.2f s "
                         "per %.0f s, client CPU %s s, steal %.1f%%, machine busy %s%%" % (
                             med([x["rate"] for x in rr]), med([x["p50_ms"] for x in rr]),
                             med([x["p99_ms"] for x in rr]), med([x["answered"] for x in rr]),
                             med([x["sent"] for x in rr]), med([x["cpu_s"] for x in rr]),
                             rr[0]["sent"] / rr[0]["rate"],
                             "%.2f" % med([x.get("client_cpu_s") for x in rr]) if "client_cpu_s" in rr[0] else "?",
                             med([x["steal_pct"] for x in rr]),
                             "%.0f" % med([x.get("machine_busy_pct") for x in rr]) if "machine_busy_pct" in rr[0]
                             else "?"))
    return "\n".join(lines)


def main():
    args = {"servers": "puma8,pumaplus-hijack", "rounds": 3, "conns": 10000, "broadcasts": 5,
            "rtt_rate": 5000, "rtt_low_rate": 500, "rtt_secs": 10, "rtt_conns": 50, "json": None}
    a = sys.argv[1:]
    while a:
        k = a.pop(0)
        if not k.startswith("--") or k[2:].replace("-", "_") not in args:
            raise SystemExit(__doc__)
        key = k[2:].replace("-", "_")
        v = a.pop(0)
        args[key] = v if key in ("servers", "json") else int(v)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: servers are stopped
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < args["conns"] + 100:
        raise SystemExit("ulimit -n hard limit %d is under %d + 100" % (hard, args["conns"]))
    servers = args["servers"].split(",")
    tmp = tempfile.mkdtemp(prefix="pp-wsbench-")
    app = prepare_app(tmp)
    print("bench.py %s; logs in %s" % (json.dumps(args), tmp), flush=True)
    results = []
    try:
        for rnd in range(args["rounds"]):
            order = servers if rnd % 2 == 0 else servers[::-1]
            for kind in order:
                try:
                    r = asyncio.run(one_server(kind, app, args, tmp, rnd))
                except Exception as e:  # noqa: BLE001 (recorded; the run goes on)
                    print("round %d %s failed: %r" % (rnd, kind, e), flush=True)
                    continue
                print(json.dumps(r), flush=True)
                results.append(r)
    finally:
        if args["json"]:
            with open(args["json"], "w") as f:
                json.dump(results, f, indent=1)
    print(summary(results, servers))


if __name__ == "__main__":
    main()
