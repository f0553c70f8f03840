// Element-wise comparison against the oracle: the §9 metrics and the first bad element, under
// a uniform tolerance (compare.h) or per-element bounds with a mask (bounded_compare.h) — one
// comparison loop for both.
#include "bufferlab/oracle/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/bounded_compare.h"

namespace bufferlab::oracle {
namespace {

// One backend element as the rules see it.
struct Element {
  double value = 0.0;
  uint64_t bits = 0;
  bool poison = false;           // still all ones: the op never wrote it
  std::optional<uint16_t> bf16;  // set for BF16 outputs (ULP metric)
};

// BF16 rounding of an oracle value, for the ULP metric. Going through FP32 can round twice,
// which moves a result by at most one ULP exactly at a tie; the ULP figure is a report, the
// asserted bound is the |Δ| one. Out-of-range values saturate to ±Inf first (a double → float
// conversion out of range is undefined behaviour).
uint16_t saturated_bf16_of(double want) {
  if (std::isfinite(want) && std::fabs(want) > FLT_MAX) want = std::copysign(INFINITY, want);
  return f32_to_bf16_bits(static_cast<float>(want));
}

// Empty when the element agrees; otherwise why not. A NaN bound never passes.
std::string disagreement(const Element& got, double want, double bound,
                         std::optional<uint32_t> max_ulp) {
  if (got.poison) return fmt::format("unwritten (poison bits {:#x})", got.bits);
  const bool got_nan = std::isnan(got.value);
  const bool want_nan = std::isnan(want);
  if (got_nan || want_nan) return got_nan && want_nan ? "" : "NaN mismatch";
  if (std::isinf(got.value) || std::isinf(want)) return got.value == want ? "" : "Inf mismatch";
  const double diff = std::fabs(got.value - want);
  if (!(diff <= bound)) return fmt::format("|delta| {:.4g} > bound {:.4g}", diff, bound);
  if (got.bf16 && max_ulp) {
    const uint32_t ulp = bf16_ulp_distance(*got.bf16, saturated_bf16_of(want));
    if (ulp > *max_ulp) return fmt::format("{} BF16 ULP > bound {}", ulp, *max_ulp);
  }
  return "";
}

// The one comparison loop: element i is compared when mask is empty or mask[i] ≠ 0, against
// bound_of(i, want[i]); the metrics cover the compared elements.
template <class GetElement, class BoundOf>
TensorComparison compare_elements(TensorComparison c, uint64_t n, std::span<const double> want,
                                  std::span<const uint8_t> mask, GetElement get, BoundOf bound_of) {
  if (c.cols == 0 || n != want.size() || n % c.cols != 0 || (!mask.empty() && mask.size() != n))
    throw Error(
        fmt::format("compare {}: {} backend elements vs {} oracle values, {} mask "
                    "entries, in rows of {}",
                    c.name, n, want.size(), mask.size(), c.cols));
  c.rows = n / c.cols;
  double err_sq = 0.0;
  double ref_sq = 0.0;
  for (uint64_t i = 0; i < n; ++i) {
    if (!mask.empty() && mask[i] == 0) continue;
    const Element got = get(i);
    const double w = want[i];
    if (!std::isfinite(w)) ++c.nonfinite;
    if (!got.poison && std::isfinite(got.value) && std::isfinite(w)) {
      const double diff = std::fabs(got.value - w);
      c.max_abs = std::max(c.max_abs, diff);
      if (w != 0.0) c.max_rel = std::max(c.max_rel, diff / std::fabs(w));
      err_sq += diff * diff;
      ref_sq += w * w;
      if (got.bf16)
        c.max_ulp =
            std::max(c.max_ulp.value_or(0), bf16_ulp_distance(*got.bf16, saturated_bf16_of(w)));
    }
    std::string why = disagreement(got, w, bound_of(i, w), c.tol.max_ulp);
    if (why.empty()) continue;
    ++c.failures;
    if (!c.first_bad)
      c.first_bad = Mismatch{i / c.cols, i % c.cols, got.value, w, got.bits, std::move(why)};
  }
  if (err_sq > 0.0) c.nmse = ref_sq > 0.0 ? err_sq / ref_sq : INFINITY;
  return c;
}

// Tolerance form: |got − want| ≤ rel·|want| + abs for every element.
template <class GetElement>
TensorComparison compare_uniform(TensorComparison c, uint64_t n, std::span<const double> want,
                                 GetElement get) {
  const Tolerance tol = c.tol;
  return compare_elements(std::move(c), n, want, {}, get,
                          [&](uint64_t, double w) { return tol.rel * std::fabs(w) + tol.abs; });
}

// Per-element form: |got − want| ≤ bound[i] on the masked elements; tol.abs reports the
// largest finite bound compared.
template <class GetElement>
TensorComparison compare_bounded(TensorComparison c, uint64_t n, std::span<const double> want,
                                 const ElementBounds& b, GetElement get) {
  if (b.bound.size() != n)
    throw Error(
        fmt::format("compare {}: {} backend elements vs {} bounds", c.name, n, b.bound.size()));
  c.tol.formula = b.formula + " (per element)";
  double largest = 0.0;
  c = compare_elements(std::move(c), n, want, b.mask, get, [&](uint64_t i, double) {
    if (std::isfinite(b.bound[i])) largest = std::max(largest, b.bound[i]);
    return b.bound[i];
  });
  c.tol.abs = largest;
  return c;
}

// Element readers: the raw bits decide poison (all ones), BF16 outputs carry their bits for
// the ULP metric.
auto bf16_elements(std::span<const uint16_t> got) {
  return [got](uint64_t i) {
    const uint16_t b = got[i];
    return Element{bf16_bits_to_f32(b), b, b == 0xFFFFu, b};
  };
}
auto f32_elements(std::span<const float> got) {
  return [got](uint64_t i) {
    const uint32_t b = std::bit_cast<uint32_t>(got[i]);
    return Element{got[i], b, b == 0xFFFFFFFFu, std::nullopt};
  };
}

TensorComparison header(std::string name, const char* dtype, uint64_t cols, const Tolerance& tol,
                        bool asserted) {
  TensorComparison c;
  c.name = std::move(name);
  c.dtype = dtype;
  c.cols = cols;
  c.tol = tol;
  c.asserted = asserted;
  return c;
}

}  // namespace

TensorComparison compare_bf16(std::string name, std::span<const uint16_t> got,
                              std::span<const double> want, uint64_t cols, const Tolerance& tol,
                              bool asserted) {
  return compare_uniform(header(std::move(name), "bf16", cols, tol, asserted), got.size(), want,
                         bf16_elements(got));
}

TensorComparison compare_f32(std::string name, std::span<const float> got,
                             std::span<const double> want, uint64_t cols, const Tolerance& tol,
                             bool asserted) {
  return compare_uniform(header(std::move(name), "f32", cols, tol, asserted), got.size(), want,
                         f32_elements(got));
}

TensorComparison compare_f64(std::string name, std::span<const double> got,
                             std::span<const double> want, uint64_t cols, const Tolerance& tol,
                             bool asserted) {
  return compare_uniform(header(std::move(name), "f64", cols, tol, asserted), got.size(), want,
                         [&](uint64_t i) {
                           const uint64_t b = std::bit_cast<uint64_t>(got[i]);
                           return Element{got[i], b, b == ~uint64_t{0}, std::nullopt};
                         });
}

TensorComparison compare_bf16_bounded(std::string name, std::span<const uint16_t> got,
                                      std::span<const double> want, uint64_t cols,
                                      const ElementBounds& bounds, bool asserted) {
  return compare_bounded(header(std::move(name), "bf16", cols, {}, asserted), got.size(), want,
                         bounds, bf16_elements(got));
}

TensorComparison compare_f32_bounded(std::string name, std::span<const float> got,
                                     std::span<const double> want, uint64_t cols,
                                     const ElementBounds& bounds, bool asserted) {
  return compare_bounded(header(std::move(name), "f32", cols, {}, asserted), got.size(), want,
                         bounds, f32_elements(got));
}

}  // namespace bufferlab::oracle
