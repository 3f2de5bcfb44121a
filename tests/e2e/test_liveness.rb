# frozen_string_literal: true

# Liveness end to end (issue 14), on the real server and gem workers with short limits:
#   - -request-timeout: a sleeping request gets 504 at about the deadline, the app's thread
#     gets PumaPlus::RequestTimeout and is free again (same worker, same pid); after the head
#     the response is cut instead;
#   - -worker-kill-grace: a request that ignores the interrupt gets its worker killed and
#     replaced after the grace, that worker's other in-flight request gets 502, a request on
#     the other worker is not touched;
#   - -worker-timeout: a SIGSTOPped worker (no heartbeats) is killed and replaced;
#   - shepherd supervision: SIGKILL the shepherd under a client loop: no request fails, a new
#     shepherd adopts the live workers (count unchanged, not doubled), and an adopted worker
#     that dies later is reaped and replaced.
require_relative "helper"

class TestLiveness < Minitest::Test
  APP = File.join(E2E::ROOT, "tests/apps/timeout/config.ru")
  REQUEST_TIMEOUT = 1.0
  KILL_GRACE = 0.8
  WORKER_TIMEOUT = 2.0

  def self.server
    @server ||= E2E::Server.new(app: APP, workers: 2, threads: 2,
                                extra: ["-request-timeout", "#{(REQUEST_TIMEOUT * 1000).to_i}ms",
                                        "-worker-kill-grace", "#{(KILL_GRACE * 1000).to_i}ms",
                                        "-worker-timeout", "#{(WORKER_TIMEOUT * 1000).to_i}ms", "-h2c"])
  end

  Minitest.after_run { @server&.stop }

  def srv = self.class.server

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def get(path, timeout: 20)
    E2E.raw(srv.port, "GET #{path} HTTP/1.1\r\nHost: a\r\n\r\n", timeout: timeout)[0] ||
      flunk("GET #{path}: no response\n#{srv.log[-3000..]}")
  end

  # Starts GET path in a thread; its value is [status, headers, body, seconds].
  def get_async(path)
    Thread.new do
      t0 = now
      r = get(path)
      r + [now - t0]
    end
  end

  def workers(st = srv.stats) = st["worker_status"].to_h { |w| [w["index"], w] }

  # Both workers ready, nothing running: the state every test starts from.
  def settle(timeout: 30)
    deadline = now + timeout
    loop do
      st = srv.stats
      ws = st["worker_status"]
      return st if ws.size == 2 && ws.all? { |w| w["state"] == "ready" && w["last_status"]["running"] == 2 } &&
                   st["queue"]["slots_busy"].zero? && st["liveness"]["shepherd_alive"]
      flunk("not settled within #{timeout}s: #{st['worker_status'].inspect}\n#{srv.log[-3000..]}") if now > deadline
      sleep 0.05
    end
  end

  def wait_until(what, timeout: 20)
    deadline = now + timeout
    until (v = yield)
      flunk("#{what}: not within #{timeout}s\n#{srv.log[-3000..]}") if now > deadline
      sleep 0.05
    end
    v
  end

  def test_request_past_the_timeout_gets_504_and_its_thread_is_freed
    st0 = settle
    pid = get("/pid")[2]
    t0 = now
    status, _, body = get("/sleep/8000")
    waited = now - t0
    assert_equal 504, status
    assert_match(/504 Gateway Timeout/, body)
    assert_in_delta REQUEST_TIMEOUT, waited, 0.35, "504 at about the deadline (measured from dispatch)"
    # The thread let go at once: nothing is busy, and the same worker process serves on.
    wait_until("the interrupted thread is free", timeout: 1) { srv.stats["queue"]["slots_busy"].zero? }
    assert_equal pid, get("/pid")[2], "the same worker (not replaced)"
    interrupts = get("/interrupts")[2]
    assert_match(/PumaPlus::RequestTimeout/, interrupts, "RequestTimeout was raised in the app's thread")
    st = srv.stats
    assert_equal st0["liveness"]["workers_killed_timeout"], st["liveness"]["workers_killed_timeout"]
    assert_operator st["requests"]["request_timeouts"], :>, st0["requests"]["request_timeouts"]
    assert_equal workers(st0).transform_values { |w| w["pid"] }, workers(st).transform_values { |w| w["pid"] }

    # After the head went out the response cannot become a 504: it is cut (no last chunk).
    s = TCPSocket.new("127.0.0.1", srv.port)
    s.write("GET /drip/100 HTTP/1.1\r\nHost: a\r\n\r\n")
    raw = Timeout.timeout(10) { s.read }
    assert_match(%r{\AHTTP/1.1 200 }, raw)
    assert_includes raw, "drop 3"
    refute raw.end_with?("0\r\n\r\n"), "the chunked body has no terminating chunk: the client sees it cut"
    wait_until("the dripping thread is free", timeout: 2) { srv.stats["queue"]["slots_busy"].zero? }
  ensure
    s&.close
  end

  # A fully hijacked request belongs to the app: it has no deadline.
  def test_a_hijacked_request_is_not_timed_out
    st0 = settle
    t0 = now
    status, _, body = get("/hijack/#{((REQUEST_TIMEOUT + 0.5) * 1000).to_i}")
    assert_equal [200, "hijacked"], [status, body]
    assert_operator now - t0, :>=, REQUEST_TIMEOUT + 0.4
    st = settle
    assert_equal st0["requests"]["request_timeouts"], st["requests"]["request_timeouts"]
    assert_equal st0["liveness"]["workers_killed_timeout"], st["liveness"]["workers_killed_timeout"]
  end

  # HTTP/2 (cleartext, prior knowledge): the same 504; after the head, the stream is reset.
  def test_request_timeout_over_http2
    settle
    url = "http://127.0.0.1:#{srv.port}"
    t0 = now
    out, err, st = E2E.curl("--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code} %{http_version}",
                            "#{url}/sleep/8000")
    assert st.success?, err
    assert_equal "504 2", out
    assert_in_delta REQUEST_TIMEOUT, now - t0, 0.35
    out, err, st = E2E.curl("--http2-prior-knowledge", "#{url}/drip/100")
    refute st.success?, "a cut stream is an error for the client (#{out[0, 80].inspect})"
    assert_match(/drop 3/, out)
    assert_match(/stream|INTERNAL_ERROR|closed/i, err)
    wait_until("the threads are free", timeout: 2) { srv.stats["queue"]["slots_busy"].zero? }
  end

  def test_a_thread_that_ignores_the_interrupt_gets_its_worker_killed
    st0 = settle
    before = workers(st0)
    t0 = now
    stubborn = get_async("/stubborn/10000") # worker 0 (all idle: the lowest index)
    wait_until("stubborn running") { srv.stats["queue"]["slots_busy"] == 1 }
    sleep REQUEST_TIMEOUT + 0.1 - (now - t0) # it has timed out; its thread is still held
    other_worker = get_async("/sleep/700") # worker 1 (fewer busy)
    wait_until("second request running") { srv.stats["queue"]["slots_busy"] == 2 }
    in_flight = get_async("/sleep/5000") # worker 0 again (tie: lowest index)
    busy = wait_until("third request running") do
      ws = workers
      ws[0] && ws[0]["last_status"]["busy_threads"] == 2 && ws
    end
    assert_equal 1, busy[1]["last_status"]["busy_threads"]

    s_status, = stubborn.value
    assert_equal 504, s_status
    f_status, _, _, f_took = in_flight.value
    assert_equal 502, f_status, "the killed worker's other in-flight request"
    assert_operator f_took, :<, REQUEST_TIMEOUT, "answered 502 at the kill, not at its own timeout"
    killed_at = now - t0
    assert_in_delta REQUEST_TIMEOUT + KILL_GRACE, killed_at, 0.5, "killed after the grace"
    o_status, _, o_body = other_worker.value
    assert_equal 200, o_status, "the request on the other worker is not affected"
    assert_equal "slept 700", o_body

    st = settle
    after = workers(st)
    refute_equal before[0]["pid"], after[0]["pid"], "worker 0 was replaced"
    assert_equal before[1]["pid"], after[1]["pid"], "worker 1 was not"
    assert_equal st0["liveness"]["workers_killed_timeout"] + 1, st["liveness"]["workers_killed_timeout"]
    assert_operator st["requests"]["bad_gateway"], :>, st0["requests"]["bad_gateway"]
    assert_match(/killing worker 0 \(pid #{before[0]['pid']}\): timed-out request/, srv.log)
    assert_equal 200, get("/pid")[0]
  end

  def test_a_stopped_worker_is_replaced_after_worker_timeout
    st0 = settle
    victim = workers(st0)[1]["pid"]
    Process.kill("STOP", victim)
    t0 = now
    wait_until("the stopped worker is gone", timeout: WORKER_TIMEOUT + 10) do
      srv.stats["worker_status"].none? { |w| w["pid"] == victim }
    end
    took = now - t0
    assert_operator took, :>=, WORKER_TIMEOUT - 0.6, "not before its heartbeat could be missed"
    assert_operator took, :<, WORKER_TIMEOUT + 2, "soon after worker_timeout"
    st = settle
    assert_equal st0["liveness"]["workers_killed_heartbeat"] + 1, st["liveness"]["workers_killed_heartbeat"]
    refute_includes workers(st).values.map { |w| w["pid"] }, victim
    assert_match(/killing worker 1 \(pid #{victim}\): no heartbeat for/, srv.log)
    assert_raises(Errno::ESRCH) { Process.kill(0, victim) }
  ensure
    begin
      Process.kill("CONT", victim) if victim
    rescue Errno::ESRCH
      nil
    end
  end

  def test_a_killed_shepherd_loses_no_request_and_is_replaced
    st0 = settle
    old_shepherd = st0["liveness"]["shepherd_pid"]
    pids = workers(st0).transform_values { |w| w["pid"] }
    results = Queue.new
    stop = false
    clients = Array.new(3) do
      Thread.new do
        until stop
          status, = get("/pid", timeout: 10)
          results << status
        end
      end
    end
    sleep 0.5
    Process.kill("KILL", old_shepherd)
    st = wait_until("a new shepherd", timeout: 20) do
      s = srv.stats
      l = s["liveness"]
      s if l["shepherd_alive"] && l["shepherd_pid"] != old_shepherd && l["shepherd_restarts"] == st0["liveness"]["shepherd_restarts"] + 1
    end
    sleep 1.0 # keep the load on while the new shepherd boots and adopts
    stop = true
    clients.each(&:join)
    statuses = []
    statuses << results.pop until results.empty?
    assert_operator statuses.size, :>, 20, "the client loop ran"
    assert_equal [200], statuses.uniq, "no request lost while the shepherd was down"
    st = settle
    assert_equal pids, workers(st).transform_values { |w| w["pid"] }, "the same workers, adopted"
    assert_equal 2, st["workers"], "not doubled"
    assert_operator st["liveness"]["workers_adopted"], :>=, st0["liveness"]["workers_adopted"] + 2
    assert_match(/shepherd \(pid #{old_shepherd}\) exited unexpectedly/, srv.log)

    # An adopted worker that dies is reaped by the server and replaced by the new shepherd.
    Process.kill("KILL", pids[0])
    st = wait_until("the adopted worker replaced") do
      s = srv.stats
      s if s["worker_status"].none? { |w| w["pid"] == pids[0] } && s["booted_workers"] == 2
    end
    assert_operator st["liveness"]["orphans_reaped"], :>, st0["liveness"]["orphans_reaped"]
    sleep 1.0
    st = settle
    assert_equal 2, st["workers"]
    assert_equal [0, 1], workers(st).keys.sort, "the replacement took the free index"
    assert_equal 200, get("/pid")[0]
  end
end
