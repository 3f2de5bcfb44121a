# frozen_string_literal: true

# Slots at run time and fiber slots, end to end (docs/SERVER.md "Slots at run time",
# docs/RACK.md "Fiber slots", docs/PROTOCOL.md "SLOTS, SLOT_CLOSE"), driven through the control
# app's POST /slots as an operator would (the autoscale glue calls the same actuator):
# - thread slots grown at run time serve more concurrent sleeping requests (40 × /mix/0/500
#   finish in a fraction of the time), and shrinking them under load finishes every in-flight
#   request without an error; /stats and /metrics show slots, target and CPU time per worker;
# - fiber slots (the pinned async gem) serve an app that calls a slow local HTTP service with
#   Net::HTTP at >= 50 concurrent requests in one worker process (the slow service, started
#   here on 127.0.0.1 and stopped by PID, counts how many calls it had at once), and stream
#   uploads and big responses concurrently;
# - a Rails 7.2 app with `config.active_support.isolation_level = :fiber` serves its scaffold
#   (HTML, a CSRF-protected form POST, the JSON endpoint) under fiber slots;
# - -request-timeout interrupts a fiber slot: its sleeping request gets 504 at the deadline,
#   PumaPlus::RequestTimeout is raised in that fiber only (the other slot's request ends on its
#   own), and the slot is free at once and serves the next requests in the same process.
require "net/http"
require "cgi"
require_relative "helper"

