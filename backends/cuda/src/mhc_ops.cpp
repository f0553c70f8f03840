// Host side of the CUDA mHC ops (docs/spec/numerics.md §3–§4, ops/mhc.h): bind, refuse what the
// kernels cannot hold, launch on the default stream.
//   pre / head     one fused kernel per call (mhc_sinkhorn.cu); the non-finite token count
//                  goes through the context's device counter (reset before the launch, copied
//                  back synchronously — the same counter moe_topk uses; ops never overlap on
//                  the one stream).
//   low-rank norm  one block per token (mhc_lowrank.cu), counted the same way.
//   split path     FP32 per-token kernels for down and collapse.
//   slab path      down: cuBLAS BF16 GEMM (FP32 accumulate) into the fixed staging area as FP32,
//                  in row chunks that fit it, then the epilogue kernel bf16(silu(acc / hc));
//                  inject and up: cuBLAS writes the BF16 result directly (one rounding of the
//                  FP32 accumulator, as the "store" GemmOp kind); collapse: one kernel.
//   post / expand  one elementwise kernel each (mhc_post.cu).
// Nothing is allocated: the only device memory used beyond the bound operands is the
// LibraryContext's staging area and counter.
#include <algorithm>
#include <string>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "cuda_check.h"
#include "gemm.h"
#include "mhc_kernels.h"
#include "mhc_ops.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

// The message (op.params()) is built only when the check fails: a launch allocates nothing.
template <class Op>
void require_mhc(const Op& op, uint64_t hc) {
  if (hc == 0 || hc > kMaxMhcMult)
    throw Error(op.params() + ": hc = " + std::to_string(hc) + " outside [1, kMaxHcMult = " +
                std::to_string(kMaxMhcMult) + "] (the CUDA kernels hold hc ≤ 16 per token)");
}

uint64_t mul(uint64_t a, uint64_t b) { return (Size(a) * b).value(); }

void reset_counter(LibraryContext& ctx) {
  BUFFERLAB_CUDA_CHECK(cudaMemsetAsync(ctx.nan_counter(), 0, sizeof(unsigned long long)));
}

MhcDiagnostics read_counter(LibraryContext& ctx) {
  unsigned long long count = 0;
  BUFFERLAB_CUDA_CHECK(
      cudaMemcpy(&count, ctx.nan_counter(), sizeof(count), cudaMemcpyDeviceToHost));
  MhcDiagnostics diag;
  diag.nonfinite_tokens = count;
  return diag;
}

MhcDiagnostics run_norm(LibraryContext& ctx, MhcNormLaunch a) {
  a.nonfinite = ctx.nan_counter();
  reset_counter(ctx);
  launch_mhc_lowrank_norm(a, nullptr);
  return read_counter(ctx);
}

}  // namespace

void mhc_expand(const Workspace& ws, const MhcExpandOp& op) {
  const auto& d = op.shape();
  require_mhc(op, d.hc);
  const MhcExpandOp::Bound b = op.bind(ws);
  launch_mhc_expand(b.input, b.streams, d.rows, d.hc, d.h, nullptr);
}

MhcDiagnostics mhc_pre(LibraryContext& ctx, const Workspace& ws, const MhcPreOp& op,
                       Mutant mutant) {
  const auto& d = op.shape();
  require_mhc(op, d.hc);
  if (d.mix != (d.hc + 2) * d.hc)
    throw Error(op.params() + ": mix = " + std::to_string(d.mix) +
                ", expected (2 + hc)·hc = " + std::to_string((d.hc + 2) * d.hc));
  if (d.iters == 0)
    throw Error(op.params() + ": hc_sinkhorn_iters = 0 (the Sinkhorn needs at least one round)");
  const MhcPreOp::Bound b = op.bind(ws);
  if (d.rows == 0 || d.h == 0) return {};
  MhcMixLaunch a;
  a.streams = b.streams;
  a.fn = b.fn;
  a.scale = b.scale;
  a.bias = b.bias;
  a.post = b.post;
  a.comb = b.comb;
  a.out = b.block_in;
  a.nonfinite = ctx.nan_counter();
  a.rows = d.rows;
  a.hc = d.hc;
  a.h = d.h;
  a.iters = d.iters;
  a.rms_eps = static_cast<float>(op.rms_eps);
  a.hc_eps = static_cast<float>(op.hc_eps);
  a.head = false;
  a.skip_final_column = mutant == Mutant::M_SKCOL;
  a.column_first = mutant == Mutant::M_SKORDER;
  reset_counter(ctx);
  launch_mhc_mix(a, nullptr);
  return read_counter(ctx);
}

MhcDiagnostics mhc_head(LibraryContext& ctx, const Workspace& ws, const MhcHeadOp& op) {
  const auto& d = op.shape();
  require_mhc(op, d.hc);
  const MhcHeadOp::Bound b = op.bind(ws);
  if (d.rows == 0 || d.h == 0) return {};
  MhcMixLaunch a;
  a.streams = b.streams;
  a.fn = b.fn;
  a.scale = b.scale;
  a.bias = b.bias;
  a.out = b.output;
  a.nonfinite = ctx.nan_counter();
  a.rows = d.rows;
  a.hc = d.hc;
  a.h = d.h;
  a.rms_eps = static_cast<float>(op.rms_eps);
  a.hc_eps = static_cast<float>(op.hc_eps);
  a.head = true;
  reset_counter(ctx);
  launch_mhc_mix(a, nullptr);
  return read_counter(ctx);
}

