// FP64 oracle of the fused residual add + RMSNorm, and its derived bounds.
#include "bufferlab/oracle/rmsnorm.h"

#include <fmt/format.h>

#include <cfloat>
#include <cmath>
#include <string>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/bounds.h"
#include "oracle_common.h"

namespace bufferlab::oracle {
namespace {

// oracle_common.h's check, with the op's params() built only when it fails.
void require_op_size(const char* what, uint64_t got, uint64_t want, const FusedAddRmsNormOp& op) {
  if (got != want) require_size(op.params(), what, got, want);
}

// The BF16 value a backend stores for the sum v = a + b of two BF16 values. Rounding through
// FP64 and FP32 first is innocuous: each wider format carries at least 2p + 2 bits of the next
// (53 ≥ 2·24 + 2, 24 ≥ 2·8 + 2), so RNE_bf16(RNE_f32(RNE_f64(a + b))) = RNE_bf16(a + b)
// (Figueroa, "When is double rounding innocuous?", 1995). A sum past FLT_MAX is past the BF16
// overflow threshold too.
double stored_bf16_sum(double v) {
  if (std::isfinite(v) && std::fabs(v) > FLT_MAX) return std::copysign(INFINITY, v);
  return round_to_bf16(static_cast<float>(v));
}

}  // namespace

RmsNormReference fused_add_rmsnorm(const FusedAddRmsNormOp& op, const RmsNormInputs& in,
                                   Mode mode) {
  const uint64_t rows = op.shape().rows;
  const uint64_t width = op.shape().width;
  const uint64_t n = (Size(rows) * width).value();
  const bool add = op.variant.add_residual;
  const bool unit = op.variant.unit_weight;
  require_op_size("residual", in.residual.size(), n, op);
  if (add) require_op_size("input", in.input.size(), n, op);
  if (!unit) require_op_size("weight", in.weight.size(), width, op);

  RmsNormReference ref{std::vector<double>(n), std::vector<double>(n)};
  for (uint64_t t = 0; t < rows; ++t) {
    double* r = ref.residual.data() + t * width;
    double sum_sq = 0.0;
    for (uint64_t j = 0; j < width; ++j) {
      double v = bf16_value(in.residual[t * width + j]);
      if (add) v += bf16_value(in.input[t * width + j]);
      if (add && mode == Mode::faithful) v = stored_bf16_sum(v);
      r[j] = v;
      sum_sq += v * v;
    }
    // A non-finite row normalises to NaN everywhere (the defined result, rmsnorm.h).
    const double inv =
        std::isfinite(sum_sq) ? 1.0 / std::sqrt(sum_sq / static_cast<double>(width) + op.eps) : NAN;
    for (uint64_t j = 0; j < width; ++j) {
      const double w = unit ? 0.0 : bf16_value(in.weight[j]);
      ref.output[t * width + j] = r[j] * inv * (1.0 + w);
    }
  }
  return ref;
}

RmsNormReference norm_of_stored_residual(const FusedAddRmsNormOp& op,
                                         const std::vector<uint16_t>& stored_residual,
                                         const std::vector<uint16_t>& weight) {
  FusedAddRmsNormOp norm_only = op;
  norm_only.variant.add_residual = false;
  return fused_add_rmsnorm(norm_only, RmsNormInputs{{}, stored_residual, weight}, Mode::faithful);
}

// Derivation (Higham, "Accuracy and Stability of Numerical Algorithms", §3.1; u = 2^-24 is the
// FP32 unit roundoff, γ_k = k·u / (1 − k·u), n = width):
//
// residual — the backends add two BF16 values in FP32 and round the sum to BF16. FP32 carries
//   24 ≥ 2·8 + 2 significant bits, so this double rounding is innocuous (Figueroa 1995):
//   RNE_bf16(RNE_f32(a + b)) = RNE_bf16(a + b), which is what the faithful oracle stores.
//   Bound: exact (0 ULP). Without the add the residual must come back unchanged: exact too.
//
// norm — checked on the backend's own STORED residual r, so no residual error enters. The FP32
//   value ŷ = fl(fl(r·inv)·fl(1 + w)), inv = rsqrt(fl(fl(Σr²)/n) + fl(eps)), equals y times a
//   product of at most k = n + 9 factors (1 + δ)^(±1), |δ| ≤ u (Higham Lemma 3.1):
//     r² is exact (a BF16 square has 16 significant bits): 0;
//     Σ of n positive terms in any order — sequential, SIMD lanes, warp and block trees: every
//       path holds at most n − 1 additions: n − 1;
//     / n (exact in FP32 for n < 2^24): 1;   eps → FP32: 1;   + eps (both positive): 1;
//     rsqrt: a (1 + θ) perturbation of its argument becomes (1 + θ)^(-1/2), between 1 and
//       (1 + θ)^(-1), so it counts no more than in the argument; the CPU's 1/sqrt rounds twice,
//       CUDA's rsqrtf is within 2 ulp = 4u: 4;
//     r·inv: 1;   1 + w: 1;   ·(1 + w): 1.
//   ⇒ |ŷ − y| ≤ γ_(n+9)·|y|: the bound of the FP32 output (moe_router_in_f32).
//   The BF16 store adds |o − ŷ| ≤ 2^-8·|ŷ| ≤ 2^-8·(1 + γ_(n+9))·|y| (round to nearest keeps 8
//   significant bits: half a BF16 ULP, at most one ULP as §9 allows): the bound of norm_output
//   is γ_(n+9) + 2^-8·(1 + γ_(n+9)), relative.
//   Absolute term FLT_MIN = 2^-126: below the FP32 normal range a rounding loses up to half a
//   subnormal spacing absolutely, which the relative model does not cover.
//   Domain: Σr² < FLT_MAX (FP32 overflow makes the row NaN by the non-finite rule while FP64
//   stays finite) and eps ≥ FLT_MIN (eps dominates the underflow of tiny squares).
RmsNormTolerances fused_add_rmsnorm_tolerances(const FusedAddRmsNormOp& op) {
  constexpr double u = kFp32UnitRoundoff;
  constexpr double bf16_half_ulp = kBf16UnitRoundoff;
  const double k = static_cast<double>(op.shape().width) + 9.0;
  RmsNormTolerances t;
  t.f32_rel = k * u / (1.0 - k * u);
  t.residual.max_ulp = 0;
  t.residual.formula = op.variant.add_residual
                           ? "exact: RNE_bf16(RNE_f32(a+b)) = RNE_bf16(a+b) (24 >= 2*8+2 bits)"
                           : "exact: residual read only, unchanged";
  t.output_f32.rel = t.f32_rel;
  t.output_f32.abs = FLT_MIN;
  t.output_f32.formula = fmt::format(
      "gamma_(n+9) = {:.4g} (n = width = {}, u = 2^-24) + abs 2^-126", t.f32_rel, op.shape().width);
  t.output.rel = t.f32_rel + bf16_half_ulp * (1.0 + t.f32_rel);
  t.output.abs = FLT_MIN;
  t.output.formula = fmt::format(
      "gamma_(n+9) + 2^-8*(1 + gamma_(n+9)) = {:.4g} (FP32 norm + BF16 store) + abs 2^-126",
      t.output.rel);
  return t;
}

}  // namespace bufferlab::oracle