class TestSlots < Minitest::Test
  def teardown
    @srv&.stop
    if @slow_pid
      begin
        Process.kill("TERM", @slow_pid)
        Process.wait(@slow_pid)
      rescue Errno::ESRCH, Errno::ECHILD
        nil
      end
    end
    FileUtils.rm_rf(@tmp) if @tmp
  end

  def control_post(path)
    Timeout.timeout(10) do
      s = TCPSocket.new("127.0.0.1", @srv.control_port)
      s.write("POST #{path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
      raw = s.read
      s.close
      head, body = raw.split("\r\n\r\n", 2)
      [head[%r{\AHTTP/1\.1 (\d+)}, 1].to_i, body]
    end
  end

  def set_slots(count, worker: 0)
    status, body = control_post("/slots?worker=#{worker}&count=#{count}")
    assert_equal 200, status, body
    JSON.parse(body)
  end

  def worker_stats = @srv.stats["worker_status"].first

  # Waits until worker 0 has `count` connected slots (they dial in asynchronously).
  def wait_slots(count, timeout: 15)
    deadline = @srv.now + timeout
    until (w = worker_stats)["slots"] == count
      flunk("slots stayed at #{w['slots']}, not #{count}\n#{@srv.log[-3000..]}") if @srv.now > deadline
      sleep 0.05
    end
    w
  end

  # `n` GETs of `path` at once, each on its own connection; returns [statuses, seconds].
  def concurrent_gets(path, n, port: @srv.port)
    t0 = @srv.now
    statuses = Array.new(n) do
      Thread.new do
        Net::HTTP.start("127.0.0.1", port, open_timeout: 10, read_timeout: 60) do |h|
          h.request(Net::HTTP::Get.new(path)).code
        end
      rescue StandardError => e
        e.class.name
      end
    end.map(&:value)
    [statuses, @srv.now - t0]
  end

  def test_thread_slots_grow_and_shrink_at_run_time
    @srv = E2E::Server.new(workers: 1, threads: 5, extra: ["-max-slots", "64", "-min-threads", "2"])
    w = wait_slots(5) # the server is ready at its first slot; the others are dialling
    assert_equal 5, w["slots_target"]
    assert_kind_of Integer, w["cpu_ns"], "CPU time from /proc/PID/stat"

    statuses, before = concurrent_gets("/mix/0/500", 40)
    assert_equal ["200"] * 40, statuses
    assert_operator before, :>, 3.0, "5 slots: 8 waves of 0.5 s"

    res = set_slots(40)
    assert_equal 40, res["slots_target"]
    w = wait_slots(40)
    assert_equal 40, w["slots_target"]
    assert_equal 40, @srv.stats["queue"]["slots_ready"], "the new connections are capacity"
    statuses, after = concurrent_gets("/mix/0/500", 40)
    assert_equal ["200"] * 40, statuses
    # The per-worker CPU share of the last tick (/proc/PID/stat, sampled each tick).
    share = worker_stats["cpu_share"]
    assert_kind_of Float, share
    assert_operator share, :>=, 0.0
    assert_operator share, :<, 2.5, "a share of one core (one process, GVL-bound at most ~1)"
    assert_operator after, :<, before / 3.0, "40 slots serve the 40 sleeps at once (#{after.round(2)} s vs #{before.round(2)} s)"

    # Clamped to -max-slots; a bad request is a 400, an unknown worker a 404, GET a 405.
    assert_equal 64, set_slots(500)["slots_target"]
    wait_slots(64)
    assert_equal 400, control_post("/slots?worker=0&count=x")[0]
    assert_equal 400, control_post("/slots?worker=0")[0]
    assert_equal 404, control_post("/slots?worker=7&count=3")[0]
    assert_equal 405, @srv.control_get("/slots?worker=0&count=3")[0]

    # Shrink while 40 requests run: each finishes (200), then its slot ends.
    runner = Thread.new { concurrent_gets("/mix/0/1000", 40) }
    sleep 0.4
    assert_equal 2, set_slots(1)["slots_target"], "clamped to -min-threads"
    statuses, = runner.value
    assert_equal ["200"] * 40, statuses
    w = wait_slots(2)
    assert_equal 2, w["slots_target"]
    st = @srv.stats
    assert_equal 0, st["requests"]["bad_gateway"]
    assert_equal 62, st["queue"]["slots_closed"]
    assert_equal 2, st["queue"]["slots_ready"]
    statuses, = concurrent_gets("/hello", 4)
    assert_equal ["200"] * 4, statuses, "the remaining slots serve on"

    metrics = @srv.control_get("/metrics")[1]
    pid = w["pid"]
    assert_match(/^puma_plus_worker_slots\{index="0",pid="#{pid}"\} 2$/, metrics)
    assert_match(/^puma_plus_worker_slots_target\{index="0",pid="#{pid}"\} 2$/, metrics)
    assert_match(/^puma_plus_worker_cpu_seconds_total\{index="0",pid="#{pid}"\} \d+\.\d{3}$/, metrics)
    assert_match(/^puma_plus_worker_cpu_share\{index="0",pid="#{pid}"\} \d+\.\d{4}$/, metrics)
    assert_match(/^puma_plus_slots_closed_total 62$/, metrics)
    assert_match(/slots 5 -> 40 \(5 connected\)/, @srv.log)

    # `puma-plus ctl slots` is the command-line client of POST /slots.
    exe = File.join(E2E::ROOT, "gem/exe/puma-plus")
    out, err, st = Open3.capture3("ruby", exe, "ctl", "--control-url", "127.0.0.1:#{@srv.control_port}", "slots", "0", "6")
    assert st.success?, err
    assert_match(/\Aworker 0 \(pid #{pid}\): slot target 6; \d+ connected now$/, out)
    wait_slots(6)
    out, err, st = Open3.capture3("ruby", exe, "ctl", "--control-url", "127.0.0.1:#{@srv.control_port}", "slots", "3", "6")
    assert_equal 1, st.exitstatus, out
    assert_match(/404: no serving worker with index 3/, err)
    assert_equal 0, @srv.stop&.exitstatus
  end

  # POST /slots without worker=: every worker's target, and the one a worker started later
  # (here the replacement of a killed worker) is told when its monitor connection arrives.
  def test_slots_for_every_worker_and_later_ones
    @srv = E2E::Server.new(workers: 2, threads: 3, extra: ["-max-slots", "32"])
    status, body = control_post("/slots?count=12")
    assert_equal 200, status, body
    assert_equal 12, JSON.parse(body)["slots_per_worker"]
    deadline = @srv.now + 15
    until (ws = @srv.stats["worker_status"]).map { |w| w["slots"] } == [12, 12]
      flunk("slots #{ws.map { |w| w['slots'] }}, not [12, 12]") if @srv.now > deadline
      sleep 0.05
    end
    st = @srv.stats
    assert_equal 12, st["slots_per_worker"]
    assert_equal 24, st["queue"]["slots_ready"]
    victim = ws.first["pid"]
    Process.kill("KILL", victim)
    deadline = @srv.now + 20
    loop do
      ws = @srv.stats["worker_status"]
      break if ws.size == 2 && ws.none? { |w| w["pid"] == victim } && ws.all? { |w| w["slots"] == 12 && w["slots_target"] == 12 }

      flunk("the replacement worker did not reach 12 slots: #{ws.inspect}\n#{@srv.log[-2000..]}") if @srv.now > deadline
      sleep 0.1
    end
    assert_match(/^puma_plus_slots_per_worker 12$/, @srv.control_get("/metrics")[1])
    assert_equal 0, @srv.stop&.exitstatus
  end

  # A slow HTTP service: each call answers after DELAY_MS; GET /max says how many calls it
  # had in flight at once. One thread per connection (it must hold > 50 at once).
  SLOW_SERVICE = <<~RUBY
    require "socket"
    server = TCPServer.new("127.0.0.1", Integer(ARGV[0]))
    lock = Mutex.new
    now = 0
    max = 0
    loop do
      client = server.accept
      Thread.new(client) do |c|
        line = c.gets.to_s
        nil while (h = c.gets) && h != "\\r\\n"
        if line.start_with?("GET /max")
          body = lock.synchronize { max.to_s }
        else
          lock.synchronize { now += 1; max = now if now > max }
          sleep Integer(ARGV[1]) / 1000.0
          lock.synchronize { now -= 1 }
          body = "slow"
        end
        c.write("HTTP/1.1 200 OK\\r\\ncontent-length: \#{body.bytesize}\\r\\nconnection: close\\r\\n\\r\\n\#{body}")
      rescue StandardError
        nil
      ensure
        c.close
      end
    end
  RUBY

  def start_slow_service(delay_ms)
    port = E2E.free_port
    @slow_pid = Process.spawn(RbConfig.ruby, "-e", SLOW_SERVICE, port.to_s, delay_ms.to_s,
                              in: File::NULL, out: File::NULL, err: File::NULL)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    begin
      TCPSocket.new("127.0.0.1", port).close
    rescue SystemCallError
      raise "the slow service did not start" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.05
      retry
    end
    port
  end

  def slow_max(port) = Net::HTTP.get(URI("http://127.0.0.1:#{port}/max")).to_i

  def test_fiber_slots_serve_net_http_calls_concurrently
    env = E2E.rubygems_env
    slow = start_slow_service(500)
    @tmp = Dir.mktmpdir("pp-fibers-")
    app = File.join(@tmp, "config.ru")
    File.write(app, <<~RUBY)
      require "net/http"
      UPSTREAM = URI("http://127.0.0.1:#{slow}/call")
      run lambda { |env|
        if env["PATH_INFO"] == "/call"
          body = Net::HTTP.get(UPSTREAM)
          [200, { "content-type" => "text/plain" }, [body, " async=", Fiber.scheduler.is_a?(Async::Scheduler).to_s]]
        elsif env["PATH_INFO"] == "/echo"
          [200, { "content-type" => "application/octet-stream" }, [env["rack.input"].read]]
        else
          [200, { "content-type" => "text/plain" }, ["hello"]]
        end
      }
    RUBY
    @srv = E2E::Server.new(app: app, workers: 1, env: env, extra: ["-fibers", "64", "-max-slots", "128"])
    assert_match(/--threads 64 .*--fibers/, @srv.log)
    assert_equal 64, wait_slots(64)["slots_target"]

    res = Net::HTTP.get_response(URI("http://127.0.0.1:#{@srv.port}/call"))
    assert_equal "slow async=true", res.body, "the request ran in a fiber under async's scheduler"

    statuses, secs = concurrent_gets("/call", 60)
    assert_equal ["200"] * 60, statuses, @srv.log[-3000..]
    assert_operator slow_max(slow), :>=, 50, "at least 50 Net::HTTP calls in flight at once from one process"
    assert_operator secs, :<, 2.5, "60 calls of 0.5 s on 64 fiber slots: about one wave"

    # Uploads past 1 MiB (spooled: the body's file descriptor comes with the REQUEST) and big
    # responses (partial writes) on fiber slots at once: the worker's socket waits yield to the
    # scheduler, bytes stay in order.
    bodies = Array.new(4) { Random.bytes(3 << 20) }
    echoed = bodies.map do |b|
      Thread.new do
        Net::HTTP.start("127.0.0.1", @srv.port, read_timeout: 60) do |h|
          h.post("/echo", b, "content-type" => "application/octet-stream").body.b
        end
      end
    end.map(&:value)
    bodies.each_with_index { |b, i| assert(echoed[i] == b, "echo #{i}: #{echoed[i].bytesize} bytes back of #{b.bytesize}") }
    assert_operator @srv.stats["requests"]["body_spooled"], :>=, 4

    # Fiber slots grow and shrink at run time like thread slots.
    set_slots(100)
    wait_slots(100)
    runner = Thread.new { concurrent_gets("/call", 100) }
    sleep 0.3
    set_slots(10)
    statuses, = runner.value
    assert_equal ["200"] * 100, statuses
    wait_slots(10)
    assert_equal 0, @srv.stats["requests"]["bad_gateway"]
    assert_equal 1, @srv.stats["booted_workers"], "one process did it"
    assert_equal 0, @srv.stop&.exitstatus
  end

  def test_fiber_slot_request_timeout_interrupts_the_fiber
    app = File.join(E2E::ROOT, "tests/apps/timeout/config.ru")
    @srv = E2E::Server.new(app: app, workers: 1, env: E2E.rubygems_env,
                           extra: ["-fibers", "2", "-max-slots", "2", "-request-timeout", "1000ms",
                                   "-worker-kill-grace", "5000ms"])
    assert_match(/--threads 2 .*--fibers/, @srv.log)
    wait_slots(2)
    get = lambda do |path|
      t0 = @srv.now
      r = E2E.raw(@srv.port, "GET #{path} HTTP/1.1\r\nHost: a\r\n\r\n", timeout: 20)[0] ||
          flunk("GET #{path}: no response\n#{@srv.log[-3000..]}")
      r + [@srv.now - t0]
    end
    pid = get.call("/pid")[2]
    # A sleeps past the deadline on one fiber slot; B, started 0.6 s later on the other, sleeps
    # 0.9 s and ends on its own 0.5 s after A's interrupt: the raise reaches A's fiber only.
    a = Thread.new { get.call("/sleep/8000") }
    sleep 0.6
    b = Thread.new { get.call("/sleep/900") }
    status, _, body, secs = a.value
    assert_equal 504, status, body
    assert_in_delta 1.0, secs, 0.4, "504 at about the deadline"
    bs, _, bbody, bsecs = b.value
    # Without the interrupt A's fiber would sleep 6 s more; it let go at its deadline.
    deadline = @srv.now + 0.5
    until (busy = @srv.stats["queue"]["slots_busy"]).zero?
      flunk("the interrupted fiber slot is still busy (#{busy})\n#{@srv.log[-3000..]}") if @srv.now > deadline
      sleep 0.02
    end
    assert_equal [200, "slept 900"], [bs, bbody], "the other fiber's request was not interrupted"
    assert_operator bsecs, :<, 1.0 + 0.4
    interrupts = get.call("/interrupts")[2].lines
    assert_equal 1, interrupts.size, interrupts.inspect
    assert_match(/PumaPlus::RequestTimeout/, interrupts.first, "raised in the app's fiber")
    assert_match(/interrupted at .*config\.ru/, @srv.log, "the worker logs where the fiber was interrupted")
    # The slot survives: the same process, both slots connected, two requests at once served.
    assert_equal pid, get.call("/pid")[2]
    both = Array.new(2) { Thread.new { get.call("/sleep/300") } }.map(&:value)
    assert_equal [[200, "slept 300"]] * 2, both.map { |r| [r[0], r[2]] }
    assert_operator both.map(&:last).max, :<, 0.8, "both slots serve at once"
    assert_equal 2, worker_stats["slots"]
    assert_operator @srv.stats["requests"]["request_timeouts"], :>=, 1
    # After the head went out the response is cut, and the slot is free again.
    s = TCPSocket.new("127.0.0.1", @srv.port)
    s.write("GET /drip/100 HTTP/1.1\r\nHost: a\r\n\r\n")
    raw = Timeout.timeout(10) { s.read }
    assert_match(%r{\AHTTP/1.1 200 }, raw)
    refute raw.end_with?("0\r\n\r\n"), "the chunked body is cut"
    deadline = @srv.now + 2
    until @srv.stats["queue"]["slots_busy"].zero?
      flunk("the dripping fiber slot is still busy") if @srv.now > deadline
      sleep 0.02
    end
    assert_equal pid, get.call("/pid")[2]
  ensure
    s&.close
  end

  # The Rails 7.2 app of scripts/gen-rails-app.sh, copied, with fiber isolation, the async gem
  # in its bundle and `fiber_slots 16` in config/puma-plus.rb.
  def test_rails_7_2_fiber_isolation_under_fiber_slots
    column_env = E2E.rubygems_env.merge("RUBYOPT" => nil, "BUNDLE_FROZEN" => nil)
    out, status = Open3.capture2e(column_env.merge("GEM_HOME" => nil), "bash",
                                  File.join(E2E::ROOT, "scripts/gen-rails-app.sh"), "7.2")
    assert status.success?, "scripts/gen-rails-app.sh 7.2 failed:\n#{out}"
    @tmp = Dir.mktmpdir("pp-rails-fibers-")
    app = File.join(@tmp, "app")
    FileUtils.cp_r(File.join(E2E::ROOT, "build/apps/rails-7.2"), app)
    File.write(File.join(app, "Gemfile"), File.read(File.join(app, "Gemfile")) + "gem \"async\"\n")
    appfile = File.join(app, "config/application.rb")
    src = File.read(appfile)
    assert_match(/class Application < Rails::Application\n/, src)
    File.write(appfile, src.sub(/class Application < Rails::Application\n/,
                                "\\0    config.active_support.isolation_level = :fiber\n"))
    ctl = File.join(app, "app/controllers/application_controller.rb")
    File.write(ctl, File.read(ctl).sub("  after_action do\n", <<~RUBY))
        after_action do
          response.set_header("x-pp-isolation", ActiveSupport::IsolatedExecutionState.isolation_level.to_s)
          response.set_header("x-pp-async", Fiber.scheduler.is_a?(Async::Scheduler).to_s)
    RUBY
    conf = File.join(app, "config/puma-plus.rb")
    File.write(conf, File.read(conf).sub(/^threads 3, 3$/, "threads 3, 3\nfiber_slots 16\nmax_slots 64"))
    env = column_env.merge(
      "BUNDLE_GEMFILE" => File.join(app, "Gemfile"), "PUMA_PLUS_SERVER" => File.expand_path(E2E::BIN),
      "SECRET_KEY_BASE" => "pp-e2e-#{'k' * 64}", "RAILS_LOG_TO_STDOUT" => "1", "RAILS_ENV" => "production",
      "WEB_CONCURRENCY" => "1", "RAILS_MAX_THREADS" => nil
    )
    out, status = Open3.capture2e(env, "bundle", "lock", "--local", chdir: app)
    assert status.success?, "bundle lock --local with async:\n#{out}"
    @srv = E2E::Server.new(workers: 1, env: env, chdir: app, boot_timeout: 60, command: lambda { |port, cport|
      env["PORT"] = port.to_s
      env["PP_CONTROL_PORT"] = cport.to_s
      %w[bundle exec puma-plus]
    })
    assert_match(/--threads 16 .*--fibers/, @srv.log)
    refute_match(/isolation_level :thread/, @srv.log, "fiber isolation: no warning")
    assert_equal 16, wait_slots(16)["slots_target"]

    http = lambda do |req|
      Net::HTTP.start("127.0.0.1", @srv.port, open_timeout: 10, read_timeout: 30) { |h| h.request(req) }
    end
    res = http.call(Net::HTTP::Get.new("/posts/new"))
    assert_equal "200", res.code, @srv.log[-3000..]
    assert_equal "fiber", res["x-pp-isolation"]
    assert_equal "true", res["x-pp-async"], "the request ran in a fiber under async's scheduler"
    token = CGI.unescapeHTML(res.body[/name="authenticity_token" value="([^"]+)"/, 1].to_s)
    refute_empty token
    cookie = res.get_fields("set-cookie").to_a.map { |c| c.split(";", 2).first }.join("; ")
    post = Net::HTTP::Post.new("/posts")
    post["Cookie"] = cookie
    post.set_form_data("authenticity_token" => token, "post[title]" => "under fibers", "post[body]" => "hi")
    res = http.call(post)
    assert_equal "302", res.code, @srv.log[-3000..]
    location = URI(res["location"]).path

    # 32 concurrent reads of the scaffold (HTML and JSON) on 16 fiber slots.
    results = Array.new(32) do |i|
      Thread.new do
        path = i.even? ? "/posts.json" : location
        r = http.call(Net::HTTP::Get.new(path))
        [path, r.code, r.body]
      end
    end.map(&:value)
    results.each do |path, code, body|
      assert_equal "200", code, "#{path}: #{@srv.log[-3000..]}"
      if path == "/posts.json"
        assert_equal ["under fibers"], JSON.parse(body).map { |p| p["title"] }
      else
        assert_includes body, "under fibers"
      end
    end
    assert_equal 0, @srv.stats["requests"]["bad_gateway"]
    assert_equal 0, @srv.stop&.exitstatus
  end
end
