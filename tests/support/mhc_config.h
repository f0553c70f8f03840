// An mHC model config without a full model (hidden size h, hc streams, low rank r, Sinkhorn
// iterations and epsilon), shared by the mHC kernel bodies, the mHC oracle unit tests and the
// CPU no-allocation test, and the layout-only one of the mHC op unit tests. Free of gtest, so
// any test or tool target can include it.
#pragma once

#include <cstdint>

#include "bufferlab/core/model_config.h"

namespace bufferlab::testing {

inline ModelConfig mhc_config(uint64_t hc, uint64_t h, uint64_t r = 0, uint64_t iters = 20,
                              double hc_eps = 1e-6) {
  ModelConfig c;
  c.hidden_size = h;
  c.vocab_size = 16;
  c.hc_mult = hc;
  c.hc_lowrank = r;
  c.hc_sinkhorn_iters = iters;
  c.hc_eps = hc_eps;
  c.rms_norm_eps = 1e-6;
  return c;
}

// Only the fields the mHC op layouts and bind read: hc = 4, h = 16, low rank r (the mHC op
// layout and bind unit tests).
inline ModelConfig mhc_layout_config(uint64_t lowrank) {
  ModelConfig c;
  c.hidden_size = 16;
  c.hc_mult = 4;
  c.hc_lowrank = lowrank;
  return c;
}

}  // namespace bufferlab::testing
