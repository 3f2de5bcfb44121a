# frozen_string_literal: true

# The string-env app of tests/e2e/test_env.rb: answers every request with its Rack env as a JSON
# object, keeping only the String values (rack.input, rack.errors, rack.version, the
# puma_plus.* procs are objects) and dropping the per-request puma_plus.request_id,
# puma_plus.queue_ns and the X-Request-Start the server adds (its form is checked here: the key
# "x_request_start_form"), so two identical requests produce identical bodies whatever protocol
# carried them. The request body, if any, is read and reported as "body" (its bytes, as a
# String) so a POST is compared too.
require "json"

PER_REQUEST = %w[puma_plus.request_id puma_plus.queue_ns HTTP_X_REQUEST_START].freeze

run(lambda do |env|
  out = {}
  env.each do |k, v|
    next unless v.is_a?(String)
    next if PER_REQUEST.include?(k)

    out[k] = v
  end
  out["x_request_start_form"] = env["HTTP_X_REQUEST_START"].to_s.sub(/\At=\d{16}\z/, "t=<16 digits>")
  input = env["rack.input"]
  out["body"] = input ? input.read : ""
  json = JSON.generate(out.sort.to_h)
  [200, { "content-type" => "application/json", "content-length" => json.bytesize.to_s }, [json]]
end)
