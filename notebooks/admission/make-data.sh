#!/usr/bin/env bash
# Issue 27's data: pp-sim on the three scenarios here, then the same shapes measured against the
# real server with pp-bench soak, one configuration after the other in one run (shared machine:
# each phase's steal is in its row). BUILD= points at a build tree (default build/).
#   notebooks/admission/make-data.sh            # from the checkout's root; ~11 min
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
OUT=notebooks/admission/data
mkdir -p "$OUT"
for s in overload-cycles burst burst-fits; do
  for seed in 11 1 2; do
    "$BUILD"/sim/pp-sim run notebooks/admission/$s.yaml -s $seed >"$OUT/sim-$s-seed$seed.txt"
  done
done
POL=$(mktemp -d)
printf 'shed: {enabled: false}\n' >"$POL/noshed.yaml"
printf 'shed: {enabled: true, budget: 1s, rule: drain}\n' >"$POL/drain.yaml"
printf 'shed: {enabled: true, budget: 1s}\n' >"$POL/controlled.yaml" # the default rule: controlled
common=(-w 2 -t 4 -rate 100 -capacity 363.6 -body 0 -cancel 0 -recovery-gap 0 -cycles 3 -no-db)
for cfg in noshed drain controlled; do
  shed=(-shed)
  [[ $cfg == noshed ]] && shed=()
  # the overload cycles: 100 rps 10 s / 1,500 rps 12 s / 100 rps 10 s, three times
  "$BUILD"/bench/pp-bench soak "${common[@]}" "${shed[@]}" -policy "$POL/$cfg.yaml" \
    -steady 10s -overload 12s -overload-x 4.125 -recovery 10s -log-dir "$POL/log-$cfg" \
    >"$OUT/soak-overload-$cfg.txt" 2>&1 || true
done
for cfg in drain controlled; do
  # the bursts between 10 s of 100 rps, three times: 2x nominal capacity (727 rps) for 1 s,
  # and 1.3x (473 rps) for 1 s
  for x in 2 1.3; do
    "$BUILD"/bench/pp-bench soak "${common[@]}" -shed -policy "$POL/$cfg.yaml" \
      -steady 10s -overload 1s -overload-x $x -recovery 10s -log-dir "$POL/log-burst-$cfg" \
      >"$OUT/soak-burst$x-$cfg.txt" 2>&1 || true
  done
done
rm -rf "$POL"
