// CPU MoE router GEMM (docs/spec/numerics.md §2): logits[t, e] = Σ_k x[t,k]·Wg[e,k] over the E' = E
// + zero expert columns, FP32 accumulate through the tiled GEMM; the bf16 path stores BF16, the
// FP32 paths store FP32 (kernel mutant B14: rounded through BF16 first, the bug they exist to fix).
#include "bufferlab/core/number_formats.h"
#include "cpu_gemm.h"
#include "cpu_ops.h"

namespace bufferlab::cpu {
namespace {

// Stores a tile of FP32 logits: BF16 (bf16 path) or FP32 (optionally through BF16: B14).
struct LogitSink {
  const MoeRouterOp::Bound& p;
  uint64_t experts;
  bool round_through_bf16;
  void operator()(uint64_t r0, uint64_t m, uint64_t n0, uint64_t n, const float* c) const {
    for (uint64_t i = 0; i < m; ++i) {
      const float* v = c + i * kTileN;
      const uint64_t at = (r0 + i) * experts + n0;
      if (p.logits_bf16 != nullptr) {
        for (uint64_t j = 0; j < n; ++j) p.logits_bf16[at + j] = f32_to_bf16_bits(v[j]);
      } else if (round_through_bf16) {
        for (uint64_t j = 0; j < n; ++j)
          p.logits_f32[at + j] = bf16_bits_to_f32(f32_to_bf16_bits(v[j]));
      } else {
        for (uint64_t j = 0; j < n; ++j) p.logits_f32[at + j] = v[j];
      }
    }
  }
};

}  // namespace

void moe_router(const Workspace& ws, const MoeRouterOp& op, Mutant mutant, Scratch& scratch) {
  const MoeRouterOp::Bound p = op.bind(ws);  // x_f32 on fp32_routing, x_bf16 otherwise
  const auto [rows, hidden, experts] = op.shape();
  const LogitSink sink{p, experts, mutant == Mutant::B14};
  if (p.x_f32 != nullptr) {
    tiled_gemm<float>(
        rows, hidden, experts, p.weight, [&](uint64_t r) { return p.x_f32 + r * hidden; }, sink,
        scratch);
  } else {
    tiled_gemm<uint16_t>(
        rows, hidden, experts, p.weight, [&](uint64_t r) { return p.x_bf16 + r * hidden; }, sink,
        scratch);
  }
}

}  // namespace bufferlab::cpu
