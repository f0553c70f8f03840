// Seeded inputs for the MoE / FFN ops, identical on every platform (SplitMix64 and exact
// arithmetic only, no <random> distributions): BF16 activations and weights (normal-ish,
// optionally wide: each element scaled by its own 2^k, k uniform in ±wide_exponent), routing
// ids with zero experts and repeated experts, and positive FP32 combine weights.
#pragma once

#include <cstdint>
#include <vector>

#include "bufferlab/oracle/moe_ffn.h"

namespace bufferlab::oracle {

struct ValueProfile {
  double scale = 1.0;     // multiplies every value
  int wide_exponent = 0;  // 0: none; else each element times 2^k, k in [−wide, wide]
};

// n BF16 values (raw bits) of `profile` from `seed`.
std::vector<uint16_t> seeded_bf16(uint64_t n, uint64_t seed, const ValueProfile& profile);

struct RoutingProfile {
  uint64_t experts = 1;        // routed experts E
  uint64_t zero_experts = 0;   // ids E..E+zero−1 may be drawn
  double zero_fraction = 0.0;  // share of slots given a zero expert (when zero_experts > 0)
  // Hot experts: this share of slots picks expert 0 or 1 (many tokens on one expert).
  double hot_fraction = 0.0;
  // Allow the same id twice in a token's row (hash layers clamp ids ≥ E to 0); otherwise a
  // token's ids are distinct, as top-k selects them (when E + zero ≥ top_k).
  bool repeat_within_token = false;
};

// ids u32 [rows, top_k].
std::vector<uint32_t> seeded_ids(uint64_t rows, uint64_t top_k, uint64_t seed,
                                 const RoutingProfile& profile);
// weights f32 [rows, top_k] in (0, max_weight], some exactly representable powers of two.
std::vector<float> seeded_weights(uint64_t rows, uint64_t top_k, uint64_t seed,
                                  double max_weight = 1.0);

// All inputs of the routed-expert chain. Weights get 1/sqrt(K) scale so activations stay O(1).
ExpertChainInputs generate_expert_chain_inputs(const ExpertChain& chain, uint64_t seed,
                                               const RoutingProfile& routing,
                                               const ValueProfile& activations,
                                               int weight_wide_exponent = 0);

}  // namespace bufferlab::oracle
