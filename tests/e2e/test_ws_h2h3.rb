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

  def teardown
    @srv&.stop
    @off&.stop
  end

  def run_client(args)
    out, st = Open3.capture2e(*args)
    [st.success?, out]
  end

  def test_websocket_over_h2
    flunk("python3-h2 (Debian) is missing in #{PY}") unless system(PY, "-c", "import h2", err: File::NULL)
    @srv = E2E::Server.new(app: APP, workers: 2, threads: 2, extra: ["-h2c"])
    @off = E2E::Server.new(app: APP, workers: 1, threads: 2, extra: ["-h2c", "-no-extended-connect"])
    ok, out = run_client([PY, File.join(E2E::ROOT, "tests/ws/h2ws.py"), "127.0.0.1",
                          @srv.port.to_s, @off.port.to_s])
    assert ok, out + "\n--- server log ---\n" + @srv.log[-3000..].to_s
    assert_match(/^18 passed, 0 failed$/, out)
    st = JSON.parse(Net::HTTP.get(URI("http://127.0.0.1:#{@srv.control_port}/stats")))
    assert_operator st["websocket"]["opened"], :>=, 6, st["websocket"].inspect
    assert_equal 0, st["websocket"]["open"], "every WebSocket stream was closed"
    # the slow reader case: stream flow control held the echo back until the codec's bound
    assert_equal 1, st["websocket"]["slow_reader_closes"], st["websocket"].inspect
  end

  # browsers speak RFC 8441 over TLS only (ALPN h2 on -listen-tls)
  def test_websocket_over_h2_tls
    flunk("python3-h2 (Debian) is missing in #{PY}") unless system(PY, "-c", "import h2", err: File::NULL)
    @srv = E2E::Server.new(app: APP, workers: 1, threads: 2, tls: true)
    ok, out = run_client([PY, File.join(E2E::ROOT, "tests/ws/h2ws.py"), "--tls", "127.0.0.1",
                          @srv.https_port.to_s])
    assert ok, out + "\n--- server log ---\n" + @srv.log[-3000..].to_s
    assert_match(/^8 passed, 0 failed$/, out)
  end

  # One broadcast from an HTTP/1.1 POST reaches subscribers of the tag on HTTP/2 and HTTP/3
  # (fan-out in C to every protocol's transport).
  def test_broadcast_across_protocols
    bin = ENV["PP_WS_H3_BIN"] || File.expand_path("ws-h3", File.dirname(E2E::BIN))
    flunk("ws-h3 not built (#{bin})") unless File.executable?(bin)
    h3_port = E2E.free_port
    @srv = E2E::Server.new(app: APP, workers: 2, threads: 2,
                           extra: ["-h2c", "-listen-h3", "127.0.0.1:#{h3_port}"])
    subs = [[PY, File.join(E2E::ROOT, "tests/ws/h2ws.py"), "--subscribe", "127.0.0.1", @srv.port.to_s,
             "everyone", "across"],
            [bin, "127.0.0.1", h3_port.to_s, "-subscribe", "everyone", "across"]].map do |cmd|
      inp, out, wait = Open3.popen2e(*cmd)
      inp.close
      [out, wait]
    end
    subs.each do |out, _|
      line = Timeout.timeout(15) { out.gets }
      assert_equal "ready\n", line
    end
    res = Net::HTTP.post(URI("http://127.0.0.1:#{@srv.port}/broadcast?room=everyone"), "across")
    assert_equal "200", res.code
    subs.each do |out, wait|
      status = Timeout.timeout(15) { wait.value }
      rest = out.read
      assert status.success?, rest
      assert_equal "got\n", rest
    end
    st = JSON.parse(Net::HTTP.get(URI("http://127.0.0.1:#{@srv.control_port}/stats")))
    assert_operator st["websocket"]["fanout"], :>=, 2, st["websocket"].inspect
  ensure
    subs&.each do |out, wait|
      Process.kill("TERM", wait.pid) rescue nil # rubocop:disable Style/RescueModifier
      out.close rescue nil # rubocop:disable Style/RescueModifier
    end
  end

  # A worker killed under sticky WebSockets on HTTP/2 and HTTP/3: the server closes them with
  # 1012 (service restart) over their streams.
  def test_sticky_worker_killed
    bin = ENV["PP_WS_H3_BIN"] || File.expand_path("ws-h3", File.dirname(E2E::BIN))
    flunk("ws-h3 not built (#{bin})") unless File.executable?(bin)
    h3_port = E2E.free_port
    @srv = E2E::Server.new(app: APP, workers: 2, threads: 2,
                           extra: ["-h2c", "-listen-h3", "127.0.0.1:#{h3_port}"])
    clients = [[PY, File.join(E2E::ROOT, "tests/ws/h2ws.py"), "--sticky-close", "127.0.0.1",
                @srv.port.to_s],
               [bin, "127.0.0.1", h3_port.to_s, "-sticky-close"]].map do |cmd|
      inp, out, wait = Open3.popen2e(*cmd)
      inp.close
      [out, wait]
    end
    pids = clients.map do |out, _|
      line = Timeout.timeout(15) { out.gets }.to_s
      assert_match(/\Apid \d+\n\z/, line)
      line.split.last.to_i
    end
    pids.uniq.each { |pid| Process.kill("KILL", pid) }
    clients.each do |out, wait|
      status = Timeout.timeout(20) { wait.value }
      rest = out.read
      assert status.success?, rest
      assert_equal "close 1012\n", rest
    end
  ensure
    clients&.each do |out, wait|
      Process.kill("TERM", wait.pid) rescue nil # rubocop:disable Style/RescueModifier
      out.close rescue nil # rubocop:disable Style/RescueModifier
    end
  end

  # A drain (SIGTERM) closes an HTTP/3 WebSocket with 1001 (going away) at its start, and the
  # server exits without waiting for the client or QUIC's idle timeout. (python3-h2 drops the
  # DATA that follows a GOAWAY, so the HTTP/2 side of this is not checked with it.)
  def test_drain_closes_h3_websocket
    bin = ENV["PP_WS_H3_BIN"] || File.expand_path("ws-h3", File.dirname(E2E::BIN))
    flunk("ws-h3 not built (#{bin})") unless File.executable?(bin)
    h3_port = E2E.free_port
    @srv = E2E::Server.new(app: APP, workers: 1, threads: 2,
                           extra: ["-listen-h3", "127.0.0.1:#{h3_port}"])
    inp, out, wait = Open3.popen2e(bin, "127.0.0.1", h3_port.to_s, "-sticky-close")
    inp.close
    assert_match(/\Apid \d+\n\z/, Timeout.timeout(15) { out.gets }.to_s)
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    @srv.stop
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    status = Timeout.timeout(15) { wait.value }
    rest = out.read
    assert status.success?, rest
    assert_equal "close 1001\n", rest
    assert_operator took, :<, 10, "the drain waited for the WebSocket"
  ensure
    Process.kill("TERM", wait.pid) if wait&.alive?
    out&.close
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
    st = JSON.parse(Net::HTTP.get(URI("http://127.0.0.1:#{@srv.control_port}/stats")))
    assert_equal 1, st["websocket"]["opened"]
    assert_operator st["http2"]["streams"], :>=, 2, "the page and the WebSocket are HTTP/2 streams"
  end

  def test_websocket_over_h3
    bin = ENV["PP_WS_H3_BIN"] || File.expand_path("ws-h3", File.dirname(E2E::BIN))
    flunk("ws-h3 not built (#{bin})") unless File.executable?(bin)
    h3_port = E2E.free_port
    # a 2 s QUIC idle timeout: the quiet case waits 4 s on an open WebSocket
    @srv = E2E::Server.new(app: APP, workers: 2, threads: 2,
                           extra: ["-listen-h3", "127.0.0.1:#{h3_port}", "-keepalive-timeout", "2s"])
    ok, out = run_client([bin, "127.0.0.1", h3_port.to_s, "-quiet", "4"])
    assert ok, out + "\n--- server log ---\n" + @srv.log[-3000..].to_s
    assert_match(/^11 passed, 0 failed$/, out)
    st = nil
    # the client's CONNECTION_CLOSE ends every stream it left open
    10.times do
      st = JSON.parse(Net::HTTP.get(URI("http://127.0.0.1:#{@srv.control_port}/stats")))
      break if st["websocket"]["open"].zero?

      sleep 0.2
    end
    assert_operator st["websocket"]["opened"], :>=, 4, st["websocket"].inspect
    assert_equal 0, st["websocket"]["open"], "every WebSocket stream was closed"
    assert_operator st["websocket"]["bytes_in"], :>=, 100 * 1024
  end
end
