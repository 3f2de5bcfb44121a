# frozen_string_literal: true

# HTTP/2 end to end (-h2c): the real server, the real gem workers and the mix app, driven by
# nghttp, curl and h2load (prior knowledge and Upgrade: h2c), plus a raw frame client for what
# the tools cannot do on purpose (reset one stream of a connection, watch a drain's GOAWAY).
# Malformed input is tests/h2/negative.py's job (ctest e2e_h2_negative).
require_relative "helper"

# A minimal raw HTTP/2 client: literal header fields (no Huffman, no indexing), frames read
# and kept. Response :status is recognised only as the static-table index nghttp2 emits first
# for 200 (0x88), which is all these tests ask of it.
class H2Raw
  Frame = Struct.new(:type, :flags, :stream_id, :payload)
  DATA = 0
  HEADERS = 1
  RST_STREAM = 3
  SETTINGS = 4
  GOAWAY = 7
  REFUSED_STREAM = 7
  CANCEL = 8

  attr_reader :frames

  def initialize(port)
    @s = TCPSocket.new("127.0.0.1", port)
    @s.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
    @buf = +"".b
    @frames = []
    @s.write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".b + frame(SETTINGS, 0, 0, ""))
  end

  def frame(type, flags, sid, payload)
    payload = payload.b
    [payload.bytesize].pack("N")[1, 3] + [type, flags, sid].pack("CCN") + payload
  end

  def self.hpack_int(v, bits)
    lim = (1 << bits) - 1
    return [v].pack("C") if v < lim

    out = [lim]
    v -= lim
    while v >= 128
      out << ((v & 0x7f) | 0x80)
      v >>= 7
    end
    (out << v).pack("C*")
  end

  def request(sid, path, method: "GET", end_stream: true, extra: {})
    fields = { ":method" => method, ":scheme" => "http", ":authority" => "127.0.0.1",
               ":path" => path }.merge(extra)
    block = fields.map do |k, v|
      "\x00".b + H2Raw.hpack_int(k.bytesize, 7) + k.b + H2Raw.hpack_int(v.bytesize, 7) + v.b
    end.join
    @s.write(frame(HEADERS, 0x4 | (end_stream ? 1 : 0), sid, block))
  end

  def reset(sid, code = CANCEL)
    @s.write(frame(RST_STREAM, 0, sid, [code].pack("N")))
  end

  # Reads frames until the block returns true for one (returns it) or timeout (nil).
  def wait(timeout = 10)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    loop do
      while @buf.bytesize >= 9
        len = ("\x00".b + @buf[0, 3]).unpack1("N")
        break if @buf.bytesize < 9 + len

        type, flags, sid = @buf[3, 6].unpack("CCN")
        f = Frame.new(type, flags, sid & 0x7fffffff, @buf[9, len])
        @buf = @buf[(9 + len)..]
        @s.write(frame(SETTINGS, 1, 0, "")) if type == SETTINGS && flags & 1 == 0
        @frames << f
        return f if yield f
      end
      left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
      return nil if left <= 0
      return nil unless @s.wait_readable(left)

      begin
        @buf << @s.readpartial(65_536)
      rescue EOFError, Errno::ECONNRESET
        return nil
      end
    end
  end

  def status_200?(sid)
    @frames.any? { |f| f.type == HEADERS && f.stream_id == sid && f.payload.getbyte(0) == 0x88 }
  end

  def ended?(sid)
    @frames.any? { |f| f.stream_id == sid && [DATA, HEADERS].include?(f.type) && f.flags & 1 == 1 }
  end

  def rst_code(sid)
    f = @frames.find { |x| x.type == RST_STREAM && x.stream_id == sid }
    f&.payload&.unpack1("N")
  end

  def body(sid)
    @frames.select { |f| f.type == DATA && f.stream_id == sid }.map(&:payload).join
  end

  def close
    @s.close
  rescue IOError
    nil
  end
end

