// Seeded inputs for the mHC ops (the choices are documented in mhc_inputs.h).
#include "bufferlab/oracle/mhc_inputs.h"

#include <fmt/format.h>

#include <cmath>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/seeded_random.h"
#include "oracle_common.h"

namespace bufferlab::oracle {
namespace {

// Distinct streams of the seed for each tensor (rng_for: oracle_common.h).
enum class MhcStream : uint64_t {
  kStreams = 1,
  kFn,
  kScale,
  kBias,
  kPost,
  kComb,
  kBlockOut,
  kWeights
};

std::vector<float> normal_f32(SplitMix64& rng, uint64_t n, double scale) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.normalish() * scale);
  return v;
}

// hc×hc comb biases: every row spans exactly [0, L] (module comment).
void comb_bias_rows(SplitMix64& rng, uint64_t hc, double L, float* bias) {
  for (uint64_t i = 0; i < hc; ++i) {
    float* row = bias + i * hc;
    for (uint64_t j = 0; j < hc; ++j) row[j] = static_cast<float>(rng.uniform() * L);
    if (hc < 2) continue;
    const uint64_t lo = rng.below(hc);
    const uint64_t hi = (lo + 1 + rng.below(hc - 1)) % hc;
    row[lo] = 0.0f;
    row[hi] = static_cast<float>(L);
  }
}

void check_logit_range(double L) {
  if (!(L > 0.0) || !(L <= 100.0))
    throw Error(fmt::format("comb logit range {}: must be in (0, 100]", L));
}

}  // namespace

std::vector<float> generate_mhc_streams(uint64_t rows, uint64_t hc, uint64_t h, uint64_t seed,
                                        const MhcInputProfile& p) {
  const uint64_t n = mul(rows, mul(hc, h));
  SplitMix64 rng = rng_for(seed, MhcStream::kStreams);
  std::vector<float> x(n, 0.0f);
  if (p.magnitude == MhcStreamMagnitude::normal) x = normal_f32(rng, n, p.scale);
  if (p.magnitude == MhcStreamMagnitude::huge) x = normal_f32(rng, n, p.huge_scale);
  for (const MhcNonFinite& bad : p.nonfinite) {
    if (bad.token >= rows || bad.stream >= hc || bad.dim >= h)
      throw Error(
          fmt::format("non-finite stream value at (token {}, stream {}, dim {}) outside "
                      "[{}, {}, {}]",
                      bad.token, bad.stream, bad.dim, rows, hc, h));
    if (std::isfinite(bad.value))
      throw Error(fmt::format("HcNonFinite value {} is finite", bad.value));
    x[(bad.token * hc + bad.stream) * h + bad.dim] = static_cast<float>(bad.value);
  }
  return x;
}

MhcPreInputs generate_mhc_pre_inputs(const MhcPreOp& op, uint64_t seed, const MhcInputProfile& p) {
  check_logit_range(p.logit_range);
  const auto& s = op.shape();
  const uint64_t hc = s.hc, K = mul(hc, s.h);
  MhcPreInputs in;
  in.streams = generate_mhc_streams(s.rows, hc, s.h, seed, p);
  SplitMix64 fn_rng = rng_for(seed, MhcStream::kFn);
  in.fn = normal_f32(fn_rng, mul(s.mix, K), 1.0 / std::sqrt(static_cast<double>(K)));
  in.scale = {1.0f, 1.0f, static_cast<float>(0.02 * p.logit_range)};
  SplitMix64 bias_rng = rng_for(seed, MhcStream::kBias);
  in.bias = normal_f32(bias_rng, s.mix, 0.5);
  comb_bias_rows(bias_rng, hc, p.logit_range, in.bias.data() + 2 * hc);
  return in;
}

