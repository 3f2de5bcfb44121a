# frozen_string_literal: true

# A WebSocket in a real browser: headless Chromium (Debian's chromium) loads a page from the
# real server (tests/apps/ws_page/config.ru, page.html) whose script opens a WebSocket back
# to the same server, sends 104 messages (non-ASCII text, a burst of 100 short texts, all 256
# byte values as binary, 300 KiB of text, an empty text), checks that each comes back
# unchanged and in order, closes with 4001, and writes the outcome into the page, which
# tests/browser/ws_page_probe.py reads over the DevTools protocol.
#  - over front-end-owned WebSockets (/ws, PumaPlus::WebSocket): the server speaks RFC 6455 and
#    agrees to Chromium's permessage-deflate offer; /stats counts the connection, the 104
#    messages and their bytes each way, and the close (4001, "other"); no hijack;
#  - over a full hijack (/ws-hijack, websocket-driver in the app), the older path.
#
#   ruby tests/e2e/test_ws_browser.rb PATH/TO/puma-plus-server
require_relative "helper"

class TestWsBrowser < Minitest::Test
  APP = File.join(E2E::ROOT, "tests/apps/ws_page/config.ru")
  PYTHON = "/usr/bin/python3"
  CHROMIUM = "/usr/bin/chromium"
  PROBE = File.join(E2E::ROOT, "tests/browser/ws_page_probe.py")

  def require_tools
    flunk "#{CHROMIUM} is missing: this test needs Debian's chromium (scripts/install-deps.sh)" unless
      File.executable?(CHROMIUM)
    out, st = Open3.capture2e(PYTHON, "-c", "import websockets")
    flunk "#{PYTHON} cannot import websockets (Debian's python3-websockets): #{out}" unless st.success?
  end

  def teardown
    @srv&.stop
  end

  # Runs the page against ws_path; returns the page's result (a Hash).
  def page_result(ws_path)
    out, err, st = Open3.capture3(PYTHON, PROBE, "--url", "http://127.0.0.1:#{@srv.port}/page?ws=#{ws_path}",
                                  "--timeout", "30")
    assert st.success?, "ws_page_probe failed (exit #{st.exitstatus}):\n#{err}\n#{out[0, 2000]}\n" \
                        "#{@srv.log[-2000..]}"
    puts "page (#{ws_path}): #{out.lines.last}"
    JSON.parse(out.lines.last)
  end

  def assert_exchange(r)
    assert_nil r["error"], "the page failed: #{r}"
    assert r["opened"], "the WebSocket did not open: #{r}"
    assert_equal 104, r["sent"]
    assert_equal [], r["mismatches"], "messages that did not come back unchanged"
    assert_equal 104, r["echoes"]
    assert_equal 4001, r["close_code"], "the server echoes the page's Close code: #{r}"
    assert r["clean"], "the close handshake completed: #{r}"
  end

  def test_chromium_page_over_front_end_websockets
    require_tools
    @srv = E2E::Server.new(app: APP, workers: 1, threads: 2)
    before = @srv.stats
    r = page_result("/ws")
    assert_exchange(r)
    assert_match(/\Apermessage-deflate/, r["extensions"], "the server agreed to Chromium's deflate offer")
    ws = nil
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    loop do # the close is counted when the server has finished it
      ws = @srv.stats["websocket"]
      break if ws["closes"]["other"].to_i == 1 || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.05
    end
    b = before["websocket"]
    assert_equal 1, ws["opened"] - b["opened"], ws.inspect
    assert_equal 0, ws["open"], ws.inspect
    assert_equal 104, ws["messages_in"] - b["messages_in"], ws.inspect
    assert_equal 104, ws["messages_out"] - b["messages_out"], ws.inspect
    big = 300 * 1024
    payload = "héllo, κόσμε 👋".bytesize + (0...100).sum { |i| "burst #{i}".bytesize } + 256 + big
    assert_equal payload, ws["bytes_in"] - b["bytes_in"], "message bytes in, after inflation"
    assert_equal payload, ws["bytes_out"] - b["bytes_out"], "message bytes out, before deflation"
    # /stats names 1000-1015; an application code such as 4001 counts as "other"
    assert_equal({ "other" => 1 }, ws["closes"].reject { |_, v| v.to_i.zero? }, "closed with the page's 4001")
    assert_equal before["queue"]["hijacked"], @srv.stats["queue"]["hijacked"], "no hijack on this path"
  end

  def test_chromium_page_over_a_full_hijack
    require_tools
    @srv = E2E::Server.new(app: APP, workers: 1, threads: 2)
    before = @srv.stats["queue"]["hijacked"]
    r = page_result("/ws-hijack")
    assert_exchange(r)
    assert_equal before + 1, @srv.stats["queue"]["hijacked"], "the WebSocket was a full hijack"
  end
end
