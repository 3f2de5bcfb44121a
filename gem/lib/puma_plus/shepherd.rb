# frozen_string_literal: true

require "optparse"
require "socket"
require_relative "wire"
require_relative "worker"
require_relative "action_cable"
require_relative "config"
require_relative "proc_title"
require_relative "app_hooks"
require_relative "ractor_slots"

module PumaPlus
  # The shepherd (docs/PROTOCOL.md, "Processes and command line"): started by
  # puma-plus-server with the control channel on fd 3. It loads config.ru once, says READY,
  # forks the initial workers, then obeys SPAWN / RETIRE / STOP and reports FORKED / EXITED
  # for every worker it forks and reaps. When the control channel closes (the server died) it
  # stops every worker and exits, so no worker is left behind.
  #
  # Single-threaded: one IO.select loop over the control channel and a self-pipe that the
  # SIGCHLD / SIGTERM traps write to. Forking happens only from this thread.
  #
  # Standby workers (docs/CONTROL.md section 8, only with `--standby K`): forked from the
  # preloaded app like any worker, they run on_worker_boot and then park, blocked on a
  # socketpair to the shepherd before any thread dials the server. The shepherd reports PARKED
  # when the child says it has booted, and ACTIVATE writes the one byte that wakes it; its
  # threads then dial in and HELLO as any worker's do. STANDBY forks are queued and made one
  # per loop turn, so a frame that arrives meanwhile (an ACTIVATE) waits for at most one fork.
  class Shepherd
    USAGE = "usage: puma-plus-shepherd --app CONFIG_RU --threads N --socket PATH --workers N [--standby K] [--fibers]"
    # Grace for workers when the server vanished or the shepherd itself got SIGTERM.
    ORPHAN_GRACE_MS = 5_000
    TERM_GRACE_MS = 30_000

    # A parked (or parking) standby worker: the shepherd's end of its socketpair, its index,
    # when it was forked, and whether it has said it booted.
    Standby = Struct.new(:pid, :sock, :index, :forked_ns, :parked)

    # The byte a standby child writes once booted, and the one that wakes it.
    PARKED_BYTE = "p"
    WAKE_BYTE = "a"

    Options = Struct.new(:app, :threads, :socket, :workers, :control_fd, :config, :standby, :fibers)

    def self.parse(argv)
      opts = Options.new(nil, nil, nil, nil, 3, ENV.fetch("PUMA_PLUS_CONFIG", nil), nil)
      OptionParser.new do |o|
        o.banner = USAGE
        o.on("--app PATH", String) { |v| opts.app = v }
        o.on("--threads N", Integer) { |v| opts.threads = v }
        o.on("--socket PATH", String) { |v| opts.socket = v }
        o.on("--workers N", Integer) { |v| opts.workers = v }
        o.on("--standby K", Integer, "keep K standby workers parked; enables STANDBY/ACTIVATE") { |v| opts.standby = v }
        o.on("--control-fd FD", Integer, "control channel fd (default 3)") { |v| opts.control_fd = v }
        o.on("--fibers", "the --threads slots are fibers on one thread per worker (the async gem)") { opts.fibers = true }
      end.parse!(argv)
      missing = %i[app threads socket workers].select { |k| opts[k].nil? }
      raise OptionParser::MissingArgument, missing.map { |k| "--#{k}" }.join(", ") unless missing.empty?
      raise OptionParser::InvalidArgument, "--threads must be >= 1" if opts.threads < 1
      raise OptionParser::InvalidArgument, "--workers must be >= 0" if opts.workers.negative?
      raise OptionParser::InvalidArgument, "--standby must be >= 0" if opts.standby&.negative?
      raise OptionParser::InvalidArgument, "extra arguments: #{argv.join(' ')}" unless argv.empty?

      opts
    end

    def self.main(argv)
      opts = parse(argv.dup)
      exit(new(opts).run)
    rescue OptionParser::ParseError => e
      warn("puma-plus-shepherd: #{e.message}\n#{USAGE}")
      exit(2)
    end

    def initialize(opts, log: $stderr)
      @opts = opts
      @log = log
      @children = {} # pid => worker_index
      @adopted = {} # pid => worker_index: live workers an earlier shepherd forked (ADOPT)
      @standby = {} # pid => Standby, forked and not yet activated (parked or booting)
      @standby_pending = 0 # STANDBY forks still to make
      @decoder = Wire::Decoder.new
      @stopping = false
      @term_requested = false
    end

    def run
      # As under puma: the app's logs to STDOUT/STDERR (Rails 7.2 production, RAILS_LOG_TO_STDOUT
      # on 6.1) reach the server's output line by line, not when a buffer fills or a worker exits.
      $stdout.sync = true
      $stderr.sync = true
      @control = IO.for_fd(@opts.control_fd, autoclose: true)
      @control.binmode
      @control.sync = true
      @control.close_on_exec = true
      @wake_r, @wake_w = IO.pipe
      @life_r, @life_w = IO.pipe
      trap("CHLD") { @wake_w.write_nonblock("c", exception: false) }
      trap("TERM") do
        @term_requested = true
        @wake_w.write_nonblock("t", exception: false)
      end
      # Ctrl-C reaches the whole process group; the server drives the drain and sends STOP.
      trap("INT", "IGNORE")

      @config = load_config
      boot_started = monotonic_ns
      @app = load_app
      action_cable_frontend
      @ractors = ractor_app # RactorSlots: nil, or the Ractor count (the app then made shareable)
      load_fiber_scheduler if @opts.fibers
      @tag = ProcTitle.tag(@config)
      retitle
      send_frame(Wire::Ready.new(Process.pid, monotonic_ns - boot_started))
      spawn_workers(@opts.workers)
      @standby_pending += @opts.standby.to_i
      @config&.run_hooks(:after_booted)
      loop_until_stopped
    rescue Errno::EPIPE, Errno::ECONNRESET, IOError => e
      # The control channel is gone: the server died. Take the workers down with us.
      @log.puts("puma-plus-shepherd: control channel lost (#{e.class}), stopping workers")
      stop_workers(ORPHAN_GRACE_MS, report: false)
      1
    end

    private

    def log(msg) = @log.puts("puma-plus-shepherd #{Process.pid}: #{msg}")

    def monotonic_ns = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)

    def load_config
      path = @opts.config
      return nil unless path && !path.empty?

      Config.load(path)
    rescue Config::Error => e
      log("config: #{e.message}")
      exit(1)
    end

    def load_app
      ENV["RACK_ENV"] ||= "development"
      require "rack"
      require "rack/builder"
      result = ::Rack::Builder.parse_file(@opts.app)
      result.is_a?(Array) ? result.first : result # Rack 2 returns [app, options]
    rescue ScriptError, StandardError => e
      log("cannot load #{@opts.app}: #{e.class}: #{e.message}\n  #{Array(e.backtrace).first(10).join("\n  ")}")
      exit(1)
    end

    # `action_cable :frontend` / PUMA_PLUS_ACTION_CABLE=frontend: Action Cable over the
    # front end's WebSockets (PumaPlus::ActionCable), installed before any fork. Said at boot,
    # and said when the app has no Action Cable to run over it.
    def action_cable_frontend
      mode = @config&.settings&.dig(:action_cable)
      ENV[ActionCable::ENV_NAME] = mode.to_s if mode && (ENV[ActionCable::ENV_NAME].nil? || ENV[ActionCable::ENV_NAME].empty?)
      return unless ActionCable.enabled?

      if ActionCable.install
        log("Action Cable runs over the front end's WebSockets (#{ActionCable::ENV_NAME}=frontend)")
      else
        log("#{ActionCable::ENV_NAME}=frontend, but the app has not loaded Action Cable: nothing to do")
      end
    end

    # `ractors N` / PUMA_PLUS_RACTORS=N: the count, after the app was made shareable (before any
    # fork, so each worker shares the frozen app); an app that cannot be shared stops the boot.
    def ractor_app
      count = RactorSlots.count(@config) or return nil
      RactorSlots.check_hooks(@config)
      @app = RactorSlots.prepare(@app)
      log("Ractor slots: #{count} per worker (--threads #{@opts.threads} is the server's count)") if count != @opts.threads
      count
    rescue RactorSlots::NotShareable, ArgumentError => e
      log(e.message)
      exit(1)
    end

    # --fibers: the async gem (Falcon's Fiber scheduler) is loaded before any fork, with the app.
    # Without it the shepherd exits at boot, saying so: never a silent fallback to threads.
    def load_fiber_scheduler
      require_relative "fiber_slots"
      warn_thread_isolation
    rescue LoadError => e
      log("fiber slots (-fibers) need the async gem (add `gem \"async\"` to the app's Gemfile): #{e.message}")
      exit(1)
    end

    # An app that keeps per-request state per thread shares it between the fiber slots of a
    # worker (docs/RACK.md "Fiber slots"). Rails says which it does: say so at boot.
    def warn_thread_isolation
      return unless defined?(::ActiveSupport::IsolatedExecutionState) &&
                    ::ActiveSupport::IsolatedExecutionState.respond_to?(:isolation_level) &&
                    ::ActiveSupport::IsolatedExecutionState.isolation_level == :thread

      log("warning: fiber slots with ActiveSupport's isolation_level :thread: the fiber slots of a worker " \
          "share per-request state (CurrentAttributes, the ActiveRecord connection); set " \
          "config.active_support.isolation_level = :fiber (docs/RACK.md \"Fiber slots\")")
    end

    def loop_until_stopped
      loop do
        fork_one_standby if @standby_pending.positive? && !@stopping
        socks = @standby.each_value.map(&:sock)
        ready = IO.select([@control, @wake_r, *socks], nil, nil, @standby_pending.positive? ? 0 : nil)
        next unless ready

        ready[0].each { |io| standby_said(io) if socks.include?(io) }
        if ready[0].include?(@wake_r)
          @wake_r.read_nonblock(256, exception: false)
          reap
          return stop_workers(TERM_GRACE_MS) if @term_requested
        end
        next unless ready[0].include?(@control)

        data = @control.read_nonblock(65_536, exception: false)
        next if data == :wait_readable

        if data.nil?
          log("control channel closed (server gone), stopping workers")
          stop_workers(ORPHAN_GRACE_MS, report: false)
          return 1
        end
        @decoder.feed(data)
        while (frame = @decoder.next_frame)
          status = handle(frame)
          return status if status
        end
      end
    rescue Wire::ProtocolError => e
      log("protocol error on the control channel: #{e.message}; stopping workers")
      stop_workers(ORPHAN_GRACE_MS, report: false)
      1
    end

    # Returns an exit status when the shepherd should exit, else nil.
    def handle(frame)
      case frame
      when Wire::Spawn then spawn_workers(frame.count)
      when Wire::Adopt, Wire::AdoptedExited then handle_adoption(frame)
      when Wire::Retire
        if @children.key?(frame.pid) || @adopted.key?(frame.pid)
          signal(frame.pid, "TERM")
        else
          log("RETIRE #{frame.pid}: not one of my workers, ignored")
        end
      when Wire::Stop then return stop_workers(frame.grace_ms)
      when Wire::Standby
        unexpected(frame) unless @opts.standby
        @standby_pending += frame.count unless @stopping
      when Wire::Activate
        unexpected(frame) unless @opts.standby
        activate(frame.pid)
      else
        unexpected(frame)
      end
      nil
    end

    def unexpected(frame)
      raise Wire::ProtocolError.new(:unexpected, "#{Wire.frame_name(frame)} frame on the control channel")
    end

    # ---- standby workers (docs/CONTROL.md section 8) ----------------------------------------

    def fork_one_standby
      @standby_pending -= 1
      @config&.run_hooks(:before_fork)
      index = lowest_free_index
      @config&.run_hooks(:before_worker_fork, index)
      mine, theirs = UNIXSocket.pair
      forked_ns = monotonic_ns
      pid = fork do
        mine.close
        standby_main(index, theirs)
      end
      theirs.close
      @children[pid] = index
      @standby[pid] = Standby.new(pid, mine, index, forked_ns, false)
      @config&.run_hooks(:after_worker_fork, index)
    end

    # A standby child's socket is readable: it has booted (PARKED to the server), or it died
    # (EOF; the reap reports EXITED).
    def standby_said(sock)
      sb = @standby.each_value.find { |x| x.sock == sock }
      return unless sb

      data = sock.read_nonblock(16, exception: false)
      return if data == :wait_readable

      if data.nil? || data.empty?
        forget_standby(sb)
      elsif !sb.parked && data.include?(PARKED_BYTE)
        sb.parked = true
        send_frame(Wire::Parked.new(sb.pid, sb.index, monotonic_ns - sb.forked_ns))
      end
    rescue Errno::ECONNRESET, IOError
      forget_standby(sb)
    end

    def activate(pid)
      sb = @standby[pid]
      unless sb&.parked
        log("ACTIVATE #{pid}: not a parked standby worker of mine, ignored")
        return
      end
      begin
        sb.sock.write(WAKE_BYTE)
      rescue Errno::EPIPE, Errno::ECONNRESET, IOError
        nil # it died meanwhile; its EXITED follows from the reap
      end
      forget_standby(sb)
      retitle
    end

    def forget_standby(sb)
      @standby.delete(sb.pid)
      sb.sock.close unless sb.sock.closed?
    end

    # Runs in a standby child: boot as a worker does, say so, park until woken, then serve.
    # EOF on the socket (the shepherd died, or it is stopping) ends the child; SIGTERM while
    # parked (RETIRE, STOP) ends it at once (the default action).
    def standby_main(index, sock)
      worker_main(index, standby: true) do
        sock.write(PARKED_BYTE)
        byte = sock.read(1)
        sock.close
        exit!(0) unless byte == WAKE_BYTE

        ProcTitle.set(ProcTitle.worker(index: index, threads: @opts.threads, shepherd_pid: @shepherd_pid, tag: @tag))
      end
    end

    def spawn_workers(count)
      return if count.zero? || @stopping

      @config&.run_hooks(:before_fork)
      count.times do
        index = lowest_free_index
        @config&.run_hooks(:before_worker_fork, index)
        pid = fork { worker_main(index) }
        @children[pid] = index
        send_frame(Wire::Forked.new(pid, index))
        @config&.run_hooks(:after_worker_fork, index)
      end
      retitle
    end

    # The shepherd's process title (ProcTitle), with the workers it has now.
    def retitle
      ProcTitle.set(ProcTitle.shepherd(workers: @children.size - @standby.size + @adopted.size,
                                       threads: @opts.threads, app: @opts.app, tag: @tag))
    end

    # A shepherd started again after its predecessor died (docs/PROTOCOL.md "Shepherd
    # restart"): ADOPT names a live worker it did not fork, whose index stays taken;
    # ADOPTED_EXITED says the server reaped it. This shepherd cannot reap adopted workers, so
    # they are never reported in EXITED.
    def handle_adoption(frame)
      if frame.is_a?(Wire::Adopt)
        @adopted[frame.pid] = frame.worker_index
        log("adopted worker #{frame.worker_index} (pid #{frame.pid})")
      else
        @adopted.delete(frame.pid)
      end
    end

    # STOP: adopted workers get SIGTERM too; the server reaps them.
    def stop_adopted
      @adopted.each_key { |pid| signal(pid, "TERM") }
      @adopted.clear
    end

    def lowest_free_index
      used = @children.values + @adopted.values
      index = 0
      index += 1 while used.include?(index)
      index
    end

    # Runs in the forked child; never returns. A block (standby_main) runs after
    # on_worker_boot and before any thread dials the server.
    def worker_main(index, standby: false)
      status = 1
      @shepherd_pid = Process.ppid
      begin
        ProcTitle.set(ProcTitle.worker(index: index, threads: @opts.threads, shepherd_pid: @shepherd_pid,
                                       tag: @tag, standby: standby))
        trap("CHLD", "DEFAULT")
        trap("TERM", "DEFAULT") # the Worker installs its own graceful handler
        trap("INT", "IGNORE")
        [@control, @wake_r, @wake_w, @life_w].each(&:close)
        # Other standby workers' sockets: a copy here would hide the shepherd's death from them.
        @standby.each_value { |sb| sb.sock.close }
        @config&.run_hooks(:before_worker_boot, index)
        AppHooks.install(@config, log: @log) # lowlevel_error_handler, out_of_band
        yield if block_given?
        status = (@ractors ? RactorSlots::Worker : Worker).new(@app, socket_path: @opts.socket, threads: @ractors || @opts.threads, fibers: @opts.fibers,
                                  worker_index: index, life_pipe: @life_r, log: @log, config: @config).run
        @config&.run_hooks(:before_worker_shutdown, index)
      rescue Exception => e # rubocop:disable Lint/RescueException
        @log.puts("puma-plus worker #{Process.pid}: #{e.class}: #{e.message}\n  #{Array(e.backtrace).join("\n  ")}")
      ensure
        $stdout.flush
        $stderr.flush
        # exit! so that at_exit hooks the app registered in the shepherd do not run per worker.
        exit!(status)
      end
    end

    def reap
      loop do
        pid, st = Process.wait2(-1, Process::WNOHANG)
        break unless pid

        index = @children.delete(pid)
        next unless index

        sb = @standby[pid]
        forget_standby(sb) if sb
        code = st.exited? ? st.exitstatus : -(st.termsig || 0)
        send_frame(Wire::Exited.new(pid, code)) unless @control.closed?
        run_hook_safely(:after_worker_shutdown, index, st)
        retitle
      end
    rescue Errno::ECHILD
      nil
    end

    # TERM every worker, wait up to grace_ms for them, KILL the rest, reap all, then exit 0.
    def stop_workers(grace_ms, report: true)
      @stopping = true
      stop_adopted
      @standby_pending = 0
      @children.each_key { |pid| signal(pid, "TERM") }
      deadline = monotonic_ns + grace_ms * 1_000_000
      until @children.empty? || monotonic_ns >= deadline
        sleep 0.01
        report ? reap : reap_quietly
      end
      unless @children.empty?
        log("#{@children.size} worker(s) still running after #{grace_ms} ms, sending KILL")
        @children.each_key { |pid| signal(pid, "KILL") }
        report ? reap_blocking : reap_quietly(blocking: true)
      end
      run_hook_safely(:after_stopped)
      0
    end

    # A hook that raises in the shepherd's loop is logged; the shepherd goes on.
    def run_hook_safely(name, *args)
      @config&.run_hooks(name, *args)
    rescue StandardError => e
      log("#{name} hook: #{e.class}: #{e.message}")
    end

    def reap_blocking
      until @children.empty?
        pid, st = Process.wait2(-1)
        index = @children.delete(pid)
        next unless index

        send_frame(Wire::Exited.new(pid, st.exited? ? st.exitstatus : -(st.termsig || 0)))
      end
    rescue Errno::ECHILD
      @children.clear
    end

    def reap_quietly(blocking: false)
      loop do
        pid = Process.wait(-1, blocking ? 0 : Process::WNOHANG)
        break unless pid

        @children.delete(pid)
        break if @children.empty?
      end
    rescue Errno::ECHILD
      @children.clear
    end

    def signal(pid, sig)
      Process.kill(sig, pid)
    rescue Errno::ESRCH
      nil
    end

    def send_frame(frame)
      @control.write(Wire.encode(frame))
    rescue Errno::EPIPE, Errno::ECONNRESET, IOError
      raise unless @stopping # while stopping, a server that already left is fine
    end
  end
end
