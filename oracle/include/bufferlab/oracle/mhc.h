// FP64 oracle of the mHC hyper-connection ops (spec/numerics.md §3–§4, core ops/mhc.h), the
// Sinkhorn reference and its Birkhoff–Hopf row bound, and the derived per-element bounds of
// every output against the faithful oracle. Host copies carry BF16 as raw bits.
//
// Modes: `exact` evaluates the definition in FP64; `faithful` also rounds to BF16 where a
// backend stores BF16 (block input, the slab path's normed / low / up_pre / inj_pre), in FP64
// otherwise. Per-op checks feed the oracle the backend's OWN stored inputs (numerics §9).
//
// Defined result for non-finite input: a token whose streams hold a NaN or ±Inf gets NaN in
// every output of that token (post, comb, block input, normed, low, ...) and is counted in
// `nonfinite_tokens`; other tokens are untouched. Huge finite streams are defined (the
// backends scale by a power of two before squaring, ops/mhc.h); the oracle needs no scaling.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/oracle/compare.h"
#include "bufferlab/oracle/mode.h"

namespace bufferlab::oracle {

// --- Sinkhorn (numerics §3 step 4) ------------------------------------------------------------

// K = row softmax (max-subtracted) of the hc×hc comb logits, plus eps, row-major.
std::vector<double> sinkhorn_kernel(std::span<const double> logits, uint64_t hc, double eps);

// The spec's order on K (row-major hc×hc): column normalise /(eps + Σ_i), then (iters − 1)
// times row normalise /(eps + Σ_j) and column normalise /(eps + Σ_i), then — unless
// `final_exact_column` is false (the M-SKCOL mutant) — divide each column by its exact sum.
std::vector<double> sinkhorn(std::span<const double> K, uint64_t hc, uint64_t iters, double eps,
                             bool final_exact_column = true);

// max_i |Σ_j C_ij − 1| of a row-major hc×hc matrix, summed in FP64 (and the column version).
double max_row_sum_error(std::span<const double> C, uint64_t hc);
double max_col_sum_error(std::span<const double> C, uint64_t hc);

// The Birkhoff–Hopf bound of numerics §3 on max_i |ρ_i − 1| after the spec's Sinkhorn of K:
//   Δ = projective diameter of K, κ = tanh(Δ/4), ρ₀ = row sums after the first column
//   normalisation (exact), t = iters − 1:   bound = exp(κ^(2t) · log(max ρ₀ / min ρ₀)) − 1.
// `unit_roundoff` u (0 for the FP64 oracle, 2^-24 for an FP32 backend) adds the derived
// arithmetic slack: with γ = (hc + 1)·u per normalisation (the rounded sum and the division)
// every half step leaves a log-oscillation of at most 2γ in the sums it normalised, which the
// following rounds contract by κ per half step: slack = min(2γ/(1 − κ), 4·t·γ) + 2γ, added
// inside the exponent; plus the spec's stated 4·2^-24 when u > 0. `k_log_error` is a bound on
// |log K_backend − log K| per entry (the backend's softmax and logit errors), which widens
// Δ by 4·k_log_error and log(max ρ₀ / min ρ₀) by 2·k_log_error.
struct SinkhornBound {
  double delta = 0.0;   // projective diameter Δ(K)
  double kappa = 0.0;   // tanh(Δ/4)
  double log_rho0 = 0.0;  // log(max ρ₀ / min ρ₀)
  double row_bound = 0.0;  // the bound on max_i |ρ_i − 1|
};
SinkhornBound sinkhorn_row_bound(std::span<const double> K, uint64_t hc, uint64_t iters,
                                 double eps, double unit_roundoff = 0.0, double k_log_error = 0.0);

// Column sums of a backend's FP32 comb, summed in FP64, must lie within (hc + 1)·2^-24 of 1
// (numerics §3, stated tolerance).
double col_sum_tolerance_fp32(uint64_t hc);

// --- Sinkhorn-form pre / post / head / expand ----------------------------------------------

struct HcPreInputs {
  std::vector<float> streams;  // [rows, hc, h]
  std::vector<float> fn;       // [mix, hc·h]
  std::vector<float> scale;    // [3]
  std::vector<float> bias;     // [mix]
};
struct HcPreOutputs {  // what a backend stored
  std::vector<float> post;         // [rows, hc]
  std::vector<float> comb;         // [rows, hc, hc]
  std::vector<uint16_t> block_in;  // bf16 [rows, h]
  HcDiagnostics diagnostics;
};
struct HcPreReference {
  std::vector<double> mix;       // [rows, mix] r·(fn·x)
  std::vector<double> pre;       // [rows, hc] σ(mix·s0 + b) + hc_eps
  std::vector<double> post;      // [rows, hc]
  std::vector<double> kernel;    // [rows, hc, hc] K = softmax + eps (before Sinkhorn)
  std::vector<double> comb;      // [rows, hc, hc]
  std::vector<double> block_in;  // [rows, h]; BF16-rounded in faithful mode
  uint64_t nonfinite_tokens = 0;
};
// `final_exact_column` = false evaluates the M-SKCOL variant (for the mutant's expected
// finding only; backends are always judged against the spec's order).
HcPreReference hc_pre(const HcPreOp& op, const HcPreInputs& in, Mode mode,
                      bool final_exact_column = true);

struct HcPostInputs {
  std::vector<float> post;          // [rows, hc]
  std::vector<float> comb;          // [rows, hc, hc]; empty in the low-rank form
  std::vector<uint16_t> block_out;  // bf16 [rows, h]
  std::vector<float> streams;       // [rows, hc, h] before the op
};
// out[t, j, d] = post_j·block_out[t, d] + Σ_i comb_ij·x[t, i, d] (Sinkhorn form), or
// x[t, i, d] + post_i·block_out[t, d] (low-rank form). FP64 (both modes: nothing is stored
// below FP32).
std::vector<double> hc_post(const HcPostOp& op, const HcPostInputs& in);

struct HcHeadInputs {
  std::vector<float> streams;  // [rows, hc, h]
  std::vector<float> fn;       // [hc, hc·h]
  std::vector<float> scale;    // [1]
  std::vector<float> bias;     // [hc]
};
struct HcHeadReference {
  std::vector<double> pre;     // [rows, hc]
  std::vector<double> output;  // [rows, h]; BF16-rounded in faithful mode
  uint64_t nonfinite_tokens = 0;
};
HcHeadReference hc_head(const HcHeadOp& op, const HcHeadInputs& in, Mode mode);

// every stream = bf16 embedding row (exact in FP32).
std::vector<double> hc_expand(const HcExpandOp& op, std::span<const uint16_t> input);

// --- low-rank form (numerics §4) -------------------------------------------------------------

// The model weights of the low-rank form, FP32 (the split path uses them as they are; the
// slab path uses their BF16 roundings, made by slab_weights()).
struct HcLowRankWeights {
  std::vector<float> norm_w;    // [hc, h]
  std::vector<float> w_down;    // [r, hc·h]
  std::vector<float> w_inject;  // [hc, hc·h]
  std::vector<float> w_up;      // [hc·h, r]
};
struct HcLowRankSlabWeights {
  std::vector<uint16_t> w_down, w_inject, w_up;  // bf16, same shapes
};
HcLowRankSlabWeights slab_weights(const HcLowRankWeights& w);

// The whole low-rank pre step over `rows` tokens of x [rows, hc, h]:
//   normed [rows, hc·h], low [rows, r], inj_pre [rows, hc] (W_inject·n, before /hc and σ),
//   up_pre [rows, hc·h] (W_up·low), block_in [rows, h], post [rows, hc].
// `slab_precision` = true evaluates the GEMM path's definition (BF16 weights; in faithful
// mode normed, low, inj_pre, up_pre and block_in are rounded to BF16 where the path stores
// them); false the split path's (FP32 weights; faithful rounds block_in only).
struct HcLowRankReference {
  std::vector<double> normed, low, inj_pre, up_pre, block_in, post;
  uint64_t nonfinite_tokens = 0;
};
HcLowRankReference hc_lowrank(uint64_t rows, uint64_t hc, uint64_t h, uint64_t r, double rms_eps,
                              std::span<const float> streams, const HcLowRankWeights& w,
                              bool slab_precision, Mode mode);

// --- derived bounds (see mhc_bounds.cpp for each derivation) ----------------------------------

// Per-element absolute bounds of a backend's hc_pre outputs against the oracle on the same
// stored inputs: post and block_in from the γ bound of the mix GEMV (γ_(hc·h)·r·Σ|fn||x| plus
// the relative error of r) through σ' ≤ 1/4, plus the FP32 store (post) or one BF16 ULP
// (block_in); `comb_log_error` per token bounds |log K_backend − log K| from the same mix
// error through the softmax, for the Sinkhorn class check.
struct HcPreBounds {
  std::vector<double> post;             // [rows, hc]
  std::vector<double> block_in;         // [rows, h]
  std::vector<double> comb_log_error;   // [rows]
  std::string formula;
};
HcPreBounds hc_pre_bounds(const HcPreOp& op, const HcPreInputs& in, const HcPreReference& ref);

// The Sinkhorn class check of a backend's comb C against the oracle's K (numerics §3): every
// result of the spec's normalisations is D1·(K∘E)·D2 with D diagonal and |log E| ≤
// (2·iters + 1)·u, so for all i, j: |log(C_ij/K_ij) − log(C_i0/K_i0) − log(C_0j/K_0j) +
// log(C_00/K_00)| ≤ 4·(k_log_error + (2·iters + 1)·u·(1 + small)). Returns the largest
// violation ratio (≤ 1 passes) and the first offending (token, i, j).
struct SinkhornClassCheck {
  double worst_ratio = 0.0;
  uint64_t token = 0, i = 0, j = 0;
};
SinkhornClassCheck sinkhorn_class_check(const HcPreOp& op, std::span<const float> comb,
                                        const HcPreReference& ref, const HcPreBounds& bounds);

std::vector<double> hc_post_bounds(const HcPostOp& op, const HcPostInputs& in);  // per element
std::vector<double> hc_head_bounds(const HcHeadOp& op, const HcHeadInputs& in,
                                   const HcHeadReference& ref);  // per output element
std::string hc_post_bounds_formula();
std::string hc_head_bounds_formula();

}  // namespace bufferlab::oracle
