# frozen_string_literal: true

# HTTP/3 end to end: the real server with -listen-h3 (QUIC over UDP on loopback), the real
# gem workers, and ngtcp2's gtlsclient (Debian's ngtcp2-client) as the client. gtlsclient
# exits 0 even when the request failed, so every check reads its output: the response status
# and body bytes it logs. Alt-Svc is checked on the TCP listeners with curl.
require_relative "helper"
require "digest"
require "net/http"

class TestH3 < Minitest::Test
  GTLSCLIENT = "/usr/bin/gtlsclient"

  def setup
    # a missing client is a failure naming the package, never a silent skip
    flunk("gtlsclient (Debian package ngtcp2-client) is not installed") unless File.executable?(GTLSCLIENT)
    @h3_port = E2E.free_port
    @srv = E2E::Server.new(workers: 1, threads: 4, tls: true,
                           extra: ["-listen-h3", "127.0.0.1:#{@h3_port}"])
  end

  def teardown
    @srv&.stop
  end

  # Runs gtlsclient for one request; returns [status, body_bytes, output].
  def h3(path, data: nil, extra: [])
    args = [GTLSCLIENT, "--exit-on-all-streams-close", "--timeout=10s"]
    args += ["-d", data] if data
    args += extra
    args += ["127.0.0.1", @h3_port.to_s, "https://127.0.0.1:#{@h3_port}#{path}"]
    out, = Open3.capture2e(*args)
    status = out[/\[:status: (\d+)\]/, 1]&.to_i
    body = out.scan(/http: stream 0x0 body (\d+) bytes/).flatten.sum(&:to_i)
    [status, body, out]
  end

  def stats
    JSON.parse(Net::HTTP.get(URI("http://127.0.0.1:#{@srv.control_port}/stats")))
  end

  def test_get_over_h3
    status, body, out = h3("/hello")
    assert_equal 200, status, out[-2000..]
    assert_equal "Hello, world\n".bytesize, body
    refute_match(/alt-svc/i, out[/response headers started.*headers ended/m].to_s,
                 "Alt-Svc must never be sent on HTTP/3 responses")
    st = stats["http3"]
    assert_operator st["handshakes"], :>=, 1
    assert_operator st["streams"], :>=, 1
  end

  def test_post_3_mib_echo_over_h3
    Dir.mktmpdir do |dir|
      file = File.join(dir, "body.bin")
      File.binwrite(file, Random.new(7).bytes(3 * 1024 * 1024))
      status, body, out = h3("/echo", data: file)
      assert_equal 200, status, out[-2000..]
      assert_equal 3 * 1024 * 1024, body, "the whole echoed body arrives (flow control both ways)"
    end
  end

  def test_streamed_response_and_concurrent_streams_on_one_connection
    status, body, out = h3("/stream/5")
    assert_equal 200, status, out[-2000..]
    assert_equal (0...5).map { |i| "chunk #{i}\n" }.join.bytesize, body
    # four requests on one QUIC connection: each its own stream, each its own exchange
    paths = %w[/mix/0/300 /mix/0/300 /mix/0/300 /mix/0/300].map { |p| "https://127.0.0.1:#{@h3_port}#{p}" }
    t0 = Time.now
    out, = Open3.capture2e(GTLSCLIENT, "--exit-on-all-streams-close", "--timeout=10s",
                           "127.0.0.1", @h3_port.to_s, *paths)
    elapsed = Time.now - t0
    assert_equal 4, out.scan(/\[:status: 200\]/).size, out[-2000..]
    assert_operator elapsed, :<, 1.2, "4 x 300 ms on 4 threads run at once, not one after another"
    assert_operator stats["http3"]["connections"], :>=, 1
  end

  def test_alt_svc_on_tcp_responses
    out, = Open3.capture2("curl", "-s", "-D", "-", "-o", "/dev/null", "http://127.0.0.1:#{@srv.port}/hello")
    assert_match(/^alt-svc: h3=":#{@h3_port}"; ma=86400\r$/i, out)
    out, = Open3.capture2("curl", "-sk", "-D", "-", "-o", "/dev/null", "https://127.0.0.1:#{@srv.https_port}/hello")
    assert_match(/^alt-svc: h3=":#{@h3_port}"; ma=86400\r$/i, out, "also on HTTP/2 over TLS")
    out, = Open3.capture2("curl", "-s", "-D", "-", "-o", "/dev/null", "http://127.0.0.1:#{@srv.port}/nope")
    assert_match(/^alt-svc: h3=/i, out, "also on error responses")
  end

  def test_garbage_datagrams_are_counted_and_the_server_keeps_serving
    sock = UDPSocket.new
    sock.send("garbage" * 20, 0, "127.0.0.1", @h3_port)            # not QUIC at all
    sock.send("\xc0\x00\x00\x00\x01".b + ("x" * 40), 0, "127.0.0.1", @h3_port) # a short Initial
    sock.send("\x40".b + ("y" * 40), 0, "127.0.0.1", @h3_port)     # unknown short-header CID
    sock.close
    deadline = Time.now + 3
    drops = nil
    loop do
      drops = stats["http3"]["drops"]
      break if drops.values.sum >= 3 || Time.now > deadline

      sleep 0.05
    end
    assert_operator drops.values.sum, :>=, 3, drops.inspect
    status, = h3("/hello")
    assert_equal 200, status
  end

  def test_idle_connections_are_freed_and_sigterm_drains
    status, = h3("/hello")
    assert_equal 200, status
    deadline = Time.now + 5
    sleep 0.05 while stats["http3"]["connections_open"].positive? && Time.now < deadline
    assert_equal 0, stats["http3"]["connections_open"], "a closed client's connection is freed"
    t0 = Time.now
    Process.kill("TERM", @srv.pid)
    _, st = Process.wait2(@srv.pid)
    @srv = nil
    assert st.success?, "exit status #{st.inspect}"
    assert_operator Time.now - t0, :<, 10, "SIGTERM drains promptly"
  end
