#!/usr/bin/env python3
"""PyTorch side-by-side of the CUDA GDN and Mamba-2 SSD cores (scripts/gpu-check.sh, stage
torch-gdn-ssd).

The same recurrences as core ops/gdn.h and ops/mamba2.h in eager PyTorch (FP32, no TF32), on
the shapes of bench/cuda/bench_cuda_gdn_mamba2.cu (read from each benchmark's name), timed with
CUDA events and printed next to our kernel time from cuda-bench-ssm.json (or cuda-bench.json):

  BM_CudaGdnRecurrent   per-token loop: q/k L2-normalised (q·kd^-1/2), GQA repeat, then per
                        token δ = β(v − α·Sᵀk), S = αS + kδᵀ, o = Sᵀq (bmm / baddbmm_), → bf16
  BM_CudaGdnChunked     chunked form, C = 64: gc = cumsum log α, W / U by a batched unit-lower
                        triangular solve (torch.linalg.solve_triangular) of
                        (I + L) X = diag(β)·V and diag(β·exp gc)·K, then a loop over chunks:
                        uc = U − W·S, O = exp(gc)⊙(Q·S) + (QKᵀ ⊙ decay ⊙ causal)·uc,
                        S ← exp(gc_last)·S + Kᵀ·diag(exp(gc_last − gc))·uc
  BM_CudaSsdRecurrent   per-token loop: dt = clamp(softplus(dt_raw + dt_bias)),
                        h ← exp(dt·A)·h + dt·x Bᵀ, y = h·C + D·x, → bf16
  BM_CudaSsdChunked     the chunked SSD, C = 64: CB per group, the causal decay
                        exp(min(cs_t − cs_s, 0)), intra-chunk (CB ⊙ decay ⊙ dt)·x, per-chunk
                        state contributions, a loop over chunks for the carried state, and
                        exp(min(cs_t, 0))·C·h0
Each chunked row also prints `check`: max |chunked − loop| / max |loop| of the FP32 outputs (a
self-check of this script's two forms; ~1e-5 expected).

Usage: torch_gdn_mamba2.py OUT_DIR BUDGET_S. One row per (benchmark, torch variant), then a last
line with the geometric mean of torch/ours (> 1: ours faster). Stops starting new cases when
the budget is spent.
"""
import math
import sys

import torch

from gpu_check_common import SideBySide, read_kernel_times, side_by_side_args, within_budget

CHUNK, L2_EPS = 64, 1e-6
GDN = dict(nk=16, kd=128, vd=128)  # qwen3-next-80b; nv from the benchmark name
SSD = {"nemotron_h_56b": dict(H=256, P=64, N=256, G=8),
       "tiny_mamba": dict(H=6, P=24, N=40, G=2)}


def read_ours(out_dir):
    """Our kernel_us and roofline_fraction per benchmark (without /manual_time)."""
    ours, problems = read_kernel_times(out_dir, ["cuda-bench-ssm.json", "cuda-bench.json"],
                                       ("BM_CudaGdn", "BM_CudaSsd"))
    if not ours:
        shown = [f"{name}: {e}" for name, e in problems] or ["no GDN/SSD rows"]
        print("no times of ours (" + "; ".join(shown) + ")")
    return ours


# ---------------------------------------------------------------- Gated DeltaNet

def gdn_qkv(conv, nk, kd, nv, vd):
    """conv f32 [T, 2·nk·kd + nv·vd] → q, k [T, nv, kd] (normalised, GQA-repeated), v."""
    T = conv.shape[0]
    q = conv[:, :nk * kd].view(T, nk, kd)
    k = conv[:, nk * kd:2 * nk * kd].view(T, nk, kd)
    v = conv[:, 2 * nk * kd:].view(T, nv, vd)
    q = q * torch.rsqrt(q.square().sum(-1, keepdim=True) + L2_EPS) * (kd ** -0.5)
    k = k * torch.rsqrt(k.square().sum(-1, keepdim=True) + L2_EPS)
    rep = nv // nk
    return q.repeat_interleave(rep, dim=1), k.repeat_interleave(rep, dim=1), v


def gdn_loop(conv, beta, alpha, S0, g):
    q, k, v = gdn_qkv(conv, g["nk"], g["kd"], g["nv"], g["vd"])
    T, nv = beta.shape
    S = S0.clone()
    out = torch.empty(T, nv, g["vd"], device=conv.device)
    for t in range(T):
        kt = k[t].unsqueeze(1)                                     # [nv, 1, kd]
        sk = torch.bmm(kt, S).squeeze(1)                           # Sᵀk: [nv, vd]
        delta = beta[t, :, None] * (v[t] - alpha[t, :, None] * sk)
        S.mul_(alpha[t].view(nv, 1, 1)).baddbmm_(kt.transpose(1, 2), delta.unsqueeze(1))
        out[t] = torch.bmm(q[t].unsqueeze(1), S).squeeze(1)
    return out, S


