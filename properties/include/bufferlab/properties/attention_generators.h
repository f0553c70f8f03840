// Small attention configs shaped like the models in scope and RapidCheck generators of attention
// passes (oracle/attention_inputs.h's AttnCaseSpec and a seed), for the kernel tests, the
// invariance properties (attention_checks.h) and their full-range runs.
//
// Configs (one attention layer, hidden 64, vocab 16): nq query heads over nkv KV heads of hd
//   qwen3_next  gated, qk_norm, partial rotary 0.25 (rd = hd/4), theta 1e7
//   gpt_oss     sliding window W (sliding layers), sinks, yarn (factor 32, original 4096,
//               beta 32/1, truncate false), theta 150000
//   qwen25_vl   MRoPE, sections (rd/2 split 1/4, 3/8, 3/8), theta 1e6
//   llama       llama3 scaling (factor 8, low 1, high 4, original 8192), theta 500000
//   plain       default RoPE with partial rotary 0.5, no norm (the pass-through property)
//
// Cost of a case (attn_case_cost): Σ over query rows of the keys it may see times nq·hd (the
// scores and the V sums), the figure the ranges cap: the CPU backend takes ~1 ns per unit, the
// simulator ~100× more.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include <rapidcheck.h>

#include "bufferlab/core/model_config.h"
#include "bufferlab/oracle/attention_inputs.h"

namespace bufferlab::gen {

enum class AttnFlavour { qwen3_next, gpt_oss, qwen25_vl, llama, plain };
const char* to_string(AttnFlavour f);
inline constexpr AttnFlavour kAttnFlavours[] = {AttnFlavour::qwen3_next, AttnFlavour::gpt_oss,
                                                AttnFlavour::qwen25_vl, AttnFlavour::llama,
                                                AttnFlavour::plain};

// hd a multiple of 8 (MRoPE sections), window ≥ 2.
ModelConfig attn_config(AttnFlavour f, uint64_t nq = 4, uint64_t nkv = 2, uint64_t hd = 16,
                        uint64_t window = 8);

uint64_t attn_case_cost(const oracle::AttnCaseSpec& s);

struct AttnRanges {
  uint64_t max_streams = 3, max_L = 20, max_context = 40;
  uint64_t max_decode_rows = 5, max_decode_context = 40, max_splits = 3;
  std::vector<uint64_t> block_sizes = {1, 2, 5, 16};
  std::vector<uint64_t> head_dims = {8, 16, 32};
  uint64_t max_kv_heads = 2, max_group = 3;  // nq = nkv · group
  uint64_t cost_cap = uint64_t{1} << 17;
};
AttnRanges ci_attn_ranges();
AttnRanges full_attn_ranges();  // long sequences, many streams, odd block sizes (label slow)

struct AttnGenCase {
  AttnFlavour flavour = AttnFlavour::llama;
  oracle::AttnCaseSpec spec;
  uint64_t seed = 0;
};
void showValue(const AttnGenCase& c, std::ostream& os);

// Which parts a generated pass has.
enum class AttnParts { prefill, decode, mixed };
// A pass of `parts` over every flavour (sliding drawn on gpt_oss), contexts and block sizes of
// the ranges, reduced until attn_case_cost fits the cap. `min_context` ≥ 1 forces a cached
// prefix on every sequence (the twins that need one).
rc::Gen<AttnGenCase> attn_case(const AttnRanges& r, AttnParts parts, uint64_t min_context = 0);
// The same over one flavour.
rc::Gen<AttnGenCase> attn_case_of(AttnFlavour f, const AttnRanges& r, AttnParts parts,
                                  uint64_t min_context = 0);

}  // namespace bufferlab::gen
