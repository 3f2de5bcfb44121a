#!/usr/bin/env bash
# Installs the pinned RubyGems column of the test matrix (issue 10) into a project-local
# GEM_HOME, never into the system and never committed:
#   scripts/install-gems.sh [GEM_HOME]      (default: build/gems of this checkout)
# Each app set is a committed Gemfile + Gemfile.lock under tests/apps/gemfiles/<set>/; Bundler
# installs exactly the locked versions (BUNDLE_FROZEN: a lockfile that no longer matches its
# Gemfile is an error, not a silent re-resolve). Idempotent: `bundle check` answers in about a
# second when everything is there, and then nothing is fetched.
# Debian's column (rack 2.2, rails 6.1, sinatra 3, puma 5.6.5) is Debian packages, installed
# by scripts/install-deps.sh; this script needs ruby and bundler from there.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
GEM_HOME=${1:-$ROOT/build/gems}
mkdir -p "$GEM_HOME"
GEM_HOME=$(cd "$GEM_HOME" && pwd)
export GEM_HOME BUNDLE_FROZEN=true
# Bundler must not write .bundle/ into the checkout nor read a user's ~/.bundle settings.
export BUNDLE_APP_CONFIG="$GEM_HOME/.bundle-config" BUNDLE_USER_HOME="$GEM_HOME/.bundle-home"
unset BUNDLE_PATH BUNDLE_DEPLOYMENT BUNDLE_WITHOUT

command -v bundle >/dev/null || { echo "install-gems: bundler missing (Debian package ruby-bundler)" >&2; exit 1; }

for gemfile in "$ROOT"/tests/apps/gemfiles/*/Gemfile; do
  set_name=$(basename "$(dirname "$gemfile")")
  export BUNDLE_GEMFILE=$gemfile
  if bundle check >/dev/null 2>&1; then
    echo "install-gems: $set_name: all locked gems present in $GEM_HOME"
    continue
  fi
  echo "install-gems: $set_name: installing the locked gems into $GEM_HOME"
  if ! bundle install --jobs 2 --retry 2 --quiet; then
    echo "install-gems: $set_name: bundle install failed (Gemfile.lock: $gemfile.lock)" >&2
    exit 1
  fi
  bundle check >/dev/null || { echo "install-gems: $set_name: still incomplete after install" >&2; exit 1; }
  echo "install-gems: $set_name: done"
done
