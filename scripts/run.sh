#!/usr/bin/env bash
# Builds the `bufferlab` program (default preset) and runs it. Without arguments it runs the
# main job on the built-in default: the arena of qwen3-next-80b (`bufferlab plan`), then the
# static verifier over every launchable pass and path (`bufferlab verify`; exit 1 on findings).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default --target bufferlab -j "$(nproc)" >/dev/null
if [ $# -eq 0 ]; then
  build/tools/bufferlab plan --preset qwen3-next-80b
  echo
  exec build/tools/bufferlab verify --preset qwen3-next-80b
fi
exec build/tools/bufferlab "$@"
