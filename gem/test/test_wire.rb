# frozen_string_literal: true

require_relative "test_helper"

# The codec against the golden corpus (docs/protocol-corpus): every good frame decodes to
# its .json and re-encodes to the same bytes; every bad-* frame is rejected with its class;
# every strict prefix of every frame is "need more" (nil) or a ProtocolError, never another
# exception. TestWire runs it with the pure-Ruby codec (the reference), TestWireNative below
# runs every test again with the C extension's hot functions (gem/ext/puma_plus).
class TestWire < Minitest::Test
  W = PumaPlus::Wire
  CODEC = :ruby

  def setup
    PumaTestCodec.use(self.class::CODEC)
  end

  def teardown
    PumaTestCodec.restore
  end

  GOOD = Dir[File.join(CORPUS_DIR, "*.bin")].reject { |f| File.basename(f).start_with?("bad-") }.sort
  BAD = Dir[File.join(CORPUS_DIR, "bad-*.bin")].sort

  def self.json_for(bin) = JSON.parse(File.read(bin.sub(/\.bin\z/, ".json")))

  def frame_to_json(frame)
    name = W::TYPES.fetch(W::TYPE_OF_CLASS.fetch(frame.class))[0]
    h = { "type" => name }
    frame.each_pair do |k, v|
      case k
      when :body, :chunk, :buffered, :data, :reason, :protocol, :tag, :prefix, :suffix, :handler
        h["#{k}_hex"] = v.unpack1("H*")
      when :env, :headers, :tags
        assert_equal 0, v.size % 2
        h[k.to_s] = v.each_slice(2).map { |a, b| [a.b, b.b] }
      else h[k.to_s] = v
      end
    end
    h
  end

  def normalize_json(json)
    json.transform_values { |v| v.is_a?(Array) ? v.map { |a, b| [a.b, b.b] } : v }
  end

  def test_corpus_is_present
    assert_operator GOOD.size, :>=, 14, "expected at least one good frame per type"
    assert_operator BAD.size, :>=, 6
    names = GOOD.map { |f| self.class.json_for(f)["type"] }.uniq.sort
    assert_equal W::TYPES.values.map(&:first).sort, names, "every frame type is in the corpus"
  end

  GOOD.each do |bin|
    name = File.basename(bin, ".bin")
    define_method("test_good_#{name.tr('-', '_')}") do
      bytes = File.binread(bin)
      json = self.class.json_for(bin)
      frame, consumed = W.decode(bytes)
      assert_equal bytes.bytesize, consumed
      assert_equal normalize_json(json), frame_to_json(frame)
      assert_equal bytes, W.encode(frame), "re-encoding #{name} gives the same bytes"

      # Every strict prefix is "need more", never an error.
      (0...bytes.bytesize).step(prefix_step(bytes)) do |n|
        assert_nil W.decode(bytes.byteslice(0, n)), "prefix #{n} of #{name}"
      end
      # The same frame at an offset, followed by another frame's bytes.
      padded = "xyz".b + bytes + bytes
      frame2, consumed2 = W.decode(padded, 3)
      assert_equal consumed, consumed2
      assert_equal frame, frame2
    end
  end

  # Every prefix of small frames; for the 64 KiB one, every prefix would be 65k decodes of a
  # growing string, so step through it (still covering the header and its first bytes).
  def prefix_step(bytes) = bytes.bytesize > 4096 ? 97 : 1

  BAD.each do |bin|
    name = File.basename(bin, ".bin")
    define_method("test_#{name.tr('-', '_')}") do
      bytes = File.binread(bin)
      expected = self.class.json_for(bin).fetch("error")
      if expected == "truncated"
        assert_nil W.decode(bytes), "#{name}: a truncated frame is need-more"
      else
        err = assert_raises(W::ProtocolError) { W.decode(bytes) }
        assert_equal expected, err.reason.to_s, err.message
      end
      (0...bytes.bytesize).each do |n|
        begin
          W.decode(bytes.byteslice(0, n))
        rescue W::ProtocolError
          nil
        end
      end
    end
  end

  def test_decoder_streams_frames_split_anywhere
    frames = GOOD.first(20).map { |f| File.binread(f) }
    stream = frames.join.b
    expected = frames.map { |b| W.decode(b)[0] }
    [1, 3, 7, 64, 1000].each do |step|
      dec = W::Decoder.new
      got = []
      (0...stream.bytesize).step(step) do |off|
        dec.feed(stream.byteslice(off, step))
        while (f = dec.next_frame)
          got << f
        end
      end
      assert_equal expected, got, "split every #{step} bytes"
      assert_equal 0, dec.buffered_bytes
    end
  end

  def test_decoder_error_is_sticky
    dec = W::Decoder.new
    dec.feed(File.binread(File.join(CORPUS_DIR, "bad-reserved-first.bin")))
    assert_raises(W::ProtocolError) { dec.next_frame }
    dec.feed(File.binread(File.join(CORPUS_DIR, "hello.bin")))
    assert_raises(W::ProtocolError) { dec.next_frame }
  end

  def test_fuzzed_mutations_only_raise_protocol_error
    rng = Random.new(1234)
    GOOD.each do |bin|
      bytes = File.binread(bin)
      next if bytes.bytesize > 4096

      20.times do
        m = bytes.dup
        rng.rand(1..3).times { m.setbyte(rng.rand(m.bytesize), rng.rand(256)) }
        begin
          W.decode(m)
        rescue W::ProtocolError
          nil
        end
      end
    end
    pass
  end

  def test_hot_path_encoders_match_generic_encoder
    out = "".b
    flat = ["Location", "/next", "Set-Cookie", "a=1", "Set-Cookie", "b=\u00e9"]
    W.append_response_head(out, 7, 302, flat)
    W.append_response_body(out, 7, "caf\u00e9")
    W.append_response_body(out, 7, "")
    W.append_response_end(out, 7, 1, 2, 0, -1, 5)
    exp = W.encode(W::ResponseHead.new(7, 302, flat)) +
          W.encode(W::ResponseBody.new(7, "caf\u00e9".b)) + W.encode(W::ResponseBody.new(7, "".b)) +
          W.encode(W::ResponseEnd.new(7, 1, 2, 0, -1, 5))
    assert_equal exp, out
    assert_equal File.binread(File.join(CORPUS_DIR, "hello.bin")), W.encode_hello(12_345, 0, 0, 2)
  end

  def test_large_response_body_is_split_at_max_payload
    out = "".b
    big = "x" * (W::MAX_PAYLOAD + 10)
    W.append_response_body(out, 3, big)
    frames = []
    pos = 0
    while (r = W.decode(out, pos))
      frames << r[0]
      pos += r[1]
    end
    assert_equal out.bytesize, pos
    assert_equal 2, frames.size
    assert_equal big, frames.map(&:chunk).join
  end

  REQUEST_PAYLOADS = Dir[File.join(CORPUS_DIR, "*.bin")].sort.filter_map do |f|
    b = File.binread(f)
    b.getbyte(0) == PumaPlus::Wire::REQUEST && !File.basename(f).start_with?("bad-") ? b.byteslice(8..) : nil
  end

  # decode_request_env (the worker's hot path): the env is a new, unfrozen dup of the
  # prototype with every pair stored in order (a repeated key keeps its last value); the
  # other fields are decode_request's; a Decoder made with env_proto: gives the same.
  def test_decode_request_env_is_the_prototype_plus_the_pairs
    proto = { "rack.multithread" => true, "SCRIPT_NAME" => "", "PATH_INFO" => "/from-proto" }.freeze
    assert_operator REQUEST_PAYLOADS.size, :>=, 2
    dup_pairs = W::Request.new(7, 1, 2, 0, ["X_K", "first", "PATH_INFO", "/p", "X_K", "last"], "body".b)
    # More pairs than the C codec inserts at once, keys repeated across those batches.
    many = W::Request.new(9, 1, 2, 0, Array.new(70) { |i| ["K#{i % 40}", "v#{i}"] }.flatten, "")
    payloads = REQUEST_PAYLOADS + [W.encode(many).byteslice(8..), W.encode(dup_pairs).byteslice(8..)]
    payloads.each do |payload|
      flat = W.decode_request(payload)
      req = W.decode_request_env(payload, proto)
      want = proto.dup
      flat.env.each_slice(2) { |k, v| want[k] = v }
      assert_equal want, req.env
      assert_equal want.keys, req.env.keys, "insertion order"
      refute req.env.frozen?
      refute_same proto, req.env
      assert_equal [flat.request_id, flat.t2b_ns, flat.t3_ns, flat.flags, flat.body],
                   [req.request_id, req.t2b_ns, req.t3_ns, req.flags, req.body]
      dec = W::Decoder.new(env_proto: proto)
      dec.feed(W.header(W::REQUEST, payload.bytesize) + payload)
      assert_equal req, dec.next_frame
    end
    empty = W.decode_request_env(W.encode(W::Request.new(8, 1, 2, 0, [], "")).byteslice(8..), proto)
    assert_same W::EMPTY_BODY, empty.body, "an empty body is the one frozen EMPTY_BODY"
    assert empty.body.frozen?
    assert_equal Encoding::BINARY, empty.body.encoding
    refute W.decode_request(payloads.last).body.frozen?, "a body with bytes is the request's own"
    env = W.decode_request_env(payloads.last, proto).env
    assert_equal ["last", "/p"], [env["X_K"], env["PATH_INFO"]]
    assert_equal "/from-proto", proto["PATH_INFO"]
  end

  # A Decoder with env_proto: fed every corpus frame (bad ones last), split at every few
  # bytes, gives the frames the plain Decoder gives, with REQUEST env as the Hash, and the
  # same sticky ProtocolError at the end.
  def test_decoder_with_env_proto_matches_the_plain_decoder
    proto = { "SCRIPT_NAME" => "" }.freeze
    stream = (GOOD + BAD.first(3)).map { |f| File.binread(f) }.join
    [1, 7, 64, stream.bytesize].each do |step|
      plain = W::Decoder.new
      fast = W::Decoder.new(env_proto: proto)
      want = []
      got = []
      errors = [plain, fast].map do |dec|
        out = dec.equal?(plain) ? want : got
        (0...stream.bytesize).step(step) do |off|
          dec.feed(stream.byteslice(off, step))
          while (frame = dec.next_frame)
            out << frame
          end
        end
        nil
      rescue W::ProtocolError => e
        [e.reason, e.message]
      end
      want = want.map { |f| f.is_a?(W::Request) ? W::Request.new(*f.to_a).tap { |r| r.env = proto.merge(f.env.each_slice(2).to_h) } : f }
      assert_equal want, got, "step #{step}"
      refute_nil errors[0]
      assert_equal errors[0], errors[1]
    end
  end

  # The WebSocket encoders the worker uses give the generic encoder's bytes (with the C
  # extension too, in TestWireNative), and the corpus's WS_DONE.
  def test_ws_encoders_match_generic_encoder
    out = "".b
    W.append_ws_done(out, 44, 6_000_002_000, 6_000_052_000, -1, 41_000)
    assert_equal File.binread(File.join(CORPUS_DIR, "ws-done.bin")), out
    out = "".b
    W.append_ws_send(out, 7, W::WS_TEXT, "h\u00e9")
    W.append_ws_broadcast(out, W::WS_BINARY, "room:1", "\x00\xff".b)
    W.append_ws_tag(out, 7, W::WS_TAG_ADD, "room:1", "{", "}")
    W.append_ws_close_conn(out, 7, 4001, "bye")
    exp = W.encode(W::WsSend.new(7, 1, "h\u00e9".b)) + W.encode(W::WsBroadcast.new(2, "room:1".b, "\x00\xff".b)) +
          W.encode(W::WsTag.new(7, 0, "room:1".b, "{".b, "}".b)) + W.encode(W::WsCloseConn.new(7, 4001, "bye".b))
    assert_equal exp, out
    frames = []
    pos = 0
    while (r = W.decode(out, pos))
      frames << r[0]
      pos += r[1]
    end
    assert_equal [W::WsSend, W::WsBroadcast, W::WsTag, W::WsCloseConn], frames.map(&:class)
    assert_equal "h\u00e9".b, frames[0].data
    assert_raises(ArgumentError) { W.append_ws_send(+"".b, 1, 1, "x" * W::MAX_PAYLOAD) }
    assert_raises(ArgumentError) { W.append_ws_broadcast(+"".b, 1, "t", "x" * W::MAX_PAYLOAD) }
  end

  def test_full_u64_range_round_trips
    f = W::ResponseEnd.new(2**64 - 1, 2**64 - 2, 0, 2**64 - 1, -1, -(2**63))
    assert_equal f, W.decode(W.encode(f))[0]
  end
