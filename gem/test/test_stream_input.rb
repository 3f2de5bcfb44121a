# frozen_string_literal: true

require_relative "test_helper"

# StreamInput against a scripted chunk source: IO#read semantics, gets/each, rewind, spill to
# a file, and body_read_ns accounting.
class TestStreamInput < Minitest::Test
  class Source
    attr_reader :pulls

    def initialize(chunks, delay: 0)
      @chunks = chunks.dup
      @delay = delay
      @pulls = 0
    end

    def next_body_chunk
      @pulls += 1
      sleep @delay if @delay.positive?
      c = @chunks.shift
      c&.b
    end
  end

  def input(chunks, **kw) = PumaPlus::StreamInput.new(Source.new(chunks, **kw))

  def test_read_semantics_match_io
    io = input(%w[abc de f])
    assert_equal "", io.read(0)
    assert_equal "ab", io.read(2)
    buf = +"junk"
    assert_same buf, io.read(3, buf)
    assert_equal "cde", buf
    assert_equal "f", io.read
    assert_equal "", io.read, "read() at the end is empty"
    assert_nil io.read(1), "read(n) at the end is nil"
    buf = +"x"
    assert_nil io.read(1, buf)
    assert_equal "", buf
    assert_raises(ArgumentError) { io.read(-1) }
    assert_equal Encoding::BINARY, io.read.encoding
    assert_equal Encoding::BINARY, io.external_encoding
  end

  def test_reads_lazily
    src = Source.new(%w[aaaa bbbb cccc])
    io = PumaPlus::StreamInput.new(src)
    assert_equal 0, src.pulls, "nothing is pulled before the app asks"
    io.read(2)
    assert_equal 1, src.pulls
    io.read(4)
    assert_equal 2, src.pulls
    refute io.complete?
    assert_equal 12, io.size
    assert io.complete?
  end

  def test_gets_each_and_rewind
    io = input(["line one\nli", "ne two\n", "tail"])
    assert_equal "line one\n", io.gets
    assert_equal "line two\n", io.gets
    assert_equal "tail", io.gets
    assert_nil io.gets
    assert_equal 0, io.rewind
    lines = []
    io.each { |l| lines << l }
    assert_equal ["line one\n", "line two\n", "tail"], lines
    io.rewind
    assert_equal "line one\nline two\ntail", io.read
  end

  def test_spills_to_a_file_and_stays_rewindable
    chunk = "0123456789" * 100_000 # 1 MB
    io = input([chunk] * 6)
    first = io.read(5)
    assert_equal "01234", first
    all = io.read
    assert_equal 6 * chunk.bytesize - 5, all.bytesize
    io.rewind
    assert_equal chunk, io.read(chunk.bytesize)
    io.rewind
    assert_equal 6 * chunk.bytesize, io.read.bytesize
  end

  def test_read_ns_counts_time_waiting_for_chunks
    io = input(%w[a b c], delay: 0.02)
    io.read
    assert_operator io.read_ns, :>=, 60_000_000
    assert_operator io.read_ns, :<, 2_000_000_000
  end

  def test_passes_rack_lint_input_checks
    require "rack"
    require "rack/lint"
    env = Rack::MockRequest.env_for("/", method: "POST")
    env["rack.input"] = input(%w[hello])
    seen = nil
    app = Rack::Lint.new(lambda do |e|
      seen = e["rack.input"].read
      [200, { "content-type" => "text/plain" }, []]
    end)
    app.call(env)
    assert_equal "hello", seen
  end
end
