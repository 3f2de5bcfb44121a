# frozen_string_literal: true

require "stringio"
require "tempfile"

module PumaPlus
  # rack.input for a request whose body streams (REQUEST flag BODY_STREAMS): reads BODY
  # frames from the worker connection only when the app asks for bytes, and keeps everything
  # read so that #rewind works as Rack 2.2 requires. Bytes live in memory up to SPILL_AT and in
  # an unlinked temporary file beyond. `read_ns` is the time the app spent blocked waiting for
  # body bytes (reported as body_read_ns in RESPONSE_END).
  #
  # `source` must respond to #next_body_chunk, returning a binary String or nil at the end of
  # the body (BODY_END, or CANCEL: the server sends nothing more for a cancelled request).
  class StreamInput
    SPILL_AT = 4 * 1024 * 1024

    attr_reader :read_ns

    def initialize(source)
      @source = source
      @io = StringIO.new(String.new(encoding: Encoding::BINARY))
      @size = 0
      @complete = false
      @read_ns = 0
    end

    def external_encoding = Encoding::BINARY

    def complete? = @complete

    # IO#read semantics: read() / read(nil) → the rest ("" at the end); read(n) → up to n
    # bytes, nil at the end; read(0) → "". `outbuf` is replaced with the result.
    def read(length = nil, outbuf = nil)
      if length.nil?
        fill_until(nil)
        data = @io.read || +""
      else
        raise ArgumentError, "negative length #{length} given" if length.negative?

        if length.zero?
          data = +""
        else
          fill_until(@io.pos + length)
          data = @io.read(length)
        end
      end
      return data unless outbuf

      outbuf.replace(data || "")
      data && outbuf
    end

    def gets
      loop do
        pos = @io.pos
        line = @io.gets
        return line if @complete || (line && line.end_with?("\n"))

        @io.seek(pos)
        pull
      end
    end

    def each
      while (line = gets)
        yield line
      end
      self
    end

    def rewind
      @io.rewind
      0
    end

    def size
      fill_until(nil)
      @size
    end

    def close = nil

    private

    def fill_until(target)
      pull while !@complete && (target.nil? || @size < target)
    end

    def pull
      return if @complete

      t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
      chunk = @source.next_body_chunk
      @read_ns += Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond) - t0
      if chunk.nil?
        @complete = true
        return
      end
      append(chunk)
    end

    def append(chunk)
      if @io.is_a?(StringIO)
        if @size + chunk.bytesize <= SPILL_AT
          @io.string << chunk
          @size += chunk.bytesize
          return
        end
        spill
      end
      @io.pwrite(chunk, @size)
      @size += chunk.bytesize
    end

    def spill
      file = Tempfile.create("puma-plus-body")
      File.unlink(file.path)
      file.binmode
      file.write(@io.string)
      file.seek(@io.pos)
      @io = file
    end
  end
end
