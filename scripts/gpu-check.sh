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
#                                            benchmarks (RMSNorm, MoE, mHC; GDN / SSD cores
#                                            apart), PyTorch side-by-sides of all four
#                                            (scripts/torch_mhc.py, torch_gdn_ssd.py); each
#                                            stage under `timeout`, about 5 minutes in all.
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
    --gtest_filter='*/rows1_*:*/rows5_*:CudaRmsNorm.NonFinite*:CudaRmsNorm.Property*:CudaMoe.*:CudaMhcSetup.*:MhcSinkhornKernel.ColumnsSum*:MhcPreKernel.NonFinite*:MhcPreKernel.Huge*:MhcPreKernel.Batched*:MhcPreKernel.Refuses*:MhcExpandKernel.*:MhcPostKernel.BothForms*:MhcLowRankKernel.NonFinite*:MhcLowRankKernel.Huge*:MhcErrorsKernel.*:CudaGdn*:CudaSsd*'
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

# moe_summary JSON — the best roofline_fraction per MoE op family of the bench JSON, and how
# many MoE benchmarks did not run (an op the backend refused: "not run: ...").
moe_summary() {
  python3 - "$1" << 'PY' 2> /dev/null || echo "moe: no summary (python3 or the bench JSON missing)"
import json, sys
families = {"BM_CudaMoeRouter": "router", "BM_CudaMoeTopK": "topk",
            "BM_CudaMoeExpertGemm": "experts", "BM_CudaMoeLmHead": "lm_head",
            "BM_CudaMoeGemm": "gemm"}
best, total, not_run = {}, 0, 0
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    family = families.get(b["name"].split("/")[0])
    if family is None:
        continue
    total += 1
    if b.get("error_occurred") or "roofline_fraction" not in b:
        not_run += 1
        continue
    best[family] = max(best.get(family, 0.0), b["roofline_fraction"])
parts = [f"{f} {best[f]:.2f}" for f in families.values() if f in best]
print(f"moe best roofline: {', '.join(parts) or 'none'}; not run {not_run}/{total}")
PY
}

# mhc_summary JSON — the best roofline_fraction per mHC op family of the bench JSON (the
# BM_CudaMhc* benchmarks of bench_cuda_mhc.cu), and how many did not run.
mhc_summary() {
  python3 - "$1" << 'PY' 2> /dev/null || echo "mhc: no summary (python3 or the bench JSON missing)"
import json, sys
best, total, not_run = {}, 0, 0
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    name = b["name"]
    if not name.startswith("BM_CudaMhc"):
        continue
    parts = name.split("/")
    family = parts[0].removeprefix("BM_CudaMhc").lower()
    if family == "post":
        family += "-" + parts[1]
    total += 1
    if b.get("error_occurred") or "roofline_fraction" not in b:
        not_run += 1
        continue
    best[family] = max(best.get(family, 0.0), b["roofline_fraction"])
shown = [f"{f} {v:.2f}" for f, v in best.items()]
print(f"mhc best roofline: {', '.join(shown) or 'none'}; not run {not_run}/{total}")
PY
}

# 4. GPU benchmarks: the RMSNorm kernel vs device-to-device copy of the same bytes; the MoE
#    ops (bench_cuda_moe.cu) and the mHC ops (bench_cuda_mhc.cu) against the H200 roofline
#    (4.3 TB/s, 790 TFLOP/s bf16; the mHC math against the FP32 peak). The GDN / SSD
#    benchmarks run in stage 4b under their own cap (the leading '-' negates the filter).
if [ ! -x "$BENCH_BIN" ]; then
  record cuda-bench FAIL 0 "$BENCH_BIN missing"
