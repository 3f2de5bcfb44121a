# frozen_string_literal: true

module PumaPlus
  # The `stream` a Rack 3 Streaming Body (a body that responds to `call` but not `each`) is
  # called with (docs/RACK.md). Without full hijack there is no client socket to hand over, so
  # this is a best-effort IO over the worker connection: each `write` becomes a RESPONSE_BODY
  # frame at once (so the client sees it arrive), `read` reads the request body (rack.input),
  # and the response ends when the body's `call` returns or the stream is closed, whichever
  # comes first. The stream must be used from the request's own thread, during `call`.
  class ResponseStream
    # `write_chunk` is called with each non-empty String; `input` is the request's rack.input.
    def initialize(input, &write_chunk)
      @input = input
      @write_chunk = write_chunk
      @closed_write = false
      @closed_read = false
    end

    # Writes every argument (to_s); returns the number of bytes written.
    def write(*parts)
      raise IOError, "not opened for writing" if @closed_write

      parts.sum do |part|
        s = part.to_s
        @write_chunk.call(s) unless s.empty?
        s.bytesize
      end
    end

    def <<(part)
      write(part)
      self
    end

    # Frames are written as they are made; nothing is buffered here.
    def flush = self

    def read(length = nil, buffer = nil)
      raise IOError, "not opened for reading" if @closed_read

      buffer ? @input.read(length, buffer) : @input.read(length)
    end

    def close_read
      @closed_read = true
      nil
    end

    def close_write
      @closed_write = true
      nil
    end

    def close
      close_read
      close_write
    end

    def closed? = @closed_read && @closed_write

    def closed_write? = @closed_write
  end
end