MhcDiagnostics mhc_lowrank_split(LibraryContext& ctx, const Workspace& ws,
                                 const MhcLowRankSplitOp& op) {
  const auto& d = op.shape();
  require_mhc(op, d.hc);
  const MhcLowRankSplitOp::Bound b = op.bind(ws);
  if (d.rows == 0) return {};
  switch (op.stage) {
    case MhcLowRankSplitOp::Stage::norm: {
      if (d.h == 0) return {};
      MhcNormLaunch a;
      a.streams = b.streams;
      a.norm_w = b.norm_w;
      a.normed_f32 = b.normed;
      a.rows = d.rows;
      a.hc = d.hc;
      a.h = d.h;
      a.eps = static_cast<float>(op.rms_eps);
      return run_norm(ctx, a);
    }
    case MhcLowRankSplitOp::Stage::down: {
      MhcSplitDownLaunch a;
      a.normed = b.normed;
      a.w_down_inject = b.w_down_inject;
      a.low = b.low;
      a.post = b.post;
      a.rows = d.rows;
      a.hc = d.hc;
      a.h = d.h;
      a.r = d.r;
      launch_mhc_split_down(a, nullptr);
      return {};
    }
    case MhcLowRankSplitOp::Stage::collapse: {
      MhcSplitCollapseLaunch a;
      a.normed = b.normed;
      a.low = b.low;
      a.w_up = b.w_up;
      a.block_in = b.block_in;
      a.rows = d.rows;
      a.hc = d.hc;
      a.h = d.h;
      a.r = d.r;
      launch_mhc_split_collapse(a, nullptr);
      return {};
    }
  }
  throw Error(op.params() + ": unknown stage");
}

MhcDiagnostics mhc_lowrank_slab(LibraryContext& ctx, const Workspace& ws,
                                const MhcLowRankSlabOp& op) {
  const auto& d = op.shape();
  require_mhc(op, d.hc);
  const MhcLowRankSlabOp::Bound b = op.bind(ws);
  if (d.rows == 0) return {};
  const uint64_t W = mul(d.hc, d.h);
  RowGemm g;  // BF16 operands, FP32 accumulate
  switch (op.stage) {
    case MhcLowRankSlabOp::Stage::norm: {
      if (d.h == 0) return {};
      MhcNormLaunch a;
      a.streams = b.streams;
      a.norm_w = b.norm_w;
      a.normed_bf16 = b.normed;
      a.rows = d.rows;
      a.hc = d.hc;
      a.h = d.h;
      a.eps = static_cast<float>(op.rms_eps);
      return run_norm(ctx, a);
    }
    case MhcLowRankSlabOp::Stage::down: {
      // low = bf16(silu((normed·W_downᵀ) / hc)): FP32 GEMM result through the staging area.
      if (d.r == 0) return {};
      const uint64_t chunk = LibraryContext::kStagingBytes / mul(d.r, sizeof(float));
      if (chunk == 0) throw Error(op.params() + ": r too large for the fixed GEMM staging area");
      auto* acc = static_cast<float*>(ctx.staging());
      g.w = b.w_down;
      g.ldw = W;
      g.ldx = W;
      g.y = acc;
      g.y_type = CUDA_R_32F;
      g.ldy = d.r;
      g.N = d.r;
      g.K = W;
      for (uint64_t r0 = 0; r0 < d.rows; r0 += chunk) {
        const uint64_t rows = std::min(chunk, d.rows - r0);
        g.x = b.normed + r0 * W;
        g.rows = rows;
        row_gemm(ctx, g);
        launch_mhc_down_epilogue(acc, b.low + r0 * d.r, rows * d.r, d.hc, nullptr);
      }
      return {};
    }
    case MhcLowRankSlabOp::Stage::inject:
      // inj_pre = bf16(normed·W_injectᵀ), written by cuBLAS.
      g.x = b.normed;
      g.ldx = W;
      g.w = b.w_inject;
      g.ldw = W;
      g.y = b.inj_pre;
      g.ldy = d.hc;
      g.rows = d.rows;
      g.N = d.hc;
      g.K = W;
      row_gemm(ctx, g);
      return {};
    case MhcLowRankSlabOp::Stage::up:
      // up_pre = bf16(low·W_upᵀ), written by cuBLAS.
      g.x = b.low;
      g.ldx = d.r;
      g.w = b.w_up;
      g.ldw = d.r;
      g.y = b.up_pre;
      g.ldy = W;
      g.rows = d.rows;
      g.N = W;
      g.K = d.r;
      row_gemm(ctx, g);
      return {};
    case MhcLowRankSlabOp::Stage::collapse: {
      MhcSlabCollapseLaunch a;
      a.normed = b.normed;
      a.up_pre = b.up_pre;
      a.inj_pre = b.inj_pre;
      a.block_in = b.block_in;
      a.post = b.post;
      a.rows = d.rows;
      a.hc = d.hc;
      a.h = d.h;
      launch_mhc_slab_collapse(a, nullptr);
      return {};
    }
  }
  throw Error(op.params() + ": unknown stage");
}

void mhc_post(const Workspace& ws, const MhcPostOp& op, Mutant mutant) {
  const auto& d = op.shape();
  require_mhc(op, d.hc);
  const MhcPostOp::Bound b = op.bind(ws);
  MhcPostLaunch a;
  a.post = b.post;
  a.comb = d.lowrank ? nullptr : b.comb;
  a.block_out = b.block_out;
  a.streams = b.streams;
  a.out = b.out;
  a.rows = d.rows;
  a.hc = d.hc;
  a.h = d.h;
  a.round_bf16 = mutant == Mutant::B13;
  launch_mhc_post(a, nullptr);
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
