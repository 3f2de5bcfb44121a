# frozen_string_literal: true

# The benchmark app plus GET /__allocs: this process's GC.stat(:total_allocated_objects) as
# text, so server/tools/ruby_allocs_per_request.sh can count the Ruby objects one /hello costs
# (server and app together) under puma-plus and under puma alike.
require_relative "../../../scenarios/apps/mix/app"

run(lambda do |env|
  if env["PATH_INFO"] == "/__allocs"
    n = GC.stat(:total_allocated_objects).to_s
    [200, { "content-type" => "text/plain", "content-length" => n.bytesize.to_s }, [n]]
  else
    MixApp.call(env)
  end
end)
