#!/usr/bin/env bash
# Builds the `bufferlab` program (default preset), showing each phase and the build's own
# progress, then runs it. Without arguments it runs the main job on the built-in default: one
# report, `bufferlab verify --preset qwen3-next-80b` — the model, run shape and target, what
# the verifier checked over every launchable pass and path, the result (exit 1 on findings),
# the slack table (what each buffer's plans really use) and the commands to try next.
# With arguments it runs `bufferlab ARGS...`, e.g. `bash scripts/run.sh plan --preset X`.
set -euo pipefail
cd "$(dirname "$0")/.."
# Progress goes to stderr, so `run.sh plan --json > plan.json` still writes only the JSON.
exec 3>&1 1>&2
echo "run.sh: [1/3] dependencies (scripts/setup-deps.sh installs only what is missing)"
bash scripts/setup-deps.sh
echo "run.sh: [2/3] configure (cmake --preset default: CPU, plus CUDA when nvcc is found)"
log=$(mktemp)  # cmake's configure chatter, shown only when it fails
cmake --preset default >"$log" 2>&1 || { cat "$log"; rm -f "$log"; exit 1; }
rm -f "$log"
echo "run.sh: [3/3] build bufferlab (a first build takes minutes; ccache makes later ones fast)"
cmake --build --preset default --target bufferlab -j "$(nproc)"
echo
exec 1>&3 3>&-
if [ $# -eq 0 ]; then
  echo "run.sh: bufferlab verify --preset qwen3-next-80b" >&2
  echo >&2
  exec build/tools/bufferlab verify --preset qwen3-next-80b
fi
exec build/tools/bufferlab "$@"
