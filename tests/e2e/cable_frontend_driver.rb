# frozen_string_literal: true

# Action Cable over front-end WebSockets (PumaPlus::ActionCable) in one process, without the C
# server: run in a generated Rails app's directory (`bundle exec ruby THIS`, RAILS_ENV=production),
# it loads the app, turns the switch on, and plays the server's side of one worker connection
# over a socketpair (docs/PROTOCOL.md "WebSocket frames"): the /cable upgrade REQUEST, WS_OPEN,
# a subscribe WS_MESSAGE, a broadcast made by POST /broadcasts, a perform action, a second
# subscription to the same stream, unsubscribe, WS_CLOSE, a connect that rejects. It
# checks each frame the worker answers and prints "OK <step>" lines; any mismatch raises
# (exit status 1). tests/e2e/test_action_cable.rb runs it for Rails 7.2 and 6.1.
ENV["PUMA_PLUS_ACTION_CABLE"] = "frontend"
require File.join(Dir.pwd, "config/environment")
require "puma_plus"
require "puma_plus/action_cable"
require "json"
require "socket"

W = PumaPlus::Wire
WS = PumaPlus::WebSocket

def check(cond, what)
  raise "FAILED: #{what}" unless cond

  puts "OK #{what.split(':').first}"
end

check(PumaPlus::ActionCable.install, "install: the shims went into the loaded Action Cable")
monitor = []
WS.monitor_out = ->(bytes) { monitor << bytes.dup }

server, client = UNIXSocket.pair
proto = PumaPlus::Worker.prototype_env(threads: 2, worker_index: 0)
conn = PumaPlus::Connection.new(Rails.application, client, proto, worker_index: 0, thread_index: 0, log: $stderr)
thread = Thread.new { conn.run }
$decoder = W::Decoder.new

def read_frame(sock)
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 15
  loop do
    frame = $decoder.next_frame
    return frame if frame

    left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
    raise "FAILED: no frame within 15 s" if left <= 0
    next unless IO.select([sock], nil, nil, left)

    data = sock.read_nonblock(65_536, exception: false)
    raise "FAILED: the worker closed its connection" if data.nil?

    $decoder.feed(data) unless data == :wait_readable
  end
end

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)

def env_pairs(method, path, headers, extra = [], query: "")
  pairs = [["REQUEST_METHOD", method], ["SCRIPT_NAME", ""], ["PATH_INFO", path], ["QUERY_STRING", query],
           ["SERVER_NAME", "127.0.0.1"], ["SERVER_PORT", "3000"], ["SERVER_PROTOCOL", "HTTP/1.1"],
           ["REMOTE_ADDR", "127.0.0.1"], ["rack.url_scheme", "http"], ["HTTP_HOST", "127.0.0.1:3000"]]
  headers.each { |k, v| pairs << [k == "CONTENT_TYPE" || k == "CONTENT_LENGTH" ? k : "HTTP_#{k}", v] }
  pairs + extra + [["REQUEST_URI", path], ["puma_plus.request_id", "1"], ["puma_plus.queue_ns", "0"]]
end

def request(sock, id, method, path, headers, extra = [], body = "", query: "")
  sock.write(W.encode(W::Request.new(id, now, now, 0, env_pairs(method, path, headers, extra, query: query).flatten, body.b)))
end

# Frames up to the end of request `id` (RESPONSE_END) or event `id` (WS_DONE).
def until_end(sock, id)
  frames = []
  loop do
    f = read_frame(sock)
    frames << f
    return frames if (f.is_a?(W::ResponseEnd) || f.is_a?(W::WsDone)) && f.to_a[0] == id
  end
end

raise "FAILED: no HELLO" unless read_frame(server).is_a?(W::Hello)

# 1. The upgrade: Action Cable's own process (origin check) answers our 101.
ws_headers = { "UPGRADE" => "websocket", "CONNECTION" => "Upgrade", "ORIGIN" => "http://127.0.0.1:3000",
               "SEC_WEBSOCKET_KEY" => "dGhlIHNhbXBsZSBub25jZQ==", "SEC_WEBSOCKET_VERSION" => "13",
               "SEC_WEBSOCKET_PROTOCOL" => "actioncable-v1-json, actioncable-unsupported" }
ws_extra = [["puma_plus.websocket?", "1"], ["puma_plus.websocket.protocols", "actioncable-v1-json, actioncable-unsupported"]]
request(server, 1, "GET", "/cable", ws_headers, ws_extra)
frames = until_end(server, 1)
head = frames.find { |f| f.is_a?(W::ResponseHead) }
fields = head.headers.each_slice(2).to_a
check(head.status == 101, "upgrade: 101 (got #{head.status})")
check(fields.include?(["puma-plus-websocket", "sticky"]), "sticky: route field #{fields.inspect}")
check(fields.include?(["sec-websocket-protocol", "actioncable-v1-json"]), "protocol: actioncable-v1-json")
handler = fields.assoc("puma-plus-websocket-handler")[1]

