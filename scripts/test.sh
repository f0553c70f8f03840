#!/usr/bin/env bash
# Builds the default preset and runs the test suite without the `slow` label.
# (The README's test command.) CUDA tests skip with a reason where no GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
cmake --preset default >/dev/null
t0=$(date +%s)
cmake --build --preset default -j "$(nproc)"
echo "build: $(( $(date +%s) - t0 )) s"
ctest --test-dir build -LE slow --output-on-failure -j "$(nproc)"
