// Small helpers shared by the MoE kernel test bodies (moe_routing_kernel_tests.cpp,
// moe_ffn_kernel_tests.cpp): a MoE config without a full model, integer-valued BF16 data that
// keeps every FP32 sum exact, and the bound model / GEMM unit roundoff of the backend under
// test.
#pragma once

#include <cstdint>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/model_config.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/moe_ffn.h"
#include "bufferlab/oracle/routing.h"

namespace bufferlab::testing {

inline ModelConfig moe_config(uint64_t hidden, uint64_t experts, uint64_t top_k, uint64_t zero = 0,
                              uint64_t intermediate = 8) {
  ModelConfig c;
  c.hidden_size = hidden;
  c.vocab_size = 16;
  c.num_experts = experts;
  c.num_experts_per_tok = top_k;
  c.zero_expert_num = zero;
  c.moe_intermediate_size = intermediate;
  return c;
}

// Deterministic small integers (or multiples of `unit`) as BF16 bits, so that every FP32 sum
// of their products is exact in any order.
inline std::vector<uint16_t> small_ints(uint64_t n, uint64_t seed, int span, float unit = 1.0f) {
  std::vector<uint16_t> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& b : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    b = f32_to_bf16_bits(unit *
                         static_cast<float>(static_cast<int>((s >> 33) % (2 * span + 1)) - span));
  }
  return v;
}

// The oracle's bound model and GEMM unit roundoff for a backend: round to nearest on the CPU,
// the device GEMM's (tensor cores) elsewhere.
inline oracle::BoundModel bounds_for(bool cpu) {
  return cpu ? oracle::cpu_bounds() : oracle::device_bounds();
}
inline double gemm_roundoff_for(bool cpu) {
  return cpu ? oracle::kUnitRoundoffCpu : oracle::kUnitRoundoffDeviceGemm;
}

}  // namespace bufferlab::testing
