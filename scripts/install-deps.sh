#!/usr/bin/env bash
# Installs every Debian package puma-plus needs to build, test and run, then the pinned
# RubyGems column of the test matrix into build/gems (scripts/install-gems.sh, Bundler).
# Idempotent: when everything is already installed it prints two lines and exits 0.
# Both README commands (make run, make test) call it; CI starts from a clean machine.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config clang-format clang libclang-rt-14-dev
  libuv1-dev node-llhttp
  libnghttp2-dev libngtcp2-dev libngtcp2-crypto-gnutls-dev libnghttp3-dev
  libgnutls28-dev libssl-dev zlib1g-dev
  libgsl-dev libsqlite3-dev sqlite3 libyaml-dev libjansson-dev libcunit1-dev
  gnuplot-nox
  ruby ruby-dev ruby-bundler ruby-rack puma ruby-sinatra ruby-minitest ruby-rails ruby-sqlite3 ruby-jbuilder ruby-redis
  nghttp2-client nghttp2-server openssl ngtcp2-client wrk curl valgrind procps python3 python3-h2 python3-websockets
  chromium
  redis-server
  haproxy prometheus iproute2 systemd
  linux-perf
  slurm-wlm munge parallel
)

missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == *"ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  # Another checkout of this machine may be installing at the same moment: wait for dpkg's lock.
  $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
  $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "install-deps: done"
fi

# Gems are never installed as root into the system: they go to build/gems of this checkout.
bash "$(dirname "$0")/install-gems.sh"
