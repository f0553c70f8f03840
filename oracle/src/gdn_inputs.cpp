// GDN call dimensions and seeded inputs, identical on every platform (SplitMix64 and exact
// arithmetic only, no <random> distributions), and the slicing of one call into sequences and
// token ranges.
//
// Scales (normal-ish = Irwin–Hall of four uniforms, mean 0, variance 1):
//   Q, K, V, Z columns normal-ish (V times value_scale), conv weights normal-ish / sqrt(K), so
//   the conv pre-activation is ≈ N(0, 1) and silu outputs are O(1); conv tails normal-ish;
//   the state S normal-ish · 0.1 (zero_state: S and the tails are zero); the gated-norm weight
//   1 + normal-ish / 4.
// Gates, with g = exp(A_log)·softplus(a + dt_bias) and α = exp(−g):
//   α mixed:      A_log ~ U[−1, 1], dt_bias ~ U[−6, −3], a = 1.5·normal-ish: g from ~1e-5 to
//                 ~2, typically 0.03 (a chunk of 64 tokens decays by e^-2 or so, so a state
//                 carried across chunks still matters);
//   α near_zero:  A_log = 3 + normal-ish/10, dt_bias = 3 + U[0, 1/2], a = 1.5·normal-ish: g
//                 from ~4 to ~200; about half the tokens have α < 1e-30, the floor of gc;
//   α near_one:   A_log = normal-ish/100, dt_bias = log(expm1(1e-4)), a = normal-ish/20: α ≈
//                 1 − 1e-4.
//   β = σ(b) mixed: b = 2·normal-ish; near_zero: b = −12 + normal-ish/2 (β ≈ 6e-6);
//   near_one: b = 12 + normal-ish/2.
// parallel_keys: per key head one shared vector s (normal-ish); every token's K columns (and
// the conv tails' K channels) are s + normal-ish/100, so after the per-channel conv and silu,
// which map equal inputs to equal outputs, the keys of a head stay within a few degrees.
#include <fmt/format.h>

#include <cmath>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/gdn.h"
#include "bufferlab/oracle/seeded_random.h"
#include "oracle_common.h"

namespace bufferlab::oracle {
namespace {

// Distinct streams of the seed for each tensor (rng_for: oracle_common.h).
enum class GdnStream : uint64_t {
  kQkvz = 1,
  kConvW,
  kConvState,
  kState,
  kBa,
  kGateParams,
  kNormW,
  kKeys
};

void require(bool ok, const std::string& why) {
  if (!ok) throw Error("GDN inputs: " + why);
}

// The shared direction of each key head (parallel_keys), or empty.
std::vector<double> key_directions(const GdnDims& d, uint64_t seed, const GdnInputProfile& p) {
  if (!p.parallel_keys) return {};
  SplitMix64 rng = rng_for(seed, GdnStream::kKeys);
  std::vector<double> s(mul(d.geom.nk, d.geom.kd));
  for (double& x : s) x = rng.normalish();
  return s;
}

}  // namespace

GdnDims GdnDims::of(const ModelConfig& config, uint64_t sequences, uint64_t L) {
  GdnDims d;
  d.geom = GdnGeometry::of(config);
  const GdnGeometry& g = d.geom;
  if (g.nk == 0 || g.kd == 0 || g.nv == 0 || g.vd == 0 || g.kernel == 0)
    throw Error("GdnDims: not a GDN config (" + g.to_string() + ")");
  if (g.nv % g.nk != 0)
    throw Error(fmt::format("GdnDims: nv = {} is not a multiple of nk = {}", g.nv, g.nk));
  if (sequences == 0 || L == 0)
    throw Error(fmt::format("GdnDims: {} sequences of L = {} tokens", sequences, L));
  (void)(Size(sequences) * L * g.qkvz);  // the rows and the largest tensor fit (or throw)
  d.sequences = sequences;
  d.L = L;
  d.eps = config.rms_norm_eps;
  return d;
}

GdnInputs generate_gdn_inputs(const GdnDims& d, uint64_t seed, const GdnInputProfile& p) {
  const GdnGeometry& g = d.geom;
  const uint64_t rows = d.rows(), C = g.conv_dim, K = g.kernel, nv = g.nv;
  const uint64_t k0 = g.nk * g.kd, v0 = 2 * k0, z0 = C;
  require(std::isfinite(p.value_scale), "value_scale must be finite");
  const std::vector<double> dirs = key_directions(d, seed, p);
  // Column c of a row: the shared key direction + 1% noise for K columns of parallel keys.
  auto value = [&](SplitMix64& rng, uint64_t c) {
    const double x = rng.normalish();
    if (!dirs.empty() && c >= k0 && c < v0) return dirs[c - k0] + 0.01 * x;
    if (c >= v0 && c < z0) return p.value_scale * x;
    return x;
  };
  GdnInputs in;
  SplitMix64 qkvz = rng_for(seed, GdnStream::kQkvz);
  in.deint.resize(mul(rows, g.qkvz));
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t c = 0; c < g.qkvz; ++c) in.deint[t * g.qkvz + c] = bf16_of(value(qkvz, c));

  SplitMix64 w = rng_for(seed, GdnStream::kConvW);
  in.conv_w.resize(mul(C, K));
  for (uint16_t& x : in.conv_w) x = bf16_of(w.normalish() / std::sqrt(static_cast<double>(K)));

