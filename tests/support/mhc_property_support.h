// What the mHC property files (tests/property/test_mhc_{sinkhorn,lowrank}_properties.cpp and the
// full-range run) share: their findings (findings.h), a case of one op kind drawn and logged
// (optionally with a planted non-finite value), the tokens a case plants non-finite values in and
// the others, BF16 NaN, and the FP32 value just past a bound (a planted error the judge must
// catch).
#pragma once

#include <rapidcheck.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "bufferlab/oracle/mhc_inputs.h"
#include "bufferlab/properties/mhc_generators.h"
#include "contains.h"
#include "findings.h"

namespace bufferlab::testing::mhc {

// contains.h and findings.h, named here too for the files that use this namespace.
using testing::contains;
using testing::Finding;
using testing::Findings;
using testing::has_finding;
using testing::log_findings;

// One case of `kind`, logged.
inline gen::MhcCase draw(gen::MhcOpKind kind, gen::MhcRanges ranges = gen::ci_mhc_ranges()) {
  gen::MhcCase c = *gen::hc_case(kind, ranges);
  RC_LOG() << c.describe() << "\n";
  return c;
}

// One case of `kind` with at least one non-finite stream value (one is planted if the draw
// planted none).
inline gen::MhcCase draw_nonfinite(gen::MhcOpKind kind,
                                   gen::MhcRanges ranges = gen::ci_mhc_ranges()) {
  using U = uint64_t;
  gen::MhcCase c = draw(kind, ranges);
  if (c.profile.nonfinite.empty())
    c.profile.nonfinite.push_back({*rc::gen::inRange<U>(0, c.rows), *rc::gen::inRange<U>(0, c.hc()),
                                   *rc::gen::inRange<U>(0, c.h()),
                                   *rc::gen::element<double>(NAN, INFINITY, -INFINITY)});
  return c;
}

// The tokens the profile plants a non-finite value in.
inline std::set<uint64_t> bad_tokens(const oracle::MhcInputProfile& p) {
  std::set<uint64_t> s;
  for (const auto& b : p.nonfinite) s.insert(b.token);
  return s;
}

// The case's other tokens, in order.
inline std::vector<uint64_t> finite_tokens(const gen::MhcCase& c) {
  const std::set<uint64_t> bad = bad_tokens(c.profile);
  std::vector<uint64_t> t;
  for (uint64_t k = 0; k < c.rows; ++k)
    if (!bad.count(k)) t.push_back(k);
  return t;
}

inline bool bf16_is_nan(uint16_t b) { return (b & 0x7FFFu) > 0x7F80u; }

// An FP32 value more than `bound` above `want` (a planted error just past the bound).
inline float beyond_f32(double want, double bound) {
  float v = static_cast<float>(want + bound);
  while (!(static_cast<double>(v) - want > bound)) v = std::nextafter(v, INFINITY);
  return std::nextafter(v, INFINITY);
}

}  // namespace bufferlab::testing::mhc
