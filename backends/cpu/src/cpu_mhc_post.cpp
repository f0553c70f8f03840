// CPU mHC post step (docs/spec/numerics.md §3 step 6 and §4 "Combine", ops/mhc.h): FP32, in place
// on hc_streams or out of place with the identical result. Tokens run in parallel; each token is
// walked in column chunks whose hc inputs are copied to the stack before any output of the
// chunk is written, so `out == streams` computes from the same values as a separate `out`.
#include <algorithm>
#include <cstdint>

#include "bufferlab/core/number_formats.h"
#include "cpu_mhc_common.h"
#include "cpu_ops.h"
#include "cpu_parallel.h"

namespace bufferlab::cpu {
namespace {

// Columns per chunk of the Sinkhorn form: the hc input rows of a chunk take hc·256·4 B ≤ 16 KiB.
constexpr uint64_t kPostChunk = 256;

// out = v, or its BF16 rounding (kernel mutant B13), over n values.
void store(float* out, const float* v, uint64_t n, bool b13) {
  if (b13) {
    for (uint64_t d = 0; d < n; ++d) out[d] = round_to_bf16(v[d]);
  } else {
    std::copy(v, v + n, out);
  }
}

// out[j, d] = post_j·bo[d] + Σ_i comb_ij·x[i, d] (i ascending) over one token.
void sinkhorn_token(const float* x, const float* post, const float* comb, const uint16_t* bo,
                    uint64_t hc, uint64_t h, float* out, bool b13) {
  alignas(64) float in[kMaxMhcMult][kPostChunk];
  alignas(64) float block[kPostChunk];
  alignas(64) float acc[kPostChunk];
  for (uint64_t d0 = 0; d0 < h; d0 += kPostChunk) {
    const uint64_t c = std::min(kPostChunk, h - d0);
    for (uint64_t i = 0; i < hc; ++i) std::copy(x + i * h + d0, x + i * h + d0 + c, in[i]);
    for (uint64_t d = 0; d < c; ++d) block[d] = bf16_bits_to_f32(bo[d0 + d]);
    for (uint64_t j = 0; j < hc; ++j) {
      const float pj = post[j];
      for (uint64_t d = 0; d < c; ++d) acc[d] = pj * block[d];
      for (uint64_t i = 0; i < hc; ++i) {
        const float cij = comb[i * hc + j];
        const float* xi = in[i];
        for (uint64_t d = 0; d < c; ++d) acc[d] += cij * xi[d];
      }
      store(out + j * h + d0, acc, c, b13);
    }
  }
}

// out[i, d] = x[i, d] + post_i·bo[d] over one token: each output reads only its own input.
void lowrank_token(const float* x, const float* post, const uint16_t* bo, uint64_t hc, uint64_t h,
                   float* out, bool b13) {
  alignas(64) float block[mhc::kChunk];
  alignas(64) float v[mhc::kChunk];
  for (uint64_t d0 = 0; d0 < h; d0 += mhc::kChunk) {
    const uint64_t c = std::min(mhc::kChunk, h - d0);
    for (uint64_t d = 0; d < c; ++d) block[d] = bf16_bits_to_f32(bo[d0 + d]);
    for (uint64_t i = 0; i < hc; ++i) {
      const float pi = post[i];
      const float* xi = x + i * h + d0;
      for (uint64_t d = 0; d < c; ++d) v[d] = xi[d] + pi * block[d];
      store(out + i * h + d0, v, c, b13);
    }
  }
}

}  // namespace

void mhc_post(const Workspace& ws, const MhcPostOp& op, Mutant mutant) {
  const auto [rows, hc, h, lowrank] = op.shape();
  mhc::require_launchable(op, rows, hc);
  const MhcPostOp::Bound b = op.bind(ws);  // refuses a partial overlap of out and streams
  const bool b13 = mutant == Mutant::B13;
  const uint64_t K = hc * h;
  const auto n = static_cast<int64_t>(rows);
  parallel_for(n, rows * K * (lowrank ? 1 : hc) >= kParallelMinWork, [&](int64_t ti) {
    const auto t = static_cast<uint64_t>(ti);
    const float* x = b.streams + t * K;
    float* out = b.out + t * K;
    const float* post = b.post + t * hc;
    const uint16_t* bo = b.block_out + t * h;
    if (lowrank)
      lowrank_token(x, post, bo, hc, h, out, b13);
    else
      sinkhorn_token(x, post, b.comb + t * hc * hc, bo, hc, h, out, b13);
  });
}

}  // namespace bufferlab::cpu
