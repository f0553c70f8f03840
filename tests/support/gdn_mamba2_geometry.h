// Small Gated DeltaNet and Mamba-2 configs and geometries for tests, without a model file: a
// minimal config of either family (hidden 64, vocab 16, ε 1e-6, kernel 4 unless given) and its
// geometry through GdnGeometry::of / Mamba2Geometry::of (the derived widths as ops/*.h define
// them).
#pragma once

#include <cstdint>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/ops/gdn.h"
#include "bufferlab/core/ops/mamba2.h"

namespace bufferlab::testing {

inline ModelConfig gdn_config(uint64_t nk, uint64_t kd, uint64_t nv, uint64_t vd,
                              uint64_t kernel = 4) {
  ModelConfig c;
  c.hidden_size = 64;
  c.vocab_size = 16;
  c.linear_num_key_heads = nk;
  c.linear_key_head_dim = kd;
  c.linear_num_value_heads = nv;
  c.linear_value_head_dim = vd;
  c.linear_conv_kernel_dim = kernel;
  c.rms_norm_eps = 1e-6;
  return c;
}

inline ModelConfig mamba2_config(uint64_t H, uint64_t P, uint64_t N, uint64_t groups,
                                 uint64_t K = 4) {
  ModelConfig c;
  c.hidden_size = 64;
  c.vocab_size = 16;
  c.mamba_num_heads = H;
  c.mamba_head_dim = P;
  c.ssm_state_size = N;
  c.n_groups = groups;
  c.conv_kernel = K;
  c.rms_norm_eps = 1e-6;
  return c;
}

// GdnGeometry::of derives qkvz, conv_dim and value_dim (ops/gdn.h).
inline GdnGeometry gdn_geometry(uint64_t nk, uint64_t kd, uint64_t nv, uint64_t vd,
                                uint64_t kernel = 4) {
  return GdnGeometry::of(gdn_config(nk, kd, nv, vd, kernel));
}

inline Mamba2Geometry mamba2_geometry(uint64_t H, uint64_t P, uint64_t N, uint64_t groups,
                                      uint64_t K = 4) {
  return Mamba2Geometry::of(mamba2_config(H, P, N, groups, K));
}

}  // namespace bufferlab::testing
