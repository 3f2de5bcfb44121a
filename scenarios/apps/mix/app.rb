# frozen_string_literal: true

# The benchmark Rack app (see README.md next to it). Plain Rack 2/3, no gems: runs unchanged
# under puma-plus and under Debian's puma 5.6.5.
#
#   GET  /hello                    fixed 13-byte text
#   GET  /mix/<cpu_ms>/<sleep_ms>  burn cpu_ms of *thread CPU time* (CLOCK_THREAD_CPUTIME_ID,
#                                  so "5 ms of CPU" means the same on any machine and under
#                                  any GVL contention), then sleep sleep_ms; both 0..60000
#   POST /echo                     the request body back (application/octet-stream)
#   GET  /stream/<n>               n chunks ("chunk i\n"), 10 ms apart; n in 0..10000
#   HEAD on any route              the GET headers, empty body
module MixApp
  HELLO = "Hello, world\n"
  TEXT = "text/plain"
  MAX_MS = 60_000
  MAX_CHUNKS = 10_000
  STREAM_GAP = 0.010

  # A streamed body: yields its chunks slowly, so the client sees them arrive one by one.
  class SlowChunks
    def initialize(count)
      @count = count
    end

    def each
      @count.times do |i|
        sleep STREAM_GAP if i.positive?
        yield "chunk #{i}\n"
      end
    end
  end

  module_function

  # HEAD gets the GET headers and an empty body (Rack::Lint insists; servers strip it anyway).
  def call(env)
    status, headers, body = route(env)
    return [status, headers, []] if env["REQUEST_METHOD"] == "HEAD"

    [status, headers, body]
  end

  def route(env)
    path = env["PATH_INFO"]
    case path
    when "/hello"
      [200, { "content-type" => TEXT, "content-length" => HELLO.bytesize.to_s }, [HELLO]]
    when %r{\A/mix/(\d{1,6})/(\d{1,6})\z}
      mix(Integer(Regexp.last_match(1), 10), Integer(Regexp.last_match(2), 10))
    when "/echo"
      body = env["rack.input"].read
      [200, { "content-type" => "application/octet-stream", "content-length" => body.bytesize.to_s }, [body]]
    when %r{\A/stream/(\d{1,6})\z}
      count = Integer(Regexp.last_match(1), 10)
      return text(400, "at most #{MAX_CHUNKS} chunks\n") if count > MAX_CHUNKS

      [200, { "content-type" => TEXT }, SlowChunks.new(count)]
    else
      text(404, "not found: #{path}\n")
    end
  end

  def mix(cpu_ms, sleep_ms)
    return text(400, "cpu_ms and sleep_ms must be at most #{MAX_MS}\n") if cpu_ms > MAX_MS || sleep_ms > MAX_MS

    burned = burn_cpu(cpu_ms * 1_000_000)
    sleep(sleep_ms / 1000.0) if sleep_ms.positive?
    text(200, "cpu_ns=#{burned} sleep_ms=#{sleep_ms}\n")
  end

  # Spins until this thread's CPU clock has advanced by `ns`; returns the CPU time burned.
  def burn_cpu(ns)
    start = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond)
    return 0 if ns <= 0

    x = 0
    loop do
      200.times { |i| x = (x * 31 + i) & 0xffff }
      used = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond) - start
      return used if used >= ns
    end
  end

  def text(status, body)
    [status, { "content-type" => TEXT, "content-length" => body.bytesize.to_s }, [body]]
  end
end
