# frozen_string_literal: true

# The WebSocket page of tests/e2e/test_ws_browser.rb: a page that a browser loads from the
# server and that opens a WebSocket back to it, plus the echo endpoints it talks to.
#
#   /page?ws=PATH  the page (tests/apps/ws_page/page.html); its script opens ws://HOST/PATH,
#                  exchanges messages, and writes what happened to document.body.dataset.result
#   /ws            an echo (text and binary, unchanged) on front-end-owned WebSockets
#                  (PumaPlus::WebSocket, docs/RACK.md): the server speaks RFC 6455 (and
#                  permessage-deflate), the app gets the messages
#   /ws-hijack     the same echo served by websocket-driver after a full hijack: the path
#                  before issue 25, still supported (docs/RACK.md "Hijack")
#   anything else: 200 "ok"
require "puma_plus"
require "websocket/driver"

# The front-end path's echo: a binary message arrives as a BINARY String and goes back as one.
class PageEcho
  def on_message(conn, data) = conn.send(data)
end

module WebSocketPageApp
  PAGE = File.read(File.join(__dir__, "page.html"))

  module_function

  # websocket-driver needs an object with #env, #url and #write around the hijacked socket.
  class DriverSocket
    attr_reader :env, :url

    def initialize(env, io)
      @env = env
      @io = io
      @url = "ws://#{env['HTTP_HOST']}#{env['REQUEST_URI']}"
    end

    def write(data) = @io.write(data)
  end

  def hijack_echo(env, io)
    driver = WebSocket::Driver.rack(DriverSocket.new(env, io), max_length: 4 << 20)
    driver.on(:message) { |e| e.data.is_a?(String) ? driver.text(e.data) : driver.binary(e.data) }
    driver.on(:close) { io.close unless io.closed? }
    driver.start
    driver.parse(env["puma_plus.hijack_buffered"]) if env["puma_plus.hijack_buffered"]
    loop { driver.parse(io.readpartial(65_536)) }
  rescue EOFError, IOError, SystemCallError
    nil
  ensure
    io.close unless io.closed?
  end
end

run(lambda do |env|
  case env["PATH_INFO"]
  when "/page"
    [200, { "content-type" => "text/html; charset=utf-8", "cache-control" => "no-store" }, [WebSocketPageApp::PAGE]]
  when "/ws"
    if PumaPlus::WebSocket.websocket?(env)
      PumaPlus::WebSocket.accept(env, PageEcho)
    else
      [400, { "content-type" => "text/plain" }, ["a WebSocket endpoint\n"]]
    end
  when "/ws-hijack"
    io = env["rack.hijack"].call
    Thread.new { WebSocketPageApp.hijack_echo(env, io) }
    [200, {}, []] # ignored by the server after a full hijack
  else
    [200, { "content-type" => "text/plain" }, ["ok"]]
  end
end)
