# frozen_string_literal: true

# Action Cable under the real server (issue 10), in the Rails apps of scripts/gen-rails-app.sh
# (the pinned 7.2 and Debian's 6.1): a real WebSocket client (python3-websockets) opens /cable
# on HTTP/1.1 (the server hands the socket to the worker by full hijack, docs/RACK.md), speaks
# the Action Cable protocol (welcome; a subscribe command whose identifier is the JSON of the
# channel and its params; confirm_subscription; messages; pings skipped), and receives a
# broadcast made by an HTTP request (POST /broadcasts):
#  - async adapter, one worker: the broadcast and the WebSocket share the worker process; a
#    handshake from an origin that allowed_request_origins does not admit is refused (404);
#  - Redis adapter (Debian's redis-server, started here on a free loopback port and stopped by
#    PID), two workers: requests are repeated until one is served by the worker that does not
#    hold the WebSocket, and its broadcast still arrives, carrying that other pid;
#  - async adapter, two workers (7.2): the same rounds, and only the broadcasts made by the
#    WebSocket's own worker arrive (what makes the Redis case mean something).
#  - over the front end's WebSockets (PUMA_PLUS_ACTION_CABLE=frontend, PumaPlus::ActionCable):
#    the channel test frame by frame in one process (cable_frontend_driver.rb plays the
#    server), and under the real server with two workers and the async adapter, nothing
#    hijacked, broadcasts from either worker arriving once (the server fans them out; 6.1 with
#    the Redis adapter too); and over
#    HTTP/2 extended CONNECT (7.2, tests/ws/h2cable.py).
# Test names carry the app (rails_7_2_, rails_6_1_): ctest runs each app as its own test
# (e2e_action_cable_7_2, e2e_action_cable_6_1, with -n /rails_7_2_/ and -n /rails_6_1_/).
#
#   ruby tests/e2e/test_action_cable.rb PATH/TO/puma-plus-server
require_relative "helper"
require "net/http"

