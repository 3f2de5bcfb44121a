# frozen_string_literal: true

# Worker failure and shutdown end to end: a worker SIGKILLed mid-request (that request 502,
# the worker respawned, everything else served) and SIGTERM under load (every accepted request
# completes, the server exits 0).
require_relative "helper"

class TestWorkers < Minitest::Test
  def get_all(port, n, path)
    Array.new(n) do
      Thread.new { E2E.raw(port, "GET #{path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", timeout: 30) }
    end.map { |t| t.value.dig(0, 0) }
  end

  def test_worker_killed_mid_request
    srv = E2E::Server.new(workers: 2, threads: 2)
    victim_req = Thread.new { E2E.raw(srv.port, "GET /mix/0/3000 HTTP/1.1\r\nHost: a\r\n\r\n", timeout: 30) }
    pid = nil
    Timeout.timeout(10) do
      until pid
        busy = srv.stats["worker_status"].find { |w| w["last_status"]["busy_threads"] == 1 }
        pid = busy && busy["pid"]
        sleep 0.02
      end
    end
    Process.kill("KILL", pid)
    rs = victim_req.value
    assert_equal 502, rs.dig(0, 0), "the request of the killed worker gets 502"
    # while the worker is respawned, the other worker serves everything
    statuses = get_all(srv.port, 20, "/mix/0/20")
    assert_equal [200] * 20, statuses
    st = nil
    Timeout.timeout(20) do
      loop do
        st = srv.stats
        pids = st["worker_status"].map { |w| w["pid"] }
        break if st["booted_workers"] == 2 && !pids.include?(pid)

        sleep 0.05
      end
    end
    assert_equal 1, st["requests"]["worker_restarts"]
    assert_equal 1, st["requests"]["bad_gateway"]
    assert_equal [200] * 8, get_all(srv.port, 8, "/hello")
  ensure
    srv&.stop
  end

  def test_sigterm_during_load_completes_every_accepted_request
    srv = E2E::Server.new(workers: 2, threads: 2)
    socks = Array.new(16) { TCPSocket.new("127.0.0.1", srv.port) }
    socks.each { |s| s.write("GET /mix/0/300 HTTP/1.1\r\nHost: a\r\n\r\n") }
    readers = socks.map do |s|
      Thread.new { Timeout.timeout(30) { E2E::ResponseReader.new(s).next_response } }
    end
    # SIGTERM right after the writes: some connections may still sit in the listen backlog and
    # some requests in kernel buffers; all of them were accepted by TCP and must be served.
    sleep 0.01
    Process.kill("TERM", srv.pid)
    sleep 0.1
    assert_raises(Errno::ECONNREFUSED) { TCPSocket.new("127.0.0.1", srv.port) }
    statuses = readers.map { |t| t.value&.first }
    assert_equal [200] * 16, statuses
    # the response to a drained request says the connection closes
    status = srv.stop(signal: 0, timeout: 20)
    refute_nil status, "the server did not exit after draining"
    assert status.success?, "exit status #{status.inspect}\n#{srv.log}"
  ensure
    socks&.each { |s| s.close rescue nil }
    srv&.stop
  end

  # Ctrl-C in a terminal: SIGINT to the whole foreground process group (server, shepherd,
  # workers). The server drains, the Ruby side ignores SIGINT and waits for STOP.
  def test_ctrl_c_to_the_process_group_drains
    srv = E2E::Server.new(workers: 1, threads: 2)
    inflight = Thread.new { E2E.raw(srv.port, "GET /mix/0/400 HTTP/1.1\r\nHost: a\r\n\r\n", timeout: 20) }
    sleep 0.15
    Process.kill("INT", -srv.pid)
    rs = inflight.value
    assert_equal 200, rs.dig(0, 0), "the in-flight request completes during the drain"
    status = srv.stop(signal: 0, timeout: 20)
    refute_nil status, "the server did not exit after Ctrl-C"
    assert status.success?, "exit status #{status.inspect}\n#{srv.log}"
  ensure
    srv&.stop
  end

  # SIGQUIT stops at once: no drain, even with a long request in flight.
  def test_sigquit_stops_at_once
    srv = E2E::Server.new(workers: 1, threads: 1)
    Thread.new { E2E.raw(srv.port, "GET /mix/0/5000 HTTP/1.1\r\nHost: a\r\n\r\n", timeout: 10) rescue nil }
    sleep 0.2
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    status = srv.stop(signal: "QUIT", timeout: 10)
    refute_nil status
    assert status.success?
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0, :<, 2.0
  ensure
    srv&.stop
  end
end
