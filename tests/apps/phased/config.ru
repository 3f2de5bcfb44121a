# frozen_string_literal: true

# The app of tests/e2e/test_phased.rb: the benchmark app (scenarios/apps/mix) whose version is
# read once, when config.ru is loaded, from the file $PP_PHASED_VERSION_FILE (default: VERSION
# next to this file). Every response says it in `x-app-version`, and GET /version answers it as
# the body, so a phased restart that changes the file shows which code served each request. A
# version starting with "broken" makes loading raise, as a bad deploy would.
require_relative "../../../scenarios/apps/mix/app"

version_file = ENV.fetch("PP_PHASED_VERSION_FILE", File.join(__dir__, "VERSION"))
VERSION = File.read(version_file).strip
raise "phased test app: version #{VERSION.inspect} is broken on purpose" if VERSION.start_with?("broken")

run(lambda do |env|
  if env["PATH_INFO"] == "/version"
    body = "#{VERSION}\n"
    [200, { "content-type" => "text/plain", "content-length" => body.bytesize.to_s, "x-app-version" => VERSION }, [body]]
  else
    status, headers, body = MixApp.call(env)
    [status, headers.merge("x-app-version" => VERSION), body]
  end
end)
