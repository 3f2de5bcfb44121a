# frozen_string_literal: true

# Ractor slots against forked workers and threads at equal slot counts (issue 28), side by
# side in one run, rounds interleaved: wrk req/s and p99 on /hello and /mix/5/20, the sum of
# PSS of the Ruby processes (shepherd + workers), and the actuator: a new Ractor's connection
# appearing vs a fork's. Prints a Markdown table and writes results.json.
#
#   ruby notebooks/ractors/measure.rb [ROUNDS=3] [SLOTS=4] [DUR_S=4]
require "json"
require "socket"
require "net/http"

ROOT = File.expand_path("../..", __dir__)
BIN = File.join(ROOT, "build/server/puma-plus-server")
APP = File.join(ROOT, "tests/apps/ractor/config.ru")
ROUNDS = Integer(ARGV[0] || 3)
SLOTS = Integer(ARGV[1] || 4)
DUR = Integer(ARGV[2] || 4)
CONFIGS = {
  "ractors" => { workers: 1, threads: SLOTS, env: { "PUMA_PLUS_RACTORS" => SLOTS.to_s } },
  "forked" => { workers: SLOTS, threads: 1, env: {} },
  "threads" => { workers: 1, threads: SLOTS, env: {} }
}.freeze
PATHS = ["/hello", "/mix/5/20"].freeze

def free_port = TCPServer.new("127.0.0.1", 0).then { |s| s.addr[1].tap { s.close } }
def steal = File.readlines("/proc/stat").first.split[8].to_i
def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

def stats(cport)
  JSON.parse(Net::HTTP.get(URI("http://127.0.0.1:#{cport}/stats")))
end

def start(cfg)
  port = free_port
  cport = free_port
  env = { "RUBYLIB" => File.join(ROOT, "build/gem/ext-lib") }.merge(cfg[:env])
  pid = Process.spawn(env, BIN, "-app", APP, "-workers", cfg[:workers].to_s, "-threads", cfg[:threads].to_s,
                      "-listen", "127.0.0.1:#{port}", "-control", "127.0.0.1:#{cport}", "-quiet",
                      "-gem-dir", File.join(ROOT, "gem"), in: File::NULL, out: File::NULL, err: File::NULL, pgroup: true)
  deadline = now + 30
  loop do
    st = stats(cport) rescue nil
    break if st && st["booted_workers"] == cfg[:workers] && st["queue"]["slots_ready"] == cfg[:workers] * cfg[:threads]
    raise "not ready" if now > deadline

    sleep 0.05
  end
  [pid, port]
end

def pss_ruby(server_pid)
  pids = `pgrep -g #{server_pid}`.split.map(&:to_i) - [server_pid]
  pids.sum do |p|
    File.read("/proc/#{p}/smaps_rollup")[/^Pss:\s+(\d+)/, 1].to_i
  rescue Errno::ENOENT
    0
  end
end

def wrk(port, path)
  out = `wrk -t1 -c#{SLOTS * 2} -d#{DUR}s --latency http://127.0.0.1:#{port}#{path}`
  rps = out[%r{Requests/sec:\s+([\d.]+)}, 1].to_f
  p99 = out[/^\s+99%\s+([\d.]+)(us|ms|s)/] && [$1.to_f, $2]
  p99_ms = p99 && (p99[1] == "us" ? p99[0] / 1000 : p99[1] == "s" ? p99[0] * 1000 : p99[0])
  non2xx = out[/Non-2xx or 3xx responses: (\d+)/, 1].to_i
  [rps, p99_ms, non2xx]
end

def median(a) = a.sort[a.size / 2]

results = Hash.new { |h, k| h[k] = Hash.new { |h2, k2| h2[k2] = [] } }
steal0 = steal
t0 = now
ROUNDS.times do |round|
  CONFIGS.each do |name, cfg|
    pid, port = start(cfg)
    begin
      wrk(port, "/hello") # warm-up, not counted (DUR s)
      PATHS.each do |path|
        rps, p99, bad = wrk(port, path)
        results[name]["#{path} rps"] << rps
        results[name]["#{path} p99_ms"] << p99
        results[name]["#{path} non2xx"] << bad
      end
      results[name]["pss_kb"] << pss_ruby(pid)
    ensure
      Process.kill("TERM", pid)
      Process.wait(pid)
    end
    warn "round #{round + 1} #{name} done"
  end
end

# The actuator: time from the decision (Ractor.new / fork) to the new slot's connection being
# accepted on a unix socket (the server's readiness signal), the app already loaded.
require File.join(ROOT, "gem/lib/puma_plus")
require File.join(ROOT, "gem/lib/puma_plus/ractor_slots")
Warning[:experimental] = false
sock_path = "/tmp/pp-ractor-measure-#{Process.pid}.sock"
server = UNIXServer.new(sock_path)
app = Object.new
load_app = ->(ru) { Rack::Builder.parse_file(ru).then { |r| r.is_a?(Array) ? r.first : r } }
require "rack"
app = PumaPlus::RactorSlots.prepare(load_app.call(APP))
act = { "ractor" => [], "fork" => [] }
10.times do
  t = now
  r = Ractor.new(sock_path) { |p| s = UNIXSocket.new(p); s.read(1); s.close }
  c = server.accept
  act["ractor"] << (now - t) * 1000
  c.write("x")
  c.close
  r.take
  t = now
  pid = fork { s = UNIXSocket.new(sock_path); s.read(1); exit!(0) }
  c = server.accept
  act["fork"] << (now - t) * 1000
  c.write("x")
  c.close
  Process.wait(pid)
end
File.unlink(sock_path)
elapsed = now - t0
ticks = Process.clock_getres(:TIMES_BASED_CLOCK_PROCESS_CPUTIME_ID) rescue nil
steal_s = (steal - steal0) / 100.0

puts "| config (#{SLOTS} slots) | /hello req/s | /hello p99 ms | /mix/5/20 req/s | /mix/5/20 p99 ms | PSS Ruby sum MB | non-2xx |"
puts "|---|---|---|---|---|---|---|"
results.each do |name, r|
  puts format("| %s | %.0f | %.2f | %.0f | %.2f | %.1f | %d |", name, median(r["/hello rps"]), median(r["/hello p99_ms"]),
              median(r["/mix/5/20 rps"]), median(r["/mix/5/20 p99_ms"]), median(r["pss_kb"]) / 1024.0,
              r.sum { |k, v| k.end_with?("non2xx") ? v.sum : 0 })
end
puts
puts format("actuator, decision → connection accepted (median of 10, app loaded): Ractor.new %.2f ms, fork %.2f ms",
            median(act["ractor"]), median(act["fork"]))
puts format("rounds %d × %ds per path, elapsed %.0f s, steal %.2f s (both cores), machine shared with other sessions",
            ROUNDS, DUR, elapsed, steal_s)
File.write(File.join(__dir__, "results.json"), JSON.pretty_generate({ rounds: ROUNDS, slots: SLOTS, dur_s: DUR,
  results: results, actuator_ms: act, steal_s: steal_s, elapsed_s: elapsed }))