else
  run_stage cuda-bench 150 "$OUT/cuda-bench.log" "${OURS[@]}" "$BENCH_BIN" \
    --benchmark_filter='-BM_CudaGdn|BM_CudaSsd' \
    --benchmark_out="$OUT/cuda-bench.json" --benchmark_out_format=json --benchmark_min_time=0.05
  if [ "$NO_GPU" -eq 1 ] || grep -q 'skipped: ' "$OUT/cuda-bench.log"; then
    record cuda-bench skipped "$SECS" "$(grep -m1 -oE "skipped: [^']*" "$OUT/cuda-bench.log")"
  elif [ "$RC" -ne 0 ]; then
    record cuda-bench "FAIL($RC)" "$SECS" "see cuda-bench.log"
  else
    best=$(grep -E 'BM_CudaRmsNorm' "$OUT/cuda-bench.log" | grep -oE 'copy_fraction=[0-9.]+' | sort -t= -k2 -g | tail -1)
    record cuda-bench ok "$SECS" "best ${best:-copy_fraction=?} (H200 copy ~4.3 TB/s); $(moe_summary "$OUT/cuda-bench.json"); $(mhc_summary "$OUT/cuda-bench.json")"
  fi
fi

# ssm_summary JSON — per GDN / SSD family of bench_cuda_gdn_ssd.cu (chunked, recurrent) the
# best roofline_fraction, the range of the chunked benchmarks' speedup_vs_recurrent, and how
# many did not run.
ssm_summary() {
  python3 - "$1" << 'PY' 2> /dev/null || echo "gdn/ssd: no summary (python3 or the bench JSON missing)"
import json, sys
best, speedups, total, not_run = {}, [], 0, 0
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    op = b["name"].split("/")[0].removeprefix("BM_Cuda")  # e.g. GdnChunked
    if not op.startswith(("Gdn", "Ssd")):
        continue
    family = op[:3].lower() + "-" + op[3:].lower()  # gdn-chunked
    total += 1
    if b.get("error_occurred") or "roofline_fraction" not in b:
        not_run += 1
        continue
    best[family] = max(best.get(family, 0.0), b["roofline_fraction"])
    if "speedup_vs_recurrent" in b:
        speedups.append(b["speedup_vs_recurrent"])
shown = ", ".join(f"{f} {v:.2f}" for f, v in best.items()) or "none"
ratio = f"chunked/recurrent speedup {min(speedups):.1f}-{max(speedups):.1f}x" if speedups else "no speedups"
print(f"gdn/ssd best roofline: {shown}; {ratio}; not run {not_run}/{total}")
PY
}

# 4b. GPU benchmarks of the GDN and Mamba-2 SSD cores (bench_cuda_gdn_ssd.cu): chunked vs the
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
    record cuda-bench-ssm ok "$SECS" "$(ssm_summary "$OUT/cuda-bench-ssm.json")"
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
TORCH_OK=0
if [ "$NO_GPU" -eq 0 ] && command -v python3 > /dev/null && timeout 60 python3 -c 'import torch' > /dev/null 2>&1; then
  TORCH_OK=1
fi
if [ "$NO_GPU" -eq 1 ]; then
  record torch skipped 0 "no usable GPU"
elif [ "$TORCH_OK" -eq 0 ]; then
  record torch unavailable 0 "torch does not import here"
else
  run_stage torch 90 "$OUT/torch.log" python3 "$OUT/torch_rmsnorm.py" "$OUT"
  if [ "$RC" -eq 0 ]; then
    record torch ok "$SECS" "side-by-side table in torch.log"
  else
    record torch "FAIL($RC)" "$SECS" "$(tail -1 "$OUT/torch.log")"
  fi
fi

# 5b. PyTorch side-by-side of the MoE ops, same shapes as bench_cuda_moe.cu (read from each
#     benchmark's name): router (torch.matmul; bf16, bf16 in / fp32 out, fp32), top-k
#     (torch.topk + softmax / sigmoid + bias), expert GEMMs (a dense matmul of the same M, N,
#     K; a per-expert loop; torch._grouped_mm where it exists), LM head and dense GEMMs
#     (torch.matmul bf16). Our times come from cuda-bench.json.
cat > "$OUT/torch_moe.py" << 'PY'
import json, math, os, sys, time
import torch
out_dir, budget_s = sys.argv[1], float(sys.argv[2])
began = time.time()
ours = {}
try:
    with open(os.path.join(out_dir, "cuda-bench.json")) as f:
        for b in json.load(f)["benchmarks"]:
            name = b["name"].removesuffix("/manual_time")
            if name.startswith("BM_CudaMoe") and "kernel_us" in b:
                ours[name] = (b["kernel_us"], b.get("roofline_fraction", float("nan")))
except Exception as e:
    print("no bench json:", e)
torch.backends.cuda.matmul.allow_tf32 = False  # numerics §2: FP32 GEMMs without TF32
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
dev = torch.device("cuda")
nan = float("nan")
print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}; ours = bufferlab_cuda_bench")
print(f"{'benchmark (ours)':<82} {'torch variant':<23}{'torch us':>10}{'ours us':>10}"
      f"{'torch/ours':>11}{'ours roofline':>14}")
