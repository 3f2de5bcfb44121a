# frozen_string_literal: true

require_relative "websocket"

module PumaPlus
  # Action Cable over front-end-owned WebSockets (docs/RACK.md "Action Cable on front-end
  # WebSockets"), the app's code unchanged, as anycable-rails does for AnyCable:
  #
  # - The /cable upgrade request runs Action Cable's own Connection#process (origin check,
  #   logging); its `websocket` is a Socket of ours, whose rack_response is
  #   WebSocket.accept(route: :sticky) with the Action Cable subprotocol the client offered.
  # - The ActionCable::Connection lives in the accepting worker, keyed by the connection (the
  #   sticky handler); open / message / close events run its handle_open,
  #   dispatch_websocket_message and handle_close through its worker pool's `invoke` (the
  #   executor, the logger tags and the error handling its own pool thread would use), in the
  #   slot, so its transmissions go out as WS_SEND on the slot connection.
  # - `stream_from(name)` without a callback (the usual form) becomes WS_TAG name with the
  #   envelope `{"identifier":ID,"message":` … `}`: the server fans a broadcast out without
  #   Ruby. A stream with a callback or a coder other than JSON, or a second subscription of
  #   the same connection to a broadcasting it streams already (the server keeps one envelope
  #   per tag and connection), keeps Action Cable's pubsub path (its messages come through the
  #   configured adapter and leave as WS_SEND).
  # - `ActionCable.server.broadcast` (its pubsub's broadcast) sends WS_BROADCAST, which reaches
  #   every front-end subscriber in every worker, and also publishes through the configured
  #   adapter (async, Redis, ...) for the callback streams and any hijacked connection.
  #
  # Turned on by PUMA_PLUS_ACTION_CABLE=frontend in the workers' environment (the config
  # file's `action_cable :frontend` sets it): a config switch, not a pubsub adapter, so
  # cable.yml stays as it is. Without it, Action Cable runs over full hijack as before.
  module ActionCable
    ENV_NAME = "PUMA_PLUS_ACTION_CABLE"

    def self.enabled? = ENV[ENV_NAME] == "frontend"

    # Installs the shims into the loaded Action Cable (idempotent). Returns false when Action
    # Cable is not loaded or the switch is off.
    def self.install
      return false unless enabled? && defined?(::ActionCable) && defined?(::ActionCable::Server::Base) &&
                          defined?(::ActionCable::Channel::Base)
      return true if @installed

      ::ActionCable::Server::Base.prepend(ServerShim)
      ::ActionCable::Channel::Base.prepend(ChannelShim)
      ::ActionCable::Connection::WebSocket.prepend(WebSocketShim)
      # A server whose pubsub the app already made at boot: wrap that one too.
      server = ::ActionCable.instance_variable_get(:@server)
      adapter = server&.instance_variable_get(:@pubsub)
      server.instance_variable_set(:@pubsub, Pubsub.new(adapter)) if adapter && !adapter.is_a?(Pubsub)
      @installed = true
    end

    # The websocket of an ActionCable::Connection accepted over the front end.
    class Socket
      attr_reader :protocol, :conn

      def initialize(env)
        @env = env
        @tags = {} # tag => the TagStream holding it (one envelope per tag and connection)
        @conn = nil
        @closed = false
        offered = WebSocket.protocols(env)
        @protocol = (::ActionCable::INTERNAL[:protocols] & offered).first
      end

      def possible? = WebSocket.websocket?(@env)

      def alive? = !@conn.nil? && !@closed

      # Called from Connection#process once the origin check passed.
      def rack_response
        WebSocket.accept(@env, @handler, route: :sticky, protocol: @protocol)
      end

      def handler=(handler)
        @handler = handler
      end

      def opened(conn) = (@conn = conn)

      def closed! = (@closed = true)

      def transmit(data)
        return false unless alive?

        @conn.send(data.to_s)
        true
      rescue WebSocket::NotServed, IOError, SystemCallError
        false
      end

      def close(*)
        return if !alive? || @conn.closed?

        @conn.close(1000, "")
      rescue WebSocket::NotServed, IOError, SystemCallError
        nil
      end

      # Envelope subscription for ChannelShim#stream_from: false when another subscription of
      # this connection holds the tag already (the server keeps one envelope per tag and
      # connection; the second stream then takes the pubsub path).
      def tag(stream, prefix, suffix)
        return false if @tags.key?(stream.name)

        @tags[stream.name] = stream
        @conn.tag(stream.name, prefix: prefix, suffix: suffix)
        true
      end

      def untag(stream)
        return unless @tags[stream.name].equal?(stream)

        @tags.delete(stream.name)
        @conn.untag(stream.name) if alive?
      end
    end

    # The sticky handler of one connection: runs Action Cable's own steps in the slot.
    class Handler
      def initialize(connection, socket)
        @connection = connection
        @socket = socket
      end

      def on_open(conn)
        @socket.opened(conn)
        run(:handle_open)
      end

      def on_message(_conn, data)
        run(:dispatch_websocket_message, data)
      end

      def on_close(_conn, _code, _reason)
        @socket.closed!
        run(:handle_close)
      end

      private

      # Through the worker pool's invoke (in this thread): its callbacks wrap the call in the
      # Rails executor and the connection's logger tags, and it logs and hands on exceptions.
      def run(method, *args)
        @connection.server.worker_pool.invoke(@connection, method, *args, connection: @connection)
      end
    end

    # The stream of a channel subscribed by tag: what Action Cable keeps in `streams` (and
    # hands back to pubsub.unsubscribe when the channel stops streaming).
    class TagStream
      attr_reader :socket, :name

      def initialize(socket, name)
        @socket = socket
        @name = name
      end

      def stop = @socket.untag(self)
    end

    # ActionCable::Server::Base: an upgrade the front end took runs over it; every other
    # request (and everything with the switch off) as before.
    module ServerShim
      def call(env)
        return super unless WebSocket.websocket?(env)
        return config.health_check_application.call(env) if
          config.respond_to?(:health_check_path) && config.health_check_path && env["PATH_INFO"] == config.health_check_path

        setup_heartbeat_timer
        connection = config.connection_class.call.new(self, env)
        socket = Socket.new(env)
        socket.handler = Handler.new(connection, socket)
        connection.instance_variable_set(:@websocket, socket)
        connection.process
      end

      def pubsub
        @pubsub || @mutex.synchronize { @pubsub ||= Pubsub.new(config.pubsub_adapter.new(self)) }
      end
    end

    # The server's pubsub: broadcasts go to the front end's tags and to the configured adapter;
    # TagStreams unsubscribe from the front end, other streams from the adapter.
    class Pubsub
      attr_reader :adapter

      def initialize(adapter)
        @adapter = adapter
      end

      def broadcast(channel, payload)
        begin
          WebSocket.broadcast(channel, payload.to_s)
        rescue WebSocket::NotServed
          nil # outside a worker (a console): only the adapter's subscribers can be told
        end
        @adapter.broadcast(channel, payload)
      end

      def subscribe(channel, message_callback, success_callback = nil)
        @adapter.subscribe(channel, message_callback, success_callback)
      end

      def unsubscribe(channel, message_callback)
        return message_callback.stop if message_callback.is_a?(TagStream)

        @adapter.unsubscribe(channel, message_callback)
      end

      def shutdown = @adapter.shutdown

      def identifier = @adapter.identifier

      def method_missing(name, ...) = @adapter.respond_to?(name) ? @adapter.public_send(name, ...) : super

      def respond_to_missing?(name, include_all = false) = @adapter.respond_to?(name, include_all) || super
    end

    # ActionCable::Connection::WebSocket for an upgrade the front end took: no ClientSocket (and
    # no websocket-driver) is built, since ServerShim puts a Socket in its place at once.
    module WebSocketShim
      def initialize(env, *args, **kwargs)
        return super unless WebSocket.websocket?(env)

        @websocket = nil
      end
    end

    # ActionCable::Channel::Base#stream_from on a front-end connection, in the usual form (no
    # callback, JSON or no coder): a WS_TAG with this subscription's envelope.
    module ChannelShim
      def stream_from(broadcasting, callback = nil, coder: nil, &block)
        socket = connection.instance_variable_get(:@websocket)
        return super unless socket.is_a?(Socket) && callback.nil? && block.nil? &&
                            (coder.nil? || coder == ::ActiveSupport::JSON)
        return if respond_to?(:unsubscribed?) && unsubscribed?

        broadcasting = String(broadcasting)
        prefix = %({"identifier":#{::ActiveSupport::JSON.encode(@identifier)},"message":)
        stream = TagStream.new(socket, broadcasting)
        return super unless socket.tag(stream, prefix, "}")

        streams[broadcasting] = stream
        logger.info "#{self.class.name} is streaming from #{broadcasting}"
      end
    end
  end
end
