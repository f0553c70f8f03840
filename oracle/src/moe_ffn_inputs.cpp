// Seeded inputs for the MoE / FFN ops.
#include "bufferlab/oracle/moe_ffn_inputs.h"

#include <algorithm>
#include <cmath>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/seeded_random.h"

namespace bufferlab::oracle {
namespace {

// Distinct streams per operand from one seed.
uint64_t stream(uint64_t seed, uint64_t k) { return seed ^ (0xD1B54A32D192ED03ull * (k + 1)); }

}  // namespace

std::vector<uint16_t> seeded_bf16(uint64_t n, uint64_t seed, const ValueProfile& p) {
  SplitMix64 rng(seed);
  std::vector<uint16_t> out(n);
  for (auto& v : out) {
    const int e = p.wide_exponent > 0 ? rng.integer(-p.wide_exponent, p.wide_exponent) : 0;
    v = f32_to_bf16_bits(static_cast<float>(std::ldexp(rng.normalish() * p.scale, e)));
  }
  return out;
}

std::vector<uint32_t> seeded_ids(uint64_t rows, uint64_t top_k, uint64_t seed,
                                 const RoutingProfile& p) {
  SplitMix64 rng(seed);
  const uint64_t E = std::max<uint64_t>(p.experts, 1);
  const uint64_t all = E + p.zero_experts;
  const bool distinct = !p.repeat_within_token && all >= top_k;
  std::vector<uint32_t> ids((Size(rows) * top_k).value());
  for (uint64_t t = 0; t < rows; ++t) {
    uint32_t* row = ids.data() + t * top_k;
    for (uint64_t j = 0; j < top_k; ++j) {
      for (int attempt = 0;; ++attempt) {
        uint64_t id;
        if (p.zero_experts > 0 && rng.uniform() < p.zero_fraction)
          id = E + rng.below(p.zero_experts);
        else if (rng.uniform() < p.hot_fraction)
          id = rng.below(std::min<uint64_t>(E, 2));
        else
          id = rng.below(E);
        const bool seen = std::find(row, row + j, static_cast<uint32_t>(id)) != row + j;
        if (!distinct || !seen) {
          row[j] = static_cast<uint32_t>(id);
          break;
        }
        if (attempt > 64) {  // dense rows: take the first free id
          for (id = 0; std::find(row, row + j, static_cast<uint32_t>(id)) != row + j; ++id) {
          }
          row[j] = static_cast<uint32_t>(id);
          break;
        }
      }
    }
  }
  return ids;
}

std::vector<float> seeded_weights(uint64_t rows, uint64_t top_k, uint64_t seed, double max_weight) {
  SplitMix64 rng(seed);
  std::vector<float> w((Size(rows) * top_k).value());
  for (auto& v : w) {
    // One in eight is a power of two (an exact product), the rest uniform in (0, max].
    v = rng.below(8) == 0 ? static_cast<float>(std::ldexp(max_weight, -rng.integer(0, 4)))
                          : static_cast<float>((1.0 - rng.uniform()) * max_weight);
  }
  return w;
}

ExpertChainInputs generate_expert_chain_inputs(const ExpertChain& c, uint64_t seed,
                                               const RoutingProfile& routing,
                                               const ValueProfile& act, int weight_wide) {
  const auto& g = c.gate.shape();
  const uint64_t T = g.rows, k = g.top_k, E = g.experts, D = g.K, I = g.N;
  ExpertChainInputs in;
  in.x = seeded_bf16((Size(T) * D).value(), stream(seed, 0), act);
  in.ids = seeded_ids(T, k, stream(seed, 1), routing);
  in.weights = seeded_weights(T, k, stream(seed, 2));
  const ValueProfile wd{1.0 / std::sqrt(static_cast<double>(D)), weight_wide};
  const ValueProfile wi{1.0 / std::sqrt(static_cast<double>(I)), weight_wide};
  const uint64_t n = (Size(E) * I * D).value();
  in.w_gate = seeded_bf16(n, stream(seed, 3), wd);
  in.w_up = seeded_bf16(n, stream(seed, 4), wd);
  in.w_down = seeded_bf16(n, stream(seed, 5), wi);
  return in;
}

}  // namespace bufferlab::oracle