class TestH2 < Minitest::Test
  ENV_APP = File.join(E2E::ROOT, "tests/apps/env/config.ru")

  def self.server
    @server ||= E2E::Server.new(workers: 1, threads: 4, extra: ["-h2c", "-max-body-size", "16MiB"])
  end

  Minitest.after_run do
    @server&.stop
    @env_server&.stop
  end

  def self.env_server
    @env_server ||= E2E::Server.new(app: ENV_APP, workers: 1, threads: 2, extra: ["-h2c"])
  end

  def srv = self.class.server
  def url(path, s = srv) = "http://127.0.0.1:#{s.port}#{path}"
  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def need(tool)
    path = ENV["PATH"].split(":").map { |d| File.join(d, tool) }.find { |p| File.executable?(p) }
    assert path, "#{tool} not found on PATH (nghttp2-client / curl; scripts/install-deps.sh)"
  end

  def nghttp(*args, timeout: 30)
    need("nghttp")
    Open3.capture3("timeout", timeout.to_s, "nghttp", *args)
  end

  def test_nghttp_prior_knowledge_and_upgrade
    out, err, st = nghttp("-v", url("/hello"))
    assert st.success?, err
    assert_includes out, "recv (stream_id=13) :status: 200"
    assert_includes out, "Hello, world\n"

    out, err, st = nghttp("-uv", url("/hello"))
    assert st.success?, err
    assert_includes out, "HTTP/1.1 101 Switching Protocols"
    assert_includes out, "recv (stream_id=1) :status: 200" # the upgrading request is stream 1
    assert_includes out, "Hello, world\n"
  end

  def test_curl_prior_knowledge_and_upgrade
    out, err, = E2E.curl("--http2-prior-knowledge", "-w", "\n%{http_code} %{http_version}", url("/hello"))
    assert_equal "Hello, world\n\n200 2", out, err
    out, err, = E2E.curl("--http2", "-w", "\n%{http_code} %{http_version}", url("/hello"))
    assert_equal "Hello, world\n\n200 2", out, err
    # curl offers h2c for a POST too; the server upgrades only a request without a body
    out, err, = E2E.curl("--http2", "--data-binary", "abc", "-w", "\n%{http_code} %{http_version}", url("/echo"))
    assert_equal "abc\n200 1.1", out, err
  end

  def test_h2load_5000_requests_no_errors
    need("h2load")
    out, err, st = Open3.capture3("timeout", "60", "h2load", "-n", "5000", "-c", "4", "-m", "10", url("/hello"))
    assert st.success?, "h2load: #{err}\n#{out}"
    assert_match(/requests: 5000 total, 5000 started, 5000 done, 5000 succeeded, 0 failed, 0 errored, 0 timeout/, out)
    assert_match(/status codes: 5000 2xx, 0 3xx, 0 4xx, 0 5xx/, out)
    assert_match(/Application protocol: h2c/, out)
  end

  def echo_roundtrip(size, seed)
    body = Random.new(seed).bytes(size)
    path = "/tmp/pp-e2e-h2-body-#{Process.pid}-#{size}"
    File.binwrite(path, body)
    out, err, = E2E.curl("--http2-prior-knowledge", "--data-binary", "@#{path}",
                         "-H", "Content-Type: application/octet-stream",
                         "-w", "%{http_version}", url("/echo"), timeout: 60)
    File.delete(path)
    assert_equal size + 1, out.bytesize, err
    assert_equal "2", out[-1]
    assert_equal body, out.b[0, size], "echoed bytes differ (#{size} bytes)"
  end

  def test_post_echo_300_kib
    echo_roundtrip(300 * 1024, 1)
  end

  def test_post_echo_5_mib_streamed
    echo_roundtrip(5 * 1024 * 1024, 2) # over the 1 MiB buffered: streamed to the worker
  end

  def test_concurrent_streams_of_one_connection_run_in_parallel
    urls = (0...4).map { |i| url("/mix/0/#{300 + i}") }
    nghttp("-n", url("/hello")) # warm up
    t0 = now
    out, err, st = nghttp("-v", "-n", "-m", "1", *urls)
    elapsed = now - t0
    assert st.success?, err
    assert_equal 4, out.scan(/recv \(stream_id=\d+\) :status: 200/).size, out
    assert_equal 1, out.scan(/\] Connected$/).size, "one connection expected:\n#{out}"
    assert_equal 4, out.scan(/send HEADERS frame .*stream_id=\d+>/).size
    assert_operator elapsed, :<, 0.6, "4 x 300 ms on 4 threads over one connection took #{elapsed.round(3)} s"
  end

  def test_head_has_no_body
    out, err, = E2E.curl("--http2-prior-knowledge", "-I", "-w", "%{size_download} %{http_version}", url("/hello"))
    assert_match(%r{\AHTTP/2 200 ?\r\n}, out, err)
    assert_match(/content-length: 13\r\n/i, out)
    assert out.end_with?("\r\n\r\n0 2"), out
    # raw: the HEADERS frame ends the stream, no DATA follows
    c = H2Raw.new(srv.port)
    c.request(1, "/hello", method: "HEAD")
    assert c.wait { |f| f.stream_id == 1 && f.flags & 1 == 1 }, "no end of stream"
    assert c.status_200?(1)
    c.wait(0.3) { false }
    assert_equal [], c.frames.select { |f| f.type == H2Raw::DATA && f.stream_id == 1 }.map(&:payload).reject(&:empty?)
    c.close
  end

  def queue_stats = srv.stats["queue"]

  def wait_until(timeout = 5)
    deadline = now + timeout
    until (v = yield)
      return false if now > deadline

      sleep 0.02
    end
    v
  end

  def test_client_reset_of_queued_and_running_streams
    before = queue_stats
    c = H2Raw.new(srv.port)
    # 4 threads: streams 1..7 occupy them, stream 9 waits in the queue
    [1, 3, 5, 7].each { |sid| c.request(sid, "/mix/0/1500") }
    assert wait_until { queue_stats["slots_busy"] == 4 }, "4 running requests expected: #{queue_stats}"
    c.request(9, "/hello")
    assert wait_until { queue_stats["depth"] == 1 }, "stream 9 not queued: #{queue_stats}"
    c.reset(9)
    assert wait_until { queue_stats["cancelled_queued"] == before["cancelled_queued"] + 1 },
           "cancelled_queued did not increment: #{queue_stats}"
    assert_equal 0, queue_stats["depth"]
    c.reset(1)
    assert wait_until { queue_stats["cancelled_running"] == before["cancelled_running"] + 1 },
           "cancelled_running did not increment: #{queue_stats}"
    # the other three complete normally on the same connection
    assert c.wait(10) { [3, 5, 7].all? { |s| c.ended?(s) } }, "streams 3, 5, 7 did not complete"
    [3, 5, 7].each { |s| assert c.status_200?(s), "stream #{s} not 200" }
    refute c.ended?(9)
    c.close
  end

  def test_sigterm_drain_during_h2_load
    s = E2E::Server.new(workers: 1, threads: 4, extra: ["-h2c"])
    need("h2load")
    begin
      load_out = nil
      loader = Thread.new do
        load_out = Open3.capture2e("timeout", "30", "h2load", "-D", "3", "-c", "2", "-m", "4",
                                   url("/mix/0/20", s))[0]
      end
      c = H2Raw.new(s.port)
      [1, 3, 5].each { |sid| c.request(sid, "/mix/0/800") }
      assert wait_until { s.stats["queue"]["slots_busy"] >= 3 }, "in-flight streams not running"
      Process.kill("TERM", s.pid)
      goaway = c.wait(5) { |f| f.type == H2Raw::GOAWAY }
      refute_nil goaway, "no GOAWAY after SIGTERM"
      last, code = goaway.payload.unpack("NN")
      assert_equal 0, code, "GOAWAY code"
      assert_operator last & 0x7fffffff, :>=, 5
      c.request(7, "/hello") # after the GOAWAY: refused
      assert c.wait(10) { [1, 3, 5].all? { |sid| c.ended?(sid) } && c.rst_code(7) }, "frames: #{c.frames.map(&:to_a).inspect[0, 600]}"
      [1, 3, 5].each do |sid|
        assert c.status_200?(sid), "in-flight stream #{sid} not 200"
        assert_equal "cpu_ns=0 sleep_ms=800\n", c.body(sid)
      end
      assert_equal H2Raw::REFUSED_STREAM, c.rst_code(7)
      c.close
      status = nil
      deadline = now + 20
      until (done = Process.waitpid(s.pid, Process::WNOHANG)) || now > deadline
        sleep 0.05
      end
      status = $? if done
      loader.join(30)
      assert status&.success?, "server exit status after drain: #{status.inspect}"
      # h2load's streams: every one that was answered got a 2xx; none failed mid-response
      assert_match(/status codes: \d+ 2xx, 0 3xx, 0 4xx, 0 5xx/, load_out)
    ensure
      s.instance_variable_set(:@pid, nil) if status
      s.stop
    end
  end

  # The last in-flight stream of a draining server must still get its response. Found here
  # (fails at 0a3237a): the final stream's END_STREAM closes it inside pp_h2_output, on_close
  # releases the exchange, pp_exchange_release calls pp_drain_check synchronously, which sees
  # live_requests == 0 and an h2 connection with no streams and no writes in flight, and
  # closes it (uv_shutdown) before h2_pump has handed that stream's frames to the connection:
  # the response is lost, the server says "drained" and exits 0.
  def test_drain_keeps_the_last_streams_response
    s = E2E::Server.new(workers: 1, threads: 4, extra: ["-h2c"])
    begin
      c = H2Raw.new(s.port)
      plan = { 1 => 300, 3 => 500, 5 => 700 }
      plan.each { |sid, ms| c.request(sid, "/mix/0/#{ms}") }
      assert wait_until { s.stats["queue"]["slots_busy"] == 3 }, "3 streams not running"
      Process.kill("TERM", s.pid)
      c.wait(10) { plan.keys.all? { |sid| c.ended?(sid) } }
      got = plan.to_h { |sid, ms| [sid, c.ended?(sid) && c.status_200?(sid) && c.body(sid) == "cpu_ns=0 sleep_ms=#{ms}\n"] }
      assert_equal({ 1 => true, 3 => true, 5 => true }, got,
                   "responses during drain (true = 200 and body); frames: " +
                   c.frames.map { |f| [f.type, f.flags, f.stream_id] }.inspect)
      c.close
    ensure
      s.stop
    end
  end

  def env_json(*args)
    hdrs = ["-H", "User-Agent: pp-test", "-H", "Accept: */*", "-H", "X-Probe: a b",
            "-H", "Cookie: a=1; b=2"]
    out, err, = E2E.curl(*args, *hdrs, url("/some/path?q=1&r=%20", self.class.env_server))
    JSON.parse(out)
  rescue JSON::ParserError
    flunk "env app: #{out.inspect} #{err}"
  end

  def test_rack_env_same_over_h1_and_h2c
    per_request = %w[puma_plus.request_id puma_plus.queue_ns HTTP_X_REQUEST_START]
    [[], ["--data-binary", "x=1", "-H", "Content-Type: application/x-www-form-urlencoded"]].each do |post|
      h1 = env_json("--http1.1", *post).reject { |k, _| per_request.include?(k) }
      h2 = env_json("--http2-prior-knowledge", *post).reject { |k, _| per_request.include?(k) }
      up = env_json("--http2", *post).reject { |k, _| per_request.include?(k) }
      assert_equal "HTTP/1.1", h1.delete("SERVER_PROTOCOL")
      assert_equal "HTTP/2", h2.delete("SERVER_PROTOCOL")
      # The upgrading request (Upgrade: h2c, answered on stream 1) was an HTTP/1.1 request on
      # the wire, and its env is the HTTP/1.1 one, the upgrade's own fields included.
      assert_equal "HTTP/1.1", up.delete("SERVER_PROTOCOL")
      assert_equal "Upgrade, HTTP2-Settings", up.delete("HTTP_CONNECTION")
      assert_equal "h2c", up.delete("HTTP_UPGRADE")
      refute_nil up.delete("HTTP_HTTP2_SETTINGS")
      # Full hijack exists on plain HTTP/1.1 only: not on h2, nor on a request that becomes
      # h2 stream 1 (docs/RACK.md "Hijack"); a POST asking for h2c is not upgraded, so it is
      # plain HTTP/1.1. Apart from that the envs are the same.
      assert_equal [true, "#<Proc>"], [h1.delete("rack.hijack?"), h1.delete("rack.hijack")]
      assert_equal false, h2.delete("rack.hijack?")
      if post.empty?
        assert_equal [false, nil], [up.delete("rack.hijack?"), up.delete("rack.hijack")]
      else
        assert_equal [true, "#<Proc>"], [up.delete("rack.hijack?"), up.delete("rack.hijack")]
      end
      assert_equal h1.keys.sort, h2.keys.sort
      h1.each_key { |k| assert_equal h1[k], h2[k], "env[#{k}] differs (h1 vs h2c)" }
      assert_equal h1, up
      assert_equal "/some/path", h2["PATH_INFO"]
      assert_equal "q=1&r=%20", h2["QUERY_STRING"]
      assert_equal "a=1; b=2", h2["HTTP_COOKIE"]
      assert_equal "3", h2["CONTENT_LENGTH"] unless post.empty?
    end
  end
end
