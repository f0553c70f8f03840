// Mamba-2 call dimensions and seeded inputs, identical on every platform (SplitMix64 and exact
// arithmetic only: no <random> distributions, no libm in the generator).
//
// Choices (ssd.h declares the regimes):
//   - x, B, C, z columns of zxbcdt and the conv tails: normal-ish (Irwin–Hall of four uniforms,
//     mean 0, variance 1), x and its tail times x_scale; conv weights normal-ish / sqrt(K), the
//     bias normal-ish / 10: the conv output is O(1) before SiLU.
//   - A_log uniform in [ln 0.5, ln 8]: A = −exp(A_log) ∈ [−8, −0.5].
//   - dt = softplus(dt_raw + dt_bias): typical: dt_bias uniform in [−7, −2.3] (softplus ≈ e^x:
//     dt ≈ 0.001..0.1), dt_raw normal-ish / 4; large: dt_bias uniform in [5, 45], dt_raw
//     normal-ish·2 — dt from ~0.15 to ~52, crossing the softplus threshold 20, and dt·A down to
//     −400: exp(dt·A) underflows in FP32 (and in a chunk's cumsum in FP64) — head 0 always
//     (A = −8, dt_bias = 45), others by chance; tiny: dt_bias
//     uniform in [−26, −17.5], dt_raw normal-ish (|dt_raw| < 3.5): dt ≈ e^x < 1e-6, and below
//     e^−20.7 the 1e-9 clamp holds.
//   - D normal-ish; norm weight 1 + normal-ish / 4; the SSM state normal-ish / 10 (zero with
//     zero_state, and then the conv tails are zero too: a fresh sequence).
// Every tensor draws from its own stream of the seed, so adding one never shifts another.
#include <fmt/format.h>

#include <cmath>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/mamba2.h"
#include "bufferlab/oracle/mamba2_stages.h"
#include "bufferlab/oracle/seeded_random.h"
#include "oracle_common.h"

