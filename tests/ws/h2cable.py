#!/usr/bin/python3
"""Action Cable over HTTP/2 (RFC 8441 extended CONNECT) against the real server running a Rails
app of scripts/gen-rails-app.sh with `action_cable :frontend` (PumaPlus::ActionCable) on a
cleartext -h2c listener. One HTTP/2 connection carries both the WebSocket (stream 1, the
Action Cable JSON protocol framed by tests/ws/h2ws.py's helpers) and the POST /broadcasts
requests (other streams):

  /usr/bin/python3 tests/ws/h2cable.py HOST PORT ROOM

welcome; subscribe to WorkerChannel (ROOM): confirm_subscription and the channel's first
transmission (the worker's pid); a broadcast made by POST /broadcasts arrives in Action
Cable's JSON; a foreign Origin is refused with the app's 404. Prints one JSON line per
message received and "OK" at the end; exits 1 on any failure. Every wait has a deadline."""
import json
import os
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h2ws  # noqa: E402 (the HTTP/2 client and WebSocket framing of the h2 WebSocket tests)


def messages(c, st, want, timeout=15.0):
    """Text messages of stream st until want(msg) holds (pings skipped); returns that one."""
    while True:
        for fin, op, payload in c.frames(st, 1):
            h2ws.expect(fin and op == 1, "a text frame, got opcode %d" % op)
            msg = json.loads(payload)
            if msg.get("type") == "ping":
                continue
            print(json.dumps(msg), flush=True)
            if want(msg):
                return msg
        h2ws.expect(st.reset is None and not st.ended, "the WebSocket stream ended (reset %r)" % st.reset)


def post(c, path, form):
    body = urllib.parse.urlencode(form).encode()
    st = c.request([(b":method", b"POST"), (b":scheme", b"http"), (b":path", path),
                    (b":authority", b"127.0.0.1"),
                    (b"content-type", b"application/x-www-form-urlencoded"),
                    (b"content-length", str(len(body)).encode())])
    st.no_ack = False
    c.send(st, body, end=True)
    c.pump(lambda: st.ended or st.reset is not None)
    h2ws.expect(st.status == 200, "POST %s: status %r" % (path, st.status))
    return st


def main():
    host, port, room = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    origin = ("http://127.0.0.1:%d" % port).encode()
    c = h2ws.Conn(host, port)
    # A foreign origin: Action Cable's own 404, on its own stream.
    bad = c.connect_ws(b"/cable", extra=[(b"origin", b"http://evil.example"),
                                          (b"sec-websocket-protocol", b"actioncable-v1-json")])
    c.pump(lambda: bad.status is not None or bad.reset is not None)
    h2ws.expect(bad.status == 404, "foreign origin: status %r" % bad.status)
    st = c.connect_ws(b"/cable", extra=[(b"origin", origin),
                                         (b"sec-websocket-protocol",
                                          b"actioncable-v1-json, actioncable-unsupported")])
    c.pump(lambda: st.status is not None or st.reset is not None)
    h2ws.expect(st.status == 200, "the CONNECT: status %r reset %r" % (st.status, st.reset))
    h2ws.expect(st.headers.get("sec-websocket-protocol") == "actioncable-v1-json",
                "subprotocol %r" % st.headers.get("sec-websocket-protocol"))
    messages(c, st, lambda m: m.get("type") == "welcome")
    identifier = json.dumps({"channel": "WorkerChannel", "room": room}, separators=(",", ":"))
    c.send(st, h2ws.ws_frame(1, json.dumps({"command": "subscribe", "identifier": identifier}).encode()))
    seen = {"confirm": False, "pid": None}

    def subscribed(m):
        h2ws.expect(m.get("identifier") == identifier, "a message for another subscription: %r" % m)
        if m.get("type") == "confirm_subscription":
            seen["confirm"] = True
        elif isinstance(m.get("message"), dict) and "subscribed_pid" in m["message"]:
            seen["pid"] = m["message"]["subscribed_pid"]
        return seen["confirm"] and seen["pid"]
    messages(c, st, subscribed)
    post(c, b"/broadcasts", {"room": room, "text": "over h2"})
    got = messages(c, st, lambda m: isinstance(m.get("message"), dict) and m["message"].get("text") == "over h2")
    h2ws.expect(got["identifier"] == identifier, "the broadcast's identifier %r" % got)
    c.send(st, h2ws.ws_frame(8, b"\x03\xe8"))
    print("OK", flush=True)


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("FAILED: %s" % e, flush=True)
        sys.exit(1)