# A handshake from an origin Action Cable does not admit: its 404, no 101.
request(server, 9, "GET", "/cable", ws_headers.merge("ORIGIN" => "http://evil.example"), ws_extra)
refused = until_end(server, 9).find { |f| f.is_a?(W::ResponseHead) }
check(refused.status == 404, "origin: a foreign origin is refused with 404 (got #{refused.status})")

# 2. WS_OPEN: handle_open sends the welcome on this slot connection.
cid = 77
server.write(W.encode(W::WsOpen.new(2, cid, now, now, handler.b, 0, "actioncable-v1-json".b, [], env_pairs("GET", "/cable", ws_headers, ws_extra).flatten)))
frames = until_end(server, 2)
sends = frames.grep(W::WsSend)
check(sends.size == 1 && sends[0].conn_id == cid && JSON.parse(sends[0].data) == { "type" => "welcome" },
      "welcome: #{frames.inspect}")

# 3. Subscribe: stream_from is a WS_TAG with the subscription's envelope; then the channel's
# transmit and the confirmation as WS_SEND.
identifier = JSON.generate({ "channel" => "WorkerChannel", "room" => "r1" })
server.write(W.encode(W::WsMessage.new(3, cid, now, now, handler.b, 1,
                                       JSON.generate({ "command" => "subscribe", "identifier" => identifier }).b)))
frames = until_end(server, 3)
tags = frames.grep(W::WsTag)
check(tags.size == 1 && tags[0].op == 0 && tags[0].tag == "room:r1" && tags[0].conn_id == cid,
      "stream_from: one WS_TAG add room:r1 #{frames.inspect}")
sent = frames.grep(W::WsSend).map { |f| JSON.parse(f.data) }
check(sent.any? { |m| m["type"] == "confirm_subscription" && m["identifier"] == identifier }, "confirm: #{sent}")
check(sent.any? { |m| m["identifier"] == identifier && m.dig("message", "subscribed_pid") == Process.pid &&
                      m.dig("message", "pubsub") == "PumaPlus::ActionCable::Pubsub" }, "transmit: #{sent}")
check(frames.index(tags[0]) < frames.index { |f| f.is_a?(W::WsSend) && f.data.include?("confirm_subscription") },
      "order: the tag is registered before the confirmation leaves")

# 4. POST /broadcasts: ActionCable.server.broadcast is one WS_BROADCAST on the request's
# connection; the envelope around it is the JSON Action Cable would have sent.
body = URI.encode_www_form("room" => "r1", "text" => "hi")
request(server, 4, "POST", "/broadcasts", { "CONTENT_TYPE" => "application/x-www-form-urlencoded",
                                            "CONTENT_LENGTH" => body.bytesize.to_s }, [], body)
frames = until_end(server, 4)
bc = frames.grep(W::WsBroadcast)
check(frames.find { |f| f.is_a?(W::ResponseHead) }&.status == 200, "broadcast request: 200 #{frames.inspect[0, 400]}")
check(bc.size == 1 && bc[0].tag == "room:r1" && bc[0].opcode == 1, "broadcast: one WS_BROADCAST to room:r1")
wrapped = JSON.parse(tags[0].prefix + bc[0].data + tags[0].suffix)
check(wrapped == { "identifier" => identifier, "message" => { "text" => "hi", "from_pid" => Process.pid } },
      "envelope: #{wrapped}")

# 4a. perform: a channel action (given to the app's WorkerChannel here) runs in the slot; its
# transmit is a WS_SEND, its broadcast one WS_BROADCAST.
WorkerChannel.class_eval do
  def speak(data)
    transmit({ "said" => data["text"] })
    ActionCable.server.broadcast("room:#{params[:room]}", { "text" => data["text"], "from_pid" => Process.pid })
  end
end
server.write(W.encode(W::WsMessage.new(40, cid, now, now, handler.b, 1, JSON.generate(
  { "command" => "message", "identifier" => identifier, "data" => JSON.generate({ "action" => "speak", "text" => "yo" }) }
).b)))
frames = until_end(server, 40)
said = frames.grep(W::WsSend).map { |f| JSON.parse(f.data) }
check(said == [{ "identifier" => identifier, "message" => { "said" => "yo" } }], "perform: transmit #{said}")
bc = frames.grep(W::WsBroadcast)
check(bc.size == 1 && JSON.parse(bc[0].data) == { "text" => "yo", "from_pid" => Process.pid } && bc[0].tag == "room:r1",
      "perform: broadcast #{bc.inspect}")

