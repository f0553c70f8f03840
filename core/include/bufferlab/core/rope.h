// The RoPE frequency table (docs/spec/attention.md §2): one host function from a layer's RoPE
// parameters to inv_freq[rotary_dim / 2] — evaluated in FP64, rounded once to FP32 — and the
// attention_factor that scales cos and sin, by the formulas of transformers' RoPE initialisation
// (modeling_rope_utils) for the default, linear, llama3 and yarn types, yarn's `truncate` and its
// "min = max → max + 0.001" rule included. Kernels take the table; no kernel knows the type.
//
// The parameters are explicit here; ModelConfig's RoPE fields and their config.json mapping
// (docs/spec/attention.md §1) produce them. The golden check tests/golden/test_golden_rope.cpp
// holds this function to transformers' formulas evaluated in float64 on every shipped config
// (transformers itself evaluates them in FP32, several ulp away).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bufferlab {

enum class RopeType { plain, linear, llama3, yarn };  // plain = transformers' "default"
const char* to_string(RopeType t);                    // "default", "linear", "llama3", "yarn"
// "default", "linear", "llama3", "yarn"; any other name (dynamic, longrope, ...) is an Error
// naming it.
RopeType rope_type_from_string(const std::string& s);

struct RopeParams {
  RopeType type = RopeType::plain;
  double theta = 10000.0;
  uint64_t rotary_dim = 0;  // int(head_dim · partial_rotary_factor); even, > 0
  double factor = 1.0;      // linear, llama3, yarn
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  double original_max_position = 0.0;                    // llama3, yarn
  double beta_fast = 32.0, beta_slow = 1.0;              // yarn
  double mscale = 0.0, mscale_all_dim = 0.0;             // yarn; 0 = absent
  std::optional<double> attention_factor;                // yarn: absent = derived from mscale
  bool truncate = true;                                  // yarn
};

struct RopeTable {
  std::vector<float> inv_freq;    // [rotary_dim / 2]: FP64 formula, one rounding to FP32
  double attention_factor = 1.0;  // the FP64 value; kernels multiply by its FP32 rounding
};

// Throws Error naming the parameter when it has no table: rotary_dim odd or 0, theta not a
// finite number > 1, factor ≤ 0 (linear, llama3, yarn), original_max_position ≤ 0 (llama3,
// yarn), low_freq_factor = high_freq_factor (llama3: its smoothing divides by the difference).
RopeTable rope_table(const RopeParams& p);

}  // namespace bufferlab
