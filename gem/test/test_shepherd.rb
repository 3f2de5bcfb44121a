# frozen_string_literal: true

require_relative "test_helper"
require "tmpdir"

# The shepherd as a real process (exe/puma-plus-shepherd), with the test as the server: a
# socketpair end as its fd 3 and a UNIXServer for the workers' connections.
class TestShepherd < Minitest::Test
  W = PumaPlus::Wire
  EXE = File.expand_path("../exe/puma-plus-shepherd", __dir__)

  APP = <<~RUBY
    run(lambda do |env|
      case env["PATH_INFO"]
      when %r{\\A/sleep/(\\d+)\\z} then sleep(Integer($1) / 1000.0)
      when %r{\\A/stubborn/(\\d+)\\z}
        ms = Integer($1)
        begin
          sleep(ms / 1000.0)
        rescue PumaPlus::RequestTimeout
          sleep(ms / 1000.0)
          return [200, { "content-type" => "text/plain" }, ["stubborn"]]
        end
      end
      [200, { "content-type" => "text/plain" }, ["pid=\#{Process.pid}"]]
    end)
  RUBY

  def setup
    @dir = Dir.mktmpdir("pp-shepherd")
    File.write(File.join(@dir, "config.ru"), APP)
    @socket_path = File.join(@dir, "workers.sock")
    @listener = UNIXServer.new(@socket_path)
    @control, child_end = UNIXSocket.pair
    @pid = nil
    @child_end = child_end
    @worker_pids = []
    @monitors = []
  end

  def teardown
    @control.close unless @control.closed?
    if @pid
      begin
        Timeout.timeout(10) { Process.wait(@pid) }
      rescue Timeout::Error
        Process.kill("KILL", @pid)
        Process.wait(@pid)
      rescue Errno::ECHILD
        nil
      end
    end
    @worker_pids.each do |pid|
      Process.kill("KILL", pid)
    rescue Errno::ESRCH
      nil
    end
    @listener.close
    FileUtils.rm_rf(@dir)
  end

  def start(workers:, threads:, env: {}, extra: [])
    @stderr_path = File.join(@dir, "stderr.log")
    @pid = Process.spawn(env, RbConfig.ruby, EXE, "--app", File.join(@dir, "config.ru"),
                         "--threads", threads.to_s, "--socket", @socket_path, "--workers", workers.to_s,
                         *extra, 3 => @child_end, err: @stderr_path, out: File::NULL)
    @child_end.close
    ready = control_frame
    assert_instance_of W::Ready, ready, stderr
    assert_equal @pid, ready.pid
    assert_operator ready.boot_ns, :>, 0
  end

  def stderr = File.exist?(@stderr_path.to_s) ? File.read(@stderr_path) : ""

  def control_frame(timeout: 10) = FakeServer.read_frame(@control, timeout: timeout)

  def send_control(frame) = @control.write(W.encode(frame))

  # Accepts `n` worker connections; returns [[sock, hello], ...]. Monitor connections (one
  # per worker process, HEARTBEAT first) that arrive meanwhile go to @monitors as
  # [sock, heartbeat].
  def accept(n)
    conns = []
    while conns.size < n
      raise Timeout::Error, "no worker connection\n#{stderr}" unless IO.select([@listener], nil, nil, 10)

      sock = @listener.accept
      first = FakeServer.read_frame(sock)
      if first.is_a?(W::Heartbeat)
        @monitors << [sock, first]
        next
      end
      assert_instance_of W::Hello, first
      conns << [sock, first]
    end
    conns
  end

  # The monitor connection of worker `pid` (accepting connections until it is there).
  def monitor_of(pid)
    loop do
      found = @monitors.find { |_, hb| hb.pid == pid }
      return found[0] if found

      raise Timeout::Error, "no monitor connection from #{pid}\n#{stderr}" unless IO.select([@listener], nil, nil, 10)

      sock = @listener.accept
      first = FakeServer.read_frame(sock)
      assert_instance_of W::Heartbeat, first, "only the monitor connection is left to dial in"
      @monitors << [sock, first]
    end
  end

  def forked(n)
    Array.new(n) do
      f = control_frame
      assert_instance_of W::Forked, f, stderr
      @worker_pids << f.pid
      f
    end
  end

  # A zombie (exited, not yet reaped by whoever inherited it) counts as gone.
  def alive?(pid)
    Process.kill(0, pid)
    !File.read("/proc/#{pid}/stat").split(") ", 2)[1].start_with?("Z")
  rescue Errno::ESRCH, Errno::ENOENT
    false
  end

  def wait_gone(pids, timeout: 10)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    sleep 0.02 while pids.any? { |p| alive?(p) } && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    pids.reject { |p| alive?(p) }
  end

  def test_lifecycle_spawn_retire_index_reuse_kill_and_stop
    start(workers: 2, threads: 2)
    f = forked(2)
    assert_equal [0, 1], f.map(&:worker_index)
    conns = accept(4)
    by_pid = conns.group_by { |_, h| h.pid }
    assert_equal f.map(&:pid).sort, by_pid.keys.sort
    conns.each { |_, h| assert_equal W::CAP_CPU_TIME, h.capabilities }
    f.each do |fk|
      hellos = by_pid[fk.pid].map(&:last)
      assert_equal [fk.worker_index] * 2, hellos.map(&:worker_index)
      assert_equal [0, 1], hellos.map(&:thread_index).sort
    end

    # A request through one of the connections.
    sock = conns[0][0]
    sock.write(FakeServer.request(1, "GET", "/"))
    res = FakeServer.read_response(sock, 1)
    assert_equal 200, res[:head].status
    assert_equal "pid=#{conns[0][1].pid}", res[:body]

    # SPAWN 1 → index 2.
    send_control(W::Spawn.new(1))
    f2 = forked(1)[0]
    assert_equal 2, f2.worker_index
    accept(2)

    # RETIRE worker 0: its idle connections close, it exits 0, index 0 becomes free.
    retired = f.find { |x| x.worker_index.zero? }
    send_control(W::Retire.new(retired.pid))
    by_pid[retired.pid].each { |s, _| assert_equal :eof, FakeServer.read_frame(s) }
    ex = control_frame
    assert_equal W::Exited.new(retired.pid, 0), ex
    send_control(W::Spawn.new(1))
    assert_equal 0, forked(1)[0].worker_index, "the lowest free index is reused"
    accept(2)

    # A worker killed with SIGKILL is reported as -9.
    Process.kill("KILL", f2.pid)
    assert_equal W::Exited.new(f2.pid, -9), control_frame

    # STOP: every worker exits, each reported, then the shepherd exits 0.
    live = @worker_pids - [retired.pid, f2.pid]
    send_control(W::Stop.new(2000))
    exited = Array.new(live.size) { control_frame }
    assert_equal live.sort, exited.map(&:pid).sort
    assert(exited.all? { |e| e.status.zero? })
    _, st = Process.wait2(@pid)
    @pid = nil
    assert_equal 0, st.exitstatus
    assert_equal live.sort, wait_gone(live).sort
  end

  def test_retire_finishes_the_in_flight_request
    start(workers: 1, threads: 2)
    pid = forked(1)[0].pid
    conns = accept(2)
    busy = conns[0][0]
    busy.write(FakeServer.request(7, "GET", "/sleep/300"))
    sleep 0.05
    send_control(W::Retire.new(pid))
    assert_equal :eof, FakeServer.read_frame(conns[1][0]), "the idle connection closes at once"
    res = FakeServer.read_response(busy, 7)
    assert_equal 200, res[:head].status
    assert_equal "pid=#{pid}", res[:body]
    assert_equal :eof, FakeServer.read_frame(busy)
    assert_equal W::Exited.new(pid, 0), control_frame
  end

  def test_worker_exits_when_the_server_closes_its_connections
    start(workers: 1, threads: 2)
    pid = forked(1)[0].pid
    accept(2).each { |sock, _| sock.close }
    assert_equal W::Exited.new(pid, 0), control_frame
    send_control(W::Stop.new(1000))
  end

  def test_threads_of_a_worker_serve_concurrently
    start(workers: 1, threads: 3)
    forked(1)
    conns = accept(3).map(&:first)
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    conns.each_with_index { |c, i| c.write(FakeServer.request(i + 1, "GET", "/sleep/300")) }
    conns.each_with_index { |c, i| assert_equal 200, FakeServer.read_response(c, i + 1)[:head].status }
    elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    assert_operator elapsed, :<, 0.8, "three 300 ms sleeps on three threads overlap"
    send_control(W::Stop.new(1000))
  end

  def test_stop_kills_workers_that_outlive_the_grace
    start(workers: 1, threads: 1)
    pid = forked(1)[0].pid
    sock, = accept(1)[0]
    sock.write(FakeServer.request(1, "GET", "/sleep/5000"))
    sleep 0.1
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    send_control(W::Stop.new(200))
    assert_equal W::Exited.new(pid, -9), control_frame
    Process.wait(@pid)
    @pid = nil
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0, :<, 3
  end

  def test_control_channel_closing_takes_workers_down
    start(workers: 2, threads: 1)
    pids = forked(2).map(&:pid)
    accept(2)
    shepherd = @pid
    @control.close
    Timeout.timeout(10) { Process.wait(shepherd) }
    @pid = nil
    assert_equal pids.sort, wait_gone(pids).sort, "no worker outlives the shepherd's server"
  end

  # Since shepherd supervision (docs/PROTOCOL.md "Shepherd restart") a worker outlives its
  # shepherd: it keeps serving, and exits once the server closes its connections.
  def test_workers_serve_on_when_the_shepherd_is_killed
    start(workers: 1, threads: 1)
    pid = forked(1)[0].pid
    sock, = accept(1)[0]
    monitor = monitor_of(pid)
    Process.kill("KILL", @pid)
    Process.wait(@pid)
    @pid = nil
    sleep 0.3
    assert alive?(pid), "the worker serves on without its shepherd"
    sock.write(FakeServer.request(3, "GET", "/hello"))
    assert_equal "pid=#{pid}", FakeServer.read_response(sock, 3)[:body]
    sock.close
    monitor.close
    assert_equal [pid], wait_gone([pid]), "the worker exits when the server closes its connections"
  end

  # The monitor connection: HEARTBEAT first, then one every HEARTBEAT_INTERVAL; TIMEOUT
  # raises PumaPlus::RequestTimeout in the thread running that request, which answers at
  # once (500, discarded by the real server) and takes the next request.
  def test_monitor_heartbeats_and_timeout_interrupts_the_request
    start(workers: 1, threads: 2)
    pid = forked(1)[0].pid
    conns = accept(2)
    monitor = monitor_of(pid)
    monitor.write(W.encode(W::HeartbeatInterval.new(100, W::MONITOR_REQUEST_TIMEOUTS)))
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    beats = Array.new(5) { FakeServer.read_frame(monitor, timeout: 2) }
    assert(beats.all? { |b| b.pid == pid && b.worker_index.zero? }, beats.inspect)
    # each beat carries the worker's live heap slots (GC.stat), a real count
    assert(beats.all? { |b| b.heap_live_slots > 1000 }, beats.inspect)
    assert_in_delta 0.5, Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0, 0.3, "every 100 ms"

    busy, hello = conns[0]
    busy.write(FakeServer.request(9, "GET", "/sleep/10000"))
    sleep 0.2
    t1 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    monitor.write(W.encode(W::Timeout.new(8, hello.thread_index))) # not running: ignored
    monitor.write(W.encode(W::Timeout.new(9, hello.thread_index)))
    res = FakeServer.read_response(busy, 9)
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - t1, :<, 1.0, "interrupted, not slept out"
    assert_equal 500, res[:head].status
    assert_match(/request 9 ran past the server's request timeout/, stderr)
    # The thread is free: the next request on that connection is served normally.
    busy.write(FakeServer.request(10, "GET", "/hello"))
    assert_equal "pid=#{pid}", FakeServer.read_response(busy, 10)[:body]

    # An app that rescues the interrupt keeps the thread (the server kills such a worker
    # after its grace); the other thread still serves meanwhile. The answer it gives in the
    # end is not written (the server answered the client already): RESPONSE_END alone.
    t2 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    busy.write(FakeServer.request(11, "GET", "/stubborn/600"))
    sleep 0.1
    monitor.write(W.encode(W::Timeout.new(11, hello.thread_index)))
    other, = conns[1]
    other.write(FakeServer.request(12, "GET", "/hello"))
    assert_equal 200, FakeServer.read_response(other, 12)[:head].status
    res = FakeServer.read_response(busy, 11)
    assert_nil res[:head], stderr
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - t2, :>, 0.65, "it slept on after the interrupt"
    busy.write(FakeServer.request(13, "GET", "/hello"))
    assert_equal "pid=#{pid}", FakeServer.read_response(busy, 13)[:body]
    send_control(W::Stop.new(1000))
  end

  # Run-time slots (docs/PROTOCOL.md "SLOTS, SLOT_CLOSE"): SLOTS on the monitor connection
  # starts the missing slots, each a new connection with the lowest free thread_index;
  # SLOT_CLOSE ends that slot (EOF, never dialled again) while the others serve on, also one
  # whose request was running when the target went down; SLOTS at or below the live count
  # starts nothing.
  def test_slots_grow_and_slot_close_ends_one
    start(workers: 1, threads: 2)
    pid = forked(1)[0].pid
    conns = accept(2)
    assert_equal [0, 1], conns.map { |_, h| h.thread_index }.sort
    monitor = monitor_of(pid)
    monitor.write(W.encode(W::Slots.new(5)))
    grown = accept(3)
    assert_equal [2, 3, 4], grown.map { |_, h| h.thread_index }.sort
    assert(grown.all? { |_, h| h.pid == pid })
    all = conns + grown
    # five slots serve five sleeping requests at once
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    all.each_with_index { |(sock, _), i| sock.write(FakeServer.request(100 + i, "GET", "/sleep/300")) }
    all.each_with_index { |(sock, _), i| assert_equal 200, FakeServer.read_response(sock, 100 + i)[:head].status }
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0, :<, 0.9, "concurrently, not one after another"

    # end slots 1 and 3: their connections close; the others still serve
    by_index = all.to_h { |sock, h| [h.thread_index, sock] }
    [1, 3].each { |i| by_index[i].write(W.encode(W::SlotClose.new(i))) }
    [1, 3].each { |i| assert_equal :eof, FakeServer.read_frame(by_index[i]), stderr }
    [0, 2, 4].each do |i|
      by_index[i].write(FakeServer.request(200 + i, "GET", "/hello"))
      assert_equal "pid=#{pid}", FakeServer.read_response(by_index[i], 200 + i)[:body]
    end
    # SLOTS 3 with three live slots: nothing is dialled
    monitor.write(W.encode(W::Slots.new(3)))
    assert_nil IO.select([@listener], nil, nil, 0.3), "no new connection for a target already met"
    # SLOTS 4: one more, taking the lowest free index (1)
    monitor.write(W.encode(W::Slots.new(4)))
    (sock1, hello1), = accept(1)
    assert_equal 1, hello1.thread_index
    sock1.write(FakeServer.request(300, "GET", "/hello"))
    assert_equal 200, FakeServer.read_response(sock1, 300)[:head].status
    # SLOT_CLOSE right after a RESPONSE_END (as the server sends it to a slot whose request ran
    # while the target went down): the slot ends, the worker keeps its other slots.
    by_index[4].write(FakeServer.request(301, "GET", "/sleep/200"))
    assert_equal 200, FakeServer.read_response(by_index[4], 301)[:head].status
    by_index[4].write(W.encode(W::SlotClose.new(4)))
    assert_equal :eof, FakeServer.read_frame(by_index[4])
    assert alive?(pid)
    send_control(W::Stop.new(1000))
  end

  # --fibers needs the async gem in the app's environment; without it the shepherd says so at
  # boot and exits (no silent fallback to threads). The async gem is hidden here by an
  # `async.rb` first on the load path that fails as a missing gem does, so the test does not
  # depend on what this Ruby has installed; tests/e2e/test_slots.rb runs fiber slots with the
  # pinned async.
  def test_fibers_without_the_async_gem_fail_at_boot
    hide = File.join(@dir, "hide")
    FileUtils.mkdir_p(hide)
    File.write(File.join(hide, "async.rb"), "raise LoadError, 'cannot load such file -- async'\n")
    @stderr_path = File.join(@dir, "stderr.log")
    @pid = Process.spawn({ "RUBYLIB" => hide }, RbConfig.ruby, EXE, "--app", File.join(@dir, "config.ru"),
                         "--threads", "4", "--socket", @socket_path, "--workers", "1", "--fibers",
                         3 => @child_end, err: @stderr_path, out: File::NULL)
    @child_end.close
    _, status = Process.wait2(@pid)
    @pid = nil
    assert_equal 1, status.exitstatus
    assert_match(/fiber slots \(-fibers\) need the async gem/, stderr)
  end

  # --fibers with an app whose ActiveSupport isolation level is :thread: the shepherd warns at
  # boot (the app here stands in for Rails with a stub of that one method; async is stubbed
  # as present, so no worker is asked for).
  def test_fibers_warn_about_thread_isolation
    stub = File.join(@dir, "stub")
    FileUtils.mkdir_p(stub)
    File.write(File.join(stub, "async.rb"), "# stub: present\n")
    File.write(File.join(@dir, "config.ru"), <<~RUBY)
      module ActiveSupport
        class IsolatedExecutionState
          def self.isolation_level = :thread
        end
      end
      run ->(env) { [200, {}, ["ok"]] }
    RUBY
    start(workers: 0, threads: 4, env: { "RUBYLIB" => stub }, extra: ["--fibers"])
    assert_match(/warning: fiber slots with ActiveSupport's isolation_level :thread/, stderr)
    send_control(W::Stop.new(1000))
  end

  # The monitor connection's EOF means the server is gone: the worker stops (its idle threads
  # close their connections) although its request connections are still open.
  def test_monitor_eof_stops_the_worker
    start(workers: 1, threads: 2)
    pid = forked(1)[0].pid
    conns = accept(2)
    monitor_of(pid).close
    conns.each { |sock, _| assert_equal :eof, FakeServer.read_frame(sock) }
    assert_equal W::Exited.new(pid, 0), control_frame
    send_control(W::Stop.new(1000))
  end

  # A restarted shepherd: ADOPT keeps an index taken, RETIRE of an adopted pid sends it
  # SIGTERM, ADOPTED_EXITED frees the index again.
  def test_adopted_workers_keep_their_index
    start(workers: 0, threads: 1)
    stranger = Process.spawn("sleep", "30")
    @worker_pids << stranger
    send_control(W::Adopt.new(stranger, 0))
    send_control(W::Spawn.new(1))
    first = forked(1)[0]
    assert_equal 1, first.worker_index, "index 0 belongs to the adopted worker"
    send_control(W::Retire.new(stranger))
    _, st = Timeout.timeout(5) { Process.wait2(stranger) }
    assert_equal "TERM", Signal.signame(st.termsig), "RETIRE of an adopted worker: SIGTERM"
    send_control(W::AdoptedExited.new(stranger, -15))
    send_control(W::Spawn.new(1))
    assert_equal 0, forked(1)[0].worker_index, "its index is free again"
    send_control(W::Stop.new(1000))
  end

  def test_hooks_from_config_run_in_shepherd_and_worker
    marks = File.join(@dir, "marks")
    cfg = File.join(@dir, "puma-plus.rb")
    File.write(cfg, <<~RUBY)
      workers 2
      def mark(text) = File.open(#{marks.inspect}, "a") { |f| f.puts "\#{text} \#{Process.pid}" }
      before_fork { mark("before_fork") }
      on_worker_boot { |i| mark("boot \#{i}") }
      on_worker_fork { |i| mark("before_worker_fork \#{i}") }
      after_worker_fork { |i| mark("after_worker_fork \#{i}") }
      on_worker_shutdown { |i| mark("worker_shutdown \#{i}") }
      after_worker_shutdown { |i, st| mark("after_worker_shutdown \#{i} \#{st.exitstatus}") }
      on_booted { mark("booted") }
      on_stopped { mark("stopped") }
      on_thread_start { mark("thread_start") }
      on_thread_exit { mark("thread_exit") }
    RUBY
    start(workers: 2, threads: 1, env: { "PUMA_PLUS_CONFIG" => cfg })
    f = forked(2)
    accept(2)
    # The shepherd runs after_worker_fork and on_booted after it sent FORKED, so a worker can
    # connect before they wrote their marks: wait (5 s at most) for every mark, then check.
    want = ["before_fork #{@pid}", "booted #{@pid}"]
    f.each do |x|
      want += ["boot #{x.worker_index} #{x.pid}", "before_worker_fork #{x.worker_index} #{@pid}",
               "after_worker_fork #{x.worker_index} #{@pid}", "thread_start #{x.pid}"]
    end
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5
    lines = []
    loop do
      lines = File.readlines(marks, chomp: true)
      break if (want - lines).empty? || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.02
    end
    want.each { |w| assert_includes lines, w }
    send_control(W::Stop.new(1000))
    assert_equal 2, Array.new(2) { control_frame }.count { |fr| fr.is_a?(W::Exited) }
    Timeout.timeout(5) { sleep 0.02 until File.read(marks).include?("stopped") }
    lines = File.readlines(marks, chomp: true)
    f.each do |x|
      assert_includes lines, "worker_shutdown #{x.worker_index} #{x.pid}"
      assert_includes lines, "thread_exit #{x.pid}"
      assert_includes lines, "after_worker_shutdown #{x.worker_index} 0 #{@pid}"
    end
    assert_includes lines, "stopped #{@pid}"
  end

  def test_bad_app_exits_non_zero_with_a_message
    File.write(File.join(@dir, "config.ru"), "raise 'broken app'\n")
    pid = Process.spawn(RbConfig.ruby, EXE, "--app", File.join(@dir, "config.ru"), "--threads", "1",
                        "--socket", @socket_path, "--workers", "1", 3 => @child_end,
                        err: (log = File.join(@dir, "err")))
    @child_end.close
    _, st = Process.wait2(pid)
    assert_equal 1, st.exitstatus
    assert_match(/cannot load .*config\.ru: RuntimeError: broken app/, File.read(log))
    assert_equal :eof, control_frame
  end

  def test_usage_errors
    out = IO.popen([RbConfig.ruby, EXE, "--app", "x.ru", err: [:child, :out]], &:read)
    assert_equal 2, $?.exitstatus
    assert_match(/missing argument: --threads, --socket, --workers/, out)
  end

  # Standby workers (docs/CONTROL.md section 8): --standby 1 forks one parked worker after the
  # initial ones, reported with PARKED and not FORKED; it runs on_worker_boot but does not dial
  # in until ACTIVATE; then it serves like any worker; STANDBY forks a replacement in the
  # background; RETIRE of a parked pid ends it at once (EXITED); STOP takes parked ones too.
  def test_standby_parks_until_activate
    config = File.join(@dir, "puma-plus.rb")
    booted = File.join(@dir, "booted")
    File.write(config, "on_worker_boot { |i| File.write(#{booted.dump} + i.to_s, Process.pid.to_s) }\n")
    start(workers: 1, threads: 2, env: { "PUMA_PLUS_CONFIG" => config }, extra: ["--standby", "1"])
    f = forked(1)
    accept(2)
    parked = control_frame
    assert_instance_of W::Parked, parked, stderr
    @worker_pids << parked.pid
    assert_equal 1, parked.worker_index, "the standby takes the next free index"
    assert_operator parked.boot_ns, :>, 0
    assert_equal parked.pid.to_s, File.read("#{booted}1"), "on_worker_boot ran before PARKED"
    # The serving worker's monitor connection may come after its HELLOs: take it first, so that
    # anything else connecting now is the parked worker's doing.
    monitor_of(f[0].pid)
    refute IO.select([@listener], nil, nil, 0.5), "a parked worker must not dial in"

    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    send_control(W::Activate.new(parked.pid))
    conns = accept(2)
    activation_ms = (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0) * 1000
    assert_equal [parked.pid] * 2, conns.map { |_, h| h.pid }
    assert_equal [1, 1], conns.map { |_, h| h.worker_index }
    assert_operator activation_ms, :<, 500, "ACTIVATE to both HELLOs took #{activation_ms.round(1)} ms"
    conns[0][0].write(FakeServer.request(3, "GET", "/"))
    assert_equal 200, FakeServer.read_response(conns[0][0], 3)[:head].status
    monitor_of(parked.pid) # the activated worker's monitor connection, before the checks below

    # A replacement, then RETIRE of a parked one: it exits at once, never having connected.
    send_control(W::Standby.new(1))
    again = control_frame
    assert_instance_of W::Parked, again, stderr
    @worker_pids << again.pid
    assert_equal 2, again.worker_index
    send_control(W::Retire.new(again.pid))
    ex = control_frame
    assert_instance_of W::Exited, ex
    assert_equal again.pid, ex.pid
    refute IO.select([@listener], nil, nil, 0.2), "the retired standby never connected"

    # ACTIVATE of a pid that is not parked is logged and ignored.
    send_control(W::Activate.new(f[0].pid))
    send_control(W::Standby.new(1))
    third = control_frame
    assert_instance_of W::Parked, third
    @worker_pids << third.pid
    assert_match(/ACTIVATE #{f[0].pid}: not a parked standby/, stderr)

    send_control(W::Stop.new(2000))
    exits = Array.new(3) { control_frame }
    assert(exits.all? { |e| e.is_a?(W::Exited) }, exits.inspect)
    assert_equal [f[0].pid, parked.pid, third.pid].sort, exits.map(&:pid).sort
    Process.wait(@pid)
    assert_equal 0, $?.exitstatus
    @pid = nil
  end

  def test_standby_frames_need_the_flag
    start(workers: 0, threads: 1)
    send_control(W::Standby.new(1))
    Process.wait(@pid)
    refute_equal 0, $?.exitstatus
    @pid = nil
    assert_match(/STANDBY frame on the control channel/, stderr)
  end

  def test_standby_flag_is_validated
    out, err, st = Open3.capture3(RbConfig.ruby, EXE, "--app", "x", "--threads", "1", "--socket", "s",
                                  "--workers", "0", "--standby", "-1")
    refute st.success?, out
    assert_match(/--standby must be >= 0/, err)
  end
end