ratios = []

def time_us(fn):
    fn()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); fn(); e.record(); e.synchronize()
    once = s.elapsed_time(e)
    if once >= 20.0:
        return 1e3 * once
    reps = int(min(50, max(3, 20.0 / max(once, 1e-3))))
    s.record()
    for _ in range(reps):
        fn()
    e.record(); e.synchronize()
    return 1e3 * s.elapsed_time(e) / reps

def row(key, variant, fn):
    try:
        t = time_us(fn)
    except Exception as ex:  # a torch API this version lacks, out of memory, ...
        why = (str(ex).splitlines() or [type(ex).__name__])[0][:80]
        print(f"{key:<82} {variant:<23}  failed: {why}")
        return
    mine, frac = ours.get(key, (nan, nan))
    ratio = t / mine if mine == mine and mine > 0 else nan
    if ratio == ratio:
        ratios.append(ratio)
    print(f"{key:<82} {variant:<23}{t:>10.2f}{mine:>10.2f}{ratio:>11.2f}{frac:>14.3f}")

def out_of_time():
    return time.time() - began > budget_s

def bf16(*shape, scale=1.0):
    return (scale * torch.randn(*shape, device=dev)).bfloat16()

M64 = (1 << 64) - 1
def mix(x):  # bench_cuda_moe.cu's splitmix64 hash
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)