end

class TestH3NoAltSvc < Minitest::Test
  def test_no_alt_svc_flag
    h3_port = E2E.free_port
    srv = E2E::Server.new(workers: 1, threads: 2,
                          extra: ["-listen-h3", "127.0.0.1:#{h3_port}", "-no-alt-svc"])
    out, = Open3.capture2("curl", "-s", "-D", "-", "-o", "/dev/null", "http://127.0.0.1:#{srv.port}/hello")
    refute_match(/alt-svc/i, out)
  ensure
    srv&.stop
  end
end

# A QUIC client that vanishes sends nothing more: the server learns it at the idle timeout
# (-keepalive-timeout, short here), and the running exchange is then cancelled.
class TestH3VanishingClient < Minitest::Test
  GTLSCLIENT = TestH3::GTLSCLIENT

  def test_a_client_that_vanishes_mid_response_cancels_its_worker
    flunk("gtlsclient (Debian package ngtcp2-client) is not installed") unless File.executable?(GTLSCLIENT)
    h3_port = E2E.free_port
    srv = E2E::Server.new(workers: 1, threads: 2, tls: true,
                          extra: ["-listen-h3", "127.0.0.1:#{h3_port}", "-keepalive-timeout", "2s"])
    stats = -> { JSON.parse(Net::HTTP.get(URI("http://127.0.0.1:#{srv.control_port}/stats"))) }
    before = stats.call["queue"]["cancelled_running"]
    pid = Process.spawn(GTLSCLIENT, "--exit-on-all-streams-close", "--timeout=30s", "-q", "127.0.0.1",
                        h3_port.to_s, "https://127.0.0.1:#{h3_port}/stream/2000", out: File::NULL, err: File::NULL)
    sleep 0.8 # the stream is running: 2000 chunks take 20 s
    Process.kill("KILL", pid) # no CONNECTION_CLOSE, no RESET_STREAM: the client is just gone
    Process.wait(pid)
    deadline = Time.now + 15
    sleep 0.2 while stats.call["queue"]["cancelled_running"] == before && Time.now < deadline
    assert_operator stats.call["queue"]["cancelled_running"], :>, before, "cancelled at the idle timeout"
    assert_equal 0, stats.call["http3"]["connections_open"]
    out, = Open3.capture2e(GTLSCLIENT, "--exit-on-all-streams-close", "--timeout=10s", "127.0.0.1",
                           h3_port.to_s, "https://127.0.0.1:#{h3_port}/hello")
    assert_match(/\[:status: 200\]/, out, "the worker thread is free again")
  ensure
    srv&.stop
  end
end

# The Rack env over HTTP/3 is the one over HTTP/2 and HTTP/1.1 (both over TLS) apart from
# SERVER_PROTOCOL. gtlsclient cannot send extra headers, so curl sends exactly the ones it sends
# (user-agent, no accept); TLS and QUIC listen on the same port number so Host and SERVER_PORT
# match too. The app answers with the env's string values as JSON (tests/apps/env_strings).
class TestH3Env < Minitest::Test
  GTLSCLIENT = TestH3::GTLSCLIENT
  APP = File.join(E2E::ROOT, "tests/apps/env_strings/config.ru")

  def test_env_over_h3_equals_h2_and_h1_over_tls
    flunk("gtlsclient (Debian package ngtcp2-client) is not installed") unless File.executable?(GTLSCLIENT)
    port = E2E.free_port
    srv = E2E::Server.new(app: APP, workers: 1, threads: 2,
                          extra: ["-listen-tls", "127.0.0.1:#{port}", "-listen-h3", "127.0.0.1:#{port}"])
    url = "https://127.0.0.1:#{port}/env/x?y=1&z=%20"
    Dir.mktmpdir do |dir|
      _, st = Open3.capture2e(GTLSCLIENT, "--exit-on-all-streams-close", "--timeout=10s", "-q",
                              "--download=#{dir}", "127.0.0.1", port.to_s, url)
      assert st.success?
      file = Dir[File.join(dir, "*")].first
      refute_nil file, "gtlsclient saved no response body"
      h3 = JSON.parse(File.read(file))
      curl = ->(*flags) { JSON.parse(Open3.capture2("curl", "-sk", *flags, "-H", "user-agent: nghttp3/ngtcp2 client", "-H", "accept:", url)[0]) }
      h2 = curl.call("--http2")
      h1 = curl.call("--http1.1")
      assert_equal "HTTP/3", h3["SERVER_PROTOCOL"]
      assert_equal "HTTP/2", h2["SERVER_PROTOCOL"]
      assert_equal "HTTP/1.1", h1["SERVER_PROTOCOL"]
      strip = ->(env) { env.reject { |k, _| k == "SERVER_PROTOCOL" } }
      assert_equal strip.call(h2), strip.call(h3), "h3 vs h2 env differs"
      assert_equal strip.call(h1), strip.call(h3), "h3 vs h1 env differs"
      assert_equal "https", h3["rack.url_scheme"]
      assert_equal port.to_s, h3["SERVER_PORT"]
    end
  ensure
    srv&.stop
  end
end
