# frozen_string_literal: true

# A worker retired while it is busy (docs/SERVER.md "Phased restart": the old worker "takes no
# new request, finishes the ones it has, then gets RETIRE") must exit once its last piece of
# work ends, whichever kind that work was. The server sends RETIRE from three places in
# server/workers/wlink.c: a response's RESPONSE_END, a WebSocket event's WS_DONE, and the end
# of a request that had timed out. The WS_DONE one once passed the server's struct where the
# workers layer's belongs, so RETIRE never went out and the worker (and the phased restart that
# retired it) lingered. The retire path used here is the phased restart: with one worker, the
# worker it retires is the busy one, every time (the autoscaler's calm retire picks the least
# busy worker instead).
#
# tests/apps/retire holds each piece of work until the test writes its release file, so the
# retire always lands while the work runs. Three rounds on one server, one phased restart each:
#   an HTTP request       -> 200 from the old worker, which then exits (RESPONSE_END);
#   a sticky WS event     -> its reply from the old worker, which then exits (WS_DONE), and
#                            the connection, whose state died with it, is closed with 1012;
#   a flexible WS event   -> the same; the connection stays open and the new worker serves it.
#
#   ruby tests/e2e/test_retire.rb PATH/TO/puma-plus-server
require_relative "helper"

class TestRetire < Minitest::Test
  include E2E::Helpers

  APP = File.join(E2E::ROOT, "tests/apps/retire/config.ru")
  EXIT_WITHIN = 5 # s from the work's end to the worker's exit

  def setup
    E2E.need_python_websockets
    @dir = Dir.mktmpdir("pp-retire")
    @exits = {}
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  def gone?(pid)
    Process.kill(0, pid)
    false
  rescue Errno::ESRCH
    true
  end

  def wait_until(srv, what, timeout)
    deadline = now + timeout
    loop do
      st = srv.stats
      return st if yield(st)

      if now > deadline
        srv.fail_with_log("#{what} within #{timeout}s; workers #{st['worker_status'].map { |w| [w['pid'], w['state']] }.inspect}, " \
                          "retiring #{st['controller']['workers_retiring']}, phased_restart #{st['phased_restart'].inspect}")
      end
      sleep 0.05
    end
  end

  def worker(st, pid) = st["worker_status"].find { |w| w["pid"] == pid }

  # One round: the only worker runs work `name` (started by the block, which returns a proc
  # that waits for the work's answer), a phased restart retires it while the work is held, the
  # work is released: the answer must come from the old worker, which must then exit within
  # EXIT_WITHIN s and leave /stats.
  def retire_while_busy(srv, name)
    st = srv.stats
    assert_equal 1, st["worker_status"].size, st["worker_status"].inspect
    old = st["worker_status"].first["pid"]
    phase = st["phase"]
    answer = yield
    running = File.join(@dir, "#{name}.running")
    deadline = now + 10
    sleep 0.02 until File.exist?(running) || now > deadline
    assert File.exist?(running), "#{name} did not start within 10 s"
    assert_equal old, File.read(running).to_i, "#{name} runs in the only worker"

    post = "POST /phased-restart HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    assert_equal 202, E2E.raw(srv.control_port, post, timeout: 10).dig(0, 0)
    st = wait_until(srv, "worker #{old} retiring while it runs #{name}", 30) do |s|
      worker(s, old)&.fetch("state") == "retiring"
    end
    assert_operator worker(st, old)["last_status"]["busy_threads"], :>=, 1, "#{name} holds a thread of the retiring worker"
    assert_equal 1, st["controller"]["workers_retiring"]
    sleep 0.3
    refute gone?(old), "the retiring worker was stopped before #{name} finished"

    File.write(File.join(@dir, "#{name}.release"), "")
    released_at = now
    assert_equal "released #{name} #{old}", answer.call, "#{name}'s answer, from the retired worker"
    st = wait_until(srv, "retired worker #{old} gone after #{name} ended", EXIT_WITHIN) do |s|
      gone?(old) && worker(s, old).nil? && s["controller"]["workers_retiring"].zero? &&
        s["phase"] == phase + 1 && s["phased_restart"]["state"] == "idle"
    end
    @exits[name] = now - released_at
    assert_equal "ok", st["phased_restart"]["last_result"], st["phased_restart"].inspect
    assert_equal 1, st["booted_workers"]
    refute_equal old, st["worker_status"].first["pid"]
    assert_match(/retiring worker \d+ \(pid #{old}\)/, srv.log, "the server logged the RETIRE it sent")
    old
  end

  def test_worker_retired_while_busy_exits_after_its_last_request_or_websocket_event
    with_server(app: APP, workers: 1, threads: 2, env: { "PP_RETIRE_DIR" => @dir }) do |srv|
      rounds(srv)
    ensure
      File.write(File.join(@dir, "all.release"), "") # a failed round holds nothing into the stop
    end
    puts "\n  retired worker gone after its last work ended: " +
         @exits.map { |k, v| "#{k} #{format('%.2f', v)} s" }.join(", ")
  end

  def rounds(srv)
    # 1. An HTTP request (RESPONSE_END).
    retire_while_busy(srv, "http") do
      t = Thread.new do
        E2E.raw(srv.port, "GET /hold?name=http HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeout: 40)
           .first.values_at(0, 2)
      end
      t.report_on_exception = false
      lambda do
        status, body = t.value
        assert_equal 200, status, body
        body.chomp
      end
    end

    # 2. An event of a sticky WebSocket (WS_DONE); the connection dies with its worker.
    sticky = E2E::WsRelay.new("ws://127.0.0.1:#{srv.port}/sticky")
    flex = nil
    begin
      assert_equal "OPEN None", sticky.first
      retire_while_busy(srv, "sticky") do
        sticky.text("hold sticky")
        -> { sticky.line(20).delete_prefix("T ") }
      end
      assert_match(/\ACLOSED 1012\b/, sticky.line(10), "a sticky connection of the retired worker")

      # 3. An event of a flexible WebSocket (WS_DONE); the connection lives on.
      flex = E2E::WsRelay.new("ws://127.0.0.1:#{srv.port}/flex")
      assert_equal "OPEN None", flex.first
      old = retire_while_busy(srv, "flex") do
        flex.text("hold flex")
        -> { flex.line(20).delete_prefix("T ") }
      end
      flex.text("pid")
      pid = flex.line(10)[/\AT pid (\d+)\z/, 1].to_i
      assert_equal srv.stats["worker_status"].first["pid"], pid, "the flexible connection is served by the new worker"
      refute_equal old, pid
    ensure
      sticky.close
      flex&.close
    end
  end
end
