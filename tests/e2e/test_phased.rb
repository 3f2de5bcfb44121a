# frozen_string_literal: true

# Phased restart (docs/SERVER.md "Phased restart") against the real server, shepherd and
# workers: under pp-bench's open-loop load a SIGUSR1 that changes the app's version replaces
# every worker one at a time with no failed request and no drop in ready workers; a new
# version that cannot load leaves the old generation serving, with the reason in the log and
# /stats; POST /phased-restart wants the token; and `puma-plus ctl phased-restart` starts one.
require_relative "helper"

class TestPhased < Minitest::Test
  APP = File.join(E2E::ROOT, "tests/apps/phased/config.ru")
  PUMA_PLUS = File.join(E2E::ROOT, "gem/exe/puma-plus")
  PP_BENCH = File.expand_path("../bench/pp-bench", File.dirname(E2E::BIN))

  def setup
    @dir = Dir.mktmpdir("pp-phased")
    @version_file = File.join(@dir, "VERSION")
    File.write(@version_file, "v1\n")
    @servers = []
  end

  def teardown
    @servers.each(&:stop)
    FileUtils.rm_rf(@dir)
  end

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # 2 workers: the brief's load (/mix/2/20 at 200 rps) needs 200 x 22 ms = 4.4 busy threads on
  # average, so 2 threads per worker would be overloaded before any restart; 4 leave headroom
  # on a shared 2-core machine.
  def start(threads: 4, token: nil)
    srv = E2E::Server.new(app: APP, workers: 2, threads: threads, token: token,
                          env: { "PP_PHASED_VERSION_FILE" => @version_file })
    @servers << srv
    srv
  end

  def get(port, path)
    Timeout.timeout(10) do
      s = TCPSocket.new("127.0.0.1", port)
      s.write("GET #{path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
      raw = s.read
      s.close
      head, body = raw.split("\r\n\r\n", 2)
      [head[%r{\AHTTP/1\.1 (\d+)}, 1].to_i, body]
    end
  end

  def post(srv, path, token: nil)
    Timeout.timeout(10) do
      s = TCPSocket.new("127.0.0.1", srv.control_port)
      auth = token ? "Authorization: Bearer #{token}\r\n" : ""
      s.write("POST #{path} HTTP/1.1\r\nHost: x\r\n#{auth}Content-Length: 0\r\nConnection: close\r\n\r\n")
      raw = s.read
      s.close
      head, body = raw.split("\r\n\r\n", 2)
      [head[%r{\AHTTP/1\.1 (\d+)}, 1].to_i, body]
    end
  end

  def wait_for(srv, what, timeout: 30)
    deadline = now + timeout
    loop do
      st = srv.stats
      return st if yield(st)

      srv.fail_with_log("#{what} within #{timeout}s; last /stats phased_restart: #{st['phased_restart'].inspect}") if now > deadline
      sleep 0.05
    end
  end

  def worker_pids(st) = st["worker_status"].map { |w| w["pid"] }.sort

  def test_phased_restart_under_load_switches_versions_without_errors
    flunk "pp-bench not built at #{PP_BENCH} (make build)" unless File.executable?(PP_BENCH)
    srv = start
    before = srv.stats
    assert_equal 0, before["phase"]
    assert_equal 0, before["old_workers"]
    assert_equal "idle", before["phased_restart"]["state"]
    old_pids = worker_pids(before)
    assert_equal 2, old_pids.size

    stop = false
    versions = [] # [t, version] from GET /version every 20 ms
    ready_min = nil
    slots_min = nil
    stats_samples = 0
    sampler = Thread.new do
      until stop
        status, body = get(srv.port, "/version")
        versions << [now, status == 200 ? body.strip : "status #{status}"]
        sleep 0.02
      end
    end
    watcher = Thread.new do
      until stop
        st = srv.stats
        stats_samples += 1
        ready_min = [ready_min, st["booted_workers"]].compact.min
        slots_min = [slots_min, st["queue"]["slots_ready"]].compact.min
        sleep 0.1
      end
    end

    bench_out = +""
    bench = Thread.new do
      out, status = Open3.capture2e(PP_BENCH, "smoke", "-url", "127.0.0.1:#{srv.port}", "-path", "/mix/2/20",
                                    "-rate", "200", "-dur", "20s")
      bench_out << out
      status
    end
    sleep 5
    File.write(@version_file, "v2\n")
    signalled_at = now
    Process.kill("USR1", srv.pid)
    done = wait_for(srv, "the phased restart done", timeout: 40) do |st|
      st["phase"] == 1 && st["phased_restart"]["state"] == "idle"
    end
    restart_s = now - signalled_at
    bench_status = bench.value
    stop = true
    sampler.join
    watcher.join

    assert_equal "ok", done["phased_restart"]["last_result"], done["phased_restart"].inspect
    assert_nil done["phased_restart"]["last_error"]
    counts = bench_out[/requests  offered (\d+)  ok (\d+)  shed\(503\) (\d+)  http_errors (\d+)  conn_errors (\d+)  timeouts (\d+)/]
    refute_nil counts, "pp-bench printed no summary (exit #{bench_status.inspect}):\n#{bench_out}"
    offered, ok, shed, http_errors, conn_errors, timeouts = Regexp.last_match.captures.map(&:to_i)
    assert_operator offered, :>=, 3500, bench_out
    assert_equal [0, 0, 0, 0], [shed, http_errors, conn_errors, timeouts], "non-2xx or errors under load:\n#{bench_out}"
    assert_equal offered, ok, bench_out
    assert bench_status.success?, "pp-bench failed its check:\n#{bench_out}"

    # Old and new workers both answer while the roll runs; before it only v1, after it only v2.
    assert_equal %w[v1 v2], versions.map(&:last).uniq.sort, "the versions the sampler saw"
    before_signal = versions.select { |t, _| t < signalled_at }.map(&:last).uniq
    after_done = versions.select { |t, _| t > signalled_at + restart_s + 0.1 }.map(&:last).uniq
    assert_equal %w[v1], before_signal
    assert_equal %w[v2], after_done
    assert_equal "v2", versions.last.last

    final = srv.stats
    assert_equal 1, final["phase"]
    assert_equal 0, final["old_workers"]
    assert_equal 2, final["booted_workers"]
    assert(final["worker_status"].all? { |w| w["phase"] == 1 }, final["worker_status"].inspect)
    assert_empty worker_pids(final) & old_pids, "every worker pid changed"
    assert_equal 0, final["liveness"]["shepherd_restarts"], "the swap is not an unexpected shepherd restart"
    assert_operator stats_samples, :>=, 50
    assert_operator ready_min, :>=, 2, "ready workers dropped below 2 during the phased restart"
    assert_operator slots_min, :>=, 8, "connected worker threads dropped below 2 x 4"
    log = srv.log
    assert_match(/phased restart: the new code boots/, log)
    assert_match(/phased restart: phase 1 complete in [0-9.]+ s: 2 old worker\(s\) replaced/, log)
    puts "\n  phased restart under 200 rps: #{format('%.2f', restart_s)} s from SIGUSR1 to phase 1 idle; " \
         "pp-bench offered #{offered}, ok #{ok}; ready workers min #{ready_min}, slots_ready min #{slots_min} over #{stats_samples} samples; " \
         "#{versions.size} version samples"
    puts bench_out.lines.grep(/latency/).first
  end

  def test_broken_new_code_keeps_the_old_generation
    srv = start(threads: 2)
    before = srv.stats
    shepherd = before["liveness"]["shepherd_pid"]
    refute_equal 0, shepherd
    File.write(@version_file, "broken-v2\n")
    Process.kill("USR1", srv.pid)
    st = wait_for(srv, "the phased restart aborted") do |s|
      s["phased_restart"]["state"] == "idle" && s["phased_restart"]["last_result"] == "aborted"
    end
    err = st["phased_restart"]["last_error"]
    assert_match(/the new code failed to boot: the probe shepherd \(pid \d+\) exited with status 1 before READY/, err)
    assert_match(/RuntimeError: phased test app: version "broken-v2" is broken on purpose/, err)
    assert_match(/phased restart aborted after [0-9.]+ s: the new code failed to boot.*broken on purpose/, srv.log)
    assert_equal 0, st["phase"]
    assert_equal 0, st["old_workers"]
    assert_equal worker_pids(before), worker_pids(st)
    assert_equal shepherd, st["liveness"]["shepherd_pid"], "the old shepherd keeps its pid"
    assert_equal [200, "v1\n"], get(srv.port, "/version")

    # The old shepherd still forks (with the old code it loaded): a killed worker comes back.
    victim = before["worker_status"].first["pid"]
    Process.kill("KILL", victim)
    back = wait_for(srv, "the killed worker respawned") do |s|
      s["booted_workers"] == 2 && !worker_pids(s).include?(victim)
    end
    assert_equal shepherd, back["liveness"]["shepherd_pid"]
    assert_equal 0, back["phase"]
    6.times { assert_equal [200, "v1\n"], get(srv.port, "/version") }
  end

  # The new code loads (the probe passes) but its workers die before they are ready (a
  # before_worker_boot hook that fails): after three in a row the roll is aborted and the old
  # workers keep serving.
  def test_new_workers_that_die_abort_the_roll
    config = File.join(@dir, "puma-plus.rb")
    File.write(config, <<~RUBY)
      before_worker_boot { exit!(3) if File.read(#{@version_file.inspect}).start_with?("worker-dies") }
    RUBY
    srv = E2E::Server.new(app: APP, workers: 2, threads: 2,
                          env: { "PP_PHASED_VERSION_FILE" => @version_file, "PUMA_PLUS_CONFIG" => config })
    @servers << srv
    old_pids = worker_pids(srv.stats)
    File.write(@version_file, "worker-dies-v2\n")
    Process.kill("USR1", srv.pid)
    st = wait_for(srv, "the roll aborted") do |s|
      s["phased_restart"]["state"] == "idle" && s["phased_restart"]["last_result"] == "aborted"
    end
    assert_match(/3 new worker\(s\) in a row exited before they were ready; 2 old worker\(s\) keep serving/,
                 st["phased_restart"]["last_error"])
    assert_equal 1, st["phase"], "the shepherd was swapped before the roll"
    assert_equal 2, st["old_workers"]
    assert_equal old_pids, worker_pids(st)
    assert_equal 2, st["booted_workers"]
    6.times { assert_equal [200, "v1\n"], get(srv.port, "/version") }
    # The autoscaler-free server is idle again: a fixed version can be rolled out.
    File.write(@version_file, "v3\n")
    Process.kill("USR1", srv.pid)
    done = wait_for(srv, "the second phased restart") do |s|
      s["phase"] == 2 && s["phased_restart"]["state"] == "idle"
    end
    assert_equal "ok", done["phased_restart"]["last_result"], done["phased_restart"].inspect
    assert_equal 0, done["old_workers"]
    assert_equal [200, "v3\n"], get(srv.port, "/version")
  end

  def test_post_phased_restart_and_ctl
    srv = start(threads: 2, token: "ph-t0k")
    status, body = post(srv, "/phased-restart")
    assert_equal 401, status, body
    status, body = post(srv, "/phased-restart?token=wrong")
    assert_equal 401, status, body
    status, body = get(srv.control_port, "/phased-restart?token=ph-t0k")
    assert_equal 405, status, body
    assert_equal 0, srv.stats["phase"], "a refused request starts nothing"

    File.write(@version_file, "v2\n")
    status, body = post(srv, "/phased-restart", token: "ph-t0k")
    assert_equal 202, status, body
    r = JSON.parse(body)
    assert_equal %w[ok phased-restart 0], [r["status"], r["action"], r["phase"].to_s]
    assert_operator r["probe_pid"], :>, 0
    # One at a time: a second request while this one runs is refused, as is a hot restart.
    status, body = post(srv, "/phased-restart", token: "ph-t0k")
    assert_equal 409, status, body
    assert_match(/a phased restart is already in progress/, JSON.parse(body)["error"])
    status, body = post(srv, "/restart", token: "ph-t0k")
    assert_equal 409, status, body
    assert_match(/a phased restart is in progress/, JSON.parse(body)["error"])
    wait_for(srv, "phase 1") { |st| st["phase"] == 1 && st["phased_restart"]["state"] == "idle" }
    assert_equal [200, "v2\n"], get(srv.port, "/version")

    # puma-plus ctl phased-restart: phase 2 with the version now on disk.
    File.write(@version_file, "v3\n")
    out, err, st = Open3.capture3("ruby", PUMA_PLUS, "ctl", "--control-url", "127.0.0.1:#{srv.control_port}",
                                  "-T", "ph-t0k", "phased-restart")
    assert st.success?, err
    assert_match(/\Aphased restart: probe shepherd pid \d+ is loading the new code; the workers of phase 1 /, out)
    final = wait_for(srv, "phase 2") { |s| s["phase"] == 2 && s["phased_restart"]["state"] == "idle" }
    assert_equal "ok", final["phased_restart"]["last_result"]
    assert_equal 2, final["phased_restart"]["completed"]
    assert_equal [200, "v3\n"], get(srv.port, "/version")
    metrics = get(srv.control_port, "/metrics?token=ph-t0k")[1]
    assert_match(/^puma_plus_phase 2$/, metrics)
    assert_match(/^puma_plus_old_workers 0$/, metrics)
    assert_match(/^puma_plus_phased_restarts_total\{result="ok"\} 2$/, metrics)

    # Without the token, ctl says so.
    _, err, st = Open3.capture3("ruby", PUMA_PLUS, "ctl", "--control-url", "127.0.0.1:#{srv.control_port}",
                                "phased-restart")
    assert_equal 1, st.exitstatus
    assert_match(/401 Unauthorized/, err)
  end
end
