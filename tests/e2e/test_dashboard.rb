# frozen_string_literal: true

# The live dashboard in a real browser (docs/SERVER.md, "/dashboard"): the real server with
# -autoscale and a control token, under load (wrk against the data listener) that makes the
# controller spawn a worker and the admission rule shed, plus two header timeouts; headless
# Chromium (Debian's chromium) opens /dashboard?token=... and tests/browser/dashboard_probe.py
# reads the page's DOM over the DevTools protocol, each reading paired with /stats fetched
# right after on the same tick (stream.ticks equal to the tick the page shows).
#
# Tolerances, per reading:
# - window figures (queue p50/p95/p99, arrivals/s, completions/s), shedding, the latest reason
#   and the decisions table change only at a tick: equal to /stats up to the page's rounding
#   (half a unit of the last digit shown);
# - shed and timeout totals grow between ticks, and the page shows them as of its tick's
#   start: the latest /stats polled during an earlier tick (40 ms polls: normally the tick
#   before) <= the page <= /stats of the reading;
# - workers: wanted equal; ready + booting equal (a booting worker becoming ready moves one
#   to the other between ticks) and ready within 1.
# The decisions table must hold a spawn_worker whose reason is the decision log's line for
# that tick. History: the page, opened after several seconds of load, draws at once the ticks
# from before it was opened (the stream's `history` event), each equal to what /stats said on
# that tick (polled while the load ran), and /stats/history holds the same ticks. The screenshot is kept at build/artifacts/dashboard.png (next to the server's
# build directory: File.dirname(server binary)/../artifacts).
require_relative "helper"

