#!/usr/bin/env bash
# Installs BufferLab's build dependencies from Debian's packages — only the missing ones,
# quietly; safe to run again. The CUDA toolkit (/usr/local/cuda) is optional: without nvcc
# the CUDA backend is simply not built. Boost.Context runs the kernel simulator (cuda-sim).
# ccache is only a speed-up (cmake/BufferLabCcache.cmake uses it when found; CCACHE_DISABLE=1
# turns it off): the build never needs it.
set -euo pipefail

packages=(cmake ninja-build g++ libeigen3-dev librapidcheck-dev libgtest-dev libgmock-dev
  libbenchmark-dev nlohmann-json3-dev libcli11-dev libfmt-dev libboost-context-dev clang-format
  ccache)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
