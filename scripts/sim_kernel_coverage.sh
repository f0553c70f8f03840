#!/usr/bin/env bash
# The cuda-sim label's kernel coverage: every __global__ kernel of backends/cuda/src must have
# been launched by some test of the label. Usage: sim_kernel_coverage.sh LAUNCHED_FILE SRC_DIR.
# LAUNCHED_FILE holds one launched kernel name per line (tests/sim/coverage_recorder.cpp);
# template arguments are ignored ("mhc_norm_kernel<true>" covers mhc_norm_kernel). Prints the
# list, exits 1 when a kernel was never launched.
set -euo pipefail
launched_file="$1"
src_dir="$2"
[ -f "$launched_file" ] || { echo "cuda-sim coverage: no launches recorded in $launched_file"; exit 1; }
# The declarations may break after __launch_bounds__(...): read each file as one line.
mapfile -t kernels < <(for f in "$src_dir"/*.cu; do tr '\n' ' ' < "$f"; echo; done |
  grep -oE "__global__[[:space:]]+void([[:space:]]+__launch_bounds__\([^)]*\))?[[:space:]]+[A-Za-z_0-9]+" |
  awk '{print $NF}' | sort -u)
missing=0
echo "cuda-sim kernel coverage (${#kernels[@]} __global__ kernels in backends/cuda/src):"
for k in "${kernels[@]}"; do
  n=$(sed -E 's/<.*//' "$launched_file" | grep -cx "$k" || true)
  if [ "$n" -gt 0 ]; then
    printf '  launched  %-32s by %d test processes\n' "$k" "$n"
  else
    printf '  MISSING   %s\n' "$k"
    missing=$((missing + 1))
  fi
done
if [ "$missing" -gt 0 ]; then
  echo "cuda-sim coverage: $missing of ${#kernels[@]} kernels never launched"
  exit 1
fi
echo "cuda-sim coverage: all ${#kernels[@]} kernels launched"
