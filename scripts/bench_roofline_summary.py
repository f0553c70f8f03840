#!/usr/bin/env python3
"""One summary line of a bufferlab_cuda_bench JSON for scripts/gpu-check.sh's summary table:
per op family the best roofline_fraction, and how many benchmarks did not run (an op the
backend refused reports "not run: ..." as an error, or has no roofline_fraction).

Usage: bench_roofline_summary.py moe|mhc|gdn-ssd|attn BENCH_JSON

  moe      BM_CudaMoe{Router,TopK,ExpertGemm,LmHead,Gemm} (bench_cuda_moe.cu), in that order
  mhc      BM_CudaMhc* (bench_cuda_mhc.cu); post split by its form (post-sinkhorn, post-lowrank)
  gdn-ssd  BM_Cuda{Gdn,Ssd}{Chunked,Recurrent} (bench_cuda_gdn_mamba2.cu), plus the range of the
           chunked benchmarks' speedup_vs_recurrent
  attn     BM_CudaAttn{Prefill,Decode} (bench_cuda_attention.cu), decode split by one split /
           split-K, plus the range of the split-K benchmarks' speedup_vs_one_split

Fails (no output) when the JSON is missing or unreadable; gpu-check.sh prints its fallback.
"""
import sys

from gpu_check_common import load_benchmarks

MOE_FAMILIES = {"BM_CudaMoeRouter": "router", "BM_CudaMoeTopK": "topk",
                "BM_CudaMoeExpertGemm": "experts", "BM_CudaMoeLmHead": "lm_head",
                "BM_CudaMoeGemm": "gemm"}


def tally(benchmarks, family_of):
    """(best roofline_fraction per family in first-seen order, the rows that ran, total,
    not run) over the benchmarks whose family_of(name) is not None."""
    best, ran, total, not_run = {}, [], 0, 0
    for b in benchmarks:
        family = family_of(b["name"])
        if family is None:
            continue
        total += 1
        if b.get("error_occurred") or "roofline_fraction" not in b:
            not_run += 1
            continue
        best[family] = max(best.get(family, 0.0), b["roofline_fraction"])
        ran.append(b)
    return best, ran, total, not_run


def moe_family(name):
    return MOE_FAMILIES.get(name.split("/")[0])


def mhc_family(name):
    if not name.startswith("BM_CudaMhc"):
        return None
    parts = name.split("/")
    family = parts[0].removeprefix("BM_CudaMhc").lower()
    return family + "-" + parts[1] if family == "post" else family


def gdn_ssd_family(name):
    op = name.split("/")[0].removeprefix("BM_Cuda")  # e.g. GdnChunked
    if not op.startswith(("Gdn", "Ssd")):
        return None
    return op[:3].lower() + "-" + op[3:].lower()  # gdn-chunked


def moe(benchmarks):
    best, _, total, not_run = tally(benchmarks, moe_family)
    parts = [f"{f} {best[f]:.2f}" for f in MOE_FAMILIES.values() if f in best]
    return f"moe best roofline: {', '.join(parts) or 'none'}; not run {not_run}/{total}"


def mhc(benchmarks):
    best, _, total, not_run = tally(benchmarks, mhc_family)
    shown = [f"{f} {v:.2f}" for f, v in best.items()]
    return f"mhc best roofline: {', '.join(shown) or 'none'}; not run {not_run}/{total}"


def gdn_ssd(benchmarks):
    best, ran, total, not_run = tally(benchmarks, gdn_ssd_family)
    speedups = [b["speedup_vs_recurrent"] for b in ran if "speedup_vs_recurrent" in b]
    shown = ", ".join(f"{f} {v:.2f}" for f, v in best.items()) or "none"
    ratio = (f"chunked/recurrent speedup {min(speedups):.1f}-{max(speedups):.1f}x"
             if speedups else "no speedups")
    return f"gdn/ssd best roofline: {shown}; {ratio}; not run {not_run}/{total}"


def attn_family(name):
    parts = name.split("/")
    if parts[0] == "BM_CudaAttnPrefill":
        return "prefill"
    if parts[0] != "BM_CudaAttnDecode":
        return None
    return "decode-1split" if "splits:1" in parts else "decode-splitk"


def attn(benchmarks):
    best, ran, total, not_run = tally(benchmarks, attn_family)
    speedups = [b["speedup_vs_one_split"] for b in ran if "speedup_vs_one_split" in b]
    shown = ", ".join(f"{f} {v:.2f}" for f, v in best.items()) or "none"
    ratio = (f"split-K/one-split speedup {min(speedups):.1f}-{max(speedups):.1f}x"
             if speedups else "no split-K speedups")
    return f"attn best roofline: {shown}; {ratio}; not run {not_run}/{total}"


SUMMARIES = {"moe": moe, "mhc": mhc, "gdn-ssd": gdn_ssd, "attn": attn}

if __name__ == "__main__":
    print(SUMMARIES[sys.argv[1]](load_benchmarks(sys.argv[2])))
