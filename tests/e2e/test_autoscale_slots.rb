# frozen_string_literal: true

# The controller sizes concurrency by itself (issue 24, rule 4b of docs/CONTROL.md): the real
# server with -autoscale, one worker of 2 slots, and no -max-slots. An I/O-bound load (requests
# that sleep 500 ms) makes the worker grow its slots at run time, sized by Little's law and
# without a fork, seen in /stats and in the decision log; after the load the slots go back. A
# CPU-bound load on a worker that may not fork adds no slot (its worker is near one core), and
# its configured slots are cut to one.
require_relative "helper"

class TestAutoscaleSlots < Minitest::Test
  POLICY = <<~YAML
    tick: 500ms
    min_workers: 1
    max_workers: %<max_workers>d
    target_queue_p95: 50ms
    breach_ticks: 1
    calm_ticks: 4
    spawn_cooldown: 1s
    retire_cooldown: 1s
  YAML

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # `conns` client threads, each sending `path` again and again until `secs` have passed.
  # Returns every status seen (nil for a failed request).
  def closed_loop(port, conns, secs, path)
    deadline = now + secs
    Array.new(conns) do
      Thread.new do
        out = []
        while now < deadline
          out << begin
            E2E.raw(port, "GET #{path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", timeout: 30).dig(0, 0)
          rescue StandardError
            nil
          end
        end
        out
      end
    end.flat_map(&:value)
  end

  def wait_for(srv, timeout)
    deadline = now + timeout
    loop do
      st = srv.stats
      return st if yield(st)
      return nil if now > deadline

      sleep 0.1
    end
  end

  def start(dir, max_workers)
    policy = File.join(dir, "policy.yaml")
    log = File.join(dir, "decisions.jsonl")
    File.write(policy, format(POLICY, max_workers: max_workers))
    srv = E2E::Server.new(workers: 1, threads: 2, extra: ["-autoscale", "-policy", policy, "-decision-log", log])
    [srv, log]
  end

  def decisions(log)
    File.readlines(log).map { |l| JSON.parse(l) }.reject { |r| r["type"] == "header" }
  end

  # The log's ticks, one line each, for a failure message.
  def ticks(log)
    decisions(log).map do |r|
      o = r["obs"]
      "tick #{r["tick"]}: slots #{o["slots_busy"]}/#{o["slots_ready"]} queue #{o["queue_len"]} " \
        "cpu #{o["cpu_share_max"]}: #{r.dig("decision", "reason")}"
    end.join("\n")
  end

  def test_io_bound_load_grows_slots_without_a_fork_and_they_come_back
    dir = Dir.mktmpdir("pp-e2e-autoscale-slots")
    srv, log = start(dir, 3)
    assert_equal 2, srv.stats["worker_status"][0]["slots"]
    # 40 clients on a 500 ms sleep need 40 slots; the worker has 2.
    load = Thread.new { closed_loop(srv.port, 40, 6, "/mix/0/500") }
    grown = wait_for(srv, 6) { |st| st["worker_status"].sum { |w| w["slots"].to_i } >= 20 }
    statuses = load.value
    refute_nil grown, "slots did not grow within 6 s of an I/O-bound load\n#{ticks(log)}"
    assert_equal 1, grown["booted_workers"], "an I/O-bound load must not fork a worker first\n#{ticks(log)}"
    assert_operator grown["slots_per_worker"], :>=, 20
    refute_empty statuses
    assert_equal [200], statuses.uniq, "every request of the load is served"

    recs = decisions(log)
    grow = recs.find { |r| r.dig("decision", "action") == "set_slots" && r.dig("decision", "count").to_i > 2 }
    refute_nil grow, "no set_slots decision in the log:\n" + recs.map { |r| r.dig("decision", "reason") }.uniq.join("\n")
    assert_match(/of a core/, grow.dig("decision", "reason"), "the reason names the CPU signal")
    refute_nil grow.dig("obs", "cpu_share_max"), "the observation carries the workers' CPU share"
    forks = recs.select { |r| r.dig("decision", "action") == "spawn_worker" }
    assert_empty forks, "an I/O-bound load forked:\n#{ticks(log)}"

    # calm: the slots the rule added are taken back
    back = wait_for(srv, 15) { |st| st["slots_per_worker"].to_i <= 4 }
    refute_nil back, "slots not taken back within 15 s of calm: #{srv.stats["slots_per_worker"]}"
    replay = ENV["PP_REPLAY_BIN"]
    if replay && File.executable?(replay)
      out, err, st = Open3.capture3(replay, log)
      assert st.success?, "pp-replay #{log}: exit #{st.exitstatus}\n#{out}\n#{err}"
    end
  ensure
    srv&.stop
    FileUtils.rm_rf(dir) if dir
  end

  def test_cpu_bound_load_adds_no_slot
    dir = Dir.mktmpdir("pp-e2e-autoscale-cpu")
    srv, log = start(dir, 1) # may not fork: the only lever left would be slots
    # 4 clients on 40 ms of CPU each: one core of Ruby, queued behind 2 slots
    statuses = closed_loop(srv.port, 4, 5, "/mix/40/0")
    assert_equal [200], statuses.uniq
    recs = decisions(log)
    breach = recs.select { |r| r.dig("decision", "reason").to_s.include?("over") }
    refute_empty breach, "the load never breached the target, so the test shows nothing:\n" +
                         recs.map { |r| r.dig("decision", "reason") }.uniq.join("\n")
    grew = recs.select { |r| r.dig("decision", "action") == "set_slots" && r.dig("decision", "count").to_i > 2 }
    assert_empty grew, "slots added to a CPU-bound worker: " + grew.map { |r| r.dig("decision", "reason") }.join("\n")
    # The configured slots the GVL cannot use are cut (rule 4b's cut), judged and kept: the
    # worker stays near its core with one slot.
    cut = recs.find { |r| r.dig("decision", "action") == "set_slots" && r.dig("decision", "count").to_i == 1 }
    refute_nil cut, "the CPU-bound worker's 2 slots were not cut:\n#{ticks(log)}"
    assert_match(/^set_slots 2->1: .* at the max_workers bound of 1 worker; workers at \d+% of a core .*slots wait for the GVL/,
                 cut.dig("decision", "reason"))
    reverted = recs.select { |r| r.dig("decision", "reason").to_s.include?("after the cut") }
    assert_empty reverted, "a cut on a CPU-bound worker was reverted:\n#{ticks(log)}"
    assert_equal 1, srv.stats["worker_status"][0]["slots"]
  ensure
    srv&.stop
    FileUtils.rm_rf(dir) if dir
  end
end