MhcPostInputs generate_mhc_post_inputs(const MhcPostOp& op, uint64_t seed,
                                       const MhcInputProfile& p) {
  check_logit_range(p.logit_range);
  const auto& s = op.shape();
  const uint64_t rows = s.rows, hc = s.hc, h = s.h;
  MhcPostInputs in;
  in.streams = generate_mhc_streams(rows, hc, h, seed, p);
  SplitMix64 post_rng = rng_for(seed, MhcStream::kPost);
  in.post.resize(mul(rows, hc));
  for (float& v : in.post) v = static_cast<float>(2.0 / (1.0 + std::exp(-post_rng.normalish())));
  if (!s.lowrank) {
    SplitMix64 comb_rng = rng_for(seed, MhcStream::kComb);
    in.comb.resize(mul(rows, hc * hc));
    std::vector<float> bias(hc * hc);
    for (uint64_t t = 0; t < rows; ++t) {
      comb_bias_rows(comb_rng, hc, p.logit_range, bias.data());
      const std::vector<double> logits(bias.begin(), bias.end());
      const std::vector<double> C = sinkhorn(sinkhorn_kernel(logits, hc, 1e-6), hc, 20, 1e-6);
      for (uint64_t k = 0; k < hc * hc; ++k) in.comb[t * hc * hc + k] = static_cast<float>(C[k]);
    }
  }
  SplitMix64 bo_rng = rng_for(seed, MhcStream::kBlockOut);
  in.block_out.resize(mul(rows, h));
  for (uint16_t& b : in.block_out) b = f32_to_bf16_bits(static_cast<float>(bo_rng.normalish()));
  return in;
}

MhcHeadInputs generate_mhc_head_inputs(const MhcHeadOp& op, uint64_t seed,
                                       const MhcInputProfile& p) {
  const auto& s = op.shape();
  const uint64_t K = mul(s.hc, s.h);
  MhcHeadInputs in;
  in.streams = generate_mhc_streams(s.rows, s.hc, s.h, seed, p);
  SplitMix64 fn_rng = rng_for(seed, MhcStream::kFn);
  in.fn = normal_f32(fn_rng, mul(s.hc, K), 1.0 / std::sqrt(static_cast<double>(K)));
  in.scale = {1.0f};
  SplitMix64 bias_rng = rng_for(seed, MhcStream::kBias);
  in.bias = normal_f32(bias_rng, s.hc, 0.5);
  return in;
}

std::vector<uint16_t> generate_mhc_expand_input(const MhcExpandOp& op, uint64_t seed) {
  SplitMix64 rng = rng_for(seed, MhcStream::kStreams);
  std::vector<uint16_t> in(mul(op.shape().rows, op.shape().h));
  for (uint16_t& b : in) b = f32_to_bf16_bits(static_cast<float>(rng.normalish()));
  return in;
}

MhcLowRankWeights generate_mhc_lowrank_weights(uint64_t hc, uint64_t h, uint64_t r, uint64_t seed) {
  if (hc == 0 || h == 0 || r == 0)
    throw Error(
        fmt::format("low-rank weights: hc = {}, h = {}, r = {} must be positive", hc, h, r));
  const uint64_t K = mul(hc, h);
  const double wide = static_cast<double>(hc) / std::sqrt(static_cast<double>(K));
  SplitMix64 rng = rng_for(seed, MhcStream::kWeights);
  MhcLowRankWeights w;
  w.norm_w = normal_f32(rng, K, 0.25);
  w.w_down = normal_f32(rng, mul(r, K), wide);
  w.w_inject = normal_f32(rng, mul(hc, K), wide);
  w.w_up = normal_f32(rng, mul(K, r), 1.7 / std::sqrt(static_cast<double>(r)));
  return w;
}

MhcLowRankInputs generate_mhc_lowrank_inputs(const MhcLowRankDims& d, uint64_t seed,
                                             const MhcInputProfile& p) {
  return {generate_mhc_streams(d.rows, d.hc, d.h, seed, p),
          generate_mhc_lowrank_weights(d.hc, d.h, d.r, seed)};
}

}  // namespace bufferlab::oracle
