# frozen_string_literal: true

require_relative "wire"

module PumaPlus
  # WebSockets owned by the front end (docs/RACK.md "WebSockets", docs/WEBSOCKET.md). The
  # server terminates the WebSocket; the app sees the upgrade request, accepts it with
  # WebSocket.accept (a 101 the server recognises), and then receives open / message / close
  # *events* for that connection, each run like a request on a slot, in a handler it named.
  # The app sends with Conn#send, tags connections, and broadcasts to a tag with one frame
  # (the server writes it to every subscriber). Ruby never holds the socket.
  #
  # Handlers. A handler is an object that answers any of on_open(conn), on_message(conn, data)
  # and on_close(conn, code, reason) (a missing one is skipped), or a Class of such objects.
  # - route: :sticky (the default): every event of the connection runs in the worker process
  #   that accepted it. The handler object given to accept (or one instance of a Class) is kept
  #   in that worker's memory for the connection's life, as is its Conn (conn.state too).
  # - route: :flexible: any worker's free slot runs the event. The handler is found by name in
  #   whichever worker runs the event: a named Class or Module (a fresh instance of a Class per
  #   event), or a name given to WebSocket.register at boot (before the workers fork). Each
  #   event gets a fresh Conn: nothing is kept between events.
  #
  # Sending (Conn#send, #tag, #untag, #close, WebSocket.broadcast ...) works from anywhere in a
  # worker: inside a request or an event it goes on that slot's connection to the server, from
  # any other thread on the worker's monitor connection (under a lock). Outside a puma-plus
  # worker (a console, a rake task) there is no server to tell: NotServed is raised.
  module WebSocket
    WEBSOCKET_P = "puma_plus.websocket?"
    PROTOCOLS = "puma_plus.websocket.protocols"
    FIELD = "puma-plus-websocket"
    FIELD_HANDLER = "puma-plus-websocket-handler"
    FIELD_TAGS = "puma-plus-websocket-tags"
    FIELD_PROTOCOL = "sec-websocket-protocol"
    ROUTES = { sticky: "sticky", flexible: "flexible" }.freeze
    HANDLER_MAX = 255
    # The fiber-local key of the running slot's writer (Connection sets it around each request
    # and event). Thread#[] is fiber-local, so fiber slots keep theirs apart.
    OUT_KEY = :__puma_plus_websocket_out
    # A sticky accept whose WS_OPEN never came (the client left before the 101 was written)
    # is forgotten after this many seconds.
    PENDING_TTL_S = 120

    class Error < StandardError; end

    # No connection to a puma-plus server from here (not in a worker, or it is stopping).
    class NotServed < Error; end

    # One WebSocket connection as the app sees it in its handler. Sticky: the same object for
    # every event of the connection (state kept); flexible: a new one per event.
    class Conn
      # `env`: the upgrade request's env, in on_open only (nil afterwards).
      attr_reader :id, :route, :protocol, :env, :state

      def initialize(id, route, protocol, env = nil)
        @id = id
        @route = route
        @protocol = protocol
        @env = env
        @state = {}
        @closed = false
      end

      # Sends one message: a binary String (Encoding::BINARY) as a binary message, any other
      # as text (converted to UTF-8; ArgumentError if it is not valid). `binary:` forces.
      def send(message, binary: nil)
        WebSocket.send_to(@id, message, binary: binary)
      end
      alias write send

      # Subscribes the connection to `tag`; a broadcast to it arrives as prefix + message +
      # suffix (the envelope; empty: the message as is). Adding a tag it has replaces the envelope.
      def tag(tag, prefix: "", suffix: "")
        WebSocket.tag_conn(@id, tag, prefix: prefix, suffix: suffix)
      end

      def untag(tag) = WebSocket.untag_conn(@id, tag)

      def untag_all = WebSocket.untag_conn(@id, nil)

      # Starts the close handshake; the connection's on_close follows (by the server).
      def close(code = 1000, reason = "")
        WebSocket.close_conn(@id, code, reason)
        @closed = true
      end

      # True once close was called here or the connection's on_close is running.
      def closed? = @closed

      def closed! = (@closed = true)

      def drop_env = (@env = nil)

      def inspect = "#<PumaPlus::WebSocket::Conn #{@id} #{@route}#{@closed ? ' closed' : ''}>"
    end

    @lock = Mutex.new
    @pending = {} # sticky accept token => [handler, accepted_at]
    @sticky = {} # conn_id => [Conn, handler]
    @registry = {} # name => handler (flexible)
    @serial = 0
    @monitor_out = nil

    class << self
      attr_accessor :monitor_out # set by the Worker: ->(bytes) writing on the monitor connection

      # True when `env` is a WebSocket upgrade the server checked and would take over.
      def websocket?(env)
        v = env[WEBSOCKET_P]
        v == true || v == "1" || v == "true"
      end

      # The subprotocols the client offered (Sec-WebSocket-Protocol), in its order.
      def protocols(env)
        raw = env[PROTOCOLS] || env["HTTP_SEC_WEBSOCKET_PROTOCOL"]
        raw.is_a?(Array) ? raw : raw.to_s.split(",").map(&:strip).reject(&:empty?)
      end

      # The Rack response that accepts the upgrade: [101, headers, []]. `handler`: see the
      # module comment; `tags`: initial tags (no envelope); `protocol`: one of the client's
      # subprotocols, answered in Sec-WebSocket-Protocol; `headers`: more response fields
      # (Set-Cookie, ...). Raises ArgumentError for a request that is not an upgrade, an
      # unknown route, a protocol the client did not offer, or a tag with CR, LF or NUL.
      def accept(env, handler, route: :sticky, tags: [], protocol: nil, headers: {})
        main_ractor!
        raise ArgumentError, "not a WebSocket upgrade the server took (#{WEBSOCKET_P} is not set)" unless websocket?(env)

        name = ROUTES.fetch(route) { raise ArgumentError, "route #{route.inspect}: :sticky or :flexible" }
        tags = Array(tags).map { |t| check_tag(t) }
        if protocol && !protocols(env).include?(protocol)
          raise ArgumentError, "protocol #{protocol.inspect} was not offered (#{protocols(env).inspect})"
        end

        key = route == :sticky ? sticky_key(handler) : flexible_key(handler)
        h = headers.to_h.merge(FIELD => name, FIELD_HANDLER => key)
        # One field line per tag: an Array (Rack 3), or lines joined with "\n" (Rack 2, whose
        # Lint wants String values); the worker writes both as repeated fields.
        h[FIELD_TAGS] = rack2? ? tags.join("\n") : tags unless tags.empty?
        h[FIELD_PROTOCOL] = protocol if protocol
        [101, h, []]
      end

      # A flexible handler by name, in every worker: call at boot (before the fork).
      def register(name, handler)
        main_ractor!
        name = name.to_s
        raise ArgumentError, "handler name over #{HANDLER_MAX - 2} bytes" if name.bytesize > HANDLER_MAX - 2

        @lock.synchronize { @registry[name] = handler }
        name
      end

      # One message to every connection holding `tag` (each with its own envelope).
      def broadcast(tag, message, binary: nil)
        opcode, data = message_of(message, binary)
        emit(Wire.append_ws_broadcast(+"".b, opcode, check_tag(tag), data))
        nil
      end

      def send_to(conn_id, message, binary: nil)
        opcode, data = message_of(message, binary)
        emit(Wire.append_ws_send(+"".b, conn_id, opcode, data))
        nil
      end

      # The envelope (prefix, suffix) must be UTF-8 (docs/PROTOCOL.md WS_TAG).
      def tag_conn(conn_id, tag, prefix: "", suffix: "")
        prefix = utf8(prefix, "envelope prefix")
        suffix = utf8(suffix, "envelope suffix")
        emit(Wire.append_ws_tag(+"".b, conn_id, Wire::WS_TAG_ADD, check_tag(tag), prefix, suffix))
        nil
      end

      def untag_conn(conn_id, tag)
        if tag.nil?
          emit(Wire.append_ws_tag(+"".b, conn_id, Wire::WS_TAG_REMOVE_ALL, "", "", ""))
        else
          emit(Wire.append_ws_tag(+"".b, conn_id, Wire::WS_TAG_REMOVE, check_tag(tag), "", ""))
        end
        nil
      end

      def close_conn(conn_id, code = 1000, reason = "")
        raise ArgumentError, "close code #{code} may not be sent (RFC 6455 §7.4)" unless sendable_code?(code)

        reason = utf8(reason, "close reason")
        raise ArgumentError, "close reason of #{reason.bytesize} bytes over 123" if reason.bytesize > 123

        emit(Wire.append_ws_close_conn(+"".b, conn_id, code, reason))
        nil
      end

      # Sticky connections this worker holds.
      def sticky_count = @lock.synchronize { @sticky.size }

      # ---- the slot's side (Connection calls these) ---------------------------------------

      # Runs the handler of event `ev` (WsOpen, WsMessage, WsClose). An exception from the
      # handler is logged and closes the connection with 1011 (as a 500 answers a request).
      def dispatch(ev, log)
        unless Ractor.current == Ractor.main
          log.puts("puma-plus worker #{Process.pid}: WebSocket #{ev.conn_id}: WebSockets are not available in Ractor slots")
          return close_conn(ev.conn_id, 1011, "no handler") unless ev.is_a?(Wire::WsClose)

          return
        end
        conn, handler = resolve(ev)
        unless handler
          log.puts("puma-plus worker #{Process.pid}: WebSocket #{ev.conn_id}: no handler for #{ev.handler.inspect} " \
                   "(#{Wire.frame_name(ev)}); closing it with 1011")
          close_conn(ev.conn_id, 1011, "no handler") unless ev.is_a?(Wire::WsClose)
          return
        end
        case ev
        when Wire::WsOpen
          begin
            handler.on_open(conn) if handler.respond_to?(:on_open)
          ensure
            conn.drop_env # idle connections hold no env: keep what you need in conn.state
          end
        when Wire::WsMessage
          data = ev.data
          data.force_encoding(Encoding::UTF_8) if ev.opcode == Wire::WS_TEXT
          handler.on_message(conn, data) if handler.respond_to?(:on_message)
        when Wire::WsClose
          conn.closed!
          handler.on_close(conn, ev.code, ev.reason.force_encoding(Encoding::UTF_8)) if handler.respond_to?(:on_close)
        end
      rescue StandardError => e
        log.puts("puma-plus worker #{Process.pid}: WebSocket #{ev.conn_id}: #{Wire.frame_name(ev)} handler raised " \
                 "#{e.class}: #{e.message}\n  #{Array(e.backtrace).first(10).join("\n  ")}")
        begin
          close_conn(ev.conn_id, 1011, "internal error") unless ev.is_a?(Wire::WsClose) || conn&.closed?
        rescue Error, IOError, SystemCallError
          nil
        end
      ensure
        @lock.synchronize { @sticky.delete(ev.conn_id) } if ev.is_a?(Wire::WsClose)
      end

      private

      def rack2? = defined?(::Rack.release) && ::Rack.release.start_with?("2.", "1.")

      # RFC 6455 §7.4 codes an endpoint may send (docs/PROTOCOL.md WS_CLOSE_CONN).
      def sendable_code?(c) = (1000..1003).cover?(c) || (1007..1014).cover?(c) || (3000..4999).cover?(c)

      # The handler tables live in the main Ractor: a Ractor slot cannot reach them.
      def main_ractor!
        raise Error, "PumaPlus::WebSocket is not available in Ractor slots (docs/RACK.md)" unless Ractor.current == Ractor.main
      end

      def emit(bytes)
        if (out = Thread.current[OUT_KEY])
          out.call(bytes)
        elsif (mon = @monitor_out)
          mon.call(bytes)
        else
          raise NotServed, "no connection to a puma-plus server here (not inside a puma-plus worker)"
        end
      end

      def message_of(message, binary)
        raise ArgumentError, "a WebSocket message is a String, not #{message.class}" unless message.is_a?(String)

        binary = message.encoding == Encoding::BINARY if binary.nil?
        return [Wire::WS_BINARY, message] if binary

        [Wire::WS_TEXT, utf8(message, "text message")]
      end

      def utf8(str, what)
        s = str.to_s
        s = s.encode(Encoding::UTF_8) unless s.encoding == Encoding::UTF_8 || s.encoding == Encoding::BINARY || s.ascii_only?
        s = s.dup.force_encoding(Encoding::UTF_8) if s.encoding == Encoding::BINARY
        raise ArgumentError, "#{what} is not valid UTF-8" unless s.valid_encoding?

        s
      end

      def check_tag(tag)
        t = tag.to_s
        raise ArgumentError, "tag #{tag.inspect}: empty, or holds CR, LF or NUL" if t.empty? || t.match?(/[\r\n\0]/)

        t
      end

      # Sticky: the handler (an instance for a Class) waits under a token until WS_OPEN.
      def sticky_key(handler)
        handler = handler.new if handler.is_a?(Class)
        @lock.synchronize do
          expire_pending
          @serial += 1
          key = "s:#{Process.pid}:#{@serial}"
          @pending[key] = [handler, monotonic]
          key
        end
      end

      def flexible_key(handler)
        case handler
        when String, Symbol
          name = handler.to_s
          raise ArgumentError, "no handler registered as #{name.inspect} (WebSocket.register)" unless
            @lock.synchronize { @registry.key?(name) }

          "r:#{name}"
        when Module
          raise ArgumentError, "a flexible handler class needs a name (an anonymous one cannot be found by other workers)" unless handler.name

          "c:#{handler.name}"
        else
          name = @lock.synchronize { @registry.key(handler) }
          raise ArgumentError, "a flexible handler is a named Class or Module, or a name given to WebSocket.register" unless name

          "r:#{name}"
        end
      end

      def expire_pending
        cut = monotonic - PENDING_TTL_S
        @pending.delete(@pending.first[0]) while !@pending.empty? && @pending.first[1][1] < cut
      end

      # [Conn, handler] for event `ev`; handler nil when none can be found.
      def resolve(ev)
        key = ev.handler.b
        if key.start_with?("s:")
          if ev.is_a?(Wire::WsOpen)
            handler, = @lock.synchronize { @pending.delete(key) }
            return [nil, nil] unless handler

            conn = Conn.new(ev.conn_id, :sticky, ev.protocol.force_encoding(Encoding::UTF_8), env_of(ev))
            @lock.synchronize { @sticky[ev.conn_id] = [conn, handler] }
            return [conn, handler]
          end
          return @lock.synchronize { @sticky[ev.conn_id] } || [nil, nil]
        end
        handler = flexible_handler(key)
        return [nil, nil] unless handler

        handler = handler.new if handler.is_a?(Class)
        if ev.is_a?(Wire::WsOpen)
          [Conn.new(ev.conn_id, :flexible, ev.protocol.force_encoding(Encoding::UTF_8), env_of(ev)), handler]
        else
          [Conn.new(ev.conn_id, :flexible, nil), handler]
        end
      end

      def flexible_handler(key)
        if key.start_with?("r:")
          name = key.byteslice(2..).force_encoding(Encoding::UTF_8)
          @lock.synchronize { @registry[name] }
        elsif key.start_with?("c:")
          name = key.byteslice(2..).force_encoding(Encoding::UTF_8)
          begin
            Object.const_get(name)
          rescue NameError
            nil
          end
        end
      end

      # WS_OPEN's env pairs as a Hash (the upgrade request's, as its REQUEST carried them).
      def env_of(ev)
        env = {}
        ev.env.each_slice(2) { |k, v| env[k] = v }
        env
      end

      def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
