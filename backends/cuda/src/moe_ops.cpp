// Host side of the CUDA MoE ops: top-k, gather, grouped expert GEMMs, SwiGLU, combine.
//
// Grouping (THE gather order of moe.h): every grouped op re-derives it from the ids — a
// stable radix sort of (min(id, E), slot) in the fixed context block gives, for gathered row
// g, the slot it holds, and offsets[e] the first gathered row of expert e.
//
// Expert GEMMs: the per-expert offsets are copied to the host (a synchronising cudaMemcpy),
// then the routed rows [0, routed) are processed in windows that fit the staging area:
//   gate/up: for each expert e meeting the window, one cuBLAS GEMM of the gathered rows
//            [max(off_e, g0), min(off_e+1, g1)) (contiguous in expert_down_out) by W[e]ᵀ
//            into staging rows, BF16 out; then one scatter of the window's staging rows to
//            their token-major slices (slot s → output + s·N).
//   down:    the window's input slices (slot s of expert_gate_out, width I) are first
//            gathered into staging, then the same per-expert GEMMs and scatter (slot s →
//            row s of expert_down_out).
// So tokens are grouped by expert: one GEMM per (non-empty expert, window), never one GEMV
// per (token, expert).
#include <algorithm>
#include <cstddef>
#include <string>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "cuda_check.h"
#include "gemm.h"
#include "moe_kernels.h"
#include "moe_ops.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

constexpr uint64_t kStagingAlign = 256;

uint64_t mul(uint64_t a, uint64_t b) { return (Size(a) * b).value(); }

// The grouping of `slots` ids over `experts` routed experts; returns the device array of
// the slot of each gathered row (offsets land in ctx.offsets()). `op` names the launch in an
// error; its params() string is built only then.
template <class Op>
const uint32_t* group_by_expert(LibraryContext& ctx, const Op& op, const uint32_t* ids,
                                uint64_t slots, uint64_t experts) {
  if (slots > LibraryContext::kMaxSlots)
    throw Error(op.params() + ": " + std::to_string(slots) +
                " slots exceed the CUDA backend's grouping capacity of " +
                std::to_string(LibraryContext::kMaxSlots) + " (LibraryContext::kMaxSlots)");
  if (experts > LibraryContext::kMaxGroupExperts)
    throw Error(op.params() + ": " + std::to_string(experts) +
                " routed experts exceed the CUDA backend's grouping capacity of " +
                std::to_string(LibraryContext::kMaxGroupExperts));
  GroupingLaunch a;
  a.ids = ids;
  a.slots = slots;
  a.experts = experts;
  for (int i = 0; i < 2; ++i) {
    a.keys[i] = ctx.sort_keys(i);
    a.values[i] = ctx.sort_values(i);
  }
  a.temp = ctx.sort_temp();
  a.temp_bytes = ctx.sort_temp_bytes();
  a.offsets = ctx.offsets();
  return launch_grouping(a, nullptr);
}

void reset_counters(LibraryContext& ctx) {
  BUFFERLAB_CUDA_CHECK(cudaMemsetAsync(ctx.nan_counter(), 0, sizeof(unsigned long long)));
  BUFFERLAB_CUDA_CHECK(cudaMemsetAsync(ctx.error_flag(), 0, sizeof(uint32_t)));
}

uint32_t read_error_flag(LibraryContext& ctx) {
  uint32_t flag = 0;
  BUFFERLAB_CUDA_CHECK(cudaMemcpy(&flag, ctx.error_flag(), sizeof(flag), cudaMemcpyDeviceToHost));
  return flag;
}

TopKScoring to_kernel(MoeScoring s) {
  switch (s) {
    case MoeScoring::softmax:
      return TopKScoring::softmax;
    case MoeScoring::sigmoid:
      return TopKScoring::sigmoid;
    case MoeScoring::sqrtsoftplus:
      return TopKScoring::sqrtsoftplus;
  }
  throw Error("moe_topk: unknown scoring");
}

}  // namespace

