# frozen_string_literal: true

# Full hijack end to end (docs/PROTOCOL.md "HIJACK, HIJACKED", docs/RACK.md): on HTTP/1.1 the
# server hands the client socket to the worker thread (SCM_RIGHTS) and the app talks on it
# directly: a raw byte echo, bytes sent right behind the request (HIJACKED's `buffered`), a
# WebSocket served by websocket-driver after a full hijack and by hand-written RFC 6455 code
# after a response hijack (rack.hijack header) and a Rack 3 101 Streaming Body, each driven
# by a real WebSocket client (python3-websockets). /stats counts the hijacked requests; the
# worker thread that hijacked serves the next request while the hijacked socket stays open;
# rack.hijack? is false over h2 (prior knowledge and Upgrade), h3, and TLS.
#
#   ruby tests/e2e/test_hijack.rb PATH/TO/puma-plus-server
require_relative "helper"

class TestHijack < Minitest::Test
  APP = File.join(E2E::ROOT, "tests/apps/hijack/config.ru")
  PYTHON = "/usr/bin/python3"
  WS_CLIENT = <<~PY
    import asyncio, sys, websockets
    async def main(url, texts):
        async with websockets.connect(url, open_timeout=10, close_timeout=5) as ws:
            for t in texts:
                await ws.send(t)
                print(await asyncio.wait_for(ws.recv(), 10))
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
  PY

  def self.server
    # One worker thread: every test also shows that the thread is free after a hijack.
    @h3_port ||= E2E.free_port
    @server ||= E2E::Server.new(app: APP, workers: 1, threads: 1, tls: true,
                                extra: ["-h2c", "-listen-h3", "127.0.0.1:#{@h3_port}"])
  end

  def self.h3_port = @h3_port

  Minitest.after_run { @server&.stop }

  def srv = self.class.server

  def hijacked = srv.stats["queue"]["hijacked"]

  def connect
    TCPSocket.new("127.0.0.1", srv.port)
  end

  def read_exactly(sock, n, timeout: 10)
    buf = +""
    Timeout.timeout(timeout) { buf << sock.readpartial(n - buf.bytesize) while buf.bytesize < n }
    buf
  end

  def get(path)
    out, err, st = E2E.curl("-w", "\n%{http_code}", "http://127.0.0.1:#{srv.port}#{path}")
    assert st.success?, "curl #{path}: #{err}"
    body, code = out.rpartition("\n").values_at(0, 2)
    [code.to_i, body]
  end

  def websocket(path, *texts)
    unless system(PYTHON, "-c", "import websockets", out: File::NULL, err: File::NULL)
      flunk "python3-websockets is missing (scripts/install-deps.sh installs it)"
    end
    out, err, st = Open3.capture3("timeout", "30", PYTHON, "-c", WS_CLIENT,
                                  "ws://127.0.0.1:#{srv.port}#{path}", *texts)
    assert st.success?, "websocket client on #{path} failed: #{err}\n#{srv.log[-2000..]}"
    out.lines.map(&:chomp)
  end

  def test_raw_echo_over_a_hijacked_socket
    before = hijacked
    s = connect
    s.write("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
    s.write("hello, raw socket")
    assert_equal "hello, raw socket", read_exactly(s, 17)
    payload = Random.new(7).bytes(200_000)
    writer = Thread.new { s.write(payload) }
    assert_equal payload, read_exactly(s, payload.bytesize)
    writer.join
    s.close_write
    Timeout.timeout(10) { assert_equal "", s.read } # the app closes when it sees EOF
    s.close
    assert_equal before + 1, hijacked
    assert_match(/"hijacked"/, srv.control_get("/stats")[1])
    _, metrics = srv.control_get("/metrics")
    assert_match(/^puma_plus_hijacked_total \d+$/, metrics)
  end

  def test_bytes_sent_behind_the_request_reach_the_app
    s = connect
    # One write: the server has read "early bytes" past the request before the app hijacks.
    s.write("GET /echo HTTP/1.1\r\nHost: x\r\n\r\nearly bytes")
    assert_equal "early bytes", read_exactly(s, 11)
    s.write("later")
    assert_equal "later", read_exactly(s, 5)
    s.close
  end

  def test_the_worker_thread_is_free_while_the_hijacked_socket_stays_open
    held = 3.times.map do
      s = connect
      s.write("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
      assert_equal "held\n", read_exactly(s, 5)
      s
    end
    # one worker thread, three sockets still owned by the app: requests are still served
    5.times { assert_equal [200, "ok"], get("/") }
    held.each_with_index do |s, i|
      s.write("still here #{i}")
      assert_equal "still here #{i}", read_exactly(s, 12)
      s.close
    end
    st = srv.stats
    assert_equal 0, st["queue"]["length"] if st["queue"].key?("length")
  end

  def fd_count = Dir.children("/proc/#{srv.pid}/fd").size

  # The server closes its own copy of every handed-over descriptor (and nothing else leaks):
  # after 40 hijacks, closed by the clients, its descriptor count is back where it was.
  def test_the_server_keeps_no_descriptor_of_a_hijacked_socket
    get("/") # warm: every lazily opened descriptor exists already
    base = fd_count
    before = hijacked
    socks = 40.times.map do
      s = connect
      s.write("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
      assert_equal "held\n", read_exactly(s, 5)
      s
    end
    assert_equal before + 40, hijacked
    # (the server closes its copy a loop turn after the frame is written: allow a moment)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 3
    sleep 0.05 while fd_count > base && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    assert_operator fd_count, :<=, base, "the server holds none of the 40 open hijacked sockets"
    socks.each(&:close)
    assert_equal [200, "ok"], get("/")
  end

  # The client went away while the app ran: the server answers HIJACK with GONE and the
  # app's rack.hijack raises; nothing is counted as hijacked.
  def test_a_client_gone_before_the_hijack_makes_rack_hijack_raise
    before = srv.stats["queue"]
    s = connect
    s.write("GET /late HTTP/1.1\r\nHost: x\r\n\r\n")
    sleep 0.1
    s.close
    assert_equal [200, "rack.hijack: the client went away"], get("/late-result")
    after = srv.stats["queue"]
    assert_equal before["hijacked"], after["hijacked"]
    assert_equal before["cancelled_running"] + 1, after["cancelled_running"]
  end

  # A body over 1 MiB is read whole (spooled) before the request runs, so it never runs with
  # its body still arriving: the app starts only after the last byte, and may then hijack.
  # (With -body-stream the request would run after 1 MiB and HIJACK be refused: REFUSED is
  # covered by the codec tests.)
  def test_a_large_body_is_read_whole_before_the_request_runs_and_may_hijack
    before = hijacked
    s = connect
    s.write("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: #{3 << 20}\r\n\r\n")
    s.write("z" * (3 << 19)) # 1.5 MiB of 3
    sleep 0.5
    assert_equal 0, srv.stats["queue"]["slots_busy"], "the request does not run before its body is whole"
    assert_equal before, hijacked
    s.write("z" * (3 << 19))
    s.write("after the body")
    assert_equal "after the body", read_exactly(s, 14)
    s.close
    assert_equal before + 1, hijacked
  end

  def test_rack_hijack_is_offered_on_http1
    assert_equal [200, "rack.hijack?=true rack.hijack=present"], get("/hijack")
  end

  def test_websocket_with_websocket_driver_after_a_full_hijack
    before = hijacked
    assert_equal ["echo: hello", "echo: second message"], websocket("/ws", "hello", "second message")
    assert_equal before + 1, hijacked
  end

  def test_websocket_after_a_response_hijack_header
    assert_equal ["echo: over rack.hijack"], websocket("/ws-partial", "over rack.hijack")
  end

  def test_websocket_from_a_rack3_streaming_body_answering_101
    assert_equal ["echo: streamed"], websocket("/ws-stream", "streamed")
  end

  def test_no_hijack_over_h2_prior_knowledge
    out, err, st = E2E.curl("--http2-prior-knowledge", "-w", " %{http_version}",
                            "http://127.0.0.1:#{srv.port}/hijack")
    assert st.success?, err
    assert_equal "rack.hijack?=false rack.hijack=absent 2", out
  end

  def test_no_hijack_on_a_request_upgraded_to_h2c
    out, err, st = E2E.curl("--http2", "-w", " %{http_version}", "http://127.0.0.1:#{srv.port}/hijack")
    assert st.success?, err
    assert_equal "rack.hijack?=false rack.hijack=absent 2", out
  end

  def test_no_hijack_over_h3
    gtlsclient = "/usr/bin/gtlsclient"
    flunk("gtlsclient (Debian package ngtcp2-client) is not installed") unless File.executable?(gtlsclient)
    srv
    Dir.mktmpdir do |dir|
      port = self.class.h3_port
      out, = Open3.capture2e("timeout", "30", gtlsclient, "--exit-on-all-streams-close", "--timeout=10s",
                             "--download=#{dir}", "127.0.0.1", port.to_s, "https://127.0.0.1:#{port}/hijack")
      assert_match(/\[:status: 200\]/, out, out[-2000..])
      assert_equal "rack.hijack?=false rack.hijack=absent", File.read(File.join(dir, "hijack"))
    end
  end

  def test_no_hijack_over_tls
    %w[--http1.1 --http2].each do |version|
      out, err, st = E2E.curl("-k", version, "-w", " %{http_version}", "https://127.0.0.1:#{srv.https_port}/hijack")
      assert st.success?, err
      assert_equal "rack.hijack?=false rack.hijack=absent #{version == '--http2' ? '2' : '1.1'}", out
    end
  end
end
