// Element-wise comparison of one backend output tensor against the oracle's FP64 values, with
// the agreement metrics of docs/spec/numerics.md §9: max |Δ|, max relative, NMSE = Σ(a−b)²/Σb²,
// ULP distance for BF16 outputs, and the first element outside the op's derived bound.
//
// Rules every comparison applies, whatever the tolerance:
//   - an element still holding the poison pattern (all bits set: the arena is filled with
//     kPoisonByte before the op) was never written and fails;
//   - NaN must meet NaN: a NaN on one side only fails;
//   - ±Inf must meet the same ±Inf; an infinity against a finite value fails.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace bufferlab::oracle {

// |got − want| ≤ rel·|want| + abs, per element. For BF16 outputs max_ulp, when set, also
// bounds the ULP distance to the BF16 rounding of the oracle's value. The bound is derived
// next to each op (never tuned); `formula` says how, for the report.
struct Tolerance {
  double rel = 0.0;
  double abs = 0.0;
  std::optional<uint32_t> max_ulp;
  std::string formula;
};

// The first element that broke the rules, with its coordinates in a [rows, cols] view.
struct Mismatch {
  uint64_t row = 0;  // token
  uint64_t col = 0;  // hidden dimension
  double got = 0.0;
  double want = 0.0;
  uint64_t got_bits = 0;  // raw bits of the backend element
  std::string reason;     // "unwritten (poison)", "NaN mismatch", "|Δ| 0.1 > bound 0.004", ...
};

struct TensorComparison {
  std::string name;   // the backend tensor, e.g. "norm_output"
  std::string dtype;  // "bf16", "f32", "f64"
  uint64_t rows = 0;
  uint64_t cols = 0;
  bool asserted = true;  // false: reported only (exact-vs-faithful differences)
  Tolerance tol;

  double max_abs = 0.0;  // over pairs finite on both sides
  double max_rel = 0.0;  // |Δ| / |want| over pairs with want ≠ 0
  double nmse = 0.0;     // Σ(a−b)² / Σb² over finite pairs (0 when both sums are 0)
  std::optional<uint32_t> max_ulp;  // BF16 outputs: vs the BF16 rounding of the oracle value
  uint64_t nonfinite = 0;           // elements where the oracle value is NaN or ±Inf
  uint64_t failures = 0;            // elements breaking the rules or the tolerance
  std::optional<Mismatch> first_bad;

  bool passed() const { return !asserted || failures == 0; }
};

// `got` and `want` hold rows·cols elements in row-major order (cols > 0); a size mismatch is
// an Error. `asserted` = false still counts failures but never fails the report.
TensorComparison compare_bf16(std::string name, std::span<const uint16_t> got,
                              std::span<const double> want, uint64_t cols, const Tolerance& tol,
                              bool asserted = true);
TensorComparison compare_f32(std::string name, std::span<const float> got,
                             std::span<const double> want, uint64_t cols, const Tolerance& tol,
                             bool asserted = true);
TensorComparison compare_f64(std::string name, std::span<const double> got,
                             std::span<const double> want, uint64_t cols, const Tolerance& tol,
                             bool asserted = true);

}  // namespace bufferlab::oracle
