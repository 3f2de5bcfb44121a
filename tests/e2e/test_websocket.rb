# frozen_string_literal: true

# WebSockets owned by the server over HTTP/1.1 (docs/WEBSOCKET.md, docs/PROTOCOL.md "WebSocket
# frames"), end to end with the real gem (PumaPlus::WebSocket) and tests/apps/websocket: the
# app accepts the upgrade through the queue, the server holds the connection, and the app gets
# open / message / close as events. The client is a small RFC 6455 client written here on raw
# sockets (masked frames), so every byte the server sends is seen.
#
#   echo: text, binary, a 200 KB message, the chosen subprotocol, the close handshake;
#   a malformed handshake answered by the server (426 naming version 13), never the app;
#   an upgrade the app refuses goes out as it is (403);
#   sticky: every event of a connection runs in the worker that accepted it, and its state
#     lives there (a connection accepted by the second worker keeps answering its pid, though
#     idle dispatch prefers the first);
#   flexible: concurrent events of flexible connections run in both workers;
#   broadcast to a tag across two workers (from an event and from a POST), with an envelope;
#   a worker killed under sticky connections: they get 1012, a flexible one goes on, a new
#     connection is served; /stats "websocket" and /metrics count all of it.
#
#   ruby tests/e2e/test_websocket.rb PATH/TO/puma-plus-server
require_relative "helper"
require "securerandom"

