// Seeded inputs for the mHC ops, identical on every platform (SplitMix64 and exact arithmetic
// only, no <random> distributions).
//
// Streams: normal-ish values (Irwin–Hall of four uniforms, mean 0, variance 1) times `scale`,
// all zero, or huge (normal-ish times 1e30: the scaled-RMS path of ops/mhc.h), with NaN / ±Inf
// planted at chosen (token, stream, dim).
//
// Comb logits (pre step): the spread of every comb row is the logit RANGE L (docs/spec/numerics.md
// §3's convergence frontier is per range). Each row's comb bias holds 0 and L at two distinct
// random columns and uniform values in [0, L] elsewhere; the mix rows of fn are normal-ish /
// sqrt(hc·h), so the RMS-normalised mix_m = r·(fn·x)_m is ≈ N(0, 1), and s2 = 0.02·L: the
// fn·x contribution moves each logit by 0.02·L·|mix_m| (≈ 2% of L per unit of |mix|), so the
// row spread stays L within a few percent while the comb still depends on x (a kernel that
// drops the mix term is seen). Pre / post: fn rows normal-ish / sqrt(hc·h), s0 = s1 = 1,
// biases normal-ish / 2.
//
// Low-rank weights: norm_w normal-ish / 4 (offset from 1); W_down and W_inject normal-ish ·
// hc / sqrt(hc·h), so (W·n)/hc ≈ N(0, 1) for RMS-normalised n; W_up normal-ish · 1.7 /
// sqrt(r), so W_up·low ≈ N(0, 1) (E[silu(N(0,1))²] ≈ 0.35).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/oracle/mhc.h"

namespace bufferlab::oracle {

enum class MhcStreamMagnitude { normal, zero, huge };

// A NaN or ±Inf written into the streams at (token, stream, dim).
struct MhcNonFinite {
  uint64_t token = 0, stream = 0, dim = 0;
  double value = NAN;
};

struct MhcInputProfile {
  MhcStreamMagnitude magnitude = MhcStreamMagnitude::normal;
  double scale = 1.0;        // normal streams
  double huge_scale = 1e30;  // huge streams
  double logit_range = 4.0;  // L, the spread of every comb logit row (0.01..60)
  std::vector<MhcNonFinite> nonfinite;
};

// x [rows, hc, h] of the profile; an MhcNonFinite outside the extents is an Error.
std::vector<float> generate_mhc_streams(uint64_t rows, uint64_t hc, uint64_t h, uint64_t seed,
                                        const MhcInputProfile& profile = {});

MhcPreInputs generate_mhc_pre_inputs(const MhcPreOp& op, uint64_t seed,
                                     const MhcInputProfile& profile = {});
// post 2σ(normal-ish) in (0, 2); comb the FP64 Sinkhorn (hc_eps = 1e-6, 20 iterations) of comb
// logits of range L, rounded to FP32 (Sinkhorn form only); block_out BF16 normal-ish.
MhcPostInputs generate_mhc_post_inputs(const MhcPostOp& op, uint64_t seed,
                                       const MhcInputProfile& profile = {});
MhcHeadInputs generate_mhc_head_inputs(const MhcHeadOp& op, uint64_t seed,
                                       const MhcInputProfile& profile = {});
// hidden_states bf16 [rows, h], normal-ish.
std::vector<uint16_t> generate_mhc_expand_input(const MhcExpandOp& op, uint64_t seed);

MhcLowRankWeights generate_mhc_lowrank_weights(uint64_t hc, uint64_t h, uint64_t r, uint64_t seed);
MhcLowRankInputs generate_mhc_lowrank_inputs(const MhcLowRankDims& dims, uint64_t seed,
                                             const MhcInputProfile& profile = {});

}  // namespace bufferlab::oracle
