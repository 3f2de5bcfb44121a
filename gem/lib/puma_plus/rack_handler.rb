# frozen_string_literal: true

require_relative "cli"

module PumaPlus
  # The Rack handler (docs/CONFIG.md "Rack handler"): how `rails server -u puma_plus`,
  # `rackup -s puma_plus` and Rackup::Handler.get(:puma_plus) start puma-plus. Registered as
  # Rackup::Handler::PumaPlus (rackup 2, Rack 3) and Rack::Handler::PumaPlus (Rack 2), as puma
  # registers `puma`.
  #
  # puma-plus runs the app in worker processes that a shepherd forks after loading the rackup
  # file itself, so the app object the caller built cannot be handed over: #run execs the
  # `puma-plus` command (same pid) with the caller's rackup file (options[:config]) and its
  # port, host, environment, threads and pid file as flags. config/puma-plus.rb still applies
  # (workers, hooks, ...); as in puma's handler, the host and port override the file's binds
  # when the user gave them (Rails' :user_supplied_options) and are only a default otherwise.
  module RackHandler
    # Options as rackup and Rails pass them → the `puma-plus` command's argv.
    def self.argv(options)
      options = options.transform_keys(&:to_sym)
      rackup = options[:config]
      unless rackup && File.file?(rackup.to_s)
        raise ArgumentError, "puma-plus runs a rackup file (its workers load it themselves): " \
                             "no config.ru given or found (#{rackup.inspect})"
      end

      argv = []
      supplied = options[:user_supplied_options]&.map(&:to_sym)
      if options[:Host] || options[:Port]
        bind = bind_url(options[:Host], options[:Port])
        explicit = supplied.nil? || supplied.include?(:Host) || supplied.include?(:Port)
        argv.push(explicit ? "--bind" : "--default-bind", bind)
      end
      argv.push("--environment", options[:environment].to_s) if options[:environment]
      if options[:Threads]
        min, max = options[:Threads].to_s.split(":", 2)
        argv.push("--threads", "#{min}:#{max || min}")
      end
      argv.push("--pidfile", File.expand_path(options[:pid].to_s)) if options[:pid]
      argv.push("--", "-quiet") if options[:Silent]
      argv.insert(argv.index("--") || argv.size, File.expand_path(rackup.to_s))
      argv
    end

    # Host as rackup gives it (a name, an address, a unix socket path) and Port → a bind URL.
    def self.bind_url(host, port)
      host = host.to_s
      return "unix://#{host}" if host.start_with?("/", ".", "@")

      host = "0.0.0.0" if host.empty?
      host = "[#{host}]" if host.include?(":") && !host.start_with?("[")
      "tcp://#{host}:#{Integer(port || 9292)}"
    end

    # The environment `bundle exec` would give: the workers' shepherd is a new Ruby process
    # that must resolve the same bundle as this one (bin/rails loads Bundler without RUBYOPT).
    def self.child_env
      return {} unless defined?(::Bundler) && ::Bundler.respond_to?(:default_gemfile)

      gemfile = ::Bundler.default_gemfile.to_s
      rubyopt = ENV["RUBYOPT"].to_s
      env = { "BUNDLE_GEMFILE" => gemfile }
      env["RUBYOPT"] = "-rbundler/setup #{rubyopt}".strip unless rubyopt.include?("bundler/setup")
      env
    rescue StandardError
      {}
    end

    def run(app, **options)
      _ = app # the workers load the rackup file themselves (see above)
      argv = RackHandler.argv(options)
      ENV.update(RackHandler.child_env)
      $stdout.puts("* puma-plus #{PumaPlus::VERSION}: exec puma-plus #{argv.join(' ')}") unless options[:Silent]
      $stdout.flush
      status = CLI.new(argv).run # execs the server; returns only on an error
      exit(status)
    end

    def valid_options
      {
        "Host=HOST" => "Hostname to listen on (default: localhost)",
        "Port=PORT" => "Port to listen on (default: 9292)",
        "Threads=MIN:MAX" => "threads per worker (puma-plus runs MAX)",
        "Silent" => "only errors in the server's log"
      }
    end
  end
end