namespace bufferlab::oracle {
namespace {

// Distinct streams of the seed for each tensor (rng_for: oracle_common.h).
enum class Mamba2Stream : uint64_t {
  kZ = 1,
  kX,
  kBC,
  kDtRaw,
  kConvW,
  kConvB,
  kALog,
  kDtBias,
  kD,
  kNormW,
  kTail,
  kState
};

constexpr double kLn05 = -0.69314718055994530942, kLn8 = 2.07944154167983592825;

struct DtRange {
  double bias_lo, bias_hi, raw_scale;
};
DtRange dt_range(Mamba2DtRegime r) {
  switch (r) {
    case Mamba2DtRegime::typical:
      return {-7.0, -2.3, 0.25};
    case Mamba2DtRegime::large:
      return {5.0, 45.0, 2.0};
    case Mamba2DtRegime::tiny:
      return {-26.0, -17.5, 1.0};
  }
  return {-7.0, -2.3, 0.25};
}

void copy_rows(const std::vector<uint16_t>& from, uint64_t row0, uint64_t rows, uint64_t cols,
               std::vector<uint16_t>& to) {
  to.assign(from.begin() + static_cast<std::ptrdiff_t>(row0 * cols),
            from.begin() + static_cast<std::ptrdiff_t>((row0 + rows) * cols));
}

}  // namespace

Mamba2Dims Mamba2Dims::of(const ModelConfig& config, uint64_t sequences, uint64_t L) {
  if (config.mamba_num_heads == 0 || config.mamba_head_dim == 0 || config.ssm_state_size == 0 ||
      config.conv_kernel == 0)
    throw Error(fmt::format(
        "SsdDims: not a Mamba-2 config (mamba_num_heads {}, mamba_head_dim {}, ssm_state_size "
        "{}, conv_kernel {})",
        config.mamba_num_heads, config.mamba_head_dim, config.ssm_state_size, config.conv_kernel));
  if (config.n_groups == 0) throw Error("SsdDims: n_groups = 0 leaves no B/C columns");
  if (config.mamba_num_heads % config.n_groups != 0)
    throw Error(fmt::format("SsdDims: mamba_num_heads {} is not a multiple of n_groups {}",
                            config.mamba_num_heads, config.n_groups));
  if (sequences == 0 || L == 0)
    throw Error(fmt::format("SsdDims: {} sequences of {} tokens", sequences, L));
  Mamba2Dims d;
  d.geom = Mamba2Geometry::of(config);
  d.sequences = sequences;
  d.L = L;
  (void)mul(sequences, L);  // rows() must not overflow
  d.eps = config.rms_norm_eps;
  return d;
}

Mamba2Inputs generate_mamba2_inputs(const Mamba2Dims& dims, uint64_t seed,
                                    const Mamba2InputProfile& p) {
  const Mamba2Geometry& g = dims.geom;
  const uint64_t rows = dims.rows(), K = g.kernel;
  Mamba2Inputs in;
  in.zxbcdt.assign(mul(rows, g.in_proj), 0);
  SplitMix64 z_rng = rng_for(seed, Mamba2Stream::kZ), x_rng = rng_for(seed, Mamba2Stream::kX),
             bc_rng = rng_for(seed, Mamba2Stream::kBC);
  SplitMix64 raw_rng = rng_for(seed, Mamba2Stream::kDtRaw);
  const DtRange dr = dt_range(p.dt);
  for (uint64_t r = 0; r < rows; ++r) {
    uint16_t* row = in.zxbcdt.data() + r * g.in_proj;
    for (uint64_t c = 0; c < g.d_inner; ++c) row[c] = bf16_of(z_rng.normalish());
    for (uint64_t c = 0; c < g.d_inner; ++c)
      row[g.d_inner + c] = bf16_of(x_rng.normalish() * p.x_scale);
    for (uint64_t c = g.d_inner; c < g.d_xbc; ++c) row[g.d_inner + c] = bf16_of(bc_rng.normalish());
    for (uint64_t h = 0; h < g.H; ++h)
      row[g.d_inner + g.d_xbc + h] = bf16_of(raw_rng.normalish() * dr.raw_scale);
  }
  const double w_scale = 1.0 / std::sqrt(static_cast<double>(K));
  SplitMix64 w_rng = rng_for(seed, Mamba2Stream::kConvW),
             b_rng = rng_for(seed, Mamba2Stream::kConvB);
  in.conv_w.resize(mul(g.d_xbc, K));
  for (uint16_t& w : in.conv_w) w = bf16_of(w_rng.normalish() * w_scale);
  in.conv_b.resize(g.d_xbc);
  for (uint16_t& b : in.conv_b) b = bf16_of(b_rng.normalish() * 0.1);
  SplitMix64 a_rng = rng_for(seed, Mamba2Stream::kALog),
             bias_rng = rng_for(seed, Mamba2Stream::kDtBias),
             d_rng = rng_for(seed, Mamba2Stream::kD);
  in.a_log.resize(g.H);
  in.dt_bias.resize(g.H);
  in.D.resize(g.H);
  for (uint64_t h = 0; h < g.H; ++h) {
    in.a_log[h] = static_cast<float>(a_rng.between(kLn05, kLn8));
    in.dt_bias[h] = static_cast<float>(bias_rng.between(dr.bias_lo, dr.bias_hi));
    in.D[h] = static_cast<float>(d_rng.normalish());
  }
  if (p.dt == Mamba2DtRegime::large) {  // head 0: A = −8, dt ≈ 45: exp(dt·A) ≈ e^-360 underflows
    in.a_log[0] = static_cast<float>(kLn8);
    in.dt_bias[0] = static_cast<float>(dr.bias_hi);
  }
  SplitMix64 n_rng = rng_for(seed, Mamba2Stream::kNormW);
  in.norm_w.resize(g.d_inner);
  for (uint16_t& w : in.norm_w) w = bf16_of(1.0 + 0.25 * n_rng.normalish());
  in.conv_state.assign(mul(mul(dims.sequences, g.d_xbc), K - 1), 0);
  in.state.assign(mul(mul(dims.sequences, g.H), mul(g.P, g.N)), 0.0f);
  if (!p.zero_state) {
    SplitMix64 t_rng = rng_for(seed, Mamba2Stream::kTail),
               s_rng = rng_for(seed, Mamba2Stream::kState);
    for (uint64_t i = 0; i < in.conv_state.size(); ++i) {
      const uint64_t channel = (i / (K - 1)) % g.d_xbc;
      in.conv_state[i] = bf16_of(t_rng.normalish() * (channel < g.d_inner ? p.x_scale : 1.0));
    }
    for (float& s : in.state) s = static_cast<float>(s_rng.normalish() * 0.1);
  }
  return in;
}

Mamba2Inputs mamba2_sequence(const Mamba2Dims& dims, const Mamba2Inputs& in, uint64_t b) {
  if (b >= dims.sequences)
    throw Error(fmt::format("ssd_sequence: sequence {} of {}", b, dims.sequences));
  const Mamba2Geometry& g = dims.geom;
  const uint64_t tail = mul(g.d_xbc, g.kernel - 1), state = mul(g.H, mul(g.P, g.N));
  mamba2_detail::require_size("zxbcdt", in.zxbcdt.size(), mul(dims.rows(), g.in_proj));
  mamba2_detail::require_size("conv_state", in.conv_state.size(), mul(dims.sequences, tail));
  mamba2_detail::require_size("state", in.state.size(), mul(dims.sequences, state));
  Mamba2Inputs out = in;
  copy_rows(in.zxbcdt, b * dims.L, dims.L, g.in_proj, out.zxbcdt);
  copy_rows(in.conv_state, b, 1, tail, out.conv_state);
  out.state.assign(in.state.begin() + static_cast<std::ptrdiff_t>(b * state),
                   in.state.begin() + static_cast<std::ptrdiff_t>((b + 1) * state));
  return out;
}

Mamba2Inputs mamba2_token_range(const Mamba2Dims& dims, const Mamba2Inputs& in, uint64_t t0,
                                uint64_t t1, std::span<const uint16_t> conv_state,
                                std::span<const float> state) {
  const Mamba2Geometry& g = dims.geom;
  if (dims.sequences != 1)
    throw Error(
        fmt::format("ssd_token_range: a call of {} sequences (one expected)", dims.sequences));
  if (t0 >= t1 || t1 > dims.L)
    throw Error(fmt::format("ssd_token_range: tokens [{}, {}) of {}", t0, t1, dims.L));
  mamba2_detail::require_size("zxbcdt", in.zxbcdt.size(), mul(dims.L, g.in_proj));
  mamba2_detail::require_size("carried conv_state", conv_state.size(), mul(g.d_xbc, g.kernel - 1));
  mamba2_detail::require_size("carried state", state.size(), mul(g.H, mul(g.P, g.N)));
  Mamba2Inputs out = in;
  copy_rows(in.zxbcdt, t0, t1 - t0, g.in_proj, out.zxbcdt);
  out.conv_state.assign(conv_state.begin(), conv_state.end());
  out.state.assign(state.begin(), state.end());
  return out;
}

}  // namespace bufferlab::oracle
