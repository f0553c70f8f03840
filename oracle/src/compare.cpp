// Element-wise comparison against the oracle: the §9 metrics and the first bad element.
#include "bufferlab/oracle/compare.h"

#include <fmt/format.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"

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
uint16_t bf16_of(double want) {
  if (std::isfinite(want) && std::fabs(want) > FLT_MAX) want = std::copysign(INFINITY, want);
  return f32_to_bf16_bits(static_cast<float>(want));
}

// Empty when the element agrees; otherwise why not.
std::string disagreement(const Element& got, double want, const Tolerance& tol) {
  if (got.poison) return fmt::format("unwritten (poison bits {:#x})", got.bits);
  const bool got_nan = std::isnan(got.value);
  const bool want_nan = std::isnan(want);
  if (got_nan || want_nan) return got_nan && want_nan ? "" : "NaN mismatch";
  if (std::isinf(got.value) || std::isinf(want)) return got.value == want ? "" : "Inf mismatch";
  const double diff = std::fabs(got.value - want);
  const double bound = tol.rel * std::fabs(want) + tol.abs;
  if (diff > bound) return fmt::format("|delta| {:.4g} > bound {:.4g}", diff, bound);
  if (got.bf16 && tol.max_ulp) {
    const uint32_t ulp = bf16_ulp_distance(*got.bf16, bf16_of(want));
    if (ulp > *tol.max_ulp) return fmt::format("{} BF16 ULP > bound {}", ulp, *tol.max_ulp);
  }
  return "";
}

template <class GetElement>
TensorComparison compare_elements(TensorComparison c, uint64_t n, std::span<const double> want,
                                  GetElement get) {
  if (c.cols == 0 || n != want.size() || n % c.cols != 0)
    throw Error(fmt::format("compare {}: {} backend elements vs {} oracle values in rows of {}",
                            c.name, n, want.size(), c.cols));
  c.rows = n / c.cols;
  double err_sq = 0.0;
  double ref_sq = 0.0;
  for (uint64_t i = 0; i < n; ++i) {
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
        c.max_ulp = std::max(c.max_ulp.value_or(0), bf16_ulp_distance(*got.bf16, bf16_of(w)));
    }
    std::string why = disagreement(got, w, c.tol);
    if (why.empty()) continue;
    ++c.failures;
    if (!c.first_bad)
      c.first_bad = Mismatch{i / c.cols, i % c.cols, got.value, w, got.bits, std::move(why)};
  }
  if (err_sq > 0.0) c.nmse = ref_sq > 0.0 ? err_sq / ref_sq : INFINITY;
  return c;
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
  return compare_elements(header(std::move(name), "bf16", cols, tol, asserted), got.size(), want,
                          [&](uint64_t i) {
                            const uint16_t b = got[i];
                            return Element{bf16_bits_to_f32(b), b, b == 0xFFFFu, b};
                          });
}

TensorComparison compare_f32(std::string name, std::span<const float> got,
                             std::span<const double> want, uint64_t cols, const Tolerance& tol,
                             bool asserted) {
  return compare_elements(header(std::move(name), "f32", cols, tol, asserted), got.size(), want,
                          [&](uint64_t i) {
                            const uint32_t b = std::bit_cast<uint32_t>(got[i]);
                            return Element{got[i], b, b == 0xFFFFFFFFu, std::nullopt};
                          });
}

TensorComparison compare_f64(std::string name, std::span<const double> got,
                             std::span<const double> want, uint64_t cols, const Tolerance& tol,
                             bool asserted) {
  return compare_elements(header(std::move(name), "f64", cols, tol, asserted), got.size(), want,
                          [&](uint64_t i) {
                            const uint64_t b = std::bit_cast<uint64_t>(got[i]);
                            return Element{got[i], b, b == ~uint64_t{0}, std::nullopt};
                          });
}

}  // namespace bufferlab::oracle
