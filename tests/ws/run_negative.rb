# frozen_string_literal: true

# ctest e2e_ws_negative: starts the real server with the real gem workers and the
# front-end-owned WebSocket echo app (tests/apps/websocket/config.ru, /echo), runs the cases of
# tests/ws/negative.py against ws://127.0.0.1:PORT/echo (whole, then with --dribble), and fails
# unless every case passed, the server is still up afterwards, its worker was not replaced, and
# it exits 0 on SIGTERM. A second server with -ws-no-deflate -ws-max-message 64KiB runs the
# cases that need those: RSV1 after the client's deflate offer was declined (RFC 7692 §5) and
# the message limit (RFC 6455 §10.4) at 64 KiB. A third with -ws-ping-interval 1s
# -ws-close-timeout 1s runs the "(timer)" cases: a peer that answers no ping is disconnected, one
# that answers stays, one that never answers the server's Close is disconnected. A fourth with
# -h2c runs the 63 frame cases over HTTP/2 (RFC 8441 extended CONNECT tunnels, --h2), whole and
# dribbled: the same close codes and reasons, then END_STREAM / RST_STREAM from the server.
#
#   ruby tests/ws/run_negative.rb PATH/TO/puma-plus-server [CASE-SUBSTRING ...]
require_relative "../e2e/helper"

class TestWsNegative < Minitest::Test
  include E2E::Helpers

  PY = "/usr/bin/python3"
  SCRIPT = File.join(__dir__, "negative.py")
  APP = File.join(E2E::ROOT, "tests/apps/websocket/config.ru")

  def run_suite(srv, *extra, filters: ARGV.select { |a| !a.start_with?("-") && !File.executable?(a) })
    out, st = Timeout.timeout(300) do
      Open3.capture2e(PY, SCRIPT, "ws://127.0.0.1:#{srv.port}/echo", *extra, *filters)
    end
    puts out
    summary = out.lines.map(&:strip).grep(/\A\d+ passed, \d+ failed\z/).last
    refute_nil summary, "negative.py printed no summary line"
    assert st.success?, "negative.py #{extra.join(' ')}: #{summary}\n" + out.lines.grep(/\AFAIL/).join +
                        "\n--- server log ---\n#{srv.log[-3000..]}"
    summary
  end

  # The one worker's pid (the app's GET /pid): the same before and after the suite.
  def worker_pid(srv)
    out, err, st = E2E.curl("-f", "http://127.0.0.1:#{srv.port}/pid")
    assert st.success?, "GET /pid: #{err}"
    Integer(out.strip)
  end

  def test_negative_cases_against_the_server
    with_server(app: APP, workers: 1, threads: 4) do |srv|
      pid_before = worker_pid(srv)
      run_suite(srv)
      run_suite(srv, "--dribble", "--skip-handshake")
      assert_equal pid_before, worker_pid(srv), "the worker was replaced during the suite"
    end
  end

  def test_ping_and_close_timers
    with_server(app: APP, workers: 1, threads: 2,
                extra: ["-ws-ping-interval", "1s", "-ws-close-timeout", "1s"]) do |srv|
      summary = run_suite(srv, "--timers", "1,1", filters: ["(timer)"])
      assert_equal "3 passed, 0 failed", summary
    end
  end

  def test_frame_cases_over_http2_tunnels
    out, st = Open3.capture2e(PY, "-c", "import h2")
    assert st.success?, "python3-h2 not importable by #{PY} (scripts/install-deps.sh): #{out}"
    with_server(app: APP, workers: 1, threads: 2, extra: ["-h2c"]) do |srv|
      pid_before = worker_pid(srv)
      assert_equal "63 passed, 0 failed", run_suite(srv, "--h2")
      assert_equal "63 passed, 0 failed", run_suite(srv, "--h2", "--dribble")
      assert_equal pid_before, worker_pid(srv), "the worker was replaced during the suite"
    end
  end

  def test_declined_deflate_and_a_64k_message_limit
    with_server(app: APP, workers: 1, threads: 2, extra: ["-ws-no-deflate", "-ws-max-message", "64k"]) do |srv|
      url = "ws://127.0.0.1:#{srv.port}/echo"
      summary = run_suite(srv, "--nodeflate-url", url, "--max-message", "65536", filters: ["§10.4", "declined"])
      assert_equal "4 passed, 0 failed", summary
    end
  end
end