def gdn_chunked(conv, beta, alpha, S0, g):
    q, k, v = gdn_qkv(conv, g["nk"], g["kd"], g["nv"], g["vd"])
    T, nv = beta.shape
    n = T // CHUNK  # the benchmark shapes are whole chunks

    def chunks(x):  # [T, nv, d] → [nv, n, 64, d]
        return x.reshape(n, CHUNK, nv, -1).permute(2, 0, 1, 3)

    q, k, v = chunks(q), chunks(k), chunks(v)
    b = beta.reshape(n, CHUNK, nv).permute(2, 0, 1)
    gc = torch.log(alpha.clamp_min(1e-30)).reshape(n, CHUNK, nv).permute(2, 0, 1).cumsum(-1)
    causal = torch.ones(CHUNK, CHUNK, dtype=torch.bool, device=conv.device).tril()
    decay = torch.exp((gc[..., :, None] - gc[..., None, :]).masked_fill(~causal, -math.inf))
    strict = decay.masked_fill(torch.eye(CHUNK, dtype=torch.bool, device=conv.device), 0.0)
    A = torch.eye(CHUNK, device=conv.device) + b[..., None] * strict * (k @ k.transpose(-1, -2))
    U = torch.linalg.solve_triangular(A, b[..., None] * v, upper=False, unitriangular=True)
    W = torch.linalg.solve_triangular(A, (b * gc.exp())[..., None] * k, upper=False,
                                      unitriangular=True)
    QK = (q @ k.transpose(-1, -2)) * decay
    S = S0.clone()
    out = torch.empty(nv, n, CHUNK, g["vd"], device=conv.device)
    for c in range(n):
        uc = U[:, c] - W[:, c] @ S
        out[:, c] = gc[:, c, :, None].exp() * (q[:, c] @ S) + QK[:, c] @ uc
        last = gc[:, c, -1]
        kw = k[:, c] * (last[:, None] - gc[:, c]).exp()[..., None]
        S = last.exp()[:, None, None] * S + kw.transpose(-1, -2) @ uc
    return out.permute(1, 2, 0, 3).reshape(T, nv, g["vd"]), S


def gdn_case(T, nv, dev):
    g = dict(GDN, nv=nv)
    conv = torch.randn(T, 2 * g["nk"] * g["kd"] + nv * g["vd"], device=dev)
    beta = torch.sigmoid(2 * torch.randn(T, nv, device=dev))
    alpha = torch.exp(-0.05 * torch.rand(T, nv, device=dev))
    S0 = 0.1 * torch.randn(nv, g["kd"], g["vd"], device=dev)
    return conv, beta, alpha, S0, g


# ---------------------------------------------------------------- Mamba-2 SSD

def ssd_prep(xbc, dt_raw, a_log, dt_bias, s):
    H, P, N, G = s["H"], s["P"], s["N"], s["G"]
    T, d_inner = xbc.shape[0], H * P
    x = xbc[:, :d_inner].float().view(T, H, P)
    B = xbc[:, d_inner:d_inner + G * N].float().view(T, G, N)
    C = xbc[:, d_inner + G * N:].float().view(T, G, N)
    dt = torch.nn.functional.softplus(dt_raw.float() + dt_bias, threshold=20.0).clamp(1e-9, 1e9)
    return x, B, C, dt, -torch.exp(a_log)


def ssd_loop(xbc, dt_raw, a_log, dt_bias, D, h0, s):
    x, B, C, dt, A = ssd_prep(xbc, dt_raw, a_log, dt_bias, s)
    T, H = dt.shape
    rep = H // s["G"]
    Bh, Ch = B.repeat_interleave(rep, dim=1), C.repeat_interleave(rep, dim=1)  # [T, H, N]
    decay = torch.exp(dt * A)
    h = h0.clone()
    y = torch.empty(T, H, s["P"], device=xbc.device)
    for t in range(T):
        h.mul_(decay[t].view(H, 1, 1)).baddbmm_((dt[t, :, None] * x[t]).unsqueeze(2),
                                                Bh[t].unsqueeze(1))
        y[t] = torch.bmm(h, Ch[t].unsqueeze(2)).squeeze(2) + D[:, None] * x[t]
    return y, h


