# frozen_string_literal: true

module PumaPlus
  module Wire
    # Incremental frame decoder over a byte stream: feed it what the socket gave, take frames
    # out. Sans-I/O. An error is sticky: once a frame was malformed, every later call raises
    # the same ProtocolError (the connection must be closed).
    class Decoder
      COMPACT_AT = 1 << 16

      # With `env_proto` (the worker's frozen prototype env), REQUEST frames carry the Rack
      # env as a Hash (Wire.decode_request_env) instead of the flat pairs.
      def initialize(env_proto: nil)
        @buf = String.new(capacity: COMPACT_AT, encoding: Encoding::BINARY)
        @pos = 0
        @error = nil
        @env_proto = env_proto
        @key_cache = [] # Wire.decode_request_at's: the env keys by pair index
      end

      # Appends bytes received from the peer.
      def feed(bytes)
        @buf << bytes
        self
      end

      # The internal buffer, so a reader can `read_nonblock(n, decoder.spare)`-style append.
      def buffered_bytes
        @buf.bytesize - @pos
      end

      # Returns the next complete frame, or nil when more bytes are needed.
      def next_frame
        raise @error if @error

        if @env_proto
          # A REQUEST (the worker's hot path) is read in place; nil is "need more" for any
          # frame; anything else (false) takes the general path.
          frame = Wire.decode_request_at(@buf, @pos, @env_proto, @key_cache)
          if frame
            @pos += HEADER_SIZE + @buf.unpack1("N", offset: @pos + 4)
            compact
            return frame
          elsif frame.nil?
            compact
            return nil
          end
        end
        result = Wire.decode(@buf, @pos, @env_proto)
        unless result
          compact
          return nil
        end
        @pos += result[1]
        compact
        result[0]
      rescue ProtocolError => e
        @error = e
        raise
      end

      private

      def compact
        if @pos == @buf.bytesize
          @buf.clear
          @pos = 0
        elsif @pos >= COMPACT_AT
          @buf = @buf.byteslice(@pos, @buf.bytesize - @pos)
          @pos = 0
        end
      end
    end
  end
end
