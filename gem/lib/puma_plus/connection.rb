# frozen_string_literal: true

require "io/nonblock"
require "socket"
require "stringio"
require_relative "wire"
require_relative "response"
require_relative "stream_input"
require_relative "spooled_input"
require_relative "response_stream"
require_relative "request_timeout"
require_relative "app_hooks"
require_relative "websocket"

module PumaPlus
  # One worker thread's connection to puma-plus-server (docs/PROTOCOL.md): says HELLO, then
  # serves one request at a time: REQUEST → Rack env → app.call → RESPONSE_HEAD, RESPONSE_BODY*,
  # RESPONSE_END. This is the hot path: the env is a dup of a frozen prototype plus the pairs
  # the server built (decoded straight into it), and a small response goes out in one write.
  #
  # #run returns why the connection ended: :eof (the server closed it, or the worker is
  # stopping), :closed (SLOT_CLOSE: the server ended this slot), :protocol_error (the server
  # broke the protocol; logged), or :aborted (the app
  # failed after part of its response was on the wire: the connection is closed so that the
  # server answers 502 instead of passing on a truncated body; the caller may reconnect).
  class Connection
    READ_SIZE = 64 * 1024
    # An Array body is gathered up to this many bytes before a write.
    FLUSH_AT = 256 * 1024
    CAPABILITIES = Wire::CAP_CPU_TIME
    RACK_INPUT = "rack.input"
    CANCELLED = "puma_plus.cancelled"
    RESPONSE_FINISHED = "rack.response_finished"
    AFTER_REPLY = "rack.after_reply"
    HIJACK_P = "rack.hijack?"
    HIJACK = "rack.hijack"
    HIJACK_IO = "rack.hijack_io"
    HIJACK_BUFFERED = "puma_plus.hijack_buffered"
    EARLY_HINTS = "rack.early_hints"
    WS_OUT = WebSocket::OUT_KEY
    WEBSOCKET_P = WebSocket::WEBSOCKET_P

    # Raised inside #handle when the response cannot be completed honestly.
    class Aborted < StandardError; end

    # The socket to the server failed (reset, broken pipe): this connection is over.
    class ConnectionLost < StandardError; end

    # Raised from a Streaming Body's stream.write once the server sent CANCEL (the client went
    # away), as a socket write would raise; the response then ends as a cancelled one does.
    class ClientGone < IOError; end

    # Delivered by #stop with Thread#raise; only ever raised while the thread is idle, waiting
    # for the next REQUEST (it is masked everywhere else, see #run).
    class StopRequested < Exception; end # rubocop:disable Lint/InheritException

    STOP_ON_BLOCKING = { StopRequested => :on_blocking }.freeze # one Hash less per request
    # The masks of the request-timeout machinery, built once (a literal makes a Hash per call).
    TIMEOUT_NEVER = { RequestTimeout => :never }.freeze
    TIMEOUT_IMMEDIATE = { RequestTimeout => :immediate }.freeze
    # Backtrace paths that are not the app's (#timeout_note): this gem, the async gem's
    # scheduler and its io-event selector.
    NOT_APP_FRAME = %r{/puma_plus/|/gems/async-\d|/gems/io-event-\d}

    attr_reader :thread_index

    # `proto_env` is the worker's frozen prototype env (see Worker.prototype_env); `log` takes
    # #puts.
    # `fiber`: the connection is a fiber slot under a Fiber scheduler (Worker, fibers:): its
    # socket stays non-blocking so that every wait yields to the scheduler, and #stop wakes it
    # by shutting down the read side instead of Thread#raise (its thread hosts other slots).
    # `fiber_interrupt`: with `fiber`, a callable (connection, request_id) that has the fiber
    # slots' thread call #raise_timeout_in_fiber (Worker#fiber_interrupt): a fiber can only be
    # raised into from its own thread.
    def initialize(app, sock, proto_env, worker_index:, thread_index:, log: $stderr, fiber: false,
                   ractor: false, fiber_interrupt: nil)
      @app = app
      # HELLO's capabilities: CAP_RACTOR says this slot is a Ractor (the server counts them).
      # A fiber slot shares its thread with the other fibers, so the thread's CPU clock over a
      # request counts theirs too (measured: 2 x 14 fiber slots on /mix/5/300 read ~5x the
      # request's CPU, and rule 4b's CPU bound stopped their growth): no CAP_CPU_TIME, cpu_ns
      # -1, and the server uses the worker's process CPU per completion instead.
      @capabilities = ractor ? CAPABILITIES | Wire::CAP_RACTOR : CAPABILITIES
      @capabilities &= ~Wire::CAP_CPU_TIME if fiber
      @cpu_clock = !fiber
      @sock = sock
      @fiber = fiber
      @fiber_interrupt = fiber_interrupt
      # Blocking mode (Ruby makes sockets non-blocking): the wait for the next REQUEST is then
      # one read(2) that sleeps in the kernel, GVL released, instead of read (EAGAIN), poll,
      # read. Thread#raise still wakes it (EINTR). poll_cancel's read_nonblock puts the socket
      # back in non-blocking mode; it works either way.
      sock.nonblock = false if !fiber && sock.respond_to?(:nonblock=)
      # The descriptor #send_out writes to directly (a socket, the C codec loaded), or nil.
      @send_fd = sock.fileno if sock.is_a?(BasicSocket) && Wire.respond_to?(:native_send_nowait)
      @worker_index = worker_index
      @thread_index = thread_index
      @log = log
      @pending = []
      @rbuf = String.new(capacity: READ_SIZE, encoding: Encoding::BINARY)
      # Descriptors received with the frames (SCM_RIGHTS), oldest first: a REQUEST flagged
      # BODY_FILE takes the next one (its spooled body). Reads use recvmsg where the socket
      # has it: a plain read(2) would drop a descriptor riding on the bytes.
      @fds = []
      @recvmsg = sock.is_a?(BasicSocket)
      # A thread slot with the C codec: its recvmsg in C (Wire.native_recv), which costs what
      # readpartial does; Ruby's BasicSocket#recvmsg allocates an Addrinfo and an Array per read.
      @recv_fd = sock.fileno if @recvmsg && !fiber && Wire.codec == :native && Wire.respond_to?(:native_recv)
      @out = String.new(capacity: FLUSH_AT, encoding: Encoding::BINARY)
      @current_id = nil
      @cancelled = false
      @body_open = false
      @cancel_check = -> { poll_cancel }
      # This connection's prototype: the worker's plus its cancel check, which each request's
      # env then gets with the dup instead of one more insert.
      @proto_env = proto_env.merge(CANCELLED => @cancel_check).freeze
      @decoder = Wire::Decoder.new(env_proto: @proto_env) # REQUEST env: the Rack env Hash
      @hijack_call = -> { hijack_client }
      @early_hints_call = ->(headers) { early_hints(headers) }
      # WebSocket commands (WS_SEND, WS_TAG, ...) made while a request or an event runs here go
      # on this connection (PumaPlus::WebSocket#emit finds this writer fiber-locally).
      @ws_out = ->(bytes) { write_out(bytes) }
      @hijack_env = nil # the running request's env while it may be hijacked
      @hijacked = nil # the client socket once handed over
      @idle = false
      @stopping = false
      @broken = nil
      # Request timeouts (#interrupt, called from the worker's monitor thread).
      @interrupt_lock = Mutex.new
      @in_app = false
      @timed_out_id = nil
      # Fiber slots: the fiber running the app's code, whether it is writing a frame (a timeout
      # then waits for the write), and a timeout that came during the write.
      @app_fiber = nil
      @writing = false
      @timeout_pending = false
      # out_of_band hooks of this worker (AppHooks, installed before its threads start): nil
      # unless the config has some.
      @oob = AppHooks.out_of_band
    end

    # True while the thread waits for the next REQUEST (nothing in flight).
    def idle? = @idle

    # Asks the connection to end after its in-flight request (SIGTERM; called from another
    # thread). A StopRequested is raised in the connection's thread; it stays pending while a
    # request runs and fires only in the blocking wait for the next REQUEST, so an in-flight
    # request is never interrupted and an idle connection closes at once.
    def stop
      @stopping = true
      return stop_fiber if @fiber

      thread = @thread
      thread.raise(StopRequested) if thread&.alive?
    rescue ThreadError
      nil
    end

    # The server says request `request_id` ran past its -request-timeout (TIMEOUT frame,
    # relayed by the worker's monitor thread): if it still runs on this connection, raise
    # RequestTimeout in its thread, now if the app's code is running, else as soon as it
    # enters it again. Returns true if the request was running here.
    def interrupt(request_id)
      @interrupt_lock.synchronize do
        return false unless @current_id == request_id

        @timed_out_id = request_id
        @cancelled = true # a streaming body or poll_cancel sees the end, as for a CANCEL
        # A fiber slot's thread runs other slots: Thread#raise would hit whichever fiber runs.
        # The fiber slots' thread raises into this slot's fiber instead (#raise_timeout_in_fiber);
        # before the app's code is entered, #interruptible raises on entry.
        if @fiber
          @fiber_interrupt&.call(self, request_id) if @in_app
          return true
        end

        thread = @thread
        thread.raise(RequestTimeout, timeout_message(request_id)) if @in_app && thread&.alive?
        true
      end
    end

    # On the fiber slots' thread (the reactor, never this slot's own fiber): raises
    # RequestTimeout into the slot's fiber where it waits (a sleep, a socket, Net::HTTP), as
    # the async gem's Task#stop raises its Stop, if request `request_id` still runs the app's
    # code here. A fiber in the middle of writing a frame gets it when the write is done. A
    # fiber that never yields (a CPU loop) cannot be reached: the worker is killed after
    # -worker-kill-grace, as a thread that does not let go is.
    def raise_timeout_in_fiber(request_id)
      fiber = @interrupt_lock.synchronize do
        @app_fiber if @in_app && @current_id == request_id && @timed_out_id == request_id
      end
      return unless fiber&.alive? && fiber != Fiber.current

      if @writing
        @timeout_pending = true
      else
        Fiber.scheduler.raise(fiber, RequestTimeout, timeout_message(request_id))
      end
    rescue FiberError
      nil # it ended, or runs, in the meantime: nothing to interrupt
    end

    # The fiber slot's #stop: an idle connection's pending read ends (EOF) when its read side is
    # shut down; a busy one sees @stopping after its request.
    def stop_fiber
      @sock.shutdown(Socket::SHUT_RD) if @idle && !@sock.closed?
    rescue IOError, SystemCallError
      nil
    end

    def run
      # A fiber slot gets no Thread#raise (its thread hosts other slots), and must not push
      # interrupt masks: they are per thread, and fibers would pop each other's.
      return serve if @fiber

      # RequestTimeout is only let through inside #interruptible (the app's code).
      Thread.handle_interrupt(StopRequested => :never, RequestTimeout => :never) { serve }
    rescue StopRequested
      :eof
    ensure
      @idle = false
      @sock.close unless @sock.closed?
      close_stray_fds
    end

    private

    def serve
      @thread = Thread.current
      write_out(Wire.encode_hello(Process.pid, @worker_index, @thread_index, @capabilities).dup)
      loop do
        @idle = true
        return :eof if @stopping

        frame = @fiber ? read_frame : Thread.handle_interrupt(STOP_ON_BLOCKING) { read_frame }
        @idle = false
        return :eof unless frame

        case frame
        when Wire::Request
          handle(frame)
          raise @broken if @broken
        when Wire::WsOpen, Wire::WsMessage, Wire::WsClose
          handle_ws(frame)
        when Wire::Body, Wire::BodyEnd, Wire::Cancel
          # Left over from a finished request (body the app did not read, a late CANCEL).
          next
        when Wire::SlotClose
          # The server ends this slot (docs/PROTOCOL.md "SLOTS, SLOT_CLOSE"): it sends nothing
          # more here; the caller closes the connection and does not dial again.
          if frame.thread_index != @thread_index
            @log.puts("puma-plus worker #{Process.pid}/#{@thread_index}: SLOT_CLOSE for slot #{frame.thread_index}; ending this one")
          end
          return :closed
        else
          raise Wire::ProtocolError.new(:unexpected, "#{Wire.frame_name(frame)} frame on a worker connection")
        end
      end
    rescue Wire::ProtocolError => e
      @log.puts("puma-plus worker #{Process.pid}/#{@thread_index}: closing connection: #{e.message}")
      :protocol_error
    rescue Aborted
      :aborted
    rescue ConnectionLost, IOError, SystemCallError
      :eof
    ensure
      @thread = nil # still masked: a later #stop finds no thread to interrupt
    end

    public

    # Used by StreamInput: the next body chunk of the current request, or nil at its end.
    def next_body_chunk
      return nil unless @body_open

      loop do
        frame = read_frame
        unless frame
          @body_open = false
          return nil
        end
        unless frame.is_a?(Wire::Body) || frame.is_a?(Wire::BodyEnd) || frame.is_a?(Wire::Cancel)
          # Sticky: even if the app swallows the exception, the connection closes after it.
          @broken = Wire::ProtocolError.new(:unexpected, "#{Wire.frame_name(frame)} frame while request #{@current_id} runs")
          raise @broken
        end
        next if frame.request_id != @current_id # stale frames of an earlier request

        case frame
        when Wire::Body then return frame.chunk
        when Wire::BodyEnd
          @body_open = false
          return nil
        else # CANCEL: the server sends nothing more for this request
          @cancelled = true
          @body_open = false
          return nil
        end
      end
    end

    # True once the server sent CANCEL for the current request. Reads what the socket has
    # without blocking; other frames are kept for later. env["puma_plus.cancelled"] calls it.
    def poll_cancel
      return true if @cancelled
      return false unless @current_id

      begin
        data = @sock.read_nonblock(READ_SIZE, @rbuf, exception: false)
      rescue IOError, SystemCallError
        data = nil
      end
      if data.nil?
        @cancelled = true # the server closed the connection: nobody is waiting any more
      elsif data != :wait_readable
        @decoder.feed(data)
        while (frame = @decoder.next_frame)
          if frame.is_a?(Wire::Cancel) && frame.request_id == @current_id
            @cancelled = true
          else
            @pending << frame
          end
        end
      end
      @cancelled
    end

    private

    def read_frame
      raise @broken if @broken
      return @pending.shift unless @pending.empty?

      # `while true`, not Kernel#loop: no block call per read.
      while true # rubocop:disable Style/InfiniteLoop
        frame = @decoder.next_frame
        return frame if frame

        @decoder.feed(@recvmsg ? receive : @sock.readpartial(READ_SIZE, @rbuf))
      end
    rescue EOFError
      nil
    rescue IOError, SystemCallError => e
      raise ConnectionLost, e.message
    end

    # The next bytes from the server, with the descriptors that came with them kept in @fds
    # (a spooled body's file rides on its REQUEST's first bytes). A fiber slot's socket is
    # non-blocking: it waits through IO#wait_readable, which yields to the scheduler.
    def receive
      while true # rubocop:disable Style/InfiniteLoop
        if @recv_fd
          data = Wire.native_recv(@recv_fd, @rbuf, @fds)
          raise EOFError if data.nil?
          next @sock.wait_readable if data == :wait_readable # (a socket left non-blocking)

          return data
        end
        data, _addr, _flags, *controls =
          if @fiber
            @sock.recvmsg_nonblock(READ_SIZE, 0, nil, scm_rights: true, exception: false)
          else
            @sock.recvmsg(READ_SIZE, 0, nil, scm_rights: true)
          end
        if data == :wait_readable
          @sock.wait_readable
          next
        end
        controls.each { |c| @fds.concat(c.unix_rights) if c.cmsg_is?(:SOCKET, :RIGHTS) } unless controls.empty?
        raise EOFError if data.nil? || data.empty?

        return data
      end
    end

    # Descriptors no REQUEST took (the connection ended first): closed.
    def close_stray_fds
      @fds.each do |fd|
        fd.is_a?(Integer) ? IO.for_fd(fd).close : fd.close
      rescue IOError, SystemCallError
        nil
      end
      @fds.clear
    end

    # The spooled body of REQUEST `req` (flag BODY_FILE): its file, binary, at its start.
    def spooled_input(req)
      io = @fds.shift
      unless io
        @broken = Wire::ProtocolError.new(:unexpected, "REQUEST #{req.request_id} has BODY_FILE but no descriptor came with it")
        raise @broken
      end
      return SpooledInput.for_fd(io, "rb").tap(&:rewind) if io.is_a?(Integer) # (Wire.native_recv)

      file = SpooledInput.for_fd(io.fileno, "rb")
      io.autoclose = false # `file` owns the descriptor now
      file.rewind
      file
    end

    def write_out(out)
      # Never interrupted in the middle of a frame: a timeout waits for the write to finish.
      if PumaPlus.request_timeouts? && !@fiber
        Thread.handle_interrupt(TIMEOUT_NEVER) { send_out(out) }
      elsif @fiber && @in_app
        begin
          @writing = true
          send_out(out)
        ensure
          @writing = false
        end
        fiber_timeout_after_write = @timeout_pending
      else
        send_out(out)
      end
      out.clear
      if fiber_timeout_after_write
        @timeout_pending = false
        raise RequestTimeout, timeout_message(@current_id)
      end
    rescue IOError, SystemCallError => e
      raise ConnectionLost, e.message
    end

    # With the C codec, a send(2) that keeps the GVL (Wire.native_send_nowait): a small
    # response never blocks, and IO#write would hand the GVL to a waiting sibling thread and
    # queue to take it back, once per response. What does not fit in the socket buffer goes
    # through IO#write, which waits with the GVL released.
    def send_out(out)
      if @send_fd
        n = Wire.native_send_nowait(@send_fd, out)
        return if n == out.bytesize

        out = out.byteslice(n, out.bytesize - n) if n.positive?
      end
      @sock.write(out)
    end

    # The clocks of #handle are read with Process.clock_gettime in place, not through helper
    # methods: four reads per request, each a method frame less.
    MONOTONIC = Process::CLOCK_MONOTONIC
    THREAD_CPU = Process::CLOCK_THREAD_CPUTIME_ID

    def handle(req)
      (oob = @oob)&.enter
      id = req.request_id
      @current_id = id
      @cancelled = false
      env = req.env # a dup of the prototype with the pairs (Decoder env_proto:)
      @hijacked = nil
      if req.flags & Wire::FLAG_HIJACKABLE != 0
        # HTTP/1.1 without TLS: the server can hand the client socket over (full hijack).
        env[HIJACK_P] = true
        env[HIJACK] = @hijack_call
        @hijack_env = env
      end
      # -early-hints (puma's early_hints) and a protocol that carries a 103: the app's
      # rack.early_hints call sends EARLY_HINTS at once (before the response).
      @head_written = false
      env[EARLY_HINTS] = @early_hints_call if req.flags & Wire::FLAG_EARLY_HINTS != 0
      if req.flags & Wire::FLAG_BODY_FILE != 0
        input = spooled_input(req) # read whole by the server: no slot waited for the client
      elsif req.flags & Wire::FLAG_BODY_STREAMS != 0
        @body_open = true
        input = StreamInput.new(self)
      else
        input = StringIO.new(req.body)
      end
      env[RACK_INPUT] = input
      finished = env[RESPONSE_FINISHED] = []
      after_reply = env[AFTER_REPLY] = []
      error = nil

      # The server marks an upgrade it checked and would take over (docs/RACK.md "WebSockets").
      env[WEBSOCKET_P] = true if env[WEBSOCKET_P]
      ws_prev = Thread.current[WS_OUT]
      Thread.current[WS_OUT] = @ws_out
      cpu0 = @cpu_clock ? Process.clock_gettime(THREAD_CPU, :nanosecond) : 0
      t4 = Process.clock_gettime(MONOTONIC, :nanosecond)
      begin
        status, headers, body = interruptible { @app.call(env) }
      rescue Exception => e # rubocop:disable Lint/RescueException
        raise if e.is_a?(SystemExit) || e.is_a?(SignalException)

        t5 = Process.clock_gettime(MONOTONIC, :nanosecond)
        e.is_a?(RequestTimeout) ? timeout_note(env, e) : app_error(env, e)
        error = e
        status, headers, body = nil
      end
      t5 ||= Process.clock_gettime(MONOTONIC, :nanosecond)
      out = @out
      out.clear
      if @hijacked
        # Full hijack: the app owns the socket and the server ignores its response (Rack
        # SPEC); the exchange ends with RESPONSE_END alone.
        close_body(body, env) if status
      elsif status && @timed_out_id == id # timed_out?(id), inline: `id` is never nil here
        # The app rescued its RequestTimeout and answered anyway: the server has answered
        # the client already and would discard the response, so none is written.
        close_body(body, env)
      elsif status
        error = if PumaPlus.request_timeouts?
                  interruptible(raise_pending: false) { write_response(id, status, headers, body, env) }
                else
                  write_response(id, status, headers, body, env) # no TIMEOUT can come: no mask needed
                end
      else
        internal_error(id, env, error)
      end
      body_read_ns = input.is_a?(StreamInput) ? input.read_ns : 0
      # A spooled body's file is closed before RESPONSE_END: the server counts its disk
      # against -max-spool-total until then (docs/PROTOCOL.md "REQUEST").
      input.close if input.is_a?(SpooledInput)
      cpu_ns = @cpu_clock ? Process.clock_gettime(THREAD_CPU, :nanosecond) - cpu0 : -1
      Wire.append_response_end(out, id, t4, t5, body_read_ns, -1, cpu_ns)
      write_out(out)
    rescue Aborted, ConnectionLost => e
      error ||= e.cause || e # Aborted: the body's own exception is its cause
      raise
    ensure
      Thread.current[WS_OUT] = ws_prev
      if PumaPlus.request_timeouts?
        @interrupt_lock.synchronize do
          @current_id = nil
          @timed_out_id = nil
        end
      else # no TIMEOUT comes, so #interrupt never runs: no lock to take (a block call less)
        @current_id = nil
        @timed_out_id = nil
      end
      @body_open = false
      @hijack_env = nil
      @hijacked = nil
      # Most requests register no callback: then there is nothing to call.
      if finished && !(finished.empty? && after_reply.empty?)
        run_finished(env, finished, after_reply, error ? nil : status, error ? nil : headers, error)
      end
      input.close if input.is_a?(SpooledInput) && !input.closed? # (when the app failed before the end)
      oob&.leave
    end

    # One WebSocket event (WS_OPEN, WS_MESSAGE, WS_CLOSE; docs/PROTOCOL.md "WebSocket frames"):
    # runs its handler (PumaPlus::WebSocket.dispatch) like a request, then WS_DONE with the
    # times RESPONSE_END carries. Commands the handler makes go on this connection first.
    def handle_ws(ev)
      ws_prev = Thread.current[WS_OUT]
      Thread.current[WS_OUT] = @ws_out
      cpu0 = @cpu_clock ? Process.clock_gettime(THREAD_CPU, :nanosecond) : 0
      t4 = Process.clock_gettime(MONOTONIC, :nanosecond)
      begin
        WebSocket.dispatch(ev, @log)
      ensure
        Thread.current[WS_OUT] = ws_prev
      end
      t5 = Process.clock_gettime(MONOTONIC, :nanosecond)
      cpu_ns = @cpu_clock ? Process.clock_gettime(THREAD_CPU, :nanosecond) - cpu0 : -1
      out = @out
      out.clear
      Wire.append_ws_done(out, ev.event_id, t4, t5, -1, cpu_ns)
      write_out(out)
    end

    # rack.response_finished (Rack 3: reverse order, env/status/headers/error) and puma's
    # rack.after_reply (no arguments), after the response has left the worker or failed. A
    # callback that raises is logged; the others still run.
    def run_finished(env, finished, after_reply, status, headers, error)
      finished.reverse_each do |callback|
        callback.call(env, status, headers, error)
      rescue StandardError => e
        app_error(env, e)
      end
      after_reply.each do |callback|
        callback.call
      rescue StandardError => e
        app_error(env, e)
      end
    end

    # Appends the response to @out, writing to the socket as it goes for bodies that stream.
    # Returns nil, or the exception the body raised (the response then is a 500).
    def write_response(id, status, headers, body, env)
      @head_written = true # no EARLY_HINTS after this (a Streaming Body may still call it)
      out = @out
      written = false
      begin
        code = Response.status_code(status)
        hook = headers[HIJACK] if headers.respond_to?(:[]) # looked up once, for both uses below
        hook = nil unless hook.nil? || hook.respond_to?(:call) # only a callable counts
        return response_hijack(code, headers, body, env) if response_hijack?(code, hook, body)

        Wire.append_response_headers(out, id, code, headers)
        # A rack.hijack response header where hijack cannot exist (h2, h3, TLS; Rack says the
        # app must not set it there): its callable is served as a Streaming Body instead.
        body = hook if hook
        # to_ary may answer nil (Rails 6.1's RackBody does, to keep Array#flatten off it): then
        # the body is an Enumerable Body after all, as puma treats it.
        if body.respond_to?(:to_ary) && (parts = body.to_ary)
          parts.each do |chunk|
            next if chunk.empty?

            Wire.append_response_body(out, id, chunk)
            next if out.bytesize < FLUSH_AT

            write_out(out)
            written = true
          end
        elsif body.respond_to?(:each) || !body.respond_to?(:call)
          body.each do |chunk|
            next if chunk.empty?
            break if poll_cancel

            Wire.append_response_body(out, id, chunk)
            write_out(out)
            written = true
          end
        else
          # A Rack 3 Streaming Body: every write goes out as it is made (ResponseStream).
          stream = ResponseStream.new(env[RACK_INPUT]) do |chunk|
            raise ClientGone, "the client went away" if poll_cancel

            Wire.append_response_body(out, id, chunk)
            write_out(out)
            written = true
          end
          begin
            body.call(stream)
          rescue ClientGone
            nil
          end
        end
        nil
      rescue ConnectionLost
        raise
      rescue Exception => e # rubocop:disable Lint/RescueException
        raise if e.is_a?(SystemExit) || e.is_a?(SignalException)

        e.is_a?(RequestTimeout) ? timeout_note(env, e) : app_error(env, e)
        raise Aborted if written

        out.clear
        internal_error(id, env, e) unless @hijacked # a hook failing on a hijacked socket: nothing to answer
        e
      ensure
        close_body(body, env)
      end
    end

    # env["rack.early_hints"].call(headers): a 103 Early Hints with these fields (a Hash as
    # a Rack response's headers; Rails passes {"link" => "..."}), sent before the response.
    # After the response head, or with nothing to send, it does nothing.
    def early_hints(headers)
      return if @current_id.nil? || @head_written || headers.nil? || headers.empty?

      flat = Response.flatten_headers(headers)
      write_out(Wire.append_early_hints(+"".b, @current_id, flat))
      nil
    end

    # ---- hijack (docs/PROTOCOL.md "HIJACK, HIJACKED", docs/RACK.md) -----------------------

    # env["rack.hijack"].call: asks the server for the client socket (HIJACK), waits for
    # HIJACKED and returns the socket, an IO the app now owns. Raises IOError when the server
    # could not hand it over (the client went away, or its body was still arriving).
    def hijack_client
      return @hijacked if @hijacked
      raise IOError, "rack.hijack: this request cannot be hijacked" unless @hijack_env && @current_id

      write_out(Wire.encode_hijack(@current_id))
      frame, ios = await_hijacked
      io = ios.shift
      ios.each(&:close)
      unless frame.result == Wire::HIJACK_OK && io
        io&.close
        @cancelled = true if frame.result == Wire::HIJACK_GONE
        raise IOError, "rack.hijack: the client went away" if frame.result == Wire::HIJACK_GONE

        raise IOError, "rack.hijack: refused by the server (result #{frame.result})"
      end
      sock = Socket.for_fd(io.fileno)
      io.autoclose = false # `sock` owns the descriptor now
      sock.sync = true
      env = @hijack_env
      env[HIJACK_IO] = sock
      env[HIJACK_BUFFERED] = frame.buffered unless frame.buffered.empty?
      @hijacked = sock
    end

    # Reads until HIJACKED for the running request, with recvmsg so that the descriptor riding
    # on it (SCM_RIGHTS) is received, not dropped as a plain read would. Frames that belong to
    # the request (its streamed body) are kept for later; a stale CANCEL is noted.
    def await_hijacked
      ios = []
      held = []
      loop do
        frame = @pending.shift || @decoder.next_frame
        unless frame
          data, _addr, _flags, *controls = @sock.recvmsg(READ_SIZE, 0, nil, scm_rights: true)
          raise ConnectionLost, "the server closed the connection during a hijack" if data.nil? || data.empty?

          controls.each { |c| ios.concat(c.unix_rights || []) if c.cmsg_is?(:SOCKET, :RIGHTS) }
          @decoder.feed(data)
          next
        end
        case frame
        when Wire::Hijacked
          if frame.request_id != @current_id
            @broken = Wire::ProtocolError.new(:unexpected, "HIJACKED for request #{frame.request_id}")
            raise @broken
          end
          @pending = held + @pending
          return [frame, ios]
        when Wire::Cancel
          @cancelled = true if frame.request_id == @current_id
        when Wire::Body, Wire::BodyEnd
          held << frame if frame.request_id == @current_id
        else
          @broken = Wire::ProtocolError.new(:unexpected, "#{Wire.frame_name(frame)} frame while waiting for HIJACKED")
          raise @broken
        end
      end
    rescue IOError, SystemCallError => e
      raise ConnectionLost, e.message
    end

    # A response hijack on a request that can be hijacked: a rack.hijack response header
    # (Rack 2 and 3), or a Rack 3 Streaming Body answering 101 Switching Protocols (as a
    # WebSocket app does), whose bytes must not be framed as an HTTP body.
    # `hook` is the rack.hijack response header's callable (or nil).
    def response_hijack?(code, hook, body)
      return false unless @hijack_env

      return true if hook

      code == 101 && body.respond_to?(:call) && !body.respond_to?(:each) && !body.respond_to?(:to_ary)
    end

    # Takes the socket, writes the status line and headers on it, and gives it to the hook
    # (the header's callable, or the body's call); the server ignores the body. Returns nil.
    def response_hijack(code, headers, body, env)
      hook = headers[HIJACK] if headers.respond_to?(:[])
      hook = body unless hook.respond_to?(:call)
      sock = hijack_client
      sock.write(Response.raw_head(code, Response.flatten_headers(headers)))
      hook.call(sock)
      nil
    rescue IOError, SystemCallError => e
      raise if e.is_a?(ConnectionLost) || !@hijacked # no socket: answered as an app error

      app_error(env, e) # the app owns the socket: a write it makes failing is its business
      nil
    end

    def close_body(body, env)
      body.close if body.respond_to?(:close)
    rescue Exception => e # rubocop:disable Lint/RescueException
      raise if e.is_a?(SystemExit) || e.is_a?(SignalException)

      app_error(env, e)
    end

    # ---- request timeouts ------------------------------------------------------------------

    # Runs the block with RequestTimeout deliverable (the app's code). A timeout that came
    # before app.call started is raised on entry (raise_pending, inside the caller's rescue);
    # one raised just as the block ended is taken here, so it never reaches the next request.
    def interruptible(raise_pending: true)
      # The server never sends TIMEOUT: nothing to let through.
      return yield unless PumaPlus.request_timeouts?

      entered = false
      @interrupt_lock.synchronize do
        raise RequestTimeout, timeout_message(@current_id) if raise_pending && timed_out?(@current_id)

        @in_app = true
        @app_fiber = Fiber.current if @fiber
        entered = true
      end
      # A fiber slot pushes no mask (masks are per thread, and fibers would pop each other's):
      # its timeout comes from its own thread, only while @in_app (#raise_timeout_in_fiber).
      return yield if @fiber

      Thread.handle_interrupt(TIMEOUT_IMMEDIATE) { yield }
    ensure
      if entered
        @interrupt_lock.synchronize do
          @in_app = false
          @app_fiber = nil
        end
        @timeout_pending = false
        discard_late_timeout unless @fiber
      end
    end

    # Thread.pending_interrupt? without a class: with one, Ruby 3.1 crashes (segfault in
    # rb_class_inherited_p) when the queue also holds a non-exception entry. Only a
    # RequestTimeout is let through here; a pending StopRequested stays masked.
    def discard_late_timeout
      return unless Thread.pending_interrupt?

      Thread.handle_interrupt(TIMEOUT_IMMEDIATE) { Thread.pass }
    rescue RequestTimeout
      nil
    end

    def timed_out?(id) = !id.nil? && @timed_out_id == id

    def timeout_message(id) = "request #{id} ran past the server's request timeout"

    def timeout_note(env, error)
      # The app's own frame: not the gem's, nor (on a fiber slot) the Fiber scheduler's.
      where = error.backtrace_locations&.find { |l| !l.path.match?(NOT_APP_FRAME) } || error.backtrace&.first
      @log.puts("puma-plus worker #{Process.pid}: #{env['REQUEST_METHOD']} #{env['PATH_INFO']}: " \
                "#{error.message}; interrupted at #{where}")
    end

    # The response to an app that raised or returned an invalid response: the
    # lowlevel_error_handler's (AppHooks), else a plain 500.
    def internal_error(id, env = nil, error = nil)
      return if error && AppHooks.lowlevel_error_handler && lowlevel_error_response(id, env, error)

      Wire.append_response_head(@out, id, 500, Response::INTERNAL_ERROR_HEADERS)
      Wire.append_response_body(@out, id, Response::INTERNAL_ERROR_BODY)
    end

    # Appends the lowlevel_error_handler's response; false when it gave none or an invalid one.
    def lowlevel_error_response(id, env, error)
      status, headers, body = AppHooks.lowlevel_response(error, env, 500)
      return false unless status

      buf = String.new(encoding: Encoding::BINARY)
      begin
        Wire.append_response_headers(buf, id, Response.status_code(status), headers)
        body.each { |chunk| Wire.append_response_body(buf, id, chunk) unless chunk.empty? }
      ensure
        body.close if body.respond_to?(:close)
      end
      @out << buf
      true
    rescue StandardError => e
      app_error(env, e)
      false
    end

    def app_error(env, error)
      where = "#{env['REQUEST_METHOD']} #{env['PATH_INFO']}"
      @log.puts("puma-plus worker #{Process.pid}: #{where}: #{error.class}: #{error.message}\n  " +
                Array(error.backtrace).join("\n  "))
    end
  end
end
