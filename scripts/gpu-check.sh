#!/usr/bin/env bash
# gpu-check.sh — the CUDA check of /work/shared/GPU.md, in two halves:
#
#   scripts/gpu-check.sh build [BUILD_DIR]   on the build machine: a portable CUDA build
#                                            (sm_90, static CUDA runtime, libstdc++, libgcc,
#                                            libgomp) of the CUDA test and bench binaries,
#                                            stripped, plus the few shared libraries that have
#                                            no static archive here, in BUILD_DIR/lib.
#   scripts/gpu-check.sh [run] [BUILD_DIR]   on the GPU machine, from the repository root:
#                                            nvidia-smi, the CUDA tests (gtest XML),
#                                            compute-sanitizer memcheck + racecheck, the GPU
#                                            benchmark, a PyTorch side-by-side; each stage
#                                            under `timeout`, about 5 minutes in all.
#
# BUILD_DIR defaults to build-cuda. Logs go to $OUT (or ./gpu-out); the summary table is
# written there as each stage ends and printed last. Exit status of `run`: 0 when every stage
# that ran passed, 1 when one failed, 77 when no GPU was usable (the tests skipped).
set -u -o pipefail

MODE=run
case "${1:-}" in
  build | run) MODE=$1; shift ;;
  -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
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
      libcublas* | libcuda.so*) ;;  # from the GPU machine's own CUDA 13 (GPU.md)
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
    --gtest_filter='*/rows1_*:*/rows5_*:CudaRmsNorm.NonFinite*:CudaRmsNorm.Property*'
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

# 4. GPU benchmark: kernel vs device-to-device copy of the same bytes.
if [ ! -x "$BENCH_BIN" ]; then
  record cuda-bench FAIL 0 "$BENCH_BIN missing"
else
  run_stage cuda-bench 90 "$OUT/cuda-bench.log" "${OURS[@]}" "$BENCH_BIN" \
    --benchmark_out="$OUT/cuda-bench.json" --benchmark_out_format=json --benchmark_min_time=0.05
  if [ "$NO_GPU" -eq 1 ] || grep -q 'skipped: ' "$OUT/cuda-bench.log"; then
    record cuda-bench skipped "$SECS" "$(grep -m1 -oE "skipped: [^']*" "$OUT/cuda-bench.log")"
  elif [ "$RC" -ne 0 ]; then
    record cuda-bench "FAIL($RC)" "$SECS" "see cuda-bench.log"
  else
    best=$(grep -E 'BM_CudaRmsNorm' "$OUT/cuda-bench.log" | grep -oE 'copy_fraction=[0-9.]+' | sort -t= -k2 -g | tail -1)
    record cuda-bench ok "$SECS" "best ${best:-copy_fraction=?} (H200 copy ~4.3 TB/s)"
  fi
fi

# 5. PyTorch side-by-side: the same fused add + RMSNorm in eager PyTorch (and F.rms_norm where
#    it exists), same shapes and traffic formula, against our kernel's time from the bench.
cat > "$OUT/torch_rmsnorm.py" << 'PY'
import json, os, sys
import torch
out_dir = sys.argv[1]
ours = {}
try:
    with open(os.path.join(out_dir, "cuda-bench.json")) as f:
        for b in json.load(f)["benchmarks"]:
            if b["name"].startswith("BM_CudaRmsNorm/") and "kernel_us" in b:
                ours[b["name"].split("/")[1] + "/" + b["name"].split("/")[2]] = b["kernel_us"]
except Exception as e:
    print("no bench json:", e)
dev = torch.device("cuda")
print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
print(f"{'shape':<24}{'torch eager us':>16}{'F.rms_norm us':>15}{'ours us':>10}{'eager/ours':>12}{'GB/s ours':>11}")
def time_us(fn, reps=50):
    for _ in range(5): fn()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps): fn()
    e.record(); torch.cuda.synchronize()
    return 1e3 * s.elapsed_time(e) / reps
for rows in (64, 1024, 8192):
    for width in (4095, 4096, 7168):
        x = torch.randn(rows, width, device=dev).bfloat16()
        res = torch.randn(rows, width, device=dev).bfloat16()
        w = (0.25 * torch.randn(width, device=dev)).bfloat16()
        eps = 1e-6
        def eager():
            r = (res.float() + x.float()).bfloat16()
            rf = r.float()
            return (rf * torch.rsqrt(rf.pow(2).mean(-1, keepdim=True) + eps) * (1 + w.float())).bfloat16()
        t_eager = time_us(eager)
        t_fn = float("nan")
        if hasattr(torch.nn.functional, "rms_norm"):
            scale = (1 + w.float()).bfloat16()
            def fn():
                r = (res.float() + x.float()).bfloat16()
                return torch.nn.functional.rms_norm(r, (width,), weight=scale, eps=eps)
            t_fn = time_us(fn)
        key = f"rows:{rows}/width:{width}"
        mine = ours.get(key, float("nan"))
        traffic = 8 * rows * width + 2 * width
        print(f"{key:<24}{t_eager:>16.2f}{t_fn:>15.2f}{mine:>10.2f}{t_eager / mine:>12.2f}{traffic / mine / 1e3:>11.1f}")
PY
if [ "$NO_GPU" -eq 1 ]; then
  record torch skipped 0 "no usable GPU"
elif ! command -v python3 > /dev/null || ! timeout 60 python3 -c 'import torch' > /dev/null 2>&1; then
  record torch unavailable 0 "torch does not import here"
else
  run_stage torch 90 "$OUT/torch.log" python3 "$OUT/torch_rmsnorm.py" "$OUT"
  if [ "$RC" -eq 0 ]; then
    record torch ok "$SECS" "side-by-side table in torch.log"
  else
    record torch "FAIL($RC)" "$SECS" "$(tail -1 "$OUT/torch.log")"
  fi
fi

echo
echo "logs: $OUT   total $(($(date +%s) - START)) s of a ${BUDGET_S} s budget"
[ -f "$OUT/torch.log" ] && [ "$NO_GPU" -eq 0 ] && cat "$OUT/torch.log"
echo
cat "$SUMMARY"
if [ "$FAILED" -eq 1 ]; then exit 1; fi
if [ "$NO_GPU" -eq 1 ]; then exit 77; fi
exit 0
