# frozen_string_literal: true

require_relative "test_helper"
require "rack"
require "rack/lint"

# PumaPlus::WebSocket (docs/RACK.md "WebSockets") without a server: a worker connection over
# a socketpair, the test playing the server. The upgrade request is accepted with
# WebSocket.accept (the 101's fields checked), then WS_OPEN / WS_MESSAGE / WS_CLOSE events run
# the handler and end with WS_DONE; the handler's sends, tags, broadcasts and closes arrive as
# WS_SEND / WS_TAG / WS_BROADCAST / WS_CLOSE_CONN on the same connection, before its WS_DONE;
# a broadcast from a request goes on the request's connection; from another thread on the
# monitor connection. Sticky handlers keep state between events; flexible ones are found by
# name. Runs with the C codec and the Ruby one (subclass at the end).
class TestWebSocket < Minitest::Test
  W = PumaPlus::Wire
  WS = PumaPlus::WebSocket
  CODEC = :native

  # Echo with state: counts messages per connection in conn.state (sticky keeps it).
  class Echo
    def on_open(conn)
      conn.state[:n] = 0
      conn.send("hello #{conn.id} #{conn.env['PATH_INFO']}")
      conn.tag("room:1")
    end

    def on_message(conn, data)
      conn.state[:n] += 1
      return conn.close(4000, "bye") if data == "close"
      return conn.send("env #{conn.env.inspect}") if data == "env?"
      raise "boom" if data == "raise"

      conn.send(data.encoding == Encoding::UTF_8 ? "#{conn.state[:n]}:#{data}" : data)
    end

    def on_close(conn, code, reason)
      WS.broadcast("room:1", "gone #{conn.id} #{code} #{reason}")
    end
  end

  # Flexible: a named class, a fresh instance per event.
  class FlexEcho
    def on_message(conn, data)
      conn.send("flex #{conn.id} #{conn.state.size} #{data}")
    end
  end

  def setup
    PumaTestCodec.use(self.class::CODEC)
    @server, @client = UNIXSocket.pair
    @log = StringIO.new
    @proto = PumaPlus::Worker.prototype_env(threads: 2, worker_index: 0)
  end

  def teardown
    @server.close unless @server.closed?
    @client.close unless @client.closed?
    @thread&.join(5)
    WS.monitor_out = nil
    PumaTestCodec.restore
  end

  def start(app)
    @conn = PumaPlus::Connection.new(app, @client, @proto, worker_index: 0, thread_index: 0, log: @log)
    @thread = Thread.new { @conn.run }
    assert_instance_of W::Hello, FakeServer.read_frame(@server)
  end

  UPGRADE = { "Upgrade" => "websocket", "Connection" => "Upgrade", "Sec-WebSocket-Protocol" => "chat.v2, chat.v1" }.freeze

  def upgrade(id, path = "/ws", extra: [["puma_plus.websocket?", "1"], ["puma_plus.websocket.protocols", "chat.v2, chat.v1"]])
    @server.write(FakeServer.request(id, "GET", path, headers: UPGRADE, extra: extra))
    FakeServer.read_response(@server, id)
  end

  def fields(res) = res[:head].headers.each_slice(2).to_a

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)

  def open_event(ev_id, conn_id, handler, tags: [], env: [["PATH_INFO", "/ws"]], route: 0)
    @server.write(W.encode(W::WsOpen.new(ev_id, conn_id, now, now, handler.b, route, "chat.v2".b,
                                         tags.flat_map { |t| ["tag", t] }, env.flatten)))
  end

  def message_event(ev_id, conn_id, handler, data, opcode: W::WS_TEXT)
    @server.write(W.encode(W::WsMessage.new(ev_id, conn_id, now, now, handler.b, opcode, data.b)))
  end

  def close_event(ev_id, conn_id, handler, code, reason)
    @server.write(W.encode(W::WsClose.new(ev_id, conn_id, now, now, handler.b, code, 0, reason.b)))
  end

  # The frames up to and including WS_DONE for `ev_id`.
  def until_done(ev_id)
    frames = []
    loop do
      f = FakeServer.read_frame(@server)
      flunk "connection ended before WS_DONE #{ev_id} (got #{frames.inspect}); log: #{@log.string}" if f == :eof
      frames << f
      next unless f.is_a?(W::WsDone)

      assert_equal ev_id, f.event_id
      return frames
    end
  end

  def accept_app(route: :sticky, handler: Echo, **kw)
    lambda do |env|
      return [400, {}, ["not ws"]] unless WS.websocket?(env)

      WS.accept(env, handler, route: route, protocol: "chat.v2", tags: ["room:1", "user:7"], **kw)
    end
  end

  def test_accept_answers_the_101_the_server_recognises
    start(accept_app(headers: { "set-cookie" => "a=1" }))
    res = upgrade(1)
    assert_equal 101, res[:head].status
    f = fields(res)
    assert_includes f, ["puma-plus-websocket", "sticky"]
    assert_equal [["puma-plus-websocket-tags", "room:1"], ["puma-plus-websocket-tags", "user:7"]],
                 f.select { |k, _| k == "puma-plus-websocket-tags" }, "one field line per tag, in order"
    assert_includes f, ["sec-websocket-protocol", "chat.v2"]
    assert_includes f, ["set-cookie", "a=1"]
    handler = f.assoc("puma-plus-websocket-handler")[1]
    assert_match(/\As:#{Process.pid}:\d+\z/, handler)
    assert_operator handler.bytesize, :<=, 255
    assert_equal "", res[:body]
    # A plain request to the same app is not an upgrade.
    @server.write(FakeServer.request(2, "GET", "/ws"))
    assert_equal 400, FakeServer.read_response(@server, 2)[:head].status
  end

  # Under Rack::Lint (Rack 2.2 here: String header values, tags joined with "\n") the 101 is a
  # valid response, and the tags still reach the server as one field line each.
  def test_accept_passes_rack_lint
    start(Rack::Lint.new(accept_app))
    res = upgrade(1)
    assert_equal 101, res[:head].status
    assert_equal [["puma-plus-websocket-tags", "room:1"], ["puma-plus-websocket-tags", "user:7"]],
                 fields(res).select { |k, _| k == "puma-plus-websocket-tags" }
    assert_equal "", @log.string, "no Rack::Lint violation was logged"
  end

  def test_accept_refuses_what_the_server_could_not_carry
    env = { "puma_plus.websocket?" => true, "puma_plus.websocket.protocols" => "a, b" }
    assert_raises(ArgumentError) { WS.accept({}, Echo) }
    assert_raises(ArgumentError) { WS.accept(env, Echo, route: :roundrobin) }
    assert_raises(ArgumentError) { WS.accept(env, Echo, protocol: "c") }
    assert_raises(ArgumentError) { WS.accept(env, Echo, tags: ["a\nb"]) }
    assert_raises(ArgumentError) { WS.accept(env, Echo, tags: [""]) }
    assert_raises(ArgumentError) { WS.accept(env, Object.new, route: :flexible) }
    assert_raises(ArgumentError) { WS.accept(env, Class.new, route: :flexible) }
    assert_raises(ArgumentError) { WS.accept(env, "never-registered", route: :flexible) }
    assert_equal ["a", "b"], WS.protocols(env)
    status, headers, = WS.accept(env, FlexEcho, route: :flexible, protocol: "b")
    assert_equal [101, "flexible", "c:TestWebSocket::FlexEcho", "b"],
                 [status, headers["puma-plus-websocket"], headers["puma-plus-websocket-handler"], headers["sec-websocket-protocol"]]
    refute headers.key?("puma-plus-websocket-tags")
    _, headers, = WS.accept(env, FlexEcho, route: :flexible, tags: ["a", "b"])
    want = Rack.release.start_with?("2.") ? "a\nb" : ["a", "b"]
    assert_equal want, headers["puma-plus-websocket-tags"]
  end

  def test_sticky_events_run_the_handler_keep_state_and_end_with_ws_done
    start(accept_app)
    handler = fields(upgrade(1)).assoc("puma-plus-websocket-handler")[1]
    t0 = now
    open_event(10, 77, handler)
    frames = until_done(10)
    assert_equal [W::WsSend.new(77, W::WS_TEXT, "hello 77 /ws".b), W::WsTag.new(77, 0, "room:1".b, "".b, "".b)],
                 frames[0..-2]
    done = frames.last
    assert_operator done.t4_ns, :>=, t0
    assert_operator done.t5_ns, :>=, done.t4_ns
    assert_equal(-1, done.gvl_wait_ns)
    assert_operator done.cpu_ns, :>=, 0

    message_event(11, 77, handler, "h\u00e9llo")
    assert_equal [W::WsSend.new(77, 1, "1:h\u00e9llo".b)], until_done(11)[0..-2]
    message_event(12, 77, handler, "two")
    assert_equal [W::WsSend.new(77, 1, "2:two".b)], until_done(12)[0..-2], "conn.state kept between events"
    message_event(21, 77, handler, "env?")
    assert_equal [W::WsSend.new(77, 1, "env nil".b)], until_done(21)[0..-2], "no env kept after on_open"
    message_event(13, 77, handler, "\x00\xff".b, opcode: W::WS_BINARY)
    assert_equal [W::WsSend.new(77, W::WS_BINARY, "\x00\xff".b)], until_done(13)[0..-2]
    assert_equal 1, WS.sticky_count

    message_event(14, 77, handler, "close")
    assert_equal [W::WsCloseConn.new(77, 4000, "bye".b)], until_done(14)[0..-2]
    close_event(15, 77, handler, 4000, "bye")
    assert_equal [W::WsBroadcast.new(W::WS_TEXT, "room:1".b, "gone 77 4000 bye".b)], until_done(15)[0..-2]
    assert_equal 0, WS.sticky_count, "the closed connection is forgotten"

    # An event for it now finds no handler: logged, and the server is told to close it.
    message_event(16, 77, handler, "late")
    assert_equal [W::WsCloseConn.new(77, 1011, "no handler".b)], until_done(16)[0..-2]
    assert_match(/WebSocket 77: no handler/, @log.string)
  end

  # A sticky Class gives each connection its own instance (and conn.state); an accept whose
  # WS_OPEN never comes is forgotten after PENDING_TTL_S.
  def test_sticky_connections_are_apart_and_unopened_accepts_expire
    start(accept_app)
    h1 = fields(upgrade(1)).assoc("puma-plus-websocket-handler")[1]
    h2 = fields(upgrade(2)).assoc("puma-plus-websocket-handler")[1]
    refute_equal h1, h2
    open_event(10, 1, h1)
    open_event(11, 2, h2)
    until_done(10)
    until_done(11)
    message_event(12, 1, h1, "a")
    message_event(13, 1, h1, "b")
    message_event(14, 2, h2, "c")
    assert_equal [W::WsSend.new(1, 1, "1:a".b)], until_done(12)[0..-2]
    assert_equal [W::WsSend.new(1, 1, "2:b".b)], until_done(13)[0..-2]
    assert_equal [W::WsSend.new(2, 1, "1:c".b)], until_done(14)[0..-2]
    [[15, 1, h1], [16, 2, h2]].each do |ev, id, h|
      close_event(ev, id, h, 1000, "")
      until_done(ev)
    end
    # Pending accepts older than the TTL go at the next accept.
    pending = WS.instance_variable_get(:@pending)
    pending.clear # what other tests' unopened accepts left
    upgrade(3)
    assert_equal 1, pending.size
    pending.transform_values! { |handler, at| [handler, at - WS::PENDING_TTL_S - 1] }
    upgrade(4)
    assert_equal 1, pending.size, "the stale accept was forgotten"
  end

  def test_a_handler_that_raises_is_logged_and_its_connection_closed_with_1011
    start(accept_app)
    handler = fields(upgrade(1)).assoc("puma-plus-websocket-handler")[1]
    open_event(10, 5, handler)
    until_done(10)
    message_event(11, 5, handler, "raise")
    assert_equal [W::WsCloseConn.new(5, 1011, "internal error".b)], until_done(11)[0..-2]
    assert_match(/WS_MESSAGE handler raised RuntimeError: boom/, @log.string)
    # The slot serves on.
    message_event(12, 5, handler, "ok")
    assert_equal [W::WsSend.new(5, 1, "2:ok".b)], until_done(12)[0..-2]
    close_event(13, 5, handler, 1006, "")
    until_done(13)
  end

  def test_flexible_handlers_are_found_by_name_each_event_fresh
    WS.register("upper", Module.new do
      def self.on_message(conn, data) = conn.send(data.upcase)
    end)
    start(->(_env) { [200, {}, []] })
    message_event(20, 9, "c:TestWebSocket::FlexEcho", "x")
    assert_equal [W::WsSend.new(9, 1, "flex 9 0 x".b)], until_done(20)[0..-2]
    message_event(21, 9, "r:upper", "abc")
    assert_equal [W::WsSend.new(9, 1, "ABC".b)], until_done(21)[0..-2]
    message_event(22, 9, "c:NoSuchHandlerClass", "x")
    assert_equal [W::WsCloseConn.new(9, 1011, "no handler".b)], until_done(22)[0..-2]
    # A close for an unknown handler tells nobody (the connection is gone already).
    close_event(23, 9, "c:NoSuchHandlerClass", 1000, "")
    assert_equal [], until_done(23)[0..-2]
    assert_equal 0, WS.sticky_count
  end

  def test_a_request_broadcasts_on_its_own_connection_another_thread_on_the_monitor
    monitor = []
    WS.monitor_out = ->(bytes) { monitor << bytes.dup }
    start(lambda do |env|
      WS.broadcast("room:#{env['QUERY_STRING']}", "from request")
      Thread.new { WS.broadcast("room:2", "\x01".b) }.join
      [200, {}, ["ok"]]
    end)
    @server.write(FakeServer.request(3, "POST", "/b", query: "9"))
    first = FakeServer.read_frame(@server)
    assert_equal W::WsBroadcast.new(W::WS_TEXT, "room:9".b, "from request".b), first
    assert_equal 200, FakeServer.read_response(@server, 3)[:head].status
    assert_equal [W.encode(W::WsBroadcast.new(W::WS_BINARY, "room:2".b, "\x01".b))], monitor
  end

  def test_commands_check_their_arguments_before_anything_is_sent
    sent = []
    WS.monitor_out = ->(bytes) { sent << bytes }
    assert_raises(ArgumentError) { WS.send_to(1, "\xff".dup.force_encoding(Encoding::UTF_8)) }
    assert_raises(ArgumentError) { WS.send_to(1, :sym) }
    assert_raises(ArgumentError) { WS.close_conn(1, 1005) }
    assert_raises(ArgumentError) { WS.close_conn(1, 1004) }
    assert_raises(ArgumentError) { WS.tag_conn(1, "t", prefix: "\xff".b) }
    assert_raises(ArgumentError) { WS.close_conn(1, 1000, "r" * 124) }
    assert_raises(ArgumentError) { WS.broadcast("", "x") }
    assert_empty sent
    WS.send_to(1, "caf\u00e9".encode(Encoding::ISO_8859_1))
    WS.untag_conn(1, nil)
    WS.tag_conn(2, "t", prefix: "{", suffix: "}")
    frames = sent.map { |b| W.decode(b)[0] }
    assert_equal [W::WsSend.new(1, 1, "caf\u00e9".b), W::WsTag.new(1, 2, "".b, "".b, "".b),
                  W::WsTag.new(2, 0, "t".b, "{".b, "}".b)], frames
    WS.monitor_out = nil
    assert_raises(WS::NotServed) { WS.broadcast("t", "x") }
  end
end

class TestWebSocketRuby < TestWebSocket
  CODEC = :ruby
end
