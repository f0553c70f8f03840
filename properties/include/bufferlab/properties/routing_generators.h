// RapidCheck generators of MoE routing cases (docs/spec/numerics.md §2): the routing fields of a
// config (scoring, bias, norm_topk_prob, routed_scaling_factor, zero experts, hash tables),
// dimensions drawn under an oracle cost cap, and ADVERSARIAL router inputs — duplicated gate
// rows, rows perturbed below one BF16 ULP of the logit, all-equal logits, logits exactly one
// BF16 ULP apart, near-ties inside one BF16 rounding interval, huge (~1e30) and tiny (~1e-30)
// magnitudes — plus stored logits with ±Inf / NaN for the top-k alone. The tensors are a pure
// function of the case (its seed hashed with integer arithmetic; no <random>), identical on
// every platform.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/ops/moe.h"

namespace bufferlab::gen {

enum class RoutingPattern {
  random,           // independent BF16 x and Wg of about the case's magnitude
  duplicated_rows,  // a third of the gate rows copy another row (exactly tied logits)
  perturbed_rows,   // copies moved by one BF16 ULP in a column whose x is 2^-12 smaller
  all_equal,        // every gate row the same: every logit of a row tied
  bf16_ulp_apart,   // logits exactly BF16 values, one BF16 ULP apart (many exact ties)
  near_ties,        // logits within half a BF16 ULP of a few BF16 values: gaps below the
                    // BF16 store's resolution, mostly above the FP32 bound
  group_ties,       // router groups (cases with groups) copied whole from an earlier group,
                    // bias included: exactly tied group scores; some copies reversed (same
                    // top-2 sum, other positions), some with one row moved below a BF16 ULP
                    // of its logits (group scores a hair apart); without groups, blocks of 4
};
const char* to_string(RoutingPattern p);
inline constexpr RoutingPattern kRoutingPatterns[] = {
    RoutingPattern::random,    RoutingPattern::duplicated_rows, RoutingPattern::perturbed_rows,
    RoutingPattern::all_equal, RoutingPattern::bf16_ulp_apart,  RoutingPattern::near_ties,
    RoutingPattern::group_ties};

struct RoutingRanges {
  uint64_t max_rows = 16;
  uint64_t max_hidden = 2048;
  uint64_t max_experts = kMaxScoredExperts;  // E' = E + zero experts
  uint64_t max_top_k = kMaxTopK;
  uint64_t cost_cap = uint64_t{1} << 24;  // routing_case_cost, oracle multiply-adds per case
};
// The full ranges (issue 4) of `fuzz --numeric routing` and the slow full-range test: E' ≤ 1024,
// top_k ≤ 32, hidden ≤ 7168, rows ≤ 64, 2^30 oracle multiply-adds per case.
inline RoutingRanges full_routing_ranges() {
  return {.max_rows = 64, .max_hidden = 7168, .cost_cap = uint64_t{1} << 30};
}

struct RoutingCase {
  // hidden_size, num_experts, zero_expert_num, num_experts_per_tok, scoring_func,
  // norm_topk_prob, use_routing_bias, routed_scaling_factor, vocab_size (hash tables),
  // router_groups / router_topk_groups (group-limited routing).
  ModelConfig config;
  uint64_t rows = 1;
  RouterPrecision precision = RouterPrecision::fp32_gate;
  bool hash = false;
  RoutingPattern pattern = RoutingPattern::random;
  int magnitude = 0;  // logits of about 2^magnitude (±100: ~1e30 / ~1e-30)
  uint64_t seed = 0;

  uint64_t experts() const { return config.num_experts + config.zero_expert_num; }
  std::string describe() const;  // one line: every field, the seed included
};
void showValue(const RoutingCase& c, std::ostream& os);

// Oracle work of one case (multiply-adds), the figure the generator caps:
//   6·T·E'·h   router GEMMs of the judges: exact logits and the two GEMMs of
//              router_logit_bounds (Σ|x·w| and l), once for judge_router and once for the
//              chain's tie check;
// + T·E'·(k + log2 E' + 16)   per row: the oracle's sort, the pairwise set check (E'·k),
//              scores / key bounds / weights (a few flops per expert);
// + T·k²       the order check.
uint64_t routing_case_cost(const RoutingCase& c);

// A case: scoring / bias / normalisation / scaling (1, 2.5, 6.0 — LongCat's, never
// renormalised) / zero experts / hash flag, E' in [1, max_experts], top_k in [1, min(max_top_k,
// E')], rows, hidden (≥ 3 for the designed patterns), a pattern and a magnitude (mostly in
// [-6, 8], sometimes ±100). In about a third of the non-hash cases router groups: E = G·size
// (G in [2, 16], size ≥ 2), no zero experts, top_k ≤ g·size, g in [1, G]. hidden, then rows,
// are halved until the cost fits the cap.
rc::Gen<RoutingCase> routing_case(const RoutingRanges& ranges);

// Gives a case router groups: E = G·size ≤ max_experts, no zero experts, top_k ≤ g·size.
void with_router_groups(RoutingCase& c, uint64_t groups, uint64_t size, uint64_t kept,
                        uint64_t top_k);

// Draws router groups for a case (inside a RapidCheck property or generator): G in [2, 16],
// size in [2, 64] with G·size ≤ max_experts (≥ 4), g in [1, G], top_k ≤ min(max_top_k, g·size);
// then with_router_groups. routing_case() uses it for about a third of its non-hash cases.
void draw_router_groups(RoutingCase& c, uint64_t max_experts, uint64_t max_top_k);

// DeepSeek-V3's routing (sigmoid + bias, norm_topk_prob, scale 2.5; 256 experts in 8 groups,
// keep 4, top 8) on the fp32-gate path, random pattern: the shape the group step's mutant,
// flip-rate and kernel tests share.
RoutingCase deepseek_v3_routing(uint64_t rows, uint64_t hidden, uint64_t seed);

// The host tensors of a case (raw BF16 bits), a pure function of it.
struct RoutingTensors {
  std::vector<uint16_t> x_bf16;     // [rows, hidden]
  std::vector<float> x_f32;         // [rows, hidden]: x_bf16 plus low bits FP32 holds (random)
  std::vector<uint16_t> weight;     // [E', hidden]
  std::vector<float> bias;          // [E'] when the case selects by s + bias, else empty
  std::vector<uint32_t> token_ids;  // [rows] for hash cases
  std::vector<int32_t> tid2eid;     // [vocab, top_k] for hash cases: ids ≥ E and < 0 included
};
RoutingTensors routing_tensors(const RoutingCase& c);

// Logits for running the top-k alone, [rows, E'], every value a BF16 value (so either logit
// dtype holds it): drawn from a few values per row (exact ties), ±0 included; with
// `nonfinite`, about one in eight is NaN, +Inf or −Inf. Hash cases: in about half the rows the
// experts the table selects get logits far below the rest of the row (gaps ~2^7, ~2^10 or
// ~2^100: FP32's e^gap underflows, FP64's too for the larger two), so the renormalised softmax
// of experts far below the row maximum is exercised.
std::vector<float> topk_logits(const RoutingCase& c, bool nonfinite);

// Deterministic integer hashing (splitmix64 finaliser) of (seed, stream, index).
uint64_t routing_hash(uint64_t seed, uint64_t stream, uint64_t index);

}  // namespace bufferlab::gen