def ssd_chunked(xbc, dt_raw, a_log, dt_bias, D, h0, s):
    x, B, C, dt, A = ssd_prep(xbc, dt_raw, a_log, dt_bias, s)
    T, H = dt.shape
    n, rep = T // CHUNK, H // s["G"]
    xc = x.view(n, CHUNK, H, -1).permute(0, 2, 1, 3)            # [n, H, 64, P]
    Bc = B.view(n, CHUNK, s["G"], -1).permute(0, 2, 1, 3)       # [n, G, 64, N]
    Cc = C.view(n, CHUNK, s["G"], -1).permute(0, 2, 1, 3)
    dtc = dt.view(n, CHUNK, H).permute(0, 2, 1)                 # [n, H, 64]
    cs = (dtc * A[None, :, None]).cumsum(-1)
    causal = torch.ones(CHUNK, CHUNK, dtype=torch.bool, device=xbc.device).tril()
    seg = (cs[..., :, None] - cs[..., None, :]).clamp_max(0.0)
    M = (Cc @ Bc.transpose(-1, -2)).repeat_interleave(rep, dim=1)  # CB per head: [n, H, 64, 64]
    M = (M * seg.exp() * dtc[..., None, :]).masked_fill(~causal, 0.0)
    y = M @ xc
    w = (cs[..., -1:] - cs).clamp_max(0.0).exp() * dtc          # [n, H, 64]
    Bh = Bc.repeat_interleave(rep, dim=1)                       # [n, H, 64, N]
    Ch = Cc.repeat_interleave(rep, dim=1)
    contrib = (xc * w[..., None]).transpose(-1, -2) @ Bh         # [n, H, P, N]
    h = h0.clone()
    for c in range(n):
        y[c] += cs[c, :, :, None].clamp_max(0.0).exp() * (Ch[c] @ h.transpose(-1, -2))
        h = cs[c, :, -1].clamp_max(0.0).exp()[:, None, None] * h + contrib[c]
    y = y + D[None, :, None, None] * xc
    return y.permute(0, 2, 1, 3).reshape(T, H, -1), h


def ssd_case(s, T, dev):
    H, P, N, G = s["H"], s["P"], s["N"], s["G"]
    xbc = torch.randn(T, H * P + 2 * G * N, device=dev).bfloat16()
    dt_raw = torch.randn(T, H, device=dev).bfloat16()
    a_log = torch.rand(H, device=dev) * 2 - 1
    dt_bias = torch.rand(H, device=dev) * 3 - 6  # softplus ≈ 0.003..0.05: typical dt
    D = torch.randn(H, device=dev)
    h0 = 0.1 * torch.randn(H, P, N, device=dev)
    return xbc, dt_raw, a_log, dt_bias, D, h0, s


# ---------------------------------------------------------------- driver

def main():
    out_dir, budget_s, began = side_by_side_args(sys.argv)
    ours = read_ours(out_dir)
    torch.backends.cuda.matmul.allow_tf32 = False  # the recurrences are FP32
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    nan = math.nan
    table = SideBySide(ours, key_width=48, variant_width=22, torch_width=11, decimals=1)
    table.header(f"{'check':>10}")

    def agreement(loop, chunked, args):
        try:
            ref, got = loop(*args)[0], chunked(*args)[0]
            return ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
        except Exception:  # noqa: BLE001 — the timing row reports the failure
            return nan

    def cases():
        for T in (64, 256, 1024):
            nv = 32
            args = gdn_case(T, nv, dev)
            base = f"tokens:{T}/nv:{nv}"
            yield (f"BM_CudaGdnRecurrent/{base}", "per-token loop",
                   lambda: gdn_loop(*args), None)
            yield (f"BM_CudaGdnChunked/{base}", "chunked (solve_tri)",
                   lambda: gdn_chunked(*args), lambda: agreement(gdn_loop, gdn_chunked, args))
        for model, lengths in (("nemotron_h_56b", (256,)), ("tiny_mamba", (256, 1024))):
            for T in lengths:
                args = ssd_case(SSD[model], T, dev)
                base = f"{model}/tokens:{T}"
                yield (f"BM_CudaSsdRecurrent/{base}", "per-token loop",
                       lambda: ssd_loop(*args), None)
                yield (f"BM_CudaSsdChunked/{base}", "chunked (SSD)",
                       lambda: ssd_chunked(*args), lambda: agreement(ssd_loop, ssd_chunked, args))

    with torch.no_grad():
        for key, variant, fn, check in within_budget(cases(), began, budget_s):
            table.row(key, variant, fn, f"{(check() if check else nan):>10.1e}")
    table.summary()


if __name__ == "__main__":
    main()
