// Small fixtures shared by several test files: a minimal dense config.json, a small MoE model,
// and an RMSNorm op of a given width without a full model config.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "bufferlab/core/ops/fused_add_rmsnorm.h"

namespace bufferlab::testing {

// A minimal valid dense Hugging Face config.json that tests extend or break.
inline nlohmann::json dense_json() {
  return {{"hidden_size", 256},
          {"intermediate_size", 512},
          {"vocab_size", 1000},
          {"num_attention_heads", 8},
          {"num_hidden_layers", 2}};
}

// A small MoE model: h = 64, vocab 1000, 4 heads of 16, 2 layers, E = 8 routed + 2 zero
// experts, top_k = 3, moe_intermediate 32; routing defaults otherwise.
inline ModelConfig small_moe_config() {
  ModelConfig c;
  c.hidden_size = 64;
  c.vocab_size = 1000;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 4;
  c.head_dim = 16;
  c.num_hidden_layers = 2;
  c.num_experts = 8;
  c.num_experts_per_tok = 3;
  c.moe_intermediate_size = 32;
  c.zero_expert_num = 2;
  return c;
}

// The fused add + RMSNorm op for `rows` rows of `width` (only hidden_size and eps matter).
inline FusedAddRmsNormOp rmsnorm_op(uint64_t rows, uint64_t width, RmsNormVariant variant,
                                    double eps = 1e-6) {
  ModelConfig config;
  config.hidden_size = width;
  config.rms_norm_eps = eps;
  return FusedAddRmsNormOp::make(config, rows, variant);
}

}  // namespace bufferlab::testing
