# frozen_string_literal: true

# Rack::Lint from both columns of the gem matrix (issue 10), under the real server: Debian's
# rack 2.2 and the pinned rack 3.2 (build/gems). tests/apps/rack/lint.ru puts Lint outermost
# and exercises Enumerable, Array, BodyProxy and Streaming (callable) bodies,
# rack.response_finished, multi-value headers, lowercase names, every rack.input read, HEAD,
# 204/304, errors, and full and response hijack (rack.hijack, a rack.hijack response header).
# Zero violations = no LintError in the server's log, and every answer as expected on the wire.
require_relative "helper"
require "digest"

class TestRackLint < Minitest::Test
  APP = File.join(E2E::ROOT, "tests/apps/rack/lint.ru")

  def test_rack_2_2_lint_debian
    check_column(E2E.debian_env, "2.2")
  end

  def test_rack_3_2_lint_rubygems
    check_column(E2E.rubygems_env, "3.2")
  end

  def get(path, method: "GET", body: nil, headers: {})
    req = +"#{method} #{path} HTTP/1.1\r\nHost: lint.test:#{@srv.port}\r\nConnection: close\r\n"
    headers.each { |k, v| req << "#{k}: #{v}\r\n" }
    req << "Content-Length: #{body.bytesize}\r\n" if body
    req << "\r\n"
    req << body if body
    sock = TCPSocket.new("127.0.0.1", @srv.port)
    sock.write(req)
    raw = Timeout.timeout(20) { sock.read }
    sock.close
    head, rest = raw.split("\r\n\r\n", 2)
    lines = head.split("\r\n")
    status = lines.shift[/\AHTTP\/1\.1 (\d{3})/, 1].to_i
    pairs = lines.map { |l| k, v = l.split(":", 2); [k.downcase, v.strip] }
    [status, pairs, rest.to_s, raw]
  end

  def dechunk(body)
    out = +""
    until body.empty?
      size_line, body = body.split("\r\n", 2)
      size = size_line.to_i(16)
      break if size.zero?

      out << body.byteslice(0, size)
      body = body.byteslice(size + 2..) || ""
    end
    out
  end

  def content(pairs, body)
    pairs.assoc("transfer-encoding") ? dechunk(body) : body
  end

  def check_column(env, version)
    @srv = E2E::Server.new(app: APP, workers: 1, threads: 2, env: env)
    status, pairs, body = get("/version")
    assert_equal 200, status
    assert body.start_with?(version), "this column runs rack #{version}, the app loaded #{body.inspect}"
    assert_includes body, "codec=native", "the workers use the C codec this build made"

    assert_equal [200, "array body\n"], get("/array").values_at(0, 2)
    s, p, b = get("/enum")
    assert_equal [200, "a\nb\nc\n"], [s, content(p, b)]
    s, p, b = get("/proxy")
    assert_equal [200, "proxied\n"], [s, content(p, b)]
    s, p, b = get("/call")
    assert_equal [200, "part 0\npart 1\npart 2\nend\n"], [s, content(p, b)]

    payload = "hello\nworld\nthird line\n" + ("z" * 5000)
    want = "#{payload.bytesize} #{Digest::SHA256.hexdigest(payload)}\n"
    s, p, b = get("/input", method: "POST", body: payload)
    assert_equal [200, want], [s, content(p, b)]
    s, p, b = get("/call-reads-input", method: "POST", body: payload)
    assert_equal [200, want], [s, content(p, b)]
    big = Random.new(7).bytes(3 * 1024 * 1024) # over 1 MiB: rack.input is the spooled File
    s, p, b = get("/input", method: "POST", body: big)
    assert_equal [200, "#{big.bytesize} #{Digest::SHA256.hexdigest(big)}\n"], [s, content(p, b)]
    s, p, b = get("/input", method: "POST", body: "")
    assert_equal [200, "0 #{Digest::SHA256.hexdigest('')}\n"], [s, content(p, b)]

    s, p, = get("/multi")
    assert_equal 200, s
    assert_equal %w[a=1 b=2 c=3], p.select { |k, _| k == "set-cookie" }.map(&:last), "one line per cookie"
    assert_equal %w[one two], p.select { |k, _| k == "x-multi" }.map(&:last)

    s, p, b = get("/array", method: "HEAD")
    assert_equal [200, "11", ""], [s, p.assoc("content-length")&.last, b]
    s, _, b = get("/call", method: "HEAD")
    assert_equal [200, ""], [s, b]
    s, p, b = get("/204")
    assert_equal [204, "", nil, nil], [s, b, p.assoc("content-length"), p.assoc("transfer-encoding")]
    s, p, b = get("/304")
    assert_equal [304, "", nil], [s, b, p.assoc("transfer-encoding")]

    assert_equal 5 * 1024 * 1024, get("/large")[2].bytesize

    s, _, b = get("/finished")
    assert_equal [200, "registered\n"], [s, b]
    log = nil
    Timeout.timeout(10) do
      log = get("/finished-log")[2] until log&.include?("finished 200 nil")
    end
    assert_includes log, "closed"
    assert_includes log, "proxy closed"

    s, _, b = get("/error")
    assert_equal [500, "Internal Server Error\n"], [s, b]
    s, p, b = get("/error-in-body")
    # The first part was already sent: the server must not pass it on as a complete answer
    # (a 502 if nothing reached the client yet, else a chunked body without its last chunk).
    assert(s == 502 || (p.assoc("transfer-encoding") && !b.end_with?("0\r\n\r\n")), "#{s} #{p} #{b.inspect}")
    s, p, b = get("/env?a=1")
    assert_equal 200, s
    assert_includes content(p, b), 'QUERY_STRING="a=1"'
    assert_includes content(p, b), "rack.hijack?=true", "HTTP/1.1 without TLS offers full hijack"
    assert_equal [200, "full hijack\n"], get("/hijack-full").values_at(0, 2)
    s, p, b = get("/hijack-partial")
    assert_equal [200, "text/plain", "partial hijack\n"], [s, p.assoc("content-type")&.last, b]
    assert_equal [404, "not found\n"], get("/nowhere").values_at(0, 2)

    assert_equal 0, @srv.stop&.exitstatus, "SIGTERM drains and exits 0 (also after the aborted response)"
    log = @srv.log
    refute_match(/LintError|Rack::Lint::/, log, "Rack #{version} Lint reported a violation")
    assert_match(/app failed on purpose/, log, "the app error is logged")
  ensure
    @srv&.stop
  end
end
