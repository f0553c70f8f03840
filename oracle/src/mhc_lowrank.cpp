// FP64 oracle of the low-rank mHC pre step (docs/spec/numerics.md §4): its stages, the whole step
// on either path's definition, and the BF16 weights of the slab path.
#include <cmath>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/mhc.h"
#include "mhc_common.h"

namespace bufferlab::oracle {

namespace {

std::string describe(const MhcLowRankDims& d) {
  return "hc_lowrank(rows=" + std::to_string(d.rows) + ",hc=" + std::to_string(d.hc) +
         ",h=" + std::to_string(d.h) + ",r=" + std::to_string(d.r) + ")";
}

// out[t, o] = Σ_k W[o, k]·in[t, k] for W [outs, ins], NaN rows propagate.
std::vector<double> gemm_rows(uint64_t rows, uint64_t ins, uint64_t outs,
                              std::span<const double> in, std::span<const double> w) {
  return row_products(rows, ins, outs, in, w, [](double p) { return p; });
}

// out[t, o] = Σ_k w[o, k]·in[t, k] (gemm_rows) after the size checks of in [rows, ins] and
// w [outs, ins]: the down, inject and up stages.
std::vector<double> checked_gemm(const MhcLowRankDims& d, const char* in_name,
                                 std::span<const double> in, uint64_t ins, const char* w_name,
                                 std::span<const double> w, uint64_t outs) {
  const std::string p = describe(d);
  require_size(p, in_name, in.size(), mul(d.rows, ins));
  require_size(p, w_name, w.size(), mul(outs, ins));
  return gemm_rows(d.rows, ins, outs, in, w);
}

std::vector<double> bf16_rounded(std::span<const float> v) {
  std::vector<double> out(v.size());
  for (size_t k = 0; k < v.size(); ++k) out[k] = bf16_value(f32_to_bf16_bits(v[k]));
  return out;
}

}  // namespace

std::vector<double> widen(std::span<const float> v) { return {v.begin(), v.end()}; }

std::vector<double> widen_bf16(std::span<const uint16_t> v) {
  std::vector<double> out(v.size());
  for (size_t k = 0; k < v.size(); ++k) out[k] = bf16_value(v[k]);
  return out;
}

MhcLowRankSlabWeights slab_weights(const MhcLowRankWeights& w) {
  auto bits = [](const std::vector<float>& v) {
    std::vector<uint16_t> out(v.size());
    for (size_t k = 0; k < v.size(); ++k) out[k] = f32_to_bf16_bits(v[k]);
    return out;
  };
  return {bits(w.w_down), bits(w.w_inject), bits(w.w_up)};
}

std::vector<double> mhc_lowrank_norm(const MhcLowRankDims& d, std::span<const float> streams,
                                     std::span<const float> norm_w, uint64_t* nonfinite) {
  const uint64_t W = mul(d.hc, d.h);
  const std::string p = describe(d);
  require_size(p, "streams", streams.size(), mul(d.rows, W));
  require_size(p, "norm_w", norm_w.size(), W);
  std::vector<double> out(mul(d.rows, W));
  uint64_t bad = 0;
  for (uint64_t t = 0; t < d.rows; ++t) {
    const float* x = streams.data() + t * W;
    double* n = out.data() + t * W;
    if (!all_finite(x, W)) {  // the defined result: the whole row NaN
      ++bad;
      for (uint64_t k = 0; k < W; ++k) n[k] = NAN;
      continue;
    }
    for (uint64_t i = 0; i < d.hc; ++i) {
      const double r = rms_factor(x + i * d.h, d.h, d.rms_eps);
      for (uint64_t c = 0; c < d.h; ++c) {
        const uint64_t k = i * d.h + c;
        n[k] = x[k] * r * (1.0 + static_cast<double>(norm_w[k]));
      }
    }
  }
  if (nonfinite != nullptr) *nonfinite = bad;
  return out;
}

std::vector<double> mhc_lowrank_down(const MhcLowRankDims& d, std::span<const double> normed,
                                     std::span<const double> w_down) {
  std::vector<double> low =
      checked_gemm(d, "normed", normed, mul(d.hc, d.h), "w_down", w_down, d.r);
  for (double& v : low) v = silu(v / static_cast<double>(d.hc));
  return low;
}

std::vector<double> mhc_lowrank_inject(const MhcLowRankDims& d, std::span<const double> normed,
                                       std::span<const double> w_inject) {
  return checked_gemm(d, "normed", normed, mul(d.hc, d.h), "w_inject", w_inject, d.hc);
}

std::vector<double> mhc_lowrank_up(const MhcLowRankDims& d, std::span<const double> low,
                                   std::span<const double> w_up) {
  return checked_gemm(d, "low", low, d.r, "w_up", w_up, mul(d.hc, d.h));
}

std::vector<double> mhc_lowrank_collapse(const MhcLowRankDims& d, std::span<const double> normed,
                                         std::span<const double> up_pre) {
  const uint64_t W = mul(d.hc, d.h);
  const std::string p = describe(d);
  require_size(p, "normed", normed.size(), mul(d.rows, W));
  require_size(p, "up_pre", up_pre.size(), mul(d.rows, W));
  std::vector<double> y(mul(d.rows, d.h));
  for (uint64_t t = 0; t < d.rows; ++t)
    for (uint64_t c = 0; c < d.h; ++c) {
      double s = 0.0;
      for (uint64_t i = 0; i < d.hc; ++i) {
        const uint64_t k = t * W + i * d.h + c;
        s += sigmoid(up_pre[k]) * normed[k];
      }
      y[t * d.h + c] = s / static_cast<double>(d.hc);
    }
  return y;
}

std::vector<double> mhc_lowrank_post(const MhcLowRankDims& d, std::span<const double> inj_pre) {
  require_size(describe(d), "inj_pre", inj_pre.size(), mul(d.rows, d.hc));
  std::vector<double> post(inj_pre.size());
  for (size_t k = 0; k < post.size(); ++k)
    post[k] = 2.0 * sigmoid(inj_pre[k] / static_cast<double>(d.hc));
  return post;
}

MhcLowRankReference hc_lowrank(uint64_t rows, uint64_t hc, uint64_t h, uint64_t r, double rms_eps,
                               std::span<const float> streams, const MhcLowRankWeights& w,
                               bool slab_precision, Mode mode) {
  const MhcLowRankDims d{rows, hc, h, r, rms_eps};
  if (hc == 0 || h == 0 || r == 0) throw Error(describe(d) + ": hc, h and r must be positive");
  // The slab path stores BF16 intermediates (rounded in faithful mode) and reads BF16 weights.
  const bool store_bf16 = slab_precision && mode == Mode::faithful;
  auto stored = [&](std::vector<double> v) { return store_bf16 ? rounded_bf16(std::move(v)) : v; };
  auto weight = [&](const std::vector<float>& v) {
    return slab_precision ? bf16_rounded(v) : widen(v);
  };

  MhcLowRankReference ref;
  ref.normed = stored(mhc_lowrank_norm(d, streams, w.norm_w, &ref.nonfinite_tokens));
  ref.low = stored(mhc_lowrank_down(d, ref.normed, weight(w.w_down)));
  ref.inj_pre = stored(mhc_lowrank_inject(d, ref.normed, weight(w.w_inject)));
  ref.up_pre = stored(mhc_lowrank_up(d, ref.low, weight(w.w_up)));
  ref.block_in = mhc_lowrank_collapse(d, ref.normed, ref.up_pre);
  if (mode == Mode::faithful) ref.block_in = rounded_bf16(std::move(ref.block_in));
  ref.post = mhc_lowrank_post(d, ref.inj_pre);
  return ref;
}

}  // namespace bufferlab::oracle