def cases():
    # Router: logits = x · Wgᵀ on the three paths.
    for h, E in ((2048, 512), (7168, 256)):
        W = bf16(E, h, scale=0.05); Wf = W.float()
        for T in (64, 1024, 8192):
            x = bf16(T, h); xf = torch.randn(T, h, device=dev)
            base = f"tokens:{T}/hidden:{h}/experts:{E}"
            yield (f"BM_CudaMoeRouter/bf16/{base}", "matmul bf16", lambda: torch.matmul(x, W.t()))
            yield (f"BM_CudaMoeRouter/fp32_gate/{base}", "mm out_dtype=f32",
                   lambda: torch.mm(x, W.t(), out_dtype=torch.float32))
            yield (f"BM_CudaMoeRouter/fp32_gate/{base}", "matmul bf16 + .float()",
                   lambda: torch.matmul(x, W.t()).float())
            yield (f"BM_CudaMoeRouter/fp32_routing/{base}", "matmul fp32 (W fp32)",
                   lambda: torch.matmul(xf, Wf.t()))
    # Top-k on FP32 logits.
    for E, k in ((256, 8), (512, 10), (1024, 32)):
        bias = 0.05 * (2 * torch.rand(E, device=dev) - 1)
        for T in (64, 1024, 8192):
            logits = 4.0 * (2 * torch.rand(T, E, device=dev) - 1)
            base = f"experts:{E}/top_k:{k}/tokens:{T}"
            def softmax_topk():
                return torch.topk(torch.softmax(logits, dim=-1), k, dim=-1)
            def sigmoid_topk():
                s = torch.sigmoid(logits)
                _, i = torch.topk(s + bias, k, dim=-1)
                w = s.gather(-1, i)
                return i, w / w.sum(-1, keepdim=True) * 2.5
            yield (f"BM_CudaMoeTopK/softmax/{base}", "softmax + topk", softmax_topk)
            yield (f"BM_CudaMoeTopK/sigmoid_bias/{base}", "sigmoid+bias topk", sigmoid_topk)
    # Grouped expert GEMMs: gate [E, I, D] on gathered rows, down [E, D, I] on activations.
    for D, I, E, k in ((2048, 512, 512, 10), (7168, 2048, 256, 8)):
        for proj in ("gate", "down"):
            N, K = (I, D) if proj == "gate" else (D, I)
            W = torch.empty(E, N, K, device=dev, dtype=torch.bfloat16).normal_(0, 0.05)
            for T in (64, 1024, 4096):
                ids = torch.tensor([((mix(t) + j) & M64) % E for t in range(T) for j in range(k)],
                                   device=dev)
                counts = torch.bincount(ids, minlength=E).tolist()
                segments, start = [], 0
                for e, c in enumerate(counts):
                    if c:
                        segments.append((e, start, start + c))
                    start += c
                x = bf16(T * k, K)  # rows already in expert order
                out = torch.empty(T * k, N, device=dev, dtype=torch.bfloat16)
                offs = torch.cumsum(torch.tensor(counts, device=dev), 0).to(torch.int32)
                key = f"BM_CudaMoeExpertGemm/{proj}/tokens:{T}/hidden:{D}/inter:{I}/experts:{E}/top_k:{k}"
                def loop():
                    for e, a, b in segments:
                        torch.matmul(x[a:b], W[e].t(), out=out[a:b])
                yield (key, "dense-equivalent mm", lambda: torch.matmul(x, W[0].t()))
                yield (key, "per-expert loop", loop)
                if hasattr(torch, "_grouped_mm"):
                    yield (key, "torch._grouped_mm",
                           lambda: torch._grouped_mm(x, W.transpose(-2, -1), offs=offs))
            del W
            torch.cuda.empty_cache()
    # LM head and dense BF16 projections: y = x · Wᵀ.
    for R, h, V in ((64, 2048, 151936), (1024, 2048, 151936), (64, 7168, 129280),
                    (1024, 7168, 129280)):
        table = bf16(V, h, scale=0.05); x = bf16(R, h)
        yield (f"BM_CudaMoeLmHead/rows:{R}/hidden:{h}/vocab:{V}", "matmul bf16",
               lambda: torch.matmul(x, table.t()))
        del table
    for K, N in ((2048, 512), (7168, 2048), (4096, 14336)):
        W = bf16(N, K, scale=0.05)
        for R in (64, 1024, 8192):
            x = bf16(R, K)
            yield (f"BM_CudaMoeGemm/rows:{R}/K:{K}/N:{N}", "matmul bf16",
                   lambda: torch.matmul(x, W.t()))

for key, variant, fn in cases():
    if out_of_time():
        print(f"stopped at {key}: the {budget_s:.0f} s budget is spent")
        break
    row(key, variant, fn)
geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else nan
print(f"torch/ours over {len(ratios)} rows: geomean {geo:.2f}, min {min(ratios, default=nan):.2f}, "
      f"max {max(ratios, default=nan):.2f} (> 1: ours faster)")
PY
if [ "$NO_GPU" -eq 1 ]; then
  record torch-moe skipped 0 "no usable GPU"
elif [ "$TORCH_OK" -eq 0 ]; then
  record torch-moe unavailable 0 "torch does not import here"