end

class TestWireNative < TestWire
  CODEC = :native

  # Differential: on every REQUEST payload of the corpus, every truncation of it and a few
  # thousand mutations, the C decoder returns what the Ruby one returns, or raises the same
  # ProtocolError (reason and message).
  def test_native_decode_request_matches_the_ruby_reference
    payloads = Dir[File.join(CORPUS_DIR, "*.bin")].filter_map do |f|
      b = File.binread(f)
      b.getbyte(0) == W::REQUEST && b.bytesize >= 8 ? b.byteslice(8..) : nil
    end
    assert_operator payloads.size, :>=, 2
    rng = Random.new(11)
    inputs = payloads.flat_map { |p| (0..p.bytesize).map { |n| p.byteslice(0, n) } }
    payloads.each do |p|
      500.times do
        m = p.dup
        3.times { m.setbyte(rng.rand(m.bytesize), rng.rand(256)) }
        inputs << m
      end
    end
    # The interning check below compares objects: with GC on, a lazy sweep can leave the intern
    # table pointing at a dead copy of a key while a new one is made, so it failed for some seeds.
    GC.disable
    inputs.each do |input|
      want = begin
        W.ruby_decode_request(input)
      rescue W::ProtocolError => e
        e
      end
      got = begin
        W.native_decode_request(input)
      rescue W::ProtocolError => e
        e
      end
      if want.is_a?(W::ProtocolError)
        assert_instance_of W::ProtocolError, got, input.unpack1("H*")
        assert_equal [want.reason, want.message], [got.reason, got.message]
      else
        assert_equal want, got
        assert got.env.each_slice(2).all? { |k, v| k.frozen? && k.encoding == Encoding::UTF_8 && v.encoding == Encoding::BINARY }
        got.env.each_slice(2) { |k, _| assert_same(-k.dup, k, "keys are interned") }
      end
    end
  ensure
    GC.enable
  end

  # The same differential for decode_request_env: truncations and mutations of the corpus's
  # REQUEST payloads decode to equal Requests (env Hash included) or the same ProtocolError.
  def test_native_decode_request_env_matches_the_ruby_reference
    proto = PumaPlus::Worker.prototype_env(threads: 2, worker_index: 1)
    rng = Random.new(13)
    inputs = REQUEST_PAYLOADS.flat_map { |p| (0..p.bytesize).map { |n| p.byteslice(0, n) } }
    REQUEST_PAYLOADS.each do |p|
      300.times do
        m = p.dup
        3.times { m.setbyte(rng.rand(m.bytesize), rng.rand(256)) }
        inputs << m
      end
    end
    inputs.each do |input|
      want = begin
        W.ruby_decode_request_env(input, proto)
      rescue W::ProtocolError => e
        e
      end
      got = begin
        W.native_decode_request_env(input, proto)
      rescue W::ProtocolError => e
        e
      end
      if want.is_a?(W::ProtocolError)
        assert_instance_of W::ProtocolError, got, input.unpack1("H*")
        assert_equal [want.reason, want.message], [got.reason, got.message]
      else
        assert_equal want, got
        assert_equal want.env.keys, got.env.keys
      end
    end
    assert_raises(TypeError) { W.native_decode_request_env(REQUEST_PAYLOADS.first, [].freeze) }
  end

  # append_response_headers: the C flattening of a Rack headers Hash gives the bytes the Ruby
  # one (Response.flatten_headers + append_response_head) gives, for every value shape.
  def test_native_append_response_headers_matches_the_ruby_reference
    values = ["text/plain", "", "a\nb", "a\n", "\n", "\na", "a\n\nb\n\n", ["x", "y"], [], [1, :s], nil, 42, :sym,
              "caf\u00e9", "v" * 300]
    keys = ["content-type", "rack.hijack", "set-cookie", :symbol_key, "x-r", "rack", "rack.x", "r"]
    rng = Random.new(17)
    cases = [{}, { "content-length" => "13", "content-type" => "text/plain" }]
    200.times do
      cases << Array.new(rng.rand(0..6)) { [keys.sample(random: rng), values.sample(random: rng)] }.to_h
    end
    cases.each do |headers|
      id = rng.rand(2**64)
      want = W.ruby_append_response_headers(+"prefix".b, id, 204, headers)
      got = W.native_append_response_headers(+"prefix".b, id, 204, headers)
      assert_equal want, got, headers.inspect
      frame, = W.decode(got, 6)
      assert_equal PumaPlus::Response.flatten_headers(headers).map(&:b), frame.headers.map(&:b)
    end
    # Not a Hash (Rack 2 allows any #each): through Response.flatten_headers.
    pairs = [["a", "1\n2"], ["rack.x", "no"]]
    assert_equal W.ruby_append_response_headers(+"".b, 1, 200, pairs), W.native_append_response_headers(+"".b, 1, 200, pairs)
    assert_raises(ArgumentError) { W.native_append_response_headers(+"".b, 1, 200, { "k" => "v" * W::MAX_PAYLOAD }) }
  end

  # decode_request_at, C against Ruby: every frame of the corpus (bad ones too) at an offset,
  # each of its prefixes and some mutations of its header and payload: the same Request, nil,
  # false, or ProtocolError.
  def test_native_decode_request_at_matches_the_ruby_reference
    proto = { "SCRIPT_NAME" => "" }.freeze
    rng = Random.new(19)
    inputs = []
    (GOOD + BAD).each do |f|
      b = File.binread(f)
      next if b.bytesize > 4096

      (0..b.bytesize).each { |n| inputs << ("ab".b + b.byteslice(0, n)) }
      200.times do
        m = b.dup
        2.times { m.setbyte(rng.rand([m.bytesize, 40].min), rng.rand(256)) }
        inputs << ("ab".b + m)
      end
    end
    kinds = Hash.new(0)
    cache = [] # shared by all inputs, as one connection's is: stale keys must never leak in
    GC.disable # the interning check compares objects (see test_native_decode_request_matches_the_ruby_reference)
    inputs.each do |input|
      want = begin
        W.ruby_decode_request_at(input, 2, proto, [])
      rescue W::ProtocolError => e
        e
      end
      got = begin
        W.native_decode_request_at(input, 2, proto, cache)
      rescue W::ProtocolError => e
        e
      end
      kinds[want.class] += 1
      if want.is_a?(W::ProtocolError)
        assert_instance_of W::ProtocolError, got, input.unpack1("H*")
        assert_equal [want.reason, want.message], [got.reason, got.message]
      elsif want.nil?
        assert_nil got, input.unpack1("H*")
      else
        assert_equal want, got, input.unpack1("H*")
      end
    end
    [NilClass, FalseClass, W::Request, W::ProtocolError].each { |k| assert_operator kinds[k], :>, 0, k.name }
    assert_operator cache.size, :>, 0
    assert(cache.all? { |k| k.frozen? && k.encoding == Encoding::UTF_8 && k.equal?(-k.dup) }, "cached keys are interned")
    assert_nil W.native_decode_request_at("x".b, 2, proto, [])
    assert_nil W.ruby_decode_request_at("x".b, 2, proto, [])
    assert_raises(ArgumentError) { W.native_decode_request_at("x".b, -1, proto, []) }
    assert_raises(FrozenError) { W.native_decode_request_at("x".b, 0, proto, [].freeze) }
  ensure
    GC.enable
  end

  def test_native_encoders_match_the_ruby_reference
    rng = Random.new(5)
    20.times do
      flat = Array.new(rng.rand(0..12)) { rng.bytes(rng.rand(0..40)) }
      flat << "x" if flat.size.odd?
      id = rng.rand(2**64)
      chunk = rng.bytes(rng.rand(0..3000))
      want = W.ruby_append_response_head(+"".b, id, 200, flat)
      W.ruby_append_response_body(want, id, chunk)
      W.ruby_append_response_end(want, id, rng.rand(2**63), 2, 3, -1, rng.rand(2**62))
      got = W.native_append_response_head(+"".b, id, 200, flat)
      W.native_append_response_body(got, id, chunk)
      W.native_append_response_end(got, id, want.byteslice(-40, 8).unpack1("Q>"), 2, 3, -1, want.byteslice(-8, 8).unpack1("q>"))
      assert_equal want, got
    end
    assert_raises(ArgumentError) { W.native_append_response_head(+"".b, 1, 200, ["k", "v" * W::MAX_PAYLOAD]) }
  end

  # The worker's response write (Connection#send_out): sends what fits, never blocks, leaves
  # the descriptor in blocking mode, and raises for a peer that is gone.
  def test_native_send_nowait
    a, b = UNIXSocket.pair
    a.nonblock = false
    assert_equal 0, W.native_send_nowait(a.fileno, "")
    assert_equal 5, W.native_send_nowait(a.fileno, "hello")
    assert_equal "hello", b.readpartial(100)
    big = "x" * 65_536
    sent = 0
    full = Timeout.timeout(10) do
      loop do
        n = W.native_send_nowait(a.fileno, big)
        assert_operator n, :<=, big.bytesize
        sent += n
        break n if n < big.bytesize # the buffer is full: a part or nothing, no wait
      end
    end
    assert_operator full, :<, big.bytesize
    refute a.nonblock?, "the descriptor stays blocking"
    got = 0
    got += b.readpartial(1 << 20).bytesize while got < sent
    assert_equal sent, got
    b.close
    assert_raises(Errno::EPIPE) { W.native_send_nowait(a.fileno, "gone") }
    assert_raises(Errno::EBADF) { W.native_send_nowait(-1, "x") }
  ensure
    a&.close
    b&.close unless b&.closed?
  end