  SplitMix64 cs = rng_for(seed, GdnStream::kConvState);
  in.conv_state.assign(mul(mul(d.sequences, C), K - 1), 0);
  if (!p.zero_state)
    for (uint64_t i = 0; i < in.conv_state.size(); ++i)
      in.conv_state[i] = bf16_of(value(cs, (i / (K - 1)) % C));

  SplitMix64 st = rng_for(seed, GdnStream::kState);
  in.state.assign(mul(mul(d.sequences, nv), g.kd * g.vd), 0.0f);
  if (!p.zero_state)
    for (float& x : in.state) x = static_cast<float>(0.1 * st.normalish());

  SplitMix64 gp = rng_for(seed, GdnStream::kGateParams);
  in.a_log.resize(nv);
  in.dt_bias.resize(nv);
  for (uint64_t v = 0; v < nv; ++v) {
    switch (p.alpha) {
      case GdnGateRegime::mixed:
        in.a_log[v] = static_cast<float>(2.0 * gp.uniform() - 1.0);
        in.dt_bias[v] = static_cast<float>(-6.0 + 3.0 * gp.uniform());
        break;
      case GdnGateRegime::near_zero:
        in.a_log[v] = static_cast<float>(3.0 + 0.1 * gp.normalish());
        in.dt_bias[v] = static_cast<float>(3.0 + 0.5 * gp.uniform());
        break;
      case GdnGateRegime::near_one:
        in.a_log[v] = static_cast<float>(0.01 * gp.normalish());
        in.dt_bias[v] = static_cast<float>(std::log(std::expm1(1e-4)));
        break;
    }
  }
  SplitMix64 ba = rng_for(seed, GdnStream::kBa);
  in.ba.resize(mul(rows, 2 * nv));
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t v = 0; v < nv; ++v) {
      const double nb = ba.normalish(), na = ba.normalish();
      const double b = p.beta == GdnGateRegime::mixed       ? 2.0 * nb
                       : p.beta == GdnGateRegime::near_zero ? -12.0 + 0.5 * nb
                                                            : 12.0 + 0.5 * nb;
      const double a = p.alpha == GdnGateRegime::near_one ? 0.05 * na : 1.5 * na;
      in.ba[t * 2 * nv + v] = bf16_of(b);
      in.ba[t * 2 * nv + nv + v] = bf16_of(a);
    }

  SplitMix64 nw = rng_for(seed, GdnStream::kNormW);
  in.norm_w.resize(g.vd);
  for (uint16_t& x : in.norm_w) x = bf16_of(1.0 + 0.25 * nw.normalish());
  return in;
}

namespace {

template <class T>
std::vector<T> sub_vector(const std::vector<T>& v, uint64_t first, uint64_t count) {
  return std::vector<T>(v.begin() + static_cast<std::ptrdiff_t>(first),
                        v.begin() + static_cast<std::ptrdiff_t>(first + count));
}

void require_sizes(const GdnDims& d, const GdnInputs& in) {
  const GdnGeometry& g = d.geom;
  require(in.deint.size() == mul(d.rows(), g.qkvz), "deint size");
  require(in.ba.size() == mul(d.rows(), 2 * g.nv), "ba size");
  require(in.conv_state.size() == mul(mul(d.sequences, g.conv_dim), g.kernel - 1),
          "conv_state size");
  require(in.state.size() == mul(mul(d.sequences, g.nv), g.kd * g.vd), "state size");
}

}  // namespace

GdnInputs gdn_sequence(const GdnDims& d, const GdnInputs& in, uint64_t b) {
  require_sizes(d, in);
  require(b < d.sequences, fmt::format("sequence {} of {}", b, d.sequences));
  const GdnGeometry& g = d.geom;
  GdnInputs out = in;
  out.deint = sub_vector(in.deint, b * d.L * g.qkvz, d.L * g.qkvz);
  out.ba = sub_vector(in.ba, b * d.L * 2 * g.nv, d.L * 2 * g.nv);
  const uint64_t tail = g.conv_dim * (g.kernel - 1), state = g.nv * g.kd * g.vd;
  out.conv_state = sub_vector(in.conv_state, b * tail, tail);
  out.state = sub_vector(in.state, b * state, state);
  return out;
}

GdnInputs gdn_token_range(const GdnDims& d, const GdnInputs& in, uint64_t t0, uint64_t t1,
                          std::span<const uint16_t> conv_state, std::span<const float> state) {
  require_sizes(d, in);
  require(d.sequences == 1, "gdn_token_range takes a one-sequence call");
  require(t0 < t1 && t1 <= d.L, fmt::format("token range [{}, {}) of L = {}", t0, t1, d.L));
  const GdnGeometry& g = d.geom;
  require(conv_state.size() == g.conv_dim * (g.kernel - 1), "carried conv tail size");
  require(state.size() == g.nv * g.kd * g.vd, "carried state size");
  GdnInputs out = in;
  out.deint = sub_vector(in.deint, t0 * g.qkvz, (t1 - t0) * g.qkvz);
  out.ba = sub_vector(in.ba, t0 * 2 * g.nv, (t1 - t0) * 2 * g.nv);
  out.conv_state.assign(conv_state.begin(), conv_state.end());
  out.state.assign(state.begin(), state.end());
  return out;
}

}  // namespace bufferlab::oracle
