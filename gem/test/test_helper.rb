# frozen_string_literal: true

$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
# The C extension as the repo's build makes it (ctest passes its own via RUBYLIB).
ext_lib = File.expand_path("../../build/gem/ext-lib", __dir__)
$LOAD_PATH.unshift(ext_lib) if Dir.exist?(ext_lib) && !ENV["RUBYLIB"].to_s.include?("ext-lib")
require "minitest/autorun"
require "json"
require "puma_plus"

CORPUS_DIR = File.expand_path("../../docs/protocol-corpus", __dir__)

# Which codec a test runs with (lib/puma_plus/wire.rb: Wire.codec=). :native needs the C
# extension; without it the test fails, naming what to build.
module PumaTestCodec
  DEFAULT = PumaPlus::Wire.codec

  def self.use(name)
    if name == :native && !PumaPlus::Wire.native_available?
      raise Minitest::Assertion, "the C extension (gem/ext/puma_plus) is not loaded: build it with " \
                                 "`cmake --build build --target puma_plus_ext` (it lands in build/gem/ext-lib)"
    end
    PumaPlus::Wire.codec = name
  end

  def self.restore = PumaPlus::Wire.codec = DEFAULT
end

require "socket"
require "stringio"
require "timeout"
require "open3"

# The server's end of the wire, driven from tests: reads frames with a timeout and builds
# REQUEST frames the way docs/PROTOCOL.md says the server does.
module FakeServer
  W = PumaPlus::Wire

  module_function

  def decoders = (@decoders ||= {}.compare_by_identity)

  # Next frame from `sock`, or :eof. Raises Timeout::Error after `timeout` seconds.
  def read_frame(sock, timeout: 5)
    dec = decoders[sock] ||= W::Decoder.new
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    loop do
      frame = dec.next_frame
      return frame if frame

      left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
      raise Timeout::Error, "no frame within #{timeout}s" if left <= 0
      next unless IO.select([sock], nil, nil, left)

      data = sock.read_nonblock(65_536, exception: false)
      return :eof if data.nil?
      next if data == :wait_readable

      dec.feed(data)
    end
  rescue Errno::ECONNRESET
    :eof
  end

  def env_pairs(method, path, query: "", headers: {}, extra: [])
    pairs = [["REQUEST_METHOD", method], ["SCRIPT_NAME", ""], ["PATH_INFO", path],
             ["QUERY_STRING", query], ["SERVER_NAME", "localhost"], ["SERVER_PORT", "9292"],
             ["SERVER_PROTOCOL", "HTTP/1.1"], ["REMOTE_ADDR", "127.0.0.1"],
             ["rack.url_scheme", "http"]]
    pairs += extra
    headers.each do |k, v|
      name = k.upcase.tr("-", "_")
      pairs << [name == "CONTENT_TYPE" ? name : "HTTP_#{name}", v]
    end
    pairs << ["HTTP_HOST", "localhost:9292"] unless headers.key?("Host")
    pairs << ["REQUEST_URI", query.empty? ? path : "#{path}?#{query}"]
  end

  def request(id, method, path, body: "", streams: false, hijackable: false, body_file: false, **kw)
    extra = body.empty? && !streams && !body_file ? [] : [["CONTENT_LENGTH", (kw.delete(:content_length) || body.bytesize).to_s]]
    now = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
    env = env_pairs(method, path, extra: extra, **kw) +
          [["puma_plus.request_id", id.to_s], ["puma_plus.queue_ns", "0"]]
    flags = (streams ? W::FLAG_BODY_STREAMS : 0) | (hijackable ? W::FLAG_HIJACKABLE : 0) |
            (body_file ? W::FLAG_BODY_FILE : 0)
    W.encode(W::Request.new(id, now, now, flags, env.flatten, streams || body_file ? "".b : body.b))
  end

  # Reads RESPONSE_HEAD? RESPONSE_BODY* RESPONSE_END for `id`; returns a Hash.
  def read_response(sock, id, timeout: 5)
    res = { head: nil, body: +"".b, chunks: 0, end: nil }
    loop do
      frame = read_frame(sock, timeout: timeout)
      raise "connection closed before RESPONSE_END (got #{res.inspect[0, 200]})" if frame == :eof
      raise "frame for request #{frame.request_id}, expected #{id}" if frame.request_id != id

      case frame
      when W::ResponseHead then res[:head] = frame
      when W::ResponseBody
        res[:body] << frame.chunk
        res[:chunks] += 1
      when W::ResponseEnd
        res[:end] = frame
        return res
      else raise "unexpected #{frame.inspect}"
      end
    end
  end
end
