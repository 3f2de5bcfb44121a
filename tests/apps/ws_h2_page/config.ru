# frozen_string_literal: true

# A browser's WebSocket over HTTP/2 (RFC 8441), for tests/e2e/test_ws_h2h3.rb: Chromium loads
# /page over TLS (ALPN h2), and the page's wss:// WebSocket to /echo rides that HTTP/2
# connection as an extended CONNECT. The echo answers "proto" with the SERVER_PROTOCOL its
# upgrade request had, so the page can tell which protocol carried it.
#   /page  the page: its script exchanges messages and writes the outcome, as JSON, to
#          document.body.dataset.result (read by tests/ws/h2_browser.py)
#   /echo  (upgrade) echo on front-end-owned WebSockets (PumaPlus::WebSocket)
require "puma_plus"

class ProtoEcho
  def on_open(conn)
    conn.state[:proto] = conn.env["SERVER_PROTOCOL"]
  end

  def on_message(conn, data)
    # a binary String goes as a binary message: the env's value is text
    return conn.send(conn.state[:proto].to_s.dup.force_encoding(Encoding::UTF_8)) if data == "proto"

    conn.send(data)
  end
end

PAGE = <<~HTML
  <!doctype html>
  <html><head><meta charset="utf-8"><title>WebSocket over HTTP/2</title></head><body>
  <script>
  (async () => {
    const result = { opened: false, echoes: 0, mismatches: [] };
    const finish = (extra) => { Object.assign(result, extra); document.body.dataset.result = JSON.stringify(result); };
    try {
      const ws = new WebSocket("wss://" + location.host + "/echo");
      ws.binaryType = "arraybuffer";
      const inbox = [];
      let waiter = null;
      ws.onmessage = (ev) => { inbox.push(ev.data); if (waiter) { waiter(); waiter = null; } };
      const closed = new Promise((resolve) => { ws.onclose = (ev) => resolve(ev); });
      const next = async () => {
        while (inbox.length === 0)
          await Promise.race([new Promise((r) => { waiter = r; }), closed.then(() => { throw new Error("closed early"); })]);
        return inbox.shift();
      };
      await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = () => reject(new Error("error before open")); });
      result.opened = true;
      result.extensions = ws.extensions;
      const bytes = new Uint8Array(256).map((_, i) => i);
      const big = "0123456789abcdef".repeat(300 * 64);  // 300 KiB: more than one stream window
      const sent = ["héllo, κόσμε 👋"];
      for (let i = 0; i < 50; i++) sent.push("burst " + i);
      sent.push(bytes.buffer, big, "last");
      for (const m of sent) ws.send(m);
      for (let i = 0; i < sent.length; i++) {
        const got = await next(), want = sent[i];
        let same;
        if (want instanceof ArrayBuffer) {
          const g = got instanceof ArrayBuffer ? new Uint8Array(got) : null;
          same = g !== null && g.length === 256 && g.every((b, j) => b === j);
        } else same = got === want;
        if (same) result.echoes++;
        else result.mismatches.push({ index: i, got: typeof got === "string" ? got.slice(0, 40) : "binary" });
      }
      ws.send("proto");
      result.protocol = await next();
      ws.close(4001, "bye");
      const ev = await closed;
      finish({ sent: sent.length, close_code: ev.code, clean: ev.wasClean });
    } catch (e) { finish({ error: String(e) }); }
  })();
  </script></body></html>
HTML

run(lambda do |env|
  if PumaPlus::WebSocket.websocket?(env) && env["PATH_INFO"] == "/echo"
    PumaPlus::WebSocket.accept(env, ProtoEcho)
  elsif env["PATH_INFO"] == "/page"
    [200, { "content-type" => "text/html; charset=utf-8" }, [PAGE]]
  else
    [404, { "content-type" => "text/plain" }, ["not found\n"]]
  end
end)
