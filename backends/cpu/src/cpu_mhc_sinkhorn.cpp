// CPU mHC, Sinkhorn form (docs/spec/numerics.md §3, ops/mhc.h): expand, the pre step (flattened
// RMS, mix GEMV, pre/post weights, Sinkhorn-normalised comb, block input) and the head. Tokens run
// in parallel with OpenMP; each token's matrices live in fixed-size stack arrays bounded by
// kMaxMhcMult, so nothing is allocated per call.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "cpu_mhc_common.h"
#include "cpu_ops.h"
#include "cpu_parallel.h"

namespace bufferlab::cpu {
namespace {

using mhc::kMaxMix;
using mhc::sigmoid;

// comb_ij /= (eps + Σ_i comb_ij) for every column j (eps = 0: the exact normalisation).
void column_normalise(float* c, uint64_t hc, float eps) {
  for (uint64_t j = 0; j < hc; ++j) {
    float sum = 0.0f;
    for (uint64_t i = 0; i < hc; ++i) sum += c[i * hc + j];
    const float d = eps + sum;
    for (uint64_t i = 0; i < hc; ++i) c[i * hc + j] /= d;
  }
}

// comb_ij /= (eps + Σ_j comb_ij) for every row i.
void row_normalise(float* c, uint64_t hc, float eps) {
  for (uint64_t i = 0; i < hc; ++i) {
    float* row = c + i * hc;
    float sum = 0.0f;
    for (uint64_t j = 0; j < hc; ++j) sum += row[j];
    const float d = eps + sum;
    for (uint64_t j = 0; j < hc; ++j) row[j] /= d;
  }
}

// Numerics §3 step 4 on the hc×hc logits, in the spec's order (M-SKORDER: column before row
// inside the loop).
void sinkhorn(float* c, uint64_t hc, uint64_t iters, float eps, bool final_exact_column,
              bool column_first) {
  for (uint64_t i = 0; i < hc; ++i) {  // row softmax (max-subtracted) + eps
    float* row = c + i * hc;
    float m = row[0];
    for (uint64_t j = 1; j < hc; ++j) m = std::max(m, row[j]);
    float sum = 0.0f;
    for (uint64_t j = 0; j < hc; ++j) {
      row[j] = std::exp(row[j] - m);
      sum += row[j];
    }
    for (uint64_t j = 0; j < hc; ++j) row[j] = row[j] / sum + eps;
  }
  column_normalise(c, hc, eps);
  for (uint64_t it = 1; it < iters; ++it) {
    if (column_first) {
      column_normalise(c, hc, eps);
      row_normalise(c, hc, eps);
    } else {
      row_normalise(c, hc, eps);
      column_normalise(c, hc, eps);
    }
  }
  if (final_exact_column) column_normalise(c, hc, 0.0f);  // M-SKCOL skips it
}

void nan_row(uint16_t* y, uint64_t h) { std::fill(y, y + h, f32_to_bf16_bits(mhc::kNaN)); }

struct PreParams {
  uint64_t hc, h, mix, iters;
  float rms_eps, hc_eps;
  bool final_exact_column;
  bool column_first;  // kernel mutant M-SKORDER
};

// One token of the pre step; false for a non-finite token (every output NaN).
bool pre_token(const MhcPreOp::Bound& b, const PreParams& p, uint64_t t) {
  const uint64_t hc = p.hc, h = p.h, K = hc * h;
  const float* x = b.streams + t * K;
  float* post = b.post + t * hc;
  float* comb = b.comb + t * hc * hc;
  uint16_t* y = b.block_in + t * h;
  float mix[kMaxMix];
  if (!mhc::scaled_mix(x, K, b.fn, p.mix, p.rms_eps, mix)) {
    std::fill(post, post + hc, mhc::kNaN);
    std::fill(comb, comb + hc * hc, mhc::kNaN);
    nan_row(y, h);
    return false;
  }
  const float s0 = b.scale[0], s1 = b.scale[1], s2 = b.scale[2];
  float pre[kMaxMhcMult];
  for (uint64_t i = 0; i < hc; ++i) {
    pre[i] = sigmoid(mix[i] * s0 + b.bias[i]) + p.hc_eps;
    post[i] = 2.0f * sigmoid(mix[hc + i] * s1 + b.bias[hc + i]);
  }
  float c[kMaxMhcMult * kMaxMhcMult];
  for (uint64_t k = 0; k < hc * hc; ++k) c[k] = mix[2 * hc + k] * s2 + b.bias[2 * hc + k];
  sinkhorn(c, hc, p.iters, p.hc_eps, p.final_exact_column, p.column_first);
  std::copy(c, c + hc * hc, comb);
  mhc::weighted_stream_sum(x, pre, hc, h, y);
  return true;
}

}  // namespace

void mhc_expand(const Workspace& ws, const MhcExpandOp& op) {
  const auto [rows, hc, h] = op.shape();
  mhc::require_launchable(op, rows, hc);
  const MhcExpandOp::Bound b = op.bind(ws);
  const auto n = static_cast<int64_t>(rows);
  parallel_for(n, rows * hc * h >= kParallelMinWork, [&](int64_t t) {
    const uint16_t* in = b.input + static_cast<uint64_t>(t) * h;
    float* out = b.streams + static_cast<uint64_t>(t) * hc * h;
    for (uint64_t d = 0; d < h; ++d) out[d] = bf16_bits_to_f32(in[d]);
    for (uint64_t i = 1; i < hc; ++i) std::copy(out, out + h, out + i * h);
  });
}

MhcDiagnostics mhc_pre(const Workspace& ws, const MhcPreOp& op, Mutant mutant) {
  const MhcPreOp::Shape& s = op.shape();
  mhc::require_launchable(op, s.rows, s.hc);
  if (s.iters == 0)
    throw Error(op.params() + ": hc_sinkhorn_iters = 0 (the Sinkhorn needs at least one round)");
  if (s.mix != (2 + s.hc) * s.hc)
    throw Error(op.params() + ": mix = " + std::to_string(s.mix) + ", not (2 + hc)·hc");
  const MhcPreOp::Bound b = op.bind(ws);
  const PreParams p{s.hc,
                    s.h,
                    s.mix,
                    s.iters,
                    static_cast<float>(op.rms_eps),
                    static_cast<float>(op.hc_eps),
                    mutant != Mutant::M_SKCOL,
                    mutant == Mutant::M_SKORDER};
  const auto n = static_cast<int64_t>(s.rows);
  const uint64_t bad =
      parallel_sum(n, s.rows * s.hc * s.h * s.mix >= kParallelMinWork, [&](int64_t t) {
        return pre_token(b, p, static_cast<uint64_t>(t)) ? uint64_t{0} : uint64_t{1};
      });
  return MhcDiagnostics{bad};
}

MhcDiagnostics mhc_head(const Workspace& ws, const MhcHeadOp& op) {
  const auto [rows, hc, h] = op.shape();
  mhc::require_launchable(op, rows, hc);
  const MhcHeadOp::Bound b = op.bind(ws);
  const float rms_eps = static_cast<float>(op.rms_eps), hc_eps = static_cast<float>(op.hc_eps);
  const uint64_t K = hc * h;
  const auto n = static_cast<int64_t>(rows);
  const uint64_t bad = parallel_sum(n, rows * K * hc >= kParallelMinWork, [&](int64_t ti) {
    const auto t = static_cast<uint64_t>(ti);
    const float* x = b.streams + t * K;
    uint16_t* y = b.output + t * h;
    float pre[kMaxMhcMult];
    if (!mhc::scaled_mix(x, K, b.fn, hc, rms_eps, pre)) {
      nan_row(y, h);
      return uint64_t{1};
    }
    for (uint64_t i = 0; i < hc; ++i) pre[i] = sigmoid(pre[i] * b.scale[0] + b.bias[i]) + hc_eps;
    mhc::weighted_stream_sum(x, pre, hc, h, y);
    return uint64_t{0};
  });
  return MhcDiagnostics{bad};
}

}  // namespace bufferlab::cpu
