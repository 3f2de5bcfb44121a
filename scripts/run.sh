#!/usr/bin/env bash
# The README's main job. Until the server lands this runs the simulator on the default
# scenario; scripts/run.sh is the one place to change when that moves.
set -euo pipefail
build=${1:-build}
if [[ -x "$build/sim/pp-sim" ]]; then
  exec "$build/sim/pp-sim" run scenarios/step-mix.yaml --timeline
fi
echo "run: nothing to run yet ($build/sim/pp-sim not built)" >&2
exit 1