# 4b. A second subscription of this connection to the same broadcasting: the server keeps one
# envelope per tag and connection, so it takes Action Cable's pubsub path; the same broadcast
# reaches it through the adapter, transmitted from the adapter's thread (the monitor connection).
id2 = JSON.generate({ "channel" => "WorkerChannel", "room" => "r1", "second" => true })
server.write(W.encode(W::WsMessage.new(41, cid, now, now, handler.b, 1,
                                       JSON.generate({ "command" => "subscribe", "identifier" => id2 }).b)))
frames = until_end(server, 41)
check(frames.grep(W::WsTag).empty?, "second subscription: no WS_TAG #{frames.inspect}")
def monitor_json(monitor) = monitor.filter_map { |b| f, = W.decode(b); JSON.parse(f.data) if f.is_a?(W::WsSend) }
# Its confirmation waits for the adapter's subscribe (Action Cable's event loop thread): it
# leaves from the slot or from that thread (the monitor connection), whichever finishes last.
confirmed = lambda do
  (frames.grep(W::WsSend).map { |f| JSON.parse(f.data) } + monitor_json(monitor))
    .any? { |m| m["type"] == "confirm_subscription" && m["identifier"] == id2 }
end
deadline = Time.now + 10
sleep 0.05 until confirmed.call || Time.now > deadline
check(confirmed.call, "second confirm: after the adapter's subscribe")
body = URI.encode_www_form("room" => "r1", "text" => "twice")
request(server, 42, "POST", "/broadcasts", { "CONTENT_TYPE" => "application/x-www-form-urlencoded",
                                             "CONTENT_LENGTH" => body.bytesize.to_s }, [], body)
frames = until_end(server, 42)
check(frames.grep(W::WsBroadcast).size == 1, "second broadcast: still one WS_BROADCAST")
deadline = Time.now + 10
got = ->(m) { m["identifier"] == id2 && m.dig("message", "text") == "twice" }
sleep 0.05 until monitor_json(monitor).any?(&got) || Time.now > deadline
check(monitor_json(monitor).any?(&got), "second delivery: through the adapter as WS_SEND")
server.write(W.encode(W::WsMessage.new(43, cid, now, now, handler.b, 1,
                                       JSON.generate({ "command" => "unsubscribe", "identifier" => id2 }).b)))
frames = until_end(server, 43)
check(frames.grep(W::WsTag).empty?, "second unsubscribe: the first subscription's tag stays")

# 5. Unsubscribe: the tag goes.
server.write(W.encode(W::WsMessage.new(5, cid, now, now, handler.b, 1,
                                       JSON.generate({ "command" => "unsubscribe", "identifier" => identifier }).b)))
frames = until_end(server, 5)
check(frames.grep(W::WsTag).map { |t| [t.op, t.tag] } == [[1, "room:r1"]], "unsubscribe: WS_TAG remove #{frames.inspect}")

# 6. WS_CLOSE: handle_close runs; nothing is sent back, the connection is forgotten.
server.write(W.encode(W::WsClose.new(6, cid, now, now, handler.b, 1000, 0, "".b)))
frames = until_end(server, 6)
check(frames.size == 1, "close: only WS_DONE #{frames.inspect}")
check(WS.sticky_count.zero?, "forgotten: no sticky connection left")
check(ActionCable.server.connections.empty?, "removed: Action Cable's connection list is empty")

# 7. Authorization: a `connect` that rejects (the app's ApplicationCable::Connection, given one
# here) runs at the open; Action Cable's disconnect message goes out, then WS_CLOSE_CONN.
ApplicationCable::Connection.class_eval do
  def connect
    reject_unauthorized_connection if request.params["deny"]
  end
end
request(server, 7, "GET", "/cable", ws_headers, ws_extra, query: "deny=1")
head = until_end(server, 7).find { |f| f.is_a?(W::ResponseHead) }
check(head.status == 101, "deny upgrade: 101 (connect runs at the open)")
h7 = head.headers.each_slice(2).to_a.assoc("puma-plus-websocket-handler")[1]
server.write(W.encode(W::WsOpen.new(8, 78, now, now, h7.b, 0, "actioncable-v1-json".b, [], [])))
frames = until_end(server, 8)
sent = frames.grep(W::WsSend).map { |f| JSON.parse(f.data) }
check(sent.any? { |m| m["type"] == "disconnect" && m["reason"] == "unauthorized" && m["reconnect"] == false },
      "unauthorized: disconnect message #{sent}")
check(sent.none? { |m| m["type"] == "welcome" }, "unauthorized: no welcome")
check(frames.grep(W::WsCloseConn).map { |f| [f.conn_id, f.code] } == [[78, 1000]], "unauthorized: WS_CLOSE_CONN 1000")
server.write(W.encode(W::WsClose.new(9, 78, now, now, h7.b, 1000, 1, "".b)))
until_end(server, 9)
check(WS.sticky_count.zero?, "unauthorized: forgotten after its close")

server.close
thread.join(5)
puts "OK done (#{monitor.size} frames went on the monitor connection)"
