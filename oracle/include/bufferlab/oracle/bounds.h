// The shared helpers every derived bound of the oracle is written with (docs/spec/numerics.md §9):
// the unit roundoffs, γ_n, the BF16 spacing and rounding, the roundoffs of one judged backend
// (BoundModel) and THE underflow rule below. Every judge and every *_bounds.cpp includes this
// header; no oracle file keeps its own copy of these constants.
//
// Notation (Higham, "Accuracy and Stability of Numerical Algorithms", §2.1, §3.1): u is the
// unit roundoff, γ_n = n·u/(1 − n·u); a value computed with n roundings lies within γ_n
// relative of the exact one — for results in the NORMAL range only.
//
// The underflow rule (one rule for every bound). With gradual underflow (no backend flushes
// to zero: the CPU runs IEEE, the CUDA kernels use no fast-math) one FP32 rounding obeys
//   fl(x ∘ y) = (x ∘ y)·(1 + δ) + η,   |δ| ≤ u,   |η| ≤ 2^-150,   δ·η = 0
// (Higham (2.8)): a result below 2^-126 is rounded to a multiple of the subnormal step 2^-149,
// an ABSOLUTE error of up to half a step, 2^-150, which may be any multiple of u·|x| — the
// relative model alone claims 0 for a result that underflows to 0 and 1e-46 for a result of
// 7e-41 that FP32 cannot hold closer than 7e-46. So the error of one rounding is
// max(u·|x|, 2^-150), and a derived bound for a value computed with n FP32 roundings is its
// relative bound plus n·2^-150 (each rounding contributes one or the other; the sum covers
// every mix), each 2^-150 multiplied by the largest factor the rounded intermediate is later
// multiplied by (1 where later steps only add, or scale by factors ≤ 1). n counts products,
// quotients, square roots, elementary functions (an expf / logf within k ULPs errs by k
// subnormal steps = 2k·2^-150 there) and FMAs (one rounding each); an addition or subtraction
// whose result is subnormal is exact (η = 0) and is not counted. That floor is the only
// absolute term the rule adds: nothing is loosened beyond it. BF16 stores: the same holds
// with half the BF16 subnormal step 2^-134, already inside one BF16 ULP (bf16_ulp_at is
// 2^-133 below 2^-126), so the "+ one BF16 ULP per store" of docs/spec/numerics.md §9 covers it. A
// relative check (a log or a ratio of a stored value, e.g. the Sinkhorn cross ratios) cannot hold
// for a subnormal value at all: such a check skips the values fp32_subnormal() marks and judges
// them by an absolute check instead.
#pragma once

#include <cmath>

namespace bufferlab::oracle {

// Unit roundoffs. FP32 dot products (docs/spec/numerics.md §2): round-to-nearest on the CPU; device
// GEMMs accumulate on tensor cores, which do not round to nearest. FP32 element-wise math rounds to
// nearest on every backend (kUnitRoundoffCpu). FP64: the oracle's own arithmetic.
inline constexpr double kUnitRoundoffCpu = 0x1p-24;
inline constexpr double kUnitRoundoffDeviceGemm = 0x1p-23;
inline constexpr double kFp32UnitRoundoff = 0x1p-24;
inline constexpr double kFp64UnitRoundoff = 0x1p-53;
inline constexpr double kBf16UnitRoundoff = 0x1p-8;  // 8 significant bits

// The underflow rule (file comment): half the FP32 subnormal step 2^-149, the absolute error
// of one FP32 rounding whose result is subnormal; FP32's smallest normal.
inline constexpr double kFp32UnderflowAbs = 0x1p-150;
inline constexpr double kFp32MinNormal = 0x1p-126;
// Half the BF16 subnormal step 2^-133 (inside one BF16 ULP, file comment).
inline constexpr double kBf16UnderflowAbs = 0x1p-134;
// The per-operation underflow term the MoE, mHC and Mamba-2 bounds were derived with: one
// subnormal rounding, doubled (2·2^-150), kept as derived.
inline constexpr double kUnderflowPerOp = 2.0 * kFp32UnderflowAbs;

// The absolute floor of n FP32 roundings (file comment): n·2^-150.
inline double fp32_underflow(double roundings) { return roundings * kFp32UnderflowAbs; }
// A bound for a value computed with `roundings` FP32 roundings whose relative-model bound is
// `rel_bound`: rel_bound + roundings·2^-150 (one rounding: max(u·|x|, 2^-150) ≤ the sum).
inline double fp32_bound(double rel_bound, double roundings) {
  return rel_bound + fp32_underflow(roundings);
}
// True when an FP32 value is subnormal (or zero): no relative bound holds for it.
inline bool fp32_subnormal(double v) { return std::fabs(v) < kFp32MinNormal; }

// The roundoffs a bound is derived with. gemm_u: the FP32 accumulation of the BF16 GEMMs
// (expert GEMMs, GemmOp, LM head): kUnitRoundoffCpu on the CPU, kUnitRoundoffDeviceGemm on
// a device. fp32_u: element-wise FP32 math (SwiGLU, combine, epilogues), round to nearest on
// every backend. exp_ulps: the error of the FP32 exp inside silu, in FP32 ULPs (glibc expf
// < 1, CUDA expf ≤ 2). trig_ulps: the error of the FP32 cosf / sinf of RoPE
// (docs/spec/attention.md §2), in FP32 ULPs of the correctly rounded result: glibc's table of
// known maximum errors lists 1 for float cos and sin on x86_64, the CUDA Programming Guide 2
// (full range) for cosf and sinf; §2 has every bound use the larger of the two, on every backend.
struct BoundModel {
  double gemm_u = kUnitRoundoffCpu;
  double fp32_u = kUnitRoundoffCpu;
  double exp_ulps = 2.0;
  double trig_ulps = 2.0;
};
inline BoundModel cpu_bounds() { return {}; }
inline BoundModel device_bounds() { return {kUnitRoundoffDeviceGemm, kUnitRoundoffCpu, 2.0}; }

// γ_n = n·u / (1 − n·u); +Inf when n·u ≥ 1.
double gamma(double n, double u);
// The spacing of BF16 numbers at magnitude |v| (2^(e−7) for 2^e ≤ |v| < 2^(e+1), 2^-133 in
// the subnormal range): one BF16 ULP of a value of that size.
double bf16_ulp_at(double v);
// Round to nearest even BF16 from FP64 (no double rounding through FP32); ±Inf past the
// BF16 overflow threshold, NaN stays NaN.
double round_bf16(double v);
// A BF16 store: |bf16(ŷ) − bf16(y)| ≤ e + ulp(|y| + e) for |ŷ − y| ≤ e; +Inf when e or y is
// not finite, 0 for a NaN y (NaN must meet NaN; the bound is not used).
double stored_bf16(double y, double e);

}  // namespace bufferlab::oracle
