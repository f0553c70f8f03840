// CPU Mamba-2 recurrence (ops/mamba2.h, docs/spec/numerics.md §6), FP32, per (sequence, head), in
// place on the f32 state [sequences, H, P, N]:
//   dt = clamp(softplus(dt_raw + dt_bias)), h ← exp(dt·A)·h + (dt·x_t) B_tᵀ,
//   y_t = h·C_t + D·x_t → BF16.
// Each state row h[p] is updated and dotted with C_t while it is in cache. (sequence, head)
// pairs run in parallel.
#include <cmath>
#include <cstdint>

#include "bufferlab/core/number_formats.h"
#include "cpu_mamba2_common.h"
#include "cpu_ops.h"
#include "cpu_parallel.h"

namespace bufferlab::cpu {
namespace {

using Shape = Mamba2RecurrentOp::Shape;
using Bound = Mamba2RecurrentOp::Bound;

void recur_head(const Shape& d, const Bound& b, uint64_t seq, uint64_t h) {
  alignas(64) float bt[kMaxMamba2Dim];
  alignas(64) float ct[kMaxMamba2Dim];
  const uint64_t P = d.P, N = d.N, g = h / (d.H / d.G);
  const float A = -std::exp(b.a_log[h]);
  const float bias = b.dt_bias[h], Dh = b.D[h];
  float* state = b.state + (seq * d.H + h) * P * N;
  const ssd::ConstVectorMap bv(bt, ssd::idx(N)), cv(ct, ssd::idx(N));
  for (uint64_t i = 0; i < d.L; ++i) {
    const uint64_t r = seq * d.L + i;
    const float dt =
        ssd::step(bf16_bits_to_f32(b.zxbcdt[r * d.in_proj + d.d_inner + d.d_xbc + h]), bias);
    const float decay = std::exp(dt * A);
    const uint16_t* xbc = b.xbc + r * d.d_xbc;
    ssd::widen(xbc + ssd::b_column(d.d_inner, N, g), N, bt);
    ssd::widen(xbc + ssd::c_column(d.d_inner, N, d.G, g), N, ct);
    const uint16_t* x = xbc + h * P;
    uint16_t* out = b.output + r * d.d_inner + h * P;
    for (uint64_t p = 0; p < P; ++p) {
      const float xp = bf16_bits_to_f32(x[p]);
      ssd::VectorMap hp(state + p * N, ssd::idx(N));
      hp = decay * hp + (dt * xp) * bv;
      out[p] = f32_to_bf16_bits(hp.dot(cv) + Dh * xp);
    }
  }
}

}  // namespace

void mamba2_recurrent(const Workspace& ws, const Mamba2RecurrentOp& op) {
  const Bound b = op.bind(ws);  // refuses ng = 0, H % G ≠ 0, P or N > kMaxMamba2Dim
  const Shape& d = op.shape();
  const auto items = static_cast<int64_t>(d.sequences * d.H);
  parallel_for(items, d.rows * d.H * d.P * d.N >= kParallelMinWork, [&](int64_t i) {
    const auto item = static_cast<uint64_t>(i);
    recur_head(d, b, item / d.H, item % d.H);
  });
}

}  // namespace bufferlab::cpu
