#!/usr/bin/env python3
"""PyTorch side-by-side of the CUDA mHC ops (scripts/gpu-check.sh, stage torch-mhc).

The same math as core ops/mhc.h in eager PyTorch, on the shapes of bench/cuda/bench_cuda_mhc.cu
(hc = 4, r = 32, 20 Sinkhorn iterations; tokens and hidden size from each benchmark's name),
timed with CUDA events and printed next to our kernel time read from cuda-bench.json:

  BM_CudaMhcPre            flattened RMS, x·fnᵀ (fp32 matmul, no TF32), pre / post sigmoids,
                           softmax + Sinkhorn (column, (iters−1)×[row, column], exact column),
                           block input Σ pre_i·x_i → bf16
  BM_CudaMhcHead           the same without the Sinkhorn
  BM_CudaMhcPost/sinkhorn  post_j·bo + Σ_i comb_ij·x_i (torch.baddbmm), in place
  BM_CudaMhcPost/lowrank   x + post_i·bo, in place (addcmul_)
  BM_CudaMhcExpand         bf16 row → hc fp32 copies
  BM_CudaMhcLowRankSplit   per-stream RMSNorm, fp32 GEMVs (down | inject), up, collapse
  BM_CudaMhcLowRankSlab    the same with bf16 intermediates and bf16 matmuls

Usage: torch_mhc.py OUT_DIR BUDGET_S. Prints one row per (benchmark, torch variant) and a last
line with the geometric mean of torch/ours (> 1: ours faster). Stops starting new cases when
the budget is spent.
"""
import sys

import torch

from gpu_check_common import SideBySide, read_kernel_times, side_by_side_args, within_budget

HC, RANK, ITERS, EPS, HC_EPS = 4, 32, 20, 1e-6, 1e-6


def main():
    out_dir, budget_s, began = side_by_side_args(sys.argv)
    ours, problems = read_kernel_times(out_dir, ["cuda-bench.json"], ("BM_CudaMhc",))
    for _, e in problems:
        print("no bench json:", e)
    torch.backends.cuda.matmul.allow_tf32 = False  # the mHC math is FP32
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    dev = torch.device("cuda")
    table = SideBySide(ours, key_width=56, variant_width=18)
    table.header()

    def f32(*shape, scale=1.0):
        return scale * (2 * torch.rand(*shape, device=dev) - 1)

    def flat_rms(xf):
        return torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)

    def pre_step(x, fn, scale, bias):
        T = x.shape[0]
        xf = x.view(T, -1)
        mix = (xf @ fn.t()) * flat_rms(xf)
        pre = torch.sigmoid(mix[:, :HC] * scale[0] + bias[:HC]) + HC_EPS
        post = 2 * torch.sigmoid(mix[:, HC:2 * HC] * scale[1] + bias[HC:2 * HC])
        c = (mix[:, 2 * HC:] * scale[2] + bias[2 * HC:]).view(T, HC, HC)
        c = torch.softmax(c, dim=-1) + HC_EPS
        c = c / (HC_EPS + c.sum(1, keepdim=True))
        for _ in range(ITERS - 1):
            c = c / (HC_EPS + c.sum(2, keepdim=True))
            c = c / (HC_EPS + c.sum(1, keepdim=True))
        c = c / c.sum(1, keepdim=True)
        y = torch.einsum("ti,tid->td", pre, x).bfloat16()
        return post, c, y

    def head_step(x, fn, scale, bias):
        T = x.shape[0]
        xf = x.view(T, -1)
        mix = (xf @ fn.t()) * flat_rms(xf)
        pre = torch.sigmoid(mix * scale[0] + bias) + HC_EPS
        return torch.einsum("ti,tid->td", pre, x).bfloat16()

    def stream_norm(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * (1 + w)

    def cases():
        for h in (4096, 7168):
            W = HC * h
            fn = f32(HC * (HC + 2), W, scale=0.02)
            fn_head = f32(HC, W, scale=0.02)
            scale = torch.tensor([0.5, 0.5, 1.0], device=dev)
            bias = f32(HC * (HC + 2), scale=0.5)
            for T in (64, 1024, 8192):
                x = f32(T, HC, h, scale=2.0)
                base = f"tokens:{T}/hidden:{h}"
                yield (f"BM_CudaMhcPre/{base}", "eager", lambda: pre_step(x, fn, scale, bias))
                yield (f"BM_CudaMhcHead/{base}", "eager",
                       lambda: head_step(x, fn_head, scale[:1], bias[:HC]))
                post = f32(T, HC)
                comb = torch.full((T, HC, HC), 1.0 / HC, device=dev)
                bo = f32(T, h).bfloat16()
                xs = x.clone()

                def post_sinkhorn():
                    # out[t, j, :] = post_j·bo + Σ_i comb_ij·x_i, written back in place
                    xs.copy_(torch.baddbmm(post.unsqueeze(-1) * bo.float().unsqueeze(1),
                                           comb.transpose(1, 2), xs))

                def post_lowrank():
                    xs.addcmul_(post.unsqueeze(-1), bo.float().unsqueeze(1))

                yield (f"BM_CudaMhcPost/sinkhorn/{base}", "baddbmm + copy_", post_sinkhorn)
                yield (f"BM_CudaMhcPost/lowrank/{base}", "addcmul_", post_lowrank)
                emb = f32(T, h).bfloat16()
                yield (f"BM_CudaMhcExpand/{base}", "expand.contiguous",
                       lambda: emb.float().unsqueeze(1).expand(T, HC, h).contiguous())
                del x, xs
                torch.cuda.empty_cache()
        for h in (4096, 7168):
            W = HC * h
            norm_w = f32(HC, h, scale=0.1)
            w_di = f32(RANK + HC, W, scale=0.02)
            w_up = f32(W, RANK, scale=0.2)
            w_di16, w_up16 = w_di.bfloat16(), w_up.bfloat16()

            def lowrank(x, bf16):
                T = x.shape[0]
                n = stream_norm(x, norm_w).view(T, W)
                if bf16:
                    n16 = n.bfloat16()
                    down = (n16 @ w_di16[:RANK].t()).float()
                    low = torch.nn.functional.silu(down / HC).bfloat16()
                    inj = (n16 @ w_di16[RANK:].t()).float()
                    up = (low @ w_up16.t()).float()
                    n = n16.float()
                else:
                    di = n @ w_di.t()
                    low = torch.nn.functional.silu(di[:, :RANK] / HC)
                    inj = di[:, RANK:]
                    up = low @ w_up.t()
                post = 2 * torch.sigmoid(inj / HC)
                y = (torch.sigmoid(up) * n).view(T, HC, -1).sum(1) / HC
                return y.bfloat16(), post

            for T in (1, 64):
                x = f32(T, HC, h, scale=2.0)
                yield (f"BM_CudaMhcLowRankSplit/tokens:{T}/hidden:{h}", "eager fp32",
                       lambda: lowrank(x, False))
            for T in (1024, 2048):
                x = f32(T, HC, h, scale=2.0)
                yield (f"BM_CudaMhcLowRankSlab/tokens:{T}/hidden:{h}", "eager bf16 mm",
                       lambda: lowrank(x, True))

    for key, variant, fn in within_budget(cases(), began, budget_s):
        table.row(key, variant, fn)
    table.summary()


if __name__ == "__main__":
    main()
