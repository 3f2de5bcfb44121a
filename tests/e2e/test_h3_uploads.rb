# frozen_string_literal: true

# Concurrent multi-MiB uploads over HTTP/3 (issue 13): more uploads at once than worker
# threads, several interleaved on each QUIC connection, every byte checked, and the front end's
# peak RSS (VmHWM of puma-plus-server, workers excluded) held to a bound derived from the
# server's own buffer limits. The same shape over HTTP/2 (curl, TLS, ALPN h2) runs on a fresh
# server for comparison; its numbers are printed, not asserted against the bound.
#
# The client is build/server/h3-upload (server/tests/h3_upload.c; PP_H3_UPLOAD_BIN): CONNS QUIC
# connections x STREAMS concurrent POSTs of SIZE bytes, each body its own window of a
# pseudo-random pool, the streams marked incremental so their bodies interleave.
#
# What broke before (4 x 8 x 4 MiB, 1 worker x 4 threads): 13 of 32 uploads never finished
# (it varies from run to run: a connection stalls when the requests it has waiting in the queue
# fill its window while none of its own is running elsewhere to free it).
# Queued requests held their unconsumed body bytes against the 1 MiB connection window, so the
# running ones on the same connection got no body bytes and the connection sat idle until the
# idle timeout. And every ~1.2 KB QUIC STREAM frame became one BODY frame in a 64 KiB write
# chunk of the worker link, so the worker link's 1 MiB write bound (bytes) held ~900 chunks
# (57 MB) per worker connection (heaptrack: 157 MB of chunks at the peak for 4 x 8 uploads).
# (Since bodies are read whole before dispatch, each 4 MiB upload goes to a spool file and the
# REQUEST carries its descriptor: h3_run checks all N were spooled; the bound below still holds
# the older streaming terms, which the spool can only lower.)
# And a 4 MiB echo is one RESPONSE_BODY frame: it was read whole (a 4-8 MiB read buffer per
# worker connection) and copied whole into the exchange before the worker could be paused, so
# every response the client had not taken yet cost 4-5 MiB (64 x 4 MiB: 326 MB peak).
require_relative "helper"
require "digest"

