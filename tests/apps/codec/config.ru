# frozen_string_literal: true

# Answers which codec of the wire protocol the worker loaded ("native" or "ruby"), for
# tests/e2e/test_http.rb: a server built in the checkout must run its workers on the C codec.
run(lambda do |_env|
  body = "#{PumaPlus::Wire.codec}\n"
  [200, { "content-type" => "text/plain", "content-length" => body.bytesize.to_s }, [body]]
end)
