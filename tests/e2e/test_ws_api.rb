# frozen_string_literal: true

# The gem's WebSocket API (PumaPlus::WebSocket, docs/RACK.md "WebSockets owned by the front
# end") under the real server over HTTP/1.1, with a real client (python3-websockets) and the app
# tests/apps/websocket/config.ru: sticky echo of text and binary with per-connection state kept
# in the worker, a close code chosen by the app, a refused upgrade, flexible echo, and tags:
# a broadcast made from an event and from a POST reaching every holder of a tag, envelopes
# per subscription, tag and untag at run time; the same under fiber slots. No connection is
# hijacked.
#
#   ruby tests/e2e/test_ws_api.rb PATH/TO/puma-plus-server
require_relative "helper"
require "net/http"

class TestWsApi < Minitest::Test
  APP = File.join(E2E::ROOT, "tests/apps/websocket/config.ru")

  def setup
    E2E.need_python_websockets
    @clients = []
    @srv = E2E::Server.new(app: APP, workers: 2, threads: 2) unless name.include?("fiber")
  end

  def teardown
    @clients&.each(&:close)
    @srv&.stop
  end

  def connect(path, protocols = "")
    c = E2E::WsRelay.new("ws://127.0.0.1:#{@srv.port}#{path}", protocols: protocols)
    @clients << c
    c
  end

  def post(path, body)
    Net::HTTP.start("127.0.0.1", @srv.port, open_timeout: 10, read_timeout: 20) do |h|
      res = h.post(path, body, "content-type" => "text/plain")
      assert_equal "200", res.code, @srv.log[-2000..]
      res.body.to_i
    end
  end

  def test_sticky_echo_keeps_state_in_the_worker_and_closes_with_the_apps_code
    hijacked = @srv.stats["queue"]["hijacked"]
    c = connect("/echo", "echo")
    assert_equal "OPEN echo", c.first, @srv.log[-2000..]
    c.text("h\u00e9llo")
    assert_equal "T h\u00e9llo", c.line
    c.binary("\x00\xff\x10".b)
    assert_equal "B 00ff10", c.line
    big = "x" * 200_000
    c.text(big)
    assert_equal "T #{big}", c.line
    c.text("pid")
    pid = c.line[/\AT pid (\d+)\z/, 1]
    refute_nil pid
    5.times do
      c.text("pid")
      assert_equal "T pid #{pid}", c.line, "sticky: every event in the accepting worker"
    end
    c.text("count")
    assert_equal "T count 10", c.line, "conn.state kept across events"
    c.text("close 4001")
    assert_equal "CLOSED 4001 asked", c.line
    assert_equal hijacked, @srv.stats["queue"]["hijacked"], "nothing was hijacked"
    refute_match(/handler raised|no handler/, @srv.log)
  end

  def test_an_upgrade_the_app_refuses_is_answered_as_it_is
    c = connect("/nope")
    assert_equal "REFUSED 403", c.first
    # Without the subprotocol the echo still opens, with none.
    c = connect("/echo")
    assert_equal "OPEN None", c.first
  end

  # Fiber slots (the pinned async gem): events run in fibers; each slot's commands go on its own
  # connection (the writer is fiber-local).
  def test_fiber_slots_echo_and_broadcast
    @srv = E2E::Server.new(app: APP, workers: 1, env: E2E.rubygems_env, extra: ["-fibers", "8"])
    assert_match(/--fibers/, @srv.log)
    a = connect("/room?name=f")
    b = connect("/echo")
    assert_equal "OPEN None", a.first
    assert_equal "OPEN None", b.first
    20.times do |i|
      b.text("e#{i}")
      a.text("r#{i}")
      assert_equal "T e#{i}", b.line
      assert_equal "T r#{i}", a.line
    end
    post("/broadcast?room=f", "from post")
    assert_equal "T from post", a.line
    b.text("count")
    assert_equal "T count 21", b.line
    refute_match(/handler raised|no handler/, @srv.log)
  end

  def test_flexible_echo
    c = connect("/flex")
    assert_equal "OPEN None", c.first
    10.times do |i|
      c.text("m#{i}")
      assert_equal "T m#{i}", c.line
    end
    c.text("pid")
    assert_match(/\AT pid \d+\z/, c.line)
  end

  def test_tags_broadcasts_and_envelopes
    a = connect("/room?name=r1")
    b = connect("/room?name=r1")
    [a, b].each { |c| assert_equal "OPEN None", c.first }
    # A broadcast made from an event reaches every holder of the tag, the sender too.
    a.text("from a")
    assert_equal "T from a", a.line
    assert_equal "T from a", b.line
    # From a request (POST), whichever worker serves it.
    pids = 4.times.map { |i| post("/broadcast?room=r1", "post #{i}") }
    4.times do |i|
      assert_equal "T post #{i}", a.line
      assert_equal "T post #{i}", b.line
    end
    # An envelope per subscription; a plain tag on the other connection.
    b.text("env r2")
    assert_equal "T ok env r2", b.line
    a.text("sub r2")
    assert_equal "T ok sub r2", a.line
    post("/broadcast?room=r2", "m2")
    assert_equal "T m2", a.line
    assert_equal %(T {"t":"r2","m":m2}), b.line
    # Untagged: a leaves r2, b still gets it.
    a.text("unsub r2")
    assert_equal "T ok unsub r2", a.line
    post("/broadcast?room=r2", "m3")
    assert_equal %(T {"t":"r2","m":m3}), b.line
    assert a.quiet?(0.5), "a got a broadcast to a tag it left"
    # From a thread of the app's own (no request or event on it): the monitor connection.
    post("/broadcast_thread?room=r1", "from a thread")
    assert_equal "T from a thread", a.line
    assert_equal "T from a thread", b.line
    c = connect("/room?name=other")
    assert_equal "OPEN None", c.first
    post("/broadcast?room=r1", "only r1")
    assert_equal "T only r1", a.line
    assert c.quiet?(0.3), "another room's connection got r1's broadcast"
    assert_operator pids.uniq.size, :>=, 1
  end
end
