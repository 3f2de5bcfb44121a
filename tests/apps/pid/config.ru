# frozen_string_literal: true

# Answers which puma-plus-server process served the request: a worker's parent is the
# shepherd, whose parent is the server (tests/e2e/test_restart.rb: the pid changes across a
# hot restart). /proc/PID/stat field 4 is the parent pid.
SERVER_PID = lambda do
  File.read("/proc/#{Process.ppid}/stat").split(") ", 2)[1].split(" ")[1].to_i
end

run(lambda do |_env|
  [200, { "content-type" => "text/plain" }, ["server=#{SERVER_PID.call} worker=#{Process.pid}\n"]]
end)
