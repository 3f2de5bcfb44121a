# frozen_string_literal: true

# The gem as a new user meets it (issue 10): `gem build gem/puma-plus.gemspec` from the
# repository root, `gem install` into an empty GEM_HOME (which compiles puma-plus-server),
# an app whose Gemfile says `gem "puma-plus"` resolved from local gems only (`bundle install
# --local`: the GEM_HOME just installed, plus Debian's rack 2.2), then `bundle exec puma-plus` in the app's
# folder with no -gem-dir and no --server: it must serve 200s with the server the gem built.
require_relative "helper"

class TestGemInstall < Minitest::Test
  CLEAN = E2E::COLUMN_ENV_KEYS.to_h { |k| [k, nil] }.merge("PUMA_PLUS_SERVER" => nil, "PUMA_PLUS_GEM_DIR" => nil, "RUBYLIB" => nil)

  def run_ok(env, *cmd, chdir: Dir.pwd)
    out, status = Open3.capture2e(env, *cmd, chdir: chdir)
    assert status.success?, "#{cmd.join(' ')} failed (#{status.inspect}):\n#{out}"
    out
  end

  def setup
    @tmp = Dir.mktmpdir("pp-gem-install-")
    # PATH without any puma-plus-server, so finding the gem's own is what is tested.
    @path = ENV.fetch("PATH").split(":").reject { |d| File.executable?(File.join(d, "puma-plus-server")) }.join(":")
  end

  def teardown
    FileUtils.rm_rf(@tmp) if @tmp
  end

  def test_built_gem_installs_compiles_the_server_and_serves_under_bundle_exec
    gem_file = File.join(@tmp, "puma-plus.gem")
    run_ok(CLEAN, "gem", "build", "gem/puma-plus.gemspec", "-o", gem_file, chdir: E2E::ROOT)
    files = IO.popen(["sh", "-c", "tar -xOf #{gem_file} data.tar.gz | tar -tz"], &:read).split("\n")
    %w[ext/puma_plus_server/extconf.rb ext/puma_plus_server/src/server/main.c
       ext/puma_plus_server/src/server/proto/http1.c ext/puma_plus_server/src/control/decide.c
       ext/puma_plus_server/src/server/ops/dashboard.html
       ext/puma_plus/extconf.rb ext/puma_plus/puma_plus_ext.c
       exe/puma-plus lib/puma_plus/cli.rb].each { |f| assert_includes files, f }
    refute files.any? { |f| f.start_with?("test/") || f.include?("/tests/") }, "tests are not shipped: #{files.grep(/test/)}"

    gem_home = File.join(@tmp, "gems")
    env = CLEAN.merge("GEM_HOME" => gem_home, "PATH" => "#{gem_home}/bin:#{@path}")
    run_ok(env, "gem", "install", "--local", "--no-document", gem_file)
    installed = Dir[File.join(gem_home, "gems/puma-plus-*/lib/puma-plus-server")]
    assert_equal 1, installed.size, "gem install put no puma-plus-server in the gem's lib/"
    codec = run_ok(env, "ruby", "-e", 'require "puma_plus"; print PumaPlus::Wire.codec')
    assert_equal "native", codec, "gem install built the C codec (ext/puma_plus) and the gem loads it"

    app = File.join(@tmp, "app")
    FileUtils.mkdir_p(app)
    File.write(File.join(app, "Gemfile"), <<~RUBY)
      source "https://rubygems.org"
      gem "puma-plus"
    RUBY
    File.write(File.join(app, "config.ru"), <<~RUBY)
      run ->(env) { [200, { "content-type" => "text/plain" }, ["hello from \#{env['SERVER_SOFTWARE']}\\n"]] }
    RUBY
    benv = env.merge("BUNDLE_APP_CONFIG" => File.join(@tmp, "bundle-config"), "BUNDLE_USER_HOME" => File.join(@tmp, "bundle-home"))
    run_ok(benv, "bundle", "install", "--local", chdir: app)
    assert_match(/puma-plus \(#{Regexp.escape(gem_version)}\)/, File.read(File.join(app, "Gemfile.lock")))

    srv = E2E::Server.new(workers: 1, env: benv, chdir: app, command: lambda { |port, cport|
      ["bundle", "exec", "puma-plus", "-b", "tcp://127.0.0.1:#{port}", "--control-url", "tcp://127.0.0.1:#{cport}",
       "-w", "1", "-t", "2"]
    })
    exe = File.readlink("/proc/#{srv.pid}/exe")
    assert_equal File.realpath(installed.first), File.realpath(exe), "the server running is the one the gem compiled"
    5.times do
      out, err, = E2E.curl("-w", " %{http_code}", "http://127.0.0.1:#{srv.port}/")
      assert_equal "hello from puma-plus #{gem_version}\n 200", out, err
    end
    # extconf.rb compiled the dashboard page in, byte for byte
    status, page = srv.control_get("/dashboard")
    assert_equal 200, status
    assert_equal File.binread(File.join(E2E::ROOT, "server/ops/dashboard.html")), page.b
  ensure
    srv&.stop
  end

  # The Rails 7.2 app (scripts/gen-rails-app.sh) on the installed .gem instead of the
  # checkout's gem/: its Gemfile says `gem "puma-plus"`, Bundler resolves it from the new
  # GEM_HOME (Rails and the rest from the pinned set in build/gems, through GEM_PATH), and
  # `bundle exec puma-plus` with no flag at all reads config/puma-plus.rb (port from PORT),
  # forks two workers and serves the scaffold's pages and JSON.
  def test_installed_gem_runs_the_rails_7_2_app_with_no_flags
    column = E2E.rubygems_env.merge("RUBYOPT" => nil, "BUNDLE_FROZEN" => nil)
    out, status = Open3.capture2e(column.merge("GEM_HOME" => nil), "bash",
                                  File.join(E2E::ROOT, "scripts/gen-rails-app.sh"), "7.2")
    assert status.success?, "scripts/gen-rails-app.sh 7.2 failed:\n#{out}"
    gem_file = File.join(@tmp, "puma-plus.gem")
    run_ok(CLEAN, "gem", "build", "gem/puma-plus.gemspec", "-o", gem_file, chdir: E2E::ROOT)
    gem_home = File.join(@tmp, "gems")
    run_ok(CLEAN.merge("GEM_HOME" => gem_home, "PATH" => "#{gem_home}/bin:#{@path}"),
           "gem", "install", "--local", "--no-document", gem_file)

    app = File.join(@tmp, "rails")
    FileUtils.cp_r(File.join(E2E::ROOT, "build/apps/rails-7.2"), app)
    gemfile = File.read(File.join(app, "Gemfile"))
    assert_match(/^gem "puma-plus", path: /, gemfile)
    File.write(File.join(app, "Gemfile"), gemfile.sub(/^gem "puma-plus", path: .*$/, 'gem "puma-plus"'))
    FileUtils.rm_f(File.join(app, "Gemfile.lock"))
    env = CLEAN.merge(
      # the pinned set reuses what Debian already has (websocket-extensions 0.1.5): its dirs too
      "GEM_HOME" => gem_home, "GEM_PATH" => [gem_home, E2E::GEM_HOME, *Gem.default_path].join(":"),
      "PATH" => "#{gem_home}/bin:#{@path}", "BUNDLE_GEMFILE" => File.join(app, "Gemfile"),
      "BUNDLE_APP_CONFIG" => File.join(@tmp, "bundle-config"), "BUNDLE_USER_HOME" => File.join(@tmp, "bundle-home"),
      "SECRET_KEY_BASE" => "pp-e2e-#{'k' * 64}", "RAILS_LOG_TO_STDOUT" => "1", "RAILS_ENV" => "production",
      "WEB_CONCURRENCY" => nil, "RAILS_MAX_THREADS" => nil
    )
    run_ok(env, "bundle", "install", "--local", chdir: app)
    lock = File.read(File.join(app, "Gemfile.lock"))
    assert_match(/^    puma-plus \(#{Regexp.escape(gem_version)}\)$/, lock)
    refute_match(/^PATH$/, lock, "puma-plus comes from the installed gem, not a path")

    srv = E2E::Server.new(workers: 2, env: env, chdir: app, boot_timeout: 90, command: lambda { |port, cport|
      env["PORT"] = port.to_s
      env["PP_CONTROL_PORT"] = cport.to_s
      %w[bundle exec puma-plus]
    })
    installed = Dir[File.join(gem_home, "gems/puma-plus-*/lib/puma-plus-server")]
    assert_equal File.realpath(installed.first), File.realpath(File.readlink("/proc/#{srv.pid}/exe")),
                 "the server running is the one the installed gem compiled"
    pids = []
    20.times do
      out, err, = E2E.curl("-D", "-", "http://127.0.0.1:#{srv.port}/posts.json")
      assert_match(%r{\AHTTP/1\.1 200}, out, err)
      assert_match(/^\[\]\s*\z/, out.split("\r\n\r\n", 2)[1].to_s, "the scaffold's JSON index of an empty table")
      pids << out[/^x-pp-worker-pid: (\d+)/i, 1]
    end
    out, = E2E.curl("http://127.0.0.1:#{srv.port}/posts")
    assert_match(%r{<h1>Posts</h1>}, out)
    assert_equal 2, srv.stats["booted_workers"]
    assert_equal 0, srv.stop&.exitstatus
  ensure
    srv&.stop
  end

  # A missing library stops the install with the Debian package that provides it.
  def test_missing_library_names_the_debian_package
    ext = File.join(E2E::ROOT, "gem/ext/puma_plus_server")
    dir = File.join(@tmp, "ext")
    FileUtils.mkdir_p(dir)
    FileUtils.cp(File.join(ext, "extconf.rb"), dir)
    FileUtils.mkdir_p(File.join(dir, "src"))
    %w[server control].each { |d| FileUtils.cp_r(File.join(E2E::ROOT, d), File.join(dir, "src", d)) }
    out, status = Open3.capture2e(CLEAN.merge("PKG_CONFIG_LIBDIR" => File.join(@tmp, "no-pc"), "PKG_CONFIG_PATH" => nil),
                                  "ruby", "extconf.rb", chdir: dir)
    refute status.success?, out
    assert_match(/libuv \(install the Debian package libuv1-dev\)/, out)
    assert_match(/jansson \(install the Debian package libjansson-dev\)/, out)
  end

  def gem_version
    File.read(File.join(E2E::ROOT, "gem/lib/puma_plus.rb"))[/VERSION = "([^"]+)"/, 1]
  end
end
