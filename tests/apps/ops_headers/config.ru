# frozen_string_literal: true

# What the operator-facing headers tests (tests/e2e/test_ops_headers.rb) need, behind the
# Rack::Lint of the loaded Rack (the pinned 3.2 there): OPTIONS * (PATH_INFO "*"), the env's
# X-Request-Start, a response with the app's own Date, and, with early hints on, a 103.
require "rack"
require "rack/lint"
require "json"

def text(body, status = 200, extra = {})
  [status, { "content-type" => "text/plain", "content-length" => body.bytesize.to_s }.merge(extra), [body]]
end

ROUTES = {
  "*" => ->(env) { text("options #{env["PATH_INFO"]} #{env["REQUEST_URI"]}\n", 200, "allow" => "GET, HEAD, OPTIONS") },
  "/env" => lambda do |env|
    keys = %w[REQUEST_METHOD PATH_INFO SERVER_PROTOCOL HTTP_X_REQUEST_START]
    text(JSON.generate(keys.to_h { |k| [k, env[k]] }), 200, "content-type" => "application/json")
  end,
  "/own-date" => ->(_env) { text("own date\n", 200, "date" => "Tue, 01 Jan 2030 00:00:00 GMT") },
  "/hints" => lambda do |env|
    hints = env["rack.early_hints"]
    hints&.call({ "link" => "</style.css>; rel=preload; as=style" })
    text("hints #{hints ? "sent" : "absent"}\n")
  end
}.freeze

app = lambda do |env|
  route = ROUTES[env["PATH_INFO"]]
  route ? route.call(env) : text("not found\n", 404)
end

use Rack::Lint
run app
