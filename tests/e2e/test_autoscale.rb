# frozen_string_literal: true

# Autoscaling end to end (issue 5, server side): the real server with -autoscale starting from
# one worker, an open-loop load step that needs more than one worker, scale-up within a few
# ticks, scale-down after the load stops, and a decision log that is well-formed, never spawns
# while a worker is booting (the settled gate), and replays identically with pp-replay.
require_relative "helper"

class TestAutoscale < Minitest::Test
  POLICY = <<~YAML
    # short ticks and calm period so that the test fits in seconds
    tick: 500ms
    min_workers: 1
    max_workers: 3
    max_step: 2
    target_queue_p95: 50ms
    breach_ticks: 1
    calm_ticks: 4
    spawn_cooldown: 1s
    retire_cooldown: 1s
  YAML

  # Fires `rate` requests per second for `secs` seconds, each on its own connection, without
  # waiting for earlier ones (open loop). Returns the threads (value: status or nil).
  def open_loop(port, rate, secs, path)
    n = (rate * secs).to_i
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    Array.new(n) do |i|
      due = t0 + i.to_f / rate
      delay = due - Process.clock_gettime(Process::CLOCK_MONOTONIC)
      sleep delay if delay.positive?
      Thread.new do
        E2E.raw(port, "GET #{path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", timeout: 40).dig(0, 0)
      rescue StandardError
        nil
      end
    end
  end

  def wait_for(srv, timeout)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    loop do
      st = srv.stats
      return st if yield(st)
      return nil if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.1
    end
  end

  def test_scale_up_under_a_step_and_back_down
    dir = Dir.mktmpdir("pp-e2e-autoscale")
    policy = File.join(dir, "policy.yaml")
    log = File.join(dir, "decisions.jsonl")
    File.write(policy, POLICY)
    srv = E2E::Server.new(workers: 1, threads: 2,
                          extra: ["-autoscale", "-policy", policy, "-decision-log", log])
    assert_equal 1, srv.stats["booted_workers"]
    # 30 req/s of a 100 ms request = 3 busy threads on average; one worker has 2.
    load = Thread.new { open_loop(srv.port, 30, 5, "/mix/0/100") }
    up = wait_for(srv, 5) { |st| st["booted_workers"] >= 2 }
    refute_nil up, "no scale-up within 5 s of the step\n#{srv.log}"
    statuses = load.value.map(&:value)
    assert_equal [200] * statuses.size, statuses, "every request of the step is served"
    down = wait_for(srv, 15) { |st| st["booted_workers"] == 1 && st["old_workers"].zero? }
    refute_nil down, "no scale-down within 15 s after the load stopped\n#{srv.stats["controller"]}"

    lines = File.readlines(log)
    assert_operator lines.size, :>=, 10
    recs = lines.each_with_index.map do |l, i|
      JSON.parse(l)
    rescue JSON::ParserError => e
      flunk "#{log}:#{i + 1}: #{e.message}"
    end
    assert_equal "header", recs.first["type"], "the log starts with the policy header line"
    recs = recs.reject { |r| r["type"] == "header" }
    actions = recs.map { |r| r.dig("decision", "action") }
    assert_includes actions, "spawn_worker"
    assert_includes actions, "retire_worker"
    assert(recs.all? { |r| r["source"] == "server" })
    assert_equal 1, recs.map { |r| r["policy_hash"] }.uniq.size
    recs.each do |r|
      next unless r.dig("obs", "workers_booting").to_i.positive?

      refute_equal "spawn_worker", r.dig("decision", "action"),
                   "tick #{r["tick"]}: spawned while a worker was booting (settled gate): #{r["reason"]}"
    end

    replay = ENV["PP_REPLAY_BIN"]
    if replay && File.executable?(replay)
      out, err, st = Open3.capture3(replay, log)
      assert st.success?, "pp-replay #{log}: exit #{st.exitstatus}\n#{out}\n#{err}"
    else
      puts "\n  (pp-replay not built: replay check not run)"
    end
  ensure
    srv&.stop
    FileUtils.rm_rf(dir) if dir
  end
end
