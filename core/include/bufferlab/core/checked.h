// Checked 64-bit size arithmetic: every byte count in BufferLab is computed through these
// helpers, so an overflow becomes a bufferlab::Error naming what was being computed instead
// of a silently wrapped size.
#pragma once

#include <cstdint>
#include <string>

#include "bufferlab/core/error.h"

namespace bufferlab {

// Thrown (as an Error) by Size arithmetic; callers that know the field name catch it and
// rethrow with the field (see BufferSizes::from_config).
class OverflowError : public Error {
 public:
  explicit OverflowError(const std::string& what) : Error(what) {}
};

// A uint64_t whose + and * throw OverflowError instead of wrapping. Implicitly constructible
// from unsigned integers so formulas read like the spec: Size(m) * h * 2.
class Size {
 public:
  constexpr Size() = default;
  constexpr Size(uint64_t v) : v_(v) {}  // NOLINT(google-explicit-constructor): by design
  constexpr uint64_t value() const { return v_; }

  friend Size operator+(Size a, Size b) {
    uint64_t r = 0;
    if (__builtin_add_overflow(a.v_, b.v_, &r))
      throw OverflowError("64-bit overflow in " + std::to_string(a.v_) + " + " +
                          std::to_string(b.v_));
    return Size(r);
  }
  friend Size operator*(Size a, Size b) {
    uint64_t r = 0;
    if (__builtin_mul_overflow(a.v_, b.v_, &r))
      throw OverflowError("64-bit overflow in " + std::to_string(a.v_) + " * " +
                          std::to_string(b.v_));
    return Size(r);
  }
  Size& operator+=(Size b) { return *this = *this + b; }
  friend constexpr bool operator==(Size a, Size b) = default;
  friend constexpr auto operator<=>(Size a, Size b) = default;

 private:
  uint64_t v_ = 0;
};

// a·b as a plain uint64_t, checked: an extent product that overflows is an OverflowError,
// never a wrapped size (the one copy the ops' bind() and the oracle use).
inline uint64_t mul(uint64_t a, uint64_t b) { return (Size(a) * b).value(); }

// ceil(a / b) for b > 0, never overflowing.
constexpr uint64_t cdiv(uint64_t a, uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// a rounded up to a multiple of b (b > 0), checked.
inline Size align_up(Size a, uint64_t b) { return Size(cdiv(a.value(), b)) * b; }
inline Size ceil16(Size a) { return align_up(a, 16); }
inline Size ceil256(Size a) { return align_up(a, 256); }

inline Size max(Size a, Size b) { return a.value() >= b.value() ? a : b; }
template <class... Rest>
Size max(Size a, Size b, Size c, Rest... rest) {
  return max(max(a, b), c, rest...);
}
inline Size min(Size a, Size b) { return a.value() <= b.value() ? a : b; }

}  // namespace bufferlab
