#!/usr/bin/env bash
# gpu-check.sh — the CUDA check of docs/gpu-runs.md ("The GPU check recipe"), in two halves:
#
#   scripts/gpu-check.sh build [BUILD_DIR]   on the build machine: a portable CUDA build
#                                            (sm_90, static CUDA runtime, libstdc++, libgcc,
#                                            libgomp) of the CUDA test and bench binaries,
#                                            stripped, plus the few shared libraries that have
#                                            no static archive here, in BUILD_DIR/lib.
#   scripts/gpu-check.sh [run] [BUILD_DIR]   on the GPU machine, from the repository root:
#                                            nvidia-smi, the CUDA tests (gtest XML),
#                                            compute-sanitizer memcheck + racecheck, the GPU
#                                            benchmarks (RMSNorm, MoE, mHC; GDN / SSD cores
#                                            and attention apart), PyTorch side-by-sides of
#                                            all five (scripts/torch_*.py); each stage under
#                                            `timeout`, about 5 minutes in all.
#
# BUILD_DIR defaults to build-cuda. Logs go to $OUT (or ./gpu-out); the summary table is
# written there as each stage ends and printed last. Exit status of `run`: 0 when every stage
# that ran passed, 1 when one failed, 77 when no GPU was usable (the tests skipped).
set -u -o pipefail

MODE=run
case "${1:-}" in
  build | run) MODE=$1; shift ;;
  -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
esac
BUILD=${1:-build-cuda}
OUT=${OUT:-./gpu-out}
BUDGET_S=${GPU_CHECK_BUDGET_S:-300}
TEST_BIN="$BUILD/tests/bufferlab_cuda_tests"
BENCH_BIN="$BUILD/bench/bufferlab_cuda_bench"

# ---------------------------------------------------------------- build (build machine)
build() {
  local jobs=${JOBS:-2}
  # The `cuda` preset of CMakePresets.json: sm_90, static CUDA runtime, static libstdc++,
  # libgcc and libgomp (BUFFERLAB_PORTABLE).
  # (cmake/BufferLabCuda.cmake names the CUDA20 flag that CMake 3.25 lacks.)
  cmake --preset cuda -B "$BUILD" -DBUFFERLAB_BUILD_BENCH=ON || return 1
  cmake --build "$BUILD" -j "$jobs" --target bufferlab_cuda_tests bufferlab_cuda_bench || return 1
  strip "$TEST_BIN" "$BENCH_BIN" || return 1
  # Shared libraries this image has no static archive of (fmt, Google Benchmark) travel along;
  # the CUDA runtime, libstdc++, libgcc and libgomp are linked statically.
  mkdir -p "$BUILD/lib"
  local lib
  for lib in $(ldd "$TEST_BIN" "$BENCH_BIN" | awk '/=> \// {print $3}' | sort -u); do
    case "$(basename "$lib")" in
      libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux*) ;;
      libcublas* | libcuda.so*) ;;  # from the GPU machine's own CUDA 13 (docs/gpu-runs.md)
      *) cp -L "$lib" "$BUILD/lib/" ;;
    esac
  done
  echo "carried libraries:"; ls -l "$BUILD/lib"
  echo "dynamic dependencies left:"; ldd "$TEST_BIN" "$BENCH_BIN" | awk '/=>/ {print "  " $1}' | sort -u
  local total
  total=$(du -cb "$TEST_BIN" "$BENCH_BIN" "$BUILD/lib" | tail -1 | cut -f1)
  echo "carry: $TEST_BIN $BENCH_BIN $BUILD/lib = $((total / 1024)) KiB (limit 64 MiB)"
  [ "$total" -lt $((64 * 1024 * 1024)) ]
}

if [ "$MODE" = build ]; then
  build
  exit $?
fi

# ---------------------------------------------------------------- run (GPU machine)
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
START=$(date +%s)
FAILED=0
NO_GPU=0
printf '%-12s %-12s %6s  %s\n' stage status secs detail > "$SUMMARY"

# record STAGE STATUS SECONDS DETAIL — one summary row, written as soon as a stage ends.
record() {
  printf '%-12s %-12s %6s  %s\n' "$1" "$2" "$3" "$4" | tee -a "$SUMMARY"
  case "$2" in FAIL* | TIMEOUT*) FAILED=1 ;; esac
}

