// CPU GDN token-by-token recurrence and gated RMSNorm (ops/gdn.h, docs/spec/numerics.md §5). The
// recurrence runs per (sequence, value head) on the FP32 state operand in place (kd·vd floats up to
// 256 KiB: no copy), tokens in order; the per-token vectors (≤ kMaxGdnHeadDim) live on the
// stack. The gated norm runs rows in parallel, in place on the attention output.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "bufferlab/core/number_formats.h"
#include "cpu_gdn_common.h"
#include "cpu_gemm.h"  // silu
#include "cpu_ops.h"
#include "cpu_parallel.h"

namespace bufferlab::cpu {
namespace {

using gdn::kMaxHead;

// Tokens [0, L) of sequence s, value head v: δ = β(v − α·Sᵀk), S = αS + k δᵀ, o = Sᵀq → BF16.
void recur(const GdnRecurrentOp::Bound& b, const GdnRecurrentOp::Shape& d, const gdn::Columns& cols,
           uint64_t s, uint64_t v) {
  const uint64_t kd = d.kd, vd = d.vd, width = d.nv * vd;
  const float q_scale = gdn::query_scale(kd);
  float* S = b.state + (s * d.nv + v) * kd * vd;
  alignas(64) float q[kMaxHead], k[kMaxHead], delta[kMaxHead], o[kMaxHead];
  for (uint64_t t = 0; t < d.L; ++t) {
    const uint64_t row = s * d.L + t;
    const float* conv = b.conv + row * d.conv_dim;
    gdn::l2_normalise(conv + cols.q(v), kd, q_scale, q);
    gdn::l2_normalise(conv + cols.k(v), kd, 1.0f, k);
    const float* x = conv + cols.v(v);
    const float beta = b.gates[(row * d.nv + v) * 2];
    const float alpha = b.gates[(row * d.nv + v) * 2 + 1];
    std::fill(delta, delta + vd, 0.0f);  // Sᵀk first, then δ in place
    for (uint64_t i = 0; i < kd; ++i) {
      const float ki = k[i];
      const float* Si = S + i * vd;
      for (uint64_t j = 0; j < vd; ++j) delta[j] += ki * Si[j];
    }
    for (uint64_t j = 0; j < vd; ++j) delta[j] = beta * (x[j] - alpha * delta[j]);
    std::fill(o, o + vd, 0.0f);
    for (uint64_t i = 0; i < kd; ++i) {
      const float ki = k[i], qi = q[i];
      float* Si = S + i * vd;
      for (uint64_t j = 0; j < vd; ++j) {
        Si[j] = alpha * Si[j] + ki * delta[j];
        o[j] += qi * Si[j];
      }
    }
    uint16_t* out = b.output + row * width + v * vd;
    for (uint64_t j = 0; j < vd; ++j) out[j] = f32_to_bf16_bits(o[j]);
  }
}

}  // namespace

void gdn_recurrent(const Workspace& ws, const GdnRecurrentOp& op) {
  const GdnRecurrentOp::Shape& d = op.shape();
  const GdnRecurrentOp::Bound b = op.bind(ws);  // refuses kd, vd > kMaxGdnHeadDim
  const uint64_t items = d.sequences * d.nv;    // bind checked sequences·nv·kd·vd
  gdn::require_gqa(op, d.nk, d.nv);
  gdn::require_index_range(op, items);
  if (d.rows == 0) return;
  const gdn::Columns cols{d.nk, d.kd, d.nv, d.vd};
  const uint64_t work = d.rows * d.nv * d.kd * d.vd;
  parallel_for(static_cast<int64_t>(items), work >= kParallelMinWork, [&](int64_t i) {
    const auto item = static_cast<uint64_t>(i);
    recur(b, d, cols, item / d.nv, item % d.nv);
  });
}

void gdn_gated_norm(const Workspace& ws, const GdnGatedNormOp& op) {
  const GdnGatedNormOp::Shape& d = op.shape();
  const GdnGatedNormOp::Bound b = op.bind(ws);
  gdn::require_index_range(op, d.rows);
  const uint64_t hd = d.head_dim, width = d.heads * hd;
  const float eps = static_cast<float>(op.eps), n = static_cast<float>(hd);
  parallel_for(static_cast<int64_t>(d.rows), d.rows * width >= kParallelMinWork, [&](int64_t r) {
    const auto row = static_cast<uint64_t>(r);
    for (uint64_t h = 0; h < d.heads; ++h) {
      uint16_t* io = b.io + row * width + h * hd;
      const uint16_t* z = b.z + row * d.z_row_stride + d.z_col + h * hd;
      float sum_sq = 0.0f;
      for (uint64_t j = 0; j < hd; ++j) {
        const float o = bf16_bits_to_f32(io[j]);
        sum_sq += o * o;
      }
      const float rs = 1.0f / std::sqrt(sum_sq / n + eps);
      for (uint64_t j = 0; j < hd; ++j) {
        const float o = bf16_bits_to_f32(io[j]);
        const float w = bf16_bits_to_f32(b.weight[j]);
        io[j] = f32_to_bf16_bits(o * rs * w * silu(bf16_bits_to_f32(z[j])));
      }
    }
  });
}

}  // namespace bufferlab::cpu
