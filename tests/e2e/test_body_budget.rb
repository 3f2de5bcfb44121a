# frozen_string_literal: true

# The aggregate body budget (-max-buffered-body-total, docs/SERVER.md): with the only worker
# thread busy, uploads beyond the budget go to spool files (unlinked, on disk) instead of
# growing the front end's memory, though each is under the 1 MiB spooling threshold; once the
# worker frees up every upload is served intact, and the buffered total returns to zero. Over
# HTTP/1.1 and cleartext HTTP/2. (With -body-stream they would wait unread or stream instead:
# test_exchange's streamed-body test covers that path.)
require_relative "helper"
require "open3"

class TestBodyBudget < Minitest::Test
  BUDGET = 2 << 20
  UPLOAD = 700 << 10 # under the 1 MiB spooling threshold: in memory without a budget
  UPLOADS = 8

  def self.server
    @server ||= E2E::Server.new(workers: 1, threads: 1,
                                extra: ["-max-buffered-body-total", BUDGET.to_s, "-h2c"])
  end

  Minitest.after_run { @server&.stop }

  def srv = self.class.server

  def requests = srv.stats["requests"]

  def body_for(i) = (i.to_s * UPLOAD)[0, UPLOAD]

  # Holds the only worker thread for `ms` milliseconds.
  def occupy(ms)
    Thread.new { E2E.raw(srv.port, "GET /mix/0/#{ms} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", timeout: 30) }
  end

  def upload_h1(i)
    s = TCPSocket.new("127.0.0.1", srv.port)
    s.write("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: #{UPLOAD}\r\nConnection: close\r\n\r\n")
    s.write(body_for(i)) # blocks while the server does not read: that is the point
    r = E2E::ResponseReader.new(s).next_response
    s.close
    r
  end

  # per_upload: what an upload may hold beyond the budget: one read (16 KiB) on HTTP/1.1, its
  # stream window (256 KiB) on HTTP/2, whose bytes arrive whether or not they are consumed.
  def assert_bounded_while_busy(waits_before, per_upload)
    peak = 0
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 1.5
    while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      peak = [peak, requests["body_buffered_bytes"]].max
      sleep 0.05
    end
    assert_operator peak, :<=, BUDGET + UPLOADS * per_upload, "buffered bodies #{peak} over the budget"
    assert_operator peak, :>, 0
    puts "peak buffered #{peak} of #{BUDGET}; #{requests.slice('body_spooled', 'body_spool_bytes')}"
    assert_operator requests["body_spooled"], :>, waits_before,
                    "no upload went to a spool file because of the budget"
  end

  def test_uploads_beyond_the_budget_wait_and_are_all_served_over_http1
    waits0 = requests["body_spooled"]
    busy = occupy(2500)
    sleep 0.3
    threads = Array.new(UPLOADS) { |i| Thread.new { upload_h1(i) } }
    assert_bounded_while_busy(waits0, 16 << 10)
    results = threads.map { |t| t.join(30)&.value }
    busy.join(30)
    results.each_with_index do |r, i|
      refute_nil r, "upload #{i} got no response"
      assert_equal 200, r[0], "upload #{i}"
      assert_equal body_for(i), r[2], "upload #{i} echoed wrongly"
    end
    assert_equal 0, requests["body_buffered_bytes"]
    assert_equal 0, requests["body_spool_bytes"]
  end

  def test_uploads_beyond_the_budget_over_h2c
    h2load = ENV["PATH"].split(":").map { |d| File.join(d, "h2load") }.find { |f| File.executable?(f) }
    flunk "h2load missing (Debian package nghttp2-client)" unless h2load
    waits0 = requests["body_spooled"]
    file = "/tmp/pp-budget-#{Process.pid}.bin"
    File.binwrite(file, "x" * UPLOAD)
    busy = occupy(2500)
    sleep 0.3
    out = nil
    runner = Thread.new do
      out, = Open3.capture2e(h2load, "-n", UPLOADS.to_s, "-c", "1", "-m", UPLOADS.to_s, "-d", file,
                             "http://127.0.0.1:#{srv.port}/echo")
    end
    assert_bounded_while_busy(waits0, 256 << 10)
    runner.join(30)
    busy.join(30)
    assert_match(/#{UPLOADS} succeeded, 0 failed, 0 errored/, out.to_s)
    assert_match(/status codes: #{UPLOADS} 2xx/, out.to_s)
    assert_equal 0, requests["body_buffered_bytes"]
    assert_equal 0, requests["body_spool_bytes"]
  ensure
    File.delete(file) if file && File.exist?(file)
  end
end
