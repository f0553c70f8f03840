// What the CPU (bench/cpu/bench_moe.cpp) and CUDA (bench/cuda/bench_cuda_moe.cu) MoE benches
// share, so both time the same work: the top-k router config and the routed expert ids.
#pragma once

#include <cstdint>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/ops/moe.h"
#include "bufferlab/oracle/seeded_random.h"

namespace bufferlab::bench {

// Softmax: Qwen-style (no bias, no renormalisation). Sigmoid: DeepSeek-V3-style (bias,
// norm_topk_prob, routed scale 2.5).
inline ModelConfig topk_config(MoeScoring scoring, uint64_t experts, uint64_t top_k) {
  ModelConfig c;
  c.num_experts = experts;
  c.num_experts_per_tok = top_k;
  c.scoring_func = to_string(scoring);
  const bool sigmoid = scoring == MoeScoring::sigmoid;
  c.use_routing_bias = sigmoid;
  c.norm_topk_prob = sigmoid;
  c.routed_scaling_factor = sigmoid ? 2.5 : 1.0;
  return c;
}

// ids [tokens, top_k]: token t takes top_k consecutive experts from a hashed start, so every
// token has distinct experts and the slots spread evenly over all of them (gpu-check.sh's
// torch_moe.py computes the same ids).
inline std::vector<uint32_t> spread_ids(uint64_t tokens, uint64_t top_k, uint64_t experts) {
  std::vector<uint32_t> ids(tokens * top_k);
  for (uint64_t t = 0; t < tokens; ++t)
    for (uint64_t j = 0; j < top_k; ++j)
      ids[t * top_k + j] = static_cast<uint32_t>((oracle::splitmix64_hash(t) + j) % experts);
  return ids;
}

}  // namespace bufferlab::bench
