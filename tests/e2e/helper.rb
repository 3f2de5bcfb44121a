# frozen_string_literal: true

# Shared harness of the end-to-end tests: starts the real puma-plus-server with the real gem
# workers on free loopback ports, waits until every worker is ready (or fails with the server's
# log, so a broken gem is a clear failure, never a skip), talks to it with real clients (curl,
# wrk, raw sockets), and stops everything it started by PID / process group.
#
#   ruby tests/e2e/test_http.rb PATH/TO/puma-plus-server
require "json"
require "minitest/autorun"
require "open3"
require "socket"
require "timeout"
require "tmpdir"
require "fileutils"

module E2E
  ROOT = File.expand_path("../..", __dir__)
  MIX = File.join(ROOT, "scenarios/apps/mix/config.ru")
  LINT = File.join(ROOT, "scenarios/apps/mix/lint.ru")

  def self.server_bin
    bin = ARGV.find { |a| !a.start_with?("-") && File.executable?(a) } || ENV["PP_SERVER_BIN"]
    bin ||= File.join(ROOT, "build/server/puma-plus-server")
    abort "e2e: puma-plus-server not found (pass its path as the first argument)" unless File.executable?(bin)
    bin
  end
  BIN = server_bin

  # The two columns of the test matrix (issue 10). Debian's: the gems of Debian packages
  # (rack 2.2, sinatra 3, rails 6.1), no Bundler. RubyGems': a pinned set (Gemfile.lock under
  # tests/apps/gemfiles/SET/) that scripts/install-gems.sh installed into build/gems. Each
  # returns the environment a process needs to run in that column, or fails the test naming
  # what is missing: a missing gem is never a skip.
  GEM_HOME = ENV.fetch("PP_GEM_HOME", File.join(ROOT, "build/gems"))
  COLUMN_ENV_KEYS = %w[GEM_HOME GEM_PATH BUNDLE_GEMFILE BUNDLE_FROZEN BUNDLE_APP_CONFIG
                       BUNDLE_USER_HOME RUBYOPT BUNDLE_BIN_PATH].freeze

  def self.debian_env
    env = COLUMN_ENV_KEYS.to_h { |k| [k, nil] }
    out, status = Open3.capture2e(env, "ruby", "-e", 'require "rack"; print Rack.release')
    unless status.success? && out.start_with?("2.2")
      raise Minitest::Assertion, "Debian column: Debian's rack 2.2 not loadable (got #{out.inspect}); " \
                                 "run scripts/install-deps.sh (package ruby-rack)"
    end
    env
  end

  def self.rubygems_env(set = "rubygems")
    gemfile = File.join(ROOT, "tests/apps/gemfiles", set, "Gemfile")
    env = COLUMN_ENV_KEYS.to_h { |k| [k, nil] }.merge(
      "GEM_HOME" => GEM_HOME, "BUNDLE_GEMFILE" => gemfile, "BUNDLE_FROZEN" => "true",
      "BUNDLE_APP_CONFIG" => File.join(GEM_HOME, ".bundle-config"),
      "BUNDLE_USER_HOME" => File.join(GEM_HOME, ".bundle-home"), "RUBYOPT" => "-rbundler/setup"
    )
    check = env.merge("RUBYOPT" => nil)
    out, status = Open3.capture2e(check, "bundle", "check")
    unless status.success?
      raise Minitest::Assertion, "RubyGems column: the gems locked in #{gemfile}.lock are not all in " \
                                 "#{GEM_HOME}; run scripts/install-gems.sh\n#{out}"
    end
    env
  end

  def self.free_port
    s = TCPServer.new("127.0.0.1", 0)
    port = s.addr[1]
    s.close
    port
  end

  # One running server (its own process group: the shepherd and the workers are in it too).
  class Server
    attr_reader :port, :control_port, :pid, :log_path, :args, :https_port

    # `command`, when given, starts something other than the server binary (e.g. `bundle exec
    # puma-plus ...` in an app's folder): it is called with (port, control_port) and returns
    # the argv; it must make the server listen there with `workers` workers.
    # tls: true adds a TLS listener (-listen-tls) on a free port of its own (https_port);
    # pass -tls-cert/-tls-key in extra, or none for the generated development certificate.
    def initialize(app: MIX, workers: 1, threads: 4, extra: [], boot_timeout: 30, token: nil, env: {},
                   command: nil, chdir: nil, tls: false)
      @token = token
      extra += ["-control-token", token] if token
      if tls
        @https_port = E2E.free_port
        extra += ["-listen-tls", "127.0.0.1:#{@https_port}"]
      end
      @port = E2E.free_port
      @control_port = E2E.free_port
      @workers = workers
      @log_path = "/tmp/pp-e2e-#{Process.pid}-#{@port}.log"
      @args = if command
                command.call(@port, @control_port)
              else
                [BIN, "-app", app, "-workers", workers.to_s, "-threads", threads.to_s,
                 "-listen", "127.0.0.1:#{@port}", "-control", "127.0.0.1:#{@control_port}",
                 "-gem-dir", File.join(ROOT, "gem"), *extra]
              end
      # The gem's C codec as this build made it (gem/CMakeLists.txt), for the workers.
      native = File.expand_path("../gem/ext-lib", File.dirname(BIN))
      env = { "RUBYLIB" => native }.merge(env) if Dir.exist?(native)
      opts = { in: File::NULL, out: @log_path, err: [:child, :out], pgroup: true }
      opts[:chdir] = chdir if chdir
      @pid = Process.spawn(env, *@args, **opts)
      wait_ready(boot_timeout)
    end

    def log
      File.exist?(@log_path) ? File.read(@log_path) : ""
    end

    def fail_with_log(msg)
      stop
      raise Minitest::Assertion, "#{msg}\n--- server log (#{@log_path}) ---\n#{log[-4000..] || log}"
    end

    def wait_ready(timeout)
      deadline = now + timeout
      loop do
        if (done = Process.waitpid(@pid, Process::WNOHANG))
          @pid = nil
          fail_with_log("puma-plus-server exited during boot (status #{$?.inspect})")
        end
        begin
          st = stats
          return if st["booted_workers"] == @workers && st["queue"]["slots_ready"].positive?
        rescue StandardError
          nil
        end
        fail_with_log("workers not ready within #{timeout}s (is the gem broken?)") if now > deadline
        sleep 0.05
      end
    end

    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

    def control_get(path, headers = {}, auth: true)
      headers = headers.merge("Authorization" => "Bearer #{@token}") if @token && auth
      Timeout.timeout(10) do
        s = TCPSocket.new("127.0.0.1", @control_port)
        s.write("GET #{path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" +
                headers.map { |k, v| "#{k}: #{v}\r\n" }.join + "\r\n")
        raw = s.read
        s.close
        head, body = raw.split("\r\n\r\n", 2)
        [head[/\AHTTP\/1\.1 (\d+)/, 1].to_i, body]
      end
    end

    def stats
      status, body = control_get("/stats")
      raise "GET /stats: #{status}" unless status == 200

      JSON.parse(body)
    end

    # SIGTERM, wait (bounded), then SIGKILL the whole group. Returns the exit status or nil.
    def stop(signal: "TERM", timeout: 20)
      return @status unless @pid

      begin
        Process.kill(signal, @pid)
      rescue Errno::ESRCH
        nil
      end
      deadline = now + timeout
      until (done = Process.waitpid(@pid, Process::WNOHANG))
        break if now > deadline

        sleep 0.05
      end
      @status = done ? $? : nil
      begin
        Process.kill("KILL", -@pid) # the shepherd and workers, whatever state they are in
      rescue Errno::ESRCH, Errno::EPERM
        nil
      end
      Process.waitpid(@pid) rescue nil unless done
      @pid = nil
      # Under ASan/UBSan builds a sanitizer report in the server's log fails the test.
      if log =~ /ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer/
        raise Minitest::Assertion, "sanitizer report in #{@log_path}:\n#{log[-4000..] || log}"
      end
      @status
    end
  end

  # A raw HTTP/1.1 exchange: writes `request`, reads responses until `count` have arrived or
  # the connection closed. Returns [[status, headers(hash, lower-case), body], ...].
  def self.raw(port, request, count: 1, timeout: 20, host: "127.0.0.1")
    Timeout.timeout(timeout) do
      s = TCPSocket.new(host, port)
      s.write(request)
      reader = ResponseReader.new(s)
      out = []
      count.times do
        r = reader.next_response
        break unless r

        out << r
      end
      s.close
      out
    end
  end

  # Incremental HTTP/1.1 response reader over a socket (Content-Length, chunked, or EOF).
  class ResponseReader
    def initialize(sock, head_request: false)
      @s = sock
      @buf = +""
      @head = head_request
    end

    def fill
      chunk = @s.readpartial(65_536)
      @buf << chunk
      true
    rescue EOFError, Errno::ECONNRESET
      false
    end

    def next_response
      wait_for { @buf.include?("\r\n\r\n") }
      return nil unless @buf.include?("\r\n\r\n")

      head, rest = @buf.split("\r\n\r\n", 2)
      @buf = rest
      lines = head.split("\r\n")
      status = lines.shift[/\AHTTP\/1\.[01] (\d+)/, 1].to_i
      headers = {}
      lines.each do |l|
        k, v = l.split(":", 2)
        (headers[k.downcase] ||= []) << v.strip
      end
      headers = headers.transform_values { |v| v.join(", ") }
      return next_response if status == 100

      body = +""
      if @head || status == 204 || status == 304
        # no body
      elsif headers["content-length"]
        n = headers["content-length"].to_i
        wait_for { @buf.bytesize >= n }
        body = @buf.byteslice(0, n)
        @buf = @buf.byteslice(n..) || +""
      elsif headers["transfer-encoding"]&.include?("chunked")
        loop do
          break unless wait_for { @buf.include?("\r\n") }
          size_line, @buf = @buf.split("\r\n", 2)
          size = size_line.to_i(16)
          wait_for { @buf.bytesize >= size + 2 }
          body << @buf.byteslice(0, size)
          @buf = @buf.byteslice(size + 2..) || +""
          next unless size.zero?

          break
        end
      else
        wait_for { false }
        body = @buf
        @buf = +""
      end
      [status, headers, body]
    end

    # Reads until the block is true (returns true) or the connection ends (returns false).
    def wait_for
      loop do
        return true if yield
        return false unless fill
      end
    end
  end

  # What a test class gains with `include E2E::Helpers`.
  module Helpers
    # Starts a Server (options as Server.new), runs the block with it, then stops it with
    # SIGTERM: the test also fails unless the server then exited 0.
    def with_server(**opts)
      srv = Server.new(**opts)
      begin
        yield srv
      ensure
        status = srv.stop
      end
      assert status&.success?, "server did not exit 0 on SIGTERM: #{status.inspect}\n#{srv.log[-3000..]}"
    end
  end

  # Debian's python3: its python3-* modules (websockets, h2) load only there.
  PYTHON = "/usr/bin/python3"

  # Fails the test unless PYTHON has python3-websockets.
  def self.need_python_websockets
    return if system(PYTHON, "-c", "import websockets", out: File::NULL, err: File::NULL)

    raise Minitest::Assertion, "#{PYTHON} with python3-websockets is missing (scripts/install-deps.sh installs it)"
  end

  # A real WebSocket client (python3-websockets) in a child process (at most 60 s), driven by
  # lines. Its first line is "OPEN <subprotocol>" (None: none agreed) or "REFUSED <status>".
  # Lines to it: "T text", "B hex" (a frame each), "C code" (a Close); a closed stdin closes
  # with 1000. Lines from it: "T text" (newlines as \n) or "B hex" a frame, then
  # "CLOSED code reason" when the WebSocket closed.
  class WsRelay
    SCRIPT = <<~PY
      import asyncio, sys, websockets
      async def main(url, protos, origin):
          try:
              ws = await websockets.connect(url, origin=origin or None, open_timeout=10, close_timeout=5,
                                            max_size=None, subprotocols=[p for p in protos.split(",") if p] or None)
          except websockets.exceptions.InvalidHandshake as e:
              status = getattr(e, "status_code", None) or getattr(getattr(e, "response", None), "status_code", "?")
              print("REFUSED", status, flush=True)
              return
          print("OPEN", ws.subprotocol, flush=True)
          loop = asyncio.get_running_loop()
          async def pump():
              while True:
                  line = await loop.run_in_executor(None, sys.stdin.readline)
                  if not line:
                      await ws.close()
                      return
                  kind, _, rest = line.rstrip("\\n").partition(" ")
                  if kind == "T":
                      await ws.send(rest)
                  elif kind == "B":
                      await ws.send(bytes.fromhex(rest))
                  elif kind == "C":
                      await ws.close(int(rest))
                      return
          sender = asyncio.ensure_future(pump())
          try:
              async for msg in ws:
                  if isinstance(msg, bytes):
                      print("B", msg.hex(), flush=True)
                  else:
                      print("T", msg.replace("\\n", "\\\\n"), flush=True)
          except websockets.exceptions.ConnectionClosed:
              pass
          finally:
              sender.cancel()
          print("CLOSED", ws.close_code, ws.close_reason, flush=True)
      asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
    PY

    attr_reader :first

    # protocols: the subprotocols offered, comma-separated; origin: the Origin sent ("" none).
    def initialize(url, protocols: "", origin: "")
      @stdin, @stdout, @stderr, @wait = Open3.popen3("timeout", "60", PYTHON, "-c", SCRIPT, url, protocols, origin)
      @first = line(15)
    end

    # The next line within `timeout` s (chomped), or :timeout, or :ended (the client exited).
    def read_line(timeout)
      return :timeout unless IO.select([@stdout], nil, nil, timeout)

      l = @stdout.gets
      l ? l.chomp : :ended
    end

    # The next line; fails the test if none comes within `timeout` s or the client ended.
    def line(timeout = 10)
      case (l = read_line(timeout))
      when :timeout then raise Minitest::Assertion, "nothing from the client within #{timeout}s: #{err}"
      when :ended then raise Minitest::Assertion, "the client ended: #{err}"
      else l
      end
    end

    # Nothing arrives within `seconds`.
    def quiet?(seconds) = IO.select([@stdout], nil, nil, seconds).nil?

    # What the client wrote on stderr so far (it may still be running: waits `wait` s at most).
    def err(wait = 1) = IO.select([@stderr], nil, nil, wait) ? @stderr.read_nonblock(65_536, exception: false).to_s : ""

    def text(s) = @stdin.puts("T #{s}")

    def binary(bytes) = @stdin.puts("B #{bytes.unpack1('H*')}")

    def close_with(code) = @stdin.puts("C #{code}")

    def close
      @stdin.close unless @stdin.closed?
      begin
        Process.kill("TERM", @wait.pid) if @wait.alive? && !@wait.join(5)
      rescue Errno::ESRCH
        nil
      end
      @wait.value
      [@stdout, @stderr].each { |io| io.close unless io.closed? }
    end
  end

  # curl bounds itself (--max-time), so a hang fails the test instead of hanging the suite.
  def self.curl(*args, timeout: 30)
    Open3.capture3("curl", "-sS", "--max-time", timeout.to_s, *args)
  end
end
