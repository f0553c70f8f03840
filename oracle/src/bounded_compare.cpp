// Comparison under per-element bounds and a mask, with the rules of compare.h.
#include "bufferlab/oracle/bounded_compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"

namespace bufferlab::oracle {
namespace {

struct Element {
  double value = 0.0;
  uint64_t bits = 0;
  bool poison = false;
  std::optional<uint16_t> bf16;
};

uint16_t bf16_of(double want) {
  if (std::isfinite(want) && std::fabs(want) > FLT_MAX) want = std::copysign(INFINITY, want);
  return f32_to_bf16_bits(static_cast<float>(want));
}

std::string disagreement(const Element& got, double want, double bound) {
  if (got.poison) return fmt::format("unwritten (poison bits {:#x})", got.bits);
  const bool got_nan = std::isnan(got.value);
  const bool want_nan = std::isnan(want);
  if (got_nan || want_nan) return got_nan && want_nan ? "" : "NaN mismatch";
  if (std::isinf(got.value) || std::isinf(want)) return got.value == want ? "" : "Inf mismatch";
  const double diff = std::fabs(got.value - want);
  if (!(diff <= bound)) return fmt::format("|delta| {:.4g} > bound {:.4g}", diff, bound);
  return "";
}

template <class GetElement>
TensorComparison compare_bounded(TensorComparison c, uint64_t n, std::span<const double> want,
                                 const ElementBounds& b, GetElement get) {
  if (c.cols == 0 || n != want.size() || n != b.bound.size() || n % c.cols != 0 ||
      (!b.mask.empty() && b.mask.size() != n))
    throw Error(fmt::format(
        "compare {}: {} backend elements vs {} oracle values, {} bounds, {} mask in rows of {}",
        c.name, n, want.size(), b.bound.size(), b.mask.size(), c.cols));
  c.rows = n / c.cols;
  c.tol.formula = b.formula + " (per element)";
  double err_sq = 0.0, ref_sq = 0.0;
  for (uint64_t i = 0; i < n; ++i) {
    if (!b.mask.empty() && b.mask[i] == 0) continue;
    const Element got = get(i);
    const double w = want[i];
    if (std::isfinite(b.bound[i])) c.tol.abs = std::max(c.tol.abs, b.bound[i]);
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
    std::string why = disagreement(got, w, b.bound[i]);
    if (why.empty()) continue;
    ++c.failures;
    if (!c.first_bad)
      c.first_bad = Mismatch{i / c.cols, i % c.cols, got.value, w, got.bits, std::move(why)};
  }
  if (err_sq > 0.0) c.nmse = ref_sq > 0.0 ? err_sq / ref_sq : INFINITY;
  return c;
}

TensorComparison header(std::string name, const char* dtype, uint64_t cols, bool asserted) {
  TensorComparison c;
  c.name = std::move(name);
  c.dtype = dtype;
  c.cols = cols;
  c.asserted = asserted;
  return c;
}

}  // namespace

TensorComparison compare_bf16_bounded(std::string name, std::span<const uint16_t> got,
                                      std::span<const double> want, uint64_t cols,
                                      const ElementBounds& bounds, bool asserted) {
  return compare_bounded(header(std::move(name), "bf16", cols, asserted), got.size(), want, bounds,
                         [&](uint64_t i) {
                           const uint16_t b = got[i];
                           return Element{bf16_bits_to_f32(b), b, b == 0xFFFFu, b};
                         });
}

TensorComparison compare_f32_bounded(std::string name, std::span<const float> got,
                                     std::span<const double> want, uint64_t cols,
                                     const ElementBounds& bounds, bool asserted) {
  return compare_bounded(header(std::move(name), "f32", cols, asserted), got.size(), want, bounds,
                         [&](uint64_t i) {
                           const uint32_t b = std::bit_cast<uint32_t>(got[i]);
                           return Element{got[i], b, b == 0xFFFFFFFFu, std::nullopt};
                         });
}

}  // namespace bufferlab::oracle
