# frozen_string_literal: true

# Every response shape and env use the Rack SPEC names, behind the Rack::Lint of whichever
# Rack is loaded (Debian's 2.2 or the pinned 3.2): tests/e2e/test_rack_lint.rb drives it under
# the real server. Rack::Lint is the outermost middleware, so it checks exactly the env the
# worker built and exactly what the worker receives. A violation raises Rack::Lint::LintError
# (logged by the worker, the request gets a 500), so a clean log means zero violations.
#
# The app speaks the dialect of the loaded Rack: Array header values and Streaming Bodies are
# Rack 3; under Rack 2.2 it sends "\n"-joined values and Enumerable Bodies instead.
require "rack"
require "rack/lint"
require "digest"

RACK3 = Rack.release >= "3"
FINISHED = Queue.new

# An Enumerable Body that is not an Array: yields slowly, must be closed.
class SlowBody
  def initialize(parts) = @parts = parts

  def each
    @parts.each do |p|
      sleep 0.01
      yield p
    end
  end

  def close = FINISHED << "closed"
end

# An Enumerable Body whose each raises after the first part.
class FailingBody
  def each
    yield "first part\n"
    raise "body failed on purpose"
  end
end

def multi(values) = RACK3 ? values : values.join("\n")

def text(body, status = 200, extra = {})
  [status, { "content-type" => "text/plain", "content-length" => body.bytesize.to_s }.merge(extra), [body]]
end

# Reads rack.input every way the SPEC allows, then returns a digest of what it got.
def read_input(input)
  parts = []
  first = input.read(3)
  parts << first if first
  buf = +""
  got = input.read(5, buf)
  parts << buf.dup if got
  line = input.gets
  parts << line if line
  rest = input.read
  parts << rest
  if input.respond_to?(:rewind)
    input.rewind
    again = input.read
    raise "rewind: #{again.bytesize} bytes, wanted #{parts.join.bytesize}" unless again == parts.join
  end
  data = parts.join
  "#{data.bytesize} #{Digest::SHA256.hexdigest(data)}\n"
end

ROUTES = {
  "/version" => ->(_env) { text("#{Rack.release} codec=#{defined?(PumaPlus::Wire) ? PumaPlus::Wire.codec : "none"}\n") },
  "/array" => ->(_env) { text("array body\n") },
  "/enum" => ->(_env) { [200, { "content-type" => "text/plain" }, SlowBody.new(%W[a\n b\n c\n])] },
  "/proxy" => lambda do |_env|
    [200, { "content-type" => "text/plain" }, Rack::BodyProxy.new(["proxied\n"]) { FINISHED << "proxy closed" }]
  end,
  "/call" => lambda do |_env|
    if RACK3
      body = proc do |stream|
        3.times { |i| stream.write("part #{i}\n") }
        stream << "end\n"
        stream.flush
        stream.close
      end
      [200, { "content-type" => "text/plain" }, body]
    else
      [200, { "content-type" => "text/plain" }, SlowBody.new(["part 0\n", "part 1\n", "part 2\n", "end\n"])]
    end
  end,
  "/call-reads-input" => lambda do |env|
    if RACK3
      body = proc do |stream|
        # the stream promises read (not gets/each): read(n), read(n, buffer), read
        data = +""
        data << stream.read(3).to_s
        buf = +""
        data << buf if stream.read(5, buf)
        data << stream.read.to_s
        stream.write("#{data.bytesize} #{Digest::SHA256.hexdigest(data)}\n")
      end
      [200, { "content-type" => "text/plain" }, body]
    else
      text(read_input(env["rack.input"]))
    end
  end,
  "/finished" => lambda do |env|
    env["rack.response_finished"] << lambda { |_e, status, _h, error|
      FINISHED << "finished #{status} #{error.inspect}"
    }
    text("registered\n")
  end,
  "/finished-log" => lambda do |_env|
    log = []
    log << FINISHED.pop(true) until FINISHED.empty?
    text(log.join("|") + "\n")
  end,
  "/multi" => lambda do |_env|
    [200, { "content-type" => "text/plain", "set-cookie" => multi(%w[a=1 b=2 c=3]),
            "x-multi" => multi(%w[one two]), "content-length" => "6" }, ["multi\n"]]
  end,
  "/input" => ->(env) { text(read_input(env["rack.input"])) },
  "/204" => ->(_env) { [204, {}, []] },
  "/304" => ->(_env) { [304, { "etag" => '"x"' }, []] },
  "/error" => ->(_env) { raise "app failed on purpose" },
  "/error-in-body" => ->(_env) { [200, { "content-type" => "text/plain" }, FailingBody.new] },
  "/large" => ->(_env) { text("x" * (5 * 1024 * 1024)) },
  # Full hijack: the app writes a whole HTTP/1.1 response on the socket itself.
  "/hijack-full" => lambda do |env|
    io = env["rack.hijack"].call
    io.write("HTTP/1.1 200 OK\r\ncontent-length: 12\r\nconnection: close\r\n\r\nfull hijack\n")
    io.close
    [200, {}, []]
  end,
  # Response hijack: the server (here the worker) writes the head, the hook the rest.
  "/hijack-partial" => lambda do |_env|
    hook = lambda do |io|
      io.write("partial hijack\n")
      io.close
    end
    [200, { "content-type" => "text/plain", "connection" => "close", "rack.hijack" => hook }, []]
  end,
  "/env" => lambda do |env|
    keys = %w[REQUEST_METHOD SCRIPT_NAME PATH_INFO QUERY_STRING SERVER_NAME SERVER_PORT SERVER_PROTOCOL
              HTTP_HOST rack.url_scheme rack.hijack?]
    text(keys.map { |k| "#{k}=#{env[k].inspect}" }.join("\n") + "\n")
  end
}.freeze

app = lambda do |env|
  route = ROUTES[env["PATH_INFO"]]
  status, headers, body = route ? route.call(env) : text("not found\n", 404)
  if env["REQUEST_METHOD"] == "HEAD"
    body.close if body.respond_to?(:close)
    body = []
  end
  [status, headers, body]
end

use Rack::Lint
run app
