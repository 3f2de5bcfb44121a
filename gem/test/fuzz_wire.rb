# frozen_string_literal: true

# A Ruby-driven mutation loop over the golden corpus (docs/protocol-corpus/*.bin) for the
# gem's frame codec, run against the pure-Ruby reference and the C extension (ext/puma_plus)
# alike (issue 11, docs/FUZZING.md "The Ruby codec").
#
#   ruby -Igem/lib gem/test/fuzz_wire.rb [ITERATIONS=1000000] [SEED=1] [CODECS=ruby,native]
#
# Each iteration takes a corpus file (or two spliced), mutates it (byte sets, bit flips,
# inserts, deletes, truncations, a length field rewritten, a duplicated range), and decodes the
# result three ways: Wire.decode from offset 0 in a loop, a Decoder fed the whole buffer, and a
# Decoder fed in pseudo-random pieces. Properties:
#   1. every outcome is a frame (a Wire Struct), nil (need more bytes) or a ProtocolError with a
#      reason Symbol and a message; any other exception is a finding;
#   2. the three ways give the same frames and end the same way (the same error reason);
#   3. with both codecs, the ruby and native decoders give equal frames or the same error;
#   4. a decoded frame that the encoder takes (Wire.encode) re-encodes to exactly the bytes
#      it was decoded from.
# A finding prints the input in hex and exits 1. Progress goes to stderr every 10% of the run.
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "puma_plus/wire"

W = PumaPlus::Wire
iterations = Integer(ARGV[0] || 1_000_000)
seed = Integer(ARGV[1] || 1)
codecs = (ARGV[2] || "ruby,native").split(",").map(&:to_sym)
if codecs.include?(:native) && !W.native_available?
  if ENV["PP_NATIVE_REQUIRED"]
    warn "fuzz_wire: the native codec (ext/puma_plus) is not built"
    exit 1
  end
  codecs.delete(:native)
  warn "fuzz_wire: native codec not built; fuzzing the Ruby codec only"
end
corpus_dir = File.expand_path("../../docs/protocol-corpus", __dir__)
corpus = Dir[File.join(corpus_dir, "*.bin")].sort.map { |f| File.binread(f) }
abort "fuzz_wire: no corpus in #{corpus_dir}" if corpus.size < 10

rng = Random.new(seed)

mutate = lambda do |buf|
  b = buf.b
  rng.rand(1..4).times do
    case rng.rand(8)
    when 0 then b.setbyte(rng.rand(b.bytesize), rng.rand(256)) unless b.empty?
    when 1 then (i = rng.rand(b.bytesize); b.setbyte(i, b.getbyte(i) ^ (1 << rng.rand(8)))) unless b.empty?
    when 2 then b.insert(rng.rand(b.bytesize + 1), rng.bytes(rng.rand(1..8)))
    when 3 then b = b.byteslice(0, rng.rand(b.bytesize + 1))
    when 4 then (i = rng.rand(b.bytesize); b = b.byteslice(0, i) + b.byteslice(i + rng.rand(1..8), b.bytesize).to_s) unless b.empty?
    when 5 # rewrite a u32 (a length or a count) with an interesting value
      if b.bytesize >= 4
        i = rng.rand(b.bytesize - 3)
        v = [0, 1, 7, 8, 33, 255, 256, 65_535, 0x7fffffff, 0xffffffff, rng.rand(2**32)].sample(random: rng)
        b[i, 4] = [v].pack("N")
      end
    when 6 # duplicate a range
      unless b.empty?
        i = rng.rand(b.bytesize)
        b.insert(rng.rand(b.bytesize + 1), b.byteslice(i, rng.rand(1..64)).to_s)
      end
    else
      b << corpus.sample(random: rng) # splice: another frame after this one
    end
  end
  b
end

# Decodes the whole buffer with Wire.decode: [frames, :need_more | :done | [error reason, message]]
decode_loop = lambda do |buf|
  frames = []
  pos = 0
  begin
    while pos < buf.bytesize
      r = W.decode(buf, pos)
      return [frames, :need_more] unless r

      frame, used = r
      raise "consumed #{used.inspect} at #{pos}" unless used.is_a?(Integer) && used >= 8 && pos + used <= buf.bytesize
      raise "decoded a #{frame.class}" unless W::TYPE_OF_CLASS.key?(frame.class)

      frames << [frame, buf.byteslice(pos, used)]
      pos += used
    end
    [frames, :done]
  rescue W::ProtocolError => e
    raise "ProtocolError without a reason: #{e.inspect}" unless e.reason.is_a?(Symbol) && !e.message.empty?

    [frames, [e.reason, e.message]]
  end
end

decoder_run = lambda do |buf, pieces|
  d = W::Decoder.new
  frames = []
  pos = 0
  begin
    while pos < buf.bytesize
      n = pieces ? rng.rand(1..64) : buf.bytesize
      d.feed(buf.byteslice(pos, n))
      pos += n
      while (f = d.next_frame)
        frames << f
      end
    end
    [frames, d.buffered_bytes.zero? ? :done : :need_more]
  rescue W::ProtocolError => e
    begin
      d.next_frame
      raise "decoder error is not sticky"
    rescue W::ProtocolError => e2
      raise "sticky error differs" unless e2.reason == e.reason
    end
    [frames, [e.reason, e.message]]
  end
end

finding = lambda do |why, input|
  warn "fuzz_wire: FINDING (#{why}) on input #{input.unpack1('H*')}"
  exit 1
end

outcomes = Hash.new(0)
t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
iterations.times do |it|
  base = corpus.sample(random: rng)
  input = mutate.call(base)
  results = codecs.map do |codec|
    W.codec = codec
    begin
      whole = decode_loop.call(input)
      fed = decoder_run.call(input, false)
      pieces = decoder_run.call(input, true)
    rescue StandardError => e
      finding.call("#{codec}: #{e.class}: #{e.message}", input)
    end
    frames = whole[0].map(&:first)
    finding.call("#{codec}: Decoder fed whole differs from decode", input) unless fed == [frames, whole[1]]
    finding.call("#{codec}: Decoder fed in pieces differs from decode", input) unless pieces[0] == frames && pieces[1].class == whole[1].class && (pieces[1].is_a?(Symbol) || pieces[1][0] == whole[1][0])
    whole[0].each do |frame, bytes|
      begin
        again = W.encode(frame)
      rescue ArgumentError, TypeError, RangeError
        next # a frame the encoder refuses (e.g. a field out of its range) is not a finding
      end
      finding.call("#{codec}: re-encoding #{W.frame_name(frame)} gives other bytes", input) unless again.b == bytes
    end
    [frames, whole[1]]
  end
  finding.call("ruby and native codecs differ", input) if results.size == 2 && results[0] != results[1]
  end_state = results[0][1]
  outcomes[end_state.is_a?(Array) ? :protocol_error : end_state] += 1
  outcomes[:frames] += results[0][0].size
  if ((it + 1) % [iterations / 10, 1].max).zero?
    warn format("fuzz_wire: %d/%d iterations, %.0f/s", it + 1, iterations, (it + 1) / (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0))
  end
end
elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
puts format("fuzz_wire: %d iterations (seed %d, codecs %s) in %.1f s: %d ended in a ProtocolError, %d needed more bytes, %d decoded completely; %d frames; no finding",
            iterations, seed, codecs.join("+"), elapsed, outcomes[:protocol_error], outcomes[:need_more], outcomes[:done], outcomes[:frames])
