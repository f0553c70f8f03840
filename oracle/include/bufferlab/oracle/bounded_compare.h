// Comparison of a backend tensor against the oracle's FP64 values under a PER-ELEMENT absolute
// bound (an op whose forward-error bound depends on each element's own Σ|x·w|), restricted to
// the elements a mask selects (the ones the op writes). Produces the TensorComparison of
// compare.h, with its metrics over the compared elements and the same rules:
//   - an element still holding the poison pattern (all bits set) was never written and fails;
//   - NaN must meet NaN: a NaN on one side only fails;
//   - ±Inf must meet the same ±Inf; an infinity against a finite value fails;
//   - otherwise |got − want| ≤ bound[i] (a NaN bound never passes).
// Elements outside the mask are neither compared nor counted.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "bufferlab/oracle/compare.h"

namespace bufferlab::oracle {

struct ElementBounds {
  std::span<const double> bound;  // one per element
  std::span<const uint8_t> mask;  // empty: every element; else nonzero = compare
  std::string formula;            // how the bounds were derived, for the report
};

// `got`, `want`, `bound` (and a non-empty mask) hold rows·cols elements; a size mismatch is
// an Error. tol.abs of the result is the largest bound over the compared elements.
TensorComparison compare_bf16_bounded(std::string name, std::span<const uint16_t> got,
                                      std::span<const double> want, uint64_t cols,
                                      const ElementBounds& bounds, bool asserted = true);
TensorComparison compare_f32_bounded(std::string name, std::span<const float> got,
                                     std::span<const double> want, uint64_t cols,
                                     const ElementBounds& bounds, bool asserted = true);

}  // namespace bufferlab::oracle
