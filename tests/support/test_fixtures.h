// Small fixtures shared by several test files: a minimal dense config.json, and an RMSNorm op
// of a given width without a full model config.
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

// The fused add + RMSNorm op for `rows` rows of `width` (only hidden_size and eps matter).
inline FusedAddRmsNormOp rmsnorm_op(uint64_t rows, uint64_t width, RmsNormVariant variant,
                                    double eps = 1e-6) {
  ModelConfig config;
  config.hidden_size = width;
  config.rms_norm_eps = eps;
  return FusedAddRmsNormOp::make(config, rows, variant);
}

}  // namespace bufferlab::testing