# Seconds a stage may take: its own limit, capped by what is left of the budget.
limit() {
  local left=$((BUDGET_S - ($(date +%s) - START)))
  [ "$left" -lt "$1" ] && echo "$left" || echo "$1"
}

# run_stage NAME LIMIT_S LOG CMD... — runs CMD under timeout, output to LOG; sets RC and SECS.
run_stage() {
  local name=$1 lim log=$3
  lim=$(limit "$2")
  shift 3
  local t0
  t0=$(date +%s)
  if [ "$lim" -le 5 ]; then
    RC=124; SECS=0
    echo "budget exhausted before $name" > "$log"
    return
  fi
  timeout --kill-after=10 "$lim" "$@" > "$log" 2>&1
  RC=$?
  SECS=$(($(date +%s) - t0))
}

gtest_count() {  # gtest_count LOG WORD → N from "[  WORD  ] N tests"
  grep -oE "\[ +$2 +\] [0-9]+ tests?" "$1" | head -1 | grep -oE '[0-9]+ ' | tr -d ' ' || true
}

{
  echo "gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "build dir: $BUILD"
} | tee "$OUT/header.txt"

# Our binaries load what the build carried (BUILD/lib) and the GPU machine's own CUDA
# libraries (cuBLAS for later ops). Only our binaries: PyTorch keeps its own libstdc++.
LIBS="$BUILD/lib"
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [ -d "$d" ] && LIBS="$LIBS:$d"; done
if command -v python3 > /dev/null; then
  TORCH_CUBLAS=$(timeout 30 python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2> /dev/null || true)
  [ -n "$TORCH_CUBLAS" ] && LIBS="$LIBS:$TORCH_CUBLAS"
fi
OURS=(env "LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")

# 1. nvidia-smi
if command -v nvidia-smi > /dev/null; then
  run_stage nvidia-smi 20 "$OUT/nvidia-smi.log" nvidia-smi
  if [ "$RC" -eq 0 ]; then
    record nvidia-smi ok "$SECS" "$(grep -m1 -oE 'NVIDIA [A-Z][A-Za-z0-9 -]+' "$OUT/nvidia-smi.log" | head -1)"
  else
    record nvidia-smi "FAIL($RC)" "$SECS" "$(tail -1 "$OUT/nvidia-smi.log")"
  fi
else
  record nvidia-smi absent 0 "nvidia-smi not found: no NVIDIA driver on this machine"
fi

# 2. CUDA tests, run directly (CTest files hold the build machine's paths).
if [ ! -x "$TEST_BIN" ]; then
  record cuda-tests FAIL 0 "$TEST_BIN missing: run 'scripts/gpu-check.sh build' first"
