# frozen_string_literal: true

# Both codecs inside a non-main Ractor over the golden corpus (issue 28, docs/RACK.md "Ractor
# slots"): every good frame decodes there to what the main Ractor decodes (test_wire.rb checks
# that against the .json) and re-encodes to the same bytes; a REQUEST also decodes through a
# Decoder with an env prototype (the slot's hot path, decode_request_at); every bad frame
# is rejected with its class. A codec that reads an unshareable constant, or a C function not
# declared Ractor-safe, raises Ractor::IsolationError / Ractor::UnsafeError here instead.
# Its own process (ctest gem_ractor_codec), not gem_minitest's: the first Ractor switches the
# whole VM into its multi-Ractor mode.
require_relative "test_helper"

Warning[:experimental] = false

class TestRactorCodec < Minitest::Test
  W = PumaPlus::Wire
  FILES = Ractor.make_shareable(Dir[File.join(CORPUS_DIR, "*.bin")].sort.to_h do |f|
    [File.basename(f, ".bin"), File.binread(f)]
  end)
  PROTO = Ractor.make_shareable({ "rack.version" => [1, 3], "SCRIPT_NAME" => "" })

  # name => [frame class, frame.to_a, re-encoded bytes, Decoder env] or [:error, reason].
  def self.run_all(files, proto)
    files.to_h do |name, bytes|
      frame, = PumaPlus::Wire.decode(bytes)
      if frame.nil?
        [name, [:need_more]]
      else
        env = nil
        if frame.is_a?(PumaPlus::Wire::Request)
          dec = PumaPlus::Wire::Decoder.new(env_proto: proto)
          dec.feed(bytes)
          env = dec.next_frame.env.to_a
        end
        [name, [frame.class.name, frame.to_a, PumaPlus::Wire.encode(frame), env]]
      end
    rescue PumaPlus::Wire::ProtocolError => e
      [name, [:error, e.reason]]
    end
  end

  %i[ruby native].each do |codec|
    define_method("test_corpus_in_a_ractor_#{codec}") do
      PumaTestCodec.use(codec)
      expected = self.class.run_all(FILES, PROTO)
      got = Ractor.new(FILES, PROTO) { |files, proto| TestRactorCodec.run_all(files, proto) }.take
      assert_equal expected.keys, got.keys
      FILES.each do |name, bytes|
        assert_equal expected[name], got[name], "#{name} (#{codec} codec) in a Ractor"
        next if name.start_with?("bad-")

        assert_equal bytes, got[name][2], "#{name} re-encoded in a Ractor"
      end
      requests = FILES.count { |name, _| name.start_with?("request-") } # the corpus's REQUEST frames
      assert_operator requests, :>=, 9
      assert_equal requests, got.count { |_, v| v[0] == "PumaPlus::Wire::Request" && v[3] }, "REQUEST frames decoded with env_proto"
      assert_operator got.count { |_, v| v[0] == :error }, :>=, 5, "bad frames rejected in the Ractor"
    ensure
      PumaTestCodec.restore
    end
  end
end
