// RapidCheck generator of routed-expert chain cases (gather → gate → up → SwiGLU → down →
// combine, oracle/moe_ffn.h): the MoE fields of a config (hidden, latent, moe_intermediate,
// experts, zero experts, top_k, swiglu_limit), hash layers, the routing profile (zero-expert,
// hot and repeated ids) and value profiles. One generator for the CI properties and the
// full-range `bufferlab fuzz --numeric experts`; the ranges and caps say which.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include <rapidcheck.h>

#include "bufferlab/core/model_config.h"
#include "bufferlab/oracle/moe_ffn_inputs.h"

namespace bufferlab::gen {

struct ExpertChainRanges {
  uint64_t max_hidden = 256, max_latent = 64, max_intermediate = 128;
  uint64_t max_experts = 8, max_top_k = 8, max_rows = 24;
  // Oracle multiply-adds per case (oracle::expert_chain_cost: T·top_k·(3·I·D + D)) and, when
  // nonzero, expert weight elements (E·3·I·D): E, then I / D are halved to fit the weights,
  // rows, then I / D to fit the cost.
  uint64_t cost_cap = uint64_t{1} << 26;
  uint64_t weight_cap = 0;
};
// tests/property (CI: docs/architecture.md's 2^26 per case) and `fuzz --numeric experts` (real
// sizes: hidden 7168, latent 2048, I 4096, E 256, top_k 32, 64 rows; 2^28 work, 2^26 weights).
ExpertChainRanges ci_expert_chain_ranges();
ExpertChainRanges full_expert_chain_ranges();

struct ExpertChainCase {
  ModelConfig config;
  uint64_t rows = 1;
  bool hash = false;
  oracle::RoutingProfile routing;
  oracle::ValueProfile act;
  int weight_wide = 0;
  uint64_t seed = 0;

  std::string describe() const;  // one line: every field, the seed included
};
void showValue(const ExpertChainCase& c, std::ostream& os);

rc::Gen<ExpertChainCase> expert_chain_case(const ExpertChainRanges& ranges);

}  // namespace bufferlab::gen