class TestH3Uploads < Minitest::Test
  MIB = 1024 * 1024
  KIB = 1024
  CONNS = 4
  STREAMS = 8
  N = CONNS * STREAMS
  SIZE = 4 * MIB
  WORKERS = 1
  THREADS = 4 # N is 8 times the worker threads: most uploads wait in the queue

  # The server's limits the bound is made of (server/core/exchange.h, server/proto/h3.h, server/proto/h3.c).
  BODY_BUFFER = 1 * MIB     # PP_BODY_BUFFER_LIMIT: buffered per request before it is runnable
  STREAM_WINDOW = 256 * KIB # limits.stream_window: unconsumed request body per stream
  BODY_PIECE = 64 * KIB     # limits.body_piece: body bytes gathered before they are handed up
  WORKER_WRITE = 1 * MIB    # PP_WORKER_WRITE_HIGH: request body queued to one worker
  CHUNK = 64 * KIB          # one worker-link write chunk
  CLIENT_WRITE = 1 * MIB    # PP_CLIENT_WRITE_HIGH: a worker is paused above this much unsent
  READ = 64 * KIB           # one read from a worker connection
  SLACK = 16 * MIB          # QUIC/TLS state of 4 connections, allocator rounding

  # Request side: every upload may hold its pre-runnable buffer, its stream window and one
  # gathered piece at once; every worker connection its write bound plus a piece and a chunk.
  REQUEST_BOUND = N * (BODY_BUFFER + STREAM_WINDOW + BODY_PIECE) +
                  THREADS * (WORKER_WRITE + BODY_PIECE + CHUNK) + SLACK
  # Echo adds the responses: a stream's worker is paused once more than CLIENT_WRITE of its
  # response waits in the front end (in the endpoint until acknowledged, or in the exchange),
  # so no stream holds more than that plus one read, even when the client has not taken any of
  # it and the worker has moved on to the next request; each worker connection's read buffer
  # holds one read (a 4 MiB RESPONSE_BODY frame is handed up in pieces, not buffered whole).
  ECHO_BOUND = REQUEST_BOUND + N * (CLIENT_WRITE + READ) + THREADS * READ

  DIGEST_APP = <<~RUBY
    # frozen_string_literal: true

    require "digest"
    # POST: the SHA-256 of the request body (lowercase hex), read in 64 KiB pieces, slowly
    # (6.5 MB/s per thread), so request bodies back up in the front end to its bounds.
    run lambda { |env|
      d = Digest::SHA256.new
      input = env["rack.input"]
      while (piece = input.read(65_536))
        d << piece
        sleep 0.01
      end
      [200, { "content-type" => "text/plain" }, [d.hexdigest]]
    }
  RUBY

  def setup
    @bin = ENV["PP_H3_UPLOAD_BIN"] || File.expand_path("h3-upload", File.dirname(E2E::BIN))
    flunk("h3-upload not built (#{@bin}): cmake --build build --target h3-upload") unless File.executable?(@bin)
    @dir = Dir.mktmpdir("pp-h3-uploads")
    @servers = []
  end

  def teardown
    @servers.each(&:stop)
    FileUtils.rm_rf(@dir) if @dir
  end

  def start(app)
    h3_port = E2E.free_port
    srv = E2E::Server.new(app: app, workers: WORKERS, threads: THREADS, tls: true,
                          extra: ["-listen-h3", "127.0.0.1:#{h3_port}"])
    @servers << srv
    [srv, h3_port]
  end

  def vm_kb(pid, key)
    File.read("/proc/#{pid}/status")[/^#{key}:\s+(\d+) kB/, 1].to_i
  end

  def app_for(digest)
    return E2E::MIX unless digest

    f = File.join(@dir, "digest.ru")
    File.write(f, DIGEST_APP) unless File.exist?(f)
    f
  end

  # Runs h3-upload; returns [peak RSS growth in bytes, output].
  def h3_run(path, digest:)
    app = app_for(digest)
    srv, port = start(app)
    base = vm_kb(srv.pid, "VmHWM")
    args = [@bin, "127.0.0.1", port.to_s, "-conns", CONNS.to_s, "-streams", STREAMS.to_s,
            "-size", SIZE.to_s, "-path", path, "-timeout", "90"]
    args << "-digest" if digest
    out, st = Open3.capture2e(*args)
    assert st.success?, "h3-upload failed:\n#{out[-3000..] || out}\n#{srv.log[-2000..]}"
    assert_match(/h3-upload: ok #{N} failed 0 /, out)
    growth = (vm_kb(srv.pid, "VmHWM") - base) * KIB
    # (an exchange is released when its stream's last bytes are acknowledged: moments later)
    rq = nil
    50.times do
      rq = srv.stats["requests"]
      break if rq["body_spool_bytes"].zero?

      sleep 0.1
    end
    assert_equal [N, 0], [rq["body_spooled"], rq["body_spool_bytes"]], "every HTTP/3 upload was spooled, and the spool emptied"
    srv.stop
    [growth, out.lines.last.strip]
  end

  # The same shape over HTTP/2 with TLS: CONNS curl processes (one connection each, ALPN h2),
  # STREAMS parallel uploads each, a distinct body per connection; every answer checked.
  def h2_run(path, digest:)
    srv, = start(app_for(digest))
    base = vm_kb(srv.pid, "VmHWM")
    bodies = (0...CONNS).map do |c|
      f = File.join(@dir, "body#{c}")
      File.binwrite(f, Random.new(100 + c).bytes(SIZE))
      f
    end
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    pids = (0...CONNS).map do |c|
      args = ["curl", "-sk", "--http2", "--parallel", "--parallel-max", STREAMS.to_s]
      STREAMS.times do |s|
        args += ["--next", "-sk", "--http2"] if s.positive?
        args += ["--data-binary", "@#{bodies[c]}", "-H", "content-type: application/octet-stream",
                 "-o", File.join(@dir, "out#{c}-#{s}"), "https://127.0.0.1:#{srv.https_port}#{path}?s=#{s}"]
      end
      Process.spawn(*args, out: File::NULL, err: File::NULL)
    end
    pids.each { |p| Process.wait(p) }
    secs = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    ok = 0
    CONNS.times do |c|
      want = digest ? Digest::SHA256.file(bodies[c]).hexdigest : File.binread(bodies[c])
      STREAMS.times do |s|
        got = File.binread(File.join(@dir, "out#{c}-#{s}")) rescue nil
        ok += 1 if got == want
      end
    end
    growth = (vm_kb(srv.pid, "VmHWM") - base) * KIB
    srv.stop
    assert_equal N, ok, "HTTP/2: #{N - ok} of #{N} uploads answered wrongly"
    [growth, format("ok %d secs %.2f", ok, secs)]
  end

  def mib(bytes) = format("%.1f MiB", bytes.to_f / MIB)

  # An AddressSanitizer build's allocator (redzones, quarantine) is not the one the bound is
  # made for: there the uploads are checked, the memory only printed.
  def sanitized? = Open3.capture2e("ldd", E2E::BIN)[0].include?("libasan")

  def assert_bound(growth, bound)
    return if sanitized?

    assert_operator growth, :<=, bound, "HTTP/3 front-end peak RSS grew #{mib(growth)}, over #{mib(bound)}"
  end

  def report(what, bound, h3, h2)
    $stderr.puts "\n#{what}: #{N} x #{SIZE / MIB} MiB (#{CONNS} connections x #{STREAMS} streams, " \
                 "#{WORKERS} worker x #{THREADS} threads): front-end peak RSS growth " \
                 "h3 #{mib(h3[0])} (#{h3[1]}), h2 #{mib(h2[0])} (#{h2[1]}); h3 bound #{mib(bound)}"
  end

  def test_uploads_to_a_slow_body_reading_route_hold_memory_to_the_request_bound
    h3 = h3_run("/", digest: true)
    h2 = h2_run("/", digest: true)
    report("slow body-reading route", REQUEST_BOUND, h3, h2)
    assert_bound(h3[0], REQUEST_BOUND)
  end

  def test_echoed_uploads_come_back_exactly_and_hold_memory_to_the_echo_bound
    h3 = h3_run("/echo", digest: false)
    h2 = h2_run("/echo", digest: false)
    report("echo", ECHO_BOUND, h3, h2)
    assert_bound(h3[0], ECHO_BOUND)
  end
end
