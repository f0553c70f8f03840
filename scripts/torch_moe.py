#!/usr/bin/env python3
"""PyTorch side-by-side of the CUDA MoE ops (scripts/gpu-check.sh, stage torch-moe).

The same ops in eager PyTorch on the shapes of bench/cuda/bench_cuda_moe.cu (read from each
benchmark's name), timed with CUDA events and printed next to our kernel time and roofline
fraction from cuda-bench.json:

  BM_CudaMoeRouter      torch.matmul bf16; bf16 in / fp32 out (torch.mm out_dtype, or matmul +
                        .float()); fp32 matmul without TF32
  BM_CudaMoeTopK        torch.topk + softmax, sigmoid + bias
  BM_CudaMoeExpertGemm  a dense matmul of the same M, N, K; a per-expert loop;
                        torch._grouped_mm where it exists
  BM_CudaMoeLmHead      torch.matmul bf16
  BM_CudaMoeGemm        torch.matmul bf16

Usage: torch_moe.py OUT_DIR BUDGET_S. One row per (benchmark, torch variant), then a last line
with the geometric mean of torch/ours (> 1: ours faster). Stops starting new cases when the
budget is spent.
"""
import sys

import torch

from gpu_check_common import SideBySide, read_kernel_times, side_by_side_args, within_budget

M64 = (1 << 64) - 1


def mix(x):  # bench_cuda_moe.cu's splitmix64 hash
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def cases(dev):
    """(benchmark key, torch variant, callable) per case, tensors made as they are drawn."""

    def bf16(*shape, scale=1.0):
        return (scale * torch.randn(*shape, device=dev)).bfloat16()

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


def main():
    out_dir, budget_s, began = side_by_side_args(sys.argv)
    ours, problems = read_kernel_times(out_dir, ["cuda-bench.json"], ("BM_CudaMoe",))
    for _, e in problems:
        print("no bench json:", e)
    torch.backends.cuda.matmul.allow_tf32 = False  # docs/spec/numerics.md §2: FP32 GEMMs without TF32
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    table = SideBySide(ours, key_width=82, variant_width=23)
    table.header()
    for key, variant, fn in within_budget(cases(torch.device("cuda")), began, budget_s):
        table.row(key, variant, fn)
    table.summary()


if __name__ == "__main__":
    main()
