# frozen_string_literal: true

require_relative "test_helper"
require "rack"
require "rack/lint"
require "tmpdir"
require "digest"

# One worker connection driven in-process over a socketpair: env building, rack.input,
# response encoding (multi-value headers, Rack 2 and 3 shapes), body.close, errors, CANCEL,
# streamed request bodies. Runs with the C codec here and with the Ruby one in the subclass
# at the end of the file.
class TestConnection < Minitest::Test
  W = PumaPlus::Wire
  include FakeServer

  class ClosableBody
    attr_reader :closed

    def initialize(parts, fail_at: nil)
      @parts = parts
      @fail_at = fail_at
      @closed = false
    end

    def each
      @parts.each_with_index do |p, i|
        raise "body failed at #{i}" if i == @fail_at

        yield p
      end
    end

    def close = @closed = true
  end

  CODEC = :native

  def setup
    PumaTestCodec.use(self.class::CODEC)
    @server, @client = UNIXSocket.pair
    @log = StringIO.new
    @proto = PumaPlus::Worker.prototype_env(threads: 4, worker_index: 3)
  end

  def teardown
    @server.close unless @server.closed?
    @client.close unless @client.closed?
    @thread&.join(5)
    PumaTestCodec.restore
  end

  def start(app = nil, &block)
    app ||= block
    @conn = PumaPlus::Connection.new(app, @client, @proto, worker_index: 3, thread_index: 1, log: @log)
    @thread = Thread.new { @conn.run }
    hello = FakeServer.read_frame(@server)
    assert_instance_of W::Hello, hello
    hello
  end

  def call(id, method, path, **kw)
    @server.write(FakeServer.request(id, method, path, **kw))
    FakeServer.read_response(@server, id)
  end

  def headers_of(res) = res[:head].headers.each_slice(2).to_a

  def test_hello_announces_cpu_time_but_not_gvl_wait
    hello = start { [200, {}, []] }
    assert_equal [1, Process.pid, 3, 1], [hello.version, hello.pid, hello.worker_index, hello.thread_index]
    assert_equal W::CAP_CPU_TIME, hello.capabilities
  end

  # A fiber slot shares its thread's CPU clock with the other fibers: it announces no CPU time
  # and reports cpu_ns -1, so the server uses the process's CPU per completion.
  def test_fiber_slot_announces_no_cpu_time
    @conn = PumaPlus::Connection.new(->(_env) { [200, {}, ["ok"]] }, @client, @proto, worker_index: 3,
                                                                                 thread_index: 1, log: @log, fiber: true)
    @thread = Thread.new { @conn.run }
    hello = FakeServer.read_frame(@server)
    assert_equal 0, hello.capabilities & W::CAP_CPU_TIME
    res = call(7, "GET", "/x")
    assert_equal "ok", res[:body]
    assert_equal(-1, res[:end].cpu_ns)
    @server.close
  end

  def test_simple_get_and_timings
    start { |_env| [200, { "Content-Type" => "text/plain" }, ["hello ", "world"]] }
    before = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
    res = call(5, "GET", "/x")
    after = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
    assert_equal 200, res[:head].status
    assert_equal [["Content-Type", "text/plain"]], headers_of(res)
    assert_equal "hello world", res[:body]
    e = res[:end]
    assert_operator before, :<=, e.t4_ns
    assert_operator e.t4_ns, :<=, e.t5_ns
    assert_operator e.t5_ns, :<=, after
    assert_equal 0, e.body_read_ns
    assert_equal(-1, e.gvl_wait_ns, "GVL wait is unknown on Ruby 3.1, never 0")
    assert_operator e.cpu_ns, :>=, 0
  end

  def test_cpu_ns_measures_thread_cpu
    start do |_env|
      t0 = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond)
      nil while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond) - t0 < 20_000_000
      [200, {}, []]
    end
    res = call(1, "GET", "/burn")
    assert_operator res[:end].cpu_ns, :>=, 20_000_000
    assert_operator res[:end].cpu_ns, :<, 2_000_000_000
  end

  def test_env_has_server_pairs_and_rack_keys
    seen = []
    start do |env|
      seen << env
      env["app.mutated"] = true if env["PATH_INFO"] != "/second"
      [200, {}, []]
    end
    call(1, "POST", "/p%20q", query: "a=1", body: "abc", headers: { "X-Forwarded-For" => "1.2.3.4" })
    call(2, "GET", "/second")
    env = seen[0]
    assert_equal "POST", env["REQUEST_METHOD"]
    assert_equal "/p%20q", env["PATH_INFO"]
    assert_equal "a=1", env["QUERY_STRING"]
    assert_equal "", env["SCRIPT_NAME"]
    assert_equal "3", env["CONTENT_LENGTH"]
    assert_equal "1.2.3.4", env["HTTP_X_FORWARDED_FOR"]
    assert_equal "1", env["puma_plus.request_id"]
    assert_equal "http", env["rack.url_scheme"]
    assert_equal Rack::VERSION, env["rack.version"]
    assert_same $stderr, env["rack.errors"]
    assert_equal [true, true, false, false], env.values_at("rack.multithread", "rack.multiprocess", "rack.run_once", "rack.hijack?")
    assert_equal 3, env["puma_plus.worker_index"]
    refute env.frozen?
    assert env.keys.all?(&:frozen?), "keys are frozen, so Hash#[]= does not copy them"
    input = env["rack.input"]
    assert_equal Encoding::BINARY, input.external_encoding
    assert_equal "abc", input.read
    input.rewind
    assert_equal "abc", input.read
    refute seen[1].key?("app.mutated"), "the prototype env is never mutated by an app"
    refute seen[1].key?("CONTENT_LENGTH")
    assert_equal "", seen[1]["rack.input"].read
    assert seen[0]["rack.input"] != seen[1]["rack.input"]
  end

  def test_multi_value_headers_rack2_and_rack3_shapes
    start do |env|
      case env["PATH_INFO"]
      when "/rack2" then [200, { "Set-Cookie" => "a=1\nb=2", "X-One" => "1", "rack.internal" => "no" }, []]
      when "/rack3" then [302, { "set-cookie" => ["a=1", "b=2"], "location" => "/next" }, []]
      when "/int" then [204, { "X-Count" => 5 }, []]
      end
    end
    assert_equal [["Set-Cookie", "a=1"], ["Set-Cookie", "b=2"], ["X-One", "1"]], headers_of(call(1, "GET", "/rack2"))
    res = call(2, "GET", "/rack3")
    assert_equal 302, res[:head].status
    assert_equal [["set-cookie", "a=1"], ["set-cookie", "b=2"], ["location", "/next"]], headers_of(res)
    assert_equal [["X-Count", "5"]], headers_of(call(3, "GET", "/int"))
  end

  def test_status_as_string_and_invalid_status
    start { |env| [env["PATH_INFO"] == "/s" ? "201" : 42, {}, []] }
    assert_equal 201, call(1, "GET", "/s")[:head].status
    assert_equal 500, call(2, "GET", "/bad")[:head].status
    assert_match(/status 42/, @log.string)
  end

  def test_body_close_is_always_called
    bodies = []
    start do |env|
      body = ClosableBody.new(%w[a b c], fail_at: env["PATH_INFO"] == "/fail-first" ? 0 : nil)
      bodies << body
      [200, {}, env["PATH_INFO"] == "/proxy" ? Rack::BodyProxy.new(body) { bodies << :proxy_closed } : body]
    end
    assert_equal "abc", call(1, "GET", "/ok")[:body]
    assert bodies.last.closed
    res = call(2, "GET", "/fail-first")
    assert_equal 500, res[:head].status, "each raised before anything was written: a clean 500"
    assert bodies.last.closed
    assert_equal "abc", call(3, "GET", "/proxy")[:body]
    assert_includes bodies, :proxy_closed
  end

  def test_array_body_close_via_to_ary
    closed = false
    start do |_env|
      [200, {}, Rack::BodyProxy.new(%w[x y]) { closed = true }]
    end
    res = call(1, "GET", "/")
    assert_equal "xy", res[:body]
    assert closed
  end

  def test_app_exception_becomes_500_and_thread_lives_on
    start do |env|
      raise ArgumentError, "boom" if env["PATH_INFO"] == "/boom"

      [200, {}, ["fine"]]
    end
    res = call(1, "GET", "/boom")
    assert_equal 500, res[:head].status
    assert_equal "Internal Server Error\n", res[:body]
    refute_nil res[:end]
    assert_match(/ArgumentError: boom/, @log.string)
    assert_match(/test_connection\.rb:\d+/, @log.string, "backtrace is logged")
    assert_equal "fine", call(2, "GET", "/ok")[:body]
  end

  def test_failure_after_bytes_written_closes_connection
    body = ClosableBody.new(%w[a b c], fail_at: 2)
    start { |_env| [200, {}, body] }
    @server.write(FakeServer.request(1, "GET", "/"))
    frames = []
    while (f = FakeServer.read_frame(@server)) != :eof
      frames << f
    end
    assert_instance_of W::ResponseHead, frames[0]
    assert(frames.none? { |f| f.is_a?(W::ResponseEnd) }, "no RESPONSE_END for a truncated body")
    assert_equal :aborted, @thread.value
    assert body.closed
  end

  def test_each_body_streams_chunk_by_chunk
    gate = Queue.new
    body = Object.new
    body.define_singleton_method(:each) do |&blk|
      blk.call("first")
      gate.pop
      blk.call("second")
    end
    start { |_env| [200, {}, body] }
    @server.write(FakeServer.request(1, "GET", "/"))
    assert_instance_of W::ResponseHead, FakeServer.read_frame(@server)
    assert_equal "first", FakeServer.read_frame(@server).chunk, "first chunk arrives before the second exists"
    gate << :go
    assert_equal "second", FakeServer.read_frame(@server).chunk
    assert_instance_of W::ResponseEnd, FakeServer.read_frame(@server)
  end

  # Rack 3 Streaming Body: each write is a frame at once; read reads the request body.
  def test_callable_body_streams_writes_and_reads_the_input
    gate = Queue.new
    body = proc do |stream|
      stream.write("got ", stream.read(3))
      gate.pop
      stream << "|" << stream.read
      stream.close
      assert stream.closed?
      assert_raises(IOError) { stream.write("late") }
    end
    start { |_env| [200, { "content-type" => "text/plain" }, body] }
    @server.write(FakeServer.request(1, "POST", "/", body: "abcdef"))
    assert_instance_of W::ResponseHead, FakeServer.read_frame(@server)
    assert_equal "got ", FakeServer.read_frame(@server).chunk
    assert_equal "abc", FakeServer.read_frame(@server).chunk, "a write arrives before the body returns"
    gate << :go
    rest = FakeServer.read_response(@server, 1)
    assert_equal "|def", rest[:body]
    refute_nil rest[:end], "the response ends when call returns"
    assert_empty @log.string
  end

  def test_response_finished_runs_in_reverse_after_the_response_with_status_or_error
    seen = Queue.new
    start do |env|
      env["rack.response_finished"] << ->(_e, status, _h, error) { seen << [:first, status, error&.message] }
      env["rack.response_finished"] << ->(_e, status, _h, error) { seen << [:second, status, error&.message] }
      env["rack.after_reply"] << -> { seen << [:after_reply] }
      raise "boom" if env["PATH_INFO"] == "/boom"

      [201, {}, ["ok"]]
    end
    assert_equal 201, call(1, "GET", "/ok")[:head].status
    assert_equal [[:second, 201, nil], [:first, 201, nil], [:after_reply]], Array.new(3) { seen.pop }
    assert_equal 500, call(2, "GET", "/boom")[:head].status
    assert_equal [[:second, nil, "boom"], [:first, nil, "boom"], [:after_reply]], Array.new(3) { seen.pop }
  end

  def test_response_finished_gets_the_body_error_of_an_aborted_response
    seen = Queue.new
    start do |env|
      env["rack.response_finished"] << ->(_e, status, _h, error) { seen << [status, error&.message] }
      [200, {}, ClosableBody.new(%w[a b c], fail_at: 2)]
    end
    @server.write(FakeServer.request(1, "GET", "/"))
    assert_equal [nil, "body failed at 2"], seen.pop
    assert_equal :aborted, @thread.value
  end

  # Rails 6.1's ActionDispatch::Response::RackBody: responds to to_ary, which returns nil.
  def test_to_ary_returning_nil_falls_back_to_each
    body = ClosableBody.new(%w[a b])
    body.define_singleton_method(:to_ary) { nil }
    start { |_env| [302, { "location" => "/x" }, body] }
    res = call(1, "POST", "/")
    assert_equal [302, "ab"], [res[:head].status, res[:body]]
    assert body.closed
  end

  def test_large_array_body_is_flushed_in_pieces
    big = "z" * 300_000
    start { |_env| [200, {}, [big, big, big, big]] }
    res = call(1, "GET", "/")
    assert_equal big * 4, res[:body]
  end

  def test_streamed_request_body_read_on_demand_with_body_read_ns
    start do |env|
      input = env["rack.input"]
      first = input.read(5)
      rest = input.read
      input.rewind
      again = input.read
      [200, {}, ["#{first}|#{rest}|#{again == first + rest}"]]
    end
    @server.write(FakeServer.request(9, "POST", "/up", streams: true, content_length: 11))
    sleep 0.06
    @server.write(W.encode(W::Body.new(9, "hello ")))
    @server.write(W.encode(W::Body.new(9, "world")))
    @server.write(W.encode(W::BodyEnd.new(9)))
    res = FakeServer.read_response(@server, 9)
    assert_equal "hello| world|true", res[:body]
    assert_operator res[:end].body_read_ns, :>=, 40_000_000, "time waiting for the body is body_read_ns"
    assert_operator res[:end].t5_ns - res[:end].t4_ns, :>=, res[:end].body_read_ns
  end

  def test_streamed_body_gets_and_each
    start do |env|
      lines = []
      env["rack.input"].each { |l| lines << l }
      [200, {}, [lines.join("|")]]
    end
    @server.write(FakeServer.request(2, "POST", "/", streams: true, content_length: 12))
    ["ab\nc", "d\ne", "f\n", "gh"].each { |c| @server.write(W.encode(W::Body.new(2, c))) }
    @server.write(W.encode(W::BodyEnd.new(2)))
    assert_equal "ab\n|cd\n|ef\n|gh", call_result(2)
  end

  def call_result(id) = FakeServer.read_response(@server, id)[:body]

  def test_unread_streamed_body_frames_are_skipped
    start { |env| [200, {}, [env["PATH_INFO"]]] }
    @server.write(FakeServer.request(1, "POST", "/ignores-body", streams: true, content_length: 6))
    assert_equal "/ignores-body", call_result(1)
    @server.write(W.encode(W::Body.new(1, "abc")) + W.encode(W::Body.new(1, "def")) + W.encode(W::BodyEnd.new(1)))
    assert_equal "/next", call(2, "GET", "/next")[:body]
  end

  def test_streamed_body_spills_to_a_file
    size = PumaPlus::StreamInput::SPILL_AT + 100_000
    start do |env|
      data = env["rack.input"].read
      env["rack.input"].rewind
      [200, {}, ["#{data.bytesize} #{env['rack.input'].read(10).bytesize} #{data.count('q')}"]]
    end
    @server.write(FakeServer.request(3, "PUT", "/", streams: true, content_length: size))
    chunk = "q" * 65_536
    sent = 0
    writer = Thread.new do
      while sent < size
        n = [chunk.bytesize, size - sent].min
        @server.write(W.encode(W::Body.new(3, chunk.byteslice(0, n))))
        sent += n
      end
      @server.write(W.encode(W::BodyEnd.new(3)))
    end
    assert_equal "#{size} 10 #{size}", call_result(3)
    writer.join
  end

  def test_cancel_is_visible_to_the_app
    saw = Queue.new
    start do |env|
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 3
      sleep 0.005 until env["puma_plus.cancelled"].call || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      saw << env["puma_plus.cancelled"].call
      [200, {}, ["late"]]
    end
    @server.write(FakeServer.request(4, "GET", "/slow"))
    sleep 0.05
    @server.write(W.encode(W::Cancel.new(4)))
    res = FakeServer.read_response(@server, 4)
    assert_equal true, saw.pop
    refute_nil res[:end], "a cancelled request still ends with RESPONSE_END"
  end

  def test_cancel_stops_a_streaming_body
    body = Object.new
    produced = 0
    body.define_singleton_method(:each) do |&blk|
      200.times do |i|
        produced += 1
        blk.call("c#{i}")
        sleep 0.005
      end
    end
    start { |_env| [200, {}, body] }
    @server.write(FakeServer.request(6, "GET", "/stream"))
    FakeServer.read_frame(@server) # head
    FakeServer.read_frame(@server) # first chunk
    @server.write(W.encode(W::Cancel.new(6)))
    frames = []
    frames << FakeServer.read_frame(@server) until frames.last.is_a?(W::ResponseEnd)
    assert_operator produced, :<, 200
    assert_equal "/next", (call(7, "GET", "/next") && "/next")
  end

  def test_late_cancel_for_a_finished_request_is_ignored
    start { |env| [200, {}, [env["PATH_INFO"]]] }
    assert_equal "/a", call(1, "GET", "/a")[:body]
    @server.write(W.encode(W::Cancel.new(1)))
    assert_equal "/b", call(2, "GET", "/b")[:body]
  end

  def test_protocol_error_closes_the_connection
    start { |_env| [200, {}, []] }
    @server.write(File.binread(File.join(CORPUS_DIR, "bad-reserved-first.bin")))
    assert_equal :protocol_error, @thread.value
    assert_match(/reserved/, @log.string)
  end

  def test_request_while_a_streamed_body_is_read_is_a_protocol_error
    start { |env| [200, {}, [env["rack.input"].read]] }
    @server.write(FakeServer.request(1, "POST", "/", streams: true, content_length: 4))
    @server.write(W.encode(W::Body.new(1, "ab")) + FakeServer.request(2, "GET", "/"))
    assert_equal :protocol_error, @thread.value
    assert_match(/REQUEST frame while request 1 runs/, @log.string)
  end

  # A spooled body (REQUEST flag BODY_FILE): its file's descriptor rides on the frame's bytes
  # (SCM_RIGHTS), written to its end as the server leaves it; rack.input is that File, binary
  # and at its start, rewindable, and closed after the request.
  def test_spooled_body_arrives_as_the_file_whose_descriptor_rides_on_the_request
    inputs = []
    start do |env|
      next [204, {}, []] if env["PATH_INFO"] == "/next"

      input = env["rack.input"]
      inputs << input
      first = input.read(5)
      input.rewind
      all = input.read
      input.rewind
      buf = +"" # a UTF-8 buffer comes back binary, as with StringIO
      input.read(4, buf)
      [200, {}, ["#{first.unpack1('H*')} #{all.bytesize} #{Digest::SHA256.hexdigest(all)} #{input.is_a?(File)} " \
                 "#{input.class} #{all.encoding} #{buf.encoding}"]]
    end
    body = (0...300_000).map { |i| (i * 7 % 251).chr }.join.b
    path = File.join(Dir.tmpdir, "pp-spool-test-#{Process.pid}-#{object_id}")
    file = File.open(path, "w+b")
    File.unlink(path) # unnamed, as the server's spool files are
    file.write(body)
    file.flush
    frame = FakeServer.request(1, "POST", "/up", body_file: true, content_length: body.bytesize)
    @server.sendmsg(frame, 0, nil, Socket::AncillaryData.unix_rights(file))
    res = FakeServer.read_response(@server, 1)
    assert_equal "#{body[0, 5].unpack1('H*')} #{body.bytesize} #{Digest::SHA256.hexdigest(body)} true " \
                 "PumaPlus::SpooledInput ASCII-8BIT ASCII-8BIT",
                 res[:body]
    assert inputs[0].closed?, "the worker closes its copy of the spool file after the request"
    assert_equal 0, res[:end].body_read_ns
    # the connection goes on: a plain request after it
    assert_equal 204, call(2, "GET", "/next")[:head].status
  ensure
    file&.close
  end

  def test_body_file_without_a_descriptor_is_a_protocol_error
    start { |_env| [200, {}, []] }
    @server.write(FakeServer.request(1, "POST", "/up", body_file: true, content_length: 10))
    assert_equal :protocol_error, @thread.value
    assert_match(/BODY_FILE but no descriptor/, @log.string)
  end

  def test_unexpected_frame_type_is_a_protocol_error
    start { |_env| [200, {}, []] }
    @server.write(W.encode(W::Spawn.new(1)))
    assert_equal :protocol_error, @thread.value
  end

  def test_server_eof_ends_the_thread
    start { |_env| [200, {}, []] }
    @server.close
    assert_equal :eof, @thread.value
  end

  def test_stop_closes_an_idle_connection
    start { |_env| [200, {}, []] }
    sleep 0.05 until @conn.idle?
    @conn.stop
    assert_equal :eof, @thread.value
    assert_equal :eof, FakeServer.read_frame(@server)
  end

  # ---- full hijack (PROTOCOL.md "HIJACK, HIJACKED") ---------------------------------------

  # Plays the server's side of a hijack: expects HIJACK for `id`, answers HIJACKED with
  # `result` and, for OK, one end of a fresh socketpair as SCM_RIGHTS. Returns the other end.
  def answer_hijack(id, result: W::HIJACK_OK, buffered: "")
    frame = FakeServer.read_frame(@server)
    assert_equal W::Hijack.new(id), frame
    bytes = W.encode(W::Hijacked.new(id, result, buffered.b))
    return @server.write(bytes) && nil unless result == W::HIJACK_OK

    app_end, client_end = UNIXSocket.pair
    @server.sendmsg(bytes, 0, nil, Socket::AncillaryData.unix_rights(app_end))
    app_end.close # the worker has its own copy now, as the server closes its own
    client_end
  end

  def test_hijack_is_offered_only_on_requests_flagged_hijackable
    start { |env| [200, {}, ["#{env['rack.hijack?']} #{env['rack.hijack'].respond_to?(:call)}"]] }
    assert_equal "false false", call(1, "GET", "/")[:body]
    @server.write(FakeServer.request(2, "GET", "/", hijackable: true))
    assert_equal "true true", FakeServer.read_response(@server, 2)[:body]
    assert_equal "false false", call(3, "GET", "/")[:body], "the prototype env is untouched"
  end

  def test_full_hijack_hands_the_socket_to_the_app_and_ends_with_response_end_alone
    seen = Queue.new
    start do |env|
      next [200, {}, []] unless env["rack.hijack?"]

      io = env["rack.hijack"].call
      seen << [io.equal?(env["rack.hijack_io"]), env["puma_plus.hijack_buffered"], io.equal?(env["rack.hijack"].call)]
      io.write("raw bytes from the app")
      io.close
      [200, { "x" => "ignored" }, ["ignored"]]
    end
    @server.write(FakeServer.request(4, "GET", "/ws", hijackable: true))
    client = answer_hijack(4, buffered: "early")
    assert_equal "raw bytes from the app", client.read
    res = FakeServer.read_response(@server, 4)
    assert_nil res[:head], "no RESPONSE_HEAD after a full hijack"
    assert_equal "", res[:body]
    assert_equal [true, "early", true], seen.pop
    client.close
    assert_equal 200, call(5, "GET", "/")[:head].status, "the thread serves the next request"
  end

  def test_hijack_the_server_cannot_grant_raises_in_the_app
    start do |env|
      env["rack.hijack"].call
      [200, {}, ["not reached"]]
    rescue IOError => e
      [503, {}, [e.message]]
    end
    @server.write(FakeServer.request(6, "GET", "/", hijackable: true))
    answer_hijack(6, result: W::HIJACK_GONE)
    res = FakeServer.read_response(@server, 6)
    assert_equal [503, "rack.hijack: the client went away"], [res[:head].status, res[:body]]
    @server.write(FakeServer.request(7, "GET", "/", hijackable: true))
    answer_hijack(7, result: W::HIJACK_REFUSED)
    assert_match(/refused/, FakeServer.read_response(@server, 7)[:body])
  end

  def test_stale_cancel_and_frames_before_hijacked_are_handled
    start do |env|
      io = env["rack.hijack"].call
      io.write("ok")
      io.close
      [200, {}, []]
    end
    @server.write(FakeServer.request(8, "GET", "/", hijackable: true))
    assert_equal W::Hijack.new(8), FakeServer.read_frame(@server)
    @server.write(W.encode(W::Cancel.new(3))) # stale: an earlier request's
    app_end, client_end = UNIXSocket.pair
    @server.sendmsg(W.encode(W::Hijacked.new(8, 0, "".b)), 0, nil, Socket::AncillaryData.unix_rights(app_end))
    app_end.close
    assert_equal "ok", client_end.read
    assert_nil FakeServer.read_response(@server, 8)[:head]
  end

  def test_response_hijack_header_writes_the_head_on_the_socket_then_calls_the_hook
    start do |_env|
      hook = lambda do |io|
        io.write("after the head")
        io.close
      end
      [101, { "upgrade" => "websocket", "connection" => "Upgrade", "x-bad" => "a\r\nInjected: 1", "rack.hijack" => hook },
       ["ignored body"]]
    end
    @server.write(FakeServer.request(9, "GET", "/", hijackable: true))
    client = answer_hijack(9)
    assert_equal "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n" \
                 "x-bad: a\r\nx-bad: Injected: 1\r\n\r\nafter the head", client.read, "a Rack 2 joined value is two lines"
    res = FakeServer.read_response(@server, 9)
    assert_nil res[:head]
  end

  def test_a_hook_that_raises_after_the_hijack_is_logged_and_nothing_is_answered
    start { |_env| [101, { "rack.hijack" => ->(_io) { raise "hook failed" } }, []] }
    @server.write(FakeServer.request(15, "GET", "/", hijackable: true))
    client = answer_hijack(15)
    res = FakeServer.read_response(@server, 15)
    assert_nil res[:head], "no 500 for a request whose socket the app already has"
    assert_match(/hook failed/, @log.string)
    client.close
  end

  def test_rack3_streaming_body_answering_101_is_a_response_hijack
    start { |_env| [101, { "upgrade" => "websocket" }, ->(stream) { stream.write("s"); stream.close }] }
    @server.write(FakeServer.request(10, "GET", "/", hijackable: true))
    client = answer_hijack(10)
    assert_equal "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\ns", client.read
    assert_nil FakeServer.read_response(@server, 10)[:head]
  end

  def test_streaming_body_with_200_and_response_hijack_without_the_flag_stay_framed
    start do |env|
      if env["PATH_INFO"] == "/stream"
        [200, {}, ->(stream) { stream.write("framed"); stream.close }]
      else
        [200, { "rack.hijack" => ->(io) { io.write("via frames"); io.close } }, []]
      end
    end
    @server.write(FakeServer.request(11, "GET", "/stream", hijackable: true))
    assert_equal "framed", FakeServer.read_response(@server, 11)[:body], "no HIJACK for a 200 streaming body"
    assert_equal "via frames", call(12, "GET", "/hook")[:body], "h2/TLS: the hook is served as a streaming body"
  end

  def test_hijack_under_rack_lint_has_no_violations
    inner = lambda do |env|
      if env["PATH_INFO"] == "/full"
        io = env["rack.hijack"].call
        io.write("full")
        io.close
        [200, {}, []]
      else
        [200, { "rack.hijack" => lambda { |io|
          io.write("partial")
          io.close
        } }, []]
      end
    end
    start(Rack::Lint.new(inner))
    @server.write(FakeServer.request(13, "GET", "/full", hijackable: true))
    assert_equal "full", answer_hijack(13).read
    FakeServer.read_response(@server, 13)
    @server.write(FakeServer.request(14, "GET", "/partial", hijackable: true))
    assert_match(/\AHTTP\/1\.1 200 OK\r\n\r\npartial\z/, answer_hijack(14).read)
    FakeServer.read_response(@server, 14)
    assert_equal "", @log.string, "no Rack::Lint violation or error was logged"
  end

  def test_mix_app_under_rack_lint_has_no_violations
    app = Rack::Builder.parse_file(File.expand_path("../../scenarios/apps/mix/lint.ru", __dir__))
    app = app.first if app.is_a?(Array)
    start(app)
    assert_equal "Hello, world\n", call(1, "GET", "/hello")[:body]
    assert_match(/\Acpu_ns=\d+ sleep_ms=2\n\z/, call(2, "GET", "/mix/3/2")[:body])
    assert_equal "ping\x00\xff".b, call(3, "POST", "/echo", body: "ping\x00\xff".b, headers: { "Content-Type" => "x" })[:body]
    res = call(4, "GET", "/stream/3")
    assert_equal "chunk 0\nchunk 1\nchunk 2\n", res[:body]
    assert_equal 3, res[:chunks]
    assert_equal 404, call(5, "GET", "/nope")[:head].status
    head = call(7, "HEAD", "/hello")
    assert_equal [200, ""], [head[:head].status, head[:body]]
    assert_includes head[:head].headers.each_slice(2).to_a, ["content-length", "13"]
    @server.write(FakeServer.request(6, "POST", "/echo", streams: true, content_length: 4))
    @server.write(W.encode(W::Body.new(6, "ab")) + W.encode(W::Body.new(6, "cd")) + W.encode(W::BodyEnd.new(6)))
    assert_equal "abcd", call_result(6)
    assert_equal "", @log.string, "no Rack::Lint violation or error was logged"
  end
end

# Every connection test again with the pure-Ruby codec (the reference and the fallback).
class TestConnectionRubyCodec < TestConnection
  CODEC = :ruby
end
