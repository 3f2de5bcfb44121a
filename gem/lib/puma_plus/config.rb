# frozen_string_literal: true

require "etc"

module PumaPlus
  # Reads config/puma-plus.rb — or an unmodified config/puma.rb — written in puma's DSL
  # (docs/CONFIG.md) into plain settings plus hooks. Every directive of puma 8's DSL is a
  # method here (DIRECTIVES says which and how): supported, mapped to a puma-plus equivalent,
  # or not applied, and then recorded in #unsupported with its file, line and the reason, so
  # the CLI reports it. Nothing is ignored silently. Environment defaults are read as puma
  # reads them (WEB_CONCURRENCY, including `auto`; RAILS_MAX_THREADS / PUMA_MAX_THREADS /
  # MAX_THREADS; PORT; RACK_ENV / RAILS_ENV / APP_ENV); the file's directives override them.
  class Config
    class Error < StandardError; end

    DEFAULTS = {
      binds: [], threads_min: 0, threads_max: 5, max_slots: nil, fiber_slots: nil, workers: 1, environment: nil,
      rackup: "config.ru", control_url: nil, control_token: nil,
      autoscale_min: nil, autoscale_max: nil, autoscale_target_queue_p95_ms: nil,
      header_timeout_s: nil, keepalive_timeout_s: nil, drain_timeout_s: nil, max_body_size: nil,
      request_timeout_ms: nil, worker_kill_grace_ms: nil, worker_timeout_ms: nil,
      quiet: false, directory: nil, stdout_redirect: nil, stderr_redirect: nil, redirect_append: false,
      pidfile: nil, state_path: nil, activated_sockets: nil, tag: nil, max_keep_alive: nil,
      worker_boot_timeout_ms: nil, early_hints: false, access_log: nil, access_log_format: nil,
      proxy_protocol: nil, remote_addr_header: nil, trusted_proxies: nil, ractors: nil,
      action_cable: nil
    }.freeze

    HOOKS = %i[before_fork before_worker_boot before_worker_shutdown before_worker_fork after_worker_fork
               after_worker_shutdown after_booted after_stopped before_thread_start before_thread_exit
               out_of_band].freeze

    # Every public directive of puma 8.0's DSL (lib/puma/dsl.rb, aliases included), and what
    # puma-plus does with it: [:supported | :mapped | :unsupported, how or why]. docs/CONFIG.md
    # has the same table; gem/test/test_config.rb checks both against puma's dsl.rb.
    DIRECTIVES = {
      "activate_control_app" => [:mapped, "the server's control app (/stats, /metrics): `tcp://HOST:PORT`, `unix://PATH`, bare `HOST:PORT`, or `auto` (127.0.0.1:9293); `auth_token:`, `no_token:` → `-control`, `-control-token`. Without it there is no control app, as in puma"],
      "after_booted" => [:supported, "runs in the shepherd once the first workers are forked"],
      "after_refork" => [:unsupported, "no refork (fork_worker) in puma-plus"],
      "after_stopped" => [:supported, "runs in the shepherd when it stops its workers"],
      "after_worker_boot" => [:supported, "alias of after_worker_fork"],
      "after_worker_fork" => [:supported, "runs in the shepherd after each fork, with the worker index"],
      "after_worker_shutdown" => [:supported, "runs in the shepherd when a worker has exited, with the index and the Process::Status"],
      "app" => [:unsupported, "the server loads a rackup file (`rackup`); a Rack app object in the config cannot be passed to it"],
      "before_fork" => [:supported, "runs in the shepherd before each batch of forks"],
      "before_refork" => [:unsupported, "no refork (fork_worker) in puma-plus"],
      "before_restart" => [:unsupported, "the hot restart (SIGUSR2, `puma-plus ctl restart`) is done by the C server, which runs no Ruby before it re-execs itself"],
      "before_thread_exit" => [:supported, "runs in each worker thread as it ends"],
      "before_thread_start" => [:supported, "runs in each worker thread before it dials the server"],
      "before_worker_boot" => [:supported, "runs in each new worker after fork, before its threads start, with the index"],
      "before_worker_fork" => [:supported, "runs in the shepherd before each fork, with the worker index"],
      "before_worker_shutdown" => [:supported, "runs in a worker after its last request, before it exits, with the index"],
      "bind" => [:supported, "`tcp://HOST:PORT`, `unix://PATH` → `-listen`; `ssl://HOST:PORT?cert=F&key=F` → `-listen-tls` with `-tls-cert`/`-tls-key` (no cert: a development certificate)"],
      "bind_to_activated_sockets" => [:supported, "each socket systemd passes (LISTEN_FDS) becomes a bind of its address (`'only'`: and no other bind); the server takes the inherited socket for the listener of that address (docs/SERVER.md)"],
      "clean_thread_locals" => [:unsupported, "alias of fiber_per_request"],
      "clear_binds!" => [:supported, "forgets the binds given so far"],
      "cluster" => [:supported, "the block is evaluated: puma-plus always runs worker processes"],
      "custom_logger" => [:unsupported, "the server logs from C to stderr; the app keeps its own logger"],
      "debug" => [:unsupported, "no debug mode"],
      "default_host" => [:supported, "the host `port` binds when none is given (0.0.0.0, as puma)"],
      "drain_on_shutdown" => [:mapped, "always: SIGTERM drains what is queued and in flight"],
      "early_hints" => [:supported, "`-early-hints`: `rack.early_hints` in the env; the app's hints go out at once as a `103 Early Hints` on HTTP/1.1 (never to an HTTP/1.0 client), HTTP/2 and HTTP/3. Off unless set, as in puma"],
      "enable_keep_alives" => [:unsupported, "keep-alive is always on; bound it with persistent_timeout"],
      "environment" => [:supported, "RACK_ENV of the server, shepherd and workers"],
      "extra_runtime_dependencies" => [:unsupported, "only for prune_bundler, which puma-plus does not need"],
      "fiber_per_request" => [:unsupported, "each request runs on its worker thread; no fiber per request"],
      "first_data_timeout" => [:mapped, "`-header-timeout`: first byte to the end of the headers"],
      "force_shutdown_after" => [:mapped, "`-drain-timeout`"],
      "fork_worker" => [:unsupported, "no refork from a warmed worker; the shepherd forks every worker"],
      "get" => [:supported, "returns a setting read so far (puma-plus names, e.g. :workers)"],
      "http_content_length_limit" => [:mapped, "`-max-body-size` (413 beyond); no limit by default or with nil, as puma"],
      "idle_timeout" => [:unsupported, "the server does not exit when idle"],
      "inject" => [:supported, "evaluates the block as config"],
      "io_selector_backend" => [:unsupported, "no Ruby reactor: the C server owns the sockets (libuv)"],
      "load" => [:supported, "evaluates another config file (relative to the current directory)"],
      "log_formatter" => [:unsupported, "the server's log lines are its own"],
      "log_requests" => [:mapped, "`-access-log -`: one line per response on stdout (NCSA combined, then queue, service and total time, worker, request id); `log_requests path: \"log/access.log\", format: :json` (or `:common`) for a file (SIGHUP reopens it) or JSON lines; `log_requests false` for none"],
      "lowlevel_error_handler" => [:supported, "called in the worker with (exception, env, status) (or fewer, by its arity) when the app raises or returns an invalid response; its Rack response is sent instead of the 500 (docs/RACK.md). Malformed requests, for which puma also calls it (400, 501), are answered by the C front end without Ruby"],
      "max_fast_inline" => [:unsupported, "no Ruby-side keep-alive loop: the server owns connections"],
      "max_io_threads" => [:unsupported, "no IO threads"],
      "max_keep_alive" => [:supported, "`-max-keep-alive N`: an HTTP/1.1 connection is closed (`Connection: close`) after its Nth request; puma's default is 999, puma-plus has no cap unless set"],
      "mutate_stdout_and_stderr_to_sync_on_write" => [:mapped, "always: STDOUT and STDERR are synced in the shepherd and workers"],
      "on_booted" => [:supported, "alias of after_booted"],
      "on_refork" => [:unsupported, "alias of before_refork"],
      "on_restart" => [:unsupported, "alias of before_restart"],
      "on_stopped" => [:supported, "alias of after_stopped"],
      "on_thread_exit" => [:supported, "alias of before_thread_exit"],
      "on_thread_start" => [:supported, "alias of before_thread_start"],
      "on_worker_boot" => [:supported, "alias of before_worker_boot"],
      "on_worker_fork" => [:supported, "alias of before_worker_fork"],
      "on_worker_shutdown" => [:supported, "alias of before_worker_shutdown"],
      "out_of_band" => [:supported, "runs in a worker when it goes idle: after a request when no other request of that worker is running; a request reaching the worker meanwhile waits for it (docs/RACK.md)"],
      "persistent_timeout" => [:mapped, "`-keepalive-timeout`"],
      "pidfile" => [:supported, "`-pidfile`: the server writes its pid at start (the new pid after a hot restart) and removes the file at exit"],
      "plugin" => [:unsupported, "puma plugins hook into puma's launcher, which puma-plus does not run"],
      "port" => [:supported, "`-listen HOST:PORT` (host default 0.0.0.0)"],
      "preload_app!" => [:mapped, "always: the shepherd loads the app once, then forks"],
      "prune_bundler" => [:unsupported, "not needed: a phased restart (SIGUSR1) starts a new shepherd process, which loads the bundle and the app anew"],
      "queue_requests" => [:mapped, "always: the server buffers each request and holds the one queue"],
      "quiet" => [:mapped, "`-quiet` (the server logs only errors)"],
      "rack_url_scheme" => [:unsupported, "rack.url_scheme comes from the listener"],
      "rackup" => [:supported, "`-app`"],
      "raise_exception_on_sigterm" => [:unsupported, "SIGTERM drains; nothing is raised in the app"],
      "restart_command" => [:unsupported, "the hot restart re-execs the server binary at the path it was started with, with the same arguments"],
      "set_default_host" => [:supported, "the host `port` binds when none is given"],
      "set_remote_address" => [:supported, "`:socket` (the default); `proxy_protocol: :v1` (or `:v2`, `:any`: HAProxy's send-proxy-v2) → `,proxy=v1` on every listener; `header: \"X-Forwarded-For\"` → `-remote-addr-header`: believed only from `trusted:` peers (default loopback; `-trusted-proxies`), the right-most untrusted address of the list. `:localhost` and `value:` are refused with a reason"],
      "shutdown_debug" => [:unsupported, "no thread dump at shutdown"],
      "silence_fork_callback_warning" => [:mapped, "accepted: there is no such warning"],
      "silence_single_worker_warning" => [:mapped, "accepted: there is no such warning"],
      "single" => [:mapped, "the block is not evaluated: puma-plus always runs worker processes"],
      "ssl_bind" => [:supported, "`ssl_bind HOST, PORT, cert:, key:` → `-listen-tls HOST:PORT -tls-cert -tls-key`; `verify_mode` other than none (client certificates) is an error"],
      "state_path" => [:supported, "`-state-path`: puma's YAML state file (pid, control_url, control_auth_token, running_from), written at start and after a hot restart, removed at exit; `puma-plus ctl -S` reads it"],
      "state_permission" => [:unsupported, "the state file is always written with mode 0600 (it holds the control token)"],
      "stdout_redirect" => [:supported, "the command reopens STDOUT/STDERR on those files before it execs the server"],
      "directory" => [:supported, "the command changes to it before it reads the rackup file and execs"],
      "supported_http_methods" => [:unsupported, "the server accepts every method its HTTP parser knows"],
      "tag" => [:supported, "in the process titles of the shepherd and the workers (default: the directory's name, as puma); passed as PUMA_PLUS_TAG"],
      "threads" => [:supported, "`-threads MAX -min-threads MIN`: a worker starts with MAX threads (= server connections, slots); at run time its slots stay within MIN..MAX (MAX..`max_slots` when that is set)"],
      "wait_for_less_busy_worker" => [:mapped, "always: one queue, dispatched to any idle thread of any worker"],
      "worker_boot_timeout" => [:supported, "`-worker-boot-timeout Ns`: a forked worker none of whose threads has connected within it is killed and replaced; default 60, as puma"],
      "worker_check_interval" => [:unsupported, "the server sets the heartbeat period itself: a quarter of worker_timeout, between 100 ms and 5 s"],
      "worker_culling_strategy" => [:unsupported, "the controller picks the worker to retire"],
      "worker_shutdown_timeout" => [:mapped, "`-drain-timeout` (unless force_shutdown_after set it)"],
      "worker_timeout" => [:supported, "`-worker-timeout Ns`: a worker whose heartbeat (its monitor thread) is silent this long is killed and replaced; default 60"],
      "workers" => [:supported, "`-workers N`; `:auto` = available processors (cgroup CPU quota honoured); 0 (puma's single mode) runs 1 worker"]
    }.freeze

    attr_reader :settings, :hooks, :unsupported, :notes
    # puma's lowlevel_error_handler: a callable, or nil (AppHooks).
    attr_accessor :lowlevel_error_handler

    def initialize(env: ENV)
      @env = env
      @settings = Config.env_defaults(env)
      @binds_from_env = !@settings[:binds].empty?
      @hooks = HOOKS.to_h { |h| [h, []] }
      @unsupported = []
      @notes = []
    end

    # The settings with no config file: DEFAULTS under the environment puma reads.
    def self.env_defaults(env = ENV)
      s = DEFAULTS.dup
      s[:binds] = []
      if (w = env["WEB_CONCURRENCY"]) && !w.strip.empty?
        s[:workers] = parse_workers(w.strip, "WEB_CONCURRENCY")
      end
      max = [env["RAILS_MAX_THREADS"], env["PUMA_MAX_THREADS"], env["MAX_THREADS"]].find { |v| v && !v.strip.empty? }
      if max
        s[:threads_max] = Integer(max.strip, exception: false) or raise Error, "threads from the environment: #{max.inspect} is not an Integer"
        raise Error, "threads from the environment: must be at least 1" if s[:threads_max] < 1
      end
      # puma 8 reads the floor from PUMA_MIN_THREADS, else MIN_THREADS (here: the run-time
      # floor of slots, -min-threads).
      min = [env["PUMA_MIN_THREADS"], env["MIN_THREADS"]].find { |v| v && !v.strip.empty? }
      if min
        s[:threads_min] = Integer(min.strip, exception: false) or raise Error, "threads from the environment: #{min.inspect} is not an Integer"
        raise Error, "threads from the environment: min must be at least 0" if s[:threads_min].negative?
      end
      if (port = env["PORT"]) && !port.strip.empty?
        port = Integer(port.strip, exception: false) or raise Error, "PORT=#{env['PORT'].inspect} is not a port number"
        s[:binds] = ["tcp://0.0.0.0:#{port}"]
      end
      s[:environment] = env["APP_ENV"] || env["RACK_ENV"] || env["RAILS_ENV"]
      s[:environment] = nil if s[:environment]&.empty?
      s
    end

    # "auto" / :auto → the available processors; anything else an Integer ≥ 0.
    def self.parse_workers(value, where)
      return available_processors if value.to_s == "auto"

      Integer(value)
    rescue ArgumentError, TypeError
      raise Error, "#{where}: #{value.inspect} is not an Integer or auto"
    end

    # Processors this process may use: the affinity mask (Etc.nprocessors), lowered to the
    # cgroup CPU quota (v2 cpu.max, or v1 cpu.cfs_quota_us / cpu.cfs_period_us) and rounded
    # down, as puma's `auto` (concurrent-ruby's available_processor_count) is. At least 1.
    def self.available_processors(nprocessors: Etc.nprocessors, cgroup_root: "/sys/fs/cgroup",
                                  proc_cgroup: "/proc/self/cgroup")
      quota = cgroup_cpu_quota(cgroup_root, proc_cgroup)
      count = quota ? [nprocessors.to_f, quota].min : nprocessors
      [count.floor, 1].max
    end

    # CPUs' worth of quota, or nil when there is none (or no cgroup to read).
    def self.cgroup_cpu_quota(root, proc_cgroup)
      lines = File.file?(proc_cgroup) ? File.readlines(proc_cgroup, chomp: true) : []
      v2 = lines.find { |l| l.start_with?("0::") }&.delete_prefix("0::")
      [v2 && File.join(root, v2, "cpu.max"), File.join(root, "cpu.max")].compact.each do |path|
        next unless File.file?(path)

        max, period = File.read(path).split
        return nil if max == "max"

        return Float(max) / Float(period)
      end
      v1 = lines.map { |l| l.split(":", 3) }.find { |_, ctl, _| ctl.to_s.split(",").include?("cpu") }&.last
      [v1 && File.join(root, "cpu", v1), File.join(root, "cpu"), File.join(root, "cpu,cpuacct")].compact.each do |dir|
        q = File.join(dir, "cpu.cfs_quota_us")
        p = File.join(dir, "cpu.cfs_period_us")
        next unless File.file?(q) && File.file?(p)

        quota = Integer(File.read(q).strip)
        return nil if quota.negative?

        return quota.to_f / Integer(File.read(p).strip)
      end
      nil
    rescue SystemCallError, ArgumentError, ZeroDivisionError
      nil
    end

    # Evaluates `path`; raises Config::Error naming the file and line on a bad directive.
    def self.load(path, env: ENV)
      config = new(env: env)
      config.load_file(path)
      config
    end

    def load_file(path)
      text = File.read(path)
      Dsl.new(self, path).instance_eval(text, path, 1)
      self
    rescue Errno::ENOENT, Errno::EACCES => e
      raise Error, "#{path}: #{e.message}"
    rescue SyntaxError => e
      raise Error, "#{path}: #{e.message}"
    rescue Error
      raise
    rescue StandardError => e
      line = Array(e.backtrace_locations).find { |l| l.path == path }&.lineno
      raise Error, "#{path}:#{line || '?'}: #{e.class}: #{e.message}"
    end

    def run_hooks(name, *args)
      @hooks.fetch(name).each { |blk| blk.call(*args) }
    end

    # A file directive replaces the PORT default rather than adding to it.
    def take_binds
      if @binds_from_env
        @settings[:binds] = []
        @binds_from_env = false
      end
      @settings[:binds]
    end

    # The DSL object the config file is evaluated in. Every method is a puma directive name.
    class Dsl
      def initialize(config, path)
        @config = config
        @path = path
        @default_host = "0.0.0.0"
      end

      def port(number, host = nil)
        number = Integer(number)
        host ||= @default_host
        bind_url = "tcp://#{host.include?(':') ? "[#{host}]" : host}:#{number}"
        @config.take_binds << bind_url
      end

      def bind(url)
        unless url.to_s.match?(%r{\A(tcp|unix|ssl)://})
          raise Error, where("bind: unsupported URL #{url.inspect} (tcp://, unix:// or ssl:// only)")
        end

        @config.take_binds << url.to_s
      end

      # puma: bind_to_activated_sockets(bind = true); "only" ignores the other binds.
      def bind_to_activated_sockets(bind = true)
        set[:activated_sockets] = bind.to_s == "only" ? :only : (bind ? true : nil)
      end

      def pidfile(path) = set[:pidfile] = path.to_s

      def state_path(path) = set[:state_path] = path.to_s

      def clear_binds!
        @config.take_binds.clear
      end

      def set_default_host(host) = @default_host = host.to_s

      def default_host = @default_host

      # puma's ssl_bind: the same listener as bind "ssl://HOST:PORT?cert=...&key=...".
      def ssl_bind(host, port, opts = {})
        opts = opts.transform_keys(&:to_s)
        query = %w[cert key verify_mode].filter_map { |k| "#{k}=#{opts[k]}" if opts[k] }
        host = host.to_s
        host = "[#{host}]" if host.include?(":") && !host.start_with?("[")
        @config.take_binds << "ssl://#{host}:#{Integer(port)}#{query.empty? ? '' : "?#{query.join('&')}"}"
      end

      # puma-plus: action_cable(:frontend): Action Cable runs over front-end-owned WebSockets
      # (PumaPlus::ActionCable); :hijack (the default) keeps full hijack.
      def action_cable(mode)
        mode = mode.to_sym
        raise Error, where("action_cable: :frontend or :hijack, not #{mode.inspect}") unless %i[frontend hijack].include?(mode)

        set[:action_cable] = mode
      end

      # puma-plus: ractors(N): each worker's N slots are Ractors (RactorSlots).
      def ractors(count)
        n = Integer(count)
        raise Error, where("ractors: must be at least 1") if n < 1

        set[:ractors] = n
      end

      def threads(min, max = min)
        min = Integer(min)
        max = Integer(max)
        raise Error, where("threads: min #{min} > max #{max}") if min > max
        raise Error, where("threads: max must be at least 1") if max < 1

        set[:threads_min] = min
        set[:threads_max] = max
        note("threads: a worker starts with max (#{max}) threads; min #{min} is the floor when slots change at run time") if min != max
      end

      # puma-plus: the most slots a worker may have at run time (-max-slots), above `threads`
      # max for I/O-bound apps (hundreds per process; docs/SERVER.md "Slots at run time").
      def max_slots(count)
        count = Integer(count)
        raise Error, where("max_slots: must be 1..4096") unless (1..4096).cover?(count)

        set[:max_slots] = count
      end

      # puma-plus: the slots are fibers under the async gem's Fiber scheduler, `count` per
      # worker at start (-fibers; docs/RACK.md "Fiber slots"); nil or 0 turns it off.
      def fiber_slots(count)
        count = count.nil? ? 0 : Integer(count)
        raise Error, where("fiber_slots: must be 0..4096") unless (0..4096).cover?(count)

        set[:fiber_slots] = count.zero? ? nil : count
      end

      def workers(count)
        count = Config.parse_workers(count, where("workers"))
        raise Error, where("workers: must be at least 0") if count.negative?

        if count.zero?
          note("workers 0 (puma's single mode): puma-plus always forks workers; running 1")
          count = 1
        end
        set[:workers] = count
      end

      def environment(name)
        set[:environment] = name.to_s
      end

      def rackup(path)
        set[:rackup] = path.to_s
      end

      def autoscale(min:, max:, target_queue_p95: nil, standby: nil)
        min = Integer(min)
        max = Integer(max)
        raise Error, where("autoscale: min #{min} > max #{max}") if min > max

        if standby
          standby = Integer(standby)
          raise Error, where("autoscale: standby #{standby} must be 0..64") unless (0..64).cover?(standby)

          set[:autoscale_standby] = standby
        end

        set[:autoscale_min] = min
        set[:autoscale_max] = max
        set[:autoscale_target_queue_p95_ms] = parse_ms(target_queue_p95) if target_queue_p95
      end

      # puma-plus's request timeout (no puma equivalent; rack-timeout's service_timeout):
      # seconds (Integer/Float) or "500ms"/"2s"; nil or 0 turns it off. kill_grace: how long
      # an interrupted thread has to let go before its worker is killed (default 5 s).
      def request_timeout(duration, kill_grace: nil)
        set[:request_timeout_ms] = duration.nil? ? nil : parse_duration_ms(duration, "request_timeout")
        set[:request_timeout_ms] = nil if set[:request_timeout_ms]&.zero?
        set[:worker_kill_grace_ms] = parse_duration_ms(kill_grace, "request_timeout kill_grace") if kill_grace
      end

      # puma: worker_timeout(seconds), an Integer of seconds (puma requires more than
      # worker_check_interval, 5 s; here at least 1).
      def worker_timeout(seconds)
        seconds = Integer(seconds)
        raise Error, where("worker_timeout: must be at least 1 second") if seconds < 1

        set[:worker_timeout_ms] = seconds * 1000
      end

      # puma: activate_control_app(url = "auto", auth_token:, no_token:, umask:, data_only:).
      def activate_control_app(url = "auto", opts = {})
        url = url.to_s
        set[:control_url] = case url
                            when "auto" then "tcp://127.0.0.1:9293" # the server has none by default
                            when %r{\A(tcp|unix)://} then url
                            when /\A(\[[0-9a-fA-F:.]+\]|[^\s:\/\[\]]+)?:\d+\z/ then "tcp://#{url}"
                            else raise Error, where("activate_control_app: #{url.inspect}: expected tcp://HOST:PORT, unix://PATH, HOST:PORT or auto")
                            end
        set[:control_token] = opts[:no_token] ? nil : opts[:auth_token]&.to_s
        note("activate_control_app: umask: and data_only: are not used") if opts[:umask] || opts[:data_only]
      end

      HOOKS.each do |name|
        define_method(name) do |*_args, &block|
          raise Error, where("#{name} needs a block") unless block

          @config.hooks[name] << block
        end
      end
      alias on_worker_boot before_worker_boot
      alias on_worker_shutdown before_worker_shutdown
      alias on_worker_fork before_worker_fork
      alias after_worker_boot after_worker_fork
      alias on_booted after_booted
      alias on_stopped after_stopped
      alias on_thread_start before_thread_start
      alias on_thread_exit before_thread_exit

      # puma: tag(string): the process titles' tag (ProcTitle); "" shows none.
      def tag(string) = set[:tag] = string.to_s

      # puma: lowlevel_error_handler(obj = nil, &block); called as (error[, env[, status]]).
      def lowlevel_error_handler(obj = nil, &block)
        handler = obj || block
        raise Error, where("lowlevel_error_handler needs a block or a callable") unless handler.respond_to?(:call)

        @config.lowlevel_error_handler = handler
      end

      # puma: early_hints(answer = true).
      def early_hints(answer = true) = set[:early_hints] = answer ? true : false

      # puma: max_keep_alive(num_of_requests).
      def max_keep_alive(count)
        count = Integer(count)
        raise Error, where("max_keep_alive: must be at least 1") if count < 1

        set[:max_keep_alive] = count
      end

      # puma: worker_boot_timeout(timeout), seconds.
      def worker_boot_timeout(seconds)
        seconds = Integer(seconds)
        raise Error, where("worker_boot_timeout: must be at least 1 second") if seconds < 1

        set[:worker_boot_timeout_ms] = seconds * 1000
      end

      # puma: log_requests(which = true), the request log on stdout. puma-plus adds path: (a
      # file, "-" for stdout) and format: (:combined, :common, :json).
      def log_requests(which = true, path: nil, format: nil)
        unless which
          set[:access_log] = set[:access_log_format] = nil
          return
        end
        format = format&.to_s
        if format && !%w[combined common json].include?(format)
          raise Error, where("log_requests: format: #{format.inspect}: expected :combined, :common or :json")
        end
        set[:access_log] = path ? path.to_s : "-"
        set[:access_log_format] = format
      end

      # puma: set_remote_address(:socket | :localhost | {proxy_protocol: :v1} | {header: NAME} |
      # {value: ...}). puma-plus adds proxy_protocol: :v2 / :any and header's trusted: list.
      def set_remote_address(val = :socket)
        case val
        when :socket, "socket"
          set[:proxy_protocol] = set[:remote_addr_header] = set[:trusted_proxies] = nil
        when Hash
          val = val.transform_keys(&:to_sym)
          unknown = val.keys - %i[proxy_protocol header trusted]
          raise Error, where("set_remote_address: #{unknown.first.inspect} is not supported (proxy_protocol:, header:, trusted:)") unless unknown.empty?

          if (v = val[:proxy_protocol])
            raise Error, where("set_remote_address: proxy_protocol: #{v.inspect}: expected :v1, :v2 or :any") unless %w[v1 v2 any].include?(v.to_s)

            set[:proxy_protocol] = v.to_s
          end
          if (h = val[:header])
            raise Error, where("set_remote_address: header: #{h.inspect} is not a header name") unless h.to_s.match?(/\A[A-Za-z0-9-]+\z/)

            set[:remote_addr_header] = h.to_s
            set[:trusted_proxies] = Array(val[:trusted]).map(&:to_s).join(",") if val[:trusted]
          end
        else
          raise Error, where("set_remote_address #{val.inspect}: not supported (:socket, proxy_protocol: or header:)")
        end
      end

      def preload_app!(*)
        note("preload_app!: puma-plus always preloads the app in its shepherd")
      end

      def first_data_timeout(seconds) = set[:header_timeout_s] = Integer(seconds)

      def persistent_timeout(seconds) = set[:keepalive_timeout_s] = Integer(seconds)

      def force_shutdown_after(seconds)
        set[:drain_timeout_s] = seconds == :forever ? nil : Integer(seconds)
        @drain_from_force = true
      end

      def worker_shutdown_timeout(seconds)
        set[:drain_timeout_s] = Integer(seconds) unless @drain_from_force
      end

      def http_content_length_limit(bytes) = set[:max_body_size] = bytes ? Integer(bytes) : 0

      def quiet(which = true) = set[:quiet] = which ? true : false

      def directory(dir) = set[:directory] = dir.to_s

      def stdout_redirect(stdout = nil, stderr = nil, append = false)
        set[:stdout_redirect] = stdout&.to_s
        set[:stderr_redirect] = stderr&.to_s
        set[:redirect_append] = append ? true : false
      end

      def load(file) = @config.load_file(File.expand_path(file.to_s))

      def inject(&block) = instance_eval(&block)

      def get(key, default = nil) = set.fetch(key.to_sym, default)

      def cluster
        yield if block_given?
      end

      def single(&_block) = nil

      %w[drain_on_shutdown queue_requests wait_for_less_busy_worker mutate_stdout_and_stderr_to_sync_on_write
         silence_single_worker_warning silence_fork_callback_warning].each do |name|
        define_method(name) { |*_args, &_block| nil }
      end

      DIRECTIVES.each do |name, (status, reason)|
        next unless status == :unsupported
        next if method_defined?(name) || private_method_defined?(name)

        define_method(name) do |*_args, **_kw, &_block|
          @config.unsupported << "#{@path}:#{file_line}: #{name}: not applied: #{reason}"
          nil
        end
      end

      # A name that is not in puma 8's DSL either (a typo, a newer puma): reported, not applied.
      def method_missing(name, *_args, &_block)
        @config.unsupported << "#{@path}:#{file_line}: #{name}: not a puma 8 directive, not applied"
        nil
      end

      def respond_to_missing?(*) = true

      private

      def set = @config.settings

      def note(text) = @config.notes << "#{@path}:#{file_line}: #{text}"

      def where(text) = "#{@path}:#{file_line}: #{text}"

      # The line of the config file being evaluated (the innermost frame in that file).
      def file_line = caller_locations.find { |l| l.path == @path }&.lineno

      # 2, 1.5 (seconds), "500ms", "2s" → Integer milliseconds (>= 0).
      def parse_duration_ms(value, what)
        ms = case value
             when Integer, Float then (value * 1000).round
             when /\A(\d+(?:\.\d+)?)\s*ms\z/ then Float(Regexp.last_match(1)).round
             when /\A(\d+(?:\.\d+)?)\s*s?\z/ then (Float(Regexp.last_match(1)) * 1000).round
             end
        raise Error, where("#{what}: #{value.inspect} is not a duration like 30, \"500ms\" or \"2s\"") if ms.nil? || ms.negative?

        ms
      end

      # "50ms", "0.05s", 50 (milliseconds) → Integer milliseconds.
      def parse_ms(value)
        case value
        when Integer then value
        when Float then (value * 1000).round
        when /\A(\d+(?:\.\d+)?)\s*ms\z/ then Float(Regexp.last_match(1)).round
        when /\A(\d+(?:\.\d+)?)\s*s\z/ then (Float(Regexp.last_match(1)) * 1000).round
        else raise Error, where("target_queue_p95: #{value.inspect} is not a duration like \"50ms\" or \"0.05s\"")
        end
      end
    end
  end
end
