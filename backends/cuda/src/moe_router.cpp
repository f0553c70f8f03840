// The MoE router GEMM on cuBLAS (docs/spec/numerics.md §2): logits[T, E'] = x[T, h] · Wg[E', h]ᵀ,
// FP32 accumulate (CUBLAS_COMPUTE_32F).
//   bf16:         BF16 x, BF16 W → BF16 logits; reduced-precision reductions disallowed.
//   fp32_gate:    BF16 x, BF16 W → FP32 logits.
//   fp32_routing: FP32 x, BF16 W. cublasGemmEx has no FP32 × BF16 mix, so W is first widened
//                 (exactly) to FP32 in the staging area, kStagingBytes / (4·h) experts at a
//                 time, and each chunk is an FP32 GEMM under CUBLAS_PEDANTIC_MATH (no TF32)
//                 into the logits columns [e0, e1) (ldc = E').
// Mutant B14: the FP32 paths then round every stored logit to BF16.
#include <algorithm>
#include <string>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "gemm.h"
#include "moe_kernels.h"
#include "moe_ops.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {

void moe_router(LibraryContext& ctx, const Workspace& ws, const MoeRouterOp& op, Mutant mutant) {
  const MoeRouterOp::Bound b = op.bind(ws);
  const auto& d = op.shape();
  if (d.rows == 0 || d.experts == 0) return;
  RowGemm g;
  g.rows = d.rows;
  g.K = d.hidden;
  g.ldx = d.hidden;
  g.ldw = d.hidden;
  g.ldy = d.experts;
  switch (op.precision) {
    case RouterPrecision::bf16:
      g.x = b.x_bf16;
      g.w = b.weight;
      g.y = b.logits_bf16;
      g.N = d.experts;
      row_gemm(ctx, g);
      return;  // B14 concerns the FP32 paths only
    case RouterPrecision::fp32_gate:
      g.x = b.x_bf16;
      g.w = b.weight;
      g.y = b.logits_f32;
      g.y_type = CUDA_R_32F;
      g.N = d.experts;
      row_gemm(ctx, g);
      break;
    case RouterPrecision::fp32_routing: {
      const uint64_t per_expert = (Size(d.hidden) * sizeof(float)).value();
      const uint64_t chunk =
          per_expert == 0 ? d.experts : LibraryContext::kStagingBytes / per_expert;
      if (chunk == 0) throw Error(op.params() + ": hidden too large for the fixed staging area");
      auto* w32 = static_cast<float*>(ctx.staging());
      g.x = b.x_f32;
      g.x_type = CUDA_R_32F;
      g.w = w32;
      g.w_type = CUDA_R_32F;
      g.y_type = CUDA_R_32F;
      for (uint64_t e0 = 0; e0 < d.experts; e0 += chunk) {
        const uint64_t n = std::min(chunk, d.experts - e0);
        launch_widen_bf16(b.weight + e0 * d.hidden, w32, n * d.hidden, nullptr);
        g.y = b.logits_f32 + e0;
        g.N = n;
        row_gemm(ctx, g);
      }
      break;
    }
  }
  if (mutant == Mutant::B14)
    launch_round_to_bf16(b.logits_f32, d.rows, d.experts, d.experts, nullptr);
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
