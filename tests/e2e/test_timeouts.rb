# frozen_string_literal: true

# The four client timeouts end to end, with short limits: header read (slowloris gets 408),
# body read (a stalled upload gets 408), keep-alive idle (closed silently), write (a client
# that stops reading a large response is disconnected, and its worker is freed).
require_relative "helper"

class TestTimeouts < Minitest::Test
  def self.server
    @server ||= E2E::Server.new(workers: 1, threads: 2,
                                extra: %w[-header-timeout 400ms -body-timeout 400ms
                                          -keepalive-timeout 400ms -write-timeout 400ms
                                          -max-body-size 64MiB])
  end

  Minitest.after_run { @server&.stop }

  def srv = self.class.server

  def read_all(sock, limit = 5)
    Timeout.timeout(limit) { sock.read }
  rescue Errno::ECONNRESET
    ""
  end

  def test_header_timeout_answers_408
    s = TCPSocket.new("127.0.0.1", srv.port)
    s.write("GET /hello HTTP/1.1\r\nHost: a\r\nX-Slow: ")
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    out = read_all(s)
    waited = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    assert_match(%r{\AHTTP/1.1 408 }, out)
    assert_in_delta 0.4, waited, 0.3
  ensure
    s&.close
  end

  def test_body_timeout_answers_408
    s = TCPSocket.new("127.0.0.1", srv.port)
    s.write("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc")
    out = read_all(s)
    assert_match(%r{\AHTTP/1.1 408 }, out)
  ensure
    s&.close
  end

  def test_keepalive_idle_connection_is_closed
    s = TCPSocket.new("127.0.0.1", srv.port)
    s.write("GET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
    r = E2E::ResponseReader.new(s)
    assert_equal 200, r.next_response[0]
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    assert_nil r.next_response, "the idle connection is closed without a response"
    assert_in_delta 0.4, Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0, 0.3
  ensure
    s&.close
  end

  def test_write_timeout_drops_a_client_that_stops_reading
    before = srv.stats["requests"]["timeouts"]
    size = 24 * 1024 * 1024
    s = TCPSocket.new("127.0.0.1", srv.port)
    s.setsockopt(Socket::SOL_SOCKET, Socket::SO_RCVBUF, 65_536)
    s.write("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: #{size}\r\n\r\n")
    chunk = "w" * 1_048_576
    Timeout.timeout(30) { 24.times { s.write(chunk) } }
    # never read the 24 MiB echo: the server's writes stall, the write timeout closes us
    st = nil
    Timeout.timeout(10) do
      loop do
        st = srv.stats
        break if st["requests"]["timeouts"] > before && st["queue"]["slots_busy"].zero?

        sleep 0.1
      end
    end
    assert_operator st["requests"]["timeouts"], :>, before
    rs = E2E.raw(srv.port, "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n", timeout: 10)
    assert_equal 200, rs[0][0], "the worker thread is free again"
  ensure
    s&.close
  end
end
