# frozen_string_literal: true

# `puma-plus ctl` (docs/CONFIG.md) against a real server: every verb, with the control URL and
# token read from the state file (-S) and from a config file (-C); the state file follows a
# hot restart; and bind_to_activated_sockets through the puma-plus command under
# systemd-socket-activate.
require "yaml"
require_relative "helper"

class TestCtl < Minitest::Test
  PUMA_PLUS = File.join(E2E::ROOT, "gem/exe/puma-plus")
  PID_APP = File.join(E2E::ROOT, "tests/apps/pid/config.ru")

  def ctl(*args, chdir: E2E::ROOT)
    out, err, status = Open3.capture3("ruby", PUMA_PLUS, "ctl", *args, chdir: chdir)
    [status.exitstatus, out, err]
  end

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def wait_until(what, timeout: 30)
    deadline = now + timeout
    until yield
      flunk "#{what} within #{timeout}s" if now > deadline
      sleep 0.05
    end
  end

  # Gone, or a zombie its new parent (init, a subreaper) has not reaped yet.
  def gone?(pid)
    Process.kill(0, pid)
    File.read("/proc/#{pid}/stat").split(") ", 2)[1].start_with?("Z")
  rescue Errno::ESRCH, Errno::ENOENT
    true
  end

  def test_every_verb_against_a_real_server
    dir = Dir.mktmpdir("pp-ctl")
    state = File.join(dir, "server.state")
    srv = E2E::Server.new(app: PID_APP, workers: 1, threads: 2, token: "ctl-t0k", extra: ["-state-path", state])
    old = srv.pid
    assert_equal({ "pid" => old, "control_url" => "tcp://127.0.0.1:#{srv.control_port}",
                   "control_auth_token" => "ctl-t0k", "running_from" => E2E::ROOT }, YAML.safe_load(File.read(state)))

    status, out, err = ctl("-S", state, "status")
    assert_equal 0, status, err
    assert_match(/\Apuma-plus is running \(pid #{old}, 1 of 1 workers booted, queue depth 0, control app tcp:/, out)

    status, out, err = ctl("-S", state, "stats")
    assert_equal 0, status, err
    assert_equal 1, JSON.parse(out)["booted_workers"]

    # From a config file (its activate_control_app), and a missing token named as such.
    File.write(File.join(dir, "puma-plus.rb"),
               "activate_control_app \"tcp://127.0.0.1:#{srv.control_port}\", auth_token: \"ctl-t0k\"\n")
    status, out, err = ctl("-C", File.join(dir, "puma-plus.rb"), "stats")
    assert_equal 0, status, err
    assert_equal 1, JSON.parse(out)["booted_workers"]
    status, _, err = ctl("--control-url", "127.0.0.1:#{srv.control_port}", "stats")
    assert_equal 1, status
    assert_match(/401 Unauthorized: give the control token/, err)

    # phased-restart: started (202), then the one worker is replaced by a phase 1 one.
    worker_before = srv.stats["worker_status"].map { |w| w["pid"] }
    status, out, err = ctl("-S", state, "phased-restart")
    assert_equal 0, status, err
    assert_match(/\Aphased restart: probe shepherd pid \d+ is loading the new code; the workers of phase 0/, out)
    wait_until("the phased restart done") do
      st = srv.stats
      st["phase"] == 1 && st["phased_restart"]["state"] == "idle" && st["booted_workers"] == 1
    end
    st = srv.stats
    assert_equal "ok", st["phased_restart"]["last_result"], st["phased_restart"].inspect
    assert_equal 0, st["old_workers"]
    refute_equal worker_before, st["worker_status"].map { |w| w["pid"] }

    status, out, err = ctl("-S", state, "restart")
    assert_equal 0, status, err
    new_pid = out[/new server pid (\d+) is booting/, 1].to_i
    refute_equal 0, new_pid, out
    Process.waitpid(old) # the old server drains and exits once the new one took over
    srv.instance_variable_set(:@pid, nil)
    assert $?.success?
    assert_equal new_pid, YAML.safe_load(File.read(state))["pid"], "the new server rewrote the state file"
    status, out, = ctl("-S", state, "status")
    assert_equal 0, status
    assert_match(/\Apuma-plus is running \(pid #{new_pid}, 1 of 1 workers booted/, out)

    status, out, err = ctl("-S", state, "stop")
    assert_equal 0, status, err
    assert_equal "stopping: pid #{new_pid} drains and exits\n", out
    wait_until("the server exiting after ctl stop") { gone?(new_pid) }
    refute File.exist?(state), "the state file is removed at exit"
    status, out, = ctl("--control-url", "tcp://127.0.0.1:#{srv.control_port}", "status")
    assert_equal 1, status
    assert_match(/\Apuma-plus is not running/, out)
  ensure
    srv&.stop
    begin
      Process.kill("KILL", -old) if old
    rescue Errno::ESRCH, Errno::EPERM
      nil
    end
    FileUtils.rm_rf(dir) if dir
  end

  # A unix control socket: ctl talks to it, and it survives the hot restart (the old server
  # must not unlink the path the new one listens on).
  def test_unix_control_socket_through_a_restart
    sock = "/tmp/pp-e2e-#{Process.pid}-control.sock"
    url = "unix://#{sock}"
    log = "/tmp/pp-e2e-#{Process.pid}-unix-control.log"
    native = File.expand_path("../gem/ext-lib", File.dirname(E2E::BIN))
    # Started here, not by E2E::Server: the harness polls a TCP control port.
    old = Process.spawn({ "RUBYLIB" => native }, E2E::BIN, "-app", PID_APP, "-workers", "1", "-threads", "2",
                        "-listen", "127.0.0.1:#{E2E.free_port}", "-control", "unix:#{sock}",
                        "-gem-dir", File.join(E2E::ROOT, "gem"),
                        in: File::NULL, out: log, err: [:child, :out], pgroup: true)
    wait_until("the server answering on #{url}") { ctl("--control-url", url, "status")[1].include?("1 of 1 workers booted") }
    status, out, err = ctl("--control-url", url, "restart")
    assert_equal 0, status, err
    assert_equal old, out[/pid (\d+) serves until/, 1].to_i
    new_pid = out[/new server pid (\d+)/, 1].to_i
    Timeout.timeout(30) { Process.waitpid(old) }
    assert $?.success?, File.read(log)
    assert File.socket?(sock), "the control socket's path survived the handover"
    status, out, err = ctl("--control-url", url, "stop")
    assert_equal [0, "stopping: pid #{new_pid} drains and exits\n"], [status, out], err
    wait_until("the new server gone") { gone?(new_pid) }
    refute File.exist?(sock), "the last server removes its control socket"
  ensure
    begin
      Process.kill("KILL", -old) if old
    rescue Errno::ESRCH, Errno::EPERM
      nil
    end
    Process.waitpid(old) rescue nil if old
    [sock, log].each { |f| File.unlink(f) if f && File.exist?(f) }
  end

  # bind_to_activated_sockets "only": the puma-plus command turns the socket systemd passed
  # into a -listen of its address, so the server takes it; the file's own port is dropped.
  def test_bind_to_activated_sockets_through_the_command
    activate = "/usr/bin/systemd-socket-activate"
    flunk "#{activate} not found: install Debian's systemd package" unless File.executable?(activate)
    dir = Dir.mktmpdir("pp-ctl-activate")
    port = E2E.free_port
    control_port = E2E.free_port
    File.write(File.join(dir, "puma-plus.rb"), <<~RUBY)
      bind_to_activated_sockets "only"
      port #{E2E.free_port}
      workers 1
      threads 2, 2
      activate_control_app "tcp://127.0.0.1:#{control_port}"
      rackup "#{E2E::MIX}"
    RUBY
    log = File.join(dir, "log")
    native = File.expand_path("../gem/ext-lib", File.dirname(E2E::BIN))
    pid = Process.spawn({ "RUBYLIB" => native }, activate, "-l", "127.0.0.1:#{port}", "-E", "RUBYLIB",
                        "ruby", PUMA_PLUS, "-C", File.join(dir, "puma-plus.rb"), "--server", E2E::BIN,
                        in: File::NULL, out: log, err: [:child, :out], pgroup: true)
    wait_until("systemd-socket-activate listening") do
      TCPSocket.new("127.0.0.1", port).close || true
    rescue Errno::ECONNREFUSED
      false
    end
    rs = E2E.raw(port, "GET /hello HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", timeout: 30)
    assert_equal 200, rs.dig(0, 0), File.read(log)
    assert_match(/HTTP listening on 127\.0\.0\.1 \(port #{port}, inherited fd 3\)/, File.read(log))
    assert_equal 1, File.read(log).scan(/HTTP listening/).size, "only the activated socket: #{File.read(log)}"
    status, out, err = ctl("--control-url", "127.0.0.1:#{control_port}", "stop")
    assert_equal 0, status, err
    assert_equal "stopping: pid #{pid} drains and exits\n", out, "the command execed the server: the same pid"
    Timeout.timeout(20) { Process.waitpid(pid) }
    assert $?.success?, File.read(log)
    pid = nil
  ensure
    if pid
      Process.kill("KILL", -pid) rescue nil
      Process.waitpid(pid) rescue nil
    end
    FileUtils.rm_rf(dir) if dir
  end
end
