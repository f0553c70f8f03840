// Judges the mHC ops per stage (docs/spec/numerics.md §3, §4, §9): every stored output against the
// faithful oracle fed the backend's OWN stored inputs, under the derived per-element bounds of
// mhc_bounds.cpp; the Sinkhorn comb by its properties. The exact-vs-faithful difference of the
// oracle is reported, never asserted. A failing check's first bad element names the tensor and
// its (token, stream / i, dim / j) coordinates.
//
// Check names say the finding kind:
//   "hc_post", "norm_output (block input)"      per-element bounds
//   "hc_comb entries >= 0"                       finite, non-negative (NaN for non-finite tokens)
//   "hc_comb column sums"                        within (hc + 1)·2^-24 of 1 (M-SKCOL fails here)
//   "hc_comb row sums (Birkhoff-Hopf bound)"     within sinkhorn_row_bound(u = 2^-24, k_log_error)
//   "hc_comb Sinkhorn class"                     D1·(K∘E)·D2 with |log E| bounded
//   "hc_comb (backend vs FP64 Sinkhorn)"         per element, the scaling-vector bound
//                                                sinkhorn_entry_log_bound (M-SKORDER fails here)
//   "non-finite token count"                     the backend's MhcDiagnostics = the oracle's
//   "hc_streams (post)", "hc_streams (expand)", "hc_normed (norm)", "hc_low (down)", ...
//   "<scratch> intact (<stage> input)"           a stage read what the previous one stored
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "bufferlab/oracle/agreement_report.h"
#include "bufferlab/oracle/mhc.h"
#include "bufferlab/oracle/mhc_harness.h"

namespace bufferlab::oracle {

// `bm`: the roundoffs of the judged backend (cpu_bounds() or device_bounds()).
AgreementReport judge_mhc_pre(const MhcPreOp& op, const MhcPreInputs& in, const MhcPreOutputs& out,
                              const std::string& backend, uint64_t seed,
                              const BoundModel& bm = cpu_bounds());
// `out`: op.out after the op (in place or not).
AgreementReport judge_mhc_post(const MhcPostOp& op, const MhcPostInputs& in,
                               std::span<const float> out, const std::string& backend,
                               uint64_t seed, const BoundModel& bm = cpu_bounds());
AgreementReport judge_mhc_head(const MhcHeadOp& op, const MhcHeadInputs& in,
                               const MhcHeadOutputs& out, const std::string& backend, uint64_t seed,
                               const BoundModel& bm = cpu_bounds());
// Exact: a BF16 value widens to FP32 without rounding.
AgreementReport judge_mhc_expand(const MhcExpandOp& op, std::span<const uint16_t> input,
                                 std::span<const float> streams, const std::string& backend,
                                 uint64_t seed);
// Every stage of `run` on its own stored inputs, against the faithful oracle of run.path's
// precision (split: FP32 weights and scratch; slab: BF16 weights and intermediates), plus the
// scratch-intact checks between stages and the non-finite count. The whole chain from the
// original inputs is reported.
AgreementReport judge_mhc_lowrank(const MhcLowRankRun& run, const MhcLowRankInputs& in,
                                  const std::string& backend, uint64_t seed,
                                  const BoundModel& bm = cpu_bounds());

// The property "split and GEMM paths agree with each other within the BF16 bound": the
// block inputs of the two paths on the same inputs, |split − slab| ≤ mhc_lowrank_path_bounds.
TensorComparison compare_mhc_lowrank_paths(const MhcLowRankDims& dims, const MhcLowRankInputs& in,
                                           std::span<const uint16_t> split_block_in,
                                           std::span<const uint16_t> slab_block_in,
                                           const BoundModel& bm = cpu_bounds());

}  // namespace bufferlab::oracle