# A minimal RFC 6455 client: handshake, masked frames out, frames in (pings answered).
class WSClient
  attr_reader :status, :head

  def initialize(port, path, protocols: nil, version: 13, timeout: 10)
    @timeout = timeout
    @sock = TCPSocket.new("127.0.0.1", port)
    @buf = +"".b
    key = [SecureRandom.random_bytes(16)].pack("m0")
    req = +"GET #{path} HTTP/1.1\r\nHost: 127.0.0.1:#{port}\r\nUpgrade: websocket\r\n" \
           "Connection: Upgrade\r\nSec-WebSocket-Key: #{key}\r\nSec-WebSocket-Version: #{version}\r\n"
    req << "Sec-WebSocket-Protocol: #{protocols}\r\n" if protocols
    @sock.write(req << "\r\n")
    fill until (i = @buf.index("\r\n\r\n"))
    @head = @buf.slice!(0, i + 4)
    @status = @head[%r{\AHTTP/1\.1 (\d{3})}, 1].to_i
  end

  def header(name) = @head[/^#{Regexp.escape(name)}: *([^\r]*)\r$/i, 1]

  def fill
    ready = IO.select([@sock], nil, nil, @timeout)
    raise Timeout::Error, "no bytes from the server within #{@timeout}s" unless ready

    chunk = @sock.read_nonblock(65_536, exception: false)
    raise EOFError, "server closed the connection" if chunk.nil?

    @buf << chunk unless chunk == :wait_readable
  end

  def read_exact(n)
    fill while @buf.bytesize < n
    @buf.slice!(0, n)
  end

  def send_frame(op, payload)
    payload = payload.b
    mask = SecureRandom.random_bytes(4)
    len = payload.bytesize
    head = [0x80 | op].pack("C")
    head << if len < 126 then [0x80 | len].pack("C")
            elsif len < 65_536 then [0x80 | 126, len].pack("Cn")
            else [0x80 | 127, len].pack("CQ>")
            end
    masked = payload.bytes.each_with_index.map { |b, i| b ^ mask.getbyte(i & 3) }.pack("C*")
    @sock.write(head + mask + masked)
  end

  def text(s) = send_frame(1, s)
  def binary(s) = send_frame(2, s)

  def close(code = 1000, reason = "")
    send_frame(8, [code].pack("n") + reason)
  end

  # The next data or close frame as [opcode, payload] (pings answered, pongs skipped; the
  # server never fragments messages this small... but continuation frames are joined anyway).
  def recv
    msg_op = nil
    data = +"".b
    loop do
      b0, b1 = read_exact(2).unpack("CC")
      op = b0 & 0x0f
      raise "server frame is masked" if b1 & 0x80 != 0

      len = b1 & 0x7f
      len = read_exact(2).unpack1("n") if len == 126
      len = read_exact(8).unpack1("Q>") if len == 127
      payload = read_exact(len)
      case op
      when 9 then send_frame(10, payload)
      when 10 then next
      when 8 then return [8, payload]
      else
        msg_op ||= op
        data << payload
        return [msg_op, data] if b0 & 0x80 != 0
      end
    end
  end

  def recv_text
    op, data = recv
    raise "expected a text message, got opcode #{op} #{data.inspect}" unless op == 1

    data.force_encoding("UTF-8")
  end

  # The close frame's code (and reason), after which the server closes TCP.
  def recv_close
    op, data = recv
    op, data = recv while op != 8
    [data.bytesize >= 2 ? data.unpack1("n") : 1005, data.byteslice(2..).to_s]
  end

  def eof?
    fill while @buf.empty?
    false
  rescue EOFError
    true
  end

  def ask(msg)
    text(msg)
    recv_text
  end

  def pid = ask("pid")[/\Apid (\d+)\z/, 1].to_i

  def shut = @sock.close

  # Writes without ever reading what comes back; stops at the first write error.
  def flood(msg, times)
    times.times { send_frame(2, msg) }
    true
  rescue SystemCallError, IOError
    false
  end
end

class TestWebSocket < Minitest::Test
  APP = File.join(E2E::ROOT, "tests/apps/websocket/config.ru")

  def self.server
    # Two workers with one slot each: concurrent events must use both, and idle dispatch
    # (fewest busy, lowest index) prefers the first worker.
    @server ||= E2E::Server.new(app: APP, workers: 2, threads: 1)
  end
  # A second server whose WebSockets together may hold 1 MiB of unsent output.
  def self.budget_server
    @budget_server ||= E2E::Server.new(app: APP, workers: 1, threads: 1,
                                       extra: ["-ws-max-output-total", "1m"])
  end
  Minitest.after_run do
    @server&.stop
    @budget_server&.stop
  end

  def srv = self.class.server
  def ws(path, **kw) = WSClient.new(srv.port, path, **kw)
  def stats = srv.stats

  def http_post(path, body)
    s = TCPSocket.new("127.0.0.1", srv.port)
    s.write("POST #{path} HTTP/1.1\r\nHost: x\r\nContent-Length: #{body.bytesize}\r\n" \
            "Connection: close\r\n\r\n#{body}")
    Timeout.timeout(10) { s.read }
  ensure
    s&.close
  end

  # Connections to path until there is one on each of the two workers (opened in concurrent
  # batches, so the second worker gets some). Returns {pid => [clients]}.
  def spread(path, want: 2)
    srv # started once, before the threads below
    by_pid = Hash.new { |h, k| h[k] = [] }
    10.times do
      batch = Array.new(4) { Thread.new { ws(path) } }.map(&:value) # upgrades in flight at once
      batch.each { |c| by_pid[c.pid] << c }
      return by_pid if by_pid.size >= want
    end
    flunk "connections to #{path} all landed on #{by_pid.keys.inspect}"
  end

  def test_echo_subprotocol_and_close
    c = ws("/echo", protocols: "chat, echo")
    assert_equal 101, c.status, c.head
    assert_equal "echo", c.header("Sec-WebSocket-Protocol")
    refute_match(/puma-plus-websocket/i, c.head, "the app's puma-plus-websocket fields are stripped")
    assert_equal "hello é", c.ask("hello é")
    c.binary("\x00\xff\x80bin".b)
    assert_equal [2, "\x00\xff\x80bin".b], c.recv
    big = "x" * 200_000
    assert_equal big, c.ask(big)
    assert_equal "count 4", c.ask("count"), "the fourth message of this connection"
    c.close(1000, "bye")
    assert_equal [1000, ""], c.recv_close
    assert c.eof?, "the server closes TCP after the close handshake"
    c.shut
    # the app closes: WS_CLOSE_CONN with its code
    c = ws("/echo")
    c.text("close 4001")
    assert_equal [4001, "asked"], c.recv_close
    c.shut
  end

  def test_handshake_refusals
    c = ws("/echo", version: 8)
    assert_equal 426, c.status, c.head
    assert_equal "13", c.header("Sec-WebSocket-Version")
    c.shut
    c = ws("/nowhere")
    assert_equal 403, c.status, "a refused upgrade goes out as the app answered"
    c.shut
    assert_equal 101, ws("/echo").tap(&:shut).status, "the next connection is served"
  end

  def test_sticky_routing_keeps_the_accepting_worker
    by_pid = spread("/echo")
    # A connection accepted by the worker idle dispatch does not prefer: its events would go
    # to the first worker if they were not sticky.
    by_pid.each do |pid, conns|
      c = conns.first
      5.times { assert_equal pid, c.pid, "sticky events run in the accepting worker" }
    end
    c = by_pid.values.last.first
    c.ask("count")
    n = c.ask("count")[/\d+/].to_i
    assert_operator n, :>=, 7, "the connection's state (its message count) lives in its worker"
    by_pid.values.flatten.each(&:shut)
  end

  def test_flexible_events_run_in_any_worker
    conns = Array.new(4) { ws("/flex") }
    seen = Hash.new { |h, k| h[k] = [] }
    6.times do
      conns.each { |c| c.text("pid") } # four events at once on two one-slot workers
      conns.each_with_index { |c, i| seen[i] << c.recv_text[/\d+/].to_i }
    end
    pids = seen.values.flatten.uniq
    assert_equal 2, pids.size, "flexible events ran in both workers: #{seen.inspect}"
    conns.each(&:shut)
  end

  def test_broadcast_across_two_workers
    room = "r#{SecureRandom.hex(4)}"
    by_pid = spread("/room?name=#{room}")
    members = by_pid.values.flatten
    sender = members.first
    sender.text("hello room")
    members.each { |c| assert_equal "hello room", c.recv_text }
    http_post("/broadcast?room=#{room}", "from a request")
    members.each { |c| assert_equal "from a request", c.recv.last }
    # an envelope per subscription
    other = "e#{SecureRandom.hex(4)}"
    a, b = by_pid.values.map(&:first)
    assert_equal "ok env #{other}", a.ask("env #{other}")
    assert_equal "ok sub #{other}", b.ask("sub #{other}")
    http_post("/broadcast?room=#{other}", '"x"')
    assert_equal %({"t":"#{other}","m":"x"}), a.recv.last
    assert_equal '"x"', b.recv.last
    st = stats["websocket"]
    assert_operator st["broadcasts"], :>=, 3
    assert_operator st["fanout"], :>=, members.size * 2 + 2
    members.each(&:shut)
  end

  def test_worker_killed_under_sticky_connections
    by_pid = spread("/echo")
    flex = ws("/flex")
    flex.pid
    victim, conns = by_pid.first
    before = stats["websocket"]
    Process.kill("KILL", victim)
    conns.each do |c|
      assert_equal [1012, "worker restarted"], c.recv_close, "a sticky connection of a dead worker"
      c.shut
    end
    survivor = by_pid.keys.last
    by_pid[survivor].each { |c| assert_equal survivor, c.pid, "the other worker's connections go on" }
    refute_equal 0, flex.pid, "a flexible connection goes on"
    fresh = ws("/echo")
    assert_equal 101, fresh.status
    refute_equal victim, fresh.pid, "a new connection is accepted by a live worker"
    st = stats["websocket"]
    assert_operator st["worker_gone_closes"], :>=, before["worker_gone_closes"] + conns.size
    assert_operator st["closes"]["1012"].to_i, :>=, conns.size
    metrics = srv.control_get("/metrics")[1]
    assert_match(/^puma_plus_websocket_closes_total\{code="1012"\} \d+/, metrics)
    assert_match(/^puma_plus_websocket_connections \d+/, metrics)
    ([flex, fresh] + by_pid[survivor]).each(&:shut)
    # wait for the replacement, so later tests see two workers
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 30
    sleep 0.1 until stats["booted_workers"] == 2 || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
  end

  # A client that sends but never reads: its echoes fill the kernel's buffers, then the codec's
  # bounded output (4 MiB), and the server closes it with 1008 instead of buffering more.
  def test_slow_reader_is_closed_with_1008
    before = stats["websocket"]
    c = ws("/echo")
    c.flood("x".b * 65_536, 400) # 25 MiB of echoes nobody reads
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 20
    sleep 0.1 until stats["websocket"]["slow_reader_closes"] > before["slow_reader_closes"] ||
                    Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
    st = stats["websocket"]
    assert_equal before["slow_reader_closes"] + 1, st["slow_reader_closes"]
    # what the client finally reads: the echoes that fitted, then the Close with 1008
    code = begin
      op, data = c.recv
      op, data = c.recv while op != 8
      data.unpack1("n")
    rescue EOFError, SystemCallError, Timeout::Error
      nil # the server may have closed TCP already (-ws-close-timeout): the count says it all
    end
    assert_equal 1008, code if code
    c.shut
    sleep 0.1 until stats["websocket"]["closes"]["1008"].to_i > before["closes"]["1008"].to_i ||
                    Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
    assert_equal before["closes"]["1008"].to_i + 1, stats["websocket"]["closes"]["1008"]
  end

  # Past -ws-max-output-total (all connections' unsent output together) a message closes its
  # connection with 1013 (try again later) before that connection reaches its own 4 MiB bound.
  def test_server_output_budget_closes_with_1013
    b = self.class.budget_server
    c = WSClient.new(b.port, "/echo")
    assert_equal 101, c.status
    c.flood("x".b * 65_536, 400)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 20
    sleep 0.1 until b.stats["websocket"]["overload_closes"].positive? ||
                    Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
    st = b.stats["websocket"]
    assert_equal 1, st["overload_closes"]
    assert_equal 0, st["slow_reader_closes"], "the server-wide bound came first"
    assert_operator st["output_bytes"], :<=, (1 << 20) + 200_000, "held output stays near the budget"
    code = begin
      op, data = c.recv
      op, data = c.recv while op != 8
      data.unpack1("n")
    rescue EOFError, SystemCallError, Timeout::Error
      nil
    end
    assert_equal 1013, code if code
    c.shut
    sleep 0.1 until b.stats["websocket"]["closes"]["1013"].to_i.positive? ||
                    Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
    assert_equal 1, b.stats["websocket"]["closes"]["1013"]
    assert_equal 101, WSClient.new(b.port, "/echo").tap(&:shut).status, "and the next one is served"
  end

  def test_stats_count_connections_and_messages
    all_before = stats
    before = all_before["websocket"]
    c = ws("/echo")
    3.times { |i| assert_equal "m#{i}", c.ask("m#{i}") }
    all_mid = stats
    mid = all_mid["websocket"]
    # events are queue entries: arrivals and completions like requests (the upgrade is one too)
    assert_operator all_mid["queue"]["arrivals"], :>=, all_before["queue"]["arrivals"] + 5
    assert_operator all_mid["queue"]["completions"], :>=, all_before["queue"]["completions"] + 5
    assert_operator mid["open"], :>=, 1
    assert_equal before["opened"] + 1, mid["opened"]
    assert_operator mid["messages_in"], :>=, before["messages_in"] + 3
    assert_operator mid["messages_out"], :>=, before["messages_out"] + 3
    assert_operator mid["events"], :>=, before["events"] + 4 # open + 3 messages
    assert_operator mid["queue"]["count"], :>=, before["queue"]["count"] + 4
    c.close(1000)
    c.recv_close
    c.shut
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5
    sleep 0.05 until stats["websocket"]["closes"]["1000"].to_i > before["closes"]["1000"].to_i ||
                     Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
    after = stats["websocket"]
    assert_operator after["closed"], :>, before["closed"]
    assert_equal before["closes"]["1000"].to_i + 1, after["closes"]["1000"], "closed with 1000"
  end
end
