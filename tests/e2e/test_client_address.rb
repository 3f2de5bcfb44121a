# frozen_string_literal: true

# Client addresses behind proxies (docs/SERVER.md "Client addresses") end to end: listeners
# with ,proxy=v1 / ,proxy=v2 / ,proxy=any take the PROXY protocol header first, and the app's
# REMOTE_ADDR (tests/apps/env echoes the env) is the client it names. Raw headers from a test
# client (v1 TCP4, v2 IPv6 with TLVs, v2 LOCAL, split across writes, before a TLS
# handshake), missing and malformed headers (closed, counted in /stats and /metrics), and a
# real HAProxy (send-proxy, send-proxy-v2) on loopback, which the client reaches from
# 127.0.0.5 so the proxied address differs from HAProxy's own 127.0.0.1.
require_relative "helper"
require "ipaddr"
require "openssl"
require "tmpdir"

class TestClientAddress < Minitest::Test
  ENV_APP = File.join(E2E::ROOT, "tests/apps/env/config.ru")
  HAPROXY = "/usr/sbin/haproxy"
  SIG = "\r\n\r\n\0\r\nQUIT\n".b

  def setup
    @dir = Dir.mktmpdir("pp-e2e-addr")
    @v1 = E2E.free_port
    @v2 = E2E.free_port
    @any_tls = E2E.free_port
    @log = File.join(@dir, "access.log")
    @srv = E2E::Server.new(app: ENV_APP, workers: 1, threads: 4,
                           extra: ["-listen", "127.0.0.1:#{@v1},proxy=v1", "-listen", "127.0.0.1:#{@v2},proxy=v2",
                                   "-listen-tls", "127.0.0.1:#{@any_tls},proxy=any",
                                   "-access-log", @log, "-access-log-format", "json",
                                   "-remote-addr-header", "X-Forwarded-For", "-trusted-proxies", "127.0.0.2,10.0.0.0/8"])
  end

  def teardown
    @srv&.stop
    if @haproxy
      Process.kill("TERM", @haproxy) rescue nil
      Process.wait(@haproxy) rescue nil
    end
    FileUtils.rm_rf(@dir)
  end

  REQ = "GET /env HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"

  # Sends the parts (with a pause between them) and returns the app's env, or nil when the
  # server closed the connection without a response.
  def send_raw(port, *parts)
    s = TCPSocket.new("127.0.0.1", port)
    parts.each_with_index do |p, i|
      sleep 0.05 if i.positive?
      s.write(p)
    end
    resp = Timeout.timeout(10) { s.read }
    s.close
    return nil if resp.empty?

    assert_match(%r{\AHTTP/1\.1 200 }, resp)
    JSON.parse(resp.split("\r\n\r\n", 2)[1])
  rescue Errno::ECONNRESET, Errno::EPIPE
    nil
  end

  def v2_header(cmd, fam, addrs, tlvs = "".b)
    body = addrs.b + tlvs.b
    SIG + [0x20 | cmd, fam, body.bytesize].pack("CCn") + body
  end

  def test_raw_v1_and_v2_headers_set_remote_addr
    env = send_raw(@v1, "PROXY TCP4 192.0.2.7 127.0.0.1 51234 #{@v1}\r\n" + REQ)
    assert_equal "192.0.2.7", env["REMOTE_ADDR"]
    # the header split across writes, and the request after it in another
    env = send_raw(@v1, "PROXY TCP6 2001:db8::9 ::1 4", "3 #{@v1}\r\n", REQ)
    assert_equal "2001:db8::9", env["REMOTE_ADDR"]
    env = send_raw(@v1, "PROXY UNKNOWN\r\n" + REQ)
    assert_equal "127.0.0.1", env["REMOTE_ADDR"], "UNKNOWN: the connection's own address"

    addrs6 = IPAddr.new("2001:db8::7").hton + IPAddr.new("::1").hton + [51234, @v2].pack("nn")
    tlvs = [0x01, 2].pack("Cn") + "h2" + [0xe0, 3].pack("Cn") + "xyz"
    env = send_raw(@v2, v2_header(1, 0x21, addrs6, tlvs) + REQ)
    assert_equal "2001:db8::7", env["REMOTE_ADDR"]
    addrs4 = IPAddr.new("198.51.100.3").hton + IPAddr.new("127.0.0.1").hton + [1, 2].pack("nn")
    hdr = v2_header(1, 0x11, addrs4)
    env = send_raw(@v2, hdr[0, 10], hdr[10..], REQ)
    assert_equal "198.51.100.3", env["REMOTE_ADDR"]
    env = send_raw(@v2, v2_header(0, 0x00, "") + REQ) # LOCAL: the proxy's own health check
    assert_equal "127.0.0.1", env["REMOTE_ADDR"]
    # the plain listener is untouched
    env = send_raw(@srv.port, REQ)
    assert_equal "127.0.0.1", env["REMOTE_ADDR"]
    assert_equal 6, @srv.stats["requests"]["proxy_headers"]
    # the access log shows the proxied client too
    deadline = Time.now + 5
    sleep 0.05 until (File.exist?(@log) && File.readlines(@log).size >= 7) || Time.now > deadline
    remotes = File.readlines(@log).map { |l| JSON.parse(l)["remote"] }
    assert_equal ["192.0.2.7", "2001:db8::9", "127.0.0.1", "2001:db8::7", "198.51.100.3", "127.0.0.1", "127.0.0.1"],
                 remotes
  end

  def test_missing_or_malformed_headers_close_and_are_counted
    bad = [
      [@v1, REQ],                                                          # no header
      [@v1, "PROXY TCP4 192.0.2.7 127.0.0.1 51234\r\n" + REQ],             # 4 fields
      [@v1, "PROXY TCP4 192.0.2.300 127.0.0.1 1 2\r\n" + REQ],             # bad address
      [@v1, v2_header(1, 0x11, "\0" * 12) + REQ],                          # v2 on a v1 listener
      [@v2, "PROXY TCP4 192.0.2.7 127.0.0.1 1 2\r\n" + REQ],               # v1 on a v2 listener
      [@v2, v2_header(1, 0x11, "\0" * 12, [1, 9].pack("Cn") + "ab") + REQ] # TLV past the end
    ]
    bad.each_with_index do |(port, bytes), i|
      assert_nil send_raw(port, bytes), "case #{i}: the connection is closed without a response"
    end
    assert_equal 6, @srv.stats["requests"]["proxy_rejected"]
    _, metrics = @srv.control_get("/metrics")
    assert_match(/^puma_plus_proxy_rejected_total 6$/, metrics)
    assert_match(/proxy_rejected|PROXY/, @srv.log)
    # the listener still serves good headers afterwards
    assert_equal "192.0.2.7", send_raw(@v1, "PROXY TCP4 192.0.2.7 127.0.0.1 1 2\r\n" + REQ)["REMOTE_ADDR"]
  end

  def test_proxy_header_before_tls
    [["PROXY TCP4 203.0.113.4 127.0.0.1 5555 #{@any_tls}\r\n", "203.0.113.4"],
     [v2_header(1, 0x11, IPAddr.new("203.0.113.5").hton + IPAddr.new("127.0.0.1").hton + [1, 2].pack("nn")),
      "203.0.113.5"]].each do |hdr, want|
      tcp = TCPSocket.new("127.0.0.1", @any_tls)
      tcp.write(hdr)
      ctx = OpenSSL::SSL::SSLContext.new
      ctx.verify_mode = OpenSSL::SSL::VERIFY_NONE
      ssl = OpenSSL::SSL::SSLSocket.new(tcp, ctx)
      ssl.sync_close = true
      Timeout.timeout(10) { ssl.connect }
      ssl.write(REQ)
      resp = Timeout.timeout(10) { ssl.read }
      ssl.close
      assert_match(%r{\AHTTP/1\.1 200 }, resp)
      assert_equal want, JSON.parse(resp.split("\r\n\r\n", 2)[1])["REMOTE_ADDR"]
    end
  end

  # -remote-addr-header X-Forwarded-For -trusted-proxies 127.0.0.2,10.0.0.0/8: believed from
  # 127.0.0.2 (the right-most untrusted entry), ignored from 127.0.0.1 (a spoofed header).
  def test_forwarded_header_from_trusted_peers_only
    req = "GET /env HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 6.6.6.6, 203.0.113.50, 10.1.2.3\r\n" \
          "Connection: close\r\n\r\n"
    env_from = lambda do |local, port = @srv.port, prefix = ""|
      s = Socket.tcp("127.0.0.1", port, local)
      s.write(prefix + req)
      resp = Timeout.timeout(10) { s.read }
      s.close
      JSON.parse(resp.split("\r\n\r\n", 2)[1])
    end
    env = env_from.call("127.0.0.2")
    assert_equal "203.0.113.50", env["REMOTE_ADDR"]
    assert_equal "6.6.6.6, 203.0.113.50, 10.1.2.3", env["HTTP_X_FORWARDED_FOR"], "the header itself is kept"
    assert_equal "127.0.0.1", env_from.call("127.0.0.1")["REMOTE_ADDR"], "spoofed: the peer is not trusted"
    # the peer a PROXY header names is what is trusted (or not)
    assert_equal "203.0.113.50", env_from.call("127.0.0.1", @v1, "PROXY TCP4 10.0.0.9 127.0.0.1 1 2\r\n")["REMOTE_ADDR"]
    assert_equal "192.0.2.1", env_from.call("127.0.0.1", @v1, "PROXY TCP4 192.0.2.1 127.0.0.1 1 2\r\n")["REMOTE_ADDR"]
  end

  def test_through_haproxy_send_proxy_v1_and_v2
    flunk("haproxy (Debian package haproxy) is not installed") unless File.executable?(HAPROXY)
    hp1 = E2E.free_port
    hp2 = E2E.free_port
    cfg = File.join(@dir, "haproxy.cfg")
    File.write(cfg, <<~CFG)
      global
        maxconn 64
      defaults
        mode tcp
        timeout connect 5s
        timeout client 30s
        timeout server 30s
      frontend f1
        bind 127.0.0.1:#{hp1}
        default_backend b1
      backend b1
        server s1 127.0.0.1:#{@v1} send-proxy
      frontend f2
        bind 127.0.0.1:#{hp2}
        default_backend b2
      backend b2
        server s2 127.0.0.1:#{@v2} send-proxy-v2
    CFG
    @haproxy = Process.spawn(HAPROXY, "-db", "-f", cfg, out: File.join(@dir, "haproxy.log"), err: [:child, :out])
    [hp1, hp2].each do |p|
      deadline = Time.now + 10
      begin
        TCPSocket.new("127.0.0.1", p).close
      rescue Errno::ECONNREFUSED
        flunk("haproxy did not listen on #{p}: #{File.read(File.join(@dir, 'haproxy.log'))}") if Time.now > deadline
        sleep 0.05
        retry
      end
    end
    [hp1, hp2].each do |p|
      # from 127.0.0.5: HAProxy itself connects from 127.0.0.1, so only the header can say .5
      out, st = Open3.capture2("curl", "-s", "--interface", "127.0.0.5", "http://127.0.0.1:#{p}/env")
      assert st.success?, out
      assert_equal "127.0.0.5", JSON.parse(out)["REMOTE_ADDR"], "through haproxy on #{p}"
    end
    assert_operator @srv.stats["requests"]["proxy_headers"], :>=, 2
    assert_equal 0, @srv.stats["requests"]["proxy_rejected"]
  end
end
