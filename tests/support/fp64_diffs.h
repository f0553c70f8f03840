// The largest magnitude of an FP64 array and the largest elementwise distance of two, for the
// oracle unit tests' FP64 identities (tests/unit/test_oracle_{gdn,mamba2}.cpp): a size mismatch
// is a test failure and the distance covers the common prefix.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace bufferlab::fp64_diffs {

inline double max_abs(const std::vector<double>& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

inline double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

}  // namespace bufferlab::fp64_diffs