else
  run_stage cuda-tests 120 "$OUT/cuda-tests.log" "${OURS[@]}" "$TEST_BIN" --gtest_output="xml:$OUT/cuda-tests.xml"
  passed=$(gtest_count "$OUT/cuda-tests.log" PASSED)
  skipped=$(gtest_count "$OUT/cuda-tests.log" SKIPPED)
  failed=$(gtest_count "$OUT/cuda-tests.log" FAILED)
  detail="passed ${passed:-0}, failed ${failed:-0}, skipped ${skipped:-0}"
  if [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then
    record cuda-tests TIMEOUT "$SECS" "$detail"
  elif [ "$RC" -ne 0 ]; then
    record cuda-tests "FAIL($RC)" "$SECS" "$detail; see cuda-tests.log"
  elif [ "${skipped:-0}" -gt 0 ] && [ "${passed:-0}" -eq 0 ]; then
    NO_GPU=1
    reason=$(grep -m1 -A1 ': Skipped' "$OUT/cuda-tests.log" | tail -1)
    record cuda-tests SKIPPED "$SECS" "$detail: $reason"
  else
    record cuda-tests ok "$SECS" "$detail"
  fi
fi

# 3. compute-sanitizer: memcheck, and racecheck (the kernel reduces through shared memory).
SANITIZER=$(command -v compute-sanitizer || true)
for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
  [ -z "$SANITIZER" ] && [ -x "$c" ] && SANITIZER=$c
done
for tool in memcheck racecheck; do
  if [ "$NO_GPU" -eq 1 ]; then
    record "$tool" skipped 0 "no usable GPU"
    continue
  fi
  if [ -z "$SANITIZER" ] || [ ! -x "$TEST_BIN" ]; then
    record "$tool" unavailable 0 "sanitizer unavailable (compute-sanitizer not found)"
    continue
  fi
  extra=()
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  [ "$tool" = racecheck ] && extra=(--racecheck-report all)
  # Fewer property cases and the small shapes only: the sanitizer slows kernels ~100x.
  RC_PARAMS="max_success=10" run_stage "$tool" 75 "$OUT/sanitizer-$tool.log" \
    "${OURS[@]}" "$SANITIZER" --tool "$tool" "${extra[@]}" --error-exitcode 99 "$TEST_BIN" \
    --gtest_filter='*/rows1_*:*/rows5_*:RmsNormKernel.NonFinite*:RmsNormKernel.Property*:MoeRoutingKernel.*:MoeFfnKernel.*:CudaMoe.*:CudaMhcSetup.*:MhcSinkhornKernel.ColumnsSum*:MhcPreKernel.NonFinite*:MhcPreKernel.Huge*:MhcPreKernel.Batched*:MhcPreKernel.Refuses*:MhcExpandKernel.*:MhcPostKernel.BothForms*:MhcLowRankKernel.NonFinite*:MhcLowRankKernel.Huge*:MhcErrorsKernel.*:GdnKernel*:Mamba2Kernel*:CudaGdn.*:CudaSsd.*-MoeFfnKernel.PropertyChain*'
  summary_line=$(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer-$tool.log" | sed 's/=* *//')
  if grep -qiE 'unable to|not supported|insufficient permission|failed to (initialize|launch)' "$OUT/sanitizer-$tool.log" &&
    [ -z "$summary_line" ]; then
    record "$tool" unavailable "$SECS" "sanitizer unavailable: $(grep -m1 -iE 'unable to|not supported|permission|failed to' "$OUT/sanitizer-$tool.log")"
  elif [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then
    record "$tool" TIMEOUT "$SECS" "${summary_line:-no summary}"
  elif [ "$RC" -eq 0 ]; then
    record "$tool" ok "$SECS" "${summary_line:-clean}"
  else
    record "$tool" "FAIL($RC)" "$SECS" "${summary_line:-see sanitizer-$tool.log}"
  fi
done

# bench_summary KIND JSON — one line from scripts/bench_roofline_summary.py: per op family of
# KIND (moe, mhc, gdn-ssd) the best roofline_fraction of the bench JSON, and how many of its
# benchmarks did not run (an op the backend refused: "not run: ...").
bench_summary() {
  python3 scripts/bench_roofline_summary.py "$1" "$2" 2> /dev/null ||
    echo "${1/-//}: no summary (python3 or the bench JSON missing)"
}

# 4. GPU benchmarks: the RMSNorm kernel vs device-to-device copy of the same bytes; the MoE
#    ops (bench_cuda_moe.cu) and the mHC ops (bench_cuda_mhc.cu) against the H200 roofline
#    (4.3 TB/s, 790 TFLOP/s bf16; the mHC math against the FP32 peak). The GDN / SSD and
#    attention benchmarks run in stages 4b and 4c under their own caps (the leading '-'
#    negates the filter).
if [ ! -x "$BENCH_BIN" ]; then
  record cuda-bench FAIL 0 "$BENCH_BIN missing"
else
  run_stage cuda-bench 150 "$OUT/cuda-bench.log" "${OURS[@]}" "$BENCH_BIN" \
    --benchmark_filter='-BM_CudaGdn|BM_CudaSsd|BM_CudaAttn' \
    --benchmark_out="$OUT/cuda-bench.json" --benchmark_out_format=json --benchmark_min_time=0.05
  if [ "$NO_GPU" -eq 1 ] || grep -q 'skipped: ' "$OUT/cuda-bench.log"; then
    record cuda-bench skipped "$SECS" "$(grep -m1 -oE "skipped: [^']*" "$OUT/cuda-bench.log")"
  elif [ "$RC" -ne 0 ]; then
    record cuda-bench "FAIL($RC)" "$SECS" "see cuda-bench.log"
  else
    best=$(grep -E 'BM_CudaRmsNorm' "$OUT/cuda-bench.log" | grep -oE 'copy_fraction=[0-9.]+' | sort -t= -k2 -g | tail -1)
    record cuda-bench ok "$SECS" "best ${best:-copy_fraction=?} (H200 copy ~4.3 TB/s); $(bench_summary moe "$OUT/cuda-bench.json"); $(bench_summary mhc "$OUT/cuda-bench.json")"
  fi
fi

# 4b. GPU benchmarks of the GDN and Mamba-2 SSD cores (bench_cuda_gdn_mamba2.cu): chunked vs the
#     recurrence on the same inputs, each against the roofline (4.3 TB/s, FP32 peak).
if [ ! -x "$BENCH_BIN" ]; then
  record cuda-bench-ssm FAIL 0 "$BENCH_BIN missing"
else
  run_stage cuda-bench-ssm 60 "$OUT/cuda-bench-ssm.log" "${OURS[@]}" "$BENCH_BIN" \
    --benchmark_filter='BM_CudaGdn|BM_CudaSsd' \
    --benchmark_out="$OUT/cuda-bench-ssm.json" --benchmark_out_format=json --benchmark_min_time=0.05
  if [ "$NO_GPU" -eq 1 ] || grep -q 'skipped: ' "$OUT/cuda-bench-ssm.log"; then
    record cuda-bench-ssm skipped "$SECS" "$(grep -m1 -oE "skipped: [^']*" "$OUT/cuda-bench-ssm.log")"
  elif [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then
    record cuda-bench-ssm TIMEOUT "$SECS" "partial results in cuda-bench-ssm.log"
  elif [ "$RC" -ne 0 ]; then
    record cuda-bench-ssm "FAIL($RC)" "$SECS" "see cuda-bench-ssm.log"
  else
    record cuda-bench-ssm ok "$SECS" "$(bench_summary gdn-ssd "$OUT/cuda-bench-ssm.json")"
  fi
fi

# 4c. GPU benchmarks of the attention cores (bench_cuda_attention.cu): prefill and decode (one
#     split, split-K + merge) on qwen3-next / gpt-oss (full and sliding) / llama shapes, against
#     the roofline (4.3 TB/s, the FP32 peak; tc_roofline_fraction: the BF16 tensor-core peak).
if [ ! -x "$BENCH_BIN" ]; then
  record cuda-bench-attn FAIL 0 "$BENCH_BIN missing"
else
  run_stage cuda-bench-attn 90 "$OUT/cuda-bench-attn.log" "${OURS[@]}" "$BENCH_BIN" \
    --benchmark_filter='BM_CudaAttn' \
    --benchmark_out="$OUT/cuda-bench-attn.json" --benchmark_out_format=json --benchmark_min_time=0.05
  if [ "$NO_GPU" -eq 1 ] || grep -q 'skipped: ' "$OUT/cuda-bench-attn.log"; then
    record cuda-bench-attn skipped "$SECS" "$(grep -m1 -oE "skipped: [^']*" "$OUT/cuda-bench-attn.log")"
  elif [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then
    record cuda-bench-attn TIMEOUT "$SECS" "partial results in cuda-bench-attn.log"
  elif [ "$RC" -ne 0 ]; then
    record cuda-bench-attn "FAIL($RC)" "$SECS" "see cuda-bench-attn.log"
  else
    record cuda-bench-attn ok "$SECS" "$(bench_summary attn "$OUT/cuda-bench-attn.json")"
  fi
fi

# 5. PyTorch side-by-sides (scripts/torch_*.py): the same ops in eager PyTorch on the shapes of
#    our benchmarks, timed with CUDA events, next to our kernel times from the bench JSON.
TORCH_OK=0
if [ "$NO_GPU" -eq 0 ] && command -v python3 > /dev/null && timeout 60 python3 -c 'import torch' > /dev/null 2>&1; then
  TORCH_OK=1
fi

# torch_ready STAGE SCRIPT — records STAGE as skipped / unavailable / FAIL and fails when the
# side-by-side cannot run here (no GPU, no torch, SCRIPT missing).
torch_ready() {
  if [ "$NO_GPU" -eq 1 ]; then
    record "$1" skipped 0 "no usable GPU"
  elif [ "$TORCH_OK" -eq 0 ]; then
    record "$1" unavailable 0 "torch does not import here"
  elif [ ! -f "$2" ]; then
    record "$1" FAIL 0 "$2 missing (run from the repository root)"
  else
    return 0
  fi
  return 1
}

# torch_stage STAGE CAP MARGIN SCRIPT — a side-by-side that takes OUT_DIR BUDGET_S, under CAP
# seconds; it stops starting new cases MARGIN seconds before its limit, so the table in
# $OUT/STAGE.log ends cleanly. Its last line (the torch/ours geomean) is the summary detail.
torch_stage() {
  local stage=$1 cap=$2 margin=$3 script=$4 log="$OUT/$1.log" lim
  torch_ready "$stage" "$script" || return 0
  lim=$(limit "$cap")
  run_stage "$stage" "$cap" "$log" python3 "$script" "$OUT" "$((lim - margin))"
  if [ "$RC" -eq 0 ]; then
    record "$stage" ok "$SECS" "$(tail -1 "$log")"
  elif [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then
    record "$stage" TIMEOUT "$SECS" "partial table in $stage.log"
  else
    record "$stage" "FAIL($RC)" "$SECS" "$(tail -1 "$log")"
  fi
}

# 5a. The fused add + RMSNorm in eager PyTorch (and F.rms_norm where it exists), same shapes
#     and traffic formula (scripts/torch_rmsnorm.py).
if torch_ready torch scripts/torch_rmsnorm.py; then
  run_stage torch 90 "$OUT/torch.log" python3 scripts/torch_rmsnorm.py "$OUT"
  if [ "$RC" -eq 0 ]; then
    record torch ok "$SECS" "side-by-side table in torch.log"
  else
    record torch "FAIL($RC)" "$SECS" "$(tail -1 "$OUT/torch.log")"
  fi
fi

# 5b. The MoE ops (scripts/torch_moe.py), same shapes as bench_cuda_moe.cu (read from each
#     benchmark's name): router (torch.matmul; bf16, bf16 in / fp32 out, fp32), top-k
#     (torch.topk + softmax / sigmoid + bias), expert GEMMs (a dense matmul of the same M, N,
#     K; a per-expert loop; torch._grouped_mm where it exists), LM head and dense GEMMs
#     (torch.matmul bf16). Our times come from cuda-bench.json.
torch_stage torch-moe 100 15 scripts/torch_moe.py

# 5c. The mHC ops (scripts/torch_mhc.py: the same math in eager PyTorch on the shapes of
#     bench_cuda_mhc.cu, our times from cuda-bench.json).
torch_stage torch-mhc 60 10 scripts/torch_mhc.py

# 5d. The GDN and SSD cores (scripts/torch_gdn_mamba2.py: per-token loops and chunked forms in
#     eager PyTorch on the shapes of bench_cuda_gdn_mamba2.cu, our times from cuda-bench-ssm.json).
torch_stage torch-gdn-ssd 60 10 scripts/torch_gdn_mamba2.py

# 5e. The attention cores (scripts/torch_attention.py: F.scaled_dot_product_attention in BF16 on
#     the shapes of bench_cuda_attention.cu, contiguous and paged-gathered K / V for decode; our
#     times from cuda-bench-attn.json). Skipped with a message where torch does not import.
torch_stage torch-attn 60 10 scripts/torch_attention.py

echo
echo "logs: $OUT   total $(($(date +%s) - START)) s of a ${BUDGET_S} s budget"
[ -f "$OUT/torch.log" ] && [ "$NO_GPU" -eq 0 ] && cat "$OUT/torch.log"
[ -f "$OUT/torch-moe.log" ] && [ "$NO_GPU" -eq 0 ] && { echo; cat "$OUT/torch-moe.log"; }
[ -f "$OUT/torch-mhc.log" ] && [ "$NO_GPU" -eq 0 ] && { echo; cat "$OUT/torch-mhc.log"; }
[ -f "$OUT/torch-gdn-ssd.log" ] && [ "$NO_GPU" -eq 0 ] && { echo; cat "$OUT/torch-gdn-ssd.log"; }
[ -f "$OUT/torch-attn.log" ] && [ "$NO_GPU" -eq 0 ] && { echo; cat "$OUT/torch-attn.log"; }
echo
cat "$SUMMARY"
if [ "$FAILED" -eq 1 ]; then exit 1; fi
if [ "$NO_GPU" -eq 1 ]; then exit 77; fi
exit 0
