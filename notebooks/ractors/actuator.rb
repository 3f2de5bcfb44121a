# frozen_string_literal: true

# The run-time slot actuator through the server (issue 28): POST /slots?worker=0&count=6 on a
# worker with 2 slots, timed until /stats shows 6 connected slots (polled every 2 ms), for
# Ractor slots and thread slots side by side, ROUNDS rounds interleaved; medians in ms.
#
#   ruby notebooks/ractors/actuator.rb [ROUNDS=5]
require "json"
require "socket"
require "net/http"

ROOT = File.expand_path("../..", __dir__)
BIN = File.join(ROOT, "build/server/puma-plus-server")
APP = File.join(ROOT, "tests/apps/ractor/config.ru")
ROUNDS = Integer(ARGV[0] || 5)

def free_port = TCPServer.new("127.0.0.1", 0).then { |s| s.addr[1].tap { s.close } }
def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
def stats(cport) = JSON.parse(Net::HTTP.get(URI("http://127.0.0.1:#{cport}/stats")))
def slots(cport) = stats(cport)["worker_status"].first["slots"]

def one(env)
  port = free_port
  cport = free_port
  pid = Process.spawn({ "RUBYLIB" => File.join(ROOT, "build/gem/ext-lib") }.merge(env), BIN, "-app", APP,
                      "-workers", "1", "-threads", "2", "-max-slots", "8", "-listen", "127.0.0.1:#{port}",
                      "-control", "127.0.0.1:#{cport}", "-quiet", "-gem-dir", File.join(ROOT, "gem"),
                      in: File::NULL, out: File::NULL, err: File::NULL, pgroup: true)
  sleep 0.05 until (slots(cport) rescue nil) == 2
  t0 = now
  Net::HTTP.start("127.0.0.1", cport) { |h| h.request(Net::HTTP::Post.new("/slots?worker=0&count=6")) }
  sleep 0.002 until slots(cport) == 6
  (now - t0) * 1000
ensure
  Process.kill("TERM", pid)
  Process.wait(pid)
end

res = { "ractors" => [], "threads" => [] }
ROUNDS.times do
  res["ractors"] << one("PUMA_PLUS_RACTORS" => "2")
  res["threads"] << one({})
end
res.each do |k, v|
  puts format("%-8s POST /slots 2->6 until connected: median %.1f ms (%s)", k, v.sort[v.size / 2], v.map { |x| x.round(1) }.join(", "))
end
