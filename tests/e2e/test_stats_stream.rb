# frozen_string_literal: true

# GET /stats/stream end to end (docs/SERVER.md, "/stats/stream"): the event-stream head and
# framing, one event per tick whose id is the tick and whose data is the /stats JSON, heartbeat
# comments while no event is due, many subscribers at once, a subscriber that goes away (FIN or
# reset) freed within a tick (its descriptor too), the control token, bad parameters, HEAD, and
# a drain that closes subscribers instead of waiting for them. A subscriber first gets the tick
# history (one `history` event, the kept ticks oldest first, ending at the latest tick), which the
# Subscriber sets aside (#histories) so that the blocks it hands out are the stream's own.
require_relative "helper"

class TestStatsStream < Minitest::Test
  # A raw subscriber: sends the request, parses the head, then the stream into blocks.
  class Subscriber
    attr_reader :head, :status, :headers, :sock, :histories

    def initialize(port, target = "/stats/stream", headers: {})
      @sock = TCPSocket.new("127.0.0.1", port)
      @sock.write("GET #{target} HTTP/1.1\r\nHost: x\r\n" +
                  headers.map { |k, v| "#{k}: #{v}\r\n" }.join + "\r\n")
      @buf = +""
      @eof = false
      @histories = [] # `history` event blocks, set aside by #next_block
      fill_until(5) { @buf.include?("\r\n\r\n") }
      head, @buf = @buf.split("\r\n\r\n", 2)
      raise "no response head from #{target}" unless head

      lines = head.split("\r\n")
      @status = lines.shift[/\AHTTP\/1\.1 (\d+)/, 1].to_i
      @headers = lines.to_h { |l| k, v = l.split(":", 2); [k.downcase, v.strip] }
      @buf ||= +""
    end

    def eof? = @eof

    def fill_until(timeout)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
      until yield
        left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
        return false if left <= 0 || @eof

        next unless IO.select([@sock], nil, nil, left)

        begin
          @buf << @sock.readpartial(65_536)
        rescue EOFError, Errno::ECONNRESET
          @eof = true
        end
      end
      true
    end

    # The next block (lines up to a blank line) as an array of lines, or nil after timeout.
    # A `history` event is kept in #histories and skipped.
    def next_block(timeout = 5)
      loop do
        return nil unless fill_until(timeout) { @buf.include?("\n\n") }

        block, @buf = @buf.split("\n\n", 2)
        @buf ||= +""
        lines = block.split("\n")
        next @histories << lines if lines[1] == "event: history"

        return lines
      end
    end

    # Blocks until `secs` have passed (or EOF). Returns them all.
    def blocks_for(secs)
      out = []
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + secs
      loop do
        left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
        break if left <= 0

        b = next_block(left)
        break unless b

        out << b
      end
      out
    end

    def close(reset: false)
      @sock.setsockopt(Socket::SOL_SOCKET, Socket::SO_LINGER, [1, 0].pack("ii")) if reset
      @sock.close
    end
  end

  # An event block as {id:, event:, data: parsed JSON}; fails on anything else in it.
  def parse_event(block)
    fields = block.map { |l| l.split(": ", 2) }
    assert_equal %w[id event data], fields.map(&:first), "event block framing: #{block.inspect[0, 300]}"
    assert_equal "stats", fields[1][1]
    assert_match(/\A\d+\z/, fields[0][1])
    { id: fields[0][1].to_i, data: JSON.parse(fields[2][1]) }
  end

  def fd_count(pid) = Dir.children("/proc/#{pid}/fd").size

  def wait_until(timeout)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    until yield
      return false if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.05
    end
    true
  end

  def wait_stats(srv, timeout)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    loop do
      st = srv.stats
      return st if yield(st)
      return st if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.05
    end
  end

  def test_framing_and_one_event_per_tick
    srv = E2E::Server.new(extra: ["-tick", "250ms"])
    wait_stats(srv, 5) { |st| st["stream"]["ticks"] >= 2 } # so that the history has points
    sub = Subscriber.new(srv.control_port)
    assert_equal 200, sub.status
    assert_equal "text/event-stream", sub.headers["content-type"]
    assert_equal "no-store", sub.headers["cache-control"]
    assert_equal "close", sub.headers["connection"]
    assert_nil sub.headers["content-length"], "a stream has no length"
    prelude = sub.next_block
    assert_equal "retry: 2000", prelude[0]
    assert prelude[1].start_with?(": "), "a comment names the stream: #{prelude.inspect}"
    first = parse_event(sub.next_block)
    ticks0 = srv.stats["stream"]["ticks"]
    events = sub.blocks_for(3.0).map { |b| parse_event(b) }
    ticks1 = srv.stats["stream"]["ticks"]
    keys = srv.stats.keys
    ([first] + events).each do |e|
      assert_equal keys, e[:data].keys, "the data is the /stats document"
      assert_equal e[:id], e[:data]["stream"]["ticks"], "the id is the tick of its JSON"
      assert_equal 0.25, e[:data]["queue"]["window_seconds"]
    end
    ids = events.map { |e| e[:id] }
    assert_includes [first[:id], first[:id] + 1], ids.first, "the first event is the latest tick's"
    # the history came first, once: the ticks kept, oldest first, ending at the first event's
    assert_equal 1, sub.histories.size, "one history event, before the first stats event"
    h = sub.histories[0]
    assert_equal ["id: #{first[:id]}", "event: history"], h[0, 2]
    hist = JSON.parse(h[2].delete_prefix("data: "))
    assert_equal 0.25, hist["window_seconds"]
    hist_ids = hist["points"].map { |pt| pt["id"] }
    assert_operator first[:id], :>=, 2
    assert_equal (1..first[:id]).to_a.last(300), hist_ids
    assert_equal first[:data]["queue"]["arrival_rate"], hist["points"].last["arrival_rate"]
    assert_equal first[:data]["queue"]["shed"], hist["points"].last["shed"]
    ids.each_cons(2) { |a, b| assert_equal a + 1, b, "one event per tick, none skipped or doubled: #{ids}" }
    # about 12 ticks in 3 s (a loaded machine may fire the tick late); the stream kept pace
    # with the server's own tick count
    assert_operator ids.size, :>=, 9, ids.inspect
    assert_operator ids.size, :<=, 14, ids.inspect
    assert_in_delta ticks1 - ticks0, ids.size, 1, "events received vs ticks counted by /stats"
  ensure
    sub&.close
    srv&.stop
  end

  def test_heartbeat_bad_parameters_and_head
    srv = E2E::Server.new(extra: ["-tick", "2s"])
    sub = Subscriber.new(srv.control_port, "/stats/stream?heartbeat=1")
    assert_equal 200, sub.status
    sub.next_block # prelude
    parse_event(sub.next_block)
    blocks = sub.blocks_for(4.5)
    beats = blocks.select { |b| b.size == 1 && b[0].start_with?(": heartbeat ") }
    events = blocks.select { |b| b[0].start_with?("id: ") }.map { |b| parse_event(b) }
    assert_equal blocks.size, beats.size + events.size, "only events and heartbeats: #{blocks.inspect[0, 400]}"
    refute_empty beats, "no heartbeat comment in 4.5 s with heartbeat=1 and 2 s ticks"
    assert_operator events.size, :>=, 1
    assert_operator events.size, :<=, 3
    assert_operator srv.stats["stream"]["heartbeats"], :>=, beats.size

    ["heartbeat=0", "heartbeat=abc", "heartbeat=3601", "heartbeat=", "heartbeat=-1", "heartbeat=1x"].each do |q|
      status, body = srv.control_get("/stats/stream?#{q}")
      assert_equal 400, status, q
      assert_match(/heartbeat must be whole seconds, 1 to 3600/, body, q)
    end
    head = E2E.raw(srv.control_port, "HEAD /stats/stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert_equal 200, head.dig(0, 0)
    assert_equal "text/event-stream", head.dig(0, 1, "content-type")
    status, = srv.control_get("/stats/streams")
    assert_equal 404, status
  ensure
    sub&.close
    srv&.stop
  end

  def test_many_subscribers_and_disconnect_frees
    srv = E2E::Server.new(extra: ["-tick", "250ms"])
    base = srv.stats
    sleep 0.3 # that request's connection is closed by now
    fds0 = fd_count(srv.pid)
    subs = Array.new(40) { Subscriber.new(srv.control_port) }
    subs.each { |s| assert_equal 200, s.status }
    st = wait_stats(srv, 3) { |x| x["stream"]["subscribers"] == 40 }
    assert_equal 40, st["stream"]["subscribers"]
    assert_equal base["stream"]["subscribers_total"] + 40, st["stream"]["subscribers_total"]
    assert wait_until(2) { fd_count(srv.pid) == fds0 + 40 }, "one descriptor per subscriber: #{fd_count(srv.pid)} vs #{fds0}"
    _, metrics = srv.control_get("/metrics")
    assert_match(/^puma_plus_stream_subscribers 40$/, metrics)
    # every subscriber gets the same ticks
    seen = subs.map { |s| Thread.new { s.blocks_for(0.8) } }.map(&:value)
               .map { |bs| bs.select { |b| b[0].start_with?("id: ") }.map { |b| parse_event(b)[:id] } }
    last = seen.map(&:last)
    assert(last.all?, "a subscriber got no event")
    assert_operator last.max - last.min, :<=, 1, "subscribers are on the same tick: #{last.tally}"

    # half go away: 10 close, 10 reset; both kinds are freed within a tick or two
    subs[0, 10].each(&:close)
    subs[10, 10].each { |s| s.close(reset: true) }
    open0 = base["requests"]["connections_open"] # counts the /stats request's own connection
    st = wait_stats(srv, 3) do |x|
      x["stream"]["subscribers"] == 20 && x["requests"]["connections_open"] == open0 + 20
    end
    assert_equal 20, st["stream"]["subscribers"]
    assert_equal open0 + 20, st["requests"]["connections_open"], "the gone subscribers' connections are closed"
    assert wait_until(2) { fd_count(srv.pid) == fds0 + 20 },
           "the descriptors of the gone subscribers are closed: #{fd_count(srv.pid)} open, #{fds0} before"
    # the rest still stream
    ids = subs[20, 20].map { |s| Thread.new { s.blocks_for(0.6) } }.map(&:value)
                      .map { |bs| bs.count { |b| b[0].start_with?("id: ") } }
    assert(ids.all?(&:positive?), "a remaining subscriber stopped getting events: #{ids}")
    subs[20, 20].each(&:close)
    st = wait_stats(srv, 3) { |x| x["stream"]["subscribers"].zero? }
    assert_equal 0, st["stream"]["subscribers"]
    assert wait_until(2) { fd_count(srv.pid) == fds0 }, "#{fd_count(srv.pid)} descriptors open, #{fds0} before"
    assert_equal 0, st["stream"]["slow_closed"]
  ensure
    subs&.each { |s| s.sock.close unless s.sock.closed? }
    srv&.stop
  end

  # A subscriber that stops reading is closed once 1 MiB waits for it (after the kernel's
  # buffers filled), while one that reads keeps every tick. 5 ms ticks make that a few seconds.
  def test_a_subscriber_that_stops_reading_is_closed
    srv = E2E::Server.new(extra: ["-tick", "5ms", "-write-timeout", "60s"])
    stuck = Socket.new(:INET, :STREAM)
    stuck.setsockopt(Socket::SOL_SOCKET, Socket::SO_RCVBUF, 4096)
    stuck.connect(Socket.sockaddr_in(srv.control_port, "127.0.0.1"))
    stuck.write("GET /stats/stream HTTP/1.1\r\nHost: x\r\n\r\n")
    good = Subscriber.new(srv.control_port)
    good.next_block
    done = false
    reader = Thread.new do
      got = []
      until done
        b = good.next_block(0.2)
        got << b if b
      end
      got
    end
    st = wait_stats(srv, 25) { |x| x["stream"]["slow_closed"] == 1 }
    assert_equal 1, st["stream"]["slow_closed"], "the stuck subscriber was not closed: #{st["stream"]}"
    assert_equal 1, st["stream"]["subscribers"], "the reading subscriber is still there"
    assert_match(/subscriber \d+ bytes behind, closed/, srv.log)
    done = true
    ids = reader.value.map { |b| parse_event(b)[:id] }
    assert_operator ids.size, :>, 100
    ids.each_cons(2) { |a, b| assert_equal a + 1, b, "the reading subscriber missed a tick" }
  ensure
    done = true
    reader&.join
    good&.close
    stuck&.close
    srv&.stop
  end

  def test_control_token_protects_the_stream_and_the_page
    srv = E2E::Server.new(token: "s3cret", extra: ["-tick", "250ms"])
    no = Subscriber.new(srv.control_port)
    assert_equal 401, no.status
    no.close
    by_query = Subscriber.new(srv.control_port, "/stats/stream?heartbeat=5&token=s3cret")
    assert_equal 200, by_query.status
    by_query.next_block
    assert_equal "stats", by_query.next_block[1].split(": ", 2)[1]
    by_header = Subscriber.new(srv.control_port, headers: { "Authorization" => "Bearer s3cret" })
    assert_equal 200, by_header.status
    wrong = Subscriber.new(srv.control_port, "/stats/stream?token=s3cre")
    assert_equal 401, wrong.status
    wrong.close
    status, = srv.control_get("/dashboard", auth: false)
    assert_equal 401, status
    status, page = srv.control_get("/dashboard")
    assert_equal 200, status
    assert_includes page, "<title>puma-plus dashboard</title>"
    assert_includes page, 'new EventSource("stats/stream"'
    # self-contained: nothing is loaded from anywhere
    refute_match(/<(script|link|img|iframe)[^>]+(src|href)=/i, page)
    refute_match(%r{https?://}, page)
  ensure
    by_query&.close
    by_header&.close
    srv&.stop
  end

  def test_drain_closes_subscribers
    srv = E2E::Server.new(extra: ["-tick", "250ms"])
    sub = Subscriber.new(srv.control_port)
    sub.next_block
    parse_event(sub.next_block)
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    Process.kill("TERM", srv.pid)
    sub.fill_until(5) { sub.eof? }
    assert sub.eof?, "the subscriber was not closed within 5 s of SIGTERM"
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0, :<, 2
    status = srv.stop(timeout: 10)
    assert status&.success?, "drain with a subscriber open: #{status.inspect}\n#{srv.log}"
  ensure
    sub&.close
    srv&.stop
  end
end