TopKDiagnostics moe_topk(LibraryContext& ctx, const Workspace& ws, const MoeTopKOp& op,
                         Mutant mutant) {
  const auto& d = op.shape();
  if (d.experts > kMaxScoredExperts)
    throw Error(op.params() + ": " + std::to_string(d.experts) +
                " scored experts exceed kMaxScoredExperts = " + std::to_string(kMaxScoredExperts));
  if (d.top_k > kMaxTopK)
    throw Error(op.params() + ": top_k exceeds kMaxTopK = " + std::to_string(kMaxTopK));
  if (d.top_k == 0 || d.top_k > d.experts)
    throw Error(op.params() + ": top_k must be in [1, experts]");
  if (const std::string groups = op.group_error(); !groups.empty())
    throw Error(op.params() + ": " + groups);
  const MoeTopKOp::Bound b = op.bind(ws);
  if (d.rows == 0) return {};

  TopKLaunch a;
  a.logits_bf16 = b.logits_bf16;
  a.logits_f32 = b.logits_f32;
  a.bias = op.use_bias ? b.bias : nullptr;
  a.token_ids = b.token_ids;
  a.tid2eid = b.tid2eid;
  a.ids = b.ids;
  a.weights = b.weights;
  a.nan_keys = ctx.nan_counter();
  a.error_flag = ctx.error_flag();
  a.rows = d.rows;
  a.experts = d.experts;
  a.routed_experts = d.routed_experts;
  a.top_k = d.top_k;
  a.vocab = d.vocab;
  a.scoring = to_kernel(op.scoring);
  a.norm_topk_prob = op.norm_topk_prob;
  a.hash = op.hash;
  a.groups = static_cast<uint32_t>(op.groups);
  a.kept_groups = static_cast<uint32_t>(op.topk_groups);
  a.ties_to_higher = mutant == Mutant::M_TIE;
  a.group_by_best = mutant == Mutant::M_GROUP;
  a.routed_scaling_factor = static_cast<float>(op.routed_scaling_factor);

  reset_counters(ctx);
  launch_topk(a, nullptr);
  unsigned long long nan_keys = 0;
  BUFFERLAB_CUDA_CHECK(
      cudaMemcpy(&nan_keys, ctx.nan_counter(), sizeof(nan_keys), cudaMemcpyDeviceToHost));
  if (read_error_flag(ctx) != 0)
    throw Error(op.params() + ": a token id is not below vocab (" + std::to_string(d.vocab) +
                "); tid2eid has no row for it");
  TopKDiagnostics diag;
  diag.nan_keys = nan_keys;
  return diag;
}

void moe_gather(LibraryContext& ctx, const Workspace& ws, const MoeGatherOp& op) {
  const MoeGatherOp::Bound b = op.bind(ws);
  const auto& d = op.shape();
  const uint64_t slots = mul(d.rows, d.top_k);
  if (slots == 0 || d.width == 0) return;
  const uint32_t* slot_of = group_by_expert(ctx, op, b.ids, slots, d.experts);
  RowGatherLaunch g;
  g.src = b.input;
  g.dst = b.gathered;
  g.slot_of = slot_of;
  g.device_count = ctx.offsets() + d.experts;  // the routed-slot count, on the device
  g.count = slots;
  g.width = d.width;
  g.src_stride = d.width;
  g.dst_stride = d.width;
  g.divisor = d.top_k;
  launch_row_gather(g, nullptr);
}

