# frozen_string_literal: true

# What an operator expects of a puma-style server (issue 26), against the real server and gem:
# process titles read back from /proc (puma's `tag`), `lowlevel_error_handler` and
# `out_of_band` from the config file, `max_keep_alive`, `worker_boot_timeout`, two servers on
# one host with default flags (no control app unless asked for, as puma), and listen errors
# that name the listener and its flag.
require_relative "helper"
require "net/http"

class TestOperator < Minitest::Test
  def setup
    @tmp = Dir.mktmpdir("pp-operator-")
    @servers = []
  end

  def teardown
    @servers.each(&:stop)
    @pids&.each { |pid| stop_pid(pid) }
    FileUtils.rm_rf(@tmp)
  end

  def server(**kw)
    srv = E2E::Server.new(**kw)
    @servers << srv
    srv
  end

  def write(name, text)
    path = File.join(@tmp, name)
    FileUtils.mkdir_p(File.dirname(path))
    File.write(path, text)
    path
  end

  def cmdline(pid) = File.binread("/proc/#{pid}/cmdline").delete("\0").strip

  def get(srv, path)
    Net::HTTP.start("127.0.0.1", srv.port, open_timeout: 10, read_timeout: 30) { |h| h.get(path) }
  end

  # ---- process titles -------------------------------------------------------------------

  def test_process_titles
    config = write("titles/puma-plus.rb", "tag 'shop-#{$$}'\n")
    srv = server(workers: 2, threads: 3, env: { "PUMA_PLUS_CONFIG" => config })
    shepherd = Integer(srv.log[/shepherd pid (\d+)/, 1])
    assert_equal "puma-plus #{gem_version} shepherd: 2 workers x 3 threads, app config.ru [shop-#{$$}]",
                 cmdline(shepherd)
    workers = srv.stats["worker_status"].map { |w| [w["index"], w["pid"]] }.sort
    assert_equal [0, 1], workers.map(&:first)
    workers.each do |index, pid|
      assert_equal "puma-plus #{gem_version} worker #{index}: 3 threads, shepherd #{shepherd} [shop-#{$$}]", cmdline(pid)
    end
    # `ps` shows them too.
    ps = `ps -o pid=,args= -p #{shepherd},#{workers.map(&:last).join(',')}`
    assert_equal 3, ps.scan(/puma-plus #{Regexp.escape(gem_version)} (shepherd|worker)/).size, ps

    # No tag: the directory the server runs in, as puma's default.
    dir = File.join(@tmp, "myapp")
    FileUtils.mkdir_p(dir)
    srv2 = server(workers: 1, threads: 1, chdir: dir)
    pid = srv2.stats["worker_status"].first["pid"]
    assert_equal "puma-plus #{gem_version} worker 0: 1 thread, shepherd #{srv2.log[/shepherd pid (\d+)/, 1]} [myapp]",
                 cmdline(pid)
  end

  def gem_version
    @gem_version ||= File.read(File.join(E2E::ROOT, "gem/lib/puma_plus.rb"))[/VERSION = "([^"]+)"/, 1]
  end

  # ---- lowlevel_error_handler and out_of_band ---------------------------------------------

  APP = <<~RU
    $oob_runs = 0
    run lambda { |env|
      case env["PATH_INFO"]
      when "/boom" then raise "boom"
      when "/invalid" then ["abc", {}, []]
      when "/slow" then sleep 0.8; [200, {}, ["slow"]]
      else [200, { "content-type" => "text/plain" }, ["oob=\#{$oob_runs}"]]
      end
    }
  RU
  HOOKS = <<~RB
    lowlevel_error_handler do |error, env, status|
      [503, { "content-type" => "text/plain", "x-handled" => "1" },
       ["handled \#{error.class}: \#{error.message} at \#{env['PATH_INFO']} (\#{status})"]]
    end
    out_of_band { $oob_runs += 1 }
  RB

  def test_lowlevel_error_handler_and_out_of_band
    app = write("hooks/config.ru", APP)
    config = write("hooks/puma-plus.rb", HOOKS)
    srv = server(app: app, workers: 1, threads: 2, env: { "PUMA_PLUS_CONFIG" => config })

    res = get(srv, "/boom")
    assert_equal "503", res.code
    assert_equal "1", res["x-handled"]
    assert_equal "handled RuntimeError: boom at /boom (500)", res.body
    sleep 0.2
    res = get(srv, "/invalid") # an invalid response: its status is not an Integer
    assert_equal "503", res.code
    assert_match(/\Ahandled ArgumentError: .*"abc".* at \/invalid \(500\)\z/, res.body)
    assert_match(/RuntimeError: boom/, srv.log, "the error is still logged")

    # One request at a time: each one ends with the worker idle, so out_of_band runs after it.
    sleep 0.2
    first = get(srv, "/").body[/oob=(\d+)/, 1].to_i
    assert_equal 2, first, "one run after /boom, one after /invalid"
    3.times do |i|
      sleep 0.2
      assert_equal "oob=#{first + i + 1}", get(srv, "/").body
    end
    # While /slow runs on one thread, requests on the other end with the worker still busy:
    # no out-of-band run until /slow is done.
    before = get(srv, "/").body[/oob=(\d+)/, 1].to_i
    slow = Thread.new { get(srv, "/slow") }
    sleep 0.2
    during = 3.times.map { get(srv, "/").body[/oob=(\d+)/, 1].to_i }
    assert_equal [before + 1] * 3, during, "the worker was never idle while /slow ran"
    assert_equal "slow", slow.value.body
    sleep 0.2
    assert_equal "oob=#{before + 2}", get(srv, "/").body, "one run when /slow ended and the worker went idle"
  end

  # ---- max_keep_alive -----------------------------------------------------------------------

  def test_max_keep_alive
    srv = server(workers: 1, threads: 2, extra: ["-max-keep-alive", "3"])
    req = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"
    responses = E2E.raw(srv.port, req * 5, count: 5)
    assert_equal [200, 200, 200], responses.map(&:first), "the connection ends after its 3rd request"
    assert_nil responses[0][1]["connection"]
    assert_equal "close", responses[2][1]["connection"]
    # Without the flag, the same five are answered on one connection.
    srv2 = server(workers: 1, threads: 2)
    assert_equal [200] * 5, E2E.raw(srv2.port, req * 5, count: 5).map(&:first)
  end

  # ---- worker_boot_timeout ------------------------------------------------------------------

  def test_worker_boot_timeout
    marker = write("boot/hang-once", "")
    config = write("boot/puma-plus.rb", <<~RB)
      on_worker_boot do
        if File.exist?(#{marker.inspect})
          File.delete(#{marker.inspect})
          sleep 60 # this worker never connects
        end
      end
    RB
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    srv = server(workers: 1, threads: 2, extra: ["-worker-boot-timeout", "1500ms"],
                 env: { "PUMA_PLUS_CONFIG" => config })
    waited = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    refute File.exist?(marker), "the first worker ran the hook"
    log = srv.log
    hung = log[/worker 0 forked \(pid (\d+)\)/, 1]
    assert_match(/killing worker 0 \(pid #{hung}\): not connected \d+\.\d s after its fork \(-worker-boot-timeout 1\.5 s\)/, log)
    live = srv.stats["worker_status"].map { |w| w["pid"].to_s }
    assert_equal 1, live.size
    refute_includes live, hung, "the worker that did not boot was replaced"
    assert_operator waited, :>=, 1.5
    assert_equal "200", get(srv, "/hello").code
  end

  # ---- start-up: two servers, listen errors --------------------------------------------------

  def spawn_server(*args, log:)
    pid = Process.spawn(E2E::BIN, "-app", E2E::MIX, "-workers", "1", "-threads", "2", "-gem-dir",
                        File.join(E2E::ROOT, "gem"), *args, in: File::NULL, out: log, err: [:child, :out], pgroup: true)
    (@pids ||= []) << pid
    pid
  end

  def stop_pid(pid)
    Process.kill("TERM", pid)
    Timeout.timeout(20) { Process.waitpid(pid) }
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  rescue Timeout::Error
    Process.kill("KILL", -pid) rescue nil
    Process.waitpid(pid) rescue nil
  ensure
    Process.kill("KILL", -pid) rescue nil
  end

  def wait_http(port, pid, log)
    Timeout.timeout(30) do
      loop do
        raise Minitest::Assertion, "server exited: #{File.read(log)}" if Process.waitpid(pid, Process::WNOHANG)

        out, _, st = E2E.curl("http://127.0.0.1:#{port}/hello", timeout: 2)
        return out if st.success? && !out.empty?

        sleep 0.1
      end
    end
  end

  def test_two_servers_with_default_flags_and_listen_errors
    ports = [E2E.free_port, E2E.free_port]
    logs = ports.map { |p| File.join(@tmp, "srv-#{p}.log") }
    pids = ports.zip(logs).map { |p, log| spawn_server("-listen", "127.0.0.1:#{p}", log: log) }
    ports.zip(pids, logs).each { |p, pid, log| wait_http(p, pid, log) }
    logs.each do |log|
      refute_match(/control app/, File.read(log), "no control app unless -control names one")
    end

    # A listener that cannot be opened: exit 1, naming the address, the listener and its flag.
    taken = ports.first
    log = File.join(@tmp, "clash-http.log")
    pid = spawn_server("-listen", "127.0.0.1:#{taken}", log: log)
    _, st = Timeout.timeout(20) { Process.waitpid2(pid) }
    assert_equal 1, st.exitstatus
    assert_match(/cannot listen on 127\.0\.0\.1:#{taken} \(HTTP, -listen\): address already in use/, File.read(log))

    log = File.join(@tmp, "clash-control.log")
    pid = spawn_server("-listen", "127.0.0.1:#{E2E.free_port}", "-control", "127.0.0.1:#{taken}", log: log)
    _, st = Timeout.timeout(20) { Process.waitpid2(pid) }
    assert_equal 1, st.exitstatus
    assert_match(/cannot listen on 127\.0\.0\.1:#{taken} \(control app, -control\): address already in use/, File.read(log))

    pids.each { |pid| stop_pid(pid) }
  end
end