else
  # The script stops starting new cases 15 s before its stage limit, so the table ends cleanly.
  moe_limit=$(limit 100)
  run_stage torch-moe 100 "$OUT/torch-moe.log" python3 "$OUT/torch_moe.py" "$OUT" "$((moe_limit - 15))"
  if [ "$RC" -eq 0 ]; then
    record torch-moe ok "$SECS" "$(tail -1 "$OUT/torch-moe.log")"
  elif [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then
    record torch-moe TIMEOUT "$SECS" "partial table in torch-moe.log"
  else
    record torch-moe "FAIL($RC)" "$SECS" "$(tail -1 "$OUT/torch-moe.log")"
  fi
fi

# 5c. PyTorch side-by-side of the mHC ops (scripts/torch_mhc.py: the same math in eager
#     PyTorch on the shapes of bench_cuda_mhc.cu, our times from cuda-bench.json).
if [ "$NO_GPU" -eq 1 ]; then
  record torch-mhc skipped 0 "no usable GPU"
elif [ "$TORCH_OK" -eq 0 ]; then
  record torch-mhc unavailable 0 "torch does not import here"
elif [ ! -f scripts/torch_mhc.py ]; then
  record torch-mhc FAIL 0 "scripts/torch_mhc.py missing (run from the repository root)"
else
  mhc_limit=$(limit 60)
  run_stage torch-mhc 60 "$OUT/torch-mhc.log" python3 scripts/torch_mhc.py "$OUT" "$((mhc_limit - 10))"
  if [ "$RC" -eq 0 ]; then
    record torch-mhc ok "$SECS" "$(tail -1 "$OUT/torch-mhc.log")"
  elif [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then
    record torch-mhc TIMEOUT "$SECS" "partial table in torch-mhc.log"
  else
    record torch-mhc "FAIL($RC)" "$SECS" "$(tail -1 "$OUT/torch-mhc.log")"
  fi
fi

# 5d. PyTorch side-by-side of the GDN and SSD cores (scripts/torch_gdn_ssd.py: per-token
#     loops and chunked forms in eager PyTorch on the shapes of bench_cuda_gdn_ssd.cu, our
#     times from cuda-bench-ssm.json).
if [ "$NO_GPU" -eq 1 ]; then
  record torch-gdn-ssd skipped 0 "no usable GPU"
elif [ "$TORCH_OK" -eq 0 ]; then
  record torch-gdn-ssd unavailable 0 "torch does not import here"
elif [ ! -f scripts/torch_gdn_ssd.py ]; then
  record torch-gdn-ssd FAIL 0 "scripts/torch_gdn_ssd.py missing (run from the repository root)"
else
  ssm_limit=$(limit 60)
  run_stage torch-gdn-ssd 60 "$OUT/torch-gdn-ssd.log" python3 scripts/torch_gdn_ssd.py "$OUT" "$((ssm_limit - 10))"
  if [ "$RC" -eq 0 ]; then
    record torch-gdn-ssd ok "$SECS" "$(tail -1 "$OUT/torch-gdn-ssd.log")"
  elif [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then
    record torch-gdn-ssd TIMEOUT "$SECS" "partial table in torch-gdn-ssd.log"
  else
    record torch-gdn-ssd "FAIL($RC)" "$SECS" "$(tail -1 "$OUT/torch-gdn-ssd.log")"
  fi
fi

echo
echo "logs: $OUT   total $(($(date +%s) - START)) s of a ${BUDGET_S} s budget"
[ -f "$OUT/torch.log" ] && [ "$NO_GPU" -eq 0 ] && cat "$OUT/torch.log"
[ -f "$OUT/torch-moe.log" ] && [ "$NO_GPU" -eq 0 ] && { echo; cat "$OUT/torch-moe.log"; }
[ -f "$OUT/torch-mhc.log" ] && [ "$NO_GPU" -eq 0 ] && { echo; cat "$OUT/torch-mhc.log"; }
[ -f "$OUT/torch-gdn-ssd.log" ] && [ "$NO_GPU" -eq 0 ] && { echo; cat "$OUT/torch-gdn-ssd.log"; }
echo
cat "$SUMMARY"
if [ "$FAILED" -eq 1 ]; then exit 1; fi
if [ "$NO_GPU" -eq 1 ]; then exit 77; fi
exit 0
