// Small Gated DeltaNet and Mamba-2 geometries for tests, without a model file: the GDN one with
// its derived widths (qkvz, conv_dim, value_dim as ops/gdn.h defines them), the Mamba-2 one
// through Mamba2Geometry::of a minimal config.
#pragma once

#include <cstdint>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/ops/gdn.h"
#include "bufferlab/core/ops/mamba2.h"

namespace bufferlab::testing {

inline GdnGeometry gdn_geometry(uint64_t nk, uint64_t kd, uint64_t nv, uint64_t vd,
                                uint64_t kernel = 4) {
  GdnGeometry g;
  g.nk = nk;
  g.kd = kd;
  g.nv = nv;
  g.vd = vd;
  g.kernel = kernel;
  g.qkvz = 2 * nk * kd + 2 * nv * vd;
  g.conv_dim = 2 * nk * kd + nv * vd;
  g.value_dim = nv * vd;
  return g;
}

inline Mamba2Geometry mamba2_geometry(uint64_t H, uint64_t P, uint64_t N, uint64_t groups,
                                      uint64_t K = 4) {
  ModelConfig c;
  c.hidden_size = 64;
  c.vocab_size = 16;
  c.mamba_num_heads = H;
  c.mamba_head_dim = P;
  c.ssm_state_size = N;
  c.n_groups = groups;
  c.conv_kernel = K;
  return Mamba2Geometry::of(c);
}

}  // namespace bufferlab::testing