class TestDashboard < Minitest::Test
  PYTHON = "/usr/bin/python3"
  CHROMIUM = "/usr/bin/chromium"
  PROBE = File.join(E2E::ROOT, "tests/browser/dashboard_probe.py")
  ARTIFACT = File.expand_path("../artifacts/dashboard.png", File.dirname(E2E::BIN))
  TOKEN = "dash-7f3a"

  POLICY = <<~YAML
    # slots per worker stay fixed: this I/O-bound load would rightly grow slots (rule 4b,
    # e2e_autoscale_slots) where this test exercises the process actuator
    slots:
      enabled: false
    tick: 500ms
    min_workers: 1
    max_workers: 2
    max_step: 1
    target_queue_p95: 50ms
    breach_ticks: 1
    calm_ticks: 100
    spawn_cooldown: 1s
    retire_cooldown: 1s
    shed:
      enabled: true
      budget: 300ms
  YAML

  def require_tools
    unless File.executable?(CHROMIUM)
      flunk "#{CHROMIUM} is missing: the dashboard test needs Debian's chromium (scripts/install-deps.sh)"
    end
    out, st = Open3.capture2e(PYTHON, "-c", "import websockets")
    flunk "#{PYTHON} cannot import websockets (Debian's python3-websockets): #{out}" unless st.success?
    found = ENV.fetch("PATH", "").split(":").any? { |d| File.executable?(File.join(d, "wrk")) }
    flunk "wrk is missing (Debian's wrk, scripts/install-deps.sh)" unless found
  end

  # Text the page shows for a number, against the value /stats has: equal up to rounding.
  def assert_shown(shown, value, what)
    if value.nil?
      assert_equal "none", shown, what
      return
    end
    assert_match(/\A-?\d+(\.\d+)?\z/, shown, "#{what}: not a number")
    decimals = shown[/\.(\d+)\z/, 1].to_s.size
    assert_in_delta value, shown.to_f, 0.5 * 10**-decimals + 1e-9, "#{what}: page #{shown}, /stats #{value}"
  end

  def assert_counter(shown, before, after, what)
    assert_match(/\A\d+\z/, shown, what)
    assert_operator shown.to_i, :<=, after, "#{what}: page #{shown} ahead of /stats #{after}"
    assert_operator shown.to_i, :>=, before, "#{what}: page #{shown} behind an earlier tick's /stats (#{before})"
  end

  def test_dashboard_shows_what_stats_says_under_load
    require_tools
    dir = Dir.mktmpdir("pp-e2e-dash")
    policy = File.join(dir, "policy.yaml")
    log = File.join(dir, "decisions.jsonl")
    File.write(policy, POLICY)
    srv = E2E::Server.new(workers: 1, threads: 2, token: TOKEN,
                          extra: ["-autoscale", "-policy", policy, "-decision-log", log,
                                  "-header-timeout", "1s", "-quiet"])
    # two clients that never finish their headers: two timeouts within a second
    stalled = Array.new(2) do
      s = TCPSocket.new("127.0.0.1", srv.port)
      s.write("GET /mix/0/0 HTTP/1.1\r\nHost: a\r\n")
      s
    end
    # 16 connections of 100 ms requests on 2 threads: the queue grows past the target (spawn)
    # and the predicted wait past the budget (shed), which 4 threads still cannot hold to
    wrk = Process.spawn("wrk", "-t1", "-c16", "-d14s", "http://127.0.0.1:#{srv.port}/mix/0/100",
                        out: File.join(dir, "wrk.log"), err: [:child, :out], pgroup: true)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 8
    seen = {} # /stats by tick while the load runs, before the page is opened
    loop do
      st = srv.stats
      seen[st["stream"]["ticks"]] = st
      break if st["controller"]["decisions"].any? { |d| d["action"] == "spawn_worker" } && seen.size >= 8

      flunk "no spawn_worker decision within 8 s of the load\n#{st["controller"]}" if
        Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      sleep 0.1
    end
    opened_at = srv.stats["stream"]["ticks"]
    FileUtils.rm_f(ARTIFACT)
    base = "http://127.0.0.1:#{srv.control_port}"
    out, err, st = Open3.capture3(PYTHON, PROBE, "--url", "#{base}/dashboard?token=#{TOKEN}",
                                  "--stats-url", "#{base}/stats?token=#{TOKEN}", "--samples", "4",
                                  "--interval", "0.9", "--screenshot", ARTIFACT)
    assert st.success?, "dashboard_probe failed (exit #{st.exitstatus}):\n#{err}\n#{out[0, 2000]}"
    lines = out.lines.map { |l| JSON.parse(l) }
    first = lines.shift["first"]
    shot = lines.pop
    readings = lines
    assert_equal 4, readings.size

    matched = readings.select { |r| r["dom"]["tick"] == r["stats"]["stream"]["ticks"].to_s }
    assert_operator matched.size, :>=, 3, "readings on the same tick as /stats: " +
                                          readings.map { |r| [r["dom"]["tick"], r["stats"]["stream"]["ticks"]] }.inspect
    matched.each do |r|
      dom = r["dom"]
      st = r["stats"]
      q = st["queue"]
      co = st["controller"]
      at = "tick #{dom["tick"]}"
      assert_equal "live", dom["status"]
      assert_equal dom["tick"], dom["body_tick"]
      assert_shown dom["window"], q["window_seconds"], "#{at} window"
      assert_shown dom["q-p50"], q["window"]["p50_ms"], "#{at} queue p50"
      assert_shown dom["q-p95"], q["window"]["p95_ms"], "#{at} queue p95"
      assert_shown dom["q-p99"], q["window"]["p99_ms"], "#{at} queue p99"
      assert_shown dom["rate-in"], q["arrival_rate"], "#{at} arrivals/s"
      assert_shown dom["rate-out"], q["completion_rate"], "#{at} completions/s"
      assert_operator q["arrival_rate"], :>, 5, "#{at}: under load"
      prev = r["prev"]
      refute_nil prev, "#{at}: /stats was not polled during an earlier tick"
      assert_operator prev["stream"]["ticks"], :<, st["stream"]["ticks"]
      assert_counter dom["shed"], prev["queue"]["shed"], q["shed"], "#{at} shed"
      assert_counter dom["timeouts"], prev["requests"]["timeouts"], st["requests"]["timeouts"],
                     "#{at} timeouts"
      assert_equal co["workers_wanted"].to_s, dom["w-wanted"], "#{at} workers wanted"
      assert_equal co["workers_ready"] + co["workers_booting"], dom["w-ready"].to_i + dom["w-booting"].to_i,
                   "#{at} workers ready + booting"
      assert_in_delta co["workers_ready"], dom["w-ready"].to_i, 1, "#{at} workers ready"
      assert_equal st["old_workers"].to_s, dom["w-old"], "#{at} workers old (earlier phase)"
      assert_equal co["workers_retiring"].to_s, dom["w-retiring"], "#{at} workers retiring"
      assert_equal co["shedding"] ? "on" : "off", dom["shedding"], "#{at} shedding"
      assert_equal "tick #{co["tick"] - 1}: #{co["last_reason"]}", dom["last-reason"], "#{at} latest reason"
      rows = co["decisions"].map do |d|
        [d["tick"].to_s, d["at"][11, 8], d["action"] + (d["count"] > 1 ? " ×#{d["count"]}" : "") +
                                         (d["shed"] ? " (shed on)" : ""), d["reason"]]
      end
      assert_equal rows, dom["decisions"], "#{at} decisions table"
    end
    last = readings.last["dom"]
    assert_operator last["timeouts"].to_i, :>=, 2, "the two header timeouts are shown"

    # history: drawn on load, from before the page was opened, as /stats said on each tick
    before = first["history"].select { |id, _, _| id < opened_at }
    assert_operator before.size, :>=, 6, "points from before the page was opened (tick #{opened_at}): #{first.inspect}"
    assert_operator first["history_from"].to_i, :<=, opened_at - 6
    assert_equal first["history"].size, first["p95_points"], "every history point is drawn on the p95 line"
    ids = first["history"].map(&:first)
    assert_equal (ids.first..ids.last).to_a, ids, "consecutive ticks, oldest first"
    compared = 0
    first["history"].each do |id, p95, rin|
      st = seen[id] or next
      assert_in_delta st["queue"]["window"]["p95_ms"], p95, 1e-9, "history tick #{id}: queue p95"
      assert_in_delta st["queue"]["arrival_rate"], rin, 1e-9, "history tick #{id}: arrivals/s"
      compared += 1
    end
    assert_operator compared, :>=, 4, "history ticks compared with /stats of that tick"
    code, body = srv.control_get("/stats/history")
    assert_equal 200, code
    served = JSON.parse(body)["points"].to_h { |pt| [pt["id"], pt] }
    first["history"].each { |id, p95, _| assert_in_delta served[id]["p95_ms"], p95, 1e-9 if served[id] }
    puts "\n  history on load: ticks #{ids.first}..#{ids.last}, page opened at tick #{opened_at}, " \
         "#{compared} compared with /stats"

    # a real decision: the spawn the page lists is the decision log's, reason and all
    spawn = last["decisions"].find { |row| row[2].start_with?("spawn_worker") }
    refute_nil spawn, "no spawn_worker row on the page: #{last["decisions"].inspect}"
    assert_match(/\Aspawn_worker x\d+: .+ over /, spawn[3], "a spawn's reason says what was over its limit")
    recs = File.readlines(log).map { |l| JSON.parse(l) }.reject { |x| x["type"] == "header" }
    logged = recs.find { |x| x["tick"] == spawn[0].to_i }
    refute_nil logged, "tick #{spawn[0]} is not in the decision log"
    assert_equal "spawn_worker", logged.dig("decision", "action")
    assert_equal spawn[3], logged.dig("decision", "reason")

    assert_equal ARTIFACT, shot["screenshot"]
    png = File.binread(ARTIFACT)
    assert_equal "\x89PNG\r\n\x1a\n".b, png[0, 8], "the screenshot is a PNG"
    assert_operator png.bytesize, :>, 20_000, "the screenshot has content"
    puts "\n  readings (tick, p95 ms, arrivals/s, shed, timeouts, ready+booting, tries): " +
         readings.map { |r| d = r["dom"]; [d["tick"], d["q-p95"], d["rate-in"], d["shed"], d["timeouts"],
                                        "#{d["w-ready"]}+#{d["w-booting"]}", r["tries"]].join(" ") }.join("; ")
    puts "  dashboard screenshot: #{ARTIFACT}"
  ensure
    stalled&.each(&:close)
    if wrk
      begin
        Process.kill("TERM", -wrk)
      rescue Errno::ESRCH
        nil
      end
      Process.wait(wrk) rescue nil
    end
    srv&.stop
    FileUtils.rm_rf(dir) if dir
  end
end
