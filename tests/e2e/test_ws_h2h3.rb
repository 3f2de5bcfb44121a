# frozen_string_literal: true

# WebSockets over HTTP/2 (RFC 8441) and HTTP/3 (RFC 9220) end to end: the real server with
# tests/apps/websocket, the real gem workers, and clients of ours: tests/ws/h2ws.py (Debian's
# python3-h2 for HTTP/2, the WebSocket frames by hand) over a cleartext -h2c listener and TLS,
# and ws-h3 (server/tests/ws_h3.c, the quic_client kit) over -listen-h3; then one broadcast from
# an HTTP/1.1 POST to subscribers on HTTP/2 and HTTP/3. Each client prints one line per
# case and "N passed, M failed"; its exit status is the verdict.
require_relative "helper"
require "net/http"

class TestWsH2H3 < Minitest::Test
  APP = File.join(E2E::ROOT, "tests/apps/websocket/config.ru")
  PY = "/usr/bin/python3"
  H2WS = File.join(E2E::ROOT, "tests/ws/h2ws.py")

  def setup
    @clients = []
  end

  def teardown
    @clients.each do |out, wait|
      Process.kill("TERM", wait.pid) if wait.alive?
      out.close unless out.closed?
    end
    @srv&.stop
    @off&.stop
  end

  def need_h2
    flunk("python3-h2 (Debian) is missing in #{PY}") unless system(PY, "-c", "import h2", err: File::NULL)
  end

  def ws_h3_bin
    bin = ENV["PP_WS_H3_BIN"] || File.expand_path("ws-h3", File.dirname(E2E::BIN))
    flunk("ws-h3 not built (#{bin})") unless File.executable?(bin)
    bin
  end

  # The server of APP with an HTTP/3 listener on a free port (and -h2c with h2c: true);
  # returns that port.
  def start_h3_server(workers:, h2c: false, extra: [])
    h3_port = E2E.free_port
    @srv = E2E::Server.new(app: APP, workers: workers, threads: 2,
                           extra: [*("-h2c" if h2c), "-listen-h3", "127.0.0.1:#{h3_port}", *extra])
    h3_port
  end

  # Runs a client to its end: it passed and said "N passed, 0 failed".
  def assert_client_passes(cmd, passed)
    out, st = Open3.capture2e(*cmd)
    assert st.success?, out + "\n--- server log ---\n" + @srv.log[-3000..].to_s
    assert_match(/^#{passed} passed, 0 failed$/, out)
  end

  # A client that runs alongside the test (stdin closed, stdout and stderr as one; stopped in
  # teardown), and its first line (within 15 s).
  def start_client(cmd)
    inp, out, wait = Open3.popen2e(*cmd)
    inp.close
    @clients << [out, wait]
    [out, wait, Timeout.timeout(15) { out.gets }.to_s]
  end

  # The client ends within `timeout` s, successfully, having printed `rest` after its first line.
  def assert_client_ends(out, wait, rest, timeout)
    status = Timeout.timeout(timeout) { wait.value }
    more = out.read
    assert status.success?, more
    assert_equal rest, more
  end

  def test_websocket_over_h2
    need_h2
    @srv = E2E::Server.new(app: APP, workers: 2, threads: 2, extra: ["-h2c"])
    @off = E2E::Server.new(app: APP, workers: 1, threads: 2, extra: ["-h2c", "-no-extended-connect"])
    assert_client_passes([PY, H2WS, "127.0.0.1", @srv.port.to_s, @off.port.to_s], 18)
    st = @srv.stats
    assert_operator st["websocket"]["opened"], :>=, 6, st["websocket"].inspect
    assert_equal 0, st["websocket"]["open"], "every WebSocket stream was closed"
    # the slow reader case: stream flow control held the echo back until the codec's bound
    assert_equal 1, st["websocket"]["slow_reader_closes"], st["websocket"].inspect
  end

  # browsers speak RFC 8441 over TLS only (ALPN h2 on -listen-tls)
  def test_websocket_over_h2_tls
    need_h2
    @srv = E2E::Server.new(app: APP, workers: 1, threads: 2, tls: true)
    assert_client_passes([PY, H2WS, "--tls", "127.0.0.1", @srv.https_port.to_s], 8)
  end

  # One broadcast from an HTTP/1.1 POST reaches subscribers of the tag on HTTP/2 and HTTP/3
  # (fan-out in C to every protocol's transport).
  def test_broadcast_across_protocols
    bin = ws_h3_bin
    h3_port = start_h3_server(workers: 2, h2c: true)
    subs = [[PY, H2WS, "--subscribe", "127.0.0.1", @srv.port.to_s, "everyone", "across"],
            [bin, "127.0.0.1", h3_port.to_s, "-subscribe", "everyone", "across"]].map do |cmd|
      out, wait, line = start_client(cmd)
      assert_equal "ready\n", line
      [out, wait]
    end
    res = Net::HTTP.post(URI("http://127.0.0.1:#{@srv.port}/broadcast?room=everyone"), "across")
    assert_equal "200", res.code
    subs.each { |out, wait| assert_client_ends(out, wait, "got\n", 15) }
    st = @srv.stats
    assert_operator st["websocket"]["fanout"], :>=, 2, st["websocket"].inspect
  end

  # A worker killed under sticky WebSockets on HTTP/2 and HTTP/3: the server closes them with
  # 1012 (service restart) over their streams.
  def test_sticky_worker_killed
    bin = ws_h3_bin
    h3_port = start_h3_server(workers: 2, h2c: true)
    clients = [[PY, H2WS, "--sticky-close", "127.0.0.1", @srv.port.to_s],
               [bin, "127.0.0.1", h3_port.to_s, "-sticky-close"]].map { |cmd| start_client(cmd) }
    pids = clients.map do |_, _, line|
      assert_match(/\Apid \d+\n\z/, line)
      line.split.last.to_i
    end
    pids.uniq.each { |pid| Process.kill("KILL", pid) }
    clients.each { |out, wait, _| assert_client_ends(out, wait, "close 1012\n", 20) }
  end

  # A drain (SIGTERM) closes an HTTP/3 WebSocket with 1001 (going away) at its start, and the
  # server exits without waiting for the client or QUIC's idle timeout. (python3-h2 drops the
  # DATA that follows a GOAWAY, so the HTTP/2 side of this is not checked with it.)
  def test_drain_closes_h3_websocket
    bin = ws_h3_bin
    h3_port = start_h3_server(workers: 1)
    out, wait, line = start_client([bin, "127.0.0.1", h3_port.to_s, "-sticky-close"])
    assert_match(/\Apid \d+\n\z/, line)
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    @srv.stop
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    assert_client_ends(out, wait, "close 1001\n", 15)
    assert_operator took, :<, 10, "the drain waited for the WebSocket"
  end

  # A browser: Chromium loads a page over TLS (ALPN h2) and its wss:// WebSocket rides that
  # HTTP/2 connection as an extended CONNECT (tests/apps/ws_h2_page, tests/ws/h2_browser.py).
  def test_chromium_websocket_over_h2
    flunk("/usr/bin/chromium (Debian's chromium) is missing") unless File.executable?("/usr/bin/chromium")
    page_app = File.join(E2E::ROOT, "tests/apps/ws_h2_page/config.ru")
    @srv = E2E::Server.new(app: page_app, workers: 1, threads: 2, tls: true)
    out, err, st = Open3.capture3(PY, File.join(E2E::ROOT, "tests/ws/h2_browser.py"), "--url",
                                  "https://127.0.0.1:#{@srv.https_port}/page", "--timeout", "30")
    assert st.success?, "h2_browser.py failed:\n#{err}\n#{out}\n#{@srv.log[-2000..]}"
    r = JSON.parse(out.lines.last)
    assert_nil r["error"], r.inspect
    assert_equal "HTTP/2", r["protocol"], "the upgrade request came over HTTP/2: #{r}"
    assert_equal 54, r["echoes"], r.inspect
    assert_equal [], r["mismatches"]
    assert_match(/\Apermessage-deflate/, r["extensions"].to_s)
    assert_equal 4001, r["close_code"]
    assert r["clean"], r.inspect
    st = @srv.stats
    assert_equal 1, st["websocket"]["opened"]
    assert_operator st["http2"]["streams"], :>=, 2, "the page and the WebSocket are HTTP/2 streams"
  end

  def test_websocket_over_h3
    bin = ws_h3_bin
    # a 2 s QUIC idle timeout: the quiet case waits 4 s on an open WebSocket
    h3_port = start_h3_server(workers: 2, extra: ["-keepalive-timeout", "2s"])
    assert_client_passes([bin, "127.0.0.1", h3_port.to_s, "-quiet", "4"], 11)
    st = nil
    # the client's CONNECTION_CLOSE ends every stream it left open
    10.times do
      st = @srv.stats
      break if st["websocket"]["open"].zero?

      sleep 0.2
    end
    assert_operator st["websocket"]["opened"], :>=, 4, st["websocket"].inspect
    assert_equal 0, st["websocket"]["open"], "every WebSocket stream was closed"
    assert_operator st["websocket"]["bytes_in"], :>=, 100 * 1024
  end
end
