# frozen_string_literal: true

# Measurements of request timeouts, heartbeats and shepherd supervision (not a test: nothing
# is asserted, ctest does not run it; tests/e2e/test_liveness.rb is the test). Prints:
#   (a) time to the 504 and until the thread is free, -request-timeout 500ms, 20 runs;
#   (b) time from SIGSTOP to the worker's removal, -worker-timeout 2s, 3 runs;
#   (c) SIGKILL of the shepherd under 4 client loops: requests, failures, time to a new one.
#
#   ruby tests/e2e/measure_liveness.rb build/server/puma-plus-server
require_relative "helper"
Minitest.singleton_class.class_eval { def run(*) = true } # helper loads minitest/autorun: no tests here
APP = File.join(E2E::ROOT, "tests/apps/timeout/config.ru")
def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
def get(srv, path) = E2E.raw(srv.port, "GET #{path} HTTP/1.1\r\nHost: a\r\n\r\n", timeout: 30)[0]
def pct(a, q) = a.sort[((a.size - 1) * q).round]

srv = E2E::Server.new(app: APP, workers: 2, threads: 2,
                      extra: %w[-request-timeout 500ms -worker-kill-grace 500ms -worker-timeout 2s])
begin
  # (a) time to 504 and until the thread is free, 20 runs
  t504 = []; tfree = []
  20.times do
    t0 = now
    st = get(srv, "/sleep/5000")[0]
    raise "got #{st}" unless st == 504
    t504 << now - t0
    sleep 0.001 until srv.stats["queue"]["slots_busy"].zero?
    tfree << now - t0
  end
  printf("(a) -request-timeout 500ms: 504 after p50 %.0f ms, max %.0f ms (min %.0f); thread free after p50 %.0f ms, max %.0f ms\n",
         pct(t504, 0.5) * 1e3, t504.max * 1e3, t504.min * 1e3, pct(tfree, 0.5) * 1e3, tfree.max * 1e3)

  # (b) SIGSTOP detection, 3 runs
  det = []
  3.times do
    sleep 0.05 until srv.stats["booted_workers"] == 2
    victim = srv.stats["worker_status"][1]["pid"]
    Process.kill("STOP", victim)
    t0 = now
    sleep 0.01 while srv.stats["worker_status"].any? { |w| w["pid"] == victim }
    det << now - t0
    sleep 0.05 until srv.stats["booted_workers"] == 2
  end
  puts "(b) -worker-timeout 2s: SIGSTOPped worker removed after #{det.map { |d| format('%.2f s', d) }.join(', ')}"

  # (c) SIGKILL the shepherd under 4 client loops for 3 s
  3.times do |round|
    sleep 0.05 until srv.stats["booted_workers"] == 2 && srv.stats["liveness"]["shepherd_alive"]
    results = Queue.new; stop = false
    cl = Array.new(4) { Thread.new { results << get(srv, "/pid")[0] until stop } }
    sleep 0.5
    sh = srv.stats["liveness"]["shepherd_pid"]
    Process.kill("KILL", sh); t0 = now
    sleep 0.005 until (l = srv.stats["liveness"])["shepherd_alive"] && l["shepherd_pid"] != sh
    back = now - t0
    sleep 2.5
    stop = true; cl.each(&:join)
    a = []; a << results.pop until results.empty?
    printf("(c) round %d: %d requests, %d not 200; new shepherd running after %.0f ms; workers %d\n",
           round + 1, a.size, a.count { |x| x != 200 }, back * 1e3, srv.stats["workers"])
  end
ensure
  srv.stop
end