end

# The C extension's WebSocket functions against the Ruby reference: WS_MESSAGE payloads of the
# corpus, every truncation and mutations of them decode to equal frames or the same
# ProtocolError; the encoders give the same bytes for random inputs.
class TestWireNativeWs < Minitest::Test
  W = PumaPlus::Wire

  def setup = PumaTestCodec.use(:native)

  def teardown = PumaTestCodec.restore

  def test_native_ws_functions_match_the_ruby_reference
    payloads = Dir[File.join(CORPUS_DIR, "*ws-message*.bin")].map { |f| File.binread(f).byteslice(8..) }
    assert_operator payloads.size, :>=, 3
    rng = Random.new(23)
    inputs = payloads.flat_map { |p| (0..[p.bytesize, 40].min).map { |n| p.byteslice(0, n) } }
    payloads.each { |p| 100.times { m = p.dup; 2.times { m.setbyte(rng.rand(m.bytesize), rng.rand(256)) }; inputs << m } }
    inputs.each do |input|
      want = begin
        W.ruby_decode_ws_message(input)
      rescue W::ProtocolError => e
        e
      end
      got = begin
        W.native_decode_ws_message(input)
      rescue W::ProtocolError => e
        e
      end
      if want.is_a?(W::ProtocolError)
        assert_equal [want.reason, want.message], [got.reason, got.message]
      else
        assert_equal want, got
      end
    end
    200.times do
      id = rng.rand(2**64)
      data = Random.bytes(rng.rand(0..300))
      tag = Random.bytes(rng.rand(0..40))
      op = rng.rand(1..2)
      assert_equal W.ruby_append_ws_send(+"p".b, id, op, data), W.native_append_ws_send(+"p".b, id, op, data)
      assert_equal W.ruby_append_ws_broadcast(+"p".b, op, tag, data), W.native_append_ws_broadcast(+"p".b, op, tag, data)
      t = Array.new(4) { rng.rand(2**63) }
      assert_equal W.ruby_append_ws_done(+"".b, id, t[0], t[1], -1, t[3]), W.native_append_ws_done(+"".b, id, t[0], t[1], -1, t[3])
    end
    utf8 = "caf\u00e9"
    assert_equal W.ruby_append_ws_send(+"".b, 1, 1, utf8), W.native_append_ws_send(+"".b, 1, 1, utf8)
  end
end
