# frozen_string_literal: true

module PumaPlus
  # Reads config/puma-plus.rb, a Ruby file using puma's DSL names (docs/CONFIG.md), into
  # plain settings plus hooks. Directives puma-plus has no equivalent for are not ignored
  # silently: each is recorded in #unsupported with its file and line, and the CLI reports them.
  class Config
    class Error < StandardError; end

    DEFAULTS = {
      binds: [], threads_min: 0, threads_max: 5, workers: 1, environment: nil,
      rackup: "config.ru", control_url: nil, control_token: nil,
      autoscale_min: nil, autoscale_max: nil, autoscale_target_queue_p95_ms: nil
    }.freeze

    attr_reader :settings, :hooks, :unsupported, :notes

    def initialize
      @settings = DEFAULTS.dup
      @settings[:binds] = []
      @hooks = { before_fork: [], on_worker_boot: [] }
      @unsupported = []
      @notes = []
    end

    # Evaluates `path`; raises Config::Error naming the file and line on a bad directive.
    def self.load(path)
      config = new
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

    # The DSL object the config file is evaluated in. Every method is a puma directive name.
    class Dsl
      def initialize(config, path)
        @config = config
        @path = path
      end

      def port(number, host = nil)
        number = Integer(number)
        bind_url = host ? "tcp://#{host.include?(':') ? "[#{host}]" : host}:#{number}" : "tcp://0.0.0.0:#{number}"
        set[:binds] << bind_url
      end

      def bind(url)
        raise Error, where("bind: unsupported URL #{url.inspect} (tcp:// or unix:// only)") unless url.to_s.match?(%r{\A(tcp|unix)://})

        set[:binds] << url.to_s
      end

      def threads(min, max = min)
        min = Integer(min)
        max = Integer(max)
        raise Error, where("threads: min #{min} > max #{max}") if min > max
        raise Error, where("threads: max must be at least 1") if max < 1

        set[:threads_min] = min
        set[:threads_max] = max
        note("threads: puma-plus runs exactly max (#{max}) threads per worker; min #{min} is not used") if min != max
      end

      def workers(count)
        count = Integer(count)
        raise Error, where("workers: must be at least 1 (puma-plus always forks workers)") if count < 1

        set[:workers] = count
      end

      def environment(name)
        set[:environment] = name.to_s
      end

      def rackup(path)
        set[:rackup] = path.to_s
      end

      def autoscale(min:, max:, target_queue_p95: nil)
        min = Integer(min)
        max = Integer(max)
        raise Error, where("autoscale: min #{min} > max #{max}") if min > max

        set[:autoscale_min] = min
        set[:autoscale_max] = max
        set[:autoscale_target_queue_p95_ms] = parse_ms(target_queue_p95) if target_queue_p95
      end

      def activate_control_app(url = "tcp://127.0.0.1:9293", opts = {})
        set[:control_url] = url.to_s
        set[:control_token] = opts[:auth_token] if opts[:auth_token] && !opts[:no_token]
      end

      def before_fork(&block)
        raise Error, where("before_fork needs a block") unless block

        @config.hooks[:before_fork] << block
      end

      def on_worker_boot(&block)
        raise Error, where("on_worker_boot needs a block") unless block

        @config.hooks[:on_worker_boot] << block
      end

      def preload_app!(*)
        note("preload_app!: puma-plus always preloads the app in its shepherd")
      end

      def method_missing(name, *_args, &_block)
        @config.unsupported << "#{@path}:#{file_line}: #{name}: no puma-plus equivalent, not applied"
        nil
      end

      def respond_to_missing?(*) = true

      private

      def set = @config.settings

      def note(text) = @config.notes << "#{@path}:#{file_line}: #{text}"

      def where(text) = "#{@path}:#{file_line}: #{text}"

      # The line of the config file being evaluated (the innermost frame in that file).
      def file_line = caller_locations.find { |l| l.path == @path }&.lineno

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