void moe_expert_gemm(LibraryContext& ctx, const Workspace& ws, const MoeExpertGemmOp& op) {
  const MoeExpertGemmOp::Bound b = op.bind(ws);
  const auto& d = op.shape();
  const uint64_t slots = mul(d.rows, d.top_k);
  if (slots == 0 || d.N == 0) return;
  const uint32_t* slot_of = group_by_expert(ctx, op, b.ids, slots, d.experts);
  uint32_t* off = ctx.host_offsets();
  BUFFERLAB_CUDA_CHECK(
      cudaMemcpy(off, ctx.offsets(), (d.experts + 1) * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  const uint64_t routed = off[d.experts];
  // gate/up: slots no routed expert owns get zero slices (ops/moe.h: SwiGLU runs over every
  // slot).
  if (routed < slots && op.proj != ExpertProj::down)
    BUFFERLAB_CUDA_CHECK(cudaMemsetAsync(b.output, 0, mul(mul(slots, d.N), sizeof(uint16_t))));
  if (routed == 0) return;

  const bool down = op.proj == ExpertProj::down;
  // Staging: the window's output rows [window, N], then (down) its input rows [window, K].
  const uint64_t row_bytes = mul(d.N + (down ? d.K : 0), sizeof(uint16_t));
  const uint64_t window = (LibraryContext::kStagingBytes - kStagingAlign) / row_bytes;
  if (window == 0) throw Error(op.params() + ": a row does not fit the fixed staging area");
  auto* out_stage = static_cast<uint16_t*>(ctx.staging());
  const uint64_t in_at =
      (window * d.N * sizeof(uint16_t) + kStagingAlign - 1) / kStagingAlign * kStagingAlign;
  auto* in_stage = reinterpret_cast<uint16_t*>(static_cast<std::byte*>(ctx.staging()) + in_at);

  RowGemm g;
  g.ldx = d.K;
  g.ldw = d.K;
  g.ldy = d.N;
  g.N = d.N;
  g.K = d.K;
  for (uint64_t g0 = 0; g0 < routed; g0 += window) {
    const uint64_t g1 = std::min(routed, g0 + window);
    if (down) {
      RowGatherLaunch in;
      in.src = b.input;
      in.dst = in_stage;
      in.slot_of = slot_of + g0;
      in.count = g1 - g0;
      in.width = d.K;
      in.src_stride = d.K;
      in.dst_stride = d.K;
      in.divisor = 1;
      launch_row_gather(in, nullptr);
    }
    for (uint64_t e = 0; e < d.experts; ++e) {
      const uint64_t lo = std::max<uint64_t>(off[e], g0), hi = std::min<uint64_t>(off[e + 1], g1);
      if (lo >= hi) continue;
      g.x = down ? in_stage + (lo - g0) * d.K : b.input + lo * d.K;
      g.w = b.weight + e * d.N * d.K;
      g.y = out_stage + (lo - g0) * d.N;
      g.rows = hi - lo;
      row_gemm(ctx, g);
    }
    RowScatterLaunch out;
    out.src = out_stage;
    out.dst = b.output;
    out.slot_of = slot_of + g0;
    out.count = g1 - g0;
    out.width = d.N;
    out.src_stride = d.N;
    out.dst_stride = d.N;
    launch_row_scatter(out, nullptr);
  }
}

void swiglu(const Workspace& ws, const SwigluOp& op) {
  const SwigluOp::Bound b = op.bind(ws);
  const auto& d = op.shape();
  launch_swiglu(b.gate, b.up, mul(d.rows, d.width), static_cast<float>(op.limit), nullptr);
}

void moe_combine(LibraryContext& ctx, const Workspace& ws, const MoeCombineOp& op) {
  const MoeCombineOp::Bound b = op.bind(ws);
  const auto& d = op.shape();
  if (d.rows == 0 || d.width == 0) return;
  CombineLaunch a;
  a.ids = b.ids;
  a.weights = b.weights;
  a.down = b.down;
  a.input = b.input;
  a.output = b.output;
  a.error_flag = ctx.error_flag();
  a.rows = d.rows;
  a.top_k = d.top_k;
  a.experts = d.experts;
  a.zero_experts = d.zero_experts;
  a.width = d.width;
  reset_counters(ctx);
  launch_combine(a, nullptr);
  if (read_error_flag(ctx) != 0)
    throw Error(op.params() + ": an expert id is not below E' = experts + zero_experts" +
                (op.reads_input ? "" : " (or a zero expert was selected where none can be)"));
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
