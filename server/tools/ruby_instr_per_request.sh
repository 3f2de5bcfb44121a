#!/usr/bin/env bash
# Instructions per /hello request of the Ruby worker process, under callgrind (repeatable,
# unlike timings on a shared machine), plus its Ruby allocations per request (GC.stat).
#
# The server is started normally (not under valgrind) with 1 worker x 1 thread on
# tests/apps/allocs/config.ru (the benchmark app) wrapped in two marker routes, and `-ruby`
# pointing at a wrapper that runs the shepherd under `valgrind --tool=callgrind`; the worker
# is the shepherd's fork, so it runs under callgrind too. callgrind_control cannot reach a
# forked child (valgrind drops the child's gdbserver after fork), so the worker marks the
# measured intervals itself: GET /__cg/zero calls getpgid(2) and GET /__cg/dump getsid(2),
# libc functions nothing else in the worker calls, and callgrind runs with
# --zero-before=getpgid --dump-before=getsid. Both answer GC.stat(:total_allocated_objects).
# After a warm-up: zero, N keep-alive /hello requests on one connection (h2load), dump,
# zero, 2N requests, dump. Prints:
#   total/req     the N run's instructions (Ir) / N (the two marker requests included)
#   marginal/req  (the 2N run minus the N run) / N: the cost of one more request
#   allocs/req    Ruby objects: (the 2N run's GC.stat delta minus the N run's) / N
# and, with PP_RUBY_INSTR_TOP=K (default 25; 0: none), the top K functions of the marginal
# requests by inclusive and by self cost (callgrind_annotate on each dump, N from 2N).
# libruby is stripped here: its static functions (the VM loop, method dispatch) show as
# addresses, its exported ones (rb_*) by name. The worker's monitor thread (heartbeats)
# is counted too; it costs about the same in both runs, so it mostly cancels out.
#
#   server/tools/ruby_instr_per_request.sh build/server/puma-plus-server [N=2000]
#
# The worker loads the gem's C codec from build/gem/ext-lib (RUBYLIB), as the e2e tests do;
# PUMA_PLUS_PURE_RUBY=1 measures the pure-Ruby codec instead. The codec in use is printed.
# PP_GEM_DIR and PP_EXT_LIB measure another copy of the gem and its built extension (an
# older commit's, say). PP_SERVER_ARGS adds server flags (e.g. "-request-timeout 30s", which
# turns on the worker's timeout machinery).
# PP_RUBY_INSTR_KEEP=1 keeps the work directory (dumps, logs) and prints its path.
# With PP_INSTR_CHECK=FILE it compares marginal/req with the baseline in FILE (lines "codec
# instructions") and exits 1 when it grew more than 20%, or when FILE has no line for the codec
# in use (the ctest ruby_instr_per_request does this with server/tools/ruby_instr_baseline.txt).
set -euo pipefail
bin=$(realpath "$1"); n=${2:-2000}
top=${PP_RUBY_INSTR_TOP:-25}
repo=$(cd "$(dirname "$0")/../.." && pwd)
. "$repo/server/tools/instr_check.sh"
gem_dir=${PP_GEM_DIR:-$repo/gem}
ext=${PP_EXT_LIB:-$(dirname "$bin")/../gem/ext-lib}
for tool in valgrind callgrind_annotate h2load curl ruby; do
  command -v "$tool" > /dev/null || { echo "ruby_instr_per_request: $tool missing" >&2; exit 1; }
done
[[ -n ${PUMA_PLUS_PURE_RUBY:-} || -e $ext/puma_plus/puma_plus_ext.so ]] ||
  { echo "ruby_instr_per_request: $ext/puma_plus/puma_plus_ext.so missing (build the gem's extension)" >&2; exit 1; }
work=$(mktemp -d /tmp/pp-rinstr.XXXXXX)
port=$((20000 + RANDOM % 20000))

cat > "$work/config.ru" << EOF
# frozen_string_literal: true

# The allocations app plus the callgrind markers (server/tools/ruby_instr_per_request.sh).
inner = Rack::Builder.parse_file("$repo/tests/apps/allocs/config.ru")
inner = inner[0] if inner.is_a?(Array) # Rack 2 answers [app, options]
marker = lambda do |env|
  case env["PATH_INFO"]
  when "/__cg/zero" then Process.getpgid(0)
  when "/__cg/dump" then Process.getsid(0)
  else return inner.call(env)
  end
  text = "#{GC.stat(:total_allocated_objects)} #{PumaPlus::Wire.codec}"
  [200, { "content-type" => "text/plain", "content-length" => text.bytesize.to_s }, [text]]
end
run marker
EOF

# The Ruby "interpreter" the server starts for its shepherd: ruby under callgrind. Forked
# workers stay under it; %p names each process's output after its own pid.
cat > "$work/ruby-callgrind" << EOF
#!/bin/sh
exec valgrind --tool=callgrind --callgrind-out-file=$work/cg.out.%p --dump-instr=no \\
  --compress-strings=no --compress-pos=no --zero-before=getpgid --dump-before=getsid \\
  --log-file=$work/valgrind.%p.log $(command -v ruby) "\$@"
EOF
chmod +x "$work/ruby-callgrind"

