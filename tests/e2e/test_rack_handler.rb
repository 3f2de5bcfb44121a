# frozen_string_literal: true

# The Rack handler (issue 26; docs/CONFIG.md "Rack handler"): `rails server -u puma_plus`
# on Rails 7.2 (rackup 2) and on Debian's Rails 6.1 (Rack 2) and
# `rackup -s puma_plus` (rackup 2 on Rack 3, and Debian's rackup on Rack 2) run the app under
# puma-plus with their port, host and environment options, serve 200s, and are stopped by PID
# (the handler execs the server: the pid the test started is the server's).
require_relative "helper"
require "net/http"

class TestRackHandler < Minitest::Test
  RACK_APP = <<~RU
    run lambda { |env|
      body = "#{'#{env["SERVER_SOFTWARE"]}'} env=#{'#{ENV["RACK_ENV"]}'} pid=#{'#{Process.pid}'}\\n"
      [200, { "content-type" => "text/plain" }, [body]]
    }
  RU
  # The handler leaves config/puma-plus.rb in force (workers, hooks, control app).
  CONFIG = <<~RB
    workers 2
    threads 2, 2
    activate_control_app "tcp://127.0.0.1:\#{ENV.fetch('PP_CONTROL_PORT')}"
  RB

  def teardown
    @srv&.stop
    FileUtils.rm_rf(@tmp) if @tmp
  end

  def get(host, path)
    Net::HTTP.start(host, @srv.port, open_timeout: 10, read_timeout: 30) { |h| h.get(path) }
  end

  # The environment of a worker as the server started it (its RACK_ENV, read from /proc).
  def worker_env(pid)
    File.binread("/proc/#{pid}/environ").split("\0").to_h { |kv| kv.split("=", 2) }
  end

  # The handler execs the server: the process the test started is puma-plus-server now.
  def assert_server_pid
    cmd = File.binread("/proc/#{@srv.pid}/cmdline").split("\0")
    assert_equal File.expand_path(E2E::BIN), cmd.first, cmd.inspect
  end

  def rack_app_dir
    @tmp = Dir.mktmpdir("pp-rack-handler-")
    File.write(File.join(@tmp, "config.ru"), RACK_APP)
    FileUtils.mkdir_p(File.join(@tmp, "config"))
    File.write(File.join(@tmp, "config/puma-plus.rb"), CONFIG)
    @tmp
  end

  # `rackup -s puma_plus -o 127.0.0.2 -p PORT -E deployment`: answers on 127.0.0.2 only, in
  # the deployment environment, from two workers (config/puma-plus.rb).
  def check_rackup(env, rackup)
    dir = rack_app_dir
    env = env.merge("RUBYLIB" => File.join(E2E::ROOT, "gem/lib"), "PUMA_PLUS_SERVER" => File.expand_path(E2E::BIN))
    @srv = E2E::Server.new(workers: 2, env: env, chdir: dir, command: lambda { |port, cport|
      env["PP_CONTROL_PORT"] = cport.to_s
      [*rackup, "-s", "puma_plus", "-o", "127.0.0.2", "-p", port.to_s, "-E", "deployment", "config.ru"]
    })
    res = get("127.0.0.2", "/")
    assert_equal "200", res.code, @srv.log[-3000..]
    assert_match(/\Apuma-plus \d+\.\d+\.\d+ env=deployment pid=\d+\n\z/, res.body)
    assert_equal "deployment", worker_env(res.body[/pid=(\d+)/, 1])["RACK_ENV"]
    assert_raises(Errno::ECONNREFUSED) { TCPSocket.new("127.0.0.1", @srv.port).close }
    assert_match(/exec puma-plus --bind tcp:\/\/127\.0\.0\.2:#{@srv.port} --environment deployment /, @srv.log)
    st = @srv.stats
    assert_equal 2, st["booted_workers"]
    assert_server_pid
    assert_equal 0, @srv.stop&.exitstatus, @srv.log[-2000..]
  end

  def test_rackup_2_rack_3
    check_rackup(E2E.rubygems_env, ["ruby", "-S", "rackup"])
  end

  def test_rackup_debian_rack_2
    check_rackup(E2E.debian_env, ["/usr/bin/rackup"])
  end

  def rails_app(version, column_env)
    out, status = Open3.capture2e(column_env.merge("GEM_HOME" => nil), "bash",
                                  File.join(E2E::ROOT, "scripts/gen-rails-app.sh"), version)
    assert status.success?, "scripts/gen-rails-app.sh #{version} failed:\n#{out}"
    @tmp = Dir.mktmpdir("pp-rails-handler-#{version}-")
    app = File.join(@tmp, "app")
    FileUtils.cp_r(File.join(E2E::ROOT, "build/apps/rails-#{version}"), app)
    env = column_env.merge(
      "BUNDLE_GEMFILE" => nil, "RUBYOPT" => nil, "BUNDLE_FROZEN" => nil, "PORT" => nil,
      "PUMA_PLUS_SERVER" => File.expand_path(E2E::BIN), "SECRET_KEY_BASE" => "pp-e2e-#{'k' * 64}",
      "RAILS_ENV" => nil, "RACK_ENV" => nil, "WEB_CONCURRENCY" => nil, "RAILS_MAX_THREADS" => nil
    )
    [app, env]
  end

  # bin/rails server with the handler's name, -p, -b and -e production: the production
  # database answers (development's is not migrated), both workers of config/puma-plus.rb run,
  # and -p / -b replace the file's bind.
  def check_rails(version, column_env, using)
    app, env = rails_app(version, column_env)
    @srv = E2E::Server.new(workers: 2, env: env, chdir: app, boot_timeout: 90, command: lambda { |port, cport|
      env["PP_CONTROL_PORT"] = cport.to_s
      ["bin/rails", "server", *using, "-p", port.to_s, "-b", "127.0.0.1", "-e", "production"]
    })
    res = get("127.0.0.1", "/posts.json")
    assert_equal "200", res.code, @srv.log[-3000..]
    assert_equal version, res["x-pp-rails"][/\A\d+\.\d+/]
    assert_equal [], JSON.parse(res.body)
    assert_equal "production", worker_env(res["x-pp-worker-pid"])["RACK_ENV"]
    assert_equal "200", get("127.0.0.1", "/posts").code
    log = @srv.log
    assert_match(/Booting PumaPlus/, log)
    assert_match(/exec puma-plus --bind tcp:\/\/127\.0\.0\.1:#{@srv.port} --environment production/, log)
    assert_equal 2, @srv.stats["booted_workers"]
    assert_server_pid
    assert_equal 0, @srv.stats["requests"]["status_5xx"], log[-3000..]
    assert_equal 0, @srv.stop&.exitstatus, @srv.log[-2000..]
  end

  def test_rails_7_2_server_u_puma_plus
    check_rails("7.2", E2E.rubygems_env, %w[-u puma_plus])
  end

  # Rails 6.1 takes the server with -u only (its positional form was removed in 6.1).
  def test_rails_6_1_server_u_puma_plus
    check_rails("6.1", E2E.debian_env.merge("GEM_HOME" => File.join(E2E::ROOT, "build/apps/debian-gems")),
                %w[-u puma_plus])
  end

  # PumaPlus::RackHandler.argv: what rackup's and Rails' options become.
  def test_argv_from_options
    $LOAD_PATH.unshift(File.join(E2E::ROOT, "gem/lib"))
    require "puma_plus/rack_handler"
    ru = File.join(rack_app_dir, "config.ru")
    argv = PumaPlus::RackHandler.argv(config: ru, Host: "::1", Port: 9000, environment: "staging",
                                      Threads: "2:8", pid: "tmp/p.pid")
    assert_equal ["--bind", "tcp://[::1]:9000", "--environment", "staging", "--threads", "2:8",
                  "--pidfile", File.expand_path("tmp/p.pid"), ru], argv
    # Rails: a default port (not user-supplied) yields to the config file's binds.
    argv = PumaPlus::RackHandler.argv(config: ru, Host: "localhost", Port: 3000, user_supplied_options: [:environment])
    assert_equal ["--default-bind", "tcp://localhost:3000", ru], argv
    assert_equal ["--bind", "unix:///tmp/x.sock", ru], PumaPlus::RackHandler.argv(config: ru, Host: "/tmp/x.sock", Port: 1)
    err = assert_raises(ArgumentError) { PumaPlus::RackHandler.argv(config: nil, Port: 1) }
    assert_match(/runs a rackup file/, err.message)
  end
end
