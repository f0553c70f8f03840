// The shared bound helpers of bounds.h: γ_n, the BF16 spacing, the BF16 rounding from FP64
// and the bound of a BF16 store.
#include "bufferlab/oracle/bounds.h"

#include <algorithm>
#include <cmath>

namespace bufferlab::oracle {

double gamma(double n, double u) {
  const double nu = n * u;
  return nu >= 1.0 ? INFINITY : nu / (1.0 - nu);
}

double bf16_ulp_at(double v) {
  const double a = std::fabs(v);
  if (!std::isfinite(a)) return INFINITY;
  if (a < kFp32MinNormal) return 0x1p-133;
  return std::ldexp(1.0, std::ilogb(a) - 7);
}

double round_bf16(double v) {
  if (!std::isfinite(v) || v == 0.0) return v;
  const double a = std::fabs(v);
  const double q = std::ldexp(1.0, std::max(std::ilogb(a), -126) - 7);
  const double r = std::nearbyint(a / q) * q;  // a / q is exact; ties to even
  return std::copysign(r >= 0x1p128 ? INFINITY : r, v);
}

double stored_bf16(double y, double e) {
  if (!std::isfinite(e) || !std::isfinite(y)) return std::isnan(y) ? 0.0 : INFINITY;
  return e + bf16_ulp_at(std::fabs(y) + e);
}

}  // namespace bufferlab::oracle