class TestActionCable < Minitest::Test
  PYTHON = E2E::PYTHON
  REDIS_SERVER = "/usr/bin/redis-server"

  # One Action Cable client over a WebSocket relay (E2E::WsRelay); reads are bounded.
  class CableClient
    attr_reader :subprotocol, :seen

    def initialize(url, origin)
      @ws = E2E::WsRelay.new(url, protocols: "actioncable-v1-json,actioncable-unsupported", origin: origin)
      @seen = []
      @backlog = []
      first = @ws.first
      @refused = first[/\AREFUSED (\S+)/, 1]
      @subprotocol = first[/\AOPEN (\S+)/, 1]
      raise Minitest::Assertion, "the relay said #{first.inspect}: #{stderr_text}" unless @refused || @subprotocol
    end

    # What the relay wrote on stderr so far (it may still be running: never waits long).
    def stderr_text = @ws.err(2)

    def refused = @refused

    # The next text message within `timeout` s; fails the test on none or on the WebSocket's end.
    def read_line(timeout)
      l = @ws.read_line(timeout)
      raise Minitest::Assertion, "no WebSocket message within #{timeout}s (seen: #{@seen.last(5)})" if l == :timeout
      if l == :ended || l.start_with?("CLOSED ")
        messages = @seen.reject { |m| m["type"] == "ping" }.last(20)
        raise Minitest::Assertion, "the WebSocket closed (seen: #{messages}): #{l} #{stderr_text}"
      end
      raise Minitest::Assertion, "a frame that is not text: #{l[0, 200]}" unless l.start_with?("T ")

      l.delete_prefix("T ")
    end

    # The next Action Cable message that is not a ping (the server sends one every 3 s), parsed.
    def next_message(timeout = 15)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
      loop do
        msg = JSON.parse(read_line([deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC), 0].max))
        @seen << msg
        return msg unless msg["type"] == "ping"
      end
    end

    # The first message the block accepts, among those received and not yet taken by an
    # await, then new ones (bounded); it is taken, the others stay for later awaits.
    def await(timeout = 15, &accept)
      if (i = @backlog.index(&accept))
        return @backlog.delete_at(i)
      end

      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
      loop do
        left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
        msg = next_message([left, 0.01].max)
        return msg if accept.call(msg)

        @backlog << msg
      end
    end

    # Reads (and keeps in seen) whatever arrives within `seconds`.
    def drain(seconds)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
      while (left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)).positive?
        line = @ws.read_line(left)
        next if line == :timeout
        break if line == :ended || line.start_with?("CLOSED ")

        @seen << JSON.parse(line.delete_prefix("T "))
      end
    end

    def command(hash) = @ws.text(JSON.generate(hash))

    def close = @ws.close
  end

  # Each test names its app: Rails 7.2 (the pinned RubyGems set) or Debian's 6.1.
  def app(version)
    E2E.need_python_websockets
    column_env = if version == "6.1"
                   E2E.debian_env.merge("GEM_HOME" => File.join(E2E::ROOT, "build/apps/debian-gems"))
                 else
                   E2E.rubygems_env.merge("RUBYOPT" => nil, "BUNDLE_FROZEN" => nil)
                 end
    out, status = Open3.capture2e(column_env.merge("GEM_HOME" => nil), "bash",
                                  File.join(E2E::ROOT, "scripts/gen-rails-app.sh"), version)
    assert status.success?, "scripts/gen-rails-app.sh #{version} failed:\n#{out}"
    @version = version
    @tmp = Dir.mktmpdir("pp-cable-")
    @app = File.join(@tmp, "app")
    FileUtils.cp_r(File.join(E2E::ROOT, "build/apps/rails-#{version}"), @app)
    @env = column_env.merge(
      "BUNDLE_GEMFILE" => File.join(@app, "Gemfile"), "PUMA_PLUS_SERVER" => File.expand_path(E2E::BIN),
      "SECRET_KEY_BASE" => "pp-e2e-#{'k' * 64}", "RAILS_LOG_TO_STDOUT" => "1", "RAILS_ENV" => "production",
      "RAILS_MAX_THREADS" => nil, "PP_CABLE_ADAPTER" => nil, "REDIS_URL" => nil
    )
  end

  def setup
    @clients = []
  end

  def teardown
    @clients&.each(&:close)
    @srv&.stop
    stop_redis
    FileUtils.rm_rf(@tmp) if @tmp
  end

  # `server_flags` go to puma-plus-server after `--` (e.g. -h2c).
  def boot(workers, extra_env = {}, server_flags = [])
    env = @env.merge("WEB_CONCURRENCY" => workers.to_s).merge(extra_env)
    @srv = E2E::Server.new(workers: workers, env: env, chdir: @app, boot_timeout: 60, command: lambda { |port, cport|
      env["PORT"] = port.to_s
      env["PP_CONTROL_PORT"] = cport.to_s
      %w[bundle exec puma-plus] + (server_flags.empty? ? [] : ["--", *server_flags])
    })
  end

  def origin = "http://127.0.0.1:#{@srv.port}"

  def connect(origin: self.origin)
    c = CableClient.new("ws://127.0.0.1:#{@srv.port}/cable", origin)
    @clients << c
    c
  end

  # welcome, subscribe, confirm_subscription and the channel's first transmission (the pid
  # of the worker holding this WebSocket), in whichever order the last two come.
  def subscribe(client, room)
    assert_nil client.refused, "the handshake was refused (HTTP #{client.refused}): #{@srv.log[-2000..]}"
    assert_equal "actioncable-v1-json", client.subprotocol
    assert_equal({ "type" => "welcome" }, client.next_message.slice("type"))
    identifier = JSON.generate({ "channel" => "WorkerChannel", "room" => room })
    client.command({ "command" => "subscribe", "identifier" => identifier })
    confirmed = pid = nil
    until confirmed && pid
      msg = client.next_message
      assert_equal identifier, msg["identifier"], "a message for another subscription: #{msg}"
      if msg["type"] == "confirm_subscription"
        confirmed = true
      elsif msg["message"].is_a?(Hash) && msg["message"]["subscribed_pid"]
        pid = msg["message"]["subscribed_pid"]
        @pubsub = msg["message"]["pubsub"]
      else
        flunk "unexpected message while subscribing: #{msg}"
      end
    end
    [identifier, pid]
  end

  def broadcast(room, text)
    res = Net::HTTP.start("127.0.0.1", @srv.port, open_timeout: 10, read_timeout: 30) do |h|
      req = Net::HTTP::Post.new("/broadcasts")
      req["Connection"] = "close"
      req.set_form_data("room" => room, "text" => text)
      h.request(req)
    end
    assert_equal "200", res.code, @srv.log[-3000..]
    body = JSON.parse(res.body)
    assert_equal res["x-pp-worker-pid"], body["pid"].to_s
    body["pid"]
  end

  # Action Cable logs (and otherwise swallows) what fails in a channel or its worker pool.
  def refute_cable_errors(log)
    refute_match(/There was an exception|Could not execute command|Unable to process/, log)
  end

  def await_text(client, identifier, text)
    client.await { |m| m["identifier"] == identifier && m.dig("message", "text") == text }["message"]
  end

  def test_rails_7_2_async_adapter_one_worker = async_one_worker("7.2")
  def test_rails_6_1_async_adapter_one_worker = async_one_worker("6.1")

  def async_one_worker(version)
    app(version)
    boot(1)
    hijacked = @srv.stats["queue"]["hijacked"]
    client = connect
    room = "async-#{rand(1_000_000)}"
    identifier, ws_pid = subscribe(client, room)
    assert_equal "ActionCable::SubscriptionAdapter::Async", @pubsub
    assert_equal hijacked + 1, @srv.stats["queue"]["hijacked"], "the /cable handshake was a full hijack"

    2.times do |i|
      text = "hello #{i} #{rand(1_000_000)}"
      http_pid = broadcast(room, text)
      assert_equal ws_pid, http_pid, "one worker: the request and the WebSocket share its process"
      assert_equal({ "text" => text, "from_pid" => http_pid }, await_text(client, identifier, text))
    end
    # A second room's subscriber on the same worker gets only its own room's broadcast.
    assert_rooms_apart(client, identifier, room)

    # config.action_cable.allowed_request_origins: a handshake from another origin gets a 404
    # (answered, not hijacked); another port of 127.0.0.1, which is not this page's origin
    # (allow_same_origin_as_host does not admit it), is admitted by the app's setting.
    hijacked = @srv.stats["queue"]["hijacked"]
    bad = connect(origin: "http://localhost:#{@srv.port}")
    assert_equal "404", bad.refused, "allowed_request_origins admits 127.0.0.1 only"
    assert_match(/Request origin not allowed: http:\/\/localhost:#{@srv.port}/, @srv.log)
    assert_equal hijacked, @srv.stats["queue"]["hijacked"], "the refused handshake was answered, not hijacked"
    subscribe(connect(origin: "http://127.0.0.1:1"), "origin")
    assert_equal hijacked + 1, @srv.stats["queue"]["hijacked"]

    log = @srv.log
    assert_match(/Successfully upgraded to WebSocket/, log)
    assert_match(/WorkerChannel is streaming from room:#{room}/, log)
    assert_equal 0, @srv.stats["requests"]["status_5xx"], log[-3000..]
    refute_cable_errors(log)
  end

  def test_rails_7_2_redis_adapter_across_two_workers = redis_across_workers("7.2")
  def test_rails_6_1_redis_adapter_across_two_workers = redis_across_workers("6.1")

  def redis_across_workers(version)
    app(version)
    port = start_redis
    boot(2, "PP_CABLE_ADAPTER" => "redis", "REDIS_URL" => "redis://127.0.0.1:#{port}/0")
    client = connect
    room = "redis-#{rand(1_000_000)}"
    identifier, ws_pid = subscribe(client, room)
    assert_equal "ActionCable::SubscriptionAdapter::Redis", @pubsub
    assert_equal [1], redis(port, "PUBSUB", "NUMSUB", "pp_cable:room:#{room}").values_at(1),
                 "the worker holding the WebSocket subscribed in Redis"

    assert_broadcasts_cross_workers(client, identifier, room, ws_pid)
    assert_equal 2, @srv.stats["booted_workers"]
    assert_equal 0, @srv.stats["requests"]["status_5xx"], @srv.log[-3000..]
    refute_cable_errors(@srv.log)
    assert_equal 0, @srv.stop&.exitstatus, "a clean stop with the WebSocket still open"
  end

  # Rounds of concurrent broadcasts spread over all the connections (2 workers × 3 threads)
  # until one is served by a worker other than ws_pid. Returns ({text => pid} of all that
  # were sent, [text, pid] of the first from the other worker).
  def broadcast_until_another_worker(room, ws_pid)
    sent = {}
    20.times do |round|
      answers = Array.new(6) do |i|
        text = "round #{round} request #{i}"
        Thread.new { [text, broadcast(room, text)] }
      end.map(&:value)
      answers.each { |text, pid| sent[text] = pid }
      other = answers.find { |_, pid| pid != ws_pid }
      return [sent, other] if other
    end
    flunk "20 rounds of 6 requests, all served by the WebSocket's worker #{ws_pid}"
  end

  # Broadcasts to room until one is made by a worker other than ws_pid's: that one and every
  # other reach client (subscribed to room as identifier), each from the worker that made it.
  # Returns the broadcasts ({text => pid}).
  def assert_broadcasts_cross_workers(client, identifier, room, ws_pid)
    sent, other = broadcast_until_another_worker(room, ws_pid)
    text, http_pid = other
    refute_equal ws_pid, http_pid
    assert_equal({ "text" => text, "from_pid" => http_pid }, await_text(client, identifier, text),
                 "a broadcast from worker #{http_pid} reached the WebSocket of worker #{ws_pid}")
    sent.except(text).each { |t, pid| assert_equal pid, await_text(client, identifier, t)["from_pid"] }
    sent
  end

  # A second subscriber, of room "<room>-b", gets that room's broadcast, and client (of room,
  # as identifier) does not.
  def assert_rooms_apart(client, identifier, room)
    other = connect
    other_id, = subscribe(other, "#{room}-b")
    broadcast("#{room}-b", "only b")
    assert_equal "only b", await_text(other, other_id, "only b")["text"]
    broadcast(room, "only a")
    await_text(client, identifier, "only a")
    refute client.seen.any? { |m| m.dig("message", "text") == "only b" }, "room a got room b's broadcast"
  end

  # The contrast that gives the Redis test its meaning: with the async adapter each worker
  # process has a pubsub of its own, so of the same rounds of broadcasts only those made by
  # the WebSocket's worker arrive.
  def test_rails_7_2_async_adapter_does_not_cross_workers
    app("7.2")
    boot(2)
    client = connect
    room = "async2-#{rand(1_000_000)}"
    identifier, ws_pid = subscribe(client, room)
    sent, = broadcast_until_another_worker(room, ws_pid)
    own, others = sent.partition { |_, pid| pid == ws_pid }
    refute_empty others
    own.each { |t, _| assert_equal ws_pid, await_text(client, identifier, t)["from_pid"] }
    client.drain(1.5) # a broadcast over Redis arrives within milliseconds (the Redis test)
    leaked = client.seen.select { |m| m.dig("message", "from_pid") && m.dig("message", "from_pid") != ws_pid }
    assert_empty leaked, "the async adapter delivered another worker's broadcast"
  end

  # ---- Action Cable over the front end's WebSockets (PumaPlus::ActionCable) ---------------

  # In one process, the test playing the server (tests/e2e/cable_frontend_driver.rb): the app's
  # channel test (subscribe, stream_from, transmit, broadcast from a request, unsubscribe,
  # close) checked frame by frame, with the app's code and cable.yml unchanged.
  def test_rails_7_2_frontend_frames_in_process = frontend_in_process("7.2")
  def test_rails_6_1_frontend_frames_in_process = frontend_in_process("6.1")

  def frontend_in_process(version)
    app(version)
    driver = File.join(E2E::ROOT, "tests/e2e/cable_frontend_driver.rb")
    cmd = version == "6.1" ? ["ruby", driver] : ["bundle", "exec", "ruby", driver]
    out, status = Open3.capture2e(@env.merge("PUMA_PLUS_ACTION_CABLE" => "frontend"), "timeout", "120", *cmd, chdir: @app)
    $stderr.puts(out) if ENV["PP_VERBOSE"]
    assert status.success?, "the driver failed:\n#{out[-4000..] || out}"
    assert_match(/^OK done/, out)
    refute_cable_errors(out)
  end

  # Over the real server with a real client (action_cable :frontend): the same channel test as
  # over hijack, nothing hijacked; with the async adapter and two workers a broadcast made by
  # either worker reaches the WebSocket (WS_BROADCAST: the server holds the tags), where over
  # hijack only the WebSocket's own worker's did (test_rails_7_2_async_adapter_does_not_cross_workers).
  def test_rails_7_2_frontend_real_server = frontend_real_server("7.2")
  def test_rails_6_1_frontend_real_server = frontend_real_server("6.1")

  def frontend_real_server(version)
    app(version)
    # Both switches: the environment (7.2, async adapter) and the config file (6.1, with the
    # Redis adapter: broadcasts go to the front end and to Redis, and arrive once).
    if version == "6.1"
      File.write(File.join(@app, "config/puma-plus.rb"), "\naction_cable :frontend\n", mode: "a")
      port = start_redis
      boot(2, "PP_CABLE_ADAPTER" => "redis", "REDIS_URL" => "redis://127.0.0.1:#{port}/0")
    else
      boot(2, "PUMA_PLUS_ACTION_CABLE" => "frontend")
    end
    assert_match(/Action Cable runs over the front end's WebSockets/, @srv.log)
    hijacked = @srv.stats["queue"]["hijacked"]
    client = connect
    room = "front-#{rand(1_000_000)}"
    identifier, ws_pid = subscribe(client, room)
    assert_equal "PumaPlus::ActionCable::Pubsub", @pubsub
    assert_equal hijacked, @srv.stats["queue"]["hijacked"], "the /cable handshake was not hijacked"
    sent = assert_broadcasts_cross_workers(client, identifier, room, ws_pid)
    # A second subscriber, another room: only its own broadcasts.
    assert_rooms_apart(client, identifier, room)
    # Action Cable's pings (every 3 s, from its timer thread) go on the monitor connection.
    client.drain(3.5)
    assert client.seen.any? { |m| m["type"] == "ping" }, "no ping in #{client.seen.size} messages"
    texts = client.seen.filter_map { |m| m["message"]["text"] if m["message"].is_a?(Hash) }
    assert_equal texts.uniq, texts, "every broadcast arrived once"
    assert_equal sent.size + 1, texts.size, "every broadcast to room a arrived"
    # A refused origin is still Action Cable's 404.
    assert_equal "404", connect(origin: "http://localhost:#{@srv.port}").refused
    log = @srv.log
    assert_match(/WorkerChannel is streaming from room:#{room}/, log)
    assert_equal 0, @srv.stats["requests"]["status_5xx"], log[-3000..]
    refute_cable_errors(log)
    refute_match(/handler raised|no handler/, log)
  end

  # The same app code over HTTP/2 (RFC 8441 extended CONNECT on -h2c; tests/ws/h2cable.py,
  # python3-h2): welcome, subscribe, a broadcast from a POST on the same HTTP/2 connection.
  def test_rails_7_2_frontend_over_h2
    flunk("python3-h2 (Debian) is missing in #{PYTHON}") unless system(PYTHON, "-c", "import h2", err: File::NULL)
    app("7.2")
    boot(1, { "PUMA_PLUS_ACTION_CABLE" => "frontend" }, ["-h2c"])
    room = "h2-#{rand(1_000_000)}"
    out, status = Open3.capture2e("timeout", "60", PYTHON, File.join(E2E::ROOT, "tests/ws/h2cable.py"),
                                  "127.0.0.1", @srv.port.to_s, room)
    assert status.success?, "#{out}\n--- server log ---\n#{@srv.log[-3000..]}"
    assert_match(/^OK$/, out)
    assert_match(/"text": "over h2"/, out)
    assert_match(/WorkerChannel is streaming from room:#{room}/, @srv.log)
    refute_cable_errors(@srv.log)
  end

  # ---- redis-server, on a free loopback port, stopped by PID ------------------------------

  def start_redis
    flunk "#{REDIS_SERVER} is missing (Debian package redis-server; scripts/install-deps.sh)" unless
      File.executable?(REDIS_SERVER)
    port = E2E.free_port
    dir = File.join(@tmp, "redis")
    FileUtils.mkdir_p(dir)
    @redis_log = File.join(dir, "redis.log")
    @redis_pid = Process.spawn(REDIS_SERVER, "--port", port.to_s, "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--dir", dir, "--daemonize", "no",
                               in: File::NULL, out: @redis_log, err: [:child, :out])
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    loop do
      return port if (redis(port, "PING") rescue nil) == "PONG"

      flunk "redis-server exited: #{File.read(@redis_log)}" if Process.waitpid(@redis_pid, Process::WNOHANG)
      flunk "redis-server not answering on #{port} within 10s: #{File.read(@redis_log)}" if
        Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      sleep 0.05
    end
  end

  def stop_redis
    return unless @redis_pid

    Process.kill("TERM", @redis_pid)
    Timeout.timeout(10) { Process.waitpid(@redis_pid) }
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  rescue Timeout::Error
    Process.kill("KILL", @redis_pid)
    Process.waitpid(@redis_pid)
  ensure
    @redis_pid = nil
  end

  # One command over RESP; returns a String, an Integer, or an Array of those.
  def redis(port, *args)
    Timeout.timeout(5) do
      s = TCPSocket.new("127.0.0.1", port)
      s.write("*#{args.size}\r\n" + args.map { |a| "$#{a.bytesize}\r\n#{a}\r\n" }.join)
      reply = read_resp(s)
      s.close
      reply
    end
  end

  def read_resp(s)
    line = s.gets("\r\n").chomp("\r\n")
    case line[0]
    when "+" then line[1..]
    when ":" then Integer(line[1..])
    when "$" then (n = Integer(line[1..])).negative? ? nil : s.read(n + 2).chomp("\r\n")
    when "*" then Array.new(Integer(line[1..])) { read_resp(s) }
    else raise "redis: #{line}"
    end
  end
end
