// The RoPE frequency table (docs/spec/attention.md §2): one host function from a layer's RoPE
// parameters to inv_freq[rotary_dim / 2] — evaluated in FP64, rounded once to FP32 — and the
// attention_factor that scales cos and sin, by the formulas of transformers' RoPE initialisation
// (modeling_rope_utils) for the default, linear, llama3 and yarn types, yarn's `truncate` and its
// "min = max → max + 0.001" rule included. Kernels take the table; no kernel knows the type.
//
// The parameters are explicit here; rope_params() maps ModelConfig's RoPE fields (loaded from
// config.json as docs/spec/attention.md §1 says) onto them. The golden check
// tests/golden/test_golden_rope.cpp holds rope_table to transformers' formulas evaluated in
// float64 on every shipped config (transformers itself evaluates them in FP32, several ulp
// away); tests/golden/test_golden_rope_config.cpp holds rope_table(rope_params(loaded config)) to
// the same golden tables.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"

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

// The config's RoPE parameters (docs/spec/attention.md §1): the type from rope_type, the base,
// rotary_dim = config.rotary_dim() = int(head_dim · partial_rotary_factor) — for an MLA model
// (kv_lora_rank > 0) int(qk_rope_head_dim · partial_rotary_factor), the part of its head that
// rotates (transformers' DeepSeek configs set head_dim = qk_rope_head_dim for RoPE) — the
// scaling parameters, truncate, and attention_factor (rope_attention_factor 0 = absent:
// std::nullopt, derived from mscale by rope_table). Throws what validate_attention() throws.
RopeParams rope_params(const ModelConfig& c);

// The attention rules of docs/spec/attention.md §1, each an Error naming the field and value:
// rope_type not one of default, linear, llama3, yarn; rope_theta not a finite number > 1;
// rope_factor not a finite number > 0; llama3 / yarn without rope_original_max_position; and,
// when a layer has full or sliding (not MLA) attention: partial_rotary_factor outside (0, 1],
// rotary_dim odd or 0, Σ mrope_section ≠ rotary_dim / 2 with MRoPE on, a sliding layer with
// sliding_window = 0.
//
// Not part of ModelConfig::validate(): that one holds every config the buffer sizing accepts,
// and the sizing properties and saved corpus cases (tests/corpus/) draw head dims of 1 and
// MRoPE sections and sliding layers at random, which no RoPE has. The config.json loader and
// the presets call both; a normalized-form config gets this check from rope_params() (at bind
// or compare time).
void validate_attention(const ModelConfig& c);

}  // namespace bufferlab
