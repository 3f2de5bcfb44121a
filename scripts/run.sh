#!/usr/bin/env bash
# The README's main job: puma-plus-server in the foreground serving the benchmark Rack app
# (scenarios/apps/mix/config.ru) with 2 workers x 5 threads and autoscaling up to 4 workers.
#   http://127.0.0.1:9292/hello, /mix/<cpu_ms>/<sleep_ms>, /echo, /stream/<n>
#   http://127.0.0.1:9293/stats?pretty=1 and /metrics
# Ctrl-C drains in-flight requests and exits. Extra arguments go to the server, e.g.
#   make run ARGS="-listen 127.0.0.1:8080"
# `make sim` runs the simulator on the default scenario instead.
set -euo pipefail
build=${1:-build}
shift || true
root=$(cd "$(dirname "$0")/.." && pwd)
server="$build/server/puma-plus-server"
if [[ ! -x "$server" ]]; then
  echo "run: $server is not built (run make build)" >&2
  exit 1
fi
# The control app is off unless -control names a place (as puma's): this job turns it on.
exec "$server" -app "$root/scenarios/apps/mix/config.ru" -workers 2 -threads 5 -control 127.0.0.1:9293 \
  -autoscale -min-workers 2 -max-workers 4 -decision-log "$build/decisions.jsonl" "$@"
