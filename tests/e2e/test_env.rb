# frozen_string_literal: true

# The Rack env must not depend on the protocol that carried the request: the same request
# (method, path with a query, the same explicit headers, two Cookie fields, a repeated
# X-Multi field, and for POST a body with a Content-Type) sent over HTTP/1.1, h2c (prior
# knowledge), HTTP/2 over TLS (ALPN h2) and HTTP/1.1 over TLS yields the same env key by key,
# except SERVER_PROTOCOL and, over TLS, rack.url_scheme / HTTPS / SERVER_PORT. The app
# (tests/apps/env_strings/config.ru) answers with the env's String values as JSON.
#
#   ruby tests/e2e/test_env.rb PATH/TO/puma-plus-server
require_relative "helper"

class TestEnv < Minitest::Test
  ENV_APP = File.join(E2E::ROOT, "tests/apps/env_strings/config.ru")
  TARGET = "/p/a%20th?x=1&y=two&x=3"
  HEADERS = [
    "Host: pp.test", "User-Agent: pp-env-test", "Accept: */*", "Cookie: a=1", "Cookie: b=2",
    "X-Multi: one", "X-Multi: two", "X-Plain: v", "Accept-Language: en, fr;q=0.5"
  ].freeze
  # The four protocols: curl flags and the scheme / port (:http or :https).
  PROTOCOLS = {
    "h1" => [["--http1.1"], :http],
    "h2c" => [["--http2-prior-knowledge"], :http],
    "h2_tls" => [["-k", "--http2"], :https],
    "h1_tls" => [["-k", "--http1.1"], :https]
  }.freeze

  def self.cert_dir
    @cert_dir ||= begin
      dir = Dir.mktmpdir("pp-env-cert")
      _, err, st = Open3.capture3("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                                  "ec_paramgen_curve:P-256", "-subj", "/CN=localhost", "-addext",
                                  "subjectAltName=DNS:localhost,IP:127.0.0.1", "-days", "2", "-nodes",
                                  "-keyout", File.join(dir, "key.pem"), "-out", File.join(dir, "cert.pem"))
      raise "openssl req failed: #{err}" unless st.success?

      dir
    end
  end

  def setup
    dir = self.class.cert_dir
    @srv = E2E::Server.new(app: ENV_APP, workers: 1, threads: 2, tls: true,
                           extra: ["-h2c", "-tls-cert", File.join(dir, "cert.pem"),
                                   "-tls-key", File.join(dir, "key.pem")])
  end

  def teardown
    @srv&.stop
  end

  def url(scheme)
    port = scheme == :https ? @srv.https_port : @srv.port
    "#{scheme}://127.0.0.1:#{port}#{TARGET}"
  end

  # The env of one request over one protocol, plus the HTTP version curl saw.
  def fetch(proto, headers: HEADERS, body: nil)
    flags, scheme = PROTOCOLS.fetch(proto)
    args = [*flags, "-w", "\n%{http_code} %{http_version}"]
    headers.each { |h| args += ["-H", h] }
    args += ["-X", "POST", "--data-binary", body, "-H", "Content-Type: text/x-pp; charset=utf-8"] if body
    out, err, st = E2E.curl(*args, url(scheme))
    assert st.success?, "curl #{proto} failed: #{err}"
    json, _, trailer = out.rpartition("\n")
    code, version = trailer.split
    assert_equal "200", code, "#{proto}: status (body #{json[0, 300]})"
    want_version = proto.start_with?("h2") ? "2" : "1.1"
    assert_equal want_version, version, "#{proto}: curl did not use the protocol under test"
    JSON.parse(json)
  end

  # Every key whose value differs (or is missing on one side), as "KEY: a | b" lines.
  def diff(a, b)
    (a.keys | b.keys).sort.filter_map do |k|
      next if a[k] == b[k]

      "  #{k}: #{a.fetch(k, '(absent)').inspect} | #{b.fetch(k, '(absent)').inspect}"
    end
  end

  # Compares every protocol with h1 over the allowed differences; returns the envs.
  def compare_all(**opts)
    envs = PROTOCOLS.keys.to_h { |p| [p, fetch(p, **opts)] }
    base = envs["h1"]
    failures = []
    envs.each do |proto, env|
      tls = PROTOCOLS[proto][1] == :https
      allowed = ["SERVER_PROTOCOL"]
      allowed += %w[rack.url_scheme HTTPS SERVER_PORT] if tls
      d = diff(base.reject { |k, _| allowed.include?(k) }, env.reject { |k, _| allowed.include?(k) })
      failures << "#{proto} vs h1 (h1 | #{proto}):\n#{d.join("\n")}" unless d.empty?
      assert_equal(proto.start_with?("h2") ? "HTTP/2" : "HTTP/1.1", env["SERVER_PROTOCOL"], proto)
      assert_equal(tls ? "https" : "http", env["rack.url_scheme"], proto)
      if tls
        assert_equal "on", env["HTTPS"], "#{proto}: HTTPS"
      else
        assert_nil env["HTTPS"], "#{proto}: HTTPS set on a cleartext request"
      end
    end
    assert failures.empty?, "the Rack env depends on the protocol:\n#{failures.join("\n")}"
    envs
  end

  def test_get_env_is_the_same_over_every_protocol
    envs = compare_all
    h1 = envs["h1"]
    assert_equal "GET", h1["REQUEST_METHOD"]
    assert_equal "/p/a%20th", h1["PATH_INFO"]
    assert_equal "x=1&y=two&x=3", h1["QUERY_STRING"]
    assert_equal TARGET, h1["REQUEST_URI"]
    assert_equal "a=1; b=2", h1["HTTP_COOKIE"], "two Cookie fields are joined with '; '"
    assert_equal "one, two", h1["HTTP_X_MULTI"], "a repeated field is joined with ', '"
    assert_equal "pp.test", h1["HTTP_HOST"]
    assert_equal "pp.test", h1["SERVER_NAME"]
    # Host without a port: SERVER_PORT is the scheme's default port.
    assert_equal "80", h1["SERVER_PORT"]
    assert_equal "80", envs["h2c"]["SERVER_PORT"]
    assert_equal "443", envs["h2_tls"]["SERVER_PORT"]
    assert_equal "443", envs["h1_tls"]["SERVER_PORT"]
  end

  def test_post_env_and_body_are_the_same_over_every_protocol
    envs = compare_all(body: "name=pp&n=42")
    h1 = envs["h1"]
    assert_equal "POST", h1["REQUEST_METHOD"]
    assert_equal "text/x-pp; charset=utf-8", h1["CONTENT_TYPE"]
    assert_equal "12", h1["CONTENT_LENGTH"]
    assert_equal "name=pp&n=42", h1["body"]
    assert_nil h1["HTTP_CONTENT_TYPE"]
    assert_nil h1["HTTP_CONTENT_LENGTH"]
  end

  # With the Host each listener's own address gives (host:port), SERVER_PORT is that port:
  # the TLS port over TLS.
  def test_server_port_follows_the_listener_port_in_host
    PROTOCOLS.each do |proto, (_, scheme)|
      port = scheme == :https ? @srv.https_port : @srv.port
      env = fetch(proto, headers: HEADERS.map { |h| h.start_with?("Host:") ? "Host: 127.0.0.1:#{port}" : h })
      assert_equal port.to_s, env["SERVER_PORT"], "#{proto}: SERVER_PORT"
      assert_equal "127.0.0.1", env["SERVER_NAME"], "#{proto}: SERVER_NAME"
      assert_equal "127.0.0.1:#{port}", env["HTTP_HOST"], "#{proto}: HTTP_HOST"
    end
  end

  # h2c by Upgrade: the upgrading request is an HTTP/1.1 request (RFC 9113 §3.2 leaves its
  # SERVER_PROTOCOL HTTP/1.1) and, as for any HTTP/1.1 request, its Connection / Upgrade /
  # HTTP2-Settings fields reach the env. Nothing else may differ from plain HTTP/1.1.
  def test_h2c_upgrade_env_matches_h1_but_for_the_upgrade_fields
    base = fetch("h1")
    args = ["--http2", "-w", "\n%{http_code} %{http_version}"]
    HEADERS.each { |h| args += ["-H", h] }
    out, err, st = E2E.curl(*args, url(:http))
    assert st.success?, "curl --http2 (Upgrade) failed: #{err}"
    json, _, trailer = out.rpartition("\n")
    assert_equal "200 2", trailer, "the Upgrade to h2c did not happen"
    env = JSON.parse(json)
    upgrade = %w[HTTP_CONNECTION HTTP_UPGRADE HTTP_HTTP2_SETTINGS]
    d = diff(base.reject { |k, _| upgrade.include?(k) }, env.reject { |k, _| upgrade.include?(k) })
    assert d.empty?, "h2c Upgrade vs h1 (h1 | upgrade):\n#{d.join("\n")}"
    assert_equal "h2c", env["HTTP_UPGRADE"]
  end
end
