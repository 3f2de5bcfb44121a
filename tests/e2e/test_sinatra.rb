# frozen_string_literal: true

# Sinatra under the real server, both columns of the gem matrix (issue 10): Debian's Sinatra 3
# (rack 2.2) and the pinned Sinatra 4 (rack 3.2), each as a classic and as a modular app
# (tests/apps/sinatra/): route and query params, form posts, cookie sessions across requests
# (and across worker processes: the cookie is the session), `stream`, and a multipart upload
# over 1 MiB (the server spools such bodies and the worker reads them from a file).
require_relative "helper"
require "digest"

class TestSinatra < Minitest::Test
  APPS = File.join(E2E::ROOT, "tests/apps/sinatra")

  def test_sinatra_3_classic_debian = check(E2E.debian_env, "classic", "3.")
  def test_sinatra_3_modular_debian = check(E2E.debian_env, "modular", "3.")
  def test_sinatra_4_classic_rubygems = check(E2E.rubygems_env, "classic", "4.")
  def test_sinatra_4_modular_rubygems = check(E2E.rubygems_env, "modular", "4.")

  def curl(*args)
    out, err, status = E2E.curl("-w", "\n%{http_code}", *args)
    body, _, code = out.rpartition("\n")
    [code.to_i, body, err, status]
  end

  def check(env, style, major)
    srv = E2E::Server.new(app: File.join(APPS, "#{style}.ru"), workers: 2, threads: 2, env: env)
    base = "http://127.0.0.1:#{srv.port}"
    code, body, err = curl("#{base}/version")
    assert_equal 200, code, err + srv.log[-2000..].to_s
    assert body.start_with?("sinatra #{major}"), body
    assert_includes body, style == "classic" ? "Sinatra::Application" : "ModularApp"

    assert_equal [200, "hello ann q=two words list=1,2\n"],
                 curl("#{base}/hello/ann?q=two+words&list[]=1&list[]=2")[0, 2]
    assert_equal [200, "form a=x y b=&\n"], curl("-d", "a=x+y&b=%26", "#{base}/form")[0, 2]
    assert_equal [200, "classic /classic\n"], curl("#{base}/classic")[0, 2] if style == "classic"

    jar = File.join(Dir.tmpdir, "pp-sinatra-#{Process.pid}-#{style}.jar")
    File.delete(jar) if File.exist?(jar)
    counts = Array.new(6) { curl("-b", jar, "-c", jar, "#{base}/count")[0, 2] }
    assert_equal (1..6).map { |i| [200, "count #{i}\n"] }, counts, "a cookie session counts across requests and workers"
    assert_equal [200, "count 1\n"], curl("#{base}/count")[0, 2], "no cookie, a new session"

    # stream: the parts arrive as they are made (chunked), not all at the end
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    firsts = []
    IO.popen(["curl", "-sN", "--max-time", "10", "#{base}/stream"]) do |io|
      while (line = io.gets)
        firsts << [line, Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0]
      end
    end
    assert_equal ["tick 0\n", "tick 1\n", "tick 2\n"], firsts.map(&:first)
    assert_operator firsts[2][1] - firsts[0][1], :>=, 0.08, "the ticks are 50 ms apart on the wire"

    big = File.join(Dir.tmpdir, "pp-sinatra-upload-#{Process.pid}.bin")
    data = Random.new(42).bytes(3 * 1024 * 1024 + 17)
    File.binwrite(big, data)
    code, body, err = curl("-F", "note=hi there", "-F", "file=@#{big};filename=big.bin", "#{base}/upload")
    assert_equal [200, "big.bin #{data.bytesize} #{Digest::SHA256.hexdigest(data)} note=hi there\n"], [code, body],
                 err + srv.log[-2000..].to_s
    assert_equal 0, srv.stats["requests"]["status_5xx"]
    assert_equal 0, srv.stop&.exitstatus
  ensure
    srv&.stop
    File.delete(big) if big && File.exist?(big)
    File.delete(jar) if jar && File.exist?(jar)
  end
end
