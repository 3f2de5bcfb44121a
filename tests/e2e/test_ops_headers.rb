# frozen_string_literal: true

# What operators and their tools expect on the wire and in the env (issue 26), with real
# clients against the real server and gem workers: exactly one valid Date on every response
# of every protocol (HTTP/1.1, HTTP/2 cleartext and over TLS with curl, HTTP/3 with ngtcp2's
# gtlsclient; the app's answers and the server's own 4xx), the app's own Date kept; OPTIONS *
# reaching a Rack::Lint 3.2 app as PATH_INFO "*" over HTTP/1.1, HTTP/2 and HTTP/3 (h3-upload
# -show, which also brings the server's own HTTP/3 answers to the access log); X-Request-Start
# added from the moment the request was queued (and a proxy's kept, or replaced, or left
# alone, per -request-start); control-app scrapes kept out of the app's request figures.
require_relative "helper"
require "time"
require "net/http"

class TestOpsHeaders < Minitest::Test
  APP = File.join(E2E::ROOT, "tests/apps/ops_headers/config.ru")
  GTLSCLIENT = "/usr/bin/gtlsclient"
  IMF_FIXDATE = /\A(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT\z/

  def teardown
    @srv&.stop
  end

  def start(extra = [], tls: false)
    @srv = E2E::Server.new(app: APP, workers: 1, threads: 2, env: E2E.rubygems_env, tls: tls,
                           extra: extra)
  end

  # curl -D - (headers of the last response on stdout); returns [status, {name => [values]}, body].
  # ok: false for a response the server ends by resetting the upload (curl exits non-zero).
  def curl(*args, ok: true)
    out, err, st = E2E.curl("-D", "/dev/stderr", "-o", "/dev/stdout", *args)
    assert st.success?, "curl #{args.join(" ")[0, 300]}: #{err}" if ok
    blocks = err.split(/\r\n\r\n/).reject { |b| b.strip.empty? || !b.start_with?("HTTP/") }
    head = blocks.last.to_s.split("\r\n")
    status = head.shift.to_s[%r{\AHTTP/[\d.]+ (\d{3})}, 1].to_i
    headers = Hash.new { |h, k| h[k] = [] }
    head.each do |l|
      k, v = l.split(":", 2)
      headers[k.downcase] << v.to_s.strip
    end
    [status, headers, out, err]
  end

  # one Date, IMF-fixdate, within a few seconds of this host's clock
  def assert_one_date(headers, what, want: nil)
    dates = headers["date"]
    assert_equal 1, dates.size, "#{what}: want exactly one Date, got #{dates.inspect}"
    assert_match IMF_FIXDATE, dates[0], "#{what}: not an IMF-fixdate"
    if want
      assert_equal want, dates[0], "#{what}: the app's own Date must be kept"
    else
      assert_in_delta Time.now.to_f, Time.httpdate(dates[0]).to_f, 3.0, "#{what}: Date is off"
    end
  end

  def h3_headers(port, path)
    flunk("gtlsclient (Debian package ngtcp2-client) is not installed") unless File.executable?(GTLSCLIENT)
    out, = Open3.capture2e(GTLSCLIENT, "--exit-on-all-streams-close", "--timeout=10s",
                           "127.0.0.1", port.to_s, "https://127.0.0.1:#{port}#{path}")
    block = out[/response headers started(.*?)headers ended/m, 1] ||
            flunk("gtlsclient showed no response headers:\n#{out[-2000..] || out}")
    headers = Hash.new { |h, k| h[k] = [] }
    block.scan(/\[([^:\]\s][^:\]]*|:status): ([^\]]*)\]/) { |k, v| headers[k.downcase] << v }
    [headers[":status"][0].to_i, headers, out]
  end

  def test_date_on_every_protocol_and_response
    h3_port = E2E.free_port
    start(["-h2c", "-listen-h3", "127.0.0.1:#{h3_port}", "-max-body-size", "1024", "-max-header-size", "4096"], tls: true)
    http = "http://127.0.0.1:#{@srv.port}"
    https = "https://127.0.0.1:#{@srv.https_port}"
    # HTTP/1.1: the app's 200 and 404, the app's own Date, the server's own 400 and 413
    s, h, = curl("#{http}/env")
    assert_equal 200, s
    assert_one_date(h, "h1 app 200")
    s, h, = curl("#{http}/nothing-here")
    assert_equal 404, s
    assert_one_date(h, "h1 app 404")
    s, h, = curl("#{http}/own-date")
    assert_equal 200, s
    assert_one_date(h, "h1 app's own Date", want: "Tue, 01 Jan 2030 00:00:00 GMT")
    s, h, = curl("#{http}/env", "-H", "Host:", "--http1.1", "-H", "Bad Header: x")
    assert_equal 400, s
    assert_one_date(h, "h1 server's 400")
    s, h, = curl("#{http}/env", "--data-binary", "x" * 2048, ok: false)
    assert_equal 413, s
    assert_one_date(h, "h1 server's 413")
    # HTTP/2 prior knowledge and over TLS
    [["h2c", ["--http2-prior-knowledge"], http], ["h2 TLS", ["-k", "--http2"], https]].each do |name, flags, base|
      s, h, _, err = curl(*flags, "#{base}/env")
      assert_equal 200, s
      assert_match %r{^HTTP/2 200}, err, "#{name}: not HTTP/2"
      assert_one_date(h, "#{name} app 200")
      s, h, = curl(*flags, "#{base}/own-date")
      assert_one_date(h, "#{name} app's own Date", want: "Tue, 01 Jan 2030 00:00:00 GMT")
      # the HTTP/2 session's own answer (a 413 races curl's upload against the reset that
      # follows it, which curl 7.88 reports as an error, so the session's 431 is checked)
      s, h, = curl(*flags, "#{base}/env", "-H", "X-Big: #{"b" * 5000}")
      assert_equal 431, s, "#{name}: over -max-header-size"
      assert_one_date(h, "#{name} server's 431")
    end
    # HTTP/3
    s, h, out = h3_headers(h3_port, "/env")
    assert_equal 200, s, out[-2000..]
    assert_one_date(h, "h3 app 200")
    s, h, out = h3_headers(h3_port, "/own-date")
    assert_equal 200, s, out[-2000..]
    assert_one_date(h, "h3 app's own Date", want: "Tue, 01 Jan 2030 00:00:00 GMT")
    # the control app's answers too
    s, h, = curl("http://127.0.0.1:#{@srv.control_port}/stats")
    assert_equal 200, s
    assert_one_date(h, "control /stats")
    refute_match(/LintError/, @srv.log)
  end

  def test_options_asterisk_reaches_a_rack_3_2_lint_app
    start(["-h2c"], tls: true)
    [["h1", ["--http1.1"], "http://127.0.0.1:#{@srv.port}"],
     ["h2c", ["--http2-prior-knowledge"], "http://127.0.0.1:#{@srv.port}"],
     ["h2 TLS", ["-k", "--http2"], "https://127.0.0.1:#{@srv.https_port}"]].each do |name, flags, base|
      s, h, body, err = curl("-X", "OPTIONS", "--request-target", "*", *flags, "#{base}/")
      assert_equal [200, "options * *\n"], [s, body], "#{name}: #{err}"
      assert_equal ["GET, HEAD, OPTIONS"], h["allow"]
    end
    # a GET to "*" is no asterisk-form: refused by the server (h1) before the app
    s, = curl("--http1.1", "--request-target", "*", "http://127.0.0.1:#{@srv.port}/")
    assert_equal 400, s
    refute_match(/LintError/, @srv.log, "Rack::Lint 3.2 found a violation")
  end

  # HTTP/3 where gtlsclient cannot go (OPTIONS *, a body over a limit, a header too large):
  # build/server/h3-upload -show sends one request as given and prints the response.
  # Returns [status, {name => [values]}, body, output].
  def h3_show(port, *args)
    bin = File.expand_path("h3-upload", File.dirname(E2E::BIN))
    flunk("h3-upload not built (#{bin})") unless File.executable?(bin)
    out, err, = Open3.capture3(bin, "127.0.0.1", port.to_s, "-show", "-timeout", "10", *args)
    head, body = out.b.split(/^body \d+ bytes\n/, 2)
    headers = Hash.new { |h, k| h[k] = [] }
    status = nil
    head.to_s.each_line do |l|
      if (m = l.match(/\Astatus (\d+)/))
        status = m[1].to_i # the final status is the last one
      else
        k, v = l.chomp.split(": ", 2)
        headers[k] << v
      end
    end
    [status, headers, body, out + err]
  end

  # OPTIONS * over HTTP/3 as over h1 and h2 (PATH_INFO "*", Rack::Lint 3.2), and the server's
  # own answers on HTTP/3 (413, 431 and the spool budget's 413) each with one Date and
  # each in the access log with protocol HTTP/3.
  def test_options_asterisk_and_the_servers_own_answers_over_h3
    h3_port = E2E.free_port
    log = "/tmp/pp-e2e-h3-access-#{Process.pid}.log"
    start(["-listen-h3", "127.0.0.1:#{h3_port}", "-max-body-size", "3MiB", "-max-header-size", "4096",
           "-max-spool-total", "2MiB", "-access-log", log], tls: true)
    s, h, body, out = h3_show(h3_port, "-method", "OPTIONS", "-path", "*")
    assert_equal [200, "options * *\n"], [s, body], out
    assert_equal ["GET, HEAD, OPTIONS"], h["allow"]
    assert_one_date(h, "h3 OPTIONS *")
    answers = [
      [413, "body over -max-body-size", ["-method", "POST", "-path", "/env", "-size", (4 << 20).to_s]],
      [413, "body over -max-spool-total", ["-method", "POST", "-path", "/env", "-size", (2 << 20) + 10]],
      [431, "header over -max-header-size", ["-method", "GET", "-path", "/env", "-header", "x-big: #{"b" * 5000}"]]
    ]
    # (A malformed HTTP/3 request, e.g. a :path without "/", is reset by nghttp3 with
    # H3_MESSAGE_ERROR before the server sees it, as RFC 9114 §4.1.2 says: no response to log.)
    s, = h3_show(h3_port, "-method", "GET", "-path", "no-slash")
    assert_nil s, "a malformed request gets no response"
    answers.each do |want, what, args|
      s, h, _, out = h3_show(h3_port, *args.map(&:to_s))
      assert_equal want, s, "h3 #{what}: #{out[-1500..] || out}"
      assert_one_date(h, "h3 #{what}")
    end
    refute_match(/LintError/, @srv.log, "Rack::Lint 3.2 found a violation")
    lines = []
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5
    until lines.grep(%r{ HTTP/3" }).size >= 1 + answers.size || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      sleep 0.1
      lines = File.exist?(log) ? File.readlines(log) : []
    end
    h3 = lines.grep(%r{ HTTP/3" })
    assert_equal 1 + answers.size, h3.size, "every HTTP/3 answer is in the access log:\n#{lines.join}"
    assert_equal 1, h3.grep(%r{"OPTIONS \* HTTP/3" 200 }).size, h3.join
    assert_equal [200, 413, 413, 431], h3.map { |l| l[%r{ HTTP/3" (\d+) }, 1].to_i }.sort
  ensure
    File.delete(log) if log && File.exist?(log)
  end

  def env_of(*args)
    s, _h, body = curl(*args)
    assert_equal 200, s
    JSON.parse(body)
  end

  def test_x_request_start_added_kept_replaced_or_off
    start(["-h2c"])
    url = "http://127.0.0.1:#{@srv.port}/env"
    [["h1", "--http1.1"], ["h2c", "--http2-prior-knowledge"]].each do |name, flag|
      before = (Time.now.to_f * 1e6).to_i
      env = env_of(flag, url)
      after = (Time.now.to_f * 1e6).to_i
      v = env["HTTP_X_REQUEST_START"]
      assert_match(/\At=\d{16}\z/, v.to_s, "#{name}: the server adds t=<microseconds since the epoch>")
      t = v[2..].to_i
      # queued after the client sent it and before the app answered; 50 ms slack for the
      # once-a-second offset between the monotonic and the realtime clock
      assert_operator t, :>=, before - 50_000, "#{name}: X-Request-Start before the request was sent"
      assert_operator t, :<=, after + 50_000, "#{name}: X-Request-Start after the response came"
      env = env_of(flag, url, "-H", "X-Request-Start: t=1700000000000000")
      assert_equal "t=1700000000000000", env["HTTP_X_REQUEST_START"], "#{name}: a proxy's is kept"
    end
    @srv.stop
    start(["-request-start", "replace"])
    env = env_of(url = "http://127.0.0.1:#{@srv.port}/env", "-H", "X-Request-Start: t=1700000000000000")
    assert_match(/\At=\d{16}\z/, env["HTTP_X_REQUEST_START"])
    refute_equal "t=1700000000000000", env["HTTP_X_REQUEST_START"], "replace: the server's alone"
    @srv.stop
    start(["-request-start", "off"])
    url = "http://127.0.0.1:#{@srv.port}/env"
    assert_nil env_of(url)["HTTP_X_REQUEST_START"], "off: never added"
    assert_equal "t=5", env_of(url, "-H", "X-Request-Start: t=5")["HTTP_X_REQUEST_START"]
    @srv.stop
    out, = Open3.capture2e(E2E::BIN, "-request-start", "sometimes")
    assert_match(/-request-start: invalid value "sometimes"/, out)
  end

  # 103 Early Hints (-early-hints, puma's early_hints): curl -v shows the interim response
  # before the final one on HTTP/1.1 and HTTP/2 (cleartext and TLS), gtlsclient on HTTP/3;
  # never to an HTTP/1.0 client, and off by default.
  def test_early_hints_103_on_h1_h2_h3_only_when_enabled
    h3_port = E2E.free_port
    start(["-early-hints", "-h2c", "-listen-h3", "127.0.0.1:#{h3_port}"], tls: true)
    http = "http://127.0.0.1:#{@srv.port}/hints"
    link = "</style.css>; rel=preload; as=style"
    [["h1", ["--http1.1", http], "HTTP/1.1"], ["h2c", ["--http2-prior-knowledge", http], "HTTP/2"],
     ["h2 TLS", ["-k", "--http2", "https://127.0.0.1:#{@srv.https_port}/hints"], "HTTP/2"]].each do |name, args, ver|
      out, err, st = E2E.curl("-v", *args)
      assert st.success?, "#{name}: #{err}"
      assert_equal "hints sent\n", out, name
      lines = err.lines.map(&:strip)
      i103 = lines.index { |l| l.match?(%r{\A< #{Regexp.escape(ver)} 103\b}) }
      i200 = lines.index { |l| l.match?(%r{\A< #{Regexp.escape(ver)} 200\b}) }
      refute_nil i103, "#{name}: no #{ver} 103 seen by curl:\n#{err}"
      refute_nil i200, "#{name}: no final 200"
      assert_operator i103, :<, i200, "#{name}: the 103 comes first"
      hint_lines = lines[i103...i200]
      assert(hint_lines.any? { |l| l.casecmp?("< link: #{link}") }, "#{name}: the Link hint:\n#{hint_lines.join("\n")}")
    end
    # HTTP/1.0: no 1xx may be sent, and the app is not offered rack.early_hints
    out, err, = E2E.curl("-v", "--http1.0", http)
    assert_equal "hints absent\n", out
    refute_match(/< HTTP\/1\.\d 103/, err)
    # HTTP/3
    flunk("gtlsclient (Debian package ngtcp2-client) is not installed") unless File.executable?(GTLSCLIENT)
    out, = Open3.capture2e(GTLSCLIENT, "--exit-on-all-streams-close", "--timeout=10s",
                           "127.0.0.1", h3_port.to_s, "https://127.0.0.1:#{h3_port}/hints")
    statuses = out.scan(/\[:status: (\d+)\]/).flatten
    assert_equal %w[103 200], statuses, "h3: a 103 then the 200:\n#{out[-3000..] || out}"
    assert_includes out, "[link: #{link}]"
    st = @srv.stats
    assert_operator st["requests"]["status_1xx"], :>=, 4, "the 103s are counted as 1xx"
    refute_match(/LintError/, @srv.log)
    @srv.stop
    # off by default: no rack.early_hints, no 103
    start
    out, err, = E2E.curl("-v", "http://127.0.0.1:#{@srv.port}/hints")
    assert_equal "hints absent\n", out
    refute_match(/ 103/, err.lines.grep(/\A< HTTP/).join)
  end

  def metric(text, name)
    text[/^#{Regexp.escape(name)} (\d+)$/, 1]&.to_i
  end

  def test_scrapes_do_not_move_the_app_request_counters
    start
    curl("http://127.0.0.1:#{@srv.port}/env") # one app request first
    st0 = @srv.stats
    m0 = curl("http://127.0.0.1:#{@srv.control_port}/metrics")[2]
    10.times do
      %w[/stats /metrics /dashboard /ready /nope].each { |p| curl("http://127.0.0.1:#{@srv.control_port}#{p}") }
    end
    st1 = @srv.stats
    m1 = curl("http://127.0.0.1:#{@srv.control_port}/metrics")[2]
    %w[total responses status_2xx status_4xx].each do |k|
      assert_equal st0["requests"][k], st1["requests"][k], "requests.#{k} moved with scrapes alone"
    end
    assert_equal st0["queue"]["total"]["count"], st1["queue"]["total"]["count"],
                 "the request-duration histogram took scrapes"
    assert_operator st1["control"]["requests"] - st0["control"]["requests"], :>=, 51
    assert_operator st1["control"]["responses"] - st0["control"]["responses"], :>=, 51
    %w[puma_plus_requests_total puma_plus_request_duration_seconds_count].each do |name|
      refute_nil metric(m0, name), "#{name} missing from /metrics"
      assert_equal metric(m0, name), metric(m1, name), "#{name} moved with scrapes alone"
    end
    assert_operator metric(m1, "puma_plus_control_requests_total"), :>, metric(m0, "puma_plus_control_requests_total")
    # and an app request still counts, once
    curl("http://127.0.0.1:#{@srv.port}/env")
    st2 = @srv.stats
    assert_equal st1["requests"]["total"] + 1, st2["requests"]["total"]
    assert_equal st1["queue"]["total"]["count"] + 1, st2["queue"]["total"]["count"]
  end
end
