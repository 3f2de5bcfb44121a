# Memory per parked slot (thread vs fiber) and switch cost, Ruby 3.1.
# Run: ruby notebooks/concurrency/slotcost.rb (three runs quoted in docs/SIM.md "Slots at run time").
def pss_kb = File.read("/proc/self/smaps_rollup")[/^Pss:\s+(\d+)/, 1].to_i
N = 1000
GC.start; GC.disable
b = pss_kb
q = Queue.new
ts = N.times.map { Thread.new { q.pop } }
sleep 0.3
t_kb = (pss_kb - b) / N.to_f
N.times { q << 1 }; ts.each(&:join)
GC.enable; GC.start; GC.disable
b = pss_kb
fs = N.times.map { f = Fiber.new { Fiber.yield; 1 }; f.resume; f }
f_kb = (pss_kb - b) / N.to_f
fs.each(&:resume)
# switch cost: ping-pong between two threads via Queue, vs two fibers
M = 100_000
a = Queue.new; c = Queue.new
th = Thread.new { M.times { a.pop; c << 1 } }
t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
M.times { a << 1; c.pop }
t1 = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
th.join
thr_sw = (t1 - t0) / (2.0 * M)
f = Fiber.new { loop { Fiber.yield } }
t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
M.times { f.resume }
t1 = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
fib_sw = (t1 - t0) / (2.0 * M)
puts format("ruby %s: PSS per parked thread %.1f KB, per parked fiber %.1f KB; switch thread %.0f ns, fiber %.0f ns", RUBY_VERSION, t_kb, f_kb, thr_sw, fib_sw)
