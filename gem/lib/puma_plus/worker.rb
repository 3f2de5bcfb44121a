# frozen_string_literal: true

require "socket"
require_relative "connection"

module PumaPlus
  # A worker process: `threads` threads, each with its own connection to the server's worker
  # socket (PROTOCOL.md: one connection = one unit of capacity). Forked by the Shepherd with
  # the app already loaded.
  #
  # SIGTERM: idle connections close at once; busy ones finish their in-flight request, then
  # close; the process exits 0 when every thread is done. The worker also stops when the
  # shepherd dies (its `life_pipe` reaches EOF) and exits when the server has closed every
  # connection, so no worker outlives the server or the shepherd.
  class Worker
    CONNECT_ATTEMPTS = 50
    CONNECT_DELAY = 0.1

    # The frozen prototype each request's env is dup'ed from (docs/RACK.md).
    def self.prototype_env(threads:, worker_index:)
      version = defined?(::Rack::VERSION) ? ::Rack::VERSION : [1, 3]
      {
        "rack.version" => version,
        "rack.errors" => $stderr,
        "rack.multithread" => threads > 1,
        "rack.multiprocess" => true,
        "rack.run_once" => false,
        "rack.hijack?" => false,
        "SCRIPT_NAME" => "",
        "SERVER_SOFTWARE" => "puma-plus #{PumaPlus::VERSION}",
        "puma_plus.worker_index" => worker_index
      }.freeze
    end

    # `config` (a Config or nil) supplies the before_thread_start / before_thread_exit hooks.
    def initialize(app, socket_path:, threads:, worker_index:, life_pipe: nil, log: $stderr, config: nil)
      @config = config
      @app = app
      @socket_path = socket_path
      @thread_count = threads
      @worker_index = worker_index
      @life_pipe = life_pipe
      @log = log
      @proto_env = self.class.prototype_env(threads: threads, worker_index: worker_index)
      @connections = {}
      @lock = Mutex.new
      @stopping = false
    end

    # Runs until stopped; returns the process exit status to use.
    def run
      stop_r, stop_w = IO.pipe
      @done_r, @done_w = IO.pipe
      trap("TERM") { stop_w.write_nonblock(".", exception: false) }
      threads = Array.new(@thread_count) { |i| Thread.new { thread_main(i) } }
      watch = [stop_r, @done_r, @life_pipe].compact
      # Block (no polling) until SIGTERM, the shepherd's death, or every thread has ended
      # (each thread writes one byte to @done_w as it ends).
      ended = 0
      while ended < @thread_count
        ready = IO.select(watch)[0]
        if ready.include?(@done_r)
          ended += (@done_r.read_nonblock(256, exception: false) || "").bytesize
          next unless ready.include?(stop_r) || ready.include?(@life_pipe)
        end
        if @life_pipe && ready.include?(@life_pipe) && @life_pipe.read_nonblock(1, exception: false).nil?
          @log.puts("puma-plus worker #{Process.pid}: shepherd is gone, stopping")
        end
        stop
        break
      end
      threads.each(&:join)
      0
    ensure
      trap("TERM", "DEFAULT")
    end

    def stop
      @lock.synchronize do
        @stopping = true
        @connections.each_value(&:stop)
      end
    end

    private

    def thread_main(index)
      @config&.run_hooks(:before_thread_start)
      loop do
        sock = connect
        return unless sock

        conn = Connection.new(@app, sock, @proto_env, worker_index: @worker_index,
                                                      thread_index: index, log: @log)
        @lock.synchronize do
          conn.stop if @stopping
          @connections[index] = conn
        end
        result = conn.run
        @lock.synchronize { @connections.delete(index) }
        sock.close
        return unless result == :aborted && !@stopping
      end
    rescue Connection::StopRequested
      nil # a stop that raced the end of a connection: the thread was ending anyway
    rescue Exception => e # rubocop:disable Lint/RescueException
      @log.puts("puma-plus worker #{Process.pid}: thread #{index} died: #{e.class}: #{e.message}\n  " +
                Array(e.backtrace).join("\n  "))
    ensure
      begin
        @config&.run_hooks(:before_thread_exit)
      rescue StandardError => e
        @log.puts("puma-plus worker #{Process.pid}: before_thread_exit hook: #{e.class}: #{e.message}")
      end
      @done_w&.write_nonblock("d", exception: false)
    end

    def connect
      attempts = 0
      begin
        return nil if @stopping

        UNIXSocket.new(@socket_path)
      rescue Errno::ENOENT, Errno::ECONNREFUSED, Errno::EAGAIN => e
        attempts += 1
        if attempts >= CONNECT_ATTEMPTS
          @log.puts("puma-plus worker #{Process.pid}: cannot connect to #{@socket_path}: #{e.message}")
          return nil
        end
        sleep CONNECT_DELAY
        retry
      end
    end
  end
end
