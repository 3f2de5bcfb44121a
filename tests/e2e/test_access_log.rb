# frozen_string_literal: true

# The access log (-access-log, -access-log-format; docs/SERVER.md "Access log") end to end:
# the real server and workers, curl for HTTP/1.1 and HTTP/2 (h2c and TLS), ngtcp2's
# gtlsclient for HTTP/3. Each line is read back from the file and checked field by field,
# queue times included: with one worker thread, the second of two concurrent 300 ms requests
# waits ~300 ms in the queue, and its line says so. Also: responses the server makes itself
# (413, 431, 503) are logged, and SIGHUP after a rename (logrotate) moves the log to a new
# file with no line lost.
require_relative "helper"
require "fileutils"
require "time"
require "tmpdir"

class TestAccessLog < Minitest::Test
  GTLSCLIENT = "/usr/bin/gtlsclient"

  def setup
    flunk("gtlsclient (Debian package ngtcp2-client) is not installed") unless File.executable?(GTLSCLIENT)
    @dir = Dir.mktmpdir("pp-e2e-alog")
    @log = File.join(@dir, "access.log")
  end

  def teardown
    @srv&.stop
    FileUtils.rm_rf(@dir)
  end

  def start(format, extra: [], threads: 1)
    @h3_port = E2E.free_port
    @srv = E2E::Server.new(workers: 1, threads: threads, tls: true,
                           extra: ["-access-log", @log, "-access-log-format", format, "-h2c",
                                   "-listen-h3", "127.0.0.1:#{@h3_port}", *extra])
  end

  def curl(*args)
    out, st = Open3.capture2("curl", "-sk", "-o", "/dev/null", "-w", "%{http_code} %{http_version}", *args)
    assert st.success?, "curl #{args.inspect}: #{out}"
    out
  end

  def h3(path)
    out, = Open3.capture2e(GTLSCLIENT, "--exit-on-all-streams-close", "--timeout=10s", "127.0.0.1",
                           @h3_port.to_s, "https://127.0.0.1:#{@h3_port}#{path}")
    assert_match(/\[:status: 200\]/, out, out[-2000..])
  end

  # The log's lines once `n` are there (the writer flushes every 200 ms).
  def lines(n, path: @log, timeout: 5)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    loop do
      ls = File.exist?(path) ? File.readlines(path) : []
      return ls if ls.size >= n
      if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        flunk("#{path}: #{ls.size} lines, wanted #{n}:\n#{ls.join}\n--- server log ---\n#{@srv.log[-3000..]}")
      end
      sleep 0.05
    end
  end

  # Two 300 ms requests at once on one worker thread: one of them queues ~300 ms.
  def queued_pair(url, *curl_args)
    ths = 2.times.map { Thread.new { curl(*curl_args, url) } }
    ths.each(&:join)
  end

  def test_json_lines_for_h1_h2_h3_with_queue_times
    start("json")
    base = "http://127.0.0.1:#{@srv.port}"
    assert_equal "200 1.1", curl("-A", "agent/1", "#{base}/hello?x=1")
    assert_equal "200 2", curl("--http2-prior-knowledge", "#{base}/hello")
    assert_equal "200 2", curl("--http2", "https://127.0.0.1:#{@srv.https_port}/hello")
    h3("/hello")
    queued_pair("#{base}/mix/0/300")
    queued_pair("#{base}/mix/0/300", "--http2-prior-knowledge")
    recs = lines(8).map { |l| JSON.parse(l) }
    assert_equal 8, recs.size
    first = recs[0]
    assert_equal ["GET", "/hello?x=1", "HTTP/1.1", 200, 13, "127.0.0.1", "agent/1"],
                 first.values_at("method", "path", "protocol", "status", "bytes", "remote", "user_agent")
    assert_match(/\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\z/, first["time"])
    assert_in_delta Time.now.to_f, Time.parse(first["time"]).to_f, 30
    %w[duration_ms queue_ms service_ms].each { |k| assert_kind_of Numeric, first[k], k }
    assert_equal 0, first["worker"]
    ids = recs.map { |r| r["request_id"] }
    assert_equal ids.uniq.size, ids.size, "request ids are distinct"
    assert_equal ["HTTP/1.1", "HTTP/2", "HTTP/2", "HTTP/3"], recs[0, 4].map { |r| r["protocol"] }
    recs[0, 4].each { |r| assert_equal [200, 13], [r["status"], r["bytes"]], r.inspect }
    # the queued pairs: per protocol, one waited about a request's service time
    [recs[4, 2], recs[6, 2]].each_with_index do |pair, i|
      assert_equal [i.zero? ? "HTTP/1.1" : "HTTP/2"] * 2, pair.map { |r| r["protocol"] }
      q = pair.map { |r| r["queue_ms"] }.sort
      assert_operator q[0], :<, 100, pair.inspect
      assert_operator q[1], :>, 200, "the second request waited for the first: #{pair.inspect}"
      pair.each do |r|
        assert_operator r["service_ms"], :>=, 295, r.inspect
        assert_operator r["duration_ms"], :>=, r["queue_ms"] + r["service_ms"] - 1, r.inspect
      end
    end
    st = @srv.stats["access_log"]
    assert_equal 8, st["lines"]
    assert_equal 0, st["dropped"]
  end

  COMBINED = %r{\A(?<remote>\S+) - - \[(?<time>\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4})\] "(?<request>[^"]*)" (?<status>\d{3}|-) (?<bytes>\d+|-) "(?<referer>(?:[^"\\]|\\.)*)" "(?<agent>(?:[^"\\]|\\.)*)" queue=(?<queue>[\d.]+|-) service=(?<service>[\d.]+|-) duration=(?<duration>[\d.]+|-) worker=(?<worker>\d+|-) id=(?<id>\d+|-)\n\z}

  def test_combined_lines_for_h1_h2_h3_and_the_servers_own_answers
    start("combined", extra: ["-max-body-size", "1k", "-max-header-size", "4k"])
    base = "http://127.0.0.1:#{@srv.port}"
    assert_equal "200 1.1", curl("-e", "http://ref/", "-A", "ua \"quoted\"", "#{base}/hello")
    assert_equal "200 2", curl("--http2-prior-knowledge", "#{base}/hello")
    h3("/hello")
    queued_pair("#{base}/mix/0/300")
    # the server's own answers: 413 (body over -max-body-size) and 431 (header section)
    r = E2E.raw(@srv.port, "POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\n\r\n")[0]
    assert_equal 413, r[0]
    r = E2E.raw(@srv.port, "GET /big HTTP/1.1\r\nHost: a\r\nX-Big: #{'b' * 6000}\r\n\r\n")[0]
    assert_equal 431, r[0]
    # and HTTP/2's session answers a Content-Length over the limit itself, before any exchange
    out, = Open3.capture2("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--http2-prior-knowledge",
                          "--data-binary", "x" * 5000, "#{base}/up2")
    # (curl may see the stream's reset, sent as its body is refused, before the 413 head: then
    # it reports 000; the server's answer is what the log line below checks)
    assert_includes %w[413 000], out
    ls = lines(8)
    ms = ls.map { |l| COMBINED.match(l) || flunk("not the combined format: #{l.inspect}") }
    assert_equal ["GET /hello HTTP/1.1", "200", "13", "http://ref/", "ua \\\"quoted\\\"", "0"],
                 ms[0].values_at(:request, :status, :bytes, :referer, :agent, :worker)
    assert_equal "GET /hello HTTP/2", ms[1][:request]
    assert_equal "GET /hello HTTP/3", ms[2][:request]
    qs = ms[3, 2].map { |m| Float(m[:queue]) }.sort
    assert_operator qs[0], :<, 100
    assert_operator qs[1], :>, 200, ls[3, 2].join
    m413, m431 = ms[5], ms[6]
    assert_equal ["POST /up HTTP/1.1", "413", "-", "-"], m413.values_at(:request, :status, :service, :worker)
    assert_equal ["GET /big HTTP/1.1", "431"], m431.values_at(:request, :status)
    assert_operator Integer(m431[:bytes]), :>, 0
    assert_equal ["POST /up2 HTTP/2", "413", "-"], ms[7].values_at(:request, :status, :worker)
  end

  def test_common_format_and_a_shed_503
    policy = File.join(@dir, "policy.yaml")
    File.write(policy, <<~YAML)
      tick: 250ms
      min_workers: 1
      max_workers: 1
      target_queue_p95: 50ms
      shed:
        enabled: true
        budget: 300ms
    YAML
    start("common", extra: ["-autoscale", "-policy", policy])
    results = Queue.new
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    ths = Array.new(30) do |i|
      sleep [t0 + i / 20.0 - Process.clock_gettime(Process::CLOCK_MONOTONIC), 0].max
      Thread.new do
        r = E2E.raw(@srv.port, "GET /mix/0/200 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", timeout: 60)[0]
        results << r[0]
      end
    end
    ths.each(&:join)
    got = Array.new(results.size) { results.pop }.tally
    assert_operator got.fetch(503, 0), :>, 0, got.inspect
    ls = lines(30)
    common = %r{\A127\.0\.0\.1 - - \[[^\]]+\] "GET /mix/0/200 HTTP/1\.1" (\d{3}) (\d+|-)\n\z}
    statuses = ls.map { |l| (common.match(l) || flunk("not the common format: #{l.inspect}"))[1].to_i }
    assert_equal got, statuses.tally, "one line per response, with its status"
  end

  # A log that cannot be written (a FIFO nobody reads: the "disk" stalls for good) never
  # stalls the requests: the writer thread blocks, the buffer fills to its bound, and then
  # lines are dropped and counted. When the reader goes away the writer's write fails
  # (counted) and the server still stops cleanly.
  def test_a_stalled_log_drops_lines_and_never_stalls_requests
    fifo = File.join(@dir, "stalled.fifo")
    File.mkfifo(fifo)
    reader = File.open(fifo, File::RDONLY | File::NONBLOCK) # held open, never read
    @srv = E2E::Server.new(workers: 1, threads: 4,
                           extra: ["-access-log", fifo, "-access-log-format", "json"])
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    out, st = Open3.capture2e("h2load", "--h1", "-n", "45000", "-c", "8",
                              "http://127.0.0.1:#{@srv.port}/hello?#{'p' * 200}")
    secs = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    assert st.success?, out
    assert_match(/45000 succeeded, 0 failed/, out)
    al = @srv.stats["access_log"]
    assert_equal 45_000, al["lines"] + al["dropped"], al.inspect
    assert_operator al["dropped"], :>, 0, "the bound was reached: #{al.inspect}"
    assert_operator al["bytes"], :<=, 256 * 1024, "only what the pipe took was written: #{al.inspect}"
    puts "\n  stalled log: 45000 requests in #{secs.round(1)} s, #{al['lines']} lines buffered or written, " \
         "#{al['dropped']} dropped, #{al['bytes']} bytes written"
    reader.close # the writer's next write fails (EPIPE, counted), and the exit is not held up
    status = @srv.stop
    refute_nil status, "the server did not exit with its log stalled"
  end

  def test_sighup_reopens_after_a_rename
    start("json")
    base = "http://127.0.0.1:#{@srv.port}"
    3.times { curl("#{base}/hello?before") }
    lines(3)
    rotated = "#{@log}.1"
    File.rename(@log, rotated)
    curl("#{base}/hello?between") # written to the renamed file (still open)
    Process.kill("HUP", @srv.pid)
    deadline = Time.now + 5
    sleep 0.05 until @srv.log.include?("reopened the access log") || Time.now > deadline
    assert_includes @srv.log, "SIGHUP: reopened the access log #{@log}"
    2.times { curl("#{base}/hello?after") }
    new_lines = lines(2)
    old_lines = lines(4, path: rotated)
    assert_equal ["/hello?before"] * 3 + ["/hello?between"], old_lines.map { |l| JSON.parse(l)["path"] }
    assert_equal ["/hello?after"] * 2, new_lines.map { |l| JSON.parse(l)["path"] }
    assert_equal 1, @srv.stats["access_log"]["reopens"]
  end
end
