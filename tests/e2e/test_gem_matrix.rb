# frozen_string_literal: true

# The two columns of the gem matrix hold the versions issue 10 names, and the benchmark
# peers of the RubyGems column run: puma 8 serves the Rack::Lint app (tests/apps/rack/lint.ru)
# on loopback, falcon 0.51 starts. A column that lacks a gem fails here, naming it.
require_relative "helper"

class TestGemMatrix < Minitest::Test
  GEMS = %w[rack rails sinatra puma falcon].freeze
  SCRIPT = "print(%w[#{GEMS.join(' ')}].map { |g| s = Gem.loaded_specs[g] || " \
           "Gem::Specification.find_all_by_name(g).max_by(&:version); \"\#{g}=\#{s&.version}\" }.join(' '))".freeze

  def versions(env, bundler:)
    script = bundler ? "require 'bundler/setup'; #{SCRIPT}" : SCRIPT
    out, status = Open3.capture2e(env.merge("RUBYOPT" => nil), "ruby", "-e", script)
    assert status.success?, out
    out.split.to_h { |kv| kv.split("=", 2) }
  end

  def test_debian_column_versions
    v = versions(E2E.debian_env, bundler: false)
    assert_match(/\A2\.2\./, v["rack"], "Debian's rack (ruby-rack)")
    assert_match(/\A6\.1\./, v["rails"], "Debian's rails (ruby-rails)")
    assert_match(/\A3\./, v["sinatra"], "Debian's sinatra (ruby-sinatra)")
    assert_equal "5.6.5", v["puma"], "Debian's puma (puma)"
  end

  def test_rubygems_column_versions_and_peers
    env = E2E.rubygems_env
    v = versions(env, bundler: true)
    assert_match(/\A3\.2\./, v["rack"])
    assert_match(/\A7\.2\./, v["rails"])
    assert_match(/\A4\./, v["sinatra"])
    assert_match(/\A8\.0\./, v["puma"])
    assert_match(/\A0\.51\./, v["falcon"])

    out, status = Open3.capture2e(env.merge("RUBYOPT" => nil), "bundle", "exec", "falcon", "--version")
    assert status.success?, out
    assert_match(/0\.51\./, out)

    port = E2E.free_port
    log = "/tmp/pp-e2e-puma8-#{Process.pid}.log"
    pid = Process.spawn(env.merge("RUBYOPT" => nil), "bundle", "exec", "puma", "-b", "tcp://127.0.0.1:#{port}", "-t", "2:2",
                        "-e", "production", File.join(E2E::ROOT, "tests/apps/rack/lint.ru"),
                        in: File::NULL, out: log, err: [:child, :out], pgroup: true)
    body = nil
    Timeout.timeout(30) do
      loop do
        out, _, st = E2E.curl("http://127.0.0.1:#{port}/version", timeout: 2)
        if st.success?
          body = out
          break
        end
        sleep 0.1
      end
    end
    assert_match(/\A3\.2\.\d+ codec=/, body, File.read(log))
    assert_match(/Puma version: 8\.0\./, File.read(log))
  ensure
    if pid
      begin
        Process.kill("TERM", -pid)
      rescue Errno::ESRCH
        nil
      end
      Process.wait(pid)
    end
  end
end
