#!/usr/bin/env python3
"""PyTorch side-by-side of the CUDA attention cores (scripts/gpu-check.sh, stage torch-attn).

torch.nn.functional.scaled_dot_product_attention in BF16 on the shapes of
bench/cuda/bench_cuda_attention.cu (read from each benchmark's name), timed with CUDA events
and printed next to our kernel time from cuda-bench-attn.json:

  BM_CudaAttnPrefill/<model>/tokens:T/context:C
      sdpa          q [1, nq, T, hd], K / V [1, nkv, C + T, hd] contiguous; is_causal when C = 0
                    on a full layer (the flash path), else a boolean mask: key j visible to the
                    row at position p = C + i when j <= p (and j > p - W on a sliding layer)
  BM_CudaAttnDecode/<model>/rows:R/context:C/splits:S
      sdpa          q [R, nq, 1, hd], K / V [R, nkv, v, hd] contiguous, v the visible keys
                    (C + 1, or the window W on a sliding layer)
      gather+sdpa   the same keys first gathered from a paged cache (K / V [blocks, 16, nkv, hd],
                    a shuffled block table per row), which our kernel reads in place
GQA: enable_gqa=True where this torch has it (2.5 on), else K / V repeated per query head
inside the timed call (the variant says "repeat"). gpt-oss's sinks have no SDPA argument: its
rows run without them (one exp per row and head). Our one-split and split-K rows of a decode
shape are both compared with the same torch call.

Usage: torch_attention.py OUT_DIR BUDGET_S. One row per (benchmark, torch variant), then a last
line with the geometric mean of torch/ours (> 1: ours faster). Stops starting new cases when
the budget is spent. Without our times (no JSON) it times torch alone on the default shapes.
"""
import sys

import torch
import torch.nn.functional as F

from gpu_check_common import SideBySide, read_kernel_times, side_by_side_args, within_budget

BLOCK = 16  # the paged cache's block size (oracle AttnCaseSpec's default, the bench's)
MODELS = {"qwen3_next_80b": dict(nq=16, nkv=2, hd=256, window=0),
          "gpt_oss_20b": dict(nq=64, nkv=8, hd=64, window=0),
          "gpt_oss_20b_sliding": dict(nq=64, nkv=8, hd=64, window=128),
          "llama_3_1_8b": dict(nq=32, nkv=8, hd=128, window=0)}
# The shapes bench_cuda_attention.cu registers (used when the bench JSON is missing).
SPLITS = {"qwen3_next_80b": 16, "gpt_oss_20b": 5, "gpt_oss_20b_sliding": 5, "llama_3_1_8b": 9}
DEFAULT_KEYS = (
    [f"BM_CudaAttnPrefill/{m}/tokens:{t}/context:{c}"
     for m in MODELS for t, c in ((1024, 0), (4096, 0), (512, 4096))] +
    [f"BM_CudaAttnDecode/{m}/rows:8/context:{c}/splits:{s}"
     for m in MODELS for c in (1024, 8192) for s in (1, SPLITS[m])])


def parse(key):
    """(kind, model, {param: int}) of a benchmark key."""
    parts = key.split("/")
    params = dict(p.split(":") for p in parts[2:])
    return parts[0].removeprefix("BM_CudaAttn").lower(), parts[1], {k: int(v) for k, v in
                                                                    params.items()}


GQA = {"native": False}  # whether sdpa takes enable_gqa here (probe_gqa)


def probe_gqa(dev):
    """Sets GQA["native"]: does this torch's SDPA take enable_gqa (2 query heads, 1 KV head)?"""
    q = torch.zeros(1, 2, 1, 8, device=dev, dtype=torch.bfloat16)
    k = torch.zeros(1, 1, 1, 8, device=dev, dtype=torch.bfloat16)
    try:
        F.scaled_dot_product_attention(q, k, k, enable_gqa=True)
        GQA["native"] = True
    except (TypeError, RuntimeError):
        GQA["native"] = False


