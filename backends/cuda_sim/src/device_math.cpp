// Device math for the simulator. The host's libm is often more accurate than the device's
// (glibc's expf is correctly rounded in practice; CUDA's may be 2 ulp off), so bounds written
// for the device would pass here by luck. Each function returns the exact result (computed in
// double, whose error is far below an FP32 ulp) moved to a float within CUDA's documented
// maximum ulp error (CUDA C++ Programming Guide, "Mathematical Functions", single precision),
// the choice a hash of (seed, function, input): the same input gives the same output, as a
// device function does, whatever the schedule.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "bufferlab/cuda_sim/device_api.h"
#include "sim_state.h"

namespace bufferlab::sim {
namespace {

// The documented bound of each function, in ulps.
int ulp_bound(MathFn fn) {
  switch (fn) {
    case MathFn::exp:
      return 2;
    case MathFn::exp2:
      return 2;
    case MathFn::expm1:
      return 1;
    case MathFn::log:
      return 1;
    case MathFn::log2:
      return 1;
    case MathFn::log1p:
      return 1;
    case MathFn::sin:
      return 2;
    case MathFn::cos:
      return 2;
    case MathFn::tanh:
      return 2;
    case MathFn::rsqrt:
      return 2;
    case MathFn::pow:
      return 4;
    case MathFn::erf:
      return 2;
  }
  return 1;
}

double exact(MathFn fn, double x, double y) {
  switch (fn) {
    case MathFn::exp:
      return std::exp(x);
    case MathFn::exp2:
      return std::exp2(x);
    case MathFn::expm1:
      return std::expm1(x);
    case MathFn::log:
      return std::log(x);
    case MathFn::log2:
      return std::log2(x);
    case MathFn::log1p:
      return std::log1p(x);
    case MathFn::sin:
      return std::sin(x);
    case MathFn::cos:
      return std::cos(x);
    case MathFn::tanh:
      return std::tanh(x);
    case MathFn::rsqrt:
      return 1.0 / std::sqrt(x);
    case MathFn::pow:
      return std::pow(x, y);
    case MathFn::erf:
      return std::erf(x);
  }
  return x;
}

uint64_t hash(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

}  // namespace

float device_math(MathFn fn, float x, float y) {
  const double e = exact(fn, x, y);
  const auto nearest = static_cast<float>(e);
  // An exactly representable result is returned exactly: CUDA documents these special values
  // (expf(±0) = 1, logf(1) = +0, cosf(0) = 1, tanhf(±0) = ±0, ...), and a kernel may rely on them.
  // A result that rounds to zero stays zero (an underflow, as the device's: softmax weights
  // far below the maximum are defined as 0).
  if (!options().perturb_math || !std::isfinite(nearest) || static_cast<double>(nearest) == e ||
      nearest == 0.0f)
    return nearest;
  // The floats f with |f − e| < bound · ulp: from the one below e, (bound − 1) steps down to
  // bound steps up. A step leaving that window is clamped back to the nearest float.
  const int bound = ulp_bound(fn);
  float below = static_cast<double>(nearest) > e ? std::nextafter(nearest, -INFINITY) : nearest;
  const uint64_t h = hash(options().math_seed,
                          (uint64_t{bits(x)} << 32 | bits(y)) * 16 + static_cast<uint64_t>(fn));
  const int step = static_cast<int>(h % static_cast<uint64_t>(2 * bound)) - (bound - 1);
  float r = below;
  for (int i = 0; i < step; ++i) r = std::nextafter(r, INFINITY);
  for (int i = 0; i > step; --i) r = std::nextafter(r, -INFINITY);
  // Keep within the bound measured in ulps of the result's binade (a step across a power of
  // two, or to an infinity, falls back to the nearest float).
  const double ulp = std::abs(static_cast<double>(std::nextafter(nearest, INFINITY)) - nearest);
  if (!std::isfinite(r) || std::abs(static_cast<double>(r) - e) >= bound * ulp) return nearest;
  // Never across zero: a device expf is never negative, a logf of x > 1 never ≤ 0 (a step
  // from the smallest subnormal could otherwise reach −0 or below, and a sqrt of it NaN).
  if (r == 0.0f || std::signbit(r) != std::signbit(nearest)) return nearest;
  return r;
}

}  // namespace bufferlab::sim
