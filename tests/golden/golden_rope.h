// The RoPE tables' golden check shared by test_golden_rope.cpp (rope_table on the golden
// parameters) and test_golden_rope_config.cpp (rope_table on loaded configs): inv_freq within
// 1 FP32 ulp of transformers' float64 formulas (the derivation is in test_golden_rope.cpp).
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

#include "bufferlab/core/rope.h"
#include "golden_case.h"

namespace bufferlab::golden {

// The FP32 spacing at |v|: one ulp.
inline double f32_ulp(double v) {
  const float f = std::fabs(static_cast<float>(v));
  return static_cast<double>(std::nextafter(f, INFINITY) - f);
}

// Entries of `t` outside 1 FP32 ulp of the reference (a length mismatch counts every entry).
inline BoundedCheck judge_rope_table(const GoldenCase& g, const RopeTable& t,
                                     const std::string& who) {
  BoundedCheck c(fmt::format("{} {} inv_freq vs transformers (1 FP32 ulp)", who, g.name));
  const std::vector<double>& want = g.values("inv_freq");
  c.require(t.inv_freq.size() == want.size(),
            fmt::format("{} entries against {}", t.inv_freq.size(), want.size()));
  for (size_t i = 0; i < want.size() && i < t.inv_freq.size(); ++i)
    c.add(t.inv_freq[i], want[i], f32_ulp(want[i]), fmt::format("i = {}", i));
  return c;
}

}  // namespace bufferlab::golden
