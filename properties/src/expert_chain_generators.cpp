// The routed-expert chain generator: dimensions drawn small or up to the ranges, then halved
// under the caps (the cost formula is oracle::expert_chain_cost's).
#include "bufferlab/properties/expert_chain_generators.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace bufferlab::gen {
namespace {

using U = uint64_t;

uint64_t& input_size(ModelConfig& m) {
  return m.moe_latent_size > 0 ? m.moe_latent_size : m.hidden_size;
}

uint64_t weight_elements(const ModelConfig& m) {
  return m.num_experts * 3 * m.moe_intermediate_size * m.moe_input_size().value();
}

// oracle::expert_chain_cost of the chain this config and row count make.
uint64_t chain_cost(const ModelConfig& m, uint64_t rows) {
  const uint64_t D = m.moe_input_size().value(), I = m.moe_intermediate_size;
  return rows * m.num_experts_per_tok * (3 * I * D + D);
}

// Halves the larger of I and D (the latent when there is one).
void halve_dims(ModelConfig& m) {
  uint64_t& D = input_size(m);
  uint64_t& I = m.moe_intermediate_size;
  if (I >= D && I > 1)
    I /= 2;
  else if (D > 1)
    D /= 2;
  else
    I = std::max<uint64_t>(I / 2, 1);
}

// Mostly small values (the shapes that exercise tile edges), sometimes up to `max`.
U small_or_up_to(U small, U max) {
  return *rc::gen::oneOf(rc::gen::inRange<U>(1, std::min(small, max) + 1),
                         rc::gen::inRange<U>(1, max + 1));
}

}  // namespace

ExpertChainRanges ci_expert_chain_ranges() { return {}; }

ExpertChainRanges full_expert_chain_ranges() {
  return {7168, 2048, 4096, 256, 32, 64, uint64_t{1} << 28, uint64_t{1} << 26};
}

std::string ExpertChainCase::describe() const {
  const ModelConfig& m = config;
  return fmt::format(
      "rows={} hidden={} latent={} I={} E={} zero={} top_k={} hash={} swiglu_limit={} "
      "zero_fraction={} hot_fraction={} repeat={} act_scale=2^{} act_wide={} weight_wide={} "
      "seed={}",
      rows, m.hidden_size, m.moe_latent_size, m.moe_intermediate_size, m.num_experts,
      m.zero_expert_num, m.num_experts_per_tok, hash, m.swiglu_limit, routing.zero_fraction,
      routing.hot_fraction, routing.repeat_within_token, std::ilogb(act.scale), act.wide_exponent,
      weight_wide, seed);
}

void showValue(const ExpertChainCase& c, std::ostream& os) { os << c.describe(); }

rc::Gen<ExpertChainCase> expert_chain_case(const ExpertChainRanges& r) {
  return rc::gen::exec([r] {
    ExpertChainCase c;
    ModelConfig& m = c.config;
    m.hidden_size = small_or_up_to(256, r.max_hidden);
    m.moe_latent_size = *rc::gen::element(false, false, false, true)
                            ? *rc::gen::oneOf(rc::gen::element(U{8}, U{24}, U{64}),
                                              rc::gen::inRange<U>(1, r.max_latent + 1))
                            : 0;
    m.moe_intermediate_size = small_or_up_to(128, r.max_intermediate);
    m.num_experts = small_or_up_to(8, r.max_experts);
    c.hash = *rc::gen::element(false, false, false, true);
    m.zero_expert_num = *rc::gen::element(U{0}, U{0}, U{1}, U{3});
    // top_k ≤ the ids a token may hold (hash layers: the routed experts only).
    const auto ids_per_token = [&] { return m.num_experts + (c.hash ? 0 : m.zero_expert_num); };
    m.num_experts_per_tok = small_or_up_to(8, std::min<U>(r.max_top_k, ids_per_token()));
    m.swiglu_limit = *rc::gen::element(0.0, 0.0, 7.0, 0.75);
    c.rows = *rc::gen::inRange<U>(1, r.max_rows + 1);
    if (r.weight_cap > 0) {
      while (weight_elements(m) > r.weight_cap && m.num_experts > 1) m.num_experts /= 2;
      while (weight_elements(m) > r.weight_cap) halve_dims(m);
      m.num_experts_per_tok = std::min(m.num_experts_per_tok, ids_per_token());
    }
    while (chain_cost(m, c.rows) > r.cost_cap && c.rows > 1) c.rows /= 2;
    while (chain_cost(m, c.rows) > r.cost_cap) halve_dims(m);
    c.routing.experts = m.num_experts;
    c.routing.zero_experts = c.hash ? 0 : m.zero_expert_num;
    c.routing.zero_fraction = *rc::gen::element(0.0, 0.25, 0.6);
    c.routing.hot_fraction = *rc::gen::element(0.0, 0.5, 0.9);
    // Hash layers clamp ids ≥ E to 0: a token may hold expert 0 twice.
    c.routing.repeat_within_token = c.hash || *rc::gen::element(false, false, true);
    c.act.scale = std::ldexp(1.0, *rc::gen::inRange(-8, 9));
    c.act.wide_exponent = *rc::gen::element(0, 0, 8);
    c.weight_wide = *rc::gen::element(0, 0, 6);
    c.seed = *rc::gen::arbitrary<uint64_t>();
    return c;
  });
}

}  // namespace bufferlab::gen