def sdpa(q, k, v, **kw):
    """SDPA with K / V of nkv heads for q of nq heads: enable_gqa, or K / V repeated."""
    if GQA["native"]:
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kw)
    rep = q.shape[1] // k.shape[1]
    return F.scaled_dot_product_attention(q, k.repeat_interleave(rep, dim=1),
                                          v.repeat_interleave(rep, dim=1), **kw)


def gqa_tag():
    return "" if GQA["native"] else ", repeat"


def prefill_case(g, T, C, dev):
    nq, nkv, hd, W = g["nq"], g["nkv"], g["hd"], g["window"]
    q = torch.randn(1, nq, T, hd, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, nkv, C + T, hd, device=dev, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    if C == 0 and W == 0:
        return lambda: sdpa(q, k, v, is_causal=True)
    p = torch.arange(T, device=dev)[:, None] + C
    j = torch.arange(C + T, device=dev)[None, :]
    mask = j <= p
    if W > 0:
        mask &= j > p - W
    return lambda: sdpa(q, k, v, attn_mask=mask)


def decode_cases(g, R, C, dev):
    """(contiguous, paged-gather) callables of R decode rows with C cached keys each."""
    nq, nkv, hd, W = g["nq"], g["nkv"], g["hd"], g["window"]
    keys = C + 1
    lo = keys - W if 0 < W < keys else 0
    visible = keys - lo
    q = torch.randn(R, nq, 1, hd, device=dev, dtype=torch.bfloat16)
    k = torch.randn(R, nkv, visible, hd, device=dev, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    nb = -(-keys // BLOCK)
    kc = torch.randn(R * nb, BLOCK, nkv, hd, device=dev, dtype=torch.bfloat16)
    vc = torch.randn_like(kc)
    table = torch.randperm(R * nb, device=dev).view(R, nb)
    b0 = lo // BLOCK
    rows = table[:, b0:]  # the blocks holding the visible keys

    def gathered():
        kk = kc[rows].reshape(R, -1, nkv, hd)[:, lo - b0 * BLOCK:keys - b0 * BLOCK]
        vv = vc[rows].reshape(R, -1, nkv, hd)[:, lo - b0 * BLOCK:keys - b0 * BLOCK]
        return sdpa(q, kk.transpose(1, 2), vv.transpose(1, 2))

    return (lambda: sdpa(q, k, v)), gathered


def main():
    out_dir, budget_s, began = side_by_side_args(sys.argv)
    ours, problems = read_kernel_times(out_dir, ["cuda-bench-attn.json", "cuda-bench.json"],
                                       ("BM_CudaAttn",))
    keys = list(ours) or DEFAULT_KEYS
    if not ours:
        shown = [f"{name}: {e}" for name, e in problems] or ["no attention rows"]
        print("no times of ours (" + "; ".join(shown) + "); torch alone on the default shapes")
    dev = torch.device("cuda")
    probe_gqa(dev)
    table = SideBySide(ours, key_width=64, variant_width=22, torch_width=11, decimals=1)
    table.header()

    def cases():
        for key in keys:
            kind, model, a = parse(key)
            g = MODELS.get(model)
            if g is None:
                continue
            if kind == "prefill":
                fn = prefill_case(g, a["tokens"], a["context"], dev)
                masked = a["context"] > 0 or g["window"] > 0
                yield key, "sdpa (mask)" if masked else "sdpa (is_causal)", fn
            elif kind == "decode":
                contiguous, gathered = decode_cases(g, a["rows"], a["context"], dev)
                yield key, "sdpa", contiguous
                yield key, "gather+sdpa", gathered

    with torch.no_grad():
        for key, variant, fn in within_budget(cases(), began, budget_s):
            table.row(key, variant + gqa_tag(), fn)
    if "gpt_oss" in " ".join(keys):
        print("gpt-oss rows: torch without the sinks (SDPA has no sink argument)")
    table.summary()


if __name__ == "__main__":
    main()
