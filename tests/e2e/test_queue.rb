# frozen_string_literal: true

# Queue time end to end: the server's T3 - T2b against a workload whose answer is known.
require_relative "helper"

class TestQueueTime < Minitest::Test
  # Opens `n` connections first, then writes every request as close together as possible, so
  # that all n are runnable within a few milliseconds. Returns the responses in order.
  def burst(port, n, request)
    socks = Array.new(n) { TCPSocket.new("127.0.0.1", port) }
    socks.each { |s| s.write(request) }
    threads = socks.map do |s|
      Thread.new do
        Timeout.timeout(30) { E2E::ResponseReader.new(s).next_response }
      ensure
        s.close
      end
    end
    threads.map(&:value)
  end

  # 40 concurrent requests against 4 threads of a 100 ms app on a cold server: 10 waves. The
  # k-th wave (k = 0..9) waits k service times, so the queue times are 4 x {0, S, ..., 9S} with
  # S the service time per wave. Nearest-rank p50 of 40 samples is the 20th: wave 4, i.e. 4S;
  # max is wave 9, 9S. Tolerances: 15% of the expected value plus 25 ms, which covers the
  # histogram's < 1% bucket width, dispatch/response overhead per wave (a few ms on this
  # 2-core machine, multiplied by the wave index) and the spread of the 40 arrivals (all are
  # written before the first response can come back). TTFB (first byte in to first byte out)
  # must equal queue + service for the median request within 40 ms (the sum of two medians is
  # not exactly the median of the sums; a loaded CI machine adds scheduling delay).
  def test_reconciliation_40_requests_4_threads_100ms
    srv = E2E::Server.new(workers: 1, threads: 4)
    rs = burst(srv.port, 40, "GET /mix/0/100 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    assert_equal [200] * 40, rs.map(&:first)
    q = srv.stats["queue"]
    life = q["lifetime"]
    svc = q["service"]["lifetime"]
    ttfb = q["ttfb"]["lifetime"]
    assert_equal 40, life["count"]
    s = svc["p50_ms"]
    # a 100 ms sleep never takes less; on a loaded 2-core CI machine it may take a little more
    assert_operator s, :>=, 99.0, "service p50 of a 100 ms sleep"
    assert_operator s, :<=, 150.0, "service p50 of a 100 ms sleep"
    want_p50 = 4 * s
    want_max = 9 * s
    msg = "queue #{life.inspect}, service #{svc.inspect}, ttfb #{ttfb.inspect}"
    assert_in_delta want_p50, life["p50_ms"], 0.15 * want_p50 + 25, "queue p50 = 4 waves; #{msg}"
    assert_in_delta want_max, life["max_ms"], 0.15 * want_max + 25, "queue max = 9 waves; #{msg}"
    assert_operator life["p50_ms"], :>, 250, msg
    assert_in_delta life["p50_ms"] + s, ttfb["p50_ms"], 40.0, "TTFB = queue + service; #{msg}"
    assert_equal 0, q["depth"]
  ensure
    srv&.stop
  end

  # A 2 MB body dribbled over ~2 s: the wait for body bytes is body time (before T2b: the whole
  # body is read, spooled past 1 MiB, before the request is runnable), never queue time, and
  # never service time (the app reads a local file).
  def test_slow_body_is_not_queue_time
    srv = E2E::Server.new(workers: 1, threads: 2)
    size = 2_000_000
    s = TCPSocket.new("127.0.0.1", srv.port)
    s.write("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: #{size}\r\nConnection: close\r\n\r\n")
    piece = "b" * 100_000
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    20.times do
      s.write(piece)
      sleep 0.1
    end
    st, _, body = Timeout.timeout(20) { E2E::ResponseReader.new(s).next_response }
    elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    s.close
    assert_equal 200, st
    assert_equal size, body.bytesize
    assert_operator elapsed, :>, 1.9
    q = srv.stats["queue"]
    msg = q.inspect
    assert_equal 1, q["lifetime"]["count"], msg
    assert_operator q["lifetime"]["max_ms"], :<, 5.0, "queue ~ 0: #{msg}"
    # the whole body is read before T2b (~2 s at 1 MB/s): all of it is body wait
    assert_operator q["body_wait"]["max_ms"], :>, 1700.0, msg
    assert_operator q["service"]["lifetime"]["max_ms"], :<, 400.0, "service excludes body read: #{msg}"
  ensure
    srv&.stop
  end

  # A client that leaves while queued is removed from the queue (counted, never dispatched);
  # one that leaves while its request runs makes the server send CANCEL, and the worker thread
  # is usable again afterwards.
  def test_client_gone_while_queued_and_while_running
    srv = E2E::Server.new(workers: 1, threads: 1)
    a = Thread.new { E2E.raw(srv.port, "GET /mix/0/1200 HTTP/1.1\r\nHost: a\r\n\r\n") }
    sleep 0.3
    b = TCPSocket.new("127.0.0.1", srv.port)
    b.write("GET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
    sleep 0.3
    assert_equal 1, srv.stats["queue"]["depth"], "B waits behind A"
    b.close
    sleep 0.2
    st = srv.stats
    assert_equal 0, st["queue"]["depth"]
    assert_equal 1, st["queue"]["cancelled_queued"]
    assert_equal 200, a.value[0][0]
    rs = E2E.raw(srv.port, "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
    assert_equal 200, rs[0][0]
    st = srv.stats
    assert_equal 2, st["worker_status"][0]["last_status"]["requests_count"], "B was never dispatched"

    d = TCPSocket.new("127.0.0.1", srv.port)
    d.write("GET /mix/0/600 HTTP/1.1\r\nHost: a\r\n\r\n")
    sleep 0.2
    d.close
    sleep 0.1
    assert_equal 1, srv.stats["queue"]["cancelled_running"]
    rs = E2E.raw(srv.port, "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n", timeout: 10)
    assert_equal 200, rs[0][0], "the worker thread serves again after the cancelled request"
  ensure
    srv&.stop
  end
end
