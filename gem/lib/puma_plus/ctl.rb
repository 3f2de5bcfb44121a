# frozen_string_literal: true

require "json"
require "optparse"
require "socket"
require "yaml"
require_relative "config"

module PumaPlus
  # `puma-plus ctl VERB` (docs/CONFIG.md "puma-plus ctl"), puma's pumactl for puma-plus: talks
  # to the server's control app. The control URL and token come from the state file (-S), else
  # --control-url / --control-token, else the config file (-C, default config/puma-plus.rb),
  # else tcp://127.0.0.1:9293 (where activate_control_app with no argument listens), no token.
  class Ctl
    VERBS = %w[stats status restart stop phased-restart slots].freeze
    DEFAULT_URL = "tcp://127.0.0.1:9293"
    # Said when nothing answers at DEFAULT_URL, which no config, flag or state file named.
    NO_CONTROL_HINT = ", or it runs without a control app: a server has none unless " \
                      "activate_control_app or --control-url gives one"
    DEFAULT_CONFIG = "config/puma-plus.rb"

    class Error < StandardError; end

    def initialize(argv, env: ENV, out: $stdout, err: $stderr)
      @argv = argv.dup
      @env = env
      @out = out
      @err = err
      @opts = {}
    end

    # Returns an exit status: 0 done, 1 the server is not running or refused, 2 bad usage.
    def run
      verb = parse
      url, token, pid = resolve
      case verb
      when "stats" then stats(url, token)
      when "status" then status(url, token, pid)
      when "restart" then restart(url, token)
      when "stop" then stop(url, token)
      when "phased-restart" then phased_restart(url, token)
      when "slots" then slots(url, token)
      end
    rescue OptionParser::ParseError, Config::Error => e
      @err.puts("puma-plus ctl: #{e.message}")
      2
    rescue Error => e
      @err.puts("puma-plus ctl: #{e.message}")
      1
    end

    private

    def parse
      parser = OptionParser.new do |o|
        o.banner = "usage: puma-plus ctl [options] #{VERBS.join('|')}"
        o.on("-C", "--config PATH", "config file (default #{DEFAULT_CONFIG} if it exists)") { |v| @opts[:config] = v }
        o.on("-S", "--state PATH", "state file the server wrote (-state-path / state_path)") { |v| @opts[:state] = v }
        o.on("--control-url URL", "tcp://HOST:PORT, HOST:PORT or unix://PATH") { |v| @opts[:control_url] = v }
        o.on("-T", "--control-token TOKEN", "the control app's token") { |v| @opts[:control_token] = v }
      end
      rest = parser.parse(@argv)
      if rest.first == "slots" # slots WORKER COUNT
        unless rest.size == 3 && rest[1..].all? { |a| a.match?(/\A\d+\z/) }
          raise OptionParser::InvalidArgument, "usage: slots WORKER_INDEX COUNT (whole numbers), got #{rest[1..].inspect}"
        end

        @slots = rest[1..].map { |a| Integer(a, 10) }
        return "slots"
      end
      raise OptionParser::InvalidArgument, "expected one verb (#{VERBS.join(', ')}), got #{rest.inspect}" unless rest.size == 1
      raise OptionParser::InvalidArgument, "unknown verb #{rest.first.inspect} (#{VERBS.join(', ')})" unless VERBS.include?(rest.first)

      rest.first
    end

    # [control URL, token or nil, pid from the state file or nil]
    def resolve
      if @opts[:state]
        st = begin
          YAML.safe_load(File.read(@opts[:state]))
        rescue Errno::ENOENT, Errno::EACCES, Psych::Exception => e
          raise Error, "state file #{@opts[:state]}: #{e.message} (is the server running?)"
        end
        raise Error, "state file #{@opts[:state]}: not puma's state format" unless st.is_a?(Hash)
        raise Error, "state file #{@opts[:state]}: no control_url (the control app is off)" unless st["control_url"]

        return [st["control_url"], @opts[:control_token] || st["control_auth_token"], st["pid"]]
      end
      url = @opts[:control_url]
      token = @opts[:control_token]
      path = @opts[:config] || (File.file?(DEFAULT_CONFIG) ? DEFAULT_CONFIG : nil)
      if path && (!url || !token)
        settings = Config.load(path, env: @env).settings
        url ||= settings[:control_url]
        token ||= settings[:control_token]
      end
      raise Error, "the control app is off (control_url off): nothing to talk to" if url == "off"

      @default_url = url.nil?
      [url || DEFAULT_URL, token, nil]
    end

    # One HTTP/1.1 request to the control app: [status, body]. Raises Error when nothing
    # listens there.
    def request(url, token, method, path)
      sock = case url
             when %r{\Aunix://(.+)\z} then UNIXSocket.new(Regexp.last_match(1))
             when %r{\A(?:tcp://)?\[([0-9a-fA-F:.]+)\]:(\d+)\z}, %r{\A(?:tcp://)?([^\s:/\[\]]*):(\d+)\z}
               host = Regexp.last_match(1)
               TCPSocket.new(host.empty? ? "127.0.0.1" : host, Integer(Regexp.last_match(2)))
             else raise Error, "control URL #{url.inspect}: expected tcp://HOST:PORT, HOST:PORT or unix://PATH"
             end
      auth = token ? "Authorization: Bearer #{token}\r\n" : ""
      sock.write("#{method} #{path} HTTP/1.1\r\nHost: puma-plus\r\n#{auth}Content-Length: 0\r\nConnection: close\r\n\r\n")
      raw = sock.read
      head, body = raw.split("\r\n\r\n", 2)
      status = head.to_s[%r{\AHTTP/1\.1 (\d{3})}, 1]
      raise Error, "#{url}: not an HTTP response from the control app" unless status

      [Integer(status), body.to_s]
    rescue Errno::ECONNREFUSED, Errno::ENOENT, Errno::EADDRNOTAVAIL => e
      raise Error, "no server at #{url} (#{e.class.name.split('::').last}): puma-plus is not running#{NO_CONTROL_HINT if @default_url}"
    ensure
      sock&.close
    end

    def checked(url, token, method, path)
      status, body = request(url, token, method, path)
      raise Error, "#{url}: 401 Unauthorized: give the control token (-T, or -S with the state file)" if status == 401
      if status >= 400
        msg = begin
          JSON.parse(body)["error"]
        rescue JSON::ParserError, TypeError
          body.strip
        end
        raise Error, "#{method} #{path}: #{status}: #{msg}"
      end
      body
    end

    def stats(url, token)
      @out.puts(checked(url, token, "GET", "/stats?pretty=1"))
      0
    end

    def status(url, token, pid)
      st = JSON.parse(checked(url, token, "GET", "/stats"))
      who = pid ? "pid #{pid}, " : ""
      @out.puts("puma-plus is running (#{who}#{st['booted_workers']} of #{st['workers']} workers booted, " \
                "queue depth #{st.dig('queue', 'depth')}, control app #{url})")
      0
    rescue Error => e
      raise unless e.message.include?("is not running")

      @out.puts("puma-plus is not running (nothing answers at #{url}#{NO_CONTROL_HINT if @default_url})")
      1
    end

    def restart(url, token)
      r = JSON.parse(checked(url, token, "POST", "/restart"))
      @out.puts("hot restart: new server pid #{r['new_pid']} is booting; pid #{r['old_pid']} serves until it is ready, then drains")
      0
    end

    # As pumactl's: returns once the server started it (202); the roll goes on in the server.
    def phased_restart(url, token)
      r = JSON.parse(checked(url, token, "POST", "/phased-restart"))
      @out.puts("phased restart: probe shepherd pid #{r['probe_pid']} is loading the new code; the workers " \
                "of phase #{r['phase']} are then replaced one at a time (watch /stats phase, old_workers " \
                "and phased_restart)")
      0
    end

    # POST /slots: worker WORKER's slot target (docs/SERVER.md "Slots at run time").
    def slots(url, token)
      worker, count = @slots
      r = JSON.parse(checked(url, token, "POST", "/slots?worker=#{worker}&count=#{count}"))
      clamped = r["slots_target"] == count ? "" : " (#{count} clamped to -min-threads..-max-slots)"
      @out.puts("worker #{r['worker']} (pid #{r['pid']}): slot target #{r['slots_target']}#{clamped}; " \
                "#{r['slots']} connected now")
      0
    end

    def stop(url, token)
      r = JSON.parse(checked(url, token, "POST", "/stop"))
      @out.puts("stopping: pid #{r['pid']} drains and exits")
      0
    end
  end
end
