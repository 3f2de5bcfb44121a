#!/usr/bin/env bash
# The front end's memory per idle keep-alive connection (a measurement, not a test): starts
# puma-plus-server (1 worker x 2 threads, keep-alive timeout 10 min), opens N connections
# from one Ruby client, sends one /hello request on each and reads its response, then keeps
# them all open and idle. Prints the server's RSS (VmRSS from /proc) and its descriptor count
# before and after, and the difference per connection. Plain HTTP/1.1, and TLS (HTTP/1.1 over
# a TLS handshake on the development certificate) with PP_IDLE_TLS=1.
#
#   server/tools/idle_connections.sh build/server/puma-plus-server [N=10000]
set -euo pipefail
bin=$(realpath "$1"); n=${2:-10000}
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/pp-idle.XXXXXX)
port=$((20000 + RANDOM % 20000)); cport=$((port + 1))
ulimit -n $((n + 1024))
listen=(-listen "127.0.0.1:$port")
[[ -n ${PP_IDLE_TLS:-} ]] && listen=(-listen-tls "127.0.0.1:$port")
setsid "$bin" -app "$repo/scenarios/apps/mix/config.ru" -workers 1 -threads 2 "${listen[@]}" \
  -control "127.0.0.1:$cport" -runtime-dir "$work/rt" -quiet -gem-dir "$repo/gem" \
  -keepalive-timeout 10m -max-connections $((n + 100)) > "$work/server.log" 2>&1 < /dev/null &
pid=$!
cleanup() { kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 200); do curl -kfs -o /dev/null "http${PP_IDLE_TLS:+s}://127.0.0.1:$port/hello" && break; sleep 0.05; done
rss() { awk '/^VmRSS/ {print $2 * 1024}' "/proc/$pid/status"; }
fds() { ls "/proc/$pid/fd" | wc -l; }
rss0=$(rss); fd0=$(fds)
PP_PORT=$port PP_N=$n PP_PID=$pid PP_TLS=${PP_IDLE_TLS:-} ruby -rsocket -ropenssl -e '
  port = Integer(ENV["PP_PORT"]); n = Integer(ENV["PP_N"])
  socks = Array.new(n) do
    s = Socket.tcp("127.0.0.1", port)
    if ENV["PP_TLS"] != ""
      ctx = OpenSSL::SSL::SSLContext.new
      ctx.verify_mode = OpenSSL::SSL::VERIFY_NONE
      s = OpenSSL::SSL::SSLSocket.new(s, ctx).tap { |t| t.sync_close = true; t.connect }
    end
    s.write("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
    buf = +""
    buf << s.readpartial(4096) until buf.include?("\r\n\r\n") && buf.end_with?("\n")
    s
  end
  sleep 2 # let the server settle (pools, timers)
  File.write(ENV.fetch("PP_DONE", "/dev/null"), "ok")
  $stdout.puts "open #{socks.size}"
  $stdout.flush
  sleep 3
  status = File.read("/proc/#{ENV["PP_PID"]}/status")[/VmRSS:\s+(\d+)/, 1].to_i * 1024
  fdn = Dir.children("/proc/#{ENV["PP_PID"]}/fd").size
  puts "rss_with #{status} fds_with #{fdn}"
  socks.each(&:close)
' > "$work/client.out"
read -r _ opened < <(grep '^open' "$work/client.out")
read -r _ rss1 _ fd1 < <(grep '^rss_with' "$work/client.out")
sleep 3 # a controller tick trims the heap (malloc_trim) once enough was freed
rss2=$(rss)
awk -v n="$opened" -v r0="$rss0" -v r1="$rss1" -v r2="$rss2" -v f0="$fd0" -v f1="$fd1" \
  -v tls="${PP_IDLE_TLS:+ (TLS)}" 'BEGIN {
  printf "idle keep-alive connections%s: %d\n", tls, n
  printf "server RSS before %.1f MiB, with them %.1f MiB, after they closed %.1f MiB\n", r0/1048576, r1/1048576, r2/1048576
  printf "descriptors before %d, with them %d\n", f0, f1
  printf "bytes per idle connection: %.0f\n", (r1 - r0) / n
}'
