# frozen_string_literal: true

# Ractor slots end to end (issue 28, docs/RACK.md "Ractor slots"): a shareable app served from
# Ractors, several requests at once, each answered by a named Ractor of one worker process; an
# app that cannot be shared is refused at boot with a message naming the object, and nothing
# is served.
require_relative "helper"

class TestRactors < Minitest::Test
  APP = File.join(E2E::ROOT, "tests/apps/ractor/config.ru")
  BAD = File.join(E2E::ROOT, "tests/apps/ractor/not_shareable.ru")

  def get(port, path) = E2E.raw(port, "GET #{path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", timeout: 30)

  def test_shareable_app_served_from_ractors
    srv = E2E::Server.new(app: APP, workers: 1, threads: 3, env: { "PUMA_PLUS_RACTORS" => "3" })
    # 3 slots, 6 requests that each sleep 300 ms: all answered, and at once by different
    # Ractors (6 × 300 ms one after another would take 1.8 s).
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    rs = Array.new(6) { Thread.new { get(srv.port, "/mix/0/300") } }.map(&:value)
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    assert_equal [200] * 6, rs.map { |r| r.dig(0, 0) }, srv.log
    bodies = rs.map { |r| r.dig(0, 2) }
    pids = bodies.map { |b| b[/pid=(\d+)/, 1] }.uniq
    ractors = bodies.map { |b| b[/ractor=(\S+)/, 1] }.uniq.sort
    assert_equal 1, pids.size, "one worker process: #{bodies.inspect}"
    assert_equal %w[slot-0 slot-1 slot-2], ractors, "every Ractor slot served: #{bodies.inspect}"
    assert_operator took, :<, 1.5, "the 6 requests ran 3 at a time (took #{took.round(2)} s)"
    st = srv.stats
    assert_equal 3, st["queue"]["slots_ready"], "3 connections, one per Ractor"
    assert_equal pids.first.to_i, st["worker_status"].first["pid"]
    # HELLO's RACTOR bit: /stats and /metrics count them, per worker and in total.
    assert_equal 3, st["ractor_slots"], "top-level ractor_slots"
    assert_equal 3, st["worker_status"].first["ractor_slots"]
    metrics = srv.control_get("/metrics")[1]
    assert_match(/^puma_plus_ractor_slots 3$/, metrics)
    assert_match(/^puma_plus_worker_ractor_slots\{index="0",pid="#{pids.first}"\} 3$/, metrics)
    # SIGTERM: the Ractors close their connections and the worker exits 0.
    status = srv.stop(signal: "TERM", timeout: 20)
    refute_nil status, "the server did not exit\n#{srv.log}"
    assert_match(/worker pid \d+ exited with status 0/, srv.log)
  ensure
    srv&.stop
  end

  def control_post(srv, path)
    Timeout.timeout(10) do
      s = TCPSocket.new("127.0.0.1", srv.control_port)
      s.write("POST #{path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
      head, body = s.read.split("\r\n\r\n", 2)
      s.close
      [head[%r{\AHTTP/1\.1 (\d+)}, 1].to_i, body]
    end
  end

  # The run-time actuator: POST /slots (what the controller's set_slots uses) under load sends
  # SLOTS to the worker, which starts Ractors; they dial in and serve.
  def test_ractors_added_at_run_time_under_load
    srv = E2E::Server.new(app: APP, workers: 1, threads: 2, extra: ["-max-slots", "8"],
                          env: { "PUMA_PLUS_RACTORS" => "2" })
    load = Array.new(8) { Thread.new { get(srv.port, "/mix/0/400") } }
    sleep 0.2
    t0 = srv.now
    status, body = control_post(srv, "/slots?worker=0&count=6")
    assert_equal 200, status, body
    until srv.stats["worker_status"].first["slots"] == 6
      flunk("slots stayed at #{srv.stats['worker_status'].first['slots']}\n#{srv.log}") if srv.now - t0 > 10
      sleep 0.005
    end
    took_ms = (srv.now - t0) * 1000
    warn format("POST /slots 2 -> 6 Ractors, until 6 connected: %.1f ms", took_ms)
    assert_equal [200] * 8, load.map { |t| t.value.dig(0, 0) }, srv.log
    rs = Array.new(6) { Thread.new { get(srv.port, "/mix/0/300") } }.map(&:value)
    assert_equal [200] * 6, rs.map { |r| r.dig(0, 0) }
    names = rs.map { |r| r.dig(0, 2)[/ractor=(\S+)/, 1] }.uniq.sort
    assert_equal (0..5).map { |i| "slot-#{i}" }, names, "the 4 new Ractors serve too"
    assert_equal 6, srv.stats["queue"]["slots_ready"]
    assert_equal 6, srv.stats["ractor_slots"], "the Ractors SLOTS started say HELLO as Ractors"
    # Back to 2: SLOT_CLOSE ends 4 Ractors (their Connection returns :closed); the rest serve.
    assert_equal 200, control_post(srv, "/slots?worker=0&count=2")[0]
    deadline = srv.now + 10
    sleep 0.02 until srv.stats["worker_status"].first["slots"] == 2 || srv.now > deadline
    assert_equal 2, srv.stats["worker_status"].first["slots"], srv.log
    assert_equal 2, srv.stats["worker_status"].first["ractor_slots"], "closed Ractors leave the count"
    assert_equal [200] * 4, Array.new(4) { Thread.new { get(srv.port, "/hello") } }.map { |t| t.value.dig(0, 0) }
    refute_match(/died|Error/, srv.log, "no slot Ractor failed")
  ensure
    srv&.stop
  end

  # Thread slots do not set the RACTOR bit: the same app on 2 threads counts none.
  def test_thread_slots_are_not_counted_as_ractors
    srv = E2E::Server.new(app: APP, workers: 1, threads: 2)
    assert_equal 200, get(srv.port, "/hello").dig(0, 0)
    st = srv.stats
    assert_equal 2, st["queue"]["slots_ready"]
    assert_equal 0, st["ractor_slots"]
    assert_equal 0, st["worker_status"].first["ractor_slots"]
    assert_match(/^puma_plus_ractor_slots 0$/, srv.control_get("/metrics")[1])
  ensure
    srv&.stop
  end

  # The controller adds a Ractor under CPU load (rule 4b with Ractor slots, docs/CONTROL.md):
  # one worker of 1 Ractor slot that may not fork, CPU-bound requests queued behind it. Thread
  # slots there add nothing (test_autoscale_slots.rb: near one core is the GVL's bound); a
  # Ractor has its own GVL, so the controller grows Ractors toward the cores, and the new one
  # serves.
  RACTOR_POLICY = <<~YAML
    tick: 500ms
    min_workers: 1
    max_workers: 1
    target_queue_p95: 50ms
    breach_ticks: 1
    calm_ticks: 20
    spawn_cooldown: 1s
    retire_cooldown: 1s
  YAML

  def test_controller_adds_a_ractor_under_cpu_load
    dir = Dir.mktmpdir("pp-e2e-ractor-autoscale")
    File.write(policy = File.join(dir, "policy.yaml"), RACTOR_POLICY)
    log = File.join(dir, "decisions.jsonl")
    srv = E2E::Server.new(app: APP, workers: 1, threads: 1, env: { "PUMA_PLUS_RACTORS" => "1" },
                          extra: ["-autoscale", "-policy", policy, "-decision-log", log])
    assert_equal 1, srv.stats["ractor_slots"]
    # 4 clients, 40 ms of CPU each, for up to 8 s or until a second Ractor is connected
    stop_at = srv.now + 8
    grown = nil
    load = Array.new(4) do
      Thread.new do
        out = []
        while srv.now < stop_at && !grown
          out << (get(srv.port, "/mix/40/0") rescue nil)
        end
        out
      end
    end
    until grown || srv.now > stop_at
      st = srv.stats
      grown = st if st["ractor_slots"] >= 2
      sleep 0.1
    end
    results = load.flat_map(&:value)
    recs = File.readlines(log).map { |l| JSON.parse(l) }.reject { |r| r["type"] == "header" }
    why = recs.map { |r| "tick #{r["tick"]} cpu #{r.dig("obs", "cpu_share_max")}: #{r.dig("decision", "reason")}" }.join("\n")
    refute_nil grown, "no second Ractor within 8 s of a CPU-bound load\n#{why}"
    assert_equal [200], results.compact.map { |r| r.dig(0, 0) }.uniq, why
    grow = recs.find { |r| r.dig("decision", "action") == "set_slots" && r.dig("decision", "count").to_i >= 2 }
    refute_nil grow, why
    assert_match(/Ractor slots: \d+% of \d+ cores/, grow.dig("decision", "reason"))
    assert_operator grow.dig("obs", "ractor_cores").to_i, :>=, 1, "the tick line (v4) names the cores"
    assert_equal 4, grow["v"]
    warn "controller: #{grow.dig("decision", "reason")}"
    assert_equal 1, grown["booted_workers"], "no fork"
    # the new Ractor serves: 2 requests at once land on both slots
    names = Array.new(6) { Thread.new { get(srv.port, "/mix/0/200") } }.map { |t| t.value.dig(0, 2)[/ractor=(\S+)/, 1] }
    assert_includes names, "slot-1", "the added Ractor answered none of #{names.inspect}"
  ensure
    srv&.stop
    FileUtils.rm_rf(dir) if dir
  end

  def test_not_shareable_app_refused_at_boot
    refused(BAD, %r{app \(CountingMiddleware\) → @lock \(Thread::Mutex\) is a Thread::Mutex: Ractor.make_shareable cannot share})
  end

  def test_proc_with_main_self_refused_at_boot
    Dir.mktmpdir do |dir|
      ru = File.join(dir, "lambda.ru")
      File.write(ru, "HANDLER = ->(env) { [200, {}, [\"x\"]] }\nrun HANDLER\n")
      refused(ru, %r{app \(Proc\) is Proc defined at #{Regexp.escape(ru)}:1: its self is .* not shareable})
    end
  end

  def refused(app, message)
    err = assert_raises(Minitest::Assertion) do
      E2E::Server.new(app: app, workers: 1, threads: 2, env: { "PUMA_PLUS_RACTORS" => "2" }, boot_timeout: 15)
    end
    assert_match(/shepherd exited before loading the app \(status 1/, err.message)
    assert_match(message, err.message)
  end
end
