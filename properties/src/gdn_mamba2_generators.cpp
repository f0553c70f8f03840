// The GDN and SSD case generators: dimensions drawn small or up to the ranges, L often at a
// chunk edge, then reduced under the cost cap (gdn_call_cost / mamba2_call_cost, documented in
// the header).
#include "bufferlab/properties/gdn_mamba2_generators.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <vector>

#include <fmt/format.h>

#include "bufferlab/core/checked.h"

namespace bufferlab::gen {
namespace {

using U = uint64_t;

constexpr U kChunk = 64;  // docs/spec/numerics.md §5, §6: C = L = 64

// A favoured value (clamped to [lo, hi]) or any value in [lo, hi].
U favoured_or_in(std::initializer_list<U> favoured, U lo, U hi) {
  const std::vector<U> values(favoured);
  return std::clamp<U>(*rc::gen::oneOf(rc::gen::elementOf(values), rc::gen::inRange<U>(lo, hi + 1)),
                       lo, hi);
}

// L: a chunk edge (clamped to max_L) in half of the cases, else 1..max_L.
U draw_L(const std::vector<U>& favoured, U max_L) {
  if (!favoured.empty() && *rc::gen::arbitrary<bool>())
    return std::clamp<U>(*rc::gen::elementOf(favoured), 1, max_L);
  return *rc::gen::inRange<U>(1, max_L + 1);
}

// Many short-chunked streams (the full range's B15 condition): sequences in [max/2, max],
// L % 64 ≠ 0.
void draw_many_streams(U max_sequences, U max_L, U& sequences, U& L) {
  sequences = *rc::gen::inRange<U>(std::max<U>(2, max_sequences / 2), max_sequences + 1);
  L = *rc::gen::inRange<U>(1, max_L + 1);
  if (L % kChunk == 0) L -= 1;
  L = std::max<U>(L, 1);
}

// A config with one mixer layer of `type` and the smallest valid rest (docs/spec/buffers.md §1).
ModelConfig base_config(LayerType type) {
  ModelConfig c;
  c.hidden_size = 64;
  c.vocab_size = 16;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 1;
  c.num_key_value_heads = 1;
  c.head_dim = 64;
  c.intermediate_size = 64;
  c.rms_norm_eps = 1e-6;
  c.layer_types = {type};
  return c;
}

oracle::GdnGateRegime draw_gate_regime() {
  using R = oracle::GdnGateRegime;
  return *rc::gen::element(R::mixed, R::mixed, R::near_zero, R::near_one);
}

double draw_scale() {
  return *rc::gen::element(0, 0, 0, 0, 0, 0, 0, 1) ? std::ldexp(1.0, *rc::gen::element(-4, 4))
                                                   : 1.0;
}

// Halves the GQA ratio, then nk, then sequences, then L, until the GDN case fits the cap.
void fit_gdn_cost(GdnCase& c, U cap, bool chunked_cost) {
  ModelConfig& m = c.config;
  const auto cost = [&] {
    return chunked_cost ? gdn_call_cost(oracle::GdnPath::chunked, c.rows(), c.nv(), c.kd(), c.vd())
                        : c.cost();
  };
  while (cost() > cap) {
    const U gqa = m.linear_num_value_heads / m.linear_num_key_heads;
    if (gqa > 1)
      m.linear_num_value_heads = m.linear_num_key_heads * (gqa / 2);
    else if (m.linear_num_key_heads > 1) {
      m.linear_num_key_heads /= 2;
      m.linear_num_value_heads = m.linear_num_key_heads;
    } else if (c.sequences > 1)
      c.sequences /= 2;
    else if (c.L > 1)
      c.L /= 2;
    else
      return;  // one token of one head over the cap: the ranges are inconsistent
  }
}

// Halves H (n_groups halved with it while it no longer divides H), then the larger of P and
// N, then sequences, then L, until the SSD case fits the cap.
void fit_mamba2_cost(Mamba2Case& c, U cap, bool chunked_cost) {
  ModelConfig& m = c.config;
  const auto cost = [&] {
    return chunked_cost ? mamba2_call_cost(oracle::Mamba2Path::chunked, c.rows(), c.H(), c.P(),
                                           c.N(), c.ng())
                        : c.cost();
  };
  while (cost() > cap) {
    if (m.mamba_num_heads > 1) {
      m.mamba_num_heads /= 2;
      while (m.mamba_num_heads % m.n_groups != 0) m.n_groups /= 2;
    } else if (std::max(m.mamba_head_dim, m.ssm_state_size) > 8) {
      if (m.mamba_head_dim >= m.ssm_state_size)
        m.mamba_head_dim /= 2;
      else
        m.ssm_state_size /= 2;
    } else if (c.sequences > 1)
      c.sequences /= 2;
    else if (c.L > 1)
      c.L /= 2;
    else
      return;
  }
}

}  // namespace

uint64_t gdn_call_cost(oracle::GdnPath path, uint64_t T, uint64_t nv, uint64_t kd, uint64_t vd) {
  const Size per_token = path == oracle::GdnPath::chunked
                             ? Size(kChunk) * (Size(kd) + vd) + Size(3) * kd * vd
                             : Size(3) * kd * vd;
  return (Size(T) * nv * per_token).value();
}

uint64_t mamba2_call_cost(oracle::Mamba2Path path, uint64_t T, uint64_t H, uint64_t P, uint64_t N,
                          uint64_t G) {
  G = std::max<U>(G, 1);
  if (path == oracle::Mamba2Path::recurrent) return (Size(T) * H * 2 * N * P).value();
  return (Size(T) * H * (Size(kChunk) * P + Size(2) * N * P) + Size(T) * G * kChunk * N).value();
}

const char* to_string(oracle::GdnPath p) {
  return p == oracle::GdnPath::chunked ? "chunked" : "recurrent";
}
const char* to_string(oracle::Mamba2Path p) {
  return p == oracle::Mamba2Path::chunked ? "chunked" : "recurrent";
}
const char* to_string(oracle::GdnGateRegime r) {
  switch (r) {
    case oracle::GdnGateRegime::mixed:
      return "mixed";
    case oracle::GdnGateRegime::near_zero:
      return "near_zero";
    case oracle::GdnGateRegime::near_one:
      return "near_one";
  }
  return "?";
}
const char* to_string(oracle::Mamba2DtRegime r) {
  switch (r) {
    case oracle::Mamba2DtRegime::typical:
      return "typical";
    case oracle::Mamba2DtRegime::large:
      return "large";
    case oracle::Mamba2DtRegime::tiny:
      return "tiny";
  }
  return "?";
}

// ---- GDN -----------------------------------------------------------------------------------

GdnRanges ci_gdn_ranges() { return {}; }

GdnRanges full_gdn_ranges() {
  GdnRanges r;
  r.max_sequences = 16;
  r.max_L = 4096;
  r.favoured_L = {1, 63, 64, 65, 127, 128, 129, 1000, 2047, 4095, 4096};
  r.max_key_heads = 8;
  r.max_head_dim = 256;  // kMaxGdnHeadDim: the recurrence's largest tile
  r.cost_cap = uint64_t{1} << 30;
  r.many_streams = true;
  return r;
}

ModelConfig gdn_config(uint64_t nk, uint64_t kd, uint64_t nv, uint64_t vd, uint64_t kernel) {
  ModelConfig c = base_config(LayerType::linear_attention);
  c.linear_num_key_heads = nk;
  c.linear_key_head_dim = kd;
  c.linear_num_value_heads = nv;
  c.linear_value_head_dim = vd;
  c.linear_conv_kernel_dim = kernel;
  return c;
}

oracle::GdnDims GdnCase::dims() const { return oracle::GdnDims::of(config, sequences, L); }

std::string GdnCase::describe() const {
  return fmt::format(
      "gdn nk={} kd={} nv={} vd={} kernel={} sequences={} L={} path={} alpha={} beta={} "
      "parallel_keys={} zero_state={} value_scale={} eps={} cost={} seed={}",
      nk(), kd(), nv(), vd(), config.linear_conv_kernel_dim, sequences, L, gen::to_string(path),
      gen::to_string(profile.alpha), gen::to_string(profile.beta), profile.parallel_keys,
      profile.zero_state, profile.value_scale, config.rms_norm_eps, cost(), seed);
}

void showValue(const GdnCase& c, std::ostream& os) { os << c.describe(); }

rc::Gen<GdnCase> gdn_case(const GdnRanges& r) {
  return rc::gen::exec([r] {
    GdnCase c;
    const bool chunkable = r.chunked_only || *rc::gen::arbitrary<bool>();
    U kd = kGdnChunkedHeadDim, vd = kGdnChunkedHeadDim;
    if (!chunkable) {
      kd = favoured_or_in({16, 32, 64, 96}, r.min_head_dim, r.max_head_dim);
      vd = favoured_or_in({16, 32, 64, 96}, r.min_head_dim, r.max_head_dim);
      if (kd == kGdnChunkedHeadDim && vd == kGdnChunkedHeadDim) vd -= 1;  // stays a recurrence case
    }
    const U nk = *rc::gen::inRange<U>(1, r.max_key_heads + 1);
    const U gqa = *rc::gen::inRange<U>(1, r.max_gqa + 1);
    const U kernel = *rc::gen::inRange<U>(2, 5);
    c.config = gdn_config(nk, kd, nk * gqa, vd, kernel);
    if (r.many_streams && *rc::gen::element(false, false, true)) {
      draw_many_streams(r.max_sequences, r.max_L, c.sequences, c.L);
    } else {
      c.sequences = *rc::gen::inRange<U>(1, r.max_sequences + 1);
      c.L = draw_L(r.favoured_L, r.max_L);
    }
    c.path = chunkable && (r.chunked_only || *rc::gen::element(true, true, true, false))
                 ? oracle::GdnPath::chunked
                 : oracle::GdnPath::recurrent;
    c.profile.alpha = draw_gate_regime();
    c.profile.beta = draw_gate_regime();
    c.profile.parallel_keys = *rc::gen::element(false, false, false, false, true);
    c.profile.zero_state = *rc::gen::element(false, false, false, true);
    c.profile.value_scale = draw_scale();
    fit_gdn_cost(c, r.cost_cap, r.cap_chunked_cost);
    c.seed = *rc::gen::arbitrary<uint64_t>();
    return c;
  });
}

oracle::GdnInputs gdn_inputs(const GdnCase& c) {
  return oracle::generate_gdn_inputs(c.dims(), c.seed, c.profile);
}

// ---- SSD -----------------------------------------------------------------------------------

Mamba2Ranges ci_mamba2_ranges() { return {}; }

Mamba2Ranges full_mamba2_ranges() {
  Mamba2Ranges r;
  r.max_sequences = 16;
  r.max_L = 4096;
  r.favoured_L = {1, 63, 64, 65, 127, 128, 129, 1000, 2047, 4095, 4096};
  r.max_heads = 32;
  r.max_head_dim = 128;
  r.max_state = 256;  // kMaxMamba2Dim
  r.cost_cap = uint64_t{1} << 30;
  r.many_streams = true;
  return r;
}

ModelConfig mamba2_config(uint64_t H, uint64_t P, uint64_t N, uint64_t ng, uint64_t kernel) {
  ModelConfig c = base_config(LayerType::mamba);
  c.mamba_num_heads = H;
  c.mamba_head_dim = P;
  c.ssm_state_size = N;
  c.n_groups = ng;
  c.conv_kernel = kernel;
  return c;
}

oracle::Mamba2Dims Mamba2Case::dims() const { return oracle::Mamba2Dims::of(config, sequences, L); }

std::string Mamba2Case::describe() const {
  return fmt::format(
      "ssd H={} P={} N={} n_groups={} kernel={} sequences={} L={} path={} dt={} zero_state={} "
      "x_scale={} eps={} cost={} seed={}",
      H(), P(), N(), ng(), config.conv_kernel, sequences, L, gen::to_string(path),
      gen::to_string(profile.dt), profile.zero_state, profile.x_scale, config.rms_norm_eps, cost(),
      seed);
}

void showValue(const Mamba2Case& c, std::ostream& os) { os << c.describe(); }

rc::Gen<Mamba2Case> mamba2_case(const Mamba2Ranges& r) {
  return rc::gen::exec([r] {
    Mamba2Case c;
    const U H = *rc::gen::inRange<U>(1, r.max_heads + 1);
    std::vector<U> divisors;
    for (U g = 1; g <= H; ++g)
      if (H % g == 0) divisors.push_back(g);
    const U ng = *rc::gen::oneOf(rc::gen::element<U>(1, H), rc::gen::elementOf(divisors));
    const U P = favoured_or_in({16, 64}, 1, r.max_head_dim);
    const U N = favoured_or_in({16, 64, 128}, 1, r.max_state);
    const U kernel = *rc::gen::inRange<U>(2, 5);
    c.config = mamba2_config(H, P, N, ng, kernel);
    if (r.many_streams && *rc::gen::element(false, false, true)) {
      draw_many_streams(r.max_sequences, r.max_L, c.sequences, c.L);
    } else {
      c.sequences = *rc::gen::inRange<U>(1, r.max_sequences + 1);
      c.L = draw_L(r.favoured_L, r.max_L);
    }
    c.path = *rc::gen::element(true, true, true, false) ? oracle::Mamba2Path::chunked
                                                        : oracle::Mamba2Path::recurrent;
    using D = oracle::Mamba2DtRegime;
    c.profile.dt = *rc::gen::element(D::typical, D::typical, D::large, D::tiny);
    c.profile.zero_state = *rc::gen::element(false, false, false, true);
    c.profile.x_scale = draw_scale();
    fit_mamba2_cost(c, r.cost_cap, r.cap_chunked_cost);
    c.seed = *rc::gen::arbitrary<uint64_t>();
    return c;
  });
}

oracle::Mamba2Inputs mamba2_inputs(const Mamba2Case& c) {
  return oracle::generate_mamba2_inputs(c.dims(), c.seed, c.profile);
}

}  // namespace bufferlab::gen