RUBYLIB=$ext${RUBYLIB:+:$RUBYLIB} setsid "$bin" -app "$work/config.ru" -workers 1 -threads 1 \
  -listen "127.0.0.1:$port" -control off -quiet -ruby "$work/ruby-callgrind" ${PP_SERVER_ARGS:-} \
  -runtime-dir "$work/rt" -gem-dir "$gem_dir" > "$work/server.log" 2>&1 < /dev/null &
pid=$!
cleanup() {
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [[ -n ${PP_RUBY_INSTR_KEEP:-} ]]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
url=http://127.0.0.1:$port
up=0
for _ in $(seq 3000); do # the shepherd boots under callgrind: a minute or more
  if curl -fs -o /dev/null "$url/hello"; then up=1; break; fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
[[ $up == 1 ]] || { echo "ruby_instr_per_request: the server did not answer"; cat "$work/server.log"; exit 1; } >&2

load() { # $1 = requests, one keep-alive connection
  h2load --h1 -n "$1" -c 1 "$url/hello" > "$work/h2load.out"
  grep -q "$1 succeeded, 0 failed, 0 errored" "$work/h2load.out" || { cat "$work/h2load.out" >&2; exit 1; }
}
mark() { # $1 = zero | dump; prints the marker's answer (allocated objects, codec)
  curl -fs "$url/__cg/$1" || { echo "ruby_instr_per_request: GET /__cg/$1 failed" >&2; exit 1; }
}
dump() { # $1 = dump number; dumps the counters since the last zero; prints allocated objects, file
  local answer f=
  answer=$(mark dump)
  for _ in $(seq 600); do
    f=$(compgen -G "$work/cg.out.*.$1" | head -1 || true)
    [[ -n $f ]] && grep -q '^totals:' "$f" && break
    sleep 0.05
  done
  [[ -n $f ]] && grep -q '^totals:' "$f" || { echo "ruby_instr_per_request: no dump number $1 in $work" >&2; exit 1; }
  echo "${answer%% *} $f"
}
ir() { awk '$1=="totals:" {print $2}' "$1"; } # since the last zero ("summary:" is since the fork)

load 500 # warm-up: method caches, the heap, interned keys
load 500
read -r a0 codec <<< "$(mark zero)"
load "$n"
read -r a1 f1 <<< "$(dump 1)"
read -r a2 _ <<< "$(mark zero)"
load $((2 * n))
read -r a3 f2 <<< "$(dump 2)"
i1=$(ir "$f1"); i2=$(ir "$f2")
marginal=$(((i2 - i1) / n))
printf '%-7s %7s %12s %13s %11s   %s\n' codec N total/req marginal/req allocs/req "command (N)"
printf '%-7s %7d %12d %13d %11s   h2load --h1 -n %d -c 1 %s/hello (1 worker x 1 thread)\n' \
  "$codec" "$n" $((i1 / n)) "$marginal" \
  "$(awk -v a=$((a1 - a0)) -v b=$((a3 - a2)) -v n="$n" 'BEGIN {printf "%.2f", (b - a) / n}')" "$n" "$url"
status=0
if [[ -n ${PP_INSTR_CHECK:-} ]]; then
  instr_check ruby_instr_per_request "$codec" "$marginal" "$PP_INSTR_CHECK" || status=1
fi

[[ $top -gt 0 ]] || exit $status
# The marginal requests by function: each function's self and inclusive cost in the 2N dump
# minus the N dump, over N. Read from the dumps directly: self = the cost lines under fn=,
# inclusive = self + the cost lines after its calls= (a recursive cycle counts each level).
fn_costs() { # $1 = dump; prints "self<TAB>inclusive<TAB>function [object]"
  awk '/^ob=/ {ob = substr($0, 4); next}
       /^fn=/ {fn = substr($0, 4) " [" ob "]"; seen[fn] = 1; next}
       /^calls=/ {call = 1; next}
       /^[0-9]/ {if (call) {incl[fn] += $2; call = 0} else {self[fn] += $2; incl[fn] += $2}; next}
       END {for (f in seen) printf "%d\t%d\t%s\n", self[f], incl[f], f}' "$1"
}
fn_costs "$f1" > "$f1.fn"; fn_costs "$f2" > "$f2.fn"
marginal_fn() { # $1 = column (1 self, 2 inclusive)
  awk -F'\t' -v n="$n" -v c="$1" 'NR == FNR {a[$3] = $c; next} {printf "%10.1f  %s\n", ($c - a[$3]) / n, $3}' \
    "$f1.fn" "$f2.fn" | sort -rn | head -"$top"
}
echo; echo "top $top functions by self cost, instructions per marginal request:"; marginal_fn 1
echo; echo "top $top functions by inclusive cost, instructions per marginal request:"; marginal_fn 2
echo; echo "self cost by object file, instructions per marginal request:"
awk -F'\t' -v n="$n" 'NR == FNR {o = $3; sub(/.*\[/, "", o); a[o] += $1; next}
  {o = $3; sub(/.*\[/, "", o); b[o] += $1} END {for (o in b) printf "%10.1f  %s\n", (b[o] - a[o]) / n, substr(o, 1, length(o) - 1)}' \
  "$f1.fn" "$f2.fn" | sort -rn | head -8
exit $status
