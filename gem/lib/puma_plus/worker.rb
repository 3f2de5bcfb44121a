# frozen_string_literal: true

require "io/wait"
require "socket"
require_relative "connection"

module PumaPlus
  # A worker process: slots (threads, or fibers with `fibers:`), each with its own connection
  # to the server's worker socket (PROTOCOL.md: one connection = one unit of capacity). It
  # starts with `threads` slots; SLOTS on the monitor connection starts more, SLOT_CLOSE on a
  # slot's connection ends that slot. Forked by the Shepherd with the app already loaded.
  #
  # SIGTERM: idle connections close at once; busy ones finish their in-flight request, then
  # close; the process exits 0 when every thread is done. The worker exits when the server
  # has closed every connection (or its monitor connection), so no worker outlives the
  # server. It outlives its shepherd: when the shepherd dies (`life_pipe` reaches EOF) the
  # server adopts the worker, which keeps serving (docs/PROTOCOL.md "Shepherd restart").
  #
  # One more thread holds the monitor connection (docs/PROTOCOL.md "Monitor connection"):
  # it sends HEARTBEAT at the period the server asks for, so a stopped or wedged process is
  # noticed (worker_timeout), and relays the server's TIMEOUT to the connection running that
  # request (PumaPlus::RequestTimeout in the app's thread).
  class Worker
    CONNECT_ATTEMPTS = 50
    CONNECT_DELAY = 0.1
    # Until the server's HEARTBEAT_INTERVAL arrives.
    DEFAULT_HEARTBEAT_S = 1.0
    # The most slots one process takes from SLOTS (the server clamps to -max-slots first).
    SLOTS_LIMIT = 4096

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

    # `threads` is the initial number of slots; with `fibers`, they are fibers under the async
    # gem's Fiber scheduler on one thread instead of threads (docs/RACK.md "Fiber slots").
    # `config` (a Config or nil) supplies the before_thread_start / before_thread_exit hooks.
    def initialize(app, socket_path:, threads:, worker_index:, fibers: false, life_pipe: nil, log: $stderr, config: nil)
      @config = config
      @app = app
      @socket_path = socket_path
      @target = threads
      @fibers = fibers
      @worker_index = worker_index
      @life_pipe = life_pipe
      @log = log
      # rack.multithread: false only for one thread slot (-max-slots then keeps it one unless
      # the operator raised it); fiber slots run requests concurrently.
      @proto_env = self.class.prototype_env(threads: fibers ? 2 : threads, worker_index: worker_index)
      @connections = {}
      @lock = Mutex.new
      @stopping = false
      @live = {} # thread_index => true, for every slot started and not ended
      @threads = []
    end

    # Runs until stopped; returns the process exit status to use.
    def run
      stop_r, stop_w = IO.pipe
      @done_r, @done_w = IO.pipe
      trap("TERM") { stop_w.write_nonblock(".", exception: false) }
      @stop_w = stop_w
      start_fiber_host if @fibers
      set_slots(@target)
      monitor = Thread.new { monitor_main }
      watch = [stop_r, @done_r, @life_pipe].compact
      # Block (no polling) until SIGTERM (or the monitor connection's EOF: the server is gone)
      # or every slot has ended (each writes one byte to @done_w as it ends; SLOTS may have
      # started more meanwhile). The shepherd's death is only logged: the worker serves on.
      loop do
        ready = IO.select(watch)[0]
        if ready.include?(@done_r)
          @done_r.read_nonblock(256, exception: false)
          break if @lock.synchronize { @live.empty? }
        end
        shepherd_gone?(watch) if @life_pipe && ready.include?(@life_pipe)
        next unless ready.include?(stop_r)

        stop
        break
      end
      @lock.synchronize { @threads.dup }.each(&:join)
      stop_fiber_host
      monitor.kill
      0
    ensure
      trap("TERM", "DEFAULT")
    end

    # SLOTS: the target slot count. Starts the missing slots (each dials in and says HELLO
    # with the lowest free thread_index); never ends one: the server ends slots with
    # SLOT_CLOSE (docs/PROTOCOL.md "SLOTS, SLOT_CLOSE"). Called from the monitor thread.
    def set_slots(count)
      count = count.clamp(1, SLOTS_LIMIT)
      indexes = @lock.synchronize do
        next [] if @stopping

        @target = count
        Array.new([count - @live.size, 0].max) do
          index = 0
          index += 1 while @live.key?(index)
          @live[index] = true
          index
        end
      end
      indexes.each { |i| start_slot(i) }
      indexes.size
    end

    # Live slots (started, not ended).
    def slot_count = @lock.synchronize { @live.size }

    def stop
      @lock.synchronize do
        @stopping = true
        @connections.each_value(&:stop)
      end
    end

    private

    # The life pipe readable: EOF means the shepherd died. The worker serves on (the server
    # adopts it and a new shepherd takes over); the pipe leaves the watch list.
    def shepherd_gone?(watch)
      return false unless @life_pipe.read_nonblock(1, exception: false).nil?

      watch.delete(@life_pipe)
      @log.puts("puma-plus worker #{Process.pid}: the shepherd is gone; serving on (the server adopts this worker)")
      true
    end

    # The monitor connection: HEARTBEAT every interval; TIMEOUT frames interrupt a request.
    # Its EOF means the server is gone: the worker stops.
    def monitor_main
      sock = connect
      return unless sock

      decoder = Wire::Decoder.new
      # WebSocket commands from threads that run no request or event (docs/RACK.md
      # "WebSockets") share this connection with the beats: one lock around every write.
      write_lock = Mutex.new
      write = ->(bytes) { write_lock.synchronize { sock.write(bytes) } }
      WebSocket.monitor_out = write
      # Each beat carries the process's live heap slots (GC.stat), which /stats shows per worker.
      beat = -> { Wire.encode(Wire::Heartbeat.new(Process.pid, @worker_index, GC.stat(:heap_live_slots))) }
      write.call(beat.call)
      interval = DEFAULT_HEARTBEAT_S
      next_beat = monotonic + interval
      loop do
        wait = next_beat - monotonic
        if wait <= 0
          write.call(beat.call)
          next_beat = monotonic + interval
          next
        end
        next unless sock.wait_readable(wait)

        data = sock.read_nonblock(4096, exception: false)
        next if data == :wait_readable
        break if data.nil?

        decoder.feed(data)
        while (frame = decoder.next_frame)
          case frame
          when Wire::HeartbeatInterval
            interval = frame.interval_ms / 1000.0
            PumaPlus.request_timeouts = frame.monitor_flags.anybits?(Wire::MONITOR_REQUEST_TIMEOUTS)
            next_beat = monotonic + interval
          when Wire::Timeout then interrupt(frame)
          when Wire::Slots then set_slots(frame.count)
          else
            raise Wire::ProtocolError.new(:unexpected, "#{Wire.frame_name(frame)} frame on the monitor connection")
          end
        end
      end
      # EOF: the server closed it (it exited, or it is killing this worker).
      @stop_w&.write_nonblock(".", exception: false) unless @stopping
    rescue Wire::ProtocolError => e
      @log.puts("puma-plus worker #{Process.pid}: monitor connection: #{e.message}; no more heartbeats")
    rescue IOError, SystemCallError
      @stop_w&.write_nonblock(".", exception: false) unless @stopping
    rescue StandardError => e
      # Without heartbeats the server kills this worker after worker_timeout: say why.
      @log.puts("puma-plus worker #{Process.pid}: monitor thread died: #{e.class}: #{e.message}; no more heartbeats")
    ensure
      WebSocket.monitor_out = nil
      sock&.close
    end

    def interrupt(frame)
      conn = @lock.synchronize { @connections[frame.thread_index] }
      return if conn&.interrupt(frame.request_id)

      @log.puts("puma-plus worker #{Process.pid}: TIMEOUT for request #{frame.request_id}: " \
                "not running on thread #{frame.thread_index} any more")
    end

    def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)

    def start_slot(index)
      if @fibers
        @fiber_queue << index
        @fiber_wake_w.write_nonblock(".", exception: false)
      else
        thread = Thread.new { thread_main(index) }
        @lock.synchronize do
          @threads.select!(&:alive?) # slots ended by SLOT_CLOSE: no need to join them later
          @threads << thread
        end
      end
    end

    def thread_main(index)
      @config&.run_hooks(:before_thread_start)
      slot_main(index)
    ensure
      begin
        @config&.run_hooks(:before_thread_exit)
      rescue StandardError => e
        @log.puts("puma-plus worker #{Process.pid}: before_thread_exit hook: #{e.class}: #{e.message}")
      end
      slot_ended(index)
    end

    # One slot: dial, HELLO, serve until the connection ends; dial again only after an aborted
    # response (never after SLOT_CLOSE, EOF or a stop).
    def slot_main(index)
      loop do
        sock = connect
        return unless sock

        conn = Connection.new(@app, sock, @proto_env, worker_index: @worker_index, thread_index: index,
                                                      log: @log, fiber: @fibers,
                                                      fiber_interrupt: @fibers ? @fiber_interrupt_call : nil)
        @lock.synchronize do
          conn.stop if @stopping
          @connections[index] = conn
        end
        result = conn.run
        @lock.synchronize { @connections.delete(index) }
        sock.close unless sock.closed?
        return unless result == :aborted && !@stopping
      end
    rescue Connection::StopRequested
      nil # a stop that raced the end of a connection: the slot was ending anyway
    rescue Exception => e # rubocop:disable Lint/RescueException
      @log.puts("puma-plus worker #{Process.pid}: slot #{index} died: #{e.class}: #{e.message}\n  " +
                Array(e.backtrace).join("\n  "))
    end

    def slot_ended(index)
      @lock.synchronize { @live.delete(index) }
      @done_w&.write_nonblock("d", exception: false)
    end

    # ---- fiber slots (docs/RACK.md "Fiber slots") ------------------------------------------
    # One thread runs the async gem's reactor (a Fiber scheduler); each slot is a task in it
    # with its own connection, whose socket reads and writes yield to the scheduler, as does
    # the app's scheduler-aware I/O (sleep, Net::HTTP, pg). SLOTS reaches the reactor through
    # a queue and a wake pipe (it arrives on the monitor thread).

    def start_fiber_host
      require_relative "fiber_slots"
      @fiber_queue = Thread::Queue.new
      @fiber_timeouts = Thread::Queue.new # [connection, request_id] from the monitor thread
      @fiber_interrupt_call = method(:fiber_interrupt)
      @fiber_wake_r, @fiber_wake_w = IO.pipe
      @fiber_host = Thread.new { fiber_host_main }
    end

    # A TIMEOUT for a fiber slot's request (Connection#interrupt, on the monitor thread): the
    # fiber slots' thread raises it into the slot's fiber (a fiber cannot be raised into from
    # another thread).
    def fiber_interrupt(conn, request_id)
      @fiber_timeouts << [conn, request_id]
      @fiber_wake_w.write_nonblock(".", exception: false)
    end

    def stop_fiber_host
      return unless @fiber_host

      @fiber_host_done = true
      @fiber_wake_w.write_nonblock(".", exception: false)
      @fiber_host.join
    end

    def fiber_host_main
      @config&.run_hooks(:before_thread_start)
      Sync do |task|
        until @fiber_host_done
          @fiber_wake_r.wait_readable
          @fiber_wake_r.read_nonblock(4096, exception: false)
          until @fiber_queue.empty?
            index = @fiber_queue.pop
            task.async do
              slot_main(index)
            ensure
              slot_ended(index)
            end
          end
          until @fiber_timeouts.empty?
            conn, request_id = @fiber_timeouts.pop
            conn.raise_timeout_in_fiber(request_id)
          end
        end
      end
    rescue Exception => e # rubocop:disable Lint/RescueException
      @log.puts("puma-plus worker #{Process.pid}: fiber slots' thread died: #{e.class}: #{e.message}\n  " +
                Array(e.backtrace).join("\n  "))
      @lock.synchronize { @live.clear }
      @done_w&.write_nonblock("d", exception: false)
    ensure
      begin
        @config&.run_hooks(:before_thread_exit)
      rescue StandardError => e
        @log.puts("puma-plus worker #{Process.pid}: before_thread_exit hook: #{e.class}: #{e.message}")
      end
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
