# frozen_string_literal: true

# The app of tests/e2e/test_liveness.rb (request timeouts, heartbeats, shepherd supervision).
#
#   GET /pid              this worker's pid
#   GET /sleep/<ms>       sleeps (interruptible); a PumaPlus::RequestTimeout raised into it is
#                         counted (see /interrupts) and re-raised
#   GET /stubborn/<ms>    sleeps, rescues the RequestTimeout and sleeps <ms> again (a thread
#                         that does not let go: its worker is killed after the grace)
#   GET /spin/<ms>        busy loop in Ruby for <ms> (interruptible; holds the GVL in slices)
#   GET /drip/<n>         200 and n chunks 100 ms apart (the head goes out at once)
#   GET /hijack/<ms>      full hijack; the thread holds the socket <ms>, then writes a raw 200
#   GET /interrupts       how many RequestTimeouts this worker's app code saw, and where
INTERRUPTS = []
LOCK = Mutex.new

# An Enumerable body that yields slowly.
class Drip
  def initialize(count) = @count = count

  def each
    @count.times do |i|
      sleep 0.1 if i.positive?
      yield "drop #{i}\n"
    end
  end
end

def text(body, status = 200) = [status, { "content-type" => "text/plain" }, [body]]

run(lambda do |env|
  case env["PATH_INFO"]
  when "/pid" then text(Process.pid.to_s)
  when %r{\A/sleep/(\d+)\z}
    ms = Integer(Regexp.last_match(1))
    begin
      sleep(ms / 1000.0)
    rescue PumaPlus::RequestTimeout => e
      LOCK.synchronize { INTERRUPTS << "#{env['puma_plus.request_id']} #{Thread.current.object_id} #{e.class}" }
      raise
    end
    text("slept #{ms}")
  when %r{\A/stubborn/(\d+)\z}
    ms = Integer(Regexp.last_match(1))
    begin
      sleep(ms / 1000.0)
    rescue PumaPlus::RequestTimeout
      sleep(ms / 1000.0) # ignores the interrupt
    end
    text("stubborn")
  when %r{\A/spin/(\d+)\z}
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Integer(Regexp.last_match(1)) / 1000.0
    n = 0
    n += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    text("spun #{n}")
  when %r{\A/drip/(\d+)\z} then [200, { "content-type" => "text/plain" }, Drip.new(Integer(Regexp.last_match(1)))]
  when %r{\A/hijack/(\d+)\z}
    io = env["rack.hijack"].call
    sleep(Integer(Regexp.last_match(1)) / 1000.0)
    io.write("HTTP/1.1 200 OK\r\ncontent-length: 8\r\nconnection: close\r\n\r\nhijacked")
    io.close
    [200, {}, []]
  when "/interrupts" then text(LOCK.synchronize { INTERRUPTS.join("\n") })
  else text("not found\n", 404)
  end
end)
