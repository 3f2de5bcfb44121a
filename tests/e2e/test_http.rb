# frozen_string_literal: true

# HTTP/1.1 end to end: the real server, the real gem workers and the mix app, driven by curl,
# wrk and raw sockets. GET, POST, chunked upload, a streamed (> 1 MiB) upload, keep-alive,
# pipelining (responses in order), HEAD, Expect: 100-continue, Connection: close, HTTP/1.0,
# unix and IPv6 listeners, every refusal status on the wire, and the app under Rack::Lint.
require "net/http"
require_relative "helper"

class TestHTTP < Minitest::Test
  UNIX_PATH = "/tmp/pp-e2e-http-#{Process.pid}.sock"

  def self.server
    @server ||= begin
      v6 = begin
        TCPServer.new("::1", 0).close
        true
      rescue StandardError
        false
      end
      @v6_port = v6 ? E2E.free_port : nil
      extra = ["-listen", "unix:#{UNIX_PATH}", "-max-body-size", "8MiB"]
      extra += ["-listen", "[::1]:#{@v6_port}"] if v6
      E2E::Server.new(workers: 2, threads: 2, extra: extra)
    end
  end

  def self.v6_port = @v6_port

  Minitest.after_run { @server&.stop }

  def srv = self.class.server
  def url(path) = "http://127.0.0.1:#{srv.port}#{path}"

  # A server built in the checkout puts its build's C codec on the shepherd's load path, so
  # in-tree runs (make run, these tests, pp-bench) measure what an installed gem runs, not the
  # pure-Ruby reference; PUMA_PLUS_PURE_RUBY=1 still selects the reference.
  def test_in_tree_workers_use_the_c_codec
    app = File.join(E2E::ROOT, "tests/apps/codec/config.ru")
    { {} => "native", { "PUMA_PLUS_PURE_RUBY" => "1" } => "ruby" }.each do |env, want|
      s = E2E::Server.new(app: app, workers: 1, threads: 1, env: env)
      begin
        got = Net::HTTP.get(URI("http://127.0.0.1:#{s.port}/"))
        assert_equal "#{want}\n", got, "codec with env #{env.inspect}"
      ensure
        s.stop
      end
    end
  end

  def test_get_and_post_with_curl
    out, = E2E.curl(url("/hello"))
    assert_equal "Hello, world\n", out
    body = Random.new(1).bytes(100_000)
    File.binwrite("/tmp/pp-e2e-body-#{Process.pid}", body)
    out, = E2E.curl("--data-binary", "@/tmp/pp-e2e-body-#{Process.pid}",
                    "-H", "Content-Type: application/octet-stream", url("/echo"))
    assert_equal body.bytesize, out.bytesize
    assert_equal body, out.b
  end

  def test_chunked_upload
    body = "x" * 300_000
    path = "/tmp/pp-e2e-chunked-#{Process.pid}"
    File.write(path, body)
    out, err, = E2E.curl("-H", "Transfer-Encoding: chunked", "--data-binary", "@#{path}",
                         "-w", "\n%{http_code}", url("/echo"))
    resp, code = out.rpartition("\n").values_at(0, 2)
    assert_equal "200", code, err
    assert_equal body, resp
  end

  def test_streamed_upload_over_one_mib
    body = Random.new(2).bytes(3 * 1024 * 1024 + 17)
    path = "/tmp/pp-e2e-big-#{Process.pid}"
    File.binwrite(path, body)
    out, err, = E2E.curl("--data-binary", "@#{path}", "-H", "Expect:", url("/echo"))
    assert_equal body.bytesize, out.bytesize, err
    assert_equal body, out.b
    # the same body chunked (runnable once 1 MiB is buffered, then BODY frames)
    out, = E2E.curl("-H", "Transfer-Encoding: chunked", "--data-binary", "@#{path}", url("/echo"))
    assert_equal body, out.b
    # an app that answers without reading its streamed body; every worker thread stays usable
    4.times do
      out, err, = E2E.curl("--data-binary", "@#{path}", "-H", "Expect:", url("/hello"))
      assert_equal "Hello, world\n", out, err
    end
    rs = Array.new(4) { Thread.new { E2E.curl(url("/mix/0/50")).first } }.map(&:value)
    assert_equal ["cpu_ns=0 sleep_ms=50\n"] * 4, rs
  end

  # Fuzz finding 5: bytes after an Upgrade request stalled the parser (PAUSED, nothing consumed)
  # and could spin the event loop. The request is answered as HTTP, the connection closes, the
  # pipelined request is not served, and the server stays responsive.
  def test_upgrade_then_pipelined_request_answered_once_and_closed
    req = "GET /hello HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n" \
          "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n"
    rs = E2E.raw(srv.port, req, count: 2, timeout: 10)
    assert_equal [200], rs.map(&:first)
    assert_equal "close", rs[0][1]["connection"]
    out, = E2E.curl(url("/hello"), timeout: 5)
    assert_equal "Hello, world\n", out
  end

  # An app that answers at once without reading its streamed (> 1 MiB) body: the response must
  # complete, the rest of the body is read and discarded, and the connection stays usable
  # (keep-alive). The client writes the whole body before it reads (a plain blocking client):
  # when the server stopped reading after the response (old behaviour: half-close, then a
  # 2 s discard window and a reset), a body larger than the socket buffers never finished
  # writing and the response was lost. Many rounds, both worker threads, then busy must be 0.
  def test_unread_streamed_upload_completes_and_keeps_alive
    big = "x" * (7 * 1024 * 1024) # under this server's -max-body-size 8MiB
    small = "y" * (1024 * 1024 + 4097)
    Timeout.timeout(60) do
      6.times do |round|
        bodies = round.zero? ? [big] : [small, small]
        s = Socket.new(:INET, :STREAM)
        s.setsockopt(:SOCKET, :SNDBUF, 32 * 1024) # small kernel buffers: no hiding the stall
        s.setsockopt(:SOCKET, :RCVBUF, 32 * 1024)
        s.connect(Socket.sockaddr_in(srv.port, "127.0.0.1"))
        reader = E2E::ResponseReader.new(s)
        bodies.each_with_index do |body, i|
          s.write("POST /hello HTTP/1.1\r\nHost: a\r\nContent-Length: #{body.bytesize}\r\n\r\n")
          s.write(body)
          r = reader.next_response
          refute_nil r, "round #{round} request #{i}: no response"
          assert_equal [200, "Hello, world\n"], [r[0], r[2]], "round #{round} request #{i}"
          refute_equal "close", r[1]["connection"], "round #{round} request #{i}"
        end
        # the same connection still serves a plain request after the discarded body
        s.write("GET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
        r = reader.next_response
        refute_nil r, "round #{round}: keep-alive request after the discarded body"
        assert_equal 200, r[0]
        s.close
      end
    end
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5
    sleep 0.05 until srv.stats["queue"]["slots_busy"].zero? ||
                     Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
    assert_equal 0, srv.stats["queue"]["slots_busy"]
  end

  def test_keep_alive_reuses_one_connection
    out, = E2E.curl("-w", "%{num_connects}\n", "-o", "/dev/null", "-o", "/dev/null",
                    url("/hello"), url("/hello"))
    assert_equal %w[1 0], out.split
  end

  def test_pipelining_answers_in_order
    reqs = "GET /mix/0/150 HTTP/1.1\r\nHost: a\r\n\r\n" \
           "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n" \
           "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nfirst" \
           "GET /nope HTTP/1.1\r\nHost: a\r\n\r\n"
    rs = E2E.raw(srv.port, reqs, count: 4)
    assert_equal [200, 200, 200, 404], rs.map(&:first)
    assert_match(/sleep_ms=150/, rs[0][2])
    assert_equal "Hello, world\n", rs[1][2]
    assert_equal "first", rs[2][2]
  end

  def test_head_has_headers_and_no_body
    s = TCPSocket.new("127.0.0.1", srv.port)
    s.write("HEAD /hello HTTP/1.1\r\nHost: a\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
    r = E2E::ResponseReader.new(s, head_request: true)
    st, h, body = r.next_response
    assert_equal 200, st
    assert_equal "13", h["content-length"]
    assert_equal "", body
    # the next response on the same connection starts right after the HEAD's headers
    r.instance_variable_set(:@head, false)
    st, _, body = r.next_response
    assert_equal [200, "Hello, world\n"], [st, body]
    s.close
  end

  def test_expect_100_continue
    s = TCPSocket.new("127.0.0.1", srv.port)
    s.write("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
    line = Timeout.timeout(10) { s.readpartial(100) }
    assert_equal "HTTP/1.1 100 Continue\r\n\r\n", line
    s.write("ping")
    st, _, body = E2E::ResponseReader.new(s).next_response
    assert_equal [200, "ping"], [st, body]
    s.close
  end

  def test_connection_close_and_http10
    rs = E2E.raw(srv.port, "GET /hello HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n" \
                           "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n", count: 2)
    assert_equal 1, rs.size, "the server must close after Connection: close"
    assert_equal "close", rs[0][1]["connection"]
    rs = E2E.raw(srv.port, "GET /stream/3 HTTP/1.0\r\n\r\n", count: 2)
    assert_equal 1, rs.size
    assert_equal "chunk 0\nchunk 1\nchunk 2\n", rs[0][2]
    assert_nil rs[0][1]["transfer-encoding"]
  end

  def test_streamed_response_is_chunked
    rs = E2E.raw(srv.port, "GET /stream/5 HTTP/1.1\r\nHost: a\r\n\r\n")
    assert_equal "chunked", rs[0][1]["transfer-encoding"]
    assert_equal (0..4).map { |i| "chunk #{i}\n" }.join, rs[0][2]
  end

  def test_unix_and_ipv6_listeners
    srv # started (with its unix and IPv6 listeners) before we dial them
    out, err, = E2E.curl("--unix-socket", UNIX_PATH, "http://localhost/hello")
    assert_equal "Hello, world\n", out, err
    skip "no IPv6 loopback on this machine" unless self.class.v6_port

    out, err, = E2E.curl("http://[::1]:#{self.class.v6_port}/hello")
    assert_equal "Hello, world\n", out, err
  end

  def test_refusals_on_the_wire
    cases = {
      "GET /hello HTTP/1.1\r\nHost: a\r\nX-Big: #{"b" * 40_000}\r\n\r\n" => 431,
      "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 100000000\r\n\r\n" => 413,
      "GET /#{"u" * 10_000} HTTP/1.1\r\nHost: a\r\n\r\n" => 414,
      "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n" => 400,
      "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc" => 400,
      "GET /hello HTTP/1.1\r\nHost: a\r\nX-A: b\r\n folded\r\n\r\n" => 400,
      # chunked not the final coding: RFC 9112 §6.3 MUST 400 (501 before issue 11)
      "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n" => 400,
      "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" => 501,
      "GET /hello HTTP/1.1\r\n\r\n" => 400,
      "BLAH\r\n\r\n" => 400,
    }
    cases.each do |req, want|
      rs = E2E.raw(srv.port, req + "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n", count: 2)
      assert_equal want, rs[0][0], "request #{req[0, 60].inspect}"
      assert_equal 1, rs.size, "connection must close after #{want}"
      assert_equal "close", rs[0][1]["connection"]
    end
  end

  # Issue 11: shapes llhttp 8.1 accepts and the server refuses (docs/SERVER.md "HTTP/1.1
  # refusals"), each followed by a pipelined request that must never be answered: the refusal
  # closes the connection. A new connection is served after each.
  def test_strict_refusals_on_the_wire
    te = "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
    cases = {
      "#{te}5\r\nhelloXY0\r\n\r\n" => 400,             # junk after chunk data (smuggling)
      "#{te}5;=x\r\nhello\r\n0\r\n\r\n" => 400,         # chunk extension without a name
      "#{te}0\r\nX-T: 1\r\n folded\r\n\r\n" => 400,      # obs-fold in the trailers
      "#{te}1;a=#{"x" * 40_000}\r\nx\r\n0\r\n\r\n" => 413, # chunk extensions over the bound
      "GET  /hello HTTP/1.1\r\nHost: a\r\n\r\n" => 400,    # two spaces in the request line
      "GET /hello\xff HTTP/1.1\r\nHost: a\r\n\r\n" => 400, # obs-text in the target
      "GET * HTTP/1.1\r\nHost: a\r\n\r\n" => 400,          # asterisk-form for GET
      "GET /hello HTTP/1.1\r\nHost: a/b\r\n\r\n" => 400,   # invalid Host
      "GET /hello HTTP/1.2\r\nHost: a\r\n\r\n" => 505,
      "POST /echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" => 400,
    }
    cases.each do |req, want|
      rs = E2E.raw(srv.port, req.b + "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n", count: 2)
      assert_equal want, rs[0][0], "request #{req[0, 70].inspect}"
      assert_equal 1, rs.size, "connection must close after #{want} (#{req[0, 70].inspect})"
      assert_equal "close", rs[0][1]["connection"]
      ok = E2E.raw(srv.port, "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
      assert_equal 200, ok[0][0], "the next connection is served"
    end
  end

  # Issue 11: what the app should not send (tests/apps/rack/bad_response.ru; docs/RACK.md
  # "What the server does with a bad response"). Each response is followed by a pipelined
  # GET: it is answered when the bad response could be repaired in place, and not when the
  # connection had to close.
  def test_bad_app_responses
    bad = E2E::Server.new(app: File.join(E2E::ROOT, "tests/apps/rack/bad_response.ru"),
                          workers: 1, threads: 2)
    get = ->(path) { "GET #{path} HTTP/1.1\r\nHost: a\r\n\r\n" }
    fetch = ->(path) { E2E.raw(bad.port, get.(path) + get.("/fine"), count: 2) }

    %w[/status-101 /status-103].each do |path|
      rs = fetch.(path)
      assert_equal 500, rs[0][0], path
      assert_equal "fine\n", rs[1][2], "#{path}: keep-alive after the 500"
    end
    rs = fetch.("/bad-name")
    assert_equal 200, rs[0][0]
    assert_equal "1", rs[0][1]["x-good"]
    assert_nil rs[0][1]["set-cookie"]
    assert_nil rs[0][1]["x bad"]
    assert_equal %w[date transfer-encoding x-good].sort, rs[0][1].keys.sort
    rs = fetch.("/crlf-value") # split into two lines of x-inj by the worker, never a new header
    assert_equal "a, set-cookie: evil=1", rs[0][1]["x-inj"]
    assert_nil rs[0][1]["set-cookie"]
    %w[/cr-value /nul-value /ctl-value].each do |path|
      rs = fetch.(path)
      assert_equal 200, rs[0][0], path
      assert_equal "1", rs[0][1]["x-good"], path
      assert_equal %w[date transfer-encoding x-good].sort, rs[0][1].keys.sort, path
      assert_equal 2, rs.size, path
    end

    # Content-Length that disagrees with the body: cut to it, or short; either way closed.
    rs = fetch.("/cl-long")
    assert_equal ["3", "hel"], [rs[0][1]["content-length"], rs[0][2]]
    assert_equal 1, rs.size, "closed after a body longer than its Content-Length"
    rs = fetch.("/cl-short")
    assert_equal ["10", "hello"], [rs[0][1]["content-length"], rs[0][2]]
    assert_equal 1, rs.size, "closed after a body shorter than its Content-Length"
    %w[/cl-invalid /cl-conflict].each do |path|
      rs = fetch.(path)
      assert_nil rs[0][1]["content-length"], path
      assert_equal "chunked", rs[0][1]["transfer-encoding"], path
      assert_equal "hello", rs[0][2], path
      assert_equal 2, rs.size, path
    end
    rs = fetch.("/cl-same")
    assert_equal ["5", "hello", 2], [rs[0][1]["content-length"], rs[0][2], rs.size]
    rs = fetch.("/cl-204")
    assert_equal 204, rs[0][0]
    assert_nil rs[0][1]["content-length"]
    assert_equal 2, rs.size

    log = bad.log
    assert_match(/status 101 \(not 200\.\.999\): 500 sent instead/, log)
    assert_match(/name that is not a token dropped/, log)
    assert_match(/CR, NUL or a control character dropped/, log)
    assert_match(/longer than its Content-Length: cut/, log)
    assert_match(/bytes short of its Content-Length/, log)
    assert_match(/Content-Length values that disagree dropped/, log)
  ensure
    bad&.stop
  end

  def test_wrk_keep_alive_load_has_no_errors
    out, err, st = Timeout.timeout(30) do
      Open3.capture3("wrk", "-t1", "-c8", "-d1s", url("/hello"))
    end
    assert st.success?, err
    assert_match(/Requests\/sec/, out)
    refute_match(/Non-2xx/, out)
    refute_match(/Socket errors/, out)
  end

  def test_h2load_h1_pipelined_load_succeeds
    out, err, st = Open3.capture3("h2load", "--h1", "-n", "400", "-c", "4", "-m", "4", url("/hello"))
    assert st.success?, err
    assert_match(/400 succeeded, 0 failed, 0 errored, 0 timeout/, out)
  end

  def test_stats_are_puma_compatible_and_metrics_render
    st = srv.stats
    %w[started_at workers phase booted_workers old_workers worker_status].each { |k| assert st.key?(k), k }
    st["worker_status"].each do |w|
      %w[started_at pid index phase booted last_checkin last_status].each { |k| assert w.key?(k), k }
      %w[backlog running pool_capacity max_threads requests_count busy_threads].each do |k|
        assert w["last_status"].key?(k), k
      end
      # the worker's live heap slots, from its monitor connection's HEARTBEAT (GC.stat)
      slots = w["last_status"]["heap_live_slots"]
      assert_kind_of Integer, slots, w.inspect
      assert_operator slots, :>, 10_000, "a booted Rack app has more live objects than that"
    end
    q = st["queue"]
    %w[depth window lifetime predicted_wait_ms service ttfb shed cancelled_queued cancelled_running].each do |k|
      assert q.key?(k), k
    end
    status, body = srv.control_get("/stats?pretty=1")
    assert_equal 200, status
    assert_includes body, "\n  \"queue\": {"
    status, body = srv.control_get("/metrics")
    assert_equal 200, status
    assert_match(/^puma_plus_queue_seconds_bucket\{le="0.001"\} \d+$/, body)
    assert_match(/^puma_plus_queue_seconds_count \d+$/, body)
    assert_match(/^puma_plus_slots_ready 4$/, body)
  end
end

# The mix app wrapped in Rack::Lint (scenarios/apps/mix/lint.ru): every route, every body
# shape. A Lint violation raises inside the app, which the worker turns into a 500 and logs;
# so zero 500s and no LintError in the log means zero violations.
class TestRackLint < Minitest::Test
  def test_every_route_passes_rack_lint
    srv = E2E::Server.new(app: E2E::LINT, workers: 1, threads: 2, token: "s3cret")
    # the control token is required when set (header or query), and nothing else opens it
    assert_equal 401, srv.control_get("/stats", auth: false)[0]
    assert_equal 401, srv.control_get("/metrics?token=wrong", auth: false)[0]
    assert_equal 200, srv.control_get("/metrics?token=s3cret", auth: false)[0]
    assert_equal 200, srv.control_get("/stats")[0]
    base = "http://127.0.0.1:#{srv.port}"
    big = "/tmp/pp-e2e-lint-#{Process.pid}"
    File.binwrite(big, "z" * (2 * 1024 * 1024))
    runs = [
      [%w[-o /dev/null -w %{http_code}], "/hello", "200"],
      [%w[-o /dev/null -w %{http_code} -I], "/hello", "200"],
      [%w[-o /dev/null -w %{http_code}], "/hello?x=1&y=%20", "200"],
      [%w[-o /dev/null -w %{http_code}], "/mix/1/1", "200"],
      [%w[-o /dev/null -w %{http_code}], "/mix/99999999/1", "404"],
      [%w[-o /dev/null -w %{http_code} --data-binary hello], "/echo", "200"],
      [%w[-o /dev/null -w %{http_code} -H Transfer-Encoding:chunked --data-binary hello], "/echo", "200"],
      [["-o", "/dev/null", "-w", "%{http_code}", "--data-binary", "@#{big}"], "/echo", "200"],
      [%w[-o /dev/null -w %{http_code}], "/stream/3", "200"],
      [%w[-o /dev/null -w %{http_code}], "/stream/0", "200"],
      [%w[-o /dev/null -w %{http_code}], "/nowhere", "404"],
      [%w[-o /dev/null -w %{http_code} -H Cookie:a=1 -H Cookie:b=2 -H X-Multi:1 -H X-Multi:2], "/hello", "200"],
    ]
    runs.each do |args, path, want|
      out, err, = E2E.curl(*args, base + path)
      assert_equal want, out, "#{path} #{args.inspect}: #{err}"
    end
    st = srv.stats
    assert_equal 0, st["requests"]["status_5xx"], srv.log
    refute_match(/LintError|Rack::Lint::/, srv.log)
  ensure
    srv&.stop
  end
end
