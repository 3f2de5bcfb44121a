# frozen_string_literal: true

# Responses an app should not send, one per path, for tests/e2e/test_http.rb
# (test_bad_app_responses): the server must never put them on the wire as given
# (docs/RACK.md "What the server does with a bad response"). The worker passes each on
# unchanged except for its own checks (status 100..999, "\n" splitting).
BAD = {
  "/status-101" => [101, { "x-good" => "1" }, ["switch?"]],
  "/status-103" => [103, { "link" => "</a>" }, ["hints"]],
  "/bad-name" => [200, { "x bad" => "1", "x-crlf\r\nset-cookie" => "evil=1", "" => "e",
                         "x-good" => "1" }, ["ok"]],
  "/crlf-value" => [200, { "x-inj" => "a\r\nset-cookie: evil=1", "x-good" => "1" }, ["ok"]],
  "/cr-value" => [200, { "x-cr" => "a\rb", "x-good" => "1" }, ["ok"]],
  "/nul-value" => [200, { "x-nul" => "a\0b", "x-good" => "1" }, ["ok"]],
  "/ctl-value" => [200, { "x-esc" => "\e[31m", "x-good" => "1" }, ["ok"]],
  "/cl-long" => [200, { "content-length" => "3" }, ["hello"]],
  "/cl-short" => [200, { "content-length" => "10" }, ["hello"]],
  "/cl-invalid" => [200, { "content-length" => "5x" }, ["hello"]],
  "/cl-conflict" => [200, { "content-length" => "5\n6" }, ["hello"]],
  "/cl-same" => [200, { "content-length" => "5\n5" }, ["hello"]],
  "/cl-204" => [204, { "content-length" => "0" }, []],
}.freeze

run lambda { |env|
  BAD.fetch(env["PATH_INFO"]) { [200, { "content-type" => "text/plain" }, ["fine\n"]] }
}
