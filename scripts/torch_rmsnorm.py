#!/usr/bin/env python3
"""PyTorch side-by-side of the CUDA fused add + RMSNorm (scripts/gpu-check.sh, stage torch).

The same fused residual add + RMSNorm in eager PyTorch (and torch.nn.functional.rms_norm where
it exists), on the shapes of BM_CudaRmsNorm (rows {64, 1024, 8192} × width {4095, 4096, 7168},
BF16, eps 1e-6, weight 1 + w), timed with CUDA events (5 warm-up calls, 50 timed) and printed
next to our kernel time from cuda-bench.json, with our bandwidth from the same traffic formula
(8·rows·width + 2·width bytes).

Usage: torch_rmsnorm.py OUT_DIR. One row per shape.
"""
import sys

import torch

from gpu_check_common import read_kernel_times, time_us

EPS = 1e-6


def read_ours(out_dir):
    """Our kernel_us per "rows:R/width:W" of BM_CudaRmsNorm."""
    times, problems = read_kernel_times(out_dir, ["cuda-bench.json"], ("BM_CudaRmsNorm/",))
    for _, e in problems:
        print("no bench json:", e)
    return {"/".join(name.split("/")[1:3]): us for name, (us, _) in times.items()}


def main():
    ours = read_ours(sys.argv[1])
    dev = torch.device("cuda")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    print(f"{'shape':<24}{'torch eager us':>16}{'F.rms_norm us':>15}{'ours us':>10}"
          f"{'eager/ours':>12}{'GB/s ours':>11}")
    for rows in (64, 1024, 8192):
        for width in (4095, 4096, 7168):
            x = torch.randn(rows, width, device=dev).bfloat16()
            res = torch.randn(rows, width, device=dev).bfloat16()
            w = (0.25 * torch.randn(width, device=dev)).bfloat16()

            def eager():
                r = (res.float() + x.float()).bfloat16()
                rf = r.float()
                return (rf * torch.rsqrt(rf.pow(2).mean(-1, keepdim=True) + EPS)
                        * (1 + w.float())).bfloat16()

            t_eager = time_us(eager, reps=50)
            t_fn = float("nan")
            if hasattr(torch.nn.functional, "rms_norm"):
                scale = (1 + w.float()).bfloat16()

                def fn():
                    r = (res.float() + x.float()).bfloat16()
                    return torch.nn.functional.rms_norm(r, (width,), weight=scale, eps=EPS)

                t_fn = time_us(fn, reps=50)
            key = f"rows:{rows}/width:{width}"
            mine = ours.get(key, float("nan"))
            traffic = 8 * rows * width + 2 * width
            print(f"{key:<24}{t_eager:>16.2f}{t_fn:>15.2f}{mine:>10.2f}{t_eager / mine:>12.2f}"
                  f"{traffic / mine / 1e3:>11.1f}")


if __name__ == "__main__":
    main()
