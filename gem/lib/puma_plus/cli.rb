# frozen_string_literal: true

require "uri"

require "open3"
require "optparse"
require "shellwords"
require "socket"
require_relative "config"
require_relative "ctl"

module PumaPlus
  # The `puma-plus` command (docs/CONFIG.md): resolves config/puma-plus.rb (puma's DSL names)
  # plus command-line flags into puma-plus-server flags, then execs the server. The server
  # spawns the shepherd, which finds the same config file through $PUMA_PLUS_CONFIG to run
  # the before_fork / on_worker_boot hooks.
  class CLI
    DEFAULT_CONFIG = "config/puma-plus.rb"
    GEM_DIR = File.expand_path("../..", __dir__)

    class UsageError < StandardError; end

    def initialize(argv, env: ENV, out: $stdout, err: $stderr)
      @argv = argv.dup
      @env = env
      @out = out
      @err = err
      @flags = {}
      @server_args = []
    end

    # Returns an exit status (or does not return: exec).
    def run
      return Ctl.new(@argv.drop(1), env: @env, out: @out, err: @err).run if @argv.first == "ctl"

      parse_flags
      config = load_config
      settings = resolve(config)
      command = server_command(settings)
      env = { "RACK_ENV" => settings[:environment] }
      env["PUMA_PLUS_CONFIG"] = File.expand_path(@config_path) if @config_path
      env["PUMA_PLUS_TAG"] = settings[:tag] if settings[:tag]
      env["PUMA_PLUS_RACTORS"] = settings[:ractors].to_s if settings[:ractors] # RactorSlots
      report(config, settings, command, env) if @flags[:dry_run] || config&.unsupported&.any? || config&.notes&.any?
      return 0 if @flags[:dry_run]

      redirect_output(settings)
      Dir.chdir(settings[:directory]) if settings[:directory]
      exec(env, *command)
    rescue UsageError, OptionParser::ParseError, Config::Error => e
      @err.puts("puma-plus: #{e.message}")
      2
    rescue Errno::ENOENT, Errno::EACCES => e
      @err.puts("puma-plus: cannot run #{command&.first}: #{e.message}")
      127
    end

    private

    def parse_flags
      parser = OptionParser.new do |o|
        o.banner = "usage: puma-plus [options] [rackup file] [-- puma-plus-server flags]\n" \
                   "       puma-plus ctl [-C FILE | -S STATE | --control-url URL -T TOKEN] stats|status|restart|stop|phased-restart|slots W N"
        o.on("-C", "--config PATH", "config file (default #{DEFAULT_CONFIG} if it exists)") { |v| @flags[:config] = v }
        o.on("-b", "--bind URL", "tcp://HOST:PORT, unix://PATH or ssl://HOST:PORT?cert=F&key=F (repeatable)") { |v| (@flags[:binds] ||= []) << v }
        o.on("-p", "--port PORT", Integer, "same as --bind tcp://0.0.0.0:PORT") { |v| (@flags[:binds] ||= []) << "tcp://0.0.0.0:#{v}" }
        o.on("--default-bind URL", "bind there only when neither the file nor --bind gives one (the Rack handler's default)") do |v|
          (@flags[:default_binds] ||= []) << v
        end
        o.on("-t", "--threads INT", "MIN:MAX threads per worker (starts with MAX; MIN is the run-time floor)") { |v| @flags[:threads] = v }
        o.on("--max-slots N", Integer, "most slots per worker at run time (-max-slots)") { |v| @flags[:max_slots] = v }
        o.on("--fibers N", Integer, "slots are fibers (async gem), N per worker at start (-fibers)") { |v| @flags[:fiber_slots] = v }
        o.on("-w", "--workers COUNT", Integer, "worker processes at start") { |v| @flags[:workers] = v }
        o.on("--ractors N", Integer, "N Ractor slots per worker instead of threads (experimental)") { |v| @flags[:ractors] = v }
        o.on("-e", "--environment ENV", "RACK_ENV (default development)") { |v| @flags[:environment] = v }
        o.on("--control-url URL", "control app (/stats, /metrics): tcp://HOST:PORT, HOST:PORT, unix://PATH or off") { |v| @flags[:control_url] = v }
        o.on("--control-token TOKEN", "token the control app requires") { |v| @flags[:control_token] = v }
        o.on("--pidfile PATH", "the server writes its pid there (removed at exit)") { |v| @flags[:pidfile] = v }
        o.on("-S", "--state PATH", "the server writes puma's state file there (for puma-plus ctl -S)") { |v| @flags[:state_path] = v }
        o.on("--server PATH", "puma-plus-server executable") { |v| @flags[:server] = v }
        o.on("--dry-run", "print the resolved settings and the server command, do not start") { @flags[:dry_run] = true }
        o.on("-h", "--help", "this text") do
          @out.puts(o)
          throw :help_done
        end
      end
      if (sep = @argv.index("--"))
        @server_args = @argv[(sep + 1)..]
        @argv = @argv[0...sep]
      end
      catch(:help_done) do
        rest = parser.parse(@argv)
        raise UsageError, "more than one rackup file: #{rest.join(' ')}" if rest.size > 1

        @flags[:rackup] = rest.first if rest.first
        return
      end
      @flags[:dry_run] = true
      @help = true
    end

    def load_config
      @config_path = @flags[:config] || (File.file?(DEFAULT_CONFIG) ? DEFAULT_CONFIG : nil)
      return nil unless @config_path

      Config.load(@config_path, env: @env)
    end

    # Settings from the config file, then flags over them.
    def resolve(config)
      s = (config ? config.settings : Config.env_defaults(@env)).dup
      s[:binds] = @flags[:binds] if @flags[:binds]
      s[:binds] = @flags[:default_binds] if s[:binds].empty? && @flags[:default_binds]
      if @flags[:threads]
        min, max = @flags[:threads].split(":", 2)
        max ||= min
        s[:threads_min] = Integer(min, exception: false) or raise UsageError, "--threads #{@flags[:threads]}: expected MIN:MAX"
        s[:threads_max] = Integer(max, exception: false) or raise UsageError, "--threads #{@flags[:threads]}: expected MIN:MAX"
        raise UsageError, "--threads: max must be at least 1" if s[:threads_max] < 1
      end
      s[:workers] = @flags[:workers] if @flags[:workers]
      raise UsageError, "--workers must be at least 1" if s[:workers] < 1
      s[:max_slots] = @flags[:max_slots] if @flags[:max_slots]
      raise UsageError, "--max-slots must be 1..4096" if s[:max_slots] && !(1..4096).cover?(s[:max_slots])

      s[:fiber_slots] = @flags[:fiber_slots] if @flags[:fiber_slots]
      raise UsageError, "--fibers must be 0..4096" if s[:fiber_slots] && !(0..4096).cover?(s[:fiber_slots])

      s[:fiber_slots] = nil if s[:fiber_slots]&.zero?

      s[:ractors] = @flags[:ractors] if @flags[:ractors]
      raise UsageError, "--ractors must be at least 1" if s[:ractors] && s[:ractors] < 1

      s[:threads_max] = s[:ractors] if s[:ractors] # the server's slots per worker are the Ractors

      s[:rackup] = @flags[:rackup] if @flags[:rackup]
      s[:control_url] = @flags[:control_url] if @flags[:control_url]
      s[:control_token] = @flags[:control_token] if @flags[:control_token]
      s[:pidfile] = @flags[:pidfile] if @flags[:pidfile]
      s[:state_path] = @flags[:state_path] if @flags[:state_path]
      s[:binds] = activated_binds(s) if s[:activated_sockets]
      s[:environment] = @flags[:environment] || s[:environment] || @env["RACK_ENV"] || "development"
      s
    end

    def server_command(s)
      cmd = [server_path, "-app", s[:rackup], "-workers", s[:workers].to_s, "-threads", s[:threads_max].to_s]
      # puma's `threads MIN, MAX`: the run-time floor (the server's default is 1).
      cmd.push("-min-threads", s[:threads_min].to_s) if s[:threads_min] > 1
      cmd.push("-max-slots", s[:max_slots].to_s) if s[:max_slots]
      cmd.push("-fibers", s[:fiber_slots].to_s) if s[:fiber_slots]
      tls_pair = nil
      s[:binds].each do |url|
        if url.start_with?("ssl://")
          addr, pair = tls_listen(url)
          if pair && tls_pair && pair != tls_pair
            raise UsageError, "#{url}: every ssl:// listener must use the same cert and key (one pair per server)"
          end

          tls_pair ||= pair
          cmd.push("-listen-tls", s[:proxy_protocol] ? "#{addr},proxy=#{s[:proxy_protocol]}" : addr)
        else
          addr = listen_address(url)
          cmd.push("-listen", s[:proxy_protocol] ? "#{addr},proxy=#{s[:proxy_protocol]}" : addr)
        end
      end
      cmd.push("-tls-cert", tls_pair[0], "-tls-key", tls_pair[1]) if tls_pair
      if s[:control_url]
        cmd.push("-control", s[:control_url] == "off" ? "off" : listen_address(s[:control_url]))
      end
      cmd.push("-control-token", s[:control_token]) if s[:control_token]
      cmd.push("-pidfile", s[:pidfile]) if s[:pidfile]
      cmd.push("-state-path", s[:state_path]) if s[:state_path]
      cmd.push("-header-timeout", "#{s[:header_timeout_s]}s") if s[:header_timeout_s]
      cmd.push("-keepalive-timeout", "#{s[:keepalive_timeout_s]}s") if s[:keepalive_timeout_s]
      cmd.push("-drain-timeout", "#{s[:drain_timeout_s]}s") if s[:drain_timeout_s]
      cmd.push("-max-body-size", s[:max_body_size].to_s) if s[:max_body_size]
      cmd.push("-request-timeout", "#{s[:request_timeout_ms]}ms") if s[:request_timeout_ms]
      cmd.push("-worker-kill-grace", "#{s[:worker_kill_grace_ms]}ms") if s[:worker_kill_grace_ms]
      cmd.push("-worker-timeout", "#{s[:worker_timeout_ms] / 1000}s") if s[:worker_timeout_ms]
      cmd.push("-worker-boot-timeout", "#{s[:worker_boot_timeout_ms] / 1000}s") if s[:worker_boot_timeout_ms]
      cmd.push("-max-keep-alive", s[:max_keep_alive].to_s) if s[:max_keep_alive]
      cmd.push("-early-hints") if s[:early_hints]
      cmd.push("-quiet") if s[:quiet]
      cmd.push("-remote-addr-header", s[:remote_addr_header]) if s[:remote_addr_header]
      cmd.push("-trusted-proxies", s[:trusted_proxies]) if s[:remote_addr_header] && s[:trusted_proxies]
      cmd.push("-access-log", s[:access_log]) if s[:access_log]
      cmd.push("-access-log-format", s[:access_log_format]) if s[:access_log] && s[:access_log_format]
      if s[:autoscale_min]
        cmd.push("-autoscale", "-min-workers", s[:autoscale_min].to_s, "-max-workers", s[:autoscale_max].to_s)
        cmd.push("-target-queue-p95", "#{s[:autoscale_target_queue_p95_ms]}ms") if s[:autoscale_target_queue_p95_ms]
        cmd.push("-standby", s[:autoscale_standby].to_s) if s[:autoscale_standby]
      end
      cmd.push("-gem-dir", GEM_DIR)
      cmd + @server_args
    end

    # bind_to_activated_sockets: a bind for each socket systemd passed (LISTEN_FDS for this
    # process, which execs the server: the same pid), before the file's binds, or instead of
    # them with "only". The server then matches each inherited socket by its address.
    def activated_binds(s)
      count = Integer(@env["LISTEN_FDS"].to_s, exception: false)
      pid = @env["LISTEN_PID"]
      return s[:binds] unless count && (pid.nil? || pid.empty? || pid.to_i == Process.pid)

      activated = (3...(3 + count)).filter_map do |fd|
        io = Socket.for_fd(fd)
        io.autoclose = false
        addr = io.local_address
        if addr.unix? then "unix://#{addr.unix_path}"
        elsif addr.ipv6? then "tcp://[#{addr.ip_address}]:#{addr.ip_port}"
        elsif addr.ipv4? then "tcp://#{addr.ip_address}:#{addr.ip_port}"
        end
      rescue SystemCallError, SocketError => e
        raise UsageError, "bind_to_activated_sockets: LISTEN_FDS fd #{fd}: #{e.message}"
      end
      (activated + (s[:activated_sockets] == :only ? [] : s[:binds])).uniq
    end

    # stdout_redirect: the server and everything it starts inherit these descriptors.
    def redirect_output(s)
      mode = s[:redirect_append] ? "a" : "w"
      $stdout.reopen(s[:stdout_redirect], mode) if s[:stdout_redirect]
      $stderr.reopen(s[:stderr_redirect], mode) if s[:stderr_redirect]
    end

    # tcp://HOST:PORT (or a bare HOST:PORT) → HOST:PORT, tcp://[::1]:PORT kept bracketed,
    # unix://PATH → unix:PATH.
    def listen_address(url)
      case url
      when %r{\Atcp://([^/?]+)\z} then Regexp.last_match(1)
      when /\A(\[[0-9a-fA-F:.]+\]|[^\s:\/\[\]]+)?:\d+\z/ then url
      when %r{\Aunix://(.+)\z} then "unix:#{Regexp.last_match(1)}"
      else raise UsageError, "#{url}: expected tcp://HOST:PORT, unix://PATH or ssl://HOST:PORT"
      end
    end

    # ssl://HOST:PORT?cert=PATH&key=PATH (puma's form) → [HOST:PORT, [cert, key] or nil].
    def tls_listen(url)
      m = %r{\Assl://([^/?]+)(?:\?(.*))?\z}.match(url)
      raise UsageError, "#{url}: expected ssl://HOST:PORT?cert=PATH&key=PATH" unless m

      addr = listen_address(m[1])
      params = URI.decode_www_form(m[2].to_s).to_h
      verify = params.delete("verify_mode")
      if verify && verify != "none"
        raise UsageError, "#{url}: verify_mode=#{verify}: client certificates are not supported by puma-plus-server"
      end
      cert = params.delete("cert")
      key = params.delete("key")
      params.each_key { |k| @err.puts "puma-plus: #{url}: #{k}= is not supported and ignored" }
      raise UsageError, "#{url}: cert= and key= go together" if cert.nil? != key.nil?

      [addr, cert && [File.expand_path(cert), File.expand_path(key)]]
    end

    def server_path
      return @flags[:server] if @flags[:server]
      return @env["PUMA_PLUS_SERVER"] if @env["PUMA_PLUS_SERVER"] && !@env["PUMA_PLUS_SERVER"].empty?

      installed_server_paths.each { |path| return path if File.executable?(path) }
      @env.fetch("PATH", "").split(File::PATH_SEPARATOR).each do |dir|
        path = File.join(dir, "puma-plus-server")
        return path if File.executable?(path)
      end
      repo = File.expand_path("..", GEM_DIR)
      Dir[File.join(repo, "build*/server/puma-plus-server")].max_by { |p| File.mtime(p) } || "puma-plus-server"
    end

    # Where `gem install` put the server it compiled (ext/puma_plus_server/extconf.rb): the
    # gem's lib/ (RubyGems copies built extensions there) and its extension directory.
    def installed_server_paths
      paths = [File.join(GEM_DIR, "lib", "puma-plus-server")]
      spec = Gem.loaded_specs["puma-plus"] if defined?(Gem)
      paths << File.join(spec.extension_dir, "puma-plus-server") if spec && spec.full_gem_path == GEM_DIR
      paths
    end

    def report(config, settings, command, env)
      io = @flags[:dry_run] ? @out : @err
      return if @help

      if @flags[:dry_run]
        io.puts("config: #{@config_path || '(none)'}")
        settings.each { |k, v| io.puts(format("  %-32s %s", k, v.inspect)) }
        if config
          used = config.hooks.reject { |_, blocks| blocks.empty? }
          io.puts("  hooks: #{used.map { |name, blocks| "#{name} ×#{blocks.size}" }.join(', ')}") unless used.empty?
        end
      end
      config&.notes&.each { |n| io.puts("note: #{n}") }
      config&.unsupported&.each { |u| io.puts("unsupported: #{u}") }
      return unless @flags[:dry_run]

      io.puts("env: #{env.map { |k, v| "#{k}=#{v}" }.join(' ')}")
      io.puts("exec: #{Shellwords.join(command)}")
      print_policy(io, command)
    end

    # The controller's and admission control's policy as the server would resolve it (its
    # -print-policy: the -policy file, -shed and the other overriding flags, every field, and
    # the admission rule's effective values). Skipped when the server binary is not there.
    def print_policy(io, command)
      return unless File.file?(command.first) && File.executable?(command.first)

      out, err, status = Open3.capture3(*command, "-print-policy")
      if status.success?
        io.print(out)
      else
        io.puts("policy: error: #{err.strip}")
      end
    rescue SystemCallError => e
      io.puts("policy: cannot run #{command.first}: #{e.message}")
    end
  end
end
