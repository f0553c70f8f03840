// FP64 oracle of the mHC hyper-connection ops (docs/spec/numerics.md §3–§4, core ops/mhc.h), the
// Sinkhorn reference and its Birkhoff–Hopf row bound, and the derived per-element bounds of
// every output against the faithful oracle. Host copies carry BF16 as raw bits.
//
// Modes: `exact` evaluates the definition in FP64; `faithful` also rounds to BF16 where a
// backend stores BF16 (block input, the slab path's normed / low / up_pre / inj_pre), in FP64
// otherwise. Per-op checks feed the oracle the backend's OWN stored inputs (docs/spec/numerics.md
// §9).
//
// Defined result for non-finite input: a token whose streams hold a NaN or ±Inf gets NaN in
// every output of that token (post, comb, block input, normed, low, ...) and is counted in
// `nonfinite_tokens`; other tokens are untouched. Huge finite streams are defined (the
// backends scale by a power of two before squaring, ops/mhc.h); the oracle needs no scaling.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/oracle/bounds.h"  // BoundModel, gamma, round_bf16
#include "bufferlab/oracle/compare.h"
#include "bufferlab/oracle/mode.h"

namespace bufferlab::oracle {

// --- Sinkhorn (docs/spec/numerics.md §3 step 4)
// ------------------------------------------------------------

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

// Δ(K) = max over i, j, k, l of log(K_ik·K_jl / (K_jk·K_il)): the projective diameter.
double projective_diameter(std::span<const double> K, uint64_t hc);

// The Birkhoff–Hopf bound on max_i |ρ_i − 1| after the spec's Sinkhorn of K (docs/spec/numerics.md
// §3):
//   Δ = projective diameter of K, κ = tanh(Δ/4), ρ₀ = row sums after the first column
//   normalisation (exact), t = iters − 1. The spec's formula exp(κ^(2t)·log(max ρ₀/min ρ₀)) − 1
//   holds for eps = 0 only (`spec_bound`); with eps > 0 the normalised sums are s/(eps + s),
//   not 1, and `row_bound` follows the corrected recursion derived in mhc_sinkhorn.cpp (the
//   spec's formula when eps = 0 and u = 0).
// `unit_roundoff` u (2^-53 for the FP64 oracle itself, 2^-24 for an FP32 backend; 0 = exact
// arithmetic) adds the derived arithmetic slack: γ = γ_(hc+2)(u) per normalisation (the
// rounded sum, the eps constant and its add, the division) on every vector of sums formed,
// contracted by the later half steps; γ for the final column sums not being exactly 1; Δ widened by
// the accumulated per-entry roundings 4·(2·iters + 1)·u; plus the spec's stated 4·u outside the
// exponent when u > 0. `k_log_error` bounds |log K_backend − log K| per entry (the backend's
// softmax and logit errors): it widens Δ and log(max ρ₀ / min ρ₀) by 4·k_log_error and the
// column term by 2·k_log_error. The bound's own FP64 evaluation error is included, so with
// u = 0 it bounds exact arithmetic on the given K.
struct SinkhornBound {
  double delta = 0.0;       // projective diameter Δ(K), widened as above
  double kappa = 0.0;       // tanh(Δ/4)
  double log_rho0 = 0.0;    // log(max ρ₀ / min ρ₀)
  double log_col0 = 0.0;    // log-oscillation of the column sums after the first eps column
                            // normalisation (0 when eps = 0)
  double spec_bound = 0.0;  // the spec's formula as written, from the unwidened Δ and ρ₀
                            // (reported; valid for eps = 0 in exact arithmetic)
  double row_bound = 0.0;   // the bound on max_i |ρ_i − 1|
};
SinkhornBound sinkhorn_row_bound(std::span<const double> K, uint64_t hc, uint64_t iters, double eps,
                                 double unit_roundoff = 0.0, double k_log_error = 0.0);

// The per-entry bound of the spec's Sinkhorn evaluated with unit roundoff `unit_roundoff` from a
// K within `k_log_error` of K (|log K̂ − log K| per entry), against the exact Sinkhorn of K:
// |log Ĉ_ij − log C_ij| ≤ the returned β, for any eps ≥ 0 and any logit range (derived in
// mhc_sinkhorn_entry_bound.cpp: the scaling vectors' log errors add per normalisation, they do
// not multiply). Linear in iters (plus ~2·iters²·u from the per-entry division roundings).
// Valid while no rounded entry is subnormal: see sinkhorn_min_iterate.
double sinkhorn_entry_log_bound(uint64_t hc, uint64_t iters, double unit_roundoff,
                                double k_log_error = 0.0);
// The smallest entry of K and of every iterate of the FP64 Sinkhorn of K (the oracle's order;
// its last iterate is sinkhorn(K, hc, iters, eps)): the domain check of the entry bound.
double sinkhorn_min_iterate(std::span<const double> K, uint64_t hc, uint64_t iters, double eps);

// Column sums of a backend's FP32 comb, summed in FP64, must lie within (hc + 1)·2^-24 of 1
// (docs/spec/numerics.md §3, stated tolerance).
double col_sum_tolerance_fp32(uint64_t hc);

// --- Sinkhorn-form pre / post / head / expand ----------------------------------------------

struct MhcPreInputs {
  std::vector<float> streams;  // [rows, hc, h]
  std::vector<float> fn;       // [mix, hc·h]
  std::vector<float> scale;    // [3]
  std::vector<float> bias;     // [mix]
};
struct MhcPreOutputs {             // what a backend stored
  std::vector<float> post;         // [rows, hc]
  std::vector<float> comb;         // [rows, hc, hc]
  std::vector<uint16_t> block_in;  // bf16 [rows, h]
  MhcDiagnostics diagnostics;
};
struct MhcPreReference {
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
MhcPreReference mhc_pre(const MhcPreOp& op, const MhcPreInputs& in, Mode mode,
                        bool final_exact_column = true);

struct MhcPostInputs {
  std::vector<float> post;          // [rows, hc]
  std::vector<float> comb;          // [rows, hc, hc]; empty in the low-rank form
  std::vector<uint16_t> block_out;  // bf16 [rows, h]
  std::vector<float> streams;       // [rows, hc, h] before the op
};
// out[t, j, d] = post_j·block_out[t, d] + Σ_i comb_ij·x[t, i, d] (Sinkhorn form), or
// x[t, i, d] + post_i·block_out[t, d] (low-rank form). FP64 (both modes: nothing is stored
// below FP32).
std::vector<double> mhc_post(const MhcPostOp& op, const MhcPostInputs& in);

struct MhcHeadInputs {
  std::vector<float> streams;  // [rows, hc, h]
  std::vector<float> fn;       // [hc, hc·h]
  std::vector<float> scale;    // [1]
  std::vector<float> bias;     // [hc]
};
struct MhcHeadReference {
  std::vector<double> mix;     // [rows, hc] r·(fn·x)
  std::vector<double> pre;     // [rows, hc]
  std::vector<double> output;  // [rows, h]; BF16-rounded in faithful mode
  uint64_t nonfinite_tokens = 0;
};
MhcHeadReference mhc_head(const MhcHeadOp& op, const MhcHeadInputs& in, Mode mode);

// every stream = bf16 embedding row (exact in FP32).
std::vector<double> mhc_expand(const MhcExpandOp& op, std::span<const uint16_t> input);

// --- low-rank form (docs/spec/numerics.md §4)
// -------------------------------------------------------------

// The model weights of the low-rank form, FP32 (the split path uses them as they are; the
// slab path uses their BF16 roundings, made by slab_weights()).
struct MhcLowRankWeights {
  std::vector<float> norm_w;    // [hc, h]
  std::vector<float> w_down;    // [r, hc·h]
  std::vector<float> w_inject;  // [hc, hc·h]
  std::vector<float> w_up;      // [hc·h, r]
};
struct MhcLowRankSlabWeights {
  std::vector<uint16_t> w_down, w_inject, w_up;  // bf16, same shapes
};
MhcLowRankSlabWeights slab_weights(const MhcLowRankWeights& w);

// The inputs of one low-rank pre step: the streams and the model weights.
struct MhcLowRankInputs {
  std::vector<float> streams;  // [rows, hc, h]
  MhcLowRankWeights weights;
};

// The two execution paths of the low-rank pre step (docs/spec/numerics.md §4, docs/spec/buffers.md
// §4.7): split (T ≤ 64, FP32 scratch and weights) and slab (GEMMs on BF16 intermediates and
// weights).
enum class MhcLowRankPath { split, slab };
inline const char* to_string(MhcLowRankPath p) {
  return p == MhcLowRankPath::split ? "split" : "slab";
}

struct MhcLowRankDims {
  uint64_t rows = 0, hc = 0, h = 0, r = 0;
  double rms_eps = 1e-6;
};

// FP64 copies of host tensors (BF16 as raw bits).
std::vector<double> widen(std::span<const float> v);
std::vector<double> widen_bf16(std::span<const uint16_t> v);

// The stages of the low-rank pre step, each over d.rows tokens and fed whatever the previous
// stage STORED (FP32 on the split path, BF16 on the slab path, as FP64 values), exact FP64 and
// unrounded (a caller rounds where the path stores BF16). Sizes are checked (Error).
//   norm:     normed[t, i·h + c] = x·rsqrt(mean_c(x_i²) + eps)·(1 + w[i, c]); a token with a
//             non-finite stream value gets NaN in its whole row, counted in *nonfinite
//   down:     low[t, k] = silu((Σ_c W_down[k, c]·normed[t, c]) / hc)
//   inject:   inj_pre[t, i] = Σ_c W_inject[i, c]·normed[t, c]
//   up:       up_pre[t, c] = Σ_k W_up[c, k]·low[t, k]
//   collapse: y[t, c] = (1/hc)·Σ_i σ(up_pre[t, i·h + c])·normed[t, i·h + c]
//   post:     post[t, i] = 2σ(inj_pre[t, i] / hc)
std::vector<double> mhc_lowrank_norm(const MhcLowRankDims& d, std::span<const float> streams,
                                     std::span<const float> norm_w, uint64_t* nonfinite = nullptr);
std::vector<double> mhc_lowrank_down(const MhcLowRankDims& d, std::span<const double> normed,
                                     std::span<const double> w_down);
std::vector<double> mhc_lowrank_inject(const MhcLowRankDims& d, std::span<const double> normed,
                                       std::span<const double> w_inject);
std::vector<double> mhc_lowrank_up(const MhcLowRankDims& d, std::span<const double> low,
                                   std::span<const double> w_up);
std::vector<double> mhc_lowrank_collapse(const MhcLowRankDims& d, std::span<const double> normed,
                                         std::span<const double> up_pre);
std::vector<double> mhc_lowrank_post(const MhcLowRankDims& d, std::span<const double> inj_pre);

// The whole low-rank pre step over `rows` tokens of x [rows, hc, h]:
//   normed [rows, hc·h], low [rows, r], inj_pre [rows, hc] (W_inject·n, before /hc and σ),
//   up_pre [rows, hc·h] (W_up·low), block_in [rows, h], post [rows, hc].
// `slab_precision` = true evaluates the GEMM path's definition (BF16 weights; in faithful
// mode normed, low, inj_pre, up_pre and block_in are rounded to BF16 where the path stores
// them); false the split path's (FP32 weights; faithful rounds block_in only).
struct MhcLowRankReference {
  std::vector<double> normed, low, inj_pre, up_pre, block_in, post;
  uint64_t nonfinite_tokens = 0;
};
MhcLowRankReference hc_lowrank(uint64_t rows, uint64_t hc, uint64_t h, uint64_t r, double rms_eps,
                               std::span<const float> streams, const MhcLowRankWeights& w,
                               bool slab_precision, Mode mode);

// --- derived bounds (see mhc_bounds.cpp for each derivation) ----------------------------------
//
// Every bound is the absolute error a backend's stored value may have against the oracle fed
// the same stored inputs, for the roundoffs `bm` (bounds.h): fp32_u for FP32 math and the
// FP32 GEMVs (Sinkhorn form, split path), gemm_u for the slab path's BF16 GEMMs, exp_ulps for
// expf. Stored BF16 values add one BF16 ULP (e + ulp(|y| + e), docs/spec/numerics.md §9). The
// oracle's own FP64 error is included.

// Per-element absolute bounds of a backend's mhc_pre outputs against the oracle on the same
// stored inputs: post and block_in from the γ bound of the mix GEMV (γ_(2·hc·h+8)·r·Σ|fn||x|,
// the relative error of r included) through σ' ≤ 1/4 and σ's own rounding, plus one BF16 ULP
// (block_in); `comb_log_error` per token bounds |log K_backend − log K| from the same mix
// error through the softmax (log-softmax is 2-Lipschitz in the max norm) and its roundings,
// for the Sinkhorn class check and the row bound.
struct MhcPreBounds {
  std::vector<double> post;            // [rows, hc]
  std::vector<double> block_in;        // [rows, h]
  std::vector<double> comb_log_error;  // [rows]
  std::string formula;
};
MhcPreBounds mhc_pre_bounds(const MhcPreOp& op, const MhcPreInputs& in, const MhcPreReference& ref,
                            const BoundModel& bm = cpu_bounds());

// The Sinkhorn class check of a backend's comb C against the oracle's K (docs/spec/numerics.md §3):
// every result of the spec's normalisations is D1·(K∘E)·D2 with D diagonal and |log E| ≤ k +
// (2·iters
// + 1)·u' (k = comb_log_error of the token, u' = u/(1 − u)), so for all i, j:
//   |log(C_ij/K_ij) − log(C_i0/K_i0) − log(C_0j/K_0j) + log(C_00/K_00)| ≤ 4·(k + (2·iters + 1)·u')
// plus the FP64 evaluation of the four logs. worst_ratio: the largest |cross difference| /
// bound (≤ 1 passes; +Inf for a zero, negative or NaN entry of a finite token) at (token, i, j);
// violations: the tokens whose ratio exceeds 1. Non-finite tokens are skipped (their comb is
// checked to be NaN elsewhere).
struct SinkhornClassCheck {
  double worst_ratio = 0.0;
  uint64_t token = 0, i = 0, j = 0;
  uint64_t violations = 0;
};
SinkhornClassCheck sinkhorn_class_check(const MhcPreOp& op, std::span<const float> comb,
                                        const MhcPreReference& ref, const MhcPreBounds& bounds,
                                        const BoundModel& bm = cpu_bounds());

std::vector<double> mhc_post_bounds(const MhcPostOp& op, const MhcPostInputs& in,
                                    const BoundModel& bm = cpu_bounds());  // per element
std::vector<double> mhc_head_bounds(const MhcHeadOp& op, const MhcHeadInputs& in,
                                    const MhcHeadReference& ref,
                                    const BoundModel& bm = cpu_bounds());  // per output element
std::string mhc_post_bounds_formula();
std::string mhc_head_bounds_formula();

// Per-element bounds of one low-rank stage's stored output against its oracle fed the
// stage's stored inputs (the same spans the stage oracle gets), on `path`.
struct MhcStageBounds {
  std::vector<double> bound;
  std::string formula;
};
// normed: from the oracle's normed values and the norm weight [hc, h].
MhcStageBounds mhc_lowrank_norm_bounds(const MhcLowRankDims& d, std::span<const double> normed,
                                       std::span<const float> norm_w, MhcLowRankPath path,
                                       const BoundModel& bm = cpu_bounds());
// low [rows, r] from the stored normed and W_down (FP32 on split, BF16 values on slab).
MhcStageBounds mhc_lowrank_down_bounds(const MhcLowRankDims& d, std::span<const double> normed,
                                       std::span<const double> w_down, MhcLowRankPath path,
                                       const BoundModel& bm = cpu_bounds());
// slab: inj_pre [rows, hc] from the stored normed and W_inject.
MhcStageBounds mhc_lowrank_inject_bounds(const MhcLowRankDims& d, std::span<const double> normed,
                                         std::span<const double> w_inject,
                                         const BoundModel& bm = cpu_bounds());
// slab: up_pre [rows, hc·h] from the stored low and W_up.
MhcStageBounds mhc_lowrank_up_bounds(const MhcLowRankDims& d, std::span<const double> low,
                                     std::span<const double> w_up,
                                     const BoundModel& bm = cpu_bounds());
// split: block_in [rows, h] from the stored normed and low (W_up·low computed inside).
MhcStageBounds mhc_lowrank_split_collapse_bounds(const MhcLowRankDims& d,
                                                 std::span<const double> normed,
                                                 std::span<const double> low,
                                                 std::span<const double> w_up,
                                                 const BoundModel& bm = cpu_bounds());
// slab: block_in [rows, h] from the stored normed and up_pre.
MhcStageBounds mhc_lowrank_slab_collapse_bounds(const MhcLowRankDims& d,
                                                std::span<const double> normed,
                                                std::span<const double> up_pre,
                                                const BoundModel& bm = cpu_bounds());
// split: post [rows, hc] from the stored normed (W_inject·normed computed inside).
MhcStageBounds mhc_lowrank_split_post_bounds(const MhcLowRankDims& d,
                                             std::span<const double> normed,
                                             std::span<const double> w_inject,
                                             const BoundModel& bm = cpu_bounds());
// slab: post [rows, hc] from the stored inj_pre.
MhcStageBounds mhc_lowrank_slab_post_bounds(const MhcLowRankDims& d,
                                            std::span<const double> inj_pre,
                                            const BoundModel& bm = cpu_bounds());

// |block_in_split − block_in_slab| [rows, h] for the two paths run on the same streams and
// model weights: each path's forward error against the exact FP32-weight definition,
// propagated stage by stage through its roundings (the slab path's BF16 weights and BF16
// stores at 2^-8 relative each, its GEMM accumulation; the split path's FP32 math), plus one
// BF16 ULP for the two stores.
MhcStageBounds mhc_lowrank_path_bounds(const MhcLowRankDims& d, std::span<const float> streams,
                                       const MhcLowRankWeights& w,
                                       const BoundModel& bm = cpu_bounds());

}  // namespace bufferlab::oracle
