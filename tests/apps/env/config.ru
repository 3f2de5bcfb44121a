# frozen_string_literal: true

# The Rack env as JSON, for tests that compare what the app sees over different protocols
# (tests/e2e/test_h2.rb: HTTP/1.1 vs HTTP/2). Values that are objects (rack.input, rack.errors,
# hijack procs, ...) are given as their class name, so the key set is compared too.
require "json"

run(lambda do |env|
  out = env.to_h do |k, v|
    plain = v.nil? || v == true || v == false || v.is_a?(String) || v.is_a?(Integer) ||
            (v.is_a?(Array) && v.all? { |e| e.is_a?(String) || e.is_a?(Integer) })
    [k, plain ? v : "#<#{v.class}>"]
  end
  body = JSON.generate(out)
  [200, { "content-type" => "application/json", "content-length" => body.bytesize.to_s }, [body]]
end)
