# frozen_string_literal: true

# Hot restart end to end (docs/SERVER.md "Hot restart"): SIGUSR2 under a loop of many short
# requests (zero refused connections, zero failed requests, the serving server's pid changes,
# the old one exits 0), POST /restart behind the control token, the new binary taken from the
# path the server was started with, and a new server that fails to boot leaving the old one
# serving.
require_relative "helper"

class TestRestart < Minitest::Test
  PID_APP = File.join(E2E::ROOT, "tests/apps/pid/config.ru")

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # One short request on a new connection: [:ok, server_pid] or [:refused] / [:failed, why].
  def one_request(port)
    s = TCPSocket.new("127.0.0.1", port)
  rescue Errno::ECONNREFUSED
    [:refused]
  else
    begin
      s.write("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
      r = E2E::ResponseReader.new(s).next_response
      if r && r[0] == 200 && r[2] =~ /\Aserver=(\d+) worker=\d+\n\z/
        [:ok, Regexp.last_match(1).to_i]
      else
        [:failed, r.inspect]
      end
    rescue StandardError => e
      [:failed, e.class.name]
    ensure
      s.close
    end
  end

  # Clients in a loop until stopped; returns per-outcome counts, the pids in order of first
  # sight and the slowest request.
  class Loop
    attr_reader :counts, :pids, :failures, :slowest

    def initialize(test, port, clients: 4)
      @counts = Hash.new(0)
      @pids = []
      @failures = []
      @slowest = 0
      @lock = Mutex.new
      @stop = false
      @threads = Array.new(clients) do
        Thread.new do
          until @stop
            t0 = test.now
            kind, value = test.one_request(port)
            dt = test.now - t0
            @lock.synchronize do
              @counts[kind] += 1
              @slowest = dt if dt > @slowest
              @pids << value if kind == :ok && !@pids.include?(value)
              @failures << value if kind == :failed
            end
          end
        end
      end
    end

    def stop
      @stop = true
      @threads.each(&:join)
    end
  end

  # The old server is reaped by the test (Process.waitpid); the new one and every worker are
  # in the old one's process group, which is what cleanup kills.
  def reap(srv, pid, flags = 0)
    r = Process.waitpid2(pid, flags)
    srv.instance_variable_set(:@pid, nil) if r
    r&.last
  end

  def kill_group(pgid)
    Process.kill("KILL", -pgid) if pgid
  rescue Errno::ESRCH, Errno::EPERM
    nil
  end

  # Gone, or a zombie its new parent (init, a subreaper) has not reaped yet.
  def exited?(pid)
    Process.kill(0, pid)
    File.read("/proc/#{pid}/stat").split(") ", 2)[1].start_with?("Z")
  rescue Errno::ESRCH, Errno::ENOENT
    true
  end

  def wait_until(what, timeout: 30)
    deadline = now + timeout
    until yield
      flunk "#{what} within #{timeout}s" if now > deadline
      sleep 0.05
    end
  end

  # Datagrams on a NOTIFY_SOCKET this test owns (what systemd would hear).
  def notify_socket(dir)
    path = File.join(dir, "notify.sock")
    sock = Socket.new(:UNIX, :DGRAM)
    sock.bind(Socket.sockaddr_un(path))
    [sock, path]
  end

  def datagrams(sock)
    out = []
    out << sock.recv(4096) while IO.select([sock], nil, nil, 0)
    out
  end

  def test_sigusr2_under_load_refuses_nothing
    dir = Dir.mktmpdir("pp-restart")
    pidfile = File.join(dir, "server.pid")
    nsock, npath = notify_socket(dir)
    srv = E2E::Server.new(app: PID_APP, workers: 2, threads: 2, extra: ["-pidfile", pidfile],
                          env: { "NOTIFY_SOCKET" => npath })
    old = srv.pid
    assert_equal "#{old}\n", File.read(pidfile)
    load = Loop.new(self, srv.port)
    sleep 0.5
    Process.kill("USR2", old)
    # The old server exits after the new one took over and it drained (it is our child).
    status = nil
    wait_until("the old server exiting after the handover") { status = reap(srv, old, Process::WNOHANG) }
    sleep 0.5 # the new server alone
    load.stop
    new_pid = File.read(pidfile).to_i
    log = srv.log
    assert_equal 0, load.counts[:refused], "refused connections (#{load.counts})"
    assert_equal 0, load.counts[:failed], "failed requests: #{load.failures.first(5)}"
    assert_operator load.counts[:ok], :>, 100, "the loop ran (#{load.counts})"
    assert_equal [old, new_pid], load.pids, "requests were served by the old server, then the new one"
    refute_equal old, new_pid
    assert status.success?, "the old server's exit status #{status.inspect}"
    assert_match(/hot restart: started .* as pid #{new_pid} with 2 listeners \(listen\.0:control\)/, log)
    assert_match(/hot restart: pid #{new_pid} took over; draining and exiting/, log)
    assert_match(/HTTP will listen on 127\.0\.0\.1 \(port #{srv.port}, inherited fd 3\)/, log)
    # The new server holds the control app too.
    st = srv.stats
    assert_equal 2, st["booted_workers"]
    puts "\n  hot restart under load: #{load.counts[:ok]} requests, 0 refused, 0 failed, " \
         "slowest #{(load.slowest * 1000).round(1)} ms"
    Process.kill("TERM", new_pid)
    wait_until("the new server exiting on SIGTERM") { exited?(new_pid) }
    refute File.exist?(pidfile), "the new server removes its pid file at exit"
    # What systemd heard: READY=1 (old), RELOADING=1, MAINPID=new + READY=1 (sent by the old
    # one at the handover), and STOPPING=1 only from the new one at its SIGTERM.
    msgs = datagrams(nsock)
    kinds = msgs.map { |m| m[/\A[A-Z]+=\S*/] }.reject { |k| k.start_with?("STATUS=") }
    assert_equal ["READY=1", "RELOADING=1", "MAINPID=#{new_pid}", "STOPPING=1"], kinds, msgs.inspect
    assert_match(/\AMAINPID=#{new_pid}\nREADY=1\nSTATUS=hot restart: pid #{new_pid} serving\z/,
                 msgs.find { |m| m.start_with?("MAINPID=") })
  ensure
    load&.stop
    srv&.stop
    kill_group(old)
    nsock&.close
    FileUtils.rm_rf(dir) if dir
  end

  def control(srv, method, path, token: nil)
    auth = token ? "Authorization: Bearer #{token}\r\n" : ""
    r = E2E.raw(srv.control_port, "#{method} #{path} HTTP/1.1\r\nHost: a\r\n#{auth}Content-Length: 0\r\n" \
                                  "Connection: close\r\n\r\n").first
    [r[0], r[0].between?(200, 499) && r[1]["content-type"] == "application/json" ? JSON.parse(r[2]) : r[2]]
  end

  # Also: every kind of listener moves (a unix socket, whose path the old server must not
  # unlink, and HTTPS with the development certificate).
  def test_post_restart_and_stop_behind_the_token
    sock = "/tmp/pp-e2e-#{Process.pid}-restart.sock"
    srv = E2E::Server.new(app: PID_APP, workers: 1, threads: 2, token: "t0k", tls: true,
                          extra: ["-listen", "unix:#{sock}"])
    old = srv.pid
    assert_equal 401, control(srv, "POST", "/restart")[0]
    assert_equal 405, control(srv, "GET", "/restart", token: "t0k")[0]
    status, body = control(srv, "POST", "/restart", token: "t0k")
    assert_equal 202, status, body.inspect
    assert_equal "ok", body["status"]
    assert_equal old, body["old_pid"]
    new_pid = body["new_pid"]
    refute_equal old, new_pid
    assert reap(srv, old).success?
    assert_match(/with 4 listeners \(listen-tls\.0:listen\.0:listen\.1:control\)/, srv.log)
    _, served = one_request(srv.port)
    assert_equal new_pid, served
    assert File.socket?(sock), "the old server left the unix listener's path"
    u = UNIXSocket.new(sock)
    u.write("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    assert_match(/\Aserver=#{new_pid} /, E2E::ResponseReader.new(u).next_response[2])
    u.close
    out, err, = E2E.curl("-k", "https://127.0.0.1:#{srv.https_port}/")
    assert_match(/\Aserver=#{new_pid} /, out, err)
    status, body = control(srv, "POST", "/stop", token: "t0k")
    assert_equal [202, "stop", new_pid], [status, body["action"], body["pid"]]
    wait_until("the new server exiting after POST /stop") { exited?(new_pid) }
    refute File.exist?(sock), "the last server removes its unix listener"
  ensure
    srv&.stop
    kill_group(old)
    File.unlink(sock) if sock && File.exist?(sock)
  end

  # The new server is the file at the path the old one was started with, read again at the
  # restart: a file that fails leaves the old server serving; a new one takes over.
  def test_new_binary_from_the_start_path_and_a_failed_restart
    dir = Dir.mktmpdir("pp-restart-bin")
    bin = File.join(dir, "puma-plus-server")
    FileUtils.cp(E2E::BIN, bin)
    srv = E2E::Server.new(app: PID_APP, workers: 1, threads: 2, command: lambda { |port, cport|
      [bin, "-app", PID_APP, "-workers", "1", "-threads", "2", "-listen", "127.0.0.1:#{port}",
       "-control", "127.0.0.1:#{cport}", "-gem-dir", File.join(E2E::ROOT, "gem")]
    })
    old = srv.pid
    replace(bin, "#!/bin/sh\nsleep 1\nexit 3\n")
    status, body = control(srv, "POST", "/restart")
    assert_equal 202, status, body.inspect
    # A second one while the first is under way is refused.
    status, body = control(srv, "POST", "/restart")
    assert_equal 409, status, body.inspect
    assert_match(/already in progress \(new pid #{body['new_pid'] || '\d+'}\)/, body["error"])
    wait_until("the failed restart logged") { srv.log.include?("hot restart failed") }
    assert_equal [:ok, old], one_request(srv.port), "the old server keeps serving"
    assert_nil Process.waitpid(old, Process::WNOHANG)
    marker = File.join(dir, "started")
    replace(bin, "#!/bin/sh\necho \"$@\" > #{marker}\nexec #{E2E::BIN} \"$@\"\n")
    load = Loop.new(self, srv.port, clients: 2)
    Process.kill("USR2", old)
    assert reap(srv, old).success?
    load.stop
    assert_equal 0, load.counts[:refused] + load.counts[:failed], load.counts.inspect
    assert_equal old, load.pids.first
    new_pid = load.pids.last
    refute_equal old, new_pid
    assert_equal "-app #{PID_APP} -workers 1 -threads 2 -listen 127.0.0.1:#{srv.port} -control " \
                 "127.0.0.1:#{srv.control_port} -gem-dir #{File.join(E2E::ROOT, 'gem')}\n",
                 File.read(marker), "the new server got the same arguments"
    assert_equal [:ok, new_pid], one_request(srv.port)
  ensure
    load&.stop
    srv&.stop
    kill_group(old)
    FileUtils.rm_rf(dir) if dir
  end

  # SIGTERM while a new server boots: stopping wins, the new server is stopped too (else it
  # would take over the sockets after the old one left).
  def test_sigterm_during_a_restart_stops_the_new_server_too
    dir = Dir.mktmpdir("pp-restart-term")
    bin = File.join(dir, "puma-plus-server")
    FileUtils.cp(E2E::BIN, bin)
    srv = E2E::Server.new(app: PID_APP, workers: 1, threads: 2, command: lambda { |port, cport|
      [bin, "-app", PID_APP, "-workers", "1", "-threads", "2", "-listen", "127.0.0.1:#{port}",
       "-control", "127.0.0.1:#{cport}", "-gem-dir", File.join(E2E::ROOT, "gem")]
    })
    old = srv.pid
    replace(bin, "#!/bin/sh\nsleep 0.5\nexec #{E2E::BIN} \"$@\"\n")
    Process.kill("USR2", old)
    wait_until("the restart started") { srv.log =~ /hot restart: started .* as pid (\d+)/ }
    child = srv.log[/hot restart: started .* as pid (\d+)/, 1].to_i
    Process.kill("TERM", old)
    assert reap(srv, old).success?
    assert_match(/hot restart abandoned: stopping the new server \(pid #{child}\) too/, srv.log)
    wait_until("the new server gone (#{`ps -o pid,ppid,stat,args -p #{child} 2>&1`.strip})\n#{srv.log}") { exited?(child) }
    # Nothing took the sockets over (the wrapper's `sleep` may hold them for its last moments).
    wait_until("the port refusing connections", timeout: 5) do
      TCPSocket.new("127.0.0.1", srv.port).close
      false
    rescue Errno::ECONNREFUSED
      true
    end
  ensure
    srv&.stop
    kill_group(old)
    FileUtils.rm_rf(dir) if dir
  end

  # A running executable cannot be written (ETXTBSY): a new file takes the name instead.
  def replace(path, text)
    File.write("#{path}.new", text)
    File.chmod(0o755, "#{path}.new")
    File.rename("#{path}.new", path)
  end
end
