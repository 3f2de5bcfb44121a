# frozen_string_literal: true

# systemd end to end (docs/SERVER.md "systemd"): socket activation by Debian's
# systemd-socket-activate (it binds the sockets, waits for the first connection, then execs the
# server with LISTEN_FDS: the server serves on a port it never bound), the notifications on a
# fake NOTIFY_SOCKET this test owns (READY=1, STATUS=, WATCHDOG=1 at half WATCHDOG_USEC,
# STOPPING=1 at SIGTERM, in that order), the -pidfile and -state-path files, an inherited
# socket that matches no listener (an error), and the sample unit files in docs/systemd/.
require "yaml"
require_relative "helper"

class TestSystemd < Minitest::Test
  ACTIVATE = "/usr/bin/systemd-socket-activate"

  def setup
    return if File.executable?(ACTIVATE)

    flunk "#{ACTIVATE} not found: install Debian's systemd package (scripts/install-deps.sh)"
  end

  # A unix datagram socket standing in for systemd's notification socket.
  class FakeNotify
    attr_reader :path, :messages

    def initialize
      @path = "/tmp/pp-notify-#{Process.pid}-#{rand(1 << 30)}.sock"
      @sock = Socket.new(:UNIX, :DGRAM)
      @sock.bind(Socket.sockaddr_un(@path))
      @messages = []
    end

    # Reads datagrams until the block is true for the list so far, or fails after `timeout`.
    def wait_for(what, timeout: 30)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
      until yield(@messages)
        left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
        flunk_msg = "no #{what} on NOTIFY_SOCKET within #{timeout}s; got #{@messages.inspect}"
        raise Minitest::Assertion, flunk_msg if left <= 0

        @messages << @sock.recv(4096) if IO.select([@sock], nil, nil, [left, 0.2].min)
      end
    end

    def close
      @sock.close
      File.unlink(@path) if File.exist?(@path)
    end
  end

  def activate_env
    native = File.expand_path("../gem/ext-lib", File.dirname(E2E::BIN))
    Dir.exist?(native) ? { "RUBYLIB" => native } : {}
  end

  # systemd-socket-activate passes only the variables named with -E.
  def spawn_activated(listen, fdnames, server_args, log, env: {})
    env = activate_env.merge(env)
    cmd = [ACTIVATE, *listen.flat_map { |a| ["-l", a] }]
    cmd << "--fdname=#{fdnames}" if fdnames
    env.each_key { |k| cmd.push("-E", k) }
    cmd += [E2E::BIN, "-app", E2E::MIX, "-workers", "1", "-threads", "2",
            "-gem-dir", File.join(E2E::ROOT, "gem"), *server_args]
    Process.spawn(env, *cmd, in: File::NULL, out: log, err: [:child, :out], pgroup: true)
  end

  def comm(pid) = File.read("/proc/#{pid}/comm").strip

  def wait_listening(port, timeout: 10)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    loop do
      TCPSocket.new("127.0.0.1", port).close
      return
    rescue Errno::ECONNREFUSED
      flunk "nothing listens on #{port}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      sleep 0.02
    end
  end

  def get(port, path, token: nil)
    auth = token ? "Authorization: Bearer #{token}\r\n" : ""
    E2E.raw(port, "GET #{path} HTTP/1.1\r\nHost: a\r\n#{auth}Connection: close\r\n\r\n", timeout: 30).first
  end

  def kill_group(pid)
    Process.kill("KILL", -pid)
  rescue Errno::ESRCH, Errno::EPERM
    nil
  ensure
    Process.waitpid(pid) rescue nil
  end

  def test_socket_activation_and_notifications
    notify = FakeNotify.new
    port = E2E.free_port
    control_port = E2E.free_port
    dir = Dir.mktmpdir("pp-systemd")
    pidfile = File.join(dir, "server.pid")
    state = File.join(dir, "server.state")
    log = File.join(dir, "server.log")
    # The HTTP socket is matched by its address; the control socket by its name ("control"),
    # although -control asks for port 0: the inherited socket wins.
    pid = spawn_activated(["127.0.0.1:#{port}", "127.0.0.1:#{control_port}"], "web:control",
                          ["-listen", "127.0.0.1:#{port}", "-control", "127.0.0.1:0",
                           "-control-token", "s3cr\"t", "-pidfile", pidfile, "-state-path", state],
                          log, env: { "NOTIFY_SOCKET" => notify.path, "WATCHDOG_USEC" => "400000" })
    wait_listening(port)
    # systemd-socket-activate holds the port and has not started the server yet.
    assert_equal "systemd-socket-", comm(pid)
    assert_raises(Errno::EADDRINUSE) { TCPServer.new("127.0.0.1", port) }
    # The first connection starts the server (exec: the same pid), which serves it.
    status, _, body = get(port, "/hello")
    assert_equal [200, "Hello, world\n"], [status, body], File.read(log)
    assert_equal "puma-plus-serve", comm(pid)
    out = File.read(log)
    assert_match(/HTTP listening on 127\.0\.0\.1 \(port #{port}, inherited fd 3\)/, out)
    assert_match(/control app listening on 127\.0\.0\.1 \(port #{control_port}, inherited fd 4\)/, out)

    notify.wait_for("READY=1") { |m| m.any? { |x| x.include?("READY=1") } }
    notify.wait_for("a STATUS= after READY=1") { |m| m.count { |x| x.start_with?("STATUS=") } >= 1 }
    notify.wait_for("5 WATCHDOG=1") { |m| m.count("WATCHDOG=1") >= 5 }
    ready = notify.messages.index { |x| x.include?("READY=1") }
    first_status = notify.messages.index { |x| x.start_with?("STATUS=") }
    assert_operator ready, :<, first_status, "READY=1 comes before the periodic STATUS="
    assert_match(/\AREADY=1\nSTATUS=workers 1 ready, 0 booting; threads \d+ idle of 2; queue p95 /,
                 notify.messages[ready])
    assert_match(/STATUS=workers 1 ready.*queue p95 .* queued\z/, notify.messages[first_status])
    # WATCHDOG_USEC=400000: a ping every 200 ms, so 5 of them take about 1 s, never 5 at once.
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    before = notify.messages.count("WATCHDOG=1")
    notify.wait_for("WATCHDOG=1 for a second") { |m| m.count("WATCHDOG=1") >= before + 5 }
    elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    # (The upper bound is loose: a loaded machine delays timers, it never runs them early.)
    assert_operator elapsed, :>=, 0.6, "5 pings at half of WATCHDOG_USEC=400000 took only #{elapsed}s"
    assert_operator elapsed, :<=, 2.5, "5 pings at half of WATCHDOG_USEC=400000 took #{elapsed}s"

    # SIGHUP reloads synchronously: RELOADING=1 (with MONOTONIC_USEC), then READY=1.
    Process.kill("HUP", pid)
    notify.wait_for("READY=1 after SIGHUP's RELOADING=1") do |m|
      i = m.index { |x| x.start_with?("RELOADING=1") }
      i && m[i..].any? { |x| x.start_with?("READY=1") }
    end
    reloading = notify.messages.index { |x| x.start_with?("RELOADING=1") }
    assert_match(/\ARELOADING=1\nMONOTONIC_USEC=\d+\nSTATUS=SIGHUP: reloading\z/, notify.messages[reloading])

    assert_equal "#{pid}\n", File.read(pidfile)
    st = YAML.safe_load(File.read(state))
    assert_equal({ "pid" => pid, "control_url" => "tcp://127.0.0.1:#{control_port}",
                   "control_auth_token" => "s3cr\"t", "running_from" => E2E::ROOT }, st)
    assert_equal 200, get(control_port, "/stats", token: "s3cr\"t")[0]

    Process.kill("TERM", pid)
    notify.wait_for("STOPPING=1") { |m| m.any? { |x| x.start_with?("STOPPING=1") } }
    Timeout.timeout(20) { Process.waitpid(pid) }
    assert $?.success?, "exit status #{$?.inspect}\n#{File.read(log)}"
    pid = nil
    stopping = notify.messages.index { |x| x.start_with?("STOPPING=1") }
    assert_operator stopping, :>, first_status
    assert_empty notify.messages[stopping..].grep(/READY=1|STATUS=workers/), "nothing says ready after STOPPING=1"
    refute File.exist?(pidfile), "the pid file is removed at exit"
    refute File.exist?(state), "the state file is removed at exit"
  ensure
    kill_group(pid) if pid
    notify&.close
    FileUtils.rm_rf(dir) if dir
  end

  def test_unused_inherited_socket_is_an_error
    port = E2E.free_port
    extra = E2E.free_port
    log = "/tmp/pp-e2e-#{Process.pid}-unused.log"
    pid = spawn_activated(["127.0.0.1:#{port}", "127.0.0.1:#{extra}"], nil,
                          ["-listen", "127.0.0.1:#{port}", "-control", "off"], log)
    wait_listening(port)
    s = TCPSocket.new("127.0.0.1", port) # starts the server
    Timeout.timeout(20) { Process.waitpid(pid) }
    pid = nil
    assert_equal 1, $?.exitstatus, File.read(log)
    assert_match(/inherited fd 4 \(name unknown, 127\.0\.0\.1:#{extra}\) matches no -listen/, File.read(log))
  ensure
    s&.close
    kill_group(pid) if pid
    File.unlink(log) if log && File.exist?(log)
  end

  # A unix socket from systemd is matched by its path, served, and left in place at exit (it is
  # systemd's).
  def test_activated_unix_socket
    path = "/tmp/pp-e2e-#{Process.pid}-activated.sock"
    log = "/tmp/pp-e2e-#{Process.pid}-activated.log"
    pid = spawn_activated([path], nil, ["-listen", "unix:#{path}", "-control", "off"], log)
    wait_until_exists = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    sleep 0.02 until File.socket?(path) || Process.clock_gettime(Process::CLOCK_MONOTONIC) > wait_until_exists
    u = UNIXSocket.new(path)
    u.write("GET /hello HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    r = Timeout.timeout(30) { E2E::ResponseReader.new(u).next_response }
    assert_equal [200, "Hello, world\n"], [r[0], r[2]], File.read(log)
    assert_match(/HTTP listening on unix:#{Regexp.escape(path)} \(port 0, inherited fd 3\)/, File.read(log))
    Process.kill("TERM", pid)
    Timeout.timeout(20) { Process.waitpid(pid) }
    pid = nil
    assert $?.success?, File.read(log)
    assert File.socket?(path), "the server leaves systemd's socket path alone"
  ensure
    u&.close
    kill_group(pid) if pid
    [path, log].each { |f| File.unlink(f) if f && File.exist?(f) }
  end

  def test_inherited_socket_of_the_wrong_kind_is_an_error
    path = "/tmp/pp-e2e-#{Process.pid}-dgram.sock"
    log = "/tmp/pp-e2e-#{Process.pid}-dgram.log"
    port = E2E.free_port
    # A datagram socket named listen.0 for an HTTP listener.
    dgram = Socket.new(:INET, :DGRAM)
    dgram.bind(Socket.sockaddr_in(0, "127.0.0.1"))
    pid = Process.spawn(activate_env.merge("LISTEN_FDS" => "1", "LISTEN_FDNAMES" => "listen.0"),
                        "sh", "-c", 'LISTEN_PID=$$ exec "$@"', "sh", E2E::BIN, "-app", E2E::MIX,
                        "-listen", "127.0.0.1:#{port}", "-control", "off",
                        "-gem-dir", File.join(E2E::ROOT, "gem"),
                        3 => dgram, out: log, err: [:child, :out], pgroup: true)
    Timeout.timeout(20) { Process.waitpid(pid) }
    pid = nil
    assert_equal 1, $?.exitstatus, File.read(log)
    assert_match(/inherited fd 3 \(name listen\.0\) for 127\.0\.0\.1:#{port} is not a listening TCP stream socket/,
                 File.read(log))
  ensure
    dgram&.close
    kill_group(pid) if pid
    [path, log].each { |f| File.unlink(f) if f && File.exist?(f) }
  end

  # docs/systemd/: the unit and its socket have the keys docs/SERVER.md relies on, and the
  # server accepts the flags of ExecStart.
  def test_sample_unit_files
    dir = File.join(E2E::ROOT, "docs/systemd")
    service = ini(File.join(dir, "puma-plus.service"))
    socket = ini(File.join(dir, "puma-plus.socket"))
    assert_equal "notify", service.dig("Service", "Type")&.first
    assert_equal "all", service.dig("Service", "NotifyAccess")&.first
    assert_equal ["puma-plus.socket"], service.dig("Unit", "Requires")
    assert_equal "/bin/kill -USR2 $MAINPID", service.dig("Service", "ExecReload")&.first
    refute_nil service.dig("Service", "WatchdogSec")
    exec_start = service.dig("Service", "ExecStart").first.split
    assert_equal "puma-plus-server", File.basename(exec_start.first)
    listens = socket.dig("Socket", "ListenStream")
    names = socket.dig("Socket", "FileDescriptorName")
    assert_equal 2, listens.size
    assert_nil names, "names would apply to every socket of the unit; they are matched by address"
    flags = exec_start[1..]
    listens.each { |addr| assert_includes flags.each_cons(2).to_a.map(&:last), addr, "ExecStart listens on #{addr}" }
    # Every flag of ExecStart parses (-help after them exits 0 only if all before it are valid).
    out, status = Open3.capture2e(E2E::BIN, *flags, "-help")
    assert status.success?, "the server refuses ExecStart's flags:\n#{out}"
  end

  def ini(path)
    assert File.file?(path), "#{path} is missing"
    sections = {}
    current = nil
    File.readlines(path, chomp: true).each do |line|
      next if line.strip.empty? || line.start_with?("#", ";")

      if (m = line.match(/\A\[(\w+)\]\z/))
        current = sections[m[1]] = {}
      else
        key, value = line.split("=", 2)
        refute_nil value, "#{path}: not KEY=VALUE: #{line}"
        (current[key] ||= []) << value
      end
    end
    sections
  end
end
