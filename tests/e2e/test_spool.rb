# frozen_string_literal: true

# Request bodies are read whole before dispatch (docs/SERVER.md "Request bodies"): a body over
# 1 MiB goes to an unlinked spool file whose descriptor the worker gets with the REQUEST, so a
# slow upload holds no slot while it arrives and the app reads a File.
#
# The issue's check is 100 MiB sent at 1 MiB/s; scaled down here to keep the test short: two
# uploads of 12 MiB at 1 MiB/s each (curl --limit-rate), one over HTTP/1.1 and one over h2c,
# at the same time against a server with ONE slot. While they arrive, /stats shows the slot
# idle, the queue empty and both bodies in the spool, and GET /hello is served at once through
# that slot; afterwards the app has read both bodies byte for byte (SHA-256) from a File, and
# the access log's queue time of the uploads is short (it is T3 - T2b, T2b = body complete).
# Also: the spool budget's 413 and 503 (logged, counted), fiber and Ractor slots taking the
# descriptor, and -body-stream keeping the old streaming path.
require_relative "helper"
require "digest"
require "json"
require "tmpdir"

class TestSpool < Minitest::Test
  MIB = 1 << 20
  SIZE = 12 * MIB
  RATE = "1M"

  APP = <<~RUBY
    require "digest"
    run lambda { |env|
      case env["PATH_INFO"]
      when "/digest"
        t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        input = env["rack.input"]
        d = Digest::SHA256.new
        n = 0
        while (c = input.read(1 << 20))
          d << c
          n += c.bytesize
        end
        ms = ((Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0) * 1000).round(1)
        [200, { "content-type" => "text/plain" },
         ["\#{n} \#{d.hexdigest} \#{input.is_a?(File) && input.class} \#{input.external_encoding} \#{ms}\\n"]]
      when "/echo"
        input = env["rack.input"]
        [200, { "content-type" => "application/octet-stream", "x-input-class" => input.class.to_s }, [input.read]]
      else
        [200, { "content-type" => "text/plain" }, ["hello\\n"]]
      end
    }
  RUBY

  def setup
    @tmp = Dir.mktmpdir("pp-spool-")
    @app = File.join(@tmp, "config.ru")
    File.write(@app, APP)
    @srv = nil
  end

  def teardown
    @srv&.stop
    FileUtils.rm_rf(@tmp)
  end

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def random_file(name, size)
    path = File.join(@tmp, name)
    File.binwrite(path, Random.new(size).bytes(size))
    path
  end

  def curl_upload(path, url, *opts)
    out = File.join(@tmp, "out-#{File.basename(path)}-#{opts.join.hash.abs}")
    pid = Process.spawn("curl", "-sS", "--max-time", "90", *opts, "-o", out, "-w", "%{http_code}",
                        "-H", "content-type: application/octet-stream", "--data-binary", "@#{path}", url,
                        out: File.join(@tmp, "code-#{pid_tag(out)}"), err: File.join(@tmp, "err-#{pid_tag(out)}"))
    [pid, out]
  end

  def pid_tag(out) = File.basename(out)

  def curl_result(out)
    [File.read(File.join(@tmp, "code-#{pid_tag(out)}")), File.exist?(out) ? File.binread(out) : nil]
  end

  # The access log's JSON lines once `count` of them match (the writer flushes every 200 ms).
  def access_lines(log, count)
    deadline = now + 5
    loop do
      lines = File.exist?(log) ? File.readlines(log).map { |l| JSON.parse(l) } : []
      return lines if lines.count { |l| yield l } >= count || now > deadline

      sleep 0.1
    end
  end

  def test_slow_uploads_over_h1_and_h2_hold_no_slot_until_complete
    log = File.join(@tmp, "access.json")
    @srv = E2E::Server.new(app: @app, workers: 1, threads: 1,
                           extra: ["-h2c", "-access-log", log, "-access-log-format", "json"])
    file = random_file("body.bin", SIZE)
    sha = Digest::SHA256.file(file).hexdigest
    url = "http://127.0.0.1:#{@srv.port}/digest"
    t0 = now
    h1, out1 = curl_upload(file, url, "--http1.1", "--limit-rate", RATE)
    h2, out2 = curl_upload(file, url, "--http2-prior-knowledge", "--limit-rate", RATE)

    samples = []
    hello_ms = []
    # Sample while both are certainly still arriving: the first 2/3 of the nominal 12 s.
    while now - t0 < 8.0
      sleep 0.4
      t = now
      code, body, = E2E.curl("-o", "-", "-w", " %{http_code}", "http://127.0.0.1:#{@srv.port}/hello", timeout: 10)
      hello_ms << ((now - t) * 1000).round
      assert_equal "hello\n 200", code + body.to_s, "GET /hello during the uploads"
      st = @srv.stats
      samples << [st["queue"]["slots_busy"], st["queue"]["depth"], st["requests"]["body_spool_bytes"]]
    end
    puts "\n(slots_busy, depth, body_spool_bytes) while arriving: #{samples.uniq.inspect}; /hello ms: #{hello_ms.inspect}"
    assert_operator samples.size, :>=, 8
    samples.each do |busy, depth, spool|
      assert_equal [0, 0], [busy, depth], "the one slot stays free while the uploads arrive"
      assert_equal 2 * SIZE, spool, "both bodies are in the spool (their Content-Length reserved)"
    end
    assert_operator hello_ms.max, :<, 2000, "GET /hello is served through the free slot at once"

    [h1, h2].each { |pid| Process.wait(pid) }
    elapsed = now - t0
    [[out1, "HTTP/1.1"], [out2, "HTTP/2"]].each do |out, proto|
      code, body = curl_result(out)
      assert_equal "200", code, "#{proto} upload: #{body.inspect}"
      n, digest, klass, enc, ms = body.split
      assert_equal [SIZE.to_s, sha, "PumaPlus::SpooledInput", "ASCII-8BIT"], [n, digest, klass, enc],
                   "#{proto}: the app read the body byte for byte from a File"
      assert_operator ms.to_f, :<, 3000, "#{proto}: the app read 12 MiB from its file, not from a slow client"
    end
    assert_operator elapsed, :>, 10, "the uploads took their time (--limit-rate #{RATE})"
    st = @srv.stats["requests"]
    assert_equal 2, st["body_spooled"]
    assert_equal 0, st["body_spool_bytes"], "the spool is empty again"

    posts = access_lines(log, 2) { |l| l["method"] == "POST" }.select { |l| l["method"] == "POST" }
    assert_equal 2, posts.size, posts.inspect
    posts.each do |l|
      assert_equal 200, l["status"]
      assert_operator l["duration_ms"], :>, 10_000, "the request lasted the whole upload"
      assert_operator l["queue_ms"], :<, 1000, "queue time starts when the body is complete: #{l.inspect}"
    end
    assert_equal %w[HTTP/1.1 HTTP/2], posts.map { |l| l["protocol"] }.sort
    assert_empty spool_fds(@srv), "the server keeps no spool file open"
  end

  # Descriptors of the server (and its children: the workers) that are deleted files.
  def spool_fds(srv)
    pid = srv.instance_variable_get(:@pid)
    pids = [pid] + `pgrep -P #{pid}`.split.map(&:to_i)
    pids += pids.flat_map { |p| `pgrep -P #{p}`.split.map(&:to_i) }
    pids.uniq.flat_map do |p|
      Dir.glob("/proc/#{p}/fd/*").filter_map do |fd|
        target = File.readlink(fd)
        "#{p}:#{target}" if target.include?("(deleted)") && target.include?(Dir.tmpdir)
      rescue SystemCallError
        nil
      end
    end
  end

  def test_spool_budget_answers_413_and_503_logged_and_counted
    log = File.join(@tmp, "access.log")
    @srv = E2E::Server.new(app: @app, workers: 1, threads: 2,
                           extra: ["-h2c", "-max-spool-total", "3MiB", "-access-log", log,
                                   "-body-spool-dir", @tmp])
    big = random_file("big.bin", 5 * MIB)
    two = random_file("two.bin", 2 * MIB)
    url = "http://127.0.0.1:#{@srv.port}/digest"
    code, body, = E2E.curl("-o", "-", "-w", " %{http_code}", "--data-binary", "@#{big}", url)
    assert_match(/413 Content Too Large: .*-max-spool-total.* 413\z/m, code + body.to_s)
    # a Content-Length over the budget is refused at the head: no 100 Continue, the 413 at once
    sock = TCPSocket.new("127.0.0.1", @srv.port)
    sock.write("POST /digest HTTP/1.1\r\nHost: a\r\nContent-Length: #{5 * MIB}\r\nExpect: 100-continue\r\n\r\n")
    status, = Timeout.timeout(5) { E2E::ResponseReader.new(sock).next_response }
    assert_equal 413, status, "the first answer to Expect: 100-continue"
    sock.close
    code, = E2E.curl("-o", "/dev/null", "-w", "%{http_code}", "--http2-prior-knowledge",
                     "--data-binary", "@#{big}", url)
    assert_includes %w[413 000], code # curl may report the reset that follows an early answer
    # one 2 MiB upload arriving slowly holds its 2 MiB; another does not fit beside it
    slow, slow_out = curl_upload(two, url, "--limit-rate", "512K")
    sleep 1
    code, body, = E2E.curl("-o", "-", "-w", " %{http_code}", "--data-binary", "@#{two}", url)
    assert_match(/503 Service Unavailable: .* 503\z/m, code + body.to_s)
    Process.wait(slow)
    code, body = curl_result(slow_out)
    assert_equal "200", code
    assert_equal Digest::SHA256.file(two).hexdigest, body.split[1]
    st = @srv.stats["requests"]
    assert_equal 3, st["body_spool_refused_413"]
    assert_equal 1, st["body_spool_refused_503"]
    assert_equal 0, st["body_spool_bytes"]
    assert_match(/body refused with 413: over -max-spool-total/, @srv.log)
    assert_match(/body refused with 503: over -max-spool-total/, @srv.log)
    lines = File.read(log)
    assert_match(%r{"POST /digest HTTP/1\.1" 413 }, lines)
    assert_match(%r{"POST /digest HTTP/2" 413 }, lines)
    assert_match(%r{"POST /digest HTTP/1\.1" 503 }, lines)
    assert_empty Dir.children(@tmp).grep(/puma-plus-body/), "spool files have no name"
  end

  def test_fiber_slots_take_the_spooled_file
    @srv = E2E::Server.new(app: @app, workers: 1, env: E2E.rubygems_env, extra: ["-fibers", "4"])
    assert_spooled_echo(@srv)
  end

  def test_ractor_slots_take_the_spooled_file
    app = File.join(E2E::ROOT, "tests/apps/ractor/config.ru")
    @srv = E2E::Server.new(app: app, workers: 1, threads: 2, env: { "PUMA_PLUS_RACTORS" => "2" })
    assert_spooled_echo(@srv)
  end

  def test_body_stream_keeps_the_streamed_path
    @srv = E2E::Server.new(app: @app, workers: 1, threads: 2, extra: ["-body-stream"])
    assert_spooled_echo(@srv, klass: "PumaPlus::StreamInput", spooled: 0)
  end

  def assert_spooled_echo(srv, klass: "PumaPlus::SpooledInput", spooled: 2)
    file = random_file("echo.bin", 3 * MIB + 5)
    2.times do
      hdr = File.join(@tmp, "headers")
      code, err, = E2E.curl("-o", File.join(@tmp, "back.bin"), "-D", hdr, "-w", "%{http_code}",
                            "-H", "content-type: application/octet-stream", "--data-binary", "@#{file}",
                            "http://127.0.0.1:#{srv.port}/echo")
      assert_equal "200", code, err + srv.log[-2000..].to_s
      assert File.binread(file) == File.binread(File.join(@tmp, "back.bin")), "echoed byte for byte"
      assert_match(/^x-input-class: #{Regexp.escape(klass)}\r$/i, File.read(hdr))
    end
    assert_equal spooled, srv.stats["requests"]["body_spooled"]
    assert_equal 0, srv.stats["requests"]["bad_gateway"]
  end
end
