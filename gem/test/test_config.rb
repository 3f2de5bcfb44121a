# frozen_string_literal: true

require "socket"
require_relative "test_helper"
require "puma_plus/cli"
require "tmpdir"
require "open3"
require "fileutils"

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
      assert_equal "/opt/pps -app config.ru -workers 3 -threads 8 -min-threads 2 -listen 0.0.0.0:8080 -listen unix:/tmp/x.sock " \
                   "-control 127.0.0.1:9393 -control-token t0k -autoscale -min-workers 1 -max-workers 6 " \
                   "-target-queue-p95 50ms -gem-dir #{PumaPlus::CLI::GEM_DIR}", exec_line
      assert_match(/^env: RACK_ENV=production PUMA_PLUS_CONFIG=#{Regexp.escape(File.realpath(dir))}\/config\/puma-plus.rb$/, out)
      assert_match(/hooks: before_fork ×1, before_worker_boot ×1/, out)
      assert_match(/note: .*puma-plus.rb:3: threads: a worker starts with max \(8\) threads; min 2 is the floor/, out)
    end
  end

  def test_flags_override_the_file_and_pass_through
    with_config("workers 3\nthreads 1, 2\n") do
      _, out, = cli("--dry-run", "--server", "s", "-w", "5", "-t", "4:6", "-b", "tcp://[::1]:9000",
                    "-e", "staging", "--control-url", "off", "app.ru", "--", "-quiet")
      assert_equal ["s", "-app", "app.ru", "-workers", "5", "-threads", "6", "-min-threads", "4", "-listen", "[::1]:9000", "-control", "off",
                    "-gem-dir", PumaPlus::CLI::GEM_DIR, "-quiet"], Shellwords.split(out[/^exec: (.*)$/, 1])
      assert_match(/RACK_ENV=staging/, out)
    end
  end

  def test_pidfile_state_path_and_activated_sockets
    with_config(<<~RUBY) do
      pidfile "tmp/pids/server.pid"
      state_path "tmp/pids/server.state"
      bind_to_activated_sockets "only"
      port 9000
    RUBY
      _, out, = cli("--dry-run", "--server", "s")
      words = Shellwords.split(out[/^exec: (.*)$/, 1])
      assert_equal ["-pidfile", "tmp/pids/server.pid"], words[words.index("-pidfile"), 2]
      assert_equal ["-state-path", "tmp/pids/server.state"], words[words.index("-state-path"), 2]
      refute_match(/unsupported: .*(pidfile|state_path|bind_to_activated_sockets)/, out)
      # Without LISTEN_FDS for this process the file's binds stay.
      assert_equal ["-listen", "0.0.0.0:9000"], words[words.index("-listen"), 2]
      _, out, = cli("--dry-run", "--server", "s", "--pidfile", "/run/a.pid", "-S", "/run/a.state")
      words = Shellwords.split(out[/^exec: (.*)$/, 1])
      assert_equal ["-pidfile", "/run/a.pid"], words[words.index("-pidfile"), 2]
      assert_equal ["-state-path", "/run/a.state"], words[words.index("-state-path"), 2]
      # LISTEN_FDS meant for another process (our parent) is ignored too.
      _, out, = cli("--dry-run", "--server", "s", env: { "LISTEN_FDS" => "1", "LISTEN_PID" => (Process.pid + 1).to_s })
      assert_includes out, "-listen 0.0.0.0:9000"
    end
  end

  def test_ctl_usage_errors_and_phased_restart
    status, _, err = cli("ctl")
    assert_equal 2, status
    assert_match(/expected one verb/, err)
    status, _, err = cli("ctl", "reboot")
    assert_equal 2, status
    assert_match(/unknown verb "reboot"/, err)
    # phased-restart is a verb like the others: with nothing listening, "not running".
    free = TCPServer.new("127.0.0.1", 0)
    port = free.addr[1]
    free.close
    status, _, err = cli("ctl", "--control-url", "127.0.0.1:#{port}", "phased-restart")
    assert_equal 1, status
    assert_match(/no server at 127\.0\.0\.1:#{port} .*puma-plus is not running/, err)
    status, _, err = cli("ctl", "-S", "/nonexistent/state", "stats")
    assert_equal 1, status
    assert_match(%r{state file /nonexistent/state: .*is the server running}, err)
    status, _, err = cli("ctl", "--control-url", "gopher://x", "stats")
    assert_equal 1, status
    assert_match(/expected tcp:/, err)
  end

  def test_unsupported_directives_are_reported_with_their_line
    with_config("workers 2\nidle_timeout 60\nplugin :tmp_restart\n") do
      status, out, = cli("--dry-run", "--server", "s")
      assert_equal 0, status
      assert_match(%r{unsupported: config/puma-plus.rb:2: idle_timeout: not applied: the server does not exit when idle}, out)
      assert_match(%r{unsupported: config/puma-plus.rb:3: plugin:}, out)
    end
  end

  # Issue 26's directives: tag, max_keep_alive, worker_boot_timeout become flags / the
  # environment; lowlevel_error_handler and out_of_band are kept for the workers.
  def test_operator_directives
    handler = nil
    with_config("tag 'shop'\nmax_keep_alive 50\nworker_boot_timeout 7\n" \
                "lowlevel_error_handler { |e, env, status| [503, {}, [e.message]] }\nout_of_band { :gc }\n") do
      status, out, = cli("--dry-run", "--server", "s")
      assert_equal 0, status, out
      assert_match(/ -worker-boot-timeout 7s -max-keep-alive 50 /, out)
      assert_match(/PUMA_PLUS_TAG=shop/, out)
      refute_match(/unsupported:/, out)
      config = PumaPlus::Config.load("config/puma-plus.rb")
      handler = config.lowlevel_error_handler
      assert_equal 1, config.hooks[:out_of_band].size
    end
    assert_equal 3, handler.arity
    with_config("max_keep_alive 0\n") { assert_equal 2, cli("--dry-run", "--server", "s")[0] }
    with_config("lowlevel_error_handler\n") { assert_equal 2, cli("--dry-run", "--server", "s")[0] }
  end

  # AppHooks: the handler is called by its arity; a bad answer or a raise means the plain 500.
  def test_app_hooks_lowlevel_response_and_out_of_band
    require "puma_plus/app_hooks"
    log = StringIO.new
    config = PumaPlus::Config.new(env: {})
    seen = []
    config.lowlevel_error_handler = ->(e, env, status) { seen << [e.message, env["X"], status]; [502, { "a" => "b" }, ["x"]] }
    PumaPlus::AppHooks.install(config, log: log)
    assert_nil PumaPlus::AppHooks.out_of_band
    assert_equal [502, { "a" => "b" }, ["x"]], PumaPlus::AppHooks.lowlevel_response(RuntimeError.new("boom"), { "X" => 1 })
    assert_equal [["boom", 1, 500]], seen
    config.lowlevel_error_handler = ->(e) { [500, {}, [e.class.name]] }
    PumaPlus::AppHooks.install(config, log: log)
    assert_equal [500, {}, ["RuntimeError"]], PumaPlus::AppHooks.lowlevel_response(RuntimeError.new, {})
    config.lowlevel_error_handler = ->(_e, _env) { :nope }
    PumaPlus::AppHooks.install(config, log: log)
    assert_nil PumaPlus::AppHooks.lowlevel_response(RuntimeError.new, {})
    config.lowlevel_error_handler = ->(_e, _env) { raise "inner" }
    PumaPlus::AppHooks.install(config, log: log)
    assert_nil PumaPlus::AppHooks.lowlevel_response(RuntimeError.new, {})
    assert_match(/returned :nope.*\n.*raised RuntimeError: inner/, log.string)

    runs = []
    config.hooks[:out_of_band] << -> { runs << :oob }
    PumaPlus::AppHooks.install(config, log: log)
    oob = PumaPlus::AppHooks.out_of_band
    oob.enter
    oob.enter
    oob.leave
    assert_empty runs, "another request still runs: no out-of-band yet"
    oob.leave
    assert_equal [:oob], runs
    # A request that starts while the hooks run waits for them.
    gate = Queue.new
    config.hooks[:out_of_band].replace([-> { gate.pop }])
    PumaPlus::AppHooks.install(config, log: log)
    oob = PumaPlus::AppHooks.out_of_band
    oob.enter
    t = Thread.new { oob.leave }
    sleep 0.05 until oob.instance_variable_get(:@running)
    entered = false
    t2 = Thread.new { oob.enter; entered = true }
    sleep 0.1
    refute entered, "a request waits while out_of_band runs"
    gate << 1
    t.join
    t2.join
    assert entered
    assert_equal 1, oob.runs
  ensure
    PumaPlus::AppHooks.reset
  end

  # worker_timeout (puma's directive) and request_timeout (puma-plus's) become server flags.
  def test_request_timeout_and_worker_timeout_become_flags
    with_config("worker_timeout 20\nrequest_timeout 1.5, kill_grace: \"250ms\"\n") do
      status, out, = cli("--dry-run", "--server", "s")
      assert_equal 0, status
      assert_match(/ -request-timeout 1500ms -worker-kill-grace 250ms -worker-timeout 20s /, out)
      refute_match(/unsupported/, out)
    end
    with_config("request_timeout \"2s\"\n") do
      _, out, = cli("--dry-run", "--server", "s")
      assert_match(/ -request-timeout 2000ms -gem-dir /, out)
    end
    with_config("request_timeout 0\n") do
      _, out, = cli("--dry-run", "--server", "s")
      refute_match(/-request-timeout/, out)
    end
    with_config("request_timeout \"soon\"\n") do
      status, _, err = cli("--dry-run")
      assert_equal 2, status
      assert_match(%r{config/puma-plus.rb:1: request_timeout: "soon" is not a duration}, err)
    end
    with_config("worker_timeout 0\n") do
      status, _, err = cli("--dry-run")
      assert_equal 2, status
      assert_match(/worker_timeout: must be at least 1 second/, err)
    end
  end

  # action_cable :frontend (docs/CONFIG.md): a setting the shepherd reads (it sets
  # PUMA_PLUS_ACTION_CABLE before loading PumaPlus::ActionCable); anything else is refused.
  def test_action_cable_setting
    with_config("action_cable :frontend\n") do
      assert_equal :frontend, PumaPlus::Config.load("config/puma-plus.rb").settings[:action_cable]
      status, = cli("--dry-run")
      assert_equal 0, status
    end
    with_config("action_cable \"hijack\"\n") do
      assert_equal :hijack, PumaPlus::Config.load("config/puma-plus.rb").settings[:action_cable]
    end
    with_config("workers 1\naction_cable :sockets\n") do
      status, _, err = cli("--dry-run")
      assert_equal 2, status
      assert_match(%r{config/puma-plus.rb:2: action_cable: :frontend or :hijack, not :sockets}, err)
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
      assert_match(%r{config/puma-plus.rb:1: workers: "many" is not an Integer or auto}, err)
    end
    with_config("workers 2 +\n") do
      _, _, err = cli("--dry-run")
      assert_match(/puma-plus.rb.*syntax error/m, err)
    end
    with_config("autoscale min: 1, max: 2, target_queue_p95: \"soon\"\n") do
      _, _, err = cli("--dry-run")
      assert_match(/puma-plus.rb:1: target_queue_p95: "soon" is not a duration/, err)
    end
    with_config("autoscale min: 1, max: 2, standby: 65\n") do
      _, _, err = cli("--dry-run")
      assert_match(/puma-plus.rb:1: autoscale: standby 65 must be 0..64/, err)
    end
    with_config("autoscale min: 1, max: 3, standby: 2\n") do
      status, out, = cli("--dry-run", "--server", "/opt/pps")
      assert_equal 0, status
      assert_match(/^exec: .* -autoscale -min-workers 1 -max-workers 3 -standby 2 -gem-dir /, out)
    end
    with_config("bind \"http://0.0.0.0:443\"\n") do
      _, _, err = cli("--dry-run")
      assert_match(/puma-plus.rb:1: bind: unsupported URL/, err)
    end
  end

  def test_tls_binds_map_to_listen_tls
    with_config(<<~RUBY) do |dir|
      bind "tcp://127.0.0.1:9292"
      bind "ssl://127.0.0.1:9443?cert=config/cert.pem&key=config/key.pem"
      ssl_bind "::1", 9444, cert: "config/cert.pem", key: "config/key.pem", verify_mode: "none"
    RUBY
      status, out, err = cli("--dry-run", "--server", "s")
      assert_equal 0, status, err
      cert = File.join(File.realpath(dir), "config/cert.pem")
      key = File.join(File.realpath(dir), "config/key.pem")
      assert_includes out, "-listen 127.0.0.1:9292"
      assert_includes out, "-listen-tls 127.0.0.1:9443"
      assert_match(/-listen-tls \\?\[::1\\?\]:9444/, out) # shell-escaped in the dry run
      assert_includes out, "-tls-cert #{cert} -tls-key #{key}"
    end
    with_config("bind \"ssl://127.0.0.1:9443\"\n") do
      status, out, = cli("--dry-run", "--server", "s")
      assert_equal 0, status
      assert_includes out, "-listen-tls 127.0.0.1:9443"
      refute_includes out, "-tls-cert", "no pair: the server's development certificate"
    end
    with_config("ssl_bind \"0.0.0.0\", 1, cert: \"a.pem\", key: \"a.key\"\n" \
                "ssl_bind \"0.0.0.0\", 2, cert: \"b.pem\", key: \"b.key\"\n") do
      status, _, err = cli("--dry-run", "--server", "s")
      assert_equal 2, status
      assert_match(/same cert and key/, err)
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
        assert_equal 2, cli("-b", "ssl://0.0.0.0:1?verify_mode=peer", "--dry-run")[0]
        assert_equal 2, cli("-b", "ssl://0.0.0.0:1?cert=a.pem", "--dry-run")[0]
        assert_equal 2, cli("--bogus")[0]
      end
    end
  end

  def test_without_dry_run_problems_go_to_stderr_and_the_server_is_execed
    with_config("threads 1, 4\nidle_timeout 9\n") do
      status, out, err = cli("--server", "/nonexistent/puma-plus-server")
      assert_equal 127, status, "exec of a missing server fails cleanly"
      assert_equal "", out
      assert_match(/note: .*threads: a worker starts with max \(4\) threads/, err)
      assert_match(/unsupported: .*:2: idle_timeout/, err)
      assert_match(%r{cannot run /nonexistent/puma-plus-server}, err)
    end
  end

  ROOT = File.expand_path("../..", __dir__)

  # Every public directive of puma 8's DSL (methods and aliases of the installed puma 8 gem's
  # lib/puma/dsl.rb) is in Config::DIRECTIVES, is a real method of the DSL, and has the same
  # row in docs/CONFIG.md; the table has no row puma does not have.
  def test_every_puma_8_directive_is_in_the_table_code_and_docs
    gem_home = ENV.fetch("PP_GEM_HOME", File.join(ROOT, "build/gems"))
    dsl = Dir[File.join(gem_home, "gems/puma-8.*/lib/puma/dsl.rb")].max
    flunk "puma 8's lib/puma/dsl.rb not found under #{gem_home}: run scripts/install-gems.sh" unless dsl
    text = File.read(dsl)
    public_part = text.split(/^    private\s*$/, 2).first
    names = public_part.scan(/^    def ([a-z_]+[!?]?)/).flatten
    names += public_part.scan(/^    alias(?:_method)? :?([a-z_]+[!?]?),? :?[a-z_]+/).flatten
    names = (names - %w[initialize self]).reject { |n| n.start_with?("_") }.uniq.sort
    assert_operator names.size, :>=, 85, "parsed #{names.size} directives from #{dsl}"
    table = PumaPlus::Config::DIRECTIVES
    assert_equal names, table.keys.sort, "Config::DIRECTIVES vs #{dsl}"
    names.each do |n|
      assert PumaPlus::Config::Dsl.public_method_defined?(n), "#{n} is a real DSL method (not method_missing)"
    end
    rows = File.read(File.join(ROOT, "docs/CONFIG.md")).scan(/^\| `([a-z_]+[!?]?)` \| (supported|mapped|unsupported) \|/)
    assert_equal table.transform_values(&:first).map { |k, v| [k, v.to_s] }.sort, rows.sort,
                 "docs/CONFIG.md's directive table vs Config::DIRECTIVES"
  end

  def test_environment_defaults_as_puma_reads_them
    Dir.mktmpdir do |dir|
      Dir.chdir(dir) do
        env = { "WEB_CONCURRENCY" => "3", "RAILS_MAX_THREADS" => "7", "PORT" => "4000", "RAILS_ENV" => "production" }
        _, out, = cli("--dry-run", "--server", "s", env: env)
        assert_match(/^exec: s -app config.ru -workers 3 -threads 7 -listen 0.0.0.0:4000 -gem-dir /, out)
        assert_match(/RACK_ENV=production/, out)
        _, out, = cli("--dry-run", "--server", "s", env: { "WEB_CONCURRENCY" => "auto" })
        assert_match(/ -workers #{PumaPlus::Config.available_processors} /, out)
        assert_equal 2, cli("--dry-run", env: { "WEB_CONCURRENCY" => "lots" })[0]
      end
    end
    # the file's directives override the environment; a file bind replaces PORT's
    with_config("workers 2\nthreads 4, 4\nport 5000, '127.0.0.1'\n") do
      _, out, = cli("--dry-run", "--server", "s", env: { "WEB_CONCURRENCY" => "3", "RAILS_MAX_THREADS" => "7", "PORT" => "4000" })
      assert_match(/^exec: s -app config.ru -workers 2 -threads 4 -min-threads 4 -listen 127.0.0.1:5000 -gem-dir /, out)
    end
  end

  # Run-time slots: puma's `threads MIN, MAX` bounds them, `max_slots` raises the ceiling for
  # I/O-bound apps and `fiber_slots` makes them fibers; the flags override the file.
  def test_slot_directives_map_to_server_flags
    with_config("threads 2, 5\nmax_slots 300\nfiber_slots 40\n") do
      _, out, = cli("--dry-run", "--server", "s")
      assert_match(/^exec: s -app config.ru -workers 1 -threads 5 -min-threads 2 -max-slots 300 -fibers 40 -gem-dir /, out)
      _, out, = cli("--dry-run", "--server", "s", "--max-slots", "100", "--fibers", "0")
      assert_match(/^exec: s -app config.ru -workers 1 -threads 5 -min-threads 2 -max-slots 100 -gem-dir /, out)
    end
    # puma 8's environment floor: PUMA_MIN_THREADS, else MIN_THREADS
    with_config("") do
      _, out, = cli("--dry-run", "--server", "s", env: { "PUMA_MIN_THREADS" => "3", "MIN_THREADS" => "1", "RAILS_MAX_THREADS" => "6" })
      assert_match(/^exec: s -app config.ru -workers 1 -threads 6 -min-threads 3 -gem-dir /, out)
    end
    with_config("max_slots 5000\n") do
      status, _, err = cli("--dry-run", "--server", "s")
      assert_equal 2, status
      assert_match(/puma-plus.rb:1: max_slots: must be 1..4096/, err)
    end
  end

  def test_auto_workers_honour_the_cgroup_cpu_quota
    Dir.mktmpdir do |root|
      File.write(File.join(root, "self"), "0::/app.slice\n")
      FileUtils.mkdir_p(File.join(root, "app.slice"))
      cpu_max = File.join(root, "app.slice/cpu.max")
      count = ->(n) { PumaPlus::Config.available_processors(nprocessors: n, cgroup_root: root, proc_cgroup: File.join(root, "self")) }
      File.write(cpu_max, "max 100000\n")
      assert_equal 4, count.call(4), "no quota: the processors"
      File.write(cpu_max, "150000 100000\n")
      assert_equal 1, count.call(4), "1.5 CPUs of quota: 1 (rounded down, as puma)"
      File.write(cpu_max, "250000 100000\n")
      assert_equal 2, count.call(4)
      File.write(cpu_max, "800000 100000\n")
      assert_equal 4, count.call(4), "a quota above the processors: the processors"
      File.write(cpu_max, "10000 100000\n")
      assert_equal 1, count.call(4), "never below 1"
      # cgroup v1
      v1 = File.join(root, "v1")
      FileUtils.mkdir_p(File.join(v1, "cpu/docker/x"))
      File.write(File.join(v1, "self"), "4:cpu,cpuacct:/docker/x\n")
      File.write(File.join(v1, "cpu/docker/x/cpu.cfs_quota_us"), "300000\n")
      File.write(File.join(v1, "cpu/docker/x/cpu.cfs_period_us"), "100000\n")
      assert_equal 3, PumaPlus::Config.available_processors(nprocessors: 8, cgroup_root: v1, proc_cgroup: File.join(v1, "self"))
      File.write(File.join(v1, "cpu/docker/x/cpu.cfs_quota_us"), "-1\n")
      assert_equal 8, PumaPlus::Config.available_processors(nprocessors: 8, cgroup_root: v1, proc_cgroup: File.join(v1, "self"))
    end
  end

  def test_control_app_url_forms_and_mapped_directives
    {
      'activate_control_app "tcp://127.0.0.1:9400"' => ["-control", "127.0.0.1:9400"],
      'activate_control_app "127.0.0.1:9401"' => ["-control", "127.0.0.1:9401"],
      'activate_control_app "[::1]:9402", auth_token: "t"' => ["-control", "[::1]:9402", "-control-token", "t"],
      'activate_control_app "unix:///tmp/pp.ctl", no_token: true' => ["-control", "unix:/tmp/pp.ctl"],
      "activate_control_app" => ["-control", "127.0.0.1:9293"], # puma's "auto"; none without the directive
      "workers 2" => [],
      "http_content_length_limit nil" => ["-max-body-size", "0"],
      "first_data_timeout 10\npersistent_timeout 5\nforce_shutdown_after 40\nworker_shutdown_timeout 9" =>
        ["-header-timeout", "10s", "-keepalive-timeout", "5s", "-drain-timeout", "40s"],
      "http_content_length_limit 1024\nquiet" => ["-max-body-size", "1024", "-quiet"],
      "log_requests" => ["-access-log", "-"],
      "log_requests path: 'log/a.log', format: :json" => ["-access-log", "log/a.log", "-access-log-format", "json"],
      "log_requests\nlog_requests false" => [],
      "port 7000\nset_remote_address proxy_protocol: :v2" => ["-listen", "0.0.0.0:7000,proxy=v2"],
      "set_remote_address header: 'X-Forwarded-For'" => ["-remote-addr-header", "X-Forwarded-For"],
      "set_remote_address header: 'X-Real-IP', trusted: ['10.0.0.0/8', '::1']" =>
        ["-remote-addr-header", "X-Real-IP", "-trusted-proxies", "10.0.0.0/8,::1"],
      "set_remote_address header: 'X-Real-IP'\nset_remote_address :socket" => [],
      "workers 0" => [],
      "cluster { workers 4 }\nsingle { workers 9 }" => [],
      "set_default_host '127.0.0.2'\nport 7000" => ["-listen", "127.0.0.2:7000"],
      "port 7000\nclear_binds!\nbind 'tcp://127.0.0.3:7001'" => ["-listen", "127.0.0.3:7001"]
    }.each do |text, flags|
      with_config(text + "\n") do
        status, out, = cli("--dry-run", "--server", "s")
        assert_equal 0, status, "#{text}: #{out}"
        got = Shellwords.split(out[/^exec: (.*)$/, 1])
        got = got[7...got.index("-gem-dir")]
        assert_equal flags, got, text
        assert_match(/-workers 4 /, out, text) if text.start_with?("cluster")
        assert_match(/note: .*workers 0 \(puma's single mode\)/, out) if text == "workers 0"
      end
    end
    with_config("activate_control_app 'not a url'\n") do
      assert_match(/activate_control_app: "not a url": expected/, cli("--dry-run")[2])
    end
  end

  # stdout_redirect and directory act before the exec: a stand-in server reports where it
  # runs and writes to both streams, which land in the files.
  def test_stdout_redirect_and_directory_apply_to_the_server
    with_config("") do |dir|
      fake = File.join(dir, "fake-server")
      File.write(fake, "#!/bin/sh\npwd\necho \"args $*\"\necho to-stderr >&2\n")
      File.chmod(0o755, fake)
      FileUtils.mkdir_p(File.join(dir, "app"))
      File.write(File.join(dir, "config/puma-plus.rb"), <<~RUBY)
        directory "#{dir}/app"
        stdout_redirect "#{dir}/out.log", "#{dir}/err.log", true
        quiet
      RUBY
      exe = File.join(PumaPlus::CLI::GEM_DIR, "exe/puma-plus")
      out, status = Open3.capture2e({ "PUMA_PLUS_SERVER" => fake }, "ruby", exe, chdir: dir)
      assert status.success?, out
      log = File.read(File.join(dir, "out.log"))
      assert_equal File.realpath(File.join(dir, "app")), log.lines.first.chomp
      assert_match(/^args -app config.ru .* -quiet -gem-dir /, log)
      assert_equal "to-stderr\n", File.read(File.join(dir, "err.log"))
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
