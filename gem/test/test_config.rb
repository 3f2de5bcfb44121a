# frozen_string_literal: true

require_relative "test_helper"
require "puma_plus/cli"
require "tmpdir"

# config/puma-plus.rb (puma's DSL names) and the puma-plus CLI's --dry-run resolution.
class TestConfig < Minitest::Test
  def with_config(text)
    Dir.mktmpdir("pp-config") do |dir|
      Dir.mkdir(File.join(dir, "config"))
      File.write(File.join(dir, "config/puma-plus.rb"), text)
      Dir.chdir(dir) { yield dir }
    end
  end

  def cli(*argv, env: {})
    out = StringIO.new
    err = StringIO.new
    status = PumaPlus::CLI.new(argv, env: { "PATH" => "/nonexistent" }.merge(env), out: out, err: err).run
    [status, out.string, err.string]
  end

  def test_puma_directives_map_to_server_flags
    with_config(<<~RUBY) do |dir|
      port 8080
      bind "unix:///tmp/x.sock"
      threads 2, 8
      workers 3
      environment "production"
      autoscale min: 1, max: 6, target_queue_p95: "50ms"
      activate_control_app "tcp://127.0.0.1:9393", auth_token: "t0k"
      before_fork { }
      on_worker_boot { |i| }
    RUBY
      status, out, = cli("--dry-run", "--server", "/opt/pps")
      assert_equal 0, status
      exec_line = out[/^exec: (.*)$/, 1]
      assert_equal "/opt/pps -app config.ru -workers 3 -threads 8 -listen 0.0.0.0:8080 -listen unix:/tmp/x.sock " \
                   "-control 127.0.0.1:9393 -control-token t0k -autoscale -min-workers 1 -max-workers 6 " \
                   "-target-queue-p95 50ms -gem-dir #{PumaPlus::CLI::GEM_DIR}", exec_line
      assert_match(/^env: RACK_ENV=production PUMA_PLUS_CONFIG=#{Regexp.escape(File.realpath(dir))}\/config\/puma-plus.rb$/, out)
      assert_match(/hooks: before_fork ×1, on_worker_boot ×1/, out)
      assert_match(/note: .*puma-plus.rb:3: threads: puma-plus runs exactly max \(8\)/, out)
    end
  end

  def test_flags_override_the_file_and_pass_through
    with_config("workers 3\nthreads 1, 2\n") do
      _, out, = cli("--dry-run", "--server", "s", "-w", "5", "-t", "4:6", "-b", "tcp://[::1]:9000",
                    "-e", "staging", "--control-url", "off", "app.ru", "--", "-quiet")
      assert_equal ["s", "-app", "app.ru", "-workers", "5", "-threads", "6", "-listen", "[::1]:9000", "-control", "off",
                    "-gem-dir", PumaPlus::CLI::GEM_DIR, "-quiet"], Shellwords.split(out[/^exec: (.*)$/, 1])
      assert_match(/RACK_ENV=staging/, out)
    end
  end

  def test_unsupported_directives_are_reported_with_their_line
    with_config("workers 2\nworker_timeout 60\nplugin :tmp_restart\n") do
      status, out, = cli("--dry-run", "--server", "s")
      assert_equal 0, status
      assert_match(%r{unsupported: config/puma-plus.rb:2: worker_timeout: no puma-plus equivalent}, out)
      assert_match(%r{unsupported: config/puma-plus.rb:3: plugin:}, out)
    end
  end

  def test_bad_values_name_file_and_line
    with_config("workers 2\nthreads 9, 3\n") do
      status, _, err = cli("--dry-run")
      assert_equal 2, status
      assert_match(%r{config/puma-plus.rb:2: threads: min 9 > max 3}, err)
    end
    with_config("workers \"many\"\n") do
      _, _, err = cli("--dry-run")
      assert_match(%r{config/puma-plus.rb:1: ArgumentError: invalid value for Integer\(\): "many"}, err)
    end
    with_config("workers 2 +\n") do
      _, _, err = cli("--dry-run")
      assert_match(/puma-plus.rb.*syntax error/m, err)
    end
    with_config("autoscale min: 1, max: 2, target_queue_p95: \"soon\"\n") do
      _, _, err = cli("--dry-run")
      assert_match(/puma-plus.rb:1: target_queue_p95: "soon" is not a duration/, err)
    end
    with_config("bind \"ssl://0.0.0.0:443\"\n") do
      _, _, err = cli("--dry-run")
      assert_match(/puma-plus.rb:1: bind: unsupported URL/, err)
    end
  end

  def test_missing_explicit_config_and_bad_flags
    Dir.mktmpdir do |dir|
      Dir.chdir(dir) do
        status, _, err = cli("-C", "nope.rb", "--dry-run")
        assert_equal 2, status
        assert_match(/nope.rb: No such file/, err)
        status, out, = cli("--dry-run", "--server", "s")
        assert_equal 0, status, "no config file is fine: defaults"
        assert_match(/^exec: s -app config.ru -workers 1 -threads 5 -gem-dir /, out)
        assert_equal 2, cli("-t", "x", "--dry-run")[0]
        assert_equal 2, cli("-b", "ssl://0.0.0.0:1", "--dry-run")[0]
        assert_equal 2, cli("--bogus")[0]
      end
    end
  end

  def test_without_dry_run_problems_go_to_stderr_and_the_server_is_execed
    with_config("threads 1, 4\nworker_timeout 9\n") do
      status, out, err = cli("--server", "/nonexistent/puma-plus-server")
      assert_equal 127, status, "exec of a missing server fails cleanly"
      assert_equal "", out
      assert_match(/note: .*threads: puma-plus runs exactly max/, err)
      assert_match(/unsupported: .*:2: worker_timeout/, err)
      assert_match(%r{cannot run /nonexistent/puma-plus-server}, err)
    end
  end

  def test_durations
    {
      "50ms" => 50, "0.25s" => 250, 75 => 75, 0.1 => 100
    }.each do |given, ms|
      c = PumaPlus::Config.new
      PumaPlus::Config::Dsl.new(c, "x.rb").autoscale(min: 1, max: 2, target_queue_p95: given)
      assert_equal ms, c.settings[:autoscale_target_queue_p95_ms], given.inspect
    end
  end
end
