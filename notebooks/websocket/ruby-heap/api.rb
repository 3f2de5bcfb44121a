#!/usr/bin/env ruby
# Ruby heap bytes per idle sticky connection of PumaPlus::WebSocket (accept + WS_OPEN), in-process.
require "puma_plus"
require "objspace"
W = PumaPlus::Wire; WS = PumaPlus::WebSocket
class H; def on_message(c, d) = c.send(d); end
Thread.current[WS::OUT_KEY] = ->(_b) {}
env_pairs = [["REQUEST_METHOD","GET"],["SCRIPT_NAME",""],["PATH_INFO","/echo"],["QUERY_STRING",""],["SERVER_NAME","127.0.0.1"],["SERVER_PORT","9292"],["SERVER_PROTOCOL","HTTP/1.1"],["REMOTE_ADDR","127.0.0.1"],["rack.url_scheme","http"],["HTTP_HOST","127.0.0.1:9292"],["HTTP_UPGRADE","websocket"],["HTTP_CONNECTION","Upgrade"],["HTTP_SEC_WEBSOCKET_KEY","dGhlIHNhbXBsZSBub25jZQ=="],["HTTP_SEC_WEBSOCKET_VERSION","13"],["HTTP_COOKIE","session=" + "a"*100],["REQUEST_URI","/echo"],["puma_plus.request_id","41"],["puma_plus.queue_ns","800"],["puma_plus.websocket?","true"],["puma_plus.websocket.protocols",""]].flatten
n = Integer(ARGV[0] || 10000)
log = StringIO.new
GC.start; before = ObjectSpace.memsize_of_all
n.times do |i|
  _, h, = WS.accept({ "puma_plus.websocket?" => true }, H)
  payload = W.encode(W::WsOpen.new(i, i + 1, 0, 0, h["puma-plus-websocket-handler"].b, 0, "".b, [], env_pairs.map(&:b)))
  ev, = W.decode(payload)
  WS.dispatch(ev, log)
end
GC.start; after = ObjectSpace.memsize_of_all
raise log.string unless log.string.empty?
puts "sticky=#{WS.sticky_count} bytes_per_conn=#{(after - before) / n}"
