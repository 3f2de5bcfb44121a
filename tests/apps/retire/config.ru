# frozen_string_literal: true

# The app of tests/e2e/test_retire.rb: work that runs exactly until the test lets it finish, so
# a worker can be asked to retire while it is busy, deterministically. $PP_RETIRE_DIR is a
# directory the test owns; work named N writes N.running there when it starts and returns once
# N.release (or all.release, which the test writes when it ends early) exists, or after 30 s.
#   GET /hold?name=N          HTTP: answers 200 "released N PID" once released
#   GET /pid                  the worker's pid
#   GET /sticky (upgrade)     sticky WebSocket: "hold N" holds the event (on_message) and then
#                             sends "released N PID"; "pid" answers "pid PID"
#   GET /flex (upgrade)       the same, routed flexibly
require "puma_plus"

module Hold
  DIR = ENV.fetch("PP_RETIRE_DIR")

  # Holds the calling thread until the test releases `name` (at most 30 s).
  def self.call(name)
    raise ArgumentError, "bad name #{name.inspect}" unless name.match?(/\A\w+\z/)

    File.write(File.join(DIR, "#{name}.running"), "#{Process.pid}\n")
    release = File.join(DIR, "#{name}.release")
    all = File.join(DIR, "all.release")
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 30
    sleep 0.02 until File.exist?(release) || File.exist?(all) || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
    "released #{name} #{Process.pid}"
  end
end

class HoldHandler
  def on_message(conn, data)
    return conn.send("pid #{Process.pid}") if data == "pid"
    return conn.send(Hold.call(Regexp.last_match(1))) if data =~ /\Ahold (\w+)\z/

    conn.send("unknown #{data}")
  end
end

def text(body) = [200, { "content-type" => "text/plain", "content-length" => body.bytesize.to_s }, [body]]

run(lambda do |env|
  req = Rack::Request.new(env)
  if PumaPlus::WebSocket.websocket?(env)
    case req.path_info
    when "/sticky" then PumaPlus::WebSocket.accept(env, HoldHandler)
    when "/flex" then PumaPlus::WebSocket.accept(env, HoldHandler, route: :flexible)
    else [403, { "content-type" => "text/plain" }, ["no WebSocket here\n"]]
    end
  else
    case req.path_info
    when "/hold" then text("#{Hold.call(req.params['name'].to_s)}\n")
    when "/pid" then text("#{Process.pid}\n")
    else [404, { "content-type" => "text/plain" }, ["not found\n"]]
    end
  end
end)
