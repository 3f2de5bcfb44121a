# frozen_string_literal: true

# Rails under the real server, both columns of the gem matrix (issue 10): Debian's Rails 6.1
# and the pinned Rails 7.2. scripts/gen-rails-app.sh generates each app once per machine
# (build/apps/, never committed): `rails new` (minimal), a Post scaffold on SQLite with its
# JSON endpoint (jbuilder views), and config/puma-plus.rb with 2 workers whose before_fork /
# on_worker_boot hooks re-establish ActiveRecord's connections. Each test runs a fresh copy in
# production mode with `bundle exec puma-plus` (no flags: config/puma-plus.rb) and checks:
# pages render, a CSRF-protected form POST creates a record (and one without the token is
# refused), a write through one worker is read through the other, in HTML and through the
# scaffold's own posts.json / posts/ID.json from both workers, an update through the edit form
# and one through the JSON endpoint (PATCH posts/ID.json, X-CSRF-Token), and the Rails request
# log reaches the server's stdout.
require_relative "helper"
require "net/http"
require "uri"
require "cgi"

class TestRails < Minitest::Test
  def test_rails_6_1_debian
    check("6.1", E2E.debian_env.merge("GEM_HOME" => File.join(E2E::ROOT, "build/apps/debian-gems")))
  end

  def test_rails_7_2_rubygems
    check("7.2", E2E.rubygems_env.merge("RUBYOPT" => nil, "BUNDLE_FROZEN" => nil))
  end

  # One request on a new connection (so any worker may answer); returns the Net::HTTPResponse.
  def http(method, path, form: nil, cookie: nil, json: nil, headers: {})
    Net::HTTP.start("127.0.0.1", @srv.port, open_timeout: 10, read_timeout: 30) do |h|
      req = { post: Net::HTTP::Post, patch: Net::HTTP::Patch, get: Net::HTTP::Get }.fetch(method).new(path)
      req["Cookie"] = cookie if cookie
      req["Connection"] = "close"
      headers.each { |k, v| req[k] = v }
      req.set_form_data(form) if form
      if json
        req["Content-Type"] = "application/json"
        req.body = JSON.generate(json)
      end
      h.request(req)
    end
  end

  # GET PATH.json: 200, a JSON content type and the parsed body.
  def get_json(path)
    res = http(:get, path)
    assert_equal "200", res.code, "GET #{path}: #{@srv.log[-3000..]}"
    assert_match(%r{\Aapplication/json}, res["content-type"])
    [JSON.parse(res.body), res["x-pp-worker-pid"]]
  end

  # The config/puma.rb that `rails new` wrote, unmodified: `puma-plus -C config/puma.rb` runs
  # it (threads from RAILS_MAX_THREADS' default, `port ENV.fetch("PORT")`, workers from
  # WEB_CONCURRENCY) and reports each directive it did not apply, with its line.
  def puma_config(app, env, version)
    puma_rb = File.read(File.join(app, "config/puma.rb"))
    env = env.merge("WEB_CONCURRENCY" => "2", "RAILS_MAX_THREADS" => nil)
    @srv = E2E::Server.new(workers: 2, env: env, chdir: app, boot_timeout: 60, command: lambda { |port, cport|
      env["PORT"] = port.to_s
      ["bundle", "exec", "puma-plus", "-C", "config/puma.rb", "--control-url", "127.0.0.1:#{cport}"]
    })
    res = http(:get, "/posts")
    assert_equal "200", res.code
    threads = version == "6.1" ? 5 : 3
    log = @srv.log
    plugin_line = puma_rb.lines.index { |l| l.start_with?("plugin :tmp_restart") } + 1
    assert_includes log, "unsupported: config/puma.rb:#{plugin_line}: plugin: not applied: puma plugins"
    if version == "6.1" # its config/puma.rb names a pidfile, which puma-plus now writes
      assert puma_rb.lines.any? { |l| l.start_with?("pidfile") }
      refute_includes log, "pidfile: not applied"
      assert_match(%r{wrote pid #{@srv.pid} to tmp/pids/server\.pid}, log)
      assert_equal @srv.pid.to_s, File.read(File.join(app, "tmp/pids/server.pid")).strip
    end
    st = @srv.stats
    assert_equal 2, st["booted_workers"]
    assert_equal 2 * threads, st["queue"]["slots_ready"] + st["queue"].fetch("slots_busy", 0),
                 "RAILS_MAX_THREADS' default in config/puma.rb: #{threads} threads per worker (#{st['queue']})"
    assert_equal 0, @srv.stop&.exitstatus
  end

  def session_cookie(res) = res.get_fields("set-cookie").to_a.map { |c| c.split(";", 2).first }.join("; ")

  def form_token(html) = CGI.unescapeHTML(html[/name="authenticity_token" value="([^"]+)"/, 1].to_s)

  # The copy of the app gets a page that calls Rails' request.send_early_hints, and its
  # config/puma-plus.rb puma's `early_hints` directive (the generator's cached app is untouched).
  def add_early_hints(app)
    File.write(File.join(app, "app/controllers/hints_controller.rb"), <<~RUBY)
      class HintsController < ApplicationController
        def show
          request.send_early_hints("link" => "</style.css>; rel=preload; as=style")
          render plain: "hinted\n"
        end
      end
    RUBY
    routes = File.join(app, "config/routes.rb")
    File.write(routes, File.read(routes).sub(/^Rails.application.routes.draw do$/, "\\0\n  get \"hints\", to: \"hints#show\""))
    File.write(File.join(app, "config/puma-plus.rb"), File.read(File.join(app, "config/puma-plus.rb")) + "\nearly_hints\n")
  end

  # curl -v sees the 103 with the Link before the 200 (HTTP/1.1).
  def check_early_hints
    out, err, st = E2E.curl("-v", "http://127.0.0.1:#{@srv.port}/hints")
    assert st.success?, err
    assert_equal "hinted\n", out, @srv.log[-3000..]
    lines = err.lines.map(&:strip)
    i103 = lines.index { |l| l.start_with?("< HTTP/1.1 103") }
    i200 = lines.index { |l| l.start_with?("< HTTP/1.1 200") }
    refute_nil i103, "request.send_early_hints: no 103 seen by curl:\n#{err}"
    assert_operator i103, :<, i200
    assert(lines[i103...i200].any? { |l| l.casecmp?("< link: </style.css>; rel=preload; as=style") }, err)
  end

  def check(version, column_env)
    out, status = Open3.capture2e(column_env.merge("GEM_HOME" => nil), "bash", File.join(E2E::ROOT, "scripts/gen-rails-app.sh"), version)
    assert status.success?, "scripts/gen-rails-app.sh #{version} failed:\n#{out}"
    cached = File.join(E2E::ROOT, "build/apps/rails-#{version}")
    @tmp = Dir.mktmpdir("pp-rails-#{version}-")
    app = File.join(@tmp, "app")
    FileUtils.cp_r(cached, app) # a fresh database for every run
    add_early_hints(app)
    env = column_env.merge(
      "BUNDLE_GEMFILE" => File.join(app, "Gemfile"), "PUMA_PLUS_SERVER" => File.expand_path(E2E::BIN),
      "SECRET_KEY_BASE" => "pp-e2e-#{'k' * 64}", "RAILS_LOG_TO_STDOUT" => "1", "RAILS_ENV" => "production",
      "WEB_CONCURRENCY" => nil, "RAILS_MAX_THREADS" => nil
    )
    @srv = E2E::Server.new(workers: 2, env: env, chdir: app, boot_timeout: 60, command: lambda { |port, cport|
      env["PORT"] = port.to_s
      env["PP_CONTROL_PORT"] = cport.to_s
      %w[bundle exec puma-plus]
    })

    res = http(:get, "/posts.json")
    assert_equal "200", res.code, @srv.log[-3000..]
    assert_equal version, res["x-pp-rails"][/\A\d+\.\d+/]
    check_early_hints
    assert_equal [], JSON.parse(res.body), "the scaffold's JSON index of an empty table"

    res = http(:get, "/posts")
    assert_equal "200", res.code
    assert_match(/<h1>Posts<\/h1>/, res.body)

    res = http(:get, "/posts/new")
    assert_equal "200", res.code
    token = form_token(res.body)
    refute_empty token, "the new-post form carries a CSRF token"
    cookie = session_cookie(res)
    refute_empty cookie, "the form comes with a session cookie"

    refused = http(:post, "/posts", form: { "post[title]" => "no token", "post[body]" => "x" }, cookie: cookie)
    assert_equal "422", refused.code, "a POST without the CSRF token is refused"

    title = "written through one worker #{rand(1_000_000)}"
    res = http(:post, "/posts", form: { "authenticity_token" => token, "post[title]" => title, "post[body]" => "hello" },
                                cookie: cookie)
    assert_equal "302", res.code, @srv.log[-4000..]
    location = URI(res["location"]).path
    assert_match(%r{\A/posts/\d+\z}, location)
    writer = res["x-pp-worker-pid"]
    refute_nil writer

    # Read it back through the scaffold's JSON endpoint from both workers: rounds of
    # concurrent requests spread over all six connections (2 workers × 3 threads), half on
    # posts.json and half on posts/ID.json, until each path was answered by two pids.
    id = Integer(location[/\d+\z/])
    record = lambda do |post|
      assert_equal [id, title, "hello"], post.values_at("id", "title", "body")
      assert_equal "http://127.0.0.1:#{@srv.port}/posts/#{id}.json", post["url"]
      refute_nil post["created_at"]
    end
    pids = { index: [], show: [] }
    20.times do
      Array.new(6) do |i|
        Thread.new { i.even? ? [:index, *get_json("/posts.json")] : [:show, *get_json("#{location}.json")] }
      end.map(&:value).each do |kind, data, pid|
        if kind == :index
          assert_equal 1, data.size
          data = data.first
        end
        record.call(data)
        pids[kind] |= [pid]
      end
      break if pids.values.all? { |p| p.size == 2 }
    end
    assert_equal [2, 2], pids.values.map(&:size), "posts.json and posts/ID.json from both workers: #{pids}"
    assert_includes pids[:show], writer
    assert_equal 2, @srv.stats["booted_workers"]

    res = http(:get, location)
    assert_equal "200", res.code
    assert_includes res.body, CGI.escapeHTML(title)

    res = http(:get, "#{location}/edit", cookie: cookie)
    edit_token = form_token(res.body)
    res = http(:post, location, form: { "_method" => "patch", "authenticity_token" => edit_token,
                                        "post[title]" => "#{title} (edited)" }, cookie: session_cookie(res).then { |c| c.empty? ? cookie : c })
    assert_includes %w[302 303], res.code, @srv.log[-3000..]
    assert_equal "#{title} (edited)", get_json("#{location}.json")[0]["title"]

    # The scaffold's JSON update (format.json: render :show), with the page's CSRF token.
    page = http(:get, location, cookie: cookie)
    csrf = CGI.unescapeHTML(page.body[/<meta name="csrf-token" content="([^"]+)"/, 1].to_s)
    refute_empty csrf, "csrf_meta_tags in the layout"
    cookie = session_cookie(page).then { |c| c.empty? ? cookie : c }
    res = http(:patch, "#{location}.json", json: { post: { title: "#{title} (json)" } }, cookie: cookie,
                                           headers: { "X-CSRF-Token" => csrf, "Accept" => "application/json" })
    assert_equal "200", res.code, @srv.log[-3000..]
    assert_equal "#{title} (json)", JSON.parse(res.body)["title"]
    res = http(:patch, "#{location}.json", json: { post: { title: "no token" } }, cookie: cookie)
    assert_equal "422", res.code, "a JSON PATCH without the token is refused"
    assert_equal "#{title} (json)", get_json("#{location}.json")[0]["title"]

    assert_equal 0, @srv.stats["requests"]["status_5xx"], @srv.log[-3000..]
    log = @srv.log
    assert_match(%r{Started POST "/posts"}, log, "the Rails request log reaches stdout")
    assert_match(/Processing by PostsController#create/, log)
    assert_match(/Can't verify CSRF token authenticity|InvalidAuthenticityToken/, log)
    assert_equal 0, @srv.stop&.exitstatus

    puma_config(app, env, version)
  ensure
    @srv&.stop
    FileUtils.rm_rf(@tmp) if @tmp
  end
end
