#!/usr/bin/env ruby
# Ruby heap bytes per idle Action Cable connection over front-end WebSockets (one subscription),
# in-process: N upgrades + opens + subscribes through PumaPlus::ActionCable, no sockets.
ENV["PUMA_PLUS_ACTION_CABLE"] = "frontend"
require File.join(Dir.pwd, "config/environment")
require "puma_plus"; require "puma_plus/action_cable"; require "objspace"; require "json"
PumaPlus::ActionCable.install
W = PumaPlus::Wire; WS = PumaPlus::WebSocket
Thread.current[WS::OUT_KEY] = ->(_b) {}
WS.monitor_out = ->(_b) {}
log = StringIO.new
Rails.logger.level = :warn; ActionCable.server.config.logger.level = :warn
def env_for
  { "REQUEST_METHOD" => "GET", "SCRIPT_NAME" => "", "PATH_INFO" => "/cable", "QUERY_STRING" => "", "SERVER_NAME" => "127.0.0.1",
    "SERVER_PORT" => "3000", "SERVER_PROTOCOL" => "HTTP/1.1", "REMOTE_ADDR" => "127.0.0.1", "rack.url_scheme" => "http",
    "HTTP_HOST" => "127.0.0.1:3000", "HTTP_UPGRADE" => "websocket", "HTTP_CONNECTION" => "Upgrade",
    "HTTP_ORIGIN" => "http://127.0.0.1:3000", "HTTP_SEC_WEBSOCKET_KEY" => "dGhlIHNhbXBsZSBub25jZQ==",
    "HTTP_SEC_WEBSOCKET_VERSION" => "13", "HTTP_SEC_WEBSOCKET_PROTOCOL" => "actioncable-v1-json",
    "puma_plus.websocket?" => true, "puma_plus.websocket.protocols" => "actioncable-v1-json",
    "rack.input" => StringIO.new(""), "rack.errors" => $stderr }
end
def one(i, log)
  st, h, = ActionCable.server.call(env_for)
  raise "status #{st}" unless st == 101
  key = h["puma-plus-websocket-handler"].b
  WS.dispatch(W::WsOpen.new(i, i, 0, 0, key, 0, "actioncable-v1-json".b, [], []), log)
  id = JSON.generate({ "channel" => "WorkerChannel", "room" => "r#{i % 10}" })
  WS.dispatch(W::WsMessage.new(i, i, 0, 0, key, 1, JSON.generate({ "command" => "subscribe", "identifier" => id }).b), log)
end
n = Integer(ARGV[0] || 2000)
200.times { |i| one(1_000_000 + i, log) } # warm up (lazy loads, caches)
GC.start; GC.start; before = ObjectSpace.memsize_of_all
n.times { |i| one(i + 1, log) }
GC.start; GC.start; after = ObjectSpace.memsize_of_all
raise log.string unless log.string.empty?
puts "connections=#{ActionCable.server.connections.size} sticky=#{WS.sticky_count} bytes_per_conn=#{(after - before) / n}"
